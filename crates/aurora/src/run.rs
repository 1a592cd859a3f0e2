//! `aurora run`: a topology file, run in virtual time, with a report of
//! every PVC, link direction and switch port.

use std::path::Path;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::captures::CaptureArg;
use crate::progress::Progress;
use aurora_engine::carry::Carries;
use aurora_engine::{Engine, NodeId};
use aurora_net::accounting::{self, Ledger, Place, Side};
use aurora_net::traffic::TrafficHost;
use aurora_net::Frame;
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;
use serde::Serialize;

/// One PVC's outcome: `sent = delivered + corrupted + lost + in_flight +
/// unaccounted`, and `unaccounted` must be 0.
#[derive(Debug, Serialize)]
pub struct PvcRow {
    /// PVC name.
    pub name: String,
    /// PDUs sent.
    pub sent: u64,
    /// PDUs delivered intact and in order.
    pub delivered: u64,
    /// PDUs whose cells all arrived but whose bytes were damaged on the way
    /// (the CRC failed).
    pub corrupted: u64,
    /// PDUs lost, all reasons.
    pub lost: u64,
    /// PDUs lost, per place and reason.
    pub losses: Vec<LossRow>,
    /// PDUs still in the network (or part-reassembled) when the run ended.
    pub in_flight: u64,
    /// PDUs with no outcome (below 0: counted twice); anything but 0 is a
    /// fault of the testbed, and the run fails.
    pub unaccounted: i64,
    /// Goodput in Mb/s over the run.
    pub mbps: f64,
    /// Intact PDUs that arrived after a later one (not in `delivered`).
    pub misordered: u64,
}

/// PDUs (or cells) lost at one place for one reason.
#[derive(Debug, Serialize)]
pub struct LossRow {
    /// Where: "node:port in" (arriving) or "node:port out" (the port's
    /// output buffer and the link leaving it).
    pub at: String,
    /// Why (`tail_drop`, `link_loss`, `hec_uncorrectable`, ...).
    pub reason: String,
    /// How many.
    pub count: u64,
}

/// One ping's outcome (OAM F5 loopback along a PVC).
#[derive(Debug, Serialize)]
pub struct PingRow {
    /// PVC name.
    pub pvc: String,
    /// "end-to-end" or "segment".
    pub kind: String,
    /// Requests sent.
    pub sent: u64,
    /// Requests not sent: the PVC's shaper had no room for them.
    pub refused: u64,
    /// Answers matched to their request.
    pub answered: u64,
    /// Answers that matched no waiting request.
    pub unmatched: u64,
    /// Round trip, microseconds: shortest, mean, longest (0 with no answer).
    pub rtt_us: [f64; 3],
}

/// The rows of the pings sent on `p` by its sending host `h`.
pub(crate) fn ping_rows(p: &aurora_topo::PvcInfo, h: &TrafficHost) -> Vec<PingRow> {
    p.pings
        .iter()
        .filter_map(|&(i, e2e)| {
            let g = h.ping(i)?;
            let us = |d: Duration| d.as_nanos() as f64 / 1e3;
            Some(PingRow {
                pvc: p.name.clone(),
                kind: if e2e { "end-to-end" } else { "segment" }.into(),
                sent: g.sent,
                refused: g.refused,
                answered: g.answered,
                unmatched: g.unmatched,
                rtt_us: [us(g.rtt_min), g.rtt_mean().map_or(0.0, us), us(g.rtt_max)],
            })
        })
        .collect()
}

/// Pings as text.
pub(crate) fn ping_text(rows: &[PingRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n{:<28} {:<10} {:>6} {:>8} {:>10} {:>10} {:>10}\n",
        "OAM ping on", "kind", "sent", "answered", "min us", "mean us", "max us"
    );
    for g in rows {
        s += &format!(
            "{:<28} {:<10} {:>6} {:>8} {:>10.1} {:>10.1} {:>10.1}\n",
            g.pvc, g.kind, g.sent, g.answered, g.rtt_us[0], g.rtt_us[1], g.rtt_us[2]
        );
        if g.refused > 0 {
            s += &format!(
                "{:<4}{} requests not sent: the PVC's shaper had no room\n",
                "", g.refused
            );
        }
    }
    s
}

