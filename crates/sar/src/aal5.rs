//! AAL5 segmentation and reassembly.
//!
//! [`Aal5Tx`] turns SDUs (one slice or a scatter-gather list) into cells for
//! one VC; [`Aal5Rx`] turns cells from any number of VCs back into SDUs. Both
//! fold the CRC-32 into their copy (see [`crate::fold`]), take batches, and
//! never read a clock: the caller passes `now`, and asks
//! [`Aal5Rx::poll_at`] when the next reassembly timer runs out.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use aurora_time::{Duration, Instant};
use aurora_wire::aal5::{self as frame, Trailer, TRAILER_LEN};
use aurora_wire::cell::{Format, Header, Pti, VcId};
use aurora_wire::{CellBytes, CELL_LEN, HEADER_LEN, PAYLOAD_LEN};

use crate::counters::{DropReason, RxStats, VcCounters};
use crate::fold::{Crc32State, Kernel};
use crate::timers::Deadlines;
use crate::{header_key, TxError};

/// Per-PDU choices a sender may make.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PduOptions {
    /// CPCS user-to-user byte.
    pub uu: u8,
    /// Common part indicator (0 unless you know better).
    pub cpi: u8,
    /// Cell loss priority for this PDU's cells; `None` uses the VC's setting.
    pub clp: Option<bool>,
}

/// The AAL5 sender of one VC.
#[derive(Clone, Debug)]
pub struct Aal5Tx {
    vc: VcId,
    /// Headers (HEC included) indexed by `[clp][end_of_pdu]`.
    headers: [[[u8; HEADER_LEN]; 2]; 2],
    clp: bool,
    kernel: Kernel,
    counters: VcCounters,
    /// The state of a PDU cut over several [`Segmentation::fill`] calls.
    /// It lives here, not in the [`Segmentation`], so that a segmentation
    /// stays small enough to hand around by value (a PDU sent in one call
    /// never touches it). Boxed, so that a sender stays small too.
    stream: Box<Stream>,
}

/// What a [`Segmentation`] keeps between calls: its running CRC and, once
/// the last whole payload is out, the one or two payloads that end the PDU.
#[derive(Clone, Debug)]
struct Stream {
    crc: Crc32State,
    tail: [u8; 2 * PAYLOAD_LEN],
}

impl Aal5Tx {
    /// A sender for `vc` with headers in `format`, using the fastest kernel.
    pub fn new(vc: VcId, format: Format) -> Result<Self, TxError> {
        Self::with_kernel(vc, format, Kernel::best())
    }

    /// A sender using a chosen CRC kernel.
    pub fn with_kernel(vc: VcId, format: Format, kernel: Kernel) -> Result<Self, TxError> {
        let mut headers = [[[0u8; HEADER_LEN]; 2]; 2];
        for (clp, row) in headers.iter_mut().enumerate() {
            for (end, h) in row.iter_mut().enumerate() {
                *h = Header {
                    format,
                    pti: if end == 1 { Pti::DATA_END } else { Pti::DATA },
                    clp: clp == 1,
                    ..Header::data(vc)
                }
                .to_bytes()
                .map_err(TxError::Header)?;
            }
        }
        Ok(Aal5Tx {
            vc,
            headers,
            clp: false,
            kernel,
            counters: VcCounters::default(),
            stream: Box::new(Stream {
                crc: Crc32State::new(kernel),
                tail: [0; 2 * PAYLOAD_LEN],
            }),
        })
    }

    /// The VC this sender writes.
    pub fn vc(&self) -> VcId {
        self.vc
    }

    /// Sets the VC's default cell loss priority.
    pub fn set_clp(&mut self, clp: bool) {
        self.clp = clp;
    }

    /// The sender's counters (`tx`, `tx_err`).
    pub fn counters(&self) -> VcCounters {
        self.counters
    }

