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

/// What the soak found.
pub struct Soak {
    /// (cells delivered to `b` so far, RSS bytes), one per sample.
    pub samples: Vec<(u64, u64)>,
    /// The run's report.
    pub report: crate::run::Report,
    /// Wall-clock seconds.
    pub wall: f64,
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
