//! AAL3/4 engine tests: round trips over interleaved MIDs and accounting
//! under channel damage.

mod common;

use aurora_sar::aal34::{Aal34Config, Aal34Rx, Aal34Tx, Aal34VcConfig};
use aurora_sar::crc10::Kernel;
use aurora_sar::DropReason;
use aurora_time::{Duration, Instant};
use aurora_wire::aal34;
use aurora_wire::cell::{Format, VcId};
use aurora_wire::CellBytes;
use common::{impair, match_allowing_replays, Impairments, Rng};
use proptest::prelude::*;

const A: VcId = VcId::new(0, 300);
const B: VcId = VcId::new(0, 301);
const FAR: Instant = Instant::from_millis(1_000_000);
/// The largest SDU that fits a single-segment message.
const SSM_MAX: usize = 36;

fn segment(tx: &mut Aal34Tx, sdu: &[u8], mid: u16) -> Vec<CellBytes> {
    let mut cells = vec![[0u8; 53]; aal34::cells_for(sdu.len())];
    assert_eq!(tx.segment_into(sdu, mid, &mut cells).unwrap(), cells.len());
    cells
}

fn rx(vcs: &[VcId]) -> Aal34Rx {
    let mut rx = Aal34Rx::new(Aal34Config {
        memory_budget: 16 << 20,
        ..Aal34Config::default()
    });
    for &vc in vcs {
        rx.open_vc(vc, Aal34VcConfig::default()).unwrap();
    }
    rx
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn any_sdu_round_trips(len in prop_oneof![0usize..100, 0usize..=65535, 65500usize..=65535], seed: u64, mid in 0u16..1024) {
        let mut rng = Rng::new(seed);
        let sdu = rng.bytes(len);
        let mut tx = Aal34Tx::new(A, Format::Uni).unwrap();
        let cells = segment(&mut tx, &sdu, mid);
        let mut r = rx(&[A]);
        let mut got = Vec::new();
        r.push(Instant::ZERO, &cells, &mut |d| got.push((d.mid, d.into_sdu())));
        prop_assert_eq!(got, vec![(mid, sdu)]);
        prop_assert_eq!(r.stats().cells_balance(), 0);
        prop_assert_eq!(r.memory_in_use(), 0);
    }

    /// Two MIDs interleaved on A, one MID on B, through a damaging channel.
    #[test]
    fn damage_is_never_delivered_and_every_cell_is_counted(
        seed: u64,
        loss in 0.0..0.05f64,
        bit_error in 0.0..0.05f64,
        duplicate in 0.0..0.03f64,
        reorder in 0.0..0.03f64,
        misinsert in 0.0..0.03f64,
    ) {
        let mut rng = Rng::new(seed);
        let mut txa = Aal34Tx::new(A, Format::Uni).unwrap();
        let mut txb = Aal34Tx::new(B, Format::Uni).unwrap();
        let mk = |rng: &mut Rng| -> Vec<Vec<u8>> { (0..20).map(|_| { let n = rng.below(1500); rng.bytes(n) }).collect() };
        let (sent1, sent2, sent_b) = (mk(&mut rng), mk(&mut rng), mk(&mut rng));
        let c1: Vec<CellBytes> = sent1.iter().flat_map(|s| segment(&mut txa, s, 1)).collect();
        let c2: Vec<CellBytes> = sent2.iter().flat_map(|s| segment(&mut txa, s, 2)).collect();
        let cb: Vec<CellBytes> = sent_b.iter().flat_map(|s| segment(&mut txb, s, 3)).collect();
        let mut wire = Vec::new();
        let (mut i1, mut i2, mut ib) = (0, 0, 0);
        while i1 < c1.len() || i2 < c2.len() || ib < cb.len() {
            match rng.below(3) {
                0 if i1 < c1.len() => { wire.push(c1[i1]); i1 += 1 }
                1 if i2 < c2.len() => { wire.push(c2[i2]); i2 += 1 }
                _ if ib < cb.len() => { wire.push(cb[ib]); ib += 1 }
                _ => {}
            }
        }
        let imp = Impairments { loss, bit_error, payload_only: false, duplicate, reorder, misinsert };
        let (arrived, trace) = impair(&wire, imp, &mut rng, &cb, A);
        let mut r = rx(&[A, B]);
        let (mut g1, mut g2, mut gb, mut stray) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for chunk in arrived.chunks(1 + rng.below(50)) {
            r.push(Instant::ZERO, chunk, &mut |d| match (d.vc, d.mid) {
                (A, 1) => g1.push(d.into_sdu()),
                (A, 2) => g2.push(d.into_sdu()),
                (B, 3) => gb.push(d.into_sdu()),
                _ => stray.push(d.into_sdu()),
            });
        }
        r.handle_timeout(FAR);
        // Duplicated single-segment messages are valid twice; whole PDUs of B
        // misinserted into A arrive on A with B's MID. Both were sent.
        let replay = if duplicate > 0.0 || reorder > 0.0 { SSM_MAX } else { 0 };
        match_allowing_replays(&sent1, &g1, replay);
        match_allowing_replays(&sent2, &g2, replay);
        match_allowing_replays(&sent_b, &gb, replay);
        for s in &stray {
            prop_assert!(sent_b.contains(s), "a stray delivery was never sent");
        }
        let st = r.stats();
        prop_assert_eq!(st.cells_in, trace.counts.delivered);
        prop_assert_eq!(r.cells_in_progress(), 0);
        prop_assert_eq!(r.reassemblies(), 0);
        prop_assert_eq!(st.cells_balance(), 0, "{:?}", st);
        prop_assert_eq!(r.memory_in_use(), 0);
        let (ca, cb) = (r.vc_counters(A).unwrap(), r.vc_counters(B).unwrap());
        prop_assert_eq!(ca.rx + cb.rx, st.pdus_delivered);
        prop_assert_eq!(ca.rx_err + ca.rx_drop + cb.rx_err + cb.rx_drop, st.pdus_dropped.total());
    }

    /// Every CRC-10 kernel segments to the same bytes, and the receiver
    /// comes to the same deliveries, counts and state whether cells arrive
    /// one at a time (the per-cell path only) or in batches (runs of
    /// continuations taken in the tight loop), with either kernel: through
    /// a damaging channel, with timers running out inside batches, small
    /// memory budgets and small SDU limits.
    #[test]
    fn batches_and_kernels_change_nothing(
        seed: u64,
        loss in 0.0..0.02f64,
        bit_error in 0.0..0.02f64,
        duplicate in 0.0..0.02f64,
        reorder in 0.0..0.02f64,
        misinsert in 0.0..0.02f64,
        timeout_ms in 0i64..6,
        budget in prop_oneof![Just(16usize << 20), 2000usize..20000],
        max_sdu in prop_oneof![Just(aal34::MAX_SDU), 0usize..3000],
    ) {
        let mut rng = Rng::new(seed);
        let mut wire_by_kernel = Vec::new();
        let mk = |rng: &mut Rng| -> Vec<Vec<u8>> { (0..12).map(|_| { let n = rng.below(3000); rng.bytes(n) }).collect() };
        let (sent1, sent2, sent_b) = (mk(&mut rng), mk(&mut rng), mk(&mut rng));
        let order: Vec<usize> = (0..3000).map(|_| rng.below(3)).collect();
        for k in Kernel::available() {
            let mut txa = Aal34Tx::with_kernel(A, Format::Uni, k).unwrap();
            let mut txb = Aal34Tx::with_kernel(B, Format::Uni, k).unwrap();
            prop_assert_eq!(txa.kernel(), k);
            let c1: Vec<CellBytes> = sent1.iter().flat_map(|s| segment(&mut txa, s, 1)).collect();
            let c2: Vec<CellBytes> = sent2.iter().flat_map(|s| segment(&mut txa, s, 2)).collect();
            let cb: Vec<CellBytes> = sent_b.iter().flat_map(|s| segment(&mut txb, s, 3)).collect();
            // Runs of each stream interleaved at random.
            let mut wire = Vec::new();
            let (mut i1, mut i2, mut ib) = (0, 0, 0);
            let mut o = order.iter().cycle();
            while i1 < c1.len() || i2 < c2.len() || ib < cb.len() {
                let take = 1 + o.next().unwrap() * 40;
                match o.next().unwrap() {
                    0 => { let e = (i1 + take).min(c1.len()); wire.extend_from_slice(&c1[i1..e]); i1 = e }
                    1 => { let e = (i2 + take).min(c2.len()); wire.extend_from_slice(&c2[i2..e]); i2 = e }
                    _ => { let e = (ib + take).min(cb.len()); wire.extend_from_slice(&cb[ib..e]); ib = e }
                }
            }
            wire_by_kernel.push((wire, cb));
        }
        for w in &wire_by_kernel[1..] {
            prop_assert!(w.0 == wire_by_kernel[0].0, "kernels segment differently");
        }
        let (wire, cb) = &wire_by_kernel[0];
        let imp = Impairments { loss, bit_error, payload_only: false, duplicate, reorder, misinsert };
        let (arrived, _) = impair(wire, imp, &mut rng, cb, A);
        let mut chunks = Vec::new();
        let mut at = 0;
        while at < arrived.len() {
            let n = (1 + rng.below(80)).min(arrived.len() - at);
            chunks.push(at..at + n);
            at += n;
        }
        let cfg = Aal34Config { memory_budget: budget, ..Aal34Config::default() };
        let vcfg = Aal34VcConfig { max_sdu, timeout: Duration::from_millis(timeout_ms) };
        let run = |k: Kernel, singly: bool| {
            let mut r = Aal34Rx::with_kernel(cfg, k);
            r.open_vc(A, vcfg).unwrap();
            r.open_vc(B, vcfg).unwrap();
            let mut got = Vec::new();
            for (t, c) in chunks.iter().enumerate() {
                let now = Instant::from_millis(t as i64);
                if singly {
                    for cell in &arrived[c.clone()] {
                        r.push(now, std::slice::from_ref(cell), &mut |d| got.push((d.vc, d.mid, d.into_sdu())));
                    }
                } else {
                    r.push(now, &arrived[c.clone()], &mut |d| got.push((d.vc, d.mid, d.into_sdu())));
                }
                if t % 7 == 0 {
                    r.handle_timeout(now);
                }
            }
            let state = (r.stats(), r.vc_counters(A), r.vc_counters(B), r.memory_in_use(), r.reassemblies(), r.cells_in_progress(), r.poll_at());
            r.handle_timeout(FAR);
            (got, state, r.stats())
        };
        let reference = run(Kernel::Portable, true);
        prop_assert_eq!(reference.2.cells_balance(), 0);
        for k in Kernel::available() {
            for singly in [false, true] {
                let other = run(k, singly);
                prop_assert!(other == reference, "{:?} singly={}", k, singly);
            }
        }
    }

    /// Payload bit errors only: every PDU is delivered or dropped, exactly once.
    #[test]
    fn payload_errors_add_up_per_pdu(seed: u64, ber in 0.0..0.1f64) {
        let mut rng = Rng::new(seed);
        let mut tx = Aal34Tx::new(A, Format::Uni).unwrap();
        let sent: Vec<Vec<u8>> = (0..30).map(|_| { let n = rng.below(2000); rng.bytes(n) }).collect();
        let wire: Vec<CellBytes> = sent.iter().flat_map(|s| segment(&mut tx, s, 5)).collect();
        let imp = Impairments { bit_error: ber, payload_only: true, ..Default::default() };
        let (arrived, _) = impair(&wire, imp, &mut rng, &[], A);
        let mut r = rx(&[A]);
        let mut got = Vec::new();
        r.push(Instant::ZERO, &arrived, &mut |d| got.push(d.into_sdu()));
        r.handle_timeout(FAR);
        common::match_in_order(&sent, &got);
        let st = r.stats();
        // A PDU whose BOM was lost to a CRC-10 error leaves orphan COM/EOM
        // cells: those are cell drops, and the PDU is counted once via them
        // unless its BOM survived.
        prop_assert!(st.pdus_delivered + st.pdus_dropped.total() <= sent.len() as u64);
        prop_assert_eq!(st.cells_balance(), 0);
        let lost_bom = st.cells_dropped.get(DropReason::CellCrc);
        prop_assert!(sent.len() as u64 - st.pdus_delivered - st.pdus_dropped.total() <= lost_bom);
    }
}

