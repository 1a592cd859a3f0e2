//! ATOMIC packets: source routes of (ΔX, ΔY) pairs, and the messages
//! Aurora's ATOMIC hosts, Mosaic nodes and Address Consultants exchange.
//!
//! A packet is its route, then its payload:
//!
//! ```text
//!  (dx1, dy1) (dx2, dy2) ... (dxk, dyk) (0, 0)   payload
//! ```
//!
//! Each byte of a pair is a signed hop count, -127 to +127 (the byte 0x80,
//! -128, is not a hop count and makes the route malformed). A Mosaic node
//! looks only at the leading pair: a non-zero ΔX sends the packet one hop
//! East (+) or West (-) and moves ΔX one step toward zero; else a non-zero
//! ΔY sends it North (+) or South (-) likewise; a pair worn down to (0, 0)
//! ends there. The node strips it and, if the next pair is (0, 0) too,
//! strips that and delivers the payload (to its host, or to its own
//! software for node-level messages); otherwise it stores the whole packet
//! and forwards it by the next pair.
//!
//! The payload starts with a kind byte ([`Kind`]); the message layouts are
//! given with each `Msg` variant. All integers are big-endian. Aurora's own
//! definition: the seed describes the routes, not a byte map. (These
//! formats live here rather than in `aurora-wire`, which allocates nothing:
//! messages carry lists of hops.)

use aurora_wire::{Error, Result};

/// Channel directions of a Mosaic node, in port order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// +X.
    East = 0,
    /// -X.
    West = 1,
    /// +Y.
    North = 2,
    /// -Y.
    South = 3,
}

impl Dir {
    /// All four, in port order.
    pub const ALL: [Dir; 4] = [Dir::East, Dir::West, Dir::North, Dir::South];

    /// The direction with this port number.
    pub const fn from_port(p: u8) -> Option<Dir> {
        match p {
            0 => Some(Dir::East),
            1 => Some(Dir::West),
            2 => Some(Dir::North),
            3 => Some(Dir::South),
            _ => None,
        }
    }

    /// The opposite direction.
    pub const fn opposite(self) -> Dir {
        match self {
            Dir::East => Dir::West,
            Dir::West => Dir::East,
            Dir::North => Dir::South,
            Dir::South => Dir::North,
        }
    }

    /// True for East and West.
    pub const fn is_x(self) -> bool {
        matches!(self, Dir::East | Dir::West)
    }

    /// The one-hop pair in this direction.
    pub const fn step(self) -> (i8, i8) {
        match self {
            Dir::East => (1, 0),
            Dir::West => (-1, 0),
            Dir::North => (0, 1),
            Dir::South => (0, -1),
        }
    }
}

/// Longest route accepted, in pairs (the terminating (0, 0) included).
pub const MAX_PAIRS: usize = 256;

/// A route: the pairs before the terminating (0, 0).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Route(pub Vec<(i8, i8)>);

/// Why a route is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteError {
    /// A byte was -128.
    BadByte,
    /// The packet ended before a pair did, or before the terminator.
    Truncated,
    /// More than [`MAX_PAIRS`] pairs.
    TooLong,
}

impl Route {
    /// Encodes a walk, one output direction per hop, in as few pairs as
    /// Mosaic routing allows: within a pair all X hops (one sign) come
    /// before all Y hops (one sign), at most 127 of each.
    pub fn from_steps(steps: &[Dir]) -> Route {
        let mut pairs = Vec::new();
        let mut i = 0;
        while i < steps.len() {
            let (mut dx, mut dy) = (0i8, 0i8);
            while i < steps.len() && steps[i].is_x() && dx.abs() < 127 {
                let s = steps[i].step().0;
                if dx != 0 && dx.signum() != s {
                    break;
                }
                dx += s;
                i += 1;
            }
            while i < steps.len() && !steps[i].is_x() && dy.abs() < 127 {
                let s = steps[i].step().1;
                if dy != 0 && dy.signum() != s {
                    break;
                }
                dy += s;
                i += 1;
            }
            pairs.push((dx, dy));
        }
        Route(pairs)
    }

    /// One pair per hop (so a node records itself at every hop).
    pub fn one_pair_per_step(steps: &[Dir]) -> Route {
        Route(steps.iter().map(|d| d.step()).collect())
    }

