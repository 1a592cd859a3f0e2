//! WF2Q+ (Bennett and Zhang, 1997).

use aurora_time::Instant;

use crate::store::{Arena, List, NIL};
use crate::tagq::{Linked, TagQueue};
use crate::vt::{self, span_clamped, MAX_LEN, REBASE_AT, REBASE_BY};
use crate::{Discipline, DropReason, Dropped, Limits, QueueId};

/// A session: its items and its tags, in tag units (see the crate's
/// virtual-time notes). 64 bytes, so a queue id becomes an address with one
/// shift.
#[repr(align(64))]
struct Session {
    /// The session's items, used only with the discipline's arena.
    list: List,
    /// The next session of its calendar bucket (a session is in at most
    /// one of the two calendars).
    next: u32,
    /// Start tag of the head item (while backlogged).
    s: u64,
    /// Finish tag of the head item while backlogged; of the last item sent
    /// while idle.
    f: u64,
    /// Tag units per length unit: `2^32 / weight`.
    step: u64,
    weight: u32,
}

/// The calendar by finish tag.
const FINISH: u8 = 0;
/// The calendar by start tag.
const START: u8 = 1;

impl Linked<FINISH> for Session {
    #[inline(always)]
    fn key(&self) -> u64 {
        self.f
    }
    #[inline(always)]
    fn next(&self) -> u32 {
        self.next
    }
    #[inline(always)]
    fn set_next(&mut self, next: u32) {
        self.next = next;
    }
}

impl Linked<START> for Session {
    #[inline(always)]
    fn key(&self) -> u64 {
        self.s
    }
    #[inline(always)]
    fn next(&self) -> u32 {
        self.next
    }
    #[inline(always)]
    fn set_next(&mut self, next: u32) {
        self.next = next;
    }
}

/// Worst-case fair weighted fair queueing, the WF2Q+ variant: a fair queue
/// that needs no fluid simulation and never runs a session far ahead of its
/// share.
///
/// Each queue is a session with a weight; its share of the line is
/// `weight / Σ weights` over *all* queues (the guaranteed rates `r_i` of the
/// paper, which sum to the line rate). Tags are kept for the head item of
/// each backlogged session only:
///
/// - a session that becomes backlogged gets `S = max(V, F_prev)`,
/// - after its head is sent, a still-backlogged session gets `S = F_prev`,
/// - and always `F = S + L / r_i` for the new head of length `L`,
///
/// where `F_prev` is the finish tag of its last item sent. The system
/// virtual time `V` grows by `L / r` (in tag units: `L · 2^32 / Σ weights`)
/// for each item of length `L` sent, and is raised to the smallest start
/// tag of the backlogged sessions when no session is eligible — together
/// `V = max(V + W, min S)`. [`Discipline::dequeue`] sends, among the
/// eligible sessions (`S ≤ V`), the one with the smallest finish tag (on a
/// tie, the session filed first with that tag). `V` counts an item's work
/// when the item is dequeued, so sessions that become backlogged while it is
/// on the line see it already served.
///
/// Guarantees (checked by the property tests): over any interval of
/// dequeues during which session `i` holds items, it gets at least
/// `φ_i·W − (2·L_i + φ_i·Lmax)` of the `W` sent, with `φ_i` its share and
/// `L_i` its longest item (Bennett and Zhang's worst-case fair index, with
/// whole-item accounting); and while every session has been backlogged
/// since they all started together, no session is more than `L_i` ahead of
/// `φ_i·W`. Being fair against configured shares, not against the busy
/// sessions, WF2Q+ can fall more than one item behind GPS when some
/// sessions are idle.
///
/// WF2Q+ needs no clock and no line rate; `now` is ignored. Lengths are in
/// any unit (bytes, or 1 per cell) as long as it is the same for all items.
///
/// Cost: sessions wait in a calendar queue by finish tag; a session found
/// there not yet eligible is parked in a second calendar queue by start tag
/// until `V` reaches it, so each is parked at most once per item sent. With
/// equal weights and lengths no session is ever parked. O(1) per operation
/// for the tags a busy port produces; see the crate's notes on bucket width
/// and [`Wf2qPlus::with_typical_len`]. A cell's work is counted in `V`
/// without a division (`2^32 / Σ weights` and its remainder are kept, and
/// the remainder carried exactly); a longer item takes one.
///
/// Safety of the calendar calls: both calendars are made for the session
/// count and always given the whole `sessions` slice, whose length that
/// is; the ids given are session ids found in range or taken from a
/// calendar.
pub struct Wf2qPlus<T> {
    sessions: Vec<Session>,
    /// Items, with their lengths (clamped to [`MAX_LEN`]).
    arena: Arena<T, u32>,
    /// Backlogged sessions by finish tag, eligible or not (yet).
    by_finish: TagQueue<FINISH>,
    /// Backlogged sessions found not eligible, by start tag (all `> V`
    /// when parked).
    parked: TagQueue<START>,
    v: u64,
    /// Work not yet counted in `v`, in units of `1 / wsum` tag unit
    /// (`v_rem`, below `wsum`), minus `wsum`, modulo 2^64.
    v_rem_neg: u64,
    wsum: u64,
    /// What one length unit adds to `v` and `v_rem`: `2^32 / wsum` and
    /// `2^32 % wsum`.
    v_step: u64,
    v_step_rem: u64,
    /// The smallest start tag parked, or [`REBASE_AT`] if smaller: `v` can
    /// grow below it with nothing to unpark and no rebase.
    v_limit: u64,
}

