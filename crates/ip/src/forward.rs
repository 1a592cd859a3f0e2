//! The IPv4 forwarding decision: header checks, local delivery, TTL,
//! longest-prefix match, TTL decrement with an incremental checksum update
//! (RFC 1624). No allocation and no copying: the packet is checked and
//! rewritten where it lies.

use std::net::Ipv4Addr;

use aurora_net::PortId;
use aurora_wire::ipv4::{self, HeaderError};

use crate::lpm::Lpm;

/// Why a packet was not forwarded. Every drop is one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than an IPv4 header.
    Truncated,
    /// Version is not 4.
    BadVersion,
    /// Header length below 5 words or beyond the packet.
    BadHeaderLength,
    /// Total length below the header or beyond the bytes received.
    BadTotalLength,
    /// Header checksum does not check.
    BadChecksum,
    /// TTL would reach zero here (an ICMP time exceeded goes back).
    TtlExpired,
    /// No route to the destination (an ICMP net unreachable goes back).
    NoRoute,
    /// The next hop's address could not be resolved to a VC in time (an
    /// ICMP host unreachable goes back).
    Unresolved,
    /// Longer than the outgoing interface's MTU (an ICMP "fragmentation
    /// needed" goes back; Aurora does not fragment).
    TooBig,
    /// The packets waiting for address resolution were already at their
    /// limit.
    ResolveQueueFull,
    /// The queue toward the local host (the TUN interface) was full.
    HostQueueFull,
    /// An SDU whose encapsulation was not understood or not supported.
    BadEncapsulation,
    /// IPv6 arrived where only IPv4 is forwarded.
    Ipv6NotRouted,
    /// A bridged Ethernet frame (not bridged here).
    Bridged,
    /// A malformed or unsupported ATMARP packet.
    BadAtmarp,
    /// A local packet that is neither for a local address nor an ICMP echo
    /// request this node answers.
    LocalUnhandled,
    /// The queue toward a packet interface (a router's side on a network
    /// that is not ATM) was full.
    InterfaceQueueFull,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 17] = [
        DropReason::Truncated,
        DropReason::BadVersion,
        DropReason::BadHeaderLength,
        DropReason::BadTotalLength,
        DropReason::BadChecksum,
        DropReason::TtlExpired,
        DropReason::NoRoute,
        DropReason::Unresolved,
        DropReason::TooBig,
        DropReason::ResolveQueueFull,
        DropReason::HostQueueFull,
        DropReason::BadEncapsulation,
        DropReason::Ipv6NotRouted,
        DropReason::Bridged,
        DropReason::BadAtmarp,
        DropReason::LocalUnhandled,
        DropReason::InterfaceQueueFull,
    ];

    /// The counter's name.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::BadVersion => "bad-version",
            DropReason::BadHeaderLength => "bad-header-length",
            DropReason::BadTotalLength => "bad-total-length",
            DropReason::BadChecksum => "bad-checksum",
            DropReason::TtlExpired => "ttl-expired",
            DropReason::NoRoute => "no-route",
            DropReason::Unresolved => "unresolved",
            DropReason::TooBig => "too-big",
            DropReason::ResolveQueueFull => "resolve-queue-full",
            DropReason::HostQueueFull => "host-queue-full",
            DropReason::BadEncapsulation => "bad-encapsulation",
            DropReason::Ipv6NotRouted => "ipv6-not-routed",
            DropReason::Bridged => "bridged",
            DropReason::BadAtmarp => "bad-atmarp",
            DropReason::LocalUnhandled => "local-unhandled",
            DropReason::InterfaceQueueFull => "interface-queue-full",
        }
    }
}

impl From<HeaderError> for DropReason {
    fn from(e: HeaderError) -> Self {
        match e {
            HeaderError::Truncated => DropReason::Truncated,
            HeaderError::Version => DropReason::BadVersion,
            HeaderError::HeaderLength => DropReason::BadHeaderLength,
            HeaderError::TotalLength => DropReason::BadTotalLength,
            HeaderError::Checksum => DropReason::BadChecksum,
        }
    }
}

