//! The scheduler: modules, the queues between their ports, dispatch.
//!
//! See the [parent module](super) for the dispatch rule. A run
//! ([`Pipeline::run`]) takes its time from a [`Clock`] and ends when every
//! module has finished (its sources ended and everything downstream
//! drained), when the time limit is reached (every module is then told to
//! finish, so files are complete), or at the first module error.

use std::collections::VecDeque;

use aurora_time::{Duration, Instant};

use super::{Clock, Ctx, Frame, Module, ModuleError, MAX_QUEUE};

/// A module's place in its pipeline.
pub type ModuleId = usize;

/// How late `Timeout` callbacks ran: a fixed histogram (bounded memory)
/// with the edges of the seed's Table 10 and finer ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lateness {
    /// Callbacks at most [`Lateness::EDGES`]`[i]` late (and more than the
    /// edge before); the last slot counts those later than every edge.
    pub counts: [u64; 8],
    /// The latest one.
    pub max: Duration,
    /// The sum of every lateness, for a mean.
    pub sum: Duration,
}

impl Lateness {
    /// Upper edges of the histogram's slots.
    pub const EDGES: [Duration; 7] = [
        Duration::from_micros(50),
        Duration::from_micros(100),
        Duration::from_millis(1),
        Duration::from_millis(5),
        Duration::from_millis(10),
        Duration::from_millis(15),
        Duration::from_millis(20),
    ];

    /// The edges as text.
    pub const LABELS: [&'static str; 7] = ["50us", "100us", "1ms", "5ms", "10ms", "15ms", "20ms"];

    /// Records one callback `late` after its time.
    pub fn record(&mut self, late: Duration) {
        let late = late.max(Duration::ZERO);
        let i = Self::EDGES
            .iter()
            .position(|&e| late <= e)
            .unwrap_or(Self::EDGES.len());
        self.counts[i] += 1;
        self.max = self.max.max(late);
        self.sum = self.sum + late;
    }

    /// Callbacks recorded.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The share (0 to 1) of callbacks at most `EDGES[i]` late.
    pub fn within(&self, i: usize) -> f64 {
        let t = self.total();
        if t == 0 {
            return 0.0;
        }
        self.counts[..=i.min(Self::EDGES.len() - 1)]
            .iter()
            .sum::<u64>() as f64
            / t as f64
    }

    /// Adds `other`'s callbacks to these.
    pub fn merge(&mut self, other: &Lateness) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
        self.max = self.max.max(other.max);
        self.sum = self.sum + other.sum;
    }
}

/// What the scheduler counted for one module.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleStats {
    /// Frames it received.
    pub received: u64,
    /// Frames it sent.
    pub sent: u64,
    /// Timeouts it was called for.
    pub timeouts: u64,
    /// Frames it sent to an output joined to nothing (discarded).
    pub unconnected: u64,
    /// Frames it tried to send beyond one per port per callback (dropped).
    pub over_sent: u64,
    /// Wall time spent in its callbacks, when profiling.
    pub busy: Duration,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// Every module finished.
    Finished,
    /// The time limit came first.
    TimeUp,
}

struct Slot {
    module: Box<dyn Module>,
    inputs: Vec<Option<usize>>,
    outputs: Vec<Option<usize>>,
    timeout: Option<(Instant, u64)>,
    ended: bool,
    finished: bool,
    stats: ModuleStats,
}

struct Edge {
    from: ModuleId,
    queue: VecDeque<Frame>,
    cap: usize,
    most: usize,
}

/// A pipeline: modules, the queues joining them, the scheduler's state.
pub struct Pipeline {
    slots: Vec<Slot>,
    edges: Vec<Edge>,
    seq: u64,
    started: bool,
    lateness: Lateness,
    profile: bool,
    steps: u64,
}

impl core::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let kinds: Vec<_> = self.slots.iter().map(|s| s.module.kind()).collect();
        write!(f, "Pipeline({})", kinds.join(" ! "))
    }
}

impl Default for Pipeline {
    fn default() -> Pipeline {
        Pipeline::new()
    }
}

/// What one dispatch is for.
enum Work {
    Start,
    Timeout(Instant),
    Frame(usize, Frame),
    Finish,
}

impl Pipeline {
    /// An empty pipeline.
    pub fn new() -> Pipeline {
        Pipeline {
            slots: Vec::new(),
            edges: Vec::new(),
            seq: 0,
            started: false,
            lateness: Lateness::default(),
            profile: false,
            steps: 0,
        }
    }

    /// Adds a module; modules added later count as further downstream.
    pub fn add(&mut self, module: Box<dyn Module>) -> ModuleId {
        let (i, o) = (module.inputs(), module.outputs());
        self.slots.push(Slot {
            module,
            inputs: vec![None; i],
            outputs: vec![None; o],
            timeout: None,
            ended: false,
            finished: false,
            stats: ModuleStats::default(),
        });
        self.slots.len() - 1
    }

