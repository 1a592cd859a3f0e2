//! A TCP segment as it travels: an IPv4 packet whose payload is a TCP
//! header, its options and the data.
//!
//! [`parse`] takes untrusted bytes and either returns a [`Parsed`]
//! segment or says, with a [`SegError`], why the packet is not one.
//! [`emit`] writes a whole packet from a [`SegRepr`]. The TCP header, its
//! options and its checksum are read and written with `etherparse`; the
//! IPv4 header is checked with [`aurora_wire::ipv4::check`] and laid
//! out like the ones Aurora's IP nodes write.
//!
//! What a segment carries is deliberately less than the header can say:
//!
//! * URG and the urgent pointer are not supported: ignored when
//!   received, never sent (likewise the old ECN-nonce bit).
//! * MSS, window scale and SACK-permitted mean something only on a SYN
//!   (RFC 9293 3.7.1, RFC 7323 2.2, RFC 2018 2): they are ignored on other
//!   segments and only written on SYNs.
//! * SACK blocks are only read from and written on segments without SYN;
//!   a SYN has received nothing to acknowledge selectively.
//! * Options the parser does not know are skipped by their length; when
//!   an option appears twice, the last one counts.
//!
//! Options are written in a fixed order, the one Linux uses, each group
//! padded with NOPs to a 32-bit boundary (so there is never an END
//! option):
//!
//! ```text
//! SYN:    MSS | SACK-permitted, timestamps (or NOP NOP before either alone)
//!             | NOP, window scale
//! others: NOP NOP timestamps | NOP NOP SACK blocks
//! ```
//!
//! The IPv4 header is always 20 bytes: version 4, no options, TOS 0,
//! don't-fragment set, TTL 64, protocol 6. Fragments are refused on
//! receive: this TCP never sends them, and reassembly is not its job.

use core::fmt;
use core::net::Ipv4Addr;

use aurora_wire::ipv4::{self, HeaderError};
use etherparse::{TcpHeader, TcpHeaderSlice, TcpOptionElement, TcpOptionReadError};

use crate::Seq;

/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// Length of the IPv4 header [`emit`] writes.
pub const IP_HEADER_LEN: usize = ipv4::MIN_HEADER_LEN;
/// Length of a TCP header without options.
pub const TCP_MIN_HEADER_LEN: usize = 20;
/// Most option bytes a TCP header can hold.
pub const MAX_OPTIONS_LEN: usize = 40;
/// Time to live of the packets [`emit`] writes.
pub const TTL: u8 = 64;

/// Offset of the IPv4 flags and fragment offset.
const IP_FRAG: usize = 6;
/// The don't-fragment flag in the flags and fragment offset word.
const IP_DF: u16 = 0x4000;
/// More-fragments flag and fragment offset: any bit set means a fragment.
const IP_MF_AND_OFFSET: u16 = 0x3FFF;
/// Largest IPv4 packet.
const IP_MAX_LEN: usize = u16::MAX as usize;

/// TCP control bits. URG is not among them: see the [module](self) notes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags {
    /// Synchronise sequence numbers: the segment opens a connection.
    pub syn: bool,
    /// The acknowledgement number is meaningful.
    pub ack: bool,
    /// The sender has no more data.
    pub fin: bool,
    /// Reset the connection.
    pub rst: bool,
    /// Push: hand the data to the application without waiting for more.
    pub psh: bool,
    /// ECN-Echo (RFC 3168): a congestion mark was seen.
    pub ece: bool,
    /// Congestion Window Reduced (RFC 3168): the sender reacted to ECE.
    pub cwr: bool,
}

/// The SACK blocks of one segment, in the order they appear: pairs of
/// (left edge, right edge), the right edge being the first sequence
/// number after the block (RFC 2018 3). Holds at most
/// [`CAPACITY`](Self::CAPACITY) blocks, the most a header has room for.
#[derive(Clone, Copy, Default)]
pub struct SackBlocks {
    blocks: [(Seq, Seq); SackBlocks::CAPACITY],
    len: u8,
}

impl SackBlocks {
    /// Most blocks a list holds (and an option carries).
    pub const CAPACITY: usize = 4;

    /// An empty list.
    pub const fn new() -> SackBlocks {
        SackBlocks {
            blocks: [(Seq(0), Seq(0)); SackBlocks::CAPACITY],
            len: 0,
        }
    }

    /// A list of the first [`CAPACITY`](Self::CAPACITY) blocks of
    /// `blocks`.
    pub fn from_slice(blocks: &[(Seq, Seq)]) -> SackBlocks {
        let mut s = SackBlocks::new();
        for &(left, right) in blocks.iter().take(SackBlocks::CAPACITY) {
            s.push(left, right);
        }
        s
    }

