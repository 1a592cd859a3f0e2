//! An ATOMIC host: one port to its host-interface Mosaic node.
//!
//! - **Link-level access** (the seed's AF_ATOM sockets): a program gives
//!   the route itself ([`AtomicHost::send_raw`]) and reads raw packets
//!   addressed to its channel ([`AtomicHost::take_raw`]); loop packets are
//!   sent this way.
//! - **IP over ATOMIC**: an IPv4 packet for another host goes out with the
//!   source route cached for its destination; without one, it waits while
//!   the host asks the AC, and the answer is cached (an answer that there
//!   is no route is believed for a route timeout, or until a newer map:
//!   packets for that destination meanwhile are dropped at once). Routes
//!   carry the AC's
//!   map epoch: when an AC announces a newer epoch, older routes are
//!   dropped and asked for again. Packets come from and go to the local IP
//!   stack through [`PacketPort`], or from a built-in flow generator (for
//!   virtual-time runs).
//! - **The AC**: a host may run an [`Ac`]. With [`AcRole::Auto`] a host
//!   that has heard no AC announce itself for a while becomes one.
//!
//! Hosts answer an AC's "who is attached here" with their address.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use aurora_net::{Node, Outbox, PacketPort, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::ipv4;
use rustc_hash::FxHashMap;

use crate::ac::{Ac, AcConfig};
use crate::flow::{self, FlowId};
use crate::wire::{Kind, Msg, Route};

/// Whether a host runs an Address Consultant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcRole {
    /// From the start.
    Always,
    /// If it hears none for a while.
    Auto,
    /// Never.
    Never,
}

/// A host's settings.
#[derive(Clone, Copy, Debug)]
pub struct HostConfig {
    /// Its IPv4 address.
    pub addr: Ipv4Addr,
    /// Its identifier (random).
    pub id: u64,
    /// Whether it runs an AC.
    pub role: AcRole,
    /// The AC's settings, if it runs one.
    pub ac: AcConfig,
    /// How long an `Auto` host waits, without announcements, before
    /// becoming an AC (plus up to as long again, drawn from its id, so
    /// hosts do not all take over at once).
    pub ac_wait: Duration,
    /// How long a host waits for an answer before asking the AC again (a
    /// packet gives up after four times this), and how long it believes
    /// an answer that there is no route.
    pub route_timeout: Duration,
    /// The LAN's prefix length: destinations outside `addr/prefix` go to
    /// [`HostConfig::gateway`] (0, the default: every address is on the
    /// LAN).
    pub prefix: u8,
    /// The IP router for destinations off the LAN, if there is one.
    pub gateway: Option<Ipv4Addr>,
    /// Bytes of packets its port to its interface, and the interface's
    /// port to it, hold waiting ([`crate::layout::HOST_BYTES`] unless set).
    pub memory: usize,
}

impl HostConfig {
    /// A host at `addr` with identifier `id`, not an AC.
    pub fn new(addr: Ipv4Addr, id: u64) -> Self {
        HostConfig {
            addr,
            id,
            role: AcRole::Never,
            ac: AcConfig::default(),
            ac_wait: Duration::from_millis(1500),
            route_timeout: Duration::from_millis(100),
            prefix: 0,
            gateway: None,
            memory: crate::layout::HOST_BYTES,
        }
    }
}

/// A flow of IPv4 packets a host sends by itself (for virtual-time runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpFlow {
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Packet length in bytes ([`crate::flow::MIN_FLOW_PACKET`] to 65535): an IPv4 packet
    /// holding a UDP datagram to the discard port ([`crate::flow::FLOW_PORT`]).
    pub size: usize,
    /// Packets to send.
    pub count: u64,
    /// First packet.
    pub start: Instant,
    /// Between packets.
    pub interval: Duration,
    /// Declared bandwidth need in kb/s (0: best effort).
    pub kbps: u32,
}

/// What a host counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCounters {
    /// IPv4 packets sent into the network.
    pub ip_sent: u64,
    /// IPv4 packets that arrived.
    pub ip_received: u64,
    /// Route requests sent to an AC.
    pub route_requests: u64,
    /// Routes received (from an AC, or its own AC).
    pub routes_learned: u64,
    /// Cached routes dropped because a newer map came.
    pub routes_dropped: u64,
    /// Packets dropped: no route came in time, or the AC had none.
    pub no_route: u64,
    /// Packets dropped: too many waiting for routes.
    pub pending_full: u64,
    /// Packets dropped: the local stack's queue was full.
    pub host_queue_full: u64,
    /// Packets that did not parse (counted, dropped).
    pub bad_packets: u64,
    /// Raw packets in and out.
    pub raw: [u64; 2],
    /// Times this host became an AC on its own.
    pub ac_takeovers: u64,
    /// Announcements heard.
    pub announcements: u64,
}

