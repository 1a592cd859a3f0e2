//! The topology daemon: a host maps the VuNet around it with control cells
//! alone, keeps the map, and follows it as links go and come back;
//! sans-I/O.
//!
//! # What a probe is
//!
//! Every probe is an identify request ([`CMD_IDENT`]) tagged under the
//! daemon's own key, with a fresh sequence number, sent along a source
//! route ([`Route`]). Whatever relay it reaches with no hops left answers
//! with its id and the side it was asked on (both under the tag), and
//! changes nothing. A relay thus names itself without the daemon knowing
//! its id beforehand. A switch port with no relay behind it (empty, a
//! host, a port the switch lacks, or a relay that will not take the
//! daemon's key) stays silent: hosts hold only their own key, so an answer
//! from one could not be believed, and the map cannot say which it is.
//!
//! # One round
//!
//! Each period the daemon maps the network afresh, breadth first from its
//! home switch, one switch at a time:
//!
//! 1. **Home port.** Unless configured, the port of the home switch the
//!    host plugs into is found once with 16 loop probes: the request sent
//!    on routing bits `c` comes straight back to the host if `c` is its own
//!    port. (A relay the wrong ones reach answers into the switch and gets
//!    its own reply back, which it refuses as a replay: one count there.)
//! 2. **Ports of a switch.** One probe per port but the one leading back
//!    towards the host, passing the relays that reach the switch and
//!    returning the same way. An answer places side `s` of relay `id` on
//!    that port. If the relay's other side is not placed yet, the switch
//!    beyond it is a candidate, explored in turn.
//! 3. **Back port of a new switch.** The daemon does not know which port of
//!    the switch beyond relay `R` leads back into `R`. It sends 16 probes
//!    through `R`, each out of a port `c` of the new switch with the reply
//!    routed back on `c` too: only where `c` is `R`'s port does `R` itself
//!    answer, from its far side, so an answer naming `R` and that side
//!    settles the port (an answer from another relay is ignored; its reply
//!    wanders a bounded number of hops and is dropped where it ends). The
//!    switch's ports are then probed as in step 2.
//!
//! Switches have no ids: a switch is known by the relay sides plugged into
//! it, so a candidate whose relay side has meanwhile been found on a known
//! switch is that switch, not a new one. When nothing is left to explore
//! the round's map becomes the map.
//!
//! **Hysteresis.** A probe that the map says should be answered (a relay
//! was there last round) and is not within the timeout is asked again,
//! with twice the timeout, and an answer to either try counts; only if
//! both go unanswered is the relay missing from this round's map. One late
//! or lost answer therefore does not remove a link, and a removed one is
//! gone from the map after the first full round that follows (within two
//! periods, rounds being shorter than a period).
//!
//! # What the map holds, and what not
//!
//! Relays by id with the switch port each side plugs into, switches
//! (numbered in the order found, the home switch 0) with the port leading
//! back towards the host and the relay sides on their ports, and the
//! host's own port. Not: other hosts (they cannot answer; their ports look
//! like empty ones), relays without the daemon's key, switches joined
//! directly to switches (a VuNet switch clears the routing bits, so no
//! route can cross two of them), and anything more than
//! [`MAX_DEPTH`] relays away (a control cell's route holds 22 nibbles).
//!
//! # Bounds and untrusted input
//!
//! A round explores at most [`Config::max_switches`] switches and sends at
//! most [`Config::max_probes`] probes, rechecks included: a new switch's
//! two stages (16 probes at most each, each perhaps asked twice) start
//! only if all they could send fits, and what is left unexplored is
//! counted. The round's state
//! is bounded by the switches (16 ports each). Replies are believed only under the daemon's
//! key and for a probe still waiting; everything else is counted
//! ([`Counters`]) and ignored, and no input panics.
//!
//! # Keys
//!
//! Give the daemon a key id and a key of its own at every relay: relays
//! keep sequence numbers per key id, so its numbers do not interleave with
//! the connection library's, and replies are told apart by their tag.

use std::collections::{BTreeMap, VecDeque};

use aurora_net::vunet::{Control, Route, CMD_IDENT, CMD_REPLY, VCI_LINK_CONTROL};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, Header};
use aurora_wire::{CellBytes, HEADER_LEN};

