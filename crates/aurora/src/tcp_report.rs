//! The report of TCP transfers (`[[tcp]]`): per transfer, its source's
//! connection and the connections its sink accepted from it (bytes,
//! goodput, recovery counts, final window and state); per TCP host, its
//! packet books, which must balance.

use aurora_engine::Engine;
use aurora_tcp::conn::{Connection, State};
use aurora_tcp::host::{Amount, Flow, Role, TcpHost};
use aurora_time::Instant;
use aurora_topo::tcp::TcpInfo;
use serde::Serialize;

/// The TCP part of a run's report.
#[derive(Debug, Serialize)]
pub struct TcpReport {
    /// Per `[[tcp]]` entry, in file order.
    pub flows: Vec<TcpFlowRow>,
    /// Per TCP host.
    pub hosts: Vec<TcpHostRow>,
    /// Trace files written (JSON and plots), for entries with
    /// `trace = true`.
    pub traces: Vec<String>,
}

/// One transfer.
#[derive(Debug, Serialize)]
pub struct TcpFlowRow {
    /// The entry's name.
    pub name: String,
    /// The sending host.
    pub from: String,
    /// The receiving host.
    pub to: String,
    /// The source's loss recovery.
    pub variant: String,
    /// The sink's port.
    pub port: u16,
    /// What the source was to send: "N bytes", "for S s", or "Linux's
    /// choice" when the source is a netns host's.
    pub amount: String,
    /// Aurora's ends: the source's connection (if the source is Aurora's),
    /// then each connection the sink accepted from it.
    pub connections: Vec<ConnRow>,
}

/// One connection at one end.
#[derive(Debug, Serialize)]
pub struct ConnRow {
    /// The host it is on.
    pub host: String,
    /// `source` or `sink`.
    pub role: String,
    /// Local and remote ends, "addr:port -> addr:port" ("not started"
    /// for a source before its start).
    pub ends: String,
    /// Loss recovery it ran.
    pub variant: String,
    /// Bytes the application wrote (source) or read (sink).
    pub bytes: u64,
    /// When it connected or was accepted, seconds.
    pub start_secs: Option<f64>,
    /// When it was done (a source's last byte and FIN ACKed; a sink's
    /// peer FIN in after every byte), seconds.
    pub done_secs: Option<f64>,
    /// Megabits of application data a second from start to done (to the
    /// end of the run if not done).
    pub goodput_mbps: Option<f64>,
    /// Segments sent again.
    pub retransmits: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Entries into loss recovery on duplicate ACKs.
    pub fast_retransmits: u64,
    /// Partial ACKs during recovery.
    pub partial_acks: u64,
    /// Duplicate ACKs received.
    pub dup_acks: u64,
    /// Smoothed round trip, milliseconds, once measured.
    pub srtt_ms: Option<f64>,
    /// Payload bytes per segment agreed.
    pub mss: u32,
    /// Congestion window at the end, bytes.
    pub cwnd: u32,
    /// Slow-start threshold at the end, bytes (`None` while unset).
    pub ssthresh: Option<u32>,
    /// State at the end (RFC 9293's names).
    pub state: String,
    /// Why it closed, if it has.
    pub close_reason: Option<String>,
    /// Bytes the sink read that were not the pattern.
    pub pattern_errors: u64,
    /// Segments the source's drop script took.
    pub scripted_drops: u64,
}

/// One TCP host's books: `packets_in = to_connections + the drops`, and
/// `packets_out` = what its IP node took from the host (`ip_from_host`).
#[derive(Debug, Serialize)]
pub struct TcpHostRow {
    /// The host.
    pub host: String,
    /// Packets its IP node handed up.
    pub packets_in: u64,
    /// Of those, given to a connection.
    pub to_connections: u64,
    /// Of those, dropped, by reason (`not_tcp`, `bad_segment`,
    /// `no_connection`, `no_room`).
    pub drops: Vec<(String, u64)>,
    /// Packets its connections sent, handed to its IP node.
    pub packets_out: u64,
    /// Packets the IP node counted from the host.
    pub ip_from_host: u64,
    /// Segments its sources' drop scripts took (never reached the IP
    /// node).
    pub scripted_drops: u64,
    /// Closed connections forgotten to make room.
    pub forgotten: u64,
    /// Both identities hold.
    pub balanced: bool,
}

/// RFC 9293's name of a state.
fn state_name(s: State) -> &'static str {
    match s {
        State::SynSent => "SYN-SENT",
        State::SynReceived => "SYN-RECEIVED",
        State::Established => "ESTABLISHED",
        State::FinWait1 => "FIN-WAIT-1",
        State::FinWait2 => "FIN-WAIT-2",
        State::CloseWait => "CLOSE-WAIT",
        State::Closing => "CLOSING",
        State::LastAck => "LAST-ACK",
        State::TimeWait => "TIME-WAIT",
        State::Closed => "CLOSED",
    }
}

