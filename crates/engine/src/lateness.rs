//! How far behind its schedule each node of a wall-clock run ran, and
//! whether the run as a whole can be trusted.
//!
//! An engine that cannot keep up runs its events late; the results are
//! then not what the network would have done next to the things outside it
//! (a TUN device, another process, a person watching), and nothing else in
//! the report says so. So under the wall clock ([`crate::clock`]) every
//! event (a frame delivered, a timer, a line pulling its next frame, a
//! batch of frames handed to another process) is measured: lateness =
//! wall time when it ran − its time, kept per node in a fixed-size
//! log-scale [`Histogram`] (4 buckets per power of two of nanoseconds,
//! quantiles within 25 %), so memory stays bounded however long the run.
//!
//! # The verdict
//!
//! What makes a run's results wrong is lateness at the scale of the traffic
//! itself: a flow's PDUs sent in bursts instead of at their interval (so
//! buffers overflow that would not), round trips inflated, PDUs still in
//! flight at the end because the schedule slipped. A run is **not
//! faithful** when some node handled more than [`LATE_SHARE`] (1 %) of its
//! events more than [`LATE`] (1 ms) late (p99 above 1 ms), or any event more
//! than [`WORST`] (10 ms) late (at OC-12 that is 14,000 cell times), or the
//! run ended more than [`WORST`] after the duration asked for.
//!
//! Frames from other processes are a second way to be late that no event
//! shows: a worker that reads a link late (its process was not running)
//! hands its node frames that arrived long before, at the time it reads
//! them. So each read that hands a node frames is timed too (how long the
//! oldest frame had waited in its link, where the link can tell), and the
//! same rule applies to those reads: more than 1 % of them more than 1 ms
//! late, or any more than 10 ms, make the run unfaithful.

use std::time::Duration as StdDuration;

/// Lateness above this counts as late.
pub const LATE: StdDuration = StdDuration::from_millis(1);
/// A node with more than this share of late events makes the run
/// unfaithful.
pub const LATE_SHARE: f64 = 0.01;
/// Any single event, start lag or overrun above this makes the run
/// unfaithful.
pub const WORST: StdDuration = StdDuration::from_millis(10);

/// Sub-buckets per power of two, as a number of bits.
const SUB_BITS: u32 = 2;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets: exact below `SUB`, then `SUB` per power of two up to 2^64.
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) * SUB as usize;

/// A log-scale histogram of nanoseconds with a fixed number of buckets (4
/// per power of two): constant memory, quantiles within 25%, exact maximum.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: [u64; BUCKETS],
    n: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [0; BUCKETS],
            n: 0,
            max: 0,
        }
    }
}

fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    ((e - SUB_BITS + 1) as u64 * SUB + sub) as usize
}

/// The largest value bucket `i` holds.
fn bucket_top(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let e = (i / SUB) as u32 + SUB_BITS - 1;
    let low = (SUB + i % SUB) << (e - SUB_BITS);
    low.saturating_add((1u64 << (e - SUB_BITS)) - 1)
}

impl Histogram {
    /// Counts one value of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.n += 1;
        self.max = self.max.max(ns);
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The largest value counted (0 if none).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `q` quantile (0 to 1): the top of the bucket holding it, never
    /// above the maximum; 0 if nothing was counted.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_top(i).min(self.max);
            }
        }
        self.max
    }

    /// Adds `other`'s counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.n += other.n;
        self.max = self.max.max(other.max);
    }
}

