//! Commits through DynamoDB, for S3-compatible stores without conditional writes.
//!
//! Protocol for version `v` (FORMAT.md, "DynamoDB commit coordinator"):
//! 1. write the manifest to a unique staging object `_staging/<v>-<uuid>.json`;
//! 2. conditional PutItem `(tablePath, version = v)` naming the staging object: exactly
//!    one writer wins `v`;
//! 3. copy the staging manifest to `_versions/<name of v>`: the durable commit point;
//!    any reader or writer that finds the row incomplete performs it;
//! 4. mark the row complete; then delete the staging object.
//!
//! Failure behaviour: after an ambiguous PutItem the writer reads the row back (its own
//! staging name means it won). A staging object is deleted only when no row can name
//! it (the conditional put was refused) or the row is complete.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType};
use aws_sdk_dynamodb::Client;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use super::coordinator::{CommitCoordinator, CoordinatorCapabilities, CreateOutcome};
use super::location::{StoreKind, TableLocation};
use super::object_store_coordinator::{LatestLookup, ObjectStoreCoordinator};
use super::table_store::get_metadata;
use crate::error::{DynamoDbError, StorageCause, StorageError, UriError};
use crate::format::naming;

const KEY_TABLE: &str = "tablePath";
const KEY_VERSION: &str = "version";
const ATTR_STAGING: &str = "staging";
const ATTR_COMPLETE: &str = "complete";

/// The protocol's steps, for crash tests (feature `testing`):
/// `DynamoDbCoordinator::create_version_until` stops after the given one, as a writer
/// killed there would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
pub enum ProtocolStep {
    /// The staging manifest is written.
    StagingWritten,
    /// The conditional row is written.
    RowWritten,
    /// The staging manifest is copied to the version's name.
    Copied,
    /// The row is marked complete.
    RowCompleted,
}

/// Commits through a DynamoDB table (see the module docs and FORMAT.md §13).
#[derive(Debug)]
pub struct DynamoDbCoordinator {
    client: Client,
    /// The DynamoDB table holding the commit rows.
    table: String,
    /// Partition key: the Concord table's URI, normalised.
    table_path: String,
    store: Arc<dyn ObjectStore>,
    root: Path,
    /// Final version objects: read, listed, and (from staging) written here.
    objects: ObjectStoreCoordinator,
    display_prefix: String,
    /// Test seam: the next N successful PutItems report an error, as if the response
    /// was lost.
    lose_put_responses: AtomicU32,
    /// Requests made, by this coordinator and the chains under it.
    requests: Arc<AtomicU64>,
}

/// `dynamodb://<table>` as the commit coordinator of the S3 table at `location`.
pub(crate) fn coordinator_for(spec: &str, location: &TableLocation, options: &[(String, String)]) -> Result<TableLocation, UriError> {
    let coordinator = DynamoDbCoordinator::for_location(spec, location, options)?;
    Ok(location.clone().with_coordinator(Arc::new(coordinator)))
}

fn table_name(spec: &str) -> Result<String, UriError> {
    match spec.trim().strip_prefix("dynamodb://") {
        Some(name) if !name.is_empty() && !name.contains('/') => Ok(name.to_string()),
        _ => Err(UriError::CoordinatorSpec { spec: spec.into() }),
    }
}

/// A DynamoDB client from object_store-style options: `AWS_REGION`, credentials, and
/// the endpoint `AWS_ENDPOINT_URL_DYNAMODB` (else `AWS_ENDPOINT_URL`).
fn client(spec: &str, options: &[(String, String)]) -> Result<Client, UriError> {
    let get = |names: &[&str]| options.iter().rev().find(|(k, _)| names.contains(&k.to_ascii_lowercase().as_str())).map(|(_, v)| v.clone());
    let region = get(&["aws_region", "region", "aws_default_region"]).unwrap_or_else(|| "us-east-1".into());
    let (Some(key_id), Some(secret)) = (get(&["aws_access_key_id", "access_key_id"]), get(&["aws_secret_access_key", "secret_access_key"]))
    else {
        return Err(UriError::CoordinatorCredentials { spec: spec.into() });
    };
    let token = get(&["aws_session_token", "session_token", "aws_token"]);
    let mut config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(Credentials::new(key_id, secret, token, None, "concord"));
    if let Some(endpoint) =
        get(&["aws_endpoint_url_dynamodb"]).or_else(|| get(&["aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint"]))
    {
        config = config.endpoint_url(endpoint);
    }
    Ok(Client::from_conf(config.build()))
}