use crate::conn::{reply_of, Hop, Path, MAX_RELAYS};
use crate::table::Link;

/// Most relays between the home switch and a switch the daemon explores:
/// a probe to it passes that many relays and its reply as many plus one
/// more nibble, 2 × 10 + 1 of a route's 22.
pub const MAX_DEPTH: usize = 10;

/// Ports a VuNet switch may have (four routing bits).
const PORTS: u8 = 16;

/// The most probe cells one stage may send: 16 probes, each perhaps
/// asked again.
const STAGE_MOST: u64 = 2 * PORTS as u64;

/// How the daemon runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The key id the daemon's requests name at every relay.
    pub key_id: u8,
    /// The key (the relays hold it under [`Config::key_id`]).
    pub key: Vec<u8>,
    /// The VPI control cells go on.
    pub vpi: u16,
    /// The home switch's port the host plugs into, if known; found with
    /// loop probes otherwise.
    pub home_port: Option<u8>,
    /// A round starts this long after the last one started (or at once if
    /// that one took longer).
    pub period: Duration,
    /// How long to wait for an answer (a recheck waits twice as long).
    pub timeout: Duration,
    /// Most switches a round explores, the home switch included.
    pub max_switches: usize,
    /// Most relays between the home switch and a switch explored (at most
    /// [`MAX_DEPTH`]).
    pub max_depth: usize,
    /// Most probe cells a round sends (at least 64: the home switch's two
    /// stages; a new switch is explored only if both of its fit).
    pub max_probes: u64,
    /// The first sequence number is one above this (choose it above any
    /// the key id used before).
    pub first_seq: u64,
}

impl Config {
    /// A daemon with key `key` under id `key_id`, a period of one second,
    /// a timeout of 10 ms, up to 64 switches at any depth control cells
    /// reach, and up to 4096 probes a round (64 switches at 32 each, and
    /// as many again for relays that lead to no switch).
    pub fn new(key_id: u8, key: Vec<u8>) -> Self {
        Config {
            key_id,
            key,
            vpi: 0,
            home_port: None,
            period: Duration::from_secs(1),
            timeout: Duration::from_millis(10),
            max_switches: 64,
            max_depth: MAX_DEPTH,
            max_probes: 4096,
            first_seq: 0,
        }
    }
}

/// What the daemon counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Rounds finished.
    pub rounds: u64,
    /// Rounds whose map differed from the one before.
    pub changes: u64,
    /// Probe cells sent (first tries and rechecks).
    pub sent: u64,
    /// Probes answered.
    pub answered: u64,
    /// Probes that ended unanswered (including the loop probes left once
    /// a switch's back port is found). Every probe ends answered or
    /// unanswered: `sent = answered + unanswered + rechecks` once a round
    /// is over.
    pub unanswered: u64,
    /// Probes asked again after a timeout (the map expected an answer).
    pub rechecks: u64,
    /// Replies under the key to a probe no longer waiting (late ones).
    pub late: u64,
    /// Replies whose tag is not the daemon's key (forged or corrupted).
    pub forged: u64,
    /// Replies under the key that make no sense (a side above 1, a
    /// sequence number never sent, a loop answered by the wrong relay).
    pub malformed: u64,
    /// Control cells that are not replies and not the daemon's own loop
    /// probes (another host's probes, say).
    pub foreign: u64,
    /// Answers that put a relay side where the round had already placed
    /// it elsewhere (ignored).
    pub conflicts: u64,
    /// Switches not explored: the round had [`Config::max_switches`] or
    /// had sent close to [`Config::max_probes`], or they lie deeper than
    /// [`Config::max_depth`].
    pub beyond_reach: u64,
}

/// Where a relay side plugs in: switch `switch` (an index into
/// [`Map::switches`]), port `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Plug {
    /// The switch.
    pub switch: usize,
    /// Its port.
    pub port: u8,
}

/// A switch of the map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapSwitch {
    /// The port leading back towards the host (the host's own port on the
    /// home switch).
    pub back_port: u8,
    /// Relay sides on its ports: port → (relay id, side).
    pub ports: BTreeMap<u8, (u16, u8)>,
}

