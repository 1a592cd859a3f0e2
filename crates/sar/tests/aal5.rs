//! AAL5 engine tests: round trips, byte-exact agreement with the reference
//! framing, and accounting under every kind of channel damage.

mod common;

use aurora_sar::{Aal5Rx, Aal5Tx, DropReason, Kernel, PduOptions, RxConfig, Status, VcConfig};
use aurora_time::{Duration, Instant};
use aurora_wire::aal5;
use aurora_wire::cell::{Format, VcId};
use aurora_wire::CellBytes;
use common::{impair, match_in_order, Impairments, Rng};
use proptest::prelude::*;

const A: VcId = VcId::new(0, 100);
const B: VcId = VcId::new(1, 200);
const FAR: Instant = Instant::from_millis(1_000_000);

fn segment(tx: &mut Aal5Tx, sdu: &[u8]) -> Vec<CellBytes> {
    let mut cells = vec![[0u8; 53]; aal5::cells_for(sdu.len())];
    let n = tx
        .segment_into(sdu, PduOptions::default(), &mut cells)
        .unwrap();
    assert_eq!(n, cells.len());
    cells
}

fn rx_with(kernel: Kernel, vcs: &[VcId], vcfg: VcConfig) -> Aal5Rx {
    let mut rx = Aal5Rx::new(RxConfig {
        kernel,
        ..RxConfig::default()
    });
    for &vc in vcs {
        rx.open_vc(vc, vcfg).unwrap();
    }
    rx
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any SDU, split into any scatter-gather list and segmented in any
    /// batch sizes, gives exactly the reference CPCS-PDU and comes back whole.
    #[test]
    fn any_sdu_round_trips(
        len in prop_oneof![0usize..200, 0usize..=65535, 65400usize..=65535],
        seed: u64,
        uu: u8,
        clp: bool,
        posted: bool,
    ) {
        let mut rng = Rng::new(seed);
        let sdu = rng.bytes(len);
        // Random split points for scatter-gather.
        let mut cuts: Vec<usize> = (0..rng.below(5)).map(|_| rng.below(len + 1)).collect();
        cuts.sort_unstable();
        let mut parts: Vec<&[u8]> = Vec::new();
        let mut prev = 0;
        for c in cuts.into_iter().chain([len]) {
            parts.push(&sdu[prev..c]);
            prev = c;
        }
        let mut reference = vec![0u8; aal5::cpcs_len(len)];
        aal5::encode(&sdu, uu, 0, &mut reference).unwrap();
        for kernel in Kernel::available() {
            let mut tx = Aal5Tx::with_kernel(A, Format::Uni, kernel).unwrap();
            let mut seg = tx.segment(&parts, PduOptions { uu, cpi: 0, clp: Some(clp) }).unwrap();
            let mut cells = vec![[0u8; 53]; aal5::cells_for(len)];
            let mut at = 0;
            while !seg.is_done() {
                let batch = 1 + rng.below(40);
                let end = (at + batch).min(cells.len());
                at += seg.fill(&mut cells[at..end]);
            }
            prop_assert_eq!(at, cells.len());
            // The one-call path for a contiguous SDU builds the same cells.
            let mut direct = vec![[0u8; 53]; aal5::cells_for(len)];
            let n = tx
                .segment_into(&sdu, PduOptions { uu, cpi: 0, clp: Some(clp) }, &mut direct)
                .unwrap();
            prop_assert_eq!(n, direct.len());
            prop_assert_eq!(&direct, &cells);
            // So does a contiguous SDU filled in batches, the first of
            // which may hold the whole PDU (then it is built in one call).
            let mut seg = tx.segment_slice(&sdu, PduOptions { uu, cpi: 0, clp: Some(clp) }).unwrap();
            let mut sliced = vec![[0u8; 53]; aal5::cells_for(len)];
            let mut batch = if rng.below(2) == 0 { sliced.len() } else { 1 + rng.below(40) };
            let mut at = 0;
            while !seg.is_done() {
                let end = (at + batch).min(sliced.len());
                at += seg.fill(&mut sliced[at..end]);
                batch = 1 + rng.below(40);
            }
            prop_assert_eq!(at, sliced.len());
            prop_assert_eq!(&sliced, &cells);
            let payloads: Vec<u8> = cells.iter().flat_map(|c| c[5..].iter().copied()).collect();
            prop_assert_eq!(&payloads, &reference);
            for (i, c) in cells.iter().enumerate() {
                let last = i + 1 == cells.len();
                prop_assert_eq!(c[3] & 0x02 != 0, last);
                prop_assert_eq!(c[3] & 0x01 != 0, clp);
                prop_assert_eq!(c[4], aurora_wire::crc::hec(&[c[0], c[1], c[2], c[3]]));
            }
            let mut rx = rx_with(kernel, &[A], VcConfig::default());
            if posted {
                rx.post_buffer(A, vec![0; aal5::cpcs_len(len)]).unwrap();
            }
            let mut got = Vec::new();
            // Feed in random batch sizes too.
            let mut i = 0;
            while i < cells.len() {
                let end = (i + 1 + rng.below(64)).min(cells.len());
                rx.push(Instant::ZERO, &cells[i..end], &mut |d| got.push(d));
                i = end;
            }
            prop_assert_eq!(got.len(), 1);
            let d = got.pop().unwrap();
            prop_assert_eq!(d.status, Status::Intact);
            prop_assert_eq!(d.posted, posted);
            prop_assert_eq!(d.uu, uu);
            prop_assert_eq!(d.sdu(), &sdu[..]);
            prop_assert_eq!(rx.stats().cells_balance(), 0);
            prop_assert_eq!(rx.memory_in_use(), 0);
        }
    }

    /// Two VCs, cells interleaved, through a channel that loses, corrupts,
    /// duplicates, reorders and misinserts cells. Nothing wrong is ever
    /// delivered as intact, and every cell is accounted for.
    #[test]
    fn damage_is_never_delivered_and_every_cell_is_counted(
        seed: u64,
        loss in 0.0..0.05f64,
        bit_error in 0.0..0.05f64,
        duplicate in 0.0..0.03f64,
        reorder in 0.0..0.03f64,
        misinsert in 0.0..0.03f64,
        corrupted_delivery: bool,
    ) {
        let mut rng = Rng::new(seed);
        let kernel = Kernel::available()[rng.below(Kernel::available().len())];
        let mut txa = Aal5Tx::with_kernel(A, Format::Uni, kernel).unwrap();
        let mut txb = Aal5Tx::with_kernel(B, Format::Uni, kernel).unwrap();
        let sent_a: Vec<Vec<u8>> = (0..30).map(|_| { let n = rng.below(2000); rng.bytes(n) }).collect();
        let sent_b: Vec<Vec<u8>> = (0..30).map(|_| { let n = rng.below(2000); rng.bytes(n) }).collect();
        let cells_a: Vec<CellBytes> = sent_a.iter().flat_map(|s| segment(&mut txa, s)).collect();
        let cells_b: Vec<CellBytes> = sent_b.iter().flat_map(|s| segment(&mut txb, s)).collect();
        // Interleave the two VCs cell by cell.
        let (mut ia, mut ib) = (0, 0);
        let mut wire = Vec::new();
        while ia < cells_a.len() || ib < cells_b.len() {
            if ib >= cells_b.len() || (ia < cells_a.len() && rng.chance(0.5)) {
                wire.push(cells_a[ia]);
                ia += 1;
            } else {
                wire.push(cells_b[ib]);
                ib += 1;
            }
        }
        let imp = Impairments { loss, bit_error, payload_only: false, duplicate, reorder, misinsert };
        let (arrived, trace) = impair(&wire, imp, &mut rng, &cells_b, A);
        let vcfg = VcConfig { deliver_corrupted: corrupted_delivery, ..VcConfig::default() };
        let mut rx = rx_with(kernel, &[A, B], vcfg);
        let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
        let mut flagged = 0u64;
        for chunk in arrived.chunks(1 + rng.below(100)) {
            rx.push(Instant::ZERO, chunk, &mut |d| {
                if d.status != Status::Intact {
                    flagged += 1;
                } else if d.vc == A {
                    got_a.push(d.into_sdu());
                } else {
                    got_b.push(d.into_sdu());
                }
            });
        }
        rx.handle_timeout(FAR);
        // A misinserted cell that is a whole one-cell PDU of B is, to AAL5, a
        // valid PDU on A: it was sent, just not on A. Anything else on A must
        // be A's own, in order.
        let one_cell_b: Vec<&Vec<u8>> = sent_b.iter().filter(|s| s.len() <= 40).collect();
        got_a.retain(|g| !(misinsert > 0.0 && one_cell_b.contains(&g)));
        let replay = if duplicate > 0.0 || reorder > 0.0 { 40 } else { 0 };
        common::match_allowing_replays(&sent_a, &got_a, replay);
        common::match_allowing_replays(&sent_b, &got_b, replay);
        let st = rx.stats();
        prop_assert_eq!(st.cells_in, trace.counts.delivered);
        prop_assert_eq!(trace.counts.sent + trace.counts.duplicated + trace.counts.inserted,
            trace.counts.lost + trace.counts.hec_discarded + trace.counts.delivered);
        prop_assert_eq!(rx.cells_in_progress(), 0);
        prop_assert_eq!(st.cells_balance(), 0, "cells: {:?}", st);
        prop_assert!(st.pdus_delivered >= (got_a.len() + got_b.len()) as u64);
        prop_assert_eq!(st.pdus_corrupted, flagged);
        prop_assert!(st.pdus_delivered <= 60);
        let ca = rx.vc_counters(A).unwrap();
        let cb = rx.vc_counters(B).unwrap();
        prop_assert_eq!(ca.rx + cb.rx, st.pdus_delivered);
        prop_assert_eq!(ca.rx_err + cb.rx_err + ca.rx_drop + cb.rx_drop,
            st.pdus_corrupted + st.pdus_dropped.total());
        prop_assert_eq!(rx.memory_in_use(), 0);
    }

    /// With only payload bit errors, PDUs keep their boundaries, so the PDU
    /// count adds up exactly: sent = delivered + flagged + dropped.
    #[test]
    fn payload_errors_add_up_per_pdu(seed: u64, ber in 0.0..0.2f64, corrupted_delivery: bool) {
        let mut rng = Rng::new(seed);
        let mut tx = Aal5Tx::new(A, Format::Uni).unwrap();
        let sent: Vec<Vec<u8>> = (0..40).map(|_| { let n = rng.below(3000); rng.bytes(n) }).collect();
        let wire: Vec<CellBytes> = sent.iter().flat_map(|s| segment(&mut tx, s)).collect();
        let imp = Impairments { bit_error: ber, payload_only: true, ..Default::default() };
        let (arrived, trace) = impair(&wire, imp, &mut rng, &[], A);
        let vcfg = VcConfig { deliver_corrupted: corrupted_delivery, ..VcConfig::default() };
        let mut rx = rx_with(Kernel::best(), &[A], vcfg);
        let mut intact = Vec::new();
        let mut flagged = 0;
        rx.push(Instant::ZERO, &arrived, &mut |d| match d.status {
            Status::Intact => intact.push(d.into_sdu()),
            Status::Corrupted(r) => { assert_eq!(r, DropReason::Crc); flagged += 1 }
        });
        let matched = match_in_order(&sent, &intact);
        let st = rx.stats();
        prop_assert_eq!(sent.len() as u64, st.pdus_delivered + st.pdus_corrupted + st.pdus_dropped.total());
        prop_assert_eq!(st.pdus_dropped.total(), if corrupted_delivery { 0 } else { st.pdus_dropped.get(DropReason::Crc) });
        prop_assert_eq!(st.pdus_corrupted, flagged);
        // Every PDU whose cells were all untouched arrived intact.
        let mut first = 0;
        for (i, s) in sent.iter().enumerate() {
            let n = aal5::cells_for(s.len());
            if !trace.touched[first..first + n].iter().any(|&t| t) {
                prop_assert!(matched.contains(&i), "untouched PDU {} lost", i);
            }
            first += n;
        }
    }

    /// Under loss alone, a PDU is delivered whenever none of its cells and not
    /// the previous PDU's last cell were lost.
    #[test]
    fn loss_spares_untouched_pdus(seed: u64, loss in 0.0..0.1f64) {
        let mut rng = Rng::new(seed);
        let mut tx = Aal5Tx::new(A, Format::Uni).unwrap();
        let sent: Vec<Vec<u8>> = (0..40).map(|_| { let n = rng.below(1000); rng.bytes(n) }).collect();
        let wire: Vec<CellBytes> = sent.iter().flat_map(|s| segment(&mut tx, s)).collect();
        let imp = Impairments { loss, ..Default::default() };
        let (arrived, trace) = impair(&wire, imp, &mut rng, &[], A);
        let mut rx = rx_with(Kernel::best(), &[A], VcConfig::default());
        let mut got = Vec::new();
        rx.push(Instant::ZERO, &arrived, &mut |d| got.push(d.into_sdu()));
        rx.handle_timeout(FAR);
        let matched = match_in_order(&sent, &got);
        let mut first = 0;
        let mut prev_end_lost = false;
        for (i, s) in sent.iter().enumerate() {
            let n = aal5::cells_for(s.len());
            let own_lost = trace.lost[first..first + n].iter().any(|&l| l);
            if !own_lost && !prev_end_lost {
                prop_assert!(matched.contains(&i), "PDU {} should have arrived", i);
            }
            prev_end_lost = trace.lost[first + n - 1];
            first += n;
        }
        prop_assert_eq!(rx.stats().cells_balance(), 0);
    }
}

