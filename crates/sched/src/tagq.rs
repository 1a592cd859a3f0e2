//! An exact min-queue of sessions by a `u64` virtual-time tag, O(1) for the
//! keys a fair queue produces.
//!
//! A calendar of [`BUCKETS`] buckets, each `2^shift` tag units wide, covers
//! a sliding window of tags: bucket numbers (`key >> shift`) from an anchor
//! that trails the smallest key by up to [`SLACK`] buckets. A bucket is a
//! singly linked list of sessions sorted by key, equal keys in the order
//! they were inserted, so order is exact; a two-level bitmap finds the next
//! non-empty bucket. A key outside the window goes to a binary heap instead,
//! and the minimum is the smaller of the two minima. Equal keys leave first
//! in, first out throughout: the heap orders equal keys by insertion, and a
//! heap entry always predates the bucketed entries of the same key (a key
//! only goes to the heap when it is outside the window, and while an entry
//! with that key is bucketed the key is inside it), so on a tie the heap's
//! entry goes first. Each session is in the queue at most once, so the heap
//! never holds more than the session count and never reallocates.
//!
//! The calendar keeps no per-session record of its own: each session's key
//! and link live in the caller's per-session state ([`Linked`]), which the
//! caller touches anyway, and every operation is given that state's slice.
//!
//! The bucket width only tunes speed: keys that share a bucket cost a sorted
//! insertion (O(1) when they arrive in order, the usual case), keys outside
//! the window a heap operation.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Buckets in the calendar: 256 bitmap words under 4 summary words under
/// one top word.
pub(crate) const BUCKETS: usize = 1 << 14;
/// Summary words.
const MIDS: usize = BUCKETS / 4096;
/// How many buckets the window's anchor trails the smallest key by, so
/// keys a little below the minimum still go in a bucket.
pub(crate) const SLACK: u64 = (BUCKETS / 4) as u64;
const MASK: usize = BUCKETS - 1;
const NIL: u32 = u32::MAX;
/// The widest buckets: a window then spans 2^61 tag units.
pub(crate) const MAX_SHIFT: u32 = 61 - BUCKETS.trailing_zeros();

/// A session's record as calendar `K` sees it: its key while it is in the
/// calendar (set by the caller before inserting it, and left alone until it
/// is popped), and a link the calendar owns while it is in.
pub(crate) trait Linked<const K: u8> {
    /// The session's key.
    fn key(&self) -> u64;
    /// The next session of its bucket.
    fn next(&self) -> u32;
    /// Sets the next session of its bucket.
    fn set_next(&mut self, next: u32);
}

/// A bucket: a list of sessions, sorted by key.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    head: u32,
    tail: u32,
}

/// The queue over session ids `0..n`, each present at most once, linked
/// through the caller's records (of type `N: Linked<K>`).
///
/// Every method that takes `nodes` is `unsafe` with one contract: `nodes`
/// has the same length, at least `n`, in every call, and the ids given are
/// below `n`. On that rests the invariant the `unsafe` blocks inside use:
/// every id in a bucket's list (its `head`, `tail`, and the links from head
/// to tail) is below `n`.
pub(crate) struct TagQueue<const K: u8> {
    shift: u32,
    /// Whether `pop` and `peek` must take the general path: no session is
    /// in a bucket, or some is in the heap.
    slow: bool,
    /// `min_kb & MASK` (meaningful while a session is in a bucket).
    min_b: usize,
    /// Absolute bucket number at or below every bucketed key's, with every
    /// bucketed key's below `anchor + BUCKETS`.
    anchor: u64,
    /// Absolute bucket number of the first bucketed session; `u64::MAX`
    /// when none is in a bucket.
    min_kb: u64,
    buckets: Box<[Bucket; BUCKETS]>,
    /// A bit per non-empty summary word; 0 when no session is in a bucket.
    top: u64,
    /// A bit per non-empty bitmap word.
    mid: [u64; MIDS],
    /// A bit per non-empty bucket.
    words: Box<[u64; BUCKETS / 64]>,
    /// Keys outside the window: `(key, insertion number, id)`.
    overflow: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// The next heap insertion's number.
    overflow_seq: u64,
    /// Session ids are below this.
    n: usize,
}

