//! CRC-32/BZIP2 folded into the copy that builds or empties cells.
//!
//! AAL5 needs a CRC-32 over the whole CPCS-PDU. Computing it in a separate
//! pass costs a second read of the data, and computing it per cell with a
//! library call costs 20-45 ns of call overhead on 48 bytes. Instead the copy
//! loops here load each 16-byte block once, store it to its destination, and
//! fold it into the CRC with carry-less multiplication (PCLMULQDQ).
//!
//! How the fold works: treat the message as a polynomial over GF(2), first bit
//! highest. A cell payload is three 16-byte blocks, so three accumulators
//! ("lanes") each take every third block; lane `j` holds the blocks it has
//! seen, each shifted up by 384 bits (one cell) per later block. Shifting a
//! 128-bit lane `H·x^64 + L` by 384 bits modulo the generator `P` is
//! `H·(x^448 mod P) + L·(x^384 mod P)`: two 64×32-bit carry-less products that
//! fit in 96 bits. Nothing needs to be exactly reduced until the end, where
//! the lanes are combined (`lane0·x^256 + lane1·x^128 + lane2`), folded to 64
//! bits and reduced to 32 with a Barrett step, all in vector registers. The
//! CRC's initial value of all ones is folded in by starting lane 0 at
//! `!0·x^96·x^-384 mod P`, so that one fold later it stands exactly where
//! XORing the first 32 message bits with ones would have put it.
//!
//! Three kernels ([`Kernel`]): the one above (Clmul); the same fold four
//! cells at a time with 512-bit VPCLMULQDQ over twelve lanes (Vpclmul, the
//! `wide` module, where the CPU has AVX-512: on Zen 4 a carry-less multiply
//! of any width issues every second cycle, so the width is what pays); and
//! a portable one (a table-driven CRC updated once per cell, no call
//! overhead) where PCLMULQDQ is missing, which is also the reference the
//! tests compare the others against.

use aurora_wire::aal5::TRAILER_LEN;
use aurora_wire::{CellBytes, CELL_LEN, HEADER_LEN, PAYLOAD_LEN};
use crc::{Algorithm, Crc, Table};

/// The generator with its x^32 term.
const P: u64 = 0x1_04C1_1DB7;
/// CRC-32/BZIP2's initial register.
const INIT: u32 = 0xFFFF_FFFF;
/// Lane 0's starting value in the Clmul kernel (see the module docs).
const CLMUL_INIT: u32 = div_xpow(INIT, 288);
/// The register after a valid CPCS-PDU.
const RESIDUE: u32 = aurora_wire::crc::CRC32_RESIDUE;
/// The remainder (message mod P) whose register is the residue.
const RESIDUE_REMAINDER: u32 = div_xpow(RESIDUE, 32);
/// Header bits a run of cells may differ in: EFCI, AUU and CLP.
pub(crate) const KEY_MASK: u32 = !0x7;
/// The AUU bit in the first four header bytes read big-endian.
const AUU: u32 = 0x2;

/// What `drain_run` asks of each cell's header, as one branch-free test on
/// the cell's first eight bytes read little-endian: the header joins the
/// run when `w & mask` is `a` or `b`, and ends the PDU when `w & stop` is
/// not zero.
#[derive(Clone, Copy, Debug)]
struct HeaderTest {
    mask: u64,
    a: u64,
    b: u64,
    stop: u64,
}

impl HeaderTest {
    fn new(key: Option<u32>, valid: Option<[u64; 2]>) -> Self {
        // Bytes 0..4 of the cell, big-endian as the key is, land in the low
        // 32 bits of `w` byte-swapped.
        let le = |v: u32| u64::from(v.swap_bytes());
        let stop = if key.is_some() { le(AUU) } else { 0 };
        match (valid, key) {
            // The valid headers are this run's VC's: they imply the key.
            (Some([a, b]), _) => {
                debug_assert!(
                    [a, b]
                        .iter()
                        .all(|&v| v == u64::MAX || key.is_none_or(|k| (v & le(KEY_MASK)) == le(k))),
                    "a valid header must carry the run's key"
                );
                HeaderTest {
                    mask: 0xFF_FFFF_FFFF,
                    a,
                    b,
                    stop,
                }
            }
            (None, Some(k)) => HeaderTest {
                mask: le(KEY_MASK),
                a: le(k),
                b: le(k),
                stop,
            },
            (None, None) => HeaderTest {
                mask: 0,
                a: 0,
                b: 0,
                stop,
            },
        }
    }

    /// (joins the run, ends the PDU) for a cell.
    #[inline(always)]
    fn test(&self, cell: &CellBytes) -> (bool, bool) {
        let w = Self::word(cell);
        let x = w & self.mask;
        ((x == self.a) | (x == self.b), w & self.stop != 0)
    }

    /// For four cells in a row: (all four join and none but the last ends
    /// the PDU, the last ends it). Branch-free: a header joins when one of
    /// its differences from `a` and `b` is zero, so when their minimum is.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn group(&self, g: &[CellBytes; 4]) -> (bool, bool) {
        let w = g.each_ref().map(Self::word);
        let ok = if self.a == self.b && self.a & self.stop == 0 {
            // One header to match, without the stop bit (the usual case):
            // the first three must not end the PDU, so their stop bit is
            // tested with the header, and no minimum is needed.
            let early = self.mask | self.stop;
            (w[0] & early ^ self.a)
                | (w[1] & early ^ self.a)
                | (w[2] & early ^ self.a)
                | (w[3] & self.mask ^ self.a)
                == 0
        } else {
            let off = w.iter().fold(0, |acc, &w| {
                acc | (w & self.mask ^ self.a).min(w & self.mask ^ self.b)
            });
            (off | (w[0] | w[1] | w[2]) & self.stop) == 0
        };
        (ok, w[3] & self.stop != 0)
    }

    #[inline(always)]
    fn word(cell: &CellBytes) -> u64 {
        u64::from_le_bytes([
            cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6], cell[7],
        ])
    }
}

/// CRC-32 with the BZIP2 polynomial but zero initial value and no final
/// inversion: over bytes `b` it is `b(x)·x^32 mod P`, the plain register.
const RAW: Algorithm<u32> = Algorithm {
    width: 32,
    poly: 0x04C1_1DB7,
    init: 0,
    refin: false,
    refout: false,
    xorout: 0,
    check: 0x0376_E6E7,
    residue: 0,
};
static RAW_CRC: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&RAW);

/// `x^n mod P`.
const fn xpow(n: u32) -> u32 {
    let mut v: u64 = 1;
    let mut i = 0;
    while i < n {
        v <<= 1;
        if v & (1 << 32) != 0 {
            v ^= P;
        }
        i += 1;
    }
    v as u32
}

/// `v · x^-n mod P`. Exists because P has a constant term: when `v` is odd,
/// `v + P` is even and dividing it by x is exact.
pub(crate) const fn div_xpow(v: u32, n: u32) -> u32 {
    let mut v = v as u64;
    let mut i = 0;
    while i < n {
        if v & 1 != 0 {
            v ^= P;
        }
        v >>= 1;
        i += 1;
    }
    v as u32
}

/// Which implementation folds the CRC, slowest first: a CPU that runs one
/// runs every kernel before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kernel {
    /// Table-driven CRC, one update per cell. Runs anywhere.
    Portable,
    /// PCLMULQDQ folding fused with the copy, one cell at a time (x86-64
    /// with PCLMULQDQ and SSSE3).
    Clmul,
    /// 512-bit VPCLMULQDQ folding fused with the copy, four cells at a time
    /// (x86-64 with PCLMULQDQ, SSSE3, AVX-512 F, BW, VL and VBMI and
    /// VPCLMULQDQ).
    Vpclmul,
}

impl Kernel {
    /// The fastest kernel this CPU supports (detected once).
    pub fn best() -> Kernel {
        static BEST: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::is_x86_feature_detected as has;
                if has!("pclmulqdq") && has!("ssse3") {
                    let wide = has!("avx512f")
                        && has!("avx512bw")
                        && has!("avx512vl")
                        && has!("avx512vbmi")
                        && has!("vpclmulqdq");
                    return if wide { Kernel::Vpclmul } else { Kernel::Clmul };
                }
            }
            Kernel::Portable
        })
    }

    /// True when this CPU can run the kernel.
    pub fn supported(self) -> bool {
        self <= Kernel::best()
    }

    /// Every kernel this CPU can run, slowest first (for tests and
    /// benchmarks).
    pub fn available() -> Vec<Kernel> {
        [Kernel::Portable, Kernel::Clmul, Kernel::Vpclmul]
            .into_iter()
            .filter(|k| k.supported())
            .collect()
    }
}

/// A CRC-32/BZIP2 over whole cell payloads fed so far.
///
/// Aligned to a cache line, so that each of the 512-bit kernel's three
/// stores of its lanes lies in one line and the next run's loads of them
/// are forwarded from those stores (a store split across two lines is not,
/// and each such load then waits for the store to reach the cache).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct Crc32State {
    /// Vpclmul: twelve lanes. Clmul: the first three. Portable:
    /// `lanes[0]` is the register. First, so at the start of the line.
    lanes: [u128; 12],
    kernel: Kernel,
}

const _: () = assert!(core::mem::offset_of!(Crc32State, lanes) == 0);

