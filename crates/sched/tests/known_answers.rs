//! Small cases worked out by hand: the exact service order (and, for the
//! fair queues, virtual time) each discipline must produce.

mod common;

use aurora_sched::{Discipline, DropReason, Drr, Fifo, Limits, Priority, QueueId, Wf2qPlus, Wfq};
use aurora_time::Instant;
use common::{run_line, Arrival, Bounds, Gps};

const ROOMY: Limits = Limits {
    port: 1 << 16,
    queue: 1 << 16,
};
/// One virtual-time unit (a length unit per unit of weight) in tag units.
const V1: u64 = 1 << 32;

fn at(ns: i64) -> Instant {
    Instant::from_nanos(ns)
}

/// Dequeues until empty at `now`, returning the queue ids in order.
fn drain<D: Discipline<u32>>(d: &mut D, now: Instant) -> Vec<QueueId> {
    std::iter::from_fn(|| d.dequeue(now).map(|(q, _)| q)).collect()
}

#[test]
fn fifo_sends_in_arrival_order_whatever_the_queue() {
    let mut d = Fifo::new(3, ROOMY);
    for (q, item) in [(1, 10), (0, 11), (2, 12), (1, 13)] {
        d.enqueue(q, item, 1, at(0)).unwrap();
    }
    assert_eq!(d.queue_len(1), 2);
    let out: Vec<_> = std::iter::from_fn(|| d.dequeue(at(0))).collect();
    assert_eq!(out, vec![(1, 10), (0, 11), (2, 12), (1, 13)]);
    assert!(d.is_empty());
}

#[test]
fn drop_reasons_in_order_queue_then_queue_full_then_port_full() {
    let limits = Limits { port: 3, queue: 2 };
    let mut d = Fifo::new(2, limits);
    let refuse = |r: Result<(), aurora_sched::Dropped<u32>>| r.unwrap_err();
    assert_eq!(
        refuse(d.enqueue(2, 7, 1, at(0))).reason,
        DropReason::NoSuchQueue
    );
    d.enqueue(0, 1, 1, at(0)).unwrap();
    d.enqueue(0, 2, 1, at(0)).unwrap();
    let dropped = refuse(d.enqueue(0, 3, 1, at(0)));
    assert_eq!((dropped.item, dropped.reason), (3, DropReason::QueueFull));
    d.enqueue(1, 4, 1, at(0)).unwrap();
    assert_eq!(
        refuse(d.enqueue(1, 5, 1, at(0))).reason,
        DropReason::PortFull
    );
    // A full queue is reported even when the port is full too.
    assert_eq!(
        refuse(d.enqueue(0, 6, 1, at(0))).reason,
        DropReason::QueueFull
    );
    assert_eq!(d.len(), 3);
    assert_eq!(DropReason::PortFull.name(), "port_full");
}

#[test]
fn priority_always_takes_the_lowest_level() {
    let mut d = Priority::new(3, ROOMY);
    for (q, item) in [(2, 1), (1, 2), (0, 3), (2, 4), (0, 5)] {
        d.enqueue(q, item, 1, at(0)).unwrap();
    }
    assert_eq!(d.dequeue(at(0)), Some((0, 3)));
    d.enqueue(1, 6, 1, at(0)).unwrap();
    let out: Vec<_> = std::iter::from_fn(|| d.dequeue(at(0))).collect();
    assert_eq!(out, vec![(0, 5), (1, 2), (1, 6), (2, 1), (2, 4)]);
}

#[test]
fn drr_cells_with_quanta_two_and_one() {
    let mut d = Drr::new(&[2, 1], ROOMY);
    for q in [0, 0, 0, 0, 1, 1, 1, 1] {
        d.enqueue(q, 0, 1, at(0)).unwrap();
    }
    assert_eq!(drain(&mut d, at(0)), vec![0, 0, 1, 0, 0, 1, 1, 1]);
}

/// A queue that becomes busy joins at the end of the round: after queue 0's
/// turn the round is queue 1, queue 0, then the newcomer.
#[test]
fn drr_newcomers_join_at_the_end_of_the_round() {
    let mut d = Drr::equal(3, 1, ROOMY);
    for q in [0, 0, 1, 1] {
        d.enqueue(q, 0, 1, at(0)).unwrap();
    }
    assert_eq!(d.dequeue(at(0)), Some((0, 0)));
    d.enqueue(2, 0, 1, at(0)).unwrap();
    assert_eq!(drain(&mut d, at(0)), vec![1, 0, 2, 1]);
}

