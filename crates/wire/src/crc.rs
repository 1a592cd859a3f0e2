//! The three checksums ATM uses, with their catalogue parameters.
//!
//! | checksum | catalogue name | used by | check value of `"123456789"` |
//! |---|---|---|---|
//! | HEC | CRC-8/I-432-1 (poly 0x07, xorout 0x55) | cell header | 0xA1 |
//! | CRC-10 | CRC-10/ATM (poly 0x233) | AAL3/4 SAR-PDU, OAM cells | 0x199 |
//! | CRC-32 | CRC-32/BZIP2 (poly 0x04C11DB7, MSB first) | AAL5 CPCS-PDU | 0xFC891918 |
//!
//! These are the portable, table-driven implementations (from the `crc` crate).
//! The AAL5 fast paths in `aurora-sar` fold the CRC-32 into the copy that builds
//! or empties cells and are tested against [`crc32`] here.

use crc::{Crc, CRC_10_ATM, CRC_32_BZIP2, CRC_8_I_432_1};

const HEC: Crc<u8> = Crc::<u8>::new(&CRC_8_I_432_1);
static CRC10: Crc<u16, crc::Table<16>> = Crc::<u16, crc::Table<16>>::new(&CRC_10_ATM);
static CRC32: Crc<u32, crc::Table<16>> = Crc::<u32, crc::Table<16>>::new(&CRC_32_BZIP2);

/// CRC-10/ATM generator polynomial without its x^10 term.
pub const CRC10_POLY: u16 = 0x233;
/// CRC-32/BZIP2 generator polynomial without its x^32 term.
pub const CRC32_POLY: u32 = 0x04C1_1DB7;
/// The CRC-32 register (before the final inversion) after a whole valid
/// AAL5 CPCS-PDU, trailer included, has been run through it.
pub const CRC32_RESIDUE: u32 = 0xC704_DD7B;

/// HEC of the first four header bytes: CRC-8 with the 0x55 coset added.
#[inline]
pub fn hec(header: &[u8; 4]) -> u8 {
    HEC.checksum(header)
}

/// The HEC syndrome of a five-byte header: zero when the header is intact,
/// otherwise a value that identifies any single-bit error (see [`hec_error_bit`]).
#[inline]
pub fn hec_syndrome(header: &[u8; 5]) -> u8 {
    hec(&[header[0], header[1], header[2], header[3]]) ^ header[4]
}

/// Syndrome → bit position (0 = most significant bit of byte 0, 39 = least
/// significant bit of the HEC byte) for every single-bit error; 0xFF elsewhere.
const SYNDROME_TO_BIT: [u8; 256] = {
    let mut table = [0xFFu8; 256];
    let mut bit = 0;
    while bit < 40 {
        let mut err = [0u8; 5];
        err[bit / 8] = 0x80 >> (bit % 8);
        // The HEC is affine (the coset cancels in the syndrome), so the
        // syndrome of an error pattern is the plain CRC of its first four
        // bytes XOR its fifth byte.
        let crc = HEC.checksum(&[err[0], err[1], err[2], err[3]]) ^ 0x55;
        let s = crc ^ err[4];
        table[s as usize] = bit as u8;
        bit += 1;
    }
    table
};

/// If `syndrome` is that of a single-bit error, the position of that bit
/// (0 = MSB of header byte 0 … 39 = LSB of the HEC byte).
#[inline]
pub fn hec_error_bit(syndrome: u8) -> Option<u8> {
    match SYNDROME_TO_BIT[syndrome as usize] {
        0xFF => None,
        b => Some(b),
    }
}

/// CRC-10/ATM of a byte string (the catalogue's definition).
pub fn crc10(data: &[u8]) -> u16 {
    CRC10.checksum(data)
}

/// The CRC-10 field value for a 48-byte SAR-PDU or OAM payload: the CRC over
/// the first 374 bits (everything but the last ten), as AAL3/4 and OAM define it.
pub fn crc10_field(payload: &[u8; 48]) -> u16 {
    // The first 374 bits end two bits into byte 46. Running 47 bytes, with
    // the two field bits of byte 46 as zeros, gives the register of those
    // 374 bits times x^2 (a non-reflected CRC with zero init and xorout is
    // its register); dividing by x twice undoes the two extra zero bits.
    let mut digest = CRC10.digest();
    digest.update(&payload[..46]);
    digest.update(&[payload[46] & 0xFC]);
    crc10_div_x(crc10_div_x(digest.finalize()))
}

