//! Addresses and QoS in linux-atm's text forms.
//!
//! * PVC address: `[itf.]vpi.vci`, e.g. `0.42` or `1.0.42`.
//! * QoS: `class[,aal][:param=value,...]`, e.g. `ubr`, `cbr:pcr=100000`,
//!   `ubr,aal5:max_sdu=9180`, `vbr:pcr=10k,scr=2k,mbs=100`. The QoS parser
//!   is `aurora_tm`'s ([`aurora_tm::qos`], which says what it accepts),
//!   re-exported here; `aurora_tm::Contract` turns a [`Qos`] into what a
//!   shaper or a policer keeps to.
//!
//! Address ranges: VPI up to 4095, VCI and interface up to 65535. Anything
//! else is refused with a sentence.

use std::fmt;
use std::str::FromStr;

use aurora_wire::cell::{Format, VcId};

pub use aurora_tm::qos::{Aal, ParseError, Qos, TrafficClass, MAX_CDV_US, MAX_MBS, MAX_PCR};

/// A PVC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PvcAddr {
    /// Interface number (0 when not given).
    pub itf: u16,
    /// The VC.
    pub vc: VcId,
}

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
}
