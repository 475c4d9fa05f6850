//! The physical scan of one table version: its fragments (already pruned by the
//! query's filters) split into partitions of about equal rows, each read in
//! fragment order through the shared scan path (`io::scan`), so every core decodes.

use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream};
use futures::{StreamExt, TryStreamExt};

use super::error::ScanFailure;
use crate::format::manifest::Fragment;
use crate::io::scan::{scan_fragments, Ahead, ScanMetrics, ScanPlan};
use crate::storage::TableStore;

/// Scans fragments of one version with a projection, an exact filter and a limit.
#[derive(Debug)]
pub(crate) struct ScanExec {
    store: Arc<TableStore>,
    plan: Arc<ScanPlan>,
    /// Each partition's fragments, in fragment-id order.
    partitions: Vec<Vec<Fragment>>,
    /// At most this many rows per partition (a limit above takes the first of them).
    limit: Option<usize>,
    /// `(table, version)`, for plans shown by EXPLAIN.
    shown: (String, u64),
    properties: Arc<PlanProperties>,
    statistics: Vec<Arc<Statistics>>,
    total: Arc<Statistics>,
    metrics: Arc<Mutex<ScanMetrics>>,
}

impl ScanExec {
    pub(crate) fn new(
        store: Arc<TableStore>,
        plan: Arc<ScanPlan>,
        fragments: Vec<Fragment>,
        limit: Option<usize>,
        target_partitions: usize,
        shown: (String, u64),
        metrics: Arc<Mutex<ScanMetrics>>,
    ) -> ScanExec {
        let narrowed = plan.predicate.is_some() || limit.is_some();
        let selectivity = plan.predicate.as_ref().map_or(1.0, |p| super::stats::selectivity(&fragments, p));
        let partitions = split(fragments, target_partitions);
        let of = |fragments: &[Fragment]| {
            let mut s = super::stats::in_types(super::stats::of_fragments(fragments, &plan.fields, narrowed), &plan.output);
            if plan.predicate.is_some() {
                s = super::stats::narrowed_to(s, selectivity);
            }
            if let Some(limit) = limit {
                s.num_rows = s.num_rows.min(&datafusion::common::stats::Precision::Inexact(limit));
            }
            Arc::new(s)
        };
        let statistics: Vec<Arc<Statistics>> = partitions.iter().map(|p| of(p)).collect();
        let total = of(&partitions.concat());
        let properties = PlanProperties::new(
            EquivalenceProperties::new(plan.output.clone()),
            Partitioning::UnknownPartitioning(partitions.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        ScanExec { store, plan, partitions, limit, shown, properties: Arc::new(properties), statistics, total, metrics }
    }
}

/// Fragments in at most `n` groups of about equal live rows (largest first to the
/// least loaded), each in fragment-id order. At least one group, maybe empty.
fn split(fragments: Vec<Fragment>, n: usize) -> Vec<Vec<Fragment>> {
    let n = n.clamp(1, fragments.len().max(1));
    let mut order: Vec<usize> = (0..fragments.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(fragments[i].live_rows()));
    let mut loads = vec![(0u64, Vec::new()); n];
    for i in order {
        let least = loads.iter_mut().min_by_key(|(rows, _)| *rows).expect("n >= 1");
        least.0 += fragments[i].live_rows();
        least.1.push(i);
    }
    let mut slots: Vec<Option<Fragment>> = fragments.into_iter().map(Some).collect();
    loads
        .into_iter()
        .map(|(_, mut indices)| {
            indices.sort_unstable();
            indices.into_iter().map(|i| slots[i].take().expect("each fragment in one group")).collect()
        })
        .collect()
}

impl DisplayAs for ScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let columns: Vec<&str> = self.plan.fields.iter().map(|f| f.name.as_str()).collect();
        let fragments: usize = self.partitions.iter().map(Vec::len).sum();
        write!(f, "ConcordScan: {} version {}, fragments={fragments}, columns=[{}]", self.shown.0, self.shown.1, columns.join(", "))?;
        if let Some(p) = &self.plan.predicate {
            write!(f, ", filter={}", p.sql)?;
        }
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for ScanExec {
    fn name(&self) -> &str {
        "ConcordScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(&self, _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, _children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let fragments = self.partitions.get(partition).cloned().unwrap_or_default();
        // DataFusion runs a scan per partition on its own threads: a batch ahead each
        // keeps both cores busy without holding whole files per partition.
        let stream =
            scan_fragments(self.store.clone(), fragments, self.plan.clone(), self.metrics.clone(), Ahead::Batch).map_err(ScanFailure::wrap);
        let stream = match self.limit {
            None => stream.boxed(),
            Some(limit) => stream
                .scan(limit, |left, batch| {
                    let out = match batch {
                        Ok(_) if *left == 0 => None,
                        Ok(b) => {
                            let take = b.num_rows().min(*left);
                            *left -= take;
                            Some(Ok(b.slice(0, take)))
                        }
                        Err(e) => Some(Err(e)),
                    };
                    futures::future::ready(out)
                })
                .boxed(),
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.plan.output.clone(), stream)))
    }

    fn statistics_from_inputs(&self, _inputs: &[Arc<Statistics>], args: &StatisticsArgs) -> Result<Arc<Statistics>> {
        Ok(match args.partition() {
            Some(p) => self.statistics.get(p).cloned().unwrap_or_else(|| Arc::new(Statistics::new_unknown(&self.plan.output))),
            None => self.total.clone(),
        })
    }

    /// What the scan read and skipped, for EXPLAIN ANALYZE.
    fn metrics(&self) -> Option<MetricsSet> {
        let m = *self.metrics.lock().unwrap_or_else(|e| e.into_inner());
        let set = ExecutionPlanMetricsSet::new();
        let counts = [
            ("fragments_total", m.fragments_total),
            ("files_opened", m.files_opened),
            ("row_groups_total", m.row_groups_total),
            ("row_groups_read", m.row_groups_read),
        ];
        for (name, value) in counts {
            MetricBuilder::new(&set).global_counter(name).add(usize::try_from(value).unwrap_or(usize::MAX));
        }
        Some(set.clone_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fragment(id: u64, rows: u64) -> Fragment {
        Fragment { id, files: Vec::new(), physical_rows: rows, deletion: None, first_row_id: None }
    }

    #[test]
    fn partitions_balance_rows_and_keep_fragment_order() {
        let groups = split(vec![fragment(0, 10), fragment(1, 100), fragment(2, 50), fragment(3, 50), fragment(4, 5)], 2);
        let ids: Vec<Vec<u64>> = groups.iter().map(|g| g.iter().map(|f| f.id).collect()).collect();
        assert_eq!(ids, vec![vec![0, 1], vec![2, 3, 4]], "110 and 105 rows");
        assert_eq!(split(Vec::new(), 4).len(), 1, "one empty partition");
        assert_eq!(split(vec![fragment(0, 1)], 8).len(), 1);
    }
}
