//! The AVlink step: each `[[avlink]]`'s settings and links (port 0 on a
//! VuNet switch, port 1 on an ATM switch), its peer and the WAN switches
//! between the two, and the cross-connects those switches get, out of
//! band, for the pair's control VC and pool: both ways, the same VC on
//! every WAN link. PVCs that cross the WAN between two AVlinks take a pool
//! VC from the top of the pool down, so the connection library, which
//! takes VCIs from 32 up, meets them last (and an AVlink refuses a control
//! cell that names one).

use aurora_net::avlink::{Avlink, WanPlan};
use aurora_wire::cell::{Format, VcId};

use super::Reader;
use crate::pvc::{Entries, Kind};
use crate::{AvlinkDef, Problem, Problems};

/// The lowest VCI the control VC may take: below are idle cells,
/// meta-signalling, broadcast signalling and F4 OAM (which ATM switches
/// carry by path, not by VC).
const CONTROL_VCI_MIN: u16 = 5;

/// Two AVlinks joined across the WAN.
pub(crate) struct WanPair {
    /// The WAN's ATM switches from the first AVlink of the key to the
    /// second.
    pub(crate) switches: Vec<String>,
    /// The pair's plan.
    pub(crate) plan: WanPlan,
    /// Pool VCIs no PVC holds yet, lowest first.
    pub(crate) free: Vec<u16>,
}

/// The WAN plan `d` asks for (not yet checked).
pub(super) fn plan_of(d: &AvlinkDef) -> WanPlan {
    let base = WanPlan::default();
    let vpi = d.wan_vpi.unwrap_or(base.vpi);
    WanPlan {
        format: Format::Uni,
        control: VcId::new(vpi, d.control_vci.unwrap_or(base.control.vci)),
        vpi,
        first: base.first,
        count: d.pool.unwrap_or(base.count),
    }
}

