//! `aurora bench forward`: the IP forwarder's packets per second on one
//! core, against the packet rate of OC-192c and OC-768c lines at the same
//! packet size, and against a bare loop over the same packets that only
//! reads each destination address (what any forwarder must touch),
//! measured in the same run.

use std::hint::black_box;
use std::time::Instant as WallClock;

use aurora_ip::workload;

/// Prefixes in the benchmark's routing table.
pub const PREFIXES: usize = 10_000;
/// Packets in a batch.
pub const BATCH: usize = 1024;

/// One size's figures.
pub struct ForwardRate {
    /// Packets forwarded per second.
    pub pps: f64,
    /// Destinations read per second by the bare loop.
    pub touch_pps: f64,
    /// Packets per second of an OC-192c and an OC-768c line at this size
    /// (LLC/SNAP and the AAL5 trailer included, whole cells).
    pub line_pps: [f64; 2],
}

/// `aurora bench forward`: three packet sizes against line rates and the
/// bare loop.
pub fn main(secs: f64) {
    println!("aurora bench forward (one thread, {PREFIXES} prefixes, batches of {BATCH} packets)");
    println!(
        "{:>6} {:>11} {:>10} {:>10} {:>10} {:>14}",
        "bytes", "packets/s", "ns/packet", "x OC-192c", "x OC-768c", "/ bare loop"
    );
    for size in [64, 1500, 9180] {
        let r = forward_rate(size, secs);
        println!(
            "{size:>6} {:>10.1}M {:>10.2} {:>10.2} {:>10.2} {:>14.3}",
            r.pps / 1e6,
            1e9 / r.pps,
            r.pps / r.line_pps[0],
            r.pps / r.line_pps[1],
            r.pps / r.touch_pps
        );
    }
}

/// Measures one packet size for about `secs` seconds.
pub fn forward_rate(size: usize, secs: f64) -> ForwardRate {
    let (mut f, list) = workload::table(PREFIXES);
    let mut pkts = workload::packets(BATCH, size, &list);
    let mut passes = 0u32;
    let mut n = 0u64;
    let t = WallClock::now();
    while t.elapsed().as_secs_f64() < secs {
        if passes == 250 {
            workload::refresh(&mut pkts);
            passes = 0;
        }
        n += workload::forward_all(&mut f, &mut pkts) as u64;
        passes += 1;
    }
    let pps = n as f64 / t.elapsed().as_secs_f64();
    let mut m = 0u64;
    let t = WallClock::now();
    while t.elapsed().as_secs_f64() < secs / 2.0 {
        for p in &pkts {
            black_box(u32::from_be_bytes([p[16], p[17], p[18], p[19]]));
        }
        m += pkts.len() as u64;
    }
    let touch_pps = m as f64 / t.elapsed().as_secs_f64();
    let cells = aurora_wire::aal5::cells_for(size + aurora_wire::llc::LLC_SNAP_LEN) as f64;
    ForwardRate {
        pps,
        touch_pps,
        line_pps: [
            crate::bench_net::OC192_CELLS / cells,
            crate::bench_net::OC768_CELLS / cells,
        ],
    }
}
