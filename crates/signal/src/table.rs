//! The VCI allocation table of a network.
//!
//! A VC crosses a path of links; on each link its cells carry a VCI that
//! no other VC on that link may carry (a relaying link's table is indexed
//! by it). The table maps (link, VCI) to the host that holds it and when
//! its lease ends. Links are numbered by the caller ([`Link`]), the same
//! way in every process that shares a table (from the topology file's
//! order, say); owners likewise ([`Owner`]). Times are nanoseconds on a
//! clock every user of one table shares (virtual time in one engine;
//! the Unix epoch across processes).
//!
//! Allocation takes, on every link of the path, the lowest VCI in the
//! table's range that is free there, all links or none, under the table's
//! lock; so two hosts opening at once cannot get the same VCI on a shared
//! link. Only the owner of an entry may renew or release it; a lease not
//! renewed expires, and every operation first drops expired entries
//! (counted as reclaimed).
//!
//! The file form (`FileTable`) is text, rewritten whole under an
//! exclusive advisory lock (`flock`) at each operation:
//!
//! ```text
//! aurora-vci-table 1
//! LINK VCI OWNER EXPIRES_NS
//! ...
//! ```
//!
//! A file that does not parse is refused with the line and the problem;
//! nothing is written over it.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A link (one direction or both, as the caller numbers them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Link(pub u32);

/// A host that holds entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner(pub u32);

/// One entry: `vci` on `link` is `owner`'s until `expires`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The link.
    pub link: Link,
    /// The VCI on it.
    pub vci: u16,
    /// Who holds it.
    pub owner: Owner,
    /// When its lease ends (ns on the table's clock).
    pub expires: u64,
}

/// Why the table refused.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    /// Every VCI of the range is taken on this link.
    #[error("no free VCI on link {0}")]
    NoFreeVci(u32),
    /// The table holds as many entries as it may.
    #[error("the table is full ({0} entries)")]
    Full(usize),
    /// The file could not be read, locked or written.
    #[error("VCI table {path}: {problem}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        problem: String,
    },
    /// The file is not a table.
    #[error("VCI table {path}:{line}: {problem}")]
    Parse {
        /// The file.
        path: String,
        /// The line (from 1).
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
}

/// What a table was asked and did, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Paths allocated.
    pub allocated: u64,
    /// Allocations refused (no free VCI, or full).
    pub refused: u64,
    /// Entries renewed.
    pub renewed: u64,
    /// Entries released by their owner.
    pub released: u64,
    /// Renewals or releases of entries the caller does not own (or that
    /// no longer exist): changed nothing.
    pub not_owner: u64,
    /// Entries dropped because their lease ran out.
    pub reclaimed: u64,
}

/// The limits of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Lowest VCI handed out (0 to 31 are reserved in ATM).
    pub first: u16,
    /// Highest VCI handed out.
    pub last: u16,
    /// Most entries the table holds.
    pub entries: usize,
    /// Links whose VCIs come from a range of their own (first, last), in
    /// place of `first..=last`: a WAN segment between two AVlinks, whose
    /// VCIs are its pool's.
    pub links: BTreeMap<Link, (u16, u16)>,
}

impl Limits {
    /// The VCIs `link` hands out: (first, last).
    fn range(&self, link: Link) -> (u16, u16) {
        self.links
            .get(&link)
            .copied()
            .unwrap_or((self.first, self.last))
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            first: 32,
            last: u16::MAX,
            entries: 1 << 20,
            links: BTreeMap::new(),
        }
    }
}

/// The table's contents and rules, with no lock of its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    entries: BTreeMap<(Link, u16), (Owner, u64)>,
}

impl State {
    /// Drops entries whose lease ended by `now`; how many.
    fn expire(&mut self, now: u64) -> u64 {
        let before = self.entries.len();
        self.entries.retain(|_, (_, exp)| *exp > now);
        (before - self.entries.len()) as u64
    }

