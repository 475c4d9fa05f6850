//! Branches (FORMAT.md §17). A branch is a chain of versions of its own, under
//! `_branches/<chain>` (its own create-if-absent commit point: writers on different
//! branches never race), that shares the table's data files, segments and deletion
//! vectors. Its first version is the version it was made from, recorded as a `branch`
//! transaction; its fragments and rows take ids from a block of its own (claimed once
//! from the chain of block claims), so no two chains ever assign one id and a merge
//! keeps them. Its name is a chain of records under `_refs/branches/<name>`: made once,
//! then deleted (the chain first ends with a `delete_branch` version, so a writer that
//! still holds it fails instead of committing to a branch nobody can name).

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::VersionRef;
use crate::error::{BranchError, CorruptObject, OpenError, RefKind};
use crate::format::manifest::{
    field_id_block_start, format_for, row_id_block_start, Manifest, Operation, TransactionRecord, ROW_ID_BLOCKS,
};
use crate::format::refs::{usable_name, BlockClaim, BranchRecord, ChainId, BLOCKS, BRANCHES_DIR, MAIN_BRANCH};
use crate::storage::{CreateOutcome, Records};
use crate::table::Table;
use crate::txn::{CommitOptions, PreparedTransaction};

/// A branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BranchInfo {
    /// Its name.
    pub name: String,
    /// The branch it was made from and that branch's version it starts at (`None` for
    /// `main`).
    pub from: Option<(String, u64)>,
    /// When it was made (UTC; `None` for `main`).
    pub created_at: Option<DateTime<Utc>>,
}

/// A branch as its newest record has it.
pub(crate) struct Named {
    pub number: u64,
    pub record: BranchRecord,
}

fn checked(name: &str, action: &'static str) -> Result<(), BranchError> {
    if name == MAIN_BRANCH {
        return Err(BranchError::Main { action });
    }
    if usable_name(name) {
        Ok(())
    } else {
        Err(BranchError::BadName { name: name.to_string() })
    }
}

fn info(name: &str, record: &BranchRecord) -> BranchInfo {
    BranchInfo { name: name.to_string(), from: Some((record.from.clone(), record.from_version)), created_at: Some(record.at) }
}

impl Table {
    /// Makes branch `name` from version `from` of this handle's branch (a tag's version
    /// wherever it is; this branch's latest without), and returns a handle on it. A name
    /// in use is [`BranchError::Exists`].
    pub async fn create_branch(&self, name: &str, from: Option<&VersionRef>) -> Result<Table, BranchError> {
        checked(name, "made")?;
        let records = self.branch_records(name)?;
        if self.newest_branch(&records).await?.is_some_and(|n| !n.record.deleted) {
            return Err(BranchError::Exists { name: name.to_string() });
        }
        let source = match from {
            Some(at) => self.checkout_ref(at).await.map_err(|e| no_such_version(e, self, at))?,
            None => self.latest().await?,
        };
        let chain = self.env.new_uuid();
        let block = self.claim_block(chain).await?;
        let store = std::sync::Arc::new(self.store.for_chain(ChainId::Branch(chain), name)?);
        let first = self.first_version(&source, block);
        match store.create_version(first.version, crate::encode::manifest(&first)).await? {
            CreateOutcome::Created => {}
            // A fresh chain: nobody else creates in it.
            CreateOutcome::AlreadyExists => return Err(BranchError::Exists { name: name.to_string() }),
        }
        let record = BranchRecord {
            chain,
            from: source.branch_name().to_string(),
            from_chain: source.store.chain(),
            from_version: source.version(),
            block,
            at: self.env.clock.now(),
            deleted: false,
            writer: self.env.new_uuid(),
        };
        let number = self.newest_branch(&records).await?.map_or(0, |n| n.number + 1);
        let bytes = serde_json::to_vec(&record).expect("a branch record serializes");
        if !records.create(number, bytes.into()).await? {
            // Another process made (or deleted and made) the name meanwhile; this chain
            // is left to vacuum, named by no record.
            return Err(BranchError::Exists { name: name.to_string() });
        }
        let manifest = store.remember(first);
        Ok(Table::handle(store, Default::default(), self.env.clone(), manifest))
    }

    /// A handle on branch `name` at its latest version (`main`: the table's own chain).
    pub async fn branch(&self, name: &str) -> Result<Table, BranchError> {
        if name == MAIN_BRANCH {
            return Ok(self.on_chain(ChainId::Main, MAIN_BRANCH, None).await?);
        }
        let named = self.live_branch(name).await?;
        Ok(self.on_chain(ChainId::Branch(named.record.chain), name, None).await?)
    }

    /// Every branch, `main` first, then by name.
    pub async fn branches(&self) -> Result<Vec<BranchInfo>, BranchError> {
        let mut out = vec![BranchInfo { name: MAIN_BRANCH.to_string(), from: None, created_at: None }];
        out.extend(self.live_branches().await?.iter().map(|(name, named)| info(name, &named.record)));
        Ok(out)
    }

