//! Striping four OC-3c channels against one OC-12c
//! (`examples/striping.toml`, the seed's §4.1.2 and §5.2): a greedy flow
//! of 9180-byte PDUs striped with cells and with PDUs as the unit, under
//! each synchronisation method, with the channels' skew swept from 0 to
//! 5 ms, without loss and with a cell in 100,000 lost on every channel;
//! goodput against the same flow over one OC-12c trunk, resequencing delay
//! and buffer occupancy. The receiver keeps the example's limits (4,096
//! units, 10 ms); cell striping is also run with room for 16,384 units,
//! to show which limit a method meets first.

use std::path::Path;

use crate::stripe_report::StripeRow;

use super::{example, plot, run, say_written, write_csv, Series};

/// Skews swept, milliseconds: the largest difference between two
/// channels' delays (channel i is delayed i/3 of it).
const SKEWS_MS: [f64; 9] = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0];
/// Cell loss on every channel (and the baseline's trunk) in the lossy runs.
const LOSS: f64 = 1e-5;
/// The larger receive buffer, units.
const BIG_BUFFER: i64 = 16_384;

/// Names of the baseline's parts in the example.
const BASELINE: [&str; 5] = ["c", "d", "sw-c", "sw-d", "single"];

/// One variant: what it ran and what came of it.
struct Row {
    unit: &'static str,
    sync: &'static str,
    buffer: i64,
    loss: f64,
    skew_ms: f64,
    mbps: f64,
    share: f64,
    pdus: u64,
    pdus_sent: u64,
    units_lost: u64,
    reordered: f64,
    delay_p50_us: f64,
    delay_p99_us: f64,
    delay_max_us: f64,
    held_max: u64,
}

/// True for an entry of the baseline's part (by its name, ends or path).
fn baseline_part(t: &toml::Table) -> bool {
    let named = |k: &str| {
        t.get(k)
            .and_then(toml::Value::as_str)
            .is_some_and(|v| BASELINE.contains(&v.split(':').next().unwrap_or(v)))
    };
    named("name")
        || named("a")
        || named("b")
        || named("from")
        || t.get("path")
            .and_then(toml::Value::as_array)
            .is_some_and(|p| {
                p.iter()
                    .filter_map(toml::Value::as_str)
                    .any(|n| BASELINE.contains(&n))
            })
}

