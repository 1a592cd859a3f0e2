//! TCP over ATM with Linux's TCP, in real time (`examples/tcp-epd-linux.toml`):
//! the congested port of `aurora experiment tcp-epd`, but the senders and
//! the sink are Linux (iperf3, Reno, one network namespace per host, each
//! behind a TUN interface) and Aurora carries their packets as cells
//! against the wall clock, with tail drop, PPD and EPD at the port. Each
//! configuration also runs in virtual time with Aurora's own TCP (Reno,
//! and NewReno, which is what Linux's Reno without SACK does on a partial
//! ACK) on the same network, so the two sit side by side.
//!
//! Linux's goodput is what iperf3's receivers counted (`-J`, the sum
//! received); Aurora's counters give the share of the line's cell slots
//! that crossed into the sink while iperf3 ran, and the run's books. The
//! engine runs in this process; its lateness is reported per run, and a
//! run in which it fell behind the wall clock is marked not faithful.
//!
//! Needs root, `ip`, `iperf3` and `ping`. The namespaces (and with them
//! the TUN interfaces) and the iperf3 processes go however a run ends:
//! Ctrl-C stops iperf3 at once and the namespaces go when the engine's
//! run (a few seconds longer than iperf3's) is over.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant as WallInstant};

use aurora_engine::{Engine, NodeId};
use aurora_time::Duration;

use super::{example, host_id, plot_categories, run, say_written, write_csv, Series};
use crate::netns::{self, run_ok, Netns, Proc};
use crate::run::{run_network, Clock, Report};

/// OC-3c's cells a second.
const CELLS_PER_SEC: f64 = 353_207.5;
/// OC-3c's cell payload rate, bits a second.
const LINE_BPS: f64 = CELLS_PER_SEC * 48.0 * 8.0;
/// The congested port's buffer, cells.
const BUFFER: i64 = 1000;
/// The host every sender sends to.
const SINK: &str = "sink";
/// The first iperf3 server's port; sender i uses this plus i.
const FIRST_PORT: u16 = 5201;
/// Time the real-time network gets to come up (TUN interfaces made,
/// InATMARP done) before iperf3 must start.
const SETUP: StdDuration = StdDuration::from_secs(3);
/// Time the engine runs on after iperf3's planned end: its handshakes
/// and the exchange of results.
const TAIL: StdDuration = StdDuration::from_secs(2);
/// How often the sink link's cells are sampled during a real-time run.
const SAMPLE: Duration = Duration::from_millis(100);

/// What to run.
#[derive(Clone, Debug)]
pub struct Opts {
    /// Senders (the first of the example's).
    pub flows: usize,
    /// Real-time runs per configuration.
    pub rounds: u32,
    /// The engine busy-waits for its next event instead of sleeping.
    pub spin: bool,
    /// The nice value of the engine's thread while it runs (others'
    /// work on the machine then delays it less), if not left as it is.
    pub nice: Option<i32>,
    /// The hosts' MTUs (each TUN interface's and IP node's); Linux's MSS
    /// is the MTU less 40.
    pub mtus: Vec<usize>,
    /// Disciplines at the port: `tail`, `ppd`, `epd`.
    pub discards: Vec<String>,
}

/// One of Aurora's own TCP runs, in virtual time.
#[derive(Clone, Copy, Debug, Default)]
struct Virtual {
    /// Goodput over the line's payload rate.
    effective: f64,
    /// Share of the sink link's cell slots used.
    line_busy: f64,
    /// Jain's index of the connections' goodputs.
    fairness: f64,
    retransmits: u64,
    timeouts: u64,
}

/// One of Linux's runs, in real time.
#[derive(Clone, Debug)]
struct Linux {
    /// iperf3's receivers' sum over the line's payload rate.
    effective: f64,
    /// Bytes iperf3's receivers got.
    bytes: u64,
    /// Share of the sink link's cell slots used while iperf3 ran (cells
    /// delivered into the sink over the time iperf3 timed).
    line_busy: f64,
    /// Jain's index of the senders' goodputs.
    fairness: f64,
    /// Segments the senders retransmitted (iperf3's count).
    retransmits: u64,
    /// Retransmission timeouts (each sender's namespace's TcpExt).
    timeouts: u64,
    /// Whether the engine kept up with the wall clock.
    faithful: bool,
    /// The latest any event ran, milliseconds.
    worst_late_ms: f64,
    /// The engine's sentence on its lateness.
    verdict: String,
    /// The report's unaccounted PDUs (0 when the books balance).
    unaccounted: u64,
    /// Cells offered to a link but neither delivered nor dropped at the
    /// end.
    in_flight: u64,
}

/// One configuration's results.
struct Row {
    discard: &'static str,
    mtu: usize,
    reno: Virtual,
    newreno: Virtual,
    linux: Vec<Linux>,
}

