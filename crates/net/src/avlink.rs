//! The AVlink: a bridge between a VuNet and a standard ATM WAN, built as
//! VuNet's view of the WAN.
//!
//! Port 0 is the VuNet side, port 1 the WAN side. Towards the VuNet the
//! AVlink is a relaying link like any other ([`crate::vunet::VunetLink`],
//! whose tables, keys, ownership, lifetimes and control-cell handling it
//! uses as they are): it has a relay id, carries out the control cells
//! that name it, and holds a remap table the control cells write:
//!
//! - table 0, cells from the VuNet: VuNet VCI → WAN VCI, on the WAN VPI of
//!   its [`WanPlan`] (the routing bits of such an entry mean nothing: no
//!   VuNet switch follows on the WAN side);
//! - table 1, cells from the WAN: WAN VCI → VuNet VCI and the routing bits
//!   of the VuNet switch after the AVlink.
//!
//! A WAN VCI an entry names must be one of the **pool** of data VCs the
//! WAN's switches cross-connect (out of band, as PVCs) between this AVlink
//! and the one at the far end, and not one a management entry holds or
//! another key's entry already sends on; a
//! control cell that names another is refused with status 3 and counted
//! (`refused_pool`); a management port's writes are held to the pool
//! too, though they may name management's own VCIs. Which pool VC a
//! VuNet VC takes is the writer's choice: the opener's write to the
//! AVlink names it.
//!
//! **Control cells across the WAN.** The WAN's switches know nothing of
//! VuNet's in-band control, so the AVlinks carry it on one VC of their own,
//! the **control VC** ([`WanPlan::control`], by default `1.30`: VCI 30, as
//! VuNet's control VCI, on the WAN VPI), which the WAN cross-connects like
//! the pool. A control cell from the VuNet whose hop count is not 0 is
//! passed on as a relay passes it (one hop off, the next route nibble
//! taken), then leaves on the control VC; the far AVlink takes it off the
//! control VC and treats it as a control cell arriving on its WAN side:
//! the target if its hop count is now 0, else passed on into its VuNet.
//! Replies come back the same way. The WAN counts as the "switch" between
//! two AVlinks: the route nibble for it is used up and its bits dropped,
//! since a WAN cell carries no routing bits. So a host opens a VC across
//! the WAN with the same [`Route`](crate::vunet::Route)s and the same
//! library call as inside one VuNet, putting 0 in the route for the WAN
//! hop. Control cells from the WAN are never trusted as a management
//! port's would be: they must carry a key's tag.
//!
//! **Cell formats.** A VuNet cell is 56 bytes: four header bytes (routing
//! bits in the GFC), four reserved, the payload on a 64-bit boundary
//! ([`aurora_wire::vunet`]). Aurora's nodes all exchange 53-byte frames,
//! so a VuNet link in a run carries the 53-byte form of a VuNet cell (its
//! header with a HEC, which Aurora's VuNet nodes check). The AVlink
//! converts through the 56-byte layout either way: a VuNet cell's header
//! is rewritten there (WAN VC, no routing bits, the WAN's header format)
//! and the 53-byte WAN cell made from it with a fresh HEC; a WAN cell's
//! HEC is checked (single-bit errors repaired, as I.432 allows), its
//! payload put in a 56-byte cell under the VuNet header (VPI 0, the
//! entry's VCI and routing bits) and that given to the VuNet in 53-byte
//! form. PTI and CLP pass through.
//!
//! **Losses.** Every cell dropped is counted and shown to the driver's
//! drop tap with its reason: `hec_uncorrectable`, `unknown_vc` (no entry,
//! or a WAN VC that is neither the control VC nor on the pool's VPI),
//! `control_malformed` (a control cell whose route has run out),
//! `control_refused` (the relay logic refused a control cell: no key, bad
//! tag, replay, another relay's, an unknown command).
//!
//! **Bounds.** The tables are the relaying link's: two of 65,536 entries,
//! allocated once. Nothing grows with traffic.

use std::collections::BTreeSet;

use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::hec::{HecReceiver, HecVerdict};
use aurora_wire::vunet::{build_vucell, from_atm, set_header, VuCell};
use aurora_wire::{CellBytes, HEADER_LEN};

