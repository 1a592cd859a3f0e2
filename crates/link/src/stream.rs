//! Bare 53-byte cells on a byte stream (TCP or a Unix socket), found again
//! on receipt by HEC delineation, as on a SONET or serial line.
//!
//! The sender starts with a few idle cells, as a SONET framer fills an empty
//! line, so the receiver has found the cell boundaries before the first
//! data cell; the receiver removes idle cells (counted as
//! [`LinkDrop::Idle`]).
//!
//! Both halves are non-blocking. The sender keeps a bounded buffer: when the
//! peer stops reading and the buffer is full, `send` takes nothing
//! (backpressure) instead of blocking. The receiver reads what is there,
//! delineates it and hands up whole, HEC-checked cells; garbage costs only
//! counted skipped bytes and discarded cells.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use aurora_wire::cell::IDLE_HEADER;
use aurora_wire::delineate::{Delineator, DELTA};
use aurora_wire::{CellBytes, CELL_LEN};
use rustix::fd::AsFd;

use crate::{CellSink, CellSource, LinkCounters, LinkDrop, LinkError};

/// A byte stream the link can run on.
pub trait ByteStream: Read + Write + AsFd + Send {
    /// Puts the stream in non-blocking mode.
    fn nonblocking(&self) -> std::io::Result<()>;
    /// A second handle on the same stream.
    fn duplicate(&self) -> std::io::Result<Self>
    where
        Self: Sized;
}

impl ByteStream for TcpStream {
    fn nonblocking(&self) -> std::io::Result<()> {
        self.set_nodelay(true)?;
        self.set_nonblocking(true)
    }
    fn duplicate(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
}

impl ByteStream for UnixStream {
    fn nonblocking(&self) -> std::io::Result<()> {
        self.set_nonblocking(true)
    }
    fn duplicate(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
}

/// Idle cells sent first: enough for the receiver to hunt and confirm sync.
pub const PREAMBLE_CELLS: usize = DELTA as usize + 2;

/// An idle cell: the idle header and the 0x6A fill payload of I.432.1.
pub fn idle_cell() -> CellBytes {
    let mut c = [0x6Au8; CELL_LEN];
    c[..5].copy_from_slice(&IDLE_HEADER);
    c
}

/// Default bytes the sender buffers before pushing back.
pub const DEFAULT_TX_BUFFER: usize = 64 * CELL_LEN * 16;

/// The sending half.
pub struct StreamTx<S> {
    s: S,
    buf: Vec<u8>,
    sent: usize,
    limit: usize,
    counters: LinkCounters,
}

/// The receiving half.
pub struct StreamRx<S> {
    s: S,
    buf: Vec<u8>,
    delineator: Delineator,
    pending: crate::Pending,
    closed: bool,
    counters: LinkCounters,
}

fn io(what: &str, e: std::io::Error) -> LinkError {
    LinkError::Io(format!("{what}: {e}"))
}

/// Splits a connected stream into the link's two halves.
pub fn open<S: ByteStream>(
    s: S,
    tx_buffer: usize,
) -> Result<(StreamTx<S>, StreamRx<S>), LinkError> {
    s.nonblocking()
        .map_err(|e| io("cannot make the stream non-blocking", e))?;
    let r = s
        .duplicate()
        .map_err(|e| io("cannot duplicate the stream", e))?;
    let limit = tx_buffer.max(CELL_LEN * (PREAMBLE_CELLS + 1));
    let mut buf = Vec::with_capacity(limit);
    for _ in 0..PREAMBLE_CELLS {
        buf.extend_from_slice(&idle_cell());
    }
    Ok((
        StreamTx {
            s,
            buf,
            sent: 0,
            limit,
            counters: LinkCounters::default(),
        },
        StreamRx {
            s: r,
            buf: vec![0; 64 * 1024],
            delineator: Delineator::new(),
            pending: crate::Pending::default(),
            closed: false,
            counters: LinkCounters::default(),
        },
    ))
}

impl<S: ByteStream> StreamTx<S> {
    /// Writes as much of the buffer as the socket takes now.
    fn flush_some(&mut self) -> Result<(), LinkError> {
        while self.sent < self.buf.len() {
            match self.s.write(&self.buf[self.sent..]) {
                Ok(0) => return Err(LinkError::Closed),
                Ok(n) => {
                    self.sent += n;
                    self.counters.datagrams_out += 1;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) =>
                {
                    return Err(LinkError::Closed)
                }
                Err(e) => return Err(io("stream write failed", e)),
            }
        }
        if self.sent == self.buf.len() {
            self.buf.clear();
            self.sent = 0;
        } else if self.sent > self.limit / 2 {
            self.buf.drain(..self.sent);
            self.sent = 0;
        }
        Ok(())
    }

