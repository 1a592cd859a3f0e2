//! Output ports under a discipline (`[[port]]` in a topology file): what the
//! file asked for, compiled ([`PortPlan`]), and the engine port made from
//! it ([`PortPlan::cell_port`]).

use aurora_engine::carry::Carries;
use aurora_engine::cell_port::{vc_key, CellPort};
use aurora_engine::{Engine, NodeId};
use aurora_net::PortId;
use aurora_sched::{Discipline, Limits, QueueId};
use aurora_time::{Duration, Instant};
use aurora_tm::discard::BufferLimits;
use aurora_wire::cell::Header;
use aurora_wire::cell::VcId;
use aurora_wire::CellBytes;
use rustc_hash::FxHashMap;

/// A port's discipline, with what it needs per queue.
#[derive(Clone, Debug)]
pub enum DisciplineSpec {
    /// First in, first out across all queues.
    Fifo,
    /// Strict priority: queue `i` is level `i`, 0 the highest.
    Priority,
    /// Deficit round robin, a quantum in cells per queue.
    Drr(Vec<u32>),
    /// Weighted fair queueing (PGPS), a weight per queue.
    Wfq(Vec<u32>),
    /// WF2Q+, a weight per queue.
    Wf2qPlus(Vec<u32>),
    /// Hierarchical WF2Q+ over a tree of classes whose leaves are the
    /// queues.
    Hwfq(aurora_sched::ClassTree),
    /// One WF2Q+ over the tree's leaves, their weights recomputed from the
    /// tree and the busy leaves in a walk every `update_period`.
    Flat(aurora_sched::ClassTree, Duration),
}

impl DisciplineSpec {
    /// The name a topology file uses.
    pub fn name(&self) -> &'static str {
        match self {
            DisciplineSpec::Fifo => "fifo",
            DisciplineSpec::Priority => "priority",
            DisciplineSpec::Drr(_) => "drr",
            DisciplineSpec::Wfq(_) => "wfq",
            DisciplineSpec::Wf2qPlus(_) => "wf2q+",
            DisciplineSpec::Hwfq(_) => "hwfq",
            DisciplineSpec::Flat(..) => "flat",
        }
    }
}

/// An output port as the file set it up, compiled.
#[derive(Clone, Debug)]
pub struct PortPlan {
    /// The node.
    pub node: String,
    /// Its port.
    pub port: PortId,
    /// The discipline.
    pub discipline: DisciplineSpec,
    /// Each queue's name (a PVC, a priority level, a leaf class), in queue
    /// order.
    pub queues: Vec<String>,
    /// The queue of cells of VCs no PVC set up (`other`, the last), if
    /// the port has one (a port with a class tree has none: such cells
    /// are dropped as `no_class`).
    pub other: Option<QueueId>,
    /// The VC each PVC crossing the port has on its link, and its queue.
    pub vcs: Vec<(VcId, QueueId)>,
    /// Buffer limits in cells.
    pub limits: Limits,
    /// PDU discard, if the port has it.
    pub discard: Option<BufferLimits>,
    /// The link's rate, cells per second.
    pub rate: f64,
    /// The slices of time service is counted in.
    pub bin: Duration,
}

impl PortPlan {
    /// The port the engine runs: the discipline over the plan's queues.
    pub fn cell_port(&self) -> CellPort {
        let n = self.queues.len();
        let limits = self.limits;
        let d: Box<dyn Discipline<(Instant, CellBytes)>> = match &self.discipline {
            DisciplineSpec::Fifo => Box::new(aurora_sched::Fifo::new(n, limits)),
            DisciplineSpec::Priority => Box::new(aurora_sched::Priority::new(n, limits)),
            DisciplineSpec::Drr(q) => Box::new(aurora_sched::Drr::new(q, limits)),
            DisciplineSpec::Wfq(w) => Box::new(aurora_sched::Wfq::new(
                w,
                self.rate.round().max(1.0) as u64,
                limits,
            )),
            DisciplineSpec::Wf2qPlus(w) => Box::new(aurora_sched::Wf2qPlus::new(w, limits)),
            DisciplineSpec::Hwfq(tree) => Box::new(aurora_sched::Hwfq::new(tree, limits)),
            DisciplineSpec::Flat(tree, period) => Box::new(aurora_sched::FlatApprox::new(
                tree,
                limits,
                aurora_sched::FlatConfig::new(*period),
            )),
        };
        let vcs: FxHashMap<u32, (QueueId, usize)> = self
            .vcs
            .iter()
            .enumerate()
            .map(|(i, &(vc, q))| (key_of(vc), (q, i)))
            .collect();
        CellPort::new(d, n, limits.queue, vcs, self.other, self.discard, self.bin)
    }
}

/// The classification key of VC `vc`'s cells.
fn key_of(vc: VcId) -> u32 {
    let b = Header::data(vc).to_bytes4().unwrap_or([0; 4]);
    vc_key(&b)
}

impl crate::Blueprint {
    /// Each `[[port]]`, taken out of the blueprint, with the index of its
    /// node (a host or switch) in the whole network.
    pub(crate) fn take_port_plans(&mut self) -> Result<Vec<(usize, PortPlan)>, String> {
        std::mem::take(&mut self.ports)
            .into_iter()
            .map(|plan| {
                let id = self
                    .hosts
                    .iter()
                    .map(|(n, id)| (n, *id))
                    .chain(self.switches.iter().map(|(n, id, _)| (n, *id)))
                    .find(|(n, _)| **n == plan.node)
                    .map(|(_, id)| id.0 as usize)
                    .ok_or_else(|| format!("port {}:{} names no node", plan.node, plan.port))?;
                Ok((id, plan))
            })
            .collect()
    }
}

/// Puts each port of `plans` whose node `engine` runs (`local` gives its
/// id there from its index in the whole network) under its discipline;
/// returns those ports by their node's id in `engine`. A port of a node
/// another process runs is that process's business.
pub(crate) fn install<F: Carries<CellBytes>>(
    engine: &mut Engine<F>,
    plans: Vec<(usize, PortPlan)>,
    local: &dyn Fn(usize) -> Option<NodeId>,
) -> Result<Vec<(NodeId, PortPlan)>, String> {
    let mut set = Vec::new();
    for (whole, plan) in plans {
        let Some(id) = local(whole) else {
            continue;
        };
        engine
            .set_port(id, plan.port, Box::new(plan.cell_port()))
            .map_err(|e| format!("port {}:{}: {e}", plan.node, plan.port))?;
        set.push((id, plan));
    }
    Ok(set)
}
