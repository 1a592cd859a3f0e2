//! VuNet's 56-byte cell.
//!
//! VuNet's switches and links moved cells over 64-bit data paths, so its cell
//! was stretched from 53 to 56 bytes to make every cell, and its payload, a
//! whole number of quadwords. Links between VuNet devices are short and
//! protected by their own framing, so the cell carries no per-hop HEC. Aurora
//! uses this layout (the papers give the size and the alignment, not a byte
//! map, so this layout is Aurora's own definition):
//!
//! ```text
//!  offset  size  field
//!  0       4     ATM header without HEC: the same 32 bits as bytes 0..4 of a
//!                53-byte UNI/NNI cell (GFC/VPI, VCI, PTI, CLP)
//!  4       4     reserved: written as zero, ignored on receipt
//!  8       48    payload, starting on a 64-bit boundary
//! ```
//!
//! Converting to a 53-byte cell computes a fresh HEC; converting from one
//! drops it (check it first with [`crate::hec::HecReceiver`]).

use crate::cell::{Format, Header};
use crate::crc;
use crate::{CellBytes, Error, Result, CELL_LEN, HEADER_LEN, PAYLOAD_LEN};

/// Size of a VuNet cell.
pub const VUNET_CELL_LEN: usize = 56;
/// Offset of the payload in a VuNet cell.
pub const VUNET_PAYLOAD_OFFSET: usize = 8;

/// One VuNet cell as bytes.
pub type VuCellBytes = [u8; VUNET_CELL_LEN];

/// A zero-copy view of a 56-byte VuNet cell.
#[derive(Clone, Copy, Debug)]
pub struct VuCell<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> VuCell<T> {
    /// Wraps a buffer without checking its size (accessors panic unless it is
    /// exactly 56 bytes).
    pub const fn new_unchecked(buf: T) -> Self {
        VuCell { buf }
    }

    /// Wraps a buffer that must hold exactly one VuNet cell.
    pub fn new_checked(buf: T) -> Result<Self> {
        let got = buf.as_ref().len();
        if got != VUNET_CELL_LEN {
            return Err(Error::Length {
                expected: VUNET_CELL_LEN,
                got,
            });
        }
        Ok(VuCell { buf })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// The four header bytes.
    pub fn header_bytes(&self) -> [u8; 4] {
        let b = self.buf.as_ref();
        [b[0], b[1], b[2], b[3]]
    }

    /// The header, read in the given format.
    pub fn header(&self, format: Format) -> Header {
        Header::parse(&self.header_bytes(), format)
    }

    /// The 48-byte payload.
    pub fn payload(&self) -> &[u8; PAYLOAD_LEN] {
        self.buf.as_ref()[VUNET_PAYLOAD_OFFSET..VUNET_CELL_LEN]
            .try_into()
            .expect("length checked at construction")
    }

    /// The equivalent 53-byte cell, with its HEC computed.
    pub fn to_atm(&self) -> CellBytes {
        let mut out = [0u8; CELL_LEN];
        let h = self.header_bytes();
        out[..4].copy_from_slice(&h);
        out[4] = crc::hec(&h);
        out[HEADER_LEN..].copy_from_slice(self.payload());
        out
    }
}

/// Builds a VuNet cell from a header and payload.
pub fn build_vucell(header: &Header, payload: &[u8; PAYLOAD_LEN]) -> Result<VuCellBytes> {
    let mut out = [0u8; VUNET_CELL_LEN];
    out[..4].copy_from_slice(&header.to_bytes4()?);
    out[VUNET_PAYLOAD_OFFSET..].copy_from_slice(payload);
    Ok(out)
}

/// Writes `header`'s four bytes into VuNet cell `v`, as a bridge does
/// when it gives a cell another VC or header format (the payload and the
/// reserved bytes stay as they are).
pub fn set_header(v: &mut VuCellBytes, header: &Header) -> Result<()> {
    v[..4].copy_from_slice(&header.to_bytes4()?);
    Ok(())
}

/// The VuNet form of a 53-byte cell. The HEC is dropped unchecked.
pub fn from_atm(cell: &CellBytes) -> VuCellBytes {
    let mut out = [0u8; VUNET_CELL_LEN];
    out[..4].copy_from_slice(&cell[..4]);
    out[VUNET_PAYLOAD_OFFSET..].copy_from_slice(&cell[HEADER_LEN..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{Cell, Pti, VcId};

    #[test]
    fn known_layout() {
        let h = Header {
            pti: Pti::DATA_END,
            clp: true,
            ..Header::data(VcId::new(0x12, 0x3456))
        };
        let mut payload = [0u8; 48];
        payload
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        let v = build_vucell(&h, &payload).unwrap();
        assert_eq!(&v[..8], &[0x01, 0x23, 0x45, 0x63, 0, 0, 0, 0]);
        assert_eq!(v[8], 0);
        assert_eq!(v[55], 47);
        let atm = VuCell::new_checked(&v[..]).unwrap().to_atm();
        let view = Cell::new_checked(&atm[..]).unwrap();
        assert!(view.hec_ok());
        assert_eq!(view.header(Format::Uni), h);
        assert_eq!(from_atm(&atm), v);
    }

    #[test]
    fn reserved_bytes_are_ignored_on_receipt() {
        let mut v = build_vucell(&Header::data(VcId::new(0, 99)), &[1; 48]).unwrap();
        v[4..8].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let cell = VuCell::new_checked(v).unwrap();
        assert_eq!(cell.header(Format::Uni).vci, 99);
        assert!(VuCell::new_checked(&v[..55]).is_err());
    }
}
