//! How the command line reaches tables: the store resolver, the environment and the
//! branch (`--branch`) every command shares, and the one door of write commands.

use concord::{Env, StoreResolver, Table, TableLocation, VersionRef, Write};

use crate::exit::Failure;
use crate::{output, progress, VersionArgs, WriteArgs};

pub(crate) struct Context {
    pub(crate) resolver: StoreResolver,
    pub(crate) env: Env,
    /// The branch commands read and write (`--branch`; main without).
    pub(crate) branch: Option<String>,
}

impl Context {
    pub(crate) fn resolver_has_coordinator(&self) -> bool {
        self.resolver.commit_coordinator().is_some()
    }

    pub(crate) fn location(&self, uri: &str) -> Result<TableLocation, Failure> {
        Ok(self.resolver.resolve(uri)?)
    }

    pub(crate) async fn open(&self, uri: &str) -> Result<Table, Failure> {
        let table = Table::open(self.location(uri)?, self.env.clone()).await?;
        Ok(match &self.branch {
            Some(name) => table.branch(name).await?,
            None => table,
        })
    }

    /// Runs a write command: commit it, or with --stage only prepare and record it
    /// (with its isolation, expected version and idempotency key).
    pub(crate) async fn write(&self, uri: &str, op: Write, write: &WriteArgs) -> Result<(), Failure> {
        write.check_stage()?;
        let table = self.open(uri).await?;
        let bar = progress::Bar::for_terminal();
        let table = match &bar {
            Some(bar) => table.with_progress(bar.reporter()),
            None => table,
        };
        if write.stage {
            let txn = table.prepare(op).await?;
            let id = table.stage(&txn, &write.options()).await?;
            output::print_staged(id, write.json)?;
        } else {
            let outcome = table.write(op, &write.options()).await;
            drop(bar);
            output::print_commit(&outcome?, write.json)?;
        }
        Ok(())
    }

    pub(crate) async fn open_at(&self, uri: &str, at: &VersionArgs) -> Result<Table, Failure> {
        Ok(match (&at.version, at.as_of) {
            // Straight to the version: the latest one need not be readable.
            (Some(VersionRef::Number(v)), _) if self.branch.is_none() => {
                Table::open_version(self.location(uri)?, self.env.clone(), *v).await?
            }
            (Some(at), _) => self.open(uri).await?.checkout_ref(at).await?,
            (None, Some(t)) => self.open(uri).await?.checkout_as_of(t).await?,
            (None, None) => self.open(uri).await?,
        })
    }
}
