//! A striping host receiving two striped VCs (cells with markers on port
//! 0, PDUs with sequence numbers on ports 0 and 1) given arbitrary cells
//! at arbitrary times: no panic, memory within its limits, and every unit
//! that arrived delivered, given up or held. (The cells' bytes are the
//! fuzzer's, stamps included, so the order of what is delivered says
//! nothing here.)
#![no_main]
use aurora_net::{Node, Outbox};
use aurora_stripe::node::{RecvSpec, StripeHost};
use aurora_stripe::{Config, SyncMode, UnitKind};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut h = StripeHost::new(2, Format::Uni);
    let mut cells = Config::new(
        UnitKind::Cell,
        SyncMode::Marker,
        vec![VcId::new(0, 32), VcId::new(0, 33)],
    );
    cells.marker_interval = 4;
    cells.limits.max_held_units = 64;
    let mut pdus = Config::new(
        UnitKind::Pdu,
        SyncMode::Sequence,
        vec![VcId::new(0, 40), VcId::new(0, 40)],
    );
    pdus.max_sdu = 200;
    pdus.limits.max_held_units = 8;
    pdus.limits.reassembly_budget = 4096;
    for (name, cfg, ports, sdu) in [
        ("c", cells, vec![0, 0], (16, 300)),
        ("p", pdus, vec![0, 1], (8, 200)),
    ] {
        h.add_receiver(RecvSpec {
            name: name.into(),
            cfg,
            ports,
            sdu,
        })
        .unwrap();
    }
    let mut out = Outbox::default();
    let mut now = Instant::ZERO;
    for chunk in data.chunks(54) {
        let Some((&sel, rest)) = chunk.split_first() else {
            break;
        };
        let mut cell = [0u8; 53];
        cell[..rest.len()].copy_from_slice(rest);
        // Mostly valid headers, so the cells reach the destripers.
        if sel & 0x80 != 0 {
            cell[4] = aurora_wire::crc::hec(&[cell[0], cell[1], cell[2], cell[3]]);
        }
        now += Duration::from_micros(i64::from(sel & 0x3F) * 50);
        h.receive(now, u16::from(sel >> 6 & 1), &[cell], &mut out);
        if sel & 0x20 != 0 {
            h.poll(now, &mut out);
        }
        out.drain().for_each(drop);
    }
    h.poll(now + Duration::from_secs(1), &mut out);
    for (spec, rx, got) in h.receivers() {
        let st = rx.stats();
        assert_eq!(st.arrival_balance(), rx.held() as i128, "{}", spec.name);
        assert!(rx.held() <= spec.cfg.limits.max_held_units);
        assert!(rx.held_bytes() <= spec.cfg.limits.max_held_bytes);
        assert!(got.pdus + got.failed() <= st.delivered);
    }
});
