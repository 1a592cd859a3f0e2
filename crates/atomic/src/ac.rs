//! The Address Consultant: maps the network, hands out routes, and maps
//! again from time to time.
//!
//! **Loop mapping** (symmetric, consistent networks): breadth first from
//! the AC's own node. For each known node n (walk P from the AC) and each
//! direction d whose channel is not yet known, one probe goes out along
//! P, one hop d, one hop back, and back along P, with a pair ending at
//! every hop; every node where a pair ends appends its identifier, so a
//! returning probe names the node found at P + d. A known identifier is a
//! channel to a known node; a new one is a new node, probed from in the
//! next round. A probe that does not come back within the timeout means no
//! channel there. Each channel is probed at most once from each end, so a
//! mesh costs fewer than four probes per node.
//!
//! **Flood mapping** (any strongly connected network): one explore message
//! from the AC's node spreads over every channel; each node notes every
//! channel it arrives by and the walk it first came along, and floods one
//! report back; the AC gets each report with the walk it took, which is
//! the node's way back to the AC. Non-symmetric and non-consistent
//! networks are mapped this way; it costs messages in the network (every
//! node forwards every report once), not probes from the AC.
//!
//! After either, each node is asked whether a host is attached (the query
//! carries the way back), hosts answer with their addresses, and every
//! host is told the way to the AC. A map that differs from the last one
//! gets a new epoch; hosts drop routes of older epochs.
//!
//! **A map that shrinks is checked before it is believed.** A probe or
//! query that comes back after its deadline (a busy machine running the
//! network in real time, a congested channel) looks exactly like a
//! missing channel or host. So a mapping that misses any channel or host
//! of the current map is *doubted*: the map in use stays, and the AC maps
//! again after a pause as long as the doubted mapping took, with its
//! timeouts doubled for each doubt in a row. Only when
//! [`AcConfig::rechecks`] mappings in a row agree that something is gone
//! does the smaller map get an epoch. Answers that come after their
//! deadline are counted ([`Ac::late_answers`]) and teach the AC how long
//! a hop takes, so the recheck waits long enough. A map that only grows is
//! believed at once.
//!
//! Routes are shortest walks on the map. A request declaring a bandwidth
//! gets a walk that avoids channels already carrying declared flows if one
//! exists, and its channels are then counted as carrying it.

use std::net::Ipv4Addr;

use aurora_net::Outbox;
use aurora_time::{Duration, Instant};
use rustc_hash::FxHashMap;

use crate::map::{Channel, HostEntry, Map};
use crate::wire::{Dir, Hop, Msg, Route};

/// How an AC maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Loop probes (symmetric, consistent networks).
    Loops,
    /// Flooding (any network).
    Flood,
}

/// An AC's settings.
#[derive(Clone, Copy, Debug)]
pub struct AcConfig {
    /// How it maps.
    pub method: Method,
    /// How long a round of probes (or host queries) may take.
    pub probe_timeout: Duration,
    /// How long a flood may take to come back.
    pub flood_timeout: Duration,
    /// Time from one mapping to the next.
    pub remap: Duration,
    /// How many further mappings must also miss a channel or host of the
    /// map in use before the AC believes it gone (0: believe at once).
    pub rechecks: u32,
}

impl Default for AcConfig {
    fn default() -> Self {
        AcConfig {
            method: Method::Loops,
            probe_timeout: Duration::from_millis(2),
            flood_timeout: Duration::from_millis(20),
            remap: Duration::from_millis(500),
            rechecks: 1,
        }
    }
}

/// Figures of one mapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapStats {
    /// When it began.
    pub started: Instant,
    /// When the map was complete.
    pub finished: Instant,
    /// Mosaic nodes found.
    pub nodes: usize,
    /// Channels found.
    pub channels: usize,
    /// Hosts found.
    pub hosts: usize,
    /// Messages the AC sent to map (probes, explore, host queries).
    pub probes: u64,
    /// The epoch the map got (for a doubted mapping, the epoch of the map
    /// kept in use).
    pub epoch: u32,
    /// It missed something of the map in use and was not believed (yet).
    pub doubted: bool,
}