    /// Deletes branch `name`: its chain ends with a `delete_branch` version (a writer
    /// still on it fails, incompatible), then its name goes. What its versions reference
    /// and no other branch or tag does is vacuum's to remove; nothing is copied.
    pub async fn delete_branch(&self, name: &str) -> Result<BranchInfo, BranchError> {
        checked(name, "deleted")?;
        let named = self.live_branch(name).await?;
        let branch = self.on_chain(ChainId::Branch(named.record.chain), name, None).await?;
        if !branch.manifest.transactions.iter().any(|t| matches!(t.operation, Operation::DeleteBranch)) {
            let base = branch.manifest();
            let txn = PreparedTransaction {
                id: self.env.new_uuid(),
                read_version: base.version,
                read_schema: base.schema.clone(),
                read_next_fragment_id: base.next_fragment_id,
                operation: Operation::DeleteBranch,
                now: None,
                staged: Default::default(),
            };
            branch.commit(&txn, &CommitOptions::default()).await.map_err(|e| BranchError::Write(Box::new(e)))?;
        }
        let record = BranchRecord { deleted: true, at: self.env.clock.now(), writer: self.env.new_uuid(), ..named.record.clone() };
        let bytes = serde_json::to_vec(&record).expect("a branch record serializes");
        if !self.branch_records(name)?.create(named.number + 1, bytes.into()).await? {
            return Err(BranchError::NotFound { name: name.to_string() });
        }
        Ok(info(name, &named.record))
    }

    /// Every live branch but `main`, with its newest record, by name.
    pub(crate) async fn live_branches(&self) -> Result<Vec<(String, Named)>, BranchError> {
        let mut out = Vec::new();
        for folder in self.store.list_dir_names(BRANCHES_DIR).await? {
            let Some(name) = folder.strip_suffix('/').and_then(|f| f.rsplit('/').next()) else { continue };
            if !usable_name(name) || name == MAIN_BRANCH {
                continue;
            }
            if let Some(named) = self.newest_branch(&self.branch_records(name)?).await?.filter(|n| !n.record.deleted) {
                out.push((name.to_string(), named));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Branch `name`'s newest record, if it is live.
    pub(crate) async fn live_branch(&self, name: &str) -> Result<Named, BranchError> {
        if !usable_name(name) {
            return Err(BranchError::NotFound { name: name.to_string() });
        }
        match self.newest_branch(&self.branch_records(name)?).await? {
            Some(n) if !n.record.deleted => Ok(n),
            _ => Err(BranchError::NotFound { name: name.to_string() }),
        }
    }

    fn branch_records(&self, name: &str) -> Result<Records, BranchError> {
        Ok(self.store.records(&format!("{BRANCHES_DIR}/{name}"))?)
    }

    async fn newest_branch(&self, records: &Records) -> Result<Option<Named>, BranchError> {
        let Some((number, bytes)) = records.newest().await? else { return Ok(None) };
        let record = serde_json::from_slice(&bytes).map_err(|e| CorruptObject { path: records.describe(number), reason: e.to_string() })?;
        Ok(Some(Named { number, record }))
    }

    /// Claims the next free row-id block for chain `chain` (record `k` of the claims
    /// claims block `k`; of two claimers of one, one creates it, the other tries the
    /// next).
    async fn claim_block(&self, chain: Uuid) -> Result<u64, BranchError> {
        let claims = self.store.records(BLOCKS)?;
        let mut block = claims.newest().await?.map_or(0, |(n, _)| n + 1);
        loop {
            if block >= ROW_ID_BLOCKS {
                return Err(BranchError::NoBlocks { blocks: ROW_ID_BLOCKS });
            }
            let claim = BlockClaim { chain, at: self.env.clock.now() };
            if claims.create(block, serde_json::to_vec(&claim).expect("a claim serializes").into()).await? {
                return Ok(block);
            }
            block += 1;
        }
    }

    /// The first version of a branch made from `source` with block `block`: `source`'s
    /// state under a `branch` record, its ids (fragments, rows, fields) counting from
    /// the block.
    fn first_version(&self, source: &Table, block: u64) -> Manifest {
        let from = source.manifest();
        let start = row_id_block_start(block);
        let operation = Operation::Branch { from: source.branch_name().to_string(), version: from.version };
        let mut schema = from.schema.clone();
        schema.next_field_id = field_id_block_start(block);
        let record = TransactionRecord::own(self.env.new_uuid(), Some(from.version), operation);
        Manifest {
            format_version: format_for(&from.schema),
            version: from.version,
            parent_version: from.parent_version,
            timestamp: self.env.clock.now().max(from.timestamp),
            transactions: vec![record],
            schema,
            segments: from.segments.clone(),
            next_fragment_id: start,
            next_row_id: start,
            properties: from.properties.clone(),
        }
    }
}

/// A version to branch from that is not there, as the branch error it is.
fn no_such_version(e: OpenError, table: &Table, at: &VersionRef) -> BranchError {
    match e {
        OpenError::VersionNotFound { version, latest, .. } => {
            BranchError::NoSuchVersion { version, from: table.branch_name().to_string(), latest }
        }
        OpenError::UnknownRef { kind: RefKind::Tag, name } => BranchError::Tag(crate::error::TagError::NotFound { name }),
        other => {
            let _ = at;
            BranchError::Open(other)
        }
    }
}
