//! The flat approximation of hierarchical WFQ: one WF2Q+ over the leaves of
//! a [`ClassTree`], whose weights a background task recomputes from the tree
//! and from which leaves have items waiting.
//!
//! Ndiaye's approximation replaces the WFQ of WFQs in [`crate::hier`] by a
//! single sorted queue (the one the Bellcore sequencer chip kept in
//! hardware): each leaf gets, as its weight, the rate H-GPS would give it
//! ([`ClassTree::hgps_rates`]), and a separate algorithm refreshes the
//! weights as classes become active and idle. Sending and receiving a cell
//! then cost the same as for a flat scheduler; the approximation's error
//! comes from weights that are out of date.
//!
//! # The weight update: two traversals, pipelined
//!
//! The mapping from tree to weights needs two passes over the tree:
//!
//! * **activity**, bottom-up (post-order): a leaf is active when items wait
//!   in its queue, a class when any child is; each class also sums the
//!   shares of its active children;
//! * **rates**, top-down (pre-order): the root's rate is 1 (the link); an
//!   active node's rate is its parent's rate times its share over the sum
//!   of the shares of its parent's active children. An *idle* node gets the
//!   rate it would receive if it became active now (its share is added to
//!   the sum), so a leaf that wakes up between updates is served at about
//!   its H-GPS rate at once instead of starving until the next mapping.
//!
//! The rates pass needs the activity pass's result, so done one after the
//! other they give a mapping every two traversals. As Lefelhocz found on
//! the i960, they pipeline: one depth-first *walk* visits each node twice,
//! once on the way down and once on the way up. On the way down it does the
//! rates pass using the activity the previous walk recorded; on the way up
//! it does the activity pass for the next walk. (Each node's children read
//! the parent's sum of active shares on their way down, which is before the
//! parent's way up in the same walk overwrites it, so every sibling group
//! reads one consistent snapshot.) Every walk therefore ends with a new
//! mapping: the first walk's rates come from the starting assumption that
//! every leaf is active (each leaf's guaranteed share), the second walk
//! gives the first mapping from observed activity, and so on. A mapping
//! reflects activity sampled during the walk before it: one to two update
//! periods old.
//!
//! # Pacing
//!
//! A walk has one step per leaf and two per class (down and up). With
//! `update_period` P > 0, walk k starts at `T(k)` and its step j of M is due
//! at `T(k) + P·j/M`; each [`Discipline::enqueue`] and
//! [`Discipline::dequeue`] first performs the steps due at its `now`, at
//! most [`FlatConfig::max_steps_per_op`]. A step costs a few dozen
//! instructions, so under load, when a call comes every cell time `c`, the
//! cost per cell is bounded by about `M·c/P` steps plus the check. When the
//! walk ends the new weights are put in force at once, by swapping the
//! vector of weights (no per-leaf work), and walk k+1 starts at
//! `max(T(k) + P, now)`. [`FlatApprox::mappings`] counts the mappings put
//! in force.
//!
//! With `update_period` 0 the approximation is exact: every enqueue that
//! wakes a leaf and every dequeue that empties one recomputes the mapping
//! from the current activity at once (both passes, O(nodes)); weights are
//! then always H-GPS's for the current set of backlogged leaves.
//!
//! A weight takes effect when the leaf's next finish tag is computed (when
//! the leaf becomes backlogged or its head leaves); a tag already computed
//! keeps the weight it was computed with.
//!
//! # The leaf scheduler, and swapping in the crate's WF2Q+
//!
//! The leaves are scheduled by [`MiniWf2q`], a small WF2Q+ of this module
//! written for equal-size cells (any length works; sorting is to one cell
//! of virtual time): virtual time and tags are integers in units of 2^-20
//! cell, the eligible leaves wait in a bucket queue by finish tag and the
//! ineligible ones in a bucket queue by start tag, each a ring of 4,096
//! one-cell buckets found through a two-level bitmap (tags beyond the ring
//! wait in a heap until it reaches them); items wait in one pool, linked
//! per leaf.
//!
//! It is reached only through the private trait `LeafScheduler` (a
//! [`Discipline`] plus `set_weight`, `weights` and `install`) and the
//! type alias `Leaves<T>` with its constructor `new_leaves`. To use the
//! crate's WF2Q+ (`wf2q.rs`, with `set_weight(queue, w)`) instead:
//!
//! 1. implement `LeafScheduler<T>` for it: `set_weight` converts the
//!    fraction of the link to its weight type and calls its `set_weight`;
//!    `weights` returns a mirror of the fractions (keep it in a small wrapper
//!    struct next to the WF2Q+ if it keeps none); `install` may keep the
//!    default, which calls `set_weight` for every queue;
//! 2. change `type Leaves<T>` to that type (or the wrapper) and `new_leaves`
//!    to build it with `queues` queues and `limits`;
//! 3. delete `MiniWf2q` and `Calendar`, or keep them for the instruction
//!    count (the default `install` is O(queues) once per walk, so per cell
//!    it adds about `queues·c/P` `set_weight` calls).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use aurora_time::{Duration, Instant};

