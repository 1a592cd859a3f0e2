//! `aurora bench soak`: a long run in virtual time (by default 10^9 cells
//! through a chain of switches at 94 % of OC-192c) with the process's
//! resident memory sampled as it goes: memory must stay flat, and the
//! books must balance at the end.

use aurora_time::Duration;

/// The soak's network: host `a`, switches `s1` and `s2`, host `b`, OC-192c
/// links, one flow of 9180-byte PDUs.
fn topology(pdus: u64) -> String {
    format!(
        r#"
[[switch]]
name = "s1"
ports = 2

[[switch]]
name = "s2"
ports = 2

[[host]]
name = "a"

[[host]]
name = "b"

[[link]]
a = "a"
b = "s1:0"
rate = "oc192"
delay = "10us"

[[link]]
a = "s1:1"
b = "s2:0"
rate = "oc192"
delay = "100us"
buffer = 4096

[[link]]
a = "s2:1"
b = "b"
rate = "oc192"
delay = "10us"

[[pvc]]
name = "a-to-b"
path = ["a", "s1", "s2", "b"]

[[flow]]
pvc = "a-to-b"
sdu = 9180
count = {pdus}
interval = "{INTERVAL_NS}ns"
"#
    )
}

/// Cells in one 9180-byte PDU.
const CELLS_PER_PDU: u64 = 192;
/// A PDU every 9.05 µs: 94 % of OC-192c's 22.6 M cells/s.
const INTERVAL_NS: i64 = 9_050;

/// Resident memory of this process, bytes (0 where /proc is missing).
pub fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Runs `f`, and measures the most memory it held at once: the process's
/// peak resident set during `f`, less its resident set before (with glibc's
/// free heap memory given back first, so that `f` cannot reuse what earlier
/// runs left). `None` where the peak cannot be reset or read.
pub fn peak_bytes<T>(f: impl FnOnce() -> T) -> (Option<u64>, T) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and only hands free heap
    // memory back to the system.
    unsafe {
        libc::malloc_trim(0);
    }
    // Writing 5 resets the process's peak resident set (VmHWM) to its
    // current one (Linux 4.0 and later).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = rss();
    let out = f();
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kb| kb * 1024);
    let grew = peak.filter(|_| reset).map(|p| p.saturating_sub(before));
    (grew, out)
}

/// What the soak found.
pub struct Soak {
    /// (cells delivered to `b` so far, RSS bytes), one per sample.
    pub samples: Vec<(u64, u64)>,
    /// The run's report.
    pub report: crate::run::Report,
    /// Wall-clock seconds.
    pub wall: f64,
}

/// `aurora bench soak`: runs, prints memory against cells delivered and
/// the books, and fails if memory grew by more than 5 % or a PDU is
/// unaccounted for.
pub fn main(cells: u64, samples: u32) -> Result<(), String> {
    println!("aurora bench soak: {cells} cells from a through s1 and s2 to b (OC-192c, 94 % load, 9180-byte PDUs), virtual time");
    let s = run(cells, samples)?;
    println!("{:>14} {:>10}", "cells at b", "RSS MiB");
    for (c, r) in &s.samples {
        println!("{c:>14} {:>10.1}", *r as f64 / 1048576.0);
    }
    // The first sample includes start-up; flatness is judged from the
    // second on.
    let steady: Vec<u64> = s.samples.iter().skip(1).map(|x| x.1).collect();
    let lo = steady.iter().copied().min().unwrap_or(0);
    let hi = steady.iter().copied().max().unwrap_or(0);
    let spread = if lo > 0 {
        (hi - lo) as f64 / lo as f64 * 100.0
    } else {
        0.0
    };
    let p = &s.report.pvcs[0];
    println!(
        "RSS {:.1} MiB at the first steady sample, {:.1} MiB at the end, spread {spread:.2} % (limit 5 %)",
        steady.first().copied().unwrap_or(0) as f64 / 1048576.0,
        steady.last().copied().unwrap_or(0) as f64 / 1048576.0,
    );
    println!(
        "PDUs: {} sent, {} delivered, {} corrupted, {} lost, {} in flight, {} unaccounted; {} events in {:.1} s wall ({:.1} M cells/s)",
        p.sent, p.delivered, p.corrupted, p.lost, p.in_flight, p.unaccounted,
        s.report.events, s.wall,
        s.samples.last().map_or(0, |x| x.0) as f64 / s.wall / 1e6
    );
    if s.report.unaccounted != 0 || spread > 5.0 {
        return Err("FAILED (unaccounted PDUs or memory grew by more than 5 %)".into());
    }
    Ok(())
}

/// Runs about `cells` cells through the chain, sampling `samples` times.
pub fn run(cells: u64, samples: u32) -> Result<Soak, String> {
    let pdus = cells.div_ceil(CELLS_PER_PDU).max(1);
    let text = topology(pdus);
    let net = aurora_topo::load(&text, 1).map_err(|p| format!("the soak topology: {p}"))?;
    let b = net
        .hosts
        .iter()
        .find(|(n, _)| n == "b")
        .map(|(_, id)| *id)
        .ok_or("the soak topology has no host b")?;
    let duration = Duration::from_nanos(INTERVAL_NS.saturating_mul(pdus as i64));
    let every = Duration::from_nanos((duration.as_nanos() / i64::from(samples.max(1))).max(1));
    let mut out = Vec::new();
    let bar = indicatif::ProgressBar::new(u64::from(samples.max(1)));
    let mut watch = |sim: &aurora_engine::Engine| {
        let got = sim
            .node::<aurora_net::traffic::TrafficHost>(b)
            .map_or(0, |h| h.rx_stats().cells_in);
        out.push((got, rss()));
        bar.inc(1);
    };
    let start = std::time::Instant::now();
    let report = crate::run::run_network(
        net,
        duration,
        Duration::from_millis(10),
        (None, None),
        crate::run::Clock::Virtual,
        Some((every, &mut watch)),
    )?;
    bar.finish_and_clear();
    Ok(Soak {
        samples: out,
        report,
        wall: start.elapsed().as_secs_f64(),
    })
}
