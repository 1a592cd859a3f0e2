//! QoS in linux-atm's text form: `class[,aal][:param=value,...]`.
//!
//! This is the one QoS parser in Aurora: the host interface
//! (`aurora_hostif::Qos`) re-exports it, and [`crate::Contract`] is built
//! from what it returns.
//!
//! * Classes `ubr`, `cbr`, `vbr`, `abr`; AAL `aal0`, `aal5` (linux-atm's)
//!   and `aal34` (Aurora's addition).
//! * Parameters `pcr`, `min_pcr`, `max_pcr`, `cdv`, `max_sdu` (linux-atm's),
//!   `scr` and `mbs` (Aurora's, for `vbr` only: linux-atm has no VBR
//!   parameters) and `cdvt` (Aurora's, another name for `cdv`, any class).
//!   A parameter given twice keeps its last value.
//! * Rates (`pcr`, `min_pcr`, `max_pcr`, `scr`): a number, optionally with
//!   a decimal fraction, then optionally a multiplier `k`, `M` or `G`
//!   (`K`, `m`, `g` too, as in linux-atm: all are powers of 1000), then
//!   optionally a unit: `cps` (cells per second, the default) or `bps`
//!   (bits per second of cell payload, 384 bits a cell, as linux-atm
//!   converts). A rate that is not a whole number of cells per second is
//!   rounded down, except `min_pcr`, which is rounded up (linux-atm's
//!   rule: a limit never grows, a floor never shrinks). So `pcr=100000`,
//!   `pcr=100k`, `pcr=100kcps` and `pcr=38.4Mbps` are all 100,000 cells/s.
//! * Counts (`cdv` and `cdvt` in microseconds, `max_sdu` in bytes, `mbs`
//!   in cells): a whole number, optionally with a multiplier (`cdv=1.5k`
//!   is 1,500 µs); no unit.
//! * There are no separate `tx:`/`rx:` sections (one setting covers both
//!   directions) and no `max` rate.
//!
//! Ranges: rates 1 to [`MAX_PCR`] cells per second (`min_pcr` at most
//! `max_pcr`, `scr` at most the peak rate), `cdv` 0 to [`MAX_CDV_US`]
//! microseconds, `max_sdu` 1 to 65535 bytes, `mbs` 1 to [`MAX_MBS`]
//! cells. `cbr` needs a peak rate (`pcr` or `max_pcr`). Anything else is
//! refused with a [`ParseError`]: one sentence naming the text and the
//! problem.

use std::fmt;
use std::str::FromStr;

/// A text that is not a valid address or QoS, with the reason in one
/// sentence that names the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// Traffic class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TrafficClass {
    /// Unspecified bit rate (best effort).
    #[default]
    Ubr,
    /// Constant bit rate.
    Cbr,
    /// Variable bit rate.
    Vbr,
    /// Available bit rate.
    Abr,
}

impl TrafficClass {
    /// The class's name in QoS text.
    pub fn name(self) -> &'static str {
        match self {
            TrafficClass::Ubr => "ubr",
            TrafficClass::Cbr => "cbr",
            TrafficClass::Vbr => "vbr",
            TrafficClass::Abr => "abr",
        }
    }
}

/// Adaptation layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Aal {
    /// Raw cells.
    Aal0,
    /// AAL3/4.
    Aal34,
    /// AAL5.
    #[default]
    Aal5,
}

/// A parsed QoS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Qos {
    /// Traffic class.
    pub class: TrafficClass,
    /// Adaptation layer.
    pub aal: Aal,
    /// Peak cell rate in cells per second, if given.
    pub pcr: Option<u64>,
    /// Lowest acceptable peak cell rate.
    pub min_pcr: Option<u64>,
    /// Highest acceptable peak cell rate.
    pub max_pcr: Option<u64>,
    /// Sustainable cell rate in cells per second (VBR only).
    pub scr: Option<u64>,
    /// Maximum burst size in cells (VBR only).
    pub mbs: Option<u64>,
    /// Cell delay variation (tolerance) in microseconds.
    pub cdv: Option<u64>,
    /// Largest SDU in bytes.
    pub max_sdu: usize,
}

impl Default for Qos {
    fn default() -> Self {
        Qos {
            class: TrafficClass::Ubr,
            aal: Aal::Aal5,
            pcr: None,
            min_pcr: None,
            max_pcr: None,
            scr: None,
            mbs: None,
            cdv: None,
            max_sdu: 65535,
        }
    }
}

