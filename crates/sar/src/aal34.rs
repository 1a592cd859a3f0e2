//! AAL3/4 segmentation and reassembly, with MID multiplexing.
//!
//! Many PDUs may be in flight on one VC at once, told apart by their 10-bit
//! MID. The receiver checks more than Penn's board did: the CRC-10 of every
//! cell, sequence-number continuity within a PDU, segment-type order, LI
//! ranges, Btag = Etag, BAsize ≥ Length and the Length itself. The number of
//! PDUs being reassembled at once is limited (256 by default, as on Penn's
//! board), and so is the memory they hold.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use aurora_time::{Duration, Instant};
use aurora_wire::aal34::{
    self as frame, CpcsError, CpcsHeader, CpcsTrailer, SarPdu, SarRepr, SegmentType, LI_ABORT,
    SAR_PAYLOAD_LEN,
};
use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::{CellBytes, PayloadBytes, HEADER_LEN};

use crate::counters::{DropReason, RxStats, VcCounters};
use crate::crc10::{self, Kernel};
use crate::TxError;

/// The AAL3/4 sender of one VC.
#[derive(Clone, Debug)]
pub struct Aal34Tx {
    vc: VcId,
    header: [u8; HEADER_LEN],
    /// Next sequence number, per MID.
    sn: Vec<u8>,
    btag: u8,
    counters: VcCounters,
    kernel: Kernel,
}

impl Aal34Tx {
    /// A sender for `vc` with headers in `format`, computing the CRC-10
    /// with the fastest kernel this CPU has.
    pub fn new(vc: VcId, format: Format) -> Result<Self, TxError> {
        Self::with_kernel(vc, format, Kernel::best())
    }

    /// A sender using CRC-10 kernel `kernel` (the fastest this CPU can run
    /// where it cannot run that one).
    pub fn with_kernel(vc: VcId, format: Format, kernel: Kernel) -> Result<Self, TxError> {
        let header = crate::user_header(vc, format)?;
        Ok(Aal34Tx {
            vc,
            header,
            sn: vec![0; usize::from(frame::MAX_MID) + 1],
            btag: 0,
            counters: VcCounters::default(),
            kernel: crc10::usable(kernel),
        })
    }

    /// The CRC-10 kernel in use.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The VC this sender writes.
    pub fn vc(&self) -> VcId {
        self.vc
    }

    /// The sender's counters (`tx`, `tx_err`).
    pub fn counters(&self) -> VcCounters {
        self.counters
    }

    /// Segments `sdu` on multiplexing identifier `mid` into `out`, which must
    /// hold [`aurora_wire::aal34::cells_for`] cells. Returns the cell count.
    pub fn segment_into(
        &mut self,
        sdu: &[u8],
        mid: u16,
        out: &mut [CellBytes],
    ) -> Result<usize, TxError> {
        if sdu.len() > frame::MAX_SDU {
            self.counters.tx_err += 1;
            return Err(TxError::TooLong {
                len: sdu.len(),
                max: frame::MAX_SDU,
            });
        }
        if mid > frame::MAX_MID {
            self.counters.tx_err += 1;
            return Err(TxError::Field("mid"));
        }
        let n = frame::cells_for(sdu.len());
        if out.len() < n {
            self.counters.tx_err += 1;
            return Err(TxError::NoRoom {
                need: n,
                have: out.len(),
            });
        }
        self.counters.tx += 1;
        self.btag = self.btag.wrapping_add(1);
        let len = sdu.len() as u16;
        let head = CpcsHeader {
            cpi: 0,
            btag: self.btag,
            basize: len,
        }
        .to_bytes();
        let tail = CpcsTrailer {
            al: 0,
            etag: self.btag,
            length: len,
        }
        .to_bytes();
        let total = frame::cpcs_len(sdu.len());
        let pad_end = total - 4;
        let sn0 = usize::from(self.sn[usize::from(mid)]);
        self.sn[usize::from(mid)] = ((sn0 + n) & 0x0F) as u8;
        let (header, kernel) = (self.header, self.kernel);
        // The CPCS-PDU is header | sdu | pad | trailer; each cell carries
        // the 44 bytes of it at [44·i, 44·i + 44), i.e. sdu[44·i − 4 ..].
        // Cells 1..fast hold SDU bytes only and have two SDU bytes on
        // either side (sdu[44·i − 6 .. 44·i + 42] exists), so they are
        // built straight from the SDU; the first cell and the last one or
        // two are put together piece by piece.
        let fast = if sdu.len() >= 86 {
            (sdu.len() - 42) / SAR_PAYLOAD_LEN + 1
        } else {
            1
        };
        let pieces: [(usize, &[u8]); 3] = [(0, &head), (4, sdu), (pad_end, &tail)];
        let piecewise = |i: usize, cell: &mut CellBytes| {
            let from = i * SAR_PAYLOAD_LEN;
            let to = (from + SAR_PAYLOAD_LEN).min(total);
            cell[..HEADER_LEN].copy_from_slice(&header);
            let payload: &mut PayloadBytes = (&mut cell[HEADER_LEN..])
                .try_into()
                .expect("a cell has 48 payload bytes");
            let data = &mut payload[2..2 + SAR_PAYLOAD_LEN];
            data.fill(0);
            for &(at, bytes) in &pieces {
                let lo = from.max(at);
                let hi = to.min(at + bytes.len());
                if lo < hi {
                    data[lo - from..hi - from].copy_from_slice(&bytes[lo - at..hi - at]);
                }
            }
            let st = match (i == 0, i + 1 == n) {
                (true, true) => SegmentType::Ssm,
                (true, false) => SegmentType::Bom,
                (false, false) => SegmentType::Com,
                (false, true) => SegmentType::Eom,
            };
            let sn = ((sn0 + i) & 0x0F) as u8;
            payload[..2].copy_from_slice(&sar_head(st, sn, mid).to_be_bytes());
            payload[46] = ((to - from) as u8) << 2;
            payload[47] = 0;
            crc10::set_field(kernel, payload);
        };
        let (first, rest) = out[..n].split_first_mut().expect("n ≥ 1");
        piecewise(0, first);
        let (middle, last) = rest.split_at_mut(fast - 1);
        com_cells(kernel, &header, sdu, sn0, mid, middle);
        for (i, cell) in last.iter_mut().enumerate() {
            piecewise(fast + i, cell);
        }
        Ok(n)
    }
}

