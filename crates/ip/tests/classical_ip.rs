//! Classical IP between IP nodes joined back to back (one PVC per link, the
//! same VC at both ends): InATMARP, host delivery, routing between logical
//! IP subnets, ICMP, and every drop counted.

use std::any::Any;
use std::net::Ipv4Addr;

use aurora_ip::forward::DropReason;
use aurora_ip::node::{Interface, IpConfig, IpNode, StaticRoute};
use aurora_net::switch::AtmSwitch;
use aurora_net::{Node, Outbox, PortId};
use aurora_sar::{Aal5Tx, PduOptions};
use aurora_time::{Duration, Instant};
use aurora_wire::atmarp::AtmAddr;
use aurora_wire::cell::{Format, VcId};
use aurora_wire::ipv4;
use aurora_wire::llc::Protocol;

const VC: VcId = VcId::new(0, 40);

/// A node the harness can run and look inside.
trait TestNode: Node + Any {}
impl<T: Node + Any> TestNode for T {}

/// Nodes and the wires between their ports.
struct Net {
    nodes: Vec<Box<dyn TestNode>>,
    wires: Vec<((usize, PortId), (usize, PortId))>,
    now: Instant,
    /// What each node's host was handed.
    host: Vec<Vec<Vec<u8>>>,
}

impl Net {
    fn peer(&self, n: usize, p: PortId) -> Option<(usize, PortId)> {
        self.wires.iter().find_map(|&(a, b)| {
            if a == (n, p) {
                Some(b)
            } else if b == (n, p) {
                Some(a)
            } else {
                None
            }
        })
    }

    fn route(&self, from: usize, out: &mut Outbox, queue: &mut Vec<(usize, PortId, [u8; 53])>) {
        for (p, c) in out.drain() {
            if let Some((m, q)) = self.peer(from, p) {
                queue.push((m, q, c));
            }
        }
    }

    /// Delivers queued cells, and whatever they cause, until none are left.
    fn settle(&mut self, mut queue: Vec<(usize, PortId, [u8; 53])>) {
        let mut out = Outbox::default();
        while !queue.is_empty() {
            for (n, p, c) in std::mem::take(&mut queue) {
                self.nodes[n].receive(self.now, p, &[c], &mut out);
                self.route(n, &mut out, &mut queue);
            }
        }
        for n in 0..self.nodes.len() {
            let host = &mut self.host[n];
            if let Some(port) = self.nodes[n].packet_port() {
                port.drain_to_host(&mut |p| host.push(p.to_vec()));
            }
        }
    }

    /// Runs every node for `d`, in steps of 10 us, moving cells at once.
    fn run(&mut self, d: Duration) {
        let end = self.now + d;
        let mut out = Outbox::default();
        while self.now < end {
            let mut queue = Vec::new();
            for n in 0..self.nodes.len() {
                if self.nodes[n].poll_at().is_some_and(|t| t <= self.now) {
                    self.nodes[n].poll(self.now, &mut out);
                    self.route(n, &mut out, &mut queue);
                }
            }
            self.settle(queue);
            self.now += Duration::from_micros(10);
        }
    }

    /// Node `n`, an IP node.
    fn ip(&self, n: usize) -> &IpNode {
        let any: &dyn Any = self.nodes[n].as_ref();
        any.downcast_ref().expect("an IP node")
    }

