//! VuSystem-style pipelines: the scheduler's rules, each module's known
//! answers on small frames, the Room Monitor and the closed loop of the
//! `VidboardSource`, all in virtual time (one real-time run checks counts
//! only).

use std::sync::{Arc, Mutex};

use aurora_time::{Duration, Instant};
use aurora_video::frame::{Picture, PictureSize, PixelFormat};
use aurora_video::pipeline::room::{RoomMonitor, RoomScene};
use aurora_video::pipeline::sinks::write_png;
use aurora_video::pipeline::vidboard_source::VidboardParams;
use aurora_video::pipeline::{
    syntax, Busy, Ctx, Edge, Exercise, FileSink, Frame, Meta, Module, ModuleError, Motion,
    NullSink, Pipeline, RunEnd, SourceModule, VidboardSource, VirtualClock, WallClock,
};
use aurora_video::source::{Source, SyntheticSource, Y4mSource};

type Log = Arc<Mutex<Vec<String>>>;

/// A filter that logs each frame it passes.
struct Tap {
    name: &'static str,
    log: Log,
    sink: bool,
}

impl Module for Tap {
    fn kind(&self) -> &'static str {
        self.name
    }
    fn outputs(&self) -> usize {
        usize::from(!self.sink)
    }
    fn receive(&mut self, ctx: &mut Ctx, _port: usize, f: Frame) -> Result<(), ModuleError> {
        let n = f.meta.number;
        self.log.lock().unwrap().push(format!("{}{n}", self.name));
        if !self.sink {
            ctx.send(0, f);
        }
        Ok(())
    }
}

/// A module that logs its timeout, scheduled at `at` when it starts.
struct Alarm {
    name: &'static str,
    at: Instant,
    log: Log,
}

impl Module for Alarm {
    fn kind(&self) -> &'static str {
        self.name
    }
    fn inputs(&self) -> usize {
        0
    }
    fn start(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        ctx.schedule(self.at);
        Ok(())
    }
    fn timeout(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        self.log.lock().unwrap().push(format!(
            "{}@{}",
            self.name,
            ctx.now().as_nanos() / 1_000_000
        ));
        ctx.end();
        Ok(())
    }
}

fn quarter(frames: u64, period: Option<Duration>) -> Box<SourceModule> {
    Box::new(SourceModule::synthetic(
        1,
        PictureSize::Quarter,
        PixelFormat::Mono8,
        period,
        Some(frames),
    ))
}

fn frame(picture: Picture, number: u64) -> Frame {
    Frame {
        meta: Meta {
            number,
            captured: Instant::ZERO,
            clip: None,
        },
        picture,
    }
}

#[test]
fn timeouts_run_first_and_frames_go_to_the_furthest_downstream_module() {
    let log: Log = Arc::default();
    let mut p = Pipeline::new();
    let tap = |name, sink| {
        Box::new(Tap {
            name,
            log: log.clone(),
            sink,
        }) as Box<dyn Module>
    };
    p.chain(vec![quarter(2, None), tap("a", false), tap("z", true)], 1)
        .unwrap();
    let end = p.run(&mut VirtualClock::new(), None).unwrap();
    assert_eq!(end, RunEnd::Finished);
    // Frame 0 leaves the source; with its queue full the source waits and
    // `a` takes frame 0; the source's due timeout then goes before any
    // frame (frame 1 leaves); then `z`, furthest downstream, takes frame
    // 0 before `a` takes frame 1.
    assert_eq!(*log.lock().unwrap(), ["a0", "z0", "a1", "z1"]);
    assert_eq!(p.stats(0).unwrap().sent, 2);
    assert!(p.finished());
}

#[test]
fn timeouts_run_in_time_order_then_scheduling_order() {
    let log: Log = Arc::default();
    let mut p = Pipeline::new();
    for (name, ms) in [("t1", 5), ("t2", 3), ("t3", 5), ("t4", 0)] {
        p.add(Box::new(Alarm {
            name,
            at: Instant::from_millis(ms),
            log: log.clone(),
        }));
    }
    let mut clock = VirtualClock::new();
    p.run(&mut clock, None).unwrap();
    assert_eq!(*log.lock().unwrap(), ["t4@0", "t2@3", "t1@5", "t3@5"]);
    // In virtual time every timeout runs exactly on time.
    let l = p.lateness();
    assert_eq!((l.total(), l.max), (4, Duration::ZERO));
    assert_eq!(l.within(0), 1.0);
}

