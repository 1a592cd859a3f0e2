//! IPv4 packets carrying TCP segments: no panic, and whatever parses must
//! emit and parse back to the same header and data.
//!
//! Random bytes almost never carry two right checksums, so each input is
//! also parsed a second time with its IP total length set to its length
//! and both checksums made right, which lets the fuzzer reach the TCP
//! header and option parsing.
#![no_main]
use aurora_tcp::seg::{emit, parse};
use aurora_wire::ipv4;
use libfuzzer_sys::fuzz_target;

/// `data` with a consistent IP total length and right IP and TCP
/// checksums, when it is long enough to have the fields.
fn repaired(data: &[u8]) -> Option<Vec<u8>> {
    let mut p = data.get(..data.len().min(usize::from(u16::MAX)))?.to_vec();
    let hl = usize::from(*p.first()? & 0x0F) * 4;
    if hl < ipv4::MIN_HEADER_LEN || hl > p.len() {
        return None;
    }
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].fill(0);
    let c = ipv4::checksum(&p[..hl]);
    p[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
    let tcp_len = (p.len() - hl) as u16;
    if tcp_len >= 20 {
        p[hl + 16..hl + 18].fill(0);
        let mut pseudo = [0u8; 12];
        pseudo[..8].copy_from_slice(&p[ipv4::SRC..ipv4::DST + 4]);
        pseudo[9] = 6;
        pseudo[10..].copy_from_slice(&tcp_len.to_be_bytes());
        let sum = u32::from(ipv4::ones_sum(&pseudo)) + u32::from(ipv4::ones_sum(&p[hl..]));
        let sum = (sum & 0xFFFF) + (sum >> 16);
        let c = !(sum as u16);
        p[hl + 16..hl + 18].copy_from_slice(&c.to_be_bytes());
    }
    Some(p)
}

fn round_trip(data: &[u8]) {
    if let Ok(p) = parse(data) {
        let mut out = Vec::new();
        let n = emit(p.src, p.dst, 0, &p.repr, p.payload, &mut out);
        assert_eq!(n, p.payload.len());
        assert_eq!(out.len(), 20 + p.repr.header_len() + n);
        let again = parse(&out).expect("an emitted segment parses");
        assert_eq!((again.src, again.dst), (p.src, p.dst));
        assert_eq!(again.repr, p.repr);
        assert_eq!(again.payload, p.payload);
    }
}

fuzz_target!(|data: &[u8]| {
    round_trip(data);
    if let Some(p) = repaired(data) {
        round_trip(&p);
    }
});
