//! Captures Wireshark and tshark decode: pcap files with LINKTYPE_ERF (197)
//! for ports that receive cells, and files of ATOMIC frames for ports that
//! receive frames (see [below](#atomic-frames)).
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
//!
//! # Headers as received
//!
//! A capture sees a port's cells before the node's HEC receiver does, and
//! checks every header itself with its own [`HecReceiver`] per port, which
//! sees the same cells in the same order as the node's and so reaches the
//! same verdicts (single-bit correction, then detection, I.432.1) without
//! touching the node. A type 3 record always holds the header **as
//! received**; when the check corrected it or failed it, the record's ERF
//! flags carry the rx-error bit ([`ERF_FLAG_RX_ERROR`], Wireshark's
//! `erf.flags.rxe`). The corrected header is not written: a flagged record
//! whose header differs from its VC's other cells is what arrived.
//!
//! AAL5 reassembly follows the receivers: cells are keyed by VPI/VCI of the
//! header after correction (UNI headers: GFC, PTI's congestion and end bits
//! and CLP are not part of the key), OAM and RM cells (PTI 4-7, and the F4
//! OAM VCIs 3 and 4) are not user data, and a cell whose header failed the
//! check is not part of any PDU. A type 4 record holds the header of the
//! PDU's last cell after correction (the VC the receiver reassembled it on)
//! and carries the rx-error flag when any of its cells' headers was
//! corrected.
//!
//! In real time the links' receivers check HEC before the node's tap sees
//! the cells, so there the capture holds headers after the link's
//! correction and no cell the link discarded (the link counts both).
//!
//! # Nothing lost silently
//!
//! [`CaptureDir::in_background`] moves the writing to a thread of its own:
//! the node's thread only copies units (with their times and ports) into
//! batches for a bounded queue, and never waits for the disk. A batch that
//! finds the queue full is left out of the capture and counted
//! ([`CaptureCounters::dropped`]), and the next record written to each of
//! its ports' files carries the count in its ERF loss counter (`erf.lctr`,
//! saturating at 65535), so Wireshark shows the gap. SUNATM, RFC 1483 and
//! ATOMIC records have no loss counter; their drops are in the counts only.
//!
//! # ATOMIC frames
//!
//! A port that receives ATOMIC frames gets a file of its own, each record
//! one frame exactly as it arrived, in one of three link types from the
//! range pcap keeps for private use, since no registered type fits:
//!
//! - [`LINKTYPE_ATOMIC_ROUTED`] (`LINKTYPE_USER0`, 147): what a Mosaic node
//!   receives from another, the packet with what is left of its route in
//!   front (a leading (0, 0) is a pair that ended at this node);
//! - [`LINKTYPE_ATOMIC_PAYLOAD`] (`LINKTYPE_USER1`, 148): what a host (or a
//!   router's interface on the LAN) receives from its node, the payload
//!   alone, starting with its kind byte;
//! - [`LINKTYPE_ATOMIC_FROM_HOST`] (`LINKTYPE_USER2`, 149): what a Mosaic
//!   node receives from its host, the packet with its whole route in front
//!   (a leading (0, 0) is an empty route: a message for the node itself).
//!
//! Wireshark shows them decoded with the dissector in
//! `tools/wireshark/atomic.lua` (routes, message kinds and their fields, IP
//! packets handed to Wireshark's own IP dissector). These files have no loss
//! counter either: frames a background capture could not keep up with are
//! in the counts only.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::thread::JoinHandle;
use std::time::Duration as StdDuration;

use aurora_time::Instant;
use aurora_wire::hec::{HecReceiver, HecVerdict};
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
/// ERF flags bit 4: the record was received with an error (here: its cell
/// header failed the HEC check or was corrected by it). Bits 0-1 are the
/// interface, bit 2 varying length, bit 3 truncated, bit 5 DS error.
pub const ERF_FLAG_RX_ERROR: u8 = 0x10;
/// AAL5 reassemblies a capture follows at once; beyond this, cells still
/// get their type 3 record but no PDU record (counted).
pub const MAX_VCS: usize = 1024;
/// Most cells or frames in one message from a node's thread to its capture
/// writer (a batch: the units seen, each with its time and port).
pub const BATCH_UNITS: usize = 256;
/// A batch goes to the writer once its frames hold this many bytes, even
/// if it has fewer than [`BATCH_UNITS`] of them.
pub const BATCH_FRAME_BYTES: usize = 32 * 1024;
/// How long a capture writer sleeps when it finds its queue empty.
pub const WRITER_POLL: StdDuration = StdDuration::from_millis(2);
/// Messages a capture writer's queue holds: with [`BATCH_UNITS`], at most
/// 65,536 cells (under 5 MB with their times and ports) waiting per
/// process, besides the batch gathering and the one being written; units
/// beyond are dropped and counted. With frames, at most
/// about 25 MB (a batch passes [`BATCH_FRAME_BYTES`] by one frame at most,
/// and a frame is at most an IP packet of 65,535 bytes with its route).
pub const QUEUE_BATCHES: usize = 256;

/// The 16-byte ERF header of a record of type `ty` with a `body_len`-byte
/// body, `flags`, and `lctr` records lost before it (saturating).
pub fn erf_header(t: Instant, ty: u8, flags: u8, lctr: u64, body_len: usize) -> [u8; 16] {
    let ns = t.as_nanos().max(0) as u64;
    let secs = ns / 1_000_000_000;
    let frac = ((ns % 1_000_000_000) << 32) / 1_000_000_000;
    let ts = (secs << 32) | frac;
    let sat = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
    let mut h = [0u8; ERF_HEADER_LEN];
    h[..8].copy_from_slice(&ts.to_le_bytes());
    h[8] = ty;
    h[9] = flags;
    h[10..12].copy_from_slice(&sat(ERF_HEADER_LEN + body_len).to_be_bytes());
    h[12..14].copy_from_slice(&u16::try_from(lctr).unwrap_or(u16::MAX).to_be_bytes());
    h[14..16].copy_from_slice(&sat(body_len).to_be_bytes());
    h
}

/// Builds one ERF record with no flags and no loss.
pub fn erf_record(t: Instant, ty: u8, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(ERF_HEADER_LEN + body.len());
    r.extend_from_slice(&erf_header(t, ty, 0, 0, body.len()));
    r.extend_from_slice(body);
    r
}

/// LINKTYPE_ERF: each record an ERF record.
pub const LINKTYPE_ERF: u32 = 197;

/// SunATM traffic type of an LLC-encapsulated VC.
pub const SUNATM_LLC: u8 = 0x02;

/// LINKTYPE_ATM_RFC1483: each record an LLC-encapsulated AAL5 SDU.
pub const LINKTYPE_ATM_RFC1483: u32 = 100;

/// LINKTYPE_SUNATM: each record a 4-byte pseudo-header (flags and traffic
/// type, VPI, VCI big-endian) and a reassembled AAL5 SDU, without pad or
/// trailer.
pub const LINKTYPE_SUNATM: u32 = 123;

/// Link type of a file of ATOMIC packets as Mosaic nodes receive them,
/// route first (`LINKTYPE_USER0`).
pub const LINKTYPE_ATOMIC_ROUTED: u32 = 147;

