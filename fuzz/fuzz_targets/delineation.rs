//! HEC cell delineation on an arbitrary byte stream, in arbitrary pieces.
#![no_main]
use aurora_wire::cell::Cell;
use aurora_wire::delineate::Delineator;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let piece = usize::from(split) + 1;
    let mut d = Delineator::new();
    let mut out = 0u64;
    for chunk in stream.chunks(piece) {
        d.push(chunk, |cell| {
            assert!(Cell::new_checked(&cell[..]).unwrap().hec_ok());
            out += 1;
        });
    }
    let c = d.counters();
    assert_eq!(c.cells_delivered, out);
    let held = c.bytes_in - c.cells_delivered * 53 - c.hec_discarded * 53 - c.bytes_skipped;
    assert!(held < 53, "at most one partial cell is held");
});
