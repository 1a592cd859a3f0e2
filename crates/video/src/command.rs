//! The command-cell protocol: one ATM cell per command, and one per reply.
//!
//! A workstation drives the camera with single cells on a control VC; the
//! camera answers on the reply VC paired with it (see
//! [`crate::vidboard::ControlChannel`]), and sends video where a video
//! request tells it to. Every message is the 48-byte payload of one user
//! cell (PTI 1: user data, end of unit). Multi-byte fields are big-endian.
//!
//! ```text
//! offset size field
//!   0     2   magic "VB" (0x56 0x42)
//!   2     1   version, 1
//!   3     1   code (below)
//!   4     2   tag: the sender's number for the message; a reply carries
//!             the tag of the command it answers
//!   6    40   parameters, by code; every byte a code does not use is 0
//!  46     2   check: CRC-16/IBM-3740 (poly 0x1021, init 0xFFFF, no
//!             reflection, no final XOR) of bytes 0..46
//! ```
//!
//! | code | message | parameters (offset: size field) |
//! |---|---|---|
//! | 0x01 | start capture | none |
//! | 0x02 | stop capture | none |
//! | 0x03 | video request | 6: 1 picture size (0 640×480, 1 320×240, 2 160×120); 7: 1 pixel format (0 mono8, 1 YUYV); 8: 2 LT, scan lines per t-frame (1..=height); 10: 2 CB, cells per burst (≥ 1); 12: 4 interburst delay, ns; 16: 4 interframe delay, ns; 20: 2 destination VPI (≤ 4095); 22: 2 destination VCI (≥ 32); 24: 4 frames (0: one per frame request, the capture loop; 0xFFFFFFFF: continuous; n: n frames) |
//! | 0x04 | frame request | none |
//! | 0x05 | status request | none |
//! | 0x81 | ack | 6: 1 code acknowledged; 7: 1 status (0 done, 1 nothing to change) |
//! | 0x82 | status | 6: 1 flags (bit 0 capturing, bit 1 a frame leaving; others 0); 8: 4 frames captured; 12: 4 newest frame number; 16: 4 frames sent; 20: 4 t-frames sent; 24: 4 video cells sent; 28: 4 frame requests; 32: 4 frame requests merged; 36: 4 commands accepted; 40: 4 commands refused |
//! | 0x83 | error | 6: 1 reason (below); 7: 1 code of the command refused (as received); 8: 2 detail (for a bad parameter, its offset) |
//!
//! Frames, t-frames, cells and frame requests in a status reply are the
//! asking control channel's; frames captured, the newest frame and the
//! command counts are the camera's. Counters are the low 32 bits.
//!
//! | reason | error |
//! |---|---|
//! | 1 | bad magic |
//! | 2 | unknown version |
//! | 3 | check bytes wrong |
//! | 4 | unknown code |
//! | 5 | a byte the code does not use is not 0 |
//! | 6 | a parameter out of range (detail: its offset) |
//! | 7 | frame request without a video request asking for frames one at a time |
//! | 8 | frame request while the capture loop is stopped |
//! | 9 | the source cannot give the picture size asked for |
//!
//! [`CommandCell::parse`] takes untrusted bytes and never panics: it
//! checks magic, version, check bytes, code, parameters and unused bytes
//! in that order, and a failure says which ([`Malformed`]), with the tag
//! and code as received so the camera can answer with an error reply. What
//! parses emits back to the same 48 bytes.

use core::fmt;

use aurora_time::Duration;
use aurora_wire::cell::{Format, Header, Pti, VcId, VCI_FIRST_USER};
use aurora_wire::{CellBytes, CELL_LEN, HEADER_LEN, PAYLOAD_LEN};

use crate::frame::{PictureSize, PixelFormat};

/// The first two bytes of every message.
pub const MAGIC: [u8; 2] = *b"VB";
/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;

/// Offset of the version byte.
pub const OFF_VERSION: usize = 2;
/// Offset of the code.
pub const OFF_CODE: usize = 3;
/// Offset of the tag.
pub const OFF_TAG: usize = 4;
/// Offset of the parameters.
pub const OFF_PARAMS: usize = 6;
/// Offset of the check bytes.
pub const OFF_CHECK: usize = 46;

