//! Real IP traffic across Aurora between network namespaces: each host an
//! `aurora node` process in its own namespace with a TUN interface, the
//! switches and the router their own processes, links over shared-memory
//! rings. Unchanged tools (ping, iperf3, nc, tshark) are the judges.
//!
//! These tests need root (network namespaces, TUN devices) and the tools;
//! without them they fail, saying what is missing, unless `scripts/test`
//! said it could not provide them: then they skip loudly (see
//! `common/mod.rs`).

mod common;

use common::{Netns, Proc};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Tests whose ATOMIC LAN maps itself against the wall clock run one at a
/// time: two at once on a small machine starve each other's mapping
/// rounds, and a host the AC missed drops packets until the next map.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn aurora() -> &'static str {
    env!("CARGO_BIN_EXE_aurora")
}

fn node(ns: Option<&Netns>, topo: &Path, name: &str, extra: &[&str]) -> Proc {
    let mut c = match ns {
        Some(n) => n.cmd(aurora()),
        None => Command::new(aurora()),
    };
    c.args(["node"])
        .arg(topo)
        .args(["--name", name, "--duration", "120s"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Proc(Some(c.spawn().expect("start aurora node")))
}

/// Writes `example` with its shared-memory ring names made unique to this
/// test process, so tests and runs do not meet each other's rings.
fn topology(example: &str, tag: &str) -> PathBuf {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples")
            .join(example),
    )
    .unwrap()
    .replace("shm = \"aurora-", &format!("shm = \"aurora-{tag}-"));
    let path = std::env::temp_dir().join(format!("aurora-{tag}-{example}"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Pings until one answer comes (the nodes are starting), or gives up;
/// a node that died on the way (no TUN device, say) fails the test with
/// its own words.
fn wait_for_ping(ns: &Netns, addr: &str, nodes: &mut [&mut Proc]) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        for n in nodes.iter_mut() {
            if let Some(Ok(Some(status))) = n.0.as_mut().map(|c| c.try_wait()) {
                let out = n.0.take().unwrap().wait_with_output().unwrap();
                panic!(
                    "an aurora node stopped ({status}) before the network came up:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        if ns
            .run("ping", &["-c", "1", "-W", "1", addr])
            .status
            .success()
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("no answer from {addr} within 20 s of starting the nodes");
}

fn ping_clean(ns: &Netns, addr: &str) -> String {
    let out = ns.run("ping", &["-c", "5", "-i", "0.2", "-W", "2", addr]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && text.contains(" 0% packet loss"),
        "ping {addr} from {}:\n{text}{}",
        ns.0,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn ping_iperf3_and_a_file_copy_cross_aurora_between_namespaces() {
    if !common::ready(
        "ip_netns::ping_iperf3_and_a_file_copy_cross_aurora_between_namespaces",
        &["root", "ip", "ping", "iperf3", "nc"],
    ) {
        return;
    }
    let tag = format!("t{}", std::process::id());
    let topo = topology("ip.toml", &tag);
    let (a, b) = (
        Netns::new(format!("{tag}-a")),
        Netns::new(format!("{tag}-b")),
    );
    let mut sw = node(None, &topo, "sw", &[]);
    let mut h1 = node(Some(&a), &topo, "h1", &[]);
    let mut h2 = node(Some(&b), &topo, "h2", &[]);
    wait_for_ping(&a, "10.1.0.2", &mut [&mut sw, &mut h1, &mut h2]);

    // ping, both ways, nothing lost.
    ping_clean(&a, "10.1.0.2");
    ping_clean(&b, "10.1.0.1");

    // iperf3 TCP for a few seconds.
    let port = 20000 + (std::process::id() % 20000);
    let bps = iperf3(&a, &b, "10.1.0.2", port, 3);
    assert!(bps > 0.0, "iperf3 gave {bps} b/s");
    eprintln!("iperf3 TCP through Aurora: {:.0} Mb/s", bps / 1e6);

    // A file copied with nc arrives byte for byte.
    let dir = std::env::temp_dir();
    let src = dir.join(format!("aurora-{tag}-src.bin"));
    let dst = dir.join(format!("aurora-{tag}-dst.bin"));
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let data: Vec<u8> = (0..3_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&src, &data).unwrap();
    let nport = (port + 1).to_string();
    let receiver = b
        .cmd("sh")
        .args(["-c", &format!("nc -l -N {nport} > {}", dst.display())])
        .spawn()
        .expect("nc receiver");
    let mut receiver = Proc(Some(receiver));
    std::thread::sleep(Duration::from_millis(500));
    let sent = a
        .cmd("sh")
        .args(["-c", &format!("nc -N 10.1.0.2 {nport} < {}", src.display())])
        .output()
        .unwrap();
    assert!(sent.status.success(), "nc sender failed");
    let status = receiver.0.take().unwrap().wait().unwrap();
    assert!(status.success(), "nc receiver failed");
    let got = std::fs::read(&dst).unwrap();
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&dst);
    assert_eq!(got.len(), data.len(), "file length");
    assert!(got == data, "the copy differs from the original");

    // Ctrl-C: the host reports and its TUN interface is gone.
    let out = h1.interrupt();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("TUN aur-h1 10.1.0.1/24"), "{report}");
    assert!(report.contains("-> 10.1.0.2"), "{report}");
    let link = a.run("ip", &["link", "show", "aur-h1"]);
    assert!(
        !link.status.success(),
        "aur-h1 still exists after the node stopped"
    );
    drop(h2);
    drop(sw);
    let _ = std::fs::remove_file(&topo);
}

/// The fields tshark shows for every IP packet in `file`.
fn tshark_ip(file: &Path) -> Vec<Vec<String>> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-Y",
            "ip",
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "ip.ttl",
            "-e",
            "ip.checksum.status",
            "-e",
            "icmp.type",
            "-e",
            "_ws.malformed",
        ])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark on {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn the_router_forwards_between_subnets_with_ttl_and_checksum_checked_in_captures() {
    if !common::ready(
        "ip_netns::the_router_forwards_between_subnets_with_ttl_and_checksum_checked_in_captures",
        &["root", "ip", "ping", "tshark"],
    ) {
        return;
    }
    let tag = format!("r{}", std::process::id());
    let topo = topology("routed.toml", &tag);
    let cap = std::env::temp_dir().join(format!("aurora-{tag}-cap"));
    let _ = std::fs::remove_dir_all(&cap);
    let capture = [
        "--capture",
        cap.to_str().unwrap(),
        "--capture-format",
        "sunatm",
    ];
    let (a, b, c) = (
        Netns::new(format!("{tag}-a")),
        Netns::new(format!("{tag}-b")),
        Netns::new(format!("{tag}-c")),
    );
    let mut sw1 = node(None, &topo, "sw1", &[]);
    let mut sw2 = node(None, &topo, "sw2", &[]);
    let mut r = node(Some(&c), &topo, "r", &capture);
    let mut h1 = node(Some(&a), &topo, "h1", &[]);
    let mut h2 = node(Some(&b), &topo, "h2", &capture);
    wait_for_ping(
        &a,
        "10.2.0.1",
        &mut [&mut sw1, &mut sw2, &mut r, &mut h1, &mut h2],
    );
    let text = ping_clean(&a, "10.2.0.1");
    assert!(text.contains("ttl=63"), "one router on the way:\n{text}");
    // TTL 1 from h1 dies at the router, which says so.
    let out = a.run("ping", &["-c", "2", "-i", "0.3", "-t", "1", "10.2.0.1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("From 10.1.0.254") && text.contains("Time to live exceeded"),
        "{text}"
    );
    // The router answers pings to its far address itself.
    ping_clean(&a, "10.2.0.254");

    let r_out = r.interrupt();
    let h2_out = h2.interrupt();
    let report = String::from_utf8_lossy(&r_out.stdout);
    assert!(report.contains("ttl-expired"), "{report}");

    // What arrived at the router from h1: TTL 64, good checksums; what the
    // router delivered to h2: the same requests with TTL 63, checksums
    // still good (updated incrementally).
    let at_router = tshark_ip(&cap.join("r-p0.pcap"));
    let at_h2 = tshark_ip(&cap.join("h2-p0.pcap"));
    let requests = |rows: &[Vec<String>], ttl: &str| {
        rows.iter()
            .filter(|f| f[1] == "10.2.0.1" && f[4] == "8" && f[2] == ttl)
            .count()
    };
    // 1 to start + 5 counted + 2 with TTL 1 reach the router.
    assert!(requests(&at_router, "64") >= 5, "{at_router:?}");
    let ttl1 = at_router.iter().filter(|f| f[2] == "1").count();
    assert_eq!(ttl1, 2, "{at_router:?}");
    assert!(requests(&at_h2, "63") >= 5, "{at_h2:?}");
    assert!(
        at_h2.iter().all(|f| f[2] != "64" && f[2] != "1"),
        "{at_h2:?}"
    );
    for f in at_router.iter().chain(&at_h2) {
        assert_eq!(f[3], "1", "every IP checksum good: {f:?}");
        assert_eq!(
            f.get(5).map_or("", |s| s.as_str()),
            "",
            "not malformed: {f:?}"
        );
    }
    let _ = h2_out;
    let _ = std::fs::remove_dir_all(&cap);
    let _ = std::fs::remove_file(&topo);
}

/// Runs `ip` with `args`, failing the test with its words if it fails.
fn ip_cmd(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ping_crosses_an_atomic_lan_between_namespaces() {
    if !common::ready(
        "ip_netns::ping_crosses_an_atomic_lan_between_namespaces",
        &["root", "ip", "ping"],
    ) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id() % 100_000;
    let tag = format!("x{pid}");
    let (a, b) = (
        Netns::new(format!("{tag}-a")),
        Netns::new(format!("{tag}-b")),
    );
    // A veth pair from the root namespace (where the mesh process runs)
    // into each host's namespace, for the cables' UDP.
    let subnet = |k: u32| format!("10.{}.{}", 200 + (pid % 50), k);
    let mut veths = Vec::new();
    for (k, ns) in [(1u32, &a), (2, &b)] {
        let (outer, inner) = (format!("v{pid}{k}"), format!("w{pid}{k}"));
        let _ = Command::new("ip").args(["link", "del", &outer]).output();
        ip_cmd(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        ip_cmd(&["link", "set", &inner, "netns", &ns.0]);
        ip_cmd(&["addr", "add", &format!("{}.1/30", subnet(k)), "dev", &outer]);
        ip_cmd(&["link", "set", &outer, "up"]);
        let run = |args: &[&str]| {
            let o = ns.run("ip", args);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        run(&["addr", "add", &format!("{}.2/30", subnet(k)), "dev", &inner]);
        run(&["link", "set", &inner, "up"]);
        veths.push(outer);
    }
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/atomic-processes.toml"),
    )
    .unwrap()
    .replace(
        "udp_a = \"127.0.0.1:47201\"",
        &format!("udp_a = \"{}.2:47201\"", subnet(1)),
    )
    .replace(
        "udp_b = \"127.0.0.1:47202\"",
        &format!("udp_b = \"{}.1:47202\"", subnet(1)),
    )
    .replace(
        "udp_a = \"127.0.0.1:47203\"",
        &format!("udp_a = \"{}.2:47203\"", subnet(2)),
    )
    .replace(
        "udp_b = \"127.0.0.1:47204\"",
        &format!("udp_b = \"{}.1:47204\"", subnet(2)),
    )
    .replace("ip = \"10.6.0.1\"", "ip = \"10.6.0.1/24\"\ntun = \"aur-a\"")
    .replace("ip = \"10.6.0.2\"", "ip = \"10.6.0.2/24\"\ntun = \"aur-b\"");
    let topo = std::env::temp_dir().join(format!("aurora-{tag}-atomic.toml"));
    std::fs::write(&topo, text).unwrap();
    let mut m = node(None, &topo, "m", &[]);
    let mut ha = node(Some(&a), &topo, "a", &[]);
    let mut hb = node(Some(&b), &topo, "b", &[]);
    wait_for_ping(&a, "10.6.0.2", &mut [&mut m, &mut ha, &mut hb]);
    ping_clean(&a, "10.6.0.2");
    ping_clean(&b, "10.6.0.1");
    let out = ha.interrupt();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("a:East <-> m.0.0:West"), "{report}");
    drop(hb);
    drop(m);
    for v in veths {
        let _ = Command::new("ip").args(["link", "del", &v]).output();
    }
    let _ = std::fs::remove_file(&topo);
}

/// iperf3 TCP for `secs` from `client` to the server it starts in
/// `server` at `addr`: bits per second received.
fn iperf3(client: &Netns, server: &Netns, addr: &str, port: u32, secs: u32) -> f64 {
    let s = server
        .cmd("iperf3")
        .args(["-s", "-1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    let _server = Proc(Some(s));
    std::thread::sleep(Duration::from_millis(500));
    let out = client.run(
        "iperf3",
        &[
            "-c",
            addr,
            "-p",
            &port.to_string(),
            "-t",
            &secs.to_string(),
            "-J",
        ],
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "iperf3 gave no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
}

/// `examples/interwork.toml` with namespaces, rings and the cable's UDP
/// ports (`port`, `port + 1`) of this test's own, written to a file; and
/// the two hosts' namespaces, made.
fn interwork(tag: &str, port: u32) -> (PathBuf, Netns, Netns) {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/interwork.toml"),
    )
    .unwrap()
    .replace("netns = \"aur-", &format!("netns = \"{tag}-"))
    .replace("shm = \"aurora-", &format!("shm = \"aurora-{tag}-"))
    .replace("127.0.0.1:47301", &format!("127.0.0.1:{port}"))
    .replace("127.0.0.1:47302", &format!("127.0.0.1:{}", port + 1));
    let topo = std::env::temp_dir().join(format!("aurora-{tag}-interwork.toml"));
    std::fs::write(&topo, text).unwrap();
    let atm = Netns::new(format!("{tag}-atm"));
    let lan = Netns::new(format!("{tag}-lan"));
    (topo, atm, lan)
}

/// In one `aurora run` on two workers, each polling the TUN interface of
/// its own side.
#[test]
fn ping_and_iperf3_cross_from_an_atm_host_to_an_atomic_host_in_one_run() {
    if !common::ready(
        "ip_netns::ping_and_iperf3_cross_from_an_atm_host_to_an_atomic_host_in_one_run",
        &["root", "ip", "ping", "iperf3"],
    ) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tag = format!("w{}", std::process::id());
    let (topo, atm, lan) = interwork(&tag, 30000 + 2 * (std::process::id() % 10000));
    // The link from the switch to the router 1 ms long, so that two
    // workers split the run there: the ATM host's TUN interface on one,
    // the router, the LAN and the LAN host's TUN interface on the other.
    let text = std::fs::read_to_string(&topo).unwrap();
    let slow = "b = \"r:0\"\nrate = \"oc12\"\ndelay = \"10us\"";
    assert!(text.contains(slow), "{text}");
    let text = text.replace(slow, "b = \"r:0\"\nrate = \"oc12\"\ndelay = \"1ms\"");
    std::fs::write(&topo, text).unwrap();
    let run = Command::new(aurora())
        .args(["run"])
        .arg(&topo)
        .args(["--duration", "25s", "--workers", "2", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start aurora run");
    let mut run = Proc(Some(run));
    wait_for_ping(&atm, "10.5.0.2", &mut [&mut run]);
    // One router between: TTL 63 on arrival, both ways, nothing lost.
    assert!(ping_clean(&atm, "10.5.0.2").contains("ttl=63"));
    assert!(ping_clean(&lan, "10.1.0.1").contains("ttl=63"));
    let port = 20000 + (std::process::id() % 20000);
    let up = iperf3(&atm, &lan, "10.5.0.2", port, 2);
    let down = iperf3(&lan, &atm, "10.1.0.1", port + 1, 2);
    assert!(up > 0.0 && down > 0.0, "iperf3: {up} and {down} b/s");
    eprintln!(
        "iperf3 TCP ATM -> ATOMIC {:.0} Mb/s, ATOMIC -> ATM {:.0} Mb/s",
        up / 1e6,
        down / 1e6
    );
    let out = run.0.take().unwrap().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Both TUN interfaces carried the traffic; the ATOMIC side mapped.
    let tuns = r["tuns"].as_array().unwrap();
    assert_eq!(tuns.len(), 2, "{r}");
    for t in tuns {
        assert!(t["read"].as_u64().unwrap() > 100, "{t}");
        assert_eq!(t["errors"], 0, "{t}");
    }
    assert_eq!(r["atomic"]["mappings"][0]["hosts"], 3, "{r}");
    assert_eq!(r["unaccounted"], 0);
    assert_eq!(r["workers"], 2, "{r}");
    let _ = std::fs::remove_file(&topo);
}

#[test]
fn ping_and_iperf3_cross_from_an_atm_host_to_an_atomic_host_across_three_processes() {
    if !common::ready(
        "ip_netns::ping_and_iperf3_cross_from_an_atm_host_to_an_atomic_host_across_three_processes",
        &["root", "ip", "ping", "iperf3"],
    ) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tag = format!("v{}", std::process::id());
    // A UDP port pair of this test's own for the cable between processes.
    let (topo, atm, lan) = interwork(&tag, 30000 + 2 * (std::process::id() % 10000));
    // The hosts' TUN interfaces go into their namespaces by the file's
    // netns keys; the processes themselves stay in this one.
    let mut middle = node(None, &topo, "sw,r,m,ac", &[]);
    let mut h1 = node(None, &topo, "h1", &[]);
    let mut b = node(None, &topo, "b", &[]);
    wait_for_ping(&atm, "10.5.0.2", &mut [&mut middle, &mut h1, &mut b]);
    assert!(ping_clean(&atm, "10.5.0.2").contains("ttl=63"));
    assert!(ping_clean(&lan, "10.1.0.1").contains("ttl=63"));
    let iport = 20000 + (std::process::id() % 20000);
    let up = iperf3(&atm, &lan, "10.5.0.2", iport, 2);
    assert!(up > 0.0, "iperf3 ATM -> ATOMIC: {up} b/s");
    eprintln!(
        "iperf3 TCP ATM -> ATOMIC across three processes: {:.0} Mb/s",
        up / 1e6
    );
    let out = middle.interrupt();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = String::from_utf8_lossy(&out.stdout);
    // The router forwarded, the AC mapped, every port balanced.
    assert!(
        report.contains("ATOMIC, real time, one process"),
        "{report}"
    );
    assert!(!report.contains("does not balance"), "{report}");
    drop(h1);
    drop(b);
    let _ = std::fs::remove_file(&topo);
}
