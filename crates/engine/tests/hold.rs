//! A receiver that holds its input: frames wait in the sender's output
//! port, and are dropped there by that port's rule when it is full.

use std::sync::{Arc, Mutex};

use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_net::{Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;

/// One cell per line cell time.
const RATE: f64 = 1_000_000.0;
const CELL: Duration = Duration::from_micros(1);

/// Sends `count` numbered cells on port 0, one every `every`.
struct Sender {
    next: u64,
    count: u64,
    every: Duration,
}

impl Node for Sender {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, _: Instant, _: PortId, _: &[CellBytes], _: &mut Outbox) {}
    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        while self.next < self.count && self.at(self.next) <= now {
            let mut c = [0u8; 53];
            c[5..13].copy_from_slice(&self.next.to_be_bytes());
            out.push(0, c);
            self.next += 1;
        }
    }
    fn poll_at(&self) -> Option<Instant> {
        (self.next < self.count).then(|| self.at(self.next))
    }
}

impl Sender {
    fn at(&self, i: u64) -> Instant {
        Instant::ZERO + Duration::from_nanos(self.every.as_nanos() * i as i64)
    }
}

/// Takes `work` over each cell, one after another, and (if `hold`) asks
/// that nothing arrive before it has done the work it has.
struct Receiver {
    hold: bool,
    work: Duration,
    free: Instant,
    /// The most cells it had waiting (counting the one being worked on).
    backlog: i64,
    arrivals: Vec<(Instant, u64)>,
}

impl Node for Receiver {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        for c in cells {
            let n = u64::from_be_bytes(c[5..13].try_into().unwrap());
            self.arrivals.push((now, n));
            self.free = self.free.max(now) + self.work;
            let w = self.work.as_nanos();
            let waiting = ((self.free - now).as_nanos() + w - 1) / w;
            self.backlog = self.backlog.max(waiting);
        }
        if self.hold {
            out.hold_input(port, self.free);
        }
    }
    fn poll(&mut self, _: Instant, _: &mut Outbox) {}
    fn poll_at(&self) -> Option<Instant> {
        None
    }
    fn holds_input(&self) -> bool {
        self.hold
    }
}

fn receiver(hold: bool, work: Duration) -> Receiver {
    Receiver {
        hold,
        work,
        free: Instant::ZERO,
        backlog: 0,
        arrivals: Vec::new(),
    }
}

