//! The Vidboard: a camera that is a network node.
//!
//! One port. Command cells arrive on the control VCs it is configured with
//! ([`ControlChannel`]: a command VC in, the reply VC paired with it out);
//! each control channel is a session with its own video request, its own
//! destination VC and its own counters. Video leaves on the destination VC
//! a request names, as t-frames ([`crate::val`]) in shaped bursts.
//!
//! **Capture and the frame store.** While the capture loop runs, frame
//! `k` of the source enters the store at `k × period` (the camera's clock
//! starts at time zero and runs whether or not the loop does; frames that
//! fall while it is stopped are never captured, so numbers skip). The
//! store holds at most two frames: the newest captured, and the one
//! leaving. A newer capture replaces the newest; the frame leaving stays
//! until its last cell is out. Sources are pure functions of the frame
//! number, so the pixels of the newest frame are rendered only when it
//! starts to leave: the same picture, without rendering 30 frames a
//! second that nobody asked for.
//!
//! **Shaping.** A frame's cells (its t-frames, one after another) leave in
//! bursts of CB cells handed to the line at once, so they go back to back
//! at the line's rate; the next burst starts the interburst delay after
//! the last cell of a burst has left the line, and the next frame the
//! interframe delay after the last cell of a frame. The camera keeps its
//! own account of the line ([`VidboardConfig::line_rate`], which must be
//! its link's rate; it computes a cell's time exactly as the engine does),
//! so on the wire a burst of CB cells arrives one cell time apart, and the
//! first cell of the next burst one cell time plus the interburst delay
//! after the last. A reply cell takes one cell time of line like any
//! other, and a burst due while it is on the line waits for it. A burst is
//! handed over whole, so the port buffer of the camera's link must hold
//! CB cells (the engine drops what does not fit, counted as overflow).
//!
//! **Requests.** A video request's frame count picks the mode: `n` frames,
//! continuous, or one frame per frame request (the capture loop's closed
//! loop, the seed's Figure 10). A frame is always the newest in the store,
//! and a session never gets the same frame twice, so a session asking
//! faster than the camera captures waits for the next capture; and a
//! frame request that finds one already waiting changes nothing (it is
//! counted as merged): at most one request per session waits, so nothing
//! queues. Sessions with a frame due are served one frame at a time, in
//! turn.
//!
//! **Untrusted input.** A cell that is not a well-formed command on a
//! control VC changes nothing: it is counted by reason, and a malformed
//! command is answered with an error reply on its channel. Reply messages
//! arriving at the camera are counted and not answered (two devices must
//! not answer each other's errors for ever).

use core::fmt;

use aurora_net::{Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::hec::{HecReceiver, HecVerdict};
use aurora_wire::{CellBytes, HEADER_LEN};

use crate::command::{
    self, Ack, AckStatus, CommandCell, Defect, ErrorReason, ErrorReply, Frames, Message, Status,
    VideoRequest,
};
use crate::frame::{Picture, PictureSize, PixelFormat};
use crate::source::Source;
use crate::val::{Layout, Segmenter};

/// The most control channels (sessions) a camera has.
pub const MAX_CHANNELS: usize = 16;

/// A control channel: where a session's commands arrive and its replies
/// leave (VCs on the camera's own link).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ControlChannel {
    /// The VC commands arrive on.
    pub command: VcId,
    /// The VC replies leave on.
    pub reply: VcId,
}

/// How a camera is set up.
#[derive(Clone, Debug, PartialEq)]
pub struct VidboardConfig {
    /// The header format of its link.
    pub format: Format,
    /// Its link's rate in cells a second.
    pub line_rate: f64,
    /// Its control channels, one per session (1 to [`MAX_CHANNELS`]).
    pub channels: Vec<ControlChannel>,
}