use crate::vunet::{pass_on, LinkNodeCounters, VunetLink, WanPool, VCI_LINK_CONTROL};
use crate::{Node, Outbox, PortId, PortSummary};

/// The AVlink's VuNet side.
pub const PORT_VUNET: PortId = 0;
/// The AVlink's WAN side.
pub const PORT_WAN: PortId = 1;

/// How an AVlink meets its WAN: the header format, the control VC and the
/// pool of data VCs the WAN cross-connects to the far AVlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WanPlan {
    /// The WAN's header format.
    pub format: Format,
    /// The VC carrying VuNet control cells between the two AVlinks.
    pub control: VcId,
    /// The pool's VPI.
    pub vpi: u16,
    /// The pool's first VCI.
    pub first: u16,
    /// How many VCs the pool has (VCIs `first` to `first + count - 1`).
    pub count: u16,
}

impl Default for WanPlan {
    /// UNI headers, control VC 1.30, a pool of 64 VCs 1.32 to 1.95 (the
    /// connection library's VCI table hands out VCIs from 32 up, so a
    /// pool starting there is used from its bottom).
    fn default() -> Self {
        WanPlan {
            format: Format::Uni,
            control: VcId::new(1, VCI_LINK_CONTROL),
            vpi: 1,
            first: 32,
            count: 64,
        }
    }
}

impl WanPlan {
    /// Whether the plan can work: VPIs fit the format, the pool is not
    /// empty and fits in 16-bit VCIs, and the control VC is not in it.
    pub fn check(&self) -> Result<(), String> {
        let max = self.format.max_vpi();
        if self.vpi > max || self.control.vpi > max {
            return Err(format!(
                "a WAN VPI is above {max}, the most the format carries"
            ));
        }
        if self.count == 0 {
            return Err("the WAN pool has no VCs".into());
        }
        if u32::from(self.first) + u32::from(self.count) > 65536 {
            return Err("the WAN pool runs past VCI 65535".into());
        }
        if self.first < aurora_wire::cell::VCI_FIRST_USER {
            return Err("the WAN pool starts below VCI 32, among the reserved VCIs".into());
        }
        if self.in_pool(self.control) {
            return Err(format!("the control VC {} is in the pool", self.control));
        }
        Ok(())
    }

    /// True if `vc` is one of the pool's VCs.
    pub fn in_pool(&self, vc: VcId) -> bool {
        vc.vpi == self.vpi
            && vc.vci >= self.first
            && u32::from(vc.vci) < u32::from(self.first) + u32::from(self.count)
    }

    /// The pool's VCs, lowest first.
    pub fn pool(&self) -> impl Iterator<Item = VcId> + '_ {
        (0..self.count).map(|i| VcId::new(self.vpi, self.first + i))
    }
}

/// What an AVlink has done (its relay logic's own counts are in
/// [`Avlink::relay_counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AvlinkCounters {
    /// Data cells from the VuNet sent onto the WAN.
    pub to_wan: u64,
    /// Data cells from the WAN sent into the VuNet.
    pub to_vunet: u64,
    /// Control cells from the VuNet passed onto the WAN's control VC.
    pub control_to_wan: u64,
    /// Control cells that came off the WAN's control VC.
    pub control_from_wan: u64,
    /// Replies to control cells carried out here that left on the WAN.
    pub replies_to_wan: u64,
    /// Cells dropped, no entry for their VC: from the VuNet, from the WAN.
    pub unmapped: [u64; 2],
    /// Cells dropped, header failed the HEC check: VuNet side, WAN side.
    pub hec_discarded: [u64; 2],
    /// Control cells dropped whose route had run out.
    pub control_malformed: u64,
    /// Control cells the relay logic refused without an answer (see its
    /// counters for why); writes refused with an answer are counted there
    /// only (`refused_owner`, `refused_pool`).
    pub control_refused: u64,
}

/// The AVlink node (see the module docs).
pub struct Avlink {
    relay: VunetLink,
    plan: WanPlan,
    hec: [HecReceiver; 2],
    counters: AvlinkCounters,
    ports: [PortSummary; 2],
    /// Replies of the relay logic, before they are converted.
    scratch: Outbox,
}

