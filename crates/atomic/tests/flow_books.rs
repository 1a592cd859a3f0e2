//! The books of a flow in virtual time: every packet it sends is
//! delivered, dropped at a place the driver is shown, or still on its way,
//! even when a channel is cut under it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use aurora_atomic::ac::{AcConfig, Method};
use aurora_atomic::flow::{self, FlowId, Layout};
use aurora_atomic::host::{AcRole, HostConfig, IpFlow};
use aurora_atomic::layout::Layout as Mesh;
use aurora_net::accounting::Side;
use aurora_time::{Duration, Instant};

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

#[test]
fn a_flow_balances_when_a_channel_is_cut_under_it() {
    // At the route's first channel, frames dropped there come from the
    // host, whole; at its last, from a channel, with a spent pair.
    for last in [false, true] {
        cut_under_a_flow(last);
    }
}

/// A flow from one corner of a grid to another, and its route's first
/// (or `last`) channel cut while it runs.
fn cut_under_a_flow(last: bool) {
    // A 4 x 4 grid, hosts at three corners, the AC on the third.
    let l = Mesh::grid(4, 4, &[(0, 0), (3, 0), (0, 3)], 5);
    let (h1, h2, ac) = (ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3"));
    let mut b = l
        .build(2, &move |addr, id| HostConfig {
            role: if addr == ac {
                AcRole::Always
            } else {
                AcRole::Never
            },
            ac: AcConfig {
                method: Method::Loops,
                ..AcConfig::default()
            },
            ..HostConfig::new(addr, id)
        })
        .unwrap();
    let f = IpFlow {
        dst: h2,
        size: 1000,
        count: 20_000,
        start: Instant::ZERO,
        interval: Duration::from_micros(50),
        kbps: 0,
    };
    assert_eq!(b.add_flow(h1, f), Some(0));
    let id = FlowId { src: h1, flow: 0 };
    // Every flow packet dropped, by reason, read from the frames as the
    // place they were dropped at lays them out.
    let mosaic: Vec<u32> = b.mosaic.iter().map(|n| n.0).collect();
    let is_mosaic = move |n: u32| mosaic.contains(&n);
    let lost: Arc<Mutex<BTreeMap<&'static str, u64>>> = Arc::default();
    let tap = lost.clone();
    let mosaic_at = is_mosaic.clone();
    b.sim
        .set_drop_tap(Box::new(move |_, at, why, frame: &Vec<u8>| {
            let layout = match at.side {
                Side::In => Layout::Whole,
                Side::Out => Layout::leaving(mosaic_at(at.node), at.port),
            };
            if flow::in_frame(frame, layout).is_some_and(|p| p.id == id) {
                *tap.lock().unwrap().entry(why).or_default() += 1;
            }
        }));
    b.sim.run_until(Instant::from_millis(300));
    let before = b.host(h2).unwrap().received(id).delivered;
    // Cut that channel of the route h1 uses, both ways.
    let steps = b.host(h1).unwrap().route_to(h2).unwrap().steps();
    let at = if last { steps.len() - 1 } else { 0 };
    let mut n = 0;
    for d in &steps[..at] {
        n = l.wires.iter().find(|w| w.from == (n, *d)).unwrap().to.0;
    }
    let cut = steps[at];
    b.node_mut(n).unwrap().set_channel(cut, false);
    if let Some(w) = l.wires.iter().find(|w| w.from == (n, cut)) {
        let (m, back) = w.to;
        b.node_mut(m).unwrap().set_channel(back, false);
    }
    b.sim.run_until(Instant::from_millis(1500));
    b.sim.clear_drop_tap();

    let mut in_flight = 0;
    b.sim.for_each_in_flight(&mut |node, port, frame| {
        let layout = Layout::leaving(is_mosaic(node.0), port);
        in_flight += u64::from(flow::in_frame(frame, layout).is_some_and(|p| p.id == id));
    });
    b.host(h1).unwrap().for_each_pending(&mut |pkt| {
        in_flight += u64::from(flow::read(pkt).is_some_and(|p| p.id == id));
    });
    let sent = b.host(h1).unwrap().sent(0);
    let rx = b.host(h2).unwrap().received(id);
    let lost = lost.lock().unwrap().clone();
    let dropped: u64 = lost.values().sum();
    eprintln!("cut the last channel {last}: sent {sent}, delivered {rx:?}, lost {lost:?}, in flight {in_flight}");
    assert_eq!(rx.corrupted, 0);
    assert!(
        lost.get("no_channel").is_some_and(|&n| n > 0),
        "packets on their way over the cut channel are dropped there: {lost:?}"
    );
    assert!(
        rx.delivered > before + 2000,
        "traffic took a new route: {before} -> {rx:?}"
    );
    assert_eq!(
        sent,
        rx.delivered + dropped + in_flight,
        "every packet has one outcome"
    );
}
