//! Traffic management at the nodes: a traffic host shaping its flows and a
//! switch policing them, run cell by cell at exact times (host → switch →
//! host, the links taking no time), with the accounting identity checked.

use aurora_net::accounting::{reconcile, Account, Ledger, Loss, Place, Side};
use aurora_net::oam::{self, Ping};
use aurora_net::switch::{AtmSwitch, SwitchDrop};
use aurora_net::traffic::{Flow, ShapeError, TrafficHost, MAX_SHAPED_OAM_WAITING};
use aurora_net::{Node, Outbox};
use aurora_time::{Duration, Instant};
use aurora_tm::{Action, Contract, Definition, Shaper, Upc, UpcCounters, Verdict};
use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::CellBytes;

const TX_VC: VcId = VcId::new(0, 100);
const RX_VC: VcId = VcId::new(2, 300);
const FLOW: u16 = 7;
const SW: u32 = 1;
const RX: Place = Place {
    node: 2,
    port: 0,
    side: Side::In,
};
const UPC_DROP: Loss = Loss {
    place: Place {
        node: SW,
        port: 0,
        side: Side::In,
    },
    reason: "upc_drop",
};

fn us(n: i64) -> Duration {
    Duration::from_micros(n)
}

fn at(d: Duration) -> Instant {
    Instant::ZERO + d
}

/// A sending host, a switch (port 0 from the sender, port 1 to the
/// receiver) and a receiving host.
struct Net {
    tx: TrafficHost,
    sw: AtmSwitch,
    rx: TrafficHost,
    ledger: Ledger,
    out: Outbox,
    now: Instant,
    /// Every cell the sender sent, with its time.
    sent: Vec<(Instant, CellBytes)>,
    /// Every cell the switch sent on to the receiver.
    switched: Vec<CellBytes>,
    /// The most cells the sender's flow held at once.
    most_waiting: usize,
}

impl Net {
    fn new(flow: Flow) -> Net {
        let mut tx = TrafficHost::new(Format::Uni);
        tx.add_flow(Flow {
            id: FLOW,
            vc: TX_VC,
            ..flow
        })
        .unwrap();
        let mut sw = AtmSwitch::new(2, Format::Uni);
        sw.add_vc(0, TX_VC, 1, RX_VC).unwrap();
        let mut rx = TrafficHost::new(Format::Uni);
        rx.expect(RX_VC);
        let mut out = Outbox::default();
        out.track_drops(true);
        Net {
            tx,
            sw,
            rx,
            ledger: Ledger::new(),
            out,
            now: Instant::ZERO,
            sent: Vec::new(),
            switched: Vec::new(),
            most_waiting: 0,
        }
    }

    fn police(&mut self, contract: &str, definition: Definition, action: Action) {
        let c: Contract = contract.parse().unwrap();
        self.sw
            .police(0, TX_VC, Upc::new(&c, definition, action))
            .unwrap();
    }

    fn charge(&mut self, node: u32) {
        for (port, cell, why) in self.out.drain_drops() {
            let side = Side::In;
            self.ledger
                .dropped(self.now, Place { node, port, side }, why, &cell);
        }
    }

    /// Runs every node at every time one of them asks for, up to `until`.
    fn run(&mut self, until: Instant) {
        for _ in 0..10_000_000 {
            let next = [self.tx.poll_at(), self.rx.poll_at()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = next.map(|t| t.max(self.now)).filter(|t| *t <= until) else {
                return;
            };
            self.now = t;
            self.tx.poll(t, &mut self.out);
            self.most_waiting = self.most_waiting.max(self.tx.cells_waiting(0));
            self.charge(0);
            let cells: Vec<CellBytes> = self.out.drain().map(|(_, c)| c).collect();
            self.sent.extend(cells.iter().map(|c| (t, *c)));
            self.sw.receive(t, 0, &cells, &mut self.out);
            self.charge(SW);
            let on: Vec<CellBytes> = self
                .out
                .drain()
                .filter(|(p, _)| *p == 1)
                .map(|(_, c)| c)
                .collect();
            self.switched.extend_from_slice(&on);
            self.rx.receive(t, 0, &on, &mut self.out);
            self.charge(RX.node);
            self.rx.poll(t, &mut self.out);
            self.charge(RX.node);
            self.out.drain().for_each(drop);
        }
        panic!("the run did not settle");
    }

    fn account(&self) -> Account {
        reconcile(
            FLOW,
            self.tx.sent(0),
            self.rx.received(RX_VC).delivered,
            &self.ledger,
            self.rx.book(RX_VC),
            RX,
            &[],
        )
    }

    fn times(&self) -> Vec<i64> {
        self.sent.iter().map(|(t, _)| t.as_nanos()).collect()
    }

    fn upc(&self) -> UpcCounters {
        self.sw.police_counters(0, TX_VC).unwrap()
    }
}

fn clp(c: &CellBytes) -> bool {
    Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni).clp
}

