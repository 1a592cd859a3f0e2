//! The striping relay in virtual time, without the engine: a source sends
//! AAL5 PDUs on one plain VC over an OC-12c line into relay *A*, which
//! stripes them over four OC-3c lines of different delays to relay *B*,
//! which joins them and sends the VC on to a sink. The sink reassembles
//! every PDU and checks its bytes and its place in the stream.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use aurora_net::{Node, Outbox, PortId};
use aurora_sar::{Aal5Tx, PduOptions};
use aurora_stripe::{Config, JoinSpec, Relay, RelayError, SplitSpec, SyncMode, UnitKind};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, VcId};
use aurora_wire::llc::{Encapsulation, Protocol};
use aurora_wire::{CellBytes, CELL_LEN, HEADER_LEN};

const OC3_CELL: i64 = 2831;
const OC12_CELL: i64 = 708;
const WIDE_IN: VcId = VcId::new(0, 40);
const WIDE_OUT: VcId = VcId::new(0, 77);

/// The SDU of PDU `p`, `len` bytes: its number in the first 8 bytes (after
/// a 20-byte IPv4 header for IP), then a fill fixed by `p`.
fn sdu(p: u64, len: usize, ip: bool) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|k| (p as u8).wrapping_mul(13).wrapping_add(k as u8))
        .collect();
    let at = if ip {
        v[0] = 0x45;
        v[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        20
    } else {
        0
    };
    v[at..at + 8].copy_from_slice(&p.to_be_bytes());
    v
}

fn sdu_len(p: u64) -> usize {
    64 + (p as usize * 977) % 9000
}

/// Where a cell is going: a node (0 = A, 1 = B) and port, or the sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum To {
    Node(usize, PortId),
    Sink,
}

struct Run {
    unit: UnitKind,
    sync: SyncMode,
    delays_us: [i64; 4],
    pdus: u64,
    /// Time between PDUs at the source, ns.
    interval: i64,
    /// (stripe, index of the cell on that stripe) lost on the way.
    lose: Vec<(usize, u64)>,
}

#[derive(Debug, Default)]
struct Got {
    /// PDU numbers delivered intact, in order of delivery.
    delivered: Vec<u64>,
    /// PDUs that failed AAL5 or the byte check.
    failed: u64,
    /// Cells each relay dropped.
    dropped: [u64; 2],
    relays: Vec<Relay>,
}

fn cfg(unit: UnitKind, sync: SyncMode, vcs: Vec<VcId>) -> Config {
    let mut c = Config::new(unit, sync, vcs);
    c.marker_interval = if unit == UnitKind::Cell { 32 } else { 4 };
    c
}

fn relays(unit: UnitKind, sync: SyncMode) -> (Relay, Relay) {
    let members: Vec<VcId> = (0..4).map(|i| VcId::new(0, 100 + i)).collect();
    let mut a = Relay::new(4, Format::Uni);
    a.add_split(SplitSpec {
        name: "s".into(),
        wide_vc: WIDE_IN,
        cfg: cfg(unit, sync, members.clone()),
        encap: Encapsulation::Llc,
    })
    .unwrap();
    let mut b = Relay::new(4, Format::Uni);
    b.add_join(JoinSpec {
        name: "s".into(),
        cfg: cfg(unit, sync, members),
        wide_vc: WIDE_OUT,
        encap: Encapsulation::Llc,
    })
    .unwrap();
    (a, b)
}

/// The lines out of the relays: when each is free, what it loses.
struct Lines<'a> {
    r: &'a Run,
    free: [[Instant; 5]; 2],
    sent_on: [u64; 4],
    order: u64,
    heap: BinaryHeap<Reverse<(Instant, u64, To, CellBytes)>>,
}

impl Lines<'_> {
    /// Relay `k` sent `cell` out of `port` at `now`.
    fn send(&mut self, k: usize, port: PortId, cell: CellBytes, now: Instant) {
        let line = if port == 0 { OC12_CELL } else { OC3_CELL };
        let f = &mut self.free[k][usize::from(port)];
        *f = (*f).max(now) + Duration::from_nanos(line);
        let (to, delay) = match (k, port) {
            (0, 0) => return, // nothing goes back to the source
            (_, 0) => (To::Sink, 5_000),
            (_, p) => (
                To::Node(1 - k, p),
                self.r.delays_us[usize::from(p) - 1] * 1000,
            ),
        };
        if k == 0 && port > 0 {
            let s = usize::from(port) - 1;
            self.sent_on[s] += 1;
            if self.r.lose.contains(&(s, self.sent_on[s])) {
                return;
            }
        }
        self.order += 1;
        self.heap.push(Reverse((
            *f + Duration::from_nanos(delay),
            self.order,
            to,
            cell,
        )));
    }

    fn flush(&mut self, k: usize, out: &mut Outbox, got: &mut Got, now: Instant) {
        got.dropped[k] += out.drain_drops().count() as u64;
        let cells: Vec<_> = out.drain().collect();
        for (p, c) in cells {
            self.send(k, p, c, now);
        }
    }
}

