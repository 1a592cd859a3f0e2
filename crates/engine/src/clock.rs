//! The wall clock an engine can run against.
//!
//! Under the virtual clock the engine jumps from one event to the next.
//! Under the wall clock it runs each event when the wall clock reaches the
//! event's time, and nodes still see the event's time as `now`: the times a
//! report shows (round trips, delays) are the model's, and how far the wall
//! clock ran past them is measured per event and reported as lateness
//! ([`crate::lateness`]). An engine that cannot keep up runs every event all
//! the same, in order, late; the lateness report then says the run was not
//! faithful instead of the results quietly changing. (ns-3's real-time
//! simulator does the same in its best-effort mode.)
//!
//! Waiting for the next event sleeps by default: the kernel's timer slack
//! is cut to 1 µs for the engine's thread, so a sleep ends within a few
//! microseconds of its time and the core is free meanwhile (on a 2-core
//! machine the other core runs the other partition, or the kernel's side of
//! TUN traffic). `spin` busy-waits instead: the lowest lateness, one core
//! fully used.

use std::num::NonZeroU64;
use std::time::{Duration as StdDuration, Instant as WallInstant};

use aurora_time::Instant;

use crate::lateness::{Lateness, NodeLateness};

/// Below this gap even the sleeping clock spins: a sleep could not end in
/// time.
const SPIN_BELOW_NS: i64 = 2_000;

/// The wall clock an engine runs against, with what each of its workers
/// measured.
pub struct Wall {
    start: WallInstant,
    spin: bool,
    pub(crate) pacers: Vec<Pacer>,
}

impl Wall {
    /// A wall clock for `workers` workers running `nodes` nodes, whose
    /// time 0 is now; `spin` busy-waits instead of sleeping. What the
    /// workers record is made first and the clock started after: grown
    /// during the run, the first event of a node with a higher id than any
    /// before would wait for the copy (about 0.7 ms at 1,000 nodes), and
    /// made at the start, the first events would wait for that.
    pub(crate) fn start(workers: usize, nodes: usize, spin: bool) -> Self {
        let mut w = Wall {
            start: WallInstant::now(),
            spin,
            pacers: Vec::new(),
        };
        w.for_workers(workers, nodes);
        w.start = WallInstant::now();
        for p in &mut w.pacers {
            p.start = w.start;
        }
        w
    }

    /// Makes sure each of `workers` workers has its pacer, with room for
    /// the lateness of `nodes` nodes.
    pub(crate) fn for_workers(&mut self, workers: usize, nodes: usize) -> &mut [Pacer] {
        while self.pacers.len() < workers {
            self.pacers.push(Pacer::new(self.start, self.spin));
        }
        for p in &mut self.pacers {
            if p.nodes.len() < nodes {
                p.nodes.resize_with(nodes, NodeLateness::default);
            }
        }
        &mut self.pacers[..workers]
    }

    /// Wall time since the start.
    pub fn elapsed(&self) -> StdDuration {
        self.start.elapsed()
    }

    /// What was measured, from the start until now, for a run asked to
    /// last `asked` (if it was).
    pub fn lateness(&self, asked: Option<StdDuration>) -> Lateness {
        let mut nodes: Vec<NodeLateness> = Vec::new();
        for p in &self.pacers {
            if nodes.len() < p.nodes.len() {
                nodes.resize_with(p.nodes.len(), NodeLateness::default);
            }
            for (a, b) in nodes.iter_mut().zip(&p.nodes) {
                a.merge(b);
            }
        }
        Lateness {
            nodes,
            asked,
            ended: self.elapsed(),
            workers: self.pacers.len().max(1),
        }
    }
}

/// One worker's side of the wall clock: waits for events and records how
/// late each ran.
pub struct Pacer {
    start: WallInstant,
    spin: bool,
    nodes: Vec<NodeLateness>,
    slack_set: bool,
    /// The wall clock when last read, and events run since without
    /// reading it again.
    seen: Instant,
    stale: u32,
}

/// While behind, the clock is read again every this many events: a run
/// that is late by more than an event's cost needs no fresher reading to
/// know the next event is due, and the lateness it records is low by at
/// most this many events' run time.
const READ_EVERY: u32 = 16;

impl Pacer {
    fn new(start: WallInstant, spin: bool) -> Self {
        Pacer {
            start,
            spin,
            nodes: Vec::new(),
            slack_set: false,
            seen: Instant::ZERO,
            stale: 0,
        }
    }

    /// Wall time since the start, in the engine's nanoseconds.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        Instant::from_nanos(i64::try_from(self.start.elapsed().as_nanos()).unwrap_or(i64::MAX))
    }

    /// Waits until the wall clock reads `at`; returns how late it is
    /// then, in nanoseconds (0 or more).
    #[inline]
    pub(crate) fn wait_until(&mut self, at: Instant) -> u64 {
        if at <= self.seen && self.stale < READ_EVERY {
            self.stale += 1;
            return (self.seen - at).as_nanos().unsigned_abs();
        }
        self.stale = 0;
        loop {
            let now = self.now();
            self.seen = now;
            let gap = (at - now).as_nanos();
            if gap <= 0 {
                return gap.unsigned_abs();
            }
            self.sleep_until(at);
        }
    }

    /// Waits (once: spinning for a short gap, sleeping for a longer one)
    /// until the wall clock reads `at` or a little later; returns at once
    /// if it already does. For a loop that polls between waits.
    pub(crate) fn sleep_until(&mut self, at: Instant) {
        loop {
            let gap = (at - self.now()).as_nanos();
            if gap <= 0 {
                return;
            }
            if self.spin || gap < SPIN_BELOW_NS {
                std::hint::spin_loop();
                continue;
            }
            if !self.slack_set {
                self.slack_set = true;
                // Without it a sleep may end 50 µs late; failing to set it
                // only makes sleeps coarser, which the lateness shows.
                let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1_000));
            }
            std::thread::sleep(StdDuration::from_nanos(gap as u64));
            return;
        }
    }

    /// Notes that `node`'s event ran `late` ns after it was due.
    #[inline]
    pub(crate) fn record(&mut self, node: u32, late: u64) {
        self.node(node).late_by(late);
    }

    /// How late (ns, 0 or more) the wall clock is now for something due at
    /// `due`.
    pub(crate) fn late_since(&self, due: Instant) -> u64 {
        (self.now() - due).as_nanos().max(0).unsigned_abs()
    }

    /// Frames from another process reached `node` after waiting `waited`
    /// ns in their link.
    pub(crate) fn record_input(&mut self, node: u32, waited: u64) {
        self.node(node).input_waited(waited);
    }

    fn node(&mut self, node: u32) -> &mut NodeLateness {
        let i = node as usize;
        if i >= self.nodes.len() {
            self.nodes.resize_with(i + 1, NodeLateness::default);
        }
        &mut self.nodes[i]
    }
}
