//! An IP node on ATM ports: a Classical IP host (its local side a TUN
//! interface, through [`PacketPort`]) or a router between logical IP
//! subnets.
//!
//! Each port with an address is one logical IP subnet member. The node's
//! PVCs on a port are learned by InATMARP: at start, and again before an
//! entry ages out, the node asks on every PVC who is at the far end, and
//! answers the same question from the far end. Packets for a next hop not
//! yet resolved wait (a few per node, for a bounded time); when time runs
//! out they are dropped and an ICMP host unreachable goes back to their
//! sender, so `ping` says plainly what happened.
//!
//! A host hands every IP packet that arrives to its local stack. A router
//! checks and forwards ([`crate::forward`]), answers ICMP echo requests to
//! its own addresses, and sends ICMP time exceeded, net unreachable, host
//! unreachable and fragmentation needed where RFC 1812 asks (never about
//! an ICMP error).

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use aurora_net::{oam, Node, Outbox, PacketPort, PortId};
use aurora_sar::{Aal5Rx, Aal5Tx, PduOptions, RxConfig, Status, VcConfig, VcCounters};
use aurora_time::{Duration, Instant};
use aurora_wire::atmarp::{AtmAddr, AtmarpRepr, Op, MAX_LEN as ATMARP_MAX};
use aurora_wire::cell::{Format, VcId};
use aurora_wire::ipv4;
use aurora_wire::llc::{Encapsulation, Protocol, LLC_SNAP_LEN};
use aurora_wire::oam::OamFlow;
use aurora_wire::CellBytes;
use rustc_hash::FxHashMap;

use crate::arp::{ArpCache, CLIENT_AGEING};

mod server;
use crate::forward::{Decision, DropReason, Drops, Forwarder, Route};

/// RFC 1626's default MTU for IP over ATM.
pub const DEFAULT_MTU: usize = 9180;
/// Packets waiting for address resolution, in all.
pub const MAX_PENDING: usize = 64;
/// ARP cache entries.
pub const ARP_CAPACITY: usize = 4096;
/// Cells segmented at a time.
const CELL_CHUNK: usize = 64;

/// A port's address in its logical IP subnet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interface {
    /// The address.
    pub addr: Ipv4Addr,
    /// Prefix length of the subnet.
    pub prefix: u8,
}

/// A static route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticRoute {
    /// Destination prefix.
    pub dst: Ipv4Addr,
    /// Its length.
    pub prefix: u8,
    /// The router to send through (on one of the node's subnets).
    pub gateway: Ipv4Addr,
}

/// How an IP node is set up.
#[derive(Clone, Debug)]
pub struct IpConfig {
    /// Per port: its address, or `None` for a port without IP.
    pub interfaces: Vec<Option<Interface>>,
    /// Interfaces on networks that carry whole packets (a router's side on
    /// an ATOMIC LAN), numbered after the ATM ports: the first is
    /// interface `interfaces.len()`. What the node sends there waits in
    /// [`IpNode::take_packet`]; what arrives there comes in through
    /// [`IpNode::packet_in`].
    pub packet_interfaces: Vec<Interface>,
    /// Static routes.
    pub routes: Vec<StaticRoute>,
    /// Forward between ports (a router) rather than deliver everything to
    /// the local host.
    pub forwarding: bool,
    /// Largest packet sent or forwarded.
    pub mtu: usize,
    /// Encapsulation on every VC.
    pub encap: Encapsulation,
    /// How long a learned address stays valid.
    pub arp_ageing: Duration,
    /// Time between InATMARP requests on a PVC not yet answered.
    pub inarp_retry: Duration,
    /// How long a packet waits for its next hop to be resolved.
    pub resolve_timeout: Duration,
    /// Packets waiting for the local host, at most.
    pub host_queue: usize,
    /// This node's ATM address (NSAP or E.164), sent in ATMARP packets.
    pub atm: AtmAddr,
    /// Ask who is at the far end of each PVC by InATMARP (RFC 2225 asks
    /// for it on PVCs; turn it off to rely on an ATMARP server alone).
    pub inarp: bool,
    /// Serve ATMARP for the subnets of this node's ports.
    pub atmarp_server: bool,
    /// The PVC to this subnet's ATMARP server, if it has one: the node
    /// registers its address there and asks it for unknown next hops.
    pub server_vc: Option<(PortId, VcId)>,
}

