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

use aurora_atomic::ac::{AcConfig, Method};
use aurora_atomic::built::{Built, Plan};
use aurora_atomic::host::{AcRole, HostConfig, IpFlow};
use aurora_atomic::layout::{Layout, LayoutNode, Wire};
use aurora_atomic::wire::Dir;
use aurora_time::{Duration, Instant};
use serde::Deserialize;

use crate::{plain_name, Ctx, Problem, Problems};

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
}

fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn dir(s: &str) -> Option<Dir> {
    match s.to_ascii_lowercase().as_str() {
        "east" | "e" => Some(Dir::East),
        "west" | "w" => Some(Dir::West),
        "north" | "n" => Some(Dir::North),
        "south" | "s" => Some(Dir::South),
        _ => None,
    }
}

/// True if the file describes an ATOMIC network.
pub(crate) fn is_atomic(f: &crate::File) -> bool {
    !f.mesh.is_empty()
        || !f.atomic_host.is_empty()
        || !f.cable.is_empty()
        || !f.atomic_flow.is_empty()
}

/// Checks and compiles the ATOMIC sections of a file.
pub(crate) fn compile(f: &crate::File, c: &mut Ctx) -> Option<AtomicNet> {
    let mut layout = Layout::default();
    let mut names: Vec<String> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut groups: Vec<String> = Vec::new();
    let mut add = |c: &mut Ctx,
                   span: std::ops::Range<usize>,
                   name: String,
                   group: &str,
                   host: Option<Ipv4Addr>,
                   mesh: Option<usize>,
                   layout: &mut Layout|
     -> usize {
        groups.push(group.to_string());
        if index.contains_key(&name) {
            c.at(span, format!("the name \"{name}\" is used twice"));
        }
        let i = layout.nodes.len();
        layout.nodes.push(LayoutNode {
            id: fnv(&name),
            host,
            mesh,
        });
        index.insert(name.clone(), i);
        names.push(name);
        i
    };
    for (m, d) in f.mesh.iter().enumerate() {
        let def = d.get_ref();
        if !plain_name(&def.name) {
            c.at(
                d.span(),
                format!(
                    "the mesh name \"{}\" must be letters, digits, '-' or '_'",
                    def.name
                ),
            );
        }
        if def.size == 0 || def.size > 64 {
            c.at(
                d.span(),
                format!(
                    "mesh \"{}\" has size {}; it must be 1 to 64",
                    def.name, def.size
                ),
            );
            continue;
        }
        let n = usize::from(def.size);
        let mut ids = Vec::with_capacity(n * n);
        for y in 0..n {
            for x in 0..n {
                ids.push(add(
                    c,
                    d.span(),
                    format!("{}.{x}.{y}", def.name),
                    &def.name,
                    None,
                    Some(m),
                    &mut layout,
                ));
            }
        }
        for y in 0..n {
            for x in 0..n {
                let here = ids[y * n + x];
                let mut link = |to: usize, d: Dir| {
                    layout.wires.push(Wire {
                        from: (here, d),
                        to: (to, d.opposite()),
                        feet: 0.0,
                    });
                    layout.wires.push(Wire {
                        from: (to, d.opposite()),
                        to: (here, d),
                        feet: 0.0,
                    });
                };
                if x + 1 < n {
                    link(ids[y * n + x + 1], Dir::East);
                }
                if y + 1 < n {
                    link(ids[(y + 1) * n + x], Dir::North);
                }
            }
        }
    }
    let mut hosts = Vec::new();
    let mut tuns = Vec::new();
    let mut addrs: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
    for h in &f.atomic_host {
        let d = h.get_ref();
        if !plain_name(&d.name) {
            c.at(
                h.span(),
                format!(
                    "the name \"{}\" must be letters, digits, '-', '_' or '.'",
                    d.name
                ),
            );
        }
        // An address, with the LAN's prefix length if given (default 24).
        let (ip, prefix) = match d.ip.split_once('/') {
            Some((a, p)) => (a, p.parse::<u8>().ok().filter(|p| *p <= 32)),
            None => (d.ip.as_str(), Some(24)),
        };
        let addr: Option<Ipv4Addr> = ip.parse().ok().filter(|_| prefix.is_some());
        if addr.is_none() {
            c.at(
                h.span(),
                format!(
                    "ip \"{}\" of host \"{}\" is not an IPv4 address (with a prefix length up to 32, if any)",
                    d.ip, d.name
                ),
            );
        }
        if let (Some(a), Some(p)) = (addr, prefix) {
            if let Some(t) = &d.tun {
                let mtu = d.mtu.unwrap_or(9000);
                if !(68..=65_000).contains(&mtu) {
                    c.at(h.span(), format!("MTU {mtu} is outside 68 to 65000"));
                }
                if t.is_empty() || t.len() > 15 || !plain_name(t) {
                    c.at(
                        h.span(),
                        format!("tun \"{t}\" must be 1 to 15 letters, digits, '-', '_' or '.'"),
                    );
                }
                tuns.push((
                    d.name.clone(),
                    crate::TunSpec {
                        name: t.clone(),
                        addr: a,
                        prefix: p,
                        mtu,
                        routes: Vec::new(),
                    },
                ));
            }
        }
        if let Some(a) = addr {
            if let Some(other) = addrs.insert(a, d.name.clone()) {
                c.at(
                    h.span(),
                    format!("hosts \"{other}\" and \"{}\" both have address {a}", d.name),
                );
            }
        }
        let role = match d.ac.as_deref() {
            None | Some("never") => AcRole::Never,
            Some("always") => AcRole::Always,
            Some("auto") => AcRole::Auto,
            Some(o) => {
                c.at(h.span(), format!("ac \"{o}\" is not always, auto or never"));
                AcRole::Never
            }
        };
        let method = match d.method.as_deref() {
            None | Some("loops") => Method::Loops,
            Some("flood") => Method::Flood,
            Some(o) => {
                c.at(h.span(), format!("method \"{o}\" is not loops or flood"));
                Method::Loops
            }
        };
        let addr = addr.unwrap_or(Ipv4Addr::UNSPECIFIED);
        let node = add(
            c,
            h.span(),
            d.name.clone(),
            &d.name,
            Some(addr),
            None,
            &mut layout,
        );
        let cfg = HostConfig {
            role,
            ac: AcConfig {
                method,
                ..AcConfig::default()
            },
            ..HostConfig::new(addr, 0)
        };
        hosts.push((d.name.clone(), cfg, node));
    }
    let end = |c: &mut Ctx, span: std::ops::Range<usize>, s: &str| -> Option<(usize, Dir)> {
        let Some((n, d)) = s.rsplit_once(':') else {
            c.at(
                span,
                format!("cable end \"{s}\" is not node:direction, as \"m1.0.0:west\""),
            );
            return None;
        };
        let Some(&i) = index.get(n) else {
            c.at(
                span,
                format!("cable end \"{s}\" names no node (meshes' nodes are NAME.X.Y)"),
            );
            return None;
        };
        let Some(d) = dir(d) else {
            c.at(
                span,
                format!("\"{d}\" in \"{s}\" is not east, west, north or south"),
            );
            return None;
        };
        Some((i, d))
    };
    let mut outs: BTreeMap<(usize, Dir), ()> = layout.wires.iter().map(|w| (w.from, ())).collect();
    let mut ins: BTreeMap<(usize, Dir), ()> = layout.wires.iter().map(|w| (w.to, ())).collect();
    let mut cables = Vec::new();
    for k in &f.cable {
        let d = k.get_ref();
        let (Some(a), Some(b)) = (end(c, k.span(), &d.a), end(c, k.span(), &d.b)) else {
            continue;
        };
        if !(0.0..=10_000.0).contains(&d.feet) {
            c.at(
                k.span(),
                format!("feet {} is not a length from 0 to 10000", d.feet),
            );
            continue;
        }
        let mut take = |c: &mut Ctx, out: (usize, Dir), inp: (usize, Dir)| {
            if outs.insert(out, ()).is_some() {
                c.at(
                    k.span(),
                    format!(
                        "the {:?} output of \"{}\" is already cabled",
                        out.1, names[out.0]
                    ),
                );
            }
            if ins.insert(inp, ()).is_some() {
                c.at(
                    k.span(),
                    format!(
                        "the {:?} input of \"{}\" is already cabled",
                        inp.1, names[inp.0]
                    ),
                );
            }
        };
        take(c, a, b);
        layout.wires.push(Wire {
            from: a,
            to: b,
            feet: d.feet,
        });
        if !d.oneway {
            take(c, b, a);
            layout.wires.push(Wire {
                from: b,
                to: a,
                feet: d.feet,
            });
        }
        let udp = crate::udp_pair(c, k.span(), &d.udp_a, &d.udp_b);
        cables.push(Cable {
            a,
            b,
            oneway: d.oneway,
            udp,
        });
    }
    let mut flows = Vec::new();
    for g in &f.atomic_flow {
        let d = g.get_ref();
        let from_ok = hosts.iter().any(|h| h.0 == d.from);
        let to = hosts.iter().find(|h| h.0 == d.to).map(|h| h.1.addr);
        if !from_ok {
            c.at(
                g.span(),
                format!("flow from \"{}\", which is not an ATOMIC host", d.from),
            );
        }
        if to.is_none() {
            c.at(
                g.span(),
                format!("flow to \"{}\", which is not an ATOMIC host", d.to),
            );
        }
        if !(28..=65535).contains(&d.size) {
            c.at(
                g.span(),
                format!("flow size {} is outside 28 to 65535", d.size),
            );
        }
        let count_ok = crate::count_in(c, g.span(), "flow count", d.count, crate::MAX_FLOW_COUNT);
        if d.kbps > crate::MAX_KBPS {
            c.at(
                g.span(),
                format!("flow kbps {} is outside 0 to {}", d.kbps, crate::MAX_KBPS),
            );
        }
        let interval = crate::duration_in(
            c,
            g.span(),
            "flow interval",
            &d.interval,
            crate::INTERVAL_RANGE,
        );
        let start = match &d.start {
            None => Some(Duration::ZERO),
            Some(s) => crate::duration_in(c, g.span(), "flow start", s, crate::START_RANGE),
        };
        if let (true, true, Some(dst), Some(interval), Some(start)) =
            (count_ok, from_ok, to, interval, start)
        {
            flows.push((
                d.from.clone(),
                IpFlow {
                    dst,
                    size: d.size.clamp(28, 65535),
                    count: d.count,
                    start: Instant::ZERO + start,
                    interval,
                    kbps: d.kbps,
                },
            ));
        }
    }
    if layout.nodes.is_empty() {
        c.at(
            0..0,
            "an ATOMIC network needs at least one mesh or host".into(),
        );
    }
    Some(AtomicNet {
        layout,
        names,
        hosts,
        flows,
        cables,
        groups,
        tuns,
    })
}

