//! The per-queue FIFOs every discipline keeps its items in.
//!
//! Each queue is a ring buffer of its own whose capacity is a power of two,
//! next to the discipline's per-queue state (so one index reaches both). A
//! ring starts empty and doubles when it is full, up to the power of two at
//! or above the smaller of [`Limits::queue`] and [`Limits::port`], so after
//! a warm-up (each queue once as long as it ever gets) nothing allocates.
//! The port-wide count enforces [`Limits::port`]. Memory is bounded by
//! `queues × that power of two` slots, and in practice by the longest each
//! queue has been.

use crate::{DropReason, Limits, QueueId};

/// One queue: a ring over `buf`, whose length is 0 or a power of two, and
/// the discipline's state for the queue.
pub(crate) struct Queue<P, S> {
    buf: Box<[Option<P>]>,
    head: u32,
    len: u32,
    /// The discipline's per-queue state.
    pub(crate) state: S,
}

impl<P, S> Queue<P, S> {
    pub(crate) fn new(state: S) -> Self {
        Queue {
            buf: Box::new([]),
            head: 0,
            len: 0,
            state,
        }
    }

    /// Items waiting.
    #[inline(always)]
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// Appends `p`; grows the ring, never past `max` slots, when it is full.
    #[inline(always)]
    pub(crate) fn push(&mut self, p: P, max: usize) {
        if self.len as usize == self.buf.len() {
            self.grow(max);
        }
        let mask = self.buf.len() - 1;
        let i = (self.head as usize + self.len as usize) & mask;
        self.buf[i] = Some(p);
        self.len += 1;
    }

    /// Takes the oldest item.
    #[inline(always)]
    pub(crate) fn pop(&mut self) -> Option<P> {
        if self.len == 0 {
            return None;
        }
        let mask = self.buf.len() - 1;
        let i = self.head as usize;
        let p = self.buf[i].take();
        self.head = ((i + 1) & mask) as u32;
        self.len -= 1;
        p
    }

    /// The oldest item.
    #[inline(always)]
    pub(crate) fn front(&self) -> Option<&P> {
        if self.len == 0 {
            return None;
        }
        self.buf[self.head as usize].as_ref()
    }

    /// Every waiting item, oldest first, for in-place edits.
    fn for_each_mut(&mut self, mut f: impl FnMut(&mut P)) {
        let mask = self.buf.len().wrapping_sub(1);
        for k in 0..self.len as usize {
            if let Some(p) = self.buf[(self.head as usize + k) & mask].as_mut() {
                f(p);
            }
        }
    }

    /// Doubles the ring (to at least 4 slots, at most `max` rounded up to a
    /// power of two), keeping the order.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, max: usize) {
        let old = self.buf.len();
        let new = (old * 2).max(4).min(max.next_power_of_two().max(1));
        assert!(new > old, "ring grown past its limit");
        let mut buf: Vec<Option<P>> = Vec::with_capacity(new);
        for k in 0..old {
            buf.push(self.buf[(self.head as usize + k) & (old - 1)].take());
        }
        buf.resize_with(new, || None);
        self.buf = buf.into_boxed_slice();
        self.head = 0;
    }
}

/// A fixed set of queues under one port's limits.
pub(crate) struct Queues<P, S> {
    qs: Vec<Queue<P, S>>,
    len: usize,
    port: usize,
    queue: u32,
    ring_max: usize,
}

impl<P, S> Queues<P, S> {
    /// One queue per state in `states`, under `limits`.
    ///
    /// # Panics
    /// If there are more queues than [`QueueId`]s.
    pub(crate) fn new(states: impl IntoIterator<Item = S>, limits: Limits) -> Self {
        let qs: Vec<Queue<P, S>> = states.into_iter().map(Queue::new).collect();
        assert!(
            qs.len() <= QueueId::MAX as usize,
            "too many queues for a QueueId"
        );
        Queues {
            qs,
            len: 0,
            port: limits.port,
            queue: limits.queue.min(u32::MAX as usize) as u32,
            ring_max: limits.queue.min(limits.port).min(1 << 31),
        }
    }

