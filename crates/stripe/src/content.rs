//! What a striping host's logical flow carries, so that the receiver can
//! tell every unit and every PDU apart and check its bytes.
//!
//! # PDU and IP units
//!
//! PDU `p` of a flow is an SDU of [`sdu_len`]`(p)` bytes:
//!
//! ```text
//!  PDU units:  | stamp p (8) | fill(p, 8..)            |
//!  IP units:   | IPv4 header (20) | stamp p (8) | fill  |
//! ```
//!
//! The stamp is `p` as a big-endian u64. The fill byte at offset `k` of the
//! SDU is [`fill`]`(p, k)`. The IPv4 header is a plain 20-byte header
//! (protocol 253, "for experimentation", from 198.18.0.1 to 198.18.0.2 in
//! the benchmarking range, TTL 64, a correct checksum, identification the
//! low 16 bits of `p`). The receiver rebuilds the SDU from the stamp it reads
//! and compares every byte.
//!
//! # Cell units
//!
//! The logical VC carries AAL5-style PDUs over the data bytes of its cell
//! units: `d` bytes per unit (48, or 46 with sequence numbers). A PDU's
//! CPCS-PDU is its SDU, a pad, and AAL5's 8-byte trailer (UU 0, CPI 0, the
//! SDU's length, CRC-32/BZIP2 over everything before the CRC), padded to a
//! whole number of `d`-byte chunks; the chunk that ends it is sent in a cell
//! with the AUU bit set. With `d = 48` this is exactly AAL5, so the cells
//! of a striped VC look like AAL5 cells of the logical VC to anything that
//! reads them (a capture, say).
//!
//! Every chunk starts with the 8-byte stamp of its own unit index (the
//! striper numbers units from 0 across the flow), written into the SDU, or
//! into the pad in a PDU's last chunk (a chunk always has `d − 8 ≥ 38`
//! bytes before the trailer). The first chunk's bytes 8..16 hold the PDU's
//! number. So each delivered cell says where it belongs in the sent stream
//! (the receiver measures reordering on it, whatever the sync method), and
//! each PDU's bytes are fixed by its first unit index and its number.
//! Cell-unit SDUs are at least [`MIN_CELL_SDU`] bytes so both stamps fit.

use aurora_wire::aal5::TRAILER_LEN;
use aurora_wire::crc;

/// Bytes of a stamp.
pub const STAMP_LEN: usize = 8;
/// Bytes of the IPv4 header at the front of an IP unit.
pub const IP_HEADER_LEN: usize = 20;
/// The smallest SDU of a cell-unit flow: room for the unit and PDU stamps.
pub const MIN_CELL_SDU: usize = 2 * STAMP_LEN;
/// The smallest SDU of a PDU-unit flow.
pub const MIN_PDU_SDU: usize = STAMP_LEN;
/// The smallest IP unit: header and stamp.
pub const MIN_IP_SDU: usize = IP_HEADER_LEN + STAMP_LEN;

/// A 64-bit mix (splitmix64's finaliser): fill bytes and sizes from numbers.
#[inline]
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The fill byte at offset `k` of a unit stamped `stamp`.
#[inline]
pub fn fill(stamp: u64, k: usize) -> u8 {
    (stamp.wrapping_mul(31).wrapping_add(k as u64 * 7) ^ (stamp >> 8)) as u8
}

/// The SDU length of PDU `p` of a flow whose SDUs run from `min` to `max`
/// bytes: `max` when they are equal, else spread over the range by `p`.
pub fn sdu_len(p: u64, min: usize, max: usize) -> usize {
    if max <= min {
        return min;
    }
    let span = (max - min + 1) as u64;
    min + (mix(p) % span) as usize
}

/// Reads a stamp from the front of `b`.
#[inline]
pub fn stamp_of(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(..STAMP_LEN)?.try_into().ok()?))
}

