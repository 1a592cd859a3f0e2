//! What the camera looks at: a [`Source`] renders frame `n` of its
//! sequence into a [`Picture`] of any size and format it supports.
//!
//! Sources are pure functions of the frame number: rendering frame `n`
//! twice gives the same picture. The camera relies on it to render a frame
//! only when it starts to send it (see [`crate::vidboard`]), and a test
//! relies on it to check a delivered frame pixel for pixel.
//!
//! * [`SyntheticSource`]: moving content and the frame counter drawn into
//!   the picture, deterministic from a seed; any size, either format.
//! * [`Y4mSource`]: a YUV4MPEG2 file, loaded whole (at most
//!   [`MAX_Y4M_BYTES`]) and played in a loop, scaled down by a whole
//!   factor to the sizes that divide it.
//!
//! **The frame counter.** A synthetic frame carries its number (the low
//! 32 bits) twice: in scan line 0, as 40 equal slots (32 bits of the
//! counter, most significant first, then a check byte, the XOR of the
//! counter's four bytes and 0x5A), each slot luma 235 for a one and 16
//! for a zero ([`read_counter`] reads it back); and as decimal digits
//! drawn near the top left corner, for a person looking at a snapshot.

use core::fmt;
use std::io::Read;
use std::path::Path;

use aurora_time::Duration;

use crate::frame::{Picture, PictureSize, PixelFormat};

/// Something the camera captures frames from.
pub trait Source: Send + fmt::Debug {
    /// Time between frames.
    fn period(&self) -> Duration;
    /// Whether the source can render pictures of `size`.
    fn supports(&self, size: PictureSize) -> bool;
    /// Renders frame `frame` into `pic`, at the picture's size and in its
    /// format. False (and `pic` left as it was) when the source does not
    /// support the size.
    fn render(&self, frame: u64, pic: &mut Picture) -> bool;
}

/// A camera's frame time at 30 frames a second.
pub const PERIOD_30FPS: Duration = Duration::from_nanos(33_333_333);

/// Slots in scan line 0 that carry the counter (32) and its check byte (8).
pub const COUNTER_SLOTS: usize = 40;
/// Luma of a one in the counter line and of the drawn digits.
const BRIGHT: u8 = 235;
/// Luma of a zero in the counter line and of the digits' backing.
const DARK: u8 = 16;
/// Side of the moving square, in 640×480 pixels.
const BOX: usize = 120;
/// Where the digits start, in 640×480 pixels.
const DIGITS_X: usize = 8;
const DIGITS_Y: usize = 8;
/// 640×480 pixels per dot of the digits' font.
const DOT: usize = 4;

/// The digits 0-9 in a 3×5 font: bit 14 is the top left dot, rows top to
/// bottom, three bits a row.
const FONT: [u16; 10] = [
    0b111_101_101_101_111,
    0b010_110_010_010_111,
    0b111_001_111_100_111,
    0b111_001_111_001_111,
    0b101_101_111_001_001,
    0b111_100_111_001_111,
    0b111_100_111_101_111,
    0b111_001_010_010_010,
    0b111_101_111_101_111,
    0b111_101_111_001_111,
];

/// SplitMix64 step: well-spread numbers from a seed.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A triangle wave: `t` bounces between 0 and `m`.
fn tri(t: u64, m: usize) -> usize {
    let m = m.max(1) as u64;
    let t = t % (2 * m);
    (if t > m { 2 * m - t } else { t }) as usize
}

/// The check byte of counter `c`.
fn check_byte(c: u32) -> u8 {
    let b = c.to_be_bytes();
    b[0] ^ b[1] ^ b[2] ^ b[3] ^ 0x5A
}

/// The counter in scan line 0 of `pic` (see the [module](self)
/// documentation), if the line holds one whose check byte agrees.
pub fn read_counter(pic: &Picture) -> Option<u32> {
    let slot = pic.width() / COUNTER_SLOTS;
    let mut bits: u64 = 0;
    for i in 0..COUNTER_SLOTS {
        let y = pic.luma(i * slot + slot / 2, 0)?;
        bits = (bits << 1) | u64::from(y >= 128);
    }
    let c = (bits >> 8) as u32;
    (check_byte(c) == bits as u8).then_some(c)
}

