//! The per-queue FIFOs every discipline keeps its items in: intrusive
//! linked lists through one arena of slots for the whole port.
//!
//! A slot holds an item, the discipline's word about it (`X`: its length,
//! or its finish tag) and the index of the next slot of its list. Each
//! queue is a list (head, tail and count, next to the discipline's state
//! for the queue, so one index reaches all of them); free slots form one
//! more list. Pushing takes the first free slot and links it at the
//! queue's tail, popping unlinks the head and frees its slot: a handful of
//! instructions each, whatever the queue. Slots are created on demand, at
//! most [`Limits::port`] of them, and reused from then on, so after a
//! warm-up (the port once as full as it ever gets) nothing allocates.
//! Memory is bounded by the port limit whatever the queue count and queue
//! limit.

use std::mem::MaybeUninit;

use crate::{DropReason, Limits, QueueId};

/// The end of a list.
pub(crate) const NIL: u32 = u32::MAX;

/// One slot of the arena.
struct Slot<T, X> {
    /// The item: initialised exactly while the slot is in a queue's list.
    item: MaybeUninit<T>,
    /// The discipline's word about the item.
    x: X,
    /// The next slot of the slot's list (a queue or the free list).
    next: u32,
}

/// One queue: a list through the arena, and the discipline's state for it.
/// Aligned so that its size is a power of two (32 or 64 bytes for every
/// discipline here): a queue id then becomes an address with one shift.
#[repr(align(32))]
pub(crate) struct Queue<S> {
    /// First slot (meaningful while `len > 0`).
    head: u32,
    /// Last slot (meaningful while `len > 0`).
    tail: u32,
    len: u32,
    /// The discipline's per-queue state.
    pub(crate) state: S,
}

/// A fixed set of queues under one port's limits.
///
/// Invariants, on which every `unsafe` block here rests:
/// - every slot index this holds (a queue's `head` and `tail` while its
///   `len > 0`, the first `len − 1` `next` links from its head, `free`
///   unless [`NIL`], and the `next` links of the free list until [`NIL`])
///   is below `slots.len()`, which never shrinks;
/// - each slot is either in exactly one queue's list, among the first
///   `len` slots from its head, with its item initialised, or in the free
///   list with its item uninitialised.
pub(crate) struct Queues<T, X, S> {
    qs: Vec<Queue<S>>,
    slots: Vec<Slot<T, X>>,
    /// First free slot, or [`NIL`] when every slot made so far is in use.
    free: u32,
    /// Items waiting in all.
    len: u32,
    /// Slots the port may have: [`Limits::port`].
    port: u32,
    /// Items a queue may hold: [`Limits::queue`].
    queue: u32,
}

impl<T, X: Copy + Default, S> Queues<T, X, S> {
    /// One queue per state in `states`, under `limits`.
    ///
    /// # Panics
    /// If there are more queues than [`QueueId`]s.
    pub(crate) fn new(states: impl IntoIterator<Item = S>, limits: Limits) -> Self {
        let qs: Vec<Queue<S>> = states
            .into_iter()
            .map(|state| Queue {
                head: NIL,
                tail: NIL,
                len: 0,
                state,
            })
            .collect();
        assert!(
            qs.len() <= QueueId::MAX as usize,
            "too many queues for a QueueId"
        );
        Queues {
            qs,
            slots: Vec::new(),
            free: NIL,
            len: 0,
            // NIL is no slot.
            port: limits.port.min(NIL as usize) as u32,
            queue: limits.queue.min(u32::MAX as usize) as u32,
        }
    }

    /// Items waiting in all.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Items waiting in `q` (0 for no such queue).
    #[inline]
    pub(crate) fn queue_len(&self, q: QueueId) -> usize {
        self.qs.get(q as usize).map_or(0, |r| r.len as usize)
    }

    /// How many queues.
    #[inline(always)]
    pub(crate) fn count(&self) -> usize {
        self.qs.len()
    }

    /// Queue `q`'s state.
    #[inline(always)]
    pub(crate) fn state(&self, q: usize) -> &S {
        &self.qs[q].state
    }

    /// Queue `q`'s state, to change it.
    #[inline(always)]
    pub(crate) fn state_mut(&mut self, q: usize) -> &mut S {
        &mut self.qs[q].state
    }

    /// Every queue's state.
    pub(crate) fn states_mut(&mut self) -> impl Iterator<Item = &mut S> {
        self.qs.iter_mut().map(|q| &mut q.state)
    }

