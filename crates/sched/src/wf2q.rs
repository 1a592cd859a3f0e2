//! WF2Q+ (Bennett and Zhang, 1997).

use aurora_time::Instant;

use crate::store::Queues;
use crate::tagq::TagQueue;
use crate::vt::{self, clamp_len, span, ONE, REBASE_AT, REBASE_BY};
use crate::{Discipline, Dropped, Limits, QueueId};

/// A session's tags, in tag units (see the crate's virtual-time notes).
#[derive(Clone, Copy)]
struct Session {
    /// Start tag of the head item (while backlogged).
    s: u64,
    /// Finish tag of the head item while backlogged; of the last item sent
    /// while idle.
    f: u64,
    /// Tag units per length unit: `2^32 / weight`.
    step: u64,
    weight: u32,
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
/// eligible sessions (`S ≤ V`), the one with the smallest finish tag (ties:
/// the lower queue id). `V` counts an item's work when the item is
/// dequeued, so sessions that become backlogged while it is on the line see
/// it already served.
///
/// WF2Q+ needs no clock and no line rate; `now` is ignored. Lengths are in
/// any unit (bytes, or 1 per cell) as long as it is the same for all items.
///
/// Cost: two calendar queues of sessions (eligible by `F`, ineligible by
/// `S`), O(1) per operation for the tags a busy port produces; see the
/// crate's notes on bucket width and [`Wf2qPlus::with_typical_len`].
pub struct Wf2qPlus<T> {
    queues: Queues<(T, u32)>,
    sessions: Vec<Session>,
    eligible: TagQueue,
    ineligible: TagQueue,
    v: u64,
    /// Work not yet counted in `v`, in units of `1 / wsum` tag unit.
    v_rem: u64,
    wsum: u64,
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
        let sessions: Vec<Session> = weights
            .iter()
            .map(|&w| Session {
                s: 0,
                f: 0,
                step: vt::step(w),
                weight: w,
            })
            .collect();
        let wsum: u64 = weights.iter().map(|&w| u64::from(w)).sum::<u64>().max(1);
        // Buckets about half the virtual time one typical item advances V.
        let shift = vt::shift_for(clamp_len(len.max(1)) * ONE / wsum / 2);
        let n = weights.len();
        Wf2qPlus {
            queues: Queues::new(n, limits),
            sessions,
            eligible: TagQueue::new(n, shift),
            ineligible: TagQueue::new(n, shift),
            v: 0,
            v_rem: 0,
            wsum,
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
        let s = &mut self.sessions[queue as usize];
        self.wsum = self.wsum - u64::from(s.weight) + u64::from(weight);
        s.weight = weight;
        s.step = step;
        if self.v_rem >= self.wsum {
            self.v_rem = self.wsum - 1;
        }
    }

    /// `queue`'s weight.
    pub fn weight(&self, queue: QueueId) -> u32 {
        self.sessions[queue as usize].weight
    }

    /// The system virtual time `V` in tag units (`2^-32` length unit per
    /// unit of weight), lowered now and then by 2^61 to stay in range.
    pub fn virtual_time(&self) -> u64 {
        self.v
    }

    /// Files session `q`, whose tags are set, as eligible or not.
    #[inline]
    fn file(&mut self, q: usize) {
        let s = self.sessions[q];
        if s.s <= self.v {
            self.eligible.insert(q as u32, s.f);
        } else {
            self.ineligible.insert(q as u32, s.s);
        }
    }

    #[cold]
    fn rebase(&mut self) {
        self.v -= REBASE_BY;
        for s in &mut self.sessions {
            s.s = s.s.saturating_sub(REBASE_BY);
            s.f = s.f.saturating_sub(REBASE_BY);
        }
        self.eligible.rebase(REBASE_BY);
        self.ineligible.rebase(REBASE_BY);
    }
}

impl<T: Send> Discipline<T> for Wf2qPlus<T> {
    #[inline]
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        _now: Instant,
    ) -> Result<(), Dropped<T>> {
        if let Err(reason) = self.queues.admit(queue) {
            return Err(Dropped { item, reason });
        }
        let q = queue as usize;
        if self.queues.push(q, (item, len)) {
            let v = self.v;
            let s = &mut self.sessions[q];
            s.s = s.f.max(v);
            s.f = s.s.saturating_add(span(len, s.step));
            self.file(q);
        }
        Ok(())
    }

    #[inline]
    fn dequeue(&mut self, _now: Instant) -> Option<(QueueId, T)> {
        if self.queues.len() == 0 {
            return None;
        }
        if self.eligible.is_empty() {
            if let Some((s, _)) = self.ineligible.peek() {
                self.v = self.v.max(s);
            }
        }
        while let Some((s, q)) = self.ineligible.peek() {
            if s > self.v {
                break;
            }
            self.ineligible.pop();
            self.eligible.insert(q, self.sessions[q as usize].f);
        }
        let (_, q) = self.eligible.pop()?;
        let q = q as usize;
        let (item, len) = self.queues.pop(q)?;
        let x = (clamp_len(len) << 32) + self.v_rem;
        self.v += x / self.wsum;
        self.v_rem = x % self.wsum;
        if let Some(&(_, next)) = self.queues.front(q) {
            let s = &mut self.sessions[q];
            s.s = s.f;
            s.f = s.s.saturating_add(span(next, s.step));
            self.file(q);
        }
        if self.v >= REBASE_AT {
            self.rebase();
        }
        Some((q as QueueId, item))
    }

    fn len(&self) -> usize {
        self.queues.len()
    }

    fn queue_len(&self, queue: QueueId) -> usize {
        self.queues.queue_len(queue)
    }
}
