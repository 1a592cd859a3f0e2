//! `aurora node`: some nodes of a topology file (a partition: one node, or
//! several) run together as one process, on one engine against the wall
//! clock. Links among them are the engine's own; every link to a node
//! outside is a UDP link (or a pair of shared-memory rings) to the process
//! running that node. Start one process per partition, on one machine or
//! several; stop and start any of them while the others run. Cell files and
//! ATOMIC files (their LAN's section: `crate::atomic_report`) share the
//! process's build (`aurora_topo::NodeProcess`), its run and its port and
//! link accounting, here. Each process's report carries its part of the
//! run's books, which `crate::books` joins.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use aurora_engine::carry::Carries;
use aurora_engine::NodeId;
use aurora_link::LinkDrop;
use aurora_net::traffic::TrafficHost;
use aurora_net::Frame;
use aurora_topo::NodeProcess;
use aurora_wire::CellBytes;
use serde::Serialize;

/// Frames a stopping process reads out of each input to count what it
/// leaves unread (a ring holds far fewer; a peer still sending could
/// otherwise keep it reading).
const UNREAD_AT_STOP: usize = 1 << 22;

/// What arrived on one PVC at a node of the process (a process sees only
/// its own end, so it cannot tell where the rest went: the sender's and the
/// switches' reports say what they dropped).
#[derive(Debug, serde::Serialize)]
pub struct ReceivedRow {
    /// PVC name.
    pub name: String,
    /// PDUs delivered intact and in order.
    pub delivered: u64,
    /// PDUs missing from the sequence before the last one delivered.
    pub missing: u64,
    /// PDUs that arrived damaged or out of order.
    pub corrupted: u64,
    /// Goodput in Mb/s.
    pub mbps: f64,
}

/// What a node process did.
#[derive(Debug, Serialize)]
pub struct NodeReport {
    /// The nodes run, comma-separated as on the command line.
    pub name: String,
    /// The nodes run.
    pub nodes: Vec<String>,
    /// Wall-clock seconds run.
    pub secs: f64,
    /// Worker threads the nodes were split between.
    pub workers: usize,
    /// PVCs the process's hosts send on: (name, PDUs sent).
    pub sent: Vec<(String, u64)>,
    /// PVCs the process's hosts receive on.
    pub received: Vec<ReceivedRow>,
    /// Pings the process's hosts sent.
    pub pings: Vec<crate::run::PingRow>,
    /// Per port linked to a node outside the process.
    pub ports: Vec<PortRow>,
    /// Per link direction between two nodes of the process.
    pub links: Vec<crate::run::LinkRow>,
    /// The process's output ports under a discipline (`[[port]]`): per
    /// queue, cells served, dropped by reason, and how long they waited.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disciplines: Vec<crate::port_report::PortReport>,
    /// The traffic contracts this process's hosts shape to or its
    /// switches police.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contracts: Vec<crate::port_report::ContractRow>,
    /// Capture files written, and what each holds.
    pub captures: Vec<aurora_capture::Written>,
    /// The IP hosts' and routers' counters.
    pub ip: Vec<crate::run::IpRow>,
    /// The IP hosts' TUN interfaces: names and what crossed them.
    pub tun: Vec<TunRow>,
    /// How late each node ran, and whether to trust the figures.
    pub lateness: crate::lateness::LatenessReport,
    /// The ATOMIC nodes of the process, if it runs any: their mappings,
    /// flows (those its hosts send or receive), hosts and drops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic: Option<crate::atomic_report::AtomicReport>,
    /// The ends of striped VCs the process's hosts run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stripes: Vec<crate::stripe_report::EndRow>,
    /// The process's signalling hosts: their apps and what arrived.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<crate::signal_report::EndRow>,
    /// The process's relaying links: the entries control cells wrote that
    /// they still hold at the end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub relays: Vec<RelayRow>,
    /// The process's part of the run's books, which `aurora books` joins
    /// with the other processes' (JSON only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub books: Option<crate::books::ProcessBooks>,
}