/// A source of moving test pictures: diagonal bands drifting, a square
/// bouncing, the frame counter in line 0 and in digits. Deterministic from
/// its seed and the frame number; renders 640×480 in well under a
/// millisecond.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntheticSource {
    seed: u64,
    period: Duration,
}

impl SyntheticSource {
    /// A source at 30 frames a second.
    pub fn new(seed: u64) -> SyntheticSource {
        SyntheticSource {
            seed,
            period: PERIOD_30FPS,
        }
    }

    /// The same source at another frame time (at least 1 ns).
    pub fn with_period(mut self, period: Duration) -> SyntheticSource {
        self.period = period.max(Duration::from_nanos(1));
        self
    }

    /// The source's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Frame `frame` as a new picture.
    pub fn picture(&self, frame: u64, size: PictureSize, format: PixelFormat) -> Picture {
        let mut p = Picture::new(size, format);
        self.render(frame, &mut p);
        p
    }

    /// One scan line's luma, in scene coordinates (640×480) at `sy`.
    #[allow(clippy::too_many_arguments)]
    fn luma_row(
        &self,
        row: &mut [u8],
        s: usize,
        sy: usize,
        phase: usize,
        bx: usize,
        by: usize,
        digits: &[u8],
    ) {
        let w = row.len();
        // Bands: (sx + sy) / 4, drifting with the frame.
        let off = sy + 4 * phase;
        for (x, px) in row.iter_mut().enumerate() {
            *px = ((x * s + off) >> 2) as u8;
        }
        // The square, with a dark border.
        if (by..by + BOX).contains(&sy) {
            let (x0, x1) = (bx / s, ((bx + BOX) / s).min(w));
            let edge = sy < by + 4 || sy >= by + BOX - 4;
            for (i, px) in row[x0..x1].iter_mut().enumerate() {
                let sx = (x0 + i) * s;
                let border = edge || sx < bx + 4 || sx >= bx + BOX - 4;
                *px = if border { DARK } else { 0xE0 };
            }
        }
        // The digits on a dark backing.
        let top = DIGITS_Y - DOT;
        let bottom = DIGITS_Y + 5 * DOT + DOT;
        if (top..bottom).contains(&sy) {
            let x0 = (DIGITS_X - DOT) / s;
            let x1 = ((DIGITS_X + digits.len() * 4 * DOT) / s).min(w);
            row[x0..x1].fill(DARK);
            if (DIGITS_Y..DIGITS_Y + 5 * DOT).contains(&sy) {
                let fr = (sy - DIGITS_Y) / DOT;
                for (k, &d) in digits.iter().enumerate() {
                    let bits = FONT[usize::from(d)] >> (3 * (4 - fr));
                    for b in 0..3 {
                        if bits & (0b100 >> b) != 0 {
                            let sx = DIGITS_X + k * 4 * DOT + b * DOT;
                            let (a, z) = (sx / s, ((sx + DOT) / s).min(w));
                            // At 160×120 a dot is one pixel wide.
                            row[a..z.max(a + 1).min(w)].fill(BRIGHT);
                        }
                    }
                }
            }
        }
    }
}

impl Source for SyntheticSource {
    fn period(&self) -> Duration {
        self.period
    }

    fn supports(&self, _size: PictureSize) -> bool {
        true
    }

