//! TCP reassembly fed segments cut anywhere from a known stream, at any
//! distance from rcv_nxt, with any receive buffer. What comes out in
//! order must be the stream, the held bytes must stay within the buffer
//! and within the run limit, every byte of every segment must be
//! accounted for, and the SACK blocks must describe exactly what is held.
#![no_main]
use aurora_tcp::reasm::{Reassembly, MAX_RUNS};
use aurora_tcp::Seq;
use libfuzzer_sys::fuzz_target;

/// Byte `i` of the stream; the offset is taken modulo 2^32, like sequence numbers.
fn byte(i: u32) -> u8 {
    (i.wrapping_mul(0x9E37_79B1) >> 24) as u8
}

/// One receiver and the stream offset of its rcv_nxt.
struct Rx {
    base: Seq,
    cap: usize,
    r: Reassembly,
    got: u32,
    seg: Vec<u8>,
    blocks: Vec<(Seq, Seq)>,
    sorted: Vec<(Seq, Seq)>,
    few: Vec<(Seq, Seq)>,
}

impl Rx {
    /// Inserts stream bytes `[off, off + len)` and checks everything.
    fn step(&mut self, off: u32, len: u32) {
        let Rx { base, cap, .. } = *self;
        self.seg.clear();
        self.seg.extend((0..len).map(|k| byte(off.wrapping_add(k))));
        let held_before = self.r.held();
        let old = self.got;
        let mut next = old;
        let ins = self.r.insert(base + off, &self.seg, &mut |d| {
            for &b in d {
                assert_eq!(b, byte(next), "delivered a wrong byte");
                next = next.wrapping_add(1);
            }
        });
        assert_eq!(ins.delivered, next.wrapping_sub(old) as usize);
        self.got = next;
        let nxt = self.r.rcv_nxt();
        assert_eq!(nxt, base + next);
        assert_eq!(
            self.seg.len(),
            ins.delivered - ins.joined + ins.held + ins.duplicate + ins.beyond_window + ins.dropped
        );
        assert_eq!(self.r.held(), held_before + ins.held - ins.joined);
        assert!(self.r.held() <= cap);
        // Where the segment lies once trimmed, relative to the old rcv_nxt.
        let rel = i64::from(off.wrapping_sub(old) as i32);
        let (lo, hi) = (rel.max(0), (rel + i64::from(len)).min(cap as i64));
        assert_eq!(ins.out_of_order, lo > 0 && lo < hi);

        // The SACK blocks: at most MAX_RUNS, above rcv_nxt, inside the
        // window, neither overlapping nor touching, adding up to what is held.
        self.r.sack_blocks(usize::MAX, &mut self.blocks);
        assert!(self.blocks.len() <= MAX_RUNS);
        self.sorted.clone_from(&self.blocks);
        self.sorted
            .sort_unstable_by_key(|&(left, _)| left.diff(nxt));
        let mut sum = 0;
        let mut last = nxt;
        for &(left, right) in &self.sorted {
            assert!(left.diff(last) > 0 && right.diff(left) > 0, "blocks meet");
            assert!(right.diff(nxt) as usize <= cap);
            sum += right.diff(left) as usize;
            last = right;
        }
        assert_eq!(sum, self.r.held());
        self.r.sack_blocks(3, &mut self.few);
        assert_eq!(self.few[..], self.blocks[..self.blocks.len().min(3)]);
        // A segment just held (or found already held) is in the first block.
        if ins.out_of_order && ins.dropped == 0 {
            let (left, right) = self.blocks[0];
            let (lo, hi) = (base + old + lo as u32, base + old + hi as u32);
            assert!(left.diff(lo) <= 0 && right.diff(hi) >= 0);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((head, mut rest)) = data.split_first_chunk::<6>() else {
        return;
    };
    let base = Seq(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
    let cap = usize::from(u16::from_le_bytes([head[4], head[5]]) % 4096);
    let mut rx = Rx {
        base,
        cap,
        r: Reassembly::new(base, cap),
        got: 0,
        seg: Vec::new(),
        blocks: Vec::new(),
        sorted: Vec::new(),
        few: Vec::new(),
    };
    let window = cap as u32;
    while let Some((op, tail)) = rest.split_first_chunk::<4>() {
        rest = tail;
        let x = u32::from(u16::from_le_bytes([op[0], op[1]]));
        let got = rx.got;
        // Somewhere from just before rcv_nxt to just past the right edge.
        let near = |slack: u32| {
            got.wrapping_add(x % (window + 2 * slack))
                .wrapping_sub(slack)
        };
        match op[3] >> 5 {
            // Tiny segments, which make many runs.
            0 | 1 => rx.step(near(32), u32::from(op[2] & 0x0F)),
            // Longer ones.
            2 | 3 => rx.step(near(256), u32::from(op[2]) | (u32::from(op[3] & 0x0F) << 8)),
            // Anywhere in sequence space.
            4 => rx.step(
                got.wrapping_add((x << 16) | (u32::from(op[2]) << 8)),
                u32::from(op[3] & 0x1F),
            ),
            // In order from rcv_nxt.
            5 => rx.step(got, x % 1500),
            // A comb of up to 255 short segments with gaps between,
            // forwards or backwards: the way to the run limit.
            _ => {
                let len = u32::from(op[3] & 0x03) + 1;
                let pitch = len + 1 + u32::from((op[3] >> 2) & 0x03);
                let start = near(32);
                for k in 0..u32::from(op[2]) {
                    let k = if op[3] & 0x20 == 0 {
                        k
                    } else {
                        u32::from(op[2]) - 1 - k
                    };
                    rx.step(start.wrapping_add(k * pitch), len);
                }
            }
        }
    }
    // Fill the whole window in order: everything held comes out.
    let at = rx.got;
    rx.step(at, window);
    assert_eq!(rx.r.held(), 0);
});
