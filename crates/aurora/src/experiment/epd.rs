//! Many greedy AAL5 sources through one congested port (`examples/epd.toml`):
//! goodput in complete PDUs with tail drop, partial packet discard, and
//! early packet discard at thresholds from 10 % to 90 % of the buffer.

use std::path::Path;

use super::{example, plot, run, with_field, write_csv, Series};

/// OC-3c's payload rate, Mb/s: what the congested line could carry.
const LINE_MBPS: f64 = 149.76;

/// One variant's figures: complete PDUs delivered, goodput, and cells the
/// port dropped.
struct Row {
    name: String,
    threshold: Option<f64>,
    pdus: u64,
    mbps: f64,
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
        rows.push(Row {
            name: name.clone(),
            threshold: *threshold,
            pdus: r.pvcs.iter().map(|p| p.delivered).sum(),
            mbps: r.pvcs.iter().map(|p| p.mbps).sum(),
        });
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    println!(
        "aurora experiment epd: 8 greedy sources into one OC-3c port of 2,000 cells, {secs} s each\n"
    );
    println!(
        "{:<14} {:>14} {:>10} {:>12}",
        "discard", "PDUs complete", "Mb/s", "of the line"
    );
    let mut csv = vec![vec![
        "discard".to_string(),
        "epd_threshold".into(),
        "pdus_complete".into(),
        "goodput_mbps".into(),
        "of_line".into(),
    ]];
    for r in &rows {
        println!(
            "{:<14} {:>14} {:>10.1} {:>11.1}%",
            r.name,
            r.pdus,
            r.mbps,
            100.0 * r.mbps / LINE_MBPS
        );
        csv.push(vec![
            r.name.clone(),
            r.threshold.map_or(String::new(), |t| format!("{t:.1}")),
            r.pdus.to_string(),
            format!("{:.2}", r.mbps),
            format!("{:.4}", r.mbps / LINE_MBPS),
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
                .filter_map(|r| Some((r.threshold?, r.mbps / LINE_MBPS)))
                .collect(),
            line: false,
            color: 0,
        },
        flat("tail drop", rows[0].mbps / LINE_MBPS, 1),
        flat("PPD", rows[1].mbps / LINE_MBPS, 2),
    ];
    files.extend(plot(
        out,
        "epd",
        "Goodput in complete PDUs, 8 sources into one OC-3c port",
        (
            "EPD threshold, share of the 2,000-cell buffer",
            "goodput / OC-3c payload rate",
        ),
        &series,
    )?);
    println!();
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}
