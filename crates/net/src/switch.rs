//! The ATM cell switch, standard form: each input port has a translation
//! table, VC entries (VPI/VCI → output port, new VPI/VCI) and VP
//! cross-connects (VPI → output port, new VPI, VCI kept). Every arriving
//! header is HEC-checked (single-bit errors corrected, as I.432 allows), the
//! header is rewritten and its HEC regenerated on output. The crossbar moves
//! a cell to its output at once; each output's FIFO is the transmit buffer
//! of the link on that port, which the driver models (bounded, counted).
//!
//! **Usage parameter control.** A VC entry may be policed
//! ([`AtmSwitch::police`]): each cell arriving for it is judged by its
//! [`Upc`] after the HEC check and before it is switched. A cell that
//! conforms goes on as it came; one the UPC tags goes on with CLP = 1 (its
//! output HEC made for that header); one it drops is counted under
//! [`SwitchDrop::Policed`] and shown to the driver as `upc_drop`, so the
//! accounting ledger charges its PDU to this port's arrival side.
//!
//! Which cells are policed: every cell the VC entry carries on along the
//! VC — user cells (PTI 0–3), end-to-end F5 OAM cells (PTI 5), resource
//! management cells (PTI 6) and the reserved PTI 7 — as the CLP=0+1 flow
//! of the connection, which is what I.371 and TM 4.0 count a VCC's peak
//! rate over (end-to-end OAM and RM cells included). Segment F5 OAM cells
//! (PTI 4) are not: each link is a segment, so they end at this switch
//! (answered or dropped) and never enter the connection beyond it. F4 OAM
//! cells (VCI 3, 4) belong to the path, not to a VC entry, and cells a VP
//! cross-connect carries are not policed (UPC here is per VCC). A host's
//! end-to-end pings on a policed VC are therefore part of its flow as far
//! as the policer is concerned, and a host that shapes the VC's flow
//! shapes them with it (see [`crate::traffic`]).
//!
//! The VC entry holds the index of its policer, so a cell of an unpoliced
//! VC costs one test of a field the switch reads anyway: no lookup.

use aurora_time::Instant;
use aurora_tm::{Upc, UpcCounters, Verdict};
use aurora_wire::cell::{Format, Header, VcId, VCI_F4_END_TO_END, VCI_F4_SEGMENT};
use aurora_wire::hec::HecReceiver;
use aurora_wire::oam::OamFlow;
use aurora_wire::CellBytes;
use rustc_hash::FxHashMap;

use crate::{Node, Outbox, PortId};

/// Why the switch dropped a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SwitchDrop {
    /// The header failed the HEC check.
    Hec,
    /// No VC entry and no VP cross-connect for the cell on its input port.
    UnknownVc,
    /// An idle or unassigned cell (physical-layer fill, not forwarded).
    Idle,
    /// Arrived on a port the switch does not have.
    BadPort,
    /// A segment OAM cell that is not a loopback request: each link is a
    /// segment, so it ends here.
    SegmentOam,
    /// Not conforming to its VC's traffic contract, and the VC's usage
    /// parameter control drops such cells.
    Policed,
}

impl SwitchDrop {
    /// How many reasons there are.
    pub const COUNT: usize = 6;

    /// Every reason, in the order of [`PortCounters::drops`].
    pub const ALL: [SwitchDrop; SwitchDrop::COUNT] = [
        SwitchDrop::Hec,
        SwitchDrop::UnknownVc,
        SwitchDrop::Idle,
        SwitchDrop::BadPort,
        SwitchDrop::SegmentOam,
        SwitchDrop::Policed,
    ];

    /// The name a lost data cell is charged under, or `None` for cells
    /// that carry no user data (idle cells, segment OAM).
    pub fn loss_name(self) -> Option<&'static str> {
        match self {
            SwitchDrop::Hec => Some("hec_uncorrectable"),
            SwitchDrop::UnknownVc => Some("unknown_vc"),
            SwitchDrop::BadPort => Some("bad_port"),
            SwitchDrop::Policed => Some("upc_drop"),
            SwitchDrop::Idle | SwitchDrop::SegmentOam => None,
        }
    }
}