    fn render(&self, frame: u64, pic: &mut Picture) -> bool {
        let s = pic.size().divisor();
        let w = pic.width();
        let format = pic.format();
        let r = mix(self.seed);
        let phase = (frame.wrapping_mul(3).wrapping_add(r) & 0xFF) as usize;
        let bx = tri(frame.wrapping_mul(6).wrapping_add(r >> 16), 640 - BOX);
        let by = 32 + tri(frame.wrapping_mul(4).wrapping_add(r >> 32), 480 - 32 - BOX);
        let counter = frame as u32;
        let mut digits = [0u8; 10];
        let mut n = 0;
        let mut c = counter;
        loop {
            digits[n] = (c % 10) as u8;
            n += 1;
            c /= 10;
            if c == 0 {
                break;
            }
        }
        digits[..n].reverse();
        let bits = (u64::from(counter) << 8) | u64::from(check_byte(counter));
        let slot = w / COUNTER_SLOTS;
        let mut row = [0u8; 640];
        let row = &mut row[..w];
        let lb = pic.line_bytes();
        for (y, line) in pic.data_mut().chunks_exact_mut(lb).enumerate() {
            let sy = y * s;
            if y == 0 {
                for (x, px) in row.iter_mut().enumerate() {
                    let i = (x / slot).min(COUNTER_SLOTS - 1);
                    let one = (bits >> (COUNTER_SLOTS - 1 - i)) & 1 != 0;
                    *px = if one { BRIGHT } else { DARK };
                }
            } else {
                self.luma_row(row, s, sy, phase, bx, by, &digits[..n]);
            }
            match format {
                PixelFormat::Mono8 => line.copy_from_slice(row),
                PixelFormat::Yuyv => {
                    // Colour sweeps across (U) and drifts down (V); line 0
                    // is grey so the counter reads the same in both
                    // formats.
                    let v = if y == 0 {
                        128
                    } else {
                        let t = (sy + 2 * phase) % 480;
                        (128 + (t as i32 - 240) / 3) as u8
                    };
                    for (p, quad) in line.chunks_exact_mut(4).enumerate() {
                        let u = if y == 0 {
                            128
                        } else {
                            (128 + (2 * p * s) as i32 / 4 - 80) as u8
                        };
                        quad[0] = row[2 * p];
                        quad[1] = u;
                        quad[2] = row[2 * p + 1];
                        quad[3] = v;
                    }
                }
            }
        }
        true
    }
}

/// The most bytes a [`Y4mSource`] reads from a file.
pub const MAX_Y4M_BYTES: usize = 512 << 20;
/// The widest or tallest picture a [`Y4mSource`] accepts.
pub const MAX_Y4M_SIDE: usize = 8192;

/// Why a file source was refused; its [`Display`](fmt::Display) is one
/// sentence naming the file and the problem.
#[derive(Debug)]
pub struct SourceError {
    name: String,
    problem: Problem,
}

/// What was wrong with a file.
#[derive(Debug)]
#[non_exhaustive]
pub enum Problem {
    /// The file could not be read.
    Io(std::io::Error),
    /// The file is longer than [`MAX_Y4M_BYTES`].
    TooBig(u64),
    /// The file is not a YUV4MPEG2 stream, for the reason given.
    NotY4m(String),
    /// The samples are wider than 8 bits.
    Depth(usize),
    /// No picture size the camera sends divides the file's size by a whole
    /// factor.
    NoSize(usize, usize),
    /// The frame rate is not a usable number of frames a second.
    Rate(usize, usize),
    /// The file holds no frame.
    NoFrames,
    /// The file ends in the middle of frame `n` (counted from 0).
    Truncated(usize),
}

impl SourceError {
    fn new(name: &str, problem: Problem) -> SourceError {
        SourceError {
            name: name.to_owned(),
            problem,
        }
    }

    /// What was wrong.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = &self.name;
        match &self.problem {
            Problem::Io(e) => write!(f, "{n} cannot be read: {e}"),
            Problem::TooBig(len) => write!(
                f,
                "{n} is {len} bytes long, more than the {MAX_Y4M_BYTES} bytes a file source loads"
            ),
            Problem::NotY4m(why) => write!(f, "{n} is not a YUV4MPEG2 file: {why}"),
            Problem::Depth(bits) => write!(
                f,
                "{n} has {bits}-bit samples, and the file source reads 8-bit files only"
            ),
            Problem::NoSize(w, h) => write!(
                f,
                "{n} is {w}x{h}, and no picture size the camera sends (640x480, 320x240, 160x120) divides it by a whole factor"
            ),
            Problem::Rate(num, den) => write!(
                f,
                "{n} gives the frame rate {num}:{den}, which is not between 0.01 and 1000 frames a second"
            ),
            Problem::NoFrames => write!(f, "{n} holds no frames"),
            Problem::Truncated(k) => write!(f, "{n} ends in the middle of frame {k}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// How a file's colour planes are subsampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chroma {
    /// Luma only.
    Mono,
    /// Colour planes at (width >> x, height >> y), rounded up.
    Planes { x: u32, y: u32 },
}

/// A YUV4MPEG2 file, loaded whole, played in a loop: frame `n` is the
/// file's frame `n mod frames`. It renders the sizes that divide the
/// file's size by a whole factor (a 640×480 file gives all three sizes, a
/// 320×240 file the two smaller), luma averaged over each block, colour
/// taken from the block's corner. 8-bit files only: `Cmono`, `C420*`,
/// `C422` and `C444`.
pub struct Y4mSource {
    width: usize,
    height: usize,
    period: Duration,
    chroma: Chroma,
    /// Each frame's planes, one after another: Y, then U and V.
    frames: Vec<Vec<u8>>,
}

impl fmt::Debug for Y4mSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Y4mSource({}x{}, {} frames, {:?})",
            self.width,
            self.height,
            self.frames.len(),
            self.chroma
        )
    }
}