    /// Starts segmenting an SDU given as a list of slices (scatter-gather).
    /// The returned [`Segmentation`] fills cells in as many batches as the
    /// caller likes; the SDU is borrowed, never copied except into cells,
    /// and so is this sender, until the segmentation is dropped.
    pub fn segment<'a>(
        &'a mut self,
        parts: &'a [&'a [u8]],
        opts: PduOptions,
    ) -> Result<Segmentation<'a>, TxError> {
        self.start(&[], parts, opts)
    }

    /// Starts segmenting a contiguous SDU, read in place (borrowing the SDU
    /// and this sender as [`Aal5Tx::segment`] does).
    pub fn segment_slice<'a>(
        &'a mut self,
        sdu: &'a [u8],
        opts: PduOptions,
    ) -> Result<Segmentation<'a>, TxError> {
        self.start(sdu, &[], opts)
    }

    fn start<'a>(
        &'a mut self,
        first: &'a [u8],
        parts: &'a [&'a [u8]],
        opts: PduOptions,
    ) -> Result<Segmentation<'a>, TxError> {
        let len: usize = first.len() + parts.iter().map(|p| p.len()).sum::<usize>();
        self.admit(len)?;
        let clp = usize::from(opts.clp.unwrap_or(self.clp));
        Ok(Segmentation {
            first,
            parts,
            part: 0,
            off: 0,
            body_left: len / PAYLOAD_LEN,
            tail_cells: frame::cells_for(len) - len / PAYLOAD_LEN,
            tail_done: 0,
            started: false,
            tail_built: false,
            sdu_len: len,
            uu: opts.uu,
            cpi: opts.cpi,
            header: self.headers[clp][0],
            header_end: self.headers[clp][1],
            kernel: self.kernel,
            stream: &mut self.stream,
        })
    }

    /// Counts an SDU of `len` bytes as sent, or refuses it as too long.
    fn admit(&mut self, len: usize) -> Result<(), TxError> {
        if len > frame::MAX_SDU {
            self.counters.tx_err += 1;
            return Err(TxError::TooLong {
                len,
                max: frame::MAX_SDU,
            });
        }
        self.counters.tx += 1;
        Ok(())
    }

    /// Segments a contiguous SDU into `out`, which must have room for
    /// [`aurora_wire::aal5::cells_for`] cells. Returns the number of cells.
    pub fn segment_into(
        &mut self,
        sdu: &[u8],
        opts: PduOptions,
        out: &mut [CellBytes],
    ) -> Result<usize, TxError> {
        let need = frame::cells_for(sdu.len());
        if out.len() < need && sdu.len() <= frame::MAX_SDU {
            self.counters.tx_err += 1;
            return Err(TxError::NoRoom {
                need,
                have: out.len(),
            });
        }
        self.admit(sdu.len())?;
        // One call builds every cell: no segmentation state to carry.
        let clp = usize::from(opts.clp.unwrap_or(self.clp));
        let [header, header_end] = &self.headers[clp];
        Crc32State::build_pdu(
            self.kernel,
            header,
            header_end,
            sdu,
            &trailer(sdu.len(), opts.uu, opts.cpi),
            &mut out[..need],
        );
        Ok(need)
    }
}

/// The last one or two payloads of a PDU: `rest` (the SDU's bytes after its
/// last whole payload), zero pad, and the trailer with its CRC field zero.
/// Returns them and how many cells they fill.
fn tail_payloads(rest: &[u8], sdu_len: usize, opts: PduOptions) -> ([u8; 2 * PAYLOAD_LEN], usize) {
    let cells = frame::cells_for(sdu_len) - sdu_len / PAYLOAD_LEN;
    let t = trailer(sdu_len, opts.uu, opts.cpi);
    (crate::fold::tail_payloads(rest, cells, &t), cells)
}

/// The trailer of an SDU of `sdu_len` bytes, its CRC field zero (the fold
/// fills it in).
fn trailer(sdu_len: usize, uu: u8, cpi: u8) -> [u8; TRAILER_LEN] {
    Trailer {
        uu,
        cpi,
        length: sdu_len as u16,
        crc: 0,
    }
    .to_bytes()
}

/// One SDU being cut into cells. Created by [`Aal5Tx::segment`], whose
/// sender it borrows for as long as it lives: a PDU cut over several
/// [`Segmentation::fill`] calls keeps its running state there, so the
/// segmentation itself is a few words, cheap to return and pass around.
/// Drop it (or let it finish) before using the sender again.
#[derive(Debug)]
pub struct Segmentation<'a> {
    /// The SDU is `first` followed by `parts`.
    first: &'a [u8],
    parts: &'a [&'a [u8]],
    part: usize,
    off: usize,
    body_left: usize,
    tail_cells: usize,
    tail_done: usize,
    /// Some cell has been written (the stream's CRC is this PDU's).
    started: bool,
    /// The stream's tail holds this PDU's last payloads.
    tail_built: bool,
    sdu_len: usize,
    uu: u8,
    cpi: u8,
    header: [u8; HEADER_LEN],
    header_end: [u8; HEADER_LEN],
    kernel: Kernel,
    /// The sender's state for a PDU cut over several calls.
    stream: &'a mut Stream,
}

