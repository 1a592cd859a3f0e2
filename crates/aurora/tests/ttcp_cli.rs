//! `aurora ttcp` and the other commands refuse what they cannot do with one
//! sentence, never panic, never hang, and never report success or a rate
//! from nothing.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn aurora() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aurora"))
}

/// Runs `aurora args`, killing it (and failing the test) if it is not done
/// within `limit`.
fn run(args: &[&str], limit: Duration) -> Output {
    let child = aurora()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start aurora");
    finish(child, limit, &args.join(" "))
}

fn finish(mut child: Child, limit: Duration, what: &str) -> Output {
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`aurora {what}` was still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

/// Asserts `args` fail quickly with one sentence holding every word in
/// `words`, and no panic.
fn refused(args: &[&str], words: &[&str]) {
    let out = run(args, Duration::from_secs(30));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded: {e}");
    assert!(!e.contains("panicked"), "{args:?} panicked: {e}");
    for w in words {
        assert!(e.contains(w), "{args:?}: \"{w}\" not in: {e}");
    }
}

fn shm_path(tag: &str) -> String {
    format!("/dev/shm/aurora-ttcp-cli-{tag}-{}", std::process::id())
}

#[test]
fn zero_and_absurd_qos_rates_are_refused_not_panicked_on() {
    let base = ["ttcp", "--link", "inproc", "-n", "10", "-l", "8k", "-P"];
    for (qos, word) in [
        ("cbr:pcr=0", "pcr 0"),
        ("cbr:pcr=5G", "pcr 5G"),
        ("ubr:max_pcr=0", "max_pcr 0"),
    ] {
        let mut args = base.to_vec();
        args.push(qos);
        refused(&args, &["-P", word, "1 to 1000000000 cells per second"]);
    }
}

#[test]
fn a_zero_total_is_refused() {
    let out = std::env::temp_dir().join(format!("aurora-ttcp-cli-total-{}", std::process::id()));
    refused(
        &[
            "ttcp",
            "--sweep",
            "1k..1k",
            "--total",
            "0",
            "--link",
            "inproc",
            "--modes",
            "copy",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        &["--total", "64k to 16g"],
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn one_pdu_gives_no_rate() {
    let out = run(
        &["ttcp", "--link", "inproc", "-n", "1", "-l", "100", "--json"],
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rx = &v[1];
    assert_eq!(rx["role"], "receive", "{v}");
    assert_eq!(rx["pdus"], 1, "{v}");
    assert!(rx["mbps"].is_null(), "a rate from one PDU: {v}");
    let out = run(
        &["ttcp", "--link", "inproc", "-n", "1", "-l", "100"],
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("ttcp-r:") && l.contains("no rate")),
        "{text}"
    );
}

#[test]
fn a_transmitter_with_no_receiver_fails_and_says_so() {
    let path = shm_path("none");
    refused(
        &["ttcp", "-t", "--shm-path", &path, "-n", "2"],
        &["no receiver answered", &path],
    );
    // Nobody listens on port 1 (only root may, and nobody does).
    refused(
        &["ttcp", "-t", "--link", "stream", "--port", "1", "-n", "2"],
        &["no receiver answered", "127.0.0.1:1"],
    );
}

#[test]
fn a_receiver_that_gets_nothing_fails_and_says_so() {
    let path = shm_path("idle");
    refused(
        &["ttcp", "-r", "--shm-path", &path, "-n", "2"],
        &["nothing was received", "shm"],
    );
}

/// A receiver that stopped reading: the transmitter's whole transfer fits
/// in the ring, so only the ring's own count of unread cells tells.
#[test]
fn a_transmitter_whose_receiver_never_reads_fails() {
    let path = shm_path("stopped");
    let mut rx = aurora()
        .args(["ttcp", "-r", "--shm-path", &path, "-n", "20", "-l", "40"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(rx.stderr.take().unwrap());
    let mut line = String::new();
    while line.trim() != "ttcp-r: ready" {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "receiver ended early"
        );
    }
    // SAFETY: kill() on our own child, not yet waited for.
    unsafe {
        libc::kill(rx.id() as libc::pid_t, libc::SIGSTOP);
    }
    let out = run(
        &["ttcp", "-t", "--shm-path", &path, "-n", "20", "-l", "40"],
        Duration::from_secs(60),
    );
    let _ = rx.kill();
    let _ = rx.wait();
    let _ = std::fs::remove_file(&path);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exited 0 with nothing read: {e}");
    assert!(e.contains("unread"), "{e}");
}

#[test]
fn a_receiver_with_a_smaller_count_makes_the_transmitter_fail() {
    let path = shm_path("short");
    let mut rx = aurora()
        .args(["ttcp", "-r", "--shm-path", &path, "-n", "10", "-l", "40"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(rx.stderr.take().unwrap());
    let mut line = String::new();
    while line.trim() != "ttcp-r: ready" {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "receiver ended early"
        );
    }
    let out = run(
        &["ttcp", "-t", "--shm-path", &path, "-n", "20", "-l", "40"],
        Duration::from_secs(60),
    );
    let _ = rx.wait();
    let _ = std::fs::remove_file(&path);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exited 0 with half unread: {e}");
    assert!(e.contains("receiver"), "{e}");
}

#[test]
fn huge_rings_and_delays_are_refused_before_anything_starts() {
    refused(
        &["ttcp", "--link", "inproc", "--ring-cells", "100000000000"],
        &["--ring-cells", "64 to 1048576"],
    );
    refused(
        &[
            "ttcp",
            "--link",
            "inproc",
            "-n",
            "1",
            "--delay-us",
            "100000000000",
        ],
        &["--delay-us", "0..=1000000"],
    );
}

#[test]
fn every_number_has_a_stated_range() {
    let dan = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dan.toml");
    let inproc = |flag: &'static str, v: &'static str| -> Vec<&'static str> {
        vec!["ttcp", "--link", "inproc", "-n", "2", flag, v]
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (inproc("-l", "0"), "-l"),
        (inproc("-l", "70000"), "-l"),
        (inproc("-l", "100g"), "-l"),
        (vec!["ttcp", "--link", "inproc", "-n", "0"], "-n"),
        (inproc("--port", "0"), "--port"),
        (inproc("--port", "65535"), "--port"),
        (inproc("--rate", "0.5"), "--rate"),
        (inproc("--rate", "1e12"), "--rate"),
        (inproc("--loss", "2"), "--loss"),
        (inproc("--ber", "NaN"), "--ber"),
        (inproc("--poll-us", "0"), "--poll-us"),
        (inproc("--ring-cells", "8"), "--ring-cells"),
        (inproc("--total", "1"), "--total"),
        (
            vec!["ping", dan, "0.100", "--from", "camera", "-c", "0"],
            "--count",
        ),
        (
            vec!["ping", dan, "0.100", "--from", "camera", "-i", "0"],
            "--interval",
        ),
        (
            vec!["ping", dan, "0.100", "--from", "camera", "-i", "1000s"],
            "--interval",
        ),
        (
            vec!["run", dan, "--virtual", "--duration", "0"],
            "--duration",
        ),
        (
            vec!["run", dan, "--virtual", "--duration", "1000000s"],
            "--duration",
        ),
        (
            vec!["node", dan, "--name", "sw", "--duration", "0"],
            "--duration",
        ),
        (vec!["demo", "--secs", "61"], "--secs"),
        (vec!["bench", "sar", "--stream-mib", "0"], "--stream-mib"),
        (vec!["bench", "atomic-map", "--runs", "0"], "--runs"),
        (vec!["run", dan, "--seed", "x"], "--seed"),
    ];
    for (args, flag) in cases {
        refused(&args, &[flag]);
    }
}
