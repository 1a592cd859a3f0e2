//! The Address Consultant in virtual time: its map against the ground
//! truth on regular and random layouts, its routes delivering, re-mapping
//! after failures, several ACs at once, and taking over from a dead AC.

use std::net::Ipv4Addr;

use aurora_atomic::ac::{AcConfig, Method};
use aurora_atomic::built::Built;
use aurora_atomic::host::{AcRole, HostConfig, IpFlow};
use aurora_atomic::layout::{Layout, RandomSpec};
use aurora_time::{Duration, Instant};

/// The first flow `src` sends (the only one, in these tests).
fn first_flow(src: std::net::Ipv4Addr) -> aurora_atomic::flow::FlowId {
    aurora_atomic::flow::FlowId { src, flow: 0 }
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// Builds `l` with the host at `ac` running an AC by `method`.
fn build(l: &Layout, ac: &[Ipv4Addr], method: Method, seed: u64) -> Built {
    let ac = ac.to_vec();
    l.build(seed, &move |addr, id| HostConfig {
        role: if ac.contains(&addr) {
            AcRole::Always
        } else {
            AcRole::Never
        },
        ac: AcConfig {
            method,
            ..AcConfig::default()
        },
        ..HostConfig::new(addr, id)
    })
    .unwrap()
}

/// The AC's map against the truth from its node.
fn check_map(b: &Built, l: &Layout, ac: Ipv4Addr) -> (usize, u64) {
    let host = b.host(ac).unwrap();
    let acr = host.ac().expect("an AC");
    let node = b.hosts.iter().find(|h| h.0 == ac).unwrap().2;
    let (edges, hosts) = l.truth_from(node);
    let map = acr.map();
    assert_eq!(map.edges(), edges, "channels");
    assert_eq!(map.hosts(), hosts, "hosts");
    let last = acr.history().last().expect("a mapping");
    (last.nodes, last.probes)
}

#[test]
fn a_grid_is_mapped_exactly_with_few_probes() {
    let l = Layout::grid(4, 4, &[(0, 0), (3, 3), (1, 2)], 7);
    let mut b = build(&l, &[ip("10.0.0.1")], Method::Loops, 1);
    b.sim.run_until(Instant::from_millis(50));
    let (nodes, probes) = check_map(&b, &l, ip("10.0.0.1"));
    assert_eq!(nodes, 16);
    let per_node = probes as f64 / nodes as f64;
    assert!(per_node <= 10.0, "{per_node} probes per node");
    eprintln!("4x4 grid: {probes} probes for {nodes} nodes ({per_node:.2} per node)");
}

fn spec(meshes: usize, side: (usize, usize), hosts: usize, symmetric: bool) -> RandomSpec {
    RandomSpec {
        meshes,
        side,
        hosts,
        extra_cables: meshes,
        symmetric,
        consistent: symmetric,
    }
}

#[test]
fn random_symmetric_layouts_are_mapped_exactly_by_loops() {
    let mut total = (0usize, 0u64);
    for seed in 0..12 {
        let l = Layout::random(spec(6, (2, 6), 8, true), seed);
        assert!(l.is_symmetric_and_consistent());
        let mut b = build(&l, &[ip("10.0.0.1")], Method::Loops, seed);
        b.sim.run_until(Instant::from_millis(200));
        let (nodes, probes) = check_map(&b, &l, ip("10.0.0.1"));
        assert_eq!(nodes, l.nodes.len(), "seed {seed}");
        total.0 += nodes;
        total.1 += probes;
        assert!(
            probes as f64 / nodes as f64 <= 10.0,
            "seed {seed}: {probes} for {nodes}"
        );
    }
    eprintln!(
        "random symmetric layouts: {:.2} probes per node",
        total.1 as f64 / total.0 as f64
    );
}

#[test]
fn a_few_hundred_nodes_are_mapped_exactly() {
    let l = Layout::random(spec(12, (4, 6), 20, true), 99);
    assert!(l.nodes.len() >= 200, "{} nodes", l.nodes.len());
    let mut b = build(&l, &[ip("10.0.0.1")], Method::Loops, 3);
    b.sim.run_until(Instant::from_millis(400));
    let (nodes, probes) = check_map(&b, &l, ip("10.0.0.1"));
    assert_eq!(nodes, l.nodes.len());
    eprintln!("{nodes} nodes: {probes} probes");
}

#[test]
fn non_symmetric_and_non_consistent_layouts_are_mapped_by_flooding() {
    for seed in 0..10 {
        let l = Layout::random(spec(5, (2, 4), 6, false), seed);
        let mut b = build(&l, &[ip("10.0.0.1")], Method::Flood, seed);
        b.sim.run_until(Instant::from_millis(200));
        let (nodes, _) = check_map(&b, &l, ip("10.0.0.1"));
        let node = b.hosts.iter().find(|h| h.0 == ip("10.0.0.1")).unwrap().2;
        assert_eq!(nodes, l.strong_component(node).len(), "seed {seed}");
    }
}

fn flow(dst: &str, count: u64, start_ms: i64, kbps: u32) -> IpFlow {
    IpFlow {
        dst: ip(dst),
        size: 1500,
        count,
        start: Instant::from_millis(start_ms),
        interval: Duration::from_micros(200),
        kbps,
    }
}

#[test]
fn every_route_the_ac_gives_delivers() {
    for (seed, symmetric) in [(1, true), (2, true), (3, false), (4, false)] {
        let l = Layout::random(spec(6, (2, 5), 8, symmetric), seed);
        let method = if symmetric {
            Method::Loops
        } else {
            Method::Flood
        };
        let mut b = build(&l, &[ip("10.0.0.1")], method, seed);
        // Every host sends to the next one, starting after the first map.
        let addrs: Vec<Ipv4Addr> = b.hosts.iter().map(|h| h.0).collect();
        for (k, &a) in addrs.iter().enumerate() {
            let dst = addrs[(k + 1) % addrs.len()];
            b.add_flow(a, flow(&dst.to_string(), 50, 100, 0));
        }
        b.sim.run_until(Instant::from_millis(300));
        let node_of = |a: Ipv4Addr| b.hosts.iter().find(|h| h.0 == a).unwrap().2;
        let c = l.strong_component(node_of(ip("10.0.0.1")));
        for (k, &a) in addrs.iter().enumerate() {
            let dst = addrs[(k + 1) % addrs.len()];
            if !c.contains(&node_of(a)) || !c.contains(&node_of(dst)) {
                continue; // outside what the AC can reach: not mapped
            }
            let rx = b.host(dst).unwrap().received(first_flow(a));
            assert_eq!(
                (rx.delivered, rx.corrupted),
                (50, 0),
                "seed {seed}: {a} -> {dst}: {:?}",
                b.host(a).unwrap().counters()
            );
        }
    }
}

/// Cuts the channel leaving layout node `n` in direction `d`, and the one
/// coming back, if any.
fn cut(b: &mut Built, l: &Layout, n: usize, d: aurora_atomic::wire::Dir) {
    b.node_mut(n).unwrap().set_channel(d, false);
    if let Some(w) = l.wires.iter().find(|w| w.from == (n, d)) {
        let (m, back) = w.to;
        if l.wires.iter().any(|v| v.from == (m, back) && v.to.0 == n) {
            b.node_mut(m).unwrap().set_channel(back, false);
        }
    }
}

#[test]
fn after_a_link_is_cut_the_ac_remaps_and_traffic_takes_a_new_route() {
    // A 4 x 4 grid; hosts at two corners; the AC at a third.
    let l = Layout::grid(4, 4, &[(0, 0), (3, 0), (0, 3)], 5);
    let (h1, h2, ac) = (ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3"));
    let mut b = build(&l, &[ac], Method::Loops, 2);
    b.add_flow(
        h1,
        IpFlow {
            count: 20_000,
            ..flow("10.0.0.2", 0, 100, 0)
        },
    );
    b.sim.run_until(Instant::from_millis(300));
    let before = b.host(h2).unwrap().received(first_flow(h1)).delivered;
    assert!(before > 500, "{before}");
    let route = b.host(h1).unwrap().route_to(h2).unwrap().clone();
    // Cut the first channel of the route h1 uses.
    let first = route.steps()[0];
    cut(&mut b, &l, 0, first);
    b.sim.run_until(Instant::from_millis(1500));
    let h = b.host(h1).unwrap();
    let new_route = h.route_to(h2).expect("a route again").clone();
    assert_ne!(new_route.steps()[0], first, "the new route avoids the cut");
    assert!(h.counters().routes_dropped >= 1);
    let rx = b.host(h2).unwrap().received(first_flow(h1));
    let after = rx.delivered;
    assert!(
        after > before + 2000,
        "traffic resumed: {before} -> {after}"
    );
    assert_eq!(rx.corrupted, 0);
}

#[test]
fn two_acs_at_once_give_routes_that_agree() {
    let l = Layout::random(spec(4, (3, 4), 6, true), 11);
    let acs = [ip("10.0.0.1"), ip("10.0.0.2")];
    let mut b = build(&l, &acs, Method::Loops, 4);
    b.sim.run_until(Instant::from_millis(100));
    let (m1, m2) = (
        b.host(acs[0]).unwrap().ac().unwrap().map().edges(),
        b.host(acs[1]).unwrap().ac().unwrap().map().edges(),
    );
    assert_eq!(m1, m2, "both ACs see the same network");
    let addrs: Vec<Ipv4Addr> = b.hosts.iter().map(|h| h.0).collect();
    for &a in &addrs {
        for &z in &addrs {
            if a == z {
                continue;
            }
            let ac1 = b.host(acs[0]).unwrap().ac().unwrap().map().clone();
            let r2 = b.host(acs[1]).unwrap().ac().unwrap().map().clone();
            let (x1, y1) = (ac1.host_node(a).unwrap(), ac1.host_node(z).unwrap());
            let (x2, y2) = (r2.host_node(a).unwrap(), r2.host_node(z).unwrap());
            let w1 = ac1.walk(x1, y1, &|_, _| false).unwrap();
            let w2 = r2.walk(x2, y2, &|_, _| false).unwrap();
            assert_eq!(w1.len(), w2.len(), "{a} -> {z}: equally short");
            // Either AC's walk, followed on the other's map, ends at z.
            assert_eq!(r2.follow(x2, &w1), Some(y2));
        }
    }
    // Hosts use one of them, and their traffic flows.
    let other = addrs[2];
    b.add_flow(other, flow(&addrs[3].to_string(), 30, 200, 0));
    b.sim.run_until(Instant::from_millis(300));
    assert_eq!(
        b.host(addrs[3])
            .unwrap()
            .received(first_flow(other))
            .delivered,
        30
    );
}

#[test]
fn when_the_ac_dies_another_host_takes_over() {
    let l = Layout::grid(3, 3, &[(0, 0), (2, 2), (2, 0), (0, 2)], 9);
    let mut b = l
        .build(6, &|addr, id| HostConfig {
            role: if addr == ip("10.0.0.1") {
                AcRole::Always
            } else {
                AcRole::Auto
            },
            ac_wait: Duration::from_millis(1200),
            ..HostConfig::new(addr, id)
        })
        .unwrap();
    b.sim.run_until(Instant::from_millis(1000));
    // Nobody else took over while the AC announced itself.
    let acs = |b: &Built| {
        b.hosts
            .iter()
            .filter(|h| b.host(h.0).unwrap().ac().is_some())
            .count()
    };
    assert_eq!(acs(&b), 1);
    b.host_mut(ip("10.0.0.1")).unwrap().kill_ac();
    b.sim.run_until(Instant::from_millis(6000));
    let n = acs(&b);
    assert!(n >= 1, "someone took over");
    let takeovers: u64 = b
        .hosts
        .iter()
        .map(|h| b.host(h.0).unwrap().counters().ac_takeovers)
        .sum();
    assert!(takeovers >= 1);
    // Routes come from the new AC: a flow gets through.
    b.add_flow(ip("10.0.0.2"), flow("10.0.0.4", 20, 6000, 0));
    b.sim.run_until(Instant::from_millis(6500));
    assert_eq!(
        b.host(ip("10.0.0.4"))
            .unwrap()
            .received(first_flow(ip("10.0.0.2")))
            .delivered,
        20
    );
}

#[test]
fn flows_declaring_bandwidth_get_routes_that_avoid_each_other() {
    // Two parallel paths between the West and East columns of a 3 x 2 grid.
    let l = Layout::grid(3, 2, &[(0, 0), (2, 0), (1, 1)], 3);
    let mut b = build(&l, &[ip("10.0.0.3")], Method::Loops, 1);
    b.sim.run_until(Instant::from_millis(50));
    let ac = b.host_mut(ip("10.0.0.3")).unwrap().ac_mut().unwrap();
    let (s1, r1) = ac.route(ip("10.0.0.1"), ip("10.0.0.2"), 100_000);
    let (s2, r2) = ac.route(ip("10.0.0.1"), ip("10.0.0.2"), 100_000);
    let (s3, r3) = ac.route(ip("10.0.0.1"), ip("10.0.0.2"), 0);
    assert_eq!((s1, s2, s3), (0, 0, 0));
    assert_ne!(
        r1.steps(),
        r2.steps(),
        "the second declared flow avoids the first"
    );
    assert_eq!(r3.steps().len(), 2, "best effort takes the shortest");
}

#[test]
fn a_program_sends_its_own_loop_with_link_level_access() {
    // Link-level access: the program writes the route itself. A loop East
    // two hops and back comes home; a route into an empty channel is lost
    // (and counted by the node).
    use aurora_atomic::wire::{Dir, Route};
    let l = Layout::grid(3, 1, &[(0, 0)], 4);
    let mut b = build(&l, &[], Method::Loops, 1);
    let me = ip("10.0.0.1");
    let there_and_back = Route::from_steps(&[Dir::East, Dir::East, Dir::West, Dir::West]);
    let nowhere = Route::from_steps(&[Dir::North]);
    let (_, id, _) = b.hosts[0];
    let h = b.host_mut(me).unwrap();
    h.queue_raw(there_and_back, 42, b"loop".to_vec());
    h.queue_raw(nowhere, 42, b"lost".to_vec());
    b.sim.touch(id);
    b.sim.run_until(Instant::from_millis(1));
    let h = b.host_mut(me).unwrap();
    assert_eq!(h.take_raw(), Some((42, b"loop".to_vec())));
    assert_eq!(h.take_raw(), None);
    assert_eq!(h.counters().raw, [1, 2]);
    let dropped: u64 = (0..3)
        .map(|n| {
            b.sim
                .node::<aurora_atomic::mosaic::MosaicNode>(b.mosaic[n])
                .unwrap()
                .counters()
                .dropped(aurora_atomic::mosaic::Drop::NoChannel)
        })
        .sum();
    assert_eq!(dropped, 1);
}

#[test]
fn after_a_node_fails_traffic_goes_around_it() {
    let l = Layout::grid(3, 3, &[(0, 0), (2, 2), (0, 2)], 8);
    let (h1, h2) = (ip("10.0.0.1"), ip("10.0.0.2"));
    let mut b = build(&l, &[ip("10.0.0.3")], Method::Loops, 3);
    b.add_flow(
        h1,
        IpFlow {
            count: 20_000,
            ..flow("10.0.0.2", 0, 100, 0)
        },
    );
    b.sim.run_until(Instant::from_millis(300));
    let route = b.host(h1).unwrap().route_to(h2).unwrap().steps();
    // The node after the first hop of the route in use goes down.
    let first = l
        .wires
        .iter()
        .find(|w| w.from == (0, route[0]))
        .unwrap()
        .to
        .0;
    b.node_mut(first).unwrap().set_up(false);
    let before = b.host(h2).unwrap().received(first_flow(h1)).delivered;
    b.sim.run_until(Instant::from_millis(1500));
    let new_route = b.host(h1).unwrap().route_to(h2).unwrap().steps();
    assert_ne!(new_route[0], route[0], "the new route avoids the dead node");
    let after = b.host(h2).unwrap().received(first_flow(h1)).delivered;
    assert!(after > before + 2000, "{before} -> {after}");
    let map = b.host(ip("10.0.0.3")).unwrap().ac().unwrap().map();
    assert_eq!(map.nodes.len(), 8, "the dead node is gone from the map");
}

#[test]
fn packets_sent_before_the_first_map_wait_for_it_without_spinning() {
    // A flow from time 0 on the AC's own host and on another: routes come
    // once the first map is done; until then the hosts sleep (a host that
    // re-polled at once while it had nobody to ask never let time move).
    let l = Layout::grid(2, 2, &[(0, 0), (1, 1)], 2);
    let mut b = build(&l, &[ip("10.0.0.1")], Method::Loops, 1);
    b.add_flow(
        ip("10.0.0.1"),
        IpFlow {
            count: 5,
            ..flow("10.0.0.2", 0, 0, 0)
        },
    );
    b.add_flow(
        ip("10.0.0.2"),
        IpFlow {
            count: 5,
            ..flow("10.0.0.1", 0, 0, 0)
        },
    );
    b.sim.run_until(Instant::from_micros(200));
    assert!(
        b.sim.events() < 10_000,
        "{} events in 200 us",
        b.sim.events()
    );
    b.sim.run_until(Instant::from_millis(100));
    assert_eq!(
        b.host(ip("10.0.0.2"))
            .unwrap()
            .received(first_flow(ip("10.0.0.1")))
            .delivered,
        5
    );
    // The other host's packets waited for an announcement (its own AC
    // was none) and went once it came.
    assert_eq!(
        b.host(ip("10.0.0.1"))
            .unwrap()
            .received(first_flow(ip("10.0.0.2")))
            .delivered,
        5
    );
}

#[test]
fn a_channel_missing_from_one_mapping_only_does_not_change_the_map() {
    // A mapping that misses a channel (cut, or its probe late) is doubted:
    // the map in use stays until the next mapping agrees. Here the
    // channel comes back before that, so the epoch never moves and the
    // hosts keep their routes.
    let l = Layout::grid(3, 3, &[(0, 0), (2, 2), (0, 2)], 8);
    let (h1, h2, acip) = (ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3"));
    let mut b = build(&l, &[acip], Method::Loops, 3);
    b.add_flow(
        h1,
        IpFlow {
            count: 20_000,
            ..flow("10.0.0.2", 0, 100, 0)
        },
    );
    b.sim.run_until(Instant::from_millis(300));
    let epoch = ac_of(&b, acip).epoch();
    let route = b.host(h1).unwrap().route_to(h2).unwrap().steps();
    cut(&mut b, &l, 0, route[0]);
    // Run until a mapping has missed the channel.
    let mut t = Instant::from_millis(300);
    while !ac_of(&b, acip).history().last().unwrap().doubted {
        t += Duration::from_micros(100);
        assert!(t < Instant::from_millis(1500), "no mapping doubted");
        b.sim.run_until(t);
    }
    let doubted = *ac_of(&b, acip).history().last().unwrap();
    assert_eq!(doubted.epoch, epoch, "a doubted mapping keeps the epoch");
    assert!(doubted.channels < ac_of(&b, acip).map().edges().len());
    // The channel comes back before the recheck.
    b.node_mut(0).unwrap().set_channel(route[0], true);
    let far = l.wires.iter().find(|w| w.from == (0, route[0])).unwrap().to;
    b.node_mut(far.0).unwrap().set_channel(far.1, true);
    let seen = ac_of(&b, acip).history().len();
    b.sim.run_until(t + Duration::from_millis(1200));
    let a = ac_of(&b, acip);
    assert_eq!(a.epoch(), epoch, "the map never changed");
    assert!(a.history()[seen..].iter().all(|m| !m.doubted));
    check_map(&b, &l, acip);
    let h = b.host(h1).unwrap();
    assert_eq!(h.counters().routes_dropped, 0, "no route was dropped");
    assert_eq!(h.route_to(h2).unwrap().steps(), route);
}

#[test]
fn a_cut_is_believed_when_the_recheck_agrees() {
    let l = Layout::grid(3, 3, &[(0, 0), (2, 2), (0, 2)], 8);
    let acip = ip("10.0.0.3");
    let mut b = build(&l, &[acip], Method::Loops, 3);
    b.sim.run_until(Instant::from_millis(300));
    let epoch = b.host(acip).unwrap().ac().unwrap().epoch();
    cut(&mut b, &l, 4, aurora_atomic::wire::Dir::East);
    b.sim.run_until(Instant::from_millis(1300));
    let a = b.host(acip).unwrap().ac().unwrap();
    let h = a.history();
    let i = h.iter().position(|m| m.doubted).expect("a doubted mapping");
    assert_eq!(h[i].epoch, epoch);
    assert!(!h[i + 1].doubted, "the recheck agreed");
    assert_eq!(
        h[i + 1].epoch,
        epoch + 1,
        "and the smaller map got an epoch"
    );
    assert_eq!(h[i + 1].channels, h[i].channels);
    // The recheck came soon after, not a whole remap period later.
    assert!(h[i + 1].started - h[i].finished < Duration::from_millis(50));
    assert_eq!(
        a.map().edges().len(),
        24 - 2,
        "both ways of the channel gone"
    );
}

fn ac_of(b: &Built, a: Ipv4Addr) -> &aurora_atomic::ac::Ac {
    b.host(a).unwrap().ac().unwrap()
}

#[test]
fn a_destination_the_ac_has_no_route_to_is_asked_for_once_a_route_timeout() {
    let l = Layout::grid(3, 3, &[(0, 0), (2, 2)], 4);
    let (h1, ac) = (ip("10.0.0.1"), ip("10.0.0.2"));
    let mut b = build(&l, &[ac], Method::Loops, 3);
    // 2,000 packets over 400 ms, from 100 ms, to an address no host has.
    let nowhere = IpFlow {
        count: 2000,
        ..flow("10.0.0.99", 0, 100, 0)
    };
    b.add_flow(h1, nowhere);
    b.sim.run_until(Instant::from_millis(700));
    let c = b.host(h1).unwrap().counters();
    // The answer "no route" is believed for a route timeout (100 ms):
    // each packet in that time is dropped at once, not asked for again.
    assert_eq!(c.no_route + c.pending_full, 2000, "{c:?}");
    assert!(c.route_requests <= 10, "{c:?}");
}

#[test]
fn a_newer_map_forgets_that_the_ac_had_no_route() {
    let l = Layout::grid(3, 3, &[(0, 0), (2, 2)], 6);
    let (h1, h2) = (ip("10.0.0.1"), ip("10.0.0.2"));
    // h1 runs the AC, and believes a "no route" for 10 s unless a newer
    // map comes.
    let mut b = l
        .build(5, &move |addr, id| HostConfig {
            role: if addr == h1 {
                AcRole::Always
            } else {
                AcRole::Never
            },
            route_timeout: Duration::from_secs(10),
            ..HostConfig::new(addr, id)
        })
        .unwrap();
    // h2's interface node is down for the first map.
    let node = b.hosts.iter().find(|h| h.0 == h2).unwrap().2;
    b.node_mut(node).unwrap().set_up(false);
    b.add_flow(
        h1,
        IpFlow {
            count: 10_000,
            ..flow("10.0.0.2", 0, 100, 0)
        },
    );
    b.sim.run_until(Instant::from_millis(300));
    let refused = b.host(h1).unwrap().counters().no_route;
    assert!(refused > 0, "no route to h2 at first");
    b.node_mut(node).unwrap().set_up(true);
    // The AC maps again every 500 ms: its next map finds h2.
    b.sim.run_until(Instant::from_millis(1500));
    let rx = b.host(h2).unwrap().received(first_flow(h1));
    assert!(
        rx.delivered > 1000,
        "{rx:?}, {:?}",
        b.host(h1).unwrap().counters()
    );
}
