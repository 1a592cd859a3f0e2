//! The camera and its clients in virtual time: a Vidboard and up to two
//! clients on an ATM switch.
//!
//! ```text
//!   camera ──(0) switch (1)── client A
//!                       (2)── client B
//! ```
//!
//! Client A's commands leave on 0.40 and reach the camera on 0.32; the
//! camera's replies leave on 0.33 and reach A on 0.41; A's video leaves the
//! camera on 0.100 and reaches A on 0.200. Client B likewise through
//! 0.34/0.35 and video 0.101.

use std::sync::{Arc, Mutex};

use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_net::switch::AtmSwitch;
use aurora_net::{Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use aurora_video::client::{ClientConfig, Phase, VidboardClient};
use aurora_video::command::{
    code, Ack, AckStatus, CommandCell, Defect, ErrorReason, ErrorReply, Frames, Message,
    VideoRequest,
};
use aurora_video::frame::{PictureSize, PixelFormat};
use aurora_video::source::{Source, SyntheticSource, Y4mSource};
use aurora_video::val::{Layout, Loss};
use aurora_video::vidboard::{ControlChannel, Vidboard, VidboardConfig};
use aurora_wire::cell::{Format, Header, Pti, VcId};
use aurora_wire::CellBytes;

/// OC-3c payload rate, cells a second.
const OC3: f64 = 353_207.5;
const SEED: u64 = 42;

const CAM_A: ControlChannel = ControlChannel {
    command: VcId::new(0, 32),
    reply: VcId::new(0, 33),
};
const CAM_B: ControlChannel = ControlChannel {
    command: VcId::new(0, 34),
    reply: VcId::new(0, 35),
};
const VIDEO_A: VcId = VcId::new(0, 100);
const VIDEO_B: VcId = VcId::new(0, 101);
const CLIENT_CMD: VcId = VcId::new(0, 40);
const CLIENT_REPLY: VcId = VcId::new(0, 41);
const CLIENT_VIDEO: VcId = VcId::new(0, 200);

fn link() -> LinkSpec {
    LinkSpec::clean(OC3, Duration::from_micros(5), 8192)
}

fn camera(source: Box<dyn Source>) -> Vidboard {
    let cfg = VidboardConfig {
        format: Format::Uni,
        line_rate: OC3,
        channels: vec![CAM_A, CAM_B],
    };
    Vidboard::new(cfg, source).unwrap()
}

fn switch() -> AtmSwitch {
    let mut sw = AtmSwitch::new(3, Format::Uni);
    for (port, ch, video) in [(1, CAM_A, VIDEO_A), (2, CAM_B, VIDEO_B)] {
        sw.add_vc(port, CLIENT_CMD, 0, ch.command).unwrap();
        sw.add_vc(0, ch.reply, port, CLIENT_REPLY).unwrap();
        sw.add_vc(0, video, port, CLIENT_VIDEO).unwrap();
    }
    sw
}

fn request(
    size: PictureSize,
    format: PixelFormat,
    lt: u16,
    cb: u16,
    dest: VcId,
    frames: Frames,
) -> VideoRequest {
    VideoRequest {
        size,
        format,
        lines_per_tframe: lt,
        cells_per_burst: cb,
        interburst: Duration::ZERO,
        interframe: Duration::ZERO,
        dest,
        frames,
    }
}

fn client(req: VideoRequest) -> ClientConfig {
    let mut c = ClientConfig::new(CLIENT_CMD, CLIENT_REPLY, CLIENT_VIDEO, req);
    c.check_counter = true;
    c.reference = Some(SyntheticSource::new(SEED));
    c
}

struct Net {
    sim: Engine,
    cam: NodeId,
    sw: NodeId,
    a: NodeId,
    b: Option<NodeId>,
}

impl Net {
    fn new(source: Box<dyn Source>, a: ClientConfig, b: Option<ClientConfig>) -> Net {
        let mut sim = Engine::new(SEED);
        let cam = sim.add_node(camera(source));
        let sw = sim.add_node(switch());
        let a = sim.add_node(VidboardClient::new(a).unwrap());
        sim.connect((cam, 0), (sw, 0), link()).unwrap();
        sim.connect((a, 0), (sw, 1), link()).unwrap();
        let b = b.map(|b| {
            let b = sim.add_node(VidboardClient::new(b).unwrap());
            sim.connect((b, 0), (sw, 2), link()).unwrap();
            b
        });
        Net { sim, cam, sw, a, b }
    }

    fn cam(&self) -> &Vidboard {
        self.sim.node::<Vidboard>(self.cam).unwrap()
    }

    fn client(&self, id: NodeId) -> &VidboardClient {
        self.sim.node::<VidboardClient>(id).unwrap()
    }

    fn no_switch_drops(&self) {
        let sw = self.sim.node::<AtmSwitch>(self.sw).unwrap();
        for p in 0..3 {
            assert_eq!(
                sw.counters(p).unwrap().dropped_total(),
                0,
                "switch port {p}"
            );
        }
        for (from, l) in self.sim.links() {
            assert_eq!((l.overflow, l.lost), (0, 0), "link from {from:?}");
        }
    }
}

#[test]
fn a_requested_frame_arrives_whole_and_equal_to_the_source() {
    for (size, format, lt) in [
        (PictureSize::Full, PixelFormat::Mono8, 16),
        (PictureSize::Half, PixelFormat::Yuyv, 5),
        (PictureSize::Quarter, PixelFormat::Yuyv, 120),
    ] {
        let req = request(size, format, lt, 56, VIDEO_A, Frames::OnRequest);
        let mut n = Net::new(Box::new(SyntheticSource::new(SEED)), client(req), None);
        n.sim.run_until(Instant::from_millis(200));
        let c = n.client(n.a);
        let k = c.counters();
        assert_eq!(c.phase(), Phase::Running);
        assert!(k.frames_complete >= 2, "{size} {format}: {k:?}");
        assert_eq!(
            k.frames_matching, k.frames_complete,
            "pixels equal to the source's frame"
        );
        assert_eq!(
            (k.frames_differing, k.counter_errors, k.order_errors),
            (0, 0, 0)
        );
        assert_eq!((k.frames_incomplete, k.frame_timeouts, k.errors), (0, 0, 0));
        let rx = c.rx_stats();
        assert_eq!(rx.tframes_lost(), 0);
        let (info, pic) = c.last_frame().unwrap();
        assert!(info.complete);
        let want = SyntheticSource::new(SEED).picture(info.frame.into(), size, format);
        assert!(pic == &want, "{size} {format}: last frame {}", info.frame);
        n.no_switch_drops();
    }
}

/// A node that sends scripted cells and records what comes back.
#[derive(Default)]
struct Script {
    sends: Vec<(Instant, CellBytes)>,
    next: usize,
    got: Vec<(Instant, CellBytes)>,
}

impl Node for Script {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, now: Instant, _: PortId, cells: &[CellBytes], _: &mut Outbox) {
        self.got.extend(cells.iter().map(|c| (now, *c)));
    }
    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        while let Some(&(t, c)) = self.sends.get(self.next) {
            if t > now {
                break;
            }
            out.push(0, c);
            self.next += 1;
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        self.sends.get(self.next).map(|s| s.0)
    }
}