/// Why a camera could not be built.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    /// No control channel, or more than [`MAX_CHANNELS`].
    Channels(usize),
    /// The line rate is not a positive number of cells a second.
    Rate(f64),
    /// A VC does not fit the header format.
    Range(VcId),
    /// Two channels take commands on the same VC.
    Duplicate(VcId),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Channels(n) => write!(
                f,
                "a camera needs 1 to {MAX_CHANNELS} control channels, and was given {n}"
            ),
            ConfigError::Rate(r) => write!(
                f,
                "line rate {r} is not a positive number of cells per second"
            ),
            ConfigError::Range(vc) => write!(f, "VC {vc} does not fit the camera's header format"),
            ConfigError::Duplicate(vc) => {
                write!(f, "two control channels take commands on VC {vc}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// What one session did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Commands it sent that were carried out.
    pub commands: u64,
    /// Its commands refused (malformed or not possible).
    pub refused: u64,
    /// Frame requests it sent.
    pub frame_requests: u64,
    /// Frame requests that found one already waiting.
    pub requests_merged: u64,
    /// Frames sent to it (counted when the first cell leaves).
    pub frames_sent: u64,
    /// Frames whose last cell has left.
    pub frames_done: u64,
    /// T-frames whose last cell has left.
    pub tframes_sent: u64,
    /// Video cells sent to it.
    pub cells_sent: u64,
}

/// What the camera counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VidboardCounters {
    /// Cells that arrived.
    pub cells_in: u64,
    /// Arriving cells whose header failed the HEC check.
    pub hec_dropped: u64,
    /// Arriving cells on no control VC.
    pub unknown_vc: u64,
    /// Arriving cells on a control VC that were not user data (OAM, RM).
    pub not_user: u64,
    /// Malformed command cells, by [`Defect`] (in the order of
    /// [`Defect::ALL`]); each was answered with an error reply.
    pub malformed: [u64; Defect::COUNT],
    /// Well-formed commands refused, by reason: (not configured, not
    /// capturing, unsupported size, VPI beyond the link's format).
    pub refused: [u64; 4],
    /// Reply messages (ack, status, error) that arrived, ignored.
    pub replies_received: u64,
    /// Commands carried out.
    pub commands_accepted: u64,
    /// Reply cells sent.
    pub replies_sent: u64,
    /// Frames rendered from the source.
    pub frames_rendered: u64,
    /// Frames sent (first cell out).
    pub frames_sent: u64,
    /// T-frames sent (last cell out).
    pub tframes_sent: u64,
    /// Video cells sent.
    pub cells_sent: u64,
    /// Bursts sent.
    pub bursts: u64,
    /// Video requests dropped because their frames could not be made.
    pub requests_abandoned: u64,
}

impl VidboardCounters {
    /// Malformed command cells of one kind.
    pub fn malformed(&self, d: Defect) -> u64 {
        self.malformed[d as usize]
    }
    /// Command cells refused, malformed or not.
    pub fn refused_total(&self) -> u64 {
        self.malformed.iter().sum::<u64>() + self.refused.iter().sum::<u64>()
    }
}

/// How many frames a session still wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// One when asked; `true` while a request waits.
    OnRequest(bool),
    /// This many more.
    Count(u32),
    /// For as long as the capture loop runs.
    Continuous,
}

#[derive(Debug)]
struct Session {
    ch: ControlChannel,
    request: Option<(VideoRequest, Layout)>,
    want: Want,
    last_sent: Option<u64>,
    stats: SessionStats,
}

impl Session {
    fn wants(&self) -> bool {
        self.request.is_some()
            && match self.want {
                Want::OnRequest(w) => w,
                Want::Count(n) => n > 0,
                Want::Continuous => true,
            }
    }
}

/// The frame leaving.
#[derive(Debug)]
struct Sending {
    session: usize,
    request: VideoRequest,
    seg: Segmenter,
    /// When the next burst may start.
    next_burst: Instant,
}

/// The camera.
#[derive(Debug)]
pub struct Vidboard {
    format: Format,
    cell_time: Duration,
    source: Box<dyn Source>,
    period: i64,
    sessions: Vec<Session>,
    /// The first grid index of the running capture loop.
    capture_from: Option<u64>,
    /// Frames captured by earlier runs of the loop.
    captured_before: u64,
    /// The newest frame captured while the loop was last stopped.
    newest_stopped: Option<u64>,
    /// The frame store's slot for the frame leaving, and which frame,
    /// size and format it holds.
    pic: Picture,
    pic_holds: Option<(u64, PictureSize, PixelFormat)>,
    sending: Option<Sending>,
    /// When the line has sent everything handed to it.
    line_free: Instant,
    /// The earliest time the next frame may start.
    gate: Instant,
    /// The session served after the last one.
    turn: usize,
    now: Instant,
    hec: HecReceiver,
    counters: VidboardCounters,
}

