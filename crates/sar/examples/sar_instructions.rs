//! A fixed amount of SAR work for instruction counting under callgrind:
//!
//! ```sh
//! cargo build --release -p aurora-sar --example sar_instructions
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/sar_instructions 65535 200
//! callgrind_annotate --inclusive=yes /tmp/cg.out | grep -E 'segment_into|push'
//! ```
//!
//! Arguments: SDU size in bytes and number of PDUs. It prints the cell count
//! so instruction totals can be divided per cell.

use aurora_sar::{Aal5Rx, Aal5Tx, PduOptions, RxConfig, Status, VcConfig};
use aurora_time::Instant;
use aurora_wire::aal5;
use aurora_wire::cell::{Format, VcId};

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(65535);
    let pdus: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    if size > aal5::MAX_SDU {
        eprintln!("sar_instructions: SDU size {size} is above the AAL5 limit of 65535 bytes");
        std::process::exit(2);
    }
    let vc = VcId::new(0, 42);
    let sdu: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
    let mut tx = Aal5Tx::new(vc, Format::Uni).expect("valid VC");
    let mut rx = Aal5Rx::new(RxConfig::default());
    rx.open_vc(vc, VcConfig::default()).expect("room");
    let mut cells = vec![[0u8; 53]; aal5::cells_for(size)];
    let mut spare = Some(vec![0u8; aal5::cpcs_len(size)]);
    let mut ok = 0;
    for _ in 0..pdus {
        tx.segment_into(&sdu, PduOptions::default(), &mut cells)
            .expect("fits");
        if let Some(b) = spare.take() {
            rx.post_buffer(vc, b).expect("room");
        }
        rx.push(Instant::ZERO, &cells, &mut |d| {
            ok += usize::from(d.status == Status::Intact);
            spare = Some(d.into_buffer());
        });
    }
    assert_eq!(ok, pdus);
    println!(
        "{} cells in {} PDUs of {} bytes",
        cells.len() * pdus,
        pdus,
        size
    );
}