/// One IP host's or router's counters.
#[derive(Debug, Serialize)]
pub struct IpRow {
    /// Node name.
    pub node: String,
    /// IP packets that arrived from the cell network.
    pub packets_in: u64,
    /// IP packets sent into it.
    pub packets_out: u64,
    /// Packets from the local host (its TUN interface).
    pub from_host: u64,
    /// Packets handed to the local host.
    pub to_host: u64,
    /// ICMP messages generated.
    pub icmp_sent: u64,
    /// InATMARP requests sent and answered.
    pub inarp: [u64; 2],
    /// Each PVC end: "port/vpi.vci -> far address" (or "unresolved").
    pub neighbours: Vec<String>,
    /// Drops by reason.
    pub drops: Vec<(String, u64)>,
    /// ATMARP: as a server, the addresses registered; as a client, whether
    /// the server has confirmed this node's registration.
    pub atmarp: String,
}

/// An IP node's row.
pub(crate) fn ip_row(name: &str, n: &aurora_ip::node::IpNode) -> IpRow {
    let c = n.counters();
    IpRow {
        node: name.to_string(),
        packets_in: c.packets_in,
        packets_out: c.packets_out,
        from_host: c.from_host,
        to_host: c.to_host,
        icmp_sent: c.icmp_sent,
        inarp: [c.inarp_requests, c.inarp_replies],
        neighbours: n
            .neighbours()
            .map(|(p, vc, far)| {
                format!(
                    "{p}/{vc} -> {}",
                    far.map_or("unresolved".to_string(), |a| a.to_string())
                )
            })
            .collect(),
        drops: c
            .drops
            .nonzero()
            .map(|(r, k)| (r.name().to_string(), k))
            .chain((c.sdus_dropped > 0).then(|| ("aal5-reassembly".to_string(), c.sdus_dropped)))
            .collect(),
        atmarp: if n.config().atmarp_server {
            let t = n.atmarp_table();
            format!(
                "server for {} address{} ({} answered, {} NAKs)",
                t.len(),
                if t.len() == 1 { "" } else { "es" },
                c.served[0],
                c.served[1]
            )
        } else if n.config().server_vc.is_some() {
            match n.registered() {
                Some(_) => "registered with the server".into(),
                None => "NOT registered: the server has not answered".into(),
            }
        } else {
            String::new()
        },
    }
}

/// IP rows as text.
pub(crate) fn ip_text(rows: &[IpRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n{:<12} {:>8} {:>8} {:>9} {:>8} {:>6} {:>11}  {}\n",
        "IP node", "in", "out", "from host", "to host", "ICMP", "InATMARP", "PVC -> neighbour"
    );
    for r in rows {
        s += &format!(
            "{:<12} {:>8} {:>8} {:>9} {:>8} {:>6} {:>5}/{:<5}  {}\n",
            r.node,
            r.packets_in,
            r.packets_out,
            r.from_host,
            r.to_host,
            r.icmp_sent,
            r.inarp[0],
            r.inarp[1],
            r.neighbours.join(", ")
        );
        if !r.atmarp.is_empty() {
            s += &format!("{:<12} ATMARP: {}\n", "", r.atmarp);
        }
        for (why, n) in &r.drops {
            s += &format!("{:<12} dropped {n} ({why})\n", "");
        }
    }
    s
}

/// One link direction's counters.
#[derive(Debug, Serialize)]
pub struct LinkRow {
    /// "from -> to".
    pub dir: String,
    /// Cells offered.
    pub offered: u64,
    /// Cells delivered.
    pub delivered: u64,
    /// Cells dropped at a full transmit buffer.
    pub overflow: u64,
    /// Cells lost.
    pub lost: u64,
    /// Cells delivered with a bit error.
    pub errored: u64,
}

impl LinkRow {
    /// Direction `dir`'s row from its counters.
    pub(crate) fn new(dir: String, c: &aurora_engine::DirCounters) -> Self {
        LinkRow {
            dir,
            offered: c.offered,
            delivered: c.delivered,
            overflow: c.overflow,
            lost: c.lost,
            errored: c.errored,
        }
    }
}

