//! The bytes striping adds to the traffic: sequence numbers and marker cells.
//!
//! # Sequence numbers ([`SyncMode::Sequence`](crate::SyncMode::Sequence))
//!
//! **Cell units**: the first two bytes of every data cell's payload carry the
//! unit's sequence number modulo 2^16, big-endian; the other 46 bytes are the
//! logical VC's data. The cost is 2 of 48 payload bytes, 4.17 % of the
//! payload (3.77 % of the line). The header is the member VC's; its PTI user
//! bits (EFCI, AUU) and CLP are the logical cell's.
//!
//! ```text
//!  byte 0..2   sequence number mod 2^16 (u16, big-endian)
//!  byte 2..48  46 bytes of data
//! ```
//!
//! **PDU and IP units**: a four-byte header at the front of the AAL5 SDU,
//! covered by the PDU's CRC-32:
//!
//! ```text
//!  byte 0..4   sequence number mod 2^32 (u32, big-endian)
//!  byte 4..    the application's SDU (or IP packet)
//! ```
//!
//! The cost is 4 bytes per PDU, plus one cell for the SDU lengths whose last
//! cell had fewer than 4 bytes free (lengths with `len % 48` in 37..=40).
//!
//! # Marker cells ([`SyncMode::Marker`](crate::SyncMode::Marker))
//!
//! A marker is an F5 end-to-end OAM cell (PTI `101`) on the stripe's member
//! VC, so switches pass it untouched along the VC and AAL5 reassembly never
//! sees it. Its payload follows I.610's layout: OAM type `1111` (system
//! management) and function type `0101`, which this crate takes for "stripe
//! marker", then a 45-byte function-specific field, then six reserved zero
//! bits and a CRC-10 over everything before it.
//!
//! ```text
//!  off len  field
//!   0   1   0xF5: OAM type 1111 | function 0101
//!   1   1   format version, 1
//!   2   1   stripe index (0-based) this marker was sent on
//!   3   1   number of stripes
//!   4   1   unit kind: 1 cell, 2 AAL5 PDU, 3 IP packet
//!   5   1   flags: bit 0 = sent because the sender went idle; bits 1..7 zero
//!   6   2   marker interval K (u16, big-endian)
//!   8   8   count: units sent on this stripe before the marker (u64, BE)
//!  16   8   round of the last of those units (u64, BE; 0 before the first)
//!  24   4   the stripe's credit after that unit, bytes (i32, BE, two's complement)
//!  28   4   quantum, bytes (u32, BE; 48 for cells)
//!  32  14   unused, 0x6A each
//!  46   2   six reserved bits (zero) | CRC-10 over bytes 0..46 and those bits
//! ```
//!
//! `count`, `round` and `credit` are the stripe's surplus-round-robin state
//! ([`StripeState`]). A cell marker therefore costs one cell per K data
//! cells on its stripe: 1/(K+1) of the line.

use aurora_wire::cell::{Format, Header, Pti, VcId};
use aurora_wire::oam::{OamFunction, OamRepr};
use aurora_wire::{CellBytes, PayloadBytes, CELL_LEN, HEADER_LEN, PAYLOAD_LEN};

use crate::balance::StripeState;
use crate::config::UnitKind;

/// Bytes of a cell payload taken by the sequence number.
pub const CELL_SEQ_LEN: usize = 2;
/// Data bytes left in a cell with a sequence number.
pub const CELL_SEQ_DATA_LEN: usize = PAYLOAD_LEN - CELL_SEQ_LEN;
/// Number of distinct cell sequence numbers.
pub const CELL_SEQ_SPACE: u64 = 1 << 16;
/// Bytes of the sequence header at the front of a PDU's SDU.
pub const PDU_SEQ_LEN: usize = 4;
/// Number of distinct PDU sequence numbers.
pub const PDU_SEQ_SPACE: u64 = 1 << 32;

/// OAM type of a marker cell: system management.
pub const MARKER_OAM_TYPE: u8 = 0b1111;
/// OAM function type of a marker cell.
pub const MARKER_FUNCTION: u8 = 0b0101;
/// The first payload byte of every marker: type and function together.
pub const MARKER_ID: u8 = (MARKER_OAM_TYPE << 4) | MARKER_FUNCTION;
/// The marker format this crate writes and reads.
pub const MARKER_VERSION: u8 = 1;
/// Flag bit: the marker was sent because the sender went idle.
pub const MARKER_FLAG_IDLE: u8 = 0x01;

/// Writes a cell's sequence number (the low 16 bits of `seq`).
pub fn put_cell_seq(payload: &mut PayloadBytes, seq: u64) {
    payload[..CELL_SEQ_LEN].copy_from_slice(&(seq as u16).to_be_bytes());
}

/// Reads a cell's sequence number.
pub fn cell_seq(payload: &PayloadBytes) -> u16 {
    u16::from_be_bytes([payload[0], payload[1]])
}

/// The sequence header for a PDU (the low 32 bits of `seq`).
pub fn pdu_seq_header(seq: u64) -> [u8; PDU_SEQ_LEN] {
    (seq as u32).to_be_bytes()
}

