//! The receiving end: a workstation's side of one camera session.
//!
//! [`VidboardClient`] is a one-port node. At its start time it sends the
//! camera a start-capture command (if told to) and its video request, and
//! resends either until it is acknowledged (a few times, then it gives
//! up). Video arriving on its video VC is reassembled ([`crate::val`]);
//! replies arriving on its reply VC are matched to the commands by tag.
//!
//! **The consumer.** Behind the reassembler sits a consumer that takes a
//! frame, works on it for the processing time, then takes the next,
//! holding at most one frame waiting (a double buffer: the one being
//! worked on and the one waiting). In the capture loop (a request for
//! frames one at a time) the client asks for the next frame when the
//! consumer takes one, so that the frame waiting slot is free when the
//! answer comes: a consumer slower than the camera gets fewer frames, at
//! its own pace, and nothing queues anywhere. The rate is
//! 1 / max(processing, frame time on the line + a round trip), less when
//! the camera serves others in between. In a stream (n frames or
//! continuous) the camera sets the pace; a frame arriving while one is
//! still waiting replaces it (counted).
//!
//! A frame requested and not delivered within the frame timeout is given
//! up ([`crate::val::Reassembler::close_frame`], counted) and asked for
//! again; in a stream, a frame begun is given up the frame timeout after
//! its last cell.
//!
//! **The receiving host.** By default a cell is read the moment it
//! arrives. With a [`HostModel`] the workstation takes time to absorb
//! cells: an interrupt per burst, a read per cell, work per t-frame.
//! While it works it holds its input ([`aurora_net::Outbox::hold_input`]):
//! the cells behind wait in the output port of the switch that feeds it,
//! and those finding that port full are dropped there, by its rule. The
//! cells already on the wire when it holds wait in a small queue of its
//! own (overflow counted). That is what the seed's shaping parameters
//! were tuned against (Table 6).
//!
//! **Winding down.** From [`ClientConfig::stop`] on the client asks for
//! no more frames, and turns a stream back into the capture loop, so the
//! camera stops once its frame leaving is out and a run's drain can bring
//! in everything sent.
//!
//! **Checks.** Each delivered frame's number must be above the last one's
//! (counted if not). A complete frame can be checked further: its
//! counter line ([`crate::source::read_counter`]) against its number, and
//! its pixels against a [`SyntheticSource`] of the same seed.

use std::collections::VecDeque;

use aurora_net::{Node, Outbox, PortId};
use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::hec::{HecReceiver, HecVerdict};
use aurora_wire::{CellBytes, HEADER_LEN};

use crate::command::{
    self, AckStatus, CommandCell, ErrorReply, Frames, Message, Status, VideoRequest,
};
use crate::frame::Picture;
use crate::pipeline::Processor;
use crate::source::{read_counter, Source, SyntheticSource};
use crate::val::{FrameInfo, Layout, Reassembler, RxConfig, RxStats};

/// How many times a command is sent before the client gives up on it.
pub const MAX_TRIES: u32 = 4;
/// Deliveries remembered (time, frame number, complete), oldest dropped.
pub const DELIVERY_LOG: usize = 4096;
/// Commands queued by the caller and not yet sent; more are refused.
pub const MAX_QUEUED: usize = 16;