    /// The lowest free VCI on `link` within `limits` (none if the range is
    /// empty).
    fn lowest_free(&self, link: Link, limits: &Limits) -> Option<u16> {
        let (first, last) = limits.range(link);
        if first > last {
            return None;
        }
        let mut want = first;
        for (&(_, vci), _) in self.entries.range((link, first)..=(link, last)) {
            if vci != want {
                break;
            }
            want = want.checked_add(1)?;
        }
        (want <= last && want >= first).then_some(want)
    }

    /// Allocates one VCI on every link of `hops` for `owner`, leased until
    /// `expires`; all or none.
    fn allocate(
        &mut self,
        owner: Owner,
        hops: &[Link],
        expires: u64,
        limits: &Limits,
    ) -> Result<Vec<u16>, TableError> {
        if self.entries.len() + hops.len() > limits.entries {
            return Err(TableError::Full(limits.entries));
        }
        let mut got: Vec<(Link, u16)> = Vec::with_capacity(hops.len());
        for &link in hops {
            // A path that crosses a link twice gets two VCIs there.
            let Some(vci) = self.lowest_free(link, limits) else {
                for k in &got {
                    self.entries.remove(k);
                }
                return Err(TableError::NoFreeVci(link.0));
            };
            self.entries.insert((link, vci), (owner, expires));
            got.push((link, vci));
        }
        Ok(got.into_iter().map(|(_, v)| v).collect())
    }

    /// Sets the lease of each of `owner`'s `grants` to `expires`; how many
    /// were `owner`'s.
    fn renew(&mut self, owner: Owner, grants: &[(Link, u16)], expires: u64) -> u64 {
        let mut n = 0;
        for k in grants {
            if let Some(e) = self.entries.get_mut(k).filter(|e| e.0 == owner) {
                e.1 = expires;
                n += 1;
            }
        }
        n
    }

    /// Removes each of `owner`'s `grants`; how many were `owner`'s.
    fn release(&mut self, owner: Owner, grants: &[(Link, u16)]) -> u64 {
        let mut n = 0;
        for k in grants {
            if self.entries.get(k).is_some_and(|e| e.0 == owner) {
                self.entries.remove(k);
                n += 1;
            }
        }
        n
    }

    /// Every entry, by link then VCI.
    pub fn entries(&self) -> Vec<Entry> {
        self.entries
            .iter()
            .map(|(&(link, vci), &(owner, expires))| Entry {
                link,
                vci,
                owner,
                expires,
            })
            .collect()
    }

    /// The file form.
    fn to_text(&self) -> String {
        let mut s = String::from("aurora-vci-table 1\n");
        for e in self.entries() {
            s += &format!("{} {} {} {}\n", e.link.0, e.vci, e.owner.0, e.expires);
        }
        s
    }

    /// Reads the file form; `path` names it in problems.
    fn from_text(text: &str, path: &str, limits: &Limits) -> Result<State, TableError> {
        let bad = |line: usize, problem: String| TableError::Parse {
            path: path.to_string(),
            line,
            problem,
        };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            None => return Ok(State::default()),
            Some((_, "aurora-vci-table 1")) => {}
            Some((_, other)) => {
                return Err(bad(
                    1,
                    format!(
                        "\"{}\" is not \"aurora-vci-table 1\"",
                        other.chars().take(40).collect::<String>()
                    ),
                ))
            }
        }
        let mut st = State::default();
        for (i, line) in lines {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.is_empty() {
                continue;
            }
            if f.len() != 4 {
                return Err(bad(
                    i + 1,
                    format!("{} fields, not 4 (link vci owner expires)", f.len()),
                ));
            }
            let link = f[0]
                .parse::<u32>()
                .map_err(|e| bad(i + 1, format!("link \"{}\": {e}", f[0])))?;
            let vci = f[1]
                .parse::<u16>()
                .map_err(|e| bad(i + 1, format!("VCI \"{}\": {e}", f[1])))?;
            let owner = f[2]
                .parse::<u32>()
                .map_err(|e| bad(i + 1, format!("owner \"{}\": {e}", f[2])))?;
            let exp = f[3]
                .parse::<u64>()
                .map_err(|e| bad(i + 1, format!("expiry \"{}\": {e}", f[3])))?;
            if st.entries.len() >= limits.entries {
                return Err(bad(i + 1, format!("more than {} entries", limits.entries)));
            }
            if st
                .entries
                .insert((Link(link), vci), (Owner(owner), exp))
                .is_some()
            {
                return Err(bad(i + 1, format!("VCI {vci} on link {link} twice")));
            }
        }
        Ok(st)
    }
}

