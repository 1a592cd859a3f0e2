//! Two connections joined by a scripted path in virtual time: a
//! bottleneck of a given rate and delay each way, a bounded queue, and
//! data segments chosen by number dropped on their first transmission.

#![allow(dead_code)]

use std::collections::{BTreeSet, VecDeque};
use std::net::Ipv4Addr;

use aurora_tcp::conn::{Config, Connection, Endpoint, State};
use aurora_tcp::seg;
use aurora_tcp::Seq;
use aurora_time::{Duration, Instant};

/// One direction of the path.
pub struct Pipe {
    /// Bits per second.
    pub rate: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Packets the queue holds (beyond the one on the line).
    pub limit: usize,
    /// When the line is next free.
    free_at: Instant,
    /// Packets on the way, with their arrival times (in order).
    flight: VecDeque<(Instant, Vec<u8>)>,
    /// Departure times of packets queued or on the line.
    queued: VecDeque<Instant>,
    /// Packets dropped at the queue.
    pub overflow: u64,
    /// Packets sent into the pipe.
    pub offered: u64,
    /// The pipe is cut: everything sent is lost.
    pub cut: bool,
    /// Packets lost to the cut.
    pub cut_drops: u64,
    /// Lose each packet with this probability (a seeded generator).
    pub loss: f64,
    rng: u64,
    /// Packets lost at random.
    pub random_drops: u64,
}

impl Pipe {
    pub fn new(rate: u64, delay: Duration, limit: usize) -> Self {
        Pipe {
            rate,
            delay,
            limit,
            free_at: Instant::ZERO,
            flight: VecDeque::new(),
            queued: VecDeque::new(),
            overflow: 0,
            offered: 0,
            cut: false,
            cut_drops: 0,
            loss: 0.0,
            rng: 0x9E37_79B9_7F4A_7C15,
            random_drops: 0,
        }
    }

    fn send(&mut self, now: Instant, pkt: &[u8]) {
        self.offered += 1;
        if self.cut {
            self.cut_drops += 1;
            return;
        }
        if self.loss > 0.0 {
            self.rng = self
                .rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            if ((self.rng >> 11) as f64 / (1u64 << 53) as f64) < self.loss {
                self.random_drops += 1;
                return;
            }
        }
        while self.queued.front().is_some_and(|&t| t <= now) {
            self.queued.pop_front();
        }
        if self.queued.len() > self.limit {
            self.overflow += 1;
            return;
        }
        let start = self.free_at.max(now);
        let bits = pkt.len() as i64 * 8;
        let tx = Duration::from_nanos(bits * 1_000_000_000 / self.rate as i64);
        self.free_at = start + tx;
        self.queued.push_back(self.free_at);
        self.flight
            .push_back((self.free_at + self.delay, pkt.to_vec()));
    }

    fn next_at(&self) -> Option<Instant> {
        self.flight.front().map(|p| p.0)
    }
}

/// A sender `a` and receiver `b`.
pub struct Path {
    pub a: Connection,
    pub b: Connection,
    pub ab: Pipe,
    pub ba: Pipe,
    pub now: Instant,
    /// Data segments (numbered from 1 by sequence, `mss` bytes each) to
    /// drop on their first transmission from `a`.
    pub drop_first: BTreeSet<u32>,
    dropped_once: BTreeSet<u32>,
    /// Segments dropped by the script.
    pub scripted_drops: u64,
    mss: u32,
    /// Bytes written into `a` so far.
    pub written: u64,
    /// Bytes `b` handed up, checked against the pattern.
    pub read: u64,
    /// Bytes to send in all.
    pub total: u64,
    /// When the last byte reached `b`'s reader.
    pub all_read_at: Option<Instant>,
    /// `b`'s application reads what arrives (else it leaves it).
    pub b_reads: bool,
}

/// The byte at offset `i` of a transfer.
pub fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

pub const A: Endpoint = Endpoint {
    addr: Ipv4Addr::new(10, 0, 0, 1),
    port: 40_000,
};
pub const B: Endpoint = Endpoint {
    addr: Ipv4Addr::new(10, 0, 0, 2),
    port: 5001,
};