/// How a client is set up.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The header format of its link.
    pub format: Format,
    /// The VC its commands leave on.
    pub command_vc: VcId,
    /// The VC the camera's replies arrive on.
    pub reply_vc: VcId,
    /// The VC the video arrives on (the request's destination, as the
    /// switches between translate it).
    pub video_vc: VcId,
    /// The video request to make (its destination is the camera's side).
    pub request: VideoRequest,
    /// Whether to start the camera's capture loop first.
    pub start_capture: bool,
    /// When to send the first command.
    pub start: Instant,
    /// The consumer's time per frame.
    pub processing: Duration,
    /// A frame requested and not delivered for this long is given up.
    pub frame_timeout: Duration,
    /// A command not answered for this long is sent again.
    pub reply_timeout: Duration,
    /// The reassembler's limits.
    pub rx: RxConfig,
    /// Check complete frames' counter lines against their numbers.
    pub check_counter: bool,
    /// Check complete frames pixel for pixel against this source.
    pub reference: Option<SyntheticSource>,
    /// From this time on the session winds down: no more frame requests,
    /// and a stream is turned back into the capture loop (so the camera
    /// stops sending once its frame leaving is out).
    pub stop: Option<Instant>,
    /// The receiving workstation's costs, if it is modelled (see
    /// [`HostModel`]); `None` reads every cell the moment it arrives.
    pub host: Option<HostModel>,
    /// The workstation's processor, when other viewers share it: the host
    /// model's work (interrupts, cell reads, t-frame work) and the
    /// consumer's processing are booked on it first come, first served,
    /// so viewers on one workstation take turns (see
    /// [`crate::pipeline::Processor`]). `None`: this viewer has a
    /// processor of its own.
    pub cpu: Option<Processor>,
    /// The caller is the consumer: a frame delivered waits until the
    /// caller takes it with [`VidboardClient::take`] (a pipeline's
    /// `VidboardSource`), and `processing` is not used.
    pub caller_consumes: bool,
}

/// A receiving workstation that takes time to absorb cells: an interrupt
/// when a cell finds it idle, a read per cell, and work per t-frame (at
/// its last cell). While it works it asks that no cell arrive before it
/// can be free (its input held): cells wait in the port that feeds it
/// (a switch's output port, under that port's buffer and rule). Cells
/// that arrive meanwhile all the same (on the wire when it asked, or on a
/// line the hold cannot reach: from another worker or another process)
/// wait in a queue of its own of `buffer` cells; a cell finding that
/// queue full is dropped, counted as `host_overflow`. One interrupt
/// reads at most one burst (the CB cells the host asked the camera to
/// send together, as the seed's driver did); cells still waiting after
/// it take another interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostModel {
    /// The cost of taking an interrupt (a burst finding the host idle).
    pub per_burst: Duration,
    /// The cost of reading one cell.
    pub per_cell: Duration,
    /// The cost of finishing a t-frame (checking and placing it).
    pub per_tframe: Duration,
    /// Cells that may wait in the host's own queue (at least 1).
    pub buffer: usize,
}

impl ClientConfig {
    /// A client asking for `request` through the given VCs, starting the
    /// capture loop at time zero, with a consumer that takes no time, a
    /// frame timeout of 1 s, a reply timeout of 50 ms and no checks.
    pub fn new(
        command_vc: VcId,
        reply_vc: VcId,
        video_vc: VcId,
        request: VideoRequest,
    ) -> ClientConfig {
        ClientConfig {
            format: Format::Uni,
            command_vc,
            reply_vc,
            video_vc,
            request,
            start_capture: true,
            start: Instant::ZERO,
            processing: Duration::ZERO,
            frame_timeout: Duration::from_secs(1),
            reply_timeout: Duration::from_millis(50),
            rx: RxConfig::default(),
            check_counter: false,
            reference: None,
            stop: None,
            host: None,
            cpu: None,
            caller_consumes: false,
        }
    }
}

/// Why a client could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// LT is 0 or more than the picture's height.
    Lines(u16),
    /// A VC does not fit the header format.
    Range(VcId),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Lines(n) => write!(
                f,
                "{n} scan lines per t-frame does not fit the picture asked for"
            ),
            ClientError::Range(vc) => write!(f, "VC {vc} does not fit the client's header format"),
        }
    }
}

impl std::error::Error for ClientError {}

