//! A host whose local side is this crate's TCP instead of a TUN device:
//! an IP node on the cell network ([`IpNode`]) with bulk sources that
//! connect and send, and sinks that listen and read.
//!
//! A source writes the byte pattern [`pattern`] (byte `i` of a transfer is
//! `i mod 251`, easy to produce from any language) and a sink checks it,
//! so a transfer between Aurora and any other TCP is checked byte for
//! byte. A sink can also take any bytes unchecked (for iperf3's data).
//!
//! Every packet the IP node hands up is counted once: to a connection, or
//! as a named drop ([`HostCounters`]). A segment for no connection and no
//! listener is answered with a RST, as a host's stack would.

use std::net::Ipv4Addr;

use aurora_ip::node::IpNode;
use aurora_net::{Node, Outbox, PacketPort, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::CellBytes;

use crate::conn::{reset_reply, Config, Connection, Endpoint, State};
use crate::seg::{self, SegError};
use crate::Seq;

/// Connections a host keeps (live, and closed ones kept for the report);
/// past this the oldest closed one is forgotten, and a SYN finding no room
/// is refused.
pub const MAX_CONNECTIONS: usize = 4096;

/// Byte `offset` of every transfer: `offset mod 251`.
#[inline]
pub fn pattern(offset: u64) -> u8 {
    (offset % 251) as u8
}

/// The pattern's period.
const PERIOD: usize = 251;
/// Longest run copied or compared at once.
const RUN: usize = 4096;
/// The pattern from offset 0, long enough that a run of up to [`RUN`]
/// bytes starting at any phase is one slice of it.
static LAID_OUT: [u8; PERIOD + RUN] = {
    let mut t = [0u8; PERIOD + RUN];
    let mut i = 0;
    while i < t.len() {
        t[i] = (i % PERIOD) as u8;
        i += 1;
    }
    t
};

/// Fills `out` with the pattern's bytes from `offset` on (slices of a
/// table, not a division per byte).
pub fn fill_pattern(offset: u64, out: &mut [u8]) {
    let mut phase = (offset % PERIOD as u64) as usize;
    for run in out.chunks_mut(RUN) {
        run.copy_from_slice(&LAID_OUT[phase..phase + run.len()]);
        phase = (phase + run.len()) % PERIOD;
    }
}

/// Bytes of `data`, read from offset `offset` of a transfer, that are not
/// the pattern (compared a run at a time; counted byte by byte only in a
/// run that differs).
pub fn pattern_errors(offset: u64, data: &[u8]) -> u64 {
    let mut phase = (offset % PERIOD as u64) as usize;
    let mut errors = 0;
    for run in data.chunks(RUN) {
        let want = &LAID_OUT[phase..phase + run.len()];
        if run != want {
            errors += run.iter().zip(want).filter(|(a, b)| a != b).count() as u64;
        }
        phase = (phase + run.len()) % PERIOD;
    }
    errors
}

/// SplitMix64 of `seed` and `n`: well-spread numbers from a seed and a
/// count (initial sequence numbers, hosts' seeds).
pub fn mix(seed: u64, n: u64) -> u64 {
    let mut z = seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// How much a source sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amount {
    /// This many bytes, then it closes.
    Bytes(u64),
    /// As much as it can for this long after it starts, then it closes.
    For(Duration),
}

/// A bulk source: connects at `start` and sends.
#[derive(Clone, Debug)]
pub struct SourceSpec {
    /// Its name in reports.
    pub name: String,
    /// Where it connects to.
    pub remote: Endpoint,
    /// Its own port.
    pub local_port: u16,
    /// The connection's settings.
    pub cfg: Config,
    /// When it connects.
    pub start: Instant,
    /// How much it sends.
    pub amount: Amount,
    /// Data segments (numbered from 1 in sequence order, `smss` bytes
    /// each, within the first 2 GiB of the transfer) lost on their first
    /// transmission, before they reach the network: the forced drops of
    /// the classic single-window studies.
    pub drop_segments: Vec<u32>,
}

/// A sink: a port that accepts connections and reads them.
#[derive(Clone, Debug)]
pub struct SinkSpec {
    /// Its name in reports (each connection is named after it).
    pub name: String,
    /// The port it listens on.
    pub port: u16,
    /// Settings of the connections it accepts.
    pub cfg: Config,
    /// Check every byte against [`pattern`].
    pub check: bool,
}

/// Which side of a transfer a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// It sends.
    Source,
    /// It receives.
    Sink,
}

