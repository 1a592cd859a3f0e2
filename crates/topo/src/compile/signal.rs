//! The signalling step: `[signal]`, each `[[app]]` (its hosts, route,
//! schedule and data), each relay's `lifetime` and each `[[restart]]`;
//! and, for the build step, the signalling hosts and what the relays are
//! given (host keys, lifetimes, restarts).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use aurora_net::avlink::{Avlink, PORT_VUNET, PORT_WAN};
use aurora_net::vunet::VunetLink;
use aurora_net::PortId;
use aurora_signal::conn::{Hop, Path, Timing, MAX_RELAYS};
use aurora_signal::host::{AppSpec, HostConfig, SharedTable, SignalHost};
use aurora_signal::table::{FileTable, Limits, Link, MemTable, Owner};
use aurora_time::{Duration, Instant};

use super::checks::{
    duration_in, duration_or, entry_name, DurationRange, INTERVAL_RANGE, START_RANGE,
};
use super::links::Join;
use super::Reader;
use crate::pvc::Kind;
use crate::signal::AppDef;
use crate::{Problem, Problems, MAX_FLOW_COUNT};

mod hosts;

/// A relay's entry lifetime, a control reply's timeout, a lease: 1 us to
/// 1 hour.
const SOFT_RANGE: DurationRange = (
    Duration::from_micros(1),
    Duration::from_secs(3600),
    "1us to 1 hour",
);

/// Most tries of a control step.
const MAX_RETRIES: u32 = 100;

/// Hosts that may run applications: key ids 1 to 255.
const MAX_SIGNAL_HOSTS: usize = 255;

/// What the signalling step learnt, for the build step.
#[derive(Default)]
pub(crate) struct Signalling {
    /// Applications without problems: the sending host and the spec.
    apps: Vec<(String, AppSpec)>,
    /// Signalling hosts (`[signal] hosts`, then ends of applications) with
    /// their key ids, in file order.
    hosts: BTreeMap<String, u8>,
    /// Each signalling host's directory: paths to the others, relays'
    /// names, its flow numbers.
    directories: BTreeMap<String, aurora_signal::control::Directory>,
    /// Relays' entry lifetimes, by name.
    lifetimes: BTreeMap<String, Duration>,
    /// Relays' restarts, by name.
    restarts: BTreeMap<String, Vec<Instant>>,
    /// The secret hosts' keys are made from.
    key: Vec<u8>,
    /// A table file shared by processes.
    table: Option<std::path::PathBuf>,
    timing: Timing,
    /// WAN segments (the link into an AVlink from the WAN): the pool VCIs
    /// no PVC holds, which are all the table may hand out there.
    wan_ranges: BTreeMap<Link, (u16, u16)>,
}

/// A node that relays VCs whose entries control cells write: a relaying
/// link or an AVlink.
pub(crate) trait SoftRelay {
    fn add_key(&mut self, id: u8, key: Vec<u8>);
    fn set_lifetime(&mut self, lifetime: Option<Duration>);
    fn restart_at(&mut self, at: Instant);
}

impl SoftRelay for VunetLink {
    fn add_key(&mut self, id: u8, key: Vec<u8>) {
        VunetLink::add_key(self, id, key);
    }
    fn set_lifetime(&mut self, lifetime: Option<Duration>) {
        VunetLink::set_lifetime(self, lifetime);
    }
    fn restart_at(&mut self, at: Instant) {
        VunetLink::restart_at(self, at);
    }
}

impl SoftRelay for Avlink {
    fn add_key(&mut self, id: u8, key: Vec<u8>) {
        Avlink::add_key(self, id, key);
    }
    fn set_lifetime(&mut self, lifetime: Option<Duration>) {
        Avlink::set_lifetime(self, lifetime);
    }
    fn restart_at(&mut self, at: Instant) {
        Avlink::restart_at(self, at);
    }
}

impl Signalling {
    /// Host `name`'s key.
    fn host_key(&self, name: &str) -> Vec<u8> {
        let mut k = self.key.clone();
        k.push(b':');
        k.extend_from_slice(name.as_bytes());
        k
    }

