//! The striping step: each `[[stripe]]` entry's ends (two hosts without
//! ip), its member PVCs (each from one end to the other, in one entry
//! only, carrying no flow or ping), its unit, method, schedule and limits;
//! and the rule that a striping host carries striped VCs only.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use aurora_net::PortId;
use aurora_stripe::node::{RecvSpec, Schedule, SendSpec};
use aurora_stripe::{Config, RxLimits, SyncMode, UnitKind};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};

use super::checks::{
    duration_in, duration_or, entry_name, DurationRange, INTERVAL_RANGE, START_RANGE,
};
use super::{Ctx, Reader};
use crate::pvc::Kind;
use crate::stripe::{Knobs, StripeDef, StripeInfo, MAX_BUFFER_UNITS, MAX_IDLE_REPEATS};
use crate::tcp::Size;
use crate::MAX_FLOW_COUNT;

/// How long a flow may send: 1 ns to 24 hours.
const DURATION_RANGE: DurationRange = (
    Duration::from_nanos(1),
    Duration::from_secs(86_400),
    "1ns to 24 hours",
);
/// Receiver timers: 1 ns to 60 s.
const TIMER_RANGE: DurationRange = (
    Duration::from_nanos(1),
    Duration::from_secs(60),
    "1ns to 60s",
);
/// The idle-marker delay: 1 ns to 1 s.
const IDLE_RANGE: DurationRange = (Duration::from_nanos(1), Duration::from_secs(1), "1ns to 1s");
/// Receiver memory: one cell's payload to 1 GiB.
const BYTES_MIN: u64 = 48;
/// See [`BYTES_MIN`].
const BYTES_MAX: u64 = 1 << 30;

/// One striped VC, compiled: what the build step gives its two hosts.
pub(crate) struct StripePlan {
    /// What reports need (node ids filled in by the build step).
    pub(crate) info: StripeInfo,
    /// The sending end.
    pub(crate) send: SendSpec,
    /// The receiving end.
    pub(crate) recv: RecvSpec,
}

impl<'f> Reader<'f> {
    /// Every `[[stripe]]` entry, then the rules for the hosts at their ends.
    pub(super) fn stripes(&mut self) {
        let file = self.file;
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut member_of: BTreeMap<&'f str, &'f str> = BTreeMap::new();
        let mut ends: BTreeSet<&'f str> = BTreeSet::new();
        for s in &file.stripe {
            let (span, d) = (s.span(), s.get_ref());
            let before = self.c.problems.len();
            let (line, _) = self.c.place(span.start);
            let me = format!("stripe \"{}\"", d.name);
            entry_name(&mut self.c, span.clone(), &me, &d.name, line, &mut names);
            for (field, host) in [("from", &d.from), ("to", &d.to)] {
                if self.stripe_end(span.clone(), &me, field, host) {
                    ends.insert(host);
                }
            }
            if d.from == d.to {
                self.c.at(
                    span.clone(),
                    format!(
                        "{me}: from and to are both \"{}\"; a striped VC joins two hosts",
                        d.from
                    ),
                );
            }
            let members = self.members(span.clone(), &me, d, &mut member_of);
            let c = &mut self.c;
            let knobs = d.knobs();
            let (unit, sync) = unit_and_sync(c, span.clone(), &me, &knobs);
            let sdu = sdu_range(c, span.clone(), &me, d, unit, sync);
            let schedule = schedule(c, span.clone(), &me, d, sdu);
            let cfg = settings(c, span.clone(), &me, &knobs, unit, sync, sdu);
            if self.c.problems.len() > before {
                continue;
            }
            let (Some(members), Some(sdu), Some(schedule), Some(cfg)) =
                (members, sdu, schedule, cfg)
            else {
                continue;
            };
            let mut send_cfg = cfg.clone();
            send_cfg.stripes = members.iter().map(|m| m.1).collect();
            let mut recv_cfg = cfg;
            recv_cfg.stripes = members.iter().map(|m| m.3).collect();
            let mut bad = false;
            for cfg in [&send_cfg, &recv_cfg] {
                if let Err(e) = cfg.check() {
                    for p in e.problems {
                        self.c.at(span.clone(), format!("{me}: {p}"));
                    }
                    bad = true;
                    break;
                }
            }
            if bad {
                continue;
            }
            self.stripe_plans.push(StripePlan {
                info: StripeInfo {
                    name: d.name.clone(),
                    from: d.from.clone(),
                    from_node: aurora_engine::NodeId(0),
                    to: d.to.clone(),
                    to_node: aurora_engine::NodeId(0),
                    members: members.iter().map(|m| m.4).collect(),
                    unit: send_cfg.unit,
                    sync: send_cfg.sync,
                    greedy: schedule.interval.is_none(),
                    via: None,
                },
                send: SendSpec {
                    name: d.name.clone(),
                    ports: members.iter().map(|m| m.0).collect(),
                    cfg: send_cfg,
                    sdu,
                    schedule,
                },
                recv: RecvSpec {
                    name: d.name.clone(),
                    ports: members.iter().map(|m| m.2).collect(),
                    cfg: recv_cfg,
                    sdu,
                },
            });
        }
        self.striping_hosts(&ends, &member_of);
    }

