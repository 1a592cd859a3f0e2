//! The real-time driver runs the same nodes as the simulator.

use std::time::Duration as StdDuration;

use aurora_net::switch::AtmSwitch;
use aurora_net::traffic::{Flow, TrafficHost};
use aurora_rt::{run, RtNode, Wire};
use aurora_engine::{LinkSpec, NodeId};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};

const OC12: f64 = 1_412_830.0;

#[test]
fn two_switches_three_hosts_on_threads() {
    let mut sw1 = AtmSwitch::new(4, Format::Uni);
    let mut sw2 = AtmSwitch::new(4, Format::Uni);
    sw1.add_vc(0, VcId::new(0, 100), 3, VcId::new(1, 200))
        .unwrap();
    sw2.add_vc(3, VcId::new(1, 200), 0, VcId::new(0, 300))
        .unwrap();
    sw2.add_vc(0, VcId::new(0, 301), 3, VcId::new(1, 201))
        .unwrap();
    sw1.add_vc(3, VcId::new(1, 201), 0, VcId::new(0, 101))
        .unwrap();
    let flow = |vc, len, count, every_us| Flow {
        id: 0,
        vc,
        sdu_len: len,
        count,
        start: Instant::from_millis(5),
        interval: Duration::from_micros(every_us),
    };
    let mut h1 = TrafficHost::new(Format::Uni);
    h1.add_flow(flow(VcId::new(0, 100), 9180, 200, 500))
        .unwrap();
    h1.expect(VcId::new(0, 101));
    let mut h3 = TrafficHost::new(Format::Uni);
    h3.add_flow(flow(VcId::new(0, 301), 1500, 500, 200))
        .unwrap();
    h3.expect(VcId::new(0, 300));
    let nodes: Vec<Box<dyn RtNode>> =
        vec![Box::new(h1), Box::new(h3), Box::new(sw1), Box::new(sw2)];
    let (h1, h3, s1, s2) = (NodeId(0), NodeId(1), NodeId(2), NodeId(3));
    let link = LinkSpec::clean(OC12, Duration::from_micros(20), 4096);
    let wires = [
        Wire {
            a: (h1, 0),
            b: (s1, 0),
            spec: link,
        },
        Wire {
            a: (h3, 0),
            b: (s2, 0),
            spec: link,
        },
        Wire {
            a: (s1, 3),
            b: (s2, 3),
            spec: link,
        },
    ];
    let done = run(nodes, &wires, 1, StdDuration::from_millis(300)).unwrap();
    let a = done
        .node::<TrafficHost>(h3)
        .unwrap()
        .received(VcId::new(0, 300));
    let b = done
        .node::<TrafficHost>(h1)
        .unwrap()
        .received(VcId::new(0, 101));
    for r in [a, b] {
        assert_eq!((r.corrupted, r.out_of_order), (0, 0), "{r:?}");
        assert!(r.delivered > 0, "{r:?}");
    }
    // 100 ms of each flow's 105 ms schedule have surely been delivered.
    assert!(a.delivered >= 150, "{a:?}");
    assert!(b.delivered >= 400, "{b:?}");
    let l = done.link(h1, 0).unwrap();
    assert_eq!(l.overflow + l.lost, 0);
    assert!(l.delivered <= l.offered);
    assert!(run(
        vec![Box::new(AtmSwitch::new(1, Format::Uni))],
        &[Wire {
            a: (NodeId(0), 0),
            b: (NodeId(0), 5),
            spec: link
        }],
        1,
        StdDuration::ZERO
    )
    .is_err());
}