#[test]
fn timeout_drops_a_stalled_pdu_and_the_next_one_arrives() {
    let mut tx = Aal5Tx::new(A, Format::Uni).unwrap();
    let vcfg = VcConfig {
        timeout: Duration::from_millis(10),
        ..VcConfig::default()
    };
    let mut rx = rx_with(Kernel::best(), &[A], vcfg);
    let cells = segment(&mut tx, &[7u8; 500]);
    rx.push(Instant::from_millis(1), &cells[..5], &mut |_| {
        panic!("incomplete")
    });
    assert_eq!(rx.poll_at(), Some(Instant::from_millis(11)));
    rx.handle_timeout(Instant::from_millis(10));
    assert_eq!(rx.stats().pdus_dropped.get(DropReason::Timeout), 0);
    rx.handle_timeout(Instant::from_millis(11));
    assert_eq!(rx.stats().pdus_dropped.get(DropReason::Timeout), 1);
    assert_eq!(rx.stats().cells_dropped.get(DropReason::Timeout), 5);
    assert_eq!(rx.poll_at(), None);
    let mut n = 0;
    let again = segment(&mut tx, b"next");
    rx.push(Instant::from_millis(20), &again, &mut |d| {
        assert_eq!(d.sdu(), b"next");
        n += 1
    });
    assert_eq!(n, 1);
    // A late timer the caller never fired is applied when the VC next sees a cell.
    rx.push(Instant::from_millis(30), &cells[..3], &mut |_| {});
    let mut fresh = 0;
    rx.push(Instant::from_millis(50), &again, &mut |d| {
        assert_eq!(d.sdu(), b"next", "not merged with the stale cells");
        fresh += 1
    });
    assert_eq!(fresh, 1);
    assert_eq!(rx.stats().pdus_dropped.get(DropReason::Timeout), 2);
    assert_eq!(rx.vc_counters(A).unwrap().rx_err, 2);
    // A PDU that begins and ends in one batch leaves no timer behind; one
    // still open when its batch ends has one, even after others completed.
    assert_eq!(rx.poll_at(), None);
    let mut both = again.clone();
    both.extend_from_slice(&cells[..2]);
    let mut got = 0;
    rx.push(Instant::from_millis(60), &both, &mut |_| got += 1);
    assert_eq!(got, 1);
    assert_eq!(rx.poll_at(), Some(Instant::from_millis(70)));
    rx.handle_timeout(Instant::from_millis(70));
    assert_eq!(rx.stats().pdus_dropped.get(DropReason::Timeout), 3);
    assert_eq!(rx.poll_at(), None);
}

