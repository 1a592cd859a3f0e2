//! The `aurora` command: runs and measures the testbed.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod atomic_books;
mod atomic_report;
mod bench_atomic;
mod bench_compile;
mod bench_ip;
mod bench_iperf;
mod bench_net;
mod bench_rt;
mod bench_sar;
mod bench_sched;
mod bench_soak;
mod bench_tcp;
mod books;
mod books_atomic;
mod books_edge;
mod books_ip;
mod callgrind;
mod captures;
mod demo;
mod experiment;
mod ip_books;
mod lateness;
mod netns;
mod node;
mod ping;
mod port_report;
mod progress;
mod run;
mod signal_report;
mod stripe_report;
mod tcp_report;
mod tcp_trace;
mod ttcp;
mod vc_cmd;
mod video_cmd;
mod video_report;

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
    /// A desk-area network (two switches, three hosts) in real time, with a
    /// report and a plot.
    Demo {
        /// Seconds to run, more than 0 and at most 60.
        #[arg(long, default_value_t = 3.0, value_parser = positive_secs)]
        secs: f64,
        /// Folder for the report, plot and topology.
        #[arg(long, default_value = "out/demo")]
        out: std::path::PathBuf,
        /// No live display (only the report).
        #[arg(long)]
        quiet: bool,
        #[command(flatten)]
        capture: CaptureOpts,
    },
    /// Run a topology file (see examples/dan.toml).
    Run {
        /// The topology file.
        file: std::path::PathBuf,
        /// Run in virtual time (default: real time: the same engine, each
        /// event run when the wall clock reaches it).
        #[arg(long)]
        r#virtual: bool,
        /// In real time, busy-wait for the next event instead of sleeping
        /// (lower lateness; one core fully used).
        #[arg(long, conflicts_with = "virtual")]
        spin: bool,
        /// Worker threads, 1 to 256 (default: the machine's cores in
        /// virtual time, 1 in real time). The nodes are split between them
        /// by cutting the links with the longest delays; links under 20 us
        /// are never cut, so a small or tightly coupled network may use
        /// fewer. Results do not depend on it (in real time, as long as the
        /// run keeps up); more workers help a real-time run only when one
        /// worker cannot keep up.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
        workers: Option<u16>,
        /// How long to run, e.g. 200ms or 2s: more than 0 and at most 24 hours.
        #[arg(long, default_value = "1s", value_parser = run_duration)]
        duration: aurora_time::Duration,
        /// After the run, time the network gets (senders stopped) to deliver
        /// what is on its way before the books close, e.g. 100ms (0 to 1
        /// hour); what is still travelling then is reported in flight.
        #[arg(long, default_value = "100ms", value_parser = drain_duration)]
        drain: aurora_time::Duration,
        /// Seed of every link's loss and bit errors (any 64-bit number).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Folder for the time-sequence traces (JSON) and plots of the
        /// connections of `[[tcp]]` entries with `trace = true` (made only
        /// when there are some).
        #[arg(long, default_value = "out/run")]
        out: std::path::PathBuf,
        /// In real time, listen on a Unix domain socket at this path for
        /// `aurora vc` commands to the signalling hosts (removed at the
        /// end of the run).
        #[arg(long, conflicts_with = "virtual")]
        control: Option<std::path::PathBuf>,
        #[command(flatten)]
        capture: CaptureOpts,
    },
    /// Run some nodes of a topology file together as one process (a
    /// partition: one node, or several), on one engine against the wall
    /// clock. Links among them are the engine's own; links to nodes outside
    /// are UDP or shared memory to the processes running those (each such
    /// link needs udp_a and udp_b addresses, or shm; an ATOMIC cable,
    /// udp_a and udp_b).
    Node {
        /// The topology file.
        file: std::path::PathBuf,
        /// The nodes to run: hosts, switches and routers of a cell file;
        /// meshes and hosts (each with its interface node) of an ATOMIC
        /// file. Repeat it (--name h1 --name sw) or give a comma list
        /// (--name h1,sw).
        #[arg(long, required = true, value_delimiter = ',')]
        name: Vec<String>,
        /// How long to run, e.g. 10s: more than 0 and at most 24 hours
        /// (default: until Ctrl-C or SIGTERM; either ends the run with its
        /// report).
        #[arg(long, value_parser = run_duration)]
        duration: Option<aurora_time::Duration>,
        /// Seed of the node's sending links' loss and bit errors (any 64-bit
        /// number).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Worker threads for the process's nodes, 1 to 256 (default 1),
        /// split as `aurora run --workers` splits a network (links under
        /// 20 us are never cut; a node's `worker` in the file pins it);
        /// each link to another process and each TUN interface is polled
        /// by the worker that runs its node.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
        workers: u16,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Listen on a Unix domain socket at this path for `aurora vc`
        /// commands to the process's signalling hosts (JSON lines; removed
        /// at the end of the run).
        #[arg(long)]
        control: Option<std::path::PathBuf>,
        #[command(flatten)]
        capture: CaptureOpts,
    },
    /// Join the books of a run made of several `aurora node` processes:
    /// give the JSON report (`aurora node --json`) of each process. Every
    /// PVC between traffic hosts balances, sent = delivered + corrupted +
    /// lost (by place and reason, in whichever process) + in flight, or
    /// the command fails naming it.
    Books {
        /// The processes' reports.
        #[arg(required = true)]
        reports: Vec<std::path::PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Open, close and list VCs of the signalling hosts of a running
    /// `aurora node` started with --control.
    Vc {
        #[command(subcommand)]
        what: Vc,
    },
    /// Time OAM F5 loopback round trips from a host of a topology file, its
    /// own traffic running around them.
    Ping {
        /// The topology file.
        file: std::path::PathBuf,
        /// `[itf.]vpi.vci`: the VC at the sending host (its interface is 0).
        target: String,
        /// The sending host.
        #[arg(long)]
        from: String,
        /// Requests to send, 1 to 1000000.
        #[arg(short = 'c', long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        count: u64,
        /// Time between requests, more than 0 and at most 60 s.
        #[arg(short = 'i', long, default_value = "100ms", value_parser = ping_interval)]
        interval: aurora_time::Duration,
        /// Segment loopback: the first switch answers.
        #[arg(long)]
        segment: bool,
        /// Run in virtual time.
        #[arg(long)]
        r#virtual: bool,
        /// Seed of the links' loss and bit errors (any 64-bit number).
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Re-run an experiment of the papers on an example topology, in
    /// virtual time (tcp-epd-linux also in real time, with Linux's TCP):
    /// a table, a CSV file and plots.
    Experiment {
        #[command(subcommand)]
        what: Experiment,
        /// Folder for the table and plots.
        #[arg(long, default_value = "out/experiment", global = true)]
        out: std::path::PathBuf,
        /// Seconds of virtual time per run (tcp-epd-linux: of iperf3, and
        /// of virtual time beside it), more than 0 and at most 60.
        #[arg(long, default_value_t = 1.0, value_parser = positive_secs, global = true)]
        secs: f64,
    },
    /// Run a VuSystem-style media pipeline on this machine, e.g.
    /// 'synthetic frames=90 ! edge ! filesink file=edges.y4m' (modules,
    /// their parameters and the syntax: docs/video.md).
    Video {
        /// The pipeline: elements joined by `!`, each a module and its
        /// key=value parameters.
        pipeline: String,
        /// Stop after this many seconds (default: when the source ends).
        #[arg(long, value_parser = positive_secs)]
        secs: Option<f64>,
        /// Run in virtual time (work takes no time; waits jump).
        #[arg(long)]
        r#virtual: bool,
    },
    /// Measure speed; every figure is a ratio against a baseline measured in
    /// the same run.
    Bench {
        #[command(subcommand)]
        what: Bench,
    },
}

#[derive(Subcommand)]
enum Experiment {
    /// Many greedy AAL5 sources through one congested port
    /// (examples/epd.toml): goodput in complete PDUs with tail drop, PPD,
    /// and EPD at thresholds from 10 % to 90 % of the buffer.
    Epd,
    /// Link sharing at one port (examples/linkshare.toml, the seed's S13):
    /// hierarchical WF2Q+ against the flat approximation with weight walks
    /// from one cell time to 10 ms apart, each leaf's service against its
    /// ideal hierarchical fluid share.
    Linkshare,
    /// The single-window loss study (examples/s14.toml, the seed's S14,
    /// after Fall and Floyd 1996): Tahoe, Reno, NewReno and SACK TCP with
    /// one to four segments dropped from one window; timeouts, recovery
    /// time and a time-sequence plot for each. Runs at least 10 s of
    /// virtual time per case.
    TcpDrops,
    /// TCP over ATM (examples/tcp-epd.toml, after Romanow and Floyd 1995):
    /// eight TCP connections through one congested port with tail drop,
    /// PPD and EPD, segment size and buffer swept; effective throughput.
    TcpEpd,
    /// TCP over ATM with Linux's TCP in real time
    /// (examples/tcp-epd-linux.toml): iperf3 Reno senders, each in a
    /// network namespace behind a TUN interface, into one congested OC-3c
    /// port with tail drop, PPD and EPD, beside Aurora's TCP on the same
    /// network in virtual time. --secs is iperf3's time per run (whole
    /// seconds; 10 gives steadier figures). Needs root, ip, iperf3, ping.
    TcpEpdLinux {
        /// Senders: the first of the example's eight.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=8))]
        flows: u64,
        /// Real-time runs of each configuration.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
        rounds: u32,
        /// The engine busy-waits for its next event instead of sleeping
        /// (less late; takes a core).
        #[arg(long)]
        spin: bool,
        /// The nice value (-20 to 19) of the engine's thread while it
        /// runs: below 0, other work on the machine delays it less.
        #[arg(long, allow_negative_numbers = true,
              value_parser = clap::value_parser!(i32).range(-20..=19))]
        nice: Option<i32>,
        /// The hosts' MTUs, comma-separated (the MSS is 40 less).
        #[arg(long, value_delimiter = ',', default_value = "1500,9180",
              value_parser = clap::value_parser!(u64).range(576..=9180))]
        mtu: Vec<u64>,
        /// Disciplines at the port, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "tail,ppd,epd",
              value_parser = ["tail", "ppd", "epd"])]
        discard: Vec<String>,
    },
    /// ACK compression (examples/ack-compression.toml): a transfer's ACKs
    /// queued behind another transfer's data going the other way; the
    /// spacing of its ACKs and the bursts it sends, with and without.
    AckCompression,
    /// A long, fast path (examples/tcp-long.toml): OC-12c with a 40 ms
    /// round trip; the coarse timer of the older TCPs, and Hoe's larger
    /// window after a loss with a burst limit.
    TcpLong,
    /// The Vidboard camera (examples/vidboard.toml, the seed's Tables 6
    /// and 7): frame rate against CB and LT with a 1990s receiving-host
    /// model, the best interburst delay found by a sweep; frame rate and
    /// Mb/s per picture size and format. Runs at least 3 s per case.
    /// Also Table 6 in real time with today's host (this machine's own
    /// receiving code, no host model), and the aggregate rate one to
    /// four cameras deliver to one workstation (examples/cameras.toml;
    /// host models in virtual time, today's host in real time).
    Vidboard {
        /// Parts to run, comma-separated: model (Table 6 with the host
        /// models, twice), table7, real (Table 6 in real time), aggregate.
        #[arg(long, value_delimiter = ',', default_value = "model,table7,real,aggregate",
              value_parser = experiment::VIDBOARD_PARTS)]
        parts: Vec<String>,
        /// Wall-clock seconds of each real-time run.
        #[arg(long, default_value_t = 1.0, value_parser = positive_secs)]
        real_secs: f64,
        /// Real-time runs busy-wait for their next event instead of
        /// sleeping (less late; takes a core).
        #[arg(long)]
        spin: bool,
        /// The real-time Table 6's CB values, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "14,28,42,56",
              value_parser = clap::value_parser!(i64).range(1..=1024))]
        cb: Vec<i64>,
        /// The real-time Table 6's LT values, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "4,16,120,480",
              value_parser = clap::value_parser!(i64).range(1..=480))]
        lt: Vec<i64>,
        /// The real-time Table 6's interburst delays (us), comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "0,50,100,200,400",
              value_parser = clap::value_parser!(i64).range(0..=4_000_000))]
        delays: Vec<i64>,
        /// The most cameras the aggregate part feeds one workstation.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=4))]
        cameras: u64,
    },
    /// VuSystem pipelines (the seed's Tables 9 and 10): ms/frame of the
    /// Exercise, Edge, FileSink, FileSource and VidboardSource modules at
    /// 320x240x8 against a memcpy of a frame, and Timeout precision with
    /// one to four pipelines at once in real time (4 x --secs each).
    Vusystem,
    /// Striping (examples/striping.toml): 4 x OC-3c against one OC-12c,
    /// cells and PDUs as the unit, no sync, sequence numbers and markers,
    /// skew from 0 to 5 ms, with and without loss; goodput, resequencing
    /// delay and buffer occupancy.
    Striping,
}

