//! The books of ATOMIC flows, packet by packet.
//!
//! Every packet a flow sends names its flow and its sequence number
//! (`aurora_atomic::flow`), so wherever it ends, it can be told apart:
//!
//! - its receiver delivers it, intact or damaged (the host's counts);
//! - it is dropped: by the sending host (no route came, too many waited
//!   for one), by a Mosaic node (`no_channel`, `node_down`, ...), or by the
//!   engine (a full port, a link to a stopped process, a port with no
//!   link). Nodes and engine
//!   show the drop tap each frame they drop; [`FrameLedger`] reads the
//!   flow out of it and counts it by place and reason;
//! - or it is still on its way when the run ends: in a port or on a line
//!   (the engine's queues, walked), or at its sender waiting for a route.
//!
//! So per flow `sent = delivered + corrupted + lost + in flight`, each
//! term measured on its own; the difference is `unaccounted`, and under
//! `aurora run` it must be 0. A process of `aurora node` sees only part of
//! a flow, so there the difference is not a verdict.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use aurora_atomic::flow::{self, FlowId, Layout};
use aurora_atomic::gateway::Gateway;
use aurora_atomic::host::AtomicHost;
use aurora_engine::{Engine, NodeId};
use aurora_net::accounting::{Place, Side};
use aurora_net::Frame;
use aurora_topo::AtomicPart;

use crate::atomic_report::FlowRow;
use crate::captures::{FrameNode, FramePorts};
use crate::run::LossRow;

/// Where an ATOMIC frame was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Shown the drop tap: by a node on arriving (side `in`), as a whole
    /// packet, or by the engine in a port (side `out`).
    Dropped,
    /// Crossing to or from another process, or waiting in a port or on a
    /// line: as on its line.
    OnLine,
}

/// How a frame seen (`how`) at `place` is laid out, if the place handles
/// ATOMIC frames. Nodes show the drop tap whole packets; on a line,
/// between Mosaic nodes a frame's leading pair may be spent, a node's line
/// to its host carries payloads alone, and a host's line to its node whole
/// packets.
fn layout_at(nodes: &FramePorts, place: Place, how: Seen) -> Option<Layout> {
    let node = *nodes.get(&place.node)?;
    if let FrameNode::Router { first } = node {
        if place.port < first {
            return None;
        }
    }
    let mosaic = matches!(node, FrameNode::Mosaic);
    Some(match (place.side, how) {
        (Side::Out, _) => Layout::leaving(mosaic, place.port),
        (Side::In, Seen::Dropped) => Layout::Whole,
        (Side::In, Seen::OnLine) => Layout::arriving(mosaic, place.port),
    })
}

/// Whether `place` handles ATOMIC frames (a frame dropped anywhere else is
/// a cell, for the cell ledger).
pub(crate) fn frame_place(nodes: &FramePorts, place: Place) -> bool {
    layout_at(nodes, place, Seen::Dropped).is_some()
}

/// Flow packets per flow and place.
pub(crate) type AtPlaces = BTreeMap<(FlowId, Place), u64>;

/// The flows of ATOMIC part `a`, in file order: each one's name for the
/// books, its sender's host name and its destination.
pub(crate) fn flows(a: &AtomicPart) -> Vec<(FlowId, String, Ipv4Addr)> {
    // A host's flows were added in file order: its n-th is its flow n.
    let mut next: BTreeMap<&str, u16> = BTreeMap::new();
    let mut v = Vec::new();
    for (from, f) in &a.net.flows {
        let Some(src) = a.net.hosts.iter().find(|h| &h.0 == from).map(|h| h.1.addr) else {
            continue;
        };
        let n = next.entry(from.as_str()).or_default();
        v.push((FlowId { src, flow: *n }, from.clone(), f.dst));
        *n = n.saturating_add(1);
    }
    v
}

/// Flow packets dropped, by flow, place and reason, from the frames a
/// drop tap shows it; and those that crossed the process's edge or were
/// left unread there, from its boundary tap and stop-time drain. Only the
/// flows it was made for are kept, so the books stay as small as the file
/// whatever arrives.
#[derive(Debug)]
pub(crate) struct FrameLedger {
    nodes: FramePorts,
    lost: BTreeMap<FlowId, BTreeMap<(Place, &'static str), u64>>,
    /// Those that crossed the process's edge: taken by a link to another
    /// process (side `out`), or read from one (`in`).
    pub(crate) crossed: AtPlaces,
    /// Those left unread at its inputs when it stopped.
    pub(crate) unread: AtPlaces,
}

impl FrameLedger {
    /// A ledger for `flows`, at the ATOMIC nodes `nodes`.
    pub(crate) fn new(nodes: FramePorts, flows: impl IntoIterator<Item = FlowId>) -> Self {
        FrameLedger {
            nodes,
            lost: flows.into_iter().map(|f| (f, BTreeMap::new())).collect(),
            crossed: AtPlaces::new(),
            unread: AtPlaces::new(),
        }
    }