impl Qos {
    /// The rate to pace at, if the QoS gives one (pcr, else max_pcr).
    pub fn pace(&self) -> Option<u64> {
        self.pcr.or(self.max_pcr)
    }
}

impl fmt::Display for Qos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let aal = match self.aal {
            Aal::Aal0 => "aal0",
            Aal::Aal34 => "aal34",
            Aal::Aal5 => "aal5",
        };
        write!(f, "{},{aal}:max_sdu={}", self.class.name(), self.max_sdu)?;
        for (k, v) in [
            ("pcr", self.pcr),
            ("min_pcr", self.min_pcr),
            ("max_pcr", self.max_pcr),
            ("scr", self.scr),
            ("mbs", self.mbs),
            ("cdv", self.cdv),
        ] {
            if let Some(v) = v {
                write!(f, ",{k}={v}")?;
            }
        }
        Ok(())
    }
}

/// The highest cell rate a QoS may give: 10^9 cells per second, about ten
/// times OC-768c's.
pub const MAX_PCR: u64 = 1_000_000_000;

/// The largest cell delay variation a QoS may give, in microseconds (10 s).
pub const MAX_CDV_US: u64 = 10_000_000;

/// The largest maximum burst size a QoS may give, in cells (2^24 − 1).
pub const MAX_MBS: u64 = (1 << 24) - 1;

/// Bits of payload in a cell: what linux-atm divides a `bps` rate by.
const PAYLOAD_BITS: u128 = 48 * 8;

/// A value's unit suffix.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    None,
    Cps,
    Bps,
}

/// Reads `digits[.digits][kKmMgG][cps|bps]` as the exact fraction
/// `num / den` and its unit, or `None` if it is not of that form.
fn quantity(v: &str) -> Option<(u128, u128, Unit)> {
    let (v, unit) = if let Some(rest) = v.strip_suffix("cps") {
        (rest, Unit::Cps)
    } else if let Some(rest) = v.strip_suffix("bps") {
        (rest, Unit::Bps)
    } else {
        (v, Unit::None)
    };
    let (v, mult) = match v.as_bytes().last() {
        Some(b'k' | b'K') => (&v[..v.len() - 1], 1_000),
        Some(b'm' | b'M') => (&v[..v.len() - 1], 1_000_000),
        Some(b'g' | b'G') => (&v[..v.len() - 1], 1_000_000_000),
        _ => (v, 1u128),
    };
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    // At least one digit; at most nine after the point (as linux-atm) and
    // few enough before it that the arithmetic below stays in range.
    if int.len() + frac.len() == 0 || !digits(int) || !digits(frac) || frac.len() > 9 {
        return None;
    }
    if int.len() > 30 {
        return None;
    }
    let mut num: u128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        num = num.checked_mul(10)?.checked_add(u128::from(b - b'0'))?;
    }
    let den = 10u128.pow(frac.len() as u32);
    let num = num.checked_mul(mult)?;
    let den = if unit == Unit::Bps {
        den * PAYLOAD_BITS
    } else {
        den
    };
    Some((num, den, unit))
}

/// A rate parameter in cells per second: 1 to [`MAX_PCR`], rounded down
/// (or up, with `up`) to a whole cell rate.
fn cell_rate(name: &str, v: &str, whole: &str, up: bool) -> Result<u64, ParseError> {
    let (num, den, _) = quantity(v).ok_or_else(|| {
        ParseError(format!(
            "{name} \"{v}\" in QoS \"{whole}\" is not a rate (a number, optionally with k, M or G, then cps or bps)"
        ))
    })?;
    let cells = if up { num.div_ceil(den) } else { num / den };
    if cells == 0 || cells > u128::from(MAX_PCR) {
        return Err(ParseError(format!(
            "{name} {v} in QoS \"{whole}\" must be 1 to {MAX_PCR} cells per second"
        )));
    }
    Ok(cells as u64)
}

/// A count parameter: a whole number, optionally with a multiplier, at most
/// `max`.
fn count(name: &str, v: &str, whole: &str, what: &str, max: u64) -> Result<u64, ParseError> {
    let n = match quantity(v) {
        Some((num, den, Unit::None)) if num % den == 0 => num / den,
        _ => {
            return Err(ParseError(format!(
                "{name} \"{v}\" in QoS \"{whole}\" is not a whole number of {what}"
            )))
        }
    };
    if n > u128::from(max) {
        return Err(ParseError(format!(
            "{name} {v} in QoS \"{whole}\" is above {max} {what}"
        )));
    }
    Ok(n as u64)
}

