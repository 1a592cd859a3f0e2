//! Scenarios in virtual time: two switches, a trunk, three hosts.

use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_net::switch::{AtmSwitch, SwitchDrop};
use aurora_net::traffic::{Flow, TrafficHost};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};

const OC3: f64 = 353_207.5;

struct Net {
    sim: Engine,
    h1: NodeId,
    h2: NodeId,
    h3: NodeId,
    sw1: NodeId,
    sw2: NodeId,
}

const H1_TX: VcId = VcId::new(0, 100);
const H3_RX_FROM_H1: VcId = VcId::new(0, 300);
const H3_TX: VcId = VcId::new(0, 301);
const H1_RX_FROM_H3: VcId = VcId::new(0, 101);
const H2_TX: VcId = VcId::new(0, 110);
const H3_RX_FROM_H2: VcId = VcId::new(0, 310);

/// h1, h2 on sw1 ports 0, 1; h3 on sw2 port 0; trunk sw1:3 <-> sw2:3.
fn build(seed: u64, trunk: LinkSpec, flows: [Option<Flow>; 3]) -> Net {
    let mut sim = Engine::new(seed);
    let mut sw1 = AtmSwitch::new(4, Format::Uni);
    let mut sw2 = AtmSwitch::new(4, Format::Uni);
    // h1 -> h3
    sw1.add_vc(0, H1_TX, 3, VcId::new(1, 200)).unwrap();
    sw2.add_vc(3, VcId::new(1, 200), 0, H3_RX_FROM_H1).unwrap();
    // h3 -> h1
    sw2.add_vc(0, H3_TX, 3, VcId::new(1, 201)).unwrap();
    sw1.add_vc(3, VcId::new(1, 201), 0, H1_RX_FROM_H3).unwrap();
    // h2 -> h3
    sw1.add_vc(1, H2_TX, 3, VcId::new(1, 210)).unwrap();
    sw2.add_vc(3, VcId::new(1, 210), 0, H3_RX_FROM_H2).unwrap();
    let mut h1 = TrafficHost::new(Format::Uni);
    let mut h2 = TrafficHost::new(Format::Uni);
    let mut h3 = TrafficHost::new(Format::Uni);
    if let Some(f) = flows[0] {
        h1.add_flow(Flow {
            id: 1,
            vc: H1_TX,
            ..f
        })
        .unwrap();
    }
    if let Some(f) = flows[1] {
        h3.add_flow(Flow {
            id: 3,
            vc: H3_TX,
            ..f
        })
        .unwrap();
    }
    if let Some(f) = flows[2] {
        h2.add_flow(Flow {
            id: 2,
            vc: H2_TX,
            ..f
        })
        .unwrap();
    }
    h1.expect(H1_RX_FROM_H3);
    h3.expect(H3_RX_FROM_H1);
    h3.expect(H3_RX_FROM_H2);
    let (h1, h2, h3) = (sim.add_node(h1), sim.add_node(h2), sim.add_node(h3));
    let (sw1, sw2) = (sim.add_node(sw1), sim.add_node(sw2));
    let access = LinkSpec::clean(OC3, Duration::from_micros(5), 4096);
    sim.connect((h1, 0), (sw1, 0), access).unwrap();
    sim.connect((h2, 0), (sw1, 1), access).unwrap();
    sim.connect((h3, 0), (sw2, 0), access).unwrap();
    sim.connect((sw1, 3), (sw2, 3), trunk).unwrap();
    Net {
        sim,
        h1,
        h2,
        h3,
        sw1,
        sw2,
    }
}

fn flow(len: usize, count: u64, every_us: i64) -> Option<Flow> {
    Some(Flow {
        id: 0,
        vc: VcId::new(0, 0),
        sdu_len: len,
        count,
        start: Instant::from_micros(10),
        interval: Duration::from_micros(every_us),
    })
}

fn host(n: &Net, id: NodeId) -> &TrafficHost {
    n.sim.node::<TrafficHost>(id).unwrap()
}

