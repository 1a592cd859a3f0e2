//! ATOMIC layouts as they are built: Mosaic nodes (in n × n mesh boards,
//! or alone on host-interface boards), hosts, and the one-way channels
//! between nodes, each with its cable length. Generators make regular and
//! random layouts (symmetric or not, consistent or not) for tests and
//! benchmarks, and every layout knows its ground truth.
//!
//! Timing follows the seed's measurements: a Mosaic channel moves a byte
//! in 16 ns (500 Mb/s) plus a small per-packet cost, and over a cable of D
//! feet each byte waits (13 + 3 D) ns for its acknowledgement whenever that
//! is longer (D above about 2.3 feet); a host interface takes 1.44 µs per
//! packet plus 20 ns per byte, T(L) = 1.44 + 0.020 L µs.

use std::collections::{BTreeSet, VecDeque};
use std::net::Ipv4Addr;

use aurora_engine::LinkSpec;
use aurora_time::Duration;

use crate::wire::Dir;

/// Channels as (from node id, direction, to node id).
pub type Edges = BTreeSet<(u64, Dir, u64)>;

/// One Mosaic node of a layout.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutNode {
    /// Its identifier (drawn at random when the node starts; fixed here).
    pub id: u64,
    /// The host attached to it, by address.
    pub host: Option<Ipv4Addr>,
    /// The mesh board it sits on, if any.
    pub mesh: Option<usize>,
}

/// A one-way channel from a node's output to a node's input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Wire {
    /// Sending node and its output direction.
    pub from: (usize, Dir),
    /// Receiving node and the input it arrives on.
    pub to: (usize, Dir),
    /// Cable length in feet (0 on a board).
    pub feet: f64,
}

/// A layout.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Layout {
    /// Nodes.
    pub nodes: Vec<LayoutNode>,
    /// Channels.
    pub wires: Vec<Wire>,
}

/// How random layouts are drawn.
#[derive(Clone, Copy, Debug)]
pub struct RandomSpec {
    /// Mesh boards.
    pub meshes: usize,
    /// Smallest and largest mesh side.
    pub side: (usize, usize),
    /// Hosts, each on its own host-interface node.
    pub hosts: usize,
    /// Cables joining meshes beyond what connects them.
    pub extra_cables: usize,
    /// Every cable carries both directions.
    pub symmetric: bool,
    /// Cables join East to West and North to South.
    pub consistent: bool,
}

/// A small deterministic generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next number.
    pub fn draw(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.draw() % n.max(1) as u64) as usize
    }
}

impl Layout {
    fn node(&mut self, rng: &mut Rng, host: Option<Ipv4Addr>, mesh: Option<usize>) -> usize {
        self.nodes.push(LayoutNode {
            id: rng.draw(),
            host,
            mesh,
        });
        self.nodes.len() - 1
    }

    /// Joins `a` going `d` to `b`, both ways, as on a board.
    fn board_link(&mut self, a: usize, d: Dir, b: usize) {
        self.wires.push(Wire {
            from: (a, d),
            to: (b, d.opposite()),
            feet: 0.0,
        });
        self.wires.push(Wire {
            from: (b, d.opposite()),
            to: (a, d),
            feet: 0.0,
        });
    }

    /// An n × n mesh board; returns its nodes, row by row from the South
    /// West corner.
    fn mesh(&mut self, rng: &mut Rng, n: usize, mesh: usize) -> Vec<usize> {
        let ids: Vec<usize> = (0..n * n)
            .map(|_| self.node(rng, None, Some(mesh)))
            .collect();
        for y in 0..n {
            for x in 0..n {
                if x + 1 < n {
                    self.board_link(ids[y * n + x], Dir::East, ids[y * n + x + 1]);
                }
                if y + 1 < n {
                    self.board_link(ids[y * n + x], Dir::North, ids[(y + 1) * n + x]);
                }
            }
        }
        ids
    }

