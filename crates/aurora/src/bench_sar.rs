//! `aurora bench sar`: segmentation and reassembly speed against memcpy
//! and against the copy that makes (or reads) the same cell layout, all
//! measured in the same run on one thread.

use std::hint::black_box;
use std::time::Instant as WallClock;

use aurora_sar::aal34::{Aal34Rx, Aal34Tx};
use aurora_sar::fold::Crc32State;
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
    /// Ratio to the cell-layout copy of the same size and direction in
    /// the same run (scatter for segmentation, gather for reassembly).
    pub vs_layout: Option<f64>,
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

/// Where a destination starts against its source: half a page further on,
/// modulo a page. When the two agree modulo 4096 the CPU takes loads from
/// one as depending on earlier stores to the other ("4K aliasing"); on the
/// Zen 4 machine that alone moved AAL5 segmentation of 65535 bytes between
/// 24 and 39 GB/s from one allocation to the next. Between payloads and
/// cells the gap drifts 5 bytes a cell (48 read, 53 written), so a 64 KiB
/// PDU still crosses one aliasing stretch, but every run crosses the same
/// one. Every copy here, the limits and the AAL engines alike, starts this
/// way, so a ratio compares code, not luck.
const APART: usize = 2048;
const PAGE: usize = 4096;

/// A buffer of `len` items whose first item starts at `offset` modulo a
/// page (exactly for bytes; for 53-byte cells too, since 53 and 4096 are
/// coprime).
struct Placed<T> {
    buf: Vec<T>,
    start: usize,
    len: usize,
}

impl<T: Clone> Placed<T> {
    fn new(fill: T, len: usize, offset: usize) -> Self {
        let size = size_of::<T>();
        let mut buf = vec![fill.clone(); len + PAGE];
        // Write every page, the slack around the slice too. Memory fresh
        // from the kernel is not present until written, and on Zen 4 a
        // masked access whose window reaches into such a page costs 90-200
        // ns (the segmenter's windows reach up to 55 bytes past an SDU and
        // 144 before it): a limit or figure would then depend on where the
        // allocator put the buffer.
        black_box(&mut buf[..]).fill(fill);
        let base = buf.as_ptr() as usize;
        let start = (0..PAGE)
            .find(|i| (base + i * size) % PAGE == offset % PAGE)
            .expect("some start lands on the offset");
        Placed { buf, start, len }
    }

    /// Where the buffer starts, modulo a page.
    fn offset(&self) -> usize {
        self.as_ptr() as usize % PAGE
    }
}

impl<T> std::ops::Deref for Placed<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl<T> std::ops::DerefMut for Placed<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// `len` zero bytes, every page of them written (see [`Placed::new`]).
fn written(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    black_box(&mut v[..]).fill(0);
    v
}

/// `n` pattern bytes at page offset 0.
fn source(n: usize, seed: u64) -> Placed<u8> {
    let mut p = Placed::new(0u8, n, 0);
    p.copy_from_slice(&pattern(n, seed));
    p
}

/// Room for `n` cells [`APART`] bytes after a source at `src_offset`.
fn cells_after(n: usize, src_offset: usize) -> Placed<CellBytes> {
    Placed::new([0u8; 53], n, src_offset + APART)
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
#[inline(never)]
pub fn memcpy_rate(secs: f64, size: usize) -> f64 {
    let src = source(size, 1);
    let mut dst = Placed::new(0u8, size, APART);
    rate(secs, size, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut *dst);
    })
}

/// The cell-layout copy the segmenter's output has: the SDU scattered into
/// 48-byte payloads behind a 5-byte header, the last cell's rest zeroed,
/// no trailer and no CRC. What segmentation costs beyond copying bytes
/// into cells is the ratio to this.
fn scatter(sdu: &[u8], header: &[u8; 5], cells: &mut [CellBytes]) {
    let mut chunks = sdu.chunks_exact(48);
    let mut cells = cells.iter_mut();
    // The chunks first: when they run out, zip takes no cell.
    for (p, c) in chunks.by_ref().zip(cells.by_ref()) {
        c[..5].copy_from_slice(header);
        c[5..].copy_from_slice(p);
    }
    scatter_rest(chunks.remainder(), header, cells.into_slice());
}

