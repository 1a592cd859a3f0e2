//! Striping in real time between `aurora node` processes: host a and its
//! multiplexor in one process, the far multiplexor and host b in another,
//! joined by four UDP links on loopback with different delays (skew). Two
//! striped VCs cross them, cells with markers and PDUs with sequence
//! numbers; the receiving process must deliver every PDU of both intact
//! and in order. The receivers' timeouts are long (500 ms): on a small
//! shared machine a process can run several milliseconds late, and a
//! timeout near the skew would then give up units that are merely waiting
//! to be read.

use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn node(topo: &std::path::Path, names: &str, duration: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_aurora"))
        .arg("node")
        .arg(topo)
        .args(["--name", names, "--json", "--duration", duration])
        .stdout(Stdio::piped())
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

/// The topology: four OC-3c channels over UDP, delayed 0 to 3 ms.
fn topology() -> String {
    let mut t = String::from(
        r#"
[[host]]
name = "a"
[[host]]
name = "b"
[[switch]]
name = "mux-a"
ports = 5
[[switch]]
name = "mux-b"
ports = 5
[[link]]
a = "a"
b = "mux-a:0"
rate = "oc12"
[[link]]
a = "mux-b:0"
b = "b"
rate = "oc12"
"#,
    );
    for i in 1..=4 {
        t += &format!(
            "[[link]]\na = \"mux-a:{i}\"\nb = \"mux-b:{i}\"\nrate = \"oc3\"\ndelay = \"{}ms\"\n\
             udp_a = \"127.0.0.1:{}\"\nudp_b = \"127.0.0.1:{}\"\n",
            i - 1,
            free_port(),
            free_port()
        );
    }
    let path = r#"["a", "mux-a", "mux-b", "b"]"#;
    for m in ["m", "n"] {
        for i in 0..4 {
            t += &format!("[[pvc]]\nname = \"{m}{i}\"\npath = {path}\n");
        }
    }
    t += r#"
[[stripe]]
name = "cells"
from = "a"
to = "b"
pvcs = ["m0", "m1", "m2", "m3"]
unit = "cell"
sync = "marker"
sdu = 9180
count = 200
interval = "3ms"
start = "700ms"
timeout = "500ms"

[[stripe]]
name = "pdus"
from = "a"
to = "b"
pvcs = ["n0", "n1", "n2", "n3"]
unit = "pdu"
sync = "sequence"
sdu = 4000
sdu_min = 100
count = 400
interval = "1500us"
start = "700ms"
timeout = "500ms"
reassembly_timeout = "500ms"
"#;
    t
}

#[test]
fn four_udp_links_between_node_processes_carry_striped_pdus_intact_and_in_order() {
    let dir = std::env::temp_dir().join(format!("aurora-stripe-proc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("stripe.toml");
    std::fs::write(&topo, topology()).unwrap();
    // The receiving side first, so the sender's first cells find it.
    let far = node(&topo, "mux-b,b", "3s");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let near = node(&topo, "a,mux-a", "2s");
    let (near, far) = (report(near), report(far));
    let rows = |r: &Value| r["stripes"].as_array().cloned().unwrap_or_default();
    let mut wrong = Vec::new();
    for (name, count) in [("cells", 200), ("pdus", 400)] {
        let row = |r: &Value, role: &str| {
            rows(r)
                .into_iter()
                .find(|x| x["name"] == name && x["role"] == role)
                .unwrap_or(Value::Null)
        };
        let (sent, got) = (row(&near, "sender"), row(&far, "receiver"));
        if sent["pdus"] != count {
            wrong.push(format!("{name}: the sender sent {} PDUs", sent["pdus"]));
        }
        for field in ["failed", "missing", "misordered", "reordered", "held"] {
            if got[field] != 0 {
                wrong.push(format!("{name}: {field} {}", got[field]));
            }
        }
        if got["pdus"] != count || got["units"] != sent["units"] {
            wrong.push(format!(
                "{name}: {} PDUs and {} units delivered of {} sent",
                got["pdus"], got["units"], sent["units"]
            ));
        }
        if !got["losses"].as_array().is_some_and(Vec::is_empty) {
            wrong.push(format!("{name}: losses {}", got["losses"]));
        }
        // Every stripe carried its share.
        let cells = got["cells"].as_array().cloned().unwrap_or_default();
        if cells.len() != 4 || cells.iter().any(|c| c.as_u64().unwrap_or(0) == 0) {
            wrong.push(format!("{name}: cells per stripe {}", got["cells"]));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\nsending process: {near:#}\nreceiving process: {far:#}",
        wrong.join("; ")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
