//! An exact min-queue of sessions by a `u64` virtual-time tag, O(1) for the
//! keys a fair queue produces.
//!
//! A calendar of [`BUCKETS`] buckets, each `2^shift` tag units wide, covers
//! a sliding window of tags starting at the bucket of the smallest key. A
//! bucket is a singly linked list of sessions sorted by `(key, id)`, so
//! order is exact; a two-level bitmap finds the next non-empty bucket. A key
//! outside the window goes to a binary heap instead, and the minimum is the
//! smaller of the two minima. Each session is in the queue at most once, so
//! the heap never holds more than the session count and never reallocates.
//!
//! The bucket width only tunes speed: keys that share a bucket cost a sorted
//! insertion (O(1) when they arrive in order, the usual case), keys past the
//! window a heap operation.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Buckets in the calendar: 64 bitmap words under one summary word.
pub(crate) const BUCKETS: usize = 4096;
const MASK: usize = BUCKETS - 1;
const NIL: u32 = u32::MAX;
/// The widest buckets: a window then spans 2^61 tag units.
pub(crate) const MAX_SHIFT: u32 = 49;

#[derive(Clone, Copy)]
struct Entry {
    key: u64,
    next: u32,
}

/// The queue; ids are `0..n`, each present at most once.
pub(crate) struct TagQueue {
    shift: u32,
    /// Absolute bucket number (`key >> shift`) of the smallest bucketed key.
    base: u64,
    /// An upper bound of the absolute bucket numbers of bucketed keys.
    hi: u64,
    /// Entries in buckets.
    in_buckets: usize,
    head: Box<[u32; BUCKETS]>,
    tail: Box<[u32; BUCKETS]>,
    words: [u64; BUCKETS / 64],
    summary: u64,
    entries: Vec<Entry>,
    overflow: BinaryHeap<Reverse<(u64, u32)>>,
}

impl TagQueue {
    /// An empty queue for ids `0..n` with buckets `2^shift` tag units wide.
    pub(crate) fn new(n: usize, shift: u32) -> Self {
        TagQueue {
            shift: shift.min(MAX_SHIFT),
            base: 0,
            hi: 0,
            in_buckets: 0,
            head: Box::new([NIL; BUCKETS]),
            tail: Box::new([NIL; BUCKETS]),
            words: [0; BUCKETS / 64],
            summary: 0,
            entries: vec![Entry { key: 0, next: NIL }; n],
            overflow: BinaryHeap::with_capacity(n),
        }
    }

