//! Traffic contracts: what a connection promised to send, from which the
//! policer and the shaper build their GCRAs.

use std::fmt;
use std::str::FromStr;

use aurora_time::Duration;

use crate::gcra::{DualGcra, Gcra, Interval, VirtualScheduling};
use crate::qos::{ParseError, Qos, TrafficClass, MAX_CDV_US, MAX_MBS, MAX_PCR};

/// A connection's traffic contract: its cell rate envelope and the cell
/// delay variation tolerance (CDVT) the network allows it.
///
/// Built checked, by [`Contract::peak`], [`Contract::sustained`],
/// [`Contract::from_qos`] or from QoS text (`"vbr:pcr=10k,scr=2k,mbs=50"
/// .parse()`), so its rates are 1 to [`MAX_PCR`] cells per second and
/// its SCR is at most its PCR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Contract {
    envelope: Envelope,
}

/// The rate envelope of a [`Contract`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Envelope {
    /// No rate to keep to (UBR or ABR without a peak rate): every cell
    /// conforms.
    #[default]
    Unlimited,
    /// A peak cell rate (CBR; UBR and ABR with a peak rate): GCRA(1/PCR,
    /// CDVT).
    Peak {
        /// Peak cell rate, cells per second.
        pcr: u64,
        /// Cell delay variation tolerance.
        cdvt: Duration,
    },
    /// A peak and a sustainable cell rate with a maximum burst (VBR): the
    /// dual GCRA, GCRA(1/PCR, CDVT) and GCRA(1/SCR, BT + CDVT).
    Sustained {
        /// Peak cell rate, cells per second.
        pcr: u64,
        /// Sustainable cell rate, cells per second (at most `pcr`).
        scr: u64,
        /// Maximum burst size in cells (at least 1).
        mbs: u32,
        /// Cell delay variation tolerance.
        cdvt: Duration,
    },
}

/// The burst tolerance BT = (MBS − 1)(1/SCR − 1/PCR) of a VBR contract,
/// rounded up to whole nanoseconds (so a policer never refuses a burst the
/// exact figure allows); 0 when `scr ≥ pcr`, `mbs ≤ 1` or a rate is 0;
/// `Duration::MAX` if it would not fit.
pub fn burst_tolerance(pcr: u64, scr: u64, mbs: u32) -> Duration {
    if scr == 0 || scr >= pcr || mbs <= 1 {
        return Duration::ZERO;
    }
    // (MBS − 1)(PCR − SCR) · 10^9 / (SCR · PCR) ns, exactly, then the
    // ceiling. The numerator is below 2^32 · 2^64 · 2^30 and the
    // denominator below 2^128, so neither overflows; the checks cost
    // nothing and keep it so if the types change.
    let num = u128::from(mbs - 1)
        .checked_mul(u128::from(pcr - scr))
        .and_then(|n| n.checked_mul(1_000_000_000));
    let den = u128::from(scr).checked_mul(u128::from(pcr));
    match (num, den) {
        (Some(num), Some(den)) => {
            Duration::from_nanos(i64::try_from(num.div_ceil(den)).unwrap_or(i64::MAX))
        }
        _ => Duration::MAX,
    }
}

/// The largest CDVT a contract takes: [`MAX_CDV_US`] microseconds.
const MAX_CDVT: Duration = Duration::from_micros(MAX_CDV_US as i64);

impl Contract {
    /// No rate to keep to: every cell conforms, and a shaper never waits.
    pub const UNLIMITED: Contract = Contract {
        envelope: Envelope::Unlimited,
    };

    /// A peak-rate contract (CBR): `pcr` cells per second with tolerance
    /// `cdvt`. `None` unless `pcr` is 1 to [`MAX_PCR`] and `cdvt` 0 to
    /// [`MAX_CDV_US`] microseconds.
    pub fn peak(pcr: u64, cdvt: Duration) -> Option<Contract> {
        let ok = (1..=MAX_PCR).contains(&pcr) && (Duration::ZERO..=MAX_CDVT).contains(&cdvt);
        ok.then_some(Contract {
            envelope: Envelope::Peak { pcr, cdvt },
        })
    }

    /// A VBR contract: peak `pcr`, sustainable `scr`, maximum burst `mbs`
    /// cells, tolerance `cdvt`. `None` unless both rates are 1 to
    /// [`MAX_PCR`] with `scr ≤ pcr`, `mbs` is 1 to [`MAX_MBS`] and `cdvt`
    /// 0 to [`MAX_CDV_US`] microseconds.
    pub fn sustained(pcr: u64, scr: u64, mbs: u32, cdvt: Duration) -> Option<Contract> {
        let ok = (1..=MAX_PCR).contains(&pcr)
            && (1..=pcr).contains(&scr)
            && (1..=MAX_MBS).contains(&u64::from(mbs))
            && (Duration::ZERO..=MAX_CDVT).contains(&cdvt);
        ok.then_some(Contract {
            envelope: Envelope::Sustained {
                pcr,
                scr,
                mbs,
                cdvt,
            },
        })
    }

