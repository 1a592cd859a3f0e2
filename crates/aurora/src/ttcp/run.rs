//! One ttcp transfer: a transmitter or a receiver on a host interface and a
//! link.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration as StdDuration;

use aurora_hostif::{DataPath, HostConfig, HostInterface, PvcAddr, Qos, SyncMode, VcHandle};
use aurora_link::ring::{RingRx, RingTx, RingWatch};
use aurora_link::shape::{Shaped, Shaping};
use aurora_link::{ring, shm, stream, udp, CellSink, CellSource, LinkCounters, LinkError};
use aurora_time::{Duration, Instant};
use serde::Serialize;

use super::pattern::{now_ns, Pattern};

/// Which link a transfer runs over.
#[derive(Clone, Debug)]
pub enum LinkSpec {
    /// A ring between two threads of one process.
    Inproc,
    /// A ring in a file (one direction per file) shared by two processes.
    Shm(PathBuf),
    /// UDP between two ports on one host: the receiver binds `port`, the
    /// transmitter `port + 1`.
    Udp(std::net::IpAddr, u16),
    /// Bare cells on TCP: the receiver listens on the address.
    Stream(SocketAddr),
}

/// Everything a transfer needs.
#[derive(Clone, Debug)]
pub struct Params {
    /// VC address.
    pub addr: PvcAddr,
    /// QoS.
    pub qos: Qos,
    /// PDU length.
    pub len: usize,
    /// PDUs to send.
    pub count: u64,
    /// Data path.
    pub path: DataPath,
    /// Synchronisation mode.
    pub sync: SyncMode,
    /// Link.
    pub link: LinkSpec,
    /// Ring size in cells (ring links).
    pub ring_cells: usize,
    /// Pacing, delay, loss and bit errors on the sending side of the link.
    pub shaping: Shaping,
    /// Poll period in poll mode.
    pub poll: StdDuration,
    /// How long a ring end spins before sleeping (see `--spin-us`).
    pub spin: StdDuration,
    /// Give up when nothing has arrived for this long.
    pub idle: StdDuration,
    /// The transmitter gives up when its link has taken no cell for this
    /// long (the receiver stopped reading, or went away).
    pub stall: StdDuration,
}

/// What one end measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// "transmit" or "receive".
    pub role: String,
    /// PDU length.
    pub len: usize,
    /// PDUs sent or received intact.
    pub pdus: u64,
    /// Bytes in those PDUs.
    pub bytes: u64,
    /// Seconds from the first PDU to the last.
    pub secs: f64,
    /// Megabits per second of user data; None when there was nothing to
    /// time (fewer than two PDUs received, or all at one instant).
    pub mbps: Option<f64>,
    /// CPU seconds this end used.
    pub cpu_secs: f64,
    /// CPU time per PDU in microseconds.
    pub cpu_us_per_pdu: f64,
    /// PDUs whose bytes did not match the pattern.
    pub corrupted: u64,
    /// PDUs missing from the sequence.
    pub lost: u64,
    /// One-way latency in microseconds (receiver): min, median, 99th percentile, max.
    pub latency_us: Option<[f64; 4]>,
    /// Link counters of this end.
    pub link: LinkSummary,
    /// Receive-side PDU drops in the host interface, by cause.
    pub drops: Vec<(String, u64)>,
}

/// The link counters worth printing.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LinkSummary {
    /// Cells sent.
    pub cells_out: u64,
    /// Cells received (before checks).
    pub cells_in: u64,
    /// Cells handed up.
    pub cells_delivered: u64,
    /// Drops by reason.
    pub drops: Vec<(String, u64)>,
}

impl From<LinkCounters> for LinkSummary {
    fn from(c: LinkCounters) -> Self {
        LinkSummary {
            cells_out: c.cells_out,
            cells_in: c.cells_in,
            cells_delivered: c.cells_delivered,
            drops: c
                .drops
                .nonzero()
                .map(|(r, n)| (r.name().to_string(), n))
                .collect(),
        }
    }
}

fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The sending side of a link, with an in-place path for rings.
pub enum TxLink {
    /// A ring: cells are built in its slots.
    Ring(RingTx),
    /// Anything else: cells are built in a batch and sent; the watch is on
    /// the ring underneath, when there is one (a shaped ring).
    Other(Box<dyn CellSink>, Option<RingWatch>),
}

/// The receiving side of a link, with an in-place path for rings.
pub enum RxLink {
    /// A ring: cells are reassembled where they lie.
    Ring(Box<RingRx>),
    /// Anything else: cells are received into a batch.
    Other(Box<dyn CellSource>),
}

