//! First in, first out over the whole port.

use std::mem::MaybeUninit;

use aurora_time::Instant;

use crate::{Discipline, DropReason, Dropped, Limits, QueueId};

/// A ring buffer whose capacity is 0 or a power of two, doubling when full
/// (the caller bounds its length).
///
/// Invariant, on which the `unsafe` blocks rest: the `len` slots from
/// `head` (modulo the capacity) hold initialised items, the others none.
struct Ring<P> {
    buf: Box<[MaybeUninit<P>]>,
    head: usize,
    len: usize,
}

impl<P> Ring<P> {
    fn new() -> Self {
        Ring {
            buf: Box::new([]),
            head: 0,
            len: 0,
        }
    }

    #[inline(always)]
    fn push(&mut self, p: P) {
        if self.len == self.buf.len() {
            self.grow();
        }
        let i = (self.head + self.len) & (self.buf.len() - 1);
        // SAFETY: `i` is masked into range (the capacity is a power of two,
        // not 0 after `grow`); the slot is outside the `len` from `head`,
        // so it holds no item to overwrite.
        unsafe { self.buf.get_unchecked_mut(i) }.write(p);
        self.len += 1;
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<P> {
        if self.len == 0 {
            return None;
        }
        let i = self.head;
        // SAFETY: `head` is in range and, the ring not being empty, holds an
        // item, read once: the slot leaves the `len` from `head`.
        let p = unsafe { self.buf.get_unchecked(i).assume_init_read() };
        self.head = (i + 1) & (self.buf.len() - 1);
        self.len -= 1;
        Some(p)
    }

    /// Shows `f` the items, oldest first.
    fn for_each(&self, f: &mut dyn FnMut(&P)) {
        for k in 0..self.len {
            let i = (self.head + k) & (self.buf.len() - 1);
            // SAFETY: `i` is one of the `len` slots from `head`, masked
            // into range, so it holds an initialised item.
            f(unsafe { self.buf.get_unchecked(i).assume_init_ref() });
        }
    }

    /// Doubles the capacity (at least 16), keeping the order.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let old = self.buf.len();
        let new = (old * 2).max(16);
        let mut buf: Box<[MaybeUninit<P>]> = (0..new).map(|_| MaybeUninit::uninit()).collect();
        for (k, slot) in buf.iter_mut().enumerate().take(self.len) {
            // SAFETY: the `len` slots from `head` hold items, each moved once
            // into the new buffer (the old one is then dropped as
            // uninitialised memory).
            slot.write(unsafe { self.buf[(self.head + k) & (old - 1)].assume_init_read() });
        }
        self.buf = buf;
        self.head = 0;
    }
}

impl<P> Drop for Ring<P> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

/// One FIFO for all of a port's queues: items leave in the order they
/// arrived, whatever their queue. Each item's queue is still checked against
/// [`Limits::queue`], counted, and returned by [`Discipline::dequeue`].
///
/// Lengths are ignored. Enqueue and dequeue are O(1); the buffer doubles as
/// needed, up to the port limit rounded up to a power of two.
pub struct Fifo<T> {
    ring: Ring<(QueueId, T)>,
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
            ring: Ring::new(),
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
            Some(_) if self.ring.len >= self.port => DropReason::PortFull,
            Some(c) => {
                *c += 1;
                self.ring.push((queue, item));
                return Ok(());
            }
        };
        Err(Dropped { item, reason })
    }

    #[inline(always)]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        let (q, item) = self.ring.pop()?;
        // SAFETY: only ids found in range in `counts` go in the ring.
        *unsafe { self.counts.get_unchecked_mut(q as usize) } -= 1;
        Some((q, item))
    }

    fn len(&self) -> usize {
        self.ring.len
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.counts.get(queue as usize).map_or(0, |&c| c as usize)
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        self.ring.for_each(&mut |(_, item)| f(item));
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;
    use std::rc::Rc;

    /// Order kept across growth and wrap-around; every item dropped once,
    /// those left in the ring when it goes too.
    #[test]
    fn ring_keeps_order_and_drops_once() {
        let token = Rc::new(());
        let mut r = Ring::new();
        let (mut next_in, mut next_out) = (0u32, 0u32);
        for round in 0..60 {
            for _ in 0..(round % 7 + 1) {
                r.push((next_in, token.clone()));
                next_in += 1;
            }
            for _ in 0..(round % 5) {
                if let Some((x, _)) = r.pop() {
                    assert_eq!(x, next_out);
                    next_out += 1;
                }
            }
            assert_eq!(r.len as u32, next_in - next_out);
            assert!(r.buf.len().is_power_of_two());
            assert_eq!(Rc::strong_count(&token), 1 + r.len);
        }
        drop(r);
        assert_eq!(Rc::strong_count(&token), 1);
    }
}
