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
