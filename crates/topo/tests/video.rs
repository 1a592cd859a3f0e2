//! Cameras and viewers compiled from topology files and run in virtual
//! time: whole frames equal to the source's through a switch; the closed
//! loop shares the camera when a second viewer starts; problems reported
//! with their lines.

use aurora_time::{Duration, Instant};
use aurora_video::client::VidboardClient;
use aurora_video::vidboard::Vidboard;

/// A camera and `viewers` viewers on one switch; the camera's link at
/// `rate` cells a second.
fn topology(viewers: usize, rate: &str, extra: &str) -> String {
    let mut s = format!(
        "[[switch]]\nname = \"sw1\"\nports = {}\n\n[[camera]]\nname = \"cam\"\nseed = 11\n\n\
         [[link]]\na = \"cam\"\nb = \"sw1:0\"\nrate = \"{rate}\"\nbuffer = 128\n",
        viewers + 1
    );
    for i in 1..=viewers {
        s += &format!(
            "\n[[viewer]]\nname = \"v{i}\"\ncamera = \"cam\"\nlt = 16\ncb = 56\n\
             interburst = \"20us\"\n{extra}\n[[link]]\na = \"v{i}\"\nb = \"sw1:{i}\"\n"
        );
    }
    s
}

fn viewer<'a>(net: &'a aurora_topo::Network, name: &str) -> &'a VidboardClient {
    let id = net.hosts.iter().find(|(n, _)| n == name).unwrap().1;
    net.sim.node::<VidboardClient>(id).unwrap()
}

#[test]
fn a_viewer_through_a_switch_gets_whole_frames_equal_to_the_source() {
    let mut net = aurora_topo::load(&topology(1, "oc3", ""), 1).unwrap();
    assert_eq!(net.video.viewers.len(), 1);
    net.sim
        .run_until(Instant::ZERO + Duration::from_millis(500));
    let c = viewer(&net, "v1").counters();
    assert!(c.frames_complete >= 10, "{c:?}");
    assert_eq!(c.frames_incomplete, 0, "{c:?}");
    assert_eq!(c.frames_matching, c.frames_complete, "{c:?}");
    assert_eq!(
        (c.frames_differing, c.counter_errors, c.order_errors),
        (0, 0, 0)
    );
    let rx = viewer(&net, "v1").rx_stats();
    assert_eq!(rx.tframes_lost(), 0);
    let cam = net.video.cameras[0].node;
    let cam = net.sim.node::<Vidboard>(cam).unwrap();
    assert_eq!(cam.counters().refused_total(), 0);
}

#[test]
fn the_closed_loop_rate_halves_with_a_second_viewer() {
    // A camera link of 100,000 cells a second: a 640x480 frame takes
    // about 65 ms of it, so the line, not the camera's 30 frames a
    // second, sets the pace.
    let window = |net: &aurora_topo::Network, name: &str| {
        viewer(net, name).complete_between(
            Instant::ZERO + Duration::from_millis(200),
            Instant::ZERO + Duration::from_millis(2200),
        ) as f64
            / 2.0
    };
    let mut one = aurora_topo::load(&topology(1, "100000", ""), 1).unwrap();
    one.sim
        .run_until(Instant::ZERO + Duration::from_millis(2300));
    let alone = window(&one, "v1");
    let mut two = aurora_topo::load(&topology(2, "100000", ""), 1).unwrap();
    two.sim
        .run_until(Instant::ZERO + Duration::from_millis(2300));
    let (a, b) = (window(&two, "v1"), window(&two, "v2"));
    assert!(alone > 10.0, "{alone}");
    for shared in [a, b] {
        let ratio = shared / alone;
        assert!(
            (0.4..=0.6).contains(&ratio),
            "{alone} alone, {a} and {b} shared"
        );
    }
    for name in ["v1", "v2"] {
        let c = viewer(&two, name).counters();
        assert_eq!((c.frames_incomplete, c.frames_differing), (0, 0), "{c:?}");
    }
}

/// The switch, and the engine's counters of its port toward viewer 1.
fn port_to_v1(net: &aurora_topo::Network) -> (aurora_engine::NodeId, aurora_engine::DirCounters) {
    let sw = net.switches.iter().find(|(n, _, _)| n == "sw1").unwrap().1;
    (sw, net.sim.link(sw, 1).unwrap())
}

