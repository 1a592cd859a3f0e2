//! `aurora bench atomic`: ATOMIC packets through Aurora's own code on one
//! core, against the seed's host interface.
//!
//! `aurora bench atomic-map`: how an Address Consultant's mapping grows
//! with the network: random layouts of meshes and hosts, symmetric and
//! consistent (loop mapping) and not (flood mapping), each mapped in
//! virtual time. Prints nodes, channels and hosts found, the probes the AC
//! sent (and per node), the messages the network carried, the time the
//! mapping took in the modelled network, and the wall-clock time the
//! simulation needed, next to the Myrinet mapper's published figures.

use std::time::Instant as WallClock;

use aurora_atomic::ac::{AcConfig, Method};
use aurora_atomic::host::{AcRole, HostConfig};
use aurora_atomic::layout::{Layout, RandomSpec};
use aurora_atomic::mosaic::MosaicNode;
use aurora_time::Instant;

/// One mapping's figures.
pub struct MapRow {
    /// "loops" or "flood".
    pub method: &'static str,
    /// Mosaic nodes in the layout.
    pub nodes: usize,
    /// Hosts in the layout.
    pub hosts: usize,
    /// Channels (one-way) in the layout.
    pub channels: usize,
    /// Mosaic nodes, channels and hosts the AC found.
    pub found: (usize, usize, usize),
    /// Messages the AC sent to map.
    pub probes: u64,
    /// Messages every Mosaic node forwarded or sent while mapping.
    pub network: u64,
    /// Mapping time in the modelled network, ms.
    pub map_ms: f64,
    /// Wall-clock time of the simulation, ms.
    pub wall_ms: f64,
}

/// Maps a random layout of `meshes` boards and `hosts` hosts.
pub fn map_once(
    meshes: usize,
    side: (usize, usize),
    hosts: usize,
    symmetric: bool,
    seed: u64,
) -> MapRow {
    let spec = RandomSpec {
        meshes,
        side,
        hosts,
        extra_cables: meshes,
        symmetric,
        consistent: symmetric,
    };
    let l = Layout::random(spec, seed);
    let method = if symmetric {
        Method::Loops
    } else {
        Method::Flood
    };
    let ac = std::net::Ipv4Addr::new(10, 0, 0, 1);
    let mut b = l
        .build(seed, &|addr, id| HostConfig {
            role: if addr == ac {
                AcRole::Always
            } else {
                AcRole::Never
            },
            ac: AcConfig {
                method,
                remap: aurora_time::Duration::from_secs(1000),
                ..AcConfig::default()
            },
            ..HostConfig::new(addr, id)
        })
        .expect("a layout builds");
    let wall = WallClock::now();
    b.sim.run_until(Instant::from_millis(500));
    let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
    let h = b.host(ac).expect("the AC host");
    let s = h
        .ac()
        .and_then(|a| a.history().first().copied())
        .unwrap_or_default();
    let network = b
        .mosaic
        .iter()
        .filter_map(|id| b.sim.node::<MosaicNode>(*id))
        .map(|m| {
            let c = m.counters();
            c.forwarded + c.flood_out
        })
        .sum();
    MapRow {
        method: if symmetric { "loops" } else { "flood" },
        nodes: l.nodes.len(),
        hosts,
        channels: l.wires.len(),
        found: (s.nodes, s.channels, s.hosts),
        probes: s.probes,
        network,
        map_ms: (s.finished - s.started).as_nanos() as f64 / 1e6,
        wall_ms,
    }
}

