//! Sequence sync: a bounded resequencing window over sequence numbers.
//!
//! The window starts at `next`, the lowest number not yet delivered or given
//! up, and spans at most `max_held_units` numbers. A unit with number `next`
//! is delivered at once, with any held run after it. Others are held. The
//! receiver gives up on the missing numbers in front of a held unit when
//!
//! * that unit has waited `timeout` (reason [`Loss::Timeout`]), or
//! * a new unit lies beyond the window, or holding it would break the unit
//!   or byte limit (reason [`Loss::BufferFull`]).
//!
//! Numbers are unwrapped against `next`: a field `d` (mod 2^b) ahead of
//! `next` by less than half the space is `next + d`; anything else is behind
//! `next` and rejected as [`Reject::Stale`]. The window is never more than
//! half the space (checked with the config), so the two cannot be confused
//! while the links keep their skew within the window.

use std::collections::VecDeque;

use aurora_time::{Duration, Instant};

use crate::config::RxLimits;
use crate::counters::{Loss, Reject};
use crate::rx::{Book, Delivery, Held};

#[derive(Debug)]
pub(crate) struct Reseq {
    space: u64,
    next: u64,
    /// Slot `i` holds the unit numbered `next + i`, if it arrived.
    window: VecDeque<Option<Held>>,
    /// (arrival time, number) of held units in arrival order; entries below
    /// `next` are dropped from the front as delivery passes them.
    order: VecDeque<(Instant, u64)>,
    max_units: usize,
    max_bytes: usize,
    timeout: Duration,
}

impl Reseq {
    pub(crate) fn new(space: u64, limits: RxLimits) -> Reseq {
        Reseq {
            space,
            next: 0,
            window: VecDeque::new(),
            order: VecDeque::new(),
            max_units: limits.max_held_units,
            max_bytes: limits.max_held_bytes,
            timeout: limits.timeout,
        }
    }

    pub(crate) fn arrive(
        &mut self,
        book: &mut Book,
        now: Instant,
        field: u64,
        mut h: Held,
        out: &mut Vec<Delivery>,
    ) {
        let diff = field.wrapping_sub(self.next) & (self.space - 1);
        if diff >= self.space / 2 {
            let back = self.space - diff;
            if let Some(abs) = self.next.checked_sub(back) {
                book.stats.arrival_order.observe(abs);
            }
            book.reject(Reject::Stale);
            return;
        }
        let abs = self.next + diff;
        book.stats.arrival_order.observe(abs);
        if matches!(self.window.get(diff as usize), Some(Some(_))) {
            book.reject(Reject::Duplicate);
            return;
        }
        h.seq = Some(abs);
        book.accept(&h);
        let cap = self.max_units as u64;
        if abs >= self.next + cap {
            self.skip_to(book, now, abs + 1 - cap, Loss::BufferFull, out);
        }
        while abs > self.next
            && (book.held_units + 1 > self.max_units
                || book.held_bytes + h.bytes() > self.max_bytes)
        {
            // Give up on the gap in front of the lowest held unit (or in
            // front of this one, if it comes first).
            let first = self.window.iter().position(Option::is_some);
            let target = first.map_or(abs, |i| (self.next + i as u64).min(abs));
            self.skip_to(book, now, target, Loss::BufferFull, out);
        }
        if abs == self.next {
            book.deliver(now, h, false, out);
            self.next += 1;
            self.window.pop_front();
            self.deliver_run(book, now, out);
        } else {
            let i = (abs - self.next) as usize;
            if self.window.len() <= i {
                self.window.resize_with(i + 1, || None);
            }
            book.hold(now, &h);
            self.window[i] = Some(h);
            self.order.push_back((now, abs));
        }
        self.tidy();
    }

    /// Delivers held units from `next` on while they are consecutive.
    fn deliver_run(&mut self, book: &mut Book, now: Instant, out: &mut Vec<Delivery>) {
        while let Some(Some(_)) = self.window.front() {
            let h = self.window.pop_front().flatten().expect("checked");
            book.deliver(now, h, true, out);
            self.next += 1;
        }
    }

    /// Moves `next` up to `target`, delivering what is held below it and
    /// giving up on the rest for `why`, then delivers the run from there.
    fn skip_to(
        &mut self,
        book: &mut Book,
        now: Instant,
        target: u64,
        why: Loss,
        out: &mut Vec<Delivery>,
    ) {
        while self.next < target {
            match self.window.pop_front() {
                Some(Some(h)) => book.deliver(now, h, true, out),
                Some(None) => book.gap(why, 1),
                None => {
                    book.gap(why, target - self.next);
                    self.next = target;
                    break;
                }
            }
            self.next += 1;
        }
        self.deliver_run(book, now, out);
    }

    /// Drops arrival records that delivery has passed.
    fn tidy(&mut self) {
        while self.order.front().is_some_and(|&(_, s)| s < self.next) {
            self.order.pop_front();
        }
    }

    pub(crate) fn poll_at(&self) -> Option<Instant> {
        self.order.front().map(|&(t, _)| t + self.timeout)
    }

    pub(crate) fn on_timeout(&mut self, book: &mut Book, now: Instant, out: &mut Vec<Delivery>) {
        self.tidy();
        while let Some(&(t, seq)) = self.order.front() {
            if t + self.timeout > now {
                break;
            }
            self.skip_to(book, now, seq, Loss::Timeout, out);
            self.tidy();
        }
    }
}
