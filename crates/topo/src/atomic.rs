//! ATOMIC networks in topology files: Mosaic mesh boards, hosts (each on
//! its own host-interface node), cables between node channels with their
//! lengths, which hosts run an Address Consultant, and IP flows.
//!
//! ```toml
//! [[mesh]]
//! name = "m1"          # nodes m1.X.Y, X and Y from 0 at the South West corner
//! size = 4             # 4 x 4
//!
//! [[atomic_host]]
//! name = "a"           # its host-interface node is also called "a"
//! ip = "10.5.0.1"
//! ac = "always"        # always | auto (becomes one if it hears none) | never (default)
//! method = "loops"     # loops (symmetric, consistent networks) | flood (any)
//!
//! [[cable]]
//! a = "a:east"         # a node's output channel ...
//! b = "m1.0.0:west"    # ... into a node's input channel
//! feet = 10            # cable length (the T(L, D) model's D)
//! oneway = false       # true: only a -> b
//!
//! [[atomic_flow]]      # IPv4 packets from one host to another, routes from the AC
//! from = "a"
//! to = "b"
//! size = 1500
//! count = 1000
//! interval = "100us"
//! start = "50ms"
//! kbps = 0             # a declared bandwidth asks the AC for a route clear of other such flows
//! ```

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use aurora_atomic::built::{Built, Plan};
use aurora_atomic::host::{HostConfig, IpFlow};
use aurora_atomic::layout::Layout;
use aurora_atomic::wire::Dir;
use serde::Deserialize;

use crate::Problems;

/// A mesh board.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshDef {
    /// Its name; its nodes are `NAME.X.Y`.
    pub name: String,
    /// Side: `size` × `size` nodes.
    pub size: u16,
}

/// An ATOMIC host.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AtomicHostDef {
    /// Its name (and its interface node's).
    pub name: String,
    /// Its IPv4 address.
    pub ip: String,
    /// `always`, `auto` or `never`.
    #[serde(default)]
    pub ac: Option<String>,
    /// `loops` or `flood`.
    #[serde(default)]
    pub method: Option<String>,
    /// A TUN interface of this name for the host's local IP stack, made
    /// when the host runs as its own process (`aurora node`).
    #[serde(default)]
    pub tun: Option<String>,
    /// The TUN interface's MTU (default 9000).
    #[serde(default)]
    pub mtu: Option<usize>,
    /// The network namespace to make the TUN interface in (see
    /// [`crate::TunSpec::netns`]).
    #[serde(default)]
    pub netns: Option<String>,
    /// The IP router for addresses off the LAN (outside `ip`'s prefix):
    /// an ATOMIC host that is a `router`'s interface.
    #[serde(default)]
    pub gateway: Option<String>,
    /// This host is the named IP router's interface on the LAN: the
    /// router forwards what arrives here, and sends here what it routes
    /// to the LAN.
    #[serde(default)]
    pub router: Option<String>,
}

/// A cable.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CableDef {
    /// `node:direction` whose output the cable takes.
    pub a: String,
    /// `node:direction` whose input it feeds.
    pub b: String,
    /// Length in feet.
    #[serde(default)]
    pub feet: f64,
    /// Only from `a` to `b`.
    #[serde(default)]
    pub oneway: bool,
    /// UDP address end `a` binds when its group runs as its own process.
    #[serde(default)]
    pub udp_a: Option<String>,
    /// UDP address end `b` binds.
    #[serde(default)]
    pub udp_b: Option<String>,
}

/// A cable after checking.
#[derive(Clone, Debug)]
pub struct Cable {
    /// End `a`: layout node and direction.
    pub a: (usize, Dir),
    /// End `b`.
    pub b: (usize, Dir),
    /// Only `a` to `b`.
    pub oneway: bool,
    /// UDP addresses of the two ends, for processes.
    pub udp: Option<(std::net::SocketAddr, std::net::SocketAddr)>,
}

/// An IP flow between ATOMIC hosts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AtomicFlowDef {
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Packet size in bytes (28 to 65535).
    pub size: usize,
    /// Packets.
    pub count: u64,
    /// Between packets.
    pub interval: String,
    /// First packet.
    #[serde(default)]
    pub start: Option<String>,
    /// Declared bandwidth, kb/s.
    #[serde(default)]
    pub kbps: u32,
}

/// A checked ATOMIC network.
pub struct AtomicNet {
    /// Nodes and channels.
    pub layout: Layout,
    /// Each layout node's name.
    pub names: Vec<String>,
    /// Hosts: name, settings (the identifier is filled in at build), the
    /// layout node.
    pub hosts: Vec<(String, HostConfig, usize)>,
    /// Flows: sending host, flow.
    pub flows: Vec<(String, IpFlow)>,
    /// Cables.
    pub cables: Vec<Cable>,
    /// Each layout node's group: its mesh's name, or its host's. A group
    /// runs as one process under `aurora node`.
    pub groups: Vec<String>,
    /// Hosts with TUN interfaces: host name, interface.
    pub tuns: Vec<(String, crate::TunSpec)>,
    /// Hosts that are IP routers' interfaces on the LAN: host name, the
    /// router's name, the LAN's prefix length.
    pub routers: Vec<(String, String, u8)>,
}