impl FromStr for Qos {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let whole = s.trim();
        let (head, params) = match whole.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (whole, None),
        };
        let mut q = Qos::default();
        for (i, word) in head.split(',').map(str::trim).enumerate() {
            match (i, word) {
                (0, "ubr") => q.class = TrafficClass::Ubr,
                (0, "cbr") => q.class = TrafficClass::Cbr,
                (0, "vbr") => q.class = TrafficClass::Vbr,
                (0, "abr") => q.class = TrafficClass::Abr,
                (1, "aal0") => q.aal = Aal::Aal0,
                (1, "aal5") => q.aal = Aal::Aal5,
                (1, "aal34") => q.aal = Aal::Aal34,
                _ => {
                    return Err(ParseError(format!(
                        "\"{word}\" in QoS \"{whole}\" is not a traffic class (ubr, cbr, vbr, abr) or AAL (aal0, aal5, aal34)"
                    )))
                }
            }
        }
        for p in params.into_iter().flat_map(|p| p.split(',')).map(str::trim) {
            let (k, v) = p.split_once('=').ok_or_else(|| {
                ParseError(format!(
                    "parameter \"{p}\" in QoS \"{whole}\" is not of the form name=value"
                ))
            })?;
            let (k, v) = (k.trim(), v.trim());
            match k {
                "pcr" => q.pcr = Some(cell_rate(k, v, whole, false)?),
                "min_pcr" => q.min_pcr = Some(cell_rate(k, v, whole, true)?),
                "max_pcr" => q.max_pcr = Some(cell_rate(k, v, whole, false)?),
                "scr" => q.scr = Some(cell_rate(k, v, whole, false)?),
                "mbs" => {
                    let n = count(k, v, whole, "cells", MAX_MBS)?;
                    if n == 0 {
                        return Err(ParseError(format!(
                            "mbs {v} in QoS \"{whole}\" must be at least 1 cell"
                        )));
                    }
                    q.mbs = Some(n);
                }
                "cdv" | "cdvt" => q.cdv = Some(count(k, v, whole, "microseconds", MAX_CDV_US)?),
                "max_sdu" => {
                    let n = count(k, v, whole, "bytes", 65535)?;
                    if n == 0 {
                        return Err(ParseError(format!(
                            "max_sdu {v} in QoS \"{whole}\" must be 1 to 65535"
                        )));
                    }
                    q.max_sdu = n as usize;
                }
                other => {
                    return Err(ParseError(format!(
                        "\"{other}\" in QoS \"{whole}\" is not a known parameter (pcr, min_pcr, max_pcr, scr, mbs, cdv, cdvt, max_sdu)"
                    )))
                }
            }
        }
        if let (Some(lo), Some(hi)) = (q.min_pcr, q.max_pcr) {
            if lo > hi {
                return Err(ParseError(format!(
                    "min_pcr {lo} in QoS \"{whole}\" is above max_pcr {hi}"
                )));
            }
        }
        if q.class != TrafficClass::Vbr {
            if let Some(name) = [("scr", q.scr), ("mbs", q.mbs)]
                .iter()
                .find_map(|&(n, v)| v.map(|_| n))
            {
                return Err(ParseError(format!(
                    "{name} in QoS \"{whole}\" is only for vbr, not {}",
                    q.class.name()
                )));
            }
        }
        if let (Some(scr), Some(peak)) = (q.scr, q.pace()) {
            if scr > peak {
                return Err(ParseError(format!(
                    "scr {scr} in QoS \"{whole}\" is above the peak cell rate {peak}"
                )));
            }
        }
        if q.class == TrafficClass::Cbr && q.pace().is_none() {
            return Err(ParseError(format!(
                "QoS \"{whole}\" is CBR but gives no pcr"
            )));
        }
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_forms() {
        let q: Qos = "ubr,aal5:max_sdu=9180".parse().unwrap();
        assert_eq!(
            (q.class, q.aal, q.max_sdu),
            (TrafficClass::Ubr, Aal::Aal5, 9180)
        );
        let q: Qos = "cbr:pcr=100k".parse().unwrap();
        assert_eq!(q.pcr, Some(100_000));
        assert_eq!(q.pace(), Some(100_000));
        assert_eq!("ubr".parse::<Qos>().unwrap(), Qos::default());
        assert!("cbr".parse::<Qos>().is_err());
        assert!("ubr:max_sdu=70000".parse::<Qos>().is_err());
        assert!("ubr:bogus=1"
            .parse::<Qos>()
            .unwrap_err()
            .0
            .contains("bogus"));
        assert!("xbr".parse::<Qos>().is_err());
        // Zero, absurd and inconsistent values are refused with a sentence
        // naming the parameter and the text.
        for (bad, word) in [
            ("cbr:pcr=0", "pcr 0"),
            ("ubr:max_pcr=0k", "max_pcr 0k"),
            ("ubr:min_pcr=0", "min_pcr 0"),
            ("cbr:pcr=2G", "pcr 2G"),
            ("cbr:pcr=18446744073709551615", "pcr 18446744073709551615"),
            ("ubr:cdv=11000000", "cdv 11000000"),
            ("ubr:min_pcr=5k,max_pcr=1k", "min_pcr 5000"),
            ("cbr:pcr=100bps", "pcr 100bps"),
            ("cbr:pcr=1k,scr=1k", "scr in"),
            ("vbr:pcr=1k,scr=2k,mbs=3", "scr 2000"),
            ("vbr:pcr=1k,scr=1k,mbs=0", "mbs 0"),
            ("vbr:pcr=1k,scr=1k,mbs=16777216", "mbs 16777216"),
            ("vbr:pcr=1k,scr=1k,mbs=2.5", "mbs \"2.5\""),
            ("ubr:cdv=5cps", "cdv \"5cps\""),
            ("cbr:pcr=1e5", "pcr \"1e5\""),
            ("cbr:pcr=-5", "pcr \"-5\""),
            ("cbr:pcr=", "pcr \"\""),
            ("cbr:pcr=.", "pcr \".\""),
            ("cbr:pcr=1.0000000001k", "pcr \"1.0000000001k\""),
            ("cbr:pcr", "\"pcr\""),
        ] {
            let e = bad.parse::<Qos>().unwrap_err().0;
            assert!(e.contains(word) && e.contains(bad), "{bad}: {e}");
        }
        assert_eq!("cbr:pcr=1G".parse::<Qos>().unwrap().pcr, Some(MAX_PCR));
        assert_eq!("cbr:pcr=1".parse::<Qos>().unwrap().pcr, Some(1));
        assert!("ubr,aal34".parse::<Qos>().is_ok());
        for text in [
            "ubr",
            "cbr,aal0:pcr=1000,cdv=20",
            "vbr,aal34:max_sdu=100,max_pcr=5k",
            "vbr:pcr=10k,scr=2k,mbs=100,cdvt=300",
        ] {
            let q: Qos = text.parse().unwrap();
            assert_eq!(q.to_string().parse::<Qos>().unwrap(), q);
        }
    }

    #[test]
    fn units_as_linux_atm() {
        let pcr = |t: &str| t.parse::<Qos>().unwrap().pcr.unwrap();
        // All of these are 100,000 cells per second.
        for t in [
            "cbr:pcr=100000",
            "cbr:pcr=100k",
            "cbr:pcr=100K",
            "cbr:pcr=100kcps",
            "cbr:pcr=0.1Mcps",
            "cbr:pcr=.1M",
            "cbr:pcr=38.4Mbps",
            "cbr:pcr=38400000bps",
        ] {
            assert_eq!(pcr(t), 100_000, "{t}");
        }
        // 10 Mbit/s of payload is 26,041.67 cells/s: a peak rate rounds
        // down, a floor rounds up.
        assert_eq!(pcr("cbr:pcr=10Mbps"), 26_041);
        let q: Qos = "ubr:min_pcr=10Mbps".parse().unwrap();
        assert_eq!(q.min_pcr, Some(26_042));
        assert_eq!(pcr("cbr:pcr=1.9"), 1);
        assert_eq!(pcr("cbr:pcr=1m"), 1_000_000);
        let q: Qos = "vbr:pcr=10k,scr=2.5k,mbs=1k,cdvt=1.5k".parse().unwrap();
        assert_eq!(
            (q.class, q.scr, q.mbs, q.cdv),
            (TrafficClass::Vbr, Some(2_500), Some(1_000), Some(1_500))
        );
        // cdvt is cdv by another name.
        assert_eq!(
            "ubr:cdvt=7".parse::<Qos>().unwrap(),
            "ubr:cdv=7".parse::<Qos>().unwrap()
        );
    }
}