    /// Gives relay (or AVlink) `name` every signalling host's key, its
    /// lifetime and its restarts.
    pub(crate) fn prepare_relay(&self, name: &str, relay: &mut impl SoftRelay) {
        for (host, &id) in &self.hosts {
            relay.add_key(id, self.host_key(host));
        }
        if let Some(&l) = self.lifetimes.get(name) {
            relay.set_lifetime(Some(l));
        }
        for &t in self.restarts.get(name).into_iter().flatten() {
            relay.restart_at(t);
        }
    }

    /// The network's VCI table, handing out VCIs from `first` up (above
    /// every PVC's); `None` if no host signals.
    pub(crate) fn table(&self, first: u16) -> Result<Option<SharedTable>, Problems> {
        if self.hosts.is_empty() {
            return Ok(None);
        }
        let limits = Limits {
            first: first.max(aurora_wire::cell::VCI_FIRST_USER),
            links: self.wan_ranges.clone(),
            ..Limits::default()
        };
        Ok(Some(match &self.table {
            None => Arc::new(MemTable::new(limits)),
            Some(p) => Arc::new(FileTable::open(p, limits).map_err(|e| {
                Problems(vec![Problem {
                    line: 0,
                    col: 0,
                    msg: e.to_string(),
                }])
            })?),
        }))
    }

    /// The signalling host `name`, if it is one, with its applications.
    pub(crate) fn host(&self, name: &str, table: Option<&SharedTable>) -> Option<SignalHost> {
        let (&id, table) = (self.hosts.get(name)?, table?);
        let mut h = SignalHost::new(
            HostConfig {
                owner: Owner(u32::from(id)),
                key: Some((id, self.host_key(name))),
                timing: self.timing,
                vpi: 0,
            },
            table.clone(),
        );
        for (_, spec) in self.apps.iter().filter(|(h, _)| h == name) {
            h.add_app(spec.clone());
        }
        if let Some(d) = self.directories.get(name) {
            h.set_directory(d.clone());
        }
        Some(h)
    }
}

