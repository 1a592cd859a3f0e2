//! The video step: cameras (`[[camera]]`) and their viewers
//! (`[[viewer]]`): each camera's source and line rate, each viewer's
//! request, host model and path, the two circuits routed for each viewer
//! (control, whose way back carries the replies, and video), and the
//! nodes built from them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Range;
use std::path::Path;

use aurora_engine::NodeId;
use aurora_time::Duration;
use aurora_video::client::{ClientConfig, HostModel, VidboardClient};
use aurora_video::command::{Frames, VideoRequest};
use aurora_video::frame::{PictureSize, PixelFormat};
use aurora_video::pipeline::viewer::fed_elements;
use aurora_video::pipeline::{PipelineViewer, Processor};
use aurora_video::source::{Source, SyntheticSource, Y4mSource};
use aurora_video::vidboard::{ControlChannel, Vidboard, VidboardConfig, MAX_CHANNELS};
use aurora_wire::cell::{Format, VcId};

use super::checks::{duration_or_zero, DurationRange, START_RANGE};
use super::{Ctx, Reader};
use crate::pvc::{Hop, Kind};
use crate::video::{CameraInfo, VideoInfo, ViewerInfo};
use crate::{BuiltNode, Problem, Problems};

/// Delays a request carries (whole nanoseconds in 32 bits, so at most
/// about 4.29 s).
const DELAY_RANGE: DurationRange = (
    Duration::ZERO,
    Duration::from_nanos(u32::MAX as i64),
    "0 to 4.29 s",
);
/// A consumer's time per frame.
const PROCESSING_RANGE: DurationRange = (Duration::ZERO, Duration::from_secs(10), "0 to 10 s");
/// How long a frame may take before it is given up.
const TIMEOUT_RANGE: DurationRange = (
    Duration::from_millis(1),
    Duration::from_secs(60),
    "1 ms to 60 s",
);
/// A host model's costs.
const COST_RANGE: DurationRange = (Duration::ZERO, Duration::from_secs(1), "0 to 1 s");

/// The receiving-host models a viewer may name, with their costs per
/// burst, per cell and per t-frame (how they were derived is in
/// docs/video.md).
pub const HOST_MODELS: [(&str, [Duration; 3]); 2] = [
    // DECstation 5000/200 with the programmed-I/O VupBoard.
    (
        "dec5000",
        [
            Duration::from_micros(1000),
            Duration::from_nanos(13_400),
            Duration::from_micros(1000),
        ],
    ),
    // DEC 3000/400 (133 MHz) with programmed I/O.
    (
        "dec3000",
        [
            Duration::from_micros(475),
            Duration::from_nanos(15_000),
            Duration::from_micros(475),
        ],
    ),
];

/// A camera, checked.
pub(super) struct CameraPlan {
    name: String,
    source: Box<dyn Source>,
    label: String,
    line_rate: f64,
    /// Cells its link's port holds.
    buffer: usize,
    channels: Vec<ControlChannel>,
    viewers: Vec<String>,
}

/// A viewer, checked and routed.
pub(super) struct ViewerPlan {
    name: String,
    camera: usize,
    session: usize,
    config: ClientConfig,
    /// The video circuit, camera to viewer: each hop's ends and VC.
    video_hops: Vec<RoutedHop>,
    /// Its pipeline's text (checked; empty for a plain viewer) and its
    /// workstation, if it has either.
    pipeline: Option<(String, Option<String>)>,
}

/// A hop of a routed circuit: sending node and port, receiving node and
/// port, the VC on it.
type RoutedHop = (String, aurora_net::PortId, String, aurora_net::PortId, VcId);

