//! `aurora ttcp --sweep`: Mb/s against PDU size for each data path and the
//! kernel TCP baseline, with memcpy measured in the same run.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::Duration;

use aurora_hostif::DataPath;
use serde::Serialize;

use super::run::{self, LinkSpec, Report};
use super::{baseline, plot, LinkArg, PathArg, TtcpArgs};

/// One point of the sweep.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// PDU size in bytes.
    pub size: usize,
    /// "copy", "single-copy", "null" or "tcp".
    pub series: String,
    /// Goodput in Mb/s: at the receiver, or at the sender for null.
    pub mbps: f64,
    /// The sender's rate in Mb/s.
    pub tx_mbps: f64,
    /// CPU microseconds per PDU at the measured end.
    pub cpu_us_per_pdu: f64,
    /// Median one-way latency in microseconds (receiver).
    pub latency_p50_us: Option<f64>,
    /// PDUs that failed the byte check, over all the point's runs.
    pub corrupted: u64,
    /// PDUs missing, over all the point's runs.
    pub lost: u64,
    /// Runs of this point (`--repeat`). The rates, CPU and latency are the
    /// fastest run's; `corrupted` and `lost` count every run.
    pub runs: u32,
    /// Goodput of the slowest run, Mb/s.
    pub mbps_min: f64,
}

/// Everything a sweep produced.
#[derive(Debug, Serialize)]
pub struct Sweep {
    /// The link used.
    pub link: String,
    /// memcpy of 64 KiB on one core, Mb/s, measured in this run.
    pub memcpy_mbps: f64,
    /// The points.
    pub rows: Vec<Row>,
}

/// Parses `1k..64k` into powers of two; 65536 becomes 65535 (AAL5's limit).
pub fn sizes(range: &str) -> Result<Vec<usize>, String> {
    let (lo, hi) = range
        .split_once("..")
        .ok_or_else(|| format!("sweep range \"{range}\" is not of the form 1k..64k"))?;
    let (lo, hi) = (super::parse_size(lo)?, super::parse_size(hi)?);
    if lo == 0 || lo > hi || hi > 65536 {
        return Err(format!(
            "sweep range \"{range}\" must run upwards from at least 1 byte to at most 64k"
        ));
    }
    let mut v = Vec::new();
    let mut s = lo;
    while s <= hi {
        v.push(s.min(65535));
        s *= 2;
    }
    Ok(v)
}

fn child_receiver(a: &TtcpArgs, extra: &[String]) -> Result<std::process::Child, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut args: Vec<String> = vec!["ttcp".into(), "-r".into(), "--json".into()];
    args.extend_from_slice(extra);
    args.extend([
        "-a".into(),
        a.addr.to_string(),
        "-P".into(),
        a.qos.to_string(),
    ]);
    let mut child = Command::new(exe)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the receiver process: {e}"))?;
    // Wait until the receiver says its link is open, then pass the rest of
    // what it says through to our stderr.
    let err = child.stderr.take().expect("piped");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(err));
    loop {
        match lines.next() {
            Some(Ok(l)) if l == super::READY => break,
            Some(Ok(l)) => eprintln!("{l}"),
            _ => {
                let _ = child.wait();
                return Err("the receiver process ended before its link was ready".into());
            }
        }
    }
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            eprintln!("{l}");
        }
    });
    Ok(child)
}

fn collect(child: std::process::Child) -> Result<Report, String> {
    let out = child
        .wait_with_output()
        .map_err(|e| format!("the receiver process failed: {e}"))?;
    if !out.status.success() {
        return Err(format!("the receiver process exited with {}", out.status));
    }
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .ok()
        .and_then(|v| serde_json::from_value::<ReportIn>(v).ok())
        .map(Into::into)
        .ok_or_else(|| "the receiver process printed no report".to_string())
}

/// The fields of a child's report the sweep needs.
#[derive(serde::Deserialize)]
struct ReportIn {
    mbps: Option<f64>,
    cpu_us_per_pdu: f64,
    latency_us: Option<[f64; 4]>,
    corrupted: u64,
    lost: u64,
    pdus: u64,
}

impl From<ReportIn> for Report {
    fn from(r: ReportIn) -> Report {
        Report {
            mbps: r.mbps,
            cpu_us_per_pdu: r.cpu_us_per_pdu,
            latency_us: r.latency_us,
            corrupted: r.corrupted,
            lost: r.lost,
            pdus: r.pdus,
            ..Report::default()
        }
    }
}

/// A sweep point, or an error when either end had nothing to time.
fn row(size: usize, series: &str, tx: &Report, rx: Option<&Report>) -> Result<Row, String> {
    let m = rx.unwrap_or(tx);
    let (Some(mbps), Some(tx_mbps)) = (m.mbps, tx.mbps) else {
        return Err(format!(
            "the {size}-byte {series} point was over before it could be timed ({} PDUs arrived); give a larger --total",
            m.pdus
        ));
    };
    Ok(Row {
        size,
        series: series.into(),
        mbps,
        tx_mbps,
        cpu_us_per_pdu: m.cpu_us_per_pdu,
        latency_p50_us: rx.and_then(|r| r.latency_us.map(|l| l[1])),
        corrupted: m.corrupted,
        lost: m.lost,
        runs: 1,
        mbps_min: mbps,
    })
}