    /// The walk this route describes, hop by hop.
    pub fn steps(&self) -> Vec<Dir> {
        let mut v = Vec::new();
        for &(dx, dy) in &self.0 {
            let x = if dx > 0 { Dir::East } else { Dir::West };
            let y = if dy > 0 { Dir::North } else { Dir::South };
            v.extend(std::iter::repeat_n(x, usize::from(dx.unsigned_abs())));
            v.extend(std::iter::repeat_n(y, usize::from(dy.unsigned_abs())));
        }
        v
    }

    /// Bytes [`Route::emit`] writes (the terminator included).
    pub fn buffer_len(&self) -> usize {
        2 * (self.0.len() + 1)
    }

    /// Appends the route and its terminator to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        for &(dx, dy) in &self.0 {
            out.push(dx as u8);
            out.push(dy as u8);
        }
        out.extend_from_slice(&[0, 0]);
    }

    /// Reads a route from the front of `b`; returns it and where the
    /// payload starts.
    pub fn parse(b: &[u8]) -> core::result::Result<(Route, usize), RouteError> {
        let mut pairs = Vec::new();
        let mut i = 0;
        loop {
            let p = b.get(i..i + 2).ok_or(RouteError::Truncated)?;
            if p[0] == 0x80 || p[1] == 0x80 {
                return Err(RouteError::BadByte);
            }
            i += 2;
            if p == [0, 0] {
                return Ok((Route(pairs), i));
            }
            if pairs.len() + 1 >= MAX_PAIRS {
                return Err(RouteError::TooLong);
            }
            pairs.push((p[0] as i8, p[1] as i8));
        }
    }
}

/// Where the payload of a packet starts (after the first (0, 0) pair).
pub fn payload_start(b: &[u8]) -> core::result::Result<usize, RouteError> {
    let mut i = 0;
    for _ in 0..MAX_PAIRS {
        let p = b.get(i..i + 2).ok_or(RouteError::Truncated)?;
        if p[0] == 0x80 || p[1] == 0x80 {
            return Err(RouteError::BadByte);
        }
        i += 2;
        if p == [0, 0] {
            return Ok(i);
        }
    }
    Err(RouteError::TooLong)
}

/// Payload kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// An IPv4 packet.
    Ip = 1,
    /// A raw packet for a program on the host (link-level access).
    Raw = 2,
    /// A loop probe, recording the nodes it passes.
    Probe = 3,
    /// "Who is attached here?" from an AC to a node's host.
    HostQuery = 4,
    /// A host's answer.
    HostInfo = 5,
    /// An AC's announcement: the way to it.
    Announce = 6,
    /// A host asks an AC for a route.
    RouteRequest = 7,
    /// The AC's answer.
    RouteReply = 8,
    /// Flood mapping, outward from an AC.
    Explore = 9,
    /// Flood mapping, a node's report flooding back.
    Report = 10,
}

impl Kind {
    /// The kind with this code.
    pub const fn from_code(c: u8) -> Option<Kind> {
        Some(match c {
            1 => Kind::Ip,
            2 => Kind::Raw,
            3 => Kind::Probe,
            4 => Kind::HostQuery,
            5 => Kind::HostInfo,
            6 => Kind::Announce,
            7 => Kind::RouteRequest,
            8 => Kind::RouteReply,
            9 => Kind::Explore,
            10 => Kind::Report,
            _ => return None,
        })
    }

    /// Kinds a Mosaic node's own software handles (the flood).
    pub const fn for_nodes(self) -> bool {
        matches!(self, Kind::Explore | Kind::Report)
    }
}

/// A hop recorded by a probe or a flood message: the node's identifier and
/// the port the packet left it by (floods) or arrived on (probes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hop {
    /// The node's identifier (a random number it drew at start).
    pub node: u64,
    /// A port number: 0-3 (East, West, North, South), or 4 (the host).
    pub port: u8,
}

/// Most hops a message records.
pub const MAX_HOPS: usize = 512;

/// Most edges one report carries.
pub const MAX_EDGES: usize = 64;

