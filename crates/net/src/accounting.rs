//! The accounting identity for test flows: every PDU a flow sends ends
//! delivered, corrupted, lost (with a reason and a place), or still in
//! flight, and anything else is *unaccounted*, which a report must show.
//!
//! Two parties keep the books, and a report joins them with [`reconcile`]:
//!
//! - the driver's [`Ledger`] sees every data cell dropped anywhere (a full
//!   output buffer, a lost cell on a link, a node that dropped a cell on
//!   arrival) and charges the PDU it belongs to (read from the cell's
//!   [`Tag`]) to the first place and reason that doomed it;
//! - the receiving traffic host's [`RxBook`] follows the AAL5 units it is
//!   given (cells up to an end-of-PDU cell) and notes every PDU it saw but
//!   could not deliver: a PDU whose cells were all there but whose CRC
//!   failed is *corrupted*; one that ran together with a PDU that lost its
//!   last cell is lost with that PDU's reason; one caught in a reassembly
//!   the receiver gave up on is lost with the receiver's reason.
//!
//! A PDU's fate is decided by the first of these to see it. Sequence
//! numbers are per flow and a flow's cells stay in order along its path,
//! so once the receiver has seen PDU `h` every earlier PDU has an outcome:
//! a PDU before `h` with none is unaccounted; one after `h` is in flight,
//! unless a run of several processes saw it leave one and never reach the
//! next ([`Vanished`]): then it was lost between them.

use std::collections::BTreeMap;

use aurora_time::Instant;
use aurora_wire::cell::{Format, VcId};
use aurora_wire::CellBytes;
use rustc_hash::FxHashMap;

use crate::tag::Tag;
use crate::PortId;

/// Which side of a node a loss happened on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The port's output: its buffer and the link leaving it.
    Out,
    /// Arrival at the node (its HEC check, tables, reassembly).
    In,
}

/// Where a loss happened: a node's port, on its way in or out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    /// The node's number in its driver.
    pub node: u32,
    /// The port.
    pub port: PortId,
    /// In or out.
    pub side: Side,
}

/// A named loss at a place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loss {
    /// Where.
    pub place: Place,
    /// Why: a short snake_case name (`tail_drop`, `link_loss`,
    /// `hec_uncorrectable`, `reassembly_timeout`, ...).
    pub reason: &'static str,
}

/// PDUs a ledger or a receiver remembers at most; past this, new PDUs are
/// counted in `overflow` and a report cannot vouch for them.
pub const MAX_RECORDS: usize = 1 << 20;

/// A cell's header with a single-bit error repaired (from the HEC
/// syndrome), so a cell dropped for its header can still be told apart
/// from OAM; the cell unchanged when that cannot be done.
pub fn repaired(cell: &CellBytes) -> CellBytes {
    let mut c = *cell;
    let h: [u8; 5] = [c[0], c[1], c[2], c[3], c[4]];
    let s = aurora_wire::crc::hec_syndrome(&h);
    if s != 0 {
        if let Some(bit) = aurora_wire::crc::hec_error_bit(s) {
            let bit = usize::from(bit);
            if bit < 40 {
                c[bit / 8] ^= 0x80 >> (bit % 8);
            }
        }
    }
    c
}

/// True for a cell that carries user data (PTI 0xx) and so may carry a
/// tag; OAM and resource-management cells never do.
pub fn is_user(c: &CellBytes) -> bool {
    c[3] & 0x08 == 0
}

/// The driver's record of dropped cells.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Per PDU, its first loss: the earliest, and at one instant the least
    /// place and reason, so the charge does not depend on the order drops
    /// were reported in (workers report concurrently).
    first: FxHashMap<Tag, (Instant, Loss)>,
    /// Data cells dropped, per place and reason.
    cells: BTreeMap<Loss, u64>,
    /// Of those, cells with no readable tag (not test traffic, or a tag
    /// damaged by a bit error before the cell was dropped).
    untagged: BTreeMap<Loss, u64>,
    /// The same, by the VC in their header too.
    untagged_vc: BTreeMap<(Loss, VcId), u64>,
    /// Which flow each (place, VC) carries, learnt from the tagged cells
    /// dropped there (bounded: a place and VC per flow, at most).
    vc_flow: FxHashMap<(Place, VcId), u16>,
    /// End-of-message cells dropped, per place, reason and the VC in
    /// their header: each is one PDU its sender finished that can no
    /// longer reach its receiver (AAL5's books by PDU, whatever the
    /// PDU carries).
    ends: BTreeMap<(Loss, VcId), u64>,
    /// Every cell dropped (data, OAM and resource-management alike), per
    /// place, reason and the VC in its header: what striped VCs' books
    /// read, since their cells carry no tags.
    by_vc: BTreeMap<(Loss, VcId), u64>,
    overflow: u64,
}