/// The example with only the striped part (`striped`) or only the
/// baseline, each channel's delay set for `skew_ms`, `loss` on the
/// channels (or the baseline's trunk), and the stripe's settings.
fn variant(
    base: &str,
    striped: bool,
    unit: &str,
    sync: &str,
    buffer: i64,
    skew_ms: f64,
    loss: f64,
) -> Result<String, String> {
    let mut doc: toml::Table = base.parse().map_err(|e| format!("{e}"))?;
    for (_, v) in doc.iter_mut() {
        if let toml::Value::Array(entries) = v {
            entries.retain(|e| e.as_table().is_none_or(|t| baseline_part(t) != striped));
        }
    }
    let links = doc
        .get_mut("link")
        .and_then(toml::Value::as_array_mut)
        .ok_or("the example has no [[link]]")?;
    for l in links.iter_mut().filter_map(toml::Value::as_table_mut) {
        let a = l
            .get("a")
            .and_then(toml::Value::as_str)
            .unwrap_or("")
            .to_string();
        let channel = a
            .strip_prefix("mux-a:")
            .and_then(|p| p.parse::<u32>().ok())
            .filter(|&p| p >= 1);
        if let Some(i) = channel {
            let us = (skew_ms * 1000.0 * f64::from(i - 1) / 3.0).round() as i64;
            l.insert("delay".into(), format!("{us}us").into());
        }
        if channel.is_some() || a == "sw-c:1" {
            l.insert("loss".into(), loss.into());
        }
    }
    let stripes = doc
        .get_mut("stripe")
        .and_then(toml::Value::as_array_mut)
        .ok_or("the example has no [[stripe]]")?;
    for s in stripes.iter_mut().filter_map(toml::Value::as_table_mut) {
        s.insert("unit".into(), unit.into());
        if striped {
            s.insert("sync".into(), sync.into());
            s.insert("buffer".into(), buffer.into());
            let k = if unit == "cell" { 32 } else { 4 };
            s.insert("marker_interval".into(), k.into());
        }
    }
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// Skews at which internal splitting is run, milliseconds.
const SPLIT_SKEWS_MS: [f64; 3] = [0.0, 2.0, 5.0];
/// The SDU of the splitter example's flow, bytes.
const SPLIT_SDU: f64 = 9180.0;

/// `examples/splitter.toml` with the pair's unit and method, channel `i`
/// (port `i` of split-a, 1 to 4) delayed `(i - 1)/3` of `skew_ms`, and the
/// flow sending until the run stops at the highest rate the four channels
/// carry with that unit (what a greedy striping host finds by itself: one
/// marker in 33 cells for cells; for 9180-byte PDUs, one OC-12c's worth).
fn splitter_variant(base: &str, unit: &str, sync: &str, skew_ms: f64) -> Result<String, String> {
    let mut doc: toml::Table = base.parse().map_err(|e| format!("{e}"))?;
    let cell = unit.starts_with("cell");
    for l in doc
        .get_mut("link")
        .and_then(toml::Value::as_array_mut)
        .ok_or("the splitter example has no [[link]]")?
        .iter_mut()
        .filter_map(toml::Value::as_table_mut)
    {
        let channel = l
            .get("a")
            .and_then(toml::Value::as_str)
            .and_then(|a| a.strip_prefix("split-a:"))
            .and_then(|p| p.parse::<u32>().ok())
            .filter(|&p| p >= 1);
        if let Some(i) = channel {
            let us = (skew_ms * 1000.0 * f64::from(i - 1) / 3.0).round() as i64;
            l.insert("delay".into(), format!("{us}us").into());
        }
    }
    for s in doc
        .get_mut("splitter")
        .and_then(toml::Value::as_array_mut)
        .ok_or("the splitter example has no [[splitter]]")?
        .iter_mut()
        .filter_map(toml::Value::as_table_mut)
    {
        s.insert("unit".into(), (if cell { "cell" } else { "pdu" }).into());
        s.insert("sync".into(), sync.into());
        s.insert("marker_interval".into(), (if cell { 32 } else { 4 }).into());
        if !cell {
            // PDUs come 137 us apart: idle markers after 100 us would put
            // one on every channel between every two PDUs.
            s.insert("idle_marker".into(), "1ms".into());
        }
    }
    for f in doc
        .get_mut("flow")
        .and_then(toml::Value::as_array_mut)
        .ok_or("the splitter example has no [[flow]]")?
        .iter_mut()
        .filter_map(toml::Value::as_table_mut)
    {
        f.insert("count".into(), 100_000_000.into());
        f.insert(
            "interval".into(),
            (if cell { "141us" } else { "137us" }).into(),
        );
    }
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// The one striped VC of a report.
fn only(r: &crate::run::Report) -> Result<&StripeRow, String> {
    r.stripe
        .as_ref()
        .and_then(|s| s.vcs.first())
        .ok_or_else(|| "the run reported no striped VC".to_string())
}

/// Runs the experiment for `secs` of virtual time per variant and writes
/// its table and plots to `out`.
pub fn main(out: &Path, secs: f64) -> Result<(), String> {
    let base = example("striping.toml")?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    println!(
        "aurora experiment striping: 4 x OC-3c against 1 x OC-12c, greedy 9180-byte PDUs, {secs} s each\n"
    );
    // The baseline, with and without loss, for each unit (its cells are the
    // same; the unit only names them).
    let mut baseline = Vec::new();
    for loss in [0.0, LOSS] {
        let r = run(&variant(&base, false, "cell", "none", 0, 0.0, loss)?, secs)?;
        let v = only(&r)?;
        println!(
            "one OC-12c trunk, loss {loss:e}: {:.1} Mb/s ({} of {} PDUs)",
            v.pdus.mbps, v.pdus.delivered, v.pdus.sent
        );
        baseline.push((loss, v.pdus.mbps));
    }
    println!();
    let mut plan: Vec<(&str, &str, i64, f64)> = Vec::new();
    for loss in [0.0, LOSS] {
        for unit in ["cell", "pdu"] {
            for sync in ["none", "sequence", "marker"] {
                plan.push((unit, sync, 4096, loss));
            }
        }
    }
    for sync in ["none", "sequence", "marker"] {
        plan.push(("cell", sync, BIG_BUFFER, 0.0));
    }
    println!(
        "{:<5} {:<9} {:>6} {:>6} {:>7} {:>9} {:>7} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "unit",
        "sync",
        "buffer",
        "loss",
        "skew ms",
        "Mb/s",
        "of 12c",
        "PDUs",
        "lost u",
        "reord",
        "p50 us",
        "p99 us",
        "held"
    );
    let mut rows = Vec::new();
    for &(unit, sync, buffer, loss) in &plan {
        let reference = baseline.iter().find(|b| b.0 == loss).map_or(1.0, |b| b.1);
        for skew_ms in SKEWS_MS {
            let text = variant(&base, true, unit, sync, buffer, skew_ms, loss)?;
            let r = run(&text, secs)?;
            let v = only(&r)?;
            let row = Row {
                unit,
                sync,
                buffer,
                loss,
                skew_ms,
                mbps: v.pdus.mbps,
                share: v.pdus.mbps / reference.max(1e-9),
                pdus: v.pdus.delivered,
                pdus_sent: v.pdus.sent,
                units_lost: v.units.lost + v.units.unseen,
                reordered: v.delivered_order.ratio,
                delay_p50_us: v.delay_us.p50,
                delay_p99_us: v.delay_us.p99,
                delay_max_us: v.delay_us.max,
                held_max: v.held_max,
            };
            println!(
                "{:<5} {:<9} {:>6} {:>6} {:>7.1} {:>9.1} {:>6.1}% {:>5}/{:<5} {:>9} {:>9.4} {:>9.0} {:>9.0} {:>8}",
                row.unit,
                row.sync,
                row.buffer,
                if row.loss > 0.0 { "1e-5" } else { "0" },
                row.skew_ms,
                row.mbps,
                100.0 * row.share,
                row.pdus,
                row.pdus_sent,
                row.units_lost,
                row.reordered,
                row.delay_p50_us,
                row.delay_p99_us,
                row.held_max
            );
            rows.push(row);
        }
    }
    // Internal splitting (examples/splitter.toml): the same four channels
    // between two striping relays, the hosts sending one plain VC.
    let split_base = example("splitter.toml")?;
    let reference = baseline.iter().find(|b| b.0 == 0.0).map_or(1.0, |b| b.1);
    for (unit, sync) in [
        ("cell/split", "marker"),
        ("pdu/split", "sequence"),
        ("pdu/split", "marker"),
    ] {
        for skew_ms in SPLIT_SKEWS_MS {
            let r = run(&splitter_variant(&split_base, unit, sync, skew_ms)?, secs)?;
            let v = only(&r)?;
            let flow = r.pvcs.first().ok_or("the splitter run reported no PVC")?;
            let mbps = flow.delivered as f64 * SPLIT_SDU * 8.0 / secs / 1e6;
            let row = Row {
                unit,
                sync,
                buffer: 4096,
                loss: 0.0,
                skew_ms,
                mbps,
                share: mbps / reference.max(1e-9),
                pdus: flow.delivered,
                pdus_sent: flow.sent,
                units_lost: v.units.lost + v.units.unseen,
                reordered: 0.0,
                delay_p50_us: v.delay_us.p50,
                delay_p99_us: v.delay_us.p99,
                delay_max_us: v.delay_us.max,
                held_max: v.held_max,
            };
            println!(
                "{:<10} {:<9} {:>7.1} {:>9.1} {:>6.1}% {:>5}/{:<5} {:>9} {:>9.0} {:>9.0} {:>8}",
                row.unit,
                row.sync,
                row.skew_ms,
                row.mbps,
                100.0 * row.share,
                row.pdus,
                row.pdus_sent,
                row.units_lost,
                row.delay_p50_us,
                row.delay_p99_us,
                row.held_max
            );
            rows.push(row);
        }
    }
    // The acceptance figures: cell striping with markers, no loss.
    let share_at = |skew: f64| {
        rows.iter()
            .find(|r| {
                r.unit == "cell"
                    && r.sync == "marker"
                    && r.buffer == 4096
                    && r.loss == 0.0
                    && r.skew_ms == skew
            })
            .map_or(0.0, |r| r.share)
    };
    let (at0, at2) = (share_at(0.0), share_at(2.0));
    println!(
        "\ncell striping with markers: {:.1} % of one OC-12c at 0 skew (needs 95), {:.1} % at 2 ms (needs 90): {}",
        100.0 * at0,
        100.0 * at2,
        if at0 >= 0.95 && at2 >= 0.90 {
            "met"
        } else {
            "NOT met"
        }
    );

    let mut csv = vec![[
        "unit",
        "sync",
        "buffer_units",
        "loss",
        "skew_ms",
        "goodput_mbps",
        "share_of_oc12c",
        "pdus_delivered",
        "pdus_sent",
        "units_lost",
        "reordered_ratio",
        "reseq_p50_us",
        "reseq_p99_us",
        "reseq_max_us",
        "held_max_units",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for r in &rows {
        csv.push(vec![
            r.unit.into(),
            r.sync.into(),
            r.buffer.to_string(),
            r.loss.to_string(),
            format!("{:.2}", r.skew_ms),
            format!("{:.2}", r.mbps),
            format!("{:.4}", r.share),
            r.pdus.to_string(),
            r.pdus_sent.to_string(),
            r.units_lost.to_string(),
            format!("{:.6}", r.reordered),
            format!("{:.1}", r.delay_p50_us),
            format!("{:.1}", r.delay_p99_us),
            format!("{:.1}", r.delay_max_us),
            r.held_max.to_string(),
        ]);
    }
    let mut files = vec![write_csv(out, "striping", &csv)?];
    let series = |loss: f64, y: &dyn Fn(&Row) -> f64, with_big: bool| {
        let mut v = Vec::new();
        let mut color = 0;
        for (unit, buffer) in [("cell", 4096), ("pdu", 4096), ("cell", BIG_BUFFER)] {
            if buffer == BIG_BUFFER && !with_big {
                continue;
            }
            for sync in ["none", "sequence", "marker"] {
                let points: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| {
                        r.unit == unit && r.sync == sync && r.buffer == buffer && r.loss == loss
                    })
                    .map(|r| (r.skew_ms, y(r)))
                    .collect();
                if points.is_empty() {
                    continue;
                }
                let extra = if buffer == BIG_BUFFER {
                    ", 16384-unit buffer"
                } else {
                    ""
                };
                v.push(Series {
                    name: format!("{unit}, {sync}{extra}"),
                    points,
                    line: true,
                    color,
                });
                color += 1;
            }
        }
        v
    };
    let goodput = |r: &Row| 100.0 * r.share;
    files.extend(plot(
        out,
        "striping-goodput",
        "Goodput of 4 x OC-3c striped, % of one OC-12c, no loss",
        ("skew between the channels, ms", "% of one OC-12c's goodput"),
        &series(0.0, &goodput, true),
    )?);
    files.extend(plot(
        out,
        "striping-goodput-loss",
        "Goodput of 4 x OC-3c striped, % of one OC-12c, 1 cell in 100,000 lost",
        ("skew between the channels, ms", "% of one OC-12c's goodput"),
        &series(LOSS, &goodput, false),
    )?);
    let delay = |r: &Row| r.delay_p99_us / 1000.0;
    files.extend(plot(
        out,
        "striping-delay",
        "Resequencing delay, 99th percentile, no loss",
        (
            "skew between the channels, ms",
            "resequencing delay p99, ms",
        ),
        &series(0.0, &delay, true),
    )?);
    say_written(&files);
    if at0 >= 0.95 && at2 >= 0.90 {
        Ok(())
    } else {
        Err("cell striping with markers missed its goodput target".into())
    }
}
