//! CRC-10/ATM of 48-byte AAL3/4 SAR-PDUs, one whole unit at a time.
//!
//! The AAL3/4 sender and receiver spend most of their per-cell work on the
//! CRC-10. The portable kernel uses tables (per 64-bit word, eight
//! independent byte lookups and one step carrying the remainder); on x86-64
//! with PCLMULQDQ the unit is reduced with six carry-less multiplies and no
//! table:
//!
//! * the unit's 384 bits are the polynomial
//!   M = W0·x³²⁰ + W1·x²⁵⁶ + … + W4·x⁶⁴ + W5 of its six big-endian 64-bit
//!   words;
//! * each of W0..W4 is multiplied by the 10-bit constant x^(64·j) mod P, and
//!   the five products (73 bits at most) and W5 are added: R ≡ M (mod P);
//! * R is reduced to ten bits by Barrett's method: one multiply gives the
//!   quotient, and the low ten bits of quotient·P are a few shifts of the
//!   quotient because P is fixed.
//!
//! Both directions need the remainder M mod P of the whole unit: a unit
//! checks when it is zero, and with the ten field bits zeroed it is the
//! field (the field is the CRC of the first 374 bits, i.e. that part times
//! x¹⁰ mod P).
//!
//! PCLMULQDQ issues one 64×64 multiply every two cycles on the machines
//! measured, and VPCLMULQDQ on a 512-bit register does four in the same
//! time; so where the CPU has the Vpclmul kernel's features (AVX-512 F, BW,
//! VL and VBMI, and VPCLMULQDQ), runs of
//! continuation cells are done four at a time, one cell in each 128-bit
//! lane.
//!
//! Every kernel is tested against the `crc` crate's CRC-10/ATM (which
//! `aurora_wire::crc` uses and which stays the reference).

use aurora_wire::crc;

/// The kernels are the AAL5 CRC's ([`Kernel`]): the same CPU features
/// choose them. `Vpclmul` here is `Clmul` plus runs of cells four at a time
/// with 512-bit VPCLMULQDQ.
pub use crate::fold::Kernel;

/// A 48-byte SAR-PDU (or OAM payload).
pub type Unit = [u8; 48];

/// P, the CRC-10/ATM generator, with its x¹⁰ term.
const P: u64 = 0x400 | crc::CRC10_POLY as u64;

/// x^n mod P.
const fn xpow_mod(n: u32) -> u64 {
    let mut r = 1u64;
    let mut i = 0;
    while i < n {
        r <<= 1;
        if r & 0x400 != 0 {
            r ^= P;
        }
        i += 1;
    }
    r
}

/// x^(64·j) mod P for the words W0..W4 (j = 5..1).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const K: [u64; 6] = [
    1,
    xpow_mod(64),
    xpow_mod(128),
    xpow_mod(192),
    xpow_mod(256),
    xpow_mod(320),
];

/// Barrett's constant for a dividend of degree below 73: ⌊x⁷³ / P⌋, of
/// degree 63 (exactly 64 bits).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const MU: u64 = {
    let mut rem: u128 = 1 << 73;
    let mut q = 0u64;
    let mut bit = 73;
    while bit >= 10 {
        if rem & (1 << bit) != 0 {
            rem ^= (P as u128) << (bit - 10);
            q |= 1 << (bit - 10);
        }
        bit -= 1;
    }
    q
};

/// The low ten bits of q·P, given the quotient q (only its low ten bits
/// matter): q·(x⁹ + x⁵ + x⁴ + x + 1) mod x¹⁰, the x¹⁰ term of P adding
/// nothing below x¹⁰.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
const fn low_qp(q: u64) -> u64 {
    q ^ (q << 1) ^ (q << 4) ^ (q << 5) ^ (q << 9)
}

/// Resolves a requested kernel to one this CPU runs.
pub(crate) fn usable(kernel: Kernel) -> Kernel {
    kernel.min(Kernel::best())
}

/// M mod P for the whole 48-byte unit (field bits included).
pub fn remainder(kernel: Kernel, unit: &Unit) -> u16 {
    match usable(kernel) {
        Kernel::Portable => portable_remainder(unit),
        Kernel::Clmul | Kernel::Vpclmul => {
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: `usable` gives Clmul only where the CPU has
                // PCLMULQDQ and SSSE3.
                unsafe { clmul::remainder(unit) }
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("the Clmul kernel exists only on x86-64")
        }
    }
}

