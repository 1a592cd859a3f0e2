//! AAL3/4 framing (ITU-T I.363.3): the SAR-PDU carried in each cell and the
//! CPCS-PDU header and trailer around the user's data.
//!
//! SAR-PDU (one cell payload):
//!
//! ```text
//!  bits: ST(2) SN(4) MID(10) | payload (44 bytes) | LI(6) CRC-10(10)
//! ```
//!
//! CPCS-PDU (cut into 44-byte pieces by the SAR):
//!
//! ```text
//!  | CPI | Btag | BAsize(2) | payload | pad (0..=3) | AL | Etag | Length(2) |
//! ```
//!
//! Btag and Etag carry the same value so that the receiver can tell when the
//! end of one PDU has been spliced to the start of another; BAsize tells the
//! receiver how much buffer to set aside (at least Length).

use crate::crc;
use crate::{Error, PayloadBytes, Result, PAYLOAD_LEN};

/// Payload bytes in one SAR-PDU.
pub const SAR_PAYLOAD_LEN: usize = 44;
/// Size of the CPCS-PDU header, and of its trailer.
pub const CPCS_HEADER_LEN: usize = 4;
/// Size of the CPCS-PDU trailer.
pub const CPCS_TRAILER_LEN: usize = 4;
/// The largest SDU the 16-bit Length field can describe.
pub const MAX_SDU: usize = 65535;
/// The largest multiplexing identifier (10 bits).
pub const MAX_MID: u16 = 1023;
/// The LI value of an EOM that aborts the PDU.
pub const LI_ABORT: u8 = 63;

/// The segment type of a SAR-PDU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegmentType {
    /// Beginning of message.
    Bom,
    /// Continuation of message.
    Com,
    /// End of message.
    Eom,
    /// Single-segment message.
    Ssm,
}

impl SegmentType {
    /// Decodes the two ST bits.
    pub const fn from_bits(b: u8) -> SegmentType {
        match b & 3 {
            0b10 => SegmentType::Bom,
            0b00 => SegmentType::Com,
            0b01 => SegmentType::Eom,
            _ => SegmentType::Ssm,
        }
    }
    /// Encodes to the two ST bits.
    pub const fn bits(self) -> u8 {
        match self {
            SegmentType::Bom => 0b10,
            SegmentType::Com => 0b00,
            SegmentType::Eom => 0b01,
            SegmentType::Ssm => 0b11,
        }
    }
    /// True for BOM and SSM: a PDU starts here.
    pub const fn starts(self) -> bool {
        matches!(self, SegmentType::Bom | SegmentType::Ssm)
    }
    /// True for EOM and SSM: a PDU ends here.
    pub const fn ends(self) -> bool {
        matches!(self, SegmentType::Eom | SegmentType::Ssm)
    }
}

/// A zero-copy view of one 48-byte SAR-PDU.
#[derive(Clone, Copy, Debug)]
pub struct SarPdu<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> SarPdu<T> {
    /// Wraps a buffer without checking its size (accessors panic unless it
    /// holds exactly 48 bytes).
    pub const fn new_unchecked(buf: T) -> Self {
        SarPdu { buf }
    }

