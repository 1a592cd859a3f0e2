//! Networks that hold ATOMIC frames, with or without cells: one engine
//! carrying [`Unit`]s, the cell nodes and the ATOMIC nodes adopted into it,
//! and each IP router with an interface on the ATOMIC LAN made a
//! [`Gateway`] (its IP node plus its ATOMIC host), linked to both networks.
//!
//! Every node of such a network has one index: the cell nodes first (as
//! the blueprint numbers them), then the ATOMIC plan's Mosaic nodes, then
//! its hosts (a router's host excepted: it runs inside the router). Link
//! directions are numbered as the whole network's engine numbers them:
//! each cell link's two, then the plan's channels, then each router's two
//! to the LAN. [`Blueprint::into_mixed`] builds all of it;
//! [`Blueprint::mixed_process`] the nodes one process runs, with the same
//! numbers, so each keeps its random streams.

use std::any::Any;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use aurora_atomic::built::{interface_spec, HOST_PORT};
use aurora_atomic::gateway::Gateway;
use aurora_engine::carry::{Carries, SinkOf, SourceOf, Unit};
use aurora_engine::io::{ExternalSink, ExternalSource};
use aurora_engine::NodeId;
use aurora_ip::node::{Interface, IpNode};
use aurora_net::PortId;
use aurora_wire::CellBytes;

use crate::process::{build, members_named, Members, Outside, WholeDir};
use crate::{
    AtomicNet, Blueprint, BlueprintInfo, Network, NodeProcess, Problem, Problems, TunSpec,
};

/// The ATOMIC part of a built network (or of a process's share of one),
/// for its report; ids are the engine's.
pub struct AtomicPart {
    /// The checked ATOMIC network (names, flows, cables).
    pub net: AtomicNet,
    /// Mosaic nodes: layout name (a host's interface node has its host's
    /// name), node.
    pub mosaic: Vec<(String, NodeId)>,
    /// Hosts that are nodes of their own: name, address, node.
    pub hosts: Vec<(String, Ipv4Addr, NodeId)>,
    /// Hosts inside routers: name, address, the router's node.
    pub gateways: Vec<(String, Ipv4Addr, NodeId)>,
}

impl AtomicPart {
    /// Every ATOMIC node of the part by the name reports give it: a Mosaic
    /// node by its layout name, a host's interface node (which bears its
    /// host's name) as `NAME-if`, a host by its name.
    pub fn node_names(&self) -> Vec<(String, NodeId)> {
        let interface = |name: &str| self.net.hosts.iter().any(|h| h.0 == name);
        self.mosaic
            .iter()
            .map(|(name, id)| match interface(name) {
                true => (format!("{name}-if"), *id),
                false => (name.clone(), *id),
            })
            .chain(self.hosts.iter().map(|(name, _, id)| (name.clone(), *id)))
            .collect()
    }
}

/// A partition of a network with an ATOMIC part, set up as one process.
pub struct MixedProcess {
    /// The process.
    pub process: NodeProcess<Unit>,
    /// The blueprint's names and circuits.
    pub info: BlueprintInfo,
    /// The ATOMIC nodes among its members.
    pub atomic: AtomicPart,
}

/// What a node of the whole network is.
enum Role {
    Cell,
    Router { host: String, addr: Ipv4Addr },
    Mosaic,
    Host { name: String, addr: Ipv4Addr },
}

/// The whole network, ready to be built whole or in part.
struct Whole {
    members: Members<Unit>,
    roles: Vec<Role>,
    names: Vec<String>,
    /// Names a process may be asked for, with the nodes each brings.
    known: Vec<(String, usize)>,
    dirs: Vec<WholeDir>,
    /// Directions of the cell links (the first ones).
    cell_dirs: usize,
    /// The plan's channels, in the plan's own numbering (for cables).
    plan_dirs: Vec<WholeDir>,
    tuns: Vec<(usize, TunSpec)>,
    atomic: AtomicNet,
}

impl Whole {
    /// `node:port`, a Mosaic node's port by its direction.
    fn port_name(&self, i: usize, p: PortId) -> String {
        let node = self.names.get(i).map_or("?", String::as_str);
        let dir = matches!(self.roles.get(i), Some(Role::Mosaic))
            .then(|| aurora_atomic::wire::Dir::from_port(u8::try_from(p).ok()?))
            .flatten();
        match dir {
            Some(d) => format!("{node}:{d:?}"),
            None => format!("{node}:{p}"),
        }
    }
}

