//! The virtual-time driver: a discrete-event loop that runs Aurora's nodes
//! (`aurora-net`) and models the links between them.
//!
//! Events are ordered by (time, sequence number), so a run is a pure
//! function of its topology and its seed: every link direction draws its
//! loss and bit errors from its own generator, seeded from the run's seed
//! and the direction's number. [`Engine::trace_hash`] digests every delivery
//! (time, node, port, cell bytes), so two runs can be compared exactly.
//!
//! A link direction models the sending port's output: a bounded transmit
//! buffer (a full buffer is a counted drop, as at a switch's output FIFO),
//! serialisation at the link's rate, propagation delay, then loss and bit
//! errors.

use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;

use aurora_net::{Frame, Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;

/// A node the simulator can also hand back by its concrete type.
pub trait EngineNode<F: Frame = CellBytes>: Node<F> + Any {}
impl<F: Frame, T: Node<F> + Any> EngineNode<F> for T {}

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
    /// Cells the transmit buffer holds (the one being sent included).
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

/// What one link direction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirCounters {
    /// Cells offered by the sending node.
    pub offered: u64,
    /// Cells dropped because the transmit buffer was full.
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
    to: (u32, PortId),
    spec: LinkSpec,
    cell_time: Duration,
    /// Every frame takes `cell_time` (no per-byte terms).
    fixed: bool,
    busy_until: Instant,
    /// Times at which cells still in the transmit buffer finish sending.
    departures: VecDeque<Instant>,
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

/// What happens at an event. A link direction has one event, for the head
/// of its arrivals, so the queue holds one entry per link and node, not one
/// per cell in flight.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Deliver { dir: u32 },
    Wake { node: u32 },
}

/// The simulator, for frames of type `F` (cells unless said otherwise).
pub struct Engine<F: Frame = CellBytes> {
    nodes: Vec<Box<dyn EngineNode<F>>>,
    /// Per node, per port: the direction leaving it.
    out: Vec<Vec<Option<u32>>>,
    dirs: Vec<Dir<F>>,
    queue: BinaryHeap<Reverse<(Instant, u64, Kind)>>,
    wake: Vec<Option<Instant>>,
    seq: u64,
    now: Instant,
    seed: u64,
    trace: u64,
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

impl Engine {
    /// An empty cell-network simulation whose random streams derive from
    /// `seed`.
    pub fn new(seed: u64) -> Self {
        Self::with_frames(seed)
    }
}

impl<F: Frame> Engine<F> {
    /// An empty simulation of a network of `F` frames.
    pub fn with_frames(seed: u64) -> Self {
        Engine {
            nodes: Vec::new(),
            out: Vec::new(),
            dirs: Vec::new(),
            queue: BinaryHeap::new(),
            wake: Vec::new(),
            seq: 0,
            now: Instant::ZERO,
            seed,
            trace: 0xcbf2_9ce4_8422_2325,
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
            to: (to.0, tp),
            spec,
            cell_time: Duration::from_nanos((1e9 / spec.rate).round().max(1.0) as i64),
            fixed: spec.per_byte == Duration::ZERO && spec.handshake_per_byte == Duration::ZERO,
            busy_until: Instant::ZERO,
            departures: VecDeque::new(),
            rng: mix | 1,
            counters: DirCounters::default(),
            arrivals: VecDeque::new(),
        });
    }

