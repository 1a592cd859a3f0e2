//! A single-producer, single-consumer ring of cells in a shared memory
//! region, lock-free, with futex wake-ups for the event-driven mode.
//!
//! The same code serves threads (the region is heap memory) and processes
//! (the region is a mapped file under `/dev/shm`). The region starts with a
//! header and is followed by `capacity` 53-byte slots, then by stamps:
//!
//! ```text
//!  offset 0    magic, version, slot size, capacity,     (written once)
//!              creator;
//!              stamps wanted                            (consumer, once)
//!  offset 64   head: slots written by the producer      (producer only)
//!  offset 128  tail: slots read by the consumer         (consumer only)
//!  offset 192  data_seq / rx_sleeping                   (wake-up for the consumer)
//!  offset 256  space_seq / tx_sleeping                  (wake-up for the producer)
//!  offset 320  closed flags
//!  offset 384  slots
//!  then, from the next multiple of 64: S = 2 × max(capacity, 16) u64
//!  stamps, the one for index i at i mod S: the machine's monotonic
//!  clock (ns) when the producer published i, written for the first slot
//!  of each publication and for every slot whose index is a multiple of
//!  [`STAMP_EVERY`], once the consumer wants stamps
//! ```
//!
//! A consumer that times waits ([`CellSource::time_waits`]: an engine
//! polling a link to another process) asks for stamps in the header; one
//! that does not (ttcp) leaves its producer reading no clock. Cells
//! published before the consumer asked have no stamp and no wait.
//!
//! The stamps let the consumer say how long the oldest cell it read had
//! waited ([`CellSource::waited`]). The publication holding index `i` is
//! stamped at its first index or at `i`'s block start (`i` rounded down to
//! a multiple of [`STAMP_EVERY`]), whichever comes later, and every other
//! stamp from the block start to `i` is older: an earlier publication, or
//! an index S or more back. Nothing can overwrite them while the consumer
//! is at `i`: the producer writes below `i + capacity`, and the next user
//! of the stamp of an index from the block start on is S ≥ capacity +
//! [`STAMP_EVERY`] further. So the newest stamp from the block start to `i` is the time
//! `i` was published. The producer writes a few stamps a publication, not
//! one a cell.
//!
//! Head and tail only grow (wrapping u64), so `head - tail` is the number of
//! cells in flight. In a region shared with another process the peer's
//! counter is untrusted: an impossible value is reported as
//! [`LinkError::Corrupt`], never followed.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aurora_wire::{CellBytes, CELL_LEN};
use rustix::thread::futex;

use crate::{CellSink, CellSource, LinkCounters, LinkError, RxCheck, RxFilter};

const MAGIC: u64 = u64::from_be_bytes(*b"AURORARG");
const VERSION: u32 = 3;
/// Bytes before the first slot.
pub const HEADER_LEN: usize = 384;
const CLOSED_TX: u32 = 1;
const CLOSED_RX: u32 = 2;

/// Spins until `ready` or `spin` has passed; true if `ready` held.
///
/// Why an end may spin before it sleeps: a futex wake-up from one CPU to a
/// sleeping one costs tens of microseconds (more between the vCPUs of a
/// VM), longer than the gap between two PDUs from a busy peer, so an end
/// that slept at every empty (or full) moment would be paced by wake-ups
/// rather than by its peer. Spinning trades CPU for that: every wait that
/// the peer does not end in time costs `spin` of CPU, so it suits
/// throughput runs, not measurements of CPU per PDU. With one CPU there is
/// no spinning (the peer could not run meanwhile).
fn spin_until(spin: Duration, mut ready: impl FnMut() -> bool) -> bool {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if spin.is_zero()
        || *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get())) < 2
    {
        return false;
    }
    let start = std::time::Instant::now();
    loop {
        for _ in 0..32 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= spin {
            return false;
        }
    }
}

#[repr(C, align(64))]
struct Line<T>(T);

#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    slot_len: AtomicU32,
    capacity: AtomicU64,
    /// Process that created the ring; a ring whose creator is gone is stale.
    creator: AtomicU32,
    /// Set by a consumer that reads the stamps: until then the producer
    /// saves itself the clock reads.
    stamps_wanted: AtomicU32,
    head: Line<AtomicU64>,
    tail: Line<AtomicU64>,
    data: Line<[AtomicU32; 2]>,
    space: Line<[AtomicU32; 2]>,
    closed: Line<AtomicU32>,
}

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER_LEN);