#[test]
fn sequence_gap_tag_mismatch_and_limits_are_named() {
    let mut tx = Aal34Tx::new(A, Format::Uni).unwrap();
    let mut r = rx(&[A]);
    // Drop a COM from the middle: the SN gap is caught.
    let mut cells = segment(&mut tx, &[1u8; 200], 7);
    cells.remove(2);
    r.push(Instant::ZERO, &cells, &mut |_| panic!("gap"));
    assert_eq!(r.stats().pdus_dropped.get(DropReason::Sequence), 1);
    // Duplicate a COM: also a sequence error.
    let mut cells = segment(&mut tx, &[1u8; 200], 7);
    cells.insert(2, cells[2]);
    r.push(Instant::ZERO, &cells, &mut |_| panic!("dup"));
    assert_eq!(r.stats().pdus_dropped.get(DropReason::Sequence), 2);
    // The EOM of one PDU spliced to the BOM of another: the tags differ.
    let first = segment(&mut tx, &[2u8; 60], 7);
    let second = segment(&mut tx, &[2u8; 60], 7);
    let mut spliced = vec![first[0]];
    // Keep the SN sequence right so only the tags disagree.
    let mut eom = second[1];
    let sn = 1 + ((first[0][5] >> 2) & 0xF);
    eom[5] = (eom[5] & 0xC3) | ((sn & 0xF) << 2);
    let mut p: [u8; 48] = eom[5..].try_into().unwrap();
    aurora_wire::crc::set_crc10_field(&mut p);
    eom[5..].copy_from_slice(&p);
    spliced.push(eom);
    r.push(Instant::ZERO, &spliced, &mut |_| panic!("spliced"));
    assert_eq!(r.stats().pdus_dropped.get(DropReason::TagMismatch), 1);
    // Orphan COM/EOM cells are cell drops.
    r.push(Instant::ZERO, &second[1..], &mut |_| panic!("orphan"));
    assert_eq!(
        r.stats().cells_dropped.get(DropReason::UnexpectedSegment),
        1
    );
    assert_eq!(r.stats().cells_balance(), 0);
}

