//! The topology daemon fed arbitrary cells, genuine relay answers (bent
//! or not) and time steps: no panic, the map stays within its bounds, and
//! between rounds every probe sent is accounted for.
#![no_main]
use aurora_net::vunet::VunetLink;
use aurora_net::{Node, Outbox};
use aurora_signal::discover::{Config, Discover};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;
use libfuzzer_sys::fuzz_target;

const KEY: &[u8] = b"daemon key";

fuzz_target!(|data: &[u8]| {
    let cfg = Config {
        home_port: data
            .first()
            .and_then(|b| (b & 0x10 != 0).then_some(b & 0x0F)),
        period: Duration::from_millis(5),
        timeout: Duration::from_micros(300),
        max_switches: 8,
        ..Config::new(1, KEY.to_vec())
    };
    let max = cfg.max_switches;
    let mut d = Discover::new(cfg, Instant::ZERO);
    let mut now = Instant::ZERO;
    // The probes sent so far (the last few), for genuine answers.
    let mut sent: Vec<CellBytes> = Vec::new();
    let mut rest = data.get(1..).unwrap_or_default();
    while let [op, tail @ ..] = rest {
        rest = tail;
        match op % 4 {
            // An arbitrary cell.
            0 => {
                let mut cell = [0u8; 53];
                let n = rest.len().min(53);
                cell[..n].copy_from_slice(&rest[..n]);
                rest = &rest[n..];
                d.handle(now, &cell);
            }
            // A relay's genuine answer to one of the probes, perhaps with
            // one byte bent.
            1 | 2 => {
                let [which, id, side, bend, tail @ ..] = rest else {
                    break;
                };
                rest = tail;
                let Some(probe) = sent.get(usize::from(*which) % sent.len().max(1)) else {
                    continue;
                };
                let mut relay = VunetLink::new([false, false], None);
                relay.add_key(1, KEY.to_vec());
                relay.set_id(u16::from(*id) % 8);
                let mut out = Outbox::default();
                relay.receive(now, u16::from(side & 1), &[*probe], &mut out);
                for (_, mut cell) in out.drain() {
                    if op % 4 == 2 {
                        cell[usize::from(*bend) % 53] ^= 1 << (bend % 8);
                    }
                    d.handle(now, &cell);
                }
            }
            // Time passes.
            _ => {
                let [step, tail @ ..] = rest else {
                    break;
                };
                rest = tail;
                now += Duration::from_micros(i64::from(*step) * 20);
            }
        }
        if d.poll_at().is_some_and(|t| t <= now) {
            let mut out = Vec::new();
            d.poll(now, &mut out);
            sent.extend(out);
            if sent.len() > 64 {
                sent.drain(..sent.len() - 64);
            }
        }
        let map = d.map();
        assert!(map.switches.len() <= max);
        assert!(map.relays.len() <= max * 16);
    }
    let c = d.counters();
    assert!(c.answered + c.unanswered + c.rechecks <= c.sent);
});
