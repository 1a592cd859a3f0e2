//! Output-port schedulers: which waiting cell (or frame) a port sends
//! next, and which it refuses.
//!
//! Sans-I/O and clockless: the caller passes the time in, items go in with
//! [`Discipline::enqueue`] when a node sends them and come out with
//! [`Discipline::dequeue`] when the line is free (a pull port). Items wait
//! in per-queue FIFOs (a queue per VC or per class, numbered from 0), so a
//! discipline never reorders items of one queue. Memory is bounded: every
//! discipline holds at most [`Limits::port`] items, each queue at most
//! [`Limits::queue`].
//!
//! # Disciplines
//!
//! | type | discipline | state per item | cost per item |
//! |---|---|---|---|
//! | [`Fifo`] | one FIFO for the port | none | O(1) |
//! | [`Priority`] | strict priority, queue id = level, 0 highest | none | O(1) (≤ 262,144 levels) |
//! | [`Drr`] | deficit round robin, quantum per queue | length | O(1) (quantum ≥ max length) |
//! | [`Wfq`] | PGPS with the exact GPS virtual time | finish tag | O(1) typical, see below |
//! | [`Wf2qPlus`] | WF2Q+ | length | O(1) typical, see below |
//!
//! Every discipline is built with its queue count, fixed from then on, and
//! its [`Limits`]. Items wait in per-queue lists linked through one arena
//! of slots for the port ([`Fifo`]: one ring buffer), made on demand up to
//! the port limit and reused, so after a warm-up nothing allocates per
//! item. A refused item comes back in
//! [`Dropped`]: a queue id out of range first, then a full queue, then a full
//! port.
//!
//! # Lengths, weights and virtual time
//!
//! Lengths (the `len` of [`Discipline::enqueue`]) are in one unit per port:
//! bytes for frames, or 1 per cell for a cell port. DRR quanta and the WFQ
//! line rate use the same unit. [`Wfq`] and [`Wf2qPlus`] take a weight per
//! queue (≥ 1) and keep virtual time in fixed point: a tag unit is `2^-32`
//! of one length unit per unit of weight, so an item of length `L` on a
//! queue of weight `w` spans `L · 2^32 / w` units (the per-weight step is
//! rounded down once, relative error below `w · 2^-32`). Virtual time only grows;
//! at 2^62 every tag is lowered by 2^61, which changes no decision.
//!
//! The fair queues order sessions with a calendar queue (16,384 buckets over
//! a sliding window of tags, exact order inside a bucket, equal tags first
//! in first out, a binary heap for keys beyond the window). Its bucket
//! width is set from the weights and the typical item length
//! (`with_typical_len`), so that a busy port's tags spread over many
//! buckets: each enqueue and dequeue is then O(1). Unusual tags (very
//! unequal weights, lengths far from the typical one) cost a sorted
//! insertion or a heap operation, never a wrong order. Each calendar takes
//! about 130 KB (its links live in the queues' own records); [`Wfq`] and
//! [`Wf2qPlus`] have two.
//!
//! # Cost
//!
//! `aurora bench sched --callgrind` counts instructions per enqueue +
//! dequeue under callgrind with 1,000 busy queues of cells (figures, and
//! where a cycle's instructions go, in BENCHMARKS.md). The hot paths index
//! without bounds checks where an invariant of the structure guarantees the
//! index (each such `unsafe` block says which); an all-safe build of the
//! same code cost 6 to 33 more instructions a cycle.

use aurora_time::Instant;

mod bits;
mod drr;
mod fifo;
mod prio;
mod store;
mod tagq;
mod vt;
mod wf2q;
mod wfq;

pub use drr::Drr;
pub use fifo::Fifo;
pub use prio::Priority;
pub use wf2q::Wf2qPlus;
pub use wfq::Wfq;

/// A queue of a port: a VC or a class, numbered from 0.
pub type QueueId = u32;

/// Why a discipline refused an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The port's buffer was full.
    PortFull,
    /// The item's queue was full.
    QueueFull,
    /// The discipline has no such queue.
    NoSuchQueue,
}

impl DropReason {
    /// The reason's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::PortFull => "port_full",
            DropReason::QueueFull => "queue_full",
            DropReason::NoSuchQueue => "no_such_queue",
        }
    }
}

/// An item a discipline refused, handed back with the reason.
#[derive(Debug, PartialEq, Eq)]
pub struct Dropped<T> {
    /// The item.
    pub item: T,
    /// Why.
    pub reason: DropReason,
}

/// Buffer limits, in items (cells, for a cell port).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Items the port holds in all, waiting.
    pub port: usize,
    /// Items one queue holds.
    pub queue: usize,
}

/// A port's scheduling discipline over items of type `T`.
pub trait Discipline<T>: Send {
    /// Takes `item` of `len` bytes (or 1 for a cell counted in cells) for
    /// `queue` at `now`, or hands it back with the reason.
    fn enqueue(
        &mut self,
        queue: QueueId,
        item: T,
        len: u32,
        now: Instant,
    ) -> Result<(), Dropped<T>>;
    /// The item to send next at `now` and its queue, if any waits.
    fn dequeue(&mut self, now: Instant) -> Option<(QueueId, T)>;
    /// Items waiting in all.
    fn len(&self) -> usize;
    /// Items waiting in `queue`.
    fn queue_len(&self, queue: QueueId) -> usize;
    /// Shows `f` every item waiting, in no particular order (for books
    /// and reports, not the data path).
    fn for_each(&self, f: &mut dyn FnMut(&T));
    /// No item waits.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub mod flat_approx;
pub mod hier;
pub mod tree;

pub use flat_approx::{FlatApprox, FlatConfig};
pub use hier::Hwfq;
pub use tree::{ClassSpec, ClassTree, NodeIdx, Share, TreeError};

/// A deterministic generator for the unit tests, so they need no
/// dependency.
#[cfg(test)]
mod test_rng {
    pub(crate) struct Lcg(pub(crate) u64);

    impl Lcg {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }
}
