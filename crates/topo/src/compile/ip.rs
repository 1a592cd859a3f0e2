//! The IP step: the settings of IP hosts and routers (read by
//! `crate::ip`), one address per interface, the PVC each node reaches its
//! ATMARP server on; and the IP nodes built with the PVCs ending at them.

use std::collections::BTreeMap;

use aurora_ip::node::{IpConfig, IpNode};
use aurora_wire::atmarp::AtmAddr;

use super::pvc::RoutedPvc;
use super::Reader;
use crate::{Problem, Problems};

impl Reader<'_> {
    /// Each IP host's and router's settings, and every interface's address
    /// its own.
    pub(super) fn ip_settings(&mut self) {
        let file = self.file;
        let c = &mut self.c;
        for h in &file.host {
            match crate::ip::host(h.get_ref()) {
                Ok(Some((cfg, tun))) => {
                    self.ipcfg
                        .insert(h.get_ref().name.clone(), (cfg, Some(tun)));
                }
                Ok(None) => {}
                Err(msgs) => {
                    for m in msgs {
                        c.at(h.span(), m);
                    }
                }
            }
        }
        for r in &file.router {
            let d = r.get_ref();
            match crate::ip::router(d) {
                Ok(cfg) => {
                    self.ipcfg.insert(d.name.clone(), (cfg, None));
                }
                Err(msgs) => {
                    for m in msgs {
                        c.at(r.span(), m);
                    }
                }
            }
        }
        // Every IP interface has its own address.
        let mut addrs: BTreeMap<std::net::Ipv4Addr, (String, usize)> = BTreeMap::new();
        let ip_ends = file
            .host
            .iter()
            .map(|h| (h.span(), &h.get_ref().name))
            .chain(file.router.iter().map(|r| (r.span(), &r.get_ref().name)));
        for (span, name) in ip_ends {
            let Some((cfg, _)) = self.ipcfg.get(name) else {
                continue;
            };
            for i in cfg.interfaces.iter().flatten() {
                let (line, _) = c.place(span.start);
                match addrs.get(&i.addr) {
                    Some((other, at)) => {
                        let whose = if other == name {
                            format!("another port of \"{name}\"")
                        } else {
                            format!("\"{other}\" (line {at})")
                        };
                        c.at(
                            span.clone(),
                            format!(
                                "\"{name}\" has address {}, which {whose} has too; every IP \
                                 host and router port needs its own address",
                                i.addr
                            ),
                        );
                    }
                    None => {
                        addrs.insert(i.addr, (name.clone(), line));
                    }
                }
            }
        }
    }

    /// Each IP node's PVC to its ATMARP server: a PVC ending at the node.
    pub(super) fn atmarp_servers(&mut self) {
        let file = self.file;
        let atmarp_of = file
            .host
            .iter()
            .map(|h| (h.span(), &h.get_ref().name, &h.get_ref().atmarp))
            .chain(
                file.router
                    .iter()
                    .map(|r| (r.span(), &r.get_ref().name, &r.get_ref().atmarp)),
            );
        for (span, name, pvc) in atmarp_of {
            let Some(pvc) = pvc else { continue };
            let end = self
                .by_name
                .get(pvc.as_str())
                .map(|&i| &self.pvcs[i])
                .and_then(|p| {
                    if p.from == name.as_str() {
                        Some((p.from_port, p.from_vc))
                    } else if p.to == name.as_str() {
                        Some((p.to_port, p.to_vc))
                    } else {
                        None
                    }
                });
            match (end, self.ipcfg.get_mut(name)) {
                (Some(e), Some((cfg, _))) => cfg.server_vc = Some(e),
                (None, _) if self.pvc_names.contains(pvc) => self.c.at(
                    span,
                    format!("atmarp PVC \"{pvc}\" of \"{name}\" does not end at \"{name}\""),
                ),
                (None, _) => self.c.at(
                    span,
                    format!("atmarp names PVC \"{pvc}\", which is not defined"),
                ),
                (Some(_), None) => {}
            }
        }
    }

    /// No IP host sends into a VuNet switch: only traffic hosts write the
    /// routing bits it needs.
    pub(super) fn ip_hosts_beside_vunet(&mut self) {
        for h in &self.file.host {
            let name = &h.get_ref().name;
            if self.ipcfg.contains_key(name) && self.entries.host_bits.contains_key(name) {
                self.c.at(
                    h.span(),
                    format!(
                        "IP host \"{name}\" sends into a VuNet switch, which needs routing bits \
                         only traffic hosts write; put an ATM switch or a relay next to it"
                    ),
                );
            }
        }
    }
}

/// The IP node called `name` with settings `cfg`, and an end on each PVC
/// starting or ending at it (`pvcs`, in file order); `atm_of` gives the
/// ATM address of each IP node at a PVC's far end.
pub(super) fn ip_node<'a, 'f: 'a>(
    name: &str,
    cfg: IpConfig,
    pvcs: impl Iterator<Item = &'a RoutedPvc<'f>>,
    atm_of: &BTreeMap<String, AtmAddr>,
) -> Result<IpNode, Problems> {
    let fail = |m: String| {
        Problems(vec![Problem {
            line: 0,
            col: 0,
            msg: format!("\"{name}\": {m}"),
        }])
    };
    let mut n = IpNode::new(cfg).map_err(|e| fail(e.0))?;
    for p in pvcs {
        if p.from == name {
            n.add_pvc(p.from_port, p.from_vc, atm_of.get(p.to).copied())
                .map_err(|e| fail(e.0))?;
        }
        if p.to == name {
            n.add_pvc(p.to_port, p.to_vc, atm_of.get(p.from).copied())
                .map_err(|e| fail(e.0))?;
        }
    }
    Ok(n)
}
