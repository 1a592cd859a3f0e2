//! Weighted fair queueing: packet-by-packet GPS (PGPS) with the GPS virtual
//! time.

use aurora_time::Instant;

use crate::store::{Arena, List, NIL};
use crate::tagq::{Linked, TagQueue};
use crate::vt::{self, span, REBASE_AT, REBASE_BY};
use crate::{Discipline, DropReason, Dropped, Limits, QueueId};

/// Fraction bits of [`Wfq`]'s work-per-nanosecond constant.
const RATE_FRAC: u32 = 24;

/// A session: its items and its tags. 64 bytes, so a queue id becomes an
/// address with one shift.
#[repr(align(64))]
struct Session {
    /// The session's items, used only with the discipline's arena.
    list: List,
    /// Finish tag of the session's last arrival.
    f_last: u64,
    step: u64,
    /// The session's key in `select` (its head item's finish tag), while
    /// there.
    sel_key: u64,
    /// The session's key in `gps`, while there.
    gps_key: u64,
    weight: u32,
    /// The weight the session adds to the fluid system's busy sum: its
    /// weight while the fluid GPS system still serves it, else 0.
    in_gps: u32,
    /// The next session of its bucket in `select`.
    sel_next: u32,
    /// The next session of its bucket in `gps`.
    gps_next: u32,
}

/// The calendar of sessions with items.
const SELECT: u8 = 0;
/// The calendar of sessions in the fluid system.
const FLUID: u8 = 1;

impl Linked<SELECT> for Session {
    #[inline(always)]
    fn key(&self) -> u64 {
        self.sel_key
    }
    #[inline(always)]
    fn next(&self) -> u32 {
        self.sel_next
    }
    #[inline(always)]
    fn set_next(&mut self, next: u32) {
        self.sel_next = next;
    }
}

impl Linked<FLUID> for Session {
    #[inline(always)]
    fn key(&self) -> u64 {
        self.gps_key
    }
    #[inline(always)]
    fn next(&self) -> u32 {
        self.gps_next
    }
    #[inline(always)]
    fn set_next(&mut self, next: u32) {
        self.gps_next = next;
    }
}

/// Weighted fair queueing (Demers, Keshav and Shenker; Parekh and
/// Gallager's PGPS): every item is stamped on arrival with the time it would
/// finish in the fluid GPS system serving the same arrivals, and the line
/// sends the waiting item with the smallest stamp.
///
/// GPS virtual time `V(t)` grows at `r / Σ_{i ∈ B(t)} w_i`, where `r` is the
/// line rate and `B(t)` the sessions the *fluid* system is serving at `t`
/// (not the packet queues). An item of length `L` arriving at `a` for
/// session `i` of weight `w_i` gets `S = max(F_prev, V(a))` and
/// `F = S + L / w_i`, `F_prev` being the session's previous finish tag. The
/// fluid system stops serving session `i` when `V` reaches its last finish
/// tag; [`Wfq`] keeps those tags in a priority queue and, each time `now`
/// moves on, advances `V` piecewise from one such departure to the next,
/// taking the departing sessions' weights out of the sum, so `V` is exact
/// (to the fixed-point rounding) however the busy set changes. When the
/// fluid system is empty `V` stands still.
///
/// Units: lengths in any unit (bytes, or 1 per cell), the line rate in the
/// same unit per second, `now` in nanoseconds since the run's start, and
/// tags in `2^-32` length unit per unit of weight. Equal finish tags go
/// first to the session whose head item was filed first (it became the head
/// earlier). `now` must not go backwards (an earlier `now` counts as no
/// time passing); a dropped item still moves the fluid system to its `now`.
/// A session's share of the line among the busy sessions is
/// `w_i / Σ_{busy} w_j`; PGPS sends every item no later than its GPS
/// finish time plus one maximum item time `Lmax / r` (the property tests
/// check this against an independent fluid simulation).
///
/// Cost per item: a calendar queue of sessions by head finish tag (one pop
/// and one insertion per item sent), and the fluid clock, which runs only
/// when it has something to do: a call compares its `now` with the instant
/// the next fluid departure is due (kept up to date whenever the fluid
/// system changes), so while the busy set stays the same an item costs no
/// multiplication or division; `V` is brought up to date when a session
/// enters the fluid system, a departure falls due, a weight changes or
/// [`Wfq::virtual_time`] is read. Each fluid departure costs one calendar
/// operation (an entry found stale, because its session got more work
/// since, is filed again at the session's last tag instead of being updated
/// on every arrival).
///
/// Safety of the calendar calls: both calendars are made for the session
/// count and always given the whole `sessions` slice, whose length that
/// is; the ids given are session ids found in range or taken from a
/// calendar.
pub struct Wfq<T> {
    sessions: Vec<Session>,
    /// Items, with their finish tags.
    arena: Arena<T, u64>,
    /// Sessions with items, by the finish tag of their head item.
    select: TagQueue<SELECT>,
    /// Sessions in the fluid system, by a finish tag not after their last:
    /// an entry found stale (the session got more since) is filed again.
    gps: TagQueue<FLUID>,
    /// `V` at `last`.
    v: u64,
    /// Work done by `last` but not yet in `v`, in units of `2^-32` length
    /// unit.
    carry: u64,
    /// `Σ in_gps`.
    wb: u64,
    /// The smallest key in `gps`, or [`REBASE_AT`] if smaller: `V` can
    /// move below it without a fluid departure or a rebase.
    fast_limit: u64,
    /// How far the fluid system has been run.
    last: Instant,
    /// The first instant at which `V` reaches `fast_limit`: before it, the
    /// fluid system has nothing to do but let `V` grow, so it is only run
    /// (to `now`) when a call's `now` reaches this, a session enters it,
    /// or a weight changes.
    t_limit: Instant,
    /// The last call's `now`.
    seen: Instant,
    /// Work per nanosecond in `2^-32` length units, times `2^RATE_FRAC`.
    per_ns: u64,
}

