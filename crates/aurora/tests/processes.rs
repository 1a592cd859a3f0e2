//! Three processes (host, switch, host) joined by UDP links on loopback; the
//! switch is killed mid-run and started again. The receiving host must see
//! the restart, count what the outage cost as missing PDUs, deliver nothing
//! corrupted, and receive traffic through the new switch.

use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn node(topo: &std::path::Path, name: &str, duration: Option<&str>) -> Child {
    node_with(topo, name, duration, &[])
}

fn node_with(
    topo: &std::path::Path,
    name: &str,
    duration: Option<&str>,
    extra: &[&std::ffi::OsStr],
) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aurora"));
    c.arg("node")
        .arg(topo)
        .args(["--name", name, "--json"])
        .args(extra);
    if let Some(d) = duration {
        c.args(["--duration", d]);
    }
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn report(c: Child) -> Value {
    let out = c.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Host h1, switch sw, host h2, and a flow h1 -> h2 of `sdu`-byte PDUs
/// every `interval`; `l1` and `l2` say how each link's processes meet.
fn topology(l1: &str, l2: &str, sdu: u32, interval: &str) -> String {
    format!(
        r#"
[[switch]]
name = "sw"
ports = 2
[[host]]
name = "h1"
[[host]]
name = "h2"
[[link]]
a = "h1"
b = "sw:0"
rate = "oc3"
{l1}
[[link]]
a = "sw:1"
b = "h2"
rate = "oc3"
{l2}
[[pvc]]
name = "h1-to-h2"
path = ["h1", "sw", "h2"]
[[flow]]
pvc = "h1-to-h2"
sdu = {sdu}
count = 1000000
interval = "{interval}"
"#
    )
}

#[test]
fn switch_process_killed_and_restarted() {
    let p: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let udp = |x: u16, y: u16| format!("udp_a = \"127.0.0.1:{x}\"\nudp_b = \"127.0.0.1:{y}\"");
    let text = topology(&udp(p[0], p[1]), &udp(p[2], p[3]), 1500, "500us");
    let topo = std::env::temp_dir().join(format!("aurora-processes-{}.toml", std::process::id()));
    std::fs::write(&topo, text).unwrap();

    let cap = std::env::temp_dir().join(format!("aurora-processes-cap-{}", std::process::id()));
    let h2 = node_with(
        &topo,
        "h2",
        Some("3s"),
        &["--capture".as_ref(), cap.as_os_str()],
    );
    let h1 = node(&topo, "h1", Some("3s"));
    let mut sw = node(&topo, "sw", None);
    std::thread::sleep(Duration::from_millis(1000));
    sw.kill().unwrap();
    sw.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let sw2 = report(node(&topo, "sw", Some("1200ms")));
    let h1 = report(h1);
    let h2 = report(h2);
    std::fs::remove_file(&topo).ok();
    std::fs::remove_dir_all(&cap).ok();

    // The new switch carried traffic from h1 to h2: at least half its 1.2 s
    // of life's worth of 32-cell PDUs at 2000 PDUs/s.
    let forwarded = sw2["ports"][1]["cells_out"].as_u64().unwrap();
    assert!(
        forwarded >= 1200 * 32,
        "restarted switch forwarded {forwarded} cells"
    );
    assert_eq!(sw2["ports"][0]["cells_in"].as_u64().unwrap(), forwarded);

    let sent = h1["sent"][0][1].as_u64().unwrap();
    let rx = &h2["received"][0];
    let (delivered, missing) = (
        rx["delivered"].as_u64().unwrap(),
        rx["missing"].as_u64().unwrap(),
    );
    assert_eq!(rx["corrupted"].as_u64(), Some(0));
    assert_eq!(h2["ports"][0]["peer_restarts"].as_u64(), Some(1), "{h2}");
    // The outage cost PDUs, and they are counted, not silently gone.
    assert!(missing > 0, "{h2}");
    assert!(
        delivered + missing <= sent,
        "{delivered} + {missing} > {sent}"
    );
    // What the new switch forwarded arrived (bar a PDU cut at either end).
    assert!(
        delivered + 2 >= forwarded / 32,
        "{delivered} < {forwarded} / 32"
    );
}

#[test]
fn three_processes_over_shared_memory() {
    let base = format!("/dev/shm/aurora-test-{}", std::process::id());
    let text = topology(
        &format!("shm = \"{base}-l1\""),
        &format!("shm = \"{base}-l2\""),
        9180,
        "1ms",
    );
    let topo = std::env::temp_dir().join(format!("aurora-shm-{}.toml", std::process::id()));
    std::fs::write(&topo, text).unwrap();
    // Started in an order that makes the hosts wait for the switch's rings.
    let h1 = node(&topo, "h1", Some("2s"));
    let h2 = node(&topo, "h2", Some("2s"));
    std::thread::sleep(Duration::from_millis(200));
    let sw = node(&topo, "sw", Some("2s"));
    let (h1, h2, sw) = (report(h1), report(h2), report(sw));
    std::fs::remove_file(&topo).ok();

    let sent = h1["sent"][0][1].as_u64().unwrap();
    let rx = &h2["received"][0];
    let delivered = rx["delivered"].as_u64().unwrap();
    assert_eq!(rx["corrupted"].as_u64(), Some(0), "{h2}");
    assert!(
        delivered > 1000 && delivered <= sent,
        "{delivered} of {sent}"
    );
    // Rings lose nothing: a PDU is missing only if a full ring dropped it,
    // and then that overflow is counted on a sending port.
    let overflow: u64 = [&h1, &sw]
        .iter()
        .flat_map(|r| r["ports"].as_array().unwrap().iter())
        .map(|p| p["overflow"].as_u64().unwrap())
        .sum();
    let missing = rx["missing"].as_u64().unwrap();
    assert!(
        missing == 0 || overflow > 0,
        "{missing} missing, no overflow"
    );
    // Every ring file is gone once its reader stopped.
    for l in ["l1", "l2"] {
        for d in ["ab", "ba"] {
            let f = format!("{base}-{l}-{d}");
            assert!(!std::path::Path::new(&f).exists(), "{f} left behind");
        }
    }
}

#[test]
fn sigterm_ends_a_node_with_its_report() {
    let p: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let udp = |x: u16, y: u16| format!("udp_a = \"127.0.0.1:{x}\"\nudp_b = \"127.0.0.1:{y}\"");
    let text = topology(&udp(p[0], p[1]), &udp(p[2], p[3]), 1500, "1ms");
    let topo = std::env::temp_dir().join(format!("aurora-sigterm-{}.toml", std::process::id()));
    std::fs::write(&topo, text).unwrap();
    let h1 = node(&topo, "h1", None);
    std::thread::sleep(Duration::from_millis(500));
    let pid = libc::pid_t::try_from(h1.id()).unwrap();
    // SAFETY: sends a signal to the child this test started and still owns
    // (not yet waited for, so the pid cannot have been reused).
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let r = report(h1);
    std::fs::remove_file(&topo).ok();
    assert_eq!(r["name"], "h1");
    // It ran until the signal and sent meanwhile (1000 PDUs/s).
    let secs = r["secs"].as_f64().unwrap();
    assert!((0.3..5.0).contains(&secs), "{r}");
    assert!(r["sent"][0][1].as_u64().unwrap() > 100, "{r}");
}

#[test]
fn an_atomic_lan_runs_as_three_processes_over_udp() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/atomic-processes.toml"
    );
    let spawn = |name: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_aurora"))
            .args(["node", file, "--name", name, "--duration", "4s", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (m, b, a) = (spawn("m"), spawn("b"), spawn("a"));
    let json = |c: std::process::Child| {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let (ra, rb, rm) = (json(a), json(b), json(m));
    // The AC on a mapped the whole LAN across the three processes.
    let map = &ra["report"]["mappings"][0];
    assert_eq!(
        (map["nodes"].as_u64(), map["hosts"].as_u64()),
        (Some(6), Some(2)),
        "{ra}"
    );
    // b got a's flow, with a route from the AC.
    let f = &rb["report"]["flows"][0];
    assert_eq!(f["delivered"], 2000, "{rb}");
    assert_eq!(f["corrupted"], 0);
    assert_eq!(rb["report"]["hosts"][0]["ac"], "a");
    // The mesh's cables carried it all, nothing lost.
    for c in rm["cables"].as_array().unwrap() {
        assert_eq!(c[1][2], 0, "{c}");
    }
}
