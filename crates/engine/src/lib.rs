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
//! A receiving node may hold the line feeding one of its inputs, so that
//! frames wait (and are dropped) in the sending port instead ([`port`]).

use std::any::Any;
use std::fmt;

pub mod carry;
pub mod cell_port;
pub mod clock;
pub mod io;
pub mod lateness;
mod part;
pub mod plan;
pub mod port;
mod queue;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aurora_net::{Frame, Node, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;

use part::{Dir, Elsewhere, Mail, Part, Virtual, DIGEST_START};

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
    /// Bytes the frames waiting there may take, if bounded (ports of
    /// variable-length frames: see [`port::ByteFifo`]).
    pub buffer_bytes: Option<usize>,
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
            buffer_bytes: None,
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

/// Ok if `spec`'s rate is a positive number.
fn check_rate(spec: &LinkSpec) -> Result<(), EngineError> {
    match spec.rate > 0.0 && spec.rate.is_finite() {
        true => Ok(()),
        false => Err(EngineError::BadRate(spec.rate)),
    }
}

/// Puts `node` into partition `home` of `parts`, and a stand-in for it
/// into the others.
fn place_node<F: Frame>(parts: &mut [Part<F>], node: Box<dyn EngineNode<F>>, home: u32) {
    let ports = node.ports();
    let mut node = Some(node);
    for (i, p) in parts.iter_mut().enumerate() {
        match node.take_if(|_| i as u32 == home) {
            Some(n) => p.push_node(n, true),
            None => p.push_node(Box::new(Elsewhere(ports)), false),
        }
    }
}

/// Puts the next direction, as `d` says, into every partition of `parts`
/// (nodes placed as `home` says); if it joins two partitions, the least
/// time a frame takes to cross it.
fn place_dir<F: Frame>(
    parts: &mut [Part<F>],
    d: &DirSpec,
    home: &[u32],
    seed: u64,
) -> Option<Duration> {
    let (near, far) = (home[d.from.0 as usize], home[d.to.0 as usize]);
    for (i, p) in parts.iter_mut().enumerate() {
        p.push_dir(Dir::new(d, seed), i as u32, near, far);
    }
    let k = parts[0].dirs.len() - 1;
    (near != far).then(|| parts[0].dirs[k].least_crossing())
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
    /// Nodes can be split between workers, and ports given disciplines,
    /// only before the first event.
    Started,
    /// A partition plan that does not name one worker per node.
    BadPlan(String),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::NoSuchPort(n, p) => write!(f, "node {} has no port {p}", n.0),
            EngineError::PortTaken(n, p) => {
                write!(f, "port {p} of node {} is already connected", n.0)
            }
            EngineError::BadRate(r) => write!(
                f,
                "link rate {r} is not a positive number of cells per second"
            ),
            EngineError::Started => f.write_str(
                "the network has already run, so its workers and port disciplines can no longer change",
            ),
            EngineError::BadPlan(why) => write!(f, "the partition plan is wrong: {why}"),
        }
    }
}

impl std::error::Error for EngineError {}

