//! A striping relay (a *splitter*): an [`aurora_net::Node`] that puts one
//! plain VC on its wide side over N stripes, and back. This is the
//! "internal splitting" of the seed's reference model (§3.4.2): the hosts
//! send and receive ordinary VCs, and a pair of relays inside the network
//! does the striping between them, with the same [`Striper`] and
//! [`Destriper`] the striping host uses end to end.
//!
//! Port 0 is the wide side; ports 1 to N are the stripes, stripe `i` of
//! every logical VC on port `i + 1`. A relay may carry several logical
//! VCs each way:
//!
//! * a **split** ([`SplitSpec`]) takes the cells of one VC arriving on
//!   port 0 and stripes them: each cell as a unit (cell units), or each
//!   AAL5 PDU the relay reassembles from them (PDU units), or each IP
//!   packet inside such a PDU, its LLC/SNAP or VC-multiplexed
//!   encapsulation taken off (IP units; ATMARP messages, which IP over
//!   ATM sends on a PVC before any packet, go the same way);
//! * a **join** ([`JoinSpec`]) takes the member VCs arriving on the stripe
//!   ports through a [`Destriper`] and sends what it delivers out of port
//!   0 on one VC: cell units as cells with their user bits, PDU units
//!   segmented again, IP units with their encapsulation put back.
//!
//! A relay carries whole cells, so cell units cannot use sequence
//! numbers (they take 2 of a cell's 48 bytes); PDU and IP units can use
//! any method.
//!
//! # Bounds and drops
//!
//! A split holds at most one partial PDU per VC, of at most the cells its
//! largest SDU takes, for at most the reassembly timeout; a join holds what
//! its Destriper's limits allow. Every cell the relay drops is counted by
//! reason ([`RelayDrops`]) and handed to the driver's drop tap
//! ([`Outbox::dropped`]) with that reason, so the network's books can
//! charge it: `hec_uncorrectable`, `unknown_vc`, `relay_not_data` (an OAM
//! or RM cell on a split VC, which is not striped), `aal5_crc`,
//! `aal5_length`, `aal5_oversize`, `aal5_timeout` (the PDU's cells, when
//! reassembly on the wide side fails), `relay_not_ip` (a PDU on an IP split
//! that holds no IP packet or ATMARP message), `relay_refused` (a unit the
//! Striper refused), `stripe_rejected` (a cell the Destriper did not take
//! as part of a unit; its counters say why), and for the units a join's
//! Destriper gives up after taking them (counted in its
//! [`crate::RxStats`] as at a striping host) their cells, as they would
//! have left on the wide side, as `stripe_timeout`, `stripe_buffer_full`,
//! `stripe_missing`, `stripe_unverified`, `stripe_out_of_step` or
//! `stripe_overtaken` ([`crate::Loss::relay_name`]).
//!
//! The network's books find the PDU a dropped test-traffic cell belonged
//! to by the tag in it (`aurora_net::tag`). A relay keeps the tags: cells
//! travel whole, and a PDU segmented again has its SDU where it was and
//! its last cell's tag put back in the pad. One thing it cannot keep:
//! with sequence numbers, a PDU unit's SDU starts 4 bytes later in its
//! member cells, so a member cell lost on a stripe carries no readable tag
//! and a PDU lost that way has no outcome in its flow's books (the
//! relay's units books count it).

use std::collections::BTreeMap;

use aurora_net::{Node, Outbox, PortId};
use aurora_sar::{Aal5Tx, PduOptions};
use aurora_time::Instant;
use aurora_wire::aal5::{self, PduError};
use aurora_wire::cell::{Format, Header, Pti, VcId};
use aurora_wire::hec::{HecReceiver, HecVerdict};
use aurora_wire::llc::{Encapsulation, Protocol, BRIDGED_PAD_LEN, LLC_SNAP_LEN};
use aurora_wire::{CellBytes, CELL_LEN, HEADER_LEN, PAYLOAD_LEN};

use crate::{CellFlags, Config, ConfigError, Delivery, Destriper, Payload, Striper, SyncMode};
use crate::{TxError, UnitKind};

