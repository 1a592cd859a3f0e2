//! The per-queue FIFOs every discipline keeps its items in: intrusive
//! linked lists through one arena of slots for the whole port.
//!
//! A slot holds an item, the discipline's word about it (`X`: its length,
//! or its finish tag) and the index of the next slot of its list. Each
//! queue is a [`List`] (head, tail and count), kept by the discipline next
//! to its own state for the queue, so one index reaches both; free slots
//! form one more list, in the [`Arena`]. Pushing takes the first free slot
//! and links it at the queue's tail, popping unlinks the head and frees its
//! slot: a handful of instructions each, whatever the queue. Slots are
//! created on demand, at most [`Limits::port`] of them, and reused from
//! then on, so after a warm-up (the port once as full as it ever gets)
//! nothing allocates. Memory is bounded by the port limit whatever the
//! queue count and queue limit.

use std::mem::MaybeUninit;

use crate::{DropReason, Limits};

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

/// One queue's items: a list through an [`Arena`].
///
/// A list is only ever used with one arena, from [`List::EMPTY`] on; the
/// arena's `unsafe` methods rely on that. 16 bytes, so that an array of
/// lists, or of records starting with one, has a power-of-two stride.
#[derive(Debug)]
#[repr(align(16))]
pub(crate) struct List {
    /// First slot (meaningful while `len > 0`).
    head: u32,
    /// Last slot (meaningful while `len > 0`).
    tail: u32,
    len: u32,
}

impl List {
    /// No items.
    pub(crate) const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };

    /// Items waiting.
    #[inline(always)]
    pub(crate) fn len(&self) -> u32 {
        self.len
    }
}

/// The slots of one port, and its limits.
///
/// Invariants, on which every `unsafe` block here rests, given that each
/// list is only used with this arena (the contract of every `unsafe`
/// method):
/// - every slot index this or a list holds (a list's `head` and `tail`
///   while its `len > 0`, the first `len − 1` `next` links from its head,
///   `free` unless [`NIL`], and the `next` links of the free list until
///   [`NIL`]) is below `slots.len()`, which never shrinks;
/// - each slot is either among the first `len` slots of exactly one list,
///   with its item initialised, or in the free list with its item
///   uninitialised; `free_len` counts the latter.
pub(crate) struct Arena<T, X> {
    slots: Vec<Slot<T, X>>,
    /// First free slot, or [`NIL`] when every slot made so far is in use.
    free: u32,
    /// Items waiting in all.
    len: u32,
    /// Slots the port may have: [`Limits::port`].
    port: u32,
    /// Items a list may hold: [`Limits::queue`].
    queue: u32,
}

