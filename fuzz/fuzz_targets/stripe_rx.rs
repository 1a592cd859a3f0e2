//! The striping receiver fed arbitrary (stripe, cell, time) sequences, for
//! every unit kind and synchronisation method, with small limits.
//!
//! Two kinds of run, chosen by the first byte:
//!
//! * **hostile**: raw cells, mostly on the right member VC (so they get past
//!   the header check) with fuzzer-chosen PTI and payload, now and then a
//!   well-formed marker with fuzzer-chosen fields; time steps and timers.
//!   No panic, held units and bytes within limits, the arrival ledger
//!   balances after every step, and with sequence sync deliveries come out
//!   in increasing sequence order.
//! * **lossy**: a real Striper's cells, queued per stripe; the fuzzer picks
//!   which stripe's next cell is delivered or lost, and when time passes.
//!   On top of the above, with sequence or marker sync every delivered unit
//!   is intact and in order, and once the sender's final markers and a last
//!   unit have gone through, `sent = delivered + discarded + gaps`.
#![no_main]
use std::collections::VecDeque;

use aurora_stripe::format::{Marker, MARKER_ID};
use aurora_stripe::{
    CellFlags, Config, Delivery, Destriper, StripeState, Striper, SyncMode, UnitKind,
};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Header, Pti, VcId};
use aurora_wire::CellBytes;
use libfuzzer_sys::fuzz_target;

const MAX_UNITS: usize = 24;
const MAX_BYTES: usize = 2048;

fn config(how: u8, k: u8) -> Config {
    let unit = [UnitKind::Cell, UnitKind::Pdu, UnitKind::IpPacket][usize::from(how % 3)];
    let sync = [SyncMode::None, SyncMode::Sequence, SyncMode::Marker][usize::from(how / 3 % 3)];
    let n = usize::from(how >> 5 & 3) + 1;
    let mut c = Config::new(
        unit,
        sync,
        (0..n).map(|i| VcId::new(0, 40 + i as u16)).collect(),
    );
    c.marker_interval = u32::from(k % 8) + 1;
    c.quantum = 48 * (u32::from(k >> 3) + 1);
    c.max_sdu = 300;
    c.idle_marker = Duration::from_micros(20);
    c.idle_marker_repeats = 2;
    c.limits.max_held_units = MAX_UNITS;
    c.limits.max_held_bytes = MAX_BYTES;
    c.limits.timeout = Duration::from_micros(200);
    c.limits.reassembly_timeout = Duration::from_micros(300);
    c.limits.reassembly_budget = 1024;
    c
}

/// Bounds and the arrival ledger, after every step.
fn check(rx: &Destriper) {
    assert!(rx.held() <= MAX_UNITS);
    assert!(rx.held_bytes() <= MAX_BYTES);
    assert!(rx.reassembly_bytes() <= 1024 * rx.config().stripes.len());
    assert_eq!(rx.stats().arrival_balance(), rx.held() as i128);
}

fn unit_data(kind: UnitKind, i: u64, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|k| (i as u8) ^ (k as u8)).collect();
    match kind {
        UnitKind::IpPacket => {
            v[0] = 0x45;
            v[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            v[4..8].copy_from_slice(&(i as u32).to_be_bytes());
        }
        _ => v[..4].copy_from_slice(&(i as u32).to_be_bytes()),
    }
    v
}

fn index_of(kind: UnitKind, d: &Delivery) -> u64 {
    let b = d.payload.data();
    let at = if kind == UnitKind::IpPacket { 4 } else { 0 };
    u64::from(u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]))
}

fuzz_target!(|data: &[u8]| {
    let Some((&[how, k, mode], rest)) = data.split_first_chunk::<3>() else {
        return;
    };
    let cfg = config(how, k);
    if mode & 1 == 0 {
        hostile(cfg, rest);
    } else {
        lossy(cfg, rest);
    }
});

fn hostile(cfg: Config, mut rest: &[u8]) {
    let n = cfg.stripes.len();
    let sequence = cfg.sync == SyncMode::Sequence;
    let mut rx = Destriper::new(cfg.clone()).unwrap();
    let mut now = Instant::ZERO;
    let mut out = Vec::new();
    let mut last_seq = None;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        now += Duration::from_micros(i64::from(op >> 4) * 7);
        match op & 0x0F {
            0 => rx.handle_timeout(now, &mut out),
            1..=3 => {
                // A marker with fuzzer-chosen state.
                let Some((b, tail)) = rest.split_first_chunk::<12>() else {
                    break;
                };
                rest = tail;
                let s = usize::from(b[0]) % n;
                let m = Marker {
                    stripe: if b[1] & 0x80 != 0 { b[0] } else { s as u8 },
                    stripes: n as u8,
                    unit: cfg.unit,
                    idle: b[1] & 1 != 0,
                    interval: cfg.marker_interval as u16,
                    state: StripeState {
                        count: u64::from(u16::from_be_bytes([b[2], b[3]])),
                        round: u64::from(u16::from_be_bytes([b[4], b[5]])),
                        credit: i64::from(i32::from_be_bytes([b[6], b[7], b[8], b[9]])) % 70_000,
                    },
                    quantum: if b[1] & 0x40 != 0 {
                        u32::from(b[10])
                    } else {
                        rx_quantum(&cfg)
                    },
                };
                let cell = m.to_cell(cfg.stripes[s], cfg.format).unwrap();
                rx.push(now, s, &cell, &mut out);
            }
            _ => {
                // A raw cell, usually on the stripe's VC.
                let Some((b, tail)) = rest.split_first_chunk::<50>() else {
                    break;
                };
                rest = tail;
                let s = usize::from(b[0]) % (n + 1); // n is no stripe
                let mut cell: CellBytes = [0; 53];
                let vc = cfg.stripes[s % n];
                let pti = Pti::from_bits(b[1]);
                let h = Header {
                    pti,
                    clp: b[1] & 8 != 0,
                    ..Header::data(vc)
                };
                cell[..5].copy_from_slice(&h.to_bytes().unwrap());
                if b[1] & 0x80 != 0 {
                    cell[2] ^= b[2]; // some other VC, or a bad HEC
                }
                cell[5..].copy_from_slice(&[&b[2..], &[0u8; 0][..]].concat()[..48]);
                if pti == Pti::OamEndToEnd && b[1] & 0x40 != 0 {
                    cell[5] = MARKER_ID;
                }
                rx.push(now, s, &cell, &mut out);
            }
        }
        for d in out.drain(..) {
            if sequence {
                let seq = d.seq.expect("sequence sync numbers every unit");
                assert!(last_seq.is_none_or(|l| seq > l), "sequence order broken");
                last_seq = Some(seq);
            }
        }
        check(&rx);
    }
    rx.handle_timeout(Instant::MAX, &mut out);
    check(&rx);
}

