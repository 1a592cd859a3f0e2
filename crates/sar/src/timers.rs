//! A reassembly timer queue that costs no allocation per PDU.
//!
//! Each PDU still open when the receiver has taken a run of its VC's cells
//! (the consecutive cells of one VC in a batch) pushes (deadline, key,
//! token) onto a binary heap; a PDU that begins and ends within one run
//! never does. A PDU that finishes before its
//! deadline is not removed: its entry goes stale
//! (the owner's current token no longer matches) and is skipped when it
//! reaches the top. Stale entries are pruned from the top after every change,
//! so the first entry is always live, and the heap is compacted whenever it
//! holds more than twice the live entries plus a margin, so memory stays
//! bounded by the number of reassemblies in progress.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use aurora_time::Instant;

const SLACK: usize = 1024;

/// Deadlines keyed by `K`, each with a token that says whether it is live.
#[derive(Debug)]
pub(crate) struct Deadlines<K: Ord> {
    heap: BinaryHeap<Reverse<(Instant, K, u64)>>,
    next_token: u64,
}

impl<K: Ord + Copy> Default for Deadlines<K> {
    fn default() -> Self {
        Deadlines {
            heap: BinaryHeap::new(),
            next_token: 1,
        }
    }
}

impl<K: Ord + Copy> Deadlines<K> {
    /// Arms a deadline; returns the token that marks it live.
    pub(crate) fn arm(&mut self, at: Instant, key: K) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        self.heap.push(Reverse((at, key, token)));
        token
    }

    /// Drops stale entries from the top, and compacts when stale entries
    /// outnumber live ones. `live(key, token)` says whether an entry counts;
    /// `live_count` is how many reassemblies are in progress.
    pub(crate) fn tidy(&mut self, live_count: usize, live: impl Fn(K, u64) -> bool) {
        if self.heap.len() > 2 * live_count + SLACK {
            self.heap.retain(|Reverse((_, k, t))| live(*k, *t));
        }
        while let Some(Reverse((_, k, t))) = self.heap.peek() {
            if live(*k, *t) {
                break;
            }
            self.heap.pop();
        }
    }

    /// The earliest deadline (live, if `tidy` ran since the last change).
    pub(crate) fn first(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Takes the earliest entry if it is due by `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(K, u64)> {
        match self.heap.peek() {
            Some(Reverse((t, _, _))) if *t <= now => {
                self.heap.pop().map(|Reverse((_, k, tok))| (k, tok))
            }
            _ => None,
        }
    }

    /// Entries held (live and stale).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_entries_are_skipped_and_memory_stays_bounded() {
        let mut d: Deadlines<u32> = Deadlines::default();
        let mut live_token = 0;
        for i in 0..100_000u64 {
            // One PDU at a time: each finishes before its deadline.
            live_token = d.arm(Instant::from_nanos(i as i64 + 1000), 7);
            d.tidy(1, |_, t| t == live_token);
        }
        assert!(d.len() <= 2 + SLACK);
        assert_eq!(d.first(), Some(Instant::from_nanos(99_999 + 1000)));
        assert_eq!(d.pop_due(Instant::from_nanos(0)), None);
        assert_eq!(
            d.pop_due(Instant::from_nanos(200_000)),
            Some((7, live_token))
        );
    }
}
