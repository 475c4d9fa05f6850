//! Object stores against real local servers (started by scripts/test): concurrent
//! processes on S3 and S3 + DynamoDB, Azure, the DynamoDB protocol's crash points and
//! lost responses, and `doctor` on a safe and an unsafe store.

use std::sync::Arc;

use bytes::Bytes;
use concord::store::{DynamoDbCoordinator, ProtocolStep};
use concord::{CommitOptions, Env, Schema, Table};

use crate::common::*;
use crate::servers::{self, ok_with, run_with, Server};

/// `processes` OS processes each run `appends` CLI appends of `rows` rows at once
/// against a fresh table on `server`; every append succeeds, the chain has no gap, no
/// row is lost or duplicated.
fn processes_appending(server: &Server, processes: u64, appends: u64, rows: u64) {
    let env = server.env();
    let uri = server.fresh_uri("procs");
    ok_with(&env, &["create", &uri, "--schema", SCHEMA]);
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let children: Vec<_> = (0..processes)
        .map(|p| {
            let (uri, env) = (uri.clone(), env.clone());
            let files: Vec<String> = (0..appends)
                .map(|k| {
                    let path = dir.path().join(format!("in-{p}-{k}.csv"));
                    std::fs::write(&path, csv_rows((p * appends + k) * rows, rows)).unwrap();
                    path.to_string_lossy().into_owned()
                })
                .collect();
            std::thread::spawn(move || {
                files
                    .iter()
                    .map(|f| {
                        let (code, out, err) = run_with(&env, &["append", &uri, f, "--json"]);
                        assert_eq!(code, 0, "append failed: {err}");
                        serde_json::from_str::<serde_json::Value>(&out).unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let outcomes: Vec<serde_json::Value> = children.into_iter().flat_map(|c| c.join().unwrap()).collect();
    let elapsed = started.elapsed().as_secs_f64();
    let total = processes * appends;
    assert_eq!(outcomes.len() as u64, total);
    assert_eq!(ok_with(&env, &["count", &uri]).trim().parse::<u64>().unwrap(), total * rows, "{}", server.name);
    let history: Vec<serde_json::Value> = serde_json::from_str(&ok_with(&env, &["history", &uri, "--format", "json"])).unwrap();
    check_cli_history(&history, &outcomes, total, server.name);
    let scanned = ok_with(&env, &["scan", &uri, "--columns", "id", "--format", "csv"]);
    let mut ids: Vec<u64> = scanned.lines().skip(1).map(|l| l.parse().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..total * rows).collect::<Vec<_>>(), "{}: no row lost or duplicated", server.name);
    let max_attempts = outcomes.iter().map(|o| o["attempts"].as_u64().unwrap()).max().unwrap();
    eprintln!(
        "{}: {processes} processes x {appends} appends: {total} commits in {elapsed:.1} s ({:.1} commits/s), max attempts {max_attempts}",
        server.name,
        total as f64 / elapsed
    );
}

#[test]
fn eight_processes_appending_20_times_on_s3() {
    if let Some(s) = servers::moto_s3() {
        processes_appending(&s, 8, 20, 3);
    }
}

#[test]
fn eight_processes_appending_20_times_on_s3_with_dynamodb() {
    if let Some(s) = servers::moto_s3_dynamodb() {
        tokio::runtime::Runtime::new().unwrap().block_on(s.prepare());
        processes_appending(&s, 8, 20, 3);
    }
}

#[test]
fn processes_appending_on_azure() {
    if let Some(s) = servers::azurite() {
        processes_appending(&s, 4, 10, 3);
    }
}

/// On s3rver (which ignores conditional writes) commits are safe through the DynamoDB
/// coordinator: concurrent processes lose nothing.
#[test]
fn processes_appending_on_an_unsafe_store_through_dynamodb() {
    let (Some(unsafe_store), Some(moto)) = (servers::s3rver(), servers::moto_s3()) else { return };
    let mut s = Server { name: "s3rver+dynamodb", coordinator: Some(servers::COMMIT_TABLE.into()), ..unsafe_store };
    s.options.insert("AWS_ENDPOINT_URL_DYNAMODB".into(), moto.options["AWS_ENDPOINT_URL"].clone());
    // moto's DynamoDB takes any credentials; s3rver wants its own.
    tokio::runtime::Runtime::new().unwrap().block_on(s.prepare());
    processes_appending(&s, 4, 10, 2);
}

/// `doctor` classifies the stores: moto and Azurite safe (exit 0), s3rver unsafe (exit
/// 6) unless a DynamoDB coordinator is configured. It leaves no probe objects.
#[test]
fn doctor_tells_safe_from_unsafe_stores() {
    for server in [servers::moto_s3(), servers::azurite()].into_iter().flatten() {
        let uri = server.fresh_uri("doctor");
        let (code, out, err) = run_with(&server.env(), &["doctor", &uri]);
        assert_eq!(code, 0, "{}: {out} {err}", server.name);
        assert!(out.contains("1 of 8") && out.contains("SAFE"), "{}: {out}", server.name);
        eprintln!("doctor on {}:\n{out}", server.name);
    }
    if let Some(server) = servers::s3rver() {
        let uri = server.fresh_uri("doctor");
        let (code, out, err) = run_with(&server.env(), &["doctor", &uri]);
        assert_eq!(code, 6, "s3rver: {out} {err}");
        assert!(out.contains("UNSAFE") && err.contains("--commit-coordinator"), "{out} {err}");
        eprintln!("doctor on s3rver:\n{out}");
        if let Some(moto) = servers::moto_s3() {
            let mut env = server.env();
            env.push(("AWS_ENDPOINT_URL_DYNAMODB".into(), moto.options["AWS_ENDPOINT_URL"].clone()));
            env.push(("CONCORD_COMMIT_COORDINATOR".into(), servers::COMMIT_TABLE.into()));
            let s = Server {
                coordinator: Some(servers::COMMIT_TABLE.into()),
                options: env.iter().filter(|&(k, _)| k.starts_with("AWS_")).cloned().collect(),
                ..server.clone()
            };
            tokio::runtime::Runtime::new().unwrap().block_on(s.prepare());
            let (code, out, err) = run_with(&env, &["doctor", &uri]);
            assert_eq!(code, 0, "s3rver + coordinator: {out} {err}");
            assert!(out.contains("SAFE with the configured commit coordinator"), "{out}");
        }
        // No probe objects left behind: a listing of the table folder is empty.
        let location = server.resolver().resolve(&uri).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let left: Vec<_> = rt.block_on(async {
            use futures::TryStreamExt;
            location.store().list(Some(location.root())).try_collect::<Vec<_>>().await.unwrap()
        });
        assert!(left.is_empty(), "doctor left {left:?}");
    }
}

/// A table committed through `coordinator` on the S3 table at `uri`.
async fn coordinated_table(server: &Server, uri: &str) -> (Table, Arc<DynamoDbCoordinator>) {
    let plain = server.resolver().resolve(uri).unwrap();
    let coordinator = Arc::new(DynamoDbCoordinator::for_location(servers::COMMIT_TABLE, &plain, &server.option_pairs()).unwrap());
    let location = plain.with_coordinator(coordinator.clone());
    let table = Table::create(location, Env::system(), Schema::parse(SCHEMA).unwrap()).await.unwrap();
    (table, coordinator)
}

/// A writer stopped after each protocol step leaves a table the next reader sees at the
/// right version and the next writer extends; readers finish half-done commits.
#[tokio::test]
async fn dynamodb_protocol_crash_points() {
    let Some(server) = servers::moto_s3_dynamodb() else { return };
    server.prepare().await;
    for (step, committed) in [
        (ProtocolStep::StagingWritten, false),
        (ProtocolStep::RowWritten, true),
        (ProtocolStep::Copied, true),
        (ProtocolStep::RowCompleted, true),
    ] {
        let uri = server.fresh_uri("crash");
        let (table, coordinator) = coordinated_table(&server, &uri).await;
        table.append(&[rows(table.schema(), 0..3)], &CommitOptions::default()).await.unwrap();
        // The crashed writer's version 2: version 1's manifest under a new transaction.
        let mut manifest = table.latest().await.unwrap().manifest().clone();
        manifest.version = 2;
        manifest.parent_version = Some(1);
        manifest.transactions[0].id = uuid::Uuid::new_v4();
        manifest.timestamp += chrono::TimeDelta::milliseconds(1);
        let bytes = Bytes::from(serde_json::to_vec(&manifest).unwrap());
        coordinator.create_version_until(2, bytes, step).await.unwrap();
        // A fresh reader (another process, in effect).
        let reader = server.resolver().resolve(&uri).unwrap();
        let reopened = Table::open(reader.clone(), Env::system()).await.unwrap();
        let expected = if committed { 2 } else { 1 };
        assert_eq!(reopened.version(), expected, "{step:?}: the next reader sees the committed version");
        // Version 2 repeats version 1's rows (a commit of no change).
        assert_eq!(reopened.count(None).await.unwrap(), 3, "{step:?}");
        let info = reopened.append(&[rows(reopened.schema(), 10..12)], &CommitOptions::default()).await.unwrap();
        assert_eq!(info.version, expected + 1, "{step:?}: the next writer extends the chain");
        assert_eq!(reopened.latest().await.unwrap().count(None).await.unwrap(), 5, "{step:?}");
        let versions = reader.coordinator().list_versions().await.unwrap();
        assert_eq!(versions, (0..=expected + 1).collect::<Vec<_>>(), "{step:?}: one chain");
    }
}

/// PutItem succeeds but its response is lost: the writer reads the row back, finds its
/// own staging name, and reports success; one version, no duplicate.
#[tokio::test]
async fn dynamodb_lost_put_response_is_a_success_not_a_duplicate() {
    let Some(server) = servers::moto_s3_dynamodb() else { return };
    server.prepare().await;
    let uri = server.fresh_uri("lost");
    let (table, coordinator) = coordinated_table(&server, &uri).await;
    coordinator.lose_put_responses(1);
    let info = table.append(&[rows(table.schema(), 0..5)], &CommitOptions::default()).await.unwrap();
    assert_eq!((info.version, info.attempts), (1, 1), "settled by reading the row back, within the attempt");
    let latest = table.latest().await.unwrap();
    let history = latest.history().await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].transaction_id, info.transaction_id);
    assert_eq!(latest.count(None).await.unwrap(), 5, "no duplicate rows");
}

/// A failing command never prints the secret key it was given.
#[test]
fn credentials_never_appear_in_errors() {
    // Azurite checks request signatures (moto and s3rver accept any key).
    let Some(server) = servers::azurite() else { return };
    let secret = "VG9wU2VjcmV0VmFsdWUxMjM="; // base64 of a made-up key
    let mut env = server.env();
    env.retain(|(k, _)| k != "AZURE_STORAGE_ACCOUNT_KEY");
    env.push(("AZURE_STORAGE_ACCOUNT_KEY".into(), secret.into()));
    let uri = server.fresh_uri("secret");
    for args in [vec!["create", uri.as_str(), "--schema", "id bigint"], vec!["count", uri.as_str()], vec!["doctor", uri.as_str()]] {
        let (code, out, err) = run_with(&env, &args);
        assert_ne!(code, 0, "{args:?}: Azurite rejects the wrong key: {out}");
        assert!(!out.contains(secret) && !err.contains(secret), "{args:?} leaked the secret: {out} {err}");
        assert!(!err.is_empty(), "{args:?}: the error names the cause");
    }
}

/// `gs://` resolves to a GCS store (object_store's client; no emulator here honours
/// its preconditions, so commits on GCS are not exercised by this suite).
#[test]
fn gcs_uris_resolve_to_gcs() {
    let resolver = concord::StoreResolver::new().with_options([("GOOGLE_SKIP_SIGNATURE".to_string(), "true".to_string())]);
    let location = resolver.resolve("gs://some-bucket/tables/t").unwrap();
    assert_eq!(location.kind(), concord::store::StoreKind::Gcs);
    assert_eq!(location.display(location.root()), "gs://some-bucket/tables/t");
    let err = concord::StoreResolver::new().with_options([("AWS_REGOIN".to_string(), "x".to_string())]).resolve("s3://b/t").unwrap_err();
    assert!(err.to_string().contains("unknown store option 'AWS_REGOIN'"), "{err}");
    // Settings a local path cannot use are refused, not ignored.
    let err = concord::StoreResolver::new().with_commit_coordinator(Some("dynamodb://t".into())).resolve("./local").unwrap_err();
    assert!(err.to_string().contains("s3:// tables only"), "{err}");
    let err = concord::StoreResolver::new().with_options([("AWS_REGION".to_string(), "x".to_string())]).resolve("memory://m").unwrap_err();
    assert!(err.to_string().contains("'AWS_REGION' applies to object stores"), "{err}");
}