use crate::tree::ClassTree;
use crate::{Discipline, DropReason, Dropped, Limits, QueueId};

const NIL: u32 = u32::MAX;

/// How the flat approximation recomputes its weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlatConfig {
    /// How long a walk of the tree (one new mapping) takes, in the model's
    /// time; 0 recomputes the mapping whenever a leaf wakes or empties.
    pub update_period: Duration,
    /// The most walk steps one enqueue or dequeue performs; if calls are
    /// too sparse to keep the pace, walks take longer than the period.
    pub max_steps_per_op: u32,
    /// The length of one cell in the unit of the `len` given to enqueue (1
    /// when lengths count cells, 53 when they count bytes): the leaf
    /// scheduler sorts to this resolution.
    pub cell_len: u32,
}

impl FlatConfig {
    /// A walk every `update_period`, as many steps per call as are due,
    /// lengths counted in cells.
    pub fn new(update_period: Duration) -> Self {
        FlatConfig {
            update_period,
            max_steps_per_op: u32::MAX,
            cell_len: 1,
        }
    }
}

/// The leaf scheduler the flat approximation drives: a flat discipline
/// over the leaves' queues whose weights can be changed while it runs.
trait LeafScheduler<T>: Discipline<T> {
    /// Queue `queue`'s weight, as a fraction of the link (> 0), from its
    /// next finish tag on.
    fn set_weight(&mut self, queue: QueueId, weight: f64);
    /// The weights in force, indexed by queue id.
    fn weights(&self) -> &[f64];
    /// Puts `weights[q]` in force for every queue `q` at once. A scheduler
    /// may swap the vector for its own, handing back a vector of the same
    /// length with unspecified contents.
    fn install(&mut self, weights: &mut Vec<f64>) {
        for (q, &w) in weights.iter().enumerate() {
            self.set_weight(q as QueueId, w);
        }
    }
}

/// SWAP: the leaf scheduler's type (see the module docs).
type Leaves<T> = MiniWf2q<T>;

/// SWAP: builds the leaf scheduler for queues `0..queues`.
fn new_leaves<T>(queues: usize, limits: Limits, cell_len: u32) -> Leaves<T> {
    MiniWf2q::new(queues, limits, cell_len)
}

/// The weight-update walker: the tree in pre-order and the two passes'
/// state (see the module docs).
#[derive(Clone, Debug)]
struct Walker {
    parent: Vec<u32>,
    share: Vec<f64>,
    /// One past the last node of each subtree.
    end: Vec<u32>,
    /// A leaf's queue, `NIL` for a class.
    queue: Vec<u32>,
    /// Activity recorded by the last activity pass.
    active: Vec<bool>,
    /// Sum of the shares of the active children, by the last activity pass.
    active_sum: Vec<f64>,
    /// The same sum, being accumulated by the current walk.
    acc: Vec<f64>,
    /// Rates computed by the current walk.
    rate: Vec<f64>,
    /// The mapping being computed, indexed by queue id.
    staged: Vec<f64>,
    /// The next node to enter.
    next: u32,
    /// Classes entered and not yet left.
    stack: Vec<u32>,
    steps_done: u32,
    steps_total: u32,
}

