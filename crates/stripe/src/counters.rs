//! What the receiver gives up on, by name, and the identities its counts keep.
//!
//! Two ledgers, both exact:
//!
//! * **arrivals**: every unit that reached the resequencer (a cell, or a
//!   PDU that AAL5 reassembled intact, that was not rejected) is delivered,
//!   given up with a [`Loss`] reason (counted in [`RxStats::discarded`]), or
//!   still held:
//!   `arrived = delivered + discarded + held` ([`RxStats::arrival_balance`]).
//! * **positions** (sequence and marker sync): every unit the sender sent
//!   is, once the receiver knows of it, delivered, given up after arriving
//!   ([`RxStats::discarded`]) or given up without ever arriving
//!   ([`RxStats::gaps`]); until then it is held or still unknown (in flight
//!   on a link, or lost and not yet noticed):
//!   `sent = delivered + discarded + gaps + held + unknown`. When the links
//!   lose but never duplicate, `unknown` falls to zero once the sender's last
//!   markers (or the sequence timeout) have gone through.
//!
//! Arrivals that are not a sent unit's first intact copy (a duplicate, a unit
//! the receiver already gave up on, a damaged PDU, a stranger cell) are
//! [`Reject`]ed: counted, but in neither ledger.

use core::fmt;

use crate::config::{SyncMode, UnitKind};
use crate::metrics::{Histogram, Occupancy, Reordering};

/// Why the receiver gave up on a unit (a position in the sent stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Loss {
    /// It waited, or others waited for it, longer than the timeout.
    Timeout,
    /// Given up to keep the resequencing buffer within its limits.
    BufferFull,
    /// Marker sync: never arrived, as the count in the next marker showed.
    Missing,
    /// Marker sync: arrived, but in a block the closing marker showed to be
    /// short, so its place in the stream was unknown.
    Unverified,
    /// Marker sync: arrived while its stripe was out of step (after a
    /// timeout or a full buffer, before the stripe's next marker).
    OutOfStep,
    /// Marker sync: its place was known, but delivery had already moved past
    /// it while its stripe was out of step.
    Overtaken,
}

impl Loss {
    /// Every reason, in counter order.
    pub const ALL: [Loss; 6] = [
        Loss::Timeout,
        Loss::BufferFull,
        Loss::Missing,
        Loss::Unverified,
        Loss::OutOfStep,
        Loss::Overtaken,
    ];

    /// A short snake-case name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Loss::Timeout => "timeout",
            Loss::BufferFull => "buffer_full",
            Loss::Missing => "missing",
            Loss::Unverified => "unverified",
            Loss::OutOfStep => "out_of_step",
            Loss::Overtaken => "overtaken",
        }
    }

    /// The name a striping relay gives a cell of a unit it gave up for
    /// this reason, when it hands the cell to the network's drop tap.
    pub const fn relay_name(self) -> &'static str {
        match self {
            Loss::Timeout => "stripe_timeout",
            Loss::BufferFull => "stripe_buffer_full",
            Loss::Missing => "stripe_missing",
            Loss::Unverified => "stripe_unverified",
            Loss::OutOfStep => "stripe_out_of_step",
            Loss::Overtaken => "stripe_overtaken",
        }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an arriving cell or PDU was not taken as a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Reject {
    /// No such stripe, a header whose HEC fails, or a VC other than the
    /// stripe's member VC.
    BadCell,
    /// An OAM or RM cell that is not a marker this method uses.
    NotData,
    /// A marker that fails its CRC-10, names the wrong stripe, stripe count,
    /// unit or quantum, or contradicts what the receiver already knows.
    BadMarker,
    /// A PDU that AAL5 reassembly dropped (CRC, length, timeout, budget),
    /// or too short to hold its sequence header.
    Reassembly,
    /// A sequence number already held.
    Duplicate,
    /// A sequence number behind the delivery point: delivered or given up already.
    Stale,
}