/// The cells after the last whole payload: the SDU's last bytes in the
/// first, zeros after them.
fn scatter_rest(rest: &[u8], header: &[u8; 5], cells: &mut [CellBytes]) {
    for (i, c) in cells.iter_mut().enumerate() {
        c[..5].copy_from_slice(header);
        let n = if i == 0 { rest.len() } else { 0 };
        c[5..5 + n].copy_from_slice(&rest[..n]);
        c[5 + n..].fill(0);
    }
}

/// The reverse: the payloads of `cells` gathered into `out`, headers not
/// looked at, no CRC: the copy reassembly has to make.
fn gather(cells: &[CellBytes], out: &mut [u8]) {
    let mut chunks = out.chunks_exact_mut(48);
    let mut cells = cells.iter();
    // The chunks first: when they run out, zip takes no cell.
    for (o, c) in chunks.by_ref().zip(cells.by_ref()) {
        o.copy_from_slice(&c[5..]);
    }
    gather_rest(cells.as_slice(), chunks.into_remainder());
}

/// The bytes of `out` after its last whole payload, from the next cell.
fn gather_rest(cells: &[CellBytes], rest: &mut [u8]) {
    if let Some(c) = cells.first() {
        rest.copy_from_slice(&c[5..5 + rest.len()]);
    }
}