/// Something that sees every frame dropped anywhere: when, where (node,
/// port, and whether leaving or arriving), why, and the frame (accounting).
pub type DropTap<F = CellBytes> =
    Box<dyn FnMut(Instant, aurora_net::accounting::Place, &'static str, &F) + Send>;

/// Something that sees every frame as it is delivered to a port (captures).
pub type Tap<F = CellBytes> = Box<dyn FnMut(Instant, NodeId, PortId, &F) + Send>;

/// Something that sees every batch of frames crossing the engine's edge:
/// taken by an external output's far end (the place's side `Out`) or read
/// from an external input (`In`). What crosses out and in is counted
/// there, so books can follow frames between processes.
pub type BoundaryTap<F = CellBytes> = Box<dyn FnMut(aurora_net::accounting::Place, &[F]) + Send>;

/// One link direction as built, kept to split the engine.
#[derive(Clone, Copy)]
pub(crate) struct DirSpec {
    pub(crate) from: (u32, PortId),
    pub(crate) to: (u32, PortId),
    pub(crate) spec: LinkSpec,
    /// The receiving node may hold its input ([`Node::holds_input`]).
    pub(crate) held: bool,
    /// The random stream its loss and bit errors draw from (its own
    /// number unless [`Engine::set_stream`] said otherwise).
    pub(crate) stream: u32,
}

/// The engine, for frames of type `F` (cells unless said otherwise).
///
/// Built whole ([`Engine::add_node`], [`Engine::connect`]); before it runs,
/// its nodes may be split between workers ([`Engine::partition`], with a
/// plan from [`plan`]). A split engine runs its partitions on threads of
/// their own under conservative synchronisation: every partition runs the
/// events before `T + L`, where `T` is the earliest event anywhere and `L`
/// the lookahead (the least time a frame takes across a link joining two
/// partitions), then the partitions swap the frames they sent each other.
/// Events are ordered by a key that does not depend on the partitions, so a
/// run gives the same deliveries (and digest) for any number of workers.
pub struct Engine<F: Frame = CellBytes> {
    parts: Vec<Part<F>>,
    /// Per node: the partition that runs it.
    home: Vec<u32>,
    specs: Vec<DirSpec>,
    seed: u64,
    /// The least time a frame takes between partitions.
    lookahead: Duration,
    tap: Option<Arc<Mutex<Tap<F>>>>,
    drop_tap: Option<Arc<Mutex<DropTap<F>>>>,
    boundary_tap: Option<Arc<Mutex<BoundaryTap<F>>>>,
}

impl Engine {
    /// An empty cell network whose random streams derive from `seed`.
    pub fn new(seed: u64) -> Self {
        Self::with_frames(seed)
    }

    /// A link from port `from`'s output to a cell link outside the engine
    /// (see [`io`]): the port, rate, delay, loss and bit errors are the
    /// engine's; delivered cells go to `sink`.
    pub fn connect_external(
        &mut self,
        from: (NodeId, PortId),
        spec: LinkSpec,
        sink: Box<dyn aurora_link::CellSink>,
    ) -> Result<(), EngineError> {
        self.connect_external_frames(from, spec, Box::new(sink))
    }

    /// Cells arriving on `source` (a link from outside the engine) go to
    /// port `to` (see [`io`]).
    pub fn add_external_input(
        &mut self,
        to: (NodeId, PortId),
        source: Box<dyn aurora_link::CellSource>,
    ) -> Result<(), EngineError> {
        self.add_external_source(to, Box::new(io::Cells::new(source)))
    }
}

/// What an external output did besides its direction's [`DirCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExternalCounters {
    /// Frames the sink refused (dropped, [`io::PEER_FULL`]).
    pub refused: u64,
    /// The sink's link counters.
    pub link: aurora_link::LinkCounters,
}

impl<F: Frame> Engine<F> {
    /// An empty network of `F` frames.
    pub fn with_frames(seed: u64) -> Self {
        Engine {
            parts: vec![Part::new(1)],
            home: Vec::new(),
            specs: Vec::new(),
            seed,
            lookahead: Duration::MAX,
            tap: None,
            drop_tap: None,
            boundary_tap: None,
        }
    }

    /// Adds a node (to the first partition, if the engine is split).
    pub fn add_node(&mut self, node: impl EngineNode<F>) -> NodeId {
        self.add_boxed(Box::new(node))
    }

    /// Adds a node already boxed.
    pub fn add_boxed(&mut self, node: Box<dyn EngineNode<F>>) -> NodeId {
        let id = self.home.len() as u32;
        place_node(&mut self.parts, node, 0);
        self.home.push(0);
        NodeId(id)
    }

    /// Joins port `a` to port `b` with one link per direction.
    pub fn connect(
        &mut self,
        a: (NodeId, PortId),
        b: (NodeId, PortId),
        spec: LinkSpec,
    ) -> Result<(), EngineError> {
        check_rate(&spec)?;
        for (n, p) in [a, b] {
            self.free_port(n, p)?;
        }
        self.add_dir(a, b, spec, false);
        self.add_dir(b, a, spec, false);
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
        check_rate(&spec)?;
        self.free_port(from.0, from.1)?;
        self.has_port(to)?;
        self.add_dir(from, to, spec, false);
        Ok(())
    }

    /// Ok if `port` of `n` exists.
    fn has_port(&self, (n, p): (NodeId, PortId)) -> Result<(), EngineError> {
        match self.parts[0].out.get(n.0 as usize) {
            Some(v) if usize::from(p) < v.len() => Ok(()),
            _ => Err(EngineError::NoSuchPort(n, p)),
        }
    }

