//! The receive side's data path. Bytes that arrive in order go straight
//! to the caller; bytes that arrive early wait in a bounded buffer until
//! the gap before them is filled; and the SACK blocks (RFC 2018) tell
//! the sender which early bytes are waiting.
//!
//! How the waiting bytes are kept:
//!
//! - one ring of `capacity` bytes, allocated at the first out-of-order
//!   segment and kept after. A byte's place in the ring is fixed by its
//!   distance from `rcv_nxt`, and the ring's head moves with `rcv_nxt`,
//!   so bytes never move once written, and whatever the window admits
//!   fits: held bytes can never exceed `capacity`.
//! - a sorted list of *runs*, the contiguous ranges of held bytes. Runs
//!   never overlap or touch (a segment that meets two runs makes them
//!   one) and never begin at `rcv_nxt` (that data would have been
//!   delivered). The list holds at most [`MAX_RUNS`] runs; a segment that
//!   would need one more is dropped and counted in [`Insert::dropped`].
//!
//! Work per segment is a copy of its new bytes into the ring (or straight
//! to the caller when in order), plus a scan of at most [`MAX_RUNS`] runs.
//! Each run carries the number of the latest segment that landed in it,
//! which orders the SACK blocks as RFC 2018 section 4 asks.
//!
//! A FIN is not this module's business: the caller notes its sequence
//! number and acts once `rcv_nxt` reaches it.

use std::fmt;

use crate::seq::Seq;

/// Most runs of out-of-order data held at once.
///
/// Each gap in the received data costs one run, so this is the number of
/// separate holes the receiver will remember. 64 runs is far more than
/// the 3 or 4 SACK blocks that fit in one ACK, and more than ordinary
/// loss produces in a window (a burst of losses makes one hole, not
/// many), while keeping the bookkeeping a fixed 1.5 KB and every scan
/// short. What it stops is a sender (or an adversary) slicing the window
/// into thousands of one-byte islands.
pub const MAX_RUNS: usize = 64;

/// Largest receive buffer: TCP's window cannot exceed 2^30 bytes (RFC 7323
/// section 2.3), and sequence comparisons need everything held to lie
/// well within 2^31 of `rcv_nxt`. Larger capacities are cut to this.
pub const MAX_CAPACITY: usize = 1 << 30;

/// One contiguous range of held bytes, `[left, right)`.
#[derive(Clone, Copy, Debug)]
struct Run {
    left: Seq,
    right: Seq,
    /// The number of the latest out-of-order segment that landed here;
    /// larger is more recent.
    stamp: u64,
}

/// The receive side of one connection: in-order delivery, out-of-order
/// data held in a buffer of fixed capacity, and SACK blocks for it.
#[derive(Clone)]
pub struct Reassembly {
    rcv_nxt: Seq,
    cap: usize,
    /// Empty until something is held, then `cap` bytes.
    ring: Vec<u8>,
    /// Where in `ring` the byte at `rcv_nxt` goes.
    head: usize,
    /// Sorted by sequence; disjoint, not touching, all in
    /// `(rcv_nxt, rcv_nxt + cap]`.
    runs: Vec<Run>,
    held: usize,
    /// Out-of-order segments seen, for the runs' stamps.
    clock: u64,
}

/// What [`Reassembly::insert`] did with one segment. Its bytes add up:
/// `data.len() == delivered − joined + held + duplicate + beyond_window + dropped`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Insert {
    /// Bytes given to `deliver`: the segment's own new bytes plus any
    /// held bytes it joined (`joined`).
    pub delivered: usize,
    /// Of `delivered`, the bytes that had been held out of order and
    /// could go once this segment closed the gap before them. RFC 5681
    /// section 4.2 asks for an immediate ACK when a segment fills all or
    /// part of a gap: that is `joined > 0`, or in-order bytes delivered
    /// while [`held`](Reassembly::held) is still non-zero.
    pub joined: usize,
    /// The segment's new bytes now held out of order.
    pub held: usize,
    /// The segment's bytes that were already here: before `rcv_nxt`, or
    /// in a range already held. The held copy is kept and these are
    /// discarded.
    pub duplicate: usize,
    /// The segment's bytes at or past `rcv_nxt + capacity`, cut off.
    pub beyond_window: usize,
    /// The segment's bytes thrown away because holding them would have
    /// taken a run beyond [`MAX_RUNS`]. Only a segment that touches no
    /// held run can be dropped, so it is all or none of what was left
    /// after trimming.
    pub dropped: usize,
    /// The segment's bytes, after trimming, began above `rcv_nxt`,
    /// leaving a gap. False for a segment trimmed to nothing.
    pub out_of_order: bool,
}

