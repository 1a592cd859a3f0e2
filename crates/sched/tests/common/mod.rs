//! What the discipline tests share: an independent fluid GPS reference, a
//! line that pulls items from a discipline, and the invariants every
//! discipline must keep.
#![allow(dead_code)]

use std::collections::VecDeque;

use aurora_sched::{Discipline, DropReason, QueueId};
use aurora_time::Instant;

/// An item offered to a port: at `t` ns, for queue `q`, of length `len`.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub t: i64,
    pub q: QueueId,
    pub len: u32,
}

/// A fluid GPS server, simulated event by event in `f64`: between events
/// every session with unfinished work is served at `rate · w_i / Σ busy w`,
/// and an item finishes when its last bit is served. Nothing here knows of
/// virtual time.
pub struct Gps {
    w: Vec<f64>,
    rate: f64,
    t: f64,
    /// Per session: (item id, work left) in arrival order.
    queues: Vec<VecDeque<(usize, f64)>>,
    /// Work each session has received.
    pub served: Vec<f64>,
    /// When each item finished, by id.
    pub finish: Vec<Option<f64>>,
}

impl Gps {
    /// A GPS server with these weights and `rate` length units per ns.
    pub fn new(weights: &[u32], rate: f64) -> Self {
        Gps {
            w: weights.iter().map(|&w| f64::from(w)).collect(),
            rate,
            t: 0.0,
            queues: vec![VecDeque::new(); weights.len()],
            served: vec![0.0; weights.len()],
            finish: Vec::new(),
        }
    }

    /// Item `id` of `len` arrives for session `q` at `t` (not before the
    /// last event).
    pub fn arrive(&mut self, t: f64, q: usize, id: usize, len: f64) {
        self.run_to(t);
        if self.finish.len() <= id {
            self.finish.resize(id + 1, None);
        }
        // An empty item finishes when the items before it in its session do.
        if len == 0.0 && self.queues[q].is_empty() {
            self.finish[id] = Some(t);
            return;
        }
        self.queues[q].push_back((id, len));
    }

    /// Serves the fluid until `t`.
    pub fn run_to(&mut self, t: f64) {
        while self.t < t {
            let busy: Vec<usize> = (0..self.w.len())
                .filter(|&i| !self.queues[i].is_empty())
                .collect();
            if busy.is_empty() {
                self.t = t;
                return;
            }
            let wsum: f64 = busy.iter().map(|&i| self.w[i]).sum();
            let rate_of = |i: usize| self.rate * self.w[i] / wsum;
            let first = busy
                .iter()
                .map(|&i| self.queues[i][0].1 / rate_of(i))
                .fold(f64::INFINITY, f64::min);
            let dt = first.min(t - self.t);
            for &i in &busy {
                let r = rate_of(i);
                let head = &mut self.queues[i][0];
                let got = (r * dt).min(head.1);
                head.1 -= got;
                self.served[i] += got;
            }
            self.t += dt;
            for &i in &busy {
                while let Some(&(id, left)) = self.queues[i].front() {
                    if left > 1e-9 {
                        break;
                    }
                    self.served[i] += left;
                    self.finish[id] = Some(self.t);
                    self.queues[i].pop_front();
                }
            }
        }
    }

    /// Whether session `q` has unfinished work.
    pub fn busy(&self, q: usize) -> bool {
        !self.queues[q].is_empty()
    }
}

/// One item the line sent.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub id: usize,
    pub q: QueueId,
    pub len: u32,
    /// When its first bit went out, ns.
    pub start: i64,
    /// When its last bit went out, ns.
    pub end: i64,
}

/// What a run of a discipline did.
#[derive(Debug, Default)]
pub struct Run {
    pub sent: Vec<Sent>,
    pub dropped: Vec<(usize, DropReason)>,
}

/// Port limits and queue count a run checks against.
#[derive(Clone, Copy)]
pub struct Bounds {
    pub queues: usize,
    pub port: usize,
    pub queue: usize,
}

