//! What both ends of a striped VC must agree on, and the receiver's limits.
//!
//! A [`Config`] is checked as a whole before a [`Striper`](crate::Striper)
//! or [`Destriper`](crate::Destriper) is built from it; every problem is
//! reported at once in a [`ConfigError`].

use aurora_time::Duration;
use aurora_wire::cell::{Format, VcId};

use crate::format::{CELL_SEQ_SPACE, PDU_SEQ_LEN, PDU_SEQ_SPACE};

/// The most stripes a logical VC may have (a marker names its stripe in one byte).
pub const MAX_STRIPES: usize = 255;

/// The largest quantum: keeps a stripe's credit well inside the marker's
/// 32-bit signed field.
pub const MAX_QUANTUM: u32 = 1 << 24;

/// The striping unit: the largest piece of the logical VC's traffic that
/// travels whole on one stripe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UnitKind {
    /// One cell. Fixed size, so stripes are served round robin.
    #[default]
    Cell,
    /// One AAL5 CPCS-PDU (an SDU of up to [`Config::max_sdu`] bytes).
    /// Variable size, so stripes are served surplus round robin.
    Pdu,
    /// One IP packet, carried as one AAL5 PDU. Balanced like [`UnitKind::Pdu`];
    /// a kind of its own so that counters say what was striped and the
    /// sender can check that each unit looks like an IP packet.
    IpPacket,
}

impl UnitKind {
    /// The code a marker cell carries for this kind.
    pub const fn code(self) -> u8 {
        match self {
            UnitKind::Cell => 1,
            UnitKind::Pdu => 2,
            UnitKind::IpPacket => 3,
        }
    }

    /// The kind a marker code stands for.
    pub const fn from_code(code: u8) -> Option<UnitKind> {
        match code {
            1 => Some(UnitKind::Cell),
            2 => Some(UnitKind::Pdu),
            3 => Some(UnitKind::IpPacket),
            _ => None,
        }
    }

    /// A short name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            UnitKind::Cell => "cell",
            UnitKind::Pdu => "pdu",
            UnitKind::IpPacket => "ip",
        }
    }

    /// True for the kinds carried as AAL5 PDUs.
    pub const fn is_pdu(self) -> bool {
        !matches!(self, UnitKind::Cell)
    }
}

/// How the receiver puts the stripes back in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SyncMode {
    /// Nothing is added to the traffic. The receiver replays the sender's
    /// round robin on what arrives and hopes no unit was lost: the baseline,
    /// whose misordering is there to be measured.
    #[default]
    None,
    /// Every unit carries a sequence number (see [`crate::format`] for where).
    Sequence,
    /// Every stripe carries a marker cell after every
    /// [`Config::marker_interval`] units; data cells are untouched.
    Marker,
}

impl SyncMode {
    /// A short name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            SyncMode::None => "none",
            SyncMode::Sequence => "sequence",
            SyncMode::Marker => "marker",
        }
    }
}

/// The receiver's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxLimits {
    /// Most units held in the resequencer at once (all stripes together).
    pub max_held_units: usize,
    /// Most bytes of unit data held at once (a cell counts its 48 bytes).
    pub max_held_bytes: usize,
    /// Longest a unit may wait in the resequencer before the receiver gives
    /// up on whatever it is waiting for. Must exceed the largest skew
    /// between stripes plus, with markers, the time between two markers on
    /// one stripe.
    pub timeout: Duration,
    /// Per-stripe AAL5 reassembly timer (PDU and IP units).
    pub reassembly_timeout: Duration,
    /// Per-stripe AAL5 reassembly memory in bytes (PDU and IP units).
    pub reassembly_budget: usize,
}

impl Default for RxLimits {
    fn default() -> Self {
        RxLimits {
            max_held_units: 4096,
            max_held_bytes: 4 << 20,
            timeout: Duration::from_millis(10),
            reassembly_timeout: Duration::from_millis(10),
            reassembly_budget: 1 << 20,
        }
    }
}