/// Reads, checks and compiles an ATOMIC topology file: one with ATOMIC
/// parts only (a file with cell parts as well is refused; [`crate::compile()`]
/// reads any file).
pub fn compile_atomic(text: &str) -> Result<AtomicNet, Problems> {
    let file = crate::compile::parse(text)?;
    let mut r = crate::compile::Reader::new(text, &file);
    if !file.switch.is_empty()
        || !file.host.is_empty()
        || !file.link.is_empty()
        || !file.pvc.is_empty()
    {
        r.refuse("a file describes one kind of network: ATOMIC (mesh, atomic_host, cable, atomic_flow) or cells (switch, host, link, pvc), not both");
    }
    r.atomic();
    r.into_atomic()
}

/// True if `text` parses as a topology file with ATOMIC parts (false for
/// anything else, including files that do not parse).
pub fn is_atomic_text(text: &str) -> bool {
    crate::compile::parse(text).is_ok_and(|f| f.has_atomic_parts())
}

impl AtomicNet {
    /// Its nodes (hosts with their flows) and links, for either driver.
    pub fn plan(&self, seed: u64) -> Plan {
        let cfgs: BTreeMap<Ipv4Addr, HostConfig> =
            self.hosts.iter().map(|(_, c, _)| (c.addr, *c)).collect();
        let mut plan = self.layout.plan(seed, &|addr, id| HostConfig {
            id,
            ..cfgs
                .get(&addr)
                .copied()
                .unwrap_or(HostConfig::new(addr, id))
        });
        for (from, f) in &self.flows {
            let addr = self.hosts.iter().find(|h| &h.0 == from).map(|h| h.1.addr);
            if let Some(h) = plan.hosts.iter_mut().find(|h| Some(h.0) == addr) {
                h.1.add_flow(*f);
            }
        }
        plan
    }

    /// Builds it in the virtual-time driver, with its flows.
    pub fn build(&self, seed: u64) -> Result<Built, String> {
        self.plan(seed).into_sim(seed).map_err(|e| e.to_string())
    }
}

/// Groups of an ATOMIC network (mesh boards, hosts with their interface
/// nodes) set up to run together as one process.
pub struct AtomicProcess {
    /// The process: its Mosaic nodes, then its hosts.
    pub process: crate::NodeProcess<Vec<u8>>,
    /// Its hosts: name, address, id in the process's engine.
    pub hosts: Vec<(String, Ipv4Addr, aurora_engine::NodeId)>,
    /// Its Mosaic nodes, by id in the process's engine.
    pub mosaics: Vec<aurora_engine::NodeId>,
}

impl AtomicNet {
    /// The groups called `names` (meshes and hosts) as one process: the
    /// wires and cables among them are the engine's own links, every cable
    /// to another group a UDP link between the addresses the cable gives,
    /// and a host's TUN interface, if it has one, its packet device.
    pub fn process(&self, names: &[String], seed: u64) -> Result<AtomicProcess, String> {
        let plan = self.plan(seed);
        let m = plan.mosaic.len();
        // Every node of the plan: Mosaic nodes, then hosts; each in the
        // group of its layout node.
        let group_of = |i: usize| -> &str {
            let layout = if i < m { i } else { plan.hosts[i - m].2 };
            &self.groups[layout]
        };
        let known: Vec<(&str, usize)> = (0..m + plan.hosts.len())
            .map(|i| (group_of(i), i))
            .collect();
        let ids = crate::process::members_named(names, &known, "mesh or ATOMIC host")?;
        let host_name = |layout: usize, addr: Ipv4Addr| {
            self.hosts
                .iter()
                .find(|h| h.2 == layout)
                .map_or_else(|| addr.to_string(), |h| h.0.clone())
        };
        let node_names: Vec<String> = self
            .names
            .iter()
            .cloned()
            .chain(
                plan.hosts
                    .iter()
                    .map(|(a, _, layout)| format!("host {}", host_name(*layout, *a))),
            )
            .collect();
        let dirs: Vec<crate::process::WholeDir> = plan
            .links
            .iter()
            .map(|&(from, to, spec)| crate::process::WholeDir { from, to, spec })
            .collect();
        let mut hosts = Vec::new();
        let mut mosaics = Vec::new();
        let mut tuns = Vec::new();
        let mut members: crate::process::Members<Vec<u8>> = Vec::new();
        let mut wanted = ids.iter().copied().peekable();
        let local = |k: usize| aurora_engine::NodeId(k as u32);
        for (i, node) in plan.mosaic.into_iter().enumerate() {
            if wanted.next_if_eq(&i).is_some() {
                mosaics.push(local(members.len()));
                members.push((i, node_names[i].clone(), Box::new(node)));
            }
        }
        for (k, (addr, host, layout)) in plan.hosts.into_iter().enumerate() {
            if wanted.next_if_eq(&(m + k)).is_some() {
                let name = host_name(layout, addr);
                if let Some((_, t)) = self.tuns.iter().find(|(n, _)| *n == name) {
                    tuns.push((m + k, t.clone()));
                }
                hosts.push((name, addr, local(members.len())));
                members.push((m + k, node_names[m + k].clone(), Box::new(host)));
            }
        }
        let name_of = |n: usize, p: aurora_net::PortId| {
            let node = node_names.get(n).map_or("?", String::as_str);
            match (n < m).then(|| Dir::from_port(p as u8)).flatten() {
                Some(d) => format!("{node}:{d:?}"),
                None => format!("{node}:{p}"),
            }
        };
        let mut outside = CableOutside::new(self, &dirs);
        let process = crate::process::build(
            names.to_vec(),
            seed,
            members,
            &dirs,
            &name_of,
            &mut outside,
            &tuns,
        )?;
        Ok(AtomicProcess {
            process,
            hosts,
            mosaics,
        })
    }
}

