//! The AAL5 reassembler fed arbitrary cells, posted buffers, timers and
//! flushes. Every cell must stay accounted for and memory within budget.
#![no_main]
use aurora_sar::{Aal5Rx, RxConfig, Status, VcConfig};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::VcId;
use libfuzzer_sys::fuzz_target;

const VCS: [VcId; 3] = [VcId::new(0, 32), VcId::new(1, 33), VcId::new(0, 34)];
const BUDGET: usize = 8 * 1024;

fuzz_target!(|data: &[u8]| {
    let Some((&opts, mut rest)) = data.split_first() else {
        return;
    };
    let mut rx = Aal5Rx::new(RxConfig {
        memory_budget: BUDGET,
        initial_buffer: 256,
        pool_buffers: 4,
        ..RxConfig::default()
    });
    for (i, vc) in VCS.iter().enumerate() {
        let cfg = VcConfig {
            max_sdu: [100, 4000, 65535][i],
            timeout: Duration::from_micros(10 + 100 * i as i64),
            deliver_corrupted: opts & (1 << i) != 0,
            max_posted: 2,
        };
        rx.open_vc(*vc, cfg).unwrap();
    }
    let mut now = Instant::ZERO;
    let mut batch = Vec::new();
    while let Some((&ctl, tail)) = rest.split_first() {
        rest = tail;
        now += Duration::from_micros(i64::from(ctl >> 5));
        match ctl & 0x1F {
            0 => rx.handle_timeout(now),
            1 => {
                let vc = VCS[usize::from(ctl >> 5) % 3];
                let _ = rx.post_buffer(vc, vec![0; 64 * usize::from(ctl >> 5)]);
            }
            2 => rx.flush_vc(VCS[usize::from(ctl >> 5) % 3]).unwrap(),
            _ => {
                // A cell: usually on an open VC, with fuzzer-chosen PTI/CLP and payload.
                let Some(bytes) = rest.get(..49) else { break };
                rest = &rest[49..];
                let mut cell = [0u8; 53];
                let vc = VCS[usize::from(ctl) % 4 % 3];
                let hdr = aurora_wire::cell::Header::data(vc).to_bytes().unwrap();
                cell[..5].copy_from_slice(&hdr);
                if ctl & 0x03 == 0x03 {
                    cell[2] ^= bytes[0]; // a stranger
                }
                cell[3] = (cell[3] & 0xF0) | (bytes[0] & 0x0F);
                cell[5..].copy_from_slice(&bytes[1..]);
                batch.push(cell);
                if ctl & 0x10 == 0 {
                    continue;
                }
            }
        }
        rx.push(now, &batch, &mut |d| {
            if d.status == Status::Intact {
                assert!(d.len() <= 65535);
            }
            drop(d.into_buffer());
        });
        batch.clear();
        assert!(rx.memory_in_use() <= BUDGET);
        assert_eq!(
            rx.stats().cells_balance(),
            i128::from(rx.cells_in_progress())
        );
    }
    rx.push(now, &batch, &mut |_| {});
    rx.handle_timeout(Instant::MAX);
    assert_eq!(rx.stats().cells_balance(), 0);
    assert_eq!(rx.memory_in_use(), 0);
});
