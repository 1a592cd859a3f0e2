//! End-to-end striping at the ATM layer, sans-I/O: one logical VC spread
//! over N member VCs (the *stripes*, one per path) and put back together at
//! the far end.
//!
//! This follows the reference model of the Aurora/VuNet striping work (seed
//! 003, §3.4.2 and §5.2): the striping *topology* is end to end, the hosts
//! do all the work and the network none, the *layer* is ATM and the *unit*
//! is a cell, an AAL5 PDU or an IP packet; the two implementation problems,
//! load balance and synchronisation across stripes with different delays
//! (skew) and losses, each get a choice of solution.
//!
//! Nothing here reads a clock, opens a socket or spawns a thread: the caller
//! passes `now` in, cells out of the [`Striper`] are returned as
//! `(stripe, cell)` pairs, cells into the [`Destriper`] come with the stripe
//! they arrived on, and both ends say with `poll_at()` when they next need
//! the clock. Memory is bounded everywhere by [`Config`]'s limits, and
//! everything given up is counted under a named reason.
//!
//! | module | what |
//! |---|---|
//! | [`config`] | [`Config`]: unit kind, sync method, member VCs, quantum, marker interval, receiver limits ([`RxLimits`]); checked all at once |
//! | [`balance`] | round robin (cells) and surplus round robin (PDUs), and the per-stripe [`StripeState`] markers carry |
//! | [`format`](mod@format) | byte layouts: cell and PDU sequence numbers, the marker cell ([`Marker`]) |
//! | [`tx`] | the sender, [`Striper`] |
//! | [`rx`] | the receiver, [`Destriper`], and what it delivers ([`Delivery`]) |
//! | [`counters`] | [`Loss`] and [`Reject`] reasons, [`RxStats`], the accounting identities |
//! | [`metrics`] | RFC 4737 [`Reordering`], latency [`Histogram`], buffer [`Occupancy`] |
//! | [`content`] | what a striping host's flows carry: stamped, checkable PDUs, and their framing over cell units |
//! | [`node`] | [`StripeHost`], an `aurora_net::Node` that sends and receives striped VCs |
//! | [`relay`] | [`Relay`], a splitter: an `aurora_net::Node` that stripes plain VCs from its wide port over its stripe ports, and joins them back |
//!
//! # Units and balance
//!
//! | unit | on the stripes | balance |
//! |---|---|---|
//! | [`UnitKind::Cell`] | one cell, header rewritten to the member VC, PTI user bits and CLP kept | round robin, one cell per stripe per round |
//! | [`UnitKind::Pdu`] | one whole AAL5 PDU on one member VC | surplus round robin, `quantum` bytes of credit per round, a PDU charged its CPCS length (cells × 48) |
//! | [`UnitKind::IpPacket`] | as a PDU; the sender checks the IPv4/IPv6 length | as a PDU |
//!
//! # Synchronisation
//!
//! | [`SyncMode`] | what is added | receiver | a lost cell costs |
//! |---|---|---|---|
//! | `None` | nothing | replays the round robin on arrivals | unbounded misordering (cell units: that stripe stays one round early for good); measured, not hidden |
//! | `Sequence` | 2 bytes per cell (payload bytes 0..2), or 4 bytes at the front of each PDU's SDU | resequencing window | its own unit only (a PDU unit: its PDU, and the next one on its stripe if the cell was a PDU's last) |
//! | `Marker` | one marker cell per K units per stripe, plus idle markers | confirms each stripe's units block by block, merges stripes by (round, stripe) | the units of its block on its stripe: at most K, at most `(j+1)·K` with `j` adjacent markers also lost; a lost marker alone costs nothing |
//!
//! Formats are byte-exact in [`format`](mod@format). With sequence numbers the receiver
//! is back in step as soon as it passes the gap: when the unit after it has
//! waited `timeout`, or sooner if the buffer fills. With markers, a stripe
//! is back in step at the first good marker after the loss (within K units
//! of that stripe, or one idle-marker delay when the sender goes quiet).
//! Marker sync relies on the links losing cells but not duplicating or
//! reordering them within a stripe (true of ATM links): a loss and a
//! duplicate inside one block could cancel out in the count.
//!
//! # Bounds
//!
//! The receiver holds at most [`RxLimits::max_held_units`] units and
//! [`RxLimits::max_held_bytes`] bytes (beyond that it gives up on the oldest
//! gap or takes the stripe everything waits for out of step), and each
//! stripe's AAL5 reassembly at most [`RxLimits::reassembly_budget`] bytes.
//! No unit waits more than [`RxLimits::timeout`]. Skew is tolerated without
//! loss while `timeout` exceeds the skew plus a stripe's queueing plus, with
//! markers, the time one stripe takes to carry K units (or the idle-marker
//! delay at the end of a burst), and the buffer holds the units that arrive
//! in that time. With sequence numbers the window (the unit limit) must
//! also be at most half the sequence space: 32,768 cells, 2^31 PDUs.
//!
//! For PDU units each stripe has its own AAL5 reassembler; a marker, or a
//! cell after the stripe was quiet for longer than
//! [`RxLimits::reassembly_timeout`], restarts it, so a PDU whose last cell
//! was lost cannot swallow PDUs beyond its block or burst.
//!
//! # Accounting
//!
//! Per logical VC, with sequence or marker sync, every unit sent is
//! delivered, given up with a [`Loss`] reason (after arriving, or without
//! ever arriving), held, or not yet known to the receiver:
//! `sent = delivered + discarded + gaps + held + unknown`, and every unit
//! that arrived is delivered, discarded or held. See [`counters`].
//!
//! # In the network
//!
//! [`StripeHost`] puts the core into the cell network: a host node with any
//! number of ports that sends logical flows striped over member VCs and
//! receives and checks striped VCs. Topology files describe striped VCs
//! with `[[stripe]]` entries (see `aurora-topo`), and `aurora run` reports
//! them. [`Relay`] does the same inside the network (internal splitting):
//! a pair of relays stripes ordinary VCs between them, `[[splitter]]`
//! entries in topology files.

pub mod balance;
pub mod config;
pub mod content;
pub mod counters;
pub mod format;
pub mod metrics;
pub mod node;
pub mod relay;
pub mod rx;
pub mod tx;

mod align;
mod logical;
mod reseq;

pub use balance::StripeState;
pub use config::{Config, ConfigError, Problem, RxLimits, SyncMode, UnitKind};
pub use counters::{Loss, LossCounts, Reject, RejectCounts, RxStats, StripeRxStats};
pub use format::Marker;
pub use metrics::{Histogram, Occupancy, Reordering};
pub use node::{RecvSpec, RecvStats, Schedule, SendSpec, SendStats, StripeHost};
pub use relay::{JoinSpec, Relay, RelayDrops, RelayError, SplitSpec};
pub use rx::{Delivery, Destriper, Discarded, Payload};
pub use tx::{CellFlags, StripeTxStats, Striper, TxError, TxStats};
