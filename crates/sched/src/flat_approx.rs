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
//! most [`FlatConfig::max_steps_per_op`]. A step costs about a hundred
//! instructions, so under load, when a call comes every cell time `c`, the
//! cost per cell is bounded by about `M·c/P` steps plus the check. When the
//! walk ends the new weights are put in force at once, by swapping the
//! vector of weights (no per-leaf work then: each leaf turns its new weight
//! into a tag increment the next time it is tagged), and walk k+1 starts
//! at `max(T(k) + P, now)`. [`FlatApprox::mappings`] counts the mappings
//! put in force.
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
//! The leaves are scheduled by `MiniWf2q`, a small WF2Q+ of this module
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
//!
//! `weights()` must be indexed by queue id and as long as the tree's
//! [`ClassTree::queue_slots`]; ids that are not leaves never reach the
//! leaf scheduler ([`FlatApprox`] refuses them as
//! [`DropReason::NoSuchQueue`]).
//!
//! # Cost
//!
//! `examples/hier_cost.rs` counts instructions per cell cycle (one enqueue
//! and one dequeue) under callgrind. When written, on x86-64 with 1,000
//! backlogged leaves under three levels of classes, a cycle cost about 250
//! to 295 instructions when the walk is too slow to matter (by source
//! line: about 55 in the bucket queues, 80 in the rest of the leaf
//! scheduler, most of the remainder vector indexing and bounds checks),
//! about 340 with a walk every 10 ms of an OC-3c line and 630 with one
//! every millisecond (1,222 steps a walk, about a hundred instructions a
//! step). That is well over the 80 instructions an i960 had per cell time
//! on the Sunshine output port controller, where the sorting was the
//! sequencer chip's and the i960 code alone still came to 88.

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

/// One node of the walker's copy of the tree.
#[derive(Clone, Copy, Debug)]
struct WalkNode {
    parent: u32,
    /// One past the last node of the subtree.
    end: u32,
    /// A leaf's queue, `NIL` for a class.
    queue: u32,
    /// Activity recorded by the last activity pass.
    active: bool,
    share: f64,
    /// Sum of the shares of the active children, by the last activity
    /// pass.
    active_sum: f64,
    /// The same sum, being accumulated by the current walk.
    acc: f64,
    /// Rate computed by the current walk.
    rate: f64,
}

/// The weight-update walker: the tree in pre-order and the two passes'
/// state (see the module docs).
#[derive(Clone, Debug)]
struct Walker {
    nodes: Vec<WalkNode>,
    /// The mapping being computed, indexed by queue id.
    staged: Vec<f64>,
    /// The next node to enter.
    next: u32,
    /// Classes entered and not yet left.
    stack: Vec<u32>,
    steps_total: u32,
}

impl Walker {
    fn new(tree: &ClassTree) -> Self {
        let nodes = (0..tree.len())
            .map(|i| WalkNode {
                parent: tree.parent(i).map_or(NIL, |p| p as u32),
                end: tree.subtree_end(i) as u32,
                queue: match tree.queue(i) {
                    Some(q) if tree.children(i).is_empty() => q,
                    _ => NIL,
                },
                active: true,
                share: tree.share(i),
                active_sum: tree.children(i).iter().map(|&c| tree.share(c)).sum(),
                acc: 0.0,
                rate: 0.0,
            })
            .collect();
        let mut w = Walker {
            nodes,
            staged: vec![0.0; tree.queue_slots()],
            next: 0,
            stack: Vec::with_capacity(tree.depth() + 1),
            steps_total: (0..tree.len())
                .map(|i| if tree.children(i).is_empty() { 1 } else { 2 })
                .sum(),
        };
        // The starting mapping: every leaf active.
        for i in 0..tree.len() {
            w.down(i);
        }
        w
    }

    /// The rates pass at node `i`.
    fn down(&mut self, i: usize) {
        let n = self.nodes[i];
        let r = match self.nodes.get(n.parent as usize) {
            None => 1.0,
            Some(p) => {
                let sum = if n.active {
                    p.active_sum
                } else {
                    p.active_sum + n.share
                };
                p.rate * n.share / sum
            }
        };
        self.nodes[i].rate = r;
        if let Some(s) = self.staged.get_mut(n.queue as usize) {
            *s = r;
        }
    }

