//! The generic cell rate algorithm, GCRA(T, τ), of ITU-T I.371 and the ATM
//! Forum's TM 4.0, in its two equivalent forms, and the dual GCRA of VBR.
//!
//! GCRA(T, τ) says whether a cell arriving at time `t` keeps to a rate of
//! one cell per increment `T` with tolerance `τ`:
//!
//! * **virtual scheduling** ([`VirtualScheduling`]) keeps a theoretical
//!   arrival time TAT. A cell conforms if `t ≥ TAT − τ`; then
//!   `TAT ← max(t, TAT) + T`.
//! * **continuous-state leaky bucket** ([`LeakyBucket`]) keeps a bucket
//!   level X and the last conformance time LCT. The bucket has drained to
//!   `X' = max(0, X − (t − LCT))`; a cell conforms if `X' ≤ τ`; then
//!   `X ← X' + T`, `LCT ← t`.
//!
//! Both change their state only for a conforming cell, and give the same
//! verdict for every cell of every arrival sequence (a property test checks
//! it). The first cell always conforms.
//!
//! **Rounding.** Times are integer nanoseconds, but `T = 1/PCR` usually is
//! not: 1/353,207 s is 2,831.2 ns. Rounding T would drift (rounded down, a
//! policer lets a source through 0.007 % fast; rounded up, a shaper sends
//! slow), so T is not rounded: an [`Interval`] holds it exactly as
//! `ns + rem/per` nanoseconds (for a rate, `per` is the rate in cells per
//! second), and TAT and X carry the same fraction. What is rounded is the
//! comparison with an arrival time: a cell stamped `t` arrived somewhere in
//! `[t, t + 1 ns)`, and it is given the benefit of that nanosecond. It
//! conforms if `t + τ ≥ ⌊TAT⌋` (leaky bucket: `⌊X'⌋ ≤ τ`), so a policer
//! never acts on a cell that may have conformed (I.371's rule that UPC
//! must not act on conforming cells), and the test's tolerance is in
//! effect τ plus under a nanosecond, never more. This is what lets a shaper
//! keep exactly to a rate whose interval is not whole nanoseconds: at
//! 3·10^8 cells/s (T = 3⅓ ns) it sends at 0, 3, 6, 10, 13, 16, 20, ...,
//! exactly three cells every 10 ns for ever, each cell less than a
//! nanosecond ahead of the exact schedule, and a policer with the same
//! contract passes every one. τ is whole nanoseconds; the dual GCRA's
//! burst tolerance, where it is not, is rounded up (see
//! [`crate::burst_tolerance`]), in the same spirit.
//!
//! Arithmetic saturates at the ends of the `i64` range, so no time, however
//! absurd, panics; times need not increase (a cell "from the past" is
//! judged like any other).

use aurora_time::{Duration, Instant};

/// A GCRA increment T, exactly: `ns + rem/per` nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interval {
    ns: i64,
    rem: u64,
    per: u64,
}

impl Interval {
    /// No time at all: every cell conforms as far as the rate goes.
    pub const ZERO: Interval = Interval {
        ns: 0,
        rem: 0,
        per: 1,
    };

    /// The interval between cells at `cells_per_sec` cells per second,
    /// 10^9 / `cells_per_sec` nanoseconds exactly; `None` for a rate of 0.
    pub const fn from_rate(cells_per_sec: u64) -> Option<Interval> {
        if cells_per_sec == 0 {
            return None;
        }
        Some(Interval {
            ns: (1_000_000_000 / cells_per_sec) as i64,
            rem: 1_000_000_000 % cells_per_sec,
            per: cells_per_sec,
        })
    }

    /// An interval of a whole number of nanoseconds (negative is taken as 0).
    pub const fn from_nanos(ns: i64) -> Interval {
        Interval {
            ns: if ns < 0 { 0 } else { ns },
            rem: 0,
            per: 1,
        }
    }