fn rx_quantum(cfg: &Config) -> u32 {
    if cfg.unit == UnitKind::Cell {
        48
    } else {
        cfg.quantum
    }
}

struct Lossy {
    cfg: Config,
    tx: Striper,
    rx: Destriper,
    queues: Vec<VecDeque<CellBytes>>,
    lens: Vec<usize>,
    now: Instant,
    out: Vec<Delivery>,
    delivered: Vec<u64>,
}

impl Lossy {
    fn send(&mut self, len: usize) {
        let kind = self.cfg.unit;
        let i = self.tx.next_index();
        let len = match kind {
            UnitKind::Cell => self.tx.cell_data_len(),
            UnitKind::Pdu => len.clamp(4, self.cfg.max_sdu),
            UnitKind::IpPacket => len.clamp(20, self.cfg.max_sdu),
        };
        let data = unit_data(kind, i, len);
        let mut cells = Vec::new();
        match kind {
            UnitKind::Cell => self
                .tx
                .push_cell(self.now, &data, CellFlags::default(), &mut cells),
            UnitKind::Pdu => self.tx.push_pdu(self.now, &data, &mut cells),
            UnitKind::IpPacket => self.tx.push_ip(self.now, &data, &mut cells),
        }
        .unwrap();
        self.lens.push(len);
        self.queue(cells);
    }

    fn queue(&mut self, cells: Vec<(usize, CellBytes)>) {
        for (s, c) in cells {
            self.queues[s].push_back(c);
        }
    }

    fn take(&mut self) {
        let kind = self.cfg.unit;
        for d in self.out.drain(..) {
            let i = index_of(kind, &d);
            let len = self.lens[i as usize];
            assert_eq!(
                d.payload.data(),
                &unit_data(kind, i, len)[..],
                "damaged unit delivered"
            );
            self.delivered.push(i);
        }
        check(&self.rx);
    }

    fn timers(&mut self) {
        let mut cells = Vec::new();
        self.tx.handle_timeout(self.now, &mut cells);
        self.queue(cells);
        self.rx.handle_timeout(self.now, &mut self.out);
        self.take();
    }

    fn deliver_all(&mut self) {
        for s in 0..self.queues.len() {
            while let Some(c) = self.queues[s].pop_front() {
                self.rx.push(self.now, s, &c, &mut self.out);
                self.take();
            }
        }
    }
}

fn lossy(cfg: Config, mut rest: &[u8]) {
    let n = cfg.stripes.len();
    let mut l = Lossy {
        tx: Striper::new(cfg.clone()).unwrap(),
        rx: Destriper::new(cfg.clone()).unwrap(),
        queues: vec![VecDeque::new(); n],
        lens: Vec::new(),
        now: Instant::ZERO,
        out: Vec::new(),
        delivered: Vec::new(),
        cfg,
    };
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        let arg = usize::from(op >> 3);
        match op & 7 {
            0 | 1 => l.send(arg * 10),
            2 | 3 | 4 => {
                // Deliver the next cell of a stripe.
                let s = arg % n;
                if let Some(c) = l.queues[s].pop_front() {
                    l.rx.push(l.now, s, &c, &mut l.out);
                    l.take();
                }
            }
            5 => {
                l.queues[arg % n].pop_front();
            }
            _ => {
                l.now += Duration::from_micros(arg as i64 * 3);
                l.timers();
            }
        }
    }
    // Settle: everything still on the links arrives, partial PDUs time out,
    // markers put every stripe back in step, then a last unit and its
    // markers go through without loss.
    l.deliver_all();
    l.now += Duration::from_millis(1);
    l.timers();
    let mut cells = Vec::new();
    l.tx.flush_markers(&mut cells);
    l.queue(cells);
    l.deliver_all();
    l.send(40);
    let mut cells = Vec::new();
    l.tx.flush_markers(&mut cells);
    l.queue(cells);
    l.deliver_all();
    l.now = Instant::MAX;
    l.rx.handle_timeout(l.now, &mut l.out);
    l.take();

    let st = l.rx.stats();
    let sent = l.tx.stats().units;
    assert_eq!(l.rx.held(), 0);
    if l.cfg.sync != SyncMode::None {
        assert!(
            l.delivered.windows(2).all(|w| w[0] < w[1]),
            "misordered or duplicated"
        );
        assert_eq!(
            l.delivered.last(),
            Some(&(sent - 1)),
            "the last unit did not come through"
        );
        assert_eq!(sent, st.delivered + st.discarded.total() + st.gaps.total());
    } else {
        let mut seen = l.delivered.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), l.delivered.len(), "duplicated");
    }
}
