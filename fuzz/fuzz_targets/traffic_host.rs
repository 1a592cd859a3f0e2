//! A traffic host, and a switch in front of it, given arbitrary cells: no
//! panic, bounded books, and the ledger and the receiver's books reconcile
//! without panicking whatever the tags claim; PDUs said to have vanished
//! between processes (ranges drawn from the input) move from in flight to
//! lost and change nothing else.
#![no_main]
use aurora_net::accounting::{reconcile, Ledger, Place, Side, Vanished};
use aurora_net::switch::AtmSwitch;
use aurora_net::traffic::TrafficHost;
use aurora_net::{Node, Outbox};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let vc = VcId::new(0, 32);
    let mut h = TrafficHost::new(Format::Uni);
    h.expect(vc);
    let mut sw = AtmSwitch::new(2, Format::Uni);
    let _ = sw.add_vc(0, VcId::new(0, 40), 1, vc);
    let mut ledger = Ledger::new();
    let mut out = Outbox::default();
    out.track_drops(true);
    let mut now = Instant::ZERO;
    for chunk in data.chunks(54) {
        let Some((&sel, rest)) = chunk.split_first() else {
            break;
        };
        let mut cell = [0u8; 53];
        cell[..rest.len()].copy_from_slice(rest);
        now += Duration::from_micros(i64::from(sel >> 2));
        if sel & 1 == 0 {
            sw.receive(now, 0, &[cell], &mut out);
            let fwd: Vec<_> = out.drain().map(|(_, c)| c).collect();
            for (port, c, why) in out.drain_drops() {
                let side = Side::In;
                ledger.dropped(
                    now,
                    Place {
                        node: 1,
                        port,
                        side,
                    },
                    why,
                    &c,
                );
            }
            h.receive(now, 0, &fwd, &mut out);
        } else {
            h.receive(now, 0, &[cell], &mut out);
        }
        if sel & 2 != 0 {
            h.poll(now, &mut out);
        }
        for (port, c, why) in out.drain_drops() {
            let side = Side::In;
            ledger.dropped(
                now,
                Place {
                    node: 0,
                    port,
                    side,
                },
                why,
                &c,
            );
        }
        out.drain().for_each(drop);
    }
    let r = h.received(vc);
    let bound = |i: usize| {
        let b = data
            .get(i..i + 2)
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
        u64::from(b) % (r.delivered + 8)
    };
    let vanished: Vec<Vanished> = (0..3)
        .map(|k| Vanished {
            place: Place {
                node: 2 + k as u32,
                port: 0,
                side: Side::In,
            },
            from: bound(4 * k),
            to: bound(4 * k + 2),
        })
        .collect();
    for flow in [0u16, 1, 0xFFFF] {
        let recv = Place {
            node: 0,
            port: 0,
            side: Side::In,
        };
        let sent = r.delivered + 3;
        let a = reconcile(flow, sent, r.delivered, &ledger, h.book(vc), recv, &[]);
        assert_eq!(a.sent, sent);
        let b = reconcile(
            flow,
            sent,
            r.delivered,
            &ledger,
            h.book(vc),
            recv,
            &vanished,
        );
        let moved = b.lost_total() - a.lost_total();
        assert_eq!(b.in_flight + moved, a.in_flight);
        assert_eq!(
            (b.delivered, b.corrupted, b.unaccounted),
            (a.delivered, a.corrupted, a.unaccounted)
        );
    }
});