#[test]
fn oversize_pdus_are_dropped_whole_and_the_vc_recovers() {
    let mut tx = Aal5Tx::new(A, Format::Uni).unwrap();
    let vcfg = VcConfig {
        max_sdu: 100,
        ..VcConfig::default()
    };
    let mut rx = rx_with(Kernel::best(), &[A], vcfg);
    let mut wire = segment(&mut tx, &[1u8; 1000]);
    wire.extend(segment(&mut tx, &[2u8; 100]));
    let mut got = Vec::new();
    rx.push(Instant::ZERO, &wire, &mut |d| got.push(d.into_sdu()));
    assert_eq!(got, vec![vec![2u8; 100]]);
    let st = rx.stats();
    assert_eq!(st.pdus_dropped.get(DropReason::Oversize), 1);
    assert_eq!(st.cells_dropped.get(DropReason::Oversize), 21);
    assert_eq!(st.cells_balance(), 0);
}

#[test]
fn memory_budget_bounds_reassembly_and_counts_exhaustion() {
    let mut tx: Vec<Aal5Tx> = (0..50)
        .map(|i| Aal5Tx::new(VcId::new(0, 100 + i), Format::Uni).unwrap())
        .collect();
    let mut rx = Aal5Rx::new(RxConfig {
        memory_budget: 16 * 1024,
        initial_buffer: 2048,
        ..RxConfig::default()
    });
    for t in &tx {
        rx.open_vc(t.vc(), VcConfig::default()).unwrap();
    }
    // Every VC starts a 4 KiB PDU and stalls one cell before its end.
    for t in tx.iter_mut() {
        let cells = segment(t, &[3u8; 4000]);
        rx.push(Instant::ZERO, &cells[..cells.len() - 1], &mut |_| {
            panic!("incomplete")
        });
        assert!(rx.memory_in_use() <= 16 * 1024);
    }
    let st = rx.stats();
    assert!(
        st.pdus_dropped.get(DropReason::BudgetExhausted) >= 40,
        "{st:?}"
    );
    assert_eq!(
        st.cells_balance(),
        i128::from(rx.cells_in_progress()),
        "held cells are the in-progress ones"
    );
    for t in &tx {
        let c = rx.vc_counters(t.vc()).unwrap();
        assert_eq!(c.rx_err, 0);
    }
    rx.handle_timeout(FAR);
    assert_eq!(rx.memory_in_use(), 0);
    assert_eq!(rx.stats().cells_balance(), 0);
}

