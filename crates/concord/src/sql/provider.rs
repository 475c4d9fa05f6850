//! A DataFusion `TableProvider` for one version of a Concord table.

use std::sync::{Arc, Mutex};

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{Result, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::error::ScanFailure;
use super::exec::ScanExec;
use crate::format::schema::Field;
use crate::io::predicate;
use crate::io::scan::adapt::with_string_views;
use crate::io::scan::{prune, ScanMetrics, ScanPlan};
use crate::table::Table;

/// One version of a Concord table as a DataFusion table: register it in any
/// `SessionContext` (or use [`crate::SqlSession`]). Every query of it reads exactly
/// that version, deleted rows excluded.
///
/// Scans push down the projection, the limit and every deterministic filter: Concord
/// skips fragments, row groups and pages whose statistics rule a filter out and
/// applies it exactly to the rows it decodes (filter columns first, the others only for
/// matching rows), so DataFusion does not filter again. Fragments are split across
/// the session's target partitions. Statistics (row counts, bounds, NULL counts) come
/// from the manifest. `varchar` columns are `Utf8View` here, as in DataFusion's own
/// Parquet tables ([`crate::SqlSession`] hands answers back as `Utf8`).
#[derive(Debug, Clone)]
pub struct SqlTableProvider {
    table: Table,
    schema: SchemaRef,
    /// What the last scan planned from this provider read and skipped.
    metrics: Arc<Mutex<ScanMetrics>>,
}

impl SqlTableProvider {
    /// The provider of `table`'s version.
    pub fn new(table: Table) -> Self {
        let schema = Arc::new(with_string_views(&table.schema().arrow_schema()));
        SqlTableProvider { table, schema, metrics: Arc::default() }
    }

    /// The table version it reads.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// What the scans planned from this provider so far read and skipped (fragments
    /// considered, data files opened, row groups read), summed.
    pub fn metrics(&self) -> ScanMetrics {
        *self.metrics.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether Concord can evaluate `filter` itself: deterministic, over this table's
/// columns only (no subquery, no outer reference).
fn evaluable(filter: &Expr) -> bool {
    let subquery = filter.exists(|e| Ok(matches!(e, Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)))).unwrap_or(true);
    !filter.is_volatile() && !filter.contains_outer() && !subquery
}

#[async_trait]
impl TableProvider for SqlTableProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| if evaluable(f) { TableProviderFilterPushDown::Exact } else { TableProviderFilterPushDown::Unsupported })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        let rows = usize::try_from(self.table.row_count()).unwrap_or(usize::MAX);
        Some(Statistics::new_unknown(&self.schema).with_num_rows(Precision::Exact(rows)))
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let schema = self.table.schema();
        let fields: Vec<Field> = match projection {
            None => schema.fields.clone(),
            Some(indices) => indices.iter().map(|&i| schema.fields[i].clone()).collect(),
        };
        let output = match projection {
            None => self.schema.clone(),
            Some(indices) => Arc::new(self.schema.project(indices)?),
        };
        let predicate = predicate::from_filters(filters, schema, &self.schema, state)?;
        let plan = Arc::new(ScanPlan::new(fields, output, predicate));
        let fragments = self.table.fragments().await.map_err(ScanFailure::wrap)?;
        let fragments = prune(fragments, &plan, &self.metrics);
        let shown = (self.table.uri().to_string(), self.table.version());
        let partitions = state.config().target_partitions();
        Ok(Arc::new(ScanExec::new(self.table.store().clone(), plan, fragments, limit, partitions, shown, self.metrics.clone())))
    }
}
