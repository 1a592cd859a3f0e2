//! Cells and ATOMIC frames in one engine: an ATM host pings an ATOMIC host
//! through an IP router with a port on each network, in virtual time.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use aurora_atomic::built::{interface_spec, HOST_PORT};
use aurora_atomic::gateway::Gateway;
use aurora_atomic::host::{AcRole, AtomicHost, HostConfig};
use aurora_atomic::layout::{Layout, HOST_BYTES};
use aurora_engine::carry::{Carries, Unit};
use aurora_engine::io::PacketDevice;
use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_ip::node::{Interface, IpConfig, IpNode, StaticRoute};
use aurora_time::Duration;
use aurora_wire::cell::VcId;
use aurora_wire::ipv4;
use aurora_wire::CellBytes;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// A local stack made of two queues the test reads and writes.
#[derive(Clone, Default)]
struct Stack {
    from_host: Arc<Mutex<VecDeque<Vec<u8>>>>,
    to_host: Arc<Mutex<VecDeque<Vec<u8>>>>,
}

impl PacketDevice for Stack {
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        Ok(self.from_host.lock().unwrap().pop_front().map(|p| {
            buf[..p.len()].copy_from_slice(&p);
            p.len()
        }))
    }
    fn send(&mut self, pkt: &[u8]) -> std::io::Result<bool> {
        self.to_host.lock().unwrap().push_back(pkt.to_vec());
        Ok(true)
    }
}

