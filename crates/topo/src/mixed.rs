//! Building a network that holds ATOMIC frames, with or without cells:
//! one engine carrying [`Unit`]s, the cell nodes and the ATOMIC nodes
//! adopted into it, and each IP router with an interface on the ATOMIC
//! LAN made a [`Gateway`] (its IP node plus its ATOMIC host), linked to
//! both networks.

use std::any::Any;
use std::net::Ipv4Addr;

use aurora_atomic::built::{interface_spec, HOST_PORT};
use aurora_atomic::gateway::Gateway;
use aurora_atomic::host::AtomicHost;
use aurora_engine::carry::{Carries, Unit};
use aurora_engine::{Engine, NodeId};
use aurora_ip::node::{Interface, IpNode};
use aurora_wire::CellBytes;

use crate::{AtomicNet, Blueprint, Network, Problem, Problems};

/// The ATOMIC part of a built network, for its report.
pub struct AtomicPart {
    /// The checked ATOMIC network (names, flows, cables).
    pub net: AtomicNet,
    /// Each layout node's Mosaic node.
    pub mosaic: Vec<NodeId>,
    /// Hosts that are nodes of their own: name, address, node.
    pub hosts: Vec<(String, Ipv4Addr, NodeId)>,
    /// Hosts inside routers: name, address, the router's node.
    pub gateways: Vec<(String, Ipv4Addr, NodeId)>,
}

/// A router's host on the LAN, taken out of the ATOMIC plan to run inside
/// the router.
struct LanSide {
    host: String,
    router: NodeId,
    ports: u16,
    iface: Interface,
    side: AtomicHost,
    lan_node: usize,
}

fn problem(msg: String) -> Problems {
    Problems(vec![Problem {
        line: 0,
        col: 0,
        msg,
    }])
}

impl Blueprint {
    /// The network, cells and its ATOMIC part's frames in one engine, its
    /// random streams seeded from `seed`.
    pub fn into_mixed(mut self, seed: u64) -> Result<Network<Unit>, Problems> {
        let atomic = self
            .atomic
            .take()
            .ok_or_else(|| problem("the network has no ATOMIC part".into()))?;
        let mut plan = atomic.plan(seed);
        let addr_of = |name: &str| atomic.hosts.iter().find(|h| h.0 == name).map(|h| h.1.addr);
        // Each router's host on the LAN, taken out to run inside it.
        let mut lan_sides: Vec<LanSide> = Vec::new();
        for (host, router, prefix) in &atomic.routers {
            let Some(&(_, id, ports)) = self.routers.iter().find(|r| &r.0 == router) else {
                return Err(problem(format!(
                    "ATOMIC host \"{host}\" is the interface of router \"{router}\", which is not a [[router]]"
                )));
            };
            let addr = addr_of(host).expect("a checked host has an address");
            let (side, lan_node) = plan
                .take_host(addr)
                .expect("every host of a checked network is in its plan");
            let iface = Interface {
                addr,
                prefix: *prefix,
            };
            lan_sides.push(LanSide {
                host: host.clone(),
                router: id,
                ports,
                iface,
                side,
                lan_node,
            });
        }
        let mut e: Engine<Unit> = Engine::with_frames(seed);
        let mut gateways = Vec::new();
        for (i, node) in self.nodes.into_iter().enumerate() {
            let Some(k) = lan_sides.iter().position(|s| s.router.0 as usize == i) else {
                e.add_boxed(<Unit as Carries<CellBytes>>::adopt(node));
                continue;
            };
            let s = lan_sides.swap_remove(k);
            let any: Box<dyn Any> = node;
            let mut ip = any
                .downcast::<IpNode>()
                .map_err(|_| problem(format!("router \"{}\" is not an IP node", s.host)))?;
            ip.add_packet_interface(s.iface)
                .map_err(|err| problem(err.to_string()))?;
            let gw = Gateway::new(*ip, vec![s.side]).map_err(problem)?;
            e.add_node(gw);
            gateways.push((s.host, s.iface.addr, s.router, s.ports, s.lan_node));
        }
        let mut links = Vec::new();
        for (a, b, spec) in self.links {
            e.connect((a.1, a.2), (b.1, b.2), spec)
                .map_err(|err| problem(err.to_string()))?;
            links.push((a, b));
        }
        let (mosaic, hosts) = plan
            .add_to(&mut e)
            .map_err(|err| problem(err.to_string()))?;
        for &(_, _, id, ports, lan_node) in &gateways {
            let m = mosaic[lan_node];
            e.connect_oneway((id, ports), (m, HOST_PORT), interface_spec())
                .and_then(|_| e.connect_oneway((m, HOST_PORT), (id, ports), interface_spec()))
                .map_err(|err| problem(err.to_string()))?;
        }
        let name_of = |a: Ipv4Addr| {
            atomic
                .hosts
                .iter()
                .find(|h| h.1.addr == a)
                .map_or_else(|| a.to_string(), |h| h.0.clone())
        };
        let hosts: Vec<(String, Ipv4Addr, NodeId)> = hosts
            .into_iter()
            .map(|(a, id, _)| (name_of(a), a, id))
            .collect();
        let mut tuns = self.tuns;
        for (name, t) in &atomic.tuns {
            if let Some(h) = hosts.iter().find(|h| &h.0 == name) {
                tuns.push((h.2, t.clone()));
            }
        }
        let gateways = gateways
            .into_iter()
            .map(|(h, a, id, ..)| (h, a, id))
            .collect();
        Ok(Network {
            sim: e,
            hosts: self.hosts,
            switches: self.switches,
            routers: self.routers,
            ip_nodes: self.ip_nodes,
            links,
            pvcs: self.pvcs,
            pins: self.pins,
            tuns,
            atomic: Some(AtomicPart {
                net: atomic,
                mosaic,
                hosts,
                gateways,
            }),
        })
    }
}
