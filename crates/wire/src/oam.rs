//! OAM cells (ITU-T I.610): fault management on F4 (virtual path) and F5
//! (virtual channel) flows.
//!
//! A cell is an OAM cell by its header: F4 cells travel on the path's
//! pre-assigned VCIs 3 (segment) and 4 (end-to-end); F5 cells travel on the
//! channel itself with PTI 4 (segment) or 5 (end-to-end). The 48-byte payload:
//!
//! ```text
//!  byte 0      OAM type (high nibble) | function type (low nibble)
//!  bytes 1..46 function-specific field (45 bytes; unused bytes are 0x6A)
//!  bytes 46..48 six reserved bits (zero) | CRC-10 over the first 374 bits
//! ```
//!
//! Fault-management functions decoded here: AIS, RDI, continuity check and
//! loopback. Other types and functions are kept as [`OamFunction::Unknown`].

use crate::cell::{Header, Pti, VcId, VCI_F4_END_TO_END, VCI_F4_SEGMENT};
use crate::crc;
use crate::{Error, PayloadBytes, Result, PAYLOAD_LEN};

/// OAM type: fault management.
pub const TYPE_FAULT_MANAGEMENT: u8 = 0b0001;
/// Fault-management function: alarm indication signal.
pub const FN_AIS: u8 = 0b0000;
/// Fault-management function: remote defect indication.
pub const FN_RDI: u8 = 0b0001;
/// Fault-management function: continuity check.
pub const FN_CONTINUITY_CHECK: u8 = 0b0100;
/// Fault-management function: loopback.
pub const FN_LOOPBACK: u8 = 0b1000;
/// Filler for unused bytes of the function-specific field.
pub const UNUSED: u8 = 0x6A;
/// Loopback location ID meaning "the end point of the connection".
pub const LOCATION_END_POINT: [u8; 16] = [0xFF; 16];

const BODY: core::ops::Range<usize> = 1..46;

/// Which OAM flow a cell belongs to, read from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OamFlow {
    /// F4 (virtual path), segment: VCI 3.
    F4Segment,
    /// F4 (virtual path), end-to-end: VCI 4.
    F4EndToEnd,
    /// F5 (virtual channel), segment: PTI 4.
    F5Segment,
    /// F5 (virtual channel), end-to-end: PTI 5.
    F5EndToEnd,
}

impl OamFlow {
    /// The flow of a cell with this header, if it is an OAM cell.
    pub fn of(header: &Header) -> Option<OamFlow> {
        match header.pti {
            Pti::OamSegment => Some(OamFlow::F5Segment),
            Pti::OamEndToEnd => Some(OamFlow::F5EndToEnd),
            Pti::User { .. } if header.vci == VCI_F4_SEGMENT => Some(OamFlow::F4Segment),
            Pti::User { .. } if header.vci == VCI_F4_END_TO_END => Some(OamFlow::F4EndToEnd),
            _ => None,
        }
    }

    /// The header an OAM cell of this flow carries on `vc` (for F4 flows only
    /// the VPI of `vc` is used).
    pub fn header(self, vc: VcId) -> Header {
        let base = Header::data(vc);
        match self {
            OamFlow::F4Segment => Header {
                vci: VCI_F4_SEGMENT,
                ..base
            },
            OamFlow::F4EndToEnd => Header {
                vci: VCI_F4_END_TO_END,
                ..base
            },
            OamFlow::F5Segment => Header {
                pti: Pti::OamSegment,
                ..base
            },
            OamFlow::F5EndToEnd => Header {
                pti: Pti::OamEndToEnd,
                ..base
            },
        }
    }

    /// True for the end-to-end flows.
    pub fn is_end_to_end(self) -> bool {
        matches!(self, OamFlow::F4EndToEnd | OamFlow::F5EndToEnd)
    }
}

/// The decoded OAM payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OamFunction {
    /// Alarm indication signal, sent downstream by the node that saw a defect.
    Ais {
        /// Defect type code (0x6A when not given).
        defect_type: u8,
        /// Where the defect is (0x6A bytes when not given).
        defect_location: [u8; 16],
    },
    /// Remote defect indication, sent back upstream by the end that gets AIS.
    Rdi {
        /// Defect type code.
        defect_type: u8,
        /// Where the defect is.
        defect_location: [u8; 16],
    },
    /// Continuity check: "this connection is alive".
    ContinuityCheck,
    /// Loopback request (`indication` true) or its looped-back answer (false).
    Loopback {
        /// True in a request; the node that loops it back clears it.
        indication: bool,
        /// Matches an answer to its request.
        correlation_tag: u32,
        /// The node that should loop the cell back.
        location_id: [u8; 16],
        /// The originator's identity.
        source_id: [u8; 16],
    },
    /// Any other OAM type or function, kept whole.
    Unknown {
        /// OAM type nibble.
        oam_type: u8,
        /// Function type nibble.
        function: u8,
        /// The 45-byte function-specific field.
        body: [u8; 45],
    },
}

/// A parsed OAM cell payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OamRepr {
    /// What the cell says.
    pub function: OamFunction,
}

fn arr16(b: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&b[..16]);
    out
}