#[derive(Debug)]
enum Phase {
    Idle,
    /// Waiting for the AC's own node to name itself.
    Own {
        deadline: Instant,
    },
    /// Waiting for a round of loop probes.
    Loops {
        deadline: Instant,
        outstanding: FxHashMap<u32, (usize, Dir)>,
        next: Vec<usize>,
    },
    /// Waiting for a flood's reports.
    Flood {
        deadline: Instant,
    },
    /// Waiting for hosts to answer.
    Hosts {
        deadline: Instant,
        outstanding: FxHashMap<u32, usize>,
        /// How long to wait after an answer for the next.
        quiet: Duration,
    },
}

#[derive(Debug)]
struct Reservation {
    channels: Vec<(u64, Dir)>,
}

/// The AC.
#[derive(Debug)]
pub struct Ac {
    id: u64,
    addr: Ipv4Addr,
    host: u64,
    cfg: AcConfig,
    phase: Phase,
    building: Map,
    map: Map,
    epoch: u32,
    seq: u32,
    floods: u32,
    flood: u64,
    next_map: Instant,
    current: MapStats,
    history: Vec<MapStats>,
    reservations: Vec<Reservation>,
    /// Nodes a flood reported a host on, to ask.
    flood_hosts: Vec<usize>,
    /// When the current round's probes left, and the longest round trip
    /// per hop seen so far (rounds wait in proportion to their paths).
    round_sent: Instant,
    hop_time: Duration,
    /// Mappings in a row that missed part of the map in use.
    doubts: u32,
    /// Probes and queries of this and the last mapping that missed their
    /// deadline: when each left and how many channels its trip crosses.
    unanswered: FxHashMap<u32, (Instant, usize)>,
    /// Answers that came after their deadline.
    pub late_answers: u64,
    /// Probes and queries past their deadline not remembered (the record
    /// was full), so an answer to them would not be known as late.
    pub unanswered_full: u64,
    /// Routes handed out.
    pub routes_given: u64,
    /// Requests for unknown addresses or without a path.
    pub routes_refused: u64,
    /// Mapping messages ignored because the map was full.
    pub map_full: u64,
}

/// Most mappings remembered.
pub const HISTORY: usize = 64;
/// Most bandwidth reservations held.
pub const MAX_RESERVATIONS: usize = 4096;
/// Most probes and queries remembered after their deadline.
pub const MAX_UNANSWERED: usize = 1 << 16;
/// Most nodes a map holds: reports naming more (a hostile or broken
/// network) are ignored and counted.
pub const MAX_MAP_NODES: usize = 1 << 16;

impl Ac {
    /// An AC with identifier `id` on the host `host` at `addr`, mapping
    /// first at `now`.
    pub fn new(id: u64, addr: Ipv4Addr, host: u64, cfg: AcConfig, now: Instant) -> Self {
        Ac {
            id,
            addr,
            host,
            cfg,
            phase: Phase::Idle,
            building: Map::new(),
            map: Map::new(),
            epoch: 0,
            seq: 0,
            floods: 0,
            flood: 0,
            next_map: now,
            current: MapStats::default(),
            history: Vec::new(),
            reservations: Vec::new(),
            flood_hosts: Vec::new(),
            round_sent: now,
            hop_time: Duration::ZERO,
            doubts: 0,
            unanswered: FxHashMap::default(),
            late_answers: 0,
            unanswered_full: 0,
            routes_given: 0,
            routes_refused: 0,
            map_full: 0,
        }
    }

    /// Its identifier.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The last complete map.
    pub fn map(&self) -> &Map {
        &self.map
    }

