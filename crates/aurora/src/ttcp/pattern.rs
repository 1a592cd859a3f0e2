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

    /// Writes the stamp for PDU `seq`, sent at `sent_ns` (from [`now_ns`]),
    /// into the front of a filled buffer.
    pub fn stamp(buf: &mut [u8], seq: u64, sent_ns: u64) {
        let mut s = [0u8; STAMP];
        s[..8].copy_from_slice(&seq.to_be_bytes());
        s[8..].copy_from_slice(&sent_ns.to_be_bytes());
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

/// One-way latencies in nanoseconds, in bounded memory: every one until
/// [`Latencies::MAX`] are held, then every second one of those and of what
/// follows, then every fourth, and so on (an even thinning, so the
/// percentiles stay those of the whole run).
#[derive(Debug)]
pub struct Latencies {
    kept: Vec<u64>,
    stride: u64,
    seen: u64,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            kept: Vec::new(),
            stride: 1,
            seen: 0,
        }
    }
}

impl Latencies {
    /// The most samples held.
    pub const MAX: usize = 1 << 20;

    /// Adds one latency.
    pub fn push(&mut self, ns: u64) {
        let k = self.seen;
        self.seen += 1;
        if !k.is_multiple_of(self.stride) {
            return;
        }
        if self.kept.len() >= Self::MAX {
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride *= 2;
            if !k.is_multiple_of(self.stride) {
                return;
            }
        }
        self.kept.push(ns);
    }

    /// See [`latency_summary`].
    pub fn summary(&mut self) -> Option<[f64; 4]> {
        latency_summary(&mut self.kept)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_stay_bounded_and_evenly_thinned() {
        let mut l = Latencies::default();
        let n = 3 * Latencies::MAX as u64 + 7;
        for i in 0..n {
            l.push(i);
        }
        assert!(l.kept.len() <= Latencies::MAX && l.kept.len() >= Latencies::MAX / 2);
        let [min, p50, _, max] = l.summary().unwrap();
        assert_eq!(min, 0.0);
        // Thinned evenly: the median is still near the middle of the run.
        assert!(
            (p50 * 1e3 - n as f64 / 2.0).abs() < n as f64 * 0.01,
            "{p50}"
        );
        assert!(max * 1e3 >= n as f64 * 0.99, "{max}");
    }
}
