//! The single-window loss study (the seed's S14, after Fall and Floyd
//! 1996; `examples/s14.toml`): Tahoe, Reno, NewReno and SACK TCP with one,
//! two, three and four segments dropped from one window. For each: whether
//! the sender had to wait for its retransmission timer, how many fast
//! retransmits and retransmissions it made, how long recovery took, and a
//! time-sequence plot and trace (JSON).

use std::path::{Path, PathBuf};

use aurora_tcp::conn::Variant;
use aurora_tcp::host::TcpHost;
use aurora_tcp::trace::Event;
use aurora_time::Instant;

use super::{example, host_id, run, say_written, virtual_net, with_field, write_csv};
use crate::tcp_trace::{plot_time_sequence, trace_json};

/// The drop sets, in segment numbers from 1 (the study's packets 14; 14
/// and 28; 14, 26 and 28; 14, 24, 26 and 28, which it numbered from 0).
pub const DROPS: [&[u32]; 4] = [&[15], &[15, 29], &[15, 27, 29], &[15, 25, 27, 29]];

/// What the study reports for each variant and number of drops (its
/// section 4 and figures): whether a retransmission timeout was needed,
/// and how the sender recovered.
fn reported(v: Variant, drops: usize) -> &'static str {
    match (v, drops) {
        (Variant::Tahoe, _) => "fast retransmit, then slow start; resends some delivered packets",
        (Variant::Reno, 1) => "fast retransmit and fast recovery",
        (Variant::Reno, 2) => "two fast retransmits, the window halved twice; no timeout",
        (Variant::Reno, _) => "retransmission timeout",
        (Variant::NewReno, _) => "no timeout; one lost packet repaired per round trip",
        (Variant::Sack, _) => "no timeout; the lost packets repaired in about one round trip",
    }
}

/// One run's figures.
struct Row {
    variant: Variant,
    drops: usize,
    timeouts: u64,
    fast_retransmits: u64,
    retransmits: u64,
    /// From the first drop's detection (fast retransmit or timeout) to the
    /// ACK that covers every dropped segment, seconds.
    recovery: f64,
    /// When the sender's last ACK arrived (its FIN's, after every byte),
    /// seconds.
    done: f64,
}

/// The file for `variant` with `drops`.
fn variant_text(base: &str, v: Variant, drops: &[u32]) -> Result<String, String> {
    let t = with_field(base, "tcp", "variant", Some(v.name().into()))?;
    let t = with_field(&t, "tcp", "sack", Some((v == Variant::Sack).into()))?;
    let list: Vec<toml::Value> = drops.iter().map(|&d| i64::from(d).into()).collect();
    with_field(&t, "tcp", "drop", Some(toml::Value::Array(list)))
}

/// Runs the file in virtual time for `secs` and hands `f` the source's
/// host (its trace and counters), the bytes the sink read and how many of
/// them were wrong.
fn trace_run<R>(
    text: &str,
    secs: f64,
    f: impl FnOnce(&TcpHost, u64, u64) -> Result<R, String>,
) -> Result<R, String> {
    let net = virtual_net(text, secs)?;
    let (s1, k1) = (host_id(&net, "s1")?, host_id(&net, "k1")?);
    let sink = net.sim.node::<TcpHost>(k1).ok_or("k1 is not a TCP host")?;
    let read = sink.flows().first().map_or(0, |f| f.app_bytes());
    let errors = sink.flows().first().map_or(0, |f| f.pattern_errors());
    let src = net.sim.node::<TcpHost>(s1).ok_or("s1 is not a TCP host")?;
    f(src, read, errors)
}