    /// End `field` of entry `me`: `host` must be a host without ip. True
    /// when it is a host at all (so it counts as a striping host).
    fn stripe_end(&mut self, span: Range<usize>, me: &str, field: &str, host: &str) -> bool {
        match self.kinds.get(host) {
            None => {
                self.c.at(
                    span,
                    format!("{me}: {field} \"{host}\" is not a host in this file"),
                );
                false
            }
            Some(Kind::Host | Kind::MultiHost(_)) => {
                if self.ipcfg.contains_key(host) {
                    self.c.at(
                        span,
                        format!(
                            "{me}: {field} host \"{host}\" has ip; striped VCs run between hosts \
                             without ip"
                        ),
                    );
                }
                true
            }
            Some(k) => {
                self.c.at(
                    span,
                    format!("{me}: {field} \"{host}\" is a {}, not a host", k.describe()),
                );
                false
            }
        }
    }

    /// The member PVCs of entry `me`: (sender's port, sender's VC,
    /// receiver's port, receiver's VC, index among the routed PVCs) per
    /// stripe; `None` when any is wrong (reported).
    #[allow(clippy::type_complexity)]
    fn members(
        &mut self,
        span: Range<usize>,
        me: &str,
        d: &'f StripeDef,
        member_of: &mut BTreeMap<&'f str, &'f str>,
    ) -> Option<Vec<(PortId, VcId, PortId, VcId, usize)>> {
        let c = &mut self.c;
        if d.pvcs.is_empty() {
            c.at(
                span,
                format!("{me}: pvcs is empty; give at least one member PVC"),
            );
            return None;
        }
        if d.pvcs.len() > aurora_stripe::config::MAX_STRIPES {
            c.at(
                span,
                format!(
                    "{me}: {} member PVCs is more than the {} stripes a marker can name",
                    d.pvcs.len(),
                    aurora_stripe::config::MAX_STRIPES
                ),
            );
            return None;
        }
        let mut out = Vec::new();
        let mut ok = true;
        for name in &d.pvcs {
            if let Some(other) = member_of.get(name.as_str()) {
                let msg = if *other == d.name {
                    format!("{me} lists PVC \"{name}\" twice; each stripe needs its own PVC")
                } else {
                    format!(
                        "{me}: PVC \"{name}\" is a member of stripe \"{other}\" already; a PVC \
                         carries one stripe"
                    )
                };
                c.at(span.clone(), msg);
                ok = false;
                continue;
            }
            member_of.insert(name, &d.name);
            let Some(&i) = self.by_name.get(name.as_str()) else {
                if !self.pvc_names.contains(name) {
                    c.at(
                        span.clone(),
                        format!("{me} names PVC \"{name}\", which is not defined"),
                    );
                }
                // A PVC that did not route was reported with it.
                ok = false;
                continue;
            };
            let p = &self.pvcs[i];
            if p.from != d.from || p.to != d.to {
                c.at(
                    span.clone(),
                    format!(
                        "{me}: PVC \"{name}\" goes from \"{}\" to \"{}\", not from \"{}\" to \"{}\"",
                        p.from, p.to, d.from, d.to
                    ),
                );
                ok = false;
                continue;
            }
            out.push((p.from_port, p.from_vc, p.to_port, p.to_vc, i));
        }
        ok.then_some(out)
    }

