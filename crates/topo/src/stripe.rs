//! Striped VCs in topology files (`[[stripe]]`): one logical VC from a
//! host to another, spread over member PVCs by `aurora-stripe` and put
//! back together at the far end. The two ends become striping hosts
//! ([`aurora_stripe::StripeHost`]); what a member PVC crosses (its links'
//! rates, delays and loss) is what its stripe sees, so parallel links with
//! different delays are skew.
//!
//! ```toml
//! [[host]]
//! name = "a"
//! # ports = 4              # a host with several ports (one per stripe link,
//! #                        # say) may only be an end of striped VCs
//!
//! [[stripe]]
//! name = "wide"            # letters, digits, '-', '_', '.'
//! from = "a"               # the sending host
//! to = "b"                 # the receiving host
//! pvcs = ["m0", "m1", "m2", "m3"]   # member PVCs from `from` to `to`; stripe i is pvcs[i]
//! unit = "cell"            # cell | pdu | ip
//! sync = "marker"          # none | sequence | marker
//! sdu = 9180               # SDU bytes of each PDU of the logical flow
//! # sdu_min = 64           # sizes spread from sdu_min to sdu (default: all sdu)
//! count = 1000             # PDUs; or duration = "1s"; neither: until the run stops
//! interval = "200us"       # time between PDUs; leave out for a greedy flow
//! # rate = "300Mbps"       # or the SDU bits offered a second (bps, kbps, Mbps, Gbps)
//! start = "0ms"
//! quantum = 1536           # pdu and ip units: surplus round robin, bytes per round
//! marker_interval = 32     # marker sync: units per stripe between markers
//! idle_marker = "100us"    # marker sync: markers on every stripe after this long idle
//! idle_marker_repeats = 3
//! timeout = "10ms"         # receiver: longest a unit waits to be put in order
//! buffer = 4096            # receiver: units held at most
//! buffer_bytes = "4MiB"    # receiver: bytes held at most
//! reassembly_timeout = "10ms"   # pdu and ip units: per-stripe AAL5 timer
//! reassembly_buffer = "1MiB"    # pdu and ip units: per-stripe AAL5 memory
//! ```
//!
//! | field | default | range |
//! |---|---|---|
//! | `unit` | `cell` | |
//! | `sync` | `marker` | |
//! | `sdu`, `sdu_min` | — , `sdu` | cells 16 to 65535; pdu 8 to 65535; ip 28 to 65535 (4 less with sequence sync) |
//! | `count` / `duration` | until the run stops | 1 to 10^9 / 1 ns to 24 h |
//! | `interval` / `rate` | greedy | 1 ns to 1 h / at most one of the two |
//! | `start` | 0 | 0 to 24 h |
//! | `quantum` | 1536 | 1 to 2^24 |
//! | `marker_interval` | 32 (cells), 4 (pdu, ip) | 1 to 65535 |
//! | `idle_marker`, `idle_marker_repeats` | 100us, 3 | 1 ns to 1 s, 0 to 1000 |
//! | `timeout`, `reassembly_timeout` | 10ms | 1 ns to 60 s; with markers `timeout` above `idle_marker` |
//! | `buffer` | 4096 | 1 to 2^20 units (sequence sync: at most half the sequence space, 32768 for cells) |
//! | `buffer_bytes`, `reassembly_buffer` | 4MiB, 1MiB | 48 bytes to 1 GiB |
//!
//! A **greedy** flow (no `interval`) sends as fast as its stripes take it:
//! the sending host keeps every port its members leave by busy at that
//! port's line rate, and makes the next PDU when there is room. A flow
//! with an `interval` sends each PDU whole when it falls due.
//!
//! Every member PVC must go from `from` to `to` and belong to one striped
//! VC; no `[[flow]]` or `[[ping]]` may use it. A host that is an end of a
//! striped VC carries striped VCs only: every PVC starting or ending there
//! is a member, and it has no `ip`.

use aurora_engine::NodeId;
use aurora_net::PortId;
use aurora_stripe::{SyncMode, UnitKind};
use aurora_wire::cell::VcId;
use serde::Deserialize;

use crate::tcp::Size;