impl Reassembly {
    /// Expecting `rcv_nxt` next; at most `capacity` bytes held out of order
    /// (the receive buffer; the caller advertises a window no larger).
    /// `capacity` is cut to [`MAX_CAPACITY`]. Nothing is allocated until
    /// the first segment that has to be held.
    pub fn new(rcv_nxt: Seq, capacity: usize) -> Self {
        Reassembly {
            rcv_nxt,
            cap: capacity.min(MAX_CAPACITY),
            ring: Vec::new(),
            head: 0,
            runs: Vec::new(),
            held: 0,
            clock: 0,
        }
    }

    /// The next byte expected in order.
    pub fn rcv_nxt(&self) -> Seq {
        self.rcv_nxt
    }

    /// The buffer's size: data is accepted in `[rcv_nxt, rcv_nxt + capacity)`.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes held out of order.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Takes the data of one segment starting at `seq`. It need not be
    /// trimmed to the window: bytes before `rcv_nxt` count as duplicates
    /// and bytes at or past `rcv_nxt + capacity` are cut off.
    ///
    /// If what is left starts at `rcv_nxt`, it goes to `deliver`, followed
    /// by any held run it reaches, and `rcv_nxt` advances past all of it;
    /// `deliver` may be called several times, always in sequence order.
    /// Otherwise the bytes are held: overlapping or touching runs merge
    /// into one, and where a byte is already held the held copy stays.
    pub fn insert(&mut self, seq: Seq, data: &[u8], deliver: &mut dyn FnMut(&[u8])) -> Insert {
        let mut out = Insert::default();
        // The segment as `[a, b)` relative to rcv_nxt, in i128 so no sum
        // can overflow, then cut to the window `[0, cap)`.
        let a = i128::from(seq.diff(self.rcv_nxt));
        let b = a + data.len() as i128;
        let cap = self.cap as i128;
        out.duplicate = (b.min(0) - a).max(0) as usize;
        out.beyond_window = (b - a.max(cap)).max(0) as usize;
        let (lo, hi) = (a.max(0), b.min(cap));
        if lo >= hi {
            return out;
        }
        let skip = (lo - a) as usize;
        let (lo, hi) = (lo as usize, hi as usize);
        let seg = &data[skip..skip + (hi - lo)];
        if lo == 0 {
            self.deliver_in_order(seg, &mut out, deliver);
        } else {
            out.out_of_order = true;
            self.hold(lo, seg, &mut out);
        }
        out
    }

    /// Up to `max` SACK blocks for the next ACK, as (left, right) pairs
    /// written into `out` (cleared first), per RFC 2018 section 4: first
    /// the block holding the latest out-of-order segment, then the other
    /// blocks in order of how recently a segment landed in them, which
    /// is the order they were last reported first in. A block that was
    /// since delivered or merged into another is gone, so never repeated,
    /// and no block covers `rcv_nxt`.
    pub fn sack_blocks(&self, max: usize, out: &mut Vec<(Seq, Seq)>) {
        out.clear();
        // The runs' (stamp, index), newest first: pick the `max` newest
        // (linear), then order just those. No allocation, O(runs).
        let mut order = [(0u64, 0usize); MAX_RUNS];
        let mut n = 0;
        for (slot, (k, r)) in order.iter_mut().zip(self.runs.iter().enumerate()) {
            *slot = (r.stamp, k);
            n += 1;
        }
        let take = max.min(n);
        if take == 0 {
            return;
        }
        let order = &mut order[..n];
        let newest_first = |a: &(u64, usize), b: &(u64, usize)| b.0.cmp(&a.0);
        if take < n {
            order.select_nth_unstable_by(take - 1, newest_first);
        }
        order[..take].sort_unstable_by(newest_first);
        out.extend(
            order[..take]
                .iter()
                .map(|&(_, k)| (self.runs[k].left, self.runs[k].right)),
        );
    }

    /// Distance of a held sequence number from rcv_nxt.
    fn rel(&self, s: Seq) -> usize {
        s.since(self.rcv_nxt) as usize
    }