    /// Wraps a buffer that must hold exactly 48 bytes.
    pub fn new_checked(buf: T) -> Result<Self> {
        let got = buf.as_ref().len();
        if got != PAYLOAD_LEN {
            return Err(Error::Length {
                expected: PAYLOAD_LEN,
                got,
            });
        }
        Ok(SarPdu { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Segment type.
    pub fn segment_type(&self) -> SegmentType {
        SegmentType::from_bits(self.b()[0] >> 6)
    }
    /// Sequence number (mod 16).
    pub fn sn(&self) -> u8 {
        (self.b()[0] >> 2) & 0x0F
    }
    /// Multiplexing identifier.
    pub fn mid(&self) -> u16 {
        (u16::from(self.b()[0] & 3) << 8) | u16::from(self.b()[1])
    }
    /// The 44 payload bytes (only the first [`SarPdu::li`] are meaningful).
    pub fn payload(&self) -> &[u8] {
        &self.b()[2..46]
    }
    /// Length indication: valid payload bytes (63 = abort on an EOM).
    pub fn li(&self) -> u8 {
        self.b()[46] >> 2
    }
    /// The CRC-10 field.
    pub fn crc(&self) -> u16 {
        (u16::from(self.b()[46] & 3) << 8) | u16::from(self.b()[47])
    }
    /// True when the CRC-10 matches.
    pub fn crc_ok(&self) -> bool {
        let p: &PayloadBytes = self.b().try_into().expect("length checked");
        crc::crc10_ok(p)
    }
}

/// The parsed SAR-PDU header and trailer fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SarRepr {
    /// Segment type.
    pub st: SegmentType,
    /// Sequence number (0..=15).
    pub sn: u8,
    /// Multiplexing identifier (0..=1023).
    pub mid: u16,
    /// Length indication (0..=63).
    pub li: u8,
}

impl SarRepr {
    /// Reads the fields of a SAR-PDU after checking its size and CRC-10.
    pub fn parse(bytes: &[u8]) -> Result<SarRepr> {
        let v = SarPdu::new_checked(bytes)?;
        if !v.crc_ok() {
            return Err(Error::Checksum);
        }
        Ok(SarRepr {
            st: v.segment_type(),
            sn: v.sn(),
            mid: v.mid(),
            li: v.li(),
        })
    }

    /// Writes a SAR-PDU: these fields, `data` (at most 44 bytes, zero-filled
    /// to 44) and the CRC-10.
    pub fn emit(&self, data: &[u8], out: &mut PayloadBytes) -> Result<()> {
        if data.len() > SAR_PAYLOAD_LEN {
            return Err(Error::Length {
                expected: SAR_PAYLOAD_LEN,
                got: data.len(),
            });
        }
        out[2..2 + data.len()].copy_from_slice(data);
        out[2 + data.len()..46].fill(0);
        self.emit_fields(out)
    }

    /// Writes the header (ST, SN, MID), LI and CRC-10 of a SAR-PDU whose 44
    /// payload bytes are already in place at offsets 2..46.
    pub fn emit_fields(&self, out: &mut PayloadBytes) -> Result<()> {
        if self.mid > MAX_MID {
            return Err(Error::FieldRange {
                field: "mid",
                value: self.mid.into(),
            });
        }
        if self.sn > 15 || self.li > 63 {
            return Err(Error::FieldRange {
                field: if self.sn > 15 { "sn" } else { "li" },
                value: u32::from(self.sn.max(self.li)),
            });
        }
        out[0] = (self.st.bits() << 6) | (self.sn << 2) | (self.mid >> 8) as u8;
        out[1] = self.mid as u8;
        out[46] = self.li << 2;
        out[47] = 0;
        crc::set_crc10_field(out);
        Ok(())
    }
}

/// The CPCS-PDU header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpcsHeader {
    /// Common part indicator (0: BAsize and Length count bytes).
    pub cpi: u8,
    /// Beginning tag; must equal the trailer's Etag.
    pub btag: u8,
    /// Buffer allocation size: the receiver should set aside this many bytes.
    pub basize: u16,
}

/// The CPCS-PDU trailer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpcsTrailer {
    /// Alignment byte (zero), making the trailer 32 bits.
    pub al: u8,
    /// End tag; must equal the header's Btag.
    pub etag: u8,
    /// The SDU length in bytes.
    pub length: u16,
}

impl CpcsHeader {
    /// Reads the first four bytes.
    pub fn parse(bytes: &[u8]) -> Result<CpcsHeader> {
        match bytes {
            [cpi, btag, a, b, ..] => Ok(CpcsHeader {
                cpi: *cpi,
                btag: *btag,
                basize: u16::from_be_bytes([*a, *b]),
            }),
            _ => Err(Error::Length {
                expected: CPCS_HEADER_LEN,
                got: bytes.len(),
            }),
        }
    }
    /// The four header bytes.
    pub fn to_bytes(&self) -> [u8; 4] {
        let b = self.basize.to_be_bytes();
        [self.cpi, self.btag, b[0], b[1]]
    }
}

