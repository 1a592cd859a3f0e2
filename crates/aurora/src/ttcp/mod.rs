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

/// Options of `aurora ttcp`.
#[derive(Args, Debug, Clone)]
pub struct TtcpArgs {
    /// Transmit.
    #[arg(short = 't')]
    pub transmit: bool,
    /// Receive.
    #[arg(short = 'r')]
    pub receive: bool,
    /// PDU length in bytes (k and m suffixes allowed; at most 65535 for AAL5).
    #[arg(short = 'l', default_value = "8k", value_parser = parse_size)]
    pub len: usize,
    /// Number of PDUs.
    #[arg(short = 'n', default_value_t = 2048)]
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
    /// Port for --link udp|stream and the TCP baseline (udp also uses port+1).
    #[arg(long, default_value_t = 5120)]
    pub port: u16,
    /// Ring size in cells for ring links.
    #[arg(long, default_value_t = 16384)]
    pub ring_cells: usize,
    /// Pace the link: a line rate (oc3, oc12, oc48, oc192, oc768) or cells per second.
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Hold every cell this many microseconds on the link.
    #[arg(long, default_value_t = 0)]
    pub delay_us: u64,
    /// Probability that the link loses a cell.
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    /// Probability that the link flips one bit of a cell.
    #[arg(long, default_value_t = 0.0)]
    pub ber: f64,
    /// Seed of the loss and bit-error decisions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Poll period in microseconds for --sync poll.
    #[arg(long, default_value_t = 100)]
    pub poll_us: u64,
    /// Run this end over Linux loopback TCP instead of Aurora.
    #[arg(long, value_enum)]
    pub baseline: Option<BaselineArg>,
    /// Sweep PDU sizes in powers of two, e.g. 1k..64k (64k means 65535 for AAL5).
    #[arg(long)]
    pub sweep: Option<String>,
    /// Bytes per sweep point (the count is total / size, as in Penn's script).
    #[arg(long, default_value = "64m", value_parser = parse_size)]
    pub total: usize,
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

/// Baseline choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BaselineArg {
    /// Linux loopback TCP.
    Tcp,
}

/// Parses a line rate name or a number of cells per second.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    if let Some(r) = aurora_link::shape::line_rate(&s.to_ascii_lowercase()) {
        return Ok(r);
    }
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!(
            "\"{s}\" is not a line rate (oc3, oc12, oc48, oc192, oc768) or a positive number of cells per second"
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
            idle: Duration::from_secs(3),
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
    println!(
        "{tag}: {} bytes in {:.3} real seconds = {:.1} Mb/s, {:.3} CPU seconds ({:.2} us/PDU)",
        r.bytes, r.secs, r.mbps, r.cpu_secs, r.cpu_us_per_pdu
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
    if a.len == 0 && a.sweep.is_none() {
        return Err("-l must be at least 1 byte".into());
    }
    if a.qos.aal == aurora_hostif::Aal::Aal5 && a.len > 65535 && a.sweep.is_none() {
        return Err(format!("-l {} is above AAL5's limit of 65535 bytes", a.len));
    }
    for (name, p) in [("--loss", a.loss), ("--ber", a.ber)] {
        if !(0.0..=1.0).contains(&p) {
            return Err(format!("{name} {p} is not a probability between 0 and 1"));
        }
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
                vec![run::transmit(&p, &mut l)?]
            }
            (false, true) => {
                let mut l = run::open_rx(&p, || eprintln!("{READY}"))?;
                vec![run::receive(&p, &mut l)?]
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