/// [`com_cells`] four cells at a time with 512-bit VPCLMULQDQ, the rest
/// one at a time.
///
/// # Safety
///
/// The CPU must have AVX-512 F and BW, VPCLMULQDQ, PCLMULQDQ and SSSE3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
unsafe fn com_cells_avx512(
    header: &[u8; HEADER_LEN],
    sdu: &[u8],
    sn0: usize,
    mid: u16,
    cells: &mut [CellBytes],
) {
    use std::arch::x86_64::*;
    // The SAR header of a COM, little-endian: SN << 2 and the MID's top
    // two bits in the first byte, the MID's low byte in the second.
    let fixed = u64::from(mid >> 8) | u64::from(mid & 0xFF) << 8;
    let head = |i: usize| (fixed | (((sn0 + i) & 0x0F) as u64) << 2) as i64;
    // Lane k: the header of cell 1 + k.
    let mut heads = _mm512_set_epi64(0, head(4), 0, head(3), 0, head(2), 0, head(1));
    let mut chunks = cells.chunks_exact_mut(4);
    let mut i = 1;
    for four in chunks.by_ref() {
        let four: &mut [CellBytes; 4] = four.try_into().expect("four cells");
        let windows =
            [i, i + 1, i + 2, i + 3].map(|c| sdu[SAR_PAYLOAD_LEN * c - 6..][..48].as_ptr());
        // SAFETY: the CPU has the features (the caller's promise) and each
        // window pointer is to 48 bytes of `sdu` (sliced just above).
        unsafe { crc10::avx512::build4(four, header, windows, heads, SAR_PAYLOAD_LEN as u8) };
        // SN + 4 (mod 16) in every lane: bits 2..5 wrap into bit 6, cleared.
        heads = _mm512_and_si512(
            _mm512_add_epi64(heads, _mm512_set1_epi64(4 << 2)),
            _mm512_set1_epi64(0xFF3F),
        );
        i += 4;
    }
    // SAFETY: the CPU has PCLMULQDQ and SSSE3 (the caller's promise).
    unsafe { com_cells_clmul(header, sdu, sn0, mid, chunks.into_remainder(), i) };
}

/// The first two bytes of a SAR-PDU: ST, SN and MID, big-endian.
#[inline]
fn sar_head(st: SegmentType, sn: u8, mid: u16) -> u16 {
    (u16::from(st.bits()) << 14) | (u16::from(sn & 0x0F) << 10) | (mid & frame::MAX_MID)
}

