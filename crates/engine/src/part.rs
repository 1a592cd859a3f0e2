//! One partition of an engine: the nodes it owns, the halves of the link
//! directions that touch them, and its own event queue. An engine that is
//! not split is one partition; a split engine runs one per worker and
//! passes frames between them as mail ([`crate::Engine`]).

use std::collections::VecDeque;

use aurora_net::accounting::{Place, Side};
use aurora_net::{Frame, Node, Outbox, PortId};
use aurora_time::{Duration, Instant};

use crate::io::{Io, DEVICE_BATCH, HEC_UNCORRECTABLE, INPUT_BATCH, PEER_FULL, POLL_SLICE};
use crate::port::{AnyPort, ByteFifo, Fifo, Port, TAIL_DROP, UNCONNECTED};
use crate::queue::EventQueue;
use crate::{frame_time, DirCounters, DirSpec, DropTap, EngineNode, LinkSpec, NodeId, Tap};

/// A frame on its way to another partition: when it arrives, on which
/// direction, and the frame.
pub(crate) type Mail<F> = (Instant, u32, F);

/// The first value of every node's digest.
pub(crate) const DIGEST_START: u64 = 0xcbf2_9ce4_8422_2325;

/// Stands in a partition for a node another partition runs.
pub(crate) struct Elsewhere(pub(crate) usize);

impl<F: Frame> Node<F> for Elsewhere {
    fn ports(&self) -> usize {
        self.0
    }
    fn receive(&mut self, _: Instant, _: PortId, _: &[F], _: &mut Outbox<F>) {}
    fn poll(&mut self, _: Instant, _: &mut Outbox<F>) {}
    fn poll_at(&self) -> Option<Instant> {
        None
    }
}

pub(crate) struct Dir<F> {
    from: (u32, PortId),
    pub(crate) to: (u32, PortId),
    pub(crate) spec: LinkSpec,
    cell_time: Duration,
    /// A fixed line's port is full when its line has more than this left
    /// to send: (buffer − 1) cell times (see [`Dir::occupancy`]).
    full_after: Duration,
    /// No loss and no bit errors: a frame crosses untouched.
    clean: bool,
    /// Every frame takes `cell_time` (no per-byte terms). Such a line
    /// under a FIFO port needs no event per frame: a frame accepted at
    /// `now` starts when the line has sent everything accepted before it,
    /// so its start, arrival and the port's occupancy are computed when
    /// it is accepted (see [`Dir::occupancy`]).
    fixed: bool,
    /// A fixed line under a FIFO port, its receiver never holding its
    /// input: computed in closed form.
    closed: bool,
    /// The sending port's queue; the line pulls from it (not used when
    /// the line is `closed`).
    pub(crate) port: AnyPort<F>,
    /// When the line finishes sending its current frame (a fixed line:
    /// the last frame accepted).
    busy_until: Instant,
    /// A `TxDone` is in the queue: frames wait, and the line will pull the
    /// next when it is free. (An idle port with nothing waiting needs no
    /// event: a frame sent to it goes straight to the line.)
    pulling: bool,
    /// The receiving node may hold its input ([`Node::holds_input`]): the
    /// line is never computed in closed form.
    pub(crate) held: bool,
    /// The line starts no frame before this: the receiver's hold, less
    /// the least time a frame takes to cross (so nothing arrives before
    /// the time the receiver asked for).
    hold_until: Instant,
    rng: u64,
    pub(crate) counters: DirCounters,
    /// When each cell on the wire arrives, in arrival order (a link is
    /// FIFO); only the head has an event in the queue.
    arrive_at: VecDeque<Instant>,
    /// The cells on the wire, in the same order (apart from their times,
    /// so a run of them reaches a node as one slice).
    arrivals: VecDeque<F>,
    /// The far end is outside the engine: delivered frames go to external
    /// output number this (of the partition's [`Io`]).
    pub(crate) external: Option<u32>,
}

impl<F: Frame> Dir<F> {
    /// The direction `d` describes, its random stream seeded from the
    /// run's `seed` and `d.stream`.
    pub(crate) fn new(d: &DirSpec, seed: u64) -> Self {
        let spec = d.spec;
        let cell_time = frame_time(&spec, 0);
        let fixed = spec.per_byte == Duration::ZERO && spec.handshake_per_byte == Duration::ZERO;
        let mut dir = Dir {
            from: d.from,
            to: d.to,
            spec,
            cell_time,
            full_after: Duration::from_nanos(
                cell_time
                    .as_nanos()
                    .saturating_mul(i64::try_from(spec.buffer.max(1) - 1).unwrap_or(i64::MAX)),
            ),
            clean: spec.loss <= 0.0 && spec.bit_error <= 0.0,
            fixed,
            closed: fixed && !d.held && spec.buffer_bytes.is_none(),
            port: Self::first_port(&spec),
            busy_until: Instant::ZERO,
            pulling: false,
            held: d.held,
            hold_until: Instant::ZERO,
            rng: 0,
            counters: DirCounters::default(),
            arrive_at: VecDeque::new(),
            arrivals: VecDeque::new(),
            external: None,
        };
        dir.reseed(d.stream, seed);
        dir
    }