/// Splits a carried SDU into its sequence number and the application's
/// data; `None` when it is too short to hold the header.
pub fn split_pdu_seq(sdu: &[u8]) -> Option<(u32, &[u8])> {
    let (h, rest) = sdu.split_first_chunk::<PDU_SEQ_LEN>()?;
    Some((u32::from_be_bytes(*h), rest))
}

/// A parsed marker cell payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    /// The stripe the marker was sent on.
    pub stripe: u8,
    /// How many stripes the logical VC has.
    pub stripes: u8,
    /// The striping unit.
    pub unit: UnitKind,
    /// Sent because the sender went idle, not after K units.
    pub idle: bool,
    /// The sender's marker interval K.
    pub interval: u16,
    /// The stripe's state when the marker was sent.
    pub state: StripeState,
    /// The sender's quantum in bytes (48 for cells).
    pub quantum: u32,
}

/// Why a payload is not a marker this crate can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    /// The CRC-10 does not match.
    #[error("marker CRC-10 does not match")]
    Crc,
    /// The OAM type and function are not a stripe marker's.
    #[error("OAM cell of type/function {0:#04x} is not a stripe marker")]
    NotMarker(u8),
    /// A format version this crate does not know.
    #[error("marker version {0} is not supported")]
    Version(u8),
    /// An unknown unit kind code.
    #[error("marker unit code {0} is unknown")]
    UnitCode(u8),
    /// Reserved flag bits are set.
    #[error("marker flags {0:#04x} set reserved bits")]
    Flags(u8),
}

impl Marker {
    /// The header a marker carries on `vc`: F5 end-to-end OAM.
    pub fn header(vc: VcId, format: Format) -> Header {
        Header {
            format,
            pti: Pti::OamEndToEnd,
            ..Header::data(vc)
        }
    }

    /// True when a cell's header and first payload byte say it is a marker
    /// (its CRC and fields are checked by [`Marker::parse`]).
    pub fn is_marker_cell(cell: &CellBytes) -> bool {
        Pti::from_bits(cell[3] >> 1) == Pti::OamEndToEnd && cell[HEADER_LEN] == MARKER_ID
    }

    /// The 48-byte payload, CRC-10 included.
    pub fn emit(&self) -> PayloadBytes {
        let mut body = [aurora_wire::oam::UNUSED; 45];
        // Offsets below are payload offsets minus one (the body starts at 1).
        body[0] = MARKER_VERSION;
        body[1] = self.stripe;
        body[2] = self.stripes;
        body[3] = self.unit.code();
        body[4] = if self.idle { MARKER_FLAG_IDLE } else { 0 };
        body[5..7].copy_from_slice(&self.interval.to_be_bytes());
        body[7..15].copy_from_slice(&self.state.count.to_be_bytes());
        body[15..23].copy_from_slice(&self.state.round.to_be_bytes());
        body[23..27].copy_from_slice(&(self.state.credit as i32).to_be_bytes());
        body[27..31].copy_from_slice(&self.quantum.to_be_bytes());
        OamRepr {
            function: OamFunction::Unknown {
                oam_type: MARKER_OAM_TYPE,
                function: MARKER_FUNCTION,
                body,
            },
        }
        .emit()
    }

    /// Reads a marker payload, checking its CRC-10 and fixed fields.
    pub fn parse(payload: &PayloadBytes) -> Result<Marker, MarkerError> {
        let repr = OamRepr::parse(payload).map_err(|_| MarkerError::Crc)?;
        let body = match repr.function {
            OamFunction::Unknown {
                oam_type: MARKER_OAM_TYPE,
                function: MARKER_FUNCTION,
                body,
            } => body,
            _ => return Err(MarkerError::NotMarker(payload[0])),
        };
        if body[0] != MARKER_VERSION {
            return Err(MarkerError::Version(body[0]));
        }
        let unit = UnitKind::from_code(body[3]).ok_or(MarkerError::UnitCode(body[3]))?;
        if body[4] & !MARKER_FLAG_IDLE != 0 {
            return Err(MarkerError::Flags(body[4]));
        }
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&body[i..i + 8]);
            u64::from_be_bytes(b)
        };
        let u32_at =
            |i: usize| u32::from_be_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
        Ok(Marker {
            stripe: body[1],
            stripes: body[2],
            unit,
            idle: body[4] & MARKER_FLAG_IDLE != 0,
            interval: u16::from_be_bytes([body[5], body[6]]),
            state: StripeState {
                count: u64_at(7),
                round: u64_at(15),
                credit: i64::from(u32_at(23) as i32),
            },
            quantum: u32_at(27),
        })
    }

    /// The whole marker cell on `vc`.
    pub fn to_cell(&self, vc: VcId, format: Format) -> Result<CellBytes, aurora_wire::Error> {
        aurora_wire::cell::build_cell(&Self::header(vc, format), &self.emit())
    }
}

