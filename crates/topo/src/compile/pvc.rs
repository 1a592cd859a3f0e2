//! The PVC step: each PVC's name and path, the link each hop takes, its
//! VCs, and the table entries of the nodes along it (chosen by
//! `crate::pvc::route`).

use std::collections::BTreeSet;
use std::ops::Range;

use aurora_net::PortId;
use aurora_wire::cell::VcId;

use super::{Ctx, Reader};
use crate::pvc::{Hop, Kind};
use crate::{is_reserved_vc, parse_vc, PvcDef};

/// A PVC routed without problems.
#[derive(Clone)]
pub(super) struct RoutedPvc<'f> {
    pub(super) name: &'f str,
    pub(super) from: &'f str,
    pub(super) from_vc: VcId,
    pub(super) to: &'f str,
    pub(super) to_vc: VcId,
    /// The first node after the sender is an ATM switch (which answers
    /// segment loopback).
    pub(super) first_atm: bool,
    /// The sender's port and the receiver's.
    pub(super) from_port: PortId,
    pub(super) to_port: PortId,
    /// The first node after the sender, the port the PVC enters it by and
    /// its VC there.
    pub(super) first_hop: (&'f str, PortId, VcId),
    /// Each hop from the sender: the node and port it leaves by, the node
    /// and port it arrives by, and its VC there.
    pub(super) hops: Vec<(String, PortId, String, PortId, VcId)>,
    /// Its definition.
    pub(super) def: &'f PvcDef,
}

/// Reads VC `v` (field `which`) of the PVC called `name` at `span`:
/// `Some(None)` if not given, `None` if wrong (reported).
fn pvc_vc(
    c: &mut Ctx,
    span: Range<usize>,
    name: &str,
    which: &str,
    v: &Option<String>,
) -> Option<Option<VcId>> {
    let Some(v) = v else { return Some(None) };
    match parse_vc(v) {
        Ok(vc) if is_reserved_vc(vc) => {
            c.at(
                span,
                format!(
                    "PVC \"{name}\": {which} {vc} is reserved (VCIs 0 to 31 carry idle \
                     cells, signalling, F4 OAM on VCI 3 and 4, and management); use a \
                     VCI from 32 to 65535"
                ),
            );
            None
        }
        Ok(vc) => Some(Some(vc)),
        Err(m) => {
            c.at(span, format!("PVC \"{name}\": {which}: {m}"));
            None
        }
    }
}

impl<'f> Reader<'f> {
    /// Every PVC: find each hop's ports, choose VCs, fill the nodes'
    /// tables.
    pub(super) fn pvcs(&mut self) {
        let file = self.file;
        for p in &file.pvc {
            if let Some(routed) = self.pvc(p.span(), p.get_ref()) {
                self.pvcs.push(routed);
            }
        }
        // Routed PVCs by name: the first of a name used twice.
        self.by_name = self
            .pvcs
            .iter()
            .enumerate()
            .rev()
            .map(|(i, p)| (p.name, i))
            .collect();
    }

