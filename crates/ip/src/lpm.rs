//! A longest-prefix-match table for IPv4: a multibit trie with 8-bit
//! strides (at most four steps per lookup), prefixes expanded into the
//! level where they end. Each slot remembers the length of the prefix it
//! holds, so a longer prefix written later is never overwritten by a
//! shorter one, whatever the order of insertion.

use std::net::Ipv4Addr;

#[derive(Clone, Copy, Default)]
struct Slot {
    /// Index of the child node, 0 for none (node 0 is the root, never a child).
    child: u32,
    /// Value + 1, 0 for none.
    value: u32,
    /// Length of the prefix `value` came from.
    len: u8,
}

/// The table: prefixes to values of type `u32` (an index into the caller's
/// list of routes, say).
pub struct Lpm {
    nodes: Vec<[Slot; 256]>,
    default: Option<u32>,
    prefixes: usize,
}

impl Default for Lpm {
    fn default() -> Self {
        Self::new()
    }
}

impl Lpm {
    /// An empty table.
    pub fn new() -> Self {
        Lpm {
            nodes: vec![[Slot::default(); 256]],
            default: None,
            prefixes: 0,
        }
    }

    /// Prefixes inserted.
    pub fn len(&self) -> usize {
        self.prefixes
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.prefixes == 0
    }

    /// Maps `addr/len` to `value` (bits of `addr` past `len` are ignored;
    /// `len` above 32 is taken as 32). A prefix given twice keeps the last
    /// value.
    pub fn insert(&mut self, addr: Ipv4Addr, len: u8, value: u32) {
        let len = len.min(32);
        self.prefixes += 1;
        if len == 0 {
            self.default = Some(value);
            return;
        }
        let a = u32::from(addr).to_be_bytes();
        let mut node = 0usize;
        for (level, &byte) in a.iter().enumerate() {
            let end = 8 * (level as u8 + 1);
            if len <= end {
                // Expand: the prefix covers 2^(end - len) slots here.
                let span = 1usize << (end - len);
                let base = usize::from(byte) & !(span - 1);
                for s in &mut self.nodes[node][base..base + span] {
                    if s.len <= len {
                        s.value = value + 1;
                        s.len = len;
                    }
                }
                return;
            }
            let child = self.nodes[node][usize::from(byte)].child;
            node = if child == 0 {
                self.nodes.push([Slot::default(); 256]);
                let c = self.nodes.len() - 1;
                self.nodes[node][usize::from(byte)].child = c as u32;
                c
            } else {
                child as usize
            };
        }
    }

    /// The value of the longest prefix holding `addr`.
    #[inline]
    pub fn lookup(&self, addr: Ipv4Addr) -> Option<u32> {
        let a = u32::from(addr).to_be_bytes();
        let mut best = self.default.map_or(0, |v| v + 1);
        let mut node = 0usize;
        for byte in a {
            let s = self.nodes[node][usize::from(byte)];
            if s.value != 0 {
                best = s.value;
            }
            if s.child == 0 {
                break;
            }
            node = s.child as usize;
        }
        best.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn longest_prefix_wins_in_either_order() {
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]] {
            let routes = [
                ("0.0.0.0", 0, 9),
                ("10.0.0.0", 8, 1),
                ("10.1.0.0", 16, 2),
                ("10.1.2.128", 25, 3),
            ];
            let mut t = Lpm::new();
            for i in order {
                let (a, l, v) = routes[i];
                t.insert(ip(a), l, v);
            }
            assert_eq!(t.lookup(ip("10.1.2.200")), Some(3));
            assert_eq!(t.lookup(ip("10.1.2.100")), Some(2));
            assert_eq!(t.lookup(ip("10.9.9.9")), Some(1));
            assert_eq!(t.lookup(ip("11.0.0.1")), Some(9));
        }
        let mut t = Lpm::new();
        t.insert(ip("192.168.1.7"), 32, 4);
        assert_eq!(t.lookup(ip("192.168.1.7")), Some(4));
        assert_eq!(t.lookup(ip("192.168.1.8")), None);
    }

    proptest! {
        /// Against a plain scan of every prefix.
        #[test]
        fn agrees_with_a_linear_scan(
            routes in proptest::collection::vec((any::<u32>(), 0u8..=32), 0..40),
            probes in proptest::collection::vec(any::<u32>(), 1..200),
        ) {
            let mut t = Lpm::new();
            for (i, &(a, l)) in routes.iter().enumerate() {
                t.insert(Ipv4Addr::from(a), l, i as u32);
            }
            let mask = |l: u8| u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0);
            // Probe near the prefixes too, not only at random.
            let near = routes.iter().map(|&(a, _)| a ^ 1);
            for p in probes.into_iter().chain(near) {
                // Longest match; among equal prefixes the last inserted.
                let want = routes
                    .iter()
                    .enumerate()
                    .filter(|(_, &(a, l))| (a ^ p) & mask(l) == 0)
                    .max_by_key(|(i, &(_, l))| (l, *i))
                    .map(|(i, _)| i as u32);
                prop_assert_eq!(t.lookup(Ipv4Addr::from(p)), want);
            }
        }
    }
}
