//! Test support for the hierarchical schedulers: random link-sharing trees,
//! an independent hierarchical fluid (H-GPS) simulator, and a link that
//! pulls items from a discipline.
//!
//! The reference is written apart from the crate: its tree is a plain list
//! of parents and shares, its rates come from a recursive walk, and the
//! fluid advances event by event (arrivals and queues emptying) in `f64`.

#![allow(dead_code)]

use aurora_sched::{ClassSpec, Discipline, DropReason, Share};
use aurora_time::Instant;
use proptest::prelude::*;

/// A tree as the reference sees it. Node 0 is the root; a node's queue is
/// `Some` for leaves.
#[derive(Clone, Debug)]
pub struct RefTree {
    pub parent: Vec<Option<usize>>,
    /// Fraction of the parent's rate.
    pub share: Vec<f64>,
    pub queue: Vec<Option<u32>>,
}

impl RefTree {
    pub fn children(&self, n: usize) -> Vec<usize> {
        (0..self.parent.len())
            .filter(|&c| self.parent[c] == Some(n))
            .collect()
    }

    pub fn queues(&self) -> usize {
        self.queue.iter().flatten().count()
    }

    /// Levels below the root.
    pub fn depth(&self) -> usize {
        (0..self.parent.len())
            .map(|mut n| {
                let mut d = 0;
                while let Some(p) = self.parent[n] {
                    d += 1;
                    n = p;
                }
                d
            })
            .max()
            .unwrap_or(0)
    }

    /// The description the crate builds its tree from.
    pub fn specs(&self) -> Vec<ClassSpec> {
        let name = |i: usize| format!("n{i}");
        (0..self.parent.len())
            .map(|i| ClassSpec {
                name: name(i),
                parent: self.parent[i].map(name),
                share: Share::Fraction(self.share[i]),
                queue: self.queue[i],
            })
            .collect()
    }

    fn active(&self, kids: &[Vec<usize>], n: usize, backlogged: &dyn Fn(u32) -> bool) -> bool {
        match self.queue[n] {
            Some(q) => backlogged(q),
            None => kids[n].iter().any(|&c| self.active(kids, c, backlogged)),
        }
    }

    fn give(
        &self,
        kids: &[Vec<usize>],
        n: usize,
        rate: f64,
        backlogged: &dyn Fn(u32) -> bool,
        out: &mut [f64],
    ) {
        if let Some(q) = self.queue[n] {
            out[q as usize] = rate;
            return;
        }
        let busy: Vec<usize> = kids[n]
            .iter()
            .copied()
            .filter(|&c| self.active(kids, c, backlogged))
            .collect();
        let total: f64 = busy.iter().map(|&c| self.share[c]).sum();
        for c in busy {
            self.give(kids, c, rate * self.share[c] / total, backlogged, out);
        }
    }

    /// Each queue's H-GPS rate when `backlogged` queues have data and the
    /// link serves `link`: recursively from the root, an active child
    /// (one with a backlogged leaf below) gets its parent's rate in
    /// proportion to its share among the active children.
    pub fn rates(&self, backlogged: &dyn Fn(u32) -> bool, link: f64) -> Vec<f64> {
        let kids: Vec<Vec<usize>> = (0..self.parent.len()).map(|n| self.children(n)).collect();
        let mut out = vec![0.0; self.queues()];
        if self.active(&kids, 0, backlogged) {
            self.give(&kids, 0, link, backlogged, &mut out);
        }
        out
    }
}

/// A shape for the tree strategy: a leaf or a class, with a weight.
#[derive(Clone, Debug)]
pub enum Shape {
    Leaf(u32),
    Class(u32, Vec<Shape>),
}

fn build(shape: &[Shape], parent: usize, slack: u32, t: &mut RefTree) {
    let weight = |s: &Shape| match s {
        Shape::Leaf(w) | Shape::Class(w, _) => *w,
    };
    let total: u32 = shape.iter().map(weight).sum::<u32>() + slack;
    for s in shape {
        let me = t.parent.len();
        t.parent.push(Some(parent));
        t.share.push(weight(s) as f64 / total as f64);
        match s {
            Shape::Leaf(_) => {
                let q = t.queues() as u32;
                t.queue.push(Some(q));
            }
            Shape::Class(_, kids) => {
                t.queue.push(None);
                build(kids, me, slack, t);
            }
        }
    }
}