/// A network's VCI table.
pub trait VciTable {
    /// One VCI on every link of `hops` for `owner`, leased for `lease` ns
    /// from `now`: all, or an error and none.
    fn allocate(
        &self,
        owner: Owner,
        hops: &[Link],
        now: u64,
        lease: u64,
    ) -> Result<Vec<u16>, TableError>;
    /// Extends `owner`'s `grants` to `now + lease`; how many were its own
    /// (the others are counted and left alone).
    fn renew(
        &self,
        owner: Owner,
        grants: &[(Link, u16)],
        now: u64,
        lease: u64,
    ) -> Result<u64, TableError>;
    /// Frees `owner`'s `grants`; how many were its own.
    fn release(&self, owner: Owner, grants: &[(Link, u16)], now: u64) -> Result<u64, TableError>;
    /// Every live entry at `now`.
    fn entries(&self, now: u64) -> Result<Vec<Entry>, TableError>;
    /// What this handle on the table did so far.
    fn counters(&self) -> Counters;
}

/// Applies `op` to `st` at `now` under the table's rules, counting.
fn apply<R>(
    st: &mut State,
    counters: &mut Counters,
    now: u64,
    op: impl FnOnce(&mut State, &mut Counters) -> R,
) -> R {
    counters.reclaimed += st.expire(now);
    op(st, counters)
}

fn allocate_in(
    st: &mut State,
    c: &mut Counters,
    limits: &Limits,
    owner: Owner,
    hops: &[Link],
    now: u64,
    lease: u64,
) -> Result<Vec<u16>, TableError> {
    apply(st, c, now, |st, c| {
        let r = st.allocate(owner, hops, now.saturating_add(lease), limits);
        match r {
            Ok(_) => c.allocated += 1,
            Err(_) => c.refused += 1,
        }
        r
    })
}

fn renew_in(
    st: &mut State,
    c: &mut Counters,
    owner: Owner,
    grants: &[(Link, u16)],
    now: u64,
    lease: u64,
) -> u64 {
    apply(st, c, now, |st, c| {
        let n = st.renew(owner, grants, now.saturating_add(lease));
        c.renewed += n;
        c.not_owner += grants.len() as u64 - n;
        n
    })
}

fn release_in(
    st: &mut State,
    c: &mut Counters,
    owner: Owner,
    grants: &[(Link, u16)],
    now: u64,
) -> u64 {
    apply(st, c, now, |st, c| {
        let n = st.release(owner, grants);
        c.released += n;
        c.not_owner += grants.len() as u64 - n;
        n
    })
}

/// The table for hosts in one process: a mutex around the state.
#[derive(Debug, Default)]
pub struct MemTable {
    inner: Mutex<(State, Counters)>,
    limits: Limits,
}

impl MemTable {
    /// An empty table under `limits`.
    pub fn new(limits: Limits) -> Self {
        MemTable {
            inner: Mutex::new((State::default(), Counters::default())),
            limits,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State, &mut Counters) -> R) -> R {
        // A panic while holding the lock leaves a state that is still
        // whole (every change is one map operation), so go on with it.
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (st, c) = &mut *g;
        f(st, c)
    }
}

impl VciTable for MemTable {
    fn allocate(
        &self,
        owner: Owner,
        hops: &[Link],
        now: u64,
        lease: u64,
    ) -> Result<Vec<u16>, TableError> {
        self.with(|st, c| allocate_in(st, c, &self.limits, owner, hops, now, lease))
    }
    fn renew(
        &self,
        owner: Owner,
        grants: &[(Link, u16)],
        now: u64,
        lease: u64,
    ) -> Result<u64, TableError> {
        Ok(self.with(|st, c| renew_in(st, c, owner, grants, now, lease)))
    }
    fn release(&self, owner: Owner, grants: &[(Link, u16)], now: u64) -> Result<u64, TableError> {
        Ok(self.with(|st, c| release_in(st, c, owner, grants, now)))
    }
    fn entries(&self, now: u64) -> Result<Vec<Entry>, TableError> {
        Ok(self.with(|st, c| apply(st, c, now, |st, _| st.entries())))
    }
    fn counters(&self) -> Counters {
        self.with(|_, c| *c)
    }
}

