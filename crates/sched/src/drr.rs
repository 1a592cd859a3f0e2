//! Deficit round robin (Shreedhar and Varghese, 1995).

use aurora_time::Instant;

use crate::store::Queues;
use crate::{Discipline, Dropped, Limits, QueueId};

const NIL: u32 = u32::MAX;

/// Per-queue round-robin state.
#[derive(Clone, Copy)]
struct Slot {
    /// Credit left in this round, in length units.
    deficit: u64,
    /// Credit a visit adds.
    quantum: u32,
    /// The next queue of the circular active list (valid while active).
    next: u32,
    /// The length of the queue's head item (valid while active).
    head: u32,
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
/// Each enqueue and dequeue is O(1) when every quantum is at least the
/// largest length; a smaller quantum costs extra turns until the deficit
/// covers the head.
pub struct Drr<T> {
    queues: Queues<(T, u32), Slot>,
    /// The queue whose turn it is, or `NIL` when none is active.
    cur: u32,
    /// The queue before `cur` in the circular list.
    prev: u32,
    /// Whether `cur`'s quantum has been added for this turn.
    fresh: bool,
}

impl<T> Drr<T> {
    /// DRR over `quanta.len()` queues, queue `i` with quantum `quanta[i]`.
    ///
    /// # Panics
    /// If a quantum is 0 or there are more queues than [`QueueId`]s.
    pub fn new(quanta: &[u32], limits: Limits) -> Self {
        assert!(quanta.iter().all(|&q| q > 0), "a DRR quantum must be > 0");
        Drr {
            queues: Queues::new(
                quanta.iter().map(|&quantum| Slot {
                    deficit: 0,
                    quantum,
                    next: NIL,
                    head: 0,
                }),
                limits,
            ),
            cur: NIL,
            prev: NIL,
            fresh: false,
        }
    }

    /// DRR over `queues` queues sharing one `quantum`.
    ///
    /// # Panics
    /// As [`Drr::new`].
    pub fn equal(queues: usize, quantum: u32, limits: Limits) -> Self {
        Self::new(&vec![quantum; queues], limits)
    }

    /// Changes `queue`'s quantum; it counts from the queue's next turn.
    ///
    /// # Panics
    /// If `quantum` is 0 or there is no such queue.
    pub fn set_quantum(&mut self, queue: QueueId, quantum: u32) {
        assert!(quantum > 0, "a DRR quantum must be > 0");
        self.queues.get_mut(queue as usize).state.quantum = quantum;
    }

    /// `queue`'s quantum.
    ///
    /// # Panics
    /// If there is no such queue.
    pub fn quantum(&self, queue: QueueId) -> u32 {
        self.queues.get(queue as usize).state.quantum
    }

    /// Puts `q` at the end of the round: just before `cur`.
    #[inline(never)]
    fn activate(&mut self, q: u32) {
        if self.cur == NIL {
            self.queues.get_mut(q as usize).state.next = q;
            self.cur = q;
            self.prev = q;
            self.fresh = false;
        } else {
            self.queues.get_mut(self.prev as usize).state.next = q;
            self.queues.get_mut(q as usize).state.next = self.cur;
            self.prev = q;
        }
    }

    /// Takes `c` (which just emptied) out of the round.
    #[inline(never)]
    fn deactivate(&mut self, c: u32, next: u32) {
        self.queues.get_mut(c as usize).state.deficit = 0;
        self.fresh = false;
        if self.prev == c {
            self.cur = NIL;
            self.prev = NIL;
        } else {
            self.queues.get_mut(self.prev as usize).state.next = next;
            self.cur = next;
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
        match self.queues.push(queue, item, |item, _| (item, len)) {
            Ok(false) => Ok(()),
            Ok(true) => {
                self.queues.get_mut(queue as usize).state.head = len;
                self.activate(queue);
                Ok(())
            }
            Err((item, reason)) => Err(Dropped { item, reason }),
        }
    }

    #[inline(always)]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        if self.cur == NIL {
            return None;
        }
        loop {
            let c = self.cur;
            let slot = &mut self.queues.get_mut(c as usize).state;
            if !self.fresh {
                slot.deficit += u64::from(slot.quantum);
                self.fresh = true;
            }
            let head = u64::from(slot.head);
            if head <= slot.deficit {
                slot.deficit -= head;
                let (deficit, next) = (slot.deficit, slot.next);
                let (item, rest) = self.queues.pop(c as usize)?;
                match rest.front() {
                    None => self.deactivate(c, next),
                    Some(&(_, len)) => {
                        rest.state.head = len;
                        // The turn ends as soon as the next head does not fit.
                        if u64::from(len) > deficit {
                            self.prev = c;
                            self.cur = next;
                            self.fresh = false;
                        }
                    }
                }
                return Some((c, item.0));
            }
            self.prev = c;
            self.cur = slot.next;
            self.fresh = false;
        }
    }

    fn len(&self) -> usize {
        self.queues.len()
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.queues.queue_len(queue)
    }
}