/// A tree from the root's children's shapes; every class's children own
/// their weights over (sum of weights + `slack`) of it.
pub fn tree_of(root: &[Shape], slack: u32) -> RefTree {
    let mut t = RefTree {
        parent: vec![None],
        share: vec![1.0],
        queue: vec![None],
    };
    build(root, 0, slack, &mut t);
    t
}

/// Random trees two or three levels deep (a few one level deep), with
/// weights 1..=10 and some of each class unowned.
pub fn arb_tree() -> impl Strategy<Value = RefTree> {
    let leaf = (1u32..=10).prop_map(Shape::Leaf);
    let class2 = (1u32..=10, prop::collection::vec(1u32..=10, 1..=3))
        .prop_map(|(w, ls)| Shape::Class(w, ls.into_iter().map(Shape::Leaf).collect()));
    let node2 = prop_oneof![leaf.clone(), class2];
    let class1 = (1u32..=10, prop::collection::vec(node2, 1..=4))
        .prop_map(|(w, kids)| Shape::Class(w, kids));
    let node1 = prop_oneof![1 => leaf, 3 => class1.clone()];
    (class1, prop::collection::vec(node1, 1..=3), 0u32..=4).prop_map(|(first, rest, slack)| {
        let mut root = vec![first];
        root.extend(rest);
        tree_of(&root, slack)
    })
}

/// An item arriving at a queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arrival {
    pub at: u64,
    pub queue: u32,
    pub len: u32,
}

/// Bursts: (queue selector, start, count, length class, spacing class).
pub type Bursts = Vec<(usize, u64, u32, u32, u64)>;

pub fn arb_bursts() -> impl Strategy<Value = Bursts> {
    prop::collection::vec(
        (0usize..1000, 0u64..40_000, 1u32..=12, 1u32..=3, 0u64..=3),
        1..40,
    )
}

/// Arrivals in time order from bursts: lengths 50, 100 or 150; items of a
/// burst together or 50, 100 or 150 ns apart.
pub fn arrivals(bursts: &Bursts, queues: usize) -> Vec<Arrival> {
    let mut a: Vec<Arrival> = bursts
        .iter()
        .flat_map(|&(sel, start, count, len, gap)| {
            (0..count as u64).map(move |k| Arrival {
                at: start + k * gap * 50,
                queue: (sel % queues) as u32,
                len: 50 * len,
            })
        })
        .collect();
    a.sort_by_key(|x| x.at);
    a
}

/// The H-GPS fluid system: each queue's backlog and cumulative service.
pub struct Fluid<'a> {
    tree: &'a RefTree,
    arrivals: &'a [Arrival],
    next: usize,
    link: f64,
    pub now: f64,
    pub backlog: Vec<f64>,
    pub served: Vec<f64>,
}

const EPS: f64 = 1e-7;

impl<'a> Fluid<'a> {
    pub fn new(tree: &'a RefTree, arrivals: &'a [Arrival], link: f64) -> Self {
        let n = tree.queues();
        Fluid {
            tree,
            arrivals,
            next: 0,
            link,
            now: 0.0,
            backlog: vec![0.0; n],
            served: vec![0.0; n],
        }
    }

    /// Runs the fluid to time `t` (arrivals at `t` included).
    pub fn advance(&mut self, t: f64) {
        loop {
            while self.next < self.arrivals.len() && self.arrivals[self.next].at as f64 <= self.now
            {
                let a = self.arrivals[self.next];
                self.backlog[a.queue as usize] += a.len as f64;
                self.next += 1;
            }
            if self.now >= t {
                return;
            }
            let backlog = self.backlog.clone();
            let rates = self.tree.rates(&|q| backlog[q as usize] > 0.0, self.link);
            let mut until = t;
            if self.next < self.arrivals.len() {
                until = until.min(self.arrivals[self.next].at as f64);
            }
            for (b, r) in self.backlog.iter().zip(&rates) {
                if *r > 0.0 {
                    until = until.min(self.now + b / r);
                }
            }
            let dt = until - self.now;
            for ((b, s), r) in self.backlog.iter_mut().zip(&mut self.served).zip(&rates) {
                let x = (r * dt).min(*b);
                *s += x;
                *b -= x;
                if *b < EPS {
                    *b = 0.0;
                }
            }
            self.now = until;
        }
    }
}

