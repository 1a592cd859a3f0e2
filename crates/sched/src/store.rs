//! The per-queue FIFOs every discipline keeps its items in.
//!
//! Each queue is a ring buffer of its own whose capacity is a power of two.
//! A ring starts empty and doubles when it is full, up to the power of two at
//! or above the smaller of [`Limits::queue`] and [`Limits::port`], so after a
//! warm-up (each queue once as long as it ever gets) nothing allocates. The
//! port-wide count enforces [`Limits::port`]. Memory is bounded by
//! `queues × that power of two` slots, and in practice by the longest each
//! queue has been.

use crate::{DropReason, Limits, QueueId};

/// One queue's FIFO: a ring over `buf`, whose length is 0 or a power of two.
pub(crate) struct Ring<P> {
    buf: Vec<Option<P>>,
    head: u32,
    len: u32,
}

impl<P> Ring<P> {
    /// An empty ring that has not allocated.
    pub(crate) fn new() -> Self {
        Ring {
            buf: Vec::new(),
            head: 0,
            len: 0,
        }
    }

    /// Items waiting.
    #[inline]
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// Appends `p`; grows the ring, never past `max` slots, when it is full.
    #[inline]
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
    #[inline]
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
    #[inline]
    pub(crate) fn front(&self) -> Option<&P> {
        if self.len == 0 {
            return None;
        }
        self.buf[self.head as usize].as_ref()
    }

    /// Every waiting item, oldest first, for in-place edits (virtual-time
    /// rebasing).
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&mut P)) {
        let mask = self.buf.len().wrapping_sub(1);
        for k in 0..self.len as usize {
            if let Some(p) = self.buf[(self.head as usize + k) & mask].as_mut() {
                f(p);
            }
        }
    }

    /// Doubles the ring (to at least 4 slots), keeping the order.
    #[cold]
    fn grow(&mut self, max: usize) {
        let old = self.buf.len();
        let new = (old * 2).max(4).min(max.next_power_of_two().max(1));
        assert!(new > old, "ring grown past its limit");
        let mut buf: Vec<Option<P>> = Vec::with_capacity(new);
        for k in 0..old {
            buf.push(self.buf[(self.head as usize + k) & (old.wrapping_sub(1))].take());
        }
        buf.resize_with(new, || None);
        self.buf = buf;
        self.head = 0;
    }
}

/// A fixed set of queues under one port's limits.
pub(crate) struct Queues<P> {
    rings: Vec<Ring<P>>,
    len: usize,
    port: usize,
    queue: u32,
    ring_max: usize,
}

impl<P> Queues<P> {
    /// `queues` empty queues under `limits`.
    ///
    /// # Panics
    /// If `queues` does not fit a [`QueueId`].
    pub(crate) fn new(queues: usize, limits: Limits) -> Self {
        assert!(
            queues <= QueueId::MAX as usize,
            "too many queues for a QueueId"
        );
        let queue = limits.queue.min(u32::MAX as usize) as u32;
        Queues {
            rings: (0..queues).map(|_| Ring::new()).collect(),
            len: 0,
            port: limits.port,
            queue,
            ring_max: limits.queue.min(limits.port).min(1 << 31),
        }
    }

    /// Items waiting in all.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Items waiting in `q` (0 for no such queue).
    #[inline]
    pub(crate) fn queue_len(&self, q: QueueId) -> usize {
        self.rings.get(q as usize).map_or(0, |r| r.len() as usize)
    }

    /// Whether one more item fits in `q`: a missing queue first, then a full
    /// queue, then a full port.
    #[inline]
    pub(crate) fn admit(&self, q: QueueId) -> Result<(), DropReason> {
        let Some(r) = self.rings.get(q as usize) else {
            return Err(DropReason::NoSuchQueue);
        };
        if r.len() >= self.queue {
            return Err(DropReason::QueueFull);
        }
        if self.len >= self.port {
            return Err(DropReason::PortFull);
        }
        Ok(())
    }

    /// Appends `p` to `q`, which [`Queues::admit`] accepted; says whether
    /// `q` was empty before.
    #[inline]
    pub(crate) fn push(&mut self, q: usize, p: P) -> bool {
        let r = &mut self.rings[q];
        let was_empty = r.len() == 0;
        r.push(p, self.ring_max);
        self.len += 1;
        was_empty
    }

    /// Takes the oldest item of `q`.
    #[inline]
    pub(crate) fn pop(&mut self, q: usize) -> Option<P> {
        let p = self.rings[q].pop();
        if p.is_some() {
            self.len -= 1;
        }
        p
    }

    /// The oldest item of `q`.
    #[inline]
    pub(crate) fn front(&self, q: usize) -> Option<&P> {
        self.rings[q].front()
    }

    /// Every waiting item, for in-place edits.
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&mut P)) {
        for r in &mut self.rings {
            r.for_each_mut(&mut f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_order_across_growth_and_wrap() {
        let mut r = Ring::new();
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
        let mut qs: Queues<u8> = Queues::new(2, Limits { port: 3, queue: 2 });
        assert_eq!(qs.admit(2), Err(DropReason::NoSuchQueue));
        for _ in 0..2 {
            qs.admit(0).unwrap();
            qs.push(0, 0);
        }
        assert_eq!(qs.admit(0), Err(DropReason::QueueFull));
        qs.admit(1).unwrap();
        qs.push(1, 1);
        assert_eq!(qs.admit(1), Err(DropReason::PortFull));
        assert_eq!(qs.len(), 3);
        assert_eq!(qs.queue_len(0), 2);
        assert_eq!(qs.queue_len(9), 0);
    }
}
