//! `sql`: one read-only query over versions of tables.

use concord::VersionRef;
use futures::TryStreamExt;

use crate::exit::{usage, Failure};
use crate::output::{RowFormat, RowWriter};
use crate::{Context, VersionArgs};

/// `sql`: the table at `uri` is `t`, at `--version` if given; `--as-of` applies to
/// every table; `--table-version NAME=N` pins another. One version of each is read,
/// whatever commits meanwhile.
pub async fn sql(
    cx: &Context,
    uri: &str,
    query: &str,
    at: &VersionArgs,
    tables: &[(String, String)],
    versions: &[(String, VersionRef)],
    format: RowFormat,
) -> Result<(), Failure> {
    let mut names = vec!["t".to_string()];
    for (name, _) in tables {
        if names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return Err(usage(format!("the table name '{name}' is given twice (the table at <uri> is t); give each --table its own name")));
        }
        names.push(name.clone());
    }
    for (name, _) in versions {
        if !tables.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            let hint = if name.eq_ignore_ascii_case("t") { "; use --version for t" } else { "" };
            return Err(usage(format!("--table-version {name}=...: no --table is named '{name}'{hint}")));
        }
    }
    let open_other = |name: &str, uri: String| {
        let version = versions.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let at = VersionArgs { version, as_of: at.as_of };
        async move { cx.open_at(&uri, &at).await }
    };
    let opened = futures::future::try_join_all(tables.iter().map(|(name, uri)| open_other(name, uri.clone())));
    let (main, others) = futures::future::try_join(cx.open_at(uri, at), opened).await?;
    let session = concord::SqlSession::new();
    session.register("t", &main)?;
    for ((name, _), table) in tables.iter().zip(&others) {
        session.register(name, table)?;
    }
    let result = session.query(query).await?;
    let mut writer = RowWriter::stdout(format, result.schema());
    let mut stream = result.into_stream();
    while let Some(batch) = stream.try_next().await? {
        writer.write(&batch)?;
    }
    writer.finish()
}
