//! A connection's time-sequence trace: what it sent and when, the ACKs it
//! got, its window and its timer events, for plots in the style of the
//! congestion-control papers and for tests that check a recovery step by
//! step.

use aurora_time::Instant;

use crate::Seq;

/// One event of a connection's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A segment carrying data (or SYN or FIN) left: its first sequence
    /// number and length in sequence space, and whether any of it had been
    /// sent before.
    Send {
        /// First sequence number.
        seq: Seq,
        /// Sequence space it covers.
        len: u32,
        /// Sent before (in whole or part).
        retransmit: bool,
    },
    /// An ACK arrived: the cumulative ACK and whether it was a duplicate.
    Ack {
        /// Cumulative acknowledgement.
        ack: Seq,
        /// A duplicate ACK (RFC 5681's definition).
        dup: bool,
    },
    /// The congestion window or threshold changed (bytes).
    Window {
        /// Congestion window.
        cwnd: u32,
        /// Slow-start threshold.
        ssthresh: u32,
    },
    /// Fast retransmit: loss recovery began on duplicate ACKs.
    FastRetransmit {
        /// The recovery point (highest sequence sent when it began).
        recover: Seq,
    },
    /// A partial ACK during recovery (NewReno and SACK stay in recovery).
    PartialAck {
        /// The ACK.
        ack: Seq,
    },
    /// Loss recovery ended.
    RecoveryEnd {
        /// The ACK that ended it.
        ack: Seq,
    },
    /// The retransmission timer expired.
    Timeout {
        /// Back-offs so far, this one included.
        backoff: u32,
    },
}

/// Events with their times, up to a limit (later events are counted, not
/// kept).
#[derive(Clone, Debug, Default)]
pub struct Trace {
    events: Vec<(Instant, Event)>,
    limit: usize,
    /// Events past the limit, not kept.
    pub lost: u64,
}

impl Trace {
    /// A trace keeping at most `limit` events (0: none).
    pub fn new(limit: usize) -> Self {
        Trace {
            events: Vec::new(),
            limit,
            lost: 0,
        }
    }

    /// Records `e` at `now`.
    pub fn push(&mut self, now: Instant, e: Event) {
        if self.events.len() < self.limit {
            self.events.push((now, e));
        } else {
            self.lost += 1;
        }
    }

    /// The events kept, oldest first.
    pub fn events(&self) -> &[(Instant, Event)] {
        &self.events
    }
}
