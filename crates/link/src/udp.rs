//! Cells over UDP, many to a datagram.
//!
//! ```text
//!  offset 0  "AU" (0x41 0x55)
//!  offset 2  version (1)
//!  offset 3  session: a number the sender picks when it opens the link
//!  offset 4  index of the first cell, u32 big-endian (cells sent before it)
//!  offset 8  N whole 53-byte cells, N ≥ 1
//! ```
//!
//! The receiver takes datagrams only from its configured peer; anything else
//! (strangers, short or ragged datagrams, a wrong magic or version) is a
//! counted drop. A gap in the cell index counts the cells lost on the way
//! (UDP drops silently when a socket buffer overflows), and the index of
//! the first datagram the receiver sees counts the cells its peer sent
//! before it listened ([`LinkDrop::PeerUnreachable`]: this end not started
//! yet, or restarted; on a real network, datagrams lost before the first
//! one arrived are counted here too), so `cells delivered + cells lost +
//! cells sent before this end listened + HEC discards` equals the sender's
//! index of the next cell expected ([`UdpRx::cells_accounted`]).
//!
//! A sender that restarts (a switch process killed and started again) picks
//! a new session and counts its cells from 0 again. The receiver sees the
//! session change, counts a peer restart, and starts its accounting afresh
//! from that datagram: the new sender's cells before it count as lost. (One
//! restart in 256 draws the same session; it then looks like late
//! datagrams until the index catches up, and the accounting says so.)

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use aurora_wire::{CellBytes, CELL_LEN};

use crate::{CellSink, CellSource, LinkCounters, LinkDrop, LinkError, RxFilter};

/// Bytes before the cells in each datagram.
pub const HEADER_LEN: usize = 8;
const MAGIC: [u8; 2] = *b"AU";
const VERSION: u8 = 1;
/// Cells per datagram by default: the most that fit a 1500-byte Ethernet
/// MTU with IPv4 and UDP headers.
pub const DEFAULT_CELLS_PER_DATAGRAM: usize = (1472 - HEADER_LEN) / CELL_LEN;
/// The most cells a datagram may carry.
pub const MAX_CELLS_PER_DATAGRAM: usize = (65507 - HEADER_LEN) / CELL_LEN;

fn io(what: &str, e: std::io::Error) -> LinkError {
    LinkError::Io(format!("{what}: {e}"))
}

/// Checks a datagram's framing; returns its session, the index of its first
/// cell and its cells' bytes (a whole number of cells, at least one).
pub fn parse_datagram(d: &[u8]) -> Result<(u8, u32, &[u8]), LinkDrop> {
    if d.len() < HEADER_LEN + CELL_LEN || !(d.len() - HEADER_LEN).is_multiple_of(CELL_LEN) {
        return Err(LinkDrop::BadFrame);
    }
    if d[..2] != MAGIC || d[2] != VERSION {
        return Err(LinkDrop::BadFrame);
    }
    Ok((
        d[3],
        u32::from_be_bytes([d[4], d[5], d[6], d[7]]),
        &d[HEADER_LEN..],
    ))
}

/// The sending half.
pub struct UdpTx {
    sock: UdpSocket,
    peer: SocketAddr,
    per_datagram: usize,
    session: u8,
    seq: u32,
    buf: Vec<u8>,
    counters: LinkCounters,
}

/// The receiving half.
pub struct UdpRx {
    sock: UdpSocket,
    peer: SocketAddr,
    expect: Option<(u8, u32)>,
    accounted: u64,
    buf: Vec<u8>,
    pending: crate::Pending,
    filter: RxFilter,
    counters: LinkCounters,
    /// How long the oldest cell of the last `recv` had waited.
    waited: Option<Duration>,
    waits: crate::wait::SocketWaits,
}

/// Binds `local` and opens both halves of a link to `peer`.
/// `cells_per_datagram` is clamped to 1..=[`MAX_CELLS_PER_DATAGRAM`].
pub fn open(
    local: SocketAddr,
    peer: SocketAddr,
    cells_per_datagram: usize,
) -> Result<(UdpTx, UdpRx), LinkError> {
    let sock = UdpSocket::bind(local).map_err(|e| io(&format!("cannot bind UDP {local}"), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| io("cannot make the UDP socket non-blocking", e))?;
    // Best effort: the kernel caps this at net.core.rmem_max.
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&sock, 4 << 20);
    let rx_sock = sock
        .try_clone()
        .map_err(|e| io("cannot clone the UDP socket", e))?;
    let waits = crate::wait::SocketWaits::on(&rx_sock);
    let per = cells_per_datagram.clamp(1, MAX_CELLS_PER_DATAGRAM);
    Ok((
        UdpTx {
            sock,
            peer,
            per_datagram: per,
            session: new_session(),
            seq: 0,
            buf: Vec::with_capacity(HEADER_LEN + per * CELL_LEN),
            counters: LinkCounters::default(),
        },
        UdpRx {
            sock: rx_sock,
            peer,
            expect: None,
            accounted: 0,
            buf: vec![0; 65536],
            pending: crate::Pending::default(),
            filter: RxFilter::default(),
            counters: LinkCounters::default(),
            waited: None,
            waits,
        },
    ))
}

/// A session number unlikely to repeat across restarts of a process.
fn new_session() -> u8 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let x = (t ^ u64::from(std::process::id()).rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 56) as u8
}

impl UdpTx {
    /// The local address (useful after binding port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.sock.local_addr().ok()
    }
}