/// Both queues stay backlogged, yet over dequeues 2..6 queue 0 sends 2,999
/// bytes and queue 1 sends 1: more than `Q + Lmax` = 2,000 apart, below the
/// `Q_i + L_i,max + L_j,max` = 3,000 bound the property tests assert.
#[test]
fn drr_deficits_can_part_two_queues_by_more_than_a_quantum_and_a_packet() {
    let mut d = Drr::new(&[1000, 1000], ROOMY);
    for len in [1, 1000, 999, 1000, 1000] {
        d.enqueue(0, len, len, at(0)).unwrap();
    }
    for len in [1000, 1, 1000, 1000] {
        d.enqueue(1, len, len, at(0)).unwrap();
    }
    let out: Vec<_> = std::iter::from_fn(|| d.dequeue(at(0))).collect();
    assert_eq!(
        out,
        vec![
            (0, 1),
            (1, 1000),
            (0, 1000),
            (0, 999),
            (1, 1),
            (0, 1000),
            (1, 1000),
            (0, 1000),
            (1, 1000)
        ]
    );
    let sent = |q| -> u32 { out[2..6].iter().filter(|o| o.0 == q).map(|o| o.1).sum() };
    assert_eq!(sent(0) - sent(1), 2998);
}

/// Three sessions of weight 1 on a line of one unit per ns. The fluid system
/// finishes `a1` at t=4, after which `V` grows twice as fast; so at t=5
/// `V` = 3, not the 2.5 of a clock that ignored the departure, nor the 4
/// of one that followed the packet queues (where `a1` left at t=2).
#[test]
fn wfq_tracks_fluid_departures_in_virtual_time() {
    let mut d = Wfq::new(&[1, 1, 1], 1_000_000_000, ROOMY);
    let (a, b, c) = (0, 1, 2);
    d.enqueue(a, 1, 2, at(0)).unwrap();
    d.enqueue(b, 2, 6, at(0)).unwrap();
    assert_eq!(d.dequeue(at(0)), Some((a, 1)));
    assert_eq!(d.dequeue(at(2)), Some((b, 2)));
    assert_eq!(d.virtual_time(), V1);
    // At t=5: b2 (S = F_prev = 6, F = 7), a2 (S = V = 3, F = 5),
    // c1 (S = 3, F = 4).
    d.enqueue(b, 3, 1, at(5)).unwrap();
    assert_eq!(d.virtual_time(), 3 * V1);
    d.enqueue(a, 4, 2, at(5)).unwrap();
    d.enqueue(c, 5, 1, at(5)).unwrap();
    assert_eq!(d.dequeue(at(8)), Some((c, 5)));
    assert_eq!(d.dequeue(at(9)), Some((a, 4)));
    assert_eq!(d.dequeue(at(11)), Some((b, 3)));
    // The fluid system ran dry at t=12 with V = 7 and stood still since.
    d.enqueue(c, 6, 1, at(100)).unwrap();
    assert_eq!(d.virtual_time(), 7 * V1);
}

/// An earlier `now` counts as no time passing: one session of weight 1 on
/// a line of one unit per ns, busy from t=0, has `V` = 4 at t=4, and calls
/// at t=2 afterwards (one of them filing a new session) leave it there.
#[test]
fn wfq_an_earlier_now_is_no_time_passing() {
    let mut d = Wfq::new(&[1, 1], 1_000_000_000, ROOMY);
    d.enqueue(0, 1, 10, at(0)).unwrap();
    assert_eq!(d.dequeue(at(0)), Some((0, 1)));
    d.enqueue(0, 2, 10, at(4)).unwrap();
    assert_eq!(d.virtual_time(), 4 * V1);
    assert_eq!(d.dequeue(at(2)), Some((0, 2)));
    assert_eq!(d.virtual_time(), 4 * V1);
    d.enqueue(1, 3, 10, at(2)).unwrap();
    assert_eq!(d.virtual_time(), 4 * V1);
    // Now two sessions share the line: V grows half a unit per ns.
    assert_eq!(d.dequeue(at(8)), Some((1, 3)));
    assert_eq!(d.virtual_time(), 6 * V1);
}

