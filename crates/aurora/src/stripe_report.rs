//! The report of striped VCs (`[[stripe]]`): per logical VC, its books by
//! unit, which must balance, each stripe's load and the cells lost on its
//! way, the PDUs delivered and the goodput, RFC 4737 reordering,
//! resequencing delay and buffer occupancy.
//!
//! **The books.** Per logical VC, every unit the sender striped is
//! delivered (its bytes right, or `corrupted`), given up by the receiver
//! for a named reason (`lost`), still held in its resequencer (`held`), or
//! not yet seen by it (`unseen`: on its way, or lost on the way and not yet
//! noticed; without synchronisation the receiver never notices a lost
//! unit, so there `unseen` keeps what the stripes lost, which their cell
//! books name). `unaccounted` is what is left over: units that reached
//! the receiver and are neither delivered, given up nor held, or more
//! units given up than never arrived. Per stripe, every cell sent (data
//! and markers) arrived, was dropped on the way (by place and reason, from
//! the driver's ledger), or is still on its way; fewer than none on its way
//! is unaccounted too. With synchronisation on, a unit delivered out of
//! order is a fault as well. A run with any of these fails.

use aurora_engine::Engine;
use aurora_net::accounting::{Ledger, Place, Side};
use aurora_stripe::{Destriper, Histogram, Relay, Reordering, StripeHost, Striper, SyncMode};
use aurora_time::Instant;
use aurora_topo::stripe::{StripeInfo, Via};
use aurora_topo::PvcInfo;
use aurora_wire::cell::VcId;
use serde::Serialize;

use crate::run::LossRow;

/// The striping part of a run's report.
#[derive(Debug, Serialize)]
pub struct StripeReport {
    /// Per `[[stripe]]` entry, in file order.
    pub vcs: Vec<StripeRow>,
}

/// One logical VC.
#[derive(Debug, Serialize)]
pub struct StripeRow {
    /// The entry's name.
    pub name: String,
    /// The sending host.
    pub from: String,
    /// The receiving host.
    pub to: String,
    /// `cell`, `pdu` or `ip`.
    pub unit: String,
    /// `none`, `sequence` or `marker`.
    pub sync: String,
    /// True for a greedy flow (as fast as the stripes take it).
    pub greedy: bool,
    /// The books by unit.
    pub units: UnitBooks,
    /// Per stripe.
    pub stripes: Vec<StripeLoad>,
    /// Cells and PDUs the receiver did not take as units, by reason
    /// (`bad_cell`, `not_data`, `bad_marker`, `reassembly`, `duplicate`,
    /// `stale`).
    pub rejected: Vec<(String, u64)>,
    /// No sync: turns of a stripe the receiver passed over.
    pub skipped_turns: u64,
    /// The application's PDUs.
    pub pdus: PduRow,
    /// RFC 4737 reordering of the units as delivered (by the stamp each
    /// carries).
    pub delivered_order: ReorderRow,
    /// Sequence sync: RFC 4737 reordering of the units as they reached the
    /// resequencer (what skew and loss did before it put them in order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_order: Option<ReorderRow>,
    /// Resequencing delay of the units delivered, microseconds.
    pub delay_us: DelayRow,
    /// Units held in the resequencer: the most at once.
    pub held_max: u64,
    /// Units held in the resequencer, time-weighted mean over the run.
    pub held_mean: f64,
    /// Bytes held in the resequencer: the most at once.
    pub held_bytes_max: u64,
    /// Bytes in partial reassemblies at the end (AAL5 per stripe for PDU
    /// units, the logical PDU in progress for cell units).
    pub reassembling_bytes: u64,
    /// A `[[splitter]]` VC: the wide VC's cells at the splitting relay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_cells: Option<SplitCells>,
}

/// The cells of a logical VC arriving at a splitting relay: `arrived =
/// striped + dropped + reassembling + unaccounted`.
#[derive(Debug, Default, Serialize)]
pub struct SplitCells {
    /// Cells that arrived on the wide VC.
    pub arrived: u64,
    /// Cells striped (as cell units, or in the PDUs striped).
    pub striped: u64,
    /// Cells dropped by the relay, per reason.
    pub dropped: Vec<(String, u64)>,
    /// Cells of a PDU still being reassembled.
    pub reassembling: u64,
    /// What the relay's books cannot place; anything but 0 fails the run.
    pub unaccounted: i64,
}

