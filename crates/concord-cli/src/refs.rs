//! `consumer`, `tag` and `branch`: the named things a table keeps besides its versions
//! (change-feed cursors, names of versions, chains of their own).

use clap::Subcommand;
use concord::VersionRef;

use crate::exit::Failure;
use crate::output::{self, ListFormat};
use crate::Context;

#[derive(Subcommand)]
pub enum ConsumerAction {
    /// Create consumer NAME at version --to (default: the latest): its changes are those after it
    Create {
        uri: String,
        name: String,
        #[arg(long, value_name = "VERSION|TAG", value_parser = parse_version_ref)]
        to: Option<VersionRef>,
    },
    /// Move consumer NAME to version --to (default: the latest); exit 5 if another
    /// process moved it meanwhile (or since --expect-version)
    Advance {
        uri: String,
        name: String,
        #[arg(long, value_name = "VERSION|TAG", value_parser = parse_version_ref)]
        to: Option<VersionRef>,
        /// Move it only if it is still at this version
        #[arg(long = "expect-version", value_name = "V")]
        expect_version: Option<u64>,
    },
    /// List the consumers and their positions
    List {
        uri: String,
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormat,
    },
    /// Drop consumer NAME
    Drop { uri: String, name: String },
}

#[derive(Subcommand)]
pub enum TagAction {
    /// Name version --version (default: the latest) of the branch given with --branch
    /// (default: main) NAME; vacuum keeps it
    Create {
        uri: String,
        name: String,
        #[arg(long, value_name = "N")]
        version: Option<u64>,
    },
    /// Delete tag NAME (its version is vacuum's again)
    Delete { uri: String, name: String },
    /// List the tags
    List {
        uri: String,
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormat,
    },
}

#[derive(Subcommand)]
pub enum BranchAction {
    /// Make branch NAME from version --from (a number or a tag; default: the latest) of
    /// the branch given with --branch (default: main); no file is copied
    Create {
        uri: String,
        name: String,
        #[arg(long, value_name = "VERSION|TAG", value_parser = parse_version_ref)]
        from: Option<VersionRef>,
    },
    /// List the branches
    List {
        uri: String,
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormat,
    },
    /// Delete branch NAME (what only it references is vacuum's)
    Delete { uri: String, name: String },
    /// Replay branch NAME's transactions onto the branch it was made from, as one
    /// version (exit 3 if one is incompatible with what that branch did since)
    Merge {
        uri: String,
        name: String,
        /// The branch to merge into (the one NAME was made from; default: main)
        #[arg(long, value_name = "BRANCH")]
        into: Option<String>,
        /// Refuse (exit 5) if the target has versions of its own since NAME started or was last merged
        #[arg(long = "fast-forward-only")]
        fast_forward_only: bool,
        #[arg(long)]
        json: bool,
    },
}

/// A version number, or a tag's name.
pub fn parse_version_ref(s: &str) -> Result<VersionRef, String> {
    if s.trim().is_empty() {
        return Err("give a version number or a tag name".into());
    }
    Ok(VersionRef::parse(s.trim()))
}

/// `consumer`: create, move, list or drop a named cursor of the change feed.
pub async fn consumer(cx: &Context, action: ConsumerAction) -> Result<(), Failure> {
    match action {
        ConsumerAction::Create { uri, name, to } => {
            let table = cx.open(&uri).await?;
            let to = match to {
                Some(at) => Some(table.version_of(&at).await?),
                None => None,
            };
            let info = table.create_consumer(&name, to).await?;
            println!("consumer {} at version {}", info.name, info.version);
        }
        ConsumerAction::Advance { uri, name, to, expect_version } => {
            let table = cx.open(&uri).await?;
            let to = match to {
                Some(at) => Some(table.version_of(&at).await?),
                None => None,
            };
            let info = table.advance_consumer(&name, to, expect_version).await?;
            println!("consumer {} at version {}", info.name, info.version);
        }
        ConsumerAction::List { uri, format } => output::print_consumers(&cx.open(&uri).await?.consumers().await?, format)?,
        ConsumerAction::Drop { uri, name } => {
            let info = cx.open(&uri).await?.drop_consumer(&name).await?;
            println!("dropped consumer {} (it was at version {})", info.name, info.version);
        }
    }
    Ok(())
}

/// `tag`: create, delete or list names of versions.
pub async fn tag(cx: &Context, action: TagAction) -> Result<(), Failure> {
    match action {
        TagAction::Create { uri, name, version } => {
            let tag = cx.open(&uri).await?.create_tag(&name, version).await?;
            println!("tag {} names version {} of branch {}", tag.name, tag.version, tag.branch);
        }
        TagAction::Delete { uri, name } => {
            let tag = cx.open(&uri).await?.delete_tag(&name).await?;
            println!("deleted tag {} (it named version {} of branch {})", tag.name, tag.version, tag.branch);
        }
        TagAction::List { uri, format } => output::print_tags(&cx.open(&uri).await?.tags().await?, format)?,
    }
    Ok(())
}

/// `branch`: create, list, delete or merge chains of versions of their own.
pub async fn branch(cx: &Context, action: BranchAction) -> Result<(), Failure> {
    match action {
        BranchAction::Create { uri, name, from } => {
            let branch = cx.open(&uri).await?.create_branch(&name, from.as_ref()).await?;
            println!("created branch {} at version {}", branch.branch_name(), branch.version());
        }
        BranchAction::List { uri, format } => output::print_branches(&cx.open(&uri).await?.branches().await?, format)?,
        BranchAction::Delete { uri, name } => {
            cx.open(&uri).await?.delete_branch(&name).await?;
            println!("deleted branch {name}");
        }
        BranchAction::Merge { uri, name, into, fast_forward_only, json } => {
            let info = cx.open(&uri).await?.merge_branch(&name, into.as_deref(), fast_forward_only).await?;
            if json {
                println!("{}", serde_json::to_string(&info).expect("a merge serializes"));
            } else {
                match (info.version, info.branch_versions) {
                    (Some(version), Some((first, last))) => println!(
                        "merged {} transactions of branch {} (its versions {first} to {last}) into {} as version {version}",
                        info.transactions, info.branch, info.into
                    ),
                    _ => println!("nothing to merge: branch {} has no transaction not merged into {}", info.branch, info.into),
                }
            }
        }
    }
    Ok(())
}
