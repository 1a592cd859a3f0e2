//! The video part of a run's report (`[[camera]]`, `[[viewer]]`): per
//! viewer, the frames it got (whole and not), their rate and bit rate,
//! what its receiver made of the t-frames (delivered, lost by reason, in
//! progress), the t-frame books, and the checks of the frames' counters;
//! per camera, the commands it took and the malformed ones by reason.
//!
//! The books count t-frames by their end cells, as the IP PVC books count
//! PDUs (`crate::ip_books`): every t-frame the camera sends has one, and
//! it either reached the viewer's receiver, waits in the viewer's host
//! model, was dropped on the way (the ledger has its place, reason and
//! VC), or is still on a line or in a port (found by walking the
//! engine). Each term is measured on its own; what they leave is
//! `unaccounted`, and a run where it is not 0 fails.

use std::collections::BTreeMap;

use aurora_engine::carry::Carries;
use aurora_engine::{Engine, NodeId};
use aurora_net::accounting::Ledger;
use aurora_time::{Duration, Instant};
use aurora_video::client::{Phase, VidboardClient};
use aurora_video::command::{Defect, Frames};
use aurora_video::pipeline::PipelineViewer;
use aurora_video::val::Loss;
use aurora_video::vidboard::Vidboard;
use aurora_wire::CellBytes;
use serde::Serialize;

use crate::run::LossRow;

/// The most bins in a viewer's frame-rate series.
pub const RATE_BINS: usize = 200;

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
    /// The books, by end cell: sent = reached + waiting + lost on the way
    /// + in flight + unaccounted.
    pub books: EndBooks,
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
    /// The width of the bins of `rate`, seconds.
    pub rate_bin_secs: f64,
    /// Whole frames a second in each bin from the viewer's start to the
    /// end of sending (at most [`RATE_BINS`] bins of at least 100 ms;
    /// from the deliveries the viewer remembers).
    pub rate: Vec<f64>,
    /// A pipeline viewer's pipeline: per module what the scheduler
    /// counted and the module's own counters, one line each, then the
    /// timeouts' lateness (`None` for a plain viewer).
    pub pipeline: Option<String>,
}

/// What became of the end cells of the t-frames a camera sent one viewer.
#[derive(Debug, Default, Serialize)]
pub struct EndBooks {
    /// End cells that reached the viewer's receiver (whatever it then
    /// made of their t-frames).
    pub reached: u64,
    /// End cells waiting in the viewer's host model.
    pub waiting: u64,
    /// End cells dropped on the way, by place and reason (the viewer's
    /// own drops, such as its host model's full queue, included).
    pub lost: Vec<LossRow>,
    /// Their sum.
    pub lost_total: u64,
    /// End cells still on a line or in a port.
    pub in_flight: u64,
    /// What the other terms leave of the t-frames sent: 0 when the books
    /// balance.
    pub unaccounted: i64,
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
        } else if let Some(p) = net.sim.node_mut::<PipelineViewer>(v.node) {
            p.client_mut().set_stop(end);
        }
    }
}

/// The client of viewer node `id`: the node itself, or the client a
/// pipeline viewer wraps (so both kinds keep the same books); with the
/// pipeline's report for the second.
fn client_of<F: Carries<CellBytes>>(
    sim: &Engine<F>,
    id: NodeId,
) -> Option<(&VidboardClient, Option<String>)> {
    match sim.node::<VidboardClient>(id) {
        Some(c) => Some((c, None)),
        None => sim.node::<PipelineViewer>(id).map(|p| {
            let mut report = p.pipeline().report();
            if let Some(e) = p.error() {
                report += &format!("  stopped: {e}\n");
            }
            (p.client(), Some(report))
        }),
    }
}