impl Path {
    /// A connection from `a` (config `ca`) to `b` (config `cb`) over
    /// `ab`/`ba`, carrying `total` bytes.
    pub fn new(ca: Config, cb: Config, ab: Pipe, ba: Pipe, total: u64) -> Self {
        let mss = u32::from(ca.mss);
        let mut a = Connection::connect(ca, A, B, Seq(1_000), Instant::ZERO);
        // The SYN goes out; b is made from it.
        let mut syn = None;
        a.poll(Instant::ZERO, &mut |p| syn = Some(p.to_vec()));
        let syn = syn.expect("a SYN");
        let parsed = seg::parse(&syn).expect("a valid SYN");
        let b = Connection::accept(cb, &parsed, Seq(u32::MAX - 5_000), Instant::ZERO);
        Path {
            a,
            b,
            ab,
            ba,
            now: Instant::ZERO,
            drop_first: BTreeSet::new(),
            dropped_once: BTreeSet::new(),
            scripted_drops: 0,
            mss,
            written: 0,
            read: 0,
            total,
            all_read_at: None,
            b_reads: true,
        }
    }

    fn fill(&mut self) {
        while self.written < self.total && self.a.send_space() > 0 {
            let n = (self.total - self.written)
                .min(self.a.send_space() as u64)
                .min(65_536);
            let chunk: Vec<u8> = (self.written..self.written + n).map(pattern).collect();
            let took = self.a.send(&chunk) as u64;
            self.written += took;
            if took == 0 {
                break;
            }
        }
        if self.written == self.total {
            self.a.close();
        }
    }

    /// Runs until both sides are closed or `until`.
    pub fn run(&mut self, until: Instant) {
        loop {
            self.read_b();
            self.fill();
            let next = [
                self.a.poll_at(),
                self.b.poll_at(),
                self.ab.next_at(),
                self.ba.next_at(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(t) = next else { break };
            if t > until {
                break;
            }
            self.now = t.max(self.now);
            let now = self.now;
            while self.ab.next_at().is_some_and(|x| x <= now) {
                let (_, p) = self.ab.flight.pop_front().expect("a packet");
                let parsed = seg::parse(&p).expect("a valid segment");
                self.b.process(now, &parsed);
            }
            while self.ba.next_at().is_some_and(|x| x <= now) {
                let (_, p) = self.ba.flight.pop_front().expect("a packet");
                let parsed = seg::parse(&p).expect("a valid segment");
                self.a.process(now, &parsed);
            }
            let mut out = Vec::new();
            self.a.poll(now, &mut |p| out.push(p.to_vec()));
            for p in out.drain(..) {
                if self.scripted(&p) {
                    continue;
                }
                self.ab.send(now, &p);
            }
            self.b.poll(now, &mut |p| out.push(p.to_vec()));
            for p in out.drain(..) {
                self.ba.send(now, &p);
            }
            self.read_b();
            if self.b.peer_closed() && self.b.state() == State::CloseWait {
                self.b.close();
            }
            self.fill();
            if self.a.state() == State::Closed && self.b.state() == State::Closed {
                break;
            }
        }
    }

    /// `b`'s application reads (if it does), checking every byte.
    fn read_b(&mut self) {
        if !self.b_reads {
            return;
        }
        let read = &mut self.read;
        self.b.recv(&mut |d| {
            for &x in d {
                assert_eq!(x, pattern(*read), "byte {} differs", *read);
                *read += 1;
            }
        });
        if self.read == self.total && self.all_read_at.is_none() {
            self.all_read_at = Some(self.now);
        }
    }

    /// Whether the script drops this packet from `a`.
    fn scripted(&mut self, p: &[u8]) -> bool {
        let s = seg::parse(p).expect("a valid segment");
        if s.payload.is_empty() {
            return false;
        }
        let first_data = 1_001u32;
        let n = s.repr.seq.0.wrapping_sub(first_data) / self.a.smss() + 1;
        if self.drop_first.contains(&n) && self.dropped_once.insert(n) {
            self.scripted_drops += 1;
            return true;
        }
        false
    }
}
