//! Many greedy AAL5 sources through one congested port (`examples/epd.toml`):
//! goodput in complete PDUs with tail drop, partial packet discard, and
//! early packet discard at thresholds from 10 % to 90 % of the buffer.

use std::path::Path;

use super::{example, plot, run, say_written, with_field, write_csv, Series};

/// Cells of one 9180-byte PDU.
const CELLS: u64 = 192;

/// One variant's figures: complete PDUs delivered, goodput, and the share
/// of the cells the congested line carried that were parts of them.
struct Row {
    name: String,
    threshold: Option<f64>,
    pdus: u64,
    mbps: f64,
    useful: f64,
}

/// Runs the experiment for `secs` of virtual time per variant and writes
/// its table and plot to `out`.
pub fn main(out: &Path, secs: f64) -> Result<(), String> {
    let base = example("epd.toml")?;
    let buffer = 2000.0;
    let mut variants: Vec<(String, Option<f64>, String)> = Vec::new();
    let tail = with_field(&base, "port", "discard", Some("tail".into()))?;
    variants.push((
        "tail drop".into(),
        None,
        with_field(&tail, "port", "epd", None)?,
    ));
    let ppd = with_field(&base, "port", "discard", Some("ppd".into()))?;
    variants.push(("PPD".into(), None, with_field(&ppd, "port", "epd", None)?));
    for k in 1..=9 {
        let f = f64::from(k) / 10.0;
        let epd = (f * buffer) as i64;
        let text = with_field(&base, "port", "epd", Some(epd.into()))?;
        variants.push((format!("EPD at {epd}"), Some(f), text));
    }
    let mut rows = Vec::new();
    for (name, threshold, text) in &variants {
        let r = run(text, secs)?;
        let pdus: u64 = r.pvcs.iter().map(|p| p.delivered).sum();
        let carried = r
            .links
            .iter()
            .find(|l| l.dir.starts_with("sw:8"))
            .map_or(0, |l| l.delivered);
        rows.push(Row {
            name: name.clone(),
            threshold: *threshold,
            pdus,
            mbps: r.pvcs.iter().map(|p| p.mbps).sum(),
            useful: (pdus * CELLS) as f64 / carried.max(1) as f64,
        });
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    println!(
        "aurora experiment epd: 8 greedy sources into one OC-3c port of 2,000 cells, {secs} s each\n"
    );
    println!(
        "{:<14} {:>14} {:>10} {:>12}",
        "discard", "PDUs complete", "Mb/s", "useful cells"
    );
    let mut csv = vec![vec![
        "discard".to_string(),
        "epd_threshold".into(),
        "pdus_complete".into(),
        "goodput_mbps".into(),
        "useful_share".into(),
    ]];
    for r in &rows {
        println!(
            "{:<14} {:>14} {:>10.1} {:>11.1}%",
            r.name,
            r.pdus,
            r.mbps,
            100.0 * r.useful
        );
        csv.push(vec![
            r.name.clone(),
            r.threshold.map_or(String::new(), |t| format!("{t:.1}")),
            r.pdus.to_string(),
            format!("{:.2}", r.mbps),
            format!("{:.4}", r.useful),
        ]);
    }
    let mut files = vec![write_csv(out, "epd", &csv)?];
    let flat = |name: &str, v: f64, color: usize| Series {
        name: name.into(),
        points: vec![(0.1, v), (0.9, v)],
        line: true,
        color,
    };
    let series = [
        Series {
            name: "EPD".into(),
            points: rows
                .iter()
                .filter_map(|r| Some((r.threshold?, r.useful)))
                .collect(),
            line: false,
            color: 0,
        },
        flat("tail drop", rows[0].useful, 1),
        flat("PPD", rows[1].useful, 2),
    ];
    files.extend(plot(
        out,
        "epd",
        "Cells the congested line carried that were parts of complete PDUs",
        (
            "EPD threshold, share of the 2,000-cell buffer",
            "share of the cells carried",
        ),
        &series,
    )?);
    say_written(&files);
    Ok(())
}
