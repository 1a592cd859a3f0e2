//! Aurora's event engine: one discrete-event core that runs Aurora's nodes
//! (`aurora-net` and the node crates above it) and models the links between
//! them, under either clock ([`clock`]): virtual (jump to the next event) or
//! wall (run each event when the wall clock reaches it, and measure how late).
//!
//! Events are ordered by (time, kind, number of the link or node they
//! belong to): a key that does not depend on the order events were made
//! in, so a run is a pure function of its topology and its seed, however
//! its nodes are later split between workers. Every link direction draws
//! its loss and bit errors from its own generator, seeded from the run's
//! seed and the direction's number. [`Engine::trace_hash`] digests every
//! delivery (time, node, port, cell bytes), per receiving node, so two runs
//! can be compared exactly.
//!
//! A node's output port is a queue under a discipline ([`port`]); the link
//! leaving it pulls the next frame when its line is free, serialises it at
//! the link's rate, delays it, then loses it or flips a bit as configured.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;

pub mod clock;
pub mod lateness;
pub mod port;
mod queue;

use aurora_net::{Frame, Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;

use port::{Fifo, Port};

/// A node the engine can run (on any worker) and hand back by its
/// concrete type.
pub trait EngineNode<F: Frame = CellBytes>: Node<F> + Any + Send {}
impl<F: Frame, T: Node<F> + Any + Send> EngineNode<F> for T {}

/// A node's number in a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeId(pub u32);

/// One direction of a link. A frame of L bytes takes
/// `max(1/rate + L × per_byte, L × handshake_per_byte)` to send: for cells
/// the two per-byte terms are zero and `rate` is cells per second; for
/// variable-length packets `1/rate` is the fixed cost of a packet, and the
/// second term models a channel whose every byte waits for an
/// acknowledgement from the far end of its cable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSpec {
    /// Cells (or packets, before their per-byte time) per second.
    pub rate: f64,
    /// Time per byte of a frame, added to `1/rate`.
    pub per_byte: Duration,
    /// Time per byte that a long cable's handshake imposes (a floor).
    pub handshake_per_byte: Duration,
    /// Propagation delay.
    pub delay: Duration,
    /// Frames the sending port's buffer holds (the one being sent included).
    pub buffer: usize,
    /// Probability a cell is lost.
    pub loss: f64,
    /// Probability a cell gets one flipped bit.
    pub bit_error: f64,
}

impl LinkSpec {
    /// An error-free link at `rate` cells per second.
    pub fn clean(rate: f64, delay: Duration, buffer: usize) -> Self {
        LinkSpec {
            rate,
            per_byte: Duration::ZERO,
            handshake_per_byte: Duration::ZERO,
            delay,
            buffer,
            loss: 0.0,
            bit_error: 0.0,
        }
    }
}

/// The time `spec`'s link takes to send a frame of `len` bytes.
pub fn frame_time(spec: &LinkSpec, len: usize) -> Duration {
    let base = Duration::from_nanos((1e9 / spec.rate).round().max(1.0) as i64);
    if spec.per_byte == Duration::ZERO && spec.handshake_per_byte == Duration::ZERO {
        return base;
    }
    let len = len as i64;
    let own = base + Duration::from_nanos(spec.per_byte.as_nanos().saturating_mul(len));
    own.max(Duration::from_nanos(
        spec.handshake_per_byte.as_nanos().saturating_mul(len),
    ))
}

/// What one link direction (and the output port feeding it) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirCounters {
    /// Cells offered by the sending node.
    pub offered: u64,
    /// Cells the output port dropped (its buffer was full).
    pub overflow: u64,
    /// Cells lost on the way.
    pub lost: u64,
    /// Cells delivered with a flipped bit.
    pub errored: u64,
    /// Cells delivered.
    pub delivered: u64,
}

/// Why a topology was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum EngineError {
    /// The node or port does not exist.
    NoSuchPort(NodeId, PortId),
    /// The port is already connected.
    PortTaken(NodeId, PortId),
    /// The link's rate is not a positive number of cells per second.
    BadRate(f64),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::NoSuchPort(n, p) => write!(f, "node {} has no port {p}", n.0),
            EngineError::PortTaken(n, p) => write!(f, "port {p} of node {} is already connected", n.0),
            EngineError::BadRate(r) => write!(
                f,
                "link rate {r} is not a positive number of cells per second"
            ),
        }
    }
}