/// A striped VC (`[[stripe]]`), as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StripeDef {
    /// Its name in reports.
    pub name: String,
    /// The sending host.
    pub from: String,
    /// The receiving host.
    pub to: String,
    /// The member PVCs, stripe 0 first.
    pub pvcs: Vec<String>,
    /// `cell` (the default), `pdu` or `ip`.
    #[serde(default)]
    pub unit: Option<String>,
    /// `none`, `sequence` or `marker` (the default).
    #[serde(default)]
    pub sync: Option<String>,
    /// SDU bytes (the largest, with `sdu_min`).
    pub sdu: i64,
    /// The smallest SDU (default: `sdu`).
    #[serde(default)]
    pub sdu_min: Option<i64>,
    /// PDUs to send.
    #[serde(default)]
    pub count: Option<i64>,
    /// How long to send for.
    #[serde(default)]
    pub duration: Option<String>,
    /// Time between PDUs (default: greedy).
    #[serde(default)]
    pub interval: Option<String>,
    /// SDU bits offered a second, instead of `interval` (`"300Mbps"`).
    #[serde(default)]
    pub rate: Option<String>,
    /// When the first PDU goes (default 0).
    #[serde(default)]
    pub start: Option<String>,
    /// Surplus round robin quantum, bytes.
    #[serde(default)]
    pub quantum: Option<i64>,
    /// Units per stripe between markers.
    #[serde(default)]
    pub marker_interval: Option<i64>,
    /// Idle time before markers go on every stripe.
    #[serde(default)]
    pub idle_marker: Option<String>,
    /// Idle markers in one quiet spell.
    #[serde(default)]
    pub idle_marker_repeats: Option<i64>,
    /// The receiver's resequencing timeout.
    #[serde(default)]
    pub timeout: Option<String>,
    /// Units the receiver holds at most.
    #[serde(default)]
    pub buffer: Option<i64>,
    /// Bytes the receiver holds at most.
    #[serde(default)]
    pub buffer_bytes: Option<Size>,
    /// Per-stripe AAL5 reassembly timer (pdu and ip units).
    #[serde(default)]
    pub reassembly_timeout: Option<String>,
    /// Per-stripe AAL5 reassembly memory (pdu and ip units).
    #[serde(default)]
    pub reassembly_buffer: Option<Size>,
}

/// A striped VC after compilation, for reports.
#[derive(Clone, Debug)]
pub struct StripeInfo {
    /// Its name.
    pub name: String,
    /// The sending host's name.
    pub from: String,
    /// The sending host.
    pub from_node: NodeId,
    /// The receiving host's name.
    pub to: String,
    /// The receiving host.
    pub to_node: NodeId,
    /// Each stripe's member PVC: its index in the network's PVCs.
    pub members: Vec<usize>,
    /// The striping unit.
    pub unit: UnitKind,
    /// The synchronisation method.
    pub sync: SyncMode,
    /// True for a greedy flow.
    pub greedy: bool,
    /// A logical VC a `[[splitter]]` pair stripes inside the network: then
    /// the two ends are relays ([`aurora_stripe::Relay`]), not hosts, and
    /// `members` is empty.
    pub via: Option<Via>,
}

/// How a logical VC crosses a pair of striping relays.
#[derive(Clone, Debug)]
pub struct Via {
    /// The `[[splitter]]` entry.
    pub splitter: String,
    /// The PVC striped: its index in the network's PVCs.
    pub pvc: usize,
    /// Its member VC on every stripe link.
    pub member_vc: VcId,
    /// The stripe ports, stripe 0 first (the same at both relays).
    pub ports: Vec<PortId>,
}

