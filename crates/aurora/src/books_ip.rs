//! The books of PVCs between IP nodes in a run of several `aurora node`
//! processes: each process's part (in its report's `books.ip`), and their
//! join in `aurora books`.
//!
//! As under one engine (`crate::ip_books`), IP PDUs carry no tags, so the
//! books follow AAL5 end-of-message cells: each PDU a sender finishes has
//! one. Each process counts, per VC, the end cells it dropped (place and
//! reason), those still in its ports and lines when it stopped, and those
//! that crossed its edge: taken by the link to another process, read from
//! one, and left unread at its inputs when it stopped. The join walks each
//! direction of each IP PVC hop by hop:
//!
//! `sent = delivered + failed at the receiver + dropped + in flight + lost
//! between processes`,
//!
//! where in flight counts end cells in ports and lines and those left
//! unread in a ring or socket, and a hop between two processes loses
//! `taken out − read in − left unread − discarded for their header on
//! arrival` end cells. That difference is checked against the cells the
//! links counted lost between the two processes: those the receiving end
//! knows never arrived, came before it listened, or were discarded for
//! their header, and those sent after it stopped reading (the sending
//! end's count of cells sent, less all the receiving end heard of). It can
//! be no larger, and the books say how many PDUs were placed this way (an
//! upper bound, as for traffic PVCs: a loss no process recorded could hide
//! in it). What does not fit is `unaccounted`.
//!
//! IP PVCs carry traffic both ways (TCP's acknowledgements, ping's
//! answers), so some process always stops while a peer still sends to it:
//! those cells are the ones sent after it stopped reading.

use std::collections::BTreeMap;

use aurora_engine::carry::Carries;
use aurora_engine::NodeId;
use aurora_ip::node::IpNode;
use aurora_link::LinkDrop;
use aurora_net::accounting::{Ledger, Place, Side};
use aurora_wire::cell::VcId;
use aurora_wire::CellBytes;
use serde::{Deserialize, Serialize};

use crate::books::At;
use crate::ip_books::IpPvcRow;
use crate::run::LossRow;

/// Why a PDU whose end cell left one process never reached the next.
pub const BETWEEN: &str = aurora_net::accounting::BETWEEN_PROCESSES;

/// One hop of an IP PVC's direction, by node name.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hop {
    /// The node its cells leave.
    pub from: String,
    /// By this port.
    pub from_port: u16,
    /// The node they reach.
    pub to: String,
    /// By this port.
    pub to_port: u16,
    /// The VC in their header on the way: `vpi`.
    pub vpi: u16,
    /// And `vci`.
    pub vci: u16,
}

/// One direction of a PVC between IP nodes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Direction {
    /// "pvc a -> b".
    pub name: String,
    /// Its hops, from the sender.
    pub hops: Vec<Hop>,
}

/// End cells of one VC at one place.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ends {
    /// Where.
    pub at: At,
    /// The VC: `vpi`.
    pub vpi: u16,
    /// And `vci`.
    pub vci: u16,
    /// End cells.
    pub ends: u64,
}

/// End cells of one VC dropped at one place for one reason.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Dropped {
    /// Where.
    pub at: At,
    /// Why.
    pub reason: String,
    /// The VC: `vpi`.
    pub vpi: u16,
    /// And `vci`.
    pub vci: u16,
    /// End cells.
    pub ends: u64,
}

/// What a direction's receiver made of the PDUs whose end cells reached it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Received {
    /// The direction.
    pub name: String,
    /// Delivered intact to the IP layer.
    pub delivered: u64,
    /// Failed (a cell lost before the end cell).
    pub failed: u64,
}

