//! `aurora bench sar`: segmentation and reassembly speed against memcpy,
//! all measured in the same run on one thread.

use std::hint::black_box;
use std::time::Instant as WallClock;

use aurora_sar::aal34::{Aal34Rx, Aal34Tx};
use aurora_sar::{Aal5Rx, Aal5Tx, Kernel, PduOptions, RxConfig, Status, VcConfig};
use aurora_time::Instant;
use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::hec::HecReceiver;
use aurora_wire::{aal34, aal5, CellBytes};
use serde::Serialize;

/// One measured figure.
#[derive(Debug, Serialize)]
pub struct Row {
    /// What was measured.
    pub what: String,
    /// SDU or block size in bytes (0 where not meaningful).
    pub size: usize,
    /// Gigabytes (1e9 bytes) of user data per second.
    pub gbps: f64,
    /// Ratio to memcpy of the same size in the same run.
    pub vs_memcpy: Option<f64>,
    /// Items (cells) per second, where that is the unit.
    pub per_sec: Option<f64>,
}

/// Options for the run.
pub struct Opts {
    /// Seconds to spend on each figure.
    pub secs: f64,
    /// Bytes of SDUs in the stream case (should exceed the last-level cache).
    pub stream_bytes: usize,
    /// CRC kernel.
    pub kernel: Kernel,
}

const VC: VcId = VcId::new(0, 42);
pub const SIZES: [usize; 4] = [48, 1500, 9180, 65535];

/// Runs `f` (which processes `bytes` bytes per call) repeatedly for about
/// `secs` and returns bytes per second. Takes the best of three slices so a
/// burst of noise from a neighbour does not decide the figure.
fn rate(secs: f64, bytes: usize, mut f: impl FnMut()) -> f64 {
    // Warm up and size the batch to ~1 ms.
    let mut reps = 1u64;
    loop {
        let t = WallClock::now();
        for _ in 0..reps {
            f();
        }
        if t.elapsed().as_secs_f64() > 1e-3 {
            break;
        }
        reps *= 2;
    }
    let mut best = 0f64;
    for _ in 0..3 {
        let t = WallClock::now();
        let mut done = 0u64;
        while t.elapsed().as_secs_f64() < secs / 3.0 {
            for _ in 0..reps {
                f();
            }
            done += reps;
        }
        let r = done as f64 * bytes as f64 / t.elapsed().as_secs_f64();
        best = best.max(r);
    }
    best
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// memcpy bytes per second for blocks of `size` bytes, cache-resident.
pub fn memcpy_rate(secs: f64, size: usize) -> f64 {
    let src = pattern(size, 1);
    let mut dst = vec![0u8; size];
    rate(secs, size, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    })
}

fn aal5_seg_rate(secs: f64, size: usize, kernel: Kernel) -> f64 {
    let sdu = pattern(size, 2);
    let mut tx = Aal5Tx::with_kernel(VC, Format::Uni, kernel).expect("valid VC");
    let mut cells = vec![[0u8; 53]; aal5::cells_for(size)];
    rate(secs, size, || {
        let n = tx
            .segment_into(black_box(&sdu), PduOptions::default(), &mut cells)
            .expect("fits");
        black_box(&cells[n - 1]);
    })
}

fn rx_config(kernel: Kernel) -> RxConfig {
    RxConfig {
        kernel,
        ..RxConfig::default()
    }
}

fn aal5_reasm_rate(secs: f64, size: usize, kernel: Kernel) -> f64 {
    let sdu = pattern(size, 3);
    let mut tx = Aal5Tx::with_kernel(VC, Format::Uni, kernel).expect("valid VC");
    let mut cells = vec![[0u8; 53]; aal5::cells_for(size)];
    tx.segment_into(&sdu, PduOptions::default(), &mut cells)
        .expect("fits");
    let mut rx = Aal5Rx::new(rx_config(kernel));
    rx.open_vc(VC, VcConfig::default()).expect("room");
    let mut spare = Some(vec![0u8; aal5::cpcs_len(size)]);
    let mut ok = 0u64;
    let r = rate(secs, size, || {
        if let Some(b) = spare.take() {
            rx.post_buffer(VC, b).expect("room");
        }
        rx.push(Instant::ZERO, black_box(&cells), &mut |d| {
            ok += u64::from(d.status == Status::Intact);
            spare = Some(d.into_buffer());
        });
    });
    assert!(
        ok > 0 && rx.stats().pdus_dropped.total() == 0,
        "bench PDUs must verify"
    );
    r
}

