//! The real-time driver: the same nodes the virtual-time driver runs, each
//! on its own thread, joined by in-process rings. Every link direction is
//! paced at its rate and given its delay, loss and bit errors by the link
//! shaper; its bounded queue is the sending port's output buffer, and a cell
//! that finds it full is a counted drop, as in the simulator.
//!
//! Time is the wall clock since the run started, in the same integer
//! nanoseconds the nodes always use.

pub mod frames;
pub use aurora_engine::lateness;

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant as WallClock};

use aurora_engine::{DirCounters, LinkSpec, NodeId};
use aurora_link::shape::{Shaped, Shaping};
use aurora_link::{CellSink, CellSource, LinkDrop};
use aurora_net::{Node, Outbox, PortId};
use aurora_time::Instant;
use aurora_wire::CellBytes;

/// A node the real-time driver can run: any node that may move to a thread.
pub trait RtNode: Node + Any + Send {}
impl<T: Node + Any + Send> RtNode for T {}

/// Sees every batch of cells a node's ports receive (a capture, say), and
/// the node itself every [`SAMPLE_EVERY`] (for a live display). Each node's
/// worker owns its own tap, so taps need no locking.
pub trait Tap: Any + Send {
    /// Cells that arrived at `port` at `t`.
    fn cells(&mut self, t: Instant, port: PortId, cells: &[CellBytes]);
    /// The node as it is at `t`.
    fn sample(&mut self, _t: Instant, _node: &dyn RtNode) {}
}

/// How often a worker shows its node to its tap.
pub const SAMPLE_EVERY: StdDuration = StdDuration::from_millis(100);

/// Cells a port holds in front of its shaper when its node sent more at
/// once than the output buffer takes (a late node sends in bursts what it
/// would have sent over time); past this they are tail drops.
pub const PENDING_CELLS: usize = 256;

/// The sending side of one of a node's ports.
pub struct Out {
    link: Shaped<Box<dyn CellSink>>,
    pending: std::collections::VecDeque<CellBytes>,
    pending_cap: usize,
    overflow: u64,
    offered: u64,
}

impl Out {
    /// Sends through `link`, shaped by `shaping` (its queue is the port's
    /// output buffer).
    pub fn new(link: Box<dyn CellSink>, shaping: Shaping) -> Self {
        let mut link = Shaped::new(link, shaping);
        link.track_lost(true);
        Out {
            link,
            pending: std::collections::VecDeque::new(),
            pending_cap: PENDING_CELLS.max(shaping.queue),
            overflow: 0,
            offered: 0,
        }
    }

    /// Takes `cell` (sent by the node), or drops it when the port is full.
    fn offer(&mut self, cell: CellBytes) -> Result<(), CellBytes> {
        self.offered += 1;
        if self.pending.len() >= self.pending_cap {
            self.overflow += 1;
            return Err(cell);
        }
        self.pending.push_back(cell);
        Ok(())
    }

    /// Moves what the shaper has room for from the port's queue to it.
    fn push(&mut self) {
        while !self.pending.is_empty() {
            let took = self.link.send(self.pending.make_contiguous()).unwrap_or(0);
            self.pending.drain(..took);
            if took == 0 {
                break;
            }
        }
    }

    /// Cells held in front of the shaper and staged in it.
    pub fn queued(&self) -> usize {
        self.pending.len() + self.link.staged()
    }

    /// The sending link's own counters (datagrams, peer unreachable, ...).
    pub fn link_counters(&self) -> aurora_link::LinkCounters {
        self.link.counters()
    }

    /// The direction's counters (delivery is counted at the far end).
    pub fn counters(&self) -> DirCounters {
        DirCounters {
            offered: self.offered,
            overflow: self.overflow,
            lost: self.link.counters().drops.get(LinkDrop::InjectedLoss),
            errored: self.link.bit_errors(),
            delivered: 0,
        }
    }
}

/// A local host's IP stack as the worker sees it: packets in and out (a
/// TUN interface, say).
pub trait PacketDevice: Send {
    /// One packet from the host, if one is waiting.
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>>;
    /// One packet to the host; false if the host's queue was full.
    fn send(&mut self, pkt: &[u8]) -> std::io::Result<bool>;
}

impl PacketDevice for aurora_link::tun::Tun {
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        aurora_link::tun::Tun::recv(self, buf)
    }
    fn send(&mut self, pkt: &[u8]) -> std::io::Result<bool> {
        aurora_link::tun::Tun::send(self, pkt)
    }
}

/// What moved between a worker's node and its packet device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Packets read from the device and handed to the node.
    pub from_device: u64,
    /// Packets the node gave and the device took.
    pub to_device: u64,
    /// Packets the device refused (its queue was full).
    pub device_full: u64,
    /// Reads or writes that failed.
    pub errors: u64,
}

/// Packets read from a device per turn of the worker's loop.
pub const DEVICE_BATCH: usize = 64;

struct Device {
    dev: Box<dyn PacketDevice>,
    buf: Vec<u8>,
    counters: DeviceCounters,
}

