//! Cell header views (UNI, NNI), the HEC receiver and the VuNet conversions.
#![no_main]
use aurora_wire::cell::{Cell, Format};
use aurora_wire::hec::{HecReceiver, HecVerdict};
use aurora_wire::vunet::{from_atm, VuCell};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rx = HecReceiver::new();
    for chunk in data.chunks(53) {
        if let Ok(cell) = Cell::new_checked(chunk) {
            for f in [Format::Uni, Format::Nni] {
                let h = cell.header(f);
                // A parsed header always re-encodes to the same four bytes.
                if f == Format::Uni || h.gfc == 0 {
                    assert_eq!(h.to_bytes4().unwrap(), cell.header_bytes());
                }
            }
            let _ = (cell.payload(), cell.pti(), cell.clp(), cell.hec_ok());
            let mut owned: [u8; 53] = chunk.try_into().unwrap();
            let verdict = rx.check_cell(&mut owned);
            if verdict != HecVerdict::Discarded {
                assert!(Cell::new_checked(&owned[..]).unwrap().hec_ok());
                let vu = from_atm(&owned);
                assert_eq!(VuCell::new_checked(&vu[..]).unwrap().to_atm(), owned);
            }
        }
        if let Ok(vu) = VuCell::new_checked(chunk) {
            let atm = vu.to_atm();
            assert!(Cell::new_checked(&atm[..]).unwrap().hec_ok());
        }
    }
    let c = rx.counters();
    assert_eq!(
        c.valid + c.corrected + c.discarded,
        (data.len() / 53) as u64
    );
});