    /// The whole nanoseconds, rounded down.
    pub const fn floor_nanos(self) -> i64 {
        self.ns
    }

    /// The nanoseconds, rounded up.
    pub const fn ceil_nanos(self) -> i64 {
        self.ns.saturating_add((self.rem != 0) as i64)
    }

    /// The fraction of a nanosecond beyond [`Interval::floor_nanos`], as
    /// `(numerator, denominator)`.
    pub const fn fraction(self) -> (u64, u64) {
        (self.rem, self.per)
    }

    /// The interval in nanoseconds, as a float (for reports).
    pub fn as_nanos_f64(self) -> f64 {
        self.ns as f64 + self.rem as f64 / self.per as f64
    }

    /// Adds this interval to the time `(whole, frac / per)` (frac < per).
    #[inline]
    fn add_to(self, whole: i64, frac: u64) -> (i64, u64) {
        // frac + rem may reach per (a carry) but never 2·per; computed so
        // that nothing overflows whatever per is.
        let carry = frac >= self.per - self.rem;
        let frac = frac
            .wrapping_add(self.rem)
            .wrapping_sub(self.per * carry as u64);
        (
            whole.saturating_add(self.ns).saturating_add(carry as i64),
            frac,
        )
    }
}

/// A GCRA(T, τ) conformance test, in either form.
pub trait Gcra {
    /// A test with increment `t` and tolerance `tau` (a negative tolerance
    /// is taken as 0), before any cell.
    fn new(t: Interval, tau: Duration) -> Self
    where
        Self: Sized;
    /// Judges a cell arriving at `now`: true if it conforms, and then (only
    /// then) the state moves on.
    fn conforms(&mut self, now: Instant) -> bool;
    /// What [`Gcra::conforms`] would answer at `now`, without changing
    /// anything.
    fn peek(&self, now: Instant) -> bool;
    /// Records a cell at `now` as conforming, whatever [`Gcra::peek`]
    /// says: the update half of [`Gcra::conforms`], for a caller that
    /// combines several tests (the dual GCRA) and updates only when all
    /// pass.
    fn commit(&mut self, now: Instant);
    /// The earliest time at or after `now` at which a cell would conform.
    fn next_conforming(&self, now: Instant) -> Instant;
    /// Forgets every cell, as after [`Gcra::new`].
    fn reset(&mut self);
    /// The increment T.
    fn increment(&self) -> Interval;
    /// The tolerance τ.
    fn tolerance(&self) -> Duration;
}

/// GCRA(T, τ) by virtual scheduling: a theoretical arrival time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtualScheduling {
    t: Interval,
    tau: i64,
    /// TAT = tat + frac / t.per; `i64::MIN` before the first cell.
    tat: i64,
    frac: u64,
}

impl VirtualScheduling {
    /// The theoretical arrival time, rounded down to whole nanoseconds
    /// (`Instant::from_nanos(i64::MIN)` before the first cell).
    pub fn tat(&self) -> Instant {
        Instant::from_nanos(self.tat)
    }
}

impl Gcra for VirtualScheduling {
    fn new(t: Interval, tau: Duration) -> Self {
        VirtualScheduling {
            t,
            tau: tau.as_nanos().max(0),
            tat: i64::MIN,
            frac: 0,
        }
    }

    #[inline]
    fn conforms(&mut self, now: Instant) -> bool {
        let ok = self.peek(now);
        if ok {
            self.commit(now);
        }
        ok
    }

    #[inline]
    fn peek(&self, now: Instant) -> bool {
        // t ≥ TAT − τ, at the clock's resolution: t + τ ≥ ⌊TAT⌋.
        now.as_nanos().saturating_add(self.tau) >= self.tat
    }

    #[inline]
    fn commit(&mut self, now: Instant) {
        // TAT ← max(t, TAT) + T. For whole t, t > TAT ⇔ t > ⌊TAT⌋.
        let t = now.as_nanos();
        let later = t > self.tat;
        let (whole, frac) = if later { (t, 0) } else { (self.tat, self.frac) };
        (self.tat, self.frac) = self.t.add_to(whole, frac);
    }

