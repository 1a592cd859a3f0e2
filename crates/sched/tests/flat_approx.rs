//! The flat approximation of HWFQ: the exact limit against H-GPS, the
//! error as the update period grows, the pipelined walk, and the
//! discipline's contract.

mod hgps;

use aurora_sched::{ClassTree, Discipline, FlatApprox, FlatConfig, Limits};
use aurora_time::{Duration, Instant};
use hgps::*;
use proptest::prelude::*;

const BIG: Limits = Limits {
    port: 1 << 20,
    queue: 1 << 20,
};

/// An OC-3c cell time (53 bytes at 155.52 Mb/s), rounded to the ns: the
/// line of the i960 output port controller.
const CELL_NS: u64 = 2726;

fn flat(tree: &RefTree, period: Duration) -> FlatApprox<usize> {
    FlatApprox::new(
        &ClassTree::new(tree.specs()).unwrap(),
        BIG,
        FlatConfig::new(period),
    )
}

/// link: A (0.6) {a1 0.5, a2 0.5}, B (0.4) {b1 0.75, b2 0.25}; queues 0-3.
fn two_level() -> RefTree {
    tree_of(
        &[
            Shape::Class(6, vec![Shape::Leaf(1), Shape::Leaf(1)]),
            Shape::Class(4, vec![Shape::Leaf(3), Shape::Leaf(1)]),
        ],
        0,
    )
}

/// Cells each queue sends in 1000 cell times, after 100 to settle, when
/// `on` are backlogged.
fn shares(tree: &RefTree, on: &[u32]) -> Vec<u64> {
    let mut f = flat(tree, Duration::ZERO);
    greedy(
        &mut f,
        tree,
        &|_, q| on.contains(&q),
        (1100, 100),
        CELL_NS,
        1000,
    )
    .0
}

#[test]
fn exact_limit_known_answers() {
    let t = two_level();
    let near = |got: Vec<u64>, want: [u64; 4]| {
        for (g, w) in got.iter().zip(want) {
            assert!(g.abs_diff(w) <= 1, "{got:?} against {want:?}");
        }
    };
    near(shares(&t, &[0, 1, 2, 3]), [300, 300, 300, 100]);
    near(shares(&t, &[0, 2, 3]), [600, 0, 300, 100]);
    near(shares(&t, &[2, 3]), [0, 0, 750, 250]);
    near(shares(&t, &[1, 3]), [0, 600, 0, 400]);
    near(shares(&t, &[0, 1, 3]), [300, 300, 0, 400]);
}

#[test]
fn reported_weights_are_the_hgps_rates() {
    let t = two_level();
    let close = |a: Vec<(u32, f64)>, b: [f64; 4]| {
        for ((q, x), y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "queue {q}: {a:?} against {b:?}");
        }
    };
    // Before any traffic, with walks: the guaranteed shares.
    close(
        flat(&t, Duration::from_millis(1)).weights(),
        [0.3, 0.3, 0.3, 0.1],
    );
    // In the exact limit: nothing is active, each would have the link.
    let mut f = flat(&t, Duration::ZERO);
    close(f.weights(), [1.0; 4]);
    f.enqueue(0, 0, 1, Instant::ZERO).unwrap();
    f.enqueue(3, 1, 1, Instant::ZERO).unwrap();
    // a1 and b2 active: 0.6 and 0.4. a2 would get half of A (0.3), b1
    // three quarters of B over B's active shares (0.4 * 0.75 / 1.0).
    close(f.weights(), [0.6, 0.3, 0.3, 0.4]);
    assert_eq!(f.weight(3), Some(f.weights()[3].1));
    assert_eq!(f.weight(9), None);
    assert_eq!(f.mappings(), 2);
}

#[test]
fn the_walk_is_paced_and_pipelined() {
    // 4 leaves and 3 classes: 10 steps a walk. With a period of 10 us and a
    // call every 1 us, one step is due per call and a mapping ends every
    // 10 calls.
    let t = two_level();
    let mut f = flat(&t, Duration::from_micros(10));
    assert_eq!(f.steps_per_walk(), 10);
    let at = |us: i64| Instant::from_micros(us);
    // Only b2 busy from time 0.
    for i in 0..4 {
        f.enqueue(3, i, 1, at(0)).unwrap();
    }
    let mut maps = Vec::new();
    for us in 1..=40 {
        f.enqueue(3, 100 + us as usize, 1, at(us)).unwrap();
        maps.push((f.mappings(), f.weight(3).unwrap()));
    }
    // The first walk ran from 0 to 10 us (its rates from the starting
    // assumption, b2 at 0.1); the second, 10 to 20 us, maps from what the
    // first saw: b2 alone, the whole link.
    assert_eq!(maps[8], (1, 0.1));
    assert_eq!(maps[18], (2, 1.0));
    assert_eq!(maps[38], (4, 1.0));
    // A walk never ends early: one mapping per period.
    assert_eq!(maps.iter().filter(|m| m.0 == 2).count(), 10);
}