    /// The activity pass at node `i`.
    fn up(&mut self, i: usize, busy: &impl Fn(QueueId) -> bool) {
        let n = &mut self.nodes[i];
        let a = if n.queue != NIL {
            busy(n.queue)
        } else {
            n.active_sum = n.acc;
            n.acc = 0.0;
            n.active_sum > 0.0
        };
        n.active = a;
        let (p, share) = (n.parent, n.share);
        if a {
            if let Some(p) = self.nodes.get_mut(p as usize) {
                p.acc += share;
            }
        }
    }

    /// One step of the pipelined walk; true when it completes the walk
    /// (then `staged` holds the new mapping).
    fn step(&mut self, busy: &impl Fn(QueueId) -> bool) -> bool {
        if let Some(&top) = self.stack.last() {
            if self.nodes[top as usize].end <= self.next {
                self.stack.pop();
                self.up(top as usize, busy);
                let done = self.stack.is_empty();
                if done {
                    self.next = 0;
                }
                return done;
            }
        }
        let i = self.next as usize;
        self.next += 1;
        self.down(i);
        if self.nodes[i].queue != NIL {
            self.up(i, busy);
            // Only a root that is a leaf ends a walk here.
            if i == 0 {
                self.next = 0;
            }
            i == 0
        } else {
            self.stack.push(i as u32);
            false
        }
    }

    /// Starts the next walk.
    fn restart(&mut self) {
        self.next = 0;
        self.stack.clear();
    }