    /// One PVC, `d` at `span`: `None` if anything is wrong (reported).
    fn pvc(&mut self, span: Range<usize>, d: &'f PvcDef) -> Option<RoutedPvc<'f>> {
        let c = &mut self.c;
        if d.name.is_empty() || d.name.chars().any(char::is_control) {
            c.at(
                span.clone(),
                format!(
                    "the PVC name \"{}\" must be one or more characters, none of them control \
                     characters",
                    d.name
                ),
            );
        }
        self.pvc_names.take(c, span.clone(), &d.name, "PVC");
        if d.path.len() < 2 {
            c.at(
                span.clone(),
                format!("PVC \"{}\" needs a path of at least two nodes", d.name),
            );
            return None;
        }
        let mut ok = true;
        for (i, n) in d.path.iter().enumerate() {
            let ends = i == 0 || i == d.path.len() - 1;
            match self.kinds.get(n) {
                None => {
                    c.at(
                        span.clone(),
                        format!(
                            "PVC \"{}\" goes through \"{n}\", which is not defined",
                            d.name
                        ),
                    );
                    ok = false;
                }
                Some(k) if !ends && k.is_end() => {
                    c.at(
                        span.clone(),
                        format!(
                            "PVC \"{}\" passes through {} \"{n}\"; only its ends may be hosts or routers",
                            d.name,
                            k.describe()
                        ),
                    );
                    ok = false;
                }
                Some(k) if ends && !k.is_end() => {
                    c.at(
                        span.clone(),
                        format!(
                            "PVC \"{}\" must start and end at hosts or routers, not at {} \"{n}\"",
                            d.name,
                            k.describe()
                        ),
                    );
                    ok = false;
                }
                _ => {}
            }
        }
        if !ok {
            return None;
        }
        let from_vc = pvc_vc(c, span.clone(), &d.name, "from_vc", &d.from_vc);
        let to_vc = pvc_vc(c, span.clone(), &d.name, "to_vc", &d.to_vc);
        let (Some(from_vc), Some(to_vc)) = (from_vc, to_vc) else {
            return None;
        };
        // Each hop: the link it takes. Where several links join two nodes,
        // the one carrying the fewest PVCs so far (the first in the file on
        // a tie) on which the VC asked for (if any) is free; never a link
        // this PVC has already crossed.
        let mut hops = Vec::new();
        let mut crossed = BTreeSet::new();
        let last = d.path.len() - 2;
        for (i, w) in d.path.windows(2).enumerate() {
            let all = self
                .joins
                .get(&(w[0].clone(), w[1].clone()))
                .map_or(&[][..], Vec::as_slice);
            let want = match i {
                0 => from_vc,
                _ if i == last => to_vc,
                _ => None,
            };
            let pick = all
                .iter()
                .filter(|j| !crossed.contains(&j.2))
                .min_by_key(|j| {
                    let busy = want.is_some_and(|v| self.entries.used(j.2, &v));
                    (busy, self.entries.load(j.2), j.2)
                });
            match pick {
                Some(&(from_port, to_port, link)) => {
                    crossed.insert(link);
                    hops.push(Hop {
                        from: w[0].clone(),
                        from_port,
                        to: w[1].clone(),
                        to_port,
                        link,
                    });
                }
                None if all.is_empty() => {
                    c.at(
                        span.clone(),
                        format!(
                            "PVC \"{}\": no link joins \"{}\" and \"{}\"",
                            d.name, w[0], w[1]
                        ),
                    );
                    ok = false;
                }
                None => {
                    c.at(
                        span.clone(),
                        format!(
                            "PVC \"{}\" crosses the link between \"{}\" and \"{}\" twice; a \
                             PVC may use each link once",
                            d.name, w[0], w[1]
                        ),
                    );
                    ok = false;
                }
            }
        }
        if !ok {
            return None;
        }
        let path_kinds: Vec<Kind> = d.path.iter().map(|n| self.kinds[n]).collect();
        let vcs = match crate::pvc::route(
            &d.name,
            &d.path,
            &path_kinds,
            &hops,
            from_vc,
            to_vc,
            &mut self.entries,
        ) {
            Ok(v) => v,
            Err(msgs) => {
                for m in msgs {
                    c.at(span.clone(), m);
                }
                return None;
            }
        };
        for (h, vc) in hops.iter().zip(&vcs) {
            self.crossing
                .entry((h.from.clone(), h.from_port))
                .or_default()
                .push((*vc, d));
        }
        Some(RoutedPvc {
            name: &d.name,
            from: &d.path[0],
            from_vc: vcs[0],
            to: &d.path[d.path.len() - 1],
            to_vc: vcs[vcs.len() - 1],
            first_atm: matches!(path_kinds[1], Kind::Switch(_)),
            from_port: hops[0].from_port,
            to_port: hops[hops.len() - 1].to_port,
            first_hop: (&d.path[1], hops[0].to_port, vcs[0]),
            hops: hops
                .iter()
                .zip(&vcs)
                .map(|(h, vc)| (h.from.clone(), h.from_port, h.to.clone(), h.to_port, *vc))
                .collect(),
            def: d,
        })
    }
}
