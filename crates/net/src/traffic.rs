//! A one-port host that sends AAL5 flows on a schedule and checks every PDU
//! it receives, for scenarios and tests.
//!
//! PDU `seq` of a flow carries a pattern derived from the sequence number
//! (not from the VC: switches translate it) and, in every cell, a
//! [`Tag`] naming the flow and the PDU, so a receiver knows
//! what each PDU must hold and which ones are missing or out of order, and
//! a cell dropped anywhere can be charged to its PDU
//! ([`crate::accounting`]).
//!
//! **Shaping.** A flow sends each PDU whole, all its cells at once, unless
//! it is shaped ([`TrafficHost::shape`]): then its cells leave one at a
//! time, each no earlier than the flow's [`Shaper`] allows, so the stream
//! conforms to the contract with no tolerance at all and a policer of the
//! same contract passes every cell. The host's [`Node::poll_at`] names the
//! next conforming instant of a flow with a cell waiting.
//!
//! * A shaped flow holds one PDU at most: the one leaving. A PDU that falls
//!   due while the one before is still leaving waits (unsegmented, so no
//!   memory) and starts as soon as that one is out and the shaper lets its
//!   first cell go; the flow falls behind its schedule, by as much as
//!   [`ShapingStats`] records. No PDU is skipped, and nothing queues
//!   without bound: a flow offered faster than its contract simply sends
//!   at the contract's rate and finishes late.
//! * A shaped PDU counts as sent ([`TrafficHost::sent`]) when its first
//!   cell leaves the host. Its cells still in the host
//!   ([`TrafficHost::cells_waiting`]) are then in flight like the cells on
//!   the links: the books ([`crate::accounting::reconcile`]) count such a
//!   PDU as in flight until its outcome is known. [`TrafficHost::cells_sent`]
//!   counts cells as they leave.
//! * [`TrafficHost::stop_sending_at`] starts no PDU at or after the stop;
//!   a PDU already leaving finishes, its cells still shaped.
//! * An end-to-end ping on a shaped flow's VC is shaped with it: its OAM
//!   cells wait in the flow's shaper (at most [`MAX_SHAPED_OAM_WAITING`];
//!   a request beyond that is not sent, and counts as refused in the
//!   ping's stats and in [`ShapingStats::oam_refused`]) and leave before
//!   the flow's next cell when the contract lets them, so everything the
//!   VC carries that a switch policing it counts (end-to-end OAM cells
//!   too, see [`crate::switch`]) conforms. Its round trip then includes
//!   its wait for the shaper. Segment pings, which no policer counts, are
//!   not shaped.

use aurora_sar::{Aal5Rx, Aal5Tx, PduOptions, RxConfig, RxStats, Status, TxError, VcConfig};
use aurora_time::{Duration, Instant};
use aurora_tm::{Contract, Shaper};
use aurora_wire::cell::{Format, VcId};
use aurora_wire::{aal5, CellBytes};
use rustc_hash::FxHashMap;

use crate::accounting::RxBook;
use crate::oam::{self, Ping, PingStats, Pinger};
use crate::tag::{self, Tag};
use crate::{Node, Outbox, PortId};
use aurora_wire::oam::OamFlow;

/// A flow to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The flow's number, unique in the network: every cell's tag carries
    /// it.
    pub id: u16,
    /// The VC to send on.
    pub vc: VcId,
    /// SDU length in bytes (at least 8, at most 65535).
    pub sdu_len: usize,
    /// PDUs to send.
    pub count: u64,
    /// When the first PDU goes.
    pub start: Instant,
    /// Time between PDUs.
    pub interval: Duration,
}

/// What a host found on one receiving VC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxFlow {
    /// PDUs delivered intact, in order.
    pub delivered: u64,
    /// Bytes in those PDUs.
    pub bytes: u64,
    /// PDUs missing from the sequence.
    pub missing: u64,
    /// PDUs delivered with the wrong bytes (must stay zero).
    pub corrupted: u64,
    /// PDUs that arrived after a later one (must stay zero on one VC).
    pub out_of_order: u64,
    next_seq: u64,
}

#[derive(Debug)]
struct TxFlow {
    spec: Flow,
    tx: Aal5Tx,
    next: Instant,
    sent: u64,
    /// The shaper and the PDU leaving, for a shaped flow.
    shaped: Option<Box<Shaped>>,
}