#[test]
fn a_host_model_costs_frames_and_its_losses_are_at_the_switch_port() {
    // The 1990s host with bursts back to back: the host holds its line,
    // the cells wait in the switch's port toward it, and those finding
    // it full are dropped there; the t-frames that lose cells are
    // counted lost.
    let text = topology(1, "oc3", "host = \"dec5000\"\n")
        .replace("interburst = \"20us\"", "interburst = \"0us\"");
    let mut net = aurora_topo::load(&text, 1).unwrap();
    let drops = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let d = drops.clone();
    net.sim.set_drop_tap(Box::new(move |_, at, why, _| {
        d.lock().unwrap().push((at.node, at.port, why));
    }));
    net.sim.run_until(Instant::ZERO + Duration::from_secs(2));
    net.sim.clear_drop_tap();
    let v = viewer(&net, "v1");
    let c = v.counters();
    // The viewer's own queue takes only the cells on the wire when it
    // holds: it never fills.
    assert_eq!(c.host_overflow, 0, "{c:?}");
    assert!(c.host_queue_max >= 1 && c.host_queue_max < 16, "{c:?}");
    assert!(v.rx_stats().tframes_lost() > 0);
    let (sw, port) = port_to_v1(&net);
    assert!(port.overflow > 0, "{port:?}");
    let drops = drops.lock().unwrap();
    assert_eq!(drops.len() as u64, port.overflow);
    assert!(drops
        .iter()
        .all(|&(n, p, why)| (n, p, why) == (sw.0, 1, "tail_drop")));
}

#[test]
fn a_port_discipline_in_front_of_a_slow_host_applies_its_rule() {
    // The same host behind a switch port under a `[[port]]` discipline:
    // the cells wait in that port, and it refuses them by its own rule,
    // at its own size, under its own reasons.
    let text = topology(1, "oc3", "host = \"dec5000\"\n")
        .replace("interburst = \"20us\"", "interburst = \"0us\"")
        + "\n[[port]]\nat = \"sw1:1\"\ndiscipline = \"drr\"\nbuffer = 300\n";
    let mut net = aurora_topo::load(&text, 1).unwrap();
    net.sim.run_until(Instant::ZERO + Duration::from_secs(2));
    let (sw, counters) = port_to_v1(&net);
    let port = net
        .sim
        .port::<aurora_engine::cell_port::CellPort>(sw, 1)
        .expect("a discipline at sw1:1");
    let refused: u64 = port.stats().iter().map(|q| q.dropped_total()).sum();
    assert!(refused > 0);
    assert_eq!(refused, counters.overflow);
    let served: u64 = port.stats().iter().map(|q| q.served).sum();
    assert!(served > 0);
    let reasons: Vec<&str> = port
        .stats()
        .iter()
        .flat_map(|q| q.dropped.iter().map(|(r, _)| *r))
        .collect();
    assert!(
        reasons
            .iter()
            .all(|r| ["port_full", "queue_full"].contains(r)),
        "{reasons:?}"
    );
    let v = viewer(&net, "v1");
    assert_eq!(v.counters().host_overflow, 0);
    assert!(v.rx_stats().tframes_lost() > 0);
}

#[test]
fn problems_in_cameras_and_viewers_are_reported_with_their_lines() {
    let text = "[[switch]]\nname = \"sw1\"\nports = 2\n\n[[camera]]\nname = \"cam\"\n\n\
                [[viewer]]\nname = \"v1\"\ncamera = \"nope\"\nlt = 0\n\n\
                [[link]]\na = \"cam\"\nb = \"sw1:0\"\nbuffer = 16\n\n\
                [[viewer]]\nname = \"v2\"\ncamera = \"cam\"\ncb = 56\n\n\
                [[link]]\na = \"v1\"\nb = \"sw1:1\"\n";
    let e = aurora_topo::load(text, 1)
        .err()
        .expect("problems")
        .to_string();
    assert!(
        e.contains("8:1: viewer \"v1\": camera \"nope\" is not a camera"),
        "{e}"
    );
    assert!(e.contains("8:1: viewer \"v1\": lt 0 is outside"), "{e}");
    assert!(
        e.contains("18:1: viewer \"v2\": cb 56 is more than the 16 cells"),
        "{e}"
    );
    assert!(e.contains("viewer \"v2\" is on no link"), "{e}");
    assert!(!e.contains("no path"), "{e}");
}