impl Vidboard {
    /// A camera looking at `source`.
    pub fn new(config: VidboardConfig, source: Box<dyn Source>) -> Result<Vidboard, ConfigError> {
        let n = config.channels.len();
        if n == 0 || n > MAX_CHANNELS {
            return Err(ConfigError::Channels(n));
        }
        if !(config.line_rate.is_finite() && config.line_rate > 0.0) {
            return Err(ConfigError::Rate(config.line_rate));
        }
        for (i, ch) in config.channels.iter().enumerate() {
            for vc in [ch.command, ch.reply] {
                if vc.vpi > config.format.max_vpi() {
                    return Err(ConfigError::Range(vc));
                }
            }
            if config.channels[..i].iter().any(|c| c.command == ch.command) {
                return Err(ConfigError::Duplicate(ch.command));
            }
        }
        let period = source.period().as_nanos().max(1);
        Ok(Vidboard {
            format: config.format,
            cell_time: Duration::from_nanos((1e9 / config.line_rate).round().max(1.0) as i64),
            source,
            period,
            sessions: config
                .channels
                .iter()
                .map(|&ch| Session {
                    ch,
                    request: None,
                    want: Want::OnRequest(false),
                    last_sent: None,
                    stats: SessionStats::default(),
                })
                .collect(),
            capture_from: None,
            captured_before: 0,
            newest_stopped: None,
            pic: Picture::new(PictureSize::Quarter, PixelFormat::Mono8),
            pic_holds: None,
            sending: None,
            line_free: Instant::ZERO,
            gate: Instant::ZERO,
            turn: 0,
            now: Instant::ZERO,
            hec: HecReceiver::new(),
            counters: VidboardCounters::default(),
        })
    }

    /// What it counted.
    pub fn counters(&self) -> VidboardCounters {
        self.counters
    }

    /// What session `i` (in the order of the configured channels) did.
    pub fn session(&self, i: usize) -> Option<SessionStats> {
        self.sessions.get(i).map(|s| s.stats)
    }

    /// Session `i`'s video request, if it made one.
    pub fn request(&self, i: usize) -> Option<VideoRequest> {
        self.sessions.get(i)?.request.map(|(r, _)| r)
    }

    /// A cell's time on the line.
    pub fn cell_time(&self) -> Duration {
        self.cell_time
    }

    /// Whether the capture loop runs.
    pub fn capturing(&self) -> bool {
        self.capture_from.is_some()
    }

    /// Whether a frame is leaving.
    pub fn sending(&self) -> bool {
        self.sending.is_some()
    }

    /// The grid index of the last frame time at or before `t`.
    fn grid(&self, t: Instant) -> u64 {
        (t.as_nanos().max(0) / self.period) as u64
    }

    /// The newest frame in the store at `t`, if any was captured.
    pub fn newest_at(&self, t: Instant) -> Option<u64> {
        match self.capture_from {
            Some(from) => {
                let k = self.grid(t);
                if k >= from {
                    Some(k)
                } else {
                    self.newest_stopped
                }
            }
            None => self.newest_stopped,
        }
    }

    /// Frames captured up to `t`.
    pub fn frames_captured_at(&self, t: Instant) -> u64 {
        let running = match self.capture_from {
            Some(from) => (self.grid(t) + 1).saturating_sub(from),
            None => 0,
        };
        self.captured_before + running
    }

    fn start_capture(&mut self, now: Instant) -> AckStatus {
        if self.capture_from.is_some() {
            return AckStatus::Unchanged;
        }
        // The first frame time at or after now.
        let t = now.as_nanos().max(0);
        self.capture_from = Some((t / self.period + i64::from(t % self.period != 0)) as u64);
        AckStatus::Done
    }

    fn stop_capture(&mut self, now: Instant) -> AckStatus {
        if self.capture_from.is_none() {
            return AckStatus::Unchanged;
        }
        self.newest_stopped = self.newest_at(now);
        self.captured_before = self.frames_captured_at(now);
        self.capture_from = None;
        AckStatus::Done
    }

    /// Sends a reply on session `s`'s channel.
    fn reply(&mut self, now: Instant, s: usize, msg: CommandCell, out: &mut Outbox) {
        let Some(cell) = msg.to_cell(self.sessions[s].ch.reply, self.format) else {
            return;
        };
        out.push(0, cell);
        self.line_free = self.line_free.max(now) + self.cell_time;
        self.counters.replies_sent += 1;
    }