/// What a client counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientCounters {
    /// Cells that arrived.
    pub cells_in: u64,
    /// Arriving cells whose header failed the HEC check.
    pub hec_dropped: u64,
    /// Arriving cells on neither the reply nor the video VC.
    pub unknown_vc: u64,
    /// Command cells sent (first tries and resends).
    pub commands_sent: u64,
    /// Of those, resends.
    pub resends: u64,
    /// Commands given up after [`MAX_TRIES`].
    pub gave_up: u64,
    /// Acks received for a command waiting for one.
    pub acks: u64,
    /// Error replies received.
    pub errors: u64,
    /// Status replies received.
    pub statuses: u64,
    /// Replies that matched no command waiting, or did not parse.
    pub stray_replies: u64,
    /// Frame requests sent.
    pub frame_requests: u64,
    /// Frames requested and given up after the frame timeout.
    pub frame_timeouts: u64,
    /// Frames delivered whole.
    pub frames_complete: u64,
    /// Frames delivered with t-frames missing.
    pub frames_incomplete: u64,
    /// Frames the consumer took.
    pub frames_taken: u64,
    /// Frames replaced while waiting for the consumer (streams only).
    pub frames_overwritten: u64,
    /// Frames whose number was not above the last one's.
    pub order_errors: u64,
    /// Complete frames whose counter line disagreed with their number.
    pub counter_errors: u64,
    /// Complete frames equal to the reference, pixel for pixel.
    pub frames_matching: u64,
    /// Complete frames that differ from the reference.
    pub frames_differing: u64,
    /// Cells dropped because the host model's queue was full.
    pub host_overflow: u64,
    /// Interrupts the host model took.
    pub host_interrupts: u64,
    /// The most cells that waited in the host model's queue.
    pub host_queue_max: u64,
}

/// One delivery, as remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// When.
    pub at: Instant,
    /// The frame's number.
    pub frame: u32,
    /// Whether it was whole.
    pub complete: bool,
}

/// A command waiting for its answer.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    cmd: CommandCell,
    sent: Instant,
    tries: u32,
}

/// Where the session stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Before the start time.
    Idle,
    /// Commands sent, acks awaited.
    Setup,
    /// The request was acknowledged: video flows.
    Running,
    /// The camera refused the request, or never answered.
    Failed,
}

/// What receives the frames: the checks, the log and the consumer's
/// waiting slot (apart from the rest, so the reassembler can hand it
/// frames).
#[derive(Debug)]
struct Sink {
    check_counter: bool,
    reference: Option<(SyntheticSource, Picture)>,
    last_number: Option<u32>,
    log: VecDeque<Delivery>,
    /// A delivered frame waits for the consumer.
    waiting_frame: bool,
    /// Frames delivered by the last push or close.
    just_delivered: u32,
    counters: ClientCounters,
}

impl Sink {
    /// A frame came out of the reassembler.
    fn delivered(&mut self, info: &FrameInfo, pic: &Picture) {
        self.just_delivered += 1;
        let c = &mut self.counters;
        if info.complete {
            c.frames_complete += 1;
        } else {
            c.frames_incomplete += 1;
        }
        if self.last_number.is_some_and(|l| info.frame <= l) {
            c.order_errors += 1;
        }
        self.last_number = Some(info.frame);
        if info.complete {
            if self.check_counter && read_counter(pic) != Some(info.frame) {
                c.counter_errors += 1;
            }
            if let Some((src, want)) = self.reference.as_mut() {
                src.render(info.frame.into(), want);
                if want == pic {
                    c.frames_matching += 1;
                } else {
                    c.frames_differing += 1;
                }
            }
        }
        if self.log.len() == DELIVERY_LOG {
            self.log.pop_front();
        }
        self.log.push_back(Delivery {
            at: info.at,
            frame: info.frame,
            complete: info.complete,
        });
        if self.waiting_frame {
            c.frames_overwritten += 1;
        }
        self.waiting_frame = true;
    }
}

/// The client node.
#[derive(Debug)]
pub struct VidboardClient {
    config: ClientConfig,
    rx: Reassembler,
    sink: Sink,
    phase: Phase,
    next_tag: u16,
    waiting: Vec<Waiting>,
    queued: VecDeque<Message>,
    /// A frame request awaiting its frame, since when.
    outstanding: Option<Instant>,
    /// The consumer works until then.
    busy_until: Option<Instant>,
    /// When the last video cell arrived.
    last_video: Instant,
    last_status: Option<Status>,
    last_error: Option<ErrorReply>,
    hec: HecReceiver,
    /// The host model's queue, the cell it is reading, and when the
    /// current step (an interrupt's entry or a read) ends.
    host_queue: VecDeque<CellBytes>,
    host_reading: Option<CellBytes>,
    host_next: Option<Instant>,
    /// Cells read in the current interrupt.
    host_read: u32,
    /// The wind-down was done.
    stopped: bool,
}

