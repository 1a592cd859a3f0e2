//! A layout built in the virtual-time driver: a Mosaic node per layout
//! node, a host on each host node, one-way channels timed by their cables.

use std::net::Ipv4Addr;

use crate::layout::{channel_spec, interface_spec, Layout, Rng};

/// A layout built in the virtual-time driver.
pub struct Built {
    /// The simulation.
    pub sim: aurora_sim::Sim<Vec<u8>>,
    /// Each layout node's simulator id.
    pub mosaic: Vec<aurora_sim::NodeId>,
    /// Each host: its address, simulator id and layout node.
    pub hosts: Vec<(Ipv4Addr, aurora_sim::NodeId, usize)>,
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

    /// Gives the host at `a` a flow to send (from the flow's start time).
    pub fn add_flow(&mut self, a: Ipv4Addr, f: crate::host::IpFlow) -> Option<usize> {
        let (_, id, _) = *self.hosts.iter().find(|h| h.0 == a)?;
        let i = self
            .sim
            .node_mut::<crate::host::AtomicHost>(id)?
            .add_flow(f);
        self.sim.touch(id);
        Some(i)
    }

    /// Layout node `n`'s Mosaic node, to change (cut a channel, take it down).
    pub fn node_mut(&mut self, n: usize) -> Option<&mut crate::mosaic::MosaicNode> {
        let id = *self.mosaic.get(n)?;
        self.sim.node_mut(id)
    }
}

impl Layout {
    /// Builds the layout in the virtual-time driver: a Mosaic node per
    /// layout node, a host on each host node (its settings from `host`,
    /// given the address and the host's identifier), channels timed by
    /// their cables.
    pub fn build(
        &self,
        seed: u64,
        host: &dyn Fn(Ipv4Addr, u64) -> crate::host::HostConfig,
    ) -> Result<Built, aurora_sim::SimError> {
        use crate::host::AtomicHost;
        use crate::mosaic::{MosaicNode, HOST_PORT};
        let mut sim = aurora_sim::Sim::<Vec<u8>>::with_frames(seed);
        let mut channels = vec![[false; 4]; self.nodes.len()];
        for w in &self.wires {
            channels[w.from.0][w.from.1 as usize] = true;
        }
        let mosaic: Vec<aurora_sim::NodeId> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| sim.add_node(MosaicNode::new(n.id, n.host.is_some(), channels[i])))
            .collect();
        // Every wire is one direction: its node's output to a node's input.
        for w in &self.wires {
            sim.connect_oneway(
                (mosaic[w.from.0], w.from.1 as u16),
                (mosaic[w.to.0], w.to.1 as u16),
                channel_spec(w.feet),
            )?;
        }
        let mut hosts = Vec::new();
        let mut rng = Rng::new(seed ^ 0x4057);
        for (i, n) in self.nodes.iter().enumerate() {
            let Some(addr) = n.host else { continue };
            let cfg = host(addr, rng.draw());
            let h = sim.add_node(AtomicHost::new(cfg, aurora_time::Instant::ZERO));
            sim.connect((h, 0), (mosaic[i], HOST_PORT), interface_spec())?;
            hosts.push((addr, h, i));
        }
        Ok(Built { sim, mosaic, hosts })
    }
}
