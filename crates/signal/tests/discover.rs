//! The topology daemon in virtual time, on networks of real VuNet switches
//! and relaying links: its map equals the network's ground truth on random
//! topologies, follows a link's removal and return, shrugs off one lost or
//! late answer, is not held up by a relay that never answers, counts
//! forged replies, and gives the connection library a path it opens.

use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_net::vunet::{Control, VunetLink, VunetSwitch, CMD_IDENT, CMD_REPLY};
use aurora_net::{Node, Outbox, PortId};
use aurora_signal::conn::{Opener, Path, Seq, Timing};
use aurora_signal::discover::{Config, Discover, Map, Place, MAX_DEPTH};
use aurora_signal::table::{Link, MemTable, Owner};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{build_cell, Header, VcId};
use aurora_wire::CellBytes;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

mod common;
use common::CellSink;

/// The connection library's key, id 0 at every relay.
const CONN_KEY: &[u8] = b"host connection key";
/// The daemon's own key, id 1 at every relay.
const DISC_KEY: &[u8] = b"host topology daemon key";
const DISC_ID: u8 = 1;
const RATE: f64 = 1e6;
const DELAY: Duration = Duration::from_micros(10);
const PERIOD: Duration = Duration::from_millis(50);
const TIMEOUT: Duration = Duration::from_millis(1);

fn config(home_port: Option<u8>) -> Config {
    Config {
        home_port,
        period: PERIOD,
        timeout: TIMEOUT,
        ..Config::new(DISC_ID, DISC_KEY.to_vec())
    }
}

/// A host running the daemon and, once told, opening a VC on the path the
/// daemon's map gives and sending a few cells on it.
struct Daemon {
    disc: Discover,
    open: Option<(Instant, Place, Link)>,
    opener: Option<Opener>,
    path: Option<Path>,
    seq: Seq,
    table: MemTable,
    sent_data: bool,
}

const DATA: u8 = 5;

impl Daemon {
    fn new(cfg: Config) -> Self {
        Daemon {
            disc: Discover::new(cfg, Instant::ZERO),
            open: None,
            opener: None,
            path: None,
            seq: Seq(0),
            table: MemTable::new(Default::default()),
            sent_data: false,
        }
    }

    fn flush(&mut self, now: Instant, out: &mut Outbox) {
        let mut cells = Vec::new();
        self.disc.poll(now, &mut cells);
        for c in cells {
            out.push(0, c);
        }
        if let (Some(o), false) = (&self.opener, self.sent_data) {
            if let Some(Ok(vc)) = o.outcome() {
                let first = vc.path.first_bits;
                for i in 0..DATA {
                    let h = Header {
                        gfc: first,
                        ..Header::data(VcId::new(0, vc.send_vci()))
                    };
                    out.push(0, build_cell(&h, &[i; 48]).unwrap());
                }
                self.sent_data = true;
            }
        }
    }
}

