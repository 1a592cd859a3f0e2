//! A layout made into nodes and links ([`Plan`]), and built in the
//! virtual-time driver ([`Built`]): a Mosaic node per layout node, a host
//! on each host node, one-way channels timed by their cables.

use std::net::Ipv4Addr;

use aurora_engine::carry::Carries;
use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_time::Instant;

use crate::host::{AtomicHost, HostConfig};
pub use crate::layout::interface_spec;
use crate::layout::{channel_spec, Layout, Rng};
use crate::mosaic::MosaicNode;
pub use crate::mosaic::HOST_PORT;

/// A layout built in the virtual-time driver.
pub struct Built {
    /// The simulation.
    pub sim: aurora_engine::Engine<Vec<u8>>,
    /// Each layout node's simulator id.
    pub mosaic: Vec<aurora_engine::NodeId>,
    /// Each host: its address, simulator id and layout node.
    pub hosts: Vec<(Ipv4Addr, aurora_engine::NodeId, usize)>,
}

impl Built {
    /// The host with address `a`.
    pub fn host(&self, a: Ipv4Addr) -> Option<&crate::host::AtomicHost> {
        let (_, id, _) = self.hosts.iter().find(|h| h.0 == a)?;
        self.sim.node(*id)
    }

    /// The host with address `a`, to change.
    pub fn host_mut(&mut self, a: Ipv4Addr) -> Option<&mut crate::host::AtomicHost> {
        let (_, id, _) = self.hosts.iter().find(|h| h.0 == a)?;
        self.sim.node_mut(*id)
    }

    /// Gives the host at `a` a flow to send (from the flow's start time),
    /// and tells its destination to expect it.
    pub fn add_flow(&mut self, a: Ipv4Addr, f: crate::host::IpFlow) -> Option<usize> {
        let (_, id, _) = *self.hosts.iter().find(|h| h.0 == a)?;
        let i = self
            .sim
            .node_mut::<crate::host::AtomicHost>(id)?
            .add_flow(f);
        self.sim.touch(id);
        if let Some(&(_, dst, _)) = self.hosts.iter().find(|h| h.0 == f.dst) {
            if let Some(h) = self.sim.node_mut::<crate::host::AtomicHost>(dst) {
                // Below `MAX_FLOWS_PER_HOST`: `add_flow` took it.
                let flow = u16::try_from(i).unwrap_or(u16::MAX);
                h.expect_flow(crate::flow::FlowId { src: a, flow });
            }
        }
        Some(i)
    }

    /// Layout node `n`'s Mosaic node, to change (cut a channel, take it down).
    pub fn node_mut(&mut self, n: usize) -> Option<&mut crate::mosaic::MosaicNode> {
        let id = *self.mosaic.get(n)?;
        self.sim.node_mut(id)
    }
}

/// A layout's nodes and links, ready for either driver: the Mosaic nodes
/// (one per layout node, in order), then the hosts; one-way links between
/// (node, port) pairs numbered that way.
pub struct Plan {
    /// Mosaic nodes, in layout order.
    pub mosaic: Vec<MosaicNode>,
    /// Hosts: address, host, layout node; host `k` is node
    /// `mosaic.len() + k`.
    pub hosts: Vec<(Ipv4Addr, AtomicHost, usize)>,
    /// One-way links.
    pub links: Vec<PlanLink>,
}

/// A one-way link of a [`Plan`]: from (node, port), to (node, port), model.
pub type PlanLink = ((usize, u16), (usize, u16), LinkSpec);