#[test]
fn a_host_given_time_between_bursts_takes_one_interrupt_a_burst_and_loses_nothing() {
    // dec5000 absorbs a 14-cell burst in 1 ms + 14 x 13.4 us (plus 1 ms
    // at a t-frame's end); 2.5 ms between bursts leaves it idle before each.
    let text = topology(1, "oc3", "host = \"dec5000\"\n")
        .replace("interburst = \"20us\"", "interburst = \"2500us\"")
        .replace("cb = 56", "cb = 14");
    let mut net = aurora_topo::load(&text, 1).unwrap();
    net.sim.run_until(Instant::ZERO + Duration::from_secs(3));
    let v = viewer(&net, "v1");
    let c = v.counters();
    assert!(c.frames_complete >= 1, "{c:?}");
    assert_eq!((c.host_overflow, c.frames_differing), (0, 0), "{c:?}");
    let cam = net.sim.node::<Vidboard>(net.video.cameras[0].node).unwrap();
    let k = cam.counters();
    // Every burst and each of the two acks one interrupt; the last burst
    // sent may still be on its way.
    let each = k.bursts + k.replies_sent;
    assert!(
        (each - 1..=each).contains(&c.host_interrupts),
        "{} interrupts, {} bursts, {} replies",
        c.host_interrupts,
        k.bursts,
        k.replies_sent
    );
}

/// The client of a pipeline viewer.
fn pipeline_viewer<'a>(
    net: &'a aurora_topo::Network,
    name: &str,
) -> &'a aurora_video::pipeline::PipelineViewer {
    let id = net.hosts.iter().find(|(n, _)| n == name).unwrap().1;
    net.sim
        .node::<aurora_video::pipeline::PipelineViewer>(id)
        .unwrap()
}

#[test]
fn a_pipeline_viewer_runs_its_pipeline_on_frames_from_the_network() {
    let extra = "size = \"160x120\"\npipeline = \"vidboard ! exercise ! ratemeter ! null\"\n";
    let mut net = aurora_topo::load(&topology(1, "oc3", extra), 1).unwrap();
    net.sim
        .run_until(Instant::ZERO + Duration::from_millis(1000));
    let v = pipeline_viewer(&net, "v1");
    assert!(v.error().is_none(), "{:?}", v.error());
    let c = v.client().counters();
    // The camera's 30 frames a second, less the first frame's set-up.
    assert!((27..=31).contains(&c.frames_complete), "{c:?}");
    assert_eq!(c.frames_matching, c.frames_complete, "{c:?}");
    assert_eq!((c.frames_incomplete, c.counter_errors), (0, 0), "{c:?}");
    let p = v.pipeline();
    // Every frame the client took went into the pipeline; all but the
    // ones still in its queues reached the sink.
    let fed = p.counter(0, "frames").unwrap();
    let sunk = p.counter(3, "frames").unwrap();
    assert!(
        fed + 1 >= c.frames_complete && fed <= c.frames_complete,
        "{fed} {c:?}"
    );
    assert!(sunk + 3 >= fed && sunk <= fed, "{sunk} {fed}");
}

#[test]
fn the_closed_loop_rate_halves_when_a_second_viewer_shares_the_workstation() {
    // examples/two-viewers.toml: two pipeline viewers whose `busy ms=100`
    // work takes turns on one workstation's processor; v2 starts at 2 s.
    let text = include_str!("../../../examples/two-viewers.toml");
    let mut net = aurora_topo::load(text, 1).unwrap();
    net.sim.run_until(Instant::ZERO + Duration::from_secs(5));
    let at = |ms: i64| Instant::ZERO + Duration::from_millis(ms);
    let rate = |name: &str, from: i64, to: i64| {
        pipeline_viewer(&net, name)
            .client()
            .complete_between(at(from), at(to)) as f64
            / ((to - from) as f64 / 1000.0)
    };
    // Alone from 0.5 s (past the set-up) to 2 s; shared from 3 s (past
    // v2's set-up and the frames its queues take at once) to 5 s.
    let alone = rate("v1", 500, 2000);
    let shared = rate("v1", 3000, 5000);
    let other = rate("v2", 3000, 5000);
    // A window of T seconds counts its frames to within one at each end:
    // alone 10 frames/s ± 1/1.5, shared 5 ± 1/2, so the ratio lies in
    // 4.5/10.67 to 5.5/9.33, inside 0.4 to 0.6.
    assert!((9.0..=11.0).contains(&alone), "{alone}");
    for s in [shared, other] {
        let ratio = s / alone;
        assert!(
            (0.4..=0.6).contains(&ratio),
            "{alone} alone, {shared} and {other} shared"
        );
    }
    for name in ["v1", "v2"] {
        let v = pipeline_viewer(&net, name);
        let c = v.client().counters();
        assert_eq!((c.frames_incomplete, c.frames_differing), (0, 0), "{c:?}");
        assert_eq!(v.client().rx_stats().tframes_lost(), 0);
    }
}