impl Node for Daemon {
    fn ports(&self) -> usize {
        1
    }
    fn receive(&mut self, now: Instant, _: PortId, cells: &[CellBytes], out: &mut Outbox) {
        for c in cells {
            // The opener takes its replies; the daemon gets the rest.
            if let Some(o) = &mut self.opener {
                let before = o.answered;
                if let Some(next) = o.on_cell(c, now, &mut self.seq) {
                    out.push(0, next);
                }
                if o.answered > before {
                    continue;
                }
            }
            self.disc.handle(now, c);
        }
        self.flush(now, out);
    }
    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        if let Some((at, place, last)) = self.open {
            if now >= at {
                self.open = None;
                let path = self
                    .disc
                    .route_to(place, last)
                    .expect("the map has a route");
                let (o, c) = Opener::start(
                    path.clone(),
                    Owner(1),
                    &self.table,
                    Timing::default(),
                    0,
                    Some((0, CONN_KEY)),
                    &mut self.seq,
                    now,
                )
                .expect("the path opens");
                self.path = Some(path);
                self.opener = Some(o);
                out.push(0, c);
            }
        }
        if let Some(o) = &mut self.opener {
            if let Some(c) = o.poll(now, &mut self.seq) {
                out.push(0, c);
            }
        }
        self.flush(now, out);
    }
    fn poll_at(&self) -> Option<Instant> {
        [
            self.disc.poll_at(),
            self.open.map(|o| o.0),
            self.opener.as_ref().and_then(Opener::poll_at),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// A relaying link that can be unplugged (it drops everything), lose
/// cells it gets by a script (true: lost), or hold its next answer back a
/// while.
struct Plug {
    relay: VunetLink,
    up: bool,
    lose: VecDeque<bool>,
    hold: Option<Duration>,
    held: Vec<(Instant, PortId, CellBytes)>,
}

impl Node for Plug {
    fn ports(&self) -> usize {
        2
    }
    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        for c in cells {
            if !self.up {
                continue;
            }
            if self.lose.pop_front() == Some(true) {
                continue;
            }
            let mut mine = Outbox::default();
            self.relay
                .receive(now, port, std::slice::from_ref(c), &mut mine);
            for (p, cell) in mine.drain() {
                match self.hold.take() {
                    Some(d) => self.held.push((now + d, p, cell)),
                    None => out.push(p, cell),
                }
            }
        }
    }
    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        let (due, keep): (Vec<_>, Vec<_>) = self.held.drain(..).partition(|h| h.0 <= now);
        self.held = keep;
        for (_, port, c) in due {
            out.push(port, c);
        }
        self.relay.poll(now, out);
    }
    fn poll_at(&self) -> Option<Instant> {
        self.held.iter().map(|h| h.0).min()
    }
}

/// Where a relay side plugs in: a switch and its port, or (`None`) a host
/// of its own.
type Side = Option<(usize, u8)>;

/// Relay sides placed on reachable switches: (relay, side) → (switch,
/// port).
type Placed = BTreeMap<(u16, u8), (usize, u8)>;

/// What a network is: switches (port counts), the host's port on switch
/// 0, relays (id, keyed, where each side plugs: a switch port or, if
/// `None`, a host of its own), and other hosts on switch ports.
#[derive(Clone, Debug)]
struct Truth {
    switches: Vec<u8>,
    home_port: u8,
    relays: Vec<(u16, bool, [Side; 2])>,
    hosts: Vec<(usize, u8)>,
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random network: a tree of relays joining 2 to 8 switches, a few more
/// relays making loops (one perhaps with both sides on one switch), one
/// perhaps plugged into a switch on one side only, one perhaps without the
/// daemon's key, and other hosts on spare ports.
fn random_truth(seed: u64) -> Truth {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let n = 2 + rng.below(7);
    let switches: Vec<u8> = (0..n).map(|_| 4 + rng.below(13) as u8).collect();
    let mut free: Vec<Vec<u8>> = switches.iter().map(|&p| (0..p).collect()).collect();
    let mut take = |rng: &mut Rng, s: usize| -> Option<u8> {
        if free[s].is_empty() {
            return None;
        }
        let i = rng.below(free[s].len());
        Some(free[s].swap_remove(i))
    };
    let home_port = take(&mut rng, 0).unwrap();
    let mut ends: Vec<(bool, [Side; 2])> = Vec::new();
    let mut join = |rng: &mut Rng, a: usize, b: Option<usize>, keyed: bool, ends: &mut Vec<_>| {
        let Some(pa) = take(rng, a) else { return };
        let pb = match b {
            Some(b) => match take(rng, b) {
                Some(p) => Some((b, p)),
                None => return,
            },
            None => None,
        };
        let sides = if rng.below(2) == 0 {
            [Some((a, pa)), pb]
        } else {
            [pb, Some((a, pa))]
        };
        ends.push((keyed, sides));
    };
    for i in 1..n {
        let parent = rng.below(i);
        join(&mut rng, parent, Some(i), true, &mut ends);
    }
    for _ in 0..rng.below(4) {
        let (a, b) = (rng.below(n), rng.below(n));
        join(&mut rng, a, Some(b), true, &mut ends);
    }
    if rng.below(2) == 0 {
        let a = rng.below(n);
        join(&mut rng, a, None, true, &mut ends);
    }
    if rng.below(2) == 0 {
        let (a, b) = (rng.below(n), rng.below(n));
        join(&mut rng, a, Some(b), false, &mut ends);
    }
    let mut hosts = Vec::new();
    for _ in 0..rng.below(3) {
        let s = rng.below(n);
        if let Some(p) = take(&mut rng, s) {
            hosts.push((s, p));
        }
    }
    // Relay ids in a shuffled order.
    let mut ids: Vec<u16> = (0..ends.len() as u16).map(|i| i * 3 + 1).collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.below(i + 1));
    }
    let relays = ends
        .into_iter()
        .zip(ids)
        .map(|((keyed, sides), id)| (id, keyed, sides))
        .collect();
    Truth {
        switches,
        home_port,
        relays,
        hosts,
    }
}

