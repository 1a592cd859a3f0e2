//! The receiver: cells from the member VCs in, the logical VC's units out.

use aurora_sar::{Aal5Rx, RxConfig, VcConfig};
use aurora_time::Instant;
use aurora_wire::cell::{Header, Pti};
use aurora_wire::{CellBytes, PAYLOAD_LEN};

use crate::align::Align;
use crate::config::{Config, ConfigError, SyncMode, UnitKind};
use crate::counters::{Loss, Reject, RxStats, StripeRxStats};
use crate::format::{self, Marker, CELL_SEQ_LEN, CELL_SEQ_SPACE, PDU_SEQ_SPACE};
use crate::logical::Logical;
use crate::reseq::Reseq;
use crate::tx::CellFlags;

/// A delivered unit's data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// A cell unit: `data[..len]` are its data bytes (48, or 46 with
    /// sequence numbers), `flags` the user bits of its header.
    Cell {
        /// The data bytes, from the front.
        data: [u8; PAYLOAD_LEN],
        /// How many of them count.
        len: u8,
        /// EFCI, AUU and CLP as the cell arrived.
        flags: CellFlags,
    },
    /// A PDU or IP unit: the SDU (sequence header removed).
    Sdu(Vec<u8>),
}

impl Payload {
    /// The unit's data bytes.
    pub fn data(&self) -> &[u8] {
        match self {
            Payload::Cell { data, len, .. } => &data[..usize::from(*len)],
            Payload::Sdu(v) => v,
        }
    }
}

/// One unit handed to the application, in the order the receiver restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The stripe it arrived on.
    pub stripe: usize,
    /// Its index in the sent stream, when the method tells it (sequence sync).
    pub seq: Option<u64>,
    /// When it reached the resequencer.
    pub arrived: Instant,
    /// Its data.
    pub payload: Payload,
}

/// A unit inside the receiver.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) arrived: Instant,
    pub(crate) stripe: usize,
    /// Bytes the balancer charged it.
    pub(crate) size: i64,
    pub(crate) seq: Option<u64>,
    pub(crate) payload: Payload,
}

impl Held {
    /// Bytes it takes in the buffer (48 for a cell).
    pub(crate) fn bytes(&self) -> usize {
        match &self.payload {
            Payload::Cell { .. } => PAYLOAD_LEN,
            Payload::Sdu(v) => v.len(),
        }
    }
}

/// The receiver's counters and occupancy, shared by the engines.
#[derive(Debug)]
pub(crate) struct Book {
    pub(crate) stats: RxStats,
    pub(crate) held_units: usize,
    pub(crate) held_bytes: usize,
    /// Units given up after arriving, with why, kept for the owner when it
    /// asked ([`Destriper::keep_discarded`]).
    pub(crate) given_up: Option<Vec<Discarded>>,
}

/// A unit the receiver gave up after it arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discarded {
    /// Why.
    pub why: Loss,
    /// The stripe it arrived on.
    pub stripe: usize,
    /// Its data.
    pub payload: Payload,
}

impl Book {
    /// Counts a unit that reached the resequencer.
    pub(crate) fn accept(&mut self, h: &Held) {
        self.stats.arrived += 1;
        self.stats.per_stripe[h.stripe].units += 1;
    }

    /// Counts a unit as held from `now`.
    pub(crate) fn hold(&mut self, now: Instant, h: &Held) {
        self.held_units += 1;
        self.held_bytes += h.bytes();
        self.stats.max_held_bytes = self.stats.max_held_bytes.max(self.held_bytes);
        self.stats.occupancy.set(now, self.held_units as u64);
    }

    fn release(&mut self, now: Instant, h: &Held) {
        self.held_units -= 1;
        self.held_bytes -= h.bytes();
        self.stats.occupancy.set(now, self.held_units as u64);
    }

    /// Hands a unit to the application; `held` says whether it was counted held.
    pub(crate) fn deliver(&mut self, now: Instant, h: Held, held: bool, out: &mut Vec<Delivery>) {
        if held {
            self.release(now, &h);
        }
        self.stats.delivered += 1;
        self.stats.delivered_bytes += h.payload.data().len() as u64;
        self.stats
            .delay
            .record(now.since(h.arrived).as_nanos().max(0) as u64);
        out.push(Delivery {
            stripe: h.stripe,
            seq: h.seq,
            arrived: h.arrived,
            payload: h.payload,
        });
    }

