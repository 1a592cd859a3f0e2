//! Properties over random stripe counts, rates, skews, loss patterns, unit
//! sizes, quanta, marker intervals and buffer limits, each run through the
//! virtual-time loop in `common` (Striper → links → Destriper):
//!
//! * with sequence or marker sync the delivered stream is an in-order
//!   subsequence of the sent one (never misordered, never duplicated) and
//!   every delivered unit is intact, whatever the loss, skew or limits;
//! * the receiver's arrival ledger balances after every event, and its
//!   buffer never exceeds its limits;
//! * once everything has settled (the traffic is followed by lossless idle
//!   markers, a quiet spell and one last unit), every sent unit is
//!   delivered or given up under a named reason:
//!   `sent = delivered + discarded + gaps`, and that last unit is delivered:
//!   the receiver is back in step;
//! * without sync, what arrived is all delivered, intact, in some order;
//! * without loss and with skew within the configured bound (the timeout
//!   covers the skew, the queueing and the wait for a marker), every unit is
//!   delivered in order, whatever the method, and nothing is given up.

mod common;

use aurora_stripe::{Config, SyncMode, UnitKind};
use aurora_time::{Duration, Instant};
use common::{vcs, Link, Rng, Sim, OC12_CELL, OC3_CELL};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Scenario {
    unit: UnitKind,
    sync: SyncMode,
    /// (OC-12c rather than OC-3c, delay in µs) per stripe.
    links: Vec<(bool, i64)>,
    units: u64,
    k: u32,
    quantum: u32,
    /// Probability that a data cell, or a marker, is lost.
    cell_loss: f64,
    marker_loss: f64,
    /// Receiver limits: units (None = large), timeout in µs (None = derived
    /// from the skew bound).
    max_units: Option<usize>,
    timeout_us: Option<i64>,
    seed: u64,
}

fn unit_kind() -> impl Strategy<Value = UnitKind> {
    prop_oneof![
        Just(UnitKind::Cell),
        Just(UnitKind::Pdu),
        Just(UnitKind::IpPacket)
    ]
}

fn sync_mode() -> impl Strategy<Value = SyncMode> {
    prop_oneof![
        Just(SyncMode::None),
        Just(SyncMode::Sequence),
        Just(SyncMode::Marker)
    ]
}

fn scenario(lossy: bool) -> impl Strategy<Value = Scenario> {
    let loss = if lossy {
        prop_oneof![Just(0.0), Just(0.002), Just(0.01), Just(0.05)].boxed()
    } else {
        Just(0.0).boxed()
    };
    let mloss = if lossy {
        prop_oneof![Just(0.0), Just(0.05), Just(0.3)].boxed()
    } else {
        Just(0.0).boxed()
    };
    let limits = if lossy {
        (
            prop_oneof![3 => Just(None), 1 => (4usize..64).prop_map(Some)],
            prop_oneof![1 => Just(None), 1 => (61i64..3000).prop_map(Some)],
        )
            .boxed()
    } else {
        (Just(None), Just(None)).boxed()
    };
    (
        unit_kind(),
        sync_mode(),
        prop::collection::vec((any::<bool>(), 0i64..=2000), 1..=6),
        20u64..250,
        1u32..=16,
        prop_oneof![Just(48u32), 48u32..=4096],
        loss,
        mloss,
        limits,
        any::<u64>(),
    )
        .prop_map(
            |(unit, sync, links, units, k, quantum, cell_loss, marker_loss, (mu, to), seed)| {
                Scenario {
                    unit,
                    sync,
                    links,
                    units,
                    k,
                    quantum,
                    cell_loss,
                    marker_loss,
                    max_units: mu,
                    timeout_us: to,
                    seed,
                }
            },
        )
}

const MAX_LEN: usize = 1500;

fn len_of(unit: UnitKind, sync: SyncMode, rng: &mut Rng) -> usize {
    match unit {
        UnitKind::Cell if sync == SyncMode::Sequence => 46,
        UnitKind::Cell => 48,
        UnitKind::Pdu => 4 + rng.below(MAX_LEN as u64 - 3) as usize,
        UnitKind::IpPacket => 20 + rng.below(MAX_LEN as u64 - 19) as usize,
    }
}

