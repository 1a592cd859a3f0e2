//! OAM cell payloads: parse, and re-emit what parsed.
#![no_main]
use aurora_wire::oam::OamRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = OamRepr::parse(data) {
        let again = r.emit();
        assert_eq!(OamRepr::parse(&again), Ok(r));
        if let Some(reply) = r.loopback_reply() {
            assert!(OamRepr::parse(&reply.emit()).is_ok());
        }
    }
});
