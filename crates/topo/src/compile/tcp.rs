//! The TCP step: each `[[tcp]]` transfer's ends (two IP hosts, at most one
//! of them a netns host whose side is Linux's), its amount and its
//! settings, checked; and the sources and sinks the build step gives the
//! hosts that become TCP hosts.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::ops::Range;

use aurora_tcp::conn::{Config, Endpoint, Variant};
use aurora_tcp::host::{Amount, SinkSpec, SourceSpec};
use aurora_time::{Duration, Instant};

use super::checks::{duration_in, duration_or, entry_name, DurationRange, START_RANGE};
use super::{Ctx, Reader};
use crate::pvc::Kind;
use crate::tcp::{
    Size, TcpDef, TcpInfo, DEFAULT_BUFFER, DEFAULT_DELAYED_ACK, DEFAULT_PORT, DEFAULT_START,
    FIRST_LOCAL_PORT, MAX_BYTES, MAX_DROPS, TRACE_EVENTS,
};
use crate::HostDef;

/// How long a source may send: 1 ns to 24 hours.
const DURATION_RANGE: DurationRange = (
    Duration::from_nanos(1),
    Duration::from_secs(86_400),
    "1ns to 24 hours",
);
/// How long a receiver may hold an ACK: up to 500 ms (RFC 9293).
const DELAYED_ACK_RANGE: DurationRange = (
    Duration::from_nanos(1),
    Duration::from_millis(500),
    "1ns to 500ms",
);
/// Retransmission timeouts: 1 µs to 60 s.
const RTO_RANGE: DurationRange = (
    Duration::from_micros(1),
    Duration::from_secs(60),
    "1us to 60s",
);
/// A coarse timer's period: 1 µs to 10 s.
const TICK_RANGE: DurationRange = (
    Duration::from_micros(1),
    Duration::from_secs(10),
    "1us to 10s",
);
/// The MSS a segment can carry: at least 64, and at most what fits in
/// the largest IPv4 packet with 40 bytes of IP and TCP headers.
const MSS_MIN: u16 = 64;
/// See [`MSS_MIN`].
const MSS_MAX: u16 = 65_495;
/// Send and receive buffers: 1 KiB to 1 GiB (the most a scaled window
/// describes).
const BUFFER_MIN: u64 = 1 << 10;
/// See [`BUFFER_MIN`].
const BUFFER_MAX: u64 = 1 << 30;

/// One transfer, compiled: what the build step gives the TCP hosts.
pub(crate) struct TcpPlan {
    /// What reports need (node ids filled in by the build step).
    pub(crate) info: TcpInfo,
    /// The source, built at `from` (`None` when `from` is a netns host).
    pub(crate) source: Option<SourceSpec>,
    /// Whether the sink end is Aurora's (a TCP host) rather than Linux's.
    pub(crate) sink_here: bool,
    /// The sink, for the first entry to reach its host and port; later
    /// entries share it.
    pub(crate) sink: Option<SinkSpec>,
}

/// One end of a transfer: the host's address, MTU and whether its side
/// is Linux's (it has a netns).
#[derive(Clone, Copy)]
struct End {
    addr: Ipv4Addr,
    mtu: usize,
    linux: bool,
}

/// An entry's settings, read and checked.
#[derive(Clone, Debug, PartialEq)]
struct Settings {
    variant: Variant,
    buffer: u64,
    delayed_ack: Option<Duration>,
    sack: bool,
    timestamps: bool,
    window_scale: bool,
    maxburst: Option<u32>,
    decrease: f64,
    initial_window: Option<u32>,
    rto_min: Duration,
    rto_initial: Duration,
    tick: Option<Duration>,
    check: bool,
    trace: bool,
}

impl Settings {
    /// A connection's configuration with these settings and MSS `mss`.
    fn config(&self, mss: u16) -> Config {
        let buffer = usize::try_from(self.buffer).unwrap_or(usize::MAX);
        Config {
            variant: self.variant,
            mss,
            send_buffer: buffer,
            recv_buffer: buffer,
            window_scale: self.window_scale,
            sack: self.sack,
            timestamps: self.timestamps,
            delayed_ack: self.delayed_ack,
            initial_window: self.initial_window,
            maxburst: self.maxburst,
            decrease: self.decrease,
            rto_initial: self.rto_initial,
            rto_min: self.rto_min,
            timer_tick: self.tick,
            trace_limit: if self.trace { TRACE_EVENTS } else { 0 },
            ..Config::default()
        }
    }