fn cmd(tag: u16, m: Message) -> [u8; 48] {
    CommandCell::new(tag, m).emit()
}

fn on_vc(vc: VcId, payload: &[u8; 48]) -> CellBytes {
    let mut c = [0u8; 53];
    Header {
        pti: Pti::DATA_END,
        ..Header::data(vc)
    }
    .emit(&mut c)
    .unwrap();
    c[5..].copy_from_slice(payload);
    c
}

#[test]
fn malformed_command_cells_change_nothing_and_are_counted() {
    let reseal = |mut b: [u8; 48]| {
        let c = aurora_video::command::check(&b[..46]);
        b[46..].copy_from_slice(&c.to_be_bytes());
        b
    };
    let status = cmd(1, Message::StatusRequest);
    let good_video = cmd(
        9,
        Message::VideoRequest(request(
            PictureSize::Full,
            PixelFormat::Mono8,
            16,
            56,
            VIDEO_A,
            Frames::Continuous,
        )),
    );
    let mut bad_magic = status;
    bad_magic[0] = 0;
    let mut bad_version = cmd(2, Message::StartCapture);
    bad_version[2] = 9;
    let mut bad_check = good_video;
    bad_check[10] ^= 1;
    let mut unknown = cmd(4, Message::StartCapture);
    unknown[3] = 0x42;
    let mut reserved = cmd(5, Message::StartCapture);
    reserved[30] = 7;
    let mut zero_lines = good_video;
    zero_lines[4..6].copy_from_slice(&6u16.to_be_bytes());
    zero_lines[8..10].copy_from_slice(&0u16.to_be_bytes());
    let stray_ack = cmd(
        7,
        Message::Ack(Ack {
            command: code::START_CAPTURE,
            status: AckStatus::Done,
        }),
    );
    let malformed = [
        (bad_magic, Defect::BadMagic),
        (bad_version, Defect::BadVersion),
        (bad_check, Defect::BadCheck),
        (reseal(unknown), Defect::UnknownCode),
        (reseal(reserved), Defect::ReservedNotZero),
        (reseal(zero_lines), Defect::BadParameter),
    ];
    let mut script = Script::default();
    let t = |us: i64| Instant::from_micros(us);
    script.sends.push((t(10), on_vc(CLIENT_CMD, &status)));
    for (i, (b, _)) in malformed.iter().enumerate() {
        script
            .sends
            .push((t(100 + 10 * i as i64), on_vc(CLIENT_CMD, b)));
    }
    script.sends.push((t(200), on_vc(CLIENT_CMD, &stray_ack)));
    let mut oam = on_vc(CLIENT_CMD, &status);
    oam[3] = (oam[3] & 0xF1) | (5 << 1); // an end-to-end OAM cell on the VC
    oam[4] = aurora_wire::crc::hec(&[oam[0], oam[1], oam[2], oam[3]]);
    script.sends.push((t(210), oam));
    script
        .sends
        .push((t(300), on_vc(CLIENT_CMD, &cmd(99, Message::StatusRequest))));

    let mut sim = Engine::new(SEED);
    let cam = sim.add_node(camera(Box::new(SyntheticSource::new(SEED))));
    let sw = sim.add_node(switch());
    let s = sim.add_node(script);
    sim.connect((cam, 0), (sw, 0), link()).unwrap();
    sim.connect((s, 0), (sw, 1), link()).unwrap();
    sim.run_until(Instant::from_millis(5));

    let v = sim.node::<Vidboard>(cam).unwrap();
    let k = v.counters();
    for (_, d) in &malformed {
        assert_eq!(k.malformed(*d), 1, "{d:?}");
    }
    assert_eq!(
        (k.replies_received, k.not_user, k.commands_accepted),
        (1, 1, 2)
    );
    // Nothing changed: no capture, no request, nothing sent.
    assert!(!v.capturing() && !v.sending());
    assert_eq!(v.request(0), None);
    assert_eq!((k.frames_sent, k.cells_sent), (0, 0));

    let replies: Vec<CommandCell> = sim
        .node::<Script>(s)
        .unwrap()
        .got
        .iter()
        .map(|(_, c)| CommandCell::parse(c[5..].try_into().unwrap()).unwrap())
        .collect();
    assert_eq!(replies.len(), 2 + malformed.len(), "{replies:?}");
    let (Message::Status(first), Message::Status(last)) = (replies[0].message, replies[7].message)
    else {
        panic!("{replies:?}");
    };
    assert_eq!((replies[0].tag, replies[7].tag), (1, 99));
    // The second status differs from the first only in the command counts.
    assert_eq!(
        last.commands_refused,
        first.commands_refused + malformed.len() as u32
    );
    assert_eq!(last.commands_accepted, first.commands_accepted + 1);
    let same = |s: aurora_video::command::Status| {
        (
            s.capturing,
            s.sending,
            s.frames_captured,
            s.frames_sent,
            s.cells_sent,
        )
    };
    assert_eq!(same(first), same(last));
    let reasons: Vec<(u16, ErrorReply)> = replies[1..7]
        .iter()
        .map(|r| match r.message {
            Message::Error(e) => (r.tag, e),
            m => panic!("{m:?}"),
        })
        .collect();
    assert_eq!(reasons[0].1.reason, ErrorReason::BadMagic);
    assert_eq!(
        (reasons[1].0, reasons[1].1.reason),
        (2, ErrorReason::BadVersion)
    );
    assert_eq!(reasons[2].1.reason, ErrorReason::BadCheck);
    assert_eq!(
        (reasons[3].1.reason, reasons[3].1.command),
        (ErrorReason::UnknownCode, 0x42)
    );
    assert_eq!(
        (reasons[4].1.reason, reasons[4].1.detail),
        (ErrorReason::ReservedNotZero, 30)
    );
    assert_eq!(
        (reasons[5].0, reasons[5].1.reason, reasons[5].1.detail),
        (6, ErrorReason::BadParameter, 8)
    );
}