/// A relaying link of the process at the end of the run.
#[derive(Debug, Serialize)]
pub struct RelayRow {
    /// Its name.
    pub name: String,
    /// Its relay id.
    pub id: u16,
    /// Entries a host's key wrote that it still holds (both tables).
    pub host_entries: u64,
    /// Control cells it carried out, and passed on to relays beyond.
    pub control_accepted: u64,
    /// Control cells it passed on.
    pub control_passed: u64,
}

/// The rows of the process's relaying links.
fn relay_rows<F: Frame>(p: &NodeProcess<F>) -> Vec<RelayRow> {
    p.members
        .iter()
        .filter_map(|m| {
            let l = p
                .engine
                .node::<aurora_net::vunet::VunetLink>(m.local)
                .or_else(|| {
                    let av = p.engine.node::<aurora_net::avlink::Avlink>(m.local)?;
                    Some(av.relay())
                })?;
            let held = (0..=1u8)
                .flat_map(|t| (0..=u16::MAX).map(move |v| (t, v)))
                .filter(|&(t, v)| l.owner(t, v).is_some())
                .count() as u64;
            let c = l.counters();
            Some(RelayRow {
                name: m.name.clone(),
                id: l.id(),
                host_entries: held,
                control_accepted: c.control_accepted,
                control_passed: c.control_passed,
            })
        })
        .collect()
}

/// What crossed an IP host's TUN interface.
#[derive(Debug, Serialize)]
pub struct TunRow {
    /// Interface name and address.
    pub name: String,
    /// Packets read from it (the kernel sent them).
    pub read: u64,
    /// Packets written to it.
    pub written: u64,
    /// Packets it refused (its queue was full).
    pub refused: u64,
    /// Reads or writes that failed.
    pub errors: u64,
}

impl TunRow {
    /// Interface `name`'s row from its counters.
    pub(crate) fn new(name: String, c: &aurora_engine::io::DeviceCounters) -> Self {
        TunRow {
            name,
            read: c.from_device,
            written: c.to_device,
            refused: c.device_full,
            errors: c.errors,
        }
    }
}

/// One port linked to a node outside the process: what the node sent on
/// it and what became of that, and what arrived. Cells, or for ATOMIC,
/// frames. The sending side balances, `cells_out = overflow +
/// lost_on_line + in_flight + sent + peer_unreachable + too_long`, and
/// `unaccounted` is what does not (anything but 0 is a fault of the
/// testbed).
#[derive(Debug, Serialize)]
pub struct PortRow {
    /// The node.
    pub node: String,
    /// The port.
    pub port: u16,
    /// The link: `node:port <-> node:port`.
    pub link: String,
    /// The far end, `node:port @ address`.
    pub peer: String,
    /// Cells the node sent on the port.
    pub cells_out: u64,
    /// Of those, dropped at the full output buffer, or refused by a full
    /// link to the far end.
    pub overflow: u64,
    /// Of those, refused by the link to the far end because it was full
    /// (a shared-memory ring the far end does not read fast enough, a full
    /// socket buffer).
    pub peer_full: u64,
    /// Of those, lost on the line by the link's model (`loss`).
    pub lost_on_line: u64,
    /// Of those, still waiting or on the line when the run ended.
    pub in_flight: u64,
    /// Of those, handed to the link to the far end.
    pub sent: u64,
    /// Of those, sent while nothing listened at the far end (or the
    /// network had no route to it).
    pub peer_unreachable: u64,
    /// Of those, frames too long for a datagram (ATOMIC only).
    pub too_long: u64,
    /// Cells the link took that it did not count (or counted twice); 0.
    pub unaccounted: i64,
    /// Cells that arrived and went up to the node.
    pub cells_in: u64,
    /// Cells the far end sent that never arrived.
    pub lost_in_transit: u64,
    /// Cells the far end had sent before this end listened (UDP: this
    /// process started after it, or restarted).
    pub before_listening: u64,
    /// Cells discarded by the HEC check.
    pub hec_discarded: u64,
    /// Times the far end was seen to restart.
    pub peer_restarts: u64,
    /// Cells the switch dropped on this port (no route, full, ...); 0 on a host.
    pub switch_dropped: u64,
}

