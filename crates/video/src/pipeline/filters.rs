//! Filters: one input, one output, work on the luma of each frame.
//!
//! * [`Exercise`]: walks over every byte of every frame, as the seed's
//!   baseline module did, folding it into a Fletcher-style checksum (each
//!   step depends on the one before, so the walk cannot be skipped); the
//!   frame passes unchanged.
//! * [`Edge`]: Sobel gradient magnitude (|gx| + |gy|) of the luma,
//!   thresholded: edge pixels 255, the rest (and the one-pixel border) 0,
//!   out as an 8-bit mono frame of the same size.
//! * [`Motion`]: the luma difference against the frame before; a frame in
//!   which at least `pixels` pixels changed by more than `level` is
//!   moving. Moving frames (and `hold` frames after) go out, tagged with
//!   their clip; still ones are counted and dropped. Holds one picture
//!   (the previous frame's).

use super::{Ctx, Frame, Meta, Module, ModuleError};
use crate::frame::{Picture, PixelFormat};

/// The luma of row `y` of `pic`, with the stride of its format: every
/// byte in mono, every other byte in YUYV.
fn luma_row(pic: &Picture, y: usize) -> impl Iterator<Item = u8> + '_ {
    let step = pic.format().bytes_per_pixel();
    pic.line(y)
        .unwrap_or_default()
        .iter()
        .step_by(step)
        .copied()
}

/// Walks every byte of each frame (see the [module](self) docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Exercise {
    frames: u64,
    checksum: u32,
}

impl Exercise {
    /// A new Exercise module.
    pub fn new() -> Exercise {
        Exercise::default()
    }

    /// The Fletcher-style checksum of `bytes` (two 16-bit sums, mod
    /// 65535, each byte folded in turn): what Exercise computes a frame.
    pub fn checksum(bytes: &[u8]) -> u32 {
        let (mut a, mut b) = (0u32, 0u32);
        // 5,000 bytes keep both sums below 2^32 before reducing.
        for chunk in bytes.chunks(5000) {
            for &x in chunk {
                a += u32::from(x);
                b += a;
            }
            a %= 65535;
            b %= 65535;
        }
        (b << 16) | a
    }

    /// The last frame's checksum.
    pub fn last_checksum(&self) -> u32 {
        self.checksum
    }
}

impl Module for Exercise {
    fn kind(&self) -> &'static str {
        "exercise"
    }

    fn receive(&mut self, ctx: &mut Ctx, _port: usize, frame: Frame) -> Result<(), ModuleError> {
        self.checksum = Exercise::checksum(frame.picture.data());
        self.frames += 1;
        ctx.send(0, frame);
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("frames", self.frames),
            ("checksum", u64::from(self.checksum)),
        ]
    }
}

/// Sobel edge detection, thresholded (see the [module](self) docs).
#[derive(Clone, Copy, Debug)]
pub struct Edge {
    threshold: u16,
    frames: u64,
    edge_pixels: u64,
}

impl Edge {
    /// Edges where |gx| + |gy| is at least `threshold` (1 to 2040).
    pub fn new(threshold: u16) -> Edge {
        Edge {
            threshold: threshold.clamp(1, 2040),
            frames: 0,
            edge_pixels: 0,
        }
    }

    /// The edge picture of `pic`, into `out` (made 8-bit mono of the same
    /// size); the number of edge pixels.
    pub fn detect(&self, pic: &Picture, out: &mut Picture) -> u64 {
        out.reshape(pic.size(), PixelFormat::Mono8);
        let (w, h) = (pic.width(), pic.height());
        // Three rows of luma at a time (bounded: three lines).
        let mut rows: [Vec<i16>; 3] = [vec![0; w], vec![0; w], vec![0; w]];
        let load = |y: usize, r: &mut Vec<i16>| {
            for (d, s) in r.iter_mut().zip(luma_row(pic, y)) {
                *d = i16::from(s);
            }
        };
        if h < 3 || w < 3 {
            return 0;
        }
        load(0, &mut rows[0]);
        load(1, &mut rows[1]);
        let t = self.threshold as i16;
        let mut n = 0;
        for y in 1..h - 1 {
            load(y + 1, &mut rows[(y + 1) % 3]);
            let (a, b, c) = (&rows[(y - 1) % 3], &rows[y % 3], &rows[(y + 1) % 3]);
            let line = out.lines_mut(y, 1).expect("the line is in the picture");
            for x in 1..w - 1 {
                let gx =
                    (a[x + 1] + 2 * b[x + 1] + c[x + 1]) - (a[x - 1] + 2 * b[x - 1] + c[x - 1]);
                let gy = (c[x - 1] + 2 * c[x] + c[x + 1]) - (a[x - 1] + 2 * a[x] + a[x + 1]);
                let edge = gx.abs() + gy.abs() >= t;
                line[x] = if edge { 255 } else { 0 };
                n += u64::from(edge);
            }
        }
        n
    }
}

