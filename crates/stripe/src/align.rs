//! Marker sync: each stripe's units are confirmed block by block, then
//! merged in the sender's (round, stripe) order.
//!
//! # How
//!
//! Every unit the sender sends belongs to a slot `(round, stripe)`, and the
//! sent order is the order of slots (units of one slot keep their order).
//! A stripe's rounds follow from its own units' sizes and its state at the
//! start ([`crate::balance`]). A marker carries the stripe's state (count,
//! round, credit) after the units before it.
//!
//! For each stripe the receiver keeps the state at the last marker it
//! accepted (the *anchor*) and the units that arrived since (*pending*).
//! When the next marker arrives:
//!
//! * if exactly `count − anchor.count` units are pending and replaying the
//!   round robin on their sizes from the anchor ends in the marker's state,
//!   the block is confirmed: each pending unit now has a known slot and
//!   becomes *ready*;
//! * otherwise a unit of the block was lost, and it is not known which:
//!   the pending units are given up ([`Loss::Unverified`]), the missing ones
//!   counted ([`Loss::Missing`]), and the stripe carries on from the
//!   marker's state: it is back in step.
//!
//! A lost marker needs nothing special: the next one closes a block twice
//! as long. A stripe is complete for round `r` when its anchor says its next
//! unit will be in a later round; the delivery cursor walks the slots in
//! order, hands out ready units, passes complete slots, and stops at the
//! first slot it cannot yet know.
//!
//! # Giving up
//!
//! When the oldest held unit has waited `timeout`, or the buffer is over a
//! limit, the receiver takes the stripe the cursor waits on (or, if the
//! cursor waits on nothing, the one with the most pending units) out of
//! step: its pending units are given up ([`Loss::Timeout`] or
//! [`Loss::BufferFull`]), units arriving on it are given up
//! ([`Loss::OutOfStep`]) and the cursor passes over it, until its next marker
//! puts it back in step. Ready units whose slot the cursor passed meanwhile
//! are given up as [`Loss::Overtaken`].
//!
//! # Cost of a loss
//!
//! A lost data unit costs the units of its block on its stripe: at most K
//! (K the marker interval, the lost one included); other stripes lose
//! nothing. With `j` markers lost next to it, at most `(j + 1)·K`. A lost
//! marker alone costs nothing, provided the buffer holds the longer block
//! and the timeout is not reached first. The stripe is back in step at the
//! first good marker after the loss.

use std::collections::VecDeque;

use aurora_time::{Duration, Instant};

use crate::balance::StripeState;
use crate::config::{RxLimits, UnitKind};
use crate::counters::{Loss, Reject};
use crate::format::Marker;
use crate::rx::{Book, Delivery, Held};

/// Delivery order: round first, then stripe.
type Slot = (u64, usize);

#[derive(Debug)]
struct Stripe {
    /// In step: its anchor is trusted and units arriving on it are kept.
    synced: bool,
    /// State at the last marker accepted.
    anchor: StripeState,
    /// Units since the anchor, waiting for the next marker.
    pending: VecDeque<Held>,
    /// Confirmed units with their rounds, waiting for the cursor.
    ready: VecDeque<(u64, Held)>,
    /// Units since the anchor given up already (while out of step).
    given_up: u64,
}

#[derive(Debug)]
pub(crate) struct Align {
    stripes: Vec<Stripe>,
    unit: UnitKind,
    quantum: i64,
    /// Bytes charged for the largest unit.
    largest: i64,
    /// The slot of the last unit delivered: slots before it are done.
    cursor: Slot,
    /// The stripe whose incomplete slot holds up delivery, if any.
    blocked: Option<usize>,
    max_units: usize,
    max_bytes: usize,
    timeout: Duration,
}

