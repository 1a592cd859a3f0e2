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

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};

/// Bytes before the frame.
pub const HEADER_LEN: usize = 8;
/// The longest frame a datagram carries.
pub const MAX_FRAME: usize = 65_507 - HEADER_LEN;
const MAGIC: [u8; 2] = *b"AF";
const VERSION: u8 = 1;

/// What a frame link counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameUdpCounters {
    /// Frames sent.
    pub sent: u64,
    /// Frames too long to send, or refused by the socket (dropped).
    pub send_dropped: u64,
    /// Frames received from the peer.
    pub received: u64,
    /// Frames the peer sent that never arrived (sequence gaps).
    pub lost: u64,
    /// Datagrams from anyone but the peer.
    pub strangers: u64,
    /// Datagrams too short or with a wrong magic or version.
    pub malformed: u64,
    /// Datagrams older than one already received (reordered or
    /// duplicated): dropped, their frames already counted as lost.
    pub late: u64,
    /// Times the peer started afresh (a new session).
    pub restarts: u64,
}

/// One end of a frame link.
#[derive(Debug)]
pub struct FrameUdp {
    sock: UdpSocket,
    peer: SocketAddr,
    session: u8,
    seq: u32,
    rx: Option<(u8, u32)>,
    buf: Vec<u8>,
    counters: FrameUdpCounters,
}

impl FrameUdp {
    /// Binds `local` (non-blocking) to talk with `peer`.
    pub fn open(local: SocketAddr, peer: SocketAddr) -> std::io::Result<FrameUdp> {
        let sock = UdpSocket::bind(local)
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot bind UDP {local}: {e}")))?;
        sock.set_nonblocking(true)?;
        let session = (std::process::id() as u8)
            ^ (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() as u8));
        Ok(FrameUdp {
            sock,
            peer,
            session,
            seq: 0,
            rx: None,
            buf: vec![0; 65_536],
            counters: FrameUdpCounters::default(),
        })
    }

    /// The counters.
    pub fn counters(&self) -> FrameUdpCounters {
        self.counters
    }

    /// Sends one frame (dropped and counted if too long or refused).
    pub fn send(&mut self, frame: &[u8]) {
        if frame.len() > MAX_FRAME {
            self.counters.send_dropped += 1;
            return;
        }
        let mut d = Vec::with_capacity(HEADER_LEN + frame.len());
        d.extend_from_slice(&MAGIC);
        d.push(VERSION);
        d.push(self.session);
        d.extend_from_slice(&self.seq.to_be_bytes());
        d.extend_from_slice(frame);
        self.seq = self.seq.wrapping_add(1);
        match self.sock.send_to(&d, self.peer) {
            Ok(_) => self.counters.sent += 1,
            // Nobody there yet, or the socket buffer is full: lost, and the
            // far end counts the gap.
            Err(_) => self.counters.send_dropped += 1,
        }
    }

    /// The next frame from the peer, if one is waiting.
    pub fn recv(&mut self) -> Option<Vec<u8>> {
        loop {
            let (n, from) = match self.sock.recv_from(&mut self.buf) {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
                // ICMP port unreachable from an earlier send, and the like.
                Err(_) => continue,
            };
            if from != self.peer {
                self.counters.strangers += 1;
                continue;
            }
            let d = &self.buf[..n];
            if n < HEADER_LEN || d[..2] != MAGIC || d[2] != VERSION {
                self.counters.malformed += 1;
                continue;
            }
            let session = d[3];
            let seq = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
            match self.rx {
                Some((s, next)) if s == session => {
                    if seq < next {
                        self.counters.late += 1;
                        continue;
                    }
                    self.counters.lost += u64::from(seq - next);
                }
                Some(_) => self.counters.restarts += 1,
                None => {}
            }
            self.rx = Some((session, seq.wrapping_add(1)));
            self.counters.received += 1;
            return Some(d[HEADER_LEN..].to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_and_gaps_are_counted() {
        let a: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let mut x = FrameUdp::open(a, a).unwrap();
        let xa = x.sock.local_addr().unwrap();
        let mut y = FrameUdp::open(a, xa).unwrap();
        x.peer = y.sock.local_addr().unwrap();
        x.send(b"one");
        x.seq += 2; // two frames "lost"
        x.send(b"");
        x.send(&[9; 3000]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(y.recv().as_deref(), Some(&b"one"[..]));
        assert_eq!(y.recv().as_deref(), Some(&b""[..]));
        assert_eq!(y.recv().map(|v| v.len()), Some(3000));
        assert_eq!(y.recv(), None);
        let c = y.counters();
        assert_eq!((c.received, c.lost), (3, 2));
        // The same sequence number again is late.
        x.seq -= 1;
        x.send(b"again");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(y.recv(), None);
        assert_eq!(y.counters().late, 1);
        // A stranger and a malformed datagram are counted, not delivered.
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(
            b"AF\x01\x00\x00\x00\x00\x00hi",
            y.sock.local_addr().unwrap(),
        )
        .unwrap();
        x.sock.send_to(b"XY", y.sock.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(y.recv(), None);
        assert_eq!((y.counters().strangers, y.counters().malformed), (1, 1));
        assert!(x.send_dropped_too_long());
    }

    impl FrameUdp {
        fn send_dropped_too_long(&mut self) -> bool {
            self.send(&vec![0; MAX_FRAME + 1]);
            self.counters.send_dropped == 1
        }
    }
}