/// An ICMP echo request (type 8) or reply (type 0) from `src` to `dst`.
fn echo(src: Ipv4Addr, dst: Ipv4Addr, kind: u8, seq: u16) -> Vec<u8> {
    let mut p = vec![0u8; 20 + 8 + 32];
    let len = p.len() as u16;
    p[0] = 0x45;
    p[2..4].copy_from_slice(&len.to_be_bytes());
    p[ipv4::TTL] = 64;
    p[ipv4::PROTOCOL] = ipv4::PROTO_ICMP;
    p[ipv4::SRC..ipv4::SRC + 4].copy_from_slice(&src.octets());
    p[ipv4::DST..ipv4::DST + 4].copy_from_slice(&dst.octets());
    let c = ipv4::checksum(&p[..20]);
    p[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
    p[20] = kind;
    p[26..28].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in p[28..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let c = ipv4::checksum(&p[20..]);
    p[22..24].copy_from_slice(&c.to_be_bytes());
    p
}

struct Net {
    e: Engine<Unit>,
    atm: NodeId,
    gw: NodeId,
    atm_stack: Stack,
    lan_stack: Stack,
}

/// ATM host 10.1.0.1 - router (10.1.0.254 | 10.0.0.2) - a 3 x 3 ATOMIC
/// mesh with the AC on 10.0.0.1 and the pinged host on 10.0.0.3.
fn build(seed: u64) -> Net {
    build_with(seed, true)
}

fn build_with(seed: u64, devices: bool) -> Net {
    let layout = Layout::grid(3, 3, &[(0, 0), (2, 2), (2, 0)], seed);
    let mut plan = layout.plan(seed, &|addr, id| HostConfig {
        role: if addr == ip("10.0.0.1") {
            AcRole::Always
        } else {
            AcRole::Never
        },
        prefix: 24,
        gateway: Some(ip("10.0.0.2")),
        ..HostConfig::new(addr, id)
    });
    let (lan_side, lan_node) = plan.take_host(ip("10.0.0.2")).unwrap();
    let vc = VcId::new(0, 100);
    let mut host = IpNode::new(IpConfig {
        interfaces: vec![Some(Interface {
            addr: ip("10.1.0.1"),
            prefix: 24,
        })],
        routes: vec![StaticRoute {
            dst: ip("0.0.0.0"),
            prefix: 0,
            gateway: ip("10.1.0.254"),
        }],
        ..IpConfig::default()
    })
    .unwrap();
    host.add_pvc(0, vc, None).unwrap();
    let mut router = IpNode::new(IpConfig {
        interfaces: vec![Some(Interface {
            addr: ip("10.1.0.254"),
            prefix: 24,
        })],
        packet_interfaces: vec![Interface {
            addr: ip("10.0.0.2"),
            prefix: 24,
        }],
        forwarding: true,
        ..IpConfig::default()
    })
    .unwrap();
    router.add_pvc(0, vc, None).unwrap();
    let gw = Gateway::new(router, vec![lan_side]).unwrap();

    let mut e: Engine<Unit> = Engine::with_frames(seed);
    let atm = e.add_boxed(<Unit as Carries<CellBytes>>::adopt(Box::new(host)));
    let gw = e.add_node(gw);
    let (mosaic, hosts) = plan.add_to(&mut e).unwrap();
    // OC-3c: 353,207 cells/s.
    e.connect(
        (atm, 0),
        (gw, 0),
        LinkSpec::clean(353_207.0, Duration::from_micros(20), 256),
    )
    .unwrap();
    e.connect_oneway(
        (gw, 1),
        (mosaic[lan_node], HOST_PORT),
        interface_spec(HOST_BYTES),
    )
    .unwrap();
    e.connect_oneway(
        (mosaic[lan_node], HOST_PORT),
        (gw, 1),
        interface_spec(HOST_BYTES),
    )
    .unwrap();
    let pinged = hosts.iter().find(|h| h.0 == ip("10.0.0.3")).unwrap().1;
    let atm_stack = Stack::default();
    let lan_stack = Stack::default();
    if devices {
        e.set_packet_device(atm, Box::new(atm_stack.clone()))
            .unwrap();
        e.set_packet_device(pinged, Box::new(lan_stack.clone()))
            .unwrap();
    } else {
        // A flow from the ATOMIC host to the ATM host instead.
        e.node_mut::<AtomicHost>(pinged)
            .unwrap()
            .add_flow(aurora_atomic::host::IpFlow {
                dst: ip("10.1.0.1"),
                size: 1000,
                count: 300,
                start: aurora_time::Instant::ZERO + Duration::from_millis(100),
                interval: Duration::from_micros(200),
                kbps: 0,
            });
        e.touch(pinged);
    }
    Net {
        e,
        atm,
        gw,
        atm_stack,
        lan_stack,
    }
}

/// Runs `d` more of virtual time, moving packets in and out of the stacks.
fn run(n: &mut Net, d: Duration) {
    let end = n.e.now() + d;
    while n.e.now() < end {
        n.e.poll_external();
        let t = (n.e.now() + Duration::from_micros(100)).min(end);
        n.e.run_until(t);
    }
    n.e.poll_external();
}

#[test]
fn an_atm_host_pings_an_atomic_host_through_the_router_and_back() {
    let mut n = build(7);
    // Time for the AC to map the LAN and for InATMARP on the PVC.
    run(&mut n, Duration::from_secs(2));
    for seq in 0..5u16 {
        n.atm_stack.from_host.lock().unwrap().push_back(echo(
            ip("10.1.0.1"),
            ip("10.0.0.3"),
            8,
            seq,
        ));
        run(&mut n, Duration::from_millis(50));
        // The pinged host's stack sees the request, TTL one less for the
        // router, and answers it.
        let req = n.lan_stack.to_host.lock().unwrap().pop_front();
        let req = req.unwrap_or_else(|| panic!("echo request {seq} did not reach 10.0.0.3"));
        assert_eq!(ipv4::src(&req), Some(ip("10.1.0.1")));
        assert_eq!(req[ipv4::TTL], 63);
        n.lan_stack.from_host.lock().unwrap().push_back(echo(
            ip("10.0.0.3"),
            ip("10.1.0.1"),
            0,
            seq,
        ));
        run(&mut n, Duration::from_millis(50));
        let rep = n.atm_stack.to_host.lock().unwrap().pop_front();
        let rep = rep.unwrap_or_else(|| panic!("echo reply {seq} did not come back"));
        assert_eq!(ipv4::src(&rep), Some(ip("10.0.0.3")));
        assert_eq!(rep[20], 0);
        assert_eq!(u16::from_be_bytes([rep[26], rep[27]]), seq);
        assert_eq!(rep[ipv4::TTL], 63);
    }
    // The router's own ATOMIC address answers pings from the ATM side.
    n.atm_stack
        .from_host
        .lock()
        .unwrap()
        .push_back(echo(ip("10.1.0.1"), ip("10.0.0.2"), 8, 99));
    run(&mut n, Duration::from_millis(50));
    let rep = n.atm_stack.to_host.lock().unwrap().pop_front().unwrap();
    assert_eq!(ipv4::src(&rep), Some(ip("10.0.0.2")));
    // Books: the router forwarded 5 each way plus its own answer; nothing
    // dropped anywhere.
    let g = n.e.node::<Gateway>(n.gw).unwrap();
    let c = g.ip().counters();
    assert_eq!(c.drops.total(), 0, "{:?}", c.drops);
    assert_eq!(g.lans()[0].counters().no_route, 0);
    assert_eq!(g.wrong_kind(), 0);
    let h = n.e.node::<IpNode>(n.atm).unwrap().counters();
    assert_eq!((h.from_host, h.to_host), (6, 6));
    // The router is found by its IP side's type too.
    assert!(n.e.node::<IpNode>(n.gw).is_some());
    assert!(n.e.node::<AtomicHost>(n.gw).is_none());
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    // Without packet devices: an engine with external I/O keeps no digest.
    let digest = |seed| {
        let mut n = build_with(seed, false);
        n.e.run_until(aurora_time::Instant::ZERO + Duration::from_millis(200));
        assert!(n.e.node::<IpNode>(n.atm).unwrap().counters().to_host > 0);
        n.e.trace_hash()
    };
    assert_eq!(digest(3), digest(3));
    assert_ne!(digest(3), digest(4));
}

#[test]
fn a_mixed_network_gives_the_same_trace_on_1_2_and_4_workers() {
    let run = |workers: usize| {
        let mut n = build_with(5, false);
        if workers > 1 {
            let home = n.e.plan(workers, Duration::from_nanos(1));
            n.e.partition(&home).unwrap();
        }
        n.e.run_until(aurora_time::Instant::ZERO + Duration::from_millis(450));
        let h = n.e.node::<IpNode>(n.atm).unwrap().counters();
        (n.e.trace_hash(), n.e.events(), h.to_host, n.e.workers())
    };
    let one = run(1);
    assert_eq!(one.2, 300, "every flow packet reached the ATM host");
    for w in [2, 4] {
        let r = run(w);
        assert!(r.3 > 1, "the network split into {} parts", r.3);
        assert_eq!((r.0, r.1, r.2), (one.0, one.1, one.2), "{w} workers");
    }
}