/// An edge a node saw arrive: from (node, port) into this node's port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InEdge {
    /// The sending node and its output port.
    pub from: Hop,
    /// The receiving port.
    pub port: u8,
}

/// A message (the payload after the route).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// `1` then the IPv4 packet.
    Ip(Vec<u8>),
    /// `2`, channel (2 bytes), data.
    Raw {
        /// Which program on the host.
        channel: u16,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// `3`, AC (8), sequence (4), count (2), hops (9 each: node, port).
    Probe {
        /// The AC that sent it.
        ac: u64,
        /// Its sequence number.
        seq: u32,
        /// Nodes where a pair ended, in order, with the port it arrived on.
        hops: Vec<Hop>,
    },
    /// `4`, AC (8), sequence (4), the route back to the AC.
    HostQuery {
        /// The AC.
        ac: u64,
        /// Sequence number.
        seq: u32,
        /// The way back.
        back: Route,
    },
    /// `5`, AC (8), sequence (4), host address (4), host id (8).
    HostInfo {
        /// The AC asking.
        ac: u64,
        /// Its sequence number.
        seq: u32,
        /// The host's IPv4 address.
        addr: [u8; 4],
        /// The host's identifier.
        host: u64,
    },
    /// `6`, AC (8), epoch (4), AC's address (4), the route to the AC.
    Announce {
        /// The AC.
        ac: u64,
        /// Its map's epoch (rises with every new map).
        epoch: u32,
        /// The AC host's IPv4 address.
        addr: [u8; 4],
        /// From the receiving host to the AC.
        to_ac: Route,
    },
    /// `7`, sequence (4), source (4), destination (4), bandwidth (4, kb/s;
    /// 0 for best effort).
    RouteRequest {
        /// Sequence number.
        seq: u32,
        /// Asking host's address.
        src: [u8; 4],
        /// Wanted destination.
        dst: [u8; 4],
        /// Declared need, kb/s.
        kbps: u32,
    },
    /// `8`, sequence (4), destination (4), status (1: 0 found, 1 unknown
    /// host, 2 unreachable), epoch (4), the route.
    RouteReply {
        /// The request's sequence number.
        seq: u32,
        /// The destination asked for.
        dst: [u8; 4],
        /// 0 found, 1 unknown address, 2 no path.
        status: u8,
        /// The AC's map epoch.
        epoch: u32,
        /// From the asking host to the destination.
        route: Route,
    },
    /// `9`, flood (8), count (2), hops (node, output port).
    Explore {
        /// The flood's identifier.
        flood: u64,
        /// The way from the AC's node, hop by hop.
        hops: Vec<Hop>,
    },
    /// `10`, flood (8), origin (8), host attached (1), edges count (1),
    /// edges (10 each: from node 8, from port 1, in port 1), first-path
    /// count (2) and hops, back-path count (2) and hops.
    Report {
        /// The flood.
        flood: u64,
        /// The reporting node.
        origin: u64,
        /// A host is attached to it.
        host: bool,
        /// Every edge the node saw the flood arrive by.
        edges: Vec<InEdge>,
        /// The way the flood first reached it from the AC.
        path: Vec<Hop>,
        /// The way this report has come so far (toward the AC).
        back: Vec<Hop>,
    },
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(Error::Length {
                expected: n,
                got: self.b.len(),
            });
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }
    fn addr(&mut self) -> Result<[u8; 4]> {
        Ok(self.take(4)?.try_into().expect("4 bytes"))
    }
    fn hop(&mut self) -> Result<Hop> {
        let node = self.u64()?;
        let port = self.u8()?;
        if port > 4 {
            return Err(Error::Malformed("a recorded port is above 4"));
        }
        Ok(Hop { node, port })
    }
    fn hops(&mut self, n: usize) -> Result<Vec<Hop>> {
        if n > MAX_HOPS {
            return Err(Error::Malformed("more hops than allowed"));
        }
        (0..n).map(|_| self.hop()).collect()
    }
    fn route(&mut self) -> Result<Route> {
        let (r, n) = Route::parse(self.b).map_err(|_| Error::Malformed("bad route"))?;
        self.take(n)?;
        Ok(r)
    }
    fn rest(&mut self) -> Vec<u8> {
        let v = self.b.to_vec();
        self.b = &[];
        v
    }
}