/// One logical VC a relay splits: its VC on the wide side and how it is
/// striped (the member VCs as they leave this relay).
#[derive(Clone, Debug)]
pub struct SplitSpec {
    /// Its name in reports.
    pub name: String,
    /// The VC its cells arrive on, port 0.
    pub wide_vc: VcId,
    /// The striping configuration; stripe `i` leaves by port `i + 1`.
    pub cfg: Config,
    /// IP units: how the wide VC's PDUs carry their packets.
    pub encap: Encapsulation,
}

/// One logical VC a relay joins: its member VCs as they arrive here, and
/// its VC on the wide side.
#[derive(Clone, Debug)]
pub struct JoinSpec {
    /// Its name in reports.
    pub name: String,
    /// The striping configuration (member VCs as they arrive, limits);
    /// stripe `i` arrives by port `i + 1`.
    pub cfg: Config,
    /// The VC it leaves on, port 0.
    pub wide_vc: VcId,
    /// IP units: how the wide VC's PDUs carry their packets.
    pub encap: Encapsulation,
}

/// Why a logical VC could not be added to a relay.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RelayError {
    /// The striping configuration is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The number of member VCs is not the relay's number of stripe ports.
    #[error("the relay has {ports} stripe ports, and this VC has {stripes} stripes")]
    Stripes {
        /// Stripe ports.
        ports: usize,
        /// Member VCs given.
        stripes: usize,
    },
    /// Cell units with sequence numbers cannot carry whole cells.
    #[error("a relay carries whole 48-byte cells, so cell units cannot have sequence numbers")]
    CellSequence,
    /// The wide VC, or a member VC on its port, is another logical VC's already.
    #[error("VC {1} on port {0} already belongs to a logical VC of this relay")]
    Taken(PortId, VcId),
    /// The VC does not fit the relay's header format.
    #[error("VC {0} does not fit the relay's header format")]
    Vc(VcId),
    /// IP units this long could not be carried once encapsulated again.
    #[error("IP units of up to {0} bytes do not fit one AAL5 PDU once encapsulated")]
    TooLong(usize),
}

/// Cells a relay dropped, by reason (the names in the module's docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RelayDrops(BTreeMap<&'static str, u64>);

impl RelayDrops {
    fn add(&mut self, why: &'static str, n: u64) {
        *self.0.entry(why).or_default() += n;
    }

    /// Cells dropped for `why`.
    pub fn get(&self, why: &str) -> u64 {
        self.0.get(why).copied().unwrap_or(0)
    }

    /// Cells dropped, all reasons.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Every reason with a count, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.0.iter().map(|(k, v)| (*k, *v))
    }
}

/// What a split did with its wide VC's cells.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SplitStats {
    /// Cells that arrived on the wide VC.
    pub cells_in: u64,
    /// Units handed to the Striper (and striped).
    pub units: u64,
    /// Cells dropped, by reason.
    pub drops: RelayDrops,
    /// Cells of the PDU being reassembled now.
    pub reassembling: u64,
}

impl SplitStats {
    /// `cells_in` less the cells striped (as cells or inside PDUs), dropped
    /// or waiting in a partial PDU: 0 when the split's books balance.
    pub fn balance(&self, cells_striped: u64) -> i128 {
        i128::from(self.cells_in)
            - i128::from(cells_striped)
            - i128::from(self.drops.total())
            - i128::from(self.reassembling)
    }
}

/// What a join sent on its wide VC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinStats {
    /// Units the Destriper delivered and the relay sent on.
    pub units: u64,
    /// Cells sent on the wide VC.
    pub cells_out: u64,
    /// SDU or cell bytes in the units sent.
    pub bytes: u64,
    /// Cells dropped, by reason.
    pub drops: RelayDrops,
}

#[derive(Debug)]
struct Split {
    spec: SplitSpec,
    tx: Striper,
    stats: SplitStats,
    /// PDU units: the cells of the PDU arriving, and when its first came.
    partial: Vec<CellBytes>,
    started: Instant,
    /// Cells a PDU of the largest SDU takes on the wide VC.
    max_cells: usize,
    /// Data cells striped (cell units: one per unit; PDU units: the wide
    /// VC's cells of the PDUs striped).
    striped: u64,
}

#[derive(Debug)]
struct Join {
    spec: JoinSpec,
    rx: Destriper,
    stats: JoinStats,
    aal5: Aal5Tx,
    deliveries: Vec<Delivery>,
    /// Cell units: each of the eight user-data headers of the wide VC.
    headers: [[u8; HEADER_LEN]; 8],
}