/// The VC in a cell's header (UNI).
pub fn vc_of(c: &CellBytes) -> VcId {
    aurora_wire::cell::Header::parse(&[c[0], c[1], c[2], c[3]], Format::Uni).vc()
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// `cell` was dropped at `at`, at `place`, for `reason`.
    pub fn dropped(&mut self, at: Instant, place: Place, reason: &'static str, cell: &CellBytes) {
        let c = repaired(cell);
        let loss = Loss { place, reason };
        let key = (loss, vc_of(&c));
        if self.by_vc.len() < MAX_RECORDS || self.by_vc.contains_key(&key) {
            *self.by_vc.entry(key).or_default() += 1;
        } else {
            self.overflow += 1;
        }
        if !is_user(&c) {
            return;
        }
        *self.cells.entry(loss).or_default() += 1;
        if c[3] & 0x02 != 0 {
            if self.ends.len() < MAX_RECORDS || self.ends.contains_key(&(loss, vc_of(&c))) {
                *self.ends.entry((loss, vc_of(&c))).or_default() += 1;
            } else {
                self.overflow += 1;
            }
        }
        match Tag::of_cell(&c) {
            Some(t) => {
                if self.vc_flow.len() < MAX_RECORDS {
                    self.vc_flow.insert((place, vc_of(&c)), t.flow);
                }
                if self.first.len() >= MAX_RECORDS && !self.first.contains_key(&t) {
                    self.overflow += 1;
                    return;
                }
                let e = self.first.entry(t).or_insert((at, loss));
                *e = (*e).min((at, loss));
            }
            None => {
                *self.untagged.entry(loss).or_default() += 1;
                let key = (loss, vc_of(&c));
                if self.untagged_vc.len() < MAX_RECORDS || self.untagged_vc.contains_key(&key) {
                    *self.untagged_vc.entry(key).or_default() += 1;
                }
            }
        }
    }

    /// `n` data cells with no readable tag and not ending a PDU dropped at
    /// `loss` on `vc`: as `n` calls of [`Ledger::dropped`] with such a cell.
    fn untagged_cells(&mut self, loss: Loss, vc: VcId, n: u64) {
        let key = (loss, vc);
        if self.by_vc.len() < MAX_RECORDS || self.by_vc.contains_key(&key) {
            *self.by_vc.entry(key).or_default() += n;
        } else {
            self.overflow += n;
        }
        *self.cells.entry(loss).or_default() += n;
        *self.untagged.entry(loss).or_default() += n;
        if self.untagged_vc.len() < MAX_RECORDS || self.untagged_vc.contains_key(&key) {
            *self.untagged_vc.entry(key).or_default() += n;
        }
    }

    /// Takes another ledger's records (a worker's, say); where both charged
    /// a PDU, the earlier loss stands.
    pub fn merge(&mut self, other: Ledger) {
        // The same bounds as `dropped` keeps: a record that would pass
        // them is counted as overflow, not kept.
        fn add<K: Ord>(m: &mut BTreeMap<K, u64>, k: K, n: u64, overflow: &mut u64) {
            if m.len() < MAX_RECORDS || m.contains_key(&k) {
                *m.entry(k).or_default() += n;
            } else {
                *overflow += n;
            }
        }
        for (t, l) in other.first {
            if self.first.len() >= MAX_RECORDS && !self.first.contains_key(&t) {
                self.overflow += 1;
                continue;
            }
            let e = self.first.entry(t).or_insert(l);
            *e = (*e).min(l);
        }
        for (l, n) in other.cells {
            *self.cells.entry(l).or_default() += n;
        }
        for (l, n) in other.untagged {
            *self.untagged.entry(l).or_default() += n;
        }
        for (k, n) in other.untagged_vc {
            if self.untagged_vc.len() < MAX_RECORDS || self.untagged_vc.contains_key(&k) {
                *self.untagged_vc.entry(k).or_default() += n;
            }
        }
        for (k, f) in other.vc_flow {
            if self.vc_flow.len() < MAX_RECORDS {
                self.vc_flow.entry(k).or_insert(f);
            }
        }
        for (k, n) in other.ends {
            add(&mut self.ends, k, n, &mut self.overflow);
        }
        for (k, n) in other.by_vc {
            add(&mut self.by_vc, k, n, &mut self.overflow);
        }
        self.overflow += other.overflow;
    }

    /// Data cells dropped, per place and reason.
    pub fn cells(&self) -> &BTreeMap<Loss, u64> {
        &self.cells
    }

    /// Dropped data cells that carried no readable tag.
    pub fn untagged(&self) -> &BTreeMap<Loss, u64> {
        &self.untagged
    }

    /// End-of-message data cells dropped, per place, reason and VC.
    pub fn ends(&self) -> &BTreeMap<(Loss, VcId), u64> {
        &self.ends
    }

    /// Cells of any kind dropped at `place` with `vc` in their header,
    /// per reason.
    pub fn dropped_on(
        &self,
        place: Place,
        vc: VcId,
    ) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.by_vc
            .iter()
            .filter(move |((l, v), _)| l.place == place && *v == vc)
            .map(|((l, _), n)| (l.reason, *n))
    }

    /// Records that did not fit in the ledger (PDUs charged, or places
    /// and VCs of dropped end cells).
    pub fn overflow(&self) -> u64 {
        self.overflow
    }

    /// PDUs charged so far.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// True when nothing has been charged.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// Dropped cells with no readable tag that, by their place and VC,
    /// belong to `flow`: each may be the first loss of a PDU of it.
    pub fn untagged_of(&self, flow: u16) -> impl Iterator<Item = (Loss, u64)> + '_ {
        self.untagged_vc
            .iter()
            .filter(move |((l, vc), _)| self.vc_flow.get(&(l.place, *vc)) == Some(&flow))
            .map(|((l, _), n)| (*l, *n))
    }

    /// Every PDU charged so far, with the time and place of its first
    /// loss (to carry one process's books to another, see
    /// [`Ledger::charge`]).
    pub fn charges(&self) -> impl Iterator<Item = (Tag, Instant, Loss)> + '_ {
        self.first.iter().map(|(t, (at, l))| (*t, *at, *l))
    }

    /// Charges PDU `tag` to `loss` at `at`, unless it has an earlier loss
    /// (another process's record, say; the same rule as
    /// [`Ledger::merge`]).
    pub fn charge(&mut self, tag: Tag, at: Instant, loss: Loss) {
        if self.first.len() >= MAX_RECORDS && !self.first.contains_key(&tag) {
            self.overflow = self.overflow.saturating_add(1);
            return;
        }
        let e = self.first.entry(tag).or_insert((at, loss));
        *e = (*e).min((at, loss));
    }

    /// Dropped data cells with no readable tag, per place, reason and VC,
    /// with the flow that place and VC carry, if the ledger learnt it.
    pub fn untagged_by_vc(&self) -> impl Iterator<Item = (Loss, VcId, u64, Option<u16>)> + '_ {
        self.untagged_vc
            .iter()
            .map(|((l, vc), n)| (*l, *vc, *n, self.vc_flow.get(&(l.place, *vc)).copied()))
    }

    /// Takes `n` dropped data cells with no readable tag, at `loss`, on
    /// `vc`, of `flow` if known (another process's record).
    pub fn add_untagged(&mut self, loss: Loss, vc: VcId, n: u64, flow: Option<u16>) {
        let e = self.untagged.entry(loss).or_default();
        *e = e.saturating_add(n);
        if self.untagged_vc.len() < MAX_RECORDS || self.untagged_vc.contains_key(&(loss, vc)) {
            let e = self.untagged_vc.entry((loss, vc)).or_default();
            *e = e.saturating_add(n);
        } else {
            self.overflow = self.overflow.saturating_add(n);
        }
        if let Some(f) = flow {
            if self.vc_flow.len() < MAX_RECORDS {
                self.vc_flow.entry((loss.place, vc)).or_insert(f);
            }
        }
    }

    /// Takes `n` dropped data cells at `loss` into the per-place counts
    /// (another process's record; their PDUs are charged separately).
    pub fn add_cells(&mut self, loss: Loss, n: u64) {
        let e = self.cells.entry(loss).or_default();
        *e = e.saturating_add(n);
    }

    /// Counts `n` records another process had no room for.
    pub fn add_overflow(&mut self, n: u64) {
        self.overflow = self.overflow.saturating_add(n);
    }

    fn of_flow(&self, flow: u16) -> impl Iterator<Item = (u64, Loss)> + '_ {
        self.first
            .iter()
            .filter(move |(t, _)| t.flow == flow)
            .map(|(t, (_, l))| (t.seq, *l))
    }
}

