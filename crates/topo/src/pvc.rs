//! Turning one PVC, given as a path of nodes, into VCs on each link and
//! the table entries of the nodes along it.
//!
//! Three kinds of node can lie between the two hosts:
//!
//! - an ATM switch translates (input port, VC) to (output port, VC);
//! - a VuNet switch routes on the 4 bits in the GFC field and keeps the VC,
//!   so the VC is the same on both of its links, and whoever sends into it
//!   (a host, or a relaying link) must set those bits;
//! - a VuNet relaying link remaps the VCI (keeping the VPI) and writes the
//!   routing bits for the VuNet switch after it.
//!
//! Every PVC also gets entries for the way back along the same VCs, since
//! OAM loopback cells return along it.

use std::collections::{BTreeMap, BTreeSet};

use aurora_net::PortId;
use aurora_wire::cell::VcId;

/// What a named node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Host,
    /// A host with this many ports (more than one): the end of striped VCs.
    MultiHost(u16),
    /// An ATM switch with this many ports.
    Switch(u16),
    /// A VuNet (header-routed) switch with this many ports.
    VuSwitch(u16),
    /// A VuNet relaying link (two ports).
    Relay,
    /// An AVlink: port 0 on a VuNet, port 1 on the WAN.
    Avlink,
    /// An IP router with this many ports.
    Router(u16),
    /// A Vidboard camera (one port).
    Camera,
    /// A camera's viewer (one port).
    Viewer,
    /// A striping relay of a `[[splitter]]` pair, with this many ports
    /// (the wide side and the stripes).
    Splitter(u16),
}

impl Kind {
    /// Ports, or `None` for a host (one port, named by the host alone).
    pub(crate) fn ports(self) -> Option<u16> {
        match self {
            Kind::Host | Kind::Camera | Kind::Viewer => None,
            Kind::MultiHost(n)
            | Kind::Switch(n)
            | Kind::VuSwitch(n)
            | Kind::Router(n)
            | Kind::Splitter(n) => Some(n),
            Kind::Relay | Kind::Avlink => Some(2),
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Kind::Host => "host",
            Kind::MultiHost(_) => "multi-port host",
            Kind::Switch(_) => "switch",
            Kind::VuSwitch(_) => "VuNet switch",
            Kind::Relay => "relaying link",
            Kind::Avlink => "AVlink",
            Kind::Router(_) => "router",
            Kind::Camera => "camera",
            Kind::Viewer => "viewer",
            Kind::Splitter(_) => "striping relay",
        }
    }

    /// Hosts and routers: where PVCs start and end.
    pub(crate) fn is_end(self) -> bool {
        matches!(self, Kind::Host | Kind::MultiHost(_) | Kind::Router(_))
    }
}

/// One hop of a path: sending node and port, receiving node and port, and
/// the link (its index in the file) between them.
#[derive(Clone, Debug)]
pub(crate) struct Hop {
    pub from: String,
    pub from_port: PortId,
    pub to: String,
    pub to_port: PortId,
    pub link: usize,
}

/// The VCs in use on one link (in both directions: a PVC reserves its VC
/// both ways, for OAM loopback).
#[derive(Default)]
struct LinkVcs {
    taken: BTreeSet<VcId>,
    /// Every VC from 0.32 up to (not including) 0.`next` is taken.
    next: u32,
}

/// A relaying link's entries: (table = arriving port, VCI) -> (new VCI,
/// routing bits).
pub(crate) type RelayTable = BTreeMap<(PortId, u16), (u16, u8)>;

/// Everything the PVCs of a file put into nodes.
#[derive(Default)]
pub(crate) struct Entries {
    /// ATM switch tables: (input port, VC) -> (output port, VC).
    pub atm: BTreeMap<String, Vec<(PortId, VcId, PortId, VcId)>>,
    /// Relaying-link tables by relay name.
    pub relay: BTreeMap<String, RelayTable>,
    /// Routing bits hosts write on the VCs they send into a VuNet switch.
    pub host_bits: BTreeMap<String, Vec<(VcId, u8)>>,
    /// VCs in use on each link, by link index.
    links: BTreeMap<usize, LinkVcs>,
    /// AVlink pairs, by their two names (either order): the WAN switches
    /// from the first to the second, and the pool VCIs no PVC holds yet.
    pub wan: BTreeMap<(String, String), crate::compile::WanPair>,
}

impl Entries {
    /// True if `v` is in use on `link`.
    pub(crate) fn used(&self, link: usize, v: &VcId) -> bool {
        self.links.get(&link).is_some_and(|l| l.taken.contains(v))
    }