/// Per-port counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Cells that arrived on the port.
    pub cells_in: u64,
    /// Cells sent out of the port.
    pub cells_out: u64,
    /// Headers repaired on arrival.
    pub hec_corrected: u64,
    /// Arriving cells dropped, by [`SwitchDrop`].
    pub drops: [u64; SwitchDrop::COUNT],
    /// Segment loopback requests answered (sent back out of this port).
    pub oam_looped: u64,
    /// Arriving cells tagged (CLP set to 1) by their VC's usage parameter
    /// control, and switched on.
    pub tagged: u64,
}

impl PortCounters {
    /// Drops for one reason.
    pub fn dropped(&self, r: SwitchDrop) -> u64 {
        self.drops[r as usize]
    }
    /// All drops on arrival.
    pub fn dropped_total(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// Why a table entry was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableError {
    /// The port number is beyond the switch's ports.
    NoSuchPort(PortId),
    /// The VPI or VCI does not fit the switch's header format.
    Range(VcId),
    /// The input VC (or VP) already has an entry.
    Taken(PortId, VcId),
    /// The input VC has no entry (to police, a VC needs one).
    NoEntry(PortId, VcId),
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableError::NoSuchPort(p) => write!(f, "the switch has no port {p}"),
            TableError::Range(vc) => write!(f, "VC {vc} does not fit the switch's header format"),
            TableError::Taken(p, vc) => write!(f, "VC {vc} on port {p} already has an entry"),
            TableError::NoEntry(p, vc) => write!(f, "VC {vc} on port {p} has no entry"),
        }
    }
}

impl std::error::Error for TableError {}

/// A VC entry with its headers precomputed: the low four bits of header
/// byte 3 (PTI and CLP) pass through, so each entry keeps the HEC of its
/// input and output header for all 16 of their values. A cell whose HEC
/// matches is valid and is rewritten without computing a CRC.
#[derive(Debug)]
struct VcEntry {
    out: PortId,
    out_vc: VcId,
    /// Output header bytes 0..4 with the low four bits of byte 3 clear.
    out_base: u32,
    in_hec: [u8; 16],
    out_hec: [u8; 16],
    /// Its policer, an index into [`AtmSwitch::policers`], if it is policed.
    upc: Option<u32>,
}

impl VcEntry {
    fn new(format: Format, in_vc: VcId, out: PortId, out_vc: VcId) -> Option<Self> {
        let base = |vc: VcId| -> Option<u32> {
            Header {
                format,
                ..Header::data(vc)
            }
            .to_bytes4()
            .ok()
            .map(u32::from_be_bytes)
        };
        let (ib, ob) = (base(in_vc)?, base(out_vc)?);
        let hecs = |b: u32| -> [u8; 16] {
            core::array::from_fn(|low| aurora_wire::crc::hec(&(b | low as u32).to_be_bytes()))
        };
        Some(VcEntry {
            out,
            out_vc,
            out_base: ob,
            in_hec: hecs(ib),
            out_hec: hecs(ob),
            upc: None,
        })
    }
}

#[derive(Debug, Default)]
struct Table {
    vc: FxHashMap<VcId, VcEntry>,
    vp: FxHashMap<u16, (PortId, u16)>,
}

/// One policed VC: where, and its policer.
#[derive(Debug)]
struct Policer {
    port: PortId,
    vc: VcId,
    upc: Upc,
}

/// A standard ATM cell switch with any number of ports.
#[derive(Debug)]
pub struct AtmSwitch {
    format: Format,
    tables: Vec<Table>,
    hec: Vec<HecReceiver>,
    counters: Vec<PortCounters>,
    policers: Vec<Policer>,
}

