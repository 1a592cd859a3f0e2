//! `aurora experiment striping` end to end, briefly: its table says what
//! docs/striping.md says (with 50 ms of virtual time per variant).

use std::process::Command;

#[test]
fn four_oc3c_striped_by_cell_with_markers_carry_what_one_oc12c_does() {
    let out = std::env::temp_dir().join(format!("aurora-exp-striping-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(["experiment", "striping", "--secs", "0.05", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("striping.csv")).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let rows: Vec<Vec<String>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    // unit, sync, buffer, loss, skew -> share of one OC-12c's goodput.
    let share = |unit: &str, sync: &str, buffer: &str, skew: &str| -> f64 {
        rows.iter()
            .find(|r| r[0] == unit && r[1] == sync && r[2] == buffer && r[3] == "0" && r[4] == skew)
            .map(|r| r[6].parse().unwrap())
            .unwrap_or_else(|| panic!("no row {unit} {sync} {buffer} {skew}: {csv}"))
    };
    for skew in ["0.00", "2.00", "5.00"] {
        let m = share("cell", "marker", "4096", skew);
        assert!(m >= 0.95, "cell marker at {skew} ms: {m}");
        assert!(share("cell", "none", "4096", skew) > 0.99);
    }
    // Sequence numbers cost 2 bytes a cell, and their window of 4,096
    // numbers holds under 3 ms of OC-12c.
    let s = share("cell", "sequence", "4096", "2.00");
    assert!((0.95..0.97).contains(&s), "{s}");
    assert!(share("cell", "sequence", "4096", "3.00") < 0.1);
    assert!(share("cell", "sequence", "16384", "5.00") > 0.95);
}
