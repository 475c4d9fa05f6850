//! DataFusion statistics of a scan, from the manifest alone: live row counts, and per
//! column bounds and NULL counts from the fragments' statistics.
//!
//! Invariant: a figure is `Exact` only if it holds for exactly the rows the scan
//! returns: no filter, no limit, and (for bounds and NULL counts, which are over
//! physical rows) no deleted row in any fragment.

use std::sync::Arc;

use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue, Statistics};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::ExecutionPlan;

use crate::format::manifest::Fragment;
use crate::format::schema::Field;
use crate::io::predicate::Predicate;
use crate::io::write::stats::summary;

/// Statistics of the rows of `fragments` (columns `fields`); `narrowed` when a filter
/// or limit may return fewer rows.
pub(crate) fn of_fragments(fragments: &[Fragment], fields: &[Field], narrowed: bool) -> Statistics {
    let rows: u64 = fragments.iter().map(Fragment::live_rows).sum();
    let physical_is_live = fragments.iter().all(|f| f.deletion.is_none());
    let column_statistics = fields.iter().map(|field| column(fragments, field, !narrowed && physical_is_live)).collect();
    let rows = usize::try_from(rows).unwrap_or(usize::MAX);
    Statistics {
        num_rows: if narrowed { Precision::Inexact(rows) } else { Precision::Exact(rows) },
        total_byte_size: Precision::Absent,
        column_statistics,
    }
}

/// The share of `fragments`' rows that `predicate` is estimated to keep, as
/// DataFusion estimates a `FilterExec` over a Parquet source with the same bounds
/// (interval analysis where it applies, its default selectivity elsewhere): join
/// order and broadcast joins are chosen from these estimates, so an exact filter
/// inside the scan must not look like no filter at all.
pub(crate) fn selectivity(fragments: &[Fragment], predicate: &Predicate) -> f64 {
    let input = in_types(of_fragments(fragments, &predicate.fields, false), &predicate.schema);
    let Some(&rows) = input.num_rows.get_value() else { return 1.0 };
    if rows == 0 {
        return 1.0;
    }
    let estimate = FilterExec::try_new(predicate.expr().clone(), Arc::new(EmptyExec::new(predicate.schema.clone())))
        .and_then(|filter| filter.statistics_from_inputs(&[Arc::new(input)], &StatisticsArgs::new()));
    match estimate.ok().and_then(|s| s.num_rows.get_value().copied()) {
        Some(kept) => (kept as f64 / rows as f64).clamp(0.0, 1.0),
        None => 1.0,
    }
}

/// `stats` with its bounds in `schema`'s types (a `varchar` bound as a `Utf8View` one
/// where SQL reads strings as views); a bound that does not convert is dropped.
pub(crate) fn in_types(mut stats: Statistics, schema: &arrow::datatypes::Schema) -> Statistics {
    for (column, field) in stats.column_statistics.iter_mut().zip(schema.fields()) {
        for bound in [&mut column.min_value, &mut column.max_value] {
            let converted = match &*bound {
                Precision::Exact(v) | Precision::Inexact(v) if v.data_type() != *field.data_type() => v.cast_to(field.data_type()).ok(),
                _ => continue,
            };
            *bound = match (converted, bound.is_exact() == Some(true)) {
                (Some(v), true) => Precision::Exact(v),
                (Some(v), false) => Precision::Inexact(v),
                (None, _) => Precision::Absent,
            };
        }
    }
    stats
}

/// `stats` of a scan narrowed to `selectivity` of its rows: the row count scaled,
/// NULL counts capped by it.
pub(crate) fn narrowed_to(mut stats: Statistics, selectivity: f64) -> Statistics {
    stats.num_rows = stats.num_rows.with_estimated_selectivity(selectivity);
    if let Some(&rows) = stats.num_rows.get_value() {
        for c in &mut stats.column_statistics {
            c.null_count = c.null_count.min(&Precision::Inexact(rows));
        }
    }
    stats
}