    fn next_conforming(&self, now: Instant) -> Instant {
        Instant::from_nanos(now.as_nanos().max(self.tat.saturating_sub(self.tau)))
    }

    fn reset(&mut self) {
        self.tat = i64::MIN;
        self.frac = 0;
    }

    fn increment(&self) -> Interval {
        self.t
    }

    fn tolerance(&self) -> Duration {
        Duration::from_nanos(self.tau)
    }
}

/// GCRA(T, τ) as a continuous-state leaky bucket: a level that drains one
/// nanosecond per nanosecond and fills by T per conforming cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeakyBucket {
    t: Interval,
    tau: i64,
    /// X = x + frac / t.per.
    x: i64,
    frac: u64,
    /// LCT; `i64::MIN` before the first cell (so the bucket is empty).
    lct: i64,
}

impl LeakyBucket {
    /// X' = max(0, X − (t − LCT)), as (whole, fraction).
    #[inline]
    fn drained(&self, t: i64) -> (i64, u64) {
        let x = self.x.saturating_sub(t.saturating_sub(self.lct));
        // X' < 0 ⇔ its whole part is negative (the fraction is below 1).
        if x < 0 {
            (0, 0)
        } else {
            (x, self.frac)
        }
    }

    /// The bucket level after draining to `now`, rounded down to whole
    /// nanoseconds.
    pub fn level(&self, now: Instant) -> Duration {
        Duration::from_nanos(self.drained(now.as_nanos()).0)
    }
}

impl Gcra for LeakyBucket {
    fn new(t: Interval, tau: Duration) -> Self {
        LeakyBucket {
            t,
            tau: tau.as_nanos().max(0),
            x: 0,
            frac: 0,
            lct: i64::MIN,
        }
    }

    #[inline]
    fn conforms(&mut self, now: Instant) -> bool {
        let ok = self.peek(now);
        if ok {
            self.commit(now);
        }
        ok
    }

    #[inline]
    fn peek(&self, now: Instant) -> bool {
        // X' ≤ τ, at the clock's resolution: ⌊X'⌋ ≤ τ.
        self.drained(now.as_nanos()).0 <= self.tau
    }

    #[inline]
    fn commit(&mut self, now: Instant) {
        let t = now.as_nanos();
        let (x, frac) = self.drained(t);
        (self.x, self.frac) = self.t.add_to(x, frac);
        self.lct = t;
    }

    fn next_conforming(&self, now: Instant) -> Instant {
        // ⌊X − (t − LCT)⌋ ≤ τ  ⇔  t ≥ LCT + ⌊X⌋ − τ.
        Instant::from_nanos(
            now.as_nanos()
                .max(self.lct.saturating_add(self.x).saturating_sub(self.tau)),
        )
    }

    fn reset(&mut self) {
        self.x = 0;
        self.frac = 0;
        self.lct = i64::MIN;
    }

    fn increment(&self) -> Interval {
        self.t
    }

    fn tolerance(&self) -> Duration {
        Duration::from_nanos(self.tau)
    }
}

/// The dual GCRA of VBR: GCRA(1/PCR, CDVT) on the peak rate and
/// GCRA(1/SCR, BT + CDVT) on the sustainable rate. A cell conforms only if
/// it conforms to both; only then are both updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DualGcra<G = VirtualScheduling> {
    /// The peak-rate test.
    pub peak: G,
    /// The sustainable-rate test.
    pub sustained: G,
}

impl<G: Gcra> DualGcra<G> {
    /// The two tests: `peak` = GCRA(`tp`, `cdvt`) and `sustained` =
    /// GCRA(`ts`, `bt + cdvt`).
    pub fn new(tp: Interval, ts: Interval, bt: Duration, cdvt: Duration) -> Self {
        DualGcra {
            peak: G::new(tp, cdvt),
            sustained: G::new(ts, bt + cdvt),
        }
    }

