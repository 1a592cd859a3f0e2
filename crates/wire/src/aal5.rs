//! AAL5 CPCS-PDU framing (ITU-T I.363.5).
//!
//! ```text
//!  | payload (0..=65535 bytes) | pad (0..=47) | UU | CPI | Length (2) | CRC-32 (4) |
//!  └──────────── a whole number of 48-byte cell payloads ─────────────────────────┘
//! ```
//!
//! The last cell of a PDU has the AUU bit of its PTI set. The CRC is
//! CRC-32/BZIP2 over everything before it.
//!
//! I.363.5 reserves a Length of zero for aborting a PDU. An empty SDU also
//! has Length zero, so Aurora reads Length 0 in a one-cell PDU as an empty
//! SDU and Length 0 in a longer PDU as an abort (a sender that aborts in its
//! first cell is therefore seen as sending an empty SDU).
//!
//! This module holds the reference (portable) framing; `aurora-sar` has the
//! engines that build and check PDUs on the fly, and is tested against it.

use crate::crc;
use crate::{Error, Result, PAYLOAD_LEN};

/// Size of the CPCS-PDU trailer.
pub const TRAILER_LEN: usize = 8;
/// The largest SDU the 16-bit Length field can describe.
pub const MAX_SDU: usize = 65535;

/// Bytes in the CPCS-PDU of an SDU of `sdu_len` bytes (payload + pad + trailer).
#[inline]
pub const fn cpcs_len(sdu_len: usize) -> usize {
    cells_for(sdu_len) * PAYLOAD_LEN
}

/// Cells needed to carry an SDU of `sdu_len` bytes.
#[inline]
pub const fn cells_for(sdu_len: usize) -> usize {
    (sdu_len + TRAILER_LEN).div_ceil(PAYLOAD_LEN)
}

/// The parsed CPCS-PDU trailer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Trailer {
    /// CPCS user-to-user byte, passed transparently.
    pub uu: u8,
    /// Common part indicator; 0 in every current use.
    pub cpi: u8,
    /// The SDU length in bytes (0 = aborted PDU).
    pub length: u16,
    /// The CRC-32 field as carried.
    pub crc: u32,
}

impl Trailer {
    /// Reads the trailer from the last eight bytes of `pdu`.
    #[inline]
    pub fn parse(pdu: &[u8]) -> Result<Trailer> {
        if pdu.len() < TRAILER_LEN {
            return Err(Error::Length {
                expected: TRAILER_LEN,
                got: pdu.len(),
            });
        }
        let t = &pdu[pdu.len() - TRAILER_LEN..];
        Ok(Trailer {
            uu: t[0],
            cpi: t[1],
            length: u16::from_be_bytes([t[2], t[3]]),
            crc: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        })
    }

    /// The eight trailer bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; TRAILER_LEN] {
        let l = self.length.to_be_bytes();
        let c = self.crc.to_be_bytes();
        [self.uu, self.cpi, l[0], l[1], c[0], c[1], c[2], c[3]]
    }
}

/// Why a received CPCS-PDU is not a valid one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PduError {
    /// The PDU is not a positive multiple of 48 bytes.
    BadSize,
    /// The CRC-32 does not match.
    Crc,
    /// The Length field is zero in a PDU of more than one cell: the sender
    /// aborted it.
    Aborted,
    /// The Length field does not fit the number of cells received.
    Length,
}

/// Builds the CPCS-PDU for `sdu` into `out`, returning its length.
/// `out` must hold at least [`cpcs_len`] bytes.
pub fn encode(sdu: &[u8], uu: u8, cpi: u8, out: &mut [u8]) -> Result<usize> {
    if sdu.len() > MAX_SDU {
        return Err(Error::FieldRange {
            field: "aal5 length",
            value: sdu.len() as u32,
        });
    }
    let n = cpcs_len(sdu.len());
    let got = out.len();
    let out = out.get_mut(..n).ok_or(Error::Length { expected: n, got })?;
    out[..sdu.len()].copy_from_slice(sdu);
    out[sdu.len()..n - TRAILER_LEN].fill(0);
    let mut t = Trailer {
        uu,
        cpi,
        length: sdu.len() as u16,
        crc: 0,
    };
    out[n - TRAILER_LEN..].copy_from_slice(&t.to_bytes());
    t.crc = crc::crc32(&out[..n - 4]);
    out[n - 4..].copy_from_slice(&t.crc.to_be_bytes());
    Ok(n)
}