    /// Ok if `port` of `n` exists and has no link leaving it.
    fn free_port(&self, n: NodeId, p: PortId) -> Result<(), EngineError> {
        match self.parts[0]
            .out
            .get(n.0 as usize)
            .and_then(|v| v.get(usize::from(p)))
        {
            None => Err(EngineError::NoSuchPort(n, p)),
            Some(Some(_)) => Err(EngineError::PortTaken(n, p)),
            Some(None) => Ok(()),
        }
    }

    /// Adds the direction from `from` to `to` (to a sink outside the
    /// engine, if `external`: no node receives it, so none holds it).
    fn add_dir(
        &mut self,
        (from, fp): (NodeId, PortId),
        (to, tp): (NodeId, PortId),
        spec: LinkSpec,
        external: bool,
    ) {
        let held = !external
            && self.parts[self.home[to.0 as usize] as usize].nodes[to.0 as usize].holds_input();
        let k = self.specs.len() as u32;
        let d = DirSpec {
            from: (from.0, fp),
            to: (to.0, tp),
            spec,
            held,
            stream: k,
        };
        self.specs.push(d);
        if let Some(c) = place_dir(&mut self.parts, &d, &self.home, self.seed) {
            self.lookahead = self.lookahead.min(c);
        }
    }

    /// A link from port `from`'s output to `sink`, outside the engine (see
    /// [`io`]).
    pub fn connect_external_frames(
        &mut self,
        from: (NodeId, PortId),
        spec: LinkSpec,
        sink: Box<dyn io::ExternalSink<F>>,
    ) -> Result<(), EngineError> {
        check_rate(&spec)?;
        self.free_port(from.0, from.1)?;
        let k = self.specs.len();
        // The far end is the port itself: the direction stays in the
        // node's partition, and its deliveries go to the sink.
        self.add_dir(from, from, spec, true);
        let p = &mut self.parts[self.home[from.0 .0 as usize] as usize];
        p.dirs[k].external = Some(p.io.outs.len() as u32);
        p.io.outs.push(io::ExtOut {
            node: from.0 .0,
            port: from.1,
            sink,
            staged: Vec::new(),
            due: None,
            refused: 0,
        });
        self.mark_unrepeatable();
        Ok(())
    }

    /// Frames arriving on `source`, from outside the engine, go to port
    /// `to` (see [`io`]).
    pub fn add_external_source(
        &mut self,
        to: (NodeId, PortId),
        source: Box<dyn io::ExternalSource<F>>,
    ) -> Result<(), EngineError> {
        self.has_port(to)?;
        let h = self.home[to.0 .0 as usize] as usize;
        self.parts[h].io.ins.push(io::ExtIn {
            node: to.0 .0,
            port: to.1,
            src: source,
        });
        self.mark_unrepeatable();
        Ok(())
    }

    /// Joins `node`'s [`aurora_net::PacketPort`] to `dev` (see [`io`]):
    /// packets the device gives go to the node, packets the node has for
    /// its host go to the device.
    pub fn set_packet_device(
        &mut self,
        node: NodeId,
        dev: Box<dyn io::PacketDevice>,
    ) -> Result<(), EngineError> {
        if node.0 as usize >= self.home.len() {
            return Err(EngineError::NoSuchPort(node, 0));
        }
        let devs = &mut self.parts[self.home[node.0 as usize] as usize].io.devs;
        devs.retain(|d| d.node != node.0);
        devs.push(io::ExtDev {
            node: node.0,
            dev,
            buf: vec![0; 65536],
            counters: io::DeviceCounters::default(),
        });
        self.mark_unrepeatable();
        Ok(())
    }

    /// Makes the link direction leaving `port` of `node` draw its loss and
    /// bit errors from the random stream of direction number `stream`
    /// (directions are numbered in the order they were connected, the two
    /// of [`Engine::connect`] `2i` and `2i + 1`): an engine holding part of
    /// a network (one node process's) then impairs each link as an engine
    /// holding all of it would. Only before the first event.
    pub fn set_stream(
        &mut self,
        node: NodeId,
        port: PortId,
        stream: u32,
    ) -> Result<(), EngineError> {
        let k = self.unstarted_dir(node, port)?;
        let seed = self.seed;
        self.specs[k].stream = stream;
        for p in &mut self.parts {
            p.dirs[k].reseed(stream, seed);
        }
        Ok(())
    }

