//! Checks both halves of a file use: names, durations and counts, and the
//! UDP addresses of links and cables.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Range;

use aurora_time::Duration;

use super::Ctx;
use crate::{parse_duration, MAX_DELAY, MAX_INTERVAL, MAX_START};

/// A name safe in a file name and a link end: letters, digits, '-', '_'
/// and '.', not starting with '.'.
pub(crate) fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
}

/// An optional duration field `what` (`v`), its default when left out,
/// else read and checked against `range`.
pub(super) fn duration_or(
    c: &mut Ctx,
    span: Range<usize>,
    what: &str,
    v: &Option<String>,
    default: Duration,
    range: DurationRange,
) -> Option<Duration> {
    match v {
        None => Some(default),
        Some(s) => duration_in(c, span, what, s, range),
    }
}

/// Checks the name of an entry (`me` says which, as `tcp "t1"`) declared
/// at `span` on `line`: plain, and not given to another entry of its
/// kind before (`names`, each with its line). Says what is wrong there.
pub(super) fn entry_name<'f>(
    c: &mut Ctx,
    span: Range<usize>,
    me: &str,
    name: &'f str,
    line: usize,
    names: &mut BTreeMap<&'f str, usize>,
) {
    if !plain_name(name) {
        c.at(
            span,
            format!("{me}: a name must be letters, digits, '-', '_' or '.', not starting with '.'"),
        );
    } else if let Some(first) = names.get(name) {
        c.at(
            span,
            format!("{me} is defined twice (first at line {first}); give each its own name"),
        );
    } else {
        names.insert(name, line);
    }
}

/// The names one set of things in a file has taken (its nodes, or its
/// PVCs): where a name given twice is found. Each name keeps what took
/// it and where.
pub(super) struct Names {
    /// What the names are, in problems: "name", "PVC name".
    label: &'static str,
    /// Each name: what took it (as "switch") and the byte where.
    taken: BTreeMap<String, (&'static str, usize)>,
}

impl Names {
    pub(super) fn new(label: &'static str) -> Self {
        Names {
            label,
            taken: BTreeMap::new(),
        }
    }

    /// Takes `name` for a `what` declared at `span`. If it is taken
    /// already, says so there and returns false (the first keeps it).
    pub(super) fn take(
        &mut self,
        c: &mut Ctx,
        span: Range<usize>,
        name: &str,
        what: &'static str,
    ) -> bool {
        if self.taken.contains_key(name) {
            c.at(span, format!("the {} \"{name}\" is used twice", self.label));
            return false;
        }
        self.taken.insert(name.to_string(), (what, span.start));
        true
    }

    /// True if some item has taken `name`.
    pub(super) fn contains(&self, name: &str) -> bool {
        self.taken.contains_key(name)
    }

    /// What took `name`, and the byte where it did.
    pub(super) fn owner(&self, name: &str) -> Option<(&'static str, usize)> {
        self.taken.get(name).copied()
    }
}

/// A range a duration must lie in: least, most, and the two written out.
pub(super) type DurationRange = (Duration, Duration, &'static str);

/// Range of a link's delay.
pub(super) const DELAY_RANGE: DurationRange = (Duration::ZERO, MAX_DELAY, "0 to 10 s");
/// Range of an interval.
pub(super) const INTERVAL_RANGE: DurationRange =
    (Duration::from_nanos(1), MAX_INTERVAL, "1 ns to 1 hour");
/// Range of a start.
pub(super) const START_RANGE: DurationRange = (Duration::ZERO, MAX_START, "0 to 24 hours");

/// Reads duration `s` of field `what` and checks it lies from `lo` to
/// `hi` (written `range`); `None` when not (reported at `span`).
pub(super) fn duration_in(
    c: &mut Ctx,
    span: Range<usize>,
    what: &str,
    s: &str,
    (lo, hi, range): DurationRange,
) -> Option<Duration> {
    match parse_duration(s) {
        Ok(d) if d >= lo && d <= hi => Some(d),
        Ok(Duration::ZERO) => {
            c.at(span, format!("{what} must be more than 0"));
            None
        }
        Ok(_) => {
            c.at(span, format!("{what} \"{s}\" is outside {range}"));
            None
        }
        Err(m) => {
            c.at(span, format!("{what}: {m}"));
            None
        }
    }
}

/// [`duration_in`] for a field that may be left out, meaning 0.
pub(super) fn duration_or_zero(
    c: &mut Ctx,
    span: Range<usize>,
    what: &str,
    s: &Option<String>,
    range: DurationRange,
) -> Option<Duration> {
    match s {
        None => Some(Duration::ZERO),
        Some(s) => duration_in(c, span, what, s, range),
    }
}

/// The interval and the start (0 if not given) of traffic `what` (a flow
/// or ping), each `None` if wrong (reported at `span`).
pub(super) fn schedule(
    c: &mut Ctx,
    span: Range<usize>,
    what: &str,
    interval: &str,
    start: &Option<String>,
) -> (Option<Duration>, Option<Duration>) {
    let interval = duration_in(
        c,
        span.clone(),
        &format!("{what} interval"),
        interval,
        INTERVAL_RANGE,
    );
    let start = duration_or_zero(c, span, &format!("{what} start"), start, START_RANGE);
    (interval, start)
}

/// Checks a count of field `what` is from 1 to `max`.
pub(super) fn count_in(c: &mut Ctx, span: Range<usize>, what: &str, n: u64, max: u64) -> bool {
    if (1..=max).contains(&n) {
        return true;
    }
    c.at(span, format!("{what} {n} is outside 1 to {max}"));
    false
}

/// Reads the `udp_a` and `udp_b` addresses of a link or cable: both or
/// neither; each problem reported at `span`.
pub(super) fn udp_pair(
    c: &mut Ctx,
    span: Range<usize>,
    a: &Option<String>,
    b: &Option<String>,
) -> Option<(SocketAddr, SocketAddr)> {
    let mut addr = |v: &Option<String>, which: &str| -> Option<SocketAddr> {
        let v = v.as_ref()?;
        v.parse()
            .map_err(|_| {
                c.at(
                    span.clone(),
                    format!("{which} \"{v}\" is not an address and port, as \"127.0.0.1:7001\""),
                )
            })
            .ok()
    };
    match (addr(a, "udp_a"), addr(b, "udp_b")) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => {
            if a.is_some() != b.is_some() {
                c.at(span, "give both udp_a and udp_b, or neither".into());
            }
            None
        }
    }
}
