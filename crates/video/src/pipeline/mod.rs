//! VuSystem-style media pipelines: the workstation's side of the camera.
//!
//! The seed's VuSystem (Sections 3.7 and 4.4) processed live video in
//! ordinary programs: modules joined by ports, each module's work run to
//! completion one at a time (non-preemptive dispatch), and `Timeout`
//! callbacks for work due at a time. This module tree rebuilds that
//! model:
//!
//! | file | what lives there |
//! |---|---|
//! | [`sched`] | the [`Pipeline`]: modules, bounded queues between ports, the dispatch rule, timeouts and their lateness |
//! | [`clock`] | the [`Clock`] trait: [`VirtualClock`] (tests) and [`WallClock`] (real time) |
//! | [`sources`] | [`SourceModule`]: the synthetic source, the `FileSource` (y4m) and the room scene, paced by timeouts |
//! | [`vidboard_source`] | [`VidboardSource`]: a camera and a [`VidboardClient`](crate::client::VidboardClient) joined back to back, frames asked for as the pipeline drains |
//! | [`filters`] | [`Exercise`], [`Edge`], [`Motion`], [`Busy`] |
//! | [`sinks`] | [`FileSink`] (y4m and PNG snapshots), [`RateMeter`], [`NullSink`] |
//! | [`syntax`] | the command-line syntax (`synthetic ! edge ! filesink file=out.y4m`) and its checks |
//! | [`room`] | the Room Monitor: a room scene, the pipeline, its summary |
//! | [`viewer`] | [`PipelineViewer`]: a network node, a camera session's receiving side whose consumer is a pipeline |
//!
//! **Ports and payloads.** A port carries [`Frame`]s: a [`Picture`] and
//! its [`Meta`] (number, capture time, clip). An output port is joined to
//! one input port by a queue of fixed capacity (default
//! [`DEFAULT_QUEUE`], at most [`MAX_QUEUE`]).
//!
//! **Dispatch.** One callback runs at a time, to its end. At each step
//! the scheduler runs, in this order: the due timeout with the earliest
//! (time, scheduling order) whose module's outputs all have room; else
//! one frame for the module furthest downstream (the last added) that
//! has a frame waiting, is [ready](Module::ready) and has room on all its
//! outputs; else an end of
//! stream. A module whose output is full is not dispatched at all: that
//! is the back-pressure, and it is how a source learns how fast the
//! pipeline drains. A callback sends at most one frame per output port.
//!
//! **Bounded memory.** Each queue holds at most its capacity, each module
//! at most one pending timeout, the lateness record is a fixed histogram;
//! modules hold at most one or two pictures (named in each).

use core::fmt;

use aurora_time::Instant;

use crate::frame::Picture;

pub mod clock;
pub mod filters;
pub mod room;
pub mod sched;
pub mod sinks;
pub mod sources;
pub mod syntax;
pub mod vidboard_source;
pub mod viewer;

pub use clock::{Clock, VirtualClock, WallClock};
pub use filters::{Busy, Edge, Exercise, Motion, Processor};
pub use sched::{Lateness, ModuleId, ModuleStats, Pipeline, RunEnd};
pub use sinks::{FileSink, NullSink, RateMeter};
pub use sources::SourceModule;
pub use vidboard_source::VidboardSource;
pub use viewer::{Feed, PipelineViewer};

/// Frames a queue between two ports holds unless told otherwise.
pub const DEFAULT_QUEUE: usize = 2;
/// The most frames a queue may hold.
pub const MAX_QUEUE: usize = 64;

/// What travels with a picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The frame's number at its source.
    pub number: u64,
    /// When the source took it (pipeline time).
    pub captured: Instant,
    /// The clip it belongs to, once a [`Motion`] module has cut the
    /// stream into clips (numbered from 1).
    pub clip: Option<u32>,
}

/// The payload of a port: a picture and its metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Number, time, clip.
    pub meta: Meta,
    /// The pixels.
    pub picture: Picture,
}

/// Why a module stopped the pipeline: one sentence naming the module's
/// input and the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleError(pub String);

impl fmt::Display for ModuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ModuleError {}

/// What a callback may do: read the time, send frames, schedule its
/// timeout, end its stream.
#[derive(Debug)]
pub struct Ctx {
    pub(crate) now: Instant,
    pub(crate) sent: Vec<Option<Frame>>,
    pub(crate) extra: u64,
    pub(crate) timeout: Option<Option<Instant>>,
    pub(crate) ended: bool,
}

impl Ctx {
    pub(crate) fn new(now: Instant, outputs: usize) -> Ctx {
        Ctx {
            now,
            sent: vec![None; outputs],
            extra: 0,
            timeout: None,
            ended: false,
        }
    }

    /// The pipeline's time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Sends `frame` out of output `port`. A callback sends at most one
    /// frame per port (the scheduler made sure there is room for one);
    /// false, and the frame counted as dropped, when it tries another or
    /// the port does not exist.
    pub fn send(&mut self, port: usize, frame: Frame) -> bool {
        match self.sent.get_mut(port) {
            Some(slot @ None) => {
                *slot = Some(frame);
                true
            }
            _ => {
                self.extra += 1;
                false
            }
        }
    }

    /// Calls this module's [`Module::timeout`] at `at` (replacing a
    /// timeout already scheduled).
    pub fn schedule(&mut self, at: Instant) {
        self.timeout = Some(Some(at));
    }

    /// Cancels this module's scheduled timeout.
    pub fn cancel(&mut self) {
        self.timeout = Some(None);
    }

    /// This module sends nothing more (a source at the end of its frames).
    pub fn end(&mut self) {
        self.ended = true;
    }
}

/// A pipeline module. Callbacks run one at a time and to their end.
pub trait Module: Send {
    /// The module's name in the syntax (`edge`, `filesink`, ...).
    fn kind(&self) -> &'static str;
    /// Input ports.
    fn inputs(&self) -> usize {
        1
    }
    /// Output ports.
    fn outputs(&self) -> usize {
        1
    }
    /// Whether the module takes a frame at `now` (default: always). A
    /// module that says no (a consumer still busy with the last frame)
    /// must have a timeout scheduled for when it will say yes; meanwhile
    /// its input fills and back-pressure stops what is upstream.
    fn ready(&self, _now: Instant) -> bool {
        true
    }
    /// Called once when the pipeline starts (a source schedules its first
    /// timeout here).
    fn start(&mut self, _ctx: &mut Ctx) -> Result<(), ModuleError> {
        Ok(())
    }
    /// A frame arrived on input `port`.
    fn receive(&mut self, _ctx: &mut Ctx, _port: usize, _frame: Frame) -> Result<(), ModuleError> {
        Ok(())
    }
    /// The timeout this module scheduled is due.
    fn timeout(&mut self, _ctx: &mut Ctx) -> Result<(), ModuleError> {
        Ok(())
    }
    /// Every input has ended (or the run's time is up): flush what is
    /// held. Called once.
    fn finish(&mut self, _ctx: &mut Ctx) -> Result<(), ModuleError> {
        Ok(())
    }
    /// The module's own counters, by name.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
