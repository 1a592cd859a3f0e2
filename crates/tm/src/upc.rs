//! Usage parameter control: policing a VC's cells against its contract at
//! a switch input.
//!
//! Each VC has a [`Upc`]: its [`Contract`]'s GCRAs, a conformance
//! [`Definition`] (which cells each test applies to) and an [`Action`]
//! for non-conforming cells. [`Upc::police`] answers, per cell, [`Verdict::Pass`],
//! [`Verdict::Tag`] (forward with CLP = 1) or [`Verdict::Drop`].
//!
//! The definitions, after the ATM Forum's TM 4.0 (I.371's are alike):
//!
//! | contract | [`Definition::Clp01`] | [`Definition::Clp0`] |
//! |---|---|---|
//! | peak (CBR, UBR with PCR) | CBR.1 / UBR.1: GCRA(1/PCR, CDVT) on all cells | the same (there is no CLP=0 test) |
//! | sustained (VBR) | VBR.1: both GCRAs on all cells | VBR.2 ([`Action::Drop`]) / VBR.3 ([`Action::Tag`]): PCR on all cells, SCR on CLP=0 cells only |
//!
//! What happens to a non-conforming cell:
//!
//! * A cell failing the peak test, or any test under `Clp01`, is dropped
//!   under [`Action::Drop`], as TM 4.0 requires. Under [`Action::Tag`] a
//!   CLP=0 cell failing them is tagged instead (and a CLP=1 cell, which
//!   cannot be tagged further, dropped). TM 4.0 defines no tagging for
//!   CBR.1, VBR.1 or UBR.1; this is a network option, like UBR.2's, that
//!   forwards the excess as discard-eligible instead of discarding it. A
//!   tagged cell is not counted by any GCRA: it was non-conforming.
//! * Under `Clp0`, a CLP=0 cell that passes the peak test but fails the
//!   sustained one is dropped under `Drop` (VBR.2) or tagged under `Tag`
//!   (VBR.3). A cell tagged so is a conforming CLP=1 cell: it counts
//!   against the peak test (the CLP=0+1 flow), not the sustained one.
//!   CLP=1 cells go through the peak test only.
//!
//! An [`Unlimited`](crate::Envelope::Unlimited) contract passes every cell.

use aurora_time::Instant;
use aurora_wire::{crc, CellBytes};

use crate::contract::{Contract, Tests};
use crate::gcra::Gcra;

/// Which cells each of a contract's tests applies to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Definition {
    /// Every test on the aggregate CLP=0+1 flow (CBR.1, VBR.1, UBR.1).
    #[default]
    Clp01,
    /// The peak test on CLP=0+1, the sustained test on CLP=0 only (VBR.2,
    /// VBR.3).
    Clp0,
}

/// What UPC does with a cell that does not conform.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Action {
    /// Discard it.
    #[default]
    Drop,
    /// Set its CLP bit and forward it, where it can be tagged (see the
    /// [module](self) documentation).
    Tag,
}

/// What to do with one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Forward it as it is.
    Pass,
    /// Forward it with CLP = 1.
    Tag,
    /// Discard it.
    Drop,
}

/// Cells a [`Upc`] judged, by verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UpcCounters {
    /// Passed as they were.
    pub conforming: u64,
    /// Tagged (CLP set to 1) and passed.
    pub tagged: u64,
    /// Dropped for not conforming.
    pub dropped_nonconforming: u64,
}

/// One VC's usage parameter control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Upc {
    tests: Tests,
    definition: Definition,
    action: Action,
    counters: UpcCounters,
}

impl Upc {
    /// Policing of `contract` (with its CDVT) under `definition`, doing
    /// `action` with non-conforming cells.
    pub fn new(contract: &Contract, definition: Definition, action: Action) -> Upc {
        Upc {
            tests: contract.tests(contract.cdvt()),
            definition,
            action,
            counters: UpcCounters::default(),
        }
    }