/// What arrived of one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowRx {
    /// Packets delivered intact.
    pub delivered: u64,
    /// Packets that arrived damaged (must stay 0).
    pub corrupted: u64,
}

#[derive(Clone, Debug)]
struct KnownAc {
    id: u64,
    addr: Ipv4Addr,
    to_ac: Route,
    epoch: u32,
    heard: Instant,
}

#[derive(Debug)]
struct Pending {
    /// The next hop: the destination, or the gateway to it.
    dst: Ipv4Addr,
    since: Instant,
    kbps: u32,
    pkt: Vec<u8>,
}

#[derive(Debug)]
struct TxFlow {
    spec: IpFlow,
    sent: u64,
    next: Instant,
}

/// Why a host dropped a packet whose route did not come (the AC had
/// none, or did not answer in time).
pub const NO_ROUTE: &str = "no_route";
/// Why a host dropped a packet: too many were waiting for routes.
pub const PENDING_FULL: &str = "pending_full";

/// Packets waiting for routes, at most.
pub const MAX_PENDING: usize = 256;
/// Packets waiting for the local stack or a raw reader, at most.
pub const MAX_QUEUE: usize = 4096;
/// Most cached routes.
pub const MAX_ROUTES: usize = 4096;

/// The host.
#[derive(Debug)]
pub struct AtomicHost {
    cfg: HostConfig,
    ac: Option<Ac>,
    server: Option<KnownAc>,
    routes: FxHashMap<Ipv4Addr, (Route, u32)>,
    asked: FxHashMap<Ipv4Addr, Instant>,
    /// Destinations the AC said it has no route to, and when: believed for
    /// a route timeout, or until a newer map.
    refused: FxHashMap<Ipv4Addr, Instant>,
    pending: VecDeque<Pending>,
    to_host: VecDeque<Vec<u8>>,
    raw_in: VecDeque<(u16, Vec<u8>)>,
    raw_out: VecDeque<(Route, u16, Vec<u8>)>,
    flows: Vec<TxFlow>,
    rx: FxHashMap<FlowId, FlowRx>,
    seq: u32,
    takeover_at: Option<Instant>,
    counters: HostCounters,
}

impl AtomicHost {
    /// A host with `cfg`, starting at `now`.
    pub fn new(cfg: HostConfig, now: Instant) -> Self {
        let ac =
            (cfg.role == AcRole::Always).then(|| Ac::new(cfg.id, cfg.addr, cfg.id, cfg.ac, now));
        let takeover_at = (cfg.role == AcRole::Auto).then(|| now + Self::wait(&cfg));
        AtomicHost {
            cfg,
            ac,
            server: None,
            routes: FxHashMap::default(),
            asked: FxHashMap::default(),
            refused: FxHashMap::default(),
            pending: VecDeque::new(),
            to_host: VecDeque::new(),
            raw_in: VecDeque::new(),
            raw_out: VecDeque::new(),
            flows: Vec::new(),
            rx: FxHashMap::default(),
            seq: 0,
            takeover_at,
            counters: HostCounters::default(),
        }
    }

    fn wait(cfg: &HostConfig) -> Duration {
        let w = cfg.ac_wait.as_nanos().max(1);
        Duration::from_nanos(w + (cfg.id % w as u64) as i64)
    }

    /// Its address.
    pub fn addr(&self) -> Ipv4Addr {
        self.cfg.addr
    }

    /// Its AC, if it runs one.
    pub fn ac(&self) -> Option<&Ac> {
        self.ac.as_ref()
    }

    /// Its AC, to ask it directly.
    pub fn ac_mut(&mut self) -> Option<&mut Ac> {
        self.ac.as_mut()
    }

    /// Stops its AC (as if the AC program were killed); an `Auto` host may
    /// start one again later.
    pub fn kill_ac(&mut self) {
        self.ac = None;
    }

    /// The counters.
    pub fn counters(&self) -> HostCounters {
        self.counters
    }

