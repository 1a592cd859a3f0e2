//! `aurora bench tcp`: how fast virtual time runs a bulk TCP transfer
//! through a two-hop ATM path, against the same path carrying the same
//! cells without TCP.
//!
//! The path: h1 — sw1 — sw2 — h2, OC-12c links (100 µs, 2 ms and 100 µs
//! one way), one PVC each way. The TCP run is one SACK connection with
//! 9,140-byte segments and 8 MiB buffers for `secs` of virtual time. The
//! limit is the engine moving the same cells: a plain AAL5 flow of
//! PDUs the size of the TCP run's packets, at the rate the TCP run
//! achieved, for the same virtual time, on the same path. Their wall times
//! give the ratio: what TCP (its hosts, segments, ACKs and timers) costs
//! on top of the cells it makes.

use std::net::Ipv4Addr;
use std::time::Instant as Wall;

use aurora_engine::{Engine, EngineNode, LinkSpec, NodeId};
use aurora_ip::node::{Interface, IpConfig, IpNode};
use aurora_net::switch::AtmSwitch;
use aurora_net::traffic::{Flow, TrafficHost};
use aurora_tcp::conn::{Config, Endpoint, Variant};
use aurora_tcp::host::{Amount, SinkSpec, SourceSpec, TcpHost};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};

/// OC-12c in cells a second.
const OC12: f64 = 1_412_830.0;
const VC: VcId = VcId::new(0, 40);
const TRUNK_VC: VcId = VcId::new(1, 77);
const MSS: u16 = 9140;

/// The path's links: access, trunk, access.
fn links() -> [LinkSpec; 3] {
    [
        LinkSpec::clean(OC12, Duration::from_micros(100), 16_384),
        LinkSpec::clean(OC12, Duration::from_millis(2), 16_384),
        LinkSpec::clean(OC12, Duration::from_micros(100), 16_384),
    ]
}

/// An engine holding h1 — sw1 — sw2 — h2, and the hosts' ids.
fn path(h1: impl EngineNode, h2: impl EngineNode) -> Result<(Engine, NodeId, NodeId), String> {
    let mut sim = Engine::new(1);
    let (sa, sb) = switches();
    let (h1, h2) = (sim.add_node(h1), sim.add_node(h2));
    let (sa, sb) = (sim.add_node(sa), sim.add_node(sb));
    let [a, t, b] = links();
    let e = |e: aurora_engine::EngineError| e.to_string();
    sim.connect((h1, 0), (sa, 0), a).map_err(e)?;
    sim.connect((sa, 1), (sb, 1), t).map_err(e)?;
    sim.connect((sb, 0), (h2, 0), b).map_err(e)?;
    Ok((sim, h1, h2))
}

/// Two switches with `vc` relayed both ways between host ports 0 and the
/// trunk on port 1.
fn switches() -> (AtmSwitch, AtmSwitch) {
    let mut a = AtmSwitch::new(2, Format::Uni);
    let mut b = AtmSwitch::new(2, Format::Uni);
    for sw in [&mut a, &mut b] {
        sw.add_vc(0, VC, 1, TRUNK_VC).expect("a VC");
        sw.add_vc(1, TRUNK_VC, 0, VC).expect("a VC");
    }
    (a, b)
}

fn ip_host(addr: Ipv4Addr) -> Result<IpNode, String> {
    let mut n = IpNode::new(IpConfig {
        interfaces: vec![Some(Interface { addr, prefix: 24 })],
        ..IpConfig::default()
    })
    .map_err(|e| e.to_string())?;
    n.add_pvc(0, VC, None).map_err(|e| e.to_string())?;
    Ok(n)
}

/// What one TCP run did.
struct TcpRun {
    wall: f64,
    /// Segments both ways (data and ACKs).
    segments: u64,
    /// Bytes delivered in order.
    bytes: u64,
    /// Cells that left h1.
    cells: u64,
    /// Data segments h1 sent.
    data_segments: u64,
}