    /// A striping host carries striped VCs only, and only striping hosts
    /// have more than one port.
    fn striping_hosts(&mut self, ends: &BTreeSet<&str>, member_of: &BTreeMap<&str, &str>) {
        let file = self.file;
        for p in &file.pvc {
            let d = p.get_ref();
            if member_of.contains_key(d.name.as_str()) {
                continue;
            }
            let at = [d.path.first(), d.path.last()]
                .into_iter()
                .flatten()
                .find(|n| ends.contains(n.as_str()));
            if let Some(h) = at {
                self.c.at(
                    p.span(),
                    format!(
                        "PVC \"{}\" starts or ends at \"{h}\", which is an end of a striped VC and \
                         carries striped VCs only; make it a member of a [[stripe]] or end it elsewhere",
                        d.name
                    ),
                );
            }
        }
        for h in &file.host {
            let d = h.get_ref();
            if matches!(self.kinds.get(&d.name), Some(Kind::MultiHost(_)))
                && !ends.contains(d.name.as_str())
            {
                self.c.at(
                    h.span(),
                    format!(
                        "host \"{}\" has {} ports; only the ends of striped VCs ([[stripe]]) may \
                         have more than one",
                        d.name,
                        d.ports.unwrap_or(1)
                    ),
                );
            }
        }
        for (what, span, pvc) in file
            .flow
            .iter()
            .map(|f| ("flow", f.span(), f.get_ref().pvc.as_str()))
            .chain(
                file.ping
                    .iter()
                    .map(|g| ("ping", g.span(), g.get_ref().pvc.as_str())),
            )
        {
            if let Some(s) = member_of.get(pvc) {
                self.c.at(
                    span,
                    format!(
                        "{what} on PVC \"{pvc}\", a member of stripe \"{s}\": a member carries its \
                         stripe's cells only"
                    ),
                );
            }
        }
    }
}

/// The unit and the method of entry `me`, each `None` if wrong (reported).
pub(super) fn unit_and_sync(
    c: &mut Ctx,
    span: Range<usize>,
    me: &str,
    k: &Knobs,
) -> (Option<UnitKind>, Option<SyncMode>) {
    let unit = match k.unit.unwrap_or("cell") {
        "cell" => Some(UnitKind::Cell),
        "pdu" => Some(UnitKind::Pdu),
        "ip" => Some(UnitKind::IpPacket),
        u => {
            c.at(
                span.clone(),
                format!("{me}: unit \"{u}\" is not cell, pdu or ip"),
            );
            None
        }
    };
    let sync = match k.sync.unwrap_or("marker") {
        "none" => Some(SyncMode::None),
        "sequence" => Some(SyncMode::Sequence),
        "marker" => Some(SyncMode::Marker),
        m => {
            c.at(
                span,
                format!("{me}: sync \"{m}\" is not none, sequence or marker"),
            );
            None
        }
    };
    (unit, sync)
}

/// A whole-number field from `lo` to `hi`, or its default.
pub(super) fn int_in(
    c: &mut Ctx,
    span: Range<usize>,
    what: &str,
    v: Option<i64>,
    default: i64,
    (lo, hi): (i64, i64),
) -> Option<i64> {
    let n = v.unwrap_or(default);
    if (lo..=hi).contains(&n) {
        Some(n)
    } else {
        c.at(span, format!("{what} {n} is outside {lo} to {hi}"));
        None
    }
}