    /// The counters of `node`'s packet device, if it has one.
    pub fn device_counters(&self, node: NodeId) -> Option<io::DeviceCounters> {
        self.parts
            .iter()
            .flat_map(|p| &p.io.devs)
            .find(|d| d.node == node.0)
            .map(|d| d.counters)
    }

    /// The counters of the external output leaving `port` of `node`.
    pub fn external_output(&self, node: NodeId, port: PortId) -> Option<ExternalCounters> {
        self.parts
            .iter()
            .flat_map(|p| &p.io.outs)
            .find(|o| o.node == node.0 && o.port == port)
            .map(|o| ExternalCounters {
                refused: o.refused,
                link: o.sink.counters(),
            })
    }

    /// The link counters of the external inputs reaching `port` of `node`
    /// (the first, if there are several).
    pub fn external_input(&self, node: NodeId, port: PortId) -> Option<aurora_link::LinkCounters> {
        self.parts
            .iter()
            .flat_map(|p| &p.io.ins)
            .find(|i| i.node == node.0 && i.port == port)
            .map(|i| i.src.counters())
    }

    /// Reads the external inputs and devices now (at the engine's clock),
    /// and hands delivered frames to the external outputs: for runs in
    /// virtual time, which do not poll them.
    pub fn poll_external(&mut self) {
        for p in &mut self.parts {
            let now = p.now;
            // Virtual time keeps no lateness.
            p.poll_io(now, &mut |_, _| {});
            p.flush_outputs(&mut |_, _| {});
        }
    }

    /// Splits the nodes between workers: node `i` runs on worker
    /// `home[i]`. Only before the first event runs.
    pub fn partition(&mut self, home: &[u32]) -> Result<(), EngineError> {
        if self.events() > 0 || self.in_flight() > 0 {
            return Err(EngineError::Started);
        }
        if home.len() != self.home.len() {
            return Err(EngineError::BadPlan(format!(
                "it places {} nodes, the network has {}",
                home.len(),
                self.home.len()
            )));
        }
        let n = home.iter().max().map_or(1, |m| *m as usize + 1);
        if home.iter().any(|&h| h as usize >= home.len().max(1)) {
            return Err(EngineError::BadPlan(
                "it names more workers than there are nodes".into(),
            ));
        }
        // Take every node out of its partition.
        let mut nodes: Vec<Box<dyn EngineNode<F>>> = Vec::with_capacity(home.len());
        for (i, &h) in self.home.iter().enumerate() {
            let part = &mut self.parts[h as usize];
            let ports = part.nodes[i].ports();
            nodes.push(std::mem::replace(
                &mut part.nodes[i],
                Box::new(Elsewhere(ports)),
            ));
        }
        // Disciplines other than FIFO go with their sending node.
        let mut disciplines: Vec<Option<Box<dyn port::Port<F>>>> = (0..self.specs.len())
            .map(|k| {
                let from = self.specs[k].from.0 as usize;
                self.parts[self.home[from] as usize].dirs[k].take_port()
            })
            .collect();
        let mut parts: Vec<Part<F>> = (0..n).map(|_| Part::new(n)).collect();
        for (node, &h) in nodes.into_iter().zip(home) {
            place_node(&mut parts, node, h);
        }
        self.home = home.to_vec();
        self.lookahead = Duration::MAX;
        for (k, d) in self.specs.iter().enumerate() {
            if let Some(c) = place_dir(&mut parts, d, home, self.seed) {
                self.lookahead = self.lookahead.min(c);
            }
            if let Some(p) = disciplines[k].take() {
                parts[home[d.from.0 as usize] as usize].dirs[k].set_port(p);
            }
        }
        // External I/O goes with its node: inputs and devices to the
        // node's partition, outputs to the partition of the direction
        // they end (which leaves and reaches the node's own port).
        for old in &mut self.parts {
            let io = std::mem::take(&mut old.io);
            for x in io.ins {
                parts[home[x.node as usize] as usize].io.ins.push(x);
            }
            for x in io.devs {
                parts[home[x.node as usize] as usize].io.devs.push(x);
            }
            for x in io.outs {
                let p = &mut parts[home[x.node as usize] as usize];
                if let Some(Some(k)) = p.out[x.node as usize].get(usize::from(x.port)) {
                    p.dirs[*k as usize].external = Some(p.io.outs.len() as u32);
                }
                p.io.outs.push(x);
            }
        }
        self.parts = parts;
        self.mark_unrepeatable();
        self.install_taps();
        Ok(())
    }