/// A striping relay: splits logical VCs from port 0 over ports 1 to N,
/// and joins them back.
#[derive(Debug)]
pub struct Relay {
    stripes: usize,
    format: Format,
    splits: Vec<Split>,
    joins: Vec<Join>,
    /// Port 0's VCs: the split they belong to.
    wide: BTreeMap<VcId, usize>,
    /// (stripe port, VC): the join and stripe.
    members: BTreeMap<(PortId, VcId), (usize, usize)>,
    hec: Vec<HecReceiver>,
    drops: RelayDrops,
    out: Vec<(usize, CellBytes)>,
    scratch: Vec<u8>,
    cells: Vec<CellBytes>,
}

/// Largest encapsulation header an IP unit's PDU carries on the wide side.
const MAX_ENCAP: usize = LLC_SNAP_LEN + BRIDGED_PAD_LEN;

impl Relay {
    /// A relay with `stripes` stripe ports (at least one) and no VCs.
    pub fn new(stripes: usize, format: Format) -> Relay {
        let stripes = stripes.max(1);
        Relay {
            stripes,
            format,
            splits: Vec::new(),
            joins: Vec::new(),
            wide: BTreeMap::new(),
            members: BTreeMap::new(),
            hec: (0..=stripes).map(|_| HecReceiver::new()).collect(),
            drops: RelayDrops::default(),
            out: Vec::new(),
            scratch: Vec::new(),
            cells: Vec::new(),
        }
    }

    /// Stripe ports (the relay has one more, the wide side).
    pub fn stripes(&self) -> usize {
        self.stripes
    }

    fn check(&self, cfg: &Config) -> Result<(), RelayError> {
        cfg.check()?;
        if cfg.stripes.len() != self.stripes {
            return Err(RelayError::Stripes {
                ports: self.stripes,
                stripes: cfg.stripes.len(),
            });
        }
        if cfg.unit == UnitKind::Cell && cfg.sync == SyncMode::Sequence {
            return Err(RelayError::CellSequence);
        }
        if cfg.unit == UnitKind::IpPacket && cfg.max_sdu + MAX_ENCAP > aal5::MAX_SDU {
            return Err(RelayError::TooLong(cfg.max_sdu));
        }
        Ok(())
    }

    /// Adds a logical VC to split; returns its index.
    pub fn add_split(&mut self, spec: SplitSpec) -> Result<usize, RelayError> {
        self.check(&spec.cfg)?;
        if self.wide.contains_key(&spec.wide_vc) {
            return Err(RelayError::Taken(0, spec.wide_vc));
        }
        let tx = Striper::new(spec.cfg.clone())?;
        let extra = if spec.cfg.unit == UnitKind::IpPacket {
            MAX_ENCAP
        } else {
            0
        };
        let max_cells = aal5::cells_for((spec.cfg.max_sdu + extra).min(aal5::MAX_SDU));
        let k = self.splits.len();
        self.wide.insert(spec.wide_vc, k);
        self.splits.push(Split {
            spec,
            tx,
            stats: SplitStats::default(),
            partial: Vec::new(),
            started: Instant::ZERO,
            max_cells,
            striped: 0,
        });
        Ok(k)
    }

    /// Adds a logical VC to join; returns its index.
    pub fn add_join(&mut self, spec: JoinSpec) -> Result<usize, RelayError> {
        self.check(&spec.cfg)?;
        for (i, vc) in spec.cfg.stripes.iter().enumerate() {
            let port = (i + 1) as PortId;
            if self.members.contains_key(&(port, *vc)) {
                return Err(RelayError::Taken(port, *vc));
            }
        }
        let aal5 =
            Aal5Tx::new(spec.wide_vc, self.format).map_err(|_| RelayError::Vc(spec.wide_vc))?;
        let mut headers = [[0u8; HEADER_LEN]; 8];
        for (i, slot) in headers.iter_mut().enumerate() {
            *slot = Header {
                format: self.format,
                pti: Pti::User {
                    congestion: i & 4 != 0,
                    auu: i & 2 != 0,
                },
                clp: i & 1 != 0,
                ..Header::data(spec.wide_vc)
            }
            .to_bytes()
            .map_err(|_| RelayError::Vc(spec.wide_vc))?;
        }
        let mut rx = Destriper::new(spec.cfg.clone())?;
        rx.keep_discarded(true);
        let k = self.joins.len();
        for (i, vc) in spec.cfg.stripes.iter().enumerate() {
            self.members.insert(((i + 1) as PortId, *vc), (k, i));
        }
        self.joins.push(Join {
            spec,
            rx,
            stats: JoinStats::default(),
            aal5,
            deliveries: Vec::new(),
            headers,
        });
        Ok(k)
    }