impl Module for Edge {
    fn kind(&self) -> &'static str {
        "edge"
    }

    fn receive(&mut self, ctx: &mut Ctx, _port: usize, frame: Frame) -> Result<(), ModuleError> {
        let mut out = Picture::new(frame.picture.size(), PixelFormat::Mono8);
        self.edge_pixels += self.detect(&frame.picture, &mut out);
        self.frames += 1;
        ctx.send(
            0,
            Frame {
                meta: frame.meta,
                picture: out,
            },
        );
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("frames", self.frames), ("edge_pixels", self.edge_pixels)]
    }
}

/// Frame differencing; passes moving frames only (see the [module](self)
/// docs).
#[derive(Clone, Debug)]
pub struct Motion {
    level: u8,
    pixels: u64,
    hold: u32,
    previous: Option<Picture>,
    /// Frames still to pass after motion stopped.
    holding: u32,
    in_clip: bool,
    seen: u64,
    moving: u64,
    passed: u64,
    clips: u32,
    last_changed: u64,
}

impl Motion {
    /// Moving when at least `pixels` pixels' luma changed by more than
    /// `level`; `hold` still frames pass after motion stops.
    pub fn new(level: u8, pixels: u64, hold: u32) -> Motion {
        Motion {
            level,
            pixels: pixels.max(1),
            hold,
            previous: None,
            holding: 0,
            in_clip: false,
            seen: 0,
            moving: 0,
            passed: 0,
            clips: 0,
            last_changed: 0,
        }
    }

    /// Pixels whose luma differs by more than `level` between `a` and `b`
    /// (every pixel when their sizes differ).
    pub fn changed(a: &Picture, b: &Picture, level: u8) -> u64 {
        if a.size() != b.size() {
            return (b.width() * b.height()) as u64;
        }
        (0..a.height())
            .map(|y| {
                luma_row(a, y)
                    .zip(luma_row(b, y))
                    .filter(|(p, q)| p.abs_diff(*q) > level)
                    .count() as u64
            })
            .sum()
    }

    /// Pixels changed in the last frame.
    pub fn last_changed(&self) -> u64 {
        self.last_changed
    }
}

impl Module for Motion {
    fn kind(&self) -> &'static str {
        "motion"
    }

    fn receive(&mut self, ctx: &mut Ctx, _port: usize, frame: Frame) -> Result<(), ModuleError> {
        self.seen += 1;
        self.last_changed = match &self.previous {
            Some(p) => Motion::changed(p, &frame.picture, self.level),
            None => 0,
        };
        let moving = self.last_changed >= self.pixels;
        match &mut self.previous {
            Some(p) if p.size() == frame.picture.size() && p.format() == frame.picture.format() => {
                p.data_mut().copy_from_slice(frame.picture.data())
            }
            prev => *prev = Some(frame.picture.clone()),
        }
        if moving {
            self.moving += 1;
            self.holding = self.hold;
            if !self.in_clip {
                self.in_clip = true;
                self.clips += 1;
            }
        } else if self.in_clip && self.holding > 0 {
            self.holding -= 1;
        } else {
            self.in_clip = false;
            return Ok(());
        }
        self.passed += 1;
        ctx.send(
            0,
            Frame {
                meta: Meta {
                    clip: Some(self.clips),
                    ..frame.meta
                },
                picture: frame.picture,
            },
        );
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("seen", self.seen),
            ("moving", self.moving),
            ("passed", self.passed),
            ("clips", u64::from(self.clips)),
        ]
    }
}