    /// Draws from the stream of direction number `k`.
    pub(crate) fn reseed(&mut self, k: u32, seed: u64) {
        let mix = seed ^ (u64::from(k) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.rng = mix | 1;
    }

    /// The sending port a direction of `spec` starts with: a FIFO, bounded
    /// in bytes too if the spec says so.
    fn first_port(spec: &LinkSpec) -> AnyPort<F> {
        match spec.buffer_bytes {
            None => AnyPort::Fifo(Fifo::new(spec.buffer)),
            Some(bytes) => AnyPort::Other(Box::new(ByteFifo::new(spec.buffer, bytes))),
        }
    }

    /// Puts the sending port under `port`'s discipline: the line pulls
    /// from it, event by event.
    pub(crate) fn set_port(&mut self, port: Box<dyn Port<F>>) {
        self.port = AnyPort::Other(port);
        self.closed = false;
    }

    /// The receiver asks that nothing arrive before `until`: the line
    /// starts nothing before `until` less the least crossing. A hold only
    /// lengthens.
    fn hold(&mut self, until: Instant) {
        let start = until - self.least_crossing();
        self.hold_until = self.hold_until.max(start);
    }

    /// When the line may start its next frame: free, and not held.
    #[inline]
    fn free_at(&self) -> Instant {
        self.busy_until.max(self.hold_until)
    }

    /// The sending port's discipline, if it is not the FIFO.
    pub(crate) fn take_port(&mut self) -> Option<Box<dyn Port<F>>> {
        match std::mem::replace(&mut self.port, AnyPort::Fifo(Fifo::new(self.spec.buffer))) {
            AnyPort::Other(p) => Some(p),
            AnyPort::Fifo(_) => None,
        }
    }

    /// The least time a frame takes from the sending port to the far end:
    /// the lookahead this direction gives when it joins two partitions.
    pub(crate) fn least_crossing(&self) -> Duration {
        self.spec.delay + self.cell_time
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A fixed line's FIFO at `now`: frames accepted and not yet sent
    /// (the one on the line and those waiting), as the event-driven port
    /// would hold them (the frame whose sending ends at `now` is gone).
    #[inline]
    pub(crate) fn occupancy(&self, now: Instant) -> u64 {
        let left = (self.busy_until - now).as_nanos();
        if left <= 0 {
            return 0;
        }
        let c = self.cell_time.as_nanos().max(1);
        ((left + c - 1) / c) as u64
    }

    /// The last `take` frames of the queue (direction `k`'s) were just put
    /// there (a closed-form FIFO line): they go one cell time after another
    /// from when the line is free, and arrive a delay later; if they are
    /// the queue's first, their delivery goes into `events`.
    #[inline]
    fn line_up(
        &mut self,
        k: u32,
        take: usize,
        now: Instant,
        events: &mut EventQueue<(Instant, Kind)>,
    ) {
        let first = self.arrivals.len() == take;
        let start = self.busy_until.max(now);
        let c = self.cell_time.as_nanos();
        let delay = self.spec.delay;
        // Each arrival one cell time after the one before: in plain
        // nanoseconds when the last is (no saturation on the way), else
        // step by step as the clock adds.
        let base = (start + delay).as_nanos();
        let last = start + Duration::from_nanos(c * take as i64) + delay;
        if base.checked_add(c * take as i64) == Some(last.as_nanos()) {
            self.arrive_at
                .extend((1..=take as i64).map(|i| Instant::from_nanos(base + c * i)));
        } else {
            self.arrive_at
                .extend((1..=take as i64).map(|i| start + Duration::from_nanos(c * i) + delay));
        }
        self.busy_until = start + Duration::from_nanos(c * take as i64);
        if first {
            events.push((start + self.cell_time + delay, Kind::Deliver { dir: k }));
        }
    }

    /// Cells a closed-form FIFO line has room for at `now`.
    fn room(&self, now: Instant) -> u64 {
        (self.spec.buffer.max(1) as u64).saturating_sub(self.occupancy(now))
    }

    /// Frames waiting in the sending port, not counting one on the line.
    pub(crate) fn waiting(&self, now: Instant) -> usize {
        if self.closed {
            self.occupancy(now).saturating_sub(1) as usize
        } else {
            self.port.len()
        }
    }

    /// Whether the sending port is at least half full at `now`, in frames
    /// or in bytes (a host adapter then takes nothing more from its host).
    pub(crate) fn half_full(&self, now: Instant) -> bool {
        let held = if self.closed {
            self.occupancy(now)
        } else {
            self.port.len() as u64 + u64::from(self.busy_until > now)
        };
        held * 2 >= self.spec.buffer.max(1) as u64 || self.port.bytes_half_full()
    }

    /// Frames sent into the direction and not yet delivered: waiting in
    /// its port and on the wire (a closed-form line puts a frame on the
    /// wire, with its times, as soon as it is accepted).
    fn undelivered(&self) -> u64 {
        let waiting = if self.closed { 0 } else { self.port.len() };
        (waiting + self.arrivals.len()) as u64
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next() >> 11) as f64) < p * (1u64 << 53) as f64
    }
}

/// What happens at an event. Each link direction has at most one event of
/// each kind in the queue (its line pulling the next waiting frame, the
/// head of its arrivals), so the queue holds a few entries per link and
/// node, not one per cell in flight; and (time, kind, number) orders events
/// without a counter of when they were made. A line that frees at `t`
/// pulls before anything else happens at `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    TxDone { dir: u32 },
    Deliver { dir: u32 },
    Wake { node: u32 },
}