/// The counts a policer of `contract` gives cells arriving at `times`.
fn reference(contract: &str, action: Action, times: &[i64]) -> UpcCounters {
    let c: Contract = contract.parse().unwrap();
    let mut u = Upc::new(&c, Definition::Clp01, action);
    for &t in times {
        u.police(Instant::from_nanos(t), false);
    }
    u.counters()
}

/// 11,000 single-cell PDUs, one every 9,091 ns: 110,000 cells/s, 10 %
/// over a PCR of 100,000 (T = 10 µs), with a cell interval of CDVT.
const OVER: &str = "cbr:pcr=100000,cdv=10";
const N: u64 = 11_000;

fn ten_percent_over(action: Action) -> Net {
    let mut n = Net::new(Flow {
        id: 0,
        vc: TX_VC,
        sdu_len: 40,
        count: N,
        start: Instant::ZERO,
        interval: Duration::from_nanos(9_091),
    });
    n.police(OVER, Definition::Clp01, action);
    n.run(at(Duration::from_secs(1)));
    assert_eq!(n.sent.len() as u64, N);
    n
}

/// A policer passes 10/11 of a stream 10 % over its PCR in the long run:
/// of 11,000 cells about 1,000 are not conforming (fewer by the handful
/// the CDVT lets through at the start).
fn about_one_in_eleven(k: u64) {
    assert!((985..=1_000).contains(&k), "{k} of {N} non-conforming");
}

#[test]
fn a_source_ten_percent_over_pcr_gets_one_cell_in_eleven_tagged() {
    let n = ten_percent_over(Action::Tag);
    let u = n.upc();
    assert_eq!(u, reference(OVER, Action::Tag, &n.times()));
    about_one_in_eleven(u.tagged);
    assert_eq!((u.conforming + u.tagged, u.dropped_nonconforming), (N, 0));
    let k = n.sw.counters(0).unwrap();
    assert_eq!((k.cells_in, k.tagged, k.dropped_total()), (N, u.tagged, 0));
    // The tagged cells go on with CLP = 1 and arrive: every PDU delivered.
    assert_eq!(n.switched.len() as u64, N);
    let marked = n.switched.iter().filter(|c| clp(c)).count() as u64;
    assert_eq!(marked, u.tagged);
    assert!(n.ledger.is_empty());
    let a = n.account();
    assert_eq!((a.sent, a.delivered, a.unaccounted), (N, N, 0), "{a:?}");
}

#[test]
fn a_source_ten_percent_over_pcr_gets_one_cell_in_eleven_dropped() {
    let n = ten_percent_over(Action::Drop);
    let u = n.upc();
    assert_eq!(u, reference(OVER, Action::Drop, &n.times()));
    about_one_in_eleven(u.dropped_nonconforming);
    let dropped = u.dropped_nonconforming;
    let k = n.sw.counters(0).unwrap();
    assert_eq!(k.dropped(SwitchDrop::Policed), dropped);
    assert_eq!((k.dropped_total(), k.tagged), (dropped, 0));
    assert!(n.switched.iter().all(|c| !clp(c)));
    // Each dropped cell was shown to the driver and charged to its PDU.
    assert_eq!(n.ledger.cells().get(&UPC_DROP), Some(&dropped));
    assert_eq!(n.ledger.len() as u64, dropped);
    let a = n.account();
    assert_eq!(a.lost.get(&UPC_DROP), Some(&dropped), "{a:?}");
    assert_eq!(a.lost_total(), dropped);
    assert_eq!(
        (a.sent, a.delivered, a.corrupted, a.in_flight, a.unaccounted),
        (N, N - dropped, 0, 0, 0)
    );
}