/// What the usage parameter control of a cell's VC decided.
enum Policing {
    Pass,
    Tag,
    Drop,
}

/// Polices a cell with cell loss priority `clp` at `now` if `upc` names a
/// policer; counts a tag on `port`.
#[inline]
fn police(
    policers: &mut [Policer],
    upc: Option<u32>,
    now: Instant,
    clp: bool,
    port: &mut PortCounters,
) -> Policing {
    let Some(p) = upc.and_then(|i| policers.get_mut(i as usize)) else {
        return Policing::Pass;
    };
    match p.upc.police(now, clp) {
        Verdict::Pass => Policing::Pass,
        Verdict::Tag => {
            port.tagged += 1;
            Policing::Tag
        }
        Verdict::Drop => Policing::Drop,
    }
}

impl AtmSwitch {
    /// A switch with `ports` ports and empty tables.
    pub fn new(ports: usize, format: Format) -> Self {
        AtmSwitch {
            format,
            tables: (0..ports).map(|_| Table::default()).collect(),
            hec: (0..ports).map(|_| HecReceiver::new()).collect(),
            counters: vec![PortCounters::default(); ports],
            policers: Vec::new(),
        }
    }

    fn check(&self, port: PortId, vc: VcId) -> Result<(), TableError> {
        if usize::from(port) >= self.tables.len() {
            return Err(TableError::NoSuchPort(port));
        }
        if vc.vpi > self.format.max_vpi() {
            return Err(TableError::Range(vc));
        }
        Ok(())
    }

    /// Cells arriving on `in_port` for `in_vc` leave on `out_port` as `out_vc`.
    pub fn add_vc(
        &mut self,
        in_port: PortId,
        in_vc: VcId,
        out_port: PortId,
        out_vc: VcId,
    ) -> Result<(), TableError> {
        self.check(in_port, in_vc)?;
        self.check(out_port, out_vc)?;
        let t = &mut self.tables[usize::from(in_port)];
        if t.vc.contains_key(&in_vc) {
            return Err(TableError::Taken(in_port, in_vc));
        }
        let e =
            VcEntry::new(self.format, in_vc, out_port, out_vc).ok_or(TableError::Range(in_vc))?;
        t.vc.insert(in_vc, e);
        Ok(())
    }

    /// Every VC of path `in_vpi` arriving on `in_port` leaves on `out_port`
    /// in path `out_vpi`, VCI unchanged (a VP cross-connect).
    pub fn add_vp(
        &mut self,
        in_port: PortId,
        in_vpi: u16,
        out_port: PortId,
        out_vpi: u16,
    ) -> Result<(), TableError> {
        self.check(in_port, VcId::new(in_vpi, 0))?;
        self.check(out_port, VcId::new(out_vpi, 0))?;
        let t = &mut self.tables[usize::from(in_port)];
        if t.vp.contains_key(&in_vpi) {
            return Err(TableError::Taken(in_port, VcId::new(in_vpi, 0)));
        }
        t.vp.insert(in_vpi, (out_port, out_vpi));
        Ok(())
    }

    /// Polices the cells arriving on `in_port` for `in_vc` with `upc`
    /// (usage parameter control; see the [module](self) documentation for
    /// which cells). The VC must have an entry ([`AtmSwitch::add_vc`]);
    /// policing it again replaces its policer, counts and all.
    pub fn police(&mut self, in_port: PortId, in_vc: VcId, upc: Upc) -> Result<(), TableError> {
        self.check(in_port, in_vc)?;
        let e = self.tables[usize::from(in_port)]
            .vc
            .get_mut(&in_vc)
            .ok_or(TableError::NoEntry(in_port, in_vc))?;
        match e.upc {
            Some(i) => self.policers[i as usize].upc = upc,
            None => {
                e.upc = Some(self.policers.len() as u32);
                self.policers.push(Policer {
                    port: in_port,
                    vc: in_vc,
                    upc,
                });
            }
        }
        Ok(())
    }

