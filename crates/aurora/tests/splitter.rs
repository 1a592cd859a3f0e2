//! `[[splitter]]` pairs run by `aurora run` in virtual time: hosts send a
//! plain VC through a switch to a striping relay, which spreads it over
//! four OC-3c channels of different delays to its peer, which joins it
//! and sends it on through a switch to the far host. Every PDU arrives
//! intact and in order, lost cells are counted and the stream recovers,
//! a TCP transfer striped by IP packet completes, and every book
//! balances, whatever the skews, rates and losses.

use std::process::Command;

use proptest::prelude::*;
use serde_json::Value;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/splitter.toml");

/// Runs `aurora run` on `text` in virtual time for `secs`; the JSON
/// report, the exit status and stderr.
fn run(text: &str, secs: &str) -> (Value, bool, String) {
    let dir = std::env::temp_dir().join(format!("aurora-splitter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{:x}.toml", fxhash(text)));
    std::fs::write(&file, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .arg("run")
        .arg(&file)
        .args(["--virtual", "--json", "--duration", secs])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (v, out.status.success(), stderr)
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// The example with the stripe channels' delays (µs), rates and loss,
/// the pair's unit and method, and the flow's count and interval.
fn example(
    delays_us: [u32; 4],
    rates: [&str; 4],
    loss: f64,
    unit: &str,
    flow: (u32, &str),
) -> String {
    let mut t = std::fs::read_to_string(EXAMPLE).unwrap();
    for (i, old) in ["0us", "667us", "1333us", "2ms"].iter().enumerate() {
        let a = format!(
            "a = \"split-a:{}\"\nb = \"split-b:{}\"\nrate = \"oc3\"\ndelay = \"{old}\"",
            i + 1,
            i + 1
        );
        let b = format!(
            "a = \"split-a:{}\"\nb = \"split-b:{}\"\nrate = \"{}\"\ndelay = \"{}us\"\nloss = {loss:?}",
            i + 1,
            i + 1,
            rates[i],
            delays_us[i]
        );
        assert!(t.contains(&a), "the example changed: {a}");
        t = t.replace(&a, &b);
    }
    let k = if unit == "cell" { 32 } else { 4 };
    t = t.replace(
        "unit = \"cell\"",
        &format!("unit = \"{unit}\"\nidle_marker = \"1ms\""),
    );
    t = t.replace("marker_interval = 32", &format!("marker_interval = {k}"));
    t = t.replace("count = 6000", &format!("count = {}", flow.0));
    t.replace(
        "interval = \"145us\"",
        &format!("interval = \"{}\"", flow.1),
    )
}

/// The flow's row and the striped VC's row; checks that the books of
/// both balance.
fn rows(r: &Value) -> (&Value, &Value) {
    let p = &r["pvcs"][0];
    assert_eq!(p["name"], "a-b");
    assert_eq!(p["unaccounted"], 0, "{p}");
    assert_eq!(u(p, "misordered"), 0, "{p}");
    let vcs = r["stripe"]["vcs"].as_array().expect("striped VCs");
    assert_eq!(vcs.len(), 1, "only the way a-b carried anything: {vcs:?}");
    let v = &vcs[0];
    assert_eq!(v["name"], "split/a-b");
    assert_eq!(v["units"]["unaccounted"], 0, "{v}");
    assert_eq!(v["split_cells"]["unaccounted"], 0, "{v}");
    for s in v["stripes"].as_array().unwrap() {
        assert_eq!(s["on_the_way"], 0, "{s}");
    }
    (p, v)
}

#[test]
fn pdus_cross_internal_striping_intact_and_in_order_at_every_skew() {
    for skew in [0u32, 1000, 2000] {
        let delays = [0, skew / 3, 2 * skew / 3, skew];
        for unit in ["cell", "pdu"] {
            let t = example(delays, ["oc3"; 4], 0.0, unit, (1500, "150us"));
            let (r, ok, err) = run(&t, "0.3s");
            assert!(ok, "{unit} skew {skew}: {err}");
            let (p, v) = rows(&r);
            assert_eq!(
                (u(p, "sent"), u(p, "delivered")),
                (1500, 1500),
                "{unit} {skew}: {p}"
            );
            assert_eq!(u(&v["units"], "lost"), 0);
            if unit == "cell" {
                // One marker per 32 cells on every channel (1500 PDUs of
                // 192 cells over 4), plus the idle ones at the end.
                let m = u(&v["stripes"][0], "markers");
                assert!((2250..2260).contains(&m), "{m}");
            }
        }
    }
}

#[test]
fn lost_cells_are_counted_and_the_stream_recovers() {
    let t = example(
        [0, 667, 1333, 2000],
        ["oc3"; 4],
        1e-4,
        "cell",
        (2000, "150us"),
    );
    let (r, ok, err) = run(&t, "0.4s");
    assert!(ok, "{err}");
    let (p, v) = rows(&r);
    let (sent, delivered, lost) = (u(p, "sent"), u(p, "delivered"), u(p, "lost"));
    assert_eq!(sent, 2000);
    assert!(lost > 0, "{p}");
    assert_eq!(
        sent,
        delivered + lost + u(p, "corrupted") + u(p, "in_flight"),
        "{p}"
    );
    assert_eq!(u(p, "in_flight"), 0, "{p}");
    // A lost cell costs its block of 32 on its channel, so a PDU or two:
    // the stream is back in step at the next marker.
    let cells_lost: u64 = v["stripes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["dropped"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| u(d, "count"))
        })
        .sum();
    assert!(cells_lost > 0);
    assert!(lost <= 3 * cells_lost, "{lost} PDUs for {cells_lost} cells");
    assert!(u(&v["units"], "lost") <= 32 * 2 * cells_lost, "{v}");
}

/// Two IP hosts with Aurora's TCP, their PVC through a splitter pair
/// striping by IP packet.
const TCP: &str = r#"
[[host]]
name = "h1"
ip = "10.1.0.1/24"

[[host]]
name = "h2"
ip = "10.1.0.2/24"

[[switch]]
name = "sw-a"
ports = 2

[[switch]]
name = "sw-b"
ports = 2

[[splitter]]
name = "split"
relays = ["split-a", "split-b"]
stripes = 4
unit = "ip"
sync = "SYNC"
idle_marker = "1ms"

[[link]]
a = "h1"
b = "sw-a:0"
rate = "oc12"
delay = "100us"

[[link]]
a = "sw-a:1"
b = "split-a:0"
rate = "oc12"

[[link]]
a = "split-a:1"
b = "split-b:1"
rate = "oc3"
delay = "0us"

[[link]]
a = "split-a:2"
b = "split-b:2"
rate = "oc3"
delay = "300us"

[[link]]
a = "split-a:3"
b = "split-b:3"
rate = "oc3"
delay = "700us"

[[link]]
a = "split-a:4"
b = "split-b:4"
rate = "oc3"
delay = "1ms"

[[link]]
a = "split-b:0"
b = "sw-b:1"
rate = "oc12"

[[link]]
a = "sw-b:0"
b = "h2"
rate = "oc12"
delay = "100us"

[[pvc]]
name = "h1-h2"
path = ["h1", "sw-a", "split-a", "split-b", "sw-b", "h2"]

[[tcp]]
name = "bulk"
from = "h1"
to = "h2"
bytes = "4MB"
variant = "sack"
"#;

#[test]
fn a_tcp_transfer_striped_by_ip_packet_completes_with_every_byte_checked() {
    for sync in ["sequence", "marker"] {
        let (r, ok, err) = run(&TCP.replace("SYNC", sync), "2s");
        assert!(ok, "{sync}: {err}");
        let conns = r["tcp"]["flows"][0]["connections"].as_array().unwrap();
        let (src, dst) = (&conns[0], &conns[1]);
        assert_eq!(u(src, "bytes"), 4_000_000);
        assert_eq!(u(dst, "bytes"), 4_000_000, "{sync}: every byte arrived");
        assert_eq!(u(dst, "pattern_errors"), 0);
        assert_eq!(dst["close_reason"], "done");
        for h in r["tcp"]["hosts"].as_array().unwrap() {
            assert_eq!(h["balanced"], true, "{h}");
        }
        // Both ways were striped by IP packet: data one way, ACKs back.
        let vcs = r["stripe"]["vcs"].as_array().unwrap();
        assert_eq!(vcs.len(), 2, "{vcs:?}");
        for v in vcs {
            assert_eq!(v["unit"], "ip");
            assert_eq!(v["units"]["unaccounted"], 0, "{v}");
            assert_eq!(v["units"]["lost"], 0, "{v}");
            assert!(u(&v["units"], "delivered") > 100, "{v}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Random skews, channel rates and losses: with markers, the far host
    /// gets its PDUs in order (an in-order subsequence of those sent:
    /// nothing misordered or twice, the rest lost by name), and every
    /// book balances (the run fails otherwise).
    #[test]
    fn delivered_pdus_are_an_in_order_subsequence_and_the_books_balance(
        delays in proptest::array::uniform4(0u32..2500),
        fast in proptest::array::uniform4(any::<bool>()),
        loss in prop_oneof![Just(0.0), Just(1e-5), Just(2e-4)],
        pdu in any::<bool>(),
    ) {
        let rates = fast.map(|f| if f { "oc12" } else { "oc3" });
        let unit = if pdu { "pdu" } else { "cell" };
        let t = example(delays, rates, loss, unit, (600, "200us"));
        let (r, ok, err) = run(&t, "0.15s");
        prop_assert!(ok, "{}", err);
        let (p, _) = rows(&r);
        prop_assert_eq!(u(p, "sent"), 600);
        prop_assert_eq!(
            u(p, "delivered") + u(p, "lost") + u(p, "corrupted"),
            600,
            "{}", p
        );
        if loss == 0.0 {
            prop_assert_eq!(u(p, "delivered"), 600);
        }
    }
}