    /// Appends `item` to `q` with the word `make` gives from `q`'s state, if
    /// it fits: a missing queue is refused first, then a full queue, then a
    /// full port. On success, says whether `q` was empty before; on refusal
    /// `make` is not called and `item` comes back.
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        q: QueueId,
        item: T,
        make: impl FnOnce(&mut S) -> X,
    ) -> Result<bool, (T, DropReason)> {
        let Some(qu) = self.qs.get_mut(q as usize) else {
            return Err((item, DropReason::NoSuchQueue));
        };
        let n = qu.len;
        if n >= self.queue {
            return Err((item, DropReason::QueueFull));
        }
        let mut slot = self.free;
        if slot == NIL {
            if self.slots.len() >= self.port as usize {
                return Err((item, DropReason::PortFull));
            }
            slot = Self::grow(&mut self.slots, self.port);
        }
        let x = make(&mut qu.state);
        let slots = self.slots.as_mut_ptr();
        // SAFETY: `slot` is `free` (not NIL) or was just made: in range.
        let s = unsafe { &mut *slots.add(slot as usize) };
        self.free = s.next;
        s.item.write(item);
        s.x = x;
        if n == 0 {
            qu.head = slot;
        } else {
            // SAFETY: the queue is not empty, so its tail is in range (and
            // is not `slot`, which was free).
            unsafe { (*slots.add(qu.tail as usize)).next = slot };
        }
        qu.tail = slot;
        qu.len = n + 1;
        self.len += 1;
        Ok(n == 0)
    }

    /// A new slot, its `next` [`NIL`] (the free list being empty).
    #[cold]
    #[inline(never)]
    fn grow(slots: &mut Vec<Slot<T, X>>, port: u32) -> u32 {
        let slot = slots.len() as u32;
        if slots.len() == slots.capacity() {
            // Double, but never past the port limit.
            let want = (slots.len() * 2)
                .max(16)
                .min(port as usize)
                .max(slots.len() + 1);
            slots.reserve_exact(want - slots.len());
        }
        slots.push(Slot {
            item: MaybeUninit::uninit(),
            x: X::default(),
            next: NIL,
        });
        slot
    }

    /// Takes the oldest item of `q` with its word and how many items `q`
    /// still holds.
    ///
    /// # Panics
    /// If `q` is empty or out of range.
    #[inline(always)]
    pub(crate) fn pop(&mut self, q: usize) -> (T, X, u32) {
        let qu = &mut self.qs[q];
        assert!(qu.len > 0, "pop from an empty queue");
        let slot = qu.head;
        // SAFETY: the queue is not empty, so its head is in range and its
        // item initialised; the slot goes to the free list, so the item is
        // read once.
        let s = unsafe { self.slots.get_unchecked_mut(slot as usize) };
        let item = unsafe { s.item.assume_init_read() };
        qu.head = s.next;
        s.next = self.free;
        self.free = slot;
        qu.len -= 1;
        self.len -= 1;
        (item, s.x, qu.len)
    }

    /// The word of `q`'s oldest item.
    ///
    /// # Panics
    /// If `q` is empty or out of range.
    #[inline(always)]
    pub(crate) fn front_x(&self, q: usize) -> X {
        let qu = &self.qs[q];
        assert!(qu.len > 0, "front of an empty queue");
        // SAFETY: the queue is not empty, so its head is in range.
        unsafe { self.slots.get_unchecked(qu.head as usize) }.x
    }

    /// Sets the word of `q`'s newest item.
    ///
    /// # Panics
    /// If `q` is empty or out of range.
    #[inline(always)]
    pub(crate) fn set_back_x(&mut self, q: usize, x: X) {
        let qu = &self.qs[q];
        assert!(qu.len > 0, "back of an empty queue");
        // SAFETY: the queue is not empty, so its tail is in range.
        unsafe { self.slots.get_unchecked_mut(qu.tail as usize) }.x = x;
    }

    /// Queue `q`'s state, unchecked.
    ///
    /// # Safety
    /// `q` must be below [`Queues::count`].
    #[inline(always)]
    pub(crate) unsafe fn state_unchecked(&self, q: usize) -> &S {
        debug_assert!(q < self.qs.len());
        // SAFETY: the caller keeps `q` in range.
        unsafe { &self.qs.get_unchecked(q).state }
    }

    /// Queue `q`'s state, unchecked, to change it.
    ///
    /// # Safety
    /// `q` must be below [`Queues::count`].
    #[inline(always)]
    pub(crate) unsafe fn state_unchecked_mut(&mut self, q: usize) -> &mut S {
        debug_assert!(q < self.qs.len());
        // SAFETY: the caller keeps `q` in range.
        unsafe { &mut self.qs.get_unchecked_mut(q).state }
    }

    /// As [`Queues::pop`], unchecked, and with the word of the item that is
    /// now the oldest, if any.
    ///
    /// # Safety
    /// `q` must be below [`Queues::count`] and hold an item.
    #[inline(always)]
    pub(crate) unsafe fn pop_unchecked(&mut self, q: usize) -> (T, X, Option<X>) {
        debug_assert!(q < self.qs.len() && self.qs[q].len > 0);
        // SAFETY: the caller keeps `q` in range.
        let qu = unsafe { self.qs.get_unchecked_mut(q) };
        let slot = qu.head;
        // SAFETY: the queue is not empty (the caller says), so its head is
        // in range and its item initialised; the slot goes to the free
        // list, so the item is read once.
        let s = unsafe { self.slots.get_unchecked_mut(slot as usize) };
        let item = unsafe { s.item.assume_init_read() };
        let (x, next) = (s.x, s.next);
        s.next = self.free;
        self.free = slot;
        qu.head = next;
        qu.len -= 1;
        self.len -= 1;
        let left = qu.len;
        let after = if left > 0 {
            // SAFETY: the queue still holds an item, so `next`, its new
            // head, is in range.
            Some(unsafe { self.slots.get_unchecked(next as usize) }.x)
        } else {
            None
        };
        (item, x, after)
    }

    /// The word of `q`'s oldest item, unchecked.
    ///
    /// # Safety
    /// `q` must be below [`Queues::count`] and hold an item.
    #[inline(always)]
    pub(crate) unsafe fn front_x_unchecked(&self, q: usize) -> X {
        debug_assert!(q < self.qs.len() && self.qs[q].len > 0);
        // SAFETY: `q` is in range and holds an item (the caller says), so
        // its head is in range.
        unsafe {
            self.slots
                .get_unchecked(self.qs.get_unchecked(q).head as usize)
                .x
        }
    }

    /// Every waiting item's word, for in-place edits.
    pub(crate) fn for_each_x_mut(&mut self, mut f: impl FnMut(&mut X)) {
        for qu in &self.qs {
            let mut slot = qu.head;
            for _ in 0..qu.len {
                let s = &mut self.slots[slot as usize];
                f(&mut s.x);
                slot = s.next;
            }
        }
    }
}