/// A shaped flow's state.
#[derive(Debug)]
struct Shaped {
    contract: Contract,
    shaper: Shaper,
    /// The cells of the PDU leaving: `cells[pos..len]` have yet to go.
    cells: Vec<CellBytes>,
    len: usize,
    pos: usize,
    /// The earliest time the next cell may leave, as the shaper said when
    /// the last cell left (it changes only when a cell leaves).
    ready: Instant,
    /// When the last cell left.
    last: Instant,
    /// OAM cells of a ping on the flow's VC, waiting for the shaper.
    oam: std::collections::VecDeque<CellBytes>,
    stats: ShapingStats,
}

/// How a shaped flow kept to its schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShapingStats {
    /// The flow's contract.
    pub contract: Contract,
    /// PDUs whose first cell left after the PDU fell due.
    pub late: u64,
    /// The longest time from a PDU falling due to its first cell leaving.
    pub max_delay: Duration,
    /// Those times, summed over every PDU sent.
    pub total_delay: Duration,
    /// Cells of the flow that have left the host.
    pub cells_sent: u64,
    /// OAM cells of pings on the flow's VC that left, shaped with it.
    pub oam_sent: u64,
    /// Ping requests on the flow's VC not sent: [`MAX_SHAPED_OAM_WAITING`]
    /// were already waiting for the shaper.
    pub oam_refused: u64,
}

/// Why a flow could not be shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// There is no flow with this index.
    NoSuchFlow(usize),
    /// Another flow sends on the same VC: the two would interleave their
    /// cells within PDUs (and the contract is the VC's, not a flow's).
    SharedVc(VcId),
}

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShapeError::NoSuchFlow(i) => write!(f, "the host has no flow {i}"),
            ShapeError::SharedVc(vc) => write!(
                f,
                "another flow sends on VC {vc}: a shaped flow needs its VC to itself"
            ),
        }
    }
}

impl std::error::Error for ShapeError {}

/// OAM cells that may wait in one shaped flow's shaper.
pub const MAX_SHAPED_OAM_WAITING: usize = 64;

/// PDUs one flow may send in one poll.
pub const MAX_PDUS_PER_POLL: u32 = 1024;

/// Cells one shaped flow may send in one poll (at the highest rates a
/// contract allows, several cells conform within a nanosecond).
pub const MAX_SHAPED_CELLS_PER_POLL: u32 = 65_536;

/// `7 j mod 256` for `j` below 512: every PDU's bytes are 256 of these
/// from some phase, repeated (see [`pattern`]).
const SEVENS: [u8; 512] = {
    let mut t = [0u8; 512];
    let mut j = 0;
    while j < 512 {
        t[j] = (j * 7) as u8;
        j += 1;
    }
    t
};

/// The bytes of PDU `seq` of flow `flow`, `len` bytes long (at least 8);
/// returns how many bytes of the last cell's tag fall in the SDU (the rest
/// go in the pad, see [`tag::patch_last_cell`]).
///
/// Byte `k` is `31 seq + 7 k` (mod 256), apart from the tags. That is
/// `7 (k + a)` with `a = 31 · 183 · seq` (183 being 7's inverse mod 256),
/// so the bytes are copied from a table of `7 j mod 256` a period of 256
/// at a time.
pub fn pattern(flow: u16, seq: u64, len: usize, out: &mut Vec<u8>) -> usize {
    out.clear();
    let a = (seq.wrapping_mul(31 * 183) & 255) as usize;
    let period = &SEVENS[a..a + 256];
    while out.len() < len {
        let n = (len - out.len()).min(256);
        out.extend_from_slice(&period[..n]);
    }
    tag::write_sdu(Tag { flow, seq }, out)
}

/// The traffic host.
#[derive(Debug)]
pub struct TrafficHost {
    flows: Vec<TxFlow>,
    rx: Aal5Rx,
    rx_flows: FxHashMap<VcId, RxFlow>,
    format: Format,
    cells: Vec<CellBytes>,
    sdu: Vec<u8>,
    want: Vec<u8>,
    cells_sent: u64,
    pings: Vec<Pinger>,
    user: Vec<CellBytes>,
    oam_answered: u64,
    oam_other: u64,
    route_bits: FxHashMap<VcId, u8>,
    books: FxHashMap<VcId, RxBook>,
    hec: aurora_wire::hec::HecReceiver,
    hec_dropped: u64,
    unexpected: u64,
    stop: Option<Instant>,
}

