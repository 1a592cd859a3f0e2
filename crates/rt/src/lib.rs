//! The real-time driver: the same nodes the virtual-time driver runs, each
//! on its own thread, joined by in-process rings. Every link direction is
//! paced at its rate and given its delay, loss and bit errors by the link
//! shaper; its bounded queue is the sending port's output buffer, and a cell
//! that finds it full is a counted drop, as in the simulator.
//!
//! Time is the wall clock since the run started, in the same integer
//! nanoseconds the nodes always use.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant as WallClock};

use aurora_link::ring::{self, RingRx, RingTx};
use aurora_link::shape::{Shaped, Shaping};
use aurora_link::{CellSink, CellSource, LinkDrop, LinkError};
use aurora_net::{Node, Outbox, PortId};
use aurora_sim::{DirCounters, LinkSpec, NodeId};
use aurora_time::Instant;
use aurora_wire::CellBytes;

/// A node the real-time driver can run: any node that may move to a thread.
pub trait RtNode: Node + Any + Send {}
impl<T: Node + Any + Send> RtNode for T {}

/// A link between two ports, the same in both directions.
#[derive(Clone, Copy, Debug)]
pub struct Wire {
    /// One end.
    pub a: (NodeId, PortId),
    /// The other end.
    pub b: (NodeId, PortId),
    /// Rate, delay, buffer, loss, bit errors.
    pub spec: LinkSpec,
}

struct Out {
    link: Shaped<RingTx>,
    pending: Vec<CellBytes>,
    overflow: u64,
    offered: u64,
}

struct Worker {
    node: Box<dyn RtNode>,
    inputs: Vec<(PortId, RingRx)>,
    outputs: Vec<Option<Out>>,
}

/// What a run hands back: the nodes (to read their counters) and each link
/// direction's counters, keyed by the sending (node, port).
pub struct Finished {
    /// The nodes, by id.
    pub nodes: Vec<Box<dyn RtNode>>,
    /// Per sending port: its link direction's counters.
    pub links: Vec<((NodeId, PortId), DirCounters)>,
}

impl Finished {
    /// A node by its concrete type.
    pub fn node<T: Node + Any>(&self, id: NodeId) -> Option<&T> {
        let n: &dyn Any = self.nodes.get(id.0 as usize)?.as_ref();
        n.downcast_ref::<T>()
    }
    /// The counters of the link direction leaving `port` of `node`.
    pub fn link(&self, node: NodeId, port: PortId) -> Option<DirCounters> {
        self.links
            .iter()
            .find(|(k, _)| *k == (node, port))
            .map(|(_, c)| *c)
    }
}

/// Why a run could not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtError(pub String);

impl std::fmt::Display for RtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RtError {}

impl Worker {
    fn route(&mut self, out: &mut Outbox) {
        for (port, cell) in out.drain() {
            // An unconnected port has nothing on the other side.
            if let Some(Some(o)) = self.outputs.get_mut(usize::from(port)) {
                o.pending.push(cell);
            }
        }
        for o in self.outputs.iter_mut().flatten() {
            if o.pending.is_empty() {
                continue;
            }
            o.offered += o.pending.len() as u64;
            // Whatever the bounded queue does not take is an output-buffer
            // overflow, as at a real switch port.
            let took = o.link.send(&o.pending).unwrap_or(0);
            o.overflow += (o.pending.len() - took) as u64;
            o.pending.clear();
        }
    }

    fn run(mut self, start: WallClock, stop: &AtomicBool) -> Self {
        let mut out = Outbox::default();
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::from_nanos(start.elapsed().as_nanos() as i64);
            let mut busy = false;
            for i in 0..self.inputs.len() {
                let (port, rx) = &mut self.inputs[i];
                let port = *port;
                let node = &mut self.node;
                match rx.read_with(256, |cells| node.receive(now, port, cells, &mut out)) {
                    Ok(n) if n > 0 => busy = true,
                    Ok(_) | Err(LinkError::Closed) => {}
                    Err(_) => {} // a corrupt ring stays corrupt; its counters say so
                }
                self.route(&mut out);
            }
            if self.node.poll_at().is_some_and(|t| t <= now) {
                self.node.poll(now, &mut out);
                self.route(&mut out);
                busy = true;
            }
            for o in self.outputs.iter_mut().flatten() {
                let _ = o.link.flush();
            }
            if !busy {
                let next = self
                    .node
                    .poll_at()
                    .map(|t| StdDuration::from_nanos((t - now).as_nanos().max(0) as u64))
                    .unwrap_or(StdDuration::from_micros(100));
                std::thread::sleep(next.min(StdDuration::from_micros(50)));
            }
        }
        self
    }
}

