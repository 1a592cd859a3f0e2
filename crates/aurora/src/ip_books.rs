//! The books of PVCs between IP nodes (IP hosts, routers, TCP hosts), by
//! PDU, in each direction.
//!
//! IP packets carry no test tags, so these books count AAL5 end-of-message
//! cells instead: every PDU a sender finishes has exactly one, and that
//! cell either reaches the receiver (which then delivers the PDU intact or
//! fails it), is dropped somewhere on the way (the drop tap saw it, with
//! its place, reason and VC), or is still on its way (in a port or on a
//! line when the run ends, found by walking the engine's queues). So, per
//! direction, `sent = delivered + failed at the receiver + dropped on the
//! way + in flight`, each term measured on its own; the difference is
//! `unaccounted` and must be 0.
//!
//! A PDU whose end cell arrived but that lost a cell earlier (tail drop,
//! PPD) fails at the receiver: it is charged there as `reassembly_failed`,
//! the cells it lost being in the cell-drop table.

use std::collections::BTreeMap;

use aurora_engine::carry::Carries;
use aurora_engine::{Engine, NodeId};
use aurora_ip::node::IpNode;
use aurora_net::accounting::{is_user, repaired, vc_of, Ledger, Side};
use aurora_net::PortId;
use aurora_topo::{PvcHop, PvcInfo};
use aurora_wire::cell::VcId;
use aurora_wire::CellBytes;
use serde::Serialize;

use crate::run::LossRow;

/// Why a PDU whose end cell reached its receiver was not delivered.
pub const FAILED: &str = "reassembly_failed";

/// One direction of one PVC between IP nodes.
#[derive(Debug, Serialize)]
pub struct IpPvcRow {
    /// The PVC and the direction: "name a -> b".
    pub name: String,
    /// PDUs the sender's AAL5 finished.
    pub sent: u64,
    /// Delivered intact to the receiver's IP layer.
    pub delivered: u64,
    /// Lost: at the receiver (`reassembly_failed`) and on the way, by
    /// place and reason.
    pub losses: Vec<LossRow>,
    /// Their sum.
    pub lost: u64,
    /// End cells still in a port or on a line.
    pub in_flight: u64,
    /// `sent − delivered − lost − in_flight`: 0 when the books balance.
    pub unaccounted: i64,
}

/// End cells of user data in flight, by the sending end of their link
/// and the VC in their header.
pub(crate) fn ends_in_flight<F: Carries<CellBytes>>(
    view: &Engine<F>,
) -> BTreeMap<(u32, PortId, VcId), u64> {
    let mut m = BTreeMap::new();
    view.for_each_in_flight(&mut |n, p, f| {
        // Read as the ledger reads a dropped cell: a header's single-bit
        // error repaired first.
        if let Some(c) = f.peek().map(repaired) {
            if is_user(&c) && c[3] & 0x02 != 0 {
                *m.entry((n.0, p, vc_of(&c))).or_default() += 1;
            }
        }
    });
    m
}

/// What became of a circuit's end cells between its ends, hop by hop:
/// those the ledger saw dropped (by place and reason) and those still in
/// flight, with `name` naming nodes.
pub(crate) fn on_the_way<'a>(
    hops: &[PvcHop],
    flying: &BTreeMap<(u32, PortId, VcId), u64>,
    ledger: &Ledger,
    name: &dyn Fn(NodeId) -> &'a str,
) -> (Vec<LossRow>, u64) {
    let mut losses = Vec::new();
    let mut in_flight = 0;
    for h in hops {
        in_flight += flying
            .get(&(h.from.0 .0, h.from.1, h.vc))
            .copied()
            .unwrap_or(0);
        for ((loss, vc), n) in ledger.ends() {
            let at = match loss.place.side {
                Side::Out => h.from,
                Side::In => h.to,
            };
            if *vc == h.vc && (NodeId(loss.place.node), loss.place.port) == at {
                losses.push(LossRow {
                    at: format!(
                        "{}:{} {}",
                        name(at.0),
                        at.1,
                        if loss.place.side == Side::In {
                            "in"
                        } else {
                            "out"
                        }
                    ),
                    reason: loss.reason.to_string(),
                    count: *n,
                });
            }
        }
    }
    (losses, in_flight)
}

