//! External link ends: a node's output leaves the engine through a sink,
//! comes back through the paired source, and its PDUs arrive intact.

use std::sync::{Arc, Mutex};

use aurora_engine::{Engine, LinkSpec};
use aurora_link::ring::in_process;
use aurora_net::traffic::{Flow, TrafficHost};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};

const OC3: f64 = 353_207.5;
const VC: VcId = VcId::new(0, 100);

fn sender(count: u64, every_us: i64) -> TrafficHost {
    let mut h = TrafficHost::new(Format::Uni);
    h.add_flow(Flow {
        id: 1,
        vc: VC,
        sdu_len: 1000,
        count,
        start: Instant::from_micros(10),
        interval: Duration::from_micros(every_us),
    })
    .unwrap();
    h
}

fn receiver() -> TrafficHost {
    let mut h = TrafficHost::new(Format::Uni);
    h.expect(VC);
    h
}

#[test]
fn pdus_cross_from_one_engine_to_another_through_a_ring() {
    let (tx, rx) = in_process(1 << 14);
    let mut a = Engine::new(1);
    let h1 = a.add_node(sender(200, 50));
    let spec = LinkSpec::clean(OC3, Duration::from_micros(20), 4096);
    a.connect_external((h1, 0), spec, Box::new(tx)).unwrap();
    let mut b = Engine::new(2);
    let h2 = b.add_node(receiver());
    b.add_external_input((h2, 0), Box::new(rx)).unwrap();
    let seen = Arc::new(Mutex::new(0u64));
    let s = seen.clone();
    b.set_tap(Box::new(move |_, _, port, _| {
        assert_eq!(port, 0);
        *s.lock().unwrap() += 1;
    }));
    let mut t = Instant::ZERO;
    while t < Instant::from_millis(30) {
        t += Duration::from_micros(100);
        a.run_until(t);
        b.run_until(t);
        b.poll_external();
    }
    let r = b.node::<TrafficHost>(h2).unwrap().received(VC);
    assert_eq!(r.delivered, 200, "{r:?}");
    assert_eq!((r.missing, r.corrupted), (0, 0));
    let out = a.link(h1, 0).unwrap();
    assert_eq!(out.delivered, out.offered);
    assert_eq!(a.external_output(h1, 0).unwrap().refused, 0);
    let cells = b.external_input(h2, 0).unwrap().cells_delivered;
    assert_eq!(cells, out.offered);
    assert_eq!(*seen.lock().unwrap(), cells);
}

#[test]
fn a_wall_clock_run_polls_its_external_input_on_one_worker_or_two() {
    for split in [false, true] {
        // One engine whose sender's output comes back to its receiver
        // through a ring outside the engine; split, each end of the ring
        // is polled by the worker that runs its node.
        let (tx, rx) = in_process(1 << 12);
        let mut e = Engine::new(3);
        let h1 = e.add_node(sender(100, 200));
        let h2 = e.add_node(receiver());
        let spec = LinkSpec::clean(OC3, Duration::from_micros(20), 4096);
        e.connect_external((h1, 0), spec, Box::new(tx)).unwrap();
        e.add_external_input((h2, 0), Box::new(rx)).unwrap();
        if split {
            e.partition(&[0, 1]).unwrap();
            assert_eq!(e.workers(), 2);
        }
        let mut wall = e.wall_clock(false);
        let mut t = Instant::ZERO;
        while t < Instant::from_millis(40) {
            t += Duration::from_millis(10);
            e.run_wall(t, &mut wall);
        }
        let r = e.node::<TrafficHost>(h2).unwrap().received(VC);
        assert_eq!(r.delivered, 100, "split {split}: {r:?}");
        assert_eq!((r.missing, r.corrupted), (0, 0));
        let out = e.link(h1, 0).unwrap();
        assert_eq!(out.delivered, out.offered, "split {split}");
        let ext = e.external_output(h1, 0).unwrap();
        assert_eq!(ext.refused, 0);
        assert_eq!(ext.link.cells_out, out.delivered);
        assert_eq!(
            e.external_input(h2, 0).unwrap().cells_delivered,
            out.offered
        );
        // Each read of the ring was timed, in h2's lateness.
        let l = wall.lateness(None);
        assert!(l.nodes[h2.0 as usize].inputs.count() > 0, "split {split}");
        assert_eq!(l.nodes[h1.0 as usize].inputs.count(), 0);
    }
}