    /// The receiving settings (with MSS `mss`) in which `self` and
    /// `other` (with `other_mss`) differ, by field name.
    fn sink_differences(&self, mss: u16, other: &Settings, other_mss: u16) -> Vec<&'static str> {
        let mut d = Vec::new();
        let mut differ = |name, same: bool| {
            if !same {
                d.push(name);
            }
        };
        differ("mss", mss == other_mss);
        differ("buffer", self.buffer == other.buffer);
        differ("delayed_ack", self.delayed_ack == other.delayed_ack);
        differ("sack", self.sack == other.sack);
        differ("timestamps", self.timestamps == other.timestamps);
        differ("window_scale", self.window_scale == other.window_scale);
        differ("rto_min", self.rto_min == other.rto_min);
        differ("rto_initial", self.rto_initial == other.rto_initial);
        differ("tick", self.tick == other.tick);
        differ("check", self.check == other.check);
        differ("trace", self.trace == other.trace);
        d
    }
}

/// The first entry to reach a sink: its name, line, settings and MSS.
type SinkOwner<'f> = (&'f str, usize, Settings, u16);

impl<'f> Reader<'f> {
    /// Every `[[tcp]]` entry: names, ends, amount and settings; the
    /// sources and sinks they make.
    pub(super) fn tcp(&mut self) {
        let file = self.file;
        let mut hosts: BTreeMap<&str, &HostDef> = BTreeMap::new();
        for h in &file.host {
            hosts
                .entry(h.get_ref().name.as_str())
                .or_insert(h.get_ref());
        }
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut sinks: BTreeMap<(&str, u16), SinkOwner<'f>> = BTreeMap::new();
        for (i, t) in file.tcp.iter().enumerate() {
            let (span, d) = (t.span(), t.get_ref());
            let before = self.c.problems.len();
            let (line, _) = self.c.place(span.start);
            let me = format!("tcp \"{}\"", d.name);
            entry_name(&mut self.c, span.clone(), &me, &d.name, line, &mut names);
            let from = self.tcp_end(span.clone(), &me, "from", &d.from, &hosts);
            let to = self.tcp_end(span.clone(), &me, "to", &d.to, &hosts);
            let c = &mut self.c;
            if d.from == d.to {
                c.at(
                    span.clone(),
                    format!(
                        "{me}: from and to are both \"{}\"; a transfer needs two hosts",
                        d.from
                    ),
                );
            }
            if let (Some(f), Some(t)) = (from, to) {
                if f.linux && t.linux {
                    c.at(
                        span.clone(),
                        format!(
                            "{me}: from \"{}\" and to \"{}\" both have a netns, so both ends would \
                             be Linux's TCP; at least one end must be an Aurora host (one without netns)",
                            d.from, d.to
                        ),
                    );
                }
            }
            // Which ends Aurora builds (unknown ends count as built, so
            // their settings are still checked).
            let source_here = !from.is_some_and(|e| e.linux);
            let sink_here = !to.is_some_and(|e| e.linux);
            let port = match d.port.unwrap_or(i64::from(DEFAULT_PORT)) {
                p @ 1..=65_535 => p as u16,
                p => {
                    c.at(
                        span.clone(),
                        format!("{me}: port {p} is outside 1 to 65535"),
                    );
                    DEFAULT_PORT
                }
            };
            let local_port = u16::try_from(i)
                .ok()
                .and_then(|k| FIRST_LOCAL_PORT.checked_add(k));
            if local_port.is_none() {
                c.at(
                    span.clone(),
                    format!(
                        "{me}: a file may hold at most {} [[tcp]] entries (each source takes port \
                         {FIRST_LOCAL_PORT} plus its place)",
                        u32::from(u16::MAX - FIRST_LOCAL_PORT) + 1
                    ),
                );
            }
            let amount = amount(c, span.clone(), &me, d, source_here);
            let start = match &d.start {
                None => Some(DEFAULT_START),
                Some(s) => duration_in(c, span.clone(), &format!("{me}: start"), s, START_RANGE),
            };
            let settings = settings(c, span.clone(), &me, d);
            let mss = mss_of(c, span.clone(), &me, d, [(&d.from, from), (&d.to, to)]);
            let drops = drops(c, span.clone(), &me, d, source_here);
            if let (Some(s), Some((mf, mt))) = (&settings, mss) {
                // Segments are no larger than the smaller Aurora end's MSS.
                let smallest = [(source_here, mf), (sink_here, mt)]
                    .into_iter()
                    .filter(|(here, _)| *here)
                    .map(|(_, m)| m)
                    .min();
                if let Some(m) = smallest.filter(|&m| s.buffer < u64::from(m)) {
                    c.at(
                        span.clone(),
                        format!(
                            "{me}: buffer of {} bytes is less than the MSS ({m} bytes); a buffer \
                             holds at least one segment",
                            s.buffer
                        ),
                    );
                }
            }
            if self.c.problems.len() > before {
                continue;
            }
            let (
                Some(from),
                Some(to),
                Some(amount),
                Some(start),
                Some(s),
                Some((mss_from, mss_to)),
                Some(drops),
                Some(local_port),
            ) = (from, to, amount, start, settings, mss, drops, local_port)
            else {
                continue; // a problem reported with an earlier part
            };
            let mut sink = None;
            if sink_here {
                match sinks.get(&(d.to.as_str(), port)) {
                    Some((other, at, theirs, their_mss)) => {
                        let diff = s.sink_differences(mss_to, theirs, *their_mss);
                        if !diff.is_empty() {
                            self.c.at(
                                span.clone(),
                                format!(
                                    "{me} shares the sink at \"{}\" port {port} with tcp \"{other}\" \
                                     (line {at}), but their {} differ; give them the same receiving \
                                     settings or different ports",
                                    d.to,
                                    diff.join(", ")
                                ),
                            );
                            continue;
                        }
                    }
                    None => {
                        sinks.insert((&d.to, port), (&d.name, line, s.clone(), mss_to));
                        sink = Some(SinkSpec {
                            name: format!("{}:{port}", d.to),
                            port,
                            cfg: s.config(mss_to),
                            check: s.check,
                        });
                    }
                }
            }
            let source = source_here.then(|| SourceSpec {
                name: d.name.clone(),
                remote: Endpoint {
                    addr: to.addr,
                    port,
                },
                local_port,
                cfg: s.config(mss_from),
                start: Instant::ZERO + start,
                amount: amount.unwrap_or(Amount::Bytes(0)),
                drop_segments: drops,
            });
            self.tcp_plans.push(TcpPlan {
                info: TcpInfo {
                    name: d.name.clone(),
                    from: d.from.clone(),
                    from_node: None,
                    from_addr: from.addr,
                    to: d.to.clone(),
                    to_node: None,
                    to_addr: to.addr,
                    variant: s.variant,
                    port,
                    local_port,
                    amount,
                },
                source,
                sink_here,
                sink,
            });
        }
    }

