//! A long, fast path (`examples/tcp-long.toml`): one transfer over an
//! OC-12c trunk with a 40 ms round trip. The long timeout of the older
//! TCPs (a coarse 500 ms timer, a 1 s minimum) against the standard timer,
//! and Hoe's proposal (a larger window after a loss, with a limit on the
//! bursts it lets out) against the standard halving.

use std::path::{Path, PathBuf};

use aurora_tcp::host::TcpHost;

use super::{example, host_id, run, say_written, virtual_net, with_field, write_csv};
use crate::tcp_trace::plot_time_sequence;

/// One run's figures.
struct Row {
    case: &'static str,
    mbps: f64,
    timeouts: u64,
    fast_retransmits: u64,
    retransmits: u64,
}

/// Runs the experiment, `secs` of virtual time per run, and writes its
/// table and plots to `out`.
pub fn main(out: &Path, secs: f64) -> Result<(), String> {
    let base = example("tcp-long.toml")?;
    // Each case: its name and the `[[tcp]]` fields it sets.
    let cases: Vec<(&'static str, Vec<(&'static str, toml::Value)>)> = vec![
        ("reno", vec![("variant", "reno".into())]),
        (
            "reno coarse timer",
            vec![
                ("variant", "reno".into()),
                ("tick", "500ms".into()),
                ("rto_min", "1s".into()),
            ],
        ),
        ("newreno", vec![]),
        ("sack", vec![("variant", "sack".into())]),
        ("newreno keep 3/4", vec![("decrease", 0.75.into())]),
        (
            "newreno keep 3/4 maxburst 4",
            vec![("decrease", 0.75.into()), ("maxburst", 4.into())],
        ),
    ];
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    let mut rows = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for (i, (case, fields)) in cases.iter().enumerate() {
        let mut text = base.clone();
        for (k, v) in fields {
            text = with_field(&text, "tcp", k, Some(v.clone()))?;
        }
        run(&text, secs)?;
        let net = virtual_net(&text, secs)?;
        let (h1, h2) = (host_id(&net, "h1")?, host_id(&net, "h2")?);
        let src = net.sim.node::<TcpHost>(h1).ok_or("h1 is not a TCP host")?;
        let sink = net.sim.node::<TcpHost>(h2).ok_or("h2 is not a TCP host")?;
        let flow = src.flows().first().ok_or("no flow at h1")?;
        let conn = flow.connection().ok_or("h1 never connected")?;
        let read: u64 = sink.flows().iter().map(|f| f.app_bytes()).sum();
        let s = conn.stats();
        rows.push(Row {
            case,
            mbps: read as f64 * 8.0 / secs / 1e6,
            timeouts: s.timeouts,
            fast_retransmits: s.fast_retransmits,
            retransmits: s.retransmits,
        });
        files.extend(plot_time_sequence(
            conn.trace(),
            flow.iss(),
            conn.smss(),
            &format!("{case}: OC-12c, 40 ms round trip"),
            &out.join(format!("tcp-long-{i}")),
        )?);
    }
    println!(
        "aurora experiment tcp-long: one transfer, OC-12c, 40 ms round trip, a 4,000-cell port; \
         {secs} s of virtual time each"
    );
    println!(
        "{:<32} {:>8} {:>9} {:>5} {:>7}",
        "case", "Mb/s", "timeouts", "fast", "resent"
    );
    let mut csv = vec![vec![
        "case".to_string(),
        "goodput_mbps".into(),
        "timeouts".into(),
        "fast_retransmits".into(),
        "retransmits".into(),
    ]];
    for r in &rows {
        println!(
            "{:<32} {:>8.1} {:>9} {:>5} {:>7}",
            r.case, r.mbps, r.timeouts, r.fast_retransmits, r.retransmits
        );
        csv.push(vec![
            r.case.into(),
            format!("{:.2}", r.mbps),
            r.timeouts.to_string(),
            r.fast_retransmits.to_string(),
            r.retransmits.to_string(),
        ]);
    }
    files.push(write_csv(out, "tcp-long", &csv)?);
    say_written(&files);
    Ok(())
}
