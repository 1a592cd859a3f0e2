//! A cell output port under a scheduling discipline ([`aurora_sched`]):
//! cells are sorted into queues by their VC, the discipline decides which
//! goes next and which is refused, and the port measures, per queue, the
//! cells served, the cells dropped by reason, how long cells waited and how
//! many left in each slice of time (for plots of service against time).
//!
//! With PDU discard ([`aurora_tm::discard`]) the port first asks whether
//! a cell may enter at all: partial packet discard (once a cell of an AAL5
//! PDU is refused, the rest of it is, but its last cell), early packet
//! discard (above a threshold, a new PDU is refused whole) and selective
//! discard of CLP=1 cells. The thresholds are the port's, and a queue is
//! held to the same fractions of its own limit: the occupancy the discard
//! sees is the port's or, if larger, the cell's queue's scaled up to the
//! port's size (so a queue at its limit is a full buffer, and what a queue
//! refuses starts a partial discard too).

use aurora_sched::{Discipline, QueueId};
use aurora_time::{Duration, Instant};
use aurora_tm::discard::{Admission, BufferLimits, PduDiscard};
use aurora_wire::CellBytes;
use rustc_hash::FxHashMap;

use crate::carry::{Carries, WRONG_KIND};
use crate::lateness::Histogram;
use crate::port::Port;

/// Why a port refused a cell of a VC it has no queue for.
pub const NO_CLASS: &str = "no_class";

/// The key a cell is classified by: the first four header bytes without
/// the payload type and CLP bits (so VPI and VCI in either header format).
pub fn vc_key(header: &[u8]) -> u32 {
    let b = [header[0], header[1], header[2], header[3]];
    u32::from_be_bytes(b) >> 4
}

/// Cells a queue sent in each slice of time, and how long it held cells
/// in each, in slices of `bin` from time 0. Bounded: when the slices would
/// pass [`Series::MAX_BINS`], pairs of slices merge and `bin` doubles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    /// Length of a slice.
    pub bin: Duration,
    /// Cells sent per slice.
    pub counts: Vec<u64>,
    /// Nanoseconds of each slice the queue held cells (a spell still
    /// going on counts once it ends).
    pub busy: Vec<u64>,
}

impl Series {
    /// The most slices kept.
    pub const MAX_BINS: usize = 4096;

    fn new(bin: Duration) -> Self {
        Series {
            bin: Duration::from_nanos(bin.as_nanos().max(1)),
            counts: Vec::new(),
            busy: Vec::new(),
        }
    }

    /// The slice `at` falls in, coarsening the slices until it fits, and
    /// both vectors long enough to hold it.
    fn slice(&mut self, at: Instant) -> usize {
        let mut i = (at.as_nanos().max(0) / self.bin.as_nanos()) as usize;
        while i >= Self::MAX_BINS {
            let merge = |v: &[u64]| -> Vec<u64> { v.chunks(2).map(|p| p.iter().sum()).collect() };
            self.counts = merge(&self.counts);
            self.busy = merge(&self.busy);
            self.bin = Duration::from_nanos(self.bin.as_nanos().saturating_mul(2));
            i = (at.as_nanos().max(0) / self.bin.as_nanos()) as usize;
        }
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
            self.busy.resize(i + 1, 0);
        }
        i
    }

    fn count(&mut self, at: Instant) {
        let i = self.slice(at);
        self.counts[i] += 1;
    }

    /// The queue held cells from `from` to `to`.
    fn held(&mut self, from: Instant, to: Instant) {
        let last = self.slice(to);
        let bin = self.bin.as_nanos();
        let mut t = from.as_nanos().max(0);
        let end = to.as_nanos().max(t);
        while t < end {
            let i = ((t / bin) as usize).min(last);
            let stop = ((i as i64 + 1) * bin).min(end);
            self.busy[i] += (stop - t) as u64;
            t = stop;
        }
    }
}

/// What one queue of a port did.
#[derive(Clone, Debug)]
pub struct QueueStats {
    /// Cells sent.
    pub served: u64,
    /// Cells refused, by reason.
    pub dropped: Vec<(&'static str, u64)>,
    /// How long sent cells waited in the port, ns.
    pub delay: Histogram,
    /// Cells sent per slice of time.
    pub series: Series,
    /// Since when the queue has held cells, if it does.
    busy_since: Option<Instant>,
}

impl QueueStats {
    fn new(bin: Duration) -> Self {
        QueueStats {
            served: 0,
            dropped: Vec::new(),
            delay: Histogram::default(),
            series: Series::new(bin),
            busy_since: None,
        }
    }

    fn drop_for(&mut self, reason: &'static str) {
        match self.dropped.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.dropped.push((reason, 1)),
        }
    }

    /// Cells refused for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }
}

/// A cell port whose queues and order are a [`Discipline`]'s.
pub struct CellPort {
    discipline: Box<dyn Discipline<(Instant, CellBytes)>>,
    /// VC key ([`vc_key`]) to its queue and its number among the port's
    /// VCs.
    vcs: FxHashMap<u32, (QueueId, usize)>,
    /// The queue of cells of any other VC, if the port has one (else they
    /// are dropped as `no_class`).
    other: Option<QueueId>,
    /// Cells one queue holds.
    queue_limit: usize,
    discard: Option<PduDiscard>,
    stats: Vec<QueueStats>,
}

