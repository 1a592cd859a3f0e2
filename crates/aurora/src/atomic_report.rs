//! The ATOMIC section of a report (`aurora run`, `aurora node`): every
//! AC's mappings (with probes per node), every flow's books
//! (`crate::atomic_books`), every host's route traffic, and the Mosaic
//! nodes' drops by reason.

use std::net::Ipv4Addr;

use aurora_atomic::host::AtomicHost;
use aurora_atomic::mosaic::{Drop, MosaicNode};
use aurora_time::Duration;
use serde::Serialize;

use crate::atomic_books::FrameLedger;
use crate::run::LossRow;

/// One mapping by one AC.
#[derive(Debug, Serialize)]
pub struct MapRow {
    /// The AC's host.
    pub ac: String,
    /// The map's epoch.
    pub epoch: u32,
    /// Mosaic nodes, channels and hosts found.
    pub nodes: usize,
    /// Channels.
    pub channels: usize,
    /// Hosts.
    pub hosts: usize,
    /// Messages the AC sent to map.
    pub probes: u64,
    /// Probes per Mosaic node.
    pub per_node: f64,
    /// Time the mapping took, ms.
    pub ms: f64,
    /// It missed part of the map in use and was not believed: the AC kept
    /// its map and looked again.
    pub doubted: bool,
    /// Answers to this AC's probes and queries that came after their
    /// deadline, over the whole run (the same on each of its rows).
    pub late_answers: u64,
}

/// One flow's books, in packets.
#[derive(Debug, Serialize)]
pub struct FlowRow {
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// The sender's number for the flow (its first is 0; its UDP source
    /// port less 49152).
    pub flow: u16,
    /// Packets sent (0 in a process without the sender).
    pub sent: u64,
    /// Packets delivered intact (0 in a process without the receiver).
    pub delivered: u64,
    /// Delivered damaged (must stay 0).
    pub corrupted: u64,
    /// Dropped, by place and reason.
    pub losses: Vec<LossRow>,
    /// Their sum.
    pub lost: u64,
    /// On their way when the run ended: in a port, on a line, or at the
    /// sender waiting for a route.
    pub in_flight: u64,
    /// `sent − delivered − corrupted − lost − in_flight`: 0 when the books
    /// balance. Absent (null) in the report of an `aurora node` process,
    /// which sees only its part of a flow.
    pub unaccounted: Option<i64>,
}

/// One host's routing figures.
#[derive(Debug, Serialize)]
pub struct HostRow {
    /// Host.
    pub host: String,
    /// The AC it uses (its host's name), if any.
    pub ac: Option<String>,
    /// Route requests sent, routes learned, stale routes dropped, packets
    /// with no route.
    pub routes: [u64; 4],
    /// It became an AC on its own.
    pub took_over: u64,
}

/// The report.
#[derive(Debug, Serialize)]
pub struct AtomicReport {
    /// "virtual time" or "real time".
    pub mode: String,
    /// Seconds run.
    pub virtual_secs: f64,
    /// Events handled (virtual time).
    pub events: u64,
    /// Frames dropped at full link buffers (real time).
    pub overflow: u64,
    /// Mosaic nodes and hosts.
    pub size: (usize, usize),
    /// Every mapping of every AC.
    pub mappings: Vec<MapRow>,
    /// Flows.
    pub flows: Vec<FlowRow>,
    /// Hosts.
    pub hosts: Vec<HostRow>,
    /// Mosaic node drops by reason (summed over nodes).
    pub node_drops: Vec<(String, u64)>,
}