/// For each hop of PVC `name` (`path`, its nodes' `kinds`), the pool VC
/// it takes if it crosses a WAN between two AVlinks; the pool VC taken
/// from the pair's free ones.
pub(crate) fn wan_hops(
    name: &str,
    path: &[String],
    kinds: &[Kind],
    e: &mut Entries,
) -> Result<Vec<Option<VcId>>, Vec<String>> {
    let mut wan = vec![None; path.len().saturating_sub(1)];
    let mut errs = Vec::new();
    let mut i = 1;
    while i + 1 < path.len() {
        if kinds[i] != Kind::Avlink {
            i += 1;
            continue;
        }
        if !matches!(kinds[i + 1], Kind::Switch(_)) {
            errs.push(format!(
                "PVC \"{name}\" passes AVlink \"{}\" without crossing the WAN from it; an AVlink \
                 joins a VuNet to ATM switches",
                path[i]
            ));
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < path.len() && matches!(kinds[j], Kind::Switch(_)) {
            j += 1;
        }
        if j >= path.len() || kinds[j] != Kind::Avlink {
            errs.push(format!(
                "PVC \"{name}\" enters the WAN at AVlink \"{}\" but does not reach another \
                 AVlink through ATM switches alone",
                path[i]
            ));
            break;
        }
        match wan_vc(e, &path[i], &path[j], &path[i + 1..j]) {
            Ok(vc) => wan[i..j].iter_mut().for_each(|w| *w = Some(vc)),
            Err(m) => errs.push(format!("PVC \"{name}\": {m}")),
        }
        i = j + 1;
    }
    if errs.is_empty() {
        Ok(wan)
    } else {
        Err(errs)
    }
}

/// A pool VC of AVlinks `a` and `b` for a PVC crossing `switches` between
/// them: the highest still free.
fn wan_vc(e: &mut Entries, a: &str, b: &str, switches: &[String]) -> Result<VcId, String> {
    let (pair, reversed) = match e.wan.get_mut(&(a.to_string(), b.to_string())) {
        Some(p) => (p, false),
        None => match e.wan.get_mut(&(b.to_string(), a.to_string())) {
            Some(p) => (p, true),
            None => return Err(format!("AVlinks \"{a}\" and \"{b}\" are not peers")),
        },
    };
    let same = if reversed {
        pair.switches.iter().rev().eq(switches.iter())
    } else {
        pair.switches.iter().eq(switches.iter())
    };
    if !same {
        return Err(format!(
            "between AVlinks \"{a}\" and \"{b}\" the WAN is {:?}, not {switches:?}",
            pair.switches
        ));
    }
    let vci = pair.free.pop().ok_or_else(|| {
        format!("every VC of the pool between AVlinks \"{a}\" and \"{b}\" is taken")
    })?;
    Ok(VcId::new(pair.plan.vpi, vci))
}

impl Reader<'_> {
    /// Declares the AVlinks for [`Reader::node_names`].
    pub(super) fn avlink_kinds(&mut self) {
        for a in &self.file.avlink {
            let d = a.get_ref();
            if d.key.as_deref() == Some("") {
                self.c
                    .at(a.span(), format!("AVlink \"{}\" has an empty key", d.name));
            }
            self.declared.push((a.span(), &d.name, Kind::Avlink));
        }
    }

    /// Each AVlink's plan and links, each pair's WAN path, and the WAN
    /// switches' cross-connects.
    pub(super) fn avlinks(&mut self) {
        let file = self.file;
        for a in &file.avlink {
            let (span, d) = (a.span(), a.get_ref());
            let plan = plan_of(d);
            let problem = if d.control_vci.is_some_and(|v| v < CONTROL_VCI_MIN) {
                Some(format!(
                    "VCIs 0 to {} carry idle cells, meta-signalling and F4 OAM",
                    CONTROL_VCI_MIN - 1
                ))
            } else if plan.vpi > Format::Uni.max_vpi() {
                Some(format!("wan_vpi {} is above 255", plan.vpi))
            } else {
                plan.check().err()
            };
            if let Some(m) = problem {
                self.c
                    .at(span.clone(), format!("AVlink \"{}\": {m}", d.name));
                continue;
            }
            // Port 0 on a VuNet switch, port 1 on an ATM switch.
            for ((from, next), joins) in &self.joins {
                if from != &d.name {
                    continue;
                }
                let kind = self.kinds.get(next).copied();
                for &(port, _, _) in joins {
                    let ok = match port {
                        0 => matches!(kind, Some(Kind::VuSwitch(_))),
                        _ => matches!(kind, Some(Kind::Switch(_))),
                    };
                    if !ok {
                        let want = if port == 0 {
                            "a VuNet switch"
                        } else {
                            "an ATM switch"
                        };
                        self.c.at(
                            span.clone(),
                            format!(
                                "AVlink \"{}\": port {port} must link to {want}, not to \"{next}\"",
                                d.name
                            ),
                        );
                    }
                }
            }
            let Some(peer) = &d.peer else {
                if !d.wan.is_empty() {
                    self.c.at(
                        span,
                        format!("AVlink \"{}\" names a WAN path but no peer", d.name),
                    );
                }
                continue;
            };
            if let Err(m) = self.pair(d, peer, plan) {
                self.c.at(span, format!("AVlink \"{}\": {m}", d.name));
            }
        }
    }

    /// The pair of AVlink `d` and `peer` across `d.wan`, cross-connected.
    fn pair(&mut self, d: &AvlinkDef, peer: &str, plan: WanPlan) -> Result<(), String> {
        let file = self.file;
        let Some(p) = file
            .avlink
            .iter()
            .map(|a| a.get_ref())
            .find(|a| a.name == peer)
        else {
            return Err(format!("its peer \"{peer}\" is not an AVlink"));
        };
        if p.name == d.name {
            return Err("it cannot be its own peer".into());
        }
        if p.peer.is_some() {
            return Err(format!(
                "its peer \"{peer}\" names a peer too; name the pair on one of the two"
            ));
        }
        if plan_of(p) != plan {
            return Err(format!(
                "its peer \"{peer}\" has another wan_vpi, pool or control_vci; a pair shares them"
            ));
        }
        if self
            .entries
            .wan
            .keys()
            .any(|(a, b)| [a, b].iter().any(|n| *n == &d.name || *n == peer))
        {
            return Err("an AVlink has one peer".into());
        }
        if d.wan.is_empty() {
            return Err("it names no WAN switches (wan = [...]) to its peer".into());
        }
        if let Some(s) = d
            .wan
            .iter()
            .find(|s| !matches!(self.kinds.get(*s), Some(Kind::Switch(_))))
        {
            return Err(format!("WAN node \"{s}\" is not an ATM switch"));
        }
        // The path: AVlink port 1, each switch in and out, peer port 1.
        let names: Vec<&str> = [d.name.as_str()]
            .into_iter()
            .chain(d.wan.iter().map(String::as_str))
            .chain([peer])
            .collect();
        let mut hops = Vec::new();
        for (k, w) in names.windows(2).enumerate() {
            let joins = self
                .joins
                .get(&(w[0].to_string(), w[1].to_string()))
                .map_or(&[][..], Vec::as_slice);
            let last = k + 2 == names.len();
            let pick = joins
                .iter()
                .find(|j| (k > 0 || j.0 == 1) && (!last || j.1 == 1));
            let Some(&j) = pick else {
                return Err(format!(
                    "no link joins \"{}\" to \"{}\" on the way to its peer (AVlinks meet the WAN \
                     on port 1)",
                    w[0], w[1]
                ));
            };
            hops.push(j);
        }
        let vcs: Vec<VcId> = plan.pool().chain([plan.control]).collect();
        for (m, sw) in d.wan.iter().enumerate() {
            let (inp, outp) = (hops[m].1, hops[m + 1].0);
            let t = self.entries.atm.entry(sw.clone()).or_default();
            for &vc in &vcs {
                t.push((inp, vc, outp, vc));
                t.push((outp, vc, inp, vc));
            }
        }
        for h in &hops {
            for &vc in &vcs {
                self.entries.take(h.2, vc);
            }
        }
        self.entries.wan.insert(
            (d.name.clone(), peer.to_string()),
            WanPair {
                switches: d.wan.clone(),
                plan,
                free: plan.pool().map(|v| v.vci).collect(),
            },
        );
        Ok(())
    }
}

/// AVlink `d`, the `k`-th relay of the file (its relay id), with the
/// entries the PVCs gave it.
pub(super) fn avlink_node(d: &AvlinkDef, k: usize, entries: &Entries) -> Result<Avlink, Problems> {
    let problem = |msg: String| {
        Problems(vec![Problem {
            line: 0,
            col: 0,
            msg,
        }])
    };
    let key = d.key.as_ref().map(|k| k.as_bytes().to_vec());
    let mut av = Avlink::new(k as u16, plan_of(d), d.mgmt_vunet, key).map_err(problem)?;
    for (&(table, vci), &(to, bits)) in entries.relay.get(&d.name).into_iter().flatten() {
        // Table 0: VuNet VCI -> WAN VCI; table 1: WAN VCI -> VuNet VCI.
        let r = match table {
            0 => av.set_entry(0, vci, to, 0),
            _ => av.set_entry(1, to, vci, bits),
        };
        r.map_err(|m| problem(format!("AVlink \"{}\": {m}", d.name)))?;
    }
    Ok(av)
}
