//! Captures Wireshark and tshark decode: pcap files with LINKTYPE_ERF (197).
//!
//! Every cell is written as an ERF type 3 record (the four header bytes
//! without HEC, then the 48-byte payload). Every AAL5 PDU completed on a VC
//! is also written as an ERF type 4 record (the last cell's four header
//! bytes, then the whole CPCS-PDU with pad and trailer), whose CRC Wireshark
//! checks. tshark does not reassemble AAL5 across type 3 records, hence both.
//!
//! ERF record: a 16-byte header (timestamp as little-endian 32.32 fixed-point
//! seconds; type; flags; record length, loss counter and wire length as
//! big-endian 16-bit numbers), then the body.

use std::io::Write;
use std::time::Duration as StdDuration;

use aurora_time::Instant;
use aurora_wire::{aal5, CellBytes, HEADER_LEN};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use rustc_hash::FxHashMap;

/// ERF record type: one ATM cell.
pub const ERF_TYPE_ATM: u8 = 3;
/// ERF record type: one AAL5 CPCS-PDU.
pub const ERF_TYPE_AAL5: u8 = 4;
/// Bytes of the ERF record header.
pub const ERF_HEADER_LEN: usize = 16;
/// AAL5 reassemblies a capture follows at once; beyond this, cells still
/// get their type 3 record but no PDU record (counted).
pub const MAX_VCS: usize = 1024;

/// Builds one ERF record.
pub fn erf_record(t: Instant, ty: u8, body: &[u8]) -> Vec<u8> {
    let ns = t.as_nanos().max(0) as u64;
    let secs = ns / 1_000_000_000;
    let frac = ((ns % 1_000_000_000) << 32) / 1_000_000_000;
    let ts = (secs << 32) | frac;
    let rlen = (ERF_HEADER_LEN + body.len()) as u16;
    let mut r = Vec::with_capacity(ERF_HEADER_LEN + body.len());
    r.extend_from_slice(&ts.to_le_bytes());
    r.push(ty);
    r.push(0); // flags: interface 0, fixed length, not truncated, no errors
    r.extend_from_slice(&rlen.to_be_bytes());
    r.extend_from_slice(&0u16.to_be_bytes());
    r.extend_from_slice(&(body.len() as u16).to_be_bytes());
    r.extend_from_slice(body);
    r
}

/// SunATM traffic type of an LLC-encapsulated VC.
pub const SUNATM_LLC: u8 = 0x02;

/// LINKTYPE_SUNATM: each record a 4-byte pseudo-header (flags and traffic
/// type, VPI, VCI big-endian) and a reassembled AAL5 SDU, without pad or
/// trailer.
pub const LINKTYPE_SUNATM: u32 = 123;

/// What a capture file holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CaptureFormat {
    /// LINKTYPE_ERF: every cell (type 3) and every AAL5 CPCS-PDU (type 4).
    #[default]
    Erf,
    /// LINKTYPE_SUNATM: every AAL5 SDU whose trailer checks, reassembled.
    SunAtm,
}

/// What a capture wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureCounters {
    /// Type 3 records (cells).
    pub cells: u64,
    /// Type 4 records (AAL5 PDUs).
    pub pdus: u64,
    /// Partial PDUs abandoned (too long, or too many VCs at once).
    pub abandoned: u64,
    /// PDUs not written (no type 4 or SUNATM record) because their length
    /// or CRC failed: cells lost upstream ran two PDUs together.
    pub bad_pdus: u64,
}

/// The capture of one port.
pub struct PortCapture<W: Write> {
    w: PcapWriter<W>,
    format: CaptureFormat,
    partial: FxHashMap<u32, Vec<u8>>,
    counters: CaptureCounters,
}

impl<W: Write> PortCapture<W> {
    /// Starts a pcap stream with LINKTYPE_ERF and nanosecond timestamps.
    pub fn new(w: W) -> std::io::Result<Self> {
        Self::with_format(w, CaptureFormat::Erf)
    }

