//! Hierarchical weighted fair queueing (HWFQ): a WF2Q+ scheduler at every
//! service class of a [`ClassTree`], choosing among the class's children.
//!
//! This is H-WF2Q+ in the manner of Bennett and Zhang's hierarchical packet
//! fair queueing. Each class `n` keeps its own virtual time `V(n)`, in bytes
//! (or cells) of service `n` has given; each child `c` of `n` has a start
//! tag `S(c)` and a finish tag `F(c) = S(c) + L / share(c)` in `n`'s virtual
//! time, where `L` is the length of `c`'s *head*: the item `c` will send
//! next. A class's head is a leaf, the one whose first item the class has
//! chosen; it is chosen once, when the class becomes backlogged or when its
//! previous head has been sent, and kept until it is sent:
//!
//! * **choice at class `n`**: `V(n) = max(V(n), min S(c))` over backlogged
//!   children, then among the children with `S(c) <= V(n)` (the eligible
//!   ones: WF2Q+'s rule that keeps a child from running ahead of its fluid
//!   service) the least `F(c)`, ties to the child described first;
//! * **arrival** at an empty leaf `l` with parent `p`: `S(l) = max(F(l),
//!   V(p))`, and every ancestor that was idle chooses its head in turn,
//!   tagging itself the same way in its own parent, up to the first ancestor
//!   that was already backlogged;
//! * **dequeue**: the root chooses among its children (the root chooses when
//!   the line is free, so a pull port always sends the best item waiting);
//!   the chosen child's head leaf gives its first item; then from that leaf
//!   up to the root's child every node on the path advances its virtual time
//!   by the item's length, chooses a new head, and, still backlogged, moves
//!   on: `S = F`, `F = S + L / share`. The root's virtual time advances by
//!   the length too.
//!
//! A dequeue costs one choice per level; a choice scans the class's
//! children. Tags are `f64`.
//!
//! This meets Ndiaye's two link-sharing goals because it tracks H-GPS
//! ([`ClassTree::hgps_rates`]): every leaf's cumulative service stays
//! within a few maximum-length items of its H-GPS fluid service for the
//! same arrivals. `tests/hier.rs` checks `(depth + 1)` maximum lengths at
//! every start and end of a transmission, against an independent fluid
//! simulator, on random trees two and three levels deep with random
//! shares and bursts (2.4 maximum lengths is the most seen at depth 3).
//!
//! Memory is bounded by the limits: each leaf's queue holds at most
//! [`Limits::queue`] items and all together at most [`Limits::port`].

use std::collections::VecDeque;

use aurora_time::Instant;

use crate::tree::ClassTree;
use crate::{Discipline, DropReason, Dropped, Limits, QueueId};

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    parent: u32,
    /// Children: `kids[first..last]`.
    first: u32,
    last: u32,
    /// 1 / share of the parent.
    inv_share: f64,
    /// Start and finish tags in the parent's virtual time.
    s: f64,
    f: f64,
    /// Own virtual time (classes).
    v: f64,
    /// The leaf whose first item this node sends next; `NIL` when idle.
    head: u32,
    /// That item's length.
    head_len: u32,
}

/// Hierarchical WF2Q+ over a [`ClassTree`]: items of type `T` wait in the
/// leaves' queues (see the [module docs](self)).
pub struct Hwfq<T> {
    nodes: Vec<Node>,
    kids: Vec<u32>,
    /// Per node; only leaves hold items.
    fifo: Vec<VecDeque<(T, u32)>>,
    /// Queue id to leaf node (`NIL` for ids that name no leaf).
    leaf_of: Vec<u32>,
    /// Node to queue id (leaves).
    queue_of: Vec<QueueId>,
    len: usize,
    limits: Limits,
}

impl<T> Hwfq<T> {
    /// A scheduler for `tree`'s leaves, holding at most `limits` items.
    pub fn new(tree: &ClassTree, limits: Limits) -> Self {
        let mut nodes = Vec::with_capacity(tree.len());
        let mut kids = Vec::with_capacity(tree.len());
        for n in 0..tree.len() {
            let first = kids.len() as u32;
            kids.extend(tree.children(n).iter().map(|&c| c as u32));
            nodes.push(Node {
                parent: tree.parent(n).map_or(NIL, |p| p as u32),
                first,
                last: kids.len() as u32,
                inv_share: 1.0 / tree.share(n),
                s: 0.0,
                f: 0.0,
                v: 0.0,
                head: NIL,
                head_len: 0,
            });
        }
        let mut leaf_of = vec![NIL; tree.queue_slots()];
        let mut queue_of = vec![0; tree.len()];
        for &l in tree.leaves() {
            let q = tree.queue(l).unwrap_or_default();
            leaf_of[q as usize] = l as u32;
            queue_of[l] = q;
        }
        Hwfq {
            nodes,
            kids,
            fifo: (0..tree.len()).map(|_| VecDeque::new()).collect(),
            leaf_of,
            queue_of,
            len: 0,
            limits,
        }
    }