/// Packets per second through Aurora's own ATOMIC code on one core: hosts
/// send link-level packets of `size` bytes into their interface node, one
/// channel hop to a second node, which delivers them to the receiving host
/// (host → node → node → host), `flows` senders taking turns on the one
/// channel.
pub fn chain_rate(size: usize, flows: usize, secs: f64) -> f64 {
    use aurora_atomic::host::AtomicHost;
    use aurora_atomic::mosaic::HOST_PORT;
    use aurora_atomic::wire::{Dir, Route};
    use aurora_net::{Node, Outbox};
    let mut n1 = MosaicNode::new(1, true, [true, false, false, false]);
    let mut n2 = MosaicNode::new(2, true, [false, true, false, false]);
    let addr = |k: usize| std::net::Ipv4Addr::new(10, 9, 0, k as u8 + 1);
    let mut senders: Vec<AtomicHost> = (0..flows.max(1))
        .map(|k| AtomicHost::new(HostConfig::new(addr(k), k as u64), Instant::ZERO))
        .collect();
    let mut rx = AtomicHost::new(HostConfig::new(addr(200), 999), Instant::ZERO);
    let route = Route::from_steps(&[Dir::East]);
    // The raw message header (kind + channel) is 3 bytes of the size.
    let data = vec![0x5Au8; size.saturating_sub(3)];
    let (mut o1, mut o2, mut o3, mut o4) = (
        Outbox::<Vec<u8>>::default(),
        Outbox::default(),
        Outbox::default(),
        Outbox::default(),
    );
    let mut n = 0u64;
    let t = WallClock::now();
    let now = Instant::ZERO;
    while t.elapsed().as_secs_f64() < secs {
        for _ in 0..256 {
            let k = (n as usize) % senders.len();
            senders[k].send_raw(&route, 7, &data, &mut o1);
            for (_, p) in o1.drain() {
                n1.receive(now, HOST_PORT, &[p], &mut o2);
            }
            for (_, p) in o2.drain() {
                n2.receive(now, Dir::West as u16, &[p], &mut o3);
            }
            for (_, p) in o3.drain() {
                rx.receive(now, 0, &[p], &mut o4);
            }
            o4.drain().for_each(drop);
            while rx.take_raw().is_some() {}
            n += 1;
        }
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// `aurora bench atomic`: the chain's packets per second for the seed's
/// sizes, one flow and eight, and the fit of time per packet.
pub fn chain_main(secs: f64) {
    println!("aurora bench atomic (one thread: host -> node -> channel -> node -> host, link-level packets)");
    println!(
        "{:>6} {:>6} {:>12} {:>10}   {:>16}",
        "bytes", "flows", "packets/s", "Mb/s", "seed: Kpkt/s Mb/s"
    );
    let seed = |l: usize, flows: usize| match (l, flows) {
        (4, 1) => "657 21",
        (54, 1) => "396 171",
        (1500, 1) => "31 381",
        (54, _) => "793 343",
        (1500, _) => "33 405",
        _ => "",
    };
    for flows in [1, 8] {
        for l in [4usize, 54, 1500] {
            let pps = chain_rate(l, flows, secs);
            println!(
                "{l:>6} {flows:>6} {:>11.0}K {:>10.1}   {:>16}",
                pps / 1e3,
                pps * l as f64 * 8.0 / 1e6,
                seed(l, flows)
            );
        }
    }
    let pts: Vec<(f64, f64)> = [4usize, 54, 256, 1000, 1500, 4000, 9000]
        .iter()
        .map(|&l| (l as f64, 1e6 / chain_rate(l, 1, secs)))
        .collect();
    let (a, b) = fit(&pts);
    println!(
        "time per packet: T(L) = {a:.3} us + {b:.5} us/byte (fit over {} sizes); the seed's host interface: 1.440 us + 0.020 us/byte",
        pts.len()
    );
    println!(
        "so a = {:.3} x the seed's, b = {:.4} x the seed's",
        a / 1.44,
        b / 0.02
    );
}

/// `aurora bench atomic-map`: `runs` random layouts of each size, mapped
/// both ways, a line each.
pub fn map_main(runs: u64) {
    println!("aurora bench atomic-map (random layouts of 4x4 to 8x8 meshes; virtual time)");
    println!(
        "{:<6} {:>6} {:>6} {:>6} {:>9} {:>7} {:>8} {:>10} {:>8} {:>9}",
        "method",
        "nodes",
        "hosts",
        "chans",
        "found",
        "probes",
        "per node",
        "messages",
        "map ms",
        "wall ms"
    );
    for &(meshes, hosts) in &[(1, 4), (3, 16), (6, 36), (12, 100), (24, 200)] {
        for symmetric in [true, false] {
            for seed in 0..runs {
                let r = map_once(meshes, (4, 8), hosts, symmetric, seed + 1);
                let found = if (r.found.0, r.found.2) == (r.nodes, r.hosts) {
                    "all".to_string()
                } else {
                    format!("{}/{}", r.found.0, r.found.2)
                };
                println!(
                    "{:<6} {:>6} {:>6} {:>6} {found:>9} {:>7} {:>8.2} {:>10} {:>8.3} {:>9.1}",
                    r.method,
                    r.nodes,
                    r.hosts,
                    r.channels,
                    r.probes,
                    r.probes as f64 / r.nodes as f64,
                    r.network,
                    r.map_ms,
                    r.wall_ms
                );
            }
        }
    }
    println!("Myrinet's mapper (published): 36 hosts, 13 switches, 64 links in 248 ms; 100 hosts, 40 switches, 193 links in 981 ms");
}

/// Least-squares line through (x, y) points: (intercept, slope).
pub fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - b * mx, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_finds_a_line() {
        let pts: Vec<(f64, f64)> = [4.0, 54.0, 1500.0]
            .iter()
            .map(|&l| (l, 1.44 + 0.02 * l))
            .collect();
        let (a, b) = fit(&pts);
        assert!((a - 1.44).abs() < 1e-9 && (b - 0.02).abs() < 1e-12);
    }

    #[test]
    fn packets_get_through_the_chain() {
        assert!(chain_rate(54, 2, 0.01) > 0.0);
    }
}