fn put_hops(out: &mut Vec<u8>, hops: &[Hop]) {
    for h in hops {
        out.extend_from_slice(&h.node.to_be_bytes());
        out.push(h.port);
    }
}

impl Msg {
    /// The kind of message.
    pub fn kind(&self) -> Kind {
        match self {
            Msg::Ip(_) => Kind::Ip,
            Msg::Raw { .. } => Kind::Raw,
            Msg::Probe { .. } => Kind::Probe,
            Msg::HostQuery { .. } => Kind::HostQuery,
            Msg::HostInfo { .. } => Kind::HostInfo,
            Msg::Announce { .. } => Kind::Announce,
            Msg::RouteRequest { .. } => Kind::RouteRequest,
            Msg::RouteReply { .. } => Kind::RouteReply,
            Msg::Explore { .. } => Kind::Explore,
            Msg::Report { .. } => Kind::Report,
        }
    }

    /// Appends the message to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.push(self.kind() as u8);
        match self {
            Msg::Ip(p) => out.extend_from_slice(p),
            Msg::Raw { channel, data } => {
                out.extend_from_slice(&channel.to_be_bytes());
                out.extend_from_slice(data);
            }
            Msg::Probe { ac, seq, hops } => {
                out.extend_from_slice(&ac.to_be_bytes());
                out.extend_from_slice(&seq.to_be_bytes());
                out.extend_from_slice(&(hops.len().min(MAX_HOPS) as u16).to_be_bytes());
                put_hops(out, &hops[..hops.len().min(MAX_HOPS)]);
            }
            Msg::HostQuery { ac, seq, back } => {
                out.extend_from_slice(&ac.to_be_bytes());
                out.extend_from_slice(&seq.to_be_bytes());
                back.emit(out);
            }
            Msg::HostInfo {
                ac,
                seq,
                addr,
                host,
            } => {
                out.extend_from_slice(&ac.to_be_bytes());
                out.extend_from_slice(&seq.to_be_bytes());
                out.extend_from_slice(addr);
                out.extend_from_slice(&host.to_be_bytes());
            }
            Msg::Announce {
                ac,
                epoch,
                addr,
                to_ac,
            } => {
                out.extend_from_slice(&ac.to_be_bytes());
                out.extend_from_slice(&epoch.to_be_bytes());
                out.extend_from_slice(addr);
                to_ac.emit(out);
            }
            Msg::RouteRequest {
                seq,
                src,
                dst,
                kbps,
            } => {
                out.extend_from_slice(&seq.to_be_bytes());
                out.extend_from_slice(src);
                out.extend_from_slice(dst);
                out.extend_from_slice(&kbps.to_be_bytes());
            }
            Msg::RouteReply {
                seq,
                dst,
                status,
                epoch,
                route,
            } => {
                out.extend_from_slice(&seq.to_be_bytes());
                out.extend_from_slice(dst);
                out.push(*status);
                out.extend_from_slice(&epoch.to_be_bytes());
                route.emit(out);
            }
            Msg::Explore { flood, hops } => {
                out.extend_from_slice(&flood.to_be_bytes());
                out.extend_from_slice(&(hops.len().min(MAX_HOPS) as u16).to_be_bytes());
                put_hops(out, &hops[..hops.len().min(MAX_HOPS)]);
            }
            Msg::Report {
                flood,
                origin,
                host,
                edges,
                path,
                back,
            } => {
                out.extend_from_slice(&flood.to_be_bytes());
                out.extend_from_slice(&origin.to_be_bytes());
                out.push(u8::from(*host));
                let edges = &edges[..edges.len().min(MAX_EDGES)];
                out.push(edges.len() as u8);
                for e in edges {
                    out.extend_from_slice(&e.from.node.to_be_bytes());
                    out.push(e.from.port);
                    out.push(e.port);
                }
                for hops in [path, back] {
                    let hops = &hops[..hops.len().min(MAX_HOPS)];
                    out.extend_from_slice(&(hops.len() as u16).to_be_bytes());
                    put_hops(out, hops);
                }
            }
        }
    }

    /// Reads a payload.
    pub fn parse(b: &[u8]) -> Result<Msg> {
        let mut r = Reader { b };
        let kind = Kind::from_code(r.u8()?).ok_or(Error::Malformed("unknown message kind"))?;
        Ok(match kind {
            Kind::Ip => Msg::Ip(r.rest()),
            Kind::Raw => Msg::Raw {
                channel: r.u16()?,
                data: r.rest(),
            },
            Kind::Probe => {
                let ac = r.u64()?;
                let seq = r.u32()?;
                let n = usize::from(r.u16()?);
                Msg::Probe {
                    ac,
                    seq,
                    hops: r.hops(n)?,
                }
            }
            Kind::HostQuery => Msg::HostQuery {
                ac: r.u64()?,
                seq: r.u32()?,
                back: r.route()?,
            },
            Kind::HostInfo => Msg::HostInfo {
                ac: r.u64()?,
                seq: r.u32()?,
                addr: r.addr()?,
                host: r.u64()?,
            },
            Kind::Announce => Msg::Announce {
                ac: r.u64()?,
                epoch: r.u32()?,
                addr: r.addr()?,
                to_ac: r.route()?,
            },
            Kind::RouteRequest => Msg::RouteRequest {
                seq: r.u32()?,
                src: r.addr()?,
                dst: r.addr()?,
                kbps: r.u32()?,
            },
            Kind::RouteReply => Msg::RouteReply {
                seq: r.u32()?,
                dst: r.addr()?,
                status: r.u8()?,
                epoch: r.u32()?,
                route: r.route()?,
            },
            Kind::Explore => {
                let flood = r.u64()?;
                let n = usize::from(r.u16()?);
                Msg::Explore {
                    flood,
                    hops: r.hops(n)?,
                }
            }
            Kind::Report => {
                let flood = r.u64()?;
                let origin = r.u64()?;
                let host = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(Error::Malformed("host flag is not 0 or 1")),
                };
                let n = usize::from(r.u8()?);
                if n > MAX_EDGES {
                    return Err(Error::Malformed("more edges than allowed"));
                }
                let mut edges = Vec::with_capacity(n);
                for _ in 0..n {
                    let from = r.hop()?;
                    let port = r.u8()?;
                    if port > 3 {
                        return Err(Error::Malformed("an edge's port is above 3"));
                    }
                    edges.push(InEdge { from, port });
                }
                let n = usize::from(r.u16()?);
                let path = r.hops(n)?;
                let n = usize::from(r.u16()?);
                let back = r.hops(n)?;
                Msg::Report {
                    flood,
                    origin,
                    host,
                    edges,
                    path,
                    back,
                }
            }
        })
    }

    /// A whole packet: `route`, then this message.
    pub fn packet(&self, route: &Route) -> Vec<u8> {
        let mut v = Vec::with_capacity(route.buffer_len() + 32);
        route.emit(&mut v);
        self.emit(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_example_route_encodes_as_its_pairs() {
        // (+6,+1)(+4,+3)(+1,0)(0,0): six East, one North; four East, three
        // North; one East.
        let mut steps = vec![Dir::East; 6];
        steps.push(Dir::North);
        steps.extend([Dir::East; 4]);
        steps.extend([Dir::North; 3]);
        steps.push(Dir::East);
        let r = Route::from_steps(&steps);
        assert_eq!(r.0, vec![(6, 1), (4, 3), (1, 0)]);
        let mut b = Vec::new();
        r.emit(&mut b);
        assert_eq!(b, [6, 1, 4, 3, 1, 0, 0, 0]);
        assert_eq!(Route::parse(&b), Ok((r.clone(), 8)));
        assert_eq!(r.steps(), steps);
        // Its reverse along the same links.
        let back: Vec<Dir> = steps.iter().rev().map(|d| d.opposite()).collect();
        assert_eq!(
            Route::from_steps(&back).0,
            vec![(-1, -3), (-4, -1), (-6, 0)]
        );
    }

    #[test]
    fn y_before_x_needs_a_new_pair_and_long_runs_split() {
        let r = Route::from_steps(&[Dir::North, Dir::East]);
        assert_eq!(r.0, vec![(0, 1), (1, 0)]);
        let r = Route::from_steps(&[Dir::East, Dir::West]);
        assert_eq!(r.0, vec![(1, 0), (-1, 0)]);
        let r = Route::from_steps(&[Dir::West; 130]);
        assert_eq!(r.0, vec![(-127, 0), (-3, 0)]);
        assert_eq!(r.steps().len(), 130);
        assert_eq!(
            Route::one_pair_per_step(&[Dir::South, Dir::South]).0,
            vec![(0, -1), (0, -1)]
        );
    }

    #[test]
    fn malformed_routes_are_named() {
        assert_eq!(Route::parse(&[1, 0]), Err(RouteError::Truncated));
        assert_eq!(Route::parse(&[1]), Err(RouteError::Truncated));
        assert_eq!(Route::parse(&[0x80, 0, 0, 0]), Err(RouteError::BadByte));
        let long = vec![1u8; 2 * MAX_PAIRS + 2];
        assert_eq!(Route::parse(&long), Err(RouteError::TooLong));
        assert_eq!(payload_start(&[3, 0, 0, 0, 9]), Ok(4));
        assert_eq!(payload_start(&[3, 0x80]), Err(RouteError::BadByte));
    }

    #[test]
    fn messages_are_laid_out_byte_for_byte() {
        let m = Msg::HostInfo {
            ac: 0x0102030405060708,
            seq: 9,
            addr: [10, 0, 0, 1],
            host: 0x1112131415161718,
        };
        let mut b = Vec::new();
        m.emit(&mut b);
        assert_eq!(
            b,
            [
                5, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 9, 10, 0, 0, 1, 0x11, 0x12, 0x13, 0x14, 0x15,
                0x16, 0x17, 0x18
            ]
        );
        let p = Msg::Probe {
            ac: 1,
            seq: 2,
            hops: vec![Hop { node: 3, port: 1 }],
        };
        let mut b = Vec::new();
        p.emit(&mut b);
        assert_eq!(
            b,
            [3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 1]
        );
        let q = Msg::RouteReply {
            seq: 7,
            dst: [10, 0, 0, 2],
            status: 0,
            epoch: 3,
            route: Route(vec![(2, -1)]),
        };
        let mut b = Vec::new();
        q.emit(&mut b);
        assert_eq!(
            b,
            [8, 0, 0, 0, 7, 10, 0, 0, 2, 0, 0, 0, 0, 3, 2, 0xFF, 0, 0]
        );
    }

    #[test]
    fn every_message_round_trips() {
        let h = |n, p| Hop { node: n, port: p };
        let all = [
            Msg::Ip(vec![0x45, 0, 0, 20]),
            Msg::Raw {
                channel: 77,
                data: vec![1, 2, 3],
            },
            Msg::Probe {
                ac: 5,
                seq: 6,
                hops: vec![h(1, 0), h(2, 3)],
            },
            Msg::HostQuery {
                ac: 5,
                seq: 8,
                back: Route(vec![(-2, 0), (0, 3)]),
            },
            Msg::Announce {
                ac: 5,
                epoch: 2,
                addr: [10, 0, 0, 9],
                to_ac: Route(vec![(1, 1)]),
            },
            Msg::RouteRequest {
                seq: 1,
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2],
                kbps: 50_000,
            },
            Msg::Explore {
                flood: 99,
                hops: vec![h(4, 2)],
            },
            Msg::Report {
                flood: 99,
                origin: 4,
                host: true,
                edges: vec![InEdge {
                    from: h(7, 0),
                    port: 1,
                }],
                path: vec![h(7, 0)],
                back: vec![h(4, 1), h(7, 2)],
            },
        ];
        for m in all {
            let mut b = Vec::new();
            m.emit(&mut b);
            assert_eq!(Msg::parse(&b), Ok(m));
        }
    }

    #[test]
    fn bad_messages_are_refused() {
        assert!(Msg::parse(&[]).is_err());
        assert!(Msg::parse(&[0]).is_err());
        assert!(Msg::parse(&[99]).is_err());
        assert!(Msg::parse(&[3, 0, 0]).is_err());
        // A probe claiming more hops than it holds.
        assert!(Msg::parse(&[3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 5]).is_err());
        // A recorded port above 4.
        assert!(Msg::parse(&[9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 7]).is_err());
    }
}
