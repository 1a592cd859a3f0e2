//! The ports step: each `[[port]]`'s place (a linked port of an ATM switch
//! or a host), discipline, buffers and PDU discard, and the queues of the
//! PVCs that leave through it, with their weights or levels. And the
//! contracts step: each PVC's traffic contract, whether its host shapes
//! to it and whether its first switch polices it.

use std::collections::BTreeSet;
use std::ops::Range;

use aurora_sched::{Limits, QueueId};
use aurora_time::Duration;
use aurora_tm::discard::BufferLimits;

use aurora_wire::cell::VcId;

use super::checks::duration_in;
use super::{Ctx, Reader};
use crate::pvc::Kind;
use crate::qos::{DisciplineSpec, PortPlan};
use crate::{PortDef, PvcDef, MAX_BUFFER};

/// Priority levels.
const LEVELS: u8 = 8;
/// The largest weight.
const MAX_WEIGHT: u32 = 1_000_000;
/// The root class of a port's tree: the whole link.
const ROOT: &str = "link";
/// Weight walks of the flat approximation: 0 to 1 s.
const PERIOD_RANGE: super::checks::DurationRange =
    (Duration::ZERO, Duration::from_secs(1), "0 to 1s");
/// Service slices: 1 µs to 1 s.
const BIN_RANGE: super::checks::DurationRange = (
    Duration::from_micros(1),
    Duration::from_secs(1),
    "1us to 1s",
);

/// A PVC's contract as the file gives it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PvcContract {
    pub(crate) contract: aurora_tm::contract::Contract,
    /// The sending host shapes to it.
    pub(crate) shape: bool,
    /// The first switch polices it, tagging or dropping.
    pub(crate) police: Option<aurora_tm::upc::Action>,
}