    /// The contract a parsed QoS asks for:
    ///
    /// * `ubr` and `abr`: the peak rate (`pcr`, else `max_pcr`) if given,
    ///   else unlimited. (ABR's real conformance test, the dynamic GCRA
    ///   that follows the allowed cell rate, is not done here; its peak
    ///   rate is an upper bound.)
    /// * `cbr`: the peak rate.
    /// * `vbr`: the peak rate, `scr` and `mbs`, all three required.
    ///
    /// The CDVT is `cdv` (or `cdvt`), in microseconds, 0 if not given.
    /// `min_pcr`, `max_sdu` and the AAL do not enter the contract.
    pub fn from_qos(q: &Qos) -> Result<Contract, ParseError> {
        Self::from_qos_named(q, &q.to_string())
    }

    fn from_qos_named(q: &Qos, text: &str) -> Result<Contract, ParseError> {
        let cdvt = Duration::from_micros(q.cdv.unwrap_or(0).min(MAX_CDV_US) as i64);
        let bad = |what: &str| ParseError(format!("QoS \"{text}\" {what}"));
        let made = match (q.class, q.pace()) {
            (TrafficClass::Ubr | TrafficClass::Abr, None) => Some(Contract::UNLIMITED),
            (TrafficClass::Ubr | TrafficClass::Abr | TrafficClass::Cbr, Some(pcr)) => {
                Contract::peak(pcr, cdvt)
            }
            (TrafficClass::Cbr, None) => return Err(bad("is CBR but gives no pcr")),
            (TrafficClass::Vbr, pcr) => {
                let (Some(pcr), Some(scr), Some(mbs)) = (pcr, q.scr, q.mbs) else {
                    return Err(bad("is VBR but does not give all of pcr, scr and mbs"));
                };
                if scr > pcr {
                    return Err(bad(&format!("gives scr {scr} above pcr {pcr}")));
                }
                u32::try_from(mbs)
                    .ok()
                    .and_then(|mbs| Contract::sustained(pcr, scr, mbs, cdvt))
            }
        };
        made.ok_or_else(|| bad("gives a rate, burst or tolerance out of range"))
    }

    /// The rate envelope.
    pub fn envelope(&self) -> Envelope {
        self.envelope
    }

    /// The peak cell rate, if there is one.
    pub fn pcr(&self) -> Option<u64> {
        match self.envelope {
            Envelope::Unlimited => None,
            Envelope::Peak { pcr, .. } | Envelope::Sustained { pcr, .. } => Some(pcr),
        }
    }

    /// The sustainable cell rate, for VBR.
    pub fn scr(&self) -> Option<u64> {
        match self.envelope {
            Envelope::Sustained { scr, .. } => Some(scr),
            _ => None,
        }
    }

    /// The maximum burst size, for VBR.
    pub fn mbs(&self) -> Option<u32> {
        match self.envelope {
            Envelope::Sustained { mbs, .. } => Some(mbs),
            _ => None,
        }
    }

    /// The cell delay variation tolerance (0 when unlimited).
    pub fn cdvt(&self) -> Duration {
        match self.envelope {
            Envelope::Unlimited => Duration::ZERO,
            Envelope::Peak { cdvt, .. } | Envelope::Sustained { cdvt, .. } => cdvt,
        }
    }

    /// The burst tolerance BT, for VBR (see [`burst_tolerance`]).
    pub fn burst_tolerance(&self) -> Option<Duration> {
        match self.envelope {
            Envelope::Sustained { pcr, scr, mbs, .. } => Some(burst_tolerance(pcr, scr, mbs)),
            _ => None,
        }
    }

    /// The conformance tests of this contract with CDVT `cdvt` (the
    /// contract's own for a policer, 0 for a shaper).
    pub(crate) fn tests(&self, cdvt: Duration) -> Tests {
        let rate = |r| Interval::from_rate(r).unwrap_or(Interval::ZERO);
        match self.envelope {
            Envelope::Unlimited => Tests::None,
            Envelope::Peak { pcr, .. } => Tests::Peak(VirtualScheduling::new(rate(pcr), cdvt)),
            Envelope::Sustained { pcr, scr, mbs, .. } => Tests::Dual(DualGcra::new(
                rate(pcr),
                rate(scr),
                burst_tolerance(pcr, scr, mbs),
                cdvt,
            )),
        }
    }
}

/// The GCRAs a contract needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tests {
    None,
    Peak(VirtualScheduling),
    Dual(DualGcra<VirtualScheduling>),
}