/// The header fields checked before the decoder sees the file (it
/// multiplies width by height unchecked).
fn precheck(name: &str, bytes: &[u8]) -> Result<(usize, usize, usize, usize), SourceError> {
    let not = |why: &str| SourceError::new(name, Problem::NotY4m(why.to_owned()));
    let line = bytes
        .iter()
        .take(1024)
        .position(|&b| b == b'\n')
        .map(|end| &bytes[..end])
        .ok_or_else(|| not("it has no header line"))?;
    let mut fields = line.split(|&b| b == b' ');
    if fields.next() != Some(&b"YUV4MPEG2"[..]) {
        return Err(not("it does not start with YUV4MPEG2"));
    }
    let num = |v: &[u8]| -> Option<usize> {
        if v.is_empty() || v.len() > 9 || !v.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(v).ok()?.parse().ok()
    };
    let (mut w, mut h, mut rate) = (None, None, (25, 1));
    for f in fields {
        let Some((&tag, v)) = f.split_first() else {
            continue;
        };
        match tag {
            b'W' => w = Some(num(v).ok_or_else(|| not("its width is not a number"))?),
            b'H' => h = Some(num(v).ok_or_else(|| not("its height is not a number"))?),
            b'F' => {
                let mut parts = v.splitn(2, |&b| b == b':');
                let (a, b) = (parts.next().and_then(num), parts.next().and_then(num));
                rate = a
                    .zip(b)
                    .ok_or_else(|| not("its frame rate is not two numbers"))?;
            }
            _ => {}
        }
    }
    let (w, h) = w
        .zip(h)
        .ok_or_else(|| not("its header gives no width or no height"))?;
    if w == 0 || h == 0 || w > MAX_Y4M_SIDE || h > MAX_Y4M_SIDE {
        return Err(not("its width or height is 0 or more than 8192"));
    }
    Ok((w, h, rate.0, rate.1))
}

/// A reader over bytes in memory that says how far it has read.
struct Counting<'a> {
    data: &'a [u8],
    pos: std::rc::Rc<std::cell::Cell<usize>>,
}

impl Read for Counting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let at = self.pos.get();
        let rest = self.data.get(at..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos.set(at + n);
        Ok(n)
    }
}