    /// Each split: its spec, Striper, counters, and the data cells it
    /// striped (see [`SplitStats::balance`]).
    pub fn splits(&self) -> impl Iterator<Item = (&SplitSpec, &Striper, &SplitStats, u64)> {
        self.splits
            .iter()
            .map(|s| (&s.spec, &s.tx, &s.stats, s.striped))
    }

    /// Each join: its spec, Destriper and counters.
    pub fn joins(&self) -> impl Iterator<Item = (&JoinSpec, &Destriper, &JoinStats)> {
        self.joins.iter().map(|j| (&j.spec, &j.rx, &j.stats))
    }

    /// Cells dropped on arrival before reaching a logical VC
    /// (`hec_uncorrectable`, `unknown_vc`).
    pub fn arrival_drops(&self) -> &RelayDrops {
        &self.drops
    }

    /// Every cell the relay dropped, all reasons, all VCs.
    pub fn dropped(&self) -> u64 {
        self.drops.total()
            + self
                .splits
                .iter()
                .map(|s| s.stats.drops.total())
                .sum::<u64>()
            + self
                .joins
                .iter()
                .map(|j| j.stats.drops.total())
                .sum::<u64>()
    }

    /// Sends the striper's output of split `k`: stripe `i` by port `i + 1`.
    fn send_striped(&mut self, out: &mut Outbox) {
        for (s, cell) in self.out.drain(..) {
            out.push((s + 1) as PortId, cell);
        }
    }

    /// A cell of split `k` arrived on the wide side.
    fn wide_cell(&mut self, now: Instant, k: usize, cell: &CellBytes, out: &mut Outbox) {
        let s = &mut self.splits[k];
        s.stats.cells_in += 1;
        let Some(flags) = CellFlags::of(cell) else {
            s.stats.drops.add("relay_not_data", 1);
            out.dropped(0, cell, "relay_not_data");
            return;
        };
        if s.spec.cfg.unit == UnitKind::Cell {
            let data = &cell[HEADER_LEN..];
            match s.tx.push_cell(now, data, flags, &mut self.out) {
                Ok(_) => {
                    s.stats.units += 1;
                    s.striped += 1;
                }
                Err(_) => {
                    s.stats.drops.add("relay_refused", 1);
                    out.dropped(0, cell, "relay_refused");
                }
            }
            self.send_striped(out);
            return;
        }
        if s.partial.is_empty() {
            s.started = now;
        }
        s.partial.push(*cell);
        s.stats.reassembling += 1;
        if !flags.auu {
            if s.partial.len() >= s.max_cells {
                // Longer than any PDU this VC may carry, and no end yet.
                Self::drop_partial(s, "aal5_oversize", out);
            }
            return;
        }
        self.scratch.clear();
        for c in &s.partial {
            self.scratch.extend_from_slice(&c[HEADER_LEN..]);
        }
        let sdu = match aal5::decode(&self.scratch) {
            Ok((_, sdu)) => sdu,
            Err(PduError::Crc) => return Self::drop_partial(s, "aal5_crc", out),
            Err(_) => return Self::drop_partial(s, "aal5_length", out),
        };
        let mut carried = sdu.len();
        let r = match s.spec.cfg.unit {
            UnitKind::IpPacket => match s.spec.encap.parse(sdu) {
                Ok((Protocol::Ipv4 | Protocol::Ipv6, start)) => {
                    carried -= start;
                    s.tx.push_ip(now, &sdu[start..], &mut self.out)
                }
                Ok((Protocol::Atmarp, start))
                    if sdu.get(start).is_some_and(|b| b >> 4 != 4 && b >> 4 != 6) =>
                {
                    carried -= start;
                    s.tx.push_ip_control(now, &sdu[start..], &mut self.out)
                }
                _ => Err(TxError::NotIp("not an IP packet in its encapsulation")),
            },
            _ => s.tx.push_pdu(now, sdu, &mut self.out),
        };
        match r {
            Ok(_) => {
                s.stats.units += 1;
                s.striped += s.partial.len() as u64;
                s.stats.reassembling = 0;
                s.partial.clear();
            }
            Err(TxError::NotIp(_)) => Self::drop_partial(s, "relay_not_ip", out),
            Err(_) => Self::drop_partial(s, "relay_refused", out),
        }
        // The unit's data cells (a marker may follow them): a tag the
        // sender had in the pad goes in the member PDU's pad too.
        self.cells.clear();
        self.cells.extend(
            self.out
                .iter()
                .filter(|(_, c)| CellFlags::of(c).is_some())
                .map(|(_, c)| *c),
        );
        keep_tag(&mut self.cells, carried);
        let mut fixed = self.cells.iter();
        for (_, c) in self
            .out
            .iter_mut()
            .filter(|(_, c)| CellFlags::of(c).is_some())
        {
            if let Some(f) = fixed.next() {
                *c = *f;
            }
        }
        self.send_striped(out);
    }

