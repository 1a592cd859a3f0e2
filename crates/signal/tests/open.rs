//! Opening VCs hop by hop in virtual time, across chains of 1, 3 and 6
//! VuNet relaying links: data flows once the open is done, the set-up
//! takes exactly the control cells' round trips the links model, closing
//! clears every entry and frees every VCI, and a relay that never answers
//! makes the open fail with its name, undoing what was written.

use std::sync::Arc;

use aurora_engine::{Engine, NodeId};
use aurora_net::vunet::VunetLink;
use aurora_net::{Node, Outbox, PortId};
use aurora_signal::conn::{Closer, OpenError, Opener, Path, Seq, Timing};
use aurora_signal::table::{MemTable, Owner, VciTable};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{build_cell, Header, VcId};
use aurora_wire::CellBytes;

mod common;
use common::{chain_path, setup_latency, wire, CellSink};

const KEY: &[u8] = b"host key";
const DATA: u32 = 20;

/// What the host does.
enum Phase {
    Idle,
    Opening(Opener),
    Open(aurora_signal::conn::Vc),
    Closing(Closer),
    Closed,
    Failed(OpenError),
}

/// A host that opens a VC at `start`, sends `DATA` cells on it, and
/// closes it at `close_at`.
struct Host {
    path: Path,
    table: Arc<MemTable>,
    start: Instant,
    close_at: Instant,
    phase: Phase,
    seq: Seq,
    timing: Timing,
    sent_data: bool,
    latency: Option<Duration>,
}

impl Host {
    fn push(out: &mut Outbox, cell: Option<CellBytes>) {
        if let Some(c) = cell {
            out.push(0, c);
        }
    }
}

impl Node for Host {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, now: Instant, _: PortId, cells: &[CellBytes], out: &mut Outbox) {
        for c in cells {
            match &mut self.phase {
                Phase::Opening(o) => {
                    let next = o.on_cell(c, now, &mut self.seq);
                    Host::push(out, next);
                }
                Phase::Closing(cl) => {
                    let next = cl.on_cell(c, now, &mut self.seq);
                    Host::push(out, next);
                }
                _ => {}
            }
        }
        self.settle(now, out);
    }
    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        match &mut self.phase {
            Phase::Idle if now >= self.start => {
                match Opener::start(
                    self.path.clone(),
                    Owner(1),
                    self.table.as_ref(),
                    self.timing,
                    0,
                    Some((0, KEY)),
                    &mut self.seq,
                    now,
                ) {
                    Ok((o, c)) => {
                        out.push(0, c);
                        self.phase = Phase::Opening(o);
                    }
                    Err(e) => self.phase = Phase::Failed(e),
                }
            }
            Phase::Opening(o) => {
                let next = o.poll(now, &mut self.seq);
                Host::push(out, next);
            }
            Phase::Closing(c) => {
                let next = c.poll(now, &mut self.seq);
                Host::push(out, next);
            }
            Phase::Open(vc) if now >= self.close_at => {
                let (c, cell) = Closer::start(
                    vc.clone(),
                    self.timing,
                    0,
                    Some((0, KEY)),
                    &mut self.seq,
                    now,
                )
                .unwrap();
                out.push(0, cell);
                self.phase = Phase::Closing(c);
            }
            _ => {}
        }
        self.settle(now, out);
    }
    fn poll_at(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Idle => Some(self.start),
            Phase::Opening(o) => o.poll_at(),
            Phase::Closing(c) => c.poll_at(),
            Phase::Open(_) => Some(self.close_at),
            _ => None,
        }
    }
}

impl Host {
    /// Moves on from a finished open or close.
    fn settle(&mut self, now: Instant, out: &mut Outbox) {
        match &self.phase {
            Phase::Opening(o) => match o.outcome() {
                Some(Ok(vc)) => {
                    self.latency = Some(vc.setup_latency());
                    self.phase = Phase::Open(vc.clone());
                }
                Some(Err(e)) => {
                    o.release(Owner(1), self.table.as_ref(), now).unwrap();
                    self.phase = Phase::Failed(e.clone());
                }
                None => {}
            },
            Phase::Closing(c) if c.is_done() => {
                c.release(Owner(1), self.table.as_ref(), now).unwrap();
                self.phase = Phase::Closed;
            }
            _ => {}
        }
        if let (Phase::Open(vc), false) = (&self.phase, self.sent_data) {
            for i in 0..DATA {
                let h = Header {
                    gfc: self.path.first_bits,
                    ..Header::data(VcId::new(0, vc.send_vci()))
                };
                out.push(0, build_cell(&h, &[i as u8; 48]).unwrap());
            }
            self.sent_data = true;
        }
    }
}