/// The discipline's name as the topology writes it, and as the table
/// and plot show it.
fn discipline(d: &str) -> Result<(&'static str, &'static str), String> {
    match d {
        "tail" => Ok(("tail", "tail drop")),
        "ppd" => Ok(("ppd", "PPD")),
        "epd" => Ok(("epd", "EPD")),
        other => Err(format!("discard \"{other}\" is not tail, ppd or epd")),
    }
}

fn parse(text: &str) -> Result<toml::Table, String> {
    text.parse().map_err(|e| format!("{e}"))
}

/// The `[[key]]` entries of `doc`.
fn entries<'a>(doc: &'a mut toml::Table, key: &str) -> Result<&'a mut Vec<toml::Value>, String> {
    match doc.get_mut(key) {
        Some(toml::Value::Array(a)) => Ok(a),
        _ => Err(format!("the example has no [[{key}]]")),
    }
}

fn name_of(v: &toml::Value, key: &str) -> String {
    v.get(key)
        .and_then(toml::Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Keeps the first `n` senders of `doc` (every host but the sink, in file
/// order) with their links and PVCs; returns their names.
fn keep_senders(doc: &mut toml::Table, n: usize) -> Result<Vec<String>, String> {
    let all: Vec<String> = entries(doc, "host")?
        .iter()
        .map(|h| name_of(h, "name"))
        .filter(|h| h != SINK)
        .collect();
    if n == 0 || n > all.len() {
        return Err(format!(
            "--flows {n}: the example has 1 to {} senders",
            all.len()
        ));
    }
    let gone = &all[n..];
    let node = |end: String| end.split(':').next().unwrap_or_default().to_string();
    entries(doc, "host")?.retain(|h| !gone.contains(&name_of(h, "name")));
    entries(doc, "link")?.retain(|l| {
        !gone.contains(&node(name_of(l, "a"))) && !gone.contains(&node(name_of(l, "b")))
    });
    entries(doc, "pvc")?.retain(|p| {
        p.get("path")
            .and_then(toml::Value::as_array)
            .is_none_or(|path| {
                !path
                    .iter()
                    .any(|x| gone.iter().any(|g| x.as_str() == Some(g)))
            })
    });
    Ok(all[..n].to_vec())
}

/// `doc` with `discard` at the congested port and its buffer, the EPD
/// threshold one full segment's cells below the top, and every host at
/// `mtu`.
fn configure(doc: &toml::Table, discard: &str, mtu: usize) -> Result<toml::Table, String> {
    let mut d = doc.clone();
    let mss = u32::try_from(mtu - 40).map_err(|e| e.to_string())?;
    for p in entries(&mut d, "port")? {
        let toml::Value::Table(t) = p else { continue };
        t.insert("discard".into(), discard.into());
        t.insert("buffer".into(), BUFFER.into());
        if discard == "epd" {
            let at = (BUFFER - super::tcp_epd::cells(mss)).max(1);
            t.insert("epd".into(), at.into());
        } else {
            t.remove("epd");
        }
    }
    for h in entries(&mut d, "host")? {
        if let toml::Value::Table(t) = h {
            t.insert(
                "mtu".into(),
                i64::try_from(mtu).map_err(|e| e.to_string())?.into(),
            );
        }
    }
    Ok(d)
}

/// The settings of the virtual-time experiment's connections: the first
/// `[[tcp]]` of `examples/tcp-epd.toml`.
fn tcp_template() -> Result<toml::Table, String> {
    let mut doc = parse(&example("tcp-epd.toml")?)?;
    match entries(&mut doc, "tcp")?.first() {
        Some(toml::Value::Table(t)) => Ok(t.clone()),
        _ => Err("examples/tcp-epd.toml has no [[tcp]] table".into()),
    }
}

/// The socket buffer of `template`'s connections, bytes: Linux's
/// sockets get the same (iperf3 -w).
fn socket_buffer(template: &toml::Table) -> Result<u64, String> {
    match template.get("buffer") {
        Some(toml::Value::String(s)) => aurora_topo::tcp::parse_size(s),
        Some(toml::Value::Integer(n)) => u64::try_from(*n).map_err(|e| e.to_string()),
        _ => Ok(aurora_topo::tcp::DEFAULT_BUFFER),
    }
}

/// `doc` for virtual time: no namespaces, and a connection of Aurora's
/// TCP (`variant`, the other settings as `template`'s, the MSS the MTU
/// less 40) from every sender to the sink for `secs`.
fn virtual_text(
    doc: &toml::Table,
    senders: &[String],
    template: &toml::Table,
    variant: &str,
    secs: u32,
) -> Result<String, String> {
    let mut d = doc.clone();
    for h in entries(&mut d, "host")? {
        if let toml::Value::Table(t) = h {
            t.remove("netns");
        }
    }
    let tcp: Vec<toml::Value> = senders
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut t = template.clone();
            t.remove("mss");
            t.remove("bytes");
            t.insert("name".into(), format!("t{i}").into());
            t.insert("from".into(), s.as_str().into());
            t.insert("to".into(), SINK.into());
            t.insert("variant".into(), variant.into());
            t.insert("duration".into(), format!("{secs}s").into());
            t.insert("start".into(), format!("{}ms", 10 + i).into());
            toml::Value::Table(t)
        })
        .collect();
    d.insert("tcp".into(), tcp.into());
    toml::to_string(&d).map_err(|e| e.to_string())
}

/// Cells the link into the sink delivered.
fn sink_cells(r: &Report) -> Result<u64, String> {
    let to = format!("-> {SINK}");
    r.links
        .iter()
        .find(|l| l.dir.ends_with(&to))
        .map(|l| l.delivered)
        .ok_or_else(|| "the report has no link into the sink".into())
}

/// Aurora's TCP (`variant`) on `doc` for `secs` of virtual time.
fn aurora(
    doc: &toml::Table,
    senders: &[String],
    template: &toml::Table,
    variant: &str,
    secs: u32,
) -> Result<Virtual, String> {
    let r = run(
        &virtual_text(doc, senders, template, variant, secs)?,
        f64::from(secs),
    )?;
    let tcp = r.tcp.as_ref().ok_or("the run has no TCP part")?;
    let mut v = Virtual::default();
    let mut bytes = 0u64;
    let mut each = Vec::new();
    for c in tcp.flows.iter().flat_map(|f| &f.connections) {
        if c.pattern_errors > 0 {
            return Err(format!(
                "{}: {} bytes arrived wrong",
                c.ends, c.pattern_errors
            ));
        }
        if c.role == "sink" {
            bytes += c.bytes;
            each.push(c.bytes as f64);
        } else {
            v.retransmits += c.retransmits;
            v.timeouts += c.timeouts;
        }
    }
    v.fairness = jain(&each);
    // As in tcp-epd: the sources stop at `secs`, the drain delivers the rest.
    let t = f64::from(secs) + r.drain_secs;
    v.effective = bytes as f64 * 8.0 / t / LINE_BPS;
    v.line_busy = sink_cells(&r)? as f64 / t / CELLS_PER_SEC;
    Ok(v)
}

/// Jain's fairness index of `xs`: 1 when all are equal, 1/n when one
/// has everything.
fn jain(xs: &[f64]) -> f64 {
    let (sum, squares) = xs.iter().fold((0.0, 0.0), |(s, q), x| (s + x, q + x * x));
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (xs.len() as f64 * squares)
}

/// What one sender's iperf3 reported.
#[derive(Debug, PartialEq)]
struct Iperf {
    /// The receiver's bits a second.
    bps: f64,
    /// The receiver's bytes.
    bytes: u64,
    /// The time the receiver timed, seconds.
    seconds: f64,
    /// The sender's retransmitted segments.
    retransmits: u64,
}

/// Reads iperf3's `-J` output (anything before its first `{`, such as a
/// warning, is skipped).
fn iperf_json(text: &str) -> Result<Iperf, String> {
    let at = text
        .find('{')
        .ok_or_else(|| format!("iperf3 gave no JSON: {}", text.trim()))?;
    let j: serde_json::Value = serde_json::Deserializer::from_str(&text[at..])
        .into_iter()
        .next()
        .ok_or("iperf3 gave no JSON")?
        .map_err(|e| format!("iperf3's JSON: {e}"))?;
    if let Some(e) = j["error"].as_str() {
        return Err(format!("iperf3: {e}"));
    }
    let rx = &j["end"]["sum_received"];
    Ok(Iperf {
        bps: rx["bits_per_second"]
            .as_f64()
            .ok_or("iperf3's JSON has no end.sum_received")?,
        bytes: rx["bytes"].as_u64().unwrap_or(0),
        seconds: rx["seconds"].as_f64().unwrap_or(0.0),
        retransmits: j["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
    })
}

/// Counter `key` of the `TcpExt` lines of `/proc/net/netstat`.
fn tcp_ext(netstat: &str, key: &str) -> Option<u64> {
    let mut lines = netstat.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// The sink link's delivered cells at wall time `t`, from samples taken
/// as the run went (linear between two).
fn cells_at(samples: &[(WallInstant, u64)], t: WallInstant) -> f64 {
    let after = samples.partition_point(|&(s, _)| s <= t);
    match (after.checked_sub(1).map(|i| samples[i]), samples.get(after)) {
        (Some((t0, c0)), Some(&(t1, c1))) => {
            let f = (t - t0).as_secs_f64() / (t1 - t0).as_secs_f64().max(1e-9);
            c0 as f64 + f * (c1 as f64 - c0 as f64)
        }
        (Some((_, c)), None) | (None, Some(&(_, c))) => c as f64,
        (None, None) => 0.0,
    }
}

/// What the driver thread brings back from a real-time run.
struct Driven {
    flows: Vec<Iperf>,
    timeouts: u64,
    /// When the iperf3 clients started, and when the last ended.
    from: WallInstant,
    to: WallInstant,
}

/// The calling thread's nice value, changed until this is dropped.
struct Nice {
    tid: libc::id_t,
    was: libc::c_int,
}

impl Nice {
    /// Gives the calling thread (alone: Linux takes a thread id for a
    /// process id here) nice value `n`.
    fn set(n: i32) -> Result<Nice, String> {
        // SAFETY: gettid() takes nothing and cannot fail; errno is this
        // thread's own, cleared so that a nice value of -1 is told from
        // an error; getpriority() and setpriority() take plain numbers.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            *libc::__errno_location() = 0;
            let was = libc::getpriority(libc::PRIO_PROCESS, tid);
            let err = std::io::Error::last_os_error();
            if was == -1 && err.raw_os_error() != Some(0) {
                return Err(format!("cannot read the engine thread's nice value: {err}"));
            }
            if libc::setpriority(libc::PRIO_PROCESS, tid, n) != 0 {
                return Err(format!(
                    "cannot give the engine's thread nice value {n}: {}",
                    std::io::Error::last_os_error()
                ));
            }
            Ok(Nice { tid, was })
        }
    }
}

impl Drop for Nice {
    fn drop(&mut self) {
        // SAFETY: setpriority() takes plain numbers; the thread is this
        // one, still running.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, self.tid, self.was);
        }
    }
}

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs iperf3 through the network while the engine runs it: waits until
/// every sender reaches the sink, has the sink ACK every segment, starts
/// the clients together, waits for them, and reads what they and the
/// senders' kernels counted. `t0` is when the engine was started; `done`
/// turns true when it has stopped.
fn drive(
    senders: &[&Netns],
    sink: &Netns,
    tun: &aurora_topo::TunSpec,
    (secs, window): (u32, u64),
    dir: &Path,
    t0: WallInstant,
    done: &AtomicBool,
) -> Result<Driven, String> {
    let addr = tun.addr.to_string();
    let mut alive = || {
        if done.load(Ordering::Relaxed) {
            return Err("the engine stopped before iperf3 ended".to_string());
        }
        Ok(())
    };
    for ns in senders {
        let left = SETUP.saturating_sub(t0.elapsed());
        netns::wait_for_ping(ns, &addr, left, &mut alive)
            .map_err(|e| format!("{e} (from {})", ns.0))?;
    }
    // Aurora's sinks here ACK every segment (delayed_ack = "off"); so
    // does Linux's, on a route with quickack.
    let net = u32::from(tun.addr)
        & u32::MAX
            .checked_shl(32 - u32::from(tun.prefix))
            .unwrap_or(0);
    run_ok(sink.cmd("ip").args([
        "route",
        "replace",
        &format!("{}/{}", std::net::Ipv4Addr::from(net), tun.prefix),
        "dev",
        &tun.name,
        "proto",
        "kernel",
        "scope",
        "link",
        "src",
        &addr,
        "quickack",
        "1",
    ]))?;
    let from = WallInstant::now();
    let mut clients = Vec::new();
    for (i, ns) in senders.iter().enumerate() {
        let path = dir.join(format!("iperf3-{i}.json"));
        let f = File::create(&path).map_err(|e| format!("cannot make {}: {e}", path.display()))?;
        let port = (FIRST_PORT + i as u16).to_string();
        let c = Proc::spawn(
            ns.cmd("iperf3")
                .args(["-c", &addr, "-p", &port, "-t", &secs.to_string()])
                .args(["-w", &window.to_string()])
                .args(["-C", "reno", "-J", "--connect-timeout", "2000"])
                .stdout(f)
                .stderr(Stdio::null()),
        )?;
        clients.push((c, path));
    }
    let deadline = t0 + SETUP + StdDuration::from_secs(secs.into()) + TAIL;
    loop {
        if netns::was_interrupted() {
            eprintln!(
                "aurora experiment: interrupted; iperf3 stopped, the namespaces go when the engine's run ends (within {:.0} s)",
                deadline.saturating_duration_since(WallInstant::now()).as_secs_f64() + 1.0
            );
            return Err("interrupted".into());
        }
        alive()?;
        if clients.iter_mut().all(|(c, _)| c.stopped().is_some()) {
            break;
        }
        if WallInstant::now() > deadline {
            return Err(format!(
                "iperf3 had not ended {:.0} s after it started",
                from.elapsed().as_secs_f64()
            ));
        }
        std::thread::sleep(StdDuration::from_millis(20));
    }
    let to = WallInstant::now();
    let mut flows = Vec::new();
    for (i, (_, path)) in clients.iter().enumerate() {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        flows.push(iperf_json(&text).map_err(|e| format!("sender {i}: {e}"))?);
    }
    let mut timeouts = 0;
    for ns in senders {
        let netstat = run_ok(ns.cmd("cat").arg("/proc/net/netstat"))?;
        timeouts += tcp_ext(&netstat, "TCPTimeouts")
            .ok_or_else(|| format!("no TcpExt TCPTimeouts in {}'s /proc/net/netstat", ns.0))?;
    }
    Ok(Driven {
        flows,
        timeouts,
        from,
        to,
    })
}

/// Linux's TCP through `doc` in real time: a namespace per host, iperf3
/// servers in the sink's, a client in each sender's, for `secs`, with
/// socket buffers of `window` bytes; the engine's thread at nice value
/// `nice` if given.
fn linux(
    doc: &toml::Table,
    senders: &[String],
    tag: &str,
    (secs, window): (u32, u64),
    (spin, nice): (bool, Option<i32>),
) -> Result<Linux, String> {
    let mut doc = doc.clone();
    let mut spaces = Vec::new();
    for h in entries(&mut doc, "host")? {
        let toml::Value::Table(t) = h else { continue };
        let name = t
            .get("name")
            .and_then(toml::Value::as_str)
            .unwrap_or_default()
            .to_string();
        let ns = Netns::new(format!("{tag}-{name}"))?;
        // Aurora's connections here offer no SACK; nor do Linux's.
        run_ok(ns.cmd("sysctl").args(["-qw", "net.ipv4.tcp_sack=0"]))?;
        t.insert("netns".into(), ns.0.as_str().into());
        spaces.push((name, ns));
    }
    let text = toml::to_string(&doc).map_err(|e| e.to_string())?;
    let net = aurora_topo::load(&text, 1).map_err(|p| p.to_string())?;
    let ns = |n: &str| {
        spaces
            .iter()
            .find(|(h, _)| h == n)
            .map(|(_, ns)| ns)
            .ok_or_else(|| format!("no namespace for {n}"))
    };
    let sink = ns(SINK)?;
    let sender_ns: Vec<&Netns> = senders.iter().map(|s| ns(s)).collect::<Result<_, _>>()?;
    let sink_id = host_id(&net, SINK)?;
    let tun = net
        .tuns
        .iter()
        .find(|(id, _)| *id == sink_id)
        .map(|(_, t)| t.clone())
        .ok_or("the sink has no TUN interface")?;
    // The switch's end of the link into the sink.
    let (sw, port): (NodeId, _) = net
        .links
        .iter()
        .find_map(|(a, b)| match (a.0 == SINK, b.0 == SINK) {
            (true, _) => Some((b.1, b.2)),
            (_, true) => Some((a.1, a.2)),
            _ => None,
        })
        .ok_or("no link into the sink")?;
    let mut servers = Vec::new();
    for i in 0..senders.len() {
        servers.push(Proc::spawn(
            sink.cmd("iperf3")
                .args(["-s", "-1", "-p", &(FIRST_PORT + i as u16).to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )?);
    }
    let dir = TempDir(std::env::temp_dir().join(format!("aurora-{tag}")));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).map_err(|e| format!("cannot make {}: {e}", dir.0.display()))?;
    let span = SETUP + StdDuration::from_secs(secs.into()) + TAIL;
    let done = AtomicBool::new(false);
    let mut samples: Vec<(WallInstant, u64)> = Vec::new();
    let t0 = WallInstant::now();
    let (report, driven) = std::thread::scope(|s| {
        let driver = s.spawn(|| drive(&sender_ns, sink, &tun, (secs, window), &dir.0, t0, &done));
        // The engine runs on this thread; the driver, made before, keeps
        // the ordinary nice value, and so does iperf3.
        let nice = match nice.map(Nice::set).transpose() {
            Ok(n) => n,
            Err(e) => {
                done.store(true, Ordering::Relaxed);
                let _ = driver.join();
                return (Err(e), Err("not run".to_string()));
            }
        };
        let mut watch = |e: &Engine| {
            if let Some(c) = e.link(sw, port) {
                samples.push((WallInstant::now(), c.delivered));
            }
        };
        let r = run_network(
            net,
            Duration::from_nanos(span.as_nanos() as i64),
            Duration::from_millis(100),
            (None, None),
            Clock::Wall { spin },
            Some((SAMPLE, &mut watch)),
        );
        drop(nice);
        done.store(true, Ordering::Relaxed);
        let d = driver
            .join()
            .unwrap_or_else(|_| Err("the iperf3 driver thread panicked".into()));
        (r, d)
    });
    let r = report?;
    let d = driven?;
    drop(servers);
    if let Some(why) = r.imbalance() {
        return Err(why);
    }
    let mut in_flight = 0;
    for l in &r.links {
        let settled = l.delivered + l.overflow + l.lost;
        if settled > l.offered {
            return Err(format!(
                "link {} settled {settled} cells of {} offered: the books do not balance",
                l.dir, l.offered
            ));
        }
        in_flight += l.offered - settled;
    }
    let late = r
        .lateness
        .as_ref()
        .ok_or("the real-time run kept no lateness")?;
    let bps: f64 = d.flows.iter().map(|f| f.bps).sum();
    // Every data cell crossed while the clients ran; iperf3 timed the
    // data alone (not its handshakes and results), so that is the time.
    let cells = cells_at(&samples, d.to) - cells_at(&samples, d.from);
    let timed = d.flows.iter().map(|f| f.seconds).fold(0.0, f64::max);
    Ok(Linux {
        effective: bps / LINE_BPS,
        bytes: d.flows.iter().map(|f| f.bytes).sum(),
        line_busy: cells / timed.max(1e-9) / CELLS_PER_SEC,
        fairness: jain(&d.flows.iter().map(|f| f.bps).collect::<Vec<_>>()),
        retransmits: d.flows.iter().map(|f| f.retransmits).sum(),
        timeouts: d.timeouts,
        faithful: late.faithful,
        worst_late_ms: late
            .nodes
            .iter()
            .map(|n| n.events_us[2])
            .fold(0.0, f64::max)
            / 1e3,
        verdict: late.sentence.clone(),
        unaccounted: r.unaccounted,
        in_flight,
    })
}

/// The median of `xs` (0 for none).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => 0.0,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// The median effective throughput of `r`'s real-time runs in which the
/// engine kept up with the wall clock (none if it kept up in none).
fn faithful_median(r: &Row) -> Option<f64> {
    let xs: Vec<f64> = r
        .linux
        .iter()
        .filter(|l| l.faithful)
        .map(|l| l.effective)
        .collect();
    (!xs.is_empty()).then(|| median(xs))
}

/// Runs the experiment, iperf3 for `secs` (rounded up to whole seconds)
/// per real-time run, and writes its table and plot to `out`.
pub fn main(out: &Path, secs: f64, o: &Opts) -> Result<(), String> {
    netns::preflight(
        "aurora experiment tcp-epd-linux",
        "makes a network namespace per host and TUN interfaces in them",
        &["ip", "iperf3", "ping", "sysctl", "cat"],
    )?;
    let discards: Vec<(&str, &str)> = o
        .discards
        .iter()
        .map(|d| discipline(d))
        .collect::<Result<_, _>>()?;
    if o.mtus.is_empty() || discards.is_empty() || o.rounds == 0 {
        return Err("nothing to run: give at least one MTU, discard and round".into());
    }
    netns::catch_signals();
    let secs = secs.ceil().max(1.0) as u32;
    let mut doc = parse(&example("tcp-epd-linux.toml")?)?;
    let senders = keep_senders(&mut doc, o.flows)?;
    let template = tcp_template()?;
    let window = socket_buffer(&template)?;
    let tag = format!("te{}", std::process::id());
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "aurora experiment tcp-epd-linux: {} Linux Reno senders (iperf3 -C reno -w {window}, no \
         SACK, ACKs not delayed) into one OC-3c port of {BUFFER} cells, Aurora in real time ({}), iperf3 for {secs} s \
         per run; beside them Aurora's Reno and NewReno in {secs} s of virtual time. Effective \
         throughput = goodput / the line's cell payload rate (135.6 Mb/s)",
        senders.len(),
        match (o.spin, o.nice) {
            (true, None) => "spinning".to_string(),
            (false, None) => "sleeping between events".to_string(),
            (true, Some(n)) => format!("spinning, its thread at nice {n}"),
            (false, Some(n)) => format!("sleeping between events, its thread at nice {n}"),
        },
    );
    println!(
        "{cores} cores of {}; load average before: {}",
        netns::cpu(),
        netns::loadavg()
    );
    println!(
        "{:<7} {:>4} {:>2} | {:>6} {:>5} {:>5} {:>6} {:>4} {:>7} | {:>6} {:>5} {:>6} {:>4} | {:>7} {:>5} {:>6} {:>4}",
        "discard",
        "mtu",
        "#",
        "linux",
        "busy",
        "fair",
        "resent",
        "RTOs",
        "late ms",
        "reno",
        "fair",
        "resent",
        "RTOs",
        "newreno",
        "fair",
        "resent",
        "RTOs"
    );
    let mut rows = Vec::new();
    for &mtu in &o.mtus {
        for &(discard, _) in &discards {
            netns::interrupted()?;
            let v = configure(&doc, discard, mtu)?;
            let reno = aurora(&v, &senders, &template, "reno", secs)?;
            let newreno = aurora(&v, &senders, &template, "newreno", secs)?;
            let mut runs = Vec::new();
            for round in 1..=o.rounds {
                netns::interrupted()?;
                let l = linux(&v, &senders, &tag, (secs, window), (o.spin, o.nice))?;
                println!(
                    "{:<7} {:>4} {:>2} | {:>6.3} {:>5.2} {:>5.2} {:>6} {:>4} {:>7.1} | {:>6.3} {:>5.2} {:>6} {:>4} | {:>7.3} {:>5.2} {:>6} {:>4}{}",
                    discard,
                    mtu,
                    round,
                    l.effective,
                    l.line_busy,
                    l.fairness,
                    l.retransmits,
                    l.timeouts,
                    l.worst_late_ms,
                    reno.effective,
                    reno.fairness,
                    reno.retransmits,
                    reno.timeouts,
                    newreno.effective,
                    newreno.fairness,
                    newreno.retransmits,
                    newreno.timeouts,
                    if l.faithful { "" } else { "  NOT FAITHFUL" }
                );
                if !l.faithful {
                    println!("          {}", l.verdict);
                }
                runs.push(l);
            }
            rows.push(Row {
                discard,
                mtu,
                reno,
                newreno,
                linux: runs,
            });
        }
    }
    let unfaithful = rows
        .iter()
        .flat_map(|r| &r.linux)
        .filter(|l| !l.faithful)
        .count();
    let total = rows.iter().map(|r| r.linux.len()).sum::<usize>();
    println!(
        "\nLinux's goodput is iperf3's (-J, the receivers' sum); busy is the share of the sink \
         link's cell slots Aurora delivered while iperf3 ran; fair is Jain's index of the senders' \
         goodputs (1: equal shares; 1/n: one sender has it all); RTOs are the senders' \
         TCPTimeouts (Linux) or timer expiries (Aurora). {}",
        if unfaithful == 0 {
            format!("The engine kept up with the wall clock in all {total} real-time runs.")
        } else {
            format!(
                "In {unfaithful} of {total} real-time runs the engine fell behind the wall clock \
                 (NOT FAITHFUL above)."
            )
        }
    );
    if o.rounds > 1 {
        println!(
            "\n{:<7} {:>4} | {:>14} {:>8} {:>10} {:>5} | {:>6} {:>5} | {:>7} {:>5}",
            "discard",
            "mtu",
            "linux faithful",
            "of runs",
            "linux all",
            "fair",
            "reno",
            "fair",
            "newreno",
            "fair"
        );
        for r in &rows {
            println!(
                "{:<7} {:>4} | {:>14} {:>8} {:>10.3} {:>5.2} | {:>6.3} {:>5.2} | {:>7.3} {:>5.2}",
                r.discard,
                r.mtu,
                faithful_median(r).map_or("-".into(), |m| format!("{m:.3}")),
                format!(
                    "{}/{}",
                    r.linux.iter().filter(|l| l.faithful).count(),
                    r.linux.len()
                ),
                median(r.linux.iter().map(|l| l.effective).collect()),
                median(r.linux.iter().map(|l| l.fairness).collect()),
                r.reno.effective,
                r.reno.fairness,
                r.newreno.effective,
                r.newreno.fairness,
            );
        }
        println!(
            "(medians of the real-time runs: of those the engine kept up in, and of all; fair: \
             the median of all)"
        );
    }
    let mut csv = vec![[
        "discard",
        "mtu",
        "mss",
        "buffer_cells",
        "flows",
        "secs",
        "round",
        "linux_effective",
        "linux_bytes",
        "linux_line_busy",
        "linux_fairness",
        "linux_retransmits",
        "linux_timeouts",
        "linux_worst_late_ms",
        "linux_faithful",
        "linux_unaccounted",
        "linux_cells_in_flight_at_end",
        "reno_effective",
        "reno_line_busy",
        "reno_fairness",
        "reno_retransmits",
        "reno_timeouts",
        "newreno_effective",
        "newreno_line_busy",
        "newreno_fairness",
        "newreno_retransmits",
        "newreno_timeouts",
    ]
    .map(String::from)
    .to_vec()];
    for r in &rows {
        for (i, l) in r.linux.iter().enumerate() {
            csv.push(vec![
                r.discard.into(),
                r.mtu.to_string(),
                (r.mtu - 40).to_string(),
                BUFFER.to_string(),
                senders.len().to_string(),
                secs.to_string(),
                (i + 1).to_string(),
                format!("{:.4}", l.effective),
                l.bytes.to_string(),
                format!("{:.4}", l.line_busy),
                format!("{:.4}", l.fairness),
                l.retransmits.to_string(),
                l.timeouts.to_string(),
                format!("{:.2}", l.worst_late_ms),
                l.faithful.to_string(),
                l.unaccounted.to_string(),
                l.in_flight.to_string(),
                format!("{:.4}", r.reno.effective),
                format!("{:.4}", r.reno.line_busy),
                format!("{:.4}", r.reno.fairness),
                r.reno.retransmits.to_string(),
                r.reno.timeouts.to_string(),
                format!("{:.4}", r.newreno.effective),
                format!("{:.4}", r.newreno.line_busy),
                format!("{:.4}", r.newreno.fairness),
                r.newreno.retransmits.to_string(),
                r.newreno.timeouts.to_string(),
            ]);
        }
    }
    let mut files = vec![write_csv(out, "tcp-epd-linux", &csv)?];
    let names: Vec<String> = discards
        .iter()
        .map(|(_, shown)| (*shown).to_string())
        .collect();
    let x = |d: &str| discards.iter().position(|(n, _)| *n == d).unwrap_or(0) as f64;
    // A plot per MTU: Linux's runs (each, and the median of those the
    // engine kept up in) against Aurora's two variants.
    for &mtu in &o.mtus {
        let these: Vec<&Row> = rows.iter().filter(|r| r.mtu == mtu).collect();
        let line = |name: &str, pick: &dyn Fn(&Row) -> Option<f64>, color: usize| Series {
            name: name.into(),
            points: these
                .iter()
                .filter_map(|r| pick(r).map(|y| (x(r.discard), y)))
                .collect(),
            line: true,
            color,
        };
        let mut series = vec![
            line(
                "Linux Reno, real time: median of the faithful runs",
                &faithful_median,
                0,
            ),
            line("Aurora Reno, virtual time", &|r| Some(r.reno.effective), 1),
            line(
                "Aurora NewReno, virtual time",
                &|r| Some(r.newreno.effective),
                2,
            ),
        ];
        for faithful in [true, false] {
            let points: Vec<(f64, f64)> = these
                .iter()
                .flat_map(|r| {
                    r.linux
                        .iter()
                        .filter(move |l| l.faithful == faithful)
                        .map(move |l| (x(r.discard), l.effective))
                })
                .collect();
            if !points.is_empty() {
                series.push(Series {
                    name: if faithful {
                        "Linux, each faithful run".into()
                    } else {
                        "Linux, each run the engine fell behind in (NOT FAITHFUL)".into()
                    },
                    points,
                    line: false,
                    color: if faithful { 0 } else { super::GREY },
                });
            }
        }
        files.extend(plot_categories(
            out,
            &format!("tcp-epd-linux-mtu{mtu}"),
            &format!(
                "{} Reno senders, MSS {}, one OC-3c port of {BUFFER} cells",
                senders.len(),
                mtu - 40
            ),
            ("discard at the port", "effective throughput"),
            &names,
            &series,
        )?);
    }
    say_written(&files);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_json_gives_the_receivers_sum_after_a_warning() {
        let text = "warning: something\n{\"end\": {\"sum_received\": {\"bits_per_second\": 1.5e7, \
                    \"bytes\": 1000, \"seconds\": 2.0}, \"sum_sent\": {\"retransmits\": 7}}}\n";
        assert_eq!(
            iperf_json(text).unwrap(),
            Iperf {
                bps: 1.5e7,
                bytes: 1000,
                seconds: 2.0,
                retransmits: 7
            }
        );
        let e = iperf_json("{\"error\": \"unable to connect to server\"}").unwrap_err();
        assert!(e.contains("unable to connect"), "{e}");
        assert!(iperf_json("").is_err());
    }

    #[test]
    fn jains_index_runs_from_one_over_n_to_one() {
        assert!((jain(&[5.0, 5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[8.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn tcp_ext_reads_a_counter_by_name() {
        let t = "TcpExt: SyncookiesSent TCPTimeouts X\nTcpExt: 0 12 3\nIpExt: A\nIpExt: 1\n";
        assert_eq!(tcp_ext(t, "TCPTimeouts"), Some(12));
        assert_eq!(tcp_ext(t, "Nope"), None);
    }

    #[test]
    fn cells_between_samples_are_interpolated() {
        let t = WallInstant::now();
        let s = |ms: u64, c: u64| (t + StdDuration::from_millis(ms), c);
        let samples = [s(0, 0), s(100, 1000), s(200, 3000)];
        let at = |ms: u64| cells_at(&samples, t + StdDuration::from_millis(ms));
        assert!((at(50) - 500.0).abs() < 1e-6);
        assert!((at(150) - 2000.0).abs() < 1e-6);
        assert_eq!(at(500), 3000.0);
    }

    #[test]
    fn the_example_cut_to_two_senders_compiles_and_runs_in_virtual_time() {
        let mut doc = parse(&example("tcp-epd-linux.toml").unwrap()).unwrap();
        let senders = keep_senders(&mut doc, 2).unwrap();
        assert_eq!(senders, ["h0", "h1"]);
        assert!(keep_senders(&mut doc.clone(), 0).is_err());
        assert!(keep_senders(&mut doc.clone(), 3).is_err());
        let v = configure(&doc, "epd", 9180).unwrap();
        let text = toml::to_string(&v).unwrap();
        assert!(text.contains("epd = 808"), "{text}");
        let bp = aurora_topo::compile(&text)
            .map_err(|p| format!("{p:?}"))
            .unwrap();
        assert_eq!(bp.tuns.len(), 3);
        assert!(bp
            .tuns
            .iter()
            .all(|(_, t)| t.mtu == 9180 && t.netns.is_some()));
        let template = tcp_template().unwrap();
        assert_eq!(socket_buffer(&template).unwrap(), 256 * 1024);
        let a = aurora(&v, &senders, &template, "reno", 1).unwrap();
        assert!(a.effective > 0.3 && a.effective < 1.0, "{a:?}");
        assert!(a.line_busy >= a.effective, "{a:?}");
    }
}
