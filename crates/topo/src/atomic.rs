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

/// One group of an ATOMIC network (a mesh board, or a host with its
/// interface node) set up to run as its own process: its nodes, the links
/// among them, and its cables to other groups over UDP.
pub struct AtomicProcess {
    /// The group's nodes (Mosaic nodes, then hosts).
    pub nodes: Vec<Box<dyn aurora_rt::frames::FrameNode<Vec<u8>>>>,
    /// Each node's name (a host's is "host NAME").
    pub names: Vec<String>,
    /// Hosts: name, address, index in `nodes`.
    pub hosts: Vec<(String, Ipv4Addr, usize)>,
    /// Links inside the group.
    pub links: Vec<aurora_rt::frames::OneWay>,
    /// Cables to other groups.
    pub udp: Vec<aurora_rt::frames::UdpEnd>,
    /// Each UDP end described: "m1.2.0:East <-> m2.0.0:West @ addr".
    pub cables: Vec<String>,
    /// TUN interfaces joined to hosts here (by index in `nodes`).
    pub devices: Vec<(aurora_engine::NodeId, Box<dyn aurora_rt::PacketDevice>)>,
    /// Those interfaces, described.
    pub tun_names: Vec<String>,
}

impl AtomicNet {
    /// The group called `name` (a mesh or a host) as its own process.
    pub fn process(&self, name: &str, seed: u64) -> Result<AtomicProcess, String> {
        if !self.groups.iter().any(|g| g == name) {
            return Err(format!(
                "the network has no mesh or ATOMIC host called \"{name}\""
            ));
        }
        let plan = self.plan(seed);
        let m = plan.mosaic.len();
        let mut local: Vec<Option<usize>> = vec![None; m + plan.hosts.len()];
        let mut nodes: Vec<Box<dyn aurora_rt::frames::FrameNode<Vec<u8>>>> = Vec::new();
        let mut names = Vec::new();
        for (i, node) in plan.mosaic.into_iter().enumerate() {
            if self.groups[i] == name {
                local[i] = Some(nodes.len());
                nodes.push(Box::new(node));
                names.push(self.names[i].clone());
            }
        }
        let mut hosts = Vec::new();
        for (k, (addr, host, node)) in plan.hosts.into_iter().enumerate() {
            if self.groups[node] == name {
                local[m + k] = Some(nodes.len());
                let hname = self
                    .hosts
                    .iter()
                    .find(|h| h.2 == node)
                    .map_or_else(|| addr.to_string(), |h| h.0.clone());
                hosts.push((hname.clone(), addr, nodes.len()));
                names.push(format!("host {hname}"));
                nodes.push(Box::new(host));
            }
        }
        let id = |i: usize| aurora_engine::NodeId(i as u32);
        let mut links = Vec::new();
        let mut spec_of = BTreeMap::new();
        for &(from, to, spec) in &plan.links {
            spec_of.insert(from, spec);
            if let (Some(a), Some(b)) = (local[from.0], local[to.0]) {
                links.push(aurora_rt::frames::OneWay {
                    from: (id(a), from.1),
                    to: (id(b), to.1),
                    spec,
                });
            }
        }
        let mut udp = Vec::new();
        let mut cables = Vec::new();
        for c in &self.cables {
            let (la, lb) = (local[c.a.0], local[c.b.0]);
            if la.is_some() == lb.is_some() {
                continue; // inside the group (done above) or elsewhere
            }
            let describe = format!(
                "{}:{:?} <-> {}:{:?}",
                self.names[c.a.0], c.a.1, self.names[c.b.0], c.b.1
            );
            let (here, local_addr, remote_addr, is_a) = match (la, c.udp) {
                (_, None) => {
                    return Err(format!(
                        "the cable {describe} has no udp_a and udp_b, so \"{name}\" cannot run as its own process"
                    ))
                }
                (Some(i), Some((x, y))) => (i, x, y, true),
                (None, Some((x, y))) => (lb.expect("one end is here"), y, x, false),
            };
            let end = if is_a { c.a } else { c.b };
            let sends = is_a || !c.oneway;
            let hears = !is_a || !c.oneway;
            let link = aurora_link::frame_udp::FrameUdp::open(local_addr, remote_addr)
                .map_err(|e| e.to_string())?;
            let spec = spec_of
                .get(&(end.0, end.1 as u16))
                .copied()
                .unwrap_or_else(|| aurora_atomic::layout::channel_spec(0.0));
            udp.push(aurora_rt::frames::UdpEnd {
                node: id(here),
                out_port: sends.then_some(end.1 as u16),
                in_port: hears.then_some(end.1 as u16),
                link,
                spec,
            });
            cables.push(format!("{describe} @ {local_addr} -> {remote_addr}"));
        }
        let mut devices: Vec<(aurora_engine::NodeId, Box<dyn aurora_rt::PacketDevice>)> =
            Vec::new();
        let mut tun_names = Vec::new();
        for (hname, _, i) in &hosts {
            if let Some((_, t)) = self.tuns.iter().find(|(n, _)| n == hname) {
                devices.push((id(*i), Box::new(crate::open_tun(t)?)));
                tun_names.push(format!("{} {}/{} mtu {}", t.name, t.addr, t.prefix, t.mtu));
            }
        }
        Ok(AtomicProcess {
            nodes,
            names,
            hosts,
            links,
            udp,
            cables,
            devices,
            tun_names,
        })
    }
}
