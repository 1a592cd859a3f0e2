//! `aurora ttcp`: a transmitter and receiver that ttcp_atm users will
//! recognise, plus sweeps over PDU sizes with a kernel TCP baseline.

pub mod baseline;
pub mod pattern;
pub mod plot;
pub mod run;
pub mod sweep;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use aurora_hostif::{DataPath, PvcAddr, Qos, SyncMode};
use clap::{Args, ValueEnum};

use run::{LinkSpec, Params, Report};

/// What a receiver prints on stderr once a transmitter may connect.
pub const READY: &str = "ttcp-r: ready";

/// The most PDUs one run sends (-n, and a sweep point's count).
pub const MAX_COUNT: u64 = 1_000_000_000;

/// Options of `aurora ttcp`. Every number has a stated range, checked
/// before anything is allocated or opened.
#[derive(Args, Debug, Clone)]
pub struct TtcpArgs {
    /// Transmit.
    #[arg(short = 't')]
    pub transmit: bool,
    /// Receive.
    #[arg(short = 'r')]
    pub receive: bool,
    /// PDU length in bytes, 1 to 65535 (k suffix allowed; 64k means 65535).
    #[arg(short = 'l', default_value = "8k", value_parser = parse_len)]
    pub len: usize,
    /// Number of PDUs, 1 to 1000000000.
    #[arg(short = 'n', default_value_t = 2048, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub count: u64,
    /// PVC address, [itf.]vpi.vci.
    #[arg(short = 'a', default_value = "0.42")]
    pub addr: PvcAddr,
    /// QoS in linux-atm's form, e.g. ubr,aal5:max_sdu=65535.
    #[arg(short = 'P', default_value = "ubr,aal5")]
    pub qos: Qos,
    /// Print more detail.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Data path of the host interface.
    #[arg(long, value_enum, default_value_t = PathArg::SingleCopy)]
    pub mode: PathArg,
    /// Synchronisation: clock-driven polling or blocking for events.
    #[arg(long, value_enum, default_value_t = SyncArg::Event)]
    pub sync: SyncArg,
    /// Link between the two ends.
    #[arg(long, value_enum, default_value_t = LinkArg::Shm)]
    pub link: LinkArg,
    /// Shared-memory file for --link shm.
    #[arg(long, default_value = "/dev/shm/aurora-ttcp")]
    pub shm_path: PathBuf,
    /// Port for --link udp|stream and the TCP baseline, 1 to 65534 (udp also
    /// uses port+1; a sweep uses two ports per point and run above it).
    #[arg(long, default_value_t = 5120, value_parser = clap::value_parser!(u16).range(1..=65534))]
    pub port: u16,
    /// Ring size in cells for ring links, 64 to 1048576 (rounded up to a
    /// power of two).
    #[arg(long, default_value_t = 16384, value_parser = parse_ring_cells)]
    pub ring_cells: usize,
    /// Pace the link: a line rate (oc3, oc12, oc48, oc192, oc768) or 1 to
    /// 1000000000 cells per second.
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Hold every cell this many microseconds on the link, 0 to 1000000.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=MAX_DELAY_US))]
    pub delay_us: u64,
    /// Probability that the link loses a cell, 0 to 1.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    pub loss: f64,
    /// Probability that the link flips one bit of a cell, 0 to 1.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    pub ber: f64,
    /// Seed of the loss and bit-error decisions (any 64-bit number).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Poll period in microseconds for --sync poll, 1 to 1000000.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub poll_us: u64,
    /// Over a ring (shm or in-process), re-check it for up to this many
    /// microseconds before sleeping when it is empty (receiver) or full
    /// (sender), 0 to 10000. Spinning spares the wake-ups that otherwise
    /// pace small PDUs, at the cost of CPU while waiting: a throughput
    /// setting, not one for measuring CPU per PDU.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub spin_us: u64,
    /// Run this end over Linux loopback TCP instead of Aurora.
    #[arg(long, value_enum)]
    pub baseline: Option<BaselineArg>,
    /// Sweep PDU sizes in powers of two, e.g. 1k..64k (64k means 65535 for AAL5).
    #[arg(long)]
    pub sweep: Option<String>,
    /// Bytes per sweep point, 64k to 16g (the count is total / size, as in
    /// Penn's script, at least 2).
    #[arg(long, default_value = "64m", value_parser = parse_total)]
    pub total: usize,
    /// Runs of each sweep point, 1 to 20; the table shows the fastest and
    /// the data files the slowest as well. A shared machine only ever slows
    /// a run down, so the fastest of a few is the one least disturbed; every
    /// series of the sweep is treated alike.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// Data paths to sweep.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "copy,single-copy,null"
    )]
    pub modes: Vec<PathArg>,
    /// Loopback test: one interface sends and receives at once.
    #[arg(long)]
    pub bidir: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Print CSV (sweeps).
    #[arg(long)]
    pub csv: bool,
    /// Folder for sweep plots (PNG and SVG) and data.
    #[arg(long, default_value = "out/ttcp")]
    pub out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Data path choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PathArg {
    /// Two copies each way.
    Copy,
    /// One copy each way.
    SingleCopy,
    /// The infinitely fast interface.
    Null,
}

