//! Table URIs to locations: local paths, `file://`, `memory://name`, `s3://bucket/prefix`,
//! `az://container/prefix`, `gs://bucket/prefix`. Store settings use object_store's
//! option names (`AWS_REGION`, `AZURE_STORAGE_ACCOUNT_NAME`, ...) and are given to the
//! resolver (the command line reads them from the environment; nothing here does).
//! This is the one module that knows every backend (`object_stores`, `dynamodb`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::ObjectStore;

use super::location::{StoreKind, TableLocation};
use super::object_store_coordinator::Lister;
use crate::error::UriError;

/// A store setting and whether an unknown key is an error (given explicitly) or ignored
/// (picked up from a broad source such as the environment).
#[derive(Debug, Clone)]
struct StoreOption {
    key: String,
    value: String,
    strict: bool,
}

/// Turns URIs into locations. Holds the named in-memory stores it created, so two
/// resolutions of `memory://x` by one resolver see the same table (nothing global).
#[derive(Debug, Default)]
pub struct StoreResolver {
    memory: Mutex<HashMap<String, Arc<InMemory>>>,
    options: Vec<StoreOption>,
    /// `dynamodb://<table>`: commit through a DynamoDB coordinator (S3 only).
    coordinator: Option<String>,
}

impl StoreResolver {
    /// A resolver with no settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds store settings (object_store names, e.g. `AWS_REGION`); a key no store
    /// understands is an error when the store is resolved.
    pub fn with_options(mut self, options: impl IntoIterator<Item = (String, String)>) -> Self {
        self.options.extend(options.into_iter().map(|(key, value)| StoreOption { key, value, strict: true }));
        self
    }

    /// Adds settings from a broad source (e.g. every `AWS_*` variable of the
    /// environment): keys the store does not know are ignored. Explicit options win.
    pub fn with_ambient_options(mut self, options: impl IntoIterator<Item = (String, String)>) -> Self {
        let ambient: Vec<StoreOption> = options.into_iter().map(|(key, value)| StoreOption { key, value, strict: false }).collect();
        self.options.splice(0..0, ambient);
        self
    }

    /// Commit through `dynamodb://<table>` (S3 tables; see FORMAT.md).
    pub fn with_commit_coordinator(mut self, coordinator: Option<String>) -> Self {
        self.coordinator = coordinator.filter(|c| !c.trim().is_empty());
        self
    }

    /// The commit coordinator given, if any (`dynamodb://<table>`).
    pub fn commit_coordinator(&self) -> Option<&str> {
        self.coordinator.as_deref()
    }

    /// The settings given, as (key, value), explicit ones last.
    pub fn options(&self) -> Vec<(String, String)> {
        self.options.iter().map(|o| (o.key.clone(), o.value.clone())).collect()
    }

    /// The location `uri` names, with this resolver's settings.
    pub fn resolve(&self, uri: &str) -> Result<TableLocation, UriError> {
        let malformed = |e: &dyn std::fmt::Display| UriError::Malformed { uri: uri.to_string(), reason: e.to_string() };
        if uri.trim().is_empty() {
            return Err(UriError::Empty);
        }
        let location = match uri.split_once("://") {
            None if looks_like_a_scheme(uri) => {
                let scheme = uri[..uri.find(':').expect("has a colon")].to_string();
                return Err(UriError::MissingSlashes { uri: uri.to_string(), scheme });
            }
            None => local(uri, uri),
            Some(("file", _)) => {
                let url = url::Url::parse(uri).map_err(|e| malformed(&e))?;
                let path = url.to_file_path().map_err(|_| UriError::NotAFilePath { uri: uri.to_string() })?;
                local(uri, &path.to_string_lossy())
            }
            Some(("memory", name)) => {
                let (name, prefix) = name.split_once('/').unwrap_or((name, ""));
                let store = self.memory.lock().unwrap_or_else(|e| e.into_inner()).entry(name.to_string()).or_default().clone();
                let store: Arc<dyn ObjectStore> = store;
                Ok(TableLocation::on_store(uri, store, Path::from(prefix), StoreKind::Memory))
            }
            Some(("s3" | "s3a", _)) => self.object_store(uri, StoreKind::S3),
            Some(("az" | "azure" | "abfs" | "abfss", _)) => self.object_store(uri, StoreKind::Azure),
            Some(("gs", _)) => self.object_store(uri, StoreKind::Gcs),
            Some((scheme, _)) => Err(UriError::UnsupportedScheme { uri: uri.to_string(), scheme: scheme.to_string() }),
        }?;
        if matches!(location.kind, StoreKind::Local | StoreKind::Memory) {
            // Settings that only object stores use would be silently ignored here.
            if let Some(spec) = &self.coordinator {
                return Err(UriError::CoordinatorNotS3 { spec: spec.clone(), uri: uri.to_string() });
            }
            if let Some(o) = self.options.iter().find(|o| o.strict) {
                return Err(UriError::OptionNotApplicable { key: o.key.clone(), uri: uri.to_string() });
            }
        }
        Ok(location)
    }

    fn object_store(&self, uri: &str, kind: StoreKind) -> Result<TableLocation, UriError> {
        let malformed = |e: &dyn std::fmt::Display| UriError::Malformed { uri: uri.to_string(), reason: e.to_string() };
        let url = url::Url::parse(uri).map_err(|e| malformed(&e))?;
        let bucket = url.host_str().unwrap_or_default().to_string();
        if bucket.is_empty() {
            return Err(UriError::NoBucket { uri: uri.to_string() });
        }
        let root = Path::parse(url.path().trim_matches('/')).map_err(|e| malformed(&e))?;
        let (store, lister) = super::object_stores::build(uri, kind, &self.option_pairs(kind)?)?;
        let prefix = format!("{}://{bucket}/", url.scheme());
        let location = TableLocation::builder(uri, store, root, kind).display_prefix(prefix).lister(Lister(lister)).build();
        match &self.coordinator {
            None => Ok(location),
            Some(spec) => super::dynamodb::coordinator_for(spec, &location, &self.options()),
        }
    }

    /// The settings that apply to `kind`, checked: an explicit key no store knows is an error.
    fn option_pairs(&self, kind: StoreKind) -> Result<Vec<(String, String)>, UriError> {
        let mut out = Vec::new();
        for o in &self.options {
            if super::object_stores::applies(kind, &o.key) {
                out.push((o.key.clone(), o.value.clone()));
            } else if o.strict && !super::object_stores::known_anywhere(&o.key) {
                return Err(UriError::UnknownOption { key: o.key.clone() });
            }
        }
        Ok(out)
    }
}

/// `word:rest` with no `//`: meant as a URI, not a path (a path with a colon in its
/// first part must then start with `./` or `/`).
fn looks_like_a_scheme(uri: &str) -> bool {
    match uri.split_once(':') {
        Some((scheme, _)) => {
            let mut chars = scheme.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

fn local(uri: &str, path: &str) -> Result<TableLocation, UriError> {
    let malformed = |e: &dyn std::fmt::Display| UriError::Malformed { uri: uri.to_string(), reason: e.to_string() };
    let absolute = std::path::absolute(path).map_err(|e| malformed(&e))?;
    let root = Path::from_absolute_path(&absolute).map_err(|e| malformed(&e))?;
    // Durable: every write is fsynced before it returns (see storage::local).
    let local = Arc::new(super::local::SyncedLocalStore::new());
    let store: Arc<dyn ObjectStore> = local.clone();
    Ok(TableLocation::on_store(uri, store, root, StoreKind::Local).with_local(local))
}