impl Reader<'_> {
    /// Every PVC's `contract`, `shape` and `police`.
    pub(super) fn contracts(&mut self) {
        let file = self.file;
        for p in &file.pvc {
            let (span, d) = (p.span(), p.get_ref());
            let Some(&i) = self.by_name.get(d.name.as_str()) else {
                continue;
            };
            if !std::ptr::eq(self.pvcs[i].def, d) {
                continue; // a name used twice: reported already
            }
            let c = &mut self.c;
            let Some(text) = &d.contract else {
                if d.shape.is_some() || d.police.is_some() {
                    c.at(
                        span,
                        format!("PVC \"{}\": shape and police need a contract", d.name),
                    );
                }
                continue;
            };
            let contract = match text.parse::<aurora_tm::contract::Contract>() {
                Ok(k) => k,
                Err(e) => {
                    c.at(span, format!("PVC \"{}\": {e}", d.name));
                    continue;
                }
            };
            let police = match d.police.as_deref().unwrap_or("none") {
                "none" => None,
                "tag" => Some(aurora_tm::upc::Action::Tag),
                "drop" => Some(aurora_tm::upc::Action::Drop),
                other => {
                    c.at(
                        span,
                        format!(
                            "PVC \"{}\": police \"{other}\" is not tag, drop or none",
                            d.name
                        ),
                    );
                    continue;
                }
            };
            let first = self.pvcs[i].first_hop.0;
            if police.is_some() && !matches!(self.kinds[first], Kind::Switch(_)) {
                c.at(
                    span,
                    format!(
                        "PVC \"{}\": only an ATM switch polices, and \"{first}\" is not one",
                        d.name
                    ),
                );
                continue;
            }
            self.contracts.insert(
                i,
                PvcContract {
                    contract,
                    shape: d.shape.unwrap_or(true),
                    police,
                },
            );
        }
    }

    /// Every `[[port]]`.
    pub(super) fn ports(&mut self) {
        let file = self.file;
        let mut seen = BTreeSet::new();
        for p in &file.port {
            let span = p.span();
            if let Some(plan) = self.port(span.clone(), p.get_ref()) {
                if !seen.insert((plan.node.clone(), plan.port)) {
                    self.c.at(
                        span,
                        format!("port \"{}\" has two [[port]] entries", p.get_ref().at),
                    );
                    continue;
                }
                self.port_plans.push(plan);
            }
        }
    }

    /// One `[[port]]`, `d` at `span`: `None` if anything is wrong
    /// (reported).
    fn port(&mut self, span: Range<usize>, d: &PortDef) -> Option<PortPlan> {
        let (node, port) = self.link_end(span.clone(), &d.at)?;
        let c = &mut self.c;
        if !matches!(
            self.kinds[&node],
            Kind::Switch(_) | Kind::Host | Kind::MultiHost(_)
        ) {
            c.at(
                span,
                format!(
                    "port \"{}\": only an ATM switch's or a host's ports take a discipline",
                    d.at
                ),
            );
            return None;
        }
        let Some((_, _, spec, _)) = self
            .links
            .iter()
            .find(|(a, b, _, _)| (a.0 == node && a.1 == port) || (b.0 == node && b.1 == port))
        else {
            c.at(span, format!("port \"{}\" has no link", d.at));
            return None;
        };
        let (rate, link_buffer) = (spec.rate, spec.buffer);
        let mut ok = true;
        let buffer = d.buffer.unwrap_or(link_buffer);
        for (what, v) in [("buffer", Some(buffer)), ("queue_buffer", d.queue_buffer)] {
            if let Some(v) = v {
                if v == 0 || v > MAX_BUFFER {
                    c.at(
                        span.clone(),
                        format!(
                            "port \"{}\": {what} {v} is outside 1 to {MAX_BUFFER} cells",
                            d.at
                        ),
                    );
                    ok = false;
                }
            }
        }
        let queue_buffer = d.queue_buffer.unwrap_or(buffer).min(buffer);
        let discard = match d.discard.as_deref().unwrap_or("tail") {
            "tail" => {
                if d.epd.is_some() || d.clp1.is_some() {
                    c.at(
                        span.clone(),
                        format!(
                            "port \"{}\": epd and clp1 thresholds need discard = \"ppd\" or \"epd\"",
                            d.at
                        ),
                    );
                    ok = false;
                }
                None
            }
            how @ ("ppd" | "epd") => {
                let epd = match (how, d.epd) {
                    ("epd", Some(t)) => t,
                    ("epd", None) => {
                        c.at(
                            span.clone(),
                            format!(
                                "port \"{}\": discard = \"epd\" needs an epd threshold",
                                d.at
                            ),
                        );
                        ok = false;
                        buffer
                    }
                    (_, Some(_)) => {
                        c.at(
                            span.clone(),
                            format!(
                                "port \"{}\": an epd threshold needs discard = \"epd\"",
                                d.at
                            ),
                        );
                        ok = false;
                        buffer
                    }
                    _ => buffer,
                };
                for (what, t) in [("epd", epd), ("clp1", d.clp1.unwrap_or(buffer))] {
                    if t == 0 || t > buffer {
                        c.at(
                            span.clone(),
                            format!(
                                "port \"{}\": the {what} threshold {t} is outside 1 to the buffer, {buffer} cells",
                                d.at
                            ),
                        );
                        ok = false;
                    }
                }
                Some(BufferLimits {
                    size: buffer,
                    epd,
                    clp1: d.clp1.unwrap_or(buffer),
                })
            }
            other => {
                c.at(
                    span.clone(),
                    format!(
                        "port \"{}\": discard \"{other}\" is not tail, ppd or epd",
                        d.at
                    ),
                );
                ok = false;
                None
            }
        };
        let bin = match &d.bin {
            None => Some(Duration::from_millis(1)),
            Some(s) => duration_in(c, span.clone(), "bin", s, BIN_RANGE),
        };
        // The PVCs leaving through the port and their queues.
        let crossing = self
            .crossing
            .get(&(node.clone(), port))
            .cloned()
            .unwrap_or_default();
        let name = d.discipline.as_deref().unwrap_or("fifo");
        let queued = match name {
            "hwfq" | "flat" => tree_queues(c, &span, d, name, &crossing),
            _ => {
                if !d.class.is_empty() || d.update_period.is_some() {
                    c.at(
                        span.clone(),
                        format!(
                            "port \"{}\": classes and update_period are for hwfq and flat ports",
                            d.at
                        ),
                    );
                    ok = false;
                }
                vc_queues(c, &span, d, name, &crossing)
            }
        };
        let (discipline, queues, vcs, other) = queued?;
        if !ok {
            return None;
        }
        Some(PortPlan {
            node,
            port,
            discipline,
            queues,
            other,
            vcs,
            limits: Limits {
                port: buffer,
                queue: queue_buffer,
            },
            discard,
            rate,
            bin: bin?,
        })
    }
}

/// A port's discipline, its queues' names, each crossing PVC's VC and
/// queue, and its queue for other cells.
type Queued = (
    DisciplineSpec,
    Vec<String>,
    Vec<(VcId, QueueId)>,
    Option<QueueId>,
);

