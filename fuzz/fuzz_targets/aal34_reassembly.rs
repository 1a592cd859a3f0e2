//! The AAL3/4 reassembler fed arbitrary SAR-PDUs (with valid or invalid
//! CRC-10), timers and flushes.
#![no_main]
use aurora_sar::aal34::{Aal34Config, Aal34Rx, Aal34VcConfig};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Header, VcId};
use libfuzzer_sys::fuzz_target;

const VCS: [VcId; 2] = [VcId::new(0, 40), VcId::new(0, 41)];
const BUDGET: usize = 16 * 1024;

fuzz_target!(|data: &[u8]| {
    let mut rx = Aal34Rx::new(Aal34Config {
        max_reassemblies: 8,
        memory_budget: BUDGET,
        ..Aal34Config::default()
    });
    for (i, vc) in VCS.iter().enumerate() {
        let cfg = Aal34VcConfig {
            max_sdu: [200, 65535][i],
            timeout: Duration::from_micros(50),
        };
        rx.open_vc(*vc, cfg).unwrap();
    }
    let mut now = Instant::ZERO;
    let mut rest = data;
    while let Some((&ctl, tail)) = rest.split_first() {
        rest = tail;
        now += Duration::from_micros(i64::from(ctl >> 4));
        match ctl & 0x0F {
            0 => rx.handle_timeout(now),
            1 => rx.flush_vc(VCS[usize::from(ctl >> 4) % 2]),
            _ => {
                let Some(bytes) = rest.get(..48) else { break };
                rest = &rest[48..];
                let mut cell = [0u8; 53];
                Header::data(VCS[usize::from(ctl) % 2])
                    .emit(&mut cell)
                    .unwrap();
                let mut p: [u8; 48] = bytes.try_into().unwrap();
                // Small MIDs, so PDUs actually collide and complete.
                p[0] &= 0xFC;
                p[1] &= 0x07;
                if ctl & 0x02 != 0 {
                    aurora_wire::crc::set_crc10_field(&mut p);
                }
                cell[5..].copy_from_slice(&p);
                rx.push(now, &[cell], &mut |d| assert!(d.len() <= 65535));
            }
        }
        assert!(
            rx.memory_in_use() <= BUDGET,
            "{} > {}",
            rx.memory_in_use(),
            BUDGET
        );
        assert!(rx.reassemblies() <= 8);
        assert_eq!(
            rx.stats().cells_balance(),
            i128::from(rx.cells_in_progress())
        );
    }
    rx.handle_timeout(Instant::MAX);
    assert_eq!(rx.stats().cells_balance(), 0);
    assert_eq!(rx.memory_in_use(), 0);
});
