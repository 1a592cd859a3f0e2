//! Traffic shaping at a host: sending cells only when they conform to the
//! contract, so the network's policer passes them all.
//!
//! A [`Shaper`] runs the policer's own GCRAs (virtual scheduling, same
//! increments, same rounding) with a CDVT of 0: it spaces cells exactly at
//! the peak interval T (a CBR stream), or, for VBR, lets bursts of up to
//! MBS cells go at the peak rate and holds the long-run rate to SCR. A
//! stream that conforms with tolerance 0 conforms with any larger one, so
//! the shaped stream passes a policer of the same contract whatever its
//! CDVT, and all of the CDVT is left for the delay variation the network
//! adds on the way.
//!
//! Sans-I/O: the host asks [`Shaper::next_conforming`] (or
//! [`Shaper::try_send`]) with the time, sends at the answer, and tells the
//! shaper with [`Shaper::sent`].

use aurora_time::{Duration, Instant};

use crate::contract::{Contract, Tests};
use crate::gcra::Gcra;

/// A host's shaper for one VC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shaper {
    tests: Tests,
}

impl Shaper {
    /// A shaper keeping to `contract` with no tolerance.
    pub fn new(contract: &Contract) -> Shaper {
        Shaper {
            tests: contract.tests(Duration::ZERO),
        }
    }

    /// The earliest time at or after `now` at which the next cell may
    /// leave and conform.
    #[inline]
    pub fn next_conforming(&self, now: Instant) -> Instant {
        match &self.tests {
            Tests::None => now,
            Tests::Peak(g) => g.next_conforming(now),
            Tests::Dual(d) => d.next_conforming(now),
        }
    }

    /// Records a cell sent at `at`. True if it conformed; a cell sent too
    /// early (which the policer will not pass) changes nothing, as in the
    /// policer.
    #[inline]
    pub fn sent(&mut self, at: Instant) -> bool {
        match &mut self.tests {
            Tests::None => true,
            Tests::Peak(g) => g.conforms(at),
            Tests::Dual(d) => d.conforms(at),
        }
    }

    /// If a cell may leave at `now`, records it as sent and answers
    /// `Ok(())`; otherwise answers the time it may leave, and changes
    /// nothing.
    pub fn try_send(&mut self, now: Instant) -> Result<(), Instant> {
        let at = self.next_conforming(now);
        if at == now {
            self.sent(now);
            Ok(())
        } else {
            Err(at)
        }
    }

    /// Forgets every cell sent.
    pub fn reset(&mut self) {
        match &mut self.tests {
            Tests::None => {}
            Tests::Peak(g) => g.reset(),
            Tests::Dual(d) => d.reset(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: i64) -> Instant {
        Instant::from_nanos(ns)
    }

    /// Sends `n` cells as early as the shaper lets them, all wanted at 0.
    fn greedy(s: &mut Shaper, n: usize) -> Vec<i64> {
        (0..n)
            .map(|_| {
                let t = s.next_conforming(at(0));
                assert!(s.sent(t));
                t.as_nanos()
            })
            .collect()
    }

    #[test]
    fn cbr_is_spaced_at_t() {
        // 353,207 cells/s (OC-3c): T = 2,831.206... ns.
        let c = Contract::peak(353_207, Duration::from_micros(100)).unwrap();
        let sent = greedy(&mut Shaper::new(&c), 353_208);
        assert_eq!(&sent[..4], &[0, 2_831, 5_662, 8_493]);
        // Exactly 353,207 cells in the first second, the next one at 1 s.
        assert_eq!(sent[353_206], 999_997_168);
        assert_eq!(sent[353_207], 1_000_000_000);
    }

    #[test]
    fn vbr_bursts_mbs_at_pcr_then_keeps_to_scr() {
        // T_p = 10 ns, T_s = 40 ns, MBS 3: BT = 60 ns.
        let c = Contract::sustained(100_000_000, 25_000_000, 3, Duration::ZERO).unwrap();
        let sent = greedy(&mut Shaper::new(&c), 8);
        assert_eq!(sent, [0, 10, 20, 60, 100, 140, 180, 220]);
    }

    #[test]
    fn try_send_and_unlimited() {
        let c = Contract::peak(100_000_000, Duration::ZERO).unwrap();
        let mut s = Shaper::new(&c);
        assert_eq!(s.try_send(at(0)), Ok(()));
        assert_eq!(s.try_send(at(3)), Err(at(10)));
        assert_eq!(s.try_send(at(10)), Ok(()));
        // Too early: not counted.
        assert!(!s.sent(at(12)));
        assert_eq!(s.next_conforming(at(12)), at(20));
        s.reset();
        assert_eq!(s.next_conforming(at(12)), at(12));
        let mut u = Shaper::new(&Contract::UNLIMITED);
        assert_eq!(u.try_send(at(5)), Ok(()));
        assert_eq!(u.next_conforming(at(5)), at(5));
    }
}