#[test]
fn mistakes_in_a_viewers_pipeline_are_reported_with_their_lines() {
    let text = "[[switch]]\nname = \"sw1\"\nports = 3\n\n[[camera]]\nname = \"cam\"\n\n\
                [[viewer]]\nname = \"v1\"\ncamera = \"cam\"\npipeline = \"vidboard ! edgy\"\n\n\
                [[viewer]]\nname = \"v2\"\ncamera = \"cam\"\npipeline = \"synthetic ! null\"\n\
                processing = \"5ms\"\n\n\
                [[viewer]]\nname = \"v3\"\ncamera = \"cam\"\nworkstation = \"ws\"\n\n\
                [[link]]\na = \"cam\"\nb = \"sw1:0\"\n\n\
                [[link]]\na = \"v1\"\nb = \"sw1:1\"\n\n\
                [[link]]\na = \"v2\"\nb = \"sw1:2\"\n";
    let e = aurora_topo::load(text, 1)
        .err()
        .expect("problems")
        .to_string();
    assert!(
        e.contains("8:1: viewer \"v1\": pipeline: element 2, `edgy`, is not a module"),
        "{e}"
    );
    assert!(
        e.contains("13:1: viewer \"v2\": pipeline: element 1 (synthetic) must be vidboard"),
        "{e}"
    );
    assert!(
        e.contains("13:1: viewer \"v2\": processing is the plain viewer's"),
        "{e}"
    );
    // A plain viewer may name a workstation (its host model and consumer
    // share it); v3's only mistake is that it is on no link.
    assert!(!e.contains("workstation is for"), "{e}");
    assert!(e.contains("19:1: viewer \"v3\" is on no link"), "{e}");
}

/// Two cameras, each watched by a viewer with the dec5000 host model
/// (640x480 mono8, LT 480, CB 56, 2.9 ms between bursts), the viewers on
/// workstation "ws" when `shared`, else each on its own.
fn two_cameras(shared: bool) -> String {
    let mut s = "[[switch]]\nname = \"sw1\"\nports = 4\n".to_string();
    for i in 1..=2 {
        s += &format!(
            "\n[[camera]]\nname = \"cam{i}\"\nseed = {i}\n\n\
             [[viewer]]\nname = \"v{i}\"\ncamera = \"cam{i}\"\nlt = 480\ncb = 56\n\
             interburst = \"2900us\"\nhost = \"dec5000\"\n{}\n\
             [[link]]\na = \"cam{i}\"\nb = \"sw1:{}\"\nbuffer = 256\n\n\
             [[link]]\na = \"v{i}\"\nb = \"sw1:{}\"\nbuffer = 1024\n",
            if shared { "workstation = \"ws\"\n" } else { "" },
            2 * i - 2,
            2 * i - 1
        );
    }
    s
}

#[test]
fn host_models_on_one_workstation_take_turns_on_its_processor() {
    // A dec5000 frame costs about 6,401 cells x 13.4 us + 115 interrupts
    // x 1 ms + 1 ms = 202 ms of the processor: apart, each viewer gets
    // frames as fast as its own processor and the 2.9 ms between bursts
    // allow (about 2.7 a second); sharing one processor they get the
    // processor's 4.9 a second between them, about 2.4 each, and nothing
    // is lost either way.
    let frames = |shared: bool| {
        let mut net = aurora_topo::load(&two_cameras(shared), 1).unwrap();
        net.sim.run_until(Instant::ZERO + Duration::from_secs(5));
        ["v1", "v2"].map(|v| {
            let c = viewer(&net, v);
            assert_eq!(c.counters().host_overflow, 0, "{v} shared {shared}");
            assert_eq!(c.rx_stats().tframes_lost(), 0, "{v} shared {shared}");
            assert_eq!(c.counters().frames_incomplete, 0, "{v} shared {shared}");
            c.complete_between(
                Instant::ZERO + Duration::from_millis(500),
                Instant::ZERO + Duration::from_secs(5),
            )
        })
    };
    let apart = frames(false);
    let shared = frames(true);
    eprintln!("apart {apart:?}, shared {shared:?}");
    // The work of the frames shared, 202 ms each, fits in the 4.5 s
    // window; apart, more frames than one processor could do.
    let work = |n: u64| n as f64 * 0.202;
    assert!(work(shared[0] + shared[1]) <= 4.5 + 0.4, "{shared:?}");
    assert!(work(apart[0] + apart[1]) > 4.5 + 0.4, "{apart:?}");
    // Turns are fair: within one frame of each other.
    assert!(shared[0].abs_diff(shared[1]) <= 1, "{shared:?}");
}