/// A [`Ledger`] fed by a drop tap, cheaper per cell where cells are
/// dropped in runs: consecutive data cells with no tag (IP packets' cells,
/// say) dropped at one place, for one reason, on one VC, none ending a
/// PDU, are counted once per run instead of once per cell. What it
/// records is exactly what [`Ledger::dropped`] would have; [`Recorder::finish`]
/// hands over the ledger.
#[derive(Debug, Default)]
pub struct Recorder {
    ledger: Ledger,
    /// The run being counted: its place and reason, VC, and cells.
    run: Option<(Loss, VcId, u64)>,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// As [`Ledger::dropped`].
    pub fn dropped(&mut self, at: Instant, place: Place, reason: &'static str, cell: &CellBytes) {
        let c = repaired(cell);
        if is_user(&c) && c[3] & 0x02 == 0 && Tag::of_cell(&c).is_none() {
            let (loss, vc) = (Loss { place, reason }, vc_of(&c));
            if let Some((l, v, n)) = &mut self.run {
                if *l == loss && *v == vc {
                    *n += 1;
                    return;
                }
            }
            self.flush();
            self.run = Some((loss, vc, 1));
            return;
        }
        self.flush();
        self.ledger.dropped(at, place, reason, cell);
    }

    /// Counts the run in the ledger.
    fn flush(&mut self) {
        if let Some((loss, vc, n)) = self.run.take() {
            self.ledger.untagged_cells(loss, vc, n);
        }
    }

    /// The ledger, with every cell recorded.
    pub fn finish(mut self) -> Ledger {
        self.flush();
        self.ledger
    }
}

/// What a receiver saw of a PDU it did not deliver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxFate {
    /// Every cell arrived but the CRC failed: bits were damaged on the way.
    Corrupted,
    /// Ran together with the PDU before it in one AAL5 unit (that PDU lost
    /// its last cell); charged to that PDU's loss.
    Merged {
        /// The PDU whose loss took this one with it.
        with: u64,
    },
    /// The receiver gave up on it for this reason.
    Receiver(&'static str),
}

/// One receiving VC's books, kept by the traffic host.
#[derive(Debug, Default)]
pub struct RxBook {
    /// Tags of the AAL5 unit in progress, in arrival order (bounded).
    unit: Vec<Tag>,
    /// Cells in the unit in progress.
    unit_cells: u64,
    /// Cells in a PDU of each flow, learnt from PDUs delivered intact.
    pdu_cells: FxHashMap<u16, u64>,
    /// The last PDU of each flow seen in a unit that has ended.
    closed: FxHashMap<u16, u64>,
    fates: FxHashMap<Tag, RxFate>,
    highest: FxHashMap<u16, u64>,
    /// Units not delivered whose every tag was unreadable (bit errors hit
    /// them all), by the receiver's reason; each holds at least one PDU.
    untagged: BTreeMap<&'static str, u64>,
    overflow: u64,
}