/// Memory a ring lives in. Implementors hand out a pointer that stays valid
/// and writable for as long as the value lives.
///
/// # Safety
///
/// `base()` must point to `len()` bytes, aligned to 64, that remain mapped and
/// writable while `self` lives, and may be accessed from several threads.
pub unsafe trait Region: Send + Sync {
    /// Start of the region.
    fn base(&self) -> *mut u8;
    /// Size of the region in bytes.
    fn len(&self) -> usize;
    /// True for an empty region.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A region on the heap, for rings between threads.
pub struct HeapRegion {
    mem: Box<[Line<[u8; 64]>]>,
    ptr: *mut u8,
}

impl HeapRegion {
    /// A zeroed region of at least `len` bytes.
    pub fn new(len: usize) -> Self {
        let lines = len.div_ceil(64);
        let mut mem: Box<[Line<[u8; 64]>]> = (0..lines).map(|_| Line([0u8; 64])).collect();
        let ptr = mem.as_mut_ptr().cast::<u8>();
        HeapRegion { mem, ptr }
    }
}

// SAFETY: the boxed slice is never moved or freed while the region lives,
// its lines are 64-byte aligned, and all shared access goes through the
// ring's atomics (header) or the SPSC protocol (slots).
unsafe impl Region for HeapRegion {
    fn base(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.mem.len() * 64
    }
}

// SAFETY: as above; the raw pointer is only a cached address of `mem`.
unsafe impl Send for HeapRegion {}
// SAFETY: as above.
unsafe impl Sync for HeapRegion {}

/// Every slot whose index is a multiple of this is stamped.
pub const STAMP_EVERY: u64 = 16;

/// Where the slots' stamps start in a region of `capacity` cells.
fn stamps_at(capacity: usize) -> usize {
    (HEADER_LEN + capacity * CELL_LEN).next_multiple_of(64)
}

/// Stamps a ring of `capacity` cells keeps (a power of two).
fn stamp_count(capacity: usize) -> usize {
    2 * capacity.max(STAMP_EVERY as usize)
}

/// The most cells a ring may hold (so that its size is a number).
const MAX_CAPACITY: u64 = 1 << 32;

/// Bytes a region needs for `capacity` cells (at most 2^32).
pub fn region_len(capacity: usize) -> usize {
    stamps_at(capacity) + stamp_count(capacity) * 8
}

/// One end of a ring.
struct End {
    region: Arc<dyn Region>,
    cap: u64,
}

impl End {
    fn header(&self) -> &Header {
        // SAFETY: the region is at least HEADER_LEN bytes, 64-byte aligned,
        // and the header is made only of atomics, valid for any bit pattern.
        unsafe { &*self.region.base().cast::<Header>() }
    }

    fn slot_ptr(&self, index: u64) -> *mut CellBytes {
        let i = (index & (self.cap - 1)) as usize;
        // SAFETY: i < cap and the region holds cap slots after the header
        // (checked when the end was made), so the pointer is in bounds.
        unsafe {
            self.region
                .base()
                .add(HEADER_LEN + i * CELL_LEN)
                .cast::<CellBytes>()
        }
    }

    /// The stamp of `index`.
    fn stamp(&self, index: u64) -> &AtomicU64 {
        let i = (index & (stamp_count(self.cap as usize) as u64 - 1)) as usize;
        // SAFETY: i < stamp_count and the region holds that many stamps from `stamps_at`
        // (checked when the end was made); that offset and the region are
        // 64-byte aligned, so the u64 is aligned; an atomic is valid for
        // any bit pattern and shared access to it is what it is for.
        unsafe {
            &*self
                .region
                .base()
                .add(stamps_at(self.cap as usize) + i * 8)
                .cast::<AtomicU64>()
        }
    }

    /// The `n` slots from index `at`, which must not wrap.
    ///
    /// # Safety
    ///
    /// The caller must own slots `at..at + n` under the ring protocol (free
    /// slots for the producer before it publishes them, published slots for
    /// the consumer before it releases them) and hold no other reference to
    /// them.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slots(&self, at: u64, n: usize) -> &mut [CellBytes] {
        debug_assert!((at & (self.cap - 1)) + n as u64 <= self.cap);
        // SAFETY: in bounds (no wrap, checked by the callers' arithmetic)
        // and exclusively owned, as the caller promises.
        unsafe { std::slice::from_raw_parts_mut(self.slot_ptr(at), n) }
    }

    fn wait_on(word: &AtomicU32, seen: u32, timeout: Option<Duration>) {
        let ts = timeout.map(|t| rustix::time::Timespec {
            tv_sec: t.as_secs() as _,
            tv_nsec: t.subsec_nanos() as _,
        });
        // Spurious returns (EAGAIN, EINTR, timeout) are fine: callers re-check.
        let _ = futex::wait(word, futex::Flags::empty(), seen, ts.as_ref());
    }

    fn wake(seq: &AtomicU32, sleeping: &AtomicU32) {
        fence(Ordering::SeqCst);
        if sleeping.load(Ordering::SeqCst) != 0 {
            seq.fetch_add(1, Ordering::SeqCst);
            let _ = futex::wake(seq, futex::Flags::empty(), u32::MAX);
        }
    }
}