#[test]
fn back_pressure_holds_the_source_to_the_consumers_pace() {
    let mut p = Pipeline::new();
    // 30 frames a second offered for 2 s; the consumer takes 100 ms a
    // frame.
    p.chain(
        vec![
            quarter(1000, Some(Duration::from_nanos(33_333_333))),
            Box::new(Exercise::new()),
            Box::new(Busy::new(Duration::from_millis(100))),
            Box::new(NullSink::new()),
        ],
        2,
    )
    .unwrap();
    let end = p
        .run(&mut VirtualClock::new(), Some(Instant::from_millis(2000)))
        .unwrap();
    assert_eq!(end, RunEnd::TimeUp);
    let taken = p.stats(2).unwrap().received;
    let sent = p.stats(0).unwrap().sent;
    assert_eq!(taken, 20, "one frame every 100 ms for 2 s");
    assert_eq!(p.counter(2, "frames"), Some(19), "the 20th is still held");
    // What the source sent is what was taken plus what fits in the two
    // queues before it and the filter: nothing more.
    assert!(sent <= taken + 2 + 2 + 1, "sent {sent}, taken {taken}");
    assert_eq!(p.queue_most(1, 0), Some(2));
    assert_eq!(p.queue_most(2, 0), Some(2));
    // Its timeouts waited while its output was full.
    assert!(p.lateness().max >= Duration::from_millis(50));
}

#[test]
fn exercise_checksum_known_answer() {
    // All ones: a = n, b = n(n + 1)/2, both mod 65535.
    let mut pic = Picture::new(PictureSize::Quarter, PixelFormat::Mono8);
    pic.data_mut().fill(1);
    let n: u64 = 160 * 120;
    let want = (((n * (n + 1) / 2) % 65535) << 16) | (n % 65535);
    assert_eq!(u64::from(Exercise::checksum(pic.data())), want);
    assert_eq!(Exercise::checksum(&[1, 2, 3]), (10 << 16) | 6);
    let mut p = Pipeline::new();
    p.chain(
        vec![
            quarter(3, None),
            Box::new(Exercise::new()),
            Box::new(NullSink::new()),
        ],
        2,
    )
    .unwrap();
    p.run(&mut VirtualClock::new(), None).unwrap();
    let last = SyntheticSource::new(1).picture(2, PictureSize::Quarter, PixelFormat::Mono8);
    assert_eq!(
        p.counter(1, "checksum"),
        Some(u64::from(Exercise::checksum(last.data())))
    );
    assert_eq!(p.counter(2, "frames"), Some(3));
}

#[test]
fn edge_of_a_step_is_two_columns() {
    let mut pic = Picture::new(PictureSize::Quarter, PixelFormat::Mono8);
    for line in pic.data_mut().chunks_exact_mut(160) {
        line[80..].fill(200);
    }
    let mut out = Picture::new(PictureSize::Quarter, PixelFormat::Mono8);
    let e = Edge::new(128);
    let n = e.detect(&pic, &mut out);
    // |gx| = 4 × 200 on columns 79 and 80, every inner line.
    assert_eq!(n, 2 * 118);
    for y in 0..120 {
        for x in 0..160 {
            let want = if (1..119).contains(&y) && (x == 79 || x == 80) {
                255
            } else {
                0
            };
            assert_eq!(out.luma(x, y), Some(want), "({x}, {y})");
        }
    }
    // The same from YUYV (luma every other byte), and no edge above 800.
    let mut c = Picture::new(PictureSize::Quarter, PixelFormat::Yuyv);
    for (i, line) in c.data_mut().chunks_exact_mut(320).enumerate() {
        for x in 0..160 {
            line[2 * x] = if x >= 80 { 200 } else { 0 };
        }
        let _ = i;
    }
    assert_eq!(Edge::new(128).detect(&c, &mut out), 2 * 118);
    assert_eq!(Edge::new(801).detect(&pic, &mut out), 0);
}

fn square_at(x0: usize) -> Picture {
    let mut pic = Picture::new(PictureSize::Quarter, PixelFormat::Mono8);
    for (y, line) in pic.data_mut().chunks_exact_mut(160).enumerate() {
        if (20..30).contains(&y) {
            line[x0..x0 + 10].fill(255);
        }
    }
    pic
}

/// A source that sends the pictures it is given, one per timeout.
struct Frames(Vec<Picture>, u64);

impl Module for Frames {
    fn kind(&self) -> &'static str {
        "frames"
    }
    fn inputs(&self) -> usize {
        0
    }
    fn start(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        ctx.schedule(ctx.now());
        Ok(())
    }
    fn timeout(&mut self, ctx: &mut Ctx) -> Result<(), ModuleError> {
        if self.0.is_empty() {
            ctx.end();
            return Ok(());
        }
        let pic = self.0.remove(0);
        ctx.send(0, frame(pic, self.1));
        self.1 += 1;
        ctx.schedule(ctx.now() + Duration::from_millis(10));
        Ok(())
    }
}