#[test]
fn cells_a_camera_cannot_take_are_dropped_by_name() {
    // A script wired straight to the camera: a cell on no control VC, a
    // cell with a broken header, and a frame request before any video
    // request.
    let mut script = Script::default();
    let mut broken = on_vc(CAM_A.command, &cmd(1, Message::StartCapture));
    broken[4] ^= 0x33;
    script.sends.push((
        Instant::from_micros(1),
        on_vc(VcId::new(0, 77), &cmd(1, Message::StartCapture)),
    ));
    script.sends.push((Instant::from_micros(2), broken));
    script.sends.push((
        Instant::from_micros(3),
        on_vc(CAM_A.command, &cmd(3, Message::FrameRequest)),
    ));
    let mut sim = Engine::new(SEED);
    let cam = sim.add_node(camera(Box::new(SyntheticSource::new(SEED))));
    let s = sim.add_node(script);
    sim.connect((cam, 0), (s, 0), link()).unwrap();
    sim.run_until(Instant::from_millis(1));
    let k = sim.node::<Vidboard>(cam).unwrap().counters();
    assert_eq!((k.unknown_vc, k.hec_dropped, k.refused[0]), (1, 1, 1));
    assert!(!sim.node::<Vidboard>(cam).unwrap().capturing());
    let got = &sim.node::<Script>(s).unwrap().got;
    assert_eq!(got.len(), 1);
    let r = CommandCell::parse(got[0].1[5..].try_into().unwrap()).unwrap();
    assert_eq!(
        r.message,
        Message::Error(ErrorReply {
            reason: ErrorReason::NotConfigured,
            command: code::FRAME_REQUEST,
            detail: 0
        })
    );
}