/// Link type of a file of ATOMIC payloads as hosts receive them, route
/// stripped (`LINKTYPE_USER1`).
pub const LINKTYPE_ATOMIC_PAYLOAD: u32 = 148;

/// Link type of a file of ATOMIC packets as a Mosaic node receives them
/// from its host, whole route first (`LINKTYPE_USER2`).
pub const LINKTYPE_ATOMIC_FROM_HOST: u32 = 149;

/// Longest frame recorded whole; a longer one is cut to this (pcap keeps
/// its full length), as tcpdump's largest snapshot length does.
pub const FRAME_SNAPLEN: usize = 262_144;

/// What the frames a port receives look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameLink {
    /// Packets with what is left of their routes (a Mosaic node's ports to
    /// other nodes).
    Routed,
    /// Payloads without routes (a host's port, from its node).
    Payload,
    /// Packets with their whole routes (a Mosaic node's port from its
    /// host).
    FromHost,
}

impl FrameLink {
    /// The pcap link type of a file of such frames.
    pub fn linktype(self) -> u32 {
        match self {
            FrameLink::Routed => LINKTYPE_ATOMIC_ROUTED,
            FrameLink::Payload => LINKTYPE_ATOMIC_PAYLOAD,
            FrameLink::FromHost => LINKTYPE_ATOMIC_FROM_HOST,
        }
    }
}

/// What a capture file of cells holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CaptureFormat {
    /// LINKTYPE_ERF: every cell (type 3) and every AAL5 CPCS-PDU (type 4).
    #[default]
    Erf,
    /// LINKTYPE_SUNATM: every AAL5 SDU whose trailer checks, reassembled.
    SunAtm,
    /// LINKTYPE_ATM_RFC1483: every AAL5 SDU whose trailer checks and which
    /// starts with an LLC/SNAP header (IP and ATMARP between IP nodes),
    /// reassembled; other SDUs are counted ([`CaptureCounters::not_llc`]),
    /// not written.
    Rfc1483,
}

/// What a capture wrote, and what it left out and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CaptureCounters {
    /// Type 3 records (cells).
    pub cells: u64,
    /// AAL5 PDU records (ERF type 4, SUNATM or RFC 1483).
    pub pdus: u64,
    /// PDUs abandoned: too long (for AAL5, or for one ERF record), or too
    /// many VCs at once.
    pub abandoned: u64,
    /// PDUs not written (no type 4, SUNATM or RFC 1483 record) because
    /// their length or CRC failed: cells lost upstream ran two PDUs
    /// together.
    pub bad_pdus: u64,
    /// SDUs an RFC 1483 capture left out: they do not start with an
    /// LLC/SNAP header (traffic hosts' test PDUs, VC-multiplexed IP).
    pub not_llc: u64,
    /// Cells whose header the capture's HEC check corrected (recorded as
    /// received, flagged).
    pub hec_corrected: u64,
    /// Cells whose header failed the capture's HEC check (recorded as
    /// received, flagged, in no PDU).
    pub hec_failed: u64,
    /// Cells (or frames) the capture could not keep up with: not recorded,
    /// counted.
    pub dropped: u64,
    /// Frame records (a file of frames).
    pub frames: u64,
    /// Frames that reached a port whose file holds cells: not recorded,
    /// counted (the node drops them too, as the wrong kind).
    pub wrong_kind: u64,
}

/// True for a cell the receivers do not reassemble: OAM and RM cells (PTI
/// 4-7) and F4 OAM cells (VCI 3 and 4), judged on a checked header.
fn not_user_data(h: &[u8; 5]) -> bool {
    let vci = (u16::from(h[1] & 0x0F) << 12) | (u16::from(h[2]) << 4) | u16::from(h[3] >> 4);
    h[3] & 0x08 != 0
        || vci == aurora_wire::cell::VCI_F4_SEGMENT
        || vci == aurora_wire::cell::VCI_F4_END_TO_END
}

/// The reassembly key of a checked UNI header: VPI and VCI only.
fn vc_key(h: &[u8; 5]) -> u32 {
    u32::from_be_bytes([h[0] & 0x0F, h[1], h[2], h[3] & 0xF0])
}

/// A PDU being reassembled: its bytes so far, and whether any of its cells
/// had a corrected header.
#[derive(Default)]
struct Partial {
    bytes: Vec<u8>,
    corrected: bool,
}

/// The capture of one port.
pub struct PortCapture<W: Write> {
    w: PcapWriter<W>,
    format: CaptureFormat,
    /// For a file of frames: what they look like.
    frames: Option<FrameLink>,
    hec: HecReceiver,
    partial: FxHashMap<u32, Partial>,
    counters: CaptureCounters,
    /// Cells dropped since the last record written (for its `lctr`).
    lost: u64,
    record: Vec<u8>,
}

impl<W: Write> PortCapture<W> {
    /// Starts a pcap stream with LINKTYPE_ERF and nanosecond timestamps.
    pub fn new(w: W) -> std::io::Result<Self> {
        Self::with_format(w, CaptureFormat::Erf)
    }

