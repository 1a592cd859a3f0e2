//! One TCP connection: the state machine of RFC 9293, loss recovery
//! selectable per connection (Tahoe, Reno, NewReno, SACK), RFC 6298's
//! timer, RFC 7323's window scaling and timestamps, delayed ACKs and a
//! `maxburst` limit.
//!
//! Sans-I/O: the host hands each segment for this connection to
//! [`Connection::process`], then calls [`Connection::poll`], which sends
//! whatever is due as whole IPv4 packets; [`Connection::poll_at`] says
//! when the connection next needs the clock. The application writes with
//! [`Connection::send`], reads with [`Connection::recv`] and ends its side
//! with [`Connection::close`].
//!
//! What the variants do, in this implementation:
//!
//! | | on 3 duplicate ACKs | during recovery | a partial ACK |
//! |---|---|---|---|
//! | Tahoe | `ssthresh` = flight/2, `cwnd` = 1 segment, go back to `snd_una` (slow start) | — | — |
//! | Reno (RFC 5681) | retransmit the first unACKed segment, `cwnd` = `ssthresh` + 3 | `cwnd` grows a segment per duplicate ACK | ends recovery (`cwnd` = `ssthresh`): a second loss waits for 3 more duplicates or the timer |
//! | NewReno (RFC 6582) | as Reno, remembering `recover` = highest sent | as Reno | retransmits the next hole and stays in recovery (Hoe's rule); like every ACK of new data it restarts the timer (RFC 6298), so this is RFC 6582's "slow but steady" form |
//! | SACK (RFC 6675) | `cwnd` = `ssthresh`, retransmit the first segment | sends while `pipe` < `cwnd`: lost holes first, then new data | stays in recovery |
//!
//! All of them: recovery ends when everything sent before it began is
//! ACKed; the timer's expiry sets `ssthresh` (on the first expiry for a
//! segment), `cwnd` = 1 segment and goes back to `snd_una`; a sender
//! enters fast retransmit again only for an ACK beyond the last recovery
//! point or timeout (RFC 6582's guard against false fast retransmits),
//! except Reno, which re-enters on any three duplicates as the original
//! did. SACK falls back to NewReno when the peer did not agree to SACK.

use std::collections::VecDeque;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use aurora_time::{Duration, Instant};

use crate::reasm::Reassembly;
use crate::rtt::Rtt;
use crate::sack::Scoreboard;
use crate::seg::{self, Flags, Parsed, SegRepr, Timestamp};
use crate::trace::{Event, Trace};
use crate::Seq;

/// A loss-recovery algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Fast retransmit, then slow start from one segment.
    Tahoe,
    /// Fast retransmit and fast recovery (RFC 5681).
    Reno,
    /// Reno with Hoe's partial-ACK rule (RFC 6582).
    NewReno,
    /// Recovery driven by the SACK scoreboard (RFC 6675).
    Sack,
}

impl Variant {
    /// Every variant, in the order reports list them.
    pub const ALL: [Variant; 4] = [
        Variant::Tahoe,
        Variant::Reno,
        Variant::NewReno,
        Variant::Sack,
    ];

    /// The variant's name in topology files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Tahoe => "tahoe",
            Variant::Reno => "reno",
            Variant::NewReno => "newreno",
            Variant::Sack => "sack",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| format!("no TCP variant \"{s}\" (tahoe, reno, newreno or sack)"))
    }
}

/// How a connection behaves.
#[derive(Clone, Debug)]
pub struct Config {
    /// Loss recovery.
    pub variant: Variant,
    /// The MSS this side advertises (its MTU less 40 bytes of headers),
    /// and the most it sends in a segment.
    pub mss: u16,
    /// Bytes the application may have written and not had ACKed.
    pub send_buffer: usize,
    /// Bytes received and not read, in order or not: the most this side
    /// advertises.
    pub recv_buffer: usize,
    /// Offer window scaling (RFC 7323).
    pub window_scale: bool,
    /// Offer SACK (RFC 2018).
    pub sack: bool,
    /// Offer timestamps (RFC 7323).
    pub timestamps: bool,
    /// Delay ACKs of in-order data up to this long (an ACK still goes for
    /// every second full segment); `None` ACKs every segment at once.
    pub delayed_ack: Option<Duration>,
    /// The initial window in segments; `None` for RFC 5681's rule
    /// (2 to 4 segments by size).
    pub initial_window: Option<u32>,
    /// At most this many segments sent in one call of
    /// [`Connection::poll`] (the host calls it after each segment it
    /// hands in, so this limits what one ACK releases).
    pub maxburst: Option<u32>,
    /// The share of the flight kept as `ssthresh` after a loss: 0.5 is
    /// the standard halving; more is Hoe's larger window after a loss
    /// (best with `maxburst`). Kept within 0.1 to 0.95.
    pub decrease: f64,
    /// Retransmission timeout before any round-trip sample.
    pub rto_initial: Duration,
    /// Smallest timeout.
    pub rto_min: Duration,
    /// Largest timeout.
    pub rto_max: Duration,
    /// The clock granularity `G` of RFC 6298.
    pub granularity: Duration,
    /// A coarse timer: the retransmission timer only expires on multiples
    /// of this (BSD's 500 ms slow timer; the "long timeout" of the older
    /// TCP studies). `None` for an exact timer.
    pub timer_tick: Option<Duration>,
    /// Duplicate ACKs that start fast retransmit.
    pub dupthresh: u32,
    /// Timeouts of a SYN before the connection gives up.
    pub syn_retries: u32,
    /// Timeouts of the same data before the connection gives up.
    pub data_retries: u32,
    /// How long a connection waits in TIME-WAIT.
    pub time_wait: Duration,
    /// Trace events kept (0: no trace).
    pub trace_limit: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            variant: Variant::Sack,
            mss: 1460,
            send_buffer: 1 << 20,
            recv_buffer: 1 << 20,
            window_scale: true,
            sack: true,
            timestamps: true,
            delayed_ack: Some(Duration::from_millis(40)),
            initial_window: None,
            maxburst: None,
            decrease: 0.5,
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(60),
            granularity: Duration::from_millis(1),
            timer_tick: None,
            dupthresh: 3,
            syn_retries: 6,
            data_retries: 15,
            time_wait: Duration::from_secs(60),
            trace_limit: 0,
        }
    }
}

/// One end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// IPv4 address.
    pub addr: Ipv4Addr,
    /// Port.
    pub port: u16,
}

