//! External I/O: link ends and packet devices outside the engine, which a
//! wall-clock run polls as event sources.
//!
//! * An *external output* ([`crate::Engine::connect_external`]) is a link
//!   direction whose far end is outside: the node's output port, the line's
//!   rate, delay, loss and bit errors are the engine's as for any link, and
//!   a frame that would be delivered is handed to the sink instead (staged,
//!   then sent in a batch; a wall-clock run counts how late the batch's
//!   oldest frame was handed over in its node's lateness). What the sink
//!   refuses (it is full) is a drop named [`PEER_FULL`], shown to the
//!   drop tap; the engine never blocks.
//! * An *external input* ([`crate::Engine::add_external_input`]) is polled
//!   (without blocking) at least every [`POLL_SLICE`] of wall time; its
//!   frames reach the node at the engine's current time, through the tap.
//!   Cells its receiver discarded for their header go to the drop tap as
//!   `hec_uncorrectable`. Frames that waited in the link before they were
//!   read reach the node late: a wall-clock run counts how late (the wait
//!   of the oldest frame of each read, where the link can tell:
//!   [`ExternalSource::waited`]) in the node's lateness
//!   ([`crate::lateness::NodeLateness::inputs`]).
//! * A [`PacketDevice`] (a TUN interface) is joined to a node's
//!   [`aurora_net::PacketPort`], polled the same way. The node takes
//!   packets from it only while every output port of the node is under
//!   half full, and every external output whose sink says how much may
//!   wait at the far end ([`ExternalSink::waiting`]: a shared-memory
//!   ring) has under half of that taken by frames in the ring, staged
//!   for it, or in its port and on its line (what it has no room for
//!   waits in the device's queue).
//!
//! A poll that finds a whole batch waiting ([`INPUT_BATCH`] frames, or
//! [`DEVICE_BATCH`] packets) is followed by another at once, not by a
//! sleep.
//!
//! In an engine split between workers, each input, output and device
//! belongs to the worker that runs its node. Under the wall clock such a
//! worker polls them while it waits for the end of each window (see
//! [`crate::Engine::run_wall`]), and windows then follow the clock, one
//! lookahead long, even when no event is due.

use aurora_link::{CellSink, CellSource, LinkCounters, LinkError};
use aurora_net::PortId;
use aurora_wire::CellBytes;

/// Why an external sink's refusal drops a frame.
pub const PEER_FULL: &str = "peer_full";

/// Why a cell an external input's receiver discarded was dropped.
pub const HEC_UNCORRECTABLE: &str = "hec_uncorrectable";

/// The longest a wall-clock run with external I/O goes without polling it.
pub const POLL_SLICE: aurora_time::Duration = aurora_time::Duration::from_nanos(50_000);

/// Frames read from one external input per poll.
pub const INPUT_BATCH: usize = 256;

/// Packets read from a device per poll.
pub const DEVICE_BATCH: usize = 64;

/// The far end of an external output: takes frames, never blocks.
pub trait ExternalSink<F>: Send {
    /// Offers `frames`; returns how many it took (the rest are dropped).
    fn send(&mut self, frames: &[F]) -> Result<usize, LinkError>;
    /// Pushes out anything held.
    fn flush(&mut self) -> Result<bool, LinkError> {
        Ok(true)
    }
    /// The link's counters.
    fn counters(&self) -> LinkCounters {
        LinkCounters::default()
    }
    /// Frames waiting for the far end, and the most that can (`None` for
    /// a link that cannot tell).
    fn waiting(&self) -> Option<(usize, usize)> {
        None
    }
}