/// Writes a ring of `capacity` cells (rounded up to a power of two) into
/// `region`, which must be zeroed and at least [`region_len`] bytes, and
/// returns the creator's end, to be made the producer or the consumer.
pub fn create(region: Arc<dyn Region>, capacity: usize) -> Result<End2, LinkError> {
    if capacity as u64 > MAX_CAPACITY {
        return Err(LinkError::Config(format!(
            "a ring of {capacity} cells is more than the {MAX_CAPACITY} a ring may hold"
        )));
    }
    let cap = capacity.max(2).next_power_of_two();
    if region.len() < region_len(cap) {
        return Err(LinkError::Config(format!(
            "a ring of {cap} cells needs {} bytes but the region has {}",
            region_len(cap),
            region.len()
        )));
    }
    let end = End {
        region,
        cap: cap as u64,
    };
    let h = end.header();
    h.version.store(VERSION, Ordering::Relaxed);
    h.slot_len.store(CELL_LEN as u32, Ordering::Relaxed);
    h.capacity.store(cap as u64, Ordering::Relaxed);
    h.creator.store(
        rustix::process::getpid().as_raw_nonzero().get() as u32,
        Ordering::Relaxed,
    );
    h.magic.store(MAGIC, Ordering::Release);
    Ok(End2(end))
}

/// Attaches to a ring another party created in `region`, checking its header.
pub fn attach(region: Arc<dyn Region>) -> Result<End2, LinkError> {
    if region.len() < HEADER_LEN {
        return Err(LinkError::Corrupt(format!(
            "the region is {} bytes, too small for a ring header",
            region.len()
        )));
    }
    let probe = End {
        region: region.clone(),
        cap: 1,
    };
    let h = probe.header();
    if h.magic.load(Ordering::Acquire) != MAGIC {
        return Err(LinkError::Corrupt(
            "the region holds no Aurora ring (bad magic)".into(),
        ));
    }
    if h.version.load(Ordering::Relaxed) != VERSION {
        return Err(LinkError::Corrupt(format!(
            "ring version {} is not the supported {VERSION}",
            h.version.load(Ordering::Relaxed)
        )));
    }
    if h.slot_len.load(Ordering::Relaxed) != CELL_LEN as u32 {
        return Err(LinkError::Corrupt(
            "ring slots are not 53-byte cells".into(),
        ));
    }
    let cap = h.capacity.load(Ordering::Relaxed);
    if cap < 2
        || !cap.is_power_of_two()
        || cap > MAX_CAPACITY
        || region_len(cap as usize) > region.len()
    {
        return Err(LinkError::Corrupt(format!(
            "ring capacity {cap} does not fit a region of {} bytes",
            region.len()
        )));
    }
    if h.closed.0.load(Ordering::Acquire) != 0 || !alive(h.creator.load(Ordering::Relaxed)) {
        // Left behind by ends that have gone: not a ring to join.
        return Err(LinkError::Closed);
    }
    Ok(End2(End { region, cap }))
}