#[test]
fn a_recycled_buffer_is_charged_as_a_new_one() {
    // Room for eight PDUs in progress at the initial size, not for one
    // grown to a 9 KB PDU's.
    let mut rx = Aal5Rx::new(RxConfig {
        memory_budget: 8 * 2048,
        initial_buffer: 2048,
        ..RxConfig::default()
    });
    let mut tx: Vec<Aal5Tx> = (0..8)
        .map(|i| Aal5Tx::new(VcId::new(0, 100 + i), Format::Uni).unwrap())
        .collect();
    for t in &tx {
        rx.open_vc(t.vc(), VcConfig::default()).unwrap();
    }
    // A long PDU grows its buffer; it comes back to the pool, as a host
    // that has checked it hands it back.
    let mut spent = Vec::new();
    rx.push(
        Instant::ZERO,
        &segment(&mut tx[0], &[1u8; 9000]),
        &mut |d| {
            assert_eq!(d.status, Status::Intact);
            spent.push(d.into_buffer());
        },
    );
    assert!(spent[0].len() > 8 * 2048 / 2);
    for b in spent {
        rx.recycle(b);
    }
    assert_eq!(rx.memory_in_use(), 0);
    // Eight short PDUs in progress at once, one of them in that buffer:
    // all fit.
    for t in tx.iter_mut() {
        let cells = segment(t, &[2u8; 100]);
        rx.push(Instant::ZERO, &cells[..cells.len() - 1], &mut |_| {
            panic!("incomplete")
        });
    }
    assert_eq!(rx.stats().pdus_dropped.get(DropReason::BudgetExhausted), 0);
    assert_eq!(rx.memory_in_use(), 8 * 2048);
}

