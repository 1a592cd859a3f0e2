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
//! most [`FlatConfig::max_steps_per_op`]. The walk's steps are laid out
//! once as a list (node and kind: enter a class, leave it, or visit a
//! leaf), and the offsets `⌊P·j/M⌋` kept in a table. A step costs about 75
//! instructions, so under load, when a call comes every cell time `c`, the
//! cost per cell is bounded by about `M·c/P` steps plus the check. When the
//! walk ends the new weights are put in force at once: the vector of
//! fractions is swapped for the leaf scheduler's and, unless it is the same
//! as the one in force (compared byte for byte), converted to its integer
//! weights in one pass (O(leaves) once a walk), and walk k+1 starts at
//! `max(T(k) + P, now)`. [`FlatApprox::mappings`] counts the mappings
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
//! # The leaf scheduler
//!
//! The leaves are scheduled by the crate's [`Wf2qPlus`] (`wf2q.rs`), in a
//! thin wrapper, `Wf2qLeaves`, that keeps the weights as fractions of the
//! link (what [`FlatApprox::weight`] reports) and gives WF2Q+ each one as
//! the integer `round(fraction · 2^20)`, at least 1. A mapping is put in
//! force with [`Wf2qPlus::set_weights`], which recomputes the rate of `V`
//! once for all the leaves. The idle leaves' weights (the rates they would
//! get by waking) count in WF2Q+'s sum of weights, so `V` grows more slowly
//! than the link's work; WF2Q+ then raises it to the least start tag when
//! no leaf is eligible (`V = max(V + W, min S)`).
//!
//! It is reached only through the private trait `LeafScheduler` (a
//! [`Discipline`] plus `set_weight`, `weights` and `install`) and the
//! type alias `Leaves<T>` with its constructor `new_leaves` (marked SWAP),
//! so another flat scheduler can be put in its place. `weights()` must be
//! indexed by queue id and as long as the tree's
//! [`ClassTree::queue_slots`]; ids that are not leaves never reach the
//! leaf scheduler ([`FlatApprox`] refuses them as
//! [`DropReason::NoSuchQueue`]).
//!
//! # Cost
//!
//! `aurora bench sched --callgrind` ("flat walk 10ms" and "flat walk 1ms")
//! counts instructions per cell cycle (one enqueue and one dequeue) under
//! callgrind, on x86-64 with 1,000
//! backlogged leaves under three levels of classes (1,222 walk steps) and
//! an OC-3c line. With the module's first leaf scheduler (a stand-in
//! WF2Q+ with bucket queues of one cell) a cycle cost about 336
//! instructions with a walk every 10 ms and 631 with one every millisecond
//! (about a hundred instructions a step); with [`Wf2qPlus`], 189 and 512;
//! with the walk laid out as a list, the due times in a table and an
//! unchanged mapping not reinstalled, 179 and 419 (of which WF2Q+ alone
//! is about 132, with the harness's loop). That is well over the 80 instructions an i960 had per cell time on the
//! Sunshine output port controller, where the sorting was the sequencer
//! chip's and the i960 code alone still came to 88.

use aurora_time::{Duration, Instant};

use crate::tree::ClassTree;
use crate::wf2q::Wf2qPlus;
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
type Leaves<T> = Wf2qLeaves<T>;

/// SWAP: builds the leaf scheduler for queues `0..weights.len()`, queue `q`
/// starting at `weights[q]` of the link.
fn new_leaves<T>(weights: &[f64], limits: Limits, cell_len: u32) -> Leaves<T> {
    Wf2qLeaves::new(weights, limits, cell_len)
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
    /// The walk's steps in order, each a node index with the kind of step
    /// in the top bits ([`DOWN`], [`LEAF`] or [`UP`]): the walk is the same
    /// every time, so it is laid out once.
    ops: Vec<u32>,
    /// The next step of `ops`.
    pos: u32,
    steps_total: u32,
}

/// A walk step entering a class: the rates pass.
const DOWN: u32 = 0;
/// A walk step at a leaf: both passes.
const LEAF: u32 = 1 << 30;
/// A walk step leaving a class: the activity pass.
const UP: u32 = 2 << 30;
/// The node index in a walk step.
const NODE: u32 = LEAF - 1;

impl Walker {
    fn new(tree: &ClassTree) -> Self {
        let nodes: Vec<WalkNode> = (0..tree.len())
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
        // What `down` and `up` rely on.
        let slots = tree.queue_slots();
        for n in &nodes {
            assert!(n.parent == NIL || (n.parent as usize) < nodes.len());
            assert!(n.queue == NIL || (n.queue as usize) < slots);
        }
        let mut w = Walker {
            nodes,
            staged: vec![0.0; slots],
            ops: Vec::new(),
            pos: 0,
            steps_total: (0..tree.len())
                .map(|i| if tree.children(i).is_empty() { 1 } else { 2 })
                .sum(),
        };
        w.ops = Self::layout(&w.nodes);
        assert!(!w.ops.is_empty(), "a tree has a root");
        // The starting mapping: every leaf active.
        for i in 0..tree.len() {
            // SAFETY: `i` is a node.
            unsafe { w.down(i) };
        }
        w
    }