/// The video part of the report of `net` after a run that stopped
/// sending at `end`, with the drops in `ledger` and `names` naming nodes;
/// `None` when it has no cameras.
pub fn report<F: Carries<CellBytes>>(
    net: &aurora_topo::Network<F>,
    end: Instant,
    ledger: &Ledger,
    names: &BTreeMap<u32, &str>,
) -> Option<VideoReport> {
    if net.video.cameras.is_empty() {
        return None;
    }
    let sim: &Engine<F> = &net.sim;
    let flying = crate::ip_books::ends_in_flight(sim);
    let name = |x: NodeId| names.get(&x.0).copied().unwrap_or("?");
    let viewers = net
        .video
        .viewers
        .iter()
        .filter_map(|v| {
            let (c, pipeline) = client_of(sim, v.node)?;
            let cam = sim.node::<Vidboard>(v.camera_node)?;
            let sent = cam.session(v.session).unwrap_or_default().tframes_sent;
            let (lost, in_flight) =
                crate::ip_books::on_the_way(&v.video_hops, &flying, ledger, &name);
            let lost_total = lost.iter().map(|l| l.count).sum::<u64>();
            let (reached, waiting) = (c.rx_stats().ends, c.video_ends_waiting());
            let books = EndBooks {
                reached,
                waiting,
                lost,
                lost_total,
                in_flight,
                unaccounted: sent as i64
                    - reached as i64
                    - waiting as i64
                    - lost_total as i64
                    - in_flight as i64,
            };
            let mut row = viewer_row(&v.name, &v.camera, c, sent, books, end);
            row.pipeline = pipeline;
            Some(row)
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
    books: EndBooks,
    end: Instant,
) -> ViewerRow {
    let cfg = c.config();
    let r = cfg.request;
    let k = c.counters();
    let rx = c.rx_stats();
    let in_progress = c.tframes_in_progress();
    let span = (end - cfg.start).max(Duration::ZERO);
    let secs = span.as_secs_f64();
    let whole = c.complete_between(cfg.start, end);
    let fps = if secs > 0.0 { whole as f64 / secs } else { 0.0 };
    let (rate_bin_secs, rate) = rate_series(c, cfg.start, end);
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
        books,
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
        rate_bin_secs,
        rate,
        pipeline: None,
    }
}

/// Whole frames a second in bins from `start` to `end`: the bin width,
/// the rates.
fn rate_series(c: &VidboardClient, start: Instant, end: Instant) -> (f64, Vec<f64>) {
    let span = (end - start).max(Duration::ZERO);
    let bin = Duration::from_nanos(
        (span.as_nanos() / RATE_BINS as i64).max(Duration::from_millis(100).as_nanos()),
    );
    let bins = (span.as_nanos() / bin.as_nanos()) as usize;
    let mut counts = vec![0u64; bins.min(RATE_BINS)];
    for d in c.deliveries().filter(|d| d.complete && d.at >= start) {
        let i = ((d.at - start).as_nanos() / bin.as_nanos()) as usize;
        if let Some(n) = counts.get_mut(i) {
            *n += 1;
        }
    }
    let secs = bin.as_secs_f64();
    (secs, counts.iter().map(|&n| n as f64 / secs).collect())
}

/// A delay in microseconds.
fn show(d: Duration) -> String {
    format!("{}us", d.as_nanos() as f64 / 1e3)
}

/// `None` when every viewer's t-frame books balance; otherwise one
/// sentence naming the viewers whose do not.
pub fn imbalance(r: &VideoReport) -> Option<String> {
    let bad: Vec<String> = r
        .viewers
        .iter()
        .filter(|v| v.books.unaccounted != 0)
        .map(|v| format!("{} ({} t-frames)", v.name, v.books.unaccounted))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "the report does not balance: t-frames sent to viewer {} are not all accounted for \
             (reached, waiting, lost on the way or in flight); this is a fault of the testbed",
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
            "  t-frames at the receiver: {} delivered, {} lost{}, {} in progress\n",
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
        );
        let b = &v.books;
        s += &format!(
            "  t-frame books (end cells): {} sent = {} reached the receiver + {} waiting in the \
             host + {} lost on the way + {} in flight; {} unaccounted\n",
            v.tframes_sent, b.reached, b.waiting, b.lost_total, b.in_flight, b.unaccounted
        );
        for l in &b.lost {
            s += &format!("    lost {} at {} ({})\n", l.count, l.at, l.reason);
        }
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
        if let Some(p) = &v.pipeline {
            s += "  pipeline:\n";
            s += p;
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
