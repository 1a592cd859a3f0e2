//! `[[tcp]]` transfers run by `aurora run` in virtual time: every byte
//! arrives and checks, each TCP host's books balance, and the goodput is
//! what OC-3c can carry.

use std::process::Command;

use serde_json::Value;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/tcp.toml");

/// OC-3c's cell payload rate, Mb/s: no TCP data goes faster.
const OC3_PAYLOAD_MBPS: f64 = 149.76;

/// Runs `aurora run FILE --virtual --json` with `args`; the report, the
/// exit status and stderr.
fn run(file: &std::path::Path, args: &[&str]) -> (Value, bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .arg("run")
        .arg(file)
        .args(["--virtual", "--json"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (v, out.status.success(), stderr)
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// Checks both identities of every TCP host.
fn books_balance(r: &Value) {
    let hosts = r["tcp"]["hosts"].as_array().expect("TCP hosts");
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    for h in hosts {
        let dropped: u64 = h["drops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d[1].as_u64().unwrap())
            .sum();
        assert_eq!(u(h, "packets_in"), u(h, "to_connections") + dropped, "{h}");
        assert_eq!(u(h, "packets_out"), u(h, "ip_from_host"), "{h}");
        assert_eq!(h["balanced"], true, "{h}");
    }
}

/// The transfer's source and sink rows.
fn ends(r: &Value) -> (&Value, &Value) {
    let flows = r["tcp"]["flows"].as_array().expect("TCP flows");
    assert_eq!(flows.len(), 1);
    let conns = flows[0]["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 2, "{conns:?}");
    assert_eq!(conns[0]["role"], "source");
    assert_eq!(conns[1]["role"], "sink");
    (&conns[0], &conns[1])
}

#[test]
fn the_example_transfer_arrives_whole_at_nearly_the_line_rate() {
    let (r, ok, stderr) = run(std::path::Path::new(EXAMPLE), &["--duration", "1s"]);
    assert!(ok, "{stderr}");
    let f = &r["tcp"]["flows"][0];
    assert_eq!(f["name"], "bulk");
    assert_eq!(f["variant"], "sack");
    let total = 10_000_000;
    let (src, dst) = ends(&r);
    assert_eq!(u(src, "bytes"), total);
    assert_eq!(u(dst, "bytes"), total, "every byte arrived");
    assert_eq!(u(dst, "pattern_errors"), 0);
    assert_eq!(dst["close_reason"], "done");
    assert!(src["done_secs"].as_f64().is_some(), "{src}");
    books_balance(&r);
    // The window outgrows h1's transmit buffer: the losses are repaired
    // by SACK recovery, not timeouts.
    assert!(u(src, "retransmits") > 0, "{src}");
    assert_eq!(u(src, "timeouts"), 0, "{src}");
    for c in [src, dst] {
        let g = c["goodput_mbps"].as_f64().unwrap();
        assert!(g > 100.0 && g < OC3_PAYLOAD_MBPS, "{g} Mb/s: {c}");
    }
    // The run itself balances: the IP nodes' packets add up too.
    assert!(r.get("tcp").is_some());
    assert_eq!(r["unaccounted"], 0);
}

#[test]
fn scripted_drops_are_repaired_and_counted_apart() {
    let text = std::fs::read_to_string(EXAMPLE)
        .unwrap()
        .replace(
            "variant = \"sack\"",
            "variant = \"newreno\"\ndrop = [20, 22, 24]",
        )
        .replace("bytes = \"10MB\"", "bytes = \"2MB\"");
    let dir = std::env::temp_dir().join(format!("aurora-tcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tcp.toml");
    std::fs::write(&file, text).unwrap();
    let (r, ok, stderr) = run(&file, &["--duration", "1s"]);
    std::fs::remove_dir_all(&dir).ok();
    assert!(ok, "{stderr}");
    assert_eq!(r["tcp"]["flows"][0]["variant"], "newreno");
    let (src, dst) = ends(&r);
    assert_eq!(u(dst, "bytes"), 2_000_000);
    assert_eq!(u(dst, "pattern_errors"), 0);
    assert_eq!(u(src, "scripted_drops"), 3);
    assert!(u(src, "retransmits") >= 3, "{src}");
    assert!(u(src, "partial_acks") >= 1, "{src}");
    books_balance(&r);
    let h1 = &r["tcp"]["hosts"][0];
    assert_eq!(h1["host"], "h1");
    assert_eq!(u(h1, "scripted_drops"), 3);
}

#[test]
fn the_text_report_has_a_tcp_part() {
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(["run", EXAMPLE, "--virtual", "--duration", "1s"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("bulk h1 -> h2:5001 (sack, 10000000 bytes)"),
        "{text}"
    );
    assert!(
        text.contains("TIME-WAIT") && text.contains("CLOSED (done)"),
        "{text}"
    );
    assert!(text.contains("balance"), "{text}");
}

#[test]
fn a_transfer_with_trace_on_leaves_its_time_sequence_trace_and_plot() {
    let text = std::fs::read_to_string(EXAMPLE)
        .unwrap()
        .replace(
            "variant = \"sack\"",
            "variant = \"reno\"\ntrace = true\ndrop = [30]",
        )
        .replace("bytes = \"10MB\"", "bytes = \"1MB\"");
    let dir = std::env::temp_dir().join(format!("aurora-tcp-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tcp.toml");
    std::fs::write(&file, text).unwrap();
    let out = dir.join("traces");
    let (r, ok, stderr) = run(&file, &["--duration", "1s", "--out", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let listed: Vec<&str> = r["tcp"]["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let json = out.join("bulk-source-h1.json");
    assert!(listed.contains(&json.to_str().unwrap()), "{listed:?}");
    assert!(
        listed.iter().any(|f| f.ends_with("bulk-source-h1.svg")),
        "{listed:?}"
    );
    assert!(
        listed.iter().any(|f| f.ends_with("bulk-sink-h2.json")),
        "{listed:?}"
    );
    for f in &listed {
        assert!(std::path::Path::new(f).is_file(), "{f}");
    }
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let sends = t["send"].as_array().unwrap();
    // 1 MB in segments of the agreed size, the SYN and the FIN, and the
    // dropped segment again.
    let (src, _) = ends(&r);
    let mss = u(src, "mss");
    assert!(
        sends.len() as u64 >= 1_000_000 / mss + 3,
        "{} of {mss}",
        sends.len()
    );
    let again: Vec<&Value> = sends.iter().filter(|s| s["retransmit"] == true).collect();
    assert!(!again.is_empty());
    assert_eq!(
        t["fast_retransmit"].as_array().unwrap().len(),
        1,
        "{}",
        t["fast_retransmit"]
    );
    assert_eq!(t["lost"], 0);
    std::fs::remove_dir_all(&dir).ok();
}
