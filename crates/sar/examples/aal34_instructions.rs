//! A fixed amount of AAL3/4 work for instruction counting under callgrind:
//!
//! ```sh
//! cargo build --release -p aurora-sar --example aal34_instructions
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg34.out \
//!     target/release/examples/aal34_instructions 9180 200
//! callgrind_annotate --inclusive=yes /tmp/cg34.out | grep -E 'segment|push|crc'
//! ```
//!
//! Arguments: SDU size in bytes, number of PDUs and the CRC-10 kernel
//! (`portable`, `clmul` or `vpclmul`; the fastest the CPU has by default;
//! valgrind has no AVX-512, so under it the best is `clmul`). Each PDU is
//! segmented and reassembled (in two separate functions, so their totals
//! can be read apart). It prints the cell count so instruction totals can
//! be divided per cell.

use aurora_sar::aal34::{Aal34Rx, Aal34Tx};
use aurora_sar::crc10::Kernel;
use aurora_time::Instant;
use aurora_wire::aal34;
use aurora_wire::cell::{Format, VcId};
use aurora_wire::CellBytes;

#[inline(never)]
fn segment_all(tx: &mut Aal34Tx, sdu: &[u8], cells: &mut [CellBytes], pdus: usize) {
    for _ in 0..pdus {
        tx.segment_into(std::hint::black_box(sdu), 7, cells)
            .expect("fits");
    }
}

#[inline(never)]
fn reassemble_all(rx: &mut Aal34Rx, cells: &[CellBytes], pdus: usize, size: usize) -> usize {
    let mut ok = 0;
    for _ in 0..pdus {
        rx.push(Instant::ZERO, std::hint::black_box(cells), &mut |d| {
            ok += usize::from(d.len() == size);
        });
    }
    ok
}

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(9180);
    let pdus: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let kernel = match args.next().as_deref() {
        None => Kernel::best(),
        Some("portable") => Kernel::Portable,
        Some("clmul") => Kernel::Clmul,
        Some("vpclmul") => Kernel::Vpclmul,
        Some(k) => {
            eprintln!("aal34_instructions: unknown kernel {k} (portable, clmul or vpclmul)");
            std::process::exit(2);
        }
    };
    if size > aal34::MAX_SDU {
        eprintln!("aal34_instructions: SDU size {size} is above the AAL3/4 limit of 65535 bytes");
        std::process::exit(2);
    }
    let vc = VcId::new(0, 42);
    let sdu: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
    let mut tx = Aal34Tx::with_kernel(vc, Format::Uni, kernel).expect("valid VC");
    let mut rx = Aal34Rx::with_kernel(Default::default(), kernel);
    rx.open_vc(vc, Default::default()).expect("room");
    let mut cells = vec![[0u8; 53]; aal34::cells_for(size)];
    segment_all(&mut tx, &sdu, &mut cells, pdus);
    let ok = reassemble_all(&mut rx, &cells, pdus, size);
    assert_eq!(ok, pdus);
    assert_eq!(rx.stats().pdus_dropped.total(), 0);
    println!(
        "{} cells in {} PDUs of {} bytes, CRC-10 kernel {:?}",
        cells.len() * pdus,
        pdus,
        size,
        tx.kernel()
    );
}