    /// What the usage parameter control of `in_vc` on `in_port` has done
    /// so far (cells passed, tagged, dropped); `None` if it is not policed.
    pub fn police_counters(&self, in_port: PortId, in_vc: VcId) -> Option<UpcCounters> {
        let e = self.tables.get(usize::from(in_port))?.vc.get(&in_vc)?;
        Some(self.policers[e.upc? as usize].upc.counters())
    }

    /// Every policed VC, as (input port, input VC, counts), in the order
    /// they were first policed.
    pub fn policed(&self) -> impl Iterator<Item = (PortId, VcId, UpcCounters)> + '_ {
        self.policers
            .iter()
            .map(|p| (p.port, p.vc, p.upc.counters()))
    }

    /// A port's counters.
    pub fn counters(&self, port: PortId) -> Option<PortCounters> {
        self.counters.get(usize::from(port)).copied()
    }

    /// Where a cell with this header, arriving on `port`, goes, and the
    /// policer of the VC entry that sends it there, if any.
    fn route(&self, port: PortId, h: &Header) -> Option<(PortId, Header, Option<u32>)> {
        let t = &self.tables[usize::from(port)];
        // F4 OAM cells (VCI 3, 4) belong to the path, not to a VC entry.
        let f4 = h.vci == VCI_F4_SEGMENT || h.vci == VCI_F4_END_TO_END;
        if !f4 {
            if let Some(e) = t.vc.get(&h.vc()) {
                return Some((
                    e.out,
                    Header {
                        vpi: e.out_vc.vpi,
                        vci: e.out_vc.vci,
                        ..*h
                    },
                    e.upc,
                ));
            }
        }
        t.vp.get(&h.vpi)
            .map(|&(out, vpi)| (out, Header { vpi, ..*h }, None))
    }
}