/// `r · x⁻¹ mod P` for a 10-bit remainder `r` (x is invertible mod P, whose
/// constant term is 1): when `r` has its x⁰ bit, add P first so that the
/// division by x is exact.
#[inline]
const fn crc10_div_x(r: u16) -> u16 {
    let r = if r & 1 != 0 {
        r ^ (0x400 | CRC10_POLY)
    } else {
        r
    };
    r >> 1
}

/// The CRC-10 field by the definition: the register after the first 46
/// bytes, then the six bits of byte 46 above the field one at a time (the
/// reference the faster [`crc10_field`] is tested against).
#[cfg(test)]
fn crc10_field_bitwise(payload: &[u8; 48]) -> u16 {
    let mut digest = CRC10.digest();
    digest.update(&payload[..46]);
    let mut reg = digest.finalize();
    let tail = payload[46] >> 2;
    for i in (0..6).rev() {
        let feedback = ((reg >> 9) & 1) ^ u16::from((tail >> i) & 1);
        reg = (reg << 1) & 0x3FF;
        if feedback != 0 {
            reg ^= CRC10_POLY;
        }
    }
    reg
}

/// True when a 48-byte SAR-PDU or OAM payload carries a correct CRC-10: the
/// CRC over all 384 bits of a valid unit is zero.
#[inline]
pub fn crc10_ok(payload: &[u8; 48]) -> bool {
    CRC10.checksum(payload) == 0
}

/// Writes the CRC-10 field (the last ten bits) of a 48-byte unit, keeping the
/// six bits above it.
pub fn set_crc10_field(payload: &mut [u8; 48]) {
    payload[46] &= 0xFC;
    payload[47] = 0;
    let c = crc10_field(payload);
    payload[46] |= (c >> 8) as u8;
    payload[47] = c as u8;
}

/// CRC-32/BZIP2 of a byte string (initial register all ones, inverted result).
#[inline]
pub fn crc32(data: &[u8]) -> u32 {
    CRC32.checksum(data)
}

/// A running CRC-32/BZIP2 over data that arrives in pieces.
pub struct Crc32Digest(crc::Digest<'static, u32, crc::Table<16>>);

impl Crc32Digest {
    /// A digest with nothing fed yet.
    pub fn new() -> Self {
        Crc32Digest(CRC32.digest())
    }
    /// Feeds more bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data)
    }
    /// The CRC of everything fed.
    pub fn finalize(self) -> u32 {
        self.0.finalize()
    }
}

impl Default for Crc32Digest {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_check_values() {
        assert_eq!(hec(b"1234"), HEC.checksum(b"1234"));
        assert_eq!(HEC.checksum(b"123456789"), 0xA1);
        assert_eq!(hec(&[0, 0, 0, 0]), 0x55);
        assert_eq!(crc10(b"123456789"), 0x199);
        assert_eq!(crc32(b"123456789"), 0xFC89_1918);
    }

    #[test]
    fn crc32_residue_over_a_valid_codeword() {
        let mut msg = std::vec::Vec::from(&b"any message at all"[..]);
        let c = crc32(&msg);
        msg.extend_from_slice(&c.to_be_bytes());
        // Register before the final inversion = !(checksum with inversion).
        assert_eq!(!crc32(&msg), CRC32_RESIDUE);
    }

    #[test]
    fn crc10_field_makes_the_unit_check_to_zero() {
        let mut unit = [0u8; 48];
        for (i, b) in unit.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(5);
        }
        unit[46] = 0xA8; // LI bits 101010
        set_crc10_field(&mut unit);
        assert!(crc10_ok(&unit));
        assert_eq!(unit[46] & 0xFC, 0xA8);
        unit[3] ^= 0x10;
        assert!(!crc10_ok(&unit));
    }

    #[test]
    fn crc10_field_matches_the_bitwise_definition() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..2000 {
            let mut unit = [0u8; 48];
            for b in unit.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            if round == 0 {
                unit = [0; 48];
            } else if round == 1 {
                unit = [0xFF; 48];
            }
            assert_eq!(crc10_field(&unit), crc10_field_bitwise(&unit), "{unit:?}");
            set_crc10_field(&mut unit);
            assert!(crc10_ok(&unit));
        }
    }

    #[test]
    fn every_single_bit_error_has_a_distinct_syndrome() {
        let mut seen = [false; 40];
        for s in 0..=255u8 {
            if let Some(b) = hec_error_bit(s) {
                assert!(!seen[b as usize]);
                seen[b as usize] = true;
            }
        }
        assert!(seen.iter().all(|&x| x));
    }
}