    /// The buffer limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn leaf(&self, q: QueueId) -> Option<usize> {
        match self.leaf_of.get(q as usize) {
            Some(&l) if l != NIL => Some(l as usize),
            _ => None,
        }
    }

    /// WF2Q+'s choice among class `n`'s backlogged children, after bringing
    /// `V(n)` up to their least start tag; `NIL` when none is backlogged.
    fn choose(&mut self, n: usize) -> u32 {
        let (first, last) = (self.nodes[n].first as usize, self.nodes[n].last as usize);
        let v = self.nodes[n].v;
        let mut best = NIL;
        let mut best_f = f64::INFINITY;
        // The child with the least start tag (least finish among ties):
        // the choice if none is eligible at the current virtual time.
        let mut min_s = f64::INFINITY;
        let mut min_s_f = f64::INFINITY;
        let mut min_s_child = NIL;
        for &c in &self.kids[first..last] {
            let k = &self.nodes[c as usize];
            if k.head == NIL {
                continue;
            }
            if k.s <= v && k.f < best_f {
                best = c;
                best_f = k.f;
            }
            if k.s < min_s || (k.s == min_s && k.f < min_s_f) {
                min_s = k.s;
                min_s_f = k.f;
                min_s_child = c;
            }
        }
        if best == NIL && min_s_child != NIL {
            self.nodes[n].v = min_s;
            best = min_s_child;
        }
        best
    }
}

impl<T: Send> Discipline<T> for Hwfq<T> {
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        _now: Instant,
    ) -> Result<(), Dropped<T>> {
        let Some(l) = self.leaf(queue) else {
            return Err(Dropped {
                item,
                reason: DropReason::NoSuchQueue,
            });
        };
        if self.len >= self.limits.port {
            return Err(Dropped {
                item,
                reason: DropReason::PortFull,
            });
        }
        if self.fifo[l].len() >= self.limits.queue {
            return Err(Dropped {
                item,
                reason: DropReason::QueueFull,
            });
        }
        let was_idle = self.fifo[l].is_empty();
        self.fifo[l].push_back((item, len));
        self.len += 1;
        if !was_idle {
            return Ok(());
        }
        let p = self.nodes[l].parent;
        self.nodes[l].head = l as u32;
        self.nodes[l].head_len = len;
        if p == NIL {
            // The root is the only leaf.
            return Ok(());
        }
        // The leaf, then every idle ancestor below the root, becomes
        // backlogged and tags itself in its parent.
        let mut n = l;
        let mut p = p as usize;
        loop {
            let vp = self.nodes[p].v;
            let node = &mut self.nodes[n];
            node.s = node.f.max(vp);
            node.f = node.s + node.head_len as f64 * node.inv_share;
            let pp = self.nodes[p].parent;
            if pp == NIL || self.nodes[p].head != NIL {
                return Ok(());
            }
            let c = self.choose(p) as usize;
            let (h, hl) = (self.nodes[c].head, self.nodes[c].head_len);
            self.nodes[p].head = h;
            self.nodes[p].head_len = hl;
            n = p;
            p = pp as usize;
        }
    }

    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        if self.len == 0 {
            return None;
        }
        let leaf = if self.nodes.len() == 1 {
            0
        } else {
            let c = self.choose(0) as usize;
            self.nodes[c].head as usize
        };
        let (item, len) = self.fifo[leaf].pop_front()?;
        self.len -= 1;
        let served = len as f64;
        self.nodes[0].v += served;
        // The leaf moves on to its next item, or goes idle.
        let node = &mut self.nodes[leaf];
        match self.fifo[leaf].front() {
            Some(&(_, next)) => {
                node.head_len = next;
                node.s = node.f;
                node.f = node.s + next as f64 * node.inv_share;
            }
            None => node.head = NIL,
        }
        // Every class on the path below the root chooses again.
        let mut x = self.nodes[leaf].parent;
        while x != NIL && x != 0 {
            let xi = x as usize;
            self.nodes[xi].v += served;
            let c = self.choose(xi);
            if c == NIL {
                self.nodes[xi].head = NIL;
            } else {
                let (h, hl) = (self.nodes[c as usize].head, self.nodes[c as usize].head_len);
                let node = &mut self.nodes[xi];
                node.head = h;
                node.head_len = hl;
                node.s = node.f;
                node.f = node.s + hl as f64 * node.inv_share;
            }
            x = self.nodes[xi].parent;
        }
        Some((self.queue_of[leaf], item))
    }

    fn len(&self) -> usize {
        self.len
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.leaf(queue).map_or(0, |l| self.fifo[l].len())
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        self.fifo.iter().flatten().for_each(|(item, _)| f(item));
    }
}
