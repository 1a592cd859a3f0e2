//! The Figure 13 example (two VuNets joined by AVlinks across an ATM WAN)
//! runs in virtual and in real time, its books balance in both, and its
//! applications open their VCs across the WAN in band.

use std::process::Command;

fn run(args: &[&str]) -> serde_json::Value {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/figure13.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(["run", file, "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every PVC's PDUs are delivered, corrupted, lost with a reason or in
/// flight; none unaccounted. Returns (sent, delivered) over all PVCs.
fn balanced(r: &serde_json::Value) -> (u64, u64) {
    let mut totals = (0, 0);
    for p in r["pvcs"].as_array().unwrap() {
        let n = |k: &str| p[k].as_u64().unwrap();
        assert_eq!(n("unaccounted"), 0, "{p}");
        assert_eq!(
            n("sent"),
            n("delivered") + n("corrupted") + n("lost") + n("in_flight"),
            "{p}"
        );
        totals.0 += n("sent");
        totals.1 += n("delivered");
    }
    totals
}

/// The apps: each opened in band through the relay and both AVlinks,
/// carried every PDU and closed, leaving nothing in relays or the table.
/// Returns each app's open latency in us.
fn opened_in_band(r: &serde_json::Value) -> Vec<(String, f64)> {
    let apps = r["signal"]["apps"].as_array().expect("a signalling report");
    assert_eq!(apps.len(), 2, "{apps:?}");
    let mut out = Vec::new();
    for a in apps {
        let n = |k: &str| a[k].as_u64().unwrap();
        let relays: Vec<&str> = a["relays"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            relays.contains(&"av-mit") && relays.contains(&"av-bc"),
            "{a}"
        );
        assert!(relays.contains(&"ring-mit"), "{a}");
        let ev = a["events"].as_array().unwrap();
        let kinds: Vec<&str> = ev.iter().map(|e| e["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["open", "close"], "{a}");
        assert!(ev.iter().all(|e| e["failure"].is_null()), "{a}");
        assert_eq!((n("sent"), n("delivered")), (100, 100), "{a}");
        assert_eq!(n("unaccounted"), 0, "{a}");
        assert_eq!(n("relay_entries_left") + n("table_entries_left"), 0, "{a}");
        let name = a["name"].as_str().unwrap().to_string();
        out.push((name, ev[0]["latency_us"].as_f64().unwrap()));
    }
    out
}

#[test]
fn figure13_runs_in_virtual_and_real_time_with_the_books_balanced() {
    let v = run(&["--virtual"]);
    let (sent, delivered) = balanced(&v);
    assert_eq!((sent, delivered), (900, 900), "PVCs");
    // The end-to-end ping crosses the WAN twice: 12 ms and more.
    let rtt = v["pings"][0]["rtt_us"][0].as_f64().unwrap();
    assert!(rtt > 12_000.0, "{rtt}");
    // A write and a read-back per relay, each a round trip to it: the
    // camera's far AVlink is two WAN round trips away (4 x 6 ms), the
    // replies' AVlink and relay beyond the WAN four (8 x 6 ms), plus what
    // the local hops and cell times add.
    let lat = opened_in_band(&v);
    assert_eq!(lat[0].0, "mit-camera");
    assert!((24_000.0..25_500.0).contains(&lat[0].1), "{lat:?}");
    assert!((48_000.0..50_500.0).contains(&lat[1].1), "{lat:?}");
    let r = run(&["--duration", "300ms"]);
    assert_eq!(r["mode"], "real time");
    let (sent, _) = balanced(&r);
    assert!(sent > 0);
    opened_in_band(&r);
}