struct Run {
    sim: Sim,
    max_units: usize,
    max_bytes: usize,
}

fn run(sc: &Scenario) -> Run {
    let n = sc.links.len();
    let links: Vec<Link> = sc
        .links
        .iter()
        .map(|&(fast, d)| Link {
            cell_time: if fast { OC12_CELL } else { OC3_CELL },
            delay: Duration::from_micros(d),
        })
        .collect();
    let slowest = links.iter().map(|l| l.cell_time).max().unwrap();
    let max_delay = links.iter().map(|l| l.delay).max().unwrap();
    let min_delay = links.iter().map(|l| l.delay).min().unwrap();
    let skew = max_delay - min_delay;

    let mut cfg = Config::new(sc.unit, sc.sync, vcs(n));
    cfg.quantum = sc.quantum;
    cfg.marker_interval = sc.k;
    cfg.idle_marker = Duration::from_micros(30);
    cfg.max_sdu = MAX_LEN;
    cfg.limits.reassembly_timeout = Duration::from_millis(1);
    cfg.limits.max_held_units = sc.max_units.unwrap_or(16_384);

    // Pace: about half the slowest stripe's rate, markers included.
    let unit_cells = |len: usize| match sc.unit {
        UnitKind::Cell => 1,
        _ => aurora_wire::aal5::cells_for(len),
    };
    let gap_for = |cells: usize| {
        let ns = slowest.as_nanos() as f64 * cells as f64 * (1.0 + 1.0 / f64::from(sc.k)) * 2.0
            / n as f64;
        Duration::from_nanos(ns as i64)
    };
    // The skew bound this configuration promises: the timeout must cover
    // the skew, a stripe's queue (a round's burst of up to quantum + two
    // units), the wait for the marker K units on, and the idle marker.
    let max_cells = unit_cells(MAX_LEN + 4);
    let queue = Duration::from_nanos(
        slowest.as_nanos() * ((i64::from(sc.quantum) / 48) + 2 * max_cells as i64 + 2) * 4,
    );
    let marker_wait =
        Duration::from_nanos(2 * i64::from(sc.k) * n as i64 * gap_for(max_cells).as_nanos());
    let bound =
        skew + queue + marker_wait + cfg.idle_marker + cfg.idle_marker + Duration::from_micros(500);
    cfg.limits.timeout = match sc.timeout_us {
        Some(us) => Duration::from_micros(us),
        None => bound,
    };

    let max_units = cfg.limits.max_held_units;
    let max_bytes = cfg.limits.max_held_bytes;
    let mut sim = Sim::new(cfg.clone(), cfg, links);
    let mut loss_rng = Rng::new(sc.seed ^ 0x5EED);
    let (cl, ml) = (sc.cell_loss, sc.marker_loss);
    sim.drop = Box::new(move |_, _, marker, _| loss_rng.chance(if marker { ml } else { cl }));
    sim.check = Some(Box::new(move |rx| {
        assert!(rx.held() <= max_units, "held {} units", rx.held());
        assert!(
            rx.held_bytes() <= max_bytes,
            "held {} bytes",
            rx.held_bytes()
        );
    }));

    let mut rng = Rng::new(sc.seed);
    let mut t = Instant::ZERO;
    for _ in 0..sc.units {
        sim.run_until(t);
        let len = len_of(sc.unit, sc.sync, &mut rng);
        sim.send(len);
        t += gap_for(unit_cells(len));
        if rng.chance(0.03) {
            t += Duration::from_micros(rng.below(300) as i64);
        }
    }
    // From here on nothing is lost: the idle markers after the traffic put
    // every stripe back in step. Then a quiet spell (partial PDUs time
    // out), and one last unit.
    sim.lossless_from = sim.now + Duration::from_nanos(1);
    t += max_delay + Duration::from_millis(3);
    sim.run_until(t);
    let len = len_of(sc.unit, sc.sync, &mut rng);
    sim.send(len);
    sim.drain();
    Run {
        sim,
        max_units,
        max_bytes,
    }
}