impl<T> Wf2qPlus<T> {
    /// WF2Q+ over `weights.len()` queues, queue `i` of weight `weights[i]`,
    /// tuned for items of length 1 (cells counted in cells).
    ///
    /// # Panics
    /// If a weight is 0 or there are more queues than [`QueueId`]s.
    pub fn new(weights: &[u32], limits: Limits) -> Self {
        Self::with_typical_len(weights, limits, 1)
    }

    /// As [`Wf2qPlus::new`], with the calendar buckets sized for items of
    /// about `len` (e.g. 1,500 for Ethernet frames counted in bytes). This
    /// only tunes speed; the service order does not depend on it.
    ///
    /// # Panics
    /// As [`Wf2qPlus::new`].
    pub fn with_typical_len(weights: &[u32], limits: Limits, len: u32) -> Self {
        assert!(weights.len() <= QueueId::MAX as usize, "too many queues");
        let wsum: u64 = weights.iter().map(|&w| u64::from(w)).sum::<u64>().max(1);
        let wmin = weights.iter().copied().min().unwrap_or(1);
        let shift = vt::calendar_shift(len, wsum, wmin);
        let n = weights.len();
        Wf2qPlus {
            sessions: weights
                .iter()
                .map(|&w| Session {
                    list: List::EMPTY,
                    next: NIL,
                    s: 0,
                    f: 0,
                    step: vt::step(w),
                    weight: w,
                })
                .collect(),
            arena: Arena::new(limits),
            by_finish: TagQueue::new(n, shift),
            parked: TagQueue::new(n, shift),
            v: 0,
            v_rem_neg: wsum.wrapping_neg(),
            wsum,
            v_step: vt::ONE / wsum,
            v_step_rem: vt::ONE % wsum,
            v_limit: REBASE_AT,
        }
    }

    /// Sets `queue`'s weight. Its share `weight / Σ weights` (and so the rate
    /// `V` grows at) changes at once; the session's tags change from its next
    /// head item: the head waiting now keeps the tags it has, the next one
    /// gets `F = S + L / r_i` at the new rate. With cells, the new weight
    /// governs after one more cell of the queue.
    ///
    /// # Panics
    /// If `weight` is 0 or there is no such queue.
    pub fn set_weight(&mut self, queue: QueueId, weight: u32) {
        let step = vt::step(weight);
        let rem = self.v_rem();
        let s = &mut self.sessions[queue as usize];
        self.wsum = self.wsum - u64::from(s.weight) + u64::from(weight);
        s.weight = weight;
        s.step = step;
        self.v_rem_neg = rem.min(self.wsum - 1).wrapping_sub(self.wsum);
        self.v_step = vt::ONE / self.wsum;
        self.v_step_rem = vt::ONE % self.wsum;
    }

