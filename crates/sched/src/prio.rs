//! Strict priority.

use aurora_time::Instant;

use crate::bits::Bitmap;
use crate::store::{Arena, List};
use crate::{Discipline, DropReason, Dropped, Limits, QueueId};

/// Strict priority over a fixed number of levels: the queue id is the
/// level, 0 the highest. [`Discipline::dequeue`] always takes the oldest
/// item of the lowest-numbered non-empty queue, so a busy high level starves
/// every level below it.
///
/// Lengths are ignored. Enqueue is O(1); dequeue finds the level with a
/// two-level bitmap, O(1) up to 4,096 levels (one summary word per 4,096
/// more).
pub struct Priority<T> {
    /// One list per level, each used only with `arena`.
    levels: Vec<List>,
    arena: Arena<T, ()>,
    /// The non-empty levels.
    busy: Bitmap,
}

impl<T> Priority<T> {
    /// `levels` levels (queue ids `0..levels`, 0 highest) under `limits`.
    ///
    /// # Panics
    /// If `levels` does not fit a [`QueueId`].
    pub fn new(levels: usize, limits: Limits) -> Self {
        assert!(levels <= QueueId::MAX as usize, "too many levels");
        Priority {
            levels: (0..levels).map(|_| List::EMPTY).collect(),
            arena: Arena::new(limits),
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
        let Some(list) = self.levels.get_mut(queue as usize) else {
            return Err(Dropped {
                item,
                reason: DropReason::NoSuchQueue,
            });
        };
        // SAFETY: every level's list is used only with `arena`.
        match unsafe { self.arena.push(list, item, ()) } {
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
        // SAFETY: the bitmap has a bit per level and marks only non-empty
        // levels, whose lists are used only with `arena`.
        let list = unsafe { self.levels.get_unchecked_mut(q) };
        let (item, (), after) = unsafe { self.arena.pop(list) };
        if after.is_none() {
            self.busy.clear(q);
        }
        Some((q as QueueId, item))
    }

    fn len(&self) -> usize {
        self.arena.len()
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.levels
            .get(queue as usize)
            .map_or(0, |l| l.len() as usize)
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        for l in &self.levels {
            // SAFETY: every level's list is used only with `arena`.
            unsafe { self.arena.for_each(l, f) };
        }
    }
}