/// One item sent: when it started and ended on the line, its queue and
/// length, and its sequence number among all arrivals.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub start: u64,
    pub end: u64,
    pub queue: u32,
    pub len: u32,
    pub seq: usize,
}

/// A work-conserving line of 1 length unit per `ns_per_len` ns pulling
/// from `d`: arrivals due by each pull are enqueued first (at their own
/// times). Returns what was sent and what was refused.
pub fn run_line<D: Discipline<usize>>(
    d: &mut D,
    arrivals: &[Arrival],
    ns_per_len: u64,
) -> (Vec<Sent>, Vec<(usize, DropReason)>) {
    let mut sent = Vec::new();
    let mut dropped = Vec::new();
    let mut t = 0u64;
    let mut i = 0;
    loop {
        if d.is_empty() {
            if i == arrivals.len() {
                break;
            }
            t = t.max(arrivals[i].at);
        }
        while i < arrivals.len() && arrivals[i].at <= t {
            let a = arrivals[i];
            if let Err(e) = d.enqueue(a.queue, i, a.len, Instant::from_nanos(a.at as i64)) {
                assert_eq!(e.item, i);
                dropped.push((i, e.reason));
            }
            i += 1;
        }
        let (q, seq) = d
            .dequeue(Instant::from_nanos(t as i64))
            .expect("an item waits");
        assert_eq!(
            arrivals[seq].queue, q,
            "item handed back under another queue"
        );
        let len = arrivals[seq].len;
        let end = t + len as u64 * ns_per_len;
        sent.push(Sent {
            start: t,
            end,
            queue: q,
            len,
            seq,
        });
        t = end;
    }
    (sent, dropped)
}

/// The largest gap, over every start and end of a transmission, between a
/// queue's bytes sent (counting the item on the line as it goes) and its
/// H-GPS fluid service for the same arrivals on a line of 1 unit per ns,
/// with the queue and time; also checks that both systems have served the
/// same total then.
pub fn worst_gap(tree: &RefTree, arrivals: &[Arrival], sent: &[Sent]) -> (f64, u32, u64) {
    let mut fluid = Fluid::new(tree, arrivals, 1.0);
    let mut pkt = vec![0.0; tree.queues()];
    let mut worst = (0.0, 0, 0);
    let mut check = |fluid: &Fluid, pkt: &[f64], t: u64| {
        let total: f64 = pkt.iter().sum();
        let ftotal: f64 = fluid.served.iter().sum();
        assert!(
            (total - ftotal).abs() < 1e-3,
            "at {t}: sent {total}, fluid {ftotal}"
        );
        for (q, (p, f)) in pkt.iter().zip(&fluid.served).enumerate() {
            let gap = (p - f).abs();
            if gap > worst.0 {
                worst = (gap, q as u32, t);
            }
        }
    };
    for s in sent {
        fluid.advance(s.start as f64);
        check(&fluid, &pkt, s.start);
        pkt[s.queue as usize] += s.len as f64;
        fluid.advance(s.end as f64);
        check(&fluid, &pkt, s.end);
    }
    worst
}