/// The layout copies with 64-byte registers (AVX-512BW), in two ways: one
/// masked load and one masked store a cell (on the Zen 4 machine a fifth to
/// a half faster at 1500 and 9180 bytes than the portable loops above,
/// which move each payload in two pieces), and plain 64-byte stores that
/// run past a cell or payload into the next one's place, which that one
/// then overwrites (masked only at the ends). The plain scatter loads a
/// payload with a masked load that merges the header, as the AAL5
/// segmenter does on Intel CPUs; the plain gather loads with plain loads,
/// as the AAL5 receiver does. On the Intel Xeon the plain ways are the
/// fastest. A ceiling the AAL5 kernels could beat would be no ceiling, so
/// the run measures every way and keeps the fastest; and since the
/// kernels prefetch on long runs, each way is also measured with the same
/// prefetches (the lines of the group of four cells sixteen cells on,
/// asked for every four cells).
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::{gather_rest, scatter_rest, CellBytes};
    use core::arch::x86_64::*;

    /// Payload bytes of a cell (5 to 52) in a 64-byte register.
    const PAYLOAD: u64 = ((1 << 53) - 1) & !0x1F;
    /// A whole cell.
    const CELL: u64 = (1 << 53) - 1;
    /// 48 bytes.
    const P48: u64 = (1 << 48) - 1;

    /// How far ahead the prefetching copies ask for lines, in cells: the
    /// same as the AAL5 kernels (`PREFETCH_AHEAD` in `aurora-sar`'s
    /// `fold.rs`), which must stay in step with this.
    const AHEAD: usize = 16;

    /// Prefetches the lines of four cells' worth of bytes `AHEAD` cells
    /// after `read` and `write` (`read_stride` and `write_stride` bytes a
    /// cell), read prefetches for both, as the AAL5 kernels do.
    #[inline(always)]
    fn prefetch(read: *const u8, read_stride: usize, write: *const u8, write_stride: usize) {
        // SAFETY: prefetches only (hints, never accesses); the pointers are
        // computed with wrapping arithmetic.
        unsafe {
            let r = read.wrapping_add(AHEAD * read_stride);
            for line in (0..4 * read_stride).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(r.wrapping_add(line).cast());
            }
            let w = write.wrapping_add(AHEAD * write_stride);
            for line in (0..4 * write_stride).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add(line).cast());
            }
        }
    }

    /// Whether this CPU runs them.
    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")
    }

    /// As [`super::scatter`]: masked loads and stores, or with `PLAIN` a
    /// plain store where the bytes it runs over are a later cell's; with
    /// `PREFETCH`, prefetching every four cells.
    ///
    /// # Safety
    /// The CPU has AVX-512F and AVX-512BW ([`available`]).
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn scatter<const PLAIN: bool, const PREFETCH: bool>(
        sdu: &[u8],
        header: &[u8; 5],
        cells: &mut [CellBytes],
    ) {
        let whole = (sdu.len() / 48).min(cells.len());
        let mut h = [0u8; 8];
        h[..5].copy_from_slice(header);
        let hv = _mm512_set1_epi64(i64::from_ne_bytes(h));
        // Cells before `plain` may take a plain store: a later cell
        // exists.
        let plain = if PLAIN {
            whole.min(cells.len().saturating_sub(1))
        } else {
            0
        };
        let out = cells.as_mut_ptr().cast::<u8>();
        for i in 0..whole {
            let c = out.wrapping_add(53 * i);
            let s = sdu.as_ptr().wrapping_add(48 * i);
            if PREFETCH && i % 4 == 0 {
                prefetch(s, 48, c, 53);
            }
            // SAFETY: cell i is inside `cells` and payload i inside `sdu`
            // (i < whole). The load touches only the bytes its mask
            // selects: sdu[48i..48i + 48] (named from 5 bytes before). A
            // masked store writes the cell's 53 bytes; below `plain`, a
            // plain store writes them and the next cell's first 11, which
            // exists, and whose own store (here or in `scatter_rest`)
            // writes those bytes again.
            unsafe {
                let v = _mm512_mask_loadu_epi8(hv, PAYLOAD, s.wrapping_sub(5).cast());
                if i < plain {
                    _mm512_storeu_si512(c.cast(), v);
                } else {
                    _mm512_mask_storeu_epi8(c.cast(), CELL, v);
                }
            }
        }
        scatter_rest(&sdu[48 * whole..], header, &mut cells[whole..]);
    }

    /// As [`super::gather`]; `PLAIN` and `PREFETCH` as in [`scatter`].
    ///
    /// # Safety
    /// As [`scatter`].
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn gather<const PLAIN: bool, const PREFETCH: bool>(
        cells: &[CellBytes],
        out: &mut [u8],
    ) {
        let whole = (out.len() / 48).min(cells.len());
        // Cells before `plain` may take plain accesses: a later cell
        // exists and out[48i..48i + 64] is inside `out`.
        let plain = if PLAIN {
            whole
                .min(cells.len().saturating_sub(1))
                .min(out.len().saturating_sub(16) / 48)
        } else {
            0
        };
        let o = out.as_mut_ptr();
        for (i, c) in cells[..whole].iter().enumerate() {
            let d = o.wrapping_add(48 * i);
            if PREFETCH && i % 4 == 0 {
                prefetch(c.as_ptr(), 53, d, 48);
            }
            // SAFETY: masked accesses touch only the 48 bytes their masks
            // select: bytes 5 to 52 of cell `c`, and out[48i..48i + 48],
            // inside `out` since i < out.len() / 48. Below `plain`, the
            // load reads the next cell's first 16 bytes too (that cell
            // exists) and the store writes out[48i..48i + 64], inside
            // `out`, whose bytes past the payload the next cell's store or
            // `gather_rest` writes again.
            unsafe {
                let s = c.as_ptr().add(5);
                if i < plain {
                    _mm512_storeu_si512(d.cast(), _mm512_loadu_si512(s.cast()));
                } else {
                    let v = _mm512_maskz_loadu_epi8(P48, s.cast());
                    _mm512_mask_storeu_epi8(d.cast(), P48, v);
                }
            }
        }
        gather_rest(&cells[whole..], &mut out[48 * whole..]);
    }
}

/// A way to make (and read back) the cell layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Portable,
    /// With 64-byte registers ([`wide`]): plain rather than masked
    /// accesses, and prefetching.
    #[cfg(target_arch = "x86_64")]
    Wide {
        plain: bool,
        prefetch: bool,
    },
}

/// The layout copies this CPU runs.
fn layouts() -> Vec<Layout> {
    #[cfg(target_arch = "x86_64")]
    if wide::available() {
        let mut all = vec![Layout::Portable];
        for plain in [false, true] {
            for prefetch in [false, true] {
                all.push(Layout::Wide { plain, prefetch });
            }
        }
        return all;
    }
    vec![Layout::Portable]
}