/// What a host counted, packets from its IP node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCounters {
    /// Packets the IP node handed up.
    pub packets_in: u64,
    /// Of those, given to a connection (a SYN that opened one included).
    pub to_connections: u64,
    /// Not TCP (ICMP, for example): dropped.
    pub not_tcp: u64,
    /// Not a valid segment (bad checksum, truncated, bad options): dropped.
    pub bad_segment: u64,
    /// For no connection and no listener: dropped, answered with a RST
    /// (unless itself a RST); or not addressed to this host: dropped.
    pub no_connection: u64,
    /// A SYN for a listener that had no room for another connection:
    /// dropped, answered with a RST.
    pub no_room: u64,
    /// Packets the connections sent (and RSTs), handed to the IP node.
    pub packets_out: u64,
    /// Segments the sources' drop scripts took before the network.
    pub scripted_drops: u64,
    /// Closed connections forgotten to make room.
    pub forgotten: u64,
}

impl HostCounters {
    /// The drops with their names, for reports.
    pub fn drops(&self) -> [(&'static str, u64); 4] {
        [
            ("not_tcp", self.not_tcp),
            ("bad_segment", self.bad_segment),
            ("no_connection", self.no_connection),
            ("no_room", self.no_room),
        ]
    }

    /// Whether every packet handed up is accounted for.
    pub fn balanced(&self) -> bool {
        self.packets_in == self.to_connections + self.drops().iter().map(|(_, n)| n).sum::<u64>()
    }
}

/// One connection and its application.
pub struct Flow {
    name: String,
    role: Role,
    conn: Option<Connection>,
    /// A source not yet started: its spec.
    pending: Option<SourceSpec>,
    amount: Amount,
    check: bool,
    /// Bytes written (source) or read (sink).
    app_bytes: u64,
    /// Bytes read that differ from the pattern.
    pattern_errors: u64,
    started: Option<Instant>,
    /// Source: everything written was ACKed and its FIN too; sink: the
    /// peer's FIN arrived after all its data.
    done: Option<Instant>,
    drop_segments: Vec<u32>,
    dropped_once: Vec<u32>,
    scripted_drops: u64,
    iss: Seq,
}

impl Flow {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which side it is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The connection, once opened.
    pub fn connection(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// The initial sequence number this side chose (where its trace's
    /// sequence numbers start).
    pub fn iss(&self) -> Seq {
        self.iss
    }

    /// Bytes the application wrote (source) or read (sink).
    pub fn app_bytes(&self) -> u64 {
        self.app_bytes
    }

    /// Bytes read that were not the pattern.
    pub fn pattern_errors(&self) -> u64 {
        self.pattern_errors
    }

    /// When it connected (or was accepted).
    pub fn started(&self) -> Option<Instant> {
        self.started
    }

    /// When its transfer ended: a source's last byte and FIN ACKed, a
    /// sink's peer FIN in after every byte.
    pub fn done(&self) -> Option<Instant> {
        self.done
    }

    /// Segments its drop script took.
    pub fn scripted_drops(&self) -> u64 {
        self.scripted_drops
    }

    fn key(&self) -> Option<(Ipv4Addr, u16, u16)> {
        let c = self.conn.as_ref()?;
        (c.state() != State::Closed).then(|| (c.remote().addr, c.remote().port, c.local().port))
    }
}

/// An IP host on ATM ports whose local side is TCP sources and sinks.
pub struct TcpHost {
    ip: IpNode,
    addr: Ipv4Addr,
    flows: Vec<Flow>,
    sinks: Vec<SinkSpec>,
    counters: HostCounters,
    /// Seeds initial sequence numbers.
    seed: u64,
    opened: u64,
    /// Packets handed up, waiting to be processed.
    inbox: Vec<aurora_ip::node::HostPacket>,
    reply: Vec<u8>,
    /// A source's next bytes, on their way into its connection.
    chunk: Vec<u8>,
}

impl TcpHost {
    /// A host on `ip`, its address that of `ip`'s first interface;
    /// `seed` makes its initial sequence numbers.
    ///
    /// # Panics
    /// If `ip` has no interface with an address.
    pub fn new(ip: IpNode, seed: u64) -> Self {
        let addr = ip
            .config()
            .interfaces
            .iter()
            .flatten()
            .next()
            .map(|i| i.addr)
            .expect("a TCP host needs an IP address");
        TcpHost {
            ip,
            addr,
            flows: Vec::new(),
            sinks: Vec::new(),
            counters: HostCounters::default(),
            seed,
            opened: 0,
            inbox: Vec::new(),
            reply: Vec::new(),
            chunk: Vec::new(),
        }
    }

    /// Replaces the seed of its initial sequence numbers (before it
    /// opens any connection: a driver seeds it from the run's seed).
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }

    /// Its address.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// The IP node underneath.
    pub fn ip(&self) -> &IpNode {
        &self.ip
    }