impl<T> Wfq<T> {
    /// WFQ over `weights.len()` queues, queue `i` of weight `weights[i]`, on
    /// a line of `rate` length units per second, tuned for items of length
    /// 1 (cells counted in cells).
    ///
    /// # Panics
    /// If a weight or `rate` is 0, `rate` exceeds 2.5·10^11, or there are
    /// more queues than [`QueueId`]s.
    pub fn new(weights: &[u32], rate: u64, limits: Limits) -> Self {
        Self::with_typical_len(weights, rate, limits, 1)
    }

    /// As [`Wfq::new`], with the calendar buckets sized for items of about
    /// `len` (e.g. 1,500 for Ethernet frames counted in bytes). This only
    /// tunes speed; the service order does not depend on it.
    ///
    /// # Panics
    /// As [`Wfq::new`].
    pub fn with_typical_len(weights: &[u32], rate: u64, limits: Limits, len: u32) -> Self {
        assert!(rate > 0, "a WFQ line rate must be > 0");
        let per_ns = (u128::from(rate) << (32 + RATE_FRAC)) / 1_000_000_000;
        let per_ns = u64::try_from(per_ns).expect("WFQ line rate above 2.5e11 units/s");
        let wsum: u64 = weights.iter().map(|&w| u64::from(w)).sum::<u64>().max(1);
        let wmin = weights.iter().copied().min().unwrap_or(1);
        let shift = vt::calendar_shift(len, wsum, wmin);
        let n = weights.len();
        assert!(n <= QueueId::MAX as usize, "too many queues");
        Wfq {
            sessions: weights
                .iter()
                .map(|&w| Session {
                    list: List::EMPTY,
                    f_last: 0,
                    step: vt::step(w),
                    sel_key: 0,
                    gps_key: 0,
                    weight: w,
                    in_gps: 0,
                    sel_next: NIL,
                    gps_next: NIL,
                })
                .collect(),
            arena: Arena::new(limits),
            select: TagQueue::new(n, shift),
            gps: TagQueue::new(n, shift + 3),
            v: 0,
            carry: 0,
            wb: 0,
            fast_limit: REBASE_AT,
            last: Instant::ZERO,
            t_limit: Instant::MAX,
            seen: Instant::ZERO,
            per_ns,
        }
    }

    /// Sets `queue`'s weight. If the fluid system is serving the session,
    /// its new weight counts in the busy sum (and so in how fast `V` grows)
    /// from the last call's `now` on; items arriving from now on are stamped
    /// at the new weight, items already waiting keep their stamps.
    ///
    /// # Panics
    /// If `weight` is 0 or there is no such queue.
    pub fn set_weight(&mut self, queue: QueueId, weight: u32) {
        let step = vt::step(weight);
        assert!((queue as usize) < self.sessions.len(), "no such queue");
        self.run_to(self.seen);
        let s = &mut self.sessions[queue as usize];
        s.weight = weight;
        s.step = step;
        if s.in_gps > 0 {
            self.wb = self.wb - u64::from(s.in_gps) + u64::from(weight);
            s.in_gps = weight;
        }
        self.set_t_limit();
    }

    /// `queue`'s weight.
    ///
    /// # Panics
    /// If there is no such queue.
    pub fn weight(&self, queue: QueueId) -> u32 {
        self.sessions[queue as usize].weight
    }

