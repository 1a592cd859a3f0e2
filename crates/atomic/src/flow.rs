//! Flow packets: the IPv4 packets an ATOMIC host's built-in flows send,
//! and how to tell, from a packet or a frame, which flow and which packet
//! of it it is.
//!
//! A flow packet is a UDP datagram to the discard port ([`FLOW_PORT`])
//! from port [`FIRST_SOURCE_PORT`] + the sender's flow number (its first
//! flow is 0), so the source address and port name the flow. Its data are
//! the packet's sequence number in the flow (8 bytes, from 0) and a
//! pattern of it, so a receiver checks every byte against what the sender
//! wrote.

use std::net::Ipv4Addr;

use aurora_net::PortId;
use aurora_wire::ipv4;

use crate::mosaic::HOST_PORT;
use crate::wire::{self, Kind};

/// The UDP port flow packets go to: the discard port.
pub const FLOW_PORT: u16 = 9;

/// The UDP port a host's first flow sends from; its flow `n` sends from
/// this + `n`.
pub const FIRST_SOURCE_PORT: u16 = 49152;

/// Flows one host may send: as many as there are source ports from
/// [`FIRST_SOURCE_PORT`].
pub const MAX_FLOWS_PER_HOST: usize = (u16::MAX - FIRST_SOURCE_PORT) as usize + 1;

/// Shortest flow packet: IPv4 and UDP headers and the sequence number.
pub const MIN_FLOW_PACKET: usize = 36;

/// A flow: its sender's address and the sender's number for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId {
    /// The sending host's address.
    pub src: Ipv4Addr,
    /// The sender's flow number (0 for its first).
    pub flow: u16,
}

/// What a flow packet says of itself: its flow, destination and sequence
/// number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowPacket {
    /// The flow.
    pub id: FlowId,
    /// Its destination.
    pub dst: Ipv4Addr,
    /// Its sequence number in the flow.
    pub seq: u64,
}

/// Packet `seq` of `size` bytes (clamped to [`MIN_FLOW_PACKET`] to 65535)
/// of flow `id` to `dst`, with its IPv4 and UDP checksums.
pub fn packet(id: FlowId, dst: Ipv4Addr, seq: u64, size: usize) -> Vec<u8> {
    let size = size.clamp(MIN_FLOW_PACKET, 65535);
    let mut p = vec![0u8; size];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(size as u16).to_be_bytes());
    p[ipv4::TTL] = 64;
    p[ipv4::PROTOCOL] = 17;
    p[ipv4::SRC..ipv4::SRC + 4].copy_from_slice(&id.src.octets());
    p[ipv4::DST..ipv4::DST + 4].copy_from_slice(&dst.octets());
    let c = ipv4::checksum(&p[..20]);
    p[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
    let udp_len = (size - 20) as u16;
    let sport = FIRST_SOURCE_PORT.saturating_add(id.flow);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&FLOW_PORT.to_be_bytes());
    p[24..26].copy_from_slice(&udp_len.to_be_bytes());
    p[28..36].copy_from_slice(&seq.to_be_bytes());
    for (k, b) in p[36..].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(k * 7) as u8;
    }
    // The UDP checksum, over the pseudo-header too; 0 is sent as all ones.
    let [l0, l1] = udp_len.to_be_bytes();
    let pseudo = [
        &id.src.octets()[..],
        &dst.octets()[..],
        &[0, 17, l0, l1][..],
    ]
    .concat();
    let sum = u32::from(ipv4::ones_sum(&pseudo)) + u32::from(ipv4::ones_sum(&p[20..]));
    let folded = ((sum & 0xFFFF) + (sum >> 16)) as u16;
    let c = match !folded {
        0 => 0xFFFF,
        c => c,
    };
    p[26..28].copy_from_slice(&c.to_be_bytes());
    p
}

/// What IPv4 packet `ip` says of itself, if it looks like a flow packet
/// (an IPv4 header of 20 bytes, UDP from a flow's port to [`FLOW_PORT`],
/// room for the sequence number). Its bytes are not checked: a receiver
/// compares them with [`packet`]'s.
pub fn read(ip: &[u8]) -> Option<FlowPacket> {
    if ip.len() < MIN_FLOW_PACKET || ip[0] != 0x45 || ip[ipv4::PROTOCOL] != 17 {
        return None;
    }
    let sport = u16::from_be_bytes([ip[20], ip[21]]);
    let dport = u16::from_be_bytes([ip[22], ip[23]]);
    if dport != FLOW_PORT || sport < FIRST_SOURCE_PORT {
        return None;
    }
    let octets = |at: usize| Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]);
    Some(FlowPacket {
        id: FlowId {
            src: octets(ipv4::SRC),
            flow: sport - FIRST_SOURCE_PORT,
        },
        dst: octets(ipv4::DST),
        seq: u64::from_be_bytes(ip[28..36].try_into().ok()?),
    })
}

/// How an ATOMIC frame is laid out where it was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A whole packet: its route from its first pair (just the terminator
    /// for an empty route), then its payload. A frame from a host to its
    /// node.
    Whole,
    /// A frame between two Mosaic nodes: what is left of its route, whose
    /// leading pair the sending node may have worn down to (0, 0) (the
    /// next node strips it), then its payload.
    Transit,
    /// The payload alone: a frame from a node to its host.
    Payload,
}

