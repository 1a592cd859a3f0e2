//! The `aurora` command as a user runs it.

use std::process::Command;

fn aurora() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aurora"))
}

#[test]
fn version_names_the_kernel() {
    let out = aurora().arg("version").output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.starts_with("aurora "), "{s}");
    assert!(s.contains("CRC kernel"), "{s}");
}

#[test]
fn bench_sar_reports_every_figure_as_json() {
    let out = aurora()
        .args([
            "bench",
            "sar",
            "--secs",
            "0.02",
            "--stream-mib",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let rows = json_of(&out);
    let rows = rows.as_array().unwrap();
    let has = |what: &str, size: u64| {
        rows.iter()
            .any(|r| r["what"] == what && r["size"] == size && r["gbps"].as_f64().unwrap() > 0.0)
    };
    for size in [48, 1500, 9180, 65535] {
        assert!(has("memcpy", size));
        assert!(has("aal5 segment", size));
        assert!(has("aal5 reassemble", size));
        assert!(has("crc-32 alone", size));
    }
    // The multiply limit, for every kernel that multiplies with an
    // instruction (the run uses the fastest this CPU has).
    let limit = rows
        .iter()
        .any(|r| r["what"] == "crc-32 multiplies alone" && r["gbps"].as_f64().unwrap() > 0.0);
    assert_eq!(
        limit,
        aurora_sar::Kernel::best() != aurora_sar::Kernel::Portable
    );
    assert!(has("aal5 segment stream", 65535));
    assert!(has("aal3/4 reassemble", 65535));
    assert!(rows
        .iter()
        .any(|r| r["what"] == "hec check" && r["per_sec"].as_f64().unwrap() > 0.0));
}

#[test]
fn bad_arguments_get_one_clear_sentence() {
    let out = aurora()
        .args(["bench", "sar", "--secs=0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.contains("--secs"), "{e}");
}

#[test]
fn switch_and_sim_benches_print_their_figures() {
    let out = aurora()
        .args(["bench", "switch", "--secs", "0.02"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("x OC-768c") && s.lines().count() >= 6, "{s}");
    let out = aurora()
        .args(["bench", "sim", "--secs", "0.05"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(
        s.contains("events/s") && s.contains("simulator / bare heap"),
        "{s}"
    );
}

#[test]
fn run_plays_a_topology_in_virtual_time() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dan.toml");
    let out = aurora()
        .args(["run", file, "--virtual", "--duration", "100ms", "--json"])
        .output()
        .unwrap();
    let r = json_of(&out);
    for p in r["pvcs"].as_array().unwrap() {
        assert_eq!(p["corrupted"], 0);
        assert_eq!(p["lost"], 0);
        assert_eq!(p["unaccounted"], 0);
        assert!(p["delivered"].as_u64().unwrap() > 0, "{p}");
    }
    let again = aurora()
        .args(["run", file, "--virtual", "--duration", "100ms", "--json"])
        .output()
        .unwrap();
    let r2: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(r["trace"], r2["trace"]);
    // The progress bar draws on a terminal only: a pipe gets none of it.
    for o in [&out, &again] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("model time"), "{err}");
    }
    let real = aurora()
        .args(["run", file, "--duration", "200ms", "--json"])
        .output()
        .unwrap();
    let rr = json_of(&real);
    assert_eq!(rr["mode"], "real time");
    // Real time captures too.
    let dir = std::env::temp_dir().join(format!("aurora-cli-rt-cap-{}", std::process::id()));
    let cap = aurora()
        .args(["run", file, "--duration", "50ms", "--json", "--capture"])
        .arg(&dir)
        .output()
        .unwrap();
    let rc = json_of(&cap);
    assert!(rc["captures"].as_array().unwrap().len() >= 6, "{rc}");
    let _ = std::fs::remove_dir_all(&dir);
    // The example's pings: every end-to-end request answered by the far
    // host after at least the round trip's propagation delay (2 x 54 us),
    // every segment request by the first switch, sooner.
    let pings = r["pings"].as_array().unwrap();
    assert_eq!(pings.len(), 2, "{r}");
    let (e2e, seg) = (&pings[0], &pings[1]);
    assert_eq!(e2e["kind"], "end-to-end");
    assert_eq!(e2e["answered"], e2e["sent"]);
    assert!(e2e["rtt_us"][0].as_f64().unwrap() >= 108.0, "{e2e}");
    assert_eq!(seg["kind"], "segment");
    assert_eq!(seg["answered"], seg["sent"]);
    assert!(seg["rtt_us"][2].as_f64().unwrap() < 20.0, "{seg}");
    let missing = aurora()
        .args(["run", "no-such-file.toml", "--virtual"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read no-such-file.toml"));
}

#[test]
fn the_vunet_example_runs_in_real_time_with_its_ping_answered() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/vunet.toml");
    let out = aurora()
        .args(["run", file, "--duration", "400ms", "--json"])
        .output()
        .unwrap();
    let r = json_of(&out);
    for p in r["pvcs"].as_array().unwrap() {
        assert_eq!(p["corrupted"], 0, "{p}");
        assert!(p["delivered"].as_u64().unwrap() > 0, "{p}");
    }
    let pings = r["pings"].as_array().unwrap();
    assert!(pings[0]["answered"].as_u64().unwrap() > 0, "{r}");
    // The relay and both VuNet switches are in the port report.
    let ports = r["switch_ports"].to_string();
    for n in ["vs1", "vs2", "trunk"] {
        assert!(ports.contains(n), "{n} in {ports}");
    }
}

#[test]
fn an_atomic_file_runs_in_either_driver_and_reports_probes_per_node() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/atomic.toml");
    // The 30-foot cable to d takes 103 ns a byte (T(L, D)): a's 1500-byte
    // packets queue there and drain by the end of the second.
    let out = aurora()
        .args(["run", file, "--virtual", "--duration", "1s", "--json"])
        .output()
        .unwrap();
    let r = json_of(&out);
    let m = &r["atomic"]["mappings"][0];
    assert_eq!(m["nodes"], 22);
    assert_eq!(m["hosts"], 4);
    assert!(m["per_node"].as_f64().unwrap() <= 10.0, "{m}");
    for f in atomic_flows_balance(&r) {
        assert_eq!(f["delivered"], f["sent"], "{f}");
        assert_eq!(f["corrupted"], 0);
    }
    // The same network against the wall clock.
    let rt = aurora()
        .args(["run", file, "--duration", "1500ms", "--json"])
        .output()
        .unwrap();
    let r = json_of(&rt);
    assert_eq!(r["mode"], "real time");
    assert_eq!(r["atomic"]["mappings"][0]["nodes"], 22);
    for f in atomic_flows_balance(&r) {
        assert!(f["delivered"].as_u64().unwrap() > 0, "{f}");
        assert_eq!(f["corrupted"], 0);
    }
}

/// The flows of an `aurora run --json` report each balance: every packet
/// sent is delivered, lost at a place for a reason, or on its way.
fn atomic_flows_balance(r: &serde_json::Value) -> &Vec<serde_json::Value> {
    let flows = r["atomic"]["flows"].as_array().unwrap();
    for f in flows {
        let n = |k: &str| f[k].as_u64().unwrap();
        let losses: u64 = f["losses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["count"].as_u64().unwrap())
            .sum();
        assert_eq!(losses, n("lost"), "{f}");
        assert!(n("sent") > 0, "{f}");
        assert_eq!(f["unaccounted"], 0, "{f}");
        assert_eq!(
            n("sent"),
            n("delivered") + n("corrupted") + n("lost") + n("in_flight"),
            "{f}"
        );
    }
    flows
}

#[test]
fn an_overloaded_atomic_lan_accounts_for_every_packet_in_both_clocks() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/atomic-overload.toml"
    );
    for clock in [&["--virtual"][..], &[]] {
        let out = aurora()
            .args(["run", file, "--duration", "300ms", "--json"])
            .args(clock)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let flows = atomic_flows_balance(&r);
        assert_eq!(flows.len(), 4);
        // a's second flow is told apart from its first.
        assert_eq!(
            (&flows[3]["from"], &flows[3]["flow"]),
            (&"a".into(), &1.into())
        );
        // a's first flow starts before the AC has a map, and the AC's
        // answers then wait behind a's packets: at each host packets wait
        // for a route, and past 256 are dropped. Each host sends faster than
        // its interface carries: its port drops what passes its 1 MiB of
        // memory.
        for (f, host) in flows.iter().zip(["a", "b", "c"]) {
            let loss = |at: &str, why: &str| {
                f["losses"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|l| l["at"] == at && l["reason"] == why)
            };
            assert!(loss(host, "pending_full"), "{f}");
            assert!(loss(&format!("{host}:0 out"), "tail_drop"), "{f}");
            // The AC's answers wait behind a's packets at most 1 MiB's
            // worth: every host gets a route.
            assert!(f["delivered"].as_u64().unwrap() > 0, "{f}");
        }
    }
}

#[test]
fn flows_to_and_from_a_routers_host_on_the_lan_keep_books() {
    let mut text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/interwork.toml"
    ))
    .unwrap();
    for (from, to) in [("ac", "r-lan"), ("r-lan", "ac")] {
        text += &format!(
            "\n[[atomic_flow]]\nfrom = \"{from}\"\nto = \"{to}\"\nsize = 500\ncount = 200\ninterval = \"1ms\"\nstart = \"100ms\"\n"
        );
    }
    let file =
        std::env::temp_dir().join(format!("aurora-router-flows-{}.toml", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let out = aurora()
        .arg("run")
        .arg(&file)
        .args(["--virtual", "--duration", "500ms", "--json"])
        .output()
        .unwrap();
    std::fs::remove_file(&file).ok();
    let r = json_of(&out);
    for f in atomic_flows_balance(&r) {
        assert_eq!(
            (&f["sent"], &f["delivered"]),
            (&200.into(), &200.into()),
            "{f}"
        );
    }
}

#[test]
fn the_demo_runs_in_real_time_and_reports() {
    let dir = std::env::temp_dir().join(format!("aurora-demo-test-{}", std::process::id()));
    let out = aurora()
        .args(["demo", "--secs", "1.5", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("camera-to-display") && text.contains("0 corrupted"),
        "{text}"
    );
    // The live display: a line after the first second, with a rate for
    // each PVC and the ping's round trip.
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("1 s"))
        .unwrap_or_else(|| panic!("no live line in:\n{text}"));
    let rates: Vec<f64> = line
        .split_whitespace()
        .skip(2)
        .take(3)
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(rates.iter().all(|&r| r > 1.0), "{line}");
    assert!(line.ends_with("ms mean"), "{line}");
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["mode"], "real time");
    for p in r["pvcs"].as_array().unwrap() {
        assert_eq!(p["corrupted"], 0, "{p}");
        assert!(p["delivered"].as_u64().unwrap() > 0, "{p}");
    }
    let ping = &r["pings"][0];
    assert!(ping["answered"].as_u64().unwrap() > 0, "{ping}");
    // Real video: the pipeline viewer's frames, whole, equal to the
    // camera's and in order (counts, not rates: the machine may be
    // loaded), its books balanced, PNG snapshots and the rate plot.
    let v = &r["video"]["viewers"][0];
    assert!(v["frames_complete"].as_u64().unwrap() >= 3, "{v}");
    for k in [
        "frames_incomplete",
        "frames_differing",
        "out_of_order",
        "repeated",
    ] {
        assert_eq!(v[k], 0, "{k}: {v}");
    }
    assert_eq!(v["books"]["unaccounted"], 0, "{v}");
    assert!(v["pipeline"].as_str().unwrap().contains("filesink"), "{v}");
    assert!(text.contains("viewer window of vidboard"), "{text}");
    let snap = std::fs::read(dir.join("frame-000001.png")).unwrap();
    assert!(snap.starts_with(b"\x89PNG"), "not a PNG");
    if dir.join("goodput.svg").exists() {
        assert!(dir.join("video-rate.svg").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ping_times_oam_round_trips() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dan.toml");
    let ok = aurora()
        .args([
            "ping",
            file,
            "--from",
            "camera",
            "0.0.100",
            "-c",
            "4",
            "--virtual",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{text}");
    assert!(text.contains("4 sent, 4 answered"), "{text}");
    // camera -> sw1 -> sw2 -> display and back: at least 2 x 54 us.
    let min: f64 = text
        .split("= ")
        .nth(1)
        .and_then(|t| t.split('/').next())
        .and_then(|m| m.parse().ok())
        .unwrap();
    assert!((108.0..200.0).contains(&min), "{text}");
    // No PVC on that VC: nobody answers, and the exit status says so.
    let none = aurora()
        .args([
            "ping",
            file,
            "--from",
            "camera",
            "0.999",
            "-c",
            "2",
            "--virtual",
        ])
        .output()
        .unwrap();
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stdout).contains("2 sent, 0 answered"));
    let bad = aurora()
        .args(["ping", file, "--from", "camera", "7.0.100"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&bad.stderr).contains("interface 7"));
}

#[test]
fn a_lossy_link_shows_as_host_reassembly_drops() {
    let text = include_str!("../../../examples/dan.toml")
        .replace("delay = \"50us\"", "delay = \"50us\"\nloss = 0.001");
    let file = std::env::temp_dir().join(format!("aurora-lossy-{}.toml", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let out = aurora()
        .args(["run", "--virtual", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_file(&file).ok();
    let r = json_of(&out);
    let lost: u64 = r["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["lost"].as_u64().unwrap())
        .sum();
    let dropped: u64 = r["host_drops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d[2].as_u64().unwrap())
        .sum();
    // Every lost cell spoils at most one PDU, which the receiving host
    // counts under a reason; none is delivered corrupted.
    assert!(
        lost > 0 && dropped > 0 && dropped <= lost,
        "{lost} {dropped}"
    );
    for p in r["pvcs"].as_array().unwrap() {
        assert_eq!(p["corrupted"], 0, "{p}");
    }
}

#[test]
fn virtual_time_gives_the_same_report_on_one_or_two_workers() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dan.toml");
    let run = |workers: &str| -> serde_json::Value {
        let out = aurora()
            .args([
                "run",
                file,
                "--virtual",
                "--duration",
                "100ms",
                "--json",
                "--workers",
                workers,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (one, two) = (run("1"), run("2"));
    assert_eq!(one["workers"], 1);
    // dan.toml's 50 us trunk is long enough to cut.
    assert_eq!(two["workers"], 2, "{}", two["lookahead_us"]);
    assert_eq!(two["lookahead_us"].as_f64().unwrap().round(), 51.0);
    for k in ["trace", "events", "pvcs", "pings", "links"] {
        assert_eq!(one[k], two[k], "{k}");
    }
}

#[test]
fn a_pinned_node_runs_on_its_worker_with_the_same_results() {
    let dan = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/dan.toml"
    ))
    .unwrap();
    // A trunk too short to cut by default, and the switches pinned apart.
    let text = dan
        .replace("delay = \"50us\"", "delay = \"5us\"")
        .replace("name = \"sw1\"", "name = \"sw1\"\nworker = 0")
        .replace("name = \"sw2\"", "name = \"sw2\"\nworker = 1");
    assert_ne!(text, dan);
    let file = std::env::temp_dir().join(format!("aurora-pinned-{}.toml", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let run = |workers: &str| -> serde_json::Value {
        let out = aurora()
            .arg("run")
            .arg(&file)
            .args([
                "--virtual",
                "--duration",
                "50ms",
                "--json",
                "--workers",
                workers,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (one, two) = (run("1"), run("2"));
    assert_eq!(two["workers"], 2);
    assert_eq!(one["trace"], two["trace"]);
    assert_eq!(one["pvcs"], two["pvcs"]);
    let _ = std::fs::remove_file(&file);
}

/// The JSON report of a command that must have succeeded (its stderr if
/// not).
fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
