//! A seeded, impaired cell channel for the reassembler tests.
#![allow(dead_code)]

use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::hec::HecReceiver;
use aurora_wire::CellBytes;

/// xorshift64*: small, seeded, reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Per-cell impairment probabilities.
#[derive(Clone, Copy, Debug, Default)]
pub struct Impairments {
    pub loss: f64,
    pub bit_error: f64,
    /// Bit errors restricted to the payload (header untouched).
    pub payload_only: bool,
    pub duplicate: f64,
    pub reorder: f64,
    /// Probability of inserting a cell from another VC relabelled as this one.
    pub misinsert: f64,
}

/// What the channel did, so the test can account for every cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelCounts {
    pub sent: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub inserted: u64,
    pub corrupted: u64,
    pub reordered: u64,
    pub hec_discarded: u64,
    pub delivered: u64,
}

/// Which sent cells (by index) were lost or touched.
pub struct Trace {
    pub counts: ChannelCounts,
    pub lost: Vec<bool>,
    pub touched: Vec<bool>,
}

/// Runs `cells` through the impairments and then the HEC receiver, as a
/// link would. `foreign` supplies cells of another VC for misinsertion;
/// `victim` is the VC they are relabelled as.
pub fn impair(
    cells: &[CellBytes],
    imp: Impairments,
    rng: &mut Rng,
    foreign: &[CellBytes],
    victim: VcId,
) -> (Vec<CellBytes>, Trace) {
    let mut c = ChannelCounts {
        sent: cells.len() as u64,
        ..Default::default()
    };
    let mut lost = vec![false; cells.len()];
    let mut touched = vec![false; cells.len()];
    let mut out: Vec<(CellBytes, Option<usize>)> = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        if !foreign.is_empty() && rng.chance(imp.misinsert) {
            let mut f = foreign[rng.below(foreign.len())];
            let h = Header::parse(&[f[0], f[1], f[2], f[3]], Format::Uni);
            let relabelled = Header {
                vpi: victim.vpi,
                vci: victim.vci,
                ..h
            };
            relabelled.emit(&mut f).unwrap();
            out.push((f, None));
            c.inserted += 1;
            touched[i] = true;
        }
        if rng.chance(imp.loss) {
            lost[i] = true;
            c.lost += 1;
            continue;
        }
        let mut cell = *cell;
        if rng.chance(imp.bit_error) {
            let bit = if imp.payload_only {
                40 + rng.below(48 * 8)
            } else {
                rng.below(53 * 8)
            };
            cell[bit / 8] ^= 0x80 >> (bit % 8);
            c.corrupted += 1;
            touched[i] = true;
        }
        out.push((cell, Some(i)));
        if rng.chance(imp.duplicate) {
            out.push((cell, Some(i)));
            c.duplicated += 1;
            touched[i] = true;
        }
    }
    for k in 1..out.len() {
        if rng.chance(imp.reorder) {
            out.swap(k - 1, k);
            c.reordered += 1;
            for j in [k - 1, k] {
                if let Some(i) = out[j].1 {
                    touched[i] = true;
                }
            }
        }
    }
    let mut hec = HecReceiver::new();
    let mut kept = Vec::with_capacity(out.len());
    for (mut cell, _) in out {
        if hec.check_cell(&mut cell).accepted() {
            kept.push(cell);
        } else {
            c.hec_discarded += 1;
        }
    }
    c.delivered = kept.len() as u64;
    (
        kept,
        Trace {
            counts: c,
            lost,
            touched,
        },
    )
}

/// Checks that each delivered SDU equals a sent one, in sending order.
/// Returns the indices matched.
pub fn match_in_order(sent: &[Vec<u8>], got: &[Vec<u8>]) -> Vec<usize> {
    match_allowing_replays(sent, got, 0)
}

/// As [`match_in_order`], but an SDU of at most `replay_max` bytes may also
/// repeat one already matched: a duplicated (or reordered) one-cell PDU is a
/// valid PDU again, and AAL5 has no sequence number to tell.
pub fn match_allowing_replays(sent: &[Vec<u8>], got: &[Vec<u8>], replay_max: usize) -> Vec<usize> {
    let mut next = 0;
    let mut idx = Vec::new();
    for g in got {
        if replay_max > 0 && g.len() <= replay_max {
            if let Some(old) = sent[..next].iter().rposition(|s| s == g) {
                idx.push(old);
                continue;
            }
        }
        let pos = sent[next..].iter().position(|s| s == g).unwrap_or_else(|| {
            panic!(
                "delivered an SDU of {} bytes that was never sent (or out of order)",
                g.len()
            )
        });
        idx.push(next + pos);
        next += pos + 1;
    }
    idx
}
