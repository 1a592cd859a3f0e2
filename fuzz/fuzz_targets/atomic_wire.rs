//! ATOMIC routes and messages: parse anything; what parses re-emits to
//! something that parses back the same.
#![no_main]
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
    if let Ok(m) = Msg::parse(data) {
        let mut b = Vec::new();
        m.emit(&mut b);
        assert_eq!(Msg::parse(&b), Ok(m));
    }
});
