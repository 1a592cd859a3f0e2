//! `aurora video PIPELINE`: runs a VuSystem-style pipeline (syntax in
//! `aurora_video::pipeline::syntax`) on this machine, in real time or in
//! virtual time, and reports what each module did.

use aurora_time::{Duration, Instant};
use aurora_video::pipeline::{room, syntax, Clock, RunEnd, VirtualClock, WallClock};

/// Builds and runs `text` for at most `secs` seconds (until its sources
/// end without), printing the report.
pub fn main(text: &str, secs: Option<f64>, virtual_time: bool) -> Result<(), String> {
    let mut p = syntax::build(text).map_err(|e| e.to_string())?;
    if secs.is_none() {
        // A source without a frame count never ends: without --secs the
        // run (and any file it writes) would not either.
        let elements = syntax::parse(text).map_err(|e| e.to_string())?;
        if let Some(e) = elements.first() {
            if !e.params.iter().any(|(k, _)| k == "frames") {
                return Err(format!(
                    "the pipeline's source `{}` has no frames=N, so it would run for ever: \
                     give frames=N or --secs",
                    e.name
                ));
            }
        }
    }
    let until = secs.map(|s| Instant::ZERO + Duration::from_nanos((s * 1e9) as i64));
    let (mut v, mut w) = (VirtualClock::new(), WallClock::new());
    let clock: &mut dyn Clock = if virtual_time { &mut v } else { &mut w };
    let wall = std::time::Instant::now();
    let end = p.run(clock, until).map_err(|e| e.to_string())?;
    let t = clock.now();
    println!(
        "pipeline {} ({}): {} after {:.3} s of pipeline time ({:.3} s wall)",
        text.split_whitespace().collect::<Vec<_>>().join(" "),
        if virtual_time {
            "virtual time"
        } else {
            "real time"
        },
        match end {
            RunEnd::Finished => "finished",
            RunEnd::TimeUp => "stopped",
        },
        (t - Instant::ZERO).as_secs_f64(),
        wall.elapsed().as_secs_f64()
    );
    print!("{}", p.report());
    if let Some(s) = room::summary(&p) {
        println!("{s}");
    }
    Ok(())
}