/// True when the unit's CRC-10 checks (the CRC of all 384 bits is zero).
#[inline]
pub fn check(kernel: Kernel, unit: &Unit) -> bool {
    remainder(kernel, unit) == 0
}

/// The CRC-10 field for the unit (whatever its last ten bits hold now).
#[inline]
pub fn field(kernel: Kernel, unit: &Unit) -> u16 {
    let mut u = *unit;
    u[46] &= 0xFC;
    u[47] = 0;
    remainder(kernel, &u)
}

/// Writes the CRC-10 field into the last ten bits, keeping the six above.
#[inline]
pub fn set_field(kernel: Kernel, unit: &mut Unit) {
    let c = field(kernel, unit);
    unit[46] = (unit[46] & 0xFC) | (c >> 8) as u8;
    unit[47] = c as u8;
}

/// `BYTE[j][b]` = b·x^(8·j) mod P: the remainder of byte value b standing
/// j bytes from the end of a 64-bit word.
const BYTE: [[u16; 256]; 8] = {
    let mut t = [[0u16; 256]; 8];
    let mut j = 0;
    while j < 8 {
        let mut b = 0;
        while b < 256 {
            // b·x^(8j), reduced one shift at a time.
            let mut r = b as u64;
            let mut i = 0;
            while i < 8 * j {
                r <<= 1;
                if r & 0x400 != 0 {
                    r ^= P;
                }
                i += 1;
            }
            t[j][b] = r as u16;
            b += 1;
        }
        j += 1;
    }
    t
};

/// `WORD[r]` = r·x⁶⁴ mod P for a ten-bit remainder r.
const WORD: [u16; 1024] = {
    let mut t = [0u16; 1024];
    let mut r = 0;
    while r < 1024 {
        let mut v = r as u64;
        let mut i = 0;
        while i < 64 {
            v <<= 1;
            if v & 0x400 != 0 {
                v ^= P;
            }
            i += 1;
        }
        t[r] = v as u16;
        r += 1;
    }
    t
};