/// Keeps the queues for which `on(slot, queue)` holds backlogged (topped up
/// to two cells of length 1 before each slot) and sends one cell per slot
/// of `cell_ns`, for `slots` slots. Returns, per queue, the cells sent and
/// the cells H-GPS would have sent given the queues backlogged at each slot
/// (per window of `window` slots), and the fraction of the link the
/// scheduler gave to the wrong queues: the sum over windows and queues of
/// |sent - ideal|, over twice the slots. The first `skip` slots are not
/// counted.
pub fn greedy<D: Discipline<usize>>(
    d: &mut D,
    tree: &RefTree,
    on: &dyn Fn(u64, u32) -> bool,
    (slots, skip): (u64, u64),
    cell_ns: u64,
    window: u64,
) -> (Vec<u64>, Vec<f64>, f64) {
    let n = tree.queues();
    let mut sent = vec![0u64; n];
    let mut ideal = vec![0.0; n];
    let mut win_sent = vec![0.0; n];
    let mut win_ideal = vec![0.0; n];
    let mut misallocated = 0.0;
    let mut seq = 0usize;
    let mut last: Vec<Option<usize>> = vec![None; n];
    for slot in 0..slots {
        let now = Instant::from_nanos((slot * cell_ns) as i64);
        for q in 0..n as u32 {
            if on(slot, q) {
                while d.queue_len(q) < 2 {
                    d.enqueue(q, seq, 1, now).expect("room for a cell");
                    seq += 1;
                }
            }
        }
        let rates = tree.rates(&|q| d.queue_len(q) > 0, 1.0);
        let got = d.dequeue(now);
        if let Some((q, s)) = got {
            if let Some(prev) = last[q as usize] {
                assert!(s > prev, "queue {q} reordered");
            }
            last[q as usize] = Some(s);
        }
        if slot < skip {
            continue;
        }
        if let Some((q, _)) = got {
            sent[q as usize] += 1;
            win_sent[q as usize] += 1.0;
        }
        for q in 0..n {
            ideal[q] += rates[q];
            win_ideal[q] += rates[q];
        }
        if (slot + 1) % window == 0 || slot + 1 == slots {
            for q in 0..n {
                misallocated += (win_sent[q] - win_ideal[q]).abs();
                win_sent[q] = 0.0;
                win_ideal[q] = 0.0;
            }
        }
    }
    (sent, ideal, misallocated / (2.0 * (slots - skip) as f64))
}

/// A random sequence of enqueues (to valid and invalid queues) and
/// dequeues checked against a model of per-queue FIFOs with `limits`:
/// every refusal has the right reason, every dequeue gives the oldest item
/// of some queue, nothing is lost or duplicated, and the counts agree.
pub fn check_against_model<D: Discipline<usize>>(
    d: &mut D,
    queues: usize,
    limits: aurora_sched::Limits,
    ops: &[(u8, u32, u32, u64)],
) -> Result<(), TestCaseError> {
    use std::collections::VecDeque;
    let mut model: Vec<VecDeque<usize>> = vec![VecDeque::new(); queues];
    let mut total = 0usize;
    let mut t = 0i64;
    for (seq, &(kind, sel, len, dt)) in ops.iter().enumerate() {
        t += dt as i64;
        let now = Instant::from_nanos(t);
        if kind < 3 {
            let q = if sel as usize % (queues + 3) >= queues {
                [queues as u32, queues as u32 + 7, u32::MAX][sel as usize % 3]
            } else {
                sel % queues as u32
            };
            let expect = if q as usize >= queues {
                Some(DropReason::NoSuchQueue)
            } else if total >= limits.port {
                Some(DropReason::PortFull)
            } else if model[q as usize].len() >= limits.queue {
                Some(DropReason::QueueFull)
            } else {
                None
            };
            match d.enqueue(q, seq, len, now) {
                Ok(()) => {
                    prop_assert_eq!(expect, None);
                    model[q as usize].push_back(seq);
                    total += 1;
                }
                Err(e) => {
                    prop_assert_eq!(Some(e.reason), expect);
                    prop_assert_eq!(e.item, seq);
                }
            }
        } else {
            match d.dequeue(now) {
                None => prop_assert_eq!(total, 0),
                Some((q, s)) => {
                    prop_assert_eq!(model[q as usize].pop_front(), Some(s));
                    total -= 1;
                }
            }
        }
        prop_assert_eq!(d.len(), total);
        prop_assert_eq!(d.is_empty(), total == 0);
        for (q, m) in model.iter().enumerate() {
            prop_assert_eq!(d.queue_len(q as u32), m.len());
        }
        prop_assert!(total <= limits.port);
    }
    // Drain: everything accepted comes out once.
    while let Some((q, s)) = d.dequeue(Instant::from_nanos(t)) {
        prop_assert_eq!(model[q as usize].pop_front(), Some(s));
        total -= 1;
    }
    prop_assert_eq!(total, 0);
    Ok(())
}

pub fn arb_ops() -> impl Strategy<Value = Vec<(u8, u32, u32, u64)>> {
    prop::collection::vec((0u8..6, any::<u32>(), 1u32..=3, 0u64..5_000), 0..400)
}
