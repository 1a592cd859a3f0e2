//! The control socket of a running `aurora node` (`--control PATH`) and
//! the `aurora vc open|close|list` commands that talk to it.
//!
//! The socket is a Unix domain stream socket. The protocol is JSON lines:
//! one request per line (at most [`MAX_REQUEST`] bytes), one answer line
//! back for each, on as many requests per connection as the client likes.
//! Requests:
//!
//! ```text
//! {"op":"open","host":"a","to":"b","sdu":1000,"count":100,"interval_ns":1000000,
//!  "close_after_ns":null,"refresh_ns":1000000000}
//! {"op":"close","host":"a","id":"a/1"}
//! {"op":"list","host":"a"}
//! ```
//!
//! `host` may be left out when the process holds one signalling host;
//! every field of `open` but `to` has a default (1000, 0, 1 ms, never,
//! 1 s). Answers: `{"ok":true,"id":"a/1"}` for an open or close taken on,
//! `{"ok":true,"host":"a","vcs":[...],"received":[...]}` for a list, and
//! `{"ok":false,"error":"one sentence"}` for anything refused. An open or
//! close is answered as soon as the host has begun it; `aurora vc` then
//! lists until the VC is open (or closed) or has failed.
//!
//! A listener thread accepts connections, each served by a thread of its
//! own (at most [`MAX_CONNECTIONS`] at once), which hands each request to
//! the host's inbox ([`aurora_signal::control`]) and waits for the answer
//! up to [`ANSWER_TIMEOUT`].

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use aurora_signal::control::{parse_request, Answer, ControlHandle, VcStatus};
use aurora_time::Duration;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Bytes a request line may hold at most.
pub use aurora_signal::control::MAX_REQUEST;

/// Bytes an answer line may hold at most (as the client reads it).
const MAX_ANSWER: usize = 16 << 20;

/// Connections served at once at most; more are told so and closed.
pub const MAX_CONNECTIONS: usize = 16;

/// How long a connection's thread waits for the host to answer.
pub const ANSWER_TIMEOUT: StdDuration = StdDuration::from_secs(5);

/// How long a connection may sit idle before it is closed.
const IDLE: StdDuration = StdDuration::from_secs(60);

/// A VC in a list.
#[derive(Debug, Serialize, Deserialize)]
pub struct VcRow {
    /// Its id.
    pub id: String,
    /// Its destination.
    pub to: String,
    /// waiting, opening, open, closing, closed or failed.
    pub state: String,
    /// The relays it crosses, nearest first.
    pub relays: Vec<String>,
    /// Its VCI on each segment.
    pub vcis: Vec<u16>,
    /// Its events.
    pub events: Vec<crate::signal_report::EventRow>,
    /// PDUs sent.
    pub sent: u64,
    /// Its flow number.
    pub flow: u16,
}

/// A flow that arrived, in a list.
#[derive(Debug, Serialize, Deserialize)]
pub struct ArrivalRow {
    /// The flow number.
    pub flow: u16,
    /// The VCI it came on.
    pub vci: u16,
    /// PDUs delivered intact.
    pub delivered: u64,
    /// PDUs missing from the sequence.
    pub missing: u64,
    /// PDUs damaged or out of order.
    pub corrupted: u64,
}

fn vc_row(v: &VcStatus) -> VcRow {
    VcRow {
        id: v.id.clone(),
        to: v.to.clone(),
        state: v.state.name().into(),
        relays: v.relays.clone(),
        vcis: v.vcis.clone(),
        events: v
            .events
            .iter()
            .map(crate::signal_report::event_row)
            .collect(),
        sent: v.sent,
        flow: v.flow,
    }
}

/// The listening socket; removed when dropped.
pub struct ControlServer {
    path: PathBuf,
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        std::fs::remove_file(&self.path).ok();
    }
}

/// Listens on `path` for requests to the signalling hosts among `nodes`
/// (name and id in `engine`), and says so on stderr after `who`. Each such
/// host is asked to read its inbox from now on. A socket left at `path` by
/// a process that ended is replaced; any other file there is an error.
pub fn serve<F: aurora_net::Frame>(
    engine: &mut aurora_engine::Engine<F>,
    nodes: Vec<(String, aurora_engine::NodeId)>,
    path: &Path,
    who: &str,
) -> Result<ControlServer, String> {
    let mut hosts = Vec::new();
    for (name, id) in nodes {
        if let Some(h) = engine.node_mut::<aurora_signal::host::SignalHost>(id) {
            hosts.push((name, h.control_handle()));
            // It now asks to be polled every INBOX_POLL.
            engine.touch(id);
        }
    }
    let server = listen(path, hosts)?;
    eprintln!("{who}: control socket {}", path.display());
    Ok(server)
}