#[test]
fn motion_passes_a_moved_square_and_drops_still_frames() {
    assert_eq!(Motion::changed(&square_at(20), &square_at(30), 16), 200);
    assert_eq!(Motion::changed(&square_at(20), &square_at(25), 16), 100);
    assert_eq!(Motion::changed(&square_at(20), &square_at(20), 0), 0);
    let log: Log = Arc::default();
    let mut p = Pipeline::new();
    let pics = vec![
        square_at(20),
        square_at(20),
        square_at(30),
        square_at(40),
        square_at(40),
        square_at(40),
        square_at(50),
    ];
    p.chain(
        vec![
            Box::new(Frames(pics, 0)),
            Box::new(Motion::new(16, 150, 0)),
            Box::new(Tap {
                name: "f",
                log: log.clone(),
                sink: true,
            }),
        ],
        2,
    )
    .unwrap();
    p.run(&mut VirtualClock::new(), None).unwrap();
    // 2 and 3 moved 10 pixels (200 changed), 6 likewise; 1, 4, 5 are still,
    // and 0 has nothing before it.
    assert_eq!(*log.lock().unwrap(), ["f2", "f3", "f6"]);
    let c: Vec<_> = p.counters(1);
    assert_eq!(c, [("seen", 7), ("moving", 3), ("passed", 3), ("clips", 2)]);
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("aurora-pipeline-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn y4m_bytes(w: usize, h: usize, cs: y4m::Colorspace, frames: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = y4m::encode(w, h, y4m::Ratio::new(30, 1))
        .with_colorspace(cs)
        .write_header(&mut out)
        .unwrap();
    let c = if matches!(cs, y4m::Colorspace::Cmono) {
        0
    } else {
        w / 2 * h
    };
    for k in 0..frames {
        let y: Vec<u8> = (0..w * h).map(|i| (i as u8).wrapping_mul(k + 3)).collect();
        let u: Vec<u8> = (0..c).map(|i| (i as u8) ^ k).collect();
        let v: Vec<u8> = (0..c).map(|i| (i as u8).wrapping_add(k)).collect();
        enc.write_frame(&y4m::Frame::new([&y, &u, &v], None))
            .unwrap();
    }
    out
}

#[test]
fn y4m_round_trips_byte_for_byte() {
    for (cs, format, name) in [
        (y4m::Colorspace::Cmono, "mono8", "mono"),
        (y4m::Colorspace::C422, "yuyv", "422"),
    ] {
        let input = tmp(&format!("in-{name}.y4m"));
        let output = tmp(&format!("out-{name}.y4m"));
        let bytes = y4m_bytes(160, 120, cs, 4);
        std::fs::write(&input, &bytes).unwrap();
        let text = format!(
            "filesource file={} format={format} paced=0 ! filesink file={}",
            input.display(),
            output.display()
        );
        let mut p = syntax::build(&text).unwrap();
        assert_eq!(
            p.run(&mut VirtualClock::new(), None).unwrap(),
            RunEnd::Finished
        );
        assert_eq!(p.counter(1, "frames"), Some(4));
        assert_eq!(std::fs::read(&output).unwrap(), bytes, "{name}");
    }
}

#[test]
fn png_snapshots_decode_to_the_same_pixels() {
    let pic = SyntheticSource::new(5).picture(7, PictureSize::Quarter, PixelFormat::Mono8);
    let mut bytes = Vec::new();
    write_png(&mut bytes, &pic).unwrap();
    let mut r = png::Decoder::new(std::io::Cursor::new(&bytes))
        .read_info()
        .unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (160, 120));
    assert_eq!(info.color_type, png::ColorType::Grayscale);
    assert_eq!(&buf[..info.buffer_size()], pic.data());
    // Through the sink: every 2nd of 5 frames, named by frame number.
    let prefix = tmp("snap");
    let mut p = Pipeline::new();
    p.chain(
        vec![
            quarter(5, None),
            Box::new(FileSink::new(None, 30, Some(&prefix), 2, 100).unwrap()),
        ],
        2,
    )
    .unwrap();
    p.run(&mut VirtualClock::new(), None).unwrap();
    assert_eq!(p.counter(1, "pngs"), Some(3));
    let f4 = std::fs::read(format!("{}-000004.png", prefix.display())).unwrap();
    let mut r = png::Decoder::new(std::io::Cursor::new(&f4))
        .read_info()
        .unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    r.next_frame(&mut buf).unwrap();
    let want = SyntheticSource::new(1).picture(4, PictureSize::Quarter, PixelFormat::Mono8);
    assert_eq!(&buf[..], want.data());
    // Colour comes out as RGB: a grey YUYV pixel (luma 128) is grey.
    let mut c = Picture::new(PictureSize::Quarter, PixelFormat::Yuyv);
    for q in c.data_mut().chunks_exact_mut(2) {
        q[0] = 128;
    }
    let mut bytes = Vec::new();
    write_png(&mut bytes, &c).unwrap();
    let mut r = png::Decoder::new(std::io::Cursor::new(&bytes))
        .read_info()
        .unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    r.next_frame(&mut buf).unwrap();
    assert_eq!(&buf[..3], &[130, 130, 130]);
}

