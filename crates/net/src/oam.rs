//! OAM F5 loopback at the nodes: answering loopback requests, and a pinger
//! that sends them on a VC and times the answers.
//!
//! Who answers: a host answers end-to-end requests (F5: PTI 5; F4: VCI 4)
//! that reach it; a switch answers segment requests (F5: PTI 4; F4: VCI 3)
//! on the port they arrive at, so each link is a segment. End-to-end cells pass switches
//! like user cells, along the VC's table entries (PVCs get entries in both
//! directions, so the answer comes back the way the request went).

use aurora_time::{Duration, Instant};
use aurora_wire::cell::{build_cell, Format, Header, VcId};
use aurora_wire::oam::{OamFlow, OamFunction, OamRepr};
use aurora_wire::{CellBytes, HEADER_LEN};
use std::collections::BTreeMap;

/// Requests a pinger keeps waiting for; an older one unanswered when a new
/// one would pass this is counted lost.
pub const MAX_OUTSTANDING: usize = 4096;

/// True if the cell's PTI says OAM (F5 segment or end-to-end).
#[inline]
pub fn is_f5_oam(cell: &CellBytes) -> bool {
    matches!((cell[3] >> 1) & 7, 0b100 | 0b101)
}

/// True for any OAM cell of a UNI header: F5 by its PTI, or F4 by its VCI
/// (3 or 4) with a user-data PTI.
#[inline]
pub fn is_oam(cell: &CellBytes) -> bool {
    let vci =
        (u16::from(cell[1] & 0x0F) << 12) | (u16::from(cell[2]) << 4) | u16::from(cell[3] >> 4);
    is_f5_oam(cell) || (cell[3] & 0x08 == 0 && matches!(vci, 3 | 4))
}

/// The answer to `cell` if it is an F5 loopback request of `flow` with a
/// good CRC-10: the same header, the indication cleared.
pub fn loopback_answer(cell: &CellBytes, format: Format, flow: OamFlow) -> Option<CellBytes> {
    let h = Header::parse(&[cell[0], cell[1], cell[2], cell[3]], format);
    if OamFlow::of(&h) != Some(flow) {
        return None;
    }
    let payload: &[u8; 48] = cell[HEADER_LEN..].try_into().ok()?;
    let reply = OamRepr::parse(payload).ok()?.loopback_reply()?;
    build_cell(&h, &reply.emit()).ok()
}

/// A ping: loopback requests on a VC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ping {
    /// The VC to send on.
    pub vc: VcId,
    /// End-to-end (answered by the far host) or segment (by the next switch).
    pub end_to_end: bool,
    /// Requests to send.
    pub count: u64,
    /// When the first goes.
    pub start: Instant,
    /// Time between requests.
    pub interval: Duration,
}

/// What a ping found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PingStats {
    /// Requests sent.
    pub sent: u64,
    /// Requests not sent: the way out refused them (the VC's shaper had
    /// no room).
    pub refused: u64,
    /// Answers matched to a request.
    pub answered: u64,
    /// Requests given up on ([`MAX_OUTSTANDING`] newer ones were waiting).
    pub lost: u64,
    /// Answers matching no request waiting (duplicates, or too late).
    pub unmatched: u64,
    /// Shortest round trip.
    pub rtt_min: Duration,
    /// Longest round trip.
    pub rtt_max: Duration,
    /// Sum of round trips (for the mean).
    pub rtt_sum: Duration,
}

impl PingStats {
    /// Mean round trip, if any answer came.
    pub fn rtt_mean(&self) -> Option<Duration> {
        (self.answered > 0)
            .then(|| Duration::from_nanos(self.rtt_sum.as_nanos() / self.answered as i64))
    }
}

/// Sends a [`Ping`]'s requests and matches their answers.
#[derive(Debug)]
pub struct Pinger {
    spec: Ping,
    next: Instant,
    tag: u32,
    /// Requests waiting, by tag; tags rise, so the first is the oldest.
    waiting: BTreeMap<u32, Instant>,
    stats: PingStats,
    source: [u8; 16],
}

impl Pinger {
    /// A pinger; `source` goes in each request's source ID.
    pub fn new(spec: Ping, source: [u8; 16]) -> Self {
        Pinger {
            spec,
            next: spec.start,
            tag: 0,
            waiting: BTreeMap::new(),
            stats: PingStats::default(),
            source,
        }
    }