    /// `seg` starts at rcv_nxt: deliver it, with the held runs it now
    /// reaches, and move rcv_nxt past all of it.
    fn deliver_in_order(&mut self, seg: &[u8], out: &mut Insert, deliver: &mut dyn FnMut(&[u8])) {
        let n = seg.len();
        // Delivered up to here, relative to rcv_nxt.
        let mut p = 0;
        let mut joined_runs = 0;
        for r in &self.runs {
            let (rs, re) = (
                r.left.since(self.rcv_nxt) as usize,
                r.right.since(self.rcv_nxt) as usize,
            );
            if rs > n {
                break;
            }
            // Runs are sorted and do not touch, so rs ≥ p here.
            if rs > p {
                deliver(&seg[p..rs]);
                out.delivered += rs - p;
            }
            out.duplicate += re.min(n) - rs;
            read_ring(&self.ring, self.head, rs, re - rs, deliver);
            out.delivered += re - rs;
            out.joined += re - rs;
            p = re;
            joined_runs += 1;
        }
        if p < n {
            deliver(&seg[p..]);
            out.delivered += n - p;
            p = n;
        }
        self.runs.drain(..joined_runs);
        self.held -= out.joined;
        self.rcv_nxt += p as u32;
        // p ≤ cap, and p > 0 implies cap > 0.
        self.head = (self.head + p) % self.cap;
    }

    /// `seg` starts `lo` bytes above rcv_nxt: hold its new bytes.
    fn hold(&mut self, lo: usize, seg: &[u8], out: &mut Insert) {
        let hi = lo + seg.len();
        // Runs i..j overlap or touch [lo, hi).
        let i = self.runs.partition_point(|r| self.rel(r.right) < lo);
        let j = self.runs.partition_point(|r| self.rel(r.left) <= hi);
        if i == j && self.runs.len() >= MAX_RUNS {
            out.dropped = seg.len();
            return;
        }
        if self.ring.len() != self.cap {
            self.ring = vec![0; self.cap];
        }
        self.clock += 1;
        let stamp = self.clock;
        // Write the parts of [lo, hi) that no run covers.
        let mut p = lo;
        for r in &self.runs[i..j] {
            let (rs, re) = (self.rel(r.left), self.rel(r.right));
            if rs > p {
                let e = rs.min(hi);
                write_ring(&mut self.ring, self.head, p, &seg[p - lo..e - lo]);
                out.held += e - p;
            }
            p = p.max(re);
        }
        if p < hi {
            write_ring(&mut self.ring, self.head, p, &seg[p - lo..]);
            out.held += hi - p;
        }
        out.duplicate += seg.len() - out.held;
        self.held += out.held;
        let mut run = Run {
            left: self.rcv_nxt + lo as u32,
            right: self.rcv_nxt + hi as u32,
            stamp,
        };
        if i == j {
            self.runs.insert(i, run);
        } else {
            run.left = run.left.min(self.runs[i].left);
            run.right = run.right.max(self.runs[j - 1].right);
            self.runs[i] = run;
            self.runs.drain(i + 1..j);
        }
    }
}

/// Copies `bytes` into the ring at `rel` bytes past `head`, wrapping.
fn write_ring(ring: &mut [u8], head: usize, rel: usize, bytes: &[u8]) {
    // head < len and rel < len, so the sum cannot overflow.
    let at = (head + rel) % ring.len();
    let first = bytes.len().min(ring.len() - at);
    ring[at..at + first].copy_from_slice(&bytes[..first]);
    ring[..bytes.len() - first].copy_from_slice(&bytes[first..]);
}

/// Hands `len` bytes of the ring, from `rel` bytes past `head`, to `f`
/// in one or two pieces.
fn read_ring(ring: &[u8], head: usize, rel: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
    let at = (head + rel) % ring.len();
    let first = len.min(ring.len() - at);
    f(&ring[at..at + first]);
    if first < len {
        f(&ring[..len - first]);
    }
}