#[test]
fn cb_lt_and_the_delays_put_cells_on_the_wire_as_specified() {
    let (cb, lt) = (32u16, 4u16);
    let interburst = Duration::from_micros(50);
    let interframe = Duration::from_millis(2);
    let mut req = request(
        PictureSize::Quarter,
        PixelFormat::Mono8,
        lt,
        cb,
        VIDEO_A,
        Frames::Count(2),
    );
    req.interburst = interburst;
    req.interframe = interframe;
    // A camera capturing every millisecond, so the second frame waits for
    // the interframe delay, not for a capture.
    let src = SyntheticSource::new(SEED).with_period(Duration::from_millis(1));
    let mut cfg = client(req);
    cfg.reference = Some(src.clone());
    let mut n = Net::new(Box::new(src), cfg, None);
    let seen: Arc<Mutex<Vec<(NodeId, Instant, CellBytes)>>> = Arc::default();
    let s2 = seen.clone();
    n.sim.set_tap(Box::new(move |t, node, _, c| {
        s2.lock().unwrap().push((node, t, *c))
    }));
    n.sim.run_until(Instant::from_millis(100));

    let layout = Layout::new(PictureSize::Quarter, PixelFormat::Mono8, lt).unwrap();
    let per_frame = layout.frame_cells();
    assert_eq!((layout.tframe_cells(0), per_frame), (14, 420));
    let cell = n.cam().cell_time();
    assert_eq!(cell, Duration::from_nanos(2831));
    let seen = seen.lock().unwrap();
    for (at, vc) in [(n.sw, VIDEO_A), (n.a, CLIENT_VIDEO)] {
        let video: Vec<(Instant, CellBytes)> = seen
            .iter()
            .filter(|(node, _, c)| {
                *node == at && Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni).vc() == vc
            })
            .map(|(_, t, c)| (*t, *c))
            .collect();
        assert_eq!(
            video.len(),
            2 * per_frame,
            "cells of two frames seen at {at:?}"
        );
        for f in 0..2 {
            let frame = &video[f * per_frame..(f + 1) * per_frame];
            let t0 = frame[0].0;
            for (i, (t, c)) in frame.iter().enumerate() {
                // Cell i of the frame is cell i % CB of burst i / CB.
                let (burst, k) = ((i / cb as usize) as i64, (i % cb as usize) as i64);
                let want =
                    t0 + Duration::from_nanos(
                        burst * (i64::from(cb) * cell.as_nanos() + interburst.as_nanos()),
                    ) + Duration::from_nanos(k * cell.as_nanos());
                assert_eq!(*t, want, "frame {f} cell {i} at {at:?}");
                // LT lines a t-frame: every 14th cell ends one.
                assert_eq!(c[3] & 0x02 != 0, i % 14 == 13, "cell {i}");
            }
        }
        // The second frame's first cell follows the first frame's last by
        // the interframe delay plus one cell time.
        let gap = video[per_frame].0 - video[per_frame - 1].0;
        assert_eq!(gap, interframe + cell, "at {at:?}");
    }
    let c = n.client(n.a).counters();
    assert_eq!((c.frames_complete, c.frames_matching), (2, 2));
    let s = n.cam().session(0).unwrap();
    assert_eq!((s.frames_done, s.tframes_sent, s.cells_sent), (2, 60, 840));
    assert!(!n.cam().sending());
}

