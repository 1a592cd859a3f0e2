//! TCP sequence numbers: 32-bit, compared modulo 2^32 (RFC 9293 3.4).

use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A sequence number. Two numbers compare by their signed distance, so
/// order holds across the wrap as long as they are less than 2^31 apart
/// (a window is at most 2^30).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Seq(pub u32);

impl Seq {
    /// `self − other` as a signed distance.
    #[inline]
    pub fn diff(self, other: Seq) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// The later of two numbers.
    #[inline]
    pub fn max(self, other: Seq) -> Seq {
        if self.diff(other) >= 0 {
            self
        } else {
            other
        }
    }

    /// The earlier of two numbers.
    #[inline]
    pub fn min(self, other: Seq) -> Seq {
        if self.diff(other) <= 0 {
            self
        } else {
            other
        }
    }

    /// Bytes from `from` up to `self`, or 0 if `self` is not after `from`.
    #[inline]
    pub fn since(self, from: Seq) -> u32 {
        self.diff(from).max(0) as u32
    }

    /// `lo ≤ self < hi`.
    #[inline]
    pub fn within(self, lo: Seq, hi: Seq) -> bool {
        self >= lo && self < hi
    }
}

impl PartialOrd for Seq {
    fn partial_cmp(&self, other: &Seq) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Seq {
    /// Not a total order over all of `u32` (it wraps), but one over any
    /// set of numbers less than 2^31 apart, which is all TCP compares.
    fn cmp(&self, other: &Seq) -> Ordering {
        self.diff(*other).cmp(&0)
    }
}

impl Add<u32> for Seq {
    type Output = Seq;
    #[inline]
    fn add(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }
}

impl AddAssign<u32> for Seq {
    #[inline]
    fn add_assign(&mut self, n: u32) {
        self.0 = self.0.wrapping_add(n);
    }
}

impl Sub<u32> for Seq {
    type Output = Seq;
    #[inline]
    fn sub(self, n: u32) -> Seq {
        Seq(self.0.wrapping_sub(n))
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_holds_across_the_wrap() {
        let a = Seq(u32::MAX - 10);
        let b = a + 20;
        assert_eq!(b.0, 9);
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b.diff(a), 20);
        assert_eq!(b.since(a), 20);
        assert_eq!(a.since(b), 0);
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
        assert!(Seq(u32::MAX).within(a, b));
        assert!(!b.within(a, b));
    }
}
