//! The 53-byte ATM cell and its header.
//!
//! ```text
//! UNI header                         NNI header
//!  byte 0: GFC(4)  VPI[7:4]           byte 0: VPI[11:4]
//!  byte 1: VPI[3:0] VCI[15:12]        byte 1: VPI[3:0] VCI[15:12]
//!  byte 2: VCI[11:4]                  byte 2: VCI[11:4]
//!  byte 3: VCI[3:0] PTI(3) CLP(1)     byte 3: VCI[3:0] PTI(3) CLP(1)
//!  byte 4: HEC                        byte 4: HEC
//!  bytes 5..53: payload (48 bytes)
//! ```

use core::fmt;

use crate::crc;
use crate::{Error, Result, CELL_LEN, HEADER_LEN, PAYLOAD_LEN};

/// Pre-assigned VCI: unassigned cells (and, with CLP = 1 on VPI 0, idle cells).
pub const VCI_UNASSIGNED: u16 = 0;
/// Pre-assigned VCI: meta-signalling.
pub const VCI_META_SIGNALLING: u16 = 1;
/// Pre-assigned VCI: general broadcast signalling.
pub const VCI_BROADCAST_SIGNALLING: u16 = 2;
/// Pre-assigned VCI: segment F4 OAM flow of a virtual path.
pub const VCI_F4_SEGMENT: u16 = 3;
/// Pre-assigned VCI: end-to-end F4 OAM flow of a virtual path.
pub const VCI_F4_END_TO_END: u16 = 4;
/// Pre-assigned VCI: point-to-point signalling (Q.2931 / UNI 3.x SAAL).
pub const VCI_SIGNALLING: u16 = 5;
/// Pre-assigned VCI: VP resource management cells.
pub const VCI_VP_RESOURCE_MANAGEMENT: u16 = 6;
/// Pre-assigned VCI: ILMI (interim local management interface).
pub const VCI_ILMI: u16 = 16;
/// Pre-assigned VCI: PNNI routing.
pub const VCI_PNNI: u16 = 18;
/// The lowest VCI left to users; 0..=31 are reserved.
pub const VCI_FIRST_USER: u16 = 32;

/// Which header layout a cell uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Format {
    /// User-network interface: 4-bit GFC, 8-bit VPI.
    #[default]
    Uni,
    /// Network-network interface: 12-bit VPI, no GFC.
    Nni,
}

impl Format {
    /// The largest VPI this format can carry.
    pub const fn max_vpi(self) -> u16 {
        match self {
            Format::Uni => 255,
            Format::Nni => 4095,
        }
    }
}

/// The payload type indicator (three bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pti {
    /// User data (PTI 0..=3).
    User {
        /// EFCI: congestion was experienced on the way (middle bit).
        congestion: bool,
        /// The ATM-user-to-ATM-user bit (low bit). AAL5 sets it on the last
        /// cell of a PDU.
        auu: bool,
    },
    /// OAM F5 segment flow (PTI 4).
    OamSegment,
    /// OAM F5 end-to-end flow (PTI 5).
    OamEndToEnd,
    /// Resource management (PTI 6).
    ResourceManagement,
    /// Reserved for future use (PTI 7).
    Reserved,
}

impl Pti {
    /// Plain user data, neither congested nor end of PDU.
    pub const DATA: Pti = Pti::User {
        congestion: false,
        auu: false,
    };
    /// User data that ends an AAL5 PDU.
    pub const DATA_END: Pti = Pti::User {
        congestion: false,
        auu: true,
    };

    /// Decodes the three PTI bits (higher bits are ignored).
    pub const fn from_bits(bits: u8) -> Pti {
        match bits & 7 {
            b @ 0..=3 => Pti::User {
                congestion: b & 2 != 0,
                auu: b & 1 != 0,
            },
            4 => Pti::OamSegment,
            5 => Pti::OamEndToEnd,
            6 => Pti::ResourceManagement,
            _ => Pti::Reserved,
        }
    }

    /// Encodes to the three PTI bits.
    pub const fn bits(self) -> u8 {
        match self {
            Pti::User { congestion, auu } => ((congestion as u8) << 1) | auu as u8,
            Pti::OamSegment => 4,
            Pti::OamEndToEnd => 5,
            Pti::ResourceManagement => 6,
            Pti::Reserved => 7,
        }
    }

    /// True for user-data cells.
    pub const fn is_user(self) -> bool {
        matches!(self, Pti::User { .. })
    }

    /// True for a user-data cell with the AUU bit set.
    pub const fn is_end_of_pdu(self) -> bool {
        matches!(self, Pti::User { auu: true, .. })
    }
}

/// A virtual circuit identifier pair, the key by which cells are switched and
/// reassembled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VcId {
    /// Virtual path identifier (≤ 255 at a UNI, ≤ 4095 at an NNI).
    pub vpi: u16,
    /// Virtual channel identifier.
    pub vci: u16,
}

impl VcId {
    /// The VC `vpi.vci`.
    pub const fn new(vpi: u16, vci: u16) -> Self {
        VcId { vpi, vci }
    }
}

