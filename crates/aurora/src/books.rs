//! The books of a network run as several `aurora node` processes.
//!
//! One process sees only its own part of a PVC: the sender counts what it
//! sent, each process charges the PDUs whose cells it dropped, and the
//! receiver follows what arrived. Each process writes its part in its JSON
//! report (`books`, a [`ProcessBooks`]); `aurora books` reads the reports
//! of every process of a run, joins them into one [`Ledger`] and the
//! receivers' books, and balances each PVC with the same
//! [`accounting::reconcile`] as `aurora run`:
//! `sent = delivered + corrupted + lost + in_flight`, a loss charged to
//! the first place (earliest by the wall clock) that doomed the PDU.
//!
//! Cells lost between two processes (a UDP datagram that never arrived,
//! cells sent before the receiving process listened) carry no tag anyone
//! could read: the receiving port counts them (`lost_in_transit`,
//! `peer_unreachable`), and PDUs of a PVC through that port that have no
//! other outcome are charged there, at most one PDU per cell counted. That
//! is an upper bound, not a proof: a loss no process recorded could hide
//! behind it, so the report says how many PDUs were placed this way. What
//! is still unexplained is `unaccounted`, and the command fails. PDUs after
//! the last one the receiver saw are in flight (on their way when the
//! processes stopped, or held unread at a process's input), except those
//! that left one process and never reached the next: each process notes,
//! where a PVC crosses its edge, the last PDU whose end cell a link took
//! out, read in, or left unread at its stop ([`Crossed`]), and a PDU a link
//! took out after the last the next process read or held is
//! `lost_between_processes` at that process's port (sent after it stopped
//! reading, or lost on the way); so is one the receiver held part-way whose
//! end cell went that way. Cells of a PVC stay in order, so each such PDU
//! did leave the one process and never reach the next, unless it was lost
//! earlier with no readable tag (a datagram lost between two processes
//! before, a cell dropped with a damaged tag): the books then note how many
//! of those placed could be such.
//!
//! A process's charges are written as runs of consecutive PDUs doomed at
//! one place for one reason, with the time of the run's earliest loss; a
//! PDU charged in two processes goes to the earlier, to within such a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aurora_engine::carry::Carries;
use aurora_engine::NodeId;
use aurora_link::LinkDrop;
use aurora_net::accounting::{self, Ledger, Loss, Place, RxFate, RxSnapshot, Side};
use aurora_net::tag::Tag;
use aurora_net::traffic::TrafficHost;
use aurora_time::Instant;
use aurora_wire::cell::VcId;
use aurora_wire::CellBytes;
use serde::{Deserialize, Serialize};

use crate::books_edge::Edge;
use crate::run::{LossRow, PvcRow};

/// A place in a report: a node by name, its port, and the side.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct At {
    /// The node.
    pub node: String,
    /// The port.
    pub port: u16,
    /// `in` (arriving) or `out` (the port's buffer and the link leaving it).
    pub side: String,
}

/// PDUs `first .. first + count` of a flow, each charged to one loss.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Charged {
    /// The flow (its PVC's number in the file).
    pub flow: u16,
    /// The first PDU.
    pub first: u64,
    /// PDUs in the run.
    pub count: u64,
    /// When the earliest of them was doomed, ns of the process's model
    /// time.
    pub at_ns: i64,
    /// Where.
    pub at: At,
    /// Why.
    pub reason: String,
}

/// Data cells dropped with no readable tag, at one place, for one reason,
/// on one VC.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Untagged {
    /// Where.
    pub at: At,
    /// Why.
    pub reason: String,
    /// The VC in their header, `vpi.vci`.
    pub vpi: u16,
    /// The VC in their header.
    pub vci: u16,
    /// Cells.
    pub cells: u64,
    /// The flow the place and VC carry, if the process learnt it.
    pub flow: Option<u16>,
}

/// Data cells dropped at one place for one reason, tagged or not.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cells {
    /// Where.
    pub at: At,
    /// Why.
    pub reason: String,
    /// Cells.
    pub cells: u64,
}

/// A receiver's book of one PVC at the end of the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Received {
    /// The PVC.
    pub pvc: String,
    /// PDUs delivered intact and in order.
    pub delivered: u64,
    /// The highest PDU number seen per flow: `[flow, number]`.
    pub highest: Vec<(u16, u64)>,
    /// PDUs seen and not delivered: `[flow, number, fate]`, the fate
    /// `corrupted`, `merged:N` (ran together with PDU N) or the
    /// receiver's reason.
    pub fates: Vec<(u16, u64, String)>,
    /// PDUs of the AAL5 unit still in progress: `[flow, number]`.
    pub in_progress: Vec<(u16, u64)>,
    /// Failed units whose every tag was unreadable, by reason.
    pub untagged: Vec<(String, u64)>,
    /// PDUs that did not fit in the book.
    pub overflow: u64,
}

/// Cells that left another process for a port and never reached it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Transit {
    /// The receiving node.
    pub node: String,
    /// Its port.
    pub port: u16,
    /// Cells its link counted lost between the processes
    /// (`lost_in_transit`).
    pub cells: u64,
    /// Cells the far end sent before this end listened
    /// (`peer_unreachable`).
    #[serde(default)]
    pub before: u64,
    /// Times it saw the process at the far end start again.
    pub restarts: u64,
}

/// A PVC between traffic hosts: its number and the ports its cells arrive
/// by, from the first hop to the receiver.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PvcPath {
    /// Its name.
    pub name: String,
    /// Its number (the flow number its cells' tags carry).
    pub flow: u16,
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// The ports its cells arrive by, in order: `[node, port]`.
    pub arrivals: Vec<(String, u16)>,
    /// The ports they leave by, in the same order: `[node, port]`.
    #[serde(default)]
    pub departures: Vec<(String, u16)>,
}

/// The last PDU of a traffic PVC whose end cell crossed a process's edge at
/// a place: side `out`, taken by a link to another process; `in`, read
/// from one (or, in `unread`, left unread there when the process stopped).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Crossed {
    /// Where.
    pub at: At,
    /// The PVC's number (its tags' flow).
    pub flow: u16,
    /// The PDU's number.
    pub last: u64,
}

/// One process's part of the books of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProcessBooks {
    /// The topology file's CRC-32, in hex: every process of a run reads
    /// the same file.
    pub topology: String,
    /// Wall-clock time of the process's model time 0, ns since the Unix
    /// epoch.
    pub epoch_unix_ns: u64,
    /// The process's nodes.
    pub nodes: Vec<String>,
    /// Every PVC between traffic hosts in the file.
    pub pvcs: Vec<PvcPath>,
    /// PDUs the process's hosts sent, per PVC: `[pvc, PDUs]`.
    pub sent: Vec<(String, u64)>,
    /// The process's receivers' books.
    pub received: Vec<Received>,
    /// The PDUs whose cells the process dropped, each at its first loss.
    pub charged: Vec<Charged>,
    /// Data cells dropped with no readable tag.
    pub untagged: Vec<Untagged>,
    /// Data cells dropped, per place and reason.
    pub cells: Vec<Cells>,
    /// Cells lost between processes, per receiving port.
    pub transit: Vec<Transit>,
    /// Traffic PVCs' last PDUs that crossed the process's edge.
    #[serde(default)]
    pub crossed: Vec<Crossed>,
    /// And those left unread at its inputs when it stopped.
    #[serde(default)]
    pub unread: Vec<Crossed>,
    /// Records the process's books had no room for.
    pub overflow: u64,
    /// Its part of the books of PVCs between IP nodes.
    #[serde(default)]
    pub ip: crate::books_ip::IpBooks,
    /// Its part of the books of ATOMIC flows.
    #[serde(default)]
    pub atomic: crate::books_atomic::AtomicBooks,
}

fn side_name(s: Side) -> &'static str {
    match s {
        Side::In => "in",
        Side::Out => "out",
    }
}

impl At {
    /// `place`, its node named by `name`.
    pub(crate) fn of(place: Place, name: &dyn Fn(u32) -> String) -> At {
        At {
            node: name(place.node),
            port: place.port,
            side: side_name(place.side).into(),
        }
    }
}

