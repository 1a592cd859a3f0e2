//! The byte pattern of TCP hosts' transfers, laid out and checked a run at
//! a time, agrees with its definition byte by byte.

use aurora_tcp::host::{fill_pattern, pattern, pattern_errors};
use proptest::prelude::*;

proptest! {
    #[test]
    fn runs_agree_with_the_definition(offset in 0u64..(1 << 40), len in 0usize..20_000, flips in proptest::collection::vec(any::<usize>(), 0..8)) {
        let mut out = vec![0u8; len];
        fill_pattern(offset, &mut out);
        for (i, &b) in out.iter().enumerate() {
            prop_assert_eq!(b, pattern(offset + i as u64));
        }
        prop_assert_eq!(pattern_errors(offset, &out), 0);
        // Damage some bytes (each at most once): exactly those count.
        let mut hit = std::collections::BTreeSet::new();
        if len > 0 {
            for f in flips {
                hit.insert(f % len);
            }
        }
        for &i in &hit {
            out[i] ^= 0x5A;
        }
        prop_assert_eq!(pattern_errors(offset, &out), hit.len() as u64);
        // Off by one byte: nearly every byte is wrong.
        if len > 1000 {
            prop_assert!(pattern_errors(offset + 1, &out) > len as u64 / 2);
        }
    }
}