    /// The rates pass at node `i`.
    ///
    /// # Safety
    /// `i` must be a node (below `nodes.len()`).
    #[inline(always)]
    unsafe fn down(&mut self, i: usize) {
        debug_assert!(i < self.nodes.len());
        // SAFETY: `i` is a node (the caller's promise), and `new` checked that every node's parent
        // is a node or NIL and every leaf's queue indexes `staged`.
        let n = unsafe { *self.nodes.get_unchecked(i) };
        let r = if n.parent == NIL {
            1.0
        } else {
            let p = unsafe { self.nodes.get_unchecked(n.parent as usize) };
            let sum = if n.active {
                p.active_sum
            } else {
                p.active_sum + n.share
            };
            p.rate * n.share / sum
        };
        unsafe { self.nodes.get_unchecked_mut(i) }.rate = r;
        if n.queue != NIL {
            *unsafe { self.staged.get_unchecked_mut(n.queue as usize) } = r;
        }
    }

    /// The activity pass at node `i`.
    ///
    /// # Safety
    /// `i` must be a node (below `nodes.len()`).
    #[inline(always)]
    unsafe fn up(&mut self, i: usize, busy: &impl Fn(QueueId) -> bool) {
        debug_assert!(i < self.nodes.len());
        // SAFETY: `i` is a node (the caller's promise), and `new` checked that every node's parent
        // is a node or NIL.
        let n = unsafe { self.nodes.get_unchecked_mut(i) };
        let a = if n.queue != NIL {
            busy(n.queue)
        } else {
            n.active_sum = n.acc;
            n.acc = 0.0;
            n.active_sum > 0.0
        };
        n.active = a;
        let (p, share) = (n.parent, n.share);
        if a && p != NIL {
            unsafe { self.nodes.get_unchecked_mut(p as usize) }.acc += share;
        }
    }

    /// The steps of a walk over `nodes` (in pre-order): each class is
    /// entered on the way down and left once its subtree is done, each leaf
    /// visited once.
    fn layout(nodes: &[WalkNode]) -> Vec<u32> {
        assert!(nodes.len() <= NODE as usize, "too many nodes");
        let mut ops = Vec::with_capacity(2 * nodes.len());
        let mut stack: Vec<u32> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            while let Some(&top) = stack.last() {
                if nodes[top as usize].end > i as u32 {
                    break;
                }
                stack.pop();
                ops.push(UP | top);
            }
            if n.queue != NIL {
                ops.push(LEAF | i as u32);
            } else {
                ops.push(DOWN | i as u32);
                stack.push(i as u32);
            }
        }
        while let Some(top) = stack.pop() {
            ops.push(UP | top);
        }
        ops
    }

    /// One step of the pipelined walk; true when it completes the walk
    /// (then `staged` holds the new mapping).
    #[inline(always)]
    fn step(&mut self, busy: &impl Fn(QueueId) -> bool) -> bool {
        // SAFETY: `pos` is below `ops.len()` (it goes back to 0 on reaching
        // it, and `ops` is not empty); `layout` steps only at nodes.
        let op = *unsafe { self.ops.get_unchecked(self.pos as usize) };
        self.pos += 1;
        let i = (op & NODE) as usize;
        unsafe {
            if op & UP != 0 {
                self.up(i, busy);
            } else {
                self.down(i);
                if op & LEAF != 0 {
                    self.up(i, busy);
                }
            }
        }
        let done = self.pos as usize == self.ops.len();
        if done {
            self.pos = 0;
        }
        done
    }

    /// Starts the next walk.
    fn restart(&mut self) {
        self.pos = 0;
    }

    /// Both passes at once from the current activity (the exact limit).
    fn recompute(&mut self, busy: &impl Fn(QueueId) -> bool) {
        let n = self.nodes.len();
        self.nodes.iter_mut().for_each(|x| x.acc = 0.0);
        // SAFETY: every `i` is a node.
        for i in (0..n).rev() {
            unsafe { self.up(i, busy) };
        }
        for i in 0..n {
            unsafe { self.down(i) };
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
    /// When step `j` of a walk is due after the walk's start, for `j` up
    /// to the steps in a walk: `⌊j · update_period / steps⌋` ns.
    due: Vec<i64>,
    /// Steps done in the current walk.
    done: usize,
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
        let leaves = new_leaves(&walker.staged, limits, config.cell_len.max(1));
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
            due: if config.update_period > Duration::ZERO {
                let p = i128::from(config.update_period.as_nanos());
                (0..=total)
                    .map(|j| (i128::from(j) * p / i128::from(total)) as i64)
                    .collect()
            } else {
                Vec::new()
            },
            done: 0,
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
                self.done = 0;
            } else {
                self.done += 1;
                self.next_due = self.walk_start + Duration::from_nanos(self.due_after(self.done));
            }
        }
    }

    /// When step `j` of a walk is due after the walk's start (a walk may
    /// take more steps than [`Walker::steps_total`] only if the tree's
    /// layout says so).
    #[inline(always)]
    fn due_after(&self, j: usize) -> i64 {
        match self.due.get(j) {
            Some(&d) => d,
            None => self.due_beyond(j),
        }
    }

    #[cold]
    fn due_beyond(&self, j: usize) -> i64 {
        let total = i128::from(self.walker.steps_total.max(1));
        let p = i128::from(self.config.update_period.as_nanos());
        (j as i128 * p / total).min(i128::from(i64::MAX)) as i64
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

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        self.leaves.for_each(f);
    }
}

