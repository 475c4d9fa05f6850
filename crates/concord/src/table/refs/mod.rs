//! References (FORMAT.md §17): tags name versions; branches are chains of versions of
//! their own that share the table's data files and merge back.

mod branches;
mod merge;
mod tags;

pub use branches::BranchInfo;
pub use merge::MergeInfo;
pub use tags::{TagInfo, VersionRef};