fn problem(msg: String) -> Problems {
    Problems(vec![Problem {
        line: 0,
        col: 0,
        msg,
    }])
}

impl Blueprint {
    /// Takes the blueprint and its ATOMIC part apart into numbered nodes
    /// and directions (see the module's introduction).
    fn whole(&mut self, seed: u64) -> Result<Whole, String> {
        let atomic = self.atomic.take().ok_or("the network has no ATOMIC part")?;
        let mut plan = atomic.plan(seed);
        // Each router's host on the LAN, taken out to run inside it.
        let mut sides: BTreeMap<usize, (String, Interface, aurora_atomic::host::AtomicHost)> =
            BTreeMap::new();
        for (host, router, prefix) in &atomic.routers {
            let &(_, id, _) = self
                .routers
                .iter()
                .find(|r| &r.0 == router)
                .ok_or_else(|| {
                    format!("router \"{router}\" of ATOMIC host \"{host}\" is not a [[router]]")
                })?;
            let addr = atomic
                .hosts
                .iter()
                .find(|h| &h.0 == host)
                .map(|h| h.1.addr)
                .ok_or_else(|| format!("no ATOMIC host \"{host}\""))?;
            let (side, _) = plan
                .take_host(addr)
                .ok_or_else(|| format!("ATOMIC host \"{host}\" is in no plan"))?;
            sides.insert(
                id.0 as usize,
                (
                    host.clone(),
                    Interface {
                        addr,
                        prefix: *prefix,
                    },
                    side,
                ),
            );
        }
        let n = self.nodes.len();
        let m = plan.mosaic.len();
        let mut names: Vec<String> = (0..n).map(|i| format!("node {i}")).collect();
        for (name, id) in self.hosts.iter().map(|(s, id)| (s, *id)).chain(
            self.switches
                .iter()
                .chain(&self.routers)
                .map(|(s, id, _)| (s, *id)),
        ) {
            if let Some(slot) = names.get_mut(id.0 as usize) {
                slot.clone_from(name);
            }
        }
        let host_name = |addr: Ipv4Addr| {
            atomic
                .hosts
                .iter()
                .find(|h| h.1.addr == addr)
                .map_or_else(|| addr.to_string(), |h| h.0.clone())
        };
        let mut members: Members<Unit> = Vec::new();
        let mut roles = Vec::new();
        for (i, node) in std::mem::take(&mut self.nodes).into_iter().enumerate() {
            match sides.remove(&i) {
                None => {
                    members.push((
                        i,
                        names[i].clone(),
                        <Unit as Carries<CellBytes>>::adopt(node),
                    ));
                    roles.push(Role::Cell);
                }
                Some((host, iface, side)) => {
                    let any: Box<dyn Any> = node;
                    let mut ip = any
                        .downcast::<IpNode>()
                        .map_err(|_| format!("router \"{}\" is not an IP node", names[i]))?;
                    ip.add_packet_interface(iface).map_err(|e| e.to_string())?;
                    members.push((
                        i,
                        names[i].clone(),
                        Box::new(Gateway::new(*ip, vec![side])?),
                    ));
                    roles.push(Role::Router {
                        host,
                        addr: iface.addr,
                    });
                }
            }
        }
        // Each router's port on the LAN, its host's interface node, and the
        // host's memory.
        let lan: Vec<(usize, u16, usize, usize)> = atomic
            .routers
            .iter()
            .filter_map(|(host, router, _)| {
                let (_, id, ports) = self.routers.iter().find(|r| &r.0 == router)?;
                let (_, cfg, layout) = atomic.hosts.iter().find(|h| &h.0 == host)?;
                Some((id.0 as usize, *ports, *layout, cfg.memory))
            })
            .collect();
        for (i, node) in plan.mosaic.into_iter().enumerate() {
            names.push(atomic.names[i].clone());
            members.push((
                n + i,
                atomic.names[i].clone(),
                <Unit as Carries<Vec<u8>>>::adopt(Box::new(node)),
            ));
            roles.push(Role::Mosaic);
        }
        let mut tuns: Vec<(usize, TunSpec)> = self
            .tuns
            .iter()
            .map(|(id, t)| (id.0 as usize, t.clone()))
            .collect();
        for (k, (addr, host, _)) in plan.hosts.into_iter().enumerate() {
            let name = host_name(addr);
            if let Some((_, t)) = atomic.tuns.iter().find(|(h, _)| *h == name) {
                tuns.push((n + m + k, t.clone()));
            }
            names.push(format!("host {name}"));
            members.push((
                n + m + k,
                format!("host {name}"),
                <Unit as Carries<Vec<u8>>>::adopt(Box::new(host)),
            ));
            roles.push(Role::Host { name, addr });
        }
        // What a process may be asked for: cell nodes by name (a router
        // brings its host's interface node along); meshes and hosts by
        // name (a router's host is asked for through its router).
        let mut known: Vec<(String, usize)> = Vec::new();
        for (i, r) in roles.iter().enumerate().take(n) {
            known.push((names[i].clone(), i));
            if let Role::Router { .. } = r {
                if let Some(&(_, _, layout, _)) = lan.iter().find(|l| l.0 == i) {
                    known.push((names[i].clone(), n + layout));
                }
            }
        }
        let router_hosts: Vec<&str> = atomic.routers.iter().map(|r| r.0.as_str()).collect();
        for (i, role) in roles.iter().enumerate().skip(n) {
            let layout = match role {
                Role::Mosaic => i - n,
                Role::Host { name, .. } => atomic
                    .hosts
                    .iter()
                    .find(|h| &h.0 == name)
                    .map_or(0, |h| h.2),
                _ => continue,
            };
            let group = &atomic.groups[layout];
            if !router_hosts.contains(&group.as_str()) {
                known.push((group.clone(), i));
            }
        }
        let mut dirs = crate::process::cell_dirs(&self.links);
        let cell_dirs = dirs.len();
        let plan_dirs: Vec<WholeDir> = plan
            .links
            .iter()
            .map(|&(from, to, spec)| WholeDir { from, to, spec })
            .collect();
        dirs.extend(plan_dirs.iter().map(|d| WholeDir {
            from: (n + d.from.0, d.from.1),
            to: (n + d.to.0, d.to.1),
            spec: d.spec,
        }));
        for &(router, ports, layout, memory) in &lan {
            let (r, l) = ((router, ports), (n + layout, HOST_PORT));
            dirs.push(WholeDir {
                from: r,
                to: l,
                spec: interface_spec(memory),
            });
            dirs.push(WholeDir {
                from: l,
                to: r,
                spec: interface_spec(memory),
            });
        }
        Ok(Whole {
            members,
            roles,
            names,
            known,
            dirs,
            cell_dirs,
            plan_dirs,
            tuns,
            atomic,
        })
    }

