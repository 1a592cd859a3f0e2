//! First in, first out over the whole port.

use std::collections::VecDeque;

use aurora_time::Instant;

use crate::{Discipline, DropReason, Dropped, Limits, QueueId};

/// One FIFO for all of a port's queues: items leave in the order they
/// arrived, whatever their queue. Each item's queue is still checked against
/// [`Limits::queue`], counted, and returned by [`Discipline::dequeue`].
///
/// Lengths are ignored. Enqueue and dequeue are O(1).
pub struct Fifo<T> {
    ring: VecDeque<(QueueId, T)>,
    counts: Vec<u32>,
    port: usize,
    queue: u32,
}

impl<T> Fifo<T> {
    /// A FIFO for `queues` queues (ids `0..queues`) under `limits`.
    ///
    /// # Panics
    /// If `queues` does not fit a [`QueueId`].
    pub fn new(queues: usize, limits: Limits) -> Self {
        assert!(queues <= QueueId::MAX as usize, "too many queues");
        Fifo {
            ring: VecDeque::new(),
            counts: vec![0; queues],
            port: limits.port.min(1 << 31),
            queue: limits.queue.min(u32::MAX as usize) as u32,
        }
    }
}

impl<T: Send> Discipline<T> for Fifo<T> {
    #[inline(always)]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        _len: u32,
        _now: Instant,
    ) -> Result<(), Dropped<T>> {
        let reason = match self.counts.get_mut(queue as usize) {
            None => DropReason::NoSuchQueue,
            Some(c) if *c >= self.queue => DropReason::QueueFull,
            Some(_) if self.ring.len() >= self.port => DropReason::PortFull,
            Some(c) => {
                *c += 1;
                self.ring.push_back((queue, item));
                return Ok(());
            }
        };
        Err(Dropped { item, reason })
    }

    #[inline(always)]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        let (q, item) = self.ring.pop_front()?;
        self.counts[q as usize] -= 1;
        Some((q, item))
    }

    fn len(&self) -> usize {
        self.ring.len()
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.counts.get(queue as usize).map_or(0, |&c| c as usize)
    }
}