impl<'f> Reader<'f> {
    /// `[signal]`, relays' lifetimes, `[[restart]]` and `[[app]]`.
    pub(super) fn apps(&mut self) {
        let file = self.file;
        let mut sig = Signalling::default();
        if let Some(s) = &file.signal {
            let (span, d) = (s.span(), s.get_ref());
            let c = &mut self.c;
            match d.key.as_deref() {
                Some("") => c.at(span.clone(), "[signal] key is empty".into()),
                Some(k) => sig.key = k.as_bytes().to_vec(),
                None => {}
            }
            sig.table = d.table.as_ref().map(std::path::PathBuf::from);
            let def = Timing::default();
            let timeout = duration_or(
                c,
                span.clone(),
                "[signal] timeout",
                &d.timeout,
                def.timeout,
                SOFT_RANGE,
            );
            let lease = duration_or(
                c,
                span.clone(),
                "[signal] lease",
                &d.lease,
                def.lease,
                SOFT_RANGE,
            );
            let retries = d.retries.unwrap_or(def.retries);
            if retries > MAX_RETRIES {
                c.at(
                    span,
                    format!("[signal] retries {retries} is outside 0 to {MAX_RETRIES}"),
                );
            }
            sig.timing = Timing {
                timeout: timeout.unwrap_or(def.timeout),
                retries: retries.min(MAX_RETRIES),
                lease: lease.unwrap_or(def.lease),
            };
        }
        for r in &file.relay {
            let (span, d) = (r.span(), r.get_ref());
            if let Some(l) = &d.lifetime {
                let what = format!("relaying link \"{}\": lifetime", d.name);
                if let Some(l) = duration_in(&mut self.c, span, &what, l, SOFT_RANGE) {
                    sig.lifetimes.insert(d.name.clone(), l);
                }
            }
        }
        for r in &file.restart {
            let (span, d) = (r.span(), r.get_ref());
            if !matches!(self.kinds.get(&d.node), Some(Kind::Relay | Kind::Avlink)) {
                self.c.at(
                    span.clone(),
                    format!(
                        "restart: \"{}\" is not a relaying link or an AVlink",
                        d.node
                    ),
                );
            }
            if let Some(t) = duration_in(&mut self.c, span, "restart at", &d.at, START_RANGE) {
                let at = Instant::ZERO + t;
                sig.restarts.entry(d.node.clone()).or_default().push(at);
            }
        }
        // Relay ids: the relays in file order, then the AVlinks.
        let relay_ids: BTreeMap<&str, u16> = file
            .relay
            .iter()
            .map(|r| r.get_ref().name.as_str())
            .chain(file.avlink.iter().map(|a| a.get_ref().name.as_str()))
            .enumerate()
            .map(|(k, name)| (name, k as u16))
            .collect();
        sig.wan_ranges = self.wan_ranges();
        // Hosts that carry other traffic cannot also run applications.
        let mut busy: BTreeSet<&str> = self.pvcs.iter().flat_map(|p| [p.from, p.to]).collect();
        busy.extend(file.stripe.iter().flat_map(|s| {
            let d = s.get_ref();
            [d.from.as_str(), d.to.as_str()]
        }));
        self.signal_hosts(&mut sig, &busy);
        let mut names = BTreeMap::new();
        for (i, a) in file.app.iter().enumerate() {
            let (span, d) = (a.span(), a.get_ref());
            let (line, _) = self.c.place(span.start);
            let me = format!("app \"{}\"", d.name);
            entry_name(&mut self.c, span.clone(), &me, &d.name, line, &mut names);
            let mut ends_ok = true;
            let to = d.to.clone().or_else(|| d.path.as_ref()?.last().cloned());
            for (field, h) in [("host", Some(&d.host)), ("to", to.as_ref())] {
                let Some(h) = h else { continue };
                ends_ok &= self.app_end(span.clone(), &me, field, h, &busy);
            }
            let path = match (&d.to, &d.path, ends_ok) {
                (Some(_), Some(_), _) => {
                    self.c
                        .at(span.clone(), format!("{me}: give to or path, not both"));
                    None
                }
                (None, None, _) => {
                    self.c.at(
                        span.clone(),
                        format!("{me}: give the destination host (to) or a path"),
                    );
                    None
                }
                (_, _, false) => None,
                (Some(to), None, true) => {
                    let found = self.find_route(&d.host, to);
                    if found.is_none() {
                        self.c.at(
                            span.clone(),
                            format!(
                                "{me}: no route from \"{}\" to \"{to}\" through VuNet switches, relaying links and AVlinks",
                                d.host
                            ),
                        );
                    }
                    found
                }
                (None, Some(p), true) => self.explicit_route(span.clone(), &me, &d.host, p),
            };
            let path = path.and_then(|p| self.app_path(span.clone(), &me, &p, &relay_ids));
            let spec = self.app_schedule(span.clone(), &me, d);
            let flow = self.pvcs.len() + i;
            if flow > usize::from(u16::MAX) {
                self.c.at(
                    span.clone(),
                    format!("{me}: too many PVCs and apps for flow numbers"),
                );
                continue;
            }
            let (Some(path), Some(mut spec), Some(to)) = (path, spec, to) else {
                continue;
            };
            if sig.key.is_empty() {
                self.c.at(
                    span.clone(),
                    format!("{me}: the file needs a [signal] key, from which hosts' control-cell keys are made"),
                );
                continue;
            }
            // Key ids 1, 2, ... in the order apps name their hosts.
            for h in [&d.host, &to] {
                if sig.hosts.contains_key(h) {
                    continue;
                }
                if sig.hosts.len() >= MAX_SIGNAL_HOSTS {
                    self.c.at(
                        span.clone(),
                        format!("{me}: more than {MAX_SIGNAL_HOSTS} hosts run apps"),
                    );
                    break;
                }
                let id = sig.hosts.len() as u8 + 1;
                sig.hosts.insert(h.clone(), id);
            }
            spec.flow = flow as u16;
            spec.path = path;
            spec.to = to;
            sig.apps.push((d.host.clone(), spec));
        }
        let flow_base = self.pvcs.len() + file.app.len();
        self.host_directories(&mut sig, &relay_ids, flow_base);
        self.signalling = sig;
    }