/// The table for hosts in several processes on one machine: a text file,
/// read, changed and rewritten under an exclusive advisory lock at each
/// operation. Each handle (each process, or each thread that opens its
/// own) counts what it did.
#[derive(Debug)]
pub struct FileTable {
    path: PathBuf,
    limits: Limits,
    counters: Mutex<Counters>,
}

impl FileTable {
    /// A handle on the table at `path` (made empty if it does not exist).
    pub fn open(path: &Path, limits: Limits) -> Result<Self, TableError> {
        let t = FileTable {
            path: path.to_path_buf(),
            limits,
            counters: Mutex::new(Counters::default()),
        };
        t.locked(0, |_, _| ())?;
        Ok(t)
    }

    fn io(&self, what: &str, e: std::io::Error) -> TableError {
        TableError::Io {
            path: self.path.display().to_string(),
            problem: format!("cannot {what}: {e}"),
        }
    }

    /// Runs `f` on the table's state at `now` with the file locked, and
    /// writes the state back if `f` changed it.
    fn locked<R>(
        &self,
        now: u64,
        f: impl FnOnce(&mut State, &mut Counters) -> R,
    ) -> Result<R, TableError> {
        let mut file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .map_err(|e| self.io("open it", e))?;
        file.lock().map_err(|e| self.io("lock it", e))?;
        let mut text = String::new();
        // A table larger than its entry limit allows is refused unread.
        // The longest line: a u32, a u16, a u32 and a u64 with their
        // spaces and newline (49 bytes); and the header.
        let most = (self.limits.entries as u64 + 1).saturating_mul(49);
        (&mut file)
            .take(most + 1)
            .read_to_string(&mut text)
            .map_err(|e| self.io("read it", e))?;
        if text.len() as u64 > most {
            return Err(TableError::Parse {
                path: self.path.display().to_string(),
                line: 0,
                problem: format!("longer than {most} bytes"),
            });
        }
        let mut st = State::from_text(&text, &self.path.display().to_string(), &self.limits)?;
        let before = st.clone();
        let mut c = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let r = apply(&mut st, &mut c, now, f);
        if st != before || text.is_empty() {
            let out = st.to_text();
            file.seek(SeekFrom::Start(0))
                .map_err(|e| self.io("rewind it", e))?;
            file.set_len(0).map_err(|e| self.io("truncate it", e))?;
            file.write_all(out.as_bytes())
                .map_err(|e| self.io("write it", e))?;
            file.flush().map_err(|e| self.io("write it", e))?;
        }
        // Closing the file releases the lock.
        Ok(r)
    }
}

impl VciTable for FileTable {
    fn allocate(
        &self,
        owner: Owner,
        hops: &[Link],
        now: u64,
        lease: u64,
    ) -> Result<Vec<u16>, TableError> {
        self.locked(now, |st, c| {
            allocate_in(st, c, &self.limits, owner, hops, now, lease)
        })?
    }
    fn renew(
        &self,
        owner: Owner,
        grants: &[(Link, u16)],
        now: u64,
        lease: u64,
    ) -> Result<u64, TableError> {
        self.locked(now, |st, c| renew_in(st, c, owner, grants, now, lease))
    }
    fn release(&self, owner: Owner, grants: &[(Link, u16)], now: u64) -> Result<u64, TableError> {
        self.locked(now, |st, c| release_in(st, c, owner, grants, now))
    }
    fn entries(&self, now: u64) -> Result<Vec<Entry>, TableError> {
        self.locked(now, |st, _| st.entries())
    }
    fn counters(&self) -> Counters {
        *self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        first: 32,
        last: 35,
        entries: 100,
        links: BTreeMap::new(),
    };

