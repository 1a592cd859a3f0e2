//! ATM wire formats.
//!
//! Every format is offered twice, in the style of smoltcp's `wire` module:
//!
//! * a zero-copy **view** over a byte buffer (`Cell<T>`, `SarPdu<T>`, ...), built
//!   with `new_checked` for untrusted bytes (after which no accessor can panic)
//!   or `new_unchecked` when the caller has already sized the buffer;
//! * a parsed **representation** (`Header`, `Trailer`, `OamRepr`, ...) with
//!   `parse` and `emit`.
//!
//! The crate does no I/O, allocates nothing and contains no `unsafe` code.
//! The checksums every format needs (HEC, CRC-10, CRC-32) live in [`crc`].
//!
//! | module | format |
//! |---|---|
//! | [`cell`] | 53-byte ATM cell, UNI and NNI headers, PTI, pre-assigned VCIs |
//! | [`vunet`] | VuNet's 56-byte, 64-bit aligned cell |
//! | [`hec`] | the receiver's HEC correction/detection state machine |
//! | [`delineate`] | HEC cell delineation on a byte stream (HUNT/PRESYNC/SYNC) |
//! | [`oam`] | F4/F5 OAM fault-management cells |
//! | [`aal5`] | AAL5 CPCS-PDU trailer and framing |
//! | [`aal34`] | AAL3/4 SAR-PDU and CPCS-PDU header/trailer |
//! | [`llc`] | RFC 2684 multiprotocol encapsulation: LLC/SNAP and VC multiplexing |
//! | [`atmarp`] | RFC 2225 ATMARP and InATMARP packets |
//! | [`ipv4`] | IPv4 header checks, Internet checksum and RFC 1624 update, ICMP errors |
#![forbid(unsafe_code)]
#![no_std]

#[cfg(test)]
extern crate std;

pub mod aal34;
pub mod aal5;
pub mod atmarp;
pub mod cell;
pub mod crc;
pub mod delineate;
pub mod hec;
pub mod ipv4;
pub mod llc;
pub mod oam;
pub mod vunet;

mod error;
pub use error::{Error, Result};

/// Size of an ATM cell on the wire: 5 header bytes and 48 payload bytes.
pub const CELL_LEN: usize = 53;
/// Size of the ATM cell header including the HEC.
pub const HEADER_LEN: usize = 5;
/// Size of a cell payload (the SAR-PDU of every AAL).
pub const PAYLOAD_LEN: usize = 48;

/// One ATM cell as bytes, header first.
pub type CellBytes = [u8; CELL_LEN];
/// One cell payload as bytes.
pub type PayloadBytes = [u8; PAYLOAD_LEN];
