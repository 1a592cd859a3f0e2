//! A FIFO port on a fixed-rate line is computed in closed form (no event
//! per cell): it must hold, refuse, space and deliver cells exactly as a
//! FIFO pulled by its line would.

use aurora_engine::port::{Fifo, Port};
use aurora_engine::{Engine, LinkSpec};
use aurora_net::{Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;

/// Sends `burst` cells on port 0 at each of `times`, numbered from 0 (in
/// bytes 51 and 52).
struct Burster {
    times: Vec<Instant>,
    burst: u16,
}

impl Node for Burster {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, _: Instant, _: PortId, _: &[CellBytes], _: &mut Outbox) {}
    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        while self.times.first().is_some_and(|&t| t <= now) {
            self.times.remove(0);
            for i in 0..self.burst {
                let mut c = [0u8; 53];
                c[51..53].copy_from_slice(&i.to_be_bytes());
                out.push(0, c);
            }
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        self.times.first().copied()
    }
}

/// Records when each cell arrived, and its number.
#[derive(Default)]
struct Recorder(Vec<(Instant, u16)>);

impl Node for Recorder {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, now: Instant, _: PortId, cells: &[CellBytes], _: &mut Outbox) {
        let n = |c: &CellBytes| u16::from_be_bytes([c[51], c[52]]);
        self.0.extend(cells.iter().map(|c| (now, n(c))));
    }
    fn poll(&mut self, _: Instant, _: &mut Outbox) {}
    fn poll_at(&self) -> Option<Instant> {
        None
    }
}

#[test]
fn a_burst_fills_the_buffer_then_is_refused_and_leaves_one_cell_time_apart() {
    let mut sim = Engine::new(1);
    // 1 cell per microsecond, 5 us of delay, a buffer of 4 cells (the one
    // on the line included). Bursts of 6 at 0 and at 2.5 us.
    let b = sim.add_node(Burster {
        times: vec![Instant::ZERO, Instant::ZERO + Duration::from_nanos(2_500)],
        burst: 6,
    });
    let r = sim.add_node(Recorder::default());
    let spec = LinkSpec::clean(1e6, Duration::from_micros(5), 4);
    sim.connect((b, 0), (r, 0), spec).unwrap();
    sim.run_until(Instant::ZERO + Duration::from_nanos(2_600));
    // The first burst: cells 0 to 3 fit, 4 and 5 are refused. At 2.5 us
    // cell 2 is on the line and 3 waits, so two of the second burst fit.
    // At 2.6 us: one on the line, three waiting.
    assert_eq!(sim.queued(b, 0), Some(3));
    sim.run_until(Instant::ZERO + Duration::from_micros(100));
    let c = sim.link(b, 0).unwrap();
    assert_eq!(c.offered, 12);
    assert_eq!(c.overflow, 2 + 4);
    assert_eq!(c.delivered, 6);
    assert_eq!(sim.in_flight(), 0);
    let rec = sim.node::<Recorder>(r).unwrap();
    let got: Vec<(i64, u16)> = rec.0.iter().map(|(t, i)| (t.as_nanos(), *i)).collect();
    // Cell k ends its sending at (k + 1) us and arrives 5 us later; the
    // second burst's two start when the first's four are sent.
    assert_eq!(
        got,
        vec![
            (6_000, 0),
            (7_000, 1),
            (8_000, 2),
            (9_000, 3),
            (10_000, 0),
            (11_000, 1)
        ]
    );
}

/// Last in, first out, holding `buffer` waiting cells: a discipline the
/// FIFO's closed form cannot stand for.
struct Lifo {
    stack: Vec<CellBytes>,
    buffer: usize,
}

impl Port<CellBytes> for Lifo {
    fn enqueue(
        &mut self,
        cell: CellBytes,
        _: Instant,
        _: usize,
    ) -> Result<(), (CellBytes, &'static str)> {
        if self.stack.len() >= self.buffer {
            return Err((cell, "lifo_full"));
        }
        self.stack.push(cell);
        Ok(())
    }
    fn dequeue(&mut self, _: Instant) -> Option<CellBytes> {
        self.stack.pop()
    }
    fn len(&self) -> usize {
        self.stack.len()
    }
    fn for_each(&self, f: &mut dyn FnMut(&CellBytes)) {
        self.stack.iter().for_each(f);
    }
}