/// The highest of `rate` over the layout copies this CPU runs: a ceiling
/// is the best copy there is, not the first one written.
fn fastest(mut rate: impl FnMut(Layout) -> f64) -> f64 {
    layouts().into_iter().map(&mut rate).fold(0.0, f64::max)
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Layout::Wide { plain, prefetch } => match (plain, prefetch) {
                (false, false) => "masked",
                (false, true) => "masked prefetching",
                (true, false) => "plain",
                (true, true) => "plain prefetching",
            },
        }
    }

    fn scatter(self, sdu: &[u8], header: &[u8; 5], cells: &mut [CellBytes]) {
        match self {
            Layout::Portable => scatter(sdu, header, cells),
            #[cfg(target_arch = "x86_64")]
            Layout::Wide { plain, prefetch } => {
                debug_assert!(wide::available());
                // SAFETY: `layouts` offers Wide only where the CPU runs it.
                unsafe {
                    match (plain, prefetch) {
                        (false, false) => wide::scatter::<false, false>(sdu, header, cells),
                        (false, true) => wide::scatter::<false, true>(sdu, header, cells),
                        (true, false) => wide::scatter::<true, false>(sdu, header, cells),
                        (true, true) => wide::scatter::<true, true>(sdu, header, cells),
                    }
                }
            }
        }
    }

    fn gather(self, cells: &[CellBytes], out: &mut [u8]) {
        match self {
            Layout::Portable => gather(cells, out),
            #[cfg(target_arch = "x86_64")]
            Layout::Wide { plain, prefetch } => {
                debug_assert!(wide::available());
                // SAFETY: as in `scatter`.
                unsafe {
                    match (plain, prefetch) {
                        (false, false) => wide::gather::<false, false>(cells, out),
                        (false, true) => wide::gather::<false, true>(cells, out),
                        (true, false) => wide::gather::<true, false>(cells, out),
                        (true, true) => wide::gather::<true, true>(cells, out),
                    }
                }
            }
        }
    }
}

/// Scatter and gather bytes per second (of SDU) for `size`, cache-resident.
#[inline(never)]
fn layout_rates(secs: f64, size: usize) -> (f64, f64) {
    let sdu = source(size, 6);
    let mut cells = cells_after(aal5::cells_for(size), sdu.offset());
    let header = [0, 0, 2, 0xA0, 0];
    let mut out = Placed::new(0u8, aal5::cpcs_len(size), cells.offset() + APART);
    let sc = fastest(|l| {
        rate(secs, size, || {
            l.scatter(black_box(&sdu), &header, &mut cells);
            black_box(&mut *cells);
        })
    });
    let ga = fastest(|l| {
        rate(secs, size, || {
            l.gather(black_box(&cells), &mut out);
            black_box(&mut *out);
        })
    });
    (sc, ga)
}

#[inline(never)]
fn aal5_seg_rate(secs: f64, size: usize, kernel: Kernel) -> f64 {
    let sdu = source(size, 2);
    let mut tx = Aal5Tx::with_kernel(VC, Format::Uni, kernel).expect("valid VC");
    let mut cells = cells_after(aal5::cells_for(size), sdu.offset());
    rate(secs, size, || {
        let n = tx
            .segment_into(black_box(&sdu), PduOptions::default(), &mut cells)
            .expect("fits");
        black_box(&cells[n - 1]);
    })
}

/// The CRC-32 alone over a PDU of `size` bytes (its whole CPCS-PDU, laid
/// end to end, no cells read or written), in bytes of SDU a second: with
/// the same kernel, a ceiling over both AAL5 rates (a floor under their
/// time), since each folds every byte once and copies it too.
#[inline(never)]
fn crc_rate(secs: f64, size: usize, kernel: Kernel) -> f64 {
    let pdu = source(aal5::cpcs_len(size), 7);
    let mut crc = Crc32State::new(kernel);
    rate(secs, size, || {
        crc.reset(kernel);
        crc.feed_payloads(black_box(&pdu));
        black_box(crc.register());
    })
}

