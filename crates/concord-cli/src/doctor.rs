//! `doctor`: is the store safe for concurrent commits?

use crate::exit::{self, Failure};
use crate::Context;

/// `doctor`: probes the store, prints what it found and which commit mode is safe.
pub async fn doctor(cx: &Context, uri: &str) -> Result<(), Failure> {
    let location = cx.location(uri)?;
    let report = concord::store::probe_store(&location, &cx.env).await.map_err(|e| exit::storage(concord::errors::describe_chain(&e)))?;
    println!("store: {uri}");
    match &report.create_unsupported {
        Some(why) => println!("conditional create: not supported ({why})"),
        None => {
            println!(
                "conditional create race: {} of {} concurrent writers won (safe: exactly 1)",
                report.race_winners,
                concord::store::PROBE_RACERS
            );
            println!(
                "create of an existing object: {}",
                if report.existing_refused { "refused (If-None-Match enforced)" } else { "ACCEPTED (If-None-Match ignored)" }
            );
        }
    }
    println!(
        "listing order: {}",
        if report.listing_ordered {
            "lexicographic (latest version in one LIST page)"
        } else {
            "unordered (latest version by hint and probes)"
        }
    );
    println!("conditional create round trip: p50 {:.1} ms", report.create_p50_ms);
    if report.left_behind > 0 {
        println!("cleanup: {} probe objects could not be removed", report.left_behind);
    }
    let coordinated = cx.resolver_has_coordinator();
    if report.conditional_create_safe() {
        println!("verdict: SAFE: commits use the store's conditional create");
        Ok(())
    } else if coordinated {
        location
            .coordinator()
            .latest_version(None)
            .await
            .map_err(|e| exit::storage(format!("the commit coordinator is not usable: {}", concord::errors::describe_chain(&e))))?;
        println!("verdict: SAFE with the configured commit coordinator (the store alone is not: it does not enforce conditional creates)");
        Ok(())
    } else {
        println!("verdict: UNSAFE: concurrent commits can silently overwrite each other on this store");
        Err(exit::unsafe_store(
            "this store does not enforce conditional creates; commit through a DynamoDB coordinator: \
             `concord coordinator create-table dynamodb://<table>`, then pass --commit-coordinator dynamodb://<table> \
             (or set CONCORD_COMMIT_COORDINATOR)"
                .into(),
        ))
    }
}