/// Runs the experiment, `secs` of virtual time per run, and writes its
/// table and plots to `out`.
pub fn main(out: &Path, secs: f64) -> Result<(), String> {
    let base = example("s14.toml")?;
    let total: u64 = 200_000;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    let mut rows = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for drops in DROPS {
        for v in Variant::ALL {
            let text = variant_text(&base, v, drops)?;
            // The books first, through the same path as `aurora run`.
            run(&text, secs)?;
            let name = format!("s14-{}-{}drop", v.name(), drops.len());
            let (row, plots) = trace_run(&text, secs, |src, read, errors| {
                if read != total || errors != 0 {
                    return Err(format!(
                        "{v} with {} drops: {read} of {total} bytes arrived, {errors} wrong",
                        drops.len()
                    ));
                }
                let flow = src.flows().first().ok_or("no flow at s1")?;
                let conn = flow.connection().ok_or("s1 never connected")?;
                let s = conn.stats();
                let iss = flow.iss();
                let smss = conn.smss();
                let last_drop = iss + 1 + drops.iter().max().copied().unwrap_or(1) * smss;
                let ev = conn.trace().events();
                let t = |i: Instant| i.as_nanos() as f64 / 1e9;
                let start = ev
                    .iter()
                    .find(|(_, e)| {
                        matches!(e, Event::FastRetransmit { .. } | Event::Timeout { .. })
                    })
                    .map(|(i, _)| t(*i));
                let end = ev
                    .iter()
                    .find(|(_, e)| matches!(e, Event::Ack { ack, .. } if *ack >= last_drop))
                    .map(|(i, _)| t(*i));
                let done = ev
                    .iter()
                    .rev()
                    .find(|(_, e)| matches!(e, Event::Ack { .. }))
                    .map_or(f64::NAN, |(i, _)| t(*i));
                let title = format!(
                    "{} TCP, {} drop{} (segments {:?})",
                    v.name(),
                    drops.len(),
                    if drops.len() == 1 { "" } else { "s" },
                    drops
                );
                let mut plots =
                    plot_time_sequence(conn.trace(), iss, smss, &title, &out.join(&name))?;
                let json = out.join(format!("{name}.json"));
                let text = serde_json::to_string(&trace_json(conn.trace(), iss))
                    .map_err(|e| e.to_string())?;
                std::fs::write(&json, text)
                    .map_err(|e| format!("cannot write {}: {e}", json.display()))?;
                plots.push(json);
                Ok((
                    Row {
                        variant: v,
                        drops: drops.len(),
                        timeouts: s.timeouts,
                        fast_retransmits: s.fast_retransmits,
                        retransmits: s.retransmits,
                        recovery: start.zip(end).map_or(f64::NAN, |(a, b)| b - a),
                        done,
                    },
                    plots,
                ))
            })?;
            files.extend(plots);
            rows.push(row);
        }
    }
    println!(
        "aurora experiment tcp-drops: one connection, 1,000-byte segments, window 28, \
         0.8 Mb/s with 100 ms; {secs} s of virtual time each"
    );
    println!(
        "{:<8} {:>5} {:>8} {:>5} {:>7} {:>10} {:>8}  the study reports",
        "variant", "drops", "timeouts", "fast", "resent", "recovery", "done"
    );
    let mut csv = vec![vec![
        "variant".to_string(),
        "drops".into(),
        "timeouts".into(),
        "fast_retransmits".into(),
        "retransmits".into(),
        "recovery_s".into(),
        "done_s".into(),
        "reported".into(),
    ]];
    for r in &rows {
        println!(
            "{:<8} {:>5} {:>8} {:>5} {:>7} {:>9.3}s {:>7.3}s  {}",
            r.variant.name(),
            r.drops,
            r.timeouts,
            r.fast_retransmits,
            r.retransmits,
            r.recovery,
            r.done,
            reported(r.variant, r.drops)
        );
        csv.push(vec![
            r.variant.name().into(),
            r.drops.to_string(),
            r.timeouts.to_string(),
            r.fast_retransmits.to_string(),
            r.retransmits.to_string(),
            format!("{:.4}", r.recovery),
            format!("{:.4}", r.done),
            reported(r.variant, r.drops).into(),
        ]);
    }
    files.push(write_csv(out, "tcp-drops", &csv)?);
    say_written(&files);
    Ok(())
}
