//! SQL over Concord tables, with DataFusion: each registered table is one version
//! (a [`SqlTableProvider`]), so a query sees exactly that version, never part of a
//! commit, and never a deleted row.

mod changes;
mod error;
mod exec;
mod names;
mod provider;
mod stats;

use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, FieldRef, Schema as ArrowSchema, SchemaRef};
use chrono::{DateTime, Utc};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::TableReference;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DFStatement;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

pub use error::SqlError;
pub use provider::SqlTableProvider;

use crate::format::schema::Schema;
use crate::table::Table;

/// Longest table name accepted.
const MAX_NAME_BYTES: usize = 128;

/// A DataFusion session in which Concord tables (each at one version) are registered
/// under names, and read-only SQL queries run over them.
///
/// ```
/// use std::sync::Arc;
/// use concord::arrow::array::{Int64Array, RecordBatch};
/// use concord::{CommitOptions, Env, Schema, SqlSession, StoreResolver, Table};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let resolver = StoreResolver::new();
/// let table = Table::create(resolver.resolve("memory://sql-example/t")?, Env::system(), Schema::parse("id bigint not null")?).await?;
/// let ids = RecordBatch::try_new(table.schema().arrow_schema(), vec![Arc::new(Int64Array::from(vec![1, 2, 3]))])?;
/// table.append(ids, &CommitOptions::default()).await?;
///
/// let session = SqlSession::new();
/// session.register("t", &table.latest().await?)?;
/// session.register("t0", &table.checkout(0).await?)?; // time travel: version 0, empty
/// let batches = session.query("SELECT count(*) AS n, sum(id) AS total FROM t").await?.collect().await?;
/// let total = batches[0].column_by_name("total").unwrap().as_any().downcast_ref::<Int64Array>().unwrap().value(0);
/// assert_eq!(total, 6);
/// assert!(session.query("INSERT INTO t VALUES (4)").await.is_err(), "queries only");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct SqlSession {
    context: SessionContext,
    /// The registered tables' names (lower case) and schemas: column names in queries
    /// resolve against them by the one rule of every command.
    tables: std::sync::Mutex<Vec<(String, Schema)>>,
    /// The registered tables, for the `changes()` table function.
    handles: Arc<std::sync::Mutex<Vec<(String, Table)>>>,
}

impl Default for SqlSession {
    fn default() -> Self {
        SqlSession::new()
    }
}

impl SqlSession {
    /// A session whose scans use every core (`target_partitions` = available parallelism).
    pub fn new() -> Self {
        SqlSession::with_config(SessionConfig::new())
    }

    /// A session with DataFusion settings of the caller's. Its queries may call
    /// `changes('t', V [, W])`, the change feed of table `t` after version `V` (up to
    /// `W`, else the version registered), read in the schema of `t` as registered.
    pub fn with_config(config: SessionConfig) -> Self {
        let context = SessionContext::new_with_config(config);
        let handles: Arc<std::sync::Mutex<Vec<(String, Table)>>> = Arc::default();
        context.register_udtf("changes", Arc::new(changes::ChangesFunction { tables: handles.clone() }));
        SqlSession { context, tables: Default::default(), handles }
    }

    /// The DataFusion context, e.g. to register other tables or functions.
    pub fn context(&self) -> &SessionContext {
        &self.context
    }

    /// Registers `table` (at its version) as `name`. Names are SQL identifiers and
    /// match ignoring case, as unquoted names in queries do.
    pub fn register(&self, name: &str, table: &Table) -> Result<(), SqlError> {
        let valid = !name.is_empty()
            && name.len() <= MAX_NAME_BYTES
            && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(SqlError::BadName { name: name.to_string() });
        }
        let key = TableReference::bare(name.to_ascii_lowercase());
        if self.context.table_exist(key.clone()).unwrap_or(false) {
            return Err(SqlError::DuplicateName { name: name.to_string() });
        }
        self.context.register_table(key, Arc::new(SqlTableProvider::new(table.clone())))?;
        self.tables.lock().unwrap_or_else(|e| e.into_inner()).push((name.to_ascii_lowercase(), table.schema().clone()));
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).push((name.to_ascii_lowercase(), table.clone()));
        Ok(())
    }

    /// Registers `table` as `name` as it was at `as_of` (its newest version committed
    /// then): time travel for every table of a query at once.
    pub async fn register_as_of(&self, name: &str, table: &Table, as_of: DateTime<Utc>) -> Result<(), SqlError> {
        let then = table.checkout_as_of(as_of).await.map_err(|e| SqlError::Scan(Arc::new(e.into())))?;
        self.register(name, &then)
    }

    /// Plans `sql` (one read-only statement) and starts running it. Statements that
    /// would write or change the session are refused before anything runs.
    pub async fn query(&self, sql: &str) -> Result<SqlStream, SqlError> {
        crate::io::predicate::check_query_size(sql).map_err(SqlError::TooLarge)?;
        let state = self.context.state();
        let dialect = state.config().options().sql_parser.dialect;
        let quoted = crate::io::predicate::quote_field_keywords(sql);
        let mut statement = state.sql_to_statement(quoted.as_deref().unwrap_or(sql), &dialect)?;
        only_queries(&statement)?;
        if let DFStatement::Statement(inner) = &mut statement {
            let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner()).clone();
            names::resolve_columns(inner, &tables)?;
        }
        let plan = state.statement_to_plan(statement).await?;
        refuse_changes(&plan)?;
        let frame = self.context.execute_logical_plan(plan).await?;
        let stream = plain_strings(frame.execute_stream().await?)?;
        Ok(SqlStream { schema: stream.schema(), stream })
    }
}

