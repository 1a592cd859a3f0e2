//! The signalling part of a run's report (`[[app]]`): per application, its
//! set-up, refresh and tear-down events with their latencies, the relays
//! and VCIs of its VC, what the refresh daemon did, what of the VC is
//! left at the end (relay entries and table entries: none once it has
//! closed), and its data's books by PDU:
//! `sent = delivered + corrupted + each named loss + in flight`, with
//! anything left over `unaccounted`, which fails the run. Cells a relay
//! dropped while it had lost its entry (a restart) are named there, as
//! `unknown_vc`.

use aurora_engine::Engine;
use aurora_net::accounting::{self, Ledger, Place, Side};
use aurora_net::avlink::Avlink;
use aurora_net::vunet::VunetLink;
use aurora_net::Frame;
use aurora_signal::host::SignalHost;
use aurora_time::Instant;
use aurora_topo::Network;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::run::LossRow;

/// The signalling part of a report.
#[derive(Debug, Serialize)]
pub struct SignalReport {
    /// Per application, hosts in file order and each host's in file order.
    pub apps: Vec<AppRow>,
    /// Cells signalling hosts dropped on arrival: failed the HEC check.
    pub hec_dropped: u64,
    /// Data cells signalling hosts got on VCIs no one opened to them.
    pub unknown_vc: u64,
    /// VCI-table operations (releases, renewals) that failed.
    pub table_errors: u64,
}

/// One application.
#[derive(Debug, Serialize)]
pub struct AppRow {
    /// Its name.
    pub name: String,
    /// Its host.
    pub host: String,
    /// Its destination.
    pub to: String,
    /// The relaying links its VC crosses, nearest first.
    pub relays: Vec<String>,
    /// Its VCI on each segment (into each relay, then into the
    /// destination); empty if it never opened.
    pub vcis: Vec<u16>,
    /// Its events.
    pub events: Vec<EventRow>,
    /// Refresh rounds done, failed, and entries they wrote again.
    pub refreshes: u64,
    /// Refresh rounds that failed.
    pub refresh_failures: u64,
    /// Entries the refresh rounds found lost or wrong and wrote again.
    pub rewritten: u64,
    /// At the end: relays still holding an entry of its VC.
    pub relay_entries_left: u64,
    /// At the end: VCI-table entries of its VC still held.
    pub table_entries_left: u64,
    /// PDUs sent.
    pub sent: u64,
    /// PDUs delivered intact.
    pub delivered: u64,
    /// PDUs that arrived damaged.
    pub corrupted: u64,
    /// PDUs lost, in all.
    pub lost: u64,
    /// Losses by place and reason.
    pub losses: Vec<LossRow>,
    /// PDUs still on their way at the end.
    pub in_flight: u64,
    /// PDUs with no outcome; anything but 0 fails the run.
    pub unaccounted: i64,
}

/// A set-up, refresh round or tear-down.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct EventRow {
    /// `open`, `refresh` or `close`.
    pub kind: String,
    /// When it started, ms into the run.
    pub started_ms: f64,
    /// How long it took, microseconds.
    pub latency_us: f64,
    /// Entries written again (refresh rounds).
    pub rewritten: u64,
    /// Why it failed, if it did.
    pub failure: Option<String>,
}

/// One process's side of the applications (`aurora node`): what its
/// signalling hosts' apps did and what arrived at them. The books need
/// the whole network's ledger, so a process reports counts only.
#[derive(Debug, Serialize)]
pub struct EndRow {
    /// The host.
    pub host: String,
    /// `sends` (an app of this host) or `receives` (a flow opened to it).
    pub role: String,
    /// The app's name, or `flow N` for what arrived.
    pub name: String,
    /// The app's events (sending side).
    pub events: Vec<EventRow>,
    /// PDUs sent (sending side).
    pub sent: u64,
    /// Refresh rounds and entries rewritten (sending side).
    pub refreshes: u64,
    /// Entries the refresh rounds wrote again.
    pub rewritten: u64,
    /// The VCI it arrived on (receiving side).
    pub vci: u16,
    /// PDUs delivered intact, missing, and damaged or out of order
    /// (receiving side).
    pub delivered: u64,
    /// PDUs missing from the sequence.
    pub missing: u64,
    /// PDUs damaged or out of order.
    pub corrupted: u64,
}