impl<'a> Segmentation<'a> {
    /// Cells still to be produced.
    pub fn cells_left(&self) -> usize {
        self.body_left + self.tail_cells - self.tail_done
    }

    /// True when every cell has been produced.
    pub fn is_done(&self) -> bool {
        self.cells_left() == 0
    }

    /// Piece `i` of the SDU (0 is `first`).
    fn piece(&self, i: usize) -> Option<&'a [u8]> {
        if i == 0 {
            Some(self.first)
        } else {
            self.parts.get(i - 1).copied()
        }
    }

    /// Copies up to 48 bytes of SDU from the current position into `dst`,
    /// crossing slice boundaries; returns how many were copied.
    fn gather(&mut self, dst: &mut [u8]) -> usize {
        let mut n = 0;
        while n < dst.len() {
            let Some(p) = self.piece(self.part) else {
                break;
            };
            let cur = &p[self.off..];
            let k = cur.len().min(dst.len() - n);
            dst[n..n + k].copy_from_slice(&cur[..k]);
            n += k;
            self.off += k;
            if self.off == p.len() {
                self.part += 1;
                self.off = 0;
            }
        }
        n
    }

    /// Writes the next cells into `out`; returns how many were written (less
    /// than `out.len()` only when the PDU is finished).
    pub fn fill(&mut self, out: &mut [CellBytes]) -> usize {
        let cells = self.body_left + self.tail_cells;
        if !self.started && self.parts.is_empty() && out.len() >= cells {
            // Not started, one slice, room for every cell: the whole PDU in
            // one call, as `Aal5Tx::segment_into` does.
            self.started = true;
            Crc32State::build_pdu(
                self.kernel,
                &self.header,
                &self.header_end,
                self.first,
                &trailer(self.sdu_len, self.uu, self.cpi),
                &mut out[..cells],
            );
            self.off = self.first.len();
            self.body_left = 0;
            self.tail_built = true;
            self.tail_done = self.tail_cells;
            return cells;
        }
        if !self.started {
            if out.is_empty() {
                // Nothing written: a later call may still take the
                // one-call path.
                return 0;
            }
            self.started = true;
            self.stream.crc.reset(self.kernel);
        }
        let mut n = 0;
        // Whole cells straight from the SDU.
        while n < out.len() && self.body_left > 0 {
            while self.piece(self.part).is_some_and(|p| self.off == p.len()) {
                self.part += 1;
                self.off = 0;
            }
            let cur = &self.piece(self.part).unwrap_or_default()[self.off..];
            let k = (cur.len() / PAYLOAD_LEN)
                .min(self.body_left)
                .min(out.len() - n);
            if k > 0 {
                self.stream.crc.build_cells(
                    &self.header,
                    &cur[..k * PAYLOAD_LEN],
                    &mut out[n..n + k],
                );
                self.off += k * PAYLOAD_LEN;
                n += k;
                self.body_left -= k;
            } else {
                // A cell straddles two slices.
                let mut tmp = [0u8; PAYLOAD_LEN];
                self.gather(&mut tmp);
                self.stream
                    .crc
                    .build_cells(&self.header, &tmp, &mut out[n..n + 1]);
                n += 1;
                self.body_left -= 1;
            }
        }
        if self.body_left > 0 {
            return n;
        }
        // The last one or two cells: SDU tail, pad, trailer.
        if !self.tail_built {
            self.tail_built = true;
            let mut rest = [0u8; PAYLOAD_LEN];
            let r = self.gather(&mut rest);
            debug_assert_eq!(r, self.sdu_len % PAYLOAD_LEN);
            let opts = PduOptions {
                uu: self.uu,
                cpi: self.cpi,
                ..PduOptions::default()
            };
            (self.stream.tail, _) = tail_payloads(&rest[..r], self.sdu_len, opts);
        }
        while n < out.len() && self.tail_done < self.tail_cells {
            let last = self.tail_done + 1 == self.tail_cells;
            let h = if last { self.header_end } else { self.header };
            let src =
                &self.stream.tail[self.tail_done * PAYLOAD_LEN..(self.tail_done + 1) * PAYLOAD_LEN];
            self.stream.crc.build_cells(&h, src, &mut out[n..n + 1]);
            if last {
                let field = self.stream.crc.field_for_zeroed_tail();
                out[n][CELL_LEN - 4..].copy_from_slice(&field.to_be_bytes());
            }
            self.tail_done += 1;
            n += 1;
        }
        n
    }
}