impl Default for IpConfig {
    fn default() -> Self {
        IpConfig {
            interfaces: vec![None],
            packet_interfaces: Vec::new(),
            routes: Vec::new(),
            forwarding: false,
            mtu: DEFAULT_MTU,
            encap: Encapsulation::Llc,
            arp_ageing: CLIENT_AGEING,
            inarp_retry: Duration::from_secs(1),
            resolve_timeout: Duration::from_secs(3),
            host_queue: 4096,
            atm: AtmAddr::EMPTY,
            inarp: true,
            atmarp_server: false,
            server_vc: None,
        }
    }
}

/// Why a configuration cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// What an IP node counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpCounters {
    /// SDUs reassembled intact from the ATM ports.
    pub sdus_in: u64,
    /// SDUs the reassembler dropped (its own counters say why).
    pub sdus_dropped: u64,
    /// IP packets sent into the ATM ports.
    pub packets_out: u64,
    /// IP packets that arrived from the ATM ports.
    pub packets_in: u64,
    /// Packets the local host sent.
    pub from_host: u64,
    /// Packets handed to the local host.
    pub to_host: u64,
    /// ICMP messages this node generated.
    pub icmp_sent: u64,
    /// InATMARP requests sent.
    pub inarp_requests: u64,
    /// InATMARP requests answered.
    pub inarp_replies: u64,
    /// ATMARP requests sent to the server (registrations and questions).
    pub atmarp_requests: u64,
    /// ATMARP replies and NAKs the server sent back.
    pub atmarp_answers: u64,
    /// As a server: requests answered with an address, and with a NAK.
    pub served: [u64; 2],
    /// OAM loopback requests answered.
    pub oam_answered: u64,
    /// Other OAM cells (dropped).
    pub oam_other: u64,
    /// Packets dropped, by reason.
    pub drops: Drops,
}

struct Vc {
    port: PortId,
    vc: VcId,
    tx: Aal5Tx,
    far: Option<Ipv4Addr>,
    /// The far end's ATM address, if configured or learned.
    far_atm: Option<AtmAddr>,
    last_request: Option<Instant>,
}

struct Pending {
    next_hop: Ipv4Addr,
    port: PortId,
    since: Instant,
    pkt: Vec<u8>,
}

/// A packet for the local host, where it lies in a buffer: a reassembly
/// buffer handed over whole (no copy) when the packet fills half of it or
/// more, else a copy.
#[derive(Debug)]
pub struct HostPacket {
    buf: Vec<u8>,
    at: std::ops::Range<usize>,
    /// The port whose reassembler the buffer came from (it goes back there
    /// once the host has the packet).
    from: Option<PortId>,
}

impl HostPacket {
    /// The packet's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.at.clone()]
    }
}

/// Everything but the reassemblers, so a delivery callback can borrow it
/// while a reassembler runs.
struct Core {
    cfg: IpConfig,
    fwd: Forwarder,
    arp: ArpCache,
    vcs: Vec<Vc>,
    by_vc: FxHashMap<(PortId, VcId), usize>,
    pending: VecDeque<Pending>,
    host_q: VecDeque<HostPacket>,
    /// Packets for the packet interfaces: (interface, next hop, packet).
    packet_q: VecDeque<(usize, Ipv4Addr, Vec<u8>)>,
    counters: IpCounters,
    cells: Vec<CellBytes>,
    scratch: Vec<u8>,
    last_unresolved: Option<Ipv4Addr>,
    server: server::ServerState,
}

/// The IP node.
pub struct IpNode {
    rx: Vec<Aal5Rx>,
    core: Core,
    /// Reassembly buffers on their way back to their reassembler.
    used: Vec<Vec<u8>>,
    /// User cells of a batch that also held OAM cells.
    user: Vec<CellBytes>,
}

fn in_subnet(a: Ipv4Addr, i: &Interface) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(i.prefix)).unwrap_or(0);
    (u32::from(a) ^ u32::from(i.addr)) & mask == 0
}