impl std::error::Error for EngineError {}

struct Dir<F> {
    from: (u32, PortId),
    to: (u32, PortId),
    spec: LinkSpec,
    cell_time: Duration,
    /// Every frame takes `cell_time` (no per-byte terms).
    fixed: bool,
    /// The sending port's queue; the line pulls from it.
    port: Box<dyn Port<F>>,
    /// When the line finishes sending its current frame.
    busy_until: Instant,
    /// A `TxDone` is in the queue: frames wait, and the line will pull the
    /// next when it is free. (An idle port with nothing waiting needs no
    /// event: a frame sent to it goes straight to the line.)
    pulling: bool,
    rng: u64,
    counters: DirCounters,
    /// Cells on the wire, in arrival order (a link is FIFO); only the head
    /// has an event in the queue.
    arrivals: VecDeque<(Instant, F)>,
}

impl<F> Dir<F> {
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
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
enum Kind {
    TxDone { dir: u32 },
    Deliver { dir: u32 },
    Wake { node: u32 },
}

/// The engine, for frames of type `F` (cells unless said otherwise).
pub struct Engine<F: Frame = CellBytes> {
    nodes: Vec<Box<dyn EngineNode<F>>>,
    /// Per node, per port: the direction leaving it.
    out: Vec<Vec<Option<u32>>>,
    dirs: Vec<Dir<F>>,
    queue: queue::EventQueue<(Instant, Kind)>,
    wake: Vec<Option<Instant>>,
    now: Instant,
    seed: u64,
    /// Per receiving node, a digest of what it received.
    digests: Vec<u64>,
    events: u64,
    unconnected: u64,
    in_flight: u64,
    outbox: Outbox<F>,
    tap: Option<Tap<F>>,
    drop_tap: Option<DropTap<F>>,
}

/// Something that sees every frame dropped anywhere: where (node, port,
/// and whether leaving or arriving), why, and the frame (accounting).
pub type DropTap<F = CellBytes> = Box<dyn FnMut(aurora_net::accounting::Place, &'static str, &F)>;

/// Something that sees every frame as it is delivered to a port (captures).
pub type Tap<F = CellBytes> = Box<dyn FnMut(Instant, NodeId, PortId, &F)>;

/// The first value of every node's digest.
const DIGEST_START: u64 = 0xcbf2_9ce4_8422_2325;

impl Engine {
    /// An empty cell network whose random streams derive from `seed`.
    pub fn new(seed: u64) -> Self {
        Self::with_frames(seed)
    }
}

/// How the engine's loop meets its clock: nothing to wait for in virtual
/// time; in wall time, wait for each event and measure its lateness.
trait Pace {
    /// Called before the event at `at` for `node` runs.
    fn before(&mut self, at: Instant, node: u32);
}

struct Virtual;

impl Pace for Virtual {
    #[inline(always)]
    fn before(&mut self, _at: Instant, _node: u32) {}
}

impl Pace for clock::Wall {
    #[inline]
    fn before(&mut self, at: Instant, node: u32) {
        let late = self.wait_until(at);
        self.record(node, late);
    }
}

impl<F: Frame> Engine<F> {
    /// An empty network of `F` frames.
    pub fn with_frames(seed: u64) -> Self {
        Engine {
            nodes: Vec::new(),
            out: Vec::new(),
            dirs: Vec::new(),
            queue: queue::EventQueue::new(),
            wake: Vec::new(),
            now: Instant::ZERO,
            seed,
            digests: Vec::new(),
            events: 0,
            unconnected: 0,
            in_flight: 0,
            outbox: Outbox::default(),
            tap: None,
            drop_tap: None,
        }
    }

    /// Adds a node.
    pub fn add_node(&mut self, node: impl EngineNode<F>) -> NodeId {
        self.add_boxed(Box::new(node))
    }

    /// Adds a node already boxed.
    pub fn add_boxed(&mut self, node: Box<dyn EngineNode<F>>) -> NodeId {
        let id = self.nodes.len() as u32;
        self.out.push(vec![None; node.ports()]);
        self.nodes.push(node);
        self.wake.push(None);
        self.digests.push(DIGEST_START);
        self.schedule_wake(id);
        NodeId(id)
    }

    /// Joins port `a` to port `b` with one link per direction.
    pub fn connect(
        &mut self,
        a: (NodeId, PortId),
        b: (NodeId, PortId),
        spec: LinkSpec,
    ) -> Result<(), EngineError> {
        self.connect_asymmetric(a, b, spec, spec)
    }

    /// Joins two ports with different links in each direction.
    pub fn connect_asymmetric(
        &mut self,
        a: (NodeId, PortId),
        b: (NodeId, PortId),
        a_to_b: LinkSpec,
        b_to_a: LinkSpec,
    ) -> Result<(), EngineError> {
        for s in [a_to_b, b_to_a] {
            if !(s.rate > 0.0 && s.rate.is_finite()) {
                return Err(EngineError::BadRate(s.rate));
            }
        }
        for (n, p) in [a, b] {
            match self
                .out
                .get(n.0 as usize)
                .and_then(|v| v.get(usize::from(p)))
            {
                None => return Err(EngineError::NoSuchPort(n, p)),
                Some(Some(_)) => return Err(EngineError::PortTaken(n, p)),
                Some(None) => {}
            }
        }
        self.add_dir(a, b, a_to_b);
        self.add_dir(b, a, b_to_a);
        Ok(())
    }

    /// A one-way link from port `from`'s output to port `to`'s input (the
    /// input may also receive from other links; the output must be free).
    pub fn connect_oneway(
        &mut self,
        from: (NodeId, PortId),
        to: (NodeId, PortId),
        spec: LinkSpec,
    ) -> Result<(), EngineError> {
        if !(spec.rate > 0.0 && spec.rate.is_finite()) {
            return Err(EngineError::BadRate(spec.rate));
        }
        match self
            .out
            .get(from.0 .0 as usize)
            .and_then(|v| v.get(usize::from(from.1)))
        {
            None => return Err(EngineError::NoSuchPort(from.0, from.1)),
            Some(Some(_)) => return Err(EngineError::PortTaken(from.0, from.1)),
            Some(None) => {}
        }
        if self
            .out
            .get(to.0 .0 as usize)
            .is_none_or(|v| usize::from(to.1) >= v.len())
        {
            return Err(EngineError::NoSuchPort(to.0, to.1));
        }
        self.add_dir(from, to, spec);
        Ok(())
    }

    fn add_dir(
        &mut self,
        (from, fp): (NodeId, PortId),
        (to, tp): (NodeId, PortId),
        spec: LinkSpec,
    ) {
        let k = self.dirs.len() as u32;
        self.out[from.0 as usize][usize::from(fp)] = Some(k);
        let mix = self.seed ^ (u64::from(k) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.dirs.push(Dir {
            from: (from.0, fp),
            to: (to.0, tp),
            spec,
            cell_time: Duration::from_nanos((1e9 / spec.rate).round().max(1.0) as i64),
            fixed: spec.per_byte == Duration::ZERO && spec.handshake_per_byte == Duration::ZERO,
            port: Box::new(Fifo::new(spec.buffer)),
            busy_until: Instant::ZERO,
            pulling: false,
            rng: mix | 1,
            counters: DirCounters::default(),
            arrivals: VecDeque::new(),
        });
    }

    /// Runs every event up to and including `end` in virtual time; the
    /// clock then reads `end`.
    pub fn run_until(&mut self, end: Instant) {
        self.run_paced(end, &mut Virtual);
    }

    /// Runs every event up to and including `end`, each when `wall` reaches
    /// its time (see [`clock`]), and waits for `wall` to reach `end`.
    pub fn run_wall(&mut self, end: Instant, wall: &mut clock::Wall) {
        self.run_paced(end, wall);
        if end < Instant::MAX {
            wall.wait_until(end);
        }
    }

    fn run_paced<P: Pace>(&mut self, end: Instant, pace: &mut P) {
        while let Some((at, kind)) = self.queue.peek() {
            if at > end {
                break;
            }
            let node = match kind {
                Kind::TxDone { dir } => self.dirs[dir as usize].from.0,
                Kind::Deliver { dir } => self.dirs[dir as usize].to.0,
                Kind::Wake { node } => node,
            };
            pace.before(at, node);
            self.queue.pop();
            self.now = at;
            self.events += 1;
            match kind {
                Kind::TxDone { dir } => {
                    let d = &mut self.dirs[dir as usize];
                    d.pulling = false;
                    if let Some(f) = d.port.dequeue(at) {
                        self.transmit(dir, f);
                    }
                }
                Kind::Deliver { dir } => {
                    self.in_flight -= 1;
                    let d = &mut self.dirs[dir as usize];
                    let Some((_, cell)) = d.arrivals.pop_front() else {
                        continue;
                    };
                    if let Some(&(t, _)) = d.arrivals.front() {
                        self.queue.push((t, Kind::Deliver { dir }));
                    }
                    let d = &mut self.dirs[dir as usize];
                    d.counters.delivered += 1;
                    let (node, port) = d.to;
                    self.digest(at, node, port, cell.bytes());
                    if let Some(tap) = self.tap.as_mut() {
                        tap(at, NodeId(node), port, &cell);
                    }
                    let mut out = std::mem::take(&mut self.outbox);
                    self.nodes[node as usize].receive(at, port, &[cell], &mut out);
                    self.route(node, &mut out);
                    self.outbox = out;
                    self.schedule_wake(node);
                }
                Kind::Wake { node } => {
                    if self.wake[node as usize] != Some(at) {
                        continue; // superseded
                    }
                    self.wake[node as usize] = None;
                    let mut out = std::mem::take(&mut self.outbox);
                    self.nodes[node as usize].poll(at, &mut out);
                    self.route(node, &mut out);
                    self.outbox = out;
                    self.schedule_wake(node);
                }
            }
        }
        self.now = self.now.max(end);
    }

    fn schedule_wake(&mut self, node: u32) {
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
        use aurora_net::accounting::{Place, Side};
        let now = self.now;
        if let Some(t) = self.drop_tap.as_mut() {
            for (port, cell, why) in out.drain_drops() {
                let side = Side::In;
                t(Place { node, port, side }, why, &cell);
            }
        }
        for (port, cell) in out.drain() {
            let Some(Some(k)) = self.out[node as usize].get(usize::from(port)).copied() else {
                self.unconnected += 1;
                continue;
            };
            let d = &mut self.dirs[k as usize];
            d.counters.offered += 1;
            let on_line = usize::from(d.busy_until > now);
            match d.port.enqueue(cell, now, on_line) {
                Ok(()) => {
                    if d.pulling {
                        // The line pulls when it is free.
                    } else if on_line == 0 {
                        if let Some(f) = d.port.dequeue(now) {
                            self.transmit(k, f);
                        }
                    } else {
                        d.pulling = true;
                        let t = d.busy_until;
                        self.queue.push((t, Kind::TxDone { dir: k }));
                    }
                }
                Err((cell, why)) => {
                    d.counters.overflow += 1;
                    if let Some(t) = self.drop_tap.as_mut() {
                        let side = Side::Out;
                        t(Place { node, port, side }, why, &cell);
                    }
                }
            }
        }
    }

    /// Puts `cell` on direction `k`'s idle line now: it is sent, then
    /// crosses the link (or is lost on the way, or damaged).
    fn transmit(&mut self, k: u32, mut cell: F) {
        use aurora_net::accounting::{Place, Side};
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
        if d.chance(d.spec.loss) {
            d.counters.lost += 1;
            if let Some(t) = self.drop_tap.as_mut() {
                let (node, port) = d.from;
                let side = Side::Out;
                t(Place { node, port, side }, "link_loss", &cell);
            }
            return;
        }
        let bits = cell.bytes().len() as u64 * 8;
        if bits > 0 && d.chance(d.spec.bit_error) {
            let bit = (d.next() % bits) as usize;
            cell.bytes_mut()[bit / 8] ^= 0x80 >> (bit % 8);
            d.counters.errored += 1;
        }
        let arrive = done + d.spec.delay;
        self.in_flight += 1;
        let first = d.arrivals.is_empty();
        d.arrivals.push_back((arrive, cell));
        if first {
            self.queue.push((arrive, Kind::Deliver { dir: k }));
        }
    }

    /// Folds a delivery into the receiving node's digest, eight bytes at a
    /// time.
    #[inline(always)]
    fn digest(&mut self, at: Instant, node: u32, port: PortId, cell: &[u8]) {
        let h = &mut self.digests[node as usize];
        let mut eat = |w: u64| {
            *h = (*h ^ w).wrapping_mul(0x0000_0100_0000_01B3).rotate_left(29);
        };
        eat(at.as_nanos() as u64);
        eat(u64::from(port));
        for w in cell.chunks(8) {
            let mut b = [0u8; 8];
            b[..w.len()].copy_from_slice(w);
            eat(u64::from_le_bytes(b));
        }
    }

    /// Shows every delivered frame to `tap` (time, receiving node and port).
    pub fn set_tap(&mut self, tap: Tap<F>) {
        self.tap = Some(tap);
    }

    /// Removes the tap (dropping it).
    pub fn clear_tap(&mut self) {
        self.tap = None;
    }

    /// Shows every dropped frame to `tap`: frames the output ports and links
    /// drop (a full buffer, `tail_drop`; lost on the way, `link_loss`) and the
    /// frames nodes drop on arrival (asked of them through their outbox).
    pub fn set_drop_tap(&mut self, tap: DropTap<F>) {
        self.drop_tap = Some(tap);
        self.outbox.track_drops(true);
    }

    /// Removes the drop tap (dropping it).
    pub fn clear_drop_tap(&mut self) {
        self.drop_tap = None;
        self.outbox.track_drops(false);
    }

    /// The engine's clock: the time of the last event run.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events handled so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Cells on links, not yet delivered.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// A digest of every delivery so far: each node's digest of what it
    /// received, folded in node order (so it does not depend on how
    /// deliveries to different nodes interleaved).
    pub fn trace_hash(&self) -> u64 {
        self.digests.iter().enumerate().fold(DIGEST_START, |h, (i, d)| {
            (h ^ d ^ (i as u64) << 48)
                .wrapping_mul(0x0000_0100_0000_01B3)
                .rotate_left(29)
        })
    }

    /// Frames waiting in `node`'s output port `port` (not counting one on
    /// the line).
    pub fn queued(&self, node: NodeId, port: PortId) -> Option<usize> {
        let k = (*self.out.get(node.0 as usize)?.get(usize::from(port))?)?;
        Some(self.dirs[k as usize].port.len())
    }

    /// Nodes in the network.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Cells sent out of ports with no link.
    pub fn unconnected(&self) -> u64 {
        self.unconnected
    }

    /// The counters of the link direction leaving `port` of `node`.
    pub fn link(&self, node: NodeId, port: PortId) -> Option<DirCounters> {
        let k = (*self.out.get(node.0 as usize)?.get(usize::from(port))?)?;
        Some(self.dirs[k as usize].counters)
    }

    /// A node as a [`Node`], whatever its type.
    pub fn node_dyn(&self, id: NodeId) -> Option<&dyn Node<F>> {
        let n: &dyn EngineNode<F> = self.nodes.get(id.0 as usize)?.as_ref();
        Some(n)
    }

    /// A node, by its concrete type.
    pub fn node<T: Node<F> + Any>(&self, id: NodeId) -> Option<&T> {
        let n: &dyn Any = self.nodes.get(id.0 as usize)?.as_ref();
        n.downcast_ref::<T>()
    }

    /// Reads node `id`'s next wake-up time again (after changing it with
    /// [`Engine::node_mut`], say, so new work it was given gets done).
    pub fn touch(&mut self, id: NodeId) {
        if (id.0 as usize) < self.nodes.len() {
            self.schedule_wake(id.0);
        }
    }

    /// A node, by its concrete type, to change it between runs (then
    /// [`Engine::touch`] it if it has new timed work).
    pub fn node_mut<T: Node<F> + Any>(&mut self, id: NodeId) -> Option<&mut T> {
        let n: &mut dyn Any = self.nodes.get_mut(id.0 as usize)?.as_mut();
        n.downcast_mut::<T>()
    }
}
