//! ATMARP and InATMARP packets (RFC 2225 section 8.7), for IPv4.
//!
//! ```text
//!  offset  size  field
//!  0       2     ar$hrd   hardware type, 0x0013 (ATM Forum)
//!  2       2     ar$pro   protocol type, 0x0800 (IPv4)
//!  4       1     ar$shtl  type and length of the source ATM number (q)
//!  5       1     ar$sstl  type and length of the source ATM subaddress (r)
//!  6       2     ar$op    1 request, 2 reply, 8 InATMARP request,
//!                         9 InATMARP reply, 10 NAK
//!  8       1     ar$spln  length of the source protocol address (s)
//!  9       1     ar$thtl  type and length of the target ATM number (x)
//!  10      1     ar$tstl  type and length of the target ATM subaddress (y)
//!  11      1     ar$tpln  length of the target protocol address (z)
//!  12      q     ar$sha   source ATM number
//!          r     ar$ssa   source ATM subaddress
//!          s     ar$spa   source protocol address
//!          x     ar$tha   target ATM number
//!          y     ar$tsa   target ATM subaddress
//!          z     ar$tpa   target protocol address
//! ```
//!
//! A type-and-length byte holds the address's length in its low six bits
//! and, in bit 0x40, its type: clear for an ATM Forum NSAP-format address,
//! set for E.164; bit 0x80 is reserved and must be zero. A protocol address
//! is 0 bytes (not known) or 4 (IPv4).

use core::net::Ipv4Addr;

use crate::{Error, Result};

/// ar$hrd for ATM.
pub const HRD_ATM: u16 = 0x0013;
/// ar$pro for IPv4.
pub const PRO_IPV4: u16 = 0x0800;
/// Length of the fixed part.
pub const FIXED_LEN: usize = 12;
/// Longest ATM number or subaddress (an NSAP address is 20 bytes).
pub const MAX_ATM_LEN: usize = 20;
/// Longest packet: the fixed part, four ATM addresses, two IPv4 addresses.
pub const MAX_LEN: usize = FIXED_LEN + 4 * MAX_ATM_LEN + 2 * 4;

/// ar$op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// ATMARP request (1).
    Request,
    /// ATMARP reply (2).
    Reply,
    /// InATMARP request (8).
    InRequest,
    /// InATMARP reply (9).
    InReply,
    /// ATMARP negative acknowledgement (10).
    Nak,
    /// Any other code.
    Unknown(u16),
}

impl Op {
    /// The code on the wire.
    pub const fn code(self) -> u16 {
        match self {
            Op::Request => 1,
            Op::Reply => 2,
            Op::InRequest => 8,
            Op::InReply => 9,
            Op::Nak => 10,
            Op::Unknown(c) => c,
        }
    }

    /// The operation with this code.
    pub const fn from_code(c: u16) -> Op {
        match c {
            1 => Op::Request,
            2 => Op::Reply,
            8 => Op::InRequest,
            9 => Op::InReply,
            10 => Op::Nak,
            c => Op::Unknown(c),
        }
    }
}

/// An ATM number or subaddress: up to 20 bytes and its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AtmAddr {
    bytes: [u8; MAX_ATM_LEN],
    len: u8,
    /// E.164 rather than ATM Forum NSAP format.
    pub e164: bool,
}

impl AtmAddr {
    /// No address (length 0).
    pub const EMPTY: AtmAddr = AtmAddr {
        bytes: [0; MAX_ATM_LEN],
        len: 0,
        e164: false,
    };

    /// An NSAP-format address from its bytes (at most 20).
    pub fn nsap(b: &[u8]) -> Result<AtmAddr> {
        Self::new(b, false)
    }

    fn new(b: &[u8], e164: bool) -> Result<AtmAddr> {
        if b.len() > MAX_ATM_LEN {
            return Err(Error::FieldRange {
                field: "ATM address length",
                value: b.len() as u32,
            });
        }
        let mut bytes = [0; MAX_ATM_LEN];
        bytes[..b.len()].copy_from_slice(b);
        Ok(AtmAddr {
            bytes,
            len: b.len() as u8,
            e164,
        })
    }

    /// The address bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// True for length 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn type_len(&self) -> u8 {
        self.len | if self.e164 { 0x40 } else { 0 }
    }
}

/// A parsed ATMARP or InATMARP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AtmarpRepr {
    /// Operation.
    pub op: Op,
    /// Source ATM number.
    pub sha: AtmAddr,
    /// Source ATM subaddress.
    pub ssa: AtmAddr,
    /// Source protocol address, if known.
    pub spa: Option<Ipv4Addr>,
    /// Target ATM number.
    pub tha: AtmAddr,
    /// Target ATM subaddress.
    pub tsa: AtmAddr,
    /// Target protocol address, if known.
    pub tpa: Option<Ipv4Addr>,
}