    /// Drops split `s`'s partial PDU, every cell of it, for `why`.
    fn drop_partial(s: &mut Split, why: &'static str, out: &mut Outbox) {
        for c in s.partial.drain(..) {
            out.dropped(0, &c, why);
        }
        s.stats.drops.add(why, s.stats.reassembling);
        s.stats.reassembling = 0;
    }

    /// Sends what join `k` delivered out of port 0.
    fn send_joined(&mut self, k: usize, out: &mut Outbox) {
        let j = &mut self.joins[k];
        for d in j.deliveries.drain(..) {
            j.stats.units += 1;
            j.stats.bytes += d.payload.data().len() as u64;
            let Some(c) = wide_cells(
                &j.spec,
                &j.headers,
                &mut j.aal5,
                &d.payload,
                &mut self.cells,
            ) else {
                // Longer than AAL5 carries once encapsulated.
                j.stats.drops.add("relay_refused", 1);
                continue;
            };
            for cell in &self.cells[..c] {
                out.push(0, *cell);
            }
            j.stats.cells_out += c as u64;
        }
        // Units the Destriper gave up: their cells go to the drop tap, as
        // they arrived on their stripe's port, so that the network's books
        // can charge the PDUs they belonged to.
        for g in j.rx.take_discarded() {
            let port = (g.stripe + 1) as PortId;
            let why = g.why.relay_name();
            let c = wide_cells(
                &j.spec,
                &j.headers,
                &mut j.aal5,
                &g.payload,
                &mut self.cells,
            );
            for cell in &self.cells[..c.unwrap_or(0)] {
                out.dropped(port, cell, why);
            }
            j.stats.drops.add(why, c.unwrap_or(0) as u64);
        }
    }

    /// Runs the timers due by `now`.
    fn timers(&mut self, now: Instant, out: &mut Outbox) {
        for k in 0..self.splits.len() {
            let s = &mut self.splits[k];
            if !s.partial.is_empty() && now >= s.started + s.spec.cfg.limits.reassembly_timeout {
                Self::drop_partial(s, "aal5_timeout", out);
            }
            if s.tx.poll_at().is_some_and(|t| t <= now) {
                s.tx.handle_timeout(now, &mut self.out);
                self.send_striped(out);
            }
        }
        for k in 0..self.joins.len() {
            let j = &mut self.joins[k];
            if j.rx.poll_at().is_some_and(|t| t <= now) {
                j.rx.handle_timeout(now, &mut j.deliveries);
                self.send_joined(k, out);
            }
        }
    }
}

/// Puts back a test-traffic tag ([`aurora_net::tag`]) that the sender had
/// in the pad of a PDU's last cell and segmenting again left out: read
/// from the PDU's first cell, and written only where the SDU's own bytes
/// of the last cell's tag agree with it. (Pad bytes mean nothing to
/// AAL5, and the CRC is corrected; the network's books read the tag from
/// any cell dropped further on.)
fn keep_tag(cells: &mut [CellBytes], sdu_len: usize) {
    use aurora_net::tag::{self, Tag, END_TAG_AT, TAG_LEN};
    let at = PAYLOAD_LEN * cells.len().saturating_sub(1) + END_TAG_AT;
    let [first, .., last] = cells else {
        return;
    };
    let Some(t) = Tag::of_cell(first) else {
        return;
    };
    let k = sdu_len.saturating_sub(at).min(TAG_LEN);
    let here = HEADER_LEN + END_TAG_AT;
    if k < TAG_LEN && last[here..here + k] == t.bytes()[..k] {
        tag::patch_last_cell(t, k, last);
    }
}