/// A place by hand, for the tests.
#[cfg(test)]
pub(crate) fn at(node: &str, port: u16, side: &str) -> At {
    At {
        node: node.into(),
        port,
        side: side.into(),
    }
}

/// What a node process writes of its books: the ledger its drop tap kept
/// (places by the process's node ids), its receivers' books, what its
/// hosts sent and what its links lost in transit; and what its boundary
/// tap saw cross its edge (`crossed`) and what it left unread there when
/// it stopped (`unread`).
pub(crate) fn export<F: Carries<CellBytes>>(
    p: &aurora_topo::NodeProcess<F>,
    info: &aurora_topo::BlueprintInfo,
    ledger: &Ledger,
    (crossed, unread): (&Edge, &Edge),
    topology: u32,
    epoch_unix_ns: u64,
) -> ProcessBooks {
    let local_name = |id: u32| crate::node::member_name(p, NodeId(id));
    let at = |pl: Place| At::of(pl, &local_name);
    let global: BTreeMap<u32, &str> = info
        .hosts
        .iter()
        .chain(&info.ip_nodes)
        .map(|(n, id)| (id.0, n.as_str()))
        .chain(
            info.switches
                .iter()
                .chain(&info.routers)
                .map(|(n, id, _)| (id.0, n.as_str())),
        )
        .collect();
    let gname = |id: NodeId| {
        global
            .get(&id.0)
            .map_or(format!("node {}", id.0), |n| n.to_string())
    };
    let local = |id: NodeId| p.members.iter().find(|m| m.id == id).map(|m| m.local);
    let host = |id: NodeId| local(id).and_then(|l| p.engine.node::<TrafficHost>(l));
    let mut b = ProcessBooks {
        topology: format!("{topology:08x}"),
        epoch_unix_ns,
        nodes: p.members.iter().map(|m| m.name.clone()).collect(),
        overflow: ledger.overflow(),
        ip: crate::books_ip::export(p, info, ledger, &crossed.ends, &unread.ends, &local_name),
        ..ProcessBooks::default()
    };
    for (list, edge) in [(&mut b.crossed, crossed), (&mut b.unread, unread)] {
        for ((place, _), (flow, last)) in &edge.last {
            if let Some(last) = *last {
                list.push(Crossed {
                    at: at(*place),
                    flow: *flow,
                    last,
                });
            }
        }
    }
    for (i, pvc) in info.pvcs.iter().enumerate() {
        let Ok(flow) = u16::try_from(i) else { break };
        if pvc.flows.is_empty() {
            continue;
        }
        b.pvcs.push(PvcPath {
            name: pvc.name.clone(),
            flow,
            from: gname(pvc.from),
            to: gname(pvc.to),
            arrivals: pvc.hops.iter().map(|h| (gname(h.to.0), h.to.1)).collect(),
            departures: pvc
                .hops
                .iter()
                .map(|h| (gname(h.from.0), h.from.1))
                .collect(),
        });
        if let Some(h) = host(pvc.from) {
            b.sent
                .push((pvc.name.clone(), pvc.flows.iter().map(|&k| h.sent(k)).sum()));
        }
        if let Some(h) = host(pvc.to) {
            let r = h.received(pvc.to_vc);
            let s = h.book(pvc.to_vc).map(|k| k.snapshot()).unwrap_or_default();
            b.overflow += s.overflow;
            b.received.push(Received {
                pvc: pvc.name.clone(),
                delivered: r.delivered,
                highest: s.highest,
                fates: s
                    .fates
                    .iter()
                    .map(|(t, f)| {
                        let f = match f {
                            RxFate::Corrupted => "corrupted".to_string(),
                            RxFate::Merged { with } => format!("merged:{with}"),
                            RxFate::Receiver(r) => r.to_string(),
                        };
                        (t.flow, t.seq, f)
                    })
                    .collect(),
                in_progress: s.in_progress.iter().map(|t| (t.flow, t.seq)).collect(),
                untagged: s
                    .untagged
                    .iter()
                    .map(|(r, n)| (r.to_string(), *n))
                    .collect(),
                overflow: s.overflow,
            });
        }
    }
    // The charges, as runs of consecutive PDUs with one loss.
    let mut charges: Vec<(Tag, Instant, Loss)> = ledger.charges().collect();
    charges.sort_by_key(|(t, _, _)| *t);
    for (t, when, loss) in charges {
        let ns = when.as_nanos();
        if let Some(last) = b.charged.last_mut() {
            if last.flow == t.flow
                && last.first + last.count == t.seq
                && last.at == at(loss.place)
                && last.reason == loss.reason
            {
                last.count += 1;
                last.at_ns = last.at_ns.min(ns);
                continue;
            }
        }
        b.charged.push(Charged {
            flow: t.flow,
            first: t.seq,
            count: 1,
            at_ns: ns,
            at: at(loss.place),
            reason: loss.reason.into(),
        });
    }
    for (loss, vc, n, flow) in ledger.untagged_by_vc() {
        b.untagged.push(Untagged {
            at: at(loss.place),
            reason: loss.reason.into(),
            vpi: vc.vpi,
            vci: vc.vci,
            cells: n,
            flow,
        });
    }
    for (loss, n) in ledger.cells() {
        b.cells.push(Cells {
            at: at(loss.place),
            reason: loss.reason.into(),
            cells: *n,
        });
    }
    for port in &p.ports {
        let rx = p
            .engine
            .external_input(port.node, port.port)
            .unwrap_or_default();
        let lost = rx.drops.get(LinkDrop::LostInTransit);
        let before = rx.drops.get(LinkDrop::PeerUnreachable);
        if lost > 0 || before > 0 || rx.peer_restarts > 0 {
            b.transit.push(Transit {
                node: local_name(port.node.0),
                port: port.port,
                cells: lost,
                before,
                restarts: rx.peer_restarts,
            });
        }
    }
    b
}

/// The joined books of a run's processes.
#[derive(Debug, Serialize)]
pub struct BooksReport {
    /// The reports read.
    pub reports: Vec<String>,
    /// The nodes they ran.
    pub nodes: Vec<String>,
    /// Per PVC whose sender and receiver both reported, balanced (in JSON
    /// without `aurora run`'s rate and order figures, which the books do
    /// not measure).
    #[serde(serialize_with = "rows_without_rates")]
    pub pvcs: Vec<PvcRow>,
    /// PVCs that could not be balanced, and why.
    pub unbalanced: Vec<String>,
    /// Per PVC, PDUs placed by cells lost between processes (an upper
    /// bound: see the module's notes): `[pvc, PDUs]`.
    pub placed_by_transit: Vec<(String, u64)>,
    /// Per ATOMIC flow, packets placed by frames lost between processes
    /// (an upper bound, likewise): `[flow, packets]`.
    pub atomic_placed_by_transit: Vec<(String, u64)>,
    /// What a reader should know to trust the figures: a process on a
    /// PVC's path restarted, or a count of cells lost between processes
    /// that two PVCs share went to another first.
    pub notes: Vec<String>,
    /// Data cells dropped, per place and reason, in all processes.
    pub cell_losses: Vec<LossRow>,
    /// Records that did not fit in the books; when not 0, `unaccounted`
    /// may be the books' limit rather than a fault.
    pub books_overflow: u64,
    /// Per direction of each PVC between IP nodes whose ends both
    /// reported, balanced by end cells (see `crate::books_ip`).
    pub ip_pvcs: Vec<crate::ip_books::IpPvcRow>,
    /// Per ATOMIC flow whose sender and receiver reported, balanced by
    /// packet (see `crate::books_atomic`).
    pub atomic_flows: Vec<crate::atomic_report::FlowRow>,
    /// Sum over PVCs, IP PVC directions and ATOMIC flows of the size of
    /// their `unaccounted`.
    pub unaccounted: u64,
}

