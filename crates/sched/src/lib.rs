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

use aurora_time::Instant;

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