    /// A w × h grid of nodes with a host at each of the given cells
    /// (x, y), addressed 10.0.0.1 onwards.
    pub fn grid(w: usize, h: usize, hosts: &[(usize, usize)], seed: u64) -> Layout {
        let mut rng = Rng::new(seed);
        let mut l = Layout::default();
        let ids: Vec<usize> = (0..w * h)
            .map(|_| l.node(&mut rng, None, Some(0)))
            .collect();
        for y in 0..h {
            for x in 0..w {
                if x + 1 < w {
                    l.board_link(ids[y * w + x], Dir::East, ids[y * w + x + 1]);
                }
                if y + 1 < h {
                    l.board_link(ids[y * w + x], Dir::North, ids[(y + 1) * w + x]);
                }
            }
        }
        for (k, &(x, y)) in hosts.iter().enumerate() {
            if let Some(&n) = ids.get(y * w + x) {
                l.nodes[n].host = Some(Ipv4Addr::new(10, 0, (k / 250) as u8, (k % 250) as u8 + 1));
            }
        }
        l
    }

    /// Channels nothing uses yet: (node, direction) whose output is free.
    fn free_outputs(&self) -> Vec<(usize, Dir)> {
        let used: BTreeSet<(usize, Dir)> = self.wires.iter().map(|w| w.from).collect();
        let mut v = Vec::new();
        for n in 0..self.nodes.len() {
            for d in Dir::ALL {
                if !used.contains(&(n, d)) {
                    v.push((n, d));
                }
            }
        }
        v
    }

    fn free_inputs(&self) -> BTreeSet<(usize, Dir)> {
        let used: BTreeSet<(usize, Dir)> = self.wires.iter().map(|w| w.to).collect();
        let mut s = BTreeSet::new();
        for n in 0..self.nodes.len() {
            for d in Dir::ALL {
                if !used.contains(&(n, d)) {
                    s.insert((n, d));
                }
            }
        }
        s
    }

    /// Lays a cable from `a`'s output `da` to `b`'s input `db`, and back
    /// (from `b`'s output `db` to `a`'s input `da`) when `both`.
    fn cable(&mut self, a: (usize, Dir), b: (usize, Dir), both: bool, feet: f64) {
        self.wires.push(Wire {
            from: a,
            to: b,
            feet,
        });
        if both {
            self.wires.push(Wire {
                from: b,
                to: a,
                feet,
            });
        }
    }

    /// Picks a free cable end pair between groups `ga` and `gb` (sets of
    /// nodes): an output of `ga` and an input of `gb` (and the reverse
    /// pair free too when `both`), consistent (East to West, North to
    /// South) when asked.
    fn pick(
        &self,
        rng: &mut Rng,
        ga: &BTreeSet<usize>,
        gb: &BTreeSet<usize>,
        both: bool,
        consistent: bool,
    ) -> Option<((usize, Dir), (usize, Dir))> {
        let outs = self.free_outputs();
        let ins = self.free_inputs();
        let mut cands = Vec::new();
        for &(a, da) in outs.iter().filter(|(n, _)| ga.contains(n)) {
            for &(b, db) in ins.iter().filter(|(n, _)| gb.contains(n)) {
                if a == b {
                    continue;
                }
                if consistent && db != da.opposite() {
                    continue;
                }
                if both && !(outs.contains(&(b, db)) && ins.contains(&(a, da))) {
                    continue;
                }
                cands.push(((a, da), (b, db)));
            }
        }
        if cands.is_empty() {
            return None;
        }
        Some(cands[rng.below(cands.len())])
    }