/// A port's link to another process, as cells: what its sending half
/// sent, and what its receiving half heard of.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PortCells {
    /// The node.
    pub node: String,
    /// Its port.
    pub port: u16,
    /// Cells the link sent to the far end.
    pub sent: u64,
    /// Cells that arrived from the far end (read, or discarded for their
    /// header).
    pub arrived: u64,
    /// Cells the far end sent that never arrived (`lost_in_transit`).
    pub lost: u64,
    /// Cells the far end sent before this end listened
    /// (`peer_unreachable`).
    pub before: u64,
    /// Cells that arrived and were discarded for their header.
    pub hec: u64,
}

/// One process's part of the books of IP PVCs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IpBooks {
    /// Both directions of every PVC between IP nodes in the file.
    pub directions: Vec<Direction>,
    /// PDUs the process's IP nodes finished sending: `[direction, PDUs]`.
    pub sent: Vec<(String, u64)>,
    /// What its IP nodes received.
    pub received: Vec<Received>,
    /// End cells it dropped.
    pub dropped: Vec<Dropped>,
    /// End cells in its ports and on its lines when it stopped (side
    /// `out`: the port they left).
    pub in_flight: Vec<Ends>,
    /// End cells that crossed its edge: `out`, taken by a link to another
    /// process; `in`, read from one.
    pub crossed: Vec<Ends>,
    /// End cells left unread at its inputs when it stopped.
    pub unread: Vec<Ends>,
    /// Its ports linked to other processes.
    pub ports: Vec<PortCells>,
}

/// The VC of `cell` if it is the end cell of a user-data PDU (as the ledger
/// reads it: a header's single-bit error repaired first).
pub(crate) fn end_of_pdu(cell: &CellBytes) -> Option<VcId> {
    // Nearly every header is whole: read it in place, and copy the cell to
    // repair it only when its HEC says so.
    let h = [cell[0], cell[1], cell[2], cell[3], cell[4]];
    let fixed;
    let c = if aurora_wire::crc::hec_syndrome(&h) == 0 {
        cell
    } else {
        fixed = aurora_net::accounting::repaired(cell);
        &fixed
    };
    (aurora_net::accounting::is_user(c) && c[3] & 0x02 != 0)
        .then(|| aurora_net::accounting::vc_of(c))
}

/// End cells per place and VC, as the boundary tap and a drain count them:
/// at the places and VCs where IP PVCs cross the process's edge, and
/// nowhere else (so a peer's garbage cannot grow it).
pub(crate) type EndCounts = BTreeMap<(Place, VcId), u64>;

/// Counts the end cells of `frames` at `place` whose place and VC are in
/// `counts` already. Headers are read as they stand unless `noisy` (cells
/// leaving by a line with bit errors; cells read from another process
/// have had their headers checked by their link), and then as the ledger
/// reads them, a single-bit error repaired.
pub(crate) fn count_ends<F: Carries<CellBytes>>(
    counts: &mut EndCounts,
    place: Place,
    frames: &[F],
    noisy: bool,
) {
    for f in frames {
        let Some(c) = f.peek() else { continue };
        let vc = if noisy {
            end_of_pdu(c)
        } else {
            // User data ending a PDU (PTI 0b0x1: congestion bit either way).
            (c[3] & 0x0A == 0x02).then(|| aurora_net::accounting::vc_of(c))
        };
        if let Some(n) = vc.and_then(|vc| counts.get_mut(&(place, vc))) {
            *n += 1;
        }
    }
}

/// The places (process-local node ids) and VCs where the IP PVCs of
/// `info` cross the edge of process `p`, each at 0: leaving a node of the
/// process for one outside (side `Out`), or arriving from outside (`In`).
pub(crate) fn crossings<F: aurora_net::Frame>(
    p: &aurora_topo::NodeProcess<F>,
    info: &aurora_topo::BlueprintInfo,
) -> EndCounts {
    let local = |id: NodeId| p.members.iter().find(|m| m.id == id).map(|m| m.local);
    let is_ip = |id: NodeId| info.ip_nodes.iter().any(|(_, i)| *i == id);
    let mut c = EndCounts::new();
    for pvc in info.pvcs.iter().filter(|x| is_ip(x.from) && is_ip(x.to)) {
        for h in &pvc.hops {
            // Both directions cross where the hop does.
            for (a, b) in [(h.from, h.to), (h.to, h.from)] {
                let place = match (local(a.0), local(b.0)) {
                    (Some(l), None) => Place {
                        node: l.0,
                        port: a.1,
                        side: Side::Out,
                    },
                    (None, Some(l)) => Place {
                        node: l.0,
                        port: b.1,
                        side: Side::In,
                    },
                    _ => continue,
                };
                c.insert((place, h.vc), 0);
            }
        }
    }
    c
}

