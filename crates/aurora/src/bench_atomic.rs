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