    fn refuse(
        &mut self,
        now: Instant,
        s: usize,
        c: &CommandCell,
        reason: ErrorReason,
        detail: usize,
        out: &mut Outbox,
    ) {
        let k = match reason {
            ErrorReason::NotConfigured => 0,
            ErrorReason::NotCapturing => 1,
            ErrorReason::Unsupported => 2,
            _ => 3,
        };
        self.counters.refused[k] += 1;
        self.sessions[s].stats.refused += 1;
        let e = ErrorReply {
            reason,
            command: c.message.code(),
            detail: detail as u16,
        };
        self.reply(now, s, CommandCell::new(c.tag, Message::Error(e)), out);
    }

    fn ack(
        &mut self,
        now: Instant,
        s: usize,
        tag: u16,
        code: u8,
        status: AckStatus,
        out: &mut Outbox,
    ) {
        self.counters.commands_accepted += 1;
        self.sessions[s].stats.commands += 1;
        let a = Ack {
            command: code,
            status,
        };
        self.reply(now, s, CommandCell::new(tag, Message::Ack(a)), out);
    }

    /// Carries out one well-formed command from session `s`.
    fn command(&mut self, now: Instant, s: usize, c: CommandCell, out: &mut Outbox) {
        let code = c.message.code();
        match c.message {
            Message::StartCapture => {
                let st = self.start_capture(now);
                self.ack(now, s, c.tag, code, st, out);
            }
            Message::StopCapture => {
                let st = self.stop_capture(now);
                self.ack(now, s, c.tag, code, st, out);
            }
            Message::VideoRequest(v) => {
                if !self.source.supports(v.size) {
                    let at = command::video_field::SIZE;
                    return self.refuse(now, s, &c, ErrorReason::Unsupported, at, out);
                }
                let layout = Layout::new(v.size, v.format, v.lines_per_tframe);
                let seg = Segmenter::new(v.dest, self.format);
                let (Some(layout), Some(_)) = (layout, seg) else {
                    let at = command::video_field::VPI;
                    return self.refuse(now, s, &c, ErrorReason::BadParameter, at, out);
                };
                let sess = &mut self.sessions[s];
                sess.request = Some((v, layout));
                sess.want = match v.frames {
                    Frames::OnRequest => Want::OnRequest(false),
                    Frames::Count(n) => Want::Count(n),
                    Frames::Continuous => Want::Continuous,
                };
                self.ack(now, s, c.tag, code, AckStatus::Done, out);
            }
            Message::FrameRequest => {
                self.sessions[s].stats.frame_requests += 1;
                let on_request = matches!(self.sessions[s].want, Want::OnRequest(_));
                if self.sessions[s].request.is_none() || !on_request {
                    return self.refuse(now, s, &c, ErrorReason::NotConfigured, 0, out);
                }
                if !self.capturing() {
                    return self.refuse(now, s, &c, ErrorReason::NotCapturing, 0, out);
                }
                self.counters.commands_accepted += 1;
                let sess = &mut self.sessions[s];
                sess.stats.commands += 1;
                if sess.want == Want::OnRequest(true) {
                    sess.stats.requests_merged += 1;
                } else {
                    sess.want = Want::OnRequest(true);
                }
            }
            Message::StatusRequest => {
                let st = &self.sessions[s].stats;
                let status = Status {
                    capturing: self.capturing(),
                    sending: self.sending.is_some(),
                    frames_captured: self.frames_captured_at(now) as u32,
                    newest_frame: self.newest_at(now).unwrap_or(0) as u32,
                    frames_sent: st.frames_sent as u32,
                    tframes_sent: st.tframes_sent as u32,
                    cells_sent: st.cells_sent as u32,
                    frame_requests: st.frame_requests as u32,
                    requests_merged: st.requests_merged as u32,
                    commands_accepted: self.counters.commands_accepted as u32,
                    commands_refused: self.counters.refused_total() as u32,
                };
                self.counters.commands_accepted += 1;
                self.sessions[s].stats.commands += 1;
                self.reply(
                    now,
                    s,
                    CommandCell::new(c.tag, Message::Status(status)),
                    out,
                );
            }
            Message::Ack(_) | Message::Status(_) | Message::Error(_) => {
                self.counters.replies_received += 1;
            }
        }
    }