impl TxLink {
    fn counters(&self) -> LinkCounters {
        match self {
            TxLink::Ring(r) => r.counters(),
            TxLink::Other(o, _) => o.counters(),
        }
    }
    fn wait(&mut self, t: StdDuration) {
        match self {
            TxLink::Ring(r) => r.wait_space(Some(t)),
            TxLink::Other(o, _) => o.wait_ready(t),
        }
    }
    fn watch(&self) -> Option<RingWatch> {
        match self {
            TxLink::Ring(r) => Some(r.watch()),
            TxLink::Other(_, w) => w.clone(),
        }
    }
}

impl RxLink {
    fn counters(&self) -> LinkCounters {
        match self {
            RxLink::Ring(r) => r.counters(),
            RxLink::Other(o) => o.counters(),
        }
    }
    fn wait(&mut self, t: StdDuration) {
        match self {
            RxLink::Ring(r) => r.wait_data(Some(t)),
            RxLink::Other(o) => o.wait_ready(t),
        }
    }
}

fn link_err(e: LinkError) -> String {
    e.to_string()
}

/// Opens the receiving end (the side that creates shared files or listens)
/// and calls `ready` as soon as a transmitter can connect.
pub fn open_rx(p: &Params, ready: impl FnOnce()) -> Result<RxLink, String> {
    match &p.link {
        LinkSpec::Inproc => Err("an in-process link is opened by `pair`".into()),
        LinkSpec::Shm(path) => {
            let mut r = shm::create_consumer(path, p.ring_cells).map_err(link_err)?;
            r.set_spin(p.spin);
            ready();
            Ok(RxLink::Ring(Box::new(r)))
        }
        LinkSpec::Udp(ip, port) => {
            let local = SocketAddr::new(*ip, *port);
            let peer = SocketAddr::new(*ip, port.wrapping_add(1));
            let (_tx, rx) =
                udp::open(local, peer, udp::MAX_CELLS_PER_DATAGRAM.min(1200)).map_err(link_err)?;
            ready();
            Ok(RxLink::Other(Box::new(rx)))
        }
        LinkSpec::Stream(addr) => {
            let l = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            ready();
            let (s, _) = l
                .accept()
                .map_err(|e| format!("accept on {addr} failed: {e}"))?;
            let (_tx, rx) = stream::open(s, stream::DEFAULT_TX_BUFFER).map_err(link_err)?;
            Ok(RxLink::Other(Box::new(rx)))
        }
    }
}

/// Wraps a sending link in the shaper when any shaping is asked for (cells
/// then pass through the shaper's queue instead of being built in place).
fn shaped(link: TxLink, s: &Shaping) -> TxLink {
    if *s == Shaping::default() {
        return link;
    }
    match link {
        TxLink::Ring(r) => {
            let w = r.watch();
            TxLink::Other(Box::new(Shaped::new(r, *s)), Some(w))
        }
        TxLink::Other(o, w) => TxLink::Other(Box::new(Shaped::new(o, *s)), w),
    }
}

/// Opens the sending end, waiting up to `wait` for the receiver to be ready.
pub fn open_tx(p: &Params, wait: StdDuration) -> Result<TxLink, String> {
    open_tx_plain(p, wait).map(|l| shaped(l, &p.shaping))
}

fn open_tx_plain(p: &Params, wait: StdDuration) -> Result<TxLink, String> {
    match &p.link {
        LinkSpec::Inproc => Err("an in-process link is opened by `pair`".into()),
        LinkSpec::Shm(path) => shm::attach_producer(path, wait)
            .map(|mut r| {
                r.set_spin(p.spin);
                TxLink::Ring(r)
            })
            .map_err(|e| {
                format!(
                    "no receiver answered: no live ring at {} within {} s (start `aurora ttcp -r` first): {e}",
                    path.display(),
                    wait.as_secs()
                )
            }),
        LinkSpec::Udp(ip, port) => {
            let local = SocketAddr::new(*ip, port.wrapping_add(1));
            let peer = SocketAddr::new(*ip, *port);
            let (tx, _rx) =
                udp::open(local, peer, udp::MAX_CELLS_PER_DATAGRAM.min(1200)).map_err(link_err)?;
            Ok(TxLink::Other(Box::new(tx), None))
        }
        LinkSpec::Stream(addr) => {
            let start = std::time::Instant::now();
            let s = loop {
                match TcpStream::connect(addr) {
                    Ok(s) => break s,
                    Err(e) if start.elapsed() > wait => {
                        return Err(format!(
                            "no receiver answered: cannot connect to {addr} within {} s (start `aurora ttcp -r --link stream` first): {e}",
                            wait.as_secs()
                        ))
                    }
                    Err(_) => std::thread::sleep(StdDuration::from_millis(10)),
                }
            };
            let (tx, _rx) = stream::open(s, stream::DEFAULT_TX_BUFFER).map_err(link_err)?;
            Ok(TxLink::Other(Box::new(tx), None))
        }
    }
}