/// Offsets of the video request's fields.
pub mod video_field {
    /// Picture size code.
    pub const SIZE: usize = 6;
    /// Pixel format code.
    pub const FORMAT: usize = 7;
    /// Scan lines per t-frame (LT).
    pub const LINES: usize = 8;
    /// Cells per burst (CB).
    pub const CELLS: usize = 10;
    /// Interburst delay in ns.
    pub const INTERBURST: usize = 12;
    /// Interframe delay in ns.
    pub const INTERFRAME: usize = 16;
    /// Destination VPI.
    pub const VPI: usize = 20;
    /// Destination VCI.
    pub const VCI: usize = 22;
    /// Frames to send.
    pub const FRAMES: usize = 24;
    /// The first unused byte.
    pub const END: usize = 28;
}

/// Message codes.
pub mod code {
    /// Start the capture loop.
    pub const START_CAPTURE: u8 = 0x01;
    /// Stop the capture loop.
    pub const STOP_CAPTURE: u8 = 0x02;
    /// Set up a video stream.
    pub const VIDEO_REQUEST: u8 = 0x03;
    /// Send one frame (capture-loop mode).
    pub const FRAME_REQUEST: u8 = 0x04;
    /// Report counters.
    pub const STATUS_REQUEST: u8 = 0x05;
    /// A command was carried out.
    pub const ACK: u8 = 0x81;
    /// Counters, answering a status request.
    pub const STATUS: u8 = 0x82;
    /// A command was refused.
    pub const ERROR: u8 = 0x83;
}

/// The check bytes' CRC.
const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_IBM_3740);

/// The check of a message's first 46 bytes.
pub fn check(bytes: &[u8]) -> u16 {
    CRC16.checksum(bytes)
}

/// How many frames a video request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Frames {
    /// One per frame request: the closed-loop capture mode.
    OnRequest,
    /// This many (1 to 0xFFFFFFFE), then stop. `Count(0)` travels as
    /// [`Frames::OnRequest`] and `Count(0xFFFFFFFF)` as
    /// [`Frames::Continuous`]: those are the codes' meanings.
    Count(u32),
    /// Frames for as long as the capture loop runs.
    Continuous,
}

impl Frames {
    fn to_wire(self) -> u32 {
        match self {
            Frames::OnRequest => 0,
            Frames::Count(n) => n,
            Frames::Continuous => u32::MAX,
        }
    }
    fn from_wire(n: u32) -> Frames {
        match n {
            0 => Frames::OnRequest,
            u32::MAX => Frames::Continuous,
            n => Frames::Count(n),
        }
    }
}

/// A video request: what to send, how to shape it and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VideoRequest {
    /// Picture size.
    pub size: PictureSize,
    /// Pixel format.
    pub format: PixelFormat,
    /// LT: scan lines per t-frame, 1 to the picture's height.
    pub lines_per_tframe: u16,
    /// CB: cells sent back to back in a burst, at least 1.
    pub cells_per_burst: u16,
    /// Idle time on the line between the last cell of a burst and the
    /// first of the next (carried in whole nanoseconds, at most
    /// `u32::MAX`).
    pub interburst: Duration,
    /// Idle time on the line between the last cell of a frame and the
    /// first of the next (as above).
    pub interframe: Duration,
    /// The VC the camera sends the video on (on its own link).
    pub dest: VcId,
    /// How many frames.
    pub frames: Frames,
}

/// What an ack says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AckStatus {
    /// The command was carried out.
    Done,
    /// There was nothing to do (start while capturing, stop while stopped).
    Unchanged,
    /// A status this crate does not know.
    Unknown(u8),
}

impl AckStatus {
    fn to_wire(self) -> u8 {
        match self {
            AckStatus::Done => 0,
            AckStatus::Unchanged => 1,
            AckStatus::Unknown(n) => n,
        }
    }
    fn from_wire(n: u8) -> AckStatus {
        match n {
            0 => AckStatus::Done,
            1 => AckStatus::Unchanged,
            n => AckStatus::Unknown(n),
        }
    }
}

/// An acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ack {
    /// The code of the command acknowledged.
    pub command: u8,
    /// What came of it.
    pub status: AckStatus,
}