    /// Checks `host`, field `field` of app `me`: a plain host carrying no
    /// PVC, IP or striped traffic.
    fn app_end(
        &mut self,
        span: Range<usize>,
        me: &str,
        field: &str,
        host: &str,
        busy: &BTreeSet<&str>,
    ) -> bool {
        let why = match self.kinds.get(host) {
            None => "is not defined",
            Some(Kind::Host) if self.ipcfg.contains_key(host) => "is an IP host",
            Some(Kind::Host) if busy.contains(host) => "is an end of a PVC or striped VC",
            Some(Kind::Host) => return true,
            Some(_) => "is not a host",
        };
        self.c.at(
            span,
            format!("{me}: {field} \"{host}\" {why}; an app's ends are hosts that carry apps only"),
        );
        false
    }

    /// The joins from `node`: (next node, port here, port there, link).
    fn joins_from(&self, node: &str) -> Vec<(String, Join)> {
        self.joins
            .range((node.to_string(), String::new())..)
            .take_while(|((a, _), _)| a == node)
            .flat_map(|((_, b), js)| js.iter().map(move |j| (b.clone(), *j)))
            .collect()
    }

    /// Whether a VC may go on from `node` (of kind `kind`, entered by
    /// port `inp`) by join `j` to `next`, towards `to`. (An AVlink entered
    /// from its VuNet goes on across the WAN: [`Reader::wan_steps`].)
    fn may_step(
        &self,
        node: &str,
        kind: Kind,
        inp: Option<PortId>,
        next: &str,
        j: Join,
        to: &str,
    ) -> bool {
        let nk = self.kinds.get(next).copied();
        let vu = matches!(nk, Some(Kind::VuSwitch(_)));
        node != to
            && match kind {
                Kind::Host => inp.is_none() && vu,
                Kind::VuSwitch(_) => {
                    nk == Some(Kind::Relay)
                        || (nk == Some(Kind::Avlink) && j.1 == PORT_VUNET)
                        || (next == to && nk == Some(Kind::Host))
                }
                // A relay passes cells from one side to the other.
                Kind::Relay => inp != Some(j.0) && vu,
                // Back into a VuNet from the WAN.
                Kind::Avlink => inp == Some(PORT_WAN) && j.0 == PORT_VUNET && vu,
                _ => false,
            }
    }

    /// The steps from `node`, entered by `inp`, towards `to`: each next
    /// node with the join into it and the WAN switches crossed on the way
    /// (none but across a WAN).
    fn steps(&self, node: &str, inp: Option<PortId>, to: &str) -> Vec<(String, Join, Vec<String>)> {
        let Some(&kind) = self.kinds.get(node) else {
            return Vec::new();
        };
        if kind == Kind::Avlink && inp == Some(PORT_VUNET) {
            return self.wan_steps(node);
        }
        self.joins_from(node)
            .into_iter()
            .filter(|(next, j)| self.may_step(node, kind, inp, next, *j, to))
            .map(|(next, j)| (next, j, Vec::new()))
            .collect()
    }

    /// From AVlink `av` across the WAN to each of its peers: the peer, the
    /// join into it (from the last WAN switch, on its WAN side) and the
    /// WAN switches between, from `av` on.
    fn wan_steps(&self, av: &str) -> Vec<(String, Join, Vec<String>)> {
        let mut out = Vec::new();
        for ((a, b), pair) in &self.entries.wan {
            let (peer, switches): (&str, Vec<String>) = if a == av {
                (b, pair.switches.clone())
            } else if b == av {
                (a, pair.switches.iter().rev().cloned().collect())
            } else {
                continue;
            };
            let Some(last) = switches.last() else {
                continue;
            };
            let into = self
                .joins_from(last)
                .into_iter()
                .find(|(n, j)| n == peer && j.1 == PORT_WAN);
            if let Some((_, j)) = into {
                out.push((peer.to_string(), j, switches));
            }
        }
        out
    }

