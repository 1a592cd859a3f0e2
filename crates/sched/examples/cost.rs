//! Instructions per enqueue + dequeue of each discipline, with 1,000 busy
//! queues of cells.
//!
//! `cost <discipline> <rounds>` fills 1,000 queues with [`FILL`] cells each,
//! then runs `rounds` rounds of one enqueue (queues in turn, one cell of
//! length 1) and one dequeue, the clock moving one cell time (1 ns on a line
//! of 10^9 cells/s) a round. Run it under callgrind with two round counts:
//! the difference of the instruction totals over the difference of the
//! rounds is the cost of one round, set-up and process start cancelled out.
//! `cost --callgrind [discipline...]` does exactly that (valgrind must be
//! installed) and prints a table:
//!
//! ```text
//! cargo build --release -p aurora-sched --example cost
//! target/release/examples/cost --callgrind
//! ```
//!
//! Measured with `cost --callgrind` (rustc 1.95, release profile, static
//! dispatch; `lscpu` model name "AMD EPYC", though the counts depend only
//! on the compiled code), instructions per round, then the same less the
//! `null` loop's 7.3 (the harness's own share):
//!
//! ```text
//!               before          after
//!             round  -loop    round  -loop    budget (-loop)
//! null          7.3    -        7.3    -
//! fifo         68.0   60.7     58.0   50.7
//! prio        133.6  126.3    112.6  105.3
//! drr         115.0  107.7     93.0   85.7       30
//! wfq         230.2  222.9    148.0  140.7       80
//! wf2q        180.1  172.8    127.4  120.1       80
//! wfq-mixed   462.1  454.8    496.4  489.1
//! wf2q-mixed  282.1  274.8    237.6  230.3
//! ```
//!
//! "Before" is the code at the merge `0b3c830` (a safe ring buffer per
//! queue); "after" is: per-queue lists through one slot arena for the port
//! (`store.rs`); DRR turns begun as soon as the previous one ends; the
//! calendars' links and keys kept in the sessions' own records; WF2Q+
//! counting a cell's work in `V` without a division; WFQ running its fluid
//! clock only when a departure falls due or a session enters; FIFO on a
//! power-of-two ring; a three-level bitmap for priority. The fair queues
//! stay exact (every known-answer and property test unchanged).
//!
//! The budgets (DRR 30, WFQ and WF2Q+ 80 a round) are not met. Where the
//! instructions of a round go now, read off the compiled loop (x86-64):
//!
//! - every discipline's enqueue into a busy queue, about 28: admission
//!   (queue in range, queue and port limits) 8, a slot off the free list 5,
//!   item and word 2–3, the link at the tail 5, two counts 3, and address
//!   arithmetic;
//! - a pop from a queue's list, about 17, and 2 more for the next head's
//!   word;
//! - DRR's dequeue, about 47 with the pop: with a quantum of one cell every
//!   dequeue ends a turn and begins the next (about 12);
//! - WF2Q+'s dequeue, about 85: calendar pop 12, eligibility 6, item pop
//!   19, new tags 7, calendar insertion (bucket, range and in-order check)
//!   23, `V` 12, limit check 3;
//! - the loop itself, about 13 once its variables share registers with a
//!   body this size (7 alone).
//!
//! Counted by hand with every value in a register and no address
//! arithmetic to spare, the same steps come to about 45 for DRR and 75 for
//! WF2Q+ (less the loop): DRR's 30 is below what the admission checks, one
//! list push and pop and a turn change take, and WF2Q+'s 80 is within
//! reach only of code tighter than the compiler makes here (it reloads
//! pointers after stores it cannot prove harmless, recomputes addresses,
//! and spills the loop's variables).
//! `wfq-mixed` is the one case that costs more than before: its sessions
//! keep leaving and re-entering the fluid system (the light ones' queues
//! overflow), so the fluid clock runs about twice a round and its
//! bookkeeping outweighs what the lazy clock saves.
//!
//! Bounds checks are skipped where an invariant guarantees the index (the
//! arena's links, the calendars' ids, the active list, the bitmap); each
//! `unsafe` block names its invariant. The same code with `Option` slots
//! and checked indexing everywhere measured fifo 64, prio 146, drr 117,
//! wfq 180.5, wf2q 160.4: the unchecked code saves 6 to 33 a round.
//!
//! Disciplines: `null` (the loop alone, holding one item: its cost is the
//! harness's share of every other figure),
//! `fifo`, `prio`, `drr` (quantum 1 cell), `wfq`, `wf2q` (all weights 1),
//! and `wfq-mixed`, `wf2q-mixed` (weights 1 to 8 in turn).

use std::hint::black_box;
use std::process::Command;