/// PVC rows as the books write them: the identity's terms only.
fn rows_without_rates<S: serde::Serializer>(rows: &[PvcRow], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Row<'a> {
        name: &'a str,
        sent: u64,
        delivered: u64,
        corrupted: u64,
        lost: u64,
        losses: &'a [LossRow],
        in_flight: u64,
        unaccounted: i64,
    }
    s.collect_seq(rows.iter().map(|p| Row {
        name: &p.name,
        sent: p.sent,
        delivered: p.delivered,
        corrupted: p.corrupted,
        lost: p.lost,
        losses: &p.losses,
        in_flight: p.in_flight,
        unaccounted: p.unaccounted,
    }))
}

impl BooksReport {
    /// `None` when every PVC balances; otherwise one sentence saying which
    /// do not, or could not be balanced.
    pub fn problem(&self) -> Option<String> {
        let bad = crate::run::unbalanced(&self.pvcs);
        let mut all = Vec::new();
        if !bad.is_empty() {
            all.push(format!(
                "the books do not balance: PDUs with no outcome on PVC {}{}",
                bad.join(", "),
                if self.books_overflow > 0 {
                    format!(
                        ", but {} records did not fit in the books",
                        self.books_overflow
                    )
                } else {
                    String::new()
                }
            ));
        }
        all.extend(crate::ip_books::imbalance(&self.ip_pvcs));
        all.extend(crate::atomic_report::flows_imbalance(&self.atomic_flows));
        all.extend(self.unbalanced.iter().cloned());
        (!all.is_empty()).then(|| all.join("; "))
    }
}

/// The largest report `aurora books` reads.
const MAX_REPORT_BYTES: u64 = 512 << 20;

/// Reports the books join at most.
const MAX_REPORTS: usize = 1024;

/// PDUs charged, in all the reports, that the books take at most.
const MAX_CHARGED: u64 = 16 * accounting::MAX_RECORDS as u64;

/// Distinct reasons the books take from reports at most.
const MAX_REASONS: usize = 256;