    /// Runs every event up to and including `end`; the clock then reads `end`.
    pub fn run_until(&mut self, end: Instant) {
        while let Some(Reverse((at, _, _))) = self.queue.peek() {
            if *at > end {
                break;
            }
            let Some(Reverse((at, _, kind))) = self.queue.pop() else {
                break;
            };
            self.now = at;
            self.events += 1;
            match kind {
                Kind::Deliver { dir } => {
                    self.in_flight -= 1;
                    let d = &mut self.dirs[dir as usize];
                    let Some((_, cell)) = d.arrivals.pop_front() else {
                        continue;
                    };
                    let next = d.arrivals.front().map(|a| a.0);
                    if let Some(t) = next {
                        self.push(t, Kind::Deliver { dir });
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

    fn push(&mut self, at: Instant, kind: Kind) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, kind)));
    }

    fn schedule_wake(&mut self, node: u32) {
        let Some(t) = self.nodes[node as usize].poll_at() else {
            return;
        };
        let t = t.max(self.now);
        if self.wake[node as usize].is_none_or(|w| t < w) {
            self.wake[node as usize] = Some(t);
            self.push(t, Kind::Wake { node });
        }
    }

    /// Puts a node's sent frames on its links, and shows the frames it
    /// dropped to the drop tap.
    fn route(&mut self, node: u32, out: &mut Outbox<F>) {
        use aurora_net::accounting::{Place, Side};
        let now = self.now;
        if let Some(t) = self.drop_tap.as_mut() {
            for (port, cell, why) in out.drain_drops() {
                let side = Side::In;
                t(Place { node, port, side }, why, &cell);
            }
        }
        let lose = |tap: &mut Option<DropTap<F>>, port, why, cell: &F| {
            if let Some(t) = tap.as_mut() {
                let side = Side::Out;
                t(Place { node, port, side }, why, cell);
            }
        };
        for (port, mut cell) in out.drain() {
            let Some(Some(k)) = self.out[node as usize].get(usize::from(port)).copied() else {
                self.unconnected += 1;
                continue;
            };
            let d = &mut self.dirs[k as usize];
            d.counters.offered += 1;
            while d.departures.front().is_some_and(|&t| t <= now) {
                d.departures.pop_front();
            }
            if d.departures.len() >= d.spec.buffer.max(1) {
                d.counters.overflow += 1;
                lose(&mut self.drop_tap, port, "tail_drop", &cell);
                continue;
            }
            let start = d.busy_until.max(now);
            let time = if d.fixed {
                d.cell_time
            } else {
                frame_time(&d.spec, cell.bytes().len())
            };
            d.busy_until = start + time;
            d.departures.push_back(d.busy_until);
            if d.chance(d.spec.loss) {
                d.counters.lost += 1;
                lose(&mut self.drop_tap, port, "link_loss", &cell);
                continue;
            }
            let bits = cell.bytes().len() as u64 * 8;
            if bits > 0 && d.chance(d.spec.bit_error) {
                let bit = (d.next() % bits) as usize;
                cell.bytes_mut()[bit / 8] ^= 0x80 >> (bit % 8);
                d.counters.errored += 1;
            }
            let arrive = d.busy_until + d.spec.delay;
            self.in_flight += 1;
            let first = d.arrivals.is_empty();
            d.arrivals.push_back((arrive, cell));
            if first {
                self.push(arrive, Kind::Deliver { dir: k });
            }
        }
    }

    /// Folds a delivery into the trace digest, eight bytes at a time.
    #[inline(always)]
    fn digest(&mut self, at: Instant, node: u32, port: PortId, cell: &[u8]) {
        let mut h = self.trace;
        let mut eat = |w: u64| {
            h = (h ^ w).wrapping_mul(0x0000_0100_0000_01B3).rotate_left(29);
        };
        eat(at.as_nanos() as u64);
        eat(u64::from(node) << 16 | u64::from(port));
        for w in cell.chunks(8) {
            let mut b = [0u8; 8];
            b[..w.len()].copy_from_slice(w);
            eat(u64::from_le_bytes(b));
        }
        self.trace = h;
    }

    /// Shows every delivered frame to `tap` (time, receiving node and port).
    pub fn set_tap(&mut self, tap: Tap<F>) {
        self.tap = Some(tap);
    }

    /// Removes the tap (dropping it).
    pub fn clear_tap(&mut self) {
        self.tap = None;
    }

    /// Shows every dropped frame to `tap`: frames the links drop (a full
    /// transmit buffer, `tail_drop`; lost on the way, `link_loss`) and the
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

    /// The simulated clock.
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

    /// A digest of every delivery so far.
    pub fn trace_hash(&self) -> u64 {
        self.trace
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