    /// Starts a pcap stream of `format` with nanosecond timestamps.
    pub fn with_format(w: W, format: CaptureFormat) -> std::io::Result<Self> {
        let datalink = match format {
            CaptureFormat::Erf => DataLink::from(LINKTYPE_ERF),
            CaptureFormat::SunAtm => DataLink::from(LINKTYPE_SUNATM),
            CaptureFormat::Rfc1483 => DataLink::from(LINKTYPE_ATM_RFC1483),
        };
        let header = PcapHeader {
            datalink,
            snaplen: (ERF_HEADER_LEN + 4 + aal5::cpcs_len(aal5::MAX_SDU)) as u32,
            ts_resolution: TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        let w = PcapWriter::with_header(w, header).map_err(std::io::Error::other)?;
        Ok(Self::around(w, format, None))
    }

    /// Starts a pcap stream of ATOMIC frames of `link`'s kind, with
    /// nanosecond timestamps.
    pub fn for_frames(w: W, link: FrameLink) -> std::io::Result<Self> {
        let header = PcapHeader {
            datalink: DataLink::from(link.linktype()),
            snaplen: FRAME_SNAPLEN as u32,
            ts_resolution: TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        let w = PcapWriter::with_header(w, header).map_err(std::io::Error::other)?;
        Ok(Self::around(w, CaptureFormat::default(), Some(link)))
    }

    fn around(w: PcapWriter<W>, format: CaptureFormat, frames: Option<FrameLink>) -> Self {
        PortCapture {
            w,
            format,
            frames,
            hec: HecReceiver::new(),
            partial: FxHashMap::default(),
            counters: CaptureCounters::default(),
            lost: 0,
            record: Vec::new(),
        }
    }

    /// The file's pcap link type.
    pub fn linktype(&self) -> u32 {
        match (self.frames, self.format) {
            (Some(link), _) => link.linktype(),
            (None, CaptureFormat::Erf) => LINKTYPE_ERF,
            (None, CaptureFormat::SunAtm) => LINKTYPE_SUNATM,
            (None, CaptureFormat::Rfc1483) => LINKTYPE_ATM_RFC1483,
        }
    }

    /// What has been written.
    pub fn counters(&self) -> CaptureCounters {
        self.counters
    }

    /// Notes `n` cells that arrived but were dropped before the capture
    /// could record them: counted, and given as the loss counter of the
    /// next ERF record written.
    pub fn note_dropped(&mut self, n: u64) {
        self.counters.dropped += n;
        self.lost += n;
    }

    /// Writes the record built in `self.record` (body only for SUNATM; ERF
    /// header included for ERF).
    fn write(&mut self, t: Instant) -> std::io::Result<()> {
        put(&mut self.w, t, &self.record, self.record.len())
    }

    /// Records one ATOMIC frame seen at `t`: as it arrived in a file of
    /// frames (cut to [`FRAME_SNAPLEN`]), counted as the wrong kind in a
    /// file of cells.
    pub fn frame(&mut self, t: Instant, frame: &[u8]) -> std::io::Result<()> {
        if self.frames.is_none() {
            self.counters.wrong_kind += 1;
            return Ok(());
        }
        let kept = &frame[..frame.len().min(FRAME_SNAPLEN)];
        put(&mut self.w, t, kept, frame.len())?;
        self.counters.frames += 1;
        self.lost = 0;
        Ok(())
    }

    /// Builds and writes one ERF record, with the loss counted since the
    /// last one.
    fn write_erf(
        &mut self,
        t: Instant,
        ty: u8,
        flags: u8,
        parts: [&[u8]; 2],
    ) -> std::io::Result<()> {
        let len = parts[0].len() + parts[1].len();
        self.record.clear();
        self.record
            .extend_from_slice(&erf_header(t, ty, flags, self.lost, len));
        self.record.extend_from_slice(parts[0]);
        self.record.extend_from_slice(parts[1]);
        self.write(t)?;
        self.lost = 0;
        Ok(())
    }

    /// Records one cell seen at `t`, and the AAL5 PDU it completes, if any.
    /// In a file of frames, the cell is recorded as the 53-byte frame it
    /// arrived as (the node counts it as the wrong kind).
    pub fn cell(&mut self, t: Instant, cell: &CellBytes) -> std::io::Result<()> {
        if self.frames.is_some() {
            return self.frame(t, cell);
        }
        // The capture's own check, on a copy: the cell is not touched.
        let mut h = [cell[0], cell[1], cell[2], cell[3], cell[4]];
        let verdict = self.hec.check_header(&mut h);
        let flags = match verdict {
            HecVerdict::Valid => 0,
            HecVerdict::Corrected(_) => {
                self.counters.hec_corrected += 1;
                ERF_FLAG_RX_ERROR
            }
            HecVerdict::Discarded => {
                self.counters.hec_failed += 1;
                ERF_FLAG_RX_ERROR
            }
        };
        if self.format == CaptureFormat::Erf {
            // The header as received, then the payload.
            self.write_erf(t, ERF_TYPE_ATM, flags, [&cell[..4], &cell[HEADER_LEN..]])?;
            self.counters.cells += 1;
        }
        if verdict == HecVerdict::Discarded || not_user_data(&h) {
            return Ok(());
        }
        let key = vc_key(&h);
        if !self.partial.contains_key(&key) && self.partial.len() >= MAX_VCS {
            self.counters.abandoned += 1;
            return Ok(());
        }
        let pdu = self.partial.entry(key).or_default();
        pdu.bytes.extend_from_slice(&cell[HEADER_LEN..]);
        pdu.corrected |= flags != 0;
        if pdu.bytes.len() > aal5::cpcs_len(aal5::MAX_SDU) {
            self.partial.remove(&key);
            self.counters.abandoned += 1;
            return Ok(());
        }
        if h[3] & 0x02 == 0 {
            return Ok(());
        }
        let pdu = self.partial.remove(&key).unwrap_or_default();
        match self.format {
            CaptureFormat::Erf => {
                // A PDU that lost cells before this port (an upstream
                // output buffer overflowed) is two PDUs run together:
                // its cells stay in the capture as type 3 records, but
                // it gets no type 4 record; it is counted instead.
                if aal5::decode(&pdu.bytes).is_err() {
                    self.counters.bad_pdus += 1;
                    return Ok(());
                }
                // An ERF record's length is 16 bits: the longest PDUs
                // (SDUs over 65464 bytes) cannot be one record.
                if ERF_HEADER_LEN + 4 + pdu.bytes.len() > usize::from(u16::MAX) {
                    self.counters.abandoned += 1;
                    return Ok(());
                }
                let flags = if pdu.corrected { ERF_FLAG_RX_ERROR } else { 0 };
                self.write_erf(t, ERF_TYPE_AAL5, flags, [&h[..4], &pdu.bytes])?;
            }
            CaptureFormat::SunAtm => {
                let Ok((_, sdu)) = aal5::decode(&pdu.bytes) else {
                    self.counters.bad_pdus += 1;
                    return Ok(());
                };
                // UNI header: VPI is bits 27..20, VCI bits 19..4.
                let hv = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
                let vci = ((hv >> 4) & 0xFFFF) as u16;
                // Flags: traffic type LLC (2) when the SDU starts with an
                // LLC/SNAP header (IP and ATMARP from IP nodes), so
                // readers dissect what it carries; else 0, unknown (let
                // the reader guess). No direction.
                let llc = sdu.starts_with(&aurora_wire::llc::LLC_SNAP);
                self.record.clear();
                self.record.push(if llc { SUNATM_LLC } else { 0 });
                self.record.push((hv >> 20) as u8);
                self.record.extend_from_slice(&vci.to_be_bytes());
                self.record.extend_from_slice(sdu);
                self.write(t)?;
                self.lost = 0;
            }
            CaptureFormat::Rfc1483 => {
                let Ok((_, sdu)) = aal5::decode(&pdu.bytes) else {
                    self.counters.bad_pdus += 1;
                    return Ok(());
                };
                if !sdu.starts_with(&aurora_wire::llc::LLC_SNAP) {
                    self.counters.not_llc += 1;
                    return Ok(());
                }
                put(&mut self.w, t, sdu, sdu.len())?;
                self.lost = 0;
            }
        }
        self.counters.pdus += 1;
        Ok(())
    }

    /// Flushes and returns the writer.
    pub fn finish(self) -> W {
        self.w.into_writer()
    }
}

/// Writes one pcap record of `data`, taken from a unit of `len` bytes, seen
/// at `t`.
fn put<W: Write>(
    w: &mut PcapWriter<W>,
    t: Instant,
    data: &[u8],
    len: usize,
) -> std::io::Result<()> {
    let ts = StdDuration::from_nanos(t.as_nanos().max(0) as u64);
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    w.write_packet(&PcapPacket::new(ts, len, data))
        .map(|_| ())
        .map_err(std::io::Error::other)
}

/// A capture written to a file.
pub type FileCapture = PortCapture<std::io::BufWriter<std::fs::File>>;

/// One capture file written, and what it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Written {
    /// Its path.
    pub file: String,
    /// Its pcap link type: 197 (ERF), 123 (SUNATM), 100 (RFC 1483), or one
    /// of the ATOMIC types (147 to 149).
    pub linktype: u32,
    /// What it holds, and what it left out.
    #[serde(flatten)]
    pub counters: CaptureCounters,
}

/// What arrived at a port, for a capture.
#[derive(Clone, Copy, Debug)]
pub enum Seen<'a> {
    /// Cells.
    Cells(&'a [CellBytes]),
    /// One ATOMIC frame, of this kind.
    Frame(FrameLink, &'a [u8]),
}

impl Seen<'_> {
    fn holds(&self) -> Holds {
        match self {
            Seen::Cells(_) => Holds::Cells,
            Seen::Frame(link, _) => Holds::Frames(*link),
        }
    }
}

/// What a port's file holds: what first arrived there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holds {
    Cells,
    Frames(FrameLink),
}

