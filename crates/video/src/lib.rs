//! The Vidboard network camera and its receiver, sans-I/O.
//!
//! The seed's Vidboard (MIT's VuNet, Sections 3.3, 3.5.2 and 4.3) is a
//! camera that is a node on the cell network, not a board in a
//! workstation: a program drives it with single command cells, and it
//! shapes its video to what the receiving host can absorb. This crate
//! rebuilds it as two [`aurora_net::Node`]s that run in the engine under
//! either clock: the camera ([`vidboard::Vidboard`]) and a workstation's
//! side of a session ([`client::VidboardClient`]). Nothing here reads a
//! clock, opens a file during a run, or spawns a thread.
//!
//! | module | what lives there |
//! |---|---|
//! | [`frame`] | picture sizes (640×480, 320×240, 160×120), pixel formats (8-bit mono, packed 4:2:2 YUYV: why in the module), [`frame::Picture`] |
//! | [`source`] | what the camera looks at: the synthetic source (moving content, the frame counter in line 0 and in digits, deterministic from a seed) and the YUV4MPEG2 file source (looped, scaled by whole factors) |
//! | [`command`] | the command-cell protocol: one cell per command or reply, its byte layout, CRC-16 check, a parser for untrusted bytes |
//! | [`val`] | the video adaptation layer: t-frames of LT lines cut into cells like AAL5, an Internet-checksum trailer, the segmenter and the reassembler with its loss accounting |
//! | [`vidboard`] | the camera node: capture loop, frame store, sessions per control channel, shaped bursts (CB, interburst, interframe), the closed loop |
//! | [`client`] | the receiving node: requests, reassembly, a consumer with a processing time, checks of every frame |
//! | [`pipeline`] | VuSystem-style media pipelines on a workstation: modules joined by bounded ports, non-preemptive dispatch, `Timeout` callbacks, a clock trait for virtual or real time, the modules, the command-line syntax and the Room Monitor |
//!
//! **Formats, in short.** A command is the 48-byte payload of one user
//! cell: magic "VB", version 1, code, tag, 40 bytes of parameters, CRC-16
//! (table in [`command`]). Video is t-frames: LT scan lines, zero pad, and
//! a 12-byte trailer (frame number, first line, line count, line bytes,
//! Internet checksum) ending the last cell, whose PTI marks the end
//! (layout in [`val`]).
//!
//! **Bounds.** The camera's frame store holds two frames, the newest
//! captured and the one leaving, and only the one leaving has pixels (one
//! picture buffer; the newest is rendered when it starts to leave); it
//! has at most [`vidboard::MAX_CHANNELS`] sessions and at most one
//! waiting frame request per session, and sends no cell it has not
//! computed the time for (no cell queue). A
//! reassembler holds two pictures and a unit buffer of at most twice its
//! largest t-frame. A client remembers at most [`client::DELIVERY_LOG`]
//! deliveries and [`client::MAX_QUEUED`] queued commands. A file source
//! loads at most [`source::MAX_Y4M_BYTES`].
//!
//! **Counters.** Every cell the camera or a client drops is counted by
//! name (and shown to the engine's drop tap); every t-frame the camera
//! sends is, at the receiver, delivered, lost for a named reason, or in
//! progress ([`val`] says how the books balance).
#![forbid(unsafe_code)]

pub mod client;
pub mod command;
pub mod frame;
pub mod pipeline;
pub mod source;
pub mod val;
pub mod vidboard;
