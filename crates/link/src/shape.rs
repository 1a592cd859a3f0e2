//! Line-rate pacing, added delay, and seeded loss and bit-error injection,
//! wrapped around any sending link.
//!
//! The wrapper models a port's output: it takes cells while its transmit
//! buffer (`queue` cells not yet fully sent) has room, gives each a
//! departure time on a line clock running at `rate`, and hands it to the
//! link underneath once departure plus `delay` has passed. Each cell is
//! judged once, when taken: lost (counted as [`LinkDrop::InjectedLoss`]) or
//! given a bit error. A full buffer takes nothing: the caller decides whether
//! that is backpressure or a drop. Cells are held for their delay, and
//! for the link underneath to take them, in a staging queue bounded to the
//! buffer plus the cells the line sends in one delay: when the link
//! underneath does not take cells as fast as the line sends them, the
//! buffer fills and the caller is told so, instead of the queue growing.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use aurora_wire::CellBytes;

use crate::{CellSink, LinkCounters, LinkDrop, LinkError};

/// What to do to the cells.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shaping {
    /// Pace to this many cells per second (None: as fast as the link goes).
    pub rate: Option<f64>,
    /// Hold each cell this long before sending it.
    pub delay: Duration,
    /// Probability that a cell is lost.
    pub loss: f64,
    /// Probability that a cell gets one flipped bit (anywhere in its 53 bytes).
    pub bit_error: f64,
    /// Seed of the loss and error decisions.
    pub seed: u64,
    /// Most cells staged at once.
    pub queue: usize,
}

impl Default for Shaping {
    fn default() -> Self {
        Shaping {
            rate: None,
            delay: Duration::ZERO,
            loss: 0.0,
            bit_error: 0.0,
            seed: 1,
            queue: 4096,
        }
    }
}

/// Named line rates in cells per second (payload rate / 424 bits).
pub fn line_rate(name: &str) -> Option<f64> {
    Some(match name {
        "oc3" | "oc3c" => 353_207.5,
        "oc12" | "oc12c" => 1_412_830.0,
        "oc48" | "oc48c" => 5_651_320.0,
        "oc192" | "oc192c" => 22_605_280.0,
        "oc768" | "oc768c" => 90_421_120.0,
        _ => return None,
    })
}

/// A sending link with shaping applied.
pub struct Shaped<S> {
    inner: S,
    cfg: Shaping,
    rng: u64,
    cell_time: Duration,
    busy_until: Instant,
    /// When each cell still in the transmit buffer finishes sending.
    departures: VecDeque<Instant>,
    staged: VecDeque<(Instant, CellBytes)>,
    batch: Vec<CellBytes>,
    lost: u64,
    bit_errors: u64,
    stage_cap: usize,
    track_lost: bool,
    lost_cells: Vec<CellBytes>,
}

impl<S: CellSink> Shaped<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, cfg: Shaping) -> Self {
        Shaped {
            inner,
            cfg,
            rng: cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            cell_time: cfg
                .rate
                .map_or(Duration::ZERO, |r| Duration::from_secs_f64(1.0 / r)),
            busy_until: Instant::now(),
            departures: VecDeque::new(),
            staged: VecDeque::new(),
            batch: Vec::new(),
            lost: 0,
            bit_errors: 0,
            stage_cap: Self::stage_cap(&cfg),
            track_lost: false,
            lost_cells: Vec::new(),
        }
    }

    /// Most cells staged: the buffer, plus what the line sends during one
    /// delay (those are on the wire, not in the buffer).
    fn stage_cap(cfg: &Shaping) -> usize {
        let on_wire = cfg
            .rate
            .map_or(0.0, |r| (r * cfg.delay.as_secs_f64()).ceil());
        // A rate and delay too large to hold are held up to 16 M cells.
        let on_wire = if on_wire.is_finite() {
            on_wire.min((1 << 24) as f64)
        } else {
            0.0
        };
        cfg.queue.max(1).saturating_add(on_wire as usize)
    }

    /// Keeps a copy of every cell lost on the link, for
    /// [`Shaped::take_lost`] (off by default).
    pub fn track_lost(&mut self, on: bool) {
        self.track_lost = on;
    }

    /// The cells lost since the last call (when tracking).
    pub fn take_lost(&mut self) -> std::vec::Drain<'_, CellBytes> {
        self.lost_cells.drain(..)
    }

    /// The wrapped link.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Cells staged now (in the buffer, on the wire, or waiting for the
    /// link underneath); never more than the buffer plus one delay's worth.
    pub fn staged(&self) -> usize {
        self.staged.len()
    }

    /// Cells with an injected bit error so far.
    pub fn bit_errors(&self) -> u64 {
        self.bit_errors
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next() >> 11) as f64) < p * (1u64 << 53) as f64
    }

    /// Hands every due staged cell to the link underneath.
    fn release(&mut self, now: Instant) -> Result<(), LinkError> {
        while !self.staged.is_empty() {
            self.batch.clear();
            for &(due, cell) in self.staged.iter().take(256) {
                if due > now {
                    break;
                }
                self.batch.push(cell);
            }
            if self.batch.is_empty() {
                break;
            }
            let n = self.inner.send(&self.batch)?;
            self.staged.drain(..n);
            if n < self.batch.len() {
                break;
            }
        }
        Ok(())
    }
}