/// Sends `c` out of the host's port, with the VuNet routing bits its VC
/// needs (if any) written into the GFC field.
fn send(route_bits: &FxHashMap<VcId, u8>, format: Format, out: &mut Outbox, mut c: CellBytes) {
    if !route_bits.is_empty() && format == Format::Uni {
        let h = aurora_wire::cell::Header::parse(&[c[0], c[1], c[2], c[3]], format);
        if let Some(&bits) = route_bits.get(&h.vc()) {
            let _ = aurora_wire::cell::Header { gfc: bits, ..h }.emit(&mut c);
        }
    }
    out.push(0, c);
}

impl TrafficHost {
    /// A host with no flows.
    pub fn new(format: Format) -> Self {
        TrafficHost {
            flows: Vec::new(),
            rx: Aal5Rx::new(RxConfig {
                format,
                ..RxConfig::default()
            }),
            rx_flows: FxHashMap::default(),
            format,
            cells: Vec::new(),
            sdu: Vec::new(),
            want: Vec::new(),
            cells_sent: 0,
            pings: Vec::new(),
            user: Vec::new(),
            oam_answered: 0,
            oam_other: 0,
            route_bits: FxHashMap::default(),
            books: FxHashMap::default(),
            hec: aurora_wire::hec::HecReceiver::new(),
            hec_dropped: 0,
            unexpected: 0,
            stop: None,
        }
    }

    /// Starts no PDU from `t` on (the end of a run's sending time; what is
    /// on its way then is left to arrive). A shaped flow's PDU already
    /// leaving at `t` finishes, its cells still shaped.
    pub fn stop_sending_at(&mut self, t: Instant) {
        self.stop = Some(t);
    }

    /// Flow `i` (in the order added) starts no further PDU: its count
    /// becomes what it has sent. A shaped flow's PDU already leaving
    /// finishes. An unknown `i` is ignored.
    pub fn end_flow(&mut self, i: usize) {
        if let Some(f) = self.flows.get_mut(i) {
            f.spec.count = f.sent;
        }
    }

    /// The books of receiving VC `vc`: what it saw of PDUs it did not
    /// deliver.
    pub fn book(&self, vc: VcId) -> Option<&RxBook> {
        self.books.get(&vc)
    }

    /// Cells dropped on arrival: (header failed the HEC check, on a VC the
    /// host does not expect).
    pub fn arrival_drops(&self) -> (u64, u64) {
        (self.hec_dropped, self.unexpected)
    }

    /// Cells this host sends on `vc` carry `bits` (0-15) in their GFC
    /// field: the output port a VuNet switch at the far end of the host's
    /// link routes them to.
    pub fn set_route_bits(&mut self, vc: VcId, bits: u8) {
        self.route_bits.insert(vc, bits & 0x0F);
    }

    /// Adds a flow to send. Refused (as a [`TxError::Field`]) on a VC
    /// that a shaped flow sends on.
    pub fn add_flow(&mut self, f: Flow) -> Result<(), TxError> {
        if f.sdu_len < tag::TAG_LEN || f.sdu_len > aal5::MAX_SDU {
            return Err(TxError::TooLong {
                len: f.sdu_len,
                max: aal5::MAX_SDU,
            });
        }
        if self
            .flows
            .iter()
            .any(|g| g.spec.vc == f.vc && g.shaped.is_some())
        {
            return Err(TxError::Field("vc: a shaped flow sends on it"));
        }
        let tx = Aal5Tx::new(f.vc, self.format)?;
        self.flows.push(TxFlow {
            spec: f,
            tx,
            next: f.start,
            sent: 0,
            shaped: None,
        });
        Ok(())
    }