#[test]
fn posted_buffers_take_the_data_and_small_ones_overflow_to_the_pool() {
    let mut tx = Aal5Tx::new(A, Format::Uni).unwrap();
    let mut rx = rx_with(Kernel::best(), &[A], VcConfig::default());
    rx.post_buffer(A, vec![0; 96]).unwrap();
    rx.post_buffer(A, vec![0; 4096]).unwrap();
    let big = vec![9u8; 3000];
    let mut got = Vec::new();
    rx.push(Instant::ZERO, &segment(&mut tx, &big), &mut |d| got.push(d));
    assert_eq!(got[0].sdu(), &big[..]);
    assert!(!got[0].posted, "moved to a pool buffer");
    assert_eq!(rx.stats().posted_overflows, 1);
    // The small posted buffer went back to the front of the queue.
    rx.push(Instant::ZERO, &segment(&mut tx, b"hi"), &mut |d| {
        got.push(d)
    });
    assert!(got[1].posted);
    assert_eq!(got[1].sdu(), b"hi");
    rx.push(Instant::ZERO, &segment(&mut tx, &big), &mut |d| got.push(d));
    assert!(got[2].posted);
    assert_eq!(rx.stats().posted_hits, 3);
    let b = got.pop().unwrap().into_buffer();
    assert_eq!(b.len(), 4096, "the posted buffer comes back whole");
    assert_eq!(
        rx.post_buffer(VcId::new(9, 9), b).unwrap_err().0,
        aurora_sar::aal5::RxError::UnknownVc
    );
}

