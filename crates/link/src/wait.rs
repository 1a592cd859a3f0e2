//! How long cells waited in a link before their receiver read them.
//!
//! A receiver that reads late (its process was not running, or was busy)
//! hands its node cells that arrived earlier: the node then sees them at
//! the wrong time, and nothing else would say so. Links that can tell
//! measure that wait for the oldest cell of each read:
//!
//! * a ring's producer stamps its publications with the monotonic clock
//!   (the machine's, shared by its processes), once its consumer asks
//!   (see [`crate::ring`]);
//! * a UDP socket asks the kernel when it took in the datagram
//!   (`SIOCGSTAMPNS`: the wall clock of this machine, read on this
//!   machine, so a peer's clock never enters), and never counts more than
//!   the time since it last found the socket empty (the datagram came
//!   after that), so a wall clock stepped forward cannot make a wait.
//!
//! A stream link cannot tell (its bytes carry no boundaries the kernel
//! stamps), and says nothing.

use std::os::fd::AsRawFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The machine's monotonic clock, in nanoseconds.
pub(crate) fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0))
}

/// The time since `stamp` (monotonic nanoseconds, from [`monotonic_ns`] in
/// this or another process); zero for a stamp in the future (a peer's
/// stamp is untrusted).
pub(crate) fn since_monotonic(stamp: u64) -> Duration {
    Duration::from_nanos(monotonic_ns().saturating_sub(stamp))
}

/// The kernel's ioctl that reads the receive time of the last datagram a
/// socket handed over (`SIOCGSTAMPNS` of `<asm-generic/sockios.h>`, with
/// the C library's `struct timespec`).
const SIOCGSTAMPNS: libc::c_ulong = 0x8907;

/// When the kernel took in the last datagram read from `sock`, as time
/// since then; `None` if nothing was read yet. The first call on a socket
/// turns stamping on; the kernel does so for the machine a moment later,
/// and a datagram that came in that moment reads as not having waited.
fn socket_waited(sock: &impl AsRawFd) -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: SIOCGSTAMPNS writes one `struct timespec` through the pointer,
    // which points to one we own for the duration of the call; the file
    // descriptor is borrowed from a live socket.
    let r = unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            SIOCGSTAMPNS as _,
            &mut ts as *mut libc::timespec,
        )
    };
    if r != 0 {
        return None;
    }
    let at = UNIX_EPOCH.checked_add(Duration::new(
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?.min(999_999_999),
    ))?;
    // A clock stepped back since gives no wait.
    Some(SystemTime::now().duration_since(at).unwrap_or_default())
}

/// How long datagrams read from one socket had waited there.
#[derive(Debug, Default)]
pub(crate) struct SocketWaits {
    /// The monotonic clock when the socket was last found empty.
    empty_at: Option<u64>,
}

impl SocketWaits {
    /// Turns the kernel's receive stamps on for `sock` (before anything
    /// is read from it).
    pub(crate) fn on(sock: &impl AsRawFd) -> Self {
        let _ = socket_waited(sock);
        SocketWaits::default()
    }

    /// The socket had nothing to read.
    pub(crate) fn seen_empty(&mut self) {
        self.empty_at = Some(monotonic_ns());
    }

    /// How long the datagram last read from `sock` had waited: the
    /// kernel's stamp, bounded by the time since the socket was last found
    /// empty.
    pub(crate) fn waited(&self, sock: &impl AsRawFd) -> Option<Duration> {
        let w = socket_waited(sock)?;
        Some(self.empty_at.map_or(w, |t| w.min(since_monotonic(t))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_read_late_waited_and_a_future_stamp_did_not() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // Nothing read yet: nothing to say (and stamping is now on).
        assert_eq!(socket_waited(&rx), None);
        // The kernel turns stamps on from a work queue, a moment later: a
        // datagram before then reads as not having waited. Until one has.
        let mut b = [0u8; 8];
        let mut w = Duration::ZERO;
        for _ in 0..50 {
            tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
            std::thread::sleep(Duration::from_millis(30));
            rx.recv_from(&mut b).unwrap();
            w = socket_waited(&rx).unwrap();
            // (An unstamped datagram reads as having waited nothing, to
            // within the time the read took.)
            if w >= Duration::from_millis(10) {
                break;
            }
        }
        assert!(
            w >= Duration::from_millis(30) && w < Duration::from_secs(5),
            "{w:?}"
        );
        // Found empty 10 ms into the wait: bounded by the time since, 10 ms
        // short of the kernel's own count whatever the sleeps overran.
        let mut waits = SocketWaits::default();
        tx.send_to(b"y", rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(Duration::from_millis(10));
        waits.seen_empty();
        std::thread::sleep(Duration::from_millis(20));
        rx.recv_from(&mut b).unwrap();
        let w = waits.waited(&rx).unwrap();
        let kernel = socket_waited(&rx).unwrap();
        assert!(w + Duration::from_millis(9) <= kernel, "{w:?} {kernel:?}");
        assert_eq!(since_monotonic(u64::MAX), Duration::ZERO);
        let t = monotonic_ns();
        std::thread::sleep(Duration::from_millis(5));
        assert!(since_monotonic(t) >= Duration::from_millis(5));
    }
}
