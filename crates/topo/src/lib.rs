//! Topology files: a cell network described in TOML, checked all at once
//! (every problem reported with its line and column), and compiled into
//! nodes, switch translation tables and flows.
//!
//! ```toml
//! [[switch]]
//! name = "sw1"
//! ports = 4
//! # kind = "vunet"          # a VuNet switch: routes on the GFC bits (at most 16 ports)
//! # worker = 1              # any node: run it on this worker (aurora run --workers)
//!
//! [[relay]]                 # a VuNet relaying link: two ports, "r1:0" and "r1:1";
//! name = "r1"               # remaps VCIs and writes the next VuNet switch's bits
//! mgmt_ports = [0]          # optional: ports whose control cells are trusted
//! key = "secret"            # optional: control cells tagged under this key are too
//!
//! [[avlink]]               # an AVlink (see `aurora_net::avlink`): port 0 on a VuNet
//! name = "av1"              # switch, port 1 on an ATM switch of the WAN
//! key = "secret"            # as a relay's; relay ids: relays in file order, then AVlinks
//! peer = "av2"              # the far AVlink, named on one of the two only, with
//! wan = ["w1", "w2"]        # the WAN's ATM switches from this one to the peer
//! # wan_vpi = 1             # the pool's VPI; the pool is VCIs 32.. (pool = 64 VCs)
//! # pool = 64               # and the control VC wan_vpi.30 (control_vci = 30),
//! # control_vci = 30        # all cross-connected both ways by the compiler
//!
//! [[host]]
//! name = "h1"
//!
//! [[link]]                  # hosts have one port; name a switch port as "sw1:2"
//! a = "h1"
//! b = "sw1:0"
//! rate = "oc3"              # oc3 | oc12 | oc48 | oc192 | oc768 | cells per second
//! delay = "5us"             # ns, us, ms or s
//! buffer = 4096             # cells in each direction's transmit buffer
//! loss = 0.0                # per-cell probabilities, seeded per direction
//! bit_error = 0.0
//! udp_a = "127.0.0.1:7001"  # optional, both or neither: the UDP addresses the
//! udp_b = "127.0.0.1:7002"  # two ends bind when each node is its own process
//! # shm = "aurora-l1"      # or: shared-memory rings /dev/shm/aurora-l1-ab and -ba
//!
//! [[pvc]]                   # an end-to-end path; Aurora fills in the tables (see `pvc`)
//! name = "h1-to-h3"
//! path = ["h1", "sw1", "sw2", "h3"]
//! from_vc = "0.100"         # optional: the VC at the sender (else chosen)
//! to_vc = "0.300"           # optional: the VC at the receiver (else chosen)
//!
//! [[flow]]                  # at most one per PVC (sequence numbers are per VC)
//! pvc = "h1-to-h3"
//! sdu = 9180                # bytes, 8 to 65535
//! count = 100
//! interval = "2ms"
//! start = "0ms"             # optional
//!
//! [[ping]]                  # OAM F5 loopback along a PVC, timed
//! pvc = "h1-to-h3"
//! count = 10
//! interval = "1ms"
//! segment = false           # true: answered by the first switch instead
//!
//! [[tcp]]                   # a TCP transfer between two IP hosts (see `tcp`)
//! name = "bulk"
//! from = "h1"
//! to = "h3"
//! bytes = "20MB"            # or duration = "5s"
//!
//! [[camera]]                # a Vidboard camera (see `video`)
//! name = "cam1"
//!
//! [[viewer]]                # a workstation watching it, closed loop or a stream
//! name = "v1"
//! camera = "cam1"
//! [[stripe]]                # one logical VC striped over member PVCs (see `stripe`)
//! name = "wide"
//! from = "h1"
//! to = "h3"
//! pvcs = ["m0", "m1", "m2", "m3"]
//! unit = "cell"             # cell | pdu | ip
//! sync = "marker"           # none | sequence | marker
//! sdu = 9180
//! count = 1000              # interval = "100us" to pace; left out: greedy
//!
//! [[app]]                   # an application that opens its own VC (see `signal`)
//! name = "video"
//! host = "h1"
//! to = "h3"
//! open_at = "1ms"
//! close_at = "80ms"
//! [[splitter]]              # two striping relays inside the network (see `stripe`)
//! name = "split"
//! relays = ["split-a", "split-b"]
//! stripes = 4               # ports 1..=4 of each; PVCs crossing from one to the other are striped
//! ```

use std::fmt;
use std::net::SocketAddr;

use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_net::oam::Ping;
use aurora_net::traffic::TrafficHost;
use aurora_net::PortId;
use aurora_time::{Duration, Instant};
use aurora_wire::cell::VcId;
use serde::Deserialize;