/// Builds `cells`, continuation cells 1, 2, … of a PDU whose SDU is `sdu`
/// and whose first cell had sequence number `sn0`: cell i carries
/// sdu[44·i − 4 .. 44·i + 40], and sdu[44·i − 6 .. 44·i + 42] must exist.
fn com_cells(
    kernel: Kernel,
    header: &[u8; HEADER_LEN],
    sdu: &[u8],
    sn0: usize,
    mid: u16,
    cells: &mut [CellBytes],
) {
    // Every window in range, checked once here rather than per cell.
    assert!(cells.is_empty() || SAR_PAYLOAD_LEN * cells.len() + 42 <= sdu.len());
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::Clmul => {
            // SAFETY: a sender's kernel is Clmul only where the CPU has
            // PCLMULQDQ and SSSE3 (`crc10::usable`).
            unsafe { com_cells_clmul(header, sdu, sn0, mid, cells, 1) }
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Vpclmul => {
            // SAFETY: a sender's kernel is Vpclmul only where the CPU has
            // AVX-512 F and BW, VPCLMULQDQ, PCLMULQDQ and SSSE3
            // (`crc10::usable`).
            unsafe { com_cells_avx512(header, sdu, sn0, mid, cells) }
        }
        _ => {
            for (j, cell) in cells.iter_mut().enumerate() {
                let i = j + 1;
                let sn = ((sn0 + i) & 0x0F) as u8;
                cell[..HEADER_LEN].copy_from_slice(header);
                let payload: &mut PayloadBytes = (&mut cell[HEADER_LEN..])
                    .try_into()
                    .expect("a cell has 48 payload bytes");
                let data: &[u8; SAR_PAYLOAD_LEN] = sdu[SAR_PAYLOAD_LEN * i - 4..]
                    .first_chunk()
                    .expect("in range (asserted above)");
                payload[..2].copy_from_slice(&sar_head(SegmentType::Com, sn, mid).to_be_bytes());
                payload[2..46].copy_from_slice(data);
                payload[46] = (SAR_PAYLOAD_LEN as u8) << 2;
                payload[47] = 0;
                crc10::set_field(Kernel::Portable, payload);
            }
        }
    }
}

/// [`com_cells`] with the PCLMULQDQ CRC, the copy done in the same
/// registers; `cells[0]` is continuation cell `first` of the PDU.
///
/// # Safety
///
/// The CPU must have PCLMULQDQ and SSSE3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq,ssse3")]
unsafe fn com_cells_clmul(
    header: &[u8; HEADER_LEN],
    sdu: &[u8],
    sn0: usize,
    mid: u16,
    cells: &mut [CellBytes],
    first: usize,
) {
    for (j, cell) in cells.iter_mut().enumerate() {
        let i = first + j;
        let sn = ((sn0 + i) & 0x0F) as u8;
        let window: &[u8; 48] = sdu[SAR_PAYLOAD_LEN * i - 6..]
            .first_chunk()
            .expect("in range (asserted by the caller)");
        let head = sar_head(SegmentType::Com, sn, mid);
        // SAFETY: the caller's CPU has PCLMULQDQ and SSSE3.
        unsafe { crc10::clmul::build_cell(cell, header, window, head, SAR_PAYLOAD_LEN as u8) };
    }
}

/// Settings shared by all VCs of an AAL3/4 receiver.
#[derive(Clone, Copy, Debug)]
pub struct Aal34Config {
    /// Header layout of arriving cells.
    pub format: Format,
    /// Most VCs open at once.
    pub max_vcs: usize,
    /// Most PDUs (VC, MID pairs) being reassembled at once.
    pub max_reassemblies: usize,
    /// Bytes of buffer all reassemblies together may hold.
    pub memory_budget: usize,
}

impl Default for Aal34Config {
    fn default() -> Self {
        Aal34Config {
            format: Format::Uni,
            max_vcs: 256,
            max_reassemblies: 256,
            memory_budget: 4 << 20,
        }
    }
}

/// Settings of one AAL3/4 VC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aal34VcConfig {
    /// Largest SDU accepted.
    pub max_sdu: usize,
    /// Time from a PDU's BOM by which its EOM must have arrived.
    pub timeout: Duration,
}

impl Default for Aal34VcConfig {
    fn default() -> Self {
        Aal34VcConfig {
            max_sdu: frame::MAX_SDU,
            timeout: Duration::from_secs(1),
        }
    }
}

/// A reassembled AAL3/4 SDU.
#[derive(Debug)]
pub struct Delivery {
    /// The VC it arrived on.
    pub vc: VcId,
    /// Its multiplexing identifier.
    pub mid: u16,
    buf: Vec<u8>,
    len: usize,
}