/// The cells of one delivered unit on a join's wide VC, in `cells`:
/// their number, or `None` if the unit is too long for AAL5 once
/// encapsulated. Cell units keep their user bits; PDU units are segmented
/// again; IP units get their encapsulation back.
fn wide_cells(
    spec: &JoinSpec,
    headers: &[[u8; HEADER_LEN]; 8],
    aal5: &mut Aal5Tx,
    payload: &Payload,
    cells: &mut Vec<CellBytes>,
) -> Option<usize> {
    match payload {
        Payload::Cell { data, len, flags } => {
            let mut cell = [0u8; CELL_LEN];
            cell[..HEADER_LEN].copy_from_slice(&headers[flags.index()]);
            let n = usize::from(*len).min(PAYLOAD_LEN);
            cell[HEADER_LEN..HEADER_LEN + n].copy_from_slice(&data[..n]);
            cells.clear();
            cells.push(cell);
            Some(1)
        }
        Payload::Sdu(sdu) => {
            let mut hdr = [0u8; MAX_ENCAP];
            let n = if spec.cfg.unit == UnitKind::IpPacket {
                // The version says which; anything else striped as an IP
                // unit is an ATMARP message (its hardware type's first
                // byte is 0).
                let proto = match sdu.first().map(|b| b >> 4) {
                    Some(4) => Protocol::Ipv4,
                    Some(6) => Protocol::Ipv6,
                    _ => Protocol::Atmarp,
                };
                spec.encap.emit_header(proto, &mut hdr).unwrap_or(0)
            } else {
                0
            };
            let parts: [&[u8]; 2] = [&hdr[..n], sdu];
            let mut seg = aal5.segment(&parts, PduOptions::default()).ok()?;
            cells.resize(aal5::cells_for(n + sdu.len()), [0; CELL_LEN]);
            let c = seg.fill(cells);
            keep_tag(&mut cells[..c], n + sdu.len());
            Some(c)
        }
    }
}

impl Node for Relay {
    fn ports(&self) -> usize {
        self.stripes + 1
    }

    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        let p = usize::from(port);
        if p >= self.hec.len() {
            return;
        }
        for c in cells {
            let mut cell = *c;
            if self.hec[p].check_cell(&mut cell) == HecVerdict::Discarded {
                self.drops.add("hec_uncorrectable", 1);
                out.dropped(port, c, "hec_uncorrectable");
                continue;
            }
            let h = Header::parse(&[cell[0], cell[1], cell[2], cell[3]], self.format);
            let vc = h.vc();
            if port == 0 {
                match self.wide.get(&vc) {
                    Some(&k) => self.wide_cell(now, k, &cell, out),
                    None => {
                        self.drops.add("unknown_vc", 1);
                        out.dropped(port, c, "unknown_vc");
                    }
                }
                continue;
            }
            let Some(&(k, stripe)) = self.members.get(&(port, vc)) else {
                self.drops.add("unknown_vc", 1);
                out.dropped(port, c, "unknown_vc");
                continue;
            };
            let j = &mut self.joins[k];
            let before = j.rx.stats().rejected.total();
            j.rx.push(now, stripe, &cell, &mut j.deliveries);
            if j.rx.stats().rejected.total() > before {
                j.stats.drops.add("stripe_rejected", 1);
                out.dropped(port, c, "stripe_rejected");
            }
            self.send_joined(k, out);
        }
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        self.timers(now, out);
    }

    fn poll_at(&self) -> Option<Instant> {
        let splits = self.splits.iter().flat_map(|s| {
            let partial =
                (!s.partial.is_empty()).then(|| s.started + s.spec.cfg.limits.reassembly_timeout);
            [partial, s.tx.poll_at()]
        });
        let joins = self.joins.iter().map(|j| j.rx.poll_at());
        splits.chain(joins).flatten().min()
    }
}