    /// End `field` (`from` or `to`) of entry `me`: the IP host `name`.
    fn tcp_end(
        &mut self,
        span: Range<usize>,
        me: &str,
        field: &str,
        name: &str,
        hosts: &BTreeMap<&str, &HostDef>,
    ) -> Option<End> {
        let c = &mut self.c;
        match self.kinds.get(name) {
            None => {
                c.at(
                    span,
                    format!("{me}: {field} \"{name}\" is not a host in this file"),
                );
                None
            }
            Some(Kind::Host) => {
                let h = hosts.get(name)?;
                if h.ip.is_none() {
                    c.at(
                        span,
                        format!(
                            "{me}: {field} host \"{name}\" has no ip; TCP runs between IP hosts \
                             (give it ip = \"a.b.c.d/len\")"
                        ),
                    );
                    return None;
                }
                // A host whose IP settings are wrong was reported with them.
                let (cfg, _) = self.ipcfg.get(name)?;
                let addr = cfg.interfaces.iter().flatten().next()?.addr;
                Some(End {
                    addr,
                    mtu: cfg.mtu,
                    linux: h.netns.is_some(),
                })
            }
            Some(k) => {
                c.at(
                    span,
                    format!("{me}: {field} \"{name}\" is a {}, not a host", k.describe()),
                );
                None
            }
        }
    }
}

