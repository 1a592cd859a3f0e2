//! A striping relay (splitter) with logical VCs of every unit both ways,
//! given arbitrary cells on any port at arbitrary times: no panic, every
//! split's cells striped, dropped by name or waiting in its one partial
//! PDU (no more than its largest PDU takes), and every join's arrivals
//! delivered, given up or held within its limits.
#![no_main]
use aurora_net::{Node, Outbox};
use aurora_stripe::{Config, JoinSpec, Relay, SplitSpec, SyncMode, UnitKind};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};
use aurora_wire::llc::Encapsulation;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Relay::new(2, Format::Uni);
    let kinds = [
        (UnitKind::Cell, SyncMode::Marker, 32),
        (UnitKind::Pdu, SyncMode::Sequence, 40),
        (UnitKind::IpPacket, SyncMode::None, 48),
    ];
    for (unit, sync, vci) in kinds {
        let mut cfg = Config::new(unit, sync, vec![VcId::new(0, vci), VcId::new(0, vci + 1)]);
        cfg.marker_interval = 4;
        cfg.max_sdu = 300;
        cfg.limits.max_held_units = 16;
        cfg.limits.max_held_bytes = 8192;
        cfg.limits.reassembly_budget = 4096;
        r.add_split(SplitSpec {
            name: unit.name().into(),
            wide_vc: VcId::new(0, vci),
            cfg: cfg.clone(),
            encap: Encapsulation::Llc,
        })
        .unwrap();
        r.add_join(JoinSpec {
            name: unit.name().into(),
            cfg,
            wide_vc: VcId::new(0, vci + 4),
            encap: Encapsulation::Llc,
        })
        .unwrap();
    }
    let mut out = Outbox::default();
    out.track_drops(true);
    let mut now = Instant::ZERO;
    for chunk in data.chunks(54) {
        let Some((&sel, rest)) = chunk.split_first() else {
            break;
        };
        let mut cell = [0u8; 53];
        cell[..rest.len()].copy_from_slice(rest);
        // Mostly valid headers, so the cells reach the logical VCs.
        if sel & 0x80 != 0 {
            cell[4] = aurora_wire::crc::hec(&[cell[0], cell[1], cell[2], cell[3]]);
        }
        now += Duration::from_micros(i64::from(sel & 0x1F) * 50);
        r.receive(now, u16::from(sel >> 5 & 3), &[cell], &mut out);
        if sel & 0x40 != 0 {
            r.poll(now, &mut out);
        }
        out.drain().for_each(drop);
        out.drain_drops().for_each(drop);
    }
    r.poll(now + Duration::from_secs(1), &mut out);
    for (spec, _, st, striped) in r.splits() {
        assert_eq!(st.balance(striped), 0, "{}", spec.name);
        assert!(st.reassembling <= 8, "{}", spec.name);
    }
    for (spec, rx, _) in r.joins() {
        let st = rx.stats();
        assert_eq!(st.arrival_balance(), rx.held() as i128, "{}", spec.name);
        assert!(rx.held() <= spec.cfg.limits.max_held_units);
        assert!(rx.held_bytes() <= spec.cfg.limits.max_held_bytes);
    }
});