/// The run's report.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// "virtual time" or "real time".
    pub mode: String,
    /// Time run (virtual, or wall-clock in real time).
    pub virtual_secs: f64,
    /// Events handled.
    pub events: u64,
    /// Worker threads the network ran on.
    pub workers: usize,
    /// The least time a frame takes between two workers' nodes, in
    /// microseconds: how far the workers may run apart (none with one).
    pub lookahead_us: Option<f64>,
    /// Digest of every delivery: equal for equal topology and seed.
    pub trace: String,
    /// Per PVC.
    pub pvcs: Vec<PvcRow>,
    /// Per ping.
    pub pings: Vec<PingRow>,
    /// Per link direction.
    pub links: Vec<LinkRow>,
    /// Per switch port: (switch, port, in, out, dropped).
    pub switch_ports: Vec<(String, u16, u64, u64, u64)>,
    /// PDUs a host's reassembler dropped: (host, reason, count), non-zero only.
    pub host_drops: Vec<(String, String, u64)>,
    /// IP hosts and routers.
    pub ip: Vec<IpRow>,
    /// Per direction of each PVC between IP nodes, its books by PDU.
    pub ip_pvcs: Vec<crate::ip_books::IpPvcRow>,
    /// Capture files written, and what each holds.
    pub captures: Vec<aurora_capture::Written>,
    /// Time the network was given, after senders stopped, for what was on
    /// its way to arrive (seconds).
    pub drain_secs: f64,
    /// Data cells dropped anywhere, per place and reason.
    pub cell_losses: Vec<LossRow>,
    /// Sum over PVCs of the size of their `unaccounted` (0 when every
    /// report balances).
    pub unaccounted: u64,
    /// PDUs the books had no room to remember (the ledger and receivers
    /// keep at most `MAX_RECORDS` each); when not 0, `unaccounted` may be
    /// the books' limit, not a lost PDU.
    pub books_overflow: u64,
    /// Real time only: how late each node ran, and whether to trust the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lateness: Option<crate::lateness::LatenessReport>,
    /// TUN interfaces the run made (hosts given a `netns`, against the
    /// wall clock) and what crossed them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tuns: Vec<crate::node::TunRow>,
    /// Output ports under a discipline (`[[port]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<crate::port_report::PortReport>,
    /// PVCs with a traffic contract: shaping and policing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contracts: Vec<crate::port_report::ContractRow>,
    /// The ATOMIC LAN, if the network holds one: its mappings, flows,
    /// hosts and Mosaic nodes' drops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomic: Option<crate::atomic_report::AtomicReport>,
    /// TCP transfers (`[[tcp]]`): each end's connection and each TCP
    /// host's books.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<crate::tcp_report::TcpReport>,
    /// Cameras and viewers (`[[camera]]`, `[[viewer]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub video: Option<crate::video_report::VideoReport>,
    /// Striped VCs (`[[stripe]]`): each one's books, stripes, PDUs,
    /// reordering and resequencing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stripe: Option<crate::stripe_report::StripeReport>,
    /// Applications that open their own VCs (`[[app]]`): events,
    /// refreshes and each one's books.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<crate::signal_report::SignalReport>,
}

impl Report {
    /// `None` when every PVC's (traffic and IP) and TCP host's books balance and no TCP
    /// sink read a wrong byte; otherwise one sentence naming what does not.
    pub fn imbalance(&self) -> Option<String> {
        let all: Vec<String> = [
            self.pvc_imbalance(),
            crate::ip_books::imbalance(&self.ip_pvcs),
            self.atomic
                .as_ref()
                .and_then(crate::atomic_report::imbalance),
            self.tcp.as_ref().and_then(crate::tcp_report::imbalance),
            self.video.as_ref().and_then(crate::video_report::imbalance),
            self.stripe
                .as_ref()
                .and_then(crate::stripe_report::imbalance),
            self.signal
                .as_ref()
                .and_then(crate::signal_report::imbalance),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!all.is_empty()).then(|| all.join("; "))
    }

    /// The PVCs whose books do not balance, in one sentence.
    fn pvc_imbalance(&self) -> Option<String> {
        let bad = unbalanced(&self.pvcs);
        (!bad.is_empty()).then(|| {
            if self.books_overflow > 0 {
                format!(
                    "the report does not balance on PVC {}, but {} PDUs did not fit in the books \
                     (at most {} each): run a shorter or lighter overload",
                    bad.join(", "),
                    self.books_overflow,
                    accounting::MAX_RECORDS
                )
            } else {
                format!(
                    "the report does not balance: PDUs with no outcome on PVC {}; this is a fault of the testbed",
                    bad.join(", ")
                )
            }
        })
    }
}

/// The time the demo gives its network to deliver what is on its way
/// after its senders stop.
pub const DEMO_DRAIN: Duration = Duration::from_millis(100);

/// The clock a run keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Jump from event to event: exact, as fast as the machine goes.
    Virtual,
    /// Run each event when the wall clock reaches it; `spin` busy-waits
    /// instead of sleeping between events.
    Wall {
        /// Busy-wait for the next event.
        spin: bool,
    },
}