    /// PVCs crossing `link` so far.
    pub(crate) fn load(&self, link: usize) -> usize {
        self.links.get(&link).map_or(0, |l| l.taken.len())
    }

    pub(crate) fn take(&mut self, link: usize, v: VcId) {
        let l = self.links.entry(link).or_insert_with(|| LinkVcs {
            taken: BTreeSet::new(),
            next: u32::from(aurora_wire::cell::VCI_FIRST_USER),
        });
        l.taken.insert(v);
        while l.next <= u32::from(u16::MAX) && l.taken.contains(&VcId::new(0, l.next as u16)) {
            l.next += 1;
        }
    }

    /// The lowest VC on VPI 0, from VCI 32 up, free on every one of
    /// `links`. Each link remembers where its free VCs start, so a link
    /// carrying many PVCs is not searched from the bottom again.
    pub(crate) fn free_vc(&self, links: &[usize]) -> Option<VcId> {
        let first = u32::from(aurora_wire::cell::VCI_FIRST_USER);
        let mut vci = links
            .iter()
            .map(|l| self.links.get(l).map_or(first, |l| l.next))
            .max()
            .unwrap_or(first);
        while vci <= u32::from(u16::MAX) {
            let v = VcId::new(0, vci as u16);
            if !links.iter().any(|&l| self.used(l, &v)) {
                return Some(v);
            }
            vci += 1;
        }
        None
    }

    fn relay_entry(
        &mut self,
        relay: &str,
        table: PortId,
        vci: u16,
        to: (u16, u8),
    ) -> Result<(), String> {
        let t = self.relay.entry(relay.to_string()).or_default();
        match t.insert((table, vci), to) {
            None => Ok(()),
            Some(_) => Err(format!(
                "relaying link \"{relay}\" already maps VCI {vci} arriving on port {table} \
                 (relays look at the VCI only, so VCs with the same VCI and another VPI collide)"
            )),
        }
    }
}

