//! What the commands that run Linux programs in network namespaces share
//! (`aurora bench iperf`, `aurora experiment tcp-epd-linux`): a namespace
//! that is deleted when its guard goes, a child process that is killed
//! when its guard goes, a check for root and the tools before anything is
//! touched, and a flag set by Ctrl-C (or SIGTERM) so that a run stops at
//! its next check and its guards clean up, rather than the process dying
//! with namespaces left behind.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT or SIGTERM once [`catch_signals`] has run.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// From now on SIGINT and SIGTERM only set a flag ([`interrupted`] and
/// [`was_interrupted`] read it): the run winds down and its guards run.
pub(crate) fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal
        // safe); `signal` gets a function of the type it expects.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// True once SIGINT or SIGTERM arrived.
pub(crate) fn was_interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// An error once SIGINT or SIGTERM arrived.
pub(crate) fn interrupted() -> Result<(), String> {
    if was_interrupted() {
        return Err("interrupted".into());
    }
    Ok(())
}

/// A network namespace, deleted (with every interface in it) when
/// dropped.
pub(crate) struct Netns(pub(crate) String);

impl Netns {
    /// Makes namespace `name` (deleting a stale one of that name first),
    /// its loopback up.
    pub(crate) fn new(name: String) -> Result<Netns, String> {
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run_ok(Command::new("ip").args(["netns", "add", &name]))?;
        let ns = Netns(name);
        run_ok(ns.cmd("ip").args(["link", "set", "lo", "up"]))?;
        Ok(ns)
    }

    /// `prog`, to be run inside the namespace.
    pub(crate) fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, prog]);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A child process, killed when dropped.
pub(crate) struct Proc(pub(crate) Option<Child>);

impl Proc {
    pub(crate) fn spawn(c: &mut Command) -> Result<Proc, String> {
        c.spawn()
            .map(|c| Proc(Some(c)))
            .map_err(|e| format!("cannot start {:?}: {e}", c.get_program()))
    }

    /// Stops it with SIGINT (a node then reports) and returns its output.
    pub(crate) fn interrupt(mut self) -> Result<std::process::Output, String> {
        let child = self.0.take().ok_or("no process")?;
        // SAFETY: kill() takes a process id and a signal number; the child
        // is ours and not yet waited for, so the id is still its own.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGINT);
        }
        child.wait_with_output().map_err(|e| e.to_string())
    }

    /// Whether it has already stopped (and how).
    pub(crate) fn stopped(&mut self) -> Option<std::process::ExitStatus> {
        self.0.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `c` to its end; its standard output, or an error with its
/// standard error when it failed.
pub(crate) fn run_ok(c: &mut Command) -> Result<String, String> {
    let out = c
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", c.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{:?} {:?} failed: {}",
            c.get_program(),
            c.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The Debian package that provides `tool`.
fn package(tool: &str) -> &str {
    match tool {
        "ip" => "iproute2",
        "ping" => "iputils-ping",
        "sysctl" => "procps",
        "cat" => "coreutils",
        other => other,
    }
}

/// Checks, before anything is touched, that this process is root and
/// that every one of `tools` runs; `who` (such as "aurora bench iperf")
/// and `why` (what root is needed for) make the one sentence it fails
/// with.
pub(crate) fn preflight(who: &str, why: &str, tools: &[&str]) -> Result<(), String> {
    // SAFETY: geteuid() takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(format!("not root: {who} {why}; run it as root (sudo)"));
    }
    for &tool in tools {
        let found = Command::new(tool)
            .arg(if tool == "ip" { "-V" } else { "--version" })
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Err(format!(
                "{who} needs {tool}, which is missing (apt-get install {})",
                package(tool)
            ));
        }
    }
    Ok(())
}

/// Pings `addr` from `ns` until it answers (Aurora's hosts are resolving
/// each other by InATMARP), calling `alive` between tries (an error from
/// it ends the wait); gives up after `within`.
pub(crate) fn wait_for_ping(
    ns: &Netns,
    addr: &str,
    within: Duration,
    alive: &mut dyn FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < within {
        interrupted()?;
        alive()?;
        let ok = ns
            .cmd("ping")
            .args(["-c", "1", "-W", "1", addr])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "no answer from {addr} through Aurora within {:.0} s",
        within.as_secs_f64()
    ))
}

/// The CPU's model name, from `/proc/cpuinfo`.
pub(crate) fn cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
