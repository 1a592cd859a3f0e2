//! Measurements: RFC 4737 reordering, a latency histogram, buffer occupancy.
//!
//! All three are streaming and bounded: they take one observation at a time
//! and keep a fixed amount of state, whatever the length of the run.
//!
//! # RFC 4737 (Packet Reordering Metrics)
//!
//! [`Reordering`] is fed the sequence numbers (0, 1, 2, ... as sent) of the
//! units in the order they arrived or were delivered:
//!
//! * a unit is **reordered** when its number is below `NextExp`, the number
//!   after the highest seen so far (Section 3); the **reordered ratio** is
//!   reordered units over all units;
//! * the **reordering extent** of a reordered unit at arrival position `i`
//!   is `i − j`, `j` the earliest position holding a larger number
//!   (Section 4.2);
//! * a reordered unit is **n-reordered** when the `n` units just before it
//!   all carry larger numbers (Section 5); it is then also m-reordered for
//!   every `m < n`.
//!
//! The extent needs the positions at which the running maximum grew; the
//! last `history` of them are kept, and a unit whose extent reaches further
//! back is counted in [`Reordering::extent_beyond_history`] instead of the
//! histogram. n-reordering is counted for `n` up to a chosen bound.
//! Duplicates are not filtered: feed each number once.

use std::collections::VecDeque;

use aurora_time::{Duration, Instant};

/// Exact values below this; log-linear buckets above.
const LINEAR: u64 = 64;
/// Sub-buckets per power of two above `LINEAR` (relative error ≤ 1/32).
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = LINEAR as usize + (64 - 6) * SUB as usize;

/// A histogram of non-negative integers (nanoseconds, extents) with exact
/// small values and about 3 % resolution above 64; min, max, count and sum are exact.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Vec::new(),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl core::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("min", &self.min())
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .field("max", &self.max())
            .finish()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // ≥ 6
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    LINEAR as usize + (e as usize - 6) * SUB as usize + sub as usize
}

/// The largest value that falls in bucket `b`.
fn bucket_top(b: usize) -> u64 {
    if (b as u64) < LINEAR {
        return b as u64;
    }
    let k = b - LINEAR as usize;
    let e = (k / SUB as usize) as u32 + 6;
    let sub = (k % SUB as usize) as u64;
    let low = (1u64 << e) | (sub << (e - SUB_BITS));
    low.saturating_add((1u64 << (e - SUB_BITS)) - 1)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram::default()
    }

    /// Adds one value.
    pub fn record(&mut self, v: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        self.counts[bucket_of(v)] += 1;
        self.count += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest value (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest value (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean value (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The value at quantile `q` (0..=1): the top of the bucket holding the
    /// `ceil(q·count)`-th smallest value, never above the maximum. 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_top(b).min(self.max).max(self.min);
            }
        }
        self.max
    }
}

/// RFC 4737 reordering metrics over a stream of sequence numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reordering {
    next_exp: u64,
    received: u64,
    reordered: u64,
    /// (arrival position, number) where the running maximum grew, oldest first.
    history: VecDeque<(u64, u64)>,
    history_cap: usize,
    /// Highest number dropped from `history` (the history is incomplete below it).
    forgotten: Option<u64>,
    recent: VecDeque<u64>,
    n_max: usize,
    n_reordered: Vec<u64>,
    extent: Histogram,
    extent_beyond: u64,
}

impl Default for Reordering {
    fn default() -> Self {
        Reordering::new(4096, 16)
    }
}

impl Reordering {
    /// Metrics that remember the last `history` increases of the running
    /// maximum (for extents) and count n-reordering up to `n_max`.
    pub fn new(history: usize, n_max: usize) -> Reordering {
        Reordering {
            next_exp: 0,
            received: 0,
            reordered: 0,
            history: VecDeque::new(),
            history_cap: history.max(1),
            forgotten: None,
            recent: VecDeque::new(),
            n_max,
            n_reordered: vec![0; n_max],
            extent: Histogram::new(),
            extent_beyond: 0,
        }
    }

