//! Sinks and meters.
//!
//! * [`FileSink`]: frames to a YUV4MPEG2 file (8-bit mono as `Cmono`,
//!   YUYV as planar `C422`, so a [`Y4mSource`](crate::source::Y4mSource)
//!   reads back the same bytes), written as they come (no frame held),
//!   and PNG snapshots of every `every`-th frame (mono as 8-bit grey,
//!   YUYV as 8-bit RGB, BT.601), at most `max_png` of them.
//! * [`RateMeter`]: counts frames and their rate between the first and
//!   the last; passes them on.
//! * [`NullSink`]: takes frames and drops them (counted).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use aurora_time::Instant;

use super::{Ctx, Frame, Module, ModuleError};
use crate::frame::{Picture, PictureSize, PixelFormat};

/// Writes frames to a y4m file and PNG snapshots (see the
/// [module](self) docs).
pub struct FileSink {
    path: Option<PathBuf>,
    file: Option<File>,
    fps: u32,
    encoder: Option<(y4m::Encoder<File>, PictureSize, PixelFormat)>,
    png: Option<PathBuf>,
    every: u64,
    max_png: u64,
    /// Planar copies of a YUYV frame (reused).
    planes: [Vec<u8>; 3],
    frames: u64,
    bytes: u64,
    pngs: u64,
    clips: u64,
    last_clip: Option<u32>,
    /// Frames not written because the file reached [`MAX_Y4M_BYTES`].
    not_written: u64,
}

impl core::fmt::Debug for FileSink {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "FileSink({:?}, png {:?})", self.path, self.png)
    }
}

/// The most bytes a sink writes to one y4m file; frames past it are
/// counted, not written.
pub const MAX_Y4M_BYTES: u64 = 1 << 33;

/// The most PNG snapshots a sink writes unless told otherwise.
pub const DEFAULT_MAX_PNG: u64 = 100;

impl FileSink {
    /// A sink writing y4m to `path` (created now, so a path that cannot
    /// be written is refused before the run) at `fps` frames a second in
    /// its header, and/or PNG snapshots named `<png>-<number>.png` of
    /// every `every`-th frame (1 or more), at most `max_png`.
    pub fn new(
        path: Option<&Path>,
        fps: u32,
        png: Option<&Path>,
        every: u64,
        max_png: u64,
    ) -> Result<FileSink, ModuleError> {
        let file = match path {
            Some(p) => Some(
                File::create(p)
                    .map_err(|e| ModuleError(format!("{} cannot be created: {e}", p.display())))?,
            ),
            None => None,
        };
        Ok(FileSink {
            path: path.map(Path::to_path_buf),
            file,
            fps: fps.max(1),
            encoder: None,
            png: png.map(Path::to_path_buf),
            every: every.max(1),
            max_png,
            planes: [Vec::new(), Vec::new(), Vec::new()],
            frames: 0,
            bytes: 0,
            pngs: 0,
            clips: 0,
            last_clip: None,
            not_written: 0,
        })
    }

    /// The y4m file's name, for errors.
    fn name(&self) -> String {
        self.path
            .as_deref()
            .map_or_else(String::new, |p| p.display().to_string())
    }

    fn write_y4m(&mut self, pic: &Picture) -> Result<(), ModuleError> {
        let name = self.name();
        if self.encoder.is_none() {
            let Some(file) = self.file.take() else {
                return Ok(());
            };
            let cs = match pic.format() {
                PixelFormat::Mono8 => y4m::Colorspace::Cmono,
                PixelFormat::Yuyv => y4m::Colorspace::C422,
            };
            let enc = y4m::encode(
                pic.width(),
                pic.height(),
                y4m::Ratio::new(self.fps as usize, 1),
            )
            .with_colorspace(cs)
            .write_header(file)
            .map_err(|e| ModuleError(format!("{name} cannot be written: {e}")))?;
            self.encoder = Some((enc, pic.size(), pic.format()));
        }
        let Some((enc, size, format)) = self.encoder.as_mut() else {
            return Ok(());
        };
        if (*size, *format) != (pic.size(), pic.format()) {
            return Err(ModuleError(format!(
                "{name} holds {size} {format} frames and was sent a {} {} frame",
                pic.size(),
                pic.format()
            )));
        }
        let r = match pic.format() {
            PixelFormat::Mono8 => enc.write_frame(&y4m::Frame::new([pic.data(), &[], &[]], None)),
            PixelFormat::Yuyv => {
                let [y, u, v] = &mut self.planes;
                split_yuyv(pic.data(), y, u, v);
                enc.write_frame(&y4m::Frame::new([y, u, v], None))
            }
        };
        r.map_err(|e| ModuleError(format!("{name} cannot be written: {e}")))?;
        self.bytes += pic.data().len() as u64;
        Ok(())
    }

