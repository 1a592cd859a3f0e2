//! The Vidboard's tables (`examples/vidboard.toml`, the seed's Section
//! 4.3): Table 6, the frame rate a 1990s workstation reaches against the
//! shaping parameters CB and LT at 640×480 monochrome, the interburst
//! delay chosen by a sweep for each pair; and Table 7, frame rate and
//! bit rate per picture size and format when the camera (30 frames a
//! second) or the line is the limit.

use std::path::Path;

use aurora_time::Instant;
use aurora_video::client::VidboardClient;

use super::{example, plot, run, say_written, virtual_net, with_field, write_csv, Series};

/// CB values of the seed's Table 6 (cells per burst; 14 cells carry one
/// 640-pixel scan line).
const CBS: [i64; 4] = [14, 28, 42, 56];
/// LT values of the seed's Table 6 (scan lines per t-frame).
const LTS: [i64; 4] = [4, 16, 120, 480];
/// The seed's Table 6: frames a second, rows CB, columns LT; and the
/// interburst delay (us) it found best for each CB.
const SEED_T6: [[f64; 4]; 4] = [
    [7.7, 8.7, 9.1, 9.5],
    [9.1, 10.0, 10.5, 11.7],
    [9.0, 9.5, 10.5, 11.1],
    [9.5, 10.0, 10.5, 11.1],
];
const SEED_T6_DELAY: [f64; 4] = [150.0, 240.0, 390.0, 510.0];
/// The seed's Table 7: (size, frames/s and Mb/s for black and white,
/// then for dithered colour).
const SEED_T7: [(&str, f64, f64, f64, f64); 3] = [
    ("640x480", 15.0, 37.0, 4.3, 10.5),
    ("320x240", 30.0, 23.0, 15.0, 9.2),
    ("160x120", 30.0, 4.6, 30.0, 4.6),
];

/// The example with the viewer's field `key` set.
fn viewer(text: &str, key: &str, v: toml::Value) -> Result<String, String> {
    with_field(text, "viewer", key, Some(v))
}

/// Whole frames a second the viewer of `text` gets in steady state over
/// `secs` of virtual time: complete frames after the first, over the time
/// from the first to the last.
fn steady_rate(text: &str, secs: f64) -> Result<f64, String> {
    let net = virtual_net(text, secs)?;
    let id = super::host_id(&net, "ws1")?;
    let c = net
        .sim
        .node::<VidboardClient>(id)
        .ok_or("ws1 is not a viewer")?;
    let times: Vec<Instant> = c
        .deliveries()
        .filter(|d| d.complete)
        .map(|d| d.at)
        .collect();
    Ok(match (times.first(), times.last()) {
        (Some(&a), Some(&b)) if times.len() >= 3 && b > a => {
            (times.len() - 1) as f64 / (b - a).as_secs_f64()
        }
        _ => 0.0,
    })
}

/// The best interburst delay (us) for `text` and the rate it gives: a
/// sweep from 0 to 4 ms in 100 us steps, then 10 us steps around the best.
fn best_delay(text: &str, secs: f64) -> Result<(f64, f64), String> {
    let at = |us: i64| -> Result<f64, String> {
        let t = viewer(text, "interburst", format!("{us}us").into())?;
        steady_rate(&t, secs)
    };
    let mut best = (0i64, at(0)?);
    for us in (100..=4000).step_by(100) {
        let r = at(us)?;
        if r > best.1 + 1e-9 {
            best = (us, r);
        }
    }
    let (lo, hi) = ((best.0 - 90).max(0), best.0 + 90);
    for us in (lo..=hi).step_by(10) {
        let r = at(us)?;
        if r > best.1 + 1e-9 {
            best = (us, r);
        }
    }
    Ok((best.0 as f64, best.1))
}

/// Runs both tables and writes their CSV files and plots to `out`.
pub fn main(out: &Path, secs: f64) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
    let mut files = table6(out, secs, Model::Table1)?;
    files.extend(table6(out, secs, Model::Implied)?);
    files.extend(table7(out, secs)?);
    say_written(&files);
    Ok(())
}

/// The host model a Table 6 run uses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Model {
    /// `dec5000`: costs derived from the seed's Table 1 (docs/video.md).
    Table1,
    /// The same per-cell cost with the per-burst and per-t-frame costs
    /// back-solved from the seed's Table 6 itself (44 us, 130 us): a check
    /// of the model's mechanism, not a prediction.
    Implied,
}