impl<T, X: Copy + Default> Arena<T, X> {
    /// An arena under `limits`.
    pub(crate) fn new(limits: Limits) -> Self {
        Arena {
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

    /// Appends `item` with the word `x` to `list`, if it fits: a full list
    /// is refused first, then a full port. On success, says whether `list`
    /// was empty before; on refusal `item` comes back.
    ///
    /// # Safety
    /// `list` is only ever used with this arena.
    #[inline(always)]
    pub(crate) unsafe fn push(
        &mut self,
        list: &mut List,
        item: T,
        x: X,
    ) -> Result<bool, (T, DropReason)> {
        let n = list.len;
        if n >= self.queue {
            return Err((item, DropReason::QueueFull));
        }
        let mut slot = self.free;
        if slot == NIL {
            if self.slots.len() >= self.port as usize {
                return Err((item, DropReason::PortFull));
            }
            slot = self.grow();
        }
        let slots = self.slots.as_mut_ptr();
        // SAFETY: `slot` is `free` (not NIL) or was just made: in range.
        let s = unsafe { &mut *slots.add(slot as usize) };
        self.free = s.next;
        s.item.write(item);
        s.x = x;
        if n == 0 {
            list.head = slot;
        } else {
            // SAFETY: the list is not empty, so its tail is in range (and is
            // not `slot`, which was free).
            unsafe { (*slots.add(list.tail as usize)).next = slot };
        }
        list.tail = slot;
        list.len = n + 1;
        self.len += 1;
        Ok(n == 0)
    }

    /// A new free slot, the only one (the free list being empty).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) -> u32 {
        let slot = self.slots.len() as u32;
        if self.slots.len() == self.slots.capacity() {
            // Double, but never past the port limit.
            let want = (self.slots.len() * 2)
                .max(16)
                .min(self.port as usize)
                .max(self.slots.len() + 1);
            self.slots.reserve_exact(want - self.slots.len());
        }
        self.slots.push(Slot {
            item: MaybeUninit::uninit(),
            x: X::default(),
            next: NIL,
        });
        slot
    }

    /// Shows `f` the items of `list`, oldest first.
    ///
    /// # Safety
    /// `list` is only ever used with this arena.
    pub(crate) unsafe fn for_each(&self, list: &List, f: &mut dyn FnMut(&T)) {
        let mut slot = list.head;
        for _ in 0..list.len {
            // SAFETY: the first `len` slots from a list's head are in range
            // and hold initialised items (the arena's invariants).
            let s = unsafe { self.slots.get_unchecked(slot as usize) };
            f(unsafe { s.item.assume_init_ref() });
            slot = s.next;
        }
    }

    /// Takes the oldest item of `list` with its word, and the word of the
    /// item that is now the oldest, if any.
    ///
    /// # Safety
    /// `list` is only ever used with this arena, and holds an item.
    #[inline(always)]
    pub(crate) unsafe fn pop(&mut self, list: &mut List) -> (T, X, Option<X>) {
        debug_assert!(list.len > 0);
        let slots = self.slots.as_mut_ptr();
        let slot = list.head;
        // SAFETY: the list is not empty (the caller says), so its head is in
        // range and its item initialised; the slot goes to the free list, so
        // the item is read once.
        let s = unsafe { &mut *slots.add(slot as usize) };
        let item = unsafe { s.item.assume_init_read() };
        let (x, next) = (s.x, s.next);
        s.next = self.free;
        self.free = slot;
        list.head = next;
        list.len -= 1;
        self.len -= 1;
        let after = if list.len > 0 {
            // SAFETY: the list still holds an item, so `next`, its new head,
            // is in range.
            Some(unsafe { (*slots.add(next as usize)).x })
        } else {
            None
        };
        (item, x, after)
    }

    /// The word of `list`'s oldest item.
    ///
    /// # Safety
    /// `list` is only ever used with this arena, and holds an item.
    #[inline(always)]
    pub(crate) unsafe fn front_x(&self, list: &List) -> X {
        debug_assert!(list.len > 0);
        // SAFETY: the list holds an item, so its head is in range.
        unsafe { self.slots.get_unchecked(list.head as usize) }.x
    }

    /// Sets the word of `list`'s newest item.
    ///
    /// # Safety
    /// `list` is only ever used with this arena, and holds an item.
    #[inline(always)]
    pub(crate) unsafe fn set_back_x(&mut self, list: &List, x: X) {
        debug_assert!(list.len > 0);
        // SAFETY: the list holds an item, so its tail is in range.
        unsafe { self.slots.get_unchecked_mut(list.tail as usize) }.x = x;
    }

    /// Every waiting item's word, for in-place edits.
    pub(crate) fn for_each_x_mut(&mut self, mut f: impl FnMut(&mut X)) {
        let free = self.free_slots();
        for (s, free) in self.slots.iter_mut().zip(free) {
            if !free {
                f(&mut s.x);
            }
        }
    }
}

impl<T, X> Arena<T, X> {
    /// Which slots are free.
    fn free_slots(&self) -> Vec<bool> {
        let mut free = vec![false; self.slots.len()];
        let mut slot = self.free;
        while slot != NIL {
            free[slot as usize] = true;
            slot = self.slots[slot as usize].next;
        }
        free
    }
}

impl<T, X> Drop for Arena<T, X> {
    fn drop(&mut self) {
        if !std::mem::needs_drop::<T>() {
            return;
        }
        let free = self.free_slots();
        for (s, free) in self.slots.iter_mut().zip(free) {
            if !free {
                // SAFETY: a slot not free holds an initialised item, dropped
                // once here.
                unsafe { s.item.assume_init_drop() };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_rng::Lcg;

    /// An arena and its lists, used only through calls that keep the
    /// contract (each list with this arena only; pops from non-empty
    /// lists).
    struct Checked<T> {
        arena: Arena<T, u32>,
        lists: Vec<List>,
    }

    impl<T> Checked<T> {
        fn push(&mut self, q: usize, item: T, x: u32) -> Result<bool, (T, DropReason)> {
            // SAFETY: the list is this arena's.
            unsafe { self.arena.push(&mut self.lists[q], item, x) }
        }
        fn pop(&mut self, q: usize) -> Option<(T, u32, Option<u32>)> {
            let list = &mut self.lists[q];
            // SAFETY: the list is this arena's, and not empty.
            (list.len() > 0).then(|| unsafe { self.arena.pop(list) })
        }
    }

    /// Against one `VecDeque` per list: random pushes and pops over a few
    /// lists, under limits that refuse some pushes; items that need
    /// dropping, so a leak or a double drop shows in the count.
    #[test]
    fn lists_match_a_deque_per_list() {
        use std::collections::VecDeque;
        use std::rc::Rc;
        let token = Rc::new(());
        for (port, queue) in [(1, 1), (7, 3), (40, 40), (1000, 9)] {
            let mut rng = Lcg(port as u64);
            let mut a = Checked {
                arena: Arena::new(Limits { port, queue }),
                lists: (0..4).map(|_| List::EMPTY).collect(),
            };
            let mut model: Vec<VecDeque<u32>> = vec![VecDeque::new(); 4];
            for k in 0..5_000u32 {
                let q = (rng.next() % 4) as usize;
                if rng.next().is_multiple_of(2) {
                    let r = a.push(q, (k, token.clone()), k ^ 7);
                    let held: usize = model.iter().map(VecDeque::len).sum();
                    let want = if model[q].len() >= queue {
                        Err(DropReason::QueueFull)
                    } else if held >= port {
                        Err(DropReason::PortFull)
                    } else {
                        Ok(model[q].is_empty())
                    };
                    assert_eq!(r.as_ref().map_err(|e| e.1).copied(), want);
                    if want.is_ok() {
                        model[q].push_back(k);
                    }
                } else if let Some(want) = model[q].pop_front() {
                    // SAFETY: the list is this arena's, and not empty.
                    assert_eq!(unsafe { a.arena.front_x(&a.lists[q]) }, want ^ 7);
                    let ((got, _), x, after) = a.pop(q).expect("an item");
                    assert_eq!((got, x), (want, want ^ 7));
                    assert_eq!(after, model[q].front().map(|k| k ^ 7));
                } else {
                    assert!(a.pop(q).is_none());
                }
                let held: usize = model.iter().map(VecDeque::len).sum();
                assert_eq!(a.arena.len(), held);
                assert!(a.arena.slots.len() <= port);
                for (list, m) in a.lists.iter().zip(&model) {
                    assert_eq!(list.len() as usize, m.len());
                }
                assert_eq!(Rc::strong_count(&token), 1 + held);
            }
            let mut words = 0;
            a.arena.for_each_x_mut(|_| words += 1);
            assert_eq!(words, a.arena.len());
            drop(a);
            assert_eq!(Rc::strong_count(&token), 1);
        }
    }
}