impl Layout {
    /// The layout's nodes and links; each host's settings come from
    /// `host`, given its address and its identifier (drawn from `seed`).
    pub fn plan(&self, seed: u64, host: &dyn Fn(Ipv4Addr, u64) -> HostConfig) -> Plan {
        let mut channels = vec![[false; 4]; self.nodes.len()];
        for w in &self.wires {
            channels[w.from.0][w.from.1 as usize] = true;
        }
        let mosaic: Vec<MosaicNode> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| MosaicNode::new(n.id, n.host.is_some(), channels[i]))
            .collect();
        // Every wire is one direction: its node's output to a node's input.
        let mut links: Vec<PlanLink> = self
            .wires
            .iter()
            .map(|w| {
                (
                    (w.from.0, w.from.1 as u16),
                    (w.to.0, w.to.1 as u16),
                    channel_spec(w.feet),
                )
            })
            .collect();
        let mut hosts = Vec::new();
        let mut rng = Rng::new(seed ^ 0x4057);
        for (i, n) in self.nodes.iter().enumerate() {
            let Some(addr) = n.host else { continue };
            let cfg = host(addr, rng.draw());
            let k = mosaic.len() + hosts.len();
            links.push(((k, 0), (i, HOST_PORT), interface_spec(cfg.memory)));
            links.push(((i, HOST_PORT), (k, 0), interface_spec(cfg.memory)));
            hosts.push((addr, AtomicHost::new(cfg, Instant::ZERO), i));
        }
        Plan {
            mosaic,
            hosts,
            links,
        }
    }

    /// Builds the layout in the virtual-time driver (see [`Layout::plan`]).
    pub fn build(
        &self,
        seed: u64,
        host: &dyn Fn(Ipv4Addr, u64) -> HostConfig,
    ) -> Result<Built, aurora_engine::EngineError> {
        self.plan(seed, host).into_sim(seed)
    }
}

impl Plan {
    /// The plan in the virtual-time driver.
    pub fn into_sim(self, seed: u64) -> Result<Built, aurora_engine::EngineError> {
        let mut sim = aurora_engine::Engine::<Vec<u8>>::with_frames(seed);
        let (mosaic, hosts) = self.add_to(&mut sim)?;
        Ok(Built { sim, mosaic, hosts })
    }

    /// Adds the plan's nodes and links to `e`, an engine of any frame type
    /// that carries ATOMIC frames (one that carries cells too, for a
    /// network of both): the Mosaic nodes' ids, in layout order, and each
    /// host's address, id and layout node.
    #[allow(clippy::type_complexity)]
    pub fn add_to<F: Carries<Vec<u8>>>(
        self,
        e: &mut Engine<F>,
    ) -> Result<(Vec<NodeId>, Vec<(Ipv4Addr, NodeId, usize)>), aurora_engine::EngineError> {
        let mut ids: Vec<NodeId> = Vec::with_capacity(self.mosaic.len() + self.hosts.len());
        for m in self.mosaic {
            ids.push(e.add_boxed(F::adopt(Box::new(m))));
        }
        let mosaic = ids.clone();
        let mut hosts = Vec::new();
        for (addr, h, node) in self.hosts {
            let id = e.add_boxed(F::adopt(Box::new(h)));
            ids.push(id);
            hosts.push((addr, id, node));
        }
        for (from, to, spec) in self.links {
            e.connect_oneway((ids[from.0], from.1), (ids[to.0], to.1), spec)?;
        }
        Ok((mosaic, hosts))
    }

    /// Takes the host at `addr` out of the plan, to run inside another node
    /// (a router's side on this LAN): the host and the layout node it hangs
    /// on, whose port [`HOST_PORT`] the taker links to with
    /// [`interface_spec`] both ways (of the host's `memory`). Later hosts
    /// move down one.
    pub fn take_host(&mut self, addr: Ipv4Addr) -> Option<(AtomicHost, usize)> {
        let k = self.hosts.iter().position(|h| h.0 == addr)?;
        let (_, host, node) = self.hosts.remove(k);
        let me = self.mosaic.len() + k;
        self.links
            .retain(|(from, to, _)| from.0 != me && to.0 != me);
        for (from, to, _) in &mut self.links {
            for end in [from, to] {
                if end.0 > me {
                    end.0 -= 1;
                }
            }
        }
        Some((host, node))
    }
}
