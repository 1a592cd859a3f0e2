//! Scenarios in virtual time for each synchronisation method: what skew,
//! loss and a dead stripe do, what is counted, and how soon the receiver is
//! back in step.

mod common;

use aurora_stripe::{
    CellFlags, Config, Destriper, Loss, Marker, Reject, Reordering, Striper, SyncMode, UnitKind,
};
use aurora_time::{Duration, Instant};
use common::{index_of, unit_bytes, vcs, Link, Sim, OC12_CELL, OC3_CELL};

fn config(unit: UnitKind, sync: SyncMode, n: usize) -> Config {
    let mut c = Config::new(unit, sync, vcs(n));
    c.marker_interval = 8;
    c.idle_marker = Duration::from_micros(20);
    c.quantum = 2048;
    c.limits.timeout = Duration::from_millis(3);
    c.limits.max_held_units = 16_384;
    c
}

fn links(delays_us: &[i64]) -> Vec<Link> {
    delays_us
        .iter()
        .map(|&d| Link {
            cell_time: OC3_CELL,
            delay: Duration::from_micros(d),
        })
        .collect()
}

fn sim(cfg: Config, delays_us: &[i64]) -> Sim {
    Sim::new(cfg.clone(), cfg, links(delays_us))
}

/// Sends `count` units of `len(i)` bytes, one every `gap`, then lets
/// everything settle.
fn stream(s: &mut Sim, count: u64, gap: Duration, len: impl Fn(u64) -> usize) {
    for i in 0..count {
        s.run_until(Instant::ZERO + Duration::from_nanos(gap.as_nanos() * i as i64));
        s.send(len(i));
    }
    s.drain();
}

/// A pace that loads `n` OC-3c stripes to about 80 % with `cells` cells per unit.
fn pace(n: usize, cells: usize) -> Duration {
    Duration::from_nanos(OC3_CELL.as_nanos() * cells as i64 * 5 / 4 / n as i64)
}

/// Every sent unit is delivered, given up or held.
fn assert_accounted(s: &Sim) {
    let st = s.rx.stats();
    assert_eq!(
        s.out.sent,
        st.delivered + st.discarded.total() + st.gaps.total() + s.rx.held() as u64,
        "sent = delivered + discarded {:?} + gaps {:?} + held",
        st.discarded,
        st.gaps
    );
    assert_eq!(st.delivered, s.out.delivered.len() as u64);
}

fn assert_in_order(s: &Sim) {
    assert!(
        s.out.delivered.windows(2).all(|w| w[0] < w[1]),
        "misordered or duplicated: {:?}",
        s.out.delivered
    );
    assert_eq!(s.out.corrupted, 0);
}

fn all(count: u64) -> Vec<u64> {
    (0..count).collect()
}

/// Drops the first data cell at or after local index `at` on `stripe`
/// (and, with `marker`, the first marker after `at` too).
fn drop_one(stripe: usize, at: u64, marker: bool) -> common::DropFn {
    let mut data_done = false;
    let mut marker_done = !marker;
    Box::new(move |s, k, is_marker, _| {
        if s != stripe || k < at {
            return false;
        }
        if is_marker && !marker_done {
            marker_done = true;
            return true;
        }
        if !is_marker && !data_done {
            data_done = true;
            return true;
        }
        false
    })
}

#[test]
fn every_method_restores_order_under_skew_without_loss() {
    for unit in [UnitKind::Cell, UnitKind::Pdu, UnitKind::IpPacket] {
        for sync in [SyncMode::None, SyncMode::Sequence, SyncMode::Marker] {
            let mut s = sim(config(unit, sync, 4), &[0, 300, 700, 1500]);
            let (len, cells): (Box<dyn Fn(u64) -> usize>, usize) = match unit {
                UnitKind::Cell => (Box::new(|_| s_cell_len(sync)), 1),
                _ => (Box::new(|i| 20 + (i as usize * 97) % 1400), 32),
            };
            stream(&mut s, 400, pace(4, cells), len);
            assert_eq!(s.out.delivered, all(400), "{unit:?} {sync:?}");
            assert_accounted(&s);
            let st = s.rx.stats();
            assert_eq!(
                (st.discarded.total(), st.gaps.total(), st.rejected.total()),
                (0, 0, 0)
            );
            assert_eq!(s.rx.held(), 0);
            // The skew made the receiver wait: about 1.5 ms for some units.
            assert!(st.delay.max() >= 1_400_000, "{:?}", st.delay);
        }
    }
}