/// Creates the DynamoDB table the coordinator uses (key: `tablePath` string, `version`
/// number; on-demand billing). `Ok(false)` if it already exists.
pub async fn create_coordinator_table(spec: &str, options: &[(String, String)]) -> Result<bool, UriError> {
    let table = table_name(spec)?;
    let client = client(spec, options)?;
    let key = |name: &str, kind: KeyType| KeySchemaElement::builder().attribute_name(name).key_type(kind).build().expect("complete");
    let attr = |name: &str, kind: ScalarAttributeType| {
        AttributeDefinition::builder().attribute_name(name).attribute_type(kind).build().expect("complete")
    };
    let result = client
        .create_table()
        .table_name(&table)
        .key_schema(key(KEY_TABLE, KeyType::Hash))
        .key_schema(key(KEY_VERSION, KeyType::Range))
        .attribute_definitions(attr(KEY_TABLE, ScalarAttributeType::S))
        .attribute_definitions(attr(KEY_VERSION, ScalarAttributeType::N))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    match result {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => Ok(false),
        Err(e) => Err(UriError::CoordinatorSetup { spec: spec.into(), source: classify(&table, &e) }),
    }
}

/// A DynamoDB failure by its error code (the SDK's typed metadata, not its message).
fn classify<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static, R: std::fmt::Debug>(
    table: &str,
    e: &SdkError<E, R>,
) -> DynamoDbError {
    let message = DisplayErrorContext(e).to_string();
    match e.code() {
        Some("ResourceNotFoundException") => DynamoDbError::TableNotFound { table: table.to_string() },
        Some("ProvisionedThroughputExceededException" | "ThrottlingException" | "RequestLimitExceeded") => {
            DynamoDbError::Throttled { message }
        }
        code => DynamoDbError::Request { code: code.map(str::to_string), message },
    }
}

/// An error of a DynamoDB call as a storage error naming the table and version.
fn dynamo_error<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static, R: std::fmt::Debug>(
    action: &'static str,
    table: &str,
    version: u64,
    e: SdkError<E, R>,
) -> StorageError {
    StorageError::new(action, format!("dynamodb://{table} (version {version})"), classify(table, &e))
}

/// A commit row as read back.
struct Row {
    staging: String,
    complete: bool,
}

impl DynamoDbCoordinator {
    /// The coordinator `dynamodb://<table>` for the S3 table at `location`, configured
    /// from object_store-style `options` (region, credentials, endpoint).
    pub fn for_location(spec: &str, location: &TableLocation, options: &[(String, String)]) -> Result<Self, UriError> {
        if location.kind != StoreKind::S3 {
            return Err(UriError::CoordinatorNotS3 { spec: spec.into(), uri: location.uri.clone() });
        }
        Ok(Self::new(client(spec, options)?, table_name(spec)?, location))
    }

    /// DynamoDB requests made so far (for request-count reports).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    fn new(client: Client, table: String, location: &TableLocation) -> Self {
        let objects = ObjectStoreCoordinator::new(location.store.clone(), location.root.clone(), LatestLookup::OrderedListing)
            .with_display_prefix(location.display_prefix.clone())
            .with_lister(location.lister.clone());
        DynamoDbCoordinator {
            client,
            table,
            table_path: location.uri.trim_end_matches('/').to_string(),
            store: location.store.clone(),
            root: location.root.clone(),
            objects,
            display_prefix: location.display_prefix.clone(),
            lose_put_responses: AtomicU32::new(0),
            requests: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Test seam (feature `testing`): the next `n` PutItems that succeed report a
    /// failure instead, as if their responses were lost.
    #[cfg(feature = "testing")]
    pub fn lose_put_responses(&self, n: u32) {
        self.lose_put_responses.store(n, Ordering::SeqCst);
    }

    fn storage_error(&self, action: &'static str, path: &Path, source: impl Into<StorageCause>) -> StorageError {
        StorageError::new(action, format!("{}{path}", self.display_prefix), source)
    }

    fn key(&self, version: u64) -> HashMap<String, AttributeValue> {
        HashMap::from([
            (KEY_TABLE.to_string(), AttributeValue::S(self.table_path.clone())),
            (KEY_VERSION.to_string(), AttributeValue::N(version.to_string())),
        ])
    }

    async fn get_row(&self, version: u64) -> Result<Option<Row>, StorageError> {
        self.count();
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(self.key(version)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| dynamo_error("reading the commit row of", &self.table, version, e))?;
        Ok(out.item().map(row_of))
    }

    /// The newest row: (version, row).
    async fn newest_row(&self) -> Result<Option<(u64, Row)>, StorageError> {
        self.count();
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#t = :t")
            .expression_attribute_names("#t", KEY_TABLE)
            .expression_attribute_values(":t", AttributeValue::S(self.table_path.clone()))
            .scan_index_forward(false)
            .limit(1)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| dynamo_error("querying the newest commit row of", &self.table, 0, e))?;
        Ok(out.items().first().and_then(|item| {
            let version = match item.get(KEY_VERSION) {
                Some(AttributeValue::N(n)) => n.parse().ok()?,
                _ => return None,
            };
            Some((version, row_of(item)))
        }))
    }