impl Reader<'_> {
    /// Cameras and viewers are nodes: declared for the names step.
    pub(super) fn video_nodes(&mut self) {
        let file = self.file;
        for c in &file.camera {
            self.declared
                .push((c.span(), &c.get_ref().name, Kind::Camera));
        }
        for v in &file.viewer {
            self.declared
                .push((v.span(), &v.get_ref().name, Kind::Viewer));
        }
    }

    /// The link at node `name`'s one port: its rate and buffer.
    fn port_link(&self, name: &str) -> Option<(f64, usize)> {
        self.links
            .iter()
            .find(|(a, b, _, _)| (a.0 == name && a.1 == 0) || (b.0 == name && b.1 == 0))
            .map(|(_, _, spec, _)| (spec.rate, spec.buffer))
    }

    /// Every camera and viewer.
    pub(super) fn video(&mut self) {
        let file = self.file;
        let mut by_name = BTreeMap::new();
        for c in &file.camera {
            let (span, d) = (c.span(), c.get_ref());
            let me = format!("camera \"{}\"", d.name);
            let source: Option<(Box<dyn Source>, String)> = match d.source.as_deref() {
                None | Some("synthetic") => {
                    let seed = d.seed.unwrap_or(1);
                    Some((
                        Box::new(SyntheticSource::new(seed)),
                        format!("synthetic, seed {seed}"),
                    ))
                }
                Some(path) => {
                    if d.seed.is_some() {
                        self.c.at(
                            span.clone(),
                            format!("{me}: a seed is for the synthetic source, not a file"),
                        );
                    }
                    match Y4mSource::open(Path::new(path)) {
                        Ok(s) => Some((Box::new(s), path.to_string())),
                        Err(e) => {
                            self.c.at(span.clone(), format!("{me}: source: {e}"));
                            None
                        }
                    }
                }
            };
            let link = self.port_link(&d.name);
            if link.is_none() && self.kinds.get(&d.name) == Some(&Kind::Camera) {
                self.c.at(
                    span.clone(),
                    format!("{me} is on no link; link it to a switch port"),
                );
            }
            if let (Some((source, label)), Some((line_rate, buffer))) = (source, link) {
                by_name.insert(d.name.as_str(), self.cameras.len());
                self.cameras.push(CameraPlan {
                    name: d.name.clone(),
                    source,
                    label,
                    line_rate,
                    buffer,
                    channels: Vec::new(),
                    viewers: Vec::new(),
                });
            }
        }
        for v in &file.viewer {
            let (span, d) = (v.span(), v.get_ref());
            if let Some(plan) = self.viewer(span, d, &by_name) {
                self.viewers.push(plan);
            }
        }
    }

    /// One viewer: `None` if anything is wrong (reported).
    fn viewer(
        &mut self,
        span: Range<usize>,
        d: &crate::video::ViewerDef,
        cameras: &BTreeMap<&str, usize>,
    ) -> Option<ViewerPlan> {
        let me = format!("viewer \"{}\"", d.name);
        let c = &mut self.c;
        let camera = cameras.get(d.camera.as_str()).copied();
        if camera.is_none() && self.kinds.get(&d.camera) != Some(&Kind::Camera) {
            c.at(
                span.clone(),
                format!("{me}: camera \"{}\" is not a camera in this file", d.camera),
            );
        }
        let size = match d.size.as_deref().unwrap_or("640x480") {
            "640x480" => Some(PictureSize::Full),
            "320x240" => Some(PictureSize::Half),
            "160x120" => Some(PictureSize::Quarter),
            s => {
                c.at(
                    span.clone(),
                    format!("{me}: size \"{s}\" is not 640x480, 320x240 or 160x120"),
                );
                None
            }
        };
        let format = match d.format.as_deref().unwrap_or("mono8") {
            "mono8" => Some(PixelFormat::Mono8),
            "yuyv" => Some(PixelFormat::Yuyv),
            s => {
                c.at(
                    span.clone(),
                    format!("{me}: format \"{s}\" is not mono8 or yuyv"),
                );
                None
            }
        };
        let lt = d.lt.unwrap_or(16);
        let height = size.map_or(480, |s| s.height() as i64);
        let lt = if (1..=height).contains(&lt) {
            Some(lt as u16)
        } else {
            c.at(
                span.clone(),
                format!("{me}: lt {lt} is outside 1 to {height} (the picture's height)"),
            );
            None
        };
        let cb = d.cb.unwrap_or(56);
        let cb = if (1..=65_535).contains(&cb) {
            Some(cb as u16)
        } else {
            c.at(span.clone(), format!("{me}: cb {cb} is outside 1 to 65535"));
            None
        };
        if let (Some(cb), Some(cam)) = (cb, camera) {
            let buffer = self.cameras[cam].buffer;
            if usize::from(cb) > buffer {
                c.at(
                    span.clone(),
                    format!(
                        "{me}: cb {cb} is more than the {buffer} cells the buffer of camera \
                         \"{}\"'s link holds; a burst is handed to the line whole",
                        d.camera
                    ),
                );
            }
        }
        let mut dur = |field: &str, v: &Option<String>, range| {
            duration_or_zero(c, span.clone(), &format!("{me}: {field}"), v, range)
        };
        let interburst = dur("interburst", &d.interburst, DELAY_RANGE);
        let interframe = dur("interframe", &d.interframe, DELAY_RANGE);
        let processing = dur("processing", &d.processing, PROCESSING_RANGE);
        let start = dur("start", &d.start, START_RANGE);
        let frame_timeout = match &d.frame_timeout {
            None => Some(Duration::from_secs(5)),
            Some(_) => dur("frame_timeout", &d.frame_timeout, TIMEOUT_RANGE),
        };
        let per_burst = d
            .per_burst
            .as_ref()
            .map(|_| dur("per_burst", &d.per_burst, COST_RANGE));
        let per_cell = d
            .per_cell
            .as_ref()
            .map(|_| dur("per_cell", &d.per_cell, COST_RANGE));
        let per_tframe = d
            .per_tframe
            .as_ref()
            .map(|_| dur("per_tframe", &d.per_tframe, COST_RANGE));
        let frames = match d.mode.as_deref().unwrap_or("closed") {
            "closed" => Some(Frames::OnRequest),
            "continuous" => Some(Frames::Continuous),
            m => {
                c.at(
                    span.clone(),
                    format!("{me}: mode \"{m}\" is not closed or continuous"),
                );
                None
            }
        };
        // The host model: a named one, with any cost given overriding it;
        // costs alone start from zero.
        let named = match d.host.as_deref() {
            None | Some("none") => Some(None),
            Some(h) => match HOST_MODELS.iter().find(|(n, _)| *n == h) {
                Some((_, costs)) => Some(Some(*costs)),
                None => {
                    c.at(
                        span.clone(),
                        format!("{me}: host \"{h}\" is not dec5000, dec3000 or none"),
                    );
                    None
                }
            },
        };
        let given = [per_burst, per_cell, per_tframe];
        if given.iter().any(|g| matches!(g, Some(None))) {
            return None;
        }
        let any_given = given.iter().any(Option::is_some);
        let named = named?;
        let costs = (named.is_some() || any_given).then(|| {
            let base = named.unwrap_or([Duration::ZERO; 3]);
            [0, 1, 2].map(|i| given[i].flatten().unwrap_or(base[i]))
        });
        let pipeline = self.viewer_pipeline(span.clone(), &me, d);
        let own_link = self.port_link(&d.name);
        if own_link.is_none() && self.kinds.get(&d.name) == Some(&Kind::Viewer) {
            self.c.at(
                span.clone(),
                format!("{me} is on no link; link it to a switch port"),
            );
        }
        let path = self.video_path(span.clone(), &me, &d.name, &d.camera, &d.path)?;
        let (size, format, lt, cb, frames) = (size?, format?, lt?, cb?, frames?);
        let (interburst, interframe, processing, start, frame_timeout) = (
            interburst?,
            interframe?,
            processing?,
            start?,
            frame_timeout?,
        );
        let (camera, (_, buffer)) = (camera?, own_link?);
        let back: Vec<String> = path.iter().rev().cloned().collect();
        let control = self.route_video(span.clone(), &format!("{me} (control)"), &path)?;
        let video = self.route_video(span.clone(), &format!("{me} (video)"), &back)?;
        let plan = &mut self.cameras[camera];
        if plan.channels.len() >= MAX_CHANNELS {
            self.c.at(
                span,
                format!(
                    "{me}: camera \"{}\" already has {MAX_CHANNELS} viewers, the most it serves",
                    d.camera
                ),
            );
            return None;
        }
        let at_camera = control[control.len() - 1].4;
        plan.channels.push(ControlChannel {
            command: at_camera,
            reply: at_camera,
        });
        plan.viewers.push(d.name.clone());
        let synthetic = plan.label.starts_with("synthetic");
        let seed = file_seed(&self.file.camera, &d.camera);
        let request = VideoRequest {
            size,
            format,
            lines_per_tframe: lt,
            cells_per_burst: cb,
            interburst,
            interframe,
            dest: video[0].4,
            frames,
        };
        let mut config = ClientConfig::new(
            control[0].4,
            control[0].4,
            video[video.len() - 1].4,
            request,
        );
        config.format = Format::Uni;
        config.start = aurora_time::Instant::ZERO + start;
        config.processing = processing;
        config.frame_timeout = frame_timeout;
        let check = d.check.unwrap_or(true);
        config.check_counter = check && synthetic;
        config.reference = (check && synthetic).then(|| SyntheticSource::new(seed));
        config.host = costs.map(|[per_burst, per_cell, per_tframe]| HostModel {
            per_burst,
            per_cell,
            per_tframe,
            buffer,
        });
        Some(ViewerPlan {
            name: d.name.clone(),
            camera,
            session: plan.channels.len() - 1,
            config,
            video_hops: video,
            pipeline: pipeline?,
        })
    }

    /// A viewer's `pipeline` and `workstation`, checked (no file opened):
    /// `Some(None)` when it has no pipeline, `None` when wrong (reported).
    #[allow(clippy::option_option)]
    fn viewer_pipeline(
        &mut self,
        span: Range<usize>,
        me: &str,
        d: &crate::video::ViewerDef,
    ) -> Option<Option<(String, Option<String>)>> {
        let Some(text) = &d.pipeline else {
            // A plain viewer on a workstation: its host model and its
            // consumer take turns with the other viewers there.
            return Some(d.workstation.clone().map(|w| (String::new(), Some(w))));
        };
        let mut ok = true;
        if let Err(e) = fed_elements(text) {
            self.c.at(span.clone(), format!("{me}: pipeline: {e}"));
            ok = false;
        }
        if d.processing.is_some() {
            self.c.at(
                span,
                format!(
                    "{me}: processing is the plain viewer's time per frame; a pipeline viewer's \
                     work is its pipeline's (busy ms=N)"
                ),
            );
            ok = false;
        }
        ok.then(|| Some((text.clone(), d.workstation.clone())))
    }

    /// The path from viewer `from` to camera `to`: the one written, or
    /// the shortest through ATM switches.
    fn video_path(
        &mut self,
        span: Range<usize>,
        me: &str,
        from: &str,
        to: &str,
        written: &Option<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(p) = written {
            let ok = p.len() >= 2
                && p[0] == from
                && p[p.len() - 1] == to
                && p[1..p.len() - 1]
                    .iter()
                    .all(|n| matches!(self.kinds.get(n), Some(Kind::Switch(_))));
            if !ok {
                self.c.at(
                    span,
                    format!(
                        "{me}: path must start at the viewer, end at its camera \"{to}\", and pass \
                         through ATM switches only"
                    ),
                );
                return None;
            }
            return Some(p.clone());
        }
        // Breadth first over the links, through ATM switches only.
        let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (a, b) in self.joins.keys() {
            next.entry(a.as_str()).or_default().push(b.as_str());
        }
        let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut seen = BTreeSet::from([from]);
        let mut queue = VecDeque::from([from]);
        while let Some(n) = queue.pop_front() {
            if n == to {
                break;
            }
            if n != from && !matches!(self.kinds.get(n), Some(Kind::Switch(_))) {
                continue;
            }
            for &m in next.get(n).into_iter().flatten() {
                if seen.insert(m) {
                    came_from.insert(m, n);
                    queue.push_back(m);
                }
            }
        }
        if !came_from.contains_key(to) {
            // An end on no link, or not defined, was reported already.
            let linked = |n: &str| self.kinds.contains_key(n) && self.port_link(n).is_some();
            if linked(from) && linked(to) {
                self.c.at(
                    span,
                    format!("{me}: no path through ATM switches leads to camera \"{to}\""),
                );
            }
            return None;
        }
        let mut path = vec![to.to_string()];
        let mut at = to;
        while let Some(&p) = came_from.get(at) {
            path.push(p.to_string());
            at = p;
        }
        path.reverse();
        Some(path)
    }

    /// Routes a circuit along `path` (checked): each hop with its VC.
    fn route_video(
        &mut self,
        span: Range<usize>,
        what: &str,
        path: &[String],
    ) -> Option<Vec<RoutedHop>> {
        let c: &mut Ctx = &mut self.c;
        let mut hops = Vec::new();
        let mut crossed = BTreeSet::new();
        for w in path.windows(2) {
            let all = self
                .joins
                .get(&(w[0].clone(), w[1].clone()))
                .map_or(&[][..], Vec::as_slice);
            let pick = all
                .iter()
                .filter(|j| !crossed.contains(&j.2))
                .min_by_key(|j| (self.entries.load(j.2), j.2));
            let Some(&(from_port, to_port, link)) = pick else {
                c.at(
                    span,
                    format!(
                        "{what}: no link (not used already) joins \"{}\" and \"{}\"",
                        w[0], w[1]
                    ),
                );
                return None;
            };
            crossed.insert(link);
            hops.push(Hop {
                from: w[0].clone(),
                from_port,
                to: w[1].clone(),
                to_port,
                link,
            });
        }
        let kinds: Vec<Kind> = path.iter().map(|n| self.kinds[n]).collect();
        match crate::pvc::route(what, path, &kinds, &hops, None, None, &mut self.entries) {
            Ok(v) => Some(
                hops.into_iter()
                    .zip(v)
                    .map(|(h, vc)| (h.from, h.from_port, h.to, h.to_port, vc))
                    .collect(),
            ),
            Err(msgs) => {
                for m in msgs {
                    c.at(span.clone(), m);
                }
                None
            }
        }
    }
}