#[test]
fn the_room_monitor_records_only_while_someone_moves() {
    let out = tmp("room.y4m");
    let scene = RoomScene::new(60, 20, 3);
    let src = SourceModule::new(
        "room",
        Box::new(scene),
        PictureSize::Half,
        PixelFormat::Mono8,
        true,
        Some(180),
    )
    .unwrap();
    let mut rm = RoomMonitor::new(Box::new(src), &out, 24, 300, 0).unwrap();
    let end = rm.pipeline.run(&mut VirtualClock::new(), None).unwrap();
    assert_eq!(end, RunEnd::Finished);
    let s = rm.summary();
    // Someone is in frames 0-19, 60-79, 120-139; a frame moves when it
    // differs from the one before: 1-20 (0 has nothing before it), 60-80,
    // 120-140.
    assert_eq!((s.seen, s.recorded, s.clips), (180, 20 + 21 + 21, 3));
    let file = Y4mSource::open(&out).unwrap();
    assert_eq!(file.frames(), 62);
    // Every frame recorded is one of the moving ones, in order.
    let moving: Vec<u64> = (1..=20).chain(60..=80).chain(120..=140).collect();
    let mut got = Picture::new(PictureSize::Half, PixelFormat::Mono8);
    let mut want = Picture::new(PictureSize::Half, PixelFormat::Mono8);
    for (i, &n) in moving.iter().enumerate() {
        file.render(i as u64, &mut got);
        scene.render(n, &mut want);
        assert!(got == want, "recorded frame {i} is not scene frame {n}");
    }
    assert_eq!(
        s.to_string(),
        "room monitor: 180 frames seen, 62 recorded in 3 clips"
    );
}

#[test]
fn the_vidboard_source_asks_at_the_pipelines_pace() {
    for (work_ms, lo, hi) in [(0, 55, 60), (100, 19, 21)] {
        let src = VidboardSource::new(Box::new(SyntheticSource::new(9)), VidboardParams::default())
            .unwrap();
        let mut p = Pipeline::new();
        p.chain(
            vec![
                Box::new(src),
                Box::new(Busy::new(Duration::from_millis(work_ms))),
            ],
            1,
        )
        .unwrap();
        p.run(&mut VirtualClock::new(), Some(Instant::from_millis(2000)))
            .unwrap();
        let taken = p.stats(1).unwrap().received;
        assert!((lo..=hi).contains(&taken), "{work_ms} ms: {taken} frames");
        let requests = p.counter(0, "frame_requests").unwrap();
        let complete = p.counter(0, "frames_complete").unwrap();
        // One request per frame taken (and the first): nothing queues.
        assert!(requests <= p.counter(0, "frames").unwrap() + 1);
        assert!(complete <= requests);
        assert_eq!(p.counter(0, "frames_incomplete"), Some(0));
        assert_eq!(p.counter(0, "tframes_lost"), Some(0));
    }
}

#[test]
fn the_vidboard_source_delivers_the_cameras_frames_in_order() {
    let log: Log = Arc::default();
    let mut p = syntax::build("vidboard size=160x120 frames=5 seed=4").unwrap();
    let tap = p.add(Box::new(Tap {
        name: "f",
        log: log.clone(),
        sink: true,
    }));
    p.connect(0, 0, tap, 0, 2).unwrap();
    p.run(&mut VirtualClock::new(), None).unwrap();
    assert_eq!(p.counter(0, "frames"), Some(5));
    assert_eq!(p.counter(0, "frames_complete"), Some(5));
    // The camera's frame numbers (its capture clock), rising, none twice.
    let numbers: Vec<u64> = log
        .lock()
        .unwrap()
        .iter()
        .map(|s| s[1..].parse().unwrap())
        .collect();
    assert_eq!(numbers.len(), 5);
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
}