    /// Both passes at once from the current activity (the exact limit).
    fn recompute(&mut self, busy: &impl Fn(QueueId) -> bool) {
        let n = self.nodes.len();
        self.nodes.iter_mut().for_each(|x| x.acc = 0.0);
        for i in (0..n).rev() {
            self.up(i, busy);
        }
        for i in 0..n {
            self.down(i);
        }
        self.restart();
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
    exact: bool,
    walk_start: Instant,
    /// When the next step is due: `walk_start` plus the period times the
    /// steps done over the steps in a walk, kept as whole nanoseconds per
    /// step and a remainder.
    next_due: Instant,
    step_ns: i64,
    step_rem: i64,
    rem_acc: i64,
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
        let total = walker.steps_total.max(1);
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
            exact: config.update_period <= Duration::ZERO,
            walk_start: Instant::ZERO,
            next_due: Instant::ZERO,
            step_ns: config.update_period.as_nanos() / total as i64,
            step_rem: config.update_period.as_nanos() % total as i64,
            rem_acc: 0,
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

    /// Performs the walk steps due at `now`.
    #[inline(always)]
    fn tick(&mut self, now: Instant) {
        if now >= self.next_due {
            self.catch_up(now);
        }
    }

    #[inline(never)]
    fn catch_up(&mut self, now: Instant) {
        let total = self.walker.steps_total as i64;
        let mut budget = self.config.max_steps_per_op;
        while budget > 0 && now >= self.next_due {
            budget -= 1;
            let leaves = &self.leaves;
            if self.walker.step(&|q| leaves.queue_len(q) > 0) {
                self.leaves.install(&mut self.walker.staged);
                self.mappings += 1;
                let end = self.walk_start + self.config.update_period;
                self.walk_start = end.max(now);
                self.next_due = self.walk_start;
                self.rem_acc = 0;
            } else {
                self.next_due += Duration::from_nanos(self.step_ns);
                self.rem_acc += self.step_rem;
                if self.rem_acc >= total {
                    self.rem_acc -= total;
                    self.next_due += Duration::from_nanos(1);
                }
            }
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
    #[inline(always)]
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
        if self.exact {
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

    #[inline(always)]
    fn dequeue(&mut self, now: Instant) -> Option<(QueueId, T)> {
        if self.exact {
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
/// The most a finish tag may exceed its start tag per unit of length (a
/// weight of about 2^-30 of the link); smaller weights are served at this
/// one.
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
    /// No bucket from the floor up to here holds an id: scans start here.
    low: u64,
    head: Box<[u32; RING]>,
    tail: Box<[u32; RING]>,
    words: [u64; RING / 64],
    summary: u64,
    /// Ids beyond the ring: (bucket, arrival order, id).
    far: BinaryHeap<Reverse<(u64, u64, u32)>>,
    far_min: u64,
    far_seq: u64,
}

impl Calendar {
    fn new() -> Self {
        Calendar {
            floor: 0,
            low: 0,
            head: Box::new([NIL; RING]),
            tail: Box::new([NIL; RING]),
            words: [0; RING / 64],
            summary: 0,
            far: BinaryHeap::new(),
            far_min: u64::MAX,
            far_seq: 0,
        }
    }

    /// Files `id` in `bucket`, behind the ids there; `next` links the ids
    /// of a bucket (an id is in one calendar at a time, so calendars can
    /// share it).
    #[inline(always)]
    fn push(&mut self, next: &mut [u32], id: u32, bucket: u64) {
        let b = bucket.max(self.floor);
        if b - self.floor >= RING as u64 {
            self.push_far(id, b);
            return;
        }
        self.low = self.low.min(b);
        let pos = b as usize & MASK;
        let tail = self.tail[pos];
        self.tail[pos] = id;
        if tail == NIL {
            self.head[pos] = id;
            self.words[pos >> 6] |= 1 << (pos & 63);
            self.summary |= 1 << (pos >> 6);
        } else if let Some(n) = next.get_mut(tail as usize) {
            *n = id;
        }
    }

    #[cold]
    fn push_far(&mut self, id: u32, b: u64) {
        self.far.push(Reverse((b, self.far_seq, id)));
        self.far_seq += 1;
        self.far_min = self.far_min.min(b);
    }

    /// The least bucket holding an id.
    #[inline(always)]
    fn first(&self) -> Option<u64> {
        let p0 = self.low as usize & MASK;
        let (w0, b0) = (p0 >> 6, p0 & 63);
        let m = self.words[w0] >> b0;
        if m != 0 {
            return Some(self.low + m.trailing_zeros() as u64);
        }
        self.first_beyond(p0)
    }

    /// [`Calendar::first`] when the word of `low` has nothing from there
    /// on. (Buckets from the floor to `low` are empty, so a scan wrapping
    /// round the ring from `low` meets the least bucket first.)
    fn first_beyond(&self, p0: usize) -> Option<u64> {
        let w0 = p0 >> 6;
        let above = if w0 == 63 {
            0
        } else {
            self.summary & (!0u64 << (w0 + 1))
        };
        // Wrapping around: words up to w0 (whose bits from the floor on
        // are clear).
        let s = if above != 0 {
            above
        } else {
            self.summary & (2u64 << w0).wrapping_sub(1)
        };
        if s == 0 {
            // The ring is empty: the heap's least bucket, if any.
            return (self.far_min != u64::MAX).then_some(self.far_min);
        }
        let w = s.trailing_zeros() as usize;
        let pos = (w << 6) | self.words[w].trailing_zeros() as usize;
        Some(self.low + (pos.wrapping_sub(p0) & MASK) as u64)
    }

    /// Whether `bucket`, in the ring, holds an id.
    #[inline(always)]
    fn holds(&self, bucket: u64) -> bool {
        let pos = bucket as usize & MASK;
        self.words[pos >> 6] >> (pos & 63) & 1 != 0
    }

    /// The least bucket holding an id if it is no later than `limit`.
    #[inline(always)]
    fn first_upto(&self, limit: u64) -> Option<u64> {
        let span = limit.checked_sub(self.low)?;
        let p0 = self.low as usize & MASK;
        let b0 = p0 & 63;
        if span < (63 - b0) as u64 {
            // `low` and `limit` in one word.
            let m = (self.words[p0 >> 6] >> b0) & ((2u64 << span) - 1);
            return (m != 0).then(|| self.low + m.trailing_zeros() as u64);
        }
        self.first().filter(|&b| b <= limit)
    }

    /// Takes the first id of `bucket`, which must be [`Calendar::first`],
    /// and raises the floor to `bucket` or `cap`, whichever is less (a
    /// caller that may later push below `bucket`, but not below `cap`,
    /// keeps the order of what it pushes so).
    #[inline(always)]
    fn pop(&mut self, next: &mut [u32], bucket: u64, cap: u64) -> u32 {
        if bucket - self.floor >= RING as u64 {
            return self.pop_far(next, bucket.min(cap));
        }
        let pos = bucket as usize & MASK;
        let id = self.head[pos];
        if id == self.tail[pos] {
            self.clear(pos);
        } else {
            self.head[pos] = next.get(id as usize).copied().unwrap_or(NIL);
        }
        self.low = bucket;
        self.raise_floor(next, bucket.min(cap));
        id
    }

    /// [`Calendar::pop`] when the ring is empty: from the heap.
    #[cold]
    fn pop_far(&mut self, next: &mut [u32], floor: u64) -> u32 {
        let id = self.far.pop().map_or(NIL, |r| r.0 .2);
        self.far_min = self.far.peek().map_or(u64::MAX, |r| r.0 .0);
        self.raise_floor(next, floor);
        id
    }

    /// Takes every id of `bucket`, which must be [`Calendar::first`]: the
    /// first, the rest linked by `next`, the last the one returned second.
    /// The floor rises to `bucket`.
    #[inline(always)]
    fn take(&mut self, next: &mut [u32], bucket: u64) -> (u32, u32) {
        if bucket - self.floor >= RING as u64 {
            // The ring is empty: bring the heap's first buckets in.
            self.raise_floor(next, bucket);
        }
        let pos = bucket as usize & MASK;
        let ends = (self.head[pos], self.tail[pos]);
        self.clear(pos);
        self.low = bucket;
        self.raise_floor(next, bucket);
        ends
    }

    #[inline(always)]
    fn clear(&mut self, pos: usize) {
        self.head[pos] = NIL;
        self.tail[pos] = NIL;
        let w = &mut self.words[pos >> 6];
        *w &= !(1 << (pos & 63));
        if *w == 0 {
            self.summary &= !(1 << (pos >> 6));
        }
    }

    /// Moves the floor up to `to`; no id may wait below it.
    #[inline(always)]
    fn raise_floor(&mut self, next: &mut [u32], to: u64) {
        if to > self.floor {
            self.floor = to;
            self.low = self.low.max(to);
            if self.far_min < to + RING as u64 {
                self.refile(next);
            }
        }
    }

    #[cold]
    fn refile(&mut self, next: &mut [u32]) {
        let limit = self.floor + RING as u64;
        while let Some(&Reverse((b, _, id))) = self.far.peek() {
            if b >= limit {
                break;
            }
            self.far.pop();
            self.push(next, id, b);
        }
        self.far_min = self.far.peek().map_or(u64::MAX, |r| r.0 .0);
    }
}

#[derive(Clone, Copy, Debug)]
struct LeafQ {
    /// Start and finish tags of the head item.
    s: u64,
    f: u64,
    /// Finish-tag increment per unit of length, for `weight` as of
    /// mapping `epoch`.
    inc: u64,
    epoch: u64,
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
    /// Virtual time per unit of length, as an integer and as a float.
    v_per_len: u64,
    unit: f64,
    /// Weights, by queue; swapped whole by `install`, which starts a new
    /// epoch so each queue recomputes its increment when next tagged.
    weight: Vec<f64>,
    epoch: u64,
    queues: Vec<LeafQ>,
    slots: Vec<Slot<T>>,
    free: u32,
    /// Links the queues of a calendar's bucket, by queue.
    next: Vec<u32>,
    /// Eligible queues by finish tag.
    eligible: Calendar,
    /// Backlogged queues not yet eligible, by start tag.
    waiting: Calendar,
}

impl<T> MiniWf2q<T> {
    fn new(n: usize, limits: Limits, cell_len: u32) -> Self {
        let unit = (1u64 << SHIFT) as f64 / cell_len as f64;
        MiniWf2q {
            limits,
            len: 0,
            v: 0,
            v_per_len: unit.round() as u64,
            unit,
            weight: vec![1.0; n],
            epoch: 0,
            queues: vec![
                LeafQ {
                    s: 0,
                    f: 0,
                    inc: unit.round() as u64,
                    epoch: 0,
                    head: NIL,
                    tail: NIL,
                    count: 0,
                };
                n
            ],
            slots: Vec::new(),
            free: NIL,
            next: vec![NIL; n],
            eligible: Calendar::new(),
            waiting: Calendar::new(),
        }
    }

    /// Queue `q`'s finish tag increment per unit of length, from its weight.
    #[cold]
    fn refresh(&mut self, q: usize) -> u64 {
        let w = self.weight[q];
        let inc = if w > 0.0 {
            (self.unit / w + 0.5).min(MAX_INC as f64) as u64
        } else {
            MAX_INC
        };
        let lq = &mut self.queues[q];
        lq.inc = inc.max(1);
        lq.epoch = self.epoch;
        lq.inc
    }

    /// Gives queue `q`, backlogged with a head item of `len`, start tag `s`
    /// and the finish tag that follows, and files it.
    #[inline(always)]
    fn tag(&mut self, q: usize, s: u64, len: u32) {
        let mut inc = self.queues[q].inc;
        if self.queues[q].epoch != self.epoch {
            inc = self.refresh(q);
        }
        let f = s.saturating_add((len as u64).saturating_mul(inc));
        let lq = &mut self.queues[q];
        lq.s = s;
        lq.f = f;
        if s >> SHIFT <= self.v >> SHIFT {
            self.eligible.push(&mut self.next, q as u32, f >> SHIFT);
        } else {
            self.waiting.push(&mut self.next, q as u32, s >> SHIFT);
        }
    }

    /// Moves the queues waiting in buckets up to `vb` to the eligible
    /// calendar, and the waiting calendar's floor to `vb`.
    #[inline(always)]
    fn promote(&mut self, vb: u64) {
        // Usually V has moved on by one cell: one bit to test.
        if vb == self.waiting.floor + 1 && !self.waiting.holds(vb) {
            self.waiting.raise_floor(&mut self.next, vb);
            return;
        }
        while let Some(b) = self.waiting.first_upto(vb) {
            let (mut q, last) = self.waiting.take(&mut self.next, b);
            loop {
                let after = self.next.get(q as usize).copied().unwrap_or(NIL);
                let f = self.queues.get(q as usize).map_or(0, |lq| lq.f);
                self.eligible.push(&mut self.next, q, f >> SHIFT);
                if q == last {
                    break;
                }
                q = after;
            }
        }
        self.waiting.raise_floor(&mut self.next, vb);
    }
}

impl<T: Send> Discipline<T> for MiniWf2q<T> {
    #[inline(always)]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        _now: Instant,
    ) -> Result<(), Dropped<T>> {
        let q = queue as usize;
        let Some(lq) = self.queues.get(q) else {
            return Err(Dropped {
                item,
                reason: DropReason::NoSuchQueue,
            });
        };
        if self.len >= self.limits.port || lq.count as usize >= self.limits.queue {
            let reason = if self.len >= self.limits.port {
                DropReason::PortFull
            } else {
                DropReason::QueueFull
            };
            return Err(Dropped { item, reason });
        }
        let slot = Slot {
            item: Some(item),
            len,
            next: NIL,
        };
        let at = self.free;
        match self.slots.get_mut(at as usize) {
            Some(free) => {
                self.free = free.next;
                *free = slot;
            }
            None => self.slots.push(slot),
        }
        let at = if at == NIL {
            (self.slots.len() - 1) as u32
        } else {
            at
        };
        self.len += 1;
        let lq = &mut self.queues[q];
        lq.count += 1;
        if lq.count > 1 {
            let tail = lq.tail as usize;
            lq.tail = at;
            if let Some(t) = self.slots.get_mut(tail) {
                t.next = at;
            }
        } else {
            lq.head = at;
            lq.tail = at;
            let s = lq.f.max(self.v);
            self.tag(q, s, len);
        }
        Ok(())
    }

    #[inline(always)]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        if self.len == 0 {
            return None;
        }
        // Queues whose start tags V has reached become eligible.
        self.promote(self.v >> SHIFT);
        let b = match self.eligible.first() {
            Some(b) => b,
            None => self.jump()?,
        };
        // Queues become eligible later with finish tags after V, so the
        // floor stays at V's cell at most, to keep their order.
        let q = self.eligible.pop(&mut self.next, b, self.v >> SHIFT) as usize;
        let at = self.queues[q].head as usize;
        let slot = &mut self.slots[at];
        let item = slot.item.take()?;
        let (len, next) = (slot.len, slot.next);
        slot.next = self.free;
        self.free = at as u32;
        self.len -= 1;
        self.v += len as u64 * self.v_per_len;
        let lq = &mut self.queues[q];
        lq.head = next;
        lq.count -= 1;
        if lq.count > 0 {
            let s = lq.f;
            let next_len = self.slots[next as usize].len;
            self.tag(q, s, next_len);
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

impl<T> MiniWf2q<T> {
    /// No queue is eligible: `V` jumps to the earliest start tag's cell and
    /// the queues there become eligible; the first eligible bucket.
    #[cold]
    fn jump(&mut self) -> Option<u64> {
        let sb = self.waiting.first()?;
        self.v = self.v.max(sb << SHIFT);
        self.promote(sb);
        self.eligible.first()
    }
}

impl<T: Send> LeafScheduler<T> for MiniWf2q<T> {
    fn set_weight(&mut self, queue: QueueId, weight: f64) {
        if let Some(w) = self.weight.get_mut(queue as usize) {
            *w = weight;
            self.refresh(queue as usize);
        }
    }

    fn weights(&self) -> &[f64] {
        &self.weight
    }

    fn install(&mut self, weights: &mut Vec<f64>) {
        debug_assert_eq!(weights.len(), self.weight.len());
        std::mem::swap(&mut self.weight, weights);
        self.epoch = self.epoch.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_orders_buckets_and_keeps_fifo_within_one() {
        let mut c = Calendar::new();
        let n = &mut vec![NIL; 8][..];
        let far = 3 + 10 * RING as u64;
        c.push(n, 0, 5);
        c.push(n, 1, 3);
        c.push(n, 2, 5);
        c.push(n, 3, far);
        c.push(n, 4, 4000);
        let mut out = Vec::new();
        while let Some(b) = c.first() {
            out.push((b, c.pop(n, b, u64::MAX)));
        }
        assert_eq!(out, [(3, 1), (5, 0), (5, 2), (4000, 4), (far, 3)]);
        // Below the floor goes into the floor's bucket, behind what is there.
        c.push(n, 5, far);
        c.push(n, 6, 0);
        c.push(n, 7, far + 1);
        assert_eq!(c.first(), Some(far));
        assert_eq!(c.first_upto(far - 1), None);
        assert_eq!(c.first_upto(far), Some(far));
        assert_eq!(c.take(n, far), (5, 6));
        assert_eq!(n[5], 6);
        assert_eq!(c.first_upto(far), None);
        assert_eq!(c.first_upto(far + 100), Some(far + 1));
        assert_eq!(c.pop(n, far + 1, u64::MAX), 7);
        assert_eq!(c.first(), None);
    }

    #[test]
    fn a_capped_floor_keeps_later_pushes_in_order() {
        let mut c = Calendar::new();
        let n = &mut vec![NIL; 4][..];
        c.push(n, 0, 20);
        c.push(n, 1, 20);
        // Popped at 20 with the floor held at 1: a push at 4 comes first.
        assert_eq!(c.pop(n, 20, 1), 0);
        c.push(n, 2, 4);
        assert_eq!(c.first(), Some(4));
        assert_eq!(c.pop(n, 4, 2), 2);
        // Without the cap it would have gone behind 1, into bucket 20.
        assert_eq!(c.pop(n, 20, u64::MAX), 1);
        c.push(n, 3, 4);
        assert_eq!(c.first(), Some(20));
    }

    #[test]
    fn calendar_wraps_around_the_ring() {
        let mut c = Calendar::new();
        let n = &mut vec![NIL; 4][..];
        c.raise_floor(n, RING as u64 - 2);
        c.push(n, 0, RING as u64 + 1);
        c.push(n, 1, RING as u64 - 1);
        c.push(n, 2, 2 * RING as u64 - 3);
        assert_eq!(c.first_upto(RING as u64 + 1), Some(RING as u64 - 1));
        assert_eq!(c.first(), Some(RING as u64 - 1));
        assert_eq!(c.pop(n, RING as u64 - 1, u64::MAX), 1);
        assert_eq!(c.first(), Some(RING as u64 + 1));
        assert_eq!(c.pop(n, RING as u64 + 1, u64::MAX), 0);
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