/// A source of two-cell PDUs shaped to 110,000 cells/s through a policer
/// of 100,000: a cell in eleven dropped, first or last of its PDU. Every
/// PDU that lost one is charged to the policer, and so is the one after a
/// PDU that lost its last cell (run together with it at the receiver).
#[test]
fn a_shaped_source_ten_percent_over_loses_whole_pdus_to_the_policer() {
    const PDUS: u64 = 5_500;
    let mut n = Net::new(Flow {
        id: 0,
        vc: TX_VC,
        sdu_len: 88,
        count: PDUS,
        start: Instant::ZERO,
        interval: us(1),
    });
    n.tx.shape(0, "cbr:pcr=110000".parse().unwrap()).unwrap();
    n.police(OVER, Definition::Clp01, Action::Drop);
    n.run(at(Duration::from_secs(1)));
    assert!(n.tx.done_sending());
    let cells = 2 * PDUS as usize;
    assert_eq!(n.sent.len(), cells);
    let u = n.upc();
    assert_eq!(u, reference(OVER, Action::Drop, &n.times()));
    let dropped = u.dropped_nonconforming;
    let eleventh = cells as u64 / 11;
    assert!((eleventh - 15..=eleventh).contains(&dropped), "{dropped}");
    assert_eq!(n.ledger.cells().get(&UPC_DROP), Some(&dropped));
    let a = n.account();
    assert_eq!(
        (a.sent, a.corrupted, a.in_flight, a.unaccounted),
        (PDUS, 0, 0, 0)
    );
    assert_eq!(a.lost.keys().collect::<Vec<_>>(), [&UPC_DROP], "{a:?}");
    // Drops are eleven cells apart: each hits its own PDU, and about half
    // of them a last cell, taking the next PDU too.
    assert_eq!(n.ledger.len() as u64, dropped);
    let lost = a.lost_total();
    assert_eq!(a.delivered + lost, PDUS);
    assert!(lost > dropped + dropped / 3 && lost < 2 * dropped, "{a:?}");
    assert_eq!(n.rx.received(RX_VC).delivered, a.delivered);
}

/// What a backlogged shaped flow sends: `k`-th cell at ⌊k·T⌋, T = 1/PCR
/// exactly, with T not whole nanoseconds (9,090.9 ns).
#[test]
fn a_shaped_cbr_flow_sends_one_cell_per_peak_interval_and_passes_its_policer() {
    for cdv in [0, 50] {
        let mut n = Net::new(Flow {
            id: 0,
            vc: TX_VC,
            sdu_len: 1_000,
            count: 200,
            start: at(us(3)),
            interval: Duration::ZERO,
        });
        let contract = format!("cbr:pcr=110000,cdv={cdv}");
        n.tx.shape(0, contract.parse().unwrap()).unwrap();
        n.police(&contract, Definition::Clp01, Action::Tag);
        n.run(at(Duration::from_secs(1)));
        let times = n.times();
        assert_eq!(times.len(), 200 * 21);
        for (k, t) in times.iter().enumerate() {
            assert_eq!(*t, 3_000 + (k as i64 * 1_000_000_000) / 110_000, "cell {k}");
        }
        let u = n.upc();
        assert_eq!((u.conforming, u.tagged), (200 * 21, 0));
        assert_eq!(n.account().delivered, 200);
        assert_eq!(n.tx.cells_sent(), 200 * 21);
        assert_eq!(n.most_waiting, 20, "one PDU, less the cell that left");
    }
}