use aurora_sched::{Discipline, Drr, Fifo, Limits, Priority, QueueId, Wf2qPlus, Wfq};
use aurora_time::Instant;

/// Busy queues.
const QUEUES: usize = 1000;
/// Cells in each queue before the measured rounds.
const FILL: u32 = 4;
/// The two round counts `--callgrind` runs.
const ROUNDS: [u64; 2] = [50_000, 250_000];
/// Every discipline, in table order.
const ALL: [&str; 8] = [
    "null",
    "fifo",
    "prio",
    "drr",
    "wfq",
    "wf2q",
    "wfq-mixed",
    "wf2q-mixed",
];

fn limits() -> Limits {
    Limits {
        port: QUEUES * 16,
        queue: 16,
    }
}

fn mixed() -> Vec<u32> {
    (0..QUEUES as u32).map(|i| 1 + i % 8).collect()
}

/// Fills, then runs the rounds; returns a checksum so nothing is optimised
/// away.
#[inline(never)]
fn run<D: Discipline<u64>>(mut d: D, rounds: u64) -> u64 {
    let mut now = Instant::ZERO;
    let mut seq = 0u64;
    for _ in 0..FILL {
        for q in 0..QUEUES as QueueId {
            d.enqueue(q, seq, 1, now).expect("fill fits");
            seq += 1;
        }
    }
    let mut sum = 0u64;
    let mut q: QueueId = 0;
    for _ in 0..rounds {
        now = Instant::from_nanos(now.as_nanos() + 1);
        if d.enqueue(q, seq, 1, now).is_err() {
            sum += 1;
        }
        seq += 1;
        q += 1;
        if q == QUEUES as QueueId {
            q = 0;
        }
        if let Some((dq, item)) = d.dequeue(now) {
            sum = sum.wrapping_add(item ^ u64::from(dq));
        }
    }
    sum
}

/// The loop with no discipline: holds one item, for the loop's own cost.
struct Null(Option<(QueueId, u64)>);

impl Discipline<u64> for Null {
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: u64,
        _len: u32,
        _now: Instant,
    ) -> Result<(), aurora_sched::Dropped<u64>> {
        self.0 = Some((queue, item));
        Ok(())
    }
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, u64)> {
        self.0.take()
    }
    fn len(&self) -> usize {
        usize::from(self.0.is_some())
    }
    fn queue_len(&self, _queue: QueueId) -> usize {
        0
    }
}

fn run_named(name: &str, rounds: u64) -> u64 {
    let ones = vec![1u32; QUEUES];
    match name {
        "null" => run(Null(None), black_box(rounds)),
        "fifo" => run(Fifo::new(QUEUES, limits()), rounds),
        "prio" => run(Priority::new(QUEUES, limits()), rounds),
        "drr" => run(Drr::equal(QUEUES, 1, limits()), rounds),
        "wfq" => run(Wfq::new(&ones, 1_000_000_000, limits()), rounds),
        "wf2q" => run(Wf2qPlus::new(&ones, limits()), rounds),
        "wfq-mixed" => run(Wfq::new(&mixed(), 1_000_000_000, limits()), rounds),
        "wf2q-mixed" => run(Wf2qPlus::new(&mixed(), limits()), rounds),
        _ => {
            eprintln!("unknown discipline {name}; one of {ALL:?}");
            std::process::exit(2);
        }
    }
}

/// The total instructions callgrind counts for `cost name rounds`.
fn callgrind_total(name: &str, rounds: u64) -> u64 {
    let me = std::env::current_exe().expect("own path");
    let out = std::env::temp_dir().join(format!(
        "sched-cost-{}-{name}-{rounds}.cg",
        std::process::id()
    ));
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&me)
        .arg(name)
        .arg(rounds.to_string())
        .output()
        .expect("valgrind runs (apt-get install valgrind)");
    assert!(status.status.success(), "valgrind failed: {status:?}");
    let text = std::fs::read_to_string(&out).expect("callgrind output");
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .expect("a totals line")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--callgrind") {
        let names: Vec<&str> = if args.len() > 1 {
            args[1..].iter().map(String::as_str).collect()
        } else {
            ALL.to_vec()
        };
        println!("instructions per round (one enqueue + one dequeue), {QUEUES} busy queues, cells");
        for name in names {
            let a = callgrind_total(name, ROUNDS[0]);
            let b = callgrind_total(name, ROUNDS[1]);
            let per = (b as f64 - a as f64) / (ROUNDS[1] - ROUNDS[0]) as f64;
            println!("{name:<12} {per:8.1}");
        }
        return;
    }
    let name = args.first().map_or("drr", String::as_str);
    let rounds = args
        .get(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(1_000_000);
    let sum = run_named(name, rounds);
    println!("{name} {rounds} rounds: checksum {sum}");
}
