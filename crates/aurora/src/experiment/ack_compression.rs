//! ACK compression (`examples/ack-compression.toml`): flow a's ACKs share
//! the FIFOs of flow b's data going the other way. With b off and with b
//! on, how a's ACKs arrive (their gaps) and how a sends (its bursts), and
//! a time-sequence plot of a short stretch of each run.

use std::path::{Path, PathBuf};

use aurora_tcp::host::TcpHost;
use aurora_tcp::trace::{Event, Trace};
use aurora_time::{Duration, Instant};

use super::{example, host_id, run, say_written, virtual_net, write_csv};
use crate::tcp_trace::plot_time_sequence;

/// Gaps shorter than this between two ACKs count as compressed, and data
/// segments sent closer than this form one burst: a
/// 9,140-byte segment takes 544 µs on OC-3c, so ACKs the receiver sends
/// every second segment are about 1.1 ms apart; two ACKs back to back on
/// the line are 6 µs apart.
const COMPRESSED: Duration = Duration::from_micros(100);
/// The stretch the statistics cover: after slow start.
const FROM: Instant = Instant::from_millis(500);
/// The stretch plotted.
const PLOT: (Instant, Instant) = (Instant::from_millis(1_000), Instant::from_millis(1_060));

/// `text` without the `[[tcp]]` entry named `name`.
fn without_tcp(text: &str, name: &str) -> Result<String, String> {
    let mut doc: toml::Table = text.parse().map_err(|e| format!("{e}"))?;
    if let Some(toml::Value::Array(entries)) = doc.get_mut("tcp") {
        entries.retain(|e| e.get("name").and_then(toml::Value::as_str) != Some(name));
    }
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// One run's figures for flow a.
struct Row {
    case: &'static str,
    acks: usize,
    median_gap_us: f64,
    compressed: f64,
    mean_burst: f64,
    max_burst: usize,
    mbps: f64,
}

fn measure(case: &'static str, trace: &Trace, bytes: u64, secs: f64) -> Row {
    let ev = trace.events();
    let acks: Vec<Instant> = ev
        .iter()
        .filter(|(t, e)| *t >= FROM && matches!(e, Event::Ack { .. }))
        .map(|(t, _)| *t)
        .collect();
    let mut gaps: Vec<i64> = acks
        .windows(2)
        .map(|w| w[1].since(w[0]).as_nanos())
        .collect();
    gaps.sort_unstable();
    let median = gaps.get(gaps.len() / 2).copied().unwrap_or(0) as f64 / 1e3;
    let compressed = gaps.iter().filter(|&&g| g < COMPRESSED.as_nanos()).count() as f64
        / gaps.len().max(1) as f64;
    // Bursts: data segments sent less than `COMPRESSED` after the one
    // before.
    let mut bursts = Vec::new();
    let mut last: Option<Instant> = None;
    for (t, e) in ev {
        if *t < FROM || !matches!(e, Event::Send { .. }) {
            continue;
        }
        match (last, bursts.last_mut()) {
            (Some(l), Some(b)) if t.since(l) < COMPRESSED => *b += 1,
            _ => bursts.push(1usize),
        }
        last = Some(*t);
    }
    Row {
        case,
        acks: acks.len(),
        median_gap_us: median,
        compressed,
        mean_burst: bursts.iter().sum::<usize>() as f64 / bursts.len().max(1) as f64,
        max_burst: bursts.iter().copied().max().unwrap_or(0),
        mbps: bytes as f64 * 8.0 / secs / 1e6,
    }
}

/// Runs the experiment, `secs` of virtual time per run, and writes its
/// table and plots to `out`.
pub fn main(out: &Path, secs: f64) -> Result<(), String> {
    let both = example("ack-compression.toml")?;
    let alone = without_tcp(&both, "b")?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    let mut rows = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for (case, text) in [("a alone", &alone), ("a with b", &both)] {
        // The books, through the same path as `aurora run`.
        run(text, secs)?;
        let net = virtual_net(text, secs)?;
        let (h1, h2) = (host_id(&net, "h1")?, host_id(&net, "h2")?);
        let src = net.sim.node::<TcpHost>(h1).ok_or("h1 is not a TCP host")?;
        let sink = net.sim.node::<TcpHost>(h2).ok_or("h2 is not a TCP host")?;
        let flow = src
            .flows()
            .iter()
            .find(|f| f.name() == "a")
            .ok_or("no flow a at h1")?;
        let conn = flow.connection().ok_or("a never connected")?;
        let read: u64 = sink
            .flows()
            .iter()
            .filter(|f| f.name().starts_with("h2:5001"))
            .map(|f| f.app_bytes())
            .sum();
        rows.push(measure(case, conn.trace(), read, secs));
        // A short stretch, plotted.
        let mut part = Trace::new(conn.trace().events().len());
        for &(t, e) in conn.trace().events() {
            if t >= PLOT.0 && t < PLOT.1 {
                part.push(t, e);
            }
        }
        let name = format!("ack-compression-{}", case.replace(' ', "-"));
        files.extend(plot_time_sequence(
            &part,
            flow.iss(),
            conn.smss(),
            &format!("flow a, {case}: 60 ms from 1 s"),
            &out.join(name),
        )?);
    }
    println!(
        "aurora experiment ack-compression: h1 <-> h2 over OC-3c, 20 ms round trip, 9,140-byte \
         segments; {secs} s of virtual time each; flow a's ACKs from 0.5 s on"
    );
    println!(
        "{:<10} {:>6} {:>14} {:>11} {:>11} {:>10} {:>8}",
        "case", "ACKs", "median gap us", "compressed", "mean burst", "max burst", "Mb/s"
    );
    let mut csv = vec![vec![
        "case".to_string(),
        "acks".into(),
        "median_gap_us".into(),
        "compressed_fraction".into(),
        "mean_burst".into(),
        "max_burst".into(),
        "goodput_mbps".into(),
    ]];
    for r in &rows {
        println!(
            "{:<10} {:>6} {:>14.1} {:>11.3} {:>11.2} {:>10} {:>8.1}",
            r.case, r.acks, r.median_gap_us, r.compressed, r.mean_burst, r.max_burst, r.mbps
        );
        csv.push(vec![
            r.case.into(),
            r.acks.to_string(),
            format!("{:.1}", r.median_gap_us),
            format!("{:.4}", r.compressed),
            format!("{:.3}", r.mean_burst),
            r.max_burst.to_string(),
            format!("{:.2}", r.mbps),
        ]);
    }
    files.push(write_csv(out, "ack-compression", &csv)?);
    say_written(&files);
    Ok(())
}