/// host - s0 - r0 - s1 - r1 - ... - r(n-1) - sn - dest. Switches: port 0
/// towards the host's side, 1 away from it; the host on s0's port 2, the
/// destination on sn's port 2. `dead` relays answer nothing (no key).
struct Net {
    sim: Engine,
    host: NodeId,
    dest: NodeId,
    relays: Vec<NodeId>,
    table: Arc<MemTable>,
}

fn chain(n: usize, dead: Option<usize>, close_at: Instant) -> Net {
    let mut sim = Engine::new(1);
    let table = Arc::new(MemTable::new(Default::default()));
    let host = sim.add_node(Host {
        path: chain_path(n),
        table: table.clone(),
        start: Instant::from_micros(10),
        close_at,
        phase: Phase::Idle,
        seq: Seq(0),
        timing: Timing {
            timeout: Duration::from_millis(5),
            retries: 2,
            lease: Duration::from_secs(10),
        },
        sent_data: false,
        latency: None,
    });
    let dest = sim.add_node(CellSink::default());
    let relays = wire(&mut sim, host, dest, n, |k| {
        let key = (dead != Some(k)).then(|| KEY.to_vec());
        VunetLink::new([false, false], key)
    });
    Net {
        sim,
        host,
        dest,
        relays,
        table,
    }
}

fn host(net: &Net) -> &Host {
    net.sim.node::<Host>(net.host).unwrap()
}

#[test]
fn open_across_one_three_and_six_relays_then_close() {
    for n in [1usize, 3, 6] {
        let close_at = Instant::from_millis(20);
        let mut net = chain(n, None, close_at);
        net.sim.run_until(Instant::from_millis(10));
        let h = host(&net);
        let Phase::Open(vc) = &h.phase else {
            panic!("{n} relays: not open");
        };
        let vc = vc.clone();
        // One VCI per segment, the lowest free on each.
        assert_eq!(vc.vcis, vec![32; n + 1]);
        // Each relay's entry: the segment's VCI in, the next one out, the
        // next switch's bits.
        for (k, &r) in net.relays.iter().enumerate() {
            let link = net.sim.node::<VunetLink>(r).unwrap();
            let bits = if k + 1 == n { 2 } else { 1 };
            assert_eq!(
                link.entry(0, vc.vcis[k]),
                Some((vc.vcis[k + 1], bits)),
                "relay {k}"
            );
        }
        // The data followed the set-up: every cell arrived, in order, on
        // the destination's VCI.
        let got = &net.sim.node::<CellSink>(net.dest).unwrap().0;
        let want: Vec<(u16, u8)> = (0..DATA).map(|i| (vc.receive_vci(), i as u8)).collect();
        assert_eq!(got, &want, "{n} relays");
        // Set-up latency: relay k is 2k + 2 links away, each link 50 us of
        // delay and a 1 us cell time; a write and a read each make a round
        // trip.
        let expected = setup_latency(n);
        assert_eq!(h.latency, Some(expected), "{n} relays");
        assert_eq!(net.table.entries(0).unwrap().len(), n + 1);
        // Close: every entry cleared, every VCI free.
        net.sim.run_until(Instant::from_millis(40));
        assert!(
            matches!(host(&net).phase, Phase::Closed),
            "{n} relays: not closed"
        );
        for (k, &r) in net.relays.iter().enumerate() {
            let link = net.sim.node::<VunetLink>(r).unwrap();
            assert_eq!(
                link.entry(0, vc.vcis[k]),
                None,
                "relay {k} still holds its entry"
            );
            // Passing relays changed nothing else: every control cell they
            // saw was accepted or passed.
            let c = link.counters();
            assert_eq!(
                c.refused_tag + c.refused_replay + c.refused_malformed + c.refused_port,
                0
            );
        }
        assert!(net.table.entries(0).unwrap().is_empty());
    }
}

#[test]
fn a_relay_that_never_answers_fails_the_open_by_name_and_nothing_is_left() {
    let mut net = chain(3, Some(2), Instant::from_millis(100_000));
    net.sim.run_until(Instant::from_millis(200));
    let Phase::Failed(e) = &host(&net).phase else {
        panic!("the open did not fail");
    };
    assert_eq!(*e, OpenError::NoAnswer(2));
    for (k, &r) in net.relays.iter().enumerate() {
        let link = net.sim.node::<VunetLink>(r).unwrap();
        assert_eq!(link.entry(0, 32), None, "relay {k} keeps an entry");
    }
    // Relay 2 has no key: it refused every cell (three tries of the write,
    // three of the clear).
    assert_eq!(
        net.sim
            .node::<VunetLink>(net.relays[2])
            .unwrap()
            .counters()
            .refused_port,
        6
    );
    assert!(net.table.entries(0).unwrap().is_empty(), "VCIs released");
}