fn ns(d: StdDuration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One node's lateness over a run.
#[derive(Clone, Debug, Default)]
pub struct NodeLateness {
    /// Lateness of the events handled, ns.
    pub events: Histogram,
    /// Events later than [`LATE`].
    pub late_events: u64,
    /// How long frames from other processes had waited in their links
    /// before this node's worker read them, ns: per read, the oldest
    /// frame's wait, where the link can tell (see
    /// `aurora_link::CellSource::waited`). The node saw them that late.
    pub inputs: Histogram,
    /// Reads whose oldest frame had waited more than [`LATE`].
    pub late_inputs: u64,
}

impl NodeLateness {
    /// An event handled `late` ns after it was due.
    pub fn late_by(&mut self, late: u64) {
        self.events.record(late);
        if late > ns(LATE) {
            self.late_events += 1;
        }
    }

    /// A read of an external input whose oldest frame had waited `waited`
    /// ns in its link.
    pub fn input_waited(&mut self, waited: u64) {
        self.inputs.record(waited);
        if waited > ns(LATE) {
            self.late_inputs += 1;
        }
    }

    /// Adds what `other` measured (the same node, seen by another worker).
    pub fn merge(&mut self, other: &NodeLateness) {
        self.events.merge(&other.events);
        self.late_events += other.late_events;
        self.inputs.merge(&other.inputs);
        self.late_inputs += other.late_inputs;
    }

    /// Why this node makes a run unfaithful, if it does: by the same rule
    /// for its events and for what it read from other processes.
    pub fn problem(&self) -> Option<String> {
        let bad = |h: &Histogram, late: u64| {
            h.max() > ns(WORST) || late as f64 > LATE_SHARE * h.count() as f64
        };
        let mut why = Vec::new();
        if bad(&self.events, self.late_events) {
            why.push(format!(
                "handled {} of {} timed events more than 1 ms late (worst {:.1} ms)",
                self.late_events,
                self.events.count(),
                self.events.max() as f64 / 1e6
            ));
        }
        if bad(&self.inputs, self.late_inputs) {
            why.push(format!(
                "read {} of {} batches from other processes more than 1 ms after they arrived (worst {:.1} ms)",
                self.late_inputs,
                self.inputs.count(),
                self.inputs.max() as f64 / 1e6
            ));
        }
        (!why.is_empty()).then(|| why.join(" and "))
    }

    /// The worse of its event lateness and its input waits, ns.
    pub fn worst(&self) -> u64 {
        self.events.max().max(self.inputs.max())
    }
}

/// A whole run's lateness.
#[derive(Clone, Debug, Default)]
pub struct Lateness {
    /// Per node, by id.
    pub nodes: Vec<NodeLateness>,
    /// The duration asked for, if the run had one (a run stopped by a
    /// signal has none).
    pub asked: Option<StdDuration>,
    /// When the run ended, since it began.
    pub ended: StdDuration,
    /// Workers that ran the nodes.
    pub workers: usize,
}

/// A run's verdict on itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The results are what the network would have done, to within
    /// [`LATE`].
    pub faithful: bool,
    /// One sentence saying so, or why not and what to do.
    pub sentence: String,
}

impl Lateness {
    /// How long after the duration asked for the run ended.
    pub fn overrun(&self) -> StdDuration {
        self.asked
            .map_or(StdDuration::ZERO, |a| self.ended.saturating_sub(a))
    }