    /// With external I/O anywhere, no partition keeps a digest: the run
    /// cannot be repeated.
    fn mark_unrepeatable(&mut self) {
        let repeatable = !self.parts.iter().any(|p| p.io.any());
        for p in &mut self.parts {
            p.repeatable = repeatable;
        }
    }

    /// A plan splitting the nodes between at most `workers` workers,
    /// cutting no link that frames cross in less than `min_cut` (see
    /// [`plan`]).
    pub fn plan(&self, workers: usize, min_cut: Duration) -> Vec<u32> {
        self.plan_pinned(workers, min_cut, &[])
    }

    /// [`Engine::plan`], with the nodes of `pins` (node, worker) kept on
    /// their workers.
    pub fn plan_pinned(&self, workers: usize, min_cut: Duration, pins: &[(u32, u32)]) -> Vec<u32> {
        let edges: Vec<plan::Edge> = self
            .specs
            .iter()
            .zip(&self.parts[0].dirs)
            .map(|(d, dir)| plan::Edge {
                a: d.from.0,
                b: d.to.0,
                // A hold cannot cross partitions: a link into a node that
                // holds its input is never cut (see [`plan::plan`]).
                crossing: if d.held {
                    Duration::ZERO
                } else {
                    dir.least_crossing()
                },
            })
            .collect();
        plan::plan(self.home.len(), &edges, workers, min_cut, pins)
    }

    /// Workers the engine runs on (its partitions).
    pub fn workers(&self) -> usize {
        self.parts.len()
    }

    /// The lookahead between partitions (`None` when nothing crosses).
    pub fn lookahead(&self) -> Option<Duration> {
        (self.lookahead < Duration::MAX).then_some(self.lookahead)
    }

    /// Gives every partition its share of the taps.
    fn install_taps(&mut self) {
        for p in &mut self.parts {
            p.tap = self.tap.clone().map(|t| -> Tap<F> {
                Box::new(move |at, n, port, f| {
                    // A tap that panicked poisons its lock; the frames it
                    // would have seen are not the run's business.
                    if let Ok(mut t) = t.lock() {
                        t(at, n, port, f)
                    }
                })
            });
            p.drop_tap = self.drop_tap.clone().map(|t| -> DropTap<F> {
                Box::new(move |at, place, why, f| {
                    if let Ok(mut t) = t.lock() {
                        t(at, place, why, f)
                    }
                })
            });
            p.outbox
                .get_or_insert_with(Box::default)
                .track_drops(self.drop_tap.is_some());
            p.boundary_tap = self.boundary_tap.clone().map(|t| -> BoundaryTap<F> {
                Box::new(move |place, frames| {
                    if let Ok(mut t) = t.lock() {
                        t(place, frames)
                    }
                })
            });
        }
    }

    /// Runs every event up to and including `end` in virtual time; the
    /// clock then reads `end`.
    pub fn run_until(&mut self, end: Instant) {
        if self.parts.len() == 1 {
            self.parts[0].run_paced(end, &mut Virtual);
        } else {
            self.run_windows(end, None);
        }
    }

    /// A wall clock to run this engine against with [`Engine::run_wall`],
    /// whose time 0 is now; `spin` busy-waits instead of sleeping.
    pub fn wall_clock(&self, spin: bool) -> clock::Wall {
        clock::Wall::start(self.parts.len(), self.node_count(), spin)
    }

    /// Runs every event up to and including `end`, each when `wall` reaches
    /// its time (see [`clock`]), and waits for `wall` to reach `end`.
    pub fn run_wall(&mut self, end: Instant, wall: &mut clock::Wall) {
        let pacers = wall.for_workers(self.parts.len(), self.node_count());
        if self.parts.len() == 1 && self.parts[0].io.any() {
            self.parts[0].run_wall_io(end, &mut pacers[0]);
            return;
        }
        if self.parts.len() == 1 {
            self.parts[0].run_paced(end, &mut pacers[0]);
        } else {
            self.run_windows(end, Some(pacers));
        }
        if end < Instant::MAX {
            wall.for_workers(1, 0)[0].wait_until(end);
        }
    }