impl Delivery {
    /// The SDU's bytes.
    pub fn sdu(&self) -> &[u8] {
        &self.buf[frame::CPCS_HEADER_LEN..frame::CPCS_HEADER_LEN + self.len]
    }
    /// The SDU's length.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for an empty SDU.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The SDU as a vector of exactly its length.
    pub fn into_sdu(self) -> Vec<u8> {
        let mut b = self.buf;
        b.truncate(frame::CPCS_HEADER_LEN + self.len);
        b.drain(..frame::CPCS_HEADER_LEN);
        b
    }
}

#[derive(Debug)]
struct Reassembly {
    buf: Vec<u8>,
    cells: u64,
    next_sn: u8,
    deadline: Instant,
    /// Set once the PDU is known bad: later cells are dropped for this
    /// reason until its EOM.
    discarding: Option<DropReason>,
}

/// The AAL3/4 receiver for any number of VCs and MIDs.
#[derive(Debug)]
pub struct Aal34Rx {
    cfg: Aal34Config,
    kernel: Kernel,
    vcs: HashMap<VcId, (Aal34VcConfig, VcCounters)>,
    active: HashMap<(VcId, u16), Reassembly>,
    timers: BTreeSet<(Instant, VcId, u16)>,
    used: usize,
    stats: RxStats,
}

impl Aal34Rx {
    /// A receiver with no VCs open.
    pub fn new(cfg: Aal34Config) -> Self {
        Self::with_kernel(cfg, Kernel::best())
    }

    /// A receiver checking CRC-10s with `kernel` (the fastest this CPU can
    /// run where it cannot run that one).
    pub fn with_kernel(cfg: Aal34Config, kernel: Kernel) -> Self {
        Aal34Rx {
            cfg,
            kernel: crc10::usable(kernel),
            vcs: HashMap::default(),
            active: HashMap::default(),
            timers: BTreeSet::new(),
            used: 0,
            stats: RxStats::default(),
        }
    }

    /// Opens (or reconfigures) a VC. Fails when `max_vcs` are open.
    pub fn open_vc(&mut self, vc: VcId, cfg: Aal34VcConfig) -> Result<(), crate::aal5::RxError> {
        if let Some(e) = self.vcs.get_mut(&vc) {
            e.0 = cfg;
            return Ok(());
        }
        if self.vcs.len() >= self.cfg.max_vcs {
            return Err(crate::aal5::RxError::TooManyVcs);
        }
        self.vcs.insert(vc, (cfg, VcCounters::default()));
        Ok(())
    }

    /// Drops every reassembly in progress on a VC (the datagram flush of
    /// Penn's board), counted as [`DropReason::Flushed`].
    pub fn flush_vc(&mut self, vc: VcId) {
        let keys: Vec<_> = self.active.keys().filter(|k| k.0 == vc).copied().collect();
        for k in keys {
            self.drop_active(k, DropReason::Flushed, 0);
        }
    }

    /// Drops the reassembly of one datagram (VC and MID), if any.
    pub fn flush_mid(&mut self, vc: VcId, mid: u16) {
        if self.active.contains_key(&(vc, mid)) {
            self.drop_active((vc, mid), DropReason::Flushed, 0);
        }
    }

    /// The CRC-10 kernel in use.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Totals so far.
    pub fn stats(&self) -> RxStats {
        self.stats
    }

    /// A VC's counters.
    pub fn vc_counters(&self, vc: VcId) -> Option<VcCounters> {
        self.vcs.get(&vc).map(|e| e.1)
    }

    /// Cells held in reassemblies in progress.
    pub fn cells_in_progress(&self) -> u64 {
        self.active.values().map(|r| r.cells).sum()
    }

    /// PDUs being reassembled now.
    pub fn reassemblies(&self) -> usize {
        self.active.len()
    }

    /// Bytes of the memory budget in use.
    pub fn memory_in_use(&self) -> usize {
        self.used
    }

    /// When the next reassembly timer runs out.
    pub fn poll_at(&self) -> Option<Instant> {
        self.timers.first().map(|t| t.0)
    }

