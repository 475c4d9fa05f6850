//! Errors of tags, branches and branch merges.

use super::{CommitError, CorruptObject, IncompatibleReason, OpenError, StorageError, WriteError};

/// Creating, reading or deleting a tag failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TagError {
    /// No tag of that name.
    #[error("the table has no tag named '{name}'")]
    NotFound {
        /// The name.
        name: String,
    },
    /// A tag of that name exists already (another process may have just made it).
    #[error("the table has a tag named '{name}' already (version {version} of branch {branch})")]
    Exists {
        /// The name.
        name: String,
        /// The version it names.
        version: u64,
        /// The branch it was tagged on.
        branch: String,
    },
    /// Another process changed the tag at the same time: nothing was changed.
    #[error("tag '{name}' was changed by another process meanwhile (it named version {expected}, now {found}); read it again")]
    Moved {
        /// The name.
        name: String,
        /// The version it named as this process read it.
        expected: u64,
        /// The version its newest record names.
        found: u64,
    },
    /// A name that is not usable.
    #[error("'{name}' is not a usable tag name: use letters, digits, '-', '_' and '.', at most 128 bytes, not starting with '.' and not only digits")]
    BadName {
        /// The name.
        name: String,
    },
    /// The version to tag is not a retained version of the branch.
    #[error("version {version} of branch {branch} cannot be tagged: it is not retained (the branch's latest is {latest})")]
    NoSuchVersion {
        /// The version asked for.
        version: u64,
        /// The branch.
        branch: String,
        /// The branch's latest version.
        latest: u64,
    },
    /// Reading the table failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A tag's record does not decode.
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    /// A storage request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Merging a branch failed. Nothing was merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// A branch merged into itself.
    #[error("branch '{branch}' cannot be merged into itself")]
    IntoItself {
        /// The branch.
        branch: String,
    },
    /// A branch merges only into the branch it was made from.
    #[error("branch '{branch}' was made from '{from}', not '{into}': it merges only into '{from}'")]
    NotFromTarget {
        /// The branch.
        branch: String,
        /// The branch it was made from.
        from: String,
        /// The branch asked for.
        into: String,
    },
    /// A fast-forward-only merge, and the target has versions of its own since the
    /// branch started (or was last merged).
    #[error("branch '{into}' moved since the branch started at its version {base} (its latest is {latest}): not a fast-forward merge")]
    TargetMoved {
        /// The target.
        into: String,
        /// The target's version the branch started from.
        base: u64,
        /// The target's latest version.
        latest: u64,
    },
    /// The branch or the target does not exist.
    #[error(transparent)]
    Branch(#[from] BranchError),
    /// Committing the merge failed: a transaction of the branch is incompatible with what
    /// the target did since (a conflict), or too much contention.
    #[error(transparent)]
    Commit(CommitError),
    /// A transaction of the branch has no replay on the target (nothing to do with a
    /// concurrent commit: the branch's own history).
    #[error("the branch's transaction at its version {branch_version} ({operation}) cannot be replayed on the target: {reason}")]
    Refused {
        /// The branch's version holding it.
        branch_version: u64,
        /// What it did.
        operation: String,
        /// Why.
        reason: IncompatibleReason,
    },
    /// Reading the table failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A storage request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Creating, opening or deleting a branch failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BranchError {
    /// No branch of that name.
    #[error("the table has no branch named '{name}'")]
    NotFound {
        /// The name.
        name: String,
    },
    /// A branch of that name exists already (another process may have just made it).
    #[error("the table has a branch named '{name}' already")]
    Exists {
        /// The name.
        name: String,
    },
    /// `main` cannot be made, deleted or merged into itself.
    #[error("branch 'main' is the table's own chain: it cannot be {action}")]
    Main {
        /// What was asked.
        action: &'static str,
    },
    /// A name that is not usable.
    #[error("'{name}' is not a usable branch name: use letters, digits, '-', '_' and '.', at most 128 bytes, not starting with '.' and not only digits")]
    BadName {
        /// The name.
        name: String,
    },
    /// The version to start from is not a retained version of the source branch.
    #[error("a branch cannot start at version {version} of branch {from}: it is not retained (its latest is {latest})")]
    NoSuchVersion {
        /// The version asked for.
        version: u64,
        /// The branch it was asked of.
        from: String,
        /// That branch's latest version.
        latest: u64,
    },
    /// Every row-id block is claimed (FORMAT.md §6): the table can have no more branches.
    #[error("the table's {blocks} row-id blocks for branches are all claimed: no more branches can be made")]
    NoBlocks {
        /// Blocks there are.
        blocks: u64,
    },
    /// The tag named does not exist.
    #[error(transparent)]
    Tag(#[from] TagError),
    /// Committing the end of the branch's chain failed.
    #[error(transparent)]
    Write(Box<WriteError>),
    /// Reading the table failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A branch's record does not decode.
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    /// A storage request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}