    /// The AC it uses: its identifier, its map's epoch and its host's
    /// address.
    pub fn server(&self) -> Option<(u64, u32, Ipv4Addr)> {
        self.server.as_ref().map(|s| (s.id, s.epoch, s.addr))
    }

    /// The cached route to `dst`.
    pub fn route_to(&self, dst: Ipv4Addr) -> Option<&Route> {
        self.routes.get(&dst).map(|(r, _)| r)
    }

    /// What arrived of flow `id`, if this host expects it
    /// ([`AtomicHost::expect_flow`]).
    pub fn received(&self, id: FlowId) -> FlowRx {
        self.rx.get(&id).copied().unwrap_or_default()
    }

    /// Counts what arrives of flow `id` from now on. A host counts only the
    /// flows it expects, so what it keeps is as large as the file's flows
    /// to it, whatever arrives (another program's datagrams to the discard
    /// port from one of the flows' ports included).
    pub fn expect_flow(&mut self, id: FlowId) {
        self.rx.entry(id).or_default();
    }

    /// Shows `f` every IPv4 packet waiting for a route.
    pub fn for_each_pending(&self, f: &mut dyn FnMut(&[u8])) {
        for p in &self.pending {
            f(&p.pkt);
        }
    }

    /// Packets sent on flow `i`.
    pub fn sent(&self, i: usize) -> u64 {
        self.flows.get(i).map_or(0, |f| f.sent)
    }

    /// Adds a flow to send: its number (0 for the first) is what this
    /// returns.
    ///
    /// # Panics
    /// If the host has [`flow::MAX_FLOWS_PER_HOST`] flows already.
    pub fn add_flow(&mut self, f: IpFlow) -> usize {
        assert!(
            self.flows.len() < flow::MAX_FLOWS_PER_HOST,
            "at most {} flows a host",
            flow::MAX_FLOWS_PER_HOST
        );
        self.flows.push(TxFlow {
            spec: f,
            sent: 0,
            next: f.start,
        });
        self.flows.len() - 1
    }

    /// Sends a raw packet along `route` to channel `channel` of the host
    /// at its end (link-level access: loops come back to this host).
    pub fn send_raw(
        &mut self,
        route: &Route,
        channel: u16,
        data: &[u8],
        out: &mut Outbox<Vec<u8>>,
    ) {
        self.counters.raw[1] += 1;
        let m = Msg::Raw {
            channel,
            data: data.to_vec(),
        };
        out.push(0, m.packet(route));
    }

    /// Queues a raw packet to go out at the host's next turn (for a
    /// program that writes while the node runs in a driver, as a socket
    /// write would).
    pub fn queue_raw(&mut self, route: Route, channel: u16, data: Vec<u8>) {
        if self.raw_out.len() < MAX_QUEUE {
            self.raw_out.push_back((route, channel, data));
        } else {
            self.counters.host_queue_full += 1;
        }
    }

    /// The oldest raw packet that arrived: its channel and bytes.
    pub fn take_raw(&mut self) -> Option<(u16, Vec<u8>)> {
        self.raw_in.pop_front()
    }

    /// How long a packet waits for its route in all (several asks).
    fn give_up(&self) -> Duration {
        Duration::from_nanos(self.cfg.route_timeout.as_nanos().saturating_mul(4))
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Asks (again) for the destinations packets are waiting for.
    fn ask_waiting(&mut self, now: Instant, out: &mut Outbox<Vec<u8>>) {
        let waiting: Vec<(Ipv4Addr, u32)> = self.pending.iter().map(|p| (p.dst, p.kbps)).collect();
        for (dst, kbps) in waiting {
            self.ask(now, dst, kbps, out);
        }
    }

    /// Asks for a route to `dst` (at most once per route timeout).
    fn ask(&mut self, now: Instant, dst: Ipv4Addr, kbps: u32, out: &mut Outbox<Vec<u8>>) {
        if self
            .asked
            .get(&dst)
            .is_some_and(|&t| now < t + self.cfg.route_timeout)
        {
            return;
        }
        if self.asked.len() >= MAX_PENDING {
            self.asked.clear();
        }
        if let Some(ac) = self.ac.as_mut() {
            if ac.epoch() > 0 {
                let epoch = ac.epoch();
                let (status, route) = ac.route(self.cfg.addr, dst, kbps);
                if status == 0 {
                    self.learn(now, dst, route, epoch, out);
                } else {
                    self.fail(now, dst, true, out);
                }
                return;
            }
        }
        let Some(s) = self.server.clone() else { return };
        self.asked.insert(dst, now);
        let seq = self.next_seq();
        let m = Msg::RouteRequest {
            seq,
            src: self.cfg.addr.octets(),
            dst: dst.octets(),
            kbps,
        };
        self.counters.route_requests += 1;
        out.push(0, m.packet(&s.to_ac));
    }

    fn learn(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        route: Route,
        epoch: u32,
        out: &mut Outbox<Vec<u8>>,
    ) {
        self.asked.remove(&dst);
        if self.routes.len() >= MAX_ROUTES && !self.routes.contains_key(&dst) {
            self.routes.clear();
        }
        self.routes.insert(dst, (route, epoch));
        self.counters.routes_learned += 1;
        let (go, stay): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|p| p.dst == dst);
        self.pending = stay.into();
        for p in go {
            self.send_via(now, p.dst, p.pkt, p.kbps, out);
        }
    }

