//! Physical layers for Aurora: links that move batches of cells.
//!
//! | module | link |
//! |---|---|
//! | [`ring`] | lock-free SPSC ring in shared memory: threads (heap) or processes |
//! | [`shm`] | rings in files under `/dev/shm`, mapped by two processes |
//! | [`udp`] | many cells per datagram, sequence-numbered, one peer only |
//! | [`frame_udp`] | variable-length frames, one per datagram (ATOMIC between processes) |
//! | [`stream`] | bare cells on TCP or a Unix socket, HEC-delineated on receipt |
//! | [`shape`] | pacing, delay, seeded loss and bit errors around any sender |
//! | [`tun`] | TUN interfaces: IP packets to and from the kernel (not cells) |
//!
//! Every link is bounded: a full link pushes back (the sender is told how
//! many cells were taken) or drops with a count, never grows.

pub mod frame_udp;
pub mod netns;
pub mod ring;
pub mod shape;
pub mod shm;
pub mod stream;
pub mod tun;
pub mod udp;
mod wait;

use std::fmt;
use std::time::Duration;

use aurora_wire::hec::{HecReceiver, HecVerdict};
use aurora_wire::CellBytes;

/// The sending side of a link.
pub trait CellSink: Send {
    /// Offers `cells`; returns how many the link took (the rest are the
    /// caller's to retry: backpressure, never a silent drop).
    fn send(&mut self, cells: &[CellBytes]) -> Result<usize, LinkError>;
    /// Blocks until the link can probably take more, or `timeout` passes.
    fn wait_ready(&mut self, timeout: Duration);
    /// Pushes out anything the link still holds; true when nothing is held.
    fn flush(&mut self) -> Result<bool, LinkError> {
        Ok(true)
    }
    /// Counters so far.
    fn counters(&self) -> LinkCounters;
    /// Cells waiting for the far end, and the most that can (`None` for
    /// a link that cannot tell).
    fn waiting(&self) -> Option<(usize, usize)> {
        None
    }
}

/// The receiving side of a link. Every cell has its HEC checked (and a
/// single-bit error corrected) before it is handed up.
pub trait CellSource: Send {
    /// Moves waiting cells into `out`; returns how many (0 when none wait).
    fn recv(&mut self, out: &mut [CellBytes]) -> Result<usize, LinkError>;
    /// Blocks until cells are probably waiting, or `timeout` passes.
    fn wait_ready(&mut self, timeout: Duration);
    /// Counters so far.
    fn counters(&self) -> LinkCounters;
    /// Keeps a copy of every cell the receiver drops for its header (off by
    /// default), for [`CellSource::take_discarded`]; links that cannot, ignore it.
    fn track_discarded(&mut self, _on: bool) {}
    /// The cells dropped for their header since the last call (when
    /// tracking), oldest first.
    fn take_discarded(&mut self, _f: &mut dyn FnMut(&CellBytes)) {}
    /// How long the oldest cell the last [`CellSource::recv`] handed over
    /// had waited in the link before this end read it (from its producer
    /// publishing it, for a ring; from the kernel taking it in, for a
    /// socket); `None` if that call handed over nothing or the link cannot
    /// tell.
    fn waited(&self) -> Option<Duration> {
        None
    }
    /// Asks the link to time waits from now on, where it does so only
    /// when asked (a ring's producer then reads the clock at each
    /// publication); others ignore it.
    fn time_waits(&mut self) {}
}

impl CellSink for Box<dyn CellSink> {
    fn send(&mut self, cells: &[CellBytes]) -> Result<usize, LinkError> {
        (**self).send(cells)
    }
    fn wait_ready(&mut self, timeout: Duration) {
        (**self).wait_ready(timeout)
    }
    fn flush(&mut self) -> Result<bool, LinkError> {
        (**self).flush()
    }
    fn counters(&self) -> LinkCounters {
        (**self).counters()
    }
    fn waiting(&self) -> Option<(usize, usize)> {
        (**self).waiting()
    }
}