struct Net {
    sim: Engine,
    daemon: NodeId,
    relays: BTreeMap<u16, NodeId>,
    sinks: Vec<NodeId>,
}

fn build(truth: &Truth, cfg: Config) -> Net {
    let mut sim = Engine::new(7);
    let spec = LinkSpec::clean(RATE, DELAY, 64);
    let daemon = sim.add_node(Daemon::new(cfg));
    let switches: Vec<NodeId> = truth
        .switches
        .iter()
        .map(|&p| sim.add_node(VunetSwitch::new(usize::from(p))))
        .collect();
    sim.connect((daemon, 0), (switches[0], u16::from(truth.home_port)), spec)
        .unwrap();
    let mut relays = BTreeMap::new();
    let mut sinks = Vec::new();
    for &(id, keyed, sides) in &truth.relays {
        let mut relay = VunetLink::new([false, false], keyed.then(|| CONN_KEY.to_vec()));
        if keyed {
            relay.add_key(DISC_ID, DISC_KEY.to_vec());
        }
        relay.set_id(id);
        let node = sim.add_node(Plug {
            relay,
            up: true,
            lose: VecDeque::new(),
            hold: None,
            held: Vec::new(),
        });
        for (side, at) in sides.iter().enumerate() {
            let here = (node, side as u16);
            match at {
                Some((s, p)) => sim.connect(here, (switches[*s], u16::from(*p)), spec),
                None => {
                    let sink = sim.add_node(CellSink::default());
                    sinks.push(sink);
                    sim.connect(here, (sink, 0), spec)
                }
            }
            .unwrap();
        }
        relays.insert(id, node);
    }
    for &(s, p) in &truth.hosts {
        let sink = sim.add_node(CellSink::default());
        sinks.push(sink);
        sim.connect((sink, 0), (switches[s], u16::from(p)), spec)
            .unwrap();
    }
    Net {
        sim,
        daemon,
        relays,
        sinks,
    }
}

fn daemon(net: &Net) -> &Daemon {
    net.sim.node::<Daemon>(net.daemon).unwrap()
}

fn plug(net: &mut Net, id: u16) -> &mut Plug {
    let node = net.relays[&id];
    net.sim.node_mut::<Plug>(node).unwrap()
}

/// What the daemon can know of `truth` with relays `down` unplugged: the
/// switches reachable from the home switch through answering relays
/// within reach, and where each side of every relay on them plugs in.
fn reachable(truth: &Truth, down: &[u16]) -> (BTreeSet<usize>, Placed) {
    let answers = |id: u16, keyed: bool| keyed && !down.contains(&id);
    let mut depth = BTreeMap::from([(0usize, 0usize)]);
    let mut queue = VecDeque::from([0usize]);
    while let Some(s) = queue.pop_front() {
        if depth[&s] >= MAX_DEPTH {
            continue;
        }
        for &(id, keyed, sides) in &truth.relays {
            if !answers(id, keyed) {
                continue;
            }
            for k in 0..2 {
                if let (Some((a, _)), Some((b, _))) = (sides[k], sides[1 - k]) {
                    if a == s && !depth.contains_key(&b) {
                        depth.insert(b, depth[&s] + 1);
                        queue.push_back(b);
                    }
                }
            }
        }
    }
    let mut placed = BTreeMap::new();
    for &(id, keyed, sides) in &truth.relays {
        if !answers(id, keyed) {
            continue;
        }
        for (k, at) in sides.iter().enumerate() {
            if let Some((s, p)) = at {
                if depth.contains_key(s) {
                    placed.insert((id, k as u8), (*s, *p));
                }
            }
        }
    }
    (depth.keys().copied().collect(), placed)
}

