//! Aurora's TCP against Linux's, across the cell network: one `aurora run`
//! process in real time holds a switch, a TCP host (h2, Aurora's TCP) and
//! an IP host whose TUN interface is in a network namespace (h1: Linux's
//! TCP, driven by nc). Bytes go both ways and are checked; the link to h2
//! loses cells, so both stacks must retransmit.
//!
//! Needs root (network namespaces, TUN) and nc; see `common/mod.rs` for
//! how a missing tool fails or skips.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Netns, Proc};

/// Byte `i` of every transfer (aurora-tcp's pattern).
fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

fn topology(ns: &str, dir: &std::path::Path) -> PathBuf {
    let text = format!(
        r#"
[[switch]]
name = "sw"
ports = 2

[[host]]
name = "h1"
ip = "10.41.0.1/24"
netns = "{ns}"

[[host]]
name = "h2"
ip = "10.41.0.2/24"

[[link]]
a = "h1"
b = "sw:0"
rate = "oc3"
delay = "1ms"

[[link]]
a = "sw:1"
b = "h2"
rate = "oc3"
delay = "1ms"
loss = 0.0001

[[pvc]]
name = "h1-h2"
path = ["h1", "sw", "h2"]

[[tcp]]
name = "linux-to-aurora"
from = "h1"
to = "h2"
port = 5001

[[tcp]]
name = "aurora-to-linux"
from = "h2"
to = "h1"
port = 5002
bytes = 3000000
start = "2s"
"#
    );
    let path = dir.join("tcp-linux.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn aurora_and_linux_tcp_carry_checked_bytes_both_ways_through_loss() {
    if !common::ready(
        "tcp_linux::aurora_and_linux_tcp_carry_checked_bytes_both_ways_through_loss",
        &["root", "ip", "nc"],
    ) {
        return;
    }
    let tag = format!("tl{}", std::process::id());
    let dir = std::env::temp_dir().join(format!("aurora-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ns = Netns::new(format!("{tag}-a"));
    let topo = topology(&ns.0, &dir);

    // Linux's receiver first: it waits on port 5002 for Aurora's source.
    let received = dir.join("received.bin");
    let receiver = ns
        .cmd("sh")
        .args(["-c", &format!("nc -l -N 5002 > {}", received.display())])
        .spawn()
        .expect("nc receiver");
    let mut receiver = Proc(Some(receiver));

    let run = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .arg("run")
        .arg(&topo)
        .args(["--duration", "14s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start aurora run");
    let mut run = Proc(Some(run));

    // Linux's sender: 2 MB to Aurora's sink, once the network is up (nc
    // fails while the TUN interface or the far end is not there yet).
    let sent_len = 2_000_000;
    let sent: Vec<u8> = (0..sent_len).map(pattern).collect();
    let file = dir.join("sent.bin");
    std::fs::write(&file, &sent).unwrap();
    let start = Instant::now();
    loop {
        let out = ns
            .cmd("sh")
            .args([
                "-c",
                &format!("nc -N -w 5 10.41.0.2 5001 < {}", file.display()),
            ])
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "nc could not send to Aurora's sink: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let out = run.0.take().unwrap().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "aurora run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The run is over: Linux's receiver has had its FIN, or never will.
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = receiver
            .0
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
        {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "Linux's receiver never saw the end of Aurora's transfer; the run said:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "nc receiver failed");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let flows = report["tcp"]["flows"].as_array().expect("a TCP part");
    let conn = |flow: &str, role: &str| {
        flows
            .iter()
            .find(|f| f["name"] == flow)
            .and_then(|f| f["connections"].as_array())
            .and_then(|c| c.iter().find(|c| c["role"] == role))
            .cloned()
            .unwrap_or_else(|| panic!("no {role} of {flow}: {flows:?}"))
    };
    // Linux to Aurora: every byte, in order, right.
    let sink = conn("linux-to-aurora", "sink");
    assert_eq!(sink["bytes"], sent_len as u64, "{sink}");
    assert_eq!(sink["pattern_errors"], 0);
    // Aurora to Linux: nc wrote what came, byte for byte.
    let got = std::fs::read(&received).unwrap();
    assert_eq!(got.len(), 3_000_000);
    assert!(
        got.iter().enumerate().all(|(i, &b)| b == pattern(i)),
        "the bytes Linux received differ from what Aurora sent"
    );
    let source = conn("aurora-to-linux", "source");
    assert!(
        source["retransmits"].as_u64().unwrap_or(0) > 0,
        "the lossy link made Aurora retransmit: {source}"
    );
    assert_eq!(source["close_reason"], "done", "{source}");
    // Cells were lost, and every TCP host's books balance.
    let hosts = report["tcp"]["hosts"].as_array().expect("TCP hosts");
    assert!(hosts.iter().all(|h| h["balanced"] == true), "{hosts:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