pub mod atomic;
mod compile;
mod ip;
mod mixed;
mod process;
mod pvc;
pub mod qos;
pub mod signal;
pub mod stripe;
pub mod tcp;
pub mod video;
pub use atomic::AtomicNet;
pub use ip::{default_atm, parse_atm, parse_cidr, parse_route, TunSpec};
pub use mixed::{AtomicPart, MixedProcess};
pub use process::{InnerLink, Member, NodePort, NodeProcess, SHM_WAIT};
use toml::Spanned;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// Switches.
    #[serde(default)]
    pub switch: Vec<Spanned<SwitchDef>>,
    /// Hosts.
    #[serde(default)]
    pub host: Vec<Spanned<HostDef>>,
    /// VuNet relaying links (two-port nodes).
    #[serde(default)]
    pub relay: Vec<Spanned<RelayDef>>,
    /// IP routers.
    #[serde(default)]
    pub router: Vec<Spanned<RouterDef>>,
    /// Links.
    #[serde(default)]
    pub link: Vec<Spanned<LinkDef>>,
    /// Permanent virtual circuits.
    #[serde(default)]
    pub pvc: Vec<Spanned<PvcDef>>,
    /// Traffic.
    #[serde(default)]
    pub flow: Vec<Spanned<FlowDef>>,
    /// OAM pings.
    #[serde(default)]
    pub ping: Vec<Spanned<PingDef>>,
    /// ATOMIC mesh boards.
    #[serde(default)]
    pub mesh: Vec<Spanned<atomic::MeshDef>>,
    /// ATOMIC hosts.
    #[serde(default)]
    pub atomic_host: Vec<Spanned<atomic::AtomicHostDef>>,
    /// ATOMIC cables.
    #[serde(default)]
    pub cable: Vec<Spanned<atomic::CableDef>>,
    /// IP flows between ATOMIC hosts.
    #[serde(default)]
    pub atomic_flow: Vec<Spanned<atomic::AtomicFlowDef>>,
    /// Output ports under a discipline other than FIFO, or with PDU
    /// discard.
    #[serde(default)]
    pub port: Vec<Spanned<PortDef>>,
    /// TCP transfers between IP hosts.
    #[serde(default)]
    pub tcp: Vec<Spanned<tcp::TcpDef>>,
    /// Vidboard cameras.
    #[serde(default)]
    pub camera: Vec<Spanned<video::CameraDef>>,
    /// Viewers of the cameras.
    #[serde(default)]
    pub viewer: Vec<Spanned<video::ViewerDef>>,
    /// Striped VCs between hosts.
    #[serde(default)]
    pub stripe: Vec<Spanned<stripe::StripeDef>>,
    /// Signalling settings for the applications.
    #[serde(default)]
    pub signal: Option<Spanned<signal::SignalDef>>,
    /// Applications that open and close their own VCs.
    #[serde(default)]
    pub app: Vec<Spanned<signal::AppDef>>,
    /// Relaying links restarted mid-run.
    #[serde(default)]
    pub restart: Vec<Spanned<signal::RestartDef>>,
    /// Pairs of striping relays inside the network.
    #[serde(default)]
    pub splitter: Vec<Spanned<stripe::SplitterDef>>,
    /// AVlinks: bridges from a VuNet to an ATM WAN.
    #[serde(default)]
    pub avlink: Vec<Spanned<AvlinkDef>>,
}

/// An AVlink (`[[avlink]]`): a two-port bridge, port 0 on a VuNet switch,
/// port 1 on an ATM switch of the WAN. Towards the VuNet it is a relaying
/// link (its relay id follows the file's relays: the `j`-th AVlink has id
/// relays + `j`); the WAN's switches cross-connect its control VC and a
/// pool of data VCs to its peer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AvlinkDef {
    /// Its name.
    pub name: String,
    /// The worker this node runs on (see [`SwitchDef::worker`]).
    #[serde(default)]
    pub worker: Option<u16>,
    /// Trust control cells from the VuNet side as a management port's.
    #[serde(default)]
    pub mgmt_vunet: bool,
    /// A key (its UTF-8 bytes) under which tagged control cells are
    /// accepted from either side.
    #[serde(default)]
    pub key: Option<String>,
    /// The far AVlink; name it on one of the two.
    #[serde(default)]
    pub peer: Option<String>,
    /// The WAN's ATM switches from this AVlink to its peer, in order.
    #[serde(default)]
    pub wan: Vec<String>,
    /// The VPI of the pool and the control VC on the WAN (default 1).
    #[serde(default)]
    pub wan_vpi: Option<u16>,
    /// How many data VCs the pool has, VCIs 32 up (default 64).
    #[serde(default)]
    pub pool: Option<u16>,
    /// The control VC's VCI (default 30, below the pool).
    #[serde(default)]
    pub control_vci: Option<u16>,
}

