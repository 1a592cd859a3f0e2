//! No sync: the receiver replays the sender's round robin on what arrives.
//!
//! Each stripe's units wait in a FIFO. The receiver runs its own copy of the
//! sender's balancer, fed with the sizes of the units it takes: the next
//! unit comes from the stripe whose turn it is, and the receiver waits for
//! that stripe. Without loss this restores the sent order whatever the skew.
//! A lost unit goes unnoticed: the stripe's next unit is taken in its place,
//! and for cells every later unit of that stripe is then one round early (a
//! misordering that lasts, which [`crate::metrics`] is there to measure).
//!
//! When the unit the receiver waits for does not come within the timeout
//! while others wait, or the buffer is full, it passes over that stripe's
//! turn ([`RxStats::skipped_turns`](crate::RxStats::skipped_turns)) and
//! carries on. Nothing that arrived is ever given up.

use std::collections::VecDeque;

use aurora_time::{Duration, Instant};

use crate::balance::Balancer;
use crate::config::RxLimits;
use crate::rx::{Book, Delivery, Held};

#[derive(Debug)]
pub(crate) struct Logical {
    balancer: Balancer,
    queues: Vec<VecDeque<Held>>,
    max_units: usize,
    max_bytes: usize,
    timeout: Duration,
}

impl Logical {
    pub(crate) fn new(stripes: usize, quantum: i64, limits: RxLimits) -> Logical {
        Logical {
            balancer: Balancer::new(stripes, quantum),
            queues: (0..stripes).map(|_| VecDeque::new()).collect(),
            max_units: limits.max_held_units,
            max_bytes: limits.max_held_bytes,
            timeout: limits.timeout,
        }
    }

    pub(crate) fn arrive(
        &mut self,
        book: &mut Book,
        now: Instant,
        h: Held,
        out: &mut Vec<Delivery>,
    ) {
        book.accept(&h);
        let s = h.stripe;
        loop {
            if self.queues[s].is_empty() && self.balancer.next_stripe() == s {
                // Its turn, and nothing of its stripe waits: straight through.
                self.balancer.place(s, h.size);
                book.deliver(now, h, false, out);
                self.run(book, now, out);
                return;
            }
            if book.held_units < self.max_units && book.held_bytes + h.bytes() <= self.max_bytes {
                break;
            }
            // Full: pass over the turn everything waits for.
            self.skip(book);
            self.run(book, now, out);
        }
        book.hold(now, &h);
        self.queues[s].push_back(h);
    }

    /// Takes units while the stripe whose turn it is has one.
    fn run(&mut self, book: &mut Book, now: Instant, out: &mut Vec<Delivery>) {
        loop {
            let s = self.balancer.next_stripe();
            let Some(h) = self.queues[s].pop_front() else {
                return;
            };
            self.balancer.place(s, h.size);
            book.deliver(now, h, true, out);
        }
    }

    /// Passes over the turn of the (empty) stripe the receiver waits for.
    fn skip(&mut self, book: &mut Book) {
        let s = self.balancer.next_stripe();
        self.balancer.skip_turn(s);
        book.stats.skipped_turns += 1;
    }

    fn oldest(&self) -> Option<Instant> {
        self.queues
            .iter()
            .filter_map(|q| q.front().map(|h| h.arrived))
            .min()
    }

    pub(crate) fn poll_at(&self) -> Option<Instant> {
        self.oldest().map(|t| t + self.timeout)
    }

    pub(crate) fn on_timeout(&mut self, book: &mut Book, now: Instant, out: &mut Vec<Delivery>) {
        while self.oldest().is_some_and(|t| t + self.timeout <= now) {
            self.skip(book);
            self.run(book, now, out);
        }
    }
}
