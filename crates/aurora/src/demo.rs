//! `aurora demo`: a desk-area network run in real time, with a live
//! progress line, a report of every PVC, link and switch port, and a plot.

use std::path::Path;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use plotters::prelude::*;

use crate::run;

/// The demo's network (also `examples/demo.toml`).
pub const TOPOLOGY: &str = include_str!("../../../examples/demo.toml");

/// Runs the demo for `secs` seconds and writes its report and plot to `out`.
pub fn main(
    secs: f64,
    out: &Path,
    quiet: bool,
    capture: Option<crate::captures::CaptureArg>,
) -> Result<(), String> {
    std::fs::create_dir_all(out)
        .map_err(|e| format!("cannot create the output folder {}: {e}", out.display()))?;
    let topo = out.join("demo.toml");
    let (text, snapshots) = with_snapshots_in(out)?;
    std::fs::write(&topo, &text).map_err(|e| format!("cannot write {}: {e}", topo.display()))?;
    println!(
        "aurora demo: a desk-area network in real time: two switches joined by an OC-12c trunk,\n\
         a camera, a workstation and a display, video and data flowing both ways, and a Vidboard\n\
         camera watched across the trunk by a pipeline viewer ({secs} s)"
    );
    let d = aurora_time::Duration::from_nanos((secs * 1e9) as i64);
    let pvcs = aurora_topo::compile(TOPOLOGY)
        .map_err(|p| format!("the built-in topology has problems: {p}"))?
        .pvcs;
    let live = Arc::new(Mutex::new(run::Live::default()));
    let handle = {
        let (topo, live) = (topo.clone(), (!quiet).then(|| live.clone()));
        std::thread::spawn(move || {
            let args = run::RunArgs {
                duration: d,
                drain: run::DEMO_DRAIN,
                seed: 1,
                clock: run::Clock::Wall { spin: false },
                workers: 1,
            };
            run::run(&topo, args, capture.as_ref(), None, live, None)
        })
    };
    if !quiet {
        let mut head = format!("{:>6}", "time");
        for p in &pvcs {
            head += &format!(" {:>24}", format!("{} Mb/s", p.name));
        }
        println!("\n{head} {:>16}", "ping RTT");
    }
    let start = std::time::Instant::now();
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    let mut shown = 0.0;
    while !handle.is_finished() {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let t = start.elapsed().as_secs_f64();
        if quiet || t < shown + 1.0 || t > secs {
            continue;
        }
        let Ok(l) = live.lock() else { continue };
        let mut line = format!("{:>4.0} s", t);
        for p in &pvcs {
            let bytes = l.rx_bytes.get(&(p.to.0, p.to_vc)).copied().unwrap_or(0);
            let before = last.insert(p.name.clone(), bytes).unwrap_or(0);
            let mbps = bytes.saturating_sub(before) as f64 * 8.0 / (t - shown) / 1e6;
            line += &format!(" {mbps:>24.1}");
        }
        let rtt = l
            .pings
            .values()
            .flatten()
            .filter_map(|g| g.rtt_mean())
            .map(|m| format!("{:.2} ms mean", m.as_nanos() as f64 / 1e6))
            .next()
            .unwrap_or_else(|| "-".into());
        println!("{line} {rtt:>16}");
        shown = t;
    }
    println!();
    let report = handle
        .join()
        .map_err(|_| "the demo's network stopped unexpectedly".to_string())??;
    print!("{}", run::text(&report));
    let json =
        serde_json::to_string_pretty(&report).map_err(|e| format!("cannot write JSON: {e}"))?;
    let jpath = out.join("report.json");
    std::fs::write(&jpath, json).map_err(|e| format!("cannot write {}: {e}", jpath.display()))?;
    let mut plots = plot(&report, out)?;
    plots.extend(plot_video(&report, out)?);
    println!("\nwrote {}", jpath.display());
    for p in plots {
        println!("wrote {}", p.display());
    }
    let pngs = if snapshots {
        frames_in(out)
    } else {
        Vec::new()
    };
    for p in &pngs {
        println!("wrote {}", p.display());
    }
    let bad: u64 = report.pvcs.iter().map(|p| p.corrupted).sum();
    let lost: u64 = report.pvcs.iter().map(|p| p.lost).sum();
    println!(
        "every PDU was checked byte for byte: {bad} corrupted, {lost} lost (each with its place and reason above), \
         {} unaccounted. Run it in virtual time: aurora run {} --virtual",
        report.unaccounted,
        topo.display()
    );
    if let Some(why) = report.imbalance() {
        return Err(why);
    }
    video_check(&report, snapshots, pngs.len())
}

/// The pipeline's PNG snapshots in the built-in topology, whose prefix
/// the demo points into its output folder.
const SNAPSHOT_PREFIX: &str = "png=demo-frame";

