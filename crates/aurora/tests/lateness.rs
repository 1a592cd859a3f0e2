//! A real-time run says whether it kept up with real time: an overloaded
//! one says its results are not faithful, a small one that it kept up.

use std::process::{Command, Output};
use std::sync::Mutex;

/// The runs here measure how punctual threads are; one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn aurora(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A host, a chain of `n` two-port switches at `rate`, a host, and a flow
/// along it (a `[[flow]]` body).
fn chain(n: usize, rate: &str, flow: &str) -> String {
    let mut s = String::new();
    for i in 0..n {
        s += &format!("[[switch]]\nname = \"s{i}\"\nports = 2\n\n");
    }
    s += "[[host]]\nname = \"a\"\n\n[[host]]\nname = \"b\"\n\n";
    let link = |a: &str, b: &str| {
        format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"{rate}\"\ndelay = \"2us\"\n\n")
    };
    s += &link("a", "s0:0");
    for i in 1..n {
        s += &link(&format!("s{}:1", i - 1), &format!("s{i}:0"));
    }
    s += &link(&format!("s{}:1", n - 1), "b");
    let path: Vec<String> = std::iter::once("a".to_string())
        .chain((0..n).map(|i| format!("s{i}")))
        .chain(std::iter::once("b".to_string()))
        .map(|x| format!("\"{x}\""))
        .collect();
    s += &format!(
        "[[pvc]]\nname = \"a-to-b\"\npath = [{}]\n\n",
        path.join(", ")
    );
    s += &format!("[[flow]]\npvc = \"a-to-b\"\n{flow}\n");
    s
}

#[test]
fn an_overloaded_run_says_it_is_not_faithful() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // 5 Gb/s across 20 OC-192c switches: over 200 million cell events a
    // second, far more than one machine runs in real time.
    let n = 20;
    let file =
        std::env::temp_dir().join(format!("aurora-lateness-chain-{}.toml", std::process::id()));
    let flow = "sdu = 9180\ncount = 100000\ninterval = \"15us\"";
    std::fs::write(&file, chain(n, "oc192", flow)).unwrap();
    let f = file.to_str().unwrap();

    let out = aurora(&["run", f, "--duration", "20ms", "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let l = &r["lateness"];
    assert_eq!(l["faithful"], false, "{l}");
    let sentence = l["sentence"].as_str().unwrap();
    assert!(sentence.contains("NOT real-time-faithful"), "{sentence}");
    assert!(sentence.contains("--virtual"), "{sentence}");
    assert_eq!(l["nodes"].as_array().unwrap().len(), n + 2);
    assert!(
        l["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["problem"].is_string()),
        "{l}"
    );
    // The warning goes to stderr too, even with --json.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(sentence), "{err}");

    // The text report ends with the sentence.
    let out = aurora(&["run", f, "--duration", "20ms"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("These results are NOT real-time-faithful"),
        "{text}"
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn a_small_run_says_it_kept_up() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dan = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dan.toml");
    // The machine may be shared: a stall of 10 ms from elsewhere truly
    // makes a run unfaithful, so allow a few tries.
    let mut sentences = Vec::new();
    for _ in 0..3 {
        let out = aurora(&["run", dan, "--duration", "200ms", "--json"]);
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let l = &r["lateness"];
        let nodes = l["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 5, "{l}");
        let camera = nodes.iter().find(|x| x["node"] == "camera").unwrap();
        assert!(camera["events"].as_u64().unwrap() > 0, "{camera}");
        let us = camera["events_us"].as_array().unwrap();
        let us: Vec<f64> = us.iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(us[0] <= us[1] && us[1] <= us[2], "{us:?}");
        if l["faithful"] == true {
            let s = l["sentence"].as_str().unwrap();
            assert!(s.starts_with("Real time kept up"), "{s}");
            assert!(String::from_utf8_lossy(&out.stderr).is_empty());
            return;
        }
        sentences.push(l["sentence"].to_string());
    }
    panic!("dan.toml never kept up: {sentences:?}");
}

#[test]
fn virtual_time_has_no_lateness() {
    let dan = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dan.toml");
    let out = aurora(&["run", dan, "--virtual", "--duration", "20ms", "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r.get("lateness").is_none(), "{r}");
}
