//! AAL5 CPCS-PDU trailer and whole-PDU checks.
#![no_main]
use aurora_wire::aal5::{decode, encode, Trailer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = Trailer::parse(data) {
        assert_eq!(&t.to_bytes()[..], &data[data.len() - 8..]);
    }
    if let Ok((t, sdu)) = decode(data) {
        assert_eq!(sdu.len(), usize::from(t.length));
        // Re-encoding the SDU gives the same PDU up to the pad bytes.
        let mut again = vec![0u8; data.len()];
        let n = encode(sdu, t.uu, t.cpi, &mut again).unwrap();
        assert_eq!(n, data.len());
        assert_eq!(&again[..sdu.len()], sdu);
        assert_eq!(&again[n - 8..n - 4], &data[n - 8..n - 4]);
    }
});