/// An output port's discipline and buffer (`[[port]]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortDef {
    /// The port, `switch:port` (or a host's name: its one port).
    pub at: String,
    /// `fifo`, `priority`, `drr`, `wfq`, `wf2q+`, `hwfq` or `flat`.
    #[serde(default)]
    pub discipline: Option<String>,
    /// Cells the port holds in all (default: its link's buffer).
    #[serde(default)]
    pub buffer: Option<usize>,
    /// Cells one queue holds (default: the port's buffer).
    #[serde(default)]
    pub queue_buffer: Option<usize>,
    /// `tail` (default), `ppd` or `epd`.
    #[serde(default)]
    pub discard: Option<String>,
    /// With `discard = "epd"`: from this many waiting cells on, new PDUs
    /// are refused whole.
    #[serde(default)]
    pub epd: Option<usize>,
    /// With `ppd` or `epd`: from this many waiting cells on, CLP=1 cells
    /// are refused.
    #[serde(default)]
    pub clp1: Option<usize>,
    /// `flat`: how often the leaves' weights are recomputed (default 0:
    /// at every cell).
    #[serde(default)]
    pub update_period: Option<String>,
    /// Length of the slices of time the report counts service in
    /// (default 1ms).
    #[serde(default)]
    pub bin: Option<String>,
    /// `hwfq` and `flat`: the tree of service classes.
    #[serde(default)]
    pub class: Vec<ClassDef>,
}

/// A service class of a port's tree (`[[port.class]]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassDef {
    /// Its name.
    pub name: String,
    /// Its parent class (default: the root, the whole link).
    #[serde(default)]
    pub parent: Option<String>,
    /// Its share of its parent, more than 0 and at most 1.
    pub share: f64,
}

/// A switch.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchDef {
    /// Its name.
    pub name: String,
    /// The worker this node runs on (numbered from 0, taken modulo the
    /// number of workers); unpinned nodes go where the planner puts them.
    #[serde(default)]
    pub worker: Option<u16>,
    /// Number of ports.
    pub ports: u16,
    /// `"atm"` (translation tables; the default) or `"vunet"` (routes on
    /// the GFC bits a host or relaying link wrote; at most 16 ports).
    #[serde(default)]
    pub kind: Option<String>,
}

/// A VuNet relaying link: a two-port node that remaps VCIs and writes the
/// routing bits for the VuNet switch after it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayDef {
    /// Its name.
    pub name: String,
    /// The worker this node runs on (numbered from 0, taken modulo the
    /// number of workers); unpinned nodes go where the planner puts them.
    #[serde(default)]
    pub worker: Option<u16>,
    /// Ports (0 or 1) whose control cells are trusted.
    #[serde(default)]
    pub mgmt_ports: Vec<u16>,
    /// A key (its UTF-8 bytes) under which control cells from any port are
    /// accepted if their HMAC tag checks.
    #[serde(default)]
    pub key: Option<String>,
    /// How long an entry written by control cells lasts after its owner
    /// last wrote or read it (default: for ever).
    #[serde(default)]
    pub lifetime: Option<String>,
}

/// A host (one port): a traffic host, or with `ip` a Classical IP host
/// whose local side is a TUN interface when it runs as its own process.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDef {
    /// Its name.
    pub name: String,
    /// The worker this node runs on (numbered from 0, taken modulo the
    /// number of workers); unpinned nodes go where the planner puts them.
    #[serde(default)]
    pub worker: Option<u16>,
    /// Number of ports (default 1); more than one only for the ends of
    /// striped VCs, whose links are then named `host:port`.
    #[serde(default)]
    pub ports: Option<u16>,
    /// Its address and subnet, as `10.1.0.1/24`.
    #[serde(default)]
    pub ip: Option<String>,
    /// Static routes, as `10.2.0.0/16 via 10.1.0.254` or
    /// `default via 10.1.0.254`.
    #[serde(default)]
    pub routes: Vec<String>,
    /// The TUN interface's name (default `aur-NAME`, cut to 15 characters).
    #[serde(default)]
    pub tun: Option<String>,
    /// The network namespace to make the TUN interface in (see
    /// [`TunSpec::netns`]).
    #[serde(default)]
    pub netns: Option<String>,
    /// MTU (default 9180).
    #[serde(default)]
    pub mtu: Option<usize>,
    /// `llc` (LLC/SNAP, the default) or `vcmux` (VC multiplexing, IPv4 only).
    #[serde(default)]
    pub encap: Option<String>,
    /// This node's ATM address: an NSAP address in hex, dots allowed
    /// (default: one made from the node's name).
    #[serde(default)]
    pub atm: Option<String>,
    /// Serve ATMARP (RFC 2225) for this node's subnets.
    #[serde(default)]
    pub atmarp_server: bool,
    /// The PVC (ending here) to this subnet's ATMARP server: register there
    /// and ask it for unknown addresses.
    #[serde(default)]
    pub atmarp: Option<String>,
    /// Ask who is at the far end of each PVC by InATMARP (default true).
    #[serde(default)]
    pub inarp: Option<bool>,
}