/// The camera's counters, answering a status request (see the table in
/// the [module](self) documentation for whose each one is).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Status {
    /// The capture loop is running.
    pub capturing: bool,
    /// A frame is leaving.
    pub sending: bool,
    /// Frames captured.
    pub frames_captured: u32,
    /// The newest frame's number.
    pub newest_frame: u32,
    /// Frames sent to the asking channel.
    pub frames_sent: u32,
    /// T-frames sent to it.
    pub tframes_sent: u32,
    /// Video cells sent to it.
    pub cells_sent: u32,
    /// Frame requests it sent.
    pub frame_requests: u32,
    /// Its frame requests that found one already waiting (nothing queues:
    /// they count here and change nothing).
    pub requests_merged: u32,
    /// Commands the camera carried out.
    pub commands_accepted: u32,
    /// Commands the camera refused (malformed or not possible).
    pub commands_refused: u32,
}

/// Why a command was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorReason {
    /// Bytes 0-1 are not "VB".
    BadMagic,
    /// A version this camera does not speak.
    BadVersion,
    /// The check bytes do not match.
    BadCheck,
    /// A code this camera does not know.
    UnknownCode,
    /// A byte the code does not use is not zero.
    ReservedNotZero,
    /// A parameter out of range; the detail is its offset.
    BadParameter,
    /// A frame request without a video request asking for frames one at a
    /// time.
    NotConfigured,
    /// A frame request while the capture loop is stopped.
    NotCapturing,
    /// The source cannot give the picture size asked for.
    Unsupported,
    /// A reason this crate does not know.
    Unknown(u8),
}

impl ErrorReason {
    /// The reason's number in an error reply.
    pub fn to_wire(self) -> u8 {
        match self {
            ErrorReason::BadMagic => 1,
            ErrorReason::BadVersion => 2,
            ErrorReason::BadCheck => 3,
            ErrorReason::UnknownCode => 4,
            ErrorReason::ReservedNotZero => 5,
            ErrorReason::BadParameter => 6,
            ErrorReason::NotConfigured => 7,
            ErrorReason::NotCapturing => 8,
            ErrorReason::Unsupported => 9,
            ErrorReason::Unknown(n) => n,
        }
    }
    /// The reason numbered `n`.
    pub fn from_wire(n: u8) -> ErrorReason {
        match n {
            1 => ErrorReason::BadMagic,
            2 => ErrorReason::BadVersion,
            3 => ErrorReason::BadCheck,
            4 => ErrorReason::UnknownCode,
            5 => ErrorReason::ReservedNotZero,
            6 => ErrorReason::BadParameter,
            7 => ErrorReason::NotConfigured,
            8 => ErrorReason::NotCapturing,
            9 => ErrorReason::Unsupported,
            n => ErrorReason::Unknown(n),
        }
    }
}

/// An error reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorReply {
    /// Why.
    pub reason: ErrorReason,
    /// The code of the command refused, as received.
    pub command: u8,
    /// More: for a bad parameter, its offset; otherwise 0.
    pub detail: u16,
}

/// One message of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    /// Start the capture loop: frames enter the frame store at the
    /// source's rate.
    StartCapture,
    /// Stop the capture loop (a frame leaving finishes).
    StopCapture,
    /// Set up the asking channel's video stream.
    VideoRequest(VideoRequest),
    /// Send the asking channel one frame (capture-loop mode).
    FrameRequest,
    /// Report counters.
    StatusRequest,
    /// A command was carried out.
    Ack(Ack),
    /// Counters.
    Status(Status),
    /// A command was refused.
    Error(ErrorReply),
}

impl Message {
    /// The message's code.
    pub fn code(&self) -> u8 {
        match self {
            Message::StartCapture => code::START_CAPTURE,
            Message::StopCapture => code::STOP_CAPTURE,
            Message::VideoRequest(_) => code::VIDEO_REQUEST,
            Message::FrameRequest => code::FRAME_REQUEST,
            Message::StatusRequest => code::STATUS_REQUEST,
            Message::Ack(_) => code::ACK,
            Message::Status(_) => code::STATUS,
            Message::Error(_) => code::ERROR,
        }
    }

