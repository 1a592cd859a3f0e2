//! Applications that open and close their own VCs in topology files
//! (`[[app]]`), the network's signalling settings (`[signal]`) and relays
//! restarted mid-run (`[[restart]]`). The hosts at an application's ends
//! become signalling hosts ([`aurora_signal::host::SignalHost`]); no PVC
//! is compiled for it: the host writes the relays' entries with control
//! cells when the run reaches `open_at`, sends its PDUs while the VC is
//! open, and clears them at `close_at`.
//!
//! ```toml
//! [signal]
//! key = "network secret"    # required with apps: host h's key is "KEY:h",
//!                           # known to every relay (key ids 1, 2, ... in the
//!                           # order apps name their hosts)
//! # table = "/tmp/aurora-vci-table"  # a locked file shared by processes
//! #                                  # (default: one table in memory)
//! # timeout = "10ms"        # wait this long for each control reply
//! # retries = 3             # then ask again this often before failing
//! # lease = "60s"           # the VCI table's leases (renewed by refreshes)
//! # hosts = ["h1", "h2"]    # signalling hosts without apps of their own
//! #                         # (they open VCs on command: `aurora vc open`);
//! #                         # key ids 1, 2, ... in this order, before the
//! #                         # hosts apps name
//!
//! [[relay]]
//! name = "r1"
//! # lifetime = "50ms"       # entries not refreshed for this long expire
//!
//! [[app]]
//! name = "video"            # letters, digits, '-', '_', '.'
//! host = "h1"               # the host that opens the VC and sends
//! to = "h2"                 # the destination: the route is found from the links
//! # path = ["h1", "s1", "r1", "s2", "h2"]  # or an explicit path (instead of to)
//! open_at = "1ms"           # default 0
//! close_at = "80ms"         # default: stays open
//! sdu = 1000                # bytes of each PDU (8 to 65535; default 1000)
//! count = 500               # PDUs sent at most while open (default 0: none)
//! interval = "100us"        # time between PDUs (default 1ms)
//! refresh = "10ms"          # read the entries back this often; rewrite lost ones
//!
//! [[restart]]               # a relaying link power-cycled mid-run:
//! node = "r1"               # it loses every entry control cells wrote
//! at = "30ms"
//! ```
//!
//! A path runs host, VuNet switch, relaying link, VuNet switch, ...,
//! host: at least one relay and at most 11 (a control cell's route holds
//! no more). An AVlink counts as a relay, and from one AVlink a path
//! crosses the WAN to its peer (an explicit path names the WAN switches
//! between, in order). Found routes are shortest in steps (a WAN crossing
//! is one), the first found in link order on a tie. VCIs come from the
//! network's table, from above the highest VCI any PVC uses, so the two
//! never collide; on a WAN segment they come from the bottom of the
//! AVlinks' pool, whose top PVCs take. `[[restart]]` may name an AVlink.

use serde::Deserialize;

/// The network's signalling settings (`[signal]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalDef {
    /// The secret hosts' keys are made from.
    #[serde(default)]
    pub key: Option<String>,
    /// A VCI table file shared by processes.
    #[serde(default)]
    pub table: Option<String>,
    /// Wait for each control reply this long.
    #[serde(default)]
    pub timeout: Option<String>,
    /// Ask again this many times.
    #[serde(default)]
    pub retries: Option<u32>,
    /// Leases of the VCI table's entries.
    #[serde(default)]
    pub lease: Option<String>,
    /// Hosts that signal without an `[[app]]` of their own (they open VCs
    /// on command while they run); key ids 1, 2, ... in this order.
    #[serde(default)]
    pub hosts: Option<Vec<String>>,
}

/// An application (`[[app]]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppDef {
    /// Its name.
    pub name: String,
    /// The host that opens the VC.
    pub host: String,
    /// The destination host (route found from the links).
    #[serde(default)]
    pub to: Option<String>,
    /// Or an explicit path of node names.
    #[serde(default)]
    pub path: Option<Vec<String>>,
    /// When it opens.
    #[serde(default)]
    pub open_at: Option<String>,
    /// When it closes.
    #[serde(default)]
    pub close_at: Option<String>,
    /// PDU size in bytes.
    #[serde(default)]
    pub sdu: Option<usize>,
    /// PDUs at most.
    #[serde(default)]
    pub count: Option<u64>,
    /// Time between PDUs.
    #[serde(default)]
    pub interval: Option<String>,
    /// Refresh period.
    #[serde(default)]
    pub refresh: Option<String>,
}

/// A relaying link restarted mid-run (`[[restart]]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartDef {
    /// The relaying link.
    pub node: String,
    /// When.
    pub at: String,
}