/// How the engine's loop meets its clock: nothing to wait for in virtual
/// time; in wall time, wait for each event and measure its lateness.
pub(crate) trait Pace {
    /// Called before the event at `at` for `node` runs.
    fn before(&mut self, at: Instant, node: u32);
}

pub(crate) struct Virtual;

impl Pace for Virtual {
    #[inline(always)]
    fn before(&mut self, _at: Instant, _node: u32) {}
}

impl Pace for crate::clock::Pacer {
    #[inline]
    fn before(&mut self, at: Instant, node: u32) {
        let late = self.wait_until(at);
        self.record(node, late);
    }
}

/// A value alone on its cache lines (and on the pair a CPU fetches
/// together).
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Padded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// One partition.
///
/// Aligned to 128 bytes, as is its outbox: the partitions lie side by side
/// in the engine's vector, each written on every event by its own worker,
/// and must not share a cache line, or the pair of lines a CPU fetches
/// together. (On an Intel Xeon, two workers ran 1.4 times one worker's
/// events a second without this, 2 times with it and the outbox boxed.)
#[repr(align(128))]
pub(crate) struct Part<F: Frame> {
    /// Every node of the engine: the ones this partition runs, and
    /// [`Elsewhere`] for the rest.
    pub(crate) nodes: Vec<Box<dyn EngineNode<F>>>,
    /// Per node, per port: the direction leaving it.
    pub(crate) out: Vec<Vec<Option<u32>>>,
    /// Every direction; this partition uses the sending half of those
    /// leaving its nodes and the arriving half of those reaching them.
    pub(crate) dirs: Vec<Dir<F>>,
    /// Per direction: the partition its far end is in, when that is not
    /// this one.
    pub(crate) remote: Vec<Option<u32>>,
    /// Frames for other partitions, by partition.
    pub(crate) outgoing: Vec<Vec<Mail<F>>>,
    queue: EventQueue<(Instant, Kind)>,
    wake: Vec<Option<Instant>>,
    pub(crate) now: Instant,
    /// Per receiving node, a digest of what it received.
    pub(crate) digests: Vec<u64>,
    /// Per node, per input port: the directions feeding it whose lines
    /// this partition runs and that the node may hold.
    inputs: Vec<Vec<Vec<u32>>>,
    pub(crate) events: u64,
    pub(crate) unconnected: u64,
    pub(crate) in_flight: u64,
    /// Where a running node puts what it sends, kept between events for
    /// its allocations; lent out, boxed, while a node runs (a move of one
    /// pointer, not of the whole outbox, each event). See
    /// `Part::lend_outbox`.
    pub(crate) outbox: Option<Box<Padded<Outbox<F>>>>,
    pub(crate) tap: Option<Tap<F>>,
    /// No partition of the engine has external I/O, so a run can be
    /// repeated and the partition keeps digests of what its nodes receive.
    pub(crate) repeatable: bool,
    pub(crate) drop_tap: Option<DropTap<F>>,
    pub(crate) boundary_tap: Option<crate::BoundaryTap<F>>,
    /// External link ends and packet devices.
    pub(crate) io: Io<F>,
    /// The latest arrival time a delivery may take along with the event's
    /// own: in a wall-clock run, every cell on the same link already due
    /// by the wall clock (one event hands them over as one slice, at the
    /// last one's time); in virtual time, none later than the event.
    horizon: Instant,
}

impl<F: Frame> Part<F> {
    pub(crate) fn new(parts: usize) -> Self {
        Part {
            nodes: Vec::new(),
            out: Vec::new(),
            dirs: Vec::new(),
            remote: Vec::new(),
            outgoing: (0..parts).map(|_| Vec::new()).collect(),
            queue: EventQueue::new(),
            wake: Vec::new(),
            now: Instant::ZERO,
            digests: Vec::new(),
            inputs: Vec::new(),
            events: 0,
            unconnected: 0,
            in_flight: 0,
            outbox: Some(Box::default()),
            tap: None,
            repeatable: true,
            drop_tap: None,
            boundary_tap: None,
            io: Io::default(),
            horizon: Instant::ZERO,
        }
    }

    /// Adds a node (this partition's, or a stand-in), and schedules its
    /// first wake-up if it is this partition's.
    pub(crate) fn push_node(&mut self, node: Box<dyn EngineNode<F>>, mine: bool) {
        let id = self.nodes.len() as u32;
        self.out.push(vec![None; node.ports()]);
        self.inputs.push(vec![Vec::new(); node.ports()]);
        self.nodes.push(node);
        self.wake.push(None);
        self.digests.push(DIGEST_START);
        if mine {
            self.schedule_wake(id);
        }
    }

    /// Adds direction `k` (the next one), and says whether its far end is
    /// in partition `far` rather than this one `me`.
    pub(crate) fn push_dir(&mut self, dir: Dir<F>, me: u32, near: u32, far: u32) {
        let k = self.dirs.len() as u32;
        self.out[dir.from.0 as usize][usize::from(dir.from.1)] = Some(k);
        self.remote.push((near == me && far != me).then_some(far));
        if dir.held && near == me && far == me {
            // A hold reaches only a line in the receiver's own partition.
            if let Some(v) = self.inputs[dir.to.0 as usize].get_mut(usize::from(dir.to.1)) {
                v.push(k);
            }
        }
        self.dirs.push(dir);
    }

