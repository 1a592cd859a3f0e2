//! A tiny deterministic event loop in virtual time: Striper → one link per
//! stripe (rate, delay, loss) → Destriper.
//!
//! Every unit carries its index in its first four data bytes (bytes 4..8 of
//! an IP packet), so the test can tell what was delivered whatever the
//! receiver believes. Each link is a FIFO: a cell leaves when the line is
//! free, one cell time later, and arrives `delay` after that. Events at the
//! same instant run in the order they were made.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use aurora_stripe::{CellFlags, Config, Delivery, Destriper, Marker, Striper, UnitKind};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::VcId;
use aurora_wire::CellBytes;

/// xorshift64*: small, seeded, reproducible.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One stripe's path.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    /// Time to put one cell on the line.
    pub cell_time: Duration,
    /// Propagation delay (the skew is the difference between stripes').
    pub delay: Duration,
}

/// OC-3c: 353,207 cells/s.
pub const OC3_CELL: Duration = Duration::from_nanos(2831);
/// OC-12c: 1,412,830 cells/s.
pub const OC12_CELL: Duration = Duration::from_nanos(708);

/// What the links do to a cell: called with (stripe, index of the cell on
/// that stripe, is it a marker, when it is sent); true drops it.
pub type DropFn = Box<dyn FnMut(usize, u64, bool, Instant) -> bool>;

/// An invariant checked on the receiver after every event.
pub type CheckFn = Box<dyn FnMut(&Destriper)>;

/// What a run did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Units sent (indices 0..sent).
    pub sent: u64,
    /// Unit indices in delivery order.
    pub delivered: Vec<u64>,
    /// Deliveries whose data was not what was sent under that index.
    pub corrupted: u64,
    pub lost_data_cells: u64,
    pub lost_markers: u64,
    /// Per stripe: the unit indices that lost at least one cell.
    pub damaged: Vec<Vec<u64>>,
    /// Which stripe each unit went on.
    pub stripe_of: Vec<usize>,
    /// Most units / bytes the receiver held at any event.
    pub max_held: usize,
    pub max_held_bytes: usize,
}

/// The unit with index `i` and length `len` (data bytes for cells).
pub fn unit_bytes(kind: UnitKind, i: u64, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|k| (i as u8).wrapping_mul(31).wrapping_add(k as u8))
        .collect();
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

/// The index a delivered unit carries.
pub fn index_of(kind: UnitKind, d: &Delivery) -> u64 {
    let b = d.payload.data();
    let at = if kind == UnitKind::IpPacket { 4 } else { 0 };
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as u64
}

/// The member VCs of `n` stripes.
pub fn vcs(n: usize) -> Vec<VcId> {
    (0..n).map(|i| VcId::new(1, 100 + i as u16)).collect()
}

/// A striped VC between two hosts over `links`.
pub struct Sim {
    pub tx: Striper,
    pub rx: Destriper,
    pub links: Vec<Link>,
    busy: Vec<Instant>,
    sent_on: Vec<u64>,
    /// Cells on the links: (arrival time, order made, stripe, cell).
    heap: BinaryHeap<Reverse<(Instant, u64, usize, CellBytes)>>,
    order: u64,
    pub now: Instant,
    pub drop: DropFn,
    /// Cells sent at or after this time are never dropped.
    pub lossless_from: Instant,
    pub out: Outcome,
    lens: Vec<usize>,
    kind: UnitKind,
    /// Called after every event with the receiver: for invariant checks.
    pub check: Option<CheckFn>,
}

impl Sim {
    pub fn new(cfg: Config, rx_cfg: Config, links: Vec<Link>) -> Sim {
        let n = links.len();
        assert_eq!(cfg.stripes.len(), n);
        let kind = cfg.unit;
        Sim {
            tx: Striper::new(cfg).unwrap(),
            rx: Destriper::new(rx_cfg).unwrap(),
            links,
            busy: vec![Instant::ZERO; n],
            sent_on: vec![0; n],
            heap: BinaryHeap::new(),
            order: 0,
            now: Instant::ZERO,
            drop: Box::new(|_, _, _, _| false),
            lossless_from: Instant::MAX,
            out: Outcome {
                damaged: vec![Vec::new(); n],
                ..Outcome::default()
            },
            lens: Vec::new(),
            kind,
            check: None,
        }
    }