/// The far ends of an ATOMIC network's cables: frames over UDP, one socket
/// per cable end for both its directions.
pub(crate) struct CableOutside<'a> {
    net: &'a AtomicNet,
    dirs: &'a [crate::process::WholeDir],
    /// A cable end's sender, opened with its receiver.
    tx: BTreeMap<usize, aurora_link::frame_udp::FrameTx>,
}

impl<'a> CableOutside<'a> {
    /// The far ends of `net`'s cables; `dirs` are its plan's channels.
    pub(crate) fn new(net: &'a AtomicNet, dirs: &'a [crate::process::WholeDir]) -> Self {
        CableOutside {
            net,
            dirs,
            tx: BTreeMap::new(),
        }
    }

    /// How many channels there are.
    pub(crate) fn dirs(&self) -> usize {
        self.dirs.len()
    }

    /// The cable carrying direction `k`, and whether this end is its end
    /// `a`.
    fn cable(&self, k: usize, from_end: bool) -> Result<(usize, &Cable, bool), String> {
        let d = &self.dirs[k];
        let end = |(n, p): (usize, u16)| Some((n, Dir::from_port(u8::try_from(p).ok()?)?));
        let (from, to) = (end(d.from), end(d.to));
        let found = self.net.cables.iter().enumerate().find(|(_, c)| {
            (from == Some(c.a) && to == Some(c.b))
                || (!c.oneway && from == Some(c.b) && to == Some(c.a))
        });
        let Some((i, c)) = found else {
            return Err(format!(
                "the channel from {} to {} joins two processes but is no cable",
                self.net.names.get(d.from.0).map_or("?", String::as_str),
                self.net.names.get(d.to.0).map_or("?", String::as_str)
            ));
        };
        let mine = if from_end { from } else { to };
        Ok((i, c, mine == Some(c.a)))
    }

    fn describe(&self, c: &Cable) -> String {
        format!(
            "{}:{:?} <-> {}:{:?}",
            self.net.names[c.a.0], c.a.1, self.net.names[c.b.0], c.b.1
        )
    }

    /// (this end's address, the far end's)
    fn addrs(
        &self,
        c: &Cable,
        is_a: bool,
        member: &str,
    ) -> Result<(std::net::SocketAddr, std::net::SocketAddr), String> {
        match c.udp {
            Some((x, y)) if is_a => Ok((x, y)),
            Some((x, y)) => Ok((y, x)),
            None => Err(format!(
                "the cable {} has no udp_a and udp_b, so \"{}\" cannot run as its own process",
                self.describe(c),
                crate::escape(member)
            )),
        }
    }

    fn open(
        &mut self,
        k: usize,
        from_end: bool,
    ) -> Result<aurora_link::frame_udp::FrameRx, String> {
        let (i, c, is_a) = self.cable(k, from_end)?;
        let (local, remote) = self.addrs(c, is_a, "")?;
        let (tx, rx) = aurora_link::frame_udp::open(local, remote).map_err(|e| e.to_string())?;
        self.tx.insert(i, tx);
        Ok(rx)
    }
}

impl crate::process::Outside<Vec<u8>> for CableOutside<'_> {
    fn about(&self, k: usize, from_end: bool, member: &str) -> Result<(String, String), String> {
        let (_, c, is_a) = self.cable(k, from_end)?;
        let (local, remote) = self.addrs(c, is_a, member)?;
        Ok((local.to_string(), remote.to_string()))
    }

    fn input(
        &mut self,
        k: usize,
    ) -> Result<Box<dyn aurora_engine::io::ExternalSource<Vec<u8>>>, String> {
        Ok(Box::new(crate::process::FrameSource(self.open(k, false)?)))
    }

    fn output(
        &mut self,
        k: usize,
    ) -> Result<Box<dyn aurora_engine::io::ExternalSink<Vec<u8>>>, String> {
        let (i, _, _) = self.cable(k, true)?;
        if !self.tx.contains_key(&i) {
            // A one-way cable this end only sends on.
            self.open(k, true)?;
        }
        match self.tx.remove(&i) {
            Some(tx) => Ok(Box::new(crate::process::FrameSink(tx))),
            None => Err("the cable's UDP socket is gone".into()),
        }
    }
}