/// The demo's topology with the viewer's snapshots written as
/// `out/frame-NNNNNN.png` (earlier ones removed), and whether it has
/// them: a path with white space or `!` cannot be a pipeline's value, so
/// then the snapshots are left out.
fn with_snapshots_in(out: &Path) -> Result<(String, bool), String> {
    for old in frames_in(out) {
        std::fs::remove_file(&old).map_err(|e| format!("cannot remove {}: {e}", old.display()))?;
    }
    let prefix = out.join("frame").display().to_string();
    if prefix.contains(|c: char| c.is_whitespace() || c == '!' || c == '"' || c == '\\') {
        println!(
            "(no PNG snapshots: the output folder's path {prefix} holds characters a pipeline's \
             file names cannot)"
        );
        let sink = TOPOLOGY
            .find(SNAPSHOT_PREFIX)
            .and_then(|i| TOPOLOGY[..i].rfind('!').map(|j| (j, i)))
            .and_then(|(j, i)| TOPOLOGY[i..].find('"').map(|k| (j, i + k)));
        return Ok(match sink {
            Some((j, k)) => (format!("{}! null{}", &TOPOLOGY[..j], &TOPOLOGY[k..]), false),
            None => (TOPOLOGY.to_string(), false),
        });
    }
    Ok((
        TOPOLOGY.replace(SNAPSHOT_PREFIX, &format!("png={prefix}")),
        TOPOLOGY.contains(SNAPSHOT_PREFIX),
    ))
}

/// The snapshots in `out`, by name.
fn frames_in(out: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("frame-") && n.ends_with(".png"))
        })
        .collect();
    v.sort();
    v
}

/// The demo's video checks, counts only (the machine may be loaded): the
/// viewer got frames, every one whole, equal to the source's and in
/// order, and its pipeline wrote snapshots.
fn video_check(r: &run::Report, snapshots: bool, pngs: usize) -> Result<(), String> {
    let Some(v) = &r.video else {
        return Err("the demo's report has no video part".into());
    };
    for w in &v.viewers {
        let bad = w.frames_incomplete
            + w.frames_differing
            + w.counter_errors
            + w.repeated
            + w.out_of_order;
        if w.frames_complete == 0 || bad > 0 {
            return Err(format!(
                "the demo's viewer {} got {} whole frames and {bad} incomplete, differing, \
                 miscounted, repeated or out of order; this is a fault of the testbed",
                w.name, w.frames_complete
            ));
        }
        println!(
            "video: viewer {} got {} frames whole, every one equal to the camera's, in order",
            w.name, w.frames_complete
        );
    }
    if snapshots && pngs == 0 {
        return Err("the demo's viewer wrote no PNG snapshot".into());
    }
    Ok(())
}

fn draw_video<DB: DrawingBackend>(
    v: &crate::video_report::VideoReport,
    root: DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("cannot draw the plot: {e}");
    root.fill(&WHITE).map_err(err)?;
    let right = v
        .viewers
        .iter()
        .map(|w| w.rate.len() as f64 * w.rate_bin_secs)
        .fold(0.1, f64::max);
    let top = v
        .viewers
        .iter()
        .flat_map(|w| w.rate.iter().copied())
        .fold(1.0, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "aurora demo: the viewer's frame rate (real time)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..right, 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds from the viewer's start")
        .y_desc("whole frames a second")
        .draw()
        .map_err(err)?;
    for (i, w) in v.viewers.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let points = w
            .rate
            .iter()
            .enumerate()
            .map(|(k, &r)| ((k as f64 + 0.5) * w.rate_bin_secs, r));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(err)?
            .label(w.name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// The viewers' frame rate over time, as SVG and PNG.
fn plot_video(r: &run::Report, out: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let Some(v) = &r.video else {
        return Ok(Vec::new());
    };
    if !crate::ttcp::plot::load_font() {
        return Ok(Vec::new());
    }
    let svg = out.join("video-rate.svg");
    draw_video(v, SVGBackend::new(&svg, (900, 500)).into_drawing_area())?;
    let png = out.join("video-rate.png");
    draw_video(v, BitMapBackend::new(&png, (900, 500)).into_drawing_area())?;
    Ok(vec![svg, png])
}

fn draw<DB: DrawingBackend>(
    r: &run::Report,
    root: DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("cannot draw the plot: {e}");
    root.fill(&WHITE).map_err(err)?;
    let n = r.pvcs.len().max(1);
    let top = r.pvcs.iter().map(|p| p.mbps).fold(1.0, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "aurora demo: goodput per PVC (real time)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0..n).into_segmented(), 0.0..top)
        .map_err(err)?;
    let names: Vec<String> = r.pvcs.iter().map(|p| p.name.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("Mb/s of verified user data")
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(err)?;
    chart
        .draw_series(r.pvcs.iter().enumerate().map(|(i, p)| {
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), p.mbps),
                ],
                BLUE.mix(0.6).filled(),
            );
            bar.set_margin(0, 0, 20, 20);
            bar
        }))
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn plot(r: &run::Report, out: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    if !crate::ttcp::plot::load_font() {
        eprintln!("aurora demo: no plot drawn: it needs the DejaVu Sans font (Debian package fonts-dejavu-core)");
        return Ok(Vec::new());
    }
    let svg = out.join("goodput.svg");
    draw(r, SVGBackend::new(&svg, (900, 500)).into_drawing_area())?;
    let png = out.join("goodput.png");
    draw(r, BitMapBackend::new(&png, (900, 500)).into_drawing_area())?;
    Ok(vec![svg, png])
}
