//! `aurora ping`: OAM F5 loopback round trips from a host of a topology, at
//! the ATM layer, with the topology's own traffic running around them.

use std::path::Path;

use aurora_net::oam::{Ping, PingStats};
use aurora_net::traffic::TrafficHost;
use aurora_time::{Duration, Instant};

/// What to ping.
pub struct Args<'a> {
    /// The topology file.
    pub file: &'a Path,
    /// The sending host.
    pub from: &'a str,
    /// `[itf.]vpi.vci` (a host has one interface, 0).
    pub target: &'a str,
    /// Requests.
    pub count: u64,
    /// Time between requests.
    pub interval: Duration,
    /// Segment loopback (the first switch answers) instead of end-to-end.
    pub segment: bool,
    /// Virtual time instead of real time.
    pub virtual_time: bool,
    /// Seed of the links' random streams.
    pub seed: u64,
}

/// Runs the topology with the ping added; returns the ping's figures and a
/// text report.
pub fn main(a: &Args) -> Result<(PingStats, String), String> {
    let vc_text = match a.target.split('.').count() {
        3 => {
            let (itf, rest) = a.target.split_once('.').expect("three parts");
            if itf != "0" {
                return Err(format!(
                    "interface {itf} in \"{}\" does not exist: a host has one, 0",
                    a.target
                ));
            }
            rest
        }
        _ => a.target,
    };
    let vc = aurora_topo::parse_vc(vc_text)?;
    let text = aurora_topo::read_topology(a.file)?;
    let mut bp = aurora_topo::compile_cells(&text).map_err(|p| crate::run::problems(a.file, &p))?;
    let (id, i) = bp.add_ping(
        a.from,
        Ping {
            vc,
            end_to_end: !a.segment,
            count: a.count,
            start: Instant::ZERO,
            interval: a.interval,
        },
    )?;
    // Long enough for the last request's answer, or to call it lost.
    let run_for = Duration::from_nanos(a.interval.as_nanos().saturating_mul(a.count as i64))
        + Duration::from_millis(200);
    let mut net = bp
        .into_sim(a.seed)
        .map_err(|p| crate::run::problems(a.file, &p))?;
    let end = Instant::ZERO + run_for;
    let mut unfaithful = None;
    if a.virtual_time {
        net.sim.run_until(end);
    } else {
        let mut wall = net.sim.wall_clock(false);
        net.sim.run_wall(end, &mut wall);
        let asked = std::time::Duration::from_nanos(run_for.as_nanos().max(0) as u64);
        let advice = "rerun with --virtual for exact round trips";
        let l = crate::lateness::of_network(&net, &wall, Some(asked), advice);
        unfaithful = (!l.faithful).then_some(l.sentence);
    }
    let stats = net
        .sim
        .node::<TrafficHost>(id)
        .and_then(|h| h.ping(i))
        .ok_or("the ping's host went missing")?;
    let kind = if a.segment { "segment" } else { "end-to-end" };
    let mut s = format!(
        "OAM F5 {kind} loopback from {} on VC {vc} ({}): {} sent, {} answered",
        a.from,
        if a.virtual_time {
            "virtual time"
        } else {
            "real time"
        },
        stats.sent,
        stats.answered
    );
    if stats.refused > 0 {
        s += &format!(", {} not sent (the VC's shaper had no room)", stats.refused);
    }
    if stats.unmatched > 0 {
        s += &format!(", {} unmatched", stats.unmatched);
    }
    let us = |d: Duration| d.as_nanos() as f64 / 1e3;
    match stats.rtt_mean() {
        Some(mean) => {
            s += &format!(
                "\nround trip min/mean/max = {:.1}/{:.1}/{:.1} us\n",
                us(stats.rtt_min),
                us(mean),
                us(stats.rtt_max)
            )
        }
        None => s += "\nno answer: is there a PVC from this host on that VC?\n",
    }
    if let Some(why) = unfaithful {
        s += &why;
        s.push('\n');
    }
    Ok((stats, s))
}