/// A ring between two threads, its ends spinning for `spin` before they
/// sleep.
pub fn pair(ring_cells: usize, spin: StdDuration) -> (TxLink, RxLink) {
    let (mut t, mut r) = ring::in_process(ring_cells);
    t.set_spin(spin);
    r.set_spin(spin);
    (TxLink::Ring(t), RxLink::Ring(Box::new(r)))
}

fn host(p: &Params) -> Result<(HostInterface, VcHandle, Instant), String> {
    let mut h = HostInterface::new(HostConfig {
        path: p.path,
        sync: p.sync,
        poll_period: Duration::from_nanos(p.poll.as_nanos() as i64),
        ..HostConfig::default()
    });
    let t0 = Instant::ZERO;
    let vc = h.open(p.addr, p.qos, t0).map_err(|e| e.to_string())?;
    Ok((h, vc, t0))
}

/// Sends `count` PDUs, then waits until the receiver has taken every cell
/// where the link can tell (rings, shaped or not). Fails with a sentence
/// when the link takes no cell for `p.stall`, or the receiver closes or
/// goes away with cells still unread.
pub fn transmit(p: &Params, link: &mut TxLink) -> Result<Report, String> {
    let (mut host, vc, _) = host(p)?;
    let pattern = Pattern::new(p.len);
    let mut buf = vec![0u8; p.len];
    pattern.fill(&mut buf);
    let mut batch = vec![[0u8; 53]; 256];
    // A QoS peak cell rate paces the sender: a token bucket refilled from the
    // clock, allowing bursts of a millisecond's worth of cells.
    let pace = p.qos.pace().map(|r| r as f64);
    let burst = pace.map_or(0.0, |r| (r / 1000.0).max(64.0));
    let mut tokens = burst;
    let mut last = now_ns();
    let stall = p.stall;
    let stalled = |sent: u64| {
        format!(
            "the receiver took no cells for {} s after {sent} of {} PDUs: it has stopped reading or gone away",
            stall.as_secs_f64(),
            p.count
        )
    };
    let mut idle = Stall::new(stall);
    let watch = link.watch();
    let gone = |seq: u64| match &watch {
        Some(w) if w.reader_closed() || !w.creator_alive() => Err(format!(
            "the receiver went away after {seq} of {} PDUs had been sent",
            p.count
        )),
        _ => Ok(()),
    };
    let cpu0 = thread_cpu_ns();
    let t0 = now_ns();
    for seq in 0..p.count {
        // A receiver on a ring that has gone is noticed now and then, even
        // when a shaper in between keeps taking (and dropping) cells.
        if seq.is_multiple_of(256) {
            gone(seq)?;
        }
        Pattern::stamp(&mut buf, seq, now_ns());
        let mut pdu = host.send(vc, &buf).map_err(|e| e.to_string())?;
        while !pdu.is_done() {
            let allowed = match pace {
                None => usize::MAX,
                Some(rate) => {
                    let now = now_ns();
                    tokens = (tokens + (now - last) as f64 * rate / 1e9).min(burst);
                    last = now;
                    if tokens < 1.0 {
                        std::thread::sleep(StdDuration::from_secs_f64((1.0 - tokens) / rate));
                        idle.moved();
                        continue;
                    }
                    tokens as usize
                }
            };
            let moved = match link {
                TxLink::Ring(r) => r
                    .write_with(allowed, |slots| pdu.fill(slots))
                    .map_err(tx_err)?,
                TxLink::Other(o, _) => {
                    let room = allowed.min(batch.len());
                    let n = pdu.fill(&mut batch[..room]);
                    let mut at = 0;
                    while at < n {
                        let k = o.send(&batch[at..n]).map_err(tx_err)?;
                        at += k;
                        if k > 0 {
                            idle.moved();
                        } else if idle.over() {
                            return Err(stalled(seq));
                        } else {
                            o.wait_ready(StdDuration::from_millis(5));
                        }
                    }
                    n
                }
            };
            tokens -= moved as f64;
            if moved > 0 {
                idle.moved();
            } else if idle.over() {
                gone(seq)?;
                return Err(stalled(seq));
            } else {
                gone(seq)?;
                match p.sync {
                    SyncMode::Event => link.wait(StdDuration::from_millis(50)),
                    SyncMode::Poll => std::thread::sleep(p.poll),
                }
            }
        }
    }
    // Cells still held by the link (a shaper's queue, a socket's buffer)
    // go out while they keep moving.
    if let TxLink::Other(o, _) = link {
        let mut out = o.counters().cells_out;
        idle.moved();
        while !o.flush().map_err(tx_err)? {
            let now_out = o.counters().cells_out;
            if now_out != out {
                out = now_out;
                idle.moved();
            } else if idle.over() {
                return Err(stalled(p.count));
            }
            o.wait_ready(StdDuration::from_millis(5));
        }
    }
    let secs = (now_ns() - t0) as f64 / 1e9;
    let cpu = (thread_cpu_ns() - cpu0) as f64 / 1e9;
    // Over a ring, the transfer is done when the receiver has taken every
    // cell; it is not timed (the receiver's report says when PDUs arrived).
    if let Some(w) = &watch {
        drained(w, stall)?;
    }
    let bytes = p.count * p.len as u64;
    Ok(Report {
        role: "transmit".into(),
        len: p.len,
        pdus: p.count,
        bytes,
        secs,
        mbps: rate_mbps(bytes, secs),
        cpu_secs: cpu,
        cpu_us_per_pdu: cpu * 1e6 / p.count.max(1) as f64,
        link: link.counters().into(),
        ..Report::default()
    })
}

