//! `aurora bench sched`: what one cell cycle (one enqueue and one dequeue)
//! costs each output-port discipline with 1,000 busy queues of cells.
//!
//! Each discipline starts with 4 cells in each of its queues; a cycle takes
//! the next cell out and puts one back into the queue it came from, so
//! every queue stays busy, and the model's time moves on one OC-3c cell
//! time (the i960 output port controller's line in the seed). The timed
//! figures are ns per cycle (best of three runs), cycles a second on one
//! core against OC-768c's cell rate, and against the same loop around a
//! discipline that holds one cell (`null`: the harness's own share).
//! `--callgrind` counts instructions instead, repeatably: it runs this
//! command under valgrind for two cycle counts and divides the difference,
//! so set-up cancels, and prints each discipline's count against the
//! seed's budget of 80 instructions a cell time (30 for DRR).

use std::hint::black_box;
use std::time::Instant as Wall;

use aurora_sched::{
    ClassSpec, ClassTree, Discipline, Drr, Fifo, FlatApprox, FlatConfig, Hwfq, Limits, Priority,
    QueueId, Share, Wf2qPlus, Wfq,
};
use aurora_time::{Duration, Instant};

use crate::bench_net::OC768_CELLS;

/// Busy queues.
const QUEUES: usize = 1000;
/// Cells in each queue at the start.
const FILL: u32 = 4;
/// An OC-3c cell time, ns.
const CELL_NS: i64 = 2726;
/// The cycle counts `--callgrind` compares.
const CALLGRIND_CYCLES: [u64; 2] = [100_000, 300_000];

/// Every discipline measured, in order, with its instruction budget per
/// cycle (the seed's 80, DRR's 30), if it has one.
const ALL: [(&str, Option<f64>); 10] = [
    ("null", None),
    ("fifo", None),
    ("priority", None),
    ("drr", Some(30.0)),
    ("wfq", Some(80.0)),
    ("wf2q+", Some(80.0)),
    ("wf2q+ weights 1-8", Some(80.0)),
    ("hwfq 10x10x10", None),
    ("flat walk 10ms", Some(80.0)),
    ("flat walk 1ms", Some(80.0)),
];

/// A discipline that holds one cell: the loop's own cost.
struct Null(Option<(QueueId, u32)>);

impl Discipline<u32> for Null {
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: u32,
        _len: u32,
        _now: Instant,
    ) -> Result<(), aurora_sched::Dropped<u32>> {
        self.0 = Some((queue, item));
        Ok(())
    }
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, u32)> {
        self.0.take()
    }
    fn len(&self) -> usize {
        usize::from(self.0.is_some())
    }
    fn queue_len(&self, _queue: QueueId) -> usize {
        usize::from(self.0.is_some())
    }
    fn for_each(&self, f: &mut dyn FnMut(&u32)) {
        self.0.iter().for_each(|(_, item)| f(item));
    }
}

/// Three levels of `fan` classes below the link, `fan`^3 leaves, equal
/// shares.
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
                spec.push(ClassSpec::new(
                    &format!("c{a}.{b}.{c}"),
                    Some(&bn),
                    share,
                    Some(q),
                ));
                q += 1;
            }
        }
    }
    ClassTree::new(spec).expect("a valid tree")
}

/// Fills every queue, then runs `cycles` cycles; returns a checksum.
#[inline(never)]
fn cycle<D: Discipline<u32>>(d: &mut D, queues: usize, cycles: u64) -> u64 {
    let mut now = Instant::ZERO;
    for q in 0..queues as QueueId {
        for i in 0..FILL {
            let _ = d.enqueue(q, i, 1, now);
        }
    }
    let mut sum = 0u64;
    for _ in 0..cycles {
        now += Duration::from_nanos(CELL_NS);
        let Some((q, item)) = d.dequeue(black_box(now)) else {
            break;
        };
        sum = sum.wrapping_add(u64::from(item) ^ u64::from(q));
        let _ = d.enqueue(black_box(q), item, 1, now);
    }
    sum
}