    /// Steps 2-4 for a row that names `staging`: copy it to the final name (idempotent:
    /// same bytes), mark the row complete, delete the staging object.
    async fn finish(&self, version: u64, staging: &str, bytes: Option<Bytes>) -> Result<Bytes, StorageError> {
        self.copy(version, staging, bytes).await?;
        self.complete(version).await?;
        self.delete_staging(staging).await;
        self.objects
            .read_version(version)
            .await?
            .ok_or_else(|| self.storage_error("reading", &naming::version_path(&self.root, version), StorageCause::CopiedButUnreadable))
    }

    /// Step 3: the staging manifest (`bytes`, or read from `staging`) to the final name.
    async fn copy(&self, version: u64, staging: &str, bytes: Option<Bytes>) -> Result<(), StorageError> {
        let staging_path = Path::from(staging);
        let final_path = naming::version_path(&self.root, version);
        let repairing = bytes.is_none();
        let bytes = match bytes {
            Some(b) => b,
            None => match get_metadata(self.store.as_ref(), &staging_path).await {
                Ok(found) => found,
                // Already copied and cleaned up by someone else.
                Err(StorageCause::ObjectStore(object_store::Error::NotFound { .. })) => {
                    return self.objects.read_version(version).await?.map(|_| ()).ok_or_else(|| {
                        self.storage_error("reading", &staging_path, StorageCause::StagingManifestGone { staging: staging.to_string() })
                    })
                }
                Err(e) => return Err(self.storage_error("reading", &staging_path, e)),
            },
        };
        // A repairer (no bytes given) whose copy is already there writes nothing: on
        // stores whose PUT is not atomic (s3rver), rewriting the object lets a reader
        // meet it half written.
        if repairing {
            if let Ok(meta) = self.store.head(&final_path).await {
                if meta.size == bytes.len() as u64 {
                    return Ok(());
                }
            }
        }
        self.store.put(&final_path, PutPayload::from_bytes(bytes)).await.map_err(|e| self.storage_error("writing", &final_path, e))?;
        Ok(())
    }

    async fn complete(&self, version: u64) -> Result<(), StorageError> {
        self.count();
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(version)))
            .update_expression("SET #c = :c")
            .expression_attribute_names("#c", ATTR_COMPLETE)
            .expression_attribute_values(":c", AttributeValue::Bool(true))
            .send()
            .await
            .map_err(|e| dynamo_error("completing the commit row of", &self.table, version, e))?;
        Ok(())
    }

    async fn delete_staging(&self, staging: &str) {
        let _ = self.store.delete(&Path::from(staging)).await;
    }

    /// Test seam (feature `testing`): runs the protocol for `version` up to and
    /// including `stop`, then returns as a writer killed there would (crash tests).
    /// `Ok(None)`: another writer holds the version.
    #[cfg(feature = "testing")]
    pub async fn create_version_until(
        &self,
        version: u64,
        manifest: Bytes,
        stop: ProtocolStep,
    ) -> Result<Option<CreateOutcome>, StorageError> {
        self.run(version, manifest, Some(stop)).await
    }

    /// The protocol, stopping after `stop` (`None`: run to the end; then the result is
    /// always `Some`).
    async fn run(&self, version: u64, manifest: Bytes, stop: Option<ProtocolStep>) -> Result<Option<CreateOutcome>, StorageError> {
        let stop_after = |step: ProtocolStep| stop == Some(step);
        let staging = self.root.clone().join("_staging").join(format!("{version:020}-{}.json", uuid::Uuid::new_v4())).to_string();
        let staging_path = Path::from(staging.as_str());
        self.store
            .put(&staging_path, PutPayload::from_bytes(manifest.clone()))
            .await
            .map_err(|e| self.storage_error("writing", &staging_path, e))?;
        if stop_after(ProtocolStep::StagingWritten) {
            return Ok(None);
        }
        self.count();
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.key(version)))
            .item(ATTR_STAGING, AttributeValue::S(staging.clone()))
            .item(ATTR_COMPLETE, AttributeValue::Bool(false))
            .condition_expression("attribute_not_exists(#v)")
            .expression_attribute_names("#v", KEY_VERSION)
            .send()
            .await;
        let lost = put.is_ok() && self.lose_put_responses.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        match put {
            Ok(_) if !lost => {}
            // The row exists. Usually another writer's; but if a response of ours was
            // lost and the SDK retried the put, the row is ours: read it to know.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => {
                match self.get_row(version).await? {
                    Some(row) if row.staging == staging => {}
                    _ => {
                        // No row can name our staging object: remove it.
                        self.delete_staging(&staging).await;
                        return Ok(Some(CreateOutcome::AlreadyExists));
                    }
                }
            }
            // Ambiguous (an error, or a response lost after the put landed): the row
            // tells. Never delete the staging object here: a row may name it.
            other => {
                let cause = match other {
                    Err(e) => dynamo_error("writing the commit row of", &self.table, version, e),
                    Ok(_) => StorageError::new(
                        "writing the commit row of",
                        format!("dynamodb://{} (version {version})", self.table),
                        DynamoDbError::Request { code: None, message: "response lost (injected)".into() },
                    ),
                };
                match self.get_row(version).await? {
                    Some(row) if row.staging == staging => {}
                    Some(_) => return Ok(Some(CreateOutcome::AlreadyExists)),
                    None => return Err(cause),
                }
            }
        }
        if stop_after(ProtocolStep::RowWritten) {
            return Ok(None);
        }
        self.copy(version, &staging, Some(manifest)).await?;
        if stop_after(ProtocolStep::Copied) {
            return Ok(None);
        }
        self.complete(version).await?;
        if stop_after(ProtocolStep::RowCompleted) {
            return Ok(None);
        }
        self.delete_staging(&staging).await;
        Ok(Some(CreateOutcome::Created))
    }
}