    /// Sets every queue's weight at once, queue `q` to the `q`th of
    /// `weights`: as [`Wf2qPlus::set_weight`] for each, with `V`'s rate
    /// recomputed once.
    ///
    /// # Panics
    /// If a weight is 0 or `weights` does not give one per queue.
    pub fn set_weights(&mut self, weights: impl IntoIterator<Item = u32>) {
        let rem = self.v_rem();
        let mut wsum = 0;
        let mut n = 0;
        for (s, w) in self.sessions.iter_mut().zip(weights) {
            s.step = vt::step(w);
            s.weight = w;
            wsum += u64::from(w);
            n += 1;
        }
        assert_eq!(n, self.sessions.len(), "one weight per queue");
        self.wsum = wsum.max(1);
        self.v_rem_neg = rem.min(self.wsum - 1).wrapping_sub(self.wsum);
        self.v_step = vt::ONE / self.wsum;
        self.v_step_rem = vt::ONE % self.wsum;
    }

    /// `queue`'s weight.
    ///
    /// # Panics
    /// If there is no such queue.
    pub fn weight(&self, queue: QueueId) -> u32 {
        self.sessions[queue as usize].weight
    }

    /// The system virtual time `V` in tag units (`2^-32` length unit per
    /// unit of weight), lowered now and then by 2^61 to stay in range.
    pub fn virtual_time(&self) -> u64 {
        self.v
    }

    /// Work not yet counted in `v`, in units of `1 / wsum` tag unit.
    #[inline(always)]
    fn v_rem(&self) -> u64 {
        self.v_rem_neg.wrapping_add(self.wsum)
    }

    /// Back in the running: the parked sessions whose start tag `V` has
    /// reached.
    #[inline(never)]
    fn unpark(&mut self) {
        // SAFETY (calendar calls): see the struct's notes.
        while let Some((s, q)) = unsafe { self.parked.peek(&self.sessions) } {
            if s > self.v {
                break;
            }
            unsafe { self.parked.pop(&self.sessions) };
            let f = self.sessions[q as usize].f;
            unsafe { self.by_finish.insert(&mut self.sessions, q, f) };
        }
        self.v_limit = self.parked_min();
    }

    /// The smallest start tag parked, or [`REBASE_AT`] if smaller.
    fn parked_min(&self) -> u64 {
        // SAFETY: see the struct's notes.
        unsafe { self.parked.peek(&self.sessions) }.map_or(REBASE_AT, |(s, _)| s.min(REBASE_AT))
    }

    /// Parks session `q`, found not eligible.
    #[cold]
    #[inline(never)]
    fn park(&mut self, q: u32) {
        let s = self.sessions[q as usize].s;
        // SAFETY: see the struct's notes.
        unsafe { self.parked.insert(&mut self.sessions, q, s) };
        self.v_limit = self.v_limit.min(s);
    }

    /// With no session eligible in `by_finish`: `V` rises to the least
    /// start tag (`V = max(V + W, min S)`) and those sessions come back.
    /// False if no session is backlogged.
    #[cold]
    #[inline(never)]
    fn jump(&mut self) -> bool {
        // SAFETY: see the struct's notes.
        let Some((s, _)) = (unsafe { self.parked.peek(&self.sessions) }) else {
            return false;
        };
        self.v = self.v.max(s);
        self.unpark();
        true
    }

    /// `V` has reached `v_limit`: lowers the tags if `V` is that high, and
    /// unparks.
    #[cold]
    #[inline(never)]
    fn v_reached_limit(&mut self) {
        while self.v >= REBASE_AT {
            self.rebase();
        }
        self.unpark();
    }

