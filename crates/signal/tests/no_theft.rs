//! Many hosts open and close VCs at once on random networks with shared
//! links, each on its own thread (and, for the file table, its own open
//! handle, so the advisory lock is what keeps them apart): no two ever
//! hold the same VCI on a link at once, and after every lease has run out
//! nothing is left, whether a host closed its VCs or went away holding
//! them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aurora_signal::table::{FileTable, Limits, Link, MemTable, Owner, TableError, VciTable};
use proptest::prelude::*;

/// A small range, so hosts compete for VCIs and sometimes find none.
const LIMITS: Limits = Limits {
    first: 32,
    last: 41,
    entries: 10_000,
    links: std::collections::BTreeMap::new(),
};
/// Leases outlast the concurrent part of the test.
const LEASE: u64 = 1_000_000;

/// One host's plan: per step, the path it opens (links), whether it then
/// closes its oldest VC, and whether it goes away at the end holding what
/// it has.
#[derive(Clone, Debug)]
struct Plan {
    paths: Vec<Vec<u32>>,
    close: Vec<bool>,
    crash: bool,
}

fn plans(links: u32) -> impl Strategy<Value = Vec<Plan>> {
    let plan = (
        proptest::collection::vec(proptest::collection::vec(0..links, 1..4), 1..25),
        proptest::collection::vec(any::<bool>(), 25),
        any::<bool>(),
    )
        .prop_map(|(paths, close, crash)| Plan {
            paths,
            close,
            crash,
        });
    proptest::collection::vec(plan, 2..6)
}

/// Who believes they hold each (link, VCI) right now.
type Beliefs = Arc<Mutex<BTreeMap<(u32, u16), u32>>>;

/// Runs every host's plan on its own thread against the table `open`
/// gives each; returns how many entries the hosts that went away left.
fn run(plans: &[Plan], open: &(dyn Fn() -> Box<dyn VciTable + Send> + Sync)) -> u64 {
    let beliefs: Beliefs = Arc::default();
    let left = Arc::new(Mutex::new(0u64));
    std::thread::scope(|s| {
        for (h, plan) in plans.iter().enumerate() {
            let (beliefs, left) = (beliefs.clone(), left.clone());
            let table = open();
            s.spawn(move || {
                let me = Owner(h as u32);
                let mut held: Vec<Vec<(Link, u16)>> = Vec::new();
                for (step, path) in plan.paths.iter().enumerate() {
                    let hops: Vec<Link> = path.iter().map(|&l| Link(l)).collect();
                    match table.allocate(me, &hops, step as u64, LEASE) {
                        Ok(vcis) => {
                            assert_eq!(vcis.len(), hops.len());
                            let grants: Vec<(Link, u16)> = hops.into_iter().zip(vcis).collect();
                            let mut b = beliefs.lock().unwrap();
                            for &(l, v) in &grants {
                                if let Some(other) = b.insert((l.0, v), me.0) {
                                    panic!(
                                        "VCI {v} on link {} given to {} while {other} holds it",
                                        l.0, me.0
                                    );
                                }
                            }
                            held.push(grants);
                        }
                        Err(TableError::NoFreeVci(_)) => {}
                        Err(e) => panic!("{e}"),
                    }
                    if plan.close[step] && !held.is_empty() {
                        let grants = held.remove(0);
                        // Stop believing first: once released, another
                        // host may be given them.
                        {
                            let mut b = beliefs.lock().unwrap();
                            for &(l, v) in &grants {
                                assert_eq!(b.remove(&(l.0, v)), Some(me.0));
                            }
                        }
                        let n = table.release(me, &grants, step as u64).unwrap();
                        assert_eq!(n, grants.len() as u64, "released only its own, all of them");
                    }
                }
                if plan.crash {
                    *left.lock().unwrap() += held.iter().map(|g| g.len() as u64).sum::<u64>();
                } else {
                    for grants in held {
                        {
                            let mut b = beliefs.lock().unwrap();
                            for &(l, v) in &grants {
                                b.remove(&(l.0, v));
                            }
                        }
                        table.release(me, &grants, 30).unwrap();
                    }
                }
            });
        }
    });
    let n = *left.lock().unwrap();
    n
}

fn check(plans: &[Plan], open: &(dyn Fn() -> Box<dyn VciTable + Send> + Sync)) {
    let left = run(plans, open);
    let t = open();
    // Before the leases end, exactly what the crashed hosts held remains.
    assert_eq!(t.entries(100).unwrap().len() as u64, left);
    // After, nothing.
    assert!(t.entries(LEASE + 100).unwrap().is_empty());
    assert_eq!(t.counters().reclaimed, left);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn hosts_in_one_process_never_share_a_vci(plans in plans(5)) {
        let table = Arc::new(MemTable::new(LIMITS));
        struct Shared(Arc<MemTable>);
        impl VciTable for Shared {
            fn allocate(&self, o: Owner, h: &[Link], n: u64, l: u64) -> Result<Vec<u16>, TableError> { self.0.allocate(o, h, n, l) }
            fn renew(&self, o: Owner, g: &[(Link, u16)], n: u64, l: u64) -> Result<u64, TableError> { self.0.renew(o, g, n, l) }
            fn release(&self, o: Owner, g: &[(Link, u16)], n: u64) -> Result<u64, TableError> { self.0.release(o, g, n) }
            fn entries(&self, n: u64) -> Result<Vec<aurora_signal::table::Entry>, TableError> { self.0.entries(n) }
            fn counters(&self) -> aurora_signal::table::Counters { self.0.counters() }
        }
        check(&plans, &|| Box::new(Shared(table.clone())));
    }

}

proptest! {
    // Each operation opens, locks, reads and rewrites the file, and the
    // hosts wait for each other's locks: fewer cases.
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn hosts_sharing_a_file_never_share_a_vci(plans in plans(4)) {
        let dir = std::env::temp_dir().join(format!("aurora-vci-{}-{}", std::process::id(), rand_suffix(&plans)));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("vci.table");
        let _ = std::fs::remove_file(&path);
        check(&plans, &|| Box::new(FileTable::open(&path, LIMITS).unwrap()));
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A name for this case's folder (cases run one after another, but the
/// name keeps a failed case's file from meeting the next).
fn rand_suffix(plans: &[Plan]) -> usize {
    plans
        .iter()
        .map(|p| p.paths.len() * 31 + usize::from(p.crash))
        .sum()
}
