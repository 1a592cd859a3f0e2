//! Sources paced by timeouts: the synthetic source, the `FileSource` and
//! the room scene, all one module over a [`Source`].
//!
//! A [`SourceModule`] renders frame `k` of its source and sends it at
//! `start + k × period` (its timeout), or, unpaced, as fast as the
//! pipeline drains. It holds no picture between callbacks (each frame is
//! rendered into a new one, which travels downstream).

use aurora_time::{Duration, Instant};

use super::{Ctx, Frame, Meta, Module, ModuleError};
use crate::frame::{Picture, PictureSize, PixelFormat};
use crate::source::{Source, SyntheticSource, Y4mSource};

/// A source of frames as a pipeline module (no inputs, one output).
///
/// `FileSource` is [`SourceModule::file`]: a YUV4MPEG2 file read by
/// [`Y4mSource`] (the camera's own file source, so the same conversions
/// and limits), played once or looped.
#[derive(Debug)]
pub struct SourceModule {
    kind: &'static str,
    source: Box<dyn Source>,
    size: PictureSize,
    format: PixelFormat,
    /// Time between frames; `None` sends as fast as the pipeline drains.
    period: Option<Duration>,
    /// Frames to send; `None` for ever.
    frames: Option<u64>,
    next: u64,
    start: Instant,
}

impl SourceModule {
    /// Frames of `source` at `size` in `format`, paced by the source's own
    /// frame time when `paced`, `frames` of them (or for ever). Refused if
    /// the source cannot render `size`.
    pub fn new(
        kind: &'static str,
        source: Box<dyn Source>,
        size: PictureSize,
        format: PixelFormat,
        paced: bool,
        frames: Option<u64>,
    ) -> Result<SourceModule, ModuleError> {
        if !source.supports(size) {
            return Err(ModuleError(format!("{kind} cannot render {size} pictures")));
        }
        let period = paced.then(|| source.period());
        Ok(SourceModule {
            kind,
            source,
            size,
            format,
            period,
            frames,
            next: 0,
            start: Instant::ZERO,
        })
    }

    /// The synthetic source of [`crate::source`] (moving bands, a
    /// bouncing square, the frame counter) from `seed`.
    pub fn synthetic(
        seed: u64,
        size: PictureSize,
        format: PixelFormat,
        period: Option<Duration>,
        frames: Option<u64>,
    ) -> SourceModule {
        let src = SyntheticSource::new(seed).with_period(period.unwrap_or(Duration::from_nanos(1)));
        SourceModule::new(
            "synthetic",
            Box::new(src),
            size,
            format,
            period.is_some(),
            frames,
        )
        .expect("the synthetic source renders every size")
    }

    /// The `FileSource`: `src` (a loaded y4m file) at `size` in `format`;
    /// `frames` of them (`None`: the file once; more than the file holds
    /// loops it), at the file's frame rate when `paced`.
    pub fn file(
        src: Y4mSource,
        size: PictureSize,
        format: PixelFormat,
        paced: bool,
        frames: Option<u64>,
    ) -> Result<SourceModule, ModuleError> {
        let frames = Some(frames.unwrap_or(src.frames() as u64));
        SourceModule::new("filesource", Box::new(src), size, format, paced, frames)
    }

    /// Frames sent so far.
    pub fn sent(&self) -> u64 {
        self.next
    }
}

impl Module for SourceModule {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn inputs(&self) -> usize {
        0
    }

    fn start(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        self.start = ctx.now();
        ctx.schedule(ctx.now());
        Ok(())
    }

    fn timeout(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        if self.frames.is_some_and(|n| self.next >= n) {
            ctx.end();
            return Ok(());
        }
        let mut picture = Picture::new(self.size, self.format);
        self.source.render(self.next, &mut picture);
        ctx.send(
            0,
            Frame {
                meta: Meta {
                    number: self.next,
                    captured: ctx.now(),
                    clip: None,
                },
                picture,
            },
        );
        self.next += 1;
        if self.frames.is_some_and(|n| self.next >= n) {
            ctx.end();
            return Ok(());
        }
        let next = match self.period {
            Some(p) => {
                self.start + Duration::from_nanos(p.as_nanos().saturating_mul(self.next as i64))
            }
            None => ctx.now(),
        };
        ctx.schedule(next);
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("frames", self.next)]
    }
}
