//! Errors of storage: requests that failed, objects that do not decode, URIs that name
//! no store.

/// A storage request failed. Retrying may help if the store was unreachable.
#[derive(Debug, thiserror::Error)]
#[error("storage error while {action} '{path}': {source}")]
#[non_exhaustive]
pub struct StorageError {
    /// What was being done: "reading", "creating", "listing", ...
    pub action: &'static str,
    /// The object or record, named so that the user can find it.
    pub path: String,
    /// Why the request failed.
    #[source]
    pub source: StorageCause,
}

impl StorageError {
    /// `action` on `path` failed because of `source`.
    pub fn new(action: &'static str, path: impl Into<String>, source: impl Into<StorageCause>) -> Self {
        StorageError { action, path: path.into(), source: source.into() }
    }

    /// Whether the store refused the request for good, so that nothing was written
    /// and asking again will not help: permission denied, unauthenticated, a
    /// read-only or full filesystem, an operation the store does not support. (A
    /// timeout, a reset connection or a server error is not: the request may have
    /// been carried out.)
    pub fn is_definite_refusal(&self) -> bool {
        use std::io::ErrorKind as Io;
        let StorageCause::ObjectStore(e) = &self.source else { return false };
        match e {
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::NotImplemented { .. } => true,
            // The local filesystem's errors come wrapped: look for the OS's refusal.
            _ => {
                let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
                while let Some(c) = cause {
                    if let Some(io) = c.downcast_ref::<std::io::Error>() {
                        return matches!(io.kind(), Io::PermissionDenied | Io::ReadOnlyFilesystem | Io::StorageFull | Io::QuotaExceeded);
                    }
                    cause = c.source();
                }
                false
            }
        }
    }

