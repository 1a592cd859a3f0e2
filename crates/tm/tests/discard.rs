//! Properties of EPD/PPD buffer admission, against a port whose buffer
//! fills and drains.

use aurora_tm::{Admission, BufferLimits, DiscardCounters, DropReason, PduDiscard};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug)]
enum Event {
    /// A cell of VC `vc`, CLP `clp`, ending its PDU if `end`.
    Cell { vc: usize, clp: bool, end: bool },
    /// The port sends up to this many cells.
    Drain(usize),
}

fn event(vcs: usize) -> impl Strategy<Value = Event> {
    prop_oneof![
        6 => (0..vcs, prop::bool::weighted(0.3), prop::bool::weighted(0.2))
            .prop_map(|(vc, clp, end)| Event::Cell { vc, clp, end }),
        2 => (0usize..6).prop_map(Event::Drain),
    ]
}

fn limits() -> impl Strategy<Value = BufferLimits> {
    (1usize..40).prop_flat_map(|size| {
        (0..=size + 2, 0..=size + 2).prop_map(move |(epd, clp1)| BufferLimits { size, epd, clp1 })
    })
}

/// One cell's story: what it was, the occupancy it found, the answer.
#[derive(Clone, Copy, Debug)]
struct Seen {
    clp: bool,
    occupancy: usize,
    answer: Admission,
}

/// Checks one PDU's cells (the last ending it, if `ended`).
fn check_pdu(l: &BufferLimits, cells: &[Seen], ended: bool) -> Result<(), TestCaseError> {
    let admitted = |s: &Seen| s.answer == Admission::Admit;
    let n = cells.len();
    let body = if ended { &cells[..n - 1] } else { cells };
    // No hole: the body's admitted cells are a first part of it.
    let k = body.iter().take_while(|s| admitted(s)).count();
    prop_assert!(
        body[k..].iter().all(|s| !admitted(s)),
        "a hole in {:?}",
        cells
    );
    // Selective discard: no CLP=1 cell is admitted above its threshold,
    // except a PDU's last cell when the PDU has cells before it.
    let spared = if ended && n > 1 { n - 1 } else { n };
    for s in &cells[..spared] {
        prop_assert!(
            !(admitted(s) && s.clp && s.occupancy >= l.clp1),
            "{:?}",
            cells
        );
    }
    let first = cells[0];
    // EPD refuses a PDU whole.
    if first.answer == Admission::Drop(DropReason::Epd) {
        prop_assert!(cells
            .iter()
            .all(|s| s.answer == Admission::Drop(DropReason::Epd)));
        prop_assert!(first.occupancy >= l.epd);
        return Ok(());
    }
    // Every cell refused after the first refusal is refused by PPD.
    if k < body.len() {
        prop_assert!(body[k + 1..]
            .iter()
            .all(|s| s.answer == Admission::Drop(DropReason::Ppd)));
    }
    if ended && n > 1 {
        let last = cells[n - 1];
        // The last cell is refused only by a full buffer.
        prop_assert_eq!(
            admitted(&last),
            last.occupancy < l.size,
            "last cell of {:?}",
            cells
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Every PDU comes through whole, or as a first part and its last cell
    /// (or a first part alone if the buffer was full for the last), or not
    /// at all; never with a hole. The buffer never overflows, no PDU starts
    /// above the EPD threshold, no CLP=1 cell but a PDU's last is admitted
    /// above the CLP=1 threshold, and the counters add up.
    #[test]
    fn pdus_have_no_holes_and_limits_hold(
        (vcs, limits, events) in (1usize..6, limits())
            .prop_flat_map(|(vcs, l)| (Just(vcs), Just(l), prop::collection::vec(event(vcs), 0..400)))
    ) {
        let mut port = PduDiscard::new(limits, vcs);
        let mut queue = 0usize;
        let mut pdus: Vec<Vec<Seen>> = vec![Vec::new(); vcs];
        let mut want = DiscardCounters::default();
        for e in events {
            match e {
                Event::Drain(k) => queue -= k.min(queue),
                Event::Cell { vc, clp, end } => {
                    let starts = pdus[vc].is_empty();
                    prop_assert_eq!(port.at_boundary(vc), starts);
                    let occupancy = queue;
                    let answer = port.admit(vc, clp, end, occupancy);
                    match answer {
                        Admission::Admit => {
                            prop_assert!(queue < limits.size);
                            if starts {
                                prop_assert!(queue < limits.epd);
                            }
                            queue += 1;
                            want.admitted += 1;
                        }
                        Admission::Drop(r) => match r {
                            DropReason::TailDrop => {
                                prop_assert!(queue >= limits.size);
                                want.tail_drop += 1;
                            }
                            DropReason::Epd => want.epd += 1,
                            DropReason::Ppd => want.ppd += 1,
                            DropReason::Clp1Discard => {
                                prop_assert!(clp && queue >= limits.clp1);
                                want.clp1_discard += 1;
                            }
                            DropReason::NoSuchVc => prop_assert!(false, "VC {} is in the table", vc),
                        },
                    }
                    pdus[vc].push(Seen { clp, occupancy, answer });
                    if end {
                        check_pdu(&limits, &pdus[vc], true)?;
                        pdus[vc].clear();
                    }
                }
            }
            prop_assert!(queue <= limits.size);
        }
        for p in pdus.iter().filter(|p| !p.is_empty()) {
            check_pdu(&limits, p, false)?;
        }
        prop_assert_eq!(port.counters(), want);
    }

    /// Nothing panics on any VC, occupancy, limits or cell bytes.
    #[test]
    fn no_panic_on_anything(
        size in any::<usize>(),
        epd in any::<usize>(),
        clp1 in any::<usize>(),
        vcs in 0usize..100,
        cells in prop::collection::vec(
            (any::<usize>(), 0usize..120, any::<bool>(), any::<bool>(), any::<usize>(), any::<[u8; 53]>()),
            0..100,
        ),
        resize in 0usize..200,
    ) {
        let mut port = PduDiscard::new(BufferLimits { size, epd, clp1 }, vcs);
        for (i, &(big_vc, vc, clp, end, occupancy, bytes)) in cells.iter().enumerate() {
            let vc = if i % 3 == 0 { big_vc } else { vc };
            port.admit(vc, clp, end, occupancy);
            port.admit_cell(vc, &bytes, occupancy);
            port.at_boundary(vc);
            if i % 17 == 0 {
                port.reset_vc(vc);
            }
            if i == 50 {
                port.set_vcs(resize);
            }
        }
        let c = port.counters();
        prop_assert_eq!(
            c.admitted + c.tail_drop + c.epd + c.ppd + c.clp1_discard + c.no_such_vc,
            2 * cells.len() as u64
        );
    }
}