/// An IP router: ATM ports, each in its own logical IP subnet.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterDef {
    /// Its name.
    pub name: String,
    /// The worker this node runs on (numbered from 0, taken modulo the
    /// number of workers); unpinned nodes go where the planner puts them.
    #[serde(default)]
    pub worker: Option<u16>,
    /// Number of ports.
    pub ports: u16,
    /// Each port's address and subnet, in port order.
    pub ip: Vec<String>,
    /// Static routes, as for hosts.
    #[serde(default)]
    pub routes: Vec<String>,
    /// MTU (default 9180).
    #[serde(default)]
    pub mtu: Option<usize>,
    /// `llc` or `vcmux`.
    #[serde(default)]
    pub encap: Option<String>,
    /// This node's ATM address: an NSAP address in hex, dots allowed
    /// (default: one made from the node's name).
    #[serde(default)]
    pub atm: Option<String>,
    /// Serve ATMARP (RFC 2225) for this node's subnets.
    #[serde(default)]
    pub atmarp_server: bool,
    /// The PVC (ending here) to this subnet's ATMARP server: register there
    /// and ask it for unknown addresses.
    #[serde(default)]
    pub atmarp: Option<String>,
    /// Ask who is at the far end of each PVC by InATMARP (default true).
    #[serde(default)]
    pub inarp: Option<bool>,
}

fn default_rate() -> String {
    "oc3".into()
}
fn default_buffer() -> usize {
    4096
}

/// A link between two ports.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDef {
    /// One end: `host` or `switch:port`.
    pub a: String,
    /// The other end.
    pub b: String,
    /// Line rate name or cells per second.
    #[serde(default = "default_rate")]
    pub rate: String,
    /// Propagation delay.
    #[serde(default)]
    pub delay: Option<String>,
    /// Transmit buffer per direction, in cells.
    #[serde(default = "default_buffer")]
    pub buffer: usize,
    /// Probability a cell is lost.
    #[serde(default)]
    pub loss: f64,
    /// Probability a cell gets one flipped bit.
    #[serde(default)]
    pub bit_error: f64,
    /// UDP address end `a` binds when run by `aurora node`.
    #[serde(default)]
    pub udp_a: Option<String>,
    /// UDP address end `b` binds when run by `aurora node`.
    #[serde(default)]
    pub udp_b: Option<String>,
    /// Shared-memory rings (`PATH-ab`, `PATH-ba`) when run by `aurora node`
    /// on one machine: each end creates the ring it reads.
    #[serde(default)]
    pub shm: Option<String>,
}

/// How a link's two ends meet when each node is its own process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UDP, each end binding its address.
    Udp(SocketAddr, SocketAddr),
    /// Shared-memory rings `PATH-ab` (a to b) and `PATH-ba`.
    Shm(std::path::PathBuf),
}

/// A PVC as an end-to-end path of node names.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PvcDef {
    /// Its name.
    pub name: String,
    /// Host, switches..., host.
    pub path: Vec<String>,
    /// VC at the sending host.
    #[serde(default)]
    pub from_vc: Option<String>,
    /// VC at the receiving host.
    #[serde(default)]
    pub to_vc: Option<String>,
    /// Its weight at every `drr`, `wfq` and `wf2q+` port it crosses,
    /// 1 to 1,000,000 (default 1).
    #[serde(default)]
    pub weight: Option<u32>,
    /// Its level at every `priority` port it crosses, 0 (the highest) to
    /// 7 (default 7).
    #[serde(default)]
    pub priority: Option<u8>,
    /// Its leaf class at every `hwfq` and `flat` port it crosses.
    #[serde(default)]
    pub class: Option<String>,
    /// Its traffic contract, as linux-atm QoS text (`cbr:pcr=100k,cdv=250`,
    /// `vbr:pcr=..,scr=..,mbs=..`, `ubr`).
    #[serde(default)]
    pub contract: Option<String>,
    /// Whether the sending host shapes its flow to the contract (default
    /// true).
    #[serde(default)]
    pub shape: Option<bool>,
    /// What the first switch does with cells that break the contract:
    /// `tag` (set CLP), `drop`, or `none` (the default: no policing).
    #[serde(default)]
    pub police: Option<String>,
}

/// A flow of AAL5 PDUs on a PVC.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowDef {
    /// The PVC.
    pub pvc: String,
    /// SDU size in bytes.
    pub sdu: usize,
    /// Number of PDUs.
    pub count: u64,
    /// Time between PDUs.
    pub interval: String,
    /// Time of the first PDU.
    #[serde(default)]
    pub start: Option<String>,
}

/// OAM F5 loopback requests sent by a PVC's sending host along it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PingDef {
    /// The PVC.
    pub pvc: String,
    /// Number of requests.
    pub count: u64,
    /// Time between requests.
    pub interval: String,
    /// Time of the first request.
    #[serde(default)]
    pub start: Option<String>,
    /// Segment loopback (answered by the first switch) instead of
    /// end-to-end (answered by the receiving host).
    #[serde(default)]
    pub segment: bool,
}