    /// Starts a pcap stream of `format` with nanosecond timestamps.
    pub fn with_format(w: W, format: CaptureFormat) -> std::io::Result<Self> {
        let datalink = match format {
            CaptureFormat::Erf => DataLink::ERF,
            CaptureFormat::SunAtm => DataLink::from(LINKTYPE_SUNATM),
        };
        let header = PcapHeader {
            datalink,
            snaplen: (ERF_HEADER_LEN + 4 + aal5::cpcs_len(aal5::MAX_SDU)) as u32,
            ts_resolution: TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        let w = PcapWriter::with_header(w, header).map_err(std::io::Error::other)?;
        Ok(PortCapture {
            w,
            format,
            partial: FxHashMap::default(),
            counters: CaptureCounters::default(),
        })
    }

    /// What has been written.
    pub fn counters(&self) -> CaptureCounters {
        self.counters
    }

    fn write(&mut self, t: Instant, record: &[u8]) -> std::io::Result<()> {
        let ts = StdDuration::from_nanos(t.as_nanos().max(0) as u64);
        self.w
            .write_packet(&PcapPacket::new(ts, record.len() as u32, record))
            .map(|_| ())
            .map_err(std::io::Error::other)
    }

    /// Records one cell seen at `t`, and the AAL5 PDU it completes, if any.
    pub fn cell(&mut self, t: Instant, cell: &CellBytes) -> std::io::Result<()> {
        if self.format == CaptureFormat::Erf {
            let mut body = [0u8; 52];
            body[..4].copy_from_slice(&cell[..4]);
            body[4..].copy_from_slice(&cell[HEADER_LEN..]);
            self.write(t, &erf_record(t, ERF_TYPE_ATM, &body))?;
            self.counters.cells += 1;
        }
        // User cells only (PTI high bit clear); key on VPI/VCI.
        if cell[3] & 0x08 != 0 {
            return Ok(());
        }
        let key = u32::from_be_bytes([cell[0], cell[1], cell[2], cell[3] & 0xF0]);
        if !self.partial.contains_key(&key) && self.partial.len() >= MAX_VCS {
            self.counters.abandoned += 1;
            return Ok(());
        }
        let pdu = self.partial.entry(key).or_default();
        pdu.extend_from_slice(&cell[HEADER_LEN..]);
        if pdu.len() > aal5::cpcs_len(aal5::MAX_SDU) {
            self.partial.remove(&key);
            self.counters.abandoned += 1;
            return Ok(());
        }
        if cell[3] & 0x02 != 0 {
            let pdu = self.partial.remove(&key).unwrap_or_default();
            match self.format {
                CaptureFormat::Erf => {
                    // A PDU that lost cells before this port (an upstream
                    // output buffer overflowed) is two PDUs run together:
                    // its cells stay in the capture as type 3 records, but
                    // it gets no type 4 record; it is counted instead.
                    if aal5::decode(&pdu).is_err() {
                        self.counters.bad_pdus += 1;
                        return Ok(());
                    }
                    let mut body = Vec::with_capacity(4 + pdu.len());
                    body.extend_from_slice(&cell[..4]);
                    body.extend_from_slice(&pdu);
                    self.write(t, &erf_record(t, ERF_TYPE_AAL5, &body))?;
                }
                CaptureFormat::SunAtm => {
                    let Ok((_, sdu)) = aal5::decode(&pdu) else {
                        self.counters.bad_pdus += 1;
                        return Ok(());
                    };
                    // UNI header: VPI is bits 27..20, VCI bits 19..4.
                    let h = u32::from_be_bytes([cell[0], cell[1], cell[2], cell[3]]);
                    let vci = ((h >> 4) & 0xFFFF) as u16;
                    let mut rec = Vec::with_capacity(4 + sdu.len());
                    // Flags: traffic type LLC (2) when the SDU starts with an
                    // LLC/SNAP header (IP and ATMARP from IP nodes), so
                    // readers dissect what it carries; else 0, unknown (let
                    // the reader guess). No direction.
                    let llc = sdu.starts_with(&aurora_wire::llc::LLC_SNAP);
                    rec.push(if llc { SUNATM_LLC } else { 0 });
                    rec.push((h >> 20) as u8);
                    rec.extend_from_slice(&vci.to_be_bytes());
                    rec.extend_from_slice(sdu);
                    self.write(t, &rec)?;
                }
            }
            self.counters.pdus += 1;
        }
        Ok(())
    }

    /// Flushes and returns the writer.
    pub fn finish(self) -> W {
        self.w.into_writer()
    }
}

/// A capture written to a file.
pub type FileCapture = PortCapture<std::io::BufWriter<std::fs::File>>;

/// A folder of captures, one file per receiving port (`NODE-pPORT.pcap`),
/// each opened when its port first receives a cell. The first write error
/// stops recording and is kept for [`CaptureDir::finish`].
pub struct CaptureDir {
    dir: std::path::PathBuf,
    names: std::collections::BTreeMap<u32, String>,
    files: std::collections::BTreeMap<(u32, u16), (String, FileCapture)>,
    failed: Option<String>,
    format: CaptureFormat,
}

/// One capture file written: its path, cell records and AAL5 PDU records.
pub type Written = (String, u64, u64);

impl CaptureDir {
    /// Records into `dir` (which must exist); `names` names the nodes by id.
    pub fn new(
        dir: &std::path::Path,
        names: std::collections::BTreeMap<u32, String>,
        format: CaptureFormat,
    ) -> Self {
        CaptureDir {
            dir: dir.to_path_buf(),
            names,
            files: Default::default(),
            failed: None,
            format,
        }
    }

    /// The files' format.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// The node names.
    pub fn names(&self) -> &std::collections::BTreeMap<u32, String> {
        &self.names
    }