    /// No entry.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.in_buckets == 0 && self.overflow.is_empty()
    }

    /// Adds `id` with `key`; `id` must not be present.
    #[inline]
    pub(crate) fn insert(&mut self, id: u32, key: u64) {
        let kb = key >> self.shift;
        if self.in_buckets == 0 {
            self.base = kb;
            self.hi = kb;
        } else if kb < self.base {
            if self.hi - kb >= BUCKETS as u64 {
                self.overflow.push(Reverse((key, id)));
                return;
            }
            self.base = kb;
        } else if kb - self.base >= BUCKETS as u64 {
            self.overflow.push(Reverse((key, id)));
            return;
        } else if kb > self.hi {
            self.hi = kb;
        }
        let b = kb as usize & MASK;
        self.in_buckets += 1;
        let e = &mut self.entries[id as usize];
        e.key = key;
        e.next = NIL;
        let t = self.tail[b];
        if t == NIL {
            self.head[b] = id;
            self.tail[b] = id;
            self.words[b >> 6] |= 1 << (b & 63);
            self.summary |= 1 << (b >> 6);
            return;
        }
        let te = self.entries[t as usize];
        if (te.key, t) < (key, id) {
            self.entries[t as usize].next = id;
            self.tail[b] = id;
        } else {
            self.insert_sorted(b, id, key);
        }
    }

    /// Links `id` into bucket `b` before the first larger entry (not the
    /// tail, which is larger).
    #[cold]
    fn insert_sorted(&mut self, b: usize, id: u32, key: u64) {
        let mut prev = NIL;
        let mut cur = self.head[b];
        while (self.entries[cur as usize].key, cur) < (key, id) {
            prev = cur;
            cur = self.entries[cur as usize].next;
        }
        self.entries[id as usize].next = cur;
        if prev == NIL {
            self.head[b] = id;
        } else {
            self.entries[prev as usize].next = id;
        }
    }

    /// The smallest `(key, id)`.
    #[inline]
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        if self.in_buckets == 0 {
            return self.overflow.peek().map(|r| r.0);
        }
        let id = self.head[self.base as usize & MASK];
        let key = self.entries[id as usize].key;
        match self.overflow.peek() {
            Some(&Reverse(o)) if o < (key, id) => Some(o),
            _ => Some((key, id)),
        }
    }

    /// Removes and returns the smallest `(key, id)`.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(u64, u32)> {
        if self.in_buckets == 0 {
            return self.overflow.pop().map(|r| r.0);
        }
        let b = self.base as usize & MASK;
        let id = self.head[b];
        let e = self.entries[id as usize];
        if let Some(&Reverse(o)) = self.overflow.peek() {
            if o < (e.key, id) {
                self.overflow.pop();
                return Some(o);
            }
        }
        self.head[b] = e.next;
        self.in_buckets -= 1;
        if e.next == NIL {
            self.tail[b] = NIL;
            self.words[b >> 6] &= !(1 << (b & 63));
            if self.words[b >> 6] == 0 {
                self.summary &= !(1 << (b >> 6));
            }
            if self.in_buckets > 0 {
                let nb = self.next_busy(b);
                self.base += ((nb.wrapping_sub(b)) & MASK) as u64;
            }
        }
        Some((e.key, id))
    }

    /// The first non-empty bucket at or after `b`, circularly; some bucket
    /// must be non-empty.
    #[inline]
    fn next_busy(&self, b: usize) -> usize {
        let w = b >> 6;
        let bits = self.words[w] & (!0u64 << (b & 63));
        if bits != 0 {
            return (w << 6) | bits.trailing_zeros() as usize;
        }
        let later = self.summary & (!1u64 << w);
        let w = if later != 0 {
            later.trailing_zeros() as usize
        } else {
            self.summary.trailing_zeros() as usize
        };
        (w << 6) | self.words[w & 63].trailing_zeros() as usize
    }

    /// Subtracts `delta`, a multiple of `2^(shift + 12)`, from every key
    /// (saturating at 0), keeping every entry's bucket.
    pub(crate) fn rebase(&mut self, delta: u64) {
        debug_assert_eq!(delta % ((BUCKETS as u64) << self.shift), 0);
        let drop = delta >> self.shift;
        if self.in_buckets > 0 {
            for b in 0..BUCKETS {
                let mut id = self.head[b];
                while id != NIL {
                    let e = &mut self.entries[id as usize];
                    e.key = e.key.saturating_sub(delta);
                    id = e.next;
                }
            }
            self.base = self.base.saturating_sub(drop);
            self.hi = self.hi.saturating_sub(drop);
        }
        let old = std::mem::take(&mut self.overflow).into_vec();
        self.overflow = BinaryHeap::with_capacity(self.entries.len());
        for Reverse((k, id)) in old {
            self.overflow.push(Reverse((k.saturating_sub(delta), id)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic generator, so these tests need no dependency.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }

    /// Against a plain sorted set: random inserts (some far ahead, some
    /// behind the minimum) and pops, with ties.
    #[test]
    fn matches_a_sorted_set() {
        for shift in [0, 3, 10] {
            let mut rng = Lcg(shift as u64 + 1);
            let n = 300;
            let mut q = TagQueue::new(n, shift);
            let mut model = std::collections::BTreeSet::new();
            let mut present = vec![false; n];
            let mut floor = 1_000_000u64;
            for _ in 0..20_000 {
                if rng.next() % 3 != 0 {
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
                    model.insert((key, id));
                    present[id as usize] = true;
                } else {
                    let want = model.pop_first();
                    assert_eq!(q.peek(), want);
                    assert_eq!(q.pop(), want);
                    if let Some((k, id)) = want {
                        present[id as usize] = false;
                        floor = floor.max(k);
                    }
                }
                assert_eq!(q.is_empty(), model.is_empty());
            }
            while let Some(want) = model.pop_first() {
                assert_eq!(q.pop(), Some(want));
            }
            assert_eq!(q.pop(), None);
        }
    }

    #[test]
    fn rebase_keeps_order() {
        let mut q = TagQueue::new(8, 2);
        let base = 5u64 << 40;
        for (id, k) in [(0, 7), (1, 3), (2, 100_000), (3, 3), (4, 1 << 30)] {
            q.insert(id, base + k);
        }
        q.rebase(base);
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            got,
            vec![(3, 1), (3, 3), (7, 0), (100_000, 2), (1 << 30, 4)]
        );
    }
}