/// What a node process writes of the books of IP PVCs: `name` names its
/// nodes by their ids in the process, `global` those of the file.
pub(crate) fn export<F: Carries<CellBytes>>(
    p: &aurora_topo::NodeProcess<F>,
    info: &aurora_topo::BlueprintInfo,
    ledger: &Ledger,
    crossed: &EndCounts,
    unread: &EndCounts,
    name: &dyn Fn(u32) -> String,
) -> IpBooks {
    let gname = |id: NodeId| {
        info.ip_nodes
            .iter()
            .chain(&info.hosts)
            .map(|(n, i)| (n, *i))
            .chain(
                info.switches
                    .iter()
                    .chain(&info.routers)
                    .map(|(n, i, _)| (n, *i)),
            )
            .find(|(_, i)| *i == id)
            .map_or(format!("node {}", id.0), |(n, _)| n.clone())
    };
    let is_ip = |id: NodeId| info.ip_nodes.iter().any(|(_, i)| *i == id);
    let local = |id: NodeId| p.members.iter().find(|m| m.id == id).map(|m| m.local);
    let ip = |id: NodeId| local(id).and_then(|l| p.engine.node::<IpNode>(l));
    let at = |pl: Place| At::of(pl, name);
    let mut b = IpBooks::default();
    for pvc in &info.pvcs {
        let (Some(first), Some(last)) = (pvc.hops.first(), pvc.hops.last()) else {
            continue;
        };
        if !is_ip(pvc.from) || !is_ip(pvc.to) {
            continue;
        }
        let forth: Vec<Hop> = pvc
            .hops
            .iter()
            .map(|h| Hop {
                from: gname(h.from.0),
                from_port: h.from.1,
                to: gname(h.to.0),
                to_port: h.to.1,
                vpi: h.vc.vpi,
                vci: h.vc.vci,
            })
            .collect();
        let back: Vec<Hop> = forth
            .iter()
            .rev()
            .map(|h| Hop {
                from: h.to.clone(),
                from_port: h.to_port,
                to: h.from.clone(),
                to_port: h.from_port,
                vpi: h.vpi,
                vci: h.vci,
            })
            .collect();
        for (tx, tx_end, rx, rx_end, hops) in [
            (
                pvc.from,
                (first.from.1, pvc.from_vc),
                pvc.to,
                (last.to.1, pvc.to_vc),
                forth,
            ),
            (
                pvc.to,
                (last.to.1, pvc.to_vc),
                pvc.from,
                (first.from.1, pvc.from_vc),
                back,
            ),
        ] {
            let dir = format!("{} {} -> {}", pvc.name, gname(tx), gname(rx));
            if let Some(c) = ip(tx).and_then(|n| n.vc_counters(tx_end.0, tx_end.1)) {
                b.sent.push((dir.clone(), c.tx));
            }
            if let Some(c) = ip(rx).and_then(|n| n.vc_counters(rx_end.0, rx_end.1)) {
                b.received.push(Received {
                    name: dir.clone(),
                    delivered: c.rx,
                    failed: c.rx_eoms.saturating_sub(c.rx),
                });
            }
            b.directions.push(Direction { name: dir, hops });
        }
    }
    for ((loss, vc), n) in ledger.ends() {
        b.dropped.push(Dropped {
            at: at(loss.place),
            reason: loss.reason.into(),
            vpi: vc.vpi,
            vci: vc.vci,
            ends: *n,
        });
    }
    for ((node, port, vc), n) in crate::ip_books::ends_in_flight(&p.engine) {
        b.in_flight.push(Ends {
            at: at(Place {
                node,
                port,
                side: Side::Out,
            }),
            vpi: vc.vpi,
            vci: vc.vci,
            ends: n,
        });
    }
    for (list, counts) in [(&mut b.crossed, crossed), (&mut b.unread, unread)] {
        for ((place, vc), n) in counts.iter().filter(|(_, n)| **n > 0) {
            list.push(Ends {
                at: at(*place),
                vpi: vc.vpi,
                vci: vc.vci,
                ends: *n,
            });
        }
    }
    for port in &p.ports {
        let e = &p.engine;
        let tx = e
            .external_output(port.node, port.port)
            .unwrap_or_default()
            .link;
        let rx = e.external_input(port.node, port.port).unwrap_or_default();
        b.ports.push(PortCells {
            node: name(port.node.0),
            port: port.port,
            sent: tx.cells_out,
            arrived: rx.cells_in,
            lost: rx.drops.get(LinkDrop::LostInTransit),
            before: rx.drops.get(LinkDrop::PeerUnreachable),
            hec: rx.drops.get(LinkDrop::HecDiscarded),
        });
    }
    b
}

