//! Picture sizes, pixel formats and the [`Picture`] the camera sends.
//!
//! Three sizes, the Vidboard's: 640×480, 320×240 and 160×120. Two pixel
//! formats:
//!
//! | format | bytes per pixel | layout of one scan line |
//! |---|---|---|
//! | [`PixelFormat::Mono8`] | 1 | `Y0 Y1 Y2 …` (8-bit luma) |
//! | [`PixelFormat::Yuyv`] | 2 | `Y0 U0 Y1 V0  Y2 U1 Y3 V1 …` (packed 4:2:2) |
//!
//! **Why YUYV for colour.** The video adaptation layer cuts a picture into
//! groups of whole scan lines ([`crate::val`]), and a lost group must cost
//! only its own lines. Packed 4:2:2 keeps each line's colour in that line
//! (a planar or 4:2:0 format would put part of a line's colour in another
//! plane or on the next line), it is what most cameras hand out today
//! (V4L2's default `YUYV`), it maps without loss onto YUV4MPEG2's `C422`,
//! and at 16 bits a pixel it doubles the mono stream, as the seed's colour
//! streams weighed against its monochrome ones.
//!
//! A picture's bytes are its scan lines top to bottom, each
//! [`Picture::line_bytes`] long, with nothing between them: lines
//! `first..first + n` are one slice ([`Picture::lines`]), which is what a
//! t-frame carries.

use core::fmt;

/// A picture size the camera sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PictureSize {
    /// 640×480, full size.
    Full,
    /// 320×240.
    Half,
    /// 160×120.
    Quarter,
}

impl PictureSize {
    /// Every size, largest first (in the order of their codes).
    pub const ALL: [PictureSize; 3] = [PictureSize::Full, PictureSize::Half, PictureSize::Quarter];

    /// Pixels per scan line.
    pub const fn width(self) -> usize {
        match self {
            PictureSize::Full => 640,
            PictureSize::Half => 320,
            PictureSize::Quarter => 160,
        }
    }

    /// Scan lines.
    pub const fn height(self) -> usize {
        match self {
            PictureSize::Full => 480,
            PictureSize::Half => 240,
            PictureSize::Quarter => 120,
        }
    }

    /// How many times smaller than 640×480 each side is (1, 2 or 4).
    pub const fn divisor(self) -> usize {
        640 / self.width()
    }

    /// The size's code in a video request ([`crate::command`]).
    pub const fn code(self) -> u8 {
        match self {
            PictureSize::Full => 0,
            PictureSize::Half => 1,
            PictureSize::Quarter => 2,
        }
    }

    /// The size with code `c`, if there is one.
    pub const fn from_code(c: u8) -> Option<PictureSize> {
        match c {
            0 => Some(PictureSize::Full),
            1 => Some(PictureSize::Half),
            2 => Some(PictureSize::Quarter),
            _ => None,
        }
    }
}

impl fmt::Display for PictureSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width(), self.height())
    }
}

/// How a pixel is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    /// 8-bit luma, one byte a pixel.
    Mono8,
    /// Packed 4:2:2: `Y0 U Y1 V` for each pair of pixels, two bytes a
    /// pixel (see the [module](self) documentation for why).
    Yuyv,
}

impl PixelFormat {
    /// Both formats, in the order of their codes.
    pub const ALL: [PixelFormat; 2] = [PixelFormat::Mono8, PixelFormat::Yuyv];

    /// Bytes a pixel takes.
    pub const fn bytes_per_pixel(self) -> usize {
        match self {
            PixelFormat::Mono8 => 1,
            PixelFormat::Yuyv => 2,
        }
    }

    /// The format's code in a video request ([`crate::command`]).
    pub const fn code(self) -> u8 {
        match self {
            PixelFormat::Mono8 => 0,
            PixelFormat::Yuyv => 1,
        }
    }

    /// The format with code `c`, if there is one.
    pub const fn from_code(c: u8) -> Option<PixelFormat> {
        match c {
            0 => Some(PixelFormat::Mono8),
            1 => Some(PixelFormat::Yuyv),
            _ => None,
        }
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PixelFormat::Mono8 => "mono8",
            PixelFormat::Yuyv => "yuyv",
        })
    }
}