fn secs(t: Instant) -> f64 {
    t.since(Instant::ZERO).as_secs_f64()
}

/// Flow `f` on host `host`, the run having ended at `end`.
fn conn_row(host: &str, f: &Flow, end: Instant) -> ConnRow {
    let c: Option<&Connection> = f.connection();
    let s = c.map(|c| *c.stats()).unwrap_or_default();
    let goodput_mbps = f.started().map(|t0| {
        let t1 = f.done().unwrap_or(end);
        let dt = t1.since(t0).as_secs_f64();
        if dt > 0.0 {
            f.app_bytes() as f64 * 8.0 / dt / 1e6
        } else {
            0.0
        }
    });
    let (cwnd, ssthresh) = c.map_or((0, u32::MAX), Connection::window);
    ConnRow {
        host: host.to_string(),
        role: match f.role() {
            Role::Source => "source",
            Role::Sink => "sink",
        }
        .into(),
        ends: c.map_or("not started".into(), |c| {
            format!(
                "{}:{} -> {}:{}",
                c.local().addr,
                c.local().port,
                c.remote().addr,
                c.remote().port
            )
        }),
        variant: c.map_or(String::new(), |c| c.config().variant.to_string()),
        bytes: f.app_bytes(),
        start_secs: f.started().map(secs),
        done_secs: f.done().map(secs),
        goodput_mbps,
        retransmits: s.retransmits,
        timeouts: s.timeouts,
        fast_retransmits: s.fast_retransmits,
        partial_acks: s.partial_acks,
        dup_acks: s.dup_acks,
        srtt_ms: c
            .and_then(Connection::srtt)
            .map(|d| d.as_nanos() as f64 / 1e6),
        mss: c.map_or(0, Connection::smss),
        cwnd,
        ssthresh: (ssthresh != u32::MAX).then_some(ssthresh),
        state: c.map_or("not started", |c| state_name(c.state())).into(),
        close_reason: c
            .and_then(Connection::close_reason)
            .map(|r| r.name().to_string()),
        pattern_errors: f.pattern_errors(),
        scripted_drops: f.scripted_drops(),
    }
}

/// Aurora's ends of transfer `t` in `sim`, each with its host's name: the
/// source's (if the source is Aurora's), then each connection the sink
/// accepted from it.
pub fn ends_of<'a, F: aurora_net::Frame>(
    t: &'a TcpInfo,
    sim: &'a Engine<F>,
) -> Vec<(&'a str, &'a Flow)> {
    let mut ends = Vec::new();
    if let Some(h) = t.from_node.and_then(|id| sim.node::<TcpHost>(id)) {
        ends.extend(
            h.flows()
                .iter()
                .filter(|f| f.role() == Role::Source && f.name() == t.name)
                .map(|f| (t.from.as_str(), f)),
        );
    }
    if let Some(h) = t.to_node.and_then(|id| sim.node::<TcpHost>(id)) {
        // The sink's connections from this transfer's source: from its
        // address and, when the source is Aurora's, its own port (a
        // Linux source chooses its port).
        let mine = |c: &Connection| {
            c.local().port == t.port
                && c.remote().addr == t.from_addr
                && (t.from_node.is_none() || c.remote().port == t.local_port)
        };
        ends.extend(
            h.flows()
                .iter()
                .filter(|f| f.role() == Role::Sink && f.connection().is_some_and(mine))
                .map(|f| (t.to.as_str(), f)),
        );
    }
    ends
}

/// The rows of transfer `t` in `sim`.
fn flow_row<F: aurora_net::Frame>(t: &TcpInfo, sim: &Engine<F>, end: Instant) -> TcpFlowRow {
    let connections = ends_of(t, sim)
        .into_iter()
        .map(|(host, f)| conn_row(host, f, end))
        .collect();
    TcpFlowRow {
        name: t.name.clone(),
        from: t.from.clone(),
        to: t.to.clone(),
        variant: t.variant.to_string(),
        port: t.port,
        amount: match t.amount {
            Some(Amount::Bytes(n)) => format!("{n} bytes"),
            Some(Amount::For(d)) => format!("for {} s", d.as_secs_f64()),
            None => "Linux's choice".into(),
        },
        connections,
    }
}