impl CellPort {
    /// A port under `discipline`, which has `queues` queues of at most
    /// `queue_limit` cells: cells whose [`vc_key`] `vcs` names go to that
    /// queue (the VCs numbered 0 to `vcs.len() - 1`), all others to
    /// `other` (or, if `None`, dropped as `no_class`); with `discard`, PDU discard at those limits (its `size`
    /// the discipline's port limit). Cells served are counted in slices
    /// of `bin`.
    pub fn new(
        discipline: Box<dyn Discipline<(Instant, CellBytes)>>,
        queues: usize,
        queue_limit: usize,
        vcs: FxHashMap<u32, (QueueId, usize)>,
        other: Option<QueueId>,
        discard: Option<BufferLimits>,
        bin: Duration,
    ) -> Self {
        let n = vcs.len();
        CellPort {
            discipline,
            vcs,
            other,
            queue_limit,
            discard: discard.map(|l| PduDiscard::new(l, n)),
            stats: (0..queues).map(|_| QueueStats::new(bin)).collect(),
        }
    }

    /// Cells waiting (not counting one on the line), whatever frame type
    /// the engine around the port carries.
    pub fn len(&self) -> usize {
        self.discipline.len()
    }

    /// No cell waits.
    pub fn is_empty(&self) -> bool {
        self.discipline.is_empty()
    }

    /// Per queue, what it did.
    pub fn stats(&self) -> &[QueueStats] {
        &self.stats
    }

    fn count_drop(&mut self, q: QueueId, why: &'static str) {
        if let Some(s) = self.stats.get_mut(q as usize) {
            s.drop_for(why);
        }
    }
}

/// A cell port on an engine of any frame type that carries cells: an
/// engine of cells, or one of units beside an ATOMIC part. A frame that is
/// not a cell is refused as [`WRONG_KIND`] (no queue counts it; the link
/// counts it as a drop at the port under that reason).
impl<F: Carries<CellBytes> + Send + 'static> Port<F> for CellPort {
    fn enqueue(
        &mut self,
        frame: F,
        now: Instant,
        _on_line: usize,
    ) -> Result<(), (F, &'static str)> {
        let Some(&cell) = frame.peek() else {
            return Err((frame, WRONG_KIND));
        };
        let (q, vc) = match (self.vcs.get(&vc_key(&cell[..4])), self.other) {
            (Some(&(q, vc)), _) => (q, Some(vc)),
            (None, Some(q)) => (q, None),
            (None, None) => return Err((frame, NO_CLASS)),
        };
        if let (Some(d), Some(vc)) = (self.discard.as_mut(), vc) {
            let size = d.limits().size;
            let queue = self.discipline.queue_len(q);
            let scaled = if queue >= self.queue_limit {
                usize::MAX
            } else {
                queue.saturating_mul(size) / self.queue_limit.max(1)
            };
            let occupancy = self.discipline.len().max(scaled);
            if let Admission::Drop(why) = d.admit_cell(vc, &cell, occupancy) {
                self.count_drop(q, why.name());
                return Err((frame, why.name()));
            }
        }
        match self.discipline.enqueue(q, (now, cell), 1, now) {
            Ok(()) => {
                if let Some(s) = self.stats.get_mut(q as usize) {
                    s.busy_since.get_or_insert(now);
                }
                Ok(())
            }
            Err(d) => {
                self.count_drop(q, d.reason.name());
                Err((frame, d.reason.name()))
            }
        }
    }

    fn dequeue(&mut self, now: Instant) -> Option<F> {
        let (q, (since, cell)) = self.discipline.dequeue(now)?;
        if let Some(s) = self.stats.get_mut(q as usize) {
            s.served += 1;
            s.delay
                .record(now.since(since).as_nanos().max(0).unsigned_abs());
            s.series.count(now);
            if self.discipline.queue_len(q) == 0 {
                if let Some(since) = s.busy_since.take() {
                    s.series.held(since, now);
                }
            }
        }
        Some(F::wrap(cell))
    }

    fn len(&self) -> usize {
        self.discipline.len()
    }

    fn for_each(&self, f: &mut dyn FnMut(&F)) {
        self.discipline
            .for_each(&mut |(_, cell)| f(&F::wrap(*cell)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carry::Unit;

    /// On an engine of units, a cell port queues cells and hands them back
    /// as cells; a frame is refused by name and counted by no queue.
    #[test]
    fn a_cell_port_on_units_takes_cells_and_refuses_frames() {
        let limits = aurora_sched::Limits { port: 4, queue: 4 };
        let mut p = CellPort::new(
            Box::new(aurora_sched::Fifo::new(1, limits)),
            1,
            4,
            FxHashMap::default(),
            Some(0),
            None,
            Duration::from_millis(1),
        );
        let t = Instant::ZERO;
        let cell: CellBytes = std::array::from_fn(|i| i as u8);
        let frame = Unit::Frame(vec![7; 60]);
        assert_eq!(
            Port::<Unit>::enqueue(&mut p, frame.clone(), t, 0),
            Err((frame, WRONG_KIND))
        );
        assert!(Port::<Unit>::enqueue(&mut p, Unit::Cell(cell), t, 0).is_ok());
        let mut seen = Vec::new();
        Port::<Unit>::for_each(&p, &mut |u| seen.push(u.clone()));
        assert_eq!(seen, [Unit::Cell(cell)]);
        assert_eq!(Port::<Unit>::dequeue(&mut p, t), Some(Unit::Cell(cell)));
        assert_eq!(Port::<Unit>::dequeue(&mut p, t), None);
        assert_eq!(p.stats()[0].served, 1);
        assert_eq!(p.stats()[0].dropped_total(), 0);
    }
}