/// The stream case: many SDUs whose total exceeds the last-level cache, so
/// every byte comes from and goes to DRAM.
fn stream_rates(secs: f64, total: usize, kernel: Kernel) -> (f64, f64, f64) {
    let size = 65535;
    let n = (total / size).max(1);
    let src = pattern(n * size, 4);
    // Touch every page first so the figures are of memory, not page faults.
    let mut dst = vec![1u8; n * size];
    let per = aal5::cells_for(size);
    let mut cells = vec![[1u8; 53]; n * per];
    let mut i = 0;
    let memcpy = rate(secs, size, || {
        let k = i % n;
        dst[k * size..(k + 1) * size].copy_from_slice(black_box(&src[k * size..(k + 1) * size]));
        black_box(&mut dst[k * size..(k + 1) * size]);
        i += 1;
    });
    let mut tx = Aal5Tx::with_kernel(VC, Format::Uni, kernel).expect("valid VC");
    let mut i = 0;
    let seg = rate(secs, size, || {
        let k = i % n;
        tx.segment_into(
            &src[k * size..(k + 1) * size],
            PduOptions::default(),
            &mut cells[k * per..(k + 1) * per],
        )
        .expect("fits");
        i += 1;
    });
    // Make sure every slot holds a PDU before reassembling them.
    for k in 0..n {
        tx.segment_into(
            &src[k * size..(k + 1) * size],
            PduOptions::default(),
            &mut cells[k * per..(k + 1) * per],
        )
        .expect("fits");
    }
    let mut rx = Aal5Rx::new(rx_config(kernel));
    rx.open_vc(VC, VcConfig::default()).expect("room");
    let mut bufs: Vec<Option<Vec<u8>>> = (0..n)
        .map(|_| Some(vec![0u8; aal5::cpcs_len(size)]))
        .collect();
    let mut i = 0;
    let reasm = rate(secs, size, || {
        let k = i % n;
        if let Some(b) = bufs[k].take() {
            rx.post_buffer(VC, b).expect("room");
        }
        rx.push(Instant::ZERO, &cells[k * per..(k + 1) * per], &mut |d| {
            bufs[k] = Some(d.into_buffer());
        });
        i += 1;
    });
    drop(dst);
    (memcpy, seg, reasm)
}

fn hec_rates(secs: f64) -> (f64, f64, f64) {
    let mut cells: Vec<CellBytes> = (0..1024u16)
        .map(|i| {
            let mut c = [0u8; 53];
            Header::data(VcId::new(1, 32 + i))
                .emit(&mut c)
                .expect("valid header");
            c
        })
        .collect();
    let gen = rate(secs, cells.len(), || {
        for c in cells.iter_mut() {
            c[4] = aurora_wire::crc::hec(&[c[0], c[1], c[2], c[3]]);
        }
        black_box(&cells);
    });
    let mut rx = HecReceiver::new();
    let check = rate(secs, cells.len(), || {
        let mut ok = 0u32;
        for c in cells.iter_mut() {
            ok += u32::from(rx.check_cell(c).accepted());
        }
        black_box(ok);
    });
    // One VC's run of cells: the receiver recognises the repeated header.
    let first = cells[0];
    cells.iter_mut().for_each(|c| *c = first);
    let mut rx = HecReceiver::new();
    let run = rate(secs, cells.len(), || {
        let mut ok = 0u32;
        for c in cells.iter_mut() {
            ok += u32::from(rx.check_cell(c).accepted());
        }
        black_box(ok);
    });
    (gen, check, run)
}

fn aal34_rates(secs: f64, size: usize) -> (f64, f64) {
    let sdu = pattern(size, 5);
    let mut tx = Aal34Tx::new(VC, Format::Uni).expect("valid VC");
    let mut cells = vec![[0u8; 53]; aal34::cells_for(size)];
    let seg = rate(secs, size, || {
        tx.segment_into(black_box(&sdu), 7, &mut cells)
            .expect("fits");
    });
    let mut rx = Aal34Rx::new(Default::default());
    rx.open_vc(VC, Default::default()).expect("room");
    // Sequence numbers are checked within a PDU only, so the same cells can
    // be reassembled again and again.
    let mut ok = 0u64;
    let reasm = rate(secs, size, || {
        rx.push(Instant::ZERO, black_box(&cells), &mut |d| {
            ok += d.len() as u64;
        });
    });
    assert!(
        ok > 0 && rx.stats().pdus_dropped.total() == 0,
        "bench PDUs must verify"
    );
    (seg, reasm)
}