    /// Adds a source; it connects at its start time.
    pub fn add_source(&mut self, spec: SourceSpec) {
        self.flows.push(Flow {
            name: spec.name.clone(),
            role: Role::Source,
            conn: None,
            amount: spec.amount,
            check: false,
            app_bytes: 0,
            pattern_errors: 0,
            started: None,
            done: None,
            drop_segments: spec.drop_segments.clone(),
            dropped_once: Vec::new(),
            scripted_drops: 0,
            iss: Seq(0),
            pending: Some(spec),
        });
    }

    /// Adds a sink listening on its port.
    pub fn add_sink(&mut self, spec: SinkSpec) {
        self.sinks.push(spec);
    }

    /// Every connection, sources in the order added, then accepted ones in
    /// the order they arrived.
    pub fn flows(&self) -> &[Flow] {
        &self.flows
    }

    /// What it counted.
    pub fn counters(&self) -> HostCounters {
        self.counters
    }

    fn next_iss(&mut self) -> Seq {
        // Deterministic per run: the seed mixed with a count.
        self.opened += 1;
        Seq(mix(self.seed, self.opened) as u32)
    }

    /// Room for one more connection: forgets the oldest closed one if the
    /// table is full; false if every connection is live.
    fn make_room(&mut self) -> bool {
        if self.flows.len() < MAX_CONNECTIONS {
            return true;
        }
        let closed = self.flows.iter().position(|f| {
            f.pending.is_none() && f.conn.as_ref().is_none_or(|c| c.state() == State::Closed)
        });
        match closed {
            Some(i) => {
                self.flows.remove(i);
                self.counters.forgotten += 1;
                true
            }
            None => false,
        }
    }

    /// Takes what the IP node handed up, and gives each packet to its
    /// connection.
    fn take_packets(&mut self, now: Instant, out: &mut Outbox) {
        // Read where they were reassembled, then their buffers go back.
        let mut inbox = std::mem::take(&mut self.inbox);
        self.ip.take_to_host(&mut inbox);
        for pkt in inbox.drain(..) {
            self.packet(now, pkt.bytes(), out);
            self.ip.give_back(pkt);
        }
        self.inbox = inbox;
    }

    fn packet(&mut self, now: Instant, pkt: &[u8], out: &mut Outbox) {
        self.counters.packets_in += 1;
        let p = match seg::parse(pkt) {
            Ok(p) => p,
            Err(SegError::NotTcp) => {
                self.counters.not_tcp += 1;
                return;
            }
            Err(_) => {
                self.counters.bad_segment += 1;
                return;
            }
        };
        if p.dst != self.addr {
            self.counters.no_connection += 1;
            return;
        }
        let key = (p.src, p.repr.src_port, p.repr.dst_port);
        if let Some(i) = self.flows.iter().position(|f| f.key() == Some(key)) {
            self.counters.to_connections += 1;
            if let Some(c) = self.flows[i].conn.as_mut() {
                c.process(now, &p);
            }
            self.step(i, now, out);
            return;
        }
        let r = &p.repr;
        let sink = self.sinks.iter().position(|s| s.port == r.dst_port);
        let is_syn = r.flags.syn && !r.flags.ack && !r.flags.rst;
        match sink {
            Some(s) if is_syn => {
                if !self.make_room() {
                    self.counters.no_room += 1;
                    self.reset(now, &p, out);
                    return;
                }
                self.counters.to_connections += 1;
                let spec = self.sinks[s].clone();
                let iss = self.next_iss();
                let conn = Connection::accept(spec.cfg.clone(), &p, iss, now);
                self.flows.push(Flow {
                    name: format!("{}<-{}:{}", spec.name, p.src, r.src_port),
                    role: Role::Sink,
                    conn: Some(conn),
                    pending: None,
                    amount: Amount::Bytes(0),
                    check: spec.check,
                    app_bytes: 0,
                    pattern_errors: 0,
                    started: Some(now),
                    done: None,
                    drop_segments: Vec::new(),
                    dropped_once: Vec::new(),
                    scripted_drops: 0,
                    iss,
                });
                let i = self.flows.len() - 1;
                self.step(i, now, out);
            }
            _ => {
                self.counters.no_connection += 1;
                self.reset(now, &p, out);
            }
        }
    }

    fn reset(&mut self, now: Instant, p: &seg::Parsed<'_>, out: &mut Outbox) {
        let mut reply = std::mem::take(&mut self.reply);
        if reset_reply(p, &mut reply) {
            self.counters.packets_out += 1;
            self.ip.host_sent(now, &reply, out);
        }
        self.reply = reply;
    }