/// One node with its links, run by [`Worker::run`].
pub struct Worker {
    node: Box<dyn RtNode>,
    inputs: Vec<(PortId, Box<dyn CellSource>)>,
    outputs: Vec<Option<Out>>,
    batch: Vec<CellBytes>,
    tap: Option<Box<dyn Tap>>,
    device: Option<Device>,
    ledger: aurora_net::accounting::Ledger,
    id: u32,
    lateness: lateness::NodeLateness,
    /// The time of the worker's current turn.
    now: Instant,
}

/// Why a run could not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtError(pub String);

impl std::fmt::Display for RtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RtError {}

impl Worker {
    /// A node with no links yet.
    pub fn new(node: Box<dyn RtNode>) -> Self {
        let ports = node.ports();
        Worker {
            node,
            inputs: Vec::new(),
            outputs: (0..ports).map(|_| None).collect(),
            batch: vec![[0; 53]; 256],
            tap: None,
            device: None,
            ledger: aurora_net::accounting::Ledger::new(),
            id: 0,
            lateness: lateness::NodeLateness::default(),
            now: Instant::ZERO,
        }
    }

    /// Names the node (its number in the run) for the places its losses
    /// are charged to.
    pub fn set_id(&mut self, id: NodeId) {
        self.id = id.0;
    }

    /// The cells this worker's node and ports dropped, charged to their PDUs.
    pub fn ledger(&self) -> &aurora_net::accounting::Ledger {
        &self.ledger
    }

    /// How far behind its schedule the node ran (see [`lateness`]).
    pub fn lateness(&self) -> &lateness::NodeLateness {
        &self.lateness
    }

    /// Joins the node's [`aurora_net::PacketPort`] to `dev`: packets the
    /// device gives go to the node, and packets the node has for its host
    /// go to the device.
    pub fn set_packet_device(&mut self, dev: Box<dyn PacketDevice>) {
        self.device = Some(Device {
            dev,
            buf: vec![0; 65536],
            counters: DeviceCounters::default(),
        });
    }

    /// The packet device's counters, if there is one.
    pub fn device_counters(&self) -> Option<DeviceCounters> {
        self.device.as_ref().map(|d| d.counters)
    }

    /// Moves packets between the device and the node; true if any moved.
    fn device_turn(&mut self, now: Instant, out: &mut Outbox) -> bool {
        let Some(d) = self.device.as_mut() else {
            return false;
        };
        let Some(port) = self.node.packet_port() else {
            return false;
        };
        let mut moved = false;
        for _ in 0..DEVICE_BATCH {
            match d.dev.recv(&mut d.buf) {
                Ok(Some(n)) => {
                    d.counters.from_device += 1;
                    port.host_sent(now, &d.buf[..n], out);
                    moved = true;
                }
                Ok(None) => break,
                Err(_) => {
                    d.counters.errors += 1;
                    break;
                }
            }
        }
        if port.to_host_len() > 0 {
            moved = true;
            let (dev, c) = (&mut d.dev, &mut d.counters);
            port.drain_to_host(&mut |p| match dev.send(p) {
                Ok(true) => c.to_device += 1,
                Ok(false) => c.device_full += 1,
                Err(_) => c.errors += 1,
            });
        }
        moved
    }

    /// Shows every received batch to `tap`.
    pub fn set_tap(&mut self, tap: Box<dyn Tap>) {
        self.tap = Some(tap);
    }

    /// The tap, back from the worker.
    pub fn take_tap(&mut self) -> Option<Box<dyn Tap>> {
        self.tap.take()
    }

    /// Connects a port's receiving side.
    pub fn add_input(&mut self, port: PortId, mut link: Box<dyn CellSource>) {
        link.track_discarded(true);
        self.inputs.push((port, link));
    }

    /// Connects a port's sending side; false if the port does not exist.
    pub fn set_output(&mut self, port: PortId, out: Out) -> bool {
        match self.outputs.get_mut(usize::from(port)) {
            Some(slot) => {
                *slot = Some(out);
                true
            }
            None => false,
        }
    }

    /// The node.
    pub fn node(&self) -> &dyn RtNode {
        self.node.as_ref()
    }

    /// The sending side of a port.
    pub fn output(&self, port: PortId) -> Option<&Out> {
        self.outputs.get(usize::from(port))?.as_ref()
    }

    /// Cells a port's receiving side has handed up.
    pub fn delivered(&self, port: PortId) -> u64 {
        self.inputs
            .iter()
            .filter(|(p, _)| *p == port)
            .map(|(_, l)| l.counters().cells_delivered)
            .sum()
    }

    /// The receiving side's counters for a port (summed if it has several).
    pub fn input_counters(&self, port: PortId) -> Option<aurora_link::LinkCounters> {
        self.inputs
            .iter()
            .find(|(p, _)| *p == port)
            .map(|(_, l)| l.counters())
    }

    /// The node, back from the worker.
    pub fn into_node(self) -> Box<dyn RtNode> {
        self.node
    }

