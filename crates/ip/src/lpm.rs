//! A longest-prefix-match table for IPv4: a multibit trie with strides of
//! 16, 8 and 8 bits (at most three steps per lookup, most routes found in
//! one or two), prefixes expanded into the level where they end and pushed
//! down into the blocks below (a slot holds the longest prefix covering
//! it, so a lookup's answer is its last slot's). Each slot remembers the
//! length of the prefix it holds, so a longer prefix written earlier is
//! never overwritten by a shorter one written later. The default route
//! is a prefix of length 0 like any other.
//!
//! A slot is one `u64`: the value in the low half ([`NONE`]: none) and the
//! index of its child block in the high half (0: none; the root block is
//! at 0 and is nobody's child).
//!
//! The root block is 512 KiB, too much for every host of a large
//! simulation, whose tables hold a handful of routes: a table made with
//! [`Lpm::new`] keeps up to [`SMALL`] prefixes in a list scanned longest
//! first, and builds the trie when it grows past that; [`Lpm::with_trie`]
//! (for routers) starts with the trie.

use std::net::Ipv4Addr;

const ROOT: usize = 1 << 16;
const BLOCK: usize = 1 << 8;

/// The value of "no prefix holds it" (values are below it).
pub const NONE: u32 = u32::MAX;

/// Prefixes kept in a plain list before the trie is built.
pub const SMALL: usize = 32;

/// The table: prefixes to values of type `u32` (an index into the caller's
/// list of routes, say; `u32::MAX` is not a value).
#[derive(Default)]
pub struct Lpm {
    /// (prefix bits, length, value), longest first, while small.
    small: Vec<(u32, u8, u32)>,
    trie: Option<Trie>,
    /// The default route's value, while small.
    default: Option<u32>,
    prefixes: usize,
}

struct Trie {
    slots: Vec<u64>,
    /// Prefix length of the value in each slot (for insertion only).
    lens: Vec<u8>,
}