impl Y4mSource {
    /// Loads the file at `path`.
    pub fn open(path: &Path) -> Result<Y4mSource, SourceError> {
        let name = path.display().to_string();
        let mut f =
            std::fs::File::open(path).map_err(|e| SourceError::new(&name, Problem::Io(e)))?;
        let len = f
            .metadata()
            .map_err(|e| SourceError::new(&name, Problem::Io(e)))?
            .len();
        if len > MAX_Y4M_BYTES as u64 {
            return Err(SourceError::new(&name, Problem::TooBig(len)));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        f.by_ref()
            .take(MAX_Y4M_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| SourceError::new(&name, Problem::Io(e)))?;
        Y4mSource::from_bytes(&name, &bytes)
    }

    /// Loads a file held in `bytes`; `name` names it in errors.
    pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<Y4mSource, SourceError> {
        if bytes.len() > MAX_Y4M_BYTES {
            return Err(SourceError::new(name, Problem::TooBig(bytes.len() as u64)));
        }
        let (width, height, num, den) = precheck(name, bytes)?;
        // Between 0.01 and 1000 frames a second.
        if num == 0 || den == 0 || num > den * 1000 || num * 100 < den {
            return Err(SourceError::new(name, Problem::Rate(num, den)));
        }
        let period = Duration::from_nanos((den as u128 * 1_000_000_000 / num as u128) as i64);
        if !PictureSize::ALL.iter().any(|s| {
            width % s.width() == 0
                && height % s.height() == 0
                && width / s.width() == height / s.height()
        }) {
            return Err(SourceError::new(name, Problem::NoSize(width, height)));
        }
        let limits = y4m::Limits {
            bytes: MAX_Y4M_BYTES,
        };
        let pos = std::rc::Rc::new(std::cell::Cell::new(0));
        let reader = Counting {
            data: bytes,
            pos: pos.clone(),
        };
        let mut dec = y4m::Decoder::new_with_limits(reader, limits).map_err(|e| {
            let why = match e {
                y4m::Error::UnknownColorspace => {
                    "its colour space is not one the decoder knows".to_owned()
                }
                other => other.to_string(),
            };
            SourceError::new(name, Problem::NotY4m(why))
        })?;
        use y4m::Colorspace as C;
        let chroma = match dec.get_colorspace() {
            C::Cmono => Chroma::Mono,
            C::C420 | C::C420jpeg | C::C420paldv | C::C420mpeg2 => Chroma::Planes { x: 1, y: 1 },
            C::C422 => Chroma::Planes { x: 1, y: 0 },
            C::C444 => Chroma::Planes { x: 0, y: 0 },
            other => {
                return Err(SourceError::new(
                    name,
                    Problem::Depth(other.get_bit_depth()),
                ))
            }
        };
        let mut frames = Vec::new();
        loop {
            let start = pos.get();
            match dec.read_frame() {
                Ok(fr) => {
                    let mut planes = Vec::with_capacity(width * height * 3);
                    planes.extend_from_slice(fr.get_y_plane());
                    if chroma != Chroma::Mono {
                        planes.extend_from_slice(fr.get_u_plane());
                        planes.extend_from_slice(fr.get_v_plane());
                    }
                    frames.push(planes);
                }
                // The decoder calls a short read the end of the file:
                // bytes left over after the last whole frame are a frame
                // cut short.
                Err(y4m::Error::EOF) if start == bytes.len() => break,
                Err(y4m::Error::EOF) => {
                    return Err(SourceError::new(name, Problem::Truncated(frames.len())));
                }
                Err(e) => {
                    return Err(SourceError::new(
                        name,
                        Problem::NotY4m(format!("frame {} is unreadable ({e})", frames.len())),
                    ))
                }
            }
        }
        if frames.is_empty() {
            return Err(SourceError::new(name, Problem::NoFrames));
        }
        Ok(Y4mSource {
            width,
            height,
            period,
            chroma,
            frames,
        })
    }

    /// The file's width and height.
    pub fn dimensions(&self) -> (usize, usize) {
        (self.width, self.height)
    }

    /// Frames in the file (the loop's length).
    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// The whole factor `size` divides the file's size by, if any.
    fn factor(&self, size: PictureSize) -> Option<usize> {
        let f = self.width / size.width();
        (f >= 1 && self.width == f * size.width() && self.height == f * size.height()).then_some(f)
    }
}

impl Source for Y4mSource {
    fn period(&self) -> Duration {
        self.period
    }

    fn supports(&self, size: PictureSize) -> bool {
        self.factor(size).is_some()
    }