/// A size field in bytes, or its default.
fn bytes_or(
    c: &mut Ctx,
    span: Range<usize>,
    what: &str,
    v: &Option<Size>,
    default: u64,
) -> Option<usize> {
    match v.as_ref().map_or(Ok(default), Size::bytes) {
        Ok(n @ BYTES_MIN..=BYTES_MAX) => Some(n as usize),
        Ok(n) => {
            c.at(
                span,
                format!("{what} of {n} bytes is outside {BYTES_MIN} bytes to 1GiB"),
            );
            None
        }
        Err(m) => {
            c.at(span, format!("{what}: {m}"));
            None
        }
    }
}

/// The SDU sizes of entry `me`: (smallest, largest).
fn sdu_range(
    c: &mut Ctx,
    span: Range<usize>,
    me: &str,
    d: &StripeDef,
    unit: Option<UnitKind>,
    sync: Option<SyncMode>,
) -> Option<(usize, usize)> {
    let unit = unit?;
    let seq = if sync == Some(SyncMode::Sequence) && unit.is_pdu() {
        aurora_stripe::format::PDU_SEQ_LEN
    } else {
        0
    };
    let lo = match unit {
        UnitKind::Cell => aurora_stripe::content::MIN_CELL_SDU,
        UnitKind::Pdu => aurora_stripe::content::MIN_PDU_SDU,
        UnitKind::IpPacket => aurora_stripe::content::MIN_IP_SDU,
    } as i64;
    let hi = (aurora_wire::aal5::MAX_SDU - seq) as i64;
    let max = int_in(
        c,
        span.clone(),
        &format!("{me}: sdu"),
        Some(d.sdu),
        0,
        (lo, hi),
    );
    let min = int_in(
        c,
        span.clone(),
        &format!("{me}: sdu_min"),
        d.sdu_min,
        d.sdu,
        (lo, hi),
    );
    let (min, max) = (min?, max?);
    if min > max {
        c.at(
            span,
            format!("{me}: sdu_min {min} is larger than sdu {max}"),
        );
        return None;
    }
    Some((min as usize, max as usize))
}

/// Reads a bit rate: a number with `bps`, `kbps`, `Mbps` or `Gbps`
/// (powers of 1000), as linux-atm writes them.
fn bit_rate(s: &str) -> Result<f64, String> {
    let bad = || format!("\"{s}\" is not a bit rate (a number with bps, kbps, Mbps or Gbps)");
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit.trim() {
        "bps" => 1.0,
        "kbps" => 1e3,
        "Mbps" => 1e6,
        "Gbps" => 1e9,
        _ => return Err(bad()),
    };
    match num.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v * mult),
        _ => Err(bad()),
    }
}

/// When entry `me`, of SDUs of `sdu` bytes, sends.
fn schedule(
    c: &mut Ctx,
    span: Range<usize>,
    me: &str,
    d: &StripeDef,
    sdu: Option<(usize, usize)>,
) -> Option<Schedule> {
    let start = duration_or(
        c,
        span.clone(),
        &format!("{me}: start"),
        &d.start,
        Duration::ZERO,
        START_RANGE,
    );
    let interval = match (&d.interval, &d.rate) {
        (None, None) => Some(None),
        (Some(_), Some(_)) => {
            c.at(
                span.clone(),
                format!("{me}: give interval or rate, not both"),
            );
            None
        }
        (Some(s), None) => duration_in(
            c,
            span.clone(),
            &format!("{me}: interval"),
            s,
            INTERVAL_RANGE,
        )
        .map(Some),
        (None, Some(r)) => match bit_rate(r) {
            Err(m) => {
                c.at(span.clone(), format!("{me}: rate: {m}"));
                None
            }
            // The mean SDU's bits at that rate (an SDU range that was
            // wrong has been reported with it).
            Ok(bps) => sdu.and_then(|(lo, hi)| {
                let ns = ((lo + hi) as f64 * 4.0 * 1e9 / bps).round();
                duration_in(
                    c,
                    span.clone(),
                    &format!("{me}: rate {r} gives an interval that"),
                    &format!("{ns}ns"),
                    INTERVAL_RANGE,
                )
                .map(Some)
            }),
        },
    };
    let (count, until) = match (d.count, &d.duration) {
        (Some(_), Some(_)) => {
            c.at(span, format!("{me}: give count or duration, not both"));
            return None;
        }
        (Some(n), None) => (
            int_in(
                c,
                span,
                &format!("{me}: count"),
                Some(n),
                0,
                (1, MAX_FLOW_COUNT as i64),
            )
            .map(|n| Some(n as u64)),
            Some(None),
        ),
        (None, Some(t)) => (
            Some(None),
            duration_in(c, span, &format!("{me}: duration"), t, DURATION_RANGE).map(Some),
        ),
        (None, None) => (Some(None), Some(None)),
    };
    let start = Instant::ZERO + start?;
    Some(Schedule {
        start,
        interval: interval?,
        count: count?,
        until: until?.map(|t| start + t),
    })
}

