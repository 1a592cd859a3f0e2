//! ATOMIC routes, messages and flow packets: parse anything; what parses
//! re-emits to something that parses back the same; a flow packet read
//! from a frame in any layout is the one built from what it says.
#![no_main]
use aurora_atomic::flow::{self, Layout};
use aurora_atomic::wire::{payload_start, Msg, Route};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((r, n)) = Route::parse(data) {
        assert!(n <= data.len());
        let mut b = Vec::new();
        r.emit(&mut b);
        assert_eq!(Route::parse(&b), Ok((r.clone(), b.len())));
        assert_eq!(Route::from_steps(&r.steps()).steps(), r.steps());
    }
    let _ = payload_start(data);
    for layout in [Layout::Whole, Layout::Transit, Layout::Payload] {
        if let Some(p) = flow::in_frame(data, layout) {
            // Built again from what it says, it says the same.
            let again = flow::packet(p.id, p.dst, p.seq, flow::MIN_FLOW_PACKET);
            assert_eq!(flow::read(&again), Some(p));
        }
    }
    if let Ok(m) = Msg::parse(data) {
        let mut b = Vec::new();
        m.emit(&mut b);
        assert_eq!(Msg::parse(&b), Ok(m));
    }
});