    /// The network, cells and its ATOMIC part's frames in one engine, its
    /// random streams seeded from `seed`; a node's id is its index (see
    /// the module's introduction).
    pub fn into_mixed(mut self, seed: u64) -> Result<Network<Unit>, Problems> {
        self.seed_tcp_hosts(seed);
        let plans = self.take_port_plans().map_err(problem)?;
        let mut w = self.whole(seed).map_err(problem)?;
        let members = std::mem::take(&mut w.members);
        let all: Vec<String> = Vec::new();
        let name_of = |i: usize, p: PortId| w.port_name(i, p);
        let mut p =
            build(all, seed, members, &w.dirs, &name_of, &mut Nowhere, &[]).map_err(problem)?;
        p.install_ports(plans).map_err(problem)?;
        let tuns = w
            .tuns
            .into_iter()
            .map(|(i, t)| (NodeId(i as u32), t))
            .collect();
        let atomic = atomic_part(w.atomic, &w.roles, &w.names, &|i| Some(NodeId(i as u32)));
        Ok(Network {
            sim: p.engine,
            hosts: self.hosts,
            switches: self.switches,
            routers: self.routers,
            ip_nodes: self.ip_nodes,
            links: self.links.into_iter().map(|(a, b, _)| (a, b)).collect(),
            pvcs: self.pvcs,
            pins: self.pins,
            tuns,
            atomic: Some(atomic),
            ports: p.disciplines,
            tcp: self.tcp,
            video: self.video,
            stripes: self.stripes,
        })
    }

