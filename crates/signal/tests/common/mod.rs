#![allow(dead_code)] // each test file uses some of these
//! The chain both scenario files run on: host - s0 - r0 - s1 - r1 - ... -
//! r(n-1) - sn - dest, VuNet switches and relaying links. Switches: port
//! 0 towards the host's side, 1 away from it; the host on s0's port 2,
//! the destination on sn's port 2. Links of 1 M cells a second (a cell
//! time of exactly 1 us) and 50 us of delay.

use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_net::vunet::{VunetLink, VunetSwitch};
use aurora_net::{Node, Outbox, PortId};
use aurora_signal::conn::{Hop, Path, Timing};
use aurora_signal::host::HostConfig;
use aurora_signal::table::Link;
use aurora_signal::table::Owner;
use aurora_time::Duration;
use aurora_time::Instant;
use aurora_wire::cell::{Format, Header};
use aurora_wire::CellBytes;

/// Cells a second on every link.
pub const RATE: f64 = 1e6;
/// Every link's delay.
pub const DELAY: Duration = Duration::from_micros(50);

/// The path from the host to the destination across `n` relays, relay
/// `k` with id `k` and segment `k` into it.
pub fn chain_path(n: usize) -> Path {
    let hops = (0..n)
        .map(|k| Hop {
            relay: k as u16,
            link: Link(k as u32),
            side: 0,
            bits_on: if k + 1 == n { 2 } else { 1 },
            bits_back: if k == 0 { 2 } else { 0 },
        })
        .collect();
    Path {
        first_bits: 1,
        hops,
        last_link: Link(n as u32),
    }
}

/// Adds the switches and the `n` relays `relay(k)` (their ids set) to
/// `sim` and links them between nodes `host` and `dest`; the relays.
pub fn wire(
    sim: &mut Engine,
    host: NodeId,
    dest: NodeId,
    n: usize,
    relay: impl Fn(usize) -> VunetLink,
) -> Vec<NodeId> {
    wire_many(sim, &[host], &[dest], n, relay)
}

/// [`wire`] with several hosts and destinations: host `i` on s0's port
/// 2 + i, destination `j` on sn's port 2 + j.
pub fn wire_many(
    sim: &mut Engine,
    hosts: &[NodeId],
    dests: &[NodeId],
    n: usize,
    relay: impl Fn(usize) -> VunetLink,
) -> Vec<NodeId> {
    let ports = 2 + hosts.len().max(dests.len());
    let switches: Vec<NodeId> = (0..=n)
        .map(|_| sim.add_node(VunetSwitch::new(ports)))
        .collect();
    let relays: Vec<NodeId> = (0..n)
        .map(|k| {
            let mut r = relay(k);
            r.set_id(k as u16);
            sim.add_node(r)
        })
        .collect();
    let spec = LinkSpec::clean(RATE, DELAY, 64);
    for (i, &h) in hosts.iter().enumerate() {
        sim.connect((h, 0), (switches[0], 2 + i as u16), spec)
            .unwrap();
    }
    for (j, &d) in dests.iter().enumerate() {
        sim.connect((switches[n], 2 + j as u16), (d, 0), spec)
            .unwrap();
    }
    for k in 0..n {
        sim.connect((switches[k], 1), (relays[k], 0), spec).unwrap();
        sim.connect((relays[k], 1), (switches[k + 1], 0), spec)
            .unwrap();
    }
    relays
}

/// The modelled set-up latency across `n` relays: a write and a read to
/// relay `k`, each a round trip over its 2k + 2 links.
pub fn setup_latency(n: usize) -> Duration {
    let one_link = DELAY + Duration::from_micros(1);
    (0..n)
        .map(|k| Duration::from_nanos(one_link.as_nanos() * 2 * (2 * k as i64 + 2) * 2))
        .fold(Duration::ZERO, |a, b| a + b)
}

/// A host that keeps, for every cell it gets, the VCI and payload byte 0.
#[derive(Default)]
pub struct CellSink(pub Vec<(u16, u8)>);

impl Node for CellSink {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, _: Instant, _: PortId, cells: &[CellBytes], _: &mut Outbox) {
        for c in cells {
            let h = Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni);
            self.0.push((h.vci, c[5]));
        }
    }
    fn poll(&mut self, _: Instant, _: &mut Outbox) {}
    fn poll_at(&self) -> Option<Instant> {
        None
    }
}

/// The key the chain tests' hosts use (key id 1) and relays know.
pub const KEY: &[u8] = b"host key";

/// A chain test's host `owner`: key id 1 with [`KEY`], a 5 ms timeout,
/// two retries, 10 s leases.
pub fn host_config(owner: u32) -> HostConfig {
    HostConfig {
        owner: Owner(owner),
        key: Some((1, KEY.to_vec())),
        timing: Timing {
            timeout: Duration::from_millis(5),
            retries: 2,
            lease: Duration::from_secs(10),
        },
        vpi: 0,
    }
}