/// How a run goes: for how long, with what seed, under which clock, on
/// how many workers.
#[derive(Clone, Copy, Debug)]
pub struct RunArgs {
    /// Senders send for this long.
    pub duration: Duration,
    /// Then the network gets this long to deliver what is on its way.
    pub drain: Duration,
    /// Seed of every link's loss and bit errors.
    pub seed: u64,
    /// Virtual or wall-clock time.
    pub clock: Clock,
    /// At most this many worker threads.
    pub workers: usize,
}

/// Loads and runs `path` as `args` say, writing a pcap file per receiving
/// port into `capture` if given and publishing figures to `live` as it
/// goes; with `control` (real time only), listening there for `aurora vc`
/// commands to the signalling hosts while it runs.
pub fn run(
    path: &Path,
    args: RunArgs,
    capture: Option<&CaptureArg>,
    traces: Option<&Path>,
    live: Option<Arc<Mutex<Live>>>,
    control: Option<&Path>,
) -> Result<Report, String> {
    let seed = args.seed;
    let text = aurora_topo::read_topology(path)?;
    let bp = aurora_topo::compile(&text).map_err(|p| problems(path, &p))?;
    let bad = |p| problems(path, &p);
    let files = (capture, traces);
    match bp.atomic {
        None => start(bp.into_sim(seed).map_err(bad)?, args, files, live, control),
        Some(_) => start(
            bp.into_mixed(seed).map_err(bad)?,
            args,
            files,
            live,
            control,
        ),
    }
}

/// Splits a loaded network between workers, listens for `aurora vc` if
/// asked, and runs it (see [`run`]).
fn start<F: Carries<CellBytes>>(
    mut net: aurora_topo::Network<F>,
    args: RunArgs,
    files: (Option<&CaptureArg>, Option<&Path>),
    live: Option<Arc<Mutex<Live>>>,
    control: Option<&Path>,
) -> Result<Report, String> {
    net.split(args.workers, aurora_engine::plan::MIN_CUT)?;
    let _control = listen_control(&mut net, args.clock, control)?;
    let hosts: Vec<NodeId> = net.hosts.iter().map(|(_, id)| *id).collect();
    // A live display (the demo's) or a progress bar on a terminal; the run
    // goes in the same steps whether the bar shows or not.
    let total = args.duration + args.drain;
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bar = Progress::new(total, live.is_none() && terminal);
    let every = match live {
        Some(_) => LIVE_EVERY,
        None => Progress::step(total),
    };
    let mut show = |e: &Engine<F>| {
        if let Some(live) = &live {
            publish(live, e, &hosts);
        }
        bar.at(e.now(), e.events());
    };
    let watch = Some((every, &mut show as &mut dyn FnMut(&Engine<F>)));
    let report = run_network(net, args.duration, args.drain, files, args.clock, watch);
    bar.finish();
    report
}

/// With `path`, the control socket for `aurora vc` commands to the
/// network's signalling hosts (in real time only); it is removed when the
/// guard returned is dropped.
fn listen_control<F: Frame>(
    net: &mut aurora_topo::Network<F>,
    clock: Clock,
    path: Option<&Path>,
) -> Result<Option<crate::vc_cmd::ControlServer>, String> {
    let Some(path) = path else { return Ok(None) };
    if clock == Clock::Virtual {
        return Err("--control needs a run in real time".into());
    }
    crate::vc_cmd::serve(&mut net.sim, net.hosts.clone(), path, "aurora run").map(Some)
}

/// How often a run with a live display publishes its figures.
const LIVE_EVERY: Duration = Duration::from_millis(100);

/// Something shown the engine every so often while it runs: the period,
/// and what to call.
pub(crate) type Watch<'a, F = CellBytes> = (Duration, &'a mut dyn FnMut(&Engine<F>));