    /// Node `n`'s host sends `pkt`.
    fn send(&mut self, n: usize, pkt: &[u8]) {
        let mut out = Outbox::default();
        let mut queue = Vec::new();
        let now = self.now;
        self.nodes[n]
            .packet_port()
            .expect("an IP node")
            .host_sent(now, pkt, &mut out);
        self.route(n, &mut out, &mut queue);
        self.settle(queue);
    }
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn iface(s: &str) -> Option<Interface> {
    let (a, p) = s.split_once('/').unwrap();
    Some(Interface {
        addr: ip(a),
        prefix: p.parse().unwrap(),
    })
}

/// An IPv4 packet from `src` to `dst`: an ICMP echo request when `proto`
/// is 1, else `len` bytes of pattern.
fn packet(src: &str, dst: &str, ttl: u8, proto: u8, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = ttl;
    p[9] = proto;
    p[12..16].copy_from_slice(&ip(src).octets());
    p[16..20].copy_from_slice(&ip(dst).octets());
    for (i, b) in p[20..].iter_mut().enumerate() {
        *b = (i * 7) as u8;
    }
    if proto == 1 {
        p[20] = ipv4::ICMP_ECHO_REQUEST;
        p[21] = 0;
        p[22..24].fill(0);
        let c = ipv4::checksum(&p[20..]);
        p[22..24].copy_from_slice(&c.to_be_bytes());
    }
    let c = ipv4::checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p
}

fn host(addr: &str, gw: Option<&str>) -> IpNode {
    let mut n = IpNode::new(IpConfig {
        interfaces: vec![iface(addr)],
        routes: gw
            .map(|g| StaticRoute {
                dst: ip("0.0.0.0"),
                prefix: 0,
                gateway: ip(g),
            })
            .into_iter()
            .collect(),
        ..IpConfig::default()
    })
    .unwrap();
    n.add_pvc(0, VC, None).unwrap();
    n
}

fn two_hosts() -> Net {
    Net {
        nodes: vec![
            Box::new(host("10.1.0.1/24", None)),
            Box::new(host("10.1.0.2/24", None)),
        ],
        wires: vec![((0, 0), (1, 0))],
        now: Instant::ZERO,
        host: vec![Vec::new(), Vec::new()],
    }
}

/// h1 (10.1.0.1) - r (10.1.0.254 | 10.2.0.254) - h2 (10.2.0.1).
fn routed() -> Net {
    let mut r = IpNode::new(IpConfig {
        interfaces: vec![iface("10.1.0.254/24"), iface("10.2.0.254/24")],
        forwarding: true,
        ..IpConfig::default()
    })
    .unwrap();
    r.add_pvc(0, VC, None).unwrap();
    r.add_pvc(1, VC, None).unwrap();
    Net {
        nodes: vec![
            Box::new(host("10.1.0.1/24", Some("10.1.0.254"))),
            Box::new(r),
            Box::new(host("10.2.0.1/24", Some("10.2.0.254"))),
        ],
        wires: vec![((0, 0), (1, 0)), ((1, 1), (2, 0))],
        now: Instant::ZERO,
        host: vec![Vec::new(), Vec::new(), Vec::new()],
    }
}

#[test]
fn inatmarp_resolves_both_ends_and_packets_arrive_intact() {
    let mut net = two_hosts();
    net.run(Duration::from_millis(1));
    assert_eq!(
        net.ip(0).neighbours().next(),
        Some((0, VC, Some(ip("10.1.0.2"))))
    );
    assert_eq!(
        net.ip(1).neighbours().next(),
        Some((0, VC, Some(ip("10.1.0.1"))))
    );
    for len in [28, 1500, 9180] {
        let p = packet("10.1.0.1", "10.1.0.2", 64, 17, len);
        net.send(0, &p);
        net.run(Duration::from_micros(20));
        assert_eq!(net.host[1].pop(), Some(p), "{len}");
    }
    // Longer than the MTU: dropped, counted, and the host is told.
    net.send(0, &packet("10.1.0.1", "10.1.0.2", 64, 17, 9181));
    net.run(Duration::from_micros(20));
    let c = net.ip(0).counters();
    assert_eq!(c.drops.get(DropReason::TooBig), 1);
    let icmp = net.host[0].pop().expect("frag needed to the host");
    assert_eq!(&icmp[20..22], &[3, 4]);
    assert_eq!(u16::from_be_bytes([icmp[26], icmp[27]]), 9180);
    assert_eq!(c.packets_out, 3);
    assert_eq!(net.ip(1).counters().to_host, 3);
}

#[test]
fn a_packet_sent_before_resolution_waits_for_it() {
    let mut net = two_hosts();
    let p = packet("10.1.0.1", "10.1.0.2", 64, 17, 100);
    net.send(0, &p);
    net.run(Duration::from_millis(1));
    assert_eq!(net.host[1], vec![p]);
}

#[test]
fn an_unresolvable_address_gets_a_host_unreachable_after_the_timeout() {
    let mut net = two_hosts();
    net.run(Duration::from_millis(1));
    net.send(0, &packet("10.1.0.1", "10.1.0.77", 64, 1, 64));
    net.run(Duration::from_millis(2900));
    assert!(net.host[0].is_empty());
    net.run(Duration::from_millis(200));
    let icmp = net.host[0].pop().expect("host unreachable");
    assert_eq!(&icmp[20..22], &[3, 1]);
    assert_eq!(ipv4::src(&icmp), Some(ip("10.1.0.1")));
    assert_eq!(net.ip(0).counters().drops.get(DropReason::Unresolved), 1);
    assert_eq!(net.ip(0).last_unresolved(), Some(ip("10.1.0.77")));
}

#[test]
fn the_router_forwards_with_ttl_and_checksum_updated() {
    let mut net = routed();
    net.run(Duration::from_millis(1));
    let p = packet("10.1.0.1", "10.2.0.1", 64, 17, 1500);
    net.send(0, &p);
    net.run(Duration::from_micros(50));
    let got = net.host[2].pop().expect("forwarded");
    assert_eq!(got[8], 63);
    assert!(ipv4::check(&got).is_ok());
    assert_eq!(&got[20..], &p[20..]);
    // And back.
    let q = packet("10.2.0.1", "10.1.0.1", 9, 17, 64);
    net.send(2, &q);
    net.run(Duration::from_micros(50));
    assert_eq!(net.host[0].pop().unwrap()[8], 8);
}

#[test]
fn the_router_answers_pings_and_reports_ttl_and_routes() {
    let mut net = routed();
    net.run(Duration::from_millis(1));
    // A ping to the router's far address.
    net.send(0, &packet("10.1.0.1", "10.2.0.254", 64, 1, 64));
    net.run(Duration::from_micros(50));
    let r = net.host[0].pop().expect("echo reply");
    assert_eq!(r[20], ipv4::ICMP_ECHO_REPLY);
    assert_eq!(ipv4::src(&r), Some(ip("10.2.0.254")));
    assert!(ipv4::check(&r).is_ok());
    assert_eq!(ipv4::ones_sum(&r[20..]), 0xFFFF);
    // TTL 1: time exceeded from the router's near address.
    let t = packet("10.1.0.1", "10.2.0.1", 1, 17, 64);
    net.send(0, &t);
    net.run(Duration::from_micros(50));
    let e = net.host[0].pop().expect("time exceeded");
    assert_eq!(&e[20..22], &[11, 0]);
    assert_eq!(ipv4::src(&e), Some(ip("10.1.0.254")));
    assert_eq!(&e[28..48], &t[..20]);
    // No route at the router (the host sends anything off-subnet to it).
    net.send(0, &packet("10.1.0.1", "192.0.2.1", 64, 17, 64));
    net.run(Duration::from_micros(50));
    let u = net.host[0].pop().expect("net unreachable");
    assert_eq!(&u[20..22], &[3, 0]);
    let c = net.ip(1).counters();
    assert_eq!(c.drops.get(DropReason::TtlExpired), 1);
    assert_eq!(c.drops.get(DropReason::NoRoute), 1);
    assert_eq!(c.icmp_sent, 3);
    assert!(net.host[2].is_empty());
}

#[test]
fn bad_headers_reaching_the_router_are_each_counted() {
    let mut net = routed();
    net.run(Duration::from_millis(1));
    let good = packet("10.1.0.1", "10.2.0.1", 64, 17, 60);
    let mut cases: Vec<(Vec<u8>, DropReason)> = Vec::new();
    let mut v = good.clone();
    v[0] = 0x55;
    cases.push((v, DropReason::BadVersion));
    let mut v = good.clone();
    v[0] = 0x42;
    cases.push((v, DropReason::BadHeaderLength));
    let mut v = good.clone();
    v[16] = 11;
    cases.push((v, DropReason::BadChecksum));
    let mut v = good.clone();
    v[2..4].copy_from_slice(&100u16.to_be_bytes());
    let c = ipv4::checksum(&{
        let mut h = v[..20].to_vec();
        h[10] = 0;
        h[11] = 0;
        h
    });
    v[10..12].copy_from_slice(&c.to_be_bytes());
    cases.push((v, DropReason::BadTotalLength));
    cases.push((good[..10].to_vec(), DropReason::Truncated));
    let mut tx = Aal5Tx::new(VC, Format::Uni).unwrap();
    for (pkt, _) in &cases {
        let hdr = Protocol::Ipv4.llc_header();
        let parts: [&[u8]; 2] = [&hdr, pkt];
        let mut seg = tx.segment(&parts, PduOptions::default()).unwrap();
        let mut cells = vec![[0u8; 53]; 4];
        let n = seg.fill(&mut cells);
        let mut out = Outbox::default();
        net.nodes[1].receive(net.now, 0, &cells[..n], &mut out);
        assert!(out.is_empty());
    }
    let c = net.ip(1).counters();
    for (_, r) in &cases {
        assert_eq!(c.drops.get(*r), 1, "{r:?}");
    }
    assert_eq!(c.drops.total(), cases.len() as u64);
    assert!(net.host[2].is_empty());
}

fn nsap(last: u8) -> AtmAddr {
    let mut a = [0u8; 20];
    a[0] = 0x47;
    a[19] = last;
    AtmAddr::nsap(&a).unwrap()
}

/// h1, h2 and an ATMARP server s on one switch; InATMARP off at the hosts,
/// so every address comes from the server. PVCs: h1-s on 0.50, h2-s on
/// 0.51, h1-h2 on 0.52.
fn with_server() -> Net {
    let (vs1, vs2, v12) = (VcId::new(0, 50), VcId::new(0, 51), VcId::new(0, 52));
    let client = |addr: &str, me: u8, server_vc: VcId, other: (VcId, u8)| {
        let mut n = IpNode::new(IpConfig {
            interfaces: vec![iface(addr)],
            atm: nsap(me),
            inarp: false,
            server_vc: Some((0, server_vc)),
            ..IpConfig::default()
        })
        .unwrap();
        n.add_pvc(0, server_vc, Some(nsap(100))).unwrap();
        n.add_pvc(0, other.0, Some(nsap(other.1))).unwrap();
        n
    };
    let mut s = IpNode::new(IpConfig {
        interfaces: vec![iface("10.1.0.100/24")],
        atm: nsap(100),
        inarp: false,
        atmarp_server: true,
        ..IpConfig::default()
    })
    .unwrap();
    s.add_pvc(0, vs1, Some(nsap(1))).unwrap();
    s.add_pvc(0, vs2, Some(nsap(2))).unwrap();
    let mut sw = AtmSwitch::new(3, Format::Uni);
    for (a, b, vc) in [(0, 2, vs1), (1, 2, vs2), (0, 1, v12)] {
        sw.add_vc(a, vc, b, vc).unwrap();
        sw.add_vc(b, vc, a, vc).unwrap();
    }
    Net {
        nodes: vec![
            Box::new(client("10.1.0.1/24", 1, vs1, (v12, 2))),
            Box::new(client("10.1.0.2/24", 2, vs2, (v12, 1))),
            Box::new(s),
            Box::new(sw),
        ],
        wires: vec![((0, 0), (3, 0)), ((1, 0), (3, 1)), ((2, 0), (3, 2))],
        now: Instant::ZERO,
        host: vec![Vec::new(); 4],
    }
}

#[test]
fn clients_register_with_the_atmarp_server_and_resolve_through_it() {
    let mut net = with_server();
    net.run(Duration::from_millis(1));
    assert_eq!(
        net.ip(2).atmarp_table(),
        vec![(ip("10.1.0.1"), nsap(1)), (ip("10.1.0.2"), nsap(2))]
    );
    assert!(net.ip(0).registered().is_some());
    assert!(net.ip(1).registered().is_some());
    assert_eq!(net.ip(0).counters().inarp_requests, 0);

    // h1 to h2: h1 asks the server, maps h2's ATM address to the h1-h2
    // PVC; h2 does the same for the way back.
    let p = packet("10.1.0.1", "10.1.0.2", 64, 17, 500);
    net.send(0, &p);
    net.run(Duration::from_micros(100));
    assert_eq!(net.host[1], vec![p]);
    assert_eq!(
        net.ip(0).arp().lookup(net.now, ip("10.1.0.2")).unwrap().vc,
        VcId::new(0, 52)
    );
    let q = packet("10.1.0.2", "10.1.0.1", 64, 17, 100);
    net.send(1, &q);
    net.run(Duration::from_micros(100));
    assert_eq!(net.host[0], vec![q]);
    assert_eq!(net.ip(2).counters().served, [4, 0]);

    // An address nobody registered: the server says NAK, and the host
    // hears at once (not after the 3 s timeout).
    net.send(0, &packet("10.1.0.1", "10.1.0.99", 64, 1, 64));
    net.run(Duration::from_micros(100));
    let icmp = net.host[0].pop().expect("host unreachable");
    assert_eq!(&icmp[20..22], &[3, 1]);
    assert_eq!(net.ip(0).counters().drops.get(DropReason::Unresolved), 1);
    assert_eq!(net.ip(2).counters().served, [4, 1]);
}

#[test]
fn registrations_age_out_of_the_server_unless_renewed() {
    let mut net = with_server();
    net.run(Duration::from_millis(1));
    assert_eq!(net.ip(2).atmarp_table().len(), 2);
    // Clients renew halfway through their 15-minute ageing; the server
    // keeps entries 20 minutes. An hour later both are still there.
    for _ in 0..60 {
        let t = net.now + Duration::from_secs(60);
        // Jump time (the harness steps 10 us; move the clock by hand).
        net.now = t;
        net.run(Duration::from_micros(20));
    }
    assert_eq!(net.ip(2).atmarp_table().len(), 2);
    // At start, then every 7.5 minutes (seen at 1-minute steps: every 8).
    let regs = net.ip(0).counters().atmarp_requests;
    assert!((8..=9).contains(&regs), "{regs} registrations in an hour");
    // Cut h2 off: 20 minutes after its last renewal the server forgets it.
    net.wires.retain(|w| w.0 .0 != 1);
    for _ in 0..30 {
        net.now += Duration::from_secs(60);
        net.run(Duration::from_micros(20));
    }
    assert_eq!(net.ip(2).atmarp_table(), vec![(ip("10.1.0.1"), nsap(1))]);
}