/// RFC 9293's connection states (LISTEN is the host's, not a
/// connection's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// SYN sent, waiting for the peer's.
    SynSent,
    /// SYN received and answered.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// This side closed, its FIN not yet ACKed.
    FinWait1,
    /// This side's FIN ACKed, waiting for the peer's.
    FinWait2,
    /// The peer closed; this side may still send.
    CloseWait,
    /// Both closed at once, this side's FIN not yet ACKed.
    Closing,
    /// The peer closed first, then this side; waiting for the ACK of this
    /// side's FIN.
    LastAck,
    /// Both closed; waiting for stray segments to die out.
    TimeWait,
    /// Gone.
    Closed,
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Both sides closed.
    Done,
    /// The peer reset it.
    Reset,
    /// The peer refused the SYN.
    Refused,
    /// A SYN or data went unanswered through every retry.
    TimedOut,
    /// This side aborted it.
    Aborted,
}

impl CloseReason {
    /// The reason's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            CloseReason::Done => "done",
            CloseReason::Reset => "reset",
            CloseReason::Refused => "refused",
            CloseReason::TimedOut => "timed_out",
            CloseReason::Aborted => "aborted",
        }
    }
}

/// Segments the connection did not accept, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rejected {
    /// Outside the receive window (answered with an ACK).
    pub out_of_window: u64,
    /// An older timestamp than the last in order (PAWS, RFC 7323).
    pub paws: u64,
    /// ACKing data never sent.
    pub ack_unsent: u64,
    /// No ACK bit in a synchronized state.
    pub no_ack: u64,
    /// A SYN in a synchronized state, or an unacceptable SYN-ACK.
    pub bad_syn: u64,
    /// A RST not exactly at the next expected byte (challenged).
    pub bad_rst: u64,
    /// Arrived after the connection closed.
    pub closed: u64,
}

impl Rejected {
    /// Every count with its name.
    pub fn named(&self) -> [(&'static str, u64); 7] {
        [
            ("out_of_window", self.out_of_window),
            ("paws", self.paws),
            ("ack_unsent", self.ack_unsent),
            ("no_ack", self.no_ack),
            ("bad_syn", self.bad_syn),
            ("bad_rst", self.bad_rst),
            ("closed", self.closed),
        ]
    }

    /// All of them.
    pub fn total(&self) -> u64 {
        self.named().iter().map(|(_, n)| n).sum()
    }
}

/// What a connection counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Segments sent, of any kind.
    pub segs_out: u64,
    /// Segments handed in.
    pub segs_in: u64,
    /// Segments sent carrying data (or SYN or FIN).
    pub data_segs_out: u64,
    /// Of those, retransmissions (in whole or part).
    pub retransmits: u64,
    /// Sequence space retransmitted.
    pub bytes_retransmitted: u64,
    /// Bytes of data ACKed by the peer.
    pub bytes_acked: u64,
    /// Bytes of data received in order (handed to the reader's buffer).
    pub bytes_received: u64,
    /// Bytes that arrived again (already received).
    pub bytes_duplicate: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Fast retransmits (entries into loss recovery on duplicate ACKs).
    pub fast_retransmits: u64,
    /// Duplicate ACKs received.
    pub dup_acks: u64,
    /// Partial ACKs received during recovery.
    pub partial_acks: u64,
    /// Segments not accepted.
    pub rejected: Rejected,
}

/// One TCP connection.
pub struct Connection {
    cfg: Config,
    local: Endpoint,
    remote: Endpoint,
    state: State,
    closed: Option<CloseReason>,
    now: Instant,

    // Send side.
    iss: Seq,
    snd_una: Seq,
    snd_nxt: Seq,
    /// One past the highest sequence number sent.
    snd_max: Seq,
    /// The peer's window, scaled, in bytes.
    snd_wnd: u32,
    snd_wl1: Seq,
    snd_wl2: Seq,
    /// Shift applied to the peer's window field.
    snd_shift: u8,
    /// Data written and not ACKed; its first byte is `buf_start`.
    buf: VecDeque<u8>,
    buf_start: Seq,
    /// The application closed: a FIN follows the data.
    fin_queued: bool,
    /// Payload bytes per segment.
    smss: u32,

    // Receive side.
    irs: Seq,
    reasm: Option<Reassembly>,
    /// In-order data not yet read.
    rx: VecDeque<u8>,
    /// The right edge of the window last advertised.
    rcv_adv: Seq,
    /// Shift applied to the window this side advertises.
    rcv_shift: u8,
    /// Both sides offered window scaling.
    ws_agreed: bool,
    /// Where the peer's FIN is, once seen.
    peer_fin: Option<Seq>,
    fin_received: bool,
    /// Bytes received in order and not yet ACKed.
    unacked: u32,
    last_ack_sent: Seq,

    // Options agreed.
    sack_ok: bool,
    ts_ok: bool,
    ts_recent: u32,
    ts_offset: u32,

    // Congestion control.
    cwnd: u32,
    ssthresh: u32,
    dupacks: u32,
    in_recovery: bool,
    /// Highest sequence sent when recovery (or a timeout) began.
    recover: Seq,
    /// Whether `recover` guards fast retransmit (set once a recovery or
    /// timeout has happened).
    recover_set: bool,
    /// One past the highest byte retransmitted in this SACK recovery.
    high_rxt: Seq,
    board: Scoreboard,
    /// Retransmit the segment at `snd_una` on the next output.
    rexmit_una: bool,
    /// The persist timer fired: probe the zero window.
    probe_due: bool,

    // Timers.
    rtt: Rtt,
    /// The segment being timed (no timestamps) and when it left.
    timing: Option<(Seq, Instant)>,
    rto_at: Option<Instant>,
    /// Timeouts of the same data (or SYN) in a row.
    retries: u32,
    ack_at: Option<Instant>,
    time_wait_at: Option<Instant>,

    // Output.
    /// An ACK must go out now.
    ack_now: bool,
    /// Something may be sent (new data, a window opened, recovery).
    want_output: bool,
    /// The SYN (or SYN-ACK) is to be sent.
    syn_due: bool,
    ident: u16,
    scratch: Vec<u8>,
    payload_scratch: Vec<u8>,
    sack_scratch: Vec<(Seq, Seq)>,

    stats: Stats,
    trace: Trace,
}