/// Listens on `path` for requests to `hosts` (name and inbox handle).
fn listen(path: &Path, hosts: Vec<(String, ControlHandle)>) -> Result<ControlServer, String> {
    if hosts.is_empty() {
        return Err(format!(
            "--control {}: none of the process's nodes is a signalling host ([signal] hosts or an [[app]] end)",
            path.display()
        ));
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        let live = m.file_type().is_socket() && UnixStream::connect(path).is_ok();
        if !m.file_type().is_socket() || live {
            return Err(format!(
                "--control {}: {} is there already",
                path.display(),
                if live {
                    "a live control socket"
                } else {
                    "a file that is not a socket"
                }
            ));
        }
        std::fs::remove_file(path).map_err(|e| format!("--control {}: {e}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).map_err(|e| format!("--control {}: {e}", path.display()))?;
    let hosts = Arc::new(hosts);
    let live = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else {
                    // Out of descriptors, say: wait rather than spin.
                    std::thread::sleep(StdDuration::from_millis(50));
                    continue;
                };
                if live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    live.fetch_sub(1, Ordering::SeqCst);
                    let _ = writeln!(
                        conn,
                        "{}",
                        refusal(&format!(
                            "the node serves {MAX_CONNECTIONS} connections already; try again"
                        ))
                    );
                    continue;
                }
                let (hosts, done) = (hosts.clone(), live.clone());
                let spawned = std::thread::Builder::new()
                    .name("control-conn".into())
                    .spawn(move || {
                        serve_connection(conn, &hosts);
                        done.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    // The thread never ran, so its count is given back here.
                    live.fetch_sub(1, Ordering::SeqCst);
                }
            }
        })
        .map_err(|e| format!("--control: cannot start the listener: {e}"))?;
    Ok(ControlServer {
        path: path.to_path_buf(),
    })
}

fn refusal(why: &str) -> Value {
    json!({"ok": false, "error": why})
}

/// Reads one line of at most `max` bytes (without its newline); `None`
/// at the end of the stream, an error for a longer line or bad UTF-8.
fn read_line(r: &mut impl BufRead, max: usize) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    r.take(max as u64 + 1).read_until(b'\n', &mut buf)?;
    if buf.is_empty() {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a line longer than {max} bytes"),
        ));
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "a line not in UTF-8"))
}

/// Answers the requests of one connection until it closes, idles too long
/// or sends a line too long to read.
fn serve_connection(conn: UnixStream, hosts: &[(String, ControlHandle)]) {
    let _ = conn.set_read_timeout(Some(IDLE));
    let _ = conn.set_write_timeout(Some(IDLE));
    let Ok(mut w) = conn.try_clone() else { return };
    let mut r = BufReader::new(conn);
    loop {
        let (answer, last) = match read_line(&mut r, MAX_REQUEST) {
            Ok(None) => return,
            Ok(Some(line)) if line.trim().is_empty() => continue,
            Ok(Some(line)) => (answer(&line, hosts), false),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                (refusal(&format!("the request is {e}")), true)
            }
            Err(_) => return,
        };
        if writeln!(w, "{answer}").is_err() || last {
            return;
        }
    }
}