struct Run {
    arrivals: Vec<(Instant, u64)>,
    backlog: i64,
    drops: Vec<(NodeId, PortId, &'static str)>,
    offered: u64,
    overflow: u64,
}

fn run(hold: bool, buffer: usize, delay: Duration) -> Run {
    let mut sim = Engine::new(1);
    let tx = sim.add_node(Sender {
        next: 0,
        count: 200,
        every: CELL,
    });
    let rx = sim.add_node(receiver(hold, Duration::from_micros(10)));
    sim.connect((tx, 0), (rx, 0), LinkSpec::clean(RATE, delay, buffer))
        .unwrap();
    let drops = Arc::new(Mutex::new(Vec::new()));
    let d = drops.clone();
    sim.set_drop_tap(Box::new(move |_, at, why, _| {
        d.lock().unwrap().push((NodeId(at.node), at.port, why));
    }));
    sim.run_until(Instant::ZERO + Duration::from_millis(10));
    assert_eq!(sim.in_flight(), 0);
    let mut left = 0;
    sim.for_each_in_flight(&mut |_, _, _| left += 1);
    assert_eq!(left, 0, "nothing still waits");
    let c = sim.link(tx, 0).unwrap();
    sim.clear_drop_tap();
    let drops = drops.lock().unwrap().clone();
    let r = sim.node::<Receiver>(rx).unwrap();
    Run {
        arrivals: r.arrivals.clone(),
        backlog: r.backlog,
        drops,
        offered: c.offered,
        overflow: c.overflow,
    }
}

#[test]
fn a_held_input_keeps_frames_in_the_senders_port_and_drops_them_there() {
    let delay = Duration::from_micros(5);
    // Not held: every cell arrives, at the line's pace.
    let free = run(false, 20, delay);
    assert_eq!(free.arrivals.len(), 200);
    assert!(free.drops.is_empty());
    // Held: a cell at most every 10 us, the rest wait in the sender's
    // port (20 cells) and are tail-dropped there.
    let held = run(true, 20, delay);
    assert_eq!(held.offered, 200);
    assert!(held.overflow > 0);
    assert_eq!(held.drops.len() as u64, held.overflow);
    for &(node, port, why) in &held.drops {
        assert_eq!((node, port, why), (NodeId(0), 0, "tail_drop"));
    }
    // The books balance: every cell sent arrived or was dropped there.
    assert_eq!(held.arrivals.len() as u64 + held.overflow, 200);
    // In order; the receiver's backlog is at most what was on the wire
    // when it asked to hold (a crossing's worth of line, 6 cells) and one
    // more: the line starts a cell one crossing before the hold ends.
    for w in held.arrivals.windows(2) {
        assert!(w[0].1 < w[1].1);
    }
    assert!(held.backlog <= 8, "{}", held.backlog);
    assert!(free.backlog > 100, "{}", free.backlog);
    // About one cell per 10 us for as long as the sender sent (200 us),
    // and the port's 20 after.
    let n = held.arrivals.len();
    assert!((30..=50).contains(&n), "{n}");
    // A bigger port keeps more and drops fewer.
    let big = run(true, 100, delay);
    assert!(big.overflow < held.overflow);
    assert_eq!(big.arrivals.len() as u64 + big.overflow, 200);
}

#[test]
fn the_plan_never_cuts_a_link_into_a_node_that_holds() {
    for hold in [false, true] {
        let mut sim = Engine::new(1);
        let tx = sim.add_node(Sender {
            next: 0,
            count: 0,
            every: CELL,
        });
        let rx = sim.add_node(receiver(hold, CELL));
        let long = LinkSpec::clean(RATE, Duration::from_millis(1), 10);
        sim.connect((tx, 0), (rx, 0), long).unwrap();
        let home = sim.plan(2, Duration::ZERO);
        assert_eq!(home[0] == home[1], hold, "{home:?}");
    }
}

/// A FIFO of `n` waiting frames that names its drops `refused_here`.
struct Small {
    q: std::collections::VecDeque<CellBytes>,
    n: usize,
}

impl aurora_engine::port::Port<CellBytes> for Small {
    fn enqueue(
        &mut self,
        frame: CellBytes,
        _: Instant,
        _: usize,
    ) -> Result<(), (CellBytes, &'static str)> {
        if self.q.len() >= self.n {
            return Err((frame, "refused_here"));
        }
        self.q.push_back(frame);
        Ok(())
    }
    fn dequeue(&mut self, _: Instant) -> Option<CellBytes> {
        self.q.pop_front()
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn for_each(&self, f: &mut dyn FnMut(&CellBytes)) {
        self.q.iter().for_each(f);
    }
}

#[test]
fn a_held_line_under_a_discipline_drops_by_its_rule() {
    let mut sim = Engine::new(1);
    let tx = sim.add_node(Sender {
        next: 0,
        count: 200,
        every: CELL,
    });
    let rx = sim.add_node(receiver(true, Duration::from_micros(10)));
    let spec = LinkSpec::clean(RATE, Duration::from_micros(5), 4096);
    sim.connect((tx, 0), (rx, 0), spec).unwrap();
    sim.set_port(
        tx,
        0,
        Box::new(Small {
            q: Default::default(),
            n: 10,
        }),
    )
    .unwrap();
    let why = Arc::new(Mutex::new(Vec::new()));
    let w = why.clone();
    sim.set_drop_tap(Box::new(move |_, at, r, _| {
        w.lock().unwrap().push((at.node, at.port, r));
    }));
    sim.run_until(Instant::ZERO + Duration::from_millis(10));
    sim.clear_drop_tap();
    let c = sim.link(tx, 0).unwrap();
    let got = sim.node::<Receiver>(rx).unwrap().arrivals.len() as u64;
    let why = why.lock().unwrap();
    assert!(c.overflow > 0);
    assert_eq!(why.len() as u64, c.overflow);
    assert!(why.iter().all(|&w| w == (0, 0, "refused_here")));
    assert_eq!(got + c.overflow, 200);
    assert!(sim.node::<Receiver>(rx).unwrap().backlog <= 8);
}
