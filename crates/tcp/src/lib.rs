//! A TCP for Aurora's hosts, sans-I/O: time is passed in, segments go in
//! and out as IPv4 packets, and
//! [`Connection::poll_at`](conn::Connection::poll_at) says when the
//! connection next needs the clock.
//!
//! | module | what |
//! |---|---|
//! | [`seq`] | sequence numbers, compared modulo 2^32 |
//! | [`seg`] | a segment: IPv4 + TCP header with options, parsed and emitted |
//! | [`reasm`] | the receive side: out-of-order data held (bounded) and the SACK blocks that describe it |
//! | [`conn`] | one connection: RFC 9293's states, loss recovery (Tahoe, Reno, NewReno, SACK), timers, options |
//! | [`rtt`] | RFC 6298's round-trip estimate and retransmission timeout |
//! | [`sack`] | the sender's SACK scoreboard (RFC 6675) |
//! | [`trace`] | a connection's time-sequence trace |
//! | [`host`] | a host on the cell network whose local side is TCP sources and sinks |
//!
//! The segment format uses `etherparse` for the TCP header and its
//! options; the rest is this crate's own. smoltcp's TCP was considered and
//! not used: its socket has one congestion-control family and no
//! selectable loss recovery (no Tahoe, NewReno partial-ACK rule or RFC 6675
//! scoreboard), and the recovery algorithms are what this crate is for.

pub mod conn;
pub mod host;
pub mod reasm;
pub mod rtt;
pub mod sack;
pub mod seg;
pub mod seq;
pub mod trace;

pub use seq::Seq;
