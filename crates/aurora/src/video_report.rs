//! The video part of a run's report (`[[camera]]`, `[[viewer]]`): per
//! viewer, the frames it got (whole and not), their rate and bit rate,
//! the t-frame books (sent by the camera = delivered + lost by reason +
//! in progress + in flight), and the checks of the frames' counters; per
//! camera, the commands it took and the malformed ones by reason.

use aurora_engine::Engine;
use aurora_time::{Duration, Instant};
use aurora_video::client::{Phase, VidboardClient};
use aurora_video::command::{Defect, Frames};
use aurora_video::val::Loss;
use aurora_video::vidboard::Vidboard;
use serde::Serialize;

/// The video part of a report.
#[derive(Debug, Serialize)]
pub struct VideoReport {
    /// Per viewer, in file order.
    pub viewers: Vec<ViewerRow>,
    /// Per camera, in file order.
    pub cameras: Vec<CameraRow>,
}

/// One viewer.
#[derive(Debug, Serialize)]
pub struct ViewerRow {
    /// Its name.
    pub name: String,
    /// Its camera.
    pub camera: String,
    /// What it asked for, in short.
    pub request: String,
    /// Where its session ended: running, failed...
    pub phase: String,
    /// Frames delivered whole.
    pub frames_complete: u64,
    /// Frames delivered with t-frames missing.
    pub frames_incomplete: u64,
    /// Whole frames a second from its start to the end of sending.
    pub fps: f64,
    /// Picture bits of those frames, megabits a second.
    pub mbps: f64,
    /// T-frames the camera sent it.
    pub tframes_sent: u64,
    /// T-frames delivered into frames.
    pub tframes_delivered: u64,
    /// T-frames lost, by reason (reasons with none left out).
    pub tframes_lost: Vec<(String, u64)>,
    /// T-frames being reassembled at the end.
    pub tframes_in_progress: u64,
    /// T-frames sent and not yet at the viewer (on a link, in a buffer,
    /// in the host's queue): what the other terms leave. The camera counts
    /// a t-frame sent when its last cell leaves, and the viewer has one in
    /// progress from its first cell, so this is -1 while a t-frame is
    /// half-way.
    pub tframes_in_flight: i64,
    /// Deliveries whose frame number was above the last (in order).
    pub in_order: u64,
    /// Deliveries whose frame number was the last one's again.
    pub repeated: u64,
    /// Deliveries whose number was below the last one's.
    pub out_of_order: u64,
    /// Whole frames whose counter line disagreed with their number.
    pub counter_errors: u64,
    /// Whole frames equal to the source's, pixel for pixel (0 when not
    /// checked).
    pub frames_matching: u64,
    /// Whole frames that differ from the source's.
    pub frames_differing: u64,
    /// Frames asked for and given up.
    pub frame_timeouts: u64,
    /// The host model: interrupts taken, cells dropped at its full
    /// queue, the longest queue.
    pub host_interrupts: u64,
    /// Cells dropped at the host model's full queue.
    pub host_overflow: u64,
    /// The most cells that waited for the host model.
    pub host_queue_max: u64,
}

/// One camera.
#[derive(Debug, Serialize)]
pub struct CameraRow {
    /// Its name.
    pub name: String,
    /// Its source.
    pub source: String,
    /// Command cells that arrived.
    pub cells_in: u64,
    /// Commands carried out.
    pub commands: u64,
    /// Malformed command cells, by reason (reasons with none left out).
    pub malformed: Vec<(String, u64)>,
    /// Well-formed commands refused.
    pub refused: u64,
    /// Frames sent.
    pub frames_sent: u64,
    /// T-frames sent.
    pub tframes_sent: u64,
    /// Video cells sent.
    pub cells_sent: u64,
    /// Bursts sent.
    pub bursts: u64,
    /// Replies sent.
    pub replies: u64,
}