/// How long a link has made no progress, read from the clock only while it
/// makes none: a sender that moves cells on every pass reads no clock for
/// it (a clock read costs as much as a good part of a small PDU).
struct Stall {
    since: Option<std::time::Instant>,
    limit: StdDuration,
}

impl Stall {
    fn new(limit: StdDuration) -> Self {
        Stall { since: None, limit }
    }

    /// The link moved (or the wait was the sender's own, as pacing is).
    fn moved(&mut self) {
        self.since = None;
    }

    /// The link did not move this pass: true once it has not moved for
    /// longer than the limit, counted from the first such pass.
    fn over(&mut self) -> bool {
        self.since
            .get_or_insert_with(std::time::Instant::now)
            .elapsed()
            > self.limit
    }
}

/// Waits until the ring's reader has taken every cell; fails if it closes
/// or goes away first, or takes none for `stall`.
fn drained(w: &RingWatch, stall: StdDuration) -> Result<(), String> {
    let mut unread = w.unread();
    let mut idle = Stall::new(stall);
    while unread > 0 {
        if w.reader_closed() || !w.creator_alive() {
            return Err(format!(
                "the receiver stopped with {unread} cells of this transfer unread"
            ));
        }
        if idle.over() {
            return Err(format!(
                "the receiver took no cells for {} s with {unread} of this transfer's cells unread: it has stopped reading",
                stall.as_secs_f64()
            ));
        }
        std::thread::sleep(StdDuration::from_millis(2));
        let now = w.unread();
        if now < unread {
            idle.moved();
        }
        unread = now;
    }
    Ok(())
}

/// Mb/s of `bytes` in `secs`, or None when no time passed.
pub fn rate_mbps(bytes: u64, secs: f64) -> Option<f64> {
    (secs > 0.0 && bytes > 0).then(|| bytes as f64 * 8.0 / secs / 1e6)
}

/// A sending link's error, saying the receiver has gone when the link was
/// closed under the sender.
fn tx_err(e: LinkError) -> String {
    match e {
        LinkError::Closed => {
            "the receiver closed the link before the transfer ended (it stopped, or its -n was smaller)".into()
        }
        e => e.to_string(),
    }
}

