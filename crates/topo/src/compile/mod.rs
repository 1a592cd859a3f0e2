//! Reading a topology file: a sequence of steps, one per concern, each
//! checking its part of the file and recording what it learnt in a
//! [`Reader`] the later steps read. Every problem any step finds is
//! recorded with its place; the network is built only if there are none.
//!
//! | step | file | what it checks and compiles |
//! |------|------|-----------------------------|
//! | [`Reader::node_kinds`], [`Reader::node_names`] | `nodes.rs` | switches, relaying links, hosts, routers: kinds, ports, names |
//! | [`Reader::ip_settings`], [`Reader::atmarp_servers`], [`Reader::ip_hosts_beside_vunet`] | `ip.rs` | IP hosts' and routers' settings, addresses, ATMARP |
//! | [`Reader::links`] | `links.rs` | links: ends, rates, delays, buffers, transports |
//! | [`Reader::avlinks`] | `avlink.rs` | AVlinks: settings, links, peers, the WAN's cross-connects |
//! | [`Reader::pvcs`] | `pvc.rs` | PVCs: paths, hops, VCs, table entries |
//! | [`Reader::ports`] | `qos.rs` | output ports' disciplines, buffers and PDU discard |
//! | [`Reader::flows`], [`Reader::pings`] | `traffic.rs` | flows and pings on PVCs |
//! | [`Reader::tcp`] | `tcp.rs` | TCP transfers: their ends, amounts and settings |
//! | [`Reader::video_nodes`], [`Reader::video`] | `video.rs` | cameras and viewers: sources, requests, host models, their circuits |
//! | [`Reader::stripes`] | `stripe.rs` | striped VCs: their ends, member PVCs, unit, method, schedule and limits |
//! | [`Reader::apps`] | `signal.rs`, `signal/hosts.rs` | applications: their hosts, routes, schedules; `[signal] hosts`; each signalling host's paths to the others; relays' lifetimes and restarts |
//! | [`Reader::splitter_nodes`], [`Reader::splitters`] | `splitter.rs` | striping relay pairs: their relays, stripe links, settings, and the PVCs they stripe |
//! | [`Reader::atomic`] | `atomic.rs` | ATOMIC meshes, hosts, cables and flows |
//! | [`Reader::blueprint`] | `build.rs` | the nodes, links and circuits, built |
//!
//! Helpers both halves of a file use (names, durations, counts, UDP
//! addresses) are in `checks.rs`.

use std::collections::BTreeMap;
use std::ops::Range;

use aurora_engine::LinkSpec;
use aurora_ip::node::IpConfig;
use aurora_net::oam::Ping;
use aurora_net::traffic::Flow;
use aurora_net::PortId;

use crate::pvc::{Entries, Kind};
use crate::{escape, AtomicNet, File, Problem, Problems, PvcDef, Transport, TunSpec};

mod atomic;
mod avlink;
mod build;
mod checks;
mod ip;
mod links;
mod nodes;
mod pvc;
mod qos;
mod signal;
mod splitter;
mod stripe;
mod tcp;
mod traffic;
mod video;

pub(crate) use avlink::{wan_hops, WanPair};
pub(crate) use checks::plain_name;
use checks::Names;
use links::Join;
use pvc::RoutedPvc;

/// Parses the TOML of a topology file; a syntax error, or a part or field
/// Aurora does not know, is the one problem reported.
pub(crate) fn parse(text: &str) -> Result<File, Problems> {
    toml::from_str(text).map_err(|e| {
        let mut c = Ctx::new(text);
        c.at(e.span().unwrap_or(0..0), e.message().to_string());
        Problems(c.problems)
    })
}

impl File {
    /// True if the file has any ATOMIC part: meshes, ATOMIC hosts, cables
    /// or ATOMIC flows.
    pub(crate) fn has_atomic_parts(&self) -> bool {
        !self.mesh.is_empty()
            || !self.atomic_host.is_empty()
            || !self.cable.is_empty()
            || !self.atomic_flow.is_empty()
    }
}

/// Problems found so far in one file, each with its place.
pub(crate) struct Ctx<'a> {
    text: &'a str,
    problems: Vec<Problem>,
    /// Where each line starts, found when first needed.
    lines: Vec<usize>,
}

