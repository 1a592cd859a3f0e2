//! linux-atm address and QoS text from users: parse, and re-parse what prints.
#![no_main]
use aurora_hostif::{PvcAddr, Qos};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(q) = text.parse::<Qos>() {
        assert_eq!(q.to_string().parse::<Qos>(), Ok(q));
    }
    if let Ok(a) = text.parse::<PvcAddr>() {
        assert_eq!(a.to_string().parse::<PvcAddr>(), Ok(a));
    }
});