    /// Shows `f` every frame this partition holds between a sending node
    /// and a receiving one, with the sending end of its link: waiting in
    /// a port, on a line, or in the mail for another partition.
    pub(crate) fn for_each_in_flight(&self, f: &mut dyn FnMut((u32, PortId), &F)) {
        for d in &self.dirs {
            d.port.for_each(&mut |x| f(d.from, x));
            d.arrivals.iter().for_each(|x| f(d.from, x));
        }
        for (_, k, x) in self.outgoing.iter().flatten() {
            f(self.dirs[*k as usize].from, x);
        }
    }

    /// The time of the next event, if any.
    pub(crate) fn next_time(&self) -> Option<Instant> {
        self.queue.peek().map(|(t, _)| t)
    }

    /// Takes frames other partitions sent to this one's nodes.
    pub(crate) fn accept(&mut self, mail: Vec<Mail<F>>) {
        for (t, k, f) in mail {
            self.arrive(k, t, f);
        }
    }

    pub(crate) fn run_paced<P: Pace>(&mut self, end: Instant, pace: &mut P) {
        while let Some((at, kind)) = self.queue.peek() {
            if at > end {
                break;
            }
            pace.before(at, self.node_of(kind));
            self.queue.pop();
            self.step(at, kind);
        }
        self.now = self.now.max(end);
        if !self.io.outs.is_empty() {
            // Lateness of the hand-over is a wall-clock run's, and such a
            // run with external outputs goes through `run_wall_io`.
            self.flush_outputs(&mut |_, _| {});
        }
    }

    /// The node an event belongs to (whose lateness it counts in).
    #[inline]
    fn node_of(&self, kind: Kind) -> u32 {
        match kind {
            Kind::TxDone { dir } => self.dirs[dir as usize].from.0,
            Kind::Deliver { dir } => self.dirs[dir as usize].to.0,
            Kind::Wake { node } => node,
        }
    }

    /// Runs until `end` against the wall clock, polling the external
    /// inputs and devices between events and at least every
    /// [`POLL_SLICE`] while waiting, and handing delivered frames to the
    /// external outputs after every batch of events. Returns once the wall
    /// clock has reached `end`.
    pub(crate) fn run_wall_io(&mut self, end: Instant, pacer: &mut crate::clock::Pacer) {
        /// Events run between two polls when behind.
        const EVENTS_PER_POLL: u32 = 64;
        loop {
            let wall = pacer.now();
            let mut ran = 0;
            while let Some((at, kind)) = self.queue.peek() {
                if at > end || at > wall || ran == EVENTS_PER_POLL {
                    break;
                }
                pacer.record(self.node_of(kind), (wall - at).as_nanos().unsigned_abs());
                self.queue.pop();
                // A delivery also hands over the cells behind it on its
                // link that are due by now.
                self.horizon = wall.min(end);
                self.step(at, kind);
                ran += 1;
            }
            self.horizon = Instant::ZERO;
            // Input arrives now: not before the last event, not after the
            // next one (time never runs backwards for a node) or the end.
            let next = self.queue.peek().map_or(end, |(t, _)| t.min(end));
            let t = wall.min(next).max(self.now);
            let more = self.poll_io(t, &mut |node, waited| pacer.record_input(node, waited));
            self.flush_outputs(&mut |node, due| pacer.record(node, pacer.late_since(due)));
            // Behind, or an input or device had more than one poll takes:
            // go round again at once rather than sleep.
            if ran == EVENTS_PER_POLL || more {
                continue;
            }
            let next = self.queue.peek().map_or(end, |(t, _)| t.min(end));
            if wall >= end && next >= end {
                break;
            }
            if next > wall {
                pacer.sleep_until(next.min(wall + POLL_SLICE));
            }
        }
        // Events due exactly at `end`.
        while let Some((at, kind)) = self.queue.peek() {
            if at > end {
                break;
            }
            let late = (pacer.now() - at).as_nanos().max(0).unsigned_abs();
            pacer.record(self.node_of(kind), late);
            self.queue.pop();
            self.step(at, kind);
        }
        self.now = self.now.max(end);
        self.flush_outputs(&mut |node, due| pacer.record(node, pacer.late_since(due)));
    }

    /// Reads what waits on the external inputs and devices, and hands it
    /// to the nodes at `t`; true if an input or device gave a whole
    /// batch (more may be waiting). `waited` hears, per read that handed
    /// frames to a node, how long (ns) the oldest of them had waited in
    /// its link, where the link can tell.
    pub(crate) fn poll_io(&mut self, t: Instant, waited: &mut dyn FnMut(u32, u64)) -> bool {
        let t = t.max(self.now);
        self.now = t;
        let mut batch = std::mem::take(&mut self.io.batch);
        let mut more = false;
        for i in 0..self.io.ins.len() {
            let (node, port) = (self.io.ins[i].node, self.io.ins[i].port);
            batch.clear();
            // A broken or closed link stays quiet; its counters say why.
            let n = self.io.ins[i]
                .src
                .recv(&mut batch, INPUT_BATCH)
                .unwrap_or(0);
            let (tap, side) = (&mut self.drop_tap, Side::In);
            self.io.ins[i].src.take_discarded(&mut |c| {
                tap_drop(tap, t, Place { node, port, side }, HEC_UNCORRECTABLE, c)
            });
            more |= n >= INPUT_BATCH;
            if n == 0 || batch.is_empty() {
                continue;
            }
            if let Some(w) = self.io.ins[i].src.waited() {
                waited(node, u64::try_from(w.as_nanos()).unwrap_or(u64::MAX));
            }
            self.events += 1;
            if let Some(tap) = self.boundary_tap.as_mut() {
                tap(
                    Place {
                        node,
                        port,
                        side: Side::In,
                    },
                    &batch,
                );
            }
            if let Some(tap) = self.tap.as_mut() {
                for c in &batch {
                    tap(t, NodeId(node), port, c);
                }
            }
            self.run_node(node, |n, out| n.receive(t, port, &batch, out));
        }
        batch.clear();
        self.io.batch = batch;
        for i in 0..self.io.devs.len() {
            more |= self.device_turn(i, t);
        }
        more
    }