    #[test]
    fn lowest_free_vcis_all_links_or_none() {
        let t = MemTable::new(L);
        let a = t.allocate(Owner(1), &[Link(0), Link(1)], 0, 100).unwrap();
        assert_eq!(a, [32, 32]);
        let b = t.allocate(Owner(2), &[Link(1), Link(2)], 0, 100).unwrap();
        assert_eq!(b, [33, 32]);
        // Link 1 has 34 and 35 left: a path crossing it three times fails
        // whole.
        assert_eq!(
            t.allocate(Owner(3), &[Link(2), Link(1), Link(1), Link(1)], 0, 100),
            Err(TableError::NoFreeVci(1))
        );
        assert_eq!(t.entries(0).unwrap().len(), 4);
        // A freed VCI is the next one handed out.
        assert_eq!(t.release(Owner(1), &[(Link(1), 32)], 0).unwrap(), 1);
        assert_eq!(t.allocate(Owner(3), &[Link(1)], 0, 100).unwrap(), [32]);
        let c = t.counters();
        assert_eq!((c.allocated, c.refused, c.released), (3, 1, 1));
    }

    #[test]
    fn a_link_with_a_range_of_its_own_hands_out_only_that_range() {
        let t = MemTable::new(Limits {
            links: BTreeMap::from([(Link(7), (40, 41))]),
            ..L
        });
        assert_eq!(
            t.allocate(Owner(1), &[Link(6), Link(7)], 0, 9).unwrap(),
            [32, 40]
        );
        assert_eq!(t.allocate(Owner(1), &[Link(7)], 0, 9).unwrap(), [41]);
        assert_eq!(
            t.allocate(Owner(2), &[Link(6), Link(7)], 0, 9),
            Err(TableError::NoFreeVci(7))
        );
        // An empty range hands out nothing.
        let none = MemTable::new(Limits {
            links: BTreeMap::from([(Link(7), (41, 40))]),
            ..L
        });
        assert_eq!(
            none.allocate(Owner(1), &[Link(7)], 0, 9),
            Err(TableError::NoFreeVci(7))
        );
    }

    #[test]
    fn only_the_owner_renews_or_releases_and_leases_expire() {
        let t = MemTable::new(L);
        t.allocate(Owner(1), &[Link(0)], 0, 100).unwrap();
        assert_eq!(t.release(Owner(2), &[(Link(0), 32)], 10).unwrap(), 0);
        assert_eq!(t.renew(Owner(2), &[(Link(0), 32)], 10, 1000).unwrap(), 0);
        assert_eq!(t.counters().not_owner, 2);
        assert_eq!(t.renew(Owner(1), &[(Link(0), 32)], 50, 100).unwrap(), 1);
        // Renewed to 150: alive at 149, gone at 150.
        assert_eq!(t.entries(149).unwrap().len(), 1);
        assert!(t.entries(150).unwrap().is_empty());
        assert_eq!(t.counters().reclaimed, 1);
    }

    #[test]
    fn the_file_form_round_trips_and_bad_files_are_named() {
        let mut st = State::default();
        st.allocate(Owner(7), &[Link(3), Link(9)], 12345, &L)
            .unwrap();
        let text = st.to_text();
        assert_eq!(text, "aurora-vci-table 1\n3 32 7 12345\n9 32 7 12345\n");
        assert_eq!(State::from_text(&text, "t", &L).unwrap(), st);
        let e = State::from_text("aurora-vci-table 1\n3 32 7\n", "t", &L).unwrap_err();
        assert_eq!(
            e.to_string(),
            "VCI table t:2: 3 fields, not 4 (link vci owner expires)"
        );
        let e = State::from_text("hello\n", "t", &L).unwrap_err();
        assert!(e.to_string().starts_with("VCI table t:1:"), "{e}");
        let e = State::from_text("aurora-vci-table 1\n1 70000 1 1\n", "t", &L).unwrap_err();
        assert!(e.to_string().contains("VCI \"70000\""), "{e}");
        let e = State::from_text("aurora-vci-table 1\n1 40 1 1\n1 40 2 1\n", "t", &L).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
    }
}