/// The IPv4 header of IP unit `p`, `len` bytes long in all.
pub fn ip_header(p: u64, len: usize) -> [u8; IP_HEADER_LEN] {
    let mut h = [0u8; IP_HEADER_LEN];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    h[4..6].copy_from_slice(&(p as u16).to_be_bytes());
    h[6] = 0x40; // don't fragment
    h[8] = 64;
    h[9] = 253;
    h[12..16].copy_from_slice(&[198, 18, 0, 1]);
    h[16..20].copy_from_slice(&[198, 18, 0, 2]);
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    h
}

/// The SDU of PDU (or IP) unit `p`, `len` bytes, into `out`. `ip` puts an
/// IPv4 header in front. `len` must be at least [`MIN_PDU_SDU`] (or
/// [`MIN_IP_SDU`] with `ip`).
pub fn pdu_sdu(p: u64, len: usize, ip: bool, out: &mut Vec<u8>) {
    out.clear();
    let at = if ip {
        out.extend_from_slice(&ip_header(p, len));
        IP_HEADER_LEN
    } else {
        0
    };
    out.extend_from_slice(&p.to_be_bytes());
    out.extend((at + STAMP_LEN..len).map(|k| fill(p, k)));
    out.truncate(len);
}

/// What is wrong with a unit or PDU the receiver was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// The CRC-32 of a cell-unit PDU failed (a cell of it was lost, out of
    /// order, or damaged).
    Crc,
    /// The length field does not fit the chunks received (cells lost or
    /// run together), or an aborted PDU.
    Length,
    /// Longer than the largest PDU the flow sends: given up without
    /// waiting for its end.
    Oversize,
    /// The bytes are not those the stamp calls for.
    Content,
}

impl Fault {
    /// Every fault, in counter order.
    pub const ALL: [Fault; 4] = [Fault::Crc, Fault::Length, Fault::Oversize, Fault::Content];

    /// A short snake-case name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Fault::Crc => "crc",
            Fault::Length => "length",
            Fault::Oversize => "oversize",
            Fault::Content => "content",
        }
    }
}

/// Checks a delivered PDU or IP unit against the flow's SDUs of `min` to
/// `max` bytes; its stamp when it is intact.
pub fn check_pdu(
    sdu: &[u8],
    min: usize,
    max: usize,
    ip: bool,
    scratch: &mut Vec<u8>,
) -> Result<u64, Fault> {
    let at = if ip { IP_HEADER_LEN } else { 0 };
    let p = sdu.get(at..).and_then(stamp_of).ok_or(Fault::Content)?;
    if sdu.len() != sdu_len(p, min, max) {
        return Err(Fault::Content);
    }
    pdu_sdu(p, sdu.len(), ip, scratch);
    if scratch[..] != *sdu {
        return Err(Fault::Content);
    }
    Ok(p)
}

/// Chunks of `d` bytes needed for an SDU of `len` bytes.
pub const fn chunks_for(len: usize, d: usize) -> usize {
    (len + TRAILER_LEN).div_ceil(d)
}

/// The CPCS-PDU of cell-unit PDU `p`, `len` bytes of SDU, its first chunk
/// to be unit `u0`, cut into `d`-byte chunks, into `out`; returns the
/// number of chunks. `len` must be at least [`MIN_CELL_SDU`] and `d` at
/// least 16.
pub fn cell_pdu(u0: u64, p: u64, len: usize, d: usize, out: &mut Vec<u8>) -> usize {
    let n = chunks_for(len, d);
    let total = n * d;
    out.clear();
    out.resize(total, 0);
    for (k, b) in out[..total - TRAILER_LEN].iter_mut().enumerate() {
        let (j, r) = (k / d, k % d);
        let u = u0 + j as u64;
        *b = if r < STAMP_LEN {
            u.to_be_bytes()[r]
        } else if j == 0 && r < 2 * STAMP_LEN {
            p.to_be_bytes()[r - STAMP_LEN]
        } else {
            fill(u, r)
        };
    }
    // The pad is the stamps and fill of the last chunk, as written; then
    // the trailer.
    let t = total - TRAILER_LEN;
    out[t] = 0;
    out[t + 1] = 0;
    out[t + 2..t + 4].copy_from_slice(&(len as u16).to_be_bytes());
    let c = crc::crc32(&out[..total - 4]);
    out[total - 4..].copy_from_slice(&c.to_be_bytes());
    n
}