impl VidboardClient {
    /// A client; refused if its request's layout or its VCs are wrong.
    pub fn new(config: ClientConfig) -> Result<VidboardClient, ClientError> {
        let r = &config.request;
        let layout = Layout::new(r.size, r.format, r.lines_per_tframe)
            .ok_or(ClientError::Lines(r.lines_per_tframe))?;
        for vc in [config.command_vc, config.reply_vc, config.video_vc] {
            if vc.vpi > config.format.max_vpi() {
                return Err(ClientError::Range(vc));
            }
        }
        Ok(VidboardClient {
            rx: Reassembler::new(layout, config.rx),
            sink: Sink {
                check_counter: config.check_counter,
                reference: config
                    .reference
                    .clone()
                    .map(|src| (src, Picture::new(r.size, r.format))),
                last_number: None,
                log: VecDeque::new(),
                waiting_frame: false,
                just_delivered: 0,
                counters: ClientCounters::default(),
            },
            config,
            phase: Phase::Idle,
            next_tag: 1,
            waiting: Vec::new(),
            queued: VecDeque::new(),
            outstanding: None,
            busy_until: None,
            last_video: Instant::ZERO,
            last_status: None,
            last_error: None,
            hec: HecReceiver::new(),
            host_queue: VecDeque::new(),
            host_reading: None,
            host_next: None,
            host_read: 0,
            stopped: false,
        })
    }

    /// The client's setup.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Where the session stands.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// What it counted.
    pub fn counters(&self) -> ClientCounters {
        self.sink.counters
    }

    /// What the reassembler counted.
    pub fn rx_stats(&self) -> RxStats {
        self.rx.stats()
    }

    /// T-frames begun and not finished (0 or 1).
    pub fn tframes_in_progress(&self) -> u64 {
        self.rx.in_progress()
    }

    /// The last frame delivered, with its picture.
    pub fn last_frame(&self) -> Option<(&FrameInfo, &Picture)> {
        self.rx.last_frame()
    }

    /// The last status reply.
    pub fn last_status(&self) -> Option<Status> {
        self.last_status
    }

    /// The last error reply.
    pub fn last_error(&self) -> Option<ErrorReply> {
        self.last_error
    }

    /// The deliveries remembered, oldest first (at most [`DELIVERY_LOG`]).
    pub fn deliveries(&self) -> impl Iterator<Item = &Delivery> {
        self.sink.log.iter()
    }

    /// Frames delivered whole at or after `from` and before `to`.
    pub fn complete_between(&self, from: Instant, to: Instant) -> u64 {
        self.sink
            .log
            .iter()
            .filter(|d| d.complete && d.at >= from && d.at < to)
            .count() as u64
    }

    /// Winds the session down from `t` on (see [`ClientConfig::stop`]).
    pub fn set_stop(&mut self, t: Instant) {
        self.config.stop = Some(t);
    }

    /// Sends `msg` to the camera at the next poll (a status request, say);
    /// false if [`MAX_QUEUED`] are already waiting.
    pub fn queue_command(&mut self, msg: Message) -> bool {
        if self.queued.len() >= MAX_QUEUED {
            return false;
        }
        self.queued.push_back(msg);
        true
    }

    fn send(&mut self, now: Instant, msg: Message, out: &mut Outbox) -> CommandCell {
        let cmd = CommandCell::new(self.next_tag, msg);
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
        self.transmit(cmd, out);
        if msg != Message::FrameRequest {
            self.waiting.push(Waiting {
                cmd,
                sent: now,
                tries: 1,
            });
        }
        cmd
    }

    fn transmit(&mut self, cmd: CommandCell, out: &mut Outbox) {
        if let Some(c) = cmd.to_cell(self.config.command_vc, self.config.format) {
            out.push(0, c);
            self.sink.counters.commands_sent += 1;
        }
    }

    fn request_frame(&mut self, now: Instant, out: &mut Outbox) {
        if self.stopped {
            return;
        }
        self.send(now, Message::FrameRequest, out);
        self.sink.counters.frame_requests += 1;
        self.outstanding = Some(now);
    }

    fn closed_loop(&self) -> bool {
        self.config.request.frames == Frames::OnRequest
    }

