//! The Room Monitor (seed Section 3.7): a camera watches a room, and
//! video is recorded only while something moves, as a file of clips with
//! a summary.
//!
//! The pipeline is `source ! motion ! filesink`: [`Motion`] passes the
//! moving frames, each tagged with its clip, and [`FileSink`] writes them
//! to one y4m file and counts the clips. [`RoomScene`] is a room to look
//! at: a still room (a gradient wall, furniture, a little sensor noise)
//! that a person crosses for `busy` frames out of every `cycle`.

use std::path::Path;

use aurora_time::Duration;

use super::{FileSink, Module, ModuleError, ModuleId, Motion, Pipeline, DEFAULT_QUEUE};
use crate::frame::{Picture, PictureSize};
use crate::source::{Source, PERIOD_30FPS};

/// Side of the person, in 640×480 pixels.
const PERSON: (usize, usize) = (60, 160);

/// A still room that someone crosses now and then (deterministic; see
/// the [module](self) docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoomScene {
    cycle: u64,
    busy: u64,
    seed: u64,
}

impl RoomScene {
    /// Someone crosses the room during the first `busy` frames of every
    /// `cycle` (`busy` at most `cycle`, `cycle` at least 1).
    pub fn new(cycle: u64, busy: u64, seed: u64) -> RoomScene {
        let cycle = cycle.max(1);
        RoomScene {
            cycle,
            busy: busy.min(cycle),
            seed,
        }
    }

    /// Whether someone is in frame `n`.
    pub fn occupied(&self, n: u64) -> bool {
        n % self.cycle < self.busy
    }

    /// The person's left edge in frame `n`, in 640×480 pixels, if present.
    fn person_x(&self, n: u64) -> Option<usize> {
        let k = n % self.cycle;
        (k < self.busy).then(|| (k * (640 - PERSON.0) as u64 / self.busy.max(1)) as usize)
    }
}

impl Source for RoomScene {
    fn period(&self) -> Duration {
        PERIOD_30FPS
    }

    fn supports(&self, _size: PictureSize) -> bool {
        true
    }

    fn render(&self, frame: u64, pic: &mut Picture) -> bool {
        let s = pic.size().divisor();
        let bpp = pic.format().bytes_per_pixel();
        let person = self.person_x(frame);
        let lb = pic.line_bytes();
        let mut noise = self.seed ^ frame.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for (y, line) in pic.data_mut().chunks_exact_mut(lb).enumerate() {
            let sy = y * s;
            for (x, px) in line.chunks_exact_mut(bpp).enumerate() {
                let sx = x * s;
                // The wall, a table and a cupboard.
                let mut v = 60 + (sy / 8) as i32;
                if (300..340).contains(&sy) && (100..400).contains(&sx) {
                    v = 110;
                }
                if (120..420).contains(&sy) && (480..600).contains(&sx) {
                    v = 150;
                }
                if let Some(px0) = person {
                    if (px0..px0 + PERSON.0).contains(&sx) && (200..200 + PERSON.1).contains(&sy) {
                        v = 220;
                    }
                }
                // Sensor noise of -2..=2 (xorshift).
                noise ^= noise << 13;
                noise ^= noise >> 7;
                noise ^= noise << 17;
                v += (noise % 5) as i32 - 2;
                px[0] = v.clamp(0, 255) as u8;
                if bpp == 2 {
                    px[1] = 128;
                }
            }
        }
        true
    }
}

/// The Room Monitor's defaults: a pixel changed when its luma moves by
/// more than this (above the scene's noise of 2 either way).
pub const DEFAULT_LEVEL: u8 = 24;
/// The Room Monitor's defaults: a frame moving when this many pixels
/// changed (0.1 % of 640×480).
pub const DEFAULT_PIXELS: u64 = 300;

/// What a Room Monitor run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoomSummary {
    /// Frames the monitor looked at.
    pub seen: u64,
    /// Frames recorded (moving, or held after).
    pub recorded: u64,
    /// Clips recorded.
    pub clips: u64,
}

impl core::fmt::Display for RoomSummary {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "room monitor: {} frames seen, {} recorded in {} clips",
            self.seen, self.recorded, self.clips
        )
    }
}

/// A Room Monitor: `source ! motion ! filesink file=out`.
#[derive(Debug)]
pub struct RoomMonitor {
    /// The pipeline (run it with [`Pipeline::run`]).
    pub pipeline: Pipeline,
    motion: ModuleId,
    sink: ModuleId,
}

impl RoomMonitor {
    /// Watches `source`, recording moving frames (a pixel changed by more
    /// than `level`, at least `pixels` of them; `hold` frames more after)
    /// to the y4m file `out`.
    pub fn new(
        source: Box<dyn Module>,
        out: &Path,
        level: u8,
        pixels: u64,
        hold: u32,
    ) -> Result<RoomMonitor, ModuleError> {
        let mut pipeline = Pipeline::new();
        let src = pipeline.chain(
            vec![
                source,
                Box::new(Motion::new(level, pixels, hold)),
                Box::new(FileSink::new(Some(out), 30, None, 1, 0)?),
            ],
            DEFAULT_QUEUE,
        )?;
        Ok(RoomMonitor {
            pipeline,
            motion: src + 1,
            sink: src + 2,
        })
    }

    /// What it did so far.
    pub fn summary(&self) -> RoomSummary {
        summary(&self.pipeline).unwrap_or_default()
    }
}

/// The Room Monitor summary of any pipeline with a `motion` module
/// followed by a `filesink`, if it has them.
pub fn summary(p: &Pipeline) -> Option<RoomSummary> {
    let motion = (0..p.len()).find(|&m| p.kind(m) == Some("motion"))?;
    let sink = (motion..p.len()).find(|&m| p.kind(m) == Some("filesink"))?;
    Some(RoomSummary {
        seen: p.counter(motion, "seen")?,
        recorded: p.counter(sink, "frames")?,
        clips: p.counter(sink, "clips")?,
    })
}

impl RoomMonitor {
    /// The motion module's id in [`RoomMonitor::pipeline`].
    pub fn motion(&self) -> ModuleId {
        self.motion
    }

    /// The file sink's id in [`RoomMonitor::pipeline`].
    pub fn sink(&self) -> ModuleId {
        self.sink
    }
}