impl NodeReport {
    /// `None` when every port balances; otherwise one sentence naming the
    /// ports that do not.
    pub fn imbalance(&self) -> Option<String> {
        let bad: Vec<String> = self
            .ports
            .iter()
            .filter(|p| p.unaccounted != 0)
            .map(|p| format!("{}:{} ({})", p.node, p.port, p.unaccounted))
            .collect();
        (!bad.is_empty()).then(|| {
            format!(
                "the report does not balance: what the link took and what it counted differ on port {}; \
                 this is a fault of the testbed",
                bad.join(", ")
            )
        })
    }
}

/// Says on stderr what the process opened: its TUN interfaces and the
/// addresses (or rings) of its links to other processes.
pub(crate) fn announce<F: Frame>(p: &NodeProcess<F>) {
    let who = p.names.join(",");
    for (_, t) in &p.tuns {
        eprintln!(
            "{who}: TUN {} is {}/{}, MTU {}{}",
            t.name,
            t.addr,
            t.prefix,
            t.mtu,
            t.routes
                .iter()
                .map(|r| format!(", route {}/{} via {}", r.dst, r.prefix, r.gateway))
                .collect::<String>()
        );
    }
    for port in &p.ports {
        eprintln!(
            "{who}: {} bound {} -> {} at {}",
            port.here, port.local, port.peer, port.remote
        );
    }
}

/// Runs the process's engine against the wall clock until `duration`
/// passes, or SIGINT or SIGTERM arrives; returns the seconds run and how
/// late each node ran.
pub(crate) fn run_wall<F: Frame>(
    p: &mut NodeProcess<F>,
    duration: Option<std::time::Duration>,
) -> (f64, crate::lateness::LatenessReport) {
    let stop = stop_flag(duration);
    let mut wall = p.engine.wall_clock(false);
    // Model time runs with the wall clock, a slice at a time, the stop
    // flag checked between slices.
    let slice = aurora_time::Duration::from_millis(10);
    // With a duration, the last slice ends on it.
    let limit = duration
        .map(|d| aurora_time::Instant::from_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)));
    let mut end = aurora_time::Instant::ZERO;
    while !stop.load(Ordering::Relaxed) {
        let next = limit.map_or(end + slice, |l| (end + slice).min(l));
        if next <= end {
            break;
        }
        end = next;
        p.engine.run_wall(end, &mut wall);
    }
    let ended = wall.elapsed();
    let lateness = wall.lateness(duration);
    let name = |i: usize| member_name(p, NodeId(i as u32));
    let report = crate::lateness::report(
        &lateness,
        &name,
        "give each node process a core of its own, or run the file with aurora run --virtual",
    );
    (ended.as_secs_f64(), report)
}

/// The rows of the process's ports linked to nodes outside.
pub(crate) fn port_rows<F: Frame>(p: &NodeProcess<F>) -> Vec<PortRow> {
    let e = &p.engine;
    p.ports
        .iter()
        .map(|port| {
            let (node, n) = (port.node, port.port);
            let ext = e.external_output(node, n).unwrap_or_default();
            let tx = ext.link;
            let dir = e.link(node, n).unwrap_or_default();
            let rx = e.external_input(node, n).unwrap_or_default();
            let unreachable = tx.drops.get(LinkDrop::PeerUnreachable);
            let too_long = tx.drops.get(LinkDrop::BadFrame);
            // What the line delivered went to the link: refused, sent, or
            // dropped by it with a reason.
            let taken = ext.refused + tx.cells_out + unreachable + too_long;
            PortRow {
                node: member_name(p, node),
                port: n,
                link: format!("{} <-> {}", port.here, port.peer),
                peer: format!("{} @ {}", port.peer, port.remote),
                cells_out: dir.offered,
                overflow: dir.overflow + ext.refused,
                peer_full: ext.refused,
                lost_on_line: dir.lost,
                in_flight: dir
                    .offered
                    .saturating_sub(dir.overflow + dir.lost + dir.delivered),
                sent: tx.cells_out,
                peer_unreachable: unreachable,
                too_long,
                unaccounted: dir.delivered as i64 - taken as i64,
                cells_in: rx.cells_delivered,
                lost_in_transit: rx.drops.get(LinkDrop::LostInTransit),
                before_listening: rx.drops.get(LinkDrop::PeerUnreachable),
                hec_discarded: rx.drops.get(LinkDrop::HecDiscarded),
                peer_restarts: rx.peer_restarts,
                switch_dropped: e
                    .node_dyn(node)
                    .and_then(|x| x.port_summary(n))
                    .map_or(0, |c| c.dropped),
            }
        })
        .collect()
}

