//! Many signalling hosts opening and closing at once, in virtual time, on
//! chains of real VuNet switches and relaying links that every VC shares:
//! seeded random numbers of hosts, relays and applications, with random
//! open and close times, some applications never closing (their host
//! stops refreshing, so the relays' lifetime and the table's lease end
//! them). Whatever opens or fails:
//!
//! - no two live VCs ever hold the same VCI on the same link (checked at
//!   every sample, against the relays' tables and the allocation table);
//! - no PDU reaches a destination it was not sent to, and none arrives
//!   damaged;
//! - once leases and lifetimes have run out, no relay entry and no table
//!   entry is left.

use std::collections::BTreeMap;
use std::sync::Arc;

use aurora_engine::{Engine, NodeId};
use aurora_net::vunet::VunetLink;
use aurora_signal::conn::{Path, Timing};
use aurora_signal::host::{AppSpec, HostConfig, SignalHost};
use aurora_signal::table::{MemTable, Owner, VciTable};
use aurora_time::{Duration, Instant};

mod common;
use common::{chain_path, wire_many};

/// A small deterministic generator (the cases are the same every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn key(h: usize) -> Vec<u8> {
    format!("key of host {h}").into_bytes()
}

/// The path from host `h` to destination `d` across `n` relays.
fn path(n: usize, h: usize, d: usize) -> Path {
    let mut p = chain_path(n);
    p.hops[0].bits_back = 2 + h as u8;
    p.hops[n - 1].bits_on = 2 + d as u8;
    p
}

const LIFETIME: Duration = Duration::from_millis(40);
const LEASE: Duration = Duration::from_millis(40);

fn run_case(seed: u64) {
    let mut rng = Lcg(seed);
    let n = 1 + rng.below(4) as usize;
    let hosts = 2 + rng.below(3) as usize;
    let mut sim = Engine::new(1);
    let table = Arc::new(MemTable::new(Default::default()));
    let cfg = |owner: usize| HostConfig {
        owner: Owner(owner as u32 + 1),
        key: Some((owner as u8 + 1, key(owner))),
        timing: Timing {
            timeout: Duration::from_millis(2),
            retries: 2,
            lease: LEASE,
        },
        vpi: 0,
    };
    // Senders 0..hosts, destinations hosts..2 hosts (their own owners and
    // keys; they only receive).
    let mut to_of: BTreeMap<u16, usize> = BTreeMap::new();
    let mut senders = Vec::new();
    let mut flow = 1u16;
    for h in 0..hosts {
        let mut host = SignalHost::new(cfg(h), table.clone());
        for _ in 0..1 + rng.below(3) {
            let d = rng.below(hosts as u64) as usize;
            let open = Instant::from_micros(10 + rng.below(20_000) as i64);
            let close = match rng.below(4) {
                0 => None,
                _ => Some(open + Duration::from_micros(500 + rng.below(30_000) as i64)),
            };
            assert!(host.add_app(AppSpec {
                name: format!("h{h}.{flow}"),
                to: format!("d{d}"),
                flow,
                path: path(n, h, d),
                open_at: open,
                close_at: close,
                sdu: 200,
                count: 40,
                interval: Duration::from_micros(500),
                refresh: close.map(|_| Duration::from_millis(10)),
            }));
            to_of.insert(flow, d);
            flow += 1;
        }
        senders.push(sim.add_node(host));
    }
    let dests: Vec<NodeId> = (0..hosts)
        .map(|d| sim.add_node(SignalHost::new(cfg(hosts + d), table.clone())))
        .collect();
    let relays = wire_many(&mut sim, &senders, &dests, n, |_| {
        let mut r = VunetLink::new([false, false], None);
        for h in 0..hosts {
            r.add_key(h as u8 + 1, key(h));
        }
        r.set_lifetime(Some(LIFETIME));
        r
    });
    let mut t = Instant::ZERO;
    let end = Instant::from_millis(200);
    while t < end {
        t += Duration::from_micros(250);
        sim.run_until(t);
        // No VCI held twice on a link: each relay entry (arriving side 0,
        // VCI) is one owner's, and the live VCs' VCIs per link differ.
        let mut held: BTreeMap<(u32, u16), usize> = BTreeMap::new();
        for (h, &s) in senders.iter().enumerate() {
            for a in sim.node::<SignalHost>(s).unwrap().apps() {
                if !a.is_open() {
                    continue;
                }
                let vc = a.vc().unwrap();
                for (k, &v) in vc.vcis.iter().enumerate() {
                    if let Some(other) = held.insert((k as u32, v), h) {
                        panic!("seed {seed}: VCI {v} on link {k} held by hosts {other} and {h}");
                    }
                }
            }
        }
        for (k, &r) in relays.iter().enumerate() {
            let relay = sim.node::<VunetLink>(r).unwrap();
            for (&(link, vci), &h) in &held {
                if link as usize == k {
                    if let Some(o) = relay.owner(0, vci) {
                        assert_eq!(o as usize, h + 1, "seed {seed}: relay {k} VCI {vci}");
                    }
                }
            }
        }
    }
    // Every PDU where it was sent, none damaged.
    let mut delivered = 0;
    for (d, &node) in dests.iter().enumerate() {
        for (flow, _vci, rx) in sim.node::<SignalHost>(node).unwrap().sessions() {
            assert_eq!(
                to_of.get(&flow),
                Some(&d),
                "seed {seed}: flow {flow} at d{d}"
            );
            assert_eq!(rx.corrupted, 0, "seed {seed}: flow {flow}");
            delivered += rx.delivered;
        }
    }
    let opened: usize = senders
        .iter()
        .map(|&s| {
            sim.node::<SignalHost>(s)
                .unwrap()
                .apps()
                .iter()
                .filter(|a| !a.events().is_empty() && a.events()[0].failure.is_none())
                .count()
        })
        .sum();
    assert!(opened > 0 && delivered > 0, "seed {seed}: nothing happened");
    // Nothing left once leases and lifetimes are over.
    for (k, &r) in relays.iter().enumerate() {
        let relay = sim.node::<VunetLink>(r).unwrap();
        for vci in 0..=u16::MAX {
            assert_eq!(
                relay.entry(0, vci),
                None,
                "seed {seed}: relay {k} VCI {vci}"
            );
            assert_eq!(
                relay.entry(1, vci),
                None,
                "seed {seed}: relay {k} VCI {vci}"
            );
        }
    }
    let now = (end - Instant::ZERO).as_nanos() as u64;
    let left = table.entries(now).unwrap();
    assert!(left.is_empty(), "seed {seed}: table entries left {left:?}");
}

#[test]
fn many_hosts_opening_and_closing_at_once_never_share_a_vci_and_leak_nothing() {
    for seed in 1..=40 {
        run_case(seed);
    }
}
