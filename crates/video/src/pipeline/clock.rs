//! Where a pipeline's time comes from.
//!
//! The scheduler never reads a clock itself: it asks a [`Clock`], so the
//! same pipeline runs in virtual time ([`VirtualClock`]: waiting jumps to
//! the time waited for, work takes no time) and in real time
//! ([`WallClock`]: time since the clock was made, waiting sleeps, as the
//! seed's VuSystem relied on the Unix scheduler to wake it).

use aurora_time::Instant;

/// A source of pipeline time.
pub trait Clock {
    /// The time now.
    fn now(&mut self) -> Instant;
    /// Returns at `t` or later.
    fn wait_until(&mut self, t: Instant);
}

/// Virtual time: starts at zero and moves only when waited on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VirtualClock {
    now: Instant,
}

impl VirtualClock {
    /// A clock at time zero.
    pub fn new() -> VirtualClock {
        VirtualClock::default()
    }
}

impl Clock for VirtualClock {
    fn now(&mut self) -> Instant {
        self.now
    }

    fn wait_until(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }
}

/// Real time: time zero is when the clock was made; waiting sleeps the
/// thread (no spinning, so the lateness a pipeline sees is the operating
/// system's).
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    start: std::time::Instant,
}

impl WallClock {
    /// A clock whose time zero is now.
    pub fn new() -> WallClock {
        WallClock {
            start: std::time::Instant::now(),
        }
    }
}

impl Default for WallClock {
    fn default() -> WallClock {
        WallClock::new()
    }
}

impl Clock for WallClock {
    fn now(&mut self) -> Instant {
        let ns = self.start.elapsed().as_nanos().min(i64::MAX as u128);
        Instant::from_nanos(ns as i64)
    }

    fn wait_until(&mut self, t: Instant) {
        let now = self.now();
        if t > now {
            std::thread::sleep(std::time::Duration::from_nanos((t - now).as_nanos() as u64));
        }
    }
}