/// The seed of camera `name` (1 when not given or not found).
fn file_seed(cameras: &[toml::Spanned<crate::video::CameraDef>], name: &str) -> u64 {
    cameras
        .iter()
        .find(|c| c.get_ref().name == name)
        .and_then(|c| c.get_ref().seed)
        .unwrap_or(1)
}

/// The cameras and viewers, built and added to `nodes` (each id its
/// place there), named in `ids` and listed with the hosts.
pub(super) fn build(
    cameras: Vec<CameraPlan>,
    viewers: Vec<ViewerPlan>,
    nodes: &mut Vec<Box<dyn BuiltNode>>,
    ids: &mut BTreeMap<String, NodeId>,
    hosts: &mut Vec<(String, NodeId)>,
) -> Result<VideoInfo, Problems> {
    let problem = |msg: String| {
        Problems(vec![Problem {
            line: 0,
            col: 0,
            msg,
        }])
    };
    let mut info = VideoInfo::default();
    let mut camera_ids = Vec::new();
    for c in cameras {
        let id = NodeId(nodes.len() as u32);
        let labels = (c.name.clone(), c.label.clone(), c.viewers.clone());
        if c.channels.is_empty() {
            // A camera nobody watches has no channel; it is a node all
            // the same (it counts what arrives).
            let cam = Vidboard::new(
                VidboardConfig {
                    format: Format::Uni,
                    line_rate: c.line_rate,
                    channels: vec![ControlChannel {
                        command: VcId::new(0, 65_535),
                        reply: VcId::new(0, 65_535),
                    }],
                },
                c.source,
            )
            .map_err(|e| problem(format!("camera \"{}\": {e}", c.name)))?;
            nodes.push(Box::new(cam));
        } else {
            let cam = Vidboard::new(
                VidboardConfig {
                    format: Format::Uni,
                    line_rate: c.line_rate,
                    channels: c.channels,
                },
                c.source,
            )
            .map_err(|e| problem(format!("camera \"{}\": {e}", c.name)))?;
            nodes.push(Box::new(cam));
        }
        ids.insert(labels.0.clone(), id);
        hosts.push((labels.0.clone(), id));
        camera_ids.push((labels.0.clone(), id));
        info.cameras.push(CameraInfo {
            name: labels.0,
            node: id,
            source: labels.1,
            viewers: labels.2,
        });
    }
    let mut processors: BTreeMap<String, Processor> = BTreeMap::new();
    for v in viewers {
        let id = NodeId(nodes.len() as u32);
        let workstation = v.pipeline.as_ref().and_then(|(_, w)| w.as_ref());
        let cpu = workstation.map(|w| processors.entry(w.clone()).or_default().clone());
        let mut config = v.config;
        config.cpu = cpu.clone();
        if let Some((text, _)) = v.pipeline.as_ref().filter(|(t, _)| !t.is_empty()) {
            let node = PipelineViewer::from_text(config, text, cpu.as_ref())
                .map_err(|e| problem(format!("viewer \"{}\": pipeline: {e}", v.name)))?;
            nodes.push(Box::new(node));
        } else {
            let client = VidboardClient::new(config)
                .map_err(|e| problem(format!("viewer \"{}\": {e}", v.name)))?;
            nodes.push(Box::new(client));
        }
        ids.insert(v.name.clone(), id);
        hosts.push((v.name.clone(), id));
        let (camera, camera_node) = camera_ids[v.camera].clone();
        let video_hops = v
            .video_hops
            .iter()
            .map(|(a, ap, b, bp, vc)| crate::PvcHop {
                from: (ids[a.as_str()], *ap),
                to: (ids[b.as_str()], *bp),
                vc: *vc,
            })
            .collect();
        info.viewers.push(ViewerInfo {
            name: v.name,
            node: id,
            camera,
            camera_node,
            session: v.session,
            video_hops,
        });
    }
    Ok(info)
}