/// Chooses the VC of every hop of PVC `name` and records the entries it
/// needs. `kinds[i]` is the kind of `path[i]`; `hops[i]` joins `path[i]`
/// to `path[i + 1]`. Returns the VC of each hop, or every problem found.
pub(crate) fn route(
    name: &str,
    path: &[String],
    kinds: &[Kind],
    hops: &[Hop],
    from_vc: Option<VcId>,
    to_vc: Option<VcId>,
    e: &mut Entries,
) -> Result<Vec<VcId>, Vec<String>> {
    let k = hops.len();
    let mut errs = Vec::new();
    for i in 1..path.len() - 1 {
        if !matches!(kinds[i], Kind::VuSwitch(_)) {
            continue;
        }
        for j in [i - 1, i + 1] {
            if !matches!(kinds[j], Kind::Host | Kind::Relay | Kind::Avlink) {
                errs.push(format!(
                    "PVC \"{name}\": VuNet switch \"{}\" routes on bits that only a host or a \
                     relaying link sets, but its neighbour \"{}\" is a {}",
                    path[i],
                    path[j],
                    kinds[j].describe()
                ));
            }
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let wan = crate::compile::wan_hops(name, path, kinds, e)?;

    // Hops joined by a VuNet switch share one VC: it does not change it.
    let mut runs: Vec<Vec<usize>> = vec![vec![0]];
    for (i, kind) in kinds.iter().enumerate().take(k).skip(1) {
        match (kind, runs.last_mut()) {
            (Kind::VuSwitch(_), Some(run)) => run.push(i),
            _ => runs.push(vec![i]),
        }
    }
    let mut vcs = vec![VcId::new(0, 0); k];
    for run in &runs {
        let first = run.first().copied().unwrap_or(0);
        let last = run.last().copied().unwrap_or(0);
        if let Some(vc) = wan[first] {
            // Across the WAN on the AVlinks' pool VC.
            for &i in run {
                e.take(hops[i].link, vc);
                vcs[i] = vc;
            }
            continue;
        }
        let want_from = if first == 0 { from_vc } else { None };
        let want_to = if last == k - 1 { to_vc } else { None };
        let want = match (want_from, want_to) {
            (Some(a), Some(b)) if a != b => {
                errs.push(format!(
                    "PVC \"{name}\": from_vc {a} and to_vc {b} must be equal, since only VuNet \
                     switches (which keep the VC) lie between the hosts"
                ));
                continue;
            }
            (a, b) => a.or(b),
        };
        let run_links: Vec<usize> = run.iter().map(|&i| hops[i].link).collect();
        let used = |v: &VcId| run_links.iter().any(|&l| e.used(l, v));
        let vc = match want {
            Some(v) if used(&v) => {
                errs.push(format!(
                    "PVC \"{name}\": VC {v} is already used on the link from \"{}\" to \"{}\"",
                    hops[first].from, hops[last].to
                ));
                continue;
            }
            Some(v) => v,
            None => match e.free_vc(&run_links) {
                Some(v) => v,
                None => {
                    errs.push(format!(
                        "PVC \"{name}\": no free VC on the links from \"{}\" to \"{}\"",
                        hops[first].from, hops[last].to
                    ));
                    continue;
                }
            },
        };
        for &i in run {
            e.take(hops[i].link, vc);
            vcs[i] = vc;
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }

    // The bits a VuNet switch at path[j] needs to send a cell on to
    // path[j + 1] (forward) or path[j - 1] (back).
    let bits_fwd = |j: usize| match kinds.get(j) {
        Some(Kind::VuSwitch(_)) => hops[j].from_port as u8,
        _ => 0,
    };
    let bits_back = |j: usize| match kinds.get(j) {
        Some(Kind::VuSwitch(_)) if j >= 1 => hops[j - 1].to_port as u8,
        _ => 0,
    };
    for i in 1..k {
        let node = &path[i];
        let (inp, outp) = (&hops[i - 1], &hops[i]);
        match kinds[i] {
            // Cross-connected for the AVlinks' pool already.
            Kind::Switch(_) if wan[i - 1].is_some() && wan[i].is_some() => {}
            Kind::Avlink => {
                let vunet = if wan[i].is_some() { i - 1 } else { i };
                if vcs[vunet].vpi != 0 {
                    errs.push(format!(
                        "PVC \"{name}\": AVlink \"{node}\" sends into its VuNet on VPI 0, but the \
                         PVC's VC there is {}",
                        vcs[vunet]
                    ));
                    continue;
                }
                // (table, VCI) -> (VCI, bits) both ways, as a relay's;
                // table 0 is the VuNet side, 1 the WAN side.
                let pairs = if wan[i].is_some() {
                    [
                        (0, vcs[i - 1].vci, (vcs[i].vci, 0)),
                        (1, vcs[i].vci, (vcs[i - 1].vci, bits_back(i - 1))),
                    ]
                } else {
                    [
                        (1, vcs[i - 1].vci, (vcs[i].vci, bits_fwd(i + 1))),
                        (0, vcs[i].vci, (vcs[i - 1].vci, 0)),
                    ]
                };
                for (table, vci, to) in pairs {
                    if let Err(m) = e.relay_entry(node, table, vci, to) {
                        errs.push(format!("PVC \"{name}\": {m}"));
                    }
                }
            }
            Kind::Switch(_) => {
                let t = e.atm.entry(node.clone()).or_default();
                t.push((inp.to_port, vcs[i - 1], outp.from_port, vcs[i]));
                t.push((outp.from_port, vcs[i], inp.to_port, vcs[i - 1]));
            }
            Kind::Relay => {
                if vcs[i - 1].vpi != vcs[i].vpi {
                    errs.push(format!(
                        "PVC \"{name}\": relaying link \"{node}\" keeps the VPI, but the VCs \
                         either side of it are {} and {}",
                        vcs[i - 1],
                        vcs[i]
                    ));
                    continue;
                }
                let fwd = (vcs[i].vci, bits_fwd(i + 1));
                let back = (vcs[i - 1].vci, bits_back(i - 1));
                for (table, vci, to) in [
                    (inp.to_port, vcs[i - 1].vci, fwd),
                    (outp.from_port, vcs[i].vci, back),
                ] {
                    if let Err(m) = e.relay_entry(node, table, vci, to) {
                        errs.push(format!("PVC \"{name}\": {m}"));
                    }
                }
            }
            Kind::VuSwitch(_)
            | Kind::Host
            | Kind::MultiHost(_)
            | Kind::Router(_)
            | Kind::Camera
            | Kind::Viewer
            | Kind::Splitter(_) => {}
        }
    }
    if matches!(kinds[1], Kind::VuSwitch(_)) {
        e.host_bits
            .entry(path[0].clone())
            .or_default()
            .push((vcs[0], bits_fwd(1)));
    }
    if matches!(kinds[k - 1], Kind::VuSwitch(_)) {
        e.host_bits
            .entry(path[k].clone())
            .or_default()
            .push((vcs[k - 1], bits_back(k - 1)));
    }
    if errs.is_empty() {
        Ok(vcs)
    } else {
        Err(errs)
    }
}
