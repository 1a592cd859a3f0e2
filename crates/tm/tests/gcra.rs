//! Properties of the GCRA, the policer and the shaper.

use aurora_time::{Duration, Instant};
use aurora_tm::{
    Action, Contract, Definition, DualGcra, Gcra, Interval, LeakyBucket, Shaper, Upc,
    VirtualScheduling,
};
use proptest::prelude::*;

fn at(ns: i64) -> Instant {
    Instant::from_nanos(ns)
}

/// An increment: a rate in cells per second (T usually fractional) or
/// whole nanoseconds.
fn interval() -> impl Strategy<Value = Interval> {
    prop_oneof![
        (1u64..=1_000_000_000).prop_map(|r| Interval::from_rate(r).unwrap()),
        (1u64..=100_000).prop_map(|r| Interval::from_rate(r * 1_000).unwrap()),
        (0i64..=10_000).prop_map(Interval::from_nanos),
    ]
}

/// Arrival times around an interval: gaps from 0 to a few T, sometimes
/// backwards, starting anywhere.
fn arrivals(t: Interval, tau: i64) -> impl Strategy<Value = Vec<i64>> {
    let span = (t.ceil_nanos() * 3 + tau).clamp(2, 1 << 40);
    (
        -(1i64 << 50)..(1i64 << 50),
        prop::collection::vec(
            prop_oneof![8 => 0..span, 1 => -span..0, 1 => Just(0)],
            1..300,
        ),
    )
        .prop_map(|(start, gaps)| {
            gaps.iter()
                .scan(start, |now, g| {
                    *now += g;
                    Some(*now)
                })
                .collect()
        })
}