/// Checks a whole received CPCS-PDU and returns its trailer and SDU.
pub fn decode(pdu: &[u8]) -> core::result::Result<(Trailer, &[u8]), PduError> {
    if pdu.is_empty() || !pdu.len().is_multiple_of(PAYLOAD_LEN) {
        return Err(PduError::BadSize);
    }
    let t = Trailer::parse(pdu).map_err(|_| PduError::BadSize)?;
    if crc::crc32(&pdu[..pdu.len() - 4]) != t.crc {
        return Err(PduError::Crc);
    }
    check_length(t.length, pdu.len())?;
    Ok((t, &pdu[..usize::from(t.length)]))
}

/// Checks a trailer's Length against a CPCS-PDU of `pdu_len` bytes: it must
/// leave between 0 and 47 bytes of pad. Zero in a PDU longer than one cell is
/// an abort.
#[inline]
pub fn check_length(length: u16, pdu_len: usize) -> core::result::Result<(), PduError> {
    if length == 0 && pdu_len > PAYLOAD_LEN {
        return Err(PduError::Aborted);
    }
    if cpcs_len(usize::from(length)) != pdu_len {
        return Err(PduError::Length);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crc_of_48(payload: [u8; 40], uu: u8, cpi: u8) -> u32 {
        let mut out = [0u8; 48];
        encode(&payload, uu, cpi, &mut out).unwrap();
        Trailer::parse(&out).unwrap().crc
    }

    #[test]
    fn known_answers_for_one_cell_pdus() {
        let mut counting = [0u8; 40];
        counting
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8 + 1);
        assert_eq!(crc_of_48([0; 40], 0, 0), 0x864D_7F99);
        assert_eq!(crc_of_48([0xFF; 40], 0, 0), 0xC55E_457A);
        assert_eq!(crc_of_48(counting, 0, 0), 0xBF67_1ED0);
        assert_eq!(crc_of_48(counting, 0x11, 0x22), 0xACBA_602A);
    }

    #[test]
    fn known_trailer_bytes() {
        let mut out = [0u8; 48];
        encode(&[0; 40], 0, 0, &mut out).unwrap();
        assert_eq!(&out[40..], &[0, 0, 0, 40, 0x86, 0x4D, 0x7F, 0x99]);
        // The register over the whole valid PDU is the residue.
        assert_eq!(!crc::crc32(&out), crc::CRC32_RESIDUE);
    }

    #[test]
    fn sizes() {
        assert_eq!(cells_for(0), 1);
        assert_eq!(cells_for(40), 1);
        assert_eq!(cells_for(41), 2);
        assert_eq!(cells_for(MAX_SDU), 1366);
        assert_eq!(cpcs_len(1500), 1536);
    }

    #[test]
    fn decode_rejects_damage() {
        let mut out = [0u8; 96];
        let n = encode(b"hello, cells", 1, 0, &mut out).unwrap();
        assert_eq!(n, 48);
        let (t, sdu) = decode(&out[..48]).unwrap();
        assert_eq!((t.uu, sdu), (1, &b"hello, cells"[..]));
        let mut bad = out;
        bad[3] ^= 0x80;
        assert_eq!(decode(&bad[..48]), Err(PduError::Crc));
        assert_eq!(decode(&out[..47]), Err(PduError::BadSize));
        // A valid CRC over a Length that does not fit.
        let mut wrong = [0u8; 96];
        wrong[94] = 0; // placeholder
        let mut t = Trailer {
            uu: 0,
            cpi: 0,
            length: 90,
            crc: 0,
        };
        wrong[88..].copy_from_slice(&t.to_bytes());
        t.crc = crc::crc32(&wrong[..92]);
        wrong[88..].copy_from_slice(&t.to_bytes());
        assert_eq!(decode(&wrong), Err(PduError::Length));
        t.length = 0;
        wrong[88..].copy_from_slice(&t.to_bytes());
        t.crc = crc::crc32(&wrong[..92]);
        wrong[88..].copy_from_slice(&t.to_bytes());
        assert_eq!(decode(&wrong), Err(PduError::Aborted));
        // Zero in a single cell is an empty SDU.
        let mut empty = [0u8; 48];
        encode(&[], 0, 0, &mut empty).unwrap();
        assert_eq!(decode(&empty).unwrap().1, &[] as &[u8]);
    }
}
