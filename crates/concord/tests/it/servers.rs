//! The local servers `scripts/test` starts (moto for S3 and DynamoDB, Azurite, s3rver),
//! as store settings for the library and environments for CLI processes.
//!
//! Without the servers' variables a test that needs one says so and passes only when
//! `CONCORD_REQUIRE_SERVERS` is unset (a quick `cargo test`); `scripts/test` sets it,
//! so there a missing server fails the suite instead of skipping.

#![allow(dead_code)]

use std::collections::BTreeMap;

/// The well-known Azurite account and key.
const AZURITE_ACCOUNT: &str = "devstoreaccount1";
const AZURITE_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// The DynamoDB table the tests commit through (created on first use).
pub const COMMIT_TABLE: &str = "dynamodb://concord-test-commits";

/// A server's store settings (object_store names) and a fresh table URI on it.
#[derive(Debug, Clone)]
pub struct Server {
    pub name: &'static str,
    pub options: BTreeMap<String, String>,
    pub bucket: String,
    pub scheme: &'static str,
    /// `Some(dynamodb://...)` to commit through the DynamoDB coordinator.
    pub coordinator: Option<String>,
}

fn endpoint(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            assert!(
                std::env::var("CONCORD_REQUIRE_SERVERS").is_err(),
                "{var} is not set but CONCORD_REQUIRE_SERVERS is: scripts/test starts the servers and sets it"
            );
            eprintln!("{var} not set: this server's checks do not run here (scripts/test runs them)");
            None
        }
    }
}

fn bucket() -> String {
    std::env::var("CONCORD_TEST_BUCKET").unwrap_or_else(|_| "concord-test".into())
}

fn s3_options(endpoint: &str) -> BTreeMap<String, String> {
    [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ALLOW_HTTP", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// moto's S3 (conditional writes).
pub fn moto_s3() -> Option<Server> {
    let e = endpoint("CONCORD_TEST_S3_ENDPOINT")?;
    Some(Server { name: "s3", options: s3_options(&e), bucket: bucket(), scheme: "s3", coordinator: None })
}

/// moto's S3, committing through moto's DynamoDB.
pub fn moto_s3_dynamodb() -> Option<Server> {
    Some(Server { name: "s3+dynamodb", coordinator: Some(COMMIT_TABLE.into()), ..moto_s3()? })
}

/// Azurite blob storage.
pub fn azurite() -> Option<Server> {
    let e = endpoint("CONCORD_TEST_AZURE_ENDPOINT")?;
    let options = [
        ("AZURE_STORAGE_ACCOUNT_NAME", AZURITE_ACCOUNT.to_string()),
        ("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY.to_string()),
        ("AZURE_ENDPOINT", format!("{}/{AZURITE_ACCOUNT}", e.trim_end_matches('/'))),
        ("AZURE_ALLOW_HTTP", "true".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Some(Server { name: "azure", options, bucket: bucket(), scheme: "az", coordinator: None })
}

/// s3rver: an S3 that ignores conditional writes. Its DynamoDB-coordinated variant
/// commits through moto's DynamoDB.
pub fn s3rver() -> Option<Server> {
    let e = endpoint("CONCORD_TEST_S3RVER_ENDPOINT")?;
    let mut options = s3_options(&e);
    options.insert("AWS_ACCESS_KEY_ID".into(), "S3RVER".into());
    options.insert("AWS_SECRET_ACCESS_KEY".into(), "S3RVER".into());
    Some(Server { name: "s3rver", options, bucket: bucket(), scheme: "s3", coordinator: None })
}

impl Server {
    /// A fresh table URI on this server.
    pub fn fresh_uri(&self, label: &str) -> String {
        format!("{}://{}/{label}-{}", self.scheme, self.bucket, uuid::Uuid::new_v4())
    }

    pub fn option_pairs(&self) -> Vec<(String, String)> {
        self.options.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// A resolver with these settings (and the coordinator, if any).
    pub fn resolver(&self) -> concord::StoreResolver {
        concord::StoreResolver::new().with_options(self.option_pairs()).with_commit_coordinator(self.coordinator.clone())
    }

    /// Environment for `concord` processes.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = self.option_pairs();
        if let Some(c) = &self.coordinator {
            env.push(("CONCORD_COMMIT_COORDINATOR".into(), c.clone()));
        }
        env
    }

    /// Makes sure the coordinator's DynamoDB table exists.
    pub async fn prepare(&self) {
        if let Some(c) = &self.coordinator {
            concord::store::create_coordinator_table(c, &self.option_pairs()).await.expect("create the coordinator table");
        }
    }
}