impl Reject {
    /// Every reason, in counter order.
    pub const ALL: [Reject; 6] = [
        Reject::BadCell,
        Reject::NotData,
        Reject::BadMarker,
        Reject::Reassembly,
        Reject::Duplicate,
        Reject::Stale,
    ];

    /// A short snake-case name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Reject::BadCell => "bad_cell",
            Reject::NotData => "not_data",
            Reject::BadMarker => "bad_marker",
            Reject::Reassembly => "reassembly",
            Reject::Duplicate => "duplicate",
            Reject::Stale => "stale",
        }
    }
}

impl fmt::Display for Reject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A count per [`Loss`] reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossCounts([u64; Loss::ALL.len()]);

impl LossCounts {
    /// Adds `n` to a reason.
    pub fn add(&mut self, r: Loss, n: u64) {
        self.0[r as usize] += n;
    }
    /// One reason's count.
    pub fn get(&self, r: Loss) -> u64 {
        self.0[r as usize]
    }
    /// All reasons together.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// The non-zero counts.
    pub fn nonzero(&self) -> impl Iterator<Item = (Loss, u64)> + '_ {
        Loss::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|&(_, n)| n > 0)
    }
}

/// A count per [`Reject`] reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RejectCounts([u64; Reject::ALL.len()]);

impl RejectCounts {
    /// Adds `n` to a reason.
    pub fn add(&mut self, r: Reject, n: u64) {
        self.0[r as usize] += n;
    }
    /// One reason's count.
    pub fn get(&self, r: Reject) -> u64 {
        self.0[r as usize]
    }
    /// All reasons together.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// The non-zero counts.
    pub fn nonzero(&self) -> impl Iterator<Item = (Reject, u64)> + '_ {
        Reject::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|&(_, n)| n > 0)
    }
}

/// One stripe's share of what the receiver saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StripeRxStats {
    /// Cells that arrived on the stripe.
    pub cells: u64,
    /// Good markers among them.
    pub markers: u64,
    /// Units that arrived on the stripe.
    pub units: u64,
    /// Marker sync: times the stripe was found out of step (a short block,
    /// a timeout, a full buffer) and later put back in step by a marker.
    pub resyncs: u64,
}

/// The receiver's counters and measurements.
#[derive(Clone, Debug, Default)]
pub struct RxStats {
    /// The unit kind counted.
    pub unit: UnitKind,
    /// The synchronisation method.
    pub sync: SyncMode,
    /// Units that reached the resequencer.
    pub arrived: u64,
    /// Units delivered.
    pub delivered: u64,
    /// Data bytes delivered.
    pub delivered_bytes: u64,
    /// Units given up after they arrived, by reason.
    pub discarded: LossCounts,
    /// Units given up without having arrived, by reason.
    pub gaps: LossCounts,
    /// Cells and PDUs not taken as units, by reason.
    pub rejected: RejectCounts,
    /// No sync: turns of a stripe passed over because it had nothing while
    /// others waited past the timeout or filled the buffer.
    pub skipped_turns: u64,
    /// Per stripe.
    pub per_stripe: Vec<StripeRxStats>,
    /// Resequencing delay of each delivered unit (arrival to delivery), ns.
    pub delay: Histogram,
    /// Units held in the resequencer over time.
    pub occupancy: Occupancy,
    /// Most bytes held at once.
    pub max_held_bytes: usize,
    /// Sequence sync: RFC 4737 reordering of the sequence numbers in the
    /// order they reached the resequencer (what skew and loss did to the
    /// stream before resequencing). Empty with the other methods.
    pub arrival_order: Reordering,
}

impl RxStats {
    /// `arrived − delivered − discarded`: must equal the units held.
    pub fn arrival_balance(&self) -> i128 {
        i128::from(self.arrived) - i128::from(self.delivered) - i128::from(self.discarded.total())
    }

    /// Positions resolved: delivered + discarded + gaps.
    pub fn resolved(&self) -> u64 {
        self.delivered + self.discarded.total() + self.gaps.total()
    }
}