fn row_of(item: &HashMap<String, AttributeValue>) -> Row {
    let staging = match item.get(ATTR_STAGING) {
        Some(AttributeValue::S(s)) => s.clone(),
        _ => String::new(),
    };
    let complete = matches!(item.get(ATTR_COMPLETE), Some(AttributeValue::Bool(true)));
    Row { staging, complete }
}

#[async_trait]
impl CommitCoordinator for DynamoDbCoordinator {
    fn capabilities(&self) -> CoordinatorCapabilities {
        CoordinatorCapabilities { atomic_create: true, advisory_hint: false, read_while_creating: false }
    }

    async fn create_version(&self, version: u64, manifest: Bytes) -> Result<CreateOutcome, StorageError> {
        Ok(self.run(version, manifest, None).await?.expect("a full run always ends in an outcome"))
    }

    async fn read_version(&self, version: u64) -> Result<Option<Bytes>, StorageError> {
        if let Some(found) = self.objects.read_version(version).await? {
            return Ok(Some(found));
        }
        match self.get_row(version).await? {
            None => Ok(None),
            // Committed but not yet copied (its writer stopped): finish it.
            Some(row) => Ok(Some(self.finish(version, &row.staging, None).await?)),
        }
    }

    async fn latest_version(&self, known: Option<u64>) -> Result<Option<u64>, StorageError> {
        match self.newest_row().await? {
            Some((version, row)) => {
                if !row.complete {
                    self.finish(version, &row.staging, None).await?;
                }
                Ok(Some(version))
            }
            // No rows: a table whose versions predate the coordinator, or none.
            None => self.objects.latest_version(known).await,
        }
    }

    async fn list_versions(&self) -> Result<Vec<u64>, StorageError> {
        self.latest_version(None).await?;
        self.objects.list_versions().await
    }

    /// The row first, then the version object: a reader in between still finds the
    /// object; one after finds neither (never a row naming a staging manifest that
    /// is gone, which it would try to finish).
    async fn remove_version(&self, version: u64) -> Result<(), StorageError> {
        self.count();
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(self.key(version)))
            .send()
            .await
            .map_err(|e| dynamo_error("removing the commit row of", &self.table, version, e))?;
        self.objects.remove_version(version).await
    }

    fn describe_version(&self, version: u64) -> String {
        self.objects.describe_version(version)
    }

    fn chain(&self, prefix: &str) -> Option<Arc<dyn CommitCoordinator>> {
        Some(Arc::new(DynamoDbCoordinator {
            client: self.client.clone(),
            table: self.table.clone(),
            // A chain's rows have a partition of their own.
            table_path: format!("{}/{prefix}", self.table_path),
            store: self.store.clone(),
            root: naming::resolve(&self.root, prefix),
            objects: self.objects.chain_under(prefix),
            display_prefix: self.display_prefix.clone(),
            lose_put_responses: AtomicU32::new(0),
            requests: self.requests.clone(),
        }))
    }

    fn sibling(&self, root: &Path) -> Option<Arc<dyn CommitCoordinator>> {
        // Rows are keyed by a table's URI: the store's part of this one's, then the root.
        let store_uri = self.table_path.strip_suffix(self.root.as_ref())?;
        Some(Arc::new(DynamoDbCoordinator {
            client: self.client.clone(),
            table: self.table.clone(),
            table_path: format!("{store_uri}{root}"),
            store: self.store.clone(),
            root: root.clone(),
            objects: self.objects.at_root(root),
            display_prefix: self.display_prefix.clone(),
            lose_put_responses: AtomicU32::new(0),
            requests: self.requests.clone(),
        }))
    }
}