impl Align {
    pub(crate) fn new(
        n: usize,
        unit: UnitKind,
        quantum: i64,
        largest: i64,
        limits: RxLimits,
    ) -> Align {
        Align {
            stripes: (0..n)
                .map(|_| Stripe {
                    synced: true,
                    anchor: StripeState::START,
                    pending: VecDeque::new(),
                    ready: VecDeque::new(),
                    given_up: 0,
                })
                .collect(),
            unit,
            quantum,
            largest,
            cursor: (0, 0),
            blocked: None,
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
        let mut why = Loss::OutOfStep;
        loop {
            if !self.stripes[s].synced {
                self.stripes[s].given_up += 1;
                book.discard(now, h, false, why);
                return;
            }
            if book.held_units < self.max_units && book.held_bytes + h.bytes() <= self.max_bytes {
                break;
            }
            // Make room first; if nothing else can give way, this stripe does.
            why = Loss::BufferFull;
            if !self.relieve(book, now, Loss::BufferFull, out) {
                self.desync(book, now, s, Loss::BufferFull);
            }
        }
        book.hold(now, &h);
        self.stripes[s].pending.push_back(h);
    }

    /// True when `m` is a marker this stripe may take after its anchor.
    fn plausible(&self, stripe: usize, m: &Marker) -> bool {
        let st = &self.stripes[stripe];
        let a = st.anchor;
        let s = m.state;
        if usize::from(m.stripe) != stripe
            || usize::from(m.stripes) != self.stripes.len()
            || m.unit != self.unit
            || i64::from(m.quantum) != self.quantum
            || s.credit <= -self.largest
            || s.credit > self.quantum
            || s.count < a.count
            || s.round < a.round
            || (s.count == a.count && s != a)
            || (s.count > 0 && s.round == 0)
        {
            return false;
        }
        // Each unit moves a stripe on by at most largest/quantum + 2 rounds.
        let per_unit = (self.largest / self.quantum) as u64 + 2;
        s.round - a.round <= (s.count - a.count).saturating_mul(per_unit)
    }

    pub(crate) fn marker(
        &mut self,
        book: &mut Book,
        now: Instant,
        stripe: usize,
        m: &Marker,
        out: &mut Vec<Delivery>,
    ) {
        if !self.plausible(stripe, m) {
            book.reject(Reject::BadMarker);
            return;
        }
        book.stats.per_stripe[stripe].markers += 1;
        let q = self.quantum;
        let st = &mut self.stripes[stripe];
        let expected = m.state.count - st.anchor.count;
        if !st.synced && expected < st.given_up {
            // Older than units already given up on this stripe: of no use.
            return;
        }
        if st.synced && st.pending.len() as u64 == expected {
            let mut replay = st.anchor;
            for h in &st.pending {
                replay.place(h.size, q);
            }
            if replay == m.state {
                let mut s = st.anchor;
                while let Some(h) = st.pending.pop_front() {
                    let r = s.place(h.size, q);
                    st.ready.push_back((r, h));
                }
                st.anchor = m.state;
                self.advance(book, now, out);
                return;
            }
        }
        // A short (or otherwise wrong) block, or a stripe out of step:
        // start again from this marker.
        let n = st.pending.len() as u64;
        for h in st.pending.drain(..) {
            book.discard(now, h, true, Loss::Unverified);
        }
        st.given_up += n;
        book.gap(Loss::Missing, expected.saturating_sub(st.given_up));
        st.anchor = m.state;
        st.synced = true;
        st.given_up = 0;
        book.stats.per_stripe[stripe].resyncs += 1;
        self.advance(book, now, out);
    }

    /// The first slot of stripe `s` the cursor cannot pass yet.
    fn block_slot(&self, s: usize) -> Slot {
        let k = self.stripes[s].anchor.next_round(self.quantum);
        let first = if s >= self.cursor.1 {
            self.cursor.0
        } else {
            self.cursor.0.saturating_add(1)
        };
        (k.max(first), s)
    }

    /// Delivers ready units in slot order while no stripe in step may still
    /// have something before them; records the stripe waited on.
    fn advance(&mut self, book: &mut Book, now: Instant, out: &mut Vec<Delivery>) {
        loop {
            // (slot, 0 for a ready unit / 1 for a block): ready units first on ties.
            let mut best: Option<(Slot, u8)> = None;
            for s in 0..self.stripes.len() {
                let cursor = self.cursor;
                let st = &mut self.stripes[s];
                while st.ready.front().is_some_and(|&(r, _)| (r, s) < cursor) {
                    let (_, h) = st.ready.pop_front().expect("checked");
                    book.discard(now, h, true, Loss::Overtaken);
                }
                let ready = st.ready.front().map(|&(r, _)| ((r, s), 0));
                let block = st.synced.then(|| (self.block_slot(s), 1));
                for c in [ready, block].into_iter().flatten() {
                    if best.is_none_or(|b| c < b) {
                        best = Some(c);
                    }
                }
            }
            match best {
                None => {
                    self.blocked = None;
                    return;
                }
                Some((slot, 0)) => {
                    self.cursor = slot;
                    let (_, h) = self.stripes[slot.1]
                        .ready
                        .pop_front()
                        .expect("a ready unit");
                    book.deliver(now, h, true, out);
                }
                Some((slot, _)) => {
                    // Wait here without moving the cursor: slots of stripes
                    // out of step are passed only to deliver a later unit, so
                    // a stripe that comes back in step before then loses nothing.
                    self.blocked = Some(slot.1);
                    return;
                }
            }
        }
    }

    /// Takes stripe `s` out of step, giving up its pending units for `why`.
    fn desync(&mut self, book: &mut Book, now: Instant, s: usize, why: Loss) {
        let st = &mut self.stripes[s];
        let n = st.pending.len() as u64;
        for h in st.pending.drain(..) {
            book.discard(now, h, true, why);
        }
        st.given_up += n;
        st.synced = false;
    }

    /// Takes one stripe out of step to free held units; false when no
    /// stripe can be taken.
    ///
    /// On a timeout the victim is whatever keeps the oldest held unit: its
    /// own stripe if it still waits for a marker, else the stripe delivery
    /// waits on. When the buffer is full it is the stripe delivery waits
    /// on if any confirmed unit waits behind it, else the stripe with the
    /// most units waiting for a marker.
    fn relieve(
        &mut self,
        book: &mut Book,
        now: Instant,
        why: Loss,
        out: &mut Vec<Delivery>,
    ) -> bool {
        self.advance(book, now, out);
        let waiting_for_marker = |st: &Stripe| st.ready.is_empty() && !st.pending.is_empty();
        let victim = if why == Loss::Timeout {
            let oldest = (0..self.stripes.len())
                .filter_map(|s| {
                    let st = &self.stripes[s];
                    let t = st.ready.front().map(|(_, h)| h.arrived);
                    t.or_else(|| st.pending.front().map(|h| h.arrived))
                        .map(|t| (t, s))
                })
                .min();
            match oldest {
                Some((_, s)) if waiting_for_marker(&self.stripes[s]) => Some(s),
                Some(_) => self.blocked,
                None => None,
            }
        } else if self.stripes.iter().any(|st| !st.ready.is_empty()) && self.blocked.is_some() {
            self.blocked
        } else {
            (0..self.stripes.len())
                .filter(|&s| self.stripes[s].synced && !self.stripes[s].pending.is_empty())
                .max_by_key(|&s| self.stripes[s].pending.len())
        };
        let Some(s) = victim else { return false };
        self.desync(book, now, s, why);
        self.advance(book, now, out);
        true
    }

    fn oldest(&self) -> Option<Instant> {
        self.stripes
            .iter()
            .filter_map(|st| {
                st.ready
                    .front()
                    .map(|(_, h)| h.arrived)
                    .or_else(|| st.pending.front().map(|h| h.arrived))
            })
            .min()
    }

    pub(crate) fn poll_at(&self) -> Option<Instant> {
        self.oldest().map(|t| t + self.timeout)
    }

    pub(crate) fn on_timeout(&mut self, book: &mut Book, now: Instant, out: &mut Vec<Delivery>) {
        while self.oldest().is_some_and(|t| t + self.timeout <= now) {
            if !self.relieve(book, now, Loss::Timeout, out) {
                break;
            }
        }
    }
}