/// Whether `map` is `truth` as the daemon can know it: the same relay
/// sides on the same ports of switches that correspond one to one, the
/// home switch first, and the host's port.
fn check_map(map: &Map, truth: &Truth, down: &[u16]) -> Result<(), String> {
    let (switches, placed) = reachable(truth, down);
    if map.home_port != Some(truth.home_port) {
        return Err(format!("home port {:?}", map.home_port));
    }
    if map.switches.len() != switches.len() {
        return Err(format!(
            "{} switches in the map, {} reachable",
            map.switches.len(),
            switches.len()
        ));
    }
    let mut to_truth: BTreeMap<usize, usize> = BTreeMap::from([(0, 0)]);
    let mut got = BTreeMap::new();
    for (&id, sides) in &map.relays {
        for (k, plug) in sides.iter().enumerate() {
            let Some(plug) = plug else { continue };
            let Some(&(s, _)) = placed.get(&(id, k as u8)) else {
                return Err(format!("relay {id} side {k} is not there"));
            };
            if *to_truth.entry(plug.switch).or_insert(s) != s {
                return Err(format!("map switch {} is two switches", plug.switch));
            }
            if map.switches[plug.switch].ports.get(&plug.port) != Some(&(id, k as u8)) {
                return Err(format!("relay {id} side {k} not on its switch's port"));
            }
            got.insert((id, k as u8), (s, plug.port));
        }
    }
    let distinct: BTreeSet<usize> = to_truth.values().copied().collect();
    if distinct.len() != to_truth.len() {
        return Err("two map switches are one".into());
    }
    if got != placed {
        return Err(format!("placed {got:?}, truth {placed:?}"));
    }
    Ok(())
}

/// Sent probes are all accounted for between rounds.
fn reconciled(d: &Discover) {
    let c = d.counters();
    assert_eq!(c.sent, c.answered + c.unanswered + c.rechecks, "{c:?}");
}

#[test]
fn the_map_equals_the_ground_truth_on_random_networks() {
    for seed in 1..=10u64 {
        let truth = random_truth(seed);
        // Half the time the host's port is found by loop probes.
        let home = (seed % 2 == 0).then_some(truth.home_port);
        let mut net = build(&truth, config(home));
        net.sim.run_until(Instant::from_millis(45));
        let d = &daemon(&net).disc;
        check_map(d.map(), &truth, &[]).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{truth:?}"));
        eprintln!(
            "seed {seed}: {} switches, {} relays ({} mapped), {} hosts",
            truth.switches.len(),
            truth.relays.len(),
            d.map().relays.len(),
            truth.hosts.len()
        );
        reconciled(d);
        let first = d.map().clone();
        // Later rounds find the same.
        net.sim.run_until(Instant::from_millis(145));
        let d = &daemon(&net).disc;
        let c = d.counters();
        assert_eq!(d.map(), &first, "seed {seed}");
        assert_eq!((c.rounds, c.changes), (3, 1), "seed {seed}: {c:?}");
        assert_eq!(
            (c.forged, c.conflicts, c.rechecks),
            (0, 0, 0),
            "seed {seed}"
        );
        reconciled(d);
    }
}

/// A relay on a loop of the network (so what lies beyond it stays
/// reachable) if there is one, else any answering relay.
fn victim(truth: &Truth) -> u16 {
    let (_, all) = reachable(truth, &[]);
    let keyed: Vec<u16> = truth
        .relays
        .iter()
        .filter(|r| r.1 && all.contains_key(&(r.0, 0)) && all.contains_key(&(r.0, 1)))
        .map(|r| r.0)
        .collect();
    keyed
        .iter()
        .copied()
        .find(|&id| reachable(truth, &[id]).0 == reachable(truth, &[]).0)
        .or(keyed.first().copied())
        .expect("a relay")
}