    /// A random layout: meshes joined by cables into one network, hosts on
    /// their own nodes cabled to meshes, strongly connected.
    pub fn random(spec: RandomSpec, seed: u64) -> Layout {
        let mut rng = Rng::new(seed);
        let mut l = Layout::default();
        let mut groups: Vec<BTreeSet<usize>> = Vec::new();
        for m in 0..spec.meshes.max(1) {
            let side = spec.side.0 + rng.below(spec.side.1.saturating_sub(spec.side.0) + 1);
            groups.push(l.mesh(&mut rng, side.max(1), m).into_iter().collect());
        }
        let feet = |rng: &mut Rng| 1.0 + rng.below(30) as f64;
        // A spanning tree of cables, both ways (so all is connected), then
        // extra cables, one-way if not symmetric.
        for g in 1..groups.len() {
            let other = rng.below(g);
            let (ga, gb) = (groups[g].clone(), groups[other].clone());
            if let Some((a, b)) = l.pick(&mut rng, &ga, &gb, true, spec.consistent) {
                let f = feet(&mut rng);
                l.cable(a, b, true, f);
            }
        }
        let all: BTreeSet<usize> = (0..l.nodes.len()).collect();
        for _ in 0..spec.extra_cables {
            let both = spec.symmetric || rng.below(2) == 0;
            let ga = groups[rng.below(groups.len())].clone();
            if let Some((a, b)) = l.pick(&mut rng, &ga, &all, both, spec.consistent) {
                let f = feet(&mut rng);
                l.cable(a, b, both, f);
            }
        }
        for k in 0..spec.hosts {
            let addr = Ipv4Addr::new(10, 0, (k / 250) as u8, (k % 250) as u8 + 1);
            let h = l.node(&mut rng, Some(addr), None);
            let me: BTreeSet<usize> = [h].into();
            if let Some((a, b)) = l.pick(&mut rng, &me, &all, true, spec.consistent) {
                let f = feet(&mut rng);
                l.cable(a, b, true, f);
            }
        }
        l
    }

    /// Every channel as (from id, direction, to id).
    pub fn edges(&self) -> BTreeSet<(u64, Dir, u64)> {
        self.wires
            .iter()
            .map(|w| (self.nodes[w.from.0].id, w.from.1, self.nodes[w.to.0].id))
            .collect()
    }

    /// The nodes that `start` can reach and that can reach `start` back.
    pub fn strong_component(&self, start: usize) -> BTreeSet<usize> {
        let reach = |fwd: bool| {
            let mut seen = vec![false; self.nodes.len()];
            let mut q = VecDeque::from([start]);
            seen[start] = true;
            while let Some(n) = q.pop_front() {
                for w in &self.wires {
                    let (a, b) = if fwd {
                        (w.from.0, w.to.0)
                    } else {
                        (w.to.0, w.from.0)
                    };
                    if a == n && !seen[b] {
                        seen[b] = true;
                        q.push_back(b);
                    }
                }
            }
            seen
        };
        let (f, b) = (reach(true), reach(false));
        (0..self.nodes.len()).filter(|&n| f[n] && b[n]).collect()
    }

    /// The channels and hosts an AC at node `start` can map: both ends in
    /// its strong component.
    pub fn truth_from(&self, start: usize) -> (Edges, BTreeSet<(u64, Ipv4Addr)>) {
        let c = self.strong_component(start);
        let edges = self
            .wires
            .iter()
            .filter(|w| c.contains(&w.from.0) && c.contains(&w.to.0))
            .map(|w| (self.nodes[w.from.0].id, w.from.1, self.nodes[w.to.0].id))
            .collect();
        let hosts = c
            .iter()
            .filter_map(|&n| self.nodes[n].host.map(|a| (self.nodes[n].id, a)))
            .collect();
        (edges, hosts)
    }

    /// True if every channel has its reverse and joins opposite sides.
    pub fn is_symmetric_and_consistent(&self) -> bool {
        self.wires.iter().all(|w| {
            w.to.1 == w.from.1.opposite()
                && self.wires.iter().any(|v| v.from == w.to && v.to == w.from)
        })
    }

    /// Makes every node strongly connected to every other by adding
    /// two-way consistent cables between components where needed (used
    /// by generators of non-symmetric layouts).
    pub fn make_strongly_connected(&mut self, seed: u64) {
        let mut rng = Rng::new(seed ^ 0x5EED);
        for _ in 0..self.nodes.len() {
            let c = self.strong_component(0);
            if c.len() == self.nodes.len() {
                return;
            }
            let rest: BTreeSet<usize> = (0..self.nodes.len()).filter(|n| !c.contains(n)).collect();
            let pick = self
                .pick(&mut rng, &rest, &c, true, false)
                .or_else(|| self.pick(&mut rng, &c, &rest, true, false));
            match pick {
                Some((a, b)) => self.cable(a, b, true, 3.0),
                None => return,
            }
        }
    }
}

