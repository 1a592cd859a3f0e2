//! Three processes (host, switch, host) joined by UDP links on loopback; the
//! switch is killed mid-run and started again. The receiving host must see
//! the restart, count what the outage cost as missing PDUs, deliver nothing
//! corrupted, and receive traffic through the new switch.

use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The tests here run a few node processes each, against the wall clock;
/// on a small machine two tests at once starve each other's processes
/// (an ATOMIC AC that maps before its mesh runs, a host that takes over
/// because it heard no AC), so they run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
/// every `interval`, on VC 0.100 into the switch and 0.200 out of it; `l1`
/// and `l2` say how each link's processes meet.
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
from_vc = "0.100"
to_vc = "0.200"
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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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
    // The killed switch left no report. The joined books place what the
    // outage cost where the new switch counted cells h1 sent before it
    // listened, an upper bound they say they used, and note the restart.
    let files = save("restart", &[("h1", &h1), ("sw", &sw2), ("h2", &h2)]);
    let paths: Vec<&std::path::Path> = files.iter().map(|f| f.as_path()).collect();
    let (ok, r, err) = books(&paths);
    assert!(ok, "{err}");
    let p = &r["pvcs"][0];
    assert_eq!(p["unaccounted"], 0, "{p}");
    assert_eq!(p["delivered"].as_u64(), Some(delivered));
    // Every PDU missing at h2 has an outcome: lost, most of them by the
    // outage, or corrupted (a unit the outage cut whose CRC then failed
    // with every cell its tags named present).
    let n = |k: &str| p[k].as_u64().unwrap();
    assert!(n("lost") + n("corrupted") >= missing, "{p}");
    let placed = r["placed_by_transit"][0][1].as_u64().unwrap();
    let outage = p["losses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["at"] == "sw:0 in" && l["reason"] == "peer_unreachable")
        .map_or(0, |l| l["count"].as_u64().unwrap());
    // Datagrams lost between the processes may place some too.
    assert!(outage > 0 && outage <= placed, "{r}");
    assert!(
        r["notes"][0]
            .as_str()
            .unwrap()
            .contains("h2:0 saw the process before it start again"),
        "{r}"
    );
    for f in files {
        std::fs::remove_file(f).ok();
    }
}

