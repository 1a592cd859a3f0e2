//! The nodes step: switches, relaying links, hosts and routers, their
//! kinds, port counts and names; and the switches and relays built from
//! the entries the PVCs put in their tables.

use aurora_net::switch::AtmSwitch;
use aurora_net::vunet::VunetLink;
use aurora_wire::cell::Format;

use super::checks::plain_name;
use super::Reader;
use crate::pvc::{Entries, Kind};
use crate::{Problem, Problems, RelayDef, MAX_PORTS};

impl Reader<'_> {
    /// Each node's kind, and the checks of its kind and ports; the nodes
    /// are declared for [`Reader::node_names`].
    pub(super) fn node_kinds(&mut self) {
        let file = self.file;
        let c = &mut self.c;
        for sw in &file.switch {
            let d = sw.get_ref();
            let kind = match d.kind.as_deref() {
                None | Some("atm") => Kind::Switch(d.ports),
                Some("vunet") => {
                    if d.ports > 16 {
                        c.at(
                            sw.span(),
                            format!(
                                "VuNet switch \"{}\" has {} ports; its 4 routing bits name at most 16",
                                d.name, d.ports
                            ),
                        );
                    }
                    Kind::VuSwitch(d.ports)
                }
                Some(k) => {
                    c.at(
                        sw.span(),
                        format!(
                            "switch \"{}\" has kind \"{k}\"; it must be \"atm\" or \"vunet\"",
                            d.name
                        ),
                    );
                    Kind::Switch(d.ports)
                }
            };
            if d.ports == 0 {
                c.at(sw.span(), format!("switch \"{}\" has no ports", d.name));
            } else if d.ports > MAX_PORTS {
                c.at(
                    sw.span(),
                    format!(
                        "switch \"{}\" has {} ports; a switch has 1 to {MAX_PORTS}",
                        d.name, d.ports
                    ),
                );
            }
            self.declared.push((sw.span(), &d.name, kind));
        }
        for h in &file.host {
            let d = h.get_ref();
            let kind = match d.ports {
                None | Some(1) => Kind::Host,
                Some(0) => {
                    c.at(h.span(), format!("host \"{}\" has no ports", d.name));
                    Kind::Host
                }
                Some(n) if n > MAX_PORTS => {
                    c.at(
                        h.span(),
                        format!(
                            "host \"{}\" has {n} ports; a host has 1 to {MAX_PORTS}",
                            d.name
                        ),
                    );
                    Kind::Host
                }
                Some(n) => {
                    if d.ip.is_some() {
                        c.at(
                            h.span(),
                            format!(
                                "host \"{}\" has ip and {n} ports; an IP host has one port",
                                d.name
                            ),
                        );
                    }
                    Kind::MultiHost(n)
                }
            };
            self.declared.push((h.span(), &d.name, kind));
        }
        for r in &file.relay {
            let d = r.get_ref();
            if let Some(p) = d.mgmt_ports.iter().find(|&&p| p > 1) {
                c.at(
                    r.span(),
                    format!(
                        "relaying link \"{}\" has ports 0 and 1, so no management port {p}",
                        d.name
                    ),
                );
            }
            if d.key.as_deref() == Some("") {
                c.at(
                    r.span(),
                    format!("relaying link \"{}\" has an empty key", d.name),
                );
            }
            self.declared.push((r.span(), &d.name, Kind::Relay));
        }
        for r in &file.router {
            let d = r.get_ref();
            if d.ports == 0 {
                c.at(r.span(), format!("router \"{}\" has no ports", d.name));
            } else if d.ports > MAX_PORTS {
                c.at(
                    r.span(),
                    format!(
                        "router \"{}\" has {} ports; a router has 1 to {MAX_PORTS}",
                        d.name, d.ports
                    ),
                );
            }
            self.declared
                .push((r.span(), &d.name, Kind::Router(d.ports)));
        }
    }

    /// Every node's name: plain (node names become capture file names and
    /// link ends, as "sw1:2") and its own.
    pub(super) fn node_names(&mut self) {
        for (span, name, kind) in std::mem::take(&mut self.declared) {
            if !plain_name(name) {
                self.c.at(
                    span.clone(),
                    format!(
                        "the name \"{name}\" must be letters, digits, '-', '_' or '.', not starting with '.'"
                    ),
                );
            }
            self.node_names
                .take(&mut self.c, span, name, kind.describe());
            self.kinds.insert(name.to_string(), kind);
        }
    }
}

/// An ATM switch with `ports` ports and the table the PVCs gave `name`.
pub(super) fn atm_switch(name: &str, ports: u16, entries: &Entries) -> Result<AtmSwitch, Problems> {
    let mut sw = AtmSwitch::new(usize::from(ports), Format::Uni);
    let table = entries.atm.get(name).map(Vec::as_slice);
    for &(ip, ivc, op, ovc) in table.unwrap_or(&[]) {
        // Ports and VCs were checked by the PVC step; the VCs are unique
        // per input.
        sw.add_vc(ip, ivc, op, ovc).map_err(|e| {
            Problems(vec![Problem {
                line: 0,
                col: 0,
                msg: e.to_string(),
            }])
        })?;
    }
    Ok(sw)
}

/// A relaying link with its trusted ports, key, and the entries the PVCs
/// gave it; its id (which tagged control cells must name) is `k`, its
/// place among the file's relays (wrapping past 65,535).
pub(super) fn relay(d: &RelayDef, k: usize, entries: &Entries) -> VunetLink {
    let mgmt = [0, 1].map(|p| d.mgmt_ports.contains(&p));
    let mut relay = VunetLink::new(mgmt, d.key.as_ref().map(|k| k.as_bytes().to_vec()));
    relay.set_id(k as u16);
    for (&(table, vci), &(new_vci, bits)) in entries.relay.get(&d.name).into_iter().flatten() {
        relay.set_entry(usize::from(table), vci, new_vci, bits);
    }
    relay
}