    /// The nodes called `names` (cell nodes, meshes, ATOMIC hosts) of a
    /// network with an ATOMIC part, as one process on an engine carrying
    /// units: links among them the engine's own, cell links to other
    /// processes over UDP or shared memory, cables over UDP.
    pub fn mixed_process(mut self, names: &[String], seed: u64) -> Result<MixedProcess, String> {
        self.seed_tcp_hosts(seed);
        let plans = self.take_port_plans()?;
        let mut w = self.whole(seed)?;
        let known: Vec<(&str, usize)> = w.known.iter().map(|(s, i)| (s.as_str(), *i)).collect();
        let ids = members_named(names, &known, "node, mesh or ATOMIC host")?;
        let members: Members<Unit> = std::mem::take(&mut w.members)
            .into_iter()
            .filter(|m| ids.binary_search(&m.0).is_ok())
            .collect();
        let local = |i: usize| ids.binary_search(&i).ok().map(|k| NodeId(k as u32));
        let name_of = |i: usize, p: PortId| w.port_name(i, p);
        let mut outside = MixedOutside {
            cells: crate::process::CellOutside::new(&self.links, &self.link_transport),
            cables: crate::atomic::CableOutside::new(&w.atomic, &w.plan_dirs),
            cell_dirs: w.cell_dirs,
        };
        let mut process = build(
            names.to_vec(),
            seed,
            members,
            &w.dirs,
            &name_of,
            &mut outside,
            &w.tuns,
        )?;
        drop(outside);
        process.install_ports(plans)?;
        process.keep_pins(&self.pins);
        let atomic = atomic_part(w.atomic, &w.roles, &w.names, &local);
        let info = BlueprintInfo {
            hosts: self.hosts,
            switches: self.switches,
            routers: self.routers,
            ip_nodes: self.ip_nodes,
            links: self.links.into_iter().map(|(a, b, _)| (a, b)).collect(),
            pvcs: self.pvcs,
            stripes: self.stripes,
        };
        Ok(MixedProcess {
            process,
            info,
            atomic,
        })
    }
}

/// The ATOMIC nodes of `roles` (named `names`) that `local` places in an
/// engine.
fn atomic_part(
    net: AtomicNet,
    roles: &[Role],
    names: &[String],
    local: &dyn Fn(usize) -> Option<NodeId>,
) -> AtomicPart {
    let mut part = AtomicPart {
        net,
        mosaic: Vec::new(),
        hosts: Vec::new(),
        gateways: Vec::new(),
    };
    for (i, r) in roles.iter().enumerate() {
        let Some(id) = local(i) else { continue };
        match r {
            Role::Cell => {}
            Role::Mosaic => part
                .mosaic
                .push((names.get(i).cloned().unwrap_or_default(), id)),
            Role::Host { name, addr } => part.hosts.push((name.clone(), *addr, id)),
            Role::Router { host, addr } => part.gateways.push((host.clone(), *addr, id)),
        }
    }
    part
}

/// A whole network has no outside.
struct Nowhere;

impl Outside<Unit> for Nowhere {
    fn about(&self, _: usize, _: bool, member: &str) -> Result<(String, String), String> {
        Err(format!("{member} has a link to nowhere"))
    }
    fn input(&mut self, _: usize) -> Result<Box<dyn ExternalSource<Unit>>, String> {
        Err("a whole network has no input from outside".into())
    }
    fn output(&mut self, _: usize) -> Result<Box<dyn ExternalSink<Unit>>, String> {
        Err("a whole network has no output to outside".into())
    }
}

/// The far ends of a mixed network's links: cell links as in a cell
/// network, cables as in an ATOMIC one.
struct MixedOutside<'a> {
    cells: crate::process::CellOutside<'a>,
    cables: crate::atomic::CableOutside<'a>,
    cell_dirs: usize,
}

impl Outside<Unit> for MixedOutside<'_> {
    fn about(&self, k: usize, from_end: bool, member: &str) -> Result<(String, String), String> {
        match k.checked_sub(self.cell_dirs) {
            None => self.cells.about(k, from_end, member),
            Some(j) if j < self.cables.dirs() => self.cables.about(j, from_end, member),
            Some(_) => Err(format!(
                "\"{member}\" and its router's interface node must run in one process"
            )),
        }
    }
    fn input(&mut self, k: usize) -> Result<Box<dyn ExternalSource<Unit>>, String> {
        Ok(match k.checked_sub(self.cell_dirs) {
            None => Box::new(SourceOf::new(self.cells.input(k)?)),
            Some(j) => Box::new(SourceOf::new(self.cables.input(j)?)),
        })
    }
    fn output(&mut self, k: usize) -> Result<Box<dyn ExternalSink<Unit>>, String> {
        Ok(match k.checked_sub(self.cell_dirs) {
            None => Box::new(SinkOf::new(self.cells.output(k)?)),
            Some(j) => Box::new(SinkOf::new(self.cables.output(j)?)),
        })
    }
}