fn run(r: &Run) -> Got {
    let ip = r.unit == UnitKind::IpPacket;
    let (a, b) = relays(r.unit, r.sync);
    let mut nodes = [a, b];
    let mut tx = Aal5Tx::new(WIDE_IN, Format::Uni).unwrap();
    let mut lines = Lines {
        r,
        free: [[Instant::ZERO; 5]; 2],
        sent_on: [0; 4],
        order: 0,
        heap: BinaryHeap::new(),
    };
    let mut free_src = Instant::ZERO;
    let mut out = Outbox::default();
    out.track_drops(true);
    let mut got = Got::default();
    let mut sink: Vec<CellBytes> = Vec::new();
    let mut next_pdu = 0u64;
    let mut cells = vec![[0u8; CELL_LEN]; 300];
    let mut now = Instant::ZERO;
    let mut steps = 0u64;
    loop {
        steps += 1;
        assert!(steps < 50_000_000, "did not settle");
        // The source: one PDU per interval, its cells one OC-12c cell time apart.
        while next_pdu < r.pdus && Instant::from_nanos(next_pdu as i64 * r.interval) <= now {
            let p = next_pdu;
            next_pdu += 1;
            let body = sdu(p, sdu_len(p), ip);
            let llc = Protocol::Ipv4.llc_header();
            let parts: [&[u8]; 2] = [&llc, &body];
            let parts = if ip { &parts[..] } else { &parts[1..] };
            let mut seg = tx.segment(parts, PduOptions::default()).unwrap();
            let n = seg.fill(&mut cells);
            for c in &cells[..n] {
                free_src = free_src.max(now) + Duration::from_nanos(OC12_CELL);
                lines.order += 1;
                lines
                    .heap
                    .push(Reverse((free_src, lines.order, To::Node(0, 0), *c)));
            }
        }
        for (k, node) in nodes.iter_mut().enumerate() {
            if node.poll_at().is_some_and(|t| t <= now) {
                node.poll(now, &mut out);
                lines.flush(k, &mut out, &mut got, now);
            }
        }
        while lines.heap.peek().is_some_and(|Reverse(e)| e.0 <= now) {
            let Reverse((_, _, to, c)) = lines.heap.pop().unwrap();
            match to {
                To::Node(k, port) => {
                    nodes[k].receive(now, port, &[c], &mut out);
                    lines.flush(k, &mut out, &mut got, now);
                }
                To::Sink => {
                    assert_eq!(&c[..4], &cell_header(WIDE_OUT, c[3])[..4]);
                    sink.push(c);
                    if c[3] & 0x02 != 0 {
                        let mut pdu = Vec::new();
                        for c in sink.drain(..) {
                            pdu.extend_from_slice(&c[HEADER_LEN..]);
                        }
                        match aurora_wire::aal5::decode(&pdu) {
                            Ok((_, s)) => {
                                let (body, at) = if ip {
                                    assert_eq!(&s[..8], &Protocol::Ipv4.llc_header());
                                    (&s[8..], 20)
                                } else {
                                    (s, 0)
                                };
                                let p = u64::from_be_bytes(body[at..at + 8].try_into().unwrap());
                                if body == sdu(p, sdu_len(p), ip).as_slice() {
                                    got.delivered.push(p);
                                } else {
                                    got.failed += 1;
                                }
                            }
                            Err(_) => got.failed += 1,
                        }
                    }
                }
            }
        }
        let src = (next_pdu < r.pdus).then(|| Instant::from_nanos(next_pdu as i64 * r.interval));
        let next = nodes
            .iter()
            .filter_map(|n| n.poll_at())
            .chain(lines.heap.peek().map(|Reverse(e)| e.0))
            .chain(src)
            .min();
        match next {
            Some(t) => now = t.max(now + Duration::from_nanos(1)),
            None => break,
        }
    }
    got.relays = nodes.into_iter().collect();
    got
}

fn cell_header(vc: VcId, byte3: u8) -> [u8; 4] {
    let mut c = [0u8; CELL_LEN];
    let h = aurora_wire::cell::Header {
        pti: aurora_wire::cell::Pti::from_bits(byte3 >> 1),
        clp: byte3 & 1 != 0,
        ..aurora_wire::cell::Header::data(vc)
    };
    h.emit(&mut c).unwrap();
    [c[0], c[1], c[2], c[3]]
}

/// The relays' books: every cell into A's split is striped, dropped or
/// waiting; every unit A striped is delivered by B, given up by name, held
/// or not yet seen, and with nothing on the way nothing is unseen.
fn check_books(g: &Got, lossless: bool) {
    let (_, tx, st, striped) = g.relays[0].splits().next().unwrap();
    assert_eq!(st.balance(striped), 0, "{st:?}");
    let (_, rx, jt) = g.relays[1].joins().next().unwrap();
    let t = tx.stats();
    let r = rx.stats();
    assert_eq!(r.arrival_balance(), rx.held() as i128);
    assert_eq!(jt.units, r.delivered);
    if lossless {
        assert_eq!(r.delivered, t.units, "{r:?}");
    } else {
        assert_eq!(
            t.units,
            r.delivered + r.discarded.total() + r.gaps.total() + rx.held() as u64,
            "{r:?}"
        );
    }
}