/// The rows of signalling hosts `hosts` (name and node).
pub fn ends<'a>(hosts: impl Iterator<Item = (&'a str, &'a SignalHost)>) -> Vec<EndRow> {
    let mut rows = Vec::new();
    for (name, h) in hosts {
        for (i, a) in h.apps().iter().enumerate() {
            let (refreshes, _, rewritten) = a.refreshes();
            rows.push(EndRow {
                host: name.to_string(),
                role: "sends".into(),
                name: a.spec().name.clone(),
                events: a.events().iter().map(event_row).collect(),
                sent: h.sent(i),
                refreshes,
                rewritten,
                vci: a.vc().map_or(0, |v| v.send_vci()),
                delivered: 0,
                missing: 0,
                corrupted: 0,
            });
        }
        for (flow, vci, rx) in h.sessions() {
            rows.push(EndRow {
                host: name.to_string(),
                role: "receives".into(),
                name: format!("flow {flow}"),
                events: Vec::new(),
                sent: 0,
                refreshes: 0,
                rewritten: 0,
                vci,
                delivered: rx.delivered,
                missing: rx.missing,
                corrupted: rx.corrupted + rx.out_of_order,
            });
        }
    }
    rows
}

/// A process's app rows as text.
pub fn ends_text(rows: &[EndRow]) -> String {
    let mut s = String::new();
    for r in rows {
        if r.role == "sends" {
            s += &format!(
                "app {} on {}: sent {} PDUs on VCI {}, {} refreshes, {} entries rewritten\n",
                r.name, r.host, r.sent, r.vci, r.refreshes, r.rewritten
            );
            for e in &r.events {
                s += &event_line(e);
            }
        } else {
            s += &format!(
                "{} at {} on VCI {}: {} PDUs delivered, {} missing, {} damaged or out of order\n",
                r.name, r.host, r.vci, r.delivered, r.missing, r.corrupted
            );
        }
    }
    s
}

/// One event as an indented line.
pub(crate) fn event_line(e: &EventRow) -> String {
    format!(
        "    {:<8} at {:>9.3} ms, took {:>9.1} us{}{}\n",
        e.kind,
        e.started_ms,
        e.latency_us,
        if e.rewritten > 0 {
            format!(", rewrote {}", e.rewritten)
        } else {
            String::new()
        },
        e.failure
            .as_ref()
            .map_or(String::new(), |f| format!(", failed: {f}"))
    )
}

pub(crate) fn event_row(e: &aurora_signal::host::Event) -> EventRow {
    EventRow {
        kind: e.kind.name().into(),
        started_ms: e.started.as_nanos() as f64 / 1e6,
        latency_us: e.latency().as_nanos() as f64 / 1e3,
        rewritten: e.rewritten,
        failure: e.failure.clone(),
    }
}