/// Cells the links to other processes lost that the model would have
/// carried: those a link refused because the far end had not read what
/// was there (`peer_full`), and those that left the far end and never
/// arrived (`lost_in_transit`). Either makes the run unfaithful, whatever
/// its lateness: the verdict says so and names the ports. (Cells sent
/// while nothing listened at the far end are a process not running, which
/// the ports table shows as `unreachable` at the sender and `unheard` at
/// the receiver, not the testbed falling behind.)
fn testbed_losses(ports: &[PortRow], unit: &str, lateness: &mut crate::lateness::LatenessReport) {
    let mut why = Vec::new();
    for p in ports {
        let here = format!("{}:{}", p.node, p.port);
        if p.peer_full > 0 {
            why.push(format!(
                "{here} dropped {} {unit} its far end did not read in time (peer_full)",
                p.peer_full
            ));
        }
        if p.lost_in_transit > 0 {
            why.push(format!(
                "{} {unit} sent to {here} never arrived (lost_in_transit)",
                p.lost_in_transit
            ));
        }
    }
    if why.is_empty() {
        return;
    }
    let why = why.join("; ");
    lateness.sentence = if lateness.faithful {
        format!(
            "These results are NOT real-time-faithful: the links to other processes lost {unit} \
             the model would have carried: {why}; give each node process a core of its own."
        )
    } else {
        format!(
            "{} Also, the links to other processes lost {unit} the model would have carried: {why}.",
            lateness.sentence
        )
    };
    lateness.faithful = false;
}

/// The rows of the link directions between the process's own nodes.
pub(crate) fn link_rows<F: Frame>(p: &NodeProcess<F>) -> Vec<crate::run::LinkRow> {
    p.links
        .iter()
        .filter_map(|l| {
            let c = p.engine.link(l.from.0, l.from.1)?;
            Some(crate::run::LinkRow::new(l.name.clone(), &c))
        })
        .collect()
}

/// The rows of the process's TUN interfaces.
pub(crate) fn tun_rows<F: Frame>(p: &NodeProcess<F>) -> Vec<TunRow> {
    p.tuns
        .iter()
        .filter_map(|(node, t)| {
            let name = format!("{} {}/{}", t.name, t.addr, t.prefix);
            Some(TunRow::new(name, &p.engine.device_counters(*node)?))
        })
        .collect()
}

pub(crate) fn member_name<F: Frame>(p: &NodeProcess<F>, local: NodeId) -> String {
    p.members
        .get(local.0 as usize)
        .map_or_else(|| format!("node {}", local.0), |m| m.name.clone())
}

/// How to run a node process.
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    /// How long (`None`: until SIGINT or SIGTERM).
    pub duration: Option<std::time::Duration>,
    /// The seed of the links' loss and bit errors.
    pub seed: u64,
    /// Worker threads to split the process's nodes between.
    pub workers: usize,
    /// Where to write captures, if anywhere.
    pub capture: Option<&'a crate::captures::CaptureArg>,
    /// The control socket's path, if any.
    pub control: Option<&'a Path>,
}

/// Runs the nodes `names` of the topology in `path` as one process until
/// `duration` passes, or SIGINT or SIGTERM arrives, and reports what they
/// did.
pub fn main(path: &Path, names: &[String], run: &Run) -> Result<NodeReport, String> {
    let Run {
        duration,
        seed,
        workers,
        capture,
        control,
    } = *run;
    let text = aurora_topo::read_topology(path)?;
    let bp = aurora_topo::compile(&text).map_err(|p| crate::run::problems(path, &p))?;
    let topology = aurora_wire::crc::crc32(text.as_bytes());
    if bp.atomic.is_some() {
        let m = bp.mixed_process(names, seed)?;
        let atomic = Some(&m.atomic);
        return run_process(
            m.process,
            (&m.info, topology),
            atomic,
            capture,
            (duration, workers),
            control,
        );
    }
    let (p, info) = bp.node_process(names, seed)?;
    run_process(
        p,
        (&info, topology),
        None,
        capture,
        (duration, workers),
        control,
    )
}