    /// Bytes taken but not yet written to the socket.
    pub fn backlog(&self) -> usize {
        self.buf.len() - self.sent
    }

    /// Writes raw bytes (for tests that need to slip or corrupt the stream).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), LinkError> {
        self.buf.extend_from_slice(bytes);
        self.flush_some()
    }
}

impl<S: ByteStream> CellSink for StreamTx<S> {
    fn send(&mut self, cells: &[CellBytes]) -> Result<usize, LinkError> {
        self.flush_some()?;
        let room = self.limit.saturating_sub(self.buf.len()) / CELL_LEN;
        let n = room.min(cells.len());
        for c in &cells[..n] {
            self.buf.extend_from_slice(c);
        }
        self.counters.cells_out += n as u64;
        self.flush_some()?;
        Ok(n)
    }

    fn wait_ready(&mut self, timeout: Duration) {
        if self.buf.len() < self.limit {
            return;
        }
        crate::poll_fd(self.s.as_fd(), rustix::event::PollFlags::OUT, timeout);
        let _ = self.flush_some();
    }

    fn flush(&mut self) -> Result<bool, LinkError> {
        self.flush_some()?;
        Ok(self.backlog() == 0)
    }

    fn counters(&self) -> LinkCounters {
        self.counters
    }
}

impl<S: ByteStream> StreamRx<S> {
    fn read_some(&mut self) -> Result<bool, LinkError> {
        if self.closed {
            return Err(LinkError::Closed);
        }
        let n = match self.s.read(&mut self.buf) {
            Ok(0) => {
                self.closed = true;
                return Err(LinkError::Closed);
            }
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => return Ok(true),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                self.closed = true;
                return Err(LinkError::Closed);
            }
            Err(e) => return Err(io("stream read failed", e)),
        };
        self.counters.datagrams_in += 1;
        let before = self.delineator.counters();
        let pending = self.pending.refill();
        let mut idle = 0u64;
        self.delineator.push(&self.buf[..n], |c| {
            if c[..5] == IDLE_HEADER {
                idle += 1;
            } else {
                pending.push(*c);
            }
        });
        self.counters.drops.add(LinkDrop::Idle, idle);
        let after = self.delineator.counters();
        let hec = self.delineator.hec_receiver().counters();
        self.counters.hec_corrected = hec.corrected;
        self.counters.cells_in += (after.cells_delivered - before.cells_delivered)
            + (after.hec_discarded - before.hec_discarded);
        self.counters.drops.add(
            LinkDrop::HecDiscarded,
            after.hec_discarded - before.hec_discarded,
        );
        self.counters.drops.add(
            LinkDrop::BytesSkipped,
            after.bytes_skipped - before.bytes_skipped,
        );
        Ok(true)
    }

    /// The delineator's state and counters.
    pub fn delineator(&self) -> &Delineator {
        &self.delineator
    }
}

impl<S: ByteStream> CellSource for StreamRx<S> {
    fn recv(&mut self, out: &mut [CellBytes]) -> Result<usize, LinkError> {
        let mut n = 0;
        while n < out.len() {
            if self.pending.is_empty() {
                match self.read_some() {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(LinkError::Closed) if n > 0 => break,
                    Err(e) => return Err(e),
                }
            }
            n += self.pending.take_into(&mut out[n..]);
        }
        self.counters.cells_delivered += n as u64;
        Ok(n)
    }

    fn wait_ready(&mut self, timeout: Duration) {
        if !self.pending.is_empty() {
            return;
        }
        crate::poll_fd(self.s.as_fd(), rustix::event::PollFlags::IN, timeout);
    }

    fn counters(&self) -> LinkCounters {
        self.counters
    }
}