#[test]
fn every_pdu_of_every_flow_arrives_intact_and_in_order() {
    let trunk = LinkSpec::clean(OC3, Duration::from_micros(100), 4096);
    let mut n = build(
        1,
        trunk,
        [
            flow(9180, 50, 2000),
            flow(1500, 200, 500),
            flow(40, 300, 300),
        ],
    );
    n.sim.run_until(Instant::from_millis(200));
    for (id, vc, count) in [
        (n.h3, H3_RX_FROM_H1, 50),
        (n.h1, H1_RX_FROM_H3, 200),
        (n.h3, H3_RX_FROM_H2, 300),
    ] {
        let r = host(&n, id).received(vc);
        assert_eq!(r.delivered, count, "{vc}: {r:?}");
        assert_eq!((r.missing, r.corrupted, r.out_of_order), (0, 0, 0), "{vc}");
    }
    assert_eq!(n.sim.in_flight(), 0, "nothing left in flight");
    assert_eq!(n.sim.unconnected(), 0);
    let sw1 = n.sim.node::<AtmSwitch>(n.sw1).unwrap();
    assert_eq!(sw1.counters(0).unwrap().dropped_total(), 0);
}

fn damaged_run(seed: u64) -> (u64, u64, u64) {
    let trunk = LinkSpec {
        loss: 0.002,
        bit_error: 0.002,
        ..LinkSpec::clean(OC3, Duration::from_micros(100), 4096)
    };
    let mut n = build(
        seed,
        trunk,
        [flow(3000, 200, 400), flow(1500, 200, 500), None],
    );
    n.sim.run_until(Instant::from_millis(150));
    let lost = n.sim.link(n.sw1, 3).unwrap().lost;
    (n.sim.trace_hash(), n.sim.events(), lost)
}

/// The damaged network run against the wall clock for 150 ms.
fn damaged_run_on_the_wall(seed: u64) -> ((u64, u64, u64), aurora_engine::lateness::Lateness) {
    let trunk = LinkSpec {
        loss: 0.002,
        bit_error: 0.002,
        ..LinkSpec::clean(OC3, Duration::from_micros(100), 4096)
    };
    let mut n = build(
        seed,
        trunk,
        [flow(3000, 200, 400), flow(1500, 200, 500), None],
    );
    let mut wall = n.sim.wall_clock(false);
    n.sim.run_wall(Instant::from_millis(150), &mut wall);
    let lost = n.sim.link(n.sw1, 3).unwrap().lost;
    let late = wall.lateness(Some(std::time::Duration::from_millis(150)));
    ((n.sim.trace_hash(), n.sim.events(), lost), late)
}

#[test]
fn the_wall_clock_runs_the_same_events_as_the_virtual_clock() {
    let (on_wall, late) = damaged_run_on_the_wall(7);
    assert_eq!(
        on_wall,
        damaged_run(7),
        "the same deliveries, at the same model times, in either clock"
    );
    // It took at least the 150 ms it modelled, and measured how late every
    // event ran.
    assert!(late.ended >= std::time::Duration::from_millis(150));
    let events: u64 = late.nodes.iter().map(|n| n.events.count()).sum();
    assert_eq!(events, on_wall.1, "every event's lateness was measured");
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let a = damaged_run(7);
    let b = damaged_run(7);
    assert_eq!(a, b, "identical event traces from the same seed");
    let c = damaged_run(8);
    assert_ne!(a.0, c.0, "a different seed changes the trace");
}