/// Bennett and Zhang's example: session 0 has half the line and 9 cells,
/// sessions 1 to 8 a sixteenth each and a cell each, all at t=0.
fn half_and_eighths() -> (Vec<u32>, Vec<QueueId>) {
    let mut weights = vec![8];
    weights.extend([1; 8]);
    let mut arrivals = vec![0; 9];
    arrivals.extend(1..=8);
    (weights, arrivals)
}

/// WFQ sends session 0's first 7 cells back to back (their finish tags 1/8
/// .. 7/8 beat the others' 1), then the others, the tie at 1 going to the
/// sessions filed first.
#[test]
fn wfq_bursts_the_heavy_session() {
    let (weights, arrivals) = half_and_eighths();
    let mut d = Wfq::new(&weights, 1_000_000_000, ROOMY);
    for &q in &arrivals {
        d.enqueue(q, 0, 1, at(0)).unwrap();
    }
    let order: Vec<_> = (0..17).map(|t| d.dequeue(at(t)).unwrap().0).collect();
    assert_eq!(order, [0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0]);
}

/// WF2Q+ interleaves: session 0's next cell is not eligible until `V` (a
/// sixteenth per cell sent) reaches its start tag. Its 8th cell ties
/// session 8's at finish tag 1 and was filed later, so session 8 goes
/// first.
#[test]
fn wf2q_interleaves_the_heavy_session() {
    let (weights, arrivals) = half_and_eighths();
    let mut d = Wf2qPlus::new(&weights, ROOMY);
    for &q in &arrivals {
        d.enqueue(q, 0, 1, at(0)).unwrap();
    }
    assert_eq!(
        drain(&mut d, at(0)),
        [0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 8, 0, 0]
    );
    assert_eq!(d.virtual_time(), 17 * V1 / 16);
}

/// Weights 2, 1, 1; A and B backlogged at once, C arrives after three
/// cells. Worked by hand: A(0, ½) B(0, 1); V ¼: A(½, 1) ineligible, B; V ½:
/// A; V ¾: C arrives (¾, 1¾), A(1, 1½) ineligible so C; V 1: A; V 1¼:
/// B(1, 2) ties A(1½, 2) and was filed first; V 1½: A.
#[test]
fn wf2q_three_sessions() {
    let mut d = Wf2qPlus::new(&[2, 1, 1], ROOMY);
    let (a, b, c) = (0, 1, 2);
    for _ in 0..4 {
        d.enqueue(a, 0, 1, at(0)).unwrap();
    }
    for _ in 0..2 {
        d.enqueue(b, 0, 1, at(0)).unwrap();
    }
    let mut order: Vec<_> = (0..3).map(|_| d.dequeue(at(0)).unwrap().0).collect();
    assert_eq!(d.virtual_time(), 3 * V1 / 4);
    d.enqueue(c, 0, 1, at(0)).unwrap();
    order.extend(drain(&mut d, at(0)));
    assert_eq!(order, [a, b, a, c, a, b, a]);
}

/// A lone session runs ahead of its share, so its next cell is not
/// eligible; with nothing else eligible, `V` jumps to its start tag (`V =
/// max(V + W, min S)`) and the line never idles.
#[test]
fn wf2q_jumps_virtual_time_when_nothing_is_eligible() {
    let mut d = Wf2qPlus::new(&[1, 1, 1, 1], ROOMY);
    for _ in 0..3 {
        d.enqueue(0, 0, 1, at(0)).unwrap();
    }
    assert_eq!(d.dequeue(at(0)), Some((0, 0)));
    assert_eq!(d.virtual_time(), V1 / 4);
    assert_eq!(d.dequeue(at(1)), Some((0, 0)));
    assert_eq!(d.virtual_time(), V1 + V1 / 4);
}

