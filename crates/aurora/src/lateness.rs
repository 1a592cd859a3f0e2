//! The lateness part of real-time reports: per node, how far behind its
//! schedule it ran, and the run's verdict on itself (see
//! `aurora_engine::lateness` for what is measured and the thresholds).

use aurora_engine::NodeId;
use serde::Serialize;

/// One node's lateness.
#[derive(Debug, Serialize)]
pub struct NodeRow {
    /// Node name.
    pub node: String,
    /// Events handled.
    pub events: u64,
    /// Of those, handled more than 1 ms late.
    pub late: u64,
    /// Event lateness, microseconds: median, 99th percentile, maximum.
    pub events_us: [f64; 3],
    /// Reads of links from other processes that handed this node frames.
    pub inputs: u64,
    /// Of those, reads whose oldest frame had waited in its link more than
    /// 1 ms.
    pub late_inputs: u64,
    /// How long the oldest frame of each read had waited, microseconds:
    /// median, 99th percentile, maximum (zeros when there were none).
    pub inputs_us: [f64; 3],
    /// Why this node makes the run unfaithful, if it does.
    pub problem: Option<String>,
}

/// A real-time run's lateness and verdict.
#[derive(Debug, Serialize)]
pub struct LatenessReport {
    /// Per node.
    pub nodes: Vec<NodeRow>,
    /// The run ended this long after the duration asked for, ms.
    pub overrun_ms: f64,
    /// Whether the results are what the network would have done in real
    /// time.
    pub faithful: bool,
    /// One sentence saying so, or why not.
    pub sentence: String,
}

fn us3(h: &aurora_engine::lateness::Histogram) -> [f64; 3] {
    [h.quantile(0.5), h.quantile(0.99), h.max()].map(|v| v as f64 / 1e3)
}

/// The report of `l`, nodes named by `name`; `advice` ends the sentence of
/// an unfaithful run.
pub fn report(
    l: &aurora_engine::lateness::Lateness,
    name: &dyn Fn(usize) -> String,
    advice: &str,
) -> LatenessReport {
    let v = l.verdict(name, advice);
    LatenessReport {
        nodes: l
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeRow {
                node: name(i),
                events: n.events.count(),
                late: n.late_events,
                events_us: us3(&n.events),
                inputs: n.inputs.count(),
                late_inputs: n.late_inputs,
                inputs_us: us3(&n.inputs),
                problem: n.problem(),
            })
            .collect(),
        overrun_ms: l.overrun().as_secs_f64() * 1e3,
        faithful: v.faithful,
        sentence: v.sentence,
    }
}

/// The report of a run of `net` against `wall`, which was asked to last
/// `asked` (if it had a length), nodes named as [`names_in`] names them.
pub fn of_network<F: aurora_net::Frame>(
    net: &aurora_topo::Network<F>,
    wall: &aurora_engine::clock::Wall,
    asked: Option<std::time::Duration>,
    advice: &str,
) -> LatenessReport {
    let l = wall.lateness(asked);
    let names = names_in(net, l.nodes.len());
    report(&l, &|i| names[i].clone(), advice)
}

/// Node names by id for `n` nodes: those `named` gives, "node i" for the
/// rest.
pub fn names<'a>(n: usize, named: impl Iterator<Item = (&'a String, NodeId)>) -> Vec<String> {
    let mut v: Vec<String> = (0..n).map(|i| format!("node {i}")).collect();
    for (name, id) in named {
        if let Some(slot) = v.get_mut(id.0 as usize) {
            slot.clone_from(name);
        }
    }
    v
}

/// Node names by id for the `n` nodes of `net` (an ATOMIC LAN's nodes as
/// [`aurora_topo::AtomicPart::node_names`] names them).
pub fn names_in<F: aurora_net::Frame>(net: &aurora_topo::Network<F>, n: usize) -> Vec<String> {
    let atomic: Vec<(String, NodeId)> = net.atomic.iter().flat_map(|a| a.node_names()).collect();
    names(
        n,
        (net.hosts
            .iter()
            .chain(&net.ip_nodes)
            .map(|(n, id)| (n, *id)))
        .chain(
            net.switches
                .iter()
                .chain(&net.routers)
                .map(|(n, id, _)| (n, *id)),
        )
        .chain(atomic.iter().map(|(n, id)| (n, *id))),
    )
}

/// Nodes shown in the text: the worst ones.
const SHOWN: usize = 5;

/// The lateness table (the worst nodes) and the verdict, as text.
pub fn text(r: &LatenessReport) -> String {
    let mut rows: Vec<&NodeRow> = r.nodes.iter().collect();
    rows.sort_by(|a, b| {
        let key = |n: &NodeRow| (n.problem.is_some(), n.events_us[2].max(n.inputs_us[2]));
        let (ka, kb) = (key(a), key(b));
        kb.0.cmp(&ka.0).then(kb.1.total_cmp(&ka.1))
    });
    // Waits of input from other processes, where there was any.
    let inputs = r.nodes.iter().any(|n| n.inputs > 0);
    let mut s = format!(
        "\n{:<12} {:>8} {:>6} {:>8} {:>8} {:>9}",
        "late (us)", "events", "late", "p50", "p99", "max"
    );
    if inputs {
        s += &format!(
            " {:>8} {:>6} {:>8} {:>9}",
            "reads", "late", "read p99", "read max"
        );
    }
    s.push('\n');
    for n in rows.iter().take(SHOWN) {
        s += &format!(
            "{:<12} {:>8} {:>6} {:>8.0} {:>8.0} {:>9.0}",
            n.node, n.events, n.late, n.events_us[0], n.events_us[1], n.events_us[2],
        );
        if inputs {
            s += &format!(
                " {:>8} {:>6} {:>8.0} {:>9.0}",
                n.inputs, n.late_inputs, n.inputs_us[1], n.inputs_us[2]
            );
        }
        s.push('\n');
    }
    if inputs {
        s += "(reads: batches from other processes; read p99/max: how long the oldest frame of a batch waited in its link before it was read)\n";
    }
    if rows.len() > SHOWN {
        s += &format!("({} more nodes, less late)\n", rows.len() - SHOWN);
    }
    s += &format!(
        "the run ended {:.1} ms late\n{}\n",
        r.overrun_ms, r.sentence
    );
    s
}