/// A receiver's reassembly of cell-unit PDUs from the chunks delivered, in
/// the order delivered, bounded by the largest PDU the flow sends.
#[derive(Debug)]
pub struct Deframer {
    d: usize,
    max_total: usize,
    buf: Vec<u8>,
    /// Past the bound: skipping to the end of this PDU.
    skipping: bool,
    /// `buf` holds a PDU already handed out.
    finished: bool,
}

impl Deframer {
    /// A deframer of `d`-byte chunks for SDUs of at most `max_sdu` bytes.
    pub fn new(d: usize, max_sdu: usize) -> Deframer {
        Deframer {
            d,
            max_total: chunks_for(max_sdu, d) * d,
            buf: Vec::new(),
            skipping: false,
            finished: false,
        }
    }

    /// Bytes held (a PDU in progress).
    pub fn held(&self) -> usize {
        if self.finished {
            0
        } else {
            self.buf.len()
        }
    }

    /// Takes the next chunk; `end` when its cell had the AUU bit. At the
    /// end of a PDU returns its SDU (a view into the deframer, good until
    /// the next call) or what is wrong with it; `None` before the end. An
    /// over-long PDU is reported once, when it passes the bound, and the
    /// rest of it up to its end is ignored.
    pub fn push(&mut self, chunk: &[u8], end: bool) -> Option<Result<&[u8], Fault>> {
        if self.finished {
            self.buf.clear();
            self.finished = false;
        }
        if self.skipping {
            self.skipping = !end;
            return None;
        }
        if self.buf.len() + chunk.len() > self.max_total {
            self.buf.clear();
            self.skipping = !end;
            return Some(Err(Fault::Oversize));
        }
        self.buf.extend_from_slice(chunk);
        if !end {
            return None;
        }
        self.finished = true;
        Some(self.check().map(|len| &self.buf[..len]))
    }

    fn check(&self) -> Result<usize, Fault> {
        let (d, total) = (self.d, self.buf.len());
        if total == 0 || total % d != 0 || total < TRAILER_LEN {
            return Err(Fault::Length);
        }
        let c = u32::from_be_bytes(self.buf[total - 4..total].try_into().expect("4 bytes"));
        if crc::crc32(&self.buf[..total - 4]) != c {
            return Err(Fault::Crc);
        }
        let len = usize::from(u16::from_be_bytes([
            self.buf[total - 6],
            self.buf[total - 5],
        ]));
        if chunks_for(len, d) * d != total || (len == 0 && total > d) {
            return Err(Fault::Length);
        }
        Ok(len)
    }
}

