//! The sender's SACK scoreboard (RFC 6675): which bytes above the
//! cumulative ACK the receiver says it holds, and from that which are
//! lost, how much is in the network (`pipe`), and what to send next.

use crate::Seq;

/// Ranges the scoreboard keeps at most; older information beyond that is
/// forgotten (SACK is advisory: a forgotten range only costs a needless
/// retransmission).
pub const MAX_RANGES: usize = 64;

/// SACKed ranges above the cumulative ACK, sorted and disjoint.
#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    ranges: Vec<(Seq, Seq)>,
}

impl Scoreboard {
    /// Nothing SACKed.
    pub fn new() -> Self {
        Scoreboard::default()
    }

    /// Forgets everything (after a retransmission timeout).
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// The SACKed ranges, in order.
    pub fn ranges(&self) -> &[(Seq, Seq)] {
        &self.ranges
    }

    /// Whether nothing is SACKed.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Adds a SACK block `[l, r)` reported by the receiver, ignoring what
    /// lies at or below `una` or above `max` (the highest byte sent): a
    /// block outside that is stale or bogus. Returns whether the block
    /// told something new.
    pub fn add(&mut self, l: Seq, r: Seq, una: Seq, max: Seq) -> bool {
        let l = l.max(una);
        let r = r.min(max);
        if r <= l {
            return false;
        }
        let before = self.sacked_bytes();
        // Merge with every range it touches.
        let mut lo = l;
        let mut hi = r;
        self.ranges.retain(|&(a, b)| {
            if b < lo || a > hi {
                true
            } else {
                lo = lo.min(a);
                hi = hi.max(b);
                false
            }
        });
        let at = self.ranges.partition_point(|&(a, _)| a < lo);
        self.ranges.insert(at, (lo, hi));
        if self.ranges.len() > MAX_RANGES {
            // Keep the lowest ranges: they decide which holes are lost.
            self.ranges.truncate(MAX_RANGES);
        }
        self.sacked_bytes() != before
    }

    /// The cumulative ACK moved to `una`: ranges below it go.
    pub fn ack(&mut self, una: Seq) {
        self.ranges.retain(|&(_, b)| b > una);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(una);
        }
    }

    /// Bytes SACKed.
    pub fn sacked_bytes(&self) -> u32 {
        self.ranges.iter().map(|&(a, b)| b.since(a)).sum()
    }

    /// The highest SACKed byte + 1, if any.
    pub fn high(&self) -> Option<Seq> {
        self.ranges.last().map(|&(_, b)| b)
    }

    /// Whether `s` is SACKed.
    pub fn is_sacked(&self, s: Seq) -> bool {
        self.ranges.iter().any(|&(a, b)| s.within(a, b))
    }

    /// The holes (unSACKed ranges) between `una` and the highest SACKed
    /// byte, each with whether RFC 6675's IsLost holds for it: at least
    /// `dupthresh` SACKed ranges above it, or more than
    /// `(dupthresh − 1) · mss` bytes SACKed above it. (Every byte of a hole
    /// has the same SACKed data above it, so the test holds for a whole
    /// hole or for none of it.)
    pub fn holes(&self, una: Seq, dupthresh: u32, mss: u32) -> impl Iterator<Item = Hole> + '_ {
        let mut above_bytes: u32 = self.sacked_bytes();
        let n = self.ranges.len();
        let mut prev = una;
        self.ranges
            .iter()
            .enumerate()
            .filter_map(move |(i, &(a, b))| {
                let hole = (prev < a).then(|| {
                    let ranges_above = (n - i) as u32;
                    Hole {
                        start: prev,
                        end: a,
                        lost: ranges_above >= dupthresh
                            || above_bytes > dupthresh.saturating_sub(1) * mss,
                    }
                });
                above_bytes -= b.since(a);
                prev = b;
                hole
            })
    }

    /// RFC 6675's `pipe`: bytes between `una` and `max` thought to be in
    /// the network: each unSACKed byte not lost, plus each retransmitted
    /// byte (at or below `high_rxt`) once more.
    pub fn pipe(&self, una: Seq, max: Seq, high_rxt: Seq, dupthresh: u32, mss: u32) -> u32 {
        let mut pipe = 0;
        let top = self.high().unwrap_or(una).max(una);
        for h in self.holes(una, dupthresh, mss) {
            if !h.lost {
                pipe += h.end.since(h.start);
            }
            pipe += high_rxt.min(h.end).since(h.start);
        }
        // Above the highest SACKed byte nothing is lost yet.
        pipe += max.since(top);
        pipe += high_rxt.since(top).min(max.since(top));
        pipe
    }

    /// RFC 6675's NextSeg rule 1: the first lost, unSACKed byte above
    /// `high_rxt` (the highest byte retransmitted so far, exclusive), and
    /// how many bytes of its hole follow it.
    pub fn next_lost(
        &self,
        una: Seq,
        high_rxt: Seq,
        dupthresh: u32,
        mss: u32,
    ) -> Option<(Seq, u32)> {
        self.holes(una, dupthresh, mss)
            .filter(|h| h.lost && h.end > high_rxt)
            .map(|h| {
                let s = h.start.max(high_rxt);
                (s, h.end.since(s))
            })
            .next()
    }

    /// NextSeg rule 3: the first unSACKed byte above `high_rxt` in a hole
    /// not (yet) lost, and how many bytes of its hole follow it.
    pub fn next_unsacked(
        &self,
        una: Seq,
        high_rxt: Seq,
        dupthresh: u32,
        mss: u32,
    ) -> Option<(Seq, u32)> {
        self.holes(una, dupthresh, mss)
            .filter(|h| h.end > high_rxt)
            .map(|h| {
                let s = h.start.max(high_rxt);
                (s, h.end.since(s))
            })
            .next()
    }
}