impl CellSource for Box<dyn CellSource> {
    fn recv(&mut self, out: &mut [CellBytes]) -> Result<usize, LinkError> {
        (**self).recv(out)
    }
    fn wait_ready(&mut self, timeout: Duration) {
        (**self).wait_ready(timeout)
    }
    fn counters(&self) -> LinkCounters {
        (**self).counters()
    }
    fn track_discarded(&mut self, on: bool) {
        (**self).track_discarded(on)
    }
    fn take_discarded(&mut self, f: &mut dyn FnMut(&CellBytes)) {
        (**self).take_discarded(f)
    }
    fn waited(&self) -> Option<Duration> {
        (**self).waited()
    }
    fn time_waits(&mut self) {
        (**self).time_waits()
    }
}

/// Why a link dropped cells or frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LinkDrop {
    /// A cell whose header failed the HEC check (cells).
    HecDiscarded,
    /// A datagram from an address other than the configured peer (datagrams).
    Stranger,
    /// A datagram too short, ragged, or with a wrong magic or version
    /// (datagrams); on a frame sender, a frame too long for a datagram.
    BadFrame,
    /// Cells missing from a UDP link's sequence: lost on the way (cells).
    LostInTransit,
    /// Cells sent while the peer's port was closed (cells): at a sender,
    /// those the network refused; at a UDP receiver, those its peer had
    /// sent before the first datagram this end saw.
    PeerUnreachable,
    /// Bytes of a stream skipped while finding cell boundaries (bytes).
    BytesSkipped,
    /// Cells dropped by configured loss injection (cells).
    InjectedLoss,
    /// Idle cells: physical-layer fill, removed before the ATM layer (cells).
    Idle,
}

impl LinkDrop {
    /// Every reason, in counter order.
    pub const ALL: [LinkDrop; 8] = [
        LinkDrop::HecDiscarded,
        LinkDrop::Stranger,
        LinkDrop::BadFrame,
        LinkDrop::LostInTransit,
        LinkDrop::PeerUnreachable,
        LinkDrop::BytesSkipped,
        LinkDrop::InjectedLoss,
        LinkDrop::Idle,
    ];

    /// A short snake-case name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            LinkDrop::HecDiscarded => "hec_discarded",
            LinkDrop::Stranger => "stranger",
            LinkDrop::BadFrame => "bad_frame",
            LinkDrop::LostInTransit => "lost_in_transit",
            LinkDrop::PeerUnreachable => "peer_unreachable",
            LinkDrop::BytesSkipped => "bytes_skipped",
            LinkDrop::InjectedLoss => "injected_loss",
            LinkDrop::Idle => "idle",
        }
    }
}

/// A count per [`LinkDrop`] (each in the unit its doc names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkDrops([u64; LinkDrop::ALL.len()]);

impl LinkDrops {
    /// Adds `n` to a reason.
    pub fn add(&mut self, r: LinkDrop, n: u64) {
        self.0[r as usize] += n;
    }
    /// One reason's count.
    pub fn get(&self, r: LinkDrop) -> u64 {
        self.0[r as usize]
    }
    /// The non-zero counts.
    pub fn nonzero(&self) -> impl Iterator<Item = (LinkDrop, u64)> + '_ {
        LinkDrop::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|&(_, n)| n != 0)
    }
}

/// What one side of a link has done. On a receiver,
/// `cells_in = cells_delivered + drops[HecDiscarded] + drops[Idle] + cells
/// still queued`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Cells the link took for sending.
    pub cells_out: u64,
    /// Datagrams (or writes) sent.
    pub datagrams_out: u64,
    /// Cells that arrived from the medium, before the HEC check.
    pub cells_in: u64,
    /// Cells handed up.
    pub cells_delivered: u64,
    /// Cells handed up after a single-bit header error was corrected.
    pub hec_corrected: u64,
    /// Datagrams that arrived (from anyone).
    pub datagrams_in: u64,
    /// Datagrams that arrived after a later one (delivered all the same).
    pub datagrams_late: u64,
    /// Times the sender was seen to restart (a new session).
    pub peer_restarts: u64,
    /// Drops by reason.
    pub drops: LinkDrops,
}

/// The receive-side cell check every link applies: HEC correction and
/// detection, with the result counted.
#[derive(Clone, Debug, Default)]
pub struct RxFilter {
    hec: HecReceiver,
    track: bool,
    discarded: Vec<CellBytes>,
}