/// One problem in a topology file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, escape(&self.msg))
    }
}

/// Every problem found, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

/// A PVC after compilation.
#[derive(Clone, Debug)]
pub struct PvcInfo {
    /// Its name.
    pub name: String,
    /// Sending host.
    pub from: NodeId,
    /// VC it sends on.
    pub from_vc: VcId,
    /// Receiving host.
    pub to: NodeId,
    /// VC it arrives on.
    pub to_vc: VcId,
    /// Its hops from the sender, in order.
    pub hops: Vec<PvcHop>,
    /// Index of each of its flows in the sending host.
    pub flows: Vec<usize>,
    /// Its pings: index in the sending host, and whether end-to-end.
    pub pings: Vec<(usize, bool)>,
    /// Its traffic contract, if it has one.
    pub contract: Option<aurora_tm::contract::Contract>,
    /// Where it is policed: the first switch, its input port and the VC
    /// there.
    pub policed_at: Option<(NodeId, PortId, VcId)>,
}

/// One hop of a PVC, in the direction from its sender: the node and port
/// its cells leave by, the node and port they arrive by, and the VC in
/// their header on the way (cells coming back use the same VC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PvcHop {
    /// Sending node and port.
    pub from: (NodeId, PortId),
    /// Receiving node and port.
    pub to: (NodeId, PortId),
    /// The VC on the link.
    pub vc: VcId,
}

/// One end of a link: node name, node, port.
pub type LinkEnd = (String, NodeId, PortId);

/// A network ready to run, on an engine of frame type `F`: cells, or
/// [`aurora_engine::carry::Unit`] for a network that holds ATOMIC frames
/// too.
pub struct Network<F: aurora_net::Frame = aurora_wire::CellBytes> {
    /// The engine holding every node and link.
    pub sim: Engine<F>,
    /// Host names and ids.
    pub hosts: Vec<(String, NodeId)>,
    /// Switching nodes (ATM and VuNet switches, relaying links): names,
    /// ids and port counts.
    pub switches: Vec<(String, NodeId, u16)>,
    /// IP routers: names, ids and port counts.
    pub routers: Vec<(String, NodeId, u16)>,
    /// IP hosts and routers: names and ids.
    pub ip_nodes: Vec<(String, NodeId)>,
    /// Links, as their two ends.
    pub links: Vec<(LinkEnd, LinkEnd)>,
    /// PVCs.
    pub pvcs: Vec<PvcInfo>,
    /// Nodes the file pins to a worker, with the worker.
    pub pins: Vec<(NodeId, u16)>,
    /// The ATOMIC LAN, if the network holds one.
    pub atomic: Option<mixed::AtomicPart>,
    /// IP hosts' TUN interfaces (cell and ATOMIC hosts), by node: made by
    /// `aurora node`, and by `aurora run` for those given a network
    /// namespace.
    pub tuns: Vec<(NodeId, TunSpec)>,
    /// Output ports under a discipline: the node and the plan.
    pub ports: Vec<(NodeId, qos::PortPlan)>,
    /// TCP transfers (`[[tcp]]`), in file order.
    pub tcp: Vec<tcp::TcpInfo>,
    /// Cameras and viewers (`[[camera]]`, `[[viewer]]`).
    pub video: video::VideoInfo,
    /// Striped VCs (`[[stripe]]`), in file order.
    pub stripes: Vec<stripe::StripeInfo>,
}

impl<F: aurora_net::Frame> Network<F> {
    /// Splits the network between at most `workers` workers: the file's
    /// pins kept, the rest planned by the engine (cutting no link under
    /// `min_cut`).
    pub fn split(&mut self, workers: usize, min_cut: Duration) -> Result<(), String> {
        let pins: Vec<(u32, u32)> = self
            .pins
            .iter()
            .map(|&(n, w)| (n.0, u32::from(w)))
            .collect();
        let home = self.sim.plan_pinned(workers, min_cut, &pins);
        self.sim.partition(&home).map_err(|e| e.to_string())
    }
}

/// `s` with every control character (NUL, escape, newline...) written as
/// an escape such as `\u{0}` or `\n`, so a name from a file is safe to
/// print on a terminal.
pub fn escape(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for ch in s.chars() {
        if ch.is_control() {
            out.extend(ch.escape_default());
        } else {
            out.push(ch);
        }
    }
    out
}

/// The largest topology file read when `AURORA_MAX_TOPOLOGY_BYTES` does
/// not say otherwise: 16 MiB.
pub const MAX_TOPOLOGY_BYTES: u64 = 16 << 20;