    /// The object store's error, when that is the cause.
    pub fn object_store_error(&self) -> Option<&object_store::Error> {
        match &self.source {
            StorageCause::ObjectStore(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a storage request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageCause {
    /// The object store's client failed (network, permissions, throttling, ...).
    #[error(transparent)]
    ObjectStore(#[from] object_store::Error),
    /// The DynamoDB commit coordinator's table failed.
    #[error(transparent)]
    DynamoDb(#[from] DynamoDbError),
    /// A metadata object is larger than any Concord writes.
    #[error(transparent)]
    Oversized(#[from] OversizedObject),
    /// The store said the object exists, but reading it finds nothing (a store that is
    /// not read-after-write consistent, or a spurious precondition failure).
    #[error("the store reported it as existing, but it cannot be read")]
    ReportedButUnreadable,
    /// An announced transaction's withdrawal did not reach the chain within its budget
    /// (cooperative commits): it may still be carried, until its deadline.
    #[error("its withdrawal did not reach the version chain in time; another writer's commit may still carry it (until its announcement's deadline)")]
    WithdrawalUnsettled,
    /// A DynamoDB commit row names a staging manifest that is gone, and the version
    /// object was never written.
    #[error("the commit row names staging manifest '{staging}', which is gone, and the version was never copied")]
    StagingManifestGone {
        /// The staging manifest's path.
        staging: String,
    },
    /// The table's commit coordinator (one of the caller's own) keeps no chain of
    /// records besides the versions: named records (consumers, tags, branches,
    /// multi-table commits) need one that does.
    #[error("the table's commit coordinator keeps no named records (consumers, tags, branches and multi-table commits need the store's own conditional writes or the DynamoDB coordinator)")]
    NoNamedRecords,
    /// A version was just written (copied from its staging manifest) but does not read.
    #[error("the version was just copied but cannot be read")]
    CopiedButUnreadable,
}

/// A DynamoDB request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DynamoDbError {
    /// The table holding the commit rows does not exist.
    #[error("the DynamoDB table '{table}' does not exist")]
    TableNotFound {
        /// The DynamoDB table's name.
        table: String,
    },
    /// DynamoDB refused the request for its rate (after the client's retries).
    #[error("DynamoDB throttled the request: {message}")]
    Throttled {
        /// DynamoDB's message.
        message: String,
    },
    /// Any other failure: the client's description, with its error code if any.
    #[error("{message}")]
    Request {
        /// DynamoDB's error code (e.g. `AccessDeniedException`), if it sent one.
        code: Option<String>,
        /// The client's description of the failure.
        message: String,
    },
}

/// A metadata object larger than any Concord writes (the cause of a storage error).
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the object is {size} bytes, more than the {limit} bytes of any metadata Concord writes: it is corrupt or was not written by Concord"
)]
#[non_exhaustive]
pub struct OversizedObject {
    /// The object's size.
    pub size: u64,
    /// The largest metadata object Concord reads.
    pub limit: u64,
}

impl OversizedObject {
    /// An object of `size` bytes, over `limit`.
    pub fn new(size: u64, limit: u64) -> Self {
        OversizedObject { size, limit }
    }
}

/// An object exists but its bytes cannot be decoded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("'{path}' is corrupt or truncated ({reason}); other versions stay readable")]
#[non_exhaustive]
pub struct CorruptObject {
    /// The object, as the user can name it.
    pub path: String,
    /// What is wrong with its bytes.
    pub reason: String,
}

impl CorruptObject {
    /// `path` holds bytes that do not decode, because of `reason`.
    pub fn new(path: impl Into<String>, reason: impl ToString) -> Self {
        CorruptObject { path: path.into(), reason: reason.to_string() }
    }
}

/// A table URI could not be turned into a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UriError {
    /// The scheme is none Concord supports.
    #[error("unsupported URI scheme '{scheme}://' in '{uri}'; supported: a local path, file://, memory://, s3://, az://, gs://")]
    UnsupportedScheme {
        /// The URI as given.
        uri: String,
        /// Its scheme.
        scheme: String,
    },
    /// No URI was given.
    #[error("invalid table URI '': it is empty")]
    Empty,
    /// `word:rest` without `//`: meant as a URI, but not one.
    #[error("invalid table URI '{uri}': '{scheme}:' looks like a URI scheme, but a URI needs '{scheme}://'; a local folder whose name has a colon is written ./{uri}")]
    MissingSlashes {
        /// The URI as given.
        uri: String,
        /// The word before the colon.
        scheme: String,
    },
    /// A `file://` URI that is not an absolute path.
    #[error("invalid table URI '{uri}': not an absolute file path")]
    NotAFilePath {
        /// The URI as given.
        uri: String,
    },
    /// An object-store URI without a bucket or container.
    #[error("invalid table URI '{uri}': no bucket or container after the scheme")]
    NoBucket {
        /// The URI as given.
        uri: String,
    },
    /// The URI or its path does not parse.
    #[error("invalid table URI '{uri}': {reason}")]
    Malformed {
        /// The URI as given.
        uri: String,
        /// The parser's message.
        reason: String,
    },
    /// A store option no store understands.
    #[error("unknown store option '{key}'; use object_store's names, e.g. AWS_REGION, AWS_ENDPOINT_URL, AZURE_STORAGE_ACCOUNT_NAME, GOOGLE_SERVICE_ACCOUNT")]
    UnknownOption {
        /// The option's name.
        key: String,
    },
    /// A store option given for a location that cannot use it (local disk, memory).
    #[error("store option '{key}' applies to object stores (s3://, az://, gs://), and '{uri}' is not one; remove the option")]
    OptionNotApplicable {
        /// The option's name.
        key: String,
        /// The URI as given.
        uri: String,
    },
    /// The object store's client refused its settings.
    #[error("cannot set up the store for '{uri}': {source}")]
    StoreConfig {
        /// The URI as given.
        uri: String,
        /// The client's error.
        #[source]
        source: object_store::Error,
    },
    /// A coordinator that is not `dynamodb://<table>`.
    #[error("commit coordinator '{spec}': expected dynamodb://<table name>")]
    CoordinatorSpec {
        /// The coordinator as given.
        spec: String,
    },
    /// A DynamoDB coordinator for a table that is not on S3.
    #[error("commit coordinator '{spec}': a DynamoDB coordinator commits s3:// tables only, and '{uri}' is not one")]
    CoordinatorNotS3 {
        /// The coordinator as given.
        spec: String,
        /// The table's URI.
        uri: String,
    },
    /// No credentials for the DynamoDB coordinator.
    #[error("commit coordinator '{spec}': no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")]
    CoordinatorCredentials {
        /// The coordinator as given.
        spec: String,
    },
    /// Setting up the coordinator's DynamoDB table failed.
    #[error("commit coordinator '{spec}': {source}")]
    CoordinatorSetup {
        /// The coordinator as given.
        spec: String,
        /// DynamoDB's error.
        #[source]
        source: DynamoDbError,
    },
}
