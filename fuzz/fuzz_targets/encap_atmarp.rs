//! RFC 2684 headers and ATMARP packets: parse under each encapsulation,
//! and what parses as ATMARP re-emits to the same packet.
#![no_main]
use aurora_wire::atmarp::{AtmarpRepr, MAX_LEN};
use aurora_wire::llc::{Encapsulation, Protocol};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for e in [
        Encapsulation::Llc,
        Encapsulation::VcMux(Protocol::Ipv4),
        Encapsulation::VcMux(Protocol::Ipv6),
        Encapsulation::VcMux(Protocol::Ethernet),
    ] {
        if let Ok((p, start)) = e.parse(data) {
            assert!(start <= data.len());
            if p == Protocol::Atmarp {
                let _ = AtmarpRepr::parse(&data[start..]);
            }
        }
    }
    if let Ok(r) = AtmarpRepr::parse(data) {
        let mut buf = [0u8; MAX_LEN];
        let n = r.emit(&mut buf).expect("a parsed packet fits");
        assert_eq!(AtmarpRepr::parse(&buf[..n]), Ok(r));
    }
});