/// Reads the topology file at `path`: at most [`MAX_TOPOLOGY_BYTES`] (or
/// the number of bytes in the environment variable
/// `AURORA_MAX_TOPOLOGY_BYTES`), and only UTF-8 text. A larger file is
/// refused after reading one byte more than the limit, so `/dev/zero` or
/// a huge file costs no more than that; a byte that is not UTF-8 is
/// reported with its line and column.
pub fn read_topology(path: &std::path::Path) -> Result<String, String> {
    let cap = match std::env::var("AURORA_MAX_TOPOLOGY_BYTES") {
        Err(std::env::VarError::NotPresent) => MAX_TOPOLOGY_BYTES,
        Ok(v) => v.trim().parse::<u64>().map_err(|_| {
            format!(
                "AURORA_MAX_TOPOLOGY_BYTES=\"{}\" is not a number of bytes",
                escape(&v)
            )
        })?,
        Err(std::env::VarError::NotUnicode(v)) => {
            return Err(format!(
                "AURORA_MAX_TOPOLOGY_BYTES=\"{}\" is not a number of bytes",
                escape(&v.to_string_lossy())
            ))
        }
    };
    read_topology_capped(path, cap)
}

/// [`read_topology`] with the limit given.
pub fn read_topology_capped(path: &std::path::Path, cap: u64) -> Result<String, String> {
    use std::io::Read;
    let shown = escape(&path.display().to_string());
    let cannot = |e: std::io::Error| format!("cannot read {shown}: {e}");
    let f = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    f.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > cap {
        return Err(format!(
            "{shown} is larger than {cap} bytes, the most a topology file may hold \
             (set AURORA_MAX_TOPOLOGY_BYTES to change the limit)"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let good = e.utf8_error().valid_up_to();
        let before = &bytes[..good];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = good
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        format!(
            "{shown}:{line}:{col}: byte 0x{:02x} is not UTF-8 text; a topology file must be UTF-8",
            bytes[good]
        )
    })
}

/// Parses a duration like `5us`, `2ms`, `1s`, `100ns` or `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else if t == "0" {
        ("0", 1.0)
    } else {
        return Err(format!(
            "\"{s}\" is not a duration (a number with ns, us, ms or s)"
        ));
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && (v * mult) < 9.2e18 => {
            Ok(Duration::from_nanos((v * mult).round() as i64))
        }
        Ok(v) if v < 0.0 => Err(format!("duration \"{s}\" is negative")),
        Ok(v) if !v.is_nan() => Err(format!(
            "duration \"{s}\" is longer than Aurora's clock reaches (about 292 years)"
        )),
        _ => Err(format!(
            "\"{s}\" is not a duration (a number with ns, us, ms or s)"
        )),
    }
}

/// The most ports a switch or router may have.
pub const MAX_PORTS: u16 = 4096;
/// The fastest link, in cells per second (about 424 Gbit/s).
pub const MAX_RATE: f64 = 1e9;
/// The slowest link, in cells per second.
pub const MIN_RATE: f64 = 1.0;
/// The longest link delay.
pub const MAX_DELAY: Duration = Duration::from_secs(10);
/// The largest transmit buffer, in cells.
pub const MAX_BUFFER: usize = 1 << 20;
/// The most PDUs (or packets) a flow may send.
pub const MAX_FLOW_COUNT: u64 = 1_000_000_000;
/// The most requests a ping may send.
pub const MAX_PING_COUNT: u64 = 1_000_000;
/// The longest time between a flow's PDUs or a ping's requests.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);
/// The latest start of a flow or ping.
pub const MAX_START: Duration = Duration::from_secs(86_400);
/// The largest declared bandwidth of an ATOMIC flow, kb/s.
pub const MAX_KBPS: u32 = 100_000_000;

/// True for a VC no PVC may use: VCIs 0 to 31 are pre-assigned (unassigned
/// and idle cells, signalling, F4 OAM on VCI 3 and 4 in every virtual path,
/// resource management, ILMI, PNNI, and VuNet's control cells on 30), as
/// linux-atm and the ATM Forum's UNI keep them.
pub fn is_reserved_vc(vc: VcId) -> bool {
    vc.vci < aurora_wire::cell::VCI_FIRST_USER
}

/// Parses a line rate name or a number of cells per second.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let named = match s.trim().to_ascii_lowercase().as_str() {
        "oc3" | "oc3c" => Some(353_207.5),
        "oc12" | "oc12c" => Some(1_412_830.0),
        "oc48" | "oc48c" => Some(5_651_320.0),
        "oc192" | "oc192c" => Some(22_605_280.0),
        "oc768" | "oc768c" => Some(90_421_120.0),
        _ => None,
    };
    if let Some(r) = named {
        return Ok(r);
    }
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("rate \"{s}\" is not oc3, oc12, oc48, oc192, oc768 or a positive number of cells per second")),
    }
}

/// Where a link's shared-memory rings live: a plain name goes in /dev/shm;
/// a path must be in /dev/shm too, since a process replaces any old ring
/// file at that place.
pub fn shm_path(s: &str) -> Result<std::path::PathBuf, String> {
    let name = s.strip_prefix("/dev/shm/").unwrap_or(s);
    if compile::plain_name(name) {
        Ok(std::path::Path::new("/dev/shm").join(name))
    } else {
        Err(format!(
            "shm \"{s}\" must be a name (letters, digits, '-', '_', '.') in /dev/shm, as \"aurora-l1\""
        ))
    }
}

