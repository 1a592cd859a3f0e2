//! Buffer admission at an output port for AAL5 traffic: selective discard
//! of CLP=1 cells, early packet discard (EPD) and partial packet discard
//! (PPD).
//!
//! A port asks [`PduDiscard::admit`] about each arriving cell, giving the
//! cell's VC (an index the port assigns, 0 to `vcs − 1`), its CLP bit,
//! whether it ends an AAL5 PDU (PTI's AUU bit) and how many cells wait in
//! the port's buffer now. The answer is [`Admission::Admit`] or
//! [`Admission::Drop`] with a [`DropReason`]; the port then queues or
//! frees the cell. Three limits, in cells ([`BufferLimits`]), each
//! meaning "refuse when `occupancy ≥ limit`":
//!
//! * `size`: the buffer is full; any cell is refused (**tail drop**).
//! * `epd`: **early packet discard**: a cell that would start a new PDU
//!   (the VC's first cell, or the first after an end-of-PDU cell) is
//!   refused, and so is the rest of that PDU, its last cell included: the
//!   whole PDU is lost, and no buffer is spent on a PDU that could not be
//!   delivered whole.
//! * `clp1`: **selective discard**: a CLP=1 cell is refused.
//!
//! **Partial packet discard**: once a cell of a PDU is refused for any
//! reason but EPD (tail drop or selective discard), the rest of that PDU
//! is refused too, except its last cell, which is admitted if the buffer
//! has room (`occupancy < size`) whatever the other thresholds say, so the
//! receiver can tell where the PDU ends and the next begins. For the same
//! reason the last cell of a PDU whose cells so far were all admitted is
//! exempt from selective discard (only a full buffer refuses it).
//!
//! So the cells of a PDU a port admits are all of them, or a first part
//! of them and the last (a first part alone if the buffer was full when
//! the last came), or none; never a PDU with a hole in it.
//!
//! The per-VC state is two bits (at a PDU boundary, inside an admitted
//! PDU, discarding a PDU by EPD, discarding by PPD), four VCs to a byte;
//! memory is fixed when the table is made. Cells that are not user data
//! (OAM, RM: PTI 4 to 7) belong to no PDU; [`PduDiscard::admit_cell`]
//! refuses them only for a full buffer or selective discard, and leaves
//! their VC's state alone.

use aurora_wire::cell::Pti;
use aurora_wire::CellBytes;

/// The limits of a port's buffer, in cells. Each means "refuse when the
/// cells waiting are at least this many" (see the [module](self)
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferLimits {
    /// The buffer's size: every cell is refused when it holds this many.
    pub size: usize,
    /// From this many waiting cells on, new PDUs are refused whole.
    pub epd: usize,
    /// From this many waiting cells on, CLP=1 cells are refused.
    pub clp1: usize,
}

/// Why a cell was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The buffer was full.
    TailDrop,
    /// Early packet discard: the cell starts a PDU, or belongs to one that
    /// started, above the EPD threshold.
    Epd,
    /// Partial packet discard: an earlier cell of the cell's PDU was
    /// refused.
    Ppd,
    /// Selective discard: a CLP=1 cell above the CLP=1 threshold.
    Clp1Discard,
    /// The VC index is outside the table.
    NoSuchVc,
}

impl DropReason {
    /// The reason's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::TailDrop => "tail_drop",
            DropReason::Epd => "epd",
            DropReason::Ppd => "ppd",
            DropReason::Clp1Discard => "clp1_discard",
            DropReason::NoSuchVc => "no_such_vc",
        }
    }
}

/// The answer for one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Admission {
    /// Queue it.
    Admit,
    /// Free it, for this reason.
    Drop(DropReason),
}

/// Cells a [`PduDiscard`] answered for, by answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DiscardCounters {
    /// Admitted.
    pub admitted: u64,
    /// Refused for a full buffer.
    pub tail_drop: u64,
    /// Refused by early packet discard.
    pub epd: u64,
    /// Refused by partial packet discard.
    pub ppd: u64,
    /// Refused by selective discard of CLP=1 cells.
    pub clp1_discard: u64,
    /// Refused for a VC outside the table.
    pub no_such_vc: u64,
}

/// At a PDU boundary: the next cell starts a PDU.
const START: u8 = 0;
/// Inside a PDU whose cells have all been admitted.
const MID: u8 = 1;
/// Inside a PDU refused whole by EPD.
const EPD: u8 = 2;
/// Inside a PDU being partially discarded: all but its last cell go.
const PPD: u8 = 3;