impl Walker {
    fn new(tree: &ClassTree) -> Self {
        let n = tree.len();
        let mut w = Walker {
            parent: (0..n)
                .map(|i| tree.parent(i).map_or(NIL, |p| p as u32))
                .collect(),
            share: (0..n).map(|i| tree.share(i)).collect(),
            end: (0..n).map(|i| tree.subtree_end(i) as u32).collect(),
            queue: (0..n)
                .map(|i| match tree.queue(i) {
                    Some(q) if tree.children(i).is_empty() => q,
                    _ => NIL,
                })
                .collect(),
            active: vec![true; n],
            active_sum: (0..n)
                .map(|i| tree.children(i).iter().map(|&c| tree.share(c)).sum())
                .collect(),
            acc: vec![0.0; n],
            rate: vec![0.0; n],
            staged: vec![0.0; tree.queue_slots()],
            next: 0,
            stack: Vec::with_capacity(tree.depth() + 1),
            steps_done: 0,
            steps_total: (0..n)
                .map(|i| if tree.children(i).is_empty() { 1 } else { 2 })
                .sum(),
        };
        // The starting mapping: every leaf active.
        for i in 0..n {
            w.down(i);
        }
        w
    }

    /// The rates pass at node `i`.
    fn down(&mut self, i: usize) {
        let p = self.parent[i];
        let r = if p == NIL {
            1.0
        } else {
            let p = p as usize;
            let share = self.share[i];
            let sum = if self.active[i] {
                self.active_sum[p]
            } else {
                self.active_sum[p] + share
            };
            self.rate[p] * share / sum
        };
        self.rate[i] = r;
        let q = self.queue[i];
        if q != NIL {
            self.staged[q as usize] = r;
        }
    }

    /// The activity pass at node `i`.
    fn up(&mut self, i: usize, busy: &impl Fn(QueueId) -> bool) {
        let q = self.queue[i];
        let a = if q != NIL {
            busy(q)
        } else {
            let sum = self.acc[i];
            self.active_sum[i] = sum;
            self.acc[i] = 0.0;
            sum > 0.0
        };
        self.active[i] = a;
        let p = self.parent[i];
        if a && p != NIL {
            self.acc[p as usize] += self.share[i];
        }
    }

    /// One step of the pipelined walk; true when it completes the walk
    /// (then `staged` holds the new mapping).
    fn step(&mut self, busy: &impl Fn(QueueId) -> bool) -> bool {
        if let Some(&top) = self.stack.last() {
            if self.end[top as usize] <= self.next {
                self.stack.pop();
                self.up(top as usize, busy);
                return self.count_step();
            }
        }
        let i = self.next as usize;
        self.next += 1;
        self.down(i);
        if self.queue[i] != NIL {
            self.up(i, busy);
        } else {
            self.stack.push(i as u32);
        }
        self.count_step()
    }

    fn count_step(&mut self) -> bool {
        self.steps_done += 1;
        if self.next as usize == self.parent.len() && self.stack.is_empty() {
            self.next = 0;
            self.steps_done = 0;
            true
        } else {
            false
        }
    }

    /// Both passes at once from the current activity (the exact limit).
    fn recompute(&mut self, busy: &impl Fn(QueueId) -> bool) {
        let n = self.parent.len();
        self.acc.iter_mut().for_each(|a| *a = 0.0);
        for i in (0..n).rev() {
            self.up(i, busy);
        }
        for i in 0..n {
            self.down(i);
        }
        self.next = 0;
        self.steps_done = 0;
        self.stack.clear();
    }
}

