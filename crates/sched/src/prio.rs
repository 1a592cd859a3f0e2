//! Strict priority.

use aurora_time::Instant;

use crate::bits::Bitmap;
use crate::store::Queues;
use crate::{Discipline, Dropped, Limits, QueueId};

/// Strict priority over a fixed number of levels: the queue id is the
/// level, 0 the highest. [`Discipline::dequeue`] always takes the oldest
/// item of the lowest-numbered non-empty queue, so a busy high level starves
/// every level below it.
///
/// Lengths are ignored. Enqueue is O(1); dequeue finds the level with a
/// two-level bitmap, O(1) up to 4,096 levels (one summary word per 4,096
/// more).
pub struct Priority<T> {
    queues: Queues<T, (), ()>,
    busy: Bitmap,
}

impl<T> Priority<T> {
    /// `levels` levels (queue ids `0..levels`, 0 highest) under `limits`.
    ///
    /// # Panics
    /// If `levels` does not fit a [`QueueId`].
    pub fn new(levels: usize, limits: Limits) -> Self {
        Priority {
            queues: Queues::new((0..levels).map(|_| ()), limits),
            busy: Bitmap::new(levels),
        }
    }
}

impl<T: Send> Discipline<T> for Priority<T> {
    #[inline(always)]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        _len: u32,
        _now: Instant,
    ) -> Result<(), Dropped<T>> {
        match self.queues.push(queue, item, |_| ()) {
            Ok(was_empty) => {
                if was_empty {
                    self.busy.set(queue as usize);
                }
                Ok(())
            }
            Err((item, reason)) => Err(Dropped { item, reason }),
        }
    }

    #[inline(always)]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        let q = self.busy.first()?;
        let (item, (), rest) = self.queues.pop(q);
        if rest == 0 {
            self.busy.clear(q);
        }
        Some((q as QueueId, item))
    }

    fn len(&self) -> usize {
        self.queues.len()
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.queues.queue_len(queue)
    }
}