fn s_cell_len(sync: SyncMode) -> usize {
    if sync == SyncMode::Sequence {
        46
    } else {
        48
    }
}

#[test]
fn no_sync_misorders_after_a_loss_and_the_metrics_show_it() {
    let mut s = sim(config(UnitKind::Cell, SyncMode::None, 4), &[0, 10, 20, 30]);
    s.drop = drop_one(1, 10, false);
    stream(&mut s, 400, pace(4, 1), |_| 48);
    assert_eq!(s.out.delivered.len(), 399);
    let mut r = Reordering::default();
    for &i in &s.out.delivered {
        r.observe(i);
    }
    // From the loss on, stripe 1's cell of round k+1 is taken in round k:
    // the two cells after it in each round arrive behind it.
    assert!(r.reordered_ratio() > 0.4, "{}", r.reordered_ratio());
    assert!(r.n_reordered(1) > 80, "{}", r.n_reordered(1));
    assert_eq!(r.n_reordered(2), 0);
    // Nothing arrived was given up: the misordering is delivered, not hidden.
    let st = s.rx.stats();
    assert_eq!((st.discarded.total(), st.gaps.total()), (0, 0));
    assert_eq!(st.delivered, 399);
}

#[test]
fn no_sync_passes_over_a_dead_stripe_after_the_timeout() {
    let mut s = sim(config(UnitKind::Cell, SyncMode::None, 3), &[0, 0, 0]);
    s.drop = Box::new(|stripe, k, _, _| stripe == 2 && k >= 5);
    stream(&mut s, 300, pace(3, 1), |_| 48);
    let st = s.rx.stats();
    assert_eq!(st.delivered, 300 - 95);
    assert!(st.skipped_turns > 0);
    assert_eq!(s.rx.held(), 0);
    // Without loss on the live stripes the order of what came is kept.
    assert_in_order(&s);
}

#[test]
fn sequence_loses_only_the_lost_cell() {
    let mut s = sim(
        config(UnitKind::Cell, SyncMode::Sequence, 4),
        &[0, 200, 400, 900],
    );
    s.drop = drop_one(2, 30, false);
    stream(&mut s, 500, pace(4, 1), |_| 46);
    assert_in_order(&s);
    assert_accounted(&s);
    let st = s.rx.stats();
    assert_eq!(st.delivered, 499);
    assert_eq!(st.gaps.get(Loss::Timeout), 1);
    assert_eq!(st.discarded.total(), 0);
    // Arrivals were misordered by the skew; the RFC 4737 counters saw it.
    assert!(st.arrival_order.reordered() > 100);
    assert_eq!(st.arrival_order.received(), 499);
}

#[test]
fn sequence_pdu_loss_costs_the_pdu_or_two_when_its_end_is_lost() {
    // A middle cell: that PDU fails AAL5 and is a gap.
    let mut s = sim(config(UnitKind::Pdu, SyncMode::Sequence, 2), &[0, 500]);
    s.drop = drop_one(0, 40, false);
    stream(&mut s, 100, pace(2, 3), |_| 100); // 3 cells each
    assert_in_order(&s);
    assert_accounted(&s);
    let st = s.rx.stats();
    assert_eq!((st.delivered, st.gaps.total()), (99, 1));
    assert_eq!(st.rejected.get(Reject::Reassembly), 1);

    // A last cell: AAL5 runs that PDU into the next on the stripe; both go.
    let mut s = sim(config(UnitKind::Pdu, SyncMode::Sequence, 2), &[0, 500]);
    s.drop = drop_one(0, 41, false); // stripe 0's cells 39..42 are one PDU
    stream(&mut s, 100, pace(2, 3), |_| 100);
    assert_in_order(&s);
    assert_accounted(&s);
    let st = s.rx.stats();
    assert_eq!((st.delivered, st.gaps.total()), (98, 2));
}

