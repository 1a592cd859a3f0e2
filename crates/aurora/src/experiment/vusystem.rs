//! The VuSystem's tables (the seed's Section 4.4), re-measured on this
//! machine with `aurora_video::pipeline`:
//!
//! * Table 9: ms/frame of Exercise, Edge, FileSink, FileSource and the
//!   VidboardSource at 320×240×8, as Mpixels/s and against a memcpy of a
//!   frame measured in the same run. The filters, the sink and the file
//!   source are timed by the scheduler's profiler (wall time inside the
//!   module's callbacks, frames offered as fast as they are taken); the
//!   VidboardSource runs in real time against its camera (30 frames a
//!   second, closed loop), so its ms/frame is its frame interval, with
//!   its CPU time per frame beside.
//! * Table 10: how late `Timeout` callbacks run with one to four
//!   pipelines at once, each on its own thread, in real time: the
//!   cumulative share within the seed's 5, 10, 15 and 20 ms and within
//!   50 µs, 100 µs and 1 ms.

use std::path::Path;

use aurora_time::{Duration, Instant};
use aurora_video::frame::{PictureSize, PixelFormat};
use aurora_video::pipeline::{
    syntax, Lateness, Module, ModuleStats, NullSink, Pipeline, SourceModule, VirtualClock,
    WallClock,
};
use aurora_video::source::Y4mSource;

use super::{say_written, write_csv};

/// The seed's Table 9: module, DEC 3000/400 ms/frame, SPARC 10/512
/// ms/frame (`None`: not measured there).
const SEED_T9: [(&str, Option<f64>, Option<f64>); 5] = [
    ("Exercise", Some(5.0), Some(4.5)),
    ("Edge", Some(18.0), Some(20.0)),
    ("FileSink", None, None),
    ("FileSource", Some(31.0), Some(38.0)),
    ("VidboardSource", Some(33.0), None),
];
/// The seed's Table 10: per number of processes, the share within 5, 10,
/// 15 and 20 ms (percent).
const SEED_T10: [[f64; 4]; 4] = [
    [98.9, 99.9, 99.9, 99.9],
    [89.2, 96.0, 98.8, 99.3],
    [86.4, 91.5, 94.3, 96.7],
    [69.8, 77.6, 82.8, 85.7],
];
/// Pixels in a 320×240 frame.
const PIXELS: f64 = 320.0 * 240.0;
/// The pipeline each Table 10 process runs: live-rate video, edge
/// detection, a meter (the seed's vsdemo showed video with filters).
const T10_PIPELINE: &str = "synthetic size=320x240 fps=30 ! edge ! exercise ! ratemeter ! null";

/// A frame of 320×240×8 copied `n` times: seconds per copy.
fn memcpy_frame(n: usize) -> f64 {
    let src: Vec<u8> = (0..PIXELS as usize).map(|i| i as u8).collect();
    let mut dst = vec![0u8; src.len()];
    let t = std::time::Instant::now();
    for k in 0..n {
        dst.copy_from_slice(&src);
        dst[k % src.len()] ^= 1;
        std::hint::black_box(&mut dst);
    }
    t.elapsed().as_secs_f64() / n as f64
}

/// Runs `source ! module ! null` with the profiler on, frames offered as
/// fast as taken; the module's stats.
fn profile(
    source: Box<dyn Module>,
    module: Option<Box<dyn Module>>,
) -> Result<ModuleStats, String> {
    let mut p = Pipeline::new();
    let mut chain = vec![source];
    let timed = if let Some(m) = module {
        chain.push(m);
        1
    } else {
        0
    };
    chain.push(Box::new(NullSink::new()));
    p.chain(chain, 2).map_err(|e| e.to_string())?;
    p.set_profiling(true);
    p.run(&mut VirtualClock::new(), None)
        .map_err(|e| e.to_string())?;
    p.stats(timed).ok_or_else(|| "no module".to_owned())
}

fn synthetic(frames: u64) -> Box<dyn Module> {
    Box::new(SourceModule::synthetic(
        1,
        PictureSize::Half,
        PixelFormat::Mono8,
        None,
        Some(frames),
    ))
}

/// ms per frame from a module's busy time over `frames`.
fn ms_per(st: &ModuleStats, frames: u64) -> f64 {
    st.busy.as_secs_f64() * 1e3 / frames.max(1) as f64
}