/// The files of a [`CaptureDir`], written on the caller's thread.
struct Files {
    dir: PathBuf,
    names: BTreeMap<u32, String>,
    files: BTreeMap<(u32, u16), (String, FileCapture)>,
    /// Every path a file was created at, so no two ports share one.
    paths: std::collections::BTreeSet<PathBuf>,
    failed: Option<String>,
    format: CaptureFormat,
}

impl Files {
    /// The capture of `port` of `node`, its file created on first use to
    /// hold `holds`; `None` once anything failed. Two ports whose names
    /// would give the same file (two nodes of one name) get distinct ones:
    /// the later gets `-2`, `-3`... after its port.
    fn port(&mut self, node: u32, port: u16, holds: Holds) -> Option<&mut (String, FileCapture)> {
        if self.failed.is_some() {
            return None;
        }
        match self.files.entry((node, port)) {
            std::collections::btree_map::Entry::Occupied(e) => Some(e.into_mut()),
            std::collections::btree_map::Entry::Vacant(v) => {
                let name = self.names.get(&node).map_or("node", String::as_str);
                let mut file = self.dir.join(format!("{name}-p{port}.pcap"));
                for k in 2.. {
                    if !self.paths.contains(&file) {
                        break;
                    }
                    file = self.dir.join(format!("{name}-p{port}-{k}.pcap"));
                }
                self.paths.insert(file.clone());
                let format = self.format;
                match std::fs::File::create(&file).and_then(|f| {
                    let w = std::io::BufWriter::new(f);
                    match holds {
                        Holds::Cells => PortCapture::with_format(w, format),
                        Holds::Frames(link) => PortCapture::for_frames(w, link),
                    }
                }) {
                    Ok(c) => Some(v.insert((file.display().to_string(), c))),
                    Err(e) => {
                        self.failed = Some(format!("cannot write {}: {e}", file.display()));
                        None
                    }
                }
            }
        }
    }

    /// Records what `seen` holds, if anything, after `dropped` units the
    /// capture left out at that port (whose file holds `holds` if it is
    /// new).
    fn record(
        &mut self,
        t: Instant,
        at: (u32, u16),
        holds: Holds,
        seen: Option<Seen>,
        dropped: u64,
    ) {
        let Some(entry) = self.port(at.0, at.1, holds) else {
            return;
        };
        entry.1.note_dropped(dropped);
        let done = match seen {
            Some(Seen::Cells(cells)) => cells.iter().try_for_each(|c| entry.1.cell(t, c)),
            Some(Seen::Frame(_, f)) => entry.1.frame(t, f),
            None => Ok(()),
        };
        if let Err(e) = done {
            self.failed = Some(format!("cannot write {}: {e}", entry.0));
        }
    }

    fn finish(self) -> Result<Vec<Written>, String> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut written = Vec::new();
        for (_, (file, cap)) in self.files {
            let (c, linktype) = (cap.counters(), cap.linktype());
            let mut w = cap.finish();
            w.flush().map_err(|e| format!("cannot write {file}: {e}"))?;
            written.push(Written {
                file,
                linktype,
                counters: c,
            });
        }
        Ok(written)
    }
}

/// One unit for a capture writer thread.
enum Unit {
    Cell(CellBytes),
    Frame(FrameLink, Vec<u8>),
}

/// A unit seen at `port` of `node` at `t`.
struct Entry {
    t: Instant,
    node: u32,
    port: u16,
    unit: Unit,
}

impl Entry {
    fn seen(&self) -> Seen<'_> {
        match &self.unit {
            Unit::Cell(c) => Seen::Cells(std::slice::from_ref(c)),
            Unit::Frame(link, f) => Seen::Frame(*link, f),
        }
    }
}

/// What a capture writer thread takes at once: the units dropped at ports
/// since the last batch (each port's count goes before its next record,
/// in its loss counter; the port's file, if new, holds what it says), then
/// units seen, oldest first.
struct Batch {
    drops: Vec<((u32, u16), u64, Holds)>,
    entries: Vec<Entry>,
}

/// The node's side of a capture written on a thread of its own: units
/// gather in a batch, which goes to the writer when it holds `batch` units
/// or [`BATCH_FRAME_BYTES`] of frames, without waiting; if the writer's
/// queue is full, the batch's units are dropped and counted.
struct Background {
    tx: Option<SyncSender<Batch>>,
    /// Emptied batches coming back from the writer, for reuse.
    recycle: Receiver<Vec<Entry>>,
    /// The batch gathering.
    pending: Vec<Entry>,
    /// Bytes of the frames in `pending`.
    pending_bytes: usize,
    /// Units per batch.
    batch: usize,
    /// Per (node, port): units dropped and not yet told to the writer, and
    /// what the port's file holds.
    dropped: BTreeMap<(u32, u16), (u64, Holds)>,
    writer: Option<JoinHandle<Result<Vec<Written>, String>>>,
    /// Why there is no writer, if it could not be started.
    failed: Option<String>,
}

impl Background {
    fn record(&mut self, t: Instant, node: u32, port: u16, seen: Seen) {
        if self.tx.is_none() {
            return;
        }
        let add = |unit| Entry {
            t,
            node,
            port,
            unit,
        };
        match seen {
            Seen::Cells(cells) => {
                for c in cells {
                    self.pending.push(add(Unit::Cell(*c)));
                    if self.pending.len() >= self.batch {
                        self.flush(false);
                    }
                }
            }
            Seen::Frame(link, f) => {
                self.pending_bytes += f.len();
                self.pending.push(add(Unit::Frame(link, f.to_vec())));
                if self.pending.len() >= self.batch || self.pending_bytes >= BATCH_FRAME_BYTES {
                    self.flush(false);
                }
            }
        }
    }