#[test]
fn sequence_numbers_wrap_around() {
    let mut c = config(UnitKind::Cell, SyncMode::Sequence, 2);
    c.limits.max_held_units = 1024;
    let mut s = Sim::new(
        c.clone(),
        c,
        vec![
            Link {
                cell_time: OC12_CELL,
                delay: Duration::ZERO,
            },
            Link {
                cell_time: OC12_CELL,
                delay: Duration::from_micros(50),
            },
        ],
    );
    let n = 70_000;
    stream(&mut s, n, Duration::from_nanos(500), |_| 46);
    assert_eq!(s.out.delivered, all(n));
    assert_accounted(&s);
}

#[test]
fn sequence_rejects_duplicates_and_stale_numbers() {
    let cfg = config(UnitKind::Cell, SyncMode::Sequence, 2);
    let mut tx = Striper::new(cfg.clone()).unwrap();
    let mut rx = Destriper::new(cfg).unwrap();
    let mut cells = Vec::new();
    for i in 0..3 {
        tx.push_cell(
            Instant::ZERO,
            &unit_bytes(UnitKind::Cell, i, 46),
            CellFlags::default(),
            &mut cells,
        )
        .unwrap();
    }
    let mut out = Vec::new();
    let t = Instant::ZERO;
    rx.push(t, cells[1].0, &cells[1].1, &mut out); // 1 held
    rx.push(t, cells[1].0, &cells[1].1, &mut out); // duplicate of a held unit
    assert!(out.is_empty());
    rx.push(t, cells[0].0, &cells[0].1, &mut out); // 0, then 1
    rx.push(t, cells[0].0, &cells[0].1, &mut out); // stale
    rx.push(t, cells[2].0, &cells[2].1, &mut out);
    let got: Vec<u64> = out.iter().map(|d| d.seq.unwrap()).collect();
    assert_eq!(got, [0, 1, 2]);
    assert_eq!(index_of(UnitKind::Cell, &out[2]), 2);
    let st = rx.stats();
    assert_eq!(st.rejected.get(Reject::Duplicate), 1);
    assert_eq!(st.rejected.get(Reject::Stale), 1);
    assert_eq!((st.arrived, st.delivered), (3, 3));
}

#[test]
fn sequence_full_buffer_gives_up_the_gap_early() {
    let mut c = config(UnitKind::Cell, SyncMode::Sequence, 2);
    c.limits.max_held_units = 8;
    c.limits.timeout = Duration::from_secs(1);
    let mut s = sim(c, &[0, 0]);
    s.drop = drop_one(0, 10, false);
    let max = 8;
    s.check = Some(Box::new(move |rx| assert!(rx.held() <= max)));
    stream(&mut s, 200, pace(2, 1), |_| 46);
    assert_in_order(&s);
    assert_accounted(&s);
    let st = s.rx.stats();
    assert_eq!(st.gaps.get(Loss::BufferFull), 1);
    assert_eq!(st.gaps.get(Loss::Timeout), 0);
    // The gap was passed when the ninth unit behind it came, not after a second.
    assert!(st.delay.max() < 100_000, "{:?}", st.delay);
}

/// Units sent on `stripe` after the marker that follows data cell `cell` there.
fn units_after_next_marker(s: &Sim, stripe: usize, first_lost: u64, k: u64) -> Vec<u64> {
    // Position of the lost unit among its stripe's units, then the next
    // multiple of K.
    let on: Vec<u64> = (0..s.out.sent)
        .filter(|&i| s.out.stripe_of[i as usize] == stripe)
        .collect();
    let pos = on.iter().position(|&i| i == first_lost).unwrap() as u64;
    let next_marker = (pos / k + 1) * k;
    on.into_iter().skip(next_marker as usize).collect()
}