/// A range of bytes not SACKed, below the highest SACKed byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hole {
    /// First byte.
    pub start: Seq,
    /// One past the last byte.
    pub end: Seq,
    /// RFC 6675's IsLost.
    pub lost: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 100;

    /// Segments of 100 bytes from 1000; `sacked` lists which are SACKed.
    fn board(sacked: &[u32]) -> Scoreboard {
        let mut b = Scoreboard::new();
        for &k in sacked {
            b.add(
                Seq(1000 + k * MSS),
                Seq(1100 + k * MSS),
                Seq(1000),
                Seq(100_000),
            );
        }
        b
    }

    #[test]
    fn ranges_merge_and_the_ack_trims_them() {
        let mut b = board(&[2, 3, 5]);
        assert_eq!(b.ranges(), [(Seq(1200), Seq(1400)), (Seq(1500), Seq(1600))]);
        assert!(
            !b.add(Seq(1200), Seq(1300), Seq(1000), Seq(100_000)),
            "nothing new"
        );
        assert!(b.add(Seq(1400), Seq(1500), Seq(1000), Seq(100_000)));
        assert_eq!(b.ranges(), [(Seq(1200), Seq(1600))]);
        b.ack(Seq(1300));
        assert_eq!(b.ranges(), [(Seq(1300), Seq(1600))]);
        b.ack(Seq(1600));
        assert!(b.is_empty());
    }

    #[test]
    fn a_hole_is_lost_with_three_segments_sacked_above() {
        // Segment 0 lost, 1 and 2 SACKed: not yet (two segments above);
        // with 3 too, it is.
        let b = board(&[1, 2]);
        let h: Vec<_> = b.holes(Seq(1000), 3, MSS).collect();
        assert_eq!(
            h,
            [Hole {
                start: Seq(1000),
                end: Seq(1100),
                lost: false
            }]
        );
        let b = board(&[1, 2, 3]);
        assert!(b.holes(Seq(1000), 3, MSS).all(|h| h.lost));
        // Three separate ranges above count too.
        let b = board(&[1, 3, 5]);
        let lost: Vec<_> = b.holes(Seq(1000), 3, MSS).map(|h| h.lost).collect();
        assert_eq!(lost, [true, false, false]);
    }

    #[test]
    fn pipe_and_next_segment_follow_rfc_6675() {
        // Ten segments out (1000..2000); 0 and 4 lost; the rest SACKed but
        // 9 (above the highest SACK).
        let b = board(&[1, 2, 3, 5, 6, 7, 8]);
        let max = Seq(2000);
        // Hole 0 lost (7 segments above), hole 4 lost (4 above): pipe is
        // only segment 9.
        assert_eq!(b.pipe(Seq(1000), max, Seq(1000), 3, MSS), 100);
        assert_eq!(
            b.next_lost(Seq(1000), Seq(1000), 3, MSS),
            Some((Seq(1000), 100))
        );
        // Segment 0 retransmitted: it is in the pipe again, and the next
        // lost byte is segment 4.
        assert_eq!(b.pipe(Seq(1000), max, Seq(1100), 3, MSS), 200);
        assert_eq!(
            b.next_lost(Seq(1000), Seq(1100), 3, MSS),
            Some((Seq(1400), 100))
        );
        assert_eq!(b.next_lost(Seq(1000), Seq(1500), 3, MSS), None);
        assert_eq!(b.next_unsacked(Seq(1000), Seq(1500), 3, MSS), None);
    }
}