#[test]
fn an_overloaded_trunk_drops_with_reasons_and_every_cell_is_accounted() {
    // Two hosts each send at about 90% of OC-3 towards h3 over one OC-3
    // trunk with a small buffer.
    let trunk = LinkSpec::clean(OC3, Duration::from_micros(50), 256);
    let mut n = build(3, trunk, [flow(9180, 100, 600), None, flow(9180, 100, 600)]);
    // Long enough for the reassembly timers of broken PDUs to run out.
    n.sim.run_until(Instant::from_millis(2000));
    assert_eq!(n.sim.in_flight(), 0);
    let overflow = n.sim.link(n.sw1, 3).unwrap().overflow;
    assert!(overflow > 0, "the trunk's output buffer overflowed");
    let sent = host(&n, n.h1).cells_sent() + host(&n, n.h2).cells_sent();
    let mut dropped = 0;
    for (node, port) in [(n.h1, 0), (n.h2, 0), (n.sw1, 3), (n.sw2, 0)] {
        let c = n.sim.link(node, port).unwrap();
        dropped += c.overflow + c.lost;
    }
    let mut switch_drops = 0;
    for sw in [n.sw1, n.sw2] {
        let s = n.sim.node::<AtmSwitch>(sw).unwrap();
        for p in 0..4 {
            switch_drops += s.counters(p).unwrap().dropped_total();
        }
        assert_eq!(s.counters(3).unwrap().dropped(SwitchDrop::UnknownVc), 0);
    }
    let arrived = host(&n, n.h3).rx_stats().cells_in;
    assert_eq!(
        sent,
        arrived + dropped + switch_drops,
        "cells sent = delivered + counted losses"
    );
    // At the PDU level: nothing wrong was delivered, and each flow's PDUs
    // are delivered or missing; the reassembler names why it dropped.
    let mut delivered = 0;
    for vc in [H3_RX_FROM_H1, H3_RX_FROM_H2] {
        let r = host(&n, n.h3).received(vc);
        assert_eq!((r.corrupted, r.out_of_order), (0, 0));
        assert!(r.delivered + r.missing <= 100);
        delivered += r.delivered;
    }
    assert!(delivered < 200, "the overload cost PDUs");
    let st = host(&n, n.h3).rx_stats();
    assert!(st.pdus_dropped.total() > 0);
    assert_eq!(st.cells_balance(), 0);
}

#[test]
fn bad_topologies_are_refused() {
    let mut sim = Engine::new(1);
    let a = sim.add_node(TrafficHost::new(Format::Uni));
    let b = sim.add_node(AtmSwitch::new(2, Format::Uni));
    let l = LinkSpec::clean(OC3, Duration::ZERO, 16);
    assert!(sim.connect((a, 1), (b, 0), l).is_err(), "no such port");
    sim.connect((a, 0), (b, 0), l).unwrap();
    assert!(sim.connect((a, 0), (b, 1), l).is_err(), "port taken");
    assert!(sim
        .connect((b, 1), (b, 1), LinkSpec { rate: 0.0, ..l })
        .is_err());
}

/// Everything a run's outcome is made of: the trace digest, events, every
/// link direction's counters, what h3 and h1 received, and every drop
/// (time, place, reason), sorted.
type Outcome = (
    u64,
    u64,
    Vec<aurora_engine::DirCounters>,
    String,
    Vec<String>,
);

/// The overloaded, damaged network split as `home` says (node order h1,
/// h2, h3, sw1, sw2).
fn split_run(home: &[u32]) -> Outcome {
    let trunk = LinkSpec {
        loss: 0.001,
        bit_error: 0.001,
        ..LinkSpec::clean(OC3, Duration::from_micros(50), 256)
    };
    let mut n = build(
        11,
        trunk,
        [
            flow(9180, 60, 600),
            flow(1500, 200, 300),
            flow(9180, 60, 600),
        ],
    );
    n.sim.partition(home).unwrap();
    assert_eq!(n.sim.workers(), *home.iter().max().unwrap() as usize + 1);
    let drops = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let d = drops.clone();
    n.sim.set_drop_tap(Box::new(move |t, at, why, _| {
        d.lock().unwrap().push(format!("{t:?} {at:?} {why}"));
    }));
    // In steps, as a run with a live display does.
    for ms in [100, 700, 2000] {
        n.sim.run_until(Instant::from_millis(ms));
    }
    n.sim.clear_drop_tap();
    let mut drops = std::mem::take(&mut *drops.lock().unwrap());
    drops.sort();
    let links = [
        (n.h1, 0),
        (n.h2, 0),
        (n.h3, 0),
        (n.sw1, 0),
        (n.sw1, 1),
        (n.sw1, 3),
        (n.sw2, 0),
        (n.sw2, 3),
    ]
    .iter()
    .map(|&(node, port)| n.sim.link(node, port).unwrap())
    .collect();
    let rx = format!(
        "{:?} {:?} {:?}",
        host(&n, n.h3).received(H3_RX_FROM_H1),
        host(&n, n.h3).received(H3_RX_FROM_H2),
        host(&n, n.h1).received(H1_RX_FROM_H3)
    );
    (n.sim.trace_hash(), n.sim.events(), links, rx, drops)
}