/// A boxed array of `x`, built on the heap (not on the stack first).
fn filled<X: Copy + std::fmt::Debug, const N: usize>(x: X) -> Box<[X; N]> {
    vec![x; N]
        .into_boxed_slice()
        .try_into()
        .expect("a vector of N items")
}

/// `nodes[id]`, unchecked.
///
/// # Safety
/// `id < nodes.len()`.
#[inline(always)]
unsafe fn node<N>(nodes: &[N], id: u32) -> &N {
    debug_assert!((id as usize) < nodes.len());
    // SAFETY: the caller keeps `id` in range.
    unsafe { nodes.get_unchecked(id as usize) }
}

/// `nodes[id]`, unchecked, to change it.
///
/// # Safety
/// `id < nodes.len()`.
#[inline(always)]
unsafe fn node_mut<N>(nodes: &mut [N], id: u32) -> &mut N {
    debug_assert!((id as usize) < nodes.len());
    // SAFETY: the caller keeps `id` in range.
    unsafe { nodes.get_unchecked_mut(id as usize) }
}

impl<const K: u8> TagQueue<K> {
    /// An empty queue for ids `0..n` with buckets `2^shift` tag units wide.
    pub(crate) fn new(n: usize, shift: u32) -> Self {
        TagQueue {
            shift: shift.min(MAX_SHIFT),
            slow: true,
            min_b: 0,
            anchor: 0,
            min_kb: u64::MAX,
            buckets: filled(Bucket {
                head: NIL,
                tail: NIL,
            }),
            top: 0,
            mid: [0; MIDS],
            words: filled(0),
            overflow: BinaryHeap::with_capacity(n),
            overflow_seq: 0,
            n,
        }
    }