#[test]
fn the_map_follows_a_link_removed_and_put_back() {
    for seed in [3u64, 11, 12, 20] {
        let truth = random_truth(seed);
        let mut net = build(&truth, config(None));
        net.sim.run_until(Instant::from_millis(40));
        check_map(daemon(&net).disc.map(), &truth, &[]).unwrap();
        let gone = victim(&truth);
        // Unplugged just before a round starts: gone from the map within
        // two periods.
        plug(&mut net, gone).up = false;
        net.sim
            .run_until(Instant::from_millis(40) + PERIOD + PERIOD);
        let d = &daemon(&net).disc;
        check_map(d.map(), &truth, &[gone])
            .unwrap_or_else(|e| panic!("seed {seed}, relay {gone} unplugged: {e}"));
        assert!(d.counters().rechecks >= 1, "the miss was rechecked");
        reconciled(d);
        // Plugged back in the middle of a round: back within two periods.
        let back = Instant::from_millis(165);
        net.sim.run_until(back);
        plug(&mut net, gone).up = true;
        net.sim.run_until(back + PERIOD + PERIOD);
        let d = &daemon(&net).disc;
        check_map(d.map(), &truth, &[])
            .unwrap_or_else(|e| panic!("seed {seed}, relay {gone} back: {e}"));
        assert_eq!(d.counters().forged, 0);
    }
}

#[test]
fn one_lost_or_late_answer_removes_nothing() {
    let truth = random_truth(5);
    let mut net = build(&truth, config(Some(truth.home_port)));
    net.sim.run_until(Instant::from_millis(40));
    let before = daemon(&net).disc.map().clone();
    check_map(&before, &truth, &[]).unwrap();
    // A relay on the home switch: the first cell it gets in a round is
    // its own probe.
    let id = truth
        .relays
        .iter()
        .find(|r| r.1 && r.2.iter().any(|s| s.is_some_and(|s| s.0 == 0)))
        .expect("a relay on the home switch")
        .0;
    // Its probe is lost: asked again, and the link stays.
    plug(&mut net, id).lose = VecDeque::from([true]);
    net.sim.run_until(Instant::from_millis(90));
    let d = &daemon(&net).disc;
    assert_eq!(d.map(), &before);
    assert_eq!(d.counters().rechecks, 1);
    // Its answer is held back one and a half timeouts and the recheck is
    // lost: the late answer to the first try counts.
    plug(&mut net, id).hold = Some(Duration::from_micros(1500));
    plug(&mut net, id).lose = VecDeque::from([false, true]);
    net.sim.run_until(Instant::from_millis(140));
    let d = &daemon(&net).disc;
    let c = d.counters();
    assert_eq!(d.map(), &before);
    assert_eq!((c.rechecks, c.late), (2, 0));
    // Held back again, the recheck answered first: the first try's
    // answer comes after, late.
    plug(&mut net, id).hold = Some(Duration::from_micros(1500));
    net.sim.run_until(Instant::from_millis(190));
    let d = &daemon(&net).disc;
    let c = d.counters();
    assert_eq!(d.map(), &before);
    assert_eq!((c.rechecks, c.late, c.changes, c.rounds), (3, 1, 1, 4));
    reconciled(d);
}

#[test]
fn a_relay_that_never_answers_holds_nothing_up() {
    // host - s0 - (relay without the daemon's key) - s1 - relay - s2
    let truth = Truth {
        switches: vec![4, 4, 4],
        home_port: 3,
        relays: vec![
            (9, false, [Some((0, 1)), Some((1, 0))]),
            (4, true, [Some((1, 2)), Some((2, 0))]),
        ],
        hosts: vec![],
    };
    let mut net = build(&truth, config(None));
    net.sim.run_until(Instant::from_millis(260));
    let d = &daemon(&net).disc;
    let c = d.counters();
    assert_eq!(c.rounds, 6, "a round every period: {c:?}");
    assert!(d.map().relays.is_empty());
    assert_eq!(d.map().switches.len(), 1);
    assert_eq!(d.map().home_port, Some(3));
    check_map(d.map(), &truth, &[]).unwrap();
    assert!(d.poll_at().is_some());
    reconciled(d);
    let relay = &net.sim.node::<Plug>(net.relays[&9]).unwrap().relay;
    assert!(relay.counters().refused_port > 0);
}

