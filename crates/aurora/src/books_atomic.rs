//! The books of ATOMIC flows in a run of several `aurora node` processes:
//! each process's part (in its report's `books.atomic`), and their join in
//! `aurora books`.
//!
//! Every flow packet names its flow and sequence number
//! (`aurora_atomic::flow`), so, unlike cells, a packet is known wherever it
//! is seen. Each process counts, per flow: what its hosts sent, delivered
//! and found damaged; the packets it dropped (place and reason) and those
//! still in its ports, on its lines or waiting for a route when it stopped
//! (`crate::atomic_books`); and those that crossed its edge: taken by a
//! link to another process, read from one, and left unread when it
//! stopped. The join adds them up:
//!
//! `sent = delivered + corrupted + dropped + in flight (+ unread) + lost
//! between processes`,
//!
//! where a cable between two processes loses `taken − read − left unread`
//! of a flow's packets. That is checked against what the cable's ends
//! counted lost between them: frames the sending end found too long for a
//! datagram, and frames it sent or failed to send (nothing listening; such
//! a frame still takes a sequence number) that the receiving end never
//! read (lost in transit, or sent after it stopped reading), or, if more,
//! those the receiving end counted lost.
//! The losses are placed at the receiving end up to that count, used once
//! across flows (an upper bound, as for traffic PVCs: the books say how
//! many packets were placed this way); what does not fit is
//! `unaccounted`. Work is per flow in the flow's own entries, so a large
//! report costs no more than its size.

use std::collections::BTreeMap;

use aurora_link::LinkDrop;
use aurora_net::accounting::{Place, Side};
use aurora_net::Frame;
use serde::{Deserialize, Serialize};

use crate::atomic_books::FrameLedger;
use crate::atomic_report::FlowRow;
use crate::books::At;
use crate::run::LossRow;

/// A flow: its sender, the sender's number for it, and its receiver.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FlowName {
    /// The sending host.
    pub from: String,
    /// The sender's number for the flow.
    pub flow: u16,
    /// The receiving host.
    pub to: String,
}

/// A count of one flow's packets.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FlowCount {
    /// The sending host.
    pub from: String,
    /// The sender's number for the flow.
    pub flow: u16,
    /// Packets.
    pub n: u64,
}

/// What a flow's receiver got.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FlowReceived {
    /// The sending host.
    pub from: String,
    /// The sender's number for the flow.
    pub flow: u16,
    /// Delivered intact.
    pub delivered: u64,
    /// Delivered damaged.
    pub corrupted: u64,
}

/// A flow's packets at one place, crossing the process's edge or left
/// unread there.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FlowAt {
    /// The sending host.
    pub from: String,
    /// The sender's number for the flow.
    pub flow: u16,
    /// Where.
    pub at: At,
    /// Packets.
    pub n: u64,
}

/// A flow's packets dropped at one place for one reason.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FlowDropped {
    /// The sending host.
    pub from: String,
    /// The sender's number for the flow.
    pub flow: u16,
    /// Where, as the report writes it (`node:port in`, or a host alone).
    pub at: String,
    /// Why.
    pub reason: String,
    /// Packets.
    pub n: u64,
}

/// One end of a cable to another process, as frames.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FrameLink {
    /// The node.
    pub node: String,
    /// Its port.
    pub port: u16,
    /// This end as the file names it (`node:East`).
    pub here: String,
    /// The far end as the file names it.
    pub peer: String,
    /// Frames sent to the far end.
    pub sent: u64,
    /// Frames the far end could not be sent (nothing listened there).
    #[serde(default)]
    pub unreachable: u64,
    /// Frames too long for a datagram, dropped on the way out.
    pub too_long: u64,
    /// Frames that arrived from the far end.
    pub arrived: u64,
    /// Frames the far end sent that never arrived.
    pub lost: u64,
    /// Frames the far end sent before this end listened (0 for a UDP
    /// cable, whose receiving end cannot tell: such frames count among
    /// those the sending end sent that this end never heard of).
    pub before: u64,
}

/// One process's part of the books of ATOMIC flows.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AtomicBooks {
    /// Every flow of the file.
    pub flows: Vec<FlowName>,
    /// Packets the process's hosts sent.
    pub sent: Vec<FlowCount>,
    /// What its hosts received.
    pub received: Vec<FlowReceived>,
    /// Packets it dropped.
    pub dropped: Vec<FlowDropped>,
    /// Packets in its ports and on its lines, or waiting for a route, when
    /// it stopped.
    pub in_flight: Vec<FlowCount>,
    /// Packets that crossed its edge: `out`, taken by a link to another
    /// process; `in`, read from one.
    pub crossed: Vec<FlowAt>,
    /// Packets left unread at its inputs when it stopped.
    pub unread: Vec<FlowAt>,
    /// Its cable ends to other processes.
    pub links: Vec<FrameLink>,
}