/// What the source sends: exactly one of `bytes` and `duration` (neither
/// is fine when Linux's program is the source). `None` when wrong
/// (reported); `Some(None)` when neither is given.
fn amount(
    c: &mut Ctx,
    span: Range<usize>,
    me: &str,
    d: &TcpDef,
    source_here: bool,
) -> Option<Option<Amount>> {
    match (&d.bytes, &d.duration) {
        (Some(_), Some(_)) => {
            c.at(span, format!("{me}: give bytes or duration, not both"));
            None
        }
        (None, None) if source_here => {
            c.at(
                span,
                format!("{me}: give bytes (how much the source sends) or duration (for how long)"),
            );
            None
        }
        (None, None) => Some(None),
        (Some(b), None) => match b.bytes() {
            Ok(n @ 1..=MAX_BYTES) => Some(Some(Amount::Bytes(n))),
            Ok(n) => {
                c.at(
                    span,
                    format!("{me}: bytes {n} is outside 1 to {MAX_BYTES} (1TiB)"),
                );
                None
            }
            Err(m) => {
                c.at(span, format!("{me}: bytes: {m}"));
                None
            }
        },
        (None, Some(t)) => duration_in(c, span, &format!("{me}: duration"), t, DURATION_RANGE)
            .map(|t| Some(Amount::For(t))),
    }
}

/// An optional whole-number field from 1 to `max`.
fn count(
    c: &mut Ctx,
    span: Range<usize>,
    what: &str,
    v: Option<i64>,
    max: u32,
) -> Option<Option<u32>> {
    match v {
        None => Some(None),
        Some(n) if (1..=i64::from(max)).contains(&n) => Some(Some(n as u32)),
        Some(n) => {
            c.at(span, format!("{what} {n} is outside 1 to {max}"));
            None
        }
    }
}

/// The entry's settings; `None` when any is wrong (each reported).
fn settings(c: &mut Ctx, span: Range<usize>, me: &str, d: &TcpDef) -> Option<Settings> {
    let defaults = Config::default();
    let variant = match d.variant.as_deref().unwrap_or("sack").parse::<Variant>() {
        Ok(v) => Some(v),
        Err(m) => {
            c.at(span.clone(), format!("{me}: {m}"));
            None
        }
    };
    let buffer = match d.buffer.as_ref().map_or(Ok(DEFAULT_BUFFER), Size::bytes) {
        Ok(n @ BUFFER_MIN..=BUFFER_MAX) => Some(n),
        Ok(n) => {
            c.at(
                span.clone(),
                format!("{me}: buffer of {n} bytes is outside 1KiB to 1GiB"),
            );
            None
        }
        Err(m) => {
            c.at(span.clone(), format!("{me}: buffer: {m}"));
            None
        }
    };
    let delayed_ack = match d.delayed_ack.as_deref().map(str::trim) {
        None => Some(Some(DEFAULT_DELAYED_ACK)),
        Some("off") => Some(None),
        Some(s) => duration_in(
            c,
            span.clone(),
            &format!("{me}: delayed_ack (a duration or \"off\")"),
            s,
            DELAYED_ACK_RANGE,
        )
        .map(Some),
    };
    let maxburst = count(
        c,
        span.clone(),
        &format!("{me}: maxburst"),
        d.maxburst,
        65_535,
    );
    let decrease = match d.decrease {
        None => Some(0.5),
        Some(x) if (0.1..=0.95).contains(&x) => Some(x),
        Some(x) => {
            c.at(
                span.clone(),
                format!("{me}: decrease {x} is outside 0.1 to 0.95"),
            );
            None
        }
    };
    let initial_window = count(
        c,
        span.clone(),
        &format!("{me}: initial_window"),
        d.initial_window,
        1000,
    );
    let rto_min = duration_or(
        c,
        span.clone(),
        &format!("{me}: rto_min"),
        &d.rto_min,
        defaults.rto_min,
        RTO_RANGE,
    );
    let rto_initial = duration_or(
        c,
        span.clone(),
        &format!("{me}: rto_initial"),
        &d.rto_initial,
        defaults.rto_initial,
        RTO_RANGE,
    );
    let tick = match &d.tick {
        None => Some(None),
        Some(s) => duration_in(c, span, &format!("{me}: tick"), s, TICK_RANGE).map(Some),
    };
    Some(Settings {
        variant: variant?,
        buffer: buffer?,
        delayed_ack: delayed_ack?,
        sack: d.sack.unwrap_or(true),
        timestamps: d.timestamps.unwrap_or(true),
        window_scale: d.window_scale.unwrap_or(true),
        maxburst: maxburst?,
        decrease: decrease?,
        initial_window: initial_window?,
        rto_min: rto_min?,
        rto_initial: rto_initial?,
        tick: tick?,
        check: d.check.unwrap_or(true),
        trace: d.trace.unwrap_or(false),
    })
}