    /// What it found so far.
    pub fn stats(&self) -> PingStats {
        self.stats
    }

    /// The VC it pings on.
    pub fn vc(&self) -> VcId {
        self.spec.vc
    }

    /// Whether its requests go end to end (else to the segment's end).
    pub fn end_to_end(&self) -> bool {
        self.spec.end_to_end
    }

    /// Requests made so far: sent or refused.
    fn made(&self) -> u64 {
        self.stats.sent + self.stats.refused
    }

    /// When the next request is due, if any are left.
    pub fn due(&self) -> Option<Instant> {
        (self.made() < self.spec.count).then_some(self.next)
    }

    /// Sends the requests due by `now` through `send`, which says whether
    /// it took each (a request it refused is counted, and not waited for).
    pub fn poll(&mut self, now: Instant, send: &mut dyn FnMut(CellBytes) -> bool) {
        let flow = if self.spec.end_to_end {
            OamFlow::F5EndToEnd
        } else {
            OamFlow::F5Segment
        };
        let mut budget = 1024;
        while self.made() < self.spec.count && self.next <= now && budget > 0 {
            budget -= 1;
            self.tag = self.tag.wrapping_add(1);
            let req = OamRepr::loopback_request(self.tag, self.source).emit();
            let sent = build_cell(&flow.header(self.spec.vc), &req).is_ok_and(&mut *send);
            if sent {
                if self.waiting.len() >= MAX_OUTSTANDING && self.waiting.pop_first().is_some() {
                    self.stats.lost += 1;
                }
                self.waiting.insert(self.tag, now);
                self.stats.sent += 1;
            } else {
                self.stats.refused += 1;
            }
            self.next += self.spec.interval;
        }
    }