/// M mod P without PCLMULQDQ: each big-endian 64-bit word's remainder is
/// the sum of eight independent byte lookups, and the running remainder
/// moves past a word with one more lookup (r·x⁶⁴ mod P), so the chain that
/// carries from word to word is one load and one XOR long, not a lookup
/// per byte as in a byte-at-a-time CRC. 4.5 KiB of tables.
fn portable_remainder(unit: &Unit) -> u16 {
    let mut r = 0u16;
    for word in unit.chunks_exact(8) {
        // Byte i of the word stands 7 − i bytes from its end; the bytes
        // index the tables straight from memory.
        let m = word
            .iter()
            .zip(BYTE.iter().rev())
            .fold(0u16, |m, (&b, t)| m ^ t[usize::from(b)]);
        r = WORD[usize::from(r)] ^ m;
    }
    r
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod clmul {
    //! The PCLMULQDQ kernel. Every function needs PCLMULQDQ and SSSE3.

    use std::arch::x86_64::*;

    use super::{low_qp, Unit, K, MU};

    /// Reverses the 16 bytes of a register, so that a big-endian 128-bit
    /// block (first byte most significant) reads as an integer.
    #[inline]
    #[target_feature(enable = "ssse3")]
    fn bswap_mask() -> __m128i {
        _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
    }

    /// M mod P of the unit held as three 16-byte blocks in memory order.
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(crate) fn reduce(b0: __m128i, b1: __m128i, b2: __m128i) -> u16 {
        let m = bswap_mask();
        // As integers: b0 = W0·x⁶⁴ + W1, b1 = W2·x⁶⁴ + W3, b2 = W4·x⁶⁴ + W5.
        let b0 = _mm_shuffle_epi8(b0, m);
        let b1 = _mm_shuffle_epi8(b1, m);
        let b2 = _mm_shuffle_epi8(b2, m);
        let k54 = _mm_set_epi64x(K[5] as i64, K[4] as i64);
        let k32 = _mm_set_epi64x(K[3] as i64, K[2] as i64);
        let k1 = _mm_set_epi64x(0, K[1] as i64);
        let a = _mm_xor_si128(
            _mm_clmulepi64_si128(b0, k54, 0x11),
            _mm_clmulepi64_si128(b0, k54, 0x00),
        );
        let b = _mm_xor_si128(
            _mm_clmulepi64_si128(b1, k32, 0x11),
            _mm_clmulepi64_si128(b1, k32, 0x00),
        );
        let c = _mm_xor_si128(_mm_clmulepi64_si128(b2, k1, 0x01), _mm_move_epi64(b2));
        // R ≡ M (mod P), degree at most 72.
        let r = _mm_xor_si128(_mm_xor_si128(a, b), c);
        let lo = _mm_cvtsi128_si64(r) as u64;
        let hi = _mm_cvtsi128_si64(_mm_srli_si128(r, 8)) as u64;
        // Barrett with N = 73: the quotient is ⌊⌊R/x¹⁰⌋·μ / x⁶³⌋, which is
        // the high half of (R/x⁹)·μ (the extra bit of R/x⁹ only reaches
        // the low half).
        let t = (lo >> 9) | (hi << 55);
        let q = _mm_clmulepi64_si128(
            _mm_cvtsi64_si128(t as i64),
            _mm_cvtsi64_si128(MU as i64),
            0x00,
        );
        let q = _mm_cvtsi128_si64(_mm_srli_si128(q, 8)) as u64;
        ((lo ^ low_qp(q)) & 0x3FF) as u16
    }

    /// M mod P of a whole unit.
    ///
    /// # Safety
    ///
    /// The CPU must have PCLMULQDQ and SSSE3.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(crate) unsafe fn remainder(unit: &Unit) -> u16 {
        let p = unit.as_ptr();
        // SAFETY: the three 16-byte loads lie within the 48-byte unit.
        let (b0, b1, b2) = unsafe {
            (
                _mm_loadu_si128(p.cast()),
                _mm_loadu_si128(p.add(16).cast()),
                _mm_loadu_si128(p.add(32).cast()),
            )
        };
        reduce(b0, b1, b2)
    }

    /// Builds one cell whose 48-byte payload is `window` with its first two
    /// bytes replaced by `head` (ST, SN, MID, big-endian) and its last two
    /// by `li << 2` and the CRC-10 computed here: the AAL3/4 continuation
    /// cell whose 44 data bytes are `window[2..46]`.
    ///
    /// # Safety
    ///
    /// The CPU must have PCLMULQDQ and SSSE3.
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(crate) unsafe fn build_cell(
        cell: &mut [u8; 53],
        header: &[u8; 5],
        window: &[u8; 48],
        head: u16,
        li: u8,
    ) {
        let s = window.as_ptr();
        // SAFETY: the three 16-byte loads lie within the 48-byte window.
        let (b0, b1, b2) = unsafe {
            (
                _mm_loadu_si128(s.cast()),
                _mm_loadu_si128(s.add(16).cast()),
                _mm_loadu_si128(s.add(32).cast()),
            )
        };
        // Bytes 0 and 1 of the payload (little-endian lane 0), and bytes
        // 46 and 47 (lane 7): LI above a zero field.
        let b0 = _mm_insert_epi16(b0, i32::from(head.swap_bytes()), 0);
        let b2 = _mm_insert_epi16(b2, i32::from(li << 2), 7);
        let crc = reduce(b0, b1, b2);
        cell[..5].copy_from_slice(header);
        let d = cell[5..].as_mut_ptr();
        // SAFETY: the three 16-byte stores lie within the cell's 48-byte
        // payload at offsets 5..53.
        unsafe {
            _mm_storeu_si128(d.cast(), b0);
            _mm_storeu_si128(d.add(16).cast(), b1);
            _mm_storeu_si128(d.add(32).cast(), b2);
        }
        cell[51] = (li << 2) | (crc >> 8) as u8;
        cell[52] = crc as u8;
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    //! Four cells at a time, one in each 128-bit lane of 512-bit registers.
    //! Every function needs AVX-512 F and BW, VPCLMULQDQ, PCLMULQDQ and
    //! SSSE3.

    use std::arch::x86_64::*;

    use super::{K, MU, P};

    /// The three 16-byte blocks of four 48-byte units, lane k of each from
    /// `units[k]`.
    ///
    /// # Safety
    ///
    /// The CPU must have the features above, and each pointer must be
    /// valid for reading 48 bytes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
    pub(crate) unsafe fn load4(units: [*const u8; 4]) -> [__m512i; 3] {
        let block = |j: usize| {
            // SAFETY: each pointer is valid for 48 bytes and j ≤ 2.
            unsafe {
                let z = _mm512_castsi128_si512(_mm_loadu_si128(units[0].add(16 * j).cast()));
                let z = _mm512_inserti32x4::<1>(z, _mm_loadu_si128(units[1].add(16 * j).cast()));
                let z = _mm512_inserti32x4::<2>(z, _mm_loadu_si128(units[2].add(16 * j).cast()));
                _mm512_inserti32x4::<3>(z, _mm_loadu_si128(units[3].add(16 * j).cast()))
            }
        };
        [block(0), block(1), block(2)]
    }

    /// M mod P of the four units held lane-wise in `z` (as [`load4`] lays
    /// them out), each in the low 16 bits of its lane, the rest zero.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
    pub(crate) fn reduce4(z: [__m512i; 3]) -> __m512i {
        let lanes = |hi: u64, lo: u64| _mm512_broadcast_i32x4(_mm_set_epi64x(hi as i64, lo as i64));
        let m = _mm512_broadcast_i32x4(_mm_set_epi8(
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
        ));
        // Per lane, as integers: W0·x⁶⁴ + W1, W2·x⁶⁴ + W3, W4·x⁶⁴ + W5.
        let b0 = _mm512_shuffle_epi8(z[0], m);
        let b1 = _mm512_shuffle_epi8(z[1], m);
        let b2 = _mm512_shuffle_epi8(z[2], m);
        let (k54, k32, k1) = (lanes(K[5], K[4]), lanes(K[3], K[2]), lanes(0, K[1]));
        let a = _mm512_xor_si512(
            _mm512_clmulepi64_epi128(b0, k54, 0x11),
            _mm512_clmulepi64_epi128(b0, k54, 0x00),
        );
        let b = _mm512_xor_si512(
            _mm512_clmulepi64_epi128(b1, k32, 0x11),
            _mm512_clmulepi64_epi128(b1, k32, 0x00),
        );
        let c = _mm512_xor_si512(
            _mm512_clmulepi64_epi128(b2, k1, 0x01),
            // W5: the low quadword of each lane (an AND, not a shuffle).
            _mm512_and_si512(b2, lanes(0, u64::MAX)),
        );
        // R ≡ M (mod P) per lane, degree at most 72.
        let r = _mm512_ternarylogic_epi64::<0x96>(a, b, c);
        // Barrett as in the one-cell kernel: t = R/x⁹ in the low quadword
        // (the high quadword is not used by the multiply).
        let t = _mm512_or_si512(
            _mm512_srli_epi64::<9>(r),
            _mm512_slli_epi64::<55>(_mm512_bsrli_epi128::<8>(r)),
        );
        let q = _mm512_clmulepi64_epi128(t, _mm512_set1_epi64(MU as i64), 0x00);
        // The low ten bits of q·P, q being the high quadword of that
        // product: one more multiply (by P without its x¹⁰ term, which adds
        // nothing below x¹⁰) in place of a byte shift, four shifts and two
        // ternary ops. Fewer vector instructions in a loop that their number
        // limits: 10.3 to 9.7 cycles a cell on Zen 4.
        let l = _mm512_clmulepi64_epi128(q, _mm512_set1_epi64((P & 0x3FF) as i64), 0x01);
        _mm512_ternarylogic_epi64::<0x28>(r, l, lanes(0, 0x3FF))
    }

    /// True when all four units' CRC-10s check.
    ///
    /// # Safety
    ///
    /// As [`load4`].
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
    pub(crate) unsafe fn check4(units: [*const u8; 4]) -> bool {
        // SAFETY: passed on from the caller.
        let z = unsafe { load4(units) };
        let r = reduce4(z);
        _mm512_test_epi64_mask(r, r) == 0
    }

    /// Builds four continuation cells: cell k's payload is `windows[k]`
    /// (48 bytes) with its first two bytes replaced by the SAR header whose
    /// little-endian value is in the low 16 bits of lane k of `heads`, its
    /// byte 46 by `li << 2` and byte 47 and the field by the CRC-10.
    ///
    /// # Safety
    ///
    /// As [`load4`] for the windows.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
    pub(crate) unsafe fn build4(
        cells: &mut [[u8; 53]; 4],
        header: &[u8; 5],
        windows: [*const u8; 4],
        heads: __m512i,
        li: u8,
    ) {
        // SAFETY: passed on from the caller.
        let [z0, z1, z2] = unsafe { load4(windows) };
        // 16-bit element 0 of each lane: the SAR header; element 7: LI
        // above a zero field.
        let z0 = _mm512_mask_blend_epi16(0x0101_0101, z0, heads);
        let z2 = _mm512_mask_blend_epi16(0x8080_8080, z2, _mm512_set1_epi16(i16::from(li) << 2));
        let crc = reduce4([z0, z1, z2]);
        // CRC bits 9..8 to byte 14 (under LI), bits 7..0 to byte 15.
        let place = _mm512_broadcast_i32x4(_mm_set_epi8(
            0, 1, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128,
            -128,
        ));
        let z2 = _mm512_or_si512(z2, _mm512_shuffle_epi8(crc, place));
        let lane = |z: __m512i, k: usize| match k {
            0 => _mm512_extracti32x4_epi32::<0>(z),
            1 => _mm512_extracti32x4_epi32::<1>(z),
            2 => _mm512_extracti32x4_epi32::<2>(z),
            _ => _mm512_extracti32x4_epi32::<3>(z),
        };
        let h = {
            let mut w = [0u8; 8];
            w[..5].copy_from_slice(header);
            u64::from_ne_bytes(w)
        };
        for (k, cell) in cells.iter_mut().enumerate() {
            // SAFETY: eight bytes at the start of a 53-byte cell; the
            // payload stores below overwrite bytes 5..8.
            unsafe { cell.as_mut_ptr().cast::<u64>().write_unaligned(h) };
            let d = cell[5..].as_mut_ptr();
            // SAFETY: the three 16-byte stores lie within the cell's
            // 48-byte payload at offsets 5..53.
            unsafe {
                _mm_storeu_si128(d.cast(), lane(z0, k));
                _mm_storeu_si128(d.add(16).cast(), lane(z1, k));
                _mm_storeu_si128(d.add(32).cast(), lane(z2, k));
            }
        }
    }

    /// The four remainders of `units` (for tests).
    ///
    /// # Safety
    ///
    /// The CPU must have the features above.
    #[cfg(test)]
    #[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
    pub(crate) unsafe fn remainders4(units: &[super::Unit; 4]) -> [u16; 4] {
        // SAFETY: each unit is 48 bytes.
        let z = unsafe { load4(units.each_ref().map(|u| u.as_ptr())) };
        let r = reduce4(z);
        let mut out = [0u64; 8];
        // SAFETY: `out` is 64 bytes.
        unsafe { _mm512_storeu_si512(out.as_mut_ptr().cast(), r) };
        [out[0], out[2], out[4], out[6]].map(|x| x as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_wire::crc::CRC10_POLY;
    use proptest::prelude::*;

    const REFERENCE: ::crc::Crc<u16> = ::crc::Crc::<u16>::new(&::crc::CRC_10_ATM);

    /// r·x¹⁰ mod P, bit by bit.
    fn times_x10(mut r: u16) -> u16 {
        for _ in 0..10 {
            let carry = r & 0x200 != 0;
            r = (r << 1) & 0x3FF;
            if carry {
                r ^= CRC10_POLY;
            }
        }
        r
    }

    fn kernels() -> Vec<Kernel> {
        Kernel::available()
    }

    #[test]
    fn tables() {
        for (b, &r) in BYTE[0].iter().enumerate() {
            assert_eq!(r, b as u16);
        }
        assert_eq!(BYTE[1][1], xpow_mod(8) as u16);
        assert_eq!(WORD[1], xpow_mod(64) as u16);
    }

    #[test]
    fn constants() {
        assert_eq!(K[1], xpow_mod(64));
        // μ·P + ρ = x⁷³ with ρ of degree below ten.
        let mut prod = 0u128;
        for i in 0..64 {
            if MU >> i & 1 != 0 {
                prod ^= (P as u128) << i;
            }
        }
        assert!((prod ^ (1u128 << 73)) < 0x400);
    }

    #[test]
    fn known_answers() {
        for k in kernels() {
            assert_eq!(remainder(k, &[0; 48]), 0, "{k:?}");
            // The unit 0…0 1 is the polynomial 1.
            let mut one = [0u8; 48];
            one[47] = 1;
            assert_eq!(remainder(k, &one), 1, "{k:?}");
            // x^383 mod P.
            let mut top = [0u8; 48];
            top[0] = 0x80;
            assert_eq!(remainder(k, &top), xpow_mod(383) as u16, "{k:?}");
            let mut unit = [0u8; 48];
            unit[..9].copy_from_slice(b"123456789");
            // The catalogue check value: CRC("123456789") = 0x199, and the
            // unit is that string times x^(384 - 72).
            let r = remainder(k, &unit);
            assert_eq!(times_x10(r), REFERENCE.checksum(&unit), "{k:?}");
            assert_eq!(REFERENCE.checksum(b"123456789"), 0x199);
        }
    }

    proptest! {
        #[test]
        fn every_kernel_agrees_with_the_crc_crate(unit in proptest::array::uniform32(any::<u8>()), tail in proptest::array::uniform16(any::<u8>()), flip in 0usize..384) {
            let mut u = [0u8; 48];
            u[..32].copy_from_slice(&unit);
            u[32..].copy_from_slice(&tail);
            let want = REFERENCE.checksum(&u);
            for k in kernels() {
                let r = remainder(k, &u);
                prop_assert_eq!(times_x10(r), want, "{:?}", k);
                prop_assert_eq!(check(k, &u), want == 0);
                prop_assert_eq!(field(k, &u), crc::crc10_field(&u));
                let mut v = u;
                set_field(k, &mut v);
                prop_assert_eq!(&v[..46], &u[..46]);
                prop_assert_eq!(v[46] & 0xFC, u[46] & 0xFC);
                prop_assert_eq!(REFERENCE.checksum(&v), 0);
                prop_assert!(check(k, &v));
                v[flip / 8] ^= 0x80 >> (flip % 8);
                prop_assert!(!check(k, &v));
                prop_assert_ne!(REFERENCE.checksum(&v), 0);
            }
        }

        #[test]
        #[cfg(target_arch = "x86_64")]
        fn four_lanes_agree_with_one(units in proptest::collection::vec(proptest::array::uniform32(any::<u8>()), 8), zero_one in any::<bool>()) {
            // Not `prop_assume!`: on a CPU without the kernel every case
            // would be rejected and proptest would call that a failure.
            if !Kernel::Vpclmul.supported() {
                return Ok(());
            }
            let mut four = [[0u8; 48]; 4];
            for (k, u) in four.iter_mut().enumerate() {
                u[..32].copy_from_slice(&units[2 * k]);
                u[32..].copy_from_slice(&units[2 * k + 1][..16]);
            }
            // Either all four check (so `check4` can say yes) or one does.
            for (k, u) in four.iter_mut().enumerate() {
                if zero_one || k == 1 {
                    set_field(Kernel::Portable, u);
                }
            }
            // SAFETY: the CPU has the features (checked above).
            let got = unsafe { avx512::remainders4(&four) };
            for k in 0..4 {
                prop_assert_eq!(got[k], remainder(Kernel::Portable, &four[k]));
            }
            // SAFETY: as above; the units are 48 bytes each.
            let ok = unsafe { avx512::check4(four.each_ref().map(|u| u.as_ptr())) };
            prop_assert_eq!(ok, four.iter().all(|u| check(Kernel::Portable, u)));
        }

        #[test]
        #[cfg(target_arch = "x86_64")]
        fn build_cell_makes_a_checked_continuation_cell(window in proptest::array::uniform32(any::<u8>()), tail in proptest::array::uniform16(any::<u8>()), head: u16, li in 0u8..64) {
            if !Kernel::Clmul.supported() {
                return Ok(());
            }
            let mut w = [0u8; 48];
            w[..32].copy_from_slice(&window);
            w[32..].copy_from_slice(&tail);
            let mut cell = [0xEEu8; 53];
            // SAFETY: Clmul is available (checked above).
            unsafe { clmul::build_cell(&mut cell, &[1, 2, 3, 4, 5], &w, head, li) };
            let mut want = [0u8; 48];
            want[..2].copy_from_slice(&head.to_be_bytes());
            want[2..46].copy_from_slice(&w[2..46]);
            want[46] = li << 2;
            crc::set_crc10_field(&mut want);
            prop_assert_eq!(&cell[..5], &[1, 2, 3, 4, 5]);
            prop_assert_eq!(&cell[5..], &want[..]);
        }
    }
}