    /// In a stream, when a frame begun and not finished is given up: the
    /// frame timeout after its last cell.
    fn stream_close_at(&self) -> Option<Instant> {
        let begun = self.rx.assembling().is_some() || self.rx.in_progress() > 0;
        (!self.closed_loop() && begun).then(|| self.last_video + self.config.frame_timeout)
    }

    fn stream_stalled(&self, now: Instant) -> bool {
        self.stream_close_at().is_some_and(|t| now >= t)
    }

    /// The consumer takes the waiting frame, if it is free; in the capture
    /// loop that frees the slot, so the next frame is asked for.
    fn consume(&mut self, now: Instant, out: &mut Outbox) {
        if self.config.caller_consumes {
            return;
        }
        self.take_waiting(now, out);
    }

    /// The consumer takes the waiting frame, if it is free.
    fn take_waiting(&mut self, now: Instant, out: &mut Outbox) -> bool {
        if self.busy_until.is_some() || !self.sink.waiting_frame {
            return false;
        }
        self.sink.waiting_frame = false;
        self.sink.counters.frames_taken += 1;
        self.busy_until = Some(self.book(now, self.config.processing));
        if self.closed_loop() && self.phase == Phase::Running && self.outstanding.is_none() {
            self.request_frame(now, out);
        }
        true
    }

    /// With [`ClientConfig::caller_consumes`]: whether a delivered frame
    /// waits to be taken.
    pub fn frame_waiting(&self) -> bool {
        self.sink.waiting_frame
    }

    /// With [`ClientConfig::caller_consumes`]: takes the frame waiting (it
    /// is [`VidboardClient::last_frame`]), which in the capture loop sends
    /// the next frame request; false if none waits. A caller that takes
    /// frames slowly gets fewer, at its own pace: the closed loop.
    pub fn take(&mut self, now: Instant, out: &mut Outbox) -> bool {
        self.busy_until = None;
        self.take_waiting(now, out)
    }

    fn reply(&mut self, now: Instant, cell: &CellBytes, out: &mut Outbox) {
        let payload: &[u8; 48] = cell[HEADER_LEN..]
            .try_into()
            .expect("a cell has 48 payload bytes");
        let Ok(r) = CommandCell::parse(payload) else {
            self.sink.counters.stray_replies += 1;
            return;
        };
        let Some(i) = self.waiting.iter().position(|w| w.cmd.tag == r.tag) else {
            // Errors answer frame requests too, which wait for no reply.
            if let Message::Error(e) = r.message {
                self.sink.counters.errors += 1;
                self.last_error = Some(e);
                // A refused frame request is asked again when its frame
                // times out.
            } else {
                self.sink.counters.stray_replies += 1;
            }
            return;
        };
        let w = self.waiting.remove(i);
        match r.message {
            Message::Ack(a) if a.status == AckStatus::Done || a.status == AckStatus::Unchanged => {
                self.sink.counters.acks += 1;
            }
            Message::Status(s) => {
                self.sink.counters.statuses += 1;
                self.last_status = Some(s);
            }
            Message::Error(e) => {
                self.sink.counters.errors += 1;
                self.last_error = Some(e);
                if w.cmd.message.code() == command::code::VIDEO_REQUEST {
                    self.phase = Phase::Failed;
                }
            }
            _ => self.sink.counters.stray_replies += 1,
        }
        self.setup_done(now, out);
    }

    /// Setup ends when nothing of it waits for an answer.
    fn setup_done(&mut self, now: Instant, out: &mut Outbox) {
        let setup_waits = self.waiting.iter().any(|w| {
            matches!(
                w.cmd.message,
                Message::StartCapture | Message::VideoRequest(_)
            )
        });
        if self.phase == Phase::Setup && !setup_waits {
            self.phase = Phase::Running;
            if self.closed_loop() {
                self.request_frame(now, out);
            }
        }
    }
}

impl VidboardClient {
    /// End cells of the video VC waiting in the host model (queued, or
    /// being read): t-frames whose end reached the host but not yet the
    /// receiver.
    pub fn video_ends_waiting(&self) -> u64 {
        let format = self.config.format;
        let video = self.config.video_vc;
        self.host_queue
            .iter()
            .chain(self.host_reading.iter())
            .filter(|c| {
                aurora_net::accounting::is_user(c)
                    && c[3] & 0x02 != 0
                    && Header::parse(&[c[0], c[1], c[2], c[3]], format).vc() == video
            })
            .count() as u64
    }