impl<T, X, S> Drop for Queues<T, X, S> {
    fn drop(&mut self) {
        if !std::mem::needs_drop::<T>() {
            return;
        }
        for qu in &self.qs {
            let mut slot = qu.head;
            for _ in 0..qu.len {
                let s = &mut self.slots[slot as usize];
                // SAFETY: the first `len` slots of a queue hold initialised
                // items, each dropped once here.
                unsafe { s.item.assume_init_drop() };
                slot = s.next;
            }
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

    /// Against one `VecDeque` per queue: random pushes and pops over a few
    /// queues, under limits that refuse some pushes; items that need
    /// dropping, so a leak or a double drop shows in the count.
    #[test]
    fn lists_match_a_deque_per_queue() {
        use std::collections::VecDeque;
        use std::rc::Rc;
        let token = Rc::new(());
        for (port, queue) in [(1, 1), (7, 3), (40, 40), (1000, 9)] {
            let mut rng = Lcg(port as u64);
            let limits = Limits { port, queue };
            let mut qs: Queues<(u32, Rc<()>), u32, ()> = Queues::new([(), (), (), ()], limits);
            let mut model: Vec<VecDeque<u32>> = vec![VecDeque::new(); 4];
            for k in 0..5_000u32 {
                let q = (rng.next() % 5) as u32;
                if rng.next() % 2 == 0 {
                    let r = qs.push(q, (k, token.clone()), |_| k ^ 7);
                    let held: usize = model.iter().map(VecDeque::len).sum();
                    let want = if q >= 4 {
                        Err(DropReason::NoSuchQueue)
                    } else if model[q as usize].len() >= queue {
                        Err(DropReason::QueueFull)
                    } else if held >= port {
                        Err(DropReason::PortFull)
                    } else {
                        Ok(model[q as usize].is_empty())
                    };
                    assert_eq!(r.as_ref().map_err(|e| e.1).copied(), want);
                    if want.is_ok() {
                        model[q as usize].push_back(k);
                    }
                } else if q < 4 {
                    if let Some(want) = model[q as usize].pop_front() {
                        assert_eq!(qs.front_x(q as usize), want ^ 7);
                        let ((got, _), x, left) = qs.pop(q as usize);
                        assert_eq!((got, x), (want, want ^ 7));
                        assert_eq!(left as usize, model[q as usize].len());
                    }
                }
                let held: usize = model.iter().map(VecDeque::len).sum();
                assert_eq!(qs.len(), held);
                assert!(qs.slots.len() <= port);
                for (i, m) in model.iter().enumerate() {
                    assert_eq!(qs.queue_len(i as QueueId), m.len());
                }
                assert_eq!(Rc::strong_count(&token), 1 + held);
            }
            drop(qs);
            assert_eq!(Rc::strong_count(&token), 1);
        }
    }

    #[test]
    fn admission_order_of_reasons() {
        let mut qs: Queues<u8, (), ()> = Queues::new([(), ()], Limits { port: 3, queue: 2 });
        let keep = |_: &mut ()| ();
        assert_eq!(qs.push(2, 7, keep), Err((7, DropReason::NoSuchQueue)));
        assert_eq!(qs.push(0, 0, keep), Ok(true));
        assert_eq!(qs.push(0, 0, keep), Ok(false));
        assert_eq!(qs.push(0, 9, keep), Err((9, DropReason::QueueFull)));
        assert_eq!(qs.push(1, 1, keep), Ok(true));
        assert_eq!(qs.push(1, 8, keep), Err((8, DropReason::PortFull)));
        assert_eq!(qs.len(), 3);
        assert_eq!(qs.queue_len(0), 2);
        assert_eq!(qs.queue_len(9), 0);
        assert_eq!(qs.pop(0), (0, (), 1));
        assert_eq!(qs.len(), 2);
    }
}