    /// Takes an arriving answer on this pinger's VC; false if `cell` is not
    /// a loopback answer of this pinger's flow (segment or end-to-end) that
    /// carries this pinger's source ID (several pingers may share a VC).
    pub fn answer(&mut self, now: Instant, cell: &CellBytes) -> bool {
        let pti = if self.spec.end_to_end { 0b101 } else { 0b100 };
        if (cell[3] >> 1) & 7 != pti {
            return false;
        }
        let Ok(payload) = <&[u8; 48]>::try_from(&cell[HEADER_LEN..]) else {
            return false;
        };
        let Ok(OamRepr {
            function:
                OamFunction::Loopback {
                    indication: false,
                    correlation_tag,
                    source_id,
                    ..
                },
        }) = OamRepr::parse(payload)
        else {
            return false;
        };
        if source_id != self.source {
            return false;
        }
        match self.waiting.remove(&correlation_tag) {
            Some(sent) => {
                let rtt = now - sent;
                let s = &mut self.stats;
                s.rtt_min = if s.answered == 0 {
                    rtt
                } else {
                    s.rtt_min.min(rtt)
                };
                s.rtt_max = s.rtt_max.max(rtt);
                s.rtt_sum = s.rtt_sum + rtt;
                s.answered += 1;
            }
            None => self.stats.unmatched += 1,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::{AtmSwitch, SwitchDrop};
    use crate::traffic::TrafficHost;
    use crate::{Node, Outbox};

    const VC: VcId = VcId { vpi: 1, vci: 77 };

    fn request(flow: OamFlow, tag: u32) -> CellBytes {
        let p = OamRepr::loopback_request(tag, [9; 16]).emit();
        build_cell(&flow.header(VC), &p).unwrap()
    }

    fn at(us: i64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    #[test]
    fn answer_keeps_the_header_and_clears_the_indication() {
        let req = request(OamFlow::F5EndToEnd, 0xDEAD_BEEF);
        let ans = loopback_answer(&req, Format::Uni, OamFlow::F5EndToEnd).unwrap();
        assert_eq!(ans[..5], req[..5], "same header and HEC");
        let r = OamRepr::parse(ans[HEADER_LEN..].try_into().unwrap()).unwrap();
        assert!(matches!(
            r.function,
            OamFunction::Loopback {
                indication: false,
                correlation_tag: 0xDEAD_BEEF,
                source_id,
                ..
            } if source_id == [9; 16]
        ));
        // Not a request any more, the wrong flow, or a bad CRC-10: no answer.
        assert!(loopback_answer(&ans, Format::Uni, OamFlow::F5EndToEnd).is_none());
        assert!(loopback_answer(&req, Format::Uni, OamFlow::F5Segment).is_none());
        let mut bad = req;
        bad[20] ^= 1;
        assert!(loopback_answer(&bad, Format::Uni, OamFlow::F5EndToEnd).is_none());
    }

    #[test]
    fn a_host_answers_end_to_end_and_counts_other_oam() {
        let mut h = TrafficHost::new(Format::Uni);
        let mut out = Outbox::default();
        let seg = request(OamFlow::F5Segment, 2);
        let f4 = request(OamFlow::F4EndToEnd, 3);
        let f4_seg = request(OamFlow::F4Segment, 4);
        h.receive(
            at(0),
            0,
            &[request(OamFlow::F5EndToEnd, 1), seg, f4, f4_seg],
            &mut out,
        );
        let sent: Vec<_> = out.drain().collect();
        assert_eq!(sent.len(), 2, "the F5 and the F4 end-to-end requests");
        assert_eq!(sent[1].1[..4], f4[..4], "on the F4 flow's VCI 4");
        assert_eq!(h.oam_counters(), (2, 2));
        assert_eq!(h.rx_stats().cells_in, 0, "no OAM cell reached reassembly");
    }

    #[test]
    fn a_switch_answers_segment_requests_on_the_arrival_port() {
        let mut s = AtmSwitch::new(4, Format::Uni);
        let mut out = Outbox::default();
        let req = request(OamFlow::F5Segment, 5);
        let ans = loopback_answer(&req, Format::Uni, OamFlow::F5Segment).unwrap();
        s.receive(at(0), 2, &[req, ans], &mut out);
        let sent: Vec<_> = out.drain().collect();
        assert_eq!(sent, vec![(2, ans)]);
        let c = s.counters(2).unwrap();
        assert_eq!(c.oam_looped, 1);
        assert_eq!(c.dropped(SwitchDrop::SegmentOam), 1, "the answer ends here");
        assert_eq!(c.cells_in, 2);
        // F4: a segment request (VCI 3) is answered on any VP; an
        // end-to-end one (VCI 4) is not the switch's to answer.
        let f4 = request(OamFlow::F4Segment, 6);
        s.receive(at(0), 1, &[f4, request(OamFlow::F4EndToEnd, 7)], &mut out);
        let sent: Vec<_> = out.drain().collect();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0, 1);
        assert_eq!(
            sent[0].1,
            loopback_answer(&f4, Format::Uni, OamFlow::F4Segment).unwrap()
        );
        assert_eq!(s.counters(1).unwrap().oam_looped, 1);
        assert_eq!(s.counters(1).unwrap().dropped(SwitchDrop::UnknownVc), 1);
    }

    #[test]
    fn a_pinger_times_its_answers_and_ignores_strangers() {
        let mut p = Pinger::new(
            Ping {
                vc: VC,
                end_to_end: true,
                count: 3,
                start: at(10),
                interval: Duration::from_micros(100),
            },
            [1; 16],
        );
        assert_eq!(p.due(), Some(at(10)));
        let mut sent = Vec::new();
        p.poll(at(250), &mut |c| {
            sent.push(c);
            true
        });
        assert_eq!(sent.len(), 3, "all three were due by 250 us");
        assert_eq!(p.due(), None);
        let answers: Vec<_> = sent
            .iter()
            .map(|c| loopback_answer(c, Format::Uni, OamFlow::F5EndToEnd).unwrap())
            .collect();
        assert!(p.answer(at(300), &answers[0]));
        assert!(p.answer(at(400), &answers[2]));
        assert!(p.answer(at(500), &answers[0]), "a duplicate");
        assert!(!p.answer(at(500), &sent[1]), "a request is not an answer");
        let seg = loopback_answer(
            &request(OamFlow::F5Segment, 2),
            Format::Uni,
            OamFlow::F5Segment,
        )
        .unwrap();
        assert!(!p.answer(at(500), &seg), "a segment answer is not ours");
        let s = p.stats();
        assert_eq!((s.sent, s.answered, s.unmatched, s.lost), (3, 2, 1, 0));
        // Times run from when a request left (the poll at 250 us), not from
        // when it was due.
        assert_eq!(s.rtt_min, Duration::from_micros(50));
        assert_eq!(s.rtt_max, Duration::from_micros(150));
        assert_eq!(s.rtt_mean(), Some(Duration::from_micros(100)));
    }
}