/// Runs `nodes` joined by `wires` for `duration` of wall-clock time. The
/// shapers' random streams derive from `seed` and each direction's number.
pub fn run(
    nodes: Vec<Box<dyn RtNode>>,
    wires: &[Wire],
    seed: u64,
    duration: StdDuration,
) -> Result<Finished, RtError> {
    let mut workers: Vec<Worker> = nodes
        .into_iter()
        .map(|node| {
            let ports = node.ports();
            Worker {
                node,
                inputs: Vec::new(),
                outputs: (0..ports).map(|_| None).collect(),
            }
        })
        .collect();
    let mut dirs = Vec::new();
    let mut k = 0u64;
    for w in wires {
        if !(w.spec.rate > 0.0 && w.spec.rate.is_finite()) {
            return Err(RtError(format!(
                "link rate {} is not a positive number of cells per second",
                w.spec.rate
            )));
        }
        for (from, to) in [(w.a, w.b), (w.b, w.a)] {
            k += 1;
            let slot = workers
                .get(from.0 .0 as usize)
                .and_then(|wk| wk.outputs.get(usize::from(from.1)))
                .ok_or_else(|| RtError(format!("node {} has no port {}", from.0 .0, from.1)))?;
            if slot.is_some() {
                return Err(RtError(format!(
                    "port {} of node {} is already connected",
                    from.1, from.0 .0
                )));
            }
            if workers
                .get(to.0 .0 as usize)
                .is_none_or(|wk| usize::from(to.1) >= wk.outputs.len())
            {
                return Err(RtError(format!("node {} has no port {}", to.0 .0, to.1)));
            }
            // The ring holds what the shaper may release at once, and more.
            let (tx, rx) = ring::in_process((w.spec.buffer * 2).clamp(64, 1 << 20));
            let shaping = Shaping {
                rate: Some(w.spec.rate),
                delay: StdDuration::from_nanos(w.spec.delay.as_nanos().max(0) as u64),
                loss: w.spec.loss,
                bit_error: w.spec.bit_error,
                seed: seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                queue: w.spec.buffer.max(1),
            };
            workers[from.0 .0 as usize].outputs[usize::from(from.1)] = Some(Out {
                link: Shaped::new(tx, shaping),
                pending: Vec::new(),
                overflow: 0,
                offered: 0,
            });
            workers[to.0 .0 as usize].inputs.push((to.1, rx));
            dirs.push((from, to));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = WallClock::now();
    let handles: Vec<_> = workers
        .into_iter()
        .map(|w| {
            let stop = stop.clone();
            std::thread::spawn(move || w.run(start, &stop))
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let mut workers = Vec::new();
    for h in handles {
        workers.push(
            h.join()
                .map_err(|_| RtError("a node's thread panicked".into()))?,
        );
    }
    let mut links = Vec::new();
    for (from, to) in dirs {
        let o = workers[from.0 .0 as usize].outputs[usize::from(from.1)]
            .as_ref()
            .expect("connected above");
        let c = o.link.counters();
        let delivered = workers[to.0 .0 as usize]
            .inputs
            .iter()
            .find(|(p, _)| *p == to.1)
            .map_or(0, |(_, rx)| rx.counters().cells_delivered);
        links.push((
            from,
            DirCounters {
                offered: o.offered,
                overflow: o.overflow,
                lost: c.drops.get(LinkDrop::InjectedLoss),
                errored: o.link.bit_errors(),
                delivered,
            },
        ));
    }
    Ok(Finished {
        nodes: workers.into_iter().map(|w| w.node).collect(),
        links,
    })
}