/// Tags an AAL5 unit remembers at most (a unit longer than a largest PDU
/// has been dropped by the reassembler anyway; its tail is still followed
/// through the last tags kept).
const MAX_UNIT_TAGS: usize = 4096;

impl RxBook {
    /// A cell arrived for reassembly.
    #[inline]
    pub fn cell(&mut self, c: &CellBytes) {
        self.unit_cells += 1;
        if let Some(t) = Tag::of_cell(c) {
            if self.unit.last() != Some(&t) {
                if self.unit.len() >= MAX_UNIT_TAGS {
                    self.unit.remove(1);
                }
                self.unit.push(t);
            }
            let h = self.highest.entry(t.flow).or_insert(t.seq);
            *h = (*h).max(t.seq);
        }
    }

    /// The unit ended (its end-of-PDU cell arrived): `intact` is the PDU
    /// delivered intact, if one was; `failed` the reassembler's reason for
    /// what it did not deliver, if it gave one.
    pub fn unit_ended(&mut self, intact: Option<Tag>, failed: Option<&'static str>) {
        let mut unit = std::mem::take(&mut self.unit);
        let cells = std::mem::take(&mut self.unit_cells);
        // A unit longer than one PDU of its flow (learnt from PDUs that
        // arrived intact: a flow's PDUs are all one size) ran several PDUs
        // together, at least this many. PDUs between its first and last
        // whose tags were all damaged are put back in from their numbers: a
        // flow's PDUs arrive in order, after the last one of the unit before.
        if let Some(t) = intact {
            if unit.len() == 1 && self.pdu_cells.len() < MAX_UNIT_TAGS {
                self.pdu_cells.insert(t.flow, cells);
            }
        }
        if let (Some(last), None) = (unit.last().copied(), intact) {
            let per = self.pdu_cells.get(&last.flow).copied().unwrap_or(0);
            let floor = self.closed.get(&last.flow).copied();
            if per > 0 {
                let pdus = cells.div_ceil(per);
                for k in 1..pdus.min(MAX_UNIT_TAGS as u64) {
                    let Some(seq) = last.seq.checked_sub(k) else {
                        break;
                    };
                    if floor.is_some_and(|f| seq <= f) {
                        break;
                    }
                    let t = Tag {
                        flow: last.flow,
                        seq,
                    };
                    if !unit.contains(&t) {
                        unit.push(t);
                    }
                }
                unit.sort();
            }
        }
        for t in unit.iter().chain(intact.iter()) {
            if self.closed.len() < MAX_UNIT_TAGS || self.closed.contains_key(&t.flow) {
                let c = self.closed.entry(t.flow).or_insert(t.seq);
                *c = (*c).max(t.seq);
            }
        }
        let rest: Vec<Tag> = unit
            .iter()
            .copied()
            .filter(|t| Some(*t) != intact)
            .collect();
        let Some(first) = rest.first().copied() else {
            if intact.is_none() {
                *self.untagged.entry(failed.unwrap_or("merged")).or_default() += 1;
            }
            self.unit = unit;
            self.unit.clear();
            return;
        };
        let alone = rest.len() == 1 && intact.is_none();
        for t in &rest {
            let fate = if alone && failed == Some("crc") {
                RxFate::Corrupted
            } else if *t != first && t.flow == first.flow {
                RxFate::Merged { with: first.seq }
            } else {
                RxFate::Receiver(failed.map_or("reassembly_merged", reassembly_reason))
            };
            self.note(*t, fate);
        }
        self.unit = unit;
        self.unit.clear();
    }

    fn note(&mut self, t: Tag, fate: RxFate) {
        if self.fates.len() >= MAX_RECORDS && !self.fates.contains_key(&t) {
            self.overflow += 1;
            return;
        }
        self.fates.entry(t).or_insert(fate);
    }

    /// The PDUs of the unit still in progress (read at the end of a run).
    pub fn in_progress(&self) -> &[Tag] {
        &self.unit
    }

    /// The highest sequence number seen of `flow`, delivered or not.
    pub fn highest(&self, flow: u16) -> Option<u64> {
        self.highest.get(&flow).copied()
    }

    /// PDUs that did not fit in the book.
    pub fn overflow(&self) -> u64 {
        self.overflow
    }
}

/// What a receiver's book holds at the end of a run, to carry it to
/// another process ([`RxBook::snapshot`], [`RxBook::from_snapshot`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RxSnapshot {
    /// The highest sequence number seen, per flow.
    pub highest: Vec<(u16, u64)>,
    /// The PDUs seen and not delivered, with what became of them.
    pub fates: Vec<(Tag, RxFate)>,
    /// The PDUs of the unit still in progress.
    pub in_progress: Vec<Tag>,
    /// Failed units whose every tag was unreadable, by the receiver's
    /// reason.
    pub untagged: Vec<(&'static str, u64)>,
    /// PDUs that did not fit in the book.
    pub overflow: u64,
}