    /// The AC has no route to `dst`: the packets waiting for one are
    /// dropped; and, if the answer is from the map in use (`believe`), so
    /// are those that come for it within a route timeout (rather than each
    /// asking again).
    fn fail(&mut self, now: Instant, dst: Ipv4Addr, believe: bool, out: &mut Outbox<Vec<u8>>) {
        self.asked.remove(&dst);
        if believe {
            if self.refused.len() >= MAX_PENDING {
                self.refused.clear();
            }
            self.refused.insert(dst, now);
        }
        let (gone, stay): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|p| p.dst == dst);
        self.pending = stay.into();
        for p in gone {
            self.counters.no_route += 1;
            Self::dropped(out, &p.pkt, NO_ROUTE);
        }
    }

    /// Tells the driver, if it asks ([`Outbox::tracking_drops`]), of an
    /// IPv4 packet dropped here before it left: as a frame with an empty
    /// route, as the host's node would have taken it.
    fn dropped(out: &mut Outbox<Vec<u8>>, pkt: &[u8], reason: &'static str) {
        if out.tracking_drops() {
            let mut frame = Vec::with_capacity(pkt.len() + 3);
            frame.extend_from_slice(&[0, 0, Kind::Ip as u8]);
            frame.extend_from_slice(pkt);
            out.dropped(0, &frame, reason);
        }
    }

    fn deliver_local(&mut self, pkt: Vec<u8>) {
        if self.to_host.len() >= MAX_QUEUE {
            self.counters.host_queue_full += 1;
        } else {
            self.to_host.push_back(pkt);
        }
    }

    /// Where a packet for `dst` goes first: `dst` itself on the LAN, the
    /// gateway beyond it.
    fn next_hop(&self, dst: Ipv4Addr) -> Ipv4Addr {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(self.cfg.prefix.min(32)))
            .unwrap_or(0);
        match self.cfg.gateway {
            Some(g) if (u32::from(dst) ^ u32::from(self.cfg.addr)) & mask != 0 => g,
            _ => dst,
        }
    }

    /// Sends an IPv4 packet to its destination (through the gateway if it
    /// is off the LAN), or holds it for a route.
    fn send_ip(&mut self, now: Instant, pkt: Vec<u8>, kbps: u32, out: &mut Outbox<Vec<u8>>) {
        let Ok(h) = ipv4::check(&pkt) else {
            self.counters.bad_packets += 1;
            return;
        };
        let hop = self.next_hop(h.dst);
        self.send_via(now, hop, pkt, kbps, out);
    }

    /// Sends an IPv4 packet to the LAN host `hop`, or holds it for a route.
    fn send_via(
        &mut self,
        now: Instant,
        hop: Ipv4Addr,
        pkt: Vec<u8>,
        kbps: u32,
        out: &mut Outbox<Vec<u8>>,
    ) {
        if hop == self.cfg.addr {
            self.deliver_local(pkt);
            return;
        }
        if let Some((route, _)) = self.routes.get(&hop) {
            self.counters.ip_sent += 1;
            out.push(0, Msg::Ip(pkt).packet(route));
            return;
        }
        if self
            .refused
            .get(&hop)
            .is_some_and(|&t| now < t + self.cfg.route_timeout)
        {
            self.counters.no_route += 1;
            Self::dropped(out, &pkt, NO_ROUTE);
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            self.counters.pending_full += 1;
            Self::dropped(out, &pkt, PENDING_FULL);
            return;
        }
        self.pending.push_back(Pending {
            dst: hop,
            since: now,
            kbps,
            pkt,
        });
        self.ask(now, hop, kbps, out);
    }

    /// Sends an IPv4 packet a router forwards onto the LAN, to the LAN host
    /// `hop` (its destination, or another router).
    pub fn forward(
        &mut self,
        now: Instant,
        hop: Ipv4Addr,
        pkt: Vec<u8>,
        out: &mut Outbox<Vec<u8>>,
    ) {
        self.send_via(now, hop, pkt, 0, out);
    }

    fn ip_in(&mut self, pkt: Vec<u8>) {
        self.counters.ip_received += 1;
        let Ok(h) = ipv4::check(&pkt) else {
            self.counters.bad_packets += 1;
            return;
        };
        // Flow packets for this host are checked against what their sender
        // wrote.
        let expected = flow::read(&pkt[..h.total_len])
            .filter(|f| f.dst == self.cfg.addr)
            .and_then(|f| Some((f, self.rx.get_mut(&f.id)?)));
        if let Some((f, rx)) = expected {
            let want = flow::packet(f.id, f.dst, f.seq, h.total_len);
            if want[..] == pkt[..h.total_len] {
                rx.delivered += 1;
            } else {
                rx.corrupted += 1;
            }
        }
        self.deliver_local(pkt);
    }

    fn announce(&mut self, now: Instant, ac: u64, epoch: u32, addr: Ipv4Addr, to_ac: Route) {
        self.counters.announcements += 1;
        let take = match &self.server {
            None => true,
            Some(s) => s.id == ac || ac < s.id || now >= s.heard + self.cfg.ac_wait,
        };
        if !take {
            return;
        }
        let newer_map = self
            .server
            .as_ref()
            .is_none_or(|s| s.id != ac || s.epoch != epoch);
        self.server = Some(KnownAc {
            id: ac,
            addr,
            to_ac,
            epoch,
            heard: now,
        });
        if newer_map {
            self.refused.clear();
            let before = self.routes.len();
            self.routes.retain(|_, (_, e)| *e == epoch);
            self.counters.routes_dropped += (before - self.routes.len()) as u64;
        }
        if self.cfg.role == AcRole::Auto && self.ac.is_none() {
            self.takeover_at = Some(now + Self::wait(&self.cfg));
        }
    }

    fn message(&mut self, now: Instant, m: Msg, out: &mut Outbox<Vec<u8>>) {
        match m {
            Msg::Ip(p) => self.ip_in(p),
            Msg::Raw { channel, data } => {
                self.counters.raw[0] += 1;
                if self.raw_in.len() < MAX_QUEUE {
                    self.raw_in.push_back((channel, data));
                } else {
                    self.counters.host_queue_full += 1;
                }
            }
            Msg::HostQuery { ac, seq, back } => {
                let m = Msg::HostInfo {
                    ac,
                    seq,
                    addr: self.cfg.addr.octets(),
                    host: self.cfg.id,
                };
                out.push(0, m.packet(&back));
            }
            Msg::Announce {
                ac,
                epoch,
                addr,
                to_ac,
            } => {
                self.announce(now, ac, epoch, Ipv4Addr::from(addr), to_ac);
                // Packets that waited for an AC to ask can ask now.
                self.ask_waiting(now, out);
            }
            Msg::RouteReply {
                dst,
                status,
                epoch,
                route,
                ..
            } => {
                let dst = Ipv4Addr::from(dst);
                if status == 0 {
                    self.learn(now, dst, route, epoch, out);
                } else {
                    // Believed for a while only if from the map in use.
                    let current = self.server.as_ref().is_some_and(|s| s.epoch == epoch);
                    self.fail(now, dst, current, out);
                }
            }
            m @ (Msg::Probe { .. }
            | Msg::HostInfo { .. }
            | Msg::RouteRequest { .. }
            | Msg::Report { .. }) => {
                if let Some(ac) = self.ac.as_mut() {
                    let before = ac.epoch();
                    ac.receive(now, m, out);
                    // The AC's own map changed its own routes' epoch.
                    let e = ac.epoch();
                    self.routes.retain(|_, (_, ep)| *ep == e || *ep == 0);
                    if e != before {
                        // A newer map may reach what the older did not.
                        self.refused.clear();
                    }
                }
            }
            Msg::Explore { .. } => self.counters.bad_packets += 1,
        }
    }
}

