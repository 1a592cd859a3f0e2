//! Addresses and QoS in linux-atm's text forms.
//!
//! * PVC address: `[itf.]vpi.vci`, e.g. `0.42` or `1.0.42`.
//! * QoS: `class[,aal][:param=value,...]`, e.g. `ubr`, `cbr:pcr=100000`,
//!   `ubr,aal5:max_sdu=9180`. Classes `ubr`, `cbr`, `vbr`, `abr`; AAL
//!   `aal0`, `aal5` (linux-atm's) and `aal34` (Aurora's addition). Parameters
//!   `pcr`, `min_pcr`, `max_pcr`, `cdv`, `max_sdu`; rates in cells per second
//!   with an optional `k`/`M`/`G` multiplier. This is the subset of `qos(7)`
//!   without separate `tx:`/`rx:` sections: one setting covers both directions.
//!
//! Ranges: `pcr`, `min_pcr` and `max_pcr` 1 to [`MAX_PCR`] cells per second
//! (`min_pcr` at most `max_pcr`), `cdv` 0 to [`MAX_CDV_US`] microseconds,
//! `max_sdu` 1 to 65535 bytes. Anything else is refused with a sentence.

use std::fmt;
use std::str::FromStr;

use aurora_wire::cell::{Format, VcId};

/// A PVC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PvcAddr {
    /// Interface number (0 when not given).
    pub itf: u16,
    /// The VC.
    pub vc: VcId,
}

/// A text that is not a valid address or QoS, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

fn num(text: &str, what: &str, whole: &str) -> Result<u32, ParseError> {
    text.parse::<u32>()
        .map_err(|_| ParseError(format!("{what} \"{text}\" in \"{whole}\" is not a number")))
}

impl FromStr for PvcAddr {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let parts: Vec<&str> = s.trim().split('.').collect();
        let (itf, vpi, vci) = match parts[..] {
            [vpi, vci] => (0, num(vpi, "VPI", s)?, num(vci, "VCI", s)?),
            [itf, vpi, vci] => (
                num(itf, "interface", s)?,
                num(vpi, "VPI", s)?,
                num(vci, "VCI", s)?,
            ),
            _ => {
                return Err(ParseError(format!(
                    "address \"{s}\" is not of the form [itf.]vpi.vci"
                )))
            }
        };
        if vpi > u32::from(Format::Nni.max_vpi()) {
            return Err(ParseError(format!("VPI {vpi} in \"{s}\" is above 4095")));
        }
        if vci > 65535 {
            return Err(ParseError(format!("VCI {vci} in \"{s}\" is above 65535")));
        }
        if itf > 65535 {
            return Err(ParseError(format!(
                "interface {itf} in \"{s}\" is above 65535"
            )));
        }
        Ok(PvcAddr {
            itf: itf as u16,
            vc: VcId::new(vpi as u16, vci as u16),
        })
    }
}

impl fmt::Display for PvcAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.itf, self.vc.vpi, self.vc.vci)
    }
}

/// Traffic class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

/// Adaptation layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// Cell delay variation in microseconds.
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
        let class = match self.class {
            TrafficClass::Ubr => "ubr",
            TrafficClass::Cbr => "cbr",
            TrafficClass::Vbr => "vbr",
            TrafficClass::Abr => "abr",
        };
        let aal = match self.aal {
            Aal::Aal0 => "aal0",
            Aal::Aal34 => "aal34",
            Aal::Aal5 => "aal5",
        };
        write!(f, "{class},{aal}:max_sdu={}", self.max_sdu)?;
        for (k, v) in [
            ("pcr", self.pcr),
            ("min_pcr", self.min_pcr),
            ("max_pcr", self.max_pcr),
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

/// A peak cell rate parameter: 1 to [`MAX_PCR`] cells per second.
fn cell_rate(name: &str, v: &str, whole: &str) -> Result<u64, ParseError> {
    let r = rate(v, whole)?;
    if r == 0 || r > MAX_PCR {
        return Err(ParseError(format!(
            "{name} {v} in QoS \"{whole}\" must be 1 to {MAX_PCR} cells per second"
        )));
    }
    Ok(r)
}

fn rate(v: &str, whole: &str) -> Result<u64, ParseError> {
    let (digits, mult) = match v.char_indices().last() {
        Some((i, 'k')) => (&v[..i], 1_000),
        Some((i, 'M')) => (&v[..i], 1_000_000),
        Some((i, 'G')) => (&v[..i], 1_000_000_000),
        _ => (v, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|d| d.checked_mul(mult))
        .ok_or_else(|| ParseError(format!("value \"{v}\" in QoS \"{whole}\" is not a rate")))
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
            match k.trim() {
                "pcr" => q.pcr = Some(cell_rate("pcr", v.trim(), whole)?),
                "min_pcr" => q.min_pcr = Some(cell_rate("min_pcr", v.trim(), whole)?),
                "max_pcr" => q.max_pcr = Some(cell_rate("max_pcr", v.trim(), whole)?),
                "cdv" => {
                    let n = rate(v.trim(), whole)?;
                    if n > MAX_CDV_US {
                        return Err(ParseError(format!(
                            "cdv {n} in QoS \"{whole}\" must be 0 to {MAX_CDV_US} microseconds"
                        )));
                    }
                    q.cdv = Some(n);
                }
                "max_sdu" => {
                    let n = rate(v.trim(), whole)?;
                    if n == 0 || n > 65535 {
                        return Err(ParseError(format!(
                            "max_sdu {n} in QoS \"{whole}\" must be 1 to 65535"
                        )));
                    }
                    q.max_sdu = n as usize;
                }
                other => {
                    return Err(ParseError(format!(
                        "\"{other}\" in QoS \"{whole}\" is not a known parameter (pcr, min_pcr, max_pcr, cdv, max_sdu)"
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
        if q.class == TrafficClass::Cbr && q.pcr.is_none() && q.max_pcr.is_none() {
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
    fn addresses() {
        assert_eq!(
            "0.42".parse::<PvcAddr>().unwrap(),
            PvcAddr {
                itf: 0,
                vc: VcId::new(0, 42)
            }
        );
        assert_eq!("1.2.300".parse::<PvcAddr>().unwrap().to_string(), "1.2.300");
        for bad in ["42", "0.70000", "a.b", "0.4096.1", "1.2.3.4", ""] {
            let e = bad.parse::<PvcAddr>().unwrap_err();
            assert!(e.0.contains(bad) || bad.is_empty(), "{e}");
        }
    }

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
        // Zero, absurd and inconsistent rates are refused with a sentence
        // naming the parameter and the text.
        for (bad, word) in [
            ("cbr:pcr=0", "pcr 0"),
            ("ubr:max_pcr=0k", "max_pcr 0k"),
            ("ubr:min_pcr=0", "min_pcr 0"),
            ("cbr:pcr=2G", "pcr 2G"),
            ("cbr:pcr=18446744073709551615", "pcr 18446744073709551615"),
            ("ubr:cdv=11000000", "cdv 11000000"),
            ("ubr:min_pcr=5k,max_pcr=1k", "min_pcr 5000"),
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
        ] {
            let q: Qos = text.parse().unwrap();
            assert_eq!(q.to_string().parse::<Qos>().unwrap(), q);
        }
    }
}