/// Cells that waited in a link before the engine read them reach their
/// node late, though every event of the run was on time: a wall-clock run
/// counts the wait in the node's lateness, and its verdict says so.
#[test]
fn cells_left_waiting_in_a_link_make_a_wall_clock_run_unfaithful() {
    const LEFT: std::time::Duration = std::time::Duration::from_millis(30);
    let (tx, rx) = in_process(1 << 12);
    // The reading engine joins the ring first, as a process that makes
    // its rings does.
    let mut b = Engine::new(2);
    let h2 = b.add_node(receiver());
    b.add_external_input((h2, 0), Box::new(rx)).unwrap();
    // Another engine (in virtual time, so at once) writes 20 PDUs.
    let mut a = Engine::new(1);
    let h1 = a.add_node(sender(20, 20));
    let spec = LinkSpec::clean(OC3, Duration::from_micros(20), 4096);
    a.connect_external((h1, 0), spec, Box::new(tx)).unwrap();
    a.run_until(Instant::from_millis(2));
    a.poll_external();
    let written = a.external_output(h1, 0).unwrap().link.cells_out;
    assert!(written > 0);
    // This one starts reading later.
    std::thread::sleep(LEFT);
    let mut wall = b.wall_clock(false);
    b.run_wall(Instant::from_millis(5), &mut wall);
    assert_eq!(
        b.node::<TrafficHost>(h2).unwrap().received(VC).delivered,
        20
    );
    let l = wall.lateness(Some(std::time::Duration::from_millis(5)));
    let n = &l.nodes[h2.0 as usize];
    assert!(
        n.inputs.max() >= LEFT.as_nanos() as u64,
        "{:?}",
        n.inputs.max()
    );
    assert!(n.late_inputs >= 1);
    let v = l.verdict(&|i| format!("n{i}"), "advice");
    assert!(!v.faithful, "{}", v.sentence);
    let p = n.problem().unwrap();
    assert!(
        p.contains("read ") && p.contains("from other processes"),
        "{p}"
    );
}

/// Split between two workers with a link between them as well as
/// external I/O at both ends: h1's cells reach sw over the engine's own
/// (cut) link, sw sends them out of the engine, and they come back to h2
/// on the other worker. Nothing is lost, and each worker kept its own I/O.
#[test]
fn a_split_engine_carries_external_io_on_both_workers() {
    let (tx, rx) = in_process(1 << 14);
    let mut e = Engine::new(5);
    let h1 = e.add_node(sender(200, 100));
    let sw = e.add_node(aurora_net::switch::AtmSwitch::new(2, Format::Uni));
    let h2 = e.add_node(receiver());
    e.node_mut::<aurora_net::switch::AtmSwitch>(sw)
        .unwrap()
        .add_vc(0, VC, 1, VC)
        .unwrap();
    // A 1 ms link between h1 and sw: long enough to be cut.
    e.connect(
        (h1, 0),
        (sw, 0),
        LinkSpec::clean(OC3, Duration::from_millis(1), 4096),
    )
    .unwrap();
    let spec = LinkSpec::clean(OC3, Duration::from_micros(20), 4096);
    e.connect_external((sw, 1), spec, Box::new(tx)).unwrap();
    e.add_external_input((h2, 0), Box::new(rx)).unwrap();
    e.partition(&[0, 1, 0]).unwrap();
    assert_eq!(
        e.lookahead().map(|d| d >= Duration::from_millis(1)),
        Some(true)
    );
    let mut wall = e.wall_clock(false);
    let mut t = Instant::ZERO;
    while t < Instant::from_millis(60) {
        t += Duration::from_millis(10);
        e.run_wall(t, &mut wall);
    }
    let r = e.node::<TrafficHost>(h2).unwrap().received(VC);
    assert_eq!(r.delivered, 200, "{r:?}");
    assert_eq!((r.missing, r.corrupted), (0, 0));
    let out = e.link(sw, 1).unwrap();
    assert_eq!(out.delivered, out.offered);
    assert_eq!(out.offered, e.link(h1, 0).unwrap().delivered);
    let ext = e.external_output(sw, 1).unwrap();
    assert_eq!((ext.refused, ext.link.cells_out), (0, out.delivered));
    assert_eq!(
        e.external_input(h2, 0).unwrap().cells_delivered,
        out.offered
    );
    assert_eq!(e.in_flight(), 0);
}

