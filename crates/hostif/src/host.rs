//! The host interface node: one network port below, an application API
//! above, modelled on Penn's segmenter and reassembler boards.
//!
//! Three data paths, chosen per interface:
//!
//! * **copy**: sending copies the SDU into one of two interface buffers
//!   (double buffering) and segments from there; receiving stores each cell
//!   payload in the slot buffer (the board's reassembly memory) and, when the
//!   PDU is complete, copies it out to the application: two copies each way.
//! * **single-copy**: sending segments straight from the application's
//!   buffer; receiving writes straight into a buffer the application posted
//!   in advance (receive prediction), falling back to a pool buffer, and a
//!   counted miss, when none is posted: one copy each way.
//! * **null**: the "infinitely fast interface". Sending does everything but
//!   the device transfer (no cells are made), so what is measured is the
//!   software path alone.
//!
//! Two synchronisation modes: in **event** mode a completed PDU is visible at
//! once; in **poll** mode it waits until its VC's turn in the POLL table,
//! as with Penn's clock-driven driver. The node never reads a clock: callers
//! pass `now` and ask [`HostInterface::poll_at`].

use std::collections::VecDeque;

use aurora_sar::aal34::{Aal34Config, Aal34Rx, Aal34Tx, Aal34VcConfig};
use aurora_sar::aal5::{self as sar5, RxError};
use aurora_sar::fold::Crc32State;
use aurora_sar::{
    Aal5Rx, Aal5Tx, DropReason, Kernel, PduOptions, RxConfig, Status, TxError, VcConfig, VcCounters,
};
use aurora_time::{Duration, Instant};
use aurora_wire::aal5 as frame;
use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::hec::{pack_header, HeaderCheck};
use aurora_wire::{CellBytes, HEADER_LEN, PAYLOAD_LEN};
use rustc_hash::FxHashMap;

use crate::qos::{Aal, PvcAddr, Qos};
use crate::tables::{PollTable, SlotBuffer, SlotList};

/// Which data path the interface uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataPath {
    /// Through interface-owned buffers: two copies each way.
    Copy,
    /// Straight between application buffers and cells: one copy each way.
    SingleCopy,
    /// No device transfer at all: the software path alone.
    Null,
}

/// How the application learns of received PDUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncMode {
    /// Clock-driven: completed PDUs become visible when their VC is polled.
    Poll,
    /// Completed PDUs are visible at once (the application blocks and is woken).
    Event,
}

/// Interface settings.
#[derive(Clone, Copy, Debug)]
pub struct HostConfig {
    /// Header layout on the port.
    pub format: Format,
    /// Entries in the VC table (Penn: 256).
    pub vc_table: usize,
    /// Entries in the datagram (AAL3/4 MID) table (Penn: 256).
    pub dg_table: usize,
    /// Cell slots in the reassembly buffer used by the copy path.
    pub reassembly_slots: usize,
    /// Bytes of pool memory for single-copy misses and AAL3/4.
    pub pool_bytes: usize,
    /// Data path.
    pub path: DataPath,
    /// Synchronisation mode.
    pub sync: SyncMode,
    /// Default poll period per VC in poll mode.
    pub poll_period: Duration,
    /// Completed PDUs held per VC for the application; more are dropped.
    pub ready_limit: usize,
    /// Reassembly timeout.
    pub timeout: Duration,
    /// CRC kernel.
    pub kernel: Kernel,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            format: Format::Uni,
            vc_table: 256,
            dg_table: 256,
            reassembly_slots: 8192,
            pool_bytes: 4 << 20,
            path: DataPath::SingleCopy,
            sync: SyncMode::Event,
            poll_period: Duration::from_millis(1),
            ready_limit: 64,
            timeout: Duration::from_secs(1),
            kernel: Kernel::best(),
        }
    }
}

/// A VC opened on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VcHandle(u32);