/// The ATOMIC part of a network after a run on `e`: every AC's mappings,
/// every flow's books (with `ledger` the drops the engine's tap showed,
/// places named by `names`; a verdict on each only if the engine held the
/// whole network, `whole`), every host (those inside routers too) and the
/// Mosaic nodes' drops.
pub(crate) fn report_on<F: aurora_net::Frame>(
    a: &aurora_topo::AtomicPart,
    e: &aurora_engine::Engine<F>,
    duration: Duration,
    (ledger, names): (&FrameLedger, &dyn Fn(u32) -> String),
    whole: bool,
) -> AtomicReport {
    let hosts: Vec<(Ipv4Addr, &AtomicHost)> = crate::atomic_books::hosts(a, e)
        .into_iter()
        .map(|(addr, _, h)| (addr, h))
        .collect();
    let mosaics: Vec<&MosaicNode> = a.mosaic.iter().filter_map(|(_, id)| e.node(*id)).collect();
    let books = crate::atomic_books::books(a, e, ledger, names);
    let flows = books
        .into_iter()
        .map(|(_, _, row)| FlowRow {
            unaccounted: row.unaccounted.filter(|_| whole),
            ..row
        })
        .collect();
    let mut r = report(&a.net, &hosts, &mosaics, duration, flows);
    r.events = e.events();
    // Frames dropped at full links: those leaving an ATOMIC node, or a
    // router's port on the LAN.
    let atomic_port = |id: aurora_engine::NodeId, port: u16| {
        a.mosaic.iter().any(|m| m.1 == id)
            || a.hosts.iter().any(|h| h.2 == id)
            || e.node::<aurora_atomic::gateway::Gateway>(id)
                .is_some_and(|g| usize::from(port) >= aurora_net::Node::ports(g.ip()))
    };
    r.overflow = e
        .links()
        .iter()
        .filter(|((id, port), _)| atomic_port(*id, *port))
        .map(|(_, c)| c.overflow)
        .sum();
    r
}

fn report(
    net: &aurora_topo::AtomicNet,
    hosts_in: &[(Ipv4Addr, &AtomicHost)],
    mosaics: &[&MosaicNode],
    duration: Duration,
    flows: Vec<FlowRow>,
) -> AtomicReport {
    let name_of = |addr: Ipv4Addr| {
        net.hosts
            .iter()
            .find(|h| h.1.addr == addr)
            .map(|h| h.0.clone())
            .unwrap_or_else(|| addr.to_string())
    };
    let id_name = |id: u64| {
        hosts_in
            .iter()
            .find(|(_, h)| h.ac().is_some_and(|ac| ac.id() == id))
            .map(|(a, _)| name_of(*a))
    };
    let mut mappings = Vec::new();
    let mut hosts = Vec::new();
    for &(addr, h) in hosts_in {
        if let Some(ac) = h.ac() {
            for s in ac.history() {
                mappings.push(MapRow {
                    ac: name_of(addr),
                    epoch: s.epoch,
                    nodes: s.nodes,
                    channels: s.channels,
                    hosts: s.hosts,
                    probes: s.probes,
                    per_node: s.probes as f64 / s.nodes.max(1) as f64,
                    ms: (s.finished - s.started).as_nanos() as f64 / 1e6,
                    doubted: s.doubted,
                    late_answers: ac.late_answers,
                });
            }
        }
        let c = h.counters();
        hosts.push(HostRow {
            host: name_of(addr),
            ac: h
                .server()
                .map(|(id, _, addr)| id_name(id).unwrap_or_else(|| name_of(addr))),
            routes: [
                c.route_requests,
                c.routes_learned,
                c.routes_dropped,
                c.no_route,
            ],
            took_over: c.ac_takeovers,
        });
    }
    let mut drops = [0u64; Drop::ALL.len()];
    for m in mosaics {
        for (k, d) in Drop::ALL.iter().enumerate() {
            drops[k] += m.counters().dropped(*d);
        }
    }
    AtomicReport {
        mode: String::new(),
        virtual_secs: duration.as_secs_f64(),
        events: 0,
        overflow: 0,
        size: (mosaics.len(), hosts_in.len()),
        mappings,
        flows,
        hosts,
        node_drops: Drop::ALL
            .iter()
            .zip(drops)
            .filter(|(_, n)| *n > 0)
            .map(|(d, n)| (d.name().to_string(), n))
            .collect(),
    }
}

