//! A progress bar for long runs, on standard error: the model time run so
//! far against the whole, and the events run. It draws only on a terminal,
//! so `--json` output, pipes and tests see nothing of it.

use aurora_time::{Duration, Instant};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How many steps at most a run is cut into to update its bar: enough for
/// a smooth bar, few enough that a long run in virtual time pays nothing
/// for them.
const STEPS: i64 = 1000;

/// The shortest step, in model time.
const MIN_STEP: Duration = Duration::from_millis(100);

/// The bar of one run.
pub(crate) struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for a run of `total` model time, drawn if `show`.
    pub(crate) fn new(total: Duration, show: bool) -> Self {
        let target = match show {
            true => ProgressDrawTarget::stderr(),
            false => ProgressDrawTarget::hidden(),
        };
        let ms = u64::try_from(total.as_nanos() / 1_000_000).unwrap_or(0);
        let bar = ProgressBar::with_draw_target(Some(ms.max(1)), target);
        let style = ProgressStyle::with_template(
            "{elapsed} [{bar:30}] {pos}/{len} ms of model time, {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        Progress { bar }
    }

    /// How long a step of a run of `total` model time is: at least
    /// [`MIN_STEP`], and at most [`STEPS`] steps in all.
    pub(crate) fn step(total: Duration) -> Duration {
        Duration::from_nanos((total.as_nanos() / STEPS).max(MIN_STEP.as_nanos()))
    }

    /// The run has reached model time `now`, having run `events` events.
    pub(crate) fn at(&self, now: Instant, events: u64) {
        self.bar
            .set_position(u64::try_from(now.as_nanos() / 1_000_000).unwrap_or(0));
        self.bar.set_message(format!("{events} events"));
    }

    /// The run is over: the bar goes.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
