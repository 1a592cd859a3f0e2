//! `aurora vc` against running `aurora node` processes, in real time:
//! hosts a and b, each a process of its own with a control socket, and a
//! third process holding the VuNet switches and the relay between them,
//! joined over UDP on loopback and sharing a VCI table file. `aurora vc
//! open` on a's socket opens a VC to b through the relay in the other
//! process; the PDUs arrive at b (its `aurora vc list`); `aurora vc close`
//! clears the relay's entry and empties the table; an open to a host that
//! is not there fails with its reason. Also: `aurora run --control` in
//! real time (one process holding both hosts, so commands name one; the
//! run's report has the VC's books balanced), mistakes in `[signal] hosts`
//! with their lines, and `--control` on a process with no signalling host.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn aurora() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aurora"))
}

/// A fresh folder for one test's files.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("aurora-vc-{}-{name}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A free UDP port on loopback.
fn port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// a - s0 - r0 - s1 - b, the host links crossing processes over UDP.
fn topology(table: &Path) -> String {
    let link = |a: &str, b: &str, udp: bool| {
        let mut s =
            format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"1000000\"\ndelay = \"50us\"\n");
        if udp {
            s += &format!(
                "udp_a = \"127.0.0.1:{}\"\nudp_b = \"127.0.0.1:{}\"\n",
                port(),
                port()
            );
        }
        s + "\n"
    };
    // Generous timeouts: on a loaded machine a control reply may be late,
    // or the far process not yet listening.
    let mut t = format!(
        "[signal]\nkey = \"k\"\ntable = \"{}\"\ntimeout = \"200ms\"\nretries = 10\n\
         hosts = [\"a\", \"b\"]\n\n",
        table.display()
    );
    for s in ["s0", "s1"] {
        t += &format!("[[switch]]\nname = \"{s}\"\nports = 3\nkind = \"vunet\"\n\n");
    }
    t += "[[relay]]\nname = \"r0\"\n\n[[host]]\nname = \"a\"\n\n[[host]]\nname = \"b\"\n\n";
    t += &link("a", "s0:2", true);
    t += &link("b", "s1:2", true);
    t += &link("s0:1", "r0:0", false);
    t += &link("r0:1", "s1:0", false);
    t
}