/// Ndiaye's flat approximation of HWFQ over a [`ClassTree`]: one WF2Q+
/// over the leaves, weighted by a background recomputation of the H-GPS
/// rates (see the [module docs](self)).
pub struct FlatApprox<T> {
    leaves: Leaves<T>,
    walker: Walker,
    /// By queue id: is it a leaf of the tree.
    is_leaf: Vec<bool>,
    /// Leaf queues in pre-order.
    leaf_queues: Vec<QueueId>,
    config: FlatConfig,
    walk_start: Instant,
    next_due: Instant,
    mappings: u64,
}

impl<T: Send> FlatApprox<T> {
    /// The approximation of HWFQ over `tree`, holding at most `limits`
    /// items, its weights updated as `config` says. Its first walk maps
    /// from the assumption that every leaf is active (every leaf starts at
    /// its guaranteed share); in the exact limit it starts from the truth
    /// (nothing active: every leaf at the rate it would get alone).
    pub fn new(tree: &ClassTree, limits: Limits, config: FlatConfig) -> Self {
        let slots = tree.queue_slots();
        let mut is_leaf = vec![false; slots];
        let leaf_queues: Vec<QueueId> = tree
            .leaves()
            .iter()
            .filter_map(|&l| tree.queue(l))
            .collect();
        for &q in &leaf_queues {
            is_leaf[q as usize] = true;
        }
        let mut walker = Walker::new(tree);
        if config.update_period <= Duration::ZERO {
            // The exact limit starts from the truth: nothing is active.
            walker.recompute(&|_| false);
        }
        let mut leaves = new_leaves(slots, limits, config.cell_len.max(1));
        leaves.install(&mut walker.staged);
        FlatApprox {
            leaves,
            walker,
            is_leaf,
            leaf_queues,
            config: FlatConfig {
                cell_len: config.cell_len.max(1),
                ..config
            },
            walk_start: Instant::ZERO,
            next_due: Instant::ZERO,
            mappings: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> FlatConfig {
        self.config
    }

    /// The weight in force for `queue`, as a fraction of the link: its
    /// H-GPS rate when the mapping was computed if it was active then, else
    /// the rate it would get by becoming active. `None` if `queue` is no
    /// leaf.
    pub fn weight(&self, queue: QueueId) -> Option<f64> {
        match self.is_leaf.get(queue as usize) {
            Some(true) => Some(self.leaves.weights()[queue as usize]),
            _ => None,
        }
    }

    /// The weights in force, `(queue, fraction of the link)` for every leaf
    /// in pre-order (for plots).
    pub fn weights(&self) -> Vec<(QueueId, f64)> {
        let w = self.leaves.weights();
        self.leaf_queues
            .iter()
            .map(|&q| (q, w[q as usize]))
            .collect()
    }

    /// Mappings put in force since the start (walks completed, or
    /// recomputations in the exact limit).
    pub fn mappings(&self) -> u64 {
        self.mappings
    }

    /// Steps in one walk: one per leaf, two per class.
    pub fn steps_per_walk(&self) -> u32 {
        self.walker.steps_total
    }

    fn exact(&self) -> bool {
        self.config.update_period <= Duration::ZERO
    }

    /// Performs the walk steps due at `now`.
    #[inline]
    fn tick(&mut self, now: Instant) {
        if now >= self.next_due {
            self.catch_up(now);
        }
    }

    #[inline(never)]
    fn catch_up(&mut self, now: Instant) {
        let period = self.config.update_period.as_nanos() as i128;
        let total = self.walker.steps_total as i128;
        let mut budget = self.config.max_steps_per_op;
        while budget > 0 && now >= self.next_due {
            budget -= 1;
            let leaves = &self.leaves;
            if self.walker.step(&|q| leaves.queue_len(q) > 0) {
                self.leaves.install(&mut self.walker.staged);
                self.mappings += 1;
                let end = self.walk_start + self.config.update_period;
                self.walk_start = end.max(now);
            }
            let offset = period * self.walker.steps_done as i128 / total;
            self.next_due = self.walk_start + Duration::from_nanos(offset as i64);
        }
    }

    #[inline(never)]
    fn recompute(&mut self) {
        let leaves = &self.leaves;
        self.walker.recompute(&|q| leaves.queue_len(q) > 0);
        self.leaves.install(&mut self.walker.staged);
        self.mappings += 1;
    }
}

impl<T: Send> Discipline<T> for FlatApprox<T> {
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        now: Instant,
    ) -> Result<(), Dropped<T>> {
        if !matches!(self.is_leaf.get(queue as usize), Some(true)) {
            return Err(Dropped {
                item,
                reason: DropReason::NoSuchQueue,
            });
        }
        if self.exact() {
            let wakes = self.leaves.queue_len(queue) == 0;
            self.leaves.enqueue(queue, item, len, now)?;
            if wakes {
                self.recompute();
            }
        } else {
            self.leaves.enqueue(queue, item, len, now)?;
            self.tick(now);
        }
        Ok(())
    }

    fn dequeue(&mut self, now: Instant) -> Option<(QueueId, T)> {
        if self.exact() {
            let (q, item) = self.leaves.dequeue(now)?;
            if self.leaves.queue_len(q) == 0 {
                self.recompute();
            }
            Some((q, item))
        } else {
            self.tick(now);
            self.leaves.dequeue(now)
        }
    }

    fn len(&self) -> usize {
        self.leaves.len()
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.leaves.queue_len(queue)
    }
}

// ---------------------------------------------------------------------------
// SWAP: everything below is the stand-in leaf scheduler.

/// Virtual time per cell of service: tags are integers in units of 2^-20
/// cell, and a bucket is one cell.
const SHIFT: u32 = 20;
/// The most a finish tag may exceed its start tag (a weight of about 2^-30
/// of the link for one cell); smaller weights are served at this one.
const MAX_INC: u64 = 1 << 50;
/// Buckets in a calendar's ring: 64 words of 64 bits.
const RING: usize = 4096;
const MASK: usize = RING - 1;

/// A monotone bucket queue of ids: a ring of FIFO buckets covering buckets
/// `floor..floor + RING`, indexed by a two-level bitmap, and a heap for the
/// buckets beyond. An id pushed below the floor goes into the floor's
/// bucket.
#[derive(Clone, Debug)]
struct Calendar {
    floor: u64,
    head: Vec<u32>,
    tail: Vec<u32>,
    /// Next id in the same bucket, by id.
    next: Vec<u32>,
    words: [u64; RING / 64],
    summary: u64,
    /// Ids beyond the ring: (bucket, arrival order, id).
    far: BinaryHeap<Reverse<(u64, u64, u32)>>,
    far_min: u64,
    far_seq: u64,
}

impl Calendar {
    fn new(ids: usize) -> Self {
        Calendar {
            floor: 0,
            head: vec![NIL; RING],
            tail: vec![NIL; RING],
            next: vec![NIL; ids],
            words: [0; RING / 64],
            summary: 0,
            far: BinaryHeap::new(),
            far_min: u64::MAX,
            far_seq: 0,
        }
    }

