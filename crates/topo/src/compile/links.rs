//! The links step: each link's two ends (a node and a free port), its
//! rate, delay, buffer and error rates, and how its ends meet when each
//! node is its own process (UDP or shared memory).

use std::collections::BTreeSet;
use std::ops::Range;

use aurora_engine::LinkSpec;
use aurora_net::PortId;
use aurora_time::Duration;

use super::checks::{duration_or_zero, udp_pair, DELAY_RANGE};
use super::{End, Reader};
use crate::pvc::Kind;
use crate::{parse_rate, shm_path, Transport, MAX_BUFFER, MAX_RATE, MIN_RATE};

/// A link from a node to the next one on a path: the port at the node, the
/// port at the next node, the link's index in the file.
pub(super) type Join = (PortId, PortId, usize);

impl Reader<'_> {
    /// Reads link end `s` (`host` or `node:port`) of the link at `span`.
    pub(super) fn link_end(&mut self, span: Range<usize>, s: &str) -> Option<End> {
        let c = &mut self.c;
        let (name, port) = match s.split_once(':') {
            Some((n, p)) => match p.parse::<PortId>() {
                Ok(p) => (n.to_string(), Some(p)),
                Err(_) => {
                    c.at(span, format!("port \"{p}\" in \"{s}\" is not a number"));
                    return None;
                }
            },
            None => (s.to_string(), None),
        };
        let Some(kind) = self.kinds.get(&name).copied() else {
            c.at(
                span,
                format!("link end \"{s}\" names no host, switch or relaying link"),
            );
            return None;
        };
        match (kind.ports(), port) {
            (None, None | Some(0)) => Some((name, 0)),
            (None, Some(p)) => {
                c.at(span, format!("host \"{name}\" has one port, 0, not {p}"));
                None
            }
            (Some(n), Some(p)) if p < n => Some((name, p)),
            (Some(n), Some(p)) => {
                let what = kind.describe();
                c.at(
                    span,
                    match n.checked_sub(1) {
                        Some(last) => format!("{what} \"{name}\" has ports 0 to {last}, not {p}"),
                        None => format!("{what} \"{name}\" has no ports, so no port {p}"),
                    },
                );
                None
            }
            (Some(_), None) => {
                c.at(
                    span,
                    format!(
                        "link end \"{s}\" must name a port of {} \"{name}\", as \"{name}:0\"",
                        kind.describe()
                    ),
                );
                None
            }
        }
    }

    /// Every link: its ends, each port linked once, its numbers in range,
    /// and no two links joining a router to the same node.
    pub(super) fn links(&mut self) {
        let file = self.file;
        let mut used_ports: BTreeSet<End> = BTreeSet::new();
        for (li, l) in file.link.iter().enumerate() {
            let span = l.span();
            let d = l.get_ref();
            let a = self.link_end(span.clone(), &d.a);
            let b = self.link_end(span.clone(), &d.b);
            let c = &mut self.c;
            let rate = match parse_rate(&d.rate) {
                Ok(r) if (MIN_RATE..=MAX_RATE).contains(&r) => Some(r),
                Ok(_) => {
                    c.at(
                        span.clone(),
                        format!("rate \"{}\" is outside 1 to 1e9 cells per second", d.rate),
                    );
                    None
                }
                Err(m) => {
                    c.at(span.clone(), m);
                    None
                }
            };
            let delay = duration_or_zero(c, span.clone(), "delay", &d.delay, DELAY_RANGE);
            for (what, p) in [("loss", d.loss), ("bit_error", d.bit_error)] {
                if !(0.0..=1.0).contains(&p) {
                    c.at(
                        span.clone(),
                        format!("{what} {p} is not a probability between 0 and 1"),
                    );
                }
            }
            if d.buffer == 0 {
                c.at(span.clone(), "buffer must hold at least one cell".into());
            } else if d.buffer > MAX_BUFFER {
                c.at(
                    span.clone(),
                    format!("buffer {} is outside 1 to {MAX_BUFFER} cells", d.buffer),
                );
            }
            let udp =
                udp_pair(c, span.clone(), &d.udp_a, &d.udp_b).map(|(x, y)| Transport::Udp(x, y));
            let udp = match (&d.shm, udp) {
                (None, t) => t,
                (Some(p), None) if d.udp_a.is_none() && d.udp_b.is_none() => match shm_path(p) {
                    Ok(path) => Some(Transport::Shm(path)),
                    Err(m) => {
                        c.at(span.clone(), m);
                        None
                    }
                },
                (Some(_), _) => {
                    c.at(
                        span.clone(),
                        "give udp_a and udp_b, or shm, not both".into(),
                    );
                    None
                }
            };
            let (Some(a), Some(b)) = (a, b) else {
                continue;
            };
            for e in [&a, &b] {
                if !used_ports.insert(e.clone()) {
                    c.at(
                        span.clone(),
                        format!("port {} of \"{}\" is already linked", e.1, e.0),
                    );
                }
            }
            let pair = (a.0.clone(), b.0.clone());
            if let Some(first) = self.joins.get(&pair).and_then(|j| j.first()) {
                // Parallel links: fine between switching nodes (a PVC takes
                // the least used), but a router's port is its subnet.
                if let Some(r) = [&a.0, &b.0]
                    .into_iter()
                    .find(|n| matches!(self.kinds.get(*n), Some(Kind::Router(_))))
                {
                    let (line, _) = c.place(file.link[first.2].span().start);
                    c.at(
                        span.clone(),
                        format!(
                            "router \"{r}\" is joined to \"{}\" by this link and the one \
                             at line {line}; a PVC path names nodes, not ports, so it could \
                             not say which subnet it uses: join each router port to a \
                             different node",
                            if *r == a.0 { &b.0 } else { &a.0 }
                        ),
                    );
                }
            }
            self.joins.entry(pair).or_default().push((a.1, b.1, li));
            self.joins
                .entry((b.0.clone(), a.0.clone()))
                .or_default()
                .push((b.1, a.1, li));
            if let (Some(rate), Some(delay)) = (rate, delay) {
                self.links.push((
                    a,
                    b,
                    LinkSpec {
                        rate,
                        per_byte: Duration::ZERO,
                        handshake_per_byte: Duration::ZERO,
                        delay,
                        buffer: d.buffer.max(1),
                        buffer_bytes: None,
                        loss: d.loss.clamp(0.0, 1.0),
                        bit_error: d.bit_error.clamp(0.0, 1.0),
                    },
                    udp,
                ));
            }
        }
    }
}