    /// Joins output `out` of `from` to input `inp` of `to` by a queue of
    /// `cap` frames (1 to [`MAX_QUEUE`]). Refused (one sentence) when a
    /// port does not exist or is joined already.
    pub fn connect(
        &mut self,
        from: ModuleId,
        out: usize,
        to: ModuleId,
        inp: usize,
        cap: usize,
    ) -> Result<(), ModuleError> {
        if !(1..=MAX_QUEUE).contains(&cap) {
            return Err(ModuleError(format!(
                "a queue of {cap} frames is outside 1 to {MAX_QUEUE}"
            )));
        }
        let name = |m: ModuleId| {
            self.slots
                .get(m)
                .map_or_else(|| format!("module {m}"), |s| s.module.kind().to_owned())
        };
        let free_out = self
            .slots
            .get(from)
            .and_then(|s| s.outputs.get(out))
            .is_some_and(Option::is_none);
        if !free_out {
            return Err(ModuleError(format!(
                "{} has no free output port {out}",
                name(from)
            )));
        }
        let free_in = self
            .slots
            .get(to)
            .and_then(|s| s.inputs.get(inp))
            .is_some_and(Option::is_none);
        if !free_in || from == to {
            return Err(ModuleError(format!(
                "{} has no free input port {inp}",
                name(to)
            )));
        }
        let e = self.edges.len();
        self.edges.push(Edge {
            from,
            queue: VecDeque::with_capacity(cap),
            cap,
            most: 0,
        });
        self.slots[from].outputs[out] = Some(e);
        self.slots[to].inputs[inp] = Some(e);
        Ok(())
    }

    /// Adds `modules` joined one after another (output 0 to input 0) by
    /// queues of `cap` frames; the first one's id.
    pub fn chain(
        &mut self,
        modules: Vec<Box<dyn Module>>,
        cap: usize,
    ) -> Result<ModuleId, ModuleError> {
        let first = self.slots.len();
        for (k, m) in modules.into_iter().enumerate() {
            let id = self.add(m);
            if k > 0 {
                self.connect(id - 1, 0, id, 0, cap)?;
            }
        }
        Ok(first)
    }

    /// Measures the wall time each module's callbacks take
    /// ([`ModuleStats::busy`]).
    pub fn set_profiling(&mut self, on: bool) {
        self.profile = on;
    }