/// Receives until `count` PDUs have been accounted for (received or missing
/// from the sequence) or the link has been idle for `p.idle`.
pub fn receive(p: &Params, link: &mut RxLink) -> Result<Report, String> {
    let (mut host, vc, _) = host(p)?;
    let pattern = Pattern::new(p.len);
    let room = aurora_wire::aal5::cpcs_len(p.len.min(65535));
    // Post as many buffers as the VC allows (receive prediction), and take
    // cells in batches that complete fewer PDUs than that, so the
    // application drains its queue between batches.
    let cells_per_pdu = aurora_wire::aal5::cells_for(p.len.min(65535));
    let posted = 16;
    if p.path != DataPath::Null {
        for _ in 0..posted {
            host.post_buffer(vc, vec![0u8; room])
                .map_err(|(e, _)| e.to_string())?;
        }
    }
    let max_batch = (cells_per_pdu * posted / 2).max(cells_per_pdu);
    // A poll takes up to half the ready queue's worth of PDUs (Penn's driver
    // emptied the board at each poll; the bound keeps the queue from
    // overflowing before the application looks).
    let poll_budget = cells_per_pdu * (HostConfig::default().ready_limit / 2).max(1);
    let mut batch = vec![[0u8; 53]; max_batch.min(4096)];
    let mut pdus = 0u64;
    let mut corrupted = 0u64;
    let mut next_seq = 0u64;
    let mut lost = 0u64;
    let mut first_ns = None;
    let mut last_ns = 0u64;
    let mut lat = super::pattern::Latencies::default();
    let epoch = now_ns();
    let cpu0 = thread_cpu_ns();
    // When cells last arrived, read off this loop's clock (one read per
    // pass: at small PDUs the clock is a visible share of the receiver).
    let mut idle_since = 0i64;
    // Hands every PDU the interface shows to the application: checks it
    // against the pattern, and gives the buffer back (posted again on the
    // single-copy path, kept for the next delivery on the copy path).
    let mut drain = |host: &mut HostInterface| {
        // One clock read per batch: deliveries in a batch share it.
        let t = now_ns();
        while let Some(r) = host.recv(vc) {
            let c = pattern.check(r.sdu());
            first_ns.get_or_insert(t);
            last_ns = t;
            if !c.body_ok || r.len != p.len {
                corrupted += 1;
            } else {
                pdus += 1;
            }
            if let Some(seq) = c.seq {
                if seq >= next_seq {
                    lost += seq - next_seq;
                    next_seq = seq + 1;
                }
            } else {
                next_seq += 1;
            }
            if let Some(sent) = c.sent_ns {
                lat.push(t.saturating_sub(sent));
            }
            let _ = host.post_buffer(vc, r.buf);
        }
        next_seq
    };
    loop {
        let mut now = Instant::from_nanos((now_ns() - epoch) as i64);
        if p.sync == SyncMode::Poll {
            // Wake at the interface's next poll and run it: PDUs completed
            // since the last one become visible and are taken. Cells are
            // read after, at most one budget per poll, so the queue of
            // completed PDUs never outgrows what the next poll takes.
            if let Some(due) = host.poll_at() {
                let wait = due.as_nanos() - now.as_nanos();
                if wait > 0 {
                    std::thread::sleep(StdDuration::from_nanos(wait as u64));
                }
                now = Instant::from_nanos((now_ns() - epoch) as i64);
            }
            host.handle_timeout(now);
            if drain(&mut host) >= p.count {
                break;
            }
        }
        let mut took = 0;
        loop {
            let n = match link {
                RxLink::Ring(r) => {
                    match r.read_fused(max_batch, |cells, check| {
                        host.receive_checked(now, cells, check)
                    }) {
                        Ok(n) => n,
                        Err(LinkError::Closed) => 0,
                        Err(e) => return Err(link_err(e)),
                    }
                }
                RxLink::Other(o) => match o.recv(&mut batch) {
                    Ok(n) => {
                        host.receive(now, &batch[..n]);
                        n
                    }
                    Err(LinkError::Closed) => 0,
                    Err(e) => return Err(link_err(e)),
                },
            };
            took += n;
            if n == 0 || p.sync == SyncMode::Event || took >= poll_budget {
                break;
            }
        }
        if p.sync == SyncMode::Event {
            host.handle_timeout(now);
            if drain(&mut host) >= p.count {
                break;
            }
        }
        if took > 0 {
            idle_since = now.as_nanos();
        } else if now.as_nanos() - idle_since > p.idle.as_nanos() as i64 {
            break;
        } else if p.sync == SyncMode::Event {
            link.wait(StdDuration::from_millis(20));
        }
    }
    lost += p.count - next_seq.min(p.count);
    let cpu = (thread_cpu_ns() - cpu0) as f64 / 1e9;
    let secs = first_ns.map_or(0.0, |f| (last_ns - f) as f64 / 1e9);
    let bytes = pdus * p.len as u64;
    let stats = host.aal5_stats();
    let hs = host.stats();
    let mut drops: Vec<(String, u64)> = stats
        .pdus_dropped
        .nonzero()
        .map(|(r, n)| (r.name().to_string(), n))
        .collect();
    for (name, n) in [
        ("ready_queue_full", hs.ready_overflow),
        ("slots_exhausted", hs.slots_exhausted),
        ("copy_path_errors", hs.copy_path_errors),
    ] {
        if n > 0 {
            drops.push((name.to_string(), n));
        }
    }
    Ok(Report {
        role: "receive".into(),
        len: p.len,
        pdus,
        bytes,
        secs,
        // The first PDU's own transfer is not inside [first, last].
        mbps: if pdus > 1 {
            rate_mbps((pdus - 1) * p.len as u64, secs)
        } else {
            None
        },
        cpu_secs: cpu,
        cpu_us_per_pdu: cpu * 1e6 / pdus.max(1) as f64,
        corrupted,
        lost,
        latency_us: lat.summary(),
        link: link.counters().into(),
        drops,
    })
}

