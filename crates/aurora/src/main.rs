//! The `aurora` command: runs and measures the testbed.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod bench_sar;
mod ttcp;

/// Aurora: a software gigabit-networking testbed.
#[derive(Parser)]
#[command(name = "aurora", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the version and the CPU features the fast paths use.
    Version,
    /// Move PDUs between two ends through a host interface and a link,
    /// verifying every byte (ttcp_atm's options, plus sweeps and a TCP baseline).
    Ttcp(Box<ttcp::TtcpArgs>),
    /// Measure speed; every figure is a ratio against a baseline measured in
    /// the same run.
    Bench {
        #[command(subcommand)]
        what: Bench,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// AAL5 and AAL3/4 segmentation and reassembly against memcpy, HEC rates.
    Sar {
        /// Seconds spent on each figure.
        #[arg(long, default_value_t = 0.6)]
        secs: f64,
        /// MiB of SDUs in the stream case (make it larger than the
        /// last-level cache; default: twice the cache, at least 256).
        #[arg(long)]
        stream_mib: Option<usize>,
        /// CRC kernel to measure.
        #[arg(long, value_enum, default_value_t = KernelArg::Best)]
        kernel: KernelArg,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum KernelArg {
    Best,
    Portable,
    Clmul,
}

fn llc_bytes() -> Option<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size").ok()?;
    let s = s.trim();
    let (num, mult) = match s.strip_suffix('K') {
        Some(n) => (n, 1024),
        None => match s.strip_suffix('M') {
            Some(n) => (n, 1024 * 1024),
            None => (s, 1),
        },
    };
    num.parse::<usize>().ok().map(|n| n * mult)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Ttcp(a) => match ttcp::main(*a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("aurora ttcp: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Version => {
            println!("aurora {}", env!("CARGO_PKG_VERSION"));
            println!("AAL5 CRC kernel: {:?}", aurora_sar::Kernel::best());
            ExitCode::SUCCESS
        }
        Command::Bench {
            what:
                Bench::Sar {
                    secs,
                    stream_mib,
                    kernel,
                    json,
                },
        } => {
            if !(secs > 0.0 && secs.is_finite()) {
                eprintln!("aurora: --secs must be a positive number of seconds, not {secs}");
                return ExitCode::FAILURE;
            }
            let kernel = match kernel {
                KernelArg::Best => aurora_sar::Kernel::best(),
                KernelArg::Portable => aurora_sar::Kernel::Portable,
                KernelArg::Clmul => {
                    if aurora_sar::Kernel::best() != aurora_sar::Kernel::Clmul {
                        eprintln!("aurora: --kernel clmul needs a CPU with PCLMULQDQ and SSSE3, and this one lacks them");
                        return ExitCode::FAILURE;
                    }
                    aurora_sar::Kernel::Clmul
                }
            };
            let stream_bytes = match stream_mib {
                Some(m) => m.max(1) << 20,
                None => (llc_bytes().unwrap_or(32 << 20) * 2).max(256 << 20),
            };
            let opts = bench_sar::Opts {
                secs,
                stream_bytes,
                kernel,
            };
            let rows = bench_sar::run(&opts, |what| {
                if !json {
                    eprintln!("measuring {what} ...");
                }
            });
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&rows).expect("rows serialise")
                );
            } else {
                print!("{}", bench_sar::table(&rows, kernel));
            }
            ExitCode::SUCCESS
        }
    }
}