impl FromStr for Contract {
    type Err = ParseError;
    /// Parses QoS text (see [`crate::qos`]) into the contract it asks for
    /// (see [`Contract::from_qos`]).
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let q: Qos = s.parse()?;
        Contract::from_qos_named(&q, s.trim())
    }
}

impl fmt::Display for Contract {
    /// The contract as QoS text that parses back to it (when its CDVT is a
    /// whole number of microseconds, as text gives it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |d: Duration| d.as_nanos() / 1_000;
        match self.envelope {
            Envelope::Unlimited => f.write_str("ubr"),
            Envelope::Peak { pcr, cdvt } => write!(f, "cbr:pcr={pcr},cdv={}", us(cdvt)),
            Envelope::Sustained {
                pcr,
                scr,
                mbs,
                cdvt,
            } => write!(f, "vbr:pcr={pcr},scr={scr},mbs={mbs},cdvt={}", us(cdvt)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_text() {
        let c: Contract = "ubr".parse().unwrap();
        assert_eq!(c, Contract::UNLIMITED);
        let c: Contract = "ubr:pcr=1k".parse().unwrap();
        assert_eq!(
            c.envelope(),
            Envelope::Peak {
                pcr: 1_000,
                cdvt: Duration::ZERO
            }
        );
        let c: Contract = "cbr:pcr=100000,cdv=250".parse().unwrap();
        assert_eq!(
            c.envelope(),
            Envelope::Peak {
                pcr: 100_000,
                cdvt: Duration::from_micros(250)
            }
        );
        let c: Contract = "vbr:pcr=10Mbps,scr=5kcps,mbs=100,cdvt=10".parse().unwrap();
        assert_eq!(
            c.envelope(),
            Envelope::Sustained {
                pcr: 26_041,
                scr: 5_000,
                mbs: 100,
                cdvt: Duration::from_micros(10)
            }
        );
        assert_eq!(c.to_string().parse::<Contract>().unwrap(), c);
        assert_eq!(
            "abr:max_pcr=5k".parse::<Contract>().unwrap().pcr(),
            Some(5_000)
        );
        assert_eq!("abr".parse::<Contract>().unwrap(), Contract::UNLIMITED);
        for (bad, words) in [
            (
                "vbr:pcr=10k,scr=2k",
                "does not give all of pcr, scr and mbs",
            ),
            ("vbr:scr=2k,mbs=5", "does not give all"),
            ("vbr,aal5:pcr=10k, scr=20k ,mbs=5", "scr 20000"),
            ("cbr", "no pcr"),
            ("cbr:pcr=10k,mbs=4", "only for vbr"),
            ("zbr:pcr=1", "not a traffic class"),
        ] {
            let e = bad.parse::<Contract>().unwrap_err().0;
            assert!(e.contains(bad.trim()) && e.contains(words), "{bad}: {e}");
        }
    }

    #[test]
    fn constructors_check() {
        assert!(Contract::peak(0, Duration::ZERO).is_none());
        assert!(Contract::peak(MAX_PCR + 1, Duration::ZERO).is_none());
        assert!(Contract::peak(1, Duration::from_nanos(-1)).is_none());
        assert!(Contract::sustained(10, 11, 1, Duration::ZERO).is_none());
        assert!(Contract::sustained(10, 10, 0, Duration::ZERO).is_none());
        assert!(Contract::sustained(10, 0, 1, Duration::ZERO).is_none());
        assert!(Contract::sustained(10, 10, 1, Duration::ZERO).is_some());
    }

    #[test]
    fn burst_tolerance_is_exact_then_rounded_up() {
        // PCR 10^8, SCR 2.5·10^7, MBS 3: 2 · (40 − 10) = 60 ns.
        assert_eq!(
            burst_tolerance(100_000_000, 25_000_000, 3),
            Duration::from_nanos(60)
        );
        // PCR 3, SCR 1, MBS 2: 1 s − ⅓ s = 666,666,666.7 ns, rounded up.
        assert_eq!(burst_tolerance(3, 1, 2), Duration::from_nanos(666_666_667));
        assert_eq!(burst_tolerance(10, 10, 100), Duration::ZERO);
        assert_eq!(burst_tolerance(10, 5, 1), Duration::ZERO);
        // The largest: about (2^32 − 2) seconds.
        let most = burst_tolerance(u64::MAX, 1, u32::MAX).as_nanos();
        assert!((4_294_967_293_000_000_000..=4_294_967_294_000_000_000).contains(&most));
        let c = Contract::sustained(100_000, 10_000, 11, Duration::ZERO).unwrap();
        // 10 · (100 µs − 10 µs) = 900 µs.
        assert_eq!(c.burst_tolerance(), Some(Duration::from_micros(900)));
    }
}
