//! Network nodes for Aurora's cell network.
//!
//! A node is a sans-I/O state machine with numbered ports: it is handed the
//! cells that arrive on a port with the current time, puts the cells it
//! sends in an [`Outbox`], and says when it next needs to run. The same
//! nodes run under the virtual-time driver (`aurora-engine`) and, later, the
//! real-time driver.
//!
//! | module | what |
//! |---|---|
//! | [`switch`] | the ATM cell switch: per-input-port VC and VP translation, usage parameter control per VC |
//! | [`traffic`] | a host that sends (shaped, if asked) and checks AAL5 flows, for scenarios |
//! | [`vunet`] | VuNet's header-routed switch and relaying link, with authenticated control cells |
//! | [`avlink`] | the AVlink: a VuNet relaying link whose far side is a standard ATM WAN |

pub mod accounting;
pub mod avlink;
pub mod oam;
pub mod switch;
pub mod tag;
pub mod traffic;
pub mod vunet;

use aurora_time::Instant;
use aurora_wire::CellBytes;

/// A port number on a node.
pub type PortId = u16;

/// What travels on a link: an ATM cell (the default everywhere), or a
/// variable-length packet on networks that carry them (ATOMIC).
pub trait Frame: Clone + Send + 'static {
    /// The frame's bytes.
    fn bytes(&self) -> &[u8];
    /// The frame's bytes, to damage (bit errors on a link).
    fn bytes_mut(&mut self) -> &mut [u8];
    /// A frame made of `b` (from a link that carries bytes), if `b` can be
    /// one.
    fn from_bytes(b: &[u8]) -> Option<Self>;
}

impl Frame for CellBytes {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
    fn from_bytes(b: &[u8]) -> Option<Self> {
        b.try_into().ok()
    }
}

impl Frame for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
    fn from_bytes(b: &[u8]) -> Option<Self> {
        Some(b.to_vec())
    }
}

/// The frames a node sends during one call, each with its output port, in
/// the order they were sent; when the driver asks for them, copies of
/// the frames the node dropped on arrival, each with its port and reason,
/// so the driver can charge every loss to the flow it hit; and the holds
/// the node put on its input ports ([`Outbox::hold_input`]).
#[derive(Debug)]
pub struct Outbox<F = CellBytes> {
    cells: Vec<(PortId, F)>,
    drops: Vec<(PortId, F, &'static str)>,
    holds: Vec<(PortId, Instant)>,
    track_drops: bool,
}

impl<F> Default for Outbox<F> {
    fn default() -> Self {
        Outbox {
            cells: Vec::new(),
            drops: Vec::new(),
            holds: Vec::new(),
            track_drops: false,
        }
    }
}

impl<F> Outbox<F> {
    /// Sends `cell` out of `port`.
    #[inline]
    pub fn push(&mut self, port: PortId, cell: F) {
        self.cells.push((port, cell));
    }
    /// True when nothing was sent.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
    /// Takes the frames sent, oldest first.
    pub fn drain(&mut self) -> std::vec::Drain<'_, (PortId, F)> {
        self.cells.drain(..)
    }
    /// Asks nodes for a copy of every frame they drop (off by default: a
    /// node's counters say how many; this says which).
    pub fn track_drops(&mut self, on: bool) {
        self.track_drops = on;
    }
    /// Whether dropped frames are wanted.
    #[inline]
    pub fn tracking_drops(&self) -> bool {
        self.track_drops
    }
    /// A node dropped `cell`, which arrived on `port`, for `reason` (a
    /// short snake_case name). Kept only when the driver tracks drops.
    #[inline]
    pub fn dropped(&mut self, port: PortId, cell: &F, reason: &'static str)
    where
        F: Clone,
    {
        if self.track_drops {
            self.drops.push((port, cell.clone(), reason));
        }
    }
    /// Takes the dropped frames, oldest first.
    pub fn drain_drops(&mut self) -> std::vec::Drain<'_, (PortId, F, &'static str)> {
        self.drops.drain(..)
    }
    /// Asks that no frame arrive on input `port` before `until`: the line
    /// feeding it starts no frame that would arrive sooner, and frames
    /// wait in the sending node's output port (under that port's rule,
    /// drops included). Only for a node whose [`Node::holds_input`] is
    /// true, and only where the driver can reach the sender (not across
    /// partitions or external links: there frames keep arriving). A hold
    /// only lengthens: one ending before the port's current hold changes
    /// nothing.
    #[inline]
    pub fn hold_input(&mut self, port: PortId, until: Instant) {
        // One hold per port, the latest: an outbox nobody drains of holds
        // (a node inside another's) stays as small as the node's ports.
        match self.holds.iter_mut().find(|h| h.0 == port) {
            Some(h) => h.1 = h.1.max(until),
            None => self.holds.push((port, until)),
        }
    }
    /// Takes the holds asked for, one per port (the latest), in the order
    /// their ports were first held.
    pub fn drain_holds(&mut self) -> std::vec::Drain<'_, (PortId, Instant)> {
        self.holds.drain(..)
    }
}

