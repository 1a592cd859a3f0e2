//! Test-traffic tags: every cell of a traffic host's PDU says which flow and
//! which PDU it belongs to, so a cell dropped anywhere in the network can be
//! charged to the PDU it doomed.
//!
//! A tag is eight bytes: the flow's number (16 bits, big-endian), the PDU's
//! sequence number (40 bits, big-endian) and a CRC-8 over those seven bytes
//! (the HEC polynomial, no coset). It sits at payload offset
//! [`TAG_AT`] of every cell that does not end its PDU, and at
//! [`END_TAG_AT`] of the cell that does (just before the AAL5 trailer), so a
//! tag can be read from any single cell without knowing the PDU's length.
//! In the last cell the tag may fall in the pad; the traffic host writes it
//! there and corrects the CRC-32 (CRC is linear, so the correction is the
//! CRC of the change alone). The bytes of the SDU under a tag are part of
//! the pattern a receiver checks, so tags cost no checking of their own.

use aurora_wire::{CellBytes, HEADER_LEN};

/// Bytes of a tag.
pub const TAG_LEN: usize = 8;
/// Where a tag sits in the payload of a cell that does not end its PDU.
pub const TAG_AT: usize = 0;
/// Where a tag sits in the payload of the cell that ends its PDU.
pub const END_TAG_AT: usize = 32;
/// Largest sequence number a tag holds.
pub const MAX_SEQ: u64 = (1 << 40) - 1;

/// Which flow and PDU a cell belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag {
    /// The flow's number, unique in a network.
    pub flow: u16,
    /// The PDU's sequence number in its flow.
    pub seq: u64,
}

