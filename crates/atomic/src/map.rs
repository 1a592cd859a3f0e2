//! An Address Consultant's picture of the network: Mosaic nodes known by
//! the identifiers they report, the channel leaving each in each direction,
//! the hosts attached, and how to walk from the AC to each node and back.
//! Routes are shortest walks, optionally kept off channels that already
//! carry flows with a declared bandwidth.

use std::collections::{BTreeSet, VecDeque};
use std::net::Ipv4Addr;

use rustc_hash::FxHashMap;

use crate::wire::Dir;

/// What is known of one channel leaving a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// Not probed yet.
    Unknown,
    /// Probed: nothing answered.
    Absent,
    /// Leads to this node (an index into the map).
    To(usize),
}

/// A host the AC found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostEntry {
    /// Its IPv4 address.
    pub addr: Ipv4Addr,
    /// Its identifier.
    pub host: u64,
}

/// One node of the map.
#[derive(Clone, Debug)]
pub struct MapNode {
    /// The identifier the node reported.
    pub id: u64,
    /// Each direction's channel.
    pub out: [Channel; 4],
    /// The host attached, if one answered.
    pub host: Option<HostEntry>,
    /// A walk from the AC's node to this node.
    pub path: Vec<Dir>,
    /// A walk from this node back to the AC's node, when known.
    pub back: Option<Vec<Dir>>,
}

/// The map.
#[derive(Clone, Debug, Default)]
pub struct Map {
    /// Nodes; the AC's own node is index 0 once known.
    pub nodes: Vec<MapNode>,
    index: FxHashMap<u64, usize>,
}

impl Map {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// The index of the node with identifier `id`.
    pub fn find(&self, id: u64) -> Option<usize> {
        self.index.get(&id).copied()
    }

    /// Adds a node (or returns the one known by `id`).
    pub fn add(&mut self, id: u64, path: Vec<Dir>, back: Option<Vec<Dir>>) -> (usize, bool) {
        if let Some(i) = self.find(id) {
            return (i, false);
        }
        let i = self.nodes.len();
        self.nodes.push(MapNode {
            id,
            out: [Channel::Unknown; 4],
            host: None,
            path,
            back,
        });
        self.index.insert(id, i);
        (i, true)
    }

    /// Every channel as (from id, direction, to id).
    pub fn edges(&self) -> BTreeSet<(u64, Dir, u64)> {
        let mut s = BTreeSet::new();
        for n in &self.nodes {
            for d in Dir::ALL {
                if let Channel::To(j) = n.out[d as usize] {
                    s.insert((n.id, d, self.nodes[j].id));
                }
            }
        }
        s
    }

    /// Every host as (node id, address).
    pub fn hosts(&self) -> BTreeSet<(u64, Ipv4Addr)> {
        self.nodes
            .iter()
            .filter_map(|n| n.host.map(|h| (n.id, h.addr)))
            .collect()
    }

    /// The node a host with `addr` is attached to.
    pub fn host_node(&self, addr: Ipv4Addr) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.host.is_some_and(|h| h.addr == addr))
    }

    /// A shortest walk from node `from` to node `to` that avoids the
    /// channels for which `avoid(node, direction)` is true.
    pub fn walk(
        &self,
        from: usize,
        to: usize,
        avoid: &dyn Fn(usize, Dir) -> bool,
    ) -> Option<Vec<Dir>> {
        if from >= self.nodes.len() || to >= self.nodes.len() {
            return None;
        }
        let mut prev: Vec<Option<(usize, Dir)>> = vec![None; self.nodes.len()];
        let mut seen = vec![false; self.nodes.len()];
        let mut q = VecDeque::from([from]);
        seen[from] = true;
        while let Some(n) = q.pop_front() {
            if n == to {
                break;
            }
            for d in Dir::ALL {
                if let Channel::To(m) = self.nodes[n].out[d as usize] {
                    if !seen[m] && !avoid(n, d) {
                        seen[m] = true;
                        prev[m] = Some((n, d));
                        q.push_back(m);
                    }
                }
            }
        }
        if !seen[to] {
            return None;
        }
        let mut steps = Vec::new();
        let mut at = to;
        while let Some((p, d)) = prev[at] {
            steps.push(d);
            at = p;
        }
        steps.reverse();
        Some(steps)
    }

    /// Follows `steps` from node `from`; the node reached, if every
    /// channel on the way is known.
    pub fn follow(&self, from: usize, steps: &[Dir]) -> Option<usize> {
        let mut at = from;
        for &d in steps {
            match self.nodes.get(at)?.out[d as usize] {
                Channel::To(m) => at = m,
                _ => return None,
            }
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_are_shortest_and_can_avoid_channels() {
        // A 2 x 2 square: 0 -E- 1, 0 -N- 2, 1 -N- 3, 2 -E- 3.
        let mut m = Map::new();
        for id in 0..4 {
            m.add(id, Vec::new(), None);
        }
        let mut link = |a: usize, d: Dir, b: usize| {
            m.nodes[a].out[d as usize] = Channel::To(b);
            m.nodes[b].out[d.opposite() as usize] = Channel::To(a);
        };
        link(0, Dir::East, 1);
        link(0, Dir::North, 2);
        link(1, Dir::North, 3);
        link(2, Dir::East, 3);
        assert_eq!(
            m.walk(0, 3, &|_, _| false),
            Some(vec![Dir::East, Dir::North])
        );
        assert_eq!(
            m.walk(0, 3, &|n, d| n == 0 && d == Dir::East),
            Some(vec![Dir::North, Dir::East])
        );
        assert_eq!(m.walk(0, 3, &|n, _| n == 0), None);
        assert_eq!(m.follow(0, &[Dir::North, Dir::East]), Some(3));
        assert_eq!(m.edges().len(), 8);
    }
}