    /// Shapes flow `i` (in the order added) to `contract`: from now on its
    /// cells leave one at a time, each when the contract allows (see the
    /// [module](self) documentation). Shaping a shaped flow again gives it
    /// a fresh shaper for the new contract; the PDU leaving finishes under
    /// it, and the figures so far are kept. The flow must have its VC to
    /// itself.
    pub fn shape(&mut self, i: usize, contract: Contract) -> Result<(), ShapeError> {
        let vc = self.flows.get(i).ok_or(ShapeError::NoSuchFlow(i))?.spec.vc;
        if self
            .flows
            .iter()
            .enumerate()
            .any(|(j, g)| j != i && g.spec.vc == vc)
        {
            return Err(ShapeError::SharedVc(vc));
        }
        let f = &mut self.flows[i];
        match &mut f.shaped {
            Some(s) => {
                s.contract = contract;
                s.shaper = Shaper::new(&contract);
                // A fresh shaper lets a cell go at once.
                s.ready = s.last;
                s.stats.contract = contract;
            }
            None => {
                f.shaped = Some(Box::new(Shaped {
                    contract,
                    shaper: Shaper::new(&contract),
                    cells: vec![[0; 53]; aal5::cells_for(f.spec.sdu_len)],
                    len: 0,
                    pos: 0,
                    ready: Instant::from_nanos(i64::MIN),
                    last: Instant::from_nanos(i64::MIN),
                    oam: std::collections::VecDeque::new(),
                    stats: ShapingStats {
                        contract,
                        ..ShapingStats::default()
                    },
                }))
            }
        }
        Ok(())
    }

    /// The contract flow `i` is shaped to, if it is.
    pub fn contract(&self, i: usize) -> Option<Contract> {
        Some(self.flows.get(i)?.shaped.as_ref()?.contract)
    }

    /// How shaped flow `i` kept to its schedule; `None` if it is not shaped.
    pub fn shaping(&self, i: usize) -> Option<ShapingStats> {
        Some(self.flows.get(i)?.shaped.as_ref()?.stats)
    }

    /// Cells of flow `i`'s PDU leaving that are still in the host (0 for a
    /// flow that is not shaped: its PDUs leave whole). Such a PDU counts as
    /// sent and so as in flight.
    pub fn cells_waiting(&self, i: usize) -> usize {
        self.flows
            .get(i)
            .and_then(|f| f.shaped.as_ref())
            .map_or(0, |s| s.len - s.pos)
    }

    /// Expects a flow arriving on `vc`.
    pub fn expect(&mut self, vc: VcId) {
        let _ = self.rx.open_vc(vc, VcConfig::default());
        self.rx_flows.entry(vc).or_default();
        self.books.entry(vc).or_default();
    }

    /// Adds a ping (OAM F5 loopback requests on a VC); returns its index.
    pub fn add_ping(&mut self, p: Ping) -> usize {
        // Each ping's own source ID tells its answers from another's on
        // the same VC.
        let i = self.pings.len();
        let mut source = *b"aurora-host\0\0\0\0\0";
        source[12..].copy_from_slice(&(i as u32).to_be_bytes());
        self.pings.push(Pinger::new(p, source));
        i
    }