/// The units of one logical VC: `sent = delivered + corrupted + lost +
/// held + unseen + unaccounted`.
#[derive(Debug, Default, Serialize)]
pub struct UnitBooks {
    /// Units the sender striped.
    pub sent: u64,
    /// Delivered with the right bytes (cells: with a readable stamp).
    pub delivered: u64,
    /// Delivered with the wrong bytes.
    pub corrupted: u64,
    /// Given up by the receiver, all reasons.
    pub lost: u64,
    /// Given up by the receiver, per reason (`timeout`, `buffer_full`,
    /// `missing`, `unverified`, `out_of_step`, `overtaken`), those that
    /// arrived and those that never did together.
    pub losses: Vec<(String, u64)>,
    /// Held in the resequencer at the end.
    pub held: u64,
    /// Not seen by the receiver: on their way, or lost on the way unnoticed.
    pub unseen: u64,
    /// What the books cannot place; anything but 0 fails the run.
    pub unaccounted: i64,
    /// Units delivered out of order or twice (with sync on, a fault).
    pub misordered: u64,
}

/// One stripe.
#[derive(Debug, Serialize)]
pub struct StripeLoad {
    /// Its member PVC.
    pub pvc: String,
    /// Units the sender put on it.
    pub units: u64,
    /// Its share of the logical VC's bytes.
    pub share: f64,
    /// Bytes the balancer charged it.
    pub bytes: u64,
    /// Data cells sent on it.
    pub cells: u64,
    /// Marker cells sent on it.
    pub markers: u64,
    /// Cells that reached the receiver on it.
    pub arrived: u64,
    /// Units that reached the resequencer on it.
    pub units_arrived: u64,
    /// Good markers the receiver took on it.
    pub markers_taken: u64,
    /// Times the receiver found it out of step and a marker put it back.
    pub resyncs: u64,
    /// Cells dropped on its way, by place and reason.
    pub dropped: Vec<LossRow>,
    /// Cells still on their way (sent − arrived − dropped).
    pub on_the_way: i64,
}

/// The application's PDUs.
#[derive(Debug, Default, Serialize)]
pub struct PduRow {
    /// PDUs the sender made.
    pub sent: u64,
    /// Delivered intact and in order.
    pub delivered: u64,
    /// Given up by the receiver's check, per fault (`crc`, `length`,
    /// `oversize`, `content`); each may hold pieces of several PDUs.
    pub faults: Vec<(String, u64)>,
    /// PDU numbers skipped between PDUs delivered.
    pub missing: u64,
    /// Intact PDUs that came after a later one.
    pub misordered: u64,
    /// Goodput: SDU bytes delivered intact, Mb/s over the sending time.
    pub mbps: f64,
    /// SDU bytes offered, Mb/s over the sending time.
    pub offered_mbps: f64,
}

/// RFC 4737 figures.
#[derive(Debug, Default, Serialize)]
pub struct ReorderRow {
    /// Units observed.
    pub units: u64,
    /// Reordered units.
    pub reordered: u64,
    /// Reordered over all.
    pub ratio: f64,
    /// Reordering extent: largest.
    pub extent_max: u64,
    /// Reordering extent: median.
    pub extent_p50: u64,
    /// Reordered units whose extent reached past the kept history.
    pub extent_beyond: u64,
    /// n-reordered units for n = 1, 2, 3.
    pub n_reordered: [u64; 3],
}