impl fmt::Display for VcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.vpi, self.vci)
    }
}

/// A parsed cell header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// UNI or NNI layout.
    pub format: Format,
    /// Generic flow control (UNI only; must be 0 for NNI).
    pub gfc: u8,
    /// Virtual path identifier.
    pub vpi: u16,
    /// Virtual channel identifier.
    pub vci: u16,
    /// Payload type.
    pub pti: Pti,
    /// Cell loss priority: true marks the cell as discard-eligible.
    pub clp: bool,
}

impl Header {
    /// A UNI user-data header for `vc`, with every other field zero.
    pub const fn data(vc: VcId) -> Header {
        Header {
            format: Format::Uni,
            gfc: 0,
            vpi: vc.vpi,
            vci: vc.vci,
            pti: Pti::DATA,
            clp: false,
        }
    }

    /// The header's VC.
    pub const fn vc(&self) -> VcId {
        VcId::new(self.vpi, self.vci)
    }

    /// Reads the first four header bytes (the HEC is not looked at).
    pub fn parse(bytes: &[u8; 4], format: Format) -> Header {
        let vci = (u16::from(bytes[1] & 0x0F) << 12)
            | (u16::from(bytes[2]) << 4)
            | u16::from(bytes[3] >> 4);
        let (gfc, vpi) = match format {
            Format::Uni => (
                bytes[0] >> 4,
                (u16::from(bytes[0] & 0x0F) << 4) | u16::from(bytes[1] >> 4),
            ),
            Format::Nni => (0, (u16::from(bytes[0]) << 4) | u16::from(bytes[1] >> 4)),
        };
        Header {
            format,
            gfc,
            vpi,
            vci,
            pti: Pti::from_bits(bytes[3] >> 1),
            clp: bytes[3] & 1 != 0,
        }
    }

    /// Checks every field fits its width in this header's format.
    pub fn check(&self) -> Result<()> {
        if self.vpi > self.format.max_vpi() {
            return Err(Error::FieldRange {
                field: "vpi",
                value: self.vpi.into(),
            });
        }
        let gfc_max = match self.format {
            Format::Uni => 15,
            Format::Nni => 0,
        };
        if self.gfc > gfc_max {
            return Err(Error::FieldRange {
                field: "gfc",
                value: self.gfc.into(),
            });
        }
        Ok(())
    }

    /// The four header bytes without HEC. Fields wider than the format allows
    /// are an error.
    pub fn to_bytes4(&self) -> Result<[u8; 4]> {
        self.check()?;
        let top = match self.format {
            Format::Uni => (self.gfc << 4) | (self.vpi >> 4) as u8,
            Format::Nni => (self.vpi >> 4) as u8,
        };
        Ok([
            top,
            ((self.vpi as u8 & 0x0F) << 4) | (self.vci >> 12) as u8,
            (self.vci >> 4) as u8,
            ((self.vci as u8 & 0x0F) << 4) | (self.pti.bits() << 1) | self.clp as u8,
        ])
    }

    /// The five header bytes, HEC included.
    pub fn to_bytes(&self) -> Result<[u8; HEADER_LEN]> {
        let b = self.to_bytes4()?;
        Ok([b[0], b[1], b[2], b[3], crc::hec(&b)])
    }

    /// Writes the five header bytes, HEC included, to the front of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let got = buf.len();
        let out = buf.get_mut(..HEADER_LEN).ok_or(Error::Length {
            expected: HEADER_LEN,
            got,
        })?;
        out.copy_from_slice(&self.to_bytes()?);
        Ok(())
    }

    /// True for the physical layer's idle cell (header 00 00 00 01).
    pub fn is_idle(&self) -> bool {
        self.gfc == 0 && self.vpi == 0 && self.vci == 0 && self.pti.bits() == 0 && self.clp
    }

    /// True for an unassigned cell (VPI 0, VCI 0, CLP 0).
    pub fn is_unassigned(&self) -> bool {
        self.vpi == 0 && self.vci == 0 && !self.clp
    }
}

/// The header bytes of an idle cell, HEC included.
pub const IDLE_HEADER: [u8; HEADER_LEN] = [0x00, 0x00, 0x00, 0x01, 0x52];

/// A zero-copy view of one 53-byte cell.
#[derive(Clone, Copy, Debug)]
pub struct Cell<T> {
    buf: T,
}

impl<T: AsRef<[u8]>> Cell<T> {
    /// Wraps a buffer without checking its size. Accessors panic if it is
    /// not exactly [`CELL_LEN`] bytes; use [`Cell::new_checked`] for input.
    pub const fn new_unchecked(buf: T) -> Self {
        Cell { buf }
    }

