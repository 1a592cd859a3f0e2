//! The video adaptation layer: scan lines grouped into t-frames, each cut
//! into cells the way AAL5 cuts a PDU, with an easily computed checksum
//! where AAL5 has its CRC-32.
//!
//! **T-frames.** A frame's scan lines go in groups of LT lines (the last
//! group holds what is left): t-frame `i` of a frame carries lines
//! `i·LT .. min((i+1)·LT, height)`, their bytes as they lie in the picture.
//! A frame of height H has ⌈H / LT⌉ t-frames ([`Layout`]).
//!
//! **Cells.** A t-frame is its line bytes, zero padding, and a 12-byte
//! trailer that ends the last cell (so the trailer is always bytes 36..48
//! of the last cell), cut into 48-byte cell payloads; the last cell has
//! the PTI end-of-unit bit set, as in AAL5. Cells per t-frame:
//! ⌈(lines × line bytes + 12) / 48⌉ ([`cells_for`]); a single 640-pixel
//! mono line takes 14 cells, the seed's "14 cells = 1 scan line".
//!
//! ```text
//! trailer (big-endian)
//!  0  4  frame number (the low 32 bits of the camera's frame counter)
//!  4  2  first line
//!  6  2  lines in this t-frame
//!  8  2  bytes per line
//! 10  2  checksum
//! ```
//!
//! **Checksum.** The 16-bit one's-complement Internet checksum (RFC 1071)
//! over the whole t-frame (lines, pad and trailer, the checksum field
//! taken as zero while summing); a receiver sums everything it got and
//! expects 0xFFFF. Chosen because it is the cheapest checksum to compute
//! in software (64-bit adds with the carries folded at the end, a
//! fraction of a copy's cost; the camera's firmware in the seed replaced
//! the CRC for the same reason), because the sum can be taken over the
//! picture's lines where they lie, pad and trailer added after, and
//! because its blind spots do not matter here: cells on a VC arrive in
//! order, so swapped words cannot happen, and every single-bit error and
//! every burst of up to 15 bits is caught. Fletcher-32 would catch
//! reordering too, at twice the work, for a failure cells do not have.
//!
//! **Receiver.** [`Reassembler`] rebuilds the frames of one VC whose
//! layout it knows (it sent the request). It collects cells up to an end
//! cell, then reads the trailer and checks the unit:
//!
//! * fewer cells than the trailer's length needs: cells were lost inside
//!   the t-frame ([`Loss::Short`]);
//! * more cells than it needs: an earlier t-frame lost its end cell and
//!   ran into this one. The trailing cells are checked as a t-frame of
//!   their own; if they check, the cells before them are one lost t-frame
//!   ([`Loss::EndMissing`]) and this one is delivered. So a lost cell
//!   costs exactly one t-frame, wherever it was, not two as in AAL5;
//! * the right length but the checksum fails ([`Loss::Checksum`]), or it
//!   checks but does not fit the layout ([`Loss::Trailer`]).
//!
//! A good t-frame's lines go into the frame being assembled. A frame is
//! delivered when its last t-frame arrives, when a t-frame of a later
//! frame arrives, or when the caller gives up on it
//! ([`Reassembler::close_frame`]); lines of t-frames that did not arrive
//! hold older pixels, and [`FrameInfo`] says how many.
//!
//! **Accounting.** Each good t-frame says where it stands in the sequence
//! (frame, index); the t-frames between it and the last good one are the
//! ones lost. Losses seen (a unit that failed) are counted by reason as
//! they happen; t-frames that left no trace at all are counted as
//! [`Loss::Missing`] when the next good t-frame (or the frame's close)
//! shows the gap. Every failed unit holds the place of at least one lost
//! end cell of its own, so failed units never outnumber the t-frames
//! lost; should the positions within a frame show fewer (it would take a
//! checksum passing by chance) the excess is [`RxStats::surplus`]. Then,
//! once nothing is in progress,
//!
//! > t-frames sent = delivered + Σ losses by reason − surplus + in progress
//!
//! for every frame of which anything arrived (a good t-frame, or a failed
//! unit). A frame lost without a trace leaves nothing to count here; the
//! client counts it as a timeout.
//!
//! A good t-frame from far off (more than [`FRAME_WINDOW`] frames past or
//! before the last good one) is not believed on its own: with a 16-bit
//! checksum one corrupted t-frame in 65,536 passes, and a frame number
//! moved far ahead would make every later t-frame look stale. It is lost
//! as [`Loss::FarOff`] unless [`RESYNC`] such t-frames in a row agree,
//! when the receiver starts again from there (a camera whose count
//! restarted is followed the same way).
//!
//! **Bounds.** A reassembler holds two pictures (the one being assembled,
//! the last delivered) and a unit buffer of at most twice the largest
//! t-frame's cells; a unit that grows past it is dropped
//! ([`Loss::Overflow`]), and one left without a new cell for the timeout
//! too ([`Loss::Timeout`]).

use aurora_time::{Duration, Instant};
use aurora_wire::cell::{Format, Header, Pti, VcId};
use aurora_wire::ipv4::ones_sum;
use aurora_wire::{CellBytes, CELL_LEN, HEADER_LEN, PAYLOAD_LEN};

use crate::frame::{Picture, PictureSize, PixelFormat};

/// Bytes in a t-frame's trailer.
pub const TRAILER_LEN: usize = 12;
/// Where the trailer starts in the last cell's payload.
pub const TRAILER_AT: usize = PAYLOAD_LEN - TRAILER_LEN;

/// Cells a t-frame of `data_len` line bytes takes.
pub const fn cells_for(data_len: usize) -> usize {
    (data_len + TRAILER_LEN).div_ceil(PAYLOAD_LEN)
}