#[test]
fn length_and_abort_errors_are_named() {
    // Valid CRC, wrong Length.
    let mut pdu = vec![0u8; 96];
    let mut t = aal5::Trailer {
        uu: 0,
        cpi: 0,
        length: 20,
        crc: 0,
    };
    let seal = |pdu: &mut Vec<u8>, t: &mut aal5::Trailer| {
        pdu[88..].copy_from_slice(&t.to_bytes());
        t.crc = aurora_wire::crc::crc32(&pdu[..92]);
        pdu[88..].copy_from_slice(&t.to_bytes());
    };
    seal(&mut pdu, &mut t);
    let to_cells = |pdu: &[u8]| -> Vec<CellBytes> {
        pdu.chunks(48)
            .enumerate()
            .map(|(i, p)| {
                let mut c = [0u8; 53];
                let h = aurora_wire::cell::Header {
                    pti: if (i + 1) * 48 == pdu.len() {
                        aurora_wire::cell::Pti::DATA_END
                    } else {
                        aurora_wire::cell::Pti::DATA
                    },
                    ..aurora_wire::cell::Header::data(A)
                };
                h.emit(&mut c).unwrap();
                c[5..].copy_from_slice(p);
                c
            })
            .collect()
    };
    let mut rx = rx_with(Kernel::best(), &[A], VcConfig::default());
    rx.push(Instant::ZERO, &to_cells(&pdu), &mut |_| {
        panic!("bad length")
    });
    t.length = 0;
    seal(&mut pdu, &mut t);
    rx.push(Instant::ZERO, &to_cells(&pdu), &mut |_| panic!("aborted"));
    let st = rx.stats();
    assert_eq!(st.pdus_dropped.get(DropReason::Length), 1);
    assert_eq!(st.pdus_dropped.get(DropReason::Aborted), 1);
    // Non-user cells and strangers are counted, not reassembled.
    let mut oam = to_cells(&pdu)[0];
    oam[3] |= 0x08;
    let mut stranger = to_cells(&pdu)[0];
    stranger[2] ^= 0x10;
    rx.push(Instant::ZERO, &[oam, stranger], &mut |_| panic!());
    let st = rx.stats();
    assert_eq!(st.cells_dropped.get(DropReason::NotUserData), 1);
    assert_eq!(st.cells_dropped.get(DropReason::UnknownVc), 1);
    assert_eq!(st.cells_balance(), 0);
}