    /// Wraps a buffer that must hold exactly one cell.
    pub fn new_checked(buf: T) -> Result<Self> {
        let got = buf.as_ref().len();
        if got != CELL_LEN {
            return Err(Error::Length {
                expected: CELL_LEN,
                got,
            });
        }
        Ok(Cell { buf })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// The four header bytes before the HEC.
    pub fn header_bytes(&self) -> [u8; 4] {
        let b = self.buf.as_ref();
        [b[0], b[1], b[2], b[3]]
    }

    /// The header, read in the given format.
    pub fn header(&self, format: Format) -> Header {
        Header::parse(&self.header_bytes(), format)
    }

    /// The VC of a UNI cell.
    pub fn vc(&self) -> VcId {
        self.header(Format::Uni).vc()
    }

    /// The payload type.
    pub fn pti(&self) -> Pti {
        Pti::from_bits(self.buf.as_ref()[3] >> 1)
    }

    /// The cell loss priority bit.
    pub fn clp(&self) -> bool {
        self.buf.as_ref()[3] & 1 != 0
    }

    /// The HEC byte as received.
    pub fn hec(&self) -> u8 {
        self.buf.as_ref()[4]
    }

    /// True when the HEC matches the header.
    pub fn hec_ok(&self) -> bool {
        crc::hec(&self.header_bytes()) == self.hec()
    }

    /// The 48-byte payload.
    pub fn payload(&self) -> &[u8; PAYLOAD_LEN] {
        self.buf.as_ref()[HEADER_LEN..CELL_LEN]
            .try_into()
            .expect("cell length checked at construction")
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Cell<T> {
    /// The 48-byte payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8; PAYLOAD_LEN] {
        (&mut self.buf.as_mut()[HEADER_LEN..CELL_LEN])
            .try_into()
            .expect("cell length checked at construction")
    }

    /// Rewrites the header (and its HEC).
    pub fn set_header(&mut self, header: &Header) -> Result<()> {
        header.emit(self.buf.as_mut())
    }

    /// Recomputes the HEC from the header bytes.
    pub fn fill_hec(&mut self) {
        let h = self.header_bytes();
        self.buf.as_mut()[4] = crc::hec(&h);
    }
}

/// Builds a whole cell from a header and a payload.
pub fn build_cell(header: &Header, payload: &[u8; PAYLOAD_LEN]) -> Result<[u8; CELL_LEN]> {
    let mut cell = [0u8; CELL_LEN];
    header.emit(&mut cell)?;
    cell[HEADER_LEN..].copy_from_slice(payload);
    Ok(cell)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_header_bytes() {
        // VPI 1, VCI 42, user data, last cell of a PDU.
        let h = Header {
            pti: Pti::DATA_END,
            ..Header::data(VcId::new(1, 42))
        };
        let b = h.to_bytes().unwrap();
        assert_eq!(&b[..4], &[0x00, 0x10, 0x02, 0xA2]);
        assert_eq!(b[4], crc::hec(&[0x00, 0x10, 0x02, 0xA2]));
        assert_eq!(Header::parse(&[0x00, 0x10, 0x02, 0xA2], Format::Uni), h);
        // Idle cell.
        let idle = Header::parse(&[0, 0, 0, 1], Format::Uni);
        assert!(idle.is_idle());
        assert_eq!(idle.to_bytes().unwrap(), IDLE_HEADER);
    }

    #[test]
    fn nni_carries_a_12_bit_vpi() {
        let h = Header {
            format: Format::Nni,
            ..Header::data(VcId::new(4095, 65535))
        };
        let b = h.to_bytes4().unwrap();
        assert_eq!(b, [0xFF, 0xFF, 0xFF, 0xF0]);
        assert_eq!(Header::parse(&b, Format::Nni), h);
        let too_big = Header::data(VcId::new(256, 1));
        assert_eq!(
            too_big.to_bytes(),
            Err(Error::FieldRange {
                field: "vpi",
                value: 256
            })
        );
    }

    #[test]
    fn view_rejects_wrong_sizes() {
        assert!(Cell::new_checked(&[0u8; 52][..]).is_err());
        assert!(Cell::new_checked(&[0u8; 54][..]).is_err());
        let c = Cell::new_checked([0u8; 53]).unwrap();
        assert!(!c.hec_ok());
    }

    proptest! {
        #[test]
        fn header_round_trips(gfc in 0u8..16, vpi in 0u16..256, vci: u16, pti in 0u8..8, clp: bool, nni: bool) {
            let format = if nni { Format::Nni } else { Format::Uni };
            let h = Header { format, gfc: if nni { 0 } else { gfc }, vpi, vci, pti: Pti::from_bits(pti), clp };
            let bytes = h.to_bytes().unwrap();
            let cell = build_cell(&h, &[7u8; 48]).unwrap();
            let view = Cell::new_checked(&cell[..]).unwrap();
            prop_assert!(view.hec_ok());
            prop_assert_eq!(view.header(format), h);
            prop_assert_eq!(Header::parse(&[bytes[0], bytes[1], bytes[2], bytes[3]], format), h);
        }

        #[test]
        fn any_bytes_parse_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..60)) {
            if let Ok(c) = Cell::new_checked(&bytes[..]) {
                let _ = (c.header(Format::Uni), c.header(Format::Nni), c.hec_ok(), c.payload(), c.pti());
            }
        }
    }
}
