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
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;

use aurora_engine::{Engine, LinkSpec, NodeId};
use aurora_net::oam::Ping;
use aurora_net::switch::AtmSwitch;
use aurora_net::traffic::{Flow, TrafficHost};
use aurora_net::vunet::{VunetLink, VunetSwitch};
use aurora_net::PortId;
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};
use serde::Deserialize;

pub mod atomic;
mod ip;
mod process;
mod pvc;
pub use atomic::{compile_atomic, is_atomic_text, AtomicNet};
pub use ip::{default_atm, parse_atm, parse_cidr, parse_route, TunSpec};
pub use process::{InnerLink, Member, NodePort, NodeProcess, SHM_WAIT};
use pvc::{Entries, Hop, Kind};
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
    /// Index of each of its flows in the sending host.
    pub flows: Vec<usize>,
    /// Its pings: index in the sending host, and whether end-to-end.
    pub pings: Vec<(usize, bool)>,
}

/// One end of a link: node name, node, port.
pub type LinkEnd = (String, NodeId, PortId);

/// A network ready to run.
pub struct Network {
    /// The simulator holding every node and link.
    pub sim: Engine,
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
}

impl Network {
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

/// A link from a node to the next one on a path: the port at the node, the
/// port at the next node, the link's index in the file.
type Join = (PortId, PortId, usize);

struct Ctx<'a> {
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

/// Reads duration `s` of field `what` and checks it lies from `lo` to
/// `hi` (written `range`); `None` when not (reported at `span`).
fn duration_in(
    c: &mut Ctx,
    span: Range<usize>,
    what: &str,
    s: &str,
    (lo, hi, range): (Duration, Duration, &str),
) -> Option<Duration> {
    match parse_duration(s) {
        Ok(d) if d >= lo && d <= hi => Some(d),
        Ok(Duration::ZERO) => {
            c.at(span, format!("{what} must be more than 0"));
            None
        }
        Ok(_) => {
            c.at(span, format!("{what} \"{s}\" is outside {range}"));
            None
        }
        Err(m) => {
            c.at(span, format!("{what}: {m}"));
            None
        }
    }
}

/// Range of a link's delay.
const DELAY_RANGE: (Duration, Duration, &str) = (Duration::ZERO, MAX_DELAY, "0 to 10 s");
/// Range of an interval.
const INTERVAL_RANGE: (Duration, Duration, &str) =
    (Duration::from_nanos(1), MAX_INTERVAL, "1 ns to 1 hour");
/// Range of a start.
const START_RANGE: (Duration, Duration, &str) = (Duration::ZERO, MAX_START, "0 to 24 hours");

/// Checks a count of field `what` is from 1 to `max`.
fn count_in(c: &mut Ctx, span: Range<usize>, what: &str, n: u64, max: u64) -> bool {
    if (1..=max).contains(&n) {
        return true;
    }
    c.at(span, format!("{what} {n} is outside 1 to {max}"));
    false
}

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

/// A name safe in a file name and a link end: letters, digits, '-', '_'
/// and '.', not starting with '.'.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
}

/// Where a link's shared-memory rings live: a plain name goes in /dev/shm;
/// a path must be in /dev/shm too, since a process replaces any old ring
/// file at that place.
pub fn shm_path(s: &str) -> Result<std::path::PathBuf, String> {
    let name = s.strip_prefix("/dev/shm/").unwrap_or(s);
    if plain_name(name) {
        Ok(std::path::Path::new("/dev/shm").join(name))
    } else {
        Err(format!(
            "shm \"{s}\" must be a name (letters, digits, '-', '_', '.') in /dev/shm, as \"aurora-l1\""
        ))
    }
}