/// Runs `cycles` cycles of discipline `name`.
fn run(name: &str, cycles: u64) -> Result<u64, String> {
    let limits = Limits {
        port: QUEUES * 8,
        queue: 8,
    };
    let ones = vec![1u32; QUEUES];
    let mixed: Vec<u32> = (0..QUEUES as u32).map(|i| 1 + i % 8).collect();
    let rate = (1e9 / CELL_NS as f64) as u64;
    let flat = |ms: i64| {
        FlatApprox::new(
            &tree(10),
            limits,
            FlatConfig::new(Duration::from_millis(ms)),
        )
    };
    Ok(match name {
        "null" => cycle(&mut Null(None), 1, cycles),
        "fifo" => cycle(&mut Fifo::new(QUEUES, limits), QUEUES, cycles),
        "priority" => cycle(&mut Priority::new(8, limits), 8, cycles),
        "drr" => cycle(&mut Drr::new(&ones, limits), QUEUES, cycles),
        "wfq" => cycle(&mut Wfq::new(&ones, rate, limits), QUEUES, cycles),
        "wf2q+" => cycle(&mut Wf2qPlus::new(&ones, limits), QUEUES, cycles),
        "wf2q+ weights 1-8" => cycle(&mut Wf2qPlus::new(&mixed, limits), QUEUES, cycles),
        "hwfq 10x10x10" => cycle(&mut Hwfq::new(&tree(10), limits), QUEUES, cycles),
        "flat walk 10ms" => cycle(&mut flat(10), QUEUES, cycles),
        "flat walk 1ms" => cycle(&mut flat(1), QUEUES, cycles),
        other => return Err(format!("no discipline \"{other}\" to measure")),
    })
}

/// Instructions callgrind counts for `cycles` cycles of `name`.
fn instructions(name: &str, cycles: u64) -> Result<u64, String> {
    crate::callgrind::instructions(&[
        "bench",
        "sched",
        "--only",
        name,
        "--cycles",
        &cycles.to_string(),
    ])
}

/// The command: every discipline, timed, or (`callgrind`) counted; `only`
/// runs one discipline for `cycles` cycles and prints its checksum (what
/// `--callgrind` runs under valgrind).
pub fn main(callgrind: bool, only: Option<&str>, cycles: u64) -> Result<(), String> {
    if let Some(name) = only {
        println!("{name}: {cycles} cycles, checksum {}", run(name, cycles)?);
        return Ok(());
    }
    let cpu = crate::bench_iperf::cpu();
    if callgrind {
        println!(
            "aurora bench sched --callgrind: instructions per cell cycle (one enqueue + one dequeue), \
             {QUEUES} busy queues of cells; {cpu}"
        );
        let mut null = 0.0;
        for (name, budget) in ALL {
            let a = instructions(name, CALLGRIND_CYCLES[0])?;
            let b = instructions(name, CALLGRIND_CYCLES[1])?;
            let per = (b as f64 - a as f64) / (CALLGRIND_CYCLES[1] - CALLGRIND_CYCLES[0]) as f64;
            if name == "null" {
                null = per;
            }
            let verdict = budget.map_or(String::new(), |limit| {
                format!(
                    "  (<= {limit:.0}: {})",
                    if per <= limit { "ok" } else { "OVER" }
                )
            });
            println!(
                "  {name:<20} {per:8.1} instructions ({:.1} beyond the loop's own){verdict}",
                per - null
            );
        }
        return Ok(());
    }
    println!(
        "aurora bench sched: ns per cell cycle (one enqueue + one dequeue), {QUEUES} busy queues, \
         best of 3; {cpu}"
    );
    let n = cycles.max(1);
    let mut null = 0.0;
    for (name, _) in ALL {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Wall::now();
            black_box(run(name, n)?);
            best = best.min(t.elapsed().as_secs_f64() / n as f64);
        }
        if name == "null" {
            null = best;
        }
        let per_s = 1.0 / best;
        println!(
            "  {name:<20} {:7.1} ns  {:6.1} M cells/s = {:.2} x OC-768c   bare loop / this {:.3}",
            best * 1e9,
            per_s / 1e6,
            per_s / OC768_CELLS,
            null / best
        );
    }
    Ok(())
}