#[test]
fn sender_refuses_what_it_cannot_carry() {
    let mut tx = Aal5Tx::new(A, Format::Uni).unwrap();
    let big = vec![0u8; 65536];
    let mut cells = vec![[0u8; 53]; 2000];
    assert!(tx
        .segment_into(&big, PduOptions::default(), &mut cells)
        .is_err());
    assert!(tx
        .segment_into(&[0; 100], PduOptions::default(), &mut cells[..2])
        .is_err());
    assert_eq!(tx.counters().tx_err, 2);
    assert!(Aal5Tx::new(VcId::new(300, 1), Format::Uni).is_err());
    assert!(Aal5Tx::new(VcId::new(300, 1), Format::Nni).is_ok());
}

/// Each end-of-message cell that arrives is counted once, whatever
/// becomes of its PDU; a PDU whose end cell was lost is not among them
/// (its cells merge into the next, which fails), nor is one dropped for
/// its size (its end cell ends the discard and is counted).
#[test]
fn end_cells_received_count_the_pdus_the_sender_finished_that_arrived() {
    let mut tx = Aal5Tx::new(A, Format::Uni).unwrap();
    let vcfg = VcConfig {
        max_sdu: 200,
        ..VcConfig::default()
    };
    let mut rx = rx_with(Kernel::best(), &[A], vcfg);
    let mut wire = Vec::new();
    // 1: whole. 2: a middle cell lost. 3: its end cell lost (merges
    // into 4, which fails). 5: too big. 6: whole.
    wire.extend(segment(&mut tx, &[1u8; 150]));
    let mut two = segment(&mut tx, &[2u8; 150]);
    two.remove(1);
    wire.extend(two);
    let mut three = segment(&mut tx, &[3u8; 150]);
    three.pop();
    wire.extend(three);
    wire.extend(segment(&mut tx, &[4u8; 20]));
    wire.extend(segment(&mut tx, &[5u8; 1000]));
    wire.extend(segment(&mut tx, &[6u8; 20]));
    let mut got = Vec::new();
    rx.push(Instant::ZERO, &wire, &mut |d| got.push(d.into_sdu()));
    assert_eq!(got, vec![vec![1u8; 150], vec![6u8; 20]]);
    let c = rx.vc_counters(A).unwrap();
    assert_eq!(tx.counters().tx, 6);
    assert_eq!(c.rx, 2);
    // Six sent, one end cell lost: five arrived.
    assert_eq!(c.rx_eoms, 5);
    assert_eq!(c.rx_eoms, c.rx + c.rx_err + c.rx_drop);
}