    /// The frame session `s` would get now, if any.
    fn frame_for(&self, s: usize, now: Instant) -> Option<u64> {
        let sess = &self.sessions[s];
        if !sess.wants() {
            return None;
        }
        let k = self.newest_at(now)?;
        sess.last_sent.is_none_or(|l| k > l).then_some(k)
    }

    /// Starts the next session's frame, in turn; false if none is due.
    fn start_frame(&mut self, now: Instant) -> bool {
        let n = self.sessions.len();
        for i in 0..n {
            let s = (self.turn + i) % n;
            let Some(k) = self.frame_for(s, now) else {
                continue;
            };
            let Some((req, layout)) = self.sessions[s].request else {
                continue;
            };
            // A request that cannot be served (the checks when it came
            // make this unreachable) is dropped, so the camera does not
            // ask to run again at once for ever.
            let Some(mut seg) = Segmenter::new(req.dest, self.format) else {
                self.abandon(s);
                continue;
            };
            if self.pic_holds != Some((k, req.size, req.format)) {
                self.pic.reshape(req.size, req.format);
                if !self.source.render(k, &mut self.pic) {
                    self.pic_holds = None;
                    self.abandon(s);
                    continue;
                }
                self.pic_holds = Some((k, req.size, req.format));
                self.counters.frames_rendered += 1;
            }
            if !seg.start(layout, k as u32, &self.pic) {
                self.abandon(s);
                continue;
            }
            let sess = &mut self.sessions[s];
            sess.last_sent = Some(k);
            sess.want = match sess.want {
                Want::OnRequest(_) => Want::OnRequest(false),
                Want::Count(m) => Want::Count(m.saturating_sub(1)),
                Want::Continuous => Want::Continuous,
            };
            sess.stats.frames_sent += 1;
            self.counters.frames_sent += 1;
            self.turn = (s + 1) % n;
            self.sending = Some(Sending {
                session: s,
                request: req,
                seg,
                next_burst: now.max(self.line_free),
            });
            return true;
        }
        false
    }

    /// Drops session `s`'s request: its frames cannot be made.
    fn abandon(&mut self, s: usize) {
        self.sessions[s].request = None;
        self.counters.requests_abandoned += 1;
    }

    /// Sends the burst due at `now`; true if the frame is finished.
    fn burst(&mut self, now: Instant, out: &mut Outbox) -> bool {
        let Some(snd) = self.sending.as_mut() else {
            return false;
        };
        let cb = usize::from(snd.request.cells_per_burst.max(1));
        let mut sent = 0;
        let mut tframes = 0;
        let mut finished = false;
        while sent < cb {
            let Some(c) = snd.seg.next_cell(&self.pic) else {
                finished = true;
                break;
            };
            out.push(0, c.cell);
            sent += 1;
            tframes += u64::from(c.tframe_end);
            if c.frame_end {
                finished = true;
                break;
            }
        }
        self.line_free =
            self.line_free.max(now) + Duration::from_nanos(self.cell_time.as_nanos() * sent as i64);
        let st = &mut self.sessions[snd.session].stats;
        st.cells_sent += sent as u64;
        st.tframes_sent += tframes;
        self.counters.cells_sent += sent as u64;
        self.counters.tframes_sent += tframes;
        self.counters.bursts += 1;
        if finished {
            st.frames_done += 1;
            self.gate = self.line_free + snd.request.interframe;
            self.sending = None;
        } else {
            snd.next_burst = self.line_free + snd.request.interburst;
        }
        finished
    }
}