/// One striped logical VC, as seen by one end.
///
/// Both ends must agree on `unit`, `sync`, the number of stripes (the
/// length of `stripes`) and `quantum`. `stripes` holds the member VC of each
/// stripe as this end sees it: outgoing VCs at the sender, incoming VCs at
/// the receiver (they differ when switches on the way translate VCIs). The
/// same VC may appear on several stripes, since each stripe is its own link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The striping unit.
    pub unit: UnitKind,
    /// The synchronisation method.
    pub sync: SyncMode,
    /// Member VC of each stripe; stripe `i` is `stripes[i]`.
    pub stripes: Vec<VcId>,
    /// Header layout of the member VCs' cells.
    pub format: Format,
    /// Surplus round robin quantum in bytes for PDU and IP units: the credit
    /// a stripe gains each round. Ignored for cells (one cell per stripe per round).
    pub quantum: u32,
    /// Marker sync: units sent on a stripe between two of its markers (K).
    pub marker_interval: u32,
    /// Marker sync: after this long without a unit the sender sends a marker
    /// on every stripe, so the tail of a burst is not left unconfirmed.
    pub idle_marker: Duration,
    /// Marker sync: how many idle markers (spaced `idle_marker` apart) the
    /// sender sends in one quiet spell, in case some are lost.
    pub idle_marker_repeats: u32,
    /// Largest SDU the application may hand over (PDU and IP units). With
    /// sequence sync the carried SDU is [`PDU_SEQ_LEN`] bytes longer, and
    /// must still fit AAL5's 65,535.
    pub max_sdu: usize,
    /// The receiver's limits (unused by the sender).
    pub limits: RxLimits,
}

impl Config {
    /// A configuration with default settings for everything but the unit,
    /// the method and the member VCs.
    pub fn new(unit: UnitKind, sync: SyncMode, stripes: Vec<VcId>) -> Config {
        Config {
            unit,
            sync,
            stripes,
            format: Format::Uni,
            quantum: 1536,
            marker_interval: 32,
            idle_marker: Duration::from_micros(100),
            idle_marker_repeats: 3,
            max_sdu: 9180,
            limits: RxLimits::default(),
        }
    }

    /// Number of stripes.
    pub fn stripe_count(&self) -> usize {
        self.stripes.len()
    }

    /// The quantum the balancer uses: one cell's payload for cell units.
    pub(crate) fn effective_quantum(&self) -> i64 {
        match self.unit {
            UnitKind::Cell => aurora_wire::PAYLOAD_LEN as i64,
            _ => i64::from(self.quantum),
        }
    }

    /// The largest SDU carried in an AAL5 PDU, sequence header included.
    pub(crate) fn carried_max_sdu(&self) -> usize {
        match self.sync {
            SyncMode::Sequence => self.max_sdu + PDU_SEQ_LEN,
            _ => self.max_sdu,
        }
    }

    /// Checks every setting; all problems are reported together.
    pub fn check(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        if self.stripes.is_empty() {
            problems.push(Problem::NoStripes);
        }
        if self.stripes.len() > MAX_STRIPES {
            problems.push(Problem::TooManyStripes(self.stripes.len()));
        }
        for (index, vc) in self.stripes.iter().enumerate() {
            if vc.vpi > self.format.max_vpi() {
                problems.push(Problem::VpiRange {
                    index,
                    vc: *vc,
                    max: self.format.max_vpi(),
                });
            }
        }
        if self.unit.is_pdu() && !(1..=MAX_QUANTUM).contains(&self.quantum) {
            problems.push(Problem::Quantum(self.quantum));
        }
        if self.sync == SyncMode::Marker {
            if !(1..=u32::from(u16::MAX)).contains(&self.marker_interval) {
                problems.push(Problem::MarkerInterval(self.marker_interval));
            }
            if self.idle_marker <= Duration::ZERO {
                problems.push(Problem::IdleMarker);
            }
        }
        if self.unit.is_pdu() && self.carried_max_sdu() > aurora_wire::aal5::MAX_SDU {
            problems.push(Problem::MaxSdu {
                max_sdu: self.max_sdu,
                limit: aurora_wire::aal5::MAX_SDU
                    - if self.sync == SyncMode::Sequence {
                        PDU_SEQ_LEN
                    } else {
                        0
                    },
            });
        }
        let l = &self.limits;
        if l.max_held_units == 0 || l.max_held_bytes == 0 {
            problems.push(Problem::EmptyBuffer);
        }
        if self.sync == SyncMode::Sequence {
            let space = if self.unit.is_pdu() {
                PDU_SEQ_SPACE
            } else {
                CELL_SEQ_SPACE
            };
            if l.max_held_units as u64 > space / 2 {
                problems.push(Problem::Window {
                    units: l.max_held_units,
                    half: space / 2,
                });
            }
        }
        if l.timeout <= Duration::ZERO {
            problems.push(Problem::Timeout);
        } else if self.sync == SyncMode::Marker && l.timeout <= self.idle_marker {
            problems.push(Problem::TimeoutBelowIdleMarker);
        }
        if self.unit.is_pdu() {
            if l.reassembly_timeout <= Duration::ZERO {
                problems.push(Problem::Timeout);
            }
            if l.reassembly_budget < aurora_wire::PAYLOAD_LEN {
                problems.push(Problem::ReassemblyBudget(l.reassembly_budget));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { problems })
        }
    }
}