/// One's-complement addition of two 16-bit sums.
fn add1c(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xFFFF) + (s >> 16)) as u16
}

/// A t-frame's trailer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Trailer {
    /// The frame's number (low 32 bits of the camera's counter).
    pub frame: u32,
    /// The first scan line carried.
    pub first_line: u16,
    /// Scan lines carried.
    pub lines: u16,
    /// Bytes per scan line.
    pub line_bytes: u16,
    /// The Internet checksum of the whole t-frame.
    pub checksum: u16,
}

impl Trailer {
    /// The trailer's 12 bytes.
    pub fn emit(&self) -> [u8; TRAILER_LEN] {
        let mut b = [0u8; TRAILER_LEN];
        b[0..4].copy_from_slice(&self.frame.to_be_bytes());
        b[4..6].copy_from_slice(&self.first_line.to_be_bytes());
        b[6..8].copy_from_slice(&self.lines.to_be_bytes());
        b[8..10].copy_from_slice(&self.line_bytes.to_be_bytes());
        b[10..12].copy_from_slice(&self.checksum.to_be_bytes());
        b
    }

    /// Reads a trailer (any 12 bytes are one; the checksum says whether
    /// to believe it).
    pub fn parse(b: &[u8; TRAILER_LEN]) -> Trailer {
        Trailer {
            frame: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            first_line: u16::from_be_bytes([b[4], b[5]]),
            lines: u16::from_be_bytes([b[6], b[7]]),
            line_bytes: u16::from_be_bytes([b[8], b[9]]),
            checksum: u16::from_be_bytes([b[10], b[11]]),
        }
    }

    /// Line bytes the trailer says its t-frame carries.
    pub fn data_len(&self) -> usize {
        usize::from(self.lines) * usize::from(self.line_bytes)
    }
}

/// How a frame is cut into t-frames: the picture and LT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    size: PictureSize,
    format: PixelFormat,
    lines_per_tframe: u16,
}

impl Layout {
    /// A layout; `None` unless `1 <= lines_per_tframe <= height`.
    pub fn new(size: PictureSize, format: PixelFormat, lines_per_tframe: u16) -> Option<Layout> {
        (lines_per_tframe >= 1 && usize::from(lines_per_tframe) <= size.height()).then_some(
            Layout {
                size,
                format,
                lines_per_tframe,
            },
        )
    }

    /// The picture size.
    pub fn size(&self) -> PictureSize {
        self.size
    }

    /// The pixel format.
    pub fn format(&self) -> PixelFormat {
        self.format
    }

    /// LT.
    pub fn lines_per_tframe(&self) -> usize {
        usize::from(self.lines_per_tframe)
    }

    /// Bytes per scan line.
    pub fn line_bytes(&self) -> usize {
        self.size.width() * self.format.bytes_per_pixel()
    }

    /// T-frames per frame.
    pub fn tframes(&self) -> usize {
        self.size.height().div_ceil(self.lines_per_tframe())
    }

    /// Scan lines in t-frame `i` (0 past the last).
    pub fn tframe_lines(&self, i: usize) -> usize {
        let first = i.saturating_mul(self.lines_per_tframe());
        self.size
            .height()
            .saturating_sub(first)
            .min(self.lines_per_tframe())
    }

    /// Cells t-frame `i` takes.
    pub fn tframe_cells(&self, i: usize) -> usize {
        cells_for(self.tframe_lines(i) * self.line_bytes())
    }

    /// Cells a whole frame takes.
    pub fn frame_cells(&self) -> usize {
        let full = self.size.height() / self.lines_per_tframe();
        let rest = self.tframes() - full;
        full * self.tframe_cells(0) + rest * self.tframe_cells(full)
    }

    /// The most cells one t-frame takes.
    pub fn max_tframe_cells(&self) -> usize {
        self.tframe_cells(0)
    }
}

/// One cell from a [`Segmenter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegCell {
    /// The cell.
    pub cell: CellBytes,
    /// It ends a t-frame.
    pub tframe_end: bool,
    /// It ends the frame.
    pub frame_end: bool,
}

/// Cuts one frame at a time into cells, a cell per call, reading the
/// picture's lines where they lie (no copy of the frame, no cell buffer).
#[derive(Clone, Debug)]
pub struct Segmenter {
    mid: [u8; HEADER_LEN],
    end: [u8; HEADER_LEN],
    layout: Option<Layout>,
    frame: u32,
    /// The t-frame being cut, its cell, its cell count, its trailer.
    tframe: usize,
    cell: usize,
    cells: usize,
    trailer: [u8; TRAILER_LEN],
    left: usize,
}

impl Segmenter {
    /// A segmenter sending on `vc` with headers in `format`; `None` if the
    /// VC does not fit the format.
    pub fn new(vc: VcId, format: Format) -> Option<Segmenter> {
        let h = Header {
            format,
            ..Header::data(vc)
        };
        let mid = h.to_bytes().ok()?;
        let end = Header {
            pti: Pti::DATA_END,
            ..h
        }
        .to_bytes()
        .ok()?;
        Some(Segmenter {
            mid,
            end,
            layout: None,
            frame: 0,
            tframe: 0,
            cell: 0,
            cells: 0,
            trailer: [0; TRAILER_LEN],
            left: 0,
        })
    }

    /// Starts frame `frame` of `pic`, cut by `layout`; false (and nothing
    /// to send) if the picture is not the layout's size and format.
    pub fn start(&mut self, layout: Layout, frame: u32, pic: &Picture) -> bool {
        if pic.size() != layout.size || pic.format() != layout.format {
            self.layout = None;
            self.left = 0;
            return false;
        }
        self.layout = Some(layout);
        self.frame = frame;
        self.left = layout.frame_cells();
        self.begin_tframe(0, pic);
        true
    }

