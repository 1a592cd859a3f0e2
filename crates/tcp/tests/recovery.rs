//! Loss recovery per variant on scripted drops, in virtual time.
//!
//! The path is a 0.8 Mb/s bottleneck with 100 ms one way (about 210 ms
//! round trip with the segments' transmission times), 1,000-byte segments
//! and a 20-segment receive window, ACKs not delayed: the drops land in
//! one window when the sender has about 20 segments out, as in the
//! classic single-window studies.

mod support;

use aurora_tcp::conn::{CloseReason, Config, State, Variant};
use aurora_tcp::trace::Event;
use aurora_time::{Duration, Instant};
use support::{Path, Pipe};

const MSS: u16 = 1000;

fn config(variant: Variant) -> Config {
    Config {
        variant,
        mss: MSS,
        send_buffer: 64 * 1024,
        recv_buffer: 20 * usize::from(MSS),
        window_scale: false,
        sack: variant == Variant::Sack,
        timestamps: false,
        delayed_ack: None,
        initial_window: Some(1),
        trace_limit: 100_000,
        ..Config::default()
    }
}

fn path(variant: Variant, drops: &[u32], total: u64) -> Path {
    let rate = 800_000;
    let delay = Duration::from_millis(100);
    let mut p = Path::new(
        config(variant),
        config(variant),
        Pipe::new(rate, delay, 1_000),
        Pipe::new(rate, delay, 1_000),
        total,
    );
    p.drop_first.extend(drops.iter().copied());
    p
}

struct Outcome {
    timeouts: u64,
    fast_retransmits: u64,
    partial_acks: u64,
    retransmits: u64,
    /// From the first fast retransmit to the end of recovery, seconds.
    recovery: Option<f64>,
    /// When the last byte was read, seconds.
    done_at: f64,
}

fn run(variant: Variant, drops: &[u32]) -> Outcome {
    let total = 100 * u64::from(MSS);
    let mut p = path(variant, drops, total);
    p.run(Instant::from_millis(120_000));
    assert_eq!(p.read, total, "{variant}: every byte arrives, in order");
    assert_eq!(p.a.state(), State::Closed, "{variant}: the sender closed");
    assert_eq!(p.a.close_reason(), Some(CloseReason::Done));
    assert_eq!(p.b.close_reason(), Some(CloseReason::Done));
    assert_eq!(p.scripted_drops, drops.len() as u64);
    let s = *p.a.stats();
    let ev = p.a.trace().events();
    let start = ev
        .iter()
        .find(|(_, e)| matches!(e, Event::FastRetransmit { .. }))
        .map(|(t, _)| *t);
    let end = ev
        .iter()
        .rev()
        .find(|(_, e)| matches!(e, Event::RecoveryEnd { .. }))
        .map(|(t, _)| *t);
    Outcome {
        timeouts: s.timeouts,
        fast_retransmits: s.fast_retransmits,
        partial_acks: s.partial_acks,
        retransmits: s.retransmits,
        recovery: start.zip(end).map(|(a, b)| b.since(a).as_secs_f64()),
        done_at: p.all_read_at.expect("all read").as_nanos() as f64 / 1e9,
    }
}

#[test]
fn without_loss_no_variant_retransmits() {
    for v in Variant::ALL {
        let o = run(v, &[]);
        assert_eq!(
            (o.timeouts, o.fast_retransmits, o.retransmits),
            (0, 0, 0),
            "{v}"
        );
    }
}

#[test]
fn one_drop_is_repaired_by_fast_retransmit_in_every_variant() {
    for v in Variant::ALL {
        let o = run(v, &[14]);
        assert_eq!(o.timeouts, 0, "{v}: no timeout");
        assert_eq!(o.fast_retransmits, 1, "{v}");
    }
}

#[test]
fn reno_with_three_drops_waits_for_the_timer() {
    let o = run(Variant::Reno, &[14, 16, 18]);
    assert!(o.timeouts >= 1, "Reno times out: {} timeouts", o.timeouts);
}