/// A pair of striping relays (`[[splitter]]`), as written: internal
/// splitting inside the network. Each relay has port 0 on its wide side
/// and ports 1 to `stripes` on the stripe links, port `i` of one joined
/// to port `i` of the other by a `[[link]]`. Every PVC whose path crosses
/// from one relay straight to the other is a logical VC of the pair:
/// striped by the first relay on its path, joined by the second.
///
/// ```toml
/// [[splitter]]
/// name = "split"
/// relays = ["split-a", "split-b"]   # two relay nodes this entry makes
/// stripes = 4                       # ports 1..=4 of each, link i joins split-a:i and split-b:i
/// unit = "cell"                     # cell | pdu | ip
/// sync = "marker"                   # none | sequence (pdu and ip units) | marker
/// sdu = 9180                        # pdu and ip units: the largest SDU or packet
/// # quantum, marker_interval, idle_marker, idle_marker_repeats, timeout,
/// # buffer, buffer_bytes, reassembly_timeout, reassembly_buffer: as [[stripe]]
/// ```
///
/// The member VC of a logical VC is chosen free on every stripe link, the
/// same on all. A relay carries whole cells, so cell units take no
/// sequence numbers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitterDef {
    /// Its name in reports.
    pub name: String,
    /// The two relays' names.
    pub relays: Vec<String>,
    /// Stripe ports on each relay.
    pub stripes: i64,
    /// `cell` (the default), `pdu` or `ip`.
    #[serde(default)]
    pub unit: Option<String>,
    /// `none`, `sequence` or `marker` (the default).
    #[serde(default)]
    pub sync: Option<String>,
    /// The largest SDU (pdu and ip units; default 9180).
    #[serde(default)]
    pub sdu: Option<i64>,
    /// Surplus round robin quantum, bytes.
    #[serde(default)]
    pub quantum: Option<i64>,
    /// Units per stripe between markers.
    #[serde(default)]
    pub marker_interval: Option<i64>,
    /// Idle time before markers go on every stripe.
    #[serde(default)]
    pub idle_marker: Option<String>,
    /// Idle markers in one quiet spell.
    #[serde(default)]
    pub idle_marker_repeats: Option<i64>,
    /// The joining relay's resequencing timeout.
    #[serde(default)]
    pub timeout: Option<String>,
    /// Units the joining relay holds at most.
    #[serde(default)]
    pub buffer: Option<i64>,
    /// Bytes the joining relay holds at most.
    #[serde(default)]
    pub buffer_bytes: Option<Size>,
    /// Per-stripe AAL5 reassembly timer (pdu and ip units), and the
    /// splitting relay's timer for a PDU arriving on the wide side.
    #[serde(default)]
    pub reassembly_timeout: Option<String>,
    /// Per-stripe AAL5 reassembly memory (pdu and ip units).
    #[serde(default)]
    pub reassembly_buffer: Option<Size>,
}

/// The striping settings `[[stripe]]` and `[[splitter]]` entries share,
/// as written.
pub(crate) struct Knobs<'a> {
    pub(crate) unit: Option<&'a str>,
    pub(crate) sync: Option<&'a str>,
    pub(crate) quantum: Option<i64>,
    pub(crate) marker_interval: Option<i64>,
    pub(crate) idle_marker: &'a Option<String>,
    pub(crate) idle_marker_repeats: Option<i64>,
    pub(crate) timeout: &'a Option<String>,
    pub(crate) buffer: Option<i64>,
    pub(crate) buffer_bytes: &'a Option<Size>,
    pub(crate) reassembly_timeout: &'a Option<String>,
    pub(crate) reassembly_buffer: &'a Option<Size>,
}

macro_rules! knobs {
    ($d:expr) => {
        Knobs {
            unit: $d.unit.as_deref(),
            sync: $d.sync.as_deref(),
            quantum: $d.quantum,
            marker_interval: $d.marker_interval,
            idle_marker: &$d.idle_marker,
            idle_marker_repeats: $d.idle_marker_repeats,
            timeout: &$d.timeout,
            buffer: $d.buffer,
            buffer_bytes: &$d.buffer_bytes,
            reassembly_timeout: &$d.reassembly_timeout,
            reassembly_buffer: &$d.reassembly_buffer,
        }
    };
}

impl StripeDef {
    /// Its striping settings.
    pub(crate) fn knobs(&self) -> Knobs<'_> {
        knobs!(self)
    }
}

impl SplitterDef {
    /// Its striping settings.
    pub(crate) fn knobs(&self) -> Knobs<'_> {
        knobs!(self)
    }
}

/// The largest `buffer` a file may give.
pub const MAX_BUFFER_UNITS: i64 = 1 << 20;
/// The most idle markers in one quiet spell.
pub const MAX_IDLE_REPEATS: i64 = 1000;