    /// Its epoch (0 before the first map).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Figures of every mapping so far (the last [`HISTORY`]).
    pub fn history(&self) -> &[MapStats] {
        &self.history
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn send(&mut self, route: &Route, m: &Msg, out: &mut Outbox<Vec<u8>>) {
        out.push(0, m.packet(route));
    }

    /// When the AC next needs to run.
    pub fn poll_at(&self) -> Option<Instant> {
        Some(match &self.phase {
            Phase::Idle => self.next_map,
            Phase::Own { deadline }
            | Phase::Loops { deadline, .. }
            | Phase::Flood { deadline }
            | Phase::Hosts { deadline, .. } => *deadline,
        })
    }

    /// Time-driven work: starting a mapping, ending a round.
    pub fn poll(&mut self, now: Instant, out: &mut Outbox<Vec<u8>>) {
        match &self.phase {
            Phase::Idle if now >= self.next_map => self.start(now, out),
            Phase::Own { deadline } if now >= *deadline => {
                // Not even our own node answered: the interface is dead.
                self.finish(now, out);
            }
            Phase::Loops { deadline, .. } if now >= *deadline => self.round_over(now, out),
            Phase::Flood { deadline } if now >= *deadline => self.ask_hosts(now, out),
            Phase::Hosts { deadline, .. } if now >= *deadline => self.finish(now, out),
            _ => {}
        }
    }

    fn start(&mut self, now: Instant, out: &mut Outbox<Vec<u8>>) {
        self.building = Map::new();
        // Late answers are awaited from this mapping and the one before.
        let since = self.current.started;
        self.unanswered.retain(|_, (sent, _)| *sent >= since);
        self.current = MapStats {
            started: now,
            ..MapStats::default()
        };
        match self.cfg.method {
            Method::Loops => {
                // Our own node first: a probe with an empty route loops
                // back through it.
                let seq = self.next_seq();
                let m = Msg::Probe {
                    ac: self.id,
                    seq,
                    hops: Vec::new(),
                };
                self.current.probes += 1;
                self.send(&Route::default(), &m, out);
                self.phase = Phase::Own {
                    deadline: now + self.slack(self.cfg.probe_timeout),
                };
            }
            Method::Flood => {
                self.floods = self.floods.wrapping_add(1);
                self.flood = self.id.rotate_left(17) ^ u64::from(self.floods);
                let m = Msg::Explore {
                    flood: self.flood,
                    hops: Vec::new(),
                };
                self.current.probes += 1;
                self.send(&Route::default(), &m, out);
                self.phase = Phase::Flood {
                    deadline: now + self.slack(self.cfg.flood_timeout),
                };
            }
        }
    }

    /// Sends the probes for every unknown channel of `nodes`.
    fn probe_round(&mut self, now: Instant, nodes: Vec<usize>, out: &mut Outbox<Vec<u8>>) {
        let mut outstanding = FxHashMap::default();
        let mut longest = 0usize;
        for n in nodes {
            for d in Dir::ALL {
                if self.building.nodes[n].out[d as usize] != Channel::Unknown {
                    continue;
                }
                let path = self.building.nodes[n].path.clone();
                let mut steps = path.clone();
                steps.push(d);
                steps.push(d.opposite());
                steps.extend(path.iter().rev().map(|s| s.opposite()));
                let seq = self.next_seq();
                outstanding.insert(seq, (n, d));
                longest = longest.max(steps.len());
                let m = Msg::Probe {
                    ac: self.id,
                    seq,
                    hops: Vec::new(),
                };
                self.current.probes += 1;
                self.send(&Route::one_pair_per_step(&steps), &m, out);
            }
        }
        if outstanding.is_empty() {
            self.ask_hosts(now, out);
            return;
        }
        // Absent channels never answer, so every round with one waits its
        // deadline: the timeout, plus twice the slowest round trip per hop
        // seen so far for each hop of the longest probe.
        self.round_sent = now;
        let wait = self.wait_for(longest);
        self.phase = Phase::Loops {
            deadline: now + self.slack(self.cfg.probe_timeout) + wait,
            outstanding,
            next: Vec::new(),
        };
    }

    /// A round ended (all back, or time up): unanswered channels are
    /// absent; new nodes are probed from next.
    fn round_over(&mut self, now: Instant, out: &mut Outbox<Vec<u8>>) {
        let Phase::Loops {
            outstanding, next, ..
        } = std::mem::replace(&mut self.phase, Phase::Idle)
        else {
            return;
        };
        for (seq, (n, d)) in outstanding {
            if self.building.nodes[n].out[d as usize] == Channel::Unknown {
                self.building.nodes[n].out[d as usize] = Channel::Absent;
            }
            let hops = 2 * self.building.nodes[n].path.len() + 2;
            self.note_unanswered(seq, self.round_sent, hops);
        }
        self.probe_round(now, next, out);
    }

    fn probe_back(&mut self, now: Instant, seq: u32, hops: Vec<Hop>, out: &mut Outbox<Vec<u8>>) {
        if self.late_answer(now, seq) {
            return;
        }
        let round_done = match &mut self.phase {
            Phase::Own { .. } => {
                // The loopback probe: our node named itself.
                let Some(me) = hops.last() else { return };
                let (root, _) = self.building.add(me.node, Vec::new(), Some(Vec::new()));
                self.building.nodes[root].host = Some(HostEntry {
                    addr: self.addr,
                    host: self.host,
                });
                self.probe_round(now, vec![root], out);
                return;
            }
            Phase::Loops {
                outstanding, next, ..
            } => {
                let Some((n, d)) = outstanding.remove(&seq) else {
                    return;
                };
                let at = self.building.nodes[n].path.len();
                let hops_taken = (2 * at + 2) as i64;
                let per_hop = Duration::from_nanos((now - self.round_sent).as_nanos() / hops_taken);
                if per_hop > self.hop_time {
                    self.hop_time = per_hop;
                }
                // The node one hop on, then n again: anything else is a
                // network this method cannot map (the channel counts as
                // absent).
                if self.building.nodes.len() >= MAX_MAP_NODES {
                    self.map_full += 1;
                } else if let (Some(found), Some(again)) = (hops.get(at), hops.get(at + 1)) {
                    if again.node == self.building.nodes[n].id {
                        let mut path = self.building.nodes[n].path.clone();
                        path.push(d);
                        let back: Vec<Dir> = path.iter().rev().map(|s| s.opposite()).collect();
                        let (c, new) = self.building.add(found.node, path, Some(back));
                        self.building.nodes[n].out[d as usize] = Channel::To(c);
                        // The probe came back through c's opposite channel.
                        self.building.nodes[c].out[d.opposite() as usize] = Channel::To(n);
                        if new {
                            next.push(c);
                        }
                    }
                }
                outstanding.is_empty()
            }
            _ => false,
        };
        if round_done {
            self.round_over(now, out);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &mut self,
        now: Instant,
        flood: u64,
        origin: u64,
        host: bool,
        edges: &[crate::wire::InEdge],
        path: &[Hop],
        back: &[Hop],
    ) {
        let Phase::Flood { deadline } = &mut self.phase else {
            return;
        };
        if flood != self.flood {
            return;
        }
        // Wait while reports keep coming: until a quiet spell as long as the
        // flood timeout has passed since the last one.
        *deadline = (*deadline).max(now + self.cfg.flood_timeout);
        let hops = (path.len() + back.len()).max(1) as i64;
        let per_hop = Duration::from_nanos((now - self.current.started).as_nanos() / hops);
        if per_hop > self.hop_time {
            self.hop_time = per_hop;
        }
        let fresh = 1 + edges
            .iter()
            .filter(|e| self.building.find(e.from.node).is_none())
            .count();
        if self.building.find(origin).is_none() && self.building.nodes.len() + fresh > MAX_MAP_NODES
        {
            self.map_full += 1;
            return;
        }
        let steps: Vec<Dir> = path.iter().filter_map(|h| Dir::from_port(h.port)).collect();
        let back: Vec<Dir> = back.iter().filter_map(|h| Dir::from_port(h.port)).collect();
        let (x, _) = self.building.add(origin, steps.clone(), None);
        {
            let n = &mut self.building.nodes[x];
            // The first report copy to arrive came the shortest way.
            if n.back.is_none() {
                n.path = steps;
                n.back = Some(back);
            }
            if host && path.is_empty() {
                // The AC's own node.
                n.host = Some(HostEntry {
                    addr: self.addr,
                    host: self.host,
                });
            }
        }
        for e in edges {
            let (from, _) = self.building.add(e.from.node, Vec::new(), None);
            if let Some(d) = Dir::from_port(e.from.port) {
                self.building.nodes[from].out[d as usize] = Channel::To(x);
            }
        }
        if host && !path.is_empty() && !self.flood_hosts.contains(&x) {
            self.flood_hosts.push(x);
        }
    }

    /// How much longer than the timeout to wait for messages that cross
    /// `hops` channels.
    fn wait_for(&self, hops: usize) -> Duration {
        self.slack(Duration::from_nanos(
            self.hop_time.as_nanos().saturating_mul(2 * hops as i64),
        ))
    }

    /// `t` doubled for each doubted mapping in a row (at most 16 times).
    fn slack(&self, t: Duration) -> Duration {
        Duration::from_nanos(t.as_nanos().saturating_mul(1 << self.doubts.min(4)))
    }

    /// Remembers a probe or query (sent at `sent`, crossing `hops`
    /// channels) that missed its deadline, in case it comes after all.
    fn note_unanswered(&mut self, seq: u32, sent: Instant, hops: usize) {
        if self.unanswered.len() < MAX_UNANSWERED {
            self.unanswered.insert(seq, (sent, hops));
        } else {
            self.unanswered_full += 1;
        }
    }

    /// An answer to a probe or query whose deadline has passed: counted,
    /// and its trip raises the time allowed per hop. True if it was one.
    fn late_answer(&mut self, now: Instant, seq: u32) -> bool {
        let Some((sent, hops)) = self.unanswered.remove(&seq) else {
            return false;
        };
        self.late_answers += 1;
        // Learnt, but within reason: an answer held back for long (a
        // stalled machine, or a node doing it on purpose) must not stretch
        // every later round for good. A whole trip may take at most a
        // tenth of the time between mappings.
        let cap = self.cfg.remap.as_nanos() / 10 / hops.max(1) as i64;
        let per_hop = ((now - sent).as_nanos() / hops.max(1) as i64).min(cap);
        self.hop_time = self.hop_time.max(Duration::from_nanos(per_hop));
        true
    }

    /// Asks every node found whether a host is attached.
    fn ask_hosts(&mut self, now: Instant, out: &mut Outbox<Vec<u8>>) {
        let mut longest = 0usize;
        // Nodes only ever named as a channel's source (a flood edge from a
        // node whose report never came) are not mapped.
        let keep: Vec<bool> = self
            .building
            .nodes
            .iter()
            .map(|n| n.back.is_some())
            .collect();
        let mut outstanding = FxHashMap::default();
        for (i, n) in self.building.nodes.iter().enumerate() {
            if !keep[i] || n.host.is_some() {
                continue;
            }
            if self.cfg.method == Method::Flood && !self.flood_hosts.contains(&i) {
                continue;
            }
            let Some(back) = n.back.clone() else { continue };
            let seq = self.seq.wrapping_add(1);
            self.seq = seq;
            outstanding.insert(seq, i);
            let m = Msg::HostQuery {
                ac: self.id,
                seq,
                back: Route::from_steps(&back),
            };
            longest = longest.max(n.path.len() + back.len());
            let route = Route::from_steps(&n.path);
            out.push(0, m.packet(&route));
            self.current.probes += 1;
        }
        self.flood_hosts.clear();
        if outstanding.is_empty() {
            self.finish(now, out);
            return;
        }
        // Queries and answers also queue behind each other near the AC.
        let queueing = Duration::from_micros(50 * outstanding.len() as i64);
        let quiet = self.slack(self.cfg.probe_timeout) + self.wait_for(longest);
        self.round_sent = now;
        self.phase = Phase::Hosts {
            deadline: now + quiet + queueing,
            outstanding,
            quiet,
        };
    }

    fn host_info(
        &mut self,
        now: Instant,
        seq: u32,
        addr: [u8; 4],
        host: u64,
        out: &mut Outbox<Vec<u8>>,
    ) {
        if self.late_answer(now, seq) {
            return;
        }
        let Phase::Hosts {
            outstanding,
            deadline,
            quiet,
        } = &mut self.phase
        else {
            return;
        };
        let Some(n) = outstanding.remove(&seq) else {
            return;
        };
        // While answers come, wait for the rest.
        *deadline = (*deadline).max(now + *quiet);
        let done = outstanding.is_empty();
        self.building.nodes[n].host = Some(HostEntry {
            addr: Ipv4Addr::from(addr),
            host,
        });
        if done {
            self.finish(now, out);
        }
    }

    /// The map is complete: keep it, give it an epoch if it changed, tell
    /// every host the way here.
    fn finish(&mut self, now: Instant, out: &mut Outbox<Vec<u8>>) {
        if let Phase::Hosts { outstanding, .. } = std::mem::replace(&mut self.phase, Phase::Idle) {
            for (seq, n) in outstanding {
                let b = &self.building.nodes[n];
                let hops = b.path.len() + b.back.as_ref().map_or(0, Vec::len);
                self.note_unanswered(seq, self.round_sent, hops);
            }
        }
        self.next_map = now + self.cfg.remap;
        // Drop nodes with no way back (flood edges from unmapped nodes).
        let mut map = Map::new();
        let keep: Vec<usize> = (0..self.building.nodes.len())
            .filter(|&i| self.building.nodes[i].back.is_some())
            .collect();
        for &i in &keep {
            let n = &self.building.nodes[i];
            let (j, _) = map.add(n.id, n.path.clone(), n.back.clone());
            map.nodes[j].host = n.host;
        }
        for &i in &keep {
            let n = self.building.nodes[i].clone();
            let j = map.find(n.id).expect("added");
            for d in Dir::ALL {
                map.nodes[j].out[d as usize] = match n.out[d as usize] {
                    Channel::To(k) => match map.find(self.building.nodes[k].id) {
                        Some(m) => Channel::To(m),
                        None => Channel::Absent,
                    },
                    other => other,
                };
            }
        }
        let (edges, hosts) = (map.edges(), map.hosts());
        let (old_edges, old_hosts) = (self.map.edges(), self.map.hosts());
        let changed = edges != old_edges || hosts != old_hosts;
        let lost = !old_edges.is_subset(&edges) || !old_hosts.is_subset(&hosts);
        self.current.finished = now;
        if self.epoch != 0 && lost && self.doubts < self.cfg.rechecks {
            // Maybe gone, maybe late: keep the map in use and look again
            // once late answers have had as long again to come.
            self.doubts += 1;
            self.current.nodes = map.nodes.len();
            self.current.channels = edges.len();
            self.current.hosts = hosts.len();
            self.current.epoch = self.epoch;
            self.current.doubted = true;
            self.remember();
            self.next_map = now + (now - self.current.started);
            return;
        }
        self.doubts = 0;
        if changed || self.epoch == 0 {
            self.epoch = self.epoch.wrapping_add(1);
            // Reservations were for the old map's channels.
            self.reservations.clear();
        }
        self.map = map;
        self.current.nodes = self.map.nodes.len();
        self.current.channels = edges.len();
        self.current.hosts = hosts.len();
        self.current.epoch = self.epoch;
        self.remember();
        self.announce(out);
    }

    /// Keeps the figures of the mapping just ended.
    fn remember(&mut self) {
        if self.history.len() >= HISTORY {
            self.history.remove(0);
        }
        self.history.push(self.current);
    }

    /// Tells every host the way to the AC.
    fn announce(&mut self, out: &mut Outbox<Vec<u8>>) {
        for i in 0..self.map.nodes.len() {
            let n = &self.map.nodes[i];
            let Some(h) = n.host else { continue };
            if h.host == self.host {
                continue;
            }
            let Some(back) = n.back.clone() else { continue };
            let m = Msg::Announce {
                ac: self.id,
                epoch: self.epoch,
                addr: self.addr.octets(),
                to_ac: Route::from_steps(&back),
            };
            let route = Route::from_steps(&n.path);
            out.push(0, m.packet(&route));
        }
    }

    /// A route from the host at `src` to the host at `dst`: the reply to
    /// send, and the walk (for the AC's own host).
    pub fn route(&mut self, src: Ipv4Addr, dst: Ipv4Addr, kbps: u32) -> (u8, Route) {
        let (Some(a), Some(b)) = (self.map.host_node(src), self.map.host_node(dst)) else {
            self.routes_refused += 1;
            return (1, Route::default());
        };
        let busy: Vec<(usize, Dir)> = self
            .reservations
            .iter()
            .flat_map(|r| r.channels.iter())
            .filter_map(|&(id, d)| self.map.find(id).map(|n| (n, d)))
            .collect();
        let walk = if kbps > 0 {
            self.map
                .walk(a, b, &|n, d| busy.contains(&(n, d)))
                .or_else(|| self.map.walk(a, b, &|_, _| false))
        } else {
            self.map.walk(a, b, &|_, _| false)
        };
        let Some(walk) = walk else {
            self.routes_refused += 1;
            return (2, Route::default());
        };
        if kbps > 0 && self.reservations.len() < MAX_RESERVATIONS {
            let mut at = a;
            let mut channels = Vec::new();
            for &d in &walk {
                channels.push((self.map.nodes[at].id, d));
                if let Channel::To(m) = self.map.nodes[at].out[d as usize] {
                    at = m;
                }
            }
            self.reservations.push(Reservation { channels });
        }
        self.routes_given += 1;
        (0, Route::from_steps(&walk))
    }

    /// A message for the AC arrived at its host.
    pub fn receive(&mut self, now: Instant, msg: Msg, out: &mut Outbox<Vec<u8>>) {
        match msg {
            Msg::Probe { ac, seq, hops } if ac == self.id => self.probe_back(now, seq, hops, out),
            Msg::HostInfo {
                ac,
                seq,
                addr,
                host,
            } if ac == self.id => self.host_info(now, seq, addr, host, out),
            Msg::Report {
                flood,
                origin,
                host,
                edges,
                path,
                back,
            } => self.report(now, flood, origin, host, &edges, &path, &back),
            Msg::RouteRequest {
                seq,
                src,
                dst,
                kbps,
            } => {
                let src = Ipv4Addr::from(src);
                let (status, route) = self.route(src, Ipv4Addr::from(dst), kbps);
                // Reply along the asker's way from here.
                if let Some(n) = self.map.host_node(src) {
                    let path = self.map.nodes[n].path.clone();
                    let m = Msg::RouteReply {
                        seq,
                        dst,
                        status,
                        epoch: self.epoch,
                        route,
                    };
                    out.push(0, m.packet(&Route::from_steps(&path)));
                }
            }
            _ => {}
        }
    }
}
