//! The sender: one logical VC's units spread over the member VCs.

use aurora_sar::{Aal5Tx, PduOptions};
use aurora_time::Instant;
use aurora_wire::cell::{Header, Pti};
use aurora_wire::{CellBytes, HEADER_LEN, PAYLOAD_LEN};

use crate::balance::Balancer;
use crate::config::{Config, ConfigError, SyncMode, UnitKind};
use crate::format::{self, Marker, CELL_SEQ_LEN};

/// The user bits of a cell that striping carries through unchanged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CellFlags {
    /// EFCI (congestion experienced), the PTI's middle bit.
    pub congestion: bool,
    /// ATM-user-to-ATM-user bit; AAL5 sets it on a PDU's last cell.
    pub auu: bool,
    /// Cell loss priority.
    pub clp: bool,
}

impl CellFlags {
    /// The flags of a user-data cell's header (`None` for OAM and RM cells).
    pub fn of(cell: &CellBytes) -> Option<CellFlags> {
        match Pti::from_bits(cell[3] >> 1) {
            Pti::User { congestion, auu } => Some(CellFlags {
                congestion,
                auu,
                clp: cell[3] & 1 != 0,
            }),
            _ => None,
        }
    }

    /// Index into a table of the eight header variants.
    pub(crate) fn index(self) -> usize {
        (usize::from(self.congestion) << 2) | (usize::from(self.auu) << 1) | usize::from(self.clp)
    }
}

/// Why the sender refused a unit. Nothing was sent and nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxError {
    /// The unit is not of the configured kind.
    #[error("this striped VC carries {configured} units, not {given}", configured = .configured.name(), given = .given.name())]
    WrongUnit {
        /// What the VC was configured with.
        configured: UnitKind,
        /// What was handed over.
        given: UnitKind,
    },
    /// A cell unit's data is not the size the method leaves room for.
    #[error("a cell unit carries exactly {expected} data bytes, not {got}")]
    CellData {
        /// 48, or 46 with sequence numbers.
        expected: usize,
        /// What was given.
        got: usize,
    },
    /// The SDU is longer than `max_sdu`.
    #[error("an SDU of {len} bytes is longer than the {max}-byte limit")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An IP unit that is not an IPv4 or IPv6 packet of its stated length.
    #[error("not an IP packet: {0}")]
    NotIp(&'static str),
}

/// One stripe's share of what the sender sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StripeTxStats {
    /// Units sent on the stripe.
    pub units: u64,
    /// Data cells sent on it.
    pub cells: u64,
    /// Bytes the balancer charged it (48 per cell for cells, the
    /// CPCS-PDU length for PDUs).
    pub bytes: u64,
    /// Marker cells sent on it.
    pub markers: u64,
}

/// The sender's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// The unit kind counted.
    pub unit: UnitKind,
    /// The synchronisation method.
    pub sync: SyncMode,
    /// Units accepted (and sent).
    pub units: u64,
    /// Application bytes in them (cell data, SDU or packet bytes).
    pub bytes: u64,
    /// Units refused, with a [`TxError`].
    pub refused: u64,
    /// Per stripe.
    pub per_stripe: Vec<StripeTxStats>,
}

impl TxStats {
    /// All cells sent, markers included.
    pub fn cells(&self) -> u64 {
        self.per_stripe.iter().map(|s| s.cells + s.markers).sum()
    }
    /// All marker cells sent.
    pub fn markers(&self) -> u64 {
        self.per_stripe.iter().map(|s| s.markers).sum()
    }
}