impl Avlink {
    /// An AVlink with relay id `id`, empty tables, the WAN met as `plan`
    /// (checked: see [`WanPlan::check`]). `mgmt_vunet` trusts control cells
    /// from the VuNet side as a management port's; `key` (key id 0) lets
    /// tagged control cells in from either side.
    pub fn new(
        id: u16,
        plan: WanPlan,
        mgmt_vunet: bool,
        key: Option<Vec<u8>>,
    ) -> Result<Self, String> {
        plan.check()?;
        let mut relay = VunetLink::new([mgmt_vunet, false], key);
        relay.set_id(id);
        relay.pool = Some(WanPool {
            first: plan.first,
            count: plan.count,
            held: BTreeSet::new(),
        });
        Ok(Avlink {
            relay,
            plan,
            hec: [HecReceiver::new(), HecReceiver::new()],
            counters: AvlinkCounters::default(),
            ports: [PortSummary::default(); 2],
            scratch: Outbox::default(),
        })
    }

    /// The WAN plan.
    pub fn plan(&self) -> WanPlan {
        self.plan
    }

    /// This AVlink's relay id.
    pub fn id(&self) -> u16 {
        self.relay.id()
    }

    /// Loads an entry as management does before a run: a VuNet VC onto
    /// WAN pool VCI `wan_vci` (table 0), or WAN pool VCI `wan_vci` into the
    /// VuNet as `vunet_vci` with routing bits `bits` (table 1). The WAN
    /// VCI is then management's, which no control cell may name. Refused
    /// if `wan_vci` is not in the pool.
    pub fn set_entry(
        &mut self,
        table: usize,
        vunet_vci: u16,
        wan_vci: u16,
        bits: u8,
    ) -> Result<(), String> {
        if !self.plan.in_pool(VcId::new(self.plan.vpi, wan_vci)) {
            return Err(format!("WAN VCI {wan_vci} is not in the AVlink's pool"));
        }
        match table {
            0 => self.relay.set_entry(0, vunet_vci, wan_vci, 0),
            1 => self.relay.set_entry(1, wan_vci, vunet_vci, bits),
            _ => return Err(format!("an AVlink has tables 0 and 1, not {table}")),
        }
        if let Some(p) = self.relay.pool.as_mut() {
            p.held.insert(wan_vci);
        }
        Ok(())
    }

    /// Entry `vci` of `table` (0: a VuNet VCI, giving the WAN VCI; 1: a
    /// WAN VCI, giving the VuNet VCI and routing bits).
    pub fn entry(&self, table: usize, vci: u16) -> Option<(u16, u8)> {
        self.relay.entry(table, vci)
    }

    /// Adds (or replaces) key `id` (see [`VunetLink::add_key`]).
    pub fn add_key(&mut self, id: u8, key: Vec<u8>) {
        self.relay.add_key(id, key);
    }

    /// Entries written by control cells last this long unrefreshed (see
    /// [`VunetLink::set_lifetime`]).
    pub fn set_lifetime(&mut self, lifetime: Option<Duration>) {
        self.relay.set_lifetime(lifetime);
    }

    /// The card power-cycled: what control cells wrote is lost (see
    /// [`VunetLink::restart`]).
    pub fn restart(&mut self) {
        self.relay.restart();
    }

    /// Restarts the card at `at` (see [`VunetLink::restart_at`]).
    pub fn restart_at(&mut self, at: Instant) {
        self.relay.restart_at(at);
    }

    /// Its relay logic: the tables control cells write, their owners and
    /// the relay id (read only).
    pub fn relay(&self) -> &VunetLink {
        &self.relay
    }

    /// The AVlink's own counters.
    pub fn counters(&self) -> AvlinkCounters {
        self.counters
    }

    /// The counters of its relay logic (control cells accepted, passed,
    /// refused and why, entries expired).
    pub fn relay_counters(&self) -> LinkNodeCounters {
        self.relay.counters()
    }

    /// Counts a drop of `cell`, arrived on `port`, for `why`.
    fn drop(&mut self, port: PortId, cell: &CellBytes, why: &'static str, out: &mut Outbox) {
        self.ports[usize::from(port)].dropped += 1;
        out.dropped(port, cell, why);
    }