    /// Judges a cell arriving at `now` against both tests; true if it
    /// conforms to both, and then (only then) both move on.
    #[inline]
    pub fn conforms(&mut self, now: Instant) -> bool {
        let ok = self.peek(now);
        if ok {
            self.peak.commit(now);
            self.sustained.commit(now);
        }
        ok
    }

    /// What [`DualGcra::conforms`] would answer, without changing anything.
    #[inline]
    pub fn peek(&self, now: Instant) -> bool {
        self.peak.peek(now) & self.sustained.peek(now)
    }

    /// The earliest time at or after `now` at which a cell would conform to
    /// both tests.
    pub fn next_conforming(&self, now: Instant) -> Instant {
        self.peak
            .next_conforming(now)
            .max(self.sustained.next_conforming(now))
    }

    /// Forgets every cell.
    pub fn reset(&mut self) {
        self.peak.reset();
        self.sustained.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: i64) -> Instant {
        Instant::from_nanos(ns)
    }

    /// GCRA(10, 5), worked by hand with TAT:
    ///
    /// | t  | TAT − τ | verdict | TAT after |
    /// |----|---------|---------|-----------|
    /// |  0 |   −∞    | C       | 10        |
    /// |  4 |    5    | N       | 10        |
    /// |  6 |    5    | C       | 20        |
    /// | 12 |   15    | N       | 20        |
    /// | 15 |   15    | C       | 30        |
    /// | 24 |   25    | N       | 30        |
    /// | 25 |   25    | C       | 40        |
    /// | 50 |   35    | C       | 60        |
    /// | 51 |   55    | N       | 60        |
    /// | 56 |   55    | C       | 70        |
    const ARRIVALS: [i64; 10] = [0, 4, 6, 12, 15, 24, 25, 50, 51, 56];
    const VERDICTS: [bool; 10] = [
        true, false, true, false, true, false, true, true, false, true,
    ];

    fn run<G: Gcra>() -> Vec<bool> {
        let mut g = G::new(Interval::from_nanos(10), Duration::from_nanos(5));
        ARRIVALS
            .iter()
            .map(|&t| {
                let p = g.peek(at(t));
                let c = g.conforms(at(t));
                assert_eq!(p, c, "peek and conforms disagree at {t}");
                c
            })
            .collect()
    }

    #[test]
    fn hand_worked_gcra_10_5() {
        assert_eq!(run::<VirtualScheduling>(), VERDICTS);
        assert_eq!(run::<LeakyBucket>(), VERDICTS);
        let mut g = VirtualScheduling::new(Interval::from_nanos(10), Duration::from_nanos(5));
        for t in ARRIVALS {
            g.conforms(at(t));
        }
        assert_eq!(g.tat(), at(70));
        // Next conforming: TAT − τ = 65.
        assert_eq!(g.next_conforming(at(57)), at(65));
        assert_eq!(g.next_conforming(at(90)), at(90));
        let mut b = LeakyBucket::new(Interval::from_nanos(10), Duration::from_nanos(5));
        for t in ARRIVALS {
            b.conforms(at(t));
        }
        // X = 14 at LCT = 56, so 10 at 60.
        assert_eq!(b.level(at(60)), Duration::from_nanos(10));
        assert_eq!(b.next_conforming(at(57)), at(65));
    }

    #[test]
    fn peek_changes_nothing_and_non_conforming_cells_change_nothing() {
        let mut g = VirtualScheduling::new(Interval::from_nanos(10), Duration::ZERO);
        assert!(g.conforms(at(0)));
        let before = g;
        assert!(!g.peek(at(5)));
        assert!(!g.conforms(at(5)));
        assert!(!g.conforms(at(9)));
        assert_eq!(g, before);
        assert!(g.conforms(at(10)));
    }