impl RxBook {
    /// What [`reconcile`] reads of the book.
    pub fn snapshot(&self) -> RxSnapshot {
        let mut fates: Vec<(Tag, RxFate)> = self.fates.iter().map(|(t, f)| (*t, *f)).collect();
        fates.sort_by_key(|(t, _)| *t);
        let mut highest: Vec<(u16, u64)> = self.highest.iter().map(|(f, s)| (*f, *s)).collect();
        highest.sort_unstable();
        RxSnapshot {
            highest,
            fates,
            in_progress: self.unit.clone(),
            untagged: self.untagged.iter().map(|(r, n)| (*r, *n)).collect(),
            overflow: self.overflow,
        }
    }

    /// A book that [`reconcile`] reads as it would have read the one
    /// `s` was taken from; bounded as a book is (what does not fit counts
    /// as overflow).
    pub fn from_snapshot(s: RxSnapshot) -> Self {
        let mut b = RxBook {
            overflow: s.overflow,
            ..RxBook::default()
        };
        for (f, seq) in s.highest.into_iter().take(MAX_UNIT_TAGS) {
            b.highest.insert(f, seq);
        }
        for (t, fate) in s.fates {
            b.note(t, fate);
        }
        b.unit = s.in_progress.into_iter().take(MAX_UNIT_TAGS).collect();
        for (r, n) in s.untagged.into_iter().take(MAX_UNIT_TAGS) {
            let e = b.untagged.entry(r).or_default();
            *e = e.saturating_add(n);
        }
        b
    }
}

/// The receiver's name for an AAL5 reassembly failure.
pub fn reassembly_reason(r: &'static str) -> &'static str {
    match r {
        "crc" => "reassembly_crc",
        "length" => "reassembly_length",
        "aborted" => "aborted",
        "oversize" => "reassembly_oversize",
        "timeout" => "reassembly_timeout",
        "budget_exhausted" => "buffer_exhausted",
        other => other,
    }
}

/// One flow's books, balanced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Account {
    /// PDUs sent.
    pub sent: u64,
    /// PDUs delivered intact.
    pub delivered: u64,
    /// PDUs whose cells all arrived but whose bytes were damaged.
    pub corrupted: u64,
    /// PDUs lost, per place and reason.
    pub lost: BTreeMap<Loss, u64>,
    /// PDUs still in the network or part-reassembled when the books closed.
    pub in_flight: u64,
    /// `sent − delivered − corrupted − lost − in_flight`: PDUs with no
    /// outcome (or, below 0, counted twice). Anything but 0 is a fault of
    /// the testbed.
    pub unaccounted: i64,
}

impl Account {
    /// All PDUs lost.
    pub fn lost_total(&self) -> u64 {
        self.lost.values().fold(0, |a, n| a.saturating_add(*n))
    }
}

/// Why PDUs whose cells left one process never reached the next.
pub const BETWEEN_PROCESSES: &str = "lost_between_processes";

/// PDUs of a flow that left one process for another and never reached it
/// (sent after it stopped reading, or lost on the way): the end cells of
/// those numbered `from .. to` were taken by a link out of the sending
/// process (unless lost before it with no readable tag), and the
/// receiving one neither read them nor held them unread when it stopped.
/// [`reconcile`] charges to `place` (the receiving end), as
/// [`BETWEEN_PROCESSES`] instead of in flight, each of them that has no
/// other outcome and comes after the last PDU the receiver saw, and each
/// the receiver held part-way when the books closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vanished {
    /// Where they would have arrived.
    pub place: Place,
    /// The first.
    pub from: u64,
    /// One past the last.
    pub to: u64,
}