fn in_order(v: &[u64]) -> bool {
    v.windows(2).all(|w| w[0] < w[1])
}

#[test]
fn pdus_cross_a_relay_pair_intact_and_in_order_under_skew() {
    for unit in [UnitKind::Cell, UnitKind::Pdu] {
        for sync in [SyncMode::Sequence, SyncMode::Marker] {
            if unit == UnitKind::Cell && sync == SyncMode::Sequence {
                continue;
            }
            for skew in [0i64, 1000, 2000] {
                let r = Run {
                    unit,
                    sync,
                    delays_us: [0, skew / 3, 2 * skew / 3, skew],
                    pdus: 150,
                    interval: 150_000,
                    lose: Vec::new(),
                };
                let g = run(&r);
                assert_eq!(
                    (g.delivered.len() as u64, g.failed, g.dropped),
                    (150, 0, [0, 0]),
                    "{unit:?} {sync:?} skew {skew}"
                );
                assert!(in_order(&g.delivered));
                check_books(&g, true);
            }
        }
    }
}

#[test]
fn loss_is_counted_and_the_stream_recovers() {
    for unit in [UnitKind::Cell, UnitKind::Pdu] {
        for sync in [SyncMode::Sequence, SyncMode::Marker] {
            if unit == UnitKind::Cell && sync == SyncMode::Sequence {
                continue;
            }
            let r = Run {
                unit,
                sync,
                delays_us: [0, 700, 1300, 2000],
                pdus: 200,
                interval: 150_000,
                lose: vec![(1, 300), (3, 900)],
            };
            let g = run(&r);
            assert!(in_order(&g.delivered), "{unit:?} {sync:?}");
            // A few PDUs lost, and the last ones came through: in step again.
            let lost = 200 - g.delivered.len() as u64;
            assert!((1..=12).contains(&lost), "{unit:?} {sync:?}: {lost} lost");
            assert!(g.delivered.ends_with(&[197, 198, 199]));
            check_books(&g, false);
            let (_, rx, _) = g.relays[1].joins().next().unwrap();
            let r = rx.stats();
            assert!(r.discarded.total() + r.gaps.total() > 0);
        }
    }
}

#[test]
fn ip_packets_are_striped_with_their_encapsulation_put_back() {
    for sync in [SyncMode::None, SyncMode::Sequence, SyncMode::Marker] {
        let r = Run {
            unit: UnitKind::IpPacket,
            sync,
            delays_us: [0, 500, 1000, 2000],
            pdus: 120,
            interval: 100_000,
            lose: Vec::new(),
        };
        let g = run(&r);
        assert_eq!((g.delivered.len(), g.failed), (120, 0), "{sync:?}");
        assert!(in_order(&g.delivered));
        check_books(&g, true);
    }
}

#[test]
fn a_relay_refuses_what_it_cannot_carry() {
    let mut a = Relay::new(2, Format::Uni);
    let vcs = vec![VcId::new(0, 50), VcId::new(0, 51)];
    let bad = a.add_split(SplitSpec {
        name: "x".into(),
        wide_vc: WIDE_IN,
        cfg: cfg(UnitKind::Cell, SyncMode::Sequence, vcs.clone()),
        encap: Encapsulation::Llc,
    });
    assert_eq!(bad.unwrap_err(), RelayError::CellSequence);
    let bad = a.add_split(SplitSpec {
        name: "x".into(),
        wide_vc: WIDE_IN,
        cfg: cfg(UnitKind::Cell, SyncMode::Marker, vcs[..1].to_vec()),
        encap: Encapsulation::Llc,
    });
    assert!(matches!(bad, Err(RelayError::Stripes { .. })));
    // Cells on no VC of the relay, or with a broken header, are dropped by name.
    let mut out = Outbox::default();
    out.track_drops(true);
    let mut c = [0u8; CELL_LEN];
    aurora_wire::cell::Header::data(VcId::new(0, 99))
        .emit(&mut c)
        .unwrap();
    a.receive(Instant::ZERO, 0, &[c], &mut out);
    a.receive(Instant::ZERO, 2, &[c], &mut out);
    c[4] ^= 0xFF;
    c[0] ^= 0x0F;
    a.receive(Instant::ZERO, 1, &[c], &mut out);
    a.receive(Instant::ZERO, 9, &[c], &mut out);
    let why: Vec<&str> = out.drain_drops().map(|d| d.2).collect();
    assert_eq!(why, ["unknown_vc", "unknown_vc", "hec_uncorrectable"]);
    assert_eq!(a.dropped(), 3);
}
