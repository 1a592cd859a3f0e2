//! `aurora bench compile`: how long checking and compiling a topology file
//! takes as the number of PVCs grows.
//!
//! Each topology is made in memory: `switches` ATM switches in a ring (each
//! joined to the next by an OC-12c trunk), four traffic hosts on every
//! switch, and PVCs from a host on one switch to a host a few switches
//! along the ring (1 to 8 trunks), each with a flow. Aurora chooses every
//! VC, so the trunks fill up with many circuits each.

use std::fmt::Write as _;
use std::time::Instant;

/// Hosts on each switch.
const HOSTS_PER_SWITCH: usize = 4;

/// A topology of `switches` switches in a ring and `pvcs` PVCs with a flow
/// each, as text.
pub fn topology(switches: usize, pvcs: usize) -> String {
    let switches = switches.max(2);
    let mut t = String::new();
    // Ports: 0 and 1 for the ring, then one per host.
    for s in 0..switches {
        let _ = writeln!(
            t,
            "[[switch]]\nname = \"s{s}\"\nports = {}\n",
            2 + HOSTS_PER_SWITCH
        );
        for h in 0..HOSTS_PER_SWITCH {
            let _ = writeln!(
                t,
                "[[host]]\nname = \"h{s}-{h}\"\n\n[[link]]\na = \"h{s}-{h}\"\nb = \"s{s}:{}\"\n",
                2 + h
            );
        }
    }
    for s in 0..switches {
        let _ = writeln!(
            t,
            "[[link]]\na = \"s{s}:1\"\nb = \"s{}:0\"\nrate = \"oc12\"\ndelay = \"10us\"\n",
            (s + 1) % switches
        );
    }
    for p in 0..pvcs {
        let from = p % switches;
        let hops = 1 + (p / switches) % 8.min(switches - 1).max(1);
        let mut path = vec![format!("\"h{from}-{}\"", p % HOSTS_PER_SWITCH)];
        for k in 0..=hops {
            path.push(format!("\"s{}\"", (from + k) % switches));
        }
        let to = (from + hops) % switches;
        path.push(format!("\"h{to}-{}\"", (p / 7) % HOSTS_PER_SWITCH));
        let _ = writeln!(
            t,
            "[[pvc]]\nname = \"p{p}\"\npath = [{}]\n\n[[flow]]\npvc = \"p{p}\"\nsdu = 1000\ncount = 10\ninterval = \"1ms\"\n",
            path.join(", ")
        );
    }
    t
}

/// One measurement.
pub struct Row {
    /// PVCs in the topology.
    pub pvcs: usize,
    /// Bytes of text.
    pub bytes: usize,
    /// Seconds `aurora_topo::compile` took (the fastest of the runs).
    pub compile: f64,
    /// Seconds `aurora_topo::load` took (compile, then build the
    /// virtual-time network; the fastest of the runs).
    pub load: f64,
}

/// `aurora bench compile`: a ring of `switches` switches with 1,000, 2,000
/// and 5,000 PVCs, the fastest of `runs` compilations of each.
pub fn main(switches: usize, runs: usize) -> Result<(), String> {
    println!(
        "aurora bench compile ({switches} switches in a ring, {} hosts, PVCs over 1 to 8 trunks, a flow each)",
        switches * HOSTS_PER_SWITCH
    );
    println!(
        "{:>6} {:>10} {:>11} {:>12} {:>11}",
        "PVCs", "KiB", "compile s", "PVCs/s", "load s"
    );
    for r in run(switches, &[1_000, 2_000, 5_000], runs)? {
        println!(
            "{:>6} {:>10} {:>11.4} {:>12.0} {:>11.4}",
            r.pvcs,
            r.bytes / 1024,
            r.compile,
            r.pvcs as f64 / r.compile,
            r.load
        );
    }
    Ok(())
}

/// Compiles a topology of `switches` switches with each number of PVCs in
/// `sizes`, `runs` times each, keeping the fastest.
pub fn run(switches: usize, sizes: &[usize], runs: usize) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for &pvcs in sizes {
        let text = topology(switches, pvcs);
        let (mut compile, mut load) = (f64::INFINITY, f64::INFINITY);
        let bad = |p: aurora_topo::Problems| format!("the generated topology has problems: {p}");
        for _ in 0..runs.max(1) {
            let t0 = Instant::now();
            let bp = aurora_topo::compile(&text).map_err(bad)?;
            compile = compile.min(t0.elapsed().as_secs_f64());
            if bp.pvcs.len() != pvcs {
                return Err(format!(
                    "the generated topology compiled to {} PVCs, not {pvcs}",
                    bp.pvcs.len()
                ));
            }
            drop(bp);
            let t0 = Instant::now();
            let net = aurora_topo::load(&text, 1).map_err(bad)?;
            load = load.min(t0.elapsed().as_secs_f64());
            drop(net);
        }
        rows.push(Row {
            pvcs,
            bytes: text.len(),
            compile,
            load,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_topologies_compile_with_every_pvc_and_flow() {
        let bp = aurora_topo::compile(&topology(10, 50)).unwrap();
        assert_eq!(bp.pvcs.len(), 50);
        assert!(bp.pvcs.iter().all(|p| p.flows.len() == 1));
        assert_eq!(bp.hosts.len(), 10 * HOSTS_PER_SWITCH);
        assert_eq!(bp.switches.len(), 10);
        assert_eq!(bp.links.len(), 10 * HOSTS_PER_SWITCH + 10);
    }
}
