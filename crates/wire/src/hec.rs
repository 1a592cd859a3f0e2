//! The receiver's HEC algorithm (ITU-T I.432.1).
//!
//! The receiver has two modes. In **correction** mode a header with a
//! single-bit error is repaired and passed on, and the receiver moves to
//! **detection** mode; a header with a multi-bit error is discarded and the
//! receiver also moves to detection mode. In detection mode every errored
//! header is discarded. The first error-free header returns the receiver to
//! correction mode. Correcting only when the previous header was clean keeps
//! burst errors from being "corrected" into misrouted cells.

use crate::crc;
use crate::CellBytes;

/// The receiver's mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HecMode {
    /// Single-bit errors are corrected.
    #[default]
    Correction,
    /// Every errored header is discarded.
    Detection,
}

/// What the receiver did with one header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HecVerdict {
    /// The header was intact.
    Valid,
    /// A single-bit error was corrected in place; the bit position is given
    /// (0 = MSB of byte 0, 39 = LSB of the HEC byte).
    Corrected(u8),
    /// The header was errored and the cell must be dropped.
    Discarded,
}

impl HecVerdict {
    /// True when the cell may be passed on.
    pub fn accepted(self) -> bool {
        !matches!(self, HecVerdict::Discarded)
    }
}

/// Counters kept by a [`HecReceiver`]. `valid + corrected + discarded` is the
/// number of headers seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HecCounters {
    /// Headers that were intact.
    pub valid: u64,
    /// Headers repaired (single-bit errors in correction mode).
    pub corrected: u64,
    /// Cells discarded for an errored header.
    pub discarded: u64,
}

/// The two-mode HEC receiver. One per incoming link.
#[derive(Clone, Debug)]
pub struct HecReceiver {
    mode: HecMode,
    counters: HecCounters,
    /// The last two distinct headers that checked, packed into the low 40
    /// bits (a VC's cells repeat its header, with the end-of-PDU header in
    /// between; a header equal to a valid one is valid, so no CRC is
    /// needed). `u64::MAX` before the first.
    last_valid: [u64; 2],
}

/// The five header bytes as one integer (low 40 bits).
#[inline(always)]
fn pack(first4: [u8; 4], hec: u8) -> u64 {
    u64::from(u32::from_le_bytes(first4)) | (u64::from(hec) << 32)
}

/// A cell's five header bytes packed as [`HeaderCheck::known_valid`] gives them.
#[inline(always)]
pub fn pack_header(cell: &CellBytes) -> u64 {
    pack([cell[0], cell[1], cell[2], cell[3]], cell[4])
}

/// A header check that a consumer may fold into its own loop: cells whose
/// packed header equals one of `known_valid()` are valid without a CRC (the
/// consumer counts them with `note_valid`); any other cell goes through
/// `check`, which corrects or rejects it as the receiver's mode says.
pub trait HeaderCheck {
    /// Two packed headers known to be valid (`u64::MAX` for none).
    fn known_valid(&self) -> [u64; 2];
    /// Records `n` cells the consumer matched against `known_valid`.
    fn note_valid(&mut self, n: u64);
    /// Checks one cell in place; true when it may be used.
    fn check(&mut self, cell: &mut CellBytes) -> bool;
}

impl HeaderCheck for HecReceiver {
    fn known_valid(&self) -> [u64; 2] {
        self.last_valid
    }
    fn note_valid(&mut self, n: u64) {
        if n > 0 {
            self.counters.valid += n;
            self.mode = HecMode::Correction;
        }
    }
    fn check(&mut self, cell: &mut CellBytes) -> bool {
        self.check_cell(cell).accepted()
    }
}

impl Default for HecReceiver {
    fn default() -> Self {
        HecReceiver {
            mode: HecMode::Correction,
            counters: HecCounters::default(),
            last_valid: [u64::MAX; 2],
        }
    }
}

impl HecReceiver {
    /// A receiver in correction mode with zero counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current mode.
    pub fn mode(&self) -> HecMode {
        self.mode
    }

    /// The counters so far.
    pub fn counters(&self) -> HecCounters {
        self.counters
    }

    /// Checks (and, where allowed, corrects) the five header bytes in place.
    #[inline]
    pub fn check_header(&mut self, header: &mut [u8; 5]) -> HecVerdict {
        let packed = pack(header[..4].try_into().expect("4 bytes"), header[4]);
        if packed == self.last_valid[0] || packed == self.last_valid[1] {
            return self.valid(packed);
        }
        self.check_slow(header, packed)
    }