    /// Sends `cell` out of `port`.
    fn send(&mut self, port: PortId, cell: CellBytes, out: &mut Outbox) {
        self.ports[usize::from(port)].cells_out += 1;
        out.push(port, cell);
    }

    /// Carries out control cell `c` (its hop count 0) arrived on `port`
    /// (from the WAN already in VuNet form); its reply, if any, goes back
    /// out of `port`, onto the control VC on the WAN side.
    fn act(
        &mut self,
        now: Instant,
        port: PortId,
        c: &CellBytes,
        arrived: &CellBytes,
        out: &mut Outbox,
    ) {
        let payload: [u8; 48] = c[HEADER_LEN..].try_into().expect("48 bytes");
        let vpi = Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni).vpi;
        let before = self.relay.counters().control_accepted;
        let mut scratch = std::mem::take(&mut self.scratch);
        self.relay.control(now, port, &payload, &mut scratch, vpi);
        // Refused and not answered (no key, bad tag, replay, another
        // relay's, unknown command): dropped here. A write refused with
        // an answer (status 2 or 3) is the relay logic's to count.
        if self.relay.counters().control_accepted == before && scratch.is_empty() {
            self.counters.control_refused += 1;
            self.drop(port, arrived, "control_refused", out);
        }
        for (p, reply) in scratch.drain() {
            if p == PORT_WAN {
                if let Some(w) = self.wan_cell(&reply, self.plan.control) {
                    self.counters.replies_to_wan += 1;
                    self.send(PORT_WAN, w, out);
                }
            } else {
                self.send(p, reply, out);
            }
        }
        self.scratch = scratch;
    }

    /// The WAN cell for VuNet cell `c` (53-byte form) on WAN VC `vc`:
    /// rewritten in the 56-byte layout, then made a 53-byte cell with its
    /// HEC. PTI and CLP kept.
    fn wan_cell(&self, c: &CellBytes, vc: VcId) -> Option<CellBytes> {
        let h = Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni);
        vunet_to_wan(&from_atm(c), &h, self.plan.format, vc)
    }

    fn arrived_from_vunet(&mut self, now: Instant, cells: &[CellBytes], out: &mut Outbox) {
        for cell in cells {
            let mut c = *cell;
            if self.hec[0].check_cell(&mut c) == HecVerdict::Discarded {
                self.counters.hec_discarded[0] += 1;
                self.drop(PORT_VUNET, cell, "hec_uncorrectable", out);
                continue;
            }
            let h = Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni);
            if h.vci == VCI_LINK_CONTROL {
                if c[HEADER_LEN + 32] == 0 {
                    self.act(now, PORT_VUNET, &c, cell, out);
                } else if !pass_on(&mut c, &h) {
                    self.counters.control_malformed += 1;
                    self.drop(PORT_VUNET, cell, "control_malformed", out);
                } else if let Some(w) = self.wan_cell(&c, self.plan.control) {
                    self.counters.control_to_wan += 1;
                    self.send(PORT_WAN, w, out);
                }
                continue;
            }
            let Some((wan_vci, _)) = self.relay.entry(0, h.vci) else {
                self.counters.unmapped[0] += 1;
                self.drop(PORT_VUNET, cell, "unknown_vc", out);
                continue;
            };
            match self.wan_cell(&c, VcId::new(self.plan.vpi, wan_vci)) {
                Some(w) => {
                    self.counters.to_wan += 1;
                    self.send(PORT_WAN, w, out);
                }
                None => {
                    self.counters.unmapped[0] += 1;
                    self.drop(PORT_VUNET, cell, "unknown_vc", out);
                }
            }
        }
    }

    fn arrived_from_wan(&mut self, now: Instant, cells: &[CellBytes], out: &mut Outbox) {
        for cell in cells {
            let mut c = *cell;
            if self.hec[1].check_cell(&mut c) == HecVerdict::Discarded {
                self.counters.hec_discarded[1] += 1;
                self.drop(PORT_WAN, cell, "hec_uncorrectable", out);
                continue;
            }
            let h = Header::parse(&[c[0], c[1], c[2], c[3]], self.plan.format);
            if h.vc() == self.plan.control {
                self.counters.control_from_wan += 1;
                let mut v = wan_to_vunet(&c, &h, 0, VCI_LINK_CONTROL, 0);
                let vh = Header::parse(&[v[0], v[1], v[2], v[3]], Format::Uni);
                if v[HEADER_LEN + 32] == 0 {
                    self.act(now, PORT_WAN, &v, cell, out);
                } else if pass_on(&mut v, &vh) {
                    self.send(PORT_VUNET, v, out);
                } else {
                    self.counters.control_malformed += 1;
                    self.drop(PORT_WAN, cell, "control_malformed", out);
                }
                continue;
            }
            let entry = (h.vpi == self.plan.vpi)
                .then(|| self.relay.entry(1, h.vci))
                .flatten();
            let Some((vci, bits)) = entry else {
                self.counters.unmapped[1] += 1;
                self.drop(PORT_WAN, cell, "unknown_vc", out);
                continue;
            };
            self.counters.to_vunet += 1;
            let v = wan_to_vunet(&c, &h, 0, vci, bits);
            self.send(PORT_VUNET, v, out);
        }
    }
}