impl Node for AtmSwitch {
    fn ports(&self) -> usize {
        self.tables.len()
    }

    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        let p = usize::from(port);
        if p >= self.tables.len() {
            return;
        }
        self.counters[p].cells_in += cells.len() as u64;
        // Cells of one PDU come in runs on one VC: the entry of the cell
        // before, by the header bits that name its VC, saves a table
        // look-up; and the cells found valid are noted in the HEC check's
        // books once a run, before any cell the slow path checks.
        let mut cached: Option<(u32, &VcEntry)> = None;
        let mut valid = 0u64;
        for cell in cells {
            // Fast path: a VC entry whose precomputed HEC matches. Segment
            // OAM cells (F5 PTI 4, F4 VCI 3) end here, so they take the
            // slow path, classified only after the HEC check.
            let h4 = u32::from_be_bytes([cell[0], cell[1], cell[2], cell[3]]);
            let mut low = (h4 & 0xF) as usize;
            let entry = match cached {
                Some((key, e)) if key == h4 >> 4 => Some(e),
                _ => {
                    let vc = Header::parse(&h4.to_be_bytes(), self.format).vc();
                    let is_f4 = vc.vci == VCI_F4_SEGMENT || vc.vci == VCI_F4_END_TO_END;
                    let e = self.tables[p]
                        .vc
                        .get(&vc)
                        .filter(|e| !is_f4 && usize::from(e.out) < self.tables.len());
                    cached = e.map(|e| (h4 >> 4, e));
                    e
                }
            };
            if let Some(e) = entry.filter(|e| low >> 1 != 0b100 && cell[4] == e.in_hec[low]) {
                if e.upc.is_some() {
                    match police(
                        &mut self.policers,
                        e.upc,
                        now,
                        low & 1 != 0,
                        &mut self.counters[p],
                    ) {
                        Policing::Pass => {}
                        // The output HEC of the tagged header is
                        // precomputed like any other.
                        Policing::Tag => low |= 1,
                        Policing::Drop => {
                            valid += 1;
                            self.counters[p].drops[SwitchDrop::Policed as usize] += 1;
                            out.dropped(port, cell, "upc_drop");
                            continue;
                        }
                    }
                }
                let mut c = *cell;
                c[..4].copy_from_slice(&(e.out_base | low as u32).to_be_bytes());
                c[4] = e.out_hec[low];
                valid += 1;
                self.counters[usize::from(e.out)].cells_out += 1;
                out.push(e.out, c);
                continue;
            }
            aurora_wire::hec::HeaderCheck::note_valid(&mut self.hec[p], valid);
            valid = 0;
            let mut c = *cell;
            let verdict = self.hec[p].check_cell(&mut c);
            let reason = match verdict {
                aurora_wire::hec::HecVerdict::Discarded => Some(SwitchDrop::Hec),
                v => {
                    if let aurora_wire::hec::HecVerdict::Corrected(_) = v {
                        self.counters[p].hec_corrected += 1;
                    }
                    let h = Header::parse(&[c[0], c[1], c[2], c[3]], self.format);
                    let segment = OamFlow::of(&h)
                        .filter(|f| matches!(f, OamFlow::F5Segment | OamFlow::F4Segment));
                    if h.is_idle() || h.is_unassigned() {
                        Some(SwitchDrop::Idle)
                    } else if let Some(flow) = segment {
                        // Each link is a segment: a loopback request goes
                        // back out of its arrival port; any other segment
                        // OAM cell ends here.
                        match crate::oam::loopback_answer(&c, self.format, flow) {
                            Some(a) => {
                                self.counters[p].oam_looped += 1;
                                self.counters[p].cells_out += 1;
                                out.push(port, a);
                                None
                            }
                            None => Some(SwitchDrop::SegmentOam),
                        }
                    } else {
                        match self.route(port, &h) {
                            Some((to, mut nh, upc)) if usize::from(to) < self.tables.len() => {
                                let verdict = police(
                                    &mut self.policers,
                                    upc,
                                    now,
                                    nh.clp,
                                    &mut self.counters[p],
                                );
                                if let Policing::Tag = verdict {
                                    nh.clp = true;
                                }
                                // Fields were range-checked when the entry was made.
                                if let Policing::Drop = verdict {
                                    Some(SwitchDrop::Policed)
                                } else if nh.emit(&mut c).is_ok() {
                                    self.counters[usize::from(to)].cells_out += 1;
                                    out.push(to, c);
                                    None
                                } else {
                                    Some(SwitchDrop::UnknownVc)
                                }
                            }
                            Some(_) => Some(SwitchDrop::BadPort),
                            None => Some(SwitchDrop::UnknownVc),
                        }
                    }
                }
            };
            if let Some(r) = reason {
                self.counters[p].drops[r as usize] += 1;
                if let Some(name) = r.loss_name() {
                    out.dropped(port, cell, name);
                }
            }
        }
        aurora_wire::hec::HeaderCheck::note_valid(&mut self.hec[p], valid);
    }

    fn poll(&mut self, _now: Instant, _out: &mut Outbox) {}

    fn poll_at(&self) -> Option<Instant> {
        None
    }

    fn port_summary(&self, port: PortId) -> Option<crate::PortSummary> {
        let c = self.counters(port)?;
        Some(crate::PortSummary {
            cells_in: c.cells_in,
            cells_out: c.cells_out,
            dropped: c.dropped_total(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_wire::cell::{build_cell, Pti};

    fn cell(vc: VcId, pti: Pti) -> CellBytes {
        build_cell(
            &Header {
                pti,
                ..Header::data(vc)
            },
            &[7; 48],
        )
        .unwrap()
    }

    #[test]
    fn translates_vcs_and_vps_and_counts_the_rest() {
        let mut s = AtmSwitch::new(4, Format::Uni);
        s.add_vc(0, VcId::new(0, 100), 2, VcId::new(5, 200))
            .unwrap();
        s.add_vp(1, 7, 3, 9).unwrap();
        assert!(s.add_vc(0, VcId::new(0, 100), 1, VcId::new(0, 1)).is_err());
        assert!(s.add_vc(9, VcId::new(0, 1), 1, VcId::new(0, 1)).is_err());
        let mut out = Outbox::default();
        let mut bad = cell(VcId::new(0, 100), Pti::DATA);
        bad[1] ^= 0x01; // one bit: corrected
        s.receive(
            Instant::ZERO,
            0,
            &[cell(VcId::new(0, 100), Pti::DATA_END), bad],
            &mut out,
        );
        s.receive(
            Instant::ZERO,
            1,
            &[
                cell(VcId::new(7, 33), Pti::DATA),
                cell(VcId::new(7, VCI_F4_END_TO_END), Pti::DATA),
            ],
            &mut out,
        );
        s.receive(
            Instant::ZERO,
            2,
            &[cell(VcId::new(0, 55), Pti::DATA)],
            &mut out,
        );
        let sent: Vec<_> = out.drain().collect();
        assert_eq!(sent.len(), 4);
        let h = |c: &CellBytes| Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni);
        assert_eq!(sent[0].0, 2);
        assert_eq!(h(&sent[0].1).vc(), VcId::new(5, 200));
        assert_eq!(h(&sent[0].1).pti, Pti::DATA_END, "PTI kept");
        assert!(aurora_wire::cell::Cell::new_checked(&sent[0].1[..])
            .unwrap()
            .hec_ok());
        assert_eq!(
            h(&sent[2].1).vc(),
            VcId::new(9, 33),
            "VP cross-connect keeps the VCI"
        );
        assert_eq!(
            h(&sent[3].1).vc(),
            VcId::new(9, VCI_F4_END_TO_END),
            "F4 OAM follows the path"
        );
        assert_eq!(s.counters(0).unwrap().hec_corrected, 1);
        assert_eq!(s.counters(2).unwrap().dropped(SwitchDrop::UnknownVc), 1);
        assert_eq!(s.counters(2).unwrap().cells_out, 2);
    }

    #[test]
    fn a_corrected_header_is_classified_after_correction() {
        // A user cell whose PTI took a one-bit error that makes it look like
        // segment OAM: the HEC check repairs it and it is switched as data.
        let mut s = AtmSwitch::new(2, Format::Uni);
        s.add_vc(0, VcId::new(0, 40), 1, VcId::new(0, 41)).unwrap();
        let mut c = cell(
            VcId::new(0, 40),
            Pti::User {
                congestion: false,
                auu: false,
            },
        );
        c[3] ^= 0x08;
        let mut out = Outbox::default();
        s.receive(Instant::ZERO, 0, &[c], &mut out);
        let sent: Vec<_> = out.drain().collect();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0, 1);
        assert_eq!(sent[0].1[3] & 0x0E, 0, "user PTI restored");
        let k = s.counters(0).unwrap();
        assert_eq!(k.hec_corrected, 1);
        assert_eq!(k.dropped(SwitchDrop::SegmentOam), 0);
    }

    #[test]
    fn the_precomputed_path_keeps_pti_and_clp_and_makes_valid_hecs() {
        let mut s = AtmSwitch::new(2, Format::Uni);
        s.add_vc(0, VcId::new(3, 1000), 1, VcId::new(200, 65535))
            .unwrap();
        for low in 0..16u8 {
            let h = Header {
                pti: Pti::from_bits(low >> 1),
                clp: low & 1 != 0,
                ..Header::data(VcId::new(3, 1000))
            };
            let mut out = Outbox::default();
            s.receive(
                Instant::ZERO,
                0,
                &[build_cell(&h, &[low; 48]).unwrap()],
                &mut out,
            );
            if h.pti == Pti::OamSegment {
                // Segment OAM ends at the switch (each link is a segment).
                assert!(out.drain().next().is_none());
                continue;
            }
            let (port, c) = out.drain().next().unwrap();
            assert_eq!(port, 1);
            let view = aurora_wire::cell::Cell::new_checked(&c[..]).unwrap();
            assert!(view.hec_ok(), "variant {low}");
            let got = view.header(Format::Uni);
            assert_eq!(
                got,
                Header {
                    vpi: 200,
                    vci: 65535,
                    ..h
                }
            );
            assert_eq!(view.payload(), &[low; 48]);
        }
        assert_eq!(s.counters(0).unwrap().cells_in, 16);
        assert_eq!(s.counters(0).unwrap().dropped(SwitchDrop::SegmentOam), 2);
        assert_eq!(s.counters(1).unwrap().cells_out, 14);
    }

    fn at(ns: i64) -> Instant {
        Instant::from_nanos(ns)
    }

    fn header(c: &CellBytes) -> Header {
        let view = aurora_wire::cell::Cell::new_checked(&c[..]).unwrap();
        assert!(view.hec_ok());
        view.header(Format::Uni)
    }

    /// GCRA(10 ns, 0): cells 10 ns apart conform, one between does not.
    fn upc(action: aurora_tm::Action) -> Upc {
        let c = aurora_tm::Contract::peak(100_000_000, aurora_time::Duration::ZERO).unwrap();
        Upc::new(&c, aurora_tm::Definition::Clp01, action)
    }

    #[test]
    fn police_needs_an_entry_and_replaces_a_policer() {
        let (vc, out_vc) = (VcId::new(0, 40), VcId::new(0, 41));
        let mut s = AtmSwitch::new(2, Format::Uni);
        assert_eq!(
            s.police(0, vc, upc(aurora_tm::Action::Drop)),
            Err(TableError::NoEntry(0, vc))
        );
        assert_eq!(
            s.police(5, vc, upc(aurora_tm::Action::Drop)),
            Err(TableError::NoSuchPort(5))
        );
        s.add_vc(0, vc, 1, out_vc).unwrap();
        s.add_vp(0, 9, 1, 9).unwrap();
        assert_eq!(
            s.police(0, VcId::new(9, 50), upc(aurora_tm::Action::Drop)),
            Err(TableError::NoEntry(0, VcId::new(9, 50))),
            "a VP cross-connect's VCs are not policed"
        );
        assert_eq!(s.police_counters(0, vc), None);
        s.police(0, vc, upc(aurora_tm::Action::Drop)).unwrap();
        let mut out = Outbox::default();
        s.receive(at(0), 0, &[cell(vc, Pti::DATA)], &mut out);
        s.receive(at(1), 0, &[cell(vc, Pti::DATA)], &mut out);
        assert_eq!(s.police_counters(0, vc).unwrap().dropped_nonconforming, 1);
        // Again: a new policer, new counts, in the same place.
        s.police(0, vc, upc(aurora_tm::Action::Tag)).unwrap();
        assert_eq!(
            s.police_counters(0, vc),
            Some(aurora_tm::UpcCounters::default())
        );
        assert_eq!(s.policed().count(), 1);
        assert_eq!(s.police_counters(1, vc), None);
    }

    #[test]
    fn policing_tags_or_drops_on_both_paths_and_tells_the_driver() {
        let (vc, out_vc) = (VcId::new(0, 40), VcId::new(3, 41));
        for action in [aurora_tm::Action::Tag, aurora_tm::Action::Drop] {
            let mut s = AtmSwitch::new(2, Format::Uni);
            s.add_vc(0, vc, 1, out_vc).unwrap();
            s.police(0, vc, upc(action)).unwrap();
            let mut out = Outbox::default();
            out.track_drops(true);
            // 0 conforms; 5 does not (fast path); 10 conforms; 12 does not
            // and arrives with a one-bit header error (the slow path).
            let mut bad = cell(vc, Pti::DATA_END);
            bad[2] ^= 0x10;
            for (t, c) in [
                (0, cell(vc, Pti::DATA)),
                (5, cell(vc, Pti::DATA)),
                (10, cell(vc, Pti::DATA)),
                (12, bad),
            ] {
                s.receive(at(t), 0, &[c], &mut out);
            }
            let sent: Vec<_> = out.drain().collect();
            let drops: Vec<_> = out.drain_drops().collect();
            let k = s.counters(0).unwrap();
            assert_eq!(k.hec_corrected, 1);
            match action {
                aurora_tm::Action::Tag => {
                    assert_eq!(sent.len(), 4);
                    let clp: Vec<bool> = sent.iter().map(|(_, c)| header(c).clp).collect();
                    assert_eq!(clp, [false, true, false, true]);
                    for (p, c) in &sent {
                        assert_eq!(*p, 1);
                        assert_eq!(header(c).vc(), out_vc);
                    }
                    assert_eq!(header(&sent[3].1).pti, Pti::DATA_END);
                    assert!(drops.is_empty());
                    assert_eq!((k.tagged, k.dropped_total()), (2, 0));
                    let u = s.police_counters(0, vc).unwrap();
                    assert_eq!((u.conforming, u.tagged), (2, 2));
                }
                aurora_tm::Action::Drop => {
                    assert_eq!(sent.len(), 2);
                    assert!(sent.iter().all(|(_, c)| !header(c).clp));
                    assert_eq!(drops.len(), 2);
                    assert!(drops
                        .iter()
                        .all(|(p, _, why)| *p == 0 && *why == "upc_drop"));
                    assert_eq!(drops[1].1, bad, "the cell as it arrived");
                    assert_eq!((k.tagged, k.dropped(SwitchDrop::Policed)), (0, 2));
                    assert_eq!(k.dropped_total(), 2);
                    let u = s.police_counters(0, vc).unwrap();
                    assert_eq!((u.conforming, u.dropped_nonconforming), (2, 2));
                }
            }
            assert_eq!(s.counters(1).unwrap().cells_out, sent.len() as u64);
        }
    }

    #[test]
    fn end_to_end_oam_is_policed_and_segment_oam_is_not() {
        use aurora_wire::oam::{OamFlow, OamRepr};
        let vc = VcId::new(1, 77);
        let mut s = AtmSwitch::new(2, Format::Uni);
        s.add_vc(0, vc, 1, vc).unwrap();
        s.police(0, vc, upc(aurora_tm::Action::Drop)).unwrap();
        let oam = |flow: OamFlow| {
            let p = OamRepr::loopback_request(1, [9; 16]).emit();
            build_cell(&flow.header(vc), &p).unwrap()
        };
        let mut out = Outbox::default();
        // A user cell at 0 uses the peak interval up to 10: the
        // end-to-end OAM cell at 3 is part of the VC's flow and is dropped;
        // the segment request at 4 ends here, answered, and is not judged.
        s.receive(at(0), 0, &[cell(vc, Pti::DATA)], &mut out);
        s.receive(at(3), 0, &[oam(OamFlow::F5EndToEnd)], &mut out);
        s.receive(at(4), 0, &[oam(OamFlow::F5Segment)], &mut out);
        // At 10 an end-to-end cell conforms and is switched; then a user
        // cell at 15 does not, since the OAM cell used the interval.
        s.receive(at(10), 0, &[oam(OamFlow::F5EndToEnd)], &mut out);
        s.receive(at(15), 0, &[cell(vc, Pti::DATA)], &mut out);
        let sent: Vec<_> = out.drain().collect();
        assert_eq!(sent.len(), 3);
        assert_eq!(sent[1].0, 0, "the loopback answer goes back");
        let u = s.police_counters(0, vc).unwrap();
        assert_eq!((u.conforming, u.dropped_nonconforming), (2, 2));
        let k = s.counters(0).unwrap();
        assert_eq!((k.oam_looped, k.dropped(SwitchDrop::Policed)), (1, 2));
    }
}
