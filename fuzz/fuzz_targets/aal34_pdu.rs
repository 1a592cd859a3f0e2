//! AAL3/4 SAR-PDU fields and CPCS-PDU header/trailer checks.
#![no_main]
use aurora_wire::aal34::{decode_cpcs, CpcsHeader, CpcsTrailer, SarPdu, SarRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = SarPdu::new_checked(data) {
        let _ = (
            v.segment_type(),
            v.sn(),
            v.mid(),
            v.payload(),
            v.li(),
            v.crc(),
        );
        if let Ok(r) = SarRepr::parse(data) {
            let mut again = [0u8; 48];
            r.emit(v.payload(), &mut again).unwrap();
            assert_eq!(&again[..], data);
        }
    }
    let _ = (CpcsHeader::parse(data), CpcsTrailer::parse(data));
    if let Ok((h, t, sdu)) = decode_cpcs(data) {
        assert_eq!(h.btag, t.etag);
        assert_eq!(sdu.len(), usize::from(t.length));
    }
});
