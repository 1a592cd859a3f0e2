//! `aurora video PIPELINE`: a Room Monitor in virtual time reports its
//! summary, and text that is not a pipeline gets one sentence.

use std::process::Command;

fn aurora(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .arg("video")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_room_monitor_runs_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("aurora-video-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clips = dir.join("clips.y4m");
    let text = format!(
        "room frames=300 cycle=100 busy=20 ! motion ! filesink file={}",
        clips.display()
    );
    let (ok, out, err) = aurora(&[&text, "--virtual"]);
    assert!(ok, "{err}");
    // Frames 1-20, 100-120 and 200-220 move (the person enters, walks,
    // leaves).
    assert!(
        out.contains("room monitor: 300 frames seen, 62 recorded in 3 clips"),
        "{out}"
    );
    assert!(std::fs::metadata(&clips).unwrap().len() > 62 * 320 * 240);
}

#[test]
fn text_that_is_not_a_pipeline_gets_one_sentence() {
    for (text, want) in [
        ("", "aurora video: the pipeline is empty\n"),
        (
            "synthetic ! edge threshold=x",
            "aurora video: threshold of element 2 (edge) is `x`, not a whole number from 1 to 2040\n",
        ),
    ] {
        let (ok, out, err) = aurora(&[text]);
        assert!(!ok && out.is_empty());
        assert_eq!(err, want);
    }
}