/// EPD/PPD and selective discard for one output port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PduDiscard {
    limits: BufferLimits,
    vcs: usize,
    /// Two bits per VC, VC `i` in byte `i / 4` at bit `2 · (i % 4)`.
    state: Vec<u8>,
    counters: DiscardCounters,
}

impl PduDiscard {
    /// A port with `limits` and VCs numbered 0 to `vcs − 1`, each at a PDU
    /// boundary.
    pub fn new(limits: BufferLimits, vcs: usize) -> Self {
        PduDiscard {
            limits,
            vcs,
            state: vec![0; vcs.div_ceil(4)],
            counters: DiscardCounters::default(),
        }
    }

    /// Decides whether a cell of VC `vc` with cell loss priority `clp`,
    /// ending a PDU if `end_of_pdu`, may join the `occupancy` cells waiting
    /// in the port's buffer; counts the answer and moves the VC's state on.
    #[inline]
    pub fn admit(&mut self, vc: usize, clp: bool, end_of_pdu: bool, occupancy: usize) -> Admission {
        let byte = match self.state.get_mut(vc >> 2) {
            Some(b) if vc < self.vcs => b,
            _ => {
                self.counters.no_such_vc += 1;
                return Admission::Drop(DropReason::NoSuchVc);
            }
        };
        let shift = (vc & 3) * 2;
        let state = (*byte >> shift) & 3;
        let l = &self.limits;
        let full = occupancy >= l.size;
        let (answer, next) = match state {
            EPD => (Err(DropReason::Epd), EPD),
            PPD => {
                if !end_of_pdu {
                    (Err(DropReason::Ppd), PPD)
                } else if full {
                    (Err(DropReason::TailDrop), START)
                } else {
                    (Ok(()), START)
                }
            }
            _ => {
                let starting = state == START;
                // The last cell of a PDU admitted so far is spared
                // selective discard, as PPD spares it.
                let selective = clp & (occupancy >= l.clp1) & (starting | !end_of_pdu);
                if full {
                    (Err(DropReason::TailDrop), PPD)
                } else if starting & (occupancy >= l.epd) {
                    (Err(DropReason::Epd), EPD)
                } else if selective {
                    (Err(DropReason::Clp1Discard), PPD)
                } else {
                    (Ok(()), MID)
                }
            }
        };
        let next = if end_of_pdu { START } else { next };
        *byte = (*byte & !(3 << shift)) | (next << shift);
        match answer {
            Ok(()) => {
                self.counters.admitted += 1;
                Admission::Admit
            }
            Err(reason) => {
                self.count(reason);
                Admission::Drop(reason)
            }
        }
    }

    fn count(&mut self, reason: DropReason) {
        let c = &mut self.counters;
        *match reason {
            DropReason::TailDrop => &mut c.tail_drop,
            DropReason::Epd => &mut c.epd,
            DropReason::Ppd => &mut c.ppd,
            DropReason::Clp1Discard => &mut c.clp1_discard,
            DropReason::NoSuchVc => &mut c.no_such_vc,
        } += 1;
    }

    /// [`PduDiscard::admit`] for a whole cell, reading CLP and the PTI from
    /// its header. A cell that is not user data (OAM, RM) belongs to no
    /// PDU: it is refused only for a full buffer or, if CLP=1, by selective
    /// discard, and its VC's state does not change.
    pub fn admit_cell(&mut self, vc: usize, cell: &CellBytes, occupancy: usize) -> Admission {
        let clp = cell[3] & 1 != 0;
        let pti = Pti::from_bits(cell[3] >> 1);
        if pti.is_user() {
            return self.admit(vc, clp, pti.is_end_of_pdu(), occupancy);
        }
        let answer = if vc >= self.vcs {
            Err(DropReason::NoSuchVc)
        } else if occupancy >= self.limits.size {
            Err(DropReason::TailDrop)
        } else if clp && occupancy >= self.limits.clp1 {
            Err(DropReason::Clp1Discard)
        } else {
            Ok(())
        };
        match answer {
            Ok(()) => {
                self.counters.admitted += 1;
                Admission::Admit
            }
            Err(reason) => {
                self.count(reason);
                Admission::Drop(reason)
            }
        }
    }