#[test]
fn a_real_time_run_counts_every_timeout() {
    // Structure only: every frame's timeout is recorded once, whatever
    // the machine's timing.
    let mut p = syntax::build("synthetic size=160x120 fps=200 frames=10 ! edge ! null").unwrap();
    let end = p
        .run(&mut WallClock::new(), Some(Instant::from_millis(5000)))
        .unwrap();
    assert_eq!(end, RunEnd::Finished);
    // Ten frames, and the source's last timeout finds it ended.
    assert_eq!(p.lateness().total(), 10);
    assert_eq!(p.counter(2, "frames"), Some(10));
}

/// A camera and a viewer whose consumer is a pipeline, through an ATM
/// switch in the engine (virtual time):
/// `camera ──(0) switch (1)── viewer`.
mod on_a_network {
    use super::*;
    use aurora_engine::{Engine, LinkSpec};
    use aurora_net::switch::AtmSwitch;
    use aurora_video::client::ClientConfig;
    use aurora_video::command::{Frames, VideoRequest};
    use aurora_video::pipeline::PipelineViewer;
    use aurora_video::vidboard::{ControlChannel, Vidboard, VidboardConfig};
    use aurora_wire::cell::{Format, VcId};

    const OC3: f64 = 353_207.5;
    const CAM: ControlChannel = ControlChannel {
        command: VcId::new(0, 32),
        reply: VcId::new(0, 33),
    };
    const CAM_VIDEO: VcId = VcId::new(0, 100);
    const CMD: VcId = VcId::new(0, 40);
    const REPLY: VcId = VcId::new(0, 41);
    const VIDEO: VcId = VcId::new(0, 200);

    fn viewer_run(work_ms: i64) -> (u64, u64, u64, u64) {
        let mut sim = Engine::new(1);
        let cam = Vidboard::new(
            VidboardConfig {
                format: Format::Uni,
                line_rate: OC3,
                channels: vec![CAM],
            },
            Box::new(SyntheticSource::new(3)),
        )
        .unwrap();
        let mut sw = AtmSwitch::new(2, Format::Uni);
        sw.add_vc(1, CMD, 0, CAM.command).unwrap();
        sw.add_vc(0, CAM.reply, 1, REPLY).unwrap();
        sw.add_vc(0, CAM_VIDEO, 1, VIDEO).unwrap();
        let request = VideoRequest {
            size: PictureSize::Half,
            format: PixelFormat::Mono8,
            lines_per_tframe: 16,
            cells_per_burst: 56,
            interburst: Duration::ZERO,
            interframe: Duration::ZERO,
            dest: CAM_VIDEO,
            frames: Frames::OnRequest,
        };
        let viewer = PipelineViewer::new(
            ClientConfig::new(CMD, REPLY, VIDEO, request),
            vec![
                Box::new(Busy::new(Duration::from_millis(work_ms))),
                Box::new(NullSink::new()),
            ],
            1,
        )
        .unwrap();
        let cam = sim.add_node(cam);
        let sw = sim.add_node(sw);
        let v = sim.add_node(viewer);
        let link = || LinkSpec::clean(OC3, Duration::from_micros(5), 8192);
        sim.connect((cam, 0), (sw, 0), link()).unwrap();
        sim.connect((v, 0), (sw, 1), link()).unwrap();
        sim.run_until(Instant::from_millis(2000));
        let v = sim.node::<PipelineViewer>(v).unwrap();
        assert!(v.error().is_none(), "{:?}", v.error());
        let c = v.client().counters();
        (
            v.pipeline().stats(2).unwrap().received,
            c.frame_requests,
            c.frames_complete,
            v.client().rx_stats().tframes_lost(),
        )
    }

    #[test]
    fn the_viewers_pipeline_sets_the_cameras_pace_through_the_network() {
        // A pipeline that keeps up gets the camera's 30 frames a second; one
        // taking 100 ms a frame gets 10, and the camera is asked for no
        // more than that.
        let (fast, fast_requests, fast_whole, lost) = viewer_run(0);
        assert!((55..=60).contains(&fast), "{fast} frames");
        assert!(fast_requests <= fast + 4 && fast_whole <= fast_requests);
        assert_eq!(lost, 0);
        let (slow, slow_requests, slow_whole, lost) = viewer_run(100);
        assert!((18..=20).contains(&slow), "{slow} frames");
        // Asked for: what reached the end, plus one frame in `busy`, one
        // in the queue before it, one in the feed's slot and one on its
        // way: nothing queues beyond the pipeline's own bounds.
        assert!(slow_requests <= slow + 4, "{slow_requests} requests");
        assert!(slow_whole <= slow_requests);
        assert_eq!(lost, 0);
    }
}
