use core::fmt;

/// Why bytes could not be read as, or a value could not be written to, a format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter (or, for fixed-size units, longer) than the format needs.
    Length {
        /// Bytes the format needs.
        expected: usize,
        /// Bytes that were given.
        got: usize,
    },
    /// A field value does not fit its field (e.g. a VPI above 255 in a UNI header).
    FieldRange {
        /// The field's name.
        field: &'static str,
        /// The value that did not fit.
        value: u32,
    },
    /// A checksum (HEC, CRC-10, CRC-32) does not match.
    Checksum,
    /// The bytes are well-sized but their contents break the format's rules.
    Malformed(&'static str),
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Length { expected, got } => {
                write!(f, "wrong length: expected {expected} bytes, got {got}")
            }
            Error::FieldRange { field, value } => {
                write!(f, "value {value} does not fit field {field}")
            }
            Error::Checksum => f.write_str("checksum mismatch"),
            Error::Malformed(why) => write!(f, "malformed: {why}"),
        }
    }
}

impl core::error::Error for Error {}
