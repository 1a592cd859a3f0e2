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
//! the lanes are combined (`lane0·x^256 + lane1·x^128 + lane2`) and reduced
//! to 32 bits with a table CRC of 16 bytes. The CRC's initial value of all
//! ones is folded in by starting lane 0 at `!0·x^96·x^-384 mod P`, so that one
//! fold later it stands exactly where XORing the first 32 message bits with
//! ones would have put it.
//!
//! A portable kernel (a table-driven CRC updated once per cell, no call
//! overhead) is used where PCLMULQDQ is missing, and is the reference the
//! tests compare the fast kernel against.

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

/// Which implementation folds the CRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Table-driven CRC, one update per cell. Runs anywhere.
    Portable,
    /// PCLMULQDQ folding fused with the copy (x86-64 with PCLMULQDQ and SSSE3).
    Clmul,
}

impl Kernel {
    /// The fastest kernel this CPU supports.
    pub fn best() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("pclmulqdq")
                && std::arch::is_x86_feature_detected!("ssse3")
            {
                return Kernel::Clmul;
            }
        }
        Kernel::Portable
    }

    /// Every kernel this CPU can run (for tests and benchmarks).
    pub fn available() -> Vec<Kernel> {
        let mut v = vec![Kernel::Portable];
        if Kernel::best() == Kernel::Clmul {
            v.push(Kernel::Clmul);
        }
        v
    }
}

/// A CRC-32/BZIP2 over whole cell payloads fed so far.
#[derive(Clone, Copy, Debug)]
pub struct Crc32State {
    kernel: Kernel,
    /// Clmul: the three lanes. Portable: `lanes[0]` is the register.
    lanes: [u128; 3],
}

impl Crc32State {
    /// A CRC with nothing fed yet. Asking for a kernel this CPU cannot run
    /// gives the portable one.
    pub fn new(kernel: Kernel) -> Self {
        let kernel = match kernel {
            Kernel::Clmul if Kernel::best() != Kernel::Clmul => Kernel::Portable,
            k => k,
        };
        let lanes = match kernel {
            Kernel::Portable => [INIT as u128, 0, 0],
            Kernel::Clmul => [CLMUL_INIT as u128, 0, 0],
        };
        Crc32State { kernel, lanes }
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
                    unsafe { clmul::remainder(&self.lanes) }
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("the Clmul kernel exists only on x86-64")
            }
        }
    }

    /// The CRC register after everything fed (before the final inversion), as
    /// a plain bitwise CRC-32/BZIP2 would hold it.
    pub fn register(&self) -> u32 {
        match self.kernel {
            Kernel::Portable => self.lanes[0] as u32,
            Kernel::Clmul => RAW_CRC.checksum(&self.remainder().to_be_bytes()),
        }
    }

    /// True when what was fed is a whole valid AAL5 CPCS-PDU (CRC field
    /// included): the register ends at the CRC-32 residue.
    #[inline]
    pub fn is_valid_pdu(&self) -> bool {
        match self.kernel {
            Kernel::Portable => self.lanes[0] as u32 == RESIDUE,
            // register = remainder·x^32 mod P, so compare remainders instead.
            Kernel::Clmul => self.remainder() == RESIDUE_REMAINDER,
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
        match self.kernel {
            Kernel::Portable => self.portable(payload),
            Kernel::Clmul => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: see `register`; `payload` is exactly 48 bytes.
                unsafe {
                    clmul::fold_payloads(&mut self.lanes, payload.as_slice(), 1)
                };
            }
        }
    }

    #[inline]
    fn portable(&mut self, payload: &[u8]) {
        let mut d = RAW_CRC.digest_with_initial(self.lanes[0] as u32);
        d.update(payload);
        self.lanes[0] = u128::from(d.finalize());
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
                // SAFETY: see `register`; the lengths were asserted above.
                unsafe {
                    clmul::build_cells(&mut self.lanes, header, src, cells)
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
    /// the Clmul kernel then checks only the header.
    /// Returns the cells consumed and whether the last one had AUU.
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
        match self.kernel {
            Kernel::Portable => {
                for (c, (cell, d)) in cells
                    .iter()
                    .zip(dst.chunks_exact_mut(PAYLOAD_LEN))
                    .enumerate()
                {
                    let h = u32::from_be_bytes([cell[0], cell[1], cell[2], cell[3]]);
                    if let Some(k) = key {
                        if h & KEY_MASK != k {
                            return (c, false);
                        }
                    }
                    if let Some([a, b]) = valid {
                        let p = aurora_wire::hec::pack_header(cell);
                        if p != a && p != b {
                            return (c, false);
                        }
                    }
                    d.copy_from_slice(&cell[HEADER_LEN..]);
                    self.portable(&cell[HEADER_LEN..]);
                    if key.is_some() && h & AUU != 0 {
                        return (c + 1, true);
                    }
                }
                (cells.len(), false)
            }
            Kernel::Clmul => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: see `reduce`; `cells` was cut to what `dst` holds.
                unsafe {
                    clmul::drain_run(&mut self.lanes, cells, key, valid, dst)
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("the Clmul kernel exists only on x86-64")
            }
        }
    }
}