fn table6(out: &Path, secs: f64, model: Model) -> Result<Vec<std::path::PathBuf>, String> {
    let base = example("vidboard.toml")?;
    let base = viewer(&base, "host", "dec5000".into())?;
    let (base, name, what) = match model {
        Model::Table1 => (
            base,
            "vidboard-table6",
            "host model dec5000 (DECstation 5000/200 with the VupBoard, costs from Table 1)",
        ),
        Model::Implied => {
            let b = viewer(&base, "per_burst", "44us".into())?;
            let b = viewer(&b, "per_tframe", "130us".into())?;
            (b, "vidboard-table6-implied", "host model with costs back-solved from the seed's Table 6 (44 us a burst, 13.4 us a cell, 130 us a t-frame; a check, not a prediction)")
        }
    };
    let base = viewer(&base, "processing", "0ms".into())?;
    let base = viewer(&base, "mode", "closed".into())?;
    let base = viewer(&base, "size", "640x480".into())?;
    let base = viewer(&base, "format", "mono8".into())?;
    println!("\nTable 6, 640x480 mono8, closed loop, {what}, {secs} s per run\n");
    println!(
        "{:>4} {:>28} {:>28} {:>12} {:>12}",
        "CB", "frames/s at LT 4,16,120,480", "seed's", "delay (us)", "seed's"
    );
    let mut csv = vec![vec![
        "cb".to_string(),
        "lt".into(),
        "best_interburst_us".into(),
        "fps".into(),
        "seed_fps".into(),
        "seed_interburst_us".into(),
    ]];
    let mut series = Vec::new();
    for (i, &cb) in CBS.iter().enumerate() {
        let mut rates = Vec::new();
        let mut delays = Vec::new();
        for (j, &lt) in LTS.iter().enumerate() {
            let t = viewer(&base, "cb", cb.into())?;
            let t = viewer(&t, "lt", lt.into())?;
            let (delay, rate) = best_delay(&t, secs)?;
            // The chosen point once more, with the books checked.
            let t = viewer(&t, "interburst", format!("{delay}us").into())?;
            run(&t, secs)?;
            csv.push(vec![
                cb.to_string(),
                lt.to_string(),
                format!("{delay}"),
                format!("{rate:.2}"),
                format!("{}", SEED_T6[i][j]),
                format!("{}", SEED_T6_DELAY[i]),
            ]);
            rates.push(rate);
            delays.push(delay);
        }
        println!(
            "{:>4} {:>28} {:>28} {:>12} {:>12}",
            cb,
            rates
                .iter()
                .map(|r| format!("{r:.1}"))
                .collect::<Vec<_>>()
                .join(" "),
            SEED_T6[i]
                .iter()
                .map(|r| format!("{r:.1}"))
                .collect::<Vec<_>>()
                .join(" "),
            delays
                .iter()
                .map(|d| format!("{d}"))
                .collect::<Vec<_>>()
                .join(","),
            SEED_T6_DELAY[i]
        );
        series.push(Series {
            name: format!("CB {cb}"),
            points: LTS
                .iter()
                .zip(&rates)
                .map(|(&l, &r)| (l as f64, r))
                .collect(),
            line: true,
            color: i,
        });
        series.push(Series {
            name: format!("CB {cb}, seed"),
            points: LTS
                .iter()
                .zip(&SEED_T6[i])
                .map(|(&l, &r)| (l as f64, r))
                .collect(),
            line: false,
            color: i,
        });
    }
    let mut files = vec![write_csv(out, name, &csv)?];
    files.extend(plot(
        out,
        name,
        "Table 6: frame rate against LT and CB, best interburst delay (lines: model; marks: seed)",
        ("LT, scan lines per t-frame", "frames/s"),
        &series,
    )?);
    Ok(files)
}

fn table7(out: &Path, secs: f64) -> Result<Vec<std::path::PathBuf>, String> {
    let base = example("vidboard.toml")?;
    let base = viewer(&base, "host", "none".into())?;
    let base = viewer(&base, "processing", "0ms".into())?;
    let base = viewer(&base, "interburst", "0us".into())?;
    let base = viewer(&base, "lt", 8.into())?;
    println!(
        "\nTable 7: a camera at 30 frames/s, an OC-3c line, a host that takes no time, closed \
         loop, LT 8, CB 56, no delays, {secs} s per run\n"
    );
    println!(
        "{:>8} {:>20} {:>20} {:>20} {:>20}",
        "size", "mono8 frames/s (Mb/s)", "seed's B&W", "yuyv frames/s (Mb/s)", "seed's colour"
    );
    let mut csv = vec![vec![
        "size".to_string(),
        "format".into(),
        "fps".into(),
        "mbps".into(),
        "seed_fps".into(),
        "seed_mbps".into(),
    ]];
    let mut fps_series = vec![Vec::new(), Vec::new()];
    for (i, (size, bw_f, bw_m, col_f, col_m)) in SEED_T7.iter().enumerate() {
        let mut cells = Vec::new();
        for (k, format) in ["mono8", "yuyv"].iter().enumerate() {
            let t = viewer(&base, "size", (*size).into())?;
            let t = viewer(&t, "format", (*format).into())?;
            let r = run(&t, secs)?;
            let v = r
                .video
                .as_ref()
                .and_then(|v| v.viewers.first())
                .ok_or("the example has no viewer")?;
            let (seed_f, seed_m) = if k == 0 {
                (*bw_f, *bw_m)
            } else {
                (*col_f, *col_m)
            };
            csv.push(vec![
                size.to_string(),
                format.to_string(),
                format!("{:.2}", v.fps),
                format!("{:.2}", v.mbps),
                format!("{seed_f}"),
                format!("{seed_m}"),
            ]);
            fps_series[k].push((i as f64, v.fps));
            cells.push(format!("{:.1} ({:.1})", v.fps, v.mbps));
            cells.push(format!("{seed_f:.1} ({seed_m:.1})"));
        }
        println!(
            "{:>8} {:>20} {:>20} {:>20} {:>20}",
            size, cells[0], cells[1], cells[2], cells[3]
        );
    }
    let mut files = vec![write_csv(out, "vidboard-table7", &csv)?];
    let series: Vec<Series> = fps_series
        .into_iter()
        .zip(["mono8", "yuyv"])
        .enumerate()
        .map(|(k, (points, name))| Series {
            name: name.into(),
            points,
            line: true,
            color: k,
        })
        .collect();
    files.extend(plot(
        out,
        "vidboard-table7",
        "Table 7: frame rate per picture size (0: 640x480, 1: 320x240, 2: 160x120)",
        ("picture size", "frames/s"),
        &series,
    )?);
    Ok(files)
}