impl<'a> Ctx<'a> {
    fn new(text: &'a str) -> Self {
        Ctx {
            text,
            problems: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// The 1-based line and column (in bytes) of byte `at`.
    fn place(&mut self, at: usize) -> (usize, usize) {
        if self.lines.is_empty() {
            self.lines.push(0);
            self.lines
                .extend(self.text.match_indices('\n').map(|(i, _)| i + 1));
        }
        let at = at.min(self.text.len());
        let line = self.lines.partition_point(|&start| start <= at);
        (line, at - self.lines[line - 1] + 1)
    }

    /// Records a problem at `span`. Control characters in `msg` (a name
    /// or value from the file echoed back) are written escaped.
    fn at(&mut self, span: Range<usize>, msg: String) {
        let (line, col) = self.place(span.start);
        let msg = escape(&msg);
        self.problems.push(Problem { line, col, msg });
    }
}

/// One end of a checked link: node name and port.
type End = (String, PortId);

/// What the steps share while reading one file: the file, the problems
/// found so far, and what each step has learnt that later steps use.
pub(crate) struct Reader<'f> {
    file: &'f File,
    c: Ctx<'f>,

    // Nodes.
    /// Each cell node's place, name and kind, in the order the names are
    /// checked: switches, hosts, relaying links, routers.
    declared: Vec<(Range<usize>, &'f str, Kind)>,
    /// Each cell node's kind, by name.
    kinds: BTreeMap<String, Kind>,
    /// The cell nodes' names (which ATOMIC names must not repeat).
    node_names: Names,

    // IP.
    /// The settings of each IP host and router, and a host's TUN.
    ipcfg: BTreeMap<String, (IpConfig, Option<TunSpec>)>,

    // Links.
    /// (node, next node) -> each link from one to the other.
    joins: BTreeMap<(String, String), Vec<Join>>,
    /// Links whose ends, rate and delay are good, in file order, with how
    /// their ends meet as separate processes.
    links: Vec<(End, End, LinkSpec, Option<Transport>)>,

    // PVCs.
    /// What the PVCs put into the switches, relays and hosts.
    entries: Entries,
    /// PVCs routed without problems, in file order.
    pvcs: Vec<RoutedPvc<'f>>,
    /// Every PVC name in the file, routed or not.
    pvc_names: Names,
    /// Routed PVCs by name (the first, if a name is used twice).
    by_name: BTreeMap<&'f str, usize>,
    /// Each output port a routed PVC leaves through: the PVC's VC on
    /// that link, and the PVC.
    crossing: BTreeMap<End, Vec<(aurora_wire::cell::VcId, &'f PvcDef)>>,

    // Ports and contracts.
    /// Ports under a discipline.
    port_plans: Vec<crate::qos::PortPlan>,
    /// Routed PVCs' contracts, by index.
    contracts: BTreeMap<usize, qos::PvcContract>,

    // Traffic.
    /// Flows, each with its PVC's name.
    flows: Vec<(&'f str, Flow)>,
    /// Pings, each with its PVC's name.
    pings: Vec<(&'f str, Ping)>,

    // TCP.
    /// TCP transfers without problems, in file order.
    tcp_plans: Vec<tcp::TcpPlan>,

    // Video.
    /// Cameras without problems, in file order.
    cameras: Vec<video::CameraPlan>,
    /// Viewers without problems, in file order.
    viewers: Vec<video::ViewerPlan>,
    // Striping.
    /// Striped VCs without problems, in file order.
    stripe_plans: Vec<stripe::StripePlan>,
    /// Splitter pairs without problems, in file order.
    splitter_plans: Vec<splitter::SplitterPlan>,

    // Signalling.
    /// Applications, signalling hosts and what relays are given.
    signalling: signal::Signalling,

    // ATOMIC.
    /// The ATOMIC part, once compiled.
    atomic: Option<AtomicNet>,
}

impl<'f> Reader<'f> {
    /// A reader of `file`, which was parsed from `text`.
    pub(crate) fn new(text: &'f str, file: &'f File) -> Self {
        Reader {
            file,
            c: Ctx::new(text),
            declared: Vec::new(),
            kinds: BTreeMap::new(),
            node_names: Names::new("name"),
            ipcfg: BTreeMap::new(),
            joins: BTreeMap::new(),
            links: Vec::new(),
            entries: Entries::default(),
            pvcs: Vec::new(),
            pvc_names: Names::new("PVC name"),
            by_name: BTreeMap::new(),
            crossing: BTreeMap::new(),
            port_plans: Vec::new(),
            contracts: BTreeMap::new(),
            flows: Vec::new(),
            pings: Vec::new(),
            tcp_plans: Vec::new(),
            cameras: Vec::new(),
            viewers: Vec::new(),
            stripe_plans: Vec::new(),
            signalling: signal::Signalling::default(),
            splitter_plans: Vec::new(),
            atomic: None,
        }
    }

    /// Records a problem about the file as a whole (line 1, column 1).
    pub(crate) fn refuse(&mut self, msg: &str) {
        self.c.at(0..0, msg.into());
    }

    /// The steps for the cell parts of the file, in order. Names are
    /// checked after the IP settings so that the problems of one host or
    /// router come in the order they always have.
    pub(crate) fn cells(&mut self) {
        self.node_kinds();
        self.avlink_kinds();
        self.ip_settings();
        self.video_nodes();
        self.splitter_nodes();
        self.node_names();
        self.links();
        self.avlinks();
        self.pvcs();
        self.contracts();
        self.ports();
        self.flows();
        self.pings();
        self.tcp();
        self.video();
        self.stripes();
        self.apps();
        self.splitters();
        self.atmarp_servers();
        self.ip_hosts_beside_vunet();
    }

    /// The problems found, in file order, if there are any.
    fn problems(&mut self) -> Result<(), Problems> {
        if self.c.problems.is_empty() {
            return Ok(());
        }
        let mut problems = std::mem::take(&mut self.c.problems);
        problems.sort_by_key(|p| (p.line, p.col));
        Err(Problems(problems))
    }
}