    /// Runs the partitions on threads of their own, window by window
    /// (conservative synchronisation: a window is as long as the shortest
    /// cut link's delay, so nothing sent in it arrives in it), each event
    /// paced by its worker's `pacers` entry if given. Under the wall clock
    /// the partitions thus run the same events in the same order as under
    /// the virtual clock; a worker that falls behind holds the others back
    /// at the window's end, and its lateness shows it.
    fn run_windows(&mut self, end: Instant, pacers: Option<&mut [clock::Pacer]>) {
        let n = self.parts.len();
        let boxes: Vec<Mutex<Vec<Mail<F>>>> = (0..n).map(|_| Mutex::new(Vec::new())).collect();
        let next: Vec<AtomicI64> = (0..n).map(|_| AtomicI64::new(i64::MAX)).collect();
        let barrier = SpinBarrier::new(n);
        let look = self.lookahead.as_nanos().max(1);
        let end_ns = end.as_nanos();
        let mut pacers: Vec<Option<&mut clock::Pacer>> = match pacers {
            Some(p) => p.iter_mut().map(Some).collect(),
            None => (0..n).map(|_| None).collect(),
        };
        // With external I/O, windows follow the clock (below); a worker
        // done with a window early then sleeps to its end rather than
        // spin at the barrier.
        let any_io = self.parts.iter().any(|p| p.io.any());
        std::thread::scope(|s| {
            for ((i, part), pacer) in self.parts.iter_mut().enumerate().zip(pacers.iter_mut()) {
                let (boxes, next, barrier) = (&boxes, &next, &barrier);
                // A worker with external I/O against the wall clock polls
                // it while it waits for each window's end, and input may
                // come at any time: it asks for a window from now on
                // whatever its next event, so windows follow the clock.
                let io = pacer.is_some() && part.io.any();
                s.spawn(move || loop {
                    // A poisoned box means another worker panicked, and
                    // the scope re-raises that panic.
                    let mail = boxes[i]
                        .lock()
                        .map(|mut b| std::mem::take(&mut *b))
                        .unwrap_or_default();
                    part.accept(mail);
                    let mut mine = part.next_time().map_or(i64::MAX, |t| t.as_nanos());
                    if let (true, Some(p)) = (io, pacer.as_deref_mut()) {
                        mine = mine.min(p.now().as_nanos());
                    }
                    next[i].store(mine, Ordering::Relaxed);
                    barrier.wait();
                    let t = next
                        .iter()
                        .map(|x| x.load(Ordering::Relaxed))
                        .min()
                        .unwrap_or(i64::MAX);
                    if t > end_ns {
                        // Nothing is due by `end` (and the clock, for a
                        // worker with I/O, is past it): close the run
                        // without polling, which could start mail that no
                        // window would hand over.
                        part.run_paced(end, &mut Virtual);
                        break;
                    }
                    let w = Instant::from_nanos(t.saturating_add(look - 1).min(end_ns));
                    match pacer.as_deref_mut() {
                        Some(p) if io => part.run_wall_io(w, p),
                        Some(p) => {
                            part.run_paced(w, p);
                            if any_io {
                                p.wait_until(w);
                            }
                        }
                        None => part.run_paced(w, &mut Virtual),
                    }
                    for (to, out) in part.outgoing.iter_mut().enumerate() {
                        if !out.is_empty() {
                            if let Ok(mut b) = boxes[to].lock() {
                                b.append(out);
                            }
                        }
                    }
                    barrier.wait();
                });
            }
        });
    }

    /// Shows every delivered frame to `tap` (time, receiving node and port).
    pub fn set_tap(&mut self, tap: Tap<F>) {
        self.tap = Some(Arc::new(Mutex::new(tap)));
        self.install_taps();
    }

    /// Removes the tap (dropping it).
    pub fn clear_tap(&mut self) {
        self.tap = None;
        self.install_taps();
    }

    /// Shows every dropped frame to `tap`: frames the output ports and links
    /// drop (a full buffer, `tail_drop`; lost on the way, `link_loss`; sent
    /// out of a port with no link, `unconnected`) and the frames nodes drop
    /// (asked of them through their outbox).
    pub fn set_drop_tap(&mut self, tap: DropTap<F>) {
        self.drop_tap = Some(Arc::new(Mutex::new(tap)));
        self.install_taps();
    }

    /// Removes the drop tap (dropping it).
    pub fn clear_drop_tap(&mut self) {
        self.drop_tap = None;
        self.install_taps();
    }

