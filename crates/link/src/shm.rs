//! Rings between processes: a file under `/dev/shm` (or any path on a
//! tmpfs) mapped by both sides.
//!
//! One side creates the file, sizes it and writes the ring header; the other
//! attaches, checking the header before it trusts anything in it. Each
//! direction of a link is its own file and ring.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::MmapMut;

use crate::ring::{self, Region, RingRx, RingTx};
use crate::LinkError;

/// A mapped file. The side that created the file removes it when its
/// mapping goes, so a later run never finds a stale ring.
pub struct ShmRegion {
    map: MmapMut,
    ptr: *mut u8,
    owned: Option<std::path::PathBuf>,
}

impl Drop for ShmRegion {
    fn drop(&mut self) {
        if let Some(p) = &self.owned {
            let _ = std::fs::remove_file(p);
        }
    }
}

// SAFETY: the mapping stays alive (and at the same address) as long as the
// region does; the ring coordinates all access; mmap returns page-aligned
// memory, which is 64-byte aligned.
unsafe impl Region for ShmRegion {
    fn base(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.map.len()
    }
}

// SAFETY: as above; the raw pointer is the mapping's own address.
unsafe impl Send for ShmRegion {}
// SAFETY: as above.
unsafe impl Sync for ShmRegion {}

fn io(path: &Path, what: &str, e: std::io::Error) -> LinkError {
    LinkError::Io(format!("{what} {}: {e}", path.display()))
}

fn map(file: &File, path: &Path) -> Result<ShmRegion, LinkError> {
    // SAFETY: the file is a shared-memory file used only through the ring
    // protocol, which treats every byte the peer can write as untrusted;
    // truncation by a hostile peer is outside what this link defends
    // against (it would need write access to our /dev/shm file).
    let mut map = unsafe { MmapMut::map_mut(file) }.map_err(|e| io(path, "cannot map", e))?;
    let ptr = map.as_mut_ptr();
    Ok(ShmRegion {
        map,
        ptr,
        owned: None,
    })
}

/// Creates (replacing any old file) a ring of `capacity` cells at `path` and
/// returns the creator's end: the producer.
pub fn create_producer(path: &Path, capacity: usize) -> Result<RingTx, LinkError> {
    Ok(create(path, capacity)?.producer())
}

/// Creates a ring at `path` and returns the creator's end: the consumer.
pub fn create_consumer(path: &Path, capacity: usize) -> Result<RingRx, LinkError> {
    Ok(create(path, capacity)?.consumer())
}

fn create(path: &Path, capacity: usize) -> Result<ring::End2, LinkError> {
    let cap = capacity.max(2).next_power_of_two();
    let _ = std::fs::remove_file(path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| io(path, "cannot create", e))?;
    file.set_len(ring::region_len(cap) as u64)
        .map_err(|e| io(path, "cannot size", e))?;
    let mut region = map(&file, path)?;
    region.owned = Some(path.to_path_buf());
    ring::create(Arc::new(region), cap)
}

/// Attaches to a ring another process created at `path`, as its producer,
/// waiting up to `wait` for the file to appear.
pub fn attach_producer(path: &Path, wait: Duration) -> Result<RingTx, LinkError> {
    Ok(attach(path, wait)?.producer())
}

/// Attaches to a ring another process created at `path`, as its consumer.
pub fn attach_consumer(path: &Path, wait: Duration) -> Result<RingRx, LinkError> {
    Ok(attach(path, wait)?.consumer())
}

fn attach(path: &Path, wait: Duration) -> Result<ring::End2, LinkError> {
    let start = Instant::now();
    loop {
        let tried = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io(path, "cannot open", e))
            .and_then(|f| map(&f, path))
            .and_then(|r| ring::attach(Arc::new(r)));
        match tried {
            Ok(end) => return Ok(end),
            Err(e) if start.elapsed() >= wait => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}