impl Crc32State {
    /// A CRC with nothing fed yet. Asking for a kernel this CPU cannot run
    /// gives the fastest one it can.
    pub fn new(kernel: Kernel) -> Self {
        let kernel = kernel.min(Kernel::best());
        let mut lanes = [0; 12];
        match kernel {
            Kernel::Portable => lanes[0] = INIT as u128,
            Kernel::Clmul => lanes[0] = CLMUL_INIT as u128,
            #[cfg(target_arch = "x86_64")]
            Kernel::Vpclmul => lanes[wide::INIT_LANE] = CLMUL_INIT as u128,
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Vpclmul => unreachable!("the Vpclmul kernel exists only on x86-64"),
        }
        Crc32State { kernel, lanes }
    }

    /// Starts again with nothing fed, as [`Crc32State::new`], writing the
    /// state in place (a receiver resets one per PDU).
    #[inline]
    pub fn reset(&mut self, kernel: Kernel) {
        let kernel = kernel.min(Kernel::best());
        #[cfg(target_arch = "x86_64")]
        if kernel == Kernel::Vpclmul {
            self.kernel = kernel;
            // SAFETY: `best` gives Vpclmul only where the CPU has every
            // feature the kernel needs.
            unsafe { wide::reset(&mut self.lanes) };
            return;
        }
        *self = Crc32State::new(kernel);
    }

    /// The kernel in use.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// `M mod P` for the (init-adjusted) message M fed so far: the CRC
    /// register of M without its last 32 bits.
    #[inline]
    fn remainder(&self) -> u32 {
        match self.kernel {
            Kernel::Portable => div_xpow(self.lanes[0] as u32, 32),
            Kernel::Clmul => {
                #[cfg(target_arch = "x86_64")]
                {
                    // SAFETY: a Clmul state exists only where the CPU has
                    // PCLMULQDQ and SSSE3 (`new` enforces it).
                    unsafe { clmul::remainder(self.three()) }
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("the Clmul kernel exists only on x86-64")
            }
            Kernel::Vpclmul => {
                #[cfg(target_arch = "x86_64")]
                {
                    // SAFETY: a Vpclmul state exists only where the CPU has
                    // every feature the kernel needs (`new` enforces it).
                    unsafe { wide::remainder(&self.lanes) }
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("the Vpclmul kernel exists only on x86-64")
            }
        }
    }

    /// The CRC register after everything fed (before the final inversion), as
    /// a plain bitwise CRC-32/BZIP2 would hold it.
    pub fn register(&self) -> u32 {
        match self.kernel {
            Kernel::Portable => self.lanes[0] as u32,
            Kernel::Clmul | Kernel::Vpclmul => RAW_CRC.checksum(&self.remainder().to_be_bytes()),
        }
    }

    /// True when what was fed is a whole valid AAL5 CPCS-PDU (CRC field
    /// included): the register ends at the CRC-32 residue.
    #[inline]
    pub fn is_valid_pdu(&self) -> bool {
        match self.kernel {
            Kernel::Portable => self.lanes[0] as u32 == RESIDUE,
            // register = remainder·x^32 mod P, so compare remainders instead.
            Kernel::Clmul | Kernel::Vpclmul => self.remainder() == RESIDUE_REMAINDER,
        }
    }

    /// The CRC-32 field for a PDU whose last four bytes (the CRC field) were
    /// fed as zeros.
    #[inline]
    pub fn field_for_zeroed_tail(&self) -> u32 {
        // Fed: body·x^32, so the fed message mod P is the register of body.
        !self.remainder()
    }

    /// Folds one 48-byte payload without copying it anywhere.
    pub fn feed(&mut self, payload: &[u8; PAYLOAD_LEN]) {
        self.feed_payloads(payload);
    }

    /// Folds whole 48-byte payloads laid end to end (`payloads.len()` a
    /// multiple of 48) without copying them anywhere: the CRC's own cost,
    /// with no cells to read or write.
    ///
    /// # Panics
    ///
    /// If `payloads.len()` is not a multiple of 48.
    pub fn feed_payloads(&mut self, payloads: &[u8]) {
        assert!(
            payloads.len().is_multiple_of(PAYLOAD_LEN),
            "payloads must be whole 48-byte units"
        );
        let n = payloads.len() / PAYLOAD_LEN;
        match self.kernel {
            Kernel::Portable => self.portable(payloads),
            Kernel::Clmul => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: see `remainder`; `payloads` holds n payloads.
                unsafe {
                    clmul::fold_payloads(self.three_mut(), payloads, n)
                };
            }
            Kernel::Vpclmul => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: see `remainder`; `payloads` holds n payloads.
                unsafe {
                    wide::fold_payloads(&mut self.lanes, payloads, n)
                };
            }
        }
    }

    /// The Clmul kernel's three lanes.
    #[cfg(target_arch = "x86_64")]
    fn three(&self) -> &[u128; 3] {
        self.lanes.first_chunk().expect("twelve lanes")
    }

    #[cfg(target_arch = "x86_64")]
    fn three_mut(&mut self) -> &mut [u128; 3] {
        self.lanes.first_chunk_mut().expect("twelve lanes")
    }

    #[inline]
    fn portable(&mut self, payload: &[u8]) {
        let mut d = RAW_CRC.digest_with_initial(self.lanes[0] as u32);
        d.update(payload);
        self.lanes[0] = u128::from(d.finalize());
    }

    /// Builds every cell of a PDU from a contiguous SDU: its whole payloads,
    /// then the last one or two (the SDU's last bytes, zero pad, and
    /// `trailer`, whose CRC field must be zero); `header` on each cell but
    /// the last, which gets `header_end`; then writes the CRC field, computed
    /// with `kernel` (or the fastest this CPU runs), into the last cell.
    /// `cells` must hold exactly the PDU's cells.
    pub fn build_pdu(
        kernel: Kernel,
        header: &[u8; HEADER_LEN],
        header_end: &[u8; HEADER_LEN],
        sdu: &[u8],
        trailer: &[u8; TRAILER_LEN],
        cells: &mut [CellBytes],
    ) {
        assert_eq!(
            cells.len(),
            (sdu.len() + TRAILER_LEN).div_ceil(PAYLOAD_LEN),
            "a cell for each payload of the PDU"
        );
        let kernel = kernel.min(Kernel::best());
        if kernel == Kernel::Vpclmul {
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: `best` gives Vpclmul only where the CPU has every
                // feature the kernel needs; the cell count was asserted
                // above.
                unsafe {
                    wide::build_pdu(
                        header,
                        header_end,
                        sdu,
                        trailer,
                        cells,
                        wide::Tuning::here(),
                    )
                };
                return;
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("the Vpclmul kernel exists only on x86-64");
        }
        let mut st = Crc32State::new(kernel);
        let nb = sdu.len() / PAYLOAD_LEN;
        let (b, t) = cells.split_at_mut(nb);
        let body = nb * PAYLOAD_LEN;
        st.build_cells(header, &sdu[..body], b);
        let tail = tail_payloads(&sdu[body..], t.len(), trailer);
        st.build_cells(header, &tail[..t.len() * PAYLOAD_LEN], t);
        let field = st.remainder();
        end_cell(
            cells.last_mut().expect("a PDU has a cell"),
            header_end,
            field,
        );
    }

    /// Builds `cells.len()` cells: header `header` on each, payloads taken in
    /// order from `src` (which must hold `48 × cells.len()` bytes), folding
    /// every payload into the CRC.
    pub fn build_cells(&mut self, header: &[u8; HEADER_LEN], src: &[u8], cells: &mut [CellBytes]) {
        assert_eq!(
            src.len(),
            cells.len() * PAYLOAD_LEN,
            "source must fill the cells"
        );
        match self.kernel {
            Kernel::Portable => {
                for (cell, p) in cells.iter_mut().zip(src.chunks_exact(PAYLOAD_LEN)) {
                    cell[..HEADER_LEN].copy_from_slice(header);
                    cell[HEADER_LEN..].copy_from_slice(p);
                    self.portable(p);
                }
            }
            Kernel::Clmul => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: see `remainder`; the lengths were asserted above.
                unsafe {
                    clmul::build_cells(self.three_mut(), header, src, cells)
                };
            }
            Kernel::Vpclmul => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: a Vpclmul state exists only where the CPU has
                // every feature the kernel needs (`new` enforces it); the
                // lengths were asserted above.
                unsafe {
                    wide::build_cells(&mut self.lanes, header, src, cells, wide::Tuning::here())
                };
            }
        }
    }

    /// Copies the payloads of `cells` in order into `dst` (which must hold
    /// `48 × cells.len()` bytes), folding each into the CRC.
    pub fn drain_cells(&mut self, cells: &[CellBytes], dst: &mut [u8]) {
        assert_eq!(
            dst.len(),
            cells.len() * PAYLOAD_LEN,
            "destination must fit the cells"
        );
        let (n, _) = self.drain_run(cells, None, None, dst);
        debug_assert_eq!(n, cells.len());
    }

    /// Reassembly's inner loop: copies payloads of `cells` into consecutive
    /// 48-byte slots of `dst`, folding each into the CRC, while the cell's
    /// header matches `key` (first four header bytes, big-endian, EFCI/AUU/CLP
    /// masked; `None` accepts any header and ignores AUU). Stops after a cell
    /// with AUU set, before a cell whose header differs, or when `dst` is
    /// full. With `valid`, a cell whose five header bytes (packed as
    /// [`aurora_wire::hec::pack_header`]) are not one of the two given also
    /// stops the run: the caller's HEC check, folded into this loop. Both
    /// valid headers must carry the run's key (use `u64::MAX` for none);
    /// every kernel then checks only the header.
    /// Returns the cells consumed and whether the last one had AUU. Up to
    /// 16 bytes of `dst` after the slots filled may be zeroed.
    #[inline]
    pub fn drain_run(
        &mut self,
        cells: &[CellBytes],
        key: Option<u32>,
        valid: Option<[u64; 2]>,
        dst: &mut [u8],
    ) -> (usize, bool) {
        let room = dst.len() / PAYLOAD_LEN;
        let cells = &cells[..cells.len().min(room)];
        let test = HeaderTest::new(key, valid);
        match self.kernel {
            Kernel::Portable => {
                for (c, (cell, d)) in cells
                    .iter()
                    .zip(dst.chunks_exact_mut(PAYLOAD_LEN))
                    .enumerate()
                {
                    let (ok, stop) = test.test(cell);
                    if !ok {
                        return (c, false);
                    }
                    d.copy_from_slice(&cell[HEADER_LEN..]);
                    self.portable(&cell[HEADER_LEN..]);
                    if stop {
                        return (c + 1, true);
                    }
                }
                (cells.len(), false)
            }
            Kernel::Clmul => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: see `remainder`; `cells` was cut to what `dst` holds.
                unsafe {
                    clmul::drain_run(self.three_mut(), cells, test, dst)
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("the Clmul kernel exists only on x86-64")
            }
            Kernel::Vpclmul => {
                #[cfg(target_arch = "x86_64")]
                {
                    // Only a long run asks how this CPU is tuned.
                    let prefetch =
                        cells.len() >= wide::PREFETCH_CELLS && wide::Tuning::here().prefetch;
                    // SAFETY: see `build_cells`; `cells` was cut to what
                    // `dst` holds.
                    unsafe { wide::drain_run(&mut self.lanes, cells, test, dst, prefetch) }
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("the Vpclmul kernel exists only on x86-64")
            }
        }
    }
}