    /// Takes the next unit's sequence number.
    pub fn observe(&mut self, seq: u64) {
        let i = self.received;
        self.received += 1;
        if seq >= self.next_exp {
            self.next_exp = seq.saturating_add(1);
            if self.history.len() == self.history_cap {
                self.forgotten = self.history.pop_front().map(|(_, s)| s);
            }
            self.history.push_back((i, seq));
        } else {
            self.reordered += 1;
            // The first kept record whose number exceeds `seq` is where the
            // running maximum first passed it, unless a forgotten one did.
            let k = self.history.partition_point(|&(_, s)| s <= seq);
            match self.history.get(k) {
                Some(&(j, _)) if k > 0 || self.forgotten.is_none_or(|f| f <= seq) => {
                    self.extent.record(i - j);
                }
                _ => self.extent_beyond += 1,
            }
            let n = self.recent.iter().rev().take_while(|&&s| s > seq).count();
            for c in &mut self.n_reordered[..n] {
                *c += 1;
            }
        }
        if self.n_max > 0 {
            if self.recent.len() == self.n_max {
                self.recent.pop_front();
            }
            self.recent.push_back(seq);
        }
    }

    /// Units observed.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Units found reordered.
    pub fn reordered(&self) -> u64 {
        self.reordered
    }

    /// Reordered units over all units (0 when none observed).
    pub fn reordered_ratio(&self) -> f64 {
        if self.received == 0 {
            0.0
        } else {
            self.reordered as f64 / self.received as f64
        }
    }

    /// Distribution of the reordering extents that fell within the history.
    pub fn extent(&self) -> &Histogram {
        &self.extent
    }

    /// Reordered units whose extent reached past the kept history.
    pub fn extent_beyond_history(&self) -> u64 {
        self.extent_beyond
    }

    /// Units that were n-reordered (`n` from 1 to the bound; 0 outside it).
    pub fn n_reordered(&self, n: usize) -> u64 {
        n.checked_sub(1)
            .and_then(|i| self.n_reordered.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// n-reordered units over all units.
    pub fn n_reordered_ratio(&self, n: usize) -> f64 {
        if self.received == 0 {
            0.0
        } else {
            self.n_reordered(n) as f64 / self.received as f64
        }
    }
}

/// A level (units held) over time: its maximum and its time-weighted mean.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Occupancy {
    start: Option<Instant>,
    last: Instant,
    current: u64,
    max: u64,
    /// Level × nanoseconds, summed.
    area: u128,
}

impl Occupancy {
    /// Records that the level is `value` from `now` on. Time that runs
    /// backwards is taken as no time.
    pub fn set(&mut self, now: Instant, value: u64) {
        if self.start.is_none() {
            self.start = Some(now);
            self.last = now;
        }
        if now > self.last {
            let dt = (now - self.last).as_nanos() as u128;
            self.area += u128::from(self.current) * dt;
            self.last = now;
        }
        self.current = value;
        self.max = self.max.max(value);
    }

    /// The level now.
    pub fn current(&self) -> u64 {
        self.current
    }

    /// The highest level seen.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The time-weighted mean level from the first record to `now`.
    pub fn mean(&self, now: Instant) -> f64 {
        let Some(start) = self.start else { return 0.0 };
        let end = now.max(self.last);
        let span = (end - start).as_nanos();
        if span <= 0 {
            return self.current as f64;
        }
        let tail = u128::from(self.current) * (end - self.last).as_nanos() as u128;
        (self.area + tail) as f64 / span as f64
    }

