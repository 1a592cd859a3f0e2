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
//! memory = "1MiB"      # packets its port to its interface holds (and back); 1 MiB default
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

use aurora_atomic::built::Plan;
use aurora_atomic::flow::FlowId;
use aurora_atomic::host::{HostConfig, IpFlow};
use aurora_atomic::layout::Layout;
use aurora_atomic::wire::Dir;
use serde::Deserialize;

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
    /// Bytes of packets its port to its interface, and the interface's
    /// port to it, hold waiting (default 1 MiB; the prototype board had
    /// 32 KB an interface).
    #[serde(default)]
    pub memory: Option<crate::tcp::Size>,
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
    /// Packet size in bytes (36 to 65535: IPv4 and UDP headers and a sequence number at least).
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
            let Some(src) = self.hosts.iter().find(|h| &h.0 == from).map(|h| h.1.addr) else {
                continue;
            };
            let Some(h) = plan.hosts.iter_mut().find(|h| h.0 == src) else {
                continue;
            };
            // Its receiver counts it (and only the flows it expects).
            let id = u16::try_from(h.1.add_flow(*f)).map(|flow| FlowId { src, flow });
            if let (Ok(id), Some(rx)) = (id, plan.hosts.iter_mut().find(|h| h.0 == f.dst)) {
                rx.1.expect_flow(id);
            }
        }
        plan
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