fn check_common(sc: &Scenario, r: &Run) -> Result<(), TestCaseError> {
    let s = &r.sim;
    let st = s.rx.stats();
    prop_assert_eq!(s.out.corrupted, 0, "damaged data delivered");
    prop_assert_eq!(s.rx.held(), 0, "units left held");
    prop_assert!(st.occupancy.max() as usize <= r.max_units);
    prop_assert!(st.max_held_bytes <= r.max_bytes);
    prop_assert_eq!(st.delivered, s.out.delivered.len() as u64);
    match sc.sync {
        SyncMode::None => {
            // Every arrival delivered, each once.
            let mut seen = s.out.delivered.clone();
            seen.sort_unstable();
            seen.dedup();
            prop_assert_eq!(seen.len(), s.out.delivered.len(), "duplicated");
            prop_assert_eq!(st.arrived, st.delivered);
            prop_assert_eq!(st.discarded.total() + st.gaps.total(), 0);
            if sc.unit == UnitKind::Cell {
                prop_assert_eq!(st.arrived, s.out.sent - s.out.lost_data_cells);
            }
        }
        _ => {
            prop_assert!(
                s.out.delivered.windows(2).all(|w| w[0] < w[1]),
                "misordered or duplicated: {:?}",
                s.out.delivered
            );
            prop_assert_eq!(
                s.out.sent,
                st.delivered + st.discarded.total() + st.gaps.total(),
                "sent = delivered + discarded {:?} + gaps {:?}",
                st.discarded,
                st.gaps
            );
            // Once the stripes are back in step, a unit always comes through.
            prop_assert_eq!(
                s.out.delivered.last().copied(),
                Some(s.out.sent - 1),
                "{:?}",
                st
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn striping_under_skew_loss_and_limits(sc in scenario(true)) {
        let r = run(&sc);
        check_common(&sc, &r)?;
        let s = &r.sim;
        let st = s.rx.stats();
        // Without loss, with the derived timeout and a large buffer, nothing is given up.
        if s.out.lost_data_cells + s.out.lost_markers == 0 && sc.max_units.is_none() && sc.timeout_us.is_none() {
            prop_assert_eq!(st.delivered, s.out.sent);
        }
        // Within the bound (derived timeout, large buffer) every unit given
        // up is explained by a lost cell: with sequence numbers the cell's
        // own unit (two PDUs if it ended one: AAL5 runs it into the next);
        // with markers and no marker lost, at most the K units of its block.
        let bounded = sc.max_units.is_none() && sc.timeout_us.is_none();
        let lost = st.discarded.total() + st.gaps.total();
        let cells = s.out.lost_data_cells;
        if bounded && sc.sync == SyncMode::Sequence {
            if sc.unit == UnitKind::Cell {
                prop_assert_eq!(st.gaps.total(), cells);
                prop_assert_eq!(st.discarded.total(), 0);
            } else {
                prop_assert!(lost <= 2 * cells, "lost {} units for {} cells", lost, cells);
            }
        }
        if bounded && sc.sync == SyncMode::Marker && s.out.lost_markers == 0 {
            let k = u64::from(sc.k);
            prop_assert!(lost <= k * cells, "lost {} units for {} cells (K = {})", lost, cells, k);
        }
    }

    #[test]
    fn no_loss_within_the_skew_bound_delivers_everything_in_order(sc in scenario(false)) {
        let r = run(&sc);
        check_common(&sc, &r)?;
        let s = &r.sim;
        let st = s.rx.stats();
        prop_assert_eq!(&s.out.delivered, &(0..s.out.sent).collect::<Vec<_>>());
        prop_assert_eq!(st.discarded.total() + st.gaps.total() + st.rejected.total(), 0);
        prop_assert_eq!(st.skipped_turns, 0);
    }
}