impl OamRepr {
    /// Parses a 48-byte payload, checking its CRC-10.
    pub fn parse(payload: &[u8]) -> Result<OamRepr> {
        let p: &PayloadBytes = payload.try_into().map_err(|_| Error::Length {
            expected: PAYLOAD_LEN,
            got: payload.len(),
        })?;
        if !crc::crc10_ok(p) {
            return Err(Error::Checksum);
        }
        let oam_type = p[0] >> 4;
        let function = p[0] & 0x0F;
        let body = &p[BODY];
        let f = match (oam_type, function) {
            (TYPE_FAULT_MANAGEMENT, FN_AIS) => OamFunction::Ais {
                defect_type: body[0],
                defect_location: arr16(&body[1..]),
            },
            (TYPE_FAULT_MANAGEMENT, FN_RDI) => OamFunction::Rdi {
                defect_type: body[0],
                defect_location: arr16(&body[1..]),
            },
            (TYPE_FAULT_MANAGEMENT, FN_CONTINUITY_CHECK) => OamFunction::ContinuityCheck,
            (TYPE_FAULT_MANAGEMENT, FN_LOOPBACK) => OamFunction::Loopback {
                indication: body[0] & 1 != 0,
                correlation_tag: u32::from_be_bytes([body[1], body[2], body[3], body[4]]),
                location_id: arr16(&body[5..]),
                source_id: arr16(&body[21..]),
            },
            _ => {
                let mut b = [0u8; 45];
                b.copy_from_slice(body);
                OamFunction::Unknown {
                    oam_type,
                    function,
                    body: b,
                }
            }
        };
        Ok(OamRepr { function: f })
    }

    /// The 48-byte payload, CRC-10 included.
    pub fn emit(&self) -> PayloadBytes {
        let mut p = [UNUSED; PAYLOAD_LEN];
        let (t, f) = match self.function {
            OamFunction::Ais {
                defect_type,
                defect_location,
            }
            | OamFunction::Rdi {
                defect_type,
                defect_location,
            } => {
                p[1] = defect_type;
                p[2..18].copy_from_slice(&defect_location);
                let f = if matches!(self.function, OamFunction::Ais { .. }) {
                    FN_AIS
                } else {
                    FN_RDI
                };
                (TYPE_FAULT_MANAGEMENT, f)
            }
            OamFunction::ContinuityCheck => (TYPE_FAULT_MANAGEMENT, FN_CONTINUITY_CHECK),
            OamFunction::Loopback {
                indication,
                correlation_tag,
                location_id,
                source_id,
            } => {
                p[1] = indication as u8;
                p[2..6].copy_from_slice(&correlation_tag.to_be_bytes());
                p[6..22].copy_from_slice(&location_id);
                p[22..38].copy_from_slice(&source_id);
                (TYPE_FAULT_MANAGEMENT, FN_LOOPBACK)
            }
            OamFunction::Unknown {
                oam_type,
                function,
                body,
            } => {
                p[BODY].copy_from_slice(&body);
                (oam_type & 0x0F, function & 0x0F)
            }
        };
        p[0] = (t << 4) | f;
        p[46] = 0; // six reserved bits
        crc::set_crc10_field(&mut p);
        p
    }

    /// A loopback request to the far end point.
    pub fn loopback_request(correlation_tag: u32, source_id: [u8; 16]) -> OamRepr {
        OamRepr {
            function: OamFunction::Loopback {
                indication: true,
                correlation_tag,
                location_id: LOCATION_END_POINT,
                source_id,
            },
        }
    }

    /// The answer to a loopback request (indication cleared), or `None` when
    /// this is not a loopback request.
    pub fn loopback_reply(&self) -> Option<OamRepr> {
        match self.function {
            OamFunction::Loopback {
                indication: true,
                correlation_tag,
                location_id,
                source_id,
            } => Some(OamRepr {
                function: OamFunction::Loopback {
                    indication: false,
                    correlation_tag,
                    location_id,
                    source_id,
                },
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::Format;

    #[test]
    fn loopback_known_bytes_and_round_trip() {
        let r = OamRepr::loopback_request(0x0102_0304, [0xAB; 16]);
        let p = r.emit();
        assert_eq!(p[0], 0x18);
        assert_eq!(p[1], 0x01);
        assert_eq!(&p[2..6], &[1, 2, 3, 4]);
        assert_eq!(&p[6..22], &[0xFF; 16]);
        assert_eq!(&p[22..38], &[0xAB; 16]);
        assert_eq!(&p[38..46], &[0x6A; 8]);
        assert!(crc::crc10_ok(&p));
        assert_eq!(OamRepr::parse(&p).unwrap(), r);
        let reply = r.loopback_reply().unwrap();
        assert!(reply.loopback_reply().is_none());
    }

    #[test]
    fn continuity_check_is_all_filler() {
        let p = OamRepr {
            function: OamFunction::ContinuityCheck,
        }
        .emit();
        assert_eq!(p[0], 0x14);
        assert!(p[1..46].iter().all(|&b| b == UNUSED));
        assert_eq!(p[46] & 0xFC, 0);
    }

    #[test]
    fn ais_rdi_unknown_round_trip_and_bad_crc_rejected() {
        for f in [
            OamFunction::Ais {
                defect_type: 3,
                defect_location: [9; 16],
            },
            OamFunction::Rdi {
                defect_type: 4,
                defect_location: [7; 16],
            },
            OamFunction::Unknown {
                oam_type: 2,
                function: 1,
                body: [0x55; 45],
            },
        ] {
            let r = OamRepr { function: f };
            let mut p = r.emit();
            assert_eq!(OamRepr::parse(&p), Ok(r));
            p[10] ^= 1;
            assert_eq!(OamRepr::parse(&p), Err(Error::Checksum));
        }
        assert!(OamRepr::parse(&[0; 47]).is_err());
    }

    #[test]
    fn flows_come_from_the_header() {
        let vc = VcId::new(2, 77);
        for flow in [
            OamFlow::F4Segment,
            OamFlow::F4EndToEnd,
            OamFlow::F5Segment,
            OamFlow::F5EndToEnd,
        ] {
            let h = flow.header(vc);
            let back = Header::parse(&h.to_bytes4().unwrap(), Format::Uni);
            assert_eq!(OamFlow::of(&back), Some(flow));
        }
        assert_eq!(OamFlow::of(&Header::data(vc)), None);
    }
}