impl IpNode {
    /// A node with the ports and addresses of `cfg`.
    pub fn new(cfg: IpConfig) -> Result<Self, ConfigError> {
        let mut fwd = if cfg.forwarding {
            Forwarder::for_router()
        } else {
            Forwarder::new()
        };
        let all = cfg
            .interfaces
            .iter()
            .copied()
            .chain(cfg.packet_interfaces.iter().copied().map(Some));
        for (p, i) in all.enumerate() {
            let Some(i) = i else { continue };
            if i.prefix > 32 {
                return Err(ConfigError(format!(
                    "prefix /{} of {} is longer than 32",
                    i.prefix, i.addr
                )));
            }
            fwd.add_local(i.addr);
            fwd.add_route(
                i.addr,
                i.prefix,
                Route {
                    port: p as PortId,
                    gateway: None,
                },
            );
        }
        for r in &cfg.routes {
            let port = cfg
                .interfaces
                .iter()
                .copied()
                .chain(cfg.packet_interfaces.iter().copied().map(Some))
                .position(|i| i.as_ref().is_some_and(|i| in_subnet(r.gateway, i)))
                .ok_or_else(|| {
                    ConfigError(format!(
                        "the gateway {} of route {}/{} is on none of the node's subnets",
                        r.gateway, r.dst, r.prefix
                    ))
                })?;
            fwd.add_route(
                r.dst,
                r.prefix.min(32),
                Route {
                    port: port as PortId,
                    gateway: Some(r.gateway),
                },
            );
        }
        let rx = cfg
            .interfaces
            .iter()
            .map(|_| Aal5Rx::new(RxConfig::default()))
            .collect();
        Ok(IpNode {
            rx,
            used: Vec::new(),
            user: Vec::new(),
            core: Core {
                arp: ArpCache::new(cfg.arp_ageing, ARP_CAPACITY),
                cfg,
                fwd,
                vcs: Vec::new(),
                by_vc: FxHashMap::default(),
                pending: VecDeque::new(),
                host_q: VecDeque::new(),
                packet_q: VecDeque::new(),
                counters: IpCounters::default(),
                cells: Vec::new(),
                scratch: Vec::new(),
                last_unresolved: None,
                server: server::ServerState::default(),
            },
        })
    }

    /// Adds a PVC on `port`, to be resolved by InATMARP; `far_atm` is the
    /// ATM address of its far end, if known (an ATMARP server's answers
    /// are mapped to PVCs by it).
    pub fn add_pvc(
        &mut self,
        port: PortId,
        vc: VcId,
        far_atm: Option<AtmAddr>,
    ) -> Result<(), ConfigError> {
        let rx = self
            .rx
            .get_mut(usize::from(port))
            .ok_or_else(|| ConfigError(format!("the node has no port {port}")))?;
        let max_sdu = self.core.cfg.mtu + LLC_SNAP_LEN + 2;
        rx.open_vc(
            vc,
            VcConfig {
                max_sdu: max_sdu.min(aurora_wire::aal5::MAX_SDU),
                ..VcConfig::default()
            },
        )
        .map_err(|e| ConfigError(format!("cannot open VC {vc} on port {port}: {e}")))?;
        let tx = Aal5Tx::new(vc, Format::Uni)
            .map_err(|e| ConfigError(format!("cannot send on VC {vc}: {e}")))?;
        let i = self.core.vcs.len();
        self.core.vcs.push(Vc {
            port,
            vc,
            tx,
            far: None,
            far_atm,
            last_request: None,
        });
        self.core.by_vc.insert((port, vc), i);
        Ok(())
    }

    /// Adds a packet interface (see [`IpConfig::packet_interfaces`]) and
    /// returns its number among them.
    pub fn add_packet_interface(&mut self, i: Interface) -> Result<usize, ConfigError> {
        if i.prefix > 32 {
            return Err(ConfigError(format!(
                "prefix /{} of {} is longer than 32",
                i.prefix, i.addr
            )));
        }
        let c = &mut self.core;
        let k = c.cfg.packet_interfaces.len();
        let port = PortId::try_from(c.cfg.interfaces.len() + k)
            .map_err(|_| ConfigError("too many interfaces".into()))?;
        c.cfg.packet_interfaces.push(i);
        c.fwd.add_local(i.addr);
        c.fwd.add_route(
            i.addr,
            i.prefix,
            Route {
                port,
                gateway: None,
            },
        );
        Ok(k)
    }

    /// The next packet for a packet interface: (its number among the
    /// packet interfaces, the next hop, the packet).
    pub fn take_packet(&mut self) -> Option<(usize, Ipv4Addr, Vec<u8>)> {
        self.core.packet_q.pop_front()
    }