    /// Puts the sender's output on the links.
    fn transmit(&mut self, cells: Vec<(usize, CellBytes)>, unit: Option<u64>) {
        for (s, cell) in cells {
            let marker = Marker::is_marker_cell(&cell);
            let k = self.sent_on[s];
            self.sent_on[s] += 1;
            let l = self.links[s];
            let depart = self.busy[s].max(self.now) + l.cell_time;
            self.busy[s] = depart;
            if self.now < self.lossless_from && (self.drop)(s, k, marker, self.now) {
                if marker {
                    self.out.lost_markers += 1;
                } else {
                    self.out.lost_data_cells += 1;
                    if let Some(u) = unit {
                        if self.out.damaged[s].last() != Some(&u) {
                            self.out.damaged[s].push(u);
                        }
                    }
                }
                continue;
            }
            self.heap
                .push(Reverse((depart + l.delay, self.order, s, cell)));
            self.order += 1;
        }
    }

    /// Sends unit `i` of `len` bytes now.
    pub fn send(&mut self, len: usize) -> u64 {
        let i = self.tx.next_index();
        let data = unit_bytes(self.kind, i, len);
        let mut cells = Vec::new();
        match self.kind {
            UnitKind::Cell => self
                .tx
                .push_cell(self.now, &data, CellFlags::default(), &mut cells),
            UnitKind::Pdu => self.tx.push_pdu(self.now, &data, &mut cells),
            UnitKind::IpPacket => self.tx.push_ip(self.now, &data, &mut cells),
        }
        .unwrap();
        self.out.stripe_of.push(cells[0].0);
        self.lens.push(len);
        self.out.sent += 1;
        self.transmit(cells, Some(i));
        i
    }

    fn take(&mut self, ds: Vec<Delivery>) {
        for d in ds {
            let i = index_of(self.kind, &d);
            let want = self
                .lens
                .get(i as usize)
                .map(|&len| unit_bytes(self.kind, i, len));
            if want.as_deref() != Some(d.payload.data()) {
                self.out.corrupted += 1;
            }
            self.out.delivered.push(i);
        }
    }

    fn after_event(&mut self) {
        self.out.max_held = self.out.max_held.max(self.rx.held());
        self.out.max_held_bytes = self.out.max_held_bytes.max(self.rx.held_bytes());
        let st = self.rx.stats();
        assert_eq!(
            st.arrival_balance(),
            self.rx.held() as i128,
            "arrival ledger"
        );
        if let Some(f) = self.check.as_mut() {
            f(&self.rx);
        }
    }

    /// Runs every event up to and including `until`.
    pub fn run_until(&mut self, until: Instant) {
        loop {
            let arrival = self.heap.peek().map(|Reverse((t, _, _, _))| *t);
            let next = [arrival, self.tx.poll_at(), self.rx.poll_at()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = next.filter(|&t| t <= until) else {
                break;
            };
            self.now = self.now.max(t);
            let mut ds = Vec::new();
            if arrival == Some(t) {
                let Reverse((_, _, s, cell)) = self.heap.pop().unwrap();
                self.rx.push(self.now, s, &cell, &mut ds);
            } else if self.tx.poll_at() == Some(t) {
                let mut cells = Vec::new();
                self.tx.handle_timeout(self.now, &mut cells);
                self.transmit(cells, None);
            } else {
                self.rx.handle_timeout(self.now, &mut ds);
            }
            self.take(ds);
            self.after_event();
        }
        if until != Instant::MAX {
            self.now = self.now.max(until);
        }
    }

    /// Runs until nothing is left to happen.
    pub fn drain(&mut self) {
        self.run_until(Instant::MAX);
    }
}
