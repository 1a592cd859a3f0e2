//! The experiments run end to end: their tables say what the papers found.

use std::process::Command;

/// Runs `aurora experiment NAME` for `secs` per variant into a fresh
/// folder; the CSV it wrote, as rows of fields (header first).
fn experiment(name: &str, secs: &str) -> Vec<Vec<String>> {
    let out = std::env::temp_dir().join(format!("aurora-exp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(["experiment", name, "--secs", secs, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join(format!("{name}.csv"))).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    csv.lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn num(s: &str) -> f64 {
    s.parse().unwrap()
}

#[test]
fn early_packet_discard_carries_most_of_the_line_in_whole_pdus() {
    let rows = experiment("epd", "0.5");
    let of_line = |name: &str| {
        rows.iter()
            .find(|r| r[0] == name)
            .map(|r| num(&r[4]))
            .unwrap_or_else(|| panic!("no row {name}: {rows:?}"))
    };
    let (tail, ppd) = (of_line("tail drop"), of_line("PPD"));
    let epd = of_line("EPD at 1000");
    assert!(tail < 0.5, "tail drop {tail}");
    assert!(ppd > tail, "ppd {ppd}, tail {tail}");
    assert!(epd > 0.95, "epd {epd}");
}

#[test]
fn the_flat_approximation_errs_less_as_its_walks_come_closer() {
    let rows = experiment("linkshare", "1");
    let err = |name: &str| {
        rows.iter()
            .find(|r| r[0] == name)
            .map(|r| num(&r[2]))
            .unwrap_or_else(|| panic!("no row {name}: {rows:?}"))
    };
    let (ms10, ms1, us100) = (
        err("flat every 10ms"),
        err("flat every 1ms"),
        err("flat every 100us"),
    );
    assert!(ms10 > 2.0 * ms1 && ms1 > us100, "{ms10} {ms1} {us100}");
    // Walking at every change, the approximation is as close to the fluid
    // as hierarchical WF2Q+ itself.
    assert!(err("flat every 0") <= 1.5 * err("HWFQ") + 1e-3, "{rows:?}");
}

#[test]
fn reno_alone_waits_for_its_timer_when_a_window_loses_three_segments() {
    let rows = experiment("tcp-drops", "10");
    let get = |variant: &str, drops: &str, col: usize| {
        rows.iter()
            .find(|r| r[0] == variant && r[1] == drops)
            .map(|r| num(&r[col]))
            .unwrap_or_else(|| panic!("no row {variant} {drops}: {rows:?}"))
    };
    for drops in ["1", "2", "3", "4"] {
        for v in ["tahoe", "newreno", "sack"] {
            assert_eq!(get(v, drops, 2), 0.0, "{v} with {drops} drops timed out");
        }
        let reno = get("reno", drops, 2);
        assert_eq!(
            reno > 0.0,
            drops == "3" || drops == "4",
            "reno, {drops} drops: {reno} timeouts"
        );
    }
    // NewReno repairs one loss a round trip (about 0.21 s); SACK repairs
    // four in less than three.
    let newreno = get("newreno", "4", 5);
    assert!((0.8..0.9).contains(&newreno), "{newreno}");
    assert!(get("sack", "4", 5) < 0.6);
    // Reno halves twice for two drops, with two fast retransmits.
    assert_eq!(get("reno", "2", 3), 2.0);
}

#[test]
fn early_packet_discard_helps_tcp_through_a_port_with_room_for_it() {
    let rows = experiment("tcp-epd", "4");
    let get = |discard: &str, mss: &str, buffer: &str, col: usize| {
        rows.iter()
            .find(|r| r[0] == discard && r[1] == mss && r[2] == buffer)
            .map(|r| num(&r[col]))
            .unwrap_or_else(|| panic!("no row {discard} {mss} {buffer}: {rows:?}"))
    };
    for r in &rows[1..] {
        let e = num(&r[3]);
        assert!(e > 0.3 && e < 1.0, "{r:?}");
    }
    // 9 KB segments, 1,000 cells: EPD carries more than tail drop, with
    // fewer timeouts; with buffers of 1,000 cells and more, EPD always
    // times out less.
    assert!(get("epd", "9140", "1000", 3) > get("tail", "9140", "1000", 3) + 0.03);
    for b in ["1000", "2000", "4000"] {
        assert!(
            get("epd", "9140", b, 5) < get("tail", "9140", b, 5),
            "buffer {b}"
        );
    }
}

#[test]
fn acks_behind_the_other_way_s_data_arrive_bunched_and_release_bursts() {
    let rows = experiment("ack-compression", "3");
    let get = |case: &str, col: usize| {
        rows.iter()
            .find(|r| r[0] == case)
            .map(|r| num(&r[col]))
            .unwrap_or_else(|| panic!("no row {case}: {rows:?}"))
    };
    assert_eq!(get("a alone", 3), 0.0, "alone, no ACK is compressed");
    assert!(get("a alone", 5) <= 3.0);
    assert!(get("a with b", 3) > 0.1, "{rows:?}");
    assert!(get("a with b", 5) >= 8.0, "{rows:?}");
}

#[test]
fn a_coarse_timer_costs_reno_and_a_larger_window_after_loss_pays() {
    let rows = experiment("tcp-long", "10");
    let get = |case: &str, col: usize| {
        rows.iter()
            .find(|r| r[0] == case)
            .map(|r| num(&r[col]))
            .unwrap_or_else(|| panic!("no row {case}: {rows:?}"))
    };
    assert!(get("reno", 2) >= 1.0, "Reno waits for its timer");
    assert_eq!(get("newreno", 2), 0.0);
    assert_eq!(get("sack", 2), 0.0);
    assert!(get("reno", 1) > get("reno coarse timer", 1) * 1.1);
    assert!(get("newreno", 1) > get("reno", 1));
    assert!(get("newreno keep 3/4", 1) > get("newreno", 1) * 1.1);
}

/// Runs `aurora experiment vidboard` with `args` into a fresh folder;
/// the CSV files `names` it wrote, as rows of fields (header first).
fn vidboard(args: &[&str], names: &[&str]) -> Vec<Vec<Vec<String>>> {
    let out = std::env::temp_dir().join(format!("aurora-exp-vidboard-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_aurora"))
        .args(["experiment", "vidboard"])
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tables = names
        .iter()
        .map(|name| {
            std::fs::read_to_string(out.join(format!("{name}.csv")))
                .unwrap()
                .lines()
                .map(|l| l.split(',').map(str::to_string).collect())
                .collect()
        })
        .collect();
    let _ = std::fs::remove_dir_all(&out);
    tables
}

#[test]
fn vidboard_real_time_table_6_and_the_aggregate_into_one_workstation() {
    // A reduced grid: CB 56 at LT 16 and 480, two delays, short runs; one
    // and two cameras. Real-time figures depend on the machine, so only
    // their presence and their faithfulness marks are checked.
    let t = vidboard(
        &[
            "--parts",
            "real,aggregate",
            "--secs",
            "3",
            "--real-secs",
            "0.4",
            "--cb",
            "56",
            "--lt",
            "16,480",
            "--delays",
            "0,200",
            "--cameras",
            "2",
        ],
        &["vidboard-table6-real", "vidboard-aggregate"],
    );
    let (real, agg) = (&t[0], &t[1]);
    assert_eq!(
        real[0][..6],
        ["cb", "lt", "best_interburst_us", "fps", "mbps", "faithful"]
    );
    assert_eq!(real.len(), 3, "{real:?}");
    for (r, lt) in real[1..].iter().zip(["16", "480"]) {
        assert_eq!((r[0].as_str(), r[1].as_str()), ("56", lt), "{r:?}");
        assert!(["0", "200"].contains(&r[2].as_str()), "{r:?}");
        assert!(num(&r[3]) >= 0.0 && num(&r[3]) <= 31.0, "{r:?}");
        assert!(["true", "false"].contains(&r[5].as_str()), "{r:?}");
        assert!(num(&r[6]) <= num(&r[7]) && num(&r[7]) == 2.0, "{r:?}");
    }
    let row = |host: &str, n: &str| {
        agg.iter()
            .find(|r| r[0] == host && r[2] == n)
            .unwrap_or_else(|| panic!("no row {host} {n}: {agg:?}"))
    };
    for host in ["dec5000", "dec3000"] {
        let (one, two) = (row(host, "1"), row(host, "2"));
        assert_eq!(one[1], "virtual");
        // One camera nearly fills the modelled processor: a second one
        // adds little to the aggregate, and the two share it, each
        // getting about half the frames one alone gets.
        let (a1, a2) = (num(&one[4]), num(&two[4]));
        assert!(a1 > 5.0 && a1 < 30.0, "{one:?}");
        assert!(a2 > 0.8 * a1 && a2 < 1.2 * a1, "{one:?} {two:?}");
        let (f1, f2) = (num(&one[7]), num(&two[7]));
        assert!(f2 > 0.35 * f1 && f2 < 0.65 * f1, "{one:?} {two:?}");
        assert!(num(&two[6]) - num(&two[5]) <= 0.5, "fair turns {two:?}");
    }
    for n in ["1", "2"] {
        let r = row("today", n);
        assert_eq!(r[1], "real");
        assert!(["true", "false"].contains(&r[9].as_str()), "{r:?}");
    }
}
