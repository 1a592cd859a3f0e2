//! The parts of IPv4 a forwarder touches: header checks, the Internet
//! checksum (RFC 1071) and its incremental update (RFC 1624), and ICMP
//! error messages (RFC 792).
//!
//! ```text
//!  offset  field
//!  0       version (high 4 bits), header length in 32-bit words (low 4)
//!  1       type of service
//!  2..4    total length
//!  4..8    identification, flags, fragment offset
//!  8       time to live
//!  9       protocol
//!  10..12  header checksum
//!  12..16  source address
//!  16..20  destination address
//!  20..    options (header length above 5), then the payload
//! ```

use core::net::Ipv4Addr;

use crate::{Error, Result};

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// Offset of the TTL.
pub const TTL: usize = 8;
/// Offset of the protocol.
pub const PROTOCOL: usize = 9;
/// Offset of the header checksum.
pub const CHECKSUM: usize = 10;
/// Offset of the source address.
pub const SRC: usize = 12;
/// Offset of the destination address.
pub const DST: usize = 16;
/// Protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;

/// Why a header is not a valid IPv4 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderError {
    /// Fewer bytes than a header.
    Truncated,
    /// The version is not 4.
    Version,
    /// The header length is below 5 words or beyond the packet.
    HeaderLength,
    /// The total length is below the header or beyond the bytes received.
    TotalLength,
    /// The header checksum does not check.
    Checksum,
}

/// What the checks found in a valid header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderInfo {
    /// Header length in bytes.
    pub header_len: usize,
    /// Total length in bytes (the packet; the buffer may be longer).
    pub total_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// Destination.
    pub dst: Ipv4Addr,
}

/// The one's complement sum of `data` as 16-bit big-endian words (an odd
/// last byte padded with zero), folded to 16 bits, not complemented.
#[inline]
pub fn ones_sum(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        sum += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    sum += u64::from(u32::from_be_bytes(tail));
    // Fold 64 -> 16 bits with end-around carries.
    sum = (sum & 0xFFFF_FFFF) + (sum >> 32);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum as u16
}

/// The Internet checksum of `data` (what goes in a checksum field that was
/// zero while summing).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !ones_sum(data)
}

/// RFC 1624 equation 3: the new checksum after one 16-bit word of the
/// summed data changes from `old` to `new`: HC' = ~(~HC + ~m + m').
#[inline]
pub fn update_checksum(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    !(sum as u16)
}