    /// Gives up on a unit that arrived.
    pub(crate) fn discard(&mut self, now: Instant, h: Held, held: bool, why: Loss) {
        if held {
            self.release(now, &h);
        }
        self.stats.discarded.add(why, 1);
        if let Some(v) = &mut self.given_up {
            v.push(Discarded {
                why,
                stripe: h.stripe,
                payload: h.payload,
            });
        }
    }

    /// Gives up on `n` units that never arrived.
    pub(crate) fn gap(&mut self, why: Loss, n: u64) {
        self.stats.gaps.add(why, n);
    }

    /// Counts an arrival that is not taken as a unit.
    pub(crate) fn reject(&mut self, why: Reject) {
        self.stats.rejected.add(why, 1);
    }
}

#[derive(Debug)]
enum Engine {
    None(Logical),
    Sequence(Reseq),
    Marker(Align),
}

/// The receiving end of a striped VC.
///
/// Cells go in one at a time with the stripe they arrived on
/// ([`Destriper::push`]); units come out in the restored order, appended to
/// `out`. [`Destriper::poll_at`] says when the receiver next needs the clock
/// (a unit waiting past the timeout, an AAL5 reassembly timer), and
/// [`Destriper::handle_timeout`] gives it.
#[derive(Debug)]
pub struct Destriper {
    cfg: Config,
    book: Book,
    engine: Engine,
    /// PDU units: each stripe's AAL5 reassembler and when its last data
    /// cell came.
    aal5: Vec<(Aal5Rx, Instant)>,
    /// PDUs each reassembler had dropped when last looked at.
    aal5_drops: Vec<u64>,
    sdus: Vec<Vec<u8>>,
}

