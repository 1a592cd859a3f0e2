//! `aurora node`: one host or switch of a topology file as its own process,
//! every link of it a UDP link to the process running the node at the far
//! end. Start one process per node (on one machine or several); stop and
//! start any of them while the others run.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use aurora_link::LinkDrop;
use aurora_net::traffic::TrafficHost;
use serde::Serialize;

/// What arrived on one PVC at this node (a process sees only its own end,
/// so it cannot tell where the rest went: the sender's and the switches'
/// reports say what they dropped).
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
    /// The node's name.
    pub name: String,
    /// Wall-clock seconds run.
    pub secs: f64,
    /// PVCs this node sends on: (name, PDUs sent).
    pub sent: Vec<(String, u64)>,
    /// PVCs this node receives on.
    pub received: Vec<ReceivedRow>,
    /// Pings this node sent.
    pub pings: Vec<crate::run::PingRow>,
    /// Per linked port.
    pub ports: Vec<PortRow>,
    /// Capture files written: (file, cell records, AAL5 PDU records, cells
    /// dropped by the capture).
    pub captures: Vec<aurora_capture::Written>,
    /// An IP host's or router's counters.
    pub ip: Option<crate::run::IpRow>,
    /// An IP host's TUN interface: its name and what crossed it.
    pub tun: Option<TunRow>,
    /// How late the node ran, and whether to trust its figures.
    pub lateness: crate::lateness::LatenessReport,
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

/// One linked port's counters.
#[derive(Debug, Serialize)]
pub struct PortRow {
    /// The port.
    pub port: u16,
    /// The far end, `node:port @ address`.
    pub peer: String,
    /// Cells the node sent on the port.
    pub cells_out: u64,
    /// Of those, dropped at the full output buffer, or refused by a full
    /// link to the far end.
    pub overflow: u64,
    /// Of those, refused by the link to the far end because it was full
    /// (a shared-memory ring the far end does not read fast enough).
    pub peer_full: u64,
    /// Of those, sent while nothing listened at the far end.
    pub peer_unreachable: u64,
    /// Cells that arrived and went up to the node.
    pub cells_in: u64,
    /// Cells the far end sent that never arrived.
    pub lost_in_transit: u64,
    /// Cells discarded by the HEC check.
    pub hec_discarded: u64,
    /// Times the far end was seen to restart.
    pub peer_restarts: u64,
    /// Cells the switch dropped on this port (no route, full, ...); 0 on a host.
    pub switch_dropped: u64,
}