/// Runs a point `runs` times and keeps the fastest run, noting the
/// slowest's goodput and the PDUs lost or corrupted over all of them.
fn best_of(runs: u32, mut point: impl FnMut() -> Result<Row, String>) -> Result<Row, String> {
    let mut best = point()?;
    let (mut slowest, mut bad) = (best.mbps, (best.corrupted, best.lost));
    for _ in 1..runs {
        let r = point()?;
        slowest = slowest.min(r.mbps);
        bad = (bad.0 + r.corrupted, bad.1 + r.lost);
        if r.mbps > best.mbps {
            best = r;
        }
    }
    (best.corrupted, best.lost) = bad;
    best.runs = runs;
    best.mbps_min = slowest;
    Ok(best)
}

fn point(a: &TtcpArgs, size: usize, mode: PathArg, count: u64, k: usize) -> Result<Row, String> {
    let path = mode.path();
    if path == DataPath::Null {
        // Nothing crosses a link: measure the sender's software path alone.
        let p = a.params(size, path, count, LinkSpec::Inproc);
        let (mut tx, _rx) = run::pair(64, Duration::ZERO);
        let t = run::transmit(&p, &mut tx)?;
        return row(size, mode.name(), &t, None);
    }
    let port = a.port.wrapping_add(2 * k as u16);
    let shm = std::path::PathBuf::from(format!(
        "{}-{}-{k}",
        a.shm_path.display(),
        std::process::id()
    ));
    let link = match a.link {
        LinkArg::Inproc => {
            let p = a.params(size, path, count, LinkSpec::Inproc);
            let (t, r) = run::in_process(&p)?;
            return row(size, mode.name(), &t, Some(&r));
        }
        LinkArg::Shm => LinkSpec::Shm(shm.clone()),
        LinkArg::Udp => LinkSpec::Udp(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
        LinkArg::Stream => LinkSpec::Stream(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)),
    };
    let p = a.params(size, path, count, link);
    let child = child_receiver(
        a,
        &[
            "-l".into(),
            size.to_string(),
            "-n".into(),
            count.to_string(),
            "--mode".into(),
            mode.name().into(),
            "--sync".into(),
            format!("{:?}", a.sync).to_lowercase(),
            "--link".into(),
            format!("{:?}", a.link).to_lowercase(),
            "--shm-path".into(),
            shm.display().to_string(),
            "--port".into(),
            port.to_string(),
            "--ring-cells".into(),
            a.ring_cells.to_string(),
            "--poll-us".into(),
            a.poll_us.to_string(),
            "--spin-us".into(),
            a.spin_us.to_string(),
        ],
    )?;
    let t = run::open_tx(&p, Duration::from_secs(10)).and_then(|mut l| run::transmit(&p, &mut l));
    let r = collect(child);
    let _ = std::fs::remove_file(&shm);
    let t = t?;
    row(size, mode.name(), &t, Some(&r?))
}

fn tcp_point(a: &TtcpArgs, size: usize, count: u64, k: usize) -> Result<Row, String> {
    let port = a.port.wrapping_add(2 * k as u16 + 1);
    let child = child_receiver(
        a,
        &[
            "--baseline".into(),
            "tcp".into(),
            "-l".into(),
            size.to_string(),
            "-n".into(),
            count.to_string(),
            "--port".into(),
            port.to_string(),
        ],
    )?;
    let t = baseline::transmit(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
        size,
        count,
    );
    let r = collect(child);
    row(size, "tcp", &t?, Some(&r?))
}