/// Balances one flow: `sent` PDUs (sequence numbers `0..sent`),
/// `delivered` of them delivered intact by a receiver whose book is `rx`
/// (`None` when nothing reached a receiver), at `receiver` (its arrival
/// place, where its own losses are charged); `vanished`, PDUs a run of
/// several processes saw leave one and never reach the next (each charged
/// once: ranges are taken by their start, each clipped to begin past the
/// ones before).
pub fn reconcile(
    flow: u16,
    sent: u64,
    delivered: u64,
    ledger: &Ledger,
    rx: Option<&RxBook>,
    receiver: Place,
    vanished: &[Vanished],
) -> Account {
    // Each PDU's outcome, the first found: the network's, then the receiver's.
    let mut fate: BTreeMap<u64, Outcome> = ledger
        .of_flow(flow)
        .filter(|(s, _)| *s < sent)
        .map(|(s, l)| (s, Outcome::Lost(l)))
        .collect();
    let mut highest = None;
    if let Some(rx) = rx {
        highest = rx.highest(flow);
        let mut merged = Vec::new();
        for (t, f) in &rx.fates {
            if t.flow != flow || t.seq >= sent || fate.contains_key(&t.seq) {
                continue;
            }
            match *f {
                RxFate::Corrupted => {
                    fate.insert(t.seq, Outcome::Corrupted);
                }
                RxFate::Merged { with } => merged.push((t.seq, with)),
                RxFate::Receiver(r) => {
                    fate.insert(
                        t.seq,
                        Outcome::Lost(Loss {
                            place: receiver,
                            reason: r,
                        }),
                    );
                }
            }
        }
        for (s, with) in merged {
            let o = match fate.get(&with) {
                Some(Outcome::Lost(l)) => Outcome::Lost(*l),
                _ => Outcome::Lost(Loss {
                    place: receiver,
                    reason: "reassembly_merged",
                }),
            };
            fate.entry(s).or_insert(o);
        }
        for t in rx.in_progress() {
            if t.flow == flow && t.seq < sent && !fate.contains_key(&t.seq) {
                fate.insert(t.seq, Outcome::InFlight);
            }
        }
    }
    let mut a = Account {
        sent,
        delivered,
        ..Account::default()
    };
    let mut known_upto = 0u64; // outcomes at or below the highest seen
    for (s, o) in &fate {
        if highest.is_some_and(|h| *s <= h) {
            known_upto += 1;
        }
        match o {
            Outcome::Lost(l) => *a.lost.entry(*l).or_default() += 1,
            Outcome::Corrupted => a.corrupted += 1,
            Outcome::InFlight => a.in_flight += 1,
        }
    }
    // PDUs after the highest one seen, with no outcome yet, are in flight;
    // before it, every PDU must have one.
    let seen = highest
        .filter(|_| sent > 0)
        .map_or(0, |h| h.min(sent - 1) + 1);
    let after = sent.saturating_sub(seen);
    let outcomes_after = fate.len() as u64 - known_upto;
    // Of those, the ones that left a process and never reached the next
    // are lost between them, and so are PDUs the receiver held part-way
    // whose rest never reached it: each range clipped to begin past the
    // ranges before it, so no PDU is charged twice.
    let mut ranges: Vec<&Vanished> = vanished.iter().collect();
    ranges.sort_by_key(|v| (v.from, v.to));
    let mut floor = 0u64;
    let (mut none_between, mut held_between) = (0u64, 0u64);
    for v in ranges {
        let (from, to) = (v.from.max(floor), v.to.min(sent));
        if from >= to {
            continue;
        }
        floor = to;
        let held = fate
            .range(from..to)
            .filter(|(_, o)| matches!(o, Outcome::InFlight))
            .count() as u64;
        let after_seen = from.max(seen);
        let none = if after_seen < to {
            (to - after_seen) - fate.range(after_seen..to).count() as u64
        } else {
            0
        };
        if held + none > 0 {
            held_between += held;
            none_between += none;
            let e = a
                .lost
                .entry(Loss {
                    place: v.place,
                    reason: BETWEEN_PROCESSES,
                })
                .or_default();
            *e = e.saturating_add(held + none);
        }
    }
    a.in_flight = a.in_flight.saturating_sub(held_between).saturating_add(
        after
            .saturating_sub(outcomes_after)
            .saturating_sub(none_between),
    );
    // PDUs before it with no outcome are explained, one each, by units the
    // receiver failed whose tags were all unreadable.
    let mut gaps = seen.saturating_sub(delivered.saturating_add(known_upto));
    // Then by cells dropped on the flow's path whose tags were damaged.
    for (loss, n) in ledger.untagged_of(flow) {
        let k = gaps.min(n);
        gaps -= k;
        *a.lost.entry(loss).or_default() += k;
    }
    if let Some(rx) = rx {
        for (why, n) in &rx.untagged {
            let k = gaps.min(*n);
            gaps -= k;
            if k == 0 {
                continue;
            }
            if *why == "crc" {
                a.corrupted = a.corrupted.saturating_add(k);
            } else {
                let reason = reassembly_reason(why);
                *a.lost
                    .entry(Loss {
                        place: receiver,
                        reason,
                    })
                    .or_default() += k;
            }
        }
    }
    // Saturating: books read from a file may hold any numbers.
    let accounted = a
        .delivered
        .saturating_add(a.corrupted)
        .saturating_add(a.lost_total())
        .saturating_add(a.in_flight);
    a.unaccounted = (i128::from(sent) - i128::from(accounted))
        .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    a
}

#[derive(Clone, Copy, Debug)]
enum Outcome {
    Lost(Loss),
    Corrupted,
    InFlight,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tag;

    const FLOW: u16 = 9;

    /// The cells of PDU `seq` of a 100-byte flow (three cells).
    fn pdu(seq: u64) -> Vec<CellBytes> {
        tag::pdu_cells(Tag { flow: FLOW, seq }, 100, VcId::new(0, 40)).unwrap()
    }

    fn at(node: u32) -> Place {
        Place {
            node,
            port: 1,
            side: Side::Out,
        }
    }

    const RX: Place = Place {
        node: 99,
        port: 0,
        side: Side::In,
    };

    #[test]
    fn the_first_damage_is_charged_once() {
        let mut l = Ledger::new();
        let p = pdu(4);
        l.dropped(Instant::from_nanos(1), at(1), "tail_drop", &p[0]);
        l.dropped(Instant::from_nanos(2), at(2), "link_loss", &p[1]);
        l.dropped(Instant::from_nanos(2), at(2), "link_loss", &p[2]);
        let a = reconcile(FLOW, 5, 0, &l, None, RX, &[]);
        assert_eq!(a.lost_total(), 1);
        assert_eq!(
            a.lost.get(&Loss {
                place: at(1),
                reason: "tail_drop"
            }),
            Some(&1)
        );
        // Nothing reached a receiver: PDUs 0-3 count as in flight.
        assert_eq!((a.in_flight, a.unaccounted), (4, 0));
        assert_eq!(l.cells().values().sum::<u64>(), 3);
    }

