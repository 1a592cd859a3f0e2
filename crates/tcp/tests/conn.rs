//! A connection's life in virtual time: handshake and options, transfer
//! over lossy and long paths, flow control, reset and close.

mod support;

use aurora_tcp::conn::{reset_reply, CloseReason, Config, Connection, State, Variant};
use aurora_tcp::seg;
use aurora_tcp::Seq;
use aurora_time::{Duration, Instant};
use support::{Path, Pipe, A, B};

fn pipe_ms(rate: u64, ms: i64, limit: usize) -> Pipe {
    Pipe::new(rate, Duration::from_millis(ms), limit)
}

#[test]
fn defaults_agree_on_every_option_and_carry_a_lossy_transfer() {
    for v in Variant::ALL {
        let cfg = Config {
            variant: v,
            ..Config::default()
        };
        let mut ab = pipe_ms(100_000_000, 5, 100);
        let mut ba = pipe_ms(100_000_000, 5, 100);
        ab.loss = 0.02;
        ba.loss = 0.02;
        let total = 2_000_000;
        let mut p = Path::new(cfg.clone(), cfg, ab, ba, total);
        p.run(Instant::from_millis(600_000));
        assert_eq!(p.read, total, "{v}");
        let (rs, ss, sack, ts) = p.a.options();
        assert_eq!(
            (rs, ss, sack, ts),
            (5, 5, true, true),
            "{v}: 1 MiB buffers need a shift of 5"
        );
        assert!(
            p.ab.random_drops > 10 && p.ba.random_drops > 10,
            "{v}: losses both ways"
        );
        assert_eq!(p.a.close_reason(), Some(CloseReason::Done), "{v}");
        assert_eq!(p.b.close_reason(), Some(CloseReason::Done), "{v}");
        assert!(p.a.stats().retransmits > 0);
    }
}

#[test]
fn a_peer_without_options_gets_none_and_sack_falls_back() {
    let plain = Config {
        window_scale: false,
        sack: false,
        timestamps: false,
        ..Config::default()
    };
    let mut ab = pipe_ms(10_000_000, 10, 50);
    ab.loss = 0.01;
    let mut p = Path::new(
        Config::default(),
        plain,
        ab,
        pipe_ms(10_000_000, 10, 50),
        500_000,
    );
    p.run(Instant::from_millis(600_000));
    assert_eq!(p.read, 500_000);
    assert_eq!(p.a.options(), (0, 0, false, false));
    assert_eq!(p.a.smss(), 1460, "no timestamp bytes to take off");
}

/// OC-12c with a 40 ms round trip: a window of 3 MB fills the pipe only
/// with window scaling.
#[test]
fn window_scaling_fills_a_long_fat_pipe() {
    let cfg = Config {
        send_buffer: 8 << 20,
        recv_buffer: 8 << 20,
        delayed_ack: None,
        ..Config::default()
    };
    let rate = 622_000_000;
    let total = 200_000_000;
    let mut p = Path::new(
        cfg.clone(),
        cfg,
        pipe_ms(rate, 20, 100_000),
        pipe_ms(rate, 20, 100_000),
        total,
    );
    p.run(Instant::from_millis(60_000));
    assert_eq!(p.read, total);
    let t = p.all_read_at.expect("done").as_nanos() as f64 / 1e9;
    let goodput = total as f64 * 8.0 / t;
    assert!(goodput > 0.7 * rate as f64, "{goodput:.0} b/s in {t:.3} s");
    assert_eq!(p.a.options().0, 8);
}

#[test]
fn a_shut_window_is_probed_until_the_reader_returns() {
    let cfg = Config {
        recv_buffer: 16 * 1024,
        ..Config::default()
    };
    let mut p = Path::new(
        cfg.clone(),
        cfg,
        pipe_ms(10_000_000, 1, 100),
        pipe_ms(10_000_000, 1, 100),
        100_000,
    );
    p.b_reads = false;
    p.run(Instant::from_millis(5_000));
    assert_eq!(
        p.b.recv_len(),
        16 * 1024,
        "the buffer filled and nothing more came"
    );
    assert_eq!(p.a.state(), State::Established);
    p.b_reads = true;
    p.run(Instant::from_millis(600_000));
    assert_eq!(p.read, 100_000);
    assert_eq!(p.a.close_reason(), Some(CloseReason::Done));
}

#[test]
fn a_lost_syn_is_sent_again_after_the_initial_timeout() {
    let cfg = Config::default();
    let mut a = Connection::connect(cfg, A, B, Seq(7), Instant::ZERO);
    let mut n = 0;
    a.poll(Instant::ZERO, &mut |_| n += 1);
    assert_eq!(n, 1);
    assert_eq!(a.poll_at(), Some(Instant::from_millis(1_000)));
    let mut syns = vec![];
    a.poll(Instant::from_millis(1_000), &mut |p| syns.push(p.to_vec()));
    let s = seg::parse(&syns[0]).expect("a SYN");
    assert!(s.repr.flags.syn && !s.repr.flags.ack);
    assert_eq!(
        a.poll_at(),
        Some(Instant::from_millis(3_000)),
        "backed off to 2 s"
    );
    // Six retries, then it gives up.
    let mut t = Instant::from_millis(3_000);
    while a.state() != State::Closed {
        a.poll(t, &mut |_| {});
        t = a.poll_at().unwrap_or(t);
    }
    assert_eq!(a.close_reason(), Some(CloseReason::TimedOut));
}

