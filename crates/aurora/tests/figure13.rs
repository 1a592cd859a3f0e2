//! The Figure 13 example (two VuNets joined by AVlinks across an ATM WAN)
//! runs in virtual and in real time, and its books balance in both.

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

#[test]
fn figure13_runs_in_virtual_and_real_time_with_the_books_balanced() {
    let v = run(&["--virtual"]);
    let (sent, delivered) = balanced(&v);
    assert_eq!((sent, delivered), (900, 900));
    // The end-to-end ping crosses the WAN twice: 12 ms and more.
    let rtt = v["pings"][0]["rtt_us"][0].as_f64().unwrap();
    assert!(rtt > 12_000.0, "{rtt}");
    let r = run(&["--duration", "300ms"]);
    assert_eq!(r["mode"], "real time");
    let (sent, _) = balanced(&r);
    assert!(sent > 0);
}