    /// A packet that arrived on packet interface `k` (a router forwards
    /// it, or answers it if it is for the router).
    pub fn packet_in(&mut self, now: Instant, k: usize, pkt: &mut [u8], out: &mut Outbox) {
        let c = &mut self.core;
        if k >= c.cfg.packet_interfaces.len() {
            return;
        }
        let port = (c.cfg.interfaces.len() + k) as PortId;
        c.counters.packets_in += 1;
        if let Some(at) = c.ipv4_in(now, port, pkt, out) {
            c.push_copy(&pkt[at]);
        }
    }

    /// Moves the packets waiting for the local host to `into` (to read
    /// without copying them); give each back with [`IpNode::give_back`].
    pub fn take_to_host(&mut self, into: &mut Vec<HostPacket>) {
        into.extend(self.core.host_q.drain(..));
    }

    /// A packet the host has read: its buffer goes back to the reassembler
    /// it came from, for a later packet.
    pub fn give_back(&mut self, p: HostPacket) {
        if let Some(rx) = p.from.and_then(|port| self.rx.get_mut(usize::from(port))) {
            rx.recycle(p.buf);
        }
    }

    /// The counters.
    pub fn counters(&self) -> IpCounters {
        let mut c = self.core.counters;
        c.sdus_dropped = self.rx.iter().map(|r| r.stats().pdus_dropped.total()).sum();
        c
    }

    /// PVC `vc` on `port`'s counters: PDUs sent (`tx`, `tx_err`) and
    /// received (`rx`, `rx_err`, `rx_drop`, `rx_eoms`).
    pub fn vc_counters(&self, port: PortId, vc: VcId) -> Option<VcCounters> {
        let i = *self.core.by_vc.get(&(port, vc))?;
        let mut c = self.rx.get(usize::from(port))?.vc_counters(vc)?;
        let tx = self.core.vcs[i].tx.counters();
        c.tx = tx.tx;
        c.tx_err = tx.tx_err;
        Some(c)
    }

    /// The address found at the far end of each PVC: (port, VC, address).
    pub fn neighbours(&self) -> impl Iterator<Item = (PortId, VcId, Option<Ipv4Addr>)> + '_ {
        self.core.vcs.iter().map(|v| (v.port, v.vc, v.far))
    }

    /// The ARP cache.
    pub fn arp(&self) -> &ArpCache {
        &self.core.arp
    }

    /// As an ATMARP server: every registered address and its ATM address.
    pub fn atmarp_table(&self) -> Vec<(Ipv4Addr, AtmAddr)> {
        let mut t: Vec<_> = self.core.server_table().collect();
        t.sort_by_key(|(ip, _)| *ip);
        t
    }

    /// As an ATMARP client: when the server last confirmed this node's
    /// registration.
    pub fn registered(&self) -> Option<Instant> {
        self.core.registered()
    }

    /// The last next hop that could not be resolved, if any.
    pub fn last_unresolved(&self) -> Option<Ipv4Addr> {
        self.core.last_unresolved
    }

    /// The configuration.
    pub fn config(&self) -> &IpConfig {
        &self.core.cfg
    }
}

impl Core {
    fn iface(&self, port: PortId) -> Option<Interface> {
        let p = usize::from(port);
        match p.checked_sub(self.cfg.interfaces.len()) {
            None => self.cfg.interfaces[p],
            Some(k) => self.cfg.packet_interfaces.get(k).copied(),
        }
    }

    /// Sends one packet of `protocol` on VC number `i`.
    fn transmit(&mut self, i: usize, protocol: Protocol, pkt: &[u8], out: &mut Outbox) {
        let mut hdr = [0u8; LLC_SNAP_LEN + 2];
        let Ok(n) = self.cfg.encap.emit_header(protocol, &mut hdr) else {
            self.counters.drops.add(DropReason::BadEncapsulation);
            return;
        };
        let v = &mut self.vcs[i];
        let parts: [&[u8]; 2] = [&hdr[..n], pkt];
        let Ok(mut seg) = v.tx.segment(&parts, PduOptions::default()) else {
            self.counters.drops.add(DropReason::TooBig);
            return;
        };
        // A few cells at a time, so they are still in the first-level
        // cache when they are handed on.
        self.cells.resize(CELL_CHUNK, [0; 53]);
        loop {
            let k = seg.fill(&mut self.cells);
            out.push_slice(v.port, &self.cells[..k]);
            if k < self.cells.len() {
                break;
            }
        }
        if protocol != Protocol::Atmarp {
            self.counters.packets_out += 1;
        }
    }