/// CRC-8 table for the HEC polynomial (x^8 + x^2 + x + 1), no coset.
const CRC8: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u8;
        let mut k = 0;
        while k < 8 {
            c = if c & 0x80 != 0 {
                (c << 1) ^ 0x07
            } else {
                c << 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

fn crc8(b: &[u8]) -> u8 {
    b.iter().fold(0u8, |c, &x| CRC8[usize::from(c ^ x)])
}

impl Tag {
    /// The tag's eight bytes.
    pub fn bytes(self) -> [u8; TAG_LEN] {
        let mut b = [0u8; TAG_LEN];
        b[..2].copy_from_slice(&self.flow.to_be_bytes());
        b[2..7].copy_from_slice(&(self.seq & MAX_SEQ).to_be_bytes()[3..]);
        b[7] = crc8(&b[..7]);
        b
    }

    /// Reads a tag from eight bytes; `None` when the check byte is wrong.
    pub fn parse(b: &[u8]) -> Option<Tag> {
        let b: &[u8; TAG_LEN] = b.get(..TAG_LEN)?.try_into().ok()?;
        if crc8(&b[..7]) != b[7] {
            return None;
        }
        let mut s = [0u8; 8];
        s[3..].copy_from_slice(&b[2..7]);
        Some(Tag {
            flow: u16::from_be_bytes([b[0], b[1]]),
            seq: u64::from_be_bytes(s),
        })
    }

    /// Reads the tag of a whole cell (header included), wherever the cell's
    /// place in its PDU puts it. `None` for a cell with no readable tag.
    pub fn of_cell(c: &CellBytes) -> Option<Tag> {
        let at = if c[3] & 0x02 != 0 { END_TAG_AT } else { TAG_AT };
        Tag::parse(&c[HEADER_LEN + at..HEADER_LEN + at + TAG_LEN])
    }
}

/// Writes `tag` into the SDU bytes of a PDU of `sdu.len()` bytes wherever a
/// cell's tag falls inside the SDU. Returns the bytes of the last cell's tag
/// that fall in the pad (the first `k` bytes of the tag are in the SDU),
/// as `k`: the sender puts the rest there after segmenting.
pub fn write_sdu(tag: Tag, sdu: &mut [u8]) -> usize {
    let b = tag.bytes();
    let cells = aurora_wire::aal5::cells_for(sdu.len());
    for i in 0..cells - 1 {
        let at = 48 * i + TAG_AT;
        sdu[at..at + TAG_LEN].copy_from_slice(&b);
    }
    let at = 48 * (cells - 1) + END_TAG_AT;
    let k = sdu.len().saturating_sub(at).min(TAG_LEN);
    if k > 0 {
        sdu[at..at + k].copy_from_slice(&b[..k]);
    }
    k
}

/// Puts the part of `tag` that falls in the pad (from byte `k` of the tag
/// on) into the last cell of a segmented PDU, and corrects its CRC-32.
pub fn patch_last_cell(tag: Tag, k: usize, last: &mut CellBytes) {
    if k >= TAG_LEN {
        return;
    }
    let b = tag.bytes();
    // The change, from the first patched byte to the CRC field.
    let start = HEADER_LEN + END_TAG_AT + k;
    let crc_at = HEADER_LEN + 48 - 4;
    let mut delta = [0u8; 48];
    let span = crc_at - start;
    for (j, x) in b[k..].iter().enumerate() {
        delta[j] = last[start + j] ^ x;
        last[start + j] = *x;
    }
    // CRC-32/BZIP2 is affine: crc(m ^ d) = crc(m) ^ crc0(d), where crc0
    // starts from zero and is not inverted at the end.
    let fix = crc0(&delta[..span]);
    let old = u32::from_be_bytes([
        last[crc_at],
        last[crc_at + 1],
        last[crc_at + 2],
        last[crc_at + 3],
    ]);
    last[crc_at..crc_at + 4].copy_from_slice(&(old ^ fix).to_be_bytes());
}

/// The cells of one tagged PDU of `len` bytes (zeros under its tags) on
/// `vc`, as a traffic host sends it, for tests and tools that want test
/// traffic without one; `None` for a VC a UNI header cannot hold.
pub fn pdu_cells(tag: Tag, len: u16, vc: aurora_wire::cell::VcId) -> Option<Vec<CellBytes>> {
    let mut tx = aurora_sar::Aal5Tx::new(vc, aurora_wire::cell::Format::Uni).ok()?;
    let mut sdu = vec![0u8; usize::from(len)];
    let k = write_sdu(tag, &mut sdu);
    let mut cells = vec![[0u8; 53]; aurora_wire::aal5::cells_for(sdu.len())];
    let n = tx
        .segment_into(&sdu, aurora_sar::PduOptions::default(), &mut cells)
        .ok()?;
    cells.truncate(n);
    patch_last_cell(tag, k, cells.last_mut()?);
    Some(cells)
}

/// CRC-32 (polynomial 0x04C11DB7, MSB first) with a zero start and no final
/// inversion.
fn crc0(b: &[u8]) -> u32 {
    let mut c = 0u32;
    for &x in b {
        c ^= u32::from(x) << 24;
        for _ in 0..8 {
            c = if c & 0x8000_0000 != 0 {
                (c << 1) ^ 0x04C1_1DB7
            } else {
                c << 1
            };
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_sar::{Aal5Rx, Aal5Tx, PduOptions, RxConfig, Status, VcConfig};
    use aurora_wire::cell::{Format, VcId};

    #[test]
    fn known_answer() {
        let t = Tag {
            flow: 0x0102,
            seq: 0x03_0405_0607,
        };
        let b = t.bytes();
        assert_eq!(&b[..7], &[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(Tag::parse(&b), Some(t));
        for bit in 0..64 {
            let mut x = b;
            x[bit / 8] ^= 0x80 >> (bit % 8);
            assert_eq!(Tag::parse(&x), None, "bit {bit}");
        }
    }

    #[test]
    fn every_cell_of_every_length_carries_its_tag_and_the_pdu_checks() {
        let vc = VcId::new(0, 42);
        let mut tx = Aal5Tx::new(vc, Format::Uni).unwrap();
        let mut rx = Aal5Rx::new(RxConfig::default());
        rx.open_vc(vc, VcConfig::default()).unwrap();
        for len in 8..400usize {
            let tag = Tag {
                flow: 7,
                seq: len as u64 * 1000,
            };
            let mut sdu: Vec<u8> = (0..len).map(|i| (i * 13) as u8).collect();
            let k = write_sdu(tag, &mut sdu);
            let mut cells = vec![[0u8; 53]; aurora_wire::aal5::cells_for(len)];
            let n = tx
                .segment_into(&sdu, PduOptions::default(), &mut cells)
                .unwrap();
            patch_last_cell(tag, k, &mut cells[n - 1]);
            for c in &cells[..n] {
                assert_eq!(Tag::of_cell(c), Some(tag), "len {len}");
            }
            let mut got = None;
            rx.push(aurora_time::Instant::ZERO, &cells[..n], &mut |d| {
                got = Some((d.status, d.sdu().to_vec()))
            });
            let (status, bytes) = got.expect("delivered");
            assert_eq!(status, Status::Intact, "len {len}");
            assert_eq!(bytes, sdu);
        }
    }
}