/// The striping settings of entry `me` (member VCs left empty), SDUs of
/// up to `sdu.1` bytes.
pub(super) fn settings(
    c: &mut Ctx,
    span: Range<usize>,
    me: &str,
    d: &Knobs,
    unit: Option<UnitKind>,
    sync: Option<SyncMode>,
    sdu: Option<(usize, usize)>,
) -> Option<Config> {
    let what = |f: &str| format!("{me}: {f}");
    let k_default = if unit.is_some_and(UnitKind::is_pdu) {
        4
    } else {
        32
    };
    let quantum = int_in(
        c,
        span.clone(),
        &what("quantum"),
        d.quantum,
        1536,
        (1, 1 << 24),
    );
    let k = int_in(
        c,
        span.clone(),
        &what("marker_interval"),
        d.marker_interval,
        k_default,
        (1, 65_535),
    );
    let idle = duration_or(
        c,
        span.clone(),
        &what("idle_marker"),
        d.idle_marker,
        Duration::from_micros(100),
        IDLE_RANGE,
    );
    let repeats = int_in(
        c,
        span.clone(),
        &what("idle_marker_repeats"),
        d.idle_marker_repeats,
        3,
        (0, MAX_IDLE_REPEATS),
    );
    let timeout = duration_or(
        c,
        span.clone(),
        &what("timeout"),
        d.timeout,
        Duration::from_millis(10),
        TIMER_RANGE,
    );
    let buffer = int_in(
        c,
        span.clone(),
        &what("buffer"),
        d.buffer,
        4096,
        (1, MAX_BUFFER_UNITS),
    );
    let buffer_bytes = bytes_or(
        c,
        span.clone(),
        &what("buffer_bytes"),
        d.buffer_bytes,
        4 << 20,
    );
    let reassembly_timeout = duration_or(
        c,
        span.clone(),
        &what("reassembly_timeout"),
        d.reassembly_timeout,
        Duration::from_millis(10),
        TIMER_RANGE,
    );
    let reassembly_buffer = bytes_or(
        c,
        span,
        &what("reassembly_buffer"),
        d.reassembly_buffer,
        1 << 20,
    );
    let mut cfg = Config::new(unit?, sync?, Vec::new());
    cfg.format = Format::Uni;
    cfg.quantum = quantum? as u32;
    cfg.marker_interval = k? as u32;
    cfg.idle_marker = idle?;
    cfg.idle_marker_repeats = repeats? as u32;
    cfg.max_sdu = sdu?.1;
    cfg.limits = RxLimits {
        max_held_units: buffer? as usize,
        max_held_bytes: buffer_bytes?,
        timeout: timeout?,
        reassembly_timeout: reassembly_timeout?,
        reassembly_budget: reassembly_buffer?,
    };
    Some(cfg)
}