/// Passes cells between its two ports, but drops chosen video cells
/// coming from the camera (port 0).
struct Dropper {
    vc: VcId,
    drop: Vec<u64>,
    seen: u64,
    dropped: u64,
}

impl Node for Dropper {
    fn ports(&self) -> usize {
        2
    }
    fn receive(&mut self, _: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        for c in cells {
            let video =
                port == 0 && Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni).vc() == self.vc;
            if video {
                self.seen += 1;
                if self.drop.contains(&(self.seen - 1)) {
                    self.dropped += 1;
                    continue;
                }
            }
            out.push(1 - port, *c);
        }
    }
    fn poll(&mut self, _: Instant, _: &mut Outbox) {}
    fn poll_at(&self) -> Option<Instant> {
        None
    }
}

#[test]
fn a_lost_cell_costs_exactly_one_tframe_counted() {
    let lt = 16u16;
    let layout = Layout::new(PictureSize::Full, PixelFormat::Mono8, lt).unwrap();
    let (tc, fc) = (layout.tframe_cells(0) as u64, layout.frame_cells() as u64);
    // A middle cell, the end cell of a t-frame, the last cell of a frame
    // (its t-frame then runs into the next frame's first), the first cell
    // of a frame, and the very last cell of the stream.
    for drop in [
        fc + 100,
        2 * fc + 3 * tc - 1,
        3 * fc - 1,
        4 * fc,
        5 * fc - 1,
    ] {
        let req = request(
            PictureSize::Full,
            PixelFormat::Mono8,
            lt,
            56,
            VIDEO_A,
            Frames::Count(5),
        );
        let mut cfg = client(req);
        cfg.frame_timeout = Duration::from_millis(100);
        let mut sim = Engine::new(SEED);
        let cam = sim.add_node(camera(Box::new(SyntheticSource::new(SEED))));
        let d = sim.add_node(Dropper {
            vc: VIDEO_A,
            drop: vec![drop],
            seen: 0,
            dropped: 0,
        });
        let sw = sim.add_node(switch());
        let a = sim.add_node(VidboardClient::new(cfg).unwrap());
        sim.connect((cam, 0), (d, 0), link()).unwrap();
        sim.connect((d, 1), (sw, 0), link()).unwrap();
        sim.connect((a, 0), (sw, 1), link()).unwrap();
        sim.run_until(Instant::from_millis(600));
        assert_eq!(sim.node::<Dropper>(d).unwrap().dropped, 1);
        let sent = sim.node::<Vidboard>(cam).unwrap().session(0).unwrap();
        let c = sim.node::<VidboardClient>(a).unwrap();
        let rx = c.rx_stats();
        assert_eq!(
            (sent.frames_done, sent.tframes_sent),
            (5, 5 * layout.tframes() as u64)
        );
        assert_eq!(rx.tframes_lost(), 1, "cell {drop}: {rx:?}");
        let (delivered, lost, busy) = (
            rx.tframes_delivered,
            rx.tframes_lost(),
            c.tframes_in_progress(),
        );
        assert_eq!(
            sent.tframes_sent,
            delivered + lost + busy,
            "the books balance"
        );
        let k = c.counters();
        assert_eq!(
            (k.frames_complete, k.frames_incomplete),
            (4, 1),
            "cell {drop}"
        );
        assert_eq!(
            (k.frames_matching, k.order_errors, k.counter_errors),
            (4, 0, 0)
        );
        let why = if drop == 5 * fc - 1 {
            Loss::Timeout
        } else if drop == 2 * fc + 3 * tc - 1 || drop == 3 * fc - 1 {
            Loss::EndMissing
        } else {
            Loss::Short
        };
        assert_eq!(rx.lost(why), 1, "cell {drop}: {rx:?}");
    }
}