    #[inline]
    fn push(&mut self, id: u32, bucket: u64) {
        let b = bucket.max(self.floor);
        if b - self.floor >= RING as u64 {
            self.far.push(Reverse((b, self.far_seq, id)));
            self.far_seq += 1;
            self.far_min = self.far_min.min(b);
            return;
        }
        let pos = b as usize & MASK;
        self.next[id as usize] = NIL;
        if self.head[pos] == NIL {
            self.head[pos] = id;
            self.words[pos >> 6] |= 1 << (pos & 63);
            self.summary |= 1 << (pos >> 6);
        } else {
            self.next[self.tail[pos] as usize] = id;
        }
        self.tail[pos] = id;
    }

    /// The least bucket holding an id.
    #[inline]
    fn first(&mut self) -> Option<u64> {
        let p0 = self.floor as usize & MASK;
        let (w0, b0) = (p0 >> 6, p0 & 63);
        let m = self.words[w0] & (!0u64 << b0);
        let pos = if m != 0 {
            (w0 << 6) | m.trailing_zeros() as usize
        } else {
            let above = if w0 == 63 {
                0
            } else {
                self.summary & (!0u64 << (w0 + 1))
            };
            // Wrapping around: words up to w0 (whose bits from b0 on are
            // clear).
            let s = if above != 0 {
                above
            } else {
                self.summary & (2u64 << w0).wrapping_sub(1)
            };
            if s == 0 {
                return self.first_far();
            }
            let w = s.trailing_zeros() as usize;
            (w << 6) | self.words[w].trailing_zeros() as usize
        };
        Some(self.floor + (pos.wrapping_sub(p0) & MASK) as u64)
    }

