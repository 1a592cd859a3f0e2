//! The signalling host in virtual time, on chains of real VuNet switches
//! and relaying links: an application opens across 1, 3 and 6 relays, its
//! data arrives checked, the set-up takes exactly the modelled round
//! trips, and closing clears every entry and frees every VCI; a relay
//! restarted mid-run loses its tables, the refresh daemon writes them
//! again within one period, and the cells lost meanwhile are the relay's
//! `unknown_vc` drops; an application that never closes leaks nothing
//! once its host stops refreshing (the relays' lifetime ends it).

use std::sync::{Arc, Mutex};

use aurora_engine::{Engine, NodeId};
use aurora_net::vunet::VunetLink;
use aurora_signal::conn::Path;
use aurora_signal::host::{AppSpec, EventKind, SignalHost};
use aurora_signal::table::{MemTable, VciTable};
use aurora_time::{Duration, Instant};

mod common;
use common::{chain_path, host_config, setup_latency, wire, KEY};

struct Net {
    sim: Engine,
    src: NodeId,
    dst: NodeId,
    relays: Vec<NodeId>,
    table: Arc<MemTable>,
    drops: Arc<Mutex<Vec<(u32, &'static str)>>>,
}

/// host - s0 - r0 - s1 - ... - r(n-1) - sn - dest (as in `open.rs`); one
/// application from host to dest with `spec`'s schedule.
fn chain(n: usize, spec: impl FnOnce(Path) -> AppSpec, lifetime: Option<Duration>) -> Net {
    let mut sim = Engine::new(1);
    let table = Arc::new(MemTable::new(Default::default()));
    let path = chain_path(n);
    let cfg = host_config;
    let mut host = SignalHost::new(cfg(1), table.clone());
    assert!(host.add_app(spec(path)));
    let src = sim.add_node(host);
    let dst = sim.add_node(SignalHost::new(cfg(2), table.clone()));
    let relays = wire(&mut sim, src, dst, n, |_| {
        let mut relay = VunetLink::new([false, false], None);
        relay.add_key(1, KEY.to_vec());
        relay.set_lifetime(lifetime);
        relay
    });
    let drops = Arc::new(Mutex::new(Vec::new()));
    let d = drops.clone();
    sim.set_drop_tap(Box::new(move |_, at, why, _| {
        d.lock().unwrap().push((at.node, why));
    }));
    Net {
        sim,
        src,
        dst,
        relays,
        table,
        drops,
    }
}

fn app(path: Path, close_at: Option<Instant>, refresh: Option<Duration>) -> AppSpec {
    AppSpec {
        name: "a".into(),
        to: "dest".into(),
        flow: 7,
        path,
        open_at: Instant::from_micros(10),
        close_at,
        sdu: 1000,
        count: 100,
        interval: Duration::from_micros(100),
        refresh,
    }
}

fn relay(net: &Net) -> &VunetLink {
    net.sim.node::<VunetLink>(net.relays[1]).unwrap()
}

fn src(net: &Net) -> &SignalHost {
    net.sim.node::<SignalHost>(net.src).unwrap()
}

#[test]
fn apps_open_across_one_three_and_six_relays_send_and_close_clean() {
    for n in [1usize, 3, 6] {
        let close = Instant::from_millis(30);
        let mut net = chain(n, |p| app(p, Some(close), None), None);
        net.sim.run_until(Instant::from_millis(20));
        let a = &src(&net).apps()[0];
        assert!(a.is_open(), "{n} relays");
        let vc = a.vc().unwrap().clone();
        // Set-up latency: a write and a read to relay k, each a round trip
        // over 2k + 2 links of 50 us delay and a 1 us cell time.
        let expected = setup_latency(n);
        let open = &a.events()[0];
        assert_eq!(open.kind, EventKind::Open);
        assert_eq!(open.latency(), expected, "{n} relays");
        for (k, &r) in net.relays.iter().enumerate() {
            let link = net.sim.node::<VunetLink>(r).unwrap();
            assert_eq!(link.entry(0, vc.vcis[k]).map(|e| e.0), Some(vc.vcis[k + 1]));
        }
        net.sim.run_until(Instant::from_millis(60));
        let h = src(&net);
        let a = &h.apps()[0];
        assert!(a.is_closed(), "{n} relays");
        let close_ev = a.events().iter().find(|e| e.kind == EventKind::Close);
        assert!(close_ev.is_some_and(|e| e.failure.is_none()));
        // Every PDU sent before the close arrived intact.
        let sent = h.sent(0);
        let d = net.sim.node::<SignalHost>(net.dst).unwrap();
        let (rx, _) = d.received(7).unwrap();
        assert!(sent > 0);
        assert_eq!((rx.delivered, rx.missing, rx.corrupted), (sent, 0, 0));
        // Close freed every relay entry and every VCI.
        for (k, &r) in net.relays.iter().enumerate() {
            let link = net.sim.node::<VunetLink>(r).unwrap();
            assert_eq!(link.entry(0, vc.vcis[k]), None, "relay {k}");
            assert_eq!(link.owner(0, vc.vcis[k]), None, "relay {k}");
        }
        assert!(net.table.entries(60_000_000).unwrap().is_empty());
        assert!(net.drops.lock().unwrap().is_empty());
    }
}

#[test]
fn a_restarted_relay_is_rewritten_within_one_refresh_period_and_its_losses_are_named() {
    let period = Duration::from_millis(2);
    let close = Instant::from_millis(40);
    let mut net = chain(3, |p| app(p, Some(close), Some(period)), None);
    let restart = Instant::from_millis(5) + Duration::from_micros(3);
    net.sim
        .node_mut::<VunetLink>(net.relays[1])
        .unwrap()
        .restart_at(restart);
    net.sim.run_until(restart + Duration::from_nanos(1));
    let vc = src(&net).apps()[0].vc().unwrap().clone();
    assert_eq!(
        relay(&net).entry(0, vc.vcis[1]),
        None,
        "the restart lost it"
    );
    assert_eq!(relay(&net).counters().restarts, 1);
    // Within one period (and the round's own round trips) it is back.
    net.sim
        .run_until(restart + period + Duration::from_millis(1));
    assert_eq!(
        relay(&net).entry(0, vc.vcis[1]),
        Some((vc.vcis[2], 1)),
        "not rewritten"
    );
    net.sim.run_until(Instant::from_millis(80));
    let h = src(&net);
    let a = &h.apps()[0];
    let (rounds, failed, rewritten) = a.refreshes();
    assert!(rounds >= 10, "{rounds}");
    assert_eq!((failed, rewritten), (0, 1));
    assert!(a.is_closed());
    // Cells lost while the entry was missing: dropped by relay 1 as
    // `unknown_vc`, the same count its counters give, and the PDUs they
    // belonged to are the ones the receiver missed.
    let unmapped = relay(&net).counters().unmapped;
    assert!(unmapped > 0);
    let at_relay = net
        .drops
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, why)| *n == net.relays[1].0 && *why == "unknown_vc")
        .count() as u64;
    assert_eq!(at_relay, unmapped);
    assert_eq!(net.drops.lock().unwrap().len() as u64, unmapped);
    let (rx, _) = net
        .sim
        .node::<SignalHost>(net.dst)
        .unwrap()
        .received(7)
        .unwrap();
    assert!(
        rx.missing > 0 && rx.delivered + rx.missing == h.sent(0),
        "{rx:?}"
    );
    assert!(net.table.entries(80_000_000).unwrap().is_empty());
}