#[test]
fn the_same_run_on_one_two_or_four_workers() {
    let one = split_run(&[0, 0, 0, 0, 0]);
    assert!(
        !one.4.is_empty(),
        "the overload and the damage dropped cells"
    );
    // Cut at the trunk; then every host on its own worker.
    let two = split_run(&[0, 0, 1, 0, 1]);
    let four = split_run(&[1, 2, 3, 0, 3]);
    assert_eq!(one, two, "two workers");
    assert_eq!(one, four, "four workers");
}

#[test]
fn a_plan_from_the_topology_cuts_the_long_trunk() {
    let trunk = LinkSpec::clean(OC3, Duration::from_millis(2), 256);
    let n = build(1, trunk, [None, None, None]);
    let edges: Vec<aurora_engine::plan::Edge> =
        [(n.h1, n.sw1), (n.h2, n.sw1), (n.h3, n.sw2), (n.sw1, n.sw2)]
            .iter()
            .zip([5, 5, 5, 2000])
            .map(|(&(a, b), us)| aurora_engine::plan::Edge {
                a: a.0,
                b: b.0,
                crossing: Duration::from_micros(us),
            })
            .collect();
    let home = aurora_engine::plan::plan(5, &edges, 2, Duration::from_micros(100), &[]);
    assert_eq!(home[n.h1.0 as usize], home[n.sw1.0 as usize]);
    assert_eq!(home[n.h3.0 as usize], home[n.sw2.0 as usize]);
    assert_ne!(home[n.sw1.0 as usize], home[n.sw2.0 as usize]);
}

#[test]
fn splitting_after_the_run_began_is_refused() {
    let trunk = LinkSpec::clean(OC3, Duration::from_micros(50), 256);
    let mut n = build(1, trunk, [flow(1500, 5, 100), None, None]);
    n.sim.run_until(Instant::from_millis(1));
    assert!(n.sim.partition(&[0, 0, 1, 0, 1]).is_err());
    let mut m = build(1, trunk, [None, None, None]);
    assert!(
        m.sim.partition(&[0, 1]).is_err(),
        "a plan for the wrong number of nodes"
    );
}

#[test]
fn split_between_workers_against_the_wall_clock_every_cell_is_accounted() {
    let trunk = LinkSpec {
        loss: 0.001,
        ..LinkSpec::clean(OC3, Duration::from_micros(200), 256)
    };
    let flows = [
        flow(9180, 30, 600),
        flow(1500, 100, 300),
        flow(9180, 30, 600),
    ];
    let mut one = build(5, trunk, flows);
    one.sim.run_until(Instant::from_millis(2000));
    let mut n = build(5, trunk, flows);
    n.sim.partition(&[0, 0, 1, 0, 1]).unwrap();
    let mut wall = n.sim.wall_clock(false);
    n.sim.run_wall(Instant::from_millis(60), &mut wall);
    // The senders are done by 30 ms; drain the rest in virtual time.
    n.sim.run_until(Instant::from_millis(2000));
    assert_eq!(n.sim.in_flight(), 0);
    assert_eq!(
        (n.sim.trace_hash(), n.sim.events()),
        (one.sim.trace_hash(), one.sim.events()),
        "two workers against the wall clock run what one runs in virtual time"
    );
    for (node, port) in [
        (n.h1, 0),
        (n.h2, 0),
        (n.h3, 0),
        (n.sw1, 0),
        (n.sw1, 1),
        (n.sw1, 3),
        (n.sw2, 0),
        (n.sw2, 3),
    ] {
        let c = n.sim.link(node, port).unwrap();
        assert_eq!(
            c.offered,
            c.delivered + c.overflow + c.lost,
            "{node:?}:{port} {c:?}"
        );
    }
    let sent = host(&n, n.h1).cells_sent() + host(&n, n.h2).cells_sent();
    let sw1 = n.sim.link(n.sw1, 3).unwrap();
    assert_eq!(
        sent,
        n.sim.link(n.h1, 0).unwrap().offered + n.sim.link(n.h2, 0).unwrap().offered
    );
    assert!(sw1.delivered > 0);
    let l = wall.lateness(Some(std::time::Duration::from_millis(60)));
    assert_eq!(l.workers, 2);
    let events: u64 = l.nodes.iter().map(|x| x.events.count()).sum();
    assert!(events > 0);
}
