//! A FIFO port on a fixed-rate line is computed in closed form (no event
//! per cell): it must hold, refuse, space and deliver cells exactly as a
//! FIFO pulled by its line would.

use aurora_engine::{Engine, LinkSpec};
use aurora_net::{Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;

/// Sends `burst` cells on port 0 at each of `times`.
struct Burster {
    times: Vec<Instant>,
    burst: u8,
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
                c[52] = i;
                out.push(0, c);
            }
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        self.times.first().copied()
    }
}

/// Records when each cell arrived.
#[derive(Default)]
struct Recorder(Vec<(Instant, u8)>);

impl Node for Recorder {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, now: Instant, _: PortId, cells: &[CellBytes], _: &mut Outbox) {
        self.0.extend(cells.iter().map(|c| (now, c[52])));
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
    let got: Vec<(i64, u8)> = rec.0.iter().map(|(t, i)| (t.as_nanos(), *i)).collect();
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
