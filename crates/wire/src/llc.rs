//! Multiprotocol encapsulation over AAL5 (RFC 2684).
//!
//! Two ways to say what an AAL5 SDU carries:
//!
//! * **LLC encapsulation**: the SDU starts with an IEEE 802.2 LLC header,
//!   and for the protocols here a SNAP header naming an OUI and a protocol
//!   identifier, so many protocols share one VC:
//!
//!   ```text
//!   routed IPv4    AA AA 03  00 00 00  08 00   IPv4 packet
//!   routed IPv6    AA AA 03  00 00 00  86 DD   IPv6 packet
//!   ATMARP         AA AA 03  00 00 00  08 06   ATMARP packet (RFC 2225)
//!   bridged 802.3  AA AA 03  00 80 C2  00 07   00 00 (pad)  Ethernet frame without FCS
//!   ```
//!
//! * **VC multiplexing** (null encapsulation): the VC itself says what it
//!   carries (agreed when the VC was set up), so the SDU is the packet
//!   alone; a bridged Ethernet frame still starts with two pad bytes.

use crate::{Error, Result};

/// LLC header of an LLC/SNAP PDU: DSAP AA, SSAP AA, control 03 (UI).
pub const LLC_SNAP: [u8; 3] = [0xAA, 0xAA, 0x03];
/// The OUI of routed protocols named by EtherType.
pub const OUI_ETHERTYPE: [u8; 3] = [0x00, 0x00, 0x00];
/// The OUI of IEEE 802.1 bridged protocols.
pub const OUI_8021: [u8; 3] = [0x00, 0x80, 0xC2];
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// EtherType of ARP, which ATMARP uses.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// PID of bridged 802.3/Ethernet without the frame check sequence.
pub const PID_ETHERNET_NO_FCS: u16 = 0x0007;
/// Length of an LLC/SNAP header.
pub const LLC_SNAP_LEN: usize = 8;
/// Pad between a bridged PDU's header and its Ethernet frame.
pub const BRIDGED_PAD_LEN: usize = 2;

/// What an SDU carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// An IPv4 packet.
    Ipv4,
    /// An IPv6 packet.
    Ipv6,
    /// An ATMARP (or InATMARP) packet.
    Atmarp,
    /// A bridged Ethernet frame without its FCS.
    Ethernet,
}

impl Protocol {
    /// The LLC/SNAP header for this protocol (a bridged frame's two pad
    /// bytes come after it).
    pub const fn llc_header(self) -> [u8; LLC_SNAP_LEN] {
        let (oui, pid) = match self {
            Protocol::Ipv4 => (OUI_ETHERTYPE, ETHERTYPE_IPV4),
            Protocol::Ipv6 => (OUI_ETHERTYPE, ETHERTYPE_IPV6),
            Protocol::Atmarp => (OUI_ETHERTYPE, ETHERTYPE_ARP),
            Protocol::Ethernet => (OUI_8021, PID_ETHERNET_NO_FCS),
        };
        let p = pid.to_be_bytes();
        [
            LLC_SNAP[0],
            LLC_SNAP[1],
            LLC_SNAP[2],
            oui[0],
            oui[1],
            oui[2],
            p[0],
            p[1],
        ]
    }
}

/// How a VC's SDUs say what they carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encapsulation {
    /// LLC/SNAP headers, any protocol on the VC.
    Llc,
    /// VC multiplexing: the VC carries this protocol only.
    VcMux(Protocol),
}

impl Encapsulation {
    /// Bytes the encapsulation puts in front of a `protocol` packet, or
    /// `None` if this VC cannot carry it.
    pub const fn header_len(self, protocol: Protocol) -> Option<usize> {
        let pad = if matches!(protocol, Protocol::Ethernet) {
            BRIDGED_PAD_LEN
        } else {
            0
        };
        match self {
            Encapsulation::Llc => Some(LLC_SNAP_LEN + pad),
            Encapsulation::VcMux(p) if p as u8 == protocol as u8 => Some(pad),
            Encapsulation::VcMux(_) => None,
        }
    }