/// Reads a VC written `vpi.vci`.
pub fn parse_vc(s: &str) -> Result<VcId, String> {
    let (vpi, vci) = s
        .split_once('.')
        .ok_or_else(|| format!("VC \"{s}\" is not of the form vpi.vci"))?;
    let vpi: u16 = vpi
        .trim()
        .parse()
        .map_err(|_| format!("VPI in \"{s}\" is not a number"))?;
    let vci: u16 = vci
        .trim()
        .parse()
        .map_err(|_| format!("VCI in \"{s}\" is not a number up to 65535"))?;
    if vpi > 255 {
        return Err(format!("VPI {vpi} in \"{s}\" is above 255"));
    }
    Ok(VcId::new(vpi, vci))
}

/// Reads, checks and compiles a cell topology file ([`compile_cells`]) and
/// builds it in the virtual-time driver; `seed` seeds every link's random
/// stream.
pub fn load(text: &str, seed: u64) -> Result<Network, Problems> {
    compile_cells(text)?.into_sim(seed)
}

/// A node a blueprint holds: runs in either driver.
pub trait BuiltNode: aurora_engine::EngineNode {}
impl<T: aurora_engine::EngineNode> BuiltNode for T {}

/// A checked, compiled network not yet given to a driver.
pub struct Blueprint {
    /// Nodes; a node's [`NodeId`] is its position here.
    pub nodes: Vec<Box<dyn BuiltNode>>,
    /// Host names and ids.
    pub hosts: Vec<(String, NodeId)>,
    /// Switching nodes (ATM and VuNet switches, relaying links): names,
    /// ids and port counts.
    pub switches: Vec<(String, NodeId, u16)>,
    /// IP routers: names, ids and port counts.
    pub routers: Vec<(String, NodeId, u16)>,
    /// IP hosts and routers: names and ids.
    pub ip_nodes: Vec<(String, NodeId)>,
    /// Links: their two ends and the link in each direction.
    pub links: Vec<(LinkEnd, LinkEnd, LinkSpec)>,
    /// Per link, how its ends meet as separate processes.
    pub link_transport: Vec<Option<Transport>>,
    /// IP hosts' TUN interfaces (made when the host runs as its own
    /// process).
    pub tuns: Vec<(NodeId, TunSpec)>,
    /// PVCs.
    pub pvcs: Vec<PvcInfo>,
    /// Nodes the file pins to a worker, with the worker.
    pub pins: Vec<(NodeId, u16)>,
    /// The file's ATOMIC part, if it has one: then the network runs on an
    /// engine carrying units ([`Blueprint::into_mixed`],
    /// [`Blueprint::mixed_process`]).
    pub atomic: Option<AtomicNet>,
    /// Output ports under a discipline.
    pub ports: Vec<qos::PortPlan>,
    /// TCP transfers (`[[tcp]]`), in file order.
    pub tcp: Vec<tcp::TcpInfo>,
    /// Cameras and viewers (`[[camera]]`, `[[viewer]]`).
    pub video: video::VideoInfo,
    /// Striped VCs (`[[stripe]]`), in file order.
    pub stripes: Vec<stripe::StripeInfo>,
}

/// A blueprint's names and circuits, kept for reporting after a run.
pub struct BlueprintInfo {
    /// Host names and ids.
    pub hosts: Vec<(String, NodeId)>,
    /// Switching nodes (ATM and VuNet switches, relaying links): names,
    /// ids and port counts.
    pub switches: Vec<(String, NodeId, u16)>,
    /// IP routers: names, ids and port counts.
    pub routers: Vec<(String, NodeId, u16)>,
    /// IP hosts and routers: names and ids.
    pub ip_nodes: Vec<(String, NodeId)>,
    /// Links, as their two ends.
    pub links: Vec<(LinkEnd, LinkEnd)>,
    /// PVCs.
    pub pvcs: Vec<PvcInfo>,
    /// Striped VCs (`[[stripe]]`), in file order.
    pub stripes: Vec<stripe::StripeInfo>,
}

/// Reads and checks a topology file and compiles it, ready for a driver.
/// The file may hold cell parts, ATOMIC parts, or both; every problem in
/// it is reported at once, in file order. Each step of the reading checks
/// and compiles one concern (see the `compile` module).
pub fn compile(text: &str) -> Result<Blueprint, Problems> {
    let file = compile::parse(text)?;
    let mut r = compile::Reader::new(text, &file);
    // Nodes, IP settings, names, links, PVCs, flows, pings, ATMARP.
    r.cells();
    if file.has_atomic_parts() {
        r.atomic();
    }
    r.blueprint()
}

