//! The splitter step: each `[[splitter]]` entry's two striping relays
//! (declared by the nodes step), their stripe links (port `i` of one
//! joined straight to port `i` of the other), their settings (read as a
//! `[[stripe]]` entry's are), and the PVCs that cross from one relay to
//! the other: each a logical VC, given a member VC free on every stripe
//! link.

use std::collections::BTreeMap;
use std::ops::Range;

use aurora_net::PortId;
use aurora_stripe::{Config, SyncMode, UnitKind};
use aurora_wire::cell::VcId;
use aurora_wire::llc::Encapsulation;

use super::checks::entry_name;
use super::stripe::{int_in, settings, unit_and_sync};
use super::Reader;
use crate::pvc::Kind;
use crate::stripe::{SplitterDef, StripeInfo, Via};

/// The most stripe ports a relay may have (a marker names its stripe in
/// one byte, and the relay has one port more).
const MAX_STRIPE_PORTS: i64 = 254;

/// One logical VC through a relay pair.
pub(crate) struct SplitVc {
    /// The splitting relay, the VC arriving on its wide side.
    pub(crate) split: (String, VcId),
    /// The joining relay, the VC leaving its wide side.
    pub(crate) join: (String, VcId),
    /// The member VC on every stripe link.
    pub(crate) member: VcId,
    /// How the PVC's IP packets are encapsulated (IP units).
    pub(crate) encap: Encapsulation,
    /// What reports need (node ids filled in by the build step).
    pub(crate) info: StripeInfo,
}

/// One `[[splitter]]` entry, compiled.
pub(crate) struct SplitterPlan {
    /// The two relays.
    pub(crate) relays: [String; 2],
    /// Stripe ports on each.
    pub(crate) stripes: usize,
    /// The settings (member VCs left empty).
    pub(crate) cfg: Config,
    /// Its logical VCs.
    pub(crate) vcs: Vec<SplitVc>,
}

impl<'f> Reader<'f> {
    /// The relays of every `[[splitter]]` entry, for the nodes step: each
    /// name with its place and its kind.
    pub(super) fn splitter_nodes(&mut self) {
        let file = self.file;
        for s in &file.splitter {
            let d = s.get_ref();
            let n = d.stripes.clamp(1, MAX_STRIPE_PORTS) as u16 + 1;
            for r in &d.relays {
                self.declared.push((s.span(), r, Kind::Splitter(n)));
            }
        }
    }

    /// Every `[[splitter]]` entry, and every PVC through its relays.
    pub(super) fn splitters(&mut self) {
        let file = self.file;
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut pair_of: BTreeMap<&str, usize> = BTreeMap::new();
        for (k, s) in file.splitter.iter().enumerate() {
            let (span, d) = (s.span(), s.get_ref());
            let before = self.c.problems.len();
            let (line, _) = self.c.place(span.start);
            let me = format!("splitter \"{}\"", d.name);
            entry_name(&mut self.c, span.clone(), &me, &d.name, line, &mut names);
            for r in &d.relays {
                pair_of.insert(r, k);
            }
            let cfg = self.splitter_settings(span.clone(), &me, d);
            let relays = self.splitter_links(span.clone(), &me, d);
            if self.c.problems.len() > before {
                continue;
            }
            let (Some(cfg), Some((relays, links))) = (cfg, relays) else {
                continue;
            };
            let vcs = self.split_vcs(span, &me, d, &relays, &links, &cfg);
            self.splitter_plans.push(SplitterPlan {
                relays,
                stripes: links.len(),
                cfg,
                vcs,
            });
        }
        self.pvcs_through_relays(&pair_of);
    }