    /// Writes the header for a `protocol` packet into the front of `buf`
    /// and returns its length.
    pub fn emit_header(self, protocol: Protocol, buf: &mut [u8]) -> Result<usize> {
        let n = self.header_len(protocol).ok_or(Error::Malformed(
            "protocol not carried on this VC-multiplexed VC",
        ))?;
        if buf.len() < n {
            return Err(Error::Length {
                expected: n,
                got: buf.len(),
            });
        }
        if matches!(self, Encapsulation::Llc) {
            buf[..LLC_SNAP_LEN].copy_from_slice(&protocol.llc_header());
        }
        if matches!(protocol, Protocol::Ethernet) {
            buf[n - BRIDGED_PAD_LEN..n].fill(0);
        }
        Ok(n)
    }

    /// Reads an SDU: what it carries and where the packet starts.
    pub fn parse(self, sdu: &[u8]) -> Result<(Protocol, usize)> {
        let (protocol, start) = match self {
            Encapsulation::Llc => {
                let h = sdu.get(..LLC_SNAP_LEN).ok_or(Error::Length {
                    expected: LLC_SNAP_LEN,
                    got: sdu.len(),
                })?;
                if h[..3] != LLC_SNAP {
                    return Err(Error::Malformed("not an LLC/SNAP header (AA-AA-03)"));
                }
                let pid = u16::from_be_bytes([h[6], h[7]]);
                let p = match ([h[3], h[4], h[5]], pid) {
                    (OUI_ETHERTYPE, ETHERTYPE_IPV4) => Protocol::Ipv4,
                    (OUI_ETHERTYPE, ETHERTYPE_IPV6) => Protocol::Ipv6,
                    (OUI_ETHERTYPE, ETHERTYPE_ARP) => Protocol::Atmarp,
                    (OUI_8021, PID_ETHERNET_NO_FCS) => Protocol::Ethernet,
                    _ => return Err(Error::Malformed("SNAP OUI and PID not supported")),
                };
                (p, LLC_SNAP_LEN)
            }
            Encapsulation::VcMux(p) => (p, 0),
        };
        let start = if matches!(protocol, Protocol::Ethernet) {
            start + BRIDGED_PAD_LEN
        } else {
            start
        };
        if sdu.len() < start {
            return Err(Error::Length {
                expected: start,
                got: sdu.len(),
            });
        }
        // On a VC-multiplexed IP VC the version nibble must agree.
        let version = sdu.get(start).map(|b| b >> 4);
        match (self, protocol, version) {
            (Encapsulation::VcMux(_), Protocol::Ipv4, Some(v)) if v != 4 => {
                Err(Error::Malformed("not an IPv4 packet on an IPv4 VC"))
            }
            (Encapsulation::VcMux(_), Protocol::Ipv6, Some(v)) if v != 6 => {
                Err(Error::Malformed("not an IPv6 packet on an IPv6 VC"))
            }
            _ => Ok((protocol, start)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llc_headers_are_the_rfc_bytes() {
        assert_eq!(
            Protocol::Ipv4.llc_header(),
            [0xAA, 0xAA, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00]
        );
        assert_eq!(
            Protocol::Ipv6.llc_header(),
            [0xAA, 0xAA, 0x03, 0x00, 0x00, 0x00, 0x86, 0xDD]
        );
        assert_eq!(
            Protocol::Atmarp.llc_header(),
            [0xAA, 0xAA, 0x03, 0x00, 0x00, 0x00, 0x08, 0x06]
        );
        assert_eq!(
            Protocol::Ethernet.llc_header(),
            [0xAA, 0xAA, 0x03, 0x00, 0x80, 0xC2, 0x00, 0x07]
        );
    }

    #[test]
    fn bridged_frames_carry_two_pad_bytes() {
        let mut buf = [0xFFu8; 16];
        let n = Encapsulation::Llc
            .emit_header(Protocol::Ethernet, &mut buf)
            .unwrap();
        assert_eq!(n, 10);
        assert_eq!(
            &buf[..10],
            &[0xAA, 0xAA, 0x03, 0x00, 0x80, 0xC2, 0x00, 0x07, 0, 0]
        );
        assert_eq!(
            Encapsulation::Llc.parse(&buf).unwrap(),
            (Protocol::Ethernet, 10)
        );
        let vcmux = Encapsulation::VcMux(Protocol::Ethernet);
        assert_eq!(vcmux.emit_header(Protocol::Ethernet, &mut buf), Ok(2));
        assert_eq!(vcmux.parse(&buf).unwrap(), (Protocol::Ethernet, 2));
    }

    #[test]
    fn vc_multiplexing_adds_nothing_and_checks_the_version() {
        let v4 = Encapsulation::VcMux(Protocol::Ipv4);
        assert_eq!(v4.header_len(Protocol::Ipv4), Some(0));
        assert_eq!(v4.header_len(Protocol::Ipv6), None);
        assert!(v4.emit_header(Protocol::Atmarp, &mut [0; 8]).is_err());
        assert_eq!(v4.parse(&[0x45, 0, 0, 20]), Ok((Protocol::Ipv4, 0)));
        assert!(v4.parse(&[0x60, 0, 0, 0]).is_err());
        let v6 = Encapsulation::VcMux(Protocol::Ipv6);
        assert_eq!(v6.parse(&[0x60, 0, 0, 0]), Ok((Protocol::Ipv6, 0)));
        assert!(v6.parse(&[0x45]).is_err());
    }

    #[test]
    fn bad_llc_headers_are_refused() {
        let llc = Encapsulation::Llc;
        assert!(matches!(
            llc.parse(&[0xAA, 0xAA]),
            Err(Error::Length { .. })
        ));
        assert!(llc.parse(&[0xFE, 0xFE, 0x03, 0, 0, 0, 0x08, 0x00]).is_err());
        assert!(llc.parse(&[0xAA, 0xAA, 0x03, 0, 0, 0, 0x12, 0x34]).is_err());
        // A bridged header without its pad is too short.
        assert!(llc
            .parse(&[0xAA, 0xAA, 0x03, 0x00, 0x80, 0xC2, 0x00, 0x07, 0])
            .is_err());
    }

    #[test]
    fn every_protocol_round_trips_under_llc() {
        for p in [
            Protocol::Ipv4,
            Protocol::Ipv6,
            Protocol::Atmarp,
            Protocol::Ethernet,
        ] {
            let mut buf = [0u8; 24];
            let n = Encapsulation::Llc.emit_header(p, &mut buf).unwrap();
            buf[n] = match p {
                Protocol::Ipv6 => 0x60,
                _ => 0x45,
            };
            assert_eq!(Encapsulation::Llc.parse(&buf), Ok((p, n)));
        }
    }

    fn protocol() -> impl proptest::strategy::Strategy<Value = Protocol> {
        proptest::prop_oneof![
            proptest::strategy::Just(Protocol::Ipv4),
            proptest::strategy::Just(Protocol::Ipv6),
            proptest::strategy::Just(Protocol::Atmarp),
            proptest::strategy::Just(Protocol::Ethernet),
        ]
    }

    proptest::proptest! {
        /// Any packet behind any header this VC can carry comes back as the
        /// same protocol and the same bytes.
        #[test]
        fn headers_round_trip(
            p in protocol(),
            vcmux in proptest::bool::ANY,
            body in proptest::collection::vec(proptest::num::u8::ANY, 1..200),
        ) {
            let mut body = body;
            // An IP packet's version nibble matches its protocol.
            match p {
                Protocol::Ipv4 => body[0] = 0x45,
                Protocol::Ipv6 => body[0] = 0x60,
                _ => {}
            }
            let e = if vcmux { Encapsulation::VcMux(p) } else { Encapsulation::Llc };
            let mut sdu = [0u8; 16].to_vec();
            let n = e.emit_header(p, &mut sdu).unwrap();
            sdu.truncate(n);
            sdu.extend_from_slice(&body);
            proptest::prop_assert_eq!(e.parse(&sdu), Ok((p, n)));
            proptest::prop_assert_eq!(&sdu[n..], &body[..]);
        }

        /// Arbitrary bytes never panic the parser, and what it accepts
        /// under LLC starts with AA-AA-03.
        #[test]
        fn any_bytes_parse_or_are_refused(b in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            if let Ok((_, start)) = Encapsulation::Llc.parse(&b) {
                proptest::prop_assert!(b.starts_with(&LLC_SNAP));
                proptest::prop_assert!(start <= b.len());
            }
        }
    }
}
