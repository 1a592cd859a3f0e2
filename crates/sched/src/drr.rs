//! Deficit round robin (Shreedhar and Varghese, 1995).

use aurora_time::Instant;

use crate::store::{Arena, List, NIL};
use crate::{Discipline, DropReason, Dropped, Limits, QueueId};

/// A queue: its items and its round-robin state (32 bytes, so a queue id
/// becomes an address with one shift).
#[repr(align(32))]
struct Slot {
    /// The queue's items, used only with the discipline's arena.
    list: List,
    /// Credit left, in length units: during the queue's turn, what it may
    /// still send; between turns, what it carries to the next.
    deficit: u64,
    /// Credit a turn adds.
    quantum: u32,
    /// The next queue of the circular active list (valid while active).
    next: u32,
}

/// Deficit round robin: the non-empty queues take turns in a circular list;
/// a turn adds the queue's quantum to its deficit and sends head items while
/// the head's length fits in the deficit. A queue that empties leaves the
/// list and loses its deficit; a queue that becomes non-empty joins at the
/// end of the round.
///
/// Quanta are in the unit of the lengths passed to [`Discipline::enqueue`]:
/// bytes for frames, or 1 per cell for a cell port (then a quantum of `k`
/// sends `k` cells a turn). Over any interval in which queues `i` and `j`
/// stay non-empty, `|sent_i/Q_i − sent_j/Q_j|` stays below
/// `2 + Lmax/Q_i + Lmax/Q_j` (bounded by the deficit argument of the
/// paper; the tests check it).
///
/// A turn begins as soon as the one before it ends (or the queue becomes
/// the only busy one), so the head of the queue whose turn it is always
/// fits its deficit. Each enqueue and dequeue is O(1) when every quantum
/// is at least the largest length; a smaller quantum costs extra turns
/// until the deficit covers the head.
pub struct Drr<T> {
    qs: Vec<Slot>,
    /// Items, with their lengths.
    arena: Arena<T, u32>,
    /// The queue whose turn it is, or `NIL` when none is active.
    cur: u32,
    /// The queue before `cur` in the circular list.
    prev: u32,
}

impl<T> Drr<T> {
    /// DRR over `quanta.len()` queues, queue `i` with quantum `quanta[i]`.
    ///
    /// # Panics
    /// If a quantum is 0 or there are more queues than [`QueueId`]s.
    pub fn new(quanta: &[u32], limits: Limits) -> Self {
        assert!(quanta.iter().all(|&q| q > 0), "a DRR quantum must be > 0");
        assert!(quanta.len() <= QueueId::MAX as usize, "too many queues");
        Drr {
            qs: quanta
                .iter()
                .map(|&quantum| Slot {
                    list: List::EMPTY,
                    deficit: 0,
                    quantum,
                    next: NIL,
                })
                .collect(),
            arena: Arena::new(limits),
            cur: NIL,
            prev: NIL,
        }
    }

    /// DRR over `queues` queues sharing one `quantum`.
    ///
    /// # Panics
    /// As [`Drr::new`].
    pub fn equal(queues: usize, quantum: u32, limits: Limits) -> Self {
        Self::new(&vec![quantum; queues], limits)
    }

    /// Changes `queue`'s quantum; it counts from the queue's next turn (a
    /// turn that has begun, even with nothing sent yet, keeps the old one).
    ///
    /// # Panics
    /// If `quantum` is 0 or there is no such queue.
    pub fn set_quantum(&mut self, queue: QueueId, quantum: u32) {
        assert!(quantum > 0, "a DRR quantum must be > 0");
        self.qs[queue as usize].quantum = quantum;
    }

    /// `queue`'s quantum.
    ///
    /// # Panics
    /// If there is no such queue.
    pub fn quantum(&self, queue: QueueId) -> u32 {
        self.qs[queue as usize].quantum
    }

    /// Begins the turn of `c` (active, after `prev`): adds quanta, moving on
    /// while a head does not fit.
    #[inline(always)]
    fn begin_turn(&mut self, mut c: u32) {
        loop {
            // SAFETY: `c` is on the active list: a queue id whose list holds
            // items (and is used only with `arena`).
            let slot = unsafe { self.qs.get_unchecked_mut(c as usize) };
            slot.deficit += u64::from(slot.quantum);
            // SAFETY: as above.
            if u64::from(unsafe { self.arena.front_x(&slot.list) }) <= slot.deficit {
                break;
            }
            self.prev = c;
            c = slot.next;
        }
        self.cur = c;
    }

    /// Puts `q` at the end of the round: just before `cur`.
    #[inline(never)]
    fn activate(&mut self, q: u32) {
        if self.cur == NIL {
            self.qs[q as usize].next = q;
            self.prev = q;
            self.begin_turn(q);
        } else {
            self.qs[self.prev as usize].next = q;
            self.qs[q as usize].next = self.cur;
            self.prev = q;
        }
    }

    /// Takes `c`, whose turn it is and which just emptied, out of the round.
    #[inline(never)]
    fn deactivate(&mut self, c: u32) {
        let slot = &mut self.qs[c as usize];
        slot.deficit = 0;
        let next = slot.next;
        if self.prev == c {
            self.cur = NIL;
            self.prev = NIL;
        } else {
            self.qs[self.prev as usize].next = next;
            self.begin_turn(next);
        }
    }
}

impl<T: Send> Discipline<T> for Drr<T> {
    #[inline(always)]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        _now: Instant,
    ) -> Result<(), Dropped<T>> {
        let Some(slot) = self.qs.get_mut(queue as usize) else {
            return Err(Dropped {
                item,
                reason: DropReason::NoSuchQueue,
            });
        };
        // SAFETY: every queue's list is used only with `arena`.
        match unsafe { self.arena.push(&mut slot.list, item, len) } {
            Ok(false) => Ok(()),
            Ok(true) => {
                self.activate(queue);
                Ok(())
            }
            Err((item, reason)) => Err(Dropped { item, reason }),
        }
    }

    #[inline(always)]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        let c = self.cur;
        if c == NIL {
            return None;
        }
        // SAFETY: `cur` is on the active list: a queue id whose list holds
        // items (and is used only with `arena`).
        let slot = unsafe { self.qs.get_unchecked_mut(c as usize) };
        let (item, len, after) = unsafe { self.arena.pop(&mut slot.list) };
        // The head fitted: the turn's invariant.
        slot.deficit -= u64::from(len);
        match after {
            None => self.deactivate(c),
            // The turn ends as soon as the next head does not fit.
            Some(next_len) if u64::from(next_len) > slot.deficit => {
                let next = slot.next;
                self.prev = c;
                self.begin_turn(next);
            }
            Some(_) => {}
        }
        Some((c, item))
    }

    fn len(&self) -> usize {
        self.arena.len()
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.qs
            .get(queue as usize)
            .map_or(0, |s| s.list.len() as usize)
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        for s in &self.qs {
            // SAFETY: every queue's list is used only with `arena`.
            unsafe { self.arena.for_each(&s.list, f) };
        }
    }
}