#[test]
fn a_full_sink_drops_are_counted_and_shown() {
    // A ring nobody reads: what does not fit is refused, never lost quietly.
    let (tx, _rx) = in_process(64);
    let mut e = Engine::new(4);
    let h1 = e.add_node(sender(10, 10));
    let spec = LinkSpec::clean(OC3, Duration::ZERO, 4096);
    e.connect_external((h1, 0), spec, Box::new(tx)).unwrap();
    let drops = Arc::new(Mutex::new(Vec::new()));
    let d = drops.clone();
    e.set_drop_tap(Box::new(move |_, place, why, _| {
        d.lock().unwrap().push((place.node, place.port, why));
    }));
    e.run_until(Instant::from_millis(5));
    let out = e.link(h1, 0).unwrap();
    let ext = e.external_output(h1, 0).unwrap();
    assert!(ext.refused > 0);
    assert_eq!(ext.refused + ext.link.cells_out, out.delivered);
    let drops = drops.lock().unwrap();
    assert_eq!(drops.len() as u64, ext.refused);
    assert!(drops
        .iter()
        .all(|&(n, p, why)| n == 0 && p == 0 && why == "peer_full"));
}

#[test]
fn an_external_link_can_draw_the_stream_it_has_in_the_whole_network() {
    let spec = LinkSpec {
        loss: 0.2,
        bit_error: 0.01,
        ..LinkSpec::clean(OC3, Duration::from_micros(20), 4096)
    };
    // The whole network: h1's output is direction 1 (h2's is 0).
    let mut whole = Engine::new(7);
    let h1 = whole.add_node(sender(100, 50));
    let h2 = whole.add_node(receiver());
    whole.connect((h2, 0), (h1, 0), spec).unwrap();
    // h1 alone, its output external, drawing direction 1's stream.
    let (tx, rx) = in_process(1 << 14);
    let mut part = Engine::new(7);
    let p1 = part.add_node(sender(100, 50));
    part.connect_external((p1, 0), spec, Box::new(tx)).unwrap();
    part.set_stream(p1, 0, 1).unwrap();
    let end = Instant::from_millis(20);
    whole.run_until(end);
    part.run_until(end);
    let (a, b) = (whole.link(h1, 0).unwrap(), part.link(p1, 0).unwrap());
    assert!(a.lost > 0 && a.errored > 0, "{a:?}");
    assert_eq!(a, b);
    drop(rx);
    assert!(part.set_stream(p1, 0, 1).is_err(), "only before the run");
}

/// A stream set before the engine is split keeps after it: an inner link
/// (h1 to sw, cut between two workers) drawing direction 5's stream loses
/// and damages the same cells split as whole.
#[test]
fn a_stream_set_before_a_split_survives_it() {
    let spec = LinkSpec {
        loss: 0.2,
        bit_error: 0.01,
        ..LinkSpec::clean(OC3, Duration::from_millis(1), 4096)
    };
    let run = |split: bool| {
        let mut e = Engine::new(7);
        let h1 = e.add_node(sender(100, 50));
        let h2 = e.add_node(receiver());
        e.connect((h1, 0), (h2, 0), spec).unwrap();
        e.set_stream(h1, 0, 5).unwrap();
        if split {
            e.partition(&[0, 1]).unwrap();
            assert_eq!(e.workers(), 2);
        }
        e.run_until(Instant::from_millis(20));
        e.link(h1, 0).unwrap()
    };
    let (whole, split) = (run(false), run(true));
    assert!(whole.lost > 0 && whole.errored > 0, "{whole:?}");
    assert_eq!(whole, split);
}

/// With external I/O anywhere, no worker keeps a trace digest, not even
/// one whose own nodes have none: h3 (on worker 0, no I/O) receives what
/// sw (on worker 1, with an external output) forwards, and the trace stays
/// that of an engine that delivered nothing.
#[test]
fn a_split_engine_with_external_io_keeps_no_trace_digest() {
    let (tx, _rx) = in_process(1 << 14);
    let mut e = Engine::new(6);
    let h1 = e.add_node(sender(50, 100));
    let sw = e.add_node(aurora_net::switch::AtmSwitch::new(3, Format::Uni));
    let h3 = e.add_node(receiver());
    e.node_mut::<aurora_net::switch::AtmSwitch>(sw)
        .unwrap()
        .add_vc(0, VC, 2, VC)
        .unwrap();
    let long = LinkSpec::clean(OC3, Duration::from_millis(1), 4096);
    e.connect((h1, 0), (sw, 0), long).unwrap();
    e.connect((sw, 2), (h3, 0), long).unwrap();
    e.connect_external((sw, 1), long, Box::new(tx)).unwrap();
    e.partition(&[0, 1, 0]).unwrap();
    let nothing = e.trace_hash();
    e.run_until(Instant::from_millis(20));
    let r = e.node::<TrafficHost>(h3).unwrap().received(VC);
    assert_eq!(r.delivered, 50, "{r:?}");
    assert_eq!(e.trace_hash(), nothing);
}

