//! The ATMARP cache of a logical IP subnet member: IP address to the VC
//! (and port) that reaches it, learned from InATMARP on PVCs or from an
//! ATMARP server, each entry valid for a set time (RFC 2225: 15 minutes at
//! a client) unless learned again. Bounded: when full, new addresses are
//! refused and counted.

use std::net::Ipv4Addr;

use aurora_net::PortId;
use aurora_time::{Duration, Instant};
use aurora_wire::cell::VcId;
use rustc_hash::FxHashMap;

/// RFC 2225's lifetime of a client's entry.
pub const CLIENT_AGEING: Duration = Duration::from_secs(15 * 60);
/// RFC 2225's lifetime of an ATMARP server's entry.
pub const SERVER_AGEING: Duration = Duration::from_secs(20 * 60);

/// Where an address is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The port.
    pub port: PortId,
    /// The VC on it.
    pub vc: VcId,
    /// When the entry was last learned.
    pub learned: Instant,
}

/// Counters of a cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArpCounters {
    /// Entries learned or relearned.
    pub learned: u64,
    /// Entries that aged out.
    pub expired: u64,
    /// New addresses refused because the cache was full.
    pub full: u64,
}

/// The cache.
#[derive(Debug)]
pub struct ArpCache {
    entries: FxHashMap<Ipv4Addr, Entry>,
    ageing: Duration,
    capacity: usize,
    counters: ArpCounters,
}

impl ArpCache {
    /// A cache whose entries live `ageing` and which holds at most
    /// `capacity` of them.
    pub fn new(ageing: Duration, capacity: usize) -> Self {
        ArpCache {
            entries: FxHashMap::default(),
            ageing,
            capacity,
            counters: ArpCounters::default(),
        }
    }

    /// How long entries live.
    pub fn ageing(&self) -> Duration {
        self.ageing
    }

    /// Records that `ip` is reached on `vc` of `port`, as of `now`.
    pub fn learn(&mut self, now: Instant, ip: Ipv4Addr, port: PortId, vc: VcId) {
        if !self.entries.contains_key(&ip) && self.entries.len() >= self.capacity {
            self.counters.full += 1;
            return;
        }
        self.counters.learned += 1;
        self.entries.insert(
            ip,
            Entry {
                port,
                vc,
                learned: now,
            },
        );
    }

    /// Where `ip` is reached, if its entry is still valid at `now`.
    #[inline]
    pub fn lookup(&self, now: Instant, ip: Ipv4Addr) -> Option<Entry> {
        self.entries
            .get(&ip)
            .copied()
            .filter(|e| now < e.learned + self.ageing)
    }

    /// The entry for `ip`, valid or not.
    pub fn get(&self, ip: Ipv4Addr) -> Option<Entry> {
        self.entries.get(&ip).copied()
    }

    /// Drops every entry that has aged out by `now`.
    pub fn expire(&mut self, now: Instant) {
        let ageing = self.ageing;
        let before = self.entries.len();
        self.entries.retain(|_, e| now < e.learned + ageing);
        self.counters.expired += (before - self.entries.len()) as u64;
    }

    /// Forgets every entry on `vc` of `port` (the VC went away).
    pub fn forget_vc(&mut self, port: PortId, vc: VcId) {
        self.entries.retain(|_, e| !(e.port == port && e.vc == vc));
    }

    /// Entries held (valid or not yet expired by [`ArpCache::expire`]).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry.
    pub fn entries(&self) -> impl Iterator<Item = (Ipv4Addr, Entry)> + '_ {
        self.entries.iter().map(|(a, e)| (*a, *e))
    }

    /// The counters.
    pub fn counters(&self) -> ArpCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_age_out_unless_relearned() {
        let mut c = ArpCache::new(Duration::from_secs(60), 8);
        let a = Ipv4Addr::new(10, 0, 0, 2);
        let b = Ipv4Addr::new(10, 0, 0, 3);
        let t0 = Instant::ZERO;
        c.learn(t0, a, 0, VcId::new(0, 32));
        c.learn(t0, b, 0, VcId::new(0, 33));
        let t50 = t0 + Duration::from_secs(50);
        c.learn(t50, b, 0, VcId::new(0, 33));
        let t70 = t0 + Duration::from_secs(70);
        // a is stale at 70 s even before expire() runs; b was refreshed.
        assert_eq!(c.lookup(t70, a), None);
        assert_eq!(c.lookup(t70, b).unwrap().vc, VcId::new(0, 33));
        c.expire(t70);
        assert_eq!(c.len(), 1);
        assert_eq!(c.counters().expired, 1);
        let t111 = t50 + Duration::from_secs(61);
        assert_eq!(c.lookup(t111, b), None);
        c.expire(t111);
        assert!(c.is_empty());
        assert_eq!(c.counters().expired, 2);
        assert_eq!(c.counters().learned, 3);
    }

    #[test]
    fn a_full_cache_refuses_new_addresses_and_counts_them() {
        let mut c = ArpCache::new(CLIENT_AGEING, 2);
        for i in 0..4u8 {
            c.learn(
                Instant::ZERO,
                Ipv4Addr::new(10, 0, 0, i),
                0,
                VcId::new(0, 40),
            );
        }
        assert_eq!(c.len(), 2);
        assert_eq!(c.counters().full, 2);
        // Relearning a known address still works when full.
        c.learn(
            Instant::ZERO,
            Ipv4Addr::new(10, 0, 0, 0),
            1,
            VcId::new(0, 41),
        );
        assert_eq!(
            c.lookup(Instant::ZERO, Ipv4Addr::new(10, 0, 0, 0))
                .unwrap()
                .port,
            1
        );
        c.forget_vc(1, VcId::new(0, 41));
        assert_eq!(c.len(), 1);
    }
}