/// The CRC-32 fold's carry-less multiplies with nothing else, in bytes a
/// second: three accumulators, each 128-bit lane folded forward with two
/// 64-bit products and the next block added, on registers only (no loads,
/// no reduction), at the width of the kernel chosen. No code folding every
/// byte with that kernel's instructions can beat it on this CPU: the
/// arithmetic limit over the AAL5 rates. `None` for the portable kernel,
/// which multiplies by table, or a kernel this CPU cannot run.
#[inline(never)]
fn multiply_limit_rate(secs: f64, kernel: Kernel) -> Option<f64> {
    if !kernel.supported() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        const STEPS: usize = 1024;
        match kernel {
            Kernel::Vpclmul => Some(rate(secs, STEPS * 192, || {
                // SAFETY: the CPU runs the Vpclmul kernel (checked above),
                // whose features include AVX-512F and VPCLMULQDQ.
                black_box(unsafe { multiply_limit::wide(STEPS) });
            })),
            Kernel::Clmul => Some(rate(secs, STEPS * 48, || {
                // SAFETY: the CPU runs the Clmul kernel (checked above),
                // whose features include PCLMULQDQ and SSE2.
                black_box(unsafe { multiply_limit::narrow(STEPS) });
            })),
            Kernel::Portable => None,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = secs;
        None
    }
}

/// The multiply limits' loops (see [`multiply_limit_rate`]).
#[cfg(target_arch = "x86_64")]
mod multiply_limit {
    use super::black_box;
    use core::arch::x86_64::*;

    /// `steps` folds of 192 bytes: three 512-bit accumulators, six
    /// VPCLMULQDQ a step, as the 512-bit kernel does a group of cells.
    ///
    /// # Safety
    /// The CPU has AVX-512F and VPCLMULQDQ.
    #[target_feature(enable = "avx512f,vpclmulqdq")]
    pub(super) unsafe fn wide(steps: usize) -> __m512i {
        let k = black_box(_mm512_set1_epi64(0x1_2345_6789));
        let z = black_box(_mm512_set1_epi64(0x5A5A_5A5A));
        let mut acc = [black_box(_mm512_set1_epi64(1)); 3];
        for _ in 0..steps {
            for a in &mut acc {
                let hi = _mm512_clmulepi64_epi128(*a, k, 0x11);
                let lo = _mm512_clmulepi64_epi128(*a, k, 0x00);
                *a = _mm512_ternarylogic_epi64(hi, lo, z, 0x96);
            }
        }
        _mm512_ternarylogic_epi64(acc[0], acc[1], acc[2], 0x96)
    }

    /// `steps` folds of 48 bytes: three 128-bit accumulators, six
    /// PCLMULQDQ a step, as the 128-bit kernel does a cell.
    ///
    /// # Safety
    /// The CPU has PCLMULQDQ and SSE2.
    #[target_feature(enable = "pclmulqdq,sse2")]
    pub(super) unsafe fn narrow(steps: usize) -> __m128i {
        let k = black_box(_mm_set1_epi64x(0x1_2345_6789));
        let z = black_box(_mm_set1_epi64x(0x5A5A_5A5A));
        let mut acc = [black_box(_mm_set1_epi64x(1)); 3];
        for _ in 0..steps {
            for a in &mut acc {
                let hi = _mm_clmulepi64_si128(*a, k, 0x11);
                let lo = _mm_clmulepi64_si128(*a, k, 0x00);
                *a = _mm_xor_si128(_mm_xor_si128(hi, lo), z);
            }
        }
        _mm_xor_si128(_mm_xor_si128(acc[0], acc[1]), acc[2])
    }
}

fn rx_config(kernel: Kernel) -> RxConfig {
    RxConfig {
        kernel,
        ..RxConfig::default()
    }
}