impl PathArg {
    /// As the host interface's type.
    pub fn path(self) -> DataPath {
        match self {
            PathArg::Copy => DataPath::Copy,
            PathArg::SingleCopy => DataPath::SingleCopy,
            PathArg::Null => DataPath::Null,
        }
    }
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            PathArg::Copy => "copy",
            PathArg::SingleCopy => "single-copy",
            PathArg::Null => "null",
        }
    }
}

/// Synchronisation choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SyncArg {
    /// Clock-driven polling.
    Poll,
    /// Block and be woken.
    Event,
}

/// Link choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LinkArg {
    /// Two threads in one process.
    Inproc,
    /// Shared memory between two processes.
    Shm,
    /// UDP on loopback.
    Udp,
    /// Bare cells on a TCP connection.
    Stream,
}

impl LinkArg {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            LinkArg::Inproc => "inproc",
            LinkArg::Shm => "shm",
            LinkArg::Udp => "udp",
            LinkArg::Stream => "stream",
        }
    }
}

/// Baseline choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BaselineArg {
    /// Linux loopback TCP.
    Tcp,
}

/// The longest --delay-us: one second.
pub const MAX_DELAY_US: u64 = 1_000_000;

/// The largest --ring-cells: 2^20 cells (53 MiB).
pub const MAX_RING_CELLS: usize = 1 << 20;

/// Parses a line rate name or 1 to 10^9 cells per second.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    if let Some(r) = aurora_link::shape::line_rate(&s.to_ascii_lowercase()) {
        return Ok(r);
    }
    let max = aurora_hostif::MAX_PCR as f64;
    match s.parse::<f64>() {
        Ok(v) if (1.0..=max).contains(&v) => Ok(v),
        _ => Err(format!(
            "\"{s}\" is not a line rate (oc3, oc12, oc48, oc192, oc768) or a number of cells per second from 1 to {max}"
        )),
    }
}

/// Parses a probability, 0 to 1.
pub fn parse_probability(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("\"{s}\" is not a probability from 0 to 1")),
    }
}

/// Parses a PDU length: 1 to 65535 bytes (`64k` is taken as 65535).
pub fn parse_len(s: &str) -> Result<usize, String> {
    match parse_size(s)? {
        65536 => Ok(65535),
        n @ 1..=65535 => Ok(n),
        n => Err(format!(
            "\"{s}\" ({n} bytes) is not a PDU length from 1 to 65535 bytes"
        )),
    }
}

/// Parses a ring size: 64 to [`MAX_RING_CELLS`] cells.
pub fn parse_ring_cells(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (64..=MAX_RING_CELLS).contains(&n) => Ok(n),
        _ => Err(format!(
            "\"{s}\" is not a ring size from 64 to {MAX_RING_CELLS} cells"
        )),
    }
}

/// Parses bytes per sweep point: 64 KiB to 16 GiB.
pub fn parse_total(s: &str) -> Result<usize, String> {
    match parse_size(s)? {
        n if (64 << 10..=16 << 30).contains(&n) => Ok(n),
        n => Err(format!(
            "\"{s}\" ({n} bytes) is not a total from 64k to 16g bytes per sweep point"
        )),
    }
}

/// Parses sizes like `1500`, `8k`, `64k`, `1m`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1024),
        Some('m') => (&t[..t.len() - 1], 1024 * 1024),
        Some('g') => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (&t[..], 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("\"{s}\" is not a size (a number with an optional k, m or g)"))
}

impl TtcpArgs {
    /// The transfer parameters for one PDU size and data path.
    pub fn params(&self, len: usize, path: DataPath, count: u64, link: LinkSpec) -> Params {
        Params {
            addr: self.addr,
            qos: self.qos,
            len,
            count,
            path,
            sync: match self.sync {
                SyncArg::Poll => SyncMode::Poll,
                SyncArg::Event => SyncMode::Event,
            },
            link,
            ring_cells: self.ring_cells,
            shaping: aurora_link::shape::Shaping {
                rate: self.rate,
                delay: Duration::from_micros(self.delay_us),
                loss: self.loss,
                bit_error: self.ber,
                seed: self.seed,
                ..aurora_link::shape::Shaping::default()
            },
            poll: Duration::from_micros(self.poll_us.max(1)),
            spin: Duration::from_micros(self.spin_us),
            idle: Duration::from_secs(3),
            stall: Duration::from_secs(10),
        }
    }