#[test]
fn a_reset_answers_a_segment_for_no_connection_and_refuses_a_syn() {
    let mut a = Connection::connect(Config::default(), A, B, Seq(7), Instant::ZERO);
    let mut syn = vec![];
    a.poll(Instant::ZERO, &mut |p| syn = p.to_vec());
    let s = seg::parse(&syn).expect("a SYN");
    let mut rst = vec![];
    assert!(reset_reply(&s, &mut rst));
    let r = seg::parse(&rst).expect("a RST");
    assert!(r.repr.flags.rst && r.repr.flags.ack);
    assert_eq!(r.repr.ack, Seq(8));
    assert_eq!((r.src, r.dst), (B.addr, A.addr));
    a.process(Instant::from_millis(1), &r);
    assert_eq!(a.close_reason(), Some(CloseReason::Refused));
    // A RST is never answered.
    let mut again = vec![];
    assert!(!reset_reply(&r, &mut again));
}

#[test]
fn an_old_timestamp_is_refused_by_paws() {
    let cfg = Config::default();
    let mut p = Path::new(
        cfg.clone(),
        cfg,
        pipe_ms(10_000_000, 1, 100),
        pipe_ms(10_000_000, 1, 100),
        10_000_000,
    );
    p.run(Instant::from_millis(50));
    assert_eq!(p.b.state(), State::Established);
    // Replay a segment of `a`'s with a timestamp from long ago.
    let mut pkt = vec![];
    let repr = seg::SegRepr {
        src_port: A.port,
        dst_port: B.port,
        seq: Seq(1_001),
        ack: Seq(0),
        flags: seg::Flags {
            ack: true,
            ..Default::default()
        },
        window: 100,
        timestamp: Some(seg::Timestamp { val: 1, ecr: 0 }),
        ..Default::default()
    };
    seg::emit(A.addr, B.addr, 1, &repr, b"x", &mut pkt);
    let before = p.b.stats().rejected.paws;
    p.b.process(p.now, &seg::parse(&pkt).expect("valid"));
    assert_eq!(p.b.stats().rejected.paws, before + 1);
}

#[test]
fn maxburst_limits_what_one_ack_releases() {
    // A receiver that ACKs every other segment after a delay releases
    // bursts; maxburst 2 keeps each to two segments.
    let burst = |limit: Option<u32>| {
        let cfg = Config {
            maxburst: limit,
            variant: Variant::NewReno,
            trace_limit: 1_000_000,
            ..Config::default()
        };
        let mut p = Path::new(
            cfg.clone(),
            cfg,
            pipe_ms(50_000_000, 5, 1000),
            pipe_ms(50_000_000, 5, 1000),
            1_000_000,
        );
        p.run(Instant::from_millis(60_000));
        assert_eq!(p.read, 1_000_000);
        // The longest run of sends at one instant.
        let mut longest = 0;
        let mut run = 0;
        let mut last = None;
        for (t, e) in p.a.trace().events() {
            if let aurora_tcp::trace::Event::Send { .. } = e {
                if last == Some(*t) {
                    run += 1;
                } else {
                    run = 1;
                    last = Some(*t);
                }
                longest = longest.max(run);
            }
        }
        longest
    };
    assert!(burst(None) > 2);
    assert_eq!(burst(Some(2)), 2);
}

/// The window shuts exactly at the end of the data, so the FIN waits
/// behind it; the reader's window update is lost. The persist timer's
/// probe carries the FIN, and the connection still ends.
#[test]
fn a_probe_carries_the_fin_when_the_window_update_is_lost() {
    let cfg = Config {
        recv_buffer: 16 * 1024,
        ..Config::default()
    };
    let total = 16 * 1024;
    let mut p = Path::new(
        cfg.clone(),
        cfg,
        pipe_ms(10_000_000, 1, 100),
        pipe_ms(10_000_000, 1, 100),
        total,
    );
    p.b_reads = false;
    p.run(Instant::from_millis(3_000));
    assert_eq!(p.b.recv_len(), total as usize);
    assert!(!p.b.peer_closed(), "the FIN did not fit");
    // The reader returns, but its window update is lost.
    p.ba.cut = true;
    p.b_reads = true;
    p.run(Instant::from_millis(3_100));
    assert!(p.ba.cut_drops > 0);
    p.ba.cut = false;
    p.run(Instant::from_millis(600_000));
    assert_eq!(p.read, total);
    assert_eq!(p.a.close_reason(), Some(CloseReason::Done));
    assert_eq!(p.b.close_reason(), Some(CloseReason::Done));
}