/// Every viewer winds its session down from `end` on (no more frame
/// requests; streams stop after the frame leaving), so the drain can
/// bring in what was sent.
pub fn stop_at<F: aurora_net::Frame>(net: &mut aurora_topo::Network<F>, end: Instant) {
    for v in &net.video.viewers {
        if let Some(c) = net.sim.node_mut::<VidboardClient>(v.node) {
            c.set_stop(end);
        }
    }
}

/// The video part of the report of `net` after a run that stopped
/// sending at `end`; `None` when it has no cameras.
pub fn report<F: aurora_net::Frame>(
    net: &aurora_topo::Network<F>,
    end: Instant,
) -> Option<VideoReport> {
    if net.video.cameras.is_empty() {
        return None;
    }
    let sim: &Engine<F> = &net.sim;
    let viewers = net
        .video
        .viewers
        .iter()
        .filter_map(|v| {
            let c = sim.node::<VidboardClient>(v.node)?;
            let cam = sim.node::<Vidboard>(v.camera_node)?;
            let sent = cam.session(v.session).unwrap_or_default();
            Some(viewer_row(&v.name, &v.camera, c, sent.tframes_sent, end))
        })
        .collect();
    let cameras = net
        .video
        .cameras
        .iter()
        .filter_map(|k| {
            let cam = sim.node::<Vidboard>(k.node)?;
            let n = cam.counters();
            Some(CameraRow {
                name: k.name.clone(),
                source: k.source.clone(),
                cells_in: n.cells_in,
                commands: n.commands_accepted,
                malformed: Defect::ALL
                    .iter()
                    .map(|d| (d.name().to_string(), n.malformed(*d)))
                    .filter(|(_, k)| *k > 0)
                    .collect(),
                refused: n.refused.iter().sum(),
                frames_sent: n.frames_sent,
                tframes_sent: n.tframes_sent,
                cells_sent: n.cells_sent,
                bursts: n.bursts,
                replies: n.replies_sent,
            })
        })
        .collect();
    Some(VideoReport { viewers, cameras })
}

fn viewer_row(
    name: &str,
    camera: &str,
    c: &VidboardClient,
    tframes_sent: u64,
    end: Instant,
) -> ViewerRow {
    let cfg = c.config();
    let r = cfg.request;
    let k = c.counters();
    let rx = c.rx_stats();
    let lost: u64 = rx.tframes_lost();
    let in_progress = c.tframes_in_progress();
    let in_flight =
        tframes_sent as i64 - rx.tframes_delivered as i64 - lost as i64 - in_progress as i64;
    let span = (end - cfg.start).max(Duration::ZERO);
    let secs = span.as_secs_f64();
    let whole = c.complete_between(cfg.start, end);
    let fps = if secs > 0.0 { whole as f64 / secs } else { 0.0 };
    let bytes = (r.size.width() * r.size.height() * r.format.bytes_per_pixel()) as f64;
    let (mut in_order, mut repeated, mut out_of_order) = (0, 0, 0);
    let mut last: Option<u32> = None;
    for d in c.deliveries() {
        match last {
            Some(l) if d.frame == l => repeated += 1,
            Some(l) if d.frame < l => out_of_order += 1,
            _ => in_order += 1,
        }
        last = Some(d.frame);
    }
    ViewerRow {
        name: name.to_string(),
        camera: camera.to_string(),
        request: format!(
            "{} {}, LT {}, CB {}, interburst {}, interframe {}, {}",
            r.size,
            r.format,
            r.lines_per_tframe,
            r.cells_per_burst,
            show(r.interburst),
            show(r.interframe),
            match r.frames {
                Frames::OnRequest => "closed loop".to_string(),
                Frames::Continuous => "continuous".to_string(),
                Frames::Count(n) => format!("{n} frames"),
            }
        ),
        phase: match c.phase() {
            Phase::Idle => "not started",
            Phase::Setup => "setting up",
            Phase::Running => "running",
            Phase::Failed => "failed",
        }
        .to_string(),
        frames_complete: k.frames_complete,
        frames_incomplete: k.frames_incomplete,
        fps,
        mbps: fps * bytes * 8.0 / 1e6,
        tframes_sent,
        tframes_delivered: rx.tframes_delivered,
        tframes_lost: Loss::ALL
            .iter()
            .map(|l| (l.name().to_string(), rx.lost(*l)))
            .filter(|(_, n)| *n > 0)
            .collect(),
        tframes_in_progress: in_progress,
        tframes_in_flight: in_flight,
        in_order,
        repeated,
        out_of_order,
        counter_errors: k.counter_errors,
        frames_matching: k.frames_matching,
        frames_differing: k.frames_differing,
        frame_timeouts: k.frame_timeouts,
        host_interrupts: k.host_interrupts,
        host_overflow: k.host_overflow,
        host_queue_max: k.host_queue_max,
    }
}