    /// Counts `len` (clamped) of work in `V`.
    #[inline(always)]
    fn count_work(&mut self, len: u32) {
        if len == 1 {
            // A cell: no division. `v_rem − wsum` (mod 2^64) plus the
            // step's remainder wraps exactly when the remainder carries.
            let (rem, carry) = self.v_rem_neg.overflowing_add(self.v_step_rem);
            self.v += self.v_step + u64::from(carry);
            // `wsum` if it carried, else 0.
            let fix = self.wsum & u64::from(carry).wrapping_neg();
            self.v_rem_neg = rem.wrapping_sub(fix);
        } else {
            self.count_long(len);
        }
    }

    /// [`Wf2qPlus::count_work`] for an item other than a cell.
    #[inline(never)]
    fn count_long(&mut self, len: u32) {
        let x = (u64::from(len) << 32) + self.v_rem();
        self.v += x / self.wsum;
        self.v_rem_neg = (x % self.wsum).wrapping_sub(self.wsum);
    }

    #[cold]
    fn rebase(&mut self) {
        self.v -= REBASE_BY;
        for s in &mut self.sessions {
            s.s = s.s.saturating_sub(REBASE_BY);
            s.f = s.f.saturating_sub(REBASE_BY);
        }
        self.by_finish.rebase(REBASE_BY);
        self.parked.rebase(REBASE_BY);
        self.v_limit = self.parked_min();
    }

    /// Tags session `q`, which just became backlogged with an item of
    /// (clamped) `len`, and files it.
    #[inline(never)]
    fn backlogged(&mut self, q: QueueId, len: u32) {
        let v = self.v;
        let s = &mut self.sessions[q as usize];
        s.s = s.f.max(v);
        s.f = s.s.saturating_add(span_clamped(len, s.step));
        let f = s.f;
        // SAFETY: see the struct's notes.
        unsafe { self.by_finish.insert(&mut self.sessions, q, f) };
    }
}

impl<T: Send> Discipline<T> for Wf2qPlus<T> {
    #[inline(always)]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        _now: Instant,
    ) -> Result<(), Dropped<T>> {
        let Some(s) = self.sessions.get_mut(queue as usize) else {
            return Err(Dropped {
                item,
                reason: DropReason::NoSuchQueue,
            });
        };
        let len = len.min(MAX_LEN);
        // SAFETY: every session's list is used only with `arena`.
        match unsafe { self.arena.push(&mut s.list, item, len) } {
            Ok(false) => Ok(()),
            Ok(true) => {
                self.backlogged(queue, len);
                Ok(())
            }
            Err((item, reason)) => Err(Dropped { item, reason }),
        }
    }

    #[inline(always)]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        // The first session by finish tag that is eligible, parking those
        // that are not.
        let q = loop {
            // SAFETY: see the struct's notes.
            match unsafe { self.by_finish.pop(&self.sessions) } {
                Some(q) => {
                    // SAFETY: a calendar's ids are session ids.
                    if unsafe { self.sessions.get_unchecked(q as usize) }.s <= self.v {
                        break q;
                    }
                    self.park(q);
                }
                None => {
                    if !self.jump() {
                        return None;
                    }
                }
            }
        };
        // SAFETY: a calendar's ids are session ids of backlogged sessions:
        // their lists hold items (and are used only with `arena`).
        let s = unsafe { self.sessions.get_unchecked_mut(q as usize) };
        let (item, len, after) = unsafe { self.arena.pop(&mut s.list) };
        if let Some(next) = after {
            // No overflow: a head's finish tag is within two spans (2^57)
            // of `V` (< 2^62).
            s.s = s.f;
            s.f += span_clamped(next, s.step);
            let f = s.f;
            // SAFETY: see the struct's notes.
            unsafe { self.by_finish.insert(&mut self.sessions, q, f) };
        }
        self.count_work(len);
        if self.v >= self.v_limit {
            self.v_reached_limit();
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
