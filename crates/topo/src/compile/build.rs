//! The last step: if no step found a problem, the nodes (switches, relays,
//! routers, hosts, in that order: a node's id is its place), links and
//! circuits, built into a [`Blueprint`].

use std::collections::BTreeMap;

use aurora_engine::NodeId;
use aurora_ip::node::IpNode;
use aurora_net::oam::Ping;
use aurora_net::traffic::{Flow, TrafficHost};
use aurora_net::vunet::VunetSwitch;
use aurora_stripe::{JoinSpec, Relay, SplitSpec, StripeHost};
use aurora_tcp::host::{SinkSpec, SourceSpec, TcpHost};
use aurora_wire::cell::Format;

use super::avlink::avlink_node;
use super::ip::ip_node;
use super::nodes::{atm_switch, relay};
use super::Reader;
use crate::pvc::Kind;
use crate::{Blueprint, BuiltNode, Problems, PvcHop, PvcInfo};

impl Reader<'_> {
    /// The problems found, in file order, or the network built.
    pub(crate) fn blueprint(mut self) -> Result<Blueprint, Problems> {
        self.problems()?;
        let Reader {
            file,
            kinds,
            mut ipcfg,
            links,
            entries,
            pvcs: routed,
            by_name,
            flows,
            pings,
            atomic,
            port_plans,
            contracts,
            tcp_plans,
            cameras,
            viewers,
            stripe_plans,
            signalling,
            splitter_plans,
            ..
        } = self;
        // Node ids are positions in `nodes`, in the order added.
        let mut nodes: Vec<Box<dyn BuiltNode>> = Vec::new();
        let mut ids: BTreeMap<String, NodeId> = BTreeMap::new();
        let mut switches = Vec::new();
        for s in &file.switch {
            let d = s.get_ref();
            let node: Box<dyn BuiltNode> = match kinds[&d.name] {
                Kind::VuSwitch(_) => Box::new(VunetSwitch::new(usize::from(d.ports))),
                _ => Box::new(atm_switch(&d.name, d.ports, &entries)?),
            };
            let id = NodeId(nodes.len() as u32);
            nodes.push(node);
            ids.insert(d.name.clone(), id);
            switches.push((d.name.clone(), id, d.ports));
        }
        for (k, r) in file.relay.iter().enumerate() {
            let d = r.get_ref();
            let id = NodeId(nodes.len() as u32);
            let mut node = relay(d, k, &entries);
            signalling.prepare_relay(&d.name, &mut node);
            nodes.push(Box::new(node));
            ids.insert(d.name.clone(), id);
            switches.push((d.name.clone(), id, 2));
        }
        for p in &splitter_plans {
            for (name, relay) in p.relays.iter().zip(striping_relays(p)?) {
                let id = NodeId(nodes.len() as u32);
                nodes.push(Box::new(relay));
                ids.insert(name.clone(), id);
                switches.push((name.clone(), id, p.stripes as u16 + 1));
            }
        }
        // AVlinks: relay ids after the relays'.
        for (j, a) in file.avlink.iter().enumerate() {
            let d = a.get_ref();
            let id = NodeId(nodes.len() as u32);
            let mut node = avlink_node(d, file.relay.len() + j, &entries)?;
            signalling.prepare_relay(&d.name, &mut node);
            nodes.push(Box::new(node));
            ids.insert(d.name.clone(), id);
            switches.push((d.name.clone(), id, 2));
        }
        // IP hosts and routers: each end of each PVC they terminate.
        let mut ip_nodes = Vec::new();
        let mut tuns = Vec::new();
        let atm_of: BTreeMap<String, aurora_wire::atmarp::AtmAddr> = ipcfg
            .iter()
            .map(|(n, (cfg, _))| (n.clone(), cfg.atm))
            .collect();
        // The PVCs starting or ending at each node, in file order.
        let mut ends_at: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, p) in routed.iter().enumerate() {
            ends_at.entry(p.from).or_default().push(i);
            if p.to != p.from {
                ends_at.entry(p.to).or_default().push(i);
            }
        }
        // The hosts whose local side is Aurora's TCP: their sources and
        // sinks. Such a host gets no TUN interface.
        let mut tcp_at: BTreeMap<&str, (Vec<SourceSpec>, Vec<SinkSpec>)> = BTreeMap::new();
        for p in &tcp_plans {
            if let Some(s) = &p.source {
                tcp_at.entry(&p.info.from).or_default().0.push(s.clone());
            }
            if p.sink_here {
                let sinks = &mut tcp_at.entry(&p.info.to).or_default().1;
                sinks.extend(p.sink.clone());
            }
        }
        let mut add_ip_node = |name: &str, id: NodeId| -> Result<Box<dyn BuiltNode>, Problems> {
            let (cfg, tun) = ipcfg.remove(name).expect("IP nodes have settings");
            let here = ends_at.get(name).into_iter().flatten().map(|&i| &routed[i]);
            let n = ip_node(name, cfg, here, &atm_of)?;
            ip_nodes.push((name.to_string(), id));
            if let Some((sources, sinks)) = tcp_at.remove(name) {
                return Ok(Box::new(tcp_host(name, id, n, sources, sinks)?));
            }
            if let Some(t) = tun {
                tuns.push((id, t));
            }
            Ok(Box::new(n))
        };
        let mut routers = Vec::new();
        for r in &file.router {
            let d = r.get_ref();
            let id = NodeId(nodes.len() as u32);
            nodes.push(add_ip_node(&d.name, id)?);
            ids.insert(d.name.clone(), id);
            routers.push((d.name.clone(), id, d.ports));
        }
        // Each traffic host's flows and pings, in file order, and what index
        // each gets in its host.
        let mut flows_of: BTreeMap<&str, Vec<(usize, Flow)>> = BTreeMap::new();
        for (pvc, f) in &flows {
            let i = by_name[pvc];
            flows_of.entry(routed[i].from).or_default().push((i, *f));
        }
        let mut pings_of: BTreeMap<&str, Vec<(usize, Ping)>> = BTreeMap::new();
        for (pvc, g) in &pings {
            let i = by_name[pvc];
            pings_of.entry(routed[i].from).or_default().push((i, *g));
        }
        let mut pvc_flows: Vec<Vec<usize>> = vec![Vec::new(); routed.len()];
        let mut pvc_pings: Vec<Vec<(usize, bool)>> = vec![Vec::new(); routed.len()];
        let mut hosts_out = Vec::new();
        // Apps' VCIs start above every PVC's.
        let first_free = routed
            .iter()
            .flat_map(|p| p.hops.iter().map(|h| h.4.vci))
            .max()
            .map_or(0, |v| v.saturating_add(1));
        let table = signalling.table(first_free)?;
        for h in &file.host {
            let name = &h.get_ref().name;
            if let Some(host) = signalling.host(name, table.as_ref()) {
                let id = NodeId(nodes.len() as u32);
                nodes.push(Box::new(host));
                ids.insert(name.clone(), id);
                hosts_out.push((name.clone(), id));
                continue;
            }
            if h.get_ref().ip.is_some() {
                let id = NodeId(nodes.len() as u32);
                nodes.push(add_ip_node(name, id)?);
                ids.insert(name.clone(), id);
                hosts_out.push((name.clone(), id));
                continue;
            }
            if stripe_plans
                .iter()
                .any(|p| &p.info.from == name || &p.info.to == name)
            {
                let ports = match kinds.get(name) {
                    Some(Kind::MultiHost(n)) => usize::from(*n),
                    _ => 1,
                };
                let bits = entries.host_bits.get(name).map_or(&[][..], Vec::as_slice);
                let host = striping_host(name, ports, &links, bits, &stripe_plans)?;
                let id = NodeId(nodes.len() as u32);
                nodes.push(Box::new(host));
                ids.insert(name.clone(), id);
                hosts_out.push((name.clone(), id));
                continue;
            }
            let mut host = TrafficHost::new(Format::Uni);
            for &(vc, bits) in entries.host_bits.get(name).into_iter().flatten() {
                host.set_route_bits(vc, bits);
            }
            for (n, &(i, f)) in flows_of
                .get(name.as_str())
                .into_iter()
                .flatten()
                .enumerate()
            {
                host.add_flow(f).expect("flow checked");
                if let Some(k) = contracts.get(&i).filter(|k| k.shape) {
                    host.shape(n, k.contract).map_err(|e| {
                        Problems(vec![crate::Problem {
                            line: 0,
                            col: 0,
                            msg: format!("PVC \"{}\": {e}", routed[i].name),
                        }])
                    })?;
                }
                pvc_flows[i].push(n);
            }
            for &i in ends_at.get(name.as_str()).into_iter().flatten() {
                if routed[i].to == name {
                    host.expect(routed[i].to_vc);
                }
            }
            for &(i, g) in pings_of.get(name.as_str()).into_iter().flatten() {
                let k = host.add_ping(g);
                pvc_pings[i].push((k, g.end_to_end));
            }
            let id = NodeId(nodes.len() as u32);
            nodes.push(Box::new(host));
            ids.insert(name.clone(), id);
            hosts_out.push((name.clone(), id));
        }
        let video = super::video::build(cameras, viewers, &mut nodes, &mut ids, &mut hosts_out)?;
        // Policing at each policed PVC's first switch, on the port and VC
        // it arrives by.
        for (&i, k) in &contracts {
            let (Some(action), (first, port, vc)) = (k.police, routed[i].first_hop) else {
                continue;
            };
            let node: &mut dyn std::any::Any = nodes[ids[first].0 as usize].as_mut();
            let upc =
                aurora_tm::upc::Upc::new(&k.contract, aurora_tm::upc::Definition::Clp01, action);
            if let Some(sw) = node.downcast_mut::<aurora_net::switch::AtmSwitch>() {
                sw.police(port, vc, upc).map_err(|e| {
                    Problems(vec![crate::Problem {
                        line: 0,
                        col: 0,
                        msg: format!("PVC \"{}\": {e}", routed[i].name),
                    }])
                })?;
            }
        }
        let pvcs = routed
            .iter()
            .zip(pvc_flows.into_iter().zip(pvc_pings))
            .enumerate()
            .map(|(i, (p, (flows, pings)))| PvcInfo {
                contract: contracts.get(&i).map(|k| k.contract),
                policed_at: contracts
                    .get(&i)
                    .filter(|k| k.police.is_some())
                    .map(|_| (ids[p.first_hop.0], p.first_hop.1, p.first_hop.2)),
                name: p.name.to_string(),
                from: ids[p.from],
                from_vc: p.from_vc,
                to: ids[p.to],
                to_vc: p.to_vc,
                hops: p
                    .hops
                    .iter()
                    .map(|(a, ap, b, bp, vc)| PvcHop {
                        from: (ids[a.as_str()], *ap),
                        to: (ids[b.as_str()], *bp),
                        vc: *vc,
                    })
                    .collect(),
                flows,
                pings,
            })
            .collect();
        let mut links_out = Vec::new();
        let mut link_transport = Vec::new();
        for (a, b, spec, udp) in links {
            let (ai, bi) = (ids[&a.0], ids[&b.0]);
            links_out.push(((a.0, ai, a.1), (b.0, bi, b.1), spec));
            link_transport.push(udp);
        }
        let pins = file
            .switch
            .iter()
            .map(|d| (&d.get_ref().name, d.get_ref().worker))
            .chain(
                file.relay
                    .iter()
                    .map(|d| (&d.get_ref().name, d.get_ref().worker)),
            )
            .chain(
                file.avlink
                    .iter()
                    .map(|d| (&d.get_ref().name, d.get_ref().worker)),
            )
            .chain(
                file.host
                    .iter()
                    .map(|d| (&d.get_ref().name, d.get_ref().worker)),
            )
            .chain(
                file.router
                    .iter()
                    .map(|d| (&d.get_ref().name, d.get_ref().worker)),
            )
            .filter_map(|(name, w)| Some((*ids.get(name)?, w?)))
            .collect();
        let tcp = tcp_plans
            .into_iter()
            .map(|p| {
                let mut info = p.info;
                info.from_node = p.source.as_ref().and_then(|_| ids.get(&info.from).copied());
                info.to_node = p.sink_here.then(|| ids.get(&info.to).copied()).flatten();
                info
            })
            .collect();
        let stripes = stripe_plans
            .into_iter()
            .map(|p| p.info)
            .chain(
                splitter_plans
                    .into_iter()
                    .flat_map(|p| p.vcs.into_iter().map(|v| v.info)),
            )
            .map(|mut info| {
                info.from_node = ids[&info.from];
                info.to_node = ids[&info.to];
                info
            })
            .collect();
        Ok(Blueprint {
            nodes,
            hosts: hosts_out,
            switches,
            routers,
            ip_nodes,
            tuns,
            links: links_out,
            link_transport,
            pvcs,
            pins,
            atomic,
            ports: port_plans,
            tcp,
            video,
            stripes,
        })
    }
}