#[test]
fn link_losses_cost_one_tframe_each_and_the_books_balance() {
    let req = request(
        PictureSize::Half,
        PixelFormat::Mono8,
        8,
        56,
        VIDEO_A,
        Frames::Count(20),
    );
    let mut sim = Engine::new(SEED);
    let cam = sim.add_node(camera(Box::new(SyntheticSource::new(SEED))));
    let sw = sim.add_node(switch());
    let mut cfg = client(req);
    cfg.frame_timeout = Duration::from_millis(100);
    let a = sim.add_node(VidboardClient::new(cfg).unwrap());
    let lossy = LinkSpec {
        loss: 2e-4,
        ..link()
    };
    sim.connect((cam, 0), (sw, 0), lossy).unwrap();
    sim.connect((a, 0), (sw, 1), link()).unwrap();
    sim.run_until(Instant::from_millis(2_000));
    let lost_cells = sim.link(cam, 0).unwrap().lost;
    let sent = sim.node::<Vidboard>(cam).unwrap().session(0).unwrap();
    let c = sim.node::<VidboardClient>(a).unwrap();
    let rx = c.rx_stats();
    assert_eq!(sent.frames_done, 20);
    assert!(lost_cells > 0, "the seed loses some cells");
    assert!(
        rx.tframes_lost() <= lost_cells && rx.tframes_lost() > 0,
        "{rx:?}, {lost_cells} cells lost"
    );
    assert_eq!(
        sent.tframes_sent,
        rx.tframes_delivered + rx.tframes_lost() + c.tframes_in_progress()
    );
    assert_eq!(rx.surplus, 0);
}

/// The shaping of the seed's Table 6 at its best: 640×480 mono, LT 16, CB
/// 56, 510 µs between bursts: 6420 cells in 115 bursts, about 76 ms a
/// frame on an OC-3c line, slower than the camera's 30 frames a second.
fn table6_request(dest: VcId) -> VideoRequest {
    let mut r = request(
        PictureSize::Full,
        PixelFormat::Mono8,
        16,
        56,
        dest,
        Frames::OnRequest,
    );
    r.interburst = Duration::from_micros(510);
    r
}

/// Frames per second client `id` got whole in [from, to).
fn rate(n: &Net, id: NodeId, from: Instant, to: Instant) -> f64 {
    n.client(id).complete_between(from, to) as f64 / (to - from).as_secs_f64()
}

