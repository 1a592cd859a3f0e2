//! A connection fed arbitrary segments: two connections finish their
//! handshake, then each input byte group becomes a segment for the
//! receiving side (sequence and acknowledgement numbers near where the
//! connection is, any flags, window, options and payload length), mixed
//! with clock steps, application writes and reads, and closes. Nothing may
//! panic, buffers stay within their limits, and `poll_at` never asks for a
//! time before the last one given.
#![no_main]
use std::net::Ipv4Addr;

use aurora_tcp::conn::{Config, Connection, Endpoint};
use aurora_tcp::seg::{emit, parse, Flags, SackBlocks, SegRepr, Timestamp};
use aurora_tcp::Seq;
use aurora_time::{Duration, Instant};
use libfuzzer_sys::fuzz_target;

const A: Endpoint = Endpoint {
    addr: Ipv4Addr::new(10, 0, 0, 1),
    port: 1000,
};
const B: Endpoint = Endpoint {
    addr: Ipv4Addr::new(10, 0, 0, 2),
    port: 2000,
};

fn cfg(send: usize, recv: usize) -> Config {
    Config {
        send_buffer: send,
        recv_buffer: recv,
        mss: 536,
        ..Config::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let (send, recv) = (4096, 2048);
    let mut now = Instant::ZERO;
    let mut a = Connection::connect(cfg(send, recv), A, B, Seq(0xFFFF_FF00), now);
    let mut out = Vec::new();
    a.poll(now, &mut |p| out.push(p.to_vec()));
    let Some(syn) = out.pop() else { return };
    let Ok(syn) = parse(&syn) else { return };
    let mut b = Connection::accept(cfg(send, recv), &syn, Seq(7), now);
    // Finish the handshake.
    for _ in 0..3 {
        let mut to_a = Vec::new();
        b.poll(now, &mut |p| to_a.push(p.to_vec()));
        for p in &to_a {
            if let Ok(s) = parse(p) {
                a.process(now, &s);
            }
        }
        let mut to_b = Vec::new();
        a.poll(now, &mut |p| to_b.push(p.to_vec()));
        for p in &to_b {
            if let Ok(s) = parse(p) {
                b.process(now, &s);
            }
        }
    }
    let payload = [0x5Au8; 2048];
    let mut pkt = Vec::new();
    for op in data.chunks(12) {
        if op.len() < 12 {
            break;
        }
        match op[0] % 8 {
            0 => now += Duration::from_micros(i64::from(u16::from_le_bytes([op[1], op[2]])) * 50),
            1 => {
                b.send(&payload[..usize::from(op[1]) * 8]);
            }
            2 => {
                b.recv(&mut |_| {});
            }
            3 => b.close(),
            _ => {
                // A segment from `a`'s side, near `b`'s state.
                let seq = b.rcv_nxt()
                    + u32::from(u16::from_le_bytes([op[1], op[2]])).wrapping_sub(0x8000);
                let ack = Seq(u32::from_le_bytes([op[3], op[4], op[5], op[6]]) & 0x3FFF).0;
                let bits = op[7];
                let mut sack = SackBlocks::new();
                if bits & 0x80 != 0 {
                    let l = b.rcv_nxt() + u32::from(op[8]) * 16;
                    sack.push(l, l + u32::from(op[9]) * 16 + 1);
                }
                let repr = SegRepr {
                    src_port: A.port,
                    dst_port: B.port,
                    seq,
                    ack: Seq(7u32.wrapping_add(ack)),
                    flags: Flags {
                        syn: bits & 1 != 0,
                        ack: bits & 2 != 0,
                        fin: bits & 4 != 0,
                        rst: bits & 8 != 0,
                        psh: bits & 16 != 0,
                        ..Flags::default()
                    },
                    window: u16::from_le_bytes([op[10], op[9]]),
                    timestamp: (bits & 32 != 0).then_some(Timestamp {
                        val: u32::from(op[10]) << 8,
                        ecr: 0,
                    }),
                    sack,
                    ..SegRepr::default()
                };
                let len = usize::from(op[11]) * 8;
                emit(
                    A.addr,
                    B.addr,
                    1,
                    &repr,
                    &payload[..len.min(payload.len())],
                    &mut pkt,
                );
                if let Ok(s) = parse(&pkt) {
                    b.process(now, &s);
                }
            }
        }
        b.poll(now, &mut |p| {
            assert!(parse(p).is_ok(), "the connection emitted a bad segment");
        });
        assert!(b.unacked_len() <= send);
        assert!(b.recv_len() <= recv);
        if let Some(t) = b.poll_at() {
            assert!(t >= now, "poll_at {t:?} before now {now:?}");
        }
    }
});