/// The queues of a port without a tree: one per crossing PVC, with its
/// weight (a `priority` port: one per level), and a last one, `other`.
fn vc_queues(
    c: &mut Ctx,
    span: &Range<usize>,
    d: &PortDef,
    name: &str,
    crossing: &[(VcId, &PvcDef)],
) -> Option<Queued> {
    let mut ok = true;
    let mut queues: Vec<String> = Vec::new();
    let mut vcs = Vec::new();
    let mut weights = Vec::new();
    match name {
        "priority" => {
            queues = (0..LEVELS).map(|l| format!("level {l}")).collect();
            for (vc, p) in crossing {
                let level = p.priority.unwrap_or(LEVELS - 1);
                if level >= LEVELS {
                    c.at(
                        span.clone(),
                        format!(
                            "PVC \"{}\": priority {level} is outside 0 to {}",
                            p.name,
                            LEVELS - 1
                        ),
                    );
                    ok = false;
                }
                vcs.push((*vc, QueueId::from(level.min(LEVELS - 1))));
            }
        }
        "fifo" | "drr" | "wfq" | "wf2q+" => {
            for (vc, p) in crossing {
                let w = p.weight.unwrap_or(1);
                if !(1..=MAX_WEIGHT).contains(&w) {
                    c.at(
                        span.clone(),
                        format!(
                            "PVC \"{}\": weight {w} is outside 1 to {MAX_WEIGHT}",
                            p.name
                        ),
                    );
                    ok = false;
                }
                vcs.push((*vc, queues.len() as QueueId));
                queues.push(p.name.clone());
                weights.push(w.clamp(1, MAX_WEIGHT));
            }
        }
        other => {
            c.at(
                span.clone(),
                format!(
                    "port \"{}\": discipline \"{other}\" is not fifo, priority, drr, wfq, wf2q+, hwfq or flat",
                    d.at
                ),
            );
            return None;
        }
    }
    queues.push("other".into());
    weights.push(1);
    let discipline = match name {
        "fifo" => DisciplineSpec::Fifo,
        "priority" => DisciplineSpec::Priority,
        "drr" => DisciplineSpec::Drr(weights),
        "wfq" => DisciplineSpec::Wfq(weights),
        _ => DisciplineSpec::Wf2qPlus(weights),
    };
    let other = Some((queues.len() - 1) as QueueId);
    ok.then_some((discipline, queues, vcs, other))
}

/// The queues of a `hwfq` or `flat` port: its tree's leaves, in file
/// order; every crossing PVC names one. No queue for other cells.
fn tree_queues(
    c: &mut Ctx,
    span: &Range<usize>,
    d: &PortDef,
    name: &str,
    crossing: &[(VcId, &PvcDef)],
) -> Option<Queued> {
    if d.class.is_empty() {
        c.at(
            span.clone(),
            format!(
                "port \"{}\": discipline \"{name}\" needs [[port.class]] entries",
                d.at
            ),
        );
        return None;
    }
    let mut ok = true;
    let mut queues: Vec<String> = Vec::new();
    let parents: BTreeSet<&str> = d.class.iter().filter_map(|k| k.parent.as_deref()).collect();
    let mut spec = vec![aurora_sched::ClassSpec::new(
        ROOT,
        None,
        aurora_sched::Share::Fraction(1.0),
        None,
    )];
    for k in &d.class {
        let leaf = !parents.contains(k.name.as_str());
        let queue = leaf.then(|| {
            queues.push(k.name.clone());
            (queues.len() - 1) as QueueId
        });
        if !(k.share > 0.0 && k.share <= 1.0) {
            c.at(
                span.clone(),
                format!(
                    "port \"{}\": class \"{}\" has share {}, not more than 0 and at most 1",
                    d.at, k.name, k.share
                ),
            );
            ok = false;
        }
        spec.push(aurora_sched::ClassSpec::new(
            &k.name,
            Some(k.parent.as_deref().unwrap_or(ROOT)),
            aurora_sched::Share::Fraction(k.share.clamp(f64::MIN_POSITIVE, 1.0)),
            queue,
        ));
    }
    let tree = match aurora_sched::ClassTree::new(spec) {
        Ok(t) => t,
        Err(e) => {
            c.at(span.clone(), format!("port \"{}\": {e}", d.at));
            return None;
        }
    };
    let mut vcs = Vec::new();
    for (vc, p) in crossing {
        let q = p
            .class
            .as_deref()
            .and_then(|k| queues.iter().position(|n| n == k));
        match q {
            Some(q) => vcs.push((*vc, q as QueueId)),
            None => {
                c.at(
                    span.clone(),
                    format!(
                        "PVC \"{}\" leaves by port \"{}\" but names no leaf class of its tree{}",
                        p.name,
                        d.at,
                        p.class
                            .as_deref()
                            .map_or(String::new(), |k| format!(" (\"{k}\" is not one)"))
                    ),
                );
                ok = false;
            }
        }
    }
    let discipline = match (name, &d.update_period) {
        ("hwfq", None) => DisciplineSpec::Hwfq(tree),
        ("hwfq", Some(_)) => {
            c.at(
                span.clone(),
                format!("port \"{}\": update_period is for flat ports", d.at),
            );
            return None;
        }
        (_, None) => DisciplineSpec::Flat(tree, Duration::ZERO),
        (_, Some(s)) => DisciplineSpec::Flat(
            tree,
            duration_in(c, span.clone(), "update_period", s, PERIOD_RANGE)?,
        ),
    };
    ok.then_some((discipline, queues, vcs, None))
}