    #[test]
    fn a_pdu_that_lost_its_last_cell_takes_the_next_with_it() {
        let mut l = Ledger::new();
        let mut rx = RxBook::default();
        let (p0, p1, p2) = (pdu(0), pdu(1), pdu(2));
        l.dropped(Instant::from_nanos(3), at(3), "tail_drop", &p0[2]);
        for c in p0[..2].iter().chain(&p1) {
            rx.cell(c);
        }
        rx.unit_ended(None, Some("length"));
        for c in &p2 {
            rx.cell(c);
        }
        rx.unit_ended(Some(Tag { flow: FLOW, seq: 2 }), None);
        let a = reconcile(FLOW, 3, 1, &l, Some(&rx), RX, &[]);
        let here = Loss {
            place: at(3),
            reason: "tail_drop",
        };
        assert_eq!(a.lost.get(&here), Some(&2), "{a:?}");
        assert_eq!(
            (a.delivered, a.corrupted, a.in_flight, a.unaccounted),
            (1, 0, 0, 0)
        );
    }

    /// PDUs that left one process and never reached the next are lost
    /// there, each once, and only those with no other outcome after the
    /// last one the receiver saw; the rest stay in flight.
    #[test]
    fn pdus_that_vanished_between_processes_are_lost_there_once() {
        let mut l = Ledger::new();
        let mut rx = RxBook::default();
        // PDUs 0 to 3 delivered; PDU 6 lost a cell; 10 sent.
        for s in 0..4 {
            for c in &pdu(s) {
                rx.cell(c);
            }
            rx.unit_ended(Some(Tag { flow: FLOW, seq: s }), None);
        }
        l.dropped(Instant::from_nanos(5), at(1), "tail_drop", &pdu(6)[1]);
        let v = |node, from, to| Vanished {
            place: at(node),
            from,
            to,
        };
        let between = |a: &Account, node| {
            a.lost
                .get(&Loss {
                    place: at(node),
                    reason: BETWEEN_PROCESSES,
                })
                .copied()
        };
        // Unsorted, overlapping, reaching below PDU 4 and past the last.
        let ranges = [v(20, 5, 8), v(30, 2, 6), v(40, 7, 20)];
        let a = reconcile(FLOW, 10, 4, &l, Some(&rx), RX, &ranges);
        assert_eq!(between(&a, 30), Some(2), "{a:?}"); // PDUs 4, 5
        assert_eq!(between(&a, 20), Some(1), "{a:?}"); // PDU 7 (6 had a loss)
        assert_eq!(between(&a, 40), Some(2), "{a:?}"); // PDUs 8, 9
        assert_eq!((a.lost_total(), a.in_flight, a.unaccounted), (6, 0, 0));
        // Without them, the same PDUs are in flight.
        let b = reconcile(FLOW, 10, 4, &l, Some(&rx), RX, &[]);
        assert_eq!((b.lost_total(), b.in_flight, b.unaccounted), (1, 5, 0));
        // A range below what the receiver saw, or empty, changes nothing.
        let c = reconcile(FLOW, 10, 4, &l, Some(&rx), RX, &[v(20, 0, 4), v(20, 9, 9)]);
        assert_eq!(c, b);
    }

    /// A PDU the receiver held part-way whose end never reached its
    /// process is lost between processes too; without the range, it and
    /// the PDU after it are in flight.
    #[test]
    fn a_pdu_held_part_way_whose_end_vanished_is_lost_between() {
        let mut rx = RxBook::default();
        for c in &pdu(0) {
            rx.cell(c);
        }
        rx.unit_ended(Some(Tag { flow: FLOW, seq: 0 }), None);
        rx.cell(&pdu(1)[0]);
        let l = Ledger::new();
        let v = Vanished {
            place: at(5),
            from: 1,
            to: 3,
        };
        let a = reconcile(FLOW, 3, 1, &l, Some(&rx), RX, &[v]);
        let here = Loss {
            place: at(5),
            reason: BETWEEN_PROCESSES,
        };
        assert_eq!(a.lost.get(&here), Some(&2), "{a:?}");
        assert_eq!((a.in_flight, a.unaccounted), (0, 0));
        let b = reconcile(FLOW, 3, 1, &l, Some(&rx), RX, &[]);
        assert_eq!((b.lost_total(), b.in_flight, b.unaccounted), (0, 2, 0));
        // A range that begins past it leaves it in flight.
        let c = reconcile(FLOW, 3, 1, &l, Some(&rx), RX, &[Vanished { from: 2, ..v }]);
        assert_eq!((c.lost_total(), c.in_flight, c.unaccounted), (1, 1, 0));
    }