    #[inline]
    fn valid(&mut self, packed: u64) -> HecVerdict {
        if packed != self.last_valid[0] {
            self.last_valid = [packed, self.last_valid[0]];
        }
        self.mode = HecMode::Correction;
        self.counters.valid += 1;
        HecVerdict::Valid
    }

    fn check_slow(&mut self, header: &mut [u8; 5], packed: u64) -> HecVerdict {
        let syndrome = crc::hec_syndrome(header);
        if syndrome == 0 {
            return self.valid(packed);
        }
        let was = self.mode;
        self.mode = HecMode::Detection;
        if was == HecMode::Correction {
            if let Some(bit) = crc::hec_error_bit(syndrome) {
                header[usize::from(bit / 8)] ^= 0x80 >> (bit % 8);
                self.counters.corrected += 1;
                return HecVerdict::Corrected(bit);
            }
        }
        self.counters.discarded += 1;
        HecVerdict::Discarded
    }

    /// Checks the header of a whole cell in place.
    #[inline]
    pub fn check_cell(&mut self, cell: &mut CellBytes) -> HecVerdict {
        // Read the header straight from the cell: a run of cells on one VC
        // hits the cached header and never computes a CRC.
        let packed = pack([cell[0], cell[1], cell[2], cell[3]], cell[4]);
        if packed == self.last_valid[0] || packed == self.last_valid[1] {
            return self.valid(packed);
        }
        let mut h = [cell[0], cell[1], cell[2], cell[3], cell[4]];
        let v = self.check_slow(&mut h, packed);
        if let HecVerdict::Corrected(_) = v {
            cell[..5].copy_from_slice(&h);
        }
        v
    }

    /// Checks a batch of cells in place, keeping the accepted ones (in order)
    /// at the front of the slice. Returns how many were accepted.
    pub fn filter_batch(&mut self, cells: &mut [CellBytes]) -> usize {
        let mut kept = 0;
        for i in 0..cells.len() {
            if self.check_cell(&mut cells[i]).accepted() {
                cells.swap(kept, i);
                kept += 1;
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{Header, VcId};

    fn header() -> [u8; 5] {
        Header::data(VcId::new(3, 1234)).to_bytes().unwrap()
    }

    #[test]
    fn corrects_every_single_bit_error_in_correction_mode() {
        let good = header();
        for bit in 0..40u8 {
            let mut rx = HecReceiver::new();
            let mut h = good;
            h[usize::from(bit / 8)] ^= 0x80 >> (bit % 8);
            assert_eq!(rx.check_header(&mut h), HecVerdict::Corrected(bit));
            assert_eq!(h, good);
            assert_eq!(rx.mode(), HecMode::Detection);
        }
    }

    #[test]
    fn detection_mode_discards_until_a_clean_header() {
        let good = header();
        let mut rx = HecReceiver::new();
        let mut h = good;
        h[1] ^= 0x04;
        assert!(matches!(rx.check_header(&mut h), HecVerdict::Corrected(_)));
        // A second single-bit error straight after is discarded.
        let mut h = good;
        h[2] ^= 0x01;
        assert_eq!(rx.check_header(&mut h), HecVerdict::Discarded);
        assert_eq!(rx.mode(), HecMode::Detection);
        // A clean header restores correction mode.
        let mut h = good;
        assert_eq!(rx.check_header(&mut h), HecVerdict::Valid);
        assert_eq!(rx.mode(), HecMode::Correction);
        // A multi-bit error is discarded even in correction mode.
        let mut h = good;
        h[0] ^= 0x03;
        assert_eq!(rx.check_header(&mut h), HecVerdict::Discarded);
        let c = rx.counters();
        assert_eq!((c.valid, c.corrected, c.discarded), (1, 1, 2));
    }

    #[test]
    fn batch_filter_keeps_order() {
        let mut cells = [[0u8; 53]; 4];
        for (i, c) in cells.iter_mut().enumerate() {
            let h = Header::data(VcId::new(0, 100 + i as u16))
                .to_bytes()
                .unwrap();
            c[..5].copy_from_slice(&h);
            c[5] = i as u8;
        }
        cells[1][0] ^= 0x30; // two-bit error: dropped
        let mut rx = HecReceiver::new();
        let n = rx.filter_batch(&mut cells);
        assert_eq!(n, 3);
        assert_eq!([cells[0][5], cells[1][5], cells[2][5]], [0, 2, 3]);
    }
}