    /// One arriving cell, read: a reply, video, or counted away.
    fn take_cell(&mut self, now: Instant, port: PortId, c: &CellBytes, out: &mut Outbox) {
        self.sink.counters.cells_in += 1;
        let mut cell = *c;
        if self.hec.check_cell(&mut cell) == HecVerdict::Discarded {
            self.sink.counters.hec_dropped += 1;
            out.dropped(port, c, "hec_uncorrectable");
            return;
        }
        let vc = Header::parse(&[cell[0], cell[1], cell[2], cell[3]], self.config.format).vc();
        if vc == self.config.video_vc {
            self.last_video = now;
            let sink = &mut self.sink;
            sink.just_delivered = 0;
            self.rx
                .push(now, &cell, &mut |info, pic| sink.delivered(info, pic));
            if self.sink.just_delivered > 0 {
                self.outstanding = None;
                self.consume(now, out);
            }
        } else if vc == self.config.reply_vc {
            self.reply(now, &cell, out);
        } else {
            self.sink.counters.unknown_vc += 1;
            out.dropped(port, c, "unknown_vc");
        }
    }

    /// When `work` begun at `now` ends: on the shared processor, after the
    /// work booked on it before; else at once.
    fn book(&self, now: Instant, work: Duration) -> Instant {
        match &self.config.cpu {
            Some(cpu) if work > Duration::ZERO => cpu.book(now, work),
            _ => now + work,
        }
    }

    /// With a host model, asks that nothing arrive on `port` before the
    /// host has read what it holds: the end of the work under way, and a
    /// read (and a t-frame's work, at a t-frame's end) for each cell in
    /// its own queue. Interrupts still to come are not counted, so this
    /// is the earliest the host can be free; cells arriving before then
    /// (sent before the hold reached the line) wait in its own queue.
    fn hold(&self, port: PortId, out: &mut Outbox) {
        let (Some(host), Some(next)) = (self.config.host, self.host_next) else {
            return;
        };
        let video = self.config.video_vc;
        let format = self.config.format;
        let queued: Duration = self
            .host_queue
            .iter()
            .map(|c| {
                let vc = Header::parse(&[c[0], c[1], c[2], c[3]], format).vc();
                if vc == video && c[3] & 0x02 != 0 {
                    host.per_cell + host.per_tframe
                } else {
                    host.per_cell
                }
            })
            .fold(Duration::ZERO, |a, b| a + b);
        out.hold_input(port, next + queued);
    }

    /// The host model's work due by `now`: finish the cell being read,
    /// start reading the next, or return from the interrupt.
    fn host_run(&mut self, now: Instant, out: &mut Outbox) {
        let Some(host) = self.config.host else { return };
        while let Some(t) = self.host_next.filter(|&t| t <= now) {
            if let Some(c) = self.host_reading.take() {
                self.take_cell(now, 0, &c, out);
            }
            if !self.host_queue.is_empty()
                && self.host_read >= u32::from(self.config.request.cells_per_burst.max(1))
            {
                // The burst is read: the interrupt returns, and the cells
                // waiting raise the next one.
                self.sink.counters.host_interrupts += 1;
                self.host_read = 0;
                self.host_next = Some(self.book(t, host.per_burst));
                continue;
            }
            match self.host_queue.pop_front() {
                Some(c) => {
                    self.host_read += 1;
                    let vc = Header::parse(&[c[0], c[1], c[2], c[3]], self.config.format).vc();
                    let ends = vc == self.config.video_vc && c[3] & 0x02 != 0;
                    let cost = host.per_cell
                        + if ends {
                            host.per_tframe
                        } else {
                            Duration::ZERO
                        };
                    self.host_reading = Some(c);
                    self.host_next = Some(self.book(t, cost));
                }
                None => {
                    self.host_next = None;
                    self.host_read = 0;
                }
            }
        }
    }