    fn write_png(&mut self, number: u64, pic: &Picture) -> Result<(), ModuleError> {
        let Some(prefix) = &self.png else {
            return Ok(());
        };
        let path = PathBuf::from(format!("{}-{number:06}.png", prefix.display()));
        let fail = |e: &dyn std::fmt::Display| {
            ModuleError(format!("{} cannot be written: {e}", path.display()))
        };
        let f = File::create(&path).map_err(|e| fail(&e))?;
        write_png(BufWriter::new(f), pic).map_err(|e| fail(&e))?;
        self.pngs += 1;
        Ok(())
    }
}

/// Splits packed YUYV into Y, U and V planes (4:2:2).
fn split_yuyv(data: &[u8], y: &mut Vec<u8>, u: &mut Vec<u8>, v: &mut Vec<u8>) {
    y.clear();
    u.clear();
    v.clear();
    for q in data.chunks_exact(4) {
        y.extend_from_slice(&[q[0], q[2]]);
        u.push(q[1]);
        v.push(q[3]);
    }
}

/// Clamps a colour computation to a byte.
fn byte(x: i32) -> u8 {
    x.clamp(0, 255) as u8
}

/// Writes `pic` as a PNG: mono as 8-bit grey, YUYV as 8-bit RGB.
pub fn write_png<W: Write>(w: W, pic: &Picture) -> Result<(), png::EncodingError> {
    let mut enc = png::Encoder::new(w, pic.width() as u32, pic.height() as u32);
    enc.set_depth(png::BitDepth::Eight);
    match pic.format() {
        PixelFormat::Mono8 => {
            enc.set_color(png::ColorType::Grayscale);
            let mut wr = enc.write_header()?;
            wr.write_image_data(pic.data())?;
            wr.finish()
        }
        PixelFormat::Yuyv => {
            enc.set_color(png::ColorType::Rgb);
            let mut rgb = Vec::with_capacity(pic.width() * pic.height() * 3);
            for q in pic.data().chunks_exact(4) {
                let (u, v) = (i32::from(q[1]) - 128, i32::from(q[3]) - 128);
                for y in [q[0], q[2]] {
                    let c = 298 * (i32::from(y) - 16);
                    rgb.push(byte((c + 409 * v + 128) >> 8));
                    rgb.push(byte((c - 100 * u - 208 * v + 128) >> 8));
                    rgb.push(byte((c + 516 * u + 128) >> 8));
                }
            }
            let mut wr = enc.write_header()?;
            wr.write_image_data(&rgb)?;
            wr.finish()
        }
    }
}

impl Module for FileSink {
    fn kind(&self) -> &'static str {
        "filesink"
    }

    fn outputs(&self) -> usize {
        0
    }

    fn receive(&mut self, _ctx: &mut Ctx, _port: usize, frame: Frame) -> Result<(), ModuleError> {
        if frame.meta.clip.is_some() && frame.meta.clip != self.last_clip {
            self.clips += 1;
            self.last_clip = frame.meta.clip;
        }
        if self.bytes + frame.picture.data().len() as u64 > MAX_Y4M_BYTES {
            self.not_written += 1;
        } else {
            self.write_y4m(&frame.picture)?;
        }
        if self.frames.is_multiple_of(self.every) && self.pngs < self.max_png {
            self.write_png(frame.meta.number, &frame.picture)?;
        }
        self.frames += 1;
        Ok(())
    }

    fn finish(&mut self, _ctx: &mut Ctx) -> Result<(), ModuleError> {
        // A file that got no frame is left empty (no header: the size was
        // never known).
        self.file = None;
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("frames", self.frames),
            ("bytes", self.bytes),
            ("clips", self.clips),
            ("pngs", self.pngs),
            ("not_written", self.not_written),
        ]
    }
}

/// Counts frames and their rate; passes them on.
#[derive(Clone, Copy, Debug, Default)]
pub struct RateMeter {
    frames: u64,
    first: Option<Instant>,
    last: Instant,
}

impl RateMeter {
    /// A new meter.
    pub fn new() -> RateMeter {
        RateMeter::default()
    }

    /// Frames a second between the first frame and the last (0 with fewer
    /// than two).
    pub fn rate(&self) -> f64 {
        match self.first {
            Some(f) if self.last > f && self.frames > 1 => {
                (self.frames - 1) as f64 / (self.last - f).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

impl Module for RateMeter {
    fn kind(&self) -> &'static str {
        "ratemeter"
    }

    fn receive(&mut self, ctx: &mut Ctx, _port: usize, frame: Frame) -> Result<(), ModuleError> {
        self.frames += 1;
        self.first.get_or_insert(ctx.now());
        self.last = ctx.now();
        ctx.send(0, frame);
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("frames", self.frames),
            ("millifps", (self.rate() * 1000.0).round() as u64),
        ]
    }
}

/// Takes frames and drops them.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink {
    frames: u64,
}

impl NullSink {
    /// A new sink.
    pub fn new() -> NullSink {
        NullSink::default()
    }
}

impl Module for NullSink {
    fn kind(&self) -> &'static str {
        "null"
    }

    fn outputs(&self) -> usize {
        0
    }

    fn receive(&mut self, _ctx: &mut Ctx, _port: usize, _frame: Frame) -> Result<(), ModuleError> {
        self.frames += 1;
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("frames", self.frames)]
    }
}