impl fmt::Debug for Reassembly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reassembly")
            .field("rcv_nxt", &self.rcv_nxt)
            .field("capacity", &self.cap)
            .field("held", &self.held)
            .field("runs", &self.runs)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Byte `i` of the test stream.
    fn byte(i: u32) -> u8 {
        (i.wrapping_mul(0x9E37_79B1) >> 24) as u8
    }

    /// Bytes `[from, to)` of the test stream.
    fn bytes(from: u32, to: u32) -> Vec<u8> {
        (from..to).map(byte).collect()
    }

    /// A receiver expecting byte 0 of the stream at `base`, with what it
    /// has delivered so far.
    struct Rx {
        base: Seq,
        r: Reassembly,
        out: Vec<u8>,
    }

    impl Rx {
        fn new(base: u32, cap: usize) -> Rx {
            Rx {
                base: Seq(base),
                r: Reassembly::new(Seq(base), cap),
                out: Vec::new(),
            }
        }

        /// Sends stream bytes `[from, to)`.
        fn send(&mut self, from: u32, to: u32) -> Insert {
            self.send_bytes(from, &bytes(from, to))
        }

        fn send_bytes(&mut self, from: u32, data: &[u8]) -> Insert {
            let out = &mut self.out;
            let ins = self
                .r
                .insert(self.base + from, data, &mut |d| out.extend_from_slice(d));
            self.r.check();
            ins
        }

        /// The next expected byte, as a stream offset.
        fn nxt(&self) -> u32 {
            self.r.rcv_nxt().0.wrapping_sub(self.base.0)
        }

        /// Held runs as stream offsets.
        fn runs(&self) -> Vec<(u32, u32)> {
            self.r
                .runs
                .iter()
                .map(|r| {
                    (
                        r.left.0.wrapping_sub(self.base.0),
                        r.right.0.wrapping_sub(self.base.0),
                    )
                })
                .collect()
        }

        /// SACK blocks as stream offsets.
        fn sack(&self, max: usize) -> Vec<(u32, u32)> {
            let mut v = Vec::new();
            self.r.sack_blocks(max, &mut v);
            v.iter()
                .map(|(l, r)| (l.0.wrapping_sub(self.base.0), r.0.wrapping_sub(self.base.0)))
                .collect()
        }

        /// Delivered exactly the stream up to rcv_nxt.
        fn delivered_ok(&self) -> bool {
            self.out == bytes(0, self.nxt())
        }
    }

    impl Reassembly {
        /// The held runs with their bytes, read back from the ring.
        fn held_runs(&self) -> Vec<(Seq, Vec<u8>)> {
            self.runs
                .iter()
                .map(|r| {
                    let mut v = Vec::new();
                    let (rs, re) = (self.rel(r.left), self.rel(r.right));
                    read_ring(&self.ring, self.head, rs, re - rs, &mut |d| {
                        v.extend_from_slice(d)
                    });
                    (r.left, v)
                })
                .collect()
        }

        /// The structure's invariants.
        fn check(&self) {
            assert!(self.runs.len() <= MAX_RUNS);
            assert!(self.held <= self.cap);
            let mut sum = 0;
            let mut last = 0;
            for r in &self.runs {
                let (rs, re) = (r.left.diff(self.rcv_nxt), r.right.diff(self.rcv_nxt));
                assert!(rs > last && re > rs && re as usize <= self.cap, "{self:?}");
                sum += (re - rs) as usize;
                last = re;
            }
            assert_eq!(sum, self.held);
        }
    }

    /// What an in-order (or entirely old) segment should do.
    fn ins(delivered: usize, joined: usize, held: usize, duplicate: usize) -> Insert {
        Insert {
            delivered,
            joined,
            held,
            duplicate,
            ..Insert::default()
        }
    }

    /// What an out-of-order segment should do.
    fn ooo(held: usize, duplicate: usize) -> Insert {
        Insert {
            held,
            duplicate,
            out_of_order: true,
            ..Insert::default()
        }
    }

    #[test]
    fn in_order_goes_straight_through() {
        let mut rx = Rx::new(1000, 100);
        assert_eq!(rx.send(0, 10), ins(10, 0, 0, 0));
        assert_eq!(rx.send(10, 60), ins(50, 0, 0, 0));
        assert_eq!(rx.nxt(), 60);
        assert!(rx.delivered_ok());
        assert_eq!(rx.r.held(), 0);
        assert!(rx.r.ring.is_empty(), "nothing allocated for in-order data");
        assert_eq!(rx.send(60, 60), Insert::default());
    }

    #[test]
    fn a_gap_then_its_fill() {
        let mut rx = Rx::new(7, 100);
        assert_eq!(rx.send(10, 20), ooo(10, 0));
        assert_eq!(rx.nxt(), 0);
        assert_eq!(rx.r.held(), 10);
        assert_eq!(rx.sack(4), [(10, 20)]);
        // Part of the gap: still a gap.
        assert_eq!(rx.send(0, 5), ins(5, 0, 0, 0));
        assert_eq!(rx.sack(4), [(10, 20)]);
        // The rest: the held run follows it out.
        assert_eq!(rx.send(5, 10), ins(15, 10, 0, 0));
        assert_eq!(rx.nxt(), 20);
        assert_eq!(rx.r.held(), 0);
        assert!(rx.delivered_ok());
        assert!(rx.sack(4).is_empty());
    }

    #[test]
    fn a_fill_joins_only_the_runs_it_reaches() {
        let mut rx = Rx::new(0, 100);
        rx.send(10, 20);
        rx.send(30, 40);
        assert_eq!(rx.send(0, 10), ins(20, 10, 0, 0));
        assert_eq!(rx.nxt(), 20);
        assert_eq!(rx.runs(), [(30, 40)]);
        // An in-order segment running into and past a held run.
        assert_eq!(rx.send(20, 35), ins(20, 10, 0, 5));
        assert_eq!(rx.nxt(), 40);
        // An in-order segment running over a run and on into a gap.
        rx.send(45, 50);
        assert_eq!(rx.send(40, 60), ins(20, 5, 0, 5));
        assert_eq!(rx.nxt(), 60);
        assert!(rx.delivered_ok());
        assert_eq!(rx.r.held(), 0);
    }

    #[test]
    fn overlaps_of_every_kind() {
        // Held [20, 30) and [40, 50); then one segment of each shape.
        // A segment, what inserting it should do, and the runs after.
        type Case = ((u32, u32), Insert, &'static [(u32, u32)]);
        let cases: &[Case] = &[
            ((22, 28), ooo(0, 6), &[(20, 30), (40, 50)]),   // inside
            ((20, 30), ooo(0, 10), &[(20, 30), (40, 50)]),  // the same
            ((15, 25), ooo(5, 5), &[(15, 30), (40, 50)]),   // over the left edge
            ((25, 35), ooo(5, 5), &[(20, 35), (40, 50)]),   // over the right edge
            ((15, 35), ooo(10, 10), &[(15, 35), (40, 50)]), // over the whole
            ((10, 20), ooo(10, 0), &[(10, 30), (40, 50)]),  // touching on the left
            ((30, 35), ooo(5, 0), &[(20, 35), (40, 50)]),   // touching on the right
            ((30, 40), ooo(10, 0), &[(20, 50)]),            // filling the hole exactly
            ((25, 45), ooo(10, 10), &[(20, 50)]),           // bridging, overlapping both
            ((10, 60), ooo(30, 20), &[(10, 60)]),           // covering both
            ((32, 38), ooo(6, 0), &[(20, 30), (32, 38), (40, 50)]), // between
            ((55, 60), ooo(5, 0), &[(20, 30), (40, 50), (55, 60)]), // after
            ((5, 10), ooo(5, 0), &[(5, 10), (20, 30), (40, 50)]), // before
        ];
        for &((from, to), want, runs) in cases {
            let mut rx = Rx::new(u32::MAX - 30, 100);
            rx.send(20, 30);
            rx.send(40, 50);
            // Different bytes over the same range: the held copy must win.
            let junk = vec![0xA5; (to - from) as usize];
            assert_eq!(rx.send_bytes(from, &junk), want, "segment [{from}, {to})");
            assert_eq!(rx.runs(), runs, "segment [{from}, {to})");
            assert_eq!(
                rx.r.held(),
                runs.iter().map(|(l, r)| (r - l) as usize).sum::<usize>()
            );
            // The newest segment's run is reported first.
            let first = rx.sack(1)[0];
            assert!(first.0 <= from && to <= first.1);
            // Fill the lot: each byte delivered is the first copy that
            // arrived, the junk only where nothing was held before it.
            rx.send(0, 100);
            assert_eq!(rx.nxt(), 100);
            for (k, &b) in (0..).zip(&rx.out) {
                let held_first = (20..30).contains(&k) || (40..50).contains(&k);
                let want = if !held_first && (from..to).contains(&k) {
                    0xA5
                } else {
                    byte(k)
                };
                assert_eq!(b, want, "byte {k} after segment [{from}, {to})");
            }
        }
    }

    #[test]
    fn held_bytes_win_over_a_later_in_order_copy() {
        let mut r = Reassembly::new(Seq(0), 100);
        r.insert(Seq(5), &[1; 5], &mut |_| {});
        let mut got = Vec::new();
        let i = r.insert(Seq(0), &[2; 8], &mut |d| got.extend_from_slice(d));
        assert_eq!(got, [2, 2, 2, 2, 2, 1, 1, 1, 1, 1]);
        assert_eq!((i.delivered, i.joined, i.duplicate), (10, 5, 3));
    }

    #[test]
    fn duplicates_before_rcv_nxt() {
        let mut rx = Rx::new(0, 100);
        rx.send(0, 50);
        assert_eq!(rx.send(10, 20), ins(0, 0, 0, 10));
        assert_eq!(rx.send(0, 50), ins(0, 0, 0, 50));
        // Partly old, partly new.
        assert_eq!(rx.send(40, 60), ins(10, 0, 0, 10));
        // Partly old, partly new, partly held.
        rx.send(70, 80);
        assert_eq!(rx.send(50, 75), ins(20, 10, 0, 15));
        assert_eq!(rx.nxt(), 80);
        assert!(rx.delivered_ok());
        // Far behind: still a duplicate, not mistaken for new data.
        assert_eq!(rx.send(0, 1), ins(0, 0, 0, 1));
    }

    #[test]
    fn trimmed_to_the_window() {
        let mut rx = Rx::new(0, 100);
        let mut want = ins(100, 0, 0, 0);
        want.beyond_window = 20;
        assert_eq!(rx.send(0, 120), want);
        assert_eq!(rx.nxt(), 100);
        // Out of order and over the edge (now [100, 200)).
        let mut want = ooo(10, 0);
        want.beyond_window = 5;
        assert_eq!(rx.send(190, 205), want);
        assert_eq!(rx.runs(), [(190, 200)]);
        // Entirely past the edge, and starting exactly at it.
        let want = Insert {
            beyond_window: 10,
            ..Insert::default()
        };
        assert_eq!(rx.send(250, 260), want);
        assert_eq!(rx.send(200, 210), want);
        // Old, new and beyond in one segment.
        let want = Insert {
            delivered: 100,
            joined: 10,
            duplicate: 20,
            beyond_window: 10,
            ..Insert::default()
        };
        assert_eq!(rx.send(90, 210), want);
        assert_eq!(rx.nxt(), 200);
        assert!(rx.delivered_ok());
    }

    #[test]
    fn a_zero_window_takes_nothing() {
        let mut rx = Rx::new(5, 0);
        let want = Insert {
            beyond_window: 10,
            ..Insert::default()
        };
        assert_eq!(rx.send(0, 10), want);
        assert_eq!(rx.send(3, 13), want);
        assert_eq!(rx.nxt(), 0);
        let mut v = vec![(Seq(1), Seq(2))];
        rx.r.sack_blocks(4, &mut v);
        assert!(v.is_empty());
    }

    #[test]
    fn across_the_wrap() {
        for start in [u32::MAX - 9, u32::MAX, 0x7FFF_FFF0] {
            let mut rx = Rx::new(start, 64);
            rx.send(30, 40);
            rx.send(5, 12);
            rx.send(20, 30);
            assert_eq!(rx.runs(), [(5, 12), (20, 40)]);
            assert_eq!(rx.sack(4), [(20, 40), (5, 12)]);
            rx.send(0, 8);
            assert_eq!(rx.nxt(), 12);
            rx.send(12, 20);
            assert_eq!(rx.nxt(), 40);
            assert!(rx.delivered_ok());
            // And again with the ring's head wrapping too.
            for k in 0..10 {
                let at = 40 + k * 50;
                rx.send(at + 20, at + 50);
                rx.send(at, at + 20);
                assert_eq!(rx.nxt(), at + 50);
            }
            assert!(rx.delivered_ok());
        }
    }

    #[test]
    fn capacity_is_capped() {
        assert_eq!(Reassembly::new(Seq(0), usize::MAX).capacity(), MAX_CAPACITY);
        let mut r = Reassembly::new(Seq(0), usize::MAX);
        // Far ahead is beyond the window, however big the buffer.
        let i = r.insert(Seq(0x8000_0000), &[0; 10], &mut |_| {});
        assert_eq!(i.held + i.delivered, 0);
    }

    #[test]
    fn runs_are_capped() {
        let mut rx = Rx::new(0, 1000);
        // Islands [2, 3), [6, 7), ..., [254, 255).
        for k in 0..MAX_RUNS as u32 {
            assert_eq!(rx.send(2 + 4 * k, 3 + 4 * k), ooo(1, 0));
        }
        assert_eq!(rx.runs().len(), MAX_RUNS);
        let last = 4 * MAX_RUNS as u32;
        // One more island is dropped, whole.
        let dropped = |n| Insert {
            dropped: n,
            out_of_order: true,
            ..Insert::default()
        };
        assert_eq!(rx.send(last + 10, last + 15), dropped(5));
        assert_eq!(rx.send(4, 5), dropped(1));
        assert_eq!(rx.r.held(), MAX_RUNS);
        assert_eq!(rx.sack(1), [(254, 255)]);
        // A segment touching a run is taken: it grows that run.
        assert_eq!(rx.send(1, 2), ooo(1, 0));
        assert_eq!(rx.send(last - 1, last + 30), ooo(31, 0));
        // One joining two runs frees a slot.
        assert_eq!(rx.send(3, 6), ooo(3, 0));
        assert_eq!(rx.runs().len(), MAX_RUNS - 1);
        assert_eq!(rx.send(last + 40, last + 41), ooo(1, 0));
        assert_eq!(rx.runs().len(), MAX_RUNS);
        // In-order data is never dropped.
        assert_eq!(rx.send(0, 1), ins(7, 6, 0, 0));
        assert_eq!(rx.nxt(), 7);
        assert!(rx.delivered_ok());
    }

    /// RFC 2018 section 5, case 3: eight 500-byte segments from 5000,
    /// the 2nd, 4th, 6th and 8th lost, then the 4th and 2nd arriving.
    #[test]
    fn sack_blocks_as_in_rfc_2018() {
        let mut r = Reassembly::new(Seq(5000), 1 << 16);
        let mut blocks = Vec::new();
        let mut send = |r: &mut Reassembly, at: u32| {
            r.insert(Seq(at), &[0; 500], &mut |_| {});
            r.sack_blocks(3, &mut blocks);
            let v: Vec<(u32, u32)> = blocks.iter().map(|(a, b)| (a.0, b.0)).collect();
            (r.rcv_nxt().0, v)
        };
        assert_eq!(send(&mut r, 5000), (5500, vec![]));
        assert_eq!(send(&mut r, 6000), (5500, vec![(6000, 6500)]));
        assert_eq!(send(&mut r, 7000), (5500, vec![(7000, 7500), (6000, 6500)]));
        assert_eq!(
            send(&mut r, 8000),
            (5500, vec![(8000, 8500), (7000, 7500), (6000, 6500)])
        );
        assert_eq!(send(&mut r, 6500), (5500, vec![(6000, 7500), (8000, 8500)]));
        assert_eq!(send(&mut r, 5500), (7500, vec![(8000, 8500)]));
    }

    #[test]
    fn sack_blocks_most_recent_first() {
        let mut rx = Rx::new(u32::MAX - 100, 1000);
        for at in [100, 300, 500, 700, 900] {
            rx.send(at, at + 10);
        }
        assert_eq!(rx.sack(3), [(900, 910), (700, 710), (500, 510)]);
        // A duplicate inside an old block makes it the newest.
        rx.send(302, 305);
        assert_eq!(rx.sack(3), [(300, 310), (900, 910), (700, 710)]);
        // A merge: the merged block is the newest, the old ones are gone.
        rx.send(510, 700);
        assert_eq!(rx.sack(4), [(500, 710), (300, 310), (900, 910), (100, 110)]);
        // Delivered blocks are not reported; the rest keep their order.
        rx.send(0, 100);
        assert_eq!(rx.nxt(), 110);
        assert_eq!(rx.sack(4), [(500, 710), (300, 310), (900, 910)]);
        // A partial fill moves rcv_nxt, and no block covers it.
        rx.send(110, 305);
        assert_eq!(rx.nxt(), 310);
        assert_eq!(rx.sack(4), [(500, 710), (900, 910)]);
        assert_eq!(rx.sack(0), []);
        assert_eq!(rx.sack(usize::MAX).len(), 2);
        assert!(rx.delivered_ok());
    }

    /// One segment as the test sends it: stream offsets `[from, to)`.
    type Seg = (u32, u32);

    /// The segments the property test sends: the stream cut at `cuts`,
    /// sent in the order of `keys`, some lost (to be sent again at the
    /// end) and some repeated, with `extra` overlapping retransmissions
    /// mixed in.
    fn schedule(
        len: u32,
        cuts: &[u32],
        attrs: &[(u32, u8)],
        extra: &[(u32, u32, u32)],
    ) -> Vec<Seg> {
        let mut edges: Vec<u32> = cuts.iter().map(|c| c % len).chain([0, len]).collect();
        edges.sort_unstable();
        edges.dedup();
        let mut segs: Vec<(u32, u8, Seg)> = edges
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                let (key, fate) = attrs.get(i % attrs.len().max(1)).copied().unwrap_or((0, 9));
                (key.wrapping_add(i as u32), fate, (w[0], w[1]))
            })
            .collect();
        segs.sort_by_key(|s| s.0);
        let mut sent = Vec::new();
        let mut lost = Vec::new();
        for &(_, fate, seg) in &segs {
            match fate % 10 {
                0 | 1 => lost.push(seg),
                2 => sent.extend([seg, seg]),
                _ => sent.push(seg),
            }
        }
        for &(at, from, n) in extra {
            let from = from % len;
            let seg = (from, (from + n).min(len));
            let at = at as usize % (sent.len() + 1);
            sent.insert(at, seg);
        }
        sent.extend(lost);
        sent
    }

    /// A per-byte model of the receiver, in stream offsets.
    struct Model {
        nxt: u32,
        held: BTreeSet<u32>,
        cap: u32,
        /// Every out-of-order segment taken (held or duplicate), oldest first.
        landed: Vec<(u32, u32)>,
    }

    impl Model {
        /// The runs, most recently landed in first: the SACK blocks RFC
        /// 2018 asks for.
        fn sack(&self) -> Vec<(u32, u32)> {
            let mut v: Vec<(usize, (u32, u32))> = self
                .runs()
                .into_iter()
                .map(|(l, r)| {
                    let last = self.landed.iter().rposition(|&(lo, hi)| l <= lo && hi <= r);
                    (last.expect("every run was made by some segment"), (l, r))
                })
                .collect();
            v.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
            v.into_iter().map(|(_, run)| run).collect()
        }

        /// The separate runs held, in sequence order.
        fn runs(&self) -> Vec<(u32, u32)> {
            let mut v: Vec<(u32, u32)> = Vec::new();
            for &b in &self.held {
                match v.last_mut() {
                    Some(r) if r.1 == b => r.1 += 1,
                    _ => v.push((b, b + 1)),
                }
            }
            v
        }

        /// What inserting `[from, to)` should do.
        fn insert(&mut self, from: u32, to: u32) -> Insert {
            let mut want = Insert::default();
            let (lo, hi) = (from.max(self.nxt), to.min(self.nxt + self.cap));
            want.duplicate = (to.min(self.nxt).saturating_sub(from)) as usize;
            want.beyond_window = to.saturating_sub(from.max(self.nxt + self.cap)) as usize;
            if lo >= hi {
                return want;
            }
            let old = self.held.range(lo..hi).count();
            want.duplicate += old;
            if lo == self.nxt {
                self.held.extend(lo..hi);
                while self.held.remove(&self.nxt) {
                    self.nxt += 1;
                }
                want.delivered = (self.nxt - lo) as usize;
                want.joined = want.delivered - (hi - lo) as usize + old;
            } else {
                want.out_of_order = true;
                let touches = self.held.range(lo - 1..hi + 1).next().is_some();
                if !touches && self.runs().len() == MAX_RUNS {
                    want.dropped = (hi - lo) as usize;
                } else {
                    self.held.extend(lo..hi);
                    self.landed.push((lo, hi));
                    want.held = (hi - lo) as usize - old;
                }
            }
            want
        }
    }

    proptest! {
        /// A stream cut into segments, sent out of order with losses and
        /// repeats, then the losses again: each segment does what the
        /// per-byte model says, delivery is always the stream's prefix,
        /// what is held is the stream's bytes and no more than capacity,
        /// and the SACK blocks describe exactly what is held.
        #[test]
        fn any_arrival_order_gives_the_stream(
            start in prop_oneof![any::<u32>(), u32::MAX - 3000..=u32::MAX],
            len in 1u32..3000,
            cap in 1u32..4000,
            cuts in prop::collection::vec(any::<u32>(), 0..300),
            attrs in prop::collection::vec(any::<(u32, u8)>(), 0..50),
            extra in prop::collection::vec((any::<u32>(), any::<u32>(), 1u32..200), 0..20),
        ) {
            let mut rx = Rx::new(start, cap as usize);
            let mut model = Model { nxt: 0, held: BTreeSet::new(), cap, landed: Vec::new() };
            for (from, to) in schedule(len, &cuts, &attrs, &extra) {
                let want = model.insert(from, to);
                let got = rx.send(from, to);
                prop_assert_eq!(got, want, "segment [{}, {})", from, to);
                prop_assert_eq!(rx.nxt(), model.nxt);
                prop_assert!(rx.delivered_ok());
                prop_assert!(rx.r.held() <= cap as usize);
                prop_assert_eq!(rx.runs(), model.runs());
                for (left, data) in rx.r.held_runs() {
                    let at = left.0.wrapping_sub(start);
                    prop_assert_eq!(&data, &bytes(at, at + data.len() as u32));
                }
                // SACK: exactly the runs, most recently landed in first
                // (so the first has the segment just taken), and a
                // shorter list is the start of the longer.
                let all = rx.sack(usize::MAX);
                prop_assert_eq!(&all, &model.sack());
                if got.out_of_order && got.dropped == 0 {
                    let first = all[0];
                    prop_assert!(first.0 <= from.max(model.nxt) && to.min(model.nxt + cap) <= first.1);
                }
                prop_assert_eq!(&rx.sack(4)[..], &all[..all.len().min(4)]);
            }
            // Go back to rcv_nxt and send the rest in order.
            while rx.nxt() < len {
                let from = rx.nxt();
                rx.send(from, len.min(from + cap));
            }
            prop_assert!(rx.delivered_ok());
            prop_assert_eq!(rx.r.held(), 0);
        }
    }
}
