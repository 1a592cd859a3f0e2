//! TCP transfers in topology files (`[[tcp]]`): a bulk source on one IP
//! host sending to a sink on another, both ends Aurora's own TCP
//! ([`aurora_tcp::host::TcpHost`]) unless a host has a `netns`, in which
//! case that end is Linux's TCP behind the host's TUN interface.
//!
//! ```toml
//! [[tcp]]
//! name = "bulk"             # letters, digits, '-', '_', '.'
//! from = "h1"               # an IP host: the source
//! to = "h2"                 # another IP host: the sink
//! port = 5001               # the sink's port
//! variant = "sack"          # tahoe | reno | newreno | sack
//! bytes = "20MB"            # how much: a number of bytes or a size ...
//! # duration = "5s"         # ... or for how long (exactly one of the two)
//! start = "10ms"            # when the source connects
//! # mss = 9140              # default: the host's MTU less 40
//! buffer = "1MiB"           # send and receive buffer
//! delayed_ack = "40ms"      # or "off"
//! sack = true               # offer SACK, timestamps, window scaling
//! timestamps = true
//! window_scale = true
//! # maxburst = 4            # segments one ACK may release (default: no limit)
//! # initial_window = 2      # segments (default: RFC 5681's rule)
//! rto_min = "200ms"
//! rto_initial = "1s"
//! # tick = "500ms"          # a coarse retransmission timer (default: exact)
//! drop = []                 # data segments (from 1) lost on first sending
//! check = true              # the sink checks the byte pattern
//! trace = false             # keep the time-sequence trace (1,000,000 events)
//! ```
//!
//! | field | default | notes |
//! |---|---|---|
//! | `port` | 5001 | 1 to 65535 |
//! | `variant` | `sack` | the source's loss recovery |
//! | `bytes` / `duration` | — | exactly one, unless `from` is a netns host (then Linux's program decides) |
//! | `start` | 10ms | 0 to 24 h; the default leaves InATMARP time to find the far end |
//! | `mss` | MTU − 40 | 64 to 65495, and at most the MTU − 40 of each Aurora end |
//! | `buffer` | 1MiB | 1KiB to 1GiB, and at least the MSS |
//! | `delayed_ack` | 40ms | up to 500ms, or `off` |
//! | `sack`, `timestamps`, `window_scale` | true | |
//! | `maxburst` | none | 1 to 65535 segments |
//! | `decrease` | 0.5 | 0.1 to 0.95: the share of the flight kept as `ssthresh` after a loss |
//! | `initial_window` | RFC 5681 | 1 to 1000 segments |
//! | `rto_min` | 200ms | 1us to 60s |
//! | `rto_initial` | 1s | 1us to 60s |
//! | `tick` | none (exact) | 1us to 10s |
//! | `drop` | none | at most 1000 segment numbers, each from 1; needs an Aurora source |
//! | `check` | true | false for programs that send their own bytes (iperf3) |
//! | `trace` | false | true keeps [`TRACE_EVENTS`] events per connection |
//!
//! Sizes are a number of bytes or a number with a unit: `B`, decimal
//! `kB`, `MB`, `GB`, `TB` (powers of 1000) or binary `KiB`, `MiB`,
//! `GiB`, `TiB` (powers of 1024), in any case (`mb` is megabytes, never
//! megabits), fractions allowed when the result is whole bytes.
//!
//! Each source's own port is [`FIRST_LOCAL_PORT`] plus the entry's place
//! among the `[[tcp]]` entries. Entries ending at the same host and port
//! share one sink, which takes the receiving settings (`mss`, `buffer`,
//! `delayed_ack`, `sack`, `timestamps`, `window_scale`, `rto_min`,
//! `rto_initial`, `tick`, `check`, `trace`) they must agree on.

use std::net::Ipv4Addr;

use aurora_engine::NodeId;
use aurora_tcp::conn::Variant;
use aurora_tcp::host::Amount;
use aurora_time::Duration;
use serde::Deserialize;

/// The sink's port when the entry gives none.
pub const DEFAULT_PORT: u16 = 5001;
/// When a source connects when the entry does not say: after InATMARP
/// has had time to find the far end of each PVC.
pub const DEFAULT_START: Duration = Duration::from_millis(10);
/// The send and receive buffers when the entry does not say (1 MiB).
pub const DEFAULT_BUFFER: u64 = 1 << 20;
/// How long a receiver may hold an ACK when the entry does not say.
pub const DEFAULT_DELAYED_ACK: Duration = Duration::from_millis(40);
/// Trace events a connection keeps with `trace = true`.
pub const TRACE_EVENTS: usize = 1_000_000;
/// The port of the first entry's source; the next entry's is one more.
pub const FIRST_LOCAL_PORT: u16 = 40_000;
/// The most segment numbers an entry's `drop` may list.
pub const MAX_DROPS: usize = 1000;
/// The most bytes a transfer may send (1 TiB).
pub const MAX_BYTES: u64 = 1 << 40;