    /// Every receiving VC and what arrived on it.
    pub fn received_all(&self) -> impl Iterator<Item = (VcId, RxFlow)> + '_ {
        self.rx_flows.iter().map(|(v, f)| (*v, *f))
    }

    /// Every ping's figures, in the order added.
    pub fn pings(&self) -> impl Iterator<Item = PingStats> + '_ {
        self.pings.iter().map(Pinger::stats)
    }

    /// What ping `i` found.
    pub fn ping(&self, i: usize) -> Option<PingStats> {
        self.pings.get(i).map(Pinger::stats)
    }

    /// (loopback requests answered, other OAM cells that arrived and were
    /// not a ping's answer: dropped, counted here).
    pub fn oam_counters(&self) -> (u64, u64) {
        (self.oam_answered, self.oam_other)
    }

    /// PDUs sent on flow `i` (in the order added). A shaped flow's PDU
    /// counts from when its first cell leaves.
    pub fn sent(&self, i: usize) -> u64 {
        self.flows.get(i).map_or(0, |f| f.sent)
    }

    /// Cells sent in all (a shaped flow's as they leave).
    pub fn cells_sent(&self) -> u64 {
        self.cells_sent
    }

    /// What arrived on `vc`.
    pub fn received(&self, vc: VcId) -> RxFlow {
        self.rx_flows.get(&vc).copied().unwrap_or_default()
    }

    /// The reassembler's totals.
    pub fn rx_stats(&self) -> RxStats {
        self.rx.stats()
    }

    /// Answers a loopback request, or gives a ping its answer; anything
    /// else is counted and dropped.
    fn oam_cell(&mut self, now: Instant, c: &CellBytes, out: &mut Outbox) {
        let answer = oam::loopback_answer(c, self.format, OamFlow::F5EndToEnd)
            .or_else(|| oam::loopback_answer(c, self.format, OamFlow::F4EndToEnd));
        if let Some(a) = answer {
            self.oam_answered += 1;
            send(&self.route_bits, self.format, out, a);
            return;
        }
        let vc = aurora_wire::cell::Header::parse(&[c[0], c[1], c[2], c[3]], self.format).vc();
        if !self
            .pings
            .iter_mut()
            .any(|p| p.vc() == vc && p.answer(now, c))
        {
            self.oam_other += 1;
        }
    }

    /// Reassembles user cells (one at a time, so the books follow every
    /// AAL5 unit) and checks each PDU.
    fn reassemble(&mut self, now: Instant, cells: &[CellBytes], out: &mut Outbox) {
        for c in cells {
            let vc = aurora_wire::cell::Header::parse(&[c[0], c[1], c[2], c[3]], self.format).vc();
            let (Some(f), Some(book)) = (self.rx_flows.get_mut(&vc), self.books.get_mut(&vc))
            else {
                self.unexpected += 1;
                out.dropped(0, c, "unknown_vc");
                self.rx.push(now, std::slice::from_ref(c), &mut |_| {});
                continue;
            };
            book.cell(c);
            let end = c[3] & 0x02 != 0;
            let before = end.then(|| self.rx.stats().pdus_dropped);
            let want = &mut self.want;
            let mut intact = None;
            let mut failed = None;
            let mut spent = None;
            self.rx.push(now, std::slice::from_ref(c), &mut |d| {
                'check: {
                    let sdu = d.sdu();
                    // The PDU delivered is the last of its unit: its tag is
                    // the unit's last.
                    let Some(t) = book.in_progress().last().copied() else {
                        f.corrupted += 1;
                        break 'check;
                    };
                    pattern(t.flow, t.seq, sdu.len(), want);
                    if d.status != Status::Intact || sdu != &want[..] {
                        f.corrupted += 1;
                        failed = Some("crc");
                        break 'check;
                    }
                    intact = Some(t);
                    if t.seq < f.next_seq {
                        f.out_of_order += 1;
                        break 'check;
                    }
                    f.missing += t.seq - f.next_seq;
                    f.next_seq = t.seq + 1;
                    f.delivered += 1;
                    f.bytes += sdu.len() as u64;
                }
                spent = Some(d.into_buffer());
            });
            // The PDU's buffer serves the next one.
            if let Some(b) = spent {
                self.rx.recycle(b);
            }
            if let Some(before) = before {
                let after = self.rx.stats().pdus_dropped;
                if failed.is_none() {
                    failed = aurora_sar::DropReason::ALL
                        .into_iter()
                        .find(|r| after.get(*r) > before.get(*r))
                        .map(|r| r.name());
                }
                book.unit_ended(intact, failed);
            }
        }
    }

    /// True when every flow has sent all its PDUs, every cell of them.
    pub fn done_sending(&self) -> bool {
        self.flows
            .iter()
            .all(|f| f.sent >= f.spec.count && f.shaped.as_ref().is_none_or(|s| s.pos == s.len))
    }
}

/// Sends what shaped flow `f` may send by `now`, one cell at a time as the
/// shaper lets them go: a ping's OAM cells waiting first, then the cells
/// of the PDU leaving and, once it is out, the next PDU if it is due (and
/// the stop has not come).
#[allow(clippy::too_many_arguments)]
fn poll_shaped(
    f: &mut TxFlow,
    now: Instant,
    stop: Option<Instant>,
    sdu: &mut Vec<u8>,
    cells_sent: &mut u64,
    bits: &FxHashMap<VcId, u8>,
    format: Format,
    out: &mut Outbox,
) {
    let Some(s) = f.shaped.as_deref_mut() else {
        return;
    };
    let mut budget = MAX_SHAPED_CELLS_PER_POLL;
    while budget > 0 {
        if s.shaper.next_conforming(now) > now {
            break;
        }
        // A ping's OAM cell goes first, in the flow's conforming stream.
        if let Some(c) = s.oam.pop_front() {
            s.shaper.sent(now);
            s.last = now;
            send(bits, format, out, c);
            s.stats.oam_sent += 1;
            budget -= 1;
            continue;
        }
        if s.pos == s.len {
            // The PDU before is out; the next starts if it is due.
            if f.sent >= f.spec.count || f.next > now || stop.is_some_and(|t| now >= t) {
                break;
            }
            let t = Tag {
                flow: f.spec.id,
                seq: f.sent,
            };
            let k = pattern(t.flow, t.seq, f.spec.sdu_len, sdu);
            let Ok(n) = f.tx.segment_into(sdu, PduOptions::default(), &mut s.cells) else {
                // Cannot happen (the buffer was sized for the PDU and the
                // length checked); if it did, the flow would end here
                // rather than skip a PDU or ask to be polled for ever.
                f.spec.count = f.sent;
                break;
            };
            tag::patch_last_cell(t, k, &mut s.cells[n - 1]);
            (s.len, s.pos) = (n, 0);
            let late = now - f.next;
            if late > Duration::ZERO {
                s.stats.late += 1;
                s.stats.max_delay = s.stats.max_delay.max(late);
                s.stats.total_delay = s.stats.total_delay + late;
            }
            f.sent += 1;
            f.next += f.spec.interval;
        }
        s.shaper.sent(now);
        s.last = now;
        send(bits, format, out, s.cells[s.pos]);
        s.pos += 1;
        s.stats.cells_sent += 1;
        *cells_sent += 1;
        budget -= 1;
    }
    s.ready = s.shaper.next_conforming(now);
}