/// The striping host `name` with `ports` ports: each port paced at its
/// link's cell time, the routing bits `bits` on its VCs, and the sending
/// and receiving ends of every striped VC in `plans` that it is an end of.
fn striping_host(
    name: &str,
    ports: usize,
    links: &[(
        super::End,
        super::End,
        aurora_engine::LinkSpec,
        Option<crate::Transport>,
    )],
    bits: &[(aurora_wire::cell::VcId, u8)],
    plans: &[super::stripe::StripePlan],
) -> Result<StripeHost, Problems> {
    let fail = |msg: String| {
        Problems(vec![crate::Problem {
            line: 0,
            col: 0,
            msg: format!("host \"{name}\": {msg}"),
        }])
    };
    let mut h = StripeHost::new(ports, Format::Uni);
    for (a, b, spec, _) in links {
        for (node, port) in [a, b] {
            if node == name {
                let ct = (1e9 / spec.rate).round().max(1.0) as i64;
                h.set_line(*port, aurora_time::Duration::from_nanos(ct));
            }
        }
    }
    for &(vc, b) in bits {
        h.set_route_bits(vc, b);
    }
    for p in plans {
        if p.info.from == name {
            h.add_sender(p.send.clone())
                .map_err(|e| fail(e.to_string()))?;
        }
        if p.info.to == name {
            h.add_receiver(p.recv.clone())
                .map_err(|e| fail(e.to_string()))?;
        }
    }
    Ok(h)
}

