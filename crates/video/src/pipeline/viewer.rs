//! A viewer whose consumer is a pipeline: a network node.
//!
//! [`PipelineViewer`] is a one-port [`Node`] holding a [`VidboardClient`]
//! (the workstation's side of a camera session, with
//! [`ClientConfig::caller_consumes`]) and a [`Pipeline`] whose source is
//! a [`Feed`]: a one-frame slot the node fills from the client. The
//! pipeline runs inside the node's callbacks, at the engine's time, so
//! the same viewer runs under the engine's virtual clock and its real
//! one.
//!
//! **The closed loop, end to end.** The node hands the client's waiting
//! frame to the feed only when the feed's slot is free; the slot empties
//! only when the feed is dispatched, which needs room on its output; so a
//! pipeline that drains slowly leaves the frame in the client, the client
//! asks the camera for nothing, and the camera sends nothing: the rate is
//! the pipeline's, through the network.

use std::sync::{Arc, Mutex};

use aurora_net::{Node, Outbox, PortId};
use aurora_time::Instant;
use aurora_wire::CellBytes;

use super::syntax::{self, Element, SyntaxError};
use super::{Ctx, Frame, Meta, Module, ModuleError, ModuleId, Pipeline, Processor};
use crate::client::{ClientConfig, VidboardClient};

/// Pipeline steps run in one node callback at most.
const MAX_STEPS: usize = 1024;

/// Parses and checks the pipeline text of a network-fed viewer: the
/// syntax of [`syntax`], its first element `vidboard`
/// without parameters (but `queue`). Opens no file; one sentence naming
/// the element and the problem when the text is refused.
pub fn fed_elements(text: &str) -> Result<Vec<Element>, SyntaxError> {
    let elements = syntax::parse(text)?;
    syntax::check(&elements)?;
    match elements.first() {
        Some(first) if first.name == "vidboard" => {
            if let Some((k, _)) = first.params.iter().find(|(k, _)| k != "queue") {
                return Err(SyntaxError(format!(
                    "element 1 (vidboard) is fed by the network and takes no parameter `{}` \
                     here; what to ask the camera for is the viewer's (size, format, lt, cb, ...)",
                    k.chars().take(40).collect::<String>()
                )));
            }
            Ok(elements)
        }
        Some(first) => Err(SyntaxError(format!(
            "element 1 ({}) must be vidboard: a viewer's pipeline starts with the frames the \
             network brings",
            first.name
        ))),
        None => Err(SyntaxError("the pipeline is empty".into())),
    }
}

/// The pipeline's source in a [`PipelineViewer`]: sends the frame the node
/// put in its slot. Holds at most one frame.
#[derive(Debug, Default)]
pub struct Feed {
    slot: Arc<Mutex<Option<Frame>>>,
    sent: u64,
}

impl Feed {
    /// A feed with an empty slot.
    pub fn new() -> Feed {
        Feed::default()
    }

    /// The slot the node fills.
    pub fn slot(&self) -> Arc<Mutex<Option<Frame>>> {
        self.slot.clone()
    }
}

impl Module for Feed {
    fn kind(&self) -> &'static str {
        "feed"
    }

    fn inputs(&self) -> usize {
        0
    }

    fn timeout(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        let f = self.slot.lock().map_or(None, |mut s| s.take());
        if let Some(f) = f {
            self.sent += 1;
            ctx.send(0, f);
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("frames", self.sent)]
    }
}

/// A camera session's receiving node whose consumer is a pipeline (see
/// the [module](self) docs).
pub struct PipelineViewer {
    client: VidboardClient,
    pipeline: Pipeline,
    feed: ModuleId,
    slot: Arc<Mutex<Option<Frame>>>,
    error: Option<ModuleError>,
}

impl core::fmt::Debug for PipelineViewer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PipelineViewer({:?})", self.pipeline)
    }
}