    /// The settings of entry `me`.
    fn splitter_settings(
        &mut self,
        span: Range<usize>,
        me: &str,
        d: &SplitterDef,
    ) -> Option<Config> {
        let c = &mut self.c;
        let knobs = d.knobs();
        let (unit, sync) = unit_and_sync(c, span.clone(), me, &knobs);
        if unit == Some(UnitKind::Cell) && sync == Some(SyncMode::Sequence) {
            c.at(
                span.clone(),
                format!(
                    "{me}: a relay carries whole 48-byte cells, so cell units cannot have \
                     sequence numbers; use marker or none, or pdu or ip units"
                ),
            );
            return None;
        }
        let seq = if sync == Some(SyncMode::Sequence) {
            aurora_stripe::format::PDU_SEQ_LEN
        } else {
            0
        };
        let hi = (aurora_wire::aal5::MAX_SDU - seq) as i64;
        let sdu = int_in(
            c,
            span.clone(),
            &format!("{me}: sdu"),
            d.sdu,
            9180,
            (28, hi),
        );
        let stripes = int_in(
            c,
            span.clone(),
            &format!("{me}: stripes"),
            Some(d.stripes),
            0,
            (1, MAX_STRIPE_PORTS),
        );
        let cfg = settings(
            c,
            span.clone(),
            me,
            &knobs,
            unit,
            sync,
            sdu.map(|s| (0, s as usize)),
        );
        let mut cfg = cfg?;
        cfg.stripes = vec![VcId::new(0, 32); stripes? as usize];
        if let Err(e) = cfg.check() {
            for p in e.problems {
                self.c.at(span.clone(), format!("{me}: {p}"));
            }
            return None;
        }
        Some(cfg)
    }

    /// The two relays of entry `me` and, per stripe, the link joining
    /// them (port `i` to port `i`).
    fn splitter_links(
        &mut self,
        span: Range<usize>,
        me: &str,
        d: &SplitterDef,
    ) -> Option<([String; 2], Vec<usize>)> {
        let c = &mut self.c;
        let [a, b] = d.relays.as_slice() else {
            c.at(
                span,
                format!(
                    "{me}: relays names {} nodes; give the two relays of the pair",
                    d.relays.len()
                ),
            );
            return None;
        };
        if a == b {
            c.at(span, format!("{me}: both relays are \"{a}\"; name two"));
            return None;
        }
        if !(1..=MAX_STRIPE_PORTS).contains(&d.stripes) {
            return None; // reported with the settings
        }
        let n = d.stripes as u16;
        let joins = self.joins.get(&(a.clone(), b.clone()));
        let mut links = Vec::new();
        for i in 1..=n {
            match joins.and_then(|j| j.iter().find(|x| x.0 == i)) {
                Some(&(_, to, link)) if to == i => links.push(link),
                Some(&(_, to, _)) => c.at(
                    span.clone(),
                    format!(
                        "{me}: stripe link {i} joins \"{a}:{i}\" to \"{b}:{to}\"; join each \
                         stripe port to the same port of the other relay"
                    ),
                ),
                None => c.at(
                    span.clone(),
                    format!("{me}: no link joins \"{a}:{i}\" and \"{b}:{i}\" (stripe {i})"),
                ),
            }
        }
        for r in [a, b] {
            let wide = self
                .joins
                .iter()
                .any(|((from, _), js)| from == r && js.iter().any(|j| j.0 == 0));
            if !wide {
                c.at(
                    span.clone(),
                    format!("{me}: relay \"{r}\" has no link on port 0, its wide side"),
                );
            }
        }
        (links.len() == usize::from(n)).then(|| ([a.clone(), b.clone()], links))
    }