/// The report, if the network has signalling hosts; `names` names the
/// nodes by number, `end` is when the run ended.
pub fn report<F: Frame>(
    net: &Network<F>,
    ledger: &Ledger,
    names: &BTreeMap<u32, &str>,
    end: Instant,
) -> Option<SignalReport> {
    let sim: &Engine<F> = &net.sim;
    let hosts: Vec<(&str, &SignalHost)> = net
        .hosts
        .iter()
        .filter_map(|(n, id)| Some((n.as_str(), sim.node::<SignalHost>(*id)?)))
        .collect();
    if hosts.is_empty() {
        return None;
    }
    let relays: Vec<(&str, &VunetLink)> = net
        .switches
        .iter()
        .filter_map(|(n, id, _)| {
            let relay = sim
                .node::<VunetLink>(*id)
                .or_else(|| sim.node::<Avlink>(*id).map(Avlink::relay))?;
            Some((n.as_str(), relay))
        })
        .collect();
    let mut r = SignalReport {
        apps: Vec::new(),
        hec_dropped: 0,
        unknown_vc: 0,
        table_errors: 0,
    };
    let now = end.as_nanos().max(0) as u64;
    for (name, h) in &hosts {
        let (hec, unknown, table) = h.drops();
        r.hec_dropped += hec;
        r.unknown_vc += unknown;
        r.table_errors += table;
        let held = h.table().entries(now).unwrap_or_default();
        // What the host's VCs not yet closed hold: a closed VC whose VCIs a
        // later one of the same host took again has not left those behind.
        let live: Vec<&aurora_signal::conn::Vc> = h
            .apps()
            .iter()
            .filter(|a| !a.is_closed())
            .filter_map(|a| a.vc())
            .collect();
        let live_hops: BTreeSet<(u16, u8, u16)> = live
            .iter()
            .flat_map(|vc| vc.path.hops.iter().zip(&vc.vcis))
            .map(|(hop, &vci)| (hop.relay, hop.side, vci))
            .collect();
        let live_grants: BTreeSet<_> = live.iter().flat_map(|vc| vc.grants()).collect();
        for (i, a) in h.apps().iter().enumerate() {
            let spec = a.spec();
            let relay_of = |id: u16| relays.iter().find(|(_, l)| l.id() == id);
            let vc = a.vc();
            let closed = a.is_closed();
            let relay_entries_left = vc.map_or(0, |vc| {
                vc.path
                    .hops
                    .iter()
                    .zip(&vc.vcis)
                    .filter(|(hop, &vci)| {
                        !(closed && live_hops.contains(&(hop.relay, hop.side, vci)))
                            && relay_of(hop.relay).is_some_and(|(_, l)| {
                                h.key_id().is_some() && l.owner(hop.side, vci) == h.key_id()
                            })
                    })
                    .count() as u64
            });
            let table_entries_left = vc.map_or(0, |vc| {
                let grants = vc.grants();
                held.iter()
                    .filter(|e| {
                        e.owner == h.owner()
                            && grants.contains(&(e.link, e.vci))
                            && !(closed && live_grants.contains(&(e.link, e.vci)))
                    })
                    .count() as u64
            });
            let sent = h.sent(i);
            let to = net.hosts.iter().find(|(n, _)| *n == spec.to);
            let rx = to.and_then(|(_, id)| sim.node::<SignalHost>(*id)?.received(spec.flow));
            let receiver = Place {
                node: to.map_or(0, |(_, id)| id.0),
                port: 0,
                side: Side::In,
            };
            let acct = accounting::reconcile(
                spec.flow,
                sent,
                rx.map_or(0, |(f, _)| f.delivered),
                ledger,
                rx.map(|(_, b)| b),
                receiver,
                &[],
            );
            let (refreshes, refresh_failures, rewritten) = a.refreshes();
            r.apps.push(AppRow {
                name: spec.name.clone(),
                host: name.to_string(),
                to: spec.to.clone(),
                relays: spec
                    .path
                    .hops
                    .iter()
                    .map(|hop| relay_of(hop.relay).map_or("?".into(), |(n, _)| n.to_string()))
                    .collect(),
                vcis: vc.map(|v| v.vcis.clone()).unwrap_or_default(),
                events: a.events().iter().map(event_row).collect(),
                refreshes,
                refresh_failures,
                rewritten,
                relay_entries_left,
                table_entries_left,
                sent,
                delivered: acct.delivered,
                corrupted: acct.corrupted,
                lost: acct.lost_total(),
                losses: crate::run::loss_rows(names, acct.lost.iter()),
                in_flight: acct.in_flight,
                unaccounted: acct.unaccounted,
            });
        }
    }
    Some(r)
}

/// The applications whose books do not balance, in one sentence.
pub fn imbalance(r: &SignalReport) -> Option<String> {
    let bad: Vec<String> = r
        .apps
        .iter()
        .filter(|a| a.unaccounted != 0)
        .map(|a| format!("{} ({})", a.name, a.unaccounted))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "the report does not balance: PDUs with no outcome on app {}; this is a fault of the testbed",
            bad.join(", ")
        )
    })
}

/// The report as text.
pub fn text(r: &SignalReport) -> String {
    let mut s = format!(
        "\n{:<16} {:<8} {:<8} {:>7} {:>9} {:>9} {:>6} {:>8} {:>9} {:>11}\n",
        "app (PDUs)",
        "host",
        "to",
        "sent",
        "delivered",
        "corrupted",
        "lost",
        "in flight",
        "refreshes",
        "unaccounted"
    );
    for a in &r.apps {
        s += &format!(
            "{:<16} {:<8} {:<8} {:>7} {:>9} {:>9} {:>6} {:>8} {:>9} {:>11}\n",
            a.name,
            a.host,
            a.to,
            a.sent,
            a.delivered,
            a.corrupted,
            a.lost,
            a.in_flight,
            a.refreshes,
            a.unaccounted
        );
        s += &format!(
            "    VC through {} on VCIs {:?}; {} entries rewritten; left at the end: {} relay entries, {} table entries\n",
            if a.relays.is_empty() { "-".to_string() } else { a.relays.join(", ") },
            a.vcis,
            a.rewritten,
            a.relay_entries_left,
            a.table_entries_left
        );
        for e in &a.events {
            s += &event_line(e);
        }
        for l in &a.losses {
            s += &format!("    lost {} at {} ({})\n", l.count, l.at, l.reason);
        }
    }
    if r.hec_dropped + r.unknown_vc + r.table_errors > 0 {
        s += &format!(
            "signalling hosts: {} cells failed the HEC check, {} data cells on unknown VCIs, {} table errors\n",
            r.hec_dropped, r.unknown_vc, r.table_errors
        );
    }
    s
}