/// The report as text.
pub fn text(r: &AtomicReport) -> String {
    let mut s = format!(
        "ATOMIC, {} {:.3} s: {} Mosaic nodes, {} hosts",
        r.mode, r.virtual_secs, r.size.0, r.size.1
    );
    if r.events > 0 {
        s += &format!(", {} events", r.events);
    }
    if r.overflow > 0 {
        s += &format!(", {} frames dropped at full links", r.overflow);
    }
    s += "\n";
    s += &format!(
        "\n{:<10} {:>5} {:>6} {:>8} {:>6} {:>7} {:>9} {:>8}\n",
        "AC", "epoch", "nodes", "channels", "hosts", "probes", "per node", "ms"
    );
    // An AC remaps every so often; a run of mappings that found the same
    // network is one row with a count (the JSON keeps every one).
    let same = |a: &MapRow, b: &MapRow| {
        (
            a.ac.as_str(),
            a.epoch,
            a.nodes,
            a.channels,
            a.hosts,
            a.probes,
            a.doubted,
        ) == (
            b.ac.as_str(),
            b.epoch,
            b.nodes,
            b.channels,
            b.hosts,
            b.probes,
            b.doubted,
        )
    };
    let mut i = 0;
    while i < r.mappings.len() {
        let m = &r.mappings[i];
        let n = r.mappings[i..].iter().take_while(|x| same(m, x)).count();
        s += &format!(
            "{:<10} {:>5} {:>6} {:>8} {:>6} {:>7} {:>9.2} {:>8.3}{}{}\n",
            m.ac,
            m.epoch,
            m.nodes,
            m.channels,
            m.hosts,
            m.probes,
            m.per_node,
            m.ms,
            if m.doubted { "  doubted" } else { "" },
            if n > 1 {
                format!("  (x{n})")
            } else {
                String::new()
            }
        );
        i += n;
    }
    let mut late: Vec<(&str, u64)> = r
        .mappings
        .iter()
        .filter(|m| m.late_answers > 0)
        .map(|m| (m.ac.as_str(), m.late_answers))
        .collect();
    late.dedup();
    for (ac, n) in late {
        s += &format!(
            "AC {ac}: {n} answers came after their deadline; a doubted mapping is not believed \
             until the next one agrees\n"
        );
    }
    if !r.flows.is_empty() {
        s += &flows_text(&r.flows);
        if r.flows.iter().any(|f| f.unaccounted.is_none()) {
            s += "(this process sees only its part of each flow: `aurora books` joins the parts of a run's processes)\n";
        }
    }
    s += &format!(
        "\n{:<10} {:<10} {:>9} {:>8} {:>8} {:>9} {:>9}\n",
        "host", "uses AC", "requests", "learned", "dropped", "no route", "took over"
    );
    for h in &r.hosts {
        s += &format!(
            "{:<10} {:<10} {:>9} {:>8} {:>8} {:>9} {:>9}\n",
            h.host,
            h.ac.as_deref().unwrap_or("-"),
            h.routes[0],
            h.routes[1],
            h.routes[2],
            h.routes[3],
            h.took_over
        );
    }
    if !r.node_drops.is_empty() {
        s += "\nMosaic node drops (mapping probes into empty channels show as no_channel):\n";
        for (why, n) in &r.node_drops {
            s += &format!("  {why:<20} {n}\n");
        }
    }
    s
}

/// The flows whose books do not balance, in one sentence.
pub fn imbalance(r: &AtomicReport) -> Option<String> {
    flows_imbalance(&r.flows)
}

/// Flow rows as a table, each flow's losses below it.
pub fn flows_text(flows: &[FlowRow]) -> String {
    let mut s = String::new();
    s += &format!(
        "\n{:<10} {:<10} {:>8} {:>10} {:>10} {:>8} {:>9} {:>11}\n",
        "flow from", "to", "sent", "delivered", "corrupted", "lost", "in flight", "unaccounted"
    );
    for f in flows {
        // Names from another process's report are escaped.
        let esc = aurora_topo::escape;
        let from = match f.flow {
            0 => esc(&f.from),
            n => format!("{} #{n}", esc(&f.from)),
        };
        s += &format!(
            "{:<10} {:<10} {:>8} {:>10} {:>10} {:>8} {:>9} {:>11}\n",
            from,
            esc(&f.to),
            f.sent,
            f.delivered,
            f.corrupted,
            f.lost,
            f.in_flight,
            f.unaccounted.map_or("-".into(), |u| u.to_string())
        );
        for l in &f.losses {
            s += &format!(
                "{:<4}lost {} at {} ({})\n",
                "",
                l.count,
                esc(&l.at),
                esc(&l.reason)
            );
        }
    }
    s
}

/// The flows whose books do not balance, in one sentence.
pub fn flows_imbalance(flows: &[FlowRow]) -> Option<String> {
    let bad: Vec<String> = flows
        .iter()
        .filter_map(|f| match f.unaccounted {
            Some(u) if u != 0 => Some(format!("{} -> {} #{} ({u} packets)", f.from, f.to, f.flow)),
            _ => None,
        })
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "the report does not balance: packets with no outcome on ATOMIC flow {}; this is a \
             fault of the testbed",
            bad.join(", ")
        )
    })
}