    /// See [`crate::Engine::drain_external_inputs`].
    pub(crate) fn drain_inputs(&mut self, max: usize, f: &mut dyn FnMut(Place, &[F])) {
        let mut batch = Vec::new();
        let now = self.now;
        for i in &mut self.io.ins {
            let place = Place {
                node: i.node,
                port: i.port,
                side: Side::In,
            };
            let mut read = 0;
            while read < max {
                batch.clear();
                let n = i
                    .src
                    .recv(&mut batch, INPUT_BATCH.min(max - read))
                    .unwrap_or(0);
                let tap = &mut self.drop_tap;
                i.src
                    .take_discarded(&mut |c| tap_drop(tap, now, place, HEC_UNCORRECTABLE, c));
                if n == 0 || batch.is_empty() {
                    break;
                }
                read += n;
                f(place, &batch);
            }
        }
    }

    /// Whether, on a link of `node` to another process whose far end says
    /// how much may wait for it (a shared-memory ring), half of that is
    /// taken by frames waiting there, staged for it, or not yet delivered
    /// by the line (in the sending port and on the wire).
    fn peer_half_full(&self, node: u32) -> bool {
        self.io.outs.iter().filter(|o| o.node == node).any(|o| {
            let Some((used, cap)) = o.sink.waiting() else {
                return false;
            };
            let line = self.out[node as usize]
                .get(usize::from(o.port))
                .copied()
                .flatten()
                .map_or(0, |k| self.dirs[k as usize].undelivered());
            let held = line + (used + o.staged.len()) as u64;
            held * 2 >= cap.max(1) as u64
        })
    }

    /// Moves packets between device `i` and its node's packet port. The
    /// node takes packets from its device only while every output port
    /// of it is under half full, and every link of it to another process
    /// that can say so has under half of what may wait at its far end
    /// taken: as a host adapter, it leaves what it has no room for in its
    /// host's queue (the host's stack then waits, as it would for a busy
    /// interface) rather than take and drop it.
    /// True if it read a whole batch (more may be waiting).
    fn device_turn(&mut self, i: usize, t: Instant) -> bool {
        let node = self.io.devs[i].node;
        let mut out = Self::lend_outbox(&mut self.outbox, &self.drop_tap);
        if self.nodes[node as usize].packet_port().is_none() {
            self.outbox = Some(out);
            return false;
        }
        let mut sent = false;
        let mut read = 0;
        for _ in 0..DEVICE_BATCH {
            let full = self.out[node as usize]
                .iter()
                .flatten()
                .any(|&k| self.dirs[k as usize].half_full(t))
                || self.peer_half_full(node);
            if full {
                break;
            }
            let d = &mut self.io.devs[i];
            let Some(port) = self.nodes[node as usize].packet_port() else {
                break;
            };
            match d.dev.recv(&mut d.buf) {
                Ok(Some(n)) => {
                    read += 1;
                    d.counters.from_device += 1;
                    port.host_sent(t, &d.buf[..n.min(d.buf.len())], &mut out);
                    sent = true;
                    // Into the output port now, so the next look at it
                    // counts this packet's cells.
                    self.route(node, &mut out);
                }
                Ok(None) => break,
                Err(_) => {
                    d.counters.errors += 1;
                    break;
                }
            }
        }
        if let Some(port) = self.nodes[node as usize].packet_port() {
            if port.to_host_len() > 0 {
                let d = &mut self.io.devs[i];
                let (dev, c) = (&mut d.dev, &mut d.counters);
                port.drain_to_host(&mut |p| match dev.send(p) {
                    Ok(true) => c.to_device += 1,
                    Ok(false) => c.device_full += 1,
                    Err(_) => c.errors += 1,
                });
            }
        }
        if sent {
            self.events += 1;
        }
        self.outbox = Some(out);
        self.schedule_wake(node);
        read == DEVICE_BATCH
    }

    /// Hands the frames delivered to external outputs to their sinks;
    /// what a sink refuses is dropped ([`PEER_FULL`]). `handed` hears, per
    /// batch handed over, its node and when its oldest frame was due.
    pub(crate) fn flush_outputs(&mut self, handed: &mut dyn FnMut(u32, Instant)) {
        let now = self.now;
        for o in &mut self.io.outs {
            if let Some(due) = o.due.take() {
                handed(o.node, due);
            }
            if !o.staged.is_empty() {
                let took = o.sink.send(&o.staged).unwrap_or(0).min(o.staged.len());
                let (node, port, side) = (o.node, o.port, Side::Out);
                if let Some(tap) = self.boundary_tap.as_mut() {
                    tap(Place { node, port, side }, &o.staged[..took]);
                }
                for f in o.staged.drain(..).skip(took) {
                    o.refused += 1;
                    tap_drop(
                        &mut self.drop_tap,
                        now,
                        Place { node, port, side },
                        PEER_FULL,
                        &f,
                    );
                }
            }
            let _ = o.sink.flush();
        }
    }

