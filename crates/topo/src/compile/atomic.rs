//! The ATOMIC step: Mosaic mesh boards, ATOMIC hosts (each on its own
//! host-interface node), cables between node channels, and IP flows
//! between the hosts, compiled into an [`AtomicNet`]. ATOMIC names share
//! one set with the cell nodes' names.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::ops::Range;

use aurora_atomic::ac::{AcConfig, Method};
use aurora_atomic::flow::{MAX_FLOWS_PER_HOST, MIN_FLOW_PACKET};
use aurora_atomic::host::{AcRole, HostConfig, IpFlow};
use aurora_atomic::layout::{Layout, LayoutNode, Wire};
use aurora_atomic::wire::Dir;
use aurora_time::Instant;

use super::checks::{count_in, plain_name, schedule, udp_pair, Names};
use super::{Ctx, Reader};
use crate::atomic::{AtomicNet, Cable};
use crate::{TunSpec, MAX_FLOW_COUNT, MAX_KBPS};

/// The most memory an ATOMIC host may give its interface's ports, bytes.
const MAX_MEMORY: u64 = 1 << 30;

/// What the ATOMIC step has built so far.
struct Atomic {
    layout: Layout,
    /// Each layout node's name.
    names: Vec<String>,
    /// Layout nodes by name (the last, if a name is used twice).
    index: BTreeMap<String, usize>,
    /// The ATOMIC node names, each once.
    taken: Names,
    /// Each layout node's group: its mesh's name, or its host's.
    groups: Vec<String>,
    hosts: Vec<(String, HostConfig, usize)>,
    tuns: Vec<(String, TunSpec)>,
    /// Hosts that are routers' interfaces: host, router, prefix length.
    routers: Vec<(String, String, u8)>,
    cables: Vec<Cable>,
    flows: Vec<(String, IpFlow)>,
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

impl Reader<'_> {
    /// The ATOMIC parts of the file: meshes, hosts, cables, flows.
    pub(crate) fn atomic(&mut self) {
        let mut a = Atomic {
            layout: Layout::default(),
            names: Vec::new(),
            index: BTreeMap::new(),
            taken: Names::new("name"),
            groups: Vec::new(),
            hosts: Vec::new(),
            tuns: Vec::new(),
            routers: Vec::new(),
            cables: Vec::new(),
            flows: Vec::new(),
        };
        self.meshes(&mut a);
        self.atomic_hosts(&mut a);
        self.cables(&mut a);
        self.atomic_flows(&mut a);
        if a.layout.nodes.is_empty() {
            self.c.at(
                0..0,
                "an ATOMIC network needs at least one mesh or host".into(),
            );
        }
        self.atomic = Some(AtomicNet {
            layout: a.layout,
            names: a.names,
            hosts: a.hosts,
            flows: a.flows,
            cables: a.cables,
            groups: a.groups,
            tuns: a.tuns,
            routers: a.routers,
        });
    }

    /// Reports `what` called `name`, declared at `span`, if a cell node
    /// has that name: a node (or mesh) of either kind is named by its name
    /// alone, as in `aurora node NAME`.
    fn not_a_cell_name(&mut self, span: Range<usize>, what: &str, name: &str) {
        if let Some((owner, at)) = self.node_names.owner(name) {
            let (line, _) = self.c.place(at);
            self.c.at(
                span,
                format!(
                    "{what} \"{name}\" has the name of {owner} \"{name}\" (line {line}); the \
                     cell and ATOMIC parts of a file share one set of names, so give each its own"
                ),
            );
        }
    }

    /// Adds a layout node: `what` called `name` (declared at `span`), in
    /// `group`; a host's address or its mesh's number.
    #[allow(clippy::too_many_arguments)]
    fn atomic_node(
        &mut self,
        a: &mut Atomic,
        span: Range<usize>,
        what: &'static str,
        name: String,
        group: &str,
        host: Option<Ipv4Addr>,
        mesh: Option<usize>,
    ) -> usize {
        a.groups.push(group.to_string());
        a.taken.take(&mut self.c, span.clone(), &name, what);
        self.not_a_cell_name(span, what, &name);
        let i = a.layout.nodes.len();
        a.layout.nodes.push(LayoutNode {
            id: fnv(&name),
            host,
            mesh,
        });
        a.index.insert(name.clone(), i);
        a.names.push(name);
        i
    }