    /// Sends an IPv4 packet toward `next_hop` out of `port`, or holds it
    /// until the next hop is resolved.
    fn send_ip(
        &mut self,
        now: Instant,
        port: PortId,
        next_hop: Ipv4Addr,
        pkt: &[u8],
        out: &mut Outbox,
    ) {
        if pkt.len() > self.cfg.mtu {
            self.counters.drops.add(DropReason::TooBig);
            self.icmp_error(now, port, pkt, ipv4::ICMP_UNREACHABLE, 4, out);
            return;
        }
        if let Some(k) = usize::from(port).checked_sub(self.cfg.interfaces.len()) {
            if self.packet_q.len() >= self.cfg.host_queue {
                self.counters.drops.add(DropReason::InterfaceQueueFull);
            } else {
                self.counters.packets_out += 1;
                self.packet_q.push_back((k, next_hop, pkt.to_vec()));
            }
            return;
        }
        if let Some(e) = self
            .arp
            .lookup(now, next_hop)
            .filter(|e| e.port == port)
            .and_then(|e| self.by_vc.get(&(e.port, e.vc)).copied())
        {
            self.transmit(e, Protocol::Ipv4, pkt, out);
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            self.counters.drops.add(DropReason::ResolveQueueFull);
            return;
        }
        self.pending.push_back(Pending {
            next_hop,
            port,
            since: now,
            pkt: pkt.to_vec(),
        });
        self.ask_server(now, next_hop, out);
    }

    /// Sends what was waiting for `ip`, now reachable.
    fn flush_pending(&mut self, now: Instant, ip: Ipv4Addr, out: &mut Outbox) {
        let waiting: Vec<Pending> = {
            let (go, stay): (VecDeque<_>, VecDeque<_>) =
                self.pending.drain(..).partition(|p| p.next_hop == ip);
            self.pending = stay;
            go.into()
        };
        for p in waiting {
            self.send_ip(now, p.port, p.next_hop, &p.pkt, out);
        }
    }

    /// A packet this node originates (ICMP), routed like any other.
    fn originate(&mut self, now: Instant, pkt: &[u8], out: &mut Outbox) {
        let Ok(h) = ipv4::check(pkt) else { return };
        if self.fwd.is_local(h.dst) {
            // To the local host.
            self.deliver(pkt);
            return;
        }
        match self.fwd.route(h.dst) {
            Some((port, next_hop)) => self.send_ip(now, port, next_hop, pkt, out),
            None => self.counters.drops.add(DropReason::NoRoute),
        }
    }

    /// An ICMP error about `original`, from the address of `port` (or any
    /// address of the node), unless `original` is itself an ICMP error.
    fn icmp_error(
        &mut self,
        now: Instant,
        port: PortId,
        original: &[u8],
        icmp_type: u8,
        code: u8,
        out: &mut Outbox,
    ) {
        let is_icmp_error = original.get(ipv4::PROTOCOL) == Some(&ipv4::PROTO_ICMP)
            && original
                .first()
                .map(|b| usize::from(b & 0x0F) * 4)
                .and_then(|hl| original.get(hl))
                .is_some_and(|t| ![ipv4::ICMP_ECHO_REQUEST, ipv4::ICMP_ECHO_REPLY].contains(t));
        if is_icmp_error {
            return;
        }
        let from = self
            .iface(port)
            .or_else(|| self.cfg.interfaces.iter().flatten().next().copied())
            .map(|i| i.addr);
        let Some(from) = from else { return };
        let mut buf = [0u8; 128];
        let Ok(n) = ipv4::emit_icmp_error(from, original, icmp_type, code, &mut buf) else {
            return;
        };
        if icmp_type == ipv4::ICMP_UNREACHABLE && code == 4 {
            // Fragmentation needed: the next-hop MTU goes in ICMP bytes 6-7.
            let mtu = (self.cfg.mtu.min(65535) as u16).to_be_bytes();
            let icmp = &mut buf[ipv4::MIN_HEADER_LEN..n];
            icmp[6..8].copy_from_slice(&mtu);
            icmp[2..4].fill(0);
            let c = ipv4::checksum(icmp);
            icmp[2..4].copy_from_slice(&c.to_be_bytes());
        }
        self.counters.icmp_sent += 1;
        self.originate(now, &buf[..n], out);
    }

