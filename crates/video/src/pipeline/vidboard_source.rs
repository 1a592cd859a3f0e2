//! `VidboardSource`: live video from a Vidboard, asked for as the
//! pipeline drains.
//!
//! The module holds a camera ([`Vidboard`]) and the workstation's side of
//! its session ([`VidboardClient`], with [`ClientConfig::caller_consumes`])
//! joined back to back: cells the camera sends reach the client at the
//! time the camera sends them, the client's command cells reach the
//! camera likewise (a link of no delay; the camera keeps its own account
//! of an OC-3c line, so its bursts keep their shaping). The module's
//! timeouts are the two nodes' own `poll_at` times.
//!
//! **The closed loop.** The session is the capture loop (one frame per
//! frame request). A whole frame waits in the client until the module is
//! dispatched with room on its output; taking it sends the next frame
//! request. A pipeline that drains slowly keeps the output full, the
//! module is not dispatched, no frame is taken and none asked for: the
//! camera sends at the pipeline's pace, and nothing queues anywhere.
//!
//! Wiring the same module to a camera elsewhere on a network would put
//! the client in the engine as a node and hand the module its frames; see
//! docs/video.md.

use aurora_net::{Node, Outbox};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};

use super::{Ctx, Frame, Meta, Module, ModuleError};
use crate::client::{ClientConfig, VidboardClient};
use crate::command::{Frames, VideoRequest};
use crate::frame::{PictureSize, PixelFormat};
use crate::source::Source;
use crate::vidboard::{ControlChannel, Vidboard, VidboardConfig};

/// OC-3c's payload rate in cells a second: the camera's line.
pub const OC3_CELLS: f64 = 353_207.5;
/// Node steps run in one callback at most (each moves a burst or a
/// command): bounds a callback's time.
const MAX_STEPS: usize = 4096;

const CHANNEL: ControlChannel = ControlChannel {
    command: VcId::new(0, 32),
    reply: VcId::new(0, 33),
};
const VIDEO: VcId = VcId::new(0, 100);

/// How a [`VidboardSource`] asks for its video.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VidboardParams {
    /// Picture size.
    pub size: PictureSize,
    /// Pixel format.
    pub format: PixelFormat,
    /// LT: scan lines per t-frame.
    pub lt: u16,
    /// CB: cells per burst.
    pub cb: u16,
    /// Idle time between bursts.
    pub interburst: Duration,
    /// Frames to take; `None` for ever.
    pub frames: Option<u64>,
}

impl Default for VidboardParams {
    /// 320×240 mono, LT 16, CB 56, no interburst delay, for ever.
    fn default() -> VidboardParams {
        VidboardParams {
            size: PictureSize::Half,
            format: PixelFormat::Mono8,
            lt: 16,
            cb: 56,
            interburst: Duration::ZERO,
            frames: None,
        }
    }
}

/// A camera and its client as a source module (see the [module](self)
/// docs). Holds the camera's frame store and the client's reassembler
/// (each bounded, see [`crate`]).
#[derive(Debug)]
pub struct VidboardSource {
    camera: Vidboard,
    client: VidboardClient,
    to_client: Outbox,
    to_camera: Outbox,
    frames: Option<u64>,
    taken: u64,
    cells: u64,
}