/// Checks a cell-unit PDU's SDU, delivered by a [`Deframer`] of `d`-byte
/// chunks, against a flow of SDUs of `min` to `max` bytes; its PDU number
/// and first unit index when intact.
pub fn check_cell_pdu(
    sdu: &[u8],
    d: usize,
    min: usize,
    max: usize,
    scratch: &mut Vec<u8>,
) -> Result<(u64, u64), Fault> {
    let u0 = stamp_of(sdu).ok_or(Fault::Content)?;
    let p = sdu
        .get(STAMP_LEN..)
        .and_then(stamp_of)
        .ok_or(Fault::Content)?;
    if sdu.len() != sdu_len(p, min, max)
        || u0.checked_add(chunks_for(sdu.len(), d) as u64).is_none()
    {
        return Err(Fault::Content);
    }
    cell_pdu(u0, p, sdu.len(), d, scratch);
    if scratch[..sdu.len()] != *sdu {
        return Err(Fault::Content);
    }
    Ok((p, u0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_pdus_are_aal5_at_48_and_deframe_at_46() {
        let mut buf = Vec::new();
        let mut scratch = Vec::new();
        for len in [16, 30, 40, 41, 100, 9180] {
            let n = cell_pdu(1000, 7, len, 48, &mut buf);
            assert_eq!(n, aurora_wire::aal5::cells_for(len));
            let (t, sdu) = aurora_wire::aal5::decode(&buf).unwrap();
            assert_eq!(usize::from(t.length), len);
            // Every chunk starts with its own unit index.
            for j in 0..n {
                assert_eq!(stamp_of(&buf[j * 48..]), Some(1000 + j as u64));
            }
            assert_eq!(
                check_cell_pdu(sdu, 48, 16, 9180, &mut scratch),
                Err(Fault::Content)
            );
            assert_eq!(
                check_cell_pdu(sdu, 48, len, len, &mut scratch),
                Ok((7, 1000))
            );
            for d in [46, 48] {
                let n = cell_pdu(5, 3, len, d, &mut buf);
                let mut de = Deframer::new(d, 9180);
                let chunks: Vec<Vec<u8>> = buf.chunks(d).map(<[u8]>::to_vec).collect();
                for (j, c) in chunks.iter().enumerate() {
                    let got = de.push(c, j + 1 == n).map(|r| r.map(<[u8]>::to_vec));
                    if j + 1 < n {
                        assert!(got.is_none());
                    } else {
                        let sdu = got.unwrap().unwrap();
                        assert_eq!(check_cell_pdu(&sdu, d, len, len, &mut scratch), Ok((3, 5)));
                    }
                }
                assert_eq!(de.held(), 0);
            }
        }
    }

    #[test]
    fn deframer_names_what_is_wrong_and_stays_bounded() {
        let mut buf = Vec::new();
        let n = cell_pdu(0, 0, 200, 48, &mut buf);
        let mut de = Deframer::new(48, 200);
        // A chunk lost from the middle: the CRC fails.
        for j in (0..n).filter(|&j| j != 1) {
            let r = de.push(&buf[j * 48..(j + 1) * 48], j + 1 == n);
            if j + 1 == n {
                assert_eq!(r.map(|r| r.map(<[u8]>::len)), Some(Err(Fault::Crc)));
            }
        }
        // Two PDUs run together (the first's end lost): too long for the bound.
        let mut faults = Vec::new();
        for _ in 0..2 {
            for j in 0..n {
                if let Some(r) =
                    de.push(&buf[j * 48..(j + 1) * 48], j + 1 == n && faults.len() == 1)
                {
                    faults.push(r.map(<[u8]>::len));
                }
            }
        }
        assert_eq!(faults, [Err(Fault::Oversize)]);
        assert!(de.held() <= chunks_for(200, 48) * 48);
        // After the skipped end, a good PDU goes through.
        for j in 0..n {
            if let Some(r) = de.push(&buf[j * 48..(j + 1) * 48], j + 1 == n) {
                assert_eq!(r.map(<[u8]>::len), Ok(200));
            }
        }
    }

    #[test]
    fn pdu_and_ip_units_check_every_byte() {
        let (mut a, mut s) = (Vec::new(), Vec::new());
        for ip in [false, true] {
            let len = sdu_len(42, 28, 1500);
            assert!((28..=1500).contains(&len));
            pdu_sdu(42, len, ip, &mut a);
            assert_eq!(a.len(), len);
            assert_eq!(check_pdu(&a, 28, 1500, ip, &mut s), Ok(42));
            a[len / 2] ^= 1;
            assert_eq!(check_pdu(&a, 28, 1500, ip, &mut s), Err(Fault::Content));
        }
        // The IPv4 header's checksum verifies to zero.
        let h = ip_header(9, 100);
        let mut sum: u32 = h
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        assert_eq!(sum, 0xFFFF);
    }
}