    /// Whether the local host's queue takes one more packet: if so it is
    /// counted as going to the host; if not, as a drop (the queue is full).
    fn admit(&mut self) -> bool {
        if self.host_q.len() >= self.cfg.host_queue {
            self.counters.drops.add(DropReason::HostQueueFull);
            return false;
        }
        self.counters.to_host += 1;
        true
    }

    /// Hands a copy of a packet to the local host's queue.
    fn deliver(&mut self, pkt: &[u8]) {
        if self.admit() {
            self.push_copy(pkt);
        }
    }

    /// Puts a copy of a packet admitted to the local host's queue there.
    fn push_copy(&mut self, pkt: &[u8]) {
        self.host_q.push_back(HostPacket {
            buf: pkt.to_vec(),
            at: 0..pkt.len(),
            from: None,
        });
    }

    /// One reassembled SDU from `port`, VC `vc`; the part of it that goes
    /// to the local host as it lies (its room in the queue taken), if any.
    fn sdu(
        &mut self,
        now: Instant,
        port: PortId,
        vc: VcId,
        sdu: &mut [u8],
        out: &mut Outbox,
    ) -> Option<std::ops::Range<usize>> {
        self.counters.sdus_in += 1;
        let Ok((protocol, start)) = self.cfg.encap.parse(sdu) else {
            self.counters.drops.add(DropReason::BadEncapsulation);
            return None;
        };
        let end = sdu.len();
        let pkt = &mut sdu[start..];
        let at = match protocol {
            Protocol::Atmarp => {
                self.atmarp(now, port, vc, pkt, out);
                None
            }
            Protocol::Ethernet => {
                self.counters.drops.add(DropReason::Bridged);
                None
            }
            Protocol::Ipv6 if !self.cfg.forwarding => {
                self.counters.packets_in += 1;
                self.admit().then_some(0..end - start)
            }
            Protocol::Ipv6 => {
                self.counters.drops.add(DropReason::Ipv6NotRouted);
                None
            }
            Protocol::Ipv4 => {
                self.counters.packets_in += 1;
                self.ipv4_in(now, port, pkt, out)
            }
        };
        at.map(|r| start + r.start..start + r.end)
    }

    /// An IPv4 packet from a VC: forwarded, answered, or (at a host) the
    /// part of `pkt` that goes to the local host, its room in the queue
    /// taken.
    fn ipv4_in(
        &mut self,
        now: Instant,
        port: PortId,
        pkt: &mut [u8],
        out: &mut Outbox,
    ) -> Option<std::ops::Range<usize>> {
        if !self.cfg.forwarding {
            return match ipv4::check(pkt) {
                Ok(h) => self.admit().then_some(0..h.total_len),
                Err(e) => {
                    self.counters.drops.add(e.into());
                    None
                }
            };
        }
        match self.fwd.decide(pkt) {
            Decision::Forward {
                port: to,
                next_hop,
                len,
            } => self.send_ip(now, to, next_hop, &pkt[..len], out),
            Decision::Local { len } => self.local(now, &pkt[..len], out),
            Decision::Drop(r) => {
                self.counters.drops.add(r);
                match r {
                    DropReason::TtlExpired => {
                        self.icmp_error(now, port, pkt, ipv4::ICMP_TIME_EXCEEDED, 0, out)
                    }
                    DropReason::NoRoute => {
                        self.icmp_error(now, port, pkt, ipv4::ICMP_UNREACHABLE, 0, out)
                    }
                    _ => {}
                }
            }
        }
        None
    }

