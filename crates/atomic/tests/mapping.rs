//! The Address Consultant in virtual time: its map against the ground
//! truth on regular and random layouts, its routes delivering, re-mapping
//! after failures, several ACs at once, and taking over from a dead AC.

use std::net::Ipv4Addr;

use aurora_atomic::ac::{AcConfig, Method};
use aurora_atomic::host::{AcRole, HostConfig, IpFlow};
use aurora_atomic::layout::{Built, Layout, RandomSpec};
use aurora_time::{Duration, Instant};

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