/// Offers `arrivals` (sorted by time) to `d` and sends on a line of one
/// length unit per `ns_per_unit` ns (an item of length 0 takes no time):
/// whenever the line is free and an item waits, it asks `d` for one at that
/// instant, after any arrivals at the same instant. Item ids are arrival
/// indices. Checks on the way that the discipline keeps its limits, counts
/// right, returns an item whenever it holds one, keeps every queue's order,
/// and accounts for every item.
pub fn run_line<D: Discipline<usize> + ?Sized>(
    d: &mut D,
    arrivals: &[Arrival],
    ns_per_unit: i64,
    bounds: Bounds,
) -> Run {
    run_line_with(d, arrivals, ns_per_unit, bounds, |_, _| {})
}

/// As [`run_line`], calling `hook(d, k)` before the `k`-th event.
pub fn run_line_with<D: Discipline<usize> + ?Sized>(
    d: &mut D,
    arrivals: &[Arrival],
    ns_per_unit: i64,
    bounds: Bounds,
    mut hook: impl FnMut(&mut D, usize),
) -> Run {
    let mut run = Run::default();
    let mut events = 0;
    let mut held = vec![0usize; bounds.queues];
    // What each queue holds, oldest first, as the model of the discipline.
    let mut fifo: Vec<VecDeque<usize>> = vec![VecDeque::new(); bounds.queues];
    let mut next = 0;
    // The line is free from `free_at`; `clock` is the last event's time.
    let mut free_at = i64::MIN;
    let mut clock = i64::MIN;
    loop {
        let held_total: usize = held.iter().sum();
        // The next event: an arrival, or the line freeing with work waiting.
        let arrival_t = arrivals.get(next).map(|a| a.t);
        let send_t = if held_total > 0 {
            Some(free_at.max(clock))
        } else {
            None
        };
        let t = match (arrival_t, send_t) {
            (None, None) => break,
            (Some(a), None) => a,
            (None, Some(s)) => s,
            (Some(a), Some(s)) => a.min(s),
        };
        clock = t;
        hook(d, events);
        events += 1;
        if arrival_t == Some(t) {
            let a = arrivals[next];
            let id = next;
            next += 1;
            match d.enqueue(a.q, id, a.len, Instant::from_nanos(t)) {
                Ok(()) => {
                    assert!((a.q as usize) < bounds.queues, "accepted for no such queue");
                    held[a.q as usize] += 1;
                    fifo[a.q as usize].push_back(id);
                }
                Err(dropped) => {
                    assert_eq!(dropped.item, id, "a drop hands back its item");
                    let expect = if a.q as usize >= bounds.queues {
                        DropReason::NoSuchQueue
                    } else if held[a.q as usize] >= bounds.queue {
                        DropReason::QueueFull
                    } else if held_total >= bounds.port {
                        DropReason::PortFull
                    } else {
                        panic!("item {id} refused ({:?}) with room for it", dropped.reason)
                    };
                    assert_eq!(dropped.reason, expect, "reason for dropping {id}");
                    run.dropped.push((id, dropped.reason));
                }
            }
        } else {
            let now = Instant::from_nanos(t);
            let (q, id) = d
                .dequeue(now)
                .unwrap_or_else(|| panic!("dequeue gave nothing with {held_total} held"));
            assert_eq!(arrivals[id].q, q, "item {id} came out of the wrong queue");
            assert_eq!(
                fifo[q as usize].pop_front(),
                Some(id),
                "queue {q} out of order"
            );
            held[q as usize] -= 1;
            let len = arrivals[id].len;
            let end = t + i64::from(len) * ns_per_unit;
            run.sent.push(Sent {
                id,
                q,
                len,
                start: t,
                end,
            });
            free_at = end;
        }
        let total: usize = held.iter().sum();
        assert_eq!(d.len(), total, "len after t={t}");
        assert_eq!(d.is_empty(), total == 0);
        assert!(total <= bounds.port, "port limit exceeded");
        for (q, &h) in held.iter().enumerate() {
            assert!(h <= bounds.queue, "queue {q} limit exceeded");
            assert_eq!(d.queue_len(q as QueueId), h, "queue_len({q})");
        }
        assert_eq!(d.queue_len(bounds.queues as QueueId), 0);
    }
    assert!(d.dequeue(Instant::from_nanos(free_at.max(0))).is_none());
    assert_eq!(
        run.sent.len() + run.dropped.len(),
        arrivals.len(),
        "every item sent or dropped"
    );
    run
}