    /// Appends a block; false (and nothing changes) when the list is full.
    pub fn push(&mut self, left: Seq, right: Seq) -> bool {
        match self.blocks.get_mut(usize::from(self.len)) {
            Some(slot) => {
                *slot = (left, right);
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// Keeps the first `n` blocks.
    pub fn truncate(&mut self, n: usize) {
        if n < usize::from(self.len) {
            self.blocks[n..].fill((Seq(0), Seq(0)));
            self.len = n as u8;
        }
    }

    /// Removes every block.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// The blocks.
    pub fn as_slice(&self) -> &[(Seq, Seq)] {
        &self.blocks[..usize::from(self.len)]
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// True when there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The blocks, in order.
    pub fn iter(&self) -> core::slice::Iter<'_, (Seq, Seq)> {
        self.as_slice().iter()
    }
}

impl<'a> IntoIterator for &'a SackBlocks {
    type Item = &'a (Seq, Seq);
    type IntoIter = core::slice::Iter<'a, (Seq, Seq)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq for SackBlocks {
    fn eq(&self, other: &SackBlocks) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for SackBlocks {}

impl core::hash::Hash for SackBlocks {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl fmt::Debug for SackBlocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// The timestamps option (RFC 7323 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Timestamp {
    /// TSval: the sender's clock when it sent the segment.
    pub val: u32,
    /// TSecr: the TSval being echoed back (meaningful with ACK).
    pub ecr: u32,
}

/// The TCP header of a segment, options decoded; everything but the
/// ports and addresses the connection needs from a segment, and all that
/// [`emit`] needs to write one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SegRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number of the first byte of the segment (of the SYN, when
    /// set).
    pub seq: Seq,
    /// The next sequence number the sender expects; meaningful only when
    /// [`Flags::ack`] is set, but carried as received either way.
    pub ack: Seq,
    /// Control bits.
    pub flags: Flags,
    /// The window field as it is on the wire, before any scaling.
    pub window: u16,
    /// Maximum segment size option (SYN only).
    pub mss: Option<u16>,
    /// Window scale option, the shift count as sent (SYN only; values
    /// above 14 are the connection's to clamp).
    pub wscale: Option<u8>,
    /// SACK-permitted option (SYN only).
    pub sack_permitted: bool,
    /// SACK blocks (not on SYN). [`emit`] writes as many as fit: 3 with
    /// timestamps, 4 without.
    pub sack: SackBlocks,
    /// Timestamps option.
    pub timestamp: Option<Timestamp>,
}

impl SegRepr {
    /// How many SACK blocks [`emit`] writes: none on a SYN, else as many
    /// as there are, up to what fits beside the timestamps.
    fn sack_sent(&self) -> usize {
        if self.flags.syn {
            0
        } else if self.timestamp.is_some() {
            self.sack.len().min(3)
        } else {
            self.sack.len()
        }
    }

    /// Bytes of options [`emit`] writes for this header, a multiple of 4
    /// (each option is padded to a 32-bit boundary with NOPs).
    pub fn options_len(&self) -> usize {
        let ts = if self.timestamp.is_some() { 12 } else { 0 };
        if self.flags.syn {
            let mss = if self.mss.is_some() { 4 } else { 0 };
            // SACK-permitted shares a word with the timestamps' kind and
            // length, or takes one of its own with two NOPs.
            let sack_ok = if self.sack_permitted && ts == 0 { 4 } else { 0 };
            let ws = if self.wscale.is_some() { 4 } else { 0 };
            mss + ts + sack_ok + ws
        } else {
            let n = self.sack_sent();
            let sack = if n > 0 { 4 + 8 * n } else { 0 };
            ts + sack
        }
    }

    /// Length of the TCP header [`emit`] writes: 20 bytes plus the
    /// options.
    pub fn header_len(&self) -> usize {
        TCP_MIN_HEADER_LEN + self.options_len()
    }

    /// Sequence space the segment takes with `payload_len` bytes of data:
    /// the data, plus one for SYN and one for FIN.
    pub fn seq_len(&self, payload_len: usize) -> u32 {
        u32::try_from(payload_len)
            .unwrap_or(u32::MAX)
            .saturating_add(u32::from(self.flags.syn))
            .saturating_add(u32::from(self.flags.fin))
    }

    /// The options to write, in order, as `etherparse` elements: the
    /// first of the returned count are used.
    fn option_elements(&self) -> ([TcpOptionElement; 6], usize) {
        use TcpOptionElement::{
            MaximumSegmentSize, Noop, SelectiveAcknowledgement, SelectiveAcknowledgementPermitted,
            Timestamp as Ts, WindowScale,
        };
        let mut e: [TcpOptionElement; 6] = core::array::from_fn(|_| Noop);
        let mut n = 0;
        let mut put = |x: TcpOptionElement| {
            if let Some(slot) = e.get_mut(n) {
                *slot = x;
                n += 1;
            }
        };
        if self.flags.syn {
            if let Some(mss) = self.mss {
                put(MaximumSegmentSize(mss));
            }
            match (self.timestamp, self.sack_permitted) {
                (Some(t), true) => {
                    put(SelectiveAcknowledgementPermitted);
                    put(Ts(t.val, t.ecr));
                }
                (Some(t), false) => {
                    put(Noop);
                    put(Noop);
                    put(Ts(t.val, t.ecr));
                }
                (None, true) => {
                    put(Noop);
                    put(Noop);
                    put(SelectiveAcknowledgementPermitted);
                }
                (None, false) => {}
            }
            if let Some(ws) = self.wscale {
                put(Noop);
                put(WindowScale(ws));
            }
        } else {
            if let Some(t) = self.timestamp {
                put(Noop);
                put(Noop);
                put(Ts(t.val, t.ecr));
            }
            let blocks = &self.sack.as_slice()[..self.sack_sent()];
            if let Some((&(l, r), rest)) = blocks.split_first() {
                let mut more = [None; 3];
                for (slot, &(l, r)) in more.iter_mut().zip(rest) {
                    *slot = Some((l.0, r.0));
                }
                put(Noop);
                put(Noop);
                put(SelectiveAcknowledgement((l.0, r.0), more));
            }
        }
        (e, n)
    }
}

/// A segment [`parse`] accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// IPv4 source.
    pub src: Ipv4Addr,
    /// IPv4 destination.
    pub dst: Ipv4Addr,
    /// The TCP header.
    pub repr: SegRepr,
    /// The data, borrowed from the packet.
    pub payload: &'a [u8],
}

/// Why a packet is not an acceptable TCP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegError {
    /// The IPv4 header does not check.
    Ip(HeaderError),
    /// The packet is a fragment (more-fragments set or an offset).
    Fragment,
    /// The IP protocol is not TCP.
    NotTcp,
    /// Fewer bytes than a TCP header after the IP header.
    Truncated,
    /// The data offset is below 5 words or beyond the segment.
    BadDataOffset,
    /// An option's length is wrong for its kind or runs past the header.
    BadOption,
    /// The TCP checksum (with the IPv4 pseudo-header) does not check.
    BadChecksum,
}

impl SegError {
    /// A short snake_case name, for drop counters.
    pub const fn name(self) -> &'static str {
        match self {
            SegError::Ip(HeaderError::Truncated) => "ip_truncated",
            SegError::Ip(HeaderError::Version) => "ip_version",
            SegError::Ip(HeaderError::HeaderLength) => "ip_header_length",
            SegError::Ip(HeaderError::TotalLength) => "ip_total_length",
            SegError::Ip(HeaderError::Checksum) => "ip_checksum",
            SegError::Fragment => "fragment",
            SegError::NotTcp => "not_tcp",
            SegError::Truncated => "truncated",
            SegError::BadDataOffset => "bad_data_offset",
            SegError::BadOption => "bad_option",
            SegError::BadChecksum => "bad_checksum",
        }
    }
}