#[test]
fn marker_lost_cell_costs_at_most_its_block_then_back_in_step() {
    for unit in [UnitKind::Cell, UnitKind::Pdu] {
        let c = config(unit, SyncMode::Marker, 4);
        let k = u64::from(c.marker_interval);
        let mut s = sim(c, &[0, 250, 500, 1000]);
        s.drop = drop_one(1, 45, false);
        let (len, cells): (fn(u64) -> usize, usize) = match unit {
            UnitKind::Cell => (|_| 48, 1),
            _ => (|i| 30 + (i as usize * 53) % 300, 4),
        };
        stream(&mut s, 600, pace(4, cells), len);
        assert_in_order(&s);
        assert_accounted(&s);
        let st = s.rx.stats();
        let lost = st.discarded.total() + st.gaps.total();
        assert!(lost >= 1 && lost <= k, "{unit:?}: lost {lost} > K = {k}");
        // One unit never arrived (two PDUs, if the lost cell ended one and
        // AAL5 ran it into the next); the rest of the block is unverified.
        let missing = st.gaps.get(Loss::Missing);
        assert!(
            missing == 1 || (unit == UnitKind::Pdu && missing == 2),
            "{unit:?} {missing}"
        );
        assert_eq!(st.discarded.get(Loss::Unverified), lost - missing);
        assert_eq!(st.per_stripe[1].resyncs, 1, "{unit:?} {st:?}");
        // Only stripe 1 lost anything, and only before the marker after the loss.
        let damaged = s.out.damaged[1][0];
        let got: std::collections::HashSet<u64> = s.out.delivered.iter().copied().collect();
        for i in 0..s.out.sent {
            if s.out.stripe_of[i as usize] != 1 {
                assert!(
                    got.contains(&i),
                    "{unit:?}: unit {i} of another stripe lost"
                );
            }
        }
        for i in units_after_next_marker(&s, 1, damaged, k) {
            assert!(got.contains(&i), "{unit:?}: unit {i} after the resync lost");
        }
    }
}

#[test]
fn marker_lost_marker_costs_nothing() {
    let mut s = sim(
        config(UnitKind::Cell, SyncMode::Marker, 4),
        &[0, 250, 500, 1000],
    );
    s.drop = Box::new({
        let mut n = 0;
        move |stripe, _, marker, _| {
            if stripe == 2 && marker {
                n += 1;
                return n == 3;
            }
            false
        }
    });
    stream(&mut s, 600, pace(4, 1), |_| 48);
    assert_eq!(s.out.lost_markers, 1);
    assert_eq!(s.out.delivered, all(600));
    assert_accounted(&s);
}

#[test]
fn marker_lost_cell_and_marker_together_cost_at_most_two_blocks() {
    let c = config(UnitKind::Cell, SyncMode::Marker, 4);
    let k = u64::from(c.marker_interval);
    let mut s = sim(c, &[0, 250, 500, 1000]);
    s.drop = drop_one(3, 60, true);
    stream(&mut s, 600, pace(4, 1), |_| 48);
    assert_eq!((s.out.lost_markers, s.out.lost_data_cells), (1, 1));
    assert_in_order(&s);
    assert_accounted(&s);
    let st = s.rx.stats();
    let lost = st.discarded.total() + st.gaps.total();
    assert!(lost > k && lost <= 2 * k, "lost {lost}");
}

#[test]
fn marker_bad_marker_is_rejected_and_costs_nothing() {
    let cfg = config(UnitKind::Cell, SyncMode::Marker, 2);
    let mut tx = Striper::new(cfg.clone()).unwrap();
    let mut rx = Destriper::new(cfg).unwrap();
    let mut cells = Vec::new();
    for i in 0..40 {
        tx.push_cell(
            Instant::ZERO,
            &unit_bytes(UnitKind::Cell, i, 48),
            CellFlags::default(),
            &mut cells,
        )
        .unwrap();
    }
    tx.flush_markers(&mut cells);
    let mut out = Vec::new();
    let mut spoilt = 0;
    for (s, mut cell) in cells {
        if Marker::is_marker_cell(&cell) && spoilt < 2 {
            // One with a bad CRC, one naming the wrong stripe.
            if spoilt == 0 {
                cell[20] ^= 0x40;
            } else {
                let mut m = Marker::parse(&cell[5..].try_into().unwrap()).unwrap();
                m.stripe ^= 1;
                cell[5..].copy_from_slice(&m.emit());
            }
            spoilt += 1;
        }
        rx.push(Instant::ZERO, s, &cell, &mut out);
    }
    let got: Vec<u64> = out.iter().map(|d| index_of(UnitKind::Cell, d)).collect();
    assert_eq!(got, all(40));
    assert_eq!(rx.stats().rejected.get(Reject::BadMarker), 2);
}

