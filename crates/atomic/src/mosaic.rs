//! A Mosaic node: four channels (East, West, North, South, ports 0-3) and,
//! on a host-interface board, a host port (4).
//!
//! Routing is Mosaic's, extended by ATOMIC's store-and-forward (see
//! [`crate::wire`]): the leading pair moves the packet one hop and is
//! worn down toward (0, 0); where a pair ends the node strips it and either
//! delivers (a second (0, 0) follows) or forwards by the next pair. Where a
//! pair ends, a loop probe gets the node's identifier and the port it came
//! in by appended, which is how an Address Consultant tells nodes apart.
//!
//! The node's software also takes part in flood mapping: it forwards an
//! AC's explore message once to every channel, notes every channel it
//! arrived by, and after a settling time floods one report of what it saw
//! back through the network; reports are forwarded once each.
//!
//! Every packet that is not forwarded or delivered is counted under a
//! [`Drop`] reason.

use std::collections::VecDeque;

use aurora_net::{Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use rustc_hash::FxHashSet;

use crate::wire::{self, Dir, Hop, InEdge, Kind, Msg, MAX_EDGES, MAX_HOPS};

/// The port to the host, on host-interface nodes.
pub const HOST_PORT: PortId = 4;

/// Why a node dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Drop {
    /// The packet ended inside its route.
    Truncated,
    /// A route byte was -128.
    BadByte,
    /// The route led out of a channel with nothing attached (or cut).
    NoChannel,
    /// Delivered at a node with no host.
    NoHost,
    /// The node is down.
    Down,
    /// A node-level message that did not parse.
    BadMessage,
    /// A flood message already seen.
    FloodDuplicate,
    /// A probe or flood message that had recorded as many hops as allowed.
    TooManyHops,
    /// A flood the node had no room to remember.
    FloodTableFull,
}

impl Drop {
    /// Every reason, in counter order.
    pub const ALL: [Drop; 9] = [
        Drop::Truncated,
        Drop::BadByte,
        Drop::NoChannel,
        Drop::NoHost,
        Drop::Down,
        Drop::BadMessage,
        Drop::FloodDuplicate,
        Drop::TooManyHops,
        Drop::FloodTableFull,
    ];

    /// The reason's name, in counters and in the books of flows (snake
    /// case, as the engine's own reasons).
    pub const fn name(self) -> &'static str {
        match self {
            Drop::Truncated => "truncated",
            Drop::BadByte => "bad_route_byte",
            Drop::NoChannel => "no_channel",
            Drop::NoHost => "no_host",
            Drop::Down => "node_down",
            Drop::BadMessage => "bad_message",
            Drop::FloodDuplicate => "flood_duplicate",
            Drop::TooManyHops => "too_many_hops",
            Drop::FloodTableFull => "flood_table_full",
        }
    }
}

/// What a node did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MosaicCounters {
    /// Packets received (from channels and the host).
    pub received: u64,
    /// Hops forwarded (wormhole steps).
    pub forwarded: u64,
    /// Packets stored and forwarded by a next pair.
    pub stored: u64,
    /// Packets delivered to the host.
    pub to_host: u64,
    /// Node-level messages taken (explore, report).
    pub flood_in: u64,
    /// Node-level messages sent.
    pub flood_out: u64,
    /// Drops, by [`Drop`].
    pub drops: [u64; Drop::ALL.len()],
}