/// The 53-byte WAN cell carrying VuNet cell `vu`, whose header is `h`,
/// on WAN VC `vc` in header format `format`: the header rewritten in the
/// 56-byte layout (no routing bits; PTI and CLP kept), then the cell made
/// with a fresh HEC. `None` if `vc` does not fit the format.
pub fn vunet_to_wan(
    vu: &aurora_wire::vunet::VuCellBytes,
    h: &Header,
    format: Format,
    vc: VcId,
) -> Option<CellBytes> {
    let wh = Header {
        format,
        gfc: 0,
        vpi: vc.vpi,
        vci: vc.vci,
        ..*h
    };
    let mut v = *vu;
    set_header(&mut v, &wh).ok()?;
    Some(VuCell::new_unchecked(&v).to_atm())
}

/// The VuNet cell (in the 53-byte form Aurora's VuNet links carry, HEC
/// made) for WAN cell `c`, whose checked header is `h`: its payload in a
/// 56-byte cell on `vpi`.`vci` with routing bits `bits`, PTI and CLP kept.
pub fn wan_to_vunet(c: &CellBytes, h: &Header, vpi: u16, vci: u16, bits: u8) -> CellBytes {
    let vh = Header {
        format: Format::Uni,
        gfc: bits & 0x0F,
        vpi: vpi.min(255),
        vci,
        pti: h.pti,
        clp: h.clp,
    };
    let payload: &[u8; 48] = c[HEADER_LEN..].try_into().expect("48 bytes");
    let v = build_vucell(&vh, payload).expect("a UNI header in range");
    VuCell::new_unchecked(&v).to_atm()
}

