//! SQL through the library: the provider's statistics skip fragments and files; strings
//! read as views come back as Utf8.

use std::sync::Arc;

use concord::{CommitOptions, Env, ScanOptions, Schema, SqlSession, SqlTableProvider, Table};

use crate::conformance::local_backends;

/// A point lookup and a selective range open only the data files whose statistics
/// can match (counted by the provider and by the store's GET requests); a count and a
/// max are answered from the manifest; scan and count --where skip the same fragments.
#[tokio::test]
async fn statistics_skip_fragments_for_lookups_and_ranges() {
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse("id bigint not null, name varchar").unwrap();
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    for part in 0..20i64 {
        let ids: Vec<i64> = (part * 1000..(part + 1) * 1000).collect();
        let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
        let batch = concord::arrow::array::RecordBatch::try_new(
            schema.arrow_schema(),
            vec![Arc::new(concord::arrow::array::Int64Array::from(ids)), Arc::new(concord::arrow::array::StringArray::from(names))],
        )
        .unwrap();
        table.append(batch, &CommitOptions::default()).await.unwrap();
    }
    let table = table.latest().await.unwrap();
    assert_eq!(table.manifest().fragment_count(), 20);

    let run = |sql: &'static str| {
        let table = table.clone();
        let counting = f.counting.clone();
        async move {
            let provider = Arc::new(SqlTableProvider::new(table));
            let session = SqlSession::new();
            session.context().register_table("t", provider.clone()).unwrap();
            let (batches, tally) = counting.measure(async { session.query(sql).await.unwrap().collect().await.unwrap() }).await;
            (batches, provider.metrics(), tally.gets)
        }
    };
    let rows = |batches: &[concord::arrow::array::RecordBatch]| batches.iter().map(|b| b.num_rows()).sum::<usize>();

    let (all, metrics, full_gets) = run("SELECT * FROM t").await;
    assert_eq!((rows(&all), metrics.fragments_total, metrics.files_opened), (20_000, 20, 20));

    let (found, metrics, gets) = run("SELECT name FROM t WHERE id = 12345").await;
    assert_eq!(rows(&found), 1);
    assert_eq!((metrics.fragments_total, metrics.files_opened), (20, 1), "{metrics:?}");
    assert!(gets * 10 <= full_gets, "a point lookup reads one file: {gets} GETs, a full scan {full_gets}");

    let (found, metrics, _) = run("SELECT count(*) AS n FROM t WHERE id BETWEEN 3500 AND 5499").await;
    let n = found[0].column(0).as_any().downcast_ref::<concord::arrow::array::Int64Array>().unwrap().value(0);
    assert_eq!((n, metrics.files_opened), (2000, 3), "fragments 3, 4 and 5: {metrics:?}");

    let (_, metrics, _) = run("SELECT count(*), max(id), min(name) FROM t").await;
    assert_eq!(metrics.files_opened, 0, "row counts and bounds come from the manifest: {metrics:?}");

    let (none, metrics, _) = run("SELECT * FROM t WHERE id > 1000000 OR name = 'zzz'").await;
    assert_eq!((rows(&none), metrics.files_opened), (0, 0));

    // Strings are read as views inside a query and handed back as Utf8 (computed ones
    // too); a string filter prunes by the manifest's bounds (as text, `n12345` falls
    // within `n0..n999`, `n1000..n1999` and `n12000..n12999`).
    let (found, metrics, _) = run("SELECT name, upper(name) AS u, count(*) OVER () AS c FROM t WHERE name = 'n12345'").await;
    assert_eq!(rows(&found), 1);
    let utf8 = concord::arrow::datatypes::DataType::Utf8;
    assert_eq!((found[0].schema().field(0).data_type(), found[0].schema().field(1).data_type()), (&utf8, &utf8));
    assert_eq!(found[0].column(1).as_any().downcast_ref::<concord::arrow::array::StringArray>().unwrap().value(0), "N12345");
    assert_eq!(metrics.files_opened, 3, "{metrics:?}");

    // Concord's own scan path (scan, count --where) skips the same fragments.
    let scan = table.scan(ScanOptions { filter: Some("id = 12345".into()), ..Default::default() }).await.unwrap();
    let metrics = scan.metrics_handle();
    assert_eq!(rows(&scan.collect().await.unwrap()), 1);
    assert_eq!(metrics.lock().unwrap().files_opened, 1);
}