#[test]
fn the_closed_loop_rate_halves_when_a_second_client_shares_the_camera() {
    // The model: the camera's line is the bottleneck. A frame takes S ≈ 76
    // ms to leave; each client asks for its next frame as soon as its
    // consumer takes one (20 ms of work, less than S), so one client gets
    // a frame every S plus a round trip; two get one every 2S each, the
    // camera serving them in turn.
    let mut a = client(table6_request(VIDEO_A));
    a.processing = Duration::from_millis(20);
    let mut b = client(table6_request(VIDEO_B));
    b.processing = Duration::from_millis(20);
    b.start = Instant::from_millis(2_000);
    b.start_capture = false;
    let mut n = Net::new(Box::new(SyntheticSource::new(SEED)), a, Some(b));
    n.sim.run_until(Instant::from_millis(5_000));
    let b = n.b.unwrap();
    let alone = rate(
        &n,
        n.a,
        Instant::from_millis(500),
        Instant::from_millis(2_000),
    );
    let shared_a = rate(
        &n,
        n.a,
        Instant::from_millis(2500),
        Instant::from_millis(5_000),
    );
    let shared_b = rate(
        &n,
        b,
        Instant::from_millis(2500),
        Instant::from_millis(5_000),
    );
    let frame_time = 6420.0 / OC3 + 114.0 * 510e-6;
    assert!(
        (alone - 1.0 / frame_time).abs() < 0.5,
        "alone {alone:.2} fps, the line allows {:.2}",
        1.0 / frame_time
    );
    let ratio = shared_a / alone;
    eprintln!(
        "alone {alone:.2} fps; shared {shared_a:.2} and {shared_b:.2} fps; line allows {:.2}",
        1.0 / frame_time
    );
    assert!(
        (0.45..=0.55).contains(&ratio),
        "alone {alone:.2}, shared {shared_a:.2} fps"
    );
    assert!(
        (shared_a - shared_b).abs() <= 0.5,
        "{shared_a:.2} vs {shared_b:.2} fps"
    );
    // Nothing queued: no request waited behind another, no frame behind
    // the consumer, no cell lost.
    for (s, id) in [(0, n.a), (1, b)] {
        let st = n.cam().session(s).unwrap();
        assert_eq!(st.requests_merged, 0);
        let k = n.client(id).counters();
        assert_eq!(
            (k.frames_overwritten, k.frames_incomplete, k.frame_timeouts),
            (0, 0, 0)
        );
        assert_eq!((k.frames_differing, k.order_errors), (0, 0));
        assert_eq!(k.frames_matching, k.frames_complete);
    }
    n.no_switch_drops();
}

#[test]
fn a_slower_consumer_gets_fewer_frames_at_its_own_pace() {
    let mut fast = client(table6_request(VIDEO_A));
    fast.processing = Duration::from_millis(10);
    let mut slow = client(table6_request(VIDEO_A));
    slow.processing = Duration::from_millis(250);
    let mut rates = Vec::new();
    for cfg in [fast, slow] {
        let mut n = Net::new(Box::new(SyntheticSource::new(SEED)), cfg, None);
        n.sim.run_until(Instant::from_millis(3_000));
        rates.push(rate(
            &n,
            n.a,
            Instant::from_millis(1_000),
            Instant::from_millis(3_000),
        ));
        assert_eq!(n.cam().session(0).unwrap().requests_merged, 0);
        assert_eq!(n.client(n.a).counters().frames_overwritten, 0);
        n.no_switch_drops();
    }
    assert!(rates[0] > 11.0, "{rates:?}");
    assert!(
        (rates[1] - 4.0).abs() < 0.3,
        "a 250 ms consumer takes 4 frames a second: {rates:?}"
    );
}

#[test]
fn a_small_picture_streams_at_the_cameras_30_frames_a_second() {
    // Table 7's camera-limited rows: 160×120 leaves in well under a frame
    // time, so a continuous stream runs at the capture rate.
    let req = request(
        PictureSize::Quarter,
        PixelFormat::Yuyv,
        8,
        56,
        VIDEO_A,
        Frames::Continuous,
    );
    let mut n = Net::new(Box::new(SyntheticSource::new(SEED)), client(req), None);
    n.sim.run_until(Instant::from_millis(2100));
    let r = rate(
        &n,
        n.a,
        Instant::from_millis(100),
        Instant::from_millis(2100),
    );
    assert!((r - 30.0).abs() <= 0.5, "{r:.2} fps");
    let k = n.client(n.a).counters();
    assert_eq!(
        (k.order_errors, k.frames_differing, k.frames_incomplete),
        (0, 0, 0)
    );
    // Consecutive frames: the camera sends every capture.
    let numbers: Vec<u32> = n.client(n.a).deliveries().map(|d| d.frame).collect();
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
}

