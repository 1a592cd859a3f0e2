//! The AVlink given arbitrary cells on either side (some on its control
//! VCs, some tagged under its key so they reach its tables), at arbitrary
//! times: no panic; each cell in gives at most one cell out or one named
//! drop; every cell out has a good HEC; an entry never names a WAN VCI
//! outside the pool.
#![no_main]
use aurora_net::avlink::{Avlink, WanPlan, PORT_VUNET, PORT_WAN};
use aurora_net::vunet::{Control, Route};
use aurora_net::{Node, Outbox};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{build_cell, Cell, Header, VcId};
use aurora_wire::CellBytes;
use libfuzzer_sys::fuzz_target;

const KEY: &[u8] = b"fuzz";

fuzz_target!(|data: &[u8]| {
    let plan = WanPlan {
        count: 8,
        ..WanPlan::default()
    };
    // The first byte's low bit: whether the VuNet side is a management
    // port (trusted writes are held to the pool too).
    let Some((&mgmt, data)) = data.split_first() else {
        return;
    };
    let Ok(mut av) = Avlink::new(5, plan, mgmt & 1 != 0, Some(KEY.to_vec())) else {
        return;
    };
    av.set_lifetime(Some(Duration::from_micros(50)));
    let _ = av.set_entry(0, 100, 39, 0);
    let mut now = Instant::ZERO;
    let mut seq = 0u64;
    // The VCIs control cells named: the entries to check at the end.
    let mut touched = vec![100u16, 39];
    let mut out = Outbox::default();
    out.track_drops(true);
    // Each step: a kind byte, then what it needs.
    for chunk in data.chunks(56) {
        let Some((&kind, rest)) = chunk.split_first() else {
            break;
        };
        now += Duration::from_micros(u64::from(kind >> 4) as i64 * 7);
        let port = if kind & 1 == 0 { PORT_VUNET } else { PORT_WAN };
        let cell: CellBytes = match (kind >> 1) & 3 {
            // Raw bytes, as they came.
            0 => {
                let mut c = [0u8; 53];
                for (d, s) in c.iter_mut().zip(rest) {
                    *d = *s;
                }
                c
            }
            // A tagged request built from the bytes: reaches the tables.
            1 | 2 => {
                let mut p = [0u8; 48];
                for (d, s) in p.iter_mut().zip(rest) {
                    *d = *s;
                }
                let mut c = Control::decode(&p);
                touched.extend([c.vci, c.new_vci]);
                seq += 1;
                c.seq = seq;
                c.key_id = 0;
                c.route = Route {
                    target: if kind & 0x10 != 0 { 5 } else { c.route.target },
                    ..c.route
                };
                let vc = if port == PORT_WAN {
                    plan.control
                } else {
                    VcId::new(0, 30)
                };
                build_cell(&Header::data(vc), &c.encode(Some(KEY))).expect("a UNI header")
            }
            // A data cell on a pool VC or a VuNet VCI.
            _ => {
                let vci = u16::from(rest.first().copied().unwrap_or(0)) + 30;
                let vc = if port == PORT_WAN {
                    VcId::new(plan.vpi, vci)
                } else {
                    VcId::new(0, vci)
                };
                build_cell(&Header::data(vc), &[kind; 48]).expect("a UNI header")
            }
        };
        av.receive(now, port, &[cell], &mut out);
        let sent: Vec<_> = out.drain().collect();
        let drops = out.drain_drops().count();
        assert!(
            sent.len() + drops <= 1,
            "one cell in, {} out, {drops} dropped",
            sent.len()
        );
        for (p, c) in &sent {
            assert!(*p == PORT_VUNET || *p == PORT_WAN);
            assert!(Cell::new_checked(&c[..]).expect("53 bytes").hec_ok());
        }
        if kind & 0x0F == 0x0F {
            av.poll(now, &mut out);
            av.restart();
        }
    }
    for vci in touched {
        if let Some((wan, _)) = av.entry(0, vci) {
            assert!(
                plan.in_pool(VcId::new(plan.vpi, wan)),
                "entry {vci} -> WAN {wan}"
            );
        }
        if av.entry(1, vci).is_some() {
            assert!(plan.in_pool(VcId::new(plan.vpi, vci)), "WAN entry {vci}");
        }
    }
});