    /// Cells of the frame still to come.
    pub fn remaining(&self) -> usize {
        self.left
    }

    fn begin_tframe(&mut self, i: usize, pic: &Picture) {
        let Some(l) = self.layout else { return };
        let first = i * l.lines_per_tframe();
        let lines = l.tframe_lines(i);
        let data = pic.lines(first, lines).unwrap_or_default();
        let mut t = Trailer {
            frame: self.frame,
            first_line: first as u16,
            lines: lines as u16,
            line_bytes: l.line_bytes() as u16,
            checksum: 0,
        };
        // The trailer starts at a multiple of 4 and the pad is zeros, so
        // the t-frame's sum is the lines' sum plus the trailer's.
        let sum = add1c(ones_sum(data), ones_sum(&t.emit()));
        t.checksum = !sum;
        self.tframe = i;
        self.cell = 0;
        self.cells = cells_for(data.len());
        self.trailer = t.emit();
    }

    /// The frame's next cell, if any is left.
    pub fn next_cell(&mut self, pic: &Picture) -> Option<SegCell> {
        let l = self.layout?;
        if self.left == 0 {
            return None;
        }
        let lines = l.tframe_lines(self.tframe);
        let data = pic
            .lines(self.tframe * l.lines_per_tframe(), lines)
            .unwrap_or_default();
        let mut c = [0u8; CELL_LEN];
        let last = self.cell + 1 == self.cells;
        c[..HEADER_LEN].copy_from_slice(if last { &self.end } else { &self.mid });
        let p = &mut c[HEADER_LEN..];
        let o = self.cell * PAYLOAD_LEN;
        if o < data.len() {
            let k = (data.len() - o).min(PAYLOAD_LEN);
            p[..k].copy_from_slice(&data[o..o + k]);
        }
        if last {
            p[TRAILER_AT..].copy_from_slice(&self.trailer);
        }
        self.left -= 1;
        self.cell += 1;
        let frame_end = self.left == 0;
        if last && !frame_end {
            self.begin_tframe(self.tframe + 1, pic);
        }
        Some(SegCell {
            cell: c,
            tframe_end: last,
            frame_end,
        })
    }
}

/// A whole frame's cells at once (for tests and tools; the camera cuts as
/// it sends).
pub fn segment_frame(
    layout: Layout,
    frame: u32,
    pic: &Picture,
    vc: VcId,
    format: Format,
    out: &mut Vec<CellBytes>,
) -> bool {
    let Some(mut s) = Segmenter::new(vc, format) else {
        return false;
    };
    if !s.start(layout, frame, pic) {
        return false;
    }
    out.reserve(s.remaining());
    while let Some(c) = s.next_cell(pic) {
        out.push(c.cell);
    }
    true
}

/// Why a t-frame was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loss {
    /// The end cell came before the trailer's length was reached: cells
    /// lost inside the t-frame.
    Short,
    /// Cells ahead of a good t-frame that were not part of it: a t-frame
    /// that lost its end cell.
    EndMissing,
    /// The right length, but the checksum fails.
    Checksum,
    /// The checksum holds, but the trailer does not fit the layout (line
    /// bytes, first line, line count).
    Trailer,
    /// A good t-frame from a place in the sequence already passed.
    Stale,
    /// The unit outgrew the reassembly buffer.
    Overflow,
    /// The unit got no new cell for the timeout.
    Timeout,
    /// Never seen at all: a gap in the sequence of good t-frames.
    Missing,
    /// A good t-frame whose frame number is more than [`FRAME_WINDOW`]
    /// ahead of or behind the last: not believed (a checksum collision or
    /// a forged t-frame would otherwise make every later t-frame stale)
    /// until [`RESYNC`] in a row agree.
    FarOff,
}

/// How far ahead of (or behind) the last good t-frame's a frame number is
/// believed.
pub const FRAME_WINDOW: u32 = 1 << 12;
/// Good t-frames in a row, all out of the window and in order among
/// themselves, that move the receiver there (a camera that restarted its
/// count, a receiver that was away a long time).
pub const RESYNC: u32 = 3;

impl Loss {
    /// How many reasons there are.
    pub const COUNT: usize = 9;
    /// Every reason, in the order of [`RxStats::lost`].
    pub const ALL: [Loss; Loss::COUNT] = [
        Loss::Short,
        Loss::EndMissing,
        Loss::Checksum,
        Loss::Trailer,
        Loss::Stale,
        Loss::Overflow,
        Loss::Timeout,
        Loss::Missing,
        Loss::FarOff,
    ];

    /// A short snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Loss::Short => "tframe_short",
            Loss::EndMissing => "tframe_end_missing",
            Loss::Checksum => "tframe_checksum",
            Loss::Trailer => "tframe_bad_trailer",
            Loss::Stale => "tframe_stale",
            Loss::Overflow => "tframe_overflow",
            Loss::Timeout => "tframe_timeout",
            Loss::Missing => "tframe_missing",
            Loss::FarOff => "tframe_out_of_window",
        }
    }
}

/// What a receiver counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Cells pushed.
    pub cells: u64,
    /// Cells that were not user data (OAM, RM), ignored.
    pub cells_not_user: u64,
    /// User cells that ended a unit (the PTI end bit): one per t-frame
    /// sent whose end cell arrived, whatever became of the t-frame.
    pub ends: u64,
    /// T-frames delivered into a frame.
    pub tframes_delivered: u64,
    /// T-frames lost, by [`Loss`] (in the order of [`Loss::ALL`]).
    pub lost: [u64; Loss::COUNT],
    /// Failed units that the sequence showed were not whole t-frames of
    /// their own (several faults close together).
    pub surplus: u64,
    /// Frames delivered with every t-frame.
    pub frames_complete: u64,
    /// Frames delivered with t-frames missing.
    pub frames_incomplete: u64,
}

