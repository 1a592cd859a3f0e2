//! `aurora bench switch` and `aurora bench sim`: the cell switch's rate
//! against line rates, and the virtual-time engine's events per second
//! against a bare event queue measured in the same run.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::Instant as WallClock;

use aurora_engine::{Engine, LinkSpec};
use aurora_net::switch::AtmSwitch;
use aurora_net::traffic::{Flow, TrafficHost};
use aurora_net::{Node, Outbox};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{build_cell, Format, Header, VcId};
use aurora_wire::CellBytes;

/// OC-192c and OC-768c payload rates in cells per second.
pub const OC192_CELLS: f64 = 22_605_280.0;
/// See [`OC192_CELLS`].
pub const OC768_CELLS: f64 = 90_421_120.0;

const PORTS: u16 = 16;
const VCS_PER_PORT: u16 = 4096;

/// `aurora bench switch`: the switch's cells per second for four batch
/// sizes, against OC-192c and OC-768c.
pub fn switch_main(secs: f64) {
    println!(
        "aurora bench switch (one thread, {PORTS} ports, {VCS_PER_PORT} VC entries per input port)"
    );
    println!(
        "{:>6} {:>14} {:>10} {:>10}",
        "batch", "cells/s", "x OC-192c", "x OC-768c"
    );
    for batch in [32, 64, 128, 256] {
        let r = switch_rate(batch, secs);
        println!(
            "{batch:>6} {:>13.1}M {:>10.2} {:>10.2}",
            r / 1e6,
            r / OC192_CELLS,
            r / OC768_CELLS
        );
    }
}

/// `aurora bench sim`: the engine's events per second against a bare
/// binary heap.
pub fn sim_main(secs: f64) {
    let (sim, heap, events) = sim_rates(secs);
    println!("aurora bench sim (one thread; 2 switches, 12 hosts, 6 flows of 9180-byte PDUs)");
    println!("simulator: {:.2}M events/s ({events} events)", sim / 1e6);
    println!(
        "bare binary heap, same event size: {:.2}M push+pop/s",
        heap / 1e6
    );
    println!("simulator / bare heap: {:.3}", sim / heap);
}

/// Cells per second through a 16-port switch, one thread, for a batch size.
pub fn switch_rate(batch: usize, secs: f64) -> f64 {
    let mut sw = AtmSwitch::new(usize::from(PORTS), Format::Uni);
    for p in 0..PORTS {
        for v in 0..VCS_PER_PORT {
            let out = (p + 1 + v % (PORTS - 1)) % PORTS;
            sw.add_vc(p, VcId::new(1, 32 + v), out, VcId::new(2, 32 + v))
                .expect("fits");
        }
    }
    // Batches of cells on random VCs, one batch per input port.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let batches: Vec<Vec<CellBytes>> = (0..PORTS)
        .map(|_| {
            (0..batch)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let vci = 32 + (x % u64::from(VCS_PER_PORT)) as u16;
                    build_cell(&Header::data(VcId::new(1, vci)), &[0x5A; 48]).expect("valid")
                })
                .collect()
        })
        .collect();
    let mut out = Outbox::default();
    let mut cells = 0u64;
    let t = WallClock::now();
    while t.elapsed().as_secs_f64() < secs {
        for (p, b) in batches.iter().enumerate() {
            sw.receive(Instant::ZERO, p as u16, b, &mut out);
            cells += b.len() as u64;
            black_box(out.drain().count());
        }
    }
    cells as f64 / t.elapsed().as_secs_f64()
}

/// Events per second of the simulator on a loaded two-switch network, and
/// of a bare binary heap pushing and popping events of the same size.
pub fn sim_rates(secs: f64) -> (f64, f64, u64) {
    let oc12 = 1_412_830.0;
    let mut sim = Engine::new(1);
    let mut sw1 = AtmSwitch::new(8, Format::Uni);
    let mut sw2 = AtmSwitch::new(8, Format::Uni);
    let mut hosts = Vec::new();
    for i in 0..6u16 {
        let tx = VcId::new(0, 100 + i);
        sw1.add_vc(i, tx, 7, VcId::new(1, 100 + i)).expect("fits");
        sw2.add_vc(7, VcId::new(1, 100 + i), i, VcId::new(0, 200 + i))
            .expect("fits");
        let mut a = TrafficHost::new(Format::Uni);
        a.add_flow(Flow {
            id: i,
            vc: tx,
            sdu_len: 9180,
            count: u64::MAX / 2,
            start: Instant::from_micros(i64::from(i)),
            interval: Duration::from_micros(1200),
        })
        .expect("valid flow");
        let mut b = TrafficHost::new(Format::Uni);
        b.expect(VcId::new(0, 200 + i));
        hosts.push((a, b));
    }
    let (s1, s2) = (sim.add_node(sw1), sim.add_node(sw2));
    let link = LinkSpec::clean(oc12, Duration::from_micros(10), 4096);
    for (i, (a, b)) in hosts.into_iter().enumerate() {
        let (a, b) = (sim.add_node(a), sim.add_node(b));
        sim.connect((a, 0), (s1, i as u16), link)
            .expect("free ports");
        sim.connect((b, 0), (s2, i as u16), link)
            .expect("free ports");
    }
    sim.connect(
        (s1, 7),
        (s2, 7),
        LinkSpec::clean(oc12 * 8.0, Duration::from_micros(50), 4096),
    )
    .expect("free ports");
    let t = WallClock::now();
    let mut until = Instant::ZERO;
    while t.elapsed().as_secs_f64() < secs {
        until += Duration::from_millis(10);
        sim.run_until(until);
    }
    let events = sim.events();
    let sim_rate = events as f64 / t.elapsed().as_secs_f64();
    // The floor: the same heap traffic (time, sequence, two words of event)
    // with no work per event.
    let mut heap: BinaryHeap<Reverse<(Instant, u64, u32, u32)>> = BinaryHeap::new();
    let mut seq = 0u64;
    for i in 0..4096 {
        heap.push(Reverse((Instant::from_nanos(i), i as u64, 0, 0)));
    }
    let t = WallClock::now();
    let mut n = 0u64;
    while t.elapsed().as_secs_f64() < secs / 2.0 {
        for _ in 0..4096 {
            let Reverse((at, _, a, b)) = heap.pop().expect("non-empty");
            seq += 1;
            heap.push(Reverse((
                at + Duration::from_nanos(4096),
                seq,
                black_box(a),
                b,
            )));
            n += 1;
        }
    }
    (sim_rate, n as f64 / t.elapsed().as_secs_f64(), events)
}
