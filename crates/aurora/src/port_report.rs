//! The report of output ports under a discipline (`[[port]]`): per queue,
//! cells served and their share of the port, cells dropped by reason, how
//! long served cells waited, and cells served per slice of time.

use aurora_engine::cell_port::CellPort;
use aurora_engine::Engine;
use aurora_topo::qos::PortPlan;
use serde::Serialize;

/// One queue of a port.
#[derive(Debug, Serialize)]
pub struct QueueRow {
    /// The queue: a PVC, a priority level, a class, or `other`.
    pub name: String,
    /// Cells served.
    pub served: u64,
    /// Of the cells the port served, this queue's share.
    pub share: f64,
    /// Cells dropped, by reason.
    pub dropped: Vec<(String, u64)>,
    /// How long served cells waited, microseconds: median, 99th
    /// percentile, maximum.
    pub wait_us: [f64; 3],
    /// Cells served in each slice of `bin_us`, from time 0.
    pub series: Vec<u64>,
    /// Microseconds of each slice the queue held cells.
    pub busy_us: Vec<f64>,
    /// The slices' length, microseconds.
    pub bin_us: f64,
}

/// One port.
#[derive(Debug, Serialize)]
pub struct PortReport {
    /// `node:port`.
    pub port: String,
    /// Its discipline.
    pub discipline: String,
    /// Its queues.
    pub queues: Vec<QueueRow>,
}

/// The report of every port of `ports` in `sim`.
pub fn report<F: aurora_net::Frame>(
    ports: &[(aurora_engine::NodeId, PortPlan)],
    sim: &Engine<F>,
) -> Vec<PortReport> {
    ports
        .iter()
        .filter_map(|(id, plan)| {
            let p = sim.port::<CellPort>(*id, plan.port)?;
            let total: u64 = p.stats().iter().map(|s| s.served).sum();
            let queues = plan
                .queues
                .iter()
                .zip(p.stats())
                .map(|(name, s)| QueueRow {
                    name: name.clone(),
                    served: s.served,
                    share: s.served as f64 / total.max(1) as f64,
                    dropped: s.dropped.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
                    wait_us: [s.delay.quantile(0.5), s.delay.quantile(0.99), s.delay.max()]
                        .map(|v| v as f64 / 1e3),
                    series: s.series.counts.clone(),
                    busy_us: s.series.busy.iter().map(|&b| b as f64 / 1e3).collect(),
                    bin_us: s.series.bin.as_nanos() as f64 / 1e3,
                })
                .collect();
            Some(PortReport {
                port: format!("{}:{}", plan.node, plan.port),
                discipline: plan.discipline.name().into(),
                queues,
            })
        })
        .collect()
}

/// The ports as text: a table per port.
pub fn text(ports: &[PortReport]) -> String {
    let mut s = String::new();
    for p in ports {
        s += &format!(
            "\nport {} ({}):\n{:<20} {:>10} {:>7} {:>10} {:>10} {:>10}  dropped\n",
            p.port, p.discipline, "queue", "served", "share", "wait p50", "p99", "max (us)"
        );
        for q in p
            .queues
            .iter()
            .filter(|q| q.served > 0 || !q.dropped.is_empty())
        {
            let dropped: Vec<String> = q.dropped.iter().map(|(r, n)| format!("{n} {r}")).collect();
            s += &format!(
                "{:<20} {:>10} {:>6.1}% {:>10.1} {:>10.1} {:>10.1}  {}\n",
                q.name,
                q.served,
                q.share * 100.0,
                q.wait_us[0],
                q.wait_us[1],
                q.wait_us[2],
                if dropped.is_empty() {
                    "-".to_string()
                } else {
                    dropped.join(", ")
                }
            );
        }
    }
    s
}

/// A PVC's traffic contract: how its host shaped to it and what its first
/// switch's policer found.
#[derive(Debug, Serialize)]
pub struct ContractRow {
    /// The PVC.
    pub pvc: String,
    /// The contract, as QoS text.
    pub contract: String,
    /// Shaped: PDUs that left after they fell due, and the longest wait
    /// (microseconds) from falling due to the first cell leaving.
    pub shaped: Option<(u64, f64)>,
    /// Policed at `switch:port`: cells conforming, tagged, dropped.
    pub policed: Option<(String, u64, u64, u64)>,
}

/// The contracts of `net`'s PVCs.
pub fn contracts<F: aurora_net::Frame>(net: &aurora_topo::Network<F>) -> Vec<ContractRow> {
    contract_rows(
        &net.pvcs,
        &net.switches,
        &|id| net.sim.node::<aurora_net::traffic::TrafficHost>(id),
        &|id| net.sim.node::<aurora_net::switch::AtmSwitch>(id),
    )
}

/// The contracts of `pvcs` as far as `host` and `switch` find the nodes
/// that shape and police them (by their ids in the whole network); a
/// process that runs neither end's node sees neither side (`None`).
pub fn contract_rows<'a>(
    pvcs: &[aurora_topo::PvcInfo],
    switches: &[(String, aurora_engine::NodeId, u16)],
    host: &dyn Fn(aurora_engine::NodeId) -> Option<&'a aurora_net::traffic::TrafficHost>,
    switch: &dyn Fn(aurora_engine::NodeId) -> Option<&'a aurora_net::switch::AtmSwitch>,
) -> Vec<ContractRow> {
    let name_of = |id: aurora_engine::NodeId| {
        switches
            .iter()
            .find(|s| s.1 == id)
            .map_or_else(|| format!("node {}", id.0), |s| s.0.clone())
    };
    pvcs.iter()
        .filter_map(|p| {
            let contract = p.contract?;
            let shaped = p
                .flows
                .first()
                .and_then(|&i| host(p.from)?.shaping(i))
                .map(|s| (s.late, s.max_delay.as_nanos() as f64 / 1e3));
            let policed = p.policed_at.and_then(|(sw, port, vc)| {
                let c = switch(sw)?.police_counters(port, vc)?;
                Some((
                    format!("{}:{port}", name_of(sw)),
                    c.conforming,
                    c.tagged,
                    c.dropped_nonconforming,
                ))
            });
            Some(ContractRow {
                pvc: p.name.clone(),
                contract: contract.to_string(),
                shaped,
                policed,
            })
        })
        .collect()
}

/// The contracts as text.
pub fn contracts_text(rows: &[ContractRow]) -> String {
    let mut s = String::new();
    if rows.is_empty() {
        return s;
    }
    s += &format!(
        "\n{:<20} {:<28} {:>10} {:>12}  policed at: conforming, tagged, dropped\n",
        "PVC contract", "", "late PDUs", "max wait us"
    );
    for r in rows {
        let (late, wait) = r
            .shaped
            .map_or(("-".to_string(), "-".to_string()), |(l, w)| {
                (l.to_string(), format!("{w:.1}"))
            });
        let policed = r.policed.as_ref().map_or("-".to_string(), |(at, c, t, d)| {
            format!("{at}: {c}, {t}, {d}")
        });
        s += &format!(
            "{:<20} {:<28} {:>10} {:>12}  {policed}\n",
            r.pvc, r.contract, late, wait
        );
    }
    s
}