    /// Modules in the pipeline.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the pipeline has no module.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Module `id`'s kind.
    pub fn kind(&self, id: ModuleId) -> Option<&'static str> {
        self.slots.get(id).map(|s| s.module.kind())
    }

    /// What the scheduler counted for module `id`.
    pub fn stats(&self, id: ModuleId) -> Option<ModuleStats> {
        self.slots.get(id).map(|s| s.stats)
    }

    /// Module `id`'s own counters.
    pub fn counters(&self, id: ModuleId) -> Vec<(&'static str, u64)> {
        self.slots
            .get(id)
            .map(|s| s.module.counters())
            .unwrap_or_default()
    }

    /// Module `id`'s counter `name`, if it has one.
    pub fn counter(&self, id: ModuleId, name: &str) -> Option<u64> {
        self.counters(id)
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }

    /// How late the timeouts ran.
    pub fn lateness(&self) -> Lateness {
        self.lateness
    }

    /// The most frames that waited in the queue into module `id`'s input
    /// `inp`.
    pub fn queue_most(&self, id: ModuleId, inp: usize) -> Option<usize> {
        let e = (*self.slots.get(id)?.inputs.get(inp)?)?;
        Some(self.edges[e].most)
    }

    /// Callbacks dispatched so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// True when every module has finished.
    pub fn finished(&self) -> bool {
        self.slots.iter().all(|s| s.finished)
    }

    fn has_room(&self, m: ModuleId) -> bool {
        self.slots[m]
            .outputs
            .iter()
            .flatten()
            .all(|&e| self.edges[e].queue.len() < self.edges[e].cap)
    }

    /// A module is done when it ended (a source) or every input is joined
    /// to a finished module whose queue is empty.
    fn done(&self, m: ModuleId) -> bool {
        let s = &self.slots[m];
        if s.ended {
            return true;
        }
        !s.inputs.is_empty()
            && s.inputs.iter().all(|e| match e {
                Some(e) => {
                    let e = &self.edges[*e];
                    e.queue.is_empty() && self.slots[e.from].finished
                }
                None => true,
            })
    }

    fn dispatch(&mut self, m: ModuleId, now: Instant, work: Work) -> Result<(), ModuleError> {
        self.steps += 1;
        let slot = &mut self.slots[m];
        let mut ctx = Ctx::new(now, slot.outputs.len());
        let t0 = self.profile.then(std::time::Instant::now);
        let r = match work {
            Work::Start => slot.module.start(&mut ctx),
            Work::Timeout(at) => {
                slot.stats.timeouts += 1;
                self.lateness.record(now - at);
                slot.module.timeout(&mut ctx)
            }
            Work::Frame(port, f) => {
                slot.stats.received += 1;
                slot.module.receive(&mut ctx, port, f)
            }
            Work::Finish => {
                slot.finished = true;
                slot.timeout = None;
                slot.module.finish(&mut ctx)
            }
        };
        if let Some(t0) = t0 {
            let ns = t0.elapsed().as_nanos().min(i64::MAX as u128) as i64;
            slot.stats.busy = slot.stats.busy + Duration::from_nanos(ns);
        }
        slot.stats.over_sent += ctx.extra;
        if let Some(t) = ctx.timeout {
            slot.timeout = t.filter(|_| !slot.finished).map(|t| {
                self.seq += 1;
                (t, self.seq)
            });
        }
        if ctx.ended {
            slot.ended = true;
            slot.timeout = None;
        }
        for (port, f) in ctx.sent.into_iter().enumerate() {
            let Some(f) = f else { continue };
            let slot = &mut self.slots[m];
            match slot.outputs[port] {
                Some(e) => {
                    slot.stats.sent += 1;
                    let edge = &mut self.edges[e];
                    // The scheduler dispatched this module only with room
                    // on every output, and a callback sends one frame a
                    // port, so this never exceeds the capacity.
                    edge.queue.push_back(f);
                    edge.most = edge.most.max(edge.queue.len());
                }
                None => slot.stats.unconnected += 1,
            }
        }
        r.map_err(|e| ModuleError(format!("{}: {e}", self.slots[m].module.kind())))
    }

    /// Runs one callback due at `now`, if any; false when nothing is due.
    pub fn step(&mut self, now: Instant) -> Result<bool, ModuleError> {
        if !self.started {
            self.started = true;
            for m in 0..self.slots.len() {
                self.dispatch(m, now, Work::Start)?;
            }
            return Ok(true);
        }
        // 1. The earliest due timeout whose module has room.
        let due = (0..self.slots.len())
            .filter_map(|m| {
                let (t, seq) = self.slots[m].timeout?;
                (t <= now && self.has_room(m)).then_some((t, seq, m))
            })
            .min();
        if let Some((t, _, m)) = due {
            self.slots[m].timeout = None;
            self.dispatch(m, now, Work::Timeout(t))?;
            return Ok(true);
        }
        // 2. A frame for the module furthest downstream that can take one.
        for m in (0..self.slots.len()).rev() {
            if self.slots[m].finished || !self.has_room(m) || !self.slots[m].module.ready(now) {
                continue;
            }
            let waiting = self.slots[m].inputs.iter().enumerate().find_map(|(p, e)| {
                e.filter(|&e| !self.edges[e].queue.is_empty())
                    .map(|e| (p, e))
            });
            if let Some((port, e)) = waiting {
                let f = self.edges[e]
                    .queue
                    .pop_front()
                    .expect("the queue was not empty");
                self.dispatch(m, now, Work::Frame(port, f))?;
                return Ok(true);
            }
        }
        // 3. An end of stream, upstream first.
        for m in 0..self.slots.len() {
            if !self.slots[m].finished && self.done(m) {
                self.dispatch(m, now, Work::Finish)?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The earliest pending timeout.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.slots
            .iter()
            .filter_map(|s| s.timeout.map(|(t, _)| t))
            .min()
    }

    /// The earliest pending timeout of a module with room on its outputs
    /// (the next time [`Pipeline::step`] has something to do, unless a
    /// frame arrives from outside).
    pub fn next_wake(&self) -> Option<Instant> {
        (0..self.slots.len())
            .filter(|&m| self.has_room(m))
            .filter_map(|m| self.slots[m].timeout.map(|(t, _)| t))
            .min()
    }

    /// Schedules module `id`'s timeout at `at` from outside (replacing
    /// one pending): how something that is not a module, a network node
    /// holding the pipeline, wakes a module it feeds.
    pub fn schedule(&mut self, id: ModuleId, at: Instant) {
        if let Some(slot) = self.slots.get_mut(id).filter(|s| !s.finished) {
            self.seq += 1;
            slot.timeout = Some((at, self.seq));
        }
    }

    /// Tells every module not finished yet to finish, upstream first.
    pub fn finish_all(&mut self, now: Instant) -> Result<(), ModuleError> {
        for m in 0..self.slots.len() {
            if !self.slots[m].finished {
                self.dispatch(m, now, Work::Finish)?;
            }
        }
        Ok(())
    }

    /// A report: one line per module (what the scheduler counted, then
    /// the module's own counters), one for the timeouts' lateness.
    pub fn report(&self) -> String {
        use core::fmt::Write as _;
        let mut s = String::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let st = &slot.stats;
            let _ = write!(
                s,
                "  {} {}: received {}, sent {}, timeouts {}",
                i + 1,
                slot.module.kind(),
                st.received,
                st.sent,
                st.timeouts
            );
            if st.unconnected > 0 || st.over_sent > 0 {
                let _ = write!(
                    s,
                    ", discarded {} (no output joined), {} (more than one a callback)",
                    st.unconnected, st.over_sent
                );
            }
            for (k, v) in slot.module.counters() {
                let _ = write!(s, "; {k} {v}");
            }
            s.push('\n');
        }
        let l = &self.lateness;
        let _ = write!(s, "  timeouts: {}", l.total());
        if l.total() > 0 {
            for (i, e) in Lateness::LABELS.iter().enumerate() {
                let _ = write!(s, ", {:.1} % within {e}", 100.0 * l.within(i));
            }
            let mean = Duration::from_nanos(l.sum.as_nanos() / l.total() as i64);
            let _ = write!(s, "; mean {mean}, latest {}", l.max);
        }
        s.push('\n');
        s
    }

    /// Runs until every module has finished or `until` (then every module
    /// is told to finish), taking time from `clock`.
    pub fn run(
        &mut self,
        clock: &mut dyn Clock,
        until: Option<Instant>,
    ) -> Result<RunEnd, ModuleError> {
        loop {
            let now = clock.now();
            if until.is_some_and(|u| now >= u) {
                self.finish_all(now)?;
                return Ok(RunEnd::TimeUp);
            }
            if self.step(now)? {
                continue;
            }
            if self.finished() {
                return Ok(RunEnd::Finished);
            }
            // Nothing is due: wait for the next timeout of a module with
            // room (one without waits for what is downstream, which is
            // itself waiting for a timeout).
            let next = match (self.next_wake(), until) {
                (Some(t), Some(u)) => t.min(u),
                (Some(t), None) => t,
                (None, _) if self.next_timeout().is_some() => {
                    // Only timeouts blocked by full outputs are left, and
                    // nothing downstream will run: a module that neither
                    // takes its input nor schedules a timeout. Stop rather
                    // than spin.
                    return Err(ModuleError(
                        "the pipeline is stuck: a module holds its input and has no timeout to wake it".into(),
                    ));
                }
                (None, Some(u)) => u,
                (None, None) => {
                    // Nothing is due and nothing will be: whatever has not
                    // ended never will.
                    self.finish_all(now)?;
                    return Ok(RunEnd::Finished);
                }
            };
            clock.wait_until(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_buckets_are_cumulative_and_merge() {
        let mut l = Lateness::default();
        for us in [0, 50, 51, 900, 4_000, 25_000] {
            l.record(Duration::from_micros(us));
        }
        // A timeout early (a negative lateness) counts as on time.
        l.record(Duration::from_nanos(-5));
        assert_eq!(l.counts, [3, 1, 1, 1, 0, 0, 0, 1]);
        assert_eq!(l.total(), 7);
        assert!((l.within(0) - 3.0 / 7.0).abs() < 1e-12);
        assert!((l.within(3) - 6.0 / 7.0).abs() < 1e-12);
        assert!((l.within(6) - 6.0 / 7.0).abs() < 1e-12);
        assert_eq!(l.max, Duration::from_millis(25));
        let mut m = Lateness::default();
        m.merge(&l);
        m.merge(&l);
        assert_eq!((m.total(), m.max, m.counts[7]), (14, l.max, 2));
    }

    #[test]
    fn connect_refuses_ports_that_do_not_exist_or_are_taken() {
        let mut p = Pipeline::new();
        let a = p.add(Box::new(super::super::NullSink::new()));
        let b = p.add(Box::new(super::super::Exercise::new()));
        let c = p.add(Box::new(super::super::Exercise::new()));
        assert_eq!(
            p.connect(a, 0, b, 0, 2).unwrap_err().0,
            "null has no free output port 0"
        );
        p.connect(b, 0, c, 0, 2).unwrap();
        assert_eq!(
            p.connect(c, 0, c, 0, 2).unwrap_err().0,
            "exercise has no free input port 0"
        );
        assert!(p.connect(b, 0, c, 0, 0).is_err());
        assert!(p.connect(b, 0, c, 0, MAX_QUEUE + 1).is_err());
    }
}