/// One thing wrong with a [`Config`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// `stripes` is empty.
    #[error("a striped VC needs at least one stripe")]
    NoStripes,
    /// More stripes than a marker can name.
    #[error("{0} stripes is more than the {MAX_STRIPES} a marker can name")]
    TooManyStripes(usize),
    /// A member VC's VPI does not fit the header format.
    #[error("stripe {index}'s VC {vc} has a VPI above {max}")]
    VpiRange {
        /// Stripe index.
        index: usize,
        /// Its VC.
        vc: VcId,
        /// The format's largest VPI.
        max: u16,
    },
    /// The quantum is zero or too large.
    #[error("quantum {0} is outside 1..={MAX_QUANTUM} bytes")]
    Quantum(u32),
    /// The marker interval is zero or does not fit the marker's 16-bit field.
    #[error("marker interval {0} is outside 1..=65535 units")]
    MarkerInterval(u32),
    /// The idle-marker delay is not positive.
    #[error("the idle-marker delay must be positive")]
    IdleMarker,
    /// SDUs could not fit an AAL5 PDU.
    #[error("max_sdu {max_sdu} is above the {limit} bytes this method can carry in one AAL5 PDU")]
    MaxSdu {
        /// The configured value.
        max_sdu: usize,
        /// The largest allowed.
        limit: usize,
    },
    /// A buffer limit is zero.
    #[error("the resequencing buffer must hold at least one unit and one byte")]
    EmptyBuffer,
    /// The buffer is too large for the sequence number space.
    #[error("a buffer of {units} units is more than half the sequence space ({half})")]
    Window {
        /// Configured units.
        units: usize,
        /// Half the sequence space.
        half: u64,
    },
    /// A timer is not positive.
    #[error("timeouts must be positive")]
    Timeout,
    /// With markers, a timeout no longer than the idle-marker delay gives up
    /// the end of every burst before its marker can confirm it.
    #[error("with marker sync the timeout must be longer than the idle-marker delay")]
    TimeoutBelowIdleMarker,
    /// The reassembly budget cannot hold one cell.
    #[error("a reassembly budget of {0} bytes cannot hold one cell")]
    ReassemblyBudget(usize),
}

/// Every problem found in a [`Config`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad striping configuration: {}", join(.problems))]
pub struct ConfigError {
    /// The problems, in the order the fields are declared.
    pub problems: Vec<Problem>,
}

fn join(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_every_problem_is_reported() {
        let vcs = vec![VcId::new(0, 100); 4];
        for unit in [UnitKind::Cell, UnitKind::Pdu, UnitKind::IpPacket] {
            for sync in [SyncMode::None, SyncMode::Sequence, SyncMode::Marker] {
                Config::new(unit, sync, vcs.clone()).check().unwrap();
            }
        }
        let mut c = Config::new(UnitKind::Pdu, SyncMode::Marker, vec![VcId::new(300, 1)]);
        c.quantum = 0;
        c.marker_interval = 0;
        c.limits.max_held_units = 0;
        c.max_sdu = 70_000;
        let e = c.check().unwrap_err();
        assert_eq!(e.problems.len(), 5, "{e}");
        assert!(e
            .to_string()
            .starts_with("bad striping configuration: stripe 0's VC 300.1"));

        let mut c = Config::new(UnitKind::Cell, SyncMode::Sequence, vec![VcId::new(0, 40)]);
        c.limits.max_held_units = 40_000;
        assert_eq!(
            c.check().unwrap_err().problems,
            vec![Problem::Window {
                units: 40_000,
                half: 32_768
            }]
        );
        let c = Config::new(UnitKind::Cell, SyncMode::None, vec![]);
        assert_eq!(c.check().unwrap_err().problems, vec![Problem::NoStripes]);
    }
}