    /// Judges a cell with cell loss priority `clp` arriving at `now`, and
    /// counts it.
    #[inline]
    pub fn police(&mut self, now: Instant, clp: bool) -> Verdict {
        let v = match &mut self.tests {
            Tests::None => Verdict::Pass,
            Tests::Peak(g) => {
                if g.conforms(now) {
                    Verdict::Pass
                } else {
                    self.excess(clp)
                }
            }
            Tests::Dual(d) => match self.definition {
                Definition::Clp01 => {
                    if d.conforms(now) {
                        Verdict::Pass
                    } else {
                        self.excess(clp)
                    }
                }
                Definition::Clp0 => {
                    let peak = d.peak.peek(now);
                    let sustained = clp | d.sustained.peek(now);
                    if peak & sustained {
                        d.peak.commit(now);
                        if !clp {
                            d.sustained.commit(now);
                        }
                        Verdict::Pass
                    } else if peak & (self.action == Action::Tag) {
                        // VBR.3: a CLP=0 cell over the sustained rate,
                        // tagged, is a conforming CLP=1 cell.
                        d.peak.commit(now);
                        Verdict::Tag
                    } else {
                        Verdict::Drop
                    }
                }
            },
        };
        match v {
            Verdict::Pass => self.counters.conforming += 1,
            Verdict::Tag => self.counters.tagged += 1,
            Verdict::Drop => self.counters.dropped_nonconforming += 1,
        }
        v
    }

    /// Under [`Action::Tag`], tag a CLP=0 cell and drop a CLP=1 one; else
    /// drop.
    #[inline]
    fn excess(&self, clp: bool) -> Verdict {
        if self.action == Action::Tag && !clp {
            Verdict::Tag
        } else {
            Verdict::Drop
        }
    }

    /// Judges a whole cell arriving at `now` (reading its CLP bit) and, if
    /// the verdict is [`Verdict::Tag`], sets the bit and rewrites the HEC.
    /// The caller drops the cell on [`Verdict::Drop`].
    pub fn police_cell(&mut self, now: Instant, cell: &mut CellBytes) -> Verdict {
        let v = self.police(now, cell[3] & 1 != 0);
        if v == Verdict::Tag {
            tag(cell);
        }
        v
    }

    /// The counts so far.
    pub fn counters(&self) -> UpcCounters {
        self.counters
    }

    /// The conformance definition.
    pub fn definition(&self) -> Definition {
        self.definition
    }

    /// The action for non-conforming cells.
    pub fn action(&self) -> Action {
        self.action
    }

    /// Forgets every cell (the counts stay).
    pub fn reset(&mut self) {
        match &mut self.tests {
            Tests::None => {}
            Tests::Peak(g) => g.reset(),
            Tests::Dual(d) => d.reset(),
        }
    }
}