#[test]
fn sparse_calls_catch_up_within_the_step_budget() {
    let t = two_level();
    let mut config = FlatConfig::new(Duration::from_micros(10));
    config.max_steps_per_op = 3;
    let mut f: FlatApprox<usize> =
        FlatApprox::new(&ClassTree::new(t.specs()).unwrap(), BIG, config);
    f.enqueue(0, 0, 1, Instant::from_millis(5)).unwrap();
    assert_eq!(f.mappings(), 0);
    for i in 1..=3 {
        f.enqueue(0, i, 1, Instant::from_millis(5)).unwrap();
    }
    // 4 calls of at most 3 steps: the first walk (10 steps) is done.
    assert_eq!(f.mappings(), 1);
}

/// Sends `cells` cells at the start when every queue holds `backlog`
/// cells, returning the order of queues served.
fn order<D: Discipline<usize>>(d: &mut D, queues: u32, backlog: usize, cells: usize) -> Vec<u32> {
    for q in 0..queues {
        for i in 0..backlog {
            d.enqueue(q, i, 1, Instant::ZERO).unwrap();
        }
    }
    (0..cells)
        .map(|i| {
            d.dequeue(Instant::from_nanos(i as i64 * CELL_NS as i64))
                .unwrap()
                .0
        })
        .collect()
}

#[test]
fn eligibility_spreads_a_heavy_leafs_cells() {
    // A leaf owning half the link next to a class of ten small ones, all
    // backlogged from the start at their guaranteed shares (a walk a
    // second, so the first mapping stands): WF2Q+ sends the heavy leaf
    // every other cell, where a WFQ ordered by finish tags alone would
    // send it ten times in a row first. (Twice in a row can happen: the
    // bucket queues break ties between equal finish tags first come first
    // served.)
    let t = tree_of(
        &[Shape::Leaf(1), Shape::Class(1, vec![Shape::Leaf(1); 10])],
        0,
    );
    let mut f = flat(&t, Duration::from_secs(1));
    let o = order(&mut f, 11, 20, 40);
    assert_eq!(o.iter().filter(|&&q| q == 0).count(), 20, "{o:?}");
    assert!(o.windows(3).all(|w| w != [0, 0, 0]), "{o:?}");
    assert_eq!(f.mappings(), 0);
}

#[test]
fn a_leaf_waking_gets_no_credit_for_its_idle_time() {
    // Two equal leaves. The second is busy, idle for 1,000 cells while the
    // first has the link, then busy again: from then on they alternate
    // (a stale finish tag would let the second send its whole backlog).
    let t = tree_of(&[Shape::Leaf(1), Shape::Leaf(1)], 0);
    let mut f = flat(&t, Duration::ZERO);
    let on = |slot: u64, q: u32| q == 0 || !(100..1100).contains(&slot);
    let mut sent = [0u32; 2];
    let mut seq = 0;
    for slot in 0..1200u64 {
        let now = Instant::from_nanos((slot * CELL_NS) as i64);
        for q in 0..2 {
            if on(slot, q) {
                while f.queue_len(q) < 50 {
                    f.enqueue(q, seq, 1, now).unwrap();
                    seq += 1;
                }
            }
        }
        let (q, _) = f.dequeue(now).unwrap();
        if (1100..1140).contains(&slot) {
            sent[q as usize] += 1;
        }
    }
    assert!(sent[1].abs_diff(20) <= 1, "{sent:?}");
}

/// The misallocated fraction of the link on a tree where classes switch on
/// and off every few milliseconds, over 100 ms of an OC-3c line, measured
/// per millisecond against H-GPS for the queues that are backlogged.
fn switching_error(period: Duration) -> f64 {
    let t = tree_of(
        &[
            Shape::Class(5, vec![Shape::Leaf(5), Shape::Leaf(3), Shape::Leaf(2)]),
            Shape::Class(3, vec![Shape::Leaf(1), Shape::Leaf(1)]),
            Shape::Class(2, vec![Shape::Leaf(3), Shape::Leaf(2)]),
        ],
        0,
    );
    let ms = 1_000_000 / CELL_NS;
    let on = move |slot: u64, q: u32| match q {
        0 => true,
        1 | 2 => (slot / (4 * ms)).is_multiple_of(2),
        3 | 4 => slot / (7 * ms) % 2 == 1,
        _ => ((slot + ms) / (3 * ms)).is_multiple_of(2),
    };
    let mut f = flat(&t, period);
    greedy(&mut f, &t, &on, (100 * ms, 0), CELL_NS, ms).2
}

