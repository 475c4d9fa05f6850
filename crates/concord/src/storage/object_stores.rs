//! Building S3, Azure and GCS stores from a URI and object_store's option names.
//!
//! Commits on these stores use their conditional create (`PutMode::Create`):
//! `If-None-Match: *` on S3 and Azure, `ifGenerationMatch=0` on GCS. Transient errors
//! (throttling, 5xx, timeouts) are retried by object_store's client with backoff.

use std::str::FromStr;
use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::list::PaginatedListStore;
use object_store::ObjectStore;

use super::location::StoreKind;
use crate::error::UriError;

/// Settings the DynamoDB coordinator reads (besides the `AWS_*` credentials and region).
pub(crate) const COORDINATOR_KEYS: &[&str] = &["aws_endpoint_url_dynamodb"];

fn key(k: &str) -> String {
    k.trim().to_ascii_lowercase()
}

/// Whether the store of `kind` understands option `k`.
pub(crate) fn applies(kind: StoreKind, k: &str) -> bool {
    let k = key(k);
    match kind {
        StoreKind::S3 => AmazonS3ConfigKey::from_str(&k).is_ok(),
        StoreKind::Azure => AzureConfigKey::from_str(&k).is_ok(),
        StoreKind::Gcs => GoogleConfigKey::from_str(&k).is_ok(),
        StoreKind::Local | StoreKind::Memory => false,
    }
}

/// Whether any store (or the coordinator) understands option `k`.
pub(crate) fn known_anywhere(k: &str) -> bool {
    [StoreKind::S3, StoreKind::Azure, StoreKind::Gcs].iter().any(|kind| applies(*kind, k)) || COORDINATOR_KEYS.contains(&key(k).as_str())
}

/// The store for `uri` (scheme `kind`) with `options` applied. Credentials are never
/// put into error messages.
/// Also returns the store's paginated listing (for one-key LIST pages).
pub(crate) fn build(
    uri: &str,
    kind: StoreKind,
    options: &[(String, String)],
) -> Result<(Arc<dyn ObjectStore>, Arc<dyn PaginatedListStore>), UriError> {
    let failed = |source: object_store::Error| UriError::StoreConfig { uri: uri.to_string(), source };
    fn both<S: ObjectStore + PaginatedListStore>(s: S) -> (Arc<dyn ObjectStore>, Arc<dyn PaginatedListStore>) {
        let s = Arc::new(s);
        (s.clone(), s)
    }
    let store = match kind {
        StoreKind::S3 => {
            let mut b = AmazonS3Builder::new().with_url(uri);
            for (k, v) in options {
                b = b.with_config(AmazonS3ConfigKey::from_str(&key(k)).expect("checked by applies"), v);
            }
            both(b.build().map_err(failed)?)
        }
        StoreKind::Azure => {
            let mut b = MicrosoftAzureBuilder::new().with_url(uri);
            for (k, v) in options {
                b = b.with_config(AzureConfigKey::from_str(&key(k)).expect("checked by applies"), v);
            }
            both(b.build().map_err(failed)?)
        }
        StoreKind::Gcs => {
            let mut b = GoogleCloudStorageBuilder::new().with_url(uri);
            for (k, v) in options {
                b = b.with_config(GoogleConfigKey::from_str(&key(k)).expect("checked by applies"), v);
            }
            both(b.build().map_err(failed)?)
        }
        StoreKind::Local | StoreKind::Memory => unreachable!("local and memory stores are built by the resolver"),
    };
    Ok(store)
}
