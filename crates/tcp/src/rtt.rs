//! The retransmission timer's estimate (RFC 6298): smoothed round-trip
//! time, its variation, the timeout they give, and its back-off.

use aurora_time::Duration;

/// Round-trip estimator and retransmission timeout.
#[derive(Clone, Debug)]
pub struct Rtt {
    srtt: Option<Duration>,
    rttvar: Duration,
    /// The timeout before back-off.
    base: Duration,
    /// Back-offs since the last sample (the timeout doubles with each).
    backoff: u32,
    min: Duration,
    max: Duration,
    granularity: Duration,
}

impl Rtt {
    /// Before any sample: `initial` (RFC 6298 says 1 s), kept within
    /// `[min, max]`; `granularity` is the clock's `G`.
    pub fn new(initial: Duration, min: Duration, max: Duration, granularity: Duration) -> Self {
        Rtt {
            srtt: None,
            rttvar: Duration::ZERO,
            base: initial.max(min).min(max),
            backoff: 0,
            min,
            max,
            granularity,
        }
    }

    /// A new measurement `r`: the estimate moves (RFC 6298 2.2 and 2.3)
    /// and any back-off ends.
    pub fn sample(&mut self, r: Duration) {
        let r = r.max(Duration::from_nanos(1));
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = Duration::from_nanos(r.as_nanos() / 2);
            }
            Some(s) => {
                let err = (s.as_nanos() - r.as_nanos()).abs();
                self.rttvar = Duration::from_nanos((3 * self.rttvar.as_nanos() + err) / 4);
                self.srtt = Some(Duration::from_nanos((7 * s.as_nanos() + r.as_nanos()) / 8));
            }
        }
        let s = self.srtt.unwrap_or(r);
        let k = Duration::from_nanos(4 * self.rttvar.as_nanos()).max(self.granularity);
        self.base = (s + k).max(self.min).min(self.max);
        self.backoff = 0;
    }

    /// The timer expired: the timeout doubles (RFC 6298 5.5), up to the
    /// maximum.
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }

    /// Back-offs since the last sample.
    pub fn backoffs(&self) -> u32 {
        self.backoff
    }

    /// The current timeout, back-off included.
    pub fn rto(&self) -> Duration {
        let mut t = self.base;
        for _ in 0..self.backoff.min(32) {
            if t >= self.max {
                break;
            }
            t = t + t;
        }
        t.min(self.max)
    }

    /// The smoothed round-trip time, once there is a sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The round-trip variation.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: i64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn first_sample_and_smoothing_follow_rfc_6298() {
        let mut r = Rtt::new(ms(1000), ms(200), ms(60_000), ms(1));
        assert_eq!(r.rto(), ms(1000));
        r.sample(ms(100));
        // SRTT 100, RTTVAR 50: RTO = 100 + 4·50 = 300.
        assert_eq!(
            (r.srtt(), r.rttvar(), r.rto()),
            (Some(ms(100)), ms(50), ms(300))
        );
        r.sample(ms(200));
        // RTTVAR = 3/4·50 + 1/4·100 = 62.5; SRTT = 7/8·100 + 1/8·200 = 112.5.
        assert_eq!(r.rttvar(), Duration::from_micros(62_500));
        assert_eq!(r.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(r.rto(), Duration::from_micros(362_500));
    }

    #[test]
    fn back_off_doubles_to_the_maximum_and_a_sample_ends_it() {
        let mut r = Rtt::new(ms(1000), ms(1000), ms(60_000), ms(1));
        let mut seen = vec![];
        for _ in 0..8 {
            r.back_off();
            seen.push(r.rto().as_nanos() / 1_000_000);
        }
        assert_eq!(seen, [2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
        r.sample(ms(10));
        assert_eq!(r.rto(), ms(1000), "the minimum holds");
        assert_eq!(r.backoffs(), 0);
    }
}