impl Node for TrafficHost {
    fn ports(&self) -> usize {
        1
    }

    fn receive(&mut self, now: Instant, _port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        // Headers are checked (and single-bit errors repaired) first; OAM
        // cells are taken out here; user cells go on to reassembly.
        let mut user = std::mem::take(&mut self.user);
        user.clear();
        for c in cells {
            let mut c2 = *c;
            if self.hec.check_cell(&mut c2) == aurora_wire::hec::HecVerdict::Discarded {
                self.hec_dropped += 1;
                out.dropped(0, c, "hec_uncorrectable");
                continue;
            }
            if oam::is_oam(&c2) {
                self.oam_cell(now, &c2, out);
            } else {
                user.push(c2);
            }
        }
        self.reassemble(now, &user, out);
        self.user = user;
    }
    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        self.rx.handle_timeout(now);
        let (bits, format) = (&self.route_bits, self.format);
        for p in &mut self.pings {
            // An end-to-end ping on a shaped flow's VC waits for the flow's
            // shaper (segment OAM cells are not the contract's).
            let vc = p.vc();
            let shaped = self
                .flows
                .iter_mut()
                .find(|f| f.spec.vc == vc)
                .and_then(|f| f.shaped.as_deref_mut())
                .filter(|_| p.end_to_end());
            match shaped {
                Some(s) => p.poll(now, &mut |c| {
                    let room = s.oam.len() < MAX_SHAPED_OAM_WAITING;
                    if room {
                        s.oam.push_back(c);
                    } else {
                        s.stats.oam_refused += 1;
                    }
                    room
                }),
                None => p.poll(now, &mut |c| {
                    send(bits, format, out, c);
                    true
                }),
            }
        }
        for f in &mut self.flows {
            if f.shaped.is_some() {
                poll_shaped(
                    f,
                    now,
                    self.stop,
                    &mut self.sdu,
                    &mut self.cells_sent,
                    bits,
                    format,
                    out,
                );
                continue;
            }
            // A host sends at most this many PDUs of a flow per poll, so a
            // zero interval cannot stall the clock.
            let mut budget = MAX_PDUS_PER_POLL;
            while f.sent < f.spec.count
                && f.next <= now
                && self.stop.is_none_or(|s| f.next < s)
                && budget > 0
            {
                budget -= 1;
                let t = Tag {
                    flow: f.spec.id,
                    seq: f.sent,
                };
                let k = pattern(t.flow, t.seq, f.spec.sdu_len, &mut self.sdu);
                self.cells.resize(aal5::cells_for(f.spec.sdu_len), [0; 53]);
                if let Ok(n) =
                    f.tx.segment_into(&self.sdu, PduOptions::default(), &mut self.cells)
                {
                    tag::patch_last_cell(t, k, &mut self.cells[n - 1]);
                    for c in &self.cells[..n] {
                        send(bits, format, out, *c);
                    }
                    self.cells_sent += n as u64;
                }
                f.sent += 1;
                f.next += f.spec.interval;
            }
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        let next_send = self
            .flows
            .iter()
            .filter_map(|f| match &f.shaped {
                None => (f.sent < f.spec.count && self.stop.is_none_or(|s| f.next < s))
                    .then_some(f.next),
                // A cell of the PDU leaving, or of a ping, when the shaper
                // lets it go.
                Some(s) if s.pos < s.len || !s.oam.is_empty() => Some(s.ready),
                // The next PDU's first cell, when it is due and conforms,
                // if that is before the stop.
                Some(s) => {
                    let at = f.next.max(s.ready);
                    (f.sent < f.spec.count && self.stop.is_none_or(|t| at < t)).then_some(at)
                }
            })
            .min();
        let next_ping = self.pings.iter().filter_map(Pinger::due).min();
        [next_send, next_ping, self.rx.poll_at()]
            .into_iter()
            .flatten()
            .min()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pattern_is_its_definition_between_the_tags() {
        let mut got = Vec::new();
        for (seq, len) in [
            (0u64, 8usize),
            (1, 48),
            (7, 255),
            (255, 256),
            (256, 257),
            (u64::MAX, 9180),
        ]
        .into_iter()
        .chain((0..300).map(|i| (i * 0x9E37_79B9 + i, (i as usize * 37) % 2000 + 8)))
        {
            let mut want: Vec<u8> = (0..len)
                .map(|k| (seq.wrapping_mul(31) as usize).wrapping_add(k * 7) as u8)
                .collect();
            let k = tag::write_sdu(Tag { flow: 3, seq }, &mut want);
            assert_eq!(super::pattern(3, seq, len, &mut got), k);
            assert_eq!(got, want, "seq {seq}, {len} bytes");
        }
    }

    use super::*;

    /// Runs `a` against `b` (their ports joined directly) until both are
    /// idle, moving time on by 1 µs per step.
    fn exchange(a: &mut TrafficHost, b: &mut TrafficHost, until: Instant) {
        let mut now = Instant::ZERO;
        let mut out = Outbox::default();
        while now <= until {
            a.poll(now, &mut out);
            let cells: Vec<CellBytes> = out.drain().map(|(_, c)| c).collect();
            b.receive(now, 0, &cells, &mut out);
            let back: Vec<CellBytes> = out.drain().map(|(_, c)| c).collect();
            a.receive(now, 0, &back, &mut out);
            now += Duration::from_micros(1);
        }
    }

    #[test]
    fn two_pings_on_one_vc_each_get_their_own_answers() {
        let vc = VcId::new(0, 100);
        let mut a = TrafficHost::new(Format::Uni);
        let mut b = TrafficHost::new(Format::Uni);
        let ping = |count, start| Ping {
            vc,
            end_to_end: true,
            count,
            start,
            interval: Duration::from_micros(10),
        };
        let first = a.add_ping(ping(5, Instant::ZERO));
        let second = a.add_ping(ping(3, Instant::ZERO + Duration::from_micros(2)));
        exchange(&mut a, &mut b, Instant::ZERO + Duration::from_micros(100));
        let (s1, s2) = (a.ping(first).unwrap(), a.ping(second).unwrap());
        assert_eq!((s1.sent, s1.answered, s1.unmatched), (5, 5, 0));
        assert_eq!((s2.sent, s2.answered, s2.unmatched), (3, 3, 0));
        assert_eq!(b.oam_counters(), (8, 0));
    }

    #[test]
    fn route_bits_go_in_the_gfc_of_every_cell_on_their_vc() {
        let (vc, other) = (VcId::new(0, 100), VcId::new(0, 101));
        let mut a = TrafficHost::new(Format::Uni);
        a.set_route_bits(vc, 5);
        for v in [vc, other] {
            a.add_flow(Flow {
                id: 0,
                vc: v,
                sdu_len: 100,
                count: 1,
                start: Instant::ZERO,
                interval: Duration::from_micros(1),
            })
            .unwrap();
        }
        let mut out = Outbox::default();
        a.poll(Instant::ZERO, &mut out);
        let cells: Vec<CellBytes> = out.drain().map(|(_, c)| c).collect();
        assert_eq!(cells.len(), 6);
        for c in &cells {
            let h = aurora_wire::cell::Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni);
            let want = if h.vc() == vc { 5 } else { 0 };
            assert_eq!(h.gfc, want);
            // The header still checks.
            assert_eq!(aurora_wire::crc::hec(&[c[0], c[1], c[2], c[3]]), c[4]);
        }
    }
}