    /// The logical VCs of entry `me`: every routed PVC crossing from one
    /// of `relays` straight to the other.
    fn split_vcs(
        &mut self,
        span: Range<usize>,
        me: &str,
        d: &SplitterDef,
        relays: &[String; 2],
        links: &[usize],
        cfg: &Config,
    ) -> Vec<SplitVc> {
        let mut out = Vec::new();
        for (i, p) in self.pvcs.iter().enumerate() {
            let Some(h) = p
                .hops
                .iter()
                .position(|h| relays.contains(&h.0) && relays.contains(&h.2))
            else {
                continue;
            };
            // Hops h - 1 (into the splitting relay) and h + 1 (out of the
            // joining one) exist, since both ends of a PVC are hosts or
            // routers; a path without them is no logical VC.
            let (Some(into), Some(out_of)) = (
                h.checked_sub(1).and_then(|k| p.hops.get(k)),
                p.hops.get(h + 1),
            ) else {
                continue;
            };
            let Some(member) = self.entries.free_vc(links) else {
                self.c.at(
                    span.clone(),
                    format!(
                        "{me}: no VC is free on every stripe link for PVC \"{}\"",
                        p.name
                    ),
                );
                continue;
            };
            for &l in links {
                self.entries.take(l, member);
            }
            let encap = [p.from, p.to]
                .iter()
                .find_map(|n| self.ipcfg.get(*n).map(|c| c.0.encap))
                .unwrap_or(Encapsulation::Llc);
            // The PVC carries cells both ways (IP and OAM loopback do),
            // so the pair stripes each way on the same member VC.
            let ways = [
                (into, out_of, String::new()),
                (out_of, into, " back".to_string()),
            ];
            for (a, b, suffix) in ways {
                let (split, join) = if suffix.is_empty() {
                    ((a.2.clone(), a.4), (b.0.clone(), b.4))
                } else {
                    ((a.0.clone(), a.4), (b.2.clone(), b.4))
                };
                out.push(SplitVc {
                    info: StripeInfo {
                        name: format!("{}/{}{suffix}", d.name, p.name),
                        from: split.0.clone(),
                        from_node: aurora_engine::NodeId(0),
                        to: join.0.clone(),
                        to_node: aurora_engine::NodeId(0),
                        members: Vec::new(),
                        unit: cfg.unit,
                        sync: cfg.sync,
                        greedy: false,
                        via: Some(Via {
                            splitter: d.name.clone(),
                            pvc: i,
                            member_vc: member,
                            ports: (1..=links.len() as PortId).collect(),
                        }),
                    },
                    split,
                    join,
                    member,
                    encap,
                });
            }
        }
        out
    }

    /// A PVC that enters a striping relay must come in by its wide side
    /// and cross straight to the other relay of its pair.
    fn pvcs_through_relays(&mut self, pair_of: &BTreeMap<&str, usize>) {
        let file = self.file;
        let mut bad: Vec<(*const crate::PvcDef, String)> = Vec::new();
        for p in &self.pvcs {
            for (j, h) in p.hops.iter().enumerate() {
                let Some(&k) = pair_of.get(h.2.as_str()) else {
                    continue;
                };
                let relays = &file.splitter[k].get_ref().relays;
                let next = p.hops.get(j + 1);
                let crosses = next.is_some_and(|n| relays.contains(&n.2) && n.2 != h.2);
                let leaves = relays.contains(&h.0) && h.0 != h.2;
                let msg = if !crosses && !leaves {
                    Some(format!(
                        "PVC \"{}\" passes through striping relay \"{}\" without crossing to the \
                         other relay of its splitter; a PVC through a splitter goes from one of \
                         its relays straight to the other",
                        p.name, h.2
                    ))
                } else if crosses && h.3 != 0 {
                    Some(format!(
                        "PVC \"{}\" enters striping relay \"{}\" by port {}; a PVC it splits \
                         comes in by port 0, its wide side",
                        p.name, h.2, h.3
                    ))
                } else if leaves && next.is_some_and(|n| n.1 != 0) {
                    Some(format!(
                        "PVC \"{}\" leaves striping relay \"{}\" by port {}; a PVC it joins \
                         leaves by port 0, its wide side",
                        p.name,
                        h.2,
                        next.map_or(0, |n| n.1)
                    ))
                } else {
                    None
                };
                if let Some(m) = msg {
                    bad.push((p.def, m));
                }
            }
        }
        for pv in &file.pvc {
            for (_, m) in bad.iter().filter(|(d, _)| std::ptr::eq(*d, pv.get_ref())) {
                self.c.at(pv.span(), m.clone());
            }
        }
    }
}