/// True when the one's complement sum of a 20-byte header is 0xFFFF (its
/// checksum checks), for a header whose first byte is not 0. The sum does
/// not depend on byte order (RFC 1071), so the words are added as the
/// machine loads them, 32 bits at a time: a 32-bit word is congruent to
/// the sum of its two halves modulo 0xFFFF, and a one's complement sum of
/// 16-bit words is 0xFFFF exactly when their plain sum is a multiple of
/// 0xFFFF other than 0. An odd divisor divides `s` exactly when `s` times
/// the divisor's inverse modulo 2^64 is at most 2^64 / divisor (Granlund
/// and Montgomery's test): a multiply and a compare.
#[inline]
fn header20_sums_to_ones(h: &[u8; MIN_HEADER_LEN]) -> bool {
    /// 0xFFFF times this is 1 modulo 2^64.
    const INVERSE: u64 = 0xFFFE_FFFE_FFFE_FFFF;
    const _: () = assert!(0xFFFF_u64.wrapping_mul(INVERSE) == 1);
    debug_assert!(h[0] != 0);
    let w = |i: usize| u64::from(u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let s = w(0) + w(4) + w(8) + w(12) + w(16);
    s.wrapping_mul(INVERSE) <= u64::MAX / 0xFFFF
}

/// Checks an IPv4 header at the front of `pkt`: version, header length,
/// total length against the bytes given, and the header checksum.
#[inline]
pub fn check(pkt: &[u8]) -> core::result::Result<HeaderInfo, HeaderError> {
    // The common case: no options.
    if let Some(h) = pkt.first_chunk::<MIN_HEADER_LEN>() {
        if h[0] == 0x45 {
            let total_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            // Below the header or beyond the bytes, in one comparison
            // (`pkt` holds the header, so the right side cannot wrap).
            if total_len.wrapping_sub(MIN_HEADER_LEN) > pkt.len() - MIN_HEADER_LEN {
                return Err(HeaderError::TotalLength);
            }
            if !header20_sums_to_ones(h) {
                return Err(HeaderError::Checksum);
            }
            return Ok(HeaderInfo {
                header_len: MIN_HEADER_LEN,
                total_len,
                ttl: h[TTL],
                dst: Ipv4Addr::new(h[DST], h[DST + 1], h[DST + 2], h[DST + 3]),
            });
        }
    }
    if pkt.len() < MIN_HEADER_LEN {
        return Err(HeaderError::Truncated);
    }
    let vi = pkt[0];
    if vi >> 4 != 4 {
        return Err(HeaderError::Version);
    }
    let header_len = usize::from(vi & 0x0F) * 4;
    if header_len < MIN_HEADER_LEN || header_len > pkt.len() {
        return Err(HeaderError::HeaderLength);
    }
    let total_len = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
    if total_len < header_len || total_len > pkt.len() {
        return Err(HeaderError::TotalLength);
    }
    if ones_sum(&pkt[..header_len]) != 0xFFFF {
        return Err(HeaderError::Checksum);
    }
    Ok(HeaderInfo {
        header_len,
        total_len,
        ttl: pkt[TTL],
        dst: Ipv4Addr::new(pkt[DST], pkt[DST + 1], pkt[DST + 2], pkt[DST + 3]),
    })
}

/// Decrements the TTL of a checked header (TTL above 1) and updates its
/// checksum incrementally. With RFC 1624 equation 3 for the word holding
/// the TTL, m' = m - 0x0100, so ~m + m' is the constant 0xFEFF and
/// HC' = ~(~HC + 0xFEFF), the same checksum a full recomputation gives.
/// One's complement addition does not depend on byte order, so it is done
/// on the checksum as the machine loads it, with the constant's bytes in
/// the same order and the carry out of the top wrapped round.
#[inline]
pub fn decrement_ttl(pkt: &mut [u8]) {
    let Some(h) = pkt.first_chunk_mut::<MIN_HEADER_LEN>() else {
        return;
    };
    h[TTL] = h[TTL].wrapping_sub(1);
    let hc = u16::from_ne_bytes([h[CHECKSUM], h[CHECKSUM + 1]]);
    // ~(~HC + 0xFEFF) is HC + 0x0100, both one's complement sums, but for
    // the form of zero: the first is 0x0000 where the second is 0xFFFF
    // (HC = 0xFEFF), as a full recomputation gives.
    let (sum, carry) = hc.overflowing_add(u16::from_ne_bytes([0x01, 0x00]));
    let sum = sum + u16::from(carry);
    let hc = if sum == 0xFFFF { 0 } else { sum };
    h[CHECKSUM..CHECKSUM + 2].copy_from_slice(&hc.to_ne_bytes());
}

/// Source address of a header at least [`MIN_HEADER_LEN`] long.
pub fn src(pkt: &[u8]) -> Option<Ipv4Addr> {
    let s = pkt.get(SRC..SRC + 4)?;
    Some(Ipv4Addr::new(s[0], s[1], s[2], s[3]))
}

/// ICMP type: destination unreachable.
pub const ICMP_UNREACHABLE: u8 = 3;
/// ICMP type: time exceeded.
pub const ICMP_TIME_EXCEEDED: u8 = 11;
/// ICMP type: echo request.
pub const ICMP_ECHO_REQUEST: u8 = 8;
/// ICMP type: echo reply.
pub const ICMP_ECHO_REPLY: u8 = 0;

/// Length of the ICMP error [`emit_icmp_error`] writes about `original`.
pub fn icmp_error_len(original: &[u8]) -> usize {
    let hl = original
        .first()
        .map_or(MIN_HEADER_LEN, |b| usize::from(b & 0x0F) * 4);
    MIN_HEADER_LEN + 8 + (hl + 8).min(original.len())
}

/// Writes into `buf` an IPv4 packet from `from` carrying an ICMP error of
/// `icmp_type`/`code` about `original` (a checked packet): its header and
/// first 8 payload bytes, as RFC 792 asks. Returns the packet's length.
pub fn emit_icmp_error(
    from: Ipv4Addr,
    original: &[u8],
    icmp_type: u8,
    code: u8,
    buf: &mut [u8],
) -> Result<usize> {
    let to = src(original).ok_or(Error::Length {
        expected: MIN_HEADER_LEN,
        got: original.len(),
    })?;
    let n = icmp_error_len(original);
    if buf.len() < n {
        return Err(Error::Length {
            expected: n,
            got: buf.len(),
        });
    }
    let quoted = n - MIN_HEADER_LEN - 8;
    let (ip, icmp) = buf[..n].split_at_mut(MIN_HEADER_LEN);
    ip.copy_from_slice(&[
        0x45, 0, 0, 0, // version, IHL, TOS, total length (below)
        0, 0, 0, 0, // identification, flags, fragment offset
        64, PROTO_ICMP, 0, 0, // TTL, protocol, checksum (below)
        0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    ip[2..4].copy_from_slice(&(n as u16).to_be_bytes());
    ip[SRC..SRC + 4].copy_from_slice(&from.octets());
    ip[DST..DST + 4].copy_from_slice(&to.octets());
    let c = checksum(ip);
    ip[CHECKSUM..CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
    icmp[..8].copy_from_slice(&[icmp_type, code, 0, 0, 0, 0, 0, 0]);
    icmp[8..].copy_from_slice(&original[..quoted]);
    let c = checksum(icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header from RFC 1071-style worked examples: 20 bytes, checksum
    /// 0xB861 (a commonly quoted sample header).
    const SAMPLE: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xB8, 0x61, 0xC0, 0xA8, 0x00,
        0x01, 0xC0, 0xA8, 0x00, 0xC7,
    ];

    #[test]
    fn the_sample_header_checks() {
        let mut h = SAMPLE;
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xB861);
        let mut p = [0u8; 0x73];
        p[..20].copy_from_slice(&SAMPLE);
        let i = check(&p).unwrap();
        assert_eq!(
            (i.header_len, i.total_len, i.ttl, i.dst),
            (20, 0x73, 64, Ipv4Addr::new(192, 168, 0, 199))
        );
    }

    #[test]
    fn rfc1071_example_sum() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        assert_eq!(
            ones_sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
        // An odd byte is padded with zero.
        assert_eq!(ones_sum(&[0x01]), 0x0100);
    }

    #[test]
    fn each_bad_header_is_named() {
        let mut p = [0u8; 0x73];
        p[..20].copy_from_slice(&SAMPLE);
        assert_eq!(check(&p[..19]), Err(HeaderError::Truncated));
        let mut b = p;
        b[0] = 0x65;
        assert_eq!(check(&b), Err(HeaderError::Version));
        let mut b = p;
        b[0] = 0x44;
        assert_eq!(check(&b), Err(HeaderError::HeaderLength));
        let mut b = p;
        b[0] = 0x4F; // 60 bytes of header in a 40-byte buffer
        assert_eq!(check(&b[..40]), Err(HeaderError::HeaderLength));
        assert_eq!(check(&p[..0x72]), Err(HeaderError::TotalLength));
        let mut b = p;
        b[3] = 19;
        assert_eq!(check(&b), Err(HeaderError::TotalLength));
        let mut b = p;
        b[15] ^= 1;
        assert_eq!(check(&b), Err(HeaderError::Checksum));
    }

    #[test]
    fn incremental_update_equals_recomputing() {
        let mut p = SAMPLE;
        for _ in 0..70 {
            if p[TTL] <= 1 {
                break;
            }
            decrement_ttl(&mut p);
            let mut z = p;
            z[10] = 0;
            z[11] = 0;
            assert_eq!(u16::from_be_bytes([p[10], p[11]]), checksum(&z));
        }
        // RFC 1624's corner: a sum that would give 0x0000 by equation 2
        // gives 0xFFFF by equation 3 (both are zero in one's complement).
        assert_eq!(update_checksum(0xDD2F, 0x5555, 0x3285), 0x0000);
    }

    /// The corner where the two forms of zero differ: a checksum of 0xFEFF
    /// becomes 0x0000 after the decrement, as recomputing gives, not 0xFFFF.
    #[test]
    fn the_decrement_gives_the_recomputed_zero() {
        let mut p = SAMPLE;
        p[TTL] = 64;
        p[2..4].copy_from_slice(&20u16.to_be_bytes());
        let id = (0..=u16::MAX)
            .find(|&id| {
                p[4..6].copy_from_slice(&id.to_be_bytes());
                p[10..12].fill(0);
                checksum(&p) == 0xFEFF
            })
            .expect("an identification giving checksum 0xFEFF");
        p[4..6].copy_from_slice(&id.to_be_bytes());
        p[10..12].copy_from_slice(&0xFEFFu16.to_be_bytes());
        assert!(check(&p).is_ok());
        decrement_ttl(&mut p);
        assert_eq!(&p[10..12], &[0, 0]);
        let mut z = p;
        z[10..12].fill(0);
        assert_eq!(checksum(&z), 0);
        assert!(check(&p).is_ok());
    }

    #[test]
    fn icmp_errors_quote_the_header_and_eight_bytes() {
        let mut p = [0u8; 0x73];
        p[..20].copy_from_slice(&SAMPLE);
        p[20..28].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut buf = [0u8; 128];
        let me = Ipv4Addr::new(10, 0, 0, 254);
        let n = emit_icmp_error(me, &p, ICMP_TIME_EXCEEDED, 0, &mut buf).unwrap();
        assert_eq!(n, 20 + 8 + 28);
        let i = check(&buf[..n]).unwrap();
        assert_eq!(i.dst, Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(src(&buf[..n]), Some(me));
        assert_eq!(buf[PROTOCOL], PROTO_ICMP);
        assert_eq!(&buf[20..22], &[11, 0]);
        assert_eq!(ones_sum(&buf[20..n]), 0xFFFF);
        assert_eq!(&buf[28..n], &p[..28]);
    }

    proptest::proptest! {
        /// The 20-byte fast path's checksum test (a multiple of 0xFFFF,
        /// 32 bits at a time) agrees with the plain 16-bit fold on any
        /// header, and with some headers whose checksum is right.
        #[test]
        fn the_fast_checksum_test_agrees_with_the_fold(
            body in proptest::array::uniform20(proptest::num::u8::ANY),
            fix in proptest::bool::ANY,
        ) {
            let mut h = body;
            h[0] = h[0].max(1);
            if fix {
                h[CHECKSUM..CHECKSUM + 2].fill(0);
                let c = checksum(&h);
                h[CHECKSUM..CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
            }
            proptest::prop_assert_eq!(header20_sums_to_ones(&h), ones_sum(&h) == 0xFFFF);
        }

        /// Any valid header, any TTL above 1: after the decrement the header
        /// still checks and its checksum is what RFC 1624 equation 3 gives.
        #[test]
        fn ttl_decrement_keeps_any_header_valid(
            body in proptest::array::uniform20(proptest::num::u8::ANY),
            ttl in 2u8..=255,
        ) {
            let mut h = body;
            h[0] = 0x45;
            h[2..4].copy_from_slice(&20u16.to_be_bytes());
            h[TTL] = ttl;
            h[CHECKSUM..CHECKSUM + 2].fill(0);
            let c = checksum(&h);
            h[CHECKSUM..CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
            proptest::prop_assert!(check(&h).is_ok());
            let old = u16::from_be_bytes([h[TTL], h[PROTOCOL]]);
            let want = update_checksum(c, old, old - 0x0100);
            decrement_ttl(&mut h);
            proptest::prop_assert_eq!(h[TTL], ttl - 1);
            proptest::prop_assert_eq!(u16::from_be_bytes([h[10], h[11]]), want);
            proptest::prop_assert!(check(&h).is_ok());
        }
    }
}