    /// Queues the delivery of the next frame on direction `dir`, if any.
    #[inline]
    fn next_delivery(&mut self, dir: u32) {
        if let Some(&t) = self.dirs[dir as usize].arrive_at.front() {
            self.queue.push((t, Kind::Deliver { dir }));
        }
    }

    /// Runs one event.
    #[inline]
    fn step(&mut self, at: Instant, kind: Kind) {
        // The time the event was scheduled for: what a wake is known by.
        let due = at;
        {
            // Time never runs backwards: an event that a wall-clock run
            // reaches after a batch took the clock past it runs then (it
            // is late, and its lateness was recorded before it ran). In
            // virtual time events come in order and this changes nothing.
            let at = at.max(self.now);
            self.now = at;
            self.events += 1;
            match kind {
                Kind::TxDone { dir } => {
                    let d = &mut self.dirs[dir as usize];
                    if d.hold_until > at {
                        // Held since the pull was planned: pull then.
                        self.queue.push((d.hold_until, Kind::TxDone { dir }));
                        return;
                    }
                    d.pulling = false;
                    if let Some(f) = d.port.dequeue(at) {
                        self.transmit(dir, f);
                    }
                }
                Kind::Deliver { dir } => {
                    let k = dir as usize;
                    // The head, and the cells behind it due by the horizon.
                    let horizon = self.horizon.max(at);
                    let d = &mut self.dirs[k];
                    let n = d.arrive_at.iter().take_while(|&&t| t <= horizon).count();
                    let Some(&last) = n.checked_sub(1).and_then(|i| d.arrive_at.get(i)) else {
                        return;
                    };
                    // The batch arrives with its last cell.
                    let last = last.max(at);
                    self.now = last;
                    self.in_flight -= n as u64;
                    d.counters.delivered += n as u64;
                    if let Some(x) = d.external {
                        let o = &mut self.io.outs[x as usize];
                        if let Some(&first) = d.arrive_at.front() {
                            o.due.get_or_insert(first);
                        }
                        d.arrive_at.drain(..n);
                        o.staged.extend(d.arrivals.drain(..n));
                        self.next_delivery(dir);
                    } else {
                        let (node, port) = d.to;
                        let mut out = Self::lend_outbox(&mut self.outbox, &self.drop_tap);
                        // An engine with external I/O cannot repeat its
                        // run, so it keeps no digest of it.
                        if self.repeatable {
                            let digest_of = &mut self.digests[node as usize];
                            for (t, cell) in d.arrive_at.iter().zip(&d.arrivals).take(n) {
                                digest(digest_of, *t, port, cell.bytes());
                            }
                        }
                        if let Some(tap) = self.tap.as_mut() {
                            for (t, cell) in d.arrive_at.iter().zip(&d.arrivals).take(n) {
                                tap(*t, NodeId(node), port, cell);
                            }
                        }
                        // The node reads the cells where they lie in the
                        // link's arrivals (at most two slices of its ring):
                        // no copy on the way in.
                        let (first, second) = d.arrivals.as_slices();
                        let in_first = n.min(first.len());
                        let receiver = &mut self.nodes[node as usize];
                        receiver.receive(last, port, &first[..in_first], &mut out);
                        if n > in_first {
                            receiver.receive(last, port, &second[..n - in_first], &mut out);
                        }
                        d.arrive_at.drain(..n);
                        d.arrivals.drain(..n);
                        // Before the node's frames go out: one of them may
                        // come back on this same link.
                        self.next_delivery(dir);
                        self.route(node, &mut out);
                        self.outbox = Some(out);
                        self.schedule_wake(node);
                    }
                }
                Kind::Wake { node } => {
                    // Known by the time it was scheduled for, not the time it
                    // runs: under the wall clock a batch delivered before it
                    // may have moved the clock past it, and the wake is
                    // still the node's.
                    if self.wake[node as usize] != Some(due) {
                        return; // superseded
                    }
                    self.wake[node as usize] = None;
                    self.run_node(node, |n, out| n.poll(at, out));
                }
            }
        }
    }

    pub(crate) fn schedule_wake(&mut self, node: u32) {
        let Some(t) = self.nodes[node as usize].poll_at() else {
            return;
        };
        let t = t.max(self.now);
        if self.wake[node as usize].is_none_or(|w| t < w) {
            self.wake[node as usize] = Some(t);
            self.queue.push((t, Kind::Wake { node }));
        }
    }