impl Layout {
    /// How frames are laid out on the line leaving `port` of a Mosaic node
    /// (`mosaic`) or of a host (a frame a node or host shows the driver as
    /// dropped is [`Layout::Whole`]).
    pub fn leaving(mosaic: bool, port: PortId) -> Layout {
        match (mosaic, port == HOST_PORT) {
            (true, true) => Layout::Payload,
            (true, false) => Layout::Transit,
            (false, _) => Layout::Whole,
        }
    }

    /// How frames are laid out arriving at `port` of a Mosaic node
    /// (`mosaic`) or of a host: as they left the far end.
    pub fn arriving(mosaic: bool, port: PortId) -> Layout {
        match (mosaic, port == HOST_PORT) {
            (true, true) => Layout::Whole,
            (true, false) => Layout::Transit,
            (false, _) => Layout::Payload,
        }
    }
}

/// The flow packet an ATOMIC frame carries, if it carries one.
pub fn in_frame(frame: &[u8], layout: Layout) -> Option<FlowPacket> {
    let at = match layout {
        Layout::Whole => wire::payload_start(frame).ok()?,
        Layout::Transit => match frame.first_chunk::<2>()? {
            [0, 0] => 2 + wire::payload_start(&frame[2..]).ok()?,
            _ => wire::payload_start(frame).ok()?,
        },
        Layout::Payload => 0,
    };
    match frame.get(at..)? {
        [kind, ip @ ..] if *kind == Kind::Ip as u8 => read(ip),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::wire::{Msg, Route};

    const A: Ipv4Addr = Ipv4Addr::new(10, 5, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 5, 0, 4);

    #[test]
    fn a_flow_packet_is_a_udp_datagram_byte_for_byte() {
        let p = packet(FlowId { src: A, flow: 2 }, B, 1, 40);
        // Checksums worked out apart from this code.
        let want = [
            0x45, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0x66, 0xb7, 0x0a, 0x05,
            0x00, 0x01, 0x0a, 0x05, 0x00, 0x04, // IPv4
            0xc0, 0x02, 0x00, 0x09, 0x00, 0x14, 0xdf, 0x50, // UDP: ports, length, checksum
            0, 0, 0, 0, 0, 0, 0, 1, // sequence number
            0x1f, 0x26, 0x2d, 0x34, // pattern
        ];
        assert_eq!(p, want);
    }

    #[test]
    fn every_flow_packet_checksums_check() {
        for (size, seq, flow) in [
            (36, 0, 0),
            (37, 5, 1),
            (1500, 77, 9),
            (65535, u64::MAX, 16383),
        ] {
            let (src, dst) = (Ipv4Addr::new(10, 5, 0, 3), Ipv4Addr::new(10, 5, 0, 9));
            let p = packet(FlowId { src, flow }, dst, seq, size);
            assert_eq!(p.len(), size);
            assert!(ipv4::check(&p).is_ok());
            let len = ((size - 20) as u16).to_be_bytes();
            let pseudo = [&src.octets()[..], &dst.octets(), &[0, 17], &len].concat();
            let sum = u32::from(ipv4::ones_sum(&pseudo)) + u32::from(ipv4::ones_sum(&p[20..]));
            assert_eq!((sum & 0xFFFF) + (sum >> 16), 0xFFFF, "size {size}");
        }
    }

    #[test]
    fn a_flow_packet_is_found_in_every_layout_of_frame() {
        let id = FlowId {
            src: A,
            flow: 16383,
        };
        let want = FlowPacket { id, dst: B, seq: 7 };
        let ip = packet(id, B, 7, 100);
        assert_eq!(read(&ip), Some(want));
        let routed = Msg::Ip(ip.clone()).packet(&Route(vec![(2, 0), (0, -1)]));
        assert_eq!(in_frame(&routed, Layout::Whole), Some(want));
        assert_eq!(in_frame(&routed, Layout::Transit), Some(want));
        // On its way, a pair worn down to (0, 0) for the next node to
        // strip.
        let spent = [&[0, 0][..], &routed[2..]].concat();
        assert_eq!(in_frame(&spent, Layout::Transit), Some(want));
        assert_eq!(in_frame(&spent, Layout::Whole), None);
        let empty = Msg::Ip(packet(id, B, 7, 100)).packet(&Route(vec![]));
        assert_eq!(in_frame(&empty, Layout::Whole), Some(want));
        let mut payload = Vec::new();
        Msg::Ip(ip).emit(&mut payload);
        assert_eq!(in_frame(&payload, Layout::Payload), Some(want));
        // Not flow packets: other messages, other datagrams, short ones,
        // frames laid out otherwise, garbage.
        let probe = Msg::Raw {
            channel: 1,
            data: vec![0; 64],
        };
        assert_eq!(in_frame(&probe.packet(&Route(vec![])), Layout::Whole), None);
        let mut other = packet(id, B, 7, 100);
        other[22..24].copy_from_slice(&53u16.to_be_bytes());
        assert_eq!(read(&other), None);
        other[20..24].copy_from_slice(&[0, 9, 0, 9]);
        assert_eq!(read(&other), None, "an old-style packet names no flow");
        assert_eq!(read(&packet(id, B, 7, 100)[..35]), None);
        assert_eq!(in_frame(&[0x80, 0, 0, 0], Layout::Transit), None);
        assert_eq!(in_frame(&[0, 0], Layout::Transit), None);
        assert_eq!(in_frame(&[], Layout::Payload), None);
    }
}