    /// Starts sources that are due.
    fn start_due(&mut self, now: Instant, out: &mut Outbox) {
        for i in 0..self.flows.len() {
            let due = self.flows[i]
                .pending
                .as_ref()
                .is_some_and(|s| s.start <= now);
            if !due {
                continue;
            }
            let spec = self.flows[i].pending.take().expect("pending");
            let iss = self.next_iss();
            let local = Endpoint {
                addr: self.addr,
                port: spec.local_port,
            };
            let f = &mut self.flows[i];
            f.iss = iss;
            f.started = Some(now);
            f.conn = Some(Connection::connect(spec.cfg, local, spec.remote, iss, now));
            self.step(i, now, out);
        }
    }

    /// Flow `i`'s application, then its connection's output.
    fn step(&mut self, i: usize, now: Instant, out: &mut Outbox) {
        let f = &mut self.flows[i];
        let Some(c) = f.conn.as_mut() else { return };
        match f.role {
            Role::Source => {
                let more = match f.amount {
                    Amount::Bytes(n) => f.app_bytes < n,
                    Amount::For(d) => f.started.is_some_and(|s| now < s + d),
                };
                if more {
                    let limit = match f.amount {
                        Amount::Bytes(n) => n - f.app_bytes,
                        Amount::For(_) => u64::MAX,
                    };
                    let room = (c.send_space() as u64).min(limit).min(256 * 1024) as usize;
                    if room > 0 {
                        self.chunk.resize(room, 0);
                        fill_pattern(f.app_bytes, &mut self.chunk);
                        f.app_bytes += c.send(&self.chunk) as u64;
                    }
                }
                let finished = match f.amount {
                    Amount::Bytes(n) => f.app_bytes >= n,
                    Amount::For(d) => f.started.is_some_and(|s| now >= s + d),
                };
                if finished {
                    c.close();
                }
                // Done: everything ACKed and the FIN too; a connection that
                // was reset or timed out is not.
                let fin_acked = matches!(c.state(), State::FinWait2 | State::TimeWait)
                    || c.close_reason() == Some(crate::conn::CloseReason::Done);
                if f.done.is_none() && finished && c.unacked_len() == 0 && fin_acked {
                    f.done = Some(now);
                }
            }
            Role::Sink => {
                let (check, base) = (f.check, f.app_bytes);
                let mut errors = 0;
                let mut k = base;
                let n = c.recv(&mut |d| {
                    if check {
                        errors += pattern_errors(k, d);
                        k += d.len() as u64;
                    }
                });
                f.app_bytes += n as u64;
                f.pattern_errors += errors;
                if c.peer_closed() {
                    f.done.get_or_insert(now);
                    if c.state() == State::CloseWait {
                        c.close();
                    }
                }
            }
        }
        // Output, through the drop script if the flow has one.
        let ip = &mut self.ip;
        let counters = &mut self.counters;
        let (drops, once, scripted, smss, iss) = (
            &f.drop_segments,
            &mut f.dropped_once,
            &mut f.scripted_drops,
            c.smss(),
            f.iss,
        );
        c.poll(now, &mut |pkt| {
            if !drops.is_empty() {
                if let Ok(s) = seg::parse(pkt) {
                    if !s.payload.is_empty() {
                        let n = s.repr.seq.since(iss + 1) / smss.max(1) + 1;
                        if drops.contains(&n) && !once.contains(&n) {
                            once.push(n);
                            *scripted += 1;
                            counters.scripted_drops += 1;
                            return;
                        }
                    }
                }
            }
            counters.packets_out += 1;
            ip.host_sent(now, pkt, out);
        });
    }

    /// Runs every flow's application and output.
    fn step_all(&mut self, now: Instant, out: &mut Outbox) {
        for i in 0..self.flows.len() {
            self.step(i, now, out);
        }
    }
}

impl Node for TcpHost {
    fn ports(&self) -> usize {
        self.ip.ports()
    }

    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        self.ip.receive(now, port, cells, out);
        if self.ip.to_host_len() > 0 {
            self.take_packets(now, out);
        }
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        self.ip.poll(now, out);
        self.take_packets(now, out);
        self.start_due(now, out);
        self.step_all(now, out);
    }

    fn poll_at(&self) -> Option<Instant> {
        let flows = self
            .flows
            .iter()
            .filter_map(|f| match (&f.conn, &f.pending) {
                (Some(c), _) => c.poll_at(),
                (None, Some(s)) => Some(s.start),
                _ => None,
            });
        flows.chain(self.ip.poll_at()).min()
    }

    fn inner(&self) -> Option<&dyn std::any::Any> {
        Some(&self.ip)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(&mut self.ip)
    }
}