impl RxStats {
    /// T-frames lost for one reason.
    pub fn lost(&self, r: Loss) -> u64 {
        self.lost[r as usize]
    }

    /// T-frames lost in all: every reason, less the surplus.
    pub fn tframes_lost(&self) -> u64 {
        self.lost.iter().sum::<u64>().saturating_sub(self.surplus)
    }
}

/// A frame the receiver delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    /// Its number.
    pub frame: u32,
    /// Every t-frame arrived.
    pub complete: bool,
    /// T-frames that arrived.
    pub tframes: usize,
    /// Scan lines that did not arrive (they hold older pixels).
    pub lines_missing: usize,
    /// When it was delivered.
    pub at: Instant,
}

/// A receiver's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxConfig {
    /// A unit with no new cell for this long is dropped.
    pub timeout: Duration,
}

impl Default for RxConfig {
    fn default() -> Self {
        RxConfig {
            timeout: Duration::from_millis(50),
        }
    }
}

/// Rebuilds the frames of one VC (see the [module](self) documentation).
#[derive(Debug)]
pub struct Reassembler {
    layout: Layout,
    config: RxConfig,
    /// The unit so far: whole cell payloads.
    buf: Vec<u8>,
    limit: usize,
    last_cell: Instant,
    work: Picture,
    work_frame: Option<u32>,
    got: Vec<bool>,
    got_count: usize,
    done: Picture,
    done_info: Option<FrameInfo>,
    /// (frame, t-frame index) of the last good t-frame, or of a frame's
    /// last place once the frame was closed.
    last_good: Option<(u32, usize)>,
    /// Failed units since `last_good`, not yet set against a gap.
    pending: u64,
    /// Good t-frames far ahead in a row: the last one's place and how
    /// many.
    far: Option<(u32, usize, u32)>,
    stats: RxStats,
}

impl Reassembler {
    /// A receiver for frames cut by `layout`.
    pub fn new(layout: Layout, config: RxConfig) -> Reassembler {
        Reassembler {
            layout,
            config,
            buf: Vec::new(),
            limit: 2 * layout.max_tframe_cells() * PAYLOAD_LEN,
            last_cell: Instant::ZERO,
            work: Picture::new(layout.size, layout.format),
            work_frame: None,
            got: vec![false; layout.tframes()],
            got_count: 0,
            done: Picture::new(layout.size, layout.format),
            done_info: None,
            last_good: None,
            pending: 0,
            far: None,
            stats: RxStats::default(),
        }
    }

    /// The layout it expects.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// What it counted.
    pub fn stats(&self) -> RxStats {
        self.stats
    }

    /// T-frames begun and not yet finished (0 or 1).
    pub fn in_progress(&self) -> u64 {
        u64::from(!self.buf.is_empty())
    }

    /// Bytes held for the unit in progress (at most twice the largest
    /// t-frame).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The most bytes the unit buffer holds.
    pub fn buffer_limit(&self) -> usize {
        self.limit
    }

    /// The last frame delivered, if any.
    pub fn last_frame(&self) -> Option<(&FrameInfo, &Picture)> {
        self.done_info.as_ref().map(|i| (i, &self.done))
    }

    /// The frame being assembled, if a t-frame of it has arrived.
    pub fn assembling(&self) -> Option<u32> {
        self.work_frame
    }

    /// When [`Reassembler::poll`] next has something to do.
    pub fn poll_at(&self) -> Option<Instant> {
        (!self.buf.is_empty()).then(|| self.last_cell + self.config.timeout)
    }

    /// Drops a unit that has waited past the timeout.
    pub fn poll(&mut self, now: Instant) {
        if !self.buf.is_empty() && now >= self.last_cell + self.config.timeout {
            self.buf.clear();
            self.lose(Loss::Timeout);
        }
    }

    fn lose(&mut self, r: Loss) {
        self.stats.lost[r as usize] += 1;
        if r != Loss::Stale {
            self.pending += 1;
        }
    }

    /// Sets the failed units since the last good t-frame against the
    /// `gap` t-frames the sequence shows were lost between. Each failed
    /// unit holds the place of at least one lost end cell of its own, so
    /// there are never more of them than t-frames lost; across frames
    /// (`exact` false) more of them than the gap are t-frames of frames
    /// that lost every t-frame, which the positions cannot show.
    fn reconcile(&mut self, gap: u64, exact: bool) {
        if gap >= self.pending {
            self.stats.lost[Loss::Missing as usize] += gap - self.pending;
        } else if exact {
            self.stats.surplus += self.pending - gap;
        }
        self.pending = 0;
    }

    /// One cell of the VC, arriving at `now`. `on_frame` sees each frame
    /// delivered (a cell can finish two: one cut short by a t-frame of the
    /// next, and that next one).
    pub fn push(
        &mut self,
        now: Instant,
        cell: &CellBytes,
        on_frame: &mut dyn FnMut(&FrameInfo, &Picture),
    ) {
        self.stats.cells += 1;
        let pti = Pti::from_bits(cell[3] >> 1);
        if !pti.is_user() {
            self.stats.cells_not_user += 1;
            return;
        }
        if self.buf.len() + PAYLOAD_LEN > self.limit {
            self.buf.clear();
            self.lose(Loss::Overflow);
        }
        self.last_cell = now;
        self.buf.extend_from_slice(&cell[HEADER_LEN..]);
        if pti.is_end_of_pdu() {
            self.stats.ends += 1;
            self.end_of_unit(now, on_frame);
            self.buf.clear();
        }
    }