/// Runs `aurora vc ARGS`, failing the test if it takes over a minute.
fn vc(args: &[&str]) -> Output {
    let mut child = aurora()
        .arg("vc")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("aurora vc {args:?} took over a minute");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// `aurora vc list --json` on `sock`.
fn list(sock: &Path) -> Value {
    let out = vc(&["list", "--control", sock.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

/// Lists on `sock` until `ok` holds of the list or `secs` pass; the last
/// list.
fn list_until(sock: &Path, secs: u64, ok: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let l = list(sock);
        if ok(&l) || Instant::now() > end {
            return l;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether a control socket at `sock` takes connections (its file
/// appears a moment before it listens).
fn listening(sock: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(sock).is_ok()
}

/// Ends a node process with SIGTERM and returns its JSON report.
fn stop(c: Child) -> Value {
    let pid = libc::pid_t::try_from(c.id()).unwrap();
    // SAFETY: kill() on our own child, which has not been waited for.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let out = c.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"))
}

/// Entries in the table file (its first line is the header).
fn table_entries(table: &Path) -> usize {
    let held = std::fs::read_to_string(table).unwrap_or_default();
    held.lines().count().saturating_sub(1)
}

#[test]
fn aurora_vc_opens_uses_and_closes_a_vc_between_two_node_processes() {
    let dir = folder("procs");
    let table = dir.join("vci-table");
    let file = dir.join("topo.toml");
    std::fs::write(&file, topology(&table)).unwrap();
    let (sock_a, sock_b) = (dir.join("a.sock"), dir.join("b.sock"));
    let node = |names: &str, control: Option<&Path>| {
        let mut c = aurora();
        c.arg("node")
            .arg(&file)
            .args(["--name", names, "--json", "--duration", "300s"]);
        if let Some(s) = control {
            c.arg("--control").arg(s);
        }
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The switches and the relay first, so they are likely listening
    // when the hosts start (the retries cover the rest).
    let sw = node("s0,r0,s1", None);
    let a = node("a", Some(&sock_a));
    let b = node("b", Some(&sock_b));
    let end = Instant::now() + Duration::from_secs(60);
    while !(listening(&sock_a) && listening(&sock_b)) {
        assert!(Instant::now() < end, "the control sockets never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    let a_sock = sock_a.to_str().unwrap();

    let out = vc(&[
        "open",
        "--control",
        a_sock,
        "--to",
        "b",
        "--count",
        "40",
        "--interval",
        "2ms",
        "--sdu",
        "500",
        "--wait",
        "60s",
    ]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    let id = said.lines().next().unwrap().to_string();
    assert_eq!(id, "a/1");
    assert!(
        said.contains("VC a/1 open to b through r0 on VCIs"),
        "{said}"
    );
    // Open: the relay's segment and b's, in the shared table.
    assert_eq!(table_entries(&table), 2);

    // The PDUs arrive at b (loopback UDP may lose one on a loaded
    // machine; none arrives damaged).
    let sent_all = |l: &Value| l["vcs"][0]["sent"] == 40;
    let la = list_until(&sock_a, 60, sent_all);
    assert!(sent_all(&la), "{la}");
    assert_eq!(la["vcs"][0]["state"], "open", "{la}");
    assert_eq!(la["vcs"][0]["relays"][0], "r0", "{la}");
    let lb = list_until(&sock_b, 10, |l| l["received"][0]["delivered"] == 40);
    let got = &lb["received"][0];
    let delivered = got["delivered"].as_u64().unwrap_or(0);
    assert!((1..=40).contains(&delivered), "{lb}");
    assert_eq!(got["corrupted"], 0, "{lb}");
    assert_eq!(got["vci"], la["vcs"][0]["vcis"][1], "{lb} {la}");

    let out = vc(&["close", "--control", a_sock, &id, "--wait", "60s"]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    assert!(said.contains("VC a/1 closed in"), "{said}");
    assert_eq!(table_entries(&table), 0);
    let la = list(&sock_a);
    let events = la["vcs"][0]["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["open", "close"], "{la}");
    assert!(events.iter().all(|e| e["failure"].is_null()), "{la}");
    assert_eq!(la["vcs"][0]["state"], "closed");

    // Closing again, and opening to a host that is not there, fail with
    // their reasons.
    let out = vc(&["close", "--control", a_sock, &id]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("VC \"a/1\" is closed already"),
        "{}",
        text(&out.stderr)
    );
    let out = vc(&["open", "--control", a_sock, "--to", "nobody"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("unknown host \"nobody\": \"a\" can open to b"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));

    raw_protocol(&sock_b);

    let (ra, rb, rs) = (stop(a), stop(b), stop(sw));
    std::fs::remove_dir_all(&dir).ok();
    // The relay holds no host's entry at the end; it carried out the
    // write, the read and the clear at least.
    let r0 = &rs["relays"][0];
    assert_eq!(r0["name"], "r0", "{rs}");
    assert_eq!(r0["host_entries"], 0, "{rs}");
    assert!(r0["control_accepted"].as_u64().unwrap() >= 3, "{rs}");
    let app = &ra["apps"][0];
    assert_eq!(
        (&app["role"], &app["name"]),
        (&"sends".into(), &"a/1".into())
    );
    assert_eq!(app["sent"], 40, "{ra}");
    assert_eq!(rb["apps"][0]["role"], "receives", "{rb}");
    // The sockets went with their processes.
    assert!(!sock_a.exists() && !sock_b.exists());
}

/// Writes `text` to `file`, runs it in virtual time, expects a refusal;
/// what it said.
fn refused(file: &Path, text_: &str) -> String {
    std::fs::write(file, text_).unwrap();
    let out = aurora()
        .arg("run")
        .arg(file)
        .arg("--virtual")
        .output()
        .unwrap();
    assert!(!out.status.success());
    text(&out.stderr)
}

#[test]
fn mistakes_in_signal_hosts_are_reported_with_their_line() {
    let dir = folder("bad");
    let table = dir.join("vci-table");
    let text_ok = topology(&table);
    let bad = text_ok.replace(
        "hosts = [\"a\", \"b\"]",
        "hosts = [\"a\", \"s0\", \"ghost\", \"a\"]",
    );
    let file = dir.join("bad.toml");
    let err = refused(&file, &bad);
    let line = bad.lines().position(|l| l == "[signal]").unwrap() + 1;
    for why in [
        "[signal] hosts: host \"s0\" is not a host",
        "[signal] hosts: host \"ghost\" is not defined",
        "[signal] hosts: \"a\" is named twice",
    ] {
        assert!(err.contains(&format!(":{line}:1: {why}")), "{why}: {err}");
    }
    // Without a key.
    let nokey = text_ok.replace("key = \"k\"\n", "");
    let err = refused(&file, &nokey);
    assert!(
        err.contains("[signal] hosts: the file needs a [signal] key"),
        "{err}"
    );
    // --control on a process with no signalling host.
    std::fs::write(&file, &text_ok).unwrap();
    let out = aurora()
        .arg("node")
        .arg(&file)
        .args(["--name", "s0,r0,s1", "--duration", "1s", "--control"])
        .arg(dir.join("x.sock"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("none of the process's nodes is a signalling host"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `aurora run` in real time with `--control`: the same open and close in
/// one process, and the run's report has the VC's books balanced and
/// nothing left in the relay or the table.
#[test]
fn aurora_run_in_real_time_takes_vc_commands() {
    let dir = folder("run");
    let table = dir.join("vci-table");
    let file = dir.join("topo.toml");
    let one = topology(&table)
        .lines()
        .filter(|l| !l.starts_with("udp_"))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&file, one).unwrap();
    let sock = dir.join("run.sock");
    let run = aurora()
        .arg("run")
        .arg(&file)
        .args(["--duration", "8s", "--drain", "50ms", "--json", "--control"])
        .arg(&sock)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    while !listening(&sock) {
        assert!(Instant::now() < end, "the control socket never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = sock.to_str().unwrap();
    // The process holds both hosts: a command names one.
    let out = vc(&["open", "--control", s, "--to", "b"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("several signalling hosts (a, b); name one with host"),
        "{}",
        text(&out.stderr)
    );
    let out = vc(&[
        "open",
        "--control",
        s,
        "--host",
        "a",
        "--to",
        "b",
        "--count",
        "20",
        "--wait",
        "60s",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lb = list_until_host(&sock, "b", |l| l["received"][0]["delivered"] == 20);
    assert_eq!(lb["received"][0]["delivered"], 20, "{lb}");
    let out = vc(&[
        "close",
        "--control",
        s,
        "--host",
        "a",
        "a/1",
        "--wait",
        "60s",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    std::fs::remove_dir_all(&dir).ok();
    let app = &r["signal"]["apps"][0];
    assert_eq!(app["name"], "a/1", "{r}");
    assert_eq!(
        (&app["sent"], &app["unaccounted"]),
        (&20.into(), &0.into()),
        "{app}"
    );
    assert_eq!(app["delivered"], 20, "{app}");
    assert_eq!(app["relay_entries_left"], 0, "{app}");
    assert_eq!(app["table_entries_left"], 0, "{app}");
}

/// Lists host `host` on `sock` until `ok` holds or 30 s pass.
fn list_until_host(sock: &Path, host: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let out = vc(&[
            "list",
            "--control",
            sock.to_str().unwrap(),
            "--host",
            host,
            "--json",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let l: Value = serde_json::from_slice(&out.stdout).unwrap();
        if ok(&l) || Instant::now() > end {
            return l;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The socket's protocol, spoken directly: several requests on one
/// connection, each answered on a line; a request not understood, an
/// unknown field and a host not in the process are refused with a
/// sentence; a line over 4096 bytes is refused and the connection closed.
fn raw_protocol(sock: &Path) {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let conn = UnixStream::connect(sock).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    let mut ask = |line: &str| -> Value {
        // The server stops reading an over-long line part way, so the
        // rest of that write may meet a closed socket: only the answer
        // counts.
        let _ = writeln!(w, "{line}");
        let mut got = String::new();
        r.read_line(&mut got).unwrap();
        serde_json::from_str(&got).unwrap_or_else(|e| panic!("{e}: {got}"))
    };
    let v = ask(r#"{"op":"list"}"#);
    assert_eq!((&v["ok"], &v["host"]), (&true.into(), &"b".into()), "{v}");
    let v = ask("not json");
    assert_eq!(v["ok"], false);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("the request is not understood"),
        "{v}"
    );
    let v = ask(r#"{"op":"list","colour":"red"}"#);
    assert!(v["error"].as_str().unwrap().contains("colour"), "{v}");
    let v = ask(r#"{"op":"list","host":"zz"}"#);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("\"zz\" is not a signalling host of this process"),
        "{v}"
    );
    let v = ask(r#"{"op":"open","to":"a","interval_ns":-5}"#);
    assert!(
        v["error"].as_str().unwrap().contains("interval -5 ns"),
        "{v}"
    );
    let v = ask(&format!(r#"{{"op":"list","pad":"{}"}}"#, "x".repeat(5000)));
    assert!(
        v["error"].as_str().unwrap().contains("longer than 4096"),
        "{v}"
    );
    let mut rest = String::new();
    assert_eq!(r.read_line(&mut rest).unwrap_or(0), 0, "{rest}");
}
