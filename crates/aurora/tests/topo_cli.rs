//! Topology files on the command line: size limit, text that is not UTF-8,
//! names with control characters.

use std::process::{Command, Output};

fn aurora() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aurora"))
}

/// A file in a fresh temporary folder.
fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("aurora-topo-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn an_endless_file_is_refused_at_the_limit() {
    for cmd in [
        vec!["run", "/dev/zero", "--virtual"],
        vec!["run", "/dev/zero"],
        vec!["node", "/dev/zero", "--name", "h1"],
        vec!["ping", "/dev/zero", "0.100", "--from", "h1", "--virtual"],
    ] {
        let o = aurora().args(&cmd).output().unwrap();
        assert!(!o.status.success(), "{cmd:?}");
        let e = stderr(&o);
        assert!(
            e.contains(
                "/dev/zero is larger than 16777216 bytes, the most a topology file may hold"
            ),
            "{cmd:?}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "{cmd:?}: {e}");
    }
}

#[test]
fn a_big_sparse_file_is_refused_and_the_limit_can_be_changed() {
    let p = temp_file("sparse.toml", b"");
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let o = aurora()
        .args(["run", p.to_str().unwrap(), "--virtual"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is larger than 16777216 bytes"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(&p).unwrap();

    // A small limit refuses an example; a wrong one is named.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/dan.toml");
    let o = aurora()
        .args(["run", example, "--virtual", "--duration", "1ms"])
        .env("AURORA_MAX_TOPOLOGY_BYTES", "100")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is larger than 100 bytes"),
        "{}",
        stderr(&o)
    );
    let o = aurora()
        .args(["run", example, "--virtual", "--duration", "1ms"])
        .env("AURORA_MAX_TOPOLOGY_BYTES", "lots")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("AURORA_MAX_TOPOLOGY_BYTES=\"lots\" is not a number of bytes"),
        "{}",
        stderr(&o)
    );
    let o = aurora()
        .args(["run", example, "--virtual", "--duration", "1ms"])
        .env("AURORA_MAX_TOPOLOGY_BYTES", "1000000")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn text_that_is_not_utf8_is_located() {
    let p = temp_file(
        "latin1.toml",
        b"[[switch]]\nname = \"s\"\nports = 2\n\n[[host]]\nname = \"caf\xe9\"\n",
    );
    for cmd in ["run", "node"] {
        let mut c = aurora();
        c.args([cmd, p.to_str().unwrap()]);
        if cmd == "node" {
            c.args(["--name", "s"]);
        } else {
            c.arg("--virtual");
        }
        let o = c.output().unwrap();
        assert!(!o.status.success());
        let e = stderr(&o);
        assert!(
            e.contains("latin1.toml:6:12: byte 0xe9 is not UTF-8 text"),
            "{cmd}: {e}"
        );
    }
}

#[test]
fn names_with_control_characters_are_refused_and_not_echoed_raw() {
    let p = temp_file(
        "nul.toml",
        b"[[switch]]\nname = \"s\"\nports = 2\n\n[[host]]\nname = \"h\\u0000\\u001b[2J\"\n\n\
          [[host]]\nname = \"h2\"\n\n[[link]]\na = \"h2\"\nb = \"s:0\"\n\n\
          [[pvc]]\nname = \"p\\u0007\"\npath = [\"h2\", \"s\"]\n",
    );
    let o = aurora()
        .args(["run", p.to_str().unwrap(), "--virtual"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        !o.stderr.iter().any(|&b| b == 0 || b == 0x1b || b == 7),
        "{e:?}"
    );
    assert!(
        e.contains("nul.toml:5:1: the name \"h\\u{0}\\u{1b}[2J\""),
        "{e}"
    );
    assert!(e.contains("nul.toml:15:1: the PVC name \"p\\u{7}\""), "{e}");

    // A name given on the command line is escaped too.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/processes.toml");
    let o = aurora()
        .args(["node", example, "--name", "x\u{1b}[2J", "--duration", "1ms"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!o.stderr.contains(&0x1b), "{:?}", stderr(&o));
    assert!(
        stderr(&o).contains("no node called \"x\\u{1b}[2J\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_reserved_vci_in_a_file_is_refused_by_run() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/dan.toml"
    ))
    .unwrap();
    let bad = text.replacen("to_vc = \"0.300\"", "to_vc = \"0.3\"", 1);
    assert_ne!(bad, text, "the example has to_vc = \"0.300\"");
    let p = temp_file("reserved.toml", bad.as_bytes());
    let o = aurora()
        .args(["run", p.to_str().unwrap(), "--virtual", "--duration", "1ms"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("to_vc 0.3 is reserved"),
        "{}",
        stderr(&o)
    );
}
