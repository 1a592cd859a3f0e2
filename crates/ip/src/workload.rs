//! A fixed forwarding workload, the same for `aurora bench forward` and for
//! instruction counting under callgrind (`examples/forward_instructions.rs`):
//! a routing table of many prefixes, packets to destinations spread over
//! them, and one function that forwards a batch.

use std::net::Ipv4Addr;

use aurora_wire::ipv4;

use crate::forward::{Decision, Forwarder, Route};

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// A table of `prefixes` routes of lengths 8 to 32 (most /16 to /24, as in
/// real tables) over 4 ports, plus a default route; and the prefixes.
pub fn table(prefixes: usize) -> (Forwarder, Vec<(Ipv4Addr, u8)>) {
    let mut f = Forwarder::for_router();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut list = Vec::with_capacity(prefixes);
    for i in 0..prefixes {
        let r = xorshift(&mut x);
        let len = match r % 10 {
            0 => 8 + (r >> 8) as u8 % 8,
            1..=7 => 16 + (r >> 8) as u8 % 9,
            _ => 25 + (r >> 8) as u8 % 8,
        };
        let a = Ipv4Addr::from((r >> 32) as u32);
        f.add_route(
            a,
            len,
            Route {
                port: (i % 4) as u16,
                gateway: Some(Ipv4Addr::new(10, 0, i as u8 % 4, 1)),
            },
        );
        list.push((a, len));
    }
    f.add_route(
        Ipv4Addr::UNSPECIFIED,
        0,
        Route {
            port: 0,
            gateway: Some(Ipv4Addr::new(10, 0, 0, 1)),
        },
    );
    (f, list)
}

/// `n` valid IPv4 packets of `size` bytes (at least 20), TTL 255, each to
/// an address inside one of `prefixes` (chosen at random).
pub fn packets(n: usize, size: usize, prefixes: &[(Ipv4Addr, u8)]) -> Vec<Vec<u8>> {
    let size = size.max(ipv4::MIN_HEADER_LEN);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            let r = xorshift(&mut x);
            let (a, len) = prefixes
                .get(r as usize % prefixes.len().max(1))
                .copied()
                .unwrap_or((Ipv4Addr::new(192, 0, 2, 0), 24));
            let host = (r >> 32) as u32 & (u32::MAX.checked_shr(u32::from(len)).unwrap_or(0));
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            let dst = (u32::from(a) & mask) | host;
            let mut p = vec![0u8; size];
            p[0] = 0x45;
            p[2..4].copy_from_slice(&(size.min(65535) as u16).to_be_bytes());
            p[ipv4::TTL] = 255;
            p[ipv4::PROTOCOL] = 17;
            p[ipv4::SRC..ipv4::SRC + 4].copy_from_slice(&[172, 16, 0, 1]);
            p[ipv4::DST..ipv4::DST + 4].copy_from_slice(&dst.to_be_bytes());
            let c = ipv4::checksum(&p[..ipv4::MIN_HEADER_LEN]);
            p[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
            p
        })
        .collect()
}

/// Forwards every packet once (checks, lookup, TTL and checksum update);
/// returns how many were forwarded. Packets start at TTL 255, so a batch
/// may go through this up to 254 times.
#[inline(never)]
pub fn forward_all(f: &mut Forwarder, pkts: &mut [Vec<u8>]) -> usize {
    let mut n = 0;
    for p in pkts.iter_mut() {
        if let Decision::Forward { .. } = f.decide(p) {
            n += 1;
        }
    }
    n
}

/// Puts every packet back to TTL 255 with its checksum recomputed.
pub fn refresh(pkts: &mut [Vec<u8>]) {
    for p in pkts {
        p[ipv4::TTL] = 255;
        p[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].fill(0);
        let c = ipv4::checksum(&p[..ipv4::MIN_HEADER_LEN]);
        p[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_packet_of_the_workload_is_forwarded() {
        let (mut f, list) = table(1000);
        let mut p = packets(500, 64, &list);
        for _ in 0..254 {
            assert_eq!(forward_all(&mut f, &mut p), 500);
        }
        // TTL 1 now: nothing more is forwarded until refreshed.
        assert_eq!(forward_all(&mut f, &mut p), 0);
        refresh(&mut p);
        assert_eq!(forward_all(&mut f, &mut p), 500);
    }
}