/// Runs a loaded network for `duration` (senders then stop) and `drain`
/// under `clock`, showing it to `watch` every period, and reports. What it
/// writes: captures as `files.0` says, and the TCP connections' traces
/// (those of `[[tcp]]` entries with `trace = true`) to folder `files.1`.
pub(crate) fn run_network<F: Carries<CellBytes>>(
    mut net: aurora_topo::Network<F>,
    duration: Duration,
    drain: Duration,
    (capture, traces): (Option<&CaptureArg>, Option<&Path>),
    clock: Clock,
    watch: Option<Watch<'_, F>>,
) -> Result<Report, String> {
    let end = Instant::ZERO + duration;
    for (_, id) in &net.hosts {
        if let Some(h) = net.sim.node_mut::<TrafficHost>(*id) {
            h.stop_sending_at(end);
        }
        if let Some(h) = net.sim.node_mut::<aurora_stripe::StripeHost>(*id) {
            h.stop_sending_at(end);
        }
        if let Some(h) = net.sim.node_mut::<aurora_signal::host::SignalHost>(*id) {
            h.stop_sending_at(end);
        }
    }
    crate::video_report::stop_at(&mut net, end);
    let (ledger, frames) = tap_drops(&mut net.sim, net.atomic.as_ref());
    let captures = match capture {
        Some(cap) => {
            let names = crate::lateness::names_in(&net, net.sim.node_count());
            let frames = crate::captures::frame_ports(net.atomic.as_ref(), &net.sim);
            // In real time, written on a thread of its own: the engine
            // never waits for the disk; what the capture cannot keep up
            // with is counted.
            let background = clock != Clock::Virtual;
            Some(crate::captures::tap(
                &mut net.sim,
                cap,
                names,
                frames,
                background,
            )?)
        }
        None => None,
    };
    // Hosts given a network namespace get their TUN interface there, so
    // tools in that namespace (ping, iperf3) talk through the network.
    let mut tuns = Vec::new();
    if clock != Clock::Virtual {
        for (id, t) in net.tuns.iter().filter(|(_, t)| t.netns.is_some()) {
            let dev = aurora_topo::open_tun(t)
                .map_err(|e| format!("TUN interface {} of node {}: {e}", t.name, id.0))?;
            net.sim
                .set_packet_device(*id, Box::new(dev))
                .map_err(|e| format!("TUN interface {}: {e}", t.name))?;
            tuns.push((*id, t.clone()));
        }
    }
    let mut wall = match clock {
        Clock::Virtual => None,
        Clock::Wall { spin } => Some(net.sim.wall_clock(spin)),
    };
    let mut step = |sim: &mut Engine<F>, t: Instant| match wall.as_mut() {
        Some(w) => sim.run_wall(t, w),
        None => sim.run_until(t),
    };
    match watch {
        Some((every, f)) => {
            let mut t = Instant::ZERO;
            while t < end + drain {
                t = (t + every.max(Duration::from_nanos(1))).min(end + drain);
                step(&mut net.sim, t);
                f(&net.sim);
            }
        }
        None => step(&mut net.sim, end + drain),
    }
    // The taps hold the other references; take them out of the engine.
    net.sim.clear_tap();
    net.sim.clear_drop_tap();
    let ledger = Arc::try_unwrap(ledger)
        .map_err(|_| "the ledger is still in use".to_string())?
        .into_inner()
        .map_err(|_| "the ledger was left half-written".to_string())?
        .finish();
    let written = crate::captures::finish(captures)?;
    let names = Names {
        pvcs: &net.pvcs,
        links: &net.links,
        hosts: &net.hosts,
        switches: &net.switches,
        ip_nodes: &net.ip_nodes,
    };
    let mut r = build_report(&names, &net.sim, &ledger);
    r.ip_pvcs = crate::ip_books::report(&net.pvcs, &net.sim, &ledger, &node_names(&names));
    r.virtual_secs = duration.as_secs_f64();
    r.drain_secs = drain.as_secs_f64();
    r.events = net.sim.events();
    r.trace = format!("{:016x}", net.sim.trace_hash());
    r.captures = written;
    r.tuns = tuns
        .iter()
        .filter_map(|(id, t)| {
            let netns = t.netns.as_deref().unwrap_or("-");
            let name = format!("{} {}/{} in {netns}", t.name, t.addr, t.prefix);
            Some(crate::node::TunRow::new(
                name,
                &net.sim.device_counters(*id)?,
            ))
        })
        .collect();
    r.ports = crate::port_report::report(&net.ports, &net.sim);
    r.contracts = crate::port_report::contracts(&net);
    if let Some(a) = &net.atomic {
        let frames = frames
            .lock()
            .map_err(|_| "the ATOMIC ledger was left half-written")?;
        let names = crate::atomic_books::node_names(a);
        let name = |n: u32| names.get(&n).cloned().unwrap_or_else(|| "?".into());
        r.atomic = Some(crate::atomic_report::report_on(
            a,
            &net.sim,
            duration,
            (&frames, &name),
            true,
        ));
    }
    r.tcp = crate::tcp_report::report(&net, end + drain);
    let place_names = node_names(&names);
    r.video = crate::video_report::report(&net, end, &ledger, &place_names);
    r.stripe = crate::stripe_report::report(
        &net.stripes,
        &net.pvcs,
        &net.sim,
        &ledger,
        &|p| place_name(&place_names, p),
        end + drain,
        duration.as_secs_f64(),
    );
    r.signal = crate::signal_report::report(&net, &ledger, &place_names, end + drain);
    if let (Some(t), Some(dir)) = (r.tcp.as_mut(), traces) {
        t.traces = crate::tcp_trace::write_traces(&net, dir)?;
    }
    match wall {
        None => r.mode = "virtual time".into(),
        Some(w) => {
            r.mode = "real time".into();
            let asked =
                std::time::Duration::from_nanos((duration + drain).as_nanos().max(0) as u64);
            let advice = "rerun with --virtual for exact results";
            r.lateness = Some(crate::lateness::of_network(&net, &w, Some(asked), advice));
        }
    }
    if let Some(a) = r.atomic.as_mut() {
        a.mode = r.mode.clone();
    }
    rates(&mut r);
    Ok(r)
}