impl Node<Vec<u8>> for AtomicHost {
    fn ports(&self) -> usize {
        1
    }

    fn receive(
        &mut self,
        now: Instant,
        _port: PortId,
        frames: &[Vec<u8>],
        out: &mut Outbox<Vec<u8>>,
    ) {
        for f in frames {
            match Msg::parse(f) {
                Ok(m) => self.message(now, m, out),
                Err(_) => self.counters.bad_packets += 1,
            }
        }
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox<Vec<u8>>) {
        while let Some((route, channel, data)) = self.raw_out.pop_front() {
            self.send_raw(&route, channel, &data, out);
        }
        if let Some(ac) = self.ac.as_mut() {
            if ac.poll_at().is_some_and(|t| t <= now) {
                let before = ac.epoch();
                ac.poll(now, out);
                if ac.epoch() != before {
                    let e = ac.epoch();
                    self.refused.clear();
                    let n = self.routes.len();
                    self.routes.retain(|_, (_, ep)| *ep == e);
                    self.counters.routes_dropped += (n - self.routes.len()) as u64;
                }
            }
        }
        if self.ac.is_none() && self.takeover_at.is_some_and(|t| t <= now) {
            let heard = self
                .server
                .as_ref()
                .is_some_and(|s| now < s.heard + self.cfg.ac_wait);
            if heard {
                self.takeover_at = Some(now + Self::wait(&self.cfg));
            } else {
                self.counters.ac_takeovers += 1;
                self.ac = Some(Ac::new(
                    self.cfg.id,
                    self.cfg.addr,
                    self.cfg.id,
                    self.cfg.ac,
                    now,
                ));
                self.takeover_at = None;
            }
        }
        // Packets whose route never came.
        while let Some(p) = self.pending.front() {
            if now < p.since + self.give_up() {
                break;
            }
            if let Some(p) = self.pending.pop_front() {
                Self::dropped(out, &p.pkt, NO_ROUTE);
            }
            self.counters.no_route += 1;
        }
        self.ask_waiting(now, out);
        for i in 0..self.flows.len() {
            let mut budget = 256;
            while budget > 0 {
                let f = &mut self.flows[i];
                if f.sent >= f.spec.count || f.next > now {
                    break;
                }
                budget -= 1;
                let id = FlowId {
                    src: self.cfg.addr,
                    flow: i as u16,
                };
                let pkt = flow::packet(id, f.spec.dst, f.sent, f.spec.size);
                let kbps = f.spec.kbps;
                f.sent += 1;
                f.next += f.spec.interval;
                self.send_ip(now, pkt, kbps, out);
            }
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        let ac = self.ac.as_ref().and_then(Ac::poll_at);
        let flow = self
            .flows
            .iter()
            .filter(|f| f.sent < f.spec.count)
            .map(|f| f.next)
            .min();
        // A waiting packet wakes the host to ask again (if it asked) or to
        // give up; with no AC to ask yet, only an announcement or its own
        // AC's first map (both handled as they come) move it on.
        let pending = self
            .pending
            .iter()
            .map(|p| {
                let give_up = p.since + self.give_up();
                match self.asked.get(&p.dst) {
                    Some(&t) => (t + self.cfg.route_timeout).min(give_up),
                    None => give_up,
                }
            })
            .min();
        let takeover = if self.ac.is_none() {
            self.takeover_at
        } else {
            None
        };
        let raw = (!self.raw_out.is_empty()).then_some(Instant::ZERO);
        [ac, flow, pending, takeover, raw]
            .into_iter()
            .flatten()
            .min()
    }

    fn packet_port(&mut self) -> Option<&mut dyn PacketPort<Vec<u8>>> {
        Some(self)
    }
}

impl PacketPort<Vec<u8>> for AtomicHost {
    fn host_sent(&mut self, now: Instant, pkt: &[u8], out: &mut Outbox<Vec<u8>>) {
        self.send_ip(now, pkt.to_vec(), 0, out);
    }

    fn drain_to_host(&mut self, f: &mut dyn FnMut(&[u8])) {
        for p in self.to_host.drain(..) {
            f(&p);
        }
    }

    fn to_host_len(&self) -> usize {
        self.to_host.len()
    }
}
