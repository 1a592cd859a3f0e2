//! A signalling host opening, refreshing and closing a VC through a real
//! relaying link to a second signalling host, with arbitrary cells thrown
//! at all three and time moving on in arbitrary steps (the relay restarts
//! now and then): no panic, and every cell sent has a good header.
#![no_main]
use std::sync::Arc;

use aurora_net::vunet::VunetLink;
use aurora_net::{Node, Outbox};
use aurora_signal::conn::{Hop, Path, Timing};
use aurora_signal::host::{AppSpec, HostConfig, SignalHost};
use aurora_signal::table::{Link, MemTable, Owner};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;
use libfuzzer_sys::fuzz_target;

const KEY: &[u8] = b"fuzz key";

fn host(owner: u32, table: &Arc<MemTable>) -> SignalHost {
    SignalHost::new(
        HostConfig {
            owner: Owner(owner),
            key: Some((owner as u8, KEY.to_vec())),
            timing: Timing {
                timeout: Duration::from_micros(200),
                retries: 2,
                lease: Duration::from_millis(50),
            },
            vpi: 0,
        },
        table.clone(),
    )
}

fuzz_target!(|data: &[u8]| {
    let table = Arc::new(MemTable::new(Default::default()));
    let mut src = host(1, &table);
    let mut dst = host(2, &table);
    src.add_app(AppSpec {
        name: "f".into(),
        to: "dst".into(),
        flow: 3,
        path: Path {
            first_bits: 0,
            hops: vec![Hop {
                relay: 0,
                link: Link(0),
                side: 0,
                bits_on: 0,
                bits_back: 0,
            }],
            last_link: Link(1),
        },
        open_at: Instant::from_micros(1),
        close_at: Some(Instant::from_millis(5)),
        sdu: 200,
        count: 50,
        interval: Duration::from_micros(50),
        refresh: Some(Duration::from_micros(500)),
    });
    let mut relay = VunetLink::new([false, false], None);
    relay.add_key(1, KEY.to_vec());
    relay.set_lifetime(Some(Duration::from_millis(2)));
    let mut out = Outbox::default();
    let mut now = Instant::ZERO;
    let check = |c: &CellBytes| assert_eq!(aurora_wire::crc::hec(&[c[0], c[1], c[2], c[3]]), c[4]);
    for chunk in data.chunks(54) {
        let Some((&sel, rest)) = chunk.split_first() else {
            break;
        };
        let mut cell = [0u8; 53];
        cell[..rest.len()].copy_from_slice(rest);
        now += Duration::from_micros(i64::from(sel >> 3) * 7);
        match sel & 7 {
            0 => src.receive(now, 0, &[cell], &mut out),
            1 => dst.receive(now, 0, &[cell], &mut out),
            2 => relay.receive(now, (sel >> 3 & 1).into(), &[cell], &mut out),
            3 => relay.restart(),
            _ => {}
        }
        out.drain().for_each(drop);
        // Run the three until quiet (bounded): the source's cells go to
        // the relay's port 0, what leaves its port 1 to the destination,
        // what leaves its port 0 back to the source.
        for _ in 0..64 {
            for n in [&mut src as &mut dyn Node, &mut dst, &mut relay] {
                if n.poll_at().is_some_and(|t| t <= now) {
                    n.poll(now, &mut out);
                }
            }
            let sent: Vec<_> = out.drain().map(|(_, c)| c).collect();
            let mut to_src = Vec::new();
            let mut to_dst = Vec::new();
            for c in &sent {
                check(c);
                let mut o = Outbox::default();
                relay.receive(now, 0, &[*c], &mut o);
                for (p, r) in o.drain() {
                    check(&r);
                    if p == 0 {
                        to_src.push(r)
                    } else {
                        to_dst.push(r)
                    }
                }
            }
            src.receive(now, 0, &to_src, &mut out);
            dst.receive(now, 0, &to_dst, &mut out);
            if sent.is_empty() && out.is_empty() {
                break;
            }
        }
        out.drain().for_each(drop);
    }
    // Reports read these whatever happened.
    let _ = (dst.received(3), src.sent(0), src.apps()[0].events().len());
});