/// Discarded cells a tracking filter keeps between two takes; past this
/// they are only counted.
pub const MAX_KEPT_DISCARDS: usize = 4096;

impl RxFilter {
    /// Checks one arriving cell in place; true when it may be handed up.
    #[inline]
    pub fn accept(&mut self, cell: &mut CellBytes, c: &mut LinkCounters) -> bool {
        match self.hec.check_cell(cell) {
            HecVerdict::Valid => true,
            HecVerdict::Corrected(_) => {
                c.hec_corrected += 1;
                true
            }
            HecVerdict::Discarded => {
                c.drops.add(LinkDrop::HecDiscarded, 1);
                if self.track && self.discarded.len() < MAX_KEPT_DISCARDS {
                    self.discarded.push(*cell);
                }
                false
            }
        }
    }

    /// Keeps copies of discarded cells (bounded) when `on`.
    pub fn track_discarded(&mut self, on: bool) {
        self.track = on;
    }

    /// Hands over the discarded cells kept.
    pub fn take_discarded(&mut self, f: &mut dyn FnMut(&CellBytes)) {
        for c in self.discarded.drain(..) {
            f(&c);
        }
    }
}

/// A link receiver's header check lent to a consumer that folds it into its
/// own loop ([`ring::RingRx::read_fused`]); counts land in the link's counters.
pub struct RxCheck<'a> {
    pub(crate) filter: &'a mut RxFilter,
    pub(crate) counters: &'a mut LinkCounters,
    pub(crate) discarded: u64,
}

impl aurora_wire::hec::HeaderCheck for RxCheck<'_> {
    fn known_valid(&self) -> [u64; 2] {
        self.filter.hec.known_valid()
    }
    fn note_valid(&mut self, n: u64) {
        self.filter.hec.note_valid(n)
    }
    fn check(&mut self, cell: &mut CellBytes) -> bool {
        let ok = self.filter.accept(cell, self.counters);
        self.discarded += u64::from(!ok);
        ok
    }
}

/// Cells a receiver has taken off the medium but not yet handed up.
#[derive(Default)]
pub(crate) struct Pending {
    cells: Vec<CellBytes>,
    taken: usize,
}

impl Pending {
    /// True when every held cell has been handed up.
    pub(crate) fn is_empty(&self) -> bool {
        self.taken == self.cells.len()
    }
    /// Empties the queue for a new arrival and lends it for filling.
    pub(crate) fn refill(&mut self) -> &mut Vec<CellBytes> {
        self.cells.clear();
        self.taken = 0;
        &mut self.cells
    }
    /// Hands up as many held cells as fit in `out`; returns how many.
    pub(crate) fn take_into(&mut self, out: &mut [CellBytes]) -> usize {
        let k = (self.cells.len() - self.taken).min(out.len());
        out[..k].copy_from_slice(&self.cells[self.taken..self.taken + k]);
        self.taken += k;
        k
    }
}

/// Waits up to `timeout` for `flags` on a socket (spurious returns are fine:
/// callers re-check).
pub(crate) fn poll_fd(
    fd: rustix::fd::BorrowedFd<'_>,
    flags: rustix::event::PollFlags,
    timeout: Duration,
) {
    let mut fds = [rustix::event::PollFd::new(&fd, flags)];
    let ts = timespec(timeout);
    let _ = rustix::event::poll(&mut fds, Some(&ts));
}

pub(crate) fn timespec(d: Duration) -> rustix::time::Timespec {
    rustix::time::Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// Why a link operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// The other end closed the link.
    Closed,
    /// The shared state or a peer's data broke the link's rules.
    Corrupt(String),
    /// The link could not be set up as asked.
    Config(String),
    /// An operating-system call failed.
    Io(String),
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Closed => f.write_str("the other end closed the link"),
            LinkError::Corrupt(why) => write!(f, "the link's shared state is corrupt: {why}"),
            LinkError::Config(why) => write!(f, "the link cannot be set up: {why}"),
            LinkError::Io(why) => write!(f, "link I/O failed: {why}"),
        }
    }
}

impl std::error::Error for LinkError {}