/// Settings shared by all VCs of a reassembler.
#[derive(Clone, Copy, Debug)]
pub struct RxConfig {
    /// Header layout of arriving cells.
    pub format: Format,
    /// Most VCs that may be open at once.
    pub max_vcs: usize,
    /// Bytes of reassembly memory (pool buffers in use) shared by all VCs.
    /// Buffers the application posts are its own and are not counted.
    pub memory_budget: usize,
    /// Free pool buffers kept for reuse; beyond this they are freed.
    pub pool_buffers: usize,
    /// Size a new pool buffer starts at (it grows as a PDU needs it).
    pub initial_buffer: usize,
    /// CRC kernel.
    pub kernel: Kernel,
}

impl Default for RxConfig {
    fn default() -> Self {
        RxConfig {
            format: Format::Uni,
            max_vcs: 1024,
            memory_budget: 4 << 20,
            pool_buffers: 64,
            initial_buffer: 2048,
            kernel: Kernel::best(),
        }
    }
}

/// Settings of one VC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VcConfig {
    /// Largest SDU accepted; longer PDUs are dropped as [`DropReason::Oversize`].
    pub max_sdu: usize,
    /// Time from a PDU's first cell by which its last must have arrived.
    pub timeout: Duration,
    /// Deliver PDUs that fail the CRC or length check, flagged as corrupted
    /// (I.363.5's "corrupted data delivery" option), instead of dropping them.
    pub deliver_corrupted: bool,
    /// Most buffers that may be posted on the VC at once.
    pub max_posted: usize,
}

impl Default for VcConfig {
    fn default() -> Self {
        VcConfig {
            max_sdu: frame::MAX_SDU,
            timeout: Duration::from_secs(1),
            deliver_corrupted: false,
            max_posted: 16,
        }
    }
}

/// Whether a delivered SDU is intact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Passed every check.
    Intact,
    /// Failed the given check; delivered only because the VC asked for
    /// corrupted data.
    Corrupted(DropReason),
}

/// A reassembled SDU handed to the application.
#[derive(Debug)]
pub struct Delivery {
    /// The VC it arrived on.
    pub vc: VcId,
    /// CPCS user-to-user byte.
    pub uu: u8,
    /// Common part indicator.
    pub cpi: u8,
    /// Intact or flagged.
    pub status: Status,
    /// True when the data went straight into a buffer posted for the VC.
    pub posted: bool,
    buf: Vec<u8>,
    len: usize,
}

impl Delivery {
    /// The SDU's bytes.
    pub fn sdu(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    /// The SDU's length.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for an empty SDU.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The whole buffer (longer than the SDU), to post again or recycle
    /// without re-initialising it.
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }
    /// The SDU as a vector of exactly its length.
    pub fn into_sdu(mut self) -> Vec<u8> {
        self.buf.truncate(self.len);
        self.buf
    }
}

/// Why a reassembler refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxError {
    /// `max_vcs` VCs are already open.
    TooManyVcs,
    /// The VC is not open.
    UnknownVc,
    /// The VC already has `max_posted` buffers waiting.
    PostedFull,
}

impl std::fmt::Display for RxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RxError::TooManyVcs => "the reassembler's VC table is full",
            RxError::UnknownVc => "the VC is not open on this reassembler",
            RxError::PostedFull => "the VC already has as many posted buffers as it allows",
        })
    }
}

impl std::error::Error for RxError {}

/// The token of a PDU whose timer is not in the queue yet (the queue's
/// tokens start at 1).
const UNARMED: u64 = 0;

#[derive(Debug)]
struct Current {
    buf: Vec<u8>,
    len: usize,
    cells: u64,
    deadline: Instant,
    /// Marks this PDU's entry in the timer queue as live; [`UNARMED`]
    /// while the run that began it is still being taken (the entry is
    /// armed when the run ends with the PDU still open).
    token: u64,
    posted: bool,
    /// Bytes of `buf` charged to the memory budget (0 for posted buffers).
    charged: usize,
}

#[derive(Debug)]
struct VcState {
    cfg: VcConfig,
    counters: VcCounters,
    posted: VecDeque<Vec<u8>>,
    cur: Option<Current>,
    /// The CRC of the PDU in `cur`. Kept here rather than in `Current`,
    /// which moves when a PDU ends, because the wide kernel's state is
    /// 192 bytes.
    crc: Crc32State,
    /// Dropping cells until the end of the current PDU, for this reason.
    discarding: Option<DropReason>,
}