/// The near end of an external input: hands over waiting frames, never
/// blocks.
pub trait ExternalSource<F>: Send {
    /// Appends up to `max` waiting frames to `out`; returns how many.
    fn recv(&mut self, out: &mut Vec<F>, max: usize) -> Result<usize, LinkError>;
    /// Hands over the frames dropped for their header since the last call.
    fn take_discarded(&mut self, _f: &mut dyn FnMut(&F)) {}
    /// The link's counters.
    fn counters(&self) -> LinkCounters {
        LinkCounters::default()
    }
    /// How long the oldest frame the last `recv` handed over had waited
    /// in the link before it was read (`None`: nothing handed over, or
    /// the link cannot tell).
    fn waited(&self) -> Option<std::time::Duration> {
        None
    }
}

impl ExternalSink<CellBytes> for Box<dyn CellSink> {
    fn send(&mut self, frames: &[CellBytes]) -> Result<usize, LinkError> {
        CellSink::send(&mut **self, frames)
    }
    fn flush(&mut self) -> Result<bool, LinkError> {
        CellSink::flush(&mut **self)
    }
    fn counters(&self) -> LinkCounters {
        CellSink::counters(&**self)
    }
    fn waiting(&self) -> Option<(usize, usize)> {
        CellSink::waiting(&**self)
    }
}

/// A [`CellSource`] as an external input (tracking discarded cells).
pub struct Cells {
    src: Box<dyn CellSource>,
    buf: Vec<CellBytes>,
}

impl Cells {
    /// Reads from `src`, keeping the cells it discards for their header
    /// and timing how long cells waited in it.
    pub fn new(mut src: Box<dyn CellSource>) -> Self {
        src.track_discarded(true);
        src.time_waits();
        Cells {
            src,
            buf: vec![[0; 53]; INPUT_BATCH],
        }
    }
}

impl ExternalSource<CellBytes> for Cells {
    fn recv(&mut self, out: &mut Vec<CellBytes>, max: usize) -> Result<usize, LinkError> {
        let max = max.min(self.buf.len());
        let n = self.src.recv(&mut self.buf[..max])?.min(max);
        out.extend_from_slice(&self.buf[..n]);
        Ok(n)
    }
    fn take_discarded(&mut self, f: &mut dyn FnMut(&CellBytes)) {
        self.src.take_discarded(f)
    }
    fn counters(&self) -> LinkCounters {
        self.src.counters()
    }
    fn waited(&self) -> Option<std::time::Duration> {
        self.src.waited()
    }
}

/// A local host's IP stack as the engine sees it: packets in and out (a
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

/// What moved between a node and its packet device.
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

/// One external output.
pub(crate) struct ExtOut<F> {
    pub(crate) node: u32,
    pub(crate) port: PortId,
    pub(crate) sink: Box<dyn ExternalSink<F>>,
    /// Frames delivered, not yet handed to the sink.
    pub(crate) staged: Vec<F>,
    /// When the oldest of them was due at the far end.
    pub(crate) due: Option<aurora_time::Instant>,
    /// Frames the sink refused.
    pub(crate) refused: u64,
}

/// One external input.
pub(crate) struct ExtIn<F> {
    pub(crate) node: u32,
    pub(crate) port: PortId,
    pub(crate) src: Box<dyn ExternalSource<F>>,
}

/// One packet device.
pub(crate) struct ExtDev {
    pub(crate) node: u32,
    pub(crate) dev: Box<dyn PacketDevice>,
    pub(crate) buf: Vec<u8>,
    pub(crate) counters: DeviceCounters,
}

/// A partition's external I/O.
pub(crate) struct Io<F> {
    pub(crate) outs: Vec<ExtOut<F>>,
    pub(crate) ins: Vec<ExtIn<F>>,
    pub(crate) devs: Vec<ExtDev>,
    pub(crate) batch: Vec<F>,
}

impl<F> Default for Io<F> {
    fn default() -> Self {
        Io {
            outs: Vec::new(),
            ins: Vec::new(),
            devs: Vec::new(),
            batch: Vec::new(),
        }
    }
}

impl<F> Io<F> {
    /// True when there is any external I/O.
    pub(crate) fn any(&self) -> bool {
        !self.ins.is_empty() || !self.devs.is_empty() || !self.outs.is_empty()
    }
}
