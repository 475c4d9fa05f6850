//! `changes('t', V [, W])`: the change feed of a registered table, as a table. The
//! changes after version `V` up to `W` (without, the version the session holds), read
//! in the schema of the table as the session holds it; columns as
//! [`crate::Table::changes`] gives them.

use std::sync::{Arc, Mutex};

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::error::{ChangesError, ErrorKind};
use crate::table::{ChangeOptions, Table};

/// The table function, over the tables registered in a session (by lower-case name).
#[derive(Debug)]
pub(crate) struct ChangesFunction {
    pub(crate) tables: Arc<Mutex<Vec<(String, Table)>>>,
}

impl TableFunctionImpl for ChangesFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let usage = || {
            DataFusionError::Plan("changes() takes a table's name and one or two versions: changes('t', 10) or changes('t', 10, 20)".into())
        };
        let (name, from, to) = match args.exprs() {
            [name, from] => (text(name).ok_or_else(usage)?, number(from).ok_or_else(usage)?, None),
            [name, from, to] => (text(name).ok_or_else(usage)?, number(from).ok_or_else(usage)?, Some(number(to).ok_or_else(usage)?)),
            _ => return Err(usage()),
        };
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, table)) = tables.iter().find(|(n, _)| *n == name.to_ascii_lowercase()) else {
            return Err(DataFusionError::Plan(format!("changes(): no table named '{name}' is registered")));
        };
        let schema = table.change_schema(&ChangeOptions::default()).map_err(failure)?;
        Ok(Arc::new(ChangesProvider { table: table.clone(), from, to: to.unwrap_or(table.version()), schema }))
    }
}

fn text(e: &Expr) -> Option<String> {
    match e {
        Expr::Literal(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)), _) => Some(s.clone()),
        _ => None,
    }
}

fn number(e: &Expr) -> Option<u64> {
    match e {
        Expr::Literal(ScalarValue::Int64(Some(n)), _) => u64::try_from(*n).ok(),
        Expr::Literal(ScalarValue::UInt64(Some(n)), _) => Some(*n),
        Expr::Literal(ScalarValue::Int32(Some(n)), _) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// A change feed error as DataFusion's: bad input plans no query; anything else is the
/// engine's failure, with its message.
fn failure(e: ChangesError) -> DataFusionError {
    match e.kind() {
        ErrorKind::InvalidInput => DataFusionError::Plan(e.to_string()),
        _ => DataFusionError::External(Box::new(e)),
    }
}

/// The changes of one table over one range.
#[derive(Debug)]
struct ChangesProvider {
    table: Table,
    from: u64,
    to: u64,
    schema: SchemaRef,
}

#[async_trait]
impl TableProvider for ChangesProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let feed = self.table.changes_in_own_schema(self.from, Some(self.to), &ChangeOptions::default()).await.map_err(failure)?;
        let batches = feed.collect().await.map_err(failure)?;
        Ok(MemorySourceConfig::try_new_exec(&[batches], self.schema.clone(), projection.cloned())?)
    }
}