/// The daemon's picture of the network (see the module docs for what it
/// can and cannot hold).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Map {
    /// The home switch's port the host plugs into, once known.
    pub home_port: Option<u8>,
    /// Switches in the order found, the home switch first.
    pub switches: Vec<MapSwitch>,
    /// Relays by id: where side 0 and side 1 plug in, if found.
    pub relays: BTreeMap<u16, [Option<Plug>; 2]>,
}

/// A destination: port `port` of the switch that side `side` of relay
/// `relay` plugs into (switches have no names of their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// A relay on the destination's switch.
    pub relay: u16,
    /// Its side plugged into that switch.
    pub side: u8,
    /// The destination's port on that switch.
    pub port: u8,
}

/// The VCI-table link of cells entering side `side` of relay `relay`: the
/// numbering [`Map::route_to`] gives its hops (every host sharing a table
/// must number links the same way).
pub fn relay_link(relay: u16, side: u8) -> Link {
    Link(u32::from(relay) * 2 + u32::from(side & 1))
}

impl Map {
    /// The switch side `side` of relay `relay` plugs into.
    pub fn switch_of(&self, relay: u16, side: u8) -> Option<usize> {
        let sides = self.relays.get(&relay)?;
        Some(sides.get(usize::from(side))?.as_ref()?.switch)
    }

    /// The path the connection library's [`crate::conn::Opener`] takes to
    /// `dest`: fewest relays from the home switch, ties broken by lower
    /// port numbers; `last_link` numbers the last segment, into the
    /// destination. `None` if the map has no way there, the home port is
    /// not known, the destination is on the home switch (a path crosses at
    /// least one relay), or it is more than [`MAX_RELAYS`] relays away.
    pub fn route_to(&self, dest: Place, last_link: Link) -> Option<Path> {
        let home_port = self.home_port?;
        let target = self.switch_of(dest.relay, dest.side)?;
        if dest.port >= PORTS || target == 0 || target >= self.switches.len() {
            return None;
        }
        // Breadth first over switches: how each was reached.
        let n = self.switches.len();
        let mut how: Vec<Option<Step>> = vec![None; n];
        let mut seen = vec![false; n];
        seen[0] = true;
        let mut queue = VecDeque::from([0usize]);
        while let Some(s) = queue.pop_front() {
            for (&port, &(relay, side)) in &self.switches[s].ports {
                let Some(far) = self
                    .relays
                    .get(&relay)
                    .and_then(|sides| sides[usize::from(1 - (side & 1))])
                else {
                    continue;
                };
                if far.switch < n && !seen[far.switch] {
                    seen[far.switch] = true;
                    how[far.switch] = Some(Step {
                        from: s,
                        port,
                        relay,
                        side: side & 1,
                        entered: far.port,
                    });
                    queue.push_back(far.switch);
                }
            }
        }
        let mut steps = Vec::new();
        let mut at = target;
        while at != 0 {
            let step = how[at]?;
            steps.push(step);
            at = step.from;
            if steps.len() > MAX_RELAYS {
                return None;
            }
        }
        steps.reverse();
        let hops = steps
            .iter()
            .enumerate()
            .map(|(k, step)| Hop {
                relay: step.relay,
                link: relay_link(step.relay, step.side),
                side: step.side,
                bits_on: steps.get(k + 1).map_or(dest.port, |next| next.port),
                bits_back: if k == 0 {
                    home_port
                } else {
                    steps[k - 1].entered
                },
            })
            .collect();
        Some(Path {
            first_bits: steps.first()?.port,
            hops,
            last_link,
        })
    }
}

/// One relay crossed on a way through the map.
#[derive(Clone, Copy, Debug)]
struct Step {
    /// The switch before the relay.
    from: usize,
    /// Its port to the relay.
    port: u8,
    /// The relay.
    relay: u16,
    /// The relay's side on that port.
    side: u8,
    /// The port of the switch after the relay that its far side plugs
    /// into.
    entered: u8,
}

/// A switch of the round in progress.
#[derive(Clone, Debug)]
struct Found {
    /// How it was reached: the switch before, its port, the relay there
    /// and the relay's side facing that switch.
    via: Option<(usize, u8, u16, u8)>,
    back_port: u8,
    ports: BTreeMap<u8, (u16, u8)>,
}