    /// Checks the unit just ended (see the [module](self) documentation).
    fn end_of_unit(&mut self, now: Instant, on_frame: &mut dyn FnMut(&FrameInfo, &Picture)) {
        let have = self.buf.len() / PAYLOAD_LEN;
        let tb: &[u8; TRAILER_LEN] = self.buf[self.buf.len() - TRAILER_LEN..]
            .try_into()
            .expect("a unit holds at least one whole cell");
        let t = Trailer::parse(tb);
        let need = cells_for(t.data_len());
        if need > have {
            self.lose(Loss::Short);
            return;
        }
        let tail = (have - need) * PAYLOAD_LEN;
        match self.verify(&t, tail) {
            Ok(idx) => {
                if need < have {
                    self.lose(Loss::EndMissing);
                }
                self.place(now, &t, idx, tail, on_frame);
            }
            Err(r) => self.lose(r),
        }
    }

    /// Whether `buf[tail..]` is a good t-frame with trailer `t`: its index
    /// in the frame if so.
    fn verify(&self, t: &Trailer, tail: usize) -> Result<usize, Loss> {
        if ones_sum(&self.buf[tail..]) != 0xFFFF {
            return Err(Loss::Checksum);
        }
        let l = &self.layout;
        let first = usize::from(t.first_line);
        let idx = first / l.lines_per_tframe();
        let fits = usize::from(t.line_bytes) == l.line_bytes()
            && first % l.lines_per_tframe() == 0
            && idx < l.tframes()
            && usize::from(t.lines) == l.tframe_lines(idx);
        if fits {
            Ok(idx)
        } else {
            Err(Loss::Trailer)
        }
    }

    /// Puts good t-frame `idx` of frame `t.frame` (its bytes from `tail`)
    /// in its frame, after accounting for what the sequence shows lost.
    fn place(
        &mut self,
        now: Instant,
        t: &Trailer,
        idx: usize,
        tail: usize,
        on_frame: &mut dyn FnMut(&FrameInfo, &Picture),
    ) {
        let n = self.layout.tframes();
        if let Some((f, _)) = self.last_good {
            let ahead = t.frame.wrapping_sub(f);
            if ahead > FRAME_WINDOW && ahead <= u32::MAX - FRAME_WINDOW {
                let run = match self.far {
                    Some((g, j, k)) => {
                        let d = t.frame.wrapping_sub(g);
                        if (d == 0 && idx > j) || (d > 0 && d <= FRAME_WINDOW) {
                            k + 1
                        } else {
                            1
                        }
                    }
                    None => 1,
                };
                if run < RESYNC {
                    self.far = Some((t.frame, idx, run));
                    self.lose(Loss::FarOff);
                    return;
                }
                // Enough agree: start again from here.
                self.last_good = None;
            }
        }
        self.far = None;
        let (gap, exact) = match self.last_good {
            None => (idx as u64, false),
            Some((f, i)) if (t.frame, idx) <= (f, i) => {
                self.stats.lost[Loss::Stale as usize] += 1;
                return;
            }
            Some((f, i)) if t.frame == f => ((idx - i - 1) as u64, true),
            Some((_, i)) => ((n - 1 - i + idx) as u64, false),
        };
        self.reconcile(gap, exact);
        self.last_good = Some((t.frame, idx));
        if self.work_frame.is_some_and(|f| f != t.frame) {
            self.deliver(now, on_frame);
        }
        if self.work_frame.is_none() {
            self.work_frame = Some(t.frame);
            self.got.iter_mut().for_each(|g| *g = false);
            self.got_count = 0;
        }
        let data = &self.buf[tail..tail + t.data_len()];
        if let Some(dst) = self
            .work
            .lines_mut(usize::from(t.first_line), usize::from(t.lines))
        {
            dst.copy_from_slice(data);
        }
        if !self.got[idx] {
            self.got[idx] = true;
            self.got_count += 1;
        }
        self.stats.tframes_delivered += 1;
        if idx == n - 1 {
            self.deliver(now, on_frame);
        }
    }

    /// Delivers the frame being assembled, whole or not.
    fn deliver(&mut self, now: Instant, on_frame: &mut dyn FnMut(&FrameInfo, &Picture)) {
        let Some(frame) = self.work_frame.take() else {
            return;
        };
        let complete = self.got_count == self.layout.tframes();
        let lines_missing = (0..self.layout.tframes())
            .filter(|&i| !self.got[i])
            .map(|i| self.layout.tframe_lines(i))
            .sum();
        if complete {
            self.stats.frames_complete += 1;
        } else {
            self.stats.frames_incomplete += 1;
        }
        std::mem::swap(&mut self.work, &mut self.done);
        let info = FrameInfo {
            frame,
            complete,
            tframes: self.got_count,
            lines_missing,
            at: now,
        };
        self.done_info = Some(info);
        on_frame(&info, &self.done);
    }

