//! `aurora bench iperf`: iperf3 TCP between two network namespaces, first
//! over a plain veth pair, then through Aurora (the IP hosts of
//! `examples/ip.toml` with their TUN interfaces, an ATM switch between
//! them), in the same run, and the ratio of the two.
//!
//! Aurora runs either in this process (one engine holding h1, the switch
//! and h2, each host's TUN interface made inside its own namespace), or as
//! three `aurora node` processes joined by shared-memory rings, as
//! `tests/ip_netns.rs` runs them. Either way the links run at the rate
//! asked (OC-768c by default, so the figure measures Aurora's software,
//! not the modelled line) and Aurora's own counters are shown: cells
//! offered, dropped and delivered on every link direction, what the IP
//! hosts and their TUN interfaces moved, and how late the engine ran.
//!
//! Needs root (namespaces, veth pairs, TUN devices), `ip` and `iperf3`.
//! Namespaces (and with them the veth pair and the TUN devices) are
//! removed however the run ends, Ctrl-C included.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aurora_ip::node::IpNode;

pub(crate) use crate::netns::cpu;
use crate::netns::{interrupted, loadavg, run_ok, wait_for_ping, Netns, Proc};

/// How long Aurora's hosts get to find each other before iperf3 runs.
const PING_WITHIN: Duration = Duration::from_secs(20);

/// The example topology the bench runs (its rates, MTU and buffers
/// replaced as asked).
const IP_TOML: &str = include_str!("../../../examples/ip.toml");

/// What to measure.
#[derive(Clone, Debug)]
pub struct Opts {
    /// Seconds of iperf3 per measurement.
    pub secs: u32,
    /// Link rate, as a topology file writes it (`oc768`, `10gbps`...).
    pub rate: String,
    /// The hosts' MTU (their TUN interfaces' and the IP nodes').
    pub mtu: usize,
    /// Cells in each link direction's transmit buffer.
    pub buffer: usize,
    /// Rounds (each a veth measurement, then an Aurora one).
    pub rounds: u32,
    /// Run the nodes as `aurora node` processes rather than in this
    /// process.
    pub processes: bool,
    /// Join h1 and h2 by one link, without the switch.
    pub direct: bool,
}

/// One iperf3 measurement.
#[derive(Clone, Copy, Debug, Default)]
pub struct Iperf {
    /// Bits per second the receiver got.
    pub bps: f64,
    /// TCP retransmissions the sender made.
    pub retransmits: u64,
}

/// One round.
#[derive(Debug)]
pub struct Round {
    /// Over the veth pair.
    pub veth: Iperf,
    /// Through Aurora.
    pub aurora: Iperf,
    /// Aurora's counters and lateness, as text.
    pub report: String,
    /// Every link direction's cells reconcile (offered = dropped +
    /// lost + delivered + still in flight); in process mode, each
    /// process's report says so itself.
    pub balanced: bool,
    /// In one process: CPU seconds Aurora's engine thread used while
    /// iperf3 ran, per GB of TCP payload carried (less noisy than the
    /// rate on a shared machine).
    pub cpu_per_gb: Option<f64>,
}

/// The topology: `examples/ip.toml` at `rate`, hosts at `mtu`, links with
/// `buffer` cells, its ring names made unique to `tag`; or, `direct`, its
/// two hosts on one link with one PVC.
pub fn topology(o: &Opts, tag: &str) -> String {
    if o.direct {
        return format!(
            "[[host]]\nname = \"h1\"\nip = \"10.1.0.1/24\"\nmtu = {mtu}\n\n\
             [[host]]\nname = \"h2\"\nip = \"10.1.0.2/24\"\nmtu = {mtu}\n\n\
             [[link]]\na = \"h1\"\nb = \"h2\"\nrate = \"{rate}\"\nbuffer = {buffer}\n\
             delay = \"10us\"\nshm = \"aurora-{tag}-ip-h1h2\"\n\n\
             [[pvc]]\nname = \"h1-h2\"\npath = [\"h1\", \"h2\"]\n",
            mtu = o.mtu,
            rate = o.rate,
            buffer = o.buffer,
        );
    }
    let mut t = IP_TOML
        .replace(
            "rate = \"oc12\"",
            &format!("rate = \"{}\"\nbuffer = {}", o.rate, o.buffer),
        )
        .replace("shm = \"aurora-", &format!("shm = \"aurora-{tag}-"));
    for ip in ["ip = \"10.1.0.1/24\"", "ip = \"10.1.0.2/24\""] {
        t = t.replace(ip, &format!("{ip}\nmtu = {}", o.mtu));
    }
    t
}