/// A workstation's processor shared by the pipelines running on it: a
/// timeline of work booked first come, first served. A [`Busy`] module
/// given one books its work here, so two pipelines on one host take
/// turns and each gets half the processor. Clones share the timeline.
#[derive(Clone, Debug, Default)]
pub struct Processor {
    free_at: std::sync::Arc<std::sync::Mutex<Option<aurora_time::Instant>>>,
}

impl Processor {
    /// An idle processor.
    pub fn new() -> Processor {
        Processor::default()
    }

    /// Books `work` starting when both `now` has come and the work booked
    /// before has ended; returns when it ends.
    pub fn book(
        &self,
        now: aurora_time::Instant,
        work: aurora_time::Duration,
    ) -> aurora_time::Instant {
        match self.free_at.lock() {
            Ok(mut free) => {
                let start = free.map_or(now, |f| f.max(now));
                let end = start + work;
                *free = Some(end);
                end
            }
            // A pipeline that panicked holding the lock: work as if alone.
            Err(_) => now + work,
        }
    }
}

/// A stand-in for work that takes time: holds each frame for `work`
/// (not ready for another meanwhile), then passes it on. Alone it uses no
/// processor; [`Busy::on`] a shared [`Processor`] its work waits for the
/// processor's earlier work, as a host's pipelines share its time. Shows
/// the closed loop: `vidboard ! busy ms=100 ! null` gets a frame every
/// 100 ms from a camera that could send 30 a second. Holds one frame.
#[derive(Clone, Debug)]
pub struct Busy {
    work: aurora_time::Duration,
    held: Option<Frame>,
    frames: u64,
    cpu: Option<Processor>,
}

impl Busy {
    /// Each frame takes `work`.
    pub fn new(work: aurora_time::Duration) -> Busy {
        Busy {
            work,
            held: None,
            frames: 0,
            cpu: None,
        }
    }

    /// Each frame takes `work` of the shared processor `cpu`.
    pub fn on(work: aurora_time::Duration, cpu: Processor) -> Busy {
        Busy {
            cpu: Some(cpu),
            ..Busy::new(work)
        }
    }
}

impl Module for Busy {
    fn kind(&self) -> &'static str {
        "busy"
    }

    fn ready(&self, _now: aurora_time::Instant) -> bool {
        self.held.is_none()
    }

    fn receive(&mut self, ctx: &mut Ctx, _port: usize, frame: Frame) -> Result<(), ModuleError> {
        self.held = Some(frame);
        let done = match &self.cpu {
            Some(cpu) => cpu.book(ctx.now(), self.work),
            None => ctx.now() + self.work,
        };
        ctx.schedule(done);
        Ok(())
    }

    fn timeout(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        if let Some(f) = self.held.take() {
            self.frames += 1;
            ctx.send(0, f);
        }
        Ok(())
    }

    fn finish(&mut self, _ctx: &mut Ctx) -> Result<(), ModuleError> {
        // The run ended during the work: the frame held is dropped.
        self.held = None;
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("frames", self.frames)]
    }
}

#[cfg(test)]
mod tests {
    use super::Processor;
    use aurora_time::{Duration, Instant};

    #[test]
    fn a_shared_processor_serves_work_in_turn() {
        let ms = |n| Instant::ZERO + Duration::from_millis(n);
        let cpu = Processor::new();
        let other = cpu.clone();
        // Idle: work starts at once.
        assert_eq!(cpu.book(ms(0), Duration::from_millis(100)), ms(100));
        // Work asked for meanwhile, from the other pipeline, waits its turn.
        assert_eq!(other.book(ms(10), Duration::from_millis(100)), ms(200));
        assert_eq!(cpu.book(ms(150), Duration::from_millis(100)), ms(300));
        // Idle again: no waiting.
        assert_eq!(other.book(ms(500), Duration::from_millis(5)), ms(505));
    }
}