    fn render(&self, frame: u64, pic: &mut Picture) -> bool {
        let Some(f) = self.factor(pic.size()) else {
            return false;
        };
        let planes = &self.frames[(frame % self.frames.len() as u64) as usize];
        let (w, h) = (self.width, self.height);
        let (ylen, luma) = (w * h, &planes[..w * h]);
        let format = pic.format();
        let (cw, ch, sx, sy) = match self.chroma {
            Chroma::Mono => (0, 0, 0, 0),
            Chroma::Planes { x, y } => (w.div_ceil(1 << x), h.div_ceil(1 << y), x, y),
        };
        let area = (f * f) as u32;
        let lb = pic.line_bytes();
        let ow = pic.width();
        for (oy, line) in pic.data_mut().chunks_exact_mut(lb).enumerate() {
            let y0 = oy * f;
            for ox in 0..ow {
                let x0 = ox * f;
                let mut sum = 0u32;
                for r in luma[y0 * w..].chunks(w).take(f) {
                    sum += r[x0..x0 + f].iter().map(|&v| u32::from(v)).sum::<u32>();
                }
                let y = ((sum + area / 2) / area) as u8;
                match format {
                    PixelFormat::Mono8 => line[ox] = y,
                    PixelFormat::Yuyv => {
                        line[2 * ox] = y;
                        if ox % 2 == 0 {
                            let (u, v) = if self.chroma == Chroma::Mono {
                                (128, 128)
                            } else {
                                let at = (y0 >> sy) * cw + (x0 >> sx);
                                (planes[ylen + at], planes[ylen + cw * ch + at])
                            };
                            line[2 * ox + 1] = u;
                            line[2 * ox + 3] = v;
                        }
                    }
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_reads_back_at_every_size_and_format() {
        let src = SyntheticSource::new(7);
        for size in PictureSize::ALL {
            for format in PixelFormat::ALL {
                for n in [0u64, 1, 29, 12345, u32::MAX as u64, (1 << 32) + 5] {
                    let p = src.picture(n, size, format);
                    assert_eq!(read_counter(&p), Some(n as u32), "{size} {format} {n}");
                }
            }
        }
    }

    #[test]
    fn synthetic_frames_move_and_repeat_exactly() {
        let a = SyntheticSource::new(1);
        let p0 = a.picture(10, PictureSize::Full, PixelFormat::Mono8);
        assert_eq!(p0, a.picture(10, PictureSize::Full, PixelFormat::Mono8));
        let p1 = a.picture(11, PictureSize::Full, PixelFormat::Mono8);
        let differ = p0
            .data()
            .iter()
            .zip(p1.data())
            .filter(|(x, y)| x != y)
            .count();
        assert!(differ > 640 * 480 / 2, "{differ} pixels changed");
        let b = SyntheticSource::new(2).picture(10, PictureSize::Full, PixelFormat::Mono8);
        assert_ne!(p0, b, "another seed, another picture");
        // The digits are drawn: bright dots inside the dark backing.
        let bright = (DIGITS_Y..DIGITS_Y + 20)
            .flat_map(|y| (DIGITS_X..DIGITS_X + 8 * DOT).map(move |x| (x, y)))
            .filter(|&(x, y)| p0.luma(x, y) == Some(BRIGHT))
            .count();
        assert!(bright > 0);
    }

    #[test]
    fn a_mono_and_a_colour_frame_share_their_luma() {
        let s = SyntheticSource::new(3);
        let m = s.picture(4, PictureSize::Half, PixelFormat::Mono8);
        let c = s.picture(4, PictureSize::Half, PixelFormat::Yuyv);
        for y in 0..240 {
            for x in 0..320 {
                assert_eq!(m.luma(x, y), c.luma(x, y));
            }
        }
    }

    fn y4m_file(w: usize, h: usize, cs: y4m::Colorspace, frames: &[[u8; 3]]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = y4m::encode(w, h, y4m::Ratio::new(30, 1))
            .with_colorspace(cs)
            .write_header(&mut out)
            .unwrap();
        let (cw, ch) = match cs {
            y4m::Colorspace::C422 => (w.div_ceil(2), h),
            y4m::Colorspace::C444 => (w, h),
            y4m::Colorspace::Cmono => (0, 0),
            _ => (w.div_ceil(2), h.div_ceil(2)),
        };
        for f in frames {
            // Luma rises along each line, so averaging shows.
            let y: Vec<u8> = (0..w * h)
                .map(|i| f[0].wrapping_add((i % w) as u8))
                .collect();
            let u = vec![f[1]; cw * ch];
            let v = vec![f[2]; cw * ch];
            enc.write_frame(&y4m::Frame::new([&y, &u, &v], None))
                .unwrap();
        }
        out
    }

    #[test]
    fn a_y4m_file_plays_in_a_loop_at_the_sizes_it_divides() {
        let bytes = y4m_file(
            320,
            240,
            y4m::Colorspace::C420,
            &[[10, 90, 160], [50, 100, 200]],
        );
        let src = Y4mSource::from_bytes("clip.y4m", &bytes).unwrap();
        assert_eq!((src.frames(), src.dimensions()), (2, (320, 240)));
        assert_eq!(src.period(), Duration::from_nanos(33_333_333));
        assert!(!src.supports(PictureSize::Full));
        assert!(src.supports(PictureSize::Half) && src.supports(PictureSize::Quarter));
        let mut p = Picture::new(PictureSize::Full, PixelFormat::Mono8);
        assert!(!src.render(0, &mut p));
        let mut p = Picture::new(PictureSize::Half, PixelFormat::Yuyv);
        assert!(src.render(3, &mut p)); // frame 3 is the file's frame 1
        assert_eq!(
            &p.line(7).unwrap()[..8],
            &[50, 100, 51, 200, 52, 100, 53, 200]
        );
        let mut q = Picture::new(PictureSize::Quarter, PixelFormat::Mono8);
        assert!(src.render(0, &mut q));
        // Each pixel averages a 2×2 block: (10 + 11 + 10 + 11) / 4 = 10.5,
        // rounded up.
        assert_eq!(&q.line(5).unwrap()[..3], &[11, 13, 15]);
    }

    #[test]
    fn mono_and_444_files_convert() {
        let bytes = y4m_file(160, 120, y4m::Colorspace::Cmono, &[[7, 0, 0]]);
        let src = Y4mSource::from_bytes("m.y4m", &bytes).unwrap();
        let mut p = Picture::new(PictureSize::Quarter, PixelFormat::Yuyv);
        assert!(src.render(0, &mut p));
        assert_eq!(&p.data()[..4], &[7, 128, 8, 128]);
        let bytes = y4m_file(640, 480, y4m::Colorspace::C444, &[[0, 1, 2]]);
        let src = Y4mSource::from_bytes("c.y4m", &bytes).unwrap();
        assert!(PictureSize::ALL.iter().all(|&s| src.supports(s)));
    }

    #[test]
    fn files_that_cannot_play_are_refused_in_one_sentence() {
        let wide = y4m_file(1280, 720, y4m::Colorspace::C420, &[[0, 0, 0]]);
        let e = Y4mSource::from_bytes("wide.y4m", &wide).unwrap_err();
        assert_eq!(
            e.to_string(),
            "wide.y4m is 1280x720, and no picture size the camera sends (640x480, 320x240, 160x120) divides it by a whole factor"
        );
        let none = y4m_file(320, 240, y4m::Colorspace::C420, &[]);
        let e = Y4mSource::from_bytes("empty.y4m", &none).unwrap_err();
        assert_eq!(e.to_string(), "empty.y4m holds no frames");
        let mut cut = y4m_file(320, 240, y4m::Colorspace::C420, &[[0, 0, 0], [1, 1, 1]]);
        cut.truncate(cut.len() - 10);
        let e = Y4mSource::from_bytes("cut.y4m", &cut).unwrap_err();
        assert_eq!(e.to_string(), "cut.y4m ends in the middle of frame 1");
        let e = Y4mSource::from_bytes("x.png", b"\x89PNG\r\n").unwrap_err();
        assert!(
            e.to_string().starts_with("x.png is not a YUV4MPEG2 file"),
            "{e}"
        );
        let huge = b"YUV4MPEG2 W99999999 H99999999 F30:1\n";
        let e = Y4mSource::from_bytes("huge.y4m", huge).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("huge.y4m is not a YUV4MPEG2 file"),
            "{e}"
        );
        let deep = b"YUV4MPEG2 W320 H240 F30:1 C420p10\n";
        let e = Y4mSource::from_bytes("deep.y4m", deep).unwrap_err();
        assert_eq!(
            e.to_string(),
            "deep.y4m has 10-bit samples, and the file source reads 8-bit files only"
        );
        let slow = b"YUV4MPEG2 W320 H240 F0:1\n";
        let e = Y4mSource::from_bytes("slow.y4m", slow).unwrap_err();
        assert!(matches!(e.problem(), Problem::Rate(0, 1)), "{e}");
        let e = Y4mSource::open(Path::new("/nonexistent/clip.y4m")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/clip.y4m cannot be read"),
            "{e}"
        );
    }
}
