//! Variable-length frames over UDP, one to a datagram (ATOMIC packets
//! between processes).
//!
//! ```text
//!  offset 0  "AF" (0x41 0x46)
//!  offset 2  version (1)
//!  offset 3  session: a number the sender picks when it opens the link
//!  offset 4  sequence number, u32 big-endian (frames sent before it)
//!  offset 8  the frame (0 to 65,499 bytes)
//! ```
//!
//! As with cells over UDP ([`crate::udp`]), only the configured peer is
//! heard; strangers and malformed datagrams are counted drops; gaps in the
//! sequence count frames lost on the way; a new session is a peer restart.
//! [`open`] gives the two halves of one socket, a sender and a receiver,
//! each with its own [`LinkCounters`] (whose "cells" are frames here).

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};

use crate::{LinkCounters, LinkDrop, LinkError};

/// Bytes before the frame.
pub const HEADER_LEN: usize = 8;
/// The longest frame a datagram carries.
pub const MAX_FRAME: usize = 65_507 - HEADER_LEN;
const MAGIC: [u8; 2] = *b"AF";
const VERSION: u8 = 1;

/// The sending half of a frame link.
#[derive(Debug)]
pub struct FrameTx {
    sock: UdpSocket,
    peer: SocketAddr,
    session: u8,
    seq: u32,
    buf: Vec<u8>,
    counters: LinkCounters,
}

/// The receiving half of a frame link.
#[derive(Debug)]
pub struct FrameRx {
    sock: UdpSocket,
    peer: SocketAddr,
    /// The peer's session and the sequence number expected next.
    expect: Option<(u8, u32)>,
    buf: Vec<u8>,
    counters: LinkCounters,
    /// How long the oldest frame of the last `recv` had waited.
    waited: Option<std::time::Duration>,
    waits: crate::wait::SocketWaits,
}

fn io(what: &str, e: std::io::Error) -> LinkError {
    LinkError::Io(format!("{what}: {e}"))
}

/// Binds `local` (non-blocking) to talk with `peer`: the sending and the
/// receiving half.
pub fn open(local: SocketAddr, peer: SocketAddr) -> Result<(FrameTx, FrameRx), LinkError> {
    let sock = UdpSocket::bind(local).map_err(|e| io(&format!("cannot bind UDP {local}"), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| io("cannot make the UDP socket non-blocking", e))?;
    // Best effort: the kernel caps this at net.core.rmem_max.
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&sock, 4 << 20);
    let rx = sock
        .try_clone()
        .map_err(|e| io("cannot clone the UDP socket", e))?;
    let waits = crate::wait::SocketWaits::on(&rx);
    let session = (std::process::id() as u8)
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as u8));
    Ok((
        FrameTx {
            sock,
            peer,
            session,
            seq: 0,
            buf: Vec::with_capacity(HEADER_LEN + 2048),
            counters: LinkCounters::default(),
        },
        FrameRx {
            sock: rx,
            peer,
            expect: None,
            buf: vec![0; 65_536],
            counters: LinkCounters::default(),
            waited: None,
            waits,
        },
    ))
}

impl FrameTx {
    /// Sends `frames` in order, one datagram each; returns how many the
    /// link took. A full socket buffer stops it (the rest are the
    /// caller's); a frame too long for a datagram (`bad_frame`) or one the
    /// network refuses (`peer_unreachable`) is taken and counted as
    /// dropped.
    pub fn send<B: AsRef<[u8]>>(&mut self, frames: &[B]) -> usize {
        let mut done = 0;
        for f in frames {
            let f = f.as_ref();
            if f.len() > MAX_FRAME {
                self.counters.drops.add(LinkDrop::BadFrame, 1);
                done += 1;
                continue;
            }
            self.buf.clear();
            self.buf.extend_from_slice(&MAGIC);
            self.buf.push(VERSION);
            self.buf.push(self.session);
            self.buf.extend_from_slice(&self.seq.to_be_bytes());
            self.buf.extend_from_slice(f);
            match self.sock.send_to(&self.buf, self.peer) {
                Ok(_) => {
                    self.counters.cells_out += 1;
                    self.counters.datagrams_out += 1;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // Nobody there, or no route: lost on the way, as on a cut
                // cable; the far end counts the gap if it hears later ones.
                Err(_) => self.counters.drops.add(LinkDrop::PeerUnreachable, 1),
            }
            self.seq = self.seq.wrapping_add(1);
            done += 1;
        }
        done
    }

    /// The counters: `cells_out` counts frames sent.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// The local address (useful after binding port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.sock.local_addr().ok()
    }
}