fn split(b: &[u8], n: usize) -> Result<(&[u8], &[u8])> {
    if b.len() < n {
        return Err(Error::Length {
            expected: n,
            got: b.len(),
        });
    }
    Ok(b.split_at(n))
}

fn atm(b: &[u8], type_len: u8) -> Result<(AtmAddr, &[u8])> {
    if type_len & 0x80 != 0 {
        return Err(Error::Malformed(
            "reserved bit set in an ATM type and length",
        ));
    }
    let (a, rest) = split(b, usize::from(type_len & 0x3F))?;
    Ok((AtmAddr::new(a, type_len & 0x40 != 0)?, rest))
}

fn proto(b: &[u8], len: u8) -> Result<(Option<Ipv4Addr>, &[u8])> {
    match len {
        0 => Ok((None, b)),
        4 => {
            let (a, rest) = split(b, 4)?;
            Ok((Some(Ipv4Addr::new(a[0], a[1], a[2], a[3])), rest))
        }
        _ => Err(Error::Malformed(
            "an IPv4 protocol address is 0 or 4 bytes long",
        )),
    }
}

impl AtmarpRepr {
    /// Reads a packet (the bytes after the LLC/SNAP header). Bytes after the
    /// last address are ignored (AAL5 may pad).
    pub fn parse(b: &[u8]) -> Result<AtmarpRepr> {
        let (f, rest) = split(b, FIXED_LEN)?;
        if u16::from_be_bytes([f[0], f[1]]) != HRD_ATM {
            return Err(Error::Malformed("hardware type is not ATM (0x0013)"));
        }
        if u16::from_be_bytes([f[2], f[3]]) != PRO_IPV4 {
            return Err(Error::Malformed("protocol type is not IPv4 (0x0800)"));
        }
        let op = Op::from_code(u16::from_be_bytes([f[6], f[7]]));
        let (sha, rest) = atm(rest, f[4])?;
        let (ssa, rest) = atm(rest, f[5])?;
        let (spa, rest) = proto(rest, f[8])?;
        let (tha, rest) = atm(rest, f[9])?;
        let (tsa, rest) = atm(rest, f[10])?;
        let (tpa, _) = proto(rest, f[11])?;
        Ok(AtmarpRepr {
            op,
            sha,
            ssa,
            spa,
            tha,
            tsa,
            tpa,
        })
    }