    /// Whether the run kept up with real time, with `name` naming nodes by
    /// index in the sentence, and `advice` (such as "rerun with --virtual
    /// for exact results") ending it when the run did not.
    pub fn verdict(&self, name: &dyn Fn(usize) -> String, advice: &str) -> Verdict {
        let ms = |d: StdDuration| d.as_secs_f64() * 1e3;
        let mut why = Vec::new();
        let bad: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].problem().is_some())
            .collect();
        // Name the node that ran furthest behind.
        if let Some(&i) = bad.iter().max_by_key(|&&i| self.nodes[i].worst()) {
            let others = match bad.len() - 1 {
                0 => String::new(),
                1 => " (and 1 other node)".into(),
                k => format!(" (and {k} other nodes)"),
            };
            let p = self.nodes[i].problem().unwrap_or_default();
            why.push(format!("node {} {p}{others}", name(i)));
        }
        if self.overrun() > WORST {
            why.push(format!("the run ended {:.1} ms late", ms(self.overrun())));
        }
        if why.is_empty() {
            let (mut e, mut inputs) = (Histogram::default(), Histogram::default());
            for n in &self.nodes {
                e.merge(&n.events);
                inputs.merge(&n.inputs);
            }
            let us = |h: &Histogram| (h.quantile(0.99) as f64 / 1e3, h.max() as f64 / 1e3);
            let ((p99, worst), (in_p99, in_worst)) = (us(&e), us(&inputs));
            let read = if inputs.count() > 0 {
                format!(
                    ", input from other processes read p99 {in_p99:.0} us after it arrived (worst {in_worst:.0} us)"
                )
            } else {
                String::new()
            };
            return Verdict {
                faithful: true,
                sentence: format!(
                    "Real time kept up: events p99 {p99:.0} us late (worst {worst:.0} us){read}, the run ended {:.1} ms late.",
                    ms(self.overrun())
                ),
            };
        }
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Verdict {
            faithful: false,
            sentence: format!(
                "These results are NOT real-time-faithful ({} on {}, {}): {}; {advice}.",
                plural(self.nodes.len(), "node"),
                plural(self.workers.max(1), "thread"),
                plural(cores, "core"),
                why.join("; ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tops_hold_their_values() {
        for v in (0..5000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let b = bucket(v);
            assert!(b < BUCKETS, "{v}");
            assert!(bucket_top(b) >= v, "{v}");
            if b > 0 {
                assert!(bucket_top(b - 1) < v, "{v}");
            }
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_within_a_quarter() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((500e3..=625e3).contains(&p50), "{p50}");
        assert!((990e3..=1000e3).contains(&p99), "{p99}");
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.count(), 1000);
        assert_eq!(Histogram::default().quantile(0.99), 0);
    }

    #[test]
    fn late_share_and_worst_make_a_node_unfaithful() {
        let mut n = NodeLateness::default();
        for _ in 0..1000 {
            n.late_by(100_000);
        }
        assert!(n.problem().is_none());
        // 1% exactly is still faithful; one more is not.
        for _ in 0..10 {
            n.late_by(2_000_000);
        }
        assert!(n.problem().is_none(), "{:?}", n.problem());
        n.late_by(2_000_000);
        assert!(n.problem().is_some());

        let mut m = NodeLateness::default();
        m.late_by(11_000_000);
        assert!(m.problem().unwrap().contains("11.0 ms"));
    }

    #[test]
    fn input_read_late_makes_a_node_unfaithful_by_the_same_rule() {
        let mut n = NodeLateness::default();
        for _ in 0..100 {
            n.late_by(10_000);
            n.input_waited(50_000);
        }
        assert!(n.problem().is_none());
        n.input_waited(2_000_000);
        assert!(n.problem().is_none(), "{:?}", n.problem());
        n.input_waited(2_000_000);
        let p = n.problem().unwrap();
        assert!(
            p.starts_with("read 2 of 102 batches from other processes"),
            "{p}"
        );
        assert!(!p.contains("timed events"), "{p}");
        n.late_by(20_000_000);
        let p = n.problem().unwrap();
        assert!(
            p.contains("timed events") && p.contains(" and read 2"),
            "{p}"
        );
        assert_eq!(n.worst(), 20_000_000);
        let mut m = NodeLateness::default();
        m.merge(&n);
        assert_eq!((m.inputs.count(), m.late_inputs), (102, 2));
    }

    #[test]
    fn verdict_names_the_node_and_the_overrun() {
        let mut l = Lateness {
            nodes: vec![NodeLateness::default(); 3],
            asked: Some(StdDuration::from_millis(300)),
            ended: StdDuration::from_millis(301),
            workers: 3,
        };
        for n in &mut l.nodes {
            n.late_by(70_000);
        }
        let v = l.verdict(&|i| format!("n{i}"), "rerun with --virtual");
        assert!(v.faithful, "{}", v.sentence);
        l.nodes[1].late_by(40_000_000);
        l.ended = StdDuration::from_millis(900);
        let v = l.verdict(&|i| format!("n{i}"), "rerun with --virtual");
        assert!(!v.faithful);
        assert!(v.sentence.contains("node n1 handled"), "{}", v.sentence);
        assert!(v.sentence.contains("ended 600.0 ms late"), "{}", v.sentence);
        assert!(v.sentence.contains("--virtual"), "{}", v.sentence);
    }
}