impl PipelineViewer {
    /// A viewer asking as `config` says (its consumer set to the
    /// pipeline) and feeding `modules`, joined one after another by
    /// queues of `cap` frames.
    pub fn new(
        config: ClientConfig,
        modules: Vec<Box<dyn Module>>,
        cap: usize,
    ) -> Result<PipelineViewer, ModuleError> {
        PipelineViewer::fed(config, |feed| {
            let mut chain: Vec<Box<dyn Module>> = vec![feed];
            chain.extend(modules);
            let mut pipeline = Pipeline::new();
            let id = pipeline.chain(chain, cap)?;
            Ok((pipeline, id))
        })
    }

    /// A viewer asking as `config` says and running the pipeline `text`
    /// (the syntax of [`syntax`]), whose first element must
    /// be `vidboard` without parameters: that source is this node's feed,
    /// the frames the network brings (what to ask the camera for is in
    /// `config`). `busy` elements book their work on `cpu` when given, so
    /// viewers on one host share its processor. Files named in the text
    /// are created now.
    pub fn from_text(
        config: ClientConfig,
        text: &str,
        cpu: Option<&Processor>,
    ) -> Result<PipelineViewer, ModuleError> {
        let elements = fed_elements(text).map_err(|e| ModuleError(e.0))?;
        PipelineViewer::fed(config, |feed| {
            // `assemble` puts the source first: the feed is module 0.
            let pipeline = syntax::assemble(feed, &elements, cpu).map_err(|e| ModuleError(e.0))?;
            Ok((pipeline, 0))
        })
    }

    /// The client `config` asks for (its consumer the caller) and the
    /// pipeline `build` makes around a feed (the pipeline and the feed's
    /// id in it).
    fn fed(
        mut config: ClientConfig,
        build: impl FnOnce(Box<dyn Module>) -> Result<(Pipeline, ModuleId), ModuleError>,
    ) -> Result<PipelineViewer, ModuleError> {
        config.caller_consumes = true;
        let client = VidboardClient::new(config).map_err(|e| ModuleError(e.to_string()))?;
        let feed = Feed::new();
        let slot = feed.slot();
        let (pipeline, feed) = build(Box::new(feed))?;
        Ok(PipelineViewer {
            client,
            pipeline,
            feed,
            slot,
            error: None,
        })
    }

    /// The client (its counters).
    pub fn client(&self) -> &VidboardClient {
        &self.client
    }

    /// The client, to change (to wind its session down).
    pub fn client_mut(&mut self) -> &mut VidboardClient {
        &mut self.client
    }

    /// The pipeline (its counters and report).
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The error that stopped the pipeline, if one did.
    pub fn error(&self) -> Option<&ModuleError> {
        self.error.as_ref()
    }

    fn slot_free(&self) -> bool {
        self.slot.lock().is_ok_and(|s| s.is_none())
    }

    /// Hands the client's frame to the feed when its slot is free, and
    /// runs the pipeline's work due by `now`.
    fn run(&mut self, now: Instant, out: &mut Outbox) {
        if self.error.is_some() {
            return;
        }
        for _ in 0..MAX_STEPS {
            if self.client.frame_waiting() && self.slot_free() && self.client.take(now, out) {
                if let (Some((info, pic)), Ok(mut slot)) =
                    (self.client.last_frame(), self.slot.lock())
                {
                    *slot = Some(Frame {
                        meta: Meta {
                            number: u64::from(info.frame),
                            captured: info.at,
                            clip: None,
                        },
                        picture: pic.clone(),
                    });
                }
                self.pipeline.schedule(self.feed, now);
            }
            match self.pipeline.step(now) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    self.error = Some(e);
                    break;
                }
            }
        }
    }
}

impl Node for PipelineViewer {
    fn ports(&self) -> usize {
        1
    }

    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        self.client.receive(now, port, cells, out);
        self.run(now, out);
    }

    fn holds_input(&self) -> bool {
        self.client.holds_input()
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        if self.client.poll_at().is_some_and(|t| t <= now) {
            self.client.poll(now, out);
        }
        self.run(now, out);
    }

    fn poll_at(&self) -> Option<Instant> {
        let handoff = (self.error.is_none() && self.client.frame_waiting() && self.slot_free())
            .then_some(Instant::ZERO);
        let wake = self
            .error
            .is_none()
            .then(|| self.pipeline.next_wake())
            .flatten();
        [self.client.poll_at(), wake, handoff]
            .into_iter()
            .flatten()
            .min()
    }
}