    /// Drops every PDU whose timer has run out by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(t, vc, mid)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            self.drop_active((vc, mid), DropReason::Timeout, 0);
        }
    }

    /// Removes a reassembly, counting it (and `extra` cells that arrived with
    /// the decision) as dropped for `reason`. A reassembly already being
    /// discarded was counted as a PDU when discarding began.
    fn drop_active(&mut self, key: (VcId, u16), reason: DropReason, extra: u64) {
        let Some(r) = self.active.remove(&key) else {
            return;
        };
        self.timers.remove(&(r.deadline, key.0, key.1));
        self.used -= r.buf.capacity();
        let reason = r.discarding.unwrap_or(reason);
        self.stats.cells_dropped.add(reason, r.cells + extra);
        if r.discarding.is_none() {
            self.count_pdu_drop(key.0, reason);
        }
    }

    fn count_pdu_drop(&mut self, vc: VcId, reason: DropReason) {
        self.stats.pdus_dropped.add(reason, 1);
        if let Some(e) = self.vcs.get_mut(&vc) {
            if reason.is_resource() {
                e.1.rx_drop += 1;
            } else {
                e.1.rx_err += 1;
            }
        }
    }

    /// Marks a reassembly bad: its buffer is freed now, its cells so far and
    /// `extra` are dropped, and later cells up to its EOM are dropped too.
    fn start_discard(&mut self, key: (VcId, u16), reason: DropReason, extra: u64) {
        let Some(r) = self.active.get_mut(&key) else {
            return;
        };
        if r.discarding.is_some() {
            self.stats
                .cells_dropped
                .add(r.discarding.unwrap_or(reason), extra);
            return;
        }
        let cells = r.cells + extra;
        r.cells = 0;
        r.discarding = Some(reason);
        self.used -= r.buf.capacity();
        r.buf = Vec::new();
        self.stats.cells_dropped.add(reason, cells);
        self.count_pdu_drop(key.0, reason);
    }

    /// A single-cell drop that belongs to no PDU attempt.
    fn drop_cell(&mut self, reason: DropReason) {
        self.stats.cells_dropped.add(reason, 1);
    }

    /// A PDU that failed before it got a reassembly entry.
    fn drop_new_pdu(&mut self, vc: VcId, reason: DropReason) {
        self.stats.cells_dropped.add(reason, 1);
        self.count_pdu_drop(vc, reason);
    }

    /// Takes a batch of cells (HEC already checked by the link) and calls
    /// `deliver` for each PDU completed, in order.
    pub fn push(&mut self, now: Instant, cells: &[CellBytes], deliver: &mut impl FnMut(Delivery)) {
        self.stats.cells_in += cells.len() as u64;
        let mut rest = cells;
        while let Some((cell, tail)) = rest.split_first() {
            let mut run = None;
            self.cell(now, cell, deliver, &mut run);
            rest = tail;
            if let Some((key, max_pdu)) = run {
                // Only when the next cell may continue the run (same
                // header bytes, a COM of the same MID): cells of other VCs
                // or MIDs interleaved one by one cost no lookup here.
                let same = |c: &CellBytes| {
                    (
                        [c[0], c[1], c[2], c[3]],
                        c[HEADER_LEN] & 0xC3,
                        c[HEADER_LEN + 1],
                    )
                };
                let (h, s, m) = same(cell);
                if rest
                    .first()
                    .is_some_and(|next| same(next) == (h, s & 0x03, m))
                {
                    let n = self.continue_run(now, key, max_pdu, cell, rest);
                    rest = &rest[n..];
                }
            }
        }
    }

    /// After a cell that left PDU `key` being reassembled (a BOM, or a COM
    /// taken), takes the plain continuation cells that follow it in `rest`
    /// in a tight loop and returns how many it took: each must have the
    /// same four header bytes as `prev` (so the same VC and a user-data
    /// PTI), a good CRC-10, ST = COM, the expected SN, the same MID and
    /// LI = 44, and fit the buffer as it is. Exactly what [`Self::cell`]
    /// would do with such a cell, without its lookups; the first cell that
    /// is anything else is left to [`Self::cell`].
    fn continue_run(
        &mut self,
        now: Instant,
        key: (VcId, u16),
        max_pdu: usize,
        prev: &CellBytes,
        rest: &[CellBytes],
    ) -> usize {
        let kernel = self.kernel;
        let Some(r) = self.active.get_mut(&key) else {
            return 0;
        };
        if now >= r.deadline || r.discarding.is_some() {
            return 0;
        }
        let run = Run {
            header: [prev[0], prev[1], prev[2], prev[3]],
            mid: key.1,
            // The buffer must neither grow nor pass the PDU limit.
            limit: max_pdu.min(r.buf.capacity()),
        };
        match kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Clmul => {
                // SAFETY: a receiver's kernel is Clmul only where the CPU
                // has PCLMULQDQ and SSSE3 (`crc10::usable`).
                unsafe { continue_run_clmul(&run, r, rest) }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Vpclmul => {
                // SAFETY: a receiver's kernel is Vpclmul only where the CPU
                // has AVX-512 F and BW, VPCLMULQDQ, PCLMULQDQ and SSSE3
                // (`crc10::usable`).
                unsafe { continue_run_avx512(&run, r, rest) }
            }
            _ => continue_run_with(&run, r, rest, |u| crc10::check(Kernel::Portable, u)),
        }
    }

    /// One cell. When the cell leaves a PDU being reassembled that later
    /// COM cells may continue, `run` is set to its key and size limit.
    fn cell(
        &mut self,
        now: Instant,
        cell: &CellBytes,
        deliver: &mut impl FnMut(Delivery),
        run: &mut Option<((VcId, u16), usize)>,
    ) {
        let h = Header::parse(&[cell[0], cell[1], cell[2], cell[3]], self.cfg.format);
        if !h.pti.is_user() {
            return self.drop_cell(DropReason::NotUserData);
        }
        let vc = h.vc();
        let Some(&(vcfg, _)) = self.vcs.get(&vc) else {
            return self.drop_cell(DropReason::UnknownVc);
        };
        let unit: &PayloadBytes = cell.last_chunk().expect("a cell has 48 payload bytes");
        if !crc10::check(self.kernel, unit) {
            return self.drop_cell(DropReason::CellCrc);
        }
        let sar = SarPdu::new_unchecked(unit);
        let repr = SarRepr {
            st: sar.segment_type(),
            sn: sar.sn(),
            mid: sar.mid(),
            li: sar.li(),
        };
        let key = (vc, repr.mid);
        let data = &sar.payload()[..usize::from(repr.li.min(SAR_PAYLOAD_LEN as u8))];
        let max_pdu = frame::cpcs_len(vcfg.max_sdu.min(frame::MAX_SDU));
        match repr.st {
            SegmentType::Bom | SegmentType::Ssm => {
                if let Some(r) = self.active.get(&key) {
                    // A timer that ran out but has not been fired yet, or
                    // else the previous PDU on this MID lost its EOM.
                    let reason = if now >= r.deadline {
                        DropReason::Timeout
                    } else {
                        DropReason::UnexpectedSegment
                    };
                    self.drop_active(key, reason, 0);
                }
                let li_ok = match repr.st {
                    SegmentType::Bom => usize::from(repr.li) == SAR_PAYLOAD_LEN,
                    _ => (8..=44).contains(&repr.li) && repr.li.is_multiple_of(4),
                };
                if !li_ok {
                    return self.drop_new_pdu(vc, DropReason::InvalidLi);
                }
                let head = CpcsHeader::parse(data).expect("LI of at least 8 bytes");
                if head.cpi != 0 {
                    return self.drop_new_pdu(vc, DropReason::Cpi);
                }
                if frame::cpcs_len(usize::from(head.basize)) > max_pdu {
                    return self.drop_new_pdu(vc, DropReason::Oversize);
                }
                if repr.st == SegmentType::Ssm {
                    return self.finish(vc, repr.mid, data.to_vec(), 1, deliver);
                }
                if self.active.len() >= self.cfg.max_reassemblies {
                    return self.drop_new_pdu(vc, DropReason::TooManyReassemblies);
                }
                // Room for what BAsize announces (at least one SAR payload).
                let want = frame::cpcs_len(usize::from(head.basize)).max(SAR_PAYLOAD_LEN);
                if self.used + want > self.cfg.memory_budget {
                    return self.drop_new_pdu(vc, DropReason::BudgetExhausted);
                }
                let mut buf = Vec::with_capacity(want);
                buf.extend_from_slice(data);
                self.used += buf.capacity();
                let deadline = now + vcfg.timeout;
                self.timers.insert((deadline, vc, repr.mid));
                self.active.insert(
                    key,
                    Reassembly {
                        buf,
                        cells: 1,
                        next_sn: (repr.sn + 1) & 0x0F,
                        deadline,
                        discarding: None,
                    },
                );
                *run = Some((key, max_pdu));
            }
            SegmentType::Com | SegmentType::Eom => {
                let Some(r) = self.active.get_mut(&key) else {
                    return self.drop_cell(DropReason::UnexpectedSegment);
                };
                if now >= r.deadline {
                    // A timer that ran out but has not been fired yet: the
                    // PDU is gone, so this cell belongs to none.
                    self.drop_active(key, DropReason::Timeout, 0);
                    return self.drop_cell(DropReason::UnexpectedSegment);
                }
                let ends = repr.st == SegmentType::Eom;
                if let Some(reason) = r.discarding {
                    if ends {
                        self.drop_active(key, reason, 1);
                    } else {
                        self.stats.cells_dropped.add(reason, 1);
                    }
                    return;
                }
                let problem = if repr.sn != r.next_sn {
                    Some(DropReason::Sequence)
                } else if ends && repr.li == LI_ABORT {
                    Some(DropReason::Aborted)
                } else if !(if ends {
                    (4..=44).contains(&repr.li) && repr.li.is_multiple_of(4)
                } else {
                    usize::from(repr.li) == SAR_PAYLOAD_LEN
                }) {
                    Some(DropReason::InvalidLi)
                } else if r.buf.len() + data.len() > max_pdu {
                    Some(DropReason::Oversize)
                } else {
                    None
                };
                if let Some(reason) = problem {
                    if ends {
                        self.drop_active(key, reason, 1);
                    } else {
                        self.start_discard(key, reason, 1);
                    }
                    return;
                }
                r.next_sn = (r.next_sn + 1) & 0x0F;
                r.cells += 1;
                let need = r.buf.len() + data.len();
                if need > r.buf.capacity() {
                    let grow = need.max(r.buf.capacity() * 2).min(max_pdu) - r.buf.len();
                    let before = r.buf.capacity();
                    if self.used + (r.buf.len() + grow - before) > self.cfg.memory_budget {
                        return if ends {
                            self.drop_active(key, DropReason::BudgetExhausted, 0)
                        } else {
                            self.start_discard(key, DropReason::BudgetExhausted, 0)
                        };
                    }
                    r.buf.reserve_exact(grow);
                    self.used = self.used + r.buf.capacity() - before;
                }
                if ends {
                    r.buf.extend_from_slice(data);
                } else {
                    // A COM's LI is 44 (checked above): a fixed-size copy.
                    let full: &[u8; SAR_PAYLOAD_LEN] =
                        sar.payload().first_chunk().expect("44 payload bytes");
                    r.buf.extend_from_slice(full);
                }
                if ends {
                    let r = self.active.remove(&key).expect("present");
                    self.timers.remove(&(r.deadline, vc, repr.mid));
                    self.used -= r.buf.capacity();
                    self.finish(vc, repr.mid, r.buf, r.cells, deliver);
                } else {
                    *run = Some((key, max_pdu));
                }
            }
        }
    }

    fn finish(
        &mut self,
        vc: VcId,
        mid: u16,
        buf: Vec<u8>,
        cells: u64,
        deliver: &mut impl FnMut(Delivery),
    ) {
        match frame::decode_cpcs(&buf) {
            Ok((_, t, _)) => {
                self.stats.cells_delivered += cells;
                self.stats.pdus_delivered += 1;
                if let Some(e) = self.vcs.get_mut(&vc) {
                    e.1.rx += 1;
                }
                deliver(Delivery {
                    vc,
                    mid,
                    buf,
                    len: usize::from(t.length),
                });
            }
            Err(e) => {
                let reason = match e {
                    CpcsError::BadSize | CpcsError::Length => DropReason::Length,
                    CpcsError::TagMismatch => DropReason::TagMismatch,
                    CpcsError::BaSize => DropReason::BaSize,
                    CpcsError::Cpi => DropReason::Cpi,
                };
                self.stats.cells_dropped.add(reason, cells);
                self.count_pdu_drop(vc, reason);
            }
        }
    }
}

