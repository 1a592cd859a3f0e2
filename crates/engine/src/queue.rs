//! The engine's event queue: a binary heap with one slot in front of it.
//!
//! Most events an engine makes are the next it runs (a cell arrives and the
//! switch sends it on; a line frees and pulls the next frame). The slot
//! holds the earliest event pushed since the last pop when that is earlier
//! than everything in the heap, so such an event goes in and out without
//! touching the heap. Pop order is exactly the heap's: the smallest key.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A min-queue of `T` with a fast slot for the most recent minimum.
#[derive(Debug)]
pub(crate) struct EventQueue<T: Ord> {
    hot: Option<T>,
    heap: BinaryHeap<Reverse<T>>,
}

impl<T: Ord + Copy> EventQueue<T> {
    pub(crate) fn new() -> Self {
        EventQueue {
            hot: None,
            heap: BinaryHeap::new(),
        }
    }

    /// Adds `e`.
    #[inline]
    pub(crate) fn push(&mut self, e: T) {
        match self.hot {
            None => {
                if self.heap.peek().is_none_or(|Reverse(top)| e < *top) {
                    self.hot = Some(e);
                } else {
                    self.heap.push(Reverse(e));
                }
            }
            Some(h) if e < h => {
                self.heap.push(Reverse(h));
                self.hot = Some(e);
            }
            Some(_) => self.heap.push(Reverse(e)),
        }
    }

    /// The smallest event, without taking it.
    #[inline]
    pub(crate) fn peek(&self) -> Option<T> {
        // The slot, when full, is below everything in the heap.
        self.hot.or_else(|| self.heap.peek().map(|Reverse(e)| *e))
    }

    /// Takes the smallest event.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<T> {
        self.hot
            .take()
            .or_else(|| self.heap.pop().map(|Reverse(e)| e))
    }

    /// Events queued.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len() + usize::from(self.hot.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any interleaving of pushes and pops gives what a plain heap gives.
        #[test]
        fn pops_in_the_order_a_heap_does(ops in prop::collection::vec((any::<bool>(), 0u32..50), 0..300)) {
            let mut q = EventQueue::new();
            let mut h = BinaryHeap::new();
            for (push, v) in ops {
                if push {
                    q.push(v);
                    h.push(Reverse(v));
                } else {
                    prop_assert_eq!(q.pop(), h.pop().map(|Reverse(v)| v));
                }
                prop_assert_eq!(q.len(), h.len());
                prop_assert_eq!(q.peek(), h.peek().map(|Reverse(v)| *v));
            }
        }
    }
}
