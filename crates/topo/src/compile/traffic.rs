//! The traffic step: flows of AAL5 PDUs and OAM pings, each on a PVC whose
//! sender is a traffic host.

use std::collections::BTreeMap;
use std::ops::Range;

use aurora_net::oam::Ping;
use aurora_net::traffic::Flow;
use aurora_time::{Duration, Instant};

use super::checks::{count_in, schedule};
use super::Reader;
use crate::{MAX_FLOW_COUNT, MAX_PING_COUNT};

impl Reader<'_> {
    /// Traffic `what` (a flow or ping) on `pvc`: the PVC, the interval and
    /// the start, checked; `None` when anything is wrong (reported).
    fn traffic_on(
        &mut self,
        span: Range<usize>,
        what: &str,
        pvc: &str,
        interval: &str,
        start: &Option<String>,
    ) -> Option<(usize, Duration, Duration)> {
        let c = &mut self.c;
        let found = self.by_name.get(pvc).copied();
        if found.is_none() && !self.pvc_names.contains(pvc) {
            c.at(
                span.clone(),
                format!("{what} names PVC \"{pvc}\", which is not defined"),
            );
        }
        let (interval, start) = schedule(c, span.clone(), what, interval, start);
        let i = found?;
        let from = self.pvcs[i].from;
        if self.ipcfg.contains_key(from) {
            c.at(
                span,
                format!(
                    "{what} on PVC \"{pvc}\": its sender \"{from}\" is an IP node; {what}s come from \
                     hosts without ip (run ping or iperf3 over the TUN interface instead)"
                ),
            );
            return None;
        }
        Some((i, interval?, start?))
    }

    /// Flows: at most one on each PVC, since the receiver checks the PDUs'
    /// sequence numbers per VC.
    pub(super) fn flows(&mut self) {
        let file = self.file;
        let mut flow_at: BTreeMap<&str, usize> = BTreeMap::new();
        for f in &file.flow {
            let span = f.span();
            let d = f.get_ref();
            let c = &mut self.c;
            let (line, _) = c.place(span.start);
            if let Some(first) = flow_at.get(d.pvc.as_str()) {
                c.at(
                    span.clone(),
                    format!(
                        "the flows at lines {first} and {line} are both on PVC \"{}\"; the receiver \
                         checks PDU sequence numbers per VC, so two flows on one PVC would look \
                         corrupted: give each flow its own PVC",
                        d.pvc
                    ),
                );
                continue;
            }
            flow_at.insert(&d.pvc, line);
            if d.sdu < 8 || d.sdu > 65535 {
                c.at(
                    span.clone(),
                    format!("flow SDU of {} bytes is outside 8 to 65535", d.sdu),
                );
            }
            let count_ok = count_in(c, span.clone(), "flow count", d.count, MAX_FLOW_COUNT);
            let Some((i, interval, start)) =
                self.traffic_on(span.clone(), "flow", &d.pvc, &d.interval, &d.start)
            else {
                continue;
            };
            if !count_ok {
                continue;
            }
            // A flow's number is its PVC's: cells carry it in their tags.
            let Ok(id) = u16::try_from(i) else {
                self.c.at(
                    span,
                    format!("flow on PVC number {i}: at most 65,536 PVCs may carry flows"),
                );
                continue;
            };
            self.flows.push((
                &d.pvc,
                Flow {
                    id,
                    vc: self.pvcs[i].from_vc,
                    sdu_len: d.sdu,
                    count: d.count,
                    start: Instant::ZERO + start,
                    interval,
                },
            ));
        }
    }

    /// Pings: a segment ping needs an ATM switch after the sender.
    pub(super) fn pings(&mut self) {
        let file = self.file;
        for g in &file.ping {
            let span = g.span();
            let d = g.get_ref();
            let count_ok = count_in(
                &mut self.c,
                span.clone(),
                "ping count",
                d.count,
                MAX_PING_COUNT,
            );
            let Some((i, interval, start)) =
                self.traffic_on(span.clone(), "ping", &d.pvc, &d.interval, &d.start)
            else {
                continue;
            };
            if !count_ok {
                continue;
            }
            if d.segment && !self.pvcs[i].first_atm {
                self.c.at(
                    span,
                    format!(
                        "a segment ping on PVC \"{}\" needs an ATM switch as the first node after \
                         the sender (only ATM switches answer segment loopback)",
                        d.pvc
                    ),
                );
                continue;
            }
            self.pings.push((
                &d.pvc,
                Ping {
                    vc: self.pvcs[i].from_vc,
                    end_to_end: !d.segment,
                    count: d.count,
                    start: Instant::ZERO + start,
                    interval,
                },
            ));
        }
    }
}