/// The ATOMIC part of a process's report.
fn atomic_section<F: Frame>(
    a: &aurora_topo::AtomicPart,
    p: &NodeProcess<F>,
    secs: f64,
    frames: &crate::atomic_books::FrameLedger,
) -> crate::atomic_report::AtomicReport {
    let names = crate::atomic_books::node_names(a);
    let name = |id: u32| {
        names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| member_name(p, NodeId(id)))
    };
    let mut r = crate::atomic_report::report_on(
        a,
        &p.engine,
        aurora_time::Duration::from_nanos((secs * 1e9) as i64),
        (frames, &name),
        false,
    );
    r.mode = "real time, one process".into();
    // Flows this process neither sends, receives, drops nor holds are not
    // its business.
    let mine: Vec<&str> = a
        .hosts
        .iter()
        .chain(&a.gateways)
        .map(|h| h.0.as_str())
        .collect();
    r.flows.retain(|f| {
        mine.contains(&f.from.as_str())
            || mine.contains(&f.to.as_str())
            || f.lost > 0
            || f.in_flight > 0
    });
    r
}

/// Runs a process's engine against the wall clock and reports, with a
/// section on the ATOMIC LAN `atomic` if the process holds part of one.
fn run_process<F: Carries<CellBytes>>(
    mut p: NodeProcess<F>,
    (info, topology): (&aurora_topo::BlueprintInfo, u32),
    atomic: Option<&aurora_topo::AtomicPart>,
    capture: Option<&crate::captures::CaptureArg>,
    (duration, workers): (Option<std::time::Duration>, usize),
    control: Option<&Path>,
) -> Result<NodeReport, String> {
    if workers > 1 {
        let home = p
            .engine
            .plan_pinned(workers, aurora_engine::plan::MIN_CUT, &p.pins);
        p.engine.partition(&home).map_err(|e| e.to_string())?;
    }
    // The control socket (removed when the run ends) reaches the
    // process's signalling hosts through their inboxes.
    let _control = match control {
        Some(path) => {
            let members = p.members.iter().map(|m| (m.name.clone(), m.local));
            let (members, who) = (members.collect(), p.names.join(","));
            Some(crate::vc_cmd::serve(&mut p.engine, members, path, &who)?)
        }
        None => None,
    };
    let captures = match capture {
        Some(cap) => {
            // Files are named by node; the engine knows its nodes by their
            // ids in the process.
            let mut names: Vec<String> = Vec::new();
            let named = p.members.iter().map(|m| (m.name.clone(), m.local));
            for (name, id) in named.chain(atomic.iter().flat_map(|a| a.node_names())) {
                let i = id.0 as usize;
                if names.len() <= i {
                    names.resize_with(i + 1, || "node".to_string());
                }
                names[i] = name;
            }
            let frames = crate::captures::frame_ports(atomic, &p.engine);
            Some(crate::captures::tap(
                &mut p.engine,
                cap,
                names,
                frames,
                true,
            )?)
        }
        None => None,
    };
    // Every cell dropped, charged to its PDU (see `crate::books`); every
    // ATOMIC frame, to its flow.
    let (ledger, frames) = crate::run::tap_drops(&mut p.engine, atomic);
    // Cells of PVCs crossing to and from other processes, where any cross
    // (`crate::books_edge`).
    let edge = crate::books_edge::Edge::of(&p, info);
    let crossed = Arc::new(std::sync::Mutex::new(edge.clone()));
    // And ATOMIC flow packets crossing at the process's edge (their books:
    // `crate::books_atomic`).
    let flows_cross = atomic.is_some() && !p.ports.is_empty();
    if !edge.is_empty() || flows_cross {
        let seen = crossed.clone();
        let flows = frames.clone();
        let frame_ports = crate::captures::frame_ports(atomic, &p.engine);
        // Lines that flip bits deliver cells whose headers need checking.
        let mut noisy = edge.exits();
        noisy.retain(|&(node, port)| {
            p.engine
                .link_spec(NodeId(node), port)
                .is_some_and(|s| s.bit_error > 0.0)
        });
        p.engine.set_boundary_tap(Box::new(move |at, frames: &[F]| {
            if crate::atomic_books::frame_place(&frame_ports, at) {
                if let Ok(mut l) = flows.lock() {
                    l.crossing(at, frames, false);
                }
                return;
            }
            let check =
                at.side == aurora_net::accounting::Side::Out && noisy.contains(&(at.node, at.port));
            if let Ok(mut c) = seen.lock() {
                c.saw(at, frames, check);
            }
        }));
    }
    announce(&p);
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let (secs, mut lateness) = run_wall(&mut p, duration);
    p.engine.clear_boundary_tap();
    // The ports as the run left them (before the read-out below).
    let ports = port_rows(&p);
    // What this process leaves unread (cells its links discard meanwhile
    // still go to the drop tap).
    let mut unread = edge;
    if !unread.is_empty() || flows_cross {
        // The ledger is locked batch by batch: the links' discards on the
        // way go to the drop tap, which takes it too.
        let frame_ports = crate::captures::frame_ports(atomic, &p.engine);
        p.engine
            .drain_external_inputs(UNREAD_AT_STOP, &mut |at, batch: &[F]| {
                if crate::atomic_books::frame_place(&frame_ports, at) {
                    if let Ok(mut flows) = frames.lock() {
                        flows.crossing(at, batch, true);
                    }
                    return;
                }
                unread.saw(at, batch, false)
            });
    }
    p.engine.clear_tap();
    p.engine.clear_drop_tap();
    let unit = if atomic.is_some() {
        "cells or frames"
    } else {
        "cells"
    };
    testbed_losses(&ports, unit, &mut lateness);
    let ledger = Arc::try_unwrap(ledger)
        .map_err(|_| "the ledger is still in use".to_string())?
        .into_inner()
        .map_err(|_| "the ledger was left half-written".to_string())?
        .finish();
    let crossed = Arc::try_unwrap(crossed)
        .map_err(|_| "the boundary counts are still in use".to_string())?
        .into_inner()
        .map_err(|_| "the boundary counts were left half-written".to_string())?;
    let frames = frames
        .lock()
        .map_err(|_| "the ATOMIC ledger was left half-written".to_string())?;
    let mut books = crate::books::export(&p, info, &ledger, (&crossed, &unread), topology, epoch);
    if let Some(a) = atomic {
        // The ATOMIC part's names, which every process gives its nodes.
        let names = crate::atomic_books::node_names(a);
        let name = |id: u32| {
            names
                .get(&id)
                .cloned()
                .unwrap_or_else(|| member_name(&p, NodeId(id)))
        };
        books.atomic = crate::books_atomic::export(a, &p, &frames, &name);
    }
    let atomic = atomic.map(|a| atomic_section(a, &p, secs, &frames));
    let captures = crate::captures::finish(captures)?;

    let local = |id: NodeId| p.members.iter().find(|m| m.id == id).map(|m| m.local);
    let host = |id: NodeId| local(id).and_then(|l| p.engine.node::<TrafficHost>(l));
    let mut sent = Vec::new();
    let mut received = Vec::new();
    let mut pings = Vec::new();
    for pvc in &info.pvcs {
        if let Some(h) = host(pvc.from) {
            sent.push((pvc.name.clone(), pvc.flows.iter().map(|&i| h.sent(i)).sum()));
            pings.extend(crate::run::ping_rows(pvc, h));
        }
        if let Some(h) = host(pvc.to) {
            let r = h.received(pvc.to_vc);
            received.push(ReceivedRow {
                name: pvc.name.clone(),
                delivered: r.delivered,
                missing: r.missing,
                corrupted: r.corrupted + r.out_of_order,
                mbps: r.bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
            });
        }
    }
    let ip = p
        .members
        .iter()
        .filter_map(|m| {
            let n = p.engine.node::<aurora_ip::node::IpNode>(m.local)?;
            Some(crate::run::ip_row(&m.name, n))
        })
        .collect();
    let stripes = crate::stripe_report::ends(
        &info.stripes,
        &|id| local(id).and_then(|l| p.engine.node::<aurora_stripe::StripeHost>(l)),
        secs,
    );
    let mut contracts =
        crate::port_report::contract_rows(&info.pvcs, &info.switches, &host, &|id| {
            local(id).and_then(|l| p.engine.node::<aurora_net::switch::AtmSwitch>(l))
        });
    contracts.retain(|c| c.shaped.is_some() || c.policed.is_some());
    let apps = crate::signal_report::ends(p.members.iter().filter_map(|m| {
        let h = p.engine.node::<aurora_signal::host::SignalHost>(m.local)?;
        Some((m.name.as_str(), h))
    }));
    Ok(NodeReport {
        apps,
        relays: relay_rows(&p),
        name: p.names.join(","),
        nodes: p.members.iter().map(|m| m.name.clone()).collect(),
        secs,
        workers: p.engine.workers(),
        sent,
        received,
        pings,
        ports,
        links: link_rows(&p),
        disciplines: crate::port_report::report(&p.disciplines, &p.engine),
        contracts,
        captures,
        ip,
        tun: tun_rows(&p),
        lateness,
        atomic,
        stripes,
        books: Some(books),
    })
}