#[test]
fn a_status_request_reports_the_sessions_counters() {
    let req = request(
        PictureSize::Quarter,
        PixelFormat::Mono8,
        30,
        56,
        VIDEO_A,
        Frames::Count(3),
    );
    let mut n = Net::new(Box::new(SyntheticSource::new(SEED)), client(req), None);
    n.sim.run_until(Instant::from_millis(300));
    assert!(n
        .sim
        .node_mut::<VidboardClient>(n.a)
        .unwrap()
        .queue_command(Message::StatusRequest));
    n.sim.touch(n.a);
    n.sim.run_until(Instant::from_millis(310));
    let s = n.client(n.a).last_status().unwrap();
    assert!(s.capturing && !s.sending);
    assert_eq!((s.frames_sent, s.tframes_sent), (3, 12));
    assert_eq!(
        s.cells_sent as usize,
        3 * Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 30)
            .unwrap()
            .frame_cells()
    );
    assert_eq!(s.newest_frame, 9, "frame 9 is captured at 300 ms");
    // The loop started when the start command arrived, just after frame
    // 0's time: frames 1 to 9.
    assert_eq!(s.frames_captured, 9);
    assert_eq!(n.client(n.a).counters().frames_complete, 3);
}

fn y4m_bytes(w: usize, h: usize, frames: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = y4m::encode(w, h, y4m::Ratio::new(25, 1))
        .with_colorspace(y4m::Colorspace::C422)
        .write_header(&mut out)
        .unwrap();
    for f in 0..frames {
        let y: Vec<u8> = (0..w * h)
            .map(|i| (i / w * 3 + i % w + f * 40) as u8)
            .collect();
        let u = vec![90 + f as u8; w.div_ceil(2) * h];
        let v = vec![170 - f as u8; w.div_ceil(2) * h];
        enc.write_frame(&y4m::Frame::new([&y, &u, &v], None))
            .unwrap();
    }
    out
}

#[test]
fn a_camera_plays_a_y4m_file_and_refuses_sizes_it_cannot_give() {
    let bytes = y4m_bytes(320, 240, 3);
    let src = Y4mSource::from_bytes("clip.y4m", &bytes).unwrap();
    let want = Y4mSource::from_bytes("clip.y4m", &bytes).unwrap();
    // 640×480 from a 320×240 file: refused, and the client says so.
    let mut cfg = client(request(
        PictureSize::Full,
        PixelFormat::Mono8,
        16,
        56,
        VIDEO_A,
        Frames::Count(1),
    ));
    cfg.reference = None;
    cfg.check_counter = false;
    let mut n = Net::new(Box::new(src), cfg, None);
    n.sim.run_until(Instant::from_millis(50));
    let c = n.client(n.a);
    assert_eq!(c.phase(), Phase::Failed);
    assert_eq!(
        c.last_error().map(|e| e.reason),
        Some(ErrorReason::Unsupported)
    );
    assert_eq!(n.cam().counters().refused[2], 1);

    let src = Y4mSource::from_bytes("clip.y4m", &bytes).unwrap();
    let mut cfg = client(request(
        PictureSize::Half,
        PixelFormat::Yuyv,
        10,
        56,
        VIDEO_A,
        Frames::Count(4),
    ));
    cfg.reference = None;
    cfg.check_counter = false;
    let mut n = Net::new(Box::new(src), cfg, None);
    n.sim.run_until(Instant::from_millis(400));
    let c = n.client(n.a);
    assert_eq!(c.counters().frames_complete, 4);
    let (info, pic) = c.last_frame().unwrap();
    let mut p = aurora_video::frame::Picture::new(PictureSize::Half, PixelFormat::Yuyv);
    assert!(want.render(info.frame.into(), &mut p));
    assert!(pic == &p, "the file's frame {} mod 3", info.frame);
}