/// Runs iperf3 from `client` to `addr` in `server` for `secs`.
fn iperf(client: &Netns, server: &Netns, addr: &str, secs: u32) -> Result<Iperf, String> {
    let port = (20_000 + std::process::id() % 20_000).to_string();
    let _srv = Proc::spawn(
        server
            .cmd("iperf3")
            .args(["-s", "-1", "-p", &port])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )?;
    let mut last = String::new();
    // The server takes a moment to listen.
    for _ in 0..20 {
        interrupted()?;
        std::thread::sleep(Duration::from_millis(200));
        let out = client
            .cmd("iperf3")
            .args(["-c", addr, "-p", &port, "-t", &secs.to_string(), "-J"])
            .output()
            .map_err(|e| format!("cannot run iperf3: {e}"))?;
        let j: serde_json::Value = match serde_json::from_slice(&out.stdout) {
            Ok(j) => j,
            Err(e) => return Err(format!("iperf3 gave no JSON ({e})")),
        };
        if let Some(e) = j["error"].as_str() {
            last = e.to_string();
            if e.contains("refused") {
                continue;
            }
            return Err(format!("iperf3: {e}"));
        }
        return Ok(Iperf {
            bps: j["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or(0.0),
            retransmits: j["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
        });
    }
    Err(format!("iperf3 could not reach {addr}: {last}"))
}

fn veth_round(tag: &str, secs: u32) -> Result<Iperf, String> {
    let (a, b) = (
        Netns::new(format!("{tag}-va"))?,
        Netns::new(format!("{tag}-vb"))?,
    );
    let (x, y) = (format!("{tag}x"), format!("{tag}y"));
    run_ok(Command::new("ip").args([
        "link", "add", "name", &x, "netns", &a.0, "type", "veth", "peer", "name", &y, "netns", &b.0,
    ]))?;
    run_ok(a.cmd("ip").args(["addr", "add", "10.9.0.1/24", "dev", &x]))?;
    run_ok(a.cmd("ip").args(["link", "set", &x, "up"]))?;
    run_ok(b.cmd("ip").args(["addr", "add", "10.9.0.2/24", "dev", &y]))?;
    run_ok(b.cmd("ip").args(["link", "set", &y, "up"]))?;
    iperf(&a, &b, "10.9.0.2", secs)
}

/// Opens the TUN interface `t` inside namespace `ns`: a thread enters the
/// namespace, makes and configures the device there, and ends; the
/// device stays in that namespace, its file with this process.
fn tun_in(ns: &Netns, t: &aurora_topo::TunSpec) -> Result<aurora_link::tun::Tun, String> {
    let path = format!("/var/run/netns/{}", ns.0);
    let t = t.clone();
    std::thread::spawn(move || {
        let f = std::fs::File::open(&path).map_err(|e| format!("cannot open {path}: {e}"))?;
        // SAFETY: setns() takes a descriptor (of an open namespace file,
        // alive for the call) and a namespace type; it moves only this
        // thread, which ends right after.
        let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
        if rc != 0 {
            return Err(format!(
                "cannot enter namespace {path}: {}",
                std::io::Error::last_os_error()
            ));
        }
        aurora_topo::open_tun(&t)
    })
    .join()
    .map_err(|_| "the thread opening a TUN interface panicked".to_string())?
}

fn dir_text(name: &str, c: &aurora_engine::DirCounters, queued: usize) -> String {
    format!(
        "{name:<14} {:>12} {:>9} {:>7} {:>12} {:>8}\n",
        c.offered, c.overflow, c.lost, c.delivered, queued
    )
}

/// Through Aurora in this process.
fn aurora_here(o: &Opts, tag: &str) -> Result<(Iperf, String, bool, Option<f64>), String> {
    let (a, b) = (
        Netns::new(format!("{tag}-a"))?,
        Netns::new(format!("{tag}-b"))?,
    );
    let text = topology(o, tag);
    let bp = aurora_topo::compile(&text).map_err(|p| {
        p.0.iter()
            .map(|p| format!("topology line {}: {}", p.line, p.msg))
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let tuns = bp.tuns.clone();
    let mut net = bp.into_sim(1).map_err(|p| {
        p.0.iter()
            .map(|p| p.msg.clone())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let id = |name: &str| {
        net.hosts
            .iter()
            .chain(&net.ip_nodes)
            .find(|(n, _)| n == name)
            .map(|(_, id)| *id)
            .ok_or_else(|| format!("the topology has no host {name}"))
    };
    let (h1, h2) = (id("h1")?, id("h2")?);
    for (node, t) in &tuns {
        let ns = if *node == h1 { &a } else { &b };
        let tun = tun_in(ns, t)?;
        net.sim
            .set_packet_device(*node, Box::new(tun))
            .map_err(|e| e.to_string())?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    // Set while iperf3 runs.
    let measuring = Arc::new(AtomicBool::new(false));
    let secs = o.secs;
    let driver = {
        let (stop, measuring) = (stop.clone(), measuring.clone());
        let (a, b) = (a, b);
        std::thread::spawn(move || {
            let r = wait_for_ping(&a, "10.1.0.2", PING_WITHIN, &mut || Ok(())).and_then(|()| {
                measuring.store(true, Ordering::Relaxed);
                iperf(&a, &b, "10.1.0.2", secs)
            });
            stop.store(true, Ordering::Relaxed);
            // The namespaces go when the engine has stopped using them.
            (r, a, b)
        })
    };
    let mut wall = net.sim.wall_clock(false);
    let slice = aurora_time::Duration::from_millis(10);
    let mut end = aurora_time::Instant::ZERO;
    let thread_cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    };
    let mut cpu_from = None;
    while !stop.load(Ordering::Relaxed) && !crate::netns::was_interrupted() {
        if cpu_from.is_none() && measuring.load(Ordering::Relaxed) {
            cpu_from = Some(thread_cpu());
        }
        end += slice;
        net.sim.run_wall(end, &mut wall);
    }
    let cpu = cpu_from.map(|c| thread_cpu() - c);
    let (r, _a, _b) = driver
        .join()
        .map_err(|_| "the iperf3 driver thread panicked".to_string())?;
    let r = r?;
    let gb = r.bps * f64::from(o.secs) / 8.0 / 1e9;
    let cpu_per_gb = cpu.filter(|_| gb > 0.0).map(|c| c / gb);

    // Aurora's own books.
    let mut s = format!(
        "{:<14} {:>12} {:>9} {:>7} {:>12} {:>8}\n",
        "link", "cells in", "overflow", "lost", "delivered", "queued"
    );
    let mut balanced = true;
    let name = |id: aurora_engine::NodeId| {
        net.hosts
            .iter()
            .chain(&net.ip_nodes)
            .map(|(n, i)| (n.clone(), *i))
            .chain(net.switches.iter().map(|(n, i, _)| (n.clone(), *i)))
            .find(|(_, i)| *i == id)
            .map_or(format!("node {}", id.0), |(n, _)| n)
    };
    // Every cell a port accepted is delivered, lost, or still on its
    // way (waiting for its line or on the wire): the engine's count.
    let mut on_way = 0u64;
    for ((node, port), c) in net.sim.links() {
        let q = net.sim.queued(node, port).unwrap_or(0);
        s += &dir_text(&format!("{}:{port}", name(node)), &c, q);
        let settled = c.overflow + c.lost + c.delivered;
        balanced &= settled <= c.offered;
        on_way += c.offered.saturating_sub(settled);
    }
    balanced &= on_way == net.sim.in_flight();
    s += &format!(
        "cells still on their way at the end: {on_way} (the engine counts {}); {}\n",
        net.sim.in_flight(),
        if balanced {
            "every link's cells reconcile"
        } else {
            "THE LINKS' CELLS DO NOT RECONCILE"
        }
    );
    let mut rows = Vec::new();
    for (n, id) in [("h1", h1), ("h2", h2)] {
        if let Some(node) = net.sim.node::<IpNode>(id) {
            rows.push(crate::run::ip_row(n, node));
        }
    }
    s += &crate::run::ip_text(&rows);
    for (n, id) in [("h1", h1), ("h2", h2)] {
        if let Some(c) = net.sim.device_counters(id) {
            s += &format!(
                "TUN of {n}: {} packets read, {} written, {} refused, {} errors\n",
                c.from_device, c.to_device, c.device_full, c.errors
            );
        }
    }
    let late = crate::lateness::of_network(
        &net,
        &wall,
        None,
        "the figure is then the most this machine's free cores carry",
    );
    s += &crate::lateness::text(&late);
    Ok((r, s, balanced, cpu_per_gb))
}

/// Through Aurora as three `aurora node` processes.
fn aurora_processes(o: &Opts, tag: &str) -> Result<(Iperf, String, bool, Option<f64>), String> {
    let (a, b) = (
        Netns::new(format!("{tag}-a"))?,
        Netns::new(format!("{tag}-b"))?,
    );
    let path = std::env::temp_dir().join(format!("aurora-bench-{tag}.toml"));
    std::fs::write(&path, topology(o, tag)).map_err(|e| e.to_string())?;
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _file = Remove(path.clone());
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let exe = exe.to_str().ok_or("the executable's path is not UTF-8")?;
    let node = |ns: Option<&Netns>, name: &str| {
        let mut c = match ns {
            Some(n) => n.cmd(exe),
            None => Command::new(exe),
        };
        c.arg("node")
            .arg(&path)
            .args(["--name", name, "--duration", "600s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Proc::spawn(&mut c)
    };
    let mut procs = Vec::new();
    if !o.direct {
        procs.push(("sw", node(None, "sw")?));
    }
    procs.push(("h1", node(Some(&a), "h1")?));
    procs.push(("h2", node(Some(&b), "h2")?));
    wait_for_ping(&a, "10.1.0.2", PING_WITHIN, &mut || {
        for (n, p) in procs.iter_mut() {
            if let Some(st) = p.stopped() {
                return Err(format!(
                    "aurora node {n} stopped ({st}) before the network came up"
                ));
            }
        }
        Ok(())
    })?;
    let r = iperf(&a, &b, "10.1.0.2", o.secs)?;
    let mut s = String::new();
    for (n, p) in procs.drain(..) {
        let out = p.interrupt()?;
        s += &format!(
            "--- aurora node {n} ---\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    Ok((r, s, true, None))
}

/// Runs the bench, printing as it goes; returns the rounds.
pub fn run(o: &Opts) -> Result<Vec<Round>, String> {
    crate::netns::preflight(
        "aurora bench iperf",
        "makes network namespaces, a veth pair and TUN devices",
        &["ip", "iperf3", "ping"],
    )?;
    crate::netns::catch_signals();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "aurora bench iperf: iperf3 TCP for {} s, a veth pair then Aurora ({}: {}, {} links, MTU {}, {} cells per buffer), {} round{}",
        o.secs,
        if o.processes {
            "aurora node processes, shared-memory rings"
        } else {
            "one process"
        },
        if o.direct { "h1 -> h2" } else { "h1 -> sw -> h2" },
        o.rate,
        o.mtu,
        o.buffer,
        o.rounds,
        if o.rounds == 1 { "" } else { "s" }
    );
    println!(
        "{} cores of {}; load average before: {}",
        cores,
        cpu(),
        loadavg()
    );
    let tag = format!("bi{}", std::process::id() % 100_000);
    let mut rounds = Vec::new();
    for i in 0..o.rounds {
        interrupted()?;
        let veth = veth_round(&tag, o.secs)?;
        interrupted()?;
        let (aurora, report, balanced, cpu_per_gb) = if o.processes {
            aurora_processes(o, &tag)?
        } else {
            aurora_here(o, &tag)?
        };
        println!(
            "round {}: veth {:.0} Mb/s ({} retransmits), Aurora {:.0} Mb/s ({} retransmits), Aurora / veth {:.3}{}",
            i + 1,
            veth.bps / 1e6,
            veth.retransmits,
            aurora.bps / 1e6,
            aurora.retransmits,
            aurora.bps / veth.bps.max(1.0),
            cpu_per_gb.map_or(String::new(), |c| format!(
                "; engine thread {c:.3} CPU s per GB"
            ))
        );
        rounds.push(Round {
            veth,
            aurora,
            report,
            balanced,
            cpu_per_gb,
        });
    }
    Ok(rounds)
}

/// The closing summary and the last round's counters.
pub fn summary(rounds: &[Round]) -> String {
    let mut ratios: Vec<f64> = rounds
        .iter()
        .map(|r| r.aurora.bps / r.veth.bps.max(1.0))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let mut s = String::new();
    if let Some(last) = rounds.last() {
        s += &format!("\nAurora's counters, last round:\n{}", last.report);
        if !last.balanced {
            s += "THE CELL BOOKS DO NOT BALANCE\n";
        }
    }
    let mut cpu: Vec<f64> = rounds.iter().filter_map(|r| r.cpu_per_gb).collect();
    cpu.sort_by(f64::total_cmp);
    if let Some(m) = cpu.get(cpu.len() / 2) {
        s += &format!("Aurora's engine thread: median {m:.3} CPU s per GB of TCP payload\n");
    }
    if let (Some(lo), Some(hi)) = (ratios.first(), ratios.last()) {
        s += &format!(
            "Aurora / veth: median {:.3} (range {lo:.3} to {hi:.3} over {} round{})\n",
            ratios[ratios.len() / 2],
            ratios.len(),
            if ratios.len() == 1 { "" } else { "s" }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topology_gets_rate_mtu_buffer_and_unique_rings() {
        let o = Opts {
            secs: 1,
            rate: "oc768".into(),
            mtu: 65000,
            buffer: 9000,
            rounds: 1,
            processes: false,
            direct: false,
        };
        let t = topology(&o, "tg");
        assert!(!t.contains("oc12"));
        assert_eq!(t.matches("rate = \"oc768\"\nbuffer = 9000").count(), 2);
        assert_eq!(t.matches("mtu = 65000").count(), 2);
        assert_eq!(t.matches("shm = \"aurora-tg-").count(), 2);
        let bp = aurora_topo::compile(&t)
            .map_err(|p| format!("{p:?}"))
            .unwrap();
        assert_eq!(bp.tuns.len(), 2);
        assert!(bp.tuns.iter().all(|(_, t)| t.mtu == 65000));
        let t = topology(&Opts { direct: true, ..o }, "tg");
        let bp = aurora_topo::compile(&t)
            .map_err(|p| format!("{p:?}"))
            .unwrap();
        assert_eq!(
            (bp.tuns.len(), bp.switches.len(), bp.links.len()),
            (2, 0, 1)
        );
        assert!(t.contains("rate = \"oc768\"\nbuffer = 9000"), "{t}");
    }
}
