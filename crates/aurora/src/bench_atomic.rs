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
