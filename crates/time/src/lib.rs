//! Integer time for Aurora.
//!
//! Every protocol state machine in Aurora is sans-I/O: it never reads a clock.
//! The driver (real time or virtual time) passes the current [`Instant`] in, and
//! the state machine answers with the [`Instant`] at which it next wants to run.
//! Both types are signed 64-bit nanosecond counts, so arithmetic is exact and a
//! virtual-time run is reproducible bit for bit.
#![forbid(unsafe_code)]

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};

/// A point in time: nanoseconds since the driver's epoch (the start of a run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(i64);

/// A span of time in nanoseconds. May be negative when it is the difference of
/// two instants in the "wrong" order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(i64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(0);
    /// The latest representable instant; useful as "never".
    pub const MAX: Instant = Instant(i64::MAX);

    /// An instant `ns` nanoseconds after the epoch.
    pub const fn from_nanos(ns: i64) -> Self {
        Instant(ns)
    }
    /// An instant `us` microseconds after the epoch (saturating).
    pub const fn from_micros(us: i64) -> Self {
        Instant(us.saturating_mul(1_000))
    }
    /// An instant `ms` milliseconds after the epoch (saturating).
    pub const fn from_millis(ms: i64) -> Self {
        Instant(ms.saturating_mul(1_000_000))
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
    /// `self + d`, saturating at the ends of the range instead of overflowing.
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
    /// Time elapsed from `earlier` to `self` (negative if `earlier` is later).
    pub const fn since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);
    /// The longest representable span.
    pub const MAX: Duration = Duration(i64::MAX);

    /// A span of `ns` nanoseconds.
    pub const fn from_nanos(ns: i64) -> Self {
        Duration(ns)
    }
    /// A span of `us` microseconds (saturating).
    pub const fn from_micros(us: i64) -> Self {
        Duration(us.saturating_mul(1_000))
    }
    /// A span of `ms` milliseconds (saturating).
    pub const fn from_millis(ms: i64) -> Self {
        Duration(ms.saturating_mul(1_000_000))
    }
    /// A span of `s` seconds (saturating).
    pub const fn from_secs(s: i64) -> Self {
        Duration(s.saturating_mul(1_000_000_000))
    }
    /// The span in nanoseconds.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
    /// The span in seconds, as a float (for reports, never for scheduling).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }
}
impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, other: Instant) -> Duration {
        self.since(other)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, d: Duration) -> Duration {
        Duration(self.0.saturating_sub(d.0))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        let a = ns.unsigned_abs();
        if a >= 1_000_000_000 {
            write!(f, "{:.3}s", ns as f64 / 1e9)
        } else if a >= 1_000_000 {
            write!(f, "{:.3}ms", ns as f64 / 1e6)
        } else if a >= 1_000 {
            write!(f, "{:.3}us", ns as f64 / 1e3)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{}", Duration(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_and_orders() {
        let t = Instant::from_millis(5);
        assert_eq!((t + Duration::from_micros(1)).as_nanos(), 5_001_000);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(t - Instant::from_millis(2), Duration::from_millis(3));
        assert!(Instant::ZERO < t);
        assert_eq!(format!("{}", Duration::from_micros(1500)), "1.500ms");
    }
}