/// The payload of a cell as an array (cells are always 53 bytes).
pub(crate) fn payload_of(cell: &CellBytes) -> &PayloadBytes {
    cell[HEADER_LEN..CELL_LEN]
        .try_into()
        .expect("a cell holds 48 payload bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_wire::crc;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn cell_sequence_known_answer() {
        let mut p = [0xEEu8; 48];
        put_cell_seq(&mut p, 0x1_2345);
        assert_eq!(&p[..3], &[0x23, 0x45, 0xEE]);
        assert_eq!(cell_seq(&p), 0x2345);
        assert_eq!(CELL_SEQ_DATA_LEN, 46);
    }

    #[test]
    fn pdu_sequence_known_answer() {
        assert_eq!(pdu_seq_header(0x1_DEAD_BEEF), [0xDE, 0xAD, 0xBE, 0xEF]);
        let sdu = [0xDE, 0xAD, 0xBE, 0xEF, 1, 2, 3];
        assert_eq!(split_pdu_seq(&sdu), Some((0xDEAD_BEEF, &[1u8, 2, 3][..])));
        assert_eq!(split_pdu_seq(&sdu[..4]), Some((0xDEAD_BEEF, &[][..])));
        assert_eq!(split_pdu_seq(&sdu[..3]), None);
    }

    fn sample() -> Marker {
        Marker {
            stripe: 2,
            stripes: 4,
            unit: UnitKind::Pdu,
            idle: true,
            interval: 32,
            state: StripeState {
                count: 0x0102_0304_0506_0708,
                round: 0x1122_3344_5566_7788,
                credit: -1000,
            },
            quantum: 1536,
        }
    }

    #[test]
    fn marker_known_answer() {
        let p = sample().emit();
        // Field by field.
        assert_eq!(p[0], 0xF5);
        assert_eq!(&p[1..8], &[1, 2, 4, 2, 1, 0x00, 0x20]);
        assert_eq!(&p[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            &p[16..24],
            &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
        );
        assert_eq!(&p[24..28], &[0xFF, 0xFF, 0xFC, 0x18]);
        assert_eq!(&p[28..32], &[0x00, 0x00, 0x06, 0x00]);
        assert!(p[32..46].iter().all(|&b| b == 0x6A));
        assert_eq!(p[46] & 0xFC, 0);
        assert!(crc::crc10_ok(&p));
        // The whole payload; the CRC-10 (0x10F) was checked against a
        // bit-by-bit CRC-10/ATM written apart from the crate.
        assert_eq!(
            hex(&p),
            concat!(
                "f5010204020100200102030405060708",
                "1122334455667788fffffc1800000600",
                "6a6a6a6a6a6a6a6a6a6a6a6a6a6a010f",
            )
        );
        assert_eq!(Marker::parse(&p), Ok(sample()));

        // The whole cell on VC 1.42, UNI: PTI 101, CLP 0.
        let cell = sample().to_cell(VcId::new(1, 42), Format::Uni).unwrap();
        assert_eq!(&cell[..4], &[0x00, 0x10, 0x02, 0xAA]);
        assert_eq!(cell[4], crc::hec(&[0x00, 0x10, 0x02, 0xAA]));
        assert!(Marker::is_marker_cell(&cell));
        assert_eq!(payload_of(&cell), &p);
    }

    #[test]
    fn marker_cell_marker_known_answer() {
        // A cell-unit marker: first stripe of two, 3 cells sent, round 3.
        let m = Marker {
            stripe: 0,
            stripes: 2,
            unit: UnitKind::Cell,
            idle: false,
            interval: 3,
            state: StripeState {
                count: 3,
                round: 3,
                credit: 0,
            },
            quantum: 48,
        };
        // The whole cell on VC 0.100: header 00 00 06 4A, HEC 0xDA; payload
        // CRC-10 0x265. Both checked with bit-by-bit implementations
        // written apart from the crate (HEC check value 0xA1, CRC-10 0x199).
        let cell = m.to_cell(VcId::new(0, 100), Format::Uni).unwrap();
        assert_eq!(
            hex(&cell),
            concat!(
                "0000064ada",
                "f5010002010000030000000000000003",
                "00000000000000030000000000000030",
                "6a6a6a6a6a6a6a6a6a6a6a6a6a6a0265",
            )
        );
        let p = *payload_of(&cell);
        assert_eq!(Marker::parse(&p), Ok(m));
    }

    #[test]
    fn marker_rejections() {
        let good = sample().emit();
        let mut p = good;
        p[10] ^= 1;
        assert_eq!(Marker::parse(&p), Err(MarkerError::Crc));
        let fix = |mut p: PayloadBytes| {
            crc::set_crc10_field(&mut p);
            p
        };
        let mut p = good;
        p[0] = 0x18; // fault management, loopback
        assert_eq!(Marker::parse(&fix(p)), Err(MarkerError::NotMarker(0x18)));
        let mut p = good;
        p[1] = 2;
        assert_eq!(Marker::parse(&fix(p)), Err(MarkerError::Version(2)));
        let mut p = good;
        p[4] = 9;
        assert_eq!(Marker::parse(&fix(p)), Err(MarkerError::UnitCode(9)));
        let mut p = good;
        p[5] = 0x81;
        assert_eq!(Marker::parse(&fix(p)), Err(MarkerError::Flags(0x81)));
    }
}
