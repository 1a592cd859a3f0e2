//! UDP link datagrams from a peer: framing checks, then every cell through
//! the HEC receiver, as the link's receiver does.
#![no_main]
use aurora_link::udp::{parse_datagram, HEADER_LEN};
use aurora_wire::hec::HecReceiver;
use aurora_wire::CELL_LEN;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((_, _, cells)) = parse_datagram(data) {
        assert_eq!(cells.len() + HEADER_LEN, data.len());
        assert!(!cells.is_empty() && cells.len() % CELL_LEN == 0);
        let mut hec = HecReceiver::new();
        for c in cells.chunks_exact(CELL_LEN) {
            let mut cell: [u8; 53] = c.try_into().unwrap();
            let _ = hec.check_cell(&mut cell);
        }
    }
});
