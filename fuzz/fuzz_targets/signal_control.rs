//! Control-socket request lines, arbitrary bytes split at newlines: each
//! is read with `parse_request` and, if understood, handed to a running
//! signalling host's inbox, whose poll takes it (an open to a known or
//! unknown host with any numbers, closes of any id, lists) while time
//! moves on: no panic, every request answered, every cell sent with a
//! good header.
#![no_main]
use std::sync::Arc;

use aurora_net::{Node, Outbox};
use aurora_signal::conn::{Hop, Path, Timing};
use aurora_signal::control::{parse_request, Directory};
use aurora_signal::host::{HostConfig, SignalHost};
use aurora_signal::table::{Link, MemTable, Owner};
use aurora_time::{Duration, Instant};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let table = Arc::new(MemTable::new(Default::default()));
    let mut host = SignalHost::new(
        HostConfig {
            owner: Owner(1),
            key: Some((1, b"fuzz key".to_vec())),
            timing: Timing {
                timeout: Duration::from_micros(200),
                retries: 1,
                lease: Duration::from_millis(50),
            },
            vpi: 0,
        },
        table,
    );
    let path = Path {
        first_bits: 1,
        hops: vec![Hop {
            relay: 0,
            link: Link(0),
            side: 0,
            bits_on: 2,
            bits_back: 0,
        }],
        last_link: Link(1),
    };
    host.set_directory(Directory {
        name: "a".into(),
        routes: vec![("b".into(), Some(path)), ("c".into(), None)],
        relays: vec![(0, "r0".into())],
        flows: 10..20,
    });
    let handle = host.control_handle();
    let mut out = Outbox::default();
    let mut now = Instant::ZERO;
    for line in String::from_utf8_lossy(data).split('\n').take(200) {
        let Ok((_, req)) = parse_request(line) else {
            continue;
        };
        let Ok(answer) = handle.send(req) else {
            continue;
        };
        now += Duration::from_micros(150);
        host.poll(now, &mut out);
        assert!(
            answer.try_recv().is_ok(),
            "a request taken is answered at the next poll"
        );
        for (_, c) in out.drain() {
            assert_eq!(aurora_wire::crc::hec(&[c[0], c[1], c[2], c[3]]), c[4]);
        }
    }
});