    /// Sends the gathered batch and the drop counts to the writer: at once
    /// (`wait` false; if its queue is full, the batch's units are dropped
    /// and counted), or waiting for room.
    fn flush(&mut self, wait: bool) {
        let Some(tx) = self.tx.as_ref() else {
            return;
        };
        if self.pending.is_empty() && self.dropped.is_empty() {
            return;
        }
        let batch = Batch {
            drops: self
                .dropped
                .iter()
                .map(|(&at, &(n, h))| (at, n, h))
                .collect(),
            entries: std::mem::take(&mut self.pending),
        };
        self.pending_bytes = 0;
        let sent = match wait {
            true => tx.send(batch).map_err(|e| TrySendError::Disconnected(e.0)),
            false => tx.try_send(batch),
        };
        match sent {
            Ok(()) => {
                self.dropped.clear();
                self.pending = self.recycle.try_recv().unwrap_or_default();
            }
            Err(TrySendError::Full(mut b)) => {
                for e in &b.entries {
                    let holds = match &e.unit {
                        Unit::Cell(_) => Holds::Cells,
                        Unit::Frame(link, _) => Holds::Frames(*link),
                    };
                    self.dropped.entry((e.node, e.port)).or_insert((0, holds)).0 += 1;
                }
                b.entries.clear();
                self.pending = b.entries;
            }
            // The writer stopped (its error is kept for finish).
            Err(TrySendError::Disconnected(_)) => self.tx = None,
        }
    }

    fn finish(mut self) -> Result<Vec<Written>, String> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        // What is gathered, and the drops not yet told: counted in the
        // files' totals (a port whose every unit was dropped gets its file,
        // empty, of the kind it would have held). The writer is draining
        // now, so waiting for room is fine here.
        self.flush(true);
        self.tx = None;
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("the capture writer thread stopped unexpectedly".into()),
            None => Ok(Vec::new()),
        }
    }
}

impl Drop for Background {
    /// A capture dropped without [`CaptureDir::finish`] (a run that failed)
    /// still hands what it gathered to its writer, which writes it and
    /// closes the files.
    fn drop(&mut self) {
        self.flush(false);
    }
}

/// How a [`CaptureDir`] writes.
enum Mode {
    /// On the caller's thread.
    Inline(Files),
    /// On a writer thread of its own, fed through a bounded queue.
    Background(Background),
}

/// A folder of captures, one file per receiving port (`NODE-pPORT.pcap`),
/// each opened when its port first receives a cell or a frame. The first write error
/// stops recording and is kept for [`CaptureDir::finish`].
pub struct CaptureDir {
    dir: PathBuf,
    names: BTreeMap<u32, String>,
    format: CaptureFormat,
    mode: Mode,
}

impl CaptureDir {
    /// Records into `dir` (which must exist), writing on the caller's
    /// thread; `names` names the nodes by id.
    pub fn new(dir: &Path, names: BTreeMap<u32, String>, format: CaptureFormat) -> Self {
        CaptureDir {
            dir: dir.to_path_buf(),
            names: names.clone(),
            format,
            mode: Mode::Inline(Files {
                dir: dir.to_path_buf(),
                names,
                files: BTreeMap::new(),
                paths: std::collections::BTreeSet::new(),
                failed: None,
                format,
            }),
        }
    }

    /// The same capture written on a thread of its own behind a queue of
    /// [`QUEUE_BATCHES`] batches: [`CaptureDir::record`] then never waits
    /// for the disk; units gather in batches of [`BATCH_UNITS`], and a
    /// batch that finds the queue full is dropped and counted. For real
    /// time. [`CaptureDir::finish`] sends what is gathered and joins the
    /// thread.
    pub fn in_background(self) -> Self {
        self.in_background_with(QUEUE_BATCHES, BATCH_UNITS, None)
    }