#[test]
fn simultaneous_reassemblies_are_limited_and_timers_clear_them() {
    let mut tx = Aal34Tx::new(A, Format::Uni).unwrap();
    let mut r = Aal34Rx::new(Aal34Config {
        max_reassemblies: 4,
        ..Aal34Config::default()
    });
    r.open_vc(
        A,
        Aal34VcConfig {
            timeout: Duration::from_millis(5),
            ..Aal34VcConfig::default()
        },
    )
    .unwrap();
    for mid in 0..6 {
        let cells = segment(&mut tx, &[mid as u8; 100], mid);
        r.push(Instant::ZERO, &cells[..1], &mut |_| panic!("incomplete"));
    }
    assert_eq!(r.reassemblies(), 4);
    assert_eq!(
        r.stats().pdus_dropped.get(DropReason::TooManyReassemblies),
        2
    );
    assert_eq!(r.poll_at(), Some(Instant::from_millis(5)));
    r.handle_timeout(Instant::from_millis(5));
    assert_eq!(r.reassemblies(), 0);
    assert_eq!(r.stats().pdus_dropped.get(DropReason::Timeout), 4);
    assert_eq!(r.memory_in_use(), 0);
    assert_eq!(r.stats().cells_balance(), 0);
    // Flushing a datagram and a VC.
    let cells = segment(&mut tx, &[9u8; 100], 9);
    r.push(Instant::from_millis(6), &cells[..2], &mut |_| {});
    r.flush_mid(A, 9);
    assert_eq!(r.stats().pdus_dropped.get(DropReason::Flushed), 1);
    assert_eq!(r.stats().cells_balance(), 0);
}