/// A delay in microseconds.
fn show(d: Duration) -> String {
    format!("{}us", d.as_nanos() as f64 / 1e3)
}

/// `None` when every viewer's t-frame books balance: no more t-frames
/// delivered or lost than sent; otherwise one sentence naming the viewers that do
/// not. A viewer that gave a frame up (a frame timeout) counts the
/// t-frames of it not yet arrived as missing, some perhaps not yet sent,
/// so its books may show fewer sent than accounted for; only a viewer
/// that gave up no frame is held to them.
pub fn imbalance(r: &VideoReport) -> Option<String> {
    let bad: Vec<String> = r
        .viewers
        .iter()
        .filter(|v| {
            v.tframes_in_flight + (v.tframes_in_progress as i64) < 0 && v.frame_timeouts == 0
        })
        .map(|v| format!("{} ({} t-frames)", v.name, v.tframes_in_flight))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "the report does not balance: more t-frames reached viewer {} than its camera sent; \
             this is a fault of the testbed",
            bad.join(", ")
        )
    })
}

/// The report as text.
pub fn text(r: &VideoReport) -> String {
    let mut s = String::from("\nvideo\n");
    for v in &r.viewers {
        s += &format!(
            "viewer {} of {} ({}): {}; {} frames whole, {} not; {:.2} frames/s, {:.2} Mb/s\n",
            v.name,
            v.camera,
            v.request,
            v.phase,
            v.frames_complete,
            v.frames_incomplete,
            v.fps,
            v.mbps
        );
        let lost: u64 = v.tframes_lost.iter().map(|(_, n)| n).sum();
        s += &format!(
            "  t-frames: {} sent = {} delivered + {} lost{} + {} in progress + {} in flight\n",
            v.tframes_sent,
            v.tframes_delivered,
            lost,
            if v.tframes_lost.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    v.tframes_lost
                        .iter()
                        .map(|(r, n)| format!("{r} {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            v.tframes_in_progress,
            v.tframes_in_flight
        );
        s += &format!(
            "  frame counters: {} in order, {} repeated, {} out of order; {} counter errors, {} \
             frames equal to the source, {} differing; {} frame timeouts\n",
            v.in_order,
            v.repeated,
            v.out_of_order,
            v.counter_errors,
            v.frames_matching,
            v.frames_differing,
            v.frame_timeouts
        );
        if v.host_interrupts > 0 {
            s += &format!(
                "  host model: {} interrupts, {} cells dropped at its full queue, at most {} \
                 waiting\n",
                v.host_interrupts, v.host_overflow, v.host_queue_max
            );
        }
    }
    for c in &r.cameras {
        s += &format!(
            "camera {} ({}): {} cells in, {} commands, {} malformed{}, {} refused; {} frames, {} \
             t-frames, {} cells in {} bursts; {} replies\n",
            c.name,
            c.source,
            c.cells_in,
            c.commands,
            c.malformed.iter().map(|(_, n)| n).sum::<u64>(),
            if c.malformed.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    c.malformed
                        .iter()
                        .map(|(r, n)| format!("{r} {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            c.refused,
            c.frames_sent,
            c.tframes_sent,
            c.cells_sent,
            c.bursts,
            c.replies
        );
    }
    s
}