    #[cold]
    fn first_far(&mut self) -> Option<u64> {
        if self.far_min == u64::MAX {
            return None;
        }
        self.floor = self.far_min;
        self.refile();
        Some(self.floor)
    }

    /// Takes the first id of `bucket`, which must be [`Calendar::first`].
    #[inline]
    fn pop(&mut self, bucket: u64) -> u32 {
        let pos = bucket as usize & MASK;
        let id = self.head[pos];
        let nx = self.next[id as usize];
        self.head[pos] = nx;
        if nx == NIL {
            let w = &mut self.words[pos >> 6];
            *w &= !(1 << (pos & 63));
            if *w == 0 {
                self.summary &= !(1 << (pos >> 6));
            }
        }
        self.raise_floor(bucket);
        id
    }

    /// Moves the floor up to `to`; no id may wait below it.
    #[inline]
    fn raise_floor(&mut self, to: u64) {
        if to > self.floor {
            self.floor = to;
            if self.far_min < to + RING as u64 {
                self.refile();
            }
        }
    }

    #[cold]
    fn refile(&mut self) {
        let limit = self.floor + RING as u64;
        while let Some(&Reverse((b, _, id))) = self.far.peek() {
            if b >= limit {
                break;
            }
            self.far.pop();
            self.push(id, b);
        }
        self.far_min = self.far.peek().map_or(u64::MAX, |r| r.0 .0);
    }
}

#[derive(Clone, Copy, Debug)]
struct LeafQ {
    /// Start and finish tags of the head item.
    s: u64,
    f: u64,
    /// First and last item slots.
    head: u32,
    tail: u32,
    count: u32,
}

#[derive(Debug)]
struct Slot<T> {
    item: Option<T>,
    len: u32,
    next: u32,
}

/// SWAP: a minimal WF2Q+ over queues `0..n` (see the module docs).
///
/// Virtual time `V` advances by each item's length (in units of 2^-20
/// cell); a queue that wakes gets `S = max(F, V)`, one that stays
/// backlogged `S = F`, and `F = S + len / weight`. A queue is eligible when
/// its start tag's cell is no later than `V`'s; the eligible queue with the
/// earliest finish-tag cell is served (first come first served within a
/// cell); with none eligible `V` jumps to the earliest start tag.
struct MiniWf2q<T> {
    limits: Limits,
    len: usize,
    v: u64,
    /// Virtual time per unit of length.
    unit: f64,
    weight: Vec<f64>,
    queues: Vec<LeafQ>,
    slots: Vec<Slot<T>>,
    free: u32,
    /// Eligible queues by finish tag.
    eligible: Calendar,
    /// Backlogged queues not yet eligible, by start tag.
    waiting: Calendar,
}

impl<T> MiniWf2q<T> {
    fn new(n: usize, limits: Limits, cell_len: u32) -> Self {
        MiniWf2q {
            limits,
            len: 0,
            v: 0,
            unit: (1u64 << SHIFT) as f64 / cell_len as f64,
            weight: vec![1.0; n],
            queues: vec![
                LeafQ {
                    s: 0,
                    f: 0,
                    head: NIL,
                    tail: NIL,
                    count: 0,
                };
                n
            ],
            slots: Vec::new(),
            free: NIL,
            eligible: Calendar::new(n),
            waiting: Calendar::new(n),
        }
    }

    /// The finish tag increment of an item of `len` at queue `q`.
    #[inline]
    fn increment(&self, q: usize, len: u32) -> u64 {
        ((len as f64 * self.unit / self.weight[q]) as u64).min(MAX_INC)
    }