#[derive(Subcommand)]
enum Bench {
    /// Cells per second through a 16-port switch with a full translation
    /// table, against the OC-192c and OC-768c line rates.
    Switch {
        /// Seconds per figure, more than 0 and at most 60.
        #[arg(long, default_value_t = 0.5, value_parser = positive_secs)]
        secs: f64,
    },
    /// IP forwarding decisions per second on one core (header checks,
    /// longest-prefix match over 10,000 prefixes, TTL and checksum update),
    /// against OC-192c/OC-768c packet rates and a bare loop.
    Forward {
        /// Seconds per figure, more than 0 and at most 60.
        #[arg(long, default_value_t = 0.5, value_parser = positive_secs)]
        secs: f64,
    },
    /// ATOMIC packets through Aurora's own code on one core (host, node,
    /// channel, node, host) for the seed's packet sizes, one flow and
    /// several over one channel, and a fit of T(L) = a + b L.
    Atomic {
        /// Seconds per figure, more than 0 and at most 60.
        #[arg(long, default_value_t = 0.3, value_parser = positive_secs)]
        secs: f64,
    },
    /// ATOMIC network mapping: probes, messages and time against network
    /// size, by loop probing (symmetric layouts) and flooding (others).
    AtomicMap {
        /// Random layouts per size, 1 to 100.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
        runs: u64,
    },
    /// Topology files: seconds to check and compile 100 switches in a
    /// ring with 1,000, 2,000 and 5,000 PVCs (a flow each) across 1 to 8
    /// trunks.
    Compile {
        /// Switches in the ring.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(2..=1000))]
        switches: u64,
        /// Times each size is compiled (the fastest is shown).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
        runs: u64,
    },
    /// A long virtual-time run (10^9 cells through two switches at 94 %
    /// of OC-192c by default) with resident memory sampled as it goes:
    /// memory must stay flat and the books balance.
    Soak {
        /// Cells to send.
        #[arg(long, default_value_t = 1_000_000_000, value_parser = clap::value_parser!(u64).range(1_000..=100_000_000_000))]
        cells: u64,
        /// Memory samples taken.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(2..=10_000))]
        samples: u32,
    },
    /// A bulk TCP transfer through a two-hop OC-12c ATM path in virtual
    /// time: virtual seconds per wall second, segments and cells per
    /// second on one core, against the same cells without TCP.
    Tcp {
        /// Virtual seconds to run, more than 0 and at most 60.
        #[arg(long, default_value_t = 2.0, value_parser = positive_secs)]
        secs: f64,
        /// Count instructions per segment under valgrind (repeatable)
        /// instead of timing.
        #[arg(long)]
        callgrind: bool,
        /// Run only `tcp` or `cells` for `--secs` and print what it did
        /// (what `--callgrind` runs under valgrind).
        #[arg(long, hide = true)]
        only: Option<String>,
    },
    /// The same topologies in virtual and wall-clock time: round trips,
    /// PDUs missing, lateness, goodput against line rate, start-up time,
    /// memory per node, and what more workers give.
    Rt,
    /// iperf3 TCP between two network namespaces through Aurora (the IP
    /// hosts of examples/ip.toml, TUN interfaces, an ATM switch) against a
    /// plain veth pair, in the same run; needs root and iperf3.
    Iperf {
        /// Seconds of iperf3 per measurement, 1 to 60.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=60))]
        secs: u32,
        /// Link rate (as a topology file writes it).
        #[arg(long, default_value = "oc768")]
        rate: String,
        /// The hosts' MTU, 68 to 65000.
        #[arg(long, default_value_t = 65000, value_parser = clap::value_parser!(u64).range(68..=65000))]
        mtu: u64,
        /// Cells in each link direction's transmit buffer.
        #[arg(long, default_value_t = 16384, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
        buffer: u64,
        /// Rounds, each a veth measurement and then an Aurora one, 1 to 20.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
        rounds: u32,
        /// Run h1, sw and h2 as three `aurora node` processes over
        /// shared-memory rings (as tests/ip_netns.rs does) rather than in
        /// this process.
        #[arg(long)]
        processes: bool,
        /// Join h1 and h2 by one link, without the switch.
        #[arg(long)]
        direct: bool,
    },
    /// Output-port disciplines: the cost of a cell cycle (one enqueue and
    /// one dequeue) with 1,000 busy queues, against OC-768c's cell rate
    /// and a bare loop; `--callgrind` counts instructions instead.
    Sched {
        /// Count instructions under valgrind (repeatable) instead of
        /// timing.
        #[arg(long)]
        callgrind: bool,
        /// Run only this discipline and print its checksum (what
        /// `--callgrind` runs under valgrind).
        #[arg(long, hide = true)]
        only: Option<String>,
        /// Cell cycles per timed run, 1,000 to 1,000,000,000.
        #[arg(long, default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(1000..=1_000_000_000))]
        cycles: u64,
    },
    /// Virtual-time engine events per second against a bare event queue.
    Sim {
        /// Seconds per figure, more than 0 and at most 60.
        #[arg(long, default_value_t = 1.0, value_parser = positive_secs)]
        secs: f64,
    },
    /// AAL5 and AAL3/4 segmentation and reassembly against memcpy, HEC rates.
    Sar {
        /// Seconds spent on each figure, more than 0 and at most 60.
        #[arg(long, default_value_t = 0.6, value_parser = positive_secs)]
        secs: f64,
        /// MiB of SDUs in the stream case, 1 to 1024 (it needs about twice
        /// that in memory; make it larger than the last-level cache;
        /// default: twice the cache, at least 256, at most 1024).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
        stream_mib: Option<u64>,
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
    Vpclmul,
}

/// Prints a command's report as JSON or text, or its error.
fn report<R: serde::Serialize>(
    cmd: &str,
    result: Result<R, String>,
    json: bool,
    text: fn(&R) -> String,
) -> ExitCode {
    match result {
        Ok(r) if json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&r).expect("report serialises")
            );
            ExitCode::SUCCESS
        }
        Ok(r) => {
            print!("{}", text(&r));
            ExitCode::SUCCESS
        }
        Err(e) => done(cmd, Err(e)),
    }
}