#[inline(never)]
fn aal5_reasm_rate(secs: f64, size: usize, kernel: Kernel) -> f64 {
    let sdu = pattern(size, 3);
    let mut tx = Aal5Tx::with_kernel(VC, Format::Uni, kernel).expect("valid VC");
    // The posted buffer (the same one each PDU) is where malloc put it;
    // the cells go half a page before it.
    let posted = written(aal5::cpcs_len(size));
    let at = posted.as_ptr() as usize % PAGE;
    let mut cells = Placed::new([0u8; 53], aal5::cells_for(size), at + PAGE - APART);
    tx.segment_into(&sdu, PduOptions::default(), &mut cells)
        .expect("fits");
    let mut rx = Aal5Rx::new(rx_config(kernel));
    rx.open_vc(VC, VcConfig::default()).expect("room");
    let mut spare = Some(posted);
    let mut ok = 0u64;
    let r = rate(secs, size, || {
        if let Some(b) = spare.take() {
            rx.post_buffer(VC, b).expect("room");
        }
        rx.push(Instant::ZERO, black_box(&*cells), &mut |d| {
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
#[inline(never)]
fn stream_rates(secs: f64, total: usize, kernel: Kernel) -> Stream {
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
    let header = [0, 0, 2, 0xA0, 0];
    let scattered = fastest(|l| {
        let mut i = 0;
        rate(secs, size, || {
            let k = i % n;
            l.scatter(
                black_box(&src[k * size..(k + 1) * size]),
                &header,
                &mut cells[k * per..(k + 1) * per],
            );
            i += 1;
        })
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
        .map(|_| Some(written(aal5::cpcs_len(size))))
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
    let gathered = fastest(|l| {
        let mut i = 0;
        rate(secs, size, || {
            let k = i % n;
            l.gather(
                black_box(&cells[k * per..(k + 1) * per]),
                &mut dst[k * size..(k + 1) * size],
            );
            i += 1;
        })
    });
    Stream {
        memcpy,
        scatter: scattered,
        seg,
        gather: gathered,
        reasm,
    }
}

/// The stream case's figures, bytes of SDU per second.
struct Stream {
    memcpy: f64,
    scatter: f64,
    seg: f64,
    gather: f64,
    reasm: f64,
}

/// HEC generation, checking, and checking a run of one VC's cells, cells
/// a second. Like every measuring function here, never inlined into
/// [`run`], so that what is inlined into the loops measured does not
/// depend on how large `run` has grown: inlined into it, the generation
/// loop once lost the CRC-8's inlining and read a third of its rate.
#[inline(never)]
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

#[inline(never)]
fn aal34_rates(secs: f64, size: usize, kernel: Kernel) -> (f64, f64) {
    let sdu = source(size, 5);
    let mut tx = Aal34Tx::with_kernel(VC, Format::Uni, kernel).expect("valid VC");
    let mut cells = cells_after(aal34::cells_for(size), sdu.offset());
    let seg = rate(secs, size, || {
        tx.segment_into(black_box(&sdu), 7, &mut cells)
            .expect("fits");
    });
    let mut rx = Aal34Rx::with_kernel(Default::default(), kernel);
    rx.open_vc(VC, Default::default()).expect("room");
    // The receiver copies into a buffer of its own, which malloc places
    // (and, PDU after PDU, places again where the last one was freed): one
    // PDU finds it, and the cells go half a page before it, as elsewhere.
    let mut at = 0;
    rx.push(Instant::ZERO, &cells, &mut |d| {
        at = d.sdu().as_ptr() as usize % PAGE;
    });
    let mut placed = Placed::new([0u8; 53], cells.len(), at + PAGE - APART);
    placed.copy_from_slice(&cells);
    // Sequence numbers are checked within a PDU only, so the same cells can
    // be reassembled again and again.
    let mut ok = 0u64;
    let reasm = rate(secs, size, || {
        rx.push(Instant::ZERO, black_box(&*placed), &mut |d| {
            ok += d.len() as u64;
        });
    });
    assert!(
        ok > 0 && rx.stats().pdus_dropped.total() == 0,
        "bench PDUs must verify"
    );
    (seg, reasm)
}

/// Rounds in which the figures of one size are measured, one after
/// another, each keeping its best. A slow stretch of the machine (this VM's
/// host) then costs one round of every figure, not all of one figure, so a
/// limit is not read low beside a figure read high (which would inflate
/// their ratio).
const ROUNDS: usize = 3;

/// The last-level cache's size, if the system says.
fn llc_bytes() -> Option<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size").ok()?;
    let s = s.trim();
    let (num, mult) = match (s.strip_suffix('K'), s.strip_suffix('M')) {
        (Some(n), _) => (n, 1024),
        (_, Some(n)) => (n, 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<usize>().ok().map(|n| n * mult)
}

/// `aurora bench sar`: every figure with CRC kernel `kernel`, as a table
/// or JSON; the stream case over `stream_mib` MiB (default twice the
/// last-level cache, 256 to 1024 MiB).
pub fn main(secs: f64, stream_mib: Option<u64>, kernel: Kernel, json: bool) -> Result<(), String> {
    if !kernel.supported() {
        return Err(format!(
            "--kernel {} needs CPU features this one lacks (clmul: PCLMULQDQ and SSSE3; vpclmul: AVX-512 F, BW, VL, VBMI and VPCLMULQDQ)",
            format!("{kernel:?}").to_lowercase()
        ));
    }
    let stream_bytes = match stream_mib {
        Some(m) => (m as usize) << 20,
        None => (llc_bytes().unwrap_or(32 << 20) * 2).clamp(256 << 20, 1 << 30),
    };
    let opts = Opts {
        secs,
        stream_bytes,
        kernel,
    };
    let rows = run(&opts, |what| {
        if !json {
            eprintln!("measuring {what} ...");
        }
    });
    if json {
        let text = serde_json::to_string_pretty(&rows).expect("rows serialise");
        println!("{text}");
    } else {
        print!("{}", table(&rows, kernel));
    }
    Ok(())
}

/// Runs every figure.
pub fn run(opts: &Opts, mut progress: impl FnMut(&str)) -> Vec<Row> {
    let mut rows = Vec::new();
    let s = opts.secs;
    // One row: `what` at `size`, `bps` bytes a second, against memcpy `m`
    // and the layout copy `l` where one applies.
    let row = |what: &str, size, bps: f64, m: f64, l: Option<f64>| Row {
        what: what.into(),
        size,
        gbps: bps / 1e9,
        vs_memcpy: Some(bps / m),
        vs_layout: l.map(|l| bps / l),
        per_sec: None,
    };
    // The multiply limit does not depend on the size: it is measured in
    // every round of every size, and the best kept.
    let mut limit: Option<f64> = None;
    for &size in &SIZES {
        progress(&format!(
            "memcpy, the cell-layout copies and AAL5 at {size} bytes"
        ));
        let mut best = [0f64; 6];
        let t = s / ROUNDS as f64;
        for _ in 0..ROUNDS {
            let (sc, ga) = layout_rates(t, size);
            let got = [
                memcpy_rate(t, size),
                sc,
                ga,
                aal5_seg_rate(t, size, opts.kernel),
                aal5_reasm_rate(t, size, opts.kernel),
                crc_rate(t, size, opts.kernel),
            ];
            for (b, g) in best.iter_mut().zip(got) {
                *b = b.max(g);
            }
            if let Some(f) = multiply_limit_rate(t, opts.kernel) {
                limit = Some(limit.map_or(f, |l| l.max(f)));
            }
        }
        let [m, sc, ga, seg, re, crc] = best;
        rows.push(row("memcpy", size, m, m, None));
        rows.push(row("cell layout scatter", size, sc, m, Some(sc)));
        rows.push(row("cell layout gather", size, ga, m, Some(ga)));
        rows.push(row("aal5 segment", size, seg, m, Some(sc)));
        rows.push(row("aal5 reassemble", size, re, m, Some(ga)));
        rows.push(row("crc-32 alone", size, crc, m, None));
    }
    if let Some(f) = limit {
        rows.push(Row {
            what: "crc-32 multiplies alone".into(),
            size: 0,
            gbps: f / 1e9,
            vs_memcpy: None,
            vs_layout: None,
            per_sec: None,
        });
    }
    progress("stream case (larger than the last-level cache)");
    let st = stream_rates(s, opts.stream_bytes, opts.kernel);
    let (size, m) = (65535, st.memcpy);
    rows.push(row("memcpy stream", size, m, m, None));
    rows.push(row(
        "layout scatter stream",
        size,
        st.scatter,
        m,
        Some(st.scatter),
    ));
    rows.push(row(
        "layout gather stream",
        size,
        st.gather,
        m,
        Some(st.gather),
    ));
    rows.push(row(
        "aal5 segment stream",
        size,
        st.seg,
        m,
        Some(st.scatter),
    ));
    rows.push(row(
        "aal5 reassemble stream",
        size,
        st.reasm,
        m,
        Some(st.gather),
    ));
    progress("HEC");
    let (gen, check, run) = hec_rates(s);
    rows.push(Row {
        what: "hec generate".into(),
        size: 0,
        gbps: gen * 53.0 / 1e9,
        vs_memcpy: None,
        vs_layout: None,
        per_sec: Some(gen),
    });
    rows.push(Row {
        what: "hec check".into(),
        size: 0,
        gbps: check * 53.0 / 1e9,
        vs_memcpy: None,
        vs_layout: None,
        per_sec: Some(check),
    });
    rows.push(Row {
        what: "hec check one VC".into(),
        size: 0,
        gbps: run * 53.0 / 1e9,
        vs_memcpy: None,
        vs_layout: None,
        per_sec: Some(run),
    });
    for size in [9180, 65535] {
        progress(&format!("AAL3/4 at {size} bytes"));
        let m = rows
            .iter()
            .find(|r| r.what == "memcpy" && r.size == size)
            .map_or(1.0, |r| r.gbps * 1e9);
        let (seg, re) = aal34_rates(s, size, opts.kernel);
        rows.push(row("aal3/4 segment", size, seg, m, None));
        rows.push(row("aal3/4 reassemble", size, re, m, None));
    }
    rows
}

/// The table as text.
pub fn table(rows: &[Row], kernel: Kernel) -> String {
    let copies = layouts()
        .iter()
        .map(|l| l.name())
        .collect::<Vec<_>>()
        .join(", ");
    let mut s = format!(
        "aurora bench sar (one thread, CRC kernel {kernel:?}; each layout ceiling the fastest of the copies {copies}; GB/s = 1e9 bytes of SDU per second)\n\
         {:<24} {:>7} {:>9} {:>10} {:>10} {:>14}\n",
        "what", "bytes", "GB/s", "x memcpy", "x layout", "per second"
    );
    for r in rows {
        s += &format!(
            "{:<24} {:>7} {:>9.2} {:>10} {:>10} {:>14}\n",
            r.what,
            if r.size == 0 {
                "-".into()
            } else {
                r.size.to_string()
            },
            r.gbps,
            r.vs_memcpy.map_or("-".into(), |v| format!("{v:.3}")),
            r.vs_layout.map_or("-".into(), |v| format!("{v:.3}")),
            r.per_sec.map_or("-".into(), |v| format!("{:.1}M", v / 1e6)),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scatter ceiling makes the segmenter's layout: the same payload
    /// bytes in the same cells (the segmenter adds its trailer and CRC in
    /// the last cell); the gather reads the SDU back.
    #[test]
    fn the_layout_copies_make_and_read_the_segmenters_layout() {
        for l in layouts() {
            for size in [0, 1, 40, 47, 48, 49, 95, 96, 100, 143, 144, 1500, 9180] {
                layout_round_trip(l, size);
            }
        }
    }

    fn layout_round_trip(l: Layout, size: usize) {
        {
            let sdu = pattern(size, 9);
            let n = aal5::cells_for(size);
            // One cell more than the layout's, which must stay as it is.
            let mut cells = vec![[7u8; 53]; n + 1];
            l.scatter(&sdu, &[1, 2, 3, 4, 5], &mut cells[..n]);
            assert_eq!(cells.pop(), Some([7u8; 53]), "{l:?} at {size}");
            let mut portable = vec![[9u8; 53]; n];
            scatter(&sdu, &[1, 2, 3, 4, 5], &mut portable);
            assert_eq!(cells, portable, "{l:?} at {size}");
            let mut tx = Aal5Tx::new(VC, Format::Uni).unwrap();
            let mut seg = vec![[0u8; 53]; n];
            assert_eq!(
                tx.segment_into(&sdu, PduOptions::default(), &mut seg)
                    .unwrap(),
                n
            );
            for (i, (a, b)) in cells.iter().zip(&seg).enumerate() {
                assert_eq!(&a[..5], &[1, 2, 3, 4, 5]);
                let payload = (size.saturating_sub(i * 48)).min(48);
                assert_eq!(a[5..5 + payload], b[5..5 + payload], "cell {i} of {size}");
            }
            // 16 bytes more than asked for, which must stay as they are.
            let mut out = vec![0xA5u8; aal5::cpcs_len(size) + 16];
            l.gather(&cells, &mut out[..aal5::cpcs_len(size)]);
            assert_eq!(&out[..size], &sdu[..], "{l:?} at {size}");
            let past = &out[aal5::cpcs_len(size)..];
            assert!(past.iter().all(|&b| b == 0xA5), "{l:?} at {size}");
            let mut exact = vec![0xA5u8; size + 16];
            l.gather(&cells, &mut exact[..size]);
            assert_eq!(exact[..size], sdu, "{l:?} at {size}");
            assert!(exact[size..].iter().all(|&b| b == 0xA5), "{l:?} at {size}");
        }
    }
}
