//! The Room Monitor (the seed's Section 3.7): a camera on a still room
//! that someone crosses now and then; video is recorded only while
//! something moves, as clips in one y4m file, with a summary.
//!
//! ```text
//! cargo run --release -p aurora-video --example room_monitor -- [OUT.y4m] [--real]
//! ```
//!
//! 30 s of a 320×240 room at 30 frames a second, someone crossing in 1.5
//! s of every 5 s; in virtual time unless `--real` (then it takes 30 s).
//! The same pipeline from the command line:
//! `aurora video 'room frames=900 ! motion ! filesink file=clips.y4m'`.

use std::path::PathBuf;

use aurora_video::frame::{PictureSize, PixelFormat};
use aurora_video::pipeline::room::{RoomMonitor, RoomScene, DEFAULT_LEVEL, DEFAULT_PIXELS};
use aurora_video::pipeline::{Clock, SourceModule, VirtualClock, WallClock};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let real = args.iter().any(|a| a == "--real");
    let out = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or_else(|| PathBuf::from("room-monitor.y4m"), PathBuf::from);
    let scene = RoomScene::new(150, 45, 1);
    let source = SourceModule::new(
        "room",
        Box::new(scene),
        PictureSize::Half,
        PixelFormat::Mono8,
        true,
        Some(900),
    )
    .expect("the room renders every size");
    let mut rm = match RoomMonitor::new(Box::new(source), &out, DEFAULT_LEVEL, DEFAULT_PIXELS, 0) {
        Ok(rm) => rm,
        Err(e) => {
            eprintln!("room_monitor: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let (mut v, mut w) = (VirtualClock::new(), WallClock::new());
    let clock: &mut dyn Clock = if real { &mut w } else { &mut v };
    if let Err(e) = rm.pipeline.run(clock, None) {
        eprintln!("room_monitor: {e}");
        return std::process::ExitCode::FAILURE;
    }
    println!("{}; clips in {}", rm.summary(), out.display());
    std::process::ExitCode::SUCCESS
}