#[test]
fn error_grows_with_the_update_period() {
    let periods = [
        Duration::ZERO,
        Duration::from_nanos(CELL_NS as i64),
        Duration::from_micros(100),
        Duration::from_millis(1),
        Duration::from_millis(10),
    ];
    let err: Vec<f64> = periods.iter().map(|&p| switching_error(p)).collect();
    for (p, e) in periods.iter().zip(&err) {
        eprintln!("update period {p}: {:.4} of the link misallocated", e);
    }
    // The exact limit and a walk per cell are close to H-GPS.
    assert!(err[0] < 0.01, "{err:?}");
    assert!(err[1] < 0.01, "{err:?}");
    // A walk every 10 ms, with classes switching every 3 to 7 ms, is not.
    assert!(err[4] >= err[1], "{err:?}");
    assert!(err[4] > 0.05, "{err:?}");
    assert!(err[3] >= err[1], "{err:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The exact limit: on random trees with a random set of greedy
    /// leaves, every leaf's cells over 20,000 cell times (after 1,000 to
    /// settle the tags computed as the leaves woke) are within 3 cells of
    /// its H-GPS share: a cell for where each end of the window falls in
    /// the leaf's round, one for WF2Q+'s lag.
    #[test]
    fn exact_limit_matches_hgps(tree in arb_tree(), pick in any::<u64>()) {
        let n = tree.queues();
        let on: Vec<u32> = (0..n as u32).filter(|q| pick >> (q % 64) & 1 == 1 || *q == (pick % n as u64) as u32).collect();
        let mut f = flat(&tree, Duration::ZERO);
        let (sent, ideal, _) = greedy(&mut f, &tree, &|_, q| on.contains(&q), (21_000, 1000), CELL_NS, 20_000);
        for q in 0..n {
            prop_assert!((sent[q] as f64 - ideal[q]).abs() <= 3.0,
                "queue {}: {} sent, {} ideal", q, sent[q], ideal[q]);
        }
    }

}

proptest! {
    /// Any period: no reordering within a queue, limits respected with the
    /// right reasons, nothing lost or duplicated.
    #[test]
    fn fifo_limits_and_conservation(
        tree in arb_tree(),
        port in 1usize..40,
        queue in 1usize..12,
        period in prop_oneof![Just(0i64), 1i64..20_000],
        steps in 1u32..20,
        ops in arb_ops(),
    ) {
        let limits = Limits { port, queue };
        let mut config = FlatConfig::new(Duration::from_nanos(period));
        config.max_steps_per_op = steps;
        let mut f: FlatApprox<usize> = FlatApprox::new(&ClassTree::new(tree.specs()).unwrap(), limits, config);
        check_against_model(&mut f, tree.queues(), limits, &ops)?;
    }

    /// In the exact limit, and with a walk every cell time, the
    /// approximation tracks the H-GPS fluid for the same arrivals of cells
    /// on random trees: every queue within 3 × (depth + 1) cells at every
    /// start and end of a cell. (Observed: at most 7 cells at depth 3 over
    /// 10,000 cases; the gap comes from tags computed with a weight that
    /// changes while they wait, which HWFQ does not have.)
    #[test]
    fn fast_walks_track_the_fluid(tree in arb_tree(), bursts in arb_bursts()) {
        // Cells of length 1 on a line of 1 per ns: bursts' lengths ignored.
        let arr: Vec<Arrival> = arrivals(&bursts, tree.queues())
            .into_iter()
            .map(|a| Arrival { len: 1, at: a.at / 50, ..a })
            .collect();
        for p in [0, 1] {
            let mut f = flat(&tree, Duration::from_nanos(p));
            let (sent, dropped) = run_line(&mut f, &arr, 1);
            prop_assert!(dropped.is_empty());
            let (gap, q, t) = worst_gap(&tree, &arr, &sent);
            let bound = 3.0 * (tree.depth() + 1) as f64;
            prop_assert!(gap <= bound, "period {} ns: queue {} is {} cells off H-GPS at {} ns", p, q, gap, t);
        }
    }
}