#[test]
fn forged_and_stray_cells_are_counted_and_change_nothing() {
    let mut d = Discover::new(config(Some(2)), Instant::ZERO);
    let mut out = Vec::new();
    d.poll(Instant::ZERO, &mut out);
    // Probes out of every port of the home switch but the host's own.
    assert_eq!(out.len(), 15);
    let probe = Control::decode(&out[0][5..].try_into().unwrap());
    assert_eq!(probe.cmd, CMD_IDENT);
    // A relay's genuine answer, and forgeries of it.
    let mut relay = VunetLink::new([false, false], None);
    relay.add_key(DISC_ID, DISC_KEY.to_vec());
    relay.set_id(77);
    let mut o = Outbox::default();
    relay.receive(Instant::ZERO, 1, &[out[0]], &mut o);
    let genuine = o.drain().next().unwrap().1;
    let forged_of = |key: Option<&[u8]>, f: &dyn Fn(&mut Control)| {
        let mut c = Control::decode(&genuine[5..].try_into().unwrap());
        f(&mut c);
        c.cell(0, key)
    };
    let t = Instant::from_micros(5);
    // Another id under no key, or the wrong key: forged.
    assert!(d.handle(t, &forged_of(None, &|c| c.route.target = 3)));
    assert!(d.handle(t, &forged_of(Some(b"wrong"), &|c| c.route.target = 3)));
    // A flipped bit in the genuine cell.
    let mut bent = genuine;
    bent[5 + 46] ^= 1;
    assert!(d.handle(t, &bent));
    // Under the key but for a sequence number never sent, or a side that
    // cannot be.
    assert!(d.handle(t, &forged_of(Some(DISC_KEY), &|c| c.seq = 1 << 40)));
    assert!(d.handle(t, &forged_of(Some(DISC_KEY), &|c| c.table = 7)));
    // Another host's probe, and a data cell.
    let other = Control {
        cmd: CMD_IDENT,
        ..probe
    }
    .cell(0, Some(b"another host"));
    assert!(d.handle(t, &other));
    assert!(!d.handle(
        t,
        &build_cell(&Header::data(VcId::new(0, 40)), &[0; 48]).unwrap()
    ));
    let c = d.counters();
    assert_eq!((c.forged, c.malformed, c.foreign, c.answered), (3, 2, 1, 0));
    // The genuine one is taken.
    assert!(d.handle(t, &genuine));
    assert_eq!(d.counters().answered, 1);
    let r = Control::decode(&genuine[5..].try_into().unwrap());
    assert_eq!((r.cmd, r.route.target, r.table), (CMD_REPLY, 77, 1));
    // Taken twice: the second is late.
    assert!(d.handle(t, &genuine));
    assert_eq!(d.counters().late, 1);
    // The round ends with the relay found.
    let mut more = Vec::new();
    let mut now = t;
    while d.counters().rounds == 0 {
        now = d.poll_at().unwrap().max(now);
        d.poll(now, &mut more);
    }
    assert_eq!(
        d.map().relays[&77][1].map(|p| (p.switch, p.port)),
        Some((0, 0))
    );
}