/// A flag set after `duration` (if given) or on SIGINT or SIGTERM, which
/// end a node's run the same way, with a report.
pub(crate) fn stop_flag(duration: Option<std::time::Duration>) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    install_stop_signals();
    let deadline = duration.map(|d| std::time::Instant::now() + d);
    let flag = stop.clone();
    std::thread::spawn(move || loop {
        let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        if SIGNALLED.load(Ordering::Relaxed) || left.is_some_and(|l| l.is_zero()) {
            flag.store(true, Ordering::Relaxed);
            return;
        }
        let tick = std::time::Duration::from_millis(20);
        std::thread::sleep(left.map_or(tick, |l| l.min(tick)));
    });
    stop
}

/// Set by SIGINT or SIGTERM.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

fn install_stop_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal safe; `signal` is given a valid function pointer of
        // the type it expects.
        unsafe {
            libc::signal(sig, on_stop_signal as *const () as libc::sighandler_t);
        }
    }
}

/// The ports table as text (`unit`: "cells" or "frames").
pub(crate) fn ports_text(ports: &[PortRow], unit: &str) -> String {
    if ports.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n{:<36} {:>9} {:>8} {:>7} {:>9} {:>11} {:>9} {:>8} {:>8} {:>8} {:>8}\n",
        format!("link ({unit})"),
        "out",
        "overflow",
        "lost",
        "in flight",
        "unreachable",
        "in",
        "lost in",
        "unheard",
        "restarts",
        "sw drop"
    );
    for p in ports {
        s += &format!(
            "{:<36} {:>9} {:>8} {:>7} {:>9} {:>11} {:>9} {:>8} {:>8} {:>8} {:>8}\n",
            p.link,
            p.cells_out,
            p.overflow,
            p.lost_on_line,
            p.in_flight,
            p.peer_unreachable + p.too_long,
            p.cells_in,
            p.lost_in_transit,
            p.before_listening,
            p.peer_restarts,
            p.switch_dropped
        );
    }
    s
}