// ---------------------------------------------------------------------------
// SWAP: the leaf scheduler, the crate's WF2Q+ behind a thin wrapper.

/// Weight units per unit of link: a fraction `x` of the link becomes the
/// integer weight `round(x · 2^20)`, at least 1.
const WEIGHT_ONE: f64 = (1u32 << 20) as f64;

/// `fraction` of the link as a [`Wf2qPlus`] weight.
#[inline(always)]
fn int_weight(fraction: f64) -> u32 {
    // A saturating cast: NaN and negatives give 0, raised to 1.
    ((fraction * WEIGHT_ONE + 0.5) as u32).max(1)
}

/// The bytes of `x` (compared with `memcmp`: equal bytes are equal
/// weights).
fn bytes(x: &[f64]) -> &[u8] {
    // SAFETY: an `f64` is 8 initialised bytes with no padding, and `u8` has
    // no alignment; the slice borrows `x`.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), std::mem::size_of_val(x)) }
}

/// The crate's [`Wf2qPlus`] over the leaves, with the fractions of the link
/// it was given (its weights are integers: each fraction times 2^20).
struct Wf2qLeaves<T> {
    wf2q: Wf2qPlus<T>,
    /// The weights in force, as fractions of the link, by queue.
    fractions: Vec<f64>,
    /// The port's limit on items.
    port: usize,
}

impl<T> Wf2qLeaves<T> {
    /// Queues `0..weights.len()`, queue `q` at `weights[q]` of the link,
    /// the calendars tuned for items of `cell_len`.
    fn new(weights: &[f64], limits: Limits, cell_len: u32) -> Self {
        let ints: Vec<u32> = weights.iter().map(|&w| int_weight(w)).collect();
        Wf2qLeaves {
            wf2q: Wf2qPlus::with_typical_len(&ints, limits, cell_len),
            fractions: weights.to_vec(),
            port: limits.port,
        }
    }
}

impl<T: Send> Discipline<T> for Wf2qLeaves<T> {
    #[inline(always)]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        now: Instant,
    ) -> Result<(), Dropped<T>> {
        self.wf2q.enqueue(queue, item, len, now).map_err(|mut e| {
            // WF2Q+ refuses a full queue first; a full port comes first here.
            if e.reason == DropReason::QueueFull && self.wf2q.len() >= self.port {
                e.reason = DropReason::PortFull;
            }
            e
        })
    }

    #[inline(always)]
    fn dequeue(&mut self, now: Instant) -> Option<(QueueId, T)> {
        self.wf2q.dequeue(now)
    }

    fn len(&self) -> usize {
        self.wf2q.len()
    }

    #[inline(always)]
    fn queue_len(&self, queue: QueueId) -> usize {
        self.wf2q.queue_len(queue)
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        self.wf2q.for_each(f);
    }
}

impl<T: Send> LeafScheduler<T> for Wf2qLeaves<T> {
    fn set_weight(&mut self, queue: QueueId, weight: f64) {
        if let Some(w) = self.fractions.get_mut(queue as usize) {
            *w = weight;
            self.wf2q.set_weight(queue, int_weight(weight));
        }
    }

    fn weights(&self) -> &[f64] {
        &self.fractions
    }

    fn install(&mut self, weights: &mut Vec<f64>) {
        debug_assert_eq!(weights.len(), self.fractions.len());
        // Under steady load a mapping is the one in force: then WF2Q+
        // would be given the weights it has (and its sum, so nothing else
        // changes either).
        let same = bytes(&self.fractions) == bytes(weights);
        std::mem::swap(&mut self.fractions, weights);
        if same {
            return;
        }
        self.wf2q
            .set_weights(self.fractions.iter().map(|&w| int_weight(w)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_share_by_weight() {
        let limits = Limits {
            port: 1000,
            queue: 1000,
        };
        let mut m: Leaves<u32> = new_leaves(&[1.0; 3], limits, 1);
        let mut w = vec![0.5, 0.3, 0.2];
        m.install(&mut w);
        assert_eq!(m.weights(), [0.5, 0.3, 0.2]);
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