/// WF2Q+ shares by the configured weights, idle sessions included, and does
/// not hand an idle session's share to the busy ones at once as GPS does:
/// here session 2 (weight 2 of 6) falls 2⅓ units behind its GPS service by
/// t = 6, more than one maximum item (2). So the property tests assert
/// Bennett and Zhang's fairness against the guaranteed share, not "within
/// one item of GPS".
#[test]
fn wf2q_can_lag_gps_by_more_than_one_item() {
    let weights = [1, 1, 2, 2];
    let arrivals = [
        Arrival { t: 0, q: 2, len: 2 },
        Arrival { t: 0, q: 2, len: 2 },
        Arrival { t: 1, q: 2, len: 2 },
        Arrival { t: 2, q: 0, len: 2 },
        Arrival { t: 4, q: 1, len: 2 },
    ];
    let mut d = Wf2qPlus::new(&weights, ROOMY);
    let bounds = Bounds {
        queues: 4,
        port: 100,
        queue: 100,
    };
    let run = run_line(&mut d, &arrivals, 1, bounds);
    let order: Vec<_> = run.sent.iter().map(|s| (s.q, s.start)).collect();
    assert_eq!(order, [(2, 0), (0, 2), (1, 4), (2, 6), (2, 8)]);
    let mut gps = Gps::new(&weights, 1.0);
    for (id, a) in arrivals.iter().enumerate() {
        gps.arrive(a.t as f64, a.q as usize, id, f64::from(a.len));
    }
    gps.run_to(6.0);
    assert!((gps.served[2] - 13.0 / 3.0).abs() < 1e-9);
    let packet_service = 2.0;
    assert!(gps.served[2] - packet_service > 2.0);
}

/// A weight change takes effect from the session's next head cell: the head
/// waiting keeps its tags, then the session gets 3 cells for the other's 1.
#[test]
fn wf2q_set_weight_from_the_next_head() {
    let mut d = Wf2qPlus::new(&[1, 1], ROOMY);
    for _ in 0..40 {
        d.enqueue(0, 0, 1, at(0)).unwrap();
        d.enqueue(1, 0, 1, at(0)).unwrap();
    }
    d.set_weight(0, 3);
    assert_eq!(d.weight(0), 3);
    let order: Vec<_> = (0..40).map(|_| d.dequeue(at(0)).unwrap().0).collect();
    assert_eq!(order[..8], [0, 1, 0, 1, 0, 0, 0, 1]);
    let zeros = order.iter().filter(|&&q| q == 0).count();
    assert!((29..=31).contains(&zeros), "{zeros} of 40");
}

/// A weight change counts in the fluid system at once: with weights 3 and 1
/// both busy, `V` grows at a quarter unit per ns.
#[test]
fn wfq_set_weight_changes_the_fluid_rates_at_once() {
    let mut d = Wfq::new(&[1, 1], 1_000_000_000, ROOMY);
    for _ in 0..4 {
        d.enqueue(0, 0, 1, at(0)).unwrap();
        d.enqueue(1, 0, 1, at(0)).unwrap();
    }
    d.set_weight(0, 3);
    assert_eq!(d.weight(0), 3);
    for _ in 0..4 {
        d.enqueue(0, 0, 1, at(0)).unwrap();
    }
    let order: Vec<_> = (0..12).map(|t| d.dequeue(at(t)).unwrap().0).collect();
    assert_eq!(order, [0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0]);
    // By t=11 the fluid system has worked 11 units at V' = 1/4 while both
    // were busy: V = 11/4 (session 1's last tag is 4, not reached).
    assert_eq!(d.virtual_time(), 11 * V1 / 4);
}

/// Items long enough (2^24 units, the longest counted) that a few hundred
/// carry `V` past 2^62, where every tag is lowered: the order stays that of
/// two equal sessions.
#[test]
fn wf2q_keeps_order_across_rebasing() {
    let long = 1 << 24;
    let mut d = Wf2qPlus::new(&[1, 1], ROOMY);
    for i in 0..200 {
        d.enqueue(0, i, long, at(0)).unwrap();
        d.enqueue(1, i, long, at(0)).unwrap();
    }
    let mut last_v = 0;
    let mut lowered = 0;
    let mut out = Vec::new();
    while let Some(x) = d.dequeue(at(0)) {
        out.push(x);
        lowered += usize::from(d.virtual_time() < last_v);
        last_v = d.virtual_time();
        assert!(last_v < 1 << 62);
    }
    // V grows 2^55 an item: lowered at items 128, 192, 256, 320, 384.
    assert_eq!(lowered, 5, "times virtual time was lowered");
    let want: Vec<_> = (0..200).flat_map(|i| [(0, i), (1, i)]).collect();
    assert_eq!(out, want);
}