/// A report's name for a reason, as the `'static` name the ledger keeps:
/// the same string each time, made once.
fn reason(known: &mut Vec<&'static str>, s: &str) -> Result<&'static str, String> {
    if let Some(r) = known.iter().find(|r| **r == s) {
        return Ok(r);
    }
    if known.len() >= MAX_REASONS || s.len() > 64 {
        return Err(format!(
            "more than {MAX_REASONS} reasons for losses, or one longer than 64 bytes (\"{}\")",
            aurora_topo::escape(s)
        ));
    }
    // A short command: the few names it reads live as long as it does.
    let r: &'static str = Box::leak(s.to_string().into_boxed_str());
    known.push(r);
    Ok(r)
}

/// One report's `books`, read from `path`.
fn read(path: &Path) -> Result<ProcessBooks, String> {
    use std::io::Read;
    #[derive(Deserialize)]
    struct Wrapper {
        books: Option<ProcessBooks>,
    }
    let shown = aurora_topo::escape(&path.display().to_string());
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_REPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > MAX_REPORT_BYTES {
        return Err(format!(
            "{shown} is larger than {MAX_REPORT_BYTES} bytes, more than a report holds"
        ));
    }
    let w: Wrapper = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{shown} is not a report of `aurora node --json`: {e}"))?;
    w.books.ok_or_else(|| {
        format!(
            "{shown} has no books: it is not a report of `aurora node --json` \
             (an `aurora run` report, or one from an older build?)"
        )
    })
}

/// Joins the books of `paths`, the reports of one run's processes.
pub fn main(paths: &[PathBuf]) -> Result<BooksReport, String> {
    let mut parts = Vec::new();
    for p in paths {
        parts.push((p.display().to_string(), read(p)?));
    }
    join(&parts)
}

/// Joins the books of named reports.
pub fn join(parts: &[(String, ProcessBooks)]) -> Result<BooksReport, String> {
    let Some((first_name, first)) = parts.first() else {
        return Err("no reports to join".into());
    };
    if parts.len() > MAX_REPORTS {
        return Err(format!(
            "{} reports: the books join {MAX_REPORTS} at most",
            parts.len()
        ));
    }
    // One file, each node in one report.
    let mut index: BTreeMap<String, u32> = BTreeMap::new();
    let mut who: BTreeMap<String, &str> = BTreeMap::new();
    for (name, b) in parts {
        if b.topology != first.topology || b.pvcs != first.pvcs {
            return Err(format!(
                "{} and {} come from different topology files (or different versions of one, \
                 or of aurora)",
                aurora_topo::escape(first_name),
                aurora_topo::escape(name)
            ));
        }
        for n in &b.nodes {
            if let Some(other) = who.insert(n.clone(), name) {
                return Err(format!(
                    "node {} is in both {} and {}: give each process's report once \
                     (a node run by two processes in turn, as after a restart, cannot be joined)",
                    aurora_topo::escape(n),
                    aurora_topo::escape(other),
                    aurora_topo::escape(name)
                ));
            }
            let k = index.len() as u32;
            index.insert(n.clone(), k);
        }
    }
    let place = |a: &At| -> Result<Place, String> {
        let node = *index.get(&a.node).ok_or_else(|| {
            format!(
                "a loss at node {}, which no report ran",
                aurora_topo::escape(&a.node)
            )
        })?;
        let side = match a.side.as_str() {
            "in" => Side::In,
            "out" => Side::Out,
            other => return Err(format!("a loss on side \"{}\"", aurora_topo::escape(other))),
        };
        Ok(Place {
            node,
            port: a.port,
            side,
        })
    };
    // Model times, made comparable: ns since the earliest process began.
    let base = parts
        .iter()
        .map(|(_, b)| b.epoch_unix_ns)
        .min()
        .unwrap_or(0);
    let mut known = Vec::new();
    let mut ledger = Ledger::new();
    let mut charged_total = 0u64;
    for (name, b) in parts {
        let offset = i64::try_from(b.epoch_unix_ns - base).map_err(|_| {
            format!(
                "{}: its start time is out of range",
                aurora_topo::escape(name)
            )
        })?;
        // A process's ledger charges MAX_RECORDS PDUs at most.
        let mut charged = 0u64;
        for c in &b.charged {
            charged = charged.saturating_add(c.count);
            charged_total = charged_total.saturating_add(c.count);
            if charged_total > MAX_CHARGED {
                return Err(format!(
                    "the reports charge more than {MAX_CHARGED} PDUs in all, more than the books join"
                ));
            }
            if charged > accounting::MAX_RECORDS as u64 {
                return Err(format!(
                    "{} charges more PDUs than a process's books hold ({})",
                    aurora_topo::escape(name),
                    accounting::MAX_RECORDS
                ));
            }
            let loss = Loss {
                place: place(&c.at)?,
                reason: reason(&mut known, &c.reason)?,
            };
            let at = Instant::from_nanos(c.at_ns.saturating_add(offset));
            for seq in c.first..c.first.saturating_add(c.count) {
                ledger.charge(Tag { flow: c.flow, seq }, at, loss);
            }
        }
        for u in &b.untagged {
            let loss = Loss {
                place: place(&u.at)?,
                reason: reason(&mut known, &u.reason)?,
            };
            ledger.add_untagged(loss, VcId::new(u.vpi, u.vci), u.cells, u.flow);
        }
        for c in &b.cells {
            let loss = Loss {
                place: place(&c.at)?,
                reason: reason(&mut known, &c.reason)?,
            };
            ledger.add_cells(loss, c.cells);
        }
        ledger.add_overflow(b.overflow);
    }
    let names: BTreeMap<u32, &str> = index.iter().map(|(n, k)| (*k, n.as_str())).collect();
    // Cells lost between processes, per receiving port and reason.
    let mut transit: BTreeMap<(String, u16, &'static str), u64> = BTreeMap::new();
    let mut restarted: BTreeMap<(String, u16), u64> = BTreeMap::new();
    for (_, b) in parts {
        for t in &b.transit {
            for (why, n) in [("lost_in_transit", t.cells), ("peer_unreachable", t.before)] {
                let e = transit.entry((t.node.clone(), t.port, why)).or_default();
                *e = e.saturating_add(n);
            }
            let e = restarted.entry((t.node.clone(), t.port)).or_default();
            *e = e.saturating_add(t.restarts);
        }
    }
    // Of those, the cells that could hide a later PDU: lost on the way,
    // and, from a process that started again, sent before this end
    // listened (what a process sent before the first listened is older
    // than anything read after).
    let mut untagged_between: BTreeMap<(String, u16), u64> = BTreeMap::new();
    for (_, b) in parts {
        for t in &b.transit {
            let before = if t.restarts > 0 { t.before } else { 0 };
            let e = untagged_between
                .entry((t.node.clone(), t.port))
                .or_default();
            *e = e.saturating_add(t.cells).saturating_add(before);
        }
    }
    // The last PDU of each traffic PVC that crossed a process's edge, per
    // place: taken out by a link, read in, or left unread at the stop.
    type Last = BTreeMap<(String, u16, u16), u64>;
    let (mut taken, mut read, mut held): (Last, Last, Last) = Default::default();
    for (_, b) in parts {
        for (list, unread) in [(&b.crossed, false), (&b.unread, true)] {
            for c in list {
                let map = match (unread, c.at.side.as_str()) {
                    (false, "out") => &mut taken,
                    (false, "in") => &mut read,
                    (true, "in") => &mut held,
                    _ => continue,
                };
                let e = map
                    .entry((c.at.node.clone(), c.at.port, c.flow))
                    .or_insert(c.last);
                *e = (*e).max(c.last);
            }
        }
    }
    let mut placed_by_transit = Vec::new();
    let mut notes = Vec::new();
    // Which PVCs drew on each port's count, in order.
    let mut drawn: BTreeMap<(String, u16), Vec<String>> = BTreeMap::new();
    let mut pvcs = Vec::new();
    let mut unbalanced = Vec::new();
    for path in &first.pvcs {
        let sender = parts
            .iter()
            .find_map(|(_, b)| b.sent.iter().find(|(n, _)| *n == path.name));
        let receiver = parts
            .iter()
            .find_map(|(_, b)| b.received.iter().find(|r| r.pvc == path.name));
        let missing: Vec<&str> = std::iter::once(path.from.as_str())
            .chain(path.arrivals.iter().map(|(n, _)| n.as_str()))
            .filter(|n| !index.contains_key(*n))
            .collect();
        let (Some((_, sent)), Some(rx), true) = (sender, receiver, missing.is_empty()) else {
            let why = if !missing.is_empty() {
                let mut m = missing.clone();
                m.dedup();
                format!("no report ran {}", m.join(", "))
            } else if sender.is_none() {
                format!(
                    "the report that ran {} has no count of what it sent",
                    path.from
                )
            } else {
                format!(
                    "the report that ran {} has no book of what it received",
                    path.to
                )
            };
            unbalanced.push(format!(
                "PVC {} cannot be balanced: {why}",
                aurora_topo::escape(&path.name)
            ));
            continue;
        };
        let book = snapshot(rx, &mut known)?;
        let Some(&to) = index.get(&path.to) else {
            continue;
        };
        let receiver = Place {
            node: to,
            port: 0,
            side: Side::In,
        };
        // PDUs a link took out of one process after the last the next
        // one read or held unread never reached it.
        let vanished: Vec<accounting::Vanished> = path
            .departures
            .iter()
            .zip(&path.arrivals)
            .filter_map(|((from, from_port), (to, to_port))| {
                let out = *taken.get(&(from.clone(), *from_port, path.flow))?;
                let at = (to.clone(), *to_port, path.flow);
                let reached = read.get(&at).max(held.get(&at));
                Some(accounting::Vanished {
                    place: Place {
                        node: *index.get(to)?,
                        port: *to_port,
                        side: Side::In,
                    },
                    from: reached.map_or(0, |r| r.saturating_add(1)),
                    to: out.saturating_add(1),
                })
            })
            .collect();
        let mut a = accounting::reconcile(
            path.flow,
            *sent,
            rx.delivered,
            &ledger,
            Some(&accounting::RxBook::from_snapshot(book)),
            receiver,
            &vanished,
        );
        // A PDU lost with no readable tag before a process's edge (a cell
        // lost between two processes before, or dropped with a damaged
        // tag) cannot be told from one lost past that edge: say how many
        // of those placed there could be such.
        let mut damaged: BTreeMap<u32, u64> = BTreeMap::new();
        for (loss, n) in ledger.untagged_of(path.flow) {
            let e = damaged.entry(loss.place.node).or_default();
            *e = e.saturating_add(n);
        }
        let mut untagged = 0u64;
        for (k, (node, port)) in path.arrivals.iter().enumerate() {
            // Dropped with a damaged tag at the node this hop leaves.
            let from = path.departures.get(k).and_then(|(n, _)| index.get(n));
            if let Some(n) = from.and_then(|i| damaged.get(i)) {
                untagged = untagged.saturating_add(*n);
            }
            let Some(&at) = index.get(node) else { continue };
            let here = Loss {
                place: Place {
                    node: at,
                    port: *port,
                    side: Side::In,
                },
                reason: accounting::BETWEEN_PROCESSES,
            };
            if let (Some(&n), true) = (a.lost.get(&here), untagged > 0) {
                notes.push(format!(
                    "on PVC {}, of the {n} PDUs placed as lost between processes at {node}:{port}, \
                     up to {} may have been lost earlier on its way, where {untagged} cells were \
                     lost with no tag read (between processes, or with a damaged tag)",
                    aurora_topo::escape(&path.name),
                    untagged.min(n),
                ));
            }
            let k = untagged_between
                .get(&(node.clone(), *port))
                .copied()
                .unwrap_or(0);
            untagged = untagged.saturating_add(k);
        }
        // PDUs with no outcome, explained by cells lost between processes
        // on the PVC's way, one cell at least each.
        let mut placed = 0u64;
        for (node, port) in &path.arrivals {
            for why in ["lost_in_transit", "peer_unreachable"] {
                if a.unaccounted <= 0 {
                    break;
                }
                let Some(left) = transit.get_mut(&(node.clone(), *port, why)) else {
                    continue;
                };
                let k = (*left).min(a.unaccounted.unsigned_abs());
                if k == 0 {
                    continue;
                }
                *left -= k;
                a.unaccounted -= k as i64;
                placed += k;
                let users = drawn.entry((node.clone(), *port)).or_default();
                if !users.contains(&path.name) {
                    users.push(path.name.clone());
                }
                let loss = Loss {
                    place: Place {
                        node: index[node],
                        port: *port,
                        side: Side::In,
                    },
                    reason: reason(&mut known, why)?,
                };
                let e = a.lost.entry(loss).or_default();
                *e = e.saturating_add(k);
            }
        }
        if placed > 0 {
            placed_by_transit.push((path.name.clone(), placed));
        }
        let seen: Vec<String> = path
            .arrivals
            .iter()
            .filter(|(n, p)| restarted.get(&(n.clone(), *p)).is_some_and(|&r| r > 0))
            .map(|(n, p)| format!("{n}:{p}"))
            .collect();
        if !seen.is_empty() {
            notes.push(format!(
                "on PVC {}, {} saw the process before it start again: PDUs the process before \
                 the restart held are in none of these reports, and are among those placed by \
                 cells lost between processes, or unaccounted",
                aurora_topo::escape(&path.name),
                seen.join(", ")
            ));
        }
        pvcs.push(PvcRow {
            name: path.name.clone(),
            sent: *sent,
            delivered: a.delivered,
            corrupted: a.corrupted,
            lost: a.lost_total(),
            losses: crate::run::loss_rows(&names, a.lost.iter()),
            in_flight: a.in_flight,
            unaccounted: a.unaccounted,
            mbps: 0.0,
            misordered: 0,
        });
    }
    // A port's count of cells lost between processes is one for all the
    // PVCs through it, drawn in file order: a PVC left unexplained may be
    // the one whose cells they were.
    for p in pvcs.iter().filter(|p| p.unaccounted != 0) {
        let Some(path) = first.pvcs.iter().find(|x| x.name == p.name) else {
            continue;
        };
        for (node, port) in &path.arrivals {
            let others: Vec<&str> = drawn
                .get(&(node.clone(), *port))
                .into_iter()
                .flatten()
                .filter(|n| **n != p.name)
                .map(String::as_str)
                .collect();
            if !others.is_empty() {
                notes.push(format!(
                    "PVC {}'s PDUs with no outcome may be explained by cells lost between \
                     processes at {node}:{port}, which the books charged to PVC {} first",
                    aurora_topo::escape(&p.name),
                    others.join(", ")
                ));
            }
        }
    }
    // IP PVCs, by end cells, drawing on what the traffic PVCs left of
    // each port's count of cells lost between processes.
    let mut left: crate::books_ip::TransitCells = BTreeMap::new();
    for ((node, port, _), n) in &transit {
        let e = left.entry((node.clone(), *port)).or_default();
        *e = e.saturating_add(*n);
    }
    let ip_parts: Vec<(&str, &crate::books_ip::IpBooks)> =
        parts.iter().map(|(n, b)| (n.as_str(), &b.ip)).collect();
    let ip = crate::books_ip::join(&ip_parts, &|n| index.contains_key(n), &left);
    unbalanced.extend(ip.unbalanced);
    for (d, n) in ip.placed {
        placed_by_transit.push((format!("IP PVC {d}"), n));
    }
    let atomic_parts: Vec<(&str, &crate::books_atomic::AtomicBooks)> =
        parts.iter().map(|(n, b)| (n.as_str(), &b.atomic)).collect();
    let atomic = crate::books_atomic::join(&atomic_parts);
    unbalanced.extend(atomic.unbalanced);
    let unaccounted = pvcs
        .iter()
        .map(|p| p.unaccounted)
        .chain(ip.rows.iter().map(|r| r.unaccounted))
        .chain(atomic.rows.iter().filter_map(|r| r.unaccounted))
        .fold(0u64, |a, u| a.saturating_add(u.unsigned_abs()));
    Ok(BooksReport {
        reports: parts.iter().map(|(n, _)| n.clone()).collect(),
        nodes: index.keys().cloned().collect(),
        cell_losses: crate::run::loss_rows(&names, ledger.cells().iter()),
        books_overflow: ledger.overflow(),
        pvcs,
        unbalanced,
        placed_by_transit,
        atomic_placed_by_transit: atomic.placed,
        notes,
        ip_pvcs: ip.rows,
        atomic_flows: atomic.rows,
        unaccounted,
    })
}

/// A receiver's book as [`accounting::reconcile`] reads it.
fn snapshot(r: &Received, known: &mut Vec<&'static str>) -> Result<RxSnapshot, String> {
    let mut fates = Vec::with_capacity(r.fates.len().min(accounting::MAX_RECORDS));
    for (flow, seq, f) in r.fates.iter().take(accounting::MAX_RECORDS) {
        let fate = match f.as_str() {
            "corrupted" => RxFate::Corrupted,
            m if m.starts_with("merged:") => RxFate::Merged {
                with: m["merged:".len()..]
                    .parse()
                    .map_err(|_| format!("a receiver's fate \"{}\"", aurora_topo::escape(m)))?,
            },
            other => RxFate::Receiver(reason(known, other)?),
        };
        fates.push((
            Tag {
                flow: *flow,
                seq: *seq,
            },
            fate,
        ));
    }
    let mut untagged = Vec::new();
    for (why, n) in &r.untagged {
        untagged.push((reason(known, why)?, *n));
    }
    Ok(RxSnapshot {
        highest: r.highest.clone(),
        fates,
        in_progress: r
            .in_progress
            .iter()
            .map(|&(flow, seq)| Tag { flow, seq })
            .collect(),
        untagged,
        overflow: r.overflow,
    })
}

/// The joined books as text.
pub fn text(r: &BooksReport) -> String {
    let mut s = format!(
        "books of {} report{} (nodes {})\n\n",
        r.reports.len(),
        if r.reports.len() == 1 { "" } else { "s" },
        r.nodes.join(", ")
    );
    if r.pvcs.is_empty() && r.ip_pvcs.is_empty() && r.atomic_flows.is_empty() {
        s += "no PVC or flow balanced\n";
    }
    if !r.pvcs.is_empty() {
        s += &crate::run::pvcs_text(&r.pvcs, false);
        s += "(in flight: after the last PDU its receiver saw, on the way when the processes stopped)\n";
    }
    if !r.ip_pvcs.is_empty() {
        let t = crate::ip_books::text(&r.ip_pvcs);
        s += if r.pvcs.is_empty() {
            t.trim_start()
        } else {
            &t
        };
        s += "(IP PVCs by AAL5 end cells; in flight: in ports, on lines, or unread in a ring or socket when the processes stopped)\n";
    }
    if !r.atomic_flows.is_empty() {
        s += &crate::atomic_report::flows_text(&r.atomic_flows);
        s += "(ATOMIC flows by packet; in flight: in ports, on lines, waiting for a route, or unread in a socket when the processes stopped)\n";
    }
    for (pvc, n) in &r.placed_by_transit {
        s += &format!(
            "({n} PDUs of {pvc} placed by cells lost between processes, one cell at least each: \
             an upper bound, which a loss no process recorded could hide behind)\n"
        );
    }
    for (flow, n) in &r.atomic_placed_by_transit {
        let flow = aurora_topo::escape(flow);
        s += &format!(
            "({n} packets of ATOMIC flow {flow} placed by frames lost between processes: an upper \
             bound, which a loss no process recorded could hide behind)\n"
        );
    }
    s += &crate::run::cell_losses_text(&r.cell_losses);
    for n in &r.notes {
        s += &format!("note: {n}\n");
    }
    if let Some(p) = r.problem() {
        s += &format!("{p}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// h1 sends 10 PDUs through sw to h2; h2 delivers 0, 1 and 6 to 9;
    /// sw's port dropped a cell of PDU 2; PDUs 3 to 5 have no outcome
    /// unless h2's port counted `transit` cells lost on their way.
    fn run(transit: u64) -> Vec<(String, ProcessBooks)> {
        let pvcs = vec![PvcPath {
            name: "p".into(),
            flow: 0,
            from: "h1".into(),
            to: "h2".into(),
            arrivals: vec![("sw".into(), 0), ("h2".into(), 0)],
            departures: vec![("h1".into(), 0), ("sw".into(), 1)],
        }];
        let common = |nodes: &[&str], epoch| ProcessBooks {
            topology: "0000abcd".into(),
            epoch_unix_ns: epoch,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            pvcs: pvcs.clone(),
            ..ProcessBooks::default()
        };
        let mut h1 = common(&["h1"], 1_000);
        h1.sent = vec![("p".into(), 10)];
        let mut sw = common(&["sw"], 500);
        sw.charged = vec![Charged {
            flow: 0,
            first: 2,
            count: 1,
            at_ns: 40,
            at: at("sw", 1, "out"),
            reason: "tail_drop".into(),
        }];
        sw.cells = vec![Cells {
            at: at("sw", 1, "out"),
            reason: "tail_drop".into(),
            cells: 1,
        }];
        let mut h2 = common(&["h2"], 2_000);
        h2.received = vec![Received {
            pvc: "p".into(),
            delivered: 6,
            highest: vec![(0, 9)],
            fates: vec![],
            in_progress: vec![],
            untagged: vec![],
            overflow: 0,
        }];
        if transit > 0 {
            h2.transit = vec![Transit {
                node: "h2".into(),
                port: 0,
                cells: transit,
                before: 0,
                restarts: 0,
            }];
        }
        vec![
            ("h1.json".into(), h1),
            ("sw.json".into(), sw),
            ("h2.json".into(), h2),
        ]
    }

    /// A row's losses as (place, reason, count).
    fn losses_of(p: &PvcRow) -> Vec<(&str, &str, u64)> {
        p.losses
            .iter()
            .map(|l| (l.at.as_str(), l.reason.as_str(), l.count))
            .collect()
    }

    #[test]
    fn losses_in_each_process_and_between_them_balance() {
        let r = join(&run(7)).unwrap();
        let p = &r.pvcs[0];
        assert_eq!((p.sent, p.delivered, p.lost, p.in_flight), (10, 6, 4, 0));
        assert_eq!(p.unaccounted, 0);
        let losses = losses_of(p);
        assert_eq!(
            losses,
            [
                ("sw:1 out", "tail_drop", 1),
                ("h2:0 in", "lost_in_transit", 3)
            ]
        );
        assert_eq!(r.problem(), None);
        assert_eq!(r.placed_by_transit, [("p".to_string(), 3)]);
    }

    /// Cells the switch sent before h2 listened place PDUs as cells lost
    /// on the way do.
    #[test]
    fn cells_sent_before_the_receiver_listened_place_pdus() {
        let mut parts = run(0);
        parts[2].1.transit = vec![Transit {
            node: "h2".into(),
            port: 0,
            cells: 1,
            before: 2,
            restarts: 0,
        }];
        let r = join(&parts).unwrap();
        let p = &r.pvcs[0];
        assert_eq!(p.unaccounted, 0);
        let at: Vec<(&str, u64)> = p
            .losses
            .iter()
            .map(|l| (l.reason.as_str(), l.count))
            .collect();
        assert_eq!(
            at,
            [
                ("tail_drop", 1),
                ("lost_in_transit", 1),
                ("peer_unreachable", 2)
            ]
        );
    }

    /// PDUs a link took out of a process after the last the next one read
    /// or held unread are lost between them, at the next one's port; those
    /// held unread stay in flight.
    #[test]
    fn pdus_sent_after_the_next_process_stopped_are_lost_between_them() {
        let mut parts = run(7);
        parts[0].1.sent = vec![("p".into(), 14)];
        let c = |node: &str, port, side: &str, last| Crossed {
            at: at(node, port, side),
            flow: 0,
            last,
        };
        // h1's link took out PDUs up to 13, sw read and sent on up to 11,
        // h2 read up to 9 and held 10 unread when it stopped.
        parts[0].1.crossed = vec![c("h1", 0, "out", 13)];
        parts[1].1.crossed = vec![c("sw", 0, "in", 11), c("sw", 1, "out", 11)];
        parts[2].1.crossed = vec![c("h2", 0, "in", 9)];
        parts[2].1.unread = vec![c("h2", 0, "in", 10)];
        let r = join(&parts).unwrap();
        let p = &r.pvcs[0];
        assert_eq!(
            (p.sent, p.delivered, p.lost, p.in_flight, p.unaccounted),
            (14, 6, 7, 1, 0),
            "{p:?}"
        );
        let losses = losses_of(p);
        assert_eq!(
            losses,
            [
                ("sw:0 in", "lost_between_processes", 2),
                ("sw:1 out", "tail_drop", 1),
                ("h2:0 in", "lost_between_processes", 1),
                ("h2:0 in", "lost_in_transit", 3)
            ]
        );
        assert_eq!(r.problem(), None);
        assert!(r.notes.is_empty(), "{:?}", r.notes);
        // Had cells been lost between h1 and sw, a PDU among those placed
        // at h2 could have been lost there: the books say so.
        let mut lossy = parts.clone();
        lossy[1].1.transit = vec![Transit {
            node: "sw".into(),
            port: 0,
            cells: 5,
            before: 0,
            restarts: 0,
        }];
        let r = join(&lossy).unwrap();
        assert_eq!(r.pvcs[0].unaccounted, 0);
        assert_eq!(
            r.notes,
            [
                "on PVC p, of the 1 PDUs placed as lost between processes at h2:0, up to 1 may \
              have been lost earlier on its way, where 5 cells were lost with no tag read \
              (between processes, or with a damaged tag)"
            ]
        );
        // Cells a link counted sent before the far end listened are older
        // than anything read after, unless the process before it started
        // again.
        lossy[1].1.transit[0].cells = 0;
        lossy[1].1.transit[0].before = 5;
        assert!(join(&lossy).unwrap().notes.is_empty());
        lossy[1].1.transit[0].restarts = 1;
        assert_eq!(join(&lossy).unwrap().notes.len(), 2);
        // Reports without the crossings leave the same PDUs in flight.
        for (_, b) in &mut parts {
            (b.crossed, b.unread) = (vec![], vec![]);
        }
        let p = &join(&parts).unwrap().pvcs[0];
        assert_eq!((p.lost, p.in_flight, p.unaccounted), (4, 4, 0), "{p:?}");
    }

    #[test]
    fn a_gap_no_loss_explains_is_unaccounted() {
        // Two cells lost in transit explain two of the three PDUs at most.
        let r = join(&run(2)).unwrap();
        assert_eq!(r.pvcs[0].unaccounted, 1);
        let why = r.problem().unwrap();
        assert!(
            why.contains("PDUs with no outcome on PVC p (1 PDUs)"),
            "{why}"
        );
        let r = join(&run(0)).unwrap();
        assert_eq!(r.pvcs[0].unaccounted, 3);
    }

    /// Two PVCs through h2:0: its count of cells lost on the way goes to
    /// the first in the file, and the second, left unexplained, is told it
    /// may have been its own.
    #[test]
    fn a_count_two_pvcs_share_is_drawn_in_file_order_and_said() {
        let mut parts = run(3);
        let q = PvcPath {
            name: "q".into(),
            flow: 1,
            from: "h1".into(),
            to: "h2".into(),
            arrivals: vec![("sw".into(), 0), ("h2".into(), 0)],
            departures: vec![("h1".into(), 0), ("sw".into(), 1)],
        };
        for (_, b) in &mut parts {
            b.pvcs.push(q.clone());
        }
        parts[0].1.sent.push(("q".into(), 5));
        parts[2].1.received.push(Received {
            pvc: "q".into(),
            delivered: 2,
            highest: vec![(1, 4)],
            fates: vec![],
            in_progress: vec![],
            untagged: vec![],
            overflow: 0,
        });
        let r = join(&parts).unwrap();
        assert_eq!(r.pvcs[0].unaccounted, 0);
        assert_eq!(r.pvcs[1].unaccounted, 3);
        assert_eq!(
            r.notes,
            [
                "PVC q's PDUs with no outcome may be explained by cells lost between processes \
              at h2:0, which the books charged to PVC p first"
            ]
        );
        assert!(r.problem().unwrap().contains("on PVC q (3 PDUs)"));
    }

    /// The books' part of a report, byte for byte: what `aurora books`
    /// reads from another build must not change by accident.
    #[test]
    fn the_books_format_is_fixed() {
        let mut parts = run(7);
        let (_, mut b) = parts.remove(1);
        b.untagged = vec![Untagged {
            at: at("sw", 1, "out"),
            reason: "tail_drop".into(),
            vpi: 0,
            vci: 40,
            cells: 2,
            flow: Some(0),
        }];
        b.transit = vec![Transit {
            node: "sw".into(),
            port: 0,
            cells: 1,
            before: 2,
            restarts: 3,
        }];
        let c = |side: &str, last| Crossed {
            at: at("sw", 1, side),
            flow: 0,
            last,
        };
        b.crossed = vec![c("out", 11)];
        b.unread = vec![c("in", 12)];
        // A report without IP books (an earlier build's) reads as one
        // with none; without traffic PVCs' crossings or departures, too.
        let mut b0 = b.clone();
        (b0.crossed, b0.unread) = (vec![], vec![]);
        let old = serde_json::to_string(&b0).unwrap();
        let old = old.replace(r#","crossed":[],"unread":[],"overflow""#, r#","overflow""#);
        let old = old.replace(r#","departures":[["h1",0],["sw",1]]"#, "");
        let old = old.replace(r#","ip":{"directions":[],"sent":[],"received":[],"dropped":[],"in_flight":[],"crossed":[],"unread":[],"ports":[]}"#, "");
        // Nor ATOMIC books.
        let old = old.replace(r#","atomic":{"flows":[],"sent":[],"received":[],"dropped":[],"in_flight":[],"crossed":[],"unread":[],"links":[]}"#, "");
        assert!(!old.contains("atomic") && !old.contains("\"ip\""), "{old}");
        assert!(
            !old.contains("crossed") && !old.contains("departures"),
            "{old}"
        );
        let back: ProcessBooks = serde_json::from_str(&old).unwrap();
        assert!(back.ip.directions.is_empty() && back.ip.crossed.is_empty());
        assert!(back.crossed.is_empty() && back.pvcs[0].departures.is_empty());
        assert_eq!(back.atomic, crate::books_atomic::AtomicBooks::default());
        use crate::books_ip::{Direction, Dropped, Ends, Hop, PortCells, Received as IpReceived};
        b.ip.directions = vec![Direction {
            name: "p h1 -> h2".into(),
            hops: vec![Hop {
                from: "sw".into(),
                from_port: 1,
                to: "h2".into(),
                to_port: 0,
                vpi: 0,
                vci: 41,
            }],
        }];
        b.ip.sent = vec![("p h1 -> h2".into(), 9)];
        b.ip.received = vec![IpReceived {
            name: "p h1 -> h2".into(),
            delivered: 7,
            failed: 1,
        }];
        b.ip.dropped = vec![Dropped {
            at: at("sw", 1, "out"),
            reason: "tail_drop".into(),
            vpi: 0,
            vci: 41,
            ends: 1,
        }];
        let e = |side: &str, n| Ends {
            at: at("sw", 1, side),
            vpi: 0,
            vci: 41,
            ends: n,
        };
        b.ip.in_flight = vec![e("out", 2)];
        b.ip.crossed = vec![e("out", 3)];
        b.ip.unread = vec![e("in", 4)];
        b.ip.ports = vec![PortCells {
            node: "sw".into(),
            port: 1,
            sent: 5,
            arrived: 6,
            lost: 7,
            before: 8,
            hec: 9,
        }];
        use crate::books_atomic::{
            FlowAt, FlowCount, FlowDropped, FlowName, FlowReceived, FrameLink,
        };
        let (from, flow) = ("a".to_string(), 1);
        let count = |n| FlowCount {
            from: from.clone(),
            flow,
            n,
        };
        let flow_at = |side: &str, n| FlowAt {
            from: from.clone(),
            flow,
            at: at("sw", 2, side),
            n,
        };
        b.atomic.flows = vec![FlowName {
            from: from.clone(),
            flow,
            to: "b".into(),
        }];
        b.atomic.sent = vec![count(10)];
        b.atomic.received = vec![FlowReceived {
            from: from.clone(),
            flow,
            delivered: 6,
            corrupted: 0,
        }];
        b.atomic.dropped = vec![FlowDropped {
            from: from.clone(),
            flow,
            at: "m.0.0:1 in".into(),
            reason: "no_channel".into(),
            n: 1,
        }];
        b.atomic.in_flight = vec![count(2)];
        b.atomic.crossed = vec![flow_at("out", 3)];
        b.atomic.unread = vec![flow_at("in", 1)];
        b.atomic.links = vec![FrameLink {
            node: "sw".into(),
            port: 2,
            here: "sw:2".into(),
            peer: "m.0.0:West".into(),
            sent: 3,
            unreachable: 4,
            too_long: 5,
            arrived: 6,
            lost: 7,
            before: 8,
        }];
        let want = concat!(
            r#"{"topology":"0000abcd","epoch_unix_ns":500,"nodes":["sw"],"#,
            r#""pvcs":[{"name":"p","flow":0,"from":"h1","to":"h2","arrivals":[["sw",0],["h2",0]],"#,
            r#""departures":[["h1",0],["sw",1]]}],"sent":[],"#,
            r#""received":[],"charged":[{"flow":0,"first":2,"count":1,"at_ns":40,"#,
            r#""at":{"node":"sw","port":1,"side":"out"},"reason":"tail_drop"}],"#,
            r#""untagged":[{"at":{"node":"sw","port":1,"side":"out"},"reason":"tail_drop","#,
            r#""vpi":0,"vci":40,"cells":2,"flow":0}],"#,
            r#""cells":[{"at":{"node":"sw","port":1,"side":"out"},"reason":"tail_drop","cells":1}],"#,
            r#""transit":[{"node":"sw","port":0,"cells":1,"before":2,"restarts":3}],"#,
            r#""crossed":[{"at":{"node":"sw","port":1,"side":"out"},"flow":0,"last":11}],"#,
            r#""unread":[{"at":{"node":"sw","port":1,"side":"in"},"flow":0,"last":12}],"overflow":0,"#,
            r#""ip":{"directions":[{"name":"p h1 -> h2","hops":[{"from":"sw","from_port":1,"#,
            r#""to":"h2","to_port":0,"vpi":0,"vci":41}]}],"sent":[["p h1 -> h2",9]],"#,
            r#""received":[{"name":"p h1 -> h2","delivered":7,"failed":1}],"#,
            r#""dropped":[{"at":{"node":"sw","port":1,"side":"out"},"reason":"tail_drop","vpi":0,"vci":41,"ends":1}],"#,
            r#""in_flight":[{"at":{"node":"sw","port":1,"side":"out"},"vpi":0,"vci":41,"ends":2}],"#,
            r#""crossed":[{"at":{"node":"sw","port":1,"side":"out"},"vpi":0,"vci":41,"ends":3}],"#,
            r#""unread":[{"at":{"node":"sw","port":1,"side":"in"},"vpi":0,"vci":41,"ends":4}],"#,
            r#""ports":[{"node":"sw","port":1,"sent":5,"arrived":6,"lost":7,"before":8,"hec":9}]},"#,
            r#""atomic":{"flows":[{"from":"a","flow":1,"to":"b"}],"sent":[{"from":"a","flow":1,"n":10}],"#,
            r#""received":[{"from":"a","flow":1,"delivered":6,"corrupted":0}],"#,
            r#""dropped":[{"from":"a","flow":1,"at":"m.0.0:1 in","reason":"no_channel","n":1}],"#,
            r#""in_flight":[{"from":"a","flow":1,"n":2}],"#,
            r#""crossed":[{"from":"a","flow":1,"at":{"node":"sw","port":2,"side":"out"},"n":3}],"#,
            r#""unread":[{"from":"a","flow":1,"at":{"node":"sw","port":2,"side":"in"},"n":1}],"#,
            r#""links":[{"node":"sw","port":2,"here":"sw:2","peer":"m.0.0:West","sent":3,"#,
            r#""unreachable":4,"too_long":5,"arrived":6,"lost":7,"before":8}]}}"#
        );
        assert_eq!(serde_json::to_string(&b).unwrap(), want);
        let back: ProcessBooks = serde_json::from_str(want).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), want);
    }

    #[test]
    fn a_missing_report_or_a_mismatch_is_said() {
        let parts = run(7);
        let r = join(&parts[..2]).unwrap();
        assert!(r.pvcs.is_empty());
        assert_eq!(
            r.problem().unwrap(),
            "PVC p cannot be balanced: no report ran h2"
        );
        let mut no_count = parts.clone();
        no_count[0].1.sent.clear();
        assert_eq!(
            join(&no_count).unwrap().problem().unwrap(),
            "PVC p cannot be balanced: the report that ran h1 has no count of what it sent"
        );
        let mut twice = parts.clone();
        twice.push(parts[0].clone());
        assert!(join(&twice).unwrap_err().contains("node h1 is in both"));
        let mut other = parts.clone();
        other[1].1.topology = "00000001".into();
        assert!(join(&other)
            .unwrap_err()
            .contains("different topology files"));
        let mut bad = parts;
        bad[1].1.charged[0].at.side = "sideways".into();
        assert!(join(&bad).unwrap_err().contains("side \"sideways\""));
        assert!(join(&[]).is_err());
    }

    #[test]
    fn a_loss_is_charged_once_at_its_earliest_place() {
        // The sender's port lost a cell of PDU 2 too, later by the wall
        // clock than the switch's drop: the switch's stands.
        let mut parts = run(7);
        parts[0].1.charged = vec![Charged {
            flow: 0,
            first: 2,
            count: 1,
            // h1 began 500 ns after sw: 600 ns after sw's epoch.
            at_ns: 100,
            at: at("h1", 0, "out"),
            reason: "link_loss".into(),
        }];
        let r = join(&parts).unwrap();
        let p = &r.pvcs[0];
        assert_eq!(p.lost, 4);
        assert_eq!(p.losses[0].at, "sw:1 out");
        // Earlier by the wall clock, the sender's is charged instead.
        parts[0].1.charged[0].at_ns = -520;
        let r = join(&parts).unwrap();
        assert_eq!(r.pvcs[0].losses[0].at, "h1:0 out");
        assert_eq!(r.pvcs[0].lost, 4);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// What became of one PDU in a simulated run.
        #[derive(Clone, Copy, Debug)]
        enum Fate {
            Delivered,
            /// Dropped at h1's port, at this time of h1's clock.
            AtH1(i64),
            /// Dropped at sw's port, at this time of sw's clock.
            AtSw(i64),
            /// Dropped at both; the earlier by the wall clock stands.
            Both(i64, i64),
            /// One of its cells lost between sw and h2.
            Transit,
        }

        fn fate() -> impl Strategy<Value = Fate> {
            prop_oneof![
                3 => Just(Fate::Delivered),
                1 => (0i64..1_000_000).prop_map(Fate::AtH1),
                1 => (0i64..1_000_000).prop_map(Fate::AtSw),
                1 => (0i64..1_000_000, 0i64..1_000_000).prop_map(|(a, b)| Fate::Both(a, b)),
                1 => Just(Fate::Transit),
            ]
        }

        proptest! {
            /// A run simulated PDU by PDU, its books split between three
            /// processes that began at different times and stopped one
            /// after another: the join finds every PDU's outcome, each loss
            /// at its earliest place.
            #[test]
            fn the_join_finds_what_happened(
                fates in proptest::collection::vec(fate(), 1..200),
                // After the last PDU h2 read, in order: PDUs h2 left
                // unread, that sw sent after h2 stopped, that sw's port
                // held, that h1 sent after sw stopped, that h1's port held.
                stops in (0u64..10, 0u64..10, 0u64..10, 0u64..10, 0u64..10),
                epochs in (0u64..1_000_000, 0u64..1_000_000, 0u64..1_000_000),
                // Of h2's count of cells lost between processes, the share
                // that were sent before it listened, and cells to spare.
                (before_share, spare) in (0u64..=100, 0u64..5),
            ) {
                let mut parts = run(0);
                let n = fates.len() as u64;
                let (unread, to_h2, in_sw, to_sw, in_h1) = stops;
                let after = unread + to_h2 + in_sw + to_sw + in_h1;
                parts[0].1.sent = vec![("p".into(), n + after)];
                let last = |k: u64, node: &str, port, side: &str| Crossed {
                    at: at(node, port, side),
                    flow: 0,
                    last: n - 1 + k,
                };
                parts[0].1.crossed = vec![last(unread + to_h2 + in_sw + to_sw, "h1", 0, "out")];
                parts[1].1.crossed = vec![
                    last(unread + to_h2 + in_sw, "sw", 0, "in"),
                    last(unread + to_h2, "sw", 1, "out"),
                ];
                parts[2].1.crossed = vec![last(0, "h2", 0, "in")];
                if unread > 0 {
                    parts[2].1.unread = vec![last(unread, "h2", 0, "in")];
                }
                parts[0].1.epoch_unix_ns = epochs.0;
                parts[1].1.epoch_unix_ns = epochs.1;
                parts[2].1.epoch_unix_ns = epochs.2;
                parts[1].1.charged.clear();
                let charge = |first: u64, ns: i64, node: &str, port: u16| Charged {
                    flow: 0,
                    first,
                    count: 1,
                    at_ns: ns,
                    at: at(node, port, "out"),
                    reason: "tail_drop".into(),
                };
                let (mut h1, mut sw, mut transit) = (0u64, 0u64, 0u64);
                let mut delivered = 0;
                for (seq, f) in fates.iter().enumerate() {
                    let seq = seq as u64;
                    // The last PDU before those in flight arrives, so the
                    // receiver has seen it.
                    let f = if seq == n - 1 { Fate::Delivered } else { *f };
                    match f {
                        Fate::Delivered => delivered += 1,
                        Fate::AtH1(t) => {
                            parts[0].1.charged.push(charge(seq, t, "h1", 0));
                            h1 += 1;
                        }
                        Fate::AtSw(t) => {
                            // Consecutive PDUs doomed at sw go as one run.
                            match parts[1].1.charged.last_mut() {
                                Some(c) if c.first + c.count == seq
                                    && c.at.node == "sw"
                                    && matches!(fates[seq as usize - 1], Fate::AtSw(_)) =>
                                {
                                    c.count += 1;
                                    c.at_ns = c.at_ns.min(t);
                                }
                                _ => parts[1].1.charged.push(charge(seq, t, "sw", 1)),
                            }
                            sw += 1;
                        }
                        Fate::Both(a, b) => {
                            parts[0].1.charged.push(charge(seq, a, "h1", 0));
                            parts[1].1.charged.push(charge(seq, b, "sw", 1));
                            let wall = |e: u64, t: i64| i128::from(e) + i128::from(t);
                            // On a tie the lesser place: h1 comes first.
                            if wall(epochs.0, a) <= wall(epochs.1, b) { h1 += 1 } else { sw += 1 }
                        }
                        Fate::Transit => transit += 1,
                    }
                }
                parts[2].1.received[0].delivered = delivered;
                parts[2].1.received[0].highest = vec![(0, n - 1)];
                let before = transit * before_share / 100;
                parts[2].1.transit = vec![Transit {
                    node: "h2".into(),
                    port: 0,
                    cells: transit - before + spare,
                    before,
                    restarts: 0,
                }];
                let r = join(&parts).unwrap();
                let p = &r.pvcs[0];
                prop_assert_eq!(p.unaccounted, 0);
                prop_assert_eq!(p.delivered, delivered);
                prop_assert_eq!(p.in_flight, unread + in_sw + in_h1);
                let count = |place: &str| {
                    p.losses.iter().filter(|l| l.at == place).map(|l| l.count).sum::<u64>()
                };
                prop_assert_eq!(count("h1:0 out"), h1);
                prop_assert_eq!(count("sw:1 out"), sw);
                prop_assert_eq!(count("h2:0 in"), transit + to_h2);
                prop_assert_eq!(count("sw:0 in"), to_sw);
                // Cells lost on the way are drawn on first.
                let why = |reason: &str| {
                    p.losses.iter().filter(|l| l.reason == reason).map(|l| l.count).sum::<u64>()
                };
                let lost_on_way = transit.min(transit - before + spare);
                prop_assert_eq!(why("lost_in_transit"), lost_on_way);
                prop_assert_eq!(why("peer_unreachable"), transit - lost_on_way);
                let placed = r.placed_by_transit.first().map_or(0, |x| x.1);
                prop_assert_eq!(placed, transit);
                prop_assert_eq!(r.problem(), None);
            }

            /// Whatever numbers a report holds, the join answers without
            /// panicking: books or one sentence.
            #[test]
            fn any_numbers_are_answered(
                sent in any::<u64>(),
                delivered in any::<u64>(),
                highest in any::<u64>(),
                first in any::<u64>(),
                count in 0u64..10_000,
                at_ns in any::<i64>(),
                cells in any::<u64>(),
                epoch in any::<u64>(),
                port in any::<u16>(),
                lasts in any::<(u64, u64, u64)>(),
            ) {
                let mut parts = run(cells);
                let last = |node: &str, side: &str, last| Crossed {
                    at: at(node, 0, side),
                    flow: 0,
                    last,
                };
                parts[0].1.crossed = vec![last("h1", "out", lasts.0)];
                parts[1].1.crossed = vec![last("sw", "in", lasts.1)];
                parts[1].1.unread = vec![last("sw", "in", lasts.2)];
                parts[0].1.sent = vec![("p".into(), sent)];
                parts[0].1.epoch_unix_ns = epoch;
                parts[1].1.charged[0].first = first;
                parts[1].1.charged[0].count = count;
                parts[1].1.charged[0].at_ns = at_ns;
                parts[1].1.charged[0].at.port = port;
                parts[1].1.cells[0].cells = cells;
                parts[2].1.received[0].delivered = delivered;
                parts[2].1.received[0].highest = vec![(0, highest)];
                parts[2].1.received[0].untagged = vec![("crc".into(), cells)];
                if let Ok(r) = join(&parts) {
                    let _ = text(&r);
                }
            }
        }
    }
}