/// A ping on a shaped flow's VC is shaped with the flow: its requests wait
/// for the shaper, so every cell the VC carries, the flow's and the
/// ping's, conforms, and the policer tags none; the flow still delivers
/// every PDU. A ping that asks faster than the contract allows has its
/// requests beyond the shaper's queue refused, and counted.
#[test]
fn a_ping_on_a_shaped_vc_is_shaped_with_its_flow() {
    for (interval, count, want_sent) in [
        (us(1_000), 20, 20),
        (Duration::ZERO, 1_000, MAX_SHAPED_OAM_WAITING),
    ] {
        let mut n = Net::new(Flow {
            id: 0,
            vc: TX_VC,
            sdu_len: 1_000,
            count: 200,
            start: at(us(3)),
            interval: Duration::ZERO,
        });
        let contract = "cbr:pcr=110000";
        n.tx.shape(0, contract.parse().unwrap()).unwrap();
        n.tx.add_ping(Ping {
            vc: TX_VC,
            end_to_end: true,
            count,
            start: at(us(100)),
            interval,
        });
        n.police(contract, Definition::Clp01, Action::Tag);
        n.run(at(Duration::from_secs(1)));
        let oam_cells = n.sent.iter().filter(|(_, c)| oam::is_oam(c)).count();
        assert_eq!(oam_cells, want_sent);
        assert_eq!(n.sent.len(), 200 * 21 + want_sent);
        let times = n.times();
        for w in times.windows(2) {
            assert!(w[1] - w[0] >= 9_090, "cells {} ns apart", w[1] - w[0]);
        }
        let u = n.upc();
        assert_eq!((u.conforming, u.tagged), ((200 * 21 + want_sent) as u64, 0));
        assert_eq!(n.account().delivered, 200);
        let s = n.tx.shaping(0).unwrap();
        assert_eq!(s.oam_sent, want_sent as u64);
        assert_eq!(s.oam_refused, count - want_sent as u64);
        // The ping knows which of its requests went.
        let g = n.tx.ping(0).unwrap();
        assert_eq!(
            (g.sent, g.refused),
            (want_sent as u64, count - want_sent as u64)
        );
        assert_eq!(g.lost, 0);
    }
}

/// VBR: bursts of MBS cells at PCR, then SCR; the cells leave exactly when
/// a lone shaper says, and VBR.1 and VBR.3 policers of the contract pass
/// them all.
#[test]
fn a_shaped_vbr_flow_passes_vbr_policers() {
    let contract = "vbr:pcr=100000,scr=20000,mbs=30,cdvt=0";
    for (def, act) in [
        (Definition::Clp01, Action::Drop),
        (Definition::Clp0, Action::Tag),
    ] {
        let mut n = Net::new(Flow {
            id: 0,
            vc: TX_VC,
            sdu_len: 400,
            count: 100,
            start: Instant::ZERO,
            interval: us(50),
        });
        n.tx.shape(0, contract.parse().unwrap()).unwrap();
        n.police(contract, def, act);
        n.run(at(Duration::from_secs(1)));
        let mut lone = Shaper::new(&contract.parse().unwrap());
        let want: Vec<i64> = (0..n.sent.len())
            .map(|_| {
                let t = lone.next_conforming(Instant::ZERO);
                lone.sent(t);
                t.as_nanos()
            })
            .collect();
        assert_eq!(n.times(), want);
        assert_eq!(n.sent.len(), 100 * 9);
        let u = n.upc();
        assert_eq!(
            u,
            UpcCounters {
                conforming: 900,
                ..UpcCounters::default()
            }
        );
        let a = n.account();
        assert_eq!((a.delivered, a.unaccounted), (100, 0));
    }
}

/// 21-cell PDUs at 100,000 cells/s take 210 µs each; offered one every
/// 100 µs, the flow falls behind by 110 µs a PDU, holding one PDU at most
/// and skipping none.
fn behind(until: Instant, stop: Option<Instant>) -> Net {
    let mut n = Net::new(Flow {
        id: 0,
        vc: TX_VC,
        sdu_len: 1_000,
        count: 20,
        start: Instant::ZERO,
        interval: us(100),
    });
    n.tx.shape(0, "cbr:pcr=100000".parse().unwrap()).unwrap();
    if let Some(s) = stop {
        n.tx.stop_sending_at(s);
    }
    n.police("cbr:pcr=100000", Definition::Clp01, Action::Drop);
    n.run(until);
    n
}

#[test]
fn a_flow_offered_faster_than_its_contract_falls_behind_and_skips_nothing() {
    let n = behind(at(Duration::from_secs(1)), None);
    assert!(n.tx.done_sending());
    // PDU j leaves from 210·j µs, one cell every 10 µs.
    let times = n.times();
    assert_eq!(times.len(), 20 * 21);
    for (k, t) in times.iter().enumerate() {
        assert_eq!(*t, k as i64 * 10_000);
    }
    let s = n.tx.shaping(0).unwrap();
    assert_eq!(s.late, 19);
    assert_eq!(s.max_delay, us(19 * 110));
    assert_eq!(s.total_delay, us(110 * (19 * 20 / 2)));
    assert_eq!(s.cells_sent, 420);
    assert_eq!(s.contract, "cbr:pcr=100000".parse().unwrap());
    assert_eq!(n.most_waiting, 20);
    let r = n.rx.received(RX_VC);
    assert_eq!((r.delivered, r.missing), (20, 0));
    assert_eq!(n.upc().dropped_nonconforming, 0);
}