fn tcp_run(secs: f64) -> Result<TcpRun, String> {
    let cfg = Config {
        variant: Variant::Sack,
        mss: MSS,
        send_buffer: 8 << 20,
        recv_buffer: 8 << 20,
        ..Config::default()
    };
    let mut h1 = TcpHost::new(ip_host(Ipv4Addr::new(10, 9, 0, 1))?, 1);
    let mut h2 = TcpHost::new(ip_host(Ipv4Addr::new(10, 9, 0, 2))?, 2);
    h1.add_source(SourceSpec {
        name: "bulk".into(),
        remote: Endpoint {
            addr: h2.addr(),
            port: 5001,
        },
        local_port: 40_000,
        cfg: cfg.clone(),
        start: Instant::from_millis(10),
        amount: Amount::For(Duration::from_secs(3_600)),
        drop_segments: Vec::new(),
    });
    h2.add_sink(SinkSpec {
        name: "sink".into(),
        port: 5001,
        cfg,
        check: true,
    });
    let (mut sim, h1, h2) = path(h1, h2)?;
    let t0 = Wall::now();
    sim.run_until(Instant::from_nanos((secs * 1e9) as i64));
    let wall = t0.elapsed().as_secs_f64();
    let src: &TcpHost = sim.node(h1).ok_or("no h1")?;
    let dst: &TcpHost = sim.node(h2).ok_or("no h2")?;
    let sink = dst.flows().first().ok_or("the sink saw no connection")?;
    if sink.pattern_errors() > 0 {
        return Err(format!("{} bytes arrived wrong", sink.pattern_errors()));
    }
    let cells = sim.link(h1, 0).map_or(0, |l| l.delivered);
    let data_segments = src
        .flows()
        .first()
        .and_then(|f| f.connection())
        .map_or(0, |c| c.stats().data_segs_out);
    Ok(TcpRun {
        data_segments,
        wall,
        segments: src.counters().packets_out + dst.counters().packets_out,
        bytes: sink.app_bytes(),
        cells,
    })
}

/// The same path carrying `cells_per_s` of plain AAL5 PDUs of
/// `sdu_len` bytes for `secs`: its wall time.
fn cell_run(secs: f64, sdu_len: usize, pdus_per_s: f64) -> Result<f64, String> {
    let mut h1 = TrafficHost::new(Format::Uni);
    let mut h2 = TrafficHost::new(Format::Uni);
    let count = (pdus_per_s * secs) as u64;
    h1.add_flow(Flow {
        id: 1,
        vc: VC,
        sdu_len,
        count,
        start: Instant::from_millis(10),
        interval: Duration::from_nanos((1e9 / pdus_per_s.max(1.0)) as i64),
    })
    .map_err(|e| e.to_string())?;
    h2.expect(VC);
    let (mut sim, _, _) = path(h1, h2)?;
    let t0 = Wall::now();
    sim.run_until(Instant::from_nanos((secs * 1e9) as i64));
    Ok(t0.elapsed().as_secs_f64())
}

/// The cells-only run that matches `tcp` (run for `secs`): its PDU size
/// and rate. The same cells as whole PDUs of the TCP run's data segments'
/// size (ACKs go the other way).
fn matching(tcp: &TcpRun, secs: f64) -> (usize, f64) {
    let cells_per_pdu = tcp.cells as f64 / (tcp.data_segments as f64).max(1.0);
    let sdu = (cells_per_pdu.round() as usize * 48)
        .saturating_sub(8)
        .max(48);
    let pdus_per_s = tcp.cells as f64 / secs / (sdu + 8).div_ceil(48) as f64;
    (sdu, pdus_per_s)
}

/// Virtual seconds of the two runs `--callgrind` compares: the
/// difference is the steady transfer (the window long open).
const CALLGRIND_SECS: [f64; 2] = [0.1, 0.3];