    /// Puts VC `vc` back at a PDU boundary (when it is set up again).
    pub fn reset_vc(&mut self, vc: usize) {
        if vc < self.vcs {
            if let Some(b) = self.state.get_mut(vc >> 2) {
                *b &= !(3 << ((vc & 3) * 2));
            }
        }
    }

    /// Makes the table `vcs` VCs long; VCs added start at a PDU boundary,
    /// VCs removed are forgotten.
    pub fn set_vcs(&mut self, vcs: usize) {
        for vc in vcs..self.vcs.min(vcs.next_multiple_of(4)) {
            self.reset_vc(vc);
        }
        self.state.resize(vcs.div_ceil(4), 0);
        self.vcs = vcs;
    }

    /// The number of VCs in the table.
    pub fn vcs(&self) -> usize {
        self.vcs
    }

    /// The limits.
    pub fn limits(&self) -> BufferLimits {
        self.limits
    }

    /// Changes the limits; PDUs under way keep their state.
    pub fn set_limits(&mut self, limits: BufferLimits) {
        self.limits = limits;
    }

    /// The counts so far.
    pub fn counters(&self) -> DiscardCounters {
        self.counters
    }

    /// True if VC `vc` is at a PDU boundary (its next cell starts a PDU).
    pub fn at_boundary(&self, vc: usize) -> bool {
        vc < self.vcs
            && self
                .state
                .get(vc >> 2)
                .is_some_and(|b| (b >> ((vc & 3) * 2)) & 3 == START)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_wire::cell::{build_cell, Header, VcId};

    const LIMITS: BufferLimits = BufferLimits {
        size: 10,
        epd: 6,
        clp1: 4,
    };

    /// Feeds `(vc, clp, end, occupancy)` cells and returns the indices
    /// dropped, with their reasons.
    fn run(p: &mut PduDiscard, cells: &[(usize, bool, bool, usize)]) -> Vec<(usize, &'static str)> {
        cells
            .iter()
            .enumerate()
            .filter_map(
                |(i, &(vc, clp, end, occ))| match p.admit(vc, clp, end, occ) {
                    Admission::Admit => None,
                    Admission::Drop(r) => Some((i, r.name())),
                },
            )
            .collect()
    }

    #[test]
    fn epd_refuses_a_whole_pdu_that_starts_above_the_threshold() {
        let mut p = PduDiscard::new(LIMITS, 2);
        let cells = [
            // VC 0 starts a PDU at 5 waiting: admitted, then it may grow
            // past the EPD threshold; its cells keep coming.
            (0, false, false, 5), // 0
            (0, false, false, 7), // 1
            (0, false, true, 8),  // 2: end
            // VC 1 starts at 6: refused whole, the end included, even
            // though the buffer drains meanwhile.
            (1, false, false, 6), // 3 epd
            (1, false, false, 2), // 4 epd
            (1, false, true, 0),  // 5 epd
            // The next PDU on VC 1 starts below the threshold: admitted.
            (1, false, false, 5), // 6
            (1, false, true, 9),  // 7
            // A one-cell PDU at the threshold is refused.
            (0, false, true, 6), // 8 epd
        ];
        assert_eq!(
            run(&mut p, &cells),
            [(3, "epd"), (4, "epd"), (5, "epd"), (8, "epd")]
        );
        let c = p.counters();
        assert_eq!((c.admitted, c.epd, c.ppd, c.tail_drop), (5, 4, 0, 0));
    }

    #[test]
    fn ppd_after_a_tail_drop_keeps_the_last_cell_if_there_is_room() {
        let mut p = PduDiscard::new(LIMITS, 2);
        let cells = [
            (0, false, false, 3),  // 0 admitted
            (0, false, false, 9),  // 1 admitted
            (0, false, false, 10), // 2 tail drop: the buffer is full
            (0, false, false, 4),  // 3 ppd, though there is room now
            (1, false, false, 4),  // 4 another VC is not affected
            (0, false, false, 4),  // 5 ppd
            (0, false, true, 9),   // 6 the last cell: room, admitted
            (0, false, false, 2),  // 7 the next PDU starts afresh
            (0, false, true, 2),   // 8
            // A PDU whose last cell finds the buffer full loses it too.
            (0, false, false, 1),  // 9
            (0, false, false, 10), // 10 tail drop
            (0, false, true, 10),  // 11 tail drop (no room for the end)
            (0, false, true, 0),   // 12 a one-cell PDU, admitted
        ];
        assert_eq!(
            run(&mut p, &cells),
            [
                (2, "tail_drop"),
                (3, "ppd"),
                (5, "ppd"),
                (10, "tail_drop"),
                (11, "tail_drop")
            ]
        );
        let c = p.counters();
        assert_eq!((c.admitted, c.ppd, c.tail_drop), (8, 2, 3));
        // A first cell refused for a full buffer: the rest go by PPD, the
        // last is kept so the receiver can delimit.
        let cells = [
            (1, false, false, 10), // 0 tail drop (VC 1 was mid-PDU: cell 4 above)
            (1, false, true, 0),   // 1 kept
            (1, false, false, 10), // 2 tail drop, a PDU's first cell
            (1, false, false, 0),  // 3 ppd
            (1, false, true, 0),   // 4 kept
        ];
        assert_eq!(
            run(&mut p, &cells),
            [(0, "tail_drop"), (2, "tail_drop"), (3, "ppd")]
        );
    }

    #[test]
    fn selective_discard_of_clp1_cells_then_ppd() {
        let mut p = PduDiscard::new(LIMITS, 1);
        let cells = [
            (0, true, false, 3),  // 0 below the CLP=1 threshold
            (0, true, false, 4),  // 1 clp1 discard
            (0, false, false, 0), // 2 ppd: a CLP=0 cell of a cut PDU
            (0, true, true, 5),   // 3 last cell: kept (room)
            (0, false, false, 5), // 4 CLP=0 cells are not affected
            (0, true, true, 5),   // 5 last cell of an intact PDU: spared
            (0, true, true, 5),   // 6 a one-cell CLP=1 PDU: discarded
            (0, true, false, 5),  // 7 a CLP=1 first cell: discarded
            (0, true, true, 9),   // 8 its last cell: kept
        ];
        assert_eq!(
            run(&mut p, &cells),
            [
                (1, "clp1_discard"),
                (2, "ppd"),
                (6, "clp1_discard"),
                (7, "clp1_discard")
            ]
        );
    }

    #[test]
    fn vcs_outside_the_table_and_resizing() {
        let mut p = PduDiscard::new(LIMITS, 5);
        assert_eq!(
            p.admit(5, false, false, 0),
            Admission::Drop(DropReason::NoSuchVc)
        );
        assert_eq!(
            p.admit(usize::MAX, false, false, 0),
            Admission::Drop(DropReason::NoSuchVc)
        );
        assert_eq!(p.admit(4, false, false, 0), Admission::Admit);
        assert!(!p.at_boundary(4));
        p.set_vcs(4);
        p.set_vcs(6);
        // VC 4 was forgotten: it starts at a boundary (EPD applies).
        assert!(p.at_boundary(4));
        assert_eq!(
            p.admit(4, false, false, 7),
            Admission::Drop(DropReason::Epd)
        );
        p.reset_vc(4);
        assert!(p.at_boundary(4));
        assert_eq!(p.counters().no_such_vc, 2);
        let mut p = PduDiscard::new(LIMITS, 0);
        assert_eq!(
            p.admit(0, false, true, 0),
            Admission::Drop(DropReason::NoSuchVc)
        );
    }

    #[test]
    fn whole_cells_and_oam() {
        let mut p = PduDiscard::new(LIMITS, 1);
        let mut h = Header::data(VcId::new(0, 40));
        let first = build_cell(&h, &[0; 48]).unwrap();
        h.pti = Pti::DATA_END;
        let last = build_cell(&h, &[0; 48]).unwrap();
        h.pti = Pti::OamEndToEnd;
        let oam = build_cell(&h, &[0; 48]).unwrap();
        assert_eq!(p.admit_cell(0, &first, 0), Admission::Admit);
        // OAM in the middle of a PDU neither ends it nor is refused by EPD.
        assert_eq!(p.admit_cell(0, &oam, 8), Admission::Admit);
        assert!(!p.at_boundary(0));
        assert_eq!(
            p.admit_cell(0, &oam, 10),
            Admission::Drop(DropReason::TailDrop)
        );
        assert_eq!(p.admit_cell(0, &last, 8), Admission::Admit);
        assert!(p.at_boundary(0));
        assert_eq!(p.admit_cell(0, &first, 8), Admission::Drop(DropReason::Epd));
        assert_eq!(
            p.admit_cell(1, &oam, 0),
            Admission::Drop(DropReason::NoSuchVc)
        );
    }
}