    /// Gives up on the frame in progress: drops a unit in progress
    /// ([`Loss::Timeout`]), counts the t-frames of the frame still to come
    /// as lost, and delivers the frame as it is. If no t-frame of a frame
    /// arrived good but failed units did, they are taken as one whole
    /// frame's t-frames.
    pub fn close_frame(&mut self, now: Instant, on_frame: &mut dyn FnMut(&FrameInfo, &Picture)) {
        if !self.buf.is_empty() {
            self.buf.clear();
            self.lose(Loss::Timeout);
        }
        let n = self.layout.tframes();
        match (self.work_frame, self.last_good) {
            (Some(f), Some((g, i))) if f == g => {
                // Failed units past the gap belong to a frame after this
                // one; they wait for its first good t-frame.
                let gap = (n - 1 - i) as u64;
                let keep = self.pending.saturating_sub(gap);
                self.pending -= keep;
                self.reconcile(gap, true);
                self.pending = keep;
                self.last_good = Some((f, n - 1));
                self.deliver(now, on_frame);
            }
            _ if self.pending > 0 => self.reconcile(n as u64, false),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Source, SyntheticSource};
    use proptest::prelude::*;

    const VC: VcId = VcId::new(0, 100);

    fn frames(
        layout: Layout,
        numbers: &[u32],
        src: &SyntheticSource,
    ) -> (Vec<CellBytes>, Vec<Picture>) {
        let mut cells = Vec::new();
        let mut pics = Vec::new();
        for &n in numbers {
            let mut p = Picture::new(layout.size(), layout.format());
            src.render(n.into(), &mut p);
            assert!(segment_frame(layout, n, &p, VC, Format::Uni, &mut cells));
            pics.push(p);
        }
        (cells, pics)
    }

    fn run(r: &mut Reassembler, cells: &[CellBytes]) -> Vec<(FrameInfo, Picture)> {
        let mut got = Vec::new();
        for c in cells {
            r.push(Instant::ZERO, c, &mut |i, p| got.push((*i, p.clone())));
        }
        got
    }

    #[test]
    fn a_single_mono_line_takes_14_cells_and_the_trailer_ends_the_last() {
        let l = Layout::new(PictureSize::Full, PixelFormat::Mono8, 1).unwrap();
        assert_eq!(
            (l.tframes(), l.tframe_cells(0), l.frame_cells()),
            (480, 14, 480 * 14)
        );
        let l = Layout::new(PictureSize::Full, PixelFormat::Mono8, 16).unwrap();
        assert_eq!((l.tframes(), l.tframe_cells(0)), (30, 214));
        let l = Layout::new(PictureSize::Quarter, PixelFormat::Yuyv, 50).unwrap();
        // 50 + 50 + 20 lines of 320 bytes.
        assert_eq!(
            (l.tframes(), l.tframe_lines(2), l.tframe_lines(3)),
            (3, 20, 0)
        );
        assert_eq!(l.frame_cells(), 2 * cells_for(16000) + cells_for(6400));
        assert!(Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 121).is_none());
        assert!(Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 0).is_none());
    }

    #[test]
    fn trailer_and_checksum_known_answer() {
        // A 160×120 mono picture whose line 3 is bytes 0..160 and LT 1:
        // t-frame 3 is 160 line bytes, 20 pad, 12 trailer = 4 cells.
        let mut p = Picture::new(PictureSize::Quarter, PixelFormat::Mono8);
        for (i, b) in p.lines_mut(3, 1).unwrap().iter_mut().enumerate() {
            *b = i as u8;
        }
        let l = Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 1).unwrap();
        let mut cells = Vec::new();
        assert!(segment_frame(
            l,
            0x0A0B0C0D,
            &p,
            VC,
            Format::Uni,
            &mut cells
        ));
        let t3 = &cells[12..16];
        assert_eq!(t3[3][3] & 0x02, 0x02, "end of unit");
        assert!(t3[..3].iter().all(|c| c[3] & 0x02 == 0));
        assert_eq!(&t3[0][5..53], &(0u8..48).collect::<Vec<_>>()[..]);
        assert_eq!(&t3[3][5..21], &(144u8..160).collect::<Vec<_>>()[..]);
        assert_eq!(&t3[3][21..41], &[0u8; 20]);
        // The line is the 80 big-endian words 0x0001, 0x0203, ..., 0x9E9F:
        // Σ (2k·256 + 2k + 1) for k = 0..80 = 512·3160 + 6400 = 0x18C900,
        // folded 0xC918; the trailer adds 0x0A0B + 0x0C0D + 0x0003 +
        // 0x0001 + 0x00A0, and the checksum is the complement.
        let trailer = [0x0A, 0x0B, 0x0C, 0x0D, 0x00, 0x03, 0x00, 0x01, 0x00, 0xA0];
        assert_eq!(&t3[3][41..51], &trailer);
        let sum = [0xC918u32, 0x0A0B, 0x0C0D, 0x0003, 0x0001, 0x00A0]
            .iter()
            .sum::<u32>();
        let folded = ((sum & 0xFFFF) + (sum >> 16)) as u16;
        assert_eq!(u16::from_be_bytes([t3[3][51], t3[3][52]]), !folded);
        assert_eq!(!folded, 0x202B);
    }

    #[test]
    fn frames_round_trip_whole() {
        let src = SyntheticSource::new(9);
        for (size, format, lt) in [
            (PictureSize::Full, PixelFormat::Mono8, 16),
            (PictureSize::Half, PixelFormat::Yuyv, 7),
            (PictureSize::Quarter, PixelFormat::Mono8, 120),
        ] {
            let l = Layout::new(size, format, lt).unwrap();
            let (cells, pics) = frames(l, &[3, 4, 9], &src);
            let mut r = Reassembler::new(l, RxConfig::default());
            let got = run(&mut r, &cells);
            assert_eq!(got.len(), 3);
            for ((info, pic), (want, n)) in got.iter().zip(pics.iter().zip([3, 4, 9])) {
                assert_eq!(
                    (info.frame, info.complete, info.lines_missing),
                    (n, true, 0)
                );
                assert!(pic == want, "{size} {format} frame {n}");
            }
            let s = r.stats();
            assert_eq!(s.tframes_delivered, 3 * l.tframes() as u64);
            assert_eq!(
                (s.tframes_lost(), s.frames_complete, r.in_progress()),
                (0, 3, 0)
            );
        }
    }

    #[test]
    fn one_tframe_from_far_ahead_does_not_lock_the_receiver_out() {
        let src = SyntheticSource::new(2);
        let l = Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 40).unwrap();
        // Frame 1, then one good t-frame claiming frame 3,000,000 (forged,
        // or a checksum collision), then frames 2 and 3.
        let (mut cells, _) = frames(l, &[1], &src);
        let (wild, _) = frames(l, &[3_000_000], &src);
        cells.extend_from_slice(&wild[..l.tframe_cells(0)]);
        let (rest, pics) = frames(l, &[2, 3], &src);
        cells.extend(rest);
        let mut r = Reassembler::new(l, RxConfig::default());
        let got = run(&mut r, &cells);
        let whole: Vec<u32> = got
            .iter()
            .filter(|g| g.0.complete)
            .map(|g| g.0.frame)
            .collect();
        assert_eq!(
            whole,
            [1, 2, 3],
            "{:?}",
            got.iter().map(|g| g.0).collect::<Vec<_>>()
        );
        assert_eq!(got.len(), 3);
        assert!(got[1].1 == pics[0] && got[2].1 == pics[1]);
        assert_eq!(r.stats().lost(Loss::FarOff), 1);
        assert_eq!(r.stats().lost(Loss::Stale), 0);
    }

    #[test]
    fn a_camera_that_jumps_far_ahead_is_followed_after_a_few_tframes() {
        let src = SyntheticSource::new(2);
        let l = Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 40).unwrap();
        let (mut cells, _) = frames(l, &[1], &src);
        let (rest, _) = frames(l, &[3_000_000, 3_000_001], &src);
        cells.extend(rest);
        let mut r = Reassembler::new(l, RxConfig::default());
        let got = run(&mut r, &cells);
        // RESYNC t-frames of the first far frame are lost; the next frame
        // comes whole.
        assert_eq!(r.stats().lost(Loss::FarOff), u64::from(RESYNC) - 1);
        let last = got.last().unwrap();
        assert_eq!((last.0.frame, last.0.complete), (3_000_001, true));
    }

    #[test]
    fn a_camera_whose_count_restarts_is_followed_after_a_few_tframes() {
        let src = SyntheticSource::new(2);
        let l = Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 40).unwrap();
        let (mut cells, _) = frames(l, &[900_000], &src);
        let (rest, _) = frames(l, &[1, 2], &src);
        cells.extend(rest);
        let mut r = Reassembler::new(l, RxConfig::default());
        let got = run(&mut r, &cells);
        assert_eq!(r.stats().lost(Loss::FarOff), u64::from(RESYNC) - 1);
        let last = got.last().unwrap();
        assert_eq!((last.0.frame, last.0.complete), (2, true));
    }

    #[test]
    fn a_flipped_bit_costs_its_tframe_as_a_checksum_loss() {
        let src = SyntheticSource::new(1);
        let l = Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 8).unwrap();
        let (mut cells, _) = frames(l, &[1], &src);
        cells[40][20] ^= 0x10;
        let mut r = Reassembler::new(l, RxConfig::default());
        let got = run(&mut r, &cells);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0.complete, got[0].0.lines_missing), (false, 8));
        let s = r.stats();
        assert_eq!((s.lost(Loss::Checksum), s.tframes_lost()), (1, 1));
        assert_eq!(s.tframes_delivered, l.tframes() as u64 - 1);
    }

    #[test]
    fn a_unit_left_hanging_times_out_and_memory_stays_bounded() {
        let l = Layout::new(PictureSize::Quarter, PixelFormat::Mono8, 4).unwrap();
        let mut r = Reassembler::new(l, RxConfig::default());
        let mid = {
            let mut c = [0u8; 53];
            Header::data(VC).emit(&mut c).unwrap();
            c
        };
        for _ in 0..1000 {
            r.push(Instant::ZERO, &mid, &mut |_, _| {});
            assert!(r.buffered() <= r.buffer_limit());
        }
        assert!(r.stats().lost(Loss::Overflow) > 0);
        let at = r.poll_at().unwrap();
        r.poll(at);
        assert_eq!((r.stats().lost(Loss::Timeout), r.in_progress()), (1, 0));
        assert_eq!(r.poll_at(), None);
    }

    /// Runs `cells` less cell `drop` through a reassembler, closing the
    /// last frame at the end.
    fn with_one_lost(
        l: Layout,
        cells: &[CellBytes],
        drop: usize,
    ) -> (Reassembler, Vec<(FrameInfo, Picture)>) {
        let mut r = Reassembler::new(l, RxConfig::default());
        let mut got = Vec::new();
        for (i, c) in cells.iter().enumerate() {
            if i != drop {
                r.push(Instant::ZERO, c, &mut |f, p| got.push((*f, p.clone())));
            }
        }
        r.close_frame(Instant::ZERO, &mut |f, p| got.push((*f, p.clone())));
        (r, got)
    }

    #[test]
    fn every_single_cell_lost_in_turn_costs_one_tframe() {
        // Every cell of three frames, end cells and frame boundaries
        // included, dropped in turn.
        let src = SyntheticSource::new(4);
        for (size, lt) in [
            (PictureSize::Quarter, 1),
            (PictureSize::Quarter, 40),
            (PictureSize::Quarter, 120),
        ] {
            let l = Layout::new(size, PixelFormat::Mono8, lt).unwrap();
            let (cells, _) = frames(l, &[1, 2, 7], &src);
            let sent = 3 * l.tframes() as u64;
            for drop in 0..cells.len() {
                let (r, got) = with_one_lost(l, &cells, drop);
                let s = r.stats();
                assert_eq!(
                    (s.tframes_lost(), s.surplus, s.tframes_delivered),
                    (1, 0, sent - 1),
                    "LT {lt}, cell {drop}: {s:?}"
                );
                if l.tframes() > 1 {
                    assert_eq!(got.len(), 3, "LT {lt}, cell {drop}");
                    assert_eq!(got.iter().filter(|(f, _)| !f.complete).count(), 1);
                } else {
                    // A frame of one t-frame is lost with it.
                    assert_eq!(got.len(), 2, "LT {lt}, cell {drop}");
                    assert!(got.iter().all(|(f, _)| f.complete));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn segment_then_reassemble_is_the_identity(
            size in 0u8..3, format in 0u8..2, lt in 1u16..=480, seed: u64, first in 0u32..1000, n in 1usize..4,
        ) {
            let size = PictureSize::from_code(size).unwrap();
            let lt = 1 + (lt - 1) % size.height() as u16;
            let l = Layout::new(size, PixelFormat::from_code(format).unwrap(), lt).unwrap();
            let numbers: Vec<u32> = (0..n as u32).map(|k| first + 2 * k).collect();
            let (cells, pics) = frames(l, &numbers, &SyntheticSource::new(seed));
            prop_assert_eq!(cells.len(), n * l.frame_cells());
            let mut r = Reassembler::new(l, RxConfig::default());
            let got = run(&mut r, &cells);
            prop_assert_eq!(got.len(), n);
            for ((info, pic), want) in got.iter().zip(&pics) {
                prop_assert!(info.complete);
                prop_assert!(pic == want);
            }
            prop_assert_eq!(r.stats().tframes_delivered, (n * l.tframes()) as u64);
            prop_assert_eq!(r.stats().tframes_lost(), 0);
        }

        #[test]
        fn a_lost_cell_costs_exactly_one_tframe(
            size in 1u8..3, format in 0u8..2, lt in 1u16..=240, seed: u64, pick: u64,
        ) {
            let size = PictureSize::from_code(size).unwrap();
            let lt = 1 + (lt - 1) % size.height() as u16;
            let l = Layout::new(size, PixelFormat::from_code(format).unwrap(), lt).unwrap();
            let src = SyntheticSource::new(seed);
            let (cells, pics) = frames(l, &[5, 6, 8], &src);
            let drop = (pick % cells.len() as u64) as usize;
            let (r, got) = with_one_lost(l, &cells, drop);
            let s = r.stats();
            let sent = 3 * l.tframes() as u64;
            prop_assert_eq!(s.tframes_lost(), 1, "{:?}", s);
            prop_assert_eq!(s.surplus, 0);
            prop_assert_eq!(s.tframes_delivered, sent - 1);
            prop_assert_eq!(s.tframes_delivered + s.tframes_lost() + r.in_progress(), sent);
            // The frame that lost it lacks exactly that t-frame's lines;
            // the others are whole and exact.
            let hit = drop / l.frame_cells();
            let idx = {
                let mut k = drop % l.frame_cells();
                let mut i = 0;
                while k >= l.tframe_cells(i) {
                    k -= l.tframe_cells(i);
                    i += 1;
                }
                i
            };
            if l.tframes() == 1 {
                // A frame of one t-frame is lost with it; the others are
                // whole.
                prop_assert_eq!(got.len(), 2);
                for (info, pic) in &got {
                    let j = [5, 6, 8].iter().position(|&n| n == info.frame).unwrap();
                    prop_assert!(j != hit && info.complete && pic == &pics[j]);
                }
                return Ok(());
            }
            prop_assert_eq!(got.len(), 3);
            for (j, ((info, pic), want)) in got.iter().zip(&pics).enumerate() {
                if j == hit {
                    prop_assert!(!info.complete);
                    prop_assert_eq!(info.lines_missing, l.tframe_lines(idx));
                    let first = idx * l.lines_per_tframe();
                    let n = l.tframe_lines(idx);
                    prop_assert_eq!(pic.lines(0, first), want.lines(0, first));
                    let rest = l.size().height() - first - n;
                    prop_assert_eq!(pic.lines(first + n, rest), want.lines(first + n, rest));
                } else {
                    prop_assert!(info.complete);
                    prop_assert!(pic == want);
                }
            }
        }

        #[test]
        fn the_books_balance_under_scattered_losses(
            lt in 1u16..=120, seed: u64,
            drops in proptest::collection::btree_set(0usize..1500, 0..30),
        ) {
            let l = Layout::new(PictureSize::Quarter, PixelFormat::Yuyv, lt).unwrap();
            let (cells, _) = frames(l, &[10, 11, 12], &SyntheticSource::new(seed));
            let mut r = Reassembler::new(l, RxConfig::default());
            let mut got = 0;
            for (i, c) in cells.iter().enumerate() {
                if !drops.contains(&i) {
                    r.push(Instant::ZERO, c, &mut |_, _| got += 1);
                }
            }
            r.close_frame(Instant::ZERO, &mut |_, _| got += 1);
            let s = r.stats();
            prop_assert_eq!(r.in_progress(), 0);
            prop_assert!(s.tframes_delivered + s.tframes_lost() <= 3 * l.tframes() as u64);
            if got == 3 {
                // Every frame left a good t-frame: the sequence shows
                // every loss.
                prop_assert_eq!(s.tframes_delivered + s.tframes_lost(), 3 * l.tframes() as u64, "{:?}", s);
            }
        }

        #[test]
        fn any_cells_never_panic_and_stay_bounded(
            lt in 1u16..=120,
            cells in proptest::collection::vec((any::<u8>(), proptest::collection::vec(any::<u8>(), 48)), 0..400),
        ) {
            let l = Layout::new(PictureSize::Quarter, PixelFormat::Mono8, lt).unwrap();
            let mut r = Reassembler::new(l, RxConfig::default());
            for (i, (ctl, payload)) in cells.iter().enumerate() {
                let mut c = [0u8; 53];
                Header::data(VC).emit(&mut c).unwrap();
                c[3] = (c[3] & 0xF0) | (ctl & 0x0F);
                c[5..].copy_from_slice(payload);
                r.push(Instant::from_micros(i as i64), &c, &mut |_, _| {});
                prop_assert!(r.buffered() <= r.buffer_limit());
                if ctl & 0xF0 == 0xF0 {
                    r.close_frame(Instant::from_micros(i as i64), &mut |_, _| {});
                }
            }
        }
    }
}