    /// [`CaptureDir::in_background`] with a queue of `queue` batches of
    /// `batch` units; the writer takes a token from `gate` before each batch
    /// (tests only).
    fn in_background_with(self, queue: usize, batch: usize, gate: Option<Receiver<()>>) -> Self {
        let Mode::Inline(files) = self.mode else {
            return self;
        };
        let (tx, rx) = sync_channel::<Batch>(queue.max(1));
        let (back, recycle) = sync_channel::<Vec<Entry>>(32);
        let spawned = std::thread::Builder::new()
            .name("capture".into())
            .spawn(move || {
                low_priority();
                write_batches(files, &rx, &back, gate.as_ref())
            });
        let (tx, writer, failed) = match spawned {
            Ok(h) => (Some(tx), Some(h), None),
            Err(e) => (
                None,
                None,
                Some(format!("cannot start a capture writer thread: {e}")),
            ),
        };
        let bg = Background {
            tx,
            recycle,
            pending: Vec::new(),
            pending_bytes: 0,
            batch: batch.max(1),
            dropped: BTreeMap::new(),
            writer,
            failed,
        };
        CaptureDir {
            mode: Mode::Background(bg),
            ..self
        }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The files' format.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// The node names.
    pub fn names(&self) -> &BTreeMap<u32, String> {
        &self.names
    }

    /// Records cells that arrived at `port` of node `node` at `t`.
    pub fn record(&mut self, t: Instant, node: u32, port: u16, cells: &[CellBytes]) {
        self.seen(t, node, port, Seen::Cells(cells));
    }

    /// Records what arrived at `port` of node `node` at `t`. A port's file
    /// holds what first arrived there: cells (in the folder's format) or
    /// frames (in a file of their kind).
    pub fn seen(&mut self, t: Instant, node: u32, port: u16, seen: Seen) {
        match &mut self.mode {
            Mode::Inline(f) => f.record(t, (node, port), seen.holds(), Some(seen), 0),
            Mode::Background(b) => b.record(t, node, port, seen),
        }
    }

    /// Flushes every file (after the writer thread, if any, has written
    /// everything queued); what was written, or the first error as one
    /// sentence.
    pub fn finish(self) -> Result<Vec<Written>, String> {
        match self.mode {
            Mode::Inline(f) => f.finish(),
            Mode::Background(b) => b.finish(),
        }
    }
}

/// A capture writer thread: writes every batch until the queue closes or a
/// write fails, handing emptied buffers back.
fn write_batches(
    mut files: Files,
    rx: &Receiver<Batch>,
    back: &SyncSender<Vec<Entry>>,
    gate: Option<&Receiver<()>>,
) -> Result<Vec<Written>, String> {
    // Whether the gate has let the next batch through (a closed gate is an
    // open one).
    let mut through = false;
    loop {
        if let (Some(g), false) = (gate, through) {
            let _ = g.recv();
            through = true;
        }
        // Polled, not woken: a thread woken by the node's thread tends to
        // be moved to that thread's core, where it would take time from
        // the network (or, at idle priority, get none).
        let mut b = match rx.try_recv() {
            Ok(b) => b,
            Err(TryRecvError::Empty) => {
                std::thread::sleep(WRITER_POLL);
                continue;
            }
            Err(TryRecvError::Disconnected) => break,
        };
        through = false;
        for (at, n, holds) in b.drops {
            files.record(Instant::ZERO, at, holds, None, n);
        }
        for e in &b.entries {
            let seen = e.seen();
            files.record(e.t, (e.node, e.port), seen.holds(), Some(seen), 0);
        }
        if files.failed.is_some() {
            break;
        }
        b.entries.clear();
        let _ = back.try_send(b.entries);
    }
    files.finish()
}

/// Gives the calling thread the lowest share of a busy CPU (Linux: nice
/// 19 for this thread alone), so a capture's writer takes next to no time
/// from the network it records on a core they share, and all of an idle
/// one. When it falls behind, its queue fills and units are dropped from
/// the capture and counted. (`SCHED_IDLE` was tried first: on a 2-core
/// machine with one core free, its writer still got so little time that
/// real-time captures dropped a quarter to four fifths of their cells.)
/// Where the priority cannot be set, the writer runs as any thread does.
fn low_priority() {
    // SAFETY: gettid has no preconditions; setpriority on PRIO_PROCESS
    // with a thread id changes only that thread's nice value on Linux.
    // Failure is harmless and ignored.
    let _ = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19)
    };
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

    /// The pcap records in `bytes`: each record's data.
    fn records(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut r = pcap_file::pcap::PcapReader::new(bytes).unwrap();
        let mut out = Vec::new();
        while let Some(p) = r.next_packet() {
            out.push(p.unwrap().data.into_owned());
        }
        out
    }

    /// The cells of one AAL5 PDU of `len` bytes on `vc`.
    fn pdu_cells(vc: aurora_wire::cell::VcId, len: usize) -> Vec<CellBytes> {
        use aurora_sar::{Aal5Tx, PduOptions};
        let mut tx = Aal5Tx::new(vc, aurora_wire::cell::Format::Uni).unwrap();
        let mut cells = vec![[0u8; 53]; aal5::cpcs_len(len) / 48];
        let n = tx
            .segment_into(&vec![0x5A; len], PduOptions::default(), &mut cells)
            .unwrap();
        cells.truncate(n);
        cells
    }

    #[test]
    fn corrected_header_is_recorded_as_received_and_flagged() {
        let vc = aurora_wire::cell::VcId::new(1, 0x123);
        let cells = pdu_cells(vc, 100);
        assert_eq!(cells.len(), 3);
        let good: [u8; 4] = cells[1][..4].try_into().unwrap();
        let mut rx = cells.clone();
        // A single-bit error in the second cell's VCI: the capture's check
        // corrects it (the PDU still reassembles) but the record keeps the
        // header as it arrived, flagged.
        rx[1][2] ^= 0x10;
        let mut cap = PortCapture::new(Vec::new()).unwrap();
        for c in &rx {
            cap.cell(Instant::ZERO, c).unwrap();
        }
        let c = cap.counters();
        assert_eq!(
            (c.cells, c.pdus, c.hec_corrected, c.hec_failed),
            (3, 1, 1, 0)
        );
        let recs = records(&cap.finish());
        assert_eq!(recs.len(), 4);
        // Flags byte 9: only the errored cell carries the rx-error bit.
        let flags: Vec<u8> = recs.iter().map(|r| r[9]).collect();
        assert_eq!(flags, [0, ERF_FLAG_RX_ERROR, 0, ERF_FLAG_RX_ERROR]);
        assert_eq!(&recs[1][16..20], &rx[1][..4], "header as received");
        assert_ne!(&recs[1][16..20], &good, "not the corrected header");
        assert_eq!(&recs[1][20..], &rx[1][5..]);
        // The PDU record: type 4, on the VC the receiver reassembles it on.
        assert_eq!(recs[3][8], ERF_TYPE_AAL5);
        assert_eq!(&recs[3][16..20], &cells[2][..4]);
        assert!(aal5::decode(&recs[3][20..]).is_ok());
    }

    #[test]
    fn failed_header_is_flagged_and_in_no_pdu() {
        let vc = aurora_wire::cell::VcId::new(0, 40);
        let cells = pdu_cells(vc, 100);
        let mut rx = cells.clone();
        // Two bits wrong in the middle cell's header: no correction.
        rx[1][1] ^= 0x01;
        rx[1][2] ^= 0x80;
        let mut cap = PortCapture::new(Vec::new()).unwrap();
        for c in &rx {
            cap.cell(Instant::ZERO, c).unwrap();
        }
        let c = cap.counters();
        assert_eq!((c.cells, c.pdus, c.hec_failed, c.bad_pdus), (3, 0, 1, 1));
        let recs = records(&cap.finish());
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[1][9], ERF_FLAG_RX_ERROR);
        assert_eq!(&recs[1][16..20], &rx[1][..4]);
    }

    #[test]
    fn pdus_are_keyed_on_vpi_and_vci_only() {
        // A cell whose GFC or CLP differs (as a VuNet host writes, or a bit
        // error the HEC check corrected) still belongs to its VC's PDU, as
        // it does at the receiver; an OAM cell in between is not user data.
        let vc = aurora_wire::cell::VcId::new(2, 0x222);
        let mut cells = pdu_cells(vc, 200);
        assert_eq!(cells.len(), 5);
        let set = |c: &mut CellBytes, b0: u8, b3: u8| {
            c[0] |= b0;
            c[3] |= b3;
            c[4] = aurora_wire::crc::hec(&[c[0], c[1], c[2], c[3]]);
        };
        set(&mut cells[1], 0x50, 0);
        set(&mut cells[2], 0, 0x01);
        set(&mut cells[3], 0, 0x04);
        let mut oam = cells[0];
        set(&mut oam, 0, 0x0A); // PTI 5: F5 end-to-end OAM
        let mut f4 = [0u8; 53];
        f4[1] = 0x20; // VPI 2, VCI 4: F4 end-to-end OAM
        f4[3] = 0x40;
        f4[4] = aurora_wire::crc::hec(&[f4[0], f4[1], f4[2], f4[3]]);
        let mut cap = PortCapture::new(Vec::new()).unwrap();
        for (i, c) in cells.iter().enumerate() {
            if i == 2 {
                cap.cell(Instant::ZERO, &oam).unwrap();
                cap.cell(Instant::ZERO, &f4).unwrap();
            }
            cap.cell(Instant::ZERO, c).unwrap();
        }
        let c = cap.counters();
        assert_eq!((c.cells, c.pdus, c.bad_pdus, c.hec_failed), (7, 1, 0, 0));
    }

    #[test]
    fn dropped_cells_show_in_the_next_loss_counter() {
        let cells = pdu_cells(aurora_wire::cell::VcId::new(0, 50), 10);
        let mut cap = PortCapture::new(Vec::new()).unwrap();
        cap.note_dropped(7);
        cap.note_dropped(70_000);
        cap.cell(Instant::ZERO, &cells[0]).unwrap();
        assert_eq!(cap.counters().dropped, 70_007);
        let recs = records(&cap.finish());
        // Cell record then PDU record: the loss is on the first only,
        // saturated at the field's 16 bits.
        assert_eq!(recs.len(), 2);
        assert_eq!(&recs[0][12..14], &[0xFF, 0xFF]);
        assert_eq!(&recs[1][12..14], &[0, 0]);
    }

    #[test]
    fn a_slow_writer_drops_and_counts_instead_of_blocking() {
        use std::sync::mpsc;
        let dir = std::env::temp_dir().join(format!("aurora-capture-slow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let names = BTreeMap::from([(3, "h".to_string())]);
        // A queue of two batches, and a writer that takes no batch until
        // given a token: it has stopped, as a stalled disk would stop it.
        let (token, gate) = mpsc::channel();
        let mut cap =
            CaptureDir::new(&dir, names, CaptureFormat::Erf).in_background_with(2, 1, Some(gate));
        let cells = pdu_cells(aurora_wire::cell::VcId::new(0, 60), 10);
        let t0 = std::time::Instant::now();
        for i in 0..10 {
            cap.record(Instant::from_nanos(i), 3, 1, &cells);
        }
        // Never waited for the writer (which would have been forever).
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
        let Mode::Background(bg) = &cap.mode else {
            panic!("in background")
        };
        assert_eq!(bg.dropped.get(&(3, 1)), Some(&(8, Holds::Cells)));
        // Let the writer take the two queued batches, and wait until it
        // has written them (it hands their buffers back).
        token.send(()).unwrap();
        token.send(()).unwrap();
        for _ in 0..2 {
            let buf = bg
                .recycle
                .recv_timeout(std::time::Duration::from_secs(10))
                .unwrap();
            assert!(buf.is_empty());
        }
        // The next batch finds room, and carries the loss.
        token.send(()).unwrap();
        cap.record(Instant::from_nanos(10), 3, 1, &cells);
        drop(token);
        let w = cap.finish().unwrap();
        let file = dir.join("h-p1.pcap");
        let want = Written {
            file: file.display().to_string(),
            linktype: LINKTYPE_ERF,
            counters: CaptureCounters {
                cells: 3,
                pdus: 3,
                dropped: 8,
                ..CaptureCounters::default()
            },
        };
        assert_eq!(w, vec![want]);
        let recs = records(&std::fs::read(&file).unwrap());
        let lctr: Vec<u16> = recs
            .iter()
            .map(|r| u16::from_be_bytes([r[12], r[13]]))
            .collect();
        assert_eq!(lctr, [0, 0, 0, 0, 8, 0]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn drops_after_the_last_batch_are_counted_too() {
        use std::sync::mpsc;
        let dir = std::env::temp_dir().join(format!("aurora-capture-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (token, gate) = mpsc::channel::<()>();
        let mut cap = CaptureDir::new(&dir, BTreeMap::new(), CaptureFormat::Erf)
            .in_background_with(1, 1, Some(gate));
        let cells = pdu_cells(aurora_wire::cell::VcId::new(0, 61), 10);
        for i in 0..4 {
            cap.record(Instant::from_nanos(i), 0, 2, &cells);
        }
        drop(token);
        let w = cap.finish().unwrap();
        let file = dir.join("node-p2.pcap").display().to_string();
        let want = Written {
            file,
            linktype: LINKTYPE_ERF,
            counters: CaptureCounters {
                cells: 1,
                pdus: 1,
                dropped: 3,
                ..CaptureCounters::default()
            },
        };
        assert_eq!(w, vec![want]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_pdu_too_long_for_an_erf_record_is_counted_not_written() {
        let mut cap = PortCapture::new(Vec::new()).unwrap();
        for len in [65_464, 65_465] {
            for c in &pdu_cells(aurora_wire::cell::VcId::new(0, 70), len) {
                cap.cell(Instant::ZERO, c).unwrap();
            }
        }
        let c = cap.counters();
        assert_eq!((c.pdus, c.abandoned), (1, 1));
        let recs = records(&cap.finish());
        // Every record's own length field matches its length.
        for r in &recs {
            assert_eq!(usize::from(u16::from_be_bytes([r[10], r[11]])), r.len());
        }
        assert_eq!(recs.iter().filter(|r| r[8] == ERF_TYPE_AAL5).count(), 1);
    }

    #[test]
    fn frames_are_written_as_they_arrived_byte_for_byte() {
        let mut cap = PortCapture::for_frames(Vec::new(), FrameLink::Routed).unwrap();
        // One East hop worn to (0, 0), the terminator, kind 1 (IP), 3 bytes.
        let frame = [0, 0, 0, 0, 1, 0x45, 0, 0];
        cap.frame(Instant::from_nanos(1_500_000_001), &frame)
            .unwrap();
        assert_eq!(cap.counters().frames, 1);
        let bytes = cap.finish();
        let mut want = Vec::new();
        // pcap header (big-endian, as the writer makes them): nanosecond magic, version 2.4, zone and sigfigs 0,
        // snaplen, link type 147.
        want.extend_from_slice(&0xa1b2_3c4du32.to_be_bytes());
        want.extend_from_slice(&[0, 2, 0, 4]);
        want.extend_from_slice(&[0; 8]);
        want.extend_from_slice(&(FRAME_SNAPLEN as u32).to_be_bytes());
        want.extend_from_slice(&147u32.to_be_bytes());
        // Record: 1 s and 500,000,001 ns, 8 bytes kept of 8.
        want.extend_from_slice(&1u32.to_be_bytes());
        want.extend_from_slice(&500_000_001u32.to_be_bytes());
        want.extend_from_slice(&8u32.to_be_bytes());
        want.extend_from_slice(&8u32.to_be_bytes());
        want.extend_from_slice(&frame);
        assert_eq!(bytes, want);
    }

    #[test]
    fn a_payload_file_has_its_own_link_type_and_cuts_only_past_the_snaplen() {
        let mut cap = PortCapture::for_frames(Vec::new(), FrameLink::Payload).unwrap();
        let long = vec![7u8; FRAME_SNAPLEN + 10];
        cap.frame(Instant::ZERO, &long).unwrap();
        let bytes = cap.finish();
        assert_eq!(&bytes[20..24], &148u32.to_be_bytes());
        // Kept the snapshot length, with the frame's own length beside it.
        let rec = &bytes[24..];
        assert_eq!(&rec[8..12], &(FRAME_SNAPLEN as u32).to_be_bytes());
        assert_eq!(&rec[12..16], &(FRAME_SNAPLEN as u32 + 10).to_be_bytes());
        assert_eq!(rec.len(), 16 + FRAME_SNAPLEN);
    }

    #[test]
    fn a_port_keeps_the_kind_it_first_received() {
        let dir = std::env::temp_dir().join(format!("aurora-capture-kind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let names = BTreeMap::from([(1, "m".to_string())]);
        for background in [false, true] {
            let mut cap = CaptureDir::new(&dir, names.clone(), CaptureFormat::Erf);
            if background {
                cap = cap.in_background();
            }
            let cells = pdu_cells(aurora_wire::cell::VcId::new(0, 40), 10);
            // Port 0 first sees a frame: a cell there is a 53-byte frame.
            cap.seen(
                Instant::ZERO,
                1,
                0,
                Seen::Frame(FrameLink::Routed, &[1, 0, 0, 0, 2]),
            );
            cap.record(Instant::ZERO, 1, 0, &cells);
            // Port 1 first sees cells: a frame there is counted, not written.
            cap.record(Instant::ZERO, 1, 1, &cells);
            cap.seen(
                Instant::ZERO,
                1,
                1,
                Seen::Frame(FrameLink::Routed, &[9; 60]),
            );
            let w = cap.finish().unwrap();
            let f = |p: &str| dir.join(p).display().to_string();
            assert_eq!(
                w,
                vec![
                    Written {
                        file: f("m-p0.pcap"),
                        linktype: LINKTYPE_ATOMIC_ROUTED,
                        counters: CaptureCounters {
                            frames: 2,
                            ..CaptureCounters::default()
                        },
                    },
                    Written {
                        file: f("m-p1.pcap"),
                        linktype: LINKTYPE_ERF,
                        counters: CaptureCounters {
                            cells: 1,
                            pdus: 1,
                            wrong_kind: 1,
                            ..CaptureCounters::default()
                        },
                    },
                ]
            );
            let frames = std::fs::read(dir.join("m-p0.pcap")).unwrap();
            // Two records: 5 bytes, then the cell's 53.
            assert_eq!(frames.len(), 24 + 16 + 5 + 16 + 53);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn two_nodes_of_one_name_get_two_files() {
        let dir = std::env::temp_dir().join(format!("aurora-capture-twins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let names = BTreeMap::from([(1, "a-if".to_string()), (2, "a-if".to_string())]);
        let mut cap = CaptureDir::new(&dir, names, CaptureFormat::Erf);
        let link = FrameLink::Payload;
        cap.seen(Instant::ZERO, 1, 0, Seen::Frame(link, &[1, 2, 3]));
        cap.seen(Instant::ZERO, 2, 0, Seen::Frame(link, &[4, 5]));
        cap.seen(Instant::ZERO, 2, 0, Seen::Frame(link, &[6]));
        let w = cap.finish().unwrap();
        let files: Vec<(String, u64)> = w
            .iter()
            .map(|w| (w.file.clone(), w.counters.frames))
            .collect();
        let f = |p: &str| dir.join(p).display().to_string();
        assert_eq!(files, [(f("a-if-p0.pcap"), 1), (f("a-if-p0-2.pcap"), 2)]);
        for (file, frames) in files {
            assert_eq!(records(&std::fs::read(file).unwrap()).len() as u64, frames);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_port_whose_every_frame_was_dropped_gets_a_file_of_frames() {
        use std::sync::mpsc;
        let dir = std::env::temp_dir().join(format!("aurora-capture-lost-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A writer that takes nothing until the end: of three frames for
        // port 4, one waits in the queue of one, two are dropped; of the
        // frame for port 5, none gets in.
        let (token, gate) = mpsc::channel::<()>();
        let mut cap = CaptureDir::new(&dir, BTreeMap::new(), CaptureFormat::Erf)
            .in_background_with(1, 1, Some(gate));
        for _ in 0..3 {
            cap.seen(
                Instant::ZERO,
                0,
                4,
                Seen::Frame(FrameLink::FromHost, &[0, 0, 3]),
            );
        }
        cap.seen(
            Instant::ZERO,
            0,
            5,
            Seen::Frame(FrameLink::Routed, &[0, 0, 3]),
        );
        drop(token);
        let w = cap.finish().unwrap();
        let got: Vec<(u32, u64, u64)> = w
            .iter()
            .map(|w| (w.linktype, w.counters.frames, w.counters.dropped))
            .collect();
        assert_eq!(
            got,
            [
                (LINKTYPE_ATOMIC_FROM_HOST, 1, 2),
                (LINKTYPE_ATOMIC_ROUTED, 0, 1)
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn rfc1483_records_hold_llc_sdus_and_count_the_rest() {
        use aurora_sar::{Aal5Tx, PduOptions};
        let vc = aurora_wire::cell::VcId::new(0, 40);
        let mut tx = Aal5Tx::new(vc, aurora_wire::cell::Format::Uni).unwrap();
        let mut llc = aurora_wire::llc::LLC_SNAP.to_vec();
        llc.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 20]);
        let mut cap = PortCapture::with_format(Vec::new(), CaptureFormat::Rfc1483).unwrap();
        for sdu in [&llc[..], &[7u8; 30][..]] {
            let mut cells = vec![[0u8; 53]; 2];
            let n = tx
                .segment_into(sdu, PduOptions::default(), &mut cells)
                .unwrap();
            for c in &cells[..n] {
                cap.cell(Instant::ZERO, c).unwrap();
            }
        }
        let c = cap.counters();
        assert_eq!((c.cells, c.pdus, c.not_llc), (0, 1, 1));
        assert_eq!(cap.linktype(), 100);
        let recs = records(&cap.finish());
        assert_eq!(recs, vec![llc]);
    }

    #[test]
    fn a_batch_keeps_each_units_time_and_port() {
        let dir = std::env::temp_dir().join(format!("aurora-capture-batch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let names = BTreeMap::from([(2, "n".to_string())]);
        // Batches of 4 units, a writer that never waits for a token.
        let mut cap =
            CaptureDir::new(&dir, names, CaptureFormat::Erf).in_background_with(8, 4, None);
        let cells = pdu_cells(aurora_wire::cell::VcId::new(0, 33), 10);
        for i in 0..7u16 {
            let t = Instant::from_nanos(1_000 * i64::from(i));
            match i % 2 {
                0 => cap.record(t, 2, 0, &cells),
                _ => cap.seen(t, 2, 1, Seen::Frame(FrameLink::Payload, &[9; 20])),
            }
        }
        let w = cap.finish().unwrap();
        let got: Vec<(u64, u64)> = w
            .iter()
            .map(|w| (w.counters.cells, w.counters.frames))
            .collect();
        assert_eq!(got, [(4, 0), (0, 3)]);
        for (file, times) in [
            ("n-p0.pcap", [0, 2, 4, 6].as_slice()),
            ("n-p1.pcap", &[1, 3, 5]),
        ] {
            let bytes = std::fs::read(dir.join(file)).unwrap();
            let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
            let mut ts = Vec::new();
            while let Some(p) = r.next_packet() {
                ts.push(p.unwrap().timestamp.as_nanos() as u64 / 1_000);
            }
            // ERF: a cell record and its PDU record at each time.
            let want: Vec<u64> = match file {
                "n-p0.pcap" => times.iter().flat_map(|&t| [t, t]).collect(),
                _ => times.to_vec(),
            };
            assert_eq!(ts, want, "{file}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_capture_dropped_without_finish_still_writes_what_it_gathered() {
        let dir = std::env::temp_dir().join(format!("aurora-capture-drop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let names = BTreeMap::from([(1, "x".to_string())]);
        let mut cap = CaptureDir::new(&dir, names, CaptureFormat::Erf).in_background();
        let cells = pdu_cells(aurora_wire::cell::VcId::new(0, 34), 10);
        for i in 0..5 {
            cap.record(Instant::from_nanos(i), 1, 0, &cells);
        }
        // Five cells: far from a full batch. A failed run drops its capture.
        drop(cap);
        let file = dir.join("x-p0.pcap");
        let t0 = std::time::Instant::now();
        let mut n = 0;
        while t0.elapsed() < std::time::Duration::from_secs(10) {
            // Whole records so far (the writer may be writing it still).
            let b = std::fs::read(&file).unwrap_or_default();
            n = 0;
            if let Ok(mut r) = pcap_file::pcap::PcapReader::new(&b[..]) {
                while let Some(Ok(_)) = r.next_packet() {
                    n += 1;
                }
            }
            if n == 10 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // A cell record and a PDU record for each.
        assert_eq!(n, 10);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