/// Drop counters, one per [`DropReason`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops([u64; DropReason::ALL.len()]);

impl Drops {
    /// Counts one drop.
    #[inline]
    pub fn add(&mut self, r: DropReason) {
        self.0[r as usize] += 1;
    }
    /// Drops for one reason.
    pub fn get(&self, r: DropReason) -> u64 {
        self.0[r as usize]
    }
    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// The reasons with drops, and their counts.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|&(_, n)| n > 0)
    }
}

/// The table value of a node's own address: a flag past every route's
/// index, so the one bounds check on the route list also sets local
/// delivery (and "no route", [`crate::lpm::NONE`]) apart from forwarding.
const LOCAL: u32 = 1 << 31;

/// Where a route leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Output port.
    pub port: PortId,
    /// The next router, or `None` when the destination is on the port's
    /// subnet (the next hop is the destination itself).
    pub gateway: Option<Ipv4Addr>,
}

/// What to do with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Send `len` bytes out of `port` toward `next_hop` (TTL already
    /// decremented).
    Forward {
        /// Output port.
        port: PortId,
        /// Address to resolve to a VC.
        next_hop: Ipv4Addr,
        /// Packet length (the buffer may be longer).
        len: usize,
    },
    /// Addressed to this node.
    Local {
        /// Packet length.
        len: usize,
    },
    /// Not forwarded.
    Drop(DropReason),
}

/// The routing table and the decision.
pub struct Forwarder {
    lpm: Lpm,
    routes: Vec<Route>,
    local: Vec<Ipv4Addr>,
}

impl Default for Forwarder {
    fn default() -> Self {
        Self::new()
    }
}

impl Forwarder {
    /// An empty table, light while it holds few routes (for hosts).
    pub fn new() -> Self {
        Self::with_lpm(Lpm::new())
    }

    /// An empty table built for forwarding speed (for routers; 512 KiB).
    pub fn for_router() -> Self {
        Self::with_lpm(Lpm::with_trie())
    }

    fn with_lpm(lpm: Lpm) -> Self {
        Forwarder {
            lpm,
            routes: Vec::new(),
            local: Vec::new(),
        }
    }

    /// Adds a route for `dst/len`.
    pub fn add_route(&mut self, dst: Ipv4Addr, len: u8, route: Route) {
        let index = self.routes.len() as u32;
        assert!(index < LOCAL, "more routes than a table holds");
        self.routes.push(route);
        self.lpm.insert(dst, len, index);
    }

    /// Adds an address of this node (a /32 route to "here", so one lookup
    /// tells local from forwarded).
    pub fn add_local(&mut self, a: Ipv4Addr) {
        self.local.push(a);
        self.lpm.insert(a, 32, LOCAL);
    }

    /// True for an address of this node.
    #[inline]
    pub fn is_local(&self, a: Ipv4Addr) -> bool {
        self.local.contains(&a)
    }

    /// The route to `dst` (not a local address), and the next hop it gives.
    #[inline]
    pub fn route(&self, dst: Ipv4Addr) -> Option<(PortId, Ipv4Addr)> {
        let r = self.routes.get(self.lpm.index(dst))?;
        Some((r.port, r.gateway.unwrap_or(dst)))
    }