/// The two ledgers a run's drop tap feeds, shared with the tap.
pub(crate) type Ledgers = (
    Arc<Mutex<accounting::Recorder>>,
    Arc<Mutex<crate::atomic_books::FrameLedger>>,
);

/// Shows every frame engine `e` drops to the ledger it belongs in: an
/// ATOMIC frame (at a node of ATOMIC part `atomic`) to the books of flows,
/// a cell to the cell ledger, which charges it to its PDU.
pub(crate) fn tap_drops<F: Carries<CellBytes>>(
    e: &mut Engine<F>,
    atomic: Option<&aurora_topo::AtomicPart>,
) -> Ledgers {
    let nodes = crate::captures::frame_ports(atomic, e);
    let flows = atomic.map_or_else(Vec::new, crate::atomic_books::flows);
    let frames =
        crate::atomic_books::FrameLedger::new(nodes.clone(), flows.into_iter().map(|f| f.0));
    let ledgers: Ledgers = (
        Arc::new(Mutex::new(accounting::Recorder::new())),
        Arc::new(Mutex::new(frames)),
    );
    let (cells, frames) = ledgers.clone();
    e.set_drop_tap(Box::new(move |t, at, why, f: &F| {
        // Poisoned only if a tap panicked, which ends the run anyway.
        if crate::atomic_books::frame_place(&nodes, at) {
            if let Ok(mut l) = frames.lock() {
                l.dropped(at, why, f.bytes());
            }
        } else if let (Some(cell), Ok(mut b)) = (f.peek(), cells.lock()) {
            b.dropped(t, at, why, cell)
        }
    }));
    ledgers
}

/// Figures a real-time run publishes as it goes, for a live display.
#[derive(Debug, Default)]
pub struct Live {
    /// Per (receiving host, VC): bytes of verified PDUs so far.
    pub rx_bytes: BTreeMap<(u32, aurora_wire::cell::VcId), u64>,
    /// Per sending host: its pings so far.
    pub pings: BTreeMap<u32, Vec<aurora_net::oam::PingStats>>,
}

/// Publishes the traffic hosts' figures so far to `live`.
fn publish<F: Frame>(live: &Mutex<Live>, e: &Engine<F>, hosts: &[NodeId]) {
    // A poisoned lock means the display thread died; nothing to show.
    let Ok(mut l) = live.lock() else {
        return;
    };
    for &id in hosts {
        let Some(h) = e.node::<TrafficHost>(id) else {
            continue;
        };
        for (vc, f) in h.received_all() {
            l.rx_bytes.insert((id.0, vc), f.bytes);
        }
        l.pings.insert(id.0, h.pings().collect());
    }
}

pub(crate) fn problems(path: &Path, p: &aurora_topo::Problems) -> String {
    let n = p.0.len();
    let list: Vec<String> =
        p.0.iter()
            .map(|x| format!("{}:{x}", path.display()))
            .collect();
    format!(
        "{} has {n} problem{}:\n{}",
        path.display(),
        if n == 1 { "" } else { "s" },
        list.join("\n")
    )
}

/// The names and circuits a report is about.
pub(crate) struct Names<'a> {
    pub pvcs: &'a [aurora_topo::PvcInfo],
    pub links: &'a [(aurora_topo::LinkEnd, aurora_topo::LinkEnd)],
    pub hosts: &'a [(String, NodeId)],
    pub switches: &'a [(String, NodeId, u16)],
    pub ip_nodes: &'a [(String, NodeId)],
}

/// Turns per-PVC byte counts into Mb/s over `secs`.
fn rates(r: &mut Report) {
    let secs = r.virtual_secs.max(1e-9);
    for p in &mut r.pvcs {
        p.mbps /= secs * 1e6;
    }
}