/// One row of Table 9: module, ms/frame, and a note.
struct Row {
    module: &'static str,
    ms: f64,
    note: String,
}

fn table9(out: &Path, secs: f64) -> Result<(Vec<Row>, f64), String> {
    let frames = (300.0 * secs).round().max(30.0) as u64;
    let copy_ms = memcpy_frame(20_000) * 1e3;
    let mut rows = Vec::new();
    let st = profile(
        synthetic(frames),
        Some(Box::new(aurora_video::pipeline::Exercise::new())),
    )?;
    rows.push(Row {
        module: "Exercise",
        ms: ms_per(&st, st.received),
        note: format!("{} frames", st.received),
    });
    let st = profile(
        synthetic(frames),
        Some(Box::new(aurora_video::pipeline::Edge::new(128))),
    )?;
    rows.push(Row {
        module: "Edge",
        ms: ms_per(&st, st.received),
        note: format!("{} frames, Sobel |gx|+|gy| >= 128", st.received),
    });
    let file = out.join("vusystem-t9.y4m");
    let sink = aurora_video::pipeline::FileSink::new(Some(&file), 30, None, 1, 0)
        .map_err(|e| e.to_string())?;
    let mut p = Pipeline::new();
    p.chain(vec![synthetic(frames), Box::new(sink)], 2)
        .map_err(|e| e.to_string())?;
    p.set_profiling(true);
    p.run(&mut VirtualClock::new(), None)
        .map_err(|e| e.to_string())?;
    let st = p.stats(1).ok_or("no sink")?;
    rows.push(Row {
        module: "FileSink",
        ms: ms_per(&st, st.received),
        note: format!("{} frames to a y4m file (page cache)", st.received),
    });
    let t = std::time::Instant::now();
    let src = Y4mSource::open(&file).map_err(|e| e.to_string())?;
    let load = t.elapsed().as_secs_f64();
    let fs = SourceModule::file(src, PictureSize::Half, PixelFormat::Mono8, false, None)
        .map_err(|e| e.to_string())?;
    let st = profile(Box::new(fs), None)?;
    let n = st.sent;
    rows.push(Row {
        module: "FileSource",
        ms: (st.busy.as_secs_f64() + load) * 1e3 / n.max(1) as f64,
        note: format!(
            "{n} frames; the file's load ({:.3} ms/frame, from the page cache) and each frame's copy out ({:.3} ms/frame)",
            load * 1e3 / n.max(1) as f64,
            ms_per(&st, n)
        ),
    });
    // The camera, in real time, for at least 2 s.
    let run_secs = (2.0 * secs).max(2.0);
    let mut p = syntax::build("vidboard size=320x240 format=mono8 lt=16 cb=56 ! null")
        .map_err(|e| e.to_string())?;
    p.set_profiling(true);
    p.run(
        &mut WallClock::new(),
        Some(Instant::ZERO + Duration::from_nanos((run_secs * 1e9) as i64)),
    )
    .map_err(|e| e.to_string())?;
    let st = p.stats(0).ok_or("no source")?;
    let taken = st.sent.max(1);
    rows.push(Row {
        module: "VidboardSource",
        ms: run_secs * 1e3 / taken as f64,
        note: format!(
            "{taken} frames in {run_secs:.1} s real time from a camera at 30 frames/s (closed loop); CPU {:.3} ms/frame (camera and client included), {} t-frames lost",
            ms_per(&st, taken),
            p.counter(0, "tframes_lost").unwrap_or(0)
        ),
    });
    Ok((rows, copy_ms))
}

/// Runs `n` pipelines at once, each on its own thread, for `secs`; the
/// merged lateness and the frames each metered.
fn table10_run(n: usize, secs: f64) -> Result<(Lateness, Vec<u64>), String> {
    let until = Instant::ZERO + Duration::from_nanos((secs * 1e9) as i64);
    let handles: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || -> Result<(Lateness, u64), String> {
                let mut p = syntax::build(T10_PIPELINE).map_err(|e| e.to_string())?;
                p.run(&mut WallClock::new(), Some(until))
                    .map_err(|e| e.to_string())?;
                Ok((p.lateness(), p.counter(3, "frames").unwrap_or(0)))
            })
        })
        .collect();
    let mut all = Lateness::default();
    let mut frames = Vec::new();
    for h in handles {
        let (l, f) = h.join().map_err(|_| "a pipeline thread panicked")??;
        all.merge(&l);
        frames.push(f);
    }
    Ok((all, frames))
}