impl CpcsTrailer {
    /// Reads the last four bytes of `pdu`.
    pub fn parse(pdu: &[u8]) -> Result<CpcsTrailer> {
        match pdu {
            [.., al, etag, a, b] => Ok(CpcsTrailer {
                al: *al,
                etag: *etag,
                length: u16::from_be_bytes([*a, *b]),
            }),
            _ => Err(Error::Length {
                expected: CPCS_TRAILER_LEN,
                got: pdu.len(),
            }),
        }
    }
    /// The four trailer bytes.
    pub fn to_bytes(&self) -> [u8; 4] {
        let l = self.length.to_be_bytes();
        [self.al, self.etag, l[0], l[1]]
    }
}

/// Bytes of the CPCS-PDU for an SDU of `sdu_len` bytes.
pub const fn cpcs_len(sdu_len: usize) -> usize {
    CPCS_HEADER_LEN + sdu_len.div_ceil(4) * 4 + CPCS_TRAILER_LEN
}

/// Cells needed for an SDU of `sdu_len` bytes.
pub const fn cells_for(sdu_len: usize) -> usize {
    cpcs_len(sdu_len).div_ceil(SAR_PAYLOAD_LEN)
}

/// Why a reassembled CPCS-PDU is not valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpcsError {
    /// Shorter than header and trailer, or not a multiple of four bytes.
    BadSize,
    /// Btag and Etag differ.
    TagMismatch,
    /// BAsize is smaller than Length (with CPI 0).
    BaSize,
    /// Length does not match the bytes received.
    Length,
    /// CPI other than 0.
    Cpi,
}

/// Checks a whole CPCS-PDU and returns header, trailer and SDU.
pub fn decode_cpcs(
    pdu: &[u8],
) -> core::result::Result<(CpcsHeader, CpcsTrailer, &[u8]), CpcsError> {
    if pdu.len() < CPCS_HEADER_LEN + CPCS_TRAILER_LEN || !pdu.len().is_multiple_of(4) {
        return Err(CpcsError::BadSize);
    }
    let h = CpcsHeader::parse(pdu).map_err(|_| CpcsError::BadSize)?;
    let t = CpcsTrailer::parse(pdu).map_err(|_| CpcsError::BadSize)?;
    if h.cpi != 0 {
        return Err(CpcsError::Cpi);
    }
    if h.btag != t.etag {
        return Err(CpcsError::TagMismatch);
    }
    if h.basize < t.length {
        return Err(CpcsError::BaSize);
    }
    if cpcs_len(usize::from(t.length)) != pdu.len() {
        return Err(CpcsError::Length);
    }
    let start = CPCS_HEADER_LEN;
    Ok((h, t, &pdu[start..start + usize::from(t.length)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sar_known_bytes() {
        let r = SarRepr {
            st: SegmentType::Bom,
            sn: 5,
            mid: 0x2A7,
            li: 44,
        };
        let mut out = [0u8; 48];
        r.emit(&[0xAA; 44], &mut out).unwrap();
        assert_eq!(out[0], 0b1001_0110);
        assert_eq!(out[1], 0xA7);
        assert_eq!(out[46] >> 2, 44);
        assert!(crc::crc10_ok(&out));
        assert_eq!(SarRepr::parse(&out), Ok(r));
        let v = SarPdu::new_checked(&out[..]).unwrap();
        assert_eq!(v.payload(), &[0xAA; 44]);
        out[20] ^= 4;
        assert_eq!(SarRepr::parse(&out), Err(Error::Checksum));
        assert!(SarRepr::parse(&out[..47]).is_err());
    }

    #[test]
    fn cpcs_sizes_and_decode() {
        assert_eq!(cpcs_len(0), 8);
        assert_eq!(cpcs_len(5), 16);
        assert_eq!(cells_for(36), 1);
        assert_eq!(cells_for(37), 2);
        let mut pdu = std::vec::Vec::new();
        pdu.extend_from_slice(
            &CpcsHeader {
                cpi: 0,
                btag: 9,
                basize: 5,
            }
            .to_bytes(),
        );
        pdu.extend_from_slice(b"hello\0\0\0");
        pdu.extend_from_slice(
            &CpcsTrailer {
                al: 0,
                etag: 9,
                length: 5,
            }
            .to_bytes(),
        );
        let (_, _, sdu) = decode_cpcs(&pdu).unwrap();
        assert_eq!(sdu, b"hello");
        pdu[13] = 8;
        assert_eq!(decode_cpcs(&pdu), Err(CpcsError::TagMismatch));
    }
}