/// `--callgrind`: instructions per segment, from two lengths of run.
fn callgrind(cpu: &str) -> Result<(), String> {
    println!(
        "aurora bench tcp --callgrind: instructions per TCP segment, the same path and connection, \
         from runs of {} and {} s of virtual time (the difference: a steady transfer); {cpu}",
        CALLGRIND_SECS[0], CALLGRIND_SECS[1]
    );
    let [a, b] = CALLGRIND_SECS;
    // Virtual time is exact: the counts natively are those under valgrind.
    let (ta, tb) = (tcp_run(a)?, tcp_run(b)?);
    let secs = |s: f64| format!("{s}");
    let ia =
        crate::callgrind::instructions(&["bench", "tcp", "--only", "tcp", "--secs", &secs(a)])?;
    let ib =
        crate::callgrind::instructions(&["bench", "tcp", "--only", "tcp", "--secs", &secs(b)])?;
    let segs = (tb.segments - ta.segments) as f64;
    let data = (tb.data_segments - ta.data_segments) as f64;
    let cells = (tb.cells - ta.cells) as f64;
    let per_seg = (ib - ia) as f64 / segs;
    let per_data = (ib - ia) as f64 / data;
    // The limit: the engine, switches and AAL5 moving the same cells as
    // PDUs of the same size at the same rate, without IP or TCP.
    let (sdu, rate) = matching(&tb, b);
    let cells_only = |s: f64| {
        crate::callgrind::instructions(&["bench", "tcp", "--only", "cells", "--secs", &secs(s)])
    };
    let (ca, cb) = (cells_only(a)?, cells_only(b)?);
    let pdus = rate * (b - a);
    let per_pdu = (cb - ca) as f64 / pdus;
    println!(
        "  TCP run:    {per_seg:8.0} instructions per segment (data and ACKs: {segs:.0}), \
         {per_data:8.0} per data segment of {} cells ({:.0} per cell)",
        (cells / data).round(),
        (ib - ia) as f64 / cells
    );
    println!(
        "  cells only: {per_pdu:8.0} instructions per {sdu}-byte AAL5 PDU ({:.0} per cell): \
         the engine, switches and AAL5 alone",
        (cb - ca) as f64 / (cells)
    );
    println!(
        "  TCP and IP on top, per data segment (its ACK included): {:.0} instructions; \
         TCP run / cells only: {:.2}",
        per_data - per_pdu,
        per_data / per_pdu
    );
    Ok(())
}

/// The command: timed, or (`callgrind`) counted; `only` runs `tcp` or
/// `cells` alone (what `--callgrind` runs under valgrind).
pub fn main(secs: f64, callgrind_: bool, only: Option<&str>) -> Result<(), String> {
    match only {
        Some("tcp") => {
            let t = tcp_run(secs)?;
            println!("tcp: {} segments, {} cells", t.segments, t.cells);
            return Ok(());
        }
        Some("cells") => {
            // The match is found by a TCP run of the longer length, the
            // same in both runs `--callgrind` compares: its cost cancels.
            let b = CALLGRIND_SECS[1];
            let (sdu, rate) = matching(&tcp_run(b)?, b);
            cell_run(secs, sdu, rate)?;
            println!("cells: {sdu}-byte PDUs at {rate:.0} a second");
            return Ok(());
        }
        Some(other) => return Err(format!("no run \"{other}\" to measure alone")),
        None => {}
    }
    let cpu = crate::bench_iperf::cpu();
    if callgrind_ {
        return callgrind(&cpu);
    }
    println!(
        "aurora bench tcp: one SACK connection, {MSS}-byte MSS, h1 - sw1 - sw2 - h2 over OC-12c \
         (2.4 ms round trip), {secs} s of virtual time; {cpu}"
    );
    let tcp = tcp_run(secs)?;
    let goodput = tcp.bytes as f64 * 8.0 / secs;
    let (sdu, pdus_per_s) = matching(&tcp, secs);
    let plain = cell_run(secs, sdu, pdus_per_s)?;
    println!(
        "  TCP:   {:.2} virtual s per wall s, {:.0} segments/s, {:.1} M cells/s per core; goodput {:.1} Mb/s ({:.2} of OC-12c's payload)",
        secs / tcp.wall,
        tcp.segments as f64 / tcp.wall,
        tcp.cells as f64 / tcp.wall / 1e6,
        goodput / 1e6,
        goodput / (OC12 * 48.0 * 8.0)
    );
    println!(
        "  limit: the same {:.0} cells/s as {sdu}-byte AAL5 PDUs without TCP: {:.2} virtual s per wall s",
        tcp.cells as f64 / secs,
        secs / plain
    );
    println!(
        "  TCP run / cells-only run, wall time: {:.2} (TCP's hosts, ACKs and timers on top of its cells)",
        tcp.wall / plain
    );
    Ok(())
}