    /// A ledger and a book carried to another process (charges, untagged
    /// cells, snapshot) balance a flow as the originals do.
    #[test]
    fn books_carried_elsewhere_balance_alike() {
        let mut l = Ledger::new();
        let mut rx = RxBook::default();
        let (p0, p1, p2, mut p3, p4, p5) = (pdu(0), pdu(1), pdu(2), pdu(3), pdu(4), pdu(5));
        // PDU 0 lost its last cell (ran with PDU 1), PDU 2 corrupted,
        // PDU 3's only dropped cell had a damaged tag (its place and VC
        // known from PDU 0's), PDU 4 delivered,
        // PDU 5 half-way when the books closed.
        l.dropped(Instant::from_nanos(3), at(3), "tail_drop", &p0[2]);
        for c in p0[..2].iter().chain(&p1) {
            rx.cell(c);
        }
        rx.unit_ended(None, Some("length"));
        for c in &p2 {
            rx.cell(c);
        }
        rx.unit_ended(None, Some("crc"));
        p3[0][10] ^= 1;
        l.dropped(Instant::from_nanos(9), at(3), "tail_drop", &p3[0]);
        for c in &p4 {
            rx.cell(c);
        }
        rx.unit_ended(Some(Tag { flow: FLOW, seq: 4 }), None);
        rx.cell(&p5[0]);
        let want = reconcile(FLOW, 7, 1, &l, Some(&rx), RX, &[]);
        assert_eq!(want.unaccounted, 0, "{want:?}");

        let mut l2 = Ledger::new();
        for (t, when, loss) in l.charges() {
            l2.charge(t, when, loss);
        }
        for (loss, vc, n, flow) in l.untagged_by_vc() {
            l2.add_untagged(loss, vc, n, flow);
        }
        let rx2 = RxBook::from_snapshot(rx.snapshot());
        assert_eq!(reconcile(FLOW, 7, 1, &l2, Some(&rx2), RX, &[]), want);
        assert_eq!(rx2.snapshot(), rx.snapshot());
    }

    /// A recorder records what a ledger does, cell by cell, whatever the
    /// mix: runs of untagged cells on one VC and place, cut by tagged
    /// cells, end cells, OAM cells and other places and VCs.
    #[test]
    fn a_recorder_records_what_a_ledger_does() {
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 33
        };
        let (mut l, mut r) = (Ledger::new(), Recorder::new());
        let p = pdu(1);
        for k in 0..20_000i64 {
            let mut c = p[(next() % 3) as usize];
            match next() % 8 {
                // No tag: untagged data (mostly), on one of two VCs.
                0..=4 => {
                    c[10] ^= 1;
                    c[3] &= !0x02;
                    if next() % 4 == 0 {
                        c[2] ^= 0x10;
                    }
                }
                // An OAM cell.
                5 => c[3] |= 0x08,
                _ => {}
            }
            c[4] = aurora_wire::crc::hec(&[c[0], c[1], c[2], c[3]]);
            let place = at((next() % 2) as u32);
            let why = ["tail_drop", "link_loss"][(next() % 2) as usize];
            l.dropped(Instant::from_nanos(k), place, why, &c);
            r.dropped(Instant::from_nanos(k), place, why, &c);
        }
        let r = r.finish();
        assert_eq!(r.cells(), l.cells());
        assert_eq!(r.untagged(), l.untagged());
        assert_eq!(r.ends(), l.ends());
        assert_eq!(r.by_vc, l.by_vc);
        assert_eq!(r.untagged_vc, l.untagged_vc);
        assert_eq!(r.vc_flow, l.vc_flow);
        assert_eq!(r.first, l.first);
        assert_eq!(r.overflow(), l.overflow());
        assert!(l.untagged().values().sum::<u64>() > 5_000);
    }

    #[test]
    fn damaged_bytes_are_corrupted_and_unexplained_gaps_are_unaccounted() {
        let l = Ledger::new();
        let mut rx = RxBook::default();
        for c in &pdu(0) {
            rx.cell(c);
        }
        rx.unit_ended(None, Some("crc"));
        // PDU 1 vanished without a trace; PDU 2 arrived intact.
        for c in &pdu(2) {
            rx.cell(c);
        }
        rx.unit_ended(Some(Tag { flow: FLOW, seq: 2 }), None);
        let a = reconcile(FLOW, 4, 1, &l, Some(&rx), RX, &[]);
        assert_eq!(a.corrupted, 1);
        assert_eq!(a.in_flight, 1, "PDU 3, after the last one seen");
        assert_eq!(a.unaccounted, 1, "PDU 1 has no outcome: {a:?}");
    }

    #[test]
    fn a_unit_longer_than_its_pdus_names_the_pdus_whose_tags_were_lost() {
        let l = Ledger::new();
        let mut rx = RxBook::default();
        // PDU 0 arrives intact: the book learns a PDU is three cells.
        for c in &pdu(0) {
            rx.cell(c);
        }
        rx.unit_ended(Some(Tag { flow: FLOW, seq: 0 }), None);
        let (mut p1, p2) = (pdu(1), pdu(2));
        // PDU 1's tags are damaged and its last cell is gone (uncharged).
        p1[0][10] ^= 1;
        p1[1][10] ^= 1;
        for c in p1[..2].iter().chain(&p2) {
            rx.cell(c);
        }
        rx.unit_ended(None, Some("length"));
        let a = reconcile(FLOW, 3, 1, &l, Some(&rx), RX, &[]);
        assert_eq!((a.lost_total(), a.unaccounted), (2, 0), "{a:?}");
    }

    #[test]
    fn cells_that_are_not_user_data_are_not_charged() {
        let mut l = Ledger::new();
        let mut oam = pdu(0)[0];
        oam[3] |= 0x08;
        oam[4] = aurora_wire::crc::hec(&[oam[0], oam[1], oam[2], oam[3]]);
        l.dropped(Instant::from_nanos(1), at(1), "tail_drop", &oam);
        assert!(l.is_empty());
        assert!(l.cells().is_empty());
    }
}