    /// True for the messages a camera carries out (not replies).
    pub fn is_command(&self) -> bool {
        self.code() & 0x80 == 0
    }
}

/// What was wrong with a message that did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Defect {
    /// The payload is not 48 bytes.
    Length,
    /// Bytes 0-1 are not "VB".
    BadMagic,
    /// An unknown version.
    BadVersion,
    /// The check bytes do not match.
    BadCheck,
    /// An unknown code.
    UnknownCode,
    /// A byte the code does not use is not zero.
    ReservedNotZero,
    /// A parameter out of range.
    BadParameter,
}

impl Defect {
    /// How many defects there are.
    pub const COUNT: usize = 7;
    /// Every defect, in the order of their counters.
    pub const ALL: [Defect; Defect::COUNT] = [
        Defect::Length,
        Defect::BadMagic,
        Defect::BadVersion,
        Defect::BadCheck,
        Defect::UnknownCode,
        Defect::ReservedNotZero,
        Defect::BadParameter,
    ];

    /// A short snake_case name (for counters and drop reasons).
    pub fn name(self) -> &'static str {
        match self {
            Defect::Length => "cmd_length",
            Defect::BadMagic => "cmd_bad_magic",
            Defect::BadVersion => "cmd_bad_version",
            Defect::BadCheck => "cmd_bad_check",
            Defect::UnknownCode => "cmd_unknown_code",
            Defect::ReservedNotZero => "cmd_reserved_not_zero",
            Defect::BadParameter => "cmd_bad_parameter",
        }
    }

    /// The reason an error reply gives for it.
    pub fn reason(self) -> ErrorReason {
        match self {
            Defect::Length | Defect::BadParameter => ErrorReason::BadParameter,
            Defect::BadMagic => ErrorReason::BadMagic,
            Defect::BadVersion => ErrorReason::BadVersion,
            Defect::BadCheck => ErrorReason::BadCheck,
            Defect::UnknownCode => ErrorReason::UnknownCode,
            Defect::ReservedNotZero => ErrorReason::ReservedNotZero,
        }
    }
}

/// A message that did not parse: what was wrong, and what could be read
/// of it to address an error reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Malformed {
    /// What was wrong.
    pub defect: Defect,
    /// The tag bytes as received (0 if there were none).
    pub tag: u16,
    /// The code byte as received (0 if there was none).
    pub code: u8,
    /// For a bad parameter or a reserved byte, its offset; otherwise 0.
    pub detail: u16,
}

impl Malformed {
    /// The error reply that answers it.
    pub fn reply(&self) -> CommandCell {
        CommandCell {
            tag: self.tag,
            message: Message::Error(ErrorReply {
                reason: self.defect.reason(),
                command: self.code,
                detail: self.detail,
            }),
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "command cell (code {:#04x}, tag {}) refused: {} at offset {}",
            self.code,
            self.tag,
            self.defect.name(),
            self.detail
        )
    }
}

impl std::error::Error for Malformed {}

/// One message with its tag: the payload of one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommandCell {
    /// The sender's number for the message (a reply carries the tag of
    /// the command it answers).
    pub tag: u16,
    /// The message.
    pub message: Message,
}