    fn route(&mut self, out: &mut Outbox) {
        use aurora_net::accounting::{Place, Side};
        let node = self.id;
        for (port, cell, why) in out.drain_drops() {
            let side = Side::In;
            self.ledger
                .dropped(self.now, Place { node, port, side }, why, &cell);
        }
        for (port, cell) in out.drain() {
            // An unconnected port has nothing on the other side.
            if let Some(Some(o)) = self.outputs.get_mut(usize::from(port)) {
                // What the port cannot hold is an output-buffer overflow,
                // as at a real switch port.
                if let Err(c) = o.offer(cell) {
                    let side = Side::Out;
                    self.ledger
                        .dropped(self.now, Place { node, port, side }, "tail_drop", &c);
                }
            }
        }
        self.push_outputs();
    }

    /// Hands queued cells to the shapers, and charges the cells they lost.
    fn push_outputs(&mut self) {
        use aurora_net::accounting::{Place, Side};
        let node = self.id;
        for (port, o) in self.outputs.iter_mut().enumerate() {
            let Some(o) = o else { continue };
            o.push();
            for c in o.link.take_lost() {
                let (port, side) = (port as PortId, Side::Out);
                self.ledger
                    .dropped(self.now, Place { node, port, side }, "link_loss", &c);
            }
        }
    }

    /// Runs the node until `stop` is set; time counts from `start`.
    pub fn run(mut self, start: WallClock, stop: &AtomicBool) -> Self {
        let mut out = Outbox::default();
        out.track_drops(true);
        let every = SAMPLE_EVERY.as_nanos() as i64;
        let mut next_sample = Instant::from_nanos(every);
        let since = |start: WallClock| {
            let t = start.elapsed();
            (t, Instant::from_nanos(t.as_nanos() as i64))
        };
        while !stop.load(Ordering::Relaxed) {
            let (t, now) = since(start);
            self.now = now;
            self.lateness.turn(t);
            if now >= next_sample {
                if let Some(tap) = self.tap.as_mut() {
                    tap.sample(now, self.node.as_ref());
                }
                next_sample = now + aurora_time::Duration::from_nanos(every);
            }
            let mut busy = false;
            for i in 0..self.inputs.len() {
                let port = self.inputs[i].0;
                // A broken or closed link stays quiet; its counters say why.
                let n = self.inputs[i].1.recv(&mut self.batch).unwrap_or(0);
                {
                    use aurora_net::accounting::{Place, Side};
                    let (ledger, node, side) = (&mut self.ledger, self.id, Side::In);
                    self.inputs[i].1.take_discarded(&mut |c| {
                        ledger.dropped(now, Place { node, port, side }, "hec_uncorrectable", c)
                    });
                }
                if n > 0 {
                    busy = true;
                    if let Some(tap) = self.tap.as_mut() {
                        tap.cells(now, port, &self.batch[..n]);
                    }
                    self.node.receive(now, port, &self.batch[..n], &mut out);
                    self.route(&mut out);
                }
            }
            if let Some(due) = self.node.poll_at().filter(|t| *t <= now) {
                self.lateness.timer(due, since(start).1);
                self.node.poll(now, &mut out);
                self.route(&mut out);
                busy = true;
            }
            if self.device_turn(now, &mut out) {
                self.route(&mut out);
                busy = true;
            }
            self.push_outputs();
            for o in self.outputs.iter_mut().flatten() {
                let _ = o.link.flush();
            }
            // A port with cells waiting for its shaper is sending: stay
            // awake (yielding the core) so the line runs at its rate.
            let sending = self.outputs.iter().flatten().any(|o| !o.pending.is_empty());
            if sending && !busy {
                // Time away from a line with cells waiting counts as a
                // wake-up as late as the yield lasted.
                let before = start.elapsed();
                std::thread::yield_now();
                self.lateness
                    .woke(StdDuration::ZERO, start.elapsed().saturating_sub(before));
            } else if !busy {
                let next = self
                    .node
                    .poll_at()
                    .map(|t| StdDuration::from_nanos((t - now).as_nanos().max(0) as u64))
                    .unwrap_or(StdDuration::from_micros(100));
                let asked = next.min(StdDuration::from_micros(50));
                let before = start.elapsed();
                std::thread::sleep(asked);
                self.lateness
                    .woke(asked, start.elapsed().saturating_sub(before));
            }
        }
        let (t, now) = since(start);
        self.lateness.stop(now, t, self.node.poll_at());
        self
    }
}

/// The seed of the `k`th link direction's random stream (numbered from 1:
/// link `i`'s `a`-to-`b` direction is `2i + 1`, its reverse `2i + 2`).
pub fn direction_seed(seed: u64, k: u64) -> u64 {
    seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The shaping of one direction of `spec`, its stream seeded by `seed`.
pub fn shaping(spec: &LinkSpec, seed: u64) -> Shaping {
    Shaping {
        rate: Some(spec.rate),
        delay: StdDuration::from_nanos(spec.delay.as_nanos().max(0) as u64),
        loss: spec.loss,
        bit_error: spec.bit_error,
        seed,
        queue: spec.buffer.max(1),
    }
}