/// What the cells of a run of continuations must match.
struct Run {
    header: [u8; 4],
    mid: u16,
    /// The buffer may fill up to here.
    limit: usize,
}

/// True when `cell` is the next plain continuation of `run` (all but the
/// CRC-10 and the room in the buffer): the run's header bytes, ST = COM,
/// SN `sn`, the run's MID and LI = 44.
#[inline(always)]
fn continues(run: &Run, sn: u8, cell: &CellBytes) -> bool {
    cell[..4] == run.header
        && u16::from_be_bytes([cell[HEADER_LEN], cell[HEADER_LEN + 1]])
            == sar_head(SegmentType::Com, sn, run.mid)
        && usize::from(cell[HEADER_LEN + 46] >> 2) == SAR_PAYLOAD_LEN
}

/// Appends the 44 data bytes of a continuation cell that was checked.
#[inline(always)]
fn take(r: &mut Reassembly, cell: &CellBytes) {
    let data: &[u8; SAR_PAYLOAD_LEN] = cell[HEADER_LEN + 2..]
        .first_chunk()
        .expect("44 payload bytes");
    r.buf.extend_from_slice(data);
    r.next_sn = (r.next_sn + 1) & 0x0F;
    r.cells += 1;
}

/// [`take`] for four cells whose 176 data bytes fit the buffer without
/// growing it: one length and count update for the four rather than a
/// chain of four through memory (the compiler keeps `buf`'s length in
/// memory across each append, and four dependent store-to-load round
/// trips per group were most of the receiver's time).
#[inline(always)]
fn take4(r: &mut Reassembly, four: &[CellBytes; 4]) {
    let len = r.buf.len();
    let spare = &mut r.buf.spare_capacity_mut()[..4 * SAR_PAYLOAD_LEN];
    for (to, cell) in spare.chunks_exact_mut(SAR_PAYLOAD_LEN).zip(four) {
        to.write_copy_of_slice(&cell[HEADER_LEN + 2..HEADER_LEN + 2 + SAR_PAYLOAD_LEN]);
    }
    // SAFETY: the four copies above initialised buf[len..len + 176], which
    // is within the capacity (`spare` was sliced to it, which panics
    // otherwise).
    unsafe { r.buf.set_len(len + 4 * SAR_PAYLOAD_LEN) };
    r.next_sn = (r.next_sn + 4) & 0x0F;
    r.cells += 4;
}