#[test]
fn a_port_under_another_discipline_is_pulled_cell_by_cell_and_survives_a_split() {
    let mut sim = Engine::new(1);
    let b = sim.add_node(Burster {
        times: vec![Instant::ZERO],
        burst: 6,
    });
    let r = sim.add_node(Recorder::default());
    let spec = LinkSpec::clean(1e6, Duration::from_micros(5), 4);
    sim.connect((b, 0), (r, 0), spec).unwrap();
    let lifo = Lifo {
        stack: Vec::new(),
        buffer: 3,
    };
    sim.set_port(b, 0, Box::new(lifo)).unwrap();
    assert!(sim.set_port(b, 1, Box::new(Fifo::new(1))).is_err());
    // The discipline goes with its node when the network is split.
    sim.partition(&[0, 1]).unwrap();
    let drops = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = drops.clone();
    sim.set_drop_tap(Box::new(move |_, _, why, _| seen.lock().unwrap().push(why)));
    sim.run_until(Instant::ZERO + Duration::from_micros(100));
    // Cell 0 goes straight to the idle line; 1 to 3 wait and 4, 5 are
    // refused; the line then pulls the newest first.
    let rec = sim.node::<Recorder>(r).unwrap();
    let order: Vec<u16> = rec.0.iter().map(|(_, i)| *i).collect();
    assert_eq!(order, vec![0, 3, 2, 1]);
    let c = sim.link(b, 0).unwrap();
    assert_eq!((c.offered, c.overflow, c.delivered), (6, 2, 4));
    assert_eq!(*drops.lock().unwrap(), vec!["lifo_full", "lifo_full"]);
    assert!(
        sim.set_port(b, 0, Box::new(Fifo::new(1))).is_err(),
        "too late"
    );
}

/// The walk over frames in flight finds every cell accepted and not yet
/// delivered, whether a closed-form FIFO holds it or another discipline,
/// with its link's sending end, and in a network split between workers.
#[test]
fn the_walk_over_frames_in_flight_finds_each_cell_once() {
    for (lifo, split) in [(false, false), (true, false), (true, true)] {
        let mut sim = Engine::new(1);
        let b = sim.add_node(Burster {
            times: vec![Instant::ZERO],
            burst: 6,
        });
        let r = sim.add_node(Recorder::default());
        let spec = LinkSpec::clean(1e6, Duration::from_micros(5), 8);
        sim.connect((b, 0), (r, 0), spec).unwrap();
        if lifo {
            let port = Lifo {
                stack: Vec::new(),
                buffer: 8,
            };
            sim.set_port(b, 0, Box::new(port)).unwrap();
        }
        if split {
            sim.partition(&[0, 1]).unwrap();
        }
        let seen = |sim: &Engine| {
            let mut v = Vec::new();
            sim.for_each_in_flight(&mut |n, p, c: &CellBytes| v.push((n, p, c[52])));
            v.sort_by_key(|x| x.2);
            v
        };
        // At 3.5 us: cells 0 to 2 sent (on the wire), 3 on the line, the
        // rest waiting; none delivered.
        sim.run_until(Instant::ZERO + Duration::from_nanos(3_500));
        let v = seen(&sim);
        assert_eq!(v.len(), 6, "lifo {lifo} split {split}: {v:?}");
        assert!(v.iter().all(|&(n, p, _)| n == b && p == 0));
        let ids: Vec<u8> = v.iter().map(|x| x.2).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5]);
        // After the first arrivals (6, 7 us), four remain.
        sim.run_until(Instant::ZERO + Duration::from_nanos(7_500));
        assert_eq!(seen(&sim).len(), 4);
        sim.run_until(Instant::ZERO + Duration::from_micros(100));
        assert!(seen(&sim).is_empty());
    }
}

#[test]
fn long_runs_onto_an_empty_line_and_onto_a_busy_one_arrive_alike() {
    // Bursts of 300 cells (long enough for the engine to hand a node's
    // whole output to an empty line without copying it): at 0 (the line's
    // queue has never held a cell), at 1 ms (the line empty again), at
    // 1.1 ms (the second burst still going out: 200 of it wait, and all of
    // the third fits the buffer of 500), and two at 2 ms, a run of 600
    // onto an empty line with room for only 500 of it.
    let mut sim = Engine::new(1);
    let us = |n: i64| Instant::ZERO + Duration::from_micros(n);
    let b = sim.add_node(Burster {
        times: vec![us(0), us(1_000), us(1_100), us(2_000), us(2_000)],
        burst: 300,
    });
    let r = sim.add_node(Recorder::default());
    let spec = LinkSpec::clean(1e6, Duration::from_micros(5), 500);
    sim.connect((b, 0), (r, 0), spec).unwrap();
    sim.run_until(us(10_000));
    let c = sim.link(b, 0).unwrap();
    assert_eq!(c.offered, 300 * 5);
    assert_eq!(c.overflow, 100);
    assert_eq!(c.delivered, 300 * 5 - 100);
    assert_eq!(sim.in_flight(), 0);
    let rec = sim.node::<Recorder>(r).unwrap();
    let got: Vec<(i64, u16)> = rec.0.iter().map(|(t, i)| (t.as_nanos(), *i)).collect();
    let mut want = Vec::new();
    // Cell k of a run that starts at s arrives at s + (k + 1) us + 5 us.
    let mut at = |start: i64, n: u16| {
        for k in 0..n {
            want.push((start + (i64::from(k) + 1 + 5) * 1_000, k));
        }
    };
    at(0, 300);
    at(1_000_000, 300);
    at(1_300_000, 300);
    at(2_000_000, 300);
    at(2_300_000, 200);
    assert_eq!(got, want);
}