    /// Files backlogged queue `q` by its tags.
    #[inline]
    fn file(&mut self, q: usize) {
        let LeafQ { s, f, .. } = self.queues[q];
        if s >> SHIFT <= self.v >> SHIFT {
            self.eligible.push(q as u32, f >> SHIFT);
        } else {
            self.waiting.push(q as u32, s >> SHIFT);
        }
    }

    /// Moves the queues whose start tags' cells have come up to `vb` to the
    /// eligible calendar.
    #[inline]
    fn promote(&mut self, vb: u64) {
        while let Some(b) = self.waiting.first() {
            if b > vb {
                break;
            }
            let q = self.waiting.pop(b);
            let f = self.queues[q as usize].f;
            self.eligible.push(q, f >> SHIFT);
        }
        self.waiting.raise_floor(vb);
    }
}

impl<T: Send> Discipline<T> for MiniWf2q<T> {
    #[inline]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        _now: Instant,
    ) -> Result<(), Dropped<T>> {
        let q = queue as usize;
        let reason = if q >= self.queues.len() {
            DropReason::NoSuchQueue
        } else if self.len >= self.limits.port {
            DropReason::PortFull
        } else if self.queues[q].count as usize >= self.limits.queue {
            DropReason::QueueFull
        } else {
            let slot = Slot {
                item: Some(item),
                len,
                next: NIL,
            };
            let at = if self.free != NIL {
                let at = self.free;
                self.free = self.slots[at as usize].next;
                self.slots[at as usize] = slot;
                at
            } else {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            };
            self.len += 1;
            let lq = &mut self.queues[q];
            lq.count += 1;
            if lq.count > 1 {
                let tail = lq.tail as usize;
                lq.tail = at;
                self.slots[tail].next = at;
            } else {
                lq.head = at;
                lq.tail = at;
                let s = lq.f.max(self.v);
                let f = s.saturating_add(self.increment(q, len));
                let lq = &mut self.queues[q];
                lq.s = s;
                lq.f = f;
                self.file(q);
            }
            return Ok(());
        };
        Err(Dropped { item, reason })
    }

    #[inline]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        if self.len == 0 {
            return None;
        }
        self.promote(self.v >> SHIFT);
        let b = match self.eligible.first() {
            Some(b) => b,
            None => {
                let sb = self.waiting.first()?;
                self.v = self.v.max(sb << SHIFT);
                self.promote(sb);
                self.eligible.first()?
            }
        };
        let q = self.eligible.pop(b) as usize;
        let at = self.queues[q].head as usize;
        let slot = &mut self.slots[at];
        let item = slot.item.take()?;
        let (len, next) = (slot.len, slot.next);
        slot.next = self.free;
        self.free = at as u32;
        self.len -= 1;
        self.v += (len as f64 * self.unit) as u64;
        let lq = &mut self.queues[q];
        lq.head = next;
        lq.count -= 1;
        if lq.count > 0 {
            let s = lq.f;
            let f = s.saturating_add(self.increment(q, self.slots[next as usize].len));
            let lq = &mut self.queues[q];
            lq.s = s;
            lq.f = f;
            self.file(q);
        }
        Some((q as QueueId, item))
    }

    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn queue_len(&self, queue: QueueId) -> usize {
        self.queues
            .get(queue as usize)
            .map_or(0, |lq| lq.count as usize)
    }
}

impl<T: Send> LeafScheduler<T> for MiniWf2q<T> {
    fn set_weight(&mut self, queue: QueueId, weight: f64) {
        if let Some(w) = self.weight.get_mut(queue as usize) {
            *w = weight;
        }
    }

    fn weights(&self) -> &[f64] {
        &self.weight
    }

