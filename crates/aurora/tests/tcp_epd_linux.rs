//! `aurora experiment tcp-epd-linux`, briefly and for real: two iperf3
//! senders in network namespaces through Aurora's EPD port in real time.
//! iperf3 must move bytes, the effective throughput must be a positive
//! figure, the run's books must balance, and no namespace may outlive the
//! run, whether it ends by itself or by Ctrl-C.
//!
//! Needs root, ip, iperf3 and ping; see `common/mod.rs` for how a missing
//! one fails or skips.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Proc;

const NEEDS: &[&str] = &["root", "ip", "iperf3", "ping"];

/// The namespaces the experiment with process id `pid` made that are
/// still there.
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("te{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

fn experiment(out: &Path, secs: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aurora"));
    c.args(["experiment", "tcp-epd-linux", "--flows", "2"])
        .args(["--discard", "epd", "--mtu", "9180", "--secs", secs, "--out"])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

#[test]
fn linux_tcp_through_an_epd_port_moves_bytes_and_the_books_balance() {
    if !common::ready(
        "tcp_epd_linux::linux_tcp_through_an_epd_port_moves_bytes_and_the_books_balance",
        NEEDS,
    ) {
        return;
    }
    let out = std::env::temp_dir().join(format!("aurora-epdlinux-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let child = experiment(&out, "2").spawn().expect("start aurora");
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "left behind");
    let csv = std::fs::read_to_string(out.join("tcp-epd-linux.csv")).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let lines: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(lines.len(), 2, "{csv}");
    let get = |name: &str| -> f64 {
        let i = lines[0]
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name}: {csv}"));
        lines[1][i]
            .parse()
            .unwrap_or_else(|_| panic!("{name} = {}", lines[1][i]))
    };
    // iperf3 carried data through Aurora: 2 s over OC-3c is about 30 MB
    // at full speed; well over 1 MB even for a run far behind.
    assert!(get("linux_bytes") > 1e6, "{csv}\n{said}");
    let eff = get("linux_effective");
    assert!(eff > 0.0 && eff < 1.0, "{csv}\n{said}");
    // The cells that crossed the sink link carry at least the goodput.
    assert!(get("linux_line_busy") > 0.0, "{csv}");
    // The books: no PDU without an outcome, and every cell offered to a
    // link delivered or dropped by the end (the network was quiet).
    assert_eq!(get("linux_unaccounted"), 0.0, "{csv}");
    assert_eq!(get("linux_cells_in_flight_at_end"), 0.0, "{csv}");
    // The virtual-time runs beside it.
    assert!(get("reno_effective") > 0.0, "{csv}");
    assert!(get("newreno_effective") > 0.0, "{csv}");
    // The lateness verdict is printed with the row, whichever it was.
    assert!(said.contains("real-time runs"), "{said}");
}

#[test]
fn an_interrupted_run_leaves_no_namespace_behind() {
    if !common::ready(
        "tcp_epd_linux::an_interrupted_run_leaves_no_namespace_behind",
        NEEDS,
    ) {
        return;
    }
    let out = std::env::temp_dir().join(format!("aurora-epdlinux-int-{}", std::process::id()));
    let child = experiment(&out, "6").spawn().expect("start aurora");
    let pid = child.id();
    let run = Proc(Some(child));
    // Wait for the real-time run's namespaces, then for iperf3 to be
    // under way.
    let start = Instant::now();
    while namespaces_of(pid).len() < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the experiment made no namespaces"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    let o = run.interrupt();
    let _ = std::fs::remove_dir_all(&out);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("interrupted"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "left behind");
}