/// The memory every reassembly draws from.
#[derive(Debug)]
struct Pool {
    free: Vec<Vec<u8>>,
    keep: usize,
    initial: usize,
    budget: usize,
    used: usize,
}

impl Pool {
    /// A buffer charged to the budget, or `None` if the budget is spent.
    fn take(&mut self) -> Option<(Vec<u8>, usize)> {
        let buf = self.free.pop().unwrap_or_else(|| vec![0; self.initial]);
        if self.used + buf.len() > self.budget {
            self.put(buf, 0);
            return None;
        }
        self.used += buf.len();
        let n = buf.len();
        Some((buf, n))
    }

    /// Grows `buf` to at least `need` bytes (doubling), charging the budget.
    fn grow(&mut self, buf: &mut Vec<u8>, charged: &mut usize, need: usize, cap: usize) -> bool {
        let new = need.max(buf.len() * 2).min(cap.max(need));
        let extra = new.saturating_sub(buf.len());
        if self.used + extra > self.budget {
            return false;
        }
        buf.resize(new, 0);
        self.used += extra;
        *charged += extra;
        true
    }

    /// Takes back `buf`, of which `charged` bytes were charged. It is kept
    /// at the initial length (its capacity kept too), so the next PDU that
    /// takes it is charged as for a new buffer and charged more only as it
    /// grows: a buffer a long PDU once grew does not make a short one look
    /// long to the budget.
    fn put(&mut self, mut buf: Vec<u8>, charged: usize) {
        self.used -= charged;
        if self.free.len() < self.keep && !buf.is_empty() {
            buf.truncate(self.initial);
            self.free.push(buf);
        }
    }
}

/// The AAL5 receiver for any number of VCs.
#[derive(Debug)]
pub struct Aal5Rx {
    cfg: RxConfig,
    vcs: HashMap<VcId, VcState>,
    timers: Deadlines<VcId>,
    pool: Pool,
    stats: RxStats,
}

impl Aal5Rx {
    /// A reassembler with no VCs open.
    pub fn new(cfg: RxConfig) -> Self {
        Aal5Rx {
            cfg,
            vcs: HashMap::default(),
            timers: Deadlines::default(),
            pool: Pool {
                free: Vec::new(),
                keep: cfg.pool_buffers,
                initial: cfg.initial_buffer.max(PAYLOAD_LEN),
                budget: cfg.memory_budget,
                used: 0,
            },
            stats: RxStats::default(),
        }
    }

    /// Opens (or reconfigures) a VC.
    pub fn open_vc(&mut self, vc: VcId, cfg: VcConfig) -> Result<(), RxError> {
        if let Some(st) = self.vcs.get_mut(&vc) {
            st.cfg = cfg;
            return Ok(());
        }
        if self.vcs.len() >= self.cfg.max_vcs {
            return Err(RxError::TooManyVcs);
        }
        self.vcs.insert(
            vc,
            VcState {
                cfg,
                counters: VcCounters::default(),
                posted: VecDeque::new(),
                cur: None,
                crc: Crc32State::new(self.cfg.kernel),
                discarding: None,
            },
        );
        Ok(())
    }

    /// Closes a VC, dropping any reassembly in progress, and hands back the
    /// buffers still posted on it.
    pub fn close_vc(&mut self, vc: VcId) -> Result<Vec<Vec<u8>>, RxError> {
        self.flush_vc(vc)?;
        let st = self.vcs.remove(&vc).ok_or(RxError::UnknownVc)?;
        Ok(st.posted.into())
    }

    /// Drops any reassembly in progress on a VC (counted as
    /// [`DropReason::Flushed`]).
    pub fn flush_vc(&mut self, vc: VcId) -> Result<(), RxError> {
        let st = self.vcs.get_mut(&vc).ok_or(RxError::UnknownVc)?;
        if let Some(cur) = st.cur.take() {
            Self::drop_pdu(
                &mut self.stats,
                &mut self.pool,
                st,
                cur,
                DropReason::Flushed,
            );
        }
        st.discarding = None;
        Ok(())
    }