const _: () = assert!(CELL_LEN == HEADER_LEN + PAYLOAD_LEN);

/// The last `cells` (one or two) payloads of a PDU: `rest` (the SDU's bytes
/// after its last whole payload), zero pad, and `trailer` at the end.
pub(crate) fn tail_payloads(
    rest: &[u8],
    cells: usize,
    trailer: &[u8; TRAILER_LEN],
) -> [u8; 2 * PAYLOAD_LEN] {
    let mut tail = [0u8; 2 * PAYLOAD_LEN];
    tail[..rest.len()].copy_from_slice(rest);
    let end = cells * PAYLOAD_LEN;
    tail[end - TRAILER_LEN..end].copy_from_slice(trailer);
    tail
}

/// Makes `cell` a PDU's last: its header, and the CRC field for a fed
/// message (trailer field zero) whose remainder is `remainder`.
fn end_cell(cell: &mut CellBytes, header_end: &[u8; HEADER_LEN], remainder: u32) {
    cell[..HEADER_LEN].copy_from_slice(header_end);
    cell[CELL_LEN - 4..].copy_from_slice(&(!remainder).to_be_bytes());
}

#[cfg(target_arch = "x86_64")]
mod clmul {
    //! The PCLMULQDQ kernels. Every function requires PCLMULQDQ and SSSE3,
    //! which callers establish through `Kernel::best`.
    use super::{xpow, CellBytes, HEADER_LEN, PAYLOAD_LEN};
    use core::arch::x86_64::*;

    /// Fold by one cell (384 bits): (x^448 mod P, x^384 mod P).
    const K_CELL: (u64, u64) = (xpow(448) as u64, xpow(384) as u64);
    const K_256: (u64, u64) = (xpow(320) as u64, xpow(256) as u64);
    const K_128: (u64, u64) = (xpow(192) as u64, xpow(128) as u64);

    #[inline(always)]
    unsafe fn consts(k: (u64, u64)) -> __m128i {
        // SAFETY: plain register construction, SSE2 is baseline on x86-64.
        unsafe { _mm_set_epi64x(k.0 as i64, k.1 as i64) }
    }

    /// Reverses the 16 bytes so the first message byte is the high byte.
    #[inline(always)]
    unsafe fn bswap_mask() -> __m128i {
        // SAFETY: as above.
        unsafe { _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) }
    }

    #[inline(always)]
    unsafe fn fold(acc: __m128i, k: __m128i) -> __m128i {
        // SAFETY: the caller runs with PCLMULQDQ enabled.
        unsafe {
            _mm_xor_si128(
                _mm_clmulepi64_si128(acc, k, 0x11),
                _mm_clmulepi64_si128(acc, k, 0x00),
            )
        }
    }

    #[inline(always)]
    unsafe fn load_lanes(lanes: &[u128; 3]) -> [__m128i; 3] {
        // SAFETY: u128 and __m128i have the same size; reading through an
        // unaligned load has no alignment requirement.
        unsafe {
            [
                _mm_loadu_si128(lanes[0..].as_ptr().cast()),
                _mm_loadu_si128(lanes[1..].as_ptr().cast()),
                _mm_loadu_si128(lanes[2..].as_ptr().cast()),
            ]
        }
    }

    #[inline(always)]
    unsafe fn store_lanes(lanes: &mut [u128; 3], acc: [__m128i; 3]) {
        // SAFETY: each store writes exactly one u128 within the array.
        unsafe {
            _mm_storeu_si128(lanes[0..].as_mut_ptr().cast(), acc[0]);
            _mm_storeu_si128(lanes[1..].as_mut_ptr().cast(), acc[1]);
            _mm_storeu_si128(lanes[2..].as_mut_ptr().cast(), acc[2]);
        }
    }

    /// Folds `n` whole 48-byte payloads from `src`.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(super) unsafe fn fold_payloads(lanes: &mut [u128; 3], src: &[u8], n: usize) {
        assert!(src.len() >= n * PAYLOAD_LEN);
        // SAFETY: every load reads 16 bytes within src[..48n], checked above.
        unsafe {
            let k = consts(K_CELL);
            let m = bswap_mask();
            let mut a = load_lanes(lanes);
            let p = src.as_ptr();
            for c in 0..n {
                let s = p.add(c * PAYLOAD_LEN);
                for (j, acc) in a.iter_mut().enumerate() {
                    let b = _mm_loadu_si128(s.add(16 * j).cast());
                    *acc = _mm_xor_si128(fold(*acc, k), _mm_shuffle_epi8(b, m));
                }
            }
            store_lanes(lanes, a);
        }
    }

    /// See `Crc32State::build_cells`.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(super) unsafe fn build_cells(
        lanes: &mut [u128; 3],
        header: &[u8; HEADER_LEN],
        src: &[u8],
        cells: &mut [CellBytes],
    ) {
        assert!(src.len() >= cells.len() * PAYLOAD_LEN);
        // SAFETY: loads read 16-byte blocks inside src[..48n] (checked above);
        // stores write the 5 header bytes and three 16-byte blocks at offsets
        // 5, 21 and 37 of a 53-byte cell, all inside that cell.
        unsafe {
            let k = consts(K_CELL);
            let m = bswap_mask();
            let mut a = load_lanes(lanes);
            let p = src.as_ptr();
            for (c, cell) in cells.iter_mut().enumerate() {
                let s = p.add(c * PAYLOAD_LEN);
                let b0 = _mm_loadu_si128(s.cast());
                let b1 = _mm_loadu_si128(s.add(16).cast());
                let b2 = _mm_loadu_si128(s.add(32).cast());
                let d = cell.as_mut_ptr();
                core::ptr::copy_nonoverlapping(header.as_ptr(), d, HEADER_LEN);
                _mm_storeu_si128(d.add(HEADER_LEN).cast(), b0);
                _mm_storeu_si128(d.add(HEADER_LEN + 16).cast(), b1);
                _mm_storeu_si128(d.add(HEADER_LEN + 32).cast(), b2);
                a[0] = _mm_xor_si128(fold(a[0], k), _mm_shuffle_epi8(b0, m));
                a[1] = _mm_xor_si128(fold(a[1], k), _mm_shuffle_epi8(b1, m));
                a[2] = _mm_xor_si128(fold(a[2], k), _mm_shuffle_epi8(b2, m));
            }
            store_lanes(lanes, a);
        }
    }

    /// See `Crc32State::drain_run`.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(super) unsafe fn drain_run(
        lanes: &mut [u128; 3],
        cells: &[CellBytes],
        test: super::HeaderTest,
        dst: &mut [u8],
    ) -> (usize, bool) {
        assert!(dst.len() >= cells.len() * PAYLOAD_LEN);
        let mut done = cells.len();
        let mut ended = false;
        // SAFETY: loads read three 16-byte blocks at offsets 5, 21, 37 of a
        // 53-byte cell; stores write 16-byte blocks inside dst[..48n],
        // checked above.
        unsafe {
            let k = consts(K_CELL);
            let m = bswap_mask();
            let mut a = load_lanes(lanes);
            let p = dst.as_mut_ptr();
            for (c, cell) in cells.iter().enumerate() {
                let (ok, stop) = test.test(cell);
                if !ok {
                    done = c;
                    break;
                }
                let s = cell.as_ptr().add(HEADER_LEN);
                let b0 = _mm_loadu_si128(s.cast());
                let b1 = _mm_loadu_si128(s.add(16).cast());
                let b2 = _mm_loadu_si128(s.add(32).cast());
                let d = p.add(c * PAYLOAD_LEN);
                _mm_storeu_si128(d.cast(), b0);
                _mm_storeu_si128(d.add(16).cast(), b1);
                _mm_storeu_si128(d.add(32).cast(), b2);
                a[0] = _mm_xor_si128(fold(a[0], k), _mm_shuffle_epi8(b0, m));
                a[1] = _mm_xor_si128(fold(a[1], k), _mm_shuffle_epi8(b1, m));
                a[2] = _mm_xor_si128(fold(a[2], k), _mm_shuffle_epi8(b2, m));
                if stop {
                    done = c + 1;
                    ended = true;
                    break;
                }
            }
            store_lanes(lanes, a);
        }
        (done, ended)
    }

    /// `floor(x^64 / P)`, the Barrett constant (33 bits).
    const MU: u64 = {
        // Long division of x^64 by P, one quotient bit at a time.
        let mut rem: u128 = 1 << 64;
        let mut q: u64 = 0;
        let mut bit = 32;
        loop {
            if rem & (1u128 << (bit + 32)) != 0 {
                rem ^= (super::P as u128) << bit;
                q |= 1 << bit;
            }
            if bit == 0 {
                break;
            }
            bit -= 1;
        }
        q
    };
    const K_64: u64 = xpow(64) as u64;
    const K_96: u64 = xpow(96) as u64;

    /// The message fed, reduced modulo P: combine the lanes
    /// (`lane0·x^256 + lane1·x^128 + lane2`), then [`reduce`].
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(super) unsafe fn remainder(lanes: &[u128; 3]) -> u32 {
        // SAFETY: register arithmetic plus stores into locals.
        unsafe {
            let a = load_lanes(lanes);
            reduce(_mm_xor_si128(
                _mm_xor_si128(fold(a[0], consts(K_256)), fold(a[1], consts(K_128))),
                a[2],
            ))
        }
    }

    /// A 128-bit value reduced modulo P: fold 128 bits down to 64, then a
    /// Barrett reduction to 32, all in vector registers (the chain of four
    /// dependent multiplies is the latency every PDU waits for at its end).
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(super) unsafe fn reduce(v: __m128i) -> u32 {
        let k = _mm_set_epi64x(super::P as i64, K_64 as i64);
        let k96 = _mm_set_epi64x(0, K_96 as i64);
        let mu = _mm_set_epi64x(0, MU as i64);
        // v = H·x^64 + L with H = Hh·x^32 + Hl, so
        // v ≡ Hh·(x^96 mod P) + Hl·(x^64 mod P) + L: two products side by
        // side, each under 64 bits, rather than one after the other.
        let hh = _mm_srli_epi64(v, 32);
        let hl = _mm_and_si128(v, _mm_set_epi64x(0xFFFF_FFFF, 0));
        let c = _mm_xor_si128(
            _mm_xor_si128(
                _mm_clmulepi64_si128(hh, k96, 0x01),
                _mm_clmulepi64_si128(hl, k, 0x01),
            ),
            _mm_move_epi64(v),
        );
        // Barrett: q = floor(floor(c / x^32) · μ / x^32); c − q·P.
        let q = _mm_srli_si128(_mm_clmulepi64_si128(_mm_srli_epi64(c, 32), mu, 0x00), 4);
        let qp = _mm_clmulepi64_si128(q, k, 0x10);
        _mm_cvtsi128_si32(_mm_xor_si128(c, qp)) as u32
    }
}