impl Destriper {
    /// A receiver for `cfg` (checked first).
    pub fn new(cfg: Config) -> Result<Destriper, ConfigError> {
        cfg.check()?;
        let n = cfg.stripes.len();
        let limits = cfg.limits;
        let engine = match cfg.sync {
            SyncMode::None => Engine::None(Logical::new(n, cfg.effective_quantum(), limits)),
            SyncMode::Sequence => Engine::Sequence(Reseq::new(
                if cfg.unit.is_pdu() {
                    PDU_SEQ_SPACE
                } else {
                    CELL_SEQ_SPACE
                },
                limits,
            )),
            SyncMode::Marker => Engine::Marker(Align::new(
                n,
                cfg.unit,
                cfg.effective_quantum(),
                largest_unit(&cfg),
                limits,
            )),
        };
        let mut aal5 = Vec::new();
        if cfg.unit.is_pdu() {
            for vc in &cfg.stripes {
                let mut rx = Aal5Rx::new(RxConfig {
                    format: cfg.format,
                    max_vcs: 1,
                    memory_budget: limits.reassembly_budget,
                    pool_buffers: 4,
                    initial_buffer: 2048.min(limits.reassembly_budget),
                    ..RxConfig::default()
                });
                rx.open_vc(
                    *vc,
                    VcConfig {
                        max_sdu: cfg.carried_max_sdu(),
                        timeout: limits.reassembly_timeout,
                        deliver_corrupted: false,
                        max_posted: 0,
                    },
                )
                .expect("a fresh reassembler has room for one VC");
                aal5.push((rx, Instant::ZERO));
            }
        }
        let mut stats = RxStats {
            unit: cfg.unit,
            sync: cfg.sync,
            per_stripe: vec![StripeRxStats::default(); n],
            ..RxStats::default()
        };
        if cfg.sync != SyncMode::Sequence {
            stats.arrival_order = crate::metrics::Reordering::new(1, 0);
        }
        Ok(Destriper {
            cfg,
            book: Book {
                stats,
                held_units: 0,
                held_bytes: 0,
                given_up: None,
            },
            engine,
            aal5_drops: vec![0; aal5.len()],
            aal5,
            sdus: Vec::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The counters and measurements.
    pub fn stats(&self) -> &RxStats {
        &self.book.stats
    }

    /// Keeps the units given up after they arrived (or stops, and forgets
    /// those kept), for [`Destriper::take_discarded`]: a relay hands their
    /// cells to the network's books. Take them after every call, since
    /// they are kept until taken.
    pub fn keep_discarded(&mut self, on: bool) {
        self.book.given_up = on.then(Vec::new);
    }

    /// The units given up since the last call (when kept), oldest first.
    pub fn take_discarded(&mut self) -> Vec<Discarded> {
        self.book
            .given_up
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Units held in the resequencer now.
    pub fn held(&self) -> usize {
        self.book.held_units
    }

    /// Bytes of unit data held in the resequencer now.
    pub fn held_bytes(&self) -> usize {
        self.book.held_bytes
    }

    /// Bytes held in partial AAL5 reassemblies now (PDU and IP units).
    pub fn reassembly_bytes(&self) -> usize {
        self.aal5.iter().map(|(rx, _)| rx.memory_in_use()).sum()
    }

    /// Takes one cell that arrived on `stripe` at `now`; appends what can
    /// now be delivered to `out`.
    pub fn push(&mut self, now: Instant, stripe: usize, cell: &CellBytes, out: &mut Vec<Delivery>) {
        let Some(per) = self.book.stats.per_stripe.get_mut(stripe) else {
            self.book.reject(Reject::BadCell);
            return;
        };
        per.cells += 1;
        let h4 = [cell[0], cell[1], cell[2], cell[3]];
        if aurora_wire::crc::hec(&h4) != cell[4] {
            self.book.reject(Reject::BadCell);
            return;
        }
        let header = Header::parse(&h4, self.cfg.format);
        if header.vc() != self.cfg.stripes[stripe] {
            self.book.reject(Reject::BadCell);
            return;
        }
        match header.pti {
            Pti::User { .. } => self.data_cell(now, stripe, cell, out),
            Pti::OamEndToEnd if Marker::is_marker_cell(cell) => {
                self.marker_cell(now, stripe, cell, out)
            }
            _ => self.book.reject(Reject::NotData),
        }
    }

    fn marker_cell(
        &mut self,
        now: Instant,
        stripe: usize,
        cell: &CellBytes,
        out: &mut Vec<Delivery>,
    ) {
        if !matches!(self.engine, Engine::Marker(_)) {
            self.book.reject(Reject::NotData);
            return;
        }
        let m = match Marker::parse(format::payload_of(cell)) {
            Ok(m) => m,
            Err(_) => {
                self.book.reject(Reject::BadMarker);
                return;
            }
        };
        if let Some((rx, _)) = self.aal5.get_mut(stripe) {
            // Markers go between PDUs: a PDU still open here lost its end.
            rx.flush_vc(self.cfg.stripes[stripe])
                .expect("the stripe's VC is open");
        }
        self.count_reassembly_drops();
        if let Engine::Marker(align) = &mut self.engine {
            align.marker(&mut self.book, now, stripe, &m, out);
        }
    }

    fn data_cell(
        &mut self,
        now: Instant,
        stripe: usize,
        cell: &CellBytes,
        out: &mut Vec<Delivery>,
    ) {
        if self.cfg.unit == UnitKind::Cell {
            let payload = format::payload_of(cell);
            let flags = CellFlags::of(cell).expect("a user cell");
            let mut data = [0u8; PAYLOAD_LEN];
            let (field, len) = if self.cfg.sync == SyncMode::Sequence {
                data[..PAYLOAD_LEN - CELL_SEQ_LEN].copy_from_slice(&payload[CELL_SEQ_LEN..]);
                (
                    Some(u64::from(format::cell_seq(payload))),
                    PAYLOAD_LEN - CELL_SEQ_LEN,
                )
            } else {
                data.copy_from_slice(payload);
                (None, PAYLOAD_LEN)
            };
            let h = Held {
                arrived: now,
                stripe,
                size: PAYLOAD_LEN as i64,
                seq: None,
                payload: Payload::Cell {
                    data,
                    len: len as u8,
                    flags,
                },
            };
            self.unit(now, h, field, out);
            return;
        }
        let (rx, last) = &mut self.aal5[stripe];
        if now.since(*last) > self.cfg.limits.reassembly_timeout {
            // A stripe quiet for longer than a reassembly may take starts
            // afresh: AAL5 may still be skipping to the end of a PDU whose
            // last cell was lost, which would eat this one.
            rx.flush_vc(self.cfg.stripes[stripe])
                .expect("the stripe's VC is open");
        }
        *last = now;
        let sdus = &mut self.sdus;
        rx.push(now, core::slice::from_ref(cell), &mut |d| {
            sdus.push(d.into_sdu());
        });
        self.count_reassembly_drops();
        let mut sdus = core::mem::take(&mut self.sdus);
        for mut sdu in sdus.drain(..) {
            let size = (aurora_wire::aal5::cells_for(sdu.len()) * PAYLOAD_LEN) as i64;
            let field = if self.cfg.sync == SyncMode::Sequence {
                let Some((seq, _)) = format::split_pdu_seq(&sdu) else {
                    self.book.reject(Reject::Reassembly);
                    continue;
                };
                sdu.drain(..format::PDU_SEQ_LEN);
                Some(u64::from(seq))
            } else {
                None
            };
            let h = Held {
                arrived: now,
                stripe,
                size,
                seq: None,
                payload: Payload::Sdu(sdu),
            };
            self.unit(now, h, field, out);
        }
        self.sdus = sdus;
    }

    /// Moves the AAL5 reassemblers' new PDU drops into the reject count.
    fn count_reassembly_drops(&mut self) {
        for ((rx, _), seen) in self.aal5.iter_mut().zip(&mut self.aal5_drops) {
            let now = rx.stats().pdus_dropped.total();
            if now > *seen {
                self.book
                    .stats
                    .rejected
                    .add(Reject::Reassembly, now - *seen);
                *seen = now;
            }
        }
    }

    fn unit(&mut self, now: Instant, h: Held, field: Option<u64>, out: &mut Vec<Delivery>) {
        match &mut self.engine {
            Engine::None(e) => e.arrive(&mut self.book, now, h, out),
            Engine::Sequence(e) => e.arrive(
                &mut self.book,
                now,
                field.expect("sequence sync reads a field"),
                h,
                out,
            ),
            Engine::Marker(e) => e.arrive(&mut self.book, now, h, out),
        }
    }

    /// Takes a batch of cells that arrived on `stripe` at `now`, in order.
    pub fn push_batch(
        &mut self,
        now: Instant,
        stripe: usize,
        cells: &[CellBytes],
        out: &mut Vec<Delivery>,
    ) {
        for cell in cells {
            self.push(now, stripe, cell, out);
        }
    }

    /// When the receiver next needs [`Destriper::handle_timeout`].
    pub fn poll_at(&self) -> Option<Instant> {
        let engine = match &self.engine {
            Engine::None(e) => e.poll_at(),
            Engine::Sequence(e) => e.poll_at(),
            Engine::Marker(e) => e.poll_at(),
        };
        self.aal5
            .iter()
            .filter_map(|(rx, _)| rx.poll_at())
            .chain(engine)
            .min()
    }

    /// Runs the timers due by `now`: gives up on what waited too long and
    /// delivers what that frees.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut Vec<Delivery>) {
        for (rx, _) in &mut self.aal5 {
            rx.handle_timeout(now);
        }
        self.count_reassembly_drops();
        match &mut self.engine {
            Engine::None(e) => e.on_timeout(&mut self.book, now, out),
            Engine::Sequence(e) => e.on_timeout(&mut self.book, now, out),
            Engine::Marker(e) => e.on_timeout(&mut self.book, now, out),
        }
    }
}

/// Bytes the balancer charges the largest unit.
fn largest_unit(cfg: &Config) -> i64 {
    match cfg.unit {
        UnitKind::Cell => PAYLOAD_LEN as i64,
        _ => (aurora_wire::aal5::cells_for(cfg.carried_max_sdu()) * PAYLOAD_LEN) as i64,
    }
}
