//! Captures from a run, read back by tshark: nothing malformed, the cell and
//! PDU counts and the VPI/VCI values match Aurora's, and every AAL5 CRC in
//! the type 4 records checks as correct.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

fn tshark(args: &[&str]) -> Option<String> {
    let out = Command::new("tshark").args(args).output().ok()?;
    assert!(
        out.status.success(),
        "tshark {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

/// Runs `aurora run FILE --virtual --json` with `args` and `--capture
/// DIR`; its report.
fn run_captured(file: &str, args: &[&str], dir: &std::path::Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(["run", file, "--virtual", "--json"])
        .args(args)
        .arg("--capture")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn captures_decode_cleanly_in_tshark() {
    if !common::ready("capture::captures_decode_cleanly_in_tshark", &["tshark"]) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("aurora-capture-test-{}", std::process::id()));
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dan.toml");
    let r = run_captured(file, &["--duration", "10ms"], &dir);
    let caps = r["captures"].as_array().unwrap();
    assert!(caps.len() >= 6, "{r}");
    check_files(caps, 0);
    // The display's port carries exactly the two PVCs that end there.
    let display = caps
        .iter()
        .find(|c| c["file"].as_str().unwrap().ends_with("display-p0.pcap"))
        .unwrap()["file"]
        .as_str()
        .unwrap();
    let vcs: BTreeSet<String> = tshark(&[
        "-r", display, "-T", "fields", "-e", "atm.vpi", "-e", "atm.vci",
    ])
    .unwrap()
    .lines()
    .map(|l| l.split_whitespace().collect::<Vec<_>>().join("."))
    .collect();
    assert!(vcs.contains("0.300"), "{vcs:?}");
    assert_eq!(
        vcs.len(),
        2,
        "camera's and workstation's PVCs only: {vcs:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every capture file decodes cleanly, holds the cell and PDU records Aurora
/// counted, and every AAL5 CRC checks as correct, except for at most
/// `damaged` PDU records per file (a cell dropped upstream, counted by the
/// links, joins two PDUs into one record whose trailer cannot check).
fn check_files(caps: &[serde_json::Value], damaged: u64) {
    for c in caps {
        let path = c["file"].as_str().unwrap();
        let (cells, pdus) = (c["cells"].as_u64().unwrap(), c["pdus"].as_u64().unwrap());
        let malformed = tshark(&[
            "-r",
            path,
            "-Y",
            "_ws.malformed",
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .unwrap();
        assert!(
            malformed.trim().is_empty(),
            "{path}: malformed frames {malformed}"
        );
        let types = tshark(&["-r", path, "-T", "fields", "-e", "erf.types.type"]).unwrap();
        let n3 = types.lines().filter(|l| l.trim() == "3").count() as u64;
        let n4 = types.lines().filter(|l| l.trim() == "4").count() as u64;
        assert_eq!((n3, n4), (cells, pdus), "{path}");
        let crcs = tshark(&["-r", path, "-Y", "erf.types.type == 4", "-V"]).unwrap();
        let total = crcs.matches("AAL5 CRC:").count() as u64;
        let good = crcs
            .lines()
            .filter(|l| l.contains("AAL5 CRC:") && l.contains("(correct)"))
            .count() as u64;
        assert_eq!(total, good, "{path}: no AAL5 CRC checks as incorrect");
        assert!(
            good <= pdus && good + damaged >= pdus,
            "{path}: {good} of {pdus} AAL5 CRCs check, {damaged} cells dropped upstream"
        );
    }
}

#[test]
fn demo_captures_match_the_counters() {
    if !common::ready("capture::demo_captures_match_the_counters", &["tshark"]) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("aurora-demo-capture-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(["demo", "--secs", "0.1", "--quiet", "--out"])
        .arg(dir.join("out"))
        .arg("--capture")
        .arg(dir.join("cap"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("out/report.json")).unwrap();
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    let caps = r["captures"].as_array().unwrap();
    // Seven ports for the data PVCs, four more for the camera and its
    // viewer (their two switch ports and their own).
    assert_eq!(caps.len(), 11, "every receiving port: {r}");
    // Real time on a busy machine: a host that fell behind sends a burst,
    // and an output buffer may overflow (counted).
    let dropped: u64 = r["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["overflow"].as_u64().unwrap() + l["lost"].as_u64().unwrap())
        .sum();
    check_files(caps, dropped);
    // Each file's cells are the cells its port received, by Aurora's own
    // counters: a switch port's cells in, a host's link deliveries.
    for c in caps {
        let path = c["file"].as_str().unwrap();
        let stem = std::path::Path::new(path)
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap();
        let (node, port) = stem.rsplit_once("-p").unwrap();
        let port: u64 = port.parse().unwrap();
        let counted = r["switch_ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s[0] == node && s[1] == port)
            .map(|s| s[2].as_u64().unwrap())
            .unwrap_or_else(|| {
                r["links"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|l| l["dir"].as_str().unwrap().ends_with(&format!("-> {node}")))
                    .unwrap()["delivered"]
                    .as_u64()
                    .unwrap()
            });
        // The capture writes off the node's thread: what it could not keep
        // up with is counted, never lost silently.
        let dropped = c["dropped"].as_u64().unwrap();
        assert_eq!(c["cells"].as_u64().unwrap() + dropped, counted, "{path}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sunatm_captures_hold_the_reassembled_sdus() {
    if !common::ready(
        "capture::sunatm_captures_hold_the_reassembled_sdus",
        &["tshark"],
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("aurora-sunatm-{}", std::process::id()));
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dan.toml");
    let args = ["--duration", "10ms", "--capture-format", "sunatm"];
    let r = run_captured(file, &args, &dir);
    for c in r["captures"].as_array().unwrap() {
        let path = c["file"].as_str().unwrap();
        let pdus = c["pdus"].as_u64().unwrap();
        assert_eq!(c["cells"].as_u64(), Some(0), "no cell records");
        let malformed = tshark(&["-r", path, "-Y", "_ws.malformed"]).unwrap();
        assert!(malformed.trim().is_empty(), "{path}: {malformed}");
        let rows = tshark(&[
            "-r",
            path,
            "-T",
            "fields",
            "-e",
            "atm.vpi",
            "-e",
            "atm.vci",
            "-e",
            "frame.len",
        ])
        .unwrap();
        assert_eq!(rows.lines().count() as u64, pdus, "{path}");
        // The display receives the camera's 9180-byte SDUs on 0.300 and the
        // workstation's 4000-byte ones on another VC: whole SDUs, no trailer.
        if path.ends_with("display-p0.pcap") {
            let kinds: BTreeSet<(String, String)> = rows
                .lines()
                .map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (format!("{}.{}", f[0], f[1]), f[2].to_string())
                })
                .collect();
            assert!(
                kinds.contains(&("0.300".into(), "9180".into())),
                "{kinds:?}"
            );
            assert!(
                kinds.iter().any(|(v, l)| v != "0.300" && l == "4000"),
                "{kinds:?}"
            );
            assert_eq!(kinds.len(), 2, "{kinds:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A network with bit errors on both links: cell A -> switch -> B.
const BIT_ERRORS: &str = r#"
[[switch]]
name = "sw"
ports = 2

[[host]]
name = "a"

[[host]]
name = "b"

[[link]]
a = "a"
b = "sw:0"
rate = "oc12"
delay = "2us"
bit_error = 0.01

[[link]]
a = "sw:1"
b = "b"
rate = "oc12"
delay = "2us"
bit_error = 0.01

[[pvc]]
name = "a-to-b"
path = ["a", "sw", "b"]

[[flow]]
pvc = "a-to-b"
sdu = 500
count = 3000
interval = "20us"
"#;

#[test]
fn bit_errors_leave_no_delivered_pdu_without_its_record() {
    if !common::ready(
        "capture::bit_errors_leave_no_delivered_pdu_without_its_record",
        &["tshark"],
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("aurora-capture-ber-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("ber.toml");
    std::fs::write(&topo, BIT_ERRORS).unwrap();
    let args = ["--duration", "70ms", "--seed", "1"];
    let r = run_captured(topo.to_str().unwrap(), &args, &dir.join("cap"));
    let delivered = r["pvcs"][0]["delivered"].as_u64().unwrap();
    let errored = r["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["dir"].as_str().unwrap().ends_with("-> b"))
        .unwrap()["errored"]
        .as_u64()
        .unwrap();
    assert!(delivered > 1000 && errored > 100, "{r}");
    let caps = r["captures"].as_array().unwrap();
    // (The test PDUs' bytes, read by Wireshark as LANE Ethernet frames, may
    // look malformed at this size, so `check_files` is not used here.)
    for c in caps {
        let path = c["file"].as_str().unwrap();
        let v = tshark(&["-r", path, "-Y", "erf.types.type == 4", "-V"]).unwrap();
        let crcs: Vec<&str> = v.lines().filter(|l| l.contains("AAL5 CRC:")).collect();
        assert_eq!(crcs.len() as u64, c["pdus"].as_u64().unwrap(), "{path}");
        assert!(crcs.iter().all(|l| l.contains("(correct)")), "{path}");
    }
    let b = caps
        .iter()
        .find(|c| c["file"].as_str().unwrap().ends_with("b-p0.pcap"))
        .unwrap();
    assert_eq!(b["dropped"].as_u64(), Some(0), "virtual time drops nothing");
    let path = b["file"].as_str().unwrap();
    let rows = tshark(&[
        "-r",
        path,
        "-T",
        "fields",
        "-e",
        "erf.types.type",
        "-e",
        "erf.flags.rxe",
    ])
    .unwrap();
    let count = |ty: &str, rxe: &str| {
        rows.lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.first() == Some(&ty) && (rxe.is_empty() || f.get(1) == Some(&rxe))
            })
            .count() as u64
    };
    // Every PDU the host delivered intact has its type 4 record, even when
    // a bit error hit a header (GFC and CLP are not part of the VC, and a
    // single-bit error is corrected, as at the receivers).
    let pdus = count("4", "");
    assert!(
        pdus >= delivered,
        "{pdus} type 4 records, {delivered} PDUs delivered"
    );
    // Cells whose header arrived errored are recorded as received and
    // flagged; no more of them than the link errored.
    let flagged = count("3", "1");
    assert!(
        flagged > 0 && flagged <= errored,
        "{flagged} flagged cells, {errored} errored on the link"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rfc1483_captures_hold_ip_packets_whose_checksums_check() {
    if !common::ready(
        "capture::rfc1483_captures_hold_ip_packets_whose_checksums_check",
        &["tshark"],
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("aurora-rfc1483-{}", std::process::id()));
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/tcp.toml");
    let args = ["--duration", "20ms", "--capture-format", "rfc1483"];
    let r = run_captured(file, &args, &dir);
    let mut tcp = 0;
    for c in r["captures"].as_array().unwrap() {
        let path = c["file"].as_str().unwrap();
        assert_eq!(c["linktype"], 100, "{c}");
        assert_eq!(c["cells"].as_u64(), Some(0), "no cell records");
        // IP nodes send nothing but LLC-encapsulated IP and InATMARP.
        assert_eq!(c["not_llc"].as_u64(), Some(0), "{c}");
        let malformed = tshark(&["-r", path, "-Y", "_ws.malformed"]).unwrap();
        assert!(malformed.trim().is_empty(), "{path}: {malformed}");
        let rows = tshark(&["-r", path, "-T", "fields", "-e", "llc.type"]).unwrap();
        assert_eq!(
            rows.lines().count() as u64,
            c["pdus"].as_u64().unwrap(),
            "{path}"
        );
        // Every IP packet and TCP segment as sent: checksums check.
        let bad = tshark(&[
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
            "-r",
            path,
            "-Y",
            "(ip && ip.checksum.status != 1) || (tcp && tcp.checksum.status != 1)",
        ])
        .unwrap();
        assert!(bad.trim().is_empty(), "{path}: {bad}");
        tcp += tshark(&["-r", path, "-Y", "tcp"]).unwrap().lines().count();
    }
    assert!(tcp > 100, "TCP segments captured: {tcp}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Wireshark dissector for ATOMIC captures, in the repository.
const DISSECTOR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tools/wireshark/atomic.lua"
);

/// tshark with the ATOMIC dissector loaded.
fn tshark_atomic(args: &[&str]) -> String {
    let script = format!("lua_script:{DISSECTOR}");
    let mut all = vec!["-X", &script];
    all.extend_from_slice(args);
    tshark(&all).unwrap()
}

#[test]
fn atomic_captures_hold_every_frame_and_decode_with_the_dissector() {
    if !common::ready(
        "capture::atomic_captures_hold_every_frame_and_decode_with_the_dissector",
        &["tshark"],
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("aurora-capture-atomic-{}", std::process::id()));
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/topologies/atomic-flood.toml"
    );
    let r = run_captured(file, &["--duration", "200ms"], &dir);
    let caps = r["captures"].as_array().unwrap();
    let file_of = |end: &str| {
        caps.iter()
            .find(|c| c["file"].as_str().unwrap().ends_with(end))
            .unwrap_or_else(|| panic!("no capture {end}: {r}"))
    };
    // A Mosaic node's port from another node, its port from its host, and
    // a host's port: one link type each.
    assert_eq!(file_of("m.0.0-p0.pcap")["linktype"], 147);
    assert_eq!(file_of("a-p0.pcap")["linktype"], 148);
    assert_eq!(file_of("a-if-p4.pcap")["linktype"], 149);
    let mut kinds = BTreeSet::new();
    for c in caps {
        let path = c["file"].as_str().unwrap();
        assert!(
            (147..=149).contains(&c["linktype"].as_u64().unwrap()),
            "{c}"
        );
        assert_eq!(
            (c["cells"].as_u64(), c["dropped"].as_u64()),
            (Some(0), Some(0))
        );
        // Every frame recorded, and every one decoded to a kind.
        let rows = tshark_atomic(&["-r", path, "-T", "fields", "-e", "atomic.kind"]);
        assert_eq!(
            rows.lines().count() as u64,
            c["frames"].as_u64().unwrap(),
            "{path}"
        );
        assert!(rows.lines().all(|l| !l.trim().is_empty()), "{path}: {rows}");
        kinds.extend(rows.lines().map(|l| l.trim().to_string()));
        let bad = tshark_atomic(&[
            "-r",
            path,
            "-Y",
            "_ws.malformed || _ws.expert.severity >= \"Warning\"",
        ]);
        assert!(bad.trim().is_empty(), "{path}: {bad}");
        // The IP flows' packets are UDP datagrams whose checksums check.
        let udp = tshark_atomic(&[
            "-o",
            "udp.check_checksum:TRUE",
            "-r",
            path,
            "-Y",
            "udp && (udp.checksum.status != 1 || udp.dstport != 9)",
        ]);
        assert!(udp.trim().is_empty(), "{path}: {udp}");
    }
    // Flood mapping, the AC's questions and announcements, routes asked
    // for and given, and IP.
    let want: BTreeSet<String> = [1, 4, 5, 6, 7, 8, 9, 10].map(|k| k.to_string()).into();
    assert!(kinds.is_superset(&want), "{kinds:?}");
    // Each host's file holds every IP packet its flow delivered to it.
    for (host, from) in [("b", "a"), ("a", "b")] {
        let flow = r["atomic"]["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["from"] == from && f["to"] == host)
            .unwrap();
        let path = file_of(&format!("/{host}-p0.pcap"))["file"]
            .as_str()
            .unwrap();
        let ip = tshark_atomic(&["-r", path, "-Y", "atomic.kind == 1 && udp"]);
        assert_eq!(
            ip.lines().count() as u64,
            flow["delivered"].as_u64().unwrap(),
            "{path}"
        );
        assert!(flow["delivered"].as_u64().unwrap() > 0, "{flow}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_dissector_flags_a_malformed_frame() {
    use aurora_capture::{FrameLink, PortCapture};
    if !common::ready(
        "capture::the_dissector_flags_a_malformed_frame",
        &["tshark"],
    ) {
        return;
    }
    let path = std::env::temp_dir().join(format!("aurora-atomic-bad-{}.pcap", std::process::id()));
    let f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut cap = PortCapture::for_frames(f, FrameLink::Routed).unwrap();
    let t = aurora_time::Instant::ZERO;
    // A well-formed frame (a route, then the IP kind with no packet), a
    // route byte of -128, a route with no terminator, and a RouteRequest
    // cut short.
    for frame in [
        &[1, 0, 0, 0, 1][..],
        &[0x80, 0, 0, 0, 1],
        &[1, 0, 2, 0],
        &[0, 0, 0, 0, 7, 0, 0],
    ] {
        cap.frame(t, frame).unwrap();
    }
    drop(cap.finish());
    let p = path.to_str().unwrap();
    let bad = tshark_atomic(&[
        "-r",
        p,
        "-Y",
        "_ws.expert.severity >= \"Error\"",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    assert_eq!(bad.split_whitespace().collect::<Vec<_>>(), ["2", "3", "4"]);
    let _ = std::fs::remove_file(&path);
}