/// `aurora experiment vusystem`.
pub fn main(out: &Path, secs: f64) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "VuSystem pipelines on {cpu}, {cores} cores (timings from a machine that may be shared)"
    );
    println!();
    println!("Table 9: 320x240x8 frames");
    let (rows, copy_ms) = table9(out, secs)?;
    println!(
        "{:<15} {:>9} {:>9} {:>10} {:>9} {:>10} {:>10}",
        "module", "ms/frame", "frames/s", "Mpixels/s", "x memcpy", "DEC 3000", "SPARC 10"
    );
    let seed = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
    let mut csv = vec![vec![
        "module".to_owned(),
        "ms_per_frame".into(),
        "frames_per_s".into(),
        "mpixels_per_s".into(),
        "times_memcpy".into(),
        "seed_dec3000_ms".into(),
        "seed_sparc10_ms".into(),
        "note".into(),
    ]];
    println!(
        "{:<15} {:>9.4} {:>9.0} {:>10.0} {:>9.1} {:>10} {:>10}",
        "memcpy",
        copy_ms,
        1e3 / copy_ms,
        PIXELS / copy_ms / 1e3,
        1.0,
        "-",
        "-"
    );
    for r in &rows {
        let (_, dec, sparc) = SEED_T9
            .iter()
            .find(|s| s.0 == r.module)
            .copied()
            .unwrap_or((r.module, None, None));
        println!(
            "{:<15} {:>9.4} {:>9.0} {:>10.1} {:>9.1} {:>10} {:>10}",
            r.module,
            r.ms,
            1e3 / r.ms,
            PIXELS / r.ms / 1e3,
            r.ms / copy_ms,
            seed(dec),
            seed(sparc)
        );
        csv.push(vec![
            r.module.to_owned(),
            format!("{:.5}", r.ms),
            format!("{:.1}", 1e3 / r.ms),
            format!("{:.2}", PIXELS / r.ms / 1e3),
            format!("{:.2}", r.ms / copy_ms),
            seed(dec),
            seed(sparc),
            r.note.clone(),
        ]);
    }
    for r in &rows {
        println!("  {}: {}", r.module, r.note);
    }
    let mut files = vec![write_csv(out, "vusystem-table9", &csv)?];
    let _ = std::fs::remove_file(out.join("vusystem-t9.y4m"));

    let run = 4.0 * secs;
    println!();
    println!(
        "Table 10: Timeout precision, 1 to 4 pipelines at once for {run:.0} s each ({T10_PIPELINE}); seed's in brackets"
    );
    let labels = Lateness::LABELS;
    println!(
        "{:<10} {:>8} {}  {:>9} {:>9}",
        "pipelines",
        "timeouts",
        labels
            .iter()
            .map(|l| format!("{l:>15}"))
            .collect::<String>(),
        "mean",
        "latest"
    );
    let mut csv = vec![{
        let mut h = vec!["pipelines".to_owned(), "timeouts".into()];
        h.extend(labels.iter().map(|l| format!("within_{l}")));
        h.extend(["mean_us".into(), "max_us".into(), "frames_each".into()]);
        h
    }];
    for n in 1..=4 {
        let (l, frames) = table10_run(n, run)?;
        let mut line = format!("{n:<10} {:>8} ", l.total());
        let mut row = vec![n.to_string(), l.total().to_string()];
        for i in 0..labels.len() {
            let pct = 100.0 * l.within(i);
            let s = if i >= 3 {
                format!("{pct:.1} ({:.1})", SEED_T10[n - 1][i - 3])
            } else {
                format!("{pct:.1}")
            };
            line.push_str(&format!("{s:>15}"));
            row.push(format!("{pct:.2}"));
        }
        let mean = l.sum.as_nanos() as f64 / l.total().max(1) as f64 / 1e3;
        let max = l.max.as_nanos() as f64 / 1e3;
        println!("{line}  {mean:>7.0}us {max:>7.0}us");
        row.extend([
            format!("{mean:.1}"),
            format!("{max:.1}"),
            frames
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        ]);
        csv.push(row);
    }
    files.push(write_csv(out, "vusystem-table10", &csv)?);
    say_written(&files);
    Ok(())
}
