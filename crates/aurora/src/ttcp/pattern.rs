//! The bytes ttcp sends, and their check on receipt.
//!
//! Every PDU starts with a 16-byte stamp (sequence number, send time in
//! CLOCK_MONOTONIC nanoseconds, both big-endian) and continues with a fixed
//! pseudo-random block, so a receiver checks every byte with one compare
//! against the same block and learns the one-way latency from the stamp
//! (sender and receiver share the clock on one machine). PDUs shorter than
//! 16 bytes carry as much of the stamp as fits.

/// Bytes of the stamp.
pub const STAMP: usize = 16;

/// The fixed body every PDU carries after its stamp.
pub struct Pattern {
    body: Vec<u8>,
}

/// What a receiver found in one PDU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    /// Sequence number from the stamp (if the PDU was long enough).
    pub seq: Option<u64>,
    /// Send time from the stamp.
    pub sent_ns: Option<u64>,
    /// True when every byte after the stamp matched.
    pub body_ok: bool,
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl Pattern {
    /// A pattern for PDUs up to `max` bytes.
    pub fn new(max: usize) -> Self {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let body = (0..max)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        Pattern { body }
    }

    /// Fills `buf` (a whole PDU) with the pattern.
    pub fn fill(&self, buf: &mut [u8]) {
        let n = buf.len().min(self.body.len());
        buf[..n].copy_from_slice(&self.body[..n]);
    }

    /// Writes the stamp for PDU `seq` into the front of a filled buffer.
    pub fn stamp(buf: &mut [u8], seq: u64) {
        let mut s = [0u8; STAMP];
        s[..8].copy_from_slice(&seq.to_be_bytes());
        s[8..].copy_from_slice(&now_ns().to_be_bytes());
        let n = buf.len().min(STAMP);
        buf[..n].copy_from_slice(&s[..n]);
    }

    /// Checks a received PDU.
    pub fn check(&self, pdu: &[u8]) -> Check {
        let seq = pdu
            .get(..8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")));
        let sent_ns = pdu
            .get(8..16)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")));
        let body_ok = pdu.len() <= self.body.len()
            && pdu
                .get(STAMP..)
                .is_none_or(|rest| rest == &self.body[STAMP..pdu.len()]);
        Check {
            seq,
            sent_ns,
            body_ok,
        }
    }
}

/// Min, median, 99th percentile and max of one-way latencies (nanoseconds
/// in, microseconds out); sorts `lat`. None when empty.
pub fn latency_summary(lat: &mut [u64]) -> Option<[f64; 4]> {
    if lat.is_empty() {
        return None;
    }
    lat.sort_unstable();
    let pct = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize] as f64 / 1e3;
    Some([pct(0.0), pct(0.5), pct(0.99), pct(1.0)])
}