/// Runs every figure.
pub fn run(opts: &Opts, mut progress: impl FnMut(&str)) -> Vec<Row> {
    let mut rows = Vec::new();
    let s = opts.secs;
    for &size in &SIZES {
        progress(&format!("memcpy and AAL5 at {size} bytes"));
        let m = memcpy_rate(s, size);
        let seg = aal5_seg_rate(s, size, opts.kernel);
        let re = aal5_reasm_rate(s, size, opts.kernel);
        rows.push(Row {
            what: "memcpy".into(),
            size,
            gbps: m / 1e9,
            vs_memcpy: Some(1.0),
            per_sec: None,
        });
        rows.push(Row {
            what: "aal5 segment".into(),
            size,
            gbps: seg / 1e9,
            vs_memcpy: Some(seg / m),
            per_sec: None,
        });
        rows.push(Row {
            what: "aal5 reassemble".into(),
            size,
            gbps: re / 1e9,
            vs_memcpy: Some(re / m),
            per_sec: None,
        });
    }
    progress("stream case (larger than the last-level cache)");
    let (m, seg, re) = stream_rates(s, opts.stream_bytes, opts.kernel);
    let size = 65535;
    rows.push(Row {
        what: "memcpy stream".into(),
        size,
        gbps: m / 1e9,
        vs_memcpy: Some(1.0),
        per_sec: None,
    });
    rows.push(Row {
        what: "aal5 segment stream".into(),
        size,
        gbps: seg / 1e9,
        vs_memcpy: Some(seg / m),
        per_sec: None,
    });
    rows.push(Row {
        what: "aal5 reassemble stream".into(),
        size,
        gbps: re / 1e9,
        vs_memcpy: Some(re / m),
        per_sec: None,
    });
    progress("HEC");
    let (gen, check, run) = hec_rates(s);
    rows.push(Row {
        what: "hec generate".into(),
        size: 0,
        gbps: gen * 53.0 / 1e9,
        vs_memcpy: None,
        per_sec: Some(gen),
    });
    rows.push(Row {
        what: "hec check".into(),
        size: 0,
        gbps: check * 53.0 / 1e9,
        vs_memcpy: None,
        per_sec: Some(check),
    });
    rows.push(Row {
        what: "hec check one VC".into(),
        size: 0,
        gbps: run * 53.0 / 1e9,
        vs_memcpy: None,
        per_sec: Some(run),
    });
    for size in [9180, 65535] {
        progress(&format!("AAL3/4 at {size} bytes"));
        let m = rows
            .iter()
            .find(|r| r.what == "memcpy" && r.size == size)
            .map_or(1.0, |r| r.gbps * 1e9);
        let (seg, re) = aal34_rates(s, size);
        rows.push(Row {
            what: "aal3/4 segment".into(),
            size,
            gbps: seg / 1e9,
            vs_memcpy: Some(seg / m),
            per_sec: None,
        });
        rows.push(Row {
            what: "aal3/4 reassemble".into(),
            size,
            gbps: re / 1e9,
            vs_memcpy: Some(re / m),
            per_sec: None,
        });
    }
    rows
}

/// The table as text.
pub fn table(rows: &[Row], kernel: Kernel) -> String {
    let mut s = format!(
        "aurora bench sar (one thread, CRC kernel {kernel:?}; GB/s = 1e9 bytes of SDU per second)\n\
         {:<24} {:>7} {:>9} {:>10} {:>14}\n",
        "what", "bytes", "GB/s", "x memcpy", "per second"
    );
    for r in rows {
        s += &format!(
            "{:<24} {:>7} {:>9.2} {:>10} {:>14}\n",
            r.what,
            if r.size == 0 {
                "-".into()
            } else {
                r.size.to_string()
            },
            r.gbps,
            r.vs_memcpy.map_or("-".into(), |v| format!("{v:.3}")),
            r.per_sec.map_or("-".into(), |v| format!("{:.1}M", v / 1e6)),
        );
    }
    s
}
