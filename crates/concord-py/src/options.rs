//! Arguments from Python to the library's types, with the CLI's rules and messages.

use std::time::Duration;

use arrow::datatypes::Schema as ArrowSchema;
use chrono::{DateTime, Utc};
use concord::{CommitOptions, Env, IsolationLevel, RetryPolicy, Schema, StoreResolver, Table, VersionRef};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::Error;

/// How a write commits (the CLI's `--isolation`, `--expect-version`,
/// `--idempotency-key`, `--max-retries` and `--timeout`, here in seconds) from the
/// Python package's dict of them (names as `WriteOptions` in python/concord/_table.py,
/// checked there).
pub(crate) fn commit_options(options: &Bound<'_, PyDict>) -> PyResult<CommitOptions> {
    let get = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> { Ok(options.get_item(name)?.filter(|v| !v.is_none())) };
    let isolation = get("isolation")?.map(|v| v.extract::<String>()).transpose()?.map(|s| parse_isolation(&s)).transpose()?;
    let mut retry = RetryPolicy::default();
    if let Some(n) = get("max_retries")? {
        retry.max_attempts = n.extract::<u32>()?.saturating_add(1);
    }
    if let Some(seconds) = get("timeout")? {
        retry.timeout = seconds_to_duration("timeout", seconds.extract()?)?;
    }
    let expect_version = get("expect_version")?.map(|v| v.extract()).transpose()?;
    let idempotency_key = get("idempotency_key")?.map(|v| v.extract()).transpose()?;
    Ok(CommitOptions { isolation, expect_version, retry, idempotency_key })
}

pub(crate) fn parse_isolation(s: &str) -> Result<IsolationLevel, Error> {
    IsolationLevel::parse(s).ok_or_else(|| Error::Usage(format!("'{s}' is not an isolation level; use serializable or snapshot")))
}

/// A number of seconds as a duration: finite, not negative, at most 100,000 days.
pub(crate) fn seconds_to_duration(what: &str, seconds: f64) -> Result<Duration, Error> {
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(Error::Usage(format!("{what} must be a number of seconds, 0 or more (got {seconds})")));
    }
    if seconds > concord::limits::MAX_DURATION_DAYS * 86400.0 {
        return Err(Error::Usage(format!(
            "{what} of {seconds} s is longer than the {} days a duration may be",
            concord::limits::MAX_DURATION_DAYS
        )));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| Error::Usage(format!("{what} of {seconds} s is not a usable duration ({e})")))
}

/// `500ms`, `30s`, `5m`, `1h`, `7d`, `1.5h`: the library's rule, as the CLI's.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, Error> {
    concord::time::parse_duration(s).map_err(|e| Error::Usage(e.to_string()))
}

/// A time (the CLI's `--as-of`): the library's one rule.
pub(crate) fn parse_time(s: &str) -> Result<DateTime<Utc>, Error> {
    concord::time::parse_time(s).map_err(|e| Error::Usage(e.to_string()))
}

/// Store settings from the environment, as the CLI reads them: object_store's names.
fn ambient_options() -> Vec<(String, String)> {
    std::env::vars().filter(|(k, _)| ["AWS_", "AZURE_", "GOOGLE_"].iter().any(|p| k.starts_with(p))).collect()
}

/// Where a table is: its URI and the settings to reach it (kept so that a worker
/// process, or a child forked from this one, can reach it again).
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub(crate) uri: String,
    /// Explicit settings (the CLI's `--storage-option`).
    pub(crate) options: Vec<(String, String)>,
    /// `dynamodb://<table>` (the CLI's `--commit-coordinator`); the environment's
    /// `CONCORD_COMMIT_COORDINATOR` when not given.
    pub(crate) coordinator: Option<String>,
    /// The branch (the CLI's `--branch`; `None`: `main`, the table's own chain).
    pub(crate) branch: Option<String>,
}

/// `memory://` tables live as long as the process, shared by every handle that names
/// them (one resolver holds the named in-memory stores).
static MEMORY: std::sync::OnceLock<StoreResolver> = std::sync::OnceLock::new();

impl Origin {
    fn resolver(&self) -> StoreResolver {
        let coordinator = self.coordinator.clone().or_else(|| std::env::var("CONCORD_COMMIT_COORDINATOR").ok());
        StoreResolver::new().with_ambient_options(ambient_options()).with_options(self.options.clone()).with_commit_coordinator(coordinator)
    }

    /// The settings the resolver uses, the environment's first (for the coordinator's
    /// table, as the CLI's `coordinator create-table`).
    pub(crate) fn settings(&self) -> Vec<(String, String)> {
        self.resolver().options()
    }

    pub(crate) fn location(&self) -> Result<concord::TableLocation, Error> {
        // Resolved with the settings first, so that settings that do not apply are refused.
        let location = self.resolver().resolve(&self.uri)?;
        if location.kind() == concord::store::StoreKind::Memory {
            return Ok(MEMORY.get_or_init(StoreResolver::new).resolve(&self.uri)?);
        }
        Ok(location)
    }

    /// The table on the origin's branch: at `version` of it, or its latest.
    pub(crate) async fn open(&self, version: Option<u64>) -> Result<Table, Error> {
        let location = self.location()?;
        Ok(match (&self.branch, version) {
            // Straight to the version: the latest one need not be readable.
            (None, Some(v)) => Table::open_version(location, Env::system(), v).await?,
            (None, None) => Table::open(location, Env::system()).await?,
            (Some(name), v) => {
                let branch = Table::open(location, Env::system()).await?.branch(name).await?;
                match v {
                    Some(v) => branch.checkout(v).await?,
                    None => branch,
                }
            }
        })
    }

    /// The same place, on `table`'s branch.
    pub(crate) fn on_branch_of(&self, table: &Table) -> Origin {
        let name = table.branch_name();
        Origin { branch: (name != concord::MAIN_BRANCH).then(|| name.to_string()), ..self.clone() }
    }
}

/// A version as Python gives it (`version=`): a number, or a str (digits are a number,
/// anything else a tag's name, as the CLI's `--version`).
pub(crate) fn version_ref(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<VersionRef>> {
    let Some(value) = value.filter(|v| !v.is_none()) else { return Ok(None) };
    if let Ok(text) = value.cast::<pyo3::types::PyString>() {
        let text = text.to_cow()?.trim().to_string();
        if text.is_empty() {
            return Err(Error::Usage("give a version number or a tag name, not an empty str".into()).into());
        }
        return Ok(Some(VersionRef::parse(&text)));
    }
    Ok(Some(VersionRef::Number(value.extract()?)))
}

/// A table schema from an Arrow schema: each field's type mapped to the Concord type
/// that holds its values, `not null` for non-nullable fields; then parsed and checked
/// as the string form is.
pub(crate) fn schema_from_arrow(schema: &ArrowSchema) -> Result<Schema, Error> {
    let mut parts = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let name = field.name();
        let sql = concord::ColumnType::from_arrow(field)
            .map_err(|why| Error::Usage(format!("column '{name}' has Arrow type {}: {why}", field.data_type())))?;
        // Any name, by the one naming rule: quoted, it parses back as itself.
        parts.push(format!("{} {sql}{}", concord::schema::quote_column_name(name), if field.is_nullable() { "" } else { " not null" }));
    }
    Ok(Schema::parse(&parts.join(", "))?)
}