/// The books of every PVC whose two ends are IP nodes in this engine,
/// both directions, with `names` naming nodes for the places of losses.
pub fn report<F: Carries<CellBytes>>(
    pvcs: &[PvcInfo],
    view: &Engine<F>,
    ledger: &Ledger,
    names: &BTreeMap<u32, &str>,
) -> Vec<IpPvcRow> {
    let flying = ends_in_flight(view);
    let mut rows = Vec::new();
    for p in pvcs {
        let (Some(a), Some(b), Some(first), Some(last)) = (
            view.node::<IpNode>(p.from),
            view.node::<IpNode>(p.to),
            p.hops.first(),
            p.hops.last(),
        ) else {
            continue;
        };
        let back: Vec<PvcHop> = p
            .hops
            .iter()
            .rev()
            .map(|h| PvcHop {
                from: h.to,
                to: h.from,
                vc: h.vc,
            })
            .collect();
        let name = |x: NodeId| names.get(&x.0).copied().unwrap_or("?");
        for (tx, tx_end, rx, rx_end, hops) in [
            (
                a,
                (first.from.1, p.from_vc),
                b,
                (last.to, p.to_vc),
                &p.hops[..],
            ),
            (
                b,
                (last.to.1, p.to_vc),
                a,
                (first.from, p.from_vc),
                &back[..],
            ),
        ] {
            let (Some(s), Some(r)) = (
                tx.vc_counters(tx_end.0, tx_end.1),
                rx.vc_counters(rx_end.0 .1, rx_end.1),
            ) else {
                continue;
            };
            let mut losses = Vec::new();
            let failed = r.rx_eoms.saturating_sub(r.rx);
            if failed > 0 {
                losses.push(LossRow {
                    at: format!("{}:{} in", name(rx_end.0 .0), rx_end.0 .1),
                    reason: FAILED.into(),
                    count: failed,
                });
            }
            let (on_way, in_flight) = on_the_way(hops, &flying, ledger, &name);
            losses.extend(on_way);
            let lost: u64 = losses.iter().map(|l| l.count).sum();
            let unaccounted = s.tx as i64 - r.rx as i64 - lost as i64 - in_flight as i64;
            rows.push(IpPvcRow {
                name: format!(
                    "{} {} -> {}",
                    p.name,
                    name(hops[0].from.0),
                    name(hops[hops.len() - 1].to.0)
                ),
                sent: s.tx,
                delivered: r.rx,
                losses,
                lost,
                in_flight,
                unaccounted,
            });
        }
    }
    rows
}

/// The rows as text (nothing when there are none).
pub fn text(rows: &[IpPvcRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n{:<36} {:>8} {:>10} {:>8} {:>9} {:>11}\n",
        "IP PVC (PDUs)", "sent", "delivered", "lost", "in flight", "unaccounted"
    );
    for p in rows {
        s += &format!(
            "{:<36} {:>8} {:>10} {:>8} {:>9} {:>11}\n",
            p.name, p.sent, p.delivered, p.lost, p.in_flight, p.unaccounted
        );
        for l in &p.losses {
            s += &format!("{:<4}lost {} at {} ({})\n", "", l.count, l.at, l.reason);
        }
    }
    s
}

/// The IP PVCs whose books do not balance, in one sentence.
pub fn imbalance(rows: &[IpPvcRow]) -> Option<String> {
    let bad: Vec<String> = rows
        .iter()
        .filter(|p| p.unaccounted != 0)
        .map(|p| format!("{} ({} PDUs)", p.name, p.unaccounted))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "the report does not balance: PDUs with no outcome on IP PVC {}; this is a fault of \
             the testbed",
            bad.join(", ")
        )
    })
}