impl Connection {
    fn new(mut cfg: Config, local: Endpoint, remote: Endpoint, iss: Seq, now: Instant) -> Self {
        // A window is at most 2^30 bytes (RFC 7323); so are the buffers.
        cfg.send_buffer = cfg.send_buffer.min(1 << 30);
        cfg.recv_buffer = cfg.recv_buffer.clamp(1, 1 << 30);
        let rtt = Rtt::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max, cfg.granularity);
        let trace = Trace::new(cfg.trace_limit);
        let rcv_shift = if cfg.window_scale {
            let mut s = 0u8;
            while s < 14 && (cfg.recv_buffer >> s) > 65_535 {
                s += 1;
            }
            s
        } else {
            0
        };
        let smss = u32::from(cfg.mss.max(64));
        Connection {
            local,
            remote,
            state: State::SynSent,
            closed: None,
            now,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            snd_wl1: Seq(0),
            snd_wl2: iss,
            snd_shift: 0,
            buf: VecDeque::new(),
            buf_start: iss + 1,
            fin_queued: false,
            smss,
            irs: Seq(0),
            reasm: None,
            rx: VecDeque::new(),
            rcv_adv: Seq(0),
            rcv_shift,
            ws_agreed: false,
            peer_fin: None,
            fin_received: false,
            unacked: 0,
            last_ack_sent: Seq(0),
            sack_ok: false,
            ts_ok: false,
            ts_recent: 0,
            ts_offset: iss.0.rotate_left(13),
            cwnd: smss,
            ssthresh: u32::MAX,
            dupacks: 0,
            in_recovery: false,
            recover: iss,
            recover_set: false,
            high_rxt: iss,
            board: Scoreboard::new(),
            rexmit_una: false,
            probe_due: false,
            rtt,
            timing: None,
            rto_at: None,
            retries: 0,
            ack_at: None,
            time_wait_at: None,
            ack_now: false,
            want_output: false,
            syn_due: false,
            ident: iss.0 as u16,
            scratch: Vec::with_capacity(usize::from(cfg.mss) + 120),
            payload_scratch: Vec::new(),
            sack_scratch: Vec::new(),
            stats: Stats::default(),
            trace,
            cfg,
        }
    }

    /// An active open from `local` to `remote` with initial sequence
    /// number `iss`: the SYN goes out on the next [`Connection::poll`].
    pub fn connect(cfg: Config, local: Endpoint, remote: Endpoint, iss: Seq, now: Instant) -> Self {
        let mut c = Connection::new(cfg, local, remote, iss, now);
        c.syn_due = true;
        c.want_output = true;
        c
    }

    /// A passive open: `syn` arrived for a listening port (the host
    /// checked that it is a SYN without ACK). The SYN-ACK goes out on the
    /// next [`Connection::poll`].
    pub fn accept(cfg: Config, syn: &Parsed<'_>, iss: Seq, now: Instant) -> Self {
        let local = Endpoint {
            addr: syn.dst,
            port: syn.repr.dst_port,
        };
        let remote = Endpoint {
            addr: syn.src,
            port: syn.repr.src_port,
        };
        let mut c = Connection::new(cfg, local, remote, iss, now);
        c.state = State::SynReceived;
        c.take_syn(syn);
        c.stats.segs_in += 1;
        c.syn_due = true;
        c.want_output = true;
        c
    }

    /// The peer's SYN: its sequence number, options and window.
    fn take_syn(&mut self, p: &Parsed<'_>) {
        let r = &p.repr;
        self.irs = r.seq;
        self.reasm = Some(Reassembly::new(r.seq + 1, self.cfg.recv_buffer));
        self.rcv_adv = r.seq + 1;
        self.last_ack_sent = r.seq + 1;
        // An option is in force only if both sides offer it; a SYN-ACK
        // only carries what the SYN offered.
        match r.wscale {
            Some(s) if self.cfg.window_scale => {
                self.ws_agreed = true;
                self.snd_shift = s.min(14);
            }
            _ => {
                self.ws_agreed = false;
                self.rcv_shift = 0;
                self.snd_shift = 0;
            }
        }
        self.sack_ok = self.cfg.sack && r.sack_permitted;
        if let (true, Some(ts)) = (self.cfg.timestamps, r.timestamp) {
            self.ts_ok = true;
            self.ts_recent = ts.val;
        }
        let peer_mss = u32::from(r.mss.unwrap_or(536));
        let overhead = if self.ts_ok { 12 } else { 0 };
        self.smss = (u32::from(self.cfg.mss).min(peer_mss))
            .saturating_sub(overhead)
            .max(32);
        self.snd_wnd = u32::from(r.window); // SYN windows are never scaled
        self.snd_wl1 = r.seq;
        let iw = self.cfg.initial_window.unwrap_or(match self.smss {
            s if s > 2190 => 2,
            s if s > 1095 => 3,
            _ => 4,
        });
        self.cwnd = iw.max(1).saturating_mul(self.smss);
        self.trace_window();
    }

    /// Where this connection starts.
    pub fn local(&self) -> Endpoint {
        self.local
    }

    /// Where it goes.
    pub fn remote(&self) -> Endpoint {
        self.remote
    }

    /// Its state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Why it closed, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.closed
    }

    /// What it counted.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Its trace.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The congestion window and slow-start threshold, in bytes.
    pub fn window(&self) -> (u32, u32) {
        (self.cwnd, self.ssthresh)
    }

    /// Payload bytes per segment, as agreed.
    pub fn smss(&self) -> u32 {
        self.smss
    }

    /// The retransmission timeout now.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }

    /// The smoothed round-trip time, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// Options in force: window scaling (this side's shift, the peer's),
    /// SACK, timestamps.
    pub fn options(&self) -> (u8, u8, bool, bool) {
        (self.rcv_shift, self.snd_shift, self.sack_ok, self.ts_ok)
    }

    /// Room in the send buffer.
    pub fn send_space(&self) -> usize {
        if self.fin_queued || !self.can_write() {
            return 0;
        }
        self.cfg.send_buffer.saturating_sub(self.buf.len())
    }

    fn can_write(&self) -> bool {
        matches!(
            self.state,
            State::SynSent | State::SynReceived | State::Established | State::CloseWait
        )
    }

    /// Writes as much of `data` as the send buffer takes; returns how much.
    pub fn send(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.send_space());
        if n > 0 {
            self.buf.extend(&data[..n]);
            self.want_output = true;
        }
        n
    }

    /// Data written and not yet ACKed.
    pub fn unacked_len(&self) -> usize {
        self.buf.len()
    }

    /// Hands in-order data received to `f` (in one or two pieces) and
    /// frees it; returns how much.
    pub fn recv(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        let n = self.rx.len();
        if n == 0 {
            return 0;
        }
        let (a, b) = self.rx.as_slices();
        f(a);
        if !b.is_empty() {
            f(b);
        }
        self.rx.clear();
        // Tell the peer when the window opens noticeably.
        let before = self.rcv_adv.since(self.rcv_nxt());
        if before < self.smss.min(self.cfg.recv_buffer as u32 / 2) {
            self.ack_now = true;
            self.want_output = true;
        }
        n
    }

    /// In-order data waiting to be read.
    pub fn recv_len(&self) -> usize {
        self.rx.len()
    }

    /// The peer has closed its side and every byte before its FIN has
    /// arrived.
    pub fn peer_closed(&self) -> bool {
        self.fin_received
    }

    /// Ends this side: a FIN follows the data written (after the
    /// handshake, if it has not ended). To drop a connection at once, use
    /// [`Connection::abort`].
    pub fn close(&mut self) {
        // Before the handshake ends the FIN waits, like data.
        if self.can_write() && !self.fin_queued {
            self.fin_queued = true;
            self.want_output = true;
        }
    }

    /// Drops the connection at once, sending a RST if it was synchronized.
    pub fn abort(&mut self, now: Instant, tx: &mut dyn FnMut(&[u8])) {
        self.now = now;
        if matches!(
            self.state,
            State::SynReceived
                | State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
                | State::Closing
                | State::LastAck
        ) {
            let r = self.repr(
                Flags {
                    rst: true,
                    ack: true,
                    ..Flags::default()
                },
                self.snd_nxt,
            );
            self.emit(&r, None, tx);
        }
        self.finish(CloseReason::Aborted);
    }

    fn finish(&mut self, why: CloseReason) {
        self.state = State::Closed;
        self.closed.get_or_insert(why);
        self.rto_at = None;
        self.ack_at = None;
        self.time_wait_at = None;
        self.want_output = false;
        self.ack_now = false;
        self.syn_due = false;
    }

    /// The next byte expected from the peer.
    pub fn rcv_nxt(&self) -> Seq {
        let data = self.reasm.as_ref().map_or(self.irs, Reassembly::rcv_nxt);
        data + u32::from(self.fin_received)
    }

    /// Where the data written so far ends, and the FIN after it if queued.
    fn data_end(&self) -> Seq {
        self.buf_start + self.buf.len() as u32
    }

    fn fin_seq(&self) -> Option<Seq> {
        self.fin_queued.then(|| self.data_end())
    }

    /// When [`Connection::poll`] next has work: now if output is pending,
    /// else the earliest timer.
    pub fn poll_at(&self) -> Option<Instant> {
        if self.state == State::Closed {
            return None;
        }
        if self.ack_now || self.want_output || self.syn_due || self.rexmit_una {
            return Some(self.now);
        }
        [self.rto_at, self.ack_at, self.time_wait_at]
            .into_iter()
            .flatten()
            .min()
    }

    // ---------------------------------------------------------------
    // Input.

    /// A segment for this connection (the host matched its addresses and
    /// ports and checked it with [`seg::parse`]).
    pub fn process(&mut self, now: Instant, p: &Parsed<'_>) {
        self.now = now;
        self.stats.segs_in += 1;
        match self.state {
            State::Closed => {
                self.stats.rejected.closed += 1;
            }
            State::SynSent => self.process_syn_sent(now, p),
            _ => self.process_synchronized(now, p),
        }
    }

    fn process_syn_sent(&mut self, now: Instant, p: &Parsed<'_>) {
        let r = &p.repr;
        if r.flags.ack && (r.ack <= self.iss || r.ack > self.snd_max) {
            self.stats.rejected.bad_syn += 1;
            return;
        }
        if r.flags.rst {
            if r.flags.ack {
                self.finish(CloseReason::Refused);
            } else {
                self.stats.rejected.bad_rst += 1;
            }
            return;
        }
        if !r.flags.syn {
            self.stats.rejected.no_ack += 1;
            return;
        }
        self.take_syn(p);
        if r.flags.ack {
            self.snd_una = r.ack;
            self.snd_wl2 = r.ack;
            self.rto_at = None;
            self.retries = 0;
            if let Some((_, t)) = self.timing.take() {
                self.rtt.sample(now.since(t));
            }
            self.state = State::Established;
            self.ack_now = true;
            self.want_output = true;
        } else {
            // Simultaneous open.
            self.state = State::SynReceived;
            self.syn_due = true;
            self.want_output = true;
        }
    }

    fn process_synchronized(&mut self, now: Instant, p: &Parsed<'_>) {
        let r = &p.repr;
        if self.state == State::SynReceived && r.flags.syn && !r.flags.ack && r.seq == self.irs {
            // Our SYN-ACK was lost: send it again.
            self.syn_due = true;
            return;
        }
        let rcv_nxt = self.rcv_nxt();
        // PAWS (RFC 7323 5.3).
        if self.ts_ok && !r.flags.rst {
            if let Some(ts) = r.timestamp {
                if (ts.val.wrapping_sub(self.ts_recent) as i32) < 0 {
                    self.stats.rejected.paws += 1;
                    self.ack_now = true;
                    return;
                }
            }
        }
        // Acceptability (RFC 9293 3.10.7.4).
        let seg_len = r.seq_len(p.payload.len());
        let wnd = self.rcv_adv.since(rcv_nxt);
        let acceptable = match (seg_len, wnd) {
            // A segment without data is taken anywhere up to the window's
            // right edge: a peer that filled the window (or sent a probe)
            // ACKs from beyond it, and its ACKs must get through (RFC 9293
            // asks for this allowance; Linux makes it).
            (0, _) => r.seq >= rcv_nxt && r.seq <= rcv_nxt + wnd,
            (_, 0) => false,
            (n, _) => {
                r.seq.within(rcv_nxt, rcv_nxt + wnd)
                    || (r.seq + (n - 1)).within(rcv_nxt, rcv_nxt + wnd)
            }
        };
        if !acceptable {
            if r.flags.rst {
                self.stats.rejected.bad_rst += 1;
                return;
            }
            if self.state == State::TimeWait && r.flags.fin {
                // The peer did not get the ACK of its FIN: ACK again and
                // wait anew.
                self.time_wait_at = Some(now + self.cfg.time_wait);
            }
            // Data already received (a retransmission) or beyond the
            // window: say where we are.
            if seg_len > 0 && r.seq < rcv_nxt {
                self.stats.bytes_duplicate += u64::from(p.payload.len() as u32);
            }
            self.stats.rejected.out_of_window += 1;
            self.ack_now = true;
            return;
        }
        if r.flags.rst {
            if r.seq == rcv_nxt {
                let why = if self.state == State::SynReceived {
                    CloseReason::Refused
                } else {
                    CloseReason::Reset
                };
                self.finish(why);
            } else {
                self.stats.rejected.bad_rst += 1;
                self.ack_now = true;
            }
            return;
        }
        if r.flags.syn {
            self.stats.rejected.bad_syn += 1;
            self.ack_now = true;
            return;
        }
        if !r.flags.ack {
            self.stats.rejected.no_ack += 1;
            return;
        }
        if self.state == State::SynReceived {
            if r.ack > self.snd_una && r.ack <= self.snd_max {
                self.state = State::Established;
                self.snd_wnd = u32::from(r.window) << self.snd_shift;
                self.snd_wl1 = r.seq;
                self.snd_wl2 = r.ack;
            } else {
                self.stats.rejected.bad_syn += 1;
                return;
            }
        }
        // Timestamps: remember the peer's for echo (RFC 7323 4.3).
        if let (true, Some(ts)) = (self.ts_ok, r.timestamp) {
            if r.seq <= self.last_ack_sent {
                self.ts_recent = ts.val;
            }
        }
        if !self.process_ack(now, p) {
            return;
        }
        // Data.
        if !p.payload.is_empty() && self.may_receive() {
            self.take_data(now, r.seq, p.payload);
        }
        if r.flags.fin && self.may_receive() {
            let at = r.seq + p.payload.len() as u32;
            self.peer_fin.get_or_insert(at);
            self.ack_now = true;
        }
        self.check_peer_fin(now);
    }

    fn may_receive(&self) -> bool {
        matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        )
    }

    /// The ACK part of an acceptable segment; false if the segment is to
    /// be dropped.
    fn process_ack(&mut self, now: Instant, p: &Parsed<'_>) -> bool {
        let r = &p.repr;
        let ack = r.ack;
        if ack > self.snd_max {
            self.stats.rejected.ack_unsent += 1;
            self.ack_now = true;
            return false;
        }
        let window = u32::from(r.window) << self.snd_shift;
        let old = ack < self.snd_una;
        // Window update (RFC 9293 3.10.7.4, fifth check).
        let window_changed = window != self.snd_wnd;
        if !old && (self.snd_wl1 < r.seq || (self.snd_wl1 == r.seq && self.snd_wl2 <= ack)) {
            if window > self.snd_wnd {
                self.want_output = true;
            }
            self.snd_wnd = window;
            self.snd_wl1 = r.seq;
            self.snd_wl2 = ack;
        }
        if old {
            return true;
        }
        if self.sack_ok {
            for &(l, rr) in r.sack.as_slice() {
                if self.board.add(l, rr, ack, self.snd_max) {
                    self.want_output = true;
                }
            }
        }
        let newly = ack.since(self.snd_una);
        if newly > 0 {
            self.new_ack(now, ack, newly, r.timestamp);
        } else if self.snd_max > self.snd_una
            && window != 0
            && p.payload.is_empty()
            && !r.flags.syn
            && !r.flags.fin
            && !window_changed
        {
            self.dup_ack(now, ack);
        }
        // Our FIN ACKed?
        if let Some(fin) = self.fin_seq() {
            if self.snd_una == fin + 1 {
                match self.state {
                    State::FinWait1 => self.state = State::FinWait2,
                    State::Closing => self.enter_time_wait(now),
                    State::LastAck => {
                        self.finish(CloseReason::Done);
                        return false;
                    }
                    _ => {}
                }
            }
        }
        true
    }

    fn new_ack(&mut self, now: Instant, ack: Seq, newly: u32, ts: Option<Timestamp>) {
        self.trace.push(now, Event::Ack { ack, dup: false });
        // The send buffer: the SYN and FIN take sequence space, not
        // buffer.
        let data_acked = ack
            .min(self.data_end())
            .since(self.buf_start.max(self.snd_una));
        let drained = (data_acked as usize).min(self.buf.len());
        self.buf.drain(..drained);
        self.buf_start += drained as u32;
        self.stats.bytes_acked += drained as u64;
        self.snd_una = ack;
        if self.snd_nxt < ack {
            self.snd_nxt = ack;
        }
        self.board.ack(ack);
        if self.high_rxt < ack {
            self.high_rxt = ack;
        }
        // Round-trip time: timestamps (unambiguous, RFC 7323 4.1), or the
        // timed segment if it was not retransmitted (Karn).
        match (self.ts_ok, ts) {
            (true, Some(t)) if t.ecr != 0 => {
                let ms = self.ts_now(now).wrapping_sub(t.ecr);
                if ms < 1 << 30 {
                    self.rtt.sample(Duration::from_millis(i64::from(ms)));
                }
            }
            _ => {
                if let Some((s, t)) = self.timing {
                    if ack > s {
                        self.rtt.sample(now.since(t));
                        self.timing = None;
                    }
                }
            }
        }
        self.retries = 0;
        self.rto_at = (self.snd_max > self.snd_una).then(|| self.timer_from(now));
        self.want_output = true;
        let variant = self.variant();
        if self.in_recovery {
            if ack >= self.recover {
                self.in_recovery = false;
                self.dupacks = 0;
                let flight = self.snd_max.since(self.snd_una);
                self.cwnd = match variant {
                    Variant::NewReno => self.ssthresh.min(flight.max(self.smss) + self.smss),
                    _ => self.ssthresh,
                };
                self.trace.push(now, Event::RecoveryEnd { ack });
                self.trace_window();
            } else {
                self.stats.partial_acks += 1;
                self.trace.push(now, Event::PartialAck { ack });
                match variant {
                    Variant::Reno => {
                        // Reno leaves recovery on any new ACK.
                        self.in_recovery = false;
                        self.dupacks = 0;
                        self.cwnd = self.ssthresh;
                        self.trace.push(now, Event::RecoveryEnd { ack });
                        self.trace_window();
                    }
                    Variant::NewReno => {
                        // Hoe: the next hole is lost too; retransmit it,
                        // deflate by what was ACKed, and stay.
                        self.rexmit_una = true;
                        self.cwnd = self.cwnd.saturating_sub(newly);
                        if newly >= self.smss {
                            self.cwnd += self.smss;
                        }
                        self.cwnd = self.cwnd.max(self.smss);
                        self.trace_window();
                    }
                    Variant::Sack | Variant::Tahoe => {}
                }
            }
            return;
        }
        self.dupacks = 0;
        if drained == 0 {
            // Only the SYN or FIN: no data, no growth.
            return;
        }
        let inc = if self.cwnd < self.ssthresh {
            (drained as u32).min(self.smss)
        } else {
            (u64::from(self.smss) * u64::from(self.smss) / u64::from(self.cwnd.max(1))).max(1)
                as u32
        };
        self.cwnd = self.cwnd.saturating_add(inc).min(1 << 30);
        self.trace_window();
    }

    fn dup_ack(&mut self, now: Instant, ack: Seq) {
        self.stats.dup_acks += 1;
        self.dupacks += 1;
        self.trace.push(now, Event::Ack { ack, dup: true });
        let variant = self.variant();
        if self.in_recovery {
            if matches!(variant, Variant::Reno | Variant::NewReno) {
                self.cwnd = self.cwnd.saturating_add(self.smss);
                self.trace_window();
            }
            self.want_output = true;
            return;
        }
        let trigger = self.dupacks == self.cfg.dupthresh
            || (variant == Variant::Sack
                && self.dupacks < self.cfg.dupthresh
                && self
                    .board
                    .holes(self.snd_una, self.cfg.dupthresh, self.smss)
                    .next()
                    .is_some_and(|h| h.lost && h.start == self.snd_una));
        if !trigger {
            return;
        }
        // RFC 6582's guard: duplicates for data sent before the last
        // recovery or timeout do not start another (Reno has no guard).
        // `recover` is one past the highest byte sent then, so an ACK equal
        // to it covers everything sent before.
        if variant != Variant::Reno && self.recover_set && ack < self.recover {
            return;
        }
        let flight = self.snd_max.since(self.snd_una);
        self.ssthresh = self.after_loss(flight);
        self.recover = self.snd_max;
        self.recover_set = true;
        self.stats.fast_retransmits += 1;
        self.trace.push(
            now,
            Event::FastRetransmit {
                recover: self.recover,
            },
        );
        match variant {
            Variant::Tahoe => {
                self.cwnd = self.smss;
                self.snd_nxt = self.snd_una;
                self.timing = None;
            }
            Variant::Reno | Variant::NewReno => {
                self.in_recovery = true;
                self.rexmit_una = true;
                self.cwnd = self.ssthresh + 3 * self.smss;
            }
            Variant::Sack => {
                self.in_recovery = true;
                self.rexmit_una = true;
                self.high_rxt = self.snd_una;
                self.cwnd = self.ssthresh;
            }
        }
        self.trace_window();
        self.want_output = true;
    }

    /// `ssthresh` after a loss with `flight` bytes out (RFC 5681's
    /// equation 4 with the configured share instead of a half).
    fn after_loss(&self, flight: u32) -> u32 {
        let share = self.cfg.decrease.clamp(0.1, 0.95);
        ((f64::from(flight) * share) as u32).max(2 * self.smss)
    }

    /// The variant in force: SACK needs the peer's agreement.
    fn variant(&self) -> Variant {
        match self.cfg.variant {
            Variant::Sack if !self.sack_ok => Variant::NewReno,
            v => v,
        }
    }

    fn take_data(&mut self, now: Instant, seq: Seq, data: &[u8]) {
        let Some(reasm) = self.reasm.as_mut() else {
            return;
        };
        // Keep to the window advertised.
        let edge = self.rcv_adv;
        let room = edge.since(seq) as usize;
        let data = &data[..data.len().min(room)];
        let rx = &mut self.rx;
        let held_before = reasm.held();
        let ins = reasm.insert(seq, data, &mut |d| rx.extend(d));
        self.stats.bytes_received += ins.delivered as u64;
        self.stats.bytes_duplicate += ins.duplicate as u64;
        if ins.out_of_order || held_before > 0 || ins.delivered == 0 {
            // RFC 5681 4.2: out-of-order data, data filling a hole and
            // duplicates are ACKed at once.
            self.ack_now = true;
        } else {
            self.unacked += ins.delivered as u32;
            match self.cfg.delayed_ack {
                Some(d) if self.unacked < 2 * self.smss => {
                    self.ack_at.get_or_insert(now + d);
                }
                _ => self.ack_now = true,
            }
        }
        self.want_output |= self.ack_now;
    }

    /// The peer's FIN, once every byte before it is in.
    fn check_peer_fin(&mut self, now: Instant) {
        let Some(at) = self.peer_fin else { return };
        if self.fin_received || self.rcv_nxt() != at {
            return;
        }
        self.fin_received = true;
        self.ack_now = true;
        match self.state {
            State::Established => self.state = State::CloseWait,
            State::FinWait1 => self.state = State::Closing,
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.rto_at = None;
        self.time_wait_at = Some(now + self.cfg.time_wait);
    }

    // ---------------------------------------------------------------
    // Timers and output.

    /// When the retransmission timer set now expires.
    fn timer_from(&self, now: Instant) -> Instant {
        let at = now + self.rtt.rto();
        match self.cfg.timer_tick {
            Some(t) if t.as_nanos() > 0 => {
                let tick = t.as_nanos();
                Instant::from_nanos((at.as_nanos() + tick - 1) / tick * tick)
            }
            _ => at,
        }
    }

    /// The timestamp clock: 1 ms a tick.
    fn ts_now(&self, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.ts_offset)
    }

    /// Runs the timers due by `now` and sends what is due, each IPv4
    /// packet through `tx`.
    pub fn poll(&mut self, now: Instant, tx: &mut dyn FnMut(&[u8])) {
        self.now = now;
        if self.time_wait_at.is_some_and(|t| t <= now) {
            self.finish(CloseReason::Done);
            return;
        }
        if self.rto_at.is_some_and(|t| t <= now) {
            self.rto_at = None;
            self.on_timeout(now);
            if self.state == State::Closed {
                return;
            }
        }
        if self.ack_at.is_some_and(|t| t <= now) {
            self.ack_at = None;
            self.ack_now = true;
        }
        self.output(now, tx);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.retries += 1;
        if matches!(self.state, State::SynSent | State::SynReceived) {
            if self.retries > self.cfg.syn_retries {
                self.finish(CloseReason::TimedOut);
                return;
            }
            self.rtt.back_off();
            self.stats.timeouts += 1;
            self.trace.push(
                now,
                Event::Timeout {
                    backoff: self.rtt.backoffs(),
                },
            );
            self.timing = None;
            self.syn_due = true;
            return;
        }
        if self.snd_wnd == 0 && self.data_end() + u32::from(self.fin_queued) > self.snd_una {
            // The persist timer: the peer's window is shut. Probing goes
            // on as long as the peer answers; it is not a loss.
            self.retries -= 1;
            self.rtt.back_off();
            self.probe_due = true;
            self.want_output = true;
            return;
        }
        if self.retries > self.cfg.data_retries {
            self.finish(CloseReason::TimedOut);
            return;
        }
        self.stats.timeouts += 1;
        let first = self.rtt.backoffs() == 0;
        self.rtt.back_off();
        self.trace.push(
            now,
            Event::Timeout {
                backoff: self.rtt.backoffs(),
            },
        );
        if self.snd_max > self.snd_una {
            if first {
                let flight = self.snd_max.since(self.snd_una);
                self.ssthresh = self.after_loss(flight);
            }
            self.cwnd = self.smss;
            self.in_recovery = false;
            self.dupacks = 0;
            self.recover = self.snd_max;
            self.recover_set = true;
            self.snd_nxt = self.snd_una;
            self.board.clear();
            self.high_rxt = self.snd_una;
            self.timing = None;
            self.trace_window();
        }
        // With nothing outstanding this was the persist timer: the window
        // probe goes out below.
        self.want_output = true;
    }

    fn output(&mut self, now: Instant, tx: &mut dyn FnMut(&[u8])) {
        let mut budget = self.cfg.maxburst.unwrap_or(u32::MAX).max(1);
        let mut sent = false;
        if self.syn_due {
            self.syn_due = false;
            self.send_syn(now, tx);
            sent = true;
        }
        let synchronized = !matches!(
            self.state,
            State::SynSent | State::SynReceived | State::Closed | State::TimeWait
        );
        if synchronized {
            if self.rexmit_una && self.snd_max > self.snd_una {
                self.rexmit_una = false;
                let len = self.segment_len(self.snd_una, u32::MAX);
                if len > 0 {
                    self.send_segment(now, self.snd_una, len, tx);
                    if self.variant() == Variant::Sack {
                        self.high_rxt = self.high_rxt.max(self.snd_una + len);
                    }
                    budget -= 1;
                    sent = true;
                }
            }
            self.rexmit_una = false;
            if self.in_recovery && self.variant() == Variant::Sack {
                sent |= self.output_sack_recovery(now, &mut budget, tx);
            } else {
                sent |= self.output_window(now, &mut budget, tx);
            }
        }
        self.want_output = false;
        // The timer runs while anything is in flight, and (as the persist
        // timer) while data waits behind a shut window.
        let waiting = self.data_end() + u32::from(self.fin_queued) > self.snd_nxt;
        if self.rto_at.is_none()
            && synchronized
            && (self.snd_max > self.snd_una || (self.snd_wnd == 0 && waiting))
        {
            self.rto_at = Some(self.timer_from(now));
        }
        if self.ack_now && !sent && self.state != State::Closed && self.state != State::SynSent {
            self.send_ack(tx);
        }
    }

    /// Sends new data (or goes back over old after a timeout) as the
    /// windows allow.
    fn output_window(&mut self, now: Instant, budget: &mut u32, tx: &mut dyn FnMut(&[u8])) -> bool {
        let mut sent = false;
        while *budget > 0 {
            let wnd = self.cwnd.min(self.snd_wnd);
            let limit = self.snd_una + wnd;
            let room = limit.since(self.snd_nxt);
            let end = self.data_end() + u32::from(self.fin_queued);
            if self.snd_wnd == 0 && std::mem::take(&mut self.probe_due) {
                // The persist timer fired: one byte (or the FIN) beyond the
                // shut window, the first unACKed one if a probe is out.
                let at = if self.snd_nxt > self.snd_una {
                    self.snd_una
                } else {
                    self.snd_nxt
                };
                let len = self.segment_len(at, 1);
                if len > 0 {
                    self.send_segment(now, at, len, tx);
                    self.snd_nxt = self.snd_nxt.max(at + len);
                    sent = true;
                }
                break;
            }
            if self.snd_nxt >= end || room == 0 {
                break;
            }
            let len = self.segment_len(self.snd_nxt, room);
            if len == 0 {
                break;
            }
            // Sender-side silly window avoidance: a short segment goes
            // only if it is all there is or nothing is in flight.
            let data_left = self.data_end().since(self.snd_nxt);
            if len < self.smss
                && len < data_left
                && self.snd_max > self.snd_una
                && self.snd_nxt >= self.snd_max
            {
                break;
            }
            self.send_segment(now, self.snd_nxt, len, tx);
            self.snd_nxt += len;
            *budget -= 1;
            sent = true;
        }
        sent
    }

    /// RFC 6675's transmission during SACK recovery: while `pipe` leaves
    /// room in `cwnd`, lost holes first, then new data, then holes not yet
    /// thought lost.
    fn output_sack_recovery(
        &mut self,
        now: Instant,
        budget: &mut u32,
        tx: &mut dyn FnMut(&[u8]),
    ) -> bool {
        let mut sent = false;
        let (dt, mss) = (self.cfg.dupthresh, self.smss);
        while *budget > 0 {
            let pipe = self
                .board
                .pipe(self.snd_una, self.snd_max, self.high_rxt, dt, mss);
            if self.cwnd < pipe + mss.min(self.cwnd) {
                break;
            }
            let end = self.data_end() + u32::from(self.fin_queued);
            let (at, cap, rxt) =
                if let Some((s, n)) = self.board.next_lost(self.snd_una, self.high_rxt, dt, mss) {
                    (s, n, true)
                } else if self.snd_max < end && self.snd_max.since(self.snd_una) < self.snd_wnd {
                    let room = (self.snd_una + self.snd_wnd).since(self.snd_max);
                    (self.snd_max, room, false)
                } else if let Some((s, n)) =
                    self.board
                        .next_unsacked(self.snd_una, self.high_rxt, dt, mss)
                {
                    (s, n, true)
                } else {
                    break;
                };
            let len = self.segment_len(at, cap);
            if len == 0 {
                break;
            }
            self.send_segment(now, at, len, tx);
            if rxt {
                self.high_rxt = self.high_rxt.max(at + len);
            } else if self.snd_nxt < at + len {
                self.snd_nxt = at + len;
            }
            *budget -= 1;
            sent = true;
        }
        sent
    }

    /// Sequence space of a segment starting at `at`, at most `cap`: up to
    /// a segment of data, plus the FIN if it reaches the end of the data.
    fn segment_len(&self, at: Seq, cap: u32) -> u32 {
        let data_end = self.data_end();
        let data = data_end
            .since(at)
            .min(self.smss.saturating_sub(self.sack_option_len()).max(1))
            .min(cap);
        let fin = self.fin_queued && at + data == data_end && data < cap;
        data + u32::from(fin)
    }

    /// Bytes the SACK option takes in the segments sent now (blocks go
    /// with every segment while data is held out of order), so a full
    /// segment still fits the peer's MSS (RFC 6691).
    fn sack_option_len(&self) -> u32 {
        let held = self.sack_ok && self.reasm.as_ref().is_some_and(|r| r.held() > 0);
        if !held {
            return 0;
        }
        let mut blocks = Vec::new();
        if let Some(r) = &self.reasm {
            r.sack_blocks(if self.ts_ok { 3 } else { 4 }, &mut blocks);
        }
        if blocks.is_empty() {
            0
        } else {
            4 + 8 * blocks.len() as u32
        }
    }

    /// Sends the segment `[at, at + len)` of sequence space (data, and
    /// the FIN if it covers it).
    fn send_segment(&mut self, now: Instant, at: Seq, len: u32, tx: &mut dyn FnMut(&[u8])) {
        let data_end = self.data_end();
        let fin = self.fin_queued && at + len == data_end + 1;
        let data_len = len - u32::from(fin);
        let retransmit = at < self.snd_max;
        let mut flags = Flags {
            ack: true,
            fin,
            ..Flags::default()
        };
        flags.psh = data_len > 0 && at + data_len == data_end;
        let repr = self.repr(flags, at);
        let off = at.since(self.buf_start) as usize;
        self.emit(&repr, Some((off, data_len as usize)), tx);
        self.stats.data_segs_out += 1;
        if retransmit {
            self.stats.retransmits += 1;
            self.stats.bytes_retransmitted += u64::from(self.snd_max.min(at + len).since(at));
            if self.timing.is_some_and(|(s, _)| s.within(at, at + len)) {
                self.timing = None;
            }
        } else if self.timing.is_none() && !self.ts_ok {
            self.timing = Some((at, now));
        }
        self.trace.push(
            now,
            Event::Send {
                seq: at,
                len,
                retransmit,
            },
        );
        if at + len > self.snd_max {
            self.snd_max = at + len;
        }
        if self.rto_at.is_none() {
            self.rto_at = Some(self.timer_from(now));
        }
        if fin {
            match self.state {
                State::Established => self.state = State::FinWait1,
                State::CloseWait => self.state = State::LastAck,
                _ => {}
            }
        }
    }

    fn send_syn(&mut self, now: Instant, tx: &mut dyn FnMut(&[u8])) {
        let ack = self.state == State::SynReceived;
        let mut r = self.repr(
            Flags {
                syn: true,
                ack,
                ..Flags::default()
            },
            self.iss,
        );
        r.mss = Some(self.cfg.mss);
        // A SYN-ACK carries only what the SYN offered (take_syn left the
        // agreed set).
        let offer_ws = if ack {
            self.ws_agreed
        } else {
            self.cfg.window_scale
        };
        r.wscale = offer_ws.then_some(self.rcv_shift);
        r.sack_permitted = if ack { self.sack_ok } else { self.cfg.sack };
        let ts = if ack { self.ts_ok } else { self.cfg.timestamps };
        r.timestamp = ts.then(|| Timestamp {
            val: self.ts_now(now),
            ecr: if ack { self.ts_recent } else { 0 },
        });
        r.window = self.cfg.recv_buffer.min(65_535) as u16;
        if !ack {
            r.ack = Seq(0);
        }
        self.emit(&r, None, tx);
        self.stats.data_segs_out += 1;
        let retransmit = self.snd_max != self.iss;
        if retransmit {
            self.stats.retransmits += 1;
            self.stats.bytes_retransmitted += 1;
        } else {
            self.timing = Some((self.iss, now));
        }
        self.trace.push(
            now,
            Event::Send {
                seq: self.iss,
                len: 1,
                retransmit,
            },
        );
        self.snd_nxt = self.iss + 1;
        self.snd_max = self.iss + 1;
        self.rto_at = Some(self.timer_from(now));
    }

    fn send_ack(&mut self, tx: &mut dyn FnMut(&[u8])) {
        let r = self.repr(
            Flags {
                ack: true,
                ..Flags::default()
            },
            self.snd_nxt,
        );
        self.emit(&r, None, tx);
    }

    /// A segment's header fields as they stand: ACK, window, timestamps
    /// and SACK blocks.
    fn repr(&mut self, flags: Flags, seq: Seq) -> SegRepr {
        let mut r = SegRepr {
            src_port: self.local.port,
            dst_port: self.remote.port,
            seq,
            ack: self.rcv_nxt(),
            flags,
            window: self.advertise(),
            mss: None,
            wscale: None,
            sack_permitted: false,
            sack: Default::default(),
            timestamp: None,
        };
        if self.ts_ok {
            r.timestamp = Some(Timestamp {
                val: self.ts_now(self.now),
                ecr: self.ts_recent,
            });
        }
        if self.sack_ok {
            if let Some(reasm) = &self.reasm {
                if reasm.held() > 0 {
                    let max = if self.ts_ok { 3 } else { 4 };
                    reasm.sack_blocks(max, &mut self.sack_scratch);
                    for &(a, b) in &self.sack_scratch {
                        r.sack.push(a, b);
                    }
                }
            }
        }
        r
    }

    /// The window field to send: the free receive buffer, its right edge
    /// never moved left, moved right only by a useful amount (receiver
    /// silly window avoidance).
    fn advertise(&mut self) -> u16 {
        let rcv_nxt = self.rcv_nxt();
        let free = self.cfg.recv_buffer.saturating_sub(self.rx.len()) as u32;
        let edge = rcv_nxt + free;
        let step = self.smss.min(self.cfg.recv_buffer as u32 / 2).max(1);
        if edge.since(self.rcv_adv) >= step || self.rcv_adv < rcv_nxt {
            self.rcv_adv = edge.max(self.rcv_adv);
        }
        self.rcv_adv = self.rcv_adv.max(rcv_nxt);
        let wnd = self.rcv_adv.since(rcv_nxt) >> self.rcv_shift;
        wnd.min(65_535) as u16
    }

    /// Emits one packet: `data` is the (offset, length) in the send
    /// buffer of its payload.
    fn emit(&mut self, r: &SegRepr, data: Option<(usize, usize)>, tx: &mut dyn FnMut(&[u8])) {
        let mut payload = std::mem::take(&mut self.payload_scratch);
        payload.clear();
        if let Some((off, len)) = data {
            let (a, b) = self.buf.as_slices();
            let end = off + len;
            if end <= a.len() {
                payload.extend_from_slice(&a[off..end]);
            } else if off >= a.len() {
                payload.extend_from_slice(&b[off - a.len()..end - a.len()]);
            } else {
                payload.extend_from_slice(&a[off..]);
                payload.extend_from_slice(&b[..end - a.len()]);
            }
        }
        let mut out = std::mem::take(&mut self.scratch);
        seg::emit(
            self.local.addr,
            self.remote.addr,
            self.ident,
            r,
            &payload,
            &mut out,
        );
        self.ident = self.ident.wrapping_add(1);
        tx(&out);
        self.scratch = out;
        self.payload_scratch = payload;
        self.stats.segs_out += 1;
        if r.flags.ack {
            self.last_ack_sent = r.ack;
            self.ack_now = false;
            self.ack_at = None;
            self.unacked = 0;
        }
    }

    fn trace_window(&mut self) {
        let e = Event::Window {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
        };
        self.trace.push(self.now, e);
    }
}

/// Writes into `out` the RST answering a segment that belongs to no
/// connection (RFC 9293 3.10.7.1) and returns true, or returns false if the
/// segment is itself a RST.
pub fn reset_reply(p: &Parsed<'_>, out: &mut Vec<u8>) -> bool {
    let r = &p.repr;
    if r.flags.rst {
        return false;
    }
    let (seq, ack, flags) = if r.flags.ack {
        (
            r.ack,
            Seq(0),
            Flags {
                rst: true,
                ..Flags::default()
            },
        )
    } else {
        (
            Seq(0),
            r.seq + r.seq_len(p.payload.len()),
            Flags {
                rst: true,
                ack: true,
                ..Flags::default()
            },
        )
    };
    let repr = SegRepr {
        src_port: r.dst_port,
        dst_port: r.src_port,
        seq,
        ack,
        flags,
        window: 0,
        mss: None,
        wscale: None,
        sack_permitted: false,
        sack: Default::default(),
        timestamp: None,
    };
    seg::emit(p.dst, p.src, 0, &repr, &[], out);
    true
}