#[test]
fn the_path_to_a_destination_opens_and_carries_data() {
    // host on s0:3; s0:1 - relay 5 (side 1 | side 0) - s1:2; s1:0 - relay 2
    // (side 0 | side 1) - s2:4; and s0:0 - relay 8 - s1:3, as short, so
    // the tie goes to the lower port of s0. The destination on s2:1.
    let truth = Truth {
        switches: vec![4, 4, 6],
        home_port: 3,
        relays: vec![
            (5, true, [Some((1, 2)), Some((0, 1))]),
            (2, true, [Some((1, 0)), Some((2, 4))]),
            (8, true, [Some((0, 0)), Some((1, 3))]),
        ],
        hosts: vec![(2, 1)],
    };
    let mut net = build(&truth, config(None));
    let dest = Place {
        relay: 2,
        side: 1,
        port: 1,
    };
    net.sim.node_mut::<Daemon>(net.daemon).unwrap().open =
        Some((Instant::from_millis(50), dest, Link(1000)));
    // The open starts with the second round: the daemon's probes and the
    // opener's writes pass the same relays at once, under their own key
    // ids, and neither disturbs the other.
    net.sim.run_until(Instant::from_millis(70));
    let h = daemon(&net);
    check_map(h.disc.map(), &truth, &[]).unwrap();
    assert_eq!(h.disc.counters().rounds, 2);
    assert_eq!(h.disc.counters().rechecks, 0);
    let path = h.path.clone().expect("opened");
    // s0 leaves on port 0 to relay 8 (side 0), s1 on port 0 to relay 2
    // (side 0), s2 on port 1 to the destination; replies go back by s1's
    // port 3 and the host's port 3.
    let hops: Vec<(u16, u8, u8, u8)> = path
        .hops
        .iter()
        .map(|h| (h.relay, h.side, h.bits_on, h.bits_back))
        .collect();
    assert_eq!(path.first_bits, 0);
    assert_eq!(hops, vec![(8, 0, 0, 3), (2, 0, 1, 3)]);
    let o = h.opener.as_ref().unwrap();
    let vc = o.outcome().expect("finished").expect("opened").clone();
    let dest_sink = net.sinks[0];
    // (It also got the daemon's probes of its port, on the control VCI.)
    let got: Vec<(u16, u8)> = net
        .sim
        .node::<CellSink>(dest_sink)
        .unwrap()
        .0
        .iter()
        .copied()
        .filter(|c| c.0 != aurora_net::vunet::VCI_LINK_CONTROL)
        .collect();
    let want: Vec<(u16, u8)> = (0..DATA).map(|i| (vc.receive_vci(), i)).collect();
    assert_eq!(got, want);
    // The opener's replies went to it, none to the daemon as forged.
    assert_eq!(h.disc.counters().forged, 0);
    // No way to the home switch itself, or to a relay it does not know.
    let home = Place {
        relay: 8,
        side: 0,
        port: 2,
    };
    assert!(h.disc.route_to(home, Link(0)).is_none());
    let unknown = Place { relay: 99, ..dest };
    assert!(h.disc.route_to(unknown, Link(0)).is_none());
}

/// The deepest a control cell reaches: a chain of 11 switches has its
/// last one 10 relays away, explored; a twelfth would not be.
#[test]
fn a_long_chain_is_mapped_as_far_as_routes_reach() {
    let n = MAX_DEPTH + 2;
    let truth = Truth {
        switches: vec![3; n],
        home_port: 2,
        relays: (0..n - 1)
            .map(|k| (k as u16, true, [Some((k, 1)), Some((k + 1, 0))]))
            .collect(),
        hosts: vec![],
    };
    let mut net = build(&truth, config(None));
    net.sim.run_until(Instant::from_millis(45));
    let d = &daemon(&net).disc;
    check_map(d.map(), &truth, &[]).unwrap();
    assert_eq!(d.map().switches.len(), MAX_DEPTH + 1);
    assert_eq!(d.counters().beyond_reach, 1);
    // The relay into the twelfth switch is placed by its near side only.
    assert_eq!(d.map().relays[&(n as u16 - 2)][1], None);
}

/// A round sends no more probes than it may: on a long chain, the home
/// switch costs 15 probes and each further one 31 (none lost), and a
/// switch is explored only while its worst case (64) still fits: 15 + 4 ×
/// 31 = 139, and 139 + 64 is over 192, so five are mapped.
#[test]
fn a_round_keeps_to_its_probe_budget() {
    let n = 8;
    let truth = Truth {
        switches: vec![3; n],
        home_port: 2,
        relays: (0..n - 1)
            .map(|k| (k as u16, true, [Some((k, 1)), Some((k + 1, 0))]))
            .collect(),
        hosts: vec![],
    };
    let cfg = Config {
        max_probes: 3 * 64,
        ..config(Some(2))
    };
    let mut net = build(&truth, cfg);
    net.sim.run_until(Instant::from_millis(45));
    let d = &daemon(&net).disc;
    let c = d.counters();
    assert_eq!(d.map().switches.len(), 5);
    assert_eq!(c.beyond_reach, 1);
    assert_eq!(c.sent, 139);
    reconciled(d);
}