/// [`compile()`] for the drivers that run cell networks only: a file with
/// ATOMIC parts is refused.
pub fn compile_cells(text: &str) -> Result<Blueprint, Problems> {
    let file = compile::parse(text)?;
    let mut r = compile::Reader::new(text, &file);
    if file.has_atomic_parts() {
        r.refuse("this file describes an ATOMIC network (mesh, atomic_host, cable, atomic_flow); a file describes one kind of network, and ATOMIC ones run with `aurora run FILE --virtual`");
    }
    r.cells();
    r.blueprint()
}

/// Creates and configures a host's TUN interface: address, MTU, up, and
/// its routes.
pub fn open_tun(t: &TunSpec) -> Result<aurora_link::tun::Tun, String> {
    let hint = |e: std::io::Error| {
        let mut m = e.to_string();
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            m += " (TUN interfaces need root, or CAP_NET_ADMIN in the network namespace)";
        }
        m
    };
    let make = || -> Result<aurora_link::tun::Tun, String> {
        let tun = aurora_link::tun::Tun::create(&t.name).map_err(hint)?;
        // Aurora's IP nodes carry IPv4; without IPv6 on the interface the
        // kernel sends none. A kernel without IPv6 has nothing to turn off.
        let _ = tun.disable_ipv6();
        tun.configure(t.addr, t.prefix, t.mtu as u32)
            .map_err(hint)?;
        for r in &t.routes {
            tun.add_route(r.dst, r.prefix, r.gateway).map_err(hint)?;
        }
        Ok(tun)
    };
    match &t.netns {
        // Made, configured and routed inside the namespace; used from
        // anywhere afterwards.
        Some(ns) => aurora_link::netns::in_netns(ns, make).map_err(|e| e.to_string())?,
        None => make(),
    }
}

impl Blueprint {
    /// Every traffic host sends nothing more from `t` on (the end of a
    /// run's sending time; the rest of the run drains the network).
    pub fn stop_sending_at(&mut self, t: Instant) {
        for (_, id) in &self.hosts {
            let node: &mut dyn std::any::Any = self.nodes[id.0 as usize].as_mut();
            if let Some(h) = node.downcast_mut::<TrafficHost>() {
                h.stop_sending_at(t);
            } else if let Some(h) = node.downcast_mut::<aurora_stripe::StripeHost>() {
                h.stop_sending_at(t);
            }
        }
    }

    /// Adds a ping to host `host`; returns the host's id and the ping's
    /// index in it.
    pub fn add_ping(&mut self, host: &str, ping: Ping) -> Result<(NodeId, usize), String> {
        let id = self
            .hosts
            .iter()
            .find(|(n, _)| n == host)
            .map(|(_, id)| *id)
            .ok_or_else(|| format!("the topology has no host called \"{}\"", escape(host)))?;
        let node: &mut dyn std::any::Any = self.nodes[id.0 as usize].as_mut();
        let h = node
            .downcast_mut::<TrafficHost>()
            .ok_or_else(|| format!("\"{}\" is not a traffic host", escape(host)))?;
        Ok((id, h.add_ping(ping)))
    }

    /// The network in the virtual-time driver, its random streams seeded
    /// from `seed`.
    pub fn into_sim(mut self, seed: u64) -> Result<Network, Problems> {
        self.seed_tcp_hosts(seed);
        let plans = self.take_port_plans();
        let mut sim = Engine::new(seed);
        for n in self.nodes {
            sim.add_boxed(n as Box<dyn aurora_engine::EngineNode>);
        }
        let problem = |msg: String| {
            Problems(vec![Problem {
                line: 0,
                col: 0,
                msg,
            }])
        };
        let mut links = Vec::new();
        for (a, b, spec) in self.links {
            sim.connect((a.1, a.2), (b.1, b.2), spec)
                .map_err(|e| problem(e.to_string()))?;
            links.push((a, b));
        }
        let ports = qos::install(&mut sim, plans.map_err(problem)?, &|i| {
            Some(NodeId(i as u32))
        })
        .map_err(problem)?;
        Ok(Network {
            sim,
            hosts: self.hosts,
            switches: self.switches,
            routers: self.routers,
            ip_nodes: self.ip_nodes,
            links,
            pvcs: self.pvcs,
            pins: self.pins,
            atomic: None,
            tuns: self.tuns,
            ports,
            tcp: self.tcp,
            video: self.video,
            stripes: self.stripes,
        })
    }

    /// Seeds each TCP host's initial sequence numbers from `seed` and its
    /// node id, so a run's seed decides them as it does the links' loss.
    pub(crate) fn seed_tcp_hosts(&mut self, seed: u64) {
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let node: &mut dyn std::any::Any = n.as_mut();
            if let Some(h) = node.downcast_mut::<aurora_tcp::host::TcpHost>() {
                h.set_seed(tcp::host_seed(seed, NodeId(i as u32)));
            }
        }
    }
}