impl FrameRx {
    /// Appends up to `max` frames waiting from the peer to `out`; returns
    /// how many.
    pub fn recv(&mut self, out: &mut Vec<Vec<u8>>, max: usize) -> Result<usize, LinkError> {
        let mut n = 0;
        self.waited = None;
        while n < max {
            let (len, from) = match self.sock.recv_from(&mut self.buf) {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.waits.seen_empty();
                    break;
                }
                // An ICMP error from an earlier send.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(io("UDP receive failed", e)),
            };
            self.counters.datagrams_in += 1;
            if from != self.peer {
                self.counters.drops.add(LinkDrop::Stranger, 1);
                continue;
            }
            let d = &self.buf[..len];
            if len < HEADER_LEN || d[..2] != MAGIC || d[2] != VERSION {
                self.counters.drops.add(LinkDrop::BadFrame, 1);
                continue;
            }
            let session = d[3];
            let seq = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
            match self.expect {
                Some((s, next)) if s == session => {
                    let gap = seq.wrapping_sub(next);
                    if gap >= 1 << 31 {
                        // Older than one already taken: its frame was
                        // counted lost then, and stays so.
                        self.counters.datagrams_late += 1;
                        continue;
                    }
                    self.counters
                        .drops
                        .add(LinkDrop::LostInTransit, u64::from(gap));
                }
                Some(_) => {
                    // The sender restarted: the new one's frames before
                    // this one were lost on the way.
                    self.counters.peer_restarts += 1;
                    self.counters
                        .drops
                        .add(LinkDrop::LostInTransit, u64::from(seq));
                }
                None => {}
            }
            self.expect = Some((session, seq.wrapping_add(1)));
            self.counters.cells_in += 1;
            self.counters.cells_delivered += 1;
            out.push(d[HEADER_LEN..].to_vec());
            if n == 0 {
                self.waited = self.waits.waited(&self.sock);
            }
            n += 1;
        }
        Ok(n)
    }

    /// How long the oldest frame the last [`FrameRx::recv`] handed over
    /// had waited in the kernel before it was read; `None` if that call
    /// handed over nothing or the kernel did not say.
    pub fn waited(&self) -> Option<std::time::Duration> {
        self.waited
    }

    /// The counters: `cells_in` and `cells_delivered` count frames.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// The local address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.sock.local_addr().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> ((FrameTx, FrameRx), (FrameTx, FrameRx)) {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let mut x = open(any, any).unwrap();
        let mut y = open(any, x.1.local_addr().unwrap()).unwrap();
        x.0.peer = y.1.local_addr().unwrap();
        x.1.peer = x.0.peer;
        y.1.peer = x.1.local_addr().unwrap();
        (x, y)
    }

    fn wait() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    #[test]
    fn frames_cross_and_gaps_are_counted() {
        let ((mut tx, _), (_, mut rx)) = pair();
        let mut got = Vec::new();
        assert_eq!(tx.send(&[b"one".to_vec()]), 1);
        tx.seq += 2; // two frames "lost"
        assert_eq!(tx.send(&[Vec::new(), vec![9; 3000]]), 2);
        wait();
        assert_eq!(rx.recv(&mut got, 10).unwrap(), 3);
        assert_eq!(got[0], b"one");
        assert!(got[1].is_empty());
        assert_eq!(got[2].len(), 3000);
        assert_eq!(rx.recv(&mut got, 10).unwrap(), 0);
        let c = rx.counters();
        assert_eq!(
            (c.cells_delivered, c.drops.get(LinkDrop::LostInTransit)),
            (3, 2)
        );
        // The same sequence number again is late, and dropped.
        tx.seq -= 1;
        tx.send(&[b"again"]);
        wait();
        assert_eq!(rx.recv(&mut got, 10).unwrap(), 0);
        assert_eq!(rx.counters().datagrams_late, 1);
        // A stranger and a malformed datagram are counted, not delivered.
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        s.send_to(b"AF\x01\x00\x00\x00\x00\x00hi", to).unwrap();
        tx.sock.send_to(b"XY", to).unwrap();
        wait();
        assert_eq!(rx.recv(&mut got, 10).unwrap(), 0);
        let c = rx.counters();
        assert_eq!(
            (
                c.drops.get(LinkDrop::Stranger),
                c.drops.get(LinkDrop::BadFrame)
            ),
            (1, 1)
        );
        // A frame too long for a datagram is taken and counted dropped.
        assert_eq!(tx.send(&[vec![0; MAX_FRAME + 1]]), 1);
        assert_eq!(tx.counters().drops.get(LinkDrop::BadFrame), 1);
        assert_eq!(tx.counters().cells_out, 4);
    }

    #[test]
    fn a_restarted_sender_is_counted_with_what_it_sent_unheard() {
        let ((mut tx, _), (_, mut rx)) = pair();
        let mut got = Vec::new();
        tx.send(&[b"a", b"b"]);
        wait();
        assert_eq!(rx.recv(&mut got, 10).unwrap(), 2);
        tx.session = tx.session.wrapping_add(1);
        tx.seq = 3; // three frames of the new session went unheard
        tx.send(&[b"c"]);
        wait();
        assert_eq!(rx.recv(&mut got, 10).unwrap(), 1);
        let c = rx.counters();
        assert_eq!(
            (c.peer_restarts, c.drops.get(LinkDrop::LostInTransit)),
            (1, 3)
        );
    }
}