    /// Counts the flow packets among `frames`, which crossed the process's
    /// edge at `place` (`unread`: left unread there at the stop).
    pub(crate) fn crossing<F: Frame>(&mut self, place: Place, frames: &[F], unread: bool) {
        let Some(layout) = layout_at(&self.nodes, place, Seen::OnLine) else {
            return;
        };
        let counts = if unread {
            &mut self.unread
        } else {
            &mut self.crossed
        };
        for f in frames {
            if let Some(p) = flow::in_frame(f.bytes(), layout) {
                if self.lost.contains_key(&p.id) {
                    *counts.entry((p.id, place)).or_default() += 1;
                }
            }
        }
    }

    /// Whether `place` handles ATOMIC frames (see [`frame_place`]).
    pub(crate) fn takes(&self, place: Place) -> bool {
        frame_place(&self.nodes, place)
    }

    /// `frame` was dropped at `place` for `reason`.
    pub(crate) fn dropped(&mut self, place: Place, reason: &'static str, frame: &[u8]) {
        let Some(layout) = layout_at(&self.nodes, place, Seen::Dropped) else {
            return;
        };
        let Some(p) = flow::in_frame(frame, layout) else {
            return;
        };
        if let Some(by) = self.lost.get_mut(&p.id) {
            *by.entry((place, reason)).or_default() += 1;
        }
    }

    /// Flow packets on their way in engine `e` when it stopped: in its
    /// ports and on its lines, and waiting at their senders for a route.
    pub(crate) fn in_flight<F: Frame>(
        &self,
        a: &AtomicPart,
        e: &Engine<F>,
    ) -> BTreeMap<FlowId, u64> {
        let mut m: BTreeMap<FlowId, u64> = BTreeMap::new();
        e.for_each_in_flight(&mut |node, port, f| {
            let side = Side::Out;
            let place = Place {
                node: node.0,
                port,
                side,
            };
            if let Some(p) = layout_at(&self.nodes, place, Seen::OnLine)
                .and_then(|layout| flow::in_frame(f.bytes(), layout))
            {
                *m.entry(p.id).or_default() += 1;
            }
        });
        for (_, _, h) in hosts(a, e) {
            h.for_each_pending(&mut |ip| {
                if let Some(p) = flow::read(ip) {
                    *m.entry(p.id).or_default() += 1;
                }
            });
        }
        m
    }
}

/// The ATOMIC hosts of part `a` in engine `e`: by address, with their
/// node (a router's, for a host inside one).
pub(crate) fn hosts<'e, F: Frame>(
    a: &AtomicPart,
    e: &'e Engine<F>,
) -> Vec<(Ipv4Addr, NodeId, &'e AtomicHost)> {
    let own = a
        .hosts
        .iter()
        .filter_map(|(_, addr, id)| Some((*addr, *id, e.node::<AtomicHost>(*id)?)));
    let in_routers = a.gateways.iter().filter_map(|(_, addr, id)| {
        let g = e.node::<Gateway>(*id)?;
        let h = g.lans().iter().find(|h| h.addr() == *addr)?;
        Some((*addr, *id, h))
    });
    own.chain(in_routers).collect()
}

/// The names of the ATOMIC nodes of part `a`, by id: as `AtomicPart::node_names`
/// gives them, and a router by its host on the LAN.
pub(crate) fn node_names(a: &AtomicPart) -> BTreeMap<u32, String> {
    a.node_names()
        .into_iter()
        .map(|(name, id)| (id.0, name))
        .chain(a.gateways.iter().map(|(name, _, id)| (id.0, name.clone())))
        .collect()
}