    /// Checks `pkt` and decides its fate; a packet to forward has its TTL
    /// decremented and its checksum updated in place.
    #[inline]
    pub fn decide(&self, pkt: &mut [u8]) -> Decision {
        let h = match ipv4::check(pkt) {
            Ok(h) => h,
            Err(e) => return Decision::Drop(e.into()),
        };
        let index = self.lpm.index(h.dst);
        let Some(&Route { port, gateway }) = self.routes.get(index) else {
            return if index == LOCAL as usize {
                Decision::Local { len: h.total_len }
            } else if h.ttl <= 1 {
                Decision::Drop(DropReason::TtlExpired)
            } else {
                Decision::Drop(DropReason::NoRoute)
            };
        };
        if h.ttl <= 1 {
            return Decision::Drop(DropReason::TtlExpired);
        }
        let next_hop = gateway.unwrap_or(h.dst);
        ipv4::decrement_ttl(pkt);
        Decision::Forward {
            port,
            next_hop,
            len: h.total_len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checked 20-byte header from 10.1.0.1 to `dst` with `ttl`, in a
    /// packet of `len` bytes.
    pub(crate) fn packet(dst: Ipv4Addr, ttl: u8, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[8] = ttl;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 1, 0, 1]);
        p[16..20].copy_from_slice(&dst.octets());
        let c = ipv4::checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    fn fwd() -> Forwarder {
        let mut f = Forwarder::new();
        f.add_route(
            Ipv4Addr::new(10, 1, 0, 0),
            24,
            Route {
                port: 0,
                gateway: None,
            },
        );
        f.add_route(
            Ipv4Addr::new(10, 2, 0, 0),
            24,
            Route {
                port: 1,
                gateway: None,
            },
        );
        f.add_route(
            Ipv4Addr::new(172, 16, 0, 0),
            12,
            Route {
                port: 1,
                gateway: Some(Ipv4Addr::new(10, 2, 0, 9)),
            },
        );
        f.add_local(Ipv4Addr::new(10, 1, 0, 254));
        f
    }

    #[test]
    fn a_good_packet_is_forwarded_with_ttl_and_checksum_updated() {
        let f = fwd();
        let mut p = packet(Ipv4Addr::new(10, 2, 0, 7), 64, 84);
        assert_eq!(
            f.decide(&mut p),
            Decision::Forward {
                port: 1,
                next_hop: Ipv4Addr::new(10, 2, 0, 7),
                len: 84
            }
        );
        assert_eq!(p[8], 63);
        assert!(ipv4::check(&p).is_ok());
        let mut p = packet(Ipv4Addr::new(172, 20, 1, 1), 2, 1500);
        assert_eq!(
            f.decide(&mut p),
            Decision::Forward {
                port: 1,
                next_hop: Ipv4Addr::new(10, 2, 0, 9),
                len: 1500
            }
        );
    }

    #[test]
    fn each_bad_packet_is_dropped_for_its_own_reason() {
        let f = fwd();
        let good = packet(Ipv4Addr::new(10, 2, 0, 7), 64, 60);
        let mut cases: Vec<(Vec<u8>, DropReason)> = Vec::new();
        let mut v = good.clone();
        v[0] = 0x65;
        cases.push((v, DropReason::BadVersion));
        let mut v = good.clone();
        v[0] = 0x43;
        cases.push((v, DropReason::BadHeaderLength));
        let mut v = good.clone();
        v[12] ^= 0x80;
        cases.push((v, DropReason::BadChecksum));
        cases.push((good[..40].to_vec(), DropReason::BadTotalLength));
        cases.push((good[..12].to_vec(), DropReason::Truncated));
        cases.push((
            packet(Ipv4Addr::new(10, 2, 0, 7), 1, 60),
            DropReason::TtlExpired,
        ));
        cases.push((
            packet(Ipv4Addr::new(10, 2, 0, 7), 0, 60),
            DropReason::TtlExpired,
        ));
        cases.push((
            packet(Ipv4Addr::new(192, 0, 2, 1), 64, 60),
            DropReason::NoRoute,
        ));
        for (mut p, want) in cases {
            let before = p.clone();
            assert_eq!(f.decide(&mut p), Decision::Drop(want), "{want:?}");
            assert_eq!(p, before, "a dropped packet is left as it was");
        }
    }

    #[test]
    fn packets_for_the_node_are_local_even_with_ttl_1() {
        let f = fwd();
        let mut p = packet(Ipv4Addr::new(10, 1, 0, 254), 1, 28);
        assert_eq!(f.decide(&mut p), Decision::Local { len: 28 });
        assert_eq!(p[8], 1);
    }
}