    /// Past the stop time: no more frames are asked for, and a stream
    /// goes back to the capture loop, which the camera serves only on
    /// request.
    fn wind_down(&mut self, now: Instant, out: &mut Outbox) {
        if self.stopped || self.config.stop.is_none_or(|t| now < t) {
            return;
        }
        self.stopped = true;
        if !self.closed_loop() && self.phase != Phase::Failed {
            let mut r = self.config.request;
            r.frames = Frames::OnRequest;
            self.send(now, Message::VideoRequest(r), out);
        }
    }
}

impl Node for VidboardClient {
    fn ports(&self) -> usize {
        1
    }

    fn receive(&mut self, now: Instant, port: PortId, cells: &[CellBytes], out: &mut Outbox) {
        let Some(host) = self.config.host else {
            for c in cells {
                self.take_cell(now, port, c, out);
            }
            return;
        };
        for c in cells {
            if self.host_queue.len() >= host.buffer.max(1) {
                self.sink.counters.host_overflow += 1;
                out.dropped(port, c, "host_overflow");
                continue;
            }
            self.host_queue.push_back(*c);
            let waiting = self.host_queue.len() as u64;
            let m = &mut self.sink.counters.host_queue_max;
            *m = (*m).max(waiting);
            if self.host_next.is_none() {
                // The host was idle: an interrupt.
                self.sink.counters.host_interrupts += 1;
                self.host_next = Some(self.book(now, host.per_burst));
            }
        }
        self.hold(port, out);
    }

    fn holds_input(&self) -> bool {
        self.config.host.is_some()
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        self.host_run(now, out);
        self.hold(0, out);
        self.wind_down(now, out);
        if self.phase == Phase::Idle && now >= self.config.start {
            self.phase = Phase::Setup;
            if self.config.start_capture {
                self.send(now, Message::StartCapture, out);
            }
            self.send(now, Message::VideoRequest(self.config.request), out);
        }
        while let Some(m) = self.queued.pop_front() {
            self.send(now, m, out);
        }
        // Commands unanswered: again, or given up.
        let timeout = self.config.reply_timeout;
        let mut i = 0;
        while i < self.waiting.len() {
            let w = self.waiting[i];
            if now < w.sent + timeout {
                i += 1;
                continue;
            }
            if w.tries >= MAX_TRIES {
                self.waiting.remove(i);
                self.sink.counters.gave_up += 1;
                if matches!(w.cmd.message, Message::VideoRequest(_)) {
                    self.phase = Phase::Failed;
                }
                continue;
            }
            self.waiting[i] = Waiting {
                sent: now,
                tries: w.tries + 1,
                ..w
            };
            self.transmit(w.cmd, out);
            self.sink.counters.resends += 1;
            i += 1;
        }
        self.setup_done(now, out);
        self.rx.poll(now);
        if self.busy_until.is_some_and(|t| now >= t) {
            self.busy_until = None;
            self.consume(now, out);
        }
        let requested_too_long = self
            .outstanding
            .is_some_and(|t| now >= t + self.config.frame_timeout);
        if requested_too_long || self.stream_stalled(now) {
            self.sink.counters.frame_timeouts += 1;
            self.outstanding = None;
            let sink = &mut self.sink;
            sink.just_delivered = 0;
            self.rx
                .close_frame(now, &mut |info, pic| sink.delivered(info, pic));
            if self.sink.just_delivered > 0 {
                self.consume(now, out);
            }
            if self.outstanding.is_none()
                && self.closed_loop()
                && self.phase == Phase::Running
                && !self.sink.waiting_frame
            {
                self.request_frame(now, out);
            }
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        let start = (self.phase == Phase::Idle).then_some(self.config.start);
        let queued = (!self.queued.is_empty()).then_some(Instant::ZERO);
        let resend = self
            .waiting
            .iter()
            .map(|w| w.sent + self.config.reply_timeout)
            .min();
        let timeout = self.outstanding.map(|t| t + self.config.frame_timeout);
        let stalled = self.stream_close_at();
        [
            start,
            queued,
            resend,
            timeout,
            stalled,
            self.busy_until,
            self.rx.poll_at(),
            self.host_next,
            self.config.stop.filter(|_| !self.stopped),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}