/// Why the interface refused a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostError {
    /// The VC table is full.
    VcTableFull,
    /// The address is already open.
    AlreadyOpen(PvcAddr),
    /// The handle does not name an open VC.
    NotOpen,
    /// The SDU is longer than the VC's max_sdu.
    TooLong {
        /// SDU length.
        len: usize,
        /// The VC's limit.
        max: usize,
    },
    /// Both transmit buffers are busy (copy path); try again once cells drain.
    Busy,
    /// The adaptation layer refused the SDU.
    Tx(TxError),
    /// The VC already has its limit of posted buffers.
    PostedFull,
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostError::VcTableFull => f.write_str("the interface's VC table is full"),
            HostError::AlreadyOpen(a) => write!(f, "VC {a} is already open"),
            HostError::NotOpen => f.write_str("no VC is open under that handle"),
            HostError::TooLong { len, max } => {
                write!(
                    f,
                    "an SDU of {len} bytes is longer than the VC's max_sdu of {max}"
                )
            }
            HostError::Busy => f.write_str("both transmit buffers are busy"),
            HostError::Tx(e) => write!(f, "{e}"),
            HostError::PostedFull => {
                f.write_str("the VC already has as many posted buffers as it allows")
            }
        }
    }
}

impl std::error::Error for HostError {}

/// A PDU handed to the application.
#[derive(Debug)]
pub struct Received {
    /// The SDU's bytes live in `buf[..len]`.
    pub buf: Vec<u8>,
    /// SDU length.
    pub len: usize,
    /// True when it went straight into a posted buffer.
    pub posted: bool,
    /// Multiplexing identifier (AAL3/4; 0 otherwise).
    pub mid: u16,
    /// When the PDU's last cell was processed.
    pub completed: Instant,
}

impl Received {
    /// The SDU.
    pub fn sdu(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Interface-wide counters beyond the adaptation layers' own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Cells taken from the port.
    pub cells_in: u64,
    /// Cells dropped because the VC is not in the VC table.
    pub unknown_vc_cells: u64,
    /// Cells dropped because they were not user data (OAM, RM).
    pub not_user_cells: u64,
    /// PDUs dropped because the slot buffer ran out (copy path).
    pub slots_exhausted: u64,
    /// Cells dropped with them.
    pub slots_exhausted_cells: u64,
    /// PDUs dropped because the application's ready queue was full.
    pub ready_overflow: u64,
    /// PDUs the copy path dropped for a CRC, length or size error.
    pub copy_path_errors: u64,
    /// Cells dropped with them (or discarded after an oversize).
    pub copy_path_error_cells: u64,
    /// Cells delivered by the copy path.
    pub copy_path_cells: u64,
    /// PDUs accepted by the null path.
    pub null_pdus: u64,
}

enum TxSide {
    Aal5(Aal5Tx),
    Aal34(Aal34Tx, u16),
    Aal0(aurora_sar::aal0::Aal0Tx),
}

#[derive(Default)]
struct CopyRx {
    list: SlotList,
    started: Option<Instant>,
    /// Dropping this PDU's cells until its end, for this reason.
    broken: Option<DropReason>,
}

struct VcEntry {
    addr: PvcAddr,
    qos: Qos,
    tx: TxSide,
    copy_rx: CopyRx,
    /// Completed, not yet visible (poll mode).
    done: VecDeque<Received>,
    /// Visible to the application.
    ready: VecDeque<Received>,
    counters: VcCounters,
    spare: Vec<Vec<u8>>,
}

/// The host interface.
pub struct HostInterface {
    cfg: HostConfig,
    vcs: Vec<Option<VcEntry>>,
    by_vc: FxHashMap<VcId, u32>,
    aal5: Aal5Rx,
    aal34: Aal34Rx,
    slots: SlotBuffer,
    poll: PollTable,
    tx_bufs: [Vec<u8>; 2],
    tx_next: usize,
    tx_cells: Vec<CellBytes>,
    /// Reused between batches so delivery allocates nothing.
    deliveries: Vec<aurora_sar::Delivery>,
    stats: HostStats,
}

/// A PDU on its way out: fill cells from it until it is done.
pub enum TxPdu<'a> {
    /// AAL5 cells made on the fly from the SDU (or the interface's copy).
    Aal5(sar5::Segmentation<'a>),
    /// Cells already made (AAL3/4, AAL0), handed out in order.
    Made(&'a [CellBytes]),
    /// The null path: nothing to send.
    Null,
}

impl TxPdu<'_> {
    /// Writes the next cells into `out`; returns how many.
    pub fn fill(&mut self, out: &mut [CellBytes]) -> usize {
        match self {
            TxPdu::Aal5(s) => s.fill(out),
            TxPdu::Made(cells) => {
                let n = cells.len().min(out.len());
                out[..n].copy_from_slice(&cells[..n]);
                *cells = &cells[n..];
                n
            }
            TxPdu::Null => 0,
        }
    }

    /// True when every cell has been written.
    pub fn is_done(&self) -> bool {
        match self {
            TxPdu::Aal5(s) => s.is_done(),
            TxPdu::Made(c) => c.is_empty(),
            TxPdu::Null => true,
        }
    }
}

impl HostInterface {
    /// An interface with no VCs open.
    pub fn new(cfg: HostConfig) -> Self {
        HostInterface {
            aal5: Aal5Rx::new(RxConfig {
                format: cfg.format,
                max_vcs: cfg.vc_table,
                memory_budget: cfg.pool_bytes,
                kernel: cfg.kernel,
                ..RxConfig::default()
            }),
            aal34: Aal34Rx::new(Aal34Config {
                format: cfg.format,
                max_vcs: cfg.vc_table,
                max_reassemblies: cfg.dg_table,
                memory_budget: cfg.pool_bytes,
            }),
            slots: SlotBuffer::new(cfg.reassembly_slots),
            poll: PollTable::default(),
            vcs: Vec::new(),
            by_vc: FxHashMap::default(),
            tx_bufs: [Vec::new(), Vec::new()],
            tx_next: 0,
            tx_cells: Vec::new(),
            deliveries: Vec::new(),
            stats: HostStats::default(),
            cfg,
        }
    }