impl MosaicCounters {
    /// Drops for one reason.
    pub fn dropped(&self, d: Drop) -> u64 {
        self.drops[d as usize]
    }
    /// All drops.
    pub fn dropped_total(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// Floods a node remembers at once (one per AC mapping at a time).
pub const MAX_FLOODS: usize = 8;
/// Origins a node remembers per flood.
pub const MAX_ORIGINS: usize = 1 << 16;
/// How long a node collects arriving explore messages before reporting.
pub const SETTLE: Duration = Duration::from_millis(2);

#[derive(Debug)]
struct Flood {
    id: u64,
    /// The way the flood first came.
    path: Vec<Hop>,
    /// Every channel it came in by.
    edges: Vec<InEdge>,
    /// When to send this node's report, if not sent yet.
    report_at: Option<Instant>,
    /// Reports already forwarded, by origin.
    seen: FxHashSet<u64>,
}

/// A Mosaic node.
#[derive(Debug)]
pub struct MosaicNode {
    id: u64,
    has_host: bool,
    channels: [bool; 4],
    up: bool,
    floods: VecDeque<Flood>,
    counters: MosaicCounters,
}

impl MosaicNode {
    /// A node with identifier `id` (a random number; Mosaic nodes have no
    /// addresses), a host attached or not, and the channels that lead
    /// somewhere.
    pub fn new(id: u64, has_host: bool, channels: [bool; 4]) -> Self {
        MosaicNode {
            id,
            has_host,
            channels,
            up: true,
            floods: VecDeque::new(),
            counters: MosaicCounters::default(),
        }
    }

    /// The node's identifier.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// True when a host is attached.
    pub fn has_host(&self) -> bool {
        self.has_host
    }

    /// The counters.
    pub fn counters(&self) -> MosaicCounters {
        self.counters
    }

    /// Takes the node down (it drops everything) or up.
    pub fn set_up(&mut self, up: bool) {
        self.up = up;
    }

    /// Cuts or mends the channel leaving in direction `d`.
    pub fn set_channel(&mut self, d: Dir, ok: bool) {
        self.channels[d as usize] = ok;
    }

    /// True if the channel leaving in direction `d` leads somewhere.
    pub fn channel(&self, d: Dir) -> bool {
        self.channels[d as usize]
    }

    fn drop(&mut self, d: Drop) {
        self.counters.drops[d as usize] += 1;
    }

    /// Counts packet `pkt`, which arrived on `port`, dropped for `d`, and
    /// shows it to the driver if it asks ([`Outbox::tracking_drops`]).
    /// `pkt` is given as a whole packet (`aurora_atomic::flow::Layout::Whole`):
    /// what is left of its route (just the terminator if nothing is), then
    /// its payload.
    fn lose(&mut self, d: Drop, port: PortId, pkt: &[u8], out: &mut Outbox<Vec<u8>>) {
        self.drop(d);
        if out.tracking_drops() {
            out.dropped(port, &pkt.to_vec(), d.name());
        }
    }

    /// Packet `pkt` on its way between nodes as a whole packet: without
    /// its leading pair if that is spent ((0, 0), for the next node to
    /// strip).
    fn whole(pkt: &[u8]) -> &[u8] {
        match pkt.first_chunk::<2>() {
            Some([0, 0]) => &pkt[2..],
            _ => pkt,
        }
    }

    /// Sends `pkt` (which arrived on `from`) out in direction `d`, or drops
    /// it if no channel leaves that way.
    fn send(&mut self, from: PortId, d: Dir, pkt: Vec<u8>, out: &mut Outbox<Vec<u8>>) {
        if self.channels[d as usize] {
            out.push(d as PortId, pkt);
        } else if out.tracking_drops() {
            self.lose(Drop::NoChannel, from, Self::whole(&pkt), out);
        } else {
            self.drop(Drop::NoChannel);
        }
    }

    /// Appends this node to a probe whose payload starts at `at`.
    fn record(&mut self, pkt: &mut Vec<u8>, at: usize, in_port: PortId) {
        // Probe: kind (1), AC (8), seq (4), count (2), hops.
        if pkt.get(at) != Some(&(Kind::Probe as u8)) || pkt.len() < at + 15 {
            return;
        }
        let n = u16::from_be_bytes([pkt[at + 13], pkt[at + 14]]);
        if usize::from(n) >= MAX_HOPS {
            return;
        }
        pkt[at + 13..at + 15].copy_from_slice(&(n + 1).to_be_bytes());
        pkt.extend_from_slice(&self.id.to_be_bytes());
        pkt.push(in_port as u8);
    }

    /// Moves one packet on from this node. A packet from a channel starts
    /// with its current pair; a packet from the host starts with its first
    /// pair, and an empty route ((0, 0) at once) comes straight back to the
    /// host (loopback).
    fn route(
        &mut self,
        now: Instant,
        in_port: PortId,
        mut pkt: Vec<u8>,
        out: &mut Outbox<Vec<u8>>,
    ) {
        if in_port == HOST_PORT && pkt.first_chunk::<2>() == Some(&[0, 0]) {
            pkt.drain(..2);
            self.record(&mut pkt, 0, in_port);
            self.deliver(now, in_port, pkt, out);
            return;
        }
        loop {
            let Some(&[a, b]) = pkt.first_chunk::<2>() else {
                self.lose(Drop::Truncated, in_port, &pkt, out);
                return;
            };
            if a == 0x80 || b == 0x80 {
                self.lose(Drop::BadByte, in_port, &pkt, out);
                return;
            }
            let (dx, dy) = (a as i8, b as i8);
            if dx != 0 {
                pkt[0] = (dx - dx.signum()) as u8;
                self.counters.forwarded += 1;
                let d = if dx > 0 { Dir::East } else { Dir::West };
                self.send(in_port, d, pkt, out);
                return;
            }
            if dy != 0 {
                pkt[1] = (dy - dy.signum()) as u8;
                self.counters.forwarded += 1;
                let d = if dy > 0 { Dir::North } else { Dir::South };
                self.send(in_port, d, pkt, out);
                return;
            }
            // A pair ends here.
            pkt.drain(..2);
            match wire::payload_start(&pkt) {
                Ok(at) => self.record(&mut pkt, at, in_port),
                Err(wire::RouteError::BadByte) => {
                    self.lose(Drop::BadByte, in_port, &pkt, out);
                    return;
                }
                Err(_) => {
                    self.lose(Drop::Truncated, in_port, &pkt, out);
                    return;
                }
            }
            if pkt.first_chunk::<2>() == Some(&[0, 0]) {
                pkt.drain(..2);
                self.deliver(now, in_port, pkt, out);
                return;
            }
            self.counters.stored += 1;
        }
    }

    fn deliver(&mut self, now: Instant, in_port: PortId, pkt: Vec<u8>, out: &mut Outbox<Vec<u8>>) {
        let kind = pkt.first().and_then(|&k| Kind::from_code(k));
        if kind.is_some_and(Kind::for_nodes) {
            self.counters.flood_in += 1;
            match Msg::parse(&pkt) {
                Ok(Msg::Explore { flood, hops }) => self.explore(now, in_port, flood, hops, out),
                Ok(m @ Msg::Report { .. }) => self.report(m, out),
                _ => self.drop(Drop::BadMessage),
            }
            return;
        }
        if self.has_host {
            self.counters.to_host += 1;
            out.push(HOST_PORT, pkt);
        } else if out.tracking_drops() {
            // Given back its terminator: a whole packet, as `lose` takes.
            let whole = [&[0, 0][..], &pkt].concat();
            self.lose(Drop::NoHost, in_port, &whole, out);
        } else {
            self.drop(Drop::NoHost);
        }
    }

    fn flood_mut(&mut self, id: u64) -> Option<&mut Flood> {
        self.floods.iter_mut().find(|f| f.id == id)
    }

    fn explore(
        &mut self,
        now: Instant,
        in_port: PortId,
        flood: u64,
        hops: Vec<Hop>,
        out: &mut Outbox<Vec<u8>>,
    ) {
        let edge = hops.last().map(|&from| InEdge {
            from,
            port: in_port as u8,
        });
        if let Some(f) = self.flood_mut(flood) {
            if let Some(e) = edge {
                if f.edges.len() < MAX_EDGES && !f.edges.contains(&e) {
                    f.edges.push(e);
                }
            }
            self.drop(Drop::FloodDuplicate);
            return;
        }
        if self.floods.len() >= MAX_FLOODS {
            self.floods.pop_front();
        }
        self.floods.push_back(Flood {
            id: flood,
            path: hops.clone(),
            edges: edge.into_iter().collect(),
            report_at: Some(now + SETTLE),
            seen: FxHashSet::default(),
        });
        self.flood_out(&hops, &|h| Msg::Explore { flood, hops: h }, out);
    }

    /// Sends a flood message out of every channel, this node and the
    /// channel appended to its hop list `hops`.
    fn flood_out(
        &mut self,
        hops: &[Hop],
        msg: &dyn Fn(Vec<Hop>) -> Msg,
        out: &mut Outbox<Vec<u8>>,
    ) {
        if hops.len() >= MAX_HOPS {
            self.drop(Drop::TooManyHops);
            return;
        }
        for d in Dir::ALL {
            if !self.channels[d as usize] {
                continue;
            }
            let mut h = hops.to_vec();
            h.push(Hop {
                node: self.id,
                port: d as u8,
            });
            self.counters.flood_out += 1;
            self.send(d as PortId, d, one_hop(&msg(h)), out);
        }
    }

    /// A report arrived (or is this node's own): deliver it to the host,
    /// and forward it once to every channel.
    fn report(&mut self, m: Msg, out: &mut Outbox<Vec<u8>>) {
        let Msg::Report {
            flood,
            origin,
            host,
            edges,
            path,
            back,
        } = m
        else {
            return;
        };
        let f = match self.flood_mut(flood) {
            Some(f) => f,
            None => {
                // A report of a flood this node never saw explore (it came
                // up late): remember the flood to forward each report once.
                if self.floods.len() >= MAX_FLOODS {
                    self.floods.pop_front();
                }
                self.floods.push_back(Flood {
                    id: flood,
                    path: Vec::new(),
                    edges: Vec::new(),
                    report_at: None,
                    seen: FxHashSet::default(),
                });
                self.floods.back_mut().expect("just pushed")
            }
        };
        if f.seen.contains(&origin) {
            self.drop(Drop::FloodDuplicate);
            return;
        }
        if f.seen.len() >= MAX_ORIGINS {
            self.drop(Drop::FloodTableFull);
            return;
        }
        f.seen.insert(origin);
        if self.has_host {
            let m = Msg::Report {
                flood,
                origin,
                host,
                edges: edges.clone(),
                path: path.clone(),
                back: back.clone(),
            };
            self.counters.to_host += 1;
            let mut payload = Vec::new();
            m.emit(&mut payload);
            out.push(HOST_PORT, payload);
        }
        let report = |b: Vec<Hop>| Msg::Report {
            flood,
            origin,
            host,
            edges: edges.clone(),
            path: path.clone(),
            back: b,
        };
        self.flood_out(&back, &report, out);
    }
}

/// A message for the node at the far end of a channel: a pair already
/// spent (this node sends it straight out) and the terminator, so the
/// next node delivers it.
fn one_hop(m: &Msg) -> Vec<u8> {
    let mut v = vec![0, 0, 0, 0];
    m.emit(&mut v);
    v
}

impl Node<Vec<u8>> for MosaicNode {
    fn ports(&self) -> usize {
        5
    }

    fn receive(
        &mut self,
        now: Instant,
        port: PortId,
        frames: &[Vec<u8>],
        out: &mut Outbox<Vec<u8>>,
    ) {
        for f in frames {
            self.counters.received += 1;
            if !self.up {
                // From a channel, its leading pair may be spent; from the
                // host, a packet is whole.
                let whole = if port == HOST_PORT { f } else { Self::whole(f) };
                self.lose(Drop::Down, port, whole, out);
                continue;
            }
            self.route(now, port, f.clone(), out);
        }
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox<Vec<u8>>) {
        if !self.up {
            return;
        }
        let due: Vec<(u64, Vec<InEdge>, Vec<Hop>)> = self
            .floods
            .iter_mut()
            .filter(|f| f.report_at.is_some_and(|t| t <= now))
            .map(|f| {
                f.report_at = None;
                (f.id, f.edges.clone(), f.path.clone())
            })
            .collect();
        for (flood, edges, path) in due {
            let m = Msg::Report {
                flood,
                origin: self.id,
                host: self.has_host,
                edges,
                path,
                back: Vec::new(),
            };
            self.report(m, out);
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.floods.iter().filter_map(|f| f.report_at).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Route;

    fn run(n: &mut MosaicNode, port: PortId, pkt: Vec<u8>) -> Vec<(PortId, Vec<u8>)> {
        let mut out = Outbox::default();
        n.receive(Instant::ZERO, port, &[pkt], &mut out);
        out.drain().collect()
    }

    #[test]
    fn the_leading_pair_moves_x_first_then_y() {
        let mut n = MosaicNode::new(1, true, [true; 4]);
        assert_eq!(
            run(&mut n, 4, vec![2, 3, 0, 0, 9]),
            vec![(0, vec![1, 3, 0, 0, 9])]
        );
        assert_eq!(
            run(&mut n, 1, vec![0, 3, 0, 0, 9]),
            vec![(2, vec![0, 2, 0, 0, 9])]
        );
        assert_eq!(
            run(&mut n, 1, vec![0xFE, 0, 0, 0]),
            vec![(1, vec![0xFF, 0, 0, 0])]
        );
        assert_eq!(
            run(&mut n, 1, vec![0, 0xFD, 0, 0]),
            vec![(3, vec![0, 0xFE, 0, 0])]
        );
    }

    #[test]
    fn a_spent_pair_is_stored_and_forwarded_or_delivered() {
        let mut n = MosaicNode::new(1, true, [true; 4]);
        // (0,0)(-1,2)(0,0): the next pair takes over here, West.
        assert_eq!(
            run(&mut n, 0, vec![0, 0, 0xFF, 2, 0, 0, 7]),
            vec![(1, vec![0, 2, 0, 0, 7])]
        );
        assert_eq!(n.counters().stored, 1);
        // (0,0)(0,0): delivered, both pairs stripped.
        assert_eq!(
            run(&mut n, 2, vec![0, 0, 0, 0, 2, 0, 5]),
            vec![(4, vec![2, 0, 5])]
        );
        // Loopback from the host: an empty route, (0,0) at once.
        assert_eq!(
            run(&mut n, 4, vec![0, 0, 2, 0, 5]),
            vec![(4, vec![2, 0, 5])]
        );
    }

    #[test]
    fn every_bad_packet_is_a_counted_drop() {
        let mut n = MosaicNode::new(1, false, [true, false, true, true]);
        for (pkt, why) in [
            (vec![], Drop::Truncated),
            (vec![5], Drop::Truncated),
            (vec![0x80, 0, 0, 0], Drop::BadByte),
            (vec![0xFF, 0, 0, 0], Drop::NoChannel),
            (vec![0, 0, 0, 0, 2, 0], Drop::NoHost),
            (vec![0, 0, 3], Drop::Truncated),
            (vec![0, 0, 1, 0x80], Drop::BadByte),
            (vec![0, 0, 0, 0, 9, 1, 2], Drop::BadMessage),
        ] {
            let before = n.counters().dropped(why);
            assert!(run(&mut n, 0, pkt.clone()).is_empty(), "{pkt:?}");
            assert_eq!(n.counters().dropped(why), before + 1, "{why:?}");
        }
        n.set_up(false);
        assert!(run(&mut n, 0, vec![1, 0, 0, 0]).is_empty());
        assert_eq!(n.counters().dropped(Drop::Down), 1);
        assert_eq!(n.counters().received, 9);
        assert_eq!(n.counters().dropped_total(), 9);
    }

    #[test]
    fn probes_collect_each_node_where_a_pair_ends() {
        let mut n = MosaicNode::new(0xAB, true, [true; 4]);
        let probe = Msg::Probe {
            ac: 1,
            seq: 2,
            hops: vec![],
        };
        let pkt = probe.packet(&Route(vec![(-1, 0)]));
        // Arrives with its first pair spent: (0,0)(-1,0)(0,0) probe.
        let mut spent = vec![0, 0];
        spent.extend_from_slice(&pkt);
        let sent = run(&mut n, 2, spent);
        assert_eq!(sent.len(), 1);
        let (port, p) = &sent[0];
        assert_eq!(*port, 1);
        // The head is the spent pair the next node strips.
        assert_eq!(&p[..2], &[0, 0]);
        let at = 2 + wire::payload_start(&p[2..]).unwrap();
        assert_eq!(
            Msg::parse(&p[at..]).unwrap(),
            Msg::Probe {
                ac: 1,
                seq: 2,
                hops: vec![Hop {
                    node: 0xAB,
                    port: 2
                }]
            }
        );
    }
}