/// What a node process writes of the books of ATOMIC flows, with `ledger`
/// what its taps saw and `name` naming its nodes by their ids in it.
pub(crate) fn export<F: Frame>(
    a: &aurora_topo::AtomicPart,
    p: &aurora_topo::NodeProcess<F>,
    ledger: &FrameLedger,
    name: &dyn Fn(u32) -> String,
) -> AtomicBooks {
    let at = |pl: Place| At::of(pl, name);
    let mut b = AtomicBooks::default();
    let hosts = crate::atomic_books::hosts(a, &p.engine);
    let local = |addr| hosts.iter().any(|h| h.0 == addr);
    // The flows' names, by id, for the crossing counts below.
    let mut from_of = BTreeMap::new();
    for (id, dst, books) in crate::atomic_books::books(a, &p.engine, ledger, name) {
        let from = books.from.clone();
        from_of.insert(id, from.clone());
        b.flows.push(FlowName {
            from: from.clone(),
            flow: id.flow,
            to: books.to.clone(),
        });
        if local(id.src) {
            b.sent.push(FlowCount {
                from: from.clone(),
                flow: id.flow,
                n: books.sent,
            });
        }
        if local(dst) {
            b.received.push(FlowReceived {
                from: from.clone(),
                flow: id.flow,
                delivered: books.delivered,
                corrupted: books.corrupted,
            });
        }
        for l in books.losses {
            b.dropped.push(FlowDropped {
                from: from.clone(),
                flow: id.flow,
                at: l.at,
                reason: l.reason,
                n: l.count,
            });
        }
        if books.in_flight > 0 {
            b.in_flight.push(FlowCount {
                from: from.clone(),
                flow: id.flow,
                n: books.in_flight,
            });
        }
    }
    for (list, counts) in [
        (&mut b.crossed, &ledger.crossed),
        (&mut b.unread, &ledger.unread),
    ] {
        for ((id, place), n) in counts {
            list.push(FlowAt {
                from: from_of
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| id.src.to_string()),
                flow: id.flow,
                at: at(*place),
                n: *n,
            });
        }
    }
    let e = &p.engine;
    for port in &p.ports {
        let place = Place {
            node: port.node.0,
            port: port.port,
            side: Side::In,
        };
        if !ledger.takes(place) {
            continue;
        }
        let tx = e
            .external_output(port.node, port.port)
            .unwrap_or_default()
            .link;
        let rx = e.external_input(port.node, port.port).unwrap_or_default();
        b.links.push(FrameLink {
            node: name(port.node.0),
            port: port.port,
            here: port.here.clone(),
            peer: port.peer.clone(),
            sent: tx.cells_out,
            unreachable: tx.drops.get(LinkDrop::PeerUnreachable),
            too_long: tx.drops.get(LinkDrop::BadFrame),
            arrived: rx.cells_in,
            lost: rx.drops.get(LinkDrop::LostInTransit),
            before: rx.drops.get(LinkDrop::PeerUnreachable),
        });
    }
    b
}

/// The joined books of ATOMIC flows.
#[derive(Debug, Default)]
pub(crate) struct Joined {
    /// Per flow whose sender and receiver reported.
    pub rows: Vec<FlowRow>,
    /// Flows that could not be balanced, and why.
    pub unbalanced: Vec<String>,
    /// Per flow, packets placed by frames lost between processes.
    pub placed: Vec<(String, u64)>,
}

/// A flow's key: its sender and the sender's number for it.
type Key = (String, u16);
/// A place: node, port, side.
type Spot = (String, u16, String);