    /// Posts a buffer for the VC's next PDU: reassembly will write straight
    /// into it. Its current length is the room offered (give it initialised
    /// bytes, e.g. `vec![0; n]`, or a buffer from [`Delivery::into_buffer`]).
    /// A PDU needs room for its SDU rounded up to whole cells plus the trailer.
    /// Bytes after the PDU are not kept: up to 16 of them may be zeroed.
    pub fn post_buffer(&mut self, vc: VcId, buf: Vec<u8>) -> Result<(), (RxError, Vec<u8>)> {
        let Some(st) = self.vcs.get_mut(&vc) else {
            return Err((RxError::UnknownVc, buf));
        };
        if st.posted.len() >= st.cfg.max_posted {
            return Err((RxError::PostedFull, buf));
        }
        st.posted.push_back(buf);
        Ok(())
    }

    /// Returns a delivered buffer to the pool for reuse.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.pool.put(buf, 0);
    }

    /// Totals so far.
    pub fn stats(&self) -> RxStats {
        self.stats
    }

    /// A VC's counters (`rx`, `rx_err`, `rx_drop`).
    pub fn vc_counters(&self, vc: VcId) -> Option<VcCounters> {
        self.vcs.get(&vc).map(|s| s.counters)
    }

    /// Cells held in reassemblies in progress.
    pub fn cells_in_progress(&self) -> u64 {
        self.vcs
            .values()
            .map(|s| s.cur.as_ref().map_or(0, |c| c.cells))
            .sum()
    }

    /// Bytes of the memory budget in use.
    pub fn memory_in_use(&self) -> usize {
        self.pool.used
    }

    /// When the next reassembly timer runs out, if any is running.
    pub fn poll_at(&self) -> Option<Instant> {
        self.timers.first()
    }

    /// Drops every PDU whose timer has run out by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some((vc, token)) = self.timers.pop_due(now) {
            if let Some(st) = self.vcs.get_mut(&vc) {
                if st.cur.as_ref().is_some_and(|c| c.token == token) {
                    let cur = st.cur.take().expect("checked");
                    Self::drop_pdu(
                        &mut self.stats,
                        &mut self.pool,
                        st,
                        cur,
                        DropReason::Timeout,
                    );
                }
            }
        }
        self.tidy_timers();
    }

    /// Keeps the first timer entry live and the queue bounded.
    fn tidy_timers(&mut self) {
        let vcs = &self.vcs;
        self.timers.tidy(vcs.len(), |vc, token| {
            vcs.get(&vc)
                .and_then(|s| s.cur.as_ref())
                .is_some_and(|c| c.token == token)
        });
    }

    /// Takes a batch of cells (HEC already checked by the link) and calls
    /// `deliver` for each PDU completed, in order.
    pub fn push(&mut self, now: Instant, cells: &[CellBytes], deliver: &mut impl FnMut(Delivery)) {
        let mut i = 0;
        while i < cells.len() {
            i += self.push_run_inner(now, &cells[i..], None, deliver);
        }
        self.tidy_timers();
    }

    /// As [`Aal5Rx::push_run`] without tidying the timer queue; `push` and
    /// `push_run` tidy once at the end.
    fn push_run_inner(
        &mut self,
        now: Instant,
        cells: &[CellBytes],
        valid: Option<[u64; 2]>,
        deliver: &mut impl FnMut(Delivery),
    ) -> usize {
        let Some(c) = cells.first() else { return 0 };
        let key = header_key(c);
        let user = c[3] & 0x08 == 0;
        let vc = Header::parse(&[c[0], c[1], c[2], c[3]], self.cfg.format).vc();
        let n = match self.vcs.get_mut(&vc) {
            Some(st) if user => Self::run(
                &mut self.stats,
                &mut self.pool,
                &mut self.timers,
                self.cfg.kernel,
                now,
                vc,
                st,
                key,
                valid,
                cells,
                deliver,
            ),
            _ => {
                let n = cells
                    .iter()
                    .take_while(|c| {
                        header_key(c) == key
                            && valid.is_none_or(|v| v.contains(&aurora_wire::hec::pack_header(c)))
                    })
                    .count();
                let reason = if user {
                    DropReason::UnknownVc
                } else {
                    DropReason::NotUserData
                };
                self.stats.cells_dropped.add(reason, n as u64);
                n
            }
        };
        self.stats.cells_in += n as u64;
        n
    }

    /// Takes the leading run of `cells` that share the first cell's VC and
    /// kind (user or not), and returns how many it took (at least one when
    /// `cells` is not empty). Lets a caller that sorts cells by VC hand over
    /// a whole batch without scanning it first.
    pub fn push_run(
        &mut self,
        now: Instant,
        cells: &[CellBytes],
        deliver: &mut impl FnMut(Delivery),
    ) -> usize {
        let n = self.push_run_inner(now, cells, None, deliver);
        self.tidy_timers();
        n
    }

    /// As [`Aal5Rx::push_run`], for cells whose HEC has not been checked:
    /// the run also stops at the first cell whose five header bytes are not
    /// one of `valid` (packed as [`aurora_wire::hec::pack_header`]), so every
    /// cell taken had a known-valid header. Returns 0 when the first cell's
    /// header is not one of them. The first cell must be a user cell of an
    /// open VC for the fast path; others are counted as usual.
    pub fn push_run_checked(
        &mut self,
        now: Instant,
        cells: &[CellBytes],
        valid: [u64; 2],
        deliver: &mut impl FnMut(Delivery),
    ) -> usize {
        match cells.first() {
            Some(c) if valid.contains(&aurora_wire::hec::pack_header(c)) => {}
            _ => return 0,
        }
        let n = self.push_run_inner(now, cells, Some(valid), deliver);
        self.tidy_timers();
        n
    }

    /// Handles the leading cells of `cells` whose header matches `key` (all of
    /// them belong to `vc`); returns how many it consumed (at least one).
    #[allow(clippy::too_many_arguments)]
    fn run(
        stats: &mut RxStats,
        pool: &mut Pool,
        timers: &mut Deadlines<VcId>,
        kernel: Kernel,
        now: Instant,
        vc: VcId,
        st: &mut VcState,
        key: u32,
        valid: Option<[u64; 2]>,
        cells: &[CellBytes],
        deliver: &mut impl FnMut(Delivery),
    ) -> usize {
        // Narrow the valid headers to this run's VC, so that matching one
        // implies the key (the copy loop then checks only the header).
        let valid = valid.map(|v| {
            v.map(|p| {
                let b = (p as u32).to_le_bytes();
                let k = u32::from_be_bytes([b[0], b[1], b[2], b[3] & 0xF8]);
                if k == key {
                    p
                } else {
                    u64::MAX
                }
            })
        });
        let belongs = |c: &CellBytes| {
            header_key(c) == key
                && valid.is_none_or(|[a, b]| {
                    let p = aurora_wire::hec::pack_header(c);
                    p == a || p == b
                })
        };
        let max_pdu = frame::cpcs_len(st.cfg.max_sdu.min(frame::MAX_SDU));
        let mut done = 0;
        loop {
            let rest = &cells[done..];
            if rest.first().is_none_or(|c| !belongs(c)) {
                // A PDU still open when the run ends gets its timer now; one
                // that began and ended within the run never needed one.
                if let Some(cur) = st.cur.as_mut().filter(|c| c.token == UNARMED) {
                    cur.token = timers.arm(cur.deadline, vc);
                }
                return done;
            }
            if let Some(reason) = st.discarding {
                // Drop cells up to and including the end of the bad PDU.
                let mut n = 0;
                let mut ended = false;
                for c in rest.iter().take_while(|c| belongs(c)) {
                    n += 1;
                    if c[3] & 0x02 != 0 {
                        ended = true;
                        break;
                    }
                }
                stats.cells_dropped.add(reason, n as u64);
                done += n;
                if ended {
                    st.discarding = None;
                    st.counters.rx_eoms += 1;
                }
                continue;
            }
            // A timer that ran out but has not been fired by the caller yet.
            if st.cur.as_ref().is_some_and(|c| now >= c.deadline) {
                let cur = st.cur.take().expect("checked");
                Self::drop_pdu(stats, pool, st, cur, DropReason::Timeout);
            }
            if st.cur.is_none() {
                let deadline = now + st.cfg.timeout;
                let (buf, posted, charged) = if let Some(buf) = st.posted.pop_front() {
                    stats.posted_hits += 1;
                    (buf, true, 0)
                } else {
                    stats.posted_misses += 1;
                    let Some((buf, charged)) = pool.take() else {
                        stats.pdus_dropped.add(DropReason::BudgetExhausted, 1);
                        st.counters.rx_drop += 1;
                        st.discarding = Some(DropReason::BudgetExhausted);
                        continue;
                    };
                    (buf, false, charged)
                };
                st.crc.reset(kernel);
                st.cur = Some(Current {
                    buf,
                    len: 0,
                    cells: 0,
                    deadline,
                    token: UNARMED,
                    posted,
                    charged,
                });
            }
            let cur = st.cur.as_mut().expect("started above");
            let need = cur.len + PAYLOAD_LEN;
            if need > cur.buf.len().min(max_pdu) {
                let reason = if need > max_pdu {
                    Some(DropReason::Oversize)
                } else if cur.posted {
                    // Outgrew the posted buffer: carry on in a pool buffer.
                    stats.posted_overflows += 1;
                    match pool.take() {
                        Some((mut buf, mut charged)) => {
                            if buf.len() < need && !pool.grow(&mut buf, &mut charged, need, max_pdu)
                            {
                                pool.put(buf, charged);
                                Some(DropReason::BudgetExhausted)
                            } else {
                                buf[..cur.len].copy_from_slice(&cur.buf[..cur.len]);
                                let posted = std::mem::replace(&mut cur.buf, buf);
                                cur.charged = charged;
                                cur.posted = false;
                                st.posted.push_front(posted);
                                None
                            }
                        }
                        None => Some(DropReason::BudgetExhausted),
                    }
                } else if !pool.grow(&mut cur.buf, &mut cur.charged, need, max_pdu) {
                    Some(DropReason::BudgetExhausted)
                } else {
                    None
                };
                if let Some(reason) = reason {
                    let cur = st.cur.take().expect("present");
                    Self::drop_pdu(stats, pool, st, cur, reason);
                    st.discarding = Some(reason);
                }
                continue;
            }
            let limit = cur.buf.len().min(max_pdu);
            let room = (limit - cur.len) / PAYLOAD_LEN * PAYLOAD_LEN;
            let start = cur.len;
            let (n, ended) =
                st.crc
                    .drain_run(rest, Some(key), valid, &mut cur.buf[start..start + room]);
            cur.len += n * PAYLOAD_LEN;
            cur.cells += n as u64;
            done += n;
            if ended {
                st.counters.rx_eoms += 1;
                let cur = st.cur.take().expect("present");
                // The trailer as the last cell carried it (the same bytes
                // were just copied to the buffer, where reading them back
                // would wait for the copy's stores).
                let end = &rest[n - 1][CELL_LEN - TRAILER_LEN..];
                let trailer = Trailer::parse(end).expect("eight bytes");
                Self::complete(stats, pool, vc, st, cur, trailer, deliver);
            }
        }
    }

    fn drop_pdu(
        stats: &mut RxStats,
        pool: &mut Pool,
        st: &mut VcState,
        cur: Current,
        reason: DropReason,
    ) {
        stats.pdus_dropped.add(reason, 1);
        stats.cells_dropped.add(reason, cur.cells);
        if reason.is_resource() {
            st.counters.rx_drop += 1;
        } else {
            st.counters.rx_err += 1;
        }
        Self::release(pool, st, cur.buf, cur.posted, cur.charged);
    }

    fn release(pool: &mut Pool, st: &mut VcState, buf: Vec<u8>, posted: bool, charged: usize) {
        if posted {
            st.posted.push_front(buf);
        } else {
            pool.put(buf, charged);
        }
    }

    fn complete(
        stats: &mut RxStats,
        pool: &mut Pool,
        vc: VcId,
        st: &mut VcState,
        cur: Current,
        t: Trailer,
        deliver: &mut impl FnMut(Delivery),
    ) {
        let verdict = if !st.crc.is_valid_pdu() {
            Err(DropReason::Crc)
        } else {
            frame::check_length(t.length, cur.len).map_err(|e| match e {
                frame::PduError::Aborted => DropReason::Aborted,
                _ => DropReason::Length,
            })
        };
        let status = match verdict {
            Ok(()) => Status::Intact,
            Err(r @ (DropReason::Crc | DropReason::Length)) if st.cfg.deliver_corrupted => {
                Status::Corrupted(r)
            }
            Err(r) => return Self::drop_pdu(stats, pool, st, cur, r),
        };
        let len = usize::from(t.length).min(cur.len - TRAILER_LEN);
        stats.cells_delivered += cur.cells;
        match status {
            Status::Intact => {
                stats.pdus_delivered += 1;
                st.counters.rx += 1;
            }
            Status::Corrupted(_) => {
                stats.pdus_corrupted += 1;
                st.counters.rx_err += 1;
            }
        }
        // The buffer leaves the budget with the application.
        pool.used -= cur.charged;
        deliver(Delivery {
            vc,
            uu: t.uu,
            cpi: t.cpi,
            status,
            posted: cur.posted,
            buf: cur.buf,
            len,
        });
    }
}
