//! A fixed amount of forwarding for instruction counting under callgrind:
//!
//! ```sh
//! cargo build --release -p aurora-ip --example forward_instructions
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/fwd.out \
//!     target/release/examples/forward_instructions 64 1024 100
//! callgrind_annotate --inclusive=yes /tmp/fwd.out | grep forward_all
//! ```
//!
//! Arguments: packet size in bytes, packets per batch, passes over the
//! batch (at most 254), prefixes in the table (default 10,000; up to 32
//! are kept in a list, more in the trie). It prints the number of packets forwarded, to
//! divide `forward_all`'s inclusive instruction count by.

use aurora_ip::workload;

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let passes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let prefixes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    if !(20..=65535).contains(&size) || passes > 254 {
        eprintln!("forward_instructions: size must be 20 to 65535 bytes and passes at most 254");
        std::process::exit(2);
    }
    let (mut f, list) = workload::table(prefixes);
    let mut pkts = workload::packets(n, size, &list);
    let mut forwarded = 0;
    for _ in 0..passes {
        forwarded += workload::forward_all(&mut f, &mut pkts);
    }
    println!("{forwarded} packets of {size} bytes forwarded");
}
