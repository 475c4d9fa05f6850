//! Parquet data files, read the way a table reads a fragment (footer by recorded size,
//! columns by field id, schema adaptation): the input is the one file of a fragment of
//! a table with columns `id bigint not null, name varchar, score double`.
#![no_main]
use std::sync::{Arc, OnceLock};

use concord::object_store::path::Path;
use concord::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use concord::{Env, Schema, StoreResolver, Table};
use libfuzzer_sys::fuzz_target;

const FILE: &str = "data/fuzz.parquet";

struct Fixture {
    runtime: tokio::runtime::Runtime,
    table: Table,
    store: Arc<dyn ObjectStore>,
    path: Path,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        // concord catches panics of the parquet decoder and returns them as errors;
        // libfuzzer-sys's hook would abort before that. A panic that escapes concord
        // still aborts: libfuzzer-sys catches it around each input.
        std::panic::set_hook(Box::new(|_| {}));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let location = StoreResolver::new().resolve("memory://fuzz").unwrap();
        let (store, path) = (location.store().clone(), location.root().clone().join("data").join("fuzz.parquet"));
        let schema = Schema::parse("id bigint not null, name varchar, score double").unwrap();
        let table = runtime.block_on(Table::create(location, Env::system(), schema)).unwrap();
        Fixture { runtime, table, store, path }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    // The fragment as a segment lists it (the format's objects come from their JSON).
    let json = format!(
        r#"{{"fragments":[{{"id":0,"files":[{{"path":"{FILE}","fields":[0,1,2],"size_bytes":{}}}],"physical_rows":0}}]}}"#,
        data.len()
    );
    let segment = concord::decode::segment("fuzz/_segments/s.json", 1, json.as_bytes()).unwrap();
    let fragment = &segment.fragments[0];
    f.runtime.block_on(async {
        f.store.put(&f.path, PutPayload::from(data.to_vec())).await.unwrap();
        let _ = f.table.read_fragment(fragment).await;
        let _ = f.table.read_fragment_as_sql(fragment).await;
    });
});