/// A host adapter: each packet its local host sends becomes ten cells on
/// port 0.
struct Adapter;

impl aurora_net::Node for Adapter {
    fn ports(&self) -> usize {
        1
    }
    fn receive(
        &mut self,
        _now: Instant,
        _port: aurora_net::PortId,
        _cells: &[aurora_wire::CellBytes],
        _out: &mut aurora_net::Outbox,
    ) {
    }
    fn poll(&mut self, _now: Instant, _out: &mut aurora_net::Outbox) {}
    fn poll_at(&self) -> Option<Instant> {
        None
    }
    fn packet_port(&mut self) -> Option<&mut dyn aurora_net::PacketPort> {
        Some(self)
    }
}

impl aurora_net::PacketPort for Adapter {
    fn host_sent(&mut self, _now: Instant, _pkt: &[u8], out: &mut aurora_net::Outbox) {
        for _ in 0..10 {
            out.push(0, [0x11; 53]);
        }
    }
    fn drain_to_host(&mut self, _f: &mut dyn FnMut(&[u8])) {}
    fn to_host_len(&self) -> usize {
        0
    }
}

/// A local host with packets to send for ever.
struct Endless;

impl aurora_engine::io::PacketDevice for Endless {
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        buf[..100].fill(7);
        Ok(Some(100))
    }
    fn send(&mut self, _pkt: &[u8]) -> std::io::Result<bool> {
        Ok(true)
    }
}

/// Runs `e` for `steps` steps of 10 µs from time 0, its external I/O
/// polled before and after each.
fn drive(e: &mut Engine, steps: u32) {
    let mut t = Instant::ZERO;
    for _ in 0..steps {
        t += Duration::from_micros(10);
        e.poll_external();
        e.run_until(t);
        e.poll_external();
    }
}

/// A host adapter whose link leads to another process takes packets from
/// its host only while less than half of what that process can be sent
/// waits for it: with the far end not reading, it stops before the ring
/// refuses anything, and the packets it did not take wait in the host.
#[test]
fn a_host_adapter_stops_taking_packets_while_the_ring_to_its_peer_is_half_full() {
    let (tx, _rx) = in_process(256);
    let mut e = Engine::new(1);
    let h = e.add_node(Adapter);
    // A line fast enough to empty the port into the ring at once, and a
    // port buffer bigger than the ring.
    let spec = LinkSpec::clean(1e12, Duration::ZERO, 100_000);
    e.connect_external((h, 0), spec, Box::new(tx)).unwrap();
    e.set_packet_device(h, Box::new(Endless)).unwrap();
    drive(&mut e, 200);
    let read = e.device_counters(h).unwrap().from_device;
    let out = e.external_output(h, 0).unwrap();
    assert_eq!(out.refused, 0, "the ring refused cells: {out:?}");
    // 128 cells (half the ring) at 10 a packet, and the batch under way
    // when the port looked half full.
    assert!((13..=30).contains(&read), "{read} packets read");
}

/// A host adapter takes packets from its host only while its port is
/// under half full in bytes too, when the port bounds them: on a slow
/// line it stops before the port drops anything, though the port's bound
/// in frames is far off.
#[test]
fn a_host_adapter_stops_taking_packets_while_its_port_is_half_full_of_bytes() {
    let run = |bytes: Option<usize>| {
        let mut e = Engine::new(1);
        let h = e.add_node(Adapter);
        let sink = e.add_node(Adapter);
        // 1,000 cells a second; 100,000 frames; 20 cells of bytes, or none.
        let spec = LinkSpec {
            buffer_bytes: bytes,
            ..LinkSpec::clean(1e3, Duration::ZERO, 100_000)
        };
        e.connect_oneway((h, 0), (sink, 0), spec).unwrap();
        e.set_packet_device(h, Box::new(Endless)).unwrap();
        drive(&mut e, 500);
        (
            e.device_counters(h).unwrap().from_device,
            e.link(h, 0).unwrap().overflow,
        )
    };
    // Two packets (19 cells waiting, one on the line), then one more for
    // each ten cells the line sends: nothing dropped.
    let (read, dropped) = run(Some(20 * 53));
    assert_eq!(dropped, 0);
    assert!((2..=4).contains(&read), "{read} packets read");
    // Bounded in frames only, it reads on until half of 100,000 wait.
    let (read, _) = run(None);
    assert!(read > 100, "{read} packets read");
}

