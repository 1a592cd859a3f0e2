//! `aurora ttcp` between two real processes over every link kind, with every
//! byte verified, and a small sweep.

mod common;

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, UdpSocket};
use std::process::{Command, Stdio};

fn aurora() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aurora"))
}

/// A port p with p and p+1 free for UDP and TCP.
fn free_port() -> u16 {
    loop {
        let p = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if p < 65000
            && UdpSocket::bind(("127.0.0.1", p + 1)).is_ok()
            && TcpListener::bind(("127.0.0.1", p)).is_ok()
        {
            return p;
        }
    }
}

/// Starts a receiver, waits until it is ready, runs the transmitter, and
/// returns the receiver's JSON report.
fn pair(common: &[&str], rx_extra: &[&str], tx_extra: &[&str]) -> serde_json::Value {
    let mut rx = aurora()
        .args(["ttcp", "-r", "--json"])
        .args(common)
        .args(rx_extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(rx.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "receiver ended early"
        );
        if line.trim() == "ttcp-r: ready" {
            break;
        }
    }
    let tx = aurora()
        .args(["ttcp", "-t"])
        .args(common)
        .args(tx_extra)
        .output()
        .unwrap();
    assert!(
        tx.status.success(),
        "{}",
        String::from_utf8_lossy(&tx.stderr)
    );
    let out = rx.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

fn assert_all_arrived(r: &serde_json::Value, n: u64, len: u64) {
    assert_eq!(r["pdus"], n, "{r}");
    assert_eq!(r["bytes"], n * len);
    assert_eq!(r["corrupted"], 0);
    assert_eq!(r["lost"], 0);
}

fn shm_path(tag: &str) -> String {
    std::env::temp_dir()
        .join(format!("aurora-ttcp-test-{tag}-{}", std::process::id()))
        .display()
        .to_string()
}

#[test]
fn shared_memory_single_copy_and_copy_between_processes() {
    for (mode, sync) in [
        ("single-copy", "event"),
        ("copy", "poll"),
        ("single-copy", "poll"),
    ] {
        let path = shm_path(&format!("{mode}-{sync}"));
        let common = [
            "--link",
            "shm",
            "--shm-path",
            &path,
            "-l",
            "3000",
            "-n",
            "500",
            "--mode",
            mode,
            "--sync",
            sync,
        ];
        let r = pair(&common, &[], &[]);
        assert_all_arrived(&r, 500, 3000);
    }
}

#[test]
fn udp_paced_between_processes() {
    let port = free_port().to_string();
    let common = [
        "--link",
        "udp",
        "--port",
        &port,
        "-l",
        "2000",
        "-n",
        "300",
        "-P",
        "cbr,aal5:pcr=200000",
    ];
    let r = pair(&common, &[], &[]);
    // Paced, UDP on loopback normally loses nothing, but a receiver starved
    // of CPU (a busy CI machine) lets the socket buffer overflow. Whatever
    // happens, every PDU is received intact or counted missing.
    let (pdus, lost) = (r["pdus"].as_u64().unwrap(), r["lost"].as_u64().unwrap());
    assert_eq!(pdus + lost, 300, "{r}");
    assert_eq!(r["corrupted"], 0);
    assert!(pdus >= 150, "{r}");
}

#[test]
fn cells_on_a_tcp_stream_between_processes() {
    let port = free_port().to_string();
    let common = [
        "--link", "stream", "--port", &port, "-l", "9180", "-n", "300",
    ];
    let r = pair(&common, &[], &[]);
    assert_all_arrived(&r, 300, 9180);
}

#[test]
fn aal34_over_shared_memory() {
    let path = shm_path("aal34");
    let common = [
        "--link",
        "shm",
        "--shm-path",
        &path,
        "-l",
        "5000",
        "-n",
        "200",
        "-P",
        "ubr,aal34",
    ];
    let r = pair(&common, &[], &[]);
    assert_all_arrived(&r, 200, 5000);
}

#[test]
fn tcp_baseline_between_processes() {
    let port = free_port().to_string();
    let common = [
        "--baseline",
        "tcp",
        "--port",
        &port,
        "-l",
        "4096",
        "-n",
        "1000",
    ];
    let r = pair(&common, &[], &[]);
    assert_all_arrived(&r, 1000, 4096);
}

#[test]
fn in_process_and_loopback_runs() {
    for args in [
        vec![
            "--link", "inproc", "-l", "1500", "-n", "2000", "--mode", "copy",
        ],
        vec!["--bidir", "-l", "8k", "-n", "500", "--mode", "single-copy"],
    ] {
        let out = aurora()
            .arg("ttcp")
            .args(&args)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let reports = v.as_array().cloned().unwrap_or_else(|| vec![v]);
        let last = reports.last().unwrap();
        assert_eq!(last["corrupted"], 0, "{last}");
        assert_eq!(last["lost"], 0, "{last}");
        assert!(last["pdus"].as_u64().unwrap() > 0);
    }
}

#[test]
fn a_small_sweep_writes_its_table_data_and_plots() {
    let dir = std::env::temp_dir().join(format!("aurora-sweep-test-{}", std::process::id()));
    let port = free_port().to_string();
    let out = aurora()
        .args([
            "ttcp", "--sweep", "1k..2k", "--total", "256k", "--quiet", "--port", &port, "--repeat",
            "2",
        ])
        .args(["--shm-path", &shm_path("sweep"), "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    for col in [
        "copy",
        "single-copy",
        "null",
        "tcp",
        "single/tcp",
        "single/copy",
    ] {
        assert!(table.contains(col), "{table}");
    }
    assert!(
        table.contains("PDUs corrupted or lost across the sweep: 0"),
        "{table}"
    );
    assert!(table.contains("the fastest of 2 runs"), "{table}");
    let data: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("sweep.json")).unwrap()).unwrap();
    let rows = data["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 4);
    assert!(rows.iter().all(|r| r["mbps"].as_f64().unwrap() > 0.0));
    // Each point ran twice: the row is the faster run, the slower noted.
    for r in rows {
        assert_eq!(r["runs"], 2, "{r}");
        let (best, slowest) = (r["mbps"].as_f64().unwrap(), r["mbps_min"].as_f64().unwrap());
        assert!(slowest > 0.0 && slowest <= best, "{r}");
    }
    assert!(data["memcpy_mbps"].as_f64().unwrap() > 0.0);
    assert!(dir.join("sweep.csv").exists());
    // Plots need a font (scripts/test installs it, or skips this check).
    if common::ready(
        "ttcp::a_small_sweep_writes_its_table_data_and_plots (its plots)",
        &["font"],
    ) {
        assert!(dir.join("sweep.png").metadata().unwrap().len() > 1000);
        assert!(dir.join("sweep.svg").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_lengths_get_one_clear_sentence() {
    let out = aurora()
        .args(["ttcp", "--link", "inproc", "-l", "70000"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.contains("65535"), "{e}");
    let out = aurora().args(["ttcp", "-t", "-r"]).output().unwrap();
    assert!(!out.status.success());
}

#[test]
fn injected_loss_and_bit_errors_are_accounted_end_to_end() {
    let path = shm_path("impaired");
    let common = [
        "--link",
        "shm",
        "--shm-path",
        &path,
        "-l",
        "3000",
        "-n",
        "2000",
    ];
    let r = pair(
        &common,
        &[],
        &["--loss", "0.001", "--ber", "0.001", "--seed", "7"],
    );
    let (pdus, lost) = (r["pdus"].as_u64().unwrap(), r["lost"].as_u64().unwrap());
    assert!(lost > 0, "{r}");
    // Every PDU sent was delivered intact or is counted missing; none was
    // delivered with wrong bytes.
    assert_eq!(pdus + lost, 2000, "{r}");
    assert_eq!(r["corrupted"], 0);
    let crc_drops: u64 = r["drops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d[0] == "crc")
        .map(|d| d[1].as_u64().unwrap())
        .sum();
    assert!(crc_drops > 0, "{r}");
}