impl<S: CellSink> CellSink for Shaped<S> {
    fn send(&mut self, cells: &[CellBytes]) -> Result<usize, LinkError> {
        let now = Instant::now();
        self.release(now)?;
        while self.departures.front().is_some_and(|&t| t <= now) {
            self.departures.pop_front();
        }
        // Room in the transmit buffer (cells not yet fully sent). Without a
        // rate, cells leave at once and the bound is on cells held for delay.
        let held = if self.cfg.rate.is_some() {
            self.departures.len()
        } else {
            self.staged.len()
        };
        let take = cells
            .len()
            .min(self.cfg.queue.max(1).saturating_sub(held))
            .min(self.stage_cap.saturating_sub(self.staged.len()));
        for cell in &cells[..take] {
            let depart = if self.cfg.rate.is_some() {
                let start = self.busy_until.max(now);
                self.busy_until = start + self.cell_time;
                self.departures.push_back(self.busy_until);
                self.busy_until
            } else {
                now
            };
            if self.chance(self.cfg.loss) {
                self.lost += 1;
                if self.track_lost {
                    self.lost_cells.push(*cell);
                }
                continue;
            }
            let mut c = *cell;
            if self.chance(self.cfg.bit_error) {
                let bit = (self.next() % (53 * 8)) as usize;
                c[bit / 8] ^= 0x80 >> (bit % 8);
                self.bit_errors += 1;
            }
            self.staged.push_back((depart + self.cfg.delay, c));
        }
        self.release(now)?;
        Ok(take)
    }

    fn wait_ready(&mut self, timeout: Duration) {
        let now = Instant::now();
        let mut wait = timeout;
        if let Some(&(due, _)) = self.staged.front() {
            wait = wait.min(due.saturating_duration_since(now));
        }
        if let Some(&t) = self.departures.front() {
            wait = wait.min(t.saturating_duration_since(now));
        }
        if self.staged.len() >= self.cfg.queue && self.cfg.rate.is_none() {
            self.inner.wait_ready(wait);
        } else {
            std::thread::sleep(wait);
        }
        let _ = self.release(Instant::now());
    }

    fn flush(&mut self) -> Result<bool, LinkError> {
        self.release(Instant::now())?;
        Ok(self.staged.is_empty() && self.inner.flush()?)
    }

    fn counters(&self) -> LinkCounters {
        let mut c = self.inner.counters();
        c.drops.add(LinkDrop::InjectedLoss, self.lost);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link whose far end never takes anything.
    struct Stuck;

    impl CellSink for Stuck {
        fn send(&mut self, _cells: &[CellBytes]) -> Result<usize, LinkError> {
            Ok(0)
        }
        fn wait_ready(&mut self, _timeout: Duration) {}
        fn flush(&mut self) -> Result<bool, LinkError> {
            Ok(false)
        }
        fn counters(&self) -> LinkCounters {
            LinkCounters::default()
        }
    }

    #[test]
    fn a_link_that_takes_nothing_fills_the_buffer_and_no_more() {
        // Before, the staging queue took a buffer's worth every time the
        // line had sent one, and grew without limit.
        let cfg = Shaping {
            rate: Some(1e9),
            delay: Duration::from_micros(10),
            queue: 16,
            ..Shaping::default()
        };
        let mut s = Shaped::new(Stuck, cfg);
        let cap = 16 + 10_000;
        let mut taken = 0;
        for _ in 0..2000 {
            taken += s.send(&[[0u8; 53]; 64]).unwrap();
            std::thread::sleep(Duration::from_micros(5));
        }
        assert!(s.staged() <= cap, "{} staged", s.staged());
        assert_eq!(taken, s.staged(), "what was taken is still held");
        assert!(taken < 2000 * 64, "the full buffer refused cells");
    }

    #[test]
    fn lost_cells_are_kept_for_the_caller_when_asked() {
        let cfg = Shaping {
            loss: 1.0,
            ..Shaping::default()
        };
        let mut s = Shaped::new(Stuck, cfg);
        s.track_lost(true);
        assert_eq!(s.send(&[[7u8; 53]; 5]).unwrap(), 5);
        assert_eq!(s.take_lost().count(), 5);
        assert_eq!(s.take_lost().count(), 0);
    }
}