    /// Items waiting in all.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Items waiting in `q` (0 for no such queue).
    #[inline]
    pub(crate) fn queue_len(&self, q: QueueId) -> usize {
        self.qs.get(q as usize).map_or(0, |r| r.len() as usize)
    }

    /// Queue `q`.
    #[inline(always)]
    pub(crate) fn get(&self, q: usize) -> &Queue<P, S> {
        &self.qs[q]
    }

    /// Queue `q`, to change its state.
    #[inline(always)]
    pub(crate) fn get_mut(&mut self, q: usize) -> &mut Queue<P, S> {
        &mut self.qs[q]
    }

    /// Every queue's state.
    pub(crate) fn states_mut(&mut self) -> impl Iterator<Item = &mut S> {
        self.qs.iter_mut().map(|q| &mut q.state)
    }

    /// Appends the item `make` builds from `q`'s state, if it fits: a
    /// missing queue is refused first, then a full queue, then a full port.
    /// On success, says whether `q` was empty before; on refusal `make` is
    /// not called and `item` comes back.
    #[inline(always)]
    pub(crate) fn push<T>(
        &mut self,
        q: QueueId,
        item: T,
        make: impl FnOnce(T, &mut S) -> P,
    ) -> Result<bool, (T, DropReason)> {
        let Some(qu) = self.qs.get_mut(q as usize) else {
            return Err((item, DropReason::NoSuchQueue));
        };
        if qu.len >= self.queue {
            return Err((item, DropReason::QueueFull));
        }
        if self.len >= self.port {
            return Err((item, DropReason::PortFull));
        }
        let was_empty = qu.len == 0;
        let p = make(item, &mut qu.state);
        qu.push(p, self.ring_max);
        self.len += 1;
        Ok(was_empty)
    }

    /// Takes the oldest item of `q`, and gives `q` for a look at what is
    /// next.
    #[inline(always)]
    pub(crate) fn pop(&mut self, q: usize) -> Option<(P, &mut Queue<P, S>)> {
        let qu = &mut self.qs[q];
        let p = qu.pop()?;
        self.len -= 1;
        Some((p, qu))
    }

    /// Every waiting item, for in-place edits.
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&mut P)) {
        for q in &mut self.qs {
            q.for_each_mut(&mut f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_order_across_growth_and_wrap() {
        let mut r: Queue<u32, ()> = Queue::new(());
        let mut next_in = 0u32;
        let mut next_out = 0u32;
        for round in 0..50 {
            for _ in 0..(round % 7 + 1) {
                if r.len() == 40 {
                    break;
                }
                r.push(next_in, 40);
                next_in += 1;
            }
            for _ in 0..(round % 5) {
                if let Some(x) = r.pop() {
                    assert_eq!(x, next_out);
                    next_out += 1;
                }
            }
            assert_eq!(r.len(), next_in - next_out);
            assert!(r.buf.len() <= 64);
            assert!(r.buf.is_empty() || r.buf.len().is_power_of_two());
        }
        while let Some(x) = r.pop() {
            assert_eq!(x, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
    }

    #[test]
    fn admission_order_of_reasons() {
        let mut qs: Queues<u8, ()> = Queues::new([(), ()], Limits { port: 3, queue: 2 });
        let keep = |x: u8, _: &mut ()| x;
        assert_eq!(qs.push(2, 7, keep), Err((7, DropReason::NoSuchQueue)));
        assert_eq!(qs.push(0, 0, keep), Ok(true));
        assert_eq!(qs.push(0, 0, keep), Ok(false));
        assert_eq!(qs.push(0, 9, keep), Err((9, DropReason::QueueFull)));
        assert_eq!(qs.push(1, 1, keep), Ok(true));
        assert_eq!(qs.push(1, 8, keep), Err((8, DropReason::PortFull)));
        assert_eq!(qs.len(), 3);
        assert_eq!(qs.queue_len(0), 2);
        assert_eq!(qs.queue_len(9), 0);
        assert_eq!(qs.pop(0).map(|(p, q)| (p, q.len())), Some((0, 1)));
        assert_eq!(qs.len(), 2);
    }
}