    /// Puts a node's sent frames in its output ports (starting the line of
    /// an idle one), and shows the frames it dropped to the drop tap.
    fn route(&mut self, node: u32, out: &mut Outbox<F>) {
        let now = self.now;
        for (port, until) in out.drain_holds() {
            if let Some(ks) = self.inputs[node as usize].get(usize::from(port)) {
                for &k in ks {
                    self.dirs[k as usize].hold(until);
                }
            }
        }
        if let Some(t) = self.drop_tap.as_mut() {
            for (port, cell, why) in out.drain_drops() {
                let side = Side::In;
                t(now, Place { node, port, side }, why, &cell);
            }
        }
        // (A short run is cheaper to copy.)
        if out.len() >= SWAP_AT_LEAST && self.swap_onto_line(node, out) {
            return;
        }
        let (mut runs, mut cells) = out.drain_runs();
        // The run being routed: its port, and how many of its cells are left.
        let (mut port, mut left) = (0, 0usize);
        loop {
            if left == 0 {
                let Some((p, n)) = runs.next() else {
                    break;
                };
                (port, left) = (p, n as usize);
                continue;
            }
            let Some(Some(k)) = self.out[node as usize].get(usize::from(port)).copied() else {
                self.unconnected += left as u64;
                let side = Side::Out;
                for f in cells.by_ref().take(left) {
                    tap_drop(
                        &mut self.drop_tap,
                        now,
                        Place { node, port, side },
                        UNCONNECTED,
                        &f,
                    );
                }
                left = 0;
                continue;
            };
            let d = &mut self.dirs[k as usize];
            if d.closed && d.clean && self.remote[k as usize].is_none() {
                // The common case, a run of cells for one port at a time:
                // a FIFO on a fixed, clean line in this partition holds
                // `buffer` cells, so of the run as many go as it has room
                // for, each one cell time after the one before, and the
                // rest are refused.
                let rest = cells.as_slice();
                let run = left.min(rest.len());
                if run == 0 {
                    break;
                }
                let take = (run as u64).min(d.room(now)) as usize;
                d.counters.offered += run as u64;
                if take > 0 {
                    F::extend_queue(&mut d.arrivals, &rest[..take]);
                    d.line_up(k, take, now, &mut self.queue);
                    self.in_flight += take as u64;
                }
                let d = &mut self.dirs[k as usize];
                d.counters.overflow += (run - take) as u64;
                if let Some(t) = self.drop_tap.as_mut() {
                    let side = Side::Out;
                    for f in &rest[take..run] {
                        t(now, Place { node, port, side }, TAIL_DROP, f);
                    }
                }
                cells.nth(run - 1);
                left = 0;
                continue;
            }
            let Some(cell) = cells.next() else {
                break;
            };
            left -= 1;
            d.counters.offered += 1;
            if d.closed {
                // A FIFO on a fixed line, in closed form: the frame is
                // refused if the port holds its buffer's worth, else it
                // starts when everything before it has been sent.
                if d.busy_until - now > d.full_after {
                    d.counters.overflow += 1;
                    let place = Place {
                        node,
                        port,
                        side: Side::Out,
                    };
                    tap_drop(&mut self.drop_tap, now, place, TAIL_DROP, &cell);
                    continue;
                }
                let done = d.busy_until.max(now) + d.cell_time;
                d.busy_until = done;
                self.launch(k, cell, done);
                continue;
            }
            let on_line = usize::from(d.busy_until > now);
            let accepted = if on_line == 0 && !d.pulling && d.hold_until <= now {
                // An idle line and nothing waiting: the discipline says at
                // once whether the frame goes (most frames, at light load).
                match d.port.pass(cell, now) {
                    Ok(Some(f)) => {
                        self.transmit(k, f);
                        continue;
                    }
                    Ok(None) => continue,
                    Err(e) => Err(e),
                }
            } else {
                d.port.enqueue(cell, now, on_line)
            };
            match accepted {
                Ok(()) => {
                    if d.pulling {
                        // The line pulls when it is free.
                    } else {
                        d.pulling = true;
                        let t = d.free_at().max(now);
                        self.queue.push((t, Kind::TxDone { dir: k }));
                    }
                }
                Err((cell, why)) => {
                    d.counters.overflow += 1;
                    let place = Place {
                        node,
                        port,
                        side: Side::Out,
                    };
                    tap_drop(&mut self.drop_tap, now, place, why, &cell);
                }
            }
        }
    }

    /// The common case of a busy path: everything `node` sent goes to one
    /// port whose line (a FIFO on a fixed, clean line in this partition) is
    /// empty and has room for all of it. The outbox's frames then become the
    /// line's queue without a copy (the outbox keeps the queue's old
    /// allocation). False, and nothing done, otherwise.
    #[inline(never)]
    fn swap_onto_line(&mut self, node: u32, out: &mut Outbox<F>) -> bool {
        let n = out.len();
        let Some(port) = out.single_port() else {
            return false;
        };
        let Some(Some(k)) = self.out[node as usize].get(usize::from(port)).copied() else {
            return false;
        };
        let d = &mut self.dirs[k as usize];
        // The line's queue takes the outbox's frames and gives the outbox
        // its own allocation, which must hold at least as many frames as
        // the outbox just held (else the outbox would grow again at its
        // next run this long): so the first long run onto a line is
        // copied, growing the line's queue.
        let fits = d.arrivals.is_empty()
            && d.arrivals.capacity() >= n
            && d.closed
            && d.clean
            && self.remote[k as usize].is_none()
            && n as u64 <= d.room(self.now);
        if !fits {
            return false;
        }
        // The queue is empty: so is the vector made of its allocation.
        let mut frames = Vec::from(std::mem::take(&mut d.arrivals));
        out.swap_frames(&mut frames);
        d.arrivals = VecDeque::from(frames);
        d.counters.offered += n as u64;
        d.line_up(k, n, self.now, &mut self.queue);
        self.in_flight += n as u64;
        true
    }

