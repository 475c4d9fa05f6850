//! Tiered fragment-list segments: the pure planning half (no I/O).
//!
//! A root manifest lists segment references in fragment-id order. A commit that adds
//! fragments writes them as one new level-0 segment at the end. Whenever the last
//! `FANOUT` references share a level below `MAX_LEVEL`, they are merged into one
//! segment of the next level (like a base-`FANOUT` counter). So:
//! - a root holds at most `(FANOUT - 1) * MAX_LEVEL` partial segments plus full ones;
//! - each fragment entry is rewritten at most `MAX_LEVEL` times over its life;
//! - a commit reads and writes O(changed fragments) entries, amortised.

use std::ops::Range;

use super::manifest::{Fragment, Segment, SegmentRef};

/// Number of same-level trailing segments that triggers a merge.
pub const FANOUT: usize = 8;
/// Segments at this level are never merged further (≈ FANOUT^MAX_LEVEL entries).
pub const MAX_LEVEL: u8 = 4;

/// The trailing run of segments to merge next, if any.
pub fn next_merge(segments: &[SegmentRef]) -> Option<Range<usize>> {
    let last = segments.last()?;
    if last.level >= MAX_LEVEL {
        return None;
    }
    let run = segments.iter().rev().take_while(|s| s.level == last.level).count();
    (run >= FANOUT).then(|| segments.len() - run..segments.len())
}

/// Reference describing `segment` stored at `path`.
pub fn segment_ref(path: String, level: u8, segment: &Segment) -> SegmentRef {
    SegmentRef {
        path,
        level,
        fragments: segment.fragments.len() as u64,
        live_rows: segment.fragments.iter().map(Fragment::live_rows).sum(),
        min_fragment_id: segment.fragments.first().map_or(0, |f| f.id),
        max_fragment_id: segment.fragments.last().map_or(0, |f| f.id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(level: u8) -> SegmentRef {
        SegmentRef { path: String::new(), level, fragments: 1, live_rows: 1, min_fragment_id: 0, max_fragment_id: 0 }
    }

    /// Simulates `n` single-fragment appends and returns the final levels.
    fn simulate(n: usize) -> (Vec<u8>, usize) {
        let mut segs: Vec<SegmentRef> = Vec::new();
        let mut rewritten = 0usize;
        for _ in 0..n {
            segs.push(seg(0));
            while let Some(range) = next_merge(&segs) {
                let level = segs[range.start].level + 1;
                let merged: u64 = segs[range.clone()].iter().map(|s| s.fragments).sum();
                rewritten += merged as usize;
                segs.truncate(range.start);
                segs.push(SegmentRef { fragments: merged, level, ..seg(level) });
            }
        }
        (segs.iter().map(|s| s.level).collect(), rewritten)
    }

    #[test]
    fn root_stays_small_and_rewrites_are_amortised() {
        for n in [1usize, 7, 8, 64, 100, 10_000, 100_000] {
            let (levels, rewritten) = simulate(n);
            let full = n / FANOUT.pow(MAX_LEVEL as u32);
            assert!(levels.len() <= full + (FANOUT - 1) * MAX_LEVEL as usize, "n={n}: {} segments", levels.len());
            assert!(levels.windows(2).all(|w| w[0] >= w[1]), "levels must not increase: {levels:?}");
            assert!(rewritten <= n * MAX_LEVEL as usize, "n={n}: rewrote {rewritten}");
        }
    }
}