fn column(fragments: &[Fragment], field: &Field, exact: bool) -> ColumnStatistics {
    let mut nulls = Some(0u64);
    // Bounds over the fragments with a non-NULL value; unknown if one lacks them.
    let mut bounds: Option<Option<(ScalarValue, ScalarValue)>> = Some(None);
    for fragment in fragments {
        let s = summary(fragment, field);
        nulls = nulls.zip(s.nulls).map(|(a, b)| a + b);
        if s.nulls == Some(fragment.physical_rows) {
            continue;
        }
        bounds = match (bounds, s.min, s.max) {
            (Some(None), Some(lo), Some(hi)) => Some(Some((lo, hi))),
            (Some(Some((lo, hi))), Some(a), Some(b)) => Some(Some((if a < lo { a } else { lo }, if b > hi { b } else { hi }))),
            _ => None,
        };
    }
    let precise = |v| if exact { Precision::Exact(v) } else { Precision::Inexact(v) };
    let mut stats = ColumnStatistics::new_unknown();
    if let Some(n) = nulls {
        stats = stats.with_null_count(precise(usize::try_from(n).unwrap_or(usize::MAX)));
    }
    if let Some(Some((lo, hi))) = bounds {
        let precise = |v| if exact { Precision::Exact(v) } else { Precision::Inexact(v) };
        stats = stats.with_min_value(precise(lo)).with_max_value(precise(hi));
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::manifest::{ColumnStats, DataFile, DeletionRef};
    use crate::format::schema::{ColumnType, Schema};

    fn fragment(id: u64, rows: u64, min: &str, max: &str, nulls: u64, deleted: u64) -> Fragment {
        let stats = vec![ColumnStats { field: 0, nulls, min: Some(min.into()), max: Some(max.into()) }];
        let files = vec![DataFile { path: format!("data/{id}.parquet"), fields: vec![0], size_bytes: 1, stats }];
        let deletion = (deleted > 0).then(|| DeletionRef { path: format!("_deletions/{id}.bin"), deleted_rows: deleted });
        Fragment { id, files, physical_rows: rows, deletion, first_row_id: None }
    }

    /// `n` (in the files), and `added` later with a default (in none of them).
    fn fields() -> Vec<Field> {
        let n = Schema::parse("n bigint").unwrap().fields.remove(0);
        let added = Field {
            id: 1,
            name: "added".into(),
            column_type: ColumnType::Varchar,
            nullable: true,
            default: Some("x".into()),
            widened_from: None,
        };
        vec![n, added]
    }

    #[test]
    fn exact_only_for_exactly_the_rows_returned() {
        let fragments = [fragment(0, 10, "-5", "7", 2, 0), fragment(1, 20, "3", "40", 0, 0)];
        let s = of_fragments(&fragments, &fields(), false);
        assert_eq!(s.num_rows, Precision::Exact(30));
        let n = &s.column_statistics[0];
        assert_eq!(
            (n.min_value.clone(), n.max_value.clone()),
            (Precision::Exact(ScalarValue::Int64(Some(-5))), Precision::Exact(ScalarValue::Int64(Some(40))))
        );
        assert_eq!(n.null_count, Precision::Exact(2));
        // A column the files lack holds its default in every row.
        let added = &s.column_statistics[1];
        assert_eq!(
            (added.min_value.clone(), added.null_count),
            (Precision::Exact(ScalarValue::Utf8(Some("x".into()))), Precision::Exact(0))
        );

        // A filter or a limit: every figure an estimate.
        let s = of_fragments(&fragments, &fields(), true);
        assert_eq!(s.num_rows, Precision::Inexact(30));
        assert_eq!(s.column_statistics[0].max_value, Precision::Inexact(ScalarValue::Int64(Some(40))));

        // Deleted rows: the count stays exact (live rows), bounds are over physical rows.
        let s = of_fragments(&[fragment(0, 10, "-5", "7", 2, 4)], &fields(), false);
        assert_eq!(s.num_rows, Precision::Exact(6));
        assert_eq!(s.column_statistics[0].min_value, Precision::Inexact(ScalarValue::Int64(Some(-5))));
    }

    #[test]
    fn a_filter_narrows_the_estimate_as_datafusion_would() {
        let schema = Schema::parse("n bigint").unwrap();
        let fragments = [fragment(0, 500, "0", "499", 0, 0), fragment(1, 500, "500", "999", 0, 0)];
        let estimate = |sql: &str| selectivity(&fragments, &crate::io::predicate::compile(sql, &schema, chrono::Utc::now()).unwrap());
        // Interval analysis over the bounds: about a tenth of 0..999.
        let tenth = estimate("n < 100");
        assert!((0.09..0.11).contains(&tenth), "{tenth}");
        // Outside the bounds: nothing; no bound to analyse: DataFusion's default, 20%.
        assert_eq!(estimate("n > 5000"), 0.0);
        assert!((estimate("n % 7 = 1") - 0.2).abs() < 1e-9);
        let s = narrowed_to(of_fragments(&fragments, &fields()[..1], true), tenth);
        assert!(matches!(s.num_rows, Precision::Inexact(90..=110)), "{:?}", s.num_rows);
    }

    #[test]
    fn unknown_where_a_fragment_lacks_statistics() {
        let mut old = fragment(1, 5, "0", "1", 0, 0);
        old.files[0].stats.clear(); // written before statistics existed
        let s = of_fragments(&[fragment(0, 10, "-5", "7", 0, 0), old], &fields(), false);
        assert_eq!(s.num_rows, Precision::Exact(15));
        let n = &s.column_statistics[0];
        assert_eq!((n.min_value.clone(), n.null_count), (Precision::Absent, Precision::Absent));
        // A fragment of NULLs only adds no bounds.
        let mut nulls = fragment(1, 3, "0", "0", 3, 0);
        (nulls.files[0].stats[0].min, nulls.files[0].stats[0].max) = (None, None);
        let s = of_fragments(&[fragment(0, 10, "-5", "7", 0, 0), nulls], &fields(), false);
        assert_eq!(s.column_statistics[0].max_value, Precision::Exact(ScalarValue::Int64(Some(7))));
        assert_eq!(s.column_statistics[0].null_count, Precision::Exact(3));
    }
}