/// The two relays of splitter pair `p`, each splitting the logical VCs
/// that reach it first and joining those that reach it second.
fn striping_relays(p: &super::splitter::SplitterPlan) -> Result<[Relay; 2], Problems> {
    let mut relays = [0, 1].map(|_| Relay::new(p.stripes, Format::Uni));
    for v in &p.vcs {
        let mut cfg = p.cfg.clone();
        cfg.stripes = vec![v.member; p.stripes];
        let fail = |e: aurora_stripe::RelayError| {
            Problems(vec![crate::Problem {
                line: 0,
                col: 0,
                msg: format!("striped VC {}: {e}", v.info.name),
            }])
        };
        let at = |name: &str| usize::from(p.relays[1] == name);
        relays[at(&v.split.0)]
            .add_split(SplitSpec {
                name: v.info.name.clone(),
                wide_vc: v.split.1,
                cfg: cfg.clone(),
                encap: v.encap,
            })
            .map_err(fail)?;
        relays[at(&v.join.0)]
            .add_join(JoinSpec {
                name: v.info.name.clone(),
                cfg,
                wide_vc: v.join.1,
                encap: v.encap,
            })
            .map_err(fail)?;
    }
    Ok(relays)
}

/// The TCP host `name` (node `id`): IP node `ip` with `sources` and
/// `sinks`, seeded from its id until a driver seeds it from the run.
fn tcp_host(
    name: &str,
    id: NodeId,
    ip: IpNode,
    sources: Vec<SourceSpec>,
    sinks: Vec<SinkSpec>,
) -> Result<TcpHost, Problems> {
    if ip.config().interfaces.iter().flatten().next().is_none() {
        return Err(Problems(vec![crate::Problem {
            line: 0,
            col: 0,
            msg: format!("\"{name}\": a TCP host needs an IP address"),
        }]));
    }
    let mut h = TcpHost::new(ip, crate::tcp::host_seed(0, id));
    for s in sources {
        h.add_source(s);
    }
    for s in sinks {
        h.add_sink(s);
    }
    Ok(h)
}