#[test]
fn wfq_keeps_order_across_rebasing() {
    let long = 1 << 24;
    // One long item a millisecond.
    let mut d = Wfq::new(&[1, 1], 1000 << 24, ROOMY);
    for i in 0..200 {
        d.enqueue(0, i, long, at(0)).unwrap();
        d.enqueue(1, i, long, at(0)).unwrap();
    }
    let mut last_v = 0;
    let mut lowered = 0;
    let mut out = Vec::new();
    for k in 0..400 {
        out.push(d.dequeue(at(k * 1_000_000)).unwrap());
        lowered += usize::from(d.virtual_time() < last_v);
        last_v = d.virtual_time();
        assert!(last_v < 1 << 62);
    }
    // V grows 2^55 an item: lowered at items 128, 192, 256, 320, 384.
    assert_eq!(lowered, 5, "times virtual time was lowered");
    let want: Vec<_> = (0..200).flat_map(|i| [(0, i), (1, i)]).collect();
    assert_eq!(out, want);
}

#[test]
fn zero_length_items_pass() {
    let mut d = Wf2qPlus::new(&[1, 2], ROOMY);
    d.enqueue(0, 1, 0, at(0)).unwrap();
    d.enqueue(1, 2, 0, at(0)).unwrap();
    assert_eq!(drain(&mut d, at(0)).len(), 2);
    let mut d = Wfq::new(&[1, 2], 1_000_000_000, ROOMY);
    d.enqueue(0, 1, 0, at(0)).unwrap();
    d.enqueue(1, 2, 0, at(0)).unwrap();
    assert_eq!(drain(&mut d, at(0)).len(), 2);
    let mut d = Drr::new(&[1, 2], ROOMY);
    d.enqueue(0, 1, 0, at(0)).unwrap();
    assert_eq!(drain(&mut d, at(0)), [0]);
}

#[test]
fn disciplines_are_usable_as_trait_objects() {
    let mut ports: Vec<Box<dyn Discipline<u32>>> = vec![
        Box::new(Fifo::new(2, ROOMY)),
        Box::new(Priority::new(2, ROOMY)),
        Box::new(Drr::equal(2, 1, ROOMY)),
        Box::new(Wfq::new(&[1, 1], 1_000_000, ROOMY)),
        Box::new(Wf2qPlus::new(&[1, 1], ROOMY)),
    ];
    for p in &mut ports {
        p.enqueue(1, 5, 1, at(0)).unwrap();
        assert_eq!(p.queue_len(1), 1);
        assert_eq!(p.dequeue(at(1)), Some((1, 5)));
        assert!(p.is_empty());
    }
}

/// `for_each` shows exactly the items waiting, whatever the discipline:
/// after a mix of enqueues, refusals and dequeues, the multiset it shows
/// is what went in and was neither refused nor taken out.
#[test]
fn every_discipline_shows_exactly_what_waits() {
    use aurora_sched::tree::{ClassSpec, ClassTree, Share};
    use aurora_sched::{FlatApprox, FlatConfig, Hwfq};
    let tight = Limits {
        port: 40,
        queue: 12,
    };
    let tree = ClassTree::new(vec![
        ClassSpec::new("link", None, Share::Fraction(1.0), None),
        ClassSpec::new("a", Some("link"), Share::Fraction(0.25), Some(0)),
        ClassSpec::new("b", Some("link"), Share::Fraction(0.25), Some(1)),
        ClassSpec::new("c", Some("link"), Share::Fraction(0.5), Some(2)),
    ])
    .unwrap();
    let ports: Vec<Box<dyn Discipline<u32>>> = vec![
        Box::new(Fifo::new(3, tight)),
        Box::new(Priority::new(3, tight)),
        Box::new(Drr::equal(3, 1, tight)),
        Box::new(Wfq::new(&[1, 2, 3], 1_000_000, tight)),
        Box::new(Wf2qPlus::new(&[1, 2, 3], tight)),
        Box::new(Hwfq::new(&tree, tight)),
        Box::new(FlatApprox::new(
            &tree,
            tight,
            FlatConfig::new(aurora_time::Duration::from_micros(10)),
        )),
    ];
    for mut p in ports {
        let mut waiting: Vec<u32> = Vec::new();
        for i in 0..60u32 {
            if p.enqueue((i % 3) as QueueId, i, 1, at(i64::from(i)))
                .is_ok()
            {
                waiting.push(i);
            }
            if i % 4 == 3 {
                let (_, x) = p.dequeue(at(i64::from(i))).unwrap();
                waiting.retain(|&w| w != x);
            }
        }
        let mut shown = Vec::new();
        p.for_each(&mut |&x| shown.push(x));
        shown.sort_unstable();
        waiting.sort_unstable();
        assert_eq!(shown, waiting);
        assert_eq!(shown.len(), p.len());
    }
}
