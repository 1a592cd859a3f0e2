//! A TCP for Aurora's hosts, sans-I/O: time is passed in, segments go in
//! and out as IPv4 packets, and [`poll_at`](conn::Connection::poll_at)
//! says when the connection next needs the clock.
//!
//! | module | what |
//! |---|---|
//! | [`seq`] | sequence numbers, compared modulo 2^32 |
//! | [`seg`] | a segment: IPv4 + TCP header with options, parsed and emitted |
//! | [`reasm`] | the receive side: out-of-order data held (bounded) and the SACK blocks that describe it |

pub mod reasm;
pub mod seg;
pub mod seq;

pub use seq::Seq;