/// The sending end of a striped VC.
///
/// Each `push_*` call takes one unit and appends its cells to `out` as
/// `(stripe index, cell)` pairs, in the order they must leave (cells of one
/// stripe must keep their order; cells of different stripes may be sent in
/// parallel). With marker sync the sender also appends marker cells, after
/// every K units of a stripe and, via [`Striper::handle_timeout`], when it
/// goes idle.
#[derive(Debug)]
pub struct Striper {
    cfg: Config,
    balancer: Balancer,
    /// Cell units: each stripe's data headers, indexed by [`CellFlags::index`].
    headers: Vec<[[u8; HEADER_LEN]; 8]>,
    /// PDU units: each stripe's AAL5 sender.
    aal5: Vec<Aal5Tx>,
    next_seq: u64,
    since_marker: Vec<u32>,
    last_unit: Option<Instant>,
    idle_sent: u32,
    stats: TxStats,
    scratch: Vec<CellBytes>,
}

impl Striper {
    /// A sender for `cfg` (checked first).
    pub fn new(cfg: Config) -> Result<Striper, ConfigError> {
        cfg.check()?;
        let n = cfg.stripes.len();
        let mut headers = Vec::with_capacity(n);
        let mut aal5 = Vec::new();
        for vc in &cfg.stripes {
            let mut h = [[0u8; HEADER_LEN]; 8];
            for (i, slot) in h.iter_mut().enumerate() {
                *slot = Header {
                    format: cfg.format,
                    pti: Pti::User {
                        congestion: i & 4 != 0,
                        auu: i & 2 != 0,
                    },
                    clp: i & 1 != 0,
                    ..Header::data(*vc)
                }
                .to_bytes()
                .expect("VPI range checked with the config");
            }
            headers.push(h);
            if cfg.unit.is_pdu() {
                aal5.push(Aal5Tx::new(*vc, cfg.format).expect("VPI range checked"));
            }
        }
        Ok(Striper {
            balancer: Balancer::new(n, cfg.effective_quantum()),
            headers,
            aal5,
            next_seq: 0,
            since_marker: vec![0; n],
            last_unit: None,
            idle_sent: 0,
            stats: TxStats {
                unit: cfg.unit,
                sync: cfg.sync,
                per_stripe: vec![StripeTxStats::default(); n],
                ..TxStats::default()
            },
            scratch: Vec::new(),
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &TxStats {
        &self.stats
    }

    /// Data bytes a cell unit carries: 48, or 46 with sequence numbers.
    pub fn cell_data_len(&self) -> usize {
        match self.cfg.sync {
            SyncMode::Sequence => PAYLOAD_LEN - CELL_SEQ_LEN,
            _ => PAYLOAD_LEN,
        }
    }

    /// Index the next unit will have (units are numbered from 0).
    pub fn next_index(&self) -> u64 {
        self.next_seq
    }

    fn refuse(&mut self, e: TxError) -> Result<u64, TxError> {
        self.stats.refused += 1;
        Err(e)
    }

    /// Sends one cell unit: `data` is the payload (see
    /// [`Striper::cell_data_len`]), `flags` the user bits to carry. Returns
    /// the unit's index.
    pub fn push_cell(
        &mut self,
        now: Instant,
        data: &[u8],
        flags: CellFlags,
        out: &mut Vec<(usize, CellBytes)>,
    ) -> Result<u64, TxError> {
        if self.cfg.unit != UnitKind::Cell {
            return self.refuse(TxError::WrongUnit {
                configured: self.cfg.unit,
                given: UnitKind::Cell,
            });
        }
        let want = self.cell_data_len();
        if data.len() != want {
            return self.refuse(TxError::CellData {
                expected: want,
                got: data.len(),
            });
        }
        let idx = self.next_seq;
        let s = self.balancer.next_stripe();
        self.balancer.place(s, PAYLOAD_LEN as i64);
        let mut cell = [0u8; aurora_wire::CELL_LEN];
        cell[..HEADER_LEN].copy_from_slice(&self.headers[s][flags.index()]);
        let payload: &mut [u8; PAYLOAD_LEN] = (&mut cell[HEADER_LEN..])
            .try_into()
            .expect("48 payload bytes");
        if self.cfg.sync == SyncMode::Sequence {
            format::put_cell_seq(payload, idx);
            payload[CELL_SEQ_LEN..].copy_from_slice(data);
        } else {
            payload.copy_from_slice(data);
        }
        out.push((s, cell));
        let st = &mut self.stats.per_stripe[s];
        st.cells += 1;
        st.bytes += PAYLOAD_LEN as u64;
        self.finish_unit(now, s, data.len(), out);
        Ok(idx)
    }

    /// Sends one AAL5 PDU unit with `sdu` as its data. Returns its index.
    pub fn push_pdu(
        &mut self,
        now: Instant,
        sdu: &[u8],
        out: &mut Vec<(usize, CellBytes)>,
    ) -> Result<u64, TxError> {
        self.push_sdu(now, UnitKind::Pdu, sdu, out)
    }

    /// Sends one IP packet unit (IPv4 or IPv6, checked for version and
    /// length). Returns its index.
    pub fn push_ip(
        &mut self,
        now: Instant,
        packet: &[u8],
        out: &mut Vec<(usize, CellBytes)>,
    ) -> Result<u64, TxError> {
        if self.cfg.unit == UnitKind::IpPacket {
            if let Err(why) = check_ip(packet) {
                return self.refuse(TxError::NotIp(why));
            }
        }
        self.push_sdu(now, UnitKind::IpPacket, packet, out)
    }

    /// Sends a PDU of the IP layer that is not an IP packet (an ATMARP or
    /// InATMARP message, which IP over ATM needs on a PVC before any
    /// packet) as an IP unit: balanced and kept in order with the packets,
    /// its contents not checked. Returns its index.
    pub fn push_ip_control(
        &mut self,
        now: Instant,
        pdu: &[u8],
        out: &mut Vec<(usize, CellBytes)>,
    ) -> Result<u64, TxError> {
        self.push_sdu(now, UnitKind::IpPacket, pdu, out)
    }

    fn push_sdu(
        &mut self,
        now: Instant,
        kind: UnitKind,
        sdu: &[u8],
        out: &mut Vec<(usize, CellBytes)>,
    ) -> Result<u64, TxError> {
        if self.cfg.unit != kind {
            return self.refuse(TxError::WrongUnit {
                configured: self.cfg.unit,
                given: kind,
            });
        }
        if sdu.len() > self.cfg.max_sdu {
            return self.refuse(TxError::TooLong {
                len: sdu.len(),
                max: self.cfg.max_sdu,
            });
        }
        let idx = self.next_seq;
        let header = format::pdu_seq_header(idx);
        let seq = self.cfg.sync == SyncMode::Sequence;
        let carried = sdu.len() + if seq { header.len() } else { 0 };
        let cells = aurora_wire::aal5::cells_for(carried);
        let size = (cells * PAYLOAD_LEN) as i64;
        let s = self.balancer.next_stripe();
        self.balancer.place(s, size);
        self.scratch.resize(cells, [0; aurora_wire::CELL_LEN]);
        let parts: [&[u8]; 2] = [&header, sdu];
        let parts = if seq { &parts[..] } else { &parts[1..] };
        let mut seg = self.aal5[s]
            .segment(parts, PduOptions::default())
            .expect("length checked against max_sdu");
        let n = seg.fill(&mut self.scratch);
        debug_assert_eq!(n, cells);
        out.extend(self.scratch[..n].iter().map(|c| (s, *c)));
        let st = &mut self.stats.per_stripe[s];
        st.cells += n as u64;
        st.bytes += size as u64;
        self.finish_unit(now, s, sdu.len(), out);
        Ok(idx)
    }

    /// Counts a sent unit and adds a marker when the stripe is due one.
    fn finish_unit(
        &mut self,
        now: Instant,
        s: usize,
        bytes: usize,
        out: &mut Vec<(usize, CellBytes)>,
    ) {
        self.next_seq += 1;
        self.stats.units += 1;
        self.stats.bytes += bytes as u64;
        self.stats.per_stripe[s].units += 1;
        self.last_unit = Some(now);
        self.idle_sent = 0;
        if self.cfg.sync == SyncMode::Marker {
            self.since_marker[s] += 1;
            if self.since_marker[s] >= self.cfg.marker_interval {
                self.marker(s, false, out);
            }
        }
    }

    fn marker(&mut self, s: usize, idle: bool, out: &mut Vec<(usize, CellBytes)>) {
        let m = Marker {
            stripe: s as u8,
            stripes: self.cfg.stripes.len() as u8,
            unit: self.cfg.unit,
            idle,
            interval: self.cfg.marker_interval as u16,
            state: self.balancer.state(s),
            quantum: self.balancer.quantum() as u32,
        };
        let cell = m
            .to_cell(self.cfg.stripes[s], self.cfg.format)
            .expect("VPI range checked");
        out.push((s, cell));
        self.since_marker[s] = 0;
        self.stats.per_stripe[s].markers += 1;
    }

    /// With marker sync, sends a marker on every stripe now (flagged idle),
    /// so that the receiver can confirm everything sent so far. Does
    /// nothing with the other methods.
    pub fn flush_markers(&mut self, out: &mut Vec<(usize, CellBytes)>) {
        if self.cfg.sync == SyncMode::Marker {
            for s in 0..self.cfg.stripes.len() {
                self.marker(s, true, out);
            }
        }
    }

    /// When the sender next wants [`Striper::handle_timeout`]: the time of
    /// its next idle marker, if one is due.
    pub fn poll_at(&self) -> Option<Instant> {
        if self.cfg.sync != SyncMode::Marker || self.idle_sent >= self.cfg.idle_marker_repeats {
            return None;
        }
        let last = self.last_unit?;
        let wait = self
            .cfg
            .idle_marker
            .as_nanos()
            .saturating_mul(i64::from(self.idle_sent) + 1);
        Some(last + aurora_time::Duration::from_nanos(wait))
    }

    /// Sends the idle markers due by `now`.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut Vec<(usize, CellBytes)>) {
        while self.poll_at().is_some_and(|t| t <= now) {
            self.flush_markers(out);
            self.idle_sent += 1;
        }
    }
}

/// Checks that `p` is an IPv4 or IPv6 packet whose length field matches.
fn check_ip(p: &[u8]) -> Result<(), &'static str> {
    match p.first().map(|b| b >> 4) {
        Some(4) => {
            if p.len() < 20 {
                return Err("shorter than an IPv4 header");
            }
            if usize::from(p[0] & 0x0F) * 4 < 20 {
                return Err("IPv4 header length below 20 bytes");
            }
            if usize::from(u16::from_be_bytes([p[2], p[3]])) != p.len() {
                return Err("IPv4 total length differs from the packet's");
            }
            Ok(())
        }
        Some(6) => {
            if p.len() < 40 {
                return Err("shorter than an IPv6 header");
            }
            if usize::from(u16::from_be_bytes([p[4], p[5]])) + 40 != p.len() {
                return Err("IPv6 payload length differs from the packet's");
            }
            Ok(())
        }
        _ => Err("version is neither 4 nor 6"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_time::Duration;
    use aurora_wire::cell::{Cell, VcId};

    fn vcs(n: u16) -> Vec<VcId> {
        (0..n).map(|i| VcId::new(0, 100 + i)).collect()
    }

    #[test]
    fn cells_round_robin_with_member_headers() {
        let mut tx = Striper::new(Config::new(UnitKind::Cell, SyncMode::None, vcs(3))).unwrap();
        let mut out = Vec::new();
        for i in 0..6u8 {
            let flags = CellFlags {
                auu: i == 5,
                ..CellFlags::default()
            };
            tx.push_cell(Instant::ZERO, &[i; 48], flags, &mut out)
                .unwrap();
        }
        let stripes: Vec<usize> = out.iter().map(|c| c.0).collect();
        assert_eq!(stripes, [0, 1, 2, 0, 1, 2]);
        for (i, (s, c)) in out.iter().enumerate() {
            let cell = Cell::new_checked(&c[..]).unwrap();
            assert!(cell.hec_ok());
            assert_eq!(cell.vc(), VcId::new(0, 100 + *s as u16));
            assert_eq!(cell.pti().is_end_of_pdu(), i == 5);
            assert_eq!(cell.payload(), &[i as u8; 48]);
        }
        assert_eq!(tx.stats().units, 6);
        assert_eq!(tx.stats().per_stripe[2].cells, 2);
    }

    #[test]
    fn cell_sequence_numbers_take_two_bytes() {
        let mut tx = Striper::new(Config::new(UnitKind::Cell, SyncMode::Sequence, vcs(2))).unwrap();
        let mut out = Vec::new();
        assert_eq!(
            tx.push_cell(Instant::ZERO, &[0; 48], CellFlags::default(), &mut out),
            Err(TxError::CellData {
                expected: 46,
                got: 48
            })
        );
        for i in 0..3u8 {
            tx.push_cell(Instant::ZERO, &[i; 46], CellFlags::default(), &mut out)
                .unwrap();
        }
        let p: Vec<&[u8]> = out.iter().map(|(_, c)| &c[5..9]).collect();
        assert_eq!(p, [&[0, 0, 0, 0][..], &[0, 1, 1, 1], &[0, 2, 2, 2]]);
        assert_eq!(tx.stats().refused, 1);
    }

    #[test]
    fn pdus_are_whole_aal5_pdus_on_one_stripe_with_markers() {
        let mut cfg = Config::new(UnitKind::Pdu, SyncMode::Marker, vcs(2));
        cfg.quantum = 100;
        cfg.marker_interval = 2;
        let mut tx = Striper::new(cfg).unwrap();
        let mut out = Vec::new();
        // 100 bytes -> 3 cells (144 bytes charged): each PDU ends its stripe's turn.
        for i in 0..4u8 {
            tx.push_pdu(Instant::ZERO, &[i; 100], &mut out).unwrap();
        }
        let kinds: Vec<(usize, bool)> = out
            .iter()
            .map(|(s, c)| (*s, Marker::is_marker_cell(c)))
            .collect();
        let data = |s| (s, false);
        let mark = |s| (s, true);
        assert_eq!(
            kinds,
            [
                data(0),
                data(0),
                data(0),
                data(1),
                data(1),
                data(1),
                data(0),
                data(0),
                data(0),
                mark(0),
                data(1),
                data(1),
                data(1),
                mark(1)
            ]
        );
        let m = Marker::parse(format::payload_of(&out[9].1)).unwrap();
        assert_eq!(
            (m.stripe, m.stripes, m.state.count, m.state.round),
            (0, 2, 2, 2)
        );
        assert_eq!(m.state.credit, 2 * (100 - 144));
        let mut pdu = Vec::new();
        for (_, c) in &out[..3] {
            pdu.extend_from_slice(&c[5..]);
        }
        let (_, sdu) = aurora_wire::aal5::decode(&pdu).unwrap();
        assert_eq!(sdu, &[0u8; 100][..]);
        assert_eq!(tx.stats().markers(), 2);
        assert_eq!(tx.stats().cells(), 14);
    }

    #[test]
    fn pdu_sequence_header_is_inside_the_sdu() {
        let mut tx = Striper::new(Config::new(UnitKind::Pdu, SyncMode::Sequence, vcs(1))).unwrap();
        let mut out = Vec::new();
        tx.push_pdu(Instant::ZERO, b"abc", &mut out).unwrap();
        tx.push_pdu(Instant::ZERO, b"de", &mut out).unwrap();
        let (_, sdu) = aurora_wire::aal5::decode(&out[1].1[5..]).unwrap();
        assert_eq!(sdu, &[0, 0, 0, 1, b'd', b'e'][..]);
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    // The expected bytes below (HEC, CRC-32) were computed with bit-by-bit
    // implementations written apart from the crate (HEC check value 0xA1,
    // CRC-32/BZIP2 check value 0xFC891918).

    #[test]
    fn sequence_cell_known_answer() {
        // Unit 1 goes on stripe 1 (VC 0.101), AUU set: header 00 00 06 52,
        // HEC 0x92; sequence number 0x0001; then the 46 data bytes.
        let mut tx = Striper::new(Config::new(UnitKind::Cell, SyncMode::Sequence, vcs(2))).unwrap();
        let mut out = Vec::new();
        tx.push_cell(Instant::ZERO, &[0; 46], CellFlags::default(), &mut out)
            .unwrap();
        let end = CellFlags {
            auu: true,
            ..CellFlags::default()
        };
        tx.push_cell(Instant::ZERO, &[0xAB; 46], end, &mut out)
            .unwrap();
        assert_eq!(out[1].0, 1);
        assert_eq!(
            hex(&out[1].1),
            format!("{}{}{}", "0000065292", "0001", "ab".repeat(46))
        );
    }

    #[test]
    fn sequence_pdu_known_answer() {
        // Unit 7 on VC 0.100, SDU "abc": one cell, AUU set (header 00 00 06
        // 42, HEC 0xE2); SDU = 00 00 00 07 'a' 'b' 'c', pad, UU 0, CPI 0,
        // Length 7, CRC-32 0xD6CECC3C.
        let mut tx = Striper::new(Config::new(UnitKind::Pdu, SyncMode::Sequence, vcs(1))).unwrap();
        let mut out = Vec::new();
        for _ in 0..7 {
            tx.push_pdu(Instant::ZERO, b"", &mut out).unwrap();
        }
        out.clear();
        assert_eq!(tx.push_pdu(Instant::ZERO, b"abc", &mut out), Ok(7));
        assert_eq!(out.len(), 1);
        assert_eq!(
            hex(&out[0].1),
            concat!(
                "00000642e2",
                "00000007616263000000000000000000",
                "00000000000000000000000000000000",
                "0000000000000000",
                "00000007d6cecc3c",
            )
        );
    }

    #[test]
    fn idle_markers_then_quiet() {
        let mut cfg = Config::new(UnitKind::Cell, SyncMode::Marker, vcs(2));
        cfg.idle_marker = Duration::from_micros(10);
        cfg.idle_marker_repeats = 2;
        let mut tx = Striper::new(cfg).unwrap();
        let mut out = Vec::new();
        assert_eq!(tx.poll_at(), None);
        let t0 = Instant::from_micros(5);
        tx.push_cell(t0, &[0; 48], CellFlags::default(), &mut out)
            .unwrap();
        assert_eq!(tx.poll_at(), Some(Instant::from_micros(15)));
        tx.handle_timeout(Instant::from_micros(14), &mut out);
        assert_eq!(out.len(), 1);
        tx.handle_timeout(Instant::from_micros(40), &mut out);
        assert_eq!(out.len(), 5);
        assert_eq!(tx.poll_at(), None);
        let m = Marker::parse(format::payload_of(&out[1].1)).unwrap();
        assert!(m.idle);
    }

    #[test]
    fn ip_units_are_checked() {
        let mut tx = Striper::new(Config::new(UnitKind::IpPacket, SyncMode::None, vcs(2))).unwrap();
        let mut out = Vec::new();
        let mut v4 = vec![0u8; 28];
        v4[0] = 0x45;
        v4[3] = 28;
        tx.push_ip(Instant::ZERO, &v4, &mut out).unwrap();
        v4[3] = 27;
        assert!(matches!(
            tx.push_ip(Instant::ZERO, &v4, &mut out),
            Err(TxError::NotIp(_))
        ));
        assert!(matches!(
            tx.push_pdu(Instant::ZERO, &v4, &mut out),
            Err(TxError::WrongUnit { .. })
        ));
        assert_eq!(tx.stats().units, 1);
        assert_eq!(tx.stats().refused, 2);
    }
}