    /// Puts `cell` on direction `k`'s idle line now: it is sent, then
    /// crosses the link (or is lost on the way, or damaged).
    fn transmit(&mut self, k: u32, cell: F) {
        let now = self.now;
        let d = &mut self.dirs[k as usize];
        let time = if d.fixed {
            d.cell_time
        } else {
            frame_time(&d.spec, cell.bytes().len())
        };
        let done = now + time;
        d.busy_until = done;
        if !d.port.is_empty() {
            d.pulling = true;
            self.queue.push((done, Kind::TxDone { dir: k }));
        }
        self.launch(k, cell, done);
    }

    /// `cell`, sent on direction `k` and done at `done`, crosses the link
    /// (or is lost on the way, or damaged). Loss and bit errors are drawn
    /// in the order frames are sent, so from the same stream whether the
    /// line is computed in closed form or event by event.
    fn launch(&mut self, k: u32, mut cell: F, done: Instant) {
        let now = self.now;
        let d = &mut self.dirs[k as usize];
        if d.chance(d.spec.loss) {
            d.counters.lost += 1;
            let ((node, port), side) = (d.from, Side::Out);
            tap_drop(
                &mut self.drop_tap,
                now,
                Place { node, port, side },
                "link_loss",
                &cell,
            );
            return;
        }
        let bits = cell.bytes().len() as u64 * 8;
        if bits > 0 && d.chance(d.spec.bit_error) {
            let bit = (d.next() % bits) as usize;
            cell.bytes_mut()[bit / 8] ^= 0x80 >> (bit % 8);
            d.counters.errored += 1;
        }
        let arrive = done + d.spec.delay;
        if let Some(p) = self.remote[k as usize] {
            // The far end runs elsewhere: the frame travels as mail, and
            // is in flight there from when it is accepted.
            self.outgoing[p as usize].push((arrive, k, cell));
            return;
        }
        self.arrive(k, arrive, cell);
    }

    /// Frame `f` is on its way along direction `k`, to arrive at `t`.
    #[inline]
    fn arrive(&mut self, k: u32, t: Instant, f: F) {
        self.in_flight += 1;
        let d = &mut self.dirs[k as usize];
        let first = d.arrivals.is_empty();
        d.arrive_at.push_back(t);
        d.arrivals.push_back(f);
        if first {
            self.queue.push((t, Kind::Deliver { dir: k }));
        }
    }

    /// The outbox, lent to a node about to run (put back with
    /// `self.outbox = Some(out)`). It is always here between node runs;
    /// only if a caller caught a panic from a node or tap can it be
    /// missing, and a new one then reports drops as the taps ask. (A
    /// function of the two fields, so that a link direction may stay
    /// borrowed meanwhile.)
    #[inline]
    fn lend_outbox(
        outbox: &mut Option<Box<Padded<Outbox<F>>>>,
        drop_tap: &Option<DropTap<F>>,
    ) -> Box<Padded<Outbox<F>>> {
        outbox.take().unwrap_or_else(|| {
            let mut out = Box::<Padded<Outbox<F>>>::default();
            out.track_drops(drop_tap.is_some());
            out
        })
    }

    /// Lets node `node` act (`f`), then routes what it sent and plans its
    /// next wake.
    #[inline]
    fn run_node(&mut self, node: u32, f: impl FnOnce(&mut dyn EngineNode<F>, &mut Outbox<F>)) {
        let mut out = Self::lend_outbox(&mut self.outbox, &self.drop_tap);
        f(&mut *self.nodes[node as usize], &mut out);
        self.route(node, &mut out);
        self.outbox = Some(out);
        self.schedule_wake(node);
    }
}

/// The fewest frames a node's output that [`Part::swap_onto_line`] moves
/// onto a line by swapping allocations rather than copying.
const SWAP_AT_LEAST: usize = 256;

/// Shows frame `f`, dropped at `place` for `why`, to `tap` if there is one.
#[inline]
fn tap_drop<F>(tap: &mut Option<DropTap<F>>, now: Instant, place: Place, why: &'static str, f: &F) {
    if let Some(t) = tap.as_mut() {
        t(now, place, why, f);
    }
}

/// Folds a delivery into the receiving node's digest, eight bytes at a
/// time.
#[inline(always)]
fn digest(h: &mut u64, at: Instant, port: PortId, cell: &[u8]) {
    // Each word is multiplied by its own odd constant (independent
    // multiplies, so they overlap), the products summed, and the sum
    // folded into the node's digest once.
    const K: [u64; 4] = [
        0x9E37_79B9_7F4A_7C15,
        0xC2B2_AE3D_27D4_EB4F,
        0x1656_67B1_9E37_79F9,
        0xD6E8_FEB8_6659_FD93,
    ];
    let mut acc = (at.as_nanos() as u64).wrapping_mul(K[0]) ^ u64::from(port);
    for (i, w) in cell.chunks(8).enumerate() {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        let x = u64::from_le_bytes(b) ^ (i as u64);
        acc = acc.wrapping_add(x.wrapping_mul(K[i % 4]).rotate_left(i as u32 * 7 + 1));
    }
    *h = (*h ^ acc)
        .wrapping_mul(0x0000_0100_0000_01B3)
        .rotate_left(29);
}