/// The books of every flow of `a` in engine `e` after a run, as far as the
/// engine sees them (`sent` 0 where the sender is elsewhere, `delivered`
/// where the receiver is), with `ledger` the drops its taps saw and
/// `names` naming its nodes; each with the flow's name and destination.
pub(crate) fn books<F: Frame>(
    a: &AtomicPart,
    e: &Engine<F>,
    ledger: &FrameLedger,
    names: &dyn Fn(u32) -> String,
) -> Vec<(FlowId, Ipv4Addr, FlowRow)> {
    let all = hosts(a, e);
    let host = |addr: Ipv4Addr| all.iter().find(|h| h.0 == addr).map(|h| h.2);
    // A host's own drops are of packets it never sent: named by the host
    // alone.
    let is_host = |n: u32| all.iter().any(|h| h.1 .0 == n);
    let name = |p: Place| {
        let node = names(p.node);
        match p.side {
            Side::In if is_host(p.node) => node.to_string(),
            Side::In => format!("{node}:{} in", p.port),
            Side::Out => format!("{node}:{} out", p.port),
        }
    };
    let flying = ledger.in_flight(a, e);
    let host_name = |addr: Ipv4Addr| {
        a.net
            .hosts
            .iter()
            .find(|h| h.1.addr == addr)
            .map_or_else(|| addr.to_string(), |h| h.0.clone())
    };
    flows(a)
        .into_iter()
        .map(|(id, from, dst)| {
            let rx = host(dst).map(|h| h.received(id)).unwrap_or_default();
            let losses: Vec<LossRow> = ledger
                .lost
                .get(&id)
                .into_iter()
                .flatten()
                .map(|((place, reason), n)| LossRow {
                    at: name(*place),
                    reason: reason.to_string(),
                    count: *n,
                })
                .collect();
            let sent = host(id.src).map_or(0, |h| h.sent(usize::from(id.flow)));
            let lost = losses.iter().map(|l| l.count).sum();
            let in_flight = flying.get(&id).copied().unwrap_or(0);
            let row = FlowRow {
                from,
                to: host_name(dst),
                flow: id.flow,
                sent,
                delivered: rx.delivered,
                corrupted: rx.corrupted,
                losses,
                lost,
                in_flight,
                unaccounted: Some(crate::books_ip::unaccounted(
                    sent,
                    &[rx.delivered, rx.corrupted, lost, in_flight],
                )),
            };
            (id, dst, row)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use aurora_atomic::mosaic::HOST_PORT;
    use aurora_atomic::wire::{Msg, Route};

    #[test]
    fn a_dropped_frame_is_charged_to_its_flow_in_every_layout() {
        let a = FlowId {
            src: Ipv4Addr::new(10, 5, 0, 1),
            flow: 1,
        };
        let stranger = FlowId { flow: 2, ..a };
        let dst = Ipv4Addr::new(10, 5, 0, 2);
        let nodes: FramePorts = [
            (1, FrameNode::Mosaic),
            (2, FrameNode::Host),
            (3, FrameNode::Router { first: 2 }),
        ]
        .into_iter()
        .collect();
        let mut l = FrameLedger::new(nodes, [a]);
        let ip = flow::packet(a, dst, 5, 64);
        let routed = Msg::Ip(ip.clone()).packet(&Route(vec![(1, 0)]));
        let mut payload = Vec::new();
        Msg::Ip(ip).emit(&mut payload);
        let at = |node, port, side| Place { node, port, side };
        // Whole packets from nodes and hosts, payloads in a node's port to
        // its host.
        l.dropped(at(1, 0, Side::In), "no_channel", &routed);
        l.dropped(at(1, 0, Side::Out), "tail_drop", &routed);
        let spent = [&[0, 0][..], &routed[2..]].concat();
        l.dropped(at(1, 2, Side::Out), "tail_drop", &spent);
        l.dropped(at(1, HOST_PORT, Side::Out), "tail_drop", &payload);
        l.dropped(at(2, 0, Side::In), "no_route", &routed);
        l.dropped(at(3, 2, Side::Out), "tail_drop", &routed);
        // Not charged: a cell port of a router, a node that takes no
        // frames, a flow the ledger was not made for, a frame laid out
        // otherwise than its place says.
        l.dropped(at(3, 1, Side::Out), "tail_drop", &routed);
        l.dropped(at(9, 0, Side::In), "tail_drop", &routed);
        let other = Msg::Ip(flow::packet(stranger, dst, 0, 64)).packet(&Route(vec![]));
        l.dropped(at(1, 0, Side::In), "no_channel", &other);
        l.dropped(at(1, HOST_PORT, Side::Out), "tail_drop", &routed);
        let by = &l.lost[&a];
        assert_eq!(by.values().sum::<u64>(), 6, "{by:?}");
        assert_eq!(by[&(at(1, 0, Side::Out), "tail_drop")], 1);
        assert_eq!(l.lost.len(), 1);
        assert!(l.takes(at(3, 2, Side::In)) && !l.takes(at(3, 1, Side::In)));
    }
}