impl VidboardSource {
    /// A camera looking at `source`, asked for video as `p` says.
    pub fn new(source: Box<dyn Source>, p: VidboardParams) -> Result<VidboardSource, ModuleError> {
        if !source.supports(p.size) {
            return Err(ModuleError(format!(
                "the camera's source cannot render {} pictures",
                p.size
            )));
        }
        let camera = Vidboard::new(
            VidboardConfig {
                format: Format::Uni,
                line_rate: OC3_CELLS,
                channels: vec![CHANNEL],
            },
            source,
        )
        .map_err(|e| ModuleError(e.to_string()))?;
        let request = VideoRequest {
            size: p.size,
            format: p.format,
            lines_per_tframe: p.lt,
            cells_per_burst: p.cb.max(1),
            interburst: p.interburst,
            interframe: Duration::ZERO,
            dest: VIDEO,
            frames: Frames::OnRequest,
        };
        let mut cfg = ClientConfig::new(CHANNEL.command, CHANNEL.reply, VIDEO, request);
        cfg.caller_consumes = true;
        let client = VidboardClient::new(cfg).map_err(|e| ModuleError(e.to_string()))?;
        Ok(VidboardSource {
            camera,
            client,
            to_client: Outbox::default(),
            to_camera: Outbox::default(),
            frames: p.frames,
            taken: 0,
            cells: 0,
        })
    }

    /// The client (its counters and reassembler's books).
    pub fn client(&self) -> &VidboardClient {
        &self.client
    }

    /// The camera.
    pub fn camera(&self) -> &Vidboard {
        &self.camera
    }

    /// Carries the cells each side sent to the other.
    fn route(&mut self, now: Instant) {
        for _ in 0..2 {
            let cells: Vec<_> = self.to_client.drain().map(|(_, c)| c).collect();
            self.cells += cells.len() as u64;
            if !cells.is_empty() {
                self.client.receive(now, 0, &cells, &mut self.to_camera);
            }
            let cells: Vec<_> = self.to_camera.drain().map(|(_, c)| c).collect();
            if !cells.is_empty() {
                self.camera.receive(now, 0, &cells, &mut self.to_client);
            }
        }
    }

    /// Runs both nodes' work due by `now`.
    fn run_nodes(&mut self, now: Instant) {
        for _ in 0..MAX_STEPS {
            let mut did = false;
            if let Some(t) = self.camera.poll_at().filter(|&t| t <= now) {
                self.camera.poll(t.max(Instant::ZERO), &mut self.to_client);
                did = true;
            }
            self.route(now);
            if let Some(t) = self.client.poll_at().filter(|&t| t <= now) {
                self.client.poll(t.max(Instant::ZERO), &mut self.to_camera);
                did = true;
            }
            self.route(now);
            if !did {
                break;
            }
        }
    }

    fn next_time(&self, now: Instant) -> Option<Instant> {
        if self.client.frame_waiting() {
            return Some(now);
        }
        [self.camera.poll_at(), self.client.poll_at()]
            .into_iter()
            .flatten()
            .min()
            .map(|t| t.max(now))
    }
}

impl Module for VidboardSource {
    fn kind(&self) -> &'static str {
        "vidboard"
    }

    fn inputs(&self) -> usize {
        0
    }

    fn start(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        ctx.schedule(ctx.now());
        Ok(())
    }

    fn timeout(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        let now = ctx.now();
        self.run_nodes(now);
        if self.client.phase() == crate::client::Phase::Failed {
            return Err(ModuleError(
                "the camera refused the video request or never answered".into(),
            ));
        }
        if self.client.frame_waiting() && self.client.take(now, &mut self.to_camera) {
            self.route(now);
            if let Some((info, pic)) = self.client.last_frame() {
                ctx.send(
                    0,
                    Frame {
                        meta: Meta {
                            number: u64::from(info.frame),
                            captured: info.at,
                            clip: None,
                        },
                        picture: pic.clone(),
                    },
                );
                self.taken += 1;
            }
        }
        if self.frames.is_some_and(|n| self.taken >= n) {
            ctx.end();
            return Ok(());
        }
        if let Some(t) = self.next_time(now) {
            ctx.schedule(t);
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.client.counters();
        vec![
            ("frames", self.taken),
            ("frames_complete", c.frames_complete),
            ("frames_incomplete", c.frames_incomplete),
            ("frame_requests", c.frame_requests),
            ("cells", self.cells),
            ("tframes_lost", self.client.rx_stats().tframes_lost()),
        ]
    }
}