/// "node:port in|out".
fn place_name(names: &BTreeMap<u32, &str>, p: Place) -> String {
    let side = match p.side {
        Side::In => "in",
        Side::Out => "out",
    };
    let node = names.get(&p.node).copied().unwrap_or("?");
    format!("{node}:{} {side}", p.port)
}

pub(crate) fn loss_rows<'a>(
    names: &BTreeMap<u32, &str>,
    it: impl Iterator<Item = (&'a accounting::Loss, &'a u64)>,
) -> Vec<LossRow> {
    it.map(|(l, n)| LossRow {
        at: place_name(names, l.place),
        reason: l.reason.to_string(),
        count: *n,
    })
    .collect()
}

/// Every node's name, by its number.
fn node_names<'a>(names: &Names<'a>) -> BTreeMap<u32, &'a str> {
    names
        .hosts
        .iter()
        .chain(names.ip_nodes)
        .map(|(n, id)| (id.0, n.as_str()))
        .chain(names.switches.iter().map(|(n, id, _)| (id.0, n.as_str())))
        .collect()
}

fn build_report<F: Frame>(names: &Names, view: &Engine<F>, ledger: &Ledger) -> Report {
    let node_names = node_names(names);
    // PVCs between traffic hosts; IP nodes report their own figures. A
    // PVC's flow number is its index (see the topology compiler).
    let pvcs: Vec<PvcRow> = names
        .pvcs
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let src = view.node::<TrafficHost>(p.from)?;
            let dst = view.node::<TrafficHost>(p.to)?;
            let r = dst.received(p.to_vc);
            let sent = p.flows.iter().map(|&i| src.sent(i)).sum();
            let receiver = Place {
                node: p.to.0,
                port: 0,
                side: Side::In,
            };
            let a = accounting::reconcile(
                u16::try_from(i).ok()?,
                sent,
                r.delivered,
                ledger,
                dst.book(p.to_vc),
                receiver,
                &[],
            );
            Some(PvcRow {
                name: p.name.clone(),
                sent,
                delivered: a.delivered,
                corrupted: a.corrupted,
                lost: a.lost_total(),
                losses: loss_rows(&node_names, a.lost.iter()),
                in_flight: a.in_flight,
                unaccounted: a.unaccounted,
                mbps: r.bytes as f64 * 8.0,
                misordered: r.out_of_order,
            })
        })
        .collect();
    let unaccounted = pvcs.iter().map(|p| p.unaccounted.unsigned_abs()).sum();
    let pings = names
        .pvcs
        .iter()
        .flat_map(|p| {
            view.node::<TrafficHost>(p.from)
                .map(|h| ping_rows(p, h))
                .unwrap_or_default()
        })
        .collect();
    let mut links = Vec::new();
    for ((an, ai, ap), (bn, bi, bp)) in names.links {
        for (from, fid, fp, to) in [(an, *ai, *ap, bn), (bn, *bi, *bp, an)] {
            if let Some(c) = view.link(fid, fp) {
                links.push(LinkRow::new(format!("{from}:{fp} -> {to}"), &c));
            }
        }
    }
    let mut host_drops = Vec::new();
    for (name, id) in names.hosts {
        if let Some(h) = view.node::<TrafficHost>(*id) {
            for (reason, n) in h.rx_stats().pdus_dropped.nonzero() {
                host_drops.push((name.clone(), reason.name().to_string(), n));
            }
        }
    }
    let mut switch_ports = Vec::new();
    for (name, id, ports) in names.switches {
        let Some(sw) = view.node_dyn(*id) else {
            continue;
        };
        for p in 0..*ports {
            let c = sw.port_summary(p).unwrap_or_default();
            switch_ports.push((name.clone(), p, c.cells_in, c.cells_out, c.dropped));
        }
    }
    Report {
        pvcs,
        pings,
        links,
        switch_ports,
        host_drops,
        ip: names
            .ip_nodes
            .iter()
            .filter_map(|(n, id)| {
                view.node::<aurora_ip::node::IpNode>(*id)
                    .map(|x| ip_row(n, x))
            })
            .collect(),
        cell_losses: loss_rows(&node_names, ledger.cells().iter()),
        unaccounted,
        books_overflow: ledger.overflow()
            + names
                .pvcs
                .iter()
                .filter_map(|p| view.node::<TrafficHost>(p.to)?.book(p.to_vc))
                .map(accounting::RxBook::overflow)
                .sum::<u64>(),
        workers: view.workers(),
        lookahead_us: view.lookahead().map(|d| d.as_nanos() as f64 / 1e3),
        ..Report::default()
    }
}