/// `stream` with its strings as `Utf8` (and lists and structs of them likewise), as
/// answers always were: scans read `varchar` as `Utf8View` for speed, which callers
/// of [`SqlSession`] never see.
fn plain_strings(stream: SendableRecordBatchStream) -> Result<SendableRecordBatchStream, SqlError> {
    let schema = stream.schema();
    let fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone().with_data_type(plain(f.data_type()))).collect();
    let target = Arc::new(ArrowSchema::new_with_metadata(fields, schema.metadata().clone()));
    if target == schema {
        return Ok(stream);
    }
    let out = target.clone();
    let batches = stream.map(move |batch| {
        let batch = batch?;
        let columns = batch
            .columns()
            .iter()
            .zip(out.fields())
            .map(|(c, f)| if c.data_type() == f.data_type() { Ok(c.clone()) } else { arrow::compute::cast(c, f.data_type()) })
            .collect::<Result<Vec<_>, _>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(out.clone(), columns, &options)?)
    });
    Ok(Box::pin(RecordBatchStreamAdapter::new(target, batches)))
}

/// `t` with `Utf8View` as `Utf8`, at any depth of lists and structs.
fn plain(t: &DataType) -> DataType {
    let field = |f: &FieldRef| Arc::new(f.as_ref().clone().with_data_type(plain(f.data_type())));
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::List(f) => DataType::List(field(f)),
        DataType::LargeList(f) => DataType::LargeList(field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(field).collect()),
        other => other.clone(),
    }
}

/// Refuses, before planning, a statement that is not a query (planning an INSERT on a
/// read-only table would fail with the planner's message instead of this one).
fn only_queries(statement: &DFStatement) -> Result<(), SqlError> {
    use datafusion::sql::sqlparser::ast::Statement as S;
    let (kind, name) = match statement {
        DFStatement::Statement(inner) => match inner.as_ref() {
            S::Query(_) | S::Explain { .. } | S::ExplainTable { .. } => return Ok(()),
            S::Insert(_) | S::Update { .. } | S::Delete(_) | S::Merge { .. } | S::Truncate { .. } | S::Copy { .. } => {
                ("a data modification", statement_name(inner))
            }
            S::CreateTable(_) | S::CreateView { .. } | S::CreateSchema { .. } | S::Drop { .. } | S::AlterTable { .. } => {
                ("a data definition", statement_name(inner))
            }
            other => ("a session statement", statement_name(other)),
        },
        DFStatement::Explain(_) => return Ok(()),
        DFStatement::CopyTo(_) => ("a data modification", "COPY".to_string()),
        other => ("a data definition", other.to_string().split_whitespace().take(2).collect::<Vec<_>>().join(" ")),
    };
    Err(SqlError::NotAQuery { kind, name })
}

/// A statement's leading keywords (`INSERT INTO`, `CREATE TABLE`, ...), for messages.
fn statement_name(statement: &datafusion::sql::sqlparser::ast::Statement) -> String {
    let text = statement.to_string();
    let words: Vec<&str> = text.split_whitespace().take_while(|w| w.chars().all(|c| c.is_ascii_uppercase())).take(3).collect();
    if words.is_empty() {
        text.split_whitespace().next().unwrap_or_default().to_string()
    } else {
        words.join(" ")
    }
}

/// Refuses a plan that would change a table, the catalog or the session.
fn refuse_changes(plan: &LogicalPlan) -> Result<(), SqlError> {
    let mut refused = None;
    plan.apply_with_subqueries(|node| {
        refused = match node {
            LogicalPlan::Ddl(ddl) => Some(("a data definition", ddl.name().to_string())),
            LogicalPlan::Dml(dml) => Some(("a data modification", dml.op.to_string())),
            LogicalPlan::Copy(_) => Some(("a data modification", "COPY".to_string())),
            LogicalPlan::Statement(statement) => Some(("a session statement", statement.name().to_string())),
            _ => None,
        };
        Ok(if refused.is_some() { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    })?;
    match refused {
        Some((kind, name)) => Err(SqlError::NotAQuery { kind, name }),
        None => Ok(()),
    }
}

/// A running query: its schema and its batches, as they are computed.
pub struct SqlStream {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
}

impl SqlStream {
    /// The schema of its batches.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Its batches, as they are computed.
    pub fn into_stream(self) -> BoxStream<'static, Result<RecordBatch, SqlError>> {
        self.stream.map_err(SqlError::from).boxed()
    }

    /// All its batches.
    pub async fn collect(self) -> Result<Vec<RecordBatch>, SqlError> {
        self.into_stream().try_collect().await
    }
}