    /// The link as given on the command line.
    pub fn link_spec(&self) -> LinkSpec {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        match self.link {
            LinkArg::Inproc => LinkSpec::Inproc,
            LinkArg::Shm => LinkSpec::Shm(self.shm_path.clone()),
            LinkArg::Udp => LinkSpec::Udp(lo, self.port),
            LinkArg::Stream => LinkSpec::Stream(SocketAddr::new(lo, self.port)),
        }
    }
}

fn print(r: &Report, verbose: bool) {
    let tag = match r.role.as_str() {
        "transmit" => "ttcp-t",
        "receive" => "ttcp-r",
        _ => "ttcp-b",
    };
    let rate = match r.mbps {
        Some(m) => format!("{m:.1} Mb/s"),
        None => "no rate (nothing to time: fewer than two PDUs, or all at one instant)".into(),
    };
    println!(
        "{tag}: {} bytes in {:.3} real seconds = {rate}, {:.3} CPU seconds ({:.2} us/PDU)",
        r.bytes, r.secs, r.cpu_secs, r.cpu_us_per_pdu
    );
    if r.corrupted > 0 || r.lost > 0 {
        println!("{tag}: {} PDUs corrupted, {} lost", r.corrupted, r.lost);
    }
    if verbose {
        if let Some([min, p50, p99, max]) = r.latency_us {
            println!("{tag}: latency us: min {min:.1} median {p50:.1} p99 {p99:.1} max {max:.1}");
        }
        println!(
            "{tag}: link: {} cells out, {} in, {} delivered{}",
            r.link.cells_out,
            r.link.cells_in,
            r.link.cells_delivered,
            r.link
                .drops
                .iter()
                .map(|(k, v)| format!(", {k} {v}"))
                .collect::<String>()
        );
        for (k, v) in &r.drops {
            println!("{tag}: dropped PDUs: {k} {v}");
        }
    }
}

/// Runs the command; the error is one sentence for the user.
pub fn main(a: TtcpArgs) -> Result<(), String> {
    if a.len > a.qos.max_sdu && a.sweep.is_none() {
        return Err(format!(
            "-l {} is above the QoS's max_sdu of {} bytes",
            a.len, a.qos.max_sdu
        ));
    }
    if let Some(range) = &a.sweep {
        return sweep::main(&a, range);
    }
    let len = a.len;
    let path = a.mode.path();
    let reports: Vec<Report> = if let Some(BaselineArg::Tcp) = a.baseline {
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), a.port);
        match (a.transmit, a.receive) {
            (true, false) => vec![baseline::transmit(addr, len, a.count)?],
            (false, true) => {
                let l = std::net::TcpListener::bind(addr)
                    .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
                eprintln!("{READY}");
                vec![baseline::receive(addr, len, a.count, Some(l))?]
            }
            _ => return Err("the TCP baseline needs exactly one of -t and -r".into()),
        }
    } else if a.bidir {
        let p = a.params(len, path, a.count, LinkSpec::Inproc);
        vec![run::bidirectional(&p)?]
    } else if a.link == LinkArg::Inproc {
        let p = a.params(len, path, a.count, LinkSpec::Inproc);
        let (t, r) = run::in_process(&p)?;
        vec![t, r]
    } else {
        let p = a.params(len, path, a.count, a.link_spec());
        match (a.transmit, a.receive) {
            (true, false) => {
                let mut l = run::open_tx(&p, Duration::from_secs(10))?;
                let r = run::transmit(&p, &mut l)?;
                if a.link == LinkArg::Udp {
                    eprintln!("ttcp-t: UDP tells a sender nothing: whether a receiver got these cells is in the receiver's report only");
                }
                vec![r]
            }
            (false, true) => {
                let mut l = run::open_rx(&p, || eprintln!("{READY}"))?;
                let r = run::receive(&p, &mut l)?;
                if r.pdus == 0 && r.corrupted == 0 {
                    return Err(format!(
                        "nothing was received: no PDU arrived on the {} link within {} s",
                        a.link.name(),
                        p.idle.as_secs()
                    ));
                }
                vec![r]
            }
            _ => {
                return Err(
                    "give -t on one side and -r on the other (or --link inproc for both in one process)".into(),
                )
            }
        }
    };
    if a.json {
        let v = if reports.len() == 1 {
            serde_json::to_string_pretty(&reports[0])
        } else {
            serde_json::to_string_pretty(&reports)
        };
        println!("{}", v.map_err(|e| format!("cannot write JSON: {e}"))?);
    } else {
        for r in &reports {
            print(r, a.verbose);
        }
    }
    Ok(())
}