    /// A packet for a router's own address: echo requests are answered.
    fn local(&mut self, now: Instant, pkt: &[u8], out: &mut Outbox) {
        let hl = usize::from(pkt[0] & 0x0F) * 4;
        let is_echo = pkt[ipv4::PROTOCOL] == ipv4::PROTO_ICMP
            && pkt.get(hl) == Some(&ipv4::ICMP_ECHO_REQUEST)
            && pkt.len() >= hl + 8;
        if !is_echo {
            self.counters.drops.add(DropReason::LocalUnhandled);
            return;
        }
        let mut r = std::mem::take(&mut self.scratch);
        r.clear();
        r.extend_from_slice(pkt);
        // Swap the addresses, fresh TTL, header checksum again; the ICMP
        // type changes 8 -> 0, so its checksum is updated incrementally.
        r.copy_within(ipv4::SRC..ipv4::SRC + 4, ipv4::DST);
        r[ipv4::SRC..ipv4::SRC + 4].copy_from_slice(&pkt[ipv4::DST..ipv4::DST + 4]);
        r[ipv4::TTL] = 64;
        r[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].fill(0);
        let c = ipv4::checksum(&r[..hl]);
        r[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
        let old = u16::from_be_bytes([r[hl], r[hl + 1]]);
        r[hl] = ipv4::ICMP_ECHO_REPLY;
        let new = u16::from_be_bytes([r[hl], r[hl + 1]]);
        let hc = u16::from_be_bytes([r[hl + 2], r[hl + 3]]);
        r[hl + 2..hl + 4].copy_from_slice(&ipv4::update_checksum(hc, old, new).to_be_bytes());
        self.counters.icmp_sent += 1;
        self.originate(now, &r, out);
        self.scratch = r;
    }

    fn atmarp(&mut self, now: Instant, port: PortId, vc: VcId, pkt: &[u8], out: &mut Outbox) {
        let Ok(a) = AtmarpRepr::parse(pkt) else {
            self.counters.drops.add(DropReason::BadAtmarp);
            return;
        };
        let Some(&i) = self.by_vc.get(&(port, vc)) else {
            return;
        };
        match a.op {
            Op::InRequest | Op::InReply => {
                if !a.sha.is_empty() {
                    self.vcs[i].far_atm = Some(a.sha);
                }
                if let Some(ip) = a.spa {
                    self.arp.learn(now, ip, port, vc);
                    self.vcs[i].far = Some(ip);
                    self.flush_pending(now, ip, out);
                }
                if a.op == Op::InRequest {
                    let Some(me) = self.iface(port) else { return };
                    let reply = AtmarpRepr {
                        op: Op::InReply,
                        sha: self.cfg.atm,
                        ssa: AtmAddr::EMPTY,
                        spa: Some(me.addr),
                        tha: a.sha,
                        tsa: a.ssa,
                        tpa: a.spa,
                    };
                    self.send_atmarp(i, &reply, out);
                    self.counters.inarp_replies += 1;
                }
            }
            Op::Request if self.cfg.atmarp_server => self.serve(now, i, &a, out),
            Op::Reply | Op::Nak if self.cfg.server_vc == Some((port, vc)) => {
                self.server_answer(now, &a, out)
            }
            _ => self.counters.drops.add(DropReason::BadAtmarp),
        }
    }

    fn send_atmarp(&mut self, i: usize, a: &AtmarpRepr, out: &mut Outbox) {
        let mut buf = [0u8; ATMARP_MAX];
        if let Ok(n) = a.emit(&mut buf) {
            self.transmit(i, Protocol::Atmarp, &buf[..n], out);
        }
    }

    /// When VC `i` next needs an InATMARP request.
    fn inarp_due(&self, i: usize) -> Option<Instant> {
        let v = &self.vcs[i];
        self.iface(v.port)?;
        if !self.cfg.inarp {
            return None;
        }
        let refresh = match v.far.and_then(|ip| self.arp.get(ip)) {
            // Ask again halfway through the entry's life.
            Some(e) if e.port == v.port && e.vc == v.vc => {
                e.learned + Duration::from_nanos(self.arp.ageing().as_nanos() / 2)
            }
            _ => Instant::ZERO,
        };
        let retry = v
            .last_request
            .map_or(Instant::ZERO, |t| t + self.cfg.inarp_retry);
        Some(refresh.max(retry))
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        for i in 0..self.vcs.len() {
            if self.inarp_due(i).is_some_and(|t| t <= now) {
                let v = &self.vcs[i];
                let Some(me) = self.iface(v.port) else {
                    continue;
                };
                let req = AtmarpRepr {
                    op: Op::InRequest,
                    sha: self.cfg.atm,
                    ssa: AtmAddr::EMPTY,
                    spa: Some(me.addr),
                    tha: AtmAddr::EMPTY,
                    tsa: AtmAddr::EMPTY,
                    tpa: None,
                };
                self.vcs[i].last_request = Some(now);
                self.send_atmarp(i, &req, out);
                self.counters.inarp_requests += 1;
            }
        }
        self.server_poll(now, out);
        self.arp.expire(now);
        for v in &mut self.vcs {
            if v.far.is_some_and(|ip| self.arp.lookup(now, ip).is_none()) {
                v.far = None;
            }
        }
        while let Some(p) = self.pending.front() {
            if now < p.since + self.cfg.resolve_timeout {
                break;
            }
            let p = self.pending.pop_front().expect("front exists");
            self.counters.drops.add(DropReason::Unresolved);
            self.last_unresolved = Some(p.next_hop);
            self.icmp_error(now, p.port, &p.pkt, ipv4::ICMP_UNREACHABLE, 1, out);
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        let inarp = (0..self.vcs.len()).filter_map(|i| self.inarp_due(i)).min();
        let pending = self
            .pending
            .front()
            .map(|p| p.since + self.cfg.resolve_timeout);
        [inarp, pending, self.server_due()]
            .into_iter()
            .flatten()
            .min()
    }
}

impl Node for IpNode {
    fn ports(&self) -> usize {
        self.rx.len()
    }

    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        let Some(rx) = self.rx.get_mut(usize::from(port)) else {
            return;
        };
        // OAM cells: end-to-end loopback requests are answered, the rest
        // counted; user cells go on to reassembly.
        let mut user = std::mem::take(&mut self.user);
        let cells = if cells.iter().any(oam::is_oam) {
            user.clear();
            for c in cells {
                if !oam::is_oam(c) {
                    user.push(*c);
                    continue;
                }
                let answer = oam::loopback_answer(c, Format::Uni, OamFlow::F5EndToEnd)
                    .or_else(|| oam::loopback_answer(c, Format::Uni, OamFlow::F4EndToEnd));
                match answer {
                    Some(a) => {
                        self.core.counters.oam_answered += 1;
                        out.push(port, a);
                    }
                    None => self.core.counters.oam_other += 1,
                }
            }
            &user[..]
        } else {
            cells
        };
        let core = &mut self.core;
        let used = &mut self.used;
        rx.push(now, cells, &mut |d| {
            if d.status == Status::Intact {
                let vc = d.vc;
                let len = d.len();
                let mut buf = d.into_buffer();
                match core.sdu(now, port, vc, &mut buf[..len], out) {
                    // The host's packet stays in its reassembly buffer if
                    // it fills half of it or more (a short packet is
                    // copied, so the queue holds no more than twice the
                    // bytes of its packets).
                    Some(at) if 2 * at.len() >= buf.capacity() => {
                        core.host_q.push_back(HostPacket {
                            buf,
                            at,
                            from: Some(port),
                        })
                    }
                    Some(at) => {
                        core.push_copy(&buf[at]);
                        used.push(buf);
                    }
                    None => used.push(buf),
                }
            }
        });
        for b in self.used.drain(..) {
            rx.recycle(b);
        }
        self.user = user;
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        for rx in &mut self.rx {
            rx.handle_timeout(now);
        }
        self.core.poll(now, out);
    }

    fn poll_at(&self) -> Option<Instant> {
        let rx = self.rx.iter().filter_map(Aal5Rx::poll_at).min();
        [rx, self.core.poll_at()].into_iter().flatten().min()
    }

    fn packet_port(&mut self) -> Option<&mut dyn PacketPort> {
        Some(self)
    }
}

impl PacketPort for IpNode {
    fn host_sent(&mut self, now: Instant, pkt: &[u8], out: &mut Outbox) {
        let c = &mut self.core;
        c.counters.from_host += 1;
        if pkt.first().map(|b| b >> 4) == Some(6) {
            c.counters.drops.add(DropReason::Ipv6NotRouted);
            return;
        }
        let h = match ipv4::check(pkt) {
            Ok(h) => h,
            Err(e) => {
                c.counters.drops.add(e.into());
                return;
            }
        };
        let pkt = &pkt[..h.total_len];
        match c.fwd.route(h.dst) {
            Some((port, next_hop)) => c.send_ip(now, port, next_hop, pkt, out),
            None => {
                c.counters.drops.add(DropReason::NoRoute);
                c.icmp_error(now, 0, pkt, ipv4::ICMP_UNREACHABLE, 0, out);
            }
        }
    }

    fn drain_to_host(&mut self, f: &mut dyn FnMut(&[u8])) {
        while let Some(p) = self.core.host_q.pop_front() {
            f(p.bytes());
            self.give_back(p);
        }
    }

    fn to_host_len(&self) -> usize {
        self.core.host_q.len()
    }
}
