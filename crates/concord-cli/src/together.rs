//! `concord commit <uri> ID... --together` across tables: `URI=ID` names another
//! table's staged transaction; every table moves in one atomic step, or none does.

use concord::{PreparedTransaction, Table};

use crate::exit::{usage, Failure};
use crate::{output, Context, WriteArgs};

/// Each table's staged ids, tables in the order first named: a plain id is `uri`'s,
/// `URI=ID` another table's (split at the last `=`: staged ids are UUIDs). `None`: no
/// pair given, a one-table commit.
pub(crate) fn parts(uri: &str, ids: &[String]) -> Option<Vec<(String, Vec<String>)>> {
    if !ids.iter().any(|id| id.contains('=')) {
        return None;
    }
    let mut parts: Vec<(String, Vec<String>)> = Vec::new();
    for id in ids {
        let (table, id) = id.rsplit_once('=').unwrap_or((uri, id));
        match parts.iter_mut().find(|(t, _)| t == table) {
            Some((_, ids)) => ids.push(id.to_string()),
            None => parts.push((table.to_string(), vec![id.to_string()])),
        }
    }
    Some(parts)
}

/// Commits every table's staged transactions as one multi-table transaction and prints
/// each table's commits, prefixed by the table.
pub(crate) async fn commit(cx: &Context, parts: Vec<(String, Vec<String>)>, write: &WriteArgs) -> Result<(), Failure> {
    // Every table opened, and its staged transactions read, at once.
    let tables: Vec<(Table, Vec<PreparedTransaction>)> = futures::future::try_join_all(parts.iter().map(|(uri, ids)| async move {
        let table = cx.open(uri).await?;
        let txns = futures::future::try_join_all(ids.iter().map(|id| table.load_staged(id))).await?;
        Ok::<_, Failure>((table, txns))
    }))
    .await?;
    let refs: Vec<(&Table, &[PreparedTransaction])> = tables.iter().map(|(t, txns)| (t, &txns[..])).collect();
    let infos = concord::commit_together(&refs, &write.options(), None).await?;
    for ((uri, _), infos) in parts.iter().zip(infos) {
        for info in infos {
            if !write.json {
                print!("{uri}: ");
            }
            output::print_commit(&info, write.json)?;
        }
    }
    Ok(())
}

/// `URI=ID` pairs without `--together`: refused (they only mean a multi-table commit).
pub(crate) fn pairs_need_together() -> Failure {
    usage("`URI=ID` names another table's staged transaction: a commit across tables needs --together".into())
}
