//! TUN interfaces: the kernel's IP stack on one side, Aurora on the other.
//!
//! [`Tun::create`] makes a non-persistent TUN device (IP packets without a
//! packet-information header), [`Tun::configure`] gives it an IPv4 address,
//! prefix and MTU and brings it up, and [`Tun::add_route`] points a prefix
//! at a gateway through it. The device disappears when its file is closed:
//! when the [`Tun`] is dropped, and also when the process dies however it
//! dies.
//!
//! Needs CAP_NET_ADMIN (root, or a network namespace's owner) and
//! `/dev/net/tun`.
//!
//! The device is opened with a virtio-net header on every packet
//! (`IFF_VNET_HDR`), kept inside this module: [`Tun::recv`] and
//! [`Tun::send`] move plain IP packets. No offloads are turned on, so the
//! kernel hands over whole packets with their checksums filled in (one it
//! leaves partial anyway is completed here). Packets written are marked
//! `DATA_VALID`: Aurora has carried them over AAL5, whose CRC-32 checked
//! every byte end to end, so the receiving kernel is spared a second pass
//! over each packet for its TCP or UDP checksum (as it is by a network
//! card that checks them). The IP header checksum is still checked.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

/// A TUN device.
#[derive(Debug)]
pub struct Tun {
    file: File,
    name: String,
    /// A datagram socket for the interface ioctls.
    ctl: OwnedFd,
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "\"{name}\" is not an interface name (1 to {} characters, no '/' or spaces)",
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    // SAFETY: ifreq is plain old data (a name and a union of plain data);
    // all zeros is a valid value of it.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

/// Bytes of the virtio-net header before every packet (`struct
/// virtio_net_hdr`, the kernel's default size).
const VNET_HDR_LEN: usize = 10;
/// virtio-net header flag: the checksum from `csum_start` on is partial.
const VNET_NEEDS_CSUM: u8 = 1;
/// virtio-net header flag: the packet's checksums are known good.
const VNET_DATA_VALID: u8 = 2;

/// Completes a checksum the kernel left partial: the ones'-complement sum
/// of `pkt[start..]` (which includes the partial sum already stored at
/// `start + offset`), complemented, stored at `start + offset`. False if
/// the offsets do not fit the packet.
fn complete_checksum(pkt: &mut [u8], start: usize, offset: usize) -> bool {
    let at = start.saturating_add(offset);
    if start >= pkt.len() || at.saturating_add(2) > pkt.len() {
        return false;
    }
    let mut sum: u64 = 0;
    let mut words = pkt[start..].chunks_exact(2);
    for w in &mut words {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    let c = !(sum as u16);
    pkt[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

fn sockaddr_in(a: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr are both 16 bytes and sockaddr is
    // the generic view the kernel reads sockaddr_in through.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

fn netmask(prefix: u8) -> Ipv4Addr {
    Ipv4Addr::from(
        u32::MAX
            .checked_shl(32 - u32::from(prefix.min(32)))
            .unwrap_or(0),
    )
}

impl Tun {
    /// Creates TUN device `name` (not yet up).
    pub fn create(name: &str) -> io::Result<Tun> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|e| io::Error::new(e.kind(), format!("cannot open /dev/net/tun: {e}")))?;
        let mut r = ifreq(name)?;
        r.ifr_ifru.ifru_flags =
            (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq, which `r` is, on
        // the open /dev/net/tun descriptor.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut r) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("cannot create TUN device \"{name}\": {e}"),
            ));
        }
        // SAFETY: socket() takes no pointers; a negative result is checked.
        let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if s < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `s` is a descriptor just returned to us and owned by no
        // one else.
        let ctl = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(s) };
        Ok(Tun {
            file,
            name: name.to_string(),
            ctl,
        })
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn ctl_ioctl(&self, req: libc::Ioctl, r: &mut libc::ifreq, what: &str) -> io::Result<()> {
        // SAFETY: every request used here (SIOCSIF*, SIOCGIFFLAGS) reads or
        // writes exactly one ifreq, which `r` is.
        let rc = unsafe { libc::ioctl(self.ctl.as_raw_fd(), req, r as *mut libc::ifreq) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("cannot {what} on {}: {e}", self.name),
            ));
        }
        Ok(())
    }

    /// Gives the interface `addr/prefix` and `mtu`, and brings it up.
    pub fn configure(&self, addr: Ipv4Addr, prefix: u8, mtu: u32) -> io::Result<()> {
        let mut r = ifreq(&self.name)?;
        r.ifr_ifru.ifru_addr = sockaddr_in(addr);
        self.ctl_ioctl(libc::SIOCSIFADDR as _, &mut r, "set the address")?;
        let mut r = ifreq(&self.name)?;
        r.ifr_ifru.ifru_netmask = sockaddr_in(netmask(prefix));
        self.ctl_ioctl(libc::SIOCSIFNETMASK as _, &mut r, "set the netmask")?;
        let mut r = ifreq(&self.name)?;
        r.ifr_ifru.ifru_mtu = mtu.min(i32::MAX as u32) as libc::c_int;
        self.ctl_ioctl(libc::SIOCSIFMTU as _, &mut r, "set the MTU")?;
        let mut r = ifreq(&self.name)?;
        self.ctl_ioctl(libc::SIOCGIFFLAGS as _, &mut r, "read the flags")?;
        // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
        let flags = unsafe { r.ifr_ifru.ifru_flags };
        r.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        self.ctl_ioctl(libc::SIOCSIFFLAGS as _, &mut r, "bring it up")
    }

    /// Turns IPv6 off on the interface, so the kernel sends it no router
    /// solicitations or other IPv6 packets it cannot deliver (an error if
    /// the kernel has no IPv6, which leaves nothing to turn off).
    pub fn disable_ipv6(&self) -> io::Result<()> {
        std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", self.name),
            b"1",
        )
    }

    /// Routes `dst/prefix` through `gateway` on this interface.
    pub fn add_route(&self, dst: Ipv4Addr, prefix: u8, gateway: Ipv4Addr) -> io::Result<()> {
        let mut dev: Vec<u8> = self.name.bytes().chain([0]).collect();
        // SAFETY: rtentry is plain old data plus a device-name pointer; all
        // zeros is valid (a null pointer).
        let mut rt: libc::rtentry = unsafe { std::mem::zeroed() };
        rt.rt_dst = sockaddr_in(dst);
        rt.rt_genmask = sockaddr_in(netmask(prefix));
        rt.rt_gateway = sockaddr_in(gateway);
        rt.rt_flags = libc::RTF_UP | libc::RTF_GATEWAY;
        rt.rt_dev = dev.as_mut_ptr().cast();
        // SAFETY: SIOCADDRT reads one rtentry, whose device-name pointer
        // points at `dev`, a NUL-terminated buffer alive for the call.
        let rc = unsafe { libc::ioctl(self.ctl.as_raw_fd(), libc::SIOCADDRT as _, &mut rt) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "cannot route {dst}/{prefix} via {gateway} on {}: {e}",
                    self.name
                ),
            ));
        }
        Ok(())
    }

    /// Reads one packet the kernel sent into the interface; `None` if none
    /// is waiting. A packet longer than `buf` is cut short.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let mut hdr = [0u8; VNET_HDR_LEN];
        let mut parts = [io::IoSliceMut::new(&mut hdr), io::IoSliceMut::new(buf)];
        let n = match self.file.read_vectored(&mut parts) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        };
        let bad = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidData, what.to_string()));
        let Some(len) = n.checked_sub(VNET_HDR_LEN) else {
            return bad("a TUN read shorter than its virtio-net header");
        };
        let len = len.min(buf.len());
        // gso_type: no segmentation offload was turned on, so none comes.
        if hdr[1] != 0 {
            return bad("a TUN read asks for segmentation offload, which was not turned on");
        }
        if hdr[0] & VNET_NEEDS_CSUM != 0 {
            let start = usize::from(u16::from_le_bytes([hdr[6], hdr[7]]));
            let offset = usize::from(u16::from_le_bytes([hdr[8], hdr[9]]));
            if !complete_checksum(&mut buf[..len], start, offset) {
                return bad("a TUN read's partial checksum lies outside the packet");
            }
        }
        Ok(Some(len))
    }

    /// Hands one packet to the kernel; false if the kernel's queue was full
    /// (the packet is dropped).
    pub fn send(&mut self, pkt: &[u8]) -> io::Result<bool> {
        let mut hdr = [0u8; VNET_HDR_LEN];
        hdr[0] = VNET_DATA_VALID;
        let parts = [io::IoSlice::new(&hdr), io::IoSlice::new(pkt)];
        match self.file.write_vectored(&parts) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netmasks() {
        assert_eq!(netmask(0), Ipv4Addr::new(0, 0, 0, 0));
        assert_eq!(netmask(24), Ipv4Addr::new(255, 255, 255, 0));
        assert_eq!(netmask(32), Ipv4Addr::new(255, 255, 255, 255));
        assert_eq!(netmask(9), Ipv4Addr::new(255, 128, 0, 0));
    }

    fn ones_sum(b: &[u8]) -> u32 {
        let mut sum: u32 = b
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)])))
            .sum();
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        sum
    }

    #[test]
    fn a_partial_checksum_is_completed_as_the_kernel_would() {
        // Four bytes of IP-ish header, then a UDP header and 3 bytes of
        // data (odd length), its checksum field holding the pseudo-header
        // sum as the kernel leaves it (here 0x1234).
        let seed = 0x1234;
        let mut p = vec![
            0x45, 0, 0, 0, 0x30, 0x39, 0x00, 0x35, 0, 11, 0x12, 0x34, 1, 2, 3,
        ];
        assert!(complete_checksum(&mut p, 4, 6));
        // The segment with its checksum, plus the pseudo-header sum, sums
        // to all ones: what the receiver checks.
        let mut sum = ones_sum(&p[4..]) + seed;
        sum = (sum & 0xFFFF) + (sum >> 16);
        assert_eq!(sum, 0xFFFF);
        // Offsets outside the packet are refused, never a panic.
        assert!(!complete_checksum(&mut p, 4, 100));
        assert!(!complete_checksum(&mut p, 100, 0));
        assert!(!complete_checksum(&mut p, 13, 1));
        assert!(!complete_checksum(&mut [], 0, 0));
        assert!(!complete_checksum(&mut p, usize::MAX, usize::MAX));
    }

    #[test]
    fn bad_names_are_refused_before_any_system_call() {
        for n in ["", "a/b", "has space", "sixteen-chars-xx"] {
            assert!(ifreq(n).is_err(), "{n}");
        }
        assert!(ifreq("aur0").is_ok());
    }
}