/// Prints a run's report as [`report`] does. `check` finds in it the
/// lateness sentence of a run that was not faithful (also put on stderr,
/// so a script that reads only the JSON sees it; the run still succeeds)
/// and why its books do not balance (the run fails).
fn checked_report<R: serde::Serialize>(
    cmd: &str,
    result: Result<R, String>,
    json: bool,
    text: fn(&R) -> String,
    check: fn(&R) -> (Option<String>, Option<String>),
) -> ExitCode {
    let (late, imbalance) = result.as_ref().map_or((None, None), check);
    if let Some(sentence) = late {
        eprintln!("{cmd}: {sentence}");
    }
    let code = report(cmd, result, json, text);
    match imbalance {
        Some(why) => {
            eprintln!("{cmd}: {why}");
            ExitCode::FAILURE
        }
        None => code,
    }
}

/// A command that prints its own results: success, or failure with its
/// error on stderr after its name.
fn done(cmd: &str, r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{cmd}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The capture formats on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum CapFormat {
    Erf,
    Sunatm,
    Rfc1483,
}

/// `--capture` and `--capture-format`, shared by run, node and demo.
#[derive(clap::Args)]
struct CaptureOpts {
    /// Write a pcap file per receiving port into this folder (ERF: about
    /// 100 bytes per cell, so keep real-time runs short; a node writes its
    /// files when --duration ends).
    #[arg(long)]
    capture: Option<std::path::PathBuf>,
    /// Capture format for ports of cells: erf (every cell and every AAL5
    /// PDU), sunatm (reassembled SDUs) or rfc1483 (reassembled SDUs that
    /// start with an LLC/SNAP header: IP and ATMARP). Ports of ATOMIC
    /// frames always get files of frames.
    #[arg(long, value_enum, default_value = "erf")]
    capture_format: CapFormat,
}

impl CaptureOpts {
    fn arg(self) -> Option<captures::CaptureArg> {
        Some(captures::CaptureArg {
            dir: self.capture?,
            format: match self.capture_format {
                CapFormat::Erf => aurora_capture::CaptureFormat::Erf,
                CapFormat::Sunatm => aurora_capture::CaptureFormat::SunAtm,
                CapFormat::Rfc1483 => aurora_capture::CaptureFormat::Rfc1483,
            },
        })
    }
}

/// `aurora vc`'s commands.
#[derive(Subcommand)]
enum Vc {
    /// Open a VC from a signalling host to another, send on it, and print
    /// its id once it is open (or why it did not open, failing).
    Open {
        /// The node process's control socket.
        #[arg(long)]
        control: std::path::PathBuf,
        /// The host that opens (needed if the process holds several).
        #[arg(long)]
        host: Option<String>,
        /// The destination host.
        #[arg(long)]
        to: String,
        /// Bytes in each PDU, 8 to 65535.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u16).range(8..))]
        sdu: u16,
        /// PDUs to send at most while open, 0 to 1000000000.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
        count: u64,
        /// Time between PDUs, more than 0 and at most 60 s.
        #[arg(long, default_value = "1ms", value_parser = ping_interval)]
        interval: aurora_time::Duration,
        /// Close by itself this long after opening (default: stays open
        /// until closed), more than 0 and at most 24 hours.
        #[arg(long, value_parser = run_duration)]
        close_after: Option<aurora_time::Duration>,
        /// Read the relays' entries back (and renew the table's leases)
        /// this often, at most 1 hour; 0 for never.
        #[arg(long, default_value = "1s", value_parser = refresh_or_never)]
        refresh: aurora_time::Duration,
        /// Wait this long for the VC to open, more than 0 and at most 1 hour.
        #[arg(long, default_value = "10s", value_parser = refresh_period)]
        wait: aurora_time::Duration,
    },
    /// Close a VC and wait for the outcome.
    Close {
        /// The node process's control socket.
        #[arg(long)]
        control: std::path::PathBuf,
        /// The host that opened it (needed if the process holds several).
        #[arg(long)]
        host: Option<String>,
        /// The VC's id, as `aurora vc open` printed it.
        id: String,
        /// Wait this long for the close, more than 0 and at most 1 hour.
        #[arg(long, default_value = "10s", value_parser = refresh_period)]
        wait: aurora_time::Duration,
    },
    /// List a host's VCs (state, relays, VCIs, events, PDUs sent) and
    /// what arrived at it.
    List {
        /// The node process's control socket.
        #[arg(long)]
        control: std::path::PathBuf,
        /// The host (needed if the process holds several).
        #[arg(long)]
        host: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Reads `aurora vc`'s `--refresh` and `--wait`: more than 0 and at most
/// 1 hour.
fn refresh_period(s: &str) -> Result<aurora_time::Duration, String> {
    duration_up_to(s, 3600)
}

/// Reads `--refresh` of `aurora vc open`: 0 (no refresh daemon for the VC)
/// or more than 0 and at most 1 hour.
fn refresh_or_never(s: &str) -> Result<aurora_time::Duration, String> {
    match aurora_topo::parse_duration(s) {
        Ok(d) if d.as_nanos() == 0 => Ok(d),
        _ => duration_up_to(s, 3600),
    }
}

/// Reads `--secs`: more than 0 and at most 60 seconds.
fn positive_secs(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 60.0 => Ok(v),
        _ => Err(format!(
            "\"{s}\" is not a number of seconds more than 0 and at most 60"
        )),
    }
}

/// A duration more than 0 and at most `max_secs`.
fn duration_up_to(s: &str, max_secs: i64) -> Result<aurora_time::Duration, String> {
    let d = aurora_topo::parse_duration(s)?;
    if d.as_nanos() <= 0 || d.as_nanos() > max_secs * 1_000_000_000 {
        return Err(format!(
            "\"{s}\" is not a duration more than 0 and at most {max_secs} s"
        ));
    }
    Ok(d)
}

/// Reads `--duration` of run and node: more than 0 and at most 24 hours.
fn run_duration(s: &str) -> Result<aurora_time::Duration, String> {
    duration_up_to(s, 24 * 3600)
}

/// Reads `--drain` of run: 0 to 1 hour.
fn drain_duration(s: &str) -> Result<aurora_time::Duration, String> {
    let d = aurora_topo::parse_duration(s)?;
    if d.as_nanos() < 0 || d.as_nanos() > 3600 * 1_000_000_000 {
        return Err(format!("\"{s}\" is not a duration from 0 to 3600 s"));
    }
    Ok(d)
}

/// Reads ping's `-i`: more than 0 and at most 60 s.
fn ping_interval(s: &str) -> Result<aurora_time::Duration, String> {
    duration_up_to(s, 60)
}

/// The machine's cores (1 if it cannot say).
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn main() -> ExitCode {
    // A report piped into `head` should end quietly when the pipe closes, as
    // other command-line tools do, not panic on the next write.
    // SAFETY: setting a signal's disposition to the default is async-signal
    // safe and happens before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match Cli::parse().command {
        Command::Version => {
            println!("aurora {}", env!("CARGO_PKG_VERSION"));
            println!("AAL5 CRC kernel: {:?}", aurora_sar::Kernel::best());
            ExitCode::SUCCESS
        }
        Command::Ttcp(a) => done("aurora ttcp", ttcp::main(*a)),
        Command::Demo {
            secs,
            out,
            quiet,
            capture,
        } => done("aurora demo", demo::main(secs, &out, quiet, capture.arg())),
        Command::Run {
            file,
            r#virtual,
            spin,
            workers,
            duration,
            drain,
            seed,
            json,
            out,
            control,
            capture,
        } => {
            let clock = if r#virtual {
                run::Clock::Virtual
            } else {
                run::Clock::Wall { spin }
            };
            // Virtual time: every core. Real time: one worker unless asked
            // (see `--workers`).
            let workers = match (workers, clock) {
                (Some(w), _) => usize::from(w),
                (None, run::Clock::Virtual) => cores(),
                (None, run::Clock::Wall { .. }) => 1,
            };
            let args = run::RunArgs {
                duration,
                drain,
                seed,
                clock,
                workers,
            };
            let capture = capture.arg();
            let result = run::run(
                &file,
                args,
                capture.as_ref(),
                Some(&out),
                None,
                control.as_deref(),
            );
            checked_report("aurora run", result, json, run::text, |r| {
                let late = r.lateness.as_ref().filter(|l| !l.faithful);
                (late.map(|l| l.sentence.clone()), r.imbalance())
            })
        }
        Command::Node {
            file,
            name,
            duration,
            seed,
            workers,
            json,
            control,
            capture,
        } => {
            let capture = capture.arg();
            let run = node::Run {
                duration: duration
                    .map(|d| std::time::Duration::from_nanos(d.as_nanos().max(0) as u64)),
                seed,
                workers: usize::from(workers),
                capture: capture.as_ref(),
                control: control.as_deref(),
            };
            let result = node::main(&file, &name, &run);
            checked_report("aurora node", result, json, node::text, |r| {
                let late = Some(&r.lateness).filter(|l| !l.faithful);
                (late.map(|l| l.sentence.clone()), r.imbalance())
            })
        }
        Command::Books { reports, json } => checked_report(
            "aurora books",
            books::main(&reports),
            json,
            books::text,
            |r| (None, r.problem()),
        ),
        Command::Vc { what } => match what {
            Vc::Open {
                control,
                host,
                to,
                sdu,
                count,
                interval,
                close_after,
                refresh,
                wait,
            } => vc_cmd::open(vc_cmd::OpenArgs {
                control,
                host,
                to,
                sdu: sdu.into(),
                count,
                interval,
                close_after,
                refresh,
                wait,
            }),
            Vc::Close {
                control,
                host,
                id,
                wait,
            } => vc_cmd::close(&control, host.as_deref(), &id, wait),
            Vc::List {
                control,
                host,
                json,
            } => vc_cmd::list_cmd(&control, host.as_deref(), json),
        },
        Command::Ping {
            file,
            target,
            from,
            count,
            interval,
            segment,
            r#virtual,
            seed,
        } => {
            let args = ping::Args {
                file: &file,
                from: &from,
                target: &target,
                count,
                interval,
                segment,
                virtual_time: r#virtual,
                seed,
            };
            match ping::main(&args) {
                // No answer is a failure, as with ping(8).
                Ok((stats, text)) => {
                    print!("{text}");
                    match stats.answered {
                        0 => ExitCode::FAILURE,
                        _ => ExitCode::SUCCESS,
                    }
                }
                Err(e) => done("aurora ping", Err(e)),
            }
        }
        Command::Experiment { what, out, secs } => {
            let r = match what {
                Experiment::Epd => experiment::epd(&out, secs),
                Experiment::Linkshare => experiment::linkshare(&out, secs),
                Experiment::TcpDrops => experiment::tcp_drops(&out, secs.max(10.0)),
                Experiment::TcpEpd => experiment::tcp_epd(&out, secs),
                Experiment::TcpEpdLinux {
                    flows,
                    rounds,
                    spin,
                    nice,
                    mtu,
                    discard,
                } => experiment::tcp_epd_linux(
                    &out,
                    secs,
                    &experiment::TcpEpdLinuxOpts {
                        flows: flows as usize,
                        rounds,
                        spin,
                        nice,
                        mtus: mtu.into_iter().map(|m| m as usize).collect(),
                        discards: discard,
                    },
                ),
                Experiment::AckCompression => experiment::ack_compression(&out, secs),
                Experiment::TcpLong => experiment::tcp_long(&out, secs.max(10.0)),
                Experiment::Vidboard {
                    parts,
                    real_secs,
                    spin,
                    cb,
                    lt,
                    delays,
                    cameras,
                } => experiment::vidboard(
                    &out,
                    secs.max(3.0),
                    &experiment::VidboardOpts {
                        parts,
                        real_secs,
                        spin,
                        cbs: cb,
                        lts: lt,
                        delays,
                        cameras: cameras as usize,
                    },
                ),
                Experiment::Striping => experiment::striping(&out, secs),
                Experiment::Vusystem => experiment::vusystem(&out, secs),
            };
            done("aurora experiment", r)
        }
        Command::Video {
            pipeline,
            secs,
            r#virtual,
        } => done("aurora video", video_cmd::main(&pipeline, secs, r#virtual)),
        Command::Bench { what } => bench(what),
    }
}

/// `aurora bench`: each measurement prints its own figures.
fn bench(what: Bench) -> ExitCode {
    let (name, r) = match what {
        Bench::Switch { secs } => {
            bench_net::switch_main(secs);
            ("switch", Ok(()))
        }
        Bench::Forward { secs } => {
            bench_ip::main(secs);
            ("forward", Ok(()))
        }
        Bench::Atomic { secs } => {
            bench_atomic::chain_main(secs);
            ("atomic", Ok(()))
        }
        Bench::AtomicMap { runs } => {
            bench_atomic::map_main(runs);
            ("atomic-map", Ok(()))
        }
        Bench::Compile { switches, runs } => (
            "compile",
            bench_compile::main(switches as usize, runs as usize),
        ),
        Bench::Soak { cells, samples } => ("soak", bench_soak::main(cells, samples)),
        Bench::Tcp {
            secs,
            callgrind,
            only,
        } => ("tcp", bench_tcp::main(secs, callgrind, only.as_deref())),
        Bench::Rt => ("rt", bench_rt::main()),
        Bench::Iperf {
            secs,
            rate,
            mtu,
            buffer,
            rounds,
            processes,
            direct,
        } => {
            let o = bench_iperf::Opts {
                secs,
                rate,
                mtu: mtu as usize,
                buffer: buffer as usize,
                rounds,
                processes,
                direct,
            };
            let r = bench_iperf::run(&o).map(|r| print!("{}", bench_iperf::summary(&r)));
            ("iperf", r)
        }
        Bench::Sched {
            callgrind,
            only,
            cycles,
        } => (
            "sched",
            bench_sched::main(callgrind, only.as_deref(), cycles),
        ),
        Bench::Sim { secs } => {
            bench_net::sim_main(secs);
            ("sim", Ok(()))
        }
        Bench::Sar {
            secs,
            stream_mib,
            kernel,
            json,
        } => {
            let kernel = match kernel {
                KernelArg::Best => aurora_sar::Kernel::best(),
                KernelArg::Portable => aurora_sar::Kernel::Portable,
                KernelArg::Clmul => aurora_sar::Kernel::Clmul,
                KernelArg::Vpclmul => aurora_sar::Kernel::Vpclmul,
            };
            ("sar", bench_sar::main(secs, stream_mib, kernel, json))
        }
    };
    done(&format!("aurora bench {name}"), r)
}