#[test]
fn sender_checks_its_fields() {
    let mut tx = Aal34Tx::new(A, Format::Uni).unwrap();
    let mut cells = vec![[0u8; 53]; 4];
    assert!(tx.segment_into(&[0; 10], 1024, &mut cells).is_err());
    assert!(tx.segment_into(&[0; 1000], 1, &mut cells).is_err());
    assert!(tx.segment_into(&vec![0; 65536], 1, &mut cells).is_err());
    assert_eq!(tx.counters().tx_err, 3);
}

/// Every kernel's cells are byte for byte those of the definition: the
/// CPCS-PDU cut into 44-byte pieces, each written by `SarRepr::emit` (whose
/// CRC-10 the wire crate checks against the bitwise definition).
#[test]
fn segmentation_matches_the_definition_byte_for_byte() {
    use aurora_wire::aal34::{CpcsHeader, CpcsTrailer, SarRepr, SegmentType};
    let mut rng = Rng::new(7);
    let sizes: Vec<usize> = (0..400)
        .chain([1500, 9180, 9181, 9182, 9183, 65532, 65535])
        .collect();
    for k in Kernel::available() {
        let mut tx = Aal34Tx::with_kernel(A, Format::Uni, k).unwrap();
        for (n, &size) in sizes.iter().enumerate() {
            let sdu = rng.bytes(size);
            let mid = (n * 37 % 1024) as u16;
            // The sender's Btag and per-MID SN before this PDU.
            let btag = (n + 1) as u8;
            let sn0 = 0usize;
            let cells = segment(&mut tx, &sdu, mid);
            let mut pdu = CpcsHeader {
                cpi: 0,
                btag,
                basize: size as u16,
            }
            .to_bytes()
            .to_vec();
            pdu.extend_from_slice(&sdu);
            pdu.resize(aal34::cpcs_len(size) - 4, 0);
            pdu.extend_from_slice(
                &CpcsTrailer {
                    al: 0,
                    etag: btag,
                    length: size as u16,
                }
                .to_bytes(),
            );
            let pieces: Vec<&[u8]> = pdu.chunks(44).collect();
            assert_eq!(cells.len(), pieces.len());
            let header = aurora_wire::cell::Header::data(A);
            let mut want_header = [0u8; 53];
            header.emit(&mut want_header).unwrap();
            for (i, (cell, piece)) in cells.iter().zip(&pieces).enumerate() {
                let st = match (i == 0, i + 1 == pieces.len()) {
                    (true, true) => SegmentType::Ssm,
                    (true, false) => SegmentType::Bom,
                    (false, false) => SegmentType::Com,
                    (false, true) => SegmentType::Eom,
                };
                let mut want = [0u8; 48];
                SarRepr {
                    st,
                    sn: ((sn0 + i) & 15) as u8,
                    mid,
                    li: piece.len() as u8,
                }
                .emit(piece, &mut want)
                .unwrap();
                assert_eq!(&cell[..5], &want_header[..5], "{k:?} {size} cell {i}");
                assert_eq!(&cell[5..], &want[..], "{k:?} {size} cell {i}");
            }
            // Each MID is used once per kernel here, so its SN starts at 0;
            // MIDs repeat only after 1024 PDUs.
            assert!(sizes.len() < 1024);
        }
    }
}