impl fmt::Display for SegError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            SegError::Ip(HeaderError::Truncated) => "packet shorter than an IPv4 header",
            SegError::Ip(HeaderError::Version) => "IP version is not 4",
            SegError::Ip(HeaderError::HeaderLength) => "bad IPv4 header length",
            SegError::Ip(HeaderError::TotalLength) => "bad IPv4 total length",
            SegError::Ip(HeaderError::Checksum) => "bad IPv4 header checksum",
            SegError::Fragment => "IPv4 fragment",
            SegError::NotTcp => "IP protocol is not TCP",
            SegError::Truncated => "segment shorter than a TCP header",
            SegError::BadDataOffset => "bad TCP data offset",
            SegError::BadOption => "malformed TCP option",
            SegError::BadChecksum => "bad TCP checksum",
        };
        f.write_str(s)
    }
}

impl std::error::Error for SegError {}

/// Parses an IPv4 packet carrying a TCP segment. Accepted when the IPv4
/// header checks ([`ipv4::check`]), the packet is not a fragment, the
/// protocol is TCP, the TCP header and its options are well formed and
/// the TCP checksum over the pseudo-header, header and data checks.
/// Bytes after the IPv4 total length are ignored. Never panics.
pub fn parse(packet: &[u8]) -> Result<Parsed<'_>, SegError> {
    let info = ipv4::check(packet).map_err(SegError::Ip)?;
    // `check` guarantees total_len ≤ packet.len() and header_len ≥ 20;
    // `get` keeps that a fact rather than an assumption.
    let ip = packet
        .get(..info.total_len)
        .ok_or(SegError::Ip(HeaderError::TotalLength))?;
    let frag = ip
        .get(IP_FRAG..IP_FRAG + 2)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    if frag & IP_MF_AND_OFFSET != 0 {
        return Err(SegError::Fragment);
    }
    if ip.get(ipv4::PROTOCOL) != Some(&PROTO_TCP) {
        return Err(SegError::NotTcp);
    }
    let src = ipv4::src(ip).ok_or(SegError::Ip(HeaderError::Truncated))?;
    let dst = info.dst;
    let seg = ip.get(info.header_len..).ok_or(SegError::Truncated)?;

    let tcp = TcpHeaderSlice::from_slice(seg).map_err(|_| {
        if seg.len() < TCP_MIN_HEADER_LEN {
            SegError::Truncated
        } else {
            // Either below 5 words or past the end of the segment.
            SegError::BadDataOffset
        }
    })?;
    let payload = seg
        .get(tcp.slice().len()..)
        .ok_or(SegError::BadDataOffset)?;

    let flags = Flags {
        syn: tcp.syn(),
        ack: tcp.ack(),
        fin: tcp.fin(),
        rst: tcp.rst(),
        psh: tcp.psh(),
        ece: tcp.ece(),
        cwr: tcp.cwr(),
    };
    let mut repr = SegRepr {
        src_port: tcp.source_port(),
        dst_port: tcp.destination_port(),
        seq: Seq(tcp.sequence_number()),
        ack: Seq(tcp.acknowledgment_number()),
        flags,
        window: tcp.window_size(),
        ..SegRepr::default()
    };
    read_options(tcp.options(), &mut repr)?;

    // The checksum field holds the complement of the sum of everything
    // else. etherparse computes that from the header it was given; 0x0000
    // and 0xFFFF are the same number (zero) in one's complement, and a
    // sender that updates checksums incrementally (RFC 1624) may write
    // either, so both are accepted.
    let want = tcp
        .calc_checksum_ipv4_raw(src.octets(), dst.octets(), payload)
        .map_err(|_| SegError::Truncated)?;
    let got = tcp.checksum();
    if got != want && !matches!((got, want), (0, 0xFFFF) | (0xFFFF, 0)) {
        return Err(SegError::BadChecksum);
    }

    Ok(Parsed {
        src,
        dst,
        repr,
        payload,
    })
}