/// A table of link directions as text, headed `title`, its first column
/// `width` wide.
pub(crate) fn links_text(links: &[crate::run::LinkRow], title: &str, width: usize) -> String {
    if links.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n{title:<width$} {:>9} {:>10} {:>9} {:>7} {:>8}\n",
        "offered", "delivered", "overflow", "lost", "errored"
    );
    for l in links {
        s += &format!(
            "{:<width$} {:>9} {:>10} {:>9} {:>7} {:>8}\n",
            l.dir, l.offered, l.delivered, l.overflow, l.lost, l.errored
        );
    }
    s
}

/// The TUN rows as text.
pub(crate) fn tun_text(rows: &[TunRow]) -> String {
    rows.iter()
        .map(|t| {
            format!(
                "TUN {}: {} packets read, {} written, {} refused, {} errors\n",
                t.name, t.read, t.written, t.refused, t.errors
            )
        })
        .collect()
}

/// The report as text.
pub fn text(r: &NodeReport) -> String {
    let mut s = format!(
        "{} {} ran {:.3} s{}\n",
        if r.nodes.len() == 1 { "node" } else { "nodes" },
        r.nodes.join(", "),
        r.secs,
        if r.workers > 1 {
            format!(" on {} workers", r.workers)
        } else {
            String::new()
        }
    );
    for (name, n) in &r.sent {
        s += &format!("sent on {name}: {n} PDUs\n");
    }
    if !r.received.is_empty() {
        s += &format!(
            "\n{:<28} {:>10} {:>8} {:>10} {:>9}\n",
            "PVC received", "delivered", "missing", "corrupted", "Mb/s"
        );
        for p in &r.received {
            s += &format!(
                "{:<28} {:>10} {:>8} {:>10} {:>9.1}\n",
                p.name, p.delivered, p.missing, p.corrupted, p.mbps
            );
        }
    }
    if !r.sent.is_empty() || !r.received.is_empty() || !r.ip.is_empty() {
        s += "(where the PDUs went: give every process's --json report to aurora books)\n";
    }
    s += &crate::run::ping_text(&r.pings);
    // A process with part of an ATOMIC LAN counts frames on its links.
    let unit = match r.atomic {
        Some(_) => "cells or frames",
        None => "cells",
    };
    s += &ports_text(&r.ports, unit);
    s += &links_text(&r.links, &format!("inside ({unit})"), 36);
    s += &crate::port_report::text(&r.disciplines);
    s += &crate::port_report::contracts_text(&r.contracts);
    s += &crate::run::ip_text(&r.ip);
    s += &tun_text(&r.tun);
    s += &crate::stripe_report::ends_text(&r.stripes);
    s += &crate::signal_report::ends_text(&r.apps);
    for l in &r.relays {
        s += &format!(
            "relay {} (id {}): {} entries written by hosts held at the end; {} control cells carried out, {} passed on\n",
            l.name, l.id, l.host_entries, l.control_accepted, l.control_passed
        );
    }
    s += &crate::captures::text(&r.captures);
    if let Some(a) = &r.atomic {
        s += "\n";
        s += &crate::atomic_report::text(a);
    }
    if let Some(why) = r.imbalance() {
        s += &format!("{why}\n");
    }
    s += &crate::lateness::text(&r.lateness);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(peer_full: u64, lost_in_transit: u64) -> PortRow {
        PortRow {
            node: "h1".into(),
            port: 0,
            link: "h1:0 <-> sw:0".into(),
            peer: "sw:0 @ ring".into(),
            cells_out: 100,
            overflow: peer_full,
            peer_full,
            lost_on_line: 0,
            in_flight: 0,
            sent: 100 - peer_full,
            peer_unreachable: 0,
            too_long: 0,
            unaccounted: 0,
            cells_in: 50,
            lost_in_transit,
            before_listening: 0,
            hec_discarded: 0,
            peer_restarts: 0,
            switch_dropped: 0,
        }
    }

    fn kept_up() -> crate::lateness::LatenessReport {
        crate::lateness::LatenessReport {
            nodes: Vec::new(),
            overrun_ms: 0.0,
            faithful: true,
            sentence: "Real time kept up.".into(),
        }
    }

    /// A link that refused cells for a full ring, or lost some between
    /// the processes, makes a run that kept up unfaithful, naming the
    /// port; one that lost nothing leaves the verdict alone.
    #[test]
    fn cells_the_testbed_lost_between_processes_make_a_run_unfaithful() {
        let mut l = kept_up();
        testbed_losses(&[port(0, 0)], "cells", &mut l);
        assert!(l.faithful);
        assert_eq!(l.sentence, "Real time kept up.");

        let mut l = kept_up();
        testbed_losses(&[port(7, 3)], "cells", &mut l);
        assert!(!l.faithful);
        assert!(l
            .sentence
            .starts_with("These results are NOT real-time-faithful"));
        assert!(
            l.sentence
                .contains("h1:0 dropped 7 cells its far end did not read in time"),
            "{}",
            l.sentence
        );
        assert!(
            l.sentence.contains("3 cells sent to h1:0 never arrived"),
            "{}",
            l.sentence
        );

        let mut l = kept_up();
        l.faithful = false;
        l.sentence = "Late.".into();
        testbed_losses(&[port(7, 0)], "cells or frames", &mut l);
        assert!(!l.faithful);
        assert!(l.sentence.starts_with("Late. Also,"), "{}", l.sentence);
    }
}