#[test]
fn a_pdu_leaving_counts_as_sent_and_its_waiting_cells_as_in_flight() {
    // At 1,000 µs PDU 4 (from 840 µs) has sent 17 cells; 4 wait.
    let n = behind(at(us(1_000)), None);
    assert_eq!(n.tx.sent(0), 5);
    assert_eq!(n.tx.cells_waiting(0), 4);
    assert_eq!(n.tx.cells_sent(), 4 * 21 + 17);
    assert!(!n.tx.done_sending());
    let a = n.account();
    assert_eq!(
        (
            a.sent,
            a.delivered,
            a.in_flight,
            a.lost_total(),
            a.unaccounted
        ),
        (5, 4, 1, 0, 0)
    );
}

#[test]
fn stopping_lets_the_pdu_leaving_finish_and_starts_no_other() {
    let n = behind(at(Duration::from_secs(1)), Some(at(us(1_000))));
    assert_eq!(n.tx.sent(0), 5);
    assert_eq!(n.tx.cells_waiting(0), 0);
    assert_eq!(n.sent.len(), 5 * 21);
    assert_eq!(n.sent.last().unwrap().0, at(us(840 + 200)));
    assert_eq!(n.tx.poll_at(), None);
    let a = n.account();
    assert_eq!(
        (a.sent, a.delivered, a.in_flight, a.unaccounted),
        (5, 5, 0, 0)
    );
}

/// A flow with room in its schedule: each PDU leaves when it falls due,
/// its cells one peak interval apart, and is never late.
#[test]
fn a_flow_within_its_contract_keeps_its_schedule() {
    let mut n = Net::new(Flow {
        id: 0,
        vc: TX_VC,
        sdu_len: 1_000,
        count: 10,
        start: at(us(5)),
        interval: us(333),
    });
    n.tx.shape(0, "cbr:pcr=100000".parse().unwrap()).unwrap();
    n.run(at(Duration::from_secs(1)));
    let times = n.times();
    for (k, t) in times.iter().enumerate() {
        let (pdu, cell) = (k as i64 / 21, k as i64 % 21);
        assert_eq!(*t, 5_000 + pdu * 333_000 + cell * 10_000, "cell {k}");
    }
    let s = n.tx.shaping(0).unwrap();
    assert_eq!((s.late, s.max_delay), (0, Duration::ZERO));
    assert_eq!(n.rx.received(RX_VC).delivered, 10);
}

#[test]
fn shaping_needs_the_flow_and_its_vc_to_itself() {
    let mut h = TrafficHost::new(Format::Uni);
    let f = Flow {
        id: 0,
        vc: TX_VC,
        sdu_len: 100,
        count: 1,
        start: Instant::ZERO,
        interval: us(1),
    };
    let c: Contract = "cbr:pcr=1000".parse().unwrap();
    assert_eq!(h.shape(0, c), Err(ShapeError::NoSuchFlow(0)));
    h.add_flow(f).unwrap();
    h.add_flow(Flow { id: 1, ..f }).unwrap();
    assert_eq!(h.shape(0, c), Err(ShapeError::SharedVc(TX_VC)));
    let other = VcId::new(0, 101);
    h.add_flow(Flow {
        id: 2,
        vc: other,
        ..f
    })
    .unwrap();
    h.shape(2, c).unwrap();
    assert!(h
        .add_flow(Flow {
            id: 3,
            vc: other,
            ..f
        })
        .is_err());
    assert_eq!(h.contract(2), Some(c));
    assert_eq!((h.contract(0), h.shaping(0)), (None, None));
    // The unshaped flows send whole PDUs at once; the shaped one one cell.
    let mut out = Outbox::default();
    h.poll(Instant::ZERO, &mut out);
    assert_eq!(out.drain().count(), 3 + 3 + 1);
    assert_eq!(h.cells_waiting(2), 2);
    assert_eq!(h.poll_at(), Some(at(us(1_000))));
    // A verdict a policer of the flow's contract would give each cell.
    let mut u = Upc::new(&c, Definition::Clp01, Action::Drop);
    assert_eq!(u.police(Instant::ZERO, false), Verdict::Pass);
}