/// Reads, checks and compiles an ATOMIC topology file.
pub fn compile_atomic(text: &str) -> Result<AtomicNet, Problems> {
    let file: crate::File = toml::from_str(text).map_err(|e| {
        let mut c = Ctx::new(text);
        c.at(e.span().unwrap_or(0..0), e.message().to_string());
        Problems(c.problems)
    })?;
    let mut c = Ctx::new(text);
    if !file.switch.is_empty()
        || !file.host.is_empty()
        || !file.link.is_empty()
        || !file.pvc.is_empty()
    {
        c.at(0..0, "a file describes one kind of network: ATOMIC (mesh, atomic_host, cable, atomic_flow) or cells (switch, host, link, pvc), not both".into());
    }
    let net = compile(&file, &mut c);
    if !c.problems.is_empty() {
        c.problems.sort_by_key(|p| (p.line, p.col));
        return Err(Problems(c.problems));
    }
    net.ok_or_else(|| {
        Problems(vec![Problem {
            line: 0,
            col: 0,
            msg: "no ATOMIC network".into(),
        }])
    })
}

/// True if `text` parses as a topology file describing an ATOMIC network
/// (false for anything else, including files that do not parse).
pub fn is_atomic_text(text: &str) -> bool {
    toml::from_str::<crate::File>(text).is_ok_and(|f| is_atomic(&f))
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
        let mut outside = CableOutside {
            net: self,
            dirs: &dirs,
            tx: BTreeMap::new(),
        };
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
struct CableOutside<'a> {
    net: &'a AtomicNet,
    dirs: &'a [crate::process::WholeDir],
    /// A cable end's sender, opened with its receiver.
    tx: BTreeMap<usize, aurora_link::frame_udp::FrameTx>,
}

impl CableOutside<'_> {
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