/// Sets a cell's CLP bit and rewrites its HEC.
pub fn tag(cell: &mut CellBytes) {
    cell[3] |= 1;
    cell[4] = crc::hec(&[cell[0], cell[1], cell[2], cell[3]]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use aurora_time::Duration;
    use aurora_wire::cell::{build_cell, Header, Pti, VcId};

    fn at(ns: i64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn cbr_drops_or_tags_the_excess() {
        // PCR 10^8 cells/s: T = 10 ns, CDVT 5 ns: the GCRA(10, 5) sequence
        // of the gcra module.
        let c = Contract::peak(100_000_000, Duration::from_nanos(5)).unwrap();
        let arrivals = [0, 4, 6, 12, 15, 24, 25, 50, 51, 56];
        let mut drop = Upc::new(&c, Definition::Clp01, Action::Drop);
        let mut tag = Upc::new(&c, Definition::Clp01, Action::Tag);
        let d: Vec<Verdict> = arrivals
            .iter()
            .map(|&t| drop.police(at(t), false))
            .collect();
        let g: Vec<Verdict> = arrivals.iter().map(|&t| tag.police(at(t), false)).collect();
        use Verdict::{Drop as D, Pass as P, Tag as T};
        assert_eq!(d, [P, D, P, D, P, D, P, P, D, P]);
        assert_eq!(g, [P, T, P, T, P, T, P, P, T, P]);
        assert_eq!(
            drop.counters(),
            UpcCounters {
                conforming: 6,
                tagged: 0,
                dropped_nonconforming: 4
            }
        );
        assert_eq!(
            tag.counters(),
            UpcCounters {
                conforming: 6,
                tagged: 4,
                dropped_nonconforming: 0
            }
        );
        // A CLP=1 cell cannot be tagged again: it is dropped.
        assert_eq!(tag.police(at(57), true), Verdict::Drop);
    }

    /// VBR with T_p = 10 ns, T_s = 40 ns, MBS 3 (BT 60 ns), CDVT 0, cells
    /// every 10 ns from 0 to 100: the dual GCRA passes 0, 10, 20, 60, 100.
    #[test]
    fn vbr_definitions() {
        let c = Contract::sustained(100_000_000, 25_000_000, 3, Duration::ZERO).unwrap();
        use Verdict::{Drop as D, Pass as P, Tag as T};
        let run = |def, act, clp: &dyn Fn(i64) -> bool| {
            let mut u = Upc::new(&c, def, act);
            (0..=100)
                .step_by(10)
                .map(|t| u.police(at(t), clp(t)))
                .collect::<Vec<_>>()
        };
        let all0 = |_| false;
        // VBR.1: the dual GCRA on everything.
        assert_eq!(
            run(Definition::Clp01, Action::Drop, &all0),
            [P, P, P, D, D, D, P, D, D, D, P]
        );
        // VBR.2 on CLP=0 cells alone is the same.
        assert_eq!(
            run(Definition::Clp0, Action::Drop, &all0),
            [P, P, P, D, D, D, P, D, D, D, P]
        );
        // VBR.3 tags instead. A tagged cell does not count against SCR, so
        // the sustained test's state is that of VBR.2.
        assert_eq!(
            run(Definition::Clp0, Action::Tag, &all0),
            [P, P, P, T, T, T, P, T, T, T, P]
        );
        // Under VBR.2/3, CLP=1 cells see only the peak test and do not use
        // up the sustained allowance: with 10 and 20 sent as CLP=1, 30 and
        // 40 still find room in the burst (TAT_s goes 40, 80, 120), then
        // 50 does not, 60 does (TAT_s 160), 70 to 90 do not, 100 does.
        let some1 = |t| t == 10 || t == 20;
        assert_eq!(
            run(Definition::Clp0, Action::Drop, &some1),
            [P, P, P, P, P, D, P, D, D, D, P]
        );
        // Under VBR.1 they count: the same cells, as in the first run.
        assert_eq!(
            run(Definition::Clp01, Action::Drop, &some1),
            [P, P, P, D, D, D, P, D, D, D, P]
        );
        // Cells breaking the peak rate are dropped even under VBR.3.
        let mut u = Upc::new(&c, Definition::Clp0, Action::Tag);
        assert_eq!(u.police(at(0), false), P);
        assert_eq!(u.police(at(5), false), D);
        assert_eq!(u.police(at(6), true), D);
        assert_eq!(
            u.counters(),
            UpcCounters {
                conforming: 1,
                tagged: 0,
                dropped_nonconforming: 2
            }
        );
    }

    #[test]
    fn unlimited_passes_everything() {
        let mut u = Upc::new(&Contract::UNLIMITED, Definition::Clp0, Action::Tag);
        for t in [0, 0, 0, -5, i64::MAX] {
            assert_eq!(u.police(at(t), t == 0), Verdict::Pass);
        }
        assert_eq!(u.counters().conforming, 5);
    }

    #[test]
    fn tagging_a_cell_sets_clp_and_the_hec() {
        let c = Contract::peak(1, Duration::ZERO).unwrap();
        let mut u = Upc::new(&c, Definition::Clp01, Action::Tag);
        let mut h = Header::data(VcId::new(1, 42));
        h.pti = Pti::DATA_END;
        let mut cell = build_cell(&h, &[7; 48]).unwrap();
        assert_eq!(u.police_cell(at(0), &mut cell), Verdict::Pass);
        let before = cell;
        assert_eq!(u.police_cell(at(1), &mut cell), Verdict::Tag);
        h.clp = true;
        assert_eq!(cell, build_cell(&h, &[7; 48]).unwrap());
        assert_ne!(cell, before);
        // A cell already CLP=1 and non-conforming is dropped and left alone.
        let tagged = cell;
        assert_eq!(u.police_cell(at(2), &mut cell), Verdict::Drop);
        assert_eq!(cell, tagged);
    }
}