fn mask(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

impl Lpm {
    /// An empty table, small until it grows.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table with its trie from the start (512 KiB).
    pub fn with_trie() -> Self {
        Lpm {
            trie: Some(Trie::new()),
            ..Self::default()
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
        let value = value.min(u32::MAX - 1);
        self.prefixes += 1;
        if let Some(t) = self.trie.as_mut() {
            t.insert(addr, len, value);
            return;
        }
        if len == 0 {
            self.default = Some(value);
            return;
        }
        let bits = u32::from(addr) & mask(len);
        if let Some(e) = self.small.iter_mut().find(|e| e.0 == bits && e.1 == len) {
            e.2 = value;
            return;
        }
        if self.small.len() < SMALL {
            let at = self.small.partition_point(|e| e.1 >= len);
            self.small.insert(at, (bits, len, value));
            return;
        }
        // Too many for the list: build the trie, shortest prefixes first
        // so longer ones win where they overlap.
        let mut t = Trie::new();
        if let Some(d) = self.default {
            t.insert(Ipv4Addr::UNSPECIFIED, 0, d);
        }
        for &(b, l, v) in self.small.iter().rev() {
            t.insert(Ipv4Addr::from(b), l, v);
        }
        t.insert(addr, len, value);
        self.small = Vec::new();
        self.trie = Some(t);
    }

    /// The value of the longest prefix holding `addr`.
    #[inline]
    pub fn lookup(&self, addr: Ipv4Addr) -> Option<u32> {
        let v = self.raw(addr);
        (v != NONE).then_some(v)
    }

    /// The value of the longest prefix holding `addr` as an index into
    /// the caller's list, [`NONE`] (past the end of any list of fewer than
    /// 2^32 - 1 entries) if no prefix holds it: one bounds check tells
    /// both.
    #[inline]
    pub fn index(&self, addr: Ipv4Addr) -> usize {
        self.raw(addr) as usize
    }

    /// The value of the longest prefix holding `addr` ([`NONE`]: none).
    #[inline]
    fn raw(&self, addr: Ipv4Addr) -> u32 {
        let a = u32::from(addr);
        match &self.trie {
            Some(t) => t.lookup(a),
            None => self
                .small
                .iter()
                .find(|e| a & mask(e.1) == e.0)
                .map_or(self.default.unwrap_or(NONE), |e| e.2),
        }
    }
}

impl Trie {
    /// An empty trie (its root block is 512 KiB).
    fn new() -> Self {
        Trie {
            slots: vec![u64::from(NONE); ROOT],
            lens: vec![0; ROOT],
        }
    }

    /// The child block of slot `i`, made if missing: a new block starts
    /// with slot `i`'s value in every slot (leaf pushing), so a lookup
    /// that ends in it needs no memory of what it passed.
    fn child(&mut self, i: usize) -> usize {
        let c = (self.slots[i] >> 32) as usize;
        if c != 0 {
            return c;
        }
        let c = self.slots.len();
        // The child index lives in a slot's high half.
        assert!(c <= u32::MAX as usize - BLOCK, "trie beyond 2^32 slots");
        let (value, len) = (self.slots[i] & 0xFFFF_FFFF, self.lens[i]);
        self.slots.resize(c + BLOCK, value);
        self.lens.resize(c + BLOCK, len);
        self.slots[i] |= (c as u64) << 32;
        c
    }

    /// Writes `value` for a prefix of `len` bits into `span` slots from
    /// `first`, where no longer prefix is held, and on into their child
    /// blocks (leaf pushing: a slot holds the longest prefix covering it,
    /// whether or not it has a child).
    fn fill(&mut self, first: usize, span: usize, len: u8, value: u32) {
        for i in first..first + span {
            if self.lens[i] <= len {
                self.lens[i] = len;
                self.slots[i] = (self.slots[i] & !0xFFFF_FFFF) | u64::from(value);
                let c = (self.slots[i] >> 32) as usize;
                if c != 0 {
                    self.fill(c, BLOCK, len, value);
                }
            }
        }
    }

    /// Writes `addr/len` (0 to 32 bits).
    fn insert(&mut self, addr: Ipv4Addr, len: u8, value: u32) {
        let a = u32::from(addr) as usize;
        if len <= 16 {
            let span = 1 << (16 - len);
            self.fill((a >> 16) & !(span - 1), span, len, value);
        } else if len <= 24 {
            let c = self.child(a >> 16);
            let span = 1 << (24 - len);
            self.fill(c + (((a >> 8) & 0xFF) & !(span - 1)), span, len, value);
        } else {
            let c = self.child(a >> 16);
            let c = self.child(c + ((a >> 8) & 0xFF));
            let span = 1 << (32 - len);
            self.fill(c + ((a & 0xFF) & !(span - 1)), span, len, value);
        }
    }

    /// The value of the longest prefix holding `a` ([`NONE`]: none): the value
    /// of the last slot on its way down, as slots are leaf-pushed.
    #[inline]
    fn lookup(&self, a: u32) -> u32 {
        let a = a as usize;
        let at = |i: usize| {
            debug_assert!(i < self.slots.len());
            // SAFETY: `i` is below `ROOT` (`a >> 16`), whose block the
            // trie is made with, or a child block's index plus a byte;
            // `child` sets a slot's child index only after the block's
            // `BLOCK` slots exist, and slots are never removed.
            unsafe { *self.slots.get_unchecked(i) }
        };
        let s = at(a >> 16);
        let c = (s >> 32) as usize;
        if c == 0 {
            return s as u32;
        }
        let s = at(c + ((a >> 8) & 0xFF));
        let c = (s >> 32) as usize;
        if c == 0 {
            return s as u32;
        }
        at(c + (a & 0xFF)) as u32
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

    /// Longest match by a plain scan; among equal prefixes the last
    /// inserted.
    fn scan(routes: &[(u32, u8)], p: u32) -> Option<u32> {
        let mask = |l: u8| u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0);
        routes
            .iter()
            .enumerate()
            .filter(|(_, &(a, l))| (a ^ p) & mask(l) == 0)
            .max_by_key(|(i, &(_, l))| (l, *i))
            .map(|(i, _)| i as u32)
    }

    /// Addresses near three bases (random low bits, how many at random),
    /// so prefixes nest in every order and at every level of the trie.
    fn near_bases() -> impl Strategy<Value = u32> {
        const BASES: [u32; 3] = [0x0A01_0203, 0x0A01_FF00, 0xC0A8_0001];
        (0usize..3, any::<u32>(), 0u32..32).prop_map(|(b, r, s)| BASES[b] ^ (r >> s))
    }

    proptest! {
        /// Against a plain scan of every prefix.
        #[test]
        fn agrees_with_a_linear_scan(
            routes in proptest::collection::vec((any::<u32>(), 0u8..=32), 0..80),
            probes in proptest::collection::vec(any::<u32>(), 1..200),
        ) {
            let mut t = Lpm::new();
            for (i, &(a, l)) in routes.iter().enumerate() {
                t.insert(Ipv4Addr::from(a), l, i as u32);
            }
            // Probe near the prefixes too, not only at random.
            let near = routes.iter().map(|&(a, _)| a ^ 1);
            for p in probes.into_iter().chain(near) {
                prop_assert_eq!(t.lookup(Ipv4Addr::from(p)), scan(&routes, p));
            }
        }

        /// Nested prefixes inserted in any order, into the trie from the
        /// start and into a table that starts small and grows into one:
        /// a shorter prefix written after a longer one reaches the slots
        /// below it that nothing longer holds, and a block made later
        /// starts with what covers it.
        #[test]
        fn nested_prefixes_in_any_order(
            routes in proptest::collection::vec((near_bases(), 0u8..=32), 1..120),
            probes in proptest::collection::vec(near_bases(), 1..300),
        ) {
            for mut t in [Lpm::with_trie(), Lpm::new()] {
                for (i, &(a, l)) in routes.iter().enumerate() {
                    t.insert(Ipv4Addr::from(a), l, i as u32);
                }
                for &p in &probes {
                    prop_assert_eq!(t.lookup(Ipv4Addr::from(p)), scan(&routes, p));
                }
            }
        }
    }
}