    /// No session.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.top == 0 && self.overflow.is_empty()
    }

    /// Adds `id`, not present, whose key in `nodes` is `key`.
    ///
    /// # Safety
    /// As for every method that takes `nodes` (see [`TagQueue`]).
    #[inline(always)]
    pub(crate) unsafe fn insert<N: Linked<K>>(&mut self, nodes: &mut [N], id: u32, key: u64) {
        debug_assert!((id as usize) < self.n && nodes.len() >= self.n);
        debug_assert_eq!(nodes[id as usize].key(), key);
        let kb = key >> self.shift;
        if kb.wrapping_sub(self.anchor) >= BUCKETS as u64 {
            // SAFETY: the caller's contract.
            unsafe { self.insert_outside(nodes, id, key, kb) };
            return;
        }
        // SAFETY: the caller's contract.
        unsafe { self.insert_in_window(nodes, id, key, kb) }
    }

    /// Adds `id` with `key`, whose bucket number `kb` is in the window.
    ///
    /// # Safety
    /// As for [`TagQueue::insert`].
    #[inline(always)]
    unsafe fn insert_in_window<N: Linked<K>>(
        &mut self,
        nodes: &mut [N],
        id: u32,
        key: u64,
        kb: u64,
    ) {
        // SAFETY: the caller keeps `id` in range.
        unsafe { node_mut(nodes, id) }.set_next(NIL);
        let b = kb as usize & MASK;
        let bucket = &mut self.buckets[b];
        let t = bucket.tail;
        bucket.tail = id;
        if t == NIL {
            bucket.head = id;
            self.occupied(b, kb);
            return;
        }
        // SAFETY: `t`, a bucket's tail, is in range (the invariant).
        let tn = unsafe { node_mut(nodes, t) };
        if tn.key() <= key {
            tn.set_next(id);
        } else {
            // SAFETY: the caller's contract.
            unsafe { self.insert_sorted(nodes, b, id, key, t) };
        }
    }

    /// Bucket `b` (absolute number `kb`) has just got its first session.
    #[inline(always)]
    fn occupied(&mut self, b: usize, kb: u64) {
        self.words[b >> 6] |= 1 << (b & 63);
        self.mid[(b >> 12) & (MIDS - 1)] |= 1 << ((b >> 6) & 63);
        if self.top == 0 {
            self.slow = !self.overflow.is_empty();
        }
        self.top |= 1 << (b >> 12);
        if kb < self.min_kb {
            self.min_kb = kb;
            self.min_b = b;
        }
    }

    /// A key outside the window: into the heap, or, when no session is in
    /// a bucket, into a bucket of a new window around it.
    ///
    /// # Safety
    /// As for [`TagQueue::insert`].
    #[cold]
    #[inline(never)]
    unsafe fn insert_outside<N: Linked<K>>(&mut self, nodes: &mut [N], id: u32, key: u64, kb: u64) {
        if self.top != 0 {
            self.overflow.push(Reverse((key, self.overflow_seq, id)));
            self.overflow_seq += 1;
            self.slow = true;
            return;
        }
        self.anchor = kb.saturating_sub(SLACK);
        // SAFETY: the caller's contract.
        unsafe { self.insert_in_window(nodes, id, key, kb) }
    }

    /// Links `id` into bucket `b` before the first larger key (there is
    /// one: the old tail `t`, which stays the tail).
    ///
    /// # Safety
    /// As for [`TagQueue::insert`].
    #[cold]
    #[inline(never)]
    unsafe fn insert_sorted<N: Linked<K>>(
        &mut self,
        nodes: &mut [N],
        b: usize,
        id: u32,
        key: u64,
        t: u32,
    ) {
        self.buckets[b].tail = t;
        let mut prev = NIL;
        let mut cur = self.buckets[b].head;
        // SAFETY (all three blocks): ids in a bucket are in range (the
        // invariant), and the caller keeps `id` in range.
        while unsafe { node(nodes, cur) }.key() <= key {
            prev = cur;
            cur = unsafe { node(nodes, cur) }.next();
        }
        unsafe { node_mut(nodes, id) }.set_next(cur);
        if prev == NIL {
            self.buckets[b].head = id;
        } else {
            unsafe { node_mut(nodes, prev) }.set_next(id);
        }
    }

    /// The first `(key, id)`: smallest key, first inserted among equals.
    ///
    /// # Safety
    /// As for every method that takes `nodes` (see [`TagQueue`]).
    #[inline(always)]
    pub(crate) unsafe fn peek<N: Linked<K>>(&self, nodes: &[N]) -> Option<(u64, u32)> {
        if self.slow {
            // SAFETY: the caller's contract.
            return unsafe { self.peek_slow(nodes) };
        }
        let id = self.buckets[self.min_b & MASK].head;
        // SAFETY: a bucket's head is in range (the invariant).
        Some((unsafe { node(nodes, id) }.key(), id))
    }

    /// [`TagQueue::peek`] when the heap is not empty or no bucket is.
    ///
    /// # Safety
    /// As for [`TagQueue::peek`].
    #[cold]
    #[inline(never)]
    unsafe fn peek_slow<N: Linked<K>>(&self, nodes: &[N]) -> Option<(u64, u32)> {
        let over = self.overflow.peek().map(|&Reverse((k, _, id))| (k, id));
        if self.top == 0 {
            return over;
        }
        let id = self.buckets[self.min_b & MASK].head;
        // SAFETY: a bucket's head is in range (the invariant).
        let key = unsafe { node(nodes, id) }.key();
        match over {
            Some((k, oid)) if k <= key => Some((k, oid)),
            _ => Some((key, id)),
        }
    }

    /// Removes and returns the first session's id: smallest key, first
    /// inserted among equals.
    ///
    /// # Safety
    /// As for every method that takes `nodes` (see [`TagQueue`]).
    #[inline(always)]
    pub(crate) unsafe fn pop<N: Linked<K>>(&mut self, nodes: &[N]) -> Option<u32> {
        if self.slow {
            // SAFETY: the caller's contract.
            return unsafe { self.pop_slow(nodes) };
        }
        // SAFETY: the caller's contract.
        Some(unsafe { self.pop_bucketed(nodes) })
    }

    /// Removes and returns the first bucketed session; some session must be
    /// in a bucket.
    ///
    /// # Safety
    /// As for [`TagQueue::pop`].
    #[inline(always)]
    unsafe fn pop_bucketed<N: Linked<K>>(&mut self, nodes: &[N]) -> u32 {
        let b = self.min_b;
        debug_assert!(b < BUCKETS);
        // SAFETY: `min_b` is always a bucket index (it is only ever set to
        // one, and starts at 0).
        let bucket = unsafe { self.buckets.get_unchecked_mut(b) };
        let id = bucket.head;
        // SAFETY: a bucket's head is in range (the invariant).
        let next = unsafe { node(nodes, id) }.next();
        bucket.head = next;
        if next == NIL {
            self.emptied(b);
        }
        id
    }

    /// [`TagQueue::pop`] when the heap is not empty or no bucket is.
    ///
    /// # Safety
    /// As for [`TagQueue::pop`].
    #[cold]
    #[inline(never)]
    unsafe fn pop_slow<N: Linked<K>>(&mut self, nodes: &[N]) -> Option<u32> {
        let from_heap = match self.overflow.peek() {
            None => false,
            Some(_) if self.top == 0 => true,
            Some(&Reverse((k, _, _))) => {
                let id = self.buckets[self.min_b & MASK].head;
                // SAFETY: a bucket's head is in range (the invariant).
                k <= unsafe { node(nodes, id) }.key()
            }
        };
        let first = if from_heap {
            self.overflow.pop().map(|Reverse((_, _, id))| id)
        } else if self.top != 0 {
            // SAFETY: the caller's contract.
            Some(unsafe { self.pop_bucketed(nodes) })
        } else {
            None
        };
        self.slow = self.top == 0 || !self.overflow.is_empty();
        first
    }

    /// Bucket `b`, the first, has just emptied: finds the next first bucket
    /// and lets the anchor follow it.
    #[inline(always)]
    fn emptied(&mut self, b: usize) {
        self.buckets[b].tail = NIL;
        self.words[b >> 6] &= !(1 << (b & 63));
        if self.words[b >> 6] == 0 {
            let m = (b >> 12) & (MIDS - 1);
            self.mid[m] &= !(1 << ((b >> 6) & 63));
            if self.mid[m] == 0 {
                self.top &= !(1 << m);
                if self.top == 0 {
                    self.min_kb = u64::MAX;
                    self.slow = true;
                    return;
                }
            }
        }
        let nb = self.next_busy(b);
        self.min_kb += (nb.wrapping_sub(b) & MASK) as u64;
        self.min_b = nb;
        let a = self.min_kb.saturating_sub(SLACK);
        if a > self.anchor {
            self.anchor = a;
        }
    }

    /// The first non-empty bucket at or after `b`, circularly; some bucket
    /// must be non-empty.
    #[inline(always)]
    fn next_busy(&self, b: usize) -> usize {
        let w = b >> 6;
        let bits = self.words[w] & (!0u64 << (b & 63));
        if bits != 0 {
            return (w << 6) | bits.trailing_zeros() as usize;
        }
        self.next_busy_word(w)
    }

    /// The first bucket of the first non-empty bitmap word after word `w`,
    /// circularly (back to `w` itself last).
    #[inline(never)]
    fn next_busy_word(&self, w: usize) -> usize {
        let m = (w >> 6) & (MIDS - 1);
        let later = self.mid[m] & (!1u64 << (w & 63));
        let w = if later != 0 {
            (m << 6) | later.trailing_zeros() as usize
        } else {
            let later = self.top & (!1u64 << m);
            let m = if later != 0 {
                later.trailing_zeros() as usize
            } else {
                self.top.trailing_zeros() as usize
            } & (MIDS - 1);
            (m << 6) | self.mid[m].trailing_zeros() as usize
        };
        (w << 6) | self.words[w].trailing_zeros() as usize
    }

    /// Every key is about to be lowered by `delta`, a multiple of
    /// `2^(shift + 14)` (the caller lowers the keys in its records, at most
    /// to 0, which keeps every session's bucket): lowers the window and
    /// the heap's keys to match.
    pub(crate) fn rebase(&mut self, delta: u64) {
        debug_assert_eq!(delta % ((BUCKETS as u64) << self.shift), 0);
        let drop = delta >> self.shift;
        if self.top != 0 {
            self.min_kb = self.min_kb.saturating_sub(drop);
        }
        self.anchor = self.anchor.saturating_sub(drop);
        let old = std::mem::take(&mut self.overflow).into_vec();
        self.overflow = BinaryHeap::with_capacity(self.n);
        for Reverse((k, s, id)) in old {
            self.overflow
                .push(Reverse((k.saturating_sub(delta), s, id)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_rng::Lcg;

    #[derive(Clone, Copy)]
    struct Node {
        key: u64,
        next: u32,
    }

    impl Linked<0> for Node {
        fn key(&self) -> u64 {
            self.key
        }
        fn next(&self) -> u32 {
            self.next
        }
        fn set_next(&mut self, next: u32) {
            self.next = next;
        }
    }

    /// A calendar with its records, used only through safe calls that keep
    /// the contract (one slice of `n` records throughout, ids below `n`).
    struct Checked {
        q: TagQueue<0>,
        nodes: Vec<Node>,
    }

    impl Checked {
        fn new(n: usize, shift: u32) -> Self {
            Checked {
                q: TagQueue::new(n, shift),
                nodes: vec![Node { key: 0, next: NIL }; n],
            }
        }
        fn insert(&mut self, id: u32, key: u64) {
            assert!((id as usize) < self.nodes.len());
            self.nodes[id as usize].key = key;
            // SAFETY: the same records throughout, `id` in range.
            unsafe { self.q.insert(&mut self.nodes, id, key) }
        }
        fn peek(&self) -> Option<(u64, u32)> {
            // SAFETY: as above.
            unsafe { self.q.peek(&self.nodes) }
        }
        fn pop(&mut self) -> Option<(u64, u32)> {
            // The key of a popped id: from the heap's copy or the record,
            // which agree (`rebase` lowers both).
            let first = self.peek();
            // SAFETY: as above.
            let id = unsafe { self.q.pop(&self.nodes) };
            assert_eq!(id, first.map(|f| f.1));
            first
        }
        fn rebase(&mut self, delta: u64) {
            self.q.rebase(delta);
            for n in &mut self.nodes {
                n.key = n.key.saturating_sub(delta);
            }
        }
    }

    /// Against a plain sorted set: random inserts (some far ahead, some
    /// behind the minimum) and pops, with ties.
    #[test]
    fn matches_a_sorted_set() {
        for shift in [0, 3, 10] {
            let mut rng = Lcg(shift as u64 + 1);
            let n = 300;
            let mut q = Checked::new(n, shift);
            let mut model = std::collections::BTreeSet::new();
            let mut seq = 0u64;
            let mut present = vec![false; n];
            let mut floor = 1_000_000u64;
            for _ in 0..20_000 {
                if !rng.next().is_multiple_of(3) {
                    let id = (rng.next() % n as u64) as u32;
                    if present[id as usize] {
                        continue;
                    }
                    let key = match rng.next() % 10 {
                        0 => floor + rng.next() % (1 << 24),
                        1 => floor.saturating_sub(rng.next() % 5_000),
                        2 => floor + (rng.next() % 4) * 7,
                        _ => floor + rng.next() % 20_000,
                    };
                    q.insert(id, key);
                    model.insert((key, seq, id));
                    seq += 1;
                    present[id as usize] = true;
                } else {
                    let want = model.pop_first().map(|(k, _, id)| (k, id));
                    assert_eq!(q.peek(), want);
                    assert_eq!(q.pop(), want);
                    if let Some((k, id)) = want {
                        present[id as usize] = false;
                        floor = floor.max(k);
                    }
                }
                assert_eq!(q.q.is_empty(), model.is_empty());
            }
            while let Some((k, _, id)) = model.pop_first() {
                assert_eq!(q.pop(), Some((k, id)));
            }
            assert_eq!(q.pop(), None);
        }
    }

    #[test]
    fn rebase_keeps_order() {
        let mut q = Checked::new(8, 2);
        let base = 5u64 << 40;
        for (id, k) in [(0, 7), (1, 3), (2, 100_000), (3, 3), (4, 1 << 30)] {
            q.insert(id, base + k);
        }
        q.rebase(base);
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            got,
            vec![(3, 1), (3, 3), (7, 0), (100_000, 2), (1 << 30, 4)],
            "equal keys first in, first out"
        );
    }
}