/// Every SDU length up to eleven cells, on every kernel: the one-call
/// segmentation gives the reference CPCS-PDU (so every split of the last
/// body cells and the one or two tail cells into groups of four is met).
#[test]
fn segment_into_matches_the_reference_at_every_short_length() {
    for len in 0..=11 * 48 {
        let sdu: Vec<u8> = (0..len).map(|i| (i * 37 + len) as u8).collect();
        let mut reference = vec![0u8; aal5::cpcs_len(len)];
        aal5::encode(&sdu, 7, 0, &mut reference).unwrap();
        for kernel in Kernel::available() {
            let mut tx = Aal5Tx::with_kernel(A, Format::Uni, kernel).unwrap();
            let mut cells = vec![[0u8; 53]; aal5::cells_for(len)];
            let opts = PduOptions {
                uu: 7,
                ..PduOptions::default()
            };
            assert_eq!(tx.segment_into(&sdu, opts, &mut cells), Ok(cells.len()));
            let payloads: Vec<u8> = cells.iter().flat_map(|c| c[5..].to_vec()).collect();
            assert_eq!(payloads, reference, "{kernel:?} {len}");
            let ends: Vec<bool> = cells.iter().map(|c| c[3] & 0x02 != 0).collect();
            assert_eq!(ends.iter().filter(|&&e| e).count(), 1, "{kernel:?} {len}");
            assert!(ends[ends.len() - 1], "{kernel:?} {len}");
        }
    }
}

/// The one-call segmentation's masked loads read only the SDU: an SDU
/// that starts or ends at a page boundary next to a page that cannot be
/// read segments correctly at every length (a read outside it would
/// fault), on every kernel, through `segment_into` and through a
/// `Segmentation::fill` given more room than the PDU needs.
#[cfg(target_os = "linux")]
#[test]
fn segmentation_reads_nothing_outside_the_sdu() {
    const PAGE: usize = 4096;
    // SAFETY: an anonymous private mapping of three pages, its first and
    // last made unreadable; every slice made from it below lies in the
    // middle page, and the mapping is removed at the end.
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            3 * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(base, libc::MAP_FAILED);
        let base = base.cast::<u8>();
        assert_eq!(libc::mprotect(base.cast(), PAGE, libc::PROT_NONE), 0);
        assert_eq!(
            libc::mprotect(base.add(2 * PAGE).cast(), PAGE, libc::PROT_NONE),
            0
        );
        let page = std::slice::from_raw_parts_mut(base.add(PAGE), PAGE);
        for (i, b) in page.iter_mut().enumerate() {
            *b = (i * 31 + 7) as u8;
        }
        let page: &[u8] = page;
        for len in 0..=1200 {
            let mut reference = vec![0u8; aal5::cpcs_len(len)];
            for sdu in [&page[..len], &page[PAGE - len..]] {
                aal5::encode(sdu, 0, 0, &mut reference).unwrap();
                for kernel in Kernel::available() {
                    let mut tx = Aal5Tx::with_kernel(A, Format::Uni, kernel).unwrap();
                    let mut cells = vec![[0u8; 53]; aal5::cells_for(len)];
                    tx.segment_into(sdu, PduOptions::default(), &mut cells)
                        .unwrap();
                    let payloads: Vec<u8> = cells.iter().flat_map(|c| c[5..].to_vec()).collect();
                    assert_eq!(payloads, reference, "{kernel:?} {len}");
                    let mut roomy = vec![[0u8; 53]; aal5::cells_for(len) + 3];
                    let mut seg = tx.segment_slice(sdu, PduOptions::default()).unwrap();
                    assert_eq!(seg.fill(&mut roomy), cells.len());
                    assert!(seg.is_done());
                    assert_eq!(&roomy[..cells.len()], &cells[..], "{kernel:?} {len}");
                    assert!(roomy[cells.len()..].iter().all(|c| c == &[0u8; 53]));
                }
            }
        }
        assert_eq!(libc::munmap(base.cast(), 3 * PAGE), 0);
    }
}