impl Node for Vidboard {
    fn ports(&self) -> usize {
        1
    }

    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        self.now = self.now.max(now);
        for c in cells {
            self.counters.cells_in += 1;
            let mut cell = *c;
            if self.hec.check_cell(&mut cell) == HecVerdict::Discarded {
                self.counters.hec_dropped += 1;
                out.dropped(port, c, "hec_uncorrectable");
                continue;
            }
            let h = Header::parse(&[cell[0], cell[1], cell[2], cell[3]], self.format);
            let Some(s) = self.sessions.iter().position(|x| x.ch.command == h.vc()) else {
                self.counters.unknown_vc += 1;
                out.dropped(port, c, "unknown_vc");
                continue;
            };
            if !h.pti.is_user() {
                self.counters.not_user += 1;
                out.dropped(port, c, "not_user");
                continue;
            }
            let payload: &[u8; 48] = cell[HEADER_LEN..]
                .try_into()
                .expect("a cell has 48 payload bytes");
            match CommandCell::parse(payload) {
                Ok(cmd) => self.command(now, s, cmd, out),
                Err(m) => {
                    self.counters.malformed[m.defect as usize] += 1;
                    self.sessions[s].stats.refused += 1;
                    self.reply(now, s, m.reply(), out);
                }
            }
        }
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        self.now = self.now.max(now);
        // At most a frame start and one burst per call: bursts are at
        // least a cell time apart.
        if self.sending.is_none() && now >= self.gate && !self.start_frame(now) {
            return;
        }
        let Some(snd) = self.sending.as_mut() else {
            return;
        };
        if snd.next_burst > now {
            return;
        }
        if self.line_free > now {
            // A reply is on the line: the burst follows it.
            snd.next_burst = self.line_free;
            return;
        }
        self.burst(now, out);
    }

    fn poll_at(&self) -> Option<Instant> {
        if let Some(s) = &self.sending {
            return Some(s.next_burst);
        }
        let now = self.now;
        let mut due: Option<Instant> = None;
        for s in 0..self.sessions.len() {
            if !self.sessions[s].wants() {
                continue;
            }
            let at = if self.frame_for(s, now).is_some() {
                now
            } else if let Some(from) = self.capture_from {
                // The next capture (or the loop's first).
                let k = (self.grid(now) + 1).max(from);
                Instant::from_nanos((k as i64).saturating_mul(self.period))
            } else {
                continue;
            };
            due = Some(due.map_or(at, |d| d.min(at)));
        }
        due.map(|t| t.max(self.gate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SyntheticSource;

    const CH: ControlChannel = ControlChannel {
        command: VcId::new(0, 32),
        reply: VcId::new(0, 33),
    };

    fn cam(period_ms: i64) -> Vidboard {
        let cfg = VidboardConfig {
            format: Format::Uni,
            line_rate: 353_207.5,
            channels: vec![CH],
        };
        let src = SyntheticSource::new(1).with_period(Duration::from_millis(period_ms));
        Vidboard::new(cfg, Box::new(src)).unwrap()
    }

    fn send(v: &mut Vidboard, now: Instant, m: Message) -> Vec<CellBytes> {
        let cell = CommandCell::new(1, m)
            .to_cell(CH.command, Format::Uni)
            .unwrap();
        let mut out = Outbox::default();
        v.receive(now, 0, &[cell], &mut out);
        out.drain().map(|(_, c)| c).collect()
    }

    /// Runs the camera's timed work up to `until`; returns the video cells.
    fn run(v: &mut Vidboard, until: Instant) -> usize {
        let mut out = Outbox::default();
        let mut n = 0;
        while let Some(t) = v.poll_at().filter(|&t| t <= until) {
            v.poll(t, &mut out);
            n += out.drain().count();
        }
        n
    }

    fn on_request() -> VideoRequest {
        VideoRequest {
            size: PictureSize::Quarter,
            format: PixelFormat::Mono8,
            lines_per_tframe: 10,
            cells_per_burst: 20,
            interburst: Duration::from_micros(100),
            interframe: Duration::ZERO,
            dest: VcId::new(0, 100),
            frames: Frames::OnRequest,
        }
    }

    #[test]
    fn requests_while_one_waits_are_merged_and_nothing_queues() {
        let mut v = cam(33);
        let t = Instant::from_micros(10);
        assert_eq!(send(&mut v, t, Message::StartCapture).len(), 1);
        assert_eq!(
            send(&mut v, t, Message::VideoRequest(on_request())).len(),
            1
        );
        assert!(
            send(&mut v, t, Message::FrameRequest).is_empty(),
            "the frame is the answer"
        );
        // The loop started at 10 µs: the first capture is frame 1, at 33 ms.
        assert_eq!(v.poll_at(), Some(Instant::from_millis(33)));
        let per_frame = Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 10)
            .unwrap()
            .frame_cells();
        let mut out = Outbox::default();
        v.poll(Instant::from_millis(33), &mut out);
        assert!(v.sending());
        // Three more requests while the frame leaves: one waits, two merge.
        for _ in 0..3 {
            send(&mut v, Instant::from_millis(34), Message::FrameRequest);
        }
        let s = v.session(0).unwrap();
        assert_eq!((s.frame_requests, s.requests_merged), (4, 2));
        let cells = out.drain().count() + run(&mut v, Instant::from_millis(1000));
        // Two frames: the first, and the one request that waited; the
        // second is frame 2, not frame 1 again.
        assert_eq!(cells, 2 * per_frame);
        let s = v.session(0).unwrap();
        assert_eq!((s.frames_sent, s.frames_done), (2, 2));
        assert_eq!(v.poll_at(), None, "nothing more to do");
        assert_eq!(v.counters().frames_rendered, 2);
    }

    #[test]
    fn a_session_never_gets_a_frame_twice_and_waits_for_the_next_capture() {
        let mut v = cam(100);
        send(&mut v, Instant::ZERO, Message::StartCapture);
        send(&mut v, Instant::ZERO, Message::VideoRequest(on_request()));
        send(&mut v, Instant::ZERO, Message::FrameRequest);
        run(&mut v, Instant::from_millis(10));
        assert_eq!(
            v.session(0).unwrap().frames_done,
            1,
            "frame 0, captured at 0"
        );
        send(&mut v, Instant::from_millis(20), Message::FrameRequest);
        assert_eq!(
            v.poll_at(),
            Some(Instant::from_millis(100)),
            "frame 1 comes at 100 ms"
        );
        run(&mut v, Instant::from_millis(99));
        assert_eq!(v.session(0).unwrap().frames_sent, 1);
        run(&mut v, Instant::from_millis(150));
        assert_eq!(v.session(0).unwrap().frames_done, 2);
    }

    #[test]
    fn the_capture_loop_counts_the_frames_it_captured() {
        let mut v = cam(10);
        assert_eq!(
            (
                v.frames_captured_at(Instant::from_millis(50)),
                v.newest_at(Instant::from_millis(50))
            ),
            (0, None)
        );
        send(&mut v, Instant::from_millis(5), Message::StartCapture);
        assert_eq!(v.newest_at(Instant::from_millis(9)), None);
        assert_eq!(v.newest_at(Instant::from_millis(35)), Some(3));
        let r = send(&mut v, Instant::from_millis(35), Message::StartCapture);
        let ack = CommandCell::parse(r[0][5..].try_into().unwrap()).unwrap();
        assert_eq!(
            ack.message,
            Message::Ack(Ack {
                command: command::code::START_CAPTURE,
                status: AckStatus::Unchanged
            })
        );
        send(&mut v, Instant::from_millis(42), Message::StopCapture);
        assert_eq!(
            v.frames_captured_at(Instant::from_millis(90)),
            4,
            "frames 1 to 4"
        );
        assert_eq!(
            v.newest_at(Instant::from_millis(90)),
            Some(4),
            "kept while stopped"
        );
        send(&mut v, Instant::from_millis(60), Message::StartCapture);
        assert_eq!(
            v.frames_captured_at(Instant::from_millis(75)),
            6,
            "and 6, 7"
        );
        assert_eq!(v.newest_at(Instant::from_millis(75)), Some(7));
    }

    #[test]
    fn a_camera_is_set_up_right_or_not_at_all() {
        let src = || Box::new(SyntheticSource::new(1));
        let cfg = |channels: Vec<ControlChannel>, rate| VidboardConfig {
            format: Format::Uni,
            line_rate: rate,
            channels,
        };
        assert_eq!(
            Vidboard::new(cfg(vec![], 1.0), src()).unwrap_err(),
            ConfigError::Channels(0)
        );
        assert_eq!(
            Vidboard::new(cfg(vec![CH], 0.0), src()).unwrap_err(),
            ConfigError::Rate(0.0)
        );
        assert_eq!(
            Vidboard::new(cfg(vec![CH, CH], 1.0), src()).unwrap_err(),
            ConfigError::Duplicate(CH.command)
        );
        let far = ControlChannel {
            command: VcId::new(256, 32),
            ..CH
        };
        assert_eq!(
            Vidboard::new(cfg(vec![far], 1.0), src()).unwrap_err(),
            ConfigError::Range(far.command)
        );
        assert_eq!(
            ConfigError::Channels(0).to_string(),
            "a camera needs 1 to 16 control channels, and was given 0"
        );
    }
}