/// The GPS finish time of every item of `arrivals` that was not dropped,
/// on a line of `rate` units per ns.
pub fn gps_finish(
    weights: &[u32],
    arrivals: &[Arrival],
    dropped: &[(usize, DropReason)],
    rate: f64,
) -> Vec<Option<f64>> {
    let mut gps = Gps::new(weights, rate);
    let mut drop = vec![false; arrivals.len()];
    for &(id, _) in dropped {
        drop[id] = true;
    }
    for (id, a) in arrivals.iter().enumerate() {
        if !drop[id] {
            gps.arrive(a.t as f64, a.q as usize, id, f64::from(a.len));
        }
    }
    gps.run_to(f64::INFINITY.min(1e18));
    let mut f = gps.finish;
    f.resize(arrivals.len(), None);
    f
}

/// A small deterministic generator for tests that need no shrinking.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Per dequeue of `run`: its queue, its length, and every queue's length
/// just before it.
pub fn dequeue_log(
    queues: usize,
    arrivals: &[Arrival],
    run: &Run,
) -> Vec<(QueueId, u32, Vec<usize>)> {
    let mut dropped = vec![false; arrivals.len()];
    for &(id, _) in &run.dropped {
        dropped[id] = true;
    }
    let mut held = vec![0usize; queues];
    let mut next = 0;
    let mut log = Vec::new();
    for s in &run.sent {
        while next < arrivals.len() && arrivals[next].t <= s.start {
            if !dropped[next] {
                held[arrivals[next].q as usize] += 1;
            }
            next += 1;
        }
        log.push((s.q, s.len, held.clone()));
        held[s.q as usize] -= 1;
    }
    log
}

/// The largest `G(k2) − G(k1)` over dequeues `k1 < k2` such that
/// `backlogged(held before k)` holds for every dequeue `k` in `k1..=k2`
/// and still after every dequeue in `k1..k2`, where `G(k)` is the sum of
/// `gain(q, len)` over the dequeues before `k`: the worst an interval of
/// continuous backlog does, for bounds of the form `Σ gain < bound`.
pub fn worst_interval(
    log: &[(QueueId, u32, Vec<usize>)],
    backlogged: impl Fn(&[usize]) -> bool,
    gain: impl Fn(QueueId, u32) -> f64,
) -> f64 {
    let mut worst = f64::NEG_INFINITY;
    let mut g = 0.0;
    let mut least: Option<f64> = None;
    for (q, len, held) in log {
        if backlogged(held) {
            if let Some(m) = least {
                worst = worst.max(g - m);
            }
            least = Some(least.map_or(g, |m: f64| m.min(g)));
        } else {
            least = None;
        }
        g += gain(*q, *len);
        let mut after = held.clone();
        after[*q as usize] -= 1;
        if !backlogged(&after) {
            least = None;
        }
    }
    worst
}

/// The longest item of each queue, and of all, among `arrivals`.
pub fn longest(queues: usize, arrivals: &[Arrival]) -> (Vec<f64>, f64) {
    let mut per = vec![0.0f64; queues];
    for a in arrivals {
        if (a.q as usize) < queues {
            per[a.q as usize] = per[a.q as usize].max(f64::from(a.len));
        }
    }
    let all = per.iter().copied().fold(0.0, f64::max);
    (per, all)
}