    /// Shows `tap` every batch of frames that crosses the engine's edge
    /// ([`BoundaryTap`]).
    pub fn set_boundary_tap(&mut self, tap: BoundaryTap<F>) {
        self.boundary_tap = Some(Arc::new(Mutex::new(tap)));
        self.install_taps();
    }

    /// Removes the boundary tap (dropping it).
    pub fn clear_boundary_tap(&mut self) {
        self.boundary_tap = None;
        self.install_taps();
    }

    /// Reads what still waits on the external inputs, without handing it
    /// to their nodes, and shows it to `f` by place (side `In`): what a
    /// process stopping now leaves unread (cells its link discards for
    /// their header go to the drop tap, as when running). Reads at most
    /// `max` frames an input (a far end that goes on sending could keep it
    /// busy).
    pub fn drain_external_inputs(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(aurora_net::accounting::Place, &[F]),
    ) {
        for p in &mut self.parts {
            p.drain_inputs(max, f);
        }
    }

    /// The engine's clock: the time of the last event run, or the end of
    /// the last run.
    pub fn now(&self) -> Instant {
        self.parts
            .iter()
            .map(|p| p.now)
            .min()
            .unwrap_or(Instant::ZERO)
    }

    /// Events handled so far.
    pub fn events(&self) -> u64 {
        self.parts.iter().map(|p| p.events).sum()
    }

    /// Cells on links, not yet delivered (on a fixed-rate link, counted
    /// from when its port accepts them: such a line is computed in closed
    /// form, so cells waiting for it are already on their way).
    pub fn in_flight(&self) -> u64 {
        self.parts.iter().map(|p| p.in_flight).sum()
    }

    /// Shows `f` every frame between a sending node and a receiving one,
    /// with its link's sending end (node, port): waiting in a port, on a
    /// line, or passing between workers. For the books at the end of a
    /// run: it walks every queue.
    pub fn for_each_in_flight(&self, f: &mut dyn FnMut(NodeId, PortId, &F)) {
        for p in &self.parts {
            p.for_each_in_flight(&mut |(n, port), x| f(NodeId(n), port, x));
        }
    }

    /// A digest of every delivery so far: each node's digest of what it
    /// received, folded in node order (so it does not depend on how
    /// deliveries to different nodes interleaved, or on the workers). An
    /// engine with external I/O (which no run can repeat) keeps none.
    pub fn trace_hash(&self) -> u64 {
        self.home
            .iter()
            .enumerate()
            .fold(DIGEST_START, |h, (i, &p)| {
                let d = self.parts[p as usize].digests[i];
                (h ^ d ^ (i as u64) << 48)
                    .wrapping_mul(0x0000_0100_0000_01B3)
                    .rotate_left(29)
            })
    }

    /// The direction leaving `port` of `node`, if the engine has not run
    /// yet (what may change only before then).
    fn unstarted_dir(&self, node: NodeId, port: PortId) -> Result<usize, EngineError> {
        if self.events() > 0 || self.in_flight() > 0 {
            return Err(EngineError::Started);
        }
        self.dir_of(node, port)
            .ok_or(EngineError::NoSuchPort(node, port))
    }

    /// The direction leaving `port` of `node`.
    fn dir_of(&self, node: NodeId, port: PortId) -> Option<usize> {
        let k = (*self.parts[0]
            .out
            .get(node.0 as usize)?
            .get(usize::from(port))?)?;
        Some(k as usize)
    }

    /// Puts `node`'s output `port` under the discipline `p` instead of the
    /// FIFO its link gave it (before the first event). The link then pulls
    /// each frame from it when the line is free; what `p` refuses is an
    /// overflow drop at the port, under the reason `p` gives.
    pub fn set_port(
        &mut self,
        node: NodeId,
        port: PortId,
        p: Box<dyn port::Port<F>>,
    ) -> Result<(), EngineError> {
        let k = self.unstarted_dir(node, port)?;
        let h = self.home[node.0 as usize] as usize;
        self.parts[h].dirs[k].set_port(p);
        Ok(())
    }

    /// The discipline of `node`'s output `port`, if [`Engine::set_port`]
    /// gave it one of type `T`.
    pub fn port<T: Any>(&self, node: NodeId, port: PortId) -> Option<&T> {
        let k = self.dir_of(node, port)?;
        let p = &self.parts[self.home[node.0 as usize] as usize];
        match &p.dirs[k].port {
            port::AnyPort::Other(d) => (d.as_ref() as &dyn Any).downcast_ref::<T>(),
            port::AnyPort::Fifo(_) => None,
        }
    }