#[cfg(target_arch = "x86_64")]
mod wide {
    //! The 512-bit kernels: four cells (192 bytes, twelve 16-byte blocks) a
    //! step. On CPUs where a carry-less multiply of any width issues once
    //! every two cycles (Zen 4), a 512-bit one does four 64-bit products in
    //! that time where PCLMULQDQ does one, so the fold stops being what
    //! limits the copy.
    //!
    //! The state is twelve 128-bit lanes, three 512-bit accumulators of
    //! four: lane `i` (accumulator `i / 4`, lane `i % 4` in it) holds
    //! blocks that stand `11 - i` blocks, plus whole cells, before the end
    //! of what was fed. A group of four cells folds every lane forward by
    //! 192 bytes and adds its twelve blocks; a shorter run of `r` cells
    //! folds by `48·r` bytes and adds its `3r` blocks in the last lanes, so
    //! that every lane keeps its distance from the end. Nothing is reduced
    //! until the remainder is asked for: then each lane is folded by its
    //! own distance, the lanes summed, and the Clmul kernel's Barrett step
    //! finishes.
    use super::{xpow, CellBytes, HeaderTest, CELL_LEN, HEADER_LEN, PAYLOAD_LEN, TRAILER_LEN};
    use core::arch::x86_64::*;

    /// Bytes in a group of four payloads.
    const GROUP: usize = 4 * PAYLOAD_LEN;

    /// Runs of at least this many cells (a whole PDU of 512 cells or more,
    /// or a run of as many cells built at once by the streaming segmenter
    /// or handed to the receiver at once) are built and drained with
    /// software prefetches where [`Tuning`] says so: their payloads and
    /// cells together (about 52 KB at 512 cells) are more than a
    /// first-level data cache holds, so their lines come from further out,
    /// and the fold's work leaves the out-of-order window too short to ask
    /// for them early enough. On the Intel Xeon a 65,535-byte
    /// PDU (1,366 cells, in the second-level cache) is segmented about 7 %
    /// and reassembled 25 % faster with them; runs that stay in the
    /// first-level cache are 3 to 11 % slower, and the two are even near
    /// 512 cells (see BENCHMARKS.md).
    pub(super) const PREFETCH_CELLS: usize = 512;
    /// How far ahead of a group its prefetches reach, in cells.
    const PREFETCH_AHEAD: usize = 16;

    /// How the wide kernels run on this CPU, beyond what its features
    /// allow: choices measured on one maker's CPUs and not the other's.
    #[derive(Clone, Copy, Debug)]
    pub(super) struct Tuning {
        /// The segmenter stores a cell with a plain 64-byte store, which
        /// runs 11 bytes into the next cell (whose own store then
        /// overwrites them), rather than a masked 53-byte one. On the Intel
        /// Xeon a masked store that crosses a cache line (most of them, at
        /// 53 bytes a cell) costs enough that plain stores segment a
        /// 9,180-byte PDU about 25 % faster. On the Zen 4 machine the
        /// masked store was faster than the plain ways session 11 measured
        /// (a plain load blended with the header and plain stores; the
        /// header and the payload stored apart), so other CPUs keep it.
        pub(super) plain_stores: bool,
        /// Long runs prefetch ([`PREFETCH_CELLS`]). Measured only on the
        /// Intel Xeon, so only Intel CPUs do it.
        pub(super) prefetch: bool,
    }

    impl Tuning {
        /// This CPU's: both on Intel CPUs, both off elsewhere.
        #[inline]
        pub(super) fn here() -> Tuning {
            static INTEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            let intel = *INTEL.get_or_init(|| {
                // Leaf 0: the vendor string, in EBX, EDX, ECX.
                let id = __cpuid(0);
                let vendor = [id.ebx, id.edx, id.ecx].map(u32::to_le_bytes);
                vendor.concat() == b"GenuineIntel"
            });
            Tuning {
                plain_stores: intel,
                prefetch: intel,
            }
        }
    }

