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
    /// Appends copies of `frames` to `queue` (a driver moving a run of
    /// frames onto a line): one copy of the whole run for frames that are
    /// plain bytes.
    fn extend_queue(queue: &mut std::collections::VecDeque<Self>, frames: &[Self]) {
        queue.extend(frames.iter().cloned());
    }
}

impl Frame for CellBytes {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
    #[inline]
    fn extend_queue(queue: &mut std::collections::VecDeque<Self>, frames: &[Self]) {
        // Cells are `Copy`: the queue takes the slice with one copy.
        queue.extend(frames);
    }
}

impl Frame for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

/// The frames a node sends during one call, each with its output port, in
/// the order they were sent; when the driver asks for them, copies of
/// the frames the node dropped on arrival, each with its port and reason,
/// so the driver can charge every loss to the flow it hit; and the holds
/// the node put on its input ports ([`Outbox::hold_input`]).
#[derive(Debug)]
pub struct Outbox<F = CellBytes> {
    /// The frames, in the order sent.
    frames: Vec<F>,
    /// Their output ports: runs of consecutive frames for one port, (port,
    /// frames), in order.
    runs: Vec<(PortId, u32)>,
    drops: Vec<(PortId, F, &'static str)>,
    holds: Vec<(PortId, Instant)>,
    track_drops: bool,
}

impl<F> Default for Outbox<F> {
    fn default() -> Self {
        Outbox {
            frames: Vec::new(),
            runs: Vec::new(),
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
        self.frames.push(cell);
        self.count(port, 1);
    }
    /// Sends `cells` out of `port`, in order.
    #[inline]
    pub fn push_slice(&mut self, port: PortId, cells: &[F])
    where
        F: Clone,
    {
        if cells.is_empty() {
            return;
        }
        self.frames.extend_from_slice(cells);
        self.count(port, cells.len());
    }
    /// Notes `n` more frames (just added) for `port`: the last run grows
    /// if it is `port`'s, up to `u32::MAX` frames a run.
    #[inline]
    fn count(&mut self, port: PortId, mut n: usize) {
        while n > 0 {
            let added = match self.runs.last_mut() {
                Some((p, k)) if *p == port && *k < u32::MAX => {
                    let add = n.min((u32::MAX - *k) as usize);
                    *k += add as u32;
                    add
                }
                _ => {
                    let add = n.min(u32::MAX as usize);
                    self.runs.push((port, add as u32));
                    add
                }
            };
            n -= added;
        }
    }
    /// Frames sent.
    pub fn len(&self) -> usize {
        self.frames.len()
    }
    /// True when nothing was sent.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
    /// Takes the frames sent, oldest first, each with its port.
    pub fn drain(&mut self) -> Drain<'_, F> {
        Drain {
            frames: self.frames.drain(..),
            runs: self.runs.drain(..),
            port: 0,
            left: 0,
        }
    }
    /// The port every frame was sent to, if there is one run (one port).
    #[inline]
    pub fn single_port(&self) -> Option<PortId> {
        match self.runs.as_slice() {
            [(port, _)] => Some(*port),
            _ => None,
        }
    }
    /// Takes the frames sent (all of them, to one port: see
    /// [`Outbox::single_port`]) by swapping them with `empty`, whose
    /// allocation the outbox keeps for the next frames.
    ///
    /// # Panics
    /// If `empty` holds frames.
    pub fn swap_frames(&mut self, empty: &mut Vec<F>) {
        assert!(empty.is_empty(), "an outbox swaps its frames for none");
        std::mem::swap(&mut self.frames, empty);
        self.runs.clear();
    }
    /// Takes the frames sent, oldest first, as runs for one port each:
    /// the runs (port, how many frames) and the frames.
    pub fn drain_runs(&mut self) -> (std::vec::Drain<'_, (PortId, u32)>, std::vec::Drain<'_, F>) {
        (self.runs.drain(..), self.frames.drain(..))
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

/// The frames an [`Outbox`] held, oldest first, each with its port
/// ([`Outbox::drain`]).
#[derive(Debug)]
pub struct Drain<'a, F> {
    frames: std::vec::Drain<'a, F>,
    runs: std::vec::Drain<'a, (PortId, u32)>,
    port: PortId,
    left: u32,
}

impl<F> Iterator for Drain<'_, F> {
    type Item = (PortId, F);

    fn next(&mut self) -> Option<(PortId, F)> {
        while self.left == 0 {
            (self.port, self.left) = self.runs.next()?;
        }
        self.left -= 1;
        Some((self.port, self.frames.next()?))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.frames.size_hint()
    }

    fn count(self) -> usize {
        self.frames.len()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames come out of an outbox in the order they went in, each with
    /// its port, however pushed; as runs, consecutive frames of one port
    /// are one run.
    #[test]
    fn an_outbox_keeps_order_and_ports() {
        let mut out: Outbox<Vec<u8>> = Outbox::default();
        out.push(1, vec![1]);
        out.push_slice(1, &[vec![2], vec![3]]);
        out.push_slice(2, &[]);
        out.push(2, vec![4]);
        out.push(1, vec![5]);
        out.push_slice(0, &[vec![6], vec![7]]);
        assert!(!out.is_empty());
        let all: Vec<(PortId, Vec<u8>)> = out.drain().collect();
        let want: Vec<(PortId, Vec<u8>)> = [(1, 1), (1, 2), (1, 3), (2, 4), (1, 5), (0, 6), (0, 7)]
            .into_iter()
            .map(|(p, b)| (p, vec![b]))
            .collect();
        assert_eq!(all, want);
        assert!(out.is_empty());
        let mut cells: Outbox = Outbox::default();
        cells.push_slice(3, &[[1; 53], [2; 53]]);
        cells.push(3, [3; 53]);
        cells.push(4, [4; 53]);
        let (runs, frames) = cells.drain_runs();
        assert_eq!(runs.collect::<Vec<_>>(), [(3, 3), (4, 1)]);
        assert_eq!(frames.map(|c| c[0]).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert!(cells.drain().next().is_none());
    }

    /// A run of frames goes onto a queue whole and in order, for cells
    /// (one copy) as for other frames.
    #[test]
    fn frames_extend_a_queue_in_order() {
        let mut q: std::collections::VecDeque<CellBytes> = [[9; 53]].into();
        CellBytes::extend_queue(&mut q, &[[1; 53], [2; 53]]);
        assert_eq!(q.iter().map(|c| c[0]).collect::<Vec<_>>(), [9, 1, 2]);
        let mut f: std::collections::VecDeque<Vec<u8>> = std::collections::VecDeque::new();
        Vec::<u8>::extend_queue(&mut f, &[vec![1, 2], vec![3]]);
        assert_eq!(f, [vec![1, 2], vec![3]]);
    }
}