impl UdpRx {
    /// The local address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.sock.local_addr().ok()
    }

    /// Cells the sender had sent up to the last datagram seen: each is
    /// delivered, lost in transit, sent before this end listened, discarded
    /// by the HEC check, or still queued here.
    pub fn cells_accounted(&self) -> u64 {
        self.accounted
    }

    /// Reads one datagram, if any, into `pending`. Returns false when the
    /// socket had nothing.
    fn read_datagram(&mut self) -> Result<bool, LinkError> {
        let (n, from) = match self.sock.recv_from(&mut self.buf) {
            Ok(x) => x,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                self.waits.seen_empty();
                return Ok(false);
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Ok(false),
            Err(e) => return Err(io("UDP receive failed", e)),
        };
        self.counters.datagrams_in += 1;
        if from != self.peer {
            self.counters.drops.add(LinkDrop::Stranger, 1);
            return Ok(true);
        }
        let (session, first, body) = match parse_datagram(&self.buf[..n]) {
            Ok(x) => x,
            Err(reason) => {
                self.counters.drops.add(reason, 1);
                return Ok(true);
            }
        };
        let cells = (body.len() / CELL_LEN) as u32;
        let want = match self.expect {
            Some((s, want)) if s == session => Some(want),
            Some(_) => {
                // The sender restarted: the new one's cells before this
                // datagram were lost on the way.
                self.counters.peer_restarts += 1;
                self.counters
                    .drops
                    .add(LinkDrop::LostInTransit, u64::from(first));
                self.accounted += u64::from(first);
                None
            }
            None => {
                // The first datagram this end sees: the sender's cells
                // before it were sent while this end was not listening
                // (not started yet, or restarted).
                self.counters
                    .drops
                    .add(LinkDrop::PeerUnreachable, u64::from(first));
                self.accounted += u64::from(first);
                None
            }
        };
        if let Some(want) = want {
            let gap = first.wrapping_sub(want);
            if gap != 0 && gap < 1 << 31 {
                self.counters
                    .drops
                    .add(LinkDrop::LostInTransit, u64::from(gap));
            } else if gap >= 1 << 31 {
                // Late or duplicated: its cells still go up (the AAL judges
                // them), but the index does not move back.
                self.counters.datagrams_late += 1;
            }
        }
        if want.is_none_or(|w| first.wrapping_sub(w) < 1 << 31) {
            self.accounted += u64::from(
                first
                    .wrapping_add(cells)
                    .wrapping_sub(want.unwrap_or(first)),
            );
            self.expect = Some((session, first.wrapping_add(cells)));
        }
        let pending = self.pending.refill();
        for c in body.chunks_exact(CELL_LEN) {
            let mut cell: CellBytes = c.try_into().expect("chunks of 53");
            self.counters.cells_in += 1;
            if self.filter.accept(&mut cell, &mut self.counters) {
                pending.push(cell);
            }
        }
        Ok(true)
    }
}

impl CellSink for UdpTx {
    fn send(&mut self, cells: &[CellBytes]) -> Result<usize, LinkError> {
        let mut done = 0;
        for chunk in cells.chunks(self.per_datagram) {
            self.buf.clear();
            self.buf.extend_from_slice(&MAGIC);
            self.buf.push(VERSION);
            self.buf.push(self.session);
            self.buf.extend_from_slice(&self.seq.to_be_bytes());
            for c in chunk {
                self.buf.extend_from_slice(c);
            }
            match self.sock.send_to(&self.buf, self.peer) {
                Ok(_) => {
                    self.seq = self.seq.wrapping_add(chunk.len() as u32);
                    self.counters.datagrams_out += 1;
                    self.counters.cells_out += chunk.len() as u64;
                    done += chunk.len();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // The peer's port is closed (ICMP refused): the cells are lost
                // on the way, as on a cut fibre; count them and go on.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    self.counters
                        .drops
                        .add(LinkDrop::PeerUnreachable, chunk.len() as u64);
                    done += chunk.len();
                }
                // What went before was sent: say so; the error comes again
                // with the next call.
                Err(_) if done > 0 => break,
                Err(e) => return Err(io(&format!("UDP send to {} failed", self.peer), e)),
            }
        }
        Ok(done)
    }

    fn wait_ready(&mut self, timeout: Duration) {
        crate::poll_fd(
            rustix::fd::AsFd::as_fd(&self.sock),
            rustix::event::PollFlags::OUT,
            timeout,
        );
    }

    fn counters(&self) -> LinkCounters {
        self.counters
    }
}

impl CellSource for UdpRx {
    fn recv(&mut self, out: &mut [CellBytes]) -> Result<usize, LinkError> {
        let mut n = 0;
        // The oldest cell handed over is the first of `pending`: cells of
        // the last datagram read (the kernel's stamp is still its own), or
        // of the first datagram this call reads.
        self.waited = None;
        while n < out.len() {
            if self.pending.is_empty() && !self.read_datagram()? {
                break;
            }
            if n == 0 && self.waited.is_none() && !self.pending.is_empty() {
                self.waited = self.waits.waited(&self.sock);
            }
            n += self.pending.take_into(&mut out[n..]);
        }
        if n == 0 {
            self.waited = None;
        }
        self.counters.cells_delivered += n as u64;
        Ok(n)
    }

    fn waited(&self) -> Option<Duration> {
        self.waited
    }

    fn track_discarded(&mut self, on: bool) {
        self.filter.track_discarded(on)
    }

    fn take_discarded(&mut self, f: &mut dyn FnMut(&CellBytes)) {
        self.filter.take_discarded(f)
    }

    fn wait_ready(&mut self, timeout: Duration) {
        if !self.pending.is_empty() {
            return;
        }
        crate::poll_fd(
            rustix::fd::AsFd::as_fd(&self.sock),
            rustix::event::PollFlags::IN,
            timeout,
        );
    }

    fn counters(&self) -> LinkCounters {
        self.counters
    }
}
