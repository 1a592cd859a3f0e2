//! What a cell cycle costs HWFQ and its flat approximation, for callgrind
//! to count: one enqueue and one dequeue, plus the flat approximation's
//! share of its background weight walk.
//!
//! ```text
//! hier_cost <hwfq|flat> <cycles> [update period in us, default 10000] [fan-out, default 10]
//! ```
//!
//! The tree has three levels below the link: `fan-out` classes, each with
//! `fan-out` subclasses, each with `fan-out` leaves (1,000 leaves for the
//! default), all shares equal. Every leaf starts with 4 cells and each
//! cycle dequeues a cell and enqueues one for the same queue, so every leaf
//! stays active. The model's time advances one OC-3c cell time (2,726 ns,
//! the i960 output port controller's line) per cycle; a period of 0 is the
//! exact limit (nothing wakes or empties here, so it never recomputes).
//!
//! Count the instructions of two runs and divide the difference by the
//! difference of cycles, so set-up cancels:
//!
//! ```text
//! cargo build --release -p aurora-sched --example hier_cost
//! for n in 200000 400000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/hc.$n \
//!     target/release/examples/hier_cost flat $n 10000 2>&1 | grep refs
//! done
//! ```
//!
//! (instructions at 400,000 − instructions at 200,000) / 200,000 is the
//! cost per cycle.

use std::hint::black_box;

use aurora_sched::{ClassSpec, ClassTree, Discipline, FlatApprox, FlatConfig, Hwfq, Limits, Share};
use aurora_time::{Duration, Instant};

const CELL_NS: i64 = 2726;

fn tree(fan: usize) -> ClassTree {
    let share = Share::Fraction(1.0 / fan as f64);
    let mut spec = vec![ClassSpec::new("link", None, Share::Fraction(1.0), None)];
    let mut q = 0;
    for a in 0..fan {
        let an = format!("c{a}");
        spec.push(ClassSpec::new(&an, Some("link"), share, None));
        for b in 0..fan {
            let bn = format!("c{a}.{b}");
            spec.push(ClassSpec::new(&bn, Some(&an), share, None));
            for c in 0..fan {
                let cn = format!("c{a}.{b}.{c}");
                spec.push(ClassSpec::new(&cn, Some(&bn), share, Some(q)));
                q += 1;
            }
        }
    }
    ClassTree::new(spec).expect("a valid tree")
}

fn run<D: Discipline<u32>>(d: &mut D, leaves: u32, cycles: u64) -> u64 {
    let mut now = Instant::ZERO;
    for q in 0..leaves {
        for i in 0..4 {
            d.enqueue(q, i, 1, now).expect("room");
        }
    }
    let mut sum = 0u64;
    for _ in 0..cycles {
        now += Duration::from_nanos(CELL_NS);
        let (q, item) = d.dequeue(black_box(now)).expect("a cell waits");
        sum += item as u64;
        d.enqueue(black_box(q), item, 1, now).expect("room");
    }
    sum
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: hier_cost <hwfq|flat> <cycles> [update period in us] [fan-out]";
    let mode = args.get(1).expect(usage);
    let cycles: u64 = args.get(2).expect(usage).parse().expect(usage);
    let period_us: i64 = args.get(3).map_or(10_000, |a| a.parse().expect(usage));
    let fan: usize = args.get(4).map_or(10, |a| a.parse().expect(usage));
    let t = tree(fan);
    let leaves = t.leaves().len() as u32;
    let limits = Limits {
        port: 8 * leaves as usize,
        queue: 8,
    };
    let sum = match mode.as_str() {
        "hwfq" => run(&mut Hwfq::new(&t, limits), leaves, cycles),
        "flat" => {
            let config = FlatConfig::new(Duration::from_micros(period_us));
            let mut f = FlatApprox::new(&t, limits, config);
            let sum = run(&mut f, leaves, cycles);
            eprintln!(
                "{} mappings, {} steps a walk",
                f.mappings(),
                f.steps_per_walk()
            );
            sum
        }
        _ => panic!("{usage}"),
    };
    println!("{mode}: {cycles} cycles over {leaves} leaves ({sum})");
}