/// What the round is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Waiting for the next round.
    Idle,
    /// Finding the host's own port.
    Home,
    /// Finding the back port of the switch just added (the last found).
    Back,
    /// Probing the ports of this switch.
    Ports(usize),
}

/// One probe: a port asked, its tries' sequence numbers.
#[derive(Clone, Copy, Debug)]
struct Probe {
    port: u8,
    seqs: [u64; 2],
    tries: u8,
    deadline: Instant,
    /// The map says this should be answered: ask again before giving up.
    expected: bool,
    /// The answer: the relay id and side (for a home loop probe that came
    /// back, a marker of no meaning).
    answer: Option<(u16, u8)>,
    over: bool,
}

/// The topology daemon (see the module docs).
#[derive(Debug)]
pub struct Discover {
    cfg: Config,
    seq: u64,
    map: Map,
    counters: Counters,
    stage: Stage,
    next_round: Instant,
    round_started: Instant,
    home_port: Option<u8>,
    found: Vec<Found>,
    relays: BTreeMap<u16, [Option<Plug>; 2]>,
    /// Relay sides whose far side may lead to a new switch: (switch, port,
    /// relay, side facing that switch).
    queue: VecDeque<(usize, u8, u16, u8)>,
    probes: Vec<Probe>,
    /// Set when an answer finished the stage: poll at once.
    ready: Option<Instant>,
    /// Probe cells this round has sent.
    round_sent: u64,
}

impl Discover {
    /// A daemon whose first round starts at `now`. The depth is capped at
    /// [`MAX_DEPTH`] and the switches at 4096, at least 1.
    pub fn new(mut cfg: Config, now: Instant) -> Self {
        cfg.max_depth = cfg.max_depth.min(MAX_DEPTH);
        cfg.max_switches = cfg.max_switches.clamp(1, 4096);
        cfg.max_probes = cfg.max_probes.max(2 * STAGE_MOST);
        if cfg.home_port.is_some_and(|p| p >= PORTS) {
            cfg.home_port = None;
        }
        Discover {
            seq: cfg.first_seq,
            home_port: cfg.home_port,
            cfg,
            map: Map::default(),
            counters: Counters::default(),
            stage: Stage::Idle,
            next_round: now,
            round_started: now,
            found: Vec::new(),
            relays: BTreeMap::new(),
            queue: VecDeque::new(),
            probes: Vec::new(),
            ready: None,
            round_sent: 0,
        }
    }

