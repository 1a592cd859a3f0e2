//! Splitting a network's nodes between workers.
//!
//! A split is only as fast as its lookahead: the partitions synchronise
//! every `L`, the least time a frame takes across a link that joins two of
//! them. So the plan cuts the links with the longest delays and keeps the
//! partitions about the same size: links are taken shortest delay first,
//! and the two groups of nodes a link joins become one unless that group
//! would outgrow its share of the nodes; links shorter than `min_cut` are
//! never cut, whatever the sizes, nor are links of zero crossing (the
//! engine gives that to a link into a node that holds its input, which a
//! cut would stop reaching the sender; see
//! [`aurora_net::Outbox::hold_input`]), unless pins put their ends on
//! different workers. The groups are then packed, largest first, onto the
//! worker with the fewest nodes. Ties go to the lower node or worker
//! number, so a plan is a function of the topology alone.

use aurora_time::Duration;

/// Links that frames cross faster than this are not cut by default: the
/// workers would meet more often than they work.
pub const MIN_CUT: Duration = Duration::from_micros(20);

/// One link as the planner sees it: its two nodes and its delay.
#[derive(Clone, Copy, Debug)]
pub struct Edge {
    /// One end's node.
    pub a: u32,
    /// The other end's node.
    pub b: u32,
    /// The least time a frame takes across it.
    pub crossing: Duration,
}

fn find(up: &mut [u32], mut x: u32) -> u32 {
    while up[x as usize] != x {
        let next = up[up[x as usize] as usize];
        up[x as usize] = next;
        x = next;
    }
    x
}

/// A worker for each of `nodes` nodes, at most `workers` of them, joined
/// by `edges`; links crossing in less than `min_cut` stay inside a
/// partition, except between nodes `pins` puts on different workers
/// (node, worker; the worker taken modulo `workers`). Workers are numbered
/// from 0 with no gaps.
pub fn plan(
    nodes: usize,
    edges: &[Edge],
    workers: usize,
    min_cut: Duration,
    pins: &[(u32, u32)],
) -> Vec<u32> {
    let workers = workers.clamp(1, nodes.max(1));
    if workers == 1 {
        return vec![0; nodes];
    }
    let mut up: Vec<u32> = (0..nodes as u32).collect();
    let mut size = vec![1usize; nodes];
    // Per group root: the worker its pinned nodes are on, if any.
    let mut pin: Vec<Option<u32>> = vec![None; nodes];
    for &(n, w) in pins {
        if let Some(p) = pin.get_mut(n as usize) {
            *p = Some(w % workers as u32);
        }
    }
    let share = nodes.div_ceil(workers);
    let mut order: Vec<&Edge> = edges
        .iter()
        .filter(|e| (e.a as usize) < nodes && (e.b as usize) < nodes)
        .collect();
    order.sort_by_key(|e| (e.crossing, e.a.min(e.b), e.a.max(e.b)));
    for e in order {
        let (a, b) = (find(&mut up, e.a), find(&mut up, e.b));
        if a == b {
            continue;
        }
        let (pa, pb) = (pin[a as usize], pin[b as usize]);
        if pa.is_some() && pb.is_some() && pa != pb {
            continue;
        }
        if e.crossing < min_cut
            || e.crossing == Duration::ZERO
            || size[a as usize] + size[b as usize] <= share
        {
            let (keep, gone) = (a.min(b), a.max(b));
            up[gone as usize] = keep;
            size[keep as usize] += size[gone as usize];
            pin[keep as usize] = pa.or(pb);
        }
    }
    // Pinned groups onto their workers; the rest, largest first, onto the
    // emptiest worker.
    let mut groups: Vec<(usize, u32)> = (0..nodes as u32)
        .filter(|&i| find(&mut up, i) == i)
        .map(|i| (size[i as usize], i))
        .collect();
    groups.sort_by_key(|&(n, root)| (pin[root as usize].is_none(), std::cmp::Reverse(n), root));
    let mut load = vec![0usize; workers];
    let mut worker_of_root = vec![u32::MAX; nodes];
    for (n, root) in groups {
        let w = match pin[root as usize] {
            Some(w) => w as usize,
            None => (0..workers).min_by_key(|&w| (load[w], w)).unwrap_or(0),
        };
        load[w] += n;
        worker_of_root[root as usize] = w as u32;
    }
    let mut home: Vec<u32> = (0..nodes as u32)
        .map(|i| worker_of_root[find(&mut up, i) as usize])
        .collect();
    // Number the workers used from 0, in order of their first node.
    let mut rename = vec![u32::MAX; workers];
    let mut next = 0;
    for h in &mut home {
        if rename[*h as usize] == u32::MAX {
            rename[*h as usize] = next;
            next += 1;
        }
        *h = rename[*h as usize];
    }
    home
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: i64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn a_chain_is_cut_at_its_longest_link() {
        // 0-1-2-3 | 4-5-6-7, the middle link long.
        let mut edges: Vec<Edge> = (0..7)
            .map(|i| Edge {
                a: i,
                b: i + 1,
                crossing: us(5),
            })
            .collect();
        edges[3].crossing = us(1000);
        let home = plan(8, &edges, 2, Duration::ZERO, &[]);
        assert_eq!(home, vec![0, 0, 0, 0, 1, 1, 1, 1]);
        // Links shorter than min_cut are never cut: one worker.
        assert_eq!(plan(8, &edges, 2, us(2000), &[]), vec![0; 8]);
        // One worker, or more workers than nodes.
        assert_eq!(plan(8, &edges, 1, Duration::ZERO, &[]), vec![0; 8]);
        assert_eq!(plan(2, &edges[..1], 8, Duration::ZERO, &[]), vec![0, 1]);
    }

    #[test]
    fn pins_are_kept_and_split_what_they_must() {
        let edges: Vec<Edge> = (0..7)
            .map(|i| Edge {
                a: i,
                b: i + 1,
                crossing: us(5),
            })
            .collect();
        // Pinned apart across short links that would never be cut.
        let home = plan(8, &edges, 2, us(100), &[(0, 0), (7, 1)]);
        assert_ne!(home[0], home[7]);
        // Worker numbers are taken modulo the workers.
        let home = plan(8, &edges, 2, Duration::ZERO, &[(0, 3), (7, 2)]);
        assert_ne!(home[0], home[7]);
    }

    #[test]
    fn unconnected_nodes_spread_evenly() {
        let home = plan(6, &[], 3, Duration::ZERO, &[]);
        for w in 0..3 {
            assert_eq!(home.iter().filter(|&&h| h == w).count(), 2);
        }
    }
}