/// The MSS at each end (`from`, `to`): the entry's, or the host's MTU
/// less 40; checked against each Aurora end's MTU. `None` when wrong.
fn mss_of(
    c: &mut Ctx,
    span: Range<usize>,
    me: &str,
    d: &TcpDef,
    ends: [(&String, Option<End>); 2],
) -> Option<(u16, u16)> {
    let given = match d.mss {
        None => None,
        Some(m) if (i64::from(MSS_MIN)..=i64::from(MSS_MAX)).contains(&m) => Some(m as u16),
        Some(m) => {
            c.at(
                span,
                format!("{me}: mss {m} is outside {MSS_MIN} to {MSS_MAX}"),
            );
            return None;
        }
    };
    let mut ok = true;
    let mut out = [0u16; 2];
    for (k, (name, end)) in ends.into_iter().enumerate() {
        // An unknown end was reported; a netns end is Linux's, which
        // chooses its own MSS.
        let Some(e) = end else {
            out[k] = given.unwrap_or(MSS_MIN);
            continue;
        };
        let room = e.mtu.saturating_sub(40);
        match given {
            _ if e.linux => out[k] = given.unwrap_or(MSS_MIN),
            Some(m) if usize::from(m) > room => {
                c.at(
                    span.clone(),
                    format!(
                        "{me}: mss {m} is more than host \"{name}\"'s MTU ({}) less 40 bytes of IP \
                         and TCP headers ({room})",
                        e.mtu
                    ),
                );
                ok = false;
            }
            Some(m) => out[k] = m,
            None if room < usize::from(MSS_MIN) => {
                c.at(
                    span.clone(),
                    format!(
                        "{me}: host \"{name}\"'s MTU ({}) leaves an MSS of {room}, under \
                         {MSS_MIN}; raise its mtu",
                        e.mtu
                    ),
                );
                ok = false;
            }
            None => out[k] = room.min(usize::from(MSS_MAX)) as u16,
        }
    }
    ok.then_some((out[0], out[1]))
}

/// The data segments the source drops on their first sending.
fn drops(
    c: &mut Ctx,
    span: Range<usize>,
    me: &str,
    d: &TcpDef,
    source_here: bool,
) -> Option<Vec<u32>> {
    if d.drop.is_empty() {
        return Some(Vec::new());
    }
    if !source_here {
        c.at(
            span,
            format!(
                "{me}: drop needs Aurora's TCP as the source, but \"{}\" has a netns (its side is Linux's)",
                d.from
            ),
        );
        return None;
    }
    if d.drop.len() > MAX_DROPS {
        c.at(
            span,
            format!(
                "{me}: drop lists {} segments; at most {MAX_DROPS}",
                d.drop.len()
            ),
        );
        return None;
    }
    match d
        .drop
        .iter()
        .find(|&&n| !(1..=i64::from(u32::MAX)).contains(&n))
    {
        Some(n) => {
            c.at(
                span,
                format!(
                    "{me}: drop segment {n} is outside 1 to {} (segments are numbered from 1)",
                    u32::MAX
                ),
            );
            None
        }
        None => {
            let mut v: Vec<u32> = d.drop.iter().map(|&n| n as u32).collect();
            v.sort_unstable();
            v.dedup();
            Some(v)
        }
    }
}
