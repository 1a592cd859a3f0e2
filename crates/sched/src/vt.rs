//! Fixed-point virtual time shared by WFQ and WF2Q+.
//!
//! A tag unit is `2^-32` of one length unit per unit of weight: an item of
//! `len` on a session of weight `w` spans `len · 2^32 / w` units, computed as
//! `len · step` with `step = ⌊2^32 / w⌋`. Weights up to 2^16 keep the
//! rounding of `step` below 2^-16 relative. Lengths count up to 2^24 in tags
//! (longer items count as 2^24), so an item spans at most 2^56 units.
//!
//! Virtual time only grows. When it reaches [`REBASE_AT`] every tag is
//! lowered by [`REBASE_BY`] (a multiple of every calendar window, so no
//! entry changes bucket), which keeps all tag arithmetic inside `u64` for
//! any run length; tags that fall below 0 were long behind virtual time and
//! clamp to 0, which does not change any decision.

/// One length unit per unit of weight, in tag units.
pub(crate) const ONE: u64 = 1 << 32;
/// Virtual time at which tags are lowered.
pub(crate) const REBASE_AT: u64 = 1 << 62;
/// How far tags are lowered.
pub(crate) const REBASE_BY: u64 = 1 << 61;
/// Longest length counted in tags.
pub(crate) const MAX_LEN: u32 = 1 << 24;

/// Tag units per length unit for a session of `weight`: `⌊2^32 / weight⌋`.
/// Rounding down keeps a session's tags from running ahead of a virtual
/// time that counts the same work exactly (a tie stays a tie, or goes to
/// the session).
///
/// # Panics
/// If `weight` is 0.
#[inline]
pub(crate) fn step(weight: u32) -> u64 {
    assert!(weight > 0, "a session weight must be > 0");
    ONE / u64::from(weight)
}

/// The span of an item of `len` at `step`.
#[inline]
pub(crate) fn span(len: u32, step: u64) -> u64 {
    u64::from(len.min(MAX_LEN)) * step
}

/// The span of an item of `len` (already clamped to [`MAX_LEN`]) at
/// `step`.
#[inline(always)]
pub(crate) fn span_clamped(len: u32, step: u64) -> u64 {
    debug_assert!(len <= MAX_LEN);
    u64::from(len) * step
}

/// `len` as counted in tags.
#[inline]
pub(crate) fn clamp_len(len: u32) -> u64 {
    u64::from(len.min(MAX_LEN))
}

/// The calendar bucket shift for buckets about `granule` tag units wide (a
/// power of two at or below it).
pub(crate) fn shift_for(granule: u64) -> u32 {
    if granule <= 1 {
        0
    } else {
        (63 - granule.leading_zeros()).min(crate::tagq::MAX_SHIFT)
    }
}

/// The calendar bucket shift for a port whose weights sum to `wsum`, the
/// least being `wmin`, and whose items are typically `len` long: buckets
/// about twice the virtual time such an item moves `V` (so a busy port's
/// tags spread thinly and arrive in order within a bucket), but wide enough
/// that three such items of the lightest session fit in the window.
pub(crate) fn calendar_shift(len: u32, wsum: u64, wmin: u32) -> u32 {
    let unit = clamp_len(len.max(1)) * ONE;
    let fine = unit / wsum.max(1) * 2;
    let window = crate::tagq::BUCKETS as u64 - crate::tagq::SLACK;
    let wide = unit / u64::from(wmin.max(1)) * 3 / window;
    shift_for(fine.max(wide))
}