    /// Bytes [`AtmarpRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        FIXED_LEN
            + self.sha.as_bytes().len()
            + self.ssa.as_bytes().len()
            + self.tha.as_bytes().len()
            + self.tsa.as_bytes().len()
            + 4 * (usize::from(self.spa.is_some()) + usize::from(self.tpa.is_some()))
    }

    /// Writes the packet into the front of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.buffer_len();
        if buf.len() < n {
            return Err(Error::Length {
                expected: n,
                got: buf.len(),
            });
        }
        buf[0..2].copy_from_slice(&HRD_ATM.to_be_bytes());
        buf[2..4].copy_from_slice(&PRO_IPV4.to_be_bytes());
        buf[4] = self.sha.type_len();
        buf[5] = self.ssa.type_len();
        buf[6..8].copy_from_slice(&self.op.code().to_be_bytes());
        buf[8] = if self.spa.is_some() { 4 } else { 0 };
        buf[9] = self.tha.type_len();
        buf[10] = self.tsa.type_len();
        buf[11] = if self.tpa.is_some() { 4 } else { 0 };
        let mut at = FIXED_LEN;
        let mut put = |b: &[u8]| {
            buf[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        };
        put(self.sha.as_bytes());
        put(self.ssa.as_bytes());
        if let Some(a) = self.spa {
            put(&a.octets());
        }
        put(self.tha.as_bytes());
        put(self.tsa.as_bytes());
        if let Some(a) = self.tpa {
            put(&a.octets());
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nsap(last: u8) -> AtmAddr {
        let mut a = [0x47u8; 20];
        a[19] = last;
        AtmAddr::nsap(&a).unwrap()
    }

    #[test]
    fn an_atmarp_request_is_laid_out_as_the_rfc_says() {
        let r = AtmarpRepr {
            op: Op::Request,
            sha: nsap(1),
            ssa: AtmAddr::EMPTY,
            spa: Some(Ipv4Addr::new(10, 1, 0, 1)),
            tha: AtmAddr::EMPTY,
            tsa: AtmAddr::EMPTY,
            tpa: Some(Ipv4Addr::new(10, 1, 0, 2)),
        };
        let mut buf = [0u8; MAX_LEN];
        let n = r.emit(&mut buf).unwrap();
        assert_eq!(n, 12 + 20 + 4 + 4);
        let mut want = std::vec![
            0x00, 0x13, // ar$hrd
            0x08, 0x00, // ar$pro
            20,   // ar$shtl: NSAP, 20 bytes
            0,    // ar$sstl
            0x00, 0x01, // ar$op request
            4,    // ar$spln
            0,    // ar$thtl
            0,    // ar$tstl
            4,    // ar$tpln
        ];
        want.extend_from_slice(nsap(1).as_bytes());
        want.extend_from_slice(&[10, 1, 0, 1, 10, 1, 0, 2]);
        assert_eq!(&buf[..n], &want[..]);
        assert_eq!(AtmarpRepr::parse(&buf[..n]), Ok(r));
    }

    #[test]
    fn an_inatmarp_request_on_a_pvc_carries_no_atm_numbers() {
        let r = AtmarpRepr {
            op: Op::InRequest,
            sha: AtmAddr::EMPTY,
            ssa: AtmAddr::EMPTY,
            spa: Some(Ipv4Addr::new(192, 168, 7, 9)),
            tha: AtmAddr::EMPTY,
            tsa: AtmAddr::EMPTY,
            tpa: None,
        };
        let mut buf = [0u8; MAX_LEN];
        let n = r.emit(&mut buf).unwrap();
        assert_eq!(
            &buf[..n],
            &[0x00, 0x13, 0x08, 0x00, 0, 0, 0x00, 0x08, 4, 0, 0, 0, 192, 168, 7, 9]
        );
        assert_eq!(AtmarpRepr::parse(&buf[..n]), Ok(r));
    }

    #[test]
    fn e164_addresses_set_the_type_bit() {
        let r = AtmarpRepr {
            op: Op::Nak,
            sha: AtmAddr::new(&[1, 2, 3, 4, 5, 6, 7, 8], true).unwrap(),
            ssa: AtmAddr::EMPTY,
            spa: None,
            tha: AtmAddr::EMPTY,
            tsa: AtmAddr::EMPTY,
            tpa: Some(Ipv4Addr::new(1, 2, 3, 4)),
        };
        let mut buf = [0u8; MAX_LEN];
        let n = r.emit(&mut buf).unwrap();
        assert_eq!(buf[4], 0x48);
        assert_eq!(u16::from_be_bytes([buf[6], buf[7]]), 10);
        assert_eq!(AtmarpRepr::parse(&buf[..n]), Ok(r));
    }

    #[test]
    fn malformed_packets_are_refused() {
        let good = [
            0x00, 0x13, 0x08, 0x00, 0, 0, 0x00, 0x08, 4, 0, 0, 0, 1, 2, 3, 4,
        ];
        assert!(AtmarpRepr::parse(&good).is_ok());
        assert!(matches!(
            AtmarpRepr::parse(&good[..11]),
            Err(Error::Length { .. })
        ));
        assert!(matches!(
            AtmarpRepr::parse(&good[..15]),
            Err(Error::Length { .. })
        ));
        let mut b = good;
        b[1] = 0x01; // Ethernet
        assert!(AtmarpRepr::parse(&b).is_err());
        let mut b = good;
        b[3] = 0xDD;
        assert!(AtmarpRepr::parse(&b).is_err());
        let mut b = good;
        b[8] = 16; // an IPv6-sized address
        assert!(AtmarpRepr::parse(&b).is_err());
        let mut b = good;
        b[4] = 0x80; // reserved bit
        assert!(AtmarpRepr::parse(&b).is_err());
        let mut b = good;
        b[4] = 0x3F; // a 63-byte ATM number: longer than any
        assert!(AtmarpRepr::parse(&b).is_err());
        let mut b = good;
        b[7] = 77;
        assert_eq!(AtmarpRepr::parse(&b).unwrap().op, Op::Unknown(77));
    }

    fn addr() -> impl proptest::strategy::Strategy<Value = AtmAddr> {
        (
            proptest::collection::vec(proptest::num::u8::ANY, 0..=20),
            proptest::bool::ANY,
        )
            .prop_map(|(b, e)| AtmAddr::new(&b, e).unwrap())
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        /// Any packet emits and parses back to itself.
        #[test]
        fn packets_round_trip(
            op in proptest::num::u16::ANY,
            sha in addr(), ssa in addr(), tha in addr(), tsa in addr(),
            spa in proptest::option::of(proptest::num::u32::ANY),
            tpa in proptest::option::of(proptest::num::u32::ANY),
        ) {
            let r = AtmarpRepr {
                op: Op::from_code(op),
                sha, ssa, tha, tsa,
                spa: spa.map(Ipv4Addr::from),
                tpa: tpa.map(Ipv4Addr::from),
            };
            let mut buf = [0u8; MAX_LEN];
            let n = r.emit(&mut buf).unwrap();
            proptest::prop_assert_eq!(n, r.buffer_len());
            proptest::prop_assert_eq!(AtmarpRepr::parse(&buf[..n]), Ok(r));
            // Cut anywhere short of the end, it is refused.
            for cut in 0..n {
                proptest::prop_assert!(AtmarpRepr::parse(&buf[..cut]).is_err());
            }
        }
    }
}