/// One picture: its size, its format and its scan lines.
#[derive(Clone, PartialEq, Eq)]
pub struct Picture {
    size: PictureSize,
    format: PixelFormat,
    data: Vec<u8>,
}

impl fmt::Debug for Picture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Picture({} {}, {} bytes)",
            self.size,
            self.format,
            self.data.len()
        )
    }
}

impl Picture {
    /// A black picture.
    pub fn new(size: PictureSize, format: PixelFormat) -> Picture {
        let mut p = Picture {
            size,
            format,
            data: Vec::new(),
        };
        p.reshape(size, format);
        p
    }

    /// Makes this picture `size` in `format` (black), keeping its buffer
    /// when it is big enough.
    pub fn reshape(&mut self, size: PictureSize, format: PixelFormat) {
        self.size = size;
        self.format = format;
        let len = size.width() * size.height() * format.bytes_per_pixel();
        self.data.clear();
        match format {
            PixelFormat::Mono8 => self.data.resize(len, 0),
            // Black in YUV: luma 16, both colour differences at their
            // middle.
            PixelFormat::Yuyv => self
                .data
                .extend((0..len).map(|i| if i % 2 == 0 { 16 } else { 128 })),
        }
    }

    /// The picture's size.
    pub fn size(&self) -> PictureSize {
        self.size
    }

    /// The picture's pixel format.
    pub fn format(&self) -> PixelFormat {
        self.format
    }

    /// Pixels per line.
    pub fn width(&self) -> usize {
        self.size.width()
    }

    /// Lines.
    pub fn height(&self) -> usize {
        self.size.height()
    }

    /// Bytes per scan line.
    pub fn line_bytes(&self) -> usize {
        self.size.width() * self.format.bytes_per_pixel()
    }

    /// Every byte, line after line.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Every byte, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Scan line `y`, if the picture has it.
    pub fn line(&self, y: usize) -> Option<&[u8]> {
        self.lines(y, 1)
    }

    /// Scan lines `first..first + n` as one slice, if the picture has
    /// them all.
    pub fn lines(&self, first: usize, n: usize) -> Option<&[u8]> {
        let lb = self.line_bytes();
        let end = first.checked_add(n)?;
        if end > self.height() {
            return None;
        }
        self.data.get(first * lb..end * lb)
    }

    /// Scan lines `first..first + n`, writable.
    pub fn lines_mut(&mut self, first: usize, n: usize) -> Option<&mut [u8]> {
        let lb = self.line_bytes();
        let end = first.checked_add(n)?;
        if end > self.height() {
            return None;
        }
        self.data.get_mut(first * lb..end * lb)
    }

    /// The luma of pixel (`x`, `y`), if it is in the picture.
    pub fn luma(&self, x: usize, y: usize) -> Option<u8> {
        if x >= self.width() {
            return None;
        }
        let bpp = self.format.bytes_per_pixel();
        self.line(y)?.get(x * bpp).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_formats_and_codes() {
        for s in PictureSize::ALL {
            assert_eq!(PictureSize::from_code(s.code()), Some(s));
            assert_eq!(s.width() * 3, s.height() * 4);
            assert_eq!(s.width() * s.divisor(), 640);
        }
        for f in PixelFormat::ALL {
            assert_eq!(PixelFormat::from_code(f.code()), Some(f));
        }
        assert_eq!(PictureSize::from_code(3), None);
        assert_eq!(PixelFormat::from_code(2), None);
        let p = Picture::new(PictureSize::Full, PixelFormat::Mono8);
        assert_eq!((p.line_bytes(), p.data().len()), (640, 640 * 480));
        let p = Picture::new(PictureSize::Quarter, PixelFormat::Yuyv);
        assert_eq!((p.line_bytes(), p.data().len()), (320, 320 * 120));
        assert_eq!(&p.data()[..4], &[16, 128, 16, 128]);
        assert_eq!(p.lines(119, 1).map(<[u8]>::len), Some(320));
        assert!(p.lines(119, 2).is_none());
        assert!(p.lines(usize::MAX, 2).is_none());
        assert_eq!(p.luma(159, 119), Some(16));
        assert_eq!(p.luma(160, 0), None);
    }
}