/// `aurora books` over the reports in `files`: its exit status, its
/// JSON (when it printed one) and its stderr.
fn books(files: &[&std::path::Path]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .arg("books")
        .args(files)
        .arg("--json")
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.success(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes each report to a file of its own; returns their paths.
fn save(tag: &str, reports: &[(&str, &Value)]) -> Vec<std::path::PathBuf> {
    reports
        .iter()
        .map(|(name, r)| {
            let f = std::env::temp_dir().join(format!(
                "aurora-books-{tag}-{name}-{}.json",
                std::process::id()
            ));
            std::fs::write(&f, r.to_string()).unwrap();
            f
        })
        .collect()
}

/// Three processes, each losing cells of the flow: h1's link and sw's
/// link drop cells at random, and the receiver h2 stops half a second
/// before the others. The joined books balance, each loss at its place in
/// its process, and what was sent to a process after it stopped is lost
/// between processes at its port, not in flight; without the receiver's
/// report they cannot balance, and say so.
#[test]
fn books_of_three_processes_balance() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let udp = |loss: &str| {
        format!(
            "loss = {loss}\nudp_a = \"127.0.0.1:{}\"\nudp_b = \"127.0.0.1:{}\"",
            free_port(),
            free_port()
        )
    };
    let text = topology(&udp("0.002"), &udp("0.004"), 1500, "200us");
    let topo = std::env::temp_dir().join(format!("aurora-books-{}.toml", std::process::id()));
    std::fs::write(&topo, text).unwrap();
    let sw = start(&topo, "sw", "2s");
    let h2 = start(&topo, "h2", "1500ms");
    let h1 = start(&topo, "h1", "2s");
    let (h1, sw, h2) = (finish(h1), finish(sw), finish(h2));
    std::fs::remove_file(&topo).ok();
    let files = save("three", &[("h1", &h1), ("sw", &sw), ("h2", &h2)]);
    let paths: Vec<&std::path::Path> = files.iter().map(|f| f.as_path()).collect();
    let (ok, r, err) = books(&paths);
    assert!(ok, "{err}");
    let p = &r["pvcs"][0];
    let n = |k: &str| p[k].as_u64().unwrap();
    assert_eq!(n("sent"), h1["sent"][0][1].as_u64().unwrap(), "{p}");
    assert_eq!(
        n("delivered"),
        h2["received"][0]["delivered"].as_u64().unwrap()
    );
    assert_eq!(p["unaccounted"], 0, "{p}");
    assert_eq!(
        n("sent"),
        n("delivered") + n("corrupted") + n("lost") + n("in_flight")
    );
    // About 0.2 % and 0.4 % of 32-cell PDUs: 6 % and 12 % of PDUs lost.
    let at = |place: &str| {
        p["losses"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["at"] == place && l["reason"] == "link_loss")
            .map(|l| l["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert!(at("h1:0 out") > 100 && at("sw:1 out") > 100, "{p}");
    // Every other loss is one between the processes, placed at the port
    // it would have arrived by: a datagram the loaded machine dropped, or
    // cells sent after the process stopped reading.
    let mut all = 0;
    let mut after_stop = 0;
    for l in p["losses"].as_array().unwrap() {
        let (place, why) = (l["at"].as_str().unwrap(), l["reason"].as_str().unwrap());
        assert!(
            why == "link_loss" && (place == "h1:0 out" || place == "sw:1 out")
                || (why == "lost_in_transit"
                    || why == "peer_unreachable"
                    || why == "lost_between_processes")
                    && place.ends_with(" in"),
            "{l}"
        );
        if why == "lost_between_processes" && place == "h2:0 in" {
            after_stop += l["count"].as_u64().unwrap();
        }
        all += l["count"].as_u64().unwrap();
    }
    assert_eq!(all, n("lost"), "{p}");
    // Half a second at 5,000 PDUs a second, less what sw's link lost; in
    // flight, only what ports and unread inputs held at the stops (a few
    // PDUs each on a quiet machine; a socket's default buffer holds about
    // 4,000 cells, 125 of these PDUs).
    assert!(after_stop > 1000, "{p}");
    assert!(n("in_flight") < 200, "{p}");

    let (ok, _, err) = books(&paths[..2]);
    assert!(!ok);
    assert!(
        err.contains("PVC h1-to-h2 cannot be balanced: no report ran h2"),
        "{err}"
    );
    for f in files {
        std::fs::remove_file(f).ok();
    }
}

/// IP PVCs' books join too: TCP hosts (Aurora's own TCP, no TUN) in two
/// processes and their switch in a third, one link losing cells at random,
/// over UDP and over shared memory. The receiving host stops a second
/// before the others, while its peer still sends. Each direction balances
/// by AAL5 end cells: what the sender sent is delivered, failed at the
/// receiver, dropped at a place, in flight, or lost between processes.
#[test]
fn books_of_ip_pvcs_across_three_processes_balance() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for over in ["udp", "shm"] {
        let link = |n: u32| match over {
            "udp" => format!(
                "udp_a = \"127.0.0.1:{}\"\nudp_b = \"127.0.0.1:{}\"",
                free_port(),
                free_port()
            ),
            _ => format!(
                "shm = \"/dev/shm/aurora-ipbooks-{}-{n}\"",
                std::process::id()
            ),
        };
        let text = format!(
            r#"
[[switch]]
name = "sw"
ports = 2
[[host]]
name = "h1"
ip = "10.1.0.1/24"
[[host]]
name = "h2"
ip = "10.1.0.2/24"
[[link]]
a = "h1"
b = "sw:0"
rate = "oc3"
delay = "1ms"
loss = 0.0005
{}
[[link]]
a = "sw:1"
b = "h2"
rate = "oc3"
delay = "1ms"
{}
[[pvc]]
name = "h1-h2"
path = ["h1", "sw", "h2"]
[[tcp]]
name = "bulk"
from = "h1"
to = "h2"
bytes = "200MB"
"#,
            link(1),
            link(2)
        );
        let topo =
            std::env::temp_dir().join(format!("aurora-ipbooks-{over}-{}.toml", std::process::id()));
        std::fs::write(&topo, text).unwrap();
        // The receiver first; over shared memory every process runs once
        // its rings are there (the hosts wait for the switch's).
        let (h1, sw, h2) = if over == "udp" {
            let h2 = start(&topo, "h2", "2s");
            let sw = start(&topo, "sw", "3s");
            let h1 = start(&topo, "h1", "3s");
            (finish(h1), finish(sw), finish(h2))
        } else {
            let h2 = node(&topo, "h2", Some("2s"));
            let h1 = node(&topo, "h1", Some("3s"));
            std::thread::sleep(Duration::from_millis(200));
            let sw = node(&topo, "sw", Some("3s"));
            (report(h1), report(sw), report(h2))
        };
        std::fs::remove_file(&topo).ok();
        let files = save(
            &format!("ip-{over}"),
            &[("h1", &h1), ("sw", &sw), ("h2", &h2)],
        );
        let paths: Vec<&std::path::Path> = files.iter().map(|f| f.as_path()).collect();
        let (ok, r, err) = books(&paths);
        assert!(ok, "{over}: {err}");
        let rows = r["ip_pvcs"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{over}: {r}");
        for p in rows {
            let n = |k: &str| p[k].as_u64().unwrap();
            assert_eq!(p["unaccounted"], 0, "{over}: {p}");
            assert!(n("sent") > 0, "{over}: {p}");
            assert_eq!(
                n("sent"),
                n("delivered") + n("lost") + n("in_flight"),
                "{over}: {p}"
            );
        }
        // The data direction: cells lost on h1's line failed PDUs at h2;
        // what reached h2's link after h2 stopped is lost between the
        // processes (UDP: sent after h2 last heard from the link) or
        // refused by h2's closed ring at the switch (shared memory).
        let data = &rows[0];
        assert_eq!(data["name"], "h1-h2 h1 -> h2", "{r}");
        let lost = |at: &str, why: &str| -> u64 {
            data["losses"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|l| l["at"] == at && l["reason"] == why)
                .map(|l| l["count"].as_u64().unwrap())
                .sum()
        };
        assert!(lost("h2:0 in", "reassembly_failed") > 0, "{over}: {data}");
        assert!(
            lost("h2:0 in", "lost_between_processes") + lost("sw:1 out", "peer_full") > 0,
            "{over}: {data}"
        );
        if over == "udp" {
            assert!(lost("h2:0 in", "lost_between_processes") > 0, "{data}");
        }
        // Without the switch's report, the books say what is missing.
        let (ok, _, err) = books(&[paths[0], paths[2]]);
        assert!(!ok);
        assert!(
            err.contains("IP PVC h1-h2 h1 -> h2: no report ran sw"),
            "{err}"
        );
        for f in files {
            std::fs::remove_file(f).ok();
        }
    }
}

#[test]
fn three_processes_over_shared_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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

/// A node process whose stderr is read as it runs.
struct Started {
    child: Child,
    stderr: std::thread::JoinHandle<String>,
}

/// Starts `aurora node FILE --name NAMES --duration D --json` and returns
/// once it says it has bound its links (so a process started after it
/// finds it there), or has died (its report then says why).
fn start(topo: &std::path::Path, names: &str, duration: &str) -> Started {
    start_with(topo, names, duration, &[])
}

/// [`start`] with more arguments.
fn start_with(topo: &std::path::Path, names: &str, duration: &str, extra: &[&str]) -> Started {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .arg("node")
        .arg(topo)
        .args(["--name", names, "--duration", duration, "--json"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains(" bound ") {
                let _ = tx.send(());
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    let _ = rx.recv_timeout(Duration::from_secs(30));
    Started { child, stderr }
}

fn finish(s: Started) -> Value {
    let out = s.child.wait_with_output().unwrap();
    let err = s.stderr.join().unwrap();
    assert!(out.status.success(), "{err}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `examples/atomic-processes.toml` with free ports instead of its fixed
/// ones (so runs of this test elsewhere on the machine do not meet it).
fn atomic_lan(tag: &str) -> std::path::PathBuf {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/atomic-processes.toml"
    );
    let mut text = std::fs::read_to_string(file).unwrap();
    for port in 47201..=47204 {
        let fixed = format!("127.0.0.1:{port}");
        assert!(text.contains(&fixed), "{fixed} in the example");
        text = text.replace(&fixed, &format!("127.0.0.1:{}", free_port()));
    }
    let topo =
        std::env::temp_dir().join(format!("aurora-atomic-{tag}-{}.toml", std::process::id()));
    std::fs::write(&topo, text).unwrap();
    topo
}

/// Every port's books balance: what the node sent is dropped with a
/// reason, still on its way, or handed to the link, and the link counted
/// it.
fn balanced(r: &Value) {
    for p in r["ports"].as_array().unwrap() {
        assert_eq!(p["unaccounted"], 0, "{p}");
        let n = |k: &str| p[k].as_u64().unwrap();
        assert_eq!(
            n("cells_out"),
            n("overflow")
                + n("lost_on_line")
                + n("in_flight")
                + n("sent")
                + n("peer_unreachable")
                + n("too_long"),
            "{p}"
        );
    }
}

/// Whether every report says its process kept up with real time (the
/// machine is shared: a process that was not given the CPU runs its
/// events late, and the ATOMIC protocol's timers, a 2 ms round of mapping
/// probes, an auto host's 1.5 s wait before it becomes an AC, then see a
/// network that is not the file's; its report says it was not faithful).
fn kept_up(reports: &[&Value]) -> bool {
    reports.iter().all(|r| r["lateness"]["faithful"] == true)
}

/// Whether an ATOMIC host took the AC's role during the run: a race at
/// start-up, seen across processes in real time about one run in ten (and
/// before issue 14's changes too): the host hears no AC in time although
/// the file's AC has mapped the LAN, and two ACs then hand out routes. Not
/// yet understood; such a run says nothing about the LAN's forwarding, so
/// it is run again like one that fell behind.
fn took_over(reports: &[&Value]) -> bool {
    reports.iter().any(|r| {
        r["atomic"]["hosts"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["took_over"].as_u64().unwrap_or(0) > 0))
    })
}

/// Whether an AC's first mapping came out short while answers to it came
/// late. Each process judges only its own lateness: a peer process that
/// was not given the CPU in time answers late while both say they kept
/// up, and that mapping then shows fewer nodes than the file has (seen
/// under the full suite's load: 2 of 6). The report counts late answers
/// over the run, so a short first mapping (fewer nodes than the run's
/// largest) with late answers is the sign; such a run is run again. A
/// late answer to a later mapping leaves the first one, which the tests
/// check, as it was.
fn answered_late(reports: &[&Value]) -> bool {
    reports.iter().any(|r| {
        r["atomic"]["mappings"].as_array().is_some_and(|m| {
            let nodes = |x: &Value| x["nodes"].as_u64().unwrap_or(0);
            let largest = m.iter().map(nodes).max().unwrap_or(0);
            m.first().is_some_and(|first| {
                first["late_answers"].as_u64().unwrap_or(0) > 0 && nodes(first) < largest
            })
        })
    })
}

/// Runs `trial` until its processes all say they kept up, no host took
/// over as AC and no first mapping came out short for late answers, at
/// most three times;
/// checks `always` of every run, and returns the last run's reports if it
/// was clean.
fn judged(trial: impl Fn() -> Vec<Value>, always: impl Fn(&[Value])) -> Option<Vec<Value>> {
    for _ in 0..3 {
        let r = trial();
        always(&r);
        let all: Vec<&Value> = r.iter().collect();
        if kept_up(&all) && !took_over(&all) && !answered_late(&all) {
            return Some(r);
        }
    }
    eprintln!(
        "three runs fell behind real time, had a host take over as AC or heard late mapping answers; only their books were checked"
    );
    None
}

/// `aurora books` over the named reports of an ATOMIC LAN's processes:
/// it succeeds, and its one flow balances; the flow's row.
fn atomic_books(tag: &str, reports: &[(&str, &Value)]) -> Value {
    let flows = atomic_flows_joined(tag, reports);
    assert_eq!(flows.len(), 1, "{flows:?}");
    flows[0].clone()
}

/// Every ATOMIC flow of `aurora books` over `reports`, each checked to
/// balance.
fn atomic_flows_joined(tag: &str, reports: &[(&str, &Value)]) -> Vec<Value> {
    let files = save(tag, reports);
    let paths: Vec<&std::path::Path> = files.iter().map(|f| f.as_path()).collect();
    let (ok, r, err) = books(&paths);
    for f in &files {
        std::fs::remove_file(f).ok();
    }
    assert!(ok, "{err}\n{r}");
    let flows = r["atomic_flows"].as_array().unwrap().clone();
    for f in &flows {
        let n = |k: &str| f[k].as_u64().unwrap();
        assert_eq!(f["unaccounted"], 0, "{r}");
        assert_eq!(
            n("sent"),
            n("delivered") + n("corrupted") + n("lost") + n("in_flight"),
            "{r}"
        );
    }
    flows
}

/// A router's host on an ATOMIC LAN sends to a host and hears from it,
/// the router, the mesh and the host each an `aurora node` (cables over
/// UDP). The router stops first, while the host still sends to it: both
/// flows balance across the processes, and what reached the router's
/// cable end after it stopped is lost between the processes there.
#[test]
fn atomic_flows_of_a_routers_lan_host_balance_across_processes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let udp = || {
        format!(
            "udp_a = \"127.0.0.1:{}\"\nudp_b = \"127.0.0.1:{}\"",
            free_port(),
            free_port()
        )
    };
    let flow = |from: &str, to: &str| {
        format!(
            "[[atomic_flow]]\nfrom = \"{from}\"\nto = \"{to}\"\nsize = 1000\ncount = 2000\n\
             interval = \"1ms\"\nstart = \"1500ms\"\n"
        )
    };
    let text = format!(
        r#"
[[router]]
name = "r"
ports = 1
ip = ["10.1.0.254/24"]
[[mesh]]
name = "m"
size = 2
[[atomic_host]]
name = "ac"
ip = "10.5.0.1/24"
ac = "always"
[[atomic_host]]
name = "b"
ip = "10.5.0.2/24"
[[atomic_host]]
name = "r-lan"
ip = "10.5.0.254/24"
router = "r"
[[cable]]
a = "ac:east"
b = "m.0.0:west"
feet = 3
[[cable]]
a = "r-lan:east"
b = "m.0.1:west"
feet = 3
{}
[[cable]]
a = "b:west"
b = "m.1.1:east"
feet = 3
{}
{}
{}"#,
        udp(),
        udp(),
        flow("r-lan", "b"),
        flow("b", "r-lan")
    );
    let topo = std::env::temp_dir().join(format!("aurora-gw-{}.toml", std::process::id()));
    std::fs::write(&topo, text).unwrap();
    // r stops about one and a half seconds into the flows, which go on
    // for two.
    let m = start(&topo, "m,ac", "5s");
    let r = start(&topo, "r", "3s");
    let b = start(&topo, "b", "5s");
    let (rm, rr, rb) = (finish(m), finish(r), finish(b));
    std::fs::remove_file(&topo).ok();
    let flows = atomic_flows_joined("gw", &[("m", &rm), ("r", &rr), ("b", &rb)]);
    assert_eq!(flows.len(), 2, "{flows:?}");
    let named = |from: &str| {
        flows
            .iter()
            .find(|f| f["from"].as_str().is_some_and(|n| n.starts_with(from)))
            .unwrap_or_else(|| panic!("no flow from {from}: {flows:?}"))
    };
    let (out, back) = (named("r-lan"), named("b"));
    let n = |f: &Value, k: &str| f[k].as_u64().unwrap();
    // The router's host sent until it stopped, and what it sent arrived.
    assert!(n(out, "sent") > 0 && n(out, "sent") < 2000, "{out}");
    assert!(n(out, "delivered") > 0, "{out}");
    // b's flow went on after the router stopped: lost where it would have
    // arrived.
    assert_eq!(n(back, "sent"), 2000, "{back}");
    assert!(
        n(back, "delivered") > 0 && n(back, "delivered") < 2000,
        "{back}"
    );
    assert!(
        back["losses"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["reason"] == "lost_between_processes"
                && l["at"].as_str().unwrap().starts_with("r-lan")),
        "{back}"
    );
}

#[test]
fn an_atomic_flow_balances_across_processes_when_its_receiver_stops_first() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let topo = atomic_lan("early");
    // b stops about 0.2 s into a's flow, which goes on for a second.
    let m = start(&topo, "m", "4s");
    let b = start(&topo, "b", "2s");
    let a = start(&topo, "a", "4s");
    let (ra, rb, rm) = (finish(a), finish(b), finish(m));
    std::fs::remove_file(&topo).ok();
    let f = atomic_books("early", &[("a", &ra), ("b", &rb), ("m", &rm)]);
    assert_eq!(f["sent"], 2000, "{f}");
    assert!(f["delivered"].as_u64().unwrap() < 2000, "{f}");
    // What the mesh sent b after b stopped reading is lost between the
    // processes, placed at b's end of the cable (later, once the AC no
    // longer finds b, a's packets also have no route).
    let losses = f["losses"].as_array().unwrap();
    assert!(
        losses
            .iter()
            .any(|l| l["reason"] == "lost_between_processes"
                && l["at"].as_str().unwrap().starts_with("b-if:")),
        "{f}"
    );
}

#[test]
fn an_atomic_lan_runs_as_three_processes_over_udp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let trial = || {
        let topo = atomic_lan("three");
        // The mesh, then b, then a (whose AC maps the LAN at its start),
        // each once the one before has bound its cables.
        let m = start(&topo, "m", "4s");
        let b = start(&topo, "b", "4s");
        let a = start(&topo, "a", "4s");
        let r = vec![finish(a), finish(b), finish(m)];
        std::fs::remove_file(&topo).ok();
        r
    };
    let always = |r: &[Value]| {
        let (ra, rb, rm) = (&r[0], &r[1], &r[2]);
        for x in r {
            balanced(x);
        }
        // The flow's books, joined, balance whatever the run was like.
        let f = atomic_books("three", &[("a", ra), ("b", rb), ("m", rm)]);
        assert_eq!(f["sent"], 2000, "{f}");
        assert_eq!(rb["atomic"]["flows"][0]["corrupted"], 0, "{rb}");
        assert_eq!(rm["ports"].as_array().unwrap().len(), 2, "{rm}");
        // Each process reports its own nodes' lateness, on one engine.
        let late = |x: &Value| x["lateness"]["nodes"].as_array().unwrap().len();
        assert_eq!((late(ra), late(rb), late(rm)), (2, 2, 4));
    };
    let Some(r) = judged(trial, always) else {
        return;
    };
    let (ra, rb, rm) = (&r[0], &r[1], &r[2]);
    // The AC on a mapped the whole LAN across the three processes.
    let map = &ra["atomic"]["mappings"][0];
    assert_eq!(
        (map["nodes"].as_u64(), map["hosts"].as_u64()),
        (Some(6), Some(2)),
        "{ra}"
    );
    // b got a's flow, with a route from the AC.
    let f = &rb["atomic"]["flows"][0];
    assert_eq!(f["delivered"], 2000, "{rb}");
    let joined = atomic_books("three-kept-up", &[("a", ra), ("b", rb), ("m", rm)]);
    assert_eq!(
        (&joined["delivered"], &joined["lost"]),
        (&2000.into(), &0.into())
    );
    assert_eq!(rb["atomic"]["hosts"][0]["ac"], "a");
    // The mesh's cables carried it all, nothing lost.
    for c in rm["ports"].as_array().unwrap() {
        assert_eq!(c["lost_in_transit"], 0, "{c}");
    }
}

#[test]
fn an_atomic_mesh_and_host_run_as_one_process() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let trial = || {
        let topo = atomic_lan("two");
        let mb = start(&topo, "m,b", "4s");
        let a = start(&topo, "a", "4s");
        let r = vec![finish(a), finish(mb)];
        std::fs::remove_file(&topo).ok();
        r
    };
    let always = |r: &[Value]| {
        let (ra, rmb) = (&r[0], &r[1]);
        balanced(ra);
        balanced(rmb);
        assert_eq!(rmb["name"], "m,b");
        // b's cable to the mesh is inside the process: one cable out each.
        assert_eq!(rmb["ports"].as_array().unwrap().len(), 1, "{rmb}");
        assert_eq!(ra["ports"].as_array().unwrap().len(), 1, "{ra}");
        assert_eq!(rmb["atomic"]["flows"][0]["corrupted"], 0, "{rmb}");
        // The process's lateness covers its 4 Mosaic nodes, b's interface
        // node and b.
        let late = rmb["lateness"]["nodes"].as_array().unwrap();
        assert_eq!(late.len(), 6, "{rmb}");
    };
    let Some(r) = judged(trial, always) else {
        return;
    };
    let (ra, rmb) = (&r[0], &r[1]);
    let map = &ra["atomic"]["mappings"][0];
    assert_eq!(
        (map["nodes"].as_u64(), map["hosts"].as_u64()),
        (Some(6), Some(2)),
        "{ra}"
    );
    let f = &rmb["atomic"]["flows"][0];
    assert_eq!(f["delivered"], 2000, "{rmb}");
    // What a sent on its cable is what the mesh received on it.
    let (pa, pm) = (&ra["ports"][0], &rmb["ports"][0]);
    assert_eq!(pa["sent"], pm["cells_in"]);
    assert_eq!(pm["sent"], pa["cells_in"]);
}

#[test]
fn a_host_and_its_switch_run_as_one_process() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let trial = || {
        let p: Vec<u16> = (0..4).map(|_| free_port()).collect();
        let udp = |x: u16, y: u16| format!("udp_a = \"127.0.0.1:{x}\"\nudp_b = \"127.0.0.1:{y}\"");
        // 2000 PDUs of 32 cells from 200 ms on, 1 s of them: all sent and
        // delivered well before either process stops.
        let text = topology(&udp(p[0], p[1]), &udp(p[2], p[3]), 1500, "500us")
            .replace("count = 1000000", "count = 2000\nstart = \"200ms\"");
        let topo =
            std::env::temp_dir().join(format!("aurora-partition-{}.toml", std::process::id()));
        std::fs::write(&topo, text).unwrap();
        let h2 = start(&topo, "h2", "3s");
        let h1sw = start(&topo, "h1,sw", "3s");
        let r = vec![finish(h1sw), finish(h2)];
        std::fs::remove_file(&topo).ok();
        r
    };
    let always = |r: &[Value]| {
        let (h1sw, h2) = (&r[0], &r[1]);
        balanced(h1sw);
        balanced(h2);
        assert_eq!(h1sw["name"], "h1,sw");
        let mut nodes: Vec<&str> = h1sw["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        nodes.sort_unstable();
        assert_eq!(nodes, ["h1", "sw"]);
        // The lateness report covers both nodes of the process.
        assert_eq!(h1sw["lateness"]["nodes"].as_array().unwrap().len(), 2);
        // The link between h1 and sw is inside the process, with the
        // model: one row each way; the process's one port is the switch's
        // link to h2.
        assert_eq!(h1sw["links"].as_array().unwrap().len(), 2, "{h1sw}");
        let ports = h1sw["ports"].as_array().unwrap();
        assert_eq!(ports.len(), 1, "{h1sw}");
        assert_eq!(ports[0]["node"], "sw");
        assert_eq!(ports[0]["link"], "sw:1 <-> h2:0");
        // PDUs: every one sent is delivered, or missing with cells lost
        // on the way to show for it; none damaged.
        let sent = h1sw["sent"][0][1].as_u64().unwrap();
        let rx = &h2["received"][0];
        let n = |k: &str| rx[k].as_u64().unwrap();
        assert_eq!(sent, 2000, "{h1sw}");
        assert_eq!(n("corrupted"), 0, "{h2}");
        assert!(n("delivered") + n("missing") <= sent, "{h2}");
        if n("delivered") < sent {
            let lost = h2["ports"][0]["lost_in_transit"].as_u64().unwrap()
                + ports[0]["overflow"].as_u64().unwrap();
            assert!(lost > 0, "PDUs missing with no cell lost: {h1sw} {h2}");
        }
    };
    let Some(r) = judged(trial, always) else {
        return;
    };
    let (h1sw, h2) = (&r[0], &r[1]);
    // Kept up: everything arrived, and every hop's cells match the next.
    assert_eq!(h2["received"][0]["delivered"], 2000, "{h2}");
    assert_eq!(h2["received"][0]["missing"], 0, "{h2}");
    let up = h1sw["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["dir"] == "h1:0 -> sw:0")
        .unwrap_or_else(|| panic!("no h1 -> sw link in {h1sw}"));
    assert_eq!(up["offered"], 2000 * 32, "{up}");
    assert_eq!(up["delivered"], up["offered"], "{up}");
    let out = &h1sw["ports"][0];
    assert_eq!(out["cells_out"], up["delivered"], "{out}");
    assert_eq!(out["sent"], out["cells_out"], "{out}");
    assert_eq!(out["switch_dropped"], 0, "{out}");
    let inn = &h2["ports"][0];
    assert_eq!(inn["cells_in"], out["sent"], "{inn}");
    assert_eq!(inn["lost_in_transit"], 0, "{inn}");
}

/// A `[[port]]` on a switch's port to another process: the process that
/// runs the switch (on two workers, h1 on one and sw on the other) runs
/// the discipline and reports it. Two PVCs of weights
/// 3 and 1 from h1 overload sw's OC-3c line to h2 (each offers 90 % of it);
/// WF2Q+ serves them 3 to 1, every cell offered to the port is served,
/// waiting or dropped by a named reason, and the port's drops are the
/// overflow in the process's books; the switch's policer, in the same
/// process, reports the PVC that breaks its contract.
#[test]
fn a_port_discipline_runs_in_a_node_process() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let trial = || {
        let p: Vec<u16> = (0..4).map(|_| free_port()).collect();
        let udp = |x: u16, y: u16| format!("udp_a = \"127.0.0.1:{x}\"\nudp_b = \"127.0.0.1:{y}\"");
        let mut text = topology(&udp(p[0], p[1]), &udp(p[2], p[3]), 9180, "600us")
            .replacen("rate = \"oc3\"", "rate = \"oc12\"\ndelay = \"1ms\"", 1)
            .replace(
                "path = [\"h1\", \"sw\", \"h2\"]",
                "path = [\"h1\", \"sw\", \"h2\"]\nweight = 3",
            )
            .replace("count = 1000000", "count = 1000\nstart = \"200ms\"");
        // The first link (h1 to sw) is the fast one; the second stays OC-3c.
        assert_eq!(text.matches("\"oc12\"").count(), 1, "{text}");
        text += r#"
[[pvc]]
name = "h1-to-h2-b"
path = ["h1", "sw", "h2"]
weight = 1
contract = "cbr:pcr=200k"
shape = false
police = "tag"
[[flow]]
pvc = "h1-to-h2-b"
sdu = 9180
count = 1000
start = "200ms"
interval = "600us"
[[port]]
at = "sw:1"
discipline = "wf2q+"
buffer = 2000
queue_buffer = 1000
"#;
        let topo =
            std::env::temp_dir().join(format!("aurora-qos-node-{}.toml", std::process::id()));
        std::fs::write(&topo, text).unwrap();
        let h2 = start(&topo, "h2", "2s");
        let h1sw = start_with(&topo, "h1,sw", "2s", &["--workers", "2"]);
        let r = vec![finish(h1sw), finish(h2)];
        std::fs::remove_file(&topo).ok();
        r
    };
    let always = |r: &[Value]| {
        let (h1sw, h2) = (&r[0], &r[1]);
        balanced(h1sw);
        balanced(h2);
        // h1 and sw, 1 ms apart, ran on a worker each: the switch's link
        // to the other process is polled by its own worker.
        assert_eq!(h1sw["workers"], 2, "{h1sw}");
        assert_eq!(h2["workers"], 1, "{h2}");
        // Only the process that runs the switch has the discipline.
        assert!(h2.get("disciplines").is_none(), "{h2}");
        let d = h1sw["disciplines"].as_array().unwrap();
        assert_eq!(d.len(), 1, "{h1sw}");
        assert_eq!(d[0]["port"], "sw:1");
        assert_eq!(d[0]["discipline"], "wf2q+");
        let queues = d[0]["queues"].as_array().unwrap();
        let n = |q: &Value, k: &str| q[k].as_u64().unwrap();
        let served: u64 = queues.iter().map(|q| n(q, "served")).sum();
        let dropped: u64 = queues
            .iter()
            .flat_map(|q| q["dropped"].as_array().unwrap())
            .map(|x| x[1].as_u64().unwrap())
            .sum();
        let port = &h1sw["ports"][0];
        assert_eq!(port["node"], "sw");
        // The port's drops are the overflow on the line to h2 (the ring
        // to the far end refused nothing more), and what it served went on.
        assert_eq!(
            n(port, "overflow"),
            dropped + n(port, "peer_full"),
            "{h1sw}"
        );
        // What the port took and has not served still waits, which the
        // books count as in flight.
        let waiting = n(port, "cells_out") - dropped - served;
        assert!(waiting <= n(port, "in_flight"), "{h1sw}");
        assert!(dropped > 0, "the port was not overloaded: {h1sw}");
        // The second PVC breaks its contract (90 % of OC-3c against 200k
        // cells a second): sw's policer, in this process, tags the excess.
        assert!(h2.get("contracts").is_none(), "{h2}");
        let c = &h1sw["contracts"][0];
        assert_eq!(c["pvc"], "h1-to-h2-b", "{h1sw}");
        assert_eq!(c["policed"][0], "sw:0", "{h1sw}");
        let policed = |i: usize| c["policed"][i].as_u64().unwrap();
        assert!(policed(1) > 0 && policed(2) > 0, "{c}");
    };
    let Some(r) = judged(trial, always) else {
        return;
    };
    // Kept up: the shares are the weights'.
    let q = r[0]["disciplines"][0]["queues"].as_array().unwrap().clone();
    let s = |i: usize| q[i]["served"].as_u64().unwrap() as f64;
    let share = s(0) / (s(0) + s(1));
    assert!((share - 0.75).abs() < 0.03, "{}", r[0]);
}