/// True when process `pid` exists (signal 0 probes without sending).
fn alive(pid: u32) -> bool {
    let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(p) {
        Ok(()) => true,
        // It exists but belongs to someone else.
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// One end of a ring, not yet chosen as producer or consumer.
pub struct End2(End);

impl End2 {
    /// Use this end as the producer.
    pub fn producer(self) -> RingTx {
        RingTx {
            end: self.0,
            corrupt: false,
            counters: LinkCounters::default(),
            spin: Duration::ZERO,
        }
    }
    /// Use this end as the consumer.
    pub fn consumer(self) -> RingRx {
        RingRx {
            end: self.0,
            corrupt: false,
            filter: RxFilter::default(),
            counters: LinkCounters::default(),
            spin: Duration::ZERO,
            waited: None,
        }
    }
}

/// The producer end.
pub struct RingTx {
    end: End,
    corrupt: bool,
    counters: LinkCounters,
    spin: Duration,
}

/// The consumer end.
pub struct RingRx {
    end: End,
    corrupt: bool,
    filter: RxFilter,
    counters: LinkCounters,
    spin: Duration,
    /// How long the oldest cell of the last `recv` had waited.
    waited: Option<Duration>,
}

/// What a producer can see of its consumer, kept apart from the producer
/// so it still works once the producer is wrapped (in a shaper, say): how
/// many cells wait unread, whether the consumer closed its end, and whether
/// the process that created the ring still exists.
pub struct RingWatch {
    end: End,
}

impl Clone for RingWatch {
    fn clone(&self) -> Self {
        RingWatch {
            end: End {
                region: self.end.region.clone(),
                cap: self.end.cap,
            },
        }
    }
}

impl RingWatch {
    /// Cells written and not yet taken by the consumer (at most the
    /// capacity, whatever the shared counters say).
    pub fn unread(&self) -> usize {
        let h = self.end.header();
        let head = h.head.0.load(Ordering::Acquire);
        let tail = h.tail.0.load(Ordering::Acquire);
        head.wrapping_sub(tail).min(self.end.cap) as usize
    }

    /// True once the consumer has closed its end.
    pub fn reader_closed(&self) -> bool {
        self.end.header().closed.0.load(Ordering::Acquire) & CLOSED_RX != 0
    }

    /// True while the process that created the ring exists (for a ring in
    /// a shared file made by its consumer: while the consumer does).
    pub fn creator_alive(&self) -> bool {
        alive(self.end.header().creator.load(Ordering::Relaxed))
    }
}

impl RingTx {
    /// How long [`RingTx::wait_space`] re-checks the ring before it sleeps
    /// in the kernel (zero, the default, sleeps at once; never longer than
    /// the wait's timeout; no spinning on a single CPU). Spinning spares
    /// the wake-up, tens of microseconds between CPUs, when the consumer
    /// makes room soon, and costs CPU when it does not.
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.end.cap as usize
    }

    /// A watch on this ring's consumer.
    pub fn watch(&self) -> RingWatch {
        RingWatch {
            end: End {
                region: self.end.region.clone(),
                cap: self.end.cap,
            },
        }
    }

    /// The contiguous run of free slots at head (at most `max`): the head
    /// index and how many; zero when the ring is full.
    fn free_run(&mut self, max: usize) -> Result<(u64, usize), LinkError> {
        if self.corrupt {
            return Err(LinkError::Corrupt("ring counters are inconsistent".into()));
        }
        let h = self.end.header();
        if h.closed.0.load(Ordering::Acquire) & CLOSED_RX != 0 {
            return Err(LinkError::Closed);
        }
        let head = h.head.0.load(Ordering::Relaxed);
        let tail = h.tail.0.load(Ordering::Acquire);
        let used = head.wrapping_sub(tail);
        if used > self.end.cap {
            self.corrupt = true;
            return Err(LinkError::Corrupt(format!(
                "ring tail {tail} is ahead of head {head}"
            )));
        }
        let start = head & (self.end.cap - 1);
        let n = (self.end.cap - used)
            .min(self.end.cap - start)
            .min(max as u64) as usize;
        Ok((head, n))
    }

    /// Publishes `k` slots written after `head`, stamped with the time,
    /// and wakes the consumer.
    fn publish(&mut self, head: u64, k: usize) {
        if k > 0 {
            let h = self.end.header();
            if h.stamps_wanted.load(Ordering::Relaxed) != 0 {
                let now = crate::wait::monotonic_ns();
                self.end.stamp(head).store(now, Ordering::Relaxed);
                // Offsets of the indices that are multiples of STAMP_EVERY.
                let mut off = head.wrapping_neg() % STAMP_EVERY;
                while off < k as u64 {
                    self.end
                        .stamp(head.wrapping_add(off))
                        .store(now, Ordering::Relaxed);
                    off += STAMP_EVERY;
                }
            }
            h.head.0.store(head + k as u64, Ordering::Release);
            End::wake(&h.data.0[0], &h.data.0[1]);
        }
        self.counters.cells_out += k as u64;
    }

    /// Copies as many of `cells` as there is room for; returns how many.
    pub fn push(&mut self, cells: &[CellBytes]) -> Result<usize, LinkError> {
        let mut done = 0;
        while done < cells.len() {
            let (head, k) = self.free_run(cells.len() - done)?;
            if k == 0 {
                break;
            }
            // SAFETY: `free_run` found these k slots free and unwrapped; the
            // consumer does not read them until `publish`.
            unsafe { self.end.slots(head, k) }.copy_from_slice(&cells[done..done + k]);
            self.publish(head, k);
            done += k;
        }
        Ok(done)
    }

    /// Lets `fill` write cells straight into free slots (no staging copy):
    /// it gets up to `max` contiguous free slots and returns how many it
    /// filled, which are then published. Returns that count.
    pub fn write_with(
        &mut self,
        max: usize,
        fill: impl FnOnce(&mut [CellBytes]) -> usize,
    ) -> Result<usize, LinkError> {
        let (head, n) = self.free_run(max)?;
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: as in `push`.
        let k = fill(unsafe { self.end.slots(head, n) }).min(n);
        self.publish(head, k);
        Ok(k)
    }

    /// Blocks until there is room for at least one cell, the consumer closes,
    /// or `timeout` passes.
    pub fn wait_space(&mut self, timeout: Option<Duration>) {
        let h = self.end.header();
        let cap = self.end.cap;
        if spin_until(self.spin.min(timeout.unwrap_or(self.spin)), || {
            h.head
                .0
                .load(Ordering::Relaxed)
                .wrapping_sub(h.tail.0.load(Ordering::Acquire))
                < cap
                || h.closed.0.load(Ordering::Relaxed) & CLOSED_RX != 0
        }) {
            return;
        }
        let [seq, sleeping] = &h.space.0;
        sleeping.store(1, Ordering::SeqCst);
        let seen = seq.load(Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let used = h
            .head
            .0
            .load(Ordering::Relaxed)
            .wrapping_sub(h.tail.0.load(Ordering::SeqCst));
        if used >= self.end.cap && h.closed.0.load(Ordering::SeqCst) & CLOSED_RX == 0 {
            End::wait_on(seq, seen, timeout);
        }
        sleeping.store(0, Ordering::SeqCst);
    }

    /// Tells the consumer no more cells will come.
    pub fn close(&mut self) {
        let h = self.end.header();
        h.closed.0.fetch_or(CLOSED_TX, Ordering::SeqCst);
        h.data.0[0].fetch_add(1, Ordering::SeqCst);
        let _ = futex::wake(&h.data.0[0], futex::Flags::empty(), u32::MAX);
    }
}

impl RingRx {
    /// How long [`RingRx::wait_data`] re-checks the ring before it sleeps in
    /// the kernel (zero, the default, sleeps at once; never longer than the
    /// wait's timeout; no spinning on a single CPU). Spinning spares the
    /// wake-up, tens of microseconds between CPUs, when the producer writes
    /// soon, and costs CPU when it does not.
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.end.cap as usize
    }

    /// The contiguous run of published cells at tail (at most `max`): the
    /// tail index and how many; `Ok(None)` when the ring is empty and
    /// `Err(Closed)` when it is also closed. A peer process that breaks the
    /// protocol can only make us read torn cells, which every layer above
    /// treats as untrusted data.
    fn waiting(&mut self, max: usize) -> Result<Option<(u64, usize)>, LinkError> {
        if self.corrupt {
            return Err(LinkError::Corrupt("ring counters are inconsistent".into()));
        }
        let h = self.end.header();
        let tail = h.tail.0.load(Ordering::Relaxed);
        let head = h.head.0.load(Ordering::Acquire);
        let avail = head.wrapping_sub(tail);
        if avail > self.end.cap {
            self.corrupt = true;
            return Err(LinkError::Corrupt(format!(
                "ring head {head} is more than a ring ahead of tail {tail}"
            )));
        }
        if avail == 0 {
            if h.closed.0.load(Ordering::Acquire) & CLOSED_TX != 0 {
                return Err(LinkError::Closed);
            }
            return Ok(None);
        }
        let start = tail & (self.end.cap - 1);
        let n = avail.min(self.end.cap - start).min(max as u64) as usize;
        self.counters.cells_in += n as u64;
        Ok(Some((tail, n)))
    }

    /// Gives `n` slots after `tail` back to the producer and wakes it.
    fn release(&mut self, tail: u64, n: usize) {
        let h = self.end.header();
        h.tail.0.store(tail + n as u64, Ordering::Release);
        End::wake(&h.space.0[0], &h.space.0[1]);
    }

    /// Checks headers in place, moving cells forward only after a discard;
    /// returns how many were kept at the front.
    fn filter(
        filter: &mut RxFilter,
        counters: &mut LinkCounters,
        cells: &mut [CellBytes],
    ) -> usize {
        let mut kept = 0;
        for i in 0..cells.len() {
            if filter.accept(&mut cells[i], counters) {
                if kept != i {
                    cells[kept] = cells[i];
                }
                kept += 1;
            }
        }
        counters.cells_delivered += kept as u64;
        kept
    }

    /// Copies up to `out.len()` waiting cells into `out`, after checking
    /// their headers; returns how many were kept (a batch whose every
    /// header failed returns 0 though more may wait). `Err(Closed)` once the
    /// producer closed and the ring is empty.
    pub fn pop(&mut self, out: &mut [CellBytes]) -> Result<usize, LinkError> {
        let mut got = 0;
        while got < out.len() {
            let (tail, n) = match self.waiting(out.len() - got) {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(LinkError::Closed) if got > 0 => break,
                Err(e) => return Err(e),
            };
            // SAFETY: `waiting` found these n cells published and unwrapped;
            // they stay ours until `release`.
            out[got..got + n].copy_from_slice(unsafe { self.end.slots(tail, n) });
            self.release(tail, n);
            got += Self::filter(&mut self.filter, &mut self.counters, &mut out[got..got + n]);
        }
        Ok(got)
    }

    /// Hands waiting cells to `use_cells` in place (no copy out of the ring),
    /// after checking each header; up to `max` contiguous cells, all of
    /// which are consumed. Returns how many cells were taken from the ring
    /// (including any the HEC check discarded); `Err(Closed)` once the
    /// producer closed and the ring is empty.
    pub fn read_with(
        &mut self,
        max: usize,
        use_cells: impl FnOnce(&[CellBytes]),
    ) -> Result<usize, LinkError> {
        let Some((tail, n)) = self.waiting(max)? else {
            return Ok(0);
        };
        // SAFETY: as in `pop`.
        let cells = unsafe { self.end.slots(tail, n) };
        let kept = Self::filter(&mut self.filter, &mut self.counters, cells);
        use_cells(&cells[..kept]);
        self.release(tail, n);
        Ok(n)
    }

    /// Like [`RingRx::read_with`], but the consumer checks the headers
    /// itself, in its own loop, through the [`RxCheck`] it is lent (so each
    /// cell is read once: integrated layer processing). The consumer must
    /// check every cell before using it and must use every cell it accepts.
    pub fn read_fused(
        &mut self,
        max: usize,
        use_cells: impl FnOnce(&mut [CellBytes], &mut RxCheck<'_>),
    ) -> Result<usize, LinkError> {
        let Some((tail, n)) = self.waiting(max)? else {
            return Ok(0);
        };
        // SAFETY: as in `pop`.
        let cells = unsafe { self.end.slots(tail, n) };
        let mut check = RxCheck {
            filter: &mut self.filter,
            counters: &mut self.counters,
            discarded: 0,
        };
        use_cells(cells, &mut check);
        let discarded = check.discarded;
        self.counters.cells_delivered += n as u64 - discarded;
        self.release(tail, n);
        Ok(n)
    }

    /// Blocks until at least one cell is waiting, the producer closes, or
    /// `timeout` passes.
    pub fn wait_data(&mut self, timeout: Option<Duration>) {
        let h = self.end.header();
        if spin_until(self.spin.min(timeout.unwrap_or(self.spin)), || {
            !self.is_empty() || h.closed.0.load(Ordering::Relaxed) & CLOSED_TX != 0
        }) {
            return;
        }
        let [seq, sleeping] = &h.data.0;
        sleeping.store(1, Ordering::SeqCst);
        let seen = seq.load(Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let empty = h.head.0.load(Ordering::SeqCst) == h.tail.0.load(Ordering::Relaxed);
        if empty && h.closed.0.load(Ordering::SeqCst) & CLOSED_TX == 0 {
            End::wait_on(seq, seen, timeout);
        }
        sleeping.store(0, Ordering::SeqCst);
    }

    /// Tells the producer no more cells will be read.
    pub fn close(&mut self) {
        let h = self.end.header();
        h.closed.0.fetch_or(CLOSED_RX, Ordering::SeqCst);
        h.space.0[0].fetch_add(1, Ordering::SeqCst);
        let _ = futex::wake(&h.space.0[0], futex::Flags::empty(), u32::MAX);
    }
}

impl Drop for RingTx {
    fn drop(&mut self) {
        self.close();
    }
}

impl Drop for RingRx {
    fn drop(&mut self) {
        self.close();
    }
}

impl CellSink for RingTx {
    fn send(&mut self, cells: &[CellBytes]) -> Result<usize, LinkError> {
        self.push(cells)
    }
    fn wait_ready(&mut self, timeout: Duration) {
        self.wait_space(Some(timeout))
    }
    fn counters(&self) -> LinkCounters {
        self.counters
    }
    fn waiting(&self) -> Option<(usize, usize)> {
        let h = self.end.header();
        // A ring its reader closed, whose creator (for a ring in a shared
        // file, its reader) is gone, or whose counters are inconsistent,
        // says nothing: the host goes on, and what it sends is refused
        // and counted, as before.
        if self.corrupt || h.closed.0.load(Ordering::Acquire) & CLOSED_RX != 0 {
            return None;
        }
        let used = h
            .head
            .0
            .load(Ordering::Relaxed)
            .wrapping_sub(h.tail.0.load(Ordering::Acquire));
        if used > self.end.cap {
            return None;
        }
        // Half full or more: is anyone left to read it? (A consumer killed
        // without closing its end leaves the ring as it was.)
        if used * 2 >= self.end.cap && !alive(h.creator.load(Ordering::Relaxed)) {
            return None;
        }
        Some((used as usize, self.end.cap as usize))
    }
}

impl CellSource for RingRx {
    fn recv(&mut self, out: &mut [CellBytes]) -> Result<usize, LinkError> {
        // A batch whose every header failed must not look like "no cells".
        loop {
            self.waited = self.oldest_wait();
            let n = self.pop(out).inspect_err(|_| self.waited = None)?;
            if n > 0 || self.is_empty() {
                if n == 0 {
                    self.waited = None;
                }
                return Ok(n);
            }
        }
    }
    fn waited(&self) -> Option<Duration> {
        self.waited
    }
    fn time_waits(&mut self) {
        self.end.header().stamps_wanted.store(1, Ordering::Relaxed);
    }
    fn wait_ready(&mut self, timeout: Duration) {
        self.wait_data(Some(timeout))
    }
    fn counters(&self) -> LinkCounters {
        self.counters
    }
    fn track_discarded(&mut self, on: bool) {
        self.filter.track_discarded(on)
    }
    fn take_discarded(&mut self, f: &mut dyn FnMut(&CellBytes)) {
        self.filter.take_discarded(f)
    }
}

impl RingRx {
    /// How long the oldest cell waiting has waited, by its stamp; `None`
    /// when none waits (or the counters are impossible).
    fn oldest_wait(&self) -> Option<Duration> {
        self.oldest_stamp().map(crate::wait::since_monotonic)
    }

    /// When the oldest cell waiting was published (see [`STAMP_EVERY`]).
    fn oldest_stamp(&self) -> Option<u64> {
        let h = self.end.header();
        let tail = h.tail.0.load(Ordering::Relaxed);
        let avail = h.head.0.load(Ordering::Acquire).wrapping_sub(tail);
        if avail == 0 || avail > self.end.cap {
            return None;
        }
        // The newest stamp from the block start to `tail` is `tail`'s
        // publication's (see the module's notes); none at all, for cells
        // published before stamps were asked for.
        (tail - tail % STAMP_EVERY..=tail)
            .map(|i| self.end.stamp(i).load(Ordering::Relaxed))
            .max()
            .filter(|&t| t != 0)
    }

    fn is_empty(&self) -> bool {
        let h = self.end.header();
        h.head.0.load(Ordering::Acquire) == h.tail.0.load(Ordering::Relaxed)
    }
}

/// A ring between two threads of this process.
pub fn in_process(capacity: usize) -> (RingTx, RingRx) {
    let cap = capacity.max(2).next_power_of_two();
    let region: Arc<dyn Region> = Arc::new(HeapRegion::new(region_len(cap)));
    let tx = create(region.clone(), cap)
        .expect("the region was sized for the ring")
        .producer();
    let rx = attach(region)
        .expect("the ring was just written")
        .consumer();
    (tx, rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(i: u32) -> CellBytes {
        let mut c = [0u8; 53];
        aurora_wire::cell::Header::data(aurora_wire::cell::VcId::new(0, 32))
            .emit(&mut c)
            .unwrap();
        c[5..9].copy_from_slice(&i.to_be_bytes());
        c
    }

    /// Publications and reads of every size, lap after lap, the ring
    /// nearly empty or full, large and small: the stamp the reader finds
    /// for its oldest cell is that cell's publication's.
    #[test]
    fn the_oldest_cell_is_found_with_its_publication_stamp() {
        for cap in [64, 16, 8, 4, 2] {
            oldest_stamps_in_a_ring_of(cap);
        }
    }

    fn oldest_stamps_in_a_ring_of(cap: usize) {
        let (mut tx, mut rx) = in_process(cap);
        // Until the consumer asks, no stamps: no wait.
        let mut out = [[0u8; 53]; 64];
        assert_eq!(tx.push(&[cell(0)]).unwrap(), 1);
        assert_eq!(rx.oldest_stamp(), None);
        assert_eq!(CellSource::recv(&mut rx, &mut out).unwrap(), 1);
        assert_eq!(rx.waited(), None);
        rx.time_waits();
        let mut published: std::collections::VecDeque<u64> = Default::default();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..5000 {
            let room = cap - published.len();
            let k = (rand(cap as u64 * 5 / 8) as usize + 1).min(room);
            if k > 0 {
                // A clock that has moved since the last publication.
                let last = published.back().copied().unwrap_or(0);
                while crate::wait::monotonic_ns() <= last {}
                let head = tx.end.header().head.0.load(Ordering::Relaxed);
                assert_eq!(tx.push(&vec![cell(round); k]).unwrap(), k);
                // A push that wraps is two publications.
                let first = (cap as u64 - head % cap as u64).min(k as u64);
                for (from, n) in [(head, first), (head + first, k as u64 - first)] {
                    let t = tx.end.stamp(from).load(Ordering::Relaxed);
                    published.extend(std::iter::repeat_n(t, n as usize));
                }
            }
            assert_eq!(
                rx.oldest_stamp(),
                published.front().copied(),
                "ring of {cap}, round {round}"
            );
            let r = (rand(cap as u64 * 3 / 4 + 1) as usize).min(published.len());
            assert_eq!(rx.pop(&mut out[..r]).unwrap(), r);
            published.drain(..r);
        }
    }

    /// The sender's view of what waits for the reader: cells pushed and
    /// not yet read, of the capacity; nothing once the reader has closed.
    #[test]
    fn a_sender_sees_what_waits_until_the_reader_closes() {
        let (mut tx, mut rx) = in_process(8);
        assert_eq!(CellSink::waiting(&tx), Some((0, 8)));
        assert_eq!(tx.push(&[cell(1), cell(2), cell(3)]).unwrap(), 3);
        assert_eq!(CellSink::waiting(&tx), Some((3, 8)));
        let mut out = [[0u8; 53]; 2];
        assert_eq!(rx.pop(&mut out).unwrap(), 2);
        assert_eq!(CellSink::waiting(&tx), Some((1, 8)));
        drop(rx);
        assert_eq!(CellSink::waiting(&tx), None);
    }

    #[test]
    fn a_watch_sees_unread_cells_and_a_closed_reader() {
        let (mut tx, mut rx) = in_process(8);
        let w = tx.watch();
        assert_eq!((w.unread(), w.reader_closed()), (0, false));
        assert_eq!(tx.push(&[cell(1), cell(2), cell(3)]).unwrap(), 3);
        assert_eq!(w.unread(), 3);
        let mut out = [[0u8; 53]; 2];
        assert_eq!(rx.pop(&mut out).unwrap(), 2);
        assert_eq!(w.unread(), 1);
        assert!(w.creator_alive());
        drop(rx);
        assert!(w.reader_closed());
        assert_eq!(w.unread(), 1);
    }

    #[test]
    fn fills_wraps_and_reports_backpressure() {
        let (mut tx, mut rx) = in_process(8);
        let cells: Vec<_> = (0..20).map(cell).collect();
        assert_eq!(tx.push(&cells).unwrap(), 8);
        assert_eq!(tx.push(&cells[8..]).unwrap(), 0, "full ring pushes nothing");
        let mut out = [[0u8; 53]; 5];
        assert_eq!(rx.pop(&mut out).unwrap(), 5);
        assert_eq!(out[4], cells[4]);
        assert_eq!(tx.push(&cells[8..]).unwrap(), 5);
        let mut all = Vec::new();
        loop {
            let n = rx.pop(&mut out).unwrap();
            if n == 0 {
                break;
            }
            all.extend_from_slice(&out[..n]);
        }
        assert_eq!(all, cells[5..13]);
        drop(tx);
        assert_eq!(rx.pop(&mut out), Err(LinkError::Closed));
    }

    #[test]
    fn a_spin_ends_when_its_condition_holds_or_its_time_is_up() {
        // Zero never spins; a condition that holds ends the spin at once.
        assert!(!spin_until(Duration::ZERO, || true));
        let multi = std::thread::available_parallelism().map_or(1, |n| n.get()) > 1;
        assert_eq!(spin_until(Duration::from_secs(60), || true), multi);
        // A condition that never holds: false once the time is up.
        let t = std::time::Instant::now();
        assert!(!spin_until(Duration::from_millis(2), || false));
        if multi {
            assert!(t.elapsed() >= Duration::from_millis(2));
        }
        // A condition that comes true part-way.
        let mut n = 0;
        assert_eq!(
            spin_until(Duration::from_secs(60), || {
                n += 1;
                n > 1000
            }),
            multi
        );
    }

    /// With a long spin, data arriving (or the producer closing) ends the
    /// consumer's wait by the spin's check, long before the spin is up.
    #[test]
    fn a_spinning_wait_returns_when_data_comes_or_the_producer_closes() {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return;
        }
        for close in [false, true] {
            let (mut tx, mut rx) = in_process(8);
            rx.set_spin(Duration::from_secs(30));
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                if close {
                    tx.close();
                } else {
                    tx.push(&[cell(1)]).unwrap();
                }
                tx
            });
            let start = std::time::Instant::now();
            rx.wait_data(Some(Duration::from_secs(60)));
            assert!(start.elapsed() < Duration::from_secs(20), "close: {close}");
            let mut out = [[0u8; 53]; 1];
            match rx.pop(&mut out) {
                Ok(1) => assert!(!close),
                Err(LinkError::Closed) => assert!(close),
                other => panic!("close {close}: {other:?}"),
            }
            drop(t.join().unwrap());
        }
    }

    #[test]
    fn threads_move_a_million_cells_in_order_with_wakeups() {
        move_a_million(Duration::ZERO);
    }

    /// The same with both ends spinning before they sleep (the order and
    /// the end are right whichever way each wait ends).
    #[test]
    fn spinning_ends_move_a_million_cells_in_order() {
        move_a_million(Duration::from_micros(50));
    }

    fn move_a_million(spin: Duration) {
        let (mut tx, mut rx) = in_process(256);
        tx.set_spin(spin);
        rx.set_spin(spin);
        const N: u32 = 1_000_000;
        let t = std::thread::spawn(move || {
            let batch: Vec<_> = (0..64).collect();
            let mut i = 0;
            while i < N {
                let cells: Vec<_> = batch
                    .iter()
                    .map(|k| cell(i + k))
                    .take((N - i) as usize)
                    .collect();
                let mut sent = 0;
                while sent < cells.len() {
                    let n = tx.push(&cells[sent..]).unwrap();
                    sent += n;
                    if n == 0 {
                        tx.wait_space(Some(Duration::from_millis(50)));
                    }
                }
                i += cells.len() as u32;
            }
        });
        let mut out = [[0u8; 53]; 100];
        let mut next = 0u32;
        loop {
            match rx.pop(&mut out) {
                Ok(0) => rx.wait_data(Some(Duration::from_millis(50))),
                Ok(n) => {
                    for c in &out[..n] {
                        assert_eq!(*c, cell(next));
                        next += 1;
                    }
                }
                Err(LinkError::Closed) => break,
                Err(e) => panic!("{e}"),
            }
        }
        t.join().unwrap();
        assert_eq!(next, N);
    }

    #[test]
    fn in_place_writes_and_reads_wrap_correctly() {
        let (mut tx, mut rx) = in_process(8);
        let mut next = 0u32;
        let mut seen = Vec::new();
        for round in 0..50 {
            let want = 1 + round % 7;
            let mut made = 0;
            while made < want {
                made += tx
                    .write_with(want - made, |slots| {
                        for s in slots.iter_mut() {
                            *s = cell(next);
                            next += 1;
                        }
                        slots.len()
                    })
                    .unwrap();
            }
            while rx
                .read_with(3, |cells| seen.extend_from_slice(cells))
                .unwrap()
                > 0
            {}
        }
        assert_eq!(seen.len(), next as usize);
        for (i, c) in seen.iter().enumerate() {
            assert_eq!(*c, cell(i as u32));
        }
    }

    #[test]
    fn a_corrupt_peer_is_reported_not_followed() {
        let region: Arc<dyn Region> = Arc::new(HeapRegion::new(region_len(8)));
        let mut rx = create(region.clone(), 8).unwrap().consumer();
        // A hostile peer writes an impossible head.
        let end = End {
            region: region.clone(),
            cap: 8,
        };
        end.header().head.0.store(1_000_000, Ordering::Release);
        let mut out = [[0u8; 53]; 4];
        assert!(matches!(rx.pop(&mut out), Err(LinkError::Corrupt(_))));
        // A ring whose creating process is gone is refused.
        end.header().creator.store(u32::MAX / 2, Ordering::Relaxed);
        end.header().head.0.store(0, Ordering::Release);
        assert_eq!(attach(region.clone()).err(), Some(LinkError::Closed));
        // Attaching to garbage fails with a sentence.
        let junk: Arc<dyn Region> = Arc::new(HeapRegion::new(4096));
        assert!(matches!(attach(junk), Err(LinkError::Corrupt(_))));
    }
}