#[test]
fn marker_dead_stripe_times_out_and_rejoins() {
    let mut c = config(UnitKind::Cell, SyncMode::Marker, 3);
    c.limits.timeout = Duration::from_micros(500);
    let mut s = sim(c, &[0, 100, 200]);
    // Stripe 1 is down from 1 ms to 3 ms.
    s.drop = Box::new(|stripe, _, _, t| {
        stripe == 1 && t >= Instant::from_millis(1) && t < Instant::from_millis(3)
    });
    stream(&mut s, 3000, pace(3, 1), |_| 48);
    assert_in_order(&s);
    assert_accounted(&s);
    let st = s.rx.stats();
    assert!(st.discarded.get(Loss::Timeout) + st.gaps.get(Loss::Missing) > 0);
    assert_eq!(st.per_stripe[1].resyncs, 1);
    // After the outage every unit of stripe 1 is delivered again.
    let got: std::collections::HashSet<u64> = s.out.delivered.iter().copied().collect();
    let late: Vec<u64> = (0..s.out.sent)
        .filter(|&i| s.out.stripe_of[i as usize] == 1 && !got.contains(&i))
        .collect();
    let last_lost = *late.last().unwrap();
    // Units lost on stripe 1 lie within the outage plus one block and the timeout.
    let per_ms = 3000.0 / (3000.0 * pace(3, 1).as_nanos() as f64 / 1e6);
    assert!((last_lost as f64) < per_ms * 3.7, "last lost {last_lost}");
    // Other stripes lost nothing.
    for i in 0..s.out.sent {
        if s.out.stripe_of[i as usize] != 1 {
            assert!(got.contains(&i), "unit {i}");
        }
    }
}

#[test]
fn skew_beyond_the_bound_is_counted_not_misordered() {
    for sync in [SyncMode::Sequence, SyncMode::Marker] {
        let mut c = config(UnitKind::Cell, sync, 2);
        c.limits.timeout = Duration::from_micros(300);
        let mut s = sim(c, &[0, 2000]);
        stream(&mut s, 2000, pace(2, 1), |_| s_cell_len(sync));
        assert_in_order(&s);
        assert_accounted(&s);
        let st = s.rx.stats();
        assert!(
            st.delivered < 2000 && st.delivered > 900,
            "{sync:?} {}",
            st.delivered
        );
        assert!(
            st.delay.max() <= 300_000 + 20_000,
            "{sync:?} {:?}",
            st.delay
        );
    }
}

#[test]
fn resequencing_delay_and_occupancy_follow_the_skew() {
    let mut s = sim(config(UnitKind::Cell, SyncMode::Sequence, 2), &[0, 1000]);
    let gap = Duration::from_micros(5);
    stream(&mut s, 2000, gap, |_| 46);
    assert_eq!(s.out.delivered, all(2000));
    let st = s.rx.stats();
    // Stripe 0's units (half of them) wait for stripe 1's, 1 ms behind;
    // stripe 1's go straight through.
    let p75 = st.delay.quantile(0.75) as f64;
    assert!((p75 - 1.0e6).abs() < 0.05e6, "{:?}", st.delay);
    assert_eq!(st.delay.quantile(0.25), 0);
    assert!(st.delay.max() <= 1_000_000);
    // Stripe 0 brings one unit per 10 µs: about 100 wait at a time.
    assert!(
        (95..=110).contains(&st.occupancy.max()),
        "{}",
        st.occupancy.max()
    );
    let mean = st.occupancy.mean(s.now);
    assert!(mean > 50.0 && mean < 110.0, "{mean}");
}