/// The report as text.
pub fn text(r: &Report) -> String {
    let workers = match r.lookahead_us {
        Some(l) if r.workers > 1 => format!(", {} workers (lookahead {l:.0} us)", r.workers),
        _ => String::new(),
    };
    let mut s = format!(
        "{} {:.3} s, {} events{workers}, trace {}\n\n",
        r.mode, r.virtual_secs, r.events, r.trace
    );
    s += &pvcs_text(&r.pvcs, true);
    if r.drain_secs > 0.0 {
        s += &format!(
            "(senders stopped at {:.3} s; the network then had {:.3} s to deliver what was on its way)\n",
            r.virtual_secs, r.drain_secs
        );
    }
    s += &cell_losses_text(&r.cell_losses);
    s += &ping_text(&r.pings);
    s += &crate::node::links_text(&r.links, "link (cells)", 28);
    if r.switch_ports.iter().any(|(_, _, i, o, d)| i + o + d > 0) {
        s += &format!(
            "\n{:<12} {:>5} {:>10} {:>10} {:>8}\n",
            "node", "port", "cells in", "cells out", "dropped"
        );
    }
    for (n, p, i, o, d) in &r.switch_ports {
        if i + o + d > 0 {
            s += &format!("{n:<12} {p:>5} {i:>10} {o:>10} {d:>8}\n");
        }
    }
    if !r.host_drops.is_empty() {
        s += &format!(
            "\n{:<12} {:<24} {:>8}\n",
            "host", "PDUs dropped: reason", "count"
        );
        for (h, why, n) in &r.host_drops {
            s += &format!("{h:<12} {why:<24} {n:>8}\n");
        }
    }
    s += &ip_text(&r.ip);
    s += &crate::ip_books::text(&r.ip_pvcs);
    s += &crate::captures::text(&r.captures);
    s += &crate::node::tun_text(&r.tuns);
    s += &crate::port_report::text(&r.ports);
    s += &crate::port_report::contracts_text(&r.contracts);
    if let Some(a) = &r.atomic {
        s += "\n";
        s += &crate::atomic_report::text(a);
    }
    if let Some(t) = &r.tcp {
        s += &crate::tcp_report::text(t);
    }
    if let Some(v) = &r.video {
        s += &crate::video_report::text(v);
    }
    if let Some(t) = &r.stripe {
        s += &crate::stripe_report::text(t);
    }
    if let Some(t) = &r.signal {
        s += &crate::signal_report::text(t);
    }
    if let Some(l) = &r.lateness {
        s += &crate::lateness::text(l);
    }
    s
}

/// The PVCs of `pvcs` whose books do not balance, each as "name (N PDUs)".
pub(crate) fn unbalanced(pvcs: &[PvcRow]) -> Vec<String> {
    pvcs.iter()
        .filter(|p| p.unaccounted != 0)
        .map(|p| format!("{} ({} PDUs)", p.name, p.unaccounted))
        .collect()
}

/// The PVC rows as a table (with the Mb/s column if `rate`), each PVC's
/// losses below it.
pub(crate) fn pvcs_text(pvcs: &[PvcRow], rate: bool) -> String {
    let mut s = String::new();
    if !pvcs.is_empty() {
        s += &format!(
            "{:<28} {:>8} {:>10} {:>10} {:>8} {:>9} {:>11}{}\n",
            "PVC (PDUs)",
            "sent",
            "delivered",
            "corrupted",
            "lost",
            "in flight",
            "unaccounted",
            if rate {
                format!(" {:>9}", "Mb/s")
            } else {
                String::new()
            }
        );
    }
    for p in pvcs {
        s += &format!(
            "{:<28} {:>8} {:>10} {:>10} {:>8} {:>9} {:>11}{}\n",
            p.name,
            p.sent,
            p.delivered,
            p.corrupted,
            p.lost,
            p.in_flight,
            p.unaccounted,
            if rate {
                format!(" {:>9.1}", p.mbps)
            } else {
                String::new()
            }
        );
        for l in &p.losses {
            s += &format!("{:<4}lost {} at {} ({})\n", "", l.count, l.at, l.reason);
        }
    }
    s
}

/// The data cells dropped, per place and reason, as a table.
pub(crate) fn cell_losses_text(losses: &[LossRow]) -> String {
    let mut s = String::new();
    if !losses.is_empty() {
        s += &format!(
            "\n{:<28} {:<20} {:>10}\n",
            "data cells dropped at", "reason", "cells"
        );
        for l in losses {
            s += &format!("{:<28} {:<20} {:>10}\n", l.at, l.reason, l.count);
        }
    }
    s
}