    /// The interface's settings.
    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    /// Opens a VC by address and QoS.
    pub fn open(&mut self, addr: PvcAddr, qos: Qos, now: Instant) -> Result<VcHandle, HostError> {
        if self.by_vc.contains_key(&addr.vc) {
            return Err(HostError::AlreadyOpen(addr));
        }
        let index = match self.vcs.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.vcs.len() < self.cfg.vc_table => {
                self.vcs.push(None);
                self.vcs.len() - 1
            }
            None => return Err(HostError::VcTableFull),
        };
        let tx = match qos.aal {
            Aal::Aal5 => TxSide::Aal5(
                Aal5Tx::with_kernel(addr.vc, self.cfg.format, self.cfg.kernel)
                    .map_err(HostError::Tx)?,
            ),
            Aal::Aal34 => TxSide::Aal34(
                Aal34Tx::new(addr.vc, self.cfg.format).map_err(HostError::Tx)?,
                0,
            ),
            Aal::Aal0 => TxSide::Aal0(
                aurora_sar::aal0::Aal0Tx::new(addr.vc, self.cfg.format).map_err(HostError::Tx)?,
            ),
        };
        match qos.aal {
            Aal::Aal5 => self
                .aal5
                .open_vc(
                    addr.vc,
                    VcConfig {
                        max_sdu: qos.max_sdu,
                        timeout: self.cfg.timeout,
                        ..VcConfig::default()
                    },
                )
                .map_err(|_| HostError::VcTableFull)?,
            Aal::Aal34 => self
                .aal34
                .open_vc(
                    addr.vc,
                    Aal34VcConfig {
                        max_sdu: qos.max_sdu,
                        timeout: self.cfg.timeout,
                    },
                )
                .map_err(|_| HostError::VcTableFull)?,
            Aal::Aal0 => {}
        }
        self.vcs[index] = Some(VcEntry {
            addr,
            qos,
            tx,
            copy_rx: CopyRx::default(),
            done: VecDeque::new(),
            ready: VecDeque::new(),
            counters: VcCounters::default(),
            spare: Vec::new(),
        });
        self.by_vc.insert(addr.vc, index as u32);
        if self.cfg.sync == SyncMode::Poll {
            self.poll.set(index as u32, self.cfg.poll_period, now);
        }
        Ok(VcHandle(index as u32))
    }

    /// Sets a VC's poll period (poll mode).
    pub fn set_poll_period(&mut self, h: VcHandle, period: Duration, now: Instant) {
        if self.entry(h).is_ok() {
            self.poll.set(h.0, period, now);
        }
    }

    /// Closes a VC; anything in flight on it is dropped (counted as flushed).
    pub fn close(&mut self, h: VcHandle) -> Result<(), HostError> {
        self.flush(h)?;
        let e = self.vcs[h.0 as usize].take().ok_or(HostError::NotOpen)?;
        self.by_vc.remove(&e.addr.vc);
        self.poll.remove(h.0);
        let _ = self.aal5.close_vc(e.addr.vc);
        Ok(())
    }