#[test]
fn an_app_that_never_closes_leaks_nothing_once_it_stops_refreshing() {
    // The relays forget entries not read for 3 ms. Refreshed every 1 ms,
    // an app's entries stay; the same app with no one refreshing (as
    // when its host has crashed) loses them to the relays' lifetime.
    let mut net = chain(
        2,
        |p| app(p, None, Some(Duration::from_millis(1))),
        Some(Duration::from_millis(3)),
    );
    net.sim.run_until(Instant::from_millis(20));
    let vc = src(&net).apps()[0].vc().unwrap().clone();
    for (k, &r) in net.relays.iter().enumerate() {
        let link = net.sim.node::<VunetLink>(r).unwrap();
        assert!(link.entry(0, vc.vcis[k]).is_some(), "refreshed, kept");
        assert_eq!(link.counters().expired, 0);
    }
    let mut quiet = chain(2, |p| app(p, None, None), Some(Duration::from_millis(3)));
    quiet.sim.run_until(Instant::from_millis(20));
    for &r in &quiet.relays {
        let link = quiet.sim.node::<VunetLink>(r).unwrap();
        assert_eq!(link.counters().expired, 1);
    }
    let vc = src(&quiet).apps()[0].vc().unwrap().clone();
    for (k, &r) in quiet.relays.iter().enumerate() {
        assert_eq!(
            quiet.sim.node::<VunetLink>(r).unwrap().entry(0, vc.vcis[k]),
            None
        );
    }
}

#[test]
fn a_close_that_a_relay_does_not_answer_says_so_and_still_frees_the_vcis() {
    let mut net = chain(3, |p| app(p, Some(Instant::from_millis(30)), None), None);
    net.sim.run_until(Instant::from_millis(20));
    assert!(src(&net).apps()[0].is_open());
    // Relay 1 forgets the host's key: it refuses (and so never answers)
    // the clear.
    net.sim
        .node_mut::<VunetLink>(net.relays[1])
        .unwrap()
        .add_key(1, b"another key".to_vec());
    net.sim.run_until(Instant::from_millis(100));
    let a = &src(&net).apps()[0];
    assert!(a.is_closed());
    let close = a.events().last().unwrap();
    assert_eq!(close.kind, EventKind::Close);
    assert_eq!(close.failure.as_deref(), Some("relay 1 did not answer"));
    let vc = a.vc().unwrap();
    // The others were cleared; relay 1 keeps its entry until a lifetime
    // would end it; the table's VCIs are free.
    for (k, &r) in net.relays.iter().enumerate() {
        let held = net.sim.node::<VunetLink>(r).unwrap().entry(0, vc.vcis[k]);
        assert_eq!(held.is_some(), k == 1, "relay {k}");
    }
    assert!(net.table.entries(100_000_000).unwrap().is_empty());
}