/// Runs both ends in this process over an in-process ring.
pub fn in_process(p: &Params) -> Result<(Report, Report), String> {
    let (tx, mut rx) = pair(p.ring_cells, p.spin);
    let mut tx = shaped(tx, &p.shaping);
    let pr = p.clone();
    let receiver = std::thread::spawn(move || receive(&pr, &mut rx));
    let t = transmit(p, &mut tx)?;
    let r = receiver
        .join()
        .map_err(|_| "the receiver thread panicked".to_string())??;
    Ok((t, r))
}

/// Almesberger's loopback test: one host interface sends and receives at
/// once, its output looped to its input, in one thread. The ring holds at
/// least two PDUs, so after draining it a whole PDU always fits: the loop
/// alternates "take everything that arrived" and "send one PDU", both in
/// place in the ring.
pub fn bidirectional(p: &Params) -> Result<Report, String> {
    let cells_per_pdu = aurora_wire::aal5::cells_for(p.len.min(65535));
    let (mut tx, mut rx) = ring::in_process(p.ring_cells.max(2 * cells_per_pdu));
    let (mut host, vc, _) = host(p)?;
    let pattern = Pattern::new(p.len);
    let mut buf = vec![0u8; p.len];
    pattern.fill(&mut buf);
    let room = aurora_wire::aal5::cpcs_len(p.len.min(65535));
    if p.path == DataPath::SingleCopy {
        for _ in 0..8 {
            let _ = host.post_buffer(vc, vec![0u8; room]);
        }
    }
    let cpu0 = thread_cpu_ns();
    let t0 = now_ns();
    let (mut sent, mut got, mut corrupted) = (0u64, 0u64, 0u64);
    loop {
        // One clock read a pass: it times the receive and stamps the send
        // (nothing can arrive in between: this thread is both ends).
        let t = now_ns();
        let now = Instant::from_nanos((t - t0) as i64);
        // Everything that arrived (a second read when the ring wrapped).
        while rx
            .read_fused(usize::MAX, |c, check| host.receive_checked(now, c, check))
            .map_err(link_err)?
            > 0
        {}
        host.handle_timeout(now);
        while let Some(r) = host.recv(vc) {
            if pattern.check(r.sdu()).body_ok && r.len == p.len {
                got += 1;
            } else {
                corrupted += 1;
            }
            let _ = host.post_buffer(vc, r.buf);
        }
        if sent == p.count {
            break;
        }
        Pattern::stamp(&mut buf, sent, t);
        let mut pdu = host.send(vc, &buf).map_err(|e| e.to_string())?;
        while !pdu.is_done() {
            let n = tx
                .write_with(usize::MAX, |slots| pdu.fill(slots))
                .map_err(link_err)?;
            if n == 0 {
                return Err("the loopback ring is smaller than a PDU".into());
            }
        }
        sent += 1;
    }
    let secs = (now_ns() - t0) as f64 / 1e9;
    let cpu = (thread_cpu_ns() - cpu0) as f64 / 1e9;
    // Sent and received bytes both count, as in the loopback figures.
    let bytes = (sent + got) * p.len as u64;
    Ok(Report {
        role: "bidirectional".into(),
        len: p.len,
        pdus: got,
        bytes,
        secs,
        mbps: rate_mbps(bytes, secs),
        cpu_secs: cpu,
        cpu_us_per_pdu: cpu * 1e6 / got.max(1) as f64,
        corrupted,
        lost: p.count - got - corrupted,
        link: tx.counters().into(),
        ..Report::default()
    })
}