/// Runs a sweep and writes its table, data and plots.
pub fn main(a: &TtcpArgs, range: &str) -> Result<(), String> {
    let sizes = sizes(range)?;
    let memcpy_mbps = crate::bench_sar::memcpy_rate(0.3, 65536) * 8.0 / 1e6;
    let with_tcp = a.baseline.is_some() || a.link != LinkArg::Inproc;
    let bidir_modes = if a.bidir {
        a.modes.iter().filter(|m| **m != PathArg::Null).count()
    } else {
        0
    };
    let steps = sizes.len() * (a.modes.len() + bidir_modes + usize::from(with_tcp));
    if let Some(&hi) = sizes.last() {
        if hi > a.qos.max_sdu {
            return Err(format!(
                "sweep range \"{range}\" goes above the QoS's max_sdu of {} bytes",
                a.qos.max_sdu
            ));
        }
    }
    // Each run of a point over UDP or a stream uses its own ports, two apart.
    let ports = 2 * sizes.len() * (a.modes.len() + usize::from(with_tcp)) * a.repeat as usize + 1;
    if with_tcp && usize::from(a.port) + ports > 65535 {
        return Err(format!(
            "--port {} leaves too few ports above it for this sweep's {ports}; give a lower --port",
            a.port
        ));
    }
    let bar = if a.quiet || a.json || a.csv {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(steps as u64)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut rows = Vec::new();
    // Each run of a point has its own number, for its ports and shm file.
    let mut k = 0;
    let mut next = || {
        k += 1;
        k - 1
    };
    for &size in &sizes {
        let count = ((a.total / size) as u64).clamp(2, super::MAX_COUNT);
        for &mode in &a.modes {
            bar.set_message(format!("{} {size} bytes", mode.name()));
            rows.push(best_of(a.repeat, || point(a, size, mode, count, next()))?);
            bar.inc(1);
        }
        if a.bidir {
            for &mode in a.modes.iter().filter(|m| **m != PathArg::Null) {
                bar.set_message(format!("{} loopback {size} bytes", mode.name()));
                let p = a.params(size, mode.path(), count, LinkSpec::Inproc);
                let name = format!("{}-bidir", mode.name());
                rows.push(best_of(a.repeat, || {
                    row(size, &name, &run::bidirectional(&p)?, None)
                })?);
                bar.inc(1);
            }
        }
        if with_tcp {
            bar.set_message(format!("tcp {size} bytes"));
            rows.push(best_of(a.repeat, || tcp_point(a, size, count, next()))?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let sweep = Sweep {
        link: format!("{:?}", a.link).to_lowercase(),
        memcpy_mbps,
        rows,
    };
    std::fs::create_dir_all(&a.out)
        .map_err(|e| format!("cannot create the output folder {}: {e}", a.out.display()))?;
    let json =
        serde_json::to_string_pretty(&sweep).map_err(|e| format!("cannot write JSON: {e}"))?;
    let csv = to_csv(&sweep);
    write(&a.out.join("sweep.json"), json.as_bytes())?;
    write(&a.out.join("sweep.csv"), csv.as_bytes())?;
    let plots = plot::sweep(&sweep, &a.out)?;
    if a.json {
        println!("{json}");
    } else if a.csv {
        print!("{csv}");
    } else {
        print!("{}", table(&sweep));
        for p in plots {
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

fn write(path: &std::path::Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn to_csv(s: &Sweep) -> String {
    let mut out = String::from(
        "size,series,mbps,tx_mbps,cpu_us_per_pdu,latency_p50_us,corrupted,lost,runs,mbps_min\n",
    );
    for r in &s.rows {
        out += &format!(
            "{},{},{:.1},{:.1},{:.3},{},{},{},{},{:.1}\n",
            r.size,
            r.series,
            r.mbps,
            r.tx_mbps,
            r.cpu_us_per_pdu,
            r.latency_p50_us
                .map_or(String::new(), |l| format!("{l:.1}")),
            r.corrupted,
            r.lost,
            r.runs,
            r.mbps_min
        );
    }
    out
}

/// The sweep as a text table: Mb/s per size and series, then ratios.
pub fn table(s: &Sweep) -> String {
    let mut series: Vec<&str> = Vec::new();
    for r in &s.rows {
        if !series.contains(&r.series.as_str()) {
            series.push(&r.series);
        }
    }
    let mut sizes: Vec<usize> = s.rows.iter().map(|r| r.size).collect();
    sizes.dedup();
    let get = |size: usize, name: &str| {
        s.rows
            .iter()
            .find(|r| r.size == size && r.series == name)
            .map(|r| r.mbps)
    };
    let mut out = format!(
        "aurora ttcp sweep over {} (Mb/s of verified user data; null is the sender alone)\n\
         memcpy of 64 KiB on one core, this run: {:.0} Mb/s\n",
        s.link, s.memcpy_mbps
    );
    let runs = s.rows.iter().map(|r| r.runs).max().unwrap_or(1);
    if runs > 1 {
        out += &format!(
            "each point is the fastest of {runs} runs (the slowest is in sweep.csv and sweep.json)\n"
        );
    }
    out += &format!("{:>7}", "bytes");
    for name in &series {
        out += &format!(" {name:>12}");
    }
    let ratios = series.contains(&"tcp") && series.contains(&"single-copy");
    if ratios {
        out += "  single/tcp";
    }
    if series.contains(&"copy") && series.contains(&"single-copy") {
        out += "  single/copy";
    }
    out += "\n";
    for &size in &sizes {
        out += &format!("{size:>7}");
        for name in &series {
            out += &get(size, name).map_or(format!(" {:>12}", "-"), |v| format!(" {v:>12.0}"));
        }
        if let (Some(sc), Some(t)) = (get(size, "single-copy"), get(size, "tcp")) {
            out += &format!("  {:>10.2}", sc / t.max(1e-9));
        }
        if let (Some(sc), Some(c)) = (get(size, "single-copy"), get(size, "copy")) {
            out += &format!("  {:>11.2}", sc / c.max(1e-9));
        }
        out += "\n";
    }
    let bad: u64 = s.rows.iter().map(|r| r.corrupted + r.lost).sum();
    out += &format!("PDUs corrupted or lost across the sweep: {bad}\n");
    out
}