/// A TCP transfer (`[[tcp]]`), as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpDef {
    /// Its name in reports.
    pub name: String,
    /// The IP host that sends.
    pub from: String,
    /// The IP host that receives.
    pub to: String,
    /// The sink's port (default 5001).
    #[serde(default)]
    pub port: Option<i64>,
    /// `tahoe`, `reno`, `newreno` or `sack` (the default).
    #[serde(default)]
    pub variant: Option<String>,
    /// How much the source sends.
    #[serde(default)]
    pub bytes: Option<Size>,
    /// For how long the source sends.
    #[serde(default)]
    pub duration: Option<String>,
    /// When the source connects (default 10ms).
    #[serde(default)]
    pub start: Option<String>,
    /// The MSS both ends advertise (default: each host's MTU less 40).
    #[serde(default)]
    pub mss: Option<i64>,
    /// The send and receive buffers (default 1MiB).
    #[serde(default)]
    pub buffer: Option<Size>,
    /// How long a receiver may delay an ACK, or `off` (default 40ms).
    #[serde(default)]
    pub delayed_ack: Option<String>,
    /// Offer SACK (default true).
    #[serde(default)]
    pub sack: Option<bool>,
    /// Offer timestamps (default true).
    #[serde(default)]
    pub timestamps: Option<bool>,
    /// Offer window scaling (default true).
    #[serde(default)]
    pub window_scale: Option<bool>,
    /// At most this many segments released at once (default: no limit).
    #[serde(default)]
    pub maxburst: Option<i64>,
    /// The share of the flight kept as `ssthresh` after a loss (default
    /// 0.5; 0.1 to 0.95).
    #[serde(default)]
    pub decrease: Option<f64>,
    /// The initial window in segments (default: RFC 5681's rule).
    #[serde(default)]
    pub initial_window: Option<i64>,
    /// The smallest retransmission timeout (default 200ms).
    #[serde(default)]
    pub rto_min: Option<String>,
    /// The timeout before any round-trip sample (default 1s).
    #[serde(default)]
    pub rto_initial: Option<String>,
    /// A coarse retransmission timer's period (default: an exact timer).
    #[serde(default)]
    pub tick: Option<String>,
    /// Data segments (numbered from 1) lost on their first sending.
    #[serde(default)]
    pub drop: Vec<i64>,
    /// The sink checks the byte pattern (default true).
    #[serde(default)]
    pub check: Option<bool>,
    /// Keep each connection's time-sequence trace (default false).
    #[serde(default)]
    pub trace: Option<bool>,
}

/// A size as written: an integer number of bytes, or text such as
/// `"10MB"` or `"64KiB"` (read by [`parse_size`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Size {
    /// A number of bytes (negative is refused when checked).
    Bytes(i64),
    /// A size with a unit.
    Text(String),
}

impl Size {
    /// The number of bytes.
    pub fn bytes(&self) -> Result<u64, String> {
        match self {
            Size::Bytes(n) => u64::try_from(*n).map_err(|_| format!("{n} bytes is negative")),
            Size::Text(s) => parse_size(s),
        }
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number of bytes or a size such as \"10MB\" or \"64KiB\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Size, E> {
                Ok(Size::Bytes(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size::Bytes(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Size, E> {
                Ok(Size::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads a size: a whole number of bytes, or a number (fractions allowed
/// if the result is whole bytes) with a unit: `B`; `kB`, `MB`, `GB`,
/// `TB` (powers of 1000); `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024).
/// Units are read in any case.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "\"{s}\" is not a size (a number of bytes, or a number with B, kB, MB, GB, TB, \
             KiB, MiB, GiB or TiB)"
        )
    };
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return Err(bad()),
    };
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    if whole.is_empty() && frac.is_empty() || whole.len() > 20 || frac.len() > 20 {
        return Err(bad());
    }
    let digits = |d: &str| -> Result<u128, String> {
        if d.is_empty() {
            Ok(0)
        } else if d.bytes().all(|b| b.is_ascii_digit()) {
            d.parse::<u128>().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let (w, f) = (digits(whole)?, digits(frac)?);
    let scale = 10u128.pow(frac.len() as u32);
    let frac_bytes = f * mult;
    if !frac_bytes.is_multiple_of(scale) {
        return Err(format!("\"{s}\" is not a whole number of bytes"));
    }
    let total = w
        .checked_mul(mult)
        .and_then(|b| b.checked_add(frac_bytes / scale))
        .ok_or_else(bad)?;
    u64::try_from(total).map_err(|_| format!("\"{s}\" is more bytes than Aurora counts"))
}

/// A `[[tcp]]` transfer after compilation, for reports.
#[derive(Clone, Debug)]
pub struct TcpInfo {
    /// Its name.
    pub name: String,
    /// The sending host's name.
    pub from: String,
    /// The sending host's node when the source is Aurora's TCP; `None`
    /// when it is Linux's (a netns host).
    pub from_node: Option<NodeId>,
    /// The sending host's address.
    pub from_addr: Ipv4Addr,
    /// The receiving host's name.
    pub to: String,
    /// The receiving host's node when the sink is Aurora's TCP; `None`
    /// when it is Linux's (a netns host).
    pub to_node: Option<NodeId>,
    /// The receiving host's address.
    pub to_addr: Ipv4Addr,
    /// The source's loss recovery.
    pub variant: Variant,
    /// The sink's port.
    pub port: u16,
    /// The source's own port (when the source is Aurora's).
    pub local_port: u16,
    /// How much the source sends (`None` when Linux's program decides).
    pub amount: Option<Amount>,
}

/// The seed of the TCP host at node `id` in a run seeded with `seed`:
/// different for every host, the same for the same run.
pub fn host_seed(seed: u64, id: NodeId) -> u64 {
    aurora_tcp::host::mix(seed, u64::from(id.0) + 1)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_in_both_kinds_of_unit() {
        assert_eq!(parse_size("1500"), Ok(1500));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("10 mb"), Ok(10_000_000));
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("1.5MiB"), Ok(1_572_864));
        assert_eq!(parse_size("2kB"), Ok(2000));
        assert_eq!(parse_size("3B"), Ok(3));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert!(parse_size("0.5B").is_err());
        assert!(parse_size("10XB").is_err());
        assert!(parse_size("MB").is_err());
        assert!(parse_size("-1MB").is_err());
        assert!(parse_size("1.2.3MB").is_err());
        assert!(parse_size("99999999999999999999TiB").is_err());
        assert!(parse_size("").is_err());
    }
}
