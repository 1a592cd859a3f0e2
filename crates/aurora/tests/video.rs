//! `aurora run examples/vidboard.toml` against the wall clock: the
//! viewer gets the synthetic source's frames, their counters in order and
//! none repeated, whole and equal to the source's; the camera counts no
//! malformed command.

use std::process::Command;

use serde_json::Value;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/vidboard.toml");

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

fn run(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args([
            "run",
            EXAMPLE,
            "--json",
            "--duration",
            "1s",
            "--drain",
            "300ms",
        ])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

fn check(r: &Value) {
    let v = &r["video"]["viewers"][0];
    assert_eq!(v["name"], "ws1", "{v}");
    // A loaded machine may run late, which slows the loop, but every frame
    // that comes must be whole, new and the source's.
    assert!(u(v, "frames_complete") >= 5, "{v}");
    assert_eq!(u(v, "frames_incomplete"), 0, "{v}");
    assert_eq!(u(v, "in_order"), u(v, "frames_complete"), "{v}");
    assert_eq!((u(v, "repeated"), u(v, "out_of_order")), (0, 0), "{v}");
    assert_eq!(u(v, "counter_errors"), 0, "{v}");
    assert_eq!(u(v, "frames_matching"), u(v, "frames_complete"), "{v}");
    let b = &v["books"];
    assert_eq!(b["unaccounted"], 0, "{v}");
    assert_eq!(u(b, "reached"), u(v, "tframes_delivered"), "{v}");
    let c = &r["video"]["cameras"][0];
    assert!(c["malformed"].as_array().unwrap().is_empty(), "{c}");
}

#[test]
fn the_viewer_gets_the_sources_frames_in_order_in_real_time() {
    let r = run(&[]);
    assert_eq!(r["mode"], "real time");
    check(&r);
}

#[test]
fn the_same_example_in_virtual_time_gets_the_camera_rate() {
    let r = run(&["--virtual"]);
    check(&r);
    let fps = r["video"]["viewers"][0]["fps"].as_f64().unwrap();
    assert!((25.0..=30.5).contains(&fps), "{fps}");
}

/// A lossy, congested variant cut off with t-frames on their way: a
/// continuous stream into a host model with a small queue, cells lost on
/// the camera's line. The books still balance term by term.
#[test]
fn the_tframe_books_balance_with_losses_and_tframes_in_flight() {
    let text = std::fs::read_to_string(EXAMPLE)
        .unwrap()
        .replace(
            "mode = \"closed\"",
            "mode = \"continuous\"\nhost = \"dec5000\"",
        )
        .replace(
            "delay = \"1us\"\nbuffer = 256",
            "delay = \"1us\"\nbuffer = 256\nloss = 0.001",
        )
        .replace(
            "delay = \"1us\"\nbuffer = 1024",
            "delay = \"3ms\"\nbuffer = 64",
        );
    let path = std::env::temp_dir().join(format!("aurora-video-books-{}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(["run"])
        .arg(&path)
        .args([
            "--json",
            "--virtual",
            "--duration",
            "280ms",
            "--drain",
            "0s",
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let v = &r["video"]["viewers"][0];
    let b = &v["books"];
    assert_eq!(b["unaccounted"], 0, "{v}");
    assert!(u(b, "lost_total") > 0, "losses on the way: {v}");
    assert!(u(b, "in_flight") > 0, "t-frames cut off on the line: {v}");
    assert!(u(v, "tframes_sent") > u(b, "reached"), "{v}");
    let places: Vec<&str> = b["lost"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["reason"].as_str().unwrap())
        .collect();
    assert!(places.contains(&"host_overflow"), "{places:?}");
}

#[test]
fn pipeline_viewers_sharing_a_workstation_keep_the_same_books() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/two-viewers.toml"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(["run", file, "--virtual", "--json", "--duration", "4s"])
        .args(["--drain", "300ms"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    for v in r["video"]["viewers"].as_array().unwrap() {
        assert_eq!(v["books"]["unaccounted"], 0, "{v}");
        assert_eq!(u(v, "tframes_sent"), u(&v["books"], "reached"), "{v}");
        assert!(u(v, "frames_complete") >= 10, "{v}");
        assert_eq!(u(v, "frames_differing"), 0, "{v}");
        // The pipeline's per-module counts are in the report.
        let p = v["pipeline"].as_str().unwrap();
        assert!(p.contains("2 busy:") && p.contains("3 ratemeter:"), "{p}");
    }
}