    /// The map as of the last round finished.
    pub fn map(&self) -> &Map {
        &self.map
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The last sequence number used.
    pub fn last_seq(&self) -> u64 {
        self.seq
    }

    /// See [`Map::route_to`], on the current map.
    pub fn route_to(&self, dest: Place, last_link: Link) -> Option<Path> {
        self.map.route_to(dest, last_link)
    }

    /// When [`Discover::poll`] must run next.
    pub fn poll_at(&self) -> Option<Instant> {
        if let Some(t) = self.ready {
            return Some(t);
        }
        match self.stage {
            Stage::Idle => Some(self.next_round),
            _ => self
                .probes
                .iter()
                .filter(|p| !p.over)
                .map(|p| p.deadline)
                .min(),
        }
    }

    /// A cell arrived for the host at `now`: true if it was a control cell
    /// (taken or counted here), false if it is none of the daemon's
    /// business (not on the control VCI).
    pub fn handle(&mut self, now: Instant, cell: &CellBytes) -> bool {
        let h = Header::parse(&[cell[0], cell[1], cell[2], cell[3]], Format::Uni);
        if h.vci != VCI_LINK_CONTROL {
            return false;
        }
        let Ok(p) = <&[u8; 48]>::try_from(&cell[HEADER_LEN..]) else {
            return false;
        };
        if p[0] == CMD_REPLY {
            match reply_of(cell, Some(&self.cfg.key)) {
                Some(r) => self.on_reply(now, r),
                None => self.counters.forged += 1,
            }
        } else if p[0] == CMD_IDENT && Control::verify(p, &self.cfg.key) {
            // One of the daemon's own requests, come back round a loop.
            let c = Control::decode(p);
            self.on_loop(now, c);
        } else {
            self.counters.foreign += 1;
        }
        true
    }

    /// The probe waiting with sequence number `seq`, if any.
    fn waiting(&self, seq: u64) -> Option<usize> {
        self.probes
            .iter()
            .position(|p| !p.over && p.seqs[..usize::from(p.tries)].contains(&seq))
    }

    /// Counts a tagged cell that answers no waiting probe.
    fn unmatched(&mut self, seq: u64) {
        if seq > self.cfg.first_seq && seq <= self.seq {
            self.counters.late += 1;
        } else {
            self.counters.malformed += 1;
        }
    }

    fn on_loop(&mut self, now: Instant, c: Control) {
        if self.stage != Stage::Home || c.route.hops != 0 {
            self.unmatched(c.seq);
            return;
        }
        let Some(i) = self.waiting(c.seq) else {
            self.unmatched(c.seq);
            return;
        };
        self.home_port = Some(self.probes[i].port);
        self.settle(i, Some((0, 0)));
        self.finish_stage(now);
    }

    fn on_reply(&mut self, now: Instant, r: Control) {
        let Some(i) = self.waiting(r.seq) else {
            self.unmatched(r.seq);
            return;
        };
        let (id, side) = (r.route.target, r.table);
        if side > 1 {
            self.counters.malformed += 1;
            return;
        }
        match self.stage {
            Stage::Back => {
                // Only the relay the new switch was reached by, from its
                // far side, settles the back port.
                let Some(&Found {
                    via: Some((_, _, relay, near)),
                    ..
                }) = self.found.last()
                else {
                    self.counters.malformed += 1;
                    return;
                };
                if id != relay || side != 1 - near {
                    self.counters.malformed += 1;
                    return;
                }
                let port = self.probes[i].port;
                if let Some(f) = self.found.last_mut() {
                    f.back_port = port;
                }
                self.settle(i, Some((id, side)));
                self.finish_stage(now);
            }
            Stage::Ports(_) => {
                self.settle(i, Some((id, side)));
                if self.probes.iter().all(|p| p.over) {
                    self.ready = Some(now);
                }
            }
            Stage::Home | Stage::Idle => self.counters.malformed += 1,
        }
    }

    /// Probe `i` is over, answered or not.
    fn settle(&mut self, i: usize, answer: Option<(u16, u8)>) {
        let p = &mut self.probes[i];
        if p.over {
            return;
        }
        p.over = true;
        p.answer = answer;
        if answer.is_some() {
            self.counters.answered += 1;
        } else {
            self.counters.unanswered += 1;
        }
    }

    /// The stage's work is done (or decided): move on at the next poll.
    fn finish_stage(&mut self, now: Instant) {
        for i in 0..self.probes.len() {
            self.settle(i, None);
        }
        self.ready = Some(now);
    }

    /// Time passed: starts a round when due, asks again or gives up on
    /// probes whose time ran out, moves the round on; the cells to send go
    /// to `out`.
    pub fn poll(&mut self, now: Instant, out: &mut Vec<CellBytes>) {
        if self.stage == Stage::Idle {
            if now < self.next_round {
                return;
            }
            self.start_round(now, out);
        }
        // Timeouts.
        for i in 0..self.probes.len() {
            let p = self.probes[i];
            if p.over || now < p.deadline {
                continue;
            }
            if p.expected && p.tries < 2 {
                self.counters.rechecks += 1;
                self.ask(i, now, 2, out);
            } else {
                self.settle(i, None);
            }
        }
        // Move on while stages finish without waiting (bounded: each turn
        // explores or drops one candidate, or ends the round).
        while self.stage != Stage::Idle && self.probes.iter().all(|p| p.over) {
            self.ready = None;
            self.advance(now, out);
        }
        if self.ready.is_some_and(|t| t <= now) {
            self.ready = None;
        }
    }

    fn start_round(&mut self, now: Instant, out: &mut Vec<CellBytes>) {
        self.round_started = now;
        self.round_sent = 0;
        self.found.clear();
        self.relays.clear();
        self.queue.clear();
        self.probes.clear();
        self.ready = None;
        match self.home_port {
            Some(h) => self.begin_ports(0, h, None, now, out),
            None => {
                self.stage = Stage::Home;
                for c in 0..PORTS {
                    self.add_probe(c, false);
                }
                self.ask_all(now, out);
            }
        }
    }

    /// Adds switch `index` (its back port `back`, reached `via`) and
    /// probes its ports.
    fn begin_ports(
        &mut self,
        index: usize,
        back: u8,
        via: Option<(usize, u8, u16, u8)>,
        now: Instant,
        out: &mut Vec<CellBytes>,
    ) {
        if index == self.found.len() {
            self.found.push(Found {
                via,
                back_port: back,
                ports: BTreeMap::new(),
            });
        }
        self.stage = Stage::Ports(index);
        self.probes.clear();
        let believed: Vec<u8> = self
            .believed_switch(index)
            .map(|b| b.ports.keys().copied().collect())
            .unwrap_or_default();
        for c in (0..PORTS).filter(|&c| c != back) {
            let expected = believed.contains(&c);
            self.add_probe(c, expected);
        }
        self.ask_all(now, out);
    }

    /// The last map's switch that switch `index` of this round is.
    fn believed_switch(&self, index: usize) -> Option<&MapSwitch> {
        let at = match self.found.get(index)?.via {
            None => 0,
            Some((_, _, relay, near)) => self.map.switch_of(relay, 1 - near)?,
        };
        self.map.switches.get(at)
    }

    /// The current stage's probes are all over: use their answers and go
    /// on.
    fn advance(&mut self, now: Instant, out: &mut Vec<CellBytes>) {
        match self.stage {
            Stage::Idle => {}
            Stage::Home => match self.home_port {
                Some(h) => self.begin_ports(0, h, None, now, out),
                None => self.end_round(now),
            },
            Stage::Back => {
                let answered = self.probes.iter().find(|p| p.answer.is_some()).copied();
                let index = self.found.len() - 1;
                match (answered, self.found[index].via) {
                    (Some(p), Some((_, _, relay, near))) => {
                        self.place(relay, 1 - near, index, p.port);
                        self.found[index].ports.insert(p.port, (relay, 1 - near));
                        self.begin_ports(index, p.port, None, now, out);
                    }
                    _ => {
                        // The relay's far side leads to no switch this
                        // daemon can reach.
                        self.found.pop();
                        self.next_candidate(now, out);
                    }
                }
            }
            Stage::Ports(s) => {
                let answers: Vec<(u8, (u16, u8))> = self
                    .probes
                    .iter()
                    .filter_map(|p| Some((p.port, p.answer?)))
                    .collect();
                for (port, (relay, side)) in answers {
                    if !self.place(relay, side, s, port) {
                        continue;
                    }
                    self.found[s].ports.insert(port, (relay, side));
                    if self.relays[&relay][usize::from(1 - side)].is_none() {
                        self.queue.push_back((s, port, relay, side));
                    }
                }
                self.next_candidate(now, out);
            }
        }
    }

    /// Puts side `side` of `relay` on (`switch`, `port`) for this round;
    /// false (counted) if the round has it elsewhere already.
    fn place(&mut self, relay: u16, side: u8, switch: usize, port: u8) -> bool {
        let here = Plug { switch, port };
        let sides = self.relays.entry(relay).or_insert([None, None]);
        match sides[usize::from(side & 1)] {
            Some(p) if p != here => {
                self.counters.conflicts += 1;
                false
            }
            _ => {
                sides[usize::from(side & 1)] = Some(here);
                true
            }
        }
    }

    /// Explores the next candidate switch, or ends the round.
    fn next_candidate(&mut self, now: Instant, out: &mut Vec<CellBytes>) {
        while let Some((s, port, relay, near)) = self.queue.pop_front() {
            let far_known = self
                .relays
                .get(&relay)
                .is_some_and(|sides| sides[usize::from(1 - near)].is_some());
            if far_known {
                continue;
            }
            if self.found.len() >= self.cfg.max_switches
                || self.depth(s) >= self.cfg.max_depth
                || self.round_sent + 2 * STAGE_MOST > self.cfg.max_probes
            {
                self.counters.beyond_reach += 1;
                continue;
            }
            self.found.push(Found {
                via: Some((s, port, relay, near)),
                back_port: 0,
                ports: BTreeMap::new(),
            });
            self.stage = Stage::Back;
            self.probes.clear();
            // Where the last map had the relay's far side: that loop probe
            // is rechecked before the link is believed gone.
            let believed = self
                .map
                .relays
                .get(&relay)
                .and_then(|sides| sides[usize::from(1 - near)]);
            for c in 0..PORTS {
                self.add_probe(c, believed.is_some_and(|p| p.port == c));
            }
            self.ask_all(now, out);
            return;
        }
        self.end_round(now);
    }

    /// Relays between the home switch and switch `s`.
    fn depth(&self, mut s: usize) -> usize {
        let mut d = 0;
        while let Some(Some((before, ..))) = self.found.get(s).map(|f| f.via) {
            d += 1;
            s = before;
            if d > MAX_DEPTH {
                break;
            }
        }
        d
    }

    fn end_round(&mut self, now: Instant) {
        self.stage = Stage::Idle;
        self.probes.clear();
        let map = Map {
            home_port: self.home_port,
            switches: self
                .found
                .iter()
                .map(|f| MapSwitch {
                    back_port: f.back_port,
                    ports: f.ports.clone(),
                })
                .collect(),
            relays: std::mem::take(&mut self.relays),
        };
        self.counters.rounds += 1;
        if map != self.map {
            self.counters.changes += 1;
        }
        self.map = map;
        self.found.clear();
        self.queue.clear();
        let next = self.round_started + self.cfg.period;
        self.next_round = if next > now { next } else { now };
    }

    fn add_probe(&mut self, port: u8, expected: bool) {
        self.probes.push(Probe {
            port,
            seqs: [0; 2],
            tries: 0,
            deadline: Instant::ZERO,
            expected,
            answer: None,
            over: false,
        });
    }

    fn ask_all(&mut self, now: Instant, out: &mut Vec<CellBytes>) {
        for i in 0..self.probes.len() {
            self.ask(i, now, 1, out);
        }
    }

    /// Sends try `tries` of probe `i` (a fresh sequence number each),
    /// waiting `tries` timeouts for it.
    fn ask(&mut self, i: usize, now: Instant, tries: u8, out: &mut Vec<CellBytes>) {
        let port = self.probes[i].port;
        let Some((gfc, route)) = self.route_for(port) else {
            // No route fits (not reached for depths within bounds): the
            // probe is dropped unsent, so not counted.
            self.probes[i].over = true;
            return;
        };
        self.seq += 1;
        let c = Control {
            cmd: CMD_IDENT,
            key_id: self.cfg.key_id,
            seq: self.seq,
            route,
            ..Control::default()
        };
        out.push(c.cell_routed(self.cfg.vpi, gfc, Some(&self.cfg.key)));
        self.counters.sent += 1;
        self.round_sent += 1;
        let p = &mut self.probes[i];
        p.seqs[usize::from(tries.clamp(1, 2) - 1)] = self.seq;
        p.tries = tries.clamp(1, 2);
        p.deadline = now + Duration::from_nanos(self.cfg.timeout.as_nanos() * i64::from(p.tries));
    }

    /// The first routing bits and the route of the current stage's probe
    /// on port `c`.
    fn route_for(&self, c: u8) -> Option<(u8, Route)> {
        let (switch, back_here) = match self.stage {
            // Straight back to the host if `c` is its port.
            Stage::Home => return Some((c, Route::to_relay(0, &[], &[c])?)),
            // Out of port `c` of the new switch, and back the same way.
            Stage::Back => (self.found.len().checked_sub(1)?, c),
            Stage::Ports(s) => (s, self.found.get(s)?.back_port),
            Stage::Idle => return None,
        };
        // The switches from home to this one: the port each leaves by
        // towards the next, and the back port of each.
        let mut chain = vec![switch];
        let mut at = switch;
        while let Some((before, ..)) = self.found.get(at)?.via {
            chain.push(before);
            at = before;
            if chain.len() > MAX_DEPTH + 1 {
                return None;
            }
        }
        chain.reverse();
        let leave: Vec<u8> = chain[1..]
            .iter()
            .map(|&s| self.found[s].via.map_or(0, |v| v.1))
            .chain([c])
            .collect();
        let mut back: Vec<u8> = chain
            .iter()
            .rev()
            .map(|&s| self.found[s].back_port)
            .collect();
        back[0] = back_here;
        let gfc = leave[0];
        Some((gfc, Route::to_relay(0, &leave[1..], &back)?))
    }
}
