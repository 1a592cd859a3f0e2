//! ATM adaptation layer engines: AAL5, AAL3/4 and AAL0 segmentation and
//! reassembly, sans-I/O.
//!
//! The engines never read a clock, open a socket or spawn a thread. Callers
//! pass the current [`aurora_time::Instant`] with each batch of cells and ask
//! `poll_at()` when a reassembly timer next needs attention, so the same code
//! runs under a real-time driver and a discrete-event simulator.
//!
//! Senders write into cell buffers the caller provides; receivers write into
//! buffers the application posted in advance (one copy, straight to the
//! destination) or into pool buffers bounded by a shared memory budget. Every
//! cell and every PDU that is not delivered intact is counted under a
//! [`DropReason`].
//!
//! | module | what |
//! |---|---|
//! | [`aal5`] | AAL5 sender ([`Aal5Tx`]) and receiver ([`Aal5Rx`]) |
//! | [`aal34`] | AAL3/4 sender and receiver, MID multiplexing |
//! | [`aal0`] | raw 48-byte payloads |
//! | [`crc10`] | CRC-10 of AAL3/4 SAR-PDUs (VPCLMULQDQ or PCLMULQDQ, portable fallback) |
//! | [`fold`] | CRC-32 folded into the cell copy (VPCLMULQDQ or PCLMULQDQ, portable fallback) |
//! | [`counters`] | drop reasons and per-VC counters |

pub mod aal0;
pub mod aal34;
pub mod aal5;
pub mod counters;
pub mod crc10;
pub mod fold;
mod timers;

pub use aal5::{Aal5Rx, Aal5Tx, Delivery, PduOptions, RxConfig, Status, VcConfig};
pub use counters::{DropCounts, DropReason, RxStats, VcCounters};
pub use fold::Kernel;

use aurora_wire::CellBytes;

/// Why a sender refused an SDU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxError {
    /// The SDU is longer than the AAL can carry.
    TooLong {
        /// The SDU's length.
        len: usize,
        /// The AAL's limit.
        max: usize,
    },
    /// The caller's cell buffer cannot hold the PDU.
    NoRoom {
        /// Cells needed.
        need: usize,
        /// Cells offered.
        have: usize,
    },
    /// The VC's header cannot be built (e.g. VPI too large for UNI).
    Header(aurora_wire::Error),
    /// A field is out of range (e.g. a MID above 1023).
    Field(&'static str),
}

impl std::fmt::Display for TxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxError::TooLong { len, max } => {
                write!(f, "SDU of {len} bytes is longer than the {max}-byte limit")
            }
            TxError::NoRoom { need, have } => {
                write!(f, "PDU needs {need} cells but the buffer holds {have}")
            }
            TxError::Header(e) => write!(f, "cannot build the cell header: {e}"),
            TxError::Field(what) => write!(f, "{what} is out of range"),
        }
    }
}

impl std::error::Error for TxError {}

/// The header (HEC included) of a plain user-data cell on `vc`.
pub(crate) fn user_header(
    vc: aurora_wire::cell::VcId,
    format: aurora_wire::cell::Format,
) -> Result<[u8; aurora_wire::HEADER_LEN], TxError> {
    aurora_wire::cell::Header {
        format,
        ..aurora_wire::cell::Header::data(vc)
    }
    .to_bytes()
    .map_err(TxError::Header)
}

/// The first four header bytes with EFCI, AUU and CLP masked out: cells with
/// equal keys are user (or non-user) cells of the same VC.
#[inline(always)]
pub(crate) fn header_key(cell: &CellBytes) -> u32 {
    u32::from_be_bytes([cell[0], cell[1], cell[2], cell[3] & 0xF8])
}