impl Node for Avlink {
    fn ports(&self) -> usize {
        2
    }

    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        let Some(summary) = self.ports.get_mut(usize::from(port)) else {
            return;
        };
        summary.cells_in += cells.len() as u64;
        self.relay.catch_up(now);
        if port == PORT_VUNET {
            self.arrived_from_vunet(now, cells, out);
        } else {
            self.arrived_from_wan(now, cells, out);
        }
    }

    fn poll(&mut self, now: Instant, _out: &mut Outbox) {
        self.relay.catch_up(now);
    }

    fn poll_at(&self) -> Option<Instant> {
        self.relay.poll_at()
    }

    fn port_summary(&self, port: PortId) -> Option<PortSummary> {
        self.ports.get(usize::from(port)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vunet::{Control, Route, CMD_READ, CMD_REPLY, CMD_WRITE};
    use aurora_wire::cell::{build_cell, Cell, Pti};

    const KEY: &[u8] = b"k";

    fn payload() -> [u8; 48] {
        std::array::from_fn(|i| i as u8)
    }

    fn av() -> Avlink {
        let mut a = Avlink::new(7, WanPlan::default(), false, Some(KEY.to_vec())).unwrap();
        a.set_entry(0, 40, 33, 0).unwrap();
        a.set_entry(1, 40, 33, 7).unwrap();
        a
    }

    fn run(
        a: &mut Avlink,
        port: PortId,
        cells: &[CellBytes],
    ) -> (Vec<(PortId, CellBytes)>, Vec<&'static str>) {
        let mut out = Outbox::default();
        out.track_drops(true);
        a.receive(Instant::ZERO, port, cells, &mut out);
        let drops = out.drain_drops().map(|d| d.2).collect();
        (out.drain().collect(), drops)
    }

    /// Known answers, byte for byte: a VuNet cell (routing bits 5, VCI 40,
    /// end of PDU) becomes WAN cell 1.33 with HEC 0xA3 (CRC-8 of
    /// 00 10 02 12, coset 0x55, worked out by hand); WAN 1.33 comes back
    /// as VuNet VCI 40 with routing bits 7, whose 56-byte form is
    /// 70 00 02 82, four zero bytes, then the payload.
    #[test]
    fn converts_56_byte_vunet_cells_to_53_byte_cells_and_back() {
        let mut a = av();
        let vh = Header {
            gfc: 5,
            pti: Pti::DATA_END,
            ..Header::data(VcId::new(0, 40))
        };
        let vu = build_vucell(&vh, &payload()).unwrap();
        assert_eq!(&vu[..8], &[0x50, 0x00, 0x02, 0x82, 0, 0, 0, 0]);
        let (sent, drops) = run(
            &mut a,
            PORT_VUNET,
            &[VuCell::new_checked(&vu[..]).unwrap().to_atm()],
        );
        assert!(drops.is_empty());
        let mut want = [0u8; 53];
        want[..5].copy_from_slice(&[0x00, 0x10, 0x02, 0x12, 0xA3]);
        want[5..].copy_from_slice(&payload());
        assert_eq!(sent, vec![(PORT_WAN, want)]);
        assert!(Cell::new_checked(&want[..]).unwrap().hec_ok());

        let (back, drops) = run(&mut a, PORT_WAN, &[want]);
        assert!(drops.is_empty());
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].0, PORT_VUNET);
        assert_eq!(&back[0].1[..5], &[0x70, 0x00, 0x02, 0x82, 0xCA]);
        let v56 = from_atm(&back[0].1);
        assert_eq!(&v56[..8], &[0x70, 0x00, 0x02, 0x82, 0, 0, 0, 0]);
        assert_eq!(&v56[8..], &payload());
        let k = a.counters();
        assert_eq!((k.to_wan, k.to_vunet), (1, 1));
    }

    #[test]
    fn nni_wan_headers_carry_the_wide_vpi() {
        let plan = WanPlan {
            format: Format::Nni,
            vpi: 300,
            control: VcId::new(300, 30),
            ..WanPlan::default()
        };
        let mut a = Avlink::new(1, plan, false, None).unwrap();
        a.set_entry(0, 40, 32, 0).unwrap();
        let c = build_cell(&Header::data(VcId::new(0, 40)), &payload()).unwrap();
        let (sent, _) = run(&mut a, PORT_VUNET, &[c]);
        let view = Cell::new_checked(&sent[0].1[..]).unwrap();
        assert!(view.hec_ok());
        assert_eq!(view.header(Format::Nni).vc(), VcId::new(300, 32));
    }

    #[test]
    fn unknown_vcs_bad_hecs_and_stray_wan_vcs_are_counted_drops() {
        let mut a = av();
        let mut bad = build_cell(&Header::data(VcId::new(0, 40)), &payload()).unwrap();
        bad[0] ^= 0x81; // two bits: not correctable
        let unknown = build_cell(&Header::data(VcId::new(0, 41)), &payload()).unwrap();
        let (sent, drops) = run(&mut a, PORT_VUNET, &[bad, unknown]);
        assert!(sent.is_empty());
        assert_eq!(drops, vec!["hec_uncorrectable", "unknown_vc"]);
        let stray = build_cell(&Header::data(VcId::new(0, 33)), &payload()).unwrap();
        let (sent, drops) = run(&mut a, PORT_WAN, &[stray]);
        assert!(sent.is_empty());
        assert_eq!(drops, vec!["unknown_vc"]);
        let k = a.counters();
        assert_eq!((k.hec_discarded, k.unmapped), ([1, 0], [1, 1]));
        let s = a.port_summary(0).unwrap();
        assert_eq!((s.cells_in, s.dropped), (2, 2));
    }

    fn request(cmd: u8, table: u8, vci: u16, new_vci: u16, seq: u64, route: Route) -> Control {
        Control {
            cmd,
            table,
            vci,
            new_vci,
            seq,
            route,
            ..Control::default()
        }
    }

    /// A control cell for the far AVlink crosses on the control VC, is
    /// carried out there, and the reply comes back into the VuNet; a write
    /// outside the pool is refused with status 3.
    #[test]
    fn control_cells_cross_the_wan_on_the_control_vc() {
        let mut near = Avlink::new(1, WanPlan::default(), false, Some(KEY.to_vec())).unwrap();
        let mut far = Avlink::new(2, WanPlan::default(), false, Some(KEY.to_vec())).unwrap();
        // To the far AVlink: one hop (the near one), the WAN nibble 0 out,
        // back: 0 for the WAN, then 3 for the host's switch.
        let route = Route::to_relay(2, &[0], &[0, 3]).unwrap();
        let w = request(CMD_WRITE, 1, 32, 50, 1, route).cell_routed(0, 0, Some(KEY));
        let (sent, _) = run(&mut near, PORT_VUNET, &[w]);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0, PORT_WAN);
        let h = Cell::new_checked(&sent[0].1[..])
            .unwrap()
            .header(Format::Uni);
        assert_eq!((h.vc(), h.gfc), (VcId::new(1, 30), 0));
        // Across the WAN (here by hand) to the far AVlink: carried out,
        // its reply onto the control VC.
        let (reply, _) = run(&mut far, PORT_WAN, &[sent[0].1]);
        assert_eq!(far.entry(1, 32), Some((50, 0)));
        assert_eq!(reply.len(), 1);
        assert_eq!(reply[0].0, PORT_WAN);
        // Back at the near AVlink: passed into the VuNet, routed on 3.
        let (home, _) = run(&mut near, PORT_WAN, &[reply[0].1]);
        assert_eq!(home[0].0, PORT_VUNET);
        let h = Header::parse(
            &[home[0].1[0], home[0].1[1], home[0].1[2], home[0].1[3]],
            Format::Uni,
        );
        assert_eq!((h.vci, h.gfc), (VCI_LINK_CONTROL, 3));
        let r = Control::decode(home[0].1[5..].try_into().unwrap());
        assert!(Control::verify(home[0].1[5..].try_into().unwrap(), KEY));
        assert_eq!((r.cmd, r.status, r.new_vci), (CMD_REPLY, 0, 50));
        assert_eq!(near.counters().control_to_wan, 1);
        assert_eq!(far.counters().replies_to_wan, 1);

        // At the near AVlink itself: a write naming WAN VCI 200 (outside
        // 32..96) is refused; one naming 32 is done and reads back.
        let here = Route::to_relay(1, &[], &[3]).unwrap();
        let (r, _) = run(
            &mut near,
            PORT_VUNET,
            &[request(CMD_WRITE, 0, 40, 200, 2, here).cell(0, Some(KEY))],
        );
        let c = Control::decode(r[0].1[5..].try_into().unwrap());
        assert_eq!(c.status, 3);
        assert_eq!(near.relay_counters().refused_pool, 1);
        run(
            &mut near,
            PORT_VUNET,
            &[request(CMD_WRITE, 0, 40, 32, 3, here).cell(0, Some(KEY))],
        );
        let (r, _) = run(
            &mut near,
            PORT_VUNET,
            &[request(CMD_READ, 0, 40, 0, 4, here).cell(0, Some(KEY))],
        );
        let c = Control::decode(r[0].1[5..].try_into().unwrap());
        assert_eq!((c.status, c.new_vci), (0, 32));
        // A management entry's WAN VCI is no control cell's to name.
        near.set_entry(0, 60, 33, 0).unwrap();
        let (r, _) = run(
            &mut near,
            PORT_VUNET,
            &[request(CMD_WRITE, 0, 41, 33, 5, here).cell(0, Some(KEY))],
        );
        assert_eq!(Control::decode(r[0].1[5..].try_into().unwrap()).status, 3);
    }

    #[test]
    fn a_management_port_is_held_to_the_pool_too() {
        let mut a = Avlink::new(3, WanPlan::default(), true, None).unwrap();
        a.set_entry(0, 60, 33, 0).unwrap();
        let here = Route::to_relay(3, &[], &[0]).unwrap();
        let (r, _) = run(
            &mut a,
            PORT_VUNET,
            &[request(CMD_WRITE, 0, 40, 500, 1, here).cell(0, None)],
        );
        assert_eq!(Control::decode(r[0].1[5..].try_into().unwrap()).status, 3);
        // Management may take over management's own WAN VCI.
        let (r, _) = run(
            &mut a,
            PORT_VUNET,
            &[request(CMD_WRITE, 0, 41, 33, 2, here).cell(0, None)],
        );
        assert_eq!(Control::decode(r[0].1[5..].try_into().unwrap()).status, 0);
        assert_eq!(a.entry(0, 41), Some((33, 0)));
    }

    #[test]
    fn one_key_cannot_send_on_a_wan_vc_another_keys_entry_uses() {
        let mut a = Avlink::new(3, WanPlan::default(), false, Some(KEY.to_vec())).unwrap();
        a.add_key(2, b"other".to_vec());
        let here = Route::to_relay(3, &[], &[0]).unwrap();
        let (r, _) = run(
            &mut a,
            PORT_VUNET,
            &[request(CMD_WRITE, 0, 40, 33, 1, here).cell(0, Some(KEY))],
        );
        assert_eq!(Control::decode(r[0].1[5..].try_into().unwrap()).status, 0);
        // Key 2 names WAN VCI 33 for another VuNet VC: refused.
        let theirs = Control {
            key_id: 2,
            ..request(CMD_WRITE, 0, 41, 33, 1, here)
        };
        let (r, _) = run(&mut a, PORT_VUNET, &[theirs.cell(0, Some(b"other"))]);
        assert_eq!(Control::decode(r[0].1[5..].try_into().unwrap()).status, 3);
        assert_eq!(a.entry(0, 41), None);
        // A free pool VCI is fine, and the first key may move its own.
        let free = Control {
            key_id: 2,
            ..request(CMD_WRITE, 0, 41, 34, 2, here)
        };
        let (r, _) = run(&mut a, PORT_VUNET, &[free.cell(0, Some(b"other"))]);
        assert_eq!(Control::decode(r[0].1[5..].try_into().unwrap()).status, 0);
        let (r, _) = run(
            &mut a,
            PORT_VUNET,
            &[request(CMD_WRITE, 0, 40, 35, 2, here).cell(0, Some(KEY))],
        );
        assert_eq!(Control::decode(r[0].1[5..].try_into().unwrap()).status, 0);
    }

    #[test]
    fn untagged_and_worn_out_control_cells_are_refused_drops() {
        let mut a = av();
        // No tag: refused, shown to the drop tap.
        let here = Route::to_relay(7, &[], &[0]).unwrap();
        let (sent, drops) = run(
            &mut a,
            PORT_VUNET,
            &[request(CMD_WRITE, 0, 40, 32, 1, here).cell(0, None)],
        );
        assert!(sent.is_empty());
        assert_eq!(drops, vec!["control_refused"]);
        // From the WAN, a hop count with the route used up.
        let mut p = request(CMD_READ, 0, 40, 0, 2, here).encode(Some(KEY));
        p[32] = 1;
        p[34] = 22;
        let c = build_cell(&Header::data(VcId::new(1, 30)), &p).unwrap();
        let (sent, drops) = run(&mut a, PORT_WAN, &[c]);
        assert!(sent.is_empty());
        assert_eq!(drops, vec!["control_malformed"]);
        assert!(Avlink::new(
            0,
            WanPlan {
                count: 0,
                ..WanPlan::default()
            },
            false,
            None
        )
        .is_err());
        assert!(Avlink::new(
            0,
            WanPlan {
                control: VcId::new(1, 40),
                ..WanPlan::default()
            },
            false,
            None
        )
        .is_err());
    }
}