/// Reads the option bytes of a header into `repr`, by the rules in the
/// module notes.
///
/// etherparse's iterator yields the options it knows and stops at the
/// first one it does not (an error, after which it yields nothing), so
/// unknown options are stepped over here by their length byte and the
/// iteration resumes after them.
fn read_options(mut rest: &[u8], repr: &mut SegRepr) -> Result<(), SegError> {
    let syn = repr.flags.syn;
    loop {
        let mut it = etherparse::TcpOptionsIterator::from_slice(rest);
        match it.next() {
            // The end of the options, or an END option (what follows it
            // is padding).
            None => return Ok(()),
            Some(Ok(e)) => {
                match e {
                    TcpOptionElement::Noop => {}
                    TcpOptionElement::MaximumSegmentSize(m) => {
                        if syn {
                            repr.mss = Some(m);
                        }
                    }
                    TcpOptionElement::WindowScale(s) => {
                        if syn {
                            repr.wscale = Some(s);
                        }
                    }
                    TcpOptionElement::SelectiveAcknowledgementPermitted => {
                        if syn {
                            repr.sack_permitted = true;
                        }
                    }
                    TcpOptionElement::SelectiveAcknowledgement(first, more) => {
                        if !syn {
                            repr.sack.clear();
                            for (l, r) in core::iter::once(first).chain(more.into_iter().flatten())
                            {
                                repr.sack.push(Seq(l), Seq(r));
                            }
                        }
                    }
                    TcpOptionElement::Timestamp(val, ecr) => {
                        repr.timestamp = Some(Timestamp { val, ecr });
                    }
                }
                rest = it.rest();
            }
            Some(Err(TcpOptionReadError::UnknownId(_))) => {
                // Kind, length (counting both bytes), contents.
                let len = rest.get(1).map_or(0, |&l| usize::from(l));
                if len < 2 {
                    return Err(SegError::BadOption);
                }
                rest = rest.get(len..).ok_or(SegError::BadOption)?;
            }
            Some(Err(_)) => return Err(SegError::BadOption),
        }
    }
}