    /// The GPS virtual time `V` as of the last call, in tag units (`2^-32`
    /// length unit per unit of weight), lowered now and then by 2^61 to stay
    /// in range.
    pub fn virtual_time(&self) -> u64 {
        // The last call came before `t_limit`: no departure since `last`.
        if self.wb == 0 || self.seen <= self.last {
            return self.v;
        }
        let x = self.work(self.seen).saturating_add(self.carry);
        self.v.saturating_add(x / self.wb)
    }

    /// Takes the time of a call. At or before the latest `now` seen, there is
    /// nothing to do: that is no later than `t_limit`, and no later than
    /// `last` if equal to it (a `t_limit` is after its `last` unless the
    /// fluid system has a departure due at `last`, and a call at `last`
    /// runs nothing).
    #[inline(always)]
    fn clock(&mut self, now: Instant) {
        if now > self.seen {
            self.seen = now;
            if now >= self.t_limit {
                self.settle(now);
            }
        }
    }

    /// The work the line does from `last` to `now` (after `last`), in
    /// `2^-32` length units.
    fn work(&self, now: Instant) -> u64 {
        let dt = (now.as_nanos() as u64).wrapping_sub(self.last.as_nanos() as u64);
        let work = (u128::from(dt) * u128::from(self.per_ns)) >> RATE_FRAC;
        u64::try_from(work).unwrap_or(u64::MAX)
    }

    /// Runs the fluid system from `last` to `now` (if later), and finds the
    /// next `t_limit`.
    #[cold]
    #[inline(never)]
    fn settle(&mut self, now: Instant) {
        self.run_to(now);
        self.set_t_limit();
    }

    /// Runs the fluid system from `last` to `now` (if later); `t_limit` is
    /// the caller's to set again.
    fn run_to(&mut self, now: Instant) {
        if now > self.last && self.wb > 0 {
            let x = self.work(now).saturating_add(self.carry);
            let v = self.v.saturating_add(x / self.wb);
            if v < self.fast_limit {
                self.v = v;
                self.carry = x % self.wb;
            } else {
                self.advance_past_departures(x);
            }
        }
        self.last = self.last.max(now);
    }

    /// Sets `t_limit` to an instant no later than the first after `last` at
    /// which `V` reaches `fast_limit`, that is at which the work done since
    /// `last` (`dt · per_ns >> RATE_FRAC`, as [`Wfq::work`] counts it)
    /// reaches `(fast_limit − v) · wb − carry`: exactly that instant when
    /// `per_ns` is a whole multiple of `2^RATE_FRAC`, else a little earlier.
    /// Earlier is harmless (a call then runs the fluid system for nothing
    /// and sets it again), so the need may saturate and the work per
    /// nanosecond be rounded up.
    fn set_t_limit(&mut self) {
        if self.wb == 0 {
            // V stands still until a session enters.
            self.t_limit = Instant::MAX;
            return;
        }
        let need = (self.fast_limit.saturating_sub(self.v))
            .saturating_mul(self.wb)
            .saturating_sub(self.carry);
        let whole = self.per_ns >> RATE_FRAC;
        let dt = if whole << RATE_FRAC == self.per_ns && need < u64::MAX {
            need.div_ceil(whole)
        } else {
            need / (whole + 1)
        };
        let t = self
            .last
            .as_nanos()
            .saturating_add(i64::try_from(dt).unwrap_or(i64::MAX));
        self.t_limit = Instant::from_nanos(t);
    }

    /// Runs the fluid system through `x` work (`2^-32` length units), past
    /// one or more departures.
    fn advance_past_departures(&mut self, mut x: u64) {
        loop {
            let Some((d, _)) = self.gps_first() else {
                unreachable!("a busy fluid system has a session");
            };
            let need = u128::from(d - self.v) * u128::from(self.wb);
            if u128::from(x) < need {
                self.v += x / self.wb;
                self.carry = x % self.wb;
                break;
            }
            x -= need as u64;
            self.v = d;
            self.depart(d);
            if self.wb == 0 {
                self.carry = 0;
                break;
            }
        }
        while self.v >= REBASE_AT {
            self.rebase();
        }
        self.fast_limit = self
            .gps_first()
            .map_or(REBASE_AT, |(k, _)| k.min(REBASE_AT));
    }

    /// The first session of the fluid system and its key.
    fn gps_first(&self) -> Option<(u64, u32)> {
        // SAFETY: see the struct's notes.
        unsafe { self.gps.peek(&self.sessions) }
    }

