//! Counters and the named reasons for every drop.
//!
//! Accounting is kept at two levels, and both add up exactly:
//!
//! * **cells**: every cell handed to a reassembler is in a delivered PDU, is
//!   dropped with a [`DropReason`], or is still held in a reassembly in
//!   progress ([`RxStats::cells_balance`]);
//! * **PDUs**: every PDU the receiver started (a run of cells closed by an
//!   end-of-message cell, a timeout or an error) is delivered intact,
//!   delivered flagged as corrupted, or dropped with a [`DropReason`].
//!
//! A sender's PDU that vanishes entirely on the link (all its cells lost) is
//! the link's loss and is counted there.

use core::fmt;

/// Why a cell or a PDU was not delivered intact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DropReason {
    /// The cell's VC is not open on this receiver.
    UnknownVc,
    /// An OAM or resource-management cell reached a data-path reassembler.
    NotUserData,
    /// AAL5 CRC-32 mismatch.
    Crc,
    /// AAL3/4 SAR-PDU CRC-10 mismatch (the cell is dropped).
    CellCrc,
    /// The PDU's Length field does not match the data received.
    Length,
    /// The sender aborted the PDU (AAL5 Length 0, AAL3/4 EOM with LI 63).
    Aborted,
    /// The PDU grew past the VC's maximum SDU size.
    Oversize,
    /// The reassembly timer ran out before the PDU was complete.
    Timeout,
    /// The shared reassembly memory budget was used up.
    BudgetExhausted,
    /// AAL3/4 sequence number discontinuity (a cell was lost or duplicated).
    Sequence,
    /// AAL3/4 COM or EOM without a BOM, or a BOM that cut off a PDU.
    UnexpectedSegment,
    /// AAL3/4 Btag and Etag differ.
    TagMismatch,
    /// AAL3/4 BAsize smaller than Length.
    BaSize,
    /// AAL3/4 length indication not allowed for the segment type.
    InvalidLi,
    /// AAL3/4 common part indicator other than 0.
    Cpi,
    /// AAL3/4 limit on simultaneous reassemblies reached.
    TooManyReassemblies,
    /// The VC was closed (or flushed) with a reassembly in progress.
    Flushed,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 17] = [
        DropReason::UnknownVc,
        DropReason::NotUserData,
        DropReason::Crc,
        DropReason::CellCrc,
        DropReason::Length,
        DropReason::Aborted,
        DropReason::Oversize,
        DropReason::Timeout,
        DropReason::BudgetExhausted,
        DropReason::Sequence,
        DropReason::UnexpectedSegment,
        DropReason::TagMismatch,
        DropReason::BaSize,
        DropReason::InvalidLi,
        DropReason::Cpi,
        DropReason::TooManyReassemblies,
        DropReason::Flushed,
    ];
    /// Number of reasons.
    pub const COUNT: usize = Self::ALL.len();

    /// A short snake-case name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::UnknownVc => "unknown_vc",
            DropReason::NotUserData => "not_user_data",
            DropReason::Crc => "crc",
            DropReason::CellCrc => "cell_crc",
            DropReason::Length => "length",
            DropReason::Aborted => "aborted",
            DropReason::Oversize => "oversize",
            DropReason::Timeout => "timeout",
            DropReason::BudgetExhausted => "budget_exhausted",
            DropReason::Sequence => "sequence",
            DropReason::UnexpectedSegment => "unexpected_segment",
            DropReason::TagMismatch => "tag_mismatch",
            DropReason::BaSize => "basize",
            DropReason::InvalidLi => "invalid_li",
            DropReason::Cpi => "cpi",
            DropReason::TooManyReassemblies => "too_many_reassemblies",
            DropReason::Flushed => "flushed",
        }
    }

    /// True for drops caused by the receiver running out of a resource
    /// (counted as `rx_drop`), as opposed to errored data (`rx_err`).
    pub const fn is_resource(self) -> bool {
        matches!(
            self,
            DropReason::BudgetExhausted | DropReason::TooManyReassemblies | DropReason::Flushed
        )
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A count per [`DropReason`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounts([u64; DropReason::COUNT]);

impl DropCounts {
    /// Adds `n` to a reason's count.
    #[inline]
    pub fn add(&mut self, reason: DropReason, n: u64) {
        self.0[reason as usize] += n;
    }
    /// One reason's count.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason as usize]
    }
    /// The sum over all reasons.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// The non-zero counts, in reason order.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|&(_, n)| n != 0)
    }
}

/// Per-VC counters in the spirit of linux-atm's `/proc/net/atm/vc`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VcCounters {
    /// PDUs segmented for transmission.
    pub tx: u64,
    /// SDUs refused for transmission (too long, no room).
    pub tx_err: u64,
    /// PDUs delivered intact.
    pub rx: u64,
    /// PDUs that arrived damaged (delivered flagged, or dropped).
    pub rx_err: u64,
    /// PDUs dropped for lack of receiver resources.
    pub rx_drop: u64,
    /// End-of-message cells received: each closes one PDU its sender
    /// finished, whatever became of it (`rx`, `rx_err` or `rx_drop`), so
    /// `tx` at the sender = `rx_eoms` + end cells lost on the way + end
    /// cells still on their way. (A reassembly that times out or is
    /// flushed had no end cell and is not among them.)
    pub rx_eoms: u64,
}

/// Totals kept by a reassembler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Cells handed to the reassembler.
    pub cells_in: u64,
    /// Cells that ended up in a delivered PDU (intact or flagged).
    pub cells_delivered: u64,
    /// Cells dropped, by reason.
    pub cells_dropped: DropCounts,
    /// PDUs delivered intact.
    pub pdus_delivered: u64,
    /// PDUs delivered flagged as corrupted.
    pub pdus_corrupted: u64,
    /// PDUs dropped, by reason.
    pub pdus_dropped: DropCounts,
    /// PDUs delivered into a buffer the application posted beforehand.
    pub posted_hits: u64,
    /// PDUs that started while no posted buffer was waiting (pool used).
    pub posted_misses: u64,
    /// PDUs that outgrew their posted buffer and were moved to a pool buffer.
    pub posted_overflows: u64,
}

impl RxStats {
    /// `cells_in − delivered − dropped`: the cells that must still be held in
    /// reassemblies in progress.
    pub fn cells_balance(&self) -> i128 {
        i128::from(self.cells_in)
            - i128::from(self.cells_delivered)
            - i128::from(self.cells_dropped.total())
    }
}