/// Bytes of frames a host's port to its interface (and the interface's
/// to the host) holds waiting, at most, besides its 65,536 frames, unless
/// the host says otherwise (`HostConfig::memory`): the host's memory.
/// 1 MiB, 32 times what each interface of the prototype
/// host interface board had (four 32 KB memory chips for four
/// interfaces): an AC's round of probes in the largest layouts `aurora
/// bench atomic-map` maps fits in an idle port, and an overloaded host
/// holds about 115 9,000-byte packets (21 ms of its interface) rather
/// than hundreds of megabytes. A host with a TUN interface stops reading
/// it while its port is half full (the engine's host adapter), so its
/// stack waits rather than loses.
pub const HOST_BYTES: usize = 1 << 20;

/// Bytes of frames a Mosaic node's output holds waiting, at most. A
/// channel pushes back rather than drops, and the model keeps what would
/// wait upstream at the port of the channel that holds it up; this only
/// bounds that port's memory (64 MiB, about 7,400 9,000-byte packets; in
/// `examples/atomic-overload.toml` run for 2 s, every packet still on its
/// way, about 7,300 in all, waits for d's 30-foot cable).
pub const CHANNEL_BYTES: usize = 64 << 20;

/// The link from a node's output over `feet` of cable.
pub fn channel_spec(feet: f64) -> LinkSpec {
    LinkSpec {
        // A small fixed cost per packet on a channel, 50 ns.
        rate: 20_000_000.0,
        per_byte: Duration::from_nanos(16),
        handshake_per_byte: Duration::from_nanos((13.0 + 3.0 * feet).round() as i64),
        delay: Duration::from_nanos((1.5 * feet).round() as i64),
        // A Mosaic channel pushes back rather than drops; the node's
        // memory holds what waits (flood mapping sends bursts).
        buffer: 65_536,
        buffer_bytes: Some(CHANNEL_BYTES),
        loss: 0.0,
        bit_error: 0.0,
    }
}

/// The link between a host and its host-interface node: T(L) = 1.44 µs +
/// 20 ns per byte; the sending port holds `memory` bytes of packets.
pub fn interface_spec(memory: usize) -> LinkSpec {
    LinkSpec {
        rate: 1e6 / 1.44,
        per_byte: Duration::from_nanos(20),
        handshake_per_byte: Duration::ZERO,
        delay: Duration::ZERO,
        // The host's memory: an AC sends a whole round of probes at once.
        buffer: 65_536,
        buffer_bytes: Some(memory),
        loss: 0.0,
        bit_error: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_is_symmetric_and_consistent() {
        let l = Layout::grid(3, 3, &[(0, 0), (2, 2)], 1);
        assert_eq!(l.nodes.len(), 9);
        assert_eq!(l.wires.len(), 2 * 12);
        assert!(l.is_symmetric_and_consistent());
        assert_eq!(l.strong_component(0).len(), 9);
        assert_eq!(l.truth_from(0).1.len(), 2);
    }

    #[test]
    fn random_layouts_are_connected_and_honour_their_spec() {
        for seed in 0..20 {
            let spec = RandomSpec {
                meshes: 4,
                side: (2, 4),
                hosts: 6,
                extra_cables: 3,
                symmetric: true,
                consistent: true,
            };
            let l = Layout::random(spec, seed);
            assert!(l.is_symmetric_and_consistent(), "seed {seed}");
            assert_eq!(l.strong_component(0).len(), l.nodes.len(), "seed {seed}");
            let outs: BTreeSet<(usize, Dir)> = l.wires.iter().map(|w| w.from).collect();
            assert_eq!(outs.len(), l.wires.len(), "one wire per output");
            let ins: BTreeSet<(usize, Dir)> = l.wires.iter().map(|w| w.to).collect();
            assert_eq!(ins.len(), l.wires.len(), "one wire per input");
        }
    }
}