/// The TCP part of the report of `net` after a run that ended at `end`;
/// `None` when the network has no `[[tcp]]` entries.
pub fn report<F: aurora_net::Frame>(
    net: &aurora_topo::Network<F>,
    end: Instant,
) -> Option<TcpReport> {
    if net.tcp.is_empty() {
        return None;
    }
    let flows = net.tcp.iter().map(|t| flow_row(t, &net.sim, end)).collect();
    let mut ids: Vec<(&str, aurora_engine::NodeId)> = net
        .tcp
        .iter()
        .flat_map(|t| {
            [
                t.from_node.map(|id| (t.from.as_str(), id)),
                t.to_node.map(|id| (t.to.as_str(), id)),
            ]
        })
        .flatten()
        .collect();
    ids.sort_by_key(|&(_, id)| id.0);
    ids.dedup();
    let hosts = ids
        .into_iter()
        .filter_map(|(name, id)| {
            let h = net.sim.node::<TcpHost>(id)?;
            let c = h.counters();
            let ip_from_host = h.ip().counters().from_host;
            Some(TcpHostRow {
                host: name.to_string(),
                packets_in: c.packets_in,
                to_connections: c.to_connections,
                drops: c
                    .drops()
                    .iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(r, n)| (r.to_string(), *n))
                    .collect(),
                packets_out: c.packets_out,
                ip_from_host,
                scripted_drops: c.scripted_drops,
                forgotten: c.forgotten,
                balanced: c.balanced() && c.packets_out == ip_from_host,
            })
        })
        .collect();
    Some(TcpReport {
        flows,
        hosts,
        traces: Vec::new(),
    })
}

/// `None` when every TCP host's books balance and no sink read a byte
/// that was not the pattern; otherwise one sentence saying where.
pub fn imbalance(r: &TcpReport) -> Option<String> {
    let mut bad: Vec<String> = r
        .hosts
        .iter()
        .filter(|h| !h.balanced)
        .map(|h| {
            format!(
                "TCP host {}'s books do not balance (in {}, to connections {}, dropped {}; \
                 out {}, IP node took {})",
                h.host,
                h.packets_in,
                h.to_connections,
                h.drops.iter().map(|(_, n)| n).sum::<u64>(),
                h.packets_out,
                h.ip_from_host
            )
        })
        .collect();
    for f in &r.flows {
        let errors: u64 = f.connections.iter().map(|c| c.pattern_errors).sum();
        if errors > 0 {
            bad.push(format!(
                "TCP transfer {}'s sink read {errors} bytes that were not the pattern",
                f.name
            ));
        }
    }
    (!bad.is_empty()).then(|| format!("{}; this is a fault of the testbed", bad.join("; ")))
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.prec$}"))
}

/// The TCP part as text.
pub fn text(r: &TcpReport) -> String {
    let mut s = format!(
        "\n{:<24} {:<6} {:>11} {:>8} {:>8} {:>6} {:>5} {:>5} {:>7} {:>7} {:>8} {:>9} {:>9}  state\n",
        "TCP transfer, end",
        "role",
        "bytes",
        "Mb/s",
        "done s",
        "retx",
        "RTOs",
        "FR",
        "partial",
        "dupACKs",
        "srtt ms",
        "cwnd",
        "ssthresh"
    );
    for f in &r.flows {
        s += &format!(
            "{} {} -> {}:{} ({}, {})\n",
            f.name, f.from, f.to, f.port, f.variant, f.amount
        );
        if f.connections.is_empty() {
            s += "  (no connection at Aurora's ends)\n";
        }
        for c in &f.connections {
            let mut state = c.state.clone();
            if let Some(why) = &c.close_reason {
                state += &format!(" ({why})");
            }
            if c.pattern_errors > 0 {
                state += &format!(", {} PATTERN ERRORS", c.pattern_errors);
            }
            if c.scripted_drops > 0 {
                state += &format!(", {} scripted drops", c.scripted_drops);
            }
            s += &format!(
                "  {:<22} {:<6} {:>11} {:>8} {:>8} {:>6} {:>5} {:>5} {:>7} {:>7} {:>8} {:>9} {:>9}  {state}\n",
                format!("{} {}", c.host, c.variant),
                c.role,
                c.bytes,
                opt(c.goodput_mbps, 1),
                opt(c.done_secs, 3),
                c.retransmits,
                c.timeouts,
                c.fast_retransmits,
                c.partial_acks,
                c.dup_acks,
                opt(c.srtt_ms, 2),
                c.cwnd,
                c.ssthresh.map_or("-".into(), |t| t.to_string()),
            );
        }
    }
    s += &format!(
        "\n{:<12} {:>9} {:>9} {:>9} {:>9} {:>9}  books\n",
        "TCP host", "in", "to conns", "out", "IP took", "scripted"
    );
    for h in &r.hosts {
        s += &format!(
            "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n",
            h.host,
            h.packets_in,
            h.to_connections,
            h.packets_out,
            h.ip_from_host,
            h.scripted_drops,
            if h.balanced {
                "balance"
            } else {
                "DO NOT BALANCE"
            }
        );
        for (why, n) in &h.drops {
            s += &format!("{:<12} dropped {n} ({why})\n", "");
        }
        if h.forgotten > 0 {
            s += &format!("{:<12} forgot {} closed connections\n", "", h.forgotten);
        }
    }
    for f in &r.traces {
        s += &format!("wrote {f}\n");
    }
    s
}