    /// Mesh boards: `size` x `size` nodes `NAME.X.Y`, each wired to its
    /// neighbours both ways.
    fn meshes(&mut self, a: &mut Atomic) {
        let file = self.file;
        for (m, d) in file.mesh.iter().enumerate() {
            let def = d.get_ref();
            if !plain_name(&def.name) {
                self.c.at(
                    d.span(),
                    format!(
                        "the mesh name \"{}\" must be letters, digits, '-' or '_'",
                        def.name
                    ),
                );
            }
            self.not_a_cell_name(d.span(), "mesh", &def.name);
            if def.size == 0 || def.size > 64 {
                self.c.at(
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
                    ids.push(self.atomic_node(
                        a,
                        d.span(),
                        "mesh node",
                        format!("{}.{x}.{y}", def.name),
                        &def.name,
                        None,
                        Some(m),
                    ));
                }
            }
            for y in 0..n {
                for x in 0..n {
                    let here = ids[y * n + x];
                    let mut link = |to: usize, d: Dir| {
                        a.layout.wires.push(Wire {
                            from: (here, d),
                            to: (to, d.opposite()),
                            feet: 0.0,
                        });
                        a.layout.wires.push(Wire {
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
    }

    /// ATOMIC hosts: name, address, TUN, Address Consultant role and
    /// method; each on its own host-interface node.
    fn atomic_hosts(&mut self, a: &mut Atomic) {
        let file = self.file;
        let mut addrs: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
        for h in &file.atomic_host {
            let d = h.get_ref();
            let c = &mut self.c;
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
            let gateway = match (&d.gateway, addr, prefix) {
                (Some(g), Some(a), Some(p)) => match g.parse::<Ipv4Addr>() {
                    Ok(g) if same_subnet(a, g, p) && g != a => Some(g),
                    _ => {
                        c.at(
                            h.span(),
                            format!(
                                "gateway \"{g}\" of host \"{}\" is not another address on its LAN {a}/{p}",
                                d.name
                            ),
                        );
                        None
                    }
                },
                _ => None,
            };
            if let Some(Err(m)) = d
                .netns
                .as_deref()
                .map(|ns| crate::ip::netns_ok(&d.name, ns))
            {
                c.at(h.span(), m);
            }
            if d.netns.is_some() && d.tun.is_none() {
                c.at(
                    h.span(),
                    format!("host \"{}\" has a netns but no tun to make in it", d.name),
                );
            }
            if let Some(r) = &d.router {
                if d.tun.is_some() || d.gateway.is_some() || d.netns.is_some() {
                    c.at(
                        h.span(),
                        format!(
                            "host \"{}\" is router \"{r}\"'s interface, so it has no tun, netns or gateway of its own",
                            d.name
                        ),
                    );
                }
                if !matches!(self.kinds.get(r), Some(crate::pvc::Kind::Router(_))) {
                    c.at(
                        h.span(),
                        format!(
                            "host \"{}\" is the interface of router \"{r}\", which is not a [[router]]",
                            d.name
                        ),
                    );
                } else if a.routers.iter().any(|x| &x.1 == r) {
                    c.at(
                        h.span(),
                        format!("router \"{r}\" has more than one interface on the ATOMIC LAN"),
                    );
                }
                a.routers
                    .push((d.name.clone(), r.clone(), prefix.unwrap_or(24)));
            }
            if let (Some(addr), Some(prefix)) = (addr, prefix) {
                if let Some(t) = &d.tun {
                    let mtu = d.mtu.unwrap_or(9000);
                    if let Err(m) = crate::ip::mtu_in_range(mtu) {
                        c.at(h.span(), m);
                    }
                    // A leading '.' is refused here too, as in node names.
                    if !crate::ip::tun_name_ok(t) || t.starts_with('.') {
                        c.at(
                            h.span(),
                            format!("tun \"{t}\" must be 1 to 15 letters, digits, '-', '_' or '.'"),
                        );
                    }
                    a.tuns.push((
                        d.name.clone(),
                        TunSpec {
                            name: t.clone(),
                            addr,
                            prefix,
                            mtu,
                            routes: gateway
                                .map(|g| aurora_ip::node::StaticRoute {
                                    dst: Ipv4Addr::UNSPECIFIED,
                                    prefix: 0,
                                    gateway: g,
                                })
                                .into_iter()
                                .collect(),
                            netns: d.netns.clone(),
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
            let memory = match d.memory.as_ref().map(crate::tcp::Size::bytes) {
                None => aurora_atomic::layout::HOST_BYTES,
                Some(Ok(n @ 1..=MAX_MEMORY)) => n as usize,
                Some(Ok(n)) => {
                    c.at(
                        h.span(),
                        format!("memory of {n} bytes is outside 1 byte to 1GiB"),
                    );
                    aurora_atomic::layout::HOST_BYTES
                }
                Some(Err(m)) => {
                    c.at(h.span(), format!("memory: {m}"));
                    aurora_atomic::layout::HOST_BYTES
                }
            };
            let addr = addr.unwrap_or(Ipv4Addr::UNSPECIFIED);
            let node = self.atomic_node(
                a,
                h.span(),
                "ATOMIC host",
                d.name.clone(),
                &d.name,
                Some(addr),
                None,
            );
            let cfg = HostConfig {
                role,
                ac: AcConfig {
                    method,
                    ..AcConfig::default()
                },
                prefix: if gateway.is_some() {
                    prefix.unwrap_or(24)
                } else {
                    0
                },
                gateway,
                memory,
                ..HostConfig::new(addr, 0)
            };
            a.hosts.push((d.name.clone(), cfg, node));
        }
    }

    /// Cables: from a node's output channel into a node's input channel
    /// (and back, unless one-way), each channel cabled once.
    fn cables(&mut self, a: &mut Atomic) {
        let file = self.file;
        let c = &mut self.c;
        let mut outs: BTreeMap<(usize, Dir), ()> =
            a.layout.wires.iter().map(|w| (w.from, ())).collect();
        let mut ins: BTreeMap<(usize, Dir), ()> =
            a.layout.wires.iter().map(|w| (w.to, ())).collect();
        for k in &file.cable {
            let d = k.get_ref();
            let (Some(end_a), Some(end_b)) = (
                cable_end(c, &a.index, k.span(), &d.a),
                cable_end(c, &a.index, k.span(), &d.b),
            ) else {
                continue;
            };
            if !(0.0..=10_000.0).contains(&d.feet) {
                c.at(
                    k.span(),
                    format!("feet {} is not a length from 0 to 10000", d.feet),
                );
                continue;
            }
            let names = &a.names;
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
            take(c, end_a, end_b);
            a.layout.wires.push(Wire {
                from: end_a,
                to: end_b,
                feet: d.feet,
            });
            if !d.oneway {
                take(c, end_b, end_a);
                a.layout.wires.push(Wire {
                    from: end_b,
                    to: end_a,
                    feet: d.feet,
                });
            }
            let udp = udp_pair(c, k.span(), &d.udp_a, &d.udp_b);
            a.cables.push(Cable {
                a: end_a,
                b: end_b,
                oneway: d.oneway,
                udp,
            });
        }
    }

    /// IP flows from one ATOMIC host to another.
    fn atomic_flows(&mut self, a: &mut Atomic) {
        let file = self.file;
        let c = &mut self.c;
        // Flows per sending host so far: each is named by a source port.
        let mut per_host: BTreeMap<&str, usize> = BTreeMap::new();
        for g in &file.atomic_flow {
            let d = g.get_ref();
            let nth = per_host.entry(d.from.as_str()).or_default();
            *nth += 1;
            let room = *nth <= MAX_FLOWS_PER_HOST;
            let from_ok = a.hosts.iter().any(|h| h.0 == d.from);
            let to = a.hosts.iter().find(|h| h.0 == d.to).map(|h| h.1.addr);
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
            let sender = a.hosts.iter().find(|h| h.0 == d.from).map(|h| h.1);
            let off_lan = match (sender, to) {
                (Some(cfg), Some(dst)) if cfg.gateway.is_some() => {
                    (!same_subnet(cfg.addr, dst, cfg.prefix)).then_some(cfg)
                }
                _ => None,
            };
            if let Some(cfg) = off_lan {
                c.at(
                    g.span(),
                    format!(
                        "flow from \"{}\" to \"{}\" leaves {}/{} through its gateway: a flow stays on one LAN",
                        d.from, d.to, cfg.addr, cfg.prefix
                    ),
                );
            }
            if d.from == d.to {
                c.at(
                    g.span(),
                    format!(
                        "flow from \"{}\" to itself: a flow goes to another host",
                        d.from
                    ),
                );
            }
            if !room {
                c.at(
                    g.span(),
                    format!(
                        "host \"{}\" sends more than {MAX_FLOWS_PER_HOST} flows (a flow is named by its UDP source port)",
                        d.from
                    ),
                );
            }
            if !(MIN_FLOW_PACKET..=65535).contains(&d.size) {
                c.at(
                    g.span(),
                    format!("flow size {} is outside {MIN_FLOW_PACKET} to 65535", d.size),
                );
            }
            let count_ok = count_in(c, g.span(), "flow count", d.count, MAX_FLOW_COUNT);
            if d.kbps > MAX_KBPS {
                c.at(
                    g.span(),
                    format!("flow kbps {} is outside 0 to {}", d.kbps, MAX_KBPS),
                );
            }
            let (interval, start) = schedule(c, g.span(), "flow", &d.interval, &d.start);
            if let (true, true, true, Some(dst), Some(interval), Some(start)) = (
                count_ok,
                from_ok,
                room && d.from != d.to && off_lan.is_none(),
                to,
                interval,
                start,
            ) {
                a.flows.push((
                    d.from.clone(),
                    IpFlow {
                        dst,
                        size: d.size.clamp(MIN_FLOW_PACKET, 65535),
                        count: d.count,
                        start: Instant::ZERO + start,
                        interval,
                        kbps: d.kbps,
                    },
                ));
            }
        }
    }
}

/// Reads cable end `s` (`node:direction`) of the cable at `span`.
fn cable_end(
    c: &mut Ctx,
    index: &BTreeMap<String, usize>,
    span: Range<usize>,
    s: &str,
) -> Option<(usize, Dir)> {
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
}

/// True if `a` and `b` share their first `prefix` bits.
fn same_subnet(a: Ipv4Addr, b: Ipv4Addr, prefix: u8) -> bool {
    let mask = u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0);
    (u32::from(a) ^ u32::from(b)) & mask == 0
}
