//! The books of PVCs between IP nodes, by PDU: eight TCP transfers
//! through one congested port (`examples/tcp-epd.toml`) under tail drop,
//! PPD and EPD, cut off with segments still on their way, in virtual time;
//! and a transfer in real time. Every direction of every PVC balances,
//! each loss is where the discipline says it is, and the TCP hosts'
//! segments are the PVCs' PDUs.

use std::process::Command;

use serde_json::Value;

const EPD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/tcp-epd.toml");
const TCP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/tcp.toml");

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// Runs `aurora run FILE --json` with `args`; the report (the run must
/// succeed: it fails when books do not balance).
fn run(file: &std::path::Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .arg("run")
        .arg(file)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

/// Checks every IP PVC row's identity; returns (losses by "at reason",
/// PDUs in flight).
fn balanced(r: &Value) -> (Vec<(String, u64)>, u64) {
    let rows = r["ip_pvcs"].as_array().expect("IP PVC rows");
    assert!(!rows.is_empty());
    let mut losses = Vec::new();
    let mut flying = 0;
    for p in rows {
        let lost: u64 = p["losses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| u(l, "count"))
            .sum();
        assert_eq!(lost, u(p, "lost"), "{p}");
        assert_eq!(
            u(p, "sent"),
            u(p, "delivered") + lost + u(p, "in_flight"),
            "{p}"
        );
        assert_eq!(p["unaccounted"], 0, "{p}");
        flying += u(p, "in_flight");
        for l in p["losses"].as_array().unwrap() {
            losses.push((
                format!(
                    "{} {}",
                    l["at"].as_str().unwrap(),
                    l["reason"].as_str().unwrap()
                ),
                u(l, "count"),
            ));
        }
    }
    (losses, flying)
}

/// The TCP sources' segments are their PVC's PDUs: each source host has
/// one PVC, which carries its IP node's packets and its two InATMARP
/// messages.
fn segments_are_pdus(r: &Value) {
    for h in r["tcp"]["hosts"].as_array().unwrap() {
        let name = h["host"].as_str().unwrap();
        if name == "sink" {
            continue;
        }
        let ip = r["ip"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == name)
            .unwrap();
        let pvc = r["ip_pvcs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == format!("{name}-sink {name} -> sink"))
            .unwrap();
        let inarp = ip["inarp"].as_array().unwrap();
        let inarp = inarp[0].as_u64().unwrap() + inarp[1].as_u64().unwrap();
        assert_eq!(u(h, "packets_out"), u(ip, "from_host"), "{h} {ip}");
        assert_eq!(u(pvc, "sent"), u(ip, "packets_out") + inarp, "{pvc} {ip}");
    }
}

fn variant(discard: &str) -> std::path::PathBuf {
    let mut text = std::fs::read_to_string(EPD)
        .unwrap()
        .replace("discard = \"epd\"", &format!("discard = \"{discard}\""));
    if discard != "epd" {
        text = text.replace("epd = 500\n", "");
    }
    let dir = std::env::temp_dir().join(format!("aurora-ip-books-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{discard}.toml"));
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn every_pdu_of_a_congested_port_is_delivered_lost_where_it_was_dropped_or_in_flight() {
    for discard in ["tail", "ppd", "epd"] {
        let file = variant(discard);
        // No drain: the run ends with segments in ports and on lines.
        let r = run(
            &file,
            &["--virtual", "--duration", "400ms", "--drain", "0s"],
        );
        std::fs::remove_file(&file).ok();
        let (losses, flying) = balanced(&r);
        assert!(flying > 0, "{discard}: nothing in flight");
        let at = |s: &str| {
            losses
                .iter()
                .filter(|(k, _)| k == s)
                .map(|(_, n)| n)
                .sum::<u64>()
        };
        let all: u64 = losses.iter().map(|(_, n)| n).sum();
        match discard {
            // Whole PDUs refused: each loss is its end cell's, at the port.
            "epd" => {
                assert!(at("sw:8 out epd") > 0, "{losses:?}");
                assert_eq!(at("sw:8 out epd"), all, "{losses:?}");
            }
            // Cells dropped mid-PDU: the PDU fails at the sink, unless
            // its end cell was the one dropped.
            "tail" | "ppd" => {
                assert!(at("sink:0 in reassembly_failed") > 0, "{losses:?}");
                assert!(
                    at("sw:8 out tail_drop") + at("sw:8 out port_full") > 0,
                    "{losses:?}"
                );
            }
            _ => unreachable!(),
        }
        segments_are_pdus(&r);
    }
}

#[test]
fn the_books_balance_in_real_time_too() {
    let r = run(
        std::path::Path::new(TCP),
        &["--duration", "300ms", "--drain", "0s"],
    );
    assert_eq!(r["mode"], "real time");
    let rows = r["ip_pvcs"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    balanced(&r);
    assert!(u(&rows[0], "delivered") > 100, "{rows:?}");
}

/// A network with an ATOMIC part (its engine carries cells and frames):
/// the TCP hosts on the cell side are in the IP table and their PVCs'
/// books balance, as in a cell-only network.
#[test]
fn tcp_hosts_beside_an_atomic_lan_are_reported_and_balance() {
    let text = r#"
[[host]]
name = "h1"
ip = "10.1.0.1/24"
routes = ["default via 10.1.0.254"]

[[host]]
name = "h2"
ip = "10.1.0.2/24"

[[switch]]
name = "sw"
ports = 3

[[router]]
name = "r"
ports = 1
ip = ["10.1.0.254/24"]

[[link]]
a = "h1"
b = "sw:0"
rate = "oc12"

[[link]]
a = "sw:1"
b = "r:0"
rate = "oc12"

[[link]]
a = "h2"
b = "sw:2"
rate = "oc12"

[[pvc]]
name = "h1-r"
path = ["h1", "sw", "r"]

[[pvc]]
name = "h1-h2"
path = ["h1", "sw", "h2"]

[[mesh]]
name = "m"
size = 2

[[atomic_host]]
name = "ac"
ip = "10.5.0.1/24"
ac = "always"
gateway = "10.5.0.254"

[[atomic_host]]
name = "r-lan"
ip = "10.5.0.254/24"
router = "r"

[[cable]]
a = "ac:east"
b = "m.0.0:west"

[[cable]]
a = "r-lan:east"
b = "m.0.1:west"

[[tcp]]
name = "t"
from = "h1"
to = "h2"
bytes = "200KB"
"#;
    let dir = std::env::temp_dir().join(format!("aurora-ip-books-mixed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mixed.toml");
    std::fs::write(&file, text).unwrap();
    let r = run(&file, &["--virtual", "--duration", "300ms"]);
    std::fs::remove_dir_all(&dir).ok();
    assert!(r["atomic"].is_object(), "an ATOMIC part");
    let ip: Vec<&str> = r["ip"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    for n in ["r", "h1", "h2"] {
        assert!(ip.contains(&n), "{ip:?}");
    }
    let (losses, _) = balanced(&r);
    assert!(losses.is_empty(), "{losses:?}");
    let rows = r["ip_pvcs"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    let data = rows.iter().find(|p| p["name"] == "h1-h2 h1 -> h2").unwrap();
    assert!(u(data, "delivered") > 200_000 / 9140, "{data}");
    assert_eq!(r["tcp"]["flows"][0]["connections"][1]["bytes"], 200_000);
}