fn put16(b: &mut [u8; PAYLOAD_LEN], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
fn put32(b: &mut [u8; PAYLOAD_LEN], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
fn get16(b: &[u8; PAYLOAD_LEN], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn get32(b: &[u8; PAYLOAD_LEN], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
/// A duration as whole nanoseconds in 32 bits (0 below, saturating above).
fn ns32(d: Duration) -> u32 {
    d.as_nanos().clamp(0, i64::from(u32::MAX)) as u32
}

impl CommandCell {
    /// A message with a tag.
    pub fn new(tag: u16, message: Message) -> CommandCell {
        CommandCell { tag, message }
    }

    /// The 48 payload bytes. A duration longer than `u32::MAX` ns is sent
    /// as `u32::MAX` ns; nothing else is changed on the way.
    pub fn emit(&self) -> [u8; PAYLOAD_LEN] {
        let mut b = [0u8; PAYLOAD_LEN];
        b[..2].copy_from_slice(&MAGIC);
        b[OFF_VERSION] = VERSION;
        b[OFF_CODE] = self.message.code();
        put16(&mut b, OFF_TAG, self.tag);
        match &self.message {
            Message::StartCapture
            | Message::StopCapture
            | Message::FrameRequest
            | Message::StatusRequest => {}
            Message::VideoRequest(v) => {
                use video_field as f;
                b[f::SIZE] = v.size.code();
                b[f::FORMAT] = v.format.code();
                put16(&mut b, f::LINES, v.lines_per_tframe);
                put16(&mut b, f::CELLS, v.cells_per_burst);
                put32(&mut b, f::INTERBURST, ns32(v.interburst));
                put32(&mut b, f::INTERFRAME, ns32(v.interframe));
                put16(&mut b, f::VPI, v.dest.vpi);
                put16(&mut b, f::VCI, v.dest.vci);
                put32(&mut b, f::FRAMES, v.frames.to_wire());
            }
            Message::Ack(a) => {
                b[6] = a.command;
                b[7] = a.status.to_wire();
            }
            Message::Status(s) => {
                b[6] = u8::from(s.capturing) | u8::from(s.sending) << 1;
                let words = [
                    s.frames_captured,
                    s.newest_frame,
                    s.frames_sent,
                    s.tframes_sent,
                    s.cells_sent,
                    s.frame_requests,
                    s.requests_merged,
                    s.commands_accepted,
                    s.commands_refused,
                ];
                for (i, w) in words.into_iter().enumerate() {
                    put32(&mut b, 8 + 4 * i, w);
                }
            }
            Message::Error(e) => {
                b[6] = e.reason.to_wire();
                b[7] = e.command;
                put16(&mut b, 8, e.detail);
            }
        }
        let c = check(&b[..OFF_CHECK]);
        put16(&mut b, OFF_CHECK, c);
        b
    }

    /// Reads a message from untrusted bytes (a cell's payload: exactly 48).
    pub fn parse_slice(bytes: &[u8]) -> Result<CommandCell, Malformed> {
        match bytes.try_into() {
            Ok(b) => CommandCell::parse(b),
            Err(_) => Err(Malformed {
                defect: Defect::Length,
                tag: 0,
                code: 0,
                detail: 0,
            }),
        }
    }

    /// Reads a message from a cell's untrusted payload.
    pub fn parse(b: &[u8; PAYLOAD_LEN]) -> Result<CommandCell, Malformed> {
        let tag = get16(b, OFF_TAG);
        let c = b[OFF_CODE];
        let bad = |defect, detail: usize| Malformed {
            defect,
            tag,
            code: c,
            detail: detail as u16,
        };
        if b[..2] != MAGIC {
            return Err(bad(Defect::BadMagic, 0));
        }
        if b[OFF_VERSION] != VERSION {
            return Err(bad(Defect::BadVersion, OFF_VERSION));
        }
        if get16(b, OFF_CHECK) != check(&b[..OFF_CHECK]) {
            return Err(bad(Defect::BadCheck, OFF_CHECK));
        }
        // Where the code's parameters end: every byte from there to the
        // check bytes must be zero.
        let (message, used) = match c {
            code::START_CAPTURE => (Message::StartCapture, OFF_PARAMS),
            code::STOP_CAPTURE => (Message::StopCapture, OFF_PARAMS),
            code::FRAME_REQUEST => (Message::FrameRequest, OFF_PARAMS),
            code::STATUS_REQUEST => (Message::StatusRequest, OFF_PARAMS),
            code::VIDEO_REQUEST => {
                use video_field as f;
                let size =
                    PictureSize::from_code(b[f::SIZE]).ok_or(bad(Defect::BadParameter, f::SIZE))?;
                let format = PixelFormat::from_code(b[f::FORMAT])
                    .ok_or(bad(Defect::BadParameter, f::FORMAT))?;
                let lines = get16(b, f::LINES);
                if lines == 0 || usize::from(lines) > size.height() {
                    return Err(bad(Defect::BadParameter, f::LINES));
                }
                let cells = get16(b, f::CELLS);
                if cells == 0 {
                    return Err(bad(Defect::BadParameter, f::CELLS));
                }
                let vpi = get16(b, f::VPI);
                if vpi > Format::Nni.max_vpi() {
                    return Err(bad(Defect::BadParameter, f::VPI));
                }
                let vci = get16(b, f::VCI);
                if vci < VCI_FIRST_USER {
                    return Err(bad(Defect::BadParameter, f::VCI));
                }
                let v = VideoRequest {
                    size,
                    format,
                    lines_per_tframe: lines,
                    cells_per_burst: cells,
                    interburst: Duration::from_nanos(get32(b, f::INTERBURST).into()),
                    interframe: Duration::from_nanos(get32(b, f::INTERFRAME).into()),
                    dest: VcId::new(vpi, vci),
                    frames: Frames::from_wire(get32(b, f::FRAMES)),
                };
                (Message::VideoRequest(v), f::END)
            }
            code::ACK => (
                Message::Ack(Ack {
                    command: b[6],
                    status: AckStatus::from_wire(b[7]),
                }),
                8,
            ),
            code::STATUS => {
                if b[6] & !3 != 0 {
                    return Err(bad(Defect::ReservedNotZero, 6));
                }
                if b[7] != 0 {
                    return Err(bad(Defect::ReservedNotZero, 7));
                }
                let w = |i: usize| get32(b, 8 + 4 * i);
                let s = Status {
                    capturing: b[6] & 1 != 0,
                    sending: b[6] & 2 != 0,
                    frames_captured: w(0),
                    newest_frame: w(1),
                    frames_sent: w(2),
                    tframes_sent: w(3),
                    cells_sent: w(4),
                    frame_requests: w(5),
                    requests_merged: w(6),
                    commands_accepted: w(7),
                    commands_refused: w(8),
                };
                (Message::Status(s), 44)
            }
            code::ERROR => (
                Message::Error(ErrorReply {
                    reason: ErrorReason::from_wire(b[6]),
                    command: b[7],
                    detail: get16(b, 8),
                }),
                10,
            ),
            _ => return Err(bad(Defect::UnknownCode, OFF_CODE)),
        };
        if let Some(i) = b[used..OFF_CHECK].iter().position(|&x| x != 0) {
            return Err(bad(Defect::ReservedNotZero, used + i));
        }
        Ok(CommandCell { tag, message })
    }

    /// The whole cell on `vc`: a user cell, end of unit, header in
    /// `format`. `None` if `vc` does not fit the format.
    pub fn to_cell(&self, vc: VcId, format: Format) -> Option<CellBytes> {
        let h = Header {
            format,
            pti: Pti::DATA_END,
            ..Header::data(vc)
        };
        let mut c = [0u8; CELL_LEN];
        h.emit(&mut c).ok()?;
        c[HEADER_LEN..].copy_from_slice(&self.emit());
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A bit-at-a-time CRC-16/IBM-3740, to check the table-driven one.
    fn crc16_slow(data: &[u8]) -> u16 {
        let mut r: u16 = 0xFFFF;
        for &b in data {
            r ^= u16::from(b) << 8;
            for _ in 0..8 {
                r = if r & 0x8000 != 0 {
                    (r << 1) ^ 0x1021
                } else {
                    r << 1
                };
            }
        }
        r
    }

    #[test]
    fn the_check_is_crc16_ibm_3740() {
        assert_eq!(check(b"123456789"), 0x29B1);
        assert_eq!(crc16_slow(b"123456789"), 0x29B1);
    }

    fn hex(s: &str) -> [u8; 48] {
        let v: Vec<u8> = s
            .split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        v.try_into().unwrap()
    }

    #[test]
    fn start_capture_known_answer() {
        let c = CommandCell::new(0x0102, Message::StartCapture);
        let want = hex("56 42 01 01 01 02 00 00 00 00 00 00 00 00 00 00
             00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
             00 00 00 00 00 00 00 00 00 00 00 00 00 00 03 7D");
        assert_eq!(crc16_slow(&want[..46]), 0x037D);
        assert_eq!(c.emit(), want);
        assert_eq!(CommandCell::parse(&want), Ok(c));
    }

    #[test]
    fn video_request_known_answer() {
        let v = VideoRequest {
            size: PictureSize::Full,
            format: PixelFormat::Mono8,
            lines_per_tframe: 16,
            cells_per_burst: 56,
            interburst: Duration::from_micros(510),
            interframe: Duration::from_millis(1),
            dest: VcId::new(0, 100),
            frames: Frames::OnRequest,
        };
        let c = CommandCell::new(7, Message::VideoRequest(v));
        let b = c.emit();
        let want = hex("56 42 01 03 00 07 00 00 00 10 00 38 00 07 C8 30
             00 0F 42 40 00 00 00 64 00 00 00 00 00 00 00 00
             00 00 00 00 00 00 00 00 00 00 00 00 00 00 8D B8");
        assert_eq!(b, want);
        assert_eq!(crc16_slow(&want[..46]), 0x8DB8);
        assert_eq!(CommandCell::parse(&b), Ok(c));
        let v2 = VideoRequest {
            frames: Frames::Continuous,
            ..v
        };
        assert_eq!(
            &CommandCell::new(7, Message::VideoRequest(v2)).emit()[24..28],
            &[0xFF; 4]
        );
    }

    #[test]
    fn replies_known_answers() {
        let ack = CommandCell::new(
            9,
            Message::Ack(Ack {
                command: code::START_CAPTURE,
                status: AckStatus::Unchanged,
            }),
        );
        assert_eq!(
            &ack.emit()[..10],
            &[0x56, 0x42, 1, 0x81, 0, 9, 0x01, 0x01, 0, 0]
        );
        let err = CommandCell::new(
            0xBEEF,
            Message::Error(ErrorReply {
                reason: ErrorReason::BadParameter,
                command: code::VIDEO_REQUEST,
                detail: 8,
            }),
        );
        assert_eq!(
            &err.emit()[..12],
            &[0x56, 0x42, 1, 0x83, 0xBE, 0xEF, 6, 3, 0, 8, 0, 0]
        );
        let st = CommandCell::new(
            1,
            Message::Status(Status {
                capturing: true,
                sending: true,
                frames_captured: 0x01020304,
                commands_refused: 0xA0B0C0D0,
                ..Status::default()
            }),
        );
        let b = st.emit();
        assert_eq!(&b[6..12], &[3, 0, 1, 2, 3, 4]);
        assert_eq!(&b[40..44], &[0xA0, 0xB0, 0xC0, 0xD0]);
        for m in [ack, err, st] {
            assert_eq!(CommandCell::parse(&m.emit()), Ok(m));
        }
    }

    #[test]
    fn every_defect_is_named_in_order() {
        let good = CommandCell::new(5, Message::FrameRequest).emit();
        let reseal = |mut b: [u8; 48]| {
            let c = check(&b[..46]);
            b[46..].copy_from_slice(&c.to_be_bytes());
            b
        };
        let defect = |b: &[u8; 48]| CommandCell::parse(b).map_err(|m| (m.defect, m.detail));
        let mut b = good;
        b[0] = b'X';
        assert_eq!(defect(&b), Err((Defect::BadMagic, 0)));
        let mut b = good;
        b[2] = 2;
        assert_eq!(defect(&b), Err((Defect::BadVersion, 2)));
        let mut b = good;
        b[20] = 1;
        assert_eq!(defect(&b), Err((Defect::BadCheck, 46)));
        assert_eq!(defect(&reseal(b)), Err((Defect::ReservedNotZero, 20)));
        let mut b = good;
        b[3] = 0x7F;
        let m = CommandCell::parse(&reseal(b)).unwrap_err();
        assert_eq!((m.defect, m.code, m.tag), (Defect::UnknownCode, 0x7F, 5));
        assert_eq!(
            m.reply().message,
            Message::Error(ErrorReply {
                reason: ErrorReason::UnknownCode,
                command: 0x7F,
                detail: 3
            })
        );
        assert_eq!(
            CommandCell::parse_slice(&good[..47]).unwrap_err().defect,
            Defect::Length
        );
        // Each video-request field out of range is named by its offset.
        let v = VideoRequest {
            size: PictureSize::Quarter,
            format: PixelFormat::Yuyv,
            lines_per_tframe: 120,
            cells_per_burst: 1,
            interburst: Duration::ZERO,
            interframe: Duration::ZERO,
            dest: VcId::new(4095, 32),
            frames: Frames::Count(3),
        };
        let vb = CommandCell::new(1, Message::VideoRequest(v)).emit();
        assert!(CommandCell::parse(&vb).is_ok());
        for (at, val) in [
            (6, 3u8),
            (7, 2),
            (9, 121),
            (9, 0),
            (11, 0),
            (20, 0x10),
            (23, 31),
        ] {
            let mut b = vb;
            if at == 9 || at == 11 {
                b[at - 1] = 0;
            }
            if at == 23 {
                b[22] = 0;
            }
            b[at] = val;
            let field = if at == 9 || at == 11 || at == 23 {
                at - 1
            } else {
                at
            };
            assert_eq!(
                defect(&reseal(b)),
                Err((Defect::BadParameter, field as u16)),
                "offset {at}"
            );
        }
    }

    fn arb_message() -> impl Strategy<Value = Message> {
        let video = (
            0u8..3,
            0u8..2,
            any::<u16>(),
            1u16..,
            any::<u32>(),
            any::<u32>(),
            0u16..4096,
            32u16..,
            any::<u32>(),
        )
            .prop_map(|(s, f, lt, cb, ib, ifr, vpi, vci, n)| {
                let size = PictureSize::from_code(s).unwrap();
                Message::VideoRequest(VideoRequest {
                    size,
                    format: PixelFormat::from_code(f).unwrap(),
                    lines_per_tframe: 1 + lt % size.height() as u16,
                    cells_per_burst: cb,
                    interburst: Duration::from_nanos(ib.into()),
                    interframe: Duration::from_nanos(ifr.into()),
                    dest: VcId::new(vpi, vci),
                    frames: Frames::from_wire(n),
                })
            });
        let status = proptest::array::uniform9(any::<u32>()).prop_flat_map(|w| {
            (any::<bool>(), any::<bool>()).prop_map(move |(c, s)| {
                Message::Status(Status {
                    capturing: c,
                    sending: s,
                    frames_captured: w[0],
                    newest_frame: w[1],
                    frames_sent: w[2],
                    tframes_sent: w[3],
                    cells_sent: w[4],
                    frame_requests: w[5],
                    requests_merged: w[6],
                    commands_accepted: w[7],
                    commands_refused: w[8],
                })
            })
        });
        prop_oneof![
            Just(Message::StartCapture),
            Just(Message::StopCapture),
            Just(Message::FrameRequest),
            Just(Message::StatusRequest),
            video,
            (any::<u8>(), any::<u8>()).prop_map(|(c, s)| Message::Ack(Ack {
                command: c,
                status: AckStatus::from_wire(s)
            })),
            status,
            (any::<u8>(), any::<u8>(), any::<u16>()).prop_map(|(r, c, d)| Message::Error(
                ErrorReply {
                    reason: ErrorReason::from_wire(r),
                    command: c,
                    detail: d
                }
            )),
        ]
    }

    proptest! {
        #[test]
        fn emit_then_parse_is_the_identity(tag: u16, m in arb_message()) {
            let c = CommandCell::new(tag, m);
            let b = c.emit();
            prop_assert_eq!(CommandCell::parse(&b), Ok(c));
            let cell = c.to_cell(VcId::new(1, 40), Format::Uni).unwrap();
            prop_assert_eq!(&cell[5..], &b[..]);
            prop_assert_eq!(cell[3] & 0x0E, 0x02, "user data, end of unit");
        }

        #[test]
        fn any_bytes_parse_without_panic_and_what_parses_is_canonical(
            bytes in proptest::collection::vec(any::<u8>(), 0..60),
            sealed: bool,
        ) {
            let _ = CommandCell::parse_slice(&bytes);
            if let Ok(mut b) = <[u8; 48]>::try_from(&bytes[..]) {
                if sealed {
                    // Make the fixed fields right, so the parser gets past
                    // them to the code and parameters.
                    b[..3].copy_from_slice(&[b'V', b'B', VERSION]);
                    let c = check(&b[..46]);
                    b[46..].copy_from_slice(&c.to_be_bytes());
                }
                if let Ok(c) = CommandCell::parse(&b) {
                    prop_assert_eq!(c.emit(), b);
                }
            }
        }
    }
}