/// A sans-I/O network node, exchanging frames of type `F` (cells unless
/// said otherwise).
pub trait Node<F: Frame = CellBytes> {
    /// How many ports the node has (numbered from 0).
    fn ports(&self) -> usize;
    /// Frames arrived on `port` at `now`.
    fn receive(&mut self, now: Instant, port: PortId, cells: &[F], out: &mut Outbox<F>);
    /// Time-driven work due by `now` (timers, traffic to send).
    fn poll(&mut self, now: Instant, out: &mut Outbox<F>);
    /// When [`Node::poll`] next needs to run, if ever.
    fn poll_at(&self) -> Option<Instant>;
    /// Whether the node may hold its input ports ([`Outbox::hold_input`]):
    /// asked once, when a link into it is built, so the driver keeps the
    /// lines feeding it ready to wait.
    fn holds_input(&self) -> bool {
        false
    }
    /// What went through `port` so far, for nodes that switch or relay
    /// cells (hosts report their own figures and give `None`).
    fn port_summary(&self, _port: PortId) -> Option<PortSummary> {
        None
    }
    /// The node's side of a local host's IP stack (a TUN interface), for
    /// nodes that have one.
    fn packet_port(&mut self) -> Option<&mut dyn PacketPort<F>> {
        None
    }
    /// The node inside, for a node that adapts another to a different
    /// frame type (so a report can find a node by its own type).
    fn inner(&self) -> Option<&dyn std::any::Any> {
        None
    }
    /// The deepest node inside (the inner node's own inner one, if it has
    /// one): an adapted node that wraps another, as a TCP host wraps its
    /// IP node.
    fn innermost(&self) -> Option<&dyn std::any::Any> {
        self.inner()
    }
    /// The node inside, to change it (see [`Node::inner`]).
    fn inner_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
}

/// Where a node meets a local host's IP stack: packets, not cells. The
/// driver reads packets from the host (a TUN interface) into
/// [`PacketPort::host_sent`] and writes what [`PacketPort::drain_to_host`] gives
/// back to it.
pub trait PacketPort<F = CellBytes> {
    /// A packet the local host sent.
    fn host_sent(&mut self, now: Instant, pkt: &[u8], out: &mut Outbox<F>);
    /// Hands every packet waiting for the local host to `f`, oldest first.
    fn drain_to_host(&mut self, f: &mut dyn FnMut(&[u8]));
    /// Packets waiting for the local host.
    fn to_host_len(&self) -> usize;
}

/// Cells through one port of a switching node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortSummary {
    /// Cells that arrived on the port.
    pub cells_in: u64,
    /// Cells sent out of the port.
    pub cells_out: u64,
    /// Arriving cells dropped, for any reason.
    pub dropped: u64,
}