fn gcra_case() -> impl Strategy<Value = (Interval, i64, Vec<i64>)> {
    (
        interval(),
        prop_oneof![Just(0i64), 0i64..5_000, 0i64..1_000_000],
    )
        .prop_flat_map(|(t, tau)| (Just(t), Just(tau), arrivals(t, tau)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Virtual scheduling and the leaky bucket give the same verdict for
    /// every cell, the same next conforming time, and `peek` predicts
    /// `conforms`.
    #[test]
    fn both_forms_agree((t, tau, times) in gcra_case()) {
        let tau = Duration::from_nanos(tau);
        let mut vs = VirtualScheduling::new(t, tau);
        let mut lb = LeakyBucket::new(t, tau);
        for (i, &now) in times.iter().enumerate() {
            let now = at(now);
            let next = vs.next_conforming(now);
            prop_assert_eq!(next, lb.next_conforming(now), "cell {}", i);
            prop_assert!(next >= now);
            prop_assert!(vs.peek(next));
            if next > now {
                prop_assert!(!vs.peek(next - Duration::from_nanos(1)));
            }
            let p = vs.peek(now);
            prop_assert_eq!(p, lb.peek(now), "cell {} at {}", i, now);
            prop_assert_eq!(p, next == now);
            let (a, b) = (vs.conforms(now), lb.conforms(now));
            prop_assert_eq!(a, b, "cell {} at {}", i, now);
            prop_assert_eq!(a, p);
        }
    }

    /// The dual GCRA in both forms agrees too.
    #[test]
    fn dual_forms_agree(
        (tp, tau, times) in gcra_case(),
        ts in interval(),
        bt in prop_oneof![Just(0i64), 0i64..100_000],
    ) {
        let (tau, bt) = (Duration::from_nanos(tau), Duration::from_nanos(bt));
        let mut a = DualGcra::<VirtualScheduling>::new(tp, ts, bt, tau);
        let mut b = DualGcra::<LeakyBucket>::new(tp, ts, bt, tau);
        for &now in &times {
            let now = at(now);
            prop_assert_eq!(a.next_conforming(now), b.next_conforming(now));
            prop_assert_eq!(a.peek(now), b.peek(now));
            prop_assert_eq!(a.conforms(now), b.conforms(now));
        }
    }
}

/// A contract: peak or sustained, rates from 1 k to 100 M cells/s.
fn contract() -> impl Strategy<Value = Contract> {
    let cdvt = prop_oneof![Just(0i64), 0i64..100, 0i64..1_000_000].prop_map(Duration::from_nanos);
    prop_oneof![
        (1_000u64..=100_000_000, cdvt.clone())
            .prop_map(|(pcr, cdvt)| Contract::peak(pcr, cdvt).unwrap()),
        (1_000u64..=100_000_000, 1u64..=1_000, 1u32..=200, cdvt).prop_map(
            |(pcr, div, mbs, cdvt)| {
                Contract::sustained(pcr, (pcr / div).max(1), mbs, cdvt).unwrap()
            }
        ),
    ]
}

/// When a source wants to send: bursts of back-to-back cells, idle gaps.
fn wants() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(
        prop_oneof![6 => Just(0i64), 3 => 0i64..20_000, 1 => 0i64..10_000_000],
        1..600,
    )
    .prop_map(|gaps| {
        gaps.iter()
            .scan(0i64, |t, g| {
                *t += g;
                Some(*t)
            })
            .collect()
    })
}

const DEFINITIONS: [(Definition, Action); 4] = [
    (Definition::Clp01, Action::Drop),
    (Definition::Clp01, Action::Tag),
    (Definition::Clp0, Action::Drop),
    (Definition::Clp0, Action::Tag),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A shaped stream passes the policer of the same contract with no tag
    /// and no drop, under every conformance definition, even after the
    /// network delays each cell by anything from 0 to the CDVT. The shaper
    /// sends no cell before it is wanted, and none later than it must.
    #[test]
    fn shaped_output_always_conforms(
        c in contract(),
        wants in wants(),
        jitter in prop::collection::vec(0.0f64..=1.0, 600),
    ) {
        let mut shaper = Shaper::new(&c);
        let mut policers = DEFINITIONS.map(|(d, a)| Upc::new(&c, d, a));
        let mut jittered = DEFINITIONS.map(|(d, a)| Upc::new(&c, d, a));
        let cdvt = c.cdvt().as_nanos();
        let (mut last, mut last_arrival) = (i64::MIN, i64::MIN);
        for (i, &want) in wants.iter().enumerate() {
            let ready = at(want.max(last));
            let t = shaper.next_conforming(ready);
            prop_assert!(t >= ready);
            if t > ready {
                // Not a nanosecond later than needed.
                prop_assert_eq!(shaper.next_conforming(t - Duration::from_nanos(1)), t);
            }
            prop_assert!(shaper.sent(t), "cell {} at {}", i, t);
            last = t.as_nanos();
            // Delayed by up to the CDVT, in order.
            let arrival = (last + (jitter[i] * cdvt as f64) as i64).max(last_arrival);
            last_arrival = arrival;
            for p in policers.iter_mut() {
                p.police(t, false);
            }
            for p in jittered.iter_mut() {
                p.police(at(arrival), false);
            }
        }
        for p in policers.iter().chain(jittered.iter()) {
            let n = p.counters();
            prop_assert_eq!((n.tagged, n.dropped_nonconforming), (0, 0), "{:?} {:?}", c, p);
            prop_assert_eq!(n.conforming, wants.len() as u64);
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A steady source 10 % over its contract sees the excess, 1/11 of its
    /// cells, tagged or dropped, whatever the rates, the burst size and the
    /// definition, given a tolerance of at least a cell interval (see
    /// `without_tolerance_half_is_lost` for less).
    #[test]
    fn ten_percent_over_loses_one_eleventh(
        rate in 1_000u64..=1_000_000,
        intervals in 1.0f64..20.0,
        peak_over in 1u64..=10,
        mbs in 1u32..=50,
        phase in 0i64..1_000_000,
    ) {
        const CELLS: u64 = 110_000;
        let t = 1e9 / rate as f64;
        let cdvt = Duration::from_nanos((t * intervals) as i64 + 1);
        // Spacing: the contract's interval shortened by a factor 1.1.
        let spacing = (t / 1.1).round() as i64;
        let cbr = Contract::peak(rate, cdvt).unwrap();
        // VBR with SCR = rate and a peak at least 10 % above the source.
        let vbr = Contract::sustained(rate * (1 + peak_over), rate, mbs, cdvt).unwrap();
        let cases = [
            (cbr, Definition::Clp01, Action::Drop),
            (cbr, Definition::Clp01, Action::Tag),
            (vbr, Definition::Clp01, Action::Drop),
            (vbr, Definition::Clp0, Action::Drop),
            (vbr, Definition::Clp0, Action::Tag),
        ];
        for (c, d, a) in cases {
            let mut upc = Upc::new(&c, d, a);
            for k in 0..CELLS as i64 {
                upc.police(at(phase + k * spacing), false);
            }
            let n = upc.counters();
            let lost = match a {
                Action::Drop => {
                    prop_assert_eq!(n.tagged, 0);
                    n.dropped_nonconforming
                }
                Action::Tag => {
                    prop_assert_eq!(n.dropped_nonconforming, 0);
                    n.tagged
                }
            };
            prop_assert_eq!(n.conforming + lost, CELLS);
            let frac = lost as f64 / CELLS as f64;
            prop_assert!(
                (frac - 1.0 / 11.0).abs() < 0.002,
                "{:?} {:?} {:?}: {} of {} ({:.5})", c, d, a, lost, CELLS, frac
            );
        }
    }

}

proptest! {
    /// With a tolerance under the source's cell spacing, a conforming cell
    /// that arrives after its TAT loses the difference for good, and the
    /// loss is far above the excess: at 10 % over and CDVT 0, every other
    /// cell.
    #[test]
    fn without_tolerance_half_is_lost(rate in 1_000u64..=1_000_000, phase in 0i64..1_000_000) {
        let spacing = (1e9 / rate as f64 / 1.1).round() as i64;
        let c = Contract::peak(rate, Duration::ZERO).unwrap();
        let mut upc = Upc::new(&c, Definition::Clp01, Action::Drop);
        let verdicts: Vec<_> = (0..1_000).map(|k| upc.police(at(phase + k * spacing), false)).collect();
        for (k, v) in verdicts.iter().enumerate() {
            prop_assert_eq!(*v == aurora_tm::Verdict::Pass, k % 2 == 0, "cell {}", k);
        }
    }

    /// Nothing panics on any times, rates or tolerances.
    #[test]
    fn no_panic_anywhere(
        rate in any::<u64>(),
        ns in any::<i64>(),
        tau in any::<i64>(),
        times in prop::collection::vec(any::<i64>(), 0..50),
        clps in prop::collection::vec(any::<bool>(), 50),
    ) {
        let tau = Duration::from_nanos(tau);
        for t in [Interval::from_rate(rate).unwrap_or(Interval::ZERO), Interval::from_nanos(ns)] {
            let mut vs = VirtualScheduling::new(t, tau);
            let mut lb = LeakyBucket::new(t, tau);
            let mut d = DualGcra::<VirtualScheduling>::new(t, t, tau, tau);
            for &now in &times {
                let now = at(now);
                vs.conforms(now);
                lb.conforms(now);
                d.conforms(now);
                vs.next_conforming(now);
                lb.next_conforming(now);
                d.next_conforming(now);
            }
        }
        let contracts = [
            Contract::peak(rate, tau),
            Contract::sustained(rate.max(1), rate / 2, (ns as u32).max(1), tau),
            Contract::peak(rate % 1_000_000_000 + 1, Duration::ZERO),
            Contract::sustained(1_000_000_000, 1, u32::MAX >> 8, Duration::from_secs(10)),
        ];
        for c in contracts.into_iter().flatten() {
            let mut s = Shaper::new(&c);
            for (d, a) in DEFINITIONS {
                let mut u = Upc::new(&c, d, a);
                for (&now, &clp) in times.iter().zip(&clps) {
                    u.police(at(now), clp);
                    s.next_conforming(at(now));
                    s.sent(at(now));
                    let _ = s.try_send(at(now));
                }
            }
        }
    }
}