/// Reads the `udp_a` and `udp_b` addresses of a link or cable: both or
/// neither; each problem reported at `span`.
pub(crate) fn udp_pair(
    c: &mut Ctx,
    span: Range<usize>,
    a: &Option<String>,
    b: &Option<String>,
) -> Option<(SocketAddr, SocketAddr)> {
    let mut addr = |v: &Option<String>, which: &str| -> Option<SocketAddr> {
        let v = v.as_ref()?;
        v.parse()
            .map_err(|_| {
                c.at(
                    span.clone(),
                    format!("{which} \"{v}\" is not an address and port, as \"127.0.0.1:7001\""),
                )
            })
            .ok()
    };
    match (addr(a, "udp_a"), addr(b, "udp_b")) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => {
            if a.is_some() != b.is_some() {
                c.at(span, "give both udp_a and udp_b, or neither".into());
            }
            None
        }
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

/// Reads, checks and compiles a topology file and builds it in the
/// virtual-time driver; `seed` seeds every link's random stream.
pub fn load(text: &str, seed: u64) -> Result<Network, Problems> {
    compile(text)?.into_sim(seed)
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
}

/// Reads and checks a topology file and compiles it, ready for a driver.
pub fn compile(text: &str) -> Result<Blueprint, Problems> {
    let file: File = toml::from_str(text).map_err(|e| {
        let mut c = Ctx::new(text);
        c.at(e.span().unwrap_or(0..0), e.message().to_string());
        Problems(c.problems)
    })?;
    let mut c = Ctx::new(text);
    if atomic::is_atomic(&file) {
        c.at(
            0..0,
            "this file describes an ATOMIC network (mesh, atomic_host, cable, atomic_flow); a file describes one kind of network, and ATOMIC ones run with `aurora run FILE --virtual`".into(),
        );
    }

    // Names.
    let mut kinds: BTreeMap<String, Kind> = BTreeMap::new();
    // Node names become capture file names and link ends ("sw1:2").
    let mut named: Vec<(Range<usize>, &str, Kind)> = Vec::new();
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
        named.push((sw.span(), &d.name, kind));
    }
    for h in &file.host {
        named.push((h.span(), &h.get_ref().name, Kind::Host));
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
        named.push((r.span(), &d.name, Kind::Relay));
    }
    // IP settings of hosts and routers.
    let mut ipcfg: BTreeMap<String, (aurora_ip::node::IpConfig, Option<TunSpec>)> = BTreeMap::new();
    for h in &file.host {
        match ip::host(h.get_ref()) {
            Ok(Some((cfg, tun))) => {
                ipcfg.insert(h.get_ref().name.clone(), (cfg, Some(tun)));
            }
            Ok(None) => {}
            Err(msgs) => {
                for m in msgs {
                    c.at(h.span(), m);
                }
            }
        }
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
        match ip::router(d) {
            Ok(cfg) => {
                ipcfg.insert(d.name.clone(), (cfg, None));
            }
            Err(msgs) => {
                for m in msgs {
                    c.at(r.span(), m);
                }
            }
        }
        named.push((r.span(), &d.name, Kind::Router(d.ports)));
    }
    // Every IP interface has its own address.
    let mut addrs: BTreeMap<std::net::Ipv4Addr, (String, usize)> = BTreeMap::new();
    let ip_ends = file
        .host
        .iter()
        .map(|h| (h.span(), &h.get_ref().name))
        .chain(file.router.iter().map(|r| (r.span(), &r.get_ref().name)));
    for (span, name) in ip_ends {
        let Some((cfg, _)) = ipcfg.get(name) else {
            continue;
        };
        for i in cfg.interfaces.iter().flatten() {
            let (line, _) = c.place(span.start);
            match addrs.get(&i.addr) {
                Some((other, at)) => {
                    let whose = if other == name {
                        format!("another port of \"{name}\"")
                    } else {
                        format!("\"{other}\" (line {at})")
                    };
                    c.at(
                        span.clone(),
                        format!(
                            "\"{name}\" has address {}, which {whose} has too; every IP \
                             host and router port needs its own address",
                            i.addr
                        ),
                    );
                }
                None => {
                    addrs.insert(i.addr, (name.clone(), line));
                }
            }
        }
    }
    for (span, name, kind) in named {
        if !plain_name(name) {
            c.at(
                span.clone(),
                format!(
                    "the name \"{name}\" must be letters, digits, '-', '_' or '.', not starting with '.'"
                ),
            );
        }
        if kinds.insert(name.to_string(), kind).is_some() {
            c.at(span, format!("the name \"{name}\" is used twice"));
        }
    }

    // Links.
    let end = |c: &mut Ctx, span: Range<usize>, s: &str| -> Option<(String, PortId)> {
        let (name, port) = match s.split_once(':') {
            Some((n, p)) => match p.parse::<PortId>() {
                Ok(p) => (n.to_string(), Some(p)),
                Err(_) => {
                    c.at(span, format!("port \"{p}\" in \"{s}\" is not a number"));
                    return None;
                }
            },
            None => (s.to_string(), None),
        };
        let Some(kind) = kinds.get(&name).copied() else {
            c.at(
                span,
                format!("link end \"{s}\" names no host, switch or relaying link"),
            );
            return None;
        };
        match (kind.ports(), port) {
            (None, None | Some(0)) => Some((name, 0)),
            (None, Some(p)) => {
                c.at(span, format!("host \"{name}\" has one port, 0, not {p}"));
                None
            }
            (Some(n), Some(p)) if p < n => Some((name, p)),
            (Some(n), Some(p)) => {
                let what = kind.describe();
                c.at(
                    span,
                    match n.checked_sub(1) {
                        Some(last) => format!("{what} \"{name}\" has ports 0 to {last}, not {p}"),
                        None => format!("{what} \"{name}\" has no ports, so no port {p}"),
                    },
                );
                None
            }
            (Some(_), None) => {
                c.at(
                    span,
                    format!(
                        "link end \"{s}\" must name a port of {} \"{name}\", as \"{name}:0\"",
                        kind.describe()
                    ),
                );
                None
            }
        }
    };
    let mut used_ports: BTreeSet<(String, PortId)> = BTreeSet::new();
    // (node, next node) -> each link from one to the other: (port at the
    // node, port at the next node, the link's index in the file).
    let mut joins: BTreeMap<(String, String), Vec<Join>> = BTreeMap::new();
    let mut links = Vec::new();
    for (li, l) in file.link.iter().enumerate() {
        let span = l.span();
        let d = l.get_ref();
        let a = end(&mut c, span.clone(), &d.a);
        let b = end(&mut c, span.clone(), &d.b);
        let rate = match parse_rate(&d.rate) {
            Ok(r) if (MIN_RATE..=MAX_RATE).contains(&r) => Some(r),
            Ok(_) => {
                c.at(
                    span.clone(),
                    format!("rate \"{}\" is outside 1 to 1e9 cells per second", d.rate),
                );
                None
            }
            Err(m) => {
                c.at(span.clone(), m);
                None
            }
        };
        let delay = match &d.delay {
            None => Some(Duration::ZERO),
            Some(s) => duration_in(&mut c, span.clone(), "delay", s, DELAY_RANGE),
        };
        for (what, p) in [("loss", d.loss), ("bit_error", d.bit_error)] {
            if !(0.0..=1.0).contains(&p) {
                c.at(
                    span.clone(),
                    format!("{what} {p} is not a probability between 0 and 1"),
                );
            }
        }
        if d.buffer == 0 {
            c.at(span.clone(), "buffer must hold at least one cell".into());
        } else if d.buffer > MAX_BUFFER {
            c.at(
                span.clone(),
                format!("buffer {} is outside 1 to {MAX_BUFFER} cells", d.buffer),
            );
        }
        let udp =
            udp_pair(&mut c, span.clone(), &d.udp_a, &d.udp_b).map(|(x, y)| Transport::Udp(x, y));
        let udp = match (&d.shm, udp) {
            (None, t) => t,
            (Some(p), None) if d.udp_a.is_none() && d.udp_b.is_none() => match shm_path(p) {
                Ok(path) => Some(Transport::Shm(path)),
                Err(m) => {
                    c.at(span.clone(), m);
                    None
                }
            },
            (Some(_), _) => {
                c.at(
                    span.clone(),
                    "give udp_a and udp_b, or shm, not both".into(),
                );
                None
            }
        };
        if let (Some(a), Some(b)) = (a, b) {
            for e in [&a, &b] {
                if !used_ports.insert(e.clone()) {
                    c.at(
                        span.clone(),
                        format!("port {} of \"{}\" is already linked", e.1, e.0),
                    );
                }
            }
            let pair = (a.0.clone(), b.0.clone());
            if let Some(first) = joins.get(&pair).and_then(|j| j.first()) {
                // Parallel links: fine between switching nodes (a PVC takes
                // the least used), but a router's port is its subnet.
                if let Some(r) = [&a.0, &b.0]
                    .into_iter()
                    .find(|n| matches!(kinds.get(*n), Some(Kind::Router(_))))
                {
                    let (line, _) = c.place(file.link[first.2].span().start);
                    c.at(
                        span.clone(),
                        format!(
                            "router \"{r}\" is joined to \"{}\" by this link and the one \
                             at line {line}; a PVC path names nodes, not ports, so it could \
                             not say which subnet it uses: join each router port to a \
                             different node",
                            if *r == a.0 { &b.0 } else { &a.0 }
                        ),
                    );
                }
            }
            joins.entry(pair).or_default().push((a.1, b.1, li));
            joins
                .entry((b.0.clone(), a.0.clone()))
                .or_default()
                .push((b.1, a.1, li));
            if let (Some(rate), Some(delay)) = (rate, delay) {
                links.push((
                    a,
                    b,
                    LinkSpec {
                        rate,
                        per_byte: Duration::ZERO,
                        handshake_per_byte: Duration::ZERO,
                        delay,
                        buffer: d.buffer.max(1),
                        loss: d.loss.clamp(0.0, 1.0),
                        bit_error: d.bit_error.clamp(0.0, 1.0),
                    },
                    udp,
                ));
            }
        }
    }

    // PVCs: find each hop's ports, choose VCs, fill the nodes' tables.
    let mut entries = Entries::default();
    struct Compiled {
        name: String,
        from: String,
        from_vc: VcId,
        to: String,
        to_vc: VcId,
        /// The first node after the sender is an ATM switch (which answers
        /// segment loopback).
        first_atm: bool,
        /// The sender's port and the receiver's.
        from_port: PortId,
        to_port: PortId,
    }
    let mut compiled: Vec<Compiled> = Vec::new();
    let mut pvc_names = BTreeSet::new();
    for p in &file.pvc {
        let span = p.span();
        let d = p.get_ref();
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
        if !pvc_names.insert(d.name.clone()) {
            c.at(
                span.clone(),
                format!("the PVC name \"{}\" is used twice", d.name),
            );
        }
        if d.path.len() < 2 {
            c.at(
                span.clone(),
                format!("PVC \"{}\" needs a path of at least two nodes", d.name),
            );
            continue;
        }
        let mut ok = true;
        for (i, n) in d.path.iter().enumerate() {
            let ends = i == 0 || i == d.path.len() - 1;
            match kinds.get(n) {
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
            continue;
        }
        let vc = |c: &mut Ctx, which: &str, v: &Option<String>| -> Option<Option<VcId>> {
            let Some(v) = v else { return Some(None) };
            match parse_vc(v) {
                Ok(vc) if is_reserved_vc(vc) => {
                    c.at(
                        span.clone(),
                        format!(
                            "PVC \"{}\": {which} {vc} is reserved (VCIs 0 to 31 carry idle \
                             cells, signalling, F4 OAM on VCI 3 and 4, and management); use a \
                             VCI from 32 to 65535",
                            d.name
                        ),
                    );
                    None
                }
                Ok(vc) => Some(Some(vc)),
                Err(m) => {
                    c.at(span.clone(), format!("PVC \"{}\": {which}: {m}", d.name));
                    None
                }
            }
        };
        let from_vc = vc(&mut c, "from_vc", &d.from_vc);
        let to_vc = vc(&mut c, "to_vc", &d.to_vc);
        let (Some(from_vc), Some(to_vc)) = (from_vc, to_vc) else {
            continue;
        };
        // Each hop: the link it takes. Where several links join two nodes,
        // the one carrying the fewest PVCs so far (the first in the file on
        // a tie) on which the VC asked for (if any) is free; never a link
        // this PVC has already crossed.
        let mut hops = Vec::new();
        let mut crossed = BTreeSet::new();
        let last = d.path.len() - 2;
        for (i, w) in d.path.windows(2).enumerate() {
            let all = joins
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
                    let busy = want.is_some_and(|v| entries.used(j.2, &v));
                    (busy, entries.load(j.2), j.2)
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
            continue;
        }
        let path_kinds: Vec<Kind> = d.path.iter().map(|n| kinds[n]).collect();
        let vcs = match pvc::route(
            &d.name,
            &d.path,
            &path_kinds,
            &hops,
            from_vc,
            to_vc,
            &mut entries,
        ) {
            Ok(v) => v,
            Err(msgs) => {
                for m in msgs {
                    c.at(span.clone(), m);
                }
                continue;
            }
        };
        compiled.push(Compiled {
            name: d.name.clone(),
            from: d.path[0].clone(),
            from_vc: vcs[0],
            to: d.path[d.path.len() - 1].clone(),
            to_vc: vcs[vcs.len() - 1],
            first_atm: matches!(path_kinds[1], Kind::Switch(_)),
            from_port: hops[0].from_port,
            to_port: hops[hops.len() - 1].to_port,
        });
    }
    // Compiled PVCs by name.
    let by_name: BTreeMap<&str, usize> = compiled
        .iter()
        .enumerate()
        .rev()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();

    // Traffic on a PVC (flows and pings): the PVC, the interval and the
    // start, checked; `None` when anything is wrong (reported).
    let timed = |c: &mut Ctx,
                 span: Range<usize>,
                 what: &str,
                 pvc: &str,
                 interval: &str,
                 start: &Option<String>|
     -> Option<(usize, Duration, Duration)> {
        let found = by_name.get(pvc).copied();
        if found.is_none() && !pvc_names.contains(pvc) {
            c.at(
                span.clone(),
                format!("{what} names PVC \"{pvc}\", which is not defined"),
            );
        }
        let interval = duration_in(
            c,
            span.clone(),
            &format!("{what} interval"),
            interval,
            INTERVAL_RANGE,
        );
        let start = match start {
            None => Some(Duration::ZERO),
            Some(s) => duration_in(c, span.clone(), &format!("{what} start"), s, START_RANGE),
        };
        let i = found?;
        if ipcfg.contains_key(&compiled[i].from) {
            c.at(
                span,
                format!(
                    "{what} on PVC \"{pvc}\": its sender \"{}\" is an IP node; {what}s come from \
                     hosts without ip (run ping or iperf3 over the TUN interface instead)",
                    compiled[i].from
                ),
            );
            return None;
        }
        Some((i, interval?, start?))
    };

    // Flows: at most one on each PVC, since the receiver checks the PDUs'
    // sequence numbers per VC.
    let mut flows: Vec<(String, Flow)> = Vec::new();
    let mut flow_at: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &file.flow {
        let span = f.span();
        let d = f.get_ref();
        let (line, _) = c.place(span.start);
        if let Some(first) = flow_at.get(d.pvc.as_str()) {
            c.at(
                span.clone(),
                format!(
                    "the flows at lines {first} and {line} are both on PVC \"{}\"; the receiver \
                     checks PDU sequence numbers per VC, so two flows on one PVC would look \
                     corrupted: give each flow its own PVC",
                    d.pvc
                ),
            );
            continue;
        }
        flow_at.insert(&d.pvc, line);
        if d.sdu < 8 || d.sdu > 65535 {
            c.at(
                span.clone(),
                format!("flow SDU of {} bytes is outside 8 to 65535", d.sdu),
            );
        }
        let count_ok = count_in(&mut c, span.clone(), "flow count", d.count, MAX_FLOW_COUNT);
        let Some((i, interval, start)) =
            timed(&mut c, span.clone(), "flow", &d.pvc, &d.interval, &d.start)
        else {
            continue;
        };
        if !count_ok {
            continue;
        }
        // A flow's number is its PVC's: cells carry it in their tags.
        let Ok(id) = u16::try_from(i) else {
            c.at(
                span,
                format!("flow on PVC number {i}: at most 65,536 PVCs may carry flows"),
            );
            continue;
        };
        flows.push((
            d.pvc.clone(),
            Flow {
                id,
                vc: compiled[i].from_vc,
                sdu_len: d.sdu,
                count: d.count,
                start: Instant::ZERO + start,
                interval,
            },
        ));
    }

    // Pings.
    let mut pings: Vec<(String, Ping)> = Vec::new();
    for g in &file.ping {
        let span = g.span();
        let d = g.get_ref();
        let count_ok = count_in(&mut c, span.clone(), "ping count", d.count, MAX_PING_COUNT);
        let Some((i, interval, start)) =
            timed(&mut c, span.clone(), "ping", &d.pvc, &d.interval, &d.start)
        else {
            continue;
        };
        if !count_ok {
            continue;
        }
        if d.segment && !compiled[i].first_atm {
            c.at(
                span,
                format!(
                    "a segment ping on PVC \"{}\" needs an ATM switch as the first node after \
                     the sender (only ATM switches answer segment loopback)",
                    d.pvc
                ),
            );
            continue;
        }
        pings.push((
            d.pvc.clone(),
            Ping {
                vc: compiled[i].from_vc,
                end_to_end: !d.segment,
                count: d.count,
                start: Instant::ZERO + start,
                interval,
            },
        ));
    }

    // Each IP node's PVC to its ATMARP server.
    let atmarp_of = file
        .host
        .iter()
        .map(|h| (h.span(), &h.get_ref().name, &h.get_ref().atmarp))
        .chain(
            file.router
                .iter()
                .map(|r| (r.span(), &r.get_ref().name, &r.get_ref().atmarp)),
        );
    for (span, name, pvc) in atmarp_of {
        let Some(pvc) = pvc else { continue };
        let end = by_name
            .get(pvc.as_str())
            .map(|&i| &compiled[i])
            .and_then(|p| {
                if &p.from == name {
                    Some((p.from_port, p.from_vc))
                } else if &p.to == name {
                    Some((p.to_port, p.to_vc))
                } else {
                    None
                }
            });
        match (end, ipcfg.get_mut(name)) {
            (Some(e), Some((cfg, _))) => cfg.server_vc = Some(e),
            (None, _) if pvc_names.contains(pvc) => c.at(
                span,
                format!("atmarp PVC \"{pvc}\" of \"{name}\" does not end at \"{name}\""),
            ),
            (None, _) => c.at(
                span,
                format!("atmarp names PVC \"{pvc}\", which is not defined"),
            ),
            (Some(_), None) => {}
        }
    }
    for h in &file.host {
        let name = &h.get_ref().name;
        if ipcfg.contains_key(name) && entries.host_bits.contains_key(name) {
            c.at(
                h.span(),
                format!(
                    "IP host \"{name}\" sends into a VuNet switch, which needs routing bits \
                     only traffic hosts write; put an ATM switch or a relay next to it"
                ),
            );
        }
    }

    if !c.problems.is_empty() {
        c.problems.sort_by_key(|p| (p.line, p.col));
        return Err(Problems(c.problems));
    }

    // Build. Node ids are positions in `nodes`, in the order added.
    let mut nodes: Vec<Box<dyn BuiltNode>> = Vec::new();
    let mut ids: BTreeMap<String, NodeId> = BTreeMap::new();
    let mut switches = Vec::new();
    for s in &file.switch {
        let d = s.get_ref();
        let node: Box<dyn BuiltNode> = match kinds[&d.name] {
            Kind::VuSwitch(_) => Box::new(VunetSwitch::new(usize::from(d.ports))),
            _ => {
                let mut sw = AtmSwitch::new(usize::from(d.ports), Format::Uni);
                let table = entries.atm.get(&d.name).map(Vec::as_slice);
                for &(ip, ivc, op, ovc) in table.unwrap_or(&[]) {
                    // Ports and VCs were checked above; the VCs are unique
                    // per input.
                    sw.add_vc(ip, ivc, op, ovc).map_err(|e| {
                        Problems(vec![Problem {
                            line: 0,
                            col: 0,
                            msg: e.to_string(),
                        }])
                    })?;
                }
                Box::new(sw)
            }
        };
        let id = NodeId(nodes.len() as u32);
        nodes.push(node);
        ids.insert(d.name.clone(), id);
        switches.push((d.name.clone(), id, d.ports));
    }
    for r in &file.relay {
        let d = r.get_ref();
        let mgmt = [0, 1].map(|p| d.mgmt_ports.contains(&p));
        let mut relay = VunetLink::new(mgmt, d.key.as_ref().map(|k| k.as_bytes().to_vec()));
        for (&(table, vci), &(new_vci, bits)) in entries.relay.get(&d.name).into_iter().flatten() {
            relay.set_entry(usize::from(table), vci, new_vci, bits);
        }
        let id = NodeId(nodes.len() as u32);
        nodes.push(Box::new(relay));
        ids.insert(d.name.clone(), id);
        switches.push((d.name.clone(), id, 2));
    }
    // IP hosts and routers: each end of each PVC they terminate.
    let mut ip_nodes = Vec::new();
    let mut tuns = Vec::new();
    let atm_of: BTreeMap<String, aurora_wire::atmarp::AtmAddr> = ipcfg
        .iter()
        .map(|(n, (cfg, _))| (n.clone(), cfg.atm))
        .collect();
    // The PVCs starting or ending at each node, in file order.
    let mut ends_at: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in compiled.iter().enumerate() {
        ends_at.entry(&p.from).or_default().push(i);
        if p.to != p.from {
            ends_at.entry(&p.to).or_default().push(i);
        }
    }
    let mut ip_node = |name: &str, id: NodeId| -> Result<Box<dyn BuiltNode>, Problems> {
        let (cfg, tun) = ipcfg.remove(name).expect("IP nodes have settings");
        let fail = |m: String| {
            Problems(vec![Problem {
                line: 0,
                col: 0,
                msg: format!("\"{name}\": {m}"),
            }])
        };
        let mut n = aurora_ip::node::IpNode::new(cfg).map_err(|e| fail(e.0))?;
        for p in ends_at
            .get(name)
            .into_iter()
            .flatten()
            .map(|&i| &compiled[i])
        {
            if p.from == name {
                n.add_pvc(p.from_port, p.from_vc, atm_of.get(&p.to).copied())
                    .map_err(|e| fail(e.0))?;
            }
            if p.to == name {
                n.add_pvc(p.to_port, p.to_vc, atm_of.get(&p.from).copied())
                    .map_err(|e| fail(e.0))?;
            }
        }
        ip_nodes.push((name.to_string(), id));
        if let Some(t) = tun {
            tuns.push((id, t));
        }
        Ok(Box::new(n))
    };
    let mut routers = Vec::new();
    for r in &file.router {
        let d = r.get_ref();
        let id = NodeId(nodes.len() as u32);
        nodes.push(ip_node(&d.name, id)?);
        ids.insert(d.name.clone(), id);
        routers.push((d.name.clone(), id, d.ports));
    }
    // Each traffic host's flows and pings, in file order, and what index
    // each gets in its host.
    let mut flows_of: BTreeMap<&str, Vec<(usize, Flow)>> = BTreeMap::new();
    for (pvc, f) in &flows {
        let i = by_name[pvc.as_str()];
        flows_of.entry(&compiled[i].from).or_default().push((i, *f));
    }
    let mut pings_of: BTreeMap<&str, Vec<(usize, Ping)>> = BTreeMap::new();
    for (pvc, g) in &pings {
        let i = by_name[pvc.as_str()];
        pings_of.entry(&compiled[i].from).or_default().push((i, *g));
    }
    let mut pvc_flows: Vec<Vec<usize>> = vec![Vec::new(); compiled.len()];
    let mut pvc_pings: Vec<Vec<(usize, bool)>> = vec![Vec::new(); compiled.len()];
    let mut hosts_out = Vec::new();
    for h in &file.host {
        let name = &h.get_ref().name;
        if h.get_ref().ip.is_some() {
            let id = NodeId(nodes.len() as u32);
            nodes.push(ip_node(name, id)?);
            ids.insert(name.clone(), id);
            hosts_out.push((name.clone(), id));
            continue;
        }
        let mut host = TrafficHost::new(Format::Uni);
        for &(vc, bits) in entries.host_bits.get(name).into_iter().flatten() {
            host.set_route_bits(vc, bits);
        }
        for (n, &(i, f)) in flows_of
            .get(name.as_str())
            .into_iter()
            .flatten()
            .enumerate()
        {
            host.add_flow(f).expect("flow checked");
            pvc_flows[i].push(n);
        }
        for &i in ends_at.get(name.as_str()).into_iter().flatten() {
            if &compiled[i].to == name {
                host.expect(compiled[i].to_vc);
            }
        }
        for &(i, g) in pings_of.get(name.as_str()).into_iter().flatten() {
            let k = host.add_ping(g);
            pvc_pings[i].push((k, g.end_to_end));
        }
        let id = NodeId(nodes.len() as u32);
        nodes.push(Box::new(host));
        ids.insert(name.clone(), id);
        hosts_out.push((name.clone(), id));
    }
    let pvcs = compiled
        .iter()
        .zip(pvc_flows.into_iter().zip(pvc_pings))
        .map(|(p, (flows, pings))| PvcInfo {
            name: p.name.clone(),
            from: ids[&p.from],
            from_vc: p.from_vc,
            to: ids[&p.to],
            to_vc: p.to_vc,
            flows,
            pings,
        })
        .collect();
    let mut links_out = Vec::new();
    let mut link_transport = Vec::new();
    for (a, b, spec, udp) in links {
        let (ai, bi) = (ids[&a.0], ids[&b.0]);
        links_out.push(((a.0, ai, a.1), (b.0, bi, b.1), spec));
        link_transport.push(udp);
    }
    let pins = file
        .switch
        .iter()
        .map(|d| (&d.get_ref().name, d.get_ref().worker))
        .chain(
            file.relay
                .iter()
                .map(|d| (&d.get_ref().name, d.get_ref().worker)),
        )
        .chain(
            file.host
                .iter()
                .map(|d| (&d.get_ref().name, d.get_ref().worker)),
        )
        .chain(
            file.router
                .iter()
                .map(|d| (&d.get_ref().name, d.get_ref().worker)),
        )
        .filter_map(|(name, w)| Some((*ids.get(name)?, w?)))
        .collect();
    Ok(Blueprint {
        nodes,
        hosts: hosts_out,
        switches,
        routers,
        ip_nodes,
        tuns,
        links: links_out,
        link_transport,
        pvcs,
        pins,
    })
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
}

impl Blueprint {
    /// Every traffic host sends nothing more from `t` on (the end of a
    /// run's sending time; the rest of the run drains the network).
    pub fn stop_sending_at(&mut self, t: Instant) {
        for (_, id) in &self.hosts {
            let node: &mut dyn std::any::Any = self.nodes[id.0 as usize].as_mut();
            if let Some(h) = node.downcast_mut::<TrafficHost>() {
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
    pub fn into_sim(self, seed: u64) -> Result<Network, Problems> {
        let mut sim = Engine::new(seed);
        for n in self.nodes {
            sim.add_boxed(n as Box<dyn aurora_engine::EngineNode>);
        }
        let mut links = Vec::new();
        for (a, b, spec) in self.links {
            sim.connect((a.1, a.2), (b.1, b.2), spec).map_err(|e| {
                Problems(vec![Problem {
                    line: 0,
                    col: 0,
                    msg: e.to_string(),
                }])
            })?;
            links.push((a, b));
        }
        Ok(Network {
            sim,
            hosts: self.hosts,
            switches: self.switches,
            routers: self.routers,
            ip_nodes: self.ip_nodes,
            links,
            pvcs: self.pvcs,
            pins: self.pins,
        })
    }
}