/// Takes `cell` if it continues the run, has a good CRC-10 (by `check`)
/// and fits; false (and nothing changed) otherwise.
#[inline(always)]
fn take_one(
    run: &Run,
    r: &mut Reassembly,
    cell: &CellBytes,
    check: impl Fn(&PayloadBytes) -> bool,
) -> bool {
    let unit: &PayloadBytes = cell.last_chunk().expect("a cell has 48 payload bytes");
    if !continues(run, r.next_sn, cell) || r.buf.len() + SAR_PAYLOAD_LEN > run.limit || !check(unit)
    {
        return false;
    }
    take(r, cell);
    true
}

/// The loop of [`Aal34Rx::continue_run`], with the CRC-10 check `check`.
#[inline(always)]
fn continue_run_with(
    run: &Run,
    r: &mut Reassembly,
    rest: &[CellBytes],
    check: impl Fn(&PayloadBytes) -> bool + Copy,
) -> usize {
    rest.iter()
        .take_while(|cell| take_one(run, r, cell, check))
        .count()
}

/// [`continue_run_with`] four cells at a time with 512-bit VPCLMULQDQ:
/// four cells are taken together when all four continue the run, fit and
/// check; otherwise one cell is tried alone (with the one-cell kernel).
///
/// # Safety
///
/// The CPU must have AVX-512 F and BW, VPCLMULQDQ, PCLMULQDQ and SSSE3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
unsafe fn continue_run_avx512(run: &Run, r: &mut Reassembly, rest: &[CellBytes]) -> usize {
    let mut taken = 0;
    loop {
        let now = &rest[taken..];
        if let Some(four) = now.first_chunk::<4>() {
            let sn = r.next_sn;
            if r.buf.len() + 4 * SAR_PAYLOAD_LEN <= run.limit
                && continues(run, sn, &four[0])
                && continues(run, (sn + 1) & 0x0F, &four[1])
                && continues(run, (sn + 2) & 0x0F, &four[2])
                && continues(run, (sn + 3) & 0x0F, &four[3])
                // SAFETY: the CPU has the features (the caller's promise),
                // and each pointer is to a cell's 48-byte payload.
                && unsafe {
                    crc10::avx512::check4([
                        four[0][HEADER_LEN..].as_ptr(),
                        four[1][HEADER_LEN..].as_ptr(),
                        four[2][HEADER_LEN..].as_ptr(),
                        four[3][HEADER_LEN..].as_ptr(),
                    ])
                }
            {
                take4(r, four);
                taken += 4;
                continue;
            }
        }
        let Some(cell) = now.first() else {
            break;
        };
        // SAFETY: the CPU has PCLMULQDQ and SSSE3 (the caller's promise).
        if !take_one(run, r, cell, |u| unsafe { crc10::clmul::remainder(u) } == 0) {
            break;
        }
        taken += 1;
    }
    taken
}

/// [`continue_run_with`] with the PCLMULQDQ CRC-10 inlined.
///
/// # Safety
///
/// The CPU must have PCLMULQDQ and SSSE3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq,ssse3")]
unsafe fn continue_run_clmul(run: &Run, r: &mut Reassembly, rest: &[CellBytes]) -> usize {
    continue_run_with(run, r, rest, |u| {
        // SAFETY: the caller's CPU has PCLMULQDQ and SSSE3.
        unsafe { crc10::clmul::remainder(u) == 0 }
    })
}