    /// Asks for the lines of the group [`PREFETCH_AHEAD`] cells after the
    /// one at `read` (four cells' bytes, `read_stride` a cell) and after
    /// the one at `write` (`write_stride` a cell). Read prefetches
    /// (`prefetcht0`) for both: the write hint is `prefetchw`, whose target
    /// feature (`prfchw`) stable Rust does not enable. A prefetch is a
    /// hint: it neither faults nor counts as an access, so the addresses
    /// may lie past the data.
    #[inline(always)]
    fn prefetch_ahead(read: *const u8, read_stride: usize, write: *const u8, write_stride: usize) {
        let r = read.wrapping_add(PREFETCH_AHEAD * read_stride);
        let w = write.wrapping_add(PREFETCH_AHEAD * write_stride);
        // SAFETY: SSE, which `_mm_prefetch` needs, is part of x86-64; a
        // prefetch reads nothing the program sees, so any address will do.
        unsafe {
            for line in (0..4 * read_stride).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(r.wrapping_add(line).cast());
            }
            for line in (0..4 * write_stride).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add(line).cast());
            }
        }
    }

    /// `(x^(d+64) mod P, x^d mod P)` for a fold forward by `d` bits.
    const fn fold_consts(d: u32) -> (u64, u64) {
        (xpow(d + 64) as u64, xpow(d) as u64)
    }

    /// Folds every lane forward by `r` cells, `r` = 1 to 4 (index `r - 1`).
    const K_CELLS: [(u64, u64); 4] = [
        fold_consts(384),
        fold_consts(2 * 384),
        fold_consts(3 * 384),
        fold_consts(4 * 384),
    ];
    /// For the remainder: lane `i` stands `11 - i` blocks from the end.
    const K_BACK: [[(u64, u64); 4]; 3] = to_end(0);
    /// For a PDU's last `r + 1` cells (index `r`): lane `i` of the state
    /// before them folded straight to the end, `11 - i` blocks and those
    /// cells on (see `Acc::remainder_after`).
    const K_AFTER: [[[(u64, u64); 4]; 3]; 4] =
        [to_end(384), to_end(768), to_end(1152), to_end(1536)];

    /// Per lane `i`, the constants that fold it `11 - i` blocks and `extra`
    /// bits forward.
    const fn to_end(extra: u32) -> [[(u64, u64); 4]; 3] {
        let mut k = [[(0, 0); 4]; 3];
        let mut i = 0;
        while i < 12 {
            k[i / 4][i % 4] = fold_consts(128 * (11 - i as u32) + extra);
            i += 1;
        }
        k
    }
    /// Where the initial value goes: two blocks before the end, like the
    /// Clmul kernel's lane 0 of three.
    pub(super) const INIT_LANE: usize = 9;

    /// Per-lane constants as four (high, low) pairs, lane 0 first.
    #[inline(always)]
    unsafe fn consts4(k: [(u64, u64); 4]) -> __m512i {
        // SAFETY: plain register construction (AVX-512F is enabled by every
        // caller).
        unsafe {
            _mm512_set_epi64(
                k[3].0 as i64,
                k[3].1 as i64,
                k[2].0 as i64,
                k[2].1 as i64,
                k[1].0 as i64,
                k[1].1 as i64,
                k[0].0 as i64,
                k[0].1 as i64,
            )
        }
    }

    /// Each lane `H·x^64 + L` to `H·k.high + L·k.low`, plus `add`.
    #[inline(always)]
    unsafe fn fold_add(acc: __m512i, k: __m512i, add: __m512i) -> __m512i {
        // SAFETY: callers run with VPCLMULQDQ and AVX-512F enabled.
        unsafe {
            _mm512_ternarylogic_epi64(
                _mm512_clmulepi64_epi128(acc, k, 0x11),
                _mm512_clmulepi64_epi128(acc, k, 0x00),
                add,
                0x96,
            )
        }
    }

    /// The constants that fold every lane forward by `r` cells (1 to 4).
    #[inline(always)]
    unsafe fn fold_by(r: usize) -> __m512i {
        // SAFETY: register construction.
        unsafe { consts4([K_CELLS[r - 1]; 4]) }
    }

    /// Blocks in message byte order, each 16-byte lane byte-reversed into
    /// the integer the fold works on.
    #[inline(always)]
    unsafe fn reversed(z: [__m512i; 3]) -> [__m512i; 3] {
        // SAFETY: register arithmetic (AVX-512BW is enabled by every caller).
        unsafe {
            let m = _mm512_broadcast_i32x4(_mm_set_epi8(
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
            ));
            z.map(|b| _mm512_shuffle_epi8(b, m))
        }
    }

    /// The twelve lanes as three accumulators.
    #[derive(Clone, Copy)]
    struct Acc([__m512i; 3]);

    impl Acc {
        #[inline(always)]
        unsafe fn load(lanes: &[u128; 12]) -> Acc {
            // SAFETY: each load reads four u128s inside the array.
            unsafe {
                let p = lanes.as_ptr();
                Acc([
                    _mm512_loadu_si512(p.cast()),
                    _mm512_loadu_si512(p.add(4).cast()),
                    _mm512_loadu_si512(p.add(8).cast()),
                ])
            }
        }

        /// A CRC with nothing fed yet (what `Crc32State::new` stores).
        #[inline(always)]
        unsafe fn fresh() -> Acc {
            // SAFETY: register construction.
            unsafe {
                let z = _mm512_setzero_si512();
                // Lane INIT_LANE = 9 is lane 1 of the third register: its
                // low word is quadword 2 there.
                const _: () = assert!(INIT_LANE == 9);
                Acc([
                    z,
                    z,
                    _mm512_set_epi64(0, 0, 0, 0, 0, super::CLMUL_INIT as i64, 0, 0),
                ])
            }
        }

        #[inline(always)]
        unsafe fn store(self, lanes: &mut [u128; 12]) {
            // SAFETY: each store writes four u128s inside the array.
            unsafe {
                let p = lanes.as_mut_ptr();
                _mm512_storeu_si512(p.cast(), self.0[0]);
                _mm512_storeu_si512(p.add(4).cast(), self.0[1]);
                _mm512_storeu_si512(p.add(8).cast(), self.0[2]);
            }
        }

        /// Adds `r` cells whose `3r` blocks are the last of the twelve in
        /// `z` (the others zero), in message byte order; `k` is
        /// [`fold_by`]`(r)`.
        #[inline(always)]
        unsafe fn absorb(&mut self, k: __m512i, z: [__m512i; 3]) {
            // SAFETY: register arithmetic on the caller's enabled features.
            unsafe { self.absorb_reversed(k, reversed(z)) }
        }

        /// Adds four cells' payloads (one a register, zero for a cell
        /// before a shorter run; bytes beyond a payload are ignored), joined
        /// into the group's blocks and
        /// byte-reversed by the permutes in `join`: [`JOIN`] for payloads
        /// at the start of their registers, [`JOIN_CELLS`] for whole cells
        /// (payload after the header); `k` is [`fold_by`] of the cells there
        /// are.
        #[inline(always)]
        unsafe fn absorb_payloads(&mut self, k: __m512i, join: &[__m512i; 3], l: [__m512i; 4]) {
            // SAFETY: register arithmetic on the caller's enabled features
            // (VBMI for the permutes).
            unsafe {
                self.absorb_reversed(
                    k,
                    [
                        _mm512_permutex2var_epi8(l[0], join[0], l[1]),
                        _mm512_permutex2var_epi8(l[1], join[1], l[2]),
                        _mm512_permutex2var_epi8(l[2], join[2], l[3]),
                    ],
                );
            }
        }

        /// [`Acc::absorb`] for blocks already byte-reversed in each lane.
        #[inline(always)]
        unsafe fn absorb_reversed(&mut self, k: __m512i, z: [__m512i; 3]) {
            // SAFETY: register arithmetic on the caller's enabled features.
            unsafe {
                for (a, b) in self.0.iter_mut().zip(z) {
                    *a = fold_add(*a, k, b);
                }
            }
        }
    }

    /// Writes a fresh state over `lanes` with the three 64-byte stores the
    /// next `Acc::load` reads back whole.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmulqdq,ssse3")]
    pub(super) unsafe fn reset(lanes: &mut [u128; 12]) {
        // SAFETY: register construction and stores into an array we own.
        unsafe { Acc::fresh().store(lanes) }
    }

    /// The message fed, modulo P.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmulqdq,ssse3")]
    pub(super) unsafe fn remainder(lanes: &[u128; 12]) -> u32 {
        // SAFETY: a load of an array we own, then register arithmetic.
        unsafe { Acc::load(lanes).remainder() }
    }

    impl Acc {
        /// What [`Acc::remainder`] would give after
        /// `absorb(fold_by(r), z)`, with the state and `z` folded to the end
        /// side by side rather than one after the other (shorter by a
        /// multiply the PDU's end waits for).
        #[inline(always)]
        unsafe fn remainder_after(self, r: usize, z: [__m512i; 3]) -> u32 {
            // SAFETY: register arithmetic on the caller's features.
            unsafe {
                let zero = _mm512_setzero_si512();
                let mut sum = zero;
                for (i, zr) in reversed(z).into_iter().enumerate() {
                    let t = fold_add(zr, consts4(K_BACK[i]), zero);
                    let t = fold_add(self.0[i], consts4(K_AFTER[r - 1][i]), t);
                    sum = _mm512_xor_si512(sum, t);
                }
                finish(sum)
            }
        }

        /// The message the lanes hold, modulo P: each lane folded by its
        /// distance from the end, the lanes summed, then the Clmul kernel's
        /// reduction.
        #[inline(always)]
        unsafe fn remainder(self) -> u32 {
            // SAFETY: register arithmetic; the caller runs with this
            // kernel's features, of which the Clmul kernel's are a subset.
            unsafe {
                let acc = self;
                let mut sum = _mm512_setzero_si512();
                for (a, k) in acc.0.into_iter().zip(K_BACK) {
                    sum = fold_add(a, consts4(k), sum);
                }
                finish(sum)
            }
        }
    }

    /// Four lanes that each stand at the end, summed and reduced modulo P
    /// (the Clmul kernel's reduction).
    #[inline(always)]
    unsafe fn finish(sum: __m512i) -> u32 {
        // SAFETY: register arithmetic; the callers' features include the
        // Clmul kernel's.
        unsafe {
            let v = _mm_xor_si128(
                _mm_xor_si128(
                    _mm512_extracti32x4_epi32(sum, 0),
                    _mm512_extracti32x4_epi32(sum, 1),
                ),
                _mm_xor_si128(
                    _mm512_extracti32x4_epi32(sum, 2),
                    _mm512_extracti32x4_epi32(sum, 3),
                ),
            );
            super::clmul::reduce(v)
        }
    }

    /// See `Crc32State::build_pdu`.
    ///
    /// The PDU's last four cells (all of them in a shorter PDU) are built
    /// in registers: masked loads of the SDU's last bytes, right-aligned in
    /// a 192-byte frame so that the trailer is always the last word of the
    /// third register; each cell's payload is shifted down to the bottom of
    /// a register and stored with a 32- and a 16-byte store behind the
    /// header word. The cells before them come straight from the SDU.
    /// Nothing goes through a stack copy that a wide load would have to
    /// wait for. `tuning` as in [`build_run`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmulqdq,ssse3")]
    pub(super) unsafe fn build_pdu(
        header: &[u8; HEADER_LEN],
        header_end: &[u8; HEADER_LEN],
        sdu: &[u8],
        trailer: &[u8; TRAILER_LEN],
        cells: &mut [CellBytes],
        tuning: Tuning,
    ) {
        let last = cells.len().min(4);
        let before = cells.len() - last;
        // The frame's first payload byte, and the SDU bytes after the first
        // `before` cells' payloads (at most 48·last − 8, as the caller
        // asserted the cell count: they end by frame byte 184, before the
        // trailer's word).
        let lo = GROUP - PAYLOAD_LEN * last;
        let data = sdu.len() - PAYLOAD_LEN * before;
        // SAFETY: the features are this function's. `build_run` reads
        // sdu[..48·before], inside the SDU, and writes cells[..before] (and
        // the first 11 bytes of the cell after, which the frame's stores
        // below write again). Frame byte f is SDU byte 48·before - lo + f;
        // the loads take only frame bytes lo..lo+data, i.e. SDU bytes
        // 48·before.., and masked-off bytes are not read (so
        // the addresses before the SDU that a short PDU's frame names are
        // never touched). Each cell's stores write its bytes 0..8, 5..37
        // and 37..53, inside its own 53 bytes.
        unsafe {
            let mut acc = Acc::fresh();
            let h = header_word(header);
            build_run(&mut acc, h, sdu.as_ptr(), cells, before, tuning);
            let frame = &mut cells[before..];
            let base = sdu
                .as_ptr()
                .wrapping_add(PAYLOAD_LEN * before)
                .wrapping_sub(lo);
            let mut z = [_mm512_setzero_si512(); 3];
            for (k, v) in z.iter_mut().enumerate() {
                let mask = byte_mask(lo, lo + data, 64 * k);
                *v = _mm512_maskz_loadu_epi8(mask, base.wrapping_add(64 * k).cast());
            }
            z[2] = _mm512_mask_set1_epi64(z[2], 0x80, u64::from_le_bytes(*trailer) as i64);
            // Slot j of the frame is the payload at frame bytes 48j..48j+48,
            // shifted to the bottom of a register.
            let slots = [
                z[0],
                _mm512_alignr_epi32::<12>(z[1], z[0]),
                _mm512_alignr_epi32::<8>(z[2], z[1]),
                _mm512_alignr_epi32::<4>(z[2], z[2]),
            ];
            for (cell, v) in frame.iter_mut().zip(&slots[4 - last..]) {
                let q = cell.as_mut_ptr();
                q.cast::<u64>().write_unaligned(h);
                _mm256_storeu_si256(q.add(HEADER_LEN).cast(), _mm512_castsi512_si256(*v));
                _mm_storeu_si128(
                    q.add(HEADER_LEN + 32).cast(),
                    _mm512_extracti32x4_epi32::<2>(*v),
                );
            }
            let field = acc.remainder_after(last, z);
            let last = frame.last_mut().expect("a PDU has a tail cell");
            super::end_cell(last, header_end, field);
        }
    }

    /// The bits of a 64-byte register starting at byte `at` that hold bytes
    /// `from..to` of a longer sequence.
    #[inline(always)]
    fn byte_mask(from: usize, to: usize, at: usize) -> u64 {
        // The bits for bytes `from..to` of the sequence, each bound taken
        // relative to `at` and clamped to 0..=64.
        let below = |n: usize| {
            let n = n.saturating_sub(at).min(64) as u32;
            u64::MAX.checked_shr(64 - n).unwrap_or(0)
        };
        below(to) & !below(from)
    }

    /// Builds the first `n` of `cells` from the payloads at `s` (a shorter
    /// run of the first `n % 4`, then whole groups), header `h` on each,
    /// folding them into `acc`. With `tuning.prefetch`, when `cells` (the
    /// PDU, or the run) has [`PREFETCH_CELLS`] or more, each group asks for
    /// the lines of one further on ([`prefetch_ahead`]). With
    /// `tuning.plain_stores`, a group followed by another cell of `cells`
    /// is stored with plain stores that write that cell's first 11 bytes
    /// too: the caller writes them again, with that cell.
    #[inline(always)]
    unsafe fn build_run(
        acc: &mut Acc,
        h: u64,
        s: *const u8,
        cells: &mut [CellBytes],
        n: usize,
        tuning: Tuning,
    ) {
        let len = cells.len();
        assert!(n <= len);
        let prefetch = tuning.prefetch && len >= PREFETCH_CELLS;
        // SAFETY: the caller guarantees s[..48n] is readable and n is at
        // most cells.len(), and runs with this module's features. The
        // lead's `contiguous` and `scatter` read its payloads and write its
        // cells. In a group, cell i's load names the address 5 bytes before
        // payload i but its mask (`CELL_PAYLOAD`) touches only that
        // payload's 48 bytes, inside the SDU; a masked store (`WHOLE_CELL`)
        // writes that cell's 53 bytes, a plain one its 53 and the next
        // cell's first 11, and there is a next cell (first + 4 < len); the
        // pointers come from the whole of `cells`.
        unsafe {
            let lead = n % 4;
            if lead > 0 {
                acc.absorb(fold_by(lead), contiguous(s, lead));
                scatter(h, s, &mut cells[..lead]);
            }
            let s = s.add(lead * PAYLOAD_LEN);
            let k4 = fold_by(4);
            let hv = _mm512_set1_epi64(h as i64);
            let join = JOIN_CELLS.map(|ix| _mm512_loadu_si512(ix.as_ptr().cast()));
            let base = cells.as_mut_ptr();
            for g in 0..n / 4 {
                let first = lead + 4 * g;
                let out = base.add(first).cast::<u8>();
                let gs = s.add(g * GROUP);
                if prefetch {
                    prefetch_ahead(gs, PAYLOAD_LEN, out, CELL_LEN);
                }
                let l = [0, 1, 2, 3].map(|i| {
                    _mm512_mask_loadu_epi8(
                        hv,
                        CELL_PAYLOAD,
                        gs.add(i * PAYLOAD_LEN).wrapping_sub(HEADER_LEN).cast(),
                    )
                });
                acc.absorb_payloads(k4, &join, l);
                if tuning.plain_stores && first + 4 < len {
                    for (i, v) in l.into_iter().enumerate() {
                        _mm512_storeu_si512(out.add(i * CELL_LEN).cast(), v);
                    }
                } else {
                    for (i, v) in l.into_iter().enumerate() {
                        _mm512_mask_storeu_epi8(out.add(i * CELL_LEN).cast(), WHOLE_CELL, v);
                    }
                }
            }
        }
    }

    /// A cell header as the low five bytes of a word.
    #[inline(always)]
    fn header_word(header: &[u8; HEADER_LEN]) -> u64 {
        let mut h = [0u8; 8];
        h[..HEADER_LEN].copy_from_slice(header);
        u64::from_ne_bytes(h)
    }

    /// Writes `cells.len()` cells: header `h` (see `header_word`) and the
    /// payloads at `s` in order. Each cell is one masked load, which takes
    /// the payload from the SDU and keeps the header from a register, and
    /// one masked store of its 53 bytes: on Zen 4 faster than moving the
    /// header and the payload's two pieces separately.
    #[inline(always)]
    unsafe fn scatter(h: u64, s: *const u8, cells: &mut [CellBytes]) {
        // SAFETY: the caller guarantees s[..48·cells.len()] is readable.
        // Cell i's load names the address 5 bytes before payload i but
        // touches only the bytes its mask selects (masked-off bytes are not
        // accessed): s[48i..48i + 48]. Its store writes the 53 bytes of
        // that cell.
        unsafe {
            let hv = _mm512_set1_epi64(h as i64);
            for (i, cell) in cells.iter_mut().enumerate() {
                let p = s.add(i * PAYLOAD_LEN).wrapping_sub(HEADER_LEN);
                let v = _mm512_mask_loadu_epi8(hv, CELL_PAYLOAD, p.cast());
                _mm512_mask_storeu_epi8(cell.as_mut_ptr().cast(), WHOLE_CELL, v);
            }
        }
    }

    /// The blocks of `r` contiguous payloads at `s` (1 to 4), as the last
    /// `3r` of twelve.
    #[inline(always)]
    unsafe fn contiguous(s: *const u8, r: usize) -> [__m512i; 3] {
        // SAFETY: the caller guarantees s[..48r] is readable. Block `b` of
        // the twelve starts 16·(b − (12 − 3r)) bytes from `s`; a load takes
        // only the bytes at or after `s` and before s + 48r (masked-off
        // bytes are never accessed, so the address before `s` that a
        // partial group's first load names is not read).
        unsafe {
            if r == 4 {
                return [
                    _mm512_loadu_si512(s.cast()),
                    _mm512_loadu_si512(s.add(64).cast()),
                    _mm512_loadu_si512(s.add(128).cast()),
                ];
            }
            let lead = GROUP - PAYLOAD_LEN * r;
            let mut z = [_mm512_setzero_si512(); 3];
            for (k, v) in z.iter_mut().enumerate() {
                let from = 64 * k as isize - lead as isize;
                let lo = (-from).clamp(0, 64) as u32;
                let hi = (PAYLOAD_LEN as isize * r as isize - from).clamp(0, 64) as u32;
                if hi > lo {
                    let mask = (u64::MAX >> (64 - (hi - lo))) << lo;
                    *v = _mm512_maskz_loadu_epi8(mask, s.wrapping_offset(from).cast());
                }
            }
            z
        }
    }

    /// Folds `n` whole 48-byte payloads from `src`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmulqdq,ssse3")]
    pub(super) unsafe fn fold_payloads(lanes: &mut [u128; 12], src: &[u8], n: usize) {
        assert!(src.len() >= n * PAYLOAD_LEN);
        // SAFETY: every group read is inside src[..48n], checked above.
        unsafe {
            let mut acc = Acc::load(lanes);
            let k = fold_by(4);
            let groups = n / 4;
            for g in 0..groups {
                acc.absorb(k, contiguous(src.as_ptr().add(g * GROUP), 4));
            }
            let r = n - 4 * groups;
            if r > 0 {
                acc.absorb(fold_by(r), contiguous(src.as_ptr().add(groups * GROUP), r));
            }
            acc.store(lanes);
        }
    }

    /// See `Crc32State::build_cells`; `tuning` as in [`build_run`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmulqdq,ssse3")]
    pub(super) unsafe fn build_cells(
        lanes: &mut [u128; 12],
        header: &[u8; HEADER_LEN],
        src: &[u8],
        cells: &mut [CellBytes],
        tuning: Tuning,
    ) {
        let n = cells.len();
        assert!(src.len() >= n * PAYLOAD_LEN);
        // SAFETY: `build_run` reads src[..48n] (checked above).
        unsafe {
            let mut acc = Acc::load(lanes);
            build_run(
                &mut acc,
                header_word(header),
                src.as_ptr(),
                cells,
                n,
                tuning,
            );
            acc.store(lanes);
        }
    }

    /// Byte indices for `_mm512_permutex2var_epi8` that join the 48-byte
    /// payloads of four cells (one a register, in `a` then `b`; only a
    /// payload's own 48 bytes are read, whatever lies above them) into
    /// the group's three 64-byte blocks, each 16-byte lane byte-reversed
    /// for the fold: block `i` takes `take` bytes from `a` starting at
    /// `from`, then the rest from `b` starting at 0. Joining and reversing
    /// in one permute saves a shuffle per block.
    const fn join(from: u8, take: u8) -> [u8; 64] {
        join_at(0, from, take)
    }
    /// As [`join`] for payloads that start `at` bytes into their registers.
    const fn join_at(at: u8, from: u8, take: u8) -> [u8; 64] {
        let mut ix = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            // Output byte i takes message byte m of the block.
            let m = i / 16 * 16 + 15 - i % 16;
            ix[i as usize] = if m < take {
                at + from + m
            } else {
                64 + at + m - take
            };
            i += 1;
        }
        ix
    }
    const JOIN: [[u8; 64]; 3] = [join(0, 48), join(16, 32), join(32, 16)];
    /// As [`JOIN`] for whole cells in registers (payload at bytes 5 to 52).
    const JOIN_CELLS: [[u8; 64]; 3] = [
        join_at(HEADER_LEN as u8, 0, 48),
        join_at(HEADER_LEN as u8, 16, 32),
        join_at(HEADER_LEN as u8, 32, 16),
    ];
    /// Bytes 5 to 52 of a register: a cell's payload.
    const CELL_PAYLOAD: u64 = ((1 << CELL_LEN) - 1) & !((1 << HEADER_LEN) - 1);
    /// Bytes 0 to 52: a whole cell.
    const WHOLE_CELL: u64 = (1 << CELL_LEN) - 1;

    /// The 48 payload bytes of a cell, zero above: a 32- and a 16-byte
    /// load that end with the cell. (A masked load's window would reach 16
    /// bytes past it, and on Zen 4 a masked access whose window touches a
    /// page that is not present costs 90-200 ns.) Callers run with
    /// AVX-512F.
    #[inline(always)]
    unsafe fn payload(cell: &CellBytes) -> __m512i {
        // SAFETY: reads bytes 5..37 and 37..53 of the cell.
        unsafe {
            let p = cell.as_ptr().add(HEADER_LEN);
            let lo = _mm256_loadu_si256(p.cast());
            let hi = _mm_loadu_si128(p.add(32).cast());
            _mm512_inserti32x4::<2>(_mm512_zextsi256_si512(lo), hi)
        }
    }

    /// Stores the low 48 bytes of `v` at `q` with a 32- and a 16-byte
    /// store, which write nothing past them.
    ///
    /// # Safety
    ///
    /// `q..q + 48` must be writable, and the CPU must have AVX-512F.
    #[inline(always)]
    unsafe fn store_payload(q: *mut u8, v: __m512i) {
        // SAFETY: writes q..q + 32 and q + 32..q + 48, as the caller allows.
        unsafe {
            _mm256_storeu_si256(q.cast(), _mm512_castsi512_si256(v));
            _mm_storeu_si128(q.add(32).cast(), _mm512_extracti32x4_epi32::<2>(v));
        }
    }

    /// Cell `I` (0 to 2) of a group: its 48 payload bytes, then the first
    /// 16 bytes of cell `I + 1`, with one plain load (on Zen 4 cheaper than
    /// a masked one).
    #[inline(always)]
    unsafe fn payload_on<const I: usize>(g: &[CellBytes; 4]) -> __m512i {
        const { assert!(I < 3, "the last cell of a group has none after it") };
        // SAFETY: reads the 64 bytes from byte 5 of cell I, which end 16
        // bytes into cell I + 1 (at most cell 3): inside `g`, from whose
        // pointer the read derives. Callers run with AVX-512F.
        unsafe {
            _mm512_loadu_si512(
                g.as_ptr()
                    .cast::<u8>()
                    .add(I * CELL_LEN + HEADER_LEN)
                    .cast(),
            )
        }
    }

    /// See `Crc32State::drain_run`; with `prefetch`, a run of
    /// [`PREFETCH_CELLS`] or more cells prefetches as [`build_run`] does.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmulqdq,ssse3")]
    pub(super) unsafe fn drain_run(
        lanes: &mut [u128; 12],
        cells: &[CellBytes],
        test: HeaderTest,
        dst: &mut [u8],
        prefetch: bool,
    ) -> (usize, bool) {
        // Two copies of the loop, so that the one without prefetches is
        // the loop as it was (a test inside it cost short runs 4-8 % here),
        // the other in a function of its own.
        // SAFETY: this function's features are `drain`'s and
        // `drain_prefetching`'s.
        unsafe {
            if prefetch && cells.len() >= PREFETCH_CELLS {
                drain_prefetching(lanes, cells, test, dst)
            } else {
                drain::<false>(lanes, cells, test, dst)
            }
        }
    }

    /// [`drain_run`] with prefetches.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,vpclmulqdq,pclmulqdq,ssse3")]
    #[inline(never)]
    unsafe fn drain_prefetching(
        lanes: &mut [u128; 12],
        cells: &[CellBytes],
        test: HeaderTest,
        dst: &mut [u8],
    ) -> (usize, bool) {
        // SAFETY: this function's features are `drain`'s.
        unsafe { drain::<true>(lanes, cells, test, dst) }
    }

    /// [`drain_run`], prefetching or not.
    #[inline(always)]
    unsafe fn drain<const PREFETCH: bool>(
        lanes: &mut [u128; 12],
        cells: &[CellBytes],
        test: HeaderTest,
        dst: &mut [u8],
    ) -> (usize, bool) {
        assert!(dst.len() >= cells.len() * PAYLOAD_LEN);
        let mut c = 0;
        let mut ended = false;
        // SAFETY: `payload` reads inside one cell of `cells` (and
        // `payload_on` inside its group). A whole group of cells
        // c..c + 4 is stored as four 64-byte stores at 48-byte steps from
        // dst[48c]: the first three each run 16 bytes into the next slot,
        // which the next store overwrites; the fourth runs into
        // dst[48(c + 4)..48(c + 4) + 16] only when cell c + 4 exists (so
        // that slot is inside dst, asserted above), and an exact 48-byte
        // store (`store_payload`) otherwise. A shorter run's r cells
        // are stored 48 bytes each to dst[48c..48(c + r)]. All of it lies
        // inside dst[..48·cells.len()], since c + 4, or c + r, is at most
        // cells.len().
        unsafe {
            let mut acc = Acc::load(lanes);
            let k4 = fold_by(4);
            let join = JOIN.map(|ix| _mm512_loadu_si512(ix.as_ptr().cast()));
            let p = dst.as_mut_ptr();
            let (groups, _) = cells.as_chunks::<4>();
            for g in groups {
                let (run, last_ends) = test.group(g);
                if !run {
                    break;
                }
                // Plain loads for the first three (their upper 16 bytes are
                // the next cell's, overwritten in `dst` by its own store),
                // an exact one for the last, whose upper 16 bytes are zero
                // (what lands in the next slot, if there is one).
                let l = [
                    payload_on::<0>(g),
                    payload_on::<1>(g),
                    payload_on::<2>(g),
                    payload(&g[3]),
                ];
                let q = p.add(c * PAYLOAD_LEN);
                if PREFETCH {
                    prefetch_ahead(g.as_ptr().cast(), CELL_LEN, q, PAYLOAD_LEN);
                }
                for (i, v) in l[..3].iter().enumerate() {
                    _mm512_storeu_si512(q.add(PAYLOAD_LEN * i).cast(), *v);
                }
                let last = q.add(3 * PAYLOAD_LEN);
                if c + 4 < cells.len() {
                    _mm512_storeu_si512(last.cast(), l[3]);
                } else {
                    store_payload(last, l[3]);
                }
                acc.absorb_payloads(k4, &join, l);
                c += 4;
                if last_ends {
                    ended = true;
                    break;
                }
            }
            if !ended {
                let g = &cells[c..cells.len().min(c + 4)];
                // The run ends inside these cells: take the ones before a
                // foreign header, up to and including an ending one.
                let mut r = 0;
                for cell in g {
                    let (ok, stop) = test.test(cell);
                    if !ok {
                        break;
                    }
                    r += 1;
                    if stop {
                        ended = true;
                        break;
                    }
                }
                if r > 0 {
                    // The r payloads as the last 3r blocks of twelve:
                    // shifted right by 4 − r cells.
                    // Position j holds cell j − (4 − r), zero before the
                    // first; each position is its own register, so none is
                    // picked by a variable index.
                    let lead = 4 - r;
                    let l: [__m512i; 4] = core::array::from_fn(|j| {
                        if j < lead {
                            return _mm512_setzero_si512();
                        }
                        let i = j - lead;
                        let v = payload(&g[i]);
                        store_payload(p.add((c + i) * PAYLOAD_LEN), v);
                        v
                    });
                    acc.absorb_payloads(fold_by(r), &join, l);
                    c += r;
                }
            }
            acc.store(lanes);
        }
        (c, ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_wire::crc::{crc32, CRC32_RESIDUE};

    fn data(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(167).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn inverse_power_undoes_power() {
        for n in [1, 32, 96, 288, 384] {
            let v = 0x1234_5678;
            let mut w = div_xpow(v, n) as u64;
            for _ in 0..n {
                w <<= 1;
                if w & (1 << 32) != 0 {
                    w ^= P;
                }
            }
            assert_eq!(w as u32, v);
        }
    }

    #[test]
    fn every_kernel_matches_the_reference_crc() {
        for kernel in Kernel::available() {
            for cells in [1usize, 2, 3, 7, 40] {
                let src = data(cells * 48, cells as u8);
                let mut s = Crc32State::new(kernel);
                let mut out = vec![[0u8; 53]; cells];
                s.build_cells(&[1, 2, 3, 4, 5], &src, &mut out);
                // Register = !crc32 for a bitwise CRC over the same bytes.
                assert_eq!(s.register(), !crc32(&src), "{kernel:?} {cells}");
                let mut back = vec![0u8; cells * 48];
                let mut r = Crc32State::new(kernel);
                r.drain_cells(&out, &mut back);
                assert_eq!(back, src);
                assert_eq!(r.register(), s.register());
                let mut f = Crc32State::new(kernel);
                for c in src.chunks_exact(48) {
                    f.feed(c.try_into().unwrap());
                }
                assert_eq!(f.register(), s.register());
                let mut all = Crc32State::new(kernel);
                all.feed_payloads(&src);
                assert_eq!(all.register(), s.register(), "{kernel:?} {cells}");
            }
        }
    }

    /// The wide kernels under every [`wide::Tuning`] (which one a CPU gets
    /// depends on its maker): the segmenter's two ways of storing cells
    /// (masked, and plain stores that run into the next cell) build the
    /// same cells as the portable kernel, for whole PDUs and for runs of
    /// cells, below and at the prefetch threshold, and write nothing past
    /// the cells they are given; the receiver reads every run back, and
    /// writes nothing past its buffer.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_wide_kernels_build_and_read_the_same_cells_however_tuned() {
        if !Kernel::Vpclmul.supported() {
            return;
        }
        let tunings = [false, true].map(|plain_stores| {
            [false, true].map(|prefetch| wide::Tuning {
                plain_stores,
                prefetch,
            })
        });
        let (header, end) = ([1, 2, 3, 4, 5], [1, 2, 3, 4, 7]);
        // 511 and 512 cells at 24,520 and 24,568 bytes.
        for len in [0, 40, 41, 88, 89, 200, 1500, 9180, 24_520, 24_568, 65_535] {
            let sdu = data(len, 9);
            let n = (len + TRAILER_LEN).div_ceil(PAYLOAD_LEN);
            let trailer = [0, 0, (len >> 8) as u8, len as u8, 0, 0, 0, 0];
            let mut want = vec![[0u8; CELL_LEN]; n];
            Crc32State::build_pdu(Kernel::Portable, &header, &end, &sdu, &trailer, &mut want);
            for tuning in tunings.iter().flatten() {
                // One cell more than the PDU's, which must stay as it is.
                let mut got = vec![[0xA5u8; CELL_LEN]; n + 1];
                // SAFETY: the CPU runs the kernel (checked above), and there
                // is a cell for each payload of the PDU.
                unsafe { wide::build_pdu(&header, &end, &sdu, &trailer, &mut got[..n], *tuning) };
                assert_eq!(got[..n], want, "{len} bytes, {tuning:?}");
                assert_eq!(got[n], [0xA5; CELL_LEN], "{len} bytes, {tuning:?}");
            }
        }
        for cells in [1, 5, 8, 9, 511, 512, 600] {
            let src = data(cells * PAYLOAD_LEN, 3);
            let mut want = vec![[0u8; CELL_LEN]; cells];
            let mut reference = Crc32State::new(Kernel::Portable);
            reference.build_cells(&header, &src, &mut want);
            for tuning in tunings.iter().flatten() {
                let mut got = vec![[0xA5u8; CELL_LEN]; cells + 1];
                let mut st = Crc32State::new(Kernel::Vpclmul);
                // SAFETY: as above; `src` fills the cells.
                unsafe {
                    wide::build_cells(&mut st.lanes, &header, &src, &mut got[..cells], *tuning)
                };
                assert_eq!(got[..cells], want, "{cells} cells, {tuning:?}");
                assert_eq!(got[cells], [0xA5; CELL_LEN], "{cells} cells, {tuning:?}");
                assert_eq!(st.register(), reference.register());
                let mut back = vec![0x5Au8; (cells + 1) * PAYLOAD_LEN];
                let mut rx = Crc32State::new(Kernel::Vpclmul);
                let whole = cells * PAYLOAD_LEN;
                let test = HeaderTest::new(None, None);
                // SAFETY: the CPU runs the kernel; the buffer holds the
                // cells' payloads.
                let (took, ended) = unsafe {
                    wide::drain_run(
                        &mut rx.lanes,
                        &want,
                        test,
                        &mut back[..whole],
                        tuning.prefetch,
                    )
                };
                assert_eq!((took, ended), (cells, false));
                assert_eq!(back[..whole], src);
                assert!(
                    back[whole..].iter().all(|&b| b == 0x5A),
                    "{cells} cells, {tuning:?}"
                );
                assert_eq!(rx.register(), reference.register());
            }
            // And through the public path, which asks the CPU's tuning.
            let mut back = vec![0u8; cells * PAYLOAD_LEN];
            let mut rx = Crc32State::new(Kernel::Vpclmul);
            rx.drain_cells(&want, &mut back);
            assert_eq!(back, src);
            assert_eq!(rx.register(), reference.register());
        }
    }

    /// Runs that stop early (a foreign header or an end-of-PDU cell at every
    /// position, inside and across groups of four) consume the same cells,
    /// copy the same bytes and leave the same CRC on every kernel.
    #[test]
    fn every_kernel_stops_a_run_where_the_portable_one_does() {
        let header = |auu: bool, vci: u8| {
            let mut h = [0u8, 0, vci, 0, 0];
            if auu {
                h[3] |= AUU as u8;
            }
            h
        };
        let key = u32::from_be_bytes([0, 0, 7, 0]);
        let pack = |h: [u8; 5]| {
            aurora_wire::hec::pack_header(&{
                let mut c = [0u8; 53];
                c[..5].copy_from_slice(&h);
                c
            })
        };
        // The two valid headers of the run's VC: a middle cell and an end.
        let valid = [pack(header(false, 7)), pack(header(true, 7))];
        for cells in [1usize, 4, 5, 8, 13] {
            for odd in 0..cells {
                // 0: an end cell; 1: another VC; 2: the run's header with a
                // different fifth (HEC) byte; 3: the run's header with EFCI.
                for kind in 0..4 {
                    for (checked, spare) in [(false, 0), (true, 0), (false, 40), (true, 40)] {
                        let src = data(cells * 48, odd as u8);
                        let mut out = vec![[0u8; 53]; cells];
                        Crc32State::new(Kernel::Portable).build_cells(
                            &header(false, 7),
                            &src,
                            &mut out,
                        );
                        out[odd][..5].copy_from_slice(&match kind {
                            0 => header(true, 7),
                            1 => header(false, 9),
                            2 => [0, 0, 7, 0, 0x55],
                            _ => [0, 0, 7, 0x04, 0],
                        });
                        let v = checked.then_some(valid);
                        let results: Vec<_> = Kernel::available()
                            .into_iter()
                            .map(|k| {
                                let mut r = Crc32State::new(k);
                                // Something fed before, so the carried-in state counts.
                                r.feed(&[0x5A; 48]);
                                // Room for exactly the cells, or more, as
                                // a reassembly buffer usually has.
                                let mut dst = vec![0xEE; cells * 48 + spare];
                                let got = r.drain_run(&out, Some(key), v, &mut dst);
                                // Past the slots filled, at most 16 bytes
                                // zeroed and the rest untouched.
                                let past = dst.split_off(got.0 * 48);
                                for (i, &b) in past.iter().enumerate() {
                                    assert!(b == 0xEE || (b == 0 && i < 16), "{k:?} byte {i}");
                                }
                                (got, dst, r.register())
                            })
                            .collect();
                        let want = match (kind, checked) {
                            (0, _) => (odd + 1, true),
                            (1, _) | (_, true) => (odd, false),
                            _ => (cells, false),
                        };
                        let what = format!(
                            "cells {cells} at {odd} kind {kind} checked {checked} spare {spare}"
                        );
                        for (k, res) in Kernel::available().into_iter().zip(&results) {
                            assert_eq!(res.0, want, "{k:?} {what}");
                            assert_eq!(res, &results[0], "{k:?} {what}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn zeroed_tail_field_and_residue() {
        for kernel in Kernel::available() {
            let mut pdu = data(96, 9);
            pdu[92..].fill(0);
            let mut s = Crc32State::new(kernel);
            s.feed(pdu[..48].try_into().unwrap());
            s.feed(pdu[48..].try_into().unwrap());
            let field = s.field_for_zeroed_tail();
            assert_eq!(field, crc32(&pdu[..92]));
            pdu[92..].copy_from_slice(&field.to_be_bytes());
            let mut r = Crc32State::new(kernel);
            r.feed(pdu[..48].try_into().unwrap());
            r.feed(pdu[48..].try_into().unwrap());
            assert_eq!(r.register(), CRC32_RESIDUE);
            assert!(r.is_valid_pdu());
            pdu[50] ^= 4;
            let mut bad = Crc32State::new(kernel);
            bad.feed(pdu[..48].try_into().unwrap());
            bad.feed(pdu[48..].try_into().unwrap());
            assert!(!bad.is_valid_pdu());
        }
    }
}
