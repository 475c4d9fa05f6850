//! Tiered fragment-list segments: the pure planning half (no I/O).
//!
//! A root manifest lists segment references in fragment-id order. A commit that adds
//! fragments writes them as one new segment at the end, whose level is its size class
//! ([`level_for`]: ≤ FANOUT^level entries). Whenever the last `FANOUT` references share
//! a level below `MAX_LEVEL`, they are merged into one segment of a higher level (like
//! a base-`FANOUT` counter). A large segment is born at a high level, so later small
//! commits never merge (rewrite) it. So:
//! - a root holds at most `(FANOUT - 1) * MAX_LEVEL` partial segments plus full ones
//!   (one per FANOUT^(MAX_LEVEL - level_for(k)) commits of k fragments: 4096 one-fragment commits);
//! - each fragment entry is rewritten at most `MAX_LEVEL` times over its life;
//! - a commit reads and writes O(changed fragments) entries, amortised;
//! - (format 2) a segment of at most `INLINE_SEGMENT_FRAGMENTS` fragments is held in the
//!   root, not in a file: levels 0 and 1 are inline, so a root holds at most
//!   `(FANOUT - 1) * (1 + FANOUT)` inline fragments, and a small commit writes no
//!   segment object (one in FANOUT^2 one-fragment commits writes the merged level-2 one).

use std::ops::Range;

use super::manifest::{Fragment, Segment, SegmentRef, INLINE_SEGMENT_FRAGMENTS};

/// Number of same-level trailing segments that triggers a merge.
pub(crate) const FANOUT: usize = 8;
/// Segments at this level are never merged further (≈ FANOUT^MAX_LEVEL entries).
pub(crate) const MAX_LEVEL: u8 = 4;

/// The level of a new segment of `entries` fragments: the smallest `L` with
/// `entries <= FANOUT^L`, at most `MAX_LEVEL`.
pub(crate) fn level_for(entries: usize) -> u8 {
    let mut level = 0u8;
    let mut capacity = 1usize;
    while entries > capacity && level < MAX_LEVEL {
        level += 1;
        capacity = capacity.saturating_mul(FANOUT);
    }
    level
}

/// The level of the segment merging a run of level-`run_level` segments holding
/// `entries` fragments: above the run, and at least its size class.
pub(crate) fn merged_level(run_level: u8, entries: usize) -> u8 {
    (run_level + 1).max(level_for(entries)).min(MAX_LEVEL)
}

/// The trailing run of segments to merge next, if any.
pub(crate) fn next_merge(segments: &[SegmentRef]) -> Option<Range<usize>> {
    let last = segments.last()?;
    if last.level >= MAX_LEVEL {
        return None;
    }
    let run = segments.iter().rev().take_while(|s| s.level == last.level).count();
    (run >= FANOUT).then(|| segments.len() - run..segments.len())
}

/// Whether `segment` is held in the root (format 2) rather than in a file of its own.
pub(crate) fn is_inline(segment: &Segment) -> bool {
    segment.fragments.len() <= INLINE_SEGMENT_FRAGMENTS
}

/// Reference describing `segment` stored at `path`.
pub(crate) fn segment_ref(path: String, level: u8, segment: &Segment) -> SegmentRef {
    SegmentRef {
        path,
        level,
        fragments: segment.fragments.len() as u64,
        live_rows: segment.fragments.iter().map(Fragment::live_rows).sum(),
        min_fragment_id: segment.fragments.first().map_or(0, |f| f.id),
        max_fragment_id: segment.fragments.last().map_or(0, |f| f.id),
        inline: None,
    }
}

/// Reference holding `segment` inline.
pub(crate) fn inline_ref(level: u8, segment: Segment) -> SegmentRef {
    let reference = segment_ref(String::new(), level, &segment);
    SegmentRef { inline: Some(segment.fragments), ..reference }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(level: u8) -> SegmentRef {
        SegmentRef { path: String::new(), level, fragments: 1, live_rows: 1, min_fragment_id: 0, max_fragment_id: 0, inline: None }
    }

    /// Simulates `n` commits of `per_commit` fragments; returns the final levels and
    /// how many fragment entries merges rewrote.
    fn simulate(n: usize, per_commit: usize) -> (Vec<u8>, usize) {
        let mut segs: Vec<SegmentRef> = Vec::new();
        let mut rewritten = 0usize;
        for _ in 0..n {
            let level = level_for(per_commit);
            segs.push(SegmentRef { fragments: per_commit as u64, ..seg(level) });
            while let Some(range) = next_merge(&segs) {
                let merged: u64 = segs[range.clone()].iter().map(|s| s.fragments).sum();
                let level = merged_level(segs[range.start].level, merged as usize);
                rewritten += merged as usize;
                segs.truncate(range.start);
                segs.push(SegmentRef { fragments: merged, level, ..seg(level) });
            }
        }
        (segs.iter().map(|s| s.level).collect(), rewritten)
    }

    #[test]
    fn root_stays_small_and_rewrites_are_amortised() {
        for per_commit in [1usize, 3, 100] {
            for n in [1usize, 7, 8, 64, 100, 10_000, 100_000 / per_commit] {
                let (levels, rewritten) = simulate(n, per_commit);
                let fragments = n * per_commit;
                // Full segments hold FANOUT^(MAX_LEVEL - start level) commits each.
                let full = n / FANOUT.pow((MAX_LEVEL - level_for(per_commit)) as u32);
                assert!(levels.len() <= full + (FANOUT - 1) * MAX_LEVEL as usize, "n={n}: {} segments", levels.len());
                assert!(levels.windows(2).all(|w| w[0] >= w[1]), "levels must not increase: {levels:?}");
                assert!(rewritten <= fragments * MAX_LEVEL as usize, "n={n}: rewrote {rewritten}");
            }
        }
    }

    #[test]
    fn levels_are_size_classes() {
        assert_eq!([0, 1, 2, 8, 9, 64, 65, 4096, 4097, 1_000_000].map(level_for), [0, 0, 1, 1, 2, 2, 3, 4, 4, 4]);
        assert_eq!(merged_level(0, 8), 1);
        assert_eq!(merged_level(1, 200), 3);
        assert_eq!(merged_level(4, 1), 4);
    }

    #[test]
    fn a_large_segment_is_never_merged_by_small_commits() {
        let mut segs = vec![SegmentRef { fragments: 100_000, ..seg(level_for(100_000)) }];
        for _ in 0..10_000 {
            segs.push(seg(0));
            while let Some(range) = next_merge(&segs) {
                assert!(range.start > 0, "the large segment is never part of a merge");
                let merged: u64 = segs[range.clone()].iter().map(|s| s.fragments).sum();
                let level = merged_level(segs[range.start].level, merged as usize);
                segs.truncate(range.start);
                segs.push(SegmentRef { fragments: merged, ..seg(level) });
            }
        }
    }
}