/// The answer to request `line`.
fn answer(line: &str, hosts: &[(String, ControlHandle)]) -> Value {
    let (host, request) = match parse_request(line) {
        Ok(r) => r,
        Err(e) => return refusal(&e),
    };
    let names = || {
        hosts
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let found = match &host {
        None if hosts.len() == 1 => hosts.first(),
        None => {
            return refusal(&format!(
                "the process holds several signalling hosts ({}); name one with host",
                names()
            ))
        }
        Some(h) => hosts.iter().find(|(n, _)| n == h),
    };
    let Some((name, handle)) = found else {
        return refusal(&format!(
            "\"{}\" is not a signalling host of this process (it holds {})",
            host.unwrap_or_default()
                .chars()
                .take(64)
                .collect::<String>(),
            names()
        ));
    };
    match handle.call(request, ANSWER_TIMEOUT) {
        Answer::Opening(id) | Answer::Closing(id) => json!({"ok": true, "id": id}),
        Answer::Refused(why) => refusal(&why),
        Answer::List(vcs, arrived) => {
            let vcs: Vec<VcRow> = vcs.iter().map(vc_row).collect();
            let received: Vec<ArrivalRow> = arrived
                .iter()
                .map(|a| ArrivalRow {
                    flow: a.flow,
                    vci: a.vci,
                    delivered: a.delivered,
                    missing: a.missing,
                    corrupted: a.corrupted,
                })
                .collect();
            json!({"ok": true, "host": name, "vcs": vcs, "received": received})
        }
    }
}

/// Sends `req` to the control socket at `path`; the answer, or why there
/// is none (a refusal's sentence included).
fn call(path: &Path, req: &Value) -> Result<Value, String> {
    // A socket just made may refuse for a moment (its file appears before
    // it listens): try again for up to a second.
    let end = StdInstant::now() + StdDuration::from_secs(1);
    let conn = loop {
        match UnixStream::connect(path) {
            Ok(c) => break c,
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused && StdInstant::now() < end =>
            {
                std::thread::sleep(StdDuration::from_millis(20));
            }
            Err(e) => {
                return Err(format!(
                "cannot reach the control socket {}: {e} (is aurora node running with --control?)",
                path.display()
            ))
            }
        }
    };
    let timeout = Some(ANSWER_TIMEOUT + StdDuration::from_secs(5));
    conn.set_read_timeout(timeout).map_err(|e| e.to_string())?;
    conn.set_write_timeout(timeout).map_err(|e| e.to_string())?;
    let mut w = conn.try_clone().map_err(|e| e.to_string())?;
    writeln!(w, "{req}").map_err(|e| format!("writing to {}: {e}", path.display()))?;
    let line = read_line(&mut BufReader::new(conn), MAX_ANSWER)
        .map_err(|e| format!("reading from {}: {e}", path.display()))?
        .ok_or_else(|| format!("{} closed without answering", path.display()))?;
    let v: Value = serde_json::from_str(&line)
        .map_err(|e| format!("{} answered something not JSON: {e}", path.display()))?;
    if v["ok"] == true {
        Ok(v)
    } else {
        Err(v["error"]
            .as_str()
            .unwrap_or("the node refused without a reason")
            .to_string())
    }
}

/// The list of `host` (or the process's only host).
fn list(path: &Path, host: Option<&str>) -> Result<(String, Vec<VcRow>, Vec<ArrivalRow>), String> {
    let v = call(path, &json!({"op": "list", "host": host}))?;
    let bad = |e: serde_json::Error| format!("a list that does not read: {e}");
    let vcs = serde_json::from_value(v["vcs"].clone()).map_err(bad)?;
    let received = serde_json::from_value(v["received"].clone()).map_err(bad)?;
    Ok((v["host"].as_str().unwrap_or("").to_string(), vcs, received))
}

/// Lists until VC `id` is in a state `done` accepts (which gives the
/// outcome) or `wait` passes.
fn wait_for(
    path: &Path,
    host: Option<&str>,
    id: &str,
    wait: StdDuration,
    done: impl Fn(&VcRow) -> Option<Result<String, String>>,
) -> Result<String, String> {
    let end = StdInstant::now() + wait;
    let mut pause = StdDuration::from_millis(2);
    loop {
        let (_, vcs, _) = list(path, host)?;
        let Some(vc) = vcs.iter().find(|v| v.id == id) else {
            return Err(format!("the node no longer lists VC {id}"));
        };
        if let Some(r) = done(vc) {
            return r;
        }
        if StdInstant::now() >= end {
            return Err(format!(
                "VC {id} is still {} after {:.3} s",
                vc.state,
                wait.as_secs_f64()
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(StdDuration::from_millis(50));
    }
}

/// The last event of `kind` of `vc`.
fn last_event<'a>(vc: &'a VcRow, kind: &str) -> Option<&'a crate::signal_report::EventRow> {
    vc.events.iter().rev().find(|e| e.kind == kind)
}

/// Arguments of `aurora vc open`.
pub struct OpenArgs {
    /// The control socket.
    pub control: PathBuf,
    /// The host that opens (needed if the process holds several).
    pub host: Option<String>,
    /// The destination host.
    pub to: String,
    /// PDU bytes.
    pub sdu: usize,
    /// PDUs to send.
    pub count: u64,
    /// Time between PDUs.
    pub interval: Duration,
    /// Close by itself this long after opening.
    pub close_after: Option<Duration>,
    /// Refresh period.
    pub refresh: Duration,
    /// How long to wait for the open's outcome.
    pub wait: Duration,
}

fn std_duration(d: Duration) -> StdDuration {
    StdDuration::from_nanos(d.as_nanos().max(0) as u64)
}

fn fail(cmd: &str, why: &str) -> ExitCode {
    eprintln!("aurora vc {cmd}: {why}");
    ExitCode::FAILURE
}

/// `aurora vc open`: prints the VC's id, and once it is open its relays,
/// VCIs and set-up latency; fails with the reason if it does not open.
pub fn open(a: OpenArgs) -> ExitCode {
    let req = json!({
        "op": "open",
        "host": a.host,
        "to": a.to,
        "sdu": a.sdu,
        "count": a.count,
        "interval_ns": a.interval.as_nanos(),
        "close_after_ns": a.close_after.map(|d| d.as_nanos()),
        "refresh_ns": a.refresh.as_nanos(),
    });
    let id = match call(&a.control, &req) {
        Ok(v) => v["id"].as_str().unwrap_or("").to_string(),
        Err(e) => return fail("open", &e),
    };
    println!("{id}");
    let host = a.host.as_deref();
    let outcome = wait_for(&a.control, host, &id, std_duration(a.wait), |vc| {
        match vc.state.as_str() {
            "waiting" | "opening" => None,
            "failed" => Some(Err(last_event(vc, "open")
                .and_then(|e| e.failure.clone())
                .map_or_else(
                    || format!("VC {id} failed"),
                    |f| format!("VC {id} did not open: {f}"),
                ))),
            _ => Some(Ok(match last_event(vc, "open") {
                Some(e) => format!(
                    "VC {id} open to {} through {} on VCIs {:?}, set up in {:.1} us",
                    vc.to,
                    vc.relays.join(", "),
                    vc.vcis,
                    e.latency_us
                ),
                None => format!("VC {id} {}", vc.state),
            })),
        }
    });
    match outcome {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => fail("open", &e),
    }
}

/// `aurora vc close`: begins closing VC `id` and waits for the outcome.
pub fn close(control: &Path, host: Option<&str>, id: &str, wait: Duration) -> ExitCode {
    if let Err(e) = call(control, &json!({"op": "close", "host": host, "id": id})) {
        return fail("close", &e);
    }
    let outcome = wait_for(control, host, id, std_duration(wait), |vc| {
        match vc.state.as_str() {
            "closed" => Some(match last_event(vc, "close") {
                Some(e) if e.failure.is_some() => Err(format!(
                    "VC {id} closed, but: {}",
                    e.failure.as_deref().unwrap_or("")
                )),
                Some(e) => Ok(format!(
                    "VC {id} closed in {:.1} us; {} PDUs sent",
                    e.latency_us, vc.sent
                )),
                None => Ok(format!("VC {id} closed; {} PDUs sent", vc.sent)),
            }),
            "failed" => Some(Err(vc
                .events
                .last()
                .and_then(|e| e.failure.clone())
                .map_or_else(
                    || format!("VC {id} failed"),
                    |f| format!("VC {id} failed: {f}"),
                ))),
            _ => None,
        }
    });
    match outcome {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => fail("close", &e),
    }
}

/// `aurora vc list`: the host's VCs and what arrived at it, as text or
/// JSON.
pub fn list_cmd(control: &Path, host: Option<&str>, as_json: bool) -> ExitCode {
    let (host, vcs, received) = match list(control, host) {
        Ok(l) => l,
        Err(e) => return fail("list", &e),
    };
    if as_json {
        let v = json!({"host": host, "vcs": vcs, "received": received});
        println!(
            "{}",
            serde_json::to_string_pretty(&v).expect("a list serialises")
        );
        return ExitCode::SUCCESS;
    }
    println!("host {host}: {} VCs", vcs.len());
    for v in &vcs {
        println!(
            "{} to {}: {}, through {} on VCIs {:?}, flow {}, {} PDUs sent",
            v.id,
            v.to,
            v.state,
            if v.relays.is_empty() {
                "-".to_string()
            } else {
                v.relays.join(", ")
            },
            v.vcis,
            v.flow,
            v.sent
        );
        for e in &v.events {
            print!("{}", crate::signal_report::event_line(e));
        }
    }
    for r in &received {
        println!(
            "flow {} arrived on VCI {}: {} PDUs delivered, {} missing, {} damaged or out of order",
            r.flow, r.vci, r.delivered, r.missing, r.corrupted
        );
    }
    ExitCode::SUCCESS
}