/// Writes into `out` (cleared first) an IPv4 packet from `src` to `dst`
/// with identification `ident`, carrying the segment `repr` with
/// `payload`: 20-byte IPv4 header, TCP header with the options laid out
/// as the module notes describe, the data, both checksums filled.
///
/// Returns how many payload bytes went in: all of them, unless the
/// packet would pass the IPv4 limit of 65535 bytes, in which case the
/// payload is cut there (callers size data with [`max_payload`]).
pub fn emit(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ident: u16,
    repr: &SegRepr,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> usize {
    out.clear();
    let (elements, n) = repr.option_elements();
    let mut tcp = TcpHeader {
        source_port: repr.src_port,
        destination_port: repr.dst_port,
        sequence_number: repr.seq.0,
        acknowledgment_number: repr.ack.0,
        syn: repr.flags.syn,
        ack: repr.flags.ack,
        fin: repr.flags.fin,
        rst: repr.flags.rst,
        psh: repr.flags.psh,
        ece: repr.flags.ece,
        cwr: repr.flags.cwr,
        window_size: repr.window,
        ..TcpHeader::default()
    };
    // At most 40 bytes by construction (20 on a SYN, 12 + 28 or 36 on
    // others), so this cannot fail; the tests hold header_len to it.
    let _ = tcp.set_options(elements.get(..n).unwrap_or_default());
    let tcp_len = tcp.header_len();
    let payload = payload
        .get(..IP_MAX_LEN - IP_HEADER_LEN - tcp_len)
        .unwrap_or(payload);
    // Cannot fail: the payload was just cut to fit a 16-bit length.
    tcp.checksum = tcp
        .calc_checksum_ipv4_raw(src.octets(), dst.octets(), payload)
        .unwrap_or(0);

    let total = (IP_HEADER_LEN + tcp_len + payload.len()) as u16;
    let mut ip = [
        0x45, 0, 0, 0, // version, IHL, TOS, total length (below)
        0, 0, 0, 0, // identification, flags and fragment offset (below)
        TTL, PROTO_TCP, 0, 0, // TTL, protocol, checksum (below)
        0, 0, 0, 0, 0, 0, 0, 0, // source, destination (below)
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip[IP_FRAG..IP_FRAG + 2].copy_from_slice(&IP_DF.to_be_bytes());
    ip[ipv4::SRC..ipv4::SRC + 4].copy_from_slice(&src.octets());
    ip[ipv4::DST..ipv4::DST + 4].copy_from_slice(&dst.octets());
    let c = ipv4::checksum(&ip);
    ip[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());

    out.reserve(usize::from(total));
    out.extend_from_slice(&ip);
    out.extend_from_slice(&tcp.to_bytes());
    out.extend_from_slice(payload);
    payload.len()
}

/// The most data a segment with `repr`'s options can carry in a packet
/// of at most `mtu` bytes (0 when the headers alone do not fit).
pub fn max_payload(mtu: usize, repr: &SegRepr) -> usize {
    mtu.min(IP_MAX_LEN)
        .saturating_sub(IP_HEADER_LEN + repr.header_len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// A SYN from 10.0.0.1:40000 to 10.0.0.2:5001 with Linux's options.
    /// Checksums computed with a separate Python script, and checked
    /// again below with [`oc_sum`].
    #[rustfmt::skip]
    const SYN: [u8; 60] = [
        // IPv4
        0x45, 0x00,             // version 4, IHL 5; TOS 0
        0x00, 0x3c,             // total length 60
        0x00, 0x01,             // identification 1
        0x40, 0x00,             // DF, offset 0
        0x40, 0x06,             // TTL 64, protocol 6
        0x26, 0xb9,             // header checksum
        0x0a, 0x00, 0x00, 0x01, // source 10.0.0.1
        0x0a, 0x00, 0x00, 0x02, // destination 10.0.0.2
        // TCP
        0x9c, 0x40,             // source port 40000
        0x13, 0x89,             // destination port 5001
        0x3b, 0x9a, 0xca, 0x00, // seq 1000000000
        0x00, 0x00, 0x00, 0x00, // ack 0
        0xa0, 0x02,             // data offset 10 words; SYN
        0xfa, 0xf0,             // window 64240
        0xa1, 0x66,             // checksum
        0x00, 0x00,             // urgent pointer
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02,             // SACK permitted
        0x08, 0x0a,             // timestamps:
        0x00, 0x01, 0xe2, 0x40, //   TSval 123456
        0x00, 0x00, 0x00, 0x00, //   TSecr 0
        0x01,                   // NOP
        0x03, 0x03, 0x07,       // window scale 7
    ];

    fn syn_repr() -> SegRepr {
        SegRepr {
            src_port: 40000,
            dst_port: 5001,
            seq: Seq(1_000_000_000),
            ack: Seq(0),
            flags: Flags {
                syn: true,
                ..Flags::default()
            },
            window: 64240,
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            sack: SackBlocks::new(),
            timestamp: Some(Timestamp {
                val: 123_456,
                ecr: 0,
            }),
        }
    }

    const DATA_PAYLOAD: &[u8] = b"hello, aurora\n";

    /// A data segment, ACK and PSH, with timestamps and three SACK blocks.
    #[rustfmt::skip]
    const DATA: [u8; 94] = [
        // IPv4
        0x45, 0x00,             // version 4, IHL 5; TOS 0
        0x00, 0x5e,             // total length 94
        0x00, 0x02,             // identification 2
        0x40, 0x00,             // DF, offset 0
        0x40, 0x06,             // TTL 64, protocol 6
        0x26, 0x96,             // header checksum
        0x0a, 0x00, 0x00, 0x01, // source 10.0.0.1
        0x0a, 0x00, 0x00, 0x02, // destination 10.0.0.2
        // TCP
        0x9c, 0x40,             // source port 40000
        0x13, 0x89,             // destination port 5001
        0x3b, 0x9a, 0xca, 0x01, // seq 1000000001
        0x77, 0x35, 0x94, 0x00, // ack 2000000000
        0xf0, 0x18,             // data offset 15 words; ACK, PSH
        0x01, 0xf6,             // window 502
        0x86, 0x04,             // checksum
        0x00, 0x00,             // urgent pointer
        0x01, 0x01,             // NOP NOP
        0x08, 0x0a,             // timestamps:
        0x00, 0x01, 0xe2, 0x6c, //   TSval 123500
        0x00, 0x01, 0x81, 0xcd, //   TSecr 98765
        0x01, 0x01,             // NOP NOP
        0x05, 0x1a,             // SACK, 26 bytes: 3 blocks
        0x77, 0x35, 0x97, 0xe8, //   2000001000
        0x77, 0x35, 0x9b, 0xd0, //   2000002000
        0x77, 0x35, 0x9f, 0xb8, //   2000003000
        0x77, 0x35, 0xa3, 0xa0, //   2000004000
        0x77, 0x35, 0xa7, 0x88, //   2000005000
        0x77, 0x35, 0xab, 0x70, //   2000006000
        // "hello, aurora\n"
        0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x2c, 0x20,
        0x61, 0x75, 0x72, 0x6f, 0x72, 0x61, 0x0a,
    ];

    fn data_repr() -> SegRepr {
        SegRepr {
            src_port: 40000,
            dst_port: 5001,
            seq: Seq(1_000_000_001),
            ack: Seq(2_000_000_000),
            flags: Flags {
                ack: true,
                psh: true,
                ..Flags::default()
            },
            window: 502,
            mss: None,
            wscale: None,
            sack_permitted: false,
            sack: SackBlocks::from_slice(&[
                (Seq(2_000_001_000), Seq(2_000_002_000)),
                (Seq(2_000_003_000), Seq(2_000_004_000)),
                (Seq(2_000_005_000), Seq(2_000_006_000)),
            ]),
            timestamp: Some(Timestamp {
                val: 123_500,
                ecr: 98_765,
            }),
        }
    }

    /// One's complement sum of 16-bit big-endian words, written apart
    /// from both aurora_wire's and etherparse's.
    fn oc_sum(parts: &[&[u8]]) -> u16 {
        let bytes: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        let mut s: u32 = 0;
        for w in bytes.chunks(2) {
            let hi = u32::from(w[0]) << 8;
            let lo = u32::from(*w.get(1).unwrap_or(&0));
            s += hi | lo;
            s = (s & 0xFFFF) + (s >> 16);
        }
        s as u16
    }

    /// Both checksums of a packet (20-byte IP header) check by `oc_sum`.
    fn sums_check(p: &[u8]) -> bool {
        let seg = &p[20..];
        let len = (seg.len() as u16).to_be_bytes();
        let pseudo = [&p[12..20], &[0, 6], &len[..]].concat();
        oc_sum(&[&p[..20]]) == 0xFFFF && oc_sum(&[&pseudo, seg]) == 0xFFFF
    }

    /// A SYN (or a bare ACK) from A to B with the raw option bytes `opts`
    /// (padded with zeros by etherparse) and both checksums right, for
    /// hand-made option tests.
    fn with_raw_options(syn: bool, opts: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut tcp = TcpHeader::new(1, 2, 3, 4);
        tcp.syn = syn;
        tcp.ack = !syn;
        tcp.set_options_raw(opts).unwrap();
        tcp.checksum = tcp
            .calc_checksum_ipv4_raw(A.octets(), B.octets(), payload)
            .unwrap();
        let mut p = Vec::new();
        emit(A, B, 9, &SegRepr::default(), &[], &mut p);
        p.truncate(20);
        let total = (20 + tcp.header_len() + payload.len()) as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        fix_ip_checksum(&mut p);
        p.extend_from_slice(&tcp.to_bytes());
        p.extend_from_slice(payload);
        p
    }

    fn fix_ip_checksum(p: &mut [u8]) {
        p[10..12].fill(0);
        let c = !oc_sum(&[&p[..20]]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }

    #[test]
    fn the_known_answers_check_independently() {
        assert!(sums_check(&SYN));
        assert!(sums_check(&DATA));
    }

    #[test]
    fn syn_is_emitted_byte_for_byte_and_parsed_back() {
        let mut out = Vec::new();
        let n = emit(A, B, 1, &syn_repr(), &[], &mut out);
        assert_eq!(n, 0);
        assert_eq!(out, SYN);
        assert_eq!(syn_repr().header_len(), 40);
        let p = parse(&SYN).unwrap();
        assert_eq!((p.src, p.dst), (A, B));
        assert_eq!(p.repr, syn_repr());
        assert!(p.payload.is_empty());
        assert_eq!(p.repr.seq_len(0), 1);
    }

    #[test]
    fn data_is_emitted_byte_for_byte_and_parsed_back() {
        let mut out = vec![0xAA; 7]; // cleared by emit
        let n = emit(A, B, 2, &data_repr(), DATA_PAYLOAD, &mut out);
        assert_eq!(n, DATA_PAYLOAD.len());
        assert_eq!(out, DATA);
        assert_eq!(data_repr().header_len(), 60);
        let p = parse(&DATA).unwrap();
        assert_eq!((p.src, p.dst), (A, B));
        assert_eq!(p.repr, data_repr());
        assert_eq!(p.payload, DATA_PAYLOAD);
        assert_eq!(p.repr.seq_len(p.payload.len()), 14);
    }

    #[test]
    fn bytes_past_the_total_length_are_ignored() {
        let mut p = DATA.to_vec();
        p.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let got = parse(&p).unwrap();
        assert_eq!(got.repr, data_repr());
        assert_eq!(got.payload, DATA_PAYLOAD);
    }

    #[test]
    fn every_single_byte_change_is_caught() {
        // Every byte is under one checksum or the other, and no change
        // of one byte leaves a one's complement sum unchanged.
        for kat in [&SYN[..], &DATA[..]] {
            for i in 0..kat.len() {
                for v in 0..=255u8 {
                    if v == kat[i] {
                        continue;
                    }
                    let mut p = kat.to_vec();
                    p[i] = v;
                    assert!(parse(&p).is_err(), "byte {i} = {v:#04x} accepted");
                }
            }
        }
    }

    #[test]
    fn every_truncation_is_refused() {
        for kat in [&SYN[..], &DATA[..]] {
            for n in 0..kat.len() {
                assert!(parse(&kat[..n]).is_err(), "{n} bytes accepted");
                // The same, with an IP header that agrees with the cut,
                // so the TCP layer sees the short segment.
                if n >= 20 {
                    let mut p = kat[..n].to_vec();
                    p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
                    fix_ip_checksum(&mut p);
                    let want = match n - 20 {
                        0..20 => SegError::Truncated,
                        m if m < usize::from(kat[32] >> 4) * 4 => SegError::BadDataOffset,
                        _ => SegError::BadChecksum,
                    };
                    assert_eq!(parse(&p).map(|_| ()), Err(want), "{n} bytes");
                }
            }
        }
    }

    #[test]
    fn a_wrong_checksum_is_bad_checksum() {
        let mut p = DATA;
        p[36] ^= 0x10;
        assert_eq!(parse(&p), Err(SegError::BadChecksum));
        let mut p = SYN;
        p[37] = p[37].wrapping_add(1);
        assert_eq!(parse(&p), Err(SegError::BadChecksum));
        // Data changed, checksum not.
        let mut p = DATA;
        p[93] = b'!';
        assert_eq!(parse(&p), Err(SegError::BadChecksum));
    }

    #[test]
    fn a_checksum_of_ffff_is_zero_too() {
        // Choose two payload bytes that make the sum of everything else
        // 0xFFFF, so the computed checksum is 0x0000; then write 0xFFFF.
        let repr = data_repr();
        let mut p = Vec::new();
        emit(A, B, 3, &repr, &[0, 0], &mut p);
        let c = [p[36], p[37]];
        emit(A, B, 3, &repr, &c, &mut p);
        assert_eq!(&p[36..38], &[0, 0]);
        assert!(parse(&p).is_ok());
        p[36..38].copy_from_slice(&[0xFF, 0xFF]);
        assert!(sums_check(&p));
        assert_eq!(parse(&p).unwrap().payload, &c);
    }

    #[test]
    fn ip_level_refusals() {
        let mut p = DATA;
        p[6] = 0x20; // MF
        fix_ip_checksum(&mut p);
        assert_eq!(parse(&p), Err(SegError::Fragment));
        let mut p = DATA;
        p[7] = 0x01; // offset 8 bytes, DF still set
        fix_ip_checksum(&mut p);
        assert_eq!(parse(&p), Err(SegError::Fragment));
        let mut p = DATA;
        p[9] = 17;
        fix_ip_checksum(&mut p);
        assert_eq!(parse(&p), Err(SegError::NotTcp));
        let mut p = DATA;
        p[10] ^= 1;
        assert_eq!(parse(&p), Err(SegError::Ip(HeaderError::Checksum)));
        assert_eq!(
            parse(&DATA[..10]),
            Err(SegError::Ip(HeaderError::Truncated))
        );
        let mut p = DATA;
        p[0] = 0x65;
        assert_eq!(parse(&p), Err(SegError::Ip(HeaderError::Version)));
        // A data offset below 5.
        let mut p = DATA;
        p[32] = 0x40;
        assert_eq!(parse(&p), Err(SegError::BadDataOffset));
    }

    #[test]
    fn ip_options_are_stepped_over() {
        // The same segment behind a 24-byte IP header whose option
        // bytes are a NOP and an END, padded.
        let mut p = DATA[..20].to_vec();
        p[0] = 0x46;
        p.extend_from_slice(&[1, 0, 0, 0]);
        p.extend_from_slice(&DATA[20..]);
        p[2..4].copy_from_slice(&(DATA.len() as u16 + 4).to_be_bytes());
        p[10..12].fill(0);
        let c = !oc_sum(&[&p[..24]]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let got = parse(&p).unwrap();
        assert_eq!(got.repr, data_repr());
        assert_eq!(got.payload, DATA_PAYLOAD);
    }

    #[test]
    fn unknown_options_are_skipped_malformed_ones_refused() {
        let ts = [8, 10, 0, 0, 0, 5, 0, 0, 0, 6];
        let want = Some(Timestamp { val: 5, ecr: 6 });
        // An experimental option (kind 254, 4 bytes) before timestamps.
        let opts = [&[254, 4, 0xAB, 0xCD][..], &ts].concat();
        let p = with_raw_options(false, &opts, b"x");
        let got = parse(&p).unwrap();
        assert_eq!(got.repr.timestamp, want);
        assert_eq!(got.payload, b"x");
        // Unknown option of the smallest length, then END and junk.
        let opts = [&[30, 2][..], &ts, &[0, 99, 99]].concat();
        assert_eq!(
            parse(&with_raw_options(false, &opts, b""))
                .unwrap()
                .repr
                .timestamp,
            want
        );
        for bad in [
            &[254, 1, 1, 1][..],                    // length below 2
            &[254, 0, 1, 1],                        // length 0
            &[254, 9, 1, 1],                        // past the header
            &[2, 5, 5, 0xb4],                       // MSS of 5 bytes
            &[1, 1, 3, 3],                          // window scale cut short
            &[5, 2, 1, 1],                          // SACK with no block
            &[5, 11, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1], // SACK, 11 bytes
            &[8, 8, 0, 0, 0, 1, 0, 0],              // timestamps of 8 bytes
            &[4, 3, 1, 1],                          // SACK permitted of 3 bytes
        ] {
            for syn in [false, true] {
                let p = with_raw_options(syn, bad, b"");
                assert_eq!(parse(&p), Err(SegError::BadOption), "{bad:?}");
            }
        }
    }

    #[test]
    fn syn_options_count_only_on_syns() {
        // MSS, window scale, SACK-permitted and 2 SACK blocks.
        let opts = [
            2, 4, 0x05, 0xb4, 3, 3, 7, 4, 2, 1, 1, 1, 5, 18, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0,
            0, 0, 4,
        ];
        let syn = parse(&with_raw_options(true, &opts, b"")).unwrap().repr;
        assert_eq!(
            (syn.mss, syn.wscale, syn.sack_permitted, syn.sack.len()),
            (Some(1460), Some(7), true, 0)
        );
        let ack = parse(&with_raw_options(false, &opts, b"")).unwrap().repr;
        assert_eq!(
            (ack.mss, ack.wscale, ack.sack_permitted),
            (None, None, false)
        );
        assert_eq!(ack.sack.as_slice(), &[(Seq(1), Seq(2)), (Seq(3), Seq(4))]);
        // And emit leaves out what does not belong.
        let mut r = syn_repr();
        r.sack = ack.sack;
        let mut p = Vec::new();
        emit(A, B, 1, &r, &[], &mut p);
        assert_eq!(p, SYN);
        let mut r = data_repr();
        r.mss = Some(1);
        r.wscale = Some(1);
        r.sack_permitted = true;
        emit(A, B, 2, &r, DATA_PAYLOAD, &mut p);
        assert_eq!(p, DATA);
    }

    #[test]
    fn sack_blocks_are_cut_to_what_fits() {
        let four = SackBlocks::from_slice(&[
            (Seq(1), Seq(2)),
            (Seq(3), Seq(4)),
            (Seq(5), Seq(6)),
            (Seq(7), Seq(8)),
        ]);
        let mut r = data_repr();
        r.sack = four;
        assert_eq!(r.options_len(), 12 + 4 + 24);
        let mut p = Vec::new();
        emit(A, B, 1, &r, &[], &mut p);
        assert_eq!(
            parse(&p).unwrap().repr.sack.as_slice(),
            &four.as_slice()[..3]
        );
        r.timestamp = None;
        assert_eq!(r.options_len(), 4 + 32);
        emit(A, B, 1, &r, &[], &mut p);
        assert_eq!(p.len(), 20 + 20 + 36);
        assert_eq!(parse(&p).unwrap().repr.sack, four);
        let mut full = four;
        assert!(!full.push(Seq(9), Seq(10)));
        assert_eq!(full, four);
    }

    #[test]
    fn syn_option_layouts() {
        let base = SegRepr {
            flags: Flags {
                syn: true,
                ..Flags::default()
            },
            ..SegRepr::default()
        };
        let ts = Some(Timestamp { val: 1, ecr: 2 });
        let cases: [(SegRepr, &[u8]); 4] = [
            (base.clone(), &[]),
            (
                SegRepr {
                    sack_permitted: true,
                    ..base.clone()
                },
                &[1, 1, 4, 2],
            ),
            (
                SegRepr {
                    timestamp: ts,
                    wscale: Some(14),
                    ..base.clone()
                },
                &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 3, 3, 14],
            ),
            (
                SegRepr {
                    mss: Some(536),
                    sack_permitted: true,
                    wscale: Some(0),
                    ..base.clone()
                },
                &[2, 4, 2, 24, 1, 1, 4, 2, 1, 3, 3, 0],
            ),
        ];
        let mut p = Vec::new();
        for (r, opts) in cases {
            emit(A, B, 0, &r, &[], &mut p);
            assert_eq!(&p[40..], opts, "{r:?}");
            assert_eq!(r.options_len(), opts.len());
            assert_eq!(parse(&p).unwrap().repr, r);
        }
    }

    #[test]
    fn max_payload_leaves_room_for_the_headers() {
        assert_eq!(max_payload(1500, &SegRepr::default()), 1460);
        assert_eq!(max_payload(1500, &data_repr()), 1500 - 20 - 60);
        let mut r = data_repr();
        r.sack.clear();
        assert_eq!(max_payload(9180, &r), 9180 - 20 - 32);
        assert_eq!(max_payload(30, &r), 0);
        assert_eq!(max_payload(usize::MAX, &SegRepr::default()), 65535 - 40);
    }

    #[test]
    fn an_oversized_payload_is_cut_at_the_ip_limit() {
        let data = vec![7u8; 70_000];
        let mut p = Vec::new();
        let n = emit(A, B, 0, &data_repr(), &data, &mut p);
        assert_eq!(n, 65535 - 20 - 60);
        assert_eq!(p.len(), 65535);
        assert_eq!(parse(&p).unwrap().payload.len(), n);
    }

    #[test]
    fn error_names_are_distinct() {
        let all = [
            SegError::Ip(HeaderError::Truncated),
            SegError::Ip(HeaderError::Version),
            SegError::Ip(HeaderError::HeaderLength),
            SegError::Ip(HeaderError::TotalLength),
            SegError::Ip(HeaderError::Checksum),
            SegError::Fragment,
            SegError::NotTcp,
            SegError::Truncated,
            SegError::BadDataOffset,
            SegError::BadOption,
            SegError::BadChecksum,
        ];
        let names: std::collections::HashSet<_> = all.iter().map(|e| e.name()).collect();
        let texts: std::collections::HashSet<_> = all.iter().map(|e| e.to_string()).collect();
        assert_eq!((names.len(), texts.len()), (all.len(), all.len()));
        assert!(names
            .iter()
            .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
    }

    /// What parsing an emitted `r` gives back: the fields `emit` leaves
    /// out for this kind of segment dropped.
    fn as_sent(r: &SegRepr) -> SegRepr {
        let mut r = r.clone();
        if r.flags.syn {
            r.sack.clear();
        } else {
            r.mss = None;
            r.wscale = None;
            r.sack_permitted = false;
            let n = r.sack_sent();
            r.sack.truncate(n);
        }
        r
    }

    fn any_repr() -> impl Strategy<Value = SegRepr> {
        let flags = any::<[bool; 7]>().prop_map(|b| Flags {
            syn: b[0],
            ack: b[1],
            fin: b[2],
            rst: b[3],
            psh: b[4],
            ece: b[5],
            cwr: b[6],
        });
        let sack = prop::collection::vec(any::<(u32, u32)>(), 0..=4).prop_map(|v| {
            let v: Vec<_> = v.into_iter().map(|(l, r)| (Seq(l), Seq(r))).collect();
            SackBlocks::from_slice(&v)
        });
        let ts =
            prop::option::of(any::<(u32, u32)>().prop_map(|(val, ecr)| Timestamp { val, ecr }));
        (
            (any::<(u16, u16, u32, u32, u16)>(), flags),
            (
                prop::option::of(any::<u16>()),
                prop::option::of(any::<u8>()),
                any::<bool>(),
                sack,
                ts,
            ),
        )
            .prop_map(
                |((ports_seq, flags), (mss, wscale, sack_permitted, sack, timestamp))| {
                    let (src_port, dst_port, seq, ack, window) = ports_seq;
                    SegRepr {
                        src_port,
                        dst_port,
                        seq: Seq(seq),
                        ack: Seq(ack),
                        flags,
                        window,
                        mss,
                        wscale,
                        sack_permitted,
                        sack,
                        timestamp,
                    }
                },
            )
    }

    proptest! {
        /// Emit then parse gives back the segment as sent, and the
        /// lengths the repr predicts are the lengths written.
        #[test]
        fn emit_then_parse_round_trips(
            r in any_repr(),
            payload in prop::collection::vec(any::<u8>(), 0..300),
            src in any::<u32>(),
            dst in any::<u32>(),
            ident in any::<u16>(),
        ) {
            let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
            let mut p = Vec::new();
            let n = emit(src, dst, ident, &r, &payload, &mut p);
            prop_assert_eq!(n, payload.len());
            prop_assert_eq!(p.len(), 20 + r.header_len() + payload.len());
            prop_assert!(r.options_len() % 4 == 0 && r.options_len() <= MAX_OPTIONS_LEN);
            prop_assert!(sums_check(&p));
            prop_assert_eq!(&p[4..6], &ident.to_be_bytes());
            let got = parse(&p).unwrap();
            prop_assert_eq!((got.src, got.dst), (src, dst));
            prop_assert_eq!(got.payload, &payload[..]);
            prop_assert_eq!(&got.repr, &as_sent(&r));
            // What was parsed emits to the same bytes.
            let mut again = Vec::new();
            emit(src, dst, ident, &got.repr, got.payload, &mut again);
            prop_assert_eq!(again, p);
        }

        /// Anything at all: no panic, and what is accepted round-trips.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(got) = parse(&bytes) {
                let mut p = Vec::new();
                emit(got.src, got.dst, 0, &got.repr, got.payload, &mut p);
                let again = parse(&p).unwrap();
                prop_assert_eq!(again.repr, got.repr);
                prop_assert_eq!(again.payload, got.payload);
            }
        }

        /// A valid IP header in front of arbitrary TCP bytes (checksum
        /// made right half the time): no panic, and acceptance only with
        /// a right checksum.
        #[test]
        fn arbitrary_tcp_bytes_never_panic(
            tcp in prop::collection::vec(any::<u8>(), 0..80),
            fix in any::<bool>(),
        ) {
            let mut t = tcp.clone();
            if fix && t.len() >= 20 {
                t[16..18].fill(0);
                let len = (t.len() as u16).to_be_bytes();
                let pseudo = [&A.octets()[..], &B.octets(), &[0, 6], &len].concat();
                let c = !oc_sum(&[&pseudo, &t]);
                t[16..18].copy_from_slice(&c.to_be_bytes());
            }
            let mut p = Vec::new();
            emit(A, B, 0, &SegRepr::default(), &[], &mut p);
            p.truncate(20);
            p[2..4].copy_from_slice(&((20 + t.len()) as u16).to_be_bytes());
            fix_ip_checksum(&mut p);
            p.extend_from_slice(&t);
            if parse(&p).is_ok() {
                prop_assert!(sums_check(&p));
            }
        }
    }
}
