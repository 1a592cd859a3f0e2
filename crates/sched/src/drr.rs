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
    queues: Queues<(T, u32)>,
    slots: Vec<Slot>,
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
            queues: Queues::new(quanta.len(), limits),
            slots: quanta
                .iter()
                .map(|&quantum| Slot {
                    deficit: 0,
                    quantum,
                    next: NIL,
                })
                .collect(),
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
        self.slots[queue as usize].quantum = quantum;
    }

    /// `queue`'s quantum.
    pub fn quantum(&self, queue: QueueId) -> u32 {
        self.slots[queue as usize].quantum
    }

    /// Puts `q` at the end of the round: just before `cur`.
    #[inline]
    fn activate(&mut self, q: u32) {
        if self.cur == NIL {
            self.slots[q as usize].next = q;
            self.cur = q;
            self.prev = q;
            self.fresh = false;
        } else {
            self.slots[self.prev as usize].next = q;
            self.slots[q as usize].next = self.cur;
            self.prev = q;
        }
    }
}

impl<T: Send> Discipline<T> for Drr<T> {
    #[inline]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        _now: Instant,
    ) -> Result<(), Dropped<T>> {
        if let Err(reason) = self.queues.admit(queue) {
            return Err(Dropped { item, reason });
        }
        if self.queues.push(queue as usize, (item, len)) {
            self.activate(queue);
        }
        Ok(())
    }

    #[inline]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        if self.cur == NIL {
            return None;
        }
        loop {
            let c = self.cur as usize;
            let slot = &mut self.slots[c];
            if !self.fresh {
                slot.deficit += u64::from(slot.quantum);
                self.fresh = true;
            }
            let head = match self.queues.front(c) {
                Some(&(_, len)) => u64::from(len),
                None => unreachable!("an active DRR queue is non-empty"),
            };
            if head <= slot.deficit {
                slot.deficit -= head;
                let next = slot.next;
                let (item, _) = self.queues.pop(c)?;
                if self.queues.queue_len(c as QueueId) == 0 {
                    self.slots[c].deficit = 0;
                    self.fresh = false;
                    if self.prev == c as u32 {
                        self.cur = NIL;
                        self.prev = NIL;
                    } else {
                        self.slots[self.prev as usize].next = next;
                        self.cur = next;
                    }
                }
                return Some((c as QueueId, item));
            }
            self.prev = c as u32;
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