#[test]
fn newreno_repairs_one_loss_a_round_trip_without_a_timeout() {
    let o = run(Variant::NewReno, &[14, 16, 18]);
    assert_eq!(o.timeouts, 0);
    assert_eq!(o.fast_retransmits, 1, "one recovery");
    assert_eq!(
        o.partial_acks, 2,
        "each partial ACK brings the next retransmission"
    );
    assert_eq!(o.retransmits, 3);
    // Three round trips of about 0.21 s.
    let r = o.recovery.expect("recovery ended");
    assert!((0.55..0.9).contains(&r), "recovery took {r} s");
}

#[test]
fn sack_repairs_several_losses_in_one_round_trip() {
    let o = run(Variant::Sack, &[14, 16, 18]);
    assert_eq!(o.timeouts, 0);
    assert_eq!(o.fast_retransmits, 1);
    assert_eq!(o.retransmits, 3, "only the lost segments are sent again");
    let r = o.recovery.expect("recovery ended");
    let nr = run(Variant::NewReno, &[14, 16, 18])
        .recovery
        .expect("recovery");
    assert!(r < 0.4 && r < nr, "SACK took {r} s, NewReno {nr} s");
}

#[test]
fn tahoe_goes_back_and_slow_starts() {
    let o = run(Variant::Tahoe, &[14, 16, 18]);
    assert_eq!(
        o.timeouts, 0,
        "fast retransmit, then slow start covers the rest"
    );
    assert!(
        o.retransmits > 3,
        "Tahoe resends segments that had arrived: {}",
        o.retransmits
    );
}

#[test]
fn four_drops_order_the_variants_as_the_literature_does() {
    let drops = [14, 16, 18, 20];
    let reno = run(Variant::Reno, &drops);
    let newreno = run(Variant::NewReno, &drops);
    let sack = run(Variant::Sack, &drops);
    assert!(reno.timeouts >= 1);
    assert_eq!((newreno.timeouts, sack.timeouts), (0, 0));
    assert!(sack.done_at <= newreno.done_at && newreno.done_at < reno.done_at);
}

/// No timestamps: a segment is timed only if it was not retransmitted
/// (Karn), and the timer doubles on each expiry.
#[test]
fn the_timer_backs_off_and_karn_keeps_retransmissions_out_of_the_estimate() {
    let mut p = path(Variant::NewReno, &[], 200 * u64::from(MSS));
    p.run(Instant::from_millis(1_500));
    let srtt = p.a.srtt().expect("a sample from the handshake or data");
    // Now cut the path for a while: every packet of `a` is lost.
    let cut_from = p.now;
    p.ab.cut = true;
    p.run(cut_from + Duration::from_secs(10));
    let timeouts: Vec<Instant> =
        p.a.trace()
            .events()
            .iter()
            .filter(|(t, e)| *t >= cut_from && matches!(e, Event::Timeout { .. }))
            .map(|(t, _)| *t)
            .collect();
    assert!(timeouts.len() >= 3, "{timeouts:?}");
    let gaps: Vec<f64> = timeouts
        .windows(2)
        .map(|w| w[1].since(w[0]).as_secs_f64())
        .collect();
    for g in gaps.windows(2) {
        assert!(
            (g[1] / g[0] - 2.0).abs() < 0.01,
            "the timeout doubles: {gaps:?}"
        );
    }
    // Restore the path: the retransmission gets through, and its ACK
    // gives no sample (it would say the round trip is seconds long).
    p.ab.cut = false;
    p.run(p.now + Duration::from_secs(200));
    assert_eq!(p.read, p.total);
    let after = p.a.srtt().expect("srtt");
    assert!(
        after < Duration::from_millis(600),
        "srtt {after} (was {srtt}): a retransmission was timed"
    );
}