    #[test]
    fn a_fractional_interval_does_not_drift() {
        // 3·10^8 cells/s: T = 3⅓ ns.
        let t = Interval::from_rate(300_000_000).unwrap();
        assert_eq!(
            (t.floor_nanos(), t.ceil_nanos(), t.fraction()),
            (3, 4, (100_000_000, 300_000_000))
        );
        let mut g = VirtualScheduling::new(t, Duration::ZERO);
        let mut b = LeakyBucket::new(t, Duration::ZERO);
        let mut now = at(0);
        let mut sent = Vec::new();
        for _ in 0..3_000 {
            now = g.next_conforming(now);
            assert_eq!(b.next_conforming(now), now);
            // A nanosecond earlier is too early.
            assert!(!g.peek(at(now.as_nanos() - 1)) || now == at(0));
            assert!(g.conforms(now) && b.conforms(now));
            sent.push(now.as_nanos());
        }
        assert_eq!(&sent[..7], &[0, 3, 6, 10, 13, 16, 20]);
        // Three cells every 10 ns, exactly, all the way.
        assert_eq!(sent[2_999], 9_996);
        assert_eq!(g.next_conforming(now), at(10_000));
        assert_eq!(b.next_conforming(now), at(10_000));
    }

    /// Dual GCRA with T_p = 10 ns (PCR 10^8 cells/s), T_s = 40 ns (SCR
    /// 2.5·10^7 cells/s), MBS 3, CDVT 0: BT = (3 − 1)(40 − 10) = 60 ns.
    ///
    /// Back-to-back cells at the peak rate, 0, 10, 20, ...: the sustained
    /// test's TAT goes 40, 80, 120, so cells 0, 10 and 20 conform (a burst
    /// of MBS = 3), 30, 40, 50 find TAT_s − BT = 60 ahead, 60 conforms
    /// (TAT_s 160), 70..90 do not, 100 does (TAT_s 200).
    ///
    /// Then, long after: at 1000 both conform (TAT_p 1010, TAT_s 1040);
    /// 1005 fails the peak test though it passes the sustained one (980),
    /// so neither moves; 1010 conforms (TAT_s 1080, not 1120 as it would
    /// be had 1005 been counted); 1020 conforms because TAT_s − BT = 1020;
    /// 1030 does not (1120 − 60 = 1060).
    #[test]
    fn hand_worked_dual_gcra() {
        fn run<G: Gcra>() -> Vec<bool> {
            let tp = Interval::from_rate(100_000_000).unwrap();
            let ts = Interval::from_rate(25_000_000).unwrap();
            let mut d = DualGcra::<G>::new(tp, ts, Duration::from_nanos(60), Duration::ZERO);
            (0..=100)
                .step_by(10)
                .chain([1000, 1005, 1010, 1020, 1030])
                .map(|t| d.conforms(at(t)))
                .collect()
        }
        let (c, n) = (true, false);
        let want = vec![c, c, c, n, n, n, c, n, n, n, c, c, n, c, c, n];
        assert_eq!(run::<VirtualScheduling>(), want);
        assert_eq!(run::<LeakyBucket>(), want);
    }

    #[test]
    fn extremes_do_not_panic() {
        for t in [
            Interval::ZERO,
            Interval::from_nanos(i64::MAX),
            Interval::from_rate(1).unwrap(),
            Interval::from_rate(u64::MAX).unwrap(),
        ] {
            for tau in [
                Duration::from_nanos(i64::MIN),
                Duration::ZERO,
                Duration::MAX,
            ] {
                let mut g = VirtualScheduling::new(t, tau);
                let mut b = LeakyBucket::new(t, tau);
                for now in [i64::MIN, -1, 0, i64::MAX, i64::MAX, i64::MIN, 0] {
                    g.conforms(at(now));
                    b.conforms(at(now));
                    g.next_conforming(at(now));
                    b.next_conforming(at(now));
                    b.level(at(now));
                }
            }
        }
    }
}