    fn install(&mut self, weights: &mut Vec<f64>) {
        debug_assert_eq!(weights.len(), self.weight.len());
        std::mem::swap(&mut self.weight, weights);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_orders_buckets_and_keeps_fifo_within_one() {
        let mut c = Calendar::new(8);
        c.push(0, 5);
        c.push(1, 3);
        c.push(2, 5);
        c.push(3, 3 + 10 * RING as u64);
        c.push(4, 4000);
        let mut out = Vec::new();
        while let Some(b) = c.first() {
            out.push((b, c.pop(b)));
        }
        assert_eq!(
            out,
            [(3, 1), (5, 0), (5, 2), (4000, 4), (3 + 10 * RING as u64, 3)]
        );
        // Below the floor goes into the floor's bucket, behind what is there.
        c.push(5, 3 + 10 * RING as u64);
        c.push(6, 0);
        assert_eq!(c.first(), Some(3 + 10 * RING as u64));
        assert_eq!(c.pop(3 + 10 * RING as u64), 5);
        assert_eq!(c.pop(3 + 10 * RING as u64), 6);
        assert_eq!(c.first(), None);
    }

    #[test]
    fn calendar_wraps_around_the_ring() {
        let mut c = Calendar::new(4);
        c.raise_floor(RING as u64 - 2);
        c.push(0, RING as u64 + 1);
        c.push(1, RING as u64 - 1);
        c.push(2, 2 * RING as u64 - 3);
        assert_eq!(c.first(), Some(RING as u64 - 1));
        assert_eq!(c.pop(RING as u64 - 1), 1);
        assert_eq!(c.first(), Some(RING as u64 + 1));
        assert_eq!(c.pop(RING as u64 + 1), 0);
        assert_eq!(c.first(), Some(2 * RING as u64 - 3));
    }

    #[test]
    fn mini_wf2q_shares_by_weight() {
        let limits = Limits {
            port: 1000,
            queue: 1000,
        };
        let mut m: MiniWf2q<u32> = MiniWf2q::new(3, limits, 1);
        let mut w = vec![0.5, 0.3, 0.2];
        m.install(&mut w);
        for q in 0..3 {
            for i in 0..300 {
                m.enqueue(q, i, 1, Instant::ZERO).unwrap();
            }
        }
        let mut served = [0u32; 3];
        for _ in 0..500 {
            let (q, _) = m.dequeue(Instant::ZERO).unwrap();
            served[q as usize] += 1;
        }
        assert!(served[0].abs_diff(250) <= 1, "{served:?}");
        assert!(served[1].abs_diff(150) <= 1, "{served:?}");
        assert!(served[2].abs_diff(100) <= 1, "{served:?}");
    }

    #[test]
    fn walk_steps_and_pipeline() {
        use crate::tree::{ClassSpec, Share};
        let f = Share::Fraction;
        let tree = ClassTree::new(vec![
            ClassSpec::new("link", None, f(1.0), None),
            ClassSpec::new("A", Some("link"), f(0.5), None),
            ClassSpec::new("a1", Some("A"), f(0.5), Some(0)),
            ClassSpec::new("a2", Some("A"), f(0.5), Some(1)),
            ClassSpec::new("b", Some("link"), f(0.5), Some(2)),
        ])
        .unwrap();
        let mut w = Walker::new(&tree);
        assert_eq!(w.steps_total, 7);
        assert_eq!(w.staged, vec![0.25, 0.25, 0.5]);
        // Only queue 0 busy: the first walk still maps from the starting
        // assumption, the second from what the first saw.
        let busy = |q: QueueId| q == 0;
        let steps: Vec<bool> = (0..7).map(|_| w.step(&busy)).collect();
        assert_eq!(steps, [false, false, false, false, false, false, true]);
        assert_eq!(w.staged, vec![0.25, 0.25, 0.5]);
        for _ in 0..6 {
            assert!(!w.step(&busy));
        }
        assert!(w.step(&busy));
        // a1 gets the link; a2 would get half of A, b half of the link.
        assert_eq!(w.staged, vec![1.0, 0.5, 0.5]);
        let busy = |q: QueueId| q != 1;
        w.recompute(&busy);
        assert_eq!(w.staged, vec![0.5, 0.25, 0.5]);
    }
}