    /// Time since the first record.
    pub fn span(&self, now: Instant) -> Duration {
        self.start
            .map_or(Duration::ZERO, |s| now.max(self.last) - s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seqs: &[u64]) -> Reordering {
        let mut r = Reordering::new(64, 4);
        for &s in seqs {
            r.observe(s);
        }
        r
    }

    #[test]
    fn rfc4737_in_order_stream() {
        let r = run(&[0, 1, 2, 3, 4]);
        assert_eq!((r.received(), r.reordered(), r.extent().count()), (5, 0, 0));
    }

    #[test]
    fn rfc4737_one_late_unit() {
        // 0 1 3 4 2 5: 2 is reordered (NextExp was 5); the first larger
        // number (3) arrived at position 2, 2 at position 4: extent 2.
        // The two units just before it (3, 4) are both larger: 1- and
        // 2-reordered, not 3-reordered (1 precedes them).
        let r = run(&[0, 1, 3, 4, 2, 5]);
        assert_eq!(r.reordered(), 1);
        assert!((r.reordered_ratio() - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!((r.extent().min(), r.extent().max()), (2, 2));
        assert_eq!(
            (r.n_reordered(1), r.n_reordered(2), r.n_reordered(3)),
            (1, 1, 0)
        );
    }

    #[test]
    fn rfc4737_striping_shift() {
        // Two stripes where stripe 1 lost a cell and the receiver takes the
        // next one in its place: 0 3 2 5 4 7 6 ...
        let r = run(&[0, 3, 2, 5, 4, 7, 6]);
        assert_eq!(r.reordered(), 3);
        assert_eq!((r.extent().min(), r.extent().max()), (1, 1));
        assert_eq!((r.n_reordered(1), r.n_reordered(2)), (3, 0));
    }

    #[test]
    fn rfc4737_extent_reaches_the_first_larger() {
        // 10 arrives first, then 1..=9 (all reordered): unit k at position k
        // has its first larger number at position 0, extent k.
        let seq: Vec<u64> = std::iter::once(10).chain(1..=9).collect();
        let r = run(&seq);
        assert_eq!(r.reordered(), 9);
        assert_eq!((r.extent().min(), r.extent().max()), (1, 9));
        // Unit k is preceded by 10, 1, ..., k−1: only one larger number.
        assert_eq!((r.n_reordered(1), r.n_reordered(2)), (1, 0));
    }

    #[test]
    fn extents_beyond_the_history_are_counted_apart() {
        let mut r = Reordering::new(2, 2);
        for s in [5, 6, 7, 8, 1] {
            r.observe(s);
        }
        assert_eq!(
            (r.reordered(), r.extent_beyond_history(), r.extent().count()),
            (1, 1, 0)
        );
        for s in [9, 7] {
            r.observe(s);
        }
        // 7 < 8: the first larger kept record is 8 (position 3), 7 arrives at 6.
        assert_eq!(r.extent().max(), 3);
    }

    #[test]
    fn histogram_quantiles() {
        let mut h = Histogram::new();
        assert_eq!((h.quantile(0.5), h.max(), h.min()), (0, 0, 0));
        for v in 1..=100u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 100);
        assert_eq!((h.min(), h.max()), (1000, 100_000));
        let p50 = h.quantile(0.5) as f64;
        assert!((p50 - 50_000.0).abs() / 50_000.0 < 0.04, "{p50}");
        let p99 = h.quantile(0.99) as f64;
        assert!((p99 - 99_000.0).abs() / 99_000.0 < 0.04, "{p99}");
        assert_eq!(h.quantile(1.0), 100_000);
        for v in 0..64 {
            assert_eq!(bucket_top(bucket_of(v)), v);
        }
        for v in [64u64, 65, 1000, 1 << 40, u64::MAX] {
            let b = bucket_of(v);
            assert!(bucket_top(b) >= v && b < BUCKETS);
            assert!(b == 0 || bucket_top(b - 1) < v);
        }
    }

    #[test]
    fn occupancy_mean_is_time_weighted() {
        let mut o = Occupancy::default();
        o.set(Instant::from_nanos(0), 0);
        o.set(Instant::from_nanos(100), 4);
        o.set(Instant::from_nanos(200), 2);
        o.set(Instant::from_nanos(150), 1); // backwards: no time passes
        assert_eq!(o.max(), 4);
        // 0 for 100 ns, 4 for 100 ns, then 1 for 200 ns: 600 / 400.
        assert!((o.mean(Instant::from_nanos(400)) - 1.5).abs() < 1e-9);
    }
}