const _: () = assert!(CELL_LEN == HEADER_LEN + PAYLOAD_LEN);

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
        key: Option<u32>,
        valid: Option<[u64; 2]>,
        dst: &mut [u8],
    ) -> (usize, bool) {
        assert!(dst.len() >= cells.len() * PAYLOAD_LEN);
        let (check, want) = match key {
            Some(k) => (super::KEY_MASK, k),
            None => (0, 0),
        };
        let stop = if key.is_some() { super::AUU } else { 0 };
        let (vcheck, va, vb) = match valid {
            Some([a, b]) => (true, a, b),
            None => (false, 0, 0),
        };
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
                // One load gives both the packed header and the key.
                let w = u64::from_le_bytes([
                    cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6], cell[7],
                ]);
                let h = (w as u32).swap_bytes();
                let ok = if vcheck {
                    // The valid headers are this run's VC's: they imply the key.
                    let p = w & 0xFF_FFFF_FFFF;
                    p == va || p == vb
                } else {
                    h & check == want
                };
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
                if h & stop != 0 {
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

    #[inline(always)]
    unsafe fn clmul(a: u64, b: u64) -> u128 {
        // SAFETY: the caller runs with PCLMULQDQ enabled; the store writes one
        // u128 that we own.
        unsafe {
            let r =
                _mm_clmulepi64_si128(_mm_set_epi64x(0, a as i64), _mm_set_epi64x(0, b as i64), 0);
            let mut out = 0u128;
            _mm_storeu_si128((&mut out as *mut u128).cast(), r);
            out
        }
    }

    /// The message fed, reduced modulo P: combine the lanes
    /// (`lane0·x^256 + lane1·x^128 + lane2`), fold 128 bits down to 64, then
    /// a Barrett reduction to 32.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(super) unsafe fn remainder(lanes: &[u128; 3]) -> u32 {
        // SAFETY: register arithmetic plus stores into locals.
        unsafe {
            let a = load_lanes(lanes);
            let r = _mm_xor_si128(
                _mm_xor_si128(fold(a[0], consts(K_256)), fold(a[1], consts(K_128))),
                a[2],
            );
            let mut v = 0u128;
            _mm_storeu_si128((&mut v as *mut u128).cast(), r);
            // v = H·x^64 + L ≡ H·(x^64 mod P) + L, under 96 bits.
            let b = clmul((v >> 64) as u64, K_64) ^ (v & u128::from(u64::MAX));
            // Once more for the top 32 bits: under 64 bits.
            let c = (clmul((b >> 64) as u64, K_64) ^ (b & u128::from(u64::MAX))) as u64;
            // Barrett: q = floor(floor(c / x^32) · μ / x^32); c − q·P.
            let t1 = clmul(c >> 32, MU) >> 32;
            let t2 = clmul(t1 as u64, super::P);
            (u128::from(c) ^ t2) as u32
        }
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
