//! TCP hosts on the cell network, in the engine's virtual time: two hosts
//! through an ATM switch, one PVC each way, a bulk transfer checked byte
//! for byte; and over a lossy trunk, where every packet is accounted for.

use std::net::Ipv4Addr;

use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_ip::node::{Interface, IpConfig, IpNode};
use aurora_net::switch::AtmSwitch;
use aurora_tcp::conn::{CloseReason, Config, Endpoint, Variant};
use aurora_tcp::host::{Amount, Role, SinkSpec, SourceSpec, TcpHost};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};

/// OC-3c in cells a second.
const OC3: f64 = 353_207.5;
const VC: VcId = VcId::new(0, 40);

fn ip_host(addr: Ipv4Addr) -> IpNode {
    let mut n = IpNode::new(IpConfig {
        interfaces: vec![Some(Interface { addr, prefix: 24 })],
        ..IpConfig::default()
    })
    .expect("a valid configuration");
    n.add_pvc(0, VC, None).expect("a PVC");
    n
}

struct Net {
    sim: Engine,
    h1: NodeId,
    h2: NodeId,
}

/// h1 — sw — h2; `trunk` is the sw—h2 link.
fn build(source: SourceSpec, sink: SinkSpec, trunk: LinkSpec) -> Net {
    let mut sim = Engine::new(7);
    let mut sw = AtmSwitch::new(2, Format::Uni);
    sw.add_vc(0, VC, 1, VC).expect("vc");
    sw.add_vc(1, VC, 0, VC).expect("vc");
    let mut h1 = TcpHost::new(ip_host(Ipv4Addr::new(10, 1, 0, 1)), 1);
    let mut h2 = TcpHost::new(ip_host(Ipv4Addr::new(10, 1, 0, 2)), 2);
    h1.add_source(source);
    h2.add_sink(sink);
    let (h1, h2, sw) = (sim.add_node(h1), sim.add_node(h2), sim.add_node(sw));
    let access = LinkSpec::clean(OC3, Duration::from_micros(5), 4096);
    sim.connect((h1, 0), (sw, 0), access).expect("link");
    sim.connect((sw, 1), (h2, 0), trunk).expect("link");
    Net { sim, h1, h2 }
}

fn source(bytes: u64, variant: Variant) -> SourceSpec {
    SourceSpec {
        name: "bulk".into(),
        remote: Endpoint {
            addr: Ipv4Addr::new(10, 1, 0, 2),
            port: 5001,
        },
        local_port: 40_000,
        cfg: Config {
            variant,
            mss: 9140,
            ..Config::default()
        },
        // After InATMARP has found the far end.
        start: Instant::from_millis(10),
        amount: Amount::Bytes(bytes),
        drop_segments: Vec::new(),
    }
}

fn sink() -> SinkSpec {
    SinkSpec {
        name: "sink".into(),
        port: 5001,
        cfg: Config {
            mss: 9140,
            ..Config::default()
        },
        check: true,
    }
}

#[test]
fn a_transfer_crosses_the_cell_network_intact() {
    let total = 20_000_000;
    let mut n = build(
        source(total, Variant::Sack),
        sink(),
        LinkSpec::clean(OC3, Duration::from_millis(1), 4096),
    );
    n.sim.run_until(Instant::from_millis(5_000));
    let h1: &TcpHost = n.sim.node(n.h1).expect("h1");
    let h2: &TcpHost = n.sim.node(n.h2).expect("h2");
    let src = &h1.flows()[0];
    let dst = &h2.flows()[0];
    assert_eq!(dst.role(), Role::Sink);
    assert_eq!(src.app_bytes(), total);
    assert_eq!(dst.app_bytes(), total, "every byte arrived");
    assert_eq!(dst.pattern_errors(), 0);
    let c = src.connection().expect("connected");
    assert_eq!(c.smss(), 9140 - 12, "the MSS from the MTU, less timestamps");
    // OC-3c carries 149.76 Mb/s of cell payload; 9 KB segments in AAL5
    // with LLC/SNAP and TCP/IP headers give about 148 Mb/s of data.
    let secs = dst
        .done()
        .expect("done")
        .since(src.started().expect("started"))
        .as_secs_f64();
    let goodput = total as f64 * 8.0 / secs;
    assert!(goodput > 120e6, "{goodput:.0} b/s");
    for h in [h1, h2] {
        assert!(h.counters().balanced(), "{:?}", h.counters());
    }
    assert_eq!(
        dst.connection().and_then(|c| c.close_reason()),
        Some(CloseReason::Done)
    );
}

#[test]
fn losses_on_the_trunk_are_repaired_and_every_packet_counted() {
    let total = 5_000_000;
    let mut trunk = LinkSpec::clean(OC3, Duration::from_millis(1), 4096);
    trunk.loss = 1e-4; // per cell: about one segment in 50 of 9 KB
    for v in Variant::ALL {
        let mut n = build(source(total, v), sink(), trunk);
        n.sim.run_until(Instant::from_millis(60_000));
        let h1: &TcpHost = n.sim.node(n.h1).expect("h1");
        let h2: &TcpHost = n.sim.node(n.h2).expect("h2");
        let dst = &h2.flows()[0];
        assert_eq!(dst.app_bytes(), total, "{v}");
        assert_eq!(dst.pattern_errors(), 0);
        let s = h1.flows()[0].connection().expect("conn").stats();
        assert!(s.retransmits > 0, "{v}: losses were repaired");
        assert!(h1.counters().balanced() && h2.counters().balanced());
        // Segments sent by h1 = segments h2's IP node handed up + lost on
        // the way (a lost cell loses its PDU, which h2's reassembler
        // counts); nothing is in flight at the end.
        let sent = h1.counters().packets_out;
        let arrived = h2.counters().packets_in;
        let lost_pdus = h2.ip().counters().sdus_dropped;
        assert!(lost_pdus > 0);
        assert_eq!(sent, arrived + lost_pdus, "{v}");
    }
}
