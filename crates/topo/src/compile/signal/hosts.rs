//! Signalling hosts named in `[signal] hosts` (hosts that open VCs on
//! command while they run, with no `[[app]]` of their own), and every
//! signalling host's directory: its path to each other signalling host,
//! found with the same route search and path builder `[[app]]` entries
//! use, the relays' names, and its own flow numbers.

use std::collections::{BTreeMap, BTreeSet};

use aurora_signal::conn::MAX_RELAYS;
use aurora_signal::control::Directory;

use super::{Reader, Signalling, MAX_SIGNAL_HOSTS};
use crate::pvc::Kind;

/// Flow numbers each signalling host's commanded VCs use at most, in turn.
const FLOWS_PER_HOST: usize = 4096;

impl<'f> Reader<'f> {
    /// `[signal] hosts`: each must be a plain host carrying only apps,
    /// named once; they take key ids 1, 2, ... in the order given, before
    /// the hosts `[[app]]` entries name.
    pub(super) fn signal_hosts(&mut self, sig: &mut Signalling, busy: &BTreeSet<&str>) {
        let Some(s) = &self.file.signal else { return };
        let (span, d) = (s.span(), s.get_ref());
        let Some(hosts) = &d.hosts else { return };
        let me = "[signal] hosts";
        if !hosts.is_empty() && sig.key.is_empty() {
            self.c.at(
                span.clone(),
                format!("{me}: the file needs a [signal] key, from which hosts' control-cell keys are made"),
            );
        }
        for h in hosts {
            if sig.hosts.contains_key(h) {
                self.c
                    .at(span.clone(), format!("{me}: \"{h}\" is named twice"));
                continue;
            }
            if !self.app_end(span.clone(), me, "host", h, busy) {
                continue;
            }
            if sig.hosts.len() >= MAX_SIGNAL_HOSTS {
                self.c.at(
                    span.clone(),
                    format!("{me}: more than {MAX_SIGNAL_HOSTS} signalling hosts"),
                );
                break;
            }
            let id = sig.hosts.len() as u8 + 1;
            sig.hosts.insert(h.clone(), id);
        }
    }

    /// Every signalling host's directory (see the module docs); `ids` are
    /// the relays' ids, `flow_base` the first flow number no PVC or app
    /// takes.
    pub(super) fn host_directories(
        &mut self,
        sig: &mut Signalling,
        ids: &BTreeMap<&str, u16>,
        flow_base: usize,
    ) {
        let names: Vec<(String, u8)> = sig.hosts.iter().map(|(n, &i)| (n.clone(), i)).collect();
        let relays: Vec<(u16, String)> = ids.iter().map(|(n, &i)| (i, n.to_string())).collect();
        let left = usize::from(u16::MAX).saturating_sub(flow_base);
        let per = (left / names.len().max(1)).min(FLOWS_PER_HOST);
        for (from, id) in &names {
            let mut routes = Vec::new();
            for (to, _) in names.iter().filter(|(n, _)| n != from) {
                let path = self.find_route(from, to).and_then(|route| {
                    // Only routes the path builder takes without a
                    // complaint: 1 to MAX_RELAYS relays and AVlinks.
                    let relays = route
                        .iter()
                        .filter(|(n, _)| {
                            matches!(self.kinds.get(n), Some(Kind::Relay | Kind::Avlink))
                        })
                        .count();
                    if !(1..=MAX_RELAYS).contains(&relays) {
                        return None;
                    }
                    self.app_path(0..0, "", &route, ids)
                });
                routes.push((to.clone(), path));
            }
            let first = flow_base + usize::from(id - 1) * per;
            sig.directories.insert(
                from.clone(),
                Directory {
                    name: from.clone(),
                    routes,
                    relays: relays.clone(),
                    flows: first as u16..(first + per) as u16,
                },
            );
        }
    }
}