    /// Records cells that arrived at `port` of node `node` at `t`.
    pub fn record(&mut self, t: Instant, node: u32, port: u16, cells: &[CellBytes]) {
        if self.failed.is_some() {
            return;
        }
        let entry = match self.files.entry((node, port)) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let name = self.names.get(&node).map_or("node", String::as_str);
                let file = self.dir.join(format!("{name}-p{port}.pcap"));
                match std::fs::File::create(&file)
                    .and_then(|f| PortCapture::with_format(std::io::BufWriter::new(f), self.format))
                {
                    Ok(c) => v.insert((file.display().to_string(), c)),
                    Err(e) => {
                        self.failed = Some(format!("cannot write {}: {e}", file.display()));
                        return;
                    }
                }
            }
        };
        for c in cells {
            if let Err(e) = entry.1.cell(t, c) {
                self.failed = Some(format!("cannot write {}: {e}", entry.0));
                return;
            }
        }
    }

    /// Flushes every file; what was written, or the first error.
    pub fn finish(self) -> Result<Vec<Written>, String> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut written = Vec::new();
        for (_, (file, cap)) in self.files {
            let c = cap.counters();
            let mut w = cap.finish();
            w.flush().map_err(|e| format!("cannot write {file}: {e}"))?;
            written.push((file, c.cells, c.pdus));
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_record_layout() {
        let r = erf_record(Instant::from_nanos(1_500_000_000), ERF_TYPE_ATM, &[9; 52]);
        assert_eq!(r.len(), 68);
        // 1.5 s: seconds in the high word, half of 2^32 in the low word.
        assert_eq!(
            u64::from_le_bytes(r[..8].try_into().unwrap()),
            (1 << 32) | (1 << 31)
        );
        assert_eq!(r[8], 3);
        assert_eq!(&r[10..12], &68u16.to_be_bytes());
        assert_eq!(&r[14..16], &52u16.to_be_bytes());
        assert_eq!(&r[16..], &[9; 52]);
    }

    #[test]
    fn cells_and_pdus_are_both_recorded() {
        use aurora_sar::{Aal5Tx, PduOptions};
        let _ = (); // keep the test self-contained
        let mut tx = Aal5Tx::new(
            aurora_wire::cell::VcId::new(0, 77),
            aurora_wire::cell::Format::Uni,
        )
        .unwrap();
        let mut cells = vec![[0u8; 53]; 3];
        let n = tx
            .segment_into(&[1u8; 100], PduOptions::default(), &mut cells)
            .unwrap();
        let mut cap = PortCapture::new(Vec::new()).unwrap();
        for c in &cells[..n] {
            cap.cell(Instant::ZERO, c).unwrap();
        }
        assert_eq!(
            cap.counters(),
            CaptureCounters {
                cells: 3,
                pdus: 1,
                ..CaptureCounters::default()
            }
        );
        let bytes = cap.finish();
        // pcap header (24) + 3 × (16 + 68) + (16 + 16 + 4 + 144).
        assert_eq!(bytes.len(), 24 + 3 * (16 + 68) + (16 + 16 + 4 + 144));
    }

    #[test]
    fn sunatm_records_hold_checked_sdus_only() {
        use aurora_sar::{Aal5Tx, PduOptions};
        let vc = aurora_wire::cell::VcId::new(5, 0x1234);
        let mut tx = Aal5Tx::new(vc, aurora_wire::cell::Format::Uni).unwrap();
        let mut cells = vec![[0u8; 53]; 3];
        let n = tx
            .segment_into(&[7u8; 60], PduOptions::default(), &mut cells)
            .unwrap();
        assert_eq!(n, 2);
        let mut cap = PortCapture::with_format(Vec::new(), CaptureFormat::SunAtm).unwrap();
        for c in &cells[..n] {
            cap.cell(Instant::ZERO, c).unwrap();
        }
        // The same PDU with a payload bit flipped fails its CRC: not written.
        let mut bad = cells.clone();
        bad[0][10] ^= 1;
        for c in &bad[..n] {
            cap.cell(Instant::ZERO, c).unwrap();
        }
        let c = cap.counters();
        assert_eq!((c.cells, c.pdus, c.bad_pdus), (0, 1, 1));
        let bytes = cap.finish();
        // pcap header: link type 123 at offset 20, in the file's byte order
        // (the nanosecond magic number says which).
        let lt: [u8; 4] = bytes[20..24].try_into().unwrap();
        let big = bytes[..4] == [0xA1, 0xB2, 0x3C, 0x4D];
        let linktype = if big {
            u32::from_be_bytes(lt)
        } else {
            u32::from_le_bytes(lt)
        };
        assert_eq!(linktype, 123);
        // One record: 16-byte record header, then flags, VPI, VCI, the SDU.
        assert_eq!(bytes.len(), 24 + 16 + 4 + 60);
        assert_eq!(&bytes[40..44], &[0, 5, 0x12, 0x34]);
        assert_eq!(&bytes[44..], &[7u8; 60]);
    }
}