/// A sink that takes its time over its first batch (as a process that
/// loses the CPU while handing cells over would).
struct SlowOnce {
    inner: Box<dyn aurora_link::CellSink>,
    slept: bool,
}

impl aurora_engine::io::ExternalSink<aurora_wire::CellBytes> for SlowOnce {
    fn send(&mut self, frames: &[aurora_wire::CellBytes]) -> Result<usize, aurora_link::LinkError> {
        if !self.slept {
            self.slept = true;
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        self.inner.send(frames)
    }
}

/// Cells handed to another process late (here: behind a batch whose
/// hand-over took 30 ms) are late though their delivery events ran on
/// time: a wall-clock run counts the hand-over's lateness in the sending
/// node's.
#[test]
fn cells_handed_to_another_process_late_count_in_the_senders_lateness() {
    let (tx1, _rx1) = in_process(1 << 12);
    let (tx2, _rx2) = in_process(1 << 12);
    // One cell each, sent at the same time: nothing after it to be late.
    let one_cell = || {
        let mut h = TrafficHost::new(Format::Uni);
        h.add_flow(Flow {
            id: 1,
            vc: VC,
            sdu_len: 8,
            count: 1,
            start: Instant::from_micros(10),
            interval: Duration::from_micros(100),
        })
        .unwrap();
        h
    };
    let mut e = Engine::new(6);
    let h1 = e.add_node(one_cell());
    let h2 = e.add_node(one_cell());
    let spec = LinkSpec::clean(OC3, Duration::from_micros(20), 4096);
    let slow = SlowOnce {
        inner: Box::new(tx1),
        slept: false,
    };
    e.connect_external_frames((h1, 0), spec, Box::new(slow))
        .unwrap();
    e.connect_external((h2, 0), spec, Box::new(tx2)).unwrap();
    let mut wall = e.wall_clock(false);
    e.run_wall(Instant::from_millis(5), &mut wall);
    let l = wall.lateness(None);
    let (n1, n2) = (&l.nodes[h1.0 as usize], &l.nodes[h2.0 as usize]);
    // Both cells were delivered to the sinks at the same model time; h2's
    // was handed over after h1's slow one.
    assert_eq!(e.external_output(h2, 0).unwrap().link.cells_out, 1);
    assert!(n2.events.max() >= 30_000_000, "{}", n2.events.max());
    assert!(
        n1.events.max() + 25_000_000 < n2.events.max(),
        "{} {}",
        n1.events.max(),
        n2.events.max()
    );
    assert!(n2.problem().is_some());
}

/// What crosses an engine's edge is shown to its boundary tap, out and in,
/// and what is left unread when a process stops can be read out: the cells
/// one engine handed over are those the other read, plus those it left.
#[test]
fn the_boundary_tap_sees_what_crosses_and_a_drain_what_was_left() {
    use aurora_net::accounting::{Place, Side};
    let (tx, rx) = in_process(1 << 14);
    let mut a = Engine::new(1);
    let h1 = a.add_node(sender(50, 20));
    let spec = LinkSpec::clean(OC3, Duration::from_micros(20), 4096);
    a.connect_external((h1, 0), spec, Box::new(tx)).unwrap();
    let mut b = Engine::new(2);
    let h2 = b.add_node(receiver());
    b.add_external_input((h2, 0), Box::new(rx)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    for (e, s) in [(&mut a, seen.clone()), (&mut b, seen.clone())] {
        e.set_boundary_tap(Box::new(move |place: Place, cells| {
            s.lock().unwrap().push((place, cells.len() as u64))
        }));
    }
    let mut t = Instant::ZERO;
    while t < Instant::from_millis(2) {
        t += Duration::from_micros(100);
        a.run_until(t);
        a.poll_external();
        b.run_until(t);
        b.poll_external();
    }
    // a goes on; b stops reading.
    a.run_until(Instant::from_millis(5));
    a.poll_external();
    let mut left = 0;
    b.drain_external_inputs(1 << 20, &mut |place, cells| {
        assert_eq!((place.node, place.port, place.side), (h2.0, 0, Side::In));
        left += cells.len() as u64;
    });
    let seen = seen.lock().unwrap();
    let sum = |side| {
        seen.iter()
            .filter(|(p, _)| p.side == side)
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let (out, read) = (sum(Side::Out), sum(Side::In));
    assert_eq!(out, a.external_output(h1, 0).unwrap().link.cells_out);
    assert!(read > 0 && left > 0, "{read} {left}");
    assert_eq!(out, read + left);
    assert_eq!(
        read,
        b.external_input(h2, 0).unwrap().cells_delivered - left
    );
}