    /// Takes the sessions whose last finish tag is `d` (= `V`) out of the
    /// fluid system, and files again the entries that are stale.
    fn depart(&mut self, d: u64) {
        while let Some((k, q)) = self.gps_first() {
            if k > d {
                break;
            }
            // SAFETY (calendar calls): see the struct's notes.
            unsafe { self.gps.pop(&self.sessions) };
            let s = &mut self.sessions[q as usize];
            if s.f_last > d {
                s.gps_key = s.f_last;
                let key = s.f_last;
                unsafe { self.gps.insert(&mut self.sessions, q, key) };
            } else {
                self.wb -= u64::from(s.in_gps);
                s.in_gps = 0;
            }
        }
    }

    #[cold]
    fn rebase(&mut self) {
        self.v -= REBASE_BY;
        for s in &mut self.sessions {
            s.f_last = s.f_last.saturating_sub(REBASE_BY);
            s.sel_key = s.sel_key.saturating_sub(REBASE_BY);
            s.gps_key = s.gps_key.saturating_sub(REBASE_BY);
        }
        self.arena
            .for_each_x_mut(|f| *f = f.saturating_sub(REBASE_BY));
        self.select.rebase(REBASE_BY);
        self.gps.rebase(REBASE_BY);
        self.fast_limit = self
            .gps_first()
            .map_or(REBASE_AT, |(k, _)| k.min(REBASE_AT));
    }

    /// Stamps the item just filed for session `q`, which is not in the
    /// fluid system, and files the session there.
    #[cold]
    #[inline(never)]
    fn entered_gps(&mut self, q: QueueId, len: u32) -> u64 {
        // To the latest `now` seen: an earlier one counts as no time passing.
        self.run_to(self.seen);
        let v = self.v;
        let s = &mut self.sessions[q as usize];
        let tag = v.saturating_add(span(len, s.step));
        s.f_last = tag;
        s.in_gps = s.weight;
        s.gps_key = tag;
        self.wb += u64::from(s.weight);
        // SAFETY: the list holds the item just pushed, and is used only
        // with `arena`.
        unsafe { self.arena.set_back_x(&s.list, tag) };
        // SAFETY: see the struct's notes.
        unsafe { self.gps.insert(&mut self.sessions, q, tag) };
        self.fast_limit = self.fast_limit.min(tag);
        self.set_t_limit();
        tag
    }
}

impl<T: Send> Discipline<T> for Wfq<T> {
    #[inline(always)]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        now: Instant,
    ) -> Result<(), Dropped<T>> {
        self.clock(now);
        let Some(s) = self.sessions.get_mut(queue as usize) else {
            return Err(Dropped {
                item,
                reason: DropReason::NoSuchQueue,
            });
        };
        // A session has a fluid-system entry exactly while `in_gps > 0`;
        // then `V < fast_limit ≤ f_last`, so it starts at `f_last`. A
        // session not there is stamped by `entered_gps` once filed.
        let fresh = s.in_gps == 0;
        let tag = s.f_last.saturating_add(span(len, s.step));
        // SAFETY: every session's list is used only with `arena`.
        match unsafe { self.arena.push(&mut s.list, item, tag) } {
            Ok(was_empty) => {
                let tag = if fresh {
                    self.entered_gps(queue, len)
                } else {
                    s.f_last = tag;
                    tag
                };
                if was_empty {
                    self.sessions[queue as usize].sel_key = tag;
                    // SAFETY: see the struct's notes.
                    unsafe { self.select.insert(&mut self.sessions, queue, tag) };
                }
                Ok(())
            }
            Err((item, reason)) => Err(Dropped { item, reason }),
        }
    }

    #[inline(always)]
    fn dequeue(&mut self, now: Instant) -> Option<(QueueId, T)> {
        self.clock(now);
        // SAFETY: see the struct's notes.
        let q = unsafe { self.select.pop(&self.sessions) }?;
        // SAFETY: `select` holds session ids of sessions with items (whose
        // lists are used only with `arena`).
        let s = unsafe { self.sessions.get_unchecked_mut(q as usize) };
        let (item, _, after) = unsafe { self.arena.pop(&mut s.list) };
        if let Some(f) = after {
            s.sel_key = f;
            // SAFETY: see the struct's notes.
            unsafe { self.select.insert(&mut self.sessions, q, f) };
        }
        Some((q, item))
    }

    fn len(&self) -> usize {
        self.arena.len()
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.sessions
            .get(queue as usize)
            .map_or(0, |s| s.list.len() as usize)
    }

    fn for_each(&self, f: &mut dyn FnMut(&T)) {
        for s in &self.sessions {
            // SAFETY: every session's list is used only with `arena`.
            unsafe { self.arena.for_each(&s.list, f) };
        }
    }
}