/// `sent` less its `outcomes`, in range whatever the (untrusted) counts.
pub(crate) fn unaccounted(sent: u64, outcomes: &[u64]) -> i64 {
    let rest = outcomes
        .iter()
        .fold(i128::from(sent), |a, n| a - i128::from(*n));
    rest.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Places up to `gap` losses between processes at receiving end `at`,
/// drawn from what is `left` of the count its link kept of them: the row,
/// if any.
pub(crate) fn place_between(left: &mut u64, gap: u64, at: String) -> Option<LossRow> {
    let n = gap.min(*left);
    *left -= n;
    (n > 0).then(|| LossRow {
        at,
        reason: BETWEEN.into(),
        count: n,
    })
}

/// Cells lost between processes at a receiving port, as the books' transit
/// records count them: `[node, port] -> cells`.
pub(crate) type TransitCells = BTreeMap<(String, u16), u64>;

/// The joined books of IP PVCs.
pub(crate) struct Joined {
    /// Per direction whose sender and receiver reported.
    pub rows: Vec<IpPvcRow>,
    /// Directions that could not be balanced, and why.
    pub unbalanced: Vec<String>,
    /// Per direction, PDUs placed by cells lost between processes.
    pub placed: Vec<(String, u64)>,
}

/// Joins the IP books of named reports; `ran` says which nodes some report
/// ran, `transit` what the traffic PVCs left of each receiving port's count
/// of cells lost between processes (lost in transit and sent before it
/// listened).
pub(crate) fn join(
    parts: &[(&str, &IpBooks)],
    ran: &dyn Fn(&str) -> bool,
    transit: &TransitCells,
) -> Joined {
    let mut j = Joined {
        rows: Vec::new(),
        unbalanced: Vec::new(),
        placed: Vec::new(),
    };
    // Sums over every report, by place (and reason) and VC; each
    // direction, sender's and receiver's counts by name (the first report
    // that has one); every direction any report knows, in order.
    type Key = (String, u16, String, u16, u16);
    let mut sums: [BTreeMap<Key, u64>; 3] = Default::default();
    let mut dropped: BTreeMap<(Key, String), u64> = BTreeMap::new();
    let mut ports: BTreeMap<(String, u16), PortCells> = BTreeMap::new();
    let mut sent: BTreeMap<&str, u64> = BTreeMap::new();
    let mut received: BTreeMap<&str, &Received> = BTreeMap::new();
    let mut directions: Vec<&Direction> = Vec::new();
    let mut known: std::collections::BTreeSet<&str> = Default::default();
    let key = |e: &At, vpi, vci| (e.node.clone(), e.port, e.side.clone(), vpi, vci);
    for (_, b) in parts {
        for (i, list) in [&b.in_flight, &b.crossed, &b.unread]
            .into_iter()
            .enumerate()
        {
            for e in list {
                let s = sums[i].entry(key(&e.at, e.vpi, e.vci)).or_default();
                *s = s.saturating_add(e.ends);
            }
        }
        for d in &b.dropped {
            let s = dropped
                .entry((key(&d.at, d.vpi, d.vci), d.reason.clone()))
                .or_default();
            *s = s.saturating_add(d.ends);
        }
        for c in &b.ports {
            ports
                .entry((c.node.clone(), c.port))
                .or_insert_with(|| c.clone());
        }
        for (n, k) in &b.sent {
            sent.entry(n).or_insert(*k);
        }
        for r in &b.received {
            received.entry(&r.name).or_insert(r);
        }
        for d in &b.directions {
            if known.insert(&d.name) {
                directions.push(d);
            }
        }
    }
    let [flying, crossed, unread] = &sums;
    // What is left, per receiving port, of the cells its link counted lost
    // between the processes (drawn by one direction after another, so a
    // count two directions share is used once).
    let mut budget: BTreeMap<(String, u16), u64> = BTreeMap::new();
    let get = |m: &BTreeMap<Key, u64>, node: &str, port: u16, side: &str, h: &Hop| {
        m.get(&(node.to_string(), port, side.to_string(), h.vpi, h.vci))
            .copied()
            .unwrap_or(0)
    };
    let esc = aurora_topo::escape;
    for d in directions {
        let mut missing: Vec<&str> = d
            .hops
            .iter()
            .flat_map(|h| [h.from.as_str(), h.to.as_str()])
            .filter(|n| !ran(n))
            .collect();
        missing.dedup();
        let why = if !missing.is_empty() {
            Some(format!("no report ran {}", esc(&missing.join(", "))))
        } else if d.hops.is_empty() {
            Some("its path has no hops".to_string())
        } else if !sent.contains_key(d.name.as_str()) {
            Some("no report counted what its sender sent".to_string())
        } else if !received.contains_key(d.name.as_str()) {
            Some("no report counted what its receiver received".to_string())
        } else {
            None
        };
        let (None, Some(&sent), Some(rx), Some(last_hop)) = (
            why.as_ref(),
            sent.get(d.name.as_str()),
            received.get(d.name.as_str()),
            d.hops.last(),
        ) else {
            j.unbalanced.push(format!(
                "IP PVC {}: {}",
                esc(&d.name),
                why.unwrap_or_default()
            ));
            continue;
        };
        let mut losses = Vec::new();
        if rx.failed > 0 {
            losses.push(LossRow {
                at: format!("{}:{} in", last_hop.to, last_hop.to_port),
                reason: crate::ip_books::FAILED.into(),
                count: rx.failed,
            });
        }
        let mut in_flight = 0u64;
        let mut placed = 0u64;
        for h in &d.hops {
            for (node, port, side) in [(&h.from, h.from_port, "out"), (&h.to, h.to_port, "in")] {
                for ((k, reason), n) in dropped.range(
                    (
                        (node.clone(), port, side.to_string(), h.vpi, h.vci),
                        String::new(),
                    )..,
                ) {
                    if k.0 != *node || k.1 != port || k.2 != side || (k.3, k.4) != (h.vpi, h.vci) {
                        break;
                    }
                    losses.push(LossRow {
                        at: format!("{node}:{port} {side}"),
                        reason: reason.clone(),
                        count: *n,
                    });
                }
            }
            in_flight = in_flight.saturating_add(get(flying, &h.from, h.from_port, "out", h));
            let out = get(crossed, &h.from, h.from_port, "out", h);
            let came = get(crossed, &h.to, h.to_port, "in", h);
            let left = get(unread, &h.to, h.to_port, "in", h);
            if out == 0 && came == 0 && left == 0 {
                continue;
            }
            in_flight = in_flight.saturating_add(left);
            let discarded = dropped
                .get(&(
                    (h.to.clone(), h.to_port, "in".to_string(), h.vpi, h.vci),
                    aurora_engine::io::HEC_UNCORRECTABLE.to_string(),
                ))
                .copied()
                .unwrap_or(0);
            // What left and did not arrive (more arriving than left shows
            // as unaccounted).
            let gap = out.saturating_sub(came.saturating_add(left).saturating_add(discarded));
            let left_of = budget.entry((h.to.clone(), h.to_port)).or_insert_with(|| {
                let lost = transit
                    .get(&(h.to.clone(), h.to_port))
                    .copied()
                    .unwrap_or(0);
                let (rx, tx) = (
                    ports.get(&(h.to.clone(), h.to_port)),
                    ports.get(&(h.from.clone(), h.from_port)),
                );
                let hec = rx.map_or(0, |r| r.hec);
                // Sent after the receiving end last heard from the link.
                let after = match (rx, tx) {
                    (Some(r), Some(t)) => t
                        .sent
                        .saturating_sub(r.arrived.saturating_add(r.lost).saturating_add(r.before)),
                    _ => 0,
                };
                lost.saturating_add(hec).saturating_add(after)
            });
            let at = format!("{}:{} in", h.to, h.to_port);
            if let Some(row) = place_between(left_of, gap, at) {
                placed = placed.saturating_add(row.count);
                losses.push(row);
            }
        }
        // Reports are untrusted: sums that cannot overflow.
        let lost = losses.iter().fold(0u64, |a, l| a.saturating_add(l.count));
        let unaccounted = unaccounted(sent, &[rx.delivered, lost, in_flight]);
        if placed > 0 {
            j.placed.push((d.name.clone(), placed));
        }
        j.rows.push(IpPvcRow {
            name: d.name.clone(),
            sent,
            delivered: rx.delivered,
            losses,
            lost,
            in_flight,
            unaccounted,
        });
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::books::at;

    fn ends(node: &str, port: u16, side: &str, vci: u16, n: u64) -> Ends {
        Ends {
            at: at(node, port, side),
            vpi: 0,
            vci,
            ends: n,
        }
    }

    /// h1 -> sw -> h2, each its own process, VC 0.40 then 0.41: h1 sends
    /// 100 PDUs; 90 cross to sw, of which sw drops 5 and holds 1, passes
    /// 84 to h2's link, of which h2 reads 80 (2 failing there) and leaves
    /// 3 unread; so 10 PDUs left h1 and never reached sw, and 1 left sw and
    /// never reached h2.
    fn three(lost_at_sw: u64, lost_at_h2: u64) -> (Vec<(String, IpBooks)>, TransitCells) {
        let dir = Direction {
            name: "p h1 -> h2".into(),
            hops: vec![
                Hop {
                    from: "h1".into(),
                    from_port: 0,
                    to: "sw".into(),
                    to_port: 0,
                    vpi: 0,
                    vci: 40,
                },
                Hop {
                    from: "sw".into(),
                    from_port: 1,
                    to: "h2".into(),
                    to_port: 0,
                    vpi: 0,
                    vci: 41,
                },
            ],
        };
        let common = || IpBooks {
            directions: vec![dir.clone()],
            ..IpBooks::default()
        };
        let mut h1 = common();
        h1.sent = vec![("p h1 -> h2".into(), 100)];
        h1.crossed = vec![ends("h1", 0, "out", 40, 100)];
        let mut sw = common();
        sw.crossed = vec![ends("sw", 0, "in", 40, 90), ends("sw", 1, "out", 41, 84)];
        sw.dropped = vec![Dropped {
            at: at("sw", 1, "out"),
            reason: "tail_drop".into(),
            vpi: 0,
            vci: 41,
            ends: 5,
        }];
        sw.in_flight = vec![ends("sw", 1, "out", 41, 1)];
        let mut h2 = common();
        h2.crossed = vec![ends("h2", 0, "in", 41, 80)];
        h2.unread = vec![ends("h2", 0, "in", 41, 3)];
        h2.received = vec![Received {
            name: "p h1 -> h2".into(),
            delivered: 78,
            failed: 2,
        }];
        let mut transit = TransitCells::new();
        transit.insert(("sw".into(), 0), lost_at_sw);
        transit.insert(("h2".into(), 0), lost_at_h2);
        (
            vec![("h1".into(), h1), ("sw".into(), sw), ("h2".into(), h2)],
            transit,
        )
    }

    fn joined(parts: &[(String, IpBooks)], transit: &TransitCells) -> Joined {
        let p: Vec<(&str, &IpBooks)> = parts.iter().map(|(n, b)| (n.as_str(), b)).collect();
        join(&p, &|n| parts.iter().any(|(m, _)| m == n), transit)
    }

    #[test]
    fn a_direction_balances_hop_by_hop_across_processes() {
        let (parts, transit) = three(25, 1);
        let j = joined(&parts, &transit);
        assert!(j.unbalanced.is_empty(), "{:?}", j.unbalanced);
        let r = &j.rows[0];
        assert_eq!((r.sent, r.delivered, r.in_flight), (100, 78, 4));
        let loss = |at: &str, why: &str| {
            r.losses
                .iter()
                .find(|l| l.at == at && l.reason == why)
                .map(|l| l.count)
        };
        assert_eq!(loss("h2:0 in", crate::ip_books::FAILED), Some(2));
        assert_eq!(loss("sw:1 out", "tail_drop"), Some(5));
        assert_eq!(loss("sw:0 in", BETWEEN), Some(10));
        assert_eq!(loss("h2:0 in", BETWEEN), Some(1));
        assert_eq!((r.lost, r.unaccounted), (18, 0));
        assert_eq!(j.placed, vec![("p h1 -> h2".to_string(), 11)]);
    }

    #[test]
    fn a_gap_larger_than_the_cells_counted_lost_is_unaccounted() {
        // sw counted only 4 cells lost on its way in: 6 PDUs unexplained.
        let (parts, transit) = three(4, 1);
        let r = &joined(&parts, &transit).rows[0];
        assert_eq!(r.unaccounted, 6);
        // Cells h1 sent after sw last heard from the link count too: h1
        // sent 100 cells, sw heard of 94 (read, or counted lost).
        let (mut parts, transit) = three(4, 1);
        let port = |node: &str, sent, arrived, lost| PortCells {
            node: node.into(),
            port: 0,
            sent,
            arrived,
            lost,
            before: 0,
            hec: 0,
        };
        parts[0].1.ports = vec![port("h1", 100, 0, 0)];
        parts[1].1.ports = vec![port("sw", 0, 90, 4)];
        assert_eq!(joined(&parts, &transit).rows[0].unaccounted, 0);
        parts[1].1.ports = vec![port("sw", 0, 92, 4)];
        assert_eq!(joined(&parts, &transit).rows[0].unaccounted, 2);
    }

    #[test]
    fn a_count_two_directions_share_is_used_once() {
        let (mut parts, transit) = three(10, 1);
        // A second direction over the same ports, with a gap of its own.
        for (_, b) in &mut parts {
            let mut d = b.directions[0].clone();
            d.name = "q h1 -> h2".into();
            for h in &mut d.hops {
                h.vci += 100;
            }
            b.directions.push(d);
        }
        parts[0].1.sent.push(("q h1 -> h2".into(), 3));
        parts[0].1.crossed.push(ends("h1", 0, "out", 140, 3));
        parts[2].1.received.push(Received {
            name: "q h1 -> h2".into(),
            delivered: 0,
            failed: 0,
        });
        let j = joined(&parts, &transit);
        assert_eq!(j.rows[0].unaccounted, 0);
        // The first took all 10 cells; the second's 3 are unexplained.
        assert_eq!(j.rows[1].unaccounted, 3, "{:?}", j.rows[1]);
    }

    #[test]
    fn a_missing_report_or_count_is_named() {
        let (parts, transit) = three(25, 1);
        let j = joined(&parts[..2], &transit);
        assert!(j.rows.is_empty());
        assert_eq!(j.unbalanced, vec!["IP PVC p h1 -> h2: no report ran h2"]);
        let (mut parts, transit) = three(25, 1);
        parts[0].1.sent.clear();
        let j = joined(&parts, &transit);
        assert_eq!(
            j.unbalanced,
            vec!["IP PVC p h1 -> h2: no report counted what its sender sent"]
        );
    }

    proptest::proptest! {
        /// Whatever numbers the reports hold, the join answers without a
        /// panic.
        #[test]
        fn any_numbers_are_answered(v in proptest::collection::vec(proptest::prelude::any::<u64>(), 12)) {
            let (mut parts, mut transit) = three(v[0], v[1]);
            parts[0].1.sent[0].1 = v[2];
            parts[0].1.crossed[0].ends = v[3];
            parts[1].1.crossed[0].ends = v[4];
            parts[1].1.crossed[1].ends = v[5];
            parts[1].1.dropped[0].ends = v[6];
            parts[1].1.in_flight[0].ends = v[7];
            parts[2].1.crossed[0].ends = v[8];
            parts[2].1.unread[0].ends = v[9];
            parts[2].1.received[0].delivered = v[10];
            parts[2].1.received[0].failed = v[11];
            parts[0].1.ports = vec![PortCells { node: "h1".into(), port: 0, sent: v[0], arrived: v[1], lost: v[2], before: v[3], hec: v[4] }];
            parts[1].1.ports = vec![PortCells { node: "sw".into(), port: 0, sent: v[5], arrived: v[6], lost: v[7], before: v[8], hec: v[9] }];
            transit.insert(("h2".into(), 0), u64::MAX);
            let j = joined(&parts, &transit);
            let _ = crate::ip_books::text(&j.rows);
        }
    }

    #[test]
    fn end_cells_are_told_from_the_rest() {
        use aurora_wire::cell::{Header, VcId};
        let mut c = [0u8; 53];
        Header::data(VcId::new(1, 77)).emit(&mut c).unwrap();
        assert_eq!(end_of_pdu(&c), None);
        // One bit flipped in the header: repaired as the ledger repairs
        // it, so still not an end cell.
        c[3] |= 0x02;
        assert_eq!(end_of_pdu(&c), None);
        let mut e = [0u8; 53];
        let mut h = Header::data(VcId::new(1, 77));
        h.pti = aurora_wire::cell::Pti::DATA_END;
        h.emit(&mut e).unwrap();
        assert_eq!(end_of_pdu(&e), Some(VcId::new(1, 77)));
        // And an end cell whose end bit was flipped off is one still.
        let mut off = e;
        off[3] &= !0x02;
        assert_eq!(end_of_pdu(&off), Some(VcId::new(1, 77)));
        let place = Place {
            node: 3,
            port: 1,
            side: Side::Out,
        };
        // Counted only where an IP PVC crosses, on its VC.
        let mut counts = EndCounts::new();
        count_ends(&mut counts, place, &[c, e, e], true);
        assert!(counts.is_empty());
        counts.insert((place, VcId::new(1, 77)), 0);
        count_ends(&mut counts, place, &[c, e, e, off], true);
        assert_eq!(counts.get(&(place, VcId::new(1, 77))), Some(&3));
        assert_eq!(counts.len(), 1);
        // Headers known whole are read as they stand.
        count_ends(&mut counts, place, &[e, off], false);
        assert_eq!(counts.get(&(place, VcId::new(1, 77))), Some(&4));
    }
}
