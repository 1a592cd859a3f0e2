//! A two-level bitmap: which of a fixed set of queues are non-empty, and the
//! lowest-numbered one in a few instructions.

/// Bit `i` set means queue `i` is non-empty; a summary word has a bit per
/// word of the lower level.
pub(crate) struct Bitmap {
    words: Vec<u64>,
    summary: Vec<u64>,
}

impl Bitmap {
    /// `n` clear bits.
    pub(crate) fn new(n: usize) -> Self {
        let words = n.div_ceil(64);
        Bitmap {
            words: vec![0; words],
            summary: vec![0; words.div_ceil(64)],
        }
    }

    /// Sets bit `i`.
    #[inline]
    pub(crate) fn set(&mut self, i: usize) {
        let w = i >> 6;
        self.words[w] |= 1 << (i & 63);
        self.summary[w >> 6] |= 1 << (w & 63);
    }

    /// Clears bit `i`.
    #[inline]
    pub(crate) fn clear(&mut self, i: usize) {
        let w = i >> 6;
        self.words[w] &= !(1 << (i & 63));
        if self.words[w] == 0 {
            self.summary[w >> 6] &= !(1 << (w & 63));
        }
    }

    /// The lowest set bit.
    #[inline]
    pub(crate) fn first(&self) -> Option<usize> {
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
}
