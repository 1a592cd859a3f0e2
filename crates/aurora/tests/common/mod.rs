//! What the tests that use system tools need, and how they skip.
//!
//! A test names what it needs (`tshark`, `ip`, `ping`, `iperf3`, `nc`, the
//! DejaVu `font`, or `root`). When something is missing the test fails with a
//! sentence naming it and the package that provides it, unless
//! `AURORA_SKIP_MISSING_TOOLS` lists it (space- or comma-separated): then the
//! test prints `SKIPPED: ...` on stderr, past the test harness's capture,
//! appends the same line to the file `AURORA_SKIP_LOG` names (if any), and
//! returns false. `scripts/test` sets both for what it could not install.

// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output};

/// The font the plots use.
pub const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// The Debian package that provides `need` (None for root).
fn package(need: &str) -> Option<&'static str> {
    Some(match need {
        "tshark" => "tshark",
        "ip" => "iproute2",
        "ping" => "iputils-ping",
        "iperf3" => "iperf3",
        "nc" => "netcat-openbsd",
        "font" => "fonts-dejavu-core",
        "root" => return None,
        other => panic!("the test helper does not know the need \"{other}\""),
    })
}

/// True when `tool` is an executable file on PATH.
fn on_path(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// True when `need` is met on this machine.
pub fn present(need: &str) -> bool {
    match need {
        // SAFETY: geteuid has no preconditions and cannot fail.
        "root" => (unsafe { libc::geteuid() }) == 0,
        "font" => Path::new(FONT).exists(),
        tool => on_path(tool),
    }
}

/// True when `test` may run: everything in `needs` is here. Otherwise skips
/// loudly (false) if the missing needs are all listed in
/// `AURORA_SKIP_MISSING_TOOLS`, or fails the test saying what is missing.
pub fn ready(test: &str, needs: &[&str]) -> bool {
    let missing: Vec<&str> = needs.iter().copied().filter(|n| !present(n)).collect();
    if missing.is_empty() {
        return true;
    }
    let allowed = std::env::var("AURORA_SKIP_MISSING_TOOLS").unwrap_or_default();
    let allowed: Vec<&str> = allowed
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .collect();
    let how = |n: &str| match package(n) {
        Some(p) => format!("{test} needs {n}; run scripts/test as root or apt-get install {p}"),
        None => format!("{test} needs root; run scripts/test as root"),
    };
    let unlisted: Vec<&str> = missing
        .iter()
        .copied()
        .filter(|n| !allowed.contains(n))
        .collect();
    assert!(
        unlisted.is_empty(),
        "{} (scripts/test skips such tests instead of failing)",
        unlisted
            .iter()
            .map(|n| how(n))
            .collect::<Vec<_>>()
            .join("; ")
    );
    for n in missing {
        let line = format!("SKIPPED: {}\n", how(n));
        // Straight to stderr: the harness captures eprintln!, not this.
        let _ = std::io::stderr().write_all(line.as_bytes());
        if let Some(log) = std::env::var_os("AURORA_SKIP_LOG") {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
            {
                let _ = f.write_all(line.as_bytes());
            }
        }
    }
    false
}

/// A network namespace, deleted when dropped.
pub struct Netns(pub String);

impl Netns {
    pub fn new(name: String) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .expect("run ip");
        assert!(
            out.status.success(),
            "cannot create network namespace {name} (needs root or CAP_SYS_ADMIN): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Loopback up, for the tools' own use.
        let _ = Command::new("ip")
            .args(["netns", "exec", &name, "ip", "link", "set", "lo", "up"])
            .output();
        Netns(name)
    }

    /// `cmd` run inside the namespace.
    pub fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, prog]);
        c
    }

    pub fn run(&self, prog: &str, args: &[&str]) -> Output {
        self.cmd(prog)
            .args(args)
            .output()
            .expect("run in namespace")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A child process, killed when dropped.
pub struct Proc(pub Option<Child>);

impl Proc {
    /// Stops it with SIGINT (as Ctrl-C would) and returns its output.
    pub fn interrupt(mut self) -> Output {
        let child = self.0.take().expect("running");
        // SAFETY: kill() takes a process id and a signal number; the child
        // is ours and has not been waited for, so its id is still its own.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGINT);
        }
        child.wait_with_output().expect("wait")
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