/// Runs node `name` of the topology in `path` until `duration` passes, or
/// SIGINT or SIGTERM arrives, and reports what it did.
pub fn main(
    path: &Path,
    name: &str,
    duration: Option<std::time::Duration>,
    seed: u64,
    capture: Option<&crate::run::CaptureArg>,
) -> Result<NodeReport, String> {
    let text = aurora_topo::read_topology(path)?;
    let bp = aurora_topo::compile(&text).map_err(|p| crate::run::problems(path, &p))?;
    let names = match capture {
        Some(cap) => Some(crate::run::open_captures(
            cap,
            &bp.hosts,
            &bp.switches,
            &bp.routers,
        )?),
        None => None,
    };
    let (mut proc_, info) = bp.node_process(name, seed)?;
    let captures_dir: Option<Arc<Mutex<aurora_capture::CaptureDir>>> =
        names.map(|dir| Arc::new(Mutex::new(dir.in_background())));
    if let Some(c) = &captures_dir {
        let (c, node) = (c.clone(), proc_.id.0);
        proc_.engine.set_tap(Box::new(move |t, _, port, cell| {
            // Poisoned only if a tap panicked, which ends the run anyway.
            if let Ok(mut d) = c.lock() {
                d.record(t, node, port, std::slice::from_ref(cell));
            }
        }));
    }
    if let Some(t) = &proc_.tun {
        eprintln!(
            "{name}: TUN {} is {}/{}, MTU {}{}",
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
    for p in &proc_.ports {
        eprintln!(
            "{name}:{} bound {} -> {} at {}",
            p.port, p.local, p.peer, p.remote
        );
    }
    let stop = stop_flag(duration);
    let start = std::time::Instant::now();
    let mut wall = aurora_engine::clock::Wall::new(start, false);
    let mut engine = proc_.engine;
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
        engine.run_wall(end, &mut wall);
    }
    let ended = start.elapsed();
    let secs = ended.as_secs_f64();
    let mut lateness = wall.lateness(1, duration.unwrap_or(ended), ended);
    lateness.asked = duration;
    lateness.stop_at = None;
    let lateness = crate::lateness::report(
        &lateness,
        &|_| name.to_string(),
        "give each node process a core of its own, or run the file with aurora run --virtual",
    );
    engine.clear_tap();
    let captures = crate::run::finish_captures(captures_dir)?;

    let local = proc_.local;
    let Some(dyn_node) = engine.node_dyn(local) else {
        return Err(format!("node {name} is missing from its engine"));
    };
    let node: &dyn std::any::Any = match engine.node::<TrafficHost>(local) {
        Some(h) => h,
        None => match engine.node::<aurora_ip::node::IpNode>(local) {
            Some(n) => n,
            None => &(),
        },
    };
    let host = node.downcast_ref::<TrafficHost>();
    let mut sent = Vec::new();
    let mut received = Vec::new();
    let mut pings = Vec::new();
    for p in &info.pvcs {
        if let (true, Some(h)) = (p.from == proc_.id, host) {
            sent.push((p.name.clone(), p.flows.iter().map(|&i| h.sent(i)).sum()));
            pings.extend(crate::run::ping_rows(p, h));
        }
        if let (true, Some(h)) = (p.to == proc_.id, host) {
            let r = h.received(p.to_vc);
            received.push(ReceivedRow {
                name: p.name.clone(),
                delivered: r.delivered,
                missing: r.missing,
                corrupted: r.corrupted + r.out_of_order,
                mbps: r.bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
            });
        }
    }
    let ports = proc_
        .ports
        .iter()
        .map(|p| {
            let ext = engine.external_output(local, p.port).unwrap_or_default();
            let tx = ext.link;
            let dir = engine.link(local, p.port).unwrap_or_default();
            let rx = engine.external_input(local, p.port).unwrap_or_default();
            PortRow {
                port: p.port,
                peer: format!("{} @ {}", p.peer, p.remote),
                cells_out: dir.offered,
                overflow: dir.overflow + ext.refused,
                peer_full: ext.refused,
                peer_unreachable: tx.drops.get(LinkDrop::PeerUnreachable),
                cells_in: rx.cells_delivered,
                lost_in_transit: rx.drops.get(LinkDrop::LostInTransit),
                hec_discarded: rx.drops.get(LinkDrop::HecDiscarded),
                peer_restarts: rx.peer_restarts,
                switch_dropped: dyn_node.port_summary(p.port).map_or(0, |c| c.dropped),
            }
        })
        .collect();
    let ip = node
        .downcast_ref::<aurora_ip::node::IpNode>()
        .map(|n| crate::run::ip_row(name, n));
    let tun = match (&proc_.tun, engine.device_counters(local)) {
        (Some(t), Some(c)) => Some(TunRow {
            name: format!("{} {}/{}", t.name, t.addr, t.prefix),
            read: c.from_device,
            written: c.to_device,
            refused: c.device_full,
            errors: c.errors,
        }),
        _ => None,
    };
    Ok(NodeReport {
        name: name.to_string(),
        secs,
        sent,
        received,
        pings,
        ports,
        captures,
        ip,
        tun,
        lateness,
    })
}

/// A flag set after `duration` (if given) or on SIGINT or SIGTERM, which
/// end a node's run the same way, with a report.
pub(crate) fn stop_flag(duration: Option<std::time::Duration>) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    if let Some(d) = duration {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(d);
            stop.store(true, Ordering::Relaxed);
        });
    }
    install_stop_signals();
    {
        let stop = stop.clone();
        std::thread::spawn(move || loop {
            if SIGNALLED.load(Ordering::Relaxed) {
                stop.store(true, Ordering::Relaxed);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        });
    }
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

/// The report as text.
pub fn text(r: &NodeReport) -> String {
    let mut s = format!("node {} ran {:.3} s\n", r.name, r.secs);
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
    s += &crate::run::ping_text(&r.pings);
    s += &format!(
        "\n{:>4} {:<34} {:>9} {:>8} {:>11} {:>9} {:>8} {:>8} {:>8}\n",
        "port",
        "peer",
        "cells out",
        "overflow",
        "unreachable",
        "cells in",
        "lost",
        "restarts",
        "sw drop"
    );
    for p in &r.ports {
        s += &format!(
            "{:>4} {:<34} {:>9} {:>8} {:>11} {:>9} {:>8} {:>8} {:>8}\n",
            p.port,
            p.peer,
            p.cells_out,
            p.overflow,
            p.peer_unreachable,
            p.cells_in,
            p.lost_in_transit,
            p.peer_restarts,
            p.switch_dropped
        );
    }
    if let Some(ip) = &r.ip {
        s += &crate::run::ip_text(std::slice::from_ref(ip));
    }
    if let Some(t) = &r.tun {
        s += &format!(
            "TUN {}: {} packets read, {} written, {} refused, {} errors\n",
            t.name, t.read, t.written, t.refused, t.errors
        );
    }
    for (f, cells, pdus, dropped) in &r.captures {
        s += &format!(
            "captured {f}: {cells} cells, {pdus} AAL5 PDUs, {dropped} dropped by the capture\n"
        );
    }
    s += &crate::lateness::text(&r.lateness);
    s
}