    /// Drops the reassembly in progress on a VC (Penn's VC flush).
    pub fn flush(&mut self, h: VcHandle) -> Result<(), HostError> {
        let slots = &mut self.slots;
        let e = self
            .vcs
            .get_mut(h.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(HostError::NotOpen)?;
        if !e.copy_rx.list.is_empty() {
            e.counters.rx_drop += 1;
        }
        slots.release(&mut e.copy_rx.list);
        e.copy_rx = CopyRx::default();
        let vc = e.addr.vc;
        let _ = self.aal5.flush_vc(vc);
        self.aal34.flush_vc(vc);
        Ok(())
    }

    /// Drops one datagram's reassembly (Penn's DG flush).
    pub fn flush_datagram(&mut self, h: VcHandle, mid: u16) -> Result<(), HostError> {
        let vc = self.entry(h)?.addr.vc;
        self.aal34.flush_mid(vc, mid);
        Ok(())
    }

    fn entry(&self, h: VcHandle) -> Result<&VcEntry, HostError> {
        self.vcs
            .get(h.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(HostError::NotOpen)
    }

    /// Sets the MID used for a VC's AAL3/4 sends.
    pub fn set_mid(&mut self, h: VcHandle, mid: u16) -> Result<(), HostError> {
        match self.vcs.get_mut(h.0 as usize).and_then(Option::as_mut) {
            Some(VcEntry {
                tx: TxSide::Aal34(_, m),
                ..
            }) => {
                *m = mid;
                Ok(())
            }
            Some(_) => Ok(()),
            None => Err(HostError::NotOpen),
        }
    }

    /// Starts sending an SDU on a VC. Fill cells from the returned PDU into
    /// the link until it is done. On the copy path the SDU is copied into an
    /// interface buffer first; on the null path nothing is made.
    pub fn send<'a>(&'a mut self, h: VcHandle, sdu: &'a [u8]) -> Result<TxPdu<'a>, HostError> {
        let path = self.cfg.path;
        let e = self
            .vcs
            .get_mut(h.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(HostError::NotOpen)?;
        if sdu.len() > e.qos.max_sdu {
            e.counters.tx_err += 1;
            return Err(HostError::TooLong {
                len: sdu.len(),
                max: e.qos.max_sdu,
            });
        }
        if path == DataPath::Null {
            e.counters.tx += 1;
            self.stats.null_pdus += 1;
            return Ok(TxPdu::Null);
        }
        let data: &'a [u8] = if path == DataPath::Copy {
            // Alternate between the two interface buffers.
            let b = &mut self.tx_bufs[self.tx_next];
            self.tx_next ^= 1;
            b.clear();
            b.extend_from_slice(sdu);
            b
        } else {
            sdu
        };
        e.counters.tx += 1;
        match &mut e.tx {
            TxSide::Aal5(tx) => tx
                .segment_slice(data, PduOptions::default())
                .map(TxPdu::Aal5)
                .map_err(HostError::Tx),
            TxSide::Aal34(tx, mid) => {
                self.tx_cells
                    .resize(aurora_wire::aal34::cells_for(data.len()), [0; 53]);
                let n = tx
                    .segment_into(data, *mid, &mut self.tx_cells)
                    .map_err(HostError::Tx)?;
                Ok(TxPdu::Made(&self.tx_cells[..n]))
            }
            TxSide::Aal0(tx) => {
                self.tx_cells
                    .resize(data.len().div_ceil(PAYLOAD_LEN), [0; 53]);
                let n = tx
                    .segment_into(data, &mut self.tx_cells)
                    .map_err(HostError::Tx)?;
                Ok(TxPdu::Made(&self.tx_cells[..n]))
            }
        }
    }

    /// Posts a buffer for a VC's next PDU (single-copy receive prediction).
    /// Its length is the room offered; see [`Aal5Rx::post_buffer`].
    pub fn post_buffer(&mut self, h: VcHandle, buf: Vec<u8>) -> Result<(), (HostError, Vec<u8>)> {
        let Ok(e) = self.entry(h) else {
            return Err((HostError::NotOpen, buf));
        };
        let vc = e.addr.vc;
        if self.cfg.path == DataPath::Copy || e.qos.aal != Aal::Aal5 {
            // Only AAL5's single-copy path reassembles into posted buffers;
            // elsewhere the buffer is kept to deliver into or reuse.
            let e = self.vcs[h.0 as usize].as_mut().expect("checked");
            if e.spare.len() < 16 {
                e.spare.push(buf);
            }
            return Ok(());
        }
        self.aal5.post_buffer(vc, buf).map_err(|(e, b)| {
            (
                match e {
                    RxError::PostedFull => HostError::PostedFull,
                    _ => HostError::NotOpen,
                },
                b,
            )
        })
    }

    /// Takes the next PDU the application may see on a VC.
    pub fn recv(&mut self, h: VcHandle) -> Option<Received> {
        self.vcs.get_mut(h.0 as usize)?.as_mut()?.ready.pop_front()
    }

    /// A VC's counters: `tx`, `tx_err` from the sender; `rx`, `rx_err`,
    /// `rx_drop` from whichever receive path the VC uses.
    pub fn counters(&self, h: VcHandle) -> Option<VcCounters> {
        let e = self.entry(h).ok()?;
        let mut c = e.counters;
        let below = match e.qos.aal {
            Aal::Aal5 if self.cfg.path != DataPath::Copy => self.aal5.vc_counters(e.addr.vc),
            Aal::Aal34 => self.aal34.vc_counters(e.addr.vc),
            _ => None,
        };
        if let Some(b) = below {
            c.rx += b.rx;
            c.rx_err += b.rx_err;
            c.rx_drop += b.rx_drop;
        }
        Some(c)
    }

    /// Interface-wide counters.
    pub fn stats(&self) -> HostStats {
        self.stats
    }

    /// The AAL5 reassembler's totals (single-copy path).
    pub fn aal5_stats(&self) -> aurora_sar::RxStats {
        self.aal5.stats()
    }

    /// The AAL3/4 reassembler's totals.
    pub fn aal34_stats(&self) -> aurora_sar::RxStats {
        self.aal34.stats()
    }

    /// Free slots in the copy path's reassembly buffer.
    pub fn free_slots(&self) -> usize {
        self.slots.free()
    }

    /// When the interface next needs [`HostInterface::handle_timeout`].
    pub fn poll_at(&self) -> Option<Instant> {
        [
            self.poll.next_deadline(),
            self.aal5.poll_at(),
            self.aal34.poll_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs polls and reassembly timers due by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.aal5.handle_timeout(now);
        self.aal34.handle_timeout(now);
        // Copy-path timeouts.
        for e in self.vcs.iter_mut().flatten() {
            if let Some(t) = e.copy_rx.started {
                if now >= t + self.cfg.timeout {
                    self.stats.copy_path_errors += 1;
                    self.stats.copy_path_error_cells += e.copy_rx.list.len() as u64;
                    e.counters.rx_err += 1;
                    self.slots.release(&mut e.copy_rx.list);
                    e.copy_rx = CopyRx::default();
                }
            }
        }
        let vcs = &mut self.vcs;
        let limit = self.cfg.ready_limit;
        let stats = &mut self.stats;
        self.poll.take_due(now, |i| {
            if let Some(Some(e)) = vcs.get_mut(i as usize) {
                while let Some(r) = e.done.pop_front() {
                    Self::make_visible(e, r, limit, stats);
                }
            }
        });
    }

    fn make_visible(e: &mut VcEntry, r: Received, limit: usize, stats: &mut HostStats) {
        if e.ready.len() >= limit {
            stats.ready_overflow += 1;
            e.counters.rx_drop += 1;
            return;
        }
        e.ready.push_back(r);
    }

    fn complete(&mut self, index: u32, r: Received) {
        let poll = self.cfg.sync == SyncMode::Poll;
        let limit = self.cfg.ready_limit;
        let Some(Some(e)) = self.vcs.get_mut(index as usize) else {
            return;
        };
        if poll {
            if e.done.len() >= limit {
                self.stats.ready_overflow += 1;
                e.counters.rx_drop += 1;
            } else {
                e.done.push_back(r);
            }
        } else {
            Self::make_visible(e, r, limit, &mut self.stats);
        }
    }

    /// Takes a batch of cells from the port.
    pub fn receive(&mut self, now: Instant, cells: &[CellBytes]) {
        self.stats.cells_in += cells.len() as u64;
        let mut i = 0;
        while i < cells.len() {
            let c = &cells[i];
            let h = Header::parse(&[c[0], c[1], c[2], c[3]], self.cfg.format);
            if h.pti.is_user() && self.cfg.path != DataPath::Copy {
                // AAL5 single-copy (the fast path): the reassembler finds
                // the end of the run itself, so the cells are read once.
                if let Some(&index) = self.by_vc.get(&h.vc()) {
                    if self.vcs[index as usize].as_ref().map(|e| e.qos.aal) == Some(Aal::Aal5) {
                        let mut got = std::mem::take(&mut self.deliveries);
                        i += self.aal5.push_run(now, &cells[i..], &mut |d| got.push(d));
                        for d in got.drain(..) {
                            self.deliver5(now, index, d);
                        }
                        self.deliveries = got;
                        continue;
                    }
                }
            }
            // The run of cells for the same VC.
            let key = u32::from_be_bytes([c[0], c[1], c[2], c[3] & 0xF8]);
            let mut j = i + 1;
            while j < cells.len()
                && u32::from_be_bytes([cells[j][0], cells[j][1], cells[j][2], cells[j][3] & 0xF8])
                    == key
            {
                j += 1;
            }
            let run = &cells[i..j];
            i = j;
            if !h.pti.is_user() {
                self.stats.not_user_cells += run.len() as u64;
                continue;
            }
            let Some(&index) = self.by_vc.get(&h.vc()) else {
                self.stats.unknown_vc_cells += run.len() as u64;
                continue;
            };
            let aal = self.vcs[index as usize].as_ref().map(|e| e.qos.aal);
            match (aal, self.cfg.path) {
                (Some(Aal::Aal5), DataPath::Copy) => self.copy_path(now, index, run),
                (Some(Aal::Aal5), _) => {
                    let mut got = std::mem::take(&mut self.deliveries);
                    let n = self.aal5.push_run(now, run, &mut |d| got.push(d));
                    debug_assert_eq!(n, run.len());
                    for d in got.drain(..) {
                        self.deliver5(now, index, d);
                    }
                    self.deliveries = got;
                }
                (Some(Aal::Aal34), _) => {
                    let mut got = Vec::new();
                    self.aal34.push(now, run, &mut |d| got.push(d));
                    for d in got {
                        let mid = d.mid;
                        let buf = d.into_sdu();
                        let len = buf.len();
                        self.complete(
                            index,
                            Received {
                                buf,
                                len,
                                posted: false,
                                mid,
                                completed: now,
                            },
                        );
                    }
                }
                (Some(Aal::Aal0), _) => {
                    for c in run {
                        let buf = c[HEADER_LEN..].to_vec();
                        self.complete(
                            index,
                            Received {
                                buf,
                                len: PAYLOAD_LEN,
                                posted: false,
                                mid: 0,
                                completed: now,
                            },
                        );
                    }
                }
                (None, _) => self.stats.unknown_vc_cells += run.len() as u64,
            }
        }
    }

    /// Takes a batch of cells whose HEC has not been checked, checking each
    /// header through `check` as it goes. On the single-copy path runs of
    /// cells with a known-valid header go straight through the reassembler's
    /// copy loop, so each cell is read once (the HEC check folded into the
    /// reassembly: integrated layer processing); anything else is checked
    /// cell by cell first.
    pub fn receive_checked(
        &mut self,
        now: Instant,
        cells: &mut [CellBytes],
        check: &mut impl HeaderCheck,
    ) {
        if self.cfg.path == DataPath::Copy {
            // Check everything in place, then take the survivors.
            let mut kept = 0;
            for i in 0..cells.len() {
                if check.check(&mut cells[i]) {
                    if kept != i {
                        cells[kept] = cells[i];
                    }
                    kept += 1;
                }
            }
            return self.receive(now, &cells[..kept]);
        }
        let mut i = 0;
        while i < cells.len() {
            let valid = check.known_valid();
            let c = &cells[i];
            if valid.contains(&pack_header(c)) {
                let h = Header::parse(&[c[0], c[1], c[2], c[3]], self.cfg.format);
                let fast = if h.pti.is_user() {
                    self.by_vc
                        .get(&h.vc())
                        .and_then(|&ix| self.vcs[ix as usize].as_ref().map(|e| (ix, e.qos.aal)))
                } else {
                    None
                };
                if let Some((index, Aal::Aal5)) = fast {
                    let mut got = std::mem::take(&mut self.deliveries);
                    let n = self
                        .aal5
                        .push_run_checked(now, &cells[i..], valid, &mut |d| got.push(d));
                    if n > 0 {
                        self.stats.cells_in += n as u64;
                        check.note_valid(n as u64);
                        for d in got.drain(..) {
                            self.deliver5(now, index, d);
                        }
                        self.deliveries = got;
                        i += n;
                        continue;
                    }
                    self.deliveries = got;
                }
            }
            // Anything else: the full check, then the ordinary path.
            if check.check(&mut cells[i]) {
                self.receive(now, &cells[i..i + 1]);
            }
            i += 1;
        }
    }

    fn deliver5(&mut self, now: Instant, index: u32, d: aurora_sar::Delivery) {
        if d.status != Status::Intact {
            return;
        }
        let posted = d.posted;
        let len = d.len();
        let buf = d.into_buffer();
        self.complete(
            index,
            Received {
                buf,
                len,
                posted,
                mid: 0,
                completed: now,
            },
        );
    }

    /// The copy path: payloads into slots, then out to the application when
    /// the PDU ends, with the CRC folded into that second copy.
    fn copy_path(&mut self, now: Instant, index: u32, run: &[CellBytes]) {
        let kernel = self.cfg.kernel;
        let Some(e) = self.vcs[index as usize].as_mut() else {
            return;
        };
        let max_pdu = frame::cpcs_len(e.qos.max_sdu);
        let mut finished: Vec<Received> = Vec::new();
        for c in run {
            let end = c[3] & 0x02 != 0;
            let rx = &mut e.copy_rx;
            if let Some(reason) = rx.broken {
                // The rest of a dropped PDU: counted with the cause.
                if reason == DropReason::BudgetExhausted {
                    self.stats.slots_exhausted_cells += 1;
                } else {
                    self.stats.copy_path_error_cells += 1;
                }
                if end {
                    *rx = CopyRx::default();
                }
                continue;
            }
            if rx.started.is_none() {
                rx.started = Some(now);
            }
            let payload: &[u8; PAYLOAD_LEN] = c[HEADER_LEN..].try_into().expect("48 bytes");
            let too_big = (rx.list.len() + 1) * PAYLOAD_LEN > max_pdu;
            if too_big || !self.slots.push(&mut rx.list, payload) {
                let reason = if too_big {
                    DropReason::Oversize
                } else {
                    DropReason::BudgetExhausted
                };
                if too_big {
                    self.stats.copy_path_errors += 1;
                    e.counters.rx_err += 1;
                } else {
                    self.stats.slots_exhausted += 1;
                    e.counters.rx_drop += 1;
                }
                let held = rx.list.len() as u64 + 1;
                self.slots.release(&mut rx.list);
                if too_big {
                    self.stats.copy_path_error_cells += held;
                } else {
                    self.stats.slots_exhausted_cells += held;
                }
                *rx = CopyRx::default();
                if !end {
                    rx.broken = Some(reason);
                }
                continue;
            }
            if !end {
                continue;
            }
            // Second copy: slots → application buffer, CRC folded in.
            let cells = rx.list.len();
            let bytes = cells * PAYLOAD_LEN;
            let mut buf = e.spare.pop().unwrap_or_default();
            if buf.len() < bytes {
                buf.resize(bytes, 0);
            }
            let mut crc = Crc32State::new(kernel);
            let mut at = 0;
            self.slots.drain(&mut rx.list, |p| {
                buf[at..at + PAYLOAD_LEN].copy_from_slice(p);
                crc.feed(p);
                at += PAYLOAD_LEN;
            });
            *rx = CopyRx::default();
            let t = frame::Trailer::parse(&buf[..bytes]).unwrap_or_default();
            let ok = crc.is_valid_pdu() && frame::check_length(t.length, bytes).is_ok();
            if ok {
                self.stats.copy_path_cells += cells as u64;
                finished.push(Received {
                    buf,
                    len: usize::from(t.length),
                    posted: false,
                    mid: 0,
                    completed: now,
                });
            } else {
                self.stats.copy_path_errors += 1;
                self.stats.copy_path_error_cells += cells as u64;
                e.counters.rx_err += 1;
                e.spare.push(buf);
            }
        }
        for r in finished {
            if let Some(e) = self.vcs[index as usize].as_mut() {
                e.counters.rx += 1;
            }
            self.complete(index, r);
        }
    }
}