    /// For each link from the WAN into an AVlink, the VCIs the table may
    /// hand out there: the pair's pool, less what PVCs took (from the top
    /// down, so what is left is the bottom of the pool).
    fn wan_ranges(&self) -> BTreeMap<Link, (u16, u16)> {
        let mut ranges = BTreeMap::new();
        for ((a, b), pair) in &self.entries.wan {
            let range = match pair.free.last() {
                Some(&top) => (pair.plan.first, top),
                None => (1, 0),
            };
            for av in [a, b] {
                for (_, j, _) in self.wan_steps(av) {
                    ranges.insert(Link(j.2 as u32), range);
                }
            }
        }
        ranges
    }

    /// The shortest route from `from` to `to`: each node after `from`
    /// with the join that reaches it (a WAN crossing is one step, from
    /// AVlink to AVlink).
    fn find_route(&self, from: &str, to: &str) -> Option<Vec<(String, Join)>> {
        type State = (String, Option<PortId>);
        let start: State = (from.to_string(), None);
        let mut prev: BTreeMap<State, (State, Join)> = BTreeMap::new();
        let mut queue = VecDeque::from([start.clone()]);
        while let Some((node, inp)) = queue.pop_front() {
            for (next, j, _) in self.steps(&node, inp, to) {
                let st: State = (next.clone(), Some(j.1));
                if st == start || prev.contains_key(&st) {
                    continue;
                }
                prev.insert(st.clone(), ((node.clone(), inp), j));
                if next == to {
                    let mut route = Vec::new();
                    let mut at = st;
                    while let Some((p, j)) = prev.get(&at) {
                        route.push((at.0.clone(), *j));
                        at = p.clone();
                    }
                    route.reverse();
                    return Some(route);
                }
                queue.push_back(st);
            }
        }
        None
    }

    /// Explicit path `names` of app `me` from `host`: each step over a
    /// link that joins the two nodes and keeps to the rules; across a WAN,
    /// the path names the pair's WAN switches between the two AVlinks.
    fn explicit_route(
        &mut self,
        span: Range<usize>,
        me: &str,
        host: &str,
        names: &[String],
    ) -> Option<Vec<(String, Join)>> {
        if names.first().map(String::as_str) != Some(host) || names.len() < 2 {
            self.c.at(
                span,
                format!("{me}: path must start at its host \"{host}\" and name at least two nodes"),
            );
            return None;
        }
        let to = names.last().map(String::as_str).unwrap_or(host);
        let mut route = Vec::new();
        let mut inp = None;
        let mut k = 0;
        while k + 1 < names.len() {
            let here = &names[k];
            if !self.kinds.contains_key(here) {
                self.c.at(
                    span,
                    format!("{me}: path names \"{here}\", which is not defined"),
                );
                return None;
            }
            let step = self.steps(here, inp, to).into_iter().find(|(n, _, wan)| {
                names.get(k + 1..k + 1 + wan.len()) == Some(wan.as_slice())
                    && names.get(k + 1 + wan.len()) == Some(n)
            });
            let Some((n, j, wan)) = step else {
                self.c.at(
                    span,
                    format!(
                        "{me}: path cannot go from \"{here}\" to \"{}\" (a path is host, VuNet switch, relaying link or AVlink, VuNet switch, ..., host, each pair joined by a link; between two AVlinks it names their WAN switches)",
                        names[k + 1]
                    ),
                );
                return None;
            };
            inp = Some(j.1);
            k += 1 + wan.len();
            route.push((n, j));
        }
        Some(route)
    }

