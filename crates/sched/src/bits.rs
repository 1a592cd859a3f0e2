//! A three-level bitmap: which of a fixed set of queues are non-empty, and
//! the lowest-numbered one in a few instructions.

/// Bit `i` set means queue `i` is non-empty; a summary word has a bit per
/// word of the lower level, and `top` a bit per summary word when there are
/// at most 64 of them (2^18 bits; beyond, `first` scans the summary words).
///
/// Invariant, on which the `unsafe` blocks rest: `words` has a word per 64
/// of the `n` bits, `summary` a word per 64 of those.
pub(crate) struct Bitmap {
    words: Vec<u64>,
    summary: Vec<u64>,
    top: u64,
    /// All ones when `top` is kept (at most 64 summary words), else 0.
    top_mask: u64,
    n: usize,
}

impl Bitmap {
    /// `n` clear bits.
    pub(crate) fn new(n: usize) -> Self {
        let words = n.div_ceil(64);
        let summary = words.div_ceil(64);
        Bitmap {
            words: vec![0; words],
            summary: vec![0; summary],
            top: 0,
            top_mask: if summary <= 64 { !0 } else { 0 },
            n,
        }
    }

    /// Sets bit `i`.
    ///
    /// # Panics
    /// If `i` is out of range.
    #[inline]
    pub(crate) fn set(&mut self, i: usize) {
        assert!(i < self.n, "bit out of range");
        let (w, s) = (i >> 6, i >> 12);
        // SAFETY: `i < n`, so `w` and `s` are in range (the invariant).
        unsafe {
            *self.words.get_unchecked_mut(w) |= 1 << (i & 63);
            *self.summary.get_unchecked_mut(s) |= 1 << (w & 63);
        }
        self.top |= (1 << (s & 63)) & self.top_mask;
    }

    /// Clears bit `i`.
    ///
    /// # Panics
    /// If `i` is out of range.
    #[inline]
    pub(crate) fn clear(&mut self, i: usize) {
        assert!(i < self.n, "bit out of range");
        let (w, s) = (i >> 6, i >> 12);
        // SAFETY: `i < n`, so `w` and `s` are in range (the invariant).
        let word = unsafe { self.words.get_unchecked_mut(w) };
        *word &= !(1 << (i & 63));
        if *word == 0 {
            // SAFETY: as above.
            let sw = unsafe { self.summary.get_unchecked_mut(s) };
            *sw &= !(1 << (w & 63));
            if *sw == 0 {
                self.top &= !((1 << (s & 63)) & self.top_mask);
            }
        }
    }

    /// The lowest set bit.
    #[inline]
    pub(crate) fn first(&self) -> Option<usize> {
        if self.top != 0 {
            let s = self.top.trailing_zeros() as usize;
            // SAFETY: a bit of `top` stands for a summary word, and a bit
            // of a summary word for a word (the invariant).
            unsafe {
                let w = (s << 6) | self.summary.get_unchecked(s).trailing_zeros() as usize;
                return Some((w << 6) | self.words.get_unchecked(w).trailing_zeros() as usize);
            }
        }
        if self.top_mask != 0 {
            return None;
        }
        self.first_by_scan()
    }

    /// The lowest set bit, without `top`.
    #[cold]
    #[inline(never)]
    fn first_by_scan(&self) -> Option<usize> {
        for (s, &sw) in self.summary.iter().enumerate() {
            if sw != 0 {
                let w = (s << 6) | sw.trailing_zeros() as usize;
                return Some((w << 6) | self.words[w].trailing_zeros() as usize);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::Bitmap;

    #[test]
    fn first_is_lowest_set() {
        let mut b = Bitmap::new(5000);
        assert_eq!(b.first(), None);
        for i in [4999, 4096, 700, 64, 63] {
            b.set(i);
            assert_eq!(b.first(), Some(i));
        }
        for (i, next) in [
            (63, Some(64)),
            (64, Some(700)),
            (700, Some(4096)),
            (4096, Some(4999)),
            (4999, None),
        ] {
            b.clear(i);
            assert_eq!(b.first(), next);
        }
    }

    /// Past 2^18 bits the search leaves the top word for the summary.
    #[test]
    fn first_past_the_top_word() {
        let mut b = Bitmap::new(300_000);
        for i in [299_999, 262_144, 262_143, 5] {
            b.set(i);
            assert_eq!(b.first(), Some(i));
        }
        for (i, next) in [
            (5, Some(262_143)),
            (262_143, Some(262_144)),
            (262_144, Some(299_999)),
            (299_999, None),
        ] {
            b.clear(i);
            assert_eq!(b.first(), next);
        }
    }
}