/// Joins the ATOMIC books of named reports.
pub(crate) fn join(parts: &[(&str, &AtomicBooks)]) -> Joined {
    let mut j = Joined::default();
    let mut flows: Vec<&FlowName> = Vec::new();
    let mut known: std::collections::BTreeSet<Key> = Default::default();
    let mut sent: BTreeMap<Key, u64> = BTreeMap::new();
    let mut received: BTreeMap<Key, &FlowReceived> = BTreeMap::new();
    let mut dropped: BTreeMap<(Key, String, String), u64> = BTreeMap::new();
    let mut flying: BTreeMap<Key, u64> = BTreeMap::new();
    let mut crossed: BTreeMap<(Key, Spot), u64> = BTreeMap::new();
    let mut unread: BTreeMap<(Key, Spot), u64> = BTreeMap::new();
    let mut links: BTreeMap<&str, &FrameLink> = BTreeMap::new();
    // Reports are untrusted: sums that cannot overflow.
    let add = |e: &mut u64, n: u64| *e = e.saturating_add(n);
    let spot = |a: &At| (a.node.clone(), a.port, a.side.clone());
    for (_, b) in parts {
        for f in &b.flows {
            if known.insert((f.from.clone(), f.flow)) {
                flows.push(f);
            }
        }
        for c in &b.sent {
            sent.entry((c.from.clone(), c.flow)).or_insert(c.n);
        }
        for r in &b.received {
            received.entry((r.from.clone(), r.flow)).or_insert(r);
        }
        for d in &b.dropped {
            let k = ((d.from.clone(), d.flow), d.at.clone(), d.reason.clone());
            add(dropped.entry(k).or_default(), d.n);
        }
        for c in &b.in_flight {
            add(flying.entry((c.from.clone(), c.flow)).or_default(), c.n);
        }
        for (list, sums) in [(&b.crossed, &mut crossed), (&b.unread, &mut unread)] {
            for c in list {
                let k = ((c.from.clone(), c.flow), spot(&c.at));
                add(sums.entry(k).or_default(), c.n);
            }
        }
        for l in &b.links {
            links.entry(l.here.as_str()).or_insert(l);
        }
    }
    // Each cable end by its node and port.
    let ends: BTreeMap<(&str, u16), &FrameLink> = links
        .values()
        .map(|l| ((l.node.as_str(), l.port), *l))
        .collect();
    // A flow's packets at each place, by side ("in", "out").
    let at_places = |m: &BTreeMap<(Key, Spot), u64>, k: &Key| {
        let from = (k.clone(), (String::new(), 0, String::new()));
        let mut by: BTreeMap<(String, u16, String), u64> = BTreeMap::new();
        for ((_, spot), n) in m.range(from..).take_while(|((key, _), _)| key == k) {
            by.insert(spot.clone(), *n);
        }
        by
    };
    // What is left, per receiving end, of what its cable counted lost
    // between the processes (drawn flow by flow, so it is used once).
    let mut budget: BTreeMap<&str, u64> = BTreeMap::new();
    let esc = aurora_topo::escape;
    for f in flows {
        let k = (f.from.clone(), f.flow);
        let name = format!("{} -> {} #{}", f.from, f.to, f.flow);
        let crossed_at = at_places(&crossed, &k);
        let unread_at = at_places(&unread, &k);
        // The cables this flow's packets were taken onto: sending end,
        // receiving end (if some report ran it), packets taken.
        let mut cables = Vec::new();
        let mut unheard = None;
        for ((node, port, side), n) in &crossed_at {
            let Some(e) = ends.get(&(node.as_str(), *port)).filter(|_| side == "out") else {
                continue;
            };
            match links.get(e.peer.as_str()) {
                Some(p) => cables.push((*e, *p, *n)),
                None => unheard = Some(e.peer.as_str()),
            }
        }
        let why = if let Some(peer) = unheard {
            Some(format!(
                "its packets left for {}, which no report ran",
                esc(peer)
            ))
        } else if !sent.contains_key(&k) {
            Some("no report counted what its sender sent".to_string())
        } else if !received.contains_key(&k) {
            Some("no report counted what its receiver received".to_string())
        } else {
            None
        };
        let (None, Some(&sent), Some(rx)) = (why.as_ref(), sent.get(&k), received.get(&k)) else {
            j.unbalanced.push(format!(
                "ATOMIC flow {}: {}",
                esc(&name),
                why.unwrap_or_default()
            ));
            continue;
        };
        let mut losses: Vec<LossRow> = dropped
            .range((k.clone(), String::new(), String::new())..)
            .take_while(|((key, _, _), _)| *key == k)
            .map(|((_, at, reason), n)| LossRow {
                at: at.clone(),
                reason: reason.clone(),
                count: *n,
            })
            .collect();
        // Packets left unread are on their way still.
        let in_flight = unread_at
            .values()
            .fold(flying.get(&k).copied().unwrap_or(0), |a, n| {
                a.saturating_add(*n)
            });
        let mut placed = 0u64;
        for (e, p, out) in cables {
            let here = |m: &BTreeMap<(String, u16, String), u64>| {
                m.get(&(p.node.clone(), p.port, "in".to_string()))
                    .copied()
                    .unwrap_or(0)
            };
            // What left and did not arrive (more arriving than left shows
            // as unaccounted).
            let gap = out.saturating_sub(here(&crossed_at).saturating_add(here(&unread_at)));
            if gap == 0 {
                continue;
            }
            let left_of = budget.entry(p.here.as_str()).or_insert_with(|| {
                // Frames sent or failed to send (each with its sequence
                // number) that the receiving end never read, or those it
                // counted lost; and those too long to be sent at all.
                let unheard = e
                    .sent
                    .saturating_add(e.unreachable)
                    .saturating_sub(p.arrived);
                e.too_long
                    .saturating_add(unheard.max(p.lost.saturating_add(p.before)))
            });
            let at = format!("{}:{} in", p.node, p.port);
            if let Some(row) = crate::books_ip::place_between(left_of, gap, at) {
                placed = placed.saturating_add(row.count);
                losses.push(row);
            }
        }
        let lost = losses.iter().fold(0u64, |a, l| a.saturating_add(l.count));
        let unaccounted =
            crate::books_ip::unaccounted(sent, &[rx.delivered, rx.corrupted, lost, in_flight]);
        if placed > 0 {
            j.placed.push((name, placed));
        }
        j.rows.push(FlowRow {
            from: f.from.clone(),
            to: f.to.clone(),
            flow: f.flow,
            sent,
            delivered: rx.delivered,
            corrupted: rx.corrupted,
            losses,
            lost,
            in_flight,
            unaccounted: Some(unaccounted),
        });
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::books::at;
    use crate::books_ip::BETWEEN;

    fn flow_at(node: &str, port: u16, side: &str, n: u64) -> FlowAt {
        FlowAt {
            from: "a".into(),
            flow: 0,
            at: at(node, port, side),
            n,
        }
    }

    fn link(node: &str, port: u16, here: &str, peer: &str, counts: [u64; 5]) -> FrameLink {
        let [sent, too_long, arrived, lost, before] = counts;
        FrameLink {
            node: node.into(),
            port,
            here: here.into(),
            peer: peer.into(),
            sent,
            unreachable: 0,
            too_long,
            arrived,
            lost,
            before,
        }
    }

    /// a -> mesh -> b, each its own process. a sends 100 packets; 90 cross
    /// to the mesh (a's cable lost 10, and counted them), which drops 5,
    /// holds 2 and passes 83 to b's cable, of which b reads 80 (delivering
    /// 79 intact and 1 damaged) and leaves 2 unread; so 1 packet left the
    /// mesh and never reached b, placed there up to `lost_at_b` frames
    /// (b's cable counted the rest of the 83 as arrived).
    fn three(lost_at_b: u64) -> Vec<(String, AtomicBooks)> {
        let flows = vec![FlowName {
            from: "a".into(),
            flow: 0,
            to: "b".into(),
        }];
        let a = AtomicBooks {
            flows: flows.clone(),
            sent: vec![FlowCount {
                from: "a".into(),
                flow: 0,
                n: 100,
            }],
            crossed: vec![flow_at("a-if", 1, "out", 100)],
            links: vec![link(
                "a-if",
                1,
                "a-if:West",
                "m.0.0:East",
                [100, 0, 0, 0, 0],
            )],
            ..AtomicBooks::default()
        };
        let m = AtomicBooks {
            flows: flows.clone(),
            dropped: vec![FlowDropped {
                from: "a".into(),
                flow: 0,
                at: "m.0.0:3 in".into(),
                reason: "no_channel".into(),
                n: 5,
            }],
            in_flight: vec![FlowCount {
                from: "a".into(),
                flow: 0,
                n: 2,
            }],
            crossed: vec![
                flow_at("m.0.0", 0, "in", 90),
                flow_at("m.1.0", 0, "out", 83),
            ],
            links: vec![
                link("m.0.0", 0, "m.0.0:East", "a-if:West", [0, 0, 90, 10, 0]),
                link("m.1.0", 0, "m.1.0:East", "b-if:West", [83, 0, 0, 0, 0]),
            ],
            ..AtomicBooks::default()
        };
        let b = AtomicBooks {
            flows,
            received: vec![FlowReceived {
                from: "a".into(),
                flow: 0,
                delivered: 79,
                corrupted: 1,
            }],
            crossed: vec![flow_at("b-if", 1, "in", 80)],
            unread: vec![flow_at("b-if", 1, "in", 2)],
            links: vec![link(
                "b-if",
                1,
                "b-if:West",
                "m.1.0:East",
                [0, 0, 83 - lost_at_b, lost_at_b, 0],
            )],
            ..AtomicBooks::default()
        };
        vec![("a".into(), a), ("m".into(), m), ("b".into(), b)]
    }

    fn joined(parts: &[(String, AtomicBooks)]) -> Joined {
        let refs: Vec<(&str, &AtomicBooks)> = parts.iter().map(|(n, b)| (n.as_str(), b)).collect();
        join(&refs)
    }

    #[test]
    fn three_processes_balance_hop_by_hop() {
        let j = joined(&three(1));
        assert!(j.unbalanced.is_empty(), "{:?}", j.unbalanced);
        let r = &j.rows[0];
        assert_eq!(
            (r.sent, r.delivered, r.corrupted, r.in_flight, r.lost),
            (100, 79, 1, 4, 16)
        );
        assert_eq!(r.unaccounted, Some(0));
        let mut between: Vec<(&str, u64)> = r
            .losses
            .iter()
            .filter(|l| l.reason == BETWEEN)
            .map(|l| (l.at.as_str(), l.count))
            .collect();
        between.sort();
        assert_eq!(between, [("b-if:1 in", 1), ("m.0.0:0 in", 10)]);
        assert_eq!(j.placed, [("a -> b #0".to_string(), 11)]);
    }

    /// Packets of row `r` placed at b's end of its cable.
    fn placed_at_b(r: &FlowRow) -> u64 {
        r.losses
            .iter()
            .filter(|l| l.at == "b-if:1 in")
            .map(|l| l.count)
            .sum()
    }

    #[test]
    fn only_the_gap_is_placed_when_the_cable_counted_more() {
        let mut parts = three(1);
        // b's end counted 3 lost, of which this flow's gap is 1 (80 read
        // and 2 left unread of the 83 taken).
        parts[2].1.links[0].lost = 3;
        let j = joined(&parts);
        let r = &j.rows[0];
        let at_b = placed_at_b(r);
        assert_eq!((at_b, r.unaccounted), (1, Some(0)));
    }

    #[test]
    fn frames_the_sending_end_could_not_send_are_placed() {
        let mut parts = three(0);
        // The mesh could not send 3 of the 83 (nothing listened at b for a
        // moment): b read 80 of the 80 sent, left none unread.
        parts[1].1.links[1].sent = 80;
        parts[1].1.links[1].unreachable = 3;
        parts[2].1.links[0].arrived = 80;
        parts[2].1.unread.clear();
        let j = joined(&parts);
        let r = &j.rows[0];
        let at_b = placed_at_b(r);
        assert_eq!((at_b, r.unaccounted), (3, Some(0)));
    }

    #[test]
    fn a_gap_beyond_what_the_cable_counted_is_unaccounted() {
        let j = joined(&three(0));
        assert_eq!(j.rows[0].unaccounted, Some(1));
    }

    #[test]
    fn a_missing_report_is_named() {
        let mut parts = three(1);
        parts.remove(2);
        let j = joined(&parts);
        assert!(j.rows.is_empty());
        assert_eq!(
            j.unbalanced,
            ["ATOMIC flow a -> b #0: its packets left for b-if:West, which no report ran"]
        );
        let mut parts = three(1);
        parts.remove(0);
        let j = joined(&parts);
        assert_eq!(
            j.unbalanced,
            ["ATOMIC flow a -> b #0: no report counted what its sender sent"]
        );
    }

    #[test]
    fn a_count_two_flows_share_is_used_once() {
        let mut parts = three(1);
        // A second flow whose packet is lost on the same cable.
        for (_, b) in &mut parts {
            let mut f = b.flows[0].clone();
            f.flow = 1;
            b.flows.push(f);
            let more: Vec<FlowAt> = b
                .crossed
                .iter()
                .filter(|c| c.at.node != "b-if")
                .map(|c| FlowAt {
                    flow: 1,
                    n: 1,
                    ..c.clone()
                })
                .collect();
            b.crossed.extend(more);
            for s in b.sent.clone() {
                b.sent.push(FlowCount { flow: 1, n: 1, ..s });
            }
            for r in b.received.clone() {
                b.received.push(FlowReceived {
                    flow: 1,
                    delivered: 0,
                    corrupted: 0,
                    ..r
                });
            }
        }
        let j = joined(&parts);
        // Flow 0 takes b's one lost frame first; flow 1's is then left
        // unplaced.
        assert_eq!(j.rows[0].unaccounted, Some(0));
        assert_eq!(j.rows[1].unaccounted, Some(1));
    }
}