    /// The connection library's path for `route` (nodes after the host,
    /// each with the join into it).
    fn app_path(
        &mut self,
        span: Range<usize>,
        me: &str,
        route: &[(String, Join)],
        ids: &BTreeMap<&str, u16>,
    ) -> Option<Path> {
        let j = |i: usize| route.get(i).map(|r| r.1);
        let mut hops = Vec::new();
        // Node i of the route is position i + 1 of the path.
        for (i, (name, into)) in route.iter().enumerate() {
            let kind = self.kinds.get(name).copied();
            if !matches!(kind, Some(Kind::Relay | Kind::Avlink)) {
                continue;
            }
            // The switch after the relay routes on to the node beyond it;
            // the switch before routes back towards the node before it.
            // On the WAN side of an AVlink there is no VuNet switch: its
            // nibble is 0 (the WAN drops it).
            let wan_side = kind == Some(Kind::Avlink) && into.1 == PORT_WAN;
            let to_wan = kind == Some(Kind::Avlink) && into.1 == PORT_VUNET;
            let on = if to_wan {
                Some(0)
            } else {
                j(i + 2).map(|j| j.0)
            };
            let back = if wan_side {
                Some(0)
            } else {
                i.checked_sub(1).and_then(j).map(|j| j.1)
            };
            let (Some(on), Some(back)) = (on, back) else {
                return None;
            };
            hops.push(Hop {
                relay: *ids.get(name.as_str())?,
                link: Link(into.2 as u32),
                side: into.1 as u8,
                bits_on: on as u8,
                bits_back: back as u8,
            });
        }
        if hops.is_empty() || hops.len() > MAX_RELAYS {
            self.c.at(span, format!("{me}: its path crosses {} relaying links and AVlinks; an app's VC crosses 1 to {MAX_RELAYS}", hops.len()));
            return None;
        }
        Some(Path {
            first_bits: j(1)?.0 as u8,
            hops,
            last_link: Link(route.last()?.1 .2 as u32),
        })
    }

    /// App `d`'s schedule and data (path, flow and destination filled in
    /// later).
    fn app_schedule(&mut self, span: Range<usize>, me: &str, d: &AppDef) -> Option<AppSpec> {
        let c = &mut self.c;
        let open = duration_or(
            c,
            span.clone(),
            &format!("{me}: open_at"),
            &d.open_at,
            Duration::ZERO,
            START_RANGE,
        );
        let close = match &d.close_at {
            None => Some(None),
            Some(s) => {
                duration_in(c, span.clone(), &format!("{me}: close_at"), s, START_RANGE).map(Some)
            }
        };
        let interval = duration_or(
            c,
            span.clone(),
            &format!("{me}: interval"),
            &d.interval,
            Duration::from_millis(1),
            INTERVAL_RANGE,
        );
        let refresh = match &d.refresh {
            None => Some(None),
            Some(s) => duration_in(
                c,
                span.clone(),
                &format!("{me}: refresh"),
                s,
                INTERVAL_RANGE,
            )
            .map(Some),
        };
        let sdu = d.sdu.unwrap_or(1000);
        if !(aurora_net::tag::TAG_LEN..=65535).contains(&sdu) {
            c.at(
                span.clone(),
                format!("{me}: sdu {sdu} is outside 8 to 65535 bytes"),
            );
        }
        let count = d.count.unwrap_or(0);
        if count > MAX_FLOW_COUNT {
            c.at(
                span.clone(),
                format!("{me}: count {count} is outside 0 to {MAX_FLOW_COUNT}"),
            );
        }
        let (Some(open), Some(close), Some(interval), Some(refresh)) =
            (open, close, interval, refresh)
        else {
            return None;
        };
        if close.is_some_and(|t| t <= open) {
            c.at(span, format!("{me}: close_at must be after open_at"));
            return None;
        }
        Some(AppSpec {
            name: d.name.clone(),
            to: String::new(),
            flow: 0,
            path: Path {
                first_bits: 0,
                hops: Vec::new(),
                last_link: Link(0),
            },
            open_at: Instant::ZERO + open,
            close_at: close.map(|t| Instant::ZERO + t),
            sdu,
            count,
            interval,
            refresh,
        })
    }
}