/// A delay distribution, microseconds.
#[derive(Debug, Default, Serialize)]
pub struct DelayRow {
    /// Units measured.
    pub count: u64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

fn reorder_row(r: &Reordering) -> ReorderRow {
    ReorderRow {
        units: r.received(),
        reordered: r.reordered(),
        ratio: r.reordered_ratio(),
        extent_max: r.extent().max(),
        extent_p50: r.extent().quantile(0.5),
        extent_beyond: r.extent_beyond_history(),
        n_reordered: [r.n_reordered(1), r.n_reordered(2), r.n_reordered(3)],
    }
}

fn delay_row(h: &Histogram) -> DelayRow {
    let us = |ns: u64| ns as f64 / 1e3;
    DelayRow {
        count: h.count(),
        p50: us(h.quantile(0.5)),
        p99: us(h.quantile(0.99)),
        max: us(h.max()),
        mean: h.mean() / 1e3,
    }
}

/// Cells dropped along PVC `p` (at every hop's sending port and arrival),
/// per place and reason, named by `name`.
fn dropped_along(p: &PvcInfo, ledger: &Ledger, name: &dyn Fn(Place) -> String) -> Vec<LossRow> {
    let places = p.hops.iter().flat_map(|h| {
        [(h.from.0, h.from.1, Side::Out), (h.to.0, h.to.1, Side::In)].map(|(node, port, side)| {
            (
                Place {
                    node: node.0,
                    port,
                    side,
                },
                h.vc,
            )
        })
    });
    dropped_at(places, ledger, name)
}

/// Cells of each VC dropped at each place, per place and reason, named by
/// `name`.
fn dropped_at(
    places: impl Iterator<Item = (Place, VcId)>,
    ledger: &Ledger,
    name: &dyn Fn(Place) -> String,
) -> Vec<LossRow> {
    let mut rows = Vec::new();
    for (place, vc) in places {
        for (reason, count) in ledger.dropped_on(place, vc) {
            rows.push(LossRow {
                at: name(place),
                reason: reason.to_string(),
                count,
            });
        }
    }
    rows
}

/// The books of one logical VC from its two ends.
fn books(tx: &Striper, rx: &Destriper, corrupted: u64, misordered: u64) -> UnitBooks {
    let t = tx.stats();
    let r = rx.stats();
    let sent = t.units;
    let given_up = r.discarded.total() + r.gaps.total();
    let held = rx.held() as u64;
    let mut losses: Vec<(String, u64)> = aurora_stripe::Loss::ALL
        .iter()
        .map(|&l| (l.name().to_string(), r.discarded.get(l) + r.gaps.get(l)))
        .filter(|(_, n)| *n > 0)
        .collect();
    losses.sort();
    // Units that never reached the resequencer, less those the receiver
    // gave up without their arriving: what it has not seen.
    let unseen = i128::from(sent) - i128::from(r.arrived) - i128::from(r.gaps.total());
    let delivered = r.delivered.saturating_sub(corrupted);
    let placed = i128::from(delivered)
        + i128::from(corrupted)
        + i128::from(given_up)
        + i128::from(held)
        + unseen.max(0);
    UnitBooks {
        sent,
        delivered,
        corrupted,
        lost: given_up,
        losses,
        held,
        unseen: unseen.max(0) as u64,
        unaccounted: (i128::from(sent) - placed) as i64,
        misordered,
    }
}

/// The striping part of the report of a run that ended at `end` after
/// sending for `sending` seconds; `None` when the network has no striped
/// VC. `ledger` is the driver's record of dropped cells.
pub fn report<F: aurora_net::Frame>(
    stripes: &[StripeInfo],
    pvcs: &[PvcInfo],
    sim: &Engine<F>,
    ledger: &Ledger,
    names: &dyn Fn(Place) -> String,
    end: Instant,
    sending: f64,
) -> Option<StripeReport> {
    if stripes.is_empty() {
        return None;
    }
    let secs = sending.max(1e-9);
    let vcs = stripes
        .iter()
        .filter_map(|s| match &s.via {
            Some(via) => relay_row(s, via, sim, ledger, names, end, secs),
            None => host_row(s, pvcs, sim, ledger, names, end, secs),
        })
        .collect();
    Some(StripeReport { vcs })
}

/// One stripe's load, from the two ends' counters and the cells `dropped`
/// on its way; `pvc` names it.
fn stripe_load(
    pvc: String,
    ts: aurora_stripe::StripeTxStats,
    rs: aurora_stripe::StripeRxStats,
    total_bytes: u64,
    dropped: Vec<LossRow>,
) -> StripeLoad {
    let lost: u64 = dropped.iter().map(|d| d.count).sum();
    StripeLoad {
        pvc,
        units: ts.units,
        share: ts.bytes as f64 / total_bytes.max(1) as f64,
        bytes: ts.bytes,
        cells: ts.cells,
        markers: ts.markers,
        arrived: rs.cells,
        units_arrived: rs.units,
        markers_taken: rs.markers,
        resyncs: rs.resyncs,
        dropped,
        on_the_way: (i128::from(ts.cells + ts.markers) - i128::from(rs.cells) - i128::from(lost))
            as i64,
    }
}

/// What a row needs beyond the two ends' counters.
struct RowParts {
    stripes: Vec<StripeLoad>,
    corrupted: u64,
    misordered: u64,
    pdus: PduRow,
    delivered_order: ReorderRow,
    reassembling: u64,
    split_cells: Option<SplitCells>,
}

/// The row of logical VC `s`, striped by `tx` and put back by `rx`.
fn row(s: &StripeInfo, tx: &Striper, rx: &Destriper, end: Instant, p: RowParts) -> StripeRow {
    let r = rx.stats();
    StripeRow {
        name: s.name.clone(),
        from: s.from.clone(),
        to: s.to.clone(),
        unit: s.unit.name().into(),
        sync: s.sync.name().into(),
        greedy: s.greedy,
        units: books(tx, rx, p.corrupted, p.misordered),
        stripes: p.stripes,
        rejected: r
            .rejected
            .nonzero()
            .map(|(why, n)| (why.name().to_string(), n))
            .collect(),
        skipped_turns: r.skipped_turns,
        pdus: p.pdus,
        delivered_order: p.delivered_order,
        arrival_order: (s.sync == SyncMode::Sequence).then(|| reorder_row(&r.arrival_order)),
        delay_us: delay_row(&r.delay),
        held_max: r.occupancy.max(),
        held_mean: r.occupancy.mean(end),
        held_bytes_max: r.max_held_bytes as u64,
        reassembling_bytes: p.reassembling,
        split_cells: p.split_cells,
    }
}

/// A `[[stripe]]` entry's row: two striping hosts.
fn host_row<F: aurora_net::Frame>(
    s: &StripeInfo,
    pvcs: &[PvcInfo],
    sim: &Engine<F>,
    ledger: &Ledger,
    names: &dyn Fn(Place) -> String,
    end: Instant,
    secs: f64,
) -> Option<StripeRow> {
    let src = sim.node::<StripeHost>(s.from_node)?;
    let dst = sim.node::<StripeHost>(s.to_node)?;
    let (_, tx, sent) = src.senders().find(|(spec, _, _)| spec.name == s.name)?;
    let (k, (_, rx, got)) = dst
        .receivers()
        .enumerate()
        .find(|(_, (spec, _, _))| spec.name == s.name)?;
    let t = tx.stats();
    let r = rx.stats();
    let total_bytes: u64 = t.per_stripe.iter().map(|p| p.bytes).sum();
    let stripes = s
        .members
        .iter()
        .enumerate()
        .map(|(i, &m)| {
            let p = &pvcs[m];
            stripe_load(
                p.name.clone(),
                t.per_stripe.get(i).copied().unwrap_or_default(),
                r.per_stripe.get(i).copied().unwrap_or_default(),
                total_bytes,
                dropped_along(p, ledger, names),
            )
        })
        .collect();
    let faults = got
        .faults
        .iter()
        .map(|(f, n)| (f.name().to_string(), *n))
        .collect();
    Some(row(
        s,
        tx,
        rx,
        end,
        RowParts {
            stripes,
            corrupted: got.units_corrupted,
            misordered: got.order.reordered(),
            pdus: PduRow {
                sent: sent.pdus,
                delivered: got.pdus,
                faults,
                missing: got.pdus_missing,
                misordered: got.pdus_misordered,
                mbps: got.bytes as f64 * 8.0 / secs / 1e6,
                offered_mbps: sent.bytes as f64 * 8.0 / secs / 1e6,
            },
            delivered_order: reorder_row(&got.order),
            reassembling: (rx.reassembly_bytes() + dst.deframing(k)) as u64,
            split_cells: None,
        },
    ))
}

/// A `[[splitter]]` logical VC's row: two striping relays. The relays do
/// not look inside the units, so the PDUs' outcome and order are the
/// hosts' to report (their PVC's row); here `pdus` counts units, and the
/// books also hold the splitting relay's cells.
fn relay_row<F: aurora_net::Frame>(
    s: &StripeInfo,
    via: &Via,
    sim: &Engine<F>,
    ledger: &Ledger,
    names: &dyn Fn(Place) -> String,
    end: Instant,
    secs: f64,
) -> Option<StripeRow> {
    let src = sim.node::<Relay>(s.from_node)?;
    let dst = sim.node::<Relay>(s.to_node)?;
    let (_, tx, st, striped) = src.splits().find(|(spec, ..)| spec.name == s.name)?;
    let (_, rx, jt) = dst.joins().find(|(spec, ..)| spec.name == s.name)?;
    if st.cells_in == 0 && rx.stats().per_stripe.iter().all(|p| p.cells == 0) {
        // A way the PVC carried nothing (a one-way flow's way back).
        return None;
    }
    let t = tx.stats();
    let r = rx.stats();
    let total_bytes: u64 = t.per_stripe.iter().map(|p| p.bytes).sum();
    let stripes = via
        .ports
        .iter()
        .enumerate()
        .map(|(i, &port)| {
            let places = [(s.from_node, Side::Out), (s.to_node, Side::In)].map(|(n, side)| {
                let place = Place {
                    node: n.0,
                    port,
                    side,
                };
                (place, via.member_vc)
            });
            // Cells the joining relay handed its Destriper arrived, and
            // are in its counters (the rejected ones, by reason).
            let mut dropped = dropped_at(places.into_iter(), ledger, names);
            dropped.retain(|d| d.reason != "stripe_rejected");
            stripe_load(
                format!("{}:{} {}", s.from, port, via.member_vc),
                t.per_stripe.get(i).copied().unwrap_or_default(),
                r.per_stripe.get(i).copied().unwrap_or_default(),
                total_bytes,
                dropped,
            )
        })
        .collect();
    Some(row(
        s,
        tx,
        rx,
        end,
        RowParts {
            stripes,
            corrupted: 0,
            misordered: 0,
            pdus: PduRow {
                sent: t.units,
                delivered: jt.units,
                mbps: jt.bytes as f64 * 8.0 / secs / 1e6,
                offered_mbps: t.bytes as f64 * 8.0 / secs / 1e6,
                ..PduRow::default()
            },
            delivered_order: ReorderRow::default(),
            reassembling: rx.reassembly_bytes() as u64,
            split_cells: Some(SplitCells {
                arrived: st.cells_in,
                striped,
                dropped: st.drops.iter().map(|(w, n)| (w.to_string(), n)).collect(),
                reassembling: st.reassembling,
                unaccounted: st.balance(striped) as i64,
            }),
        },
    ))
}

/// `None` when every striped VC's books balance; otherwise one sentence
/// naming those that do not.
pub fn imbalance(r: &StripeReport) -> Option<String> {
    let mut bad = Vec::new();
    for v in &r.vcs {
        if v.units.unaccounted != 0 {
            bad.push(format!(
                "{} ({} units unaccounted)",
                v.name, v.units.unaccounted
            ));
        }
        if let Some(c) = v.split_cells.as_ref().filter(|c| c.unaccounted != 0) {
            bad.push(format!(
                "{} ({} cells unaccounted at the splitting relay)",
                v.name, c.unaccounted
            ));
        }
        for s in v.stripes.iter().filter(|s| s.on_the_way < 0) {
            bad.push(format!(
                "{} stripe {} ({} cells more arrived or dropped than were sent)",
                v.name, s.pvc, -s.on_the_way
            ));
        }
        if v.sync != "none" && (v.units.misordered > 0 || v.units.corrupted > 0) {
            bad.push(format!(
                "{} ({} units delivered out of order and {} with wrong bytes, with {} sync)",
                v.name, v.units.misordered, v.units.corrupted, v.sync
            ));
        }
    }
    (!bad.is_empty()).then(|| {
        format!(
            "the striping books do not balance on {}; this is a fault of the testbed",
            bad.join(", ")
        )
    })
}

/// The striping part as text.
pub fn text(r: &StripeReport) -> String {
    let mut s = String::new();
    for v in &r.vcs {
        s += &format!(
            "\nstriped VC {} ({} -> {}): {} units, {} sync, {} stripe{}{}\n",
            v.name,
            v.from,
            v.to,
            v.unit,
            v.sync,
            v.stripes.len(),
            if v.stripes.len() == 1 { "" } else { "s" },
            if v.greedy { ", greedy" } else { "" }
        );
        let u = &v.units;
        s += &format!(
            "  units: sent {} = delivered {} + corrupted {} + lost {} + held {} + unseen {} + unaccounted {}\n",
            u.sent, u.delivered, u.corrupted, u.lost, u.held, u.unseen, u.unaccounted
        );
        for (why, n) in &u.losses {
            s += &format!("    lost {n} ({why})\n");
        }
        if let Some(c) = &v.split_cells {
            s += &format!(
                "  splitting relay, wide VC cells: arrived {} = striped {} + dropped {} + reassembling {} + unaccounted {}\n",
                c.arrived,
                c.striped,
                c.dropped.iter().map(|d| d.1).sum::<u64>(),
                c.reassembling,
                c.unaccounted
            );
            for (why, n) in &c.dropped {
                s += &format!("    dropped {n} ({why})\n");
            }
        }
        if !v.rejected.is_empty() {
            let list: Vec<String> = v.rejected.iter().map(|(w, n)| format!("{n} {w}")).collect();
            s += &format!("  not taken as units: {}\n", list.join(", "));
        }
        let p = &v.pdus;
        s += &if v.split_cells.is_some() {
            format!(
                "  units through the pair: striped {}, sent on {}; {:.1} Mb/s of {:.1} striped (the PDUs' fate is the PVC's row)\n",
                p.sent, p.delivered, p.mbps, p.offered_mbps
            )
        } else {
            format!(
                "  PDUs: sent {}, delivered intact and in order {}, missing {}, misordered {}; goodput {:.1} Mb/s of {:.1} offered\n",
                p.sent, p.delivered, p.missing, p.misordered, p.mbps, p.offered_mbps
            )
        };
        for (f, n) in &p.faults {
            s += &format!("    failed the check: {n} ({f})\n");
        }
        s += &format!(
            "  {:<24} {:>9} {:>6} {:>9} {:>8} {:>9} {:>7} {:>8}\n",
            "stripe (member PVC)",
            "units",
            "share",
            "cells",
            "markers",
            "arrived",
            "resyncs",
            "on way"
        );
        for st in &v.stripes {
            s += &format!(
                "  {:<24} {:>9} {:>5.1}% {:>9} {:>8} {:>9} {:>7} {:>8}\n",
                st.pvc,
                st.units,
                100.0 * st.share,
                st.cells,
                st.markers,
                st.arrived,
                st.resyncs,
                st.on_the_way
            );
            for d in &st.dropped {
                s += &format!("    dropped {} at {} ({})\n", d.count, d.at, d.reason);
            }
        }
        let o = &v.delivered_order;
        s += &if v.split_cells.is_some() {
            String::new()
        } else {
            format!(
            "  RFC 4737, as delivered: {} of {} reordered ({:.4}), extent max {}, 1/2/3-reordered {}/{}/{}\n",
            o.reordered, o.units, o.ratio, o.extent_max, o.n_reordered[0], o.n_reordered[1], o.n_reordered[2]
            )
        };
        if let Some(a) = &v.arrival_order {
            s += &format!(
                "  RFC 4737, as arrived:   {} of {} reordered ({:.4}), extent max {}, 1/2/3-reordered {}/{}/{}\n",
                a.reordered, a.units, a.ratio, a.extent_max, a.n_reordered[0], a.n_reordered[1], a.n_reordered[2]
            );
        }
        let d = &v.delay_us;
        s += &format!(
            "  resequencing delay (us): p50 {:.1}, p99 {:.1}, max {:.1}; held: max {} units ({} bytes), mean {:.1}\n",
            d.p50, d.p99, d.max, v.held_max, v.held_bytes_max, v.held_mean
        );
    }
    s
}

/// One end of a striped VC that a node process runs (`aurora node`): a
/// process sees only its own end, so its books are its end's.
#[derive(Debug, Serialize)]
pub struct EndRow {
    /// The entry's name.
    pub name: String,
    /// The host.
    pub host: String,
    /// `sender` or `receiver`.
    pub role: String,
    /// `cell`, `pdu` or `ip` units, and the sync method.
    pub method: String,
    /// PDUs made (sender) or delivered intact and in order (receiver).
    pub pdus: u64,
    /// Receiver: PDUs that failed the check, PDU numbers skipped, PDUs
    /// out of order.
    pub failed: u64,
    /// See `failed`.
    pub missing: u64,
    /// See `failed`.
    pub misordered: u64,
    /// Units striped (sender) or delivered (receiver).
    pub units: u64,
    /// Receiver: units given up, per reason.
    pub losses: Vec<(String, u64)>,
    /// Receiver: units delivered out of order (RFC 4737 reordered).
    pub reordered: u64,
    /// Receiver: units held at the end.
    pub held: u64,
    /// Cells sent (sender, data and markers) or arrived (receiver), per stripe.
    pub cells: Vec<u64>,
    /// SDU bytes a second, Mb/s over the process's run.
    pub mbps: f64,
}

/// The ends of `stripes` that run on hosts `host` finds, over a run of
/// `secs` seconds.
pub fn ends<'a>(
    stripes: &[StripeInfo],
    host: &dyn Fn(aurora_engine::NodeId) -> Option<&'a StripeHost>,
    secs: f64,
) -> Vec<EndRow> {
    let secs = secs.max(1e-9);
    let mut rows = Vec::new();
    for s in stripes {
        let method = format!("{} units, {} sync", s.unit.name(), s.sync.name());
        if let Some((_, tx, st)) =
            host(s.from_node).and_then(|h| h.senders().find(|(spec, _, _)| spec.name == s.name))
        {
            rows.push(EndRow {
                name: s.name.clone(),
                host: s.from.clone(),
                role: "sender".into(),
                method: method.clone(),
                pdus: st.pdus,
                failed: 0,
                missing: 0,
                misordered: 0,
                units: tx.stats().units,
                losses: Vec::new(),
                reordered: 0,
                held: 0,
                cells: tx
                    .stats()
                    .per_stripe
                    .iter()
                    .map(|p| p.cells + p.markers)
                    .collect(),
                mbps: st.bytes as f64 * 8.0 / secs / 1e6,
            });
        }
        if let Some((_, rx, got)) =
            host(s.to_node).and_then(|h| h.receivers().find(|(spec, _, _)| spec.name == s.name))
        {
            let r = rx.stats();
            rows.push(EndRow {
                name: s.name.clone(),
                host: s.to.clone(),
                role: "receiver".into(),
                method,
                pdus: got.pdus,
                failed: got.failed(),
                missing: got.pdus_missing,
                misordered: got.pdus_misordered,
                units: r.delivered,
                losses: aurora_stripe::Loss::ALL
                    .iter()
                    .map(|&l| (l.name().to_string(), r.discarded.get(l) + r.gaps.get(l)))
                    .filter(|(_, n)| *n > 0)
                    .collect(),
                reordered: got.order.reordered(),
                held: rx.held() as u64,
                cells: r.per_stripe.iter().map(|p| p.cells).collect(),
                mbps: got.bytes as f64 * 8.0 / secs / 1e6,
            });
        }
    }
    rows
}

/// A process's striped ends as text.
pub fn ends_text(rows: &[EndRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n{:<16} {:<10} {:<9} {:<22} {:>7} {:>9} {:>7} {:>7} {:>9} {:>8}\n",
        "striped VC",
        "host",
        "role",
        "method",
        "PDUs",
        "units",
        "failed",
        "missing",
        "reordered",
        "Mb/s"
    );
    for r in rows {
        s += &format!(
            "{:<16} {:<10} {:<9} {:<22} {:>7} {:>9} {:>7} {:>7} {:>9} {:>8.1}\n",
            r.name,
            r.host,
            r.role,
            r.method,
            r.pdus,
            r.units,
            r.failed,
            r.missing,
            r.reordered,
            r.mbps
        );
        for (why, n) in &r.losses {
            s += &format!("{:<4}lost {n} units ({why})\n", "");
        }
    }
    s
}