    /// Frames waiting in `node`'s output port `port` (not counting one on
    /// the line).
    pub fn queued(&self, node: NodeId, port: PortId) -> Option<usize> {
        let k = self.dir_of(node, port)?;
        let p = &self.parts[self.home[node.0 as usize] as usize];
        Some(p.dirs[k].waiting(p.now))
    }

    /// Nodes in the network.
    pub fn node_count(&self) -> usize {
        self.home.len()
    }

    /// Frames (cells) sent out of ports with no link.
    pub fn unconnected(&self) -> u64 {
        self.parts.iter().map(|p| p.unconnected).sum()
    }

    /// The counters of the link direction leaving `port` of `node`.
    pub fn link(&self, node: NodeId, port: PortId) -> Option<DirCounters> {
        let k = self.dir_of(node, port)?;
        let mut c = self.parts[self.home[node.0 as usize] as usize].dirs[k].counters;
        let to = self.parts[0].dirs[k].to.0;
        c.delivered = self.parts[self.home[to as usize] as usize].dirs[k]
            .counters
            .delivered;
        Some(c)
    }

    /// The model of the link direction leaving `port` of `node`.
    pub fn link_spec(&self, node: NodeId, port: PortId) -> Option<LinkSpec> {
        Some(self.specs[self.dir_of(node, port)?].spec)
    }

    /// Every link direction's counters, by its sending node and port.
    pub fn links(&self) -> Vec<((NodeId, PortId), DirCounters)> {
        self.specs
            .iter()
            .filter_map(|d| {
                let from = (NodeId(d.from.0), d.from.1);
                Some((from, self.link(from.0, from.1)?))
            })
            .collect()
    }

    /// The partition that runs node `id`, if it exists.
    fn part_of(&self, id: NodeId) -> Option<&Part<F>> {
        Some(&self.parts[*self.home.get(id.0 as usize)? as usize])
    }

    /// A node as a [`Node`], whatever its type.
    pub fn node_dyn(&self, id: NodeId) -> Option<&dyn Node<F>> {
        let n: &dyn EngineNode<F> = self.part_of(id)?.nodes[id.0 as usize].as_ref();
        Some(n)
    }

    /// A node, by its concrete type.
    pub fn node<T: Any>(&self, id: NodeId) -> Option<&T> {
        let n: &dyn EngineNode<F> = self.part_of(id)?.nodes[id.0 as usize].as_ref();
        let any: &dyn Any = n;
        any.downcast_ref::<T>()
            .or_else(|| n.inner()?.downcast_ref::<T>())
            .or_else(|| n.innermost()?.downcast_ref::<T>())
    }

    /// Reads node `id`'s next wake-up time again (after changing it with
    /// [`Engine::node_mut`], say, so new work it was given gets done).
    pub fn touch(&mut self, id: NodeId) {
        if let Some(&h) = self.home.get(id.0 as usize) {
            self.parts[h as usize].schedule_wake(id.0);
        }
    }

    /// A node, by its concrete type, to change it between runs (then
    /// [`Engine::touch`] it if it has new timed work).
    pub fn node_mut<T: Any>(&mut self, id: NodeId) -> Option<&mut T> {
        let h = *self.home.get(id.0 as usize)? as usize;
        let n: &mut dyn EngineNode<F> = self.parts[h].nodes[id.0 as usize].as_mut();
        if (n as &dyn Any).is::<T>() {
            return (n as &mut dyn Any).downcast_mut::<T>();
        }
        n.inner_mut()?.downcast_mut::<T>()
    }
}

/// A barrier for the workers of a split engine: they meet twice per
/// window, often every few microseconds of work, so a waiter spins a while
/// before it yields its core (a kernel wait would cost more than the
/// window).
struct SpinBarrier {
    n: usize,
    count: AtomicUsize,
    round: AtomicUsize,
}

impl SpinBarrier {
    fn new(n: usize) -> Self {
        SpinBarrier {
            n,
            count: AtomicUsize::new(0),
            round: AtomicUsize::new(0),
        }
    }

    fn wait(&self) {
        let round = self.round.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.count.store(0, Ordering::Relaxed);
            self.round.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.round.load(Ordering::Acquire) == round {
            if spins < 2_000 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
