//! SQL predicates, parsed and planned by DataFusion against the table schema.

use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow::compute::prep_null_mask_filter;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use datafusion::common::{DFSchema, DataFusionError, SchemaError};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use datafusion::prelude::SessionContext;

use crate::error::PredicateError;
use crate::format::schema::{Field, Schema};

/// A compiled filter. `schema` holds only the referenced columns, in table order;
/// batches handed to [`Predicate::evaluate`] must have exactly that schema.
#[derive(Debug)]
pub(crate) struct Predicate {
    pub sql: String,
    pub fields: Vec<Field>,
    pub schema: SchemaRef,
    expr: Arc<dyn PhysicalExpr>,
    pub pruning: Option<Arc<PruningPredicate>>,
}

/// Longest expression text accepted (an `IN` list of 100,000 values fits).
pub const MAX_EXPRESSION_BYTES: usize = 4 << 20;
/// Most operators and nesting levels an expression may have. Planning and evaluating
/// recurse once per level; this bound keeps that within the stack the CLI gives its
/// threads (library callers: about 64 MiB in debug builds, far less in release).
pub const MAX_EXPRESSION_OPERATORS: usize = 1_000;

/// Rejects expressions too long or too deep to plan safely, before DataFusion sees them.
/// Counts tokens iteratively, so it cannot itself run out of stack.
fn check_size(sql: &str) -> Result<(), PredicateError> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    if sql.len() > MAX_EXPRESSION_BYTES {
        return Err(PredicateError::TooLong { bytes: sql.len(), limit: MAX_EXPRESSION_BYTES });
    }
    // An untokenizable text gets DataFusion's own parse error below.
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else { return Ok(()) };
    let operators = tokens
        .iter()
        .filter(|t| match t {
            Token::Word(w) => matches!(
                w.keyword,
                Keyword::AND | Keyword::OR | Keyword::NOT | Keyword::IS | Keyword::LIKE | Keyword::ILIKE | Keyword::BETWEEN | Keyword::WHEN
            ),
            Token::Whitespace(_) | Token::Comma | Token::RParen | Token::Period => false,
            Token::Number(..) | Token::Char(_) => false,
            Token::SingleQuotedString(_) | Token::DoubleQuotedString(_) | Token::NationalStringLiteral(_) => false,
            Token::HexStringLiteral(_) | Token::EscapedStringLiteral(_) => false,
            // Operators, and `(`: each opens a nesting level.
            _ => true,
        })
        .count();
    if operators > MAX_EXPRESSION_OPERATORS {
        return Err(PredicateError::TooComplex { sql: sql.to_string(), operators, limit: MAX_EXPRESSION_OPERATORS });
    }
    Ok(())
}

pub(crate) fn compile(sql: &str, table: &Schema) -> Result<Predicate, PredicateError> {
    check_size(sql)?;
    let full = table.arrow_schema();
    let ctx = SessionContext::new();
    let df_full = DFSchema::try_from(full.as_ref().clone()).map_err(|e| invalid(sql, e))?;
    let expr = ctx.parse_sql_expr(sql, &df_full).map_err(|e| classify(sql, table, e))?;
    let referenced = expr.column_refs();
    let fields: Vec<Field> = table.fields.iter().filter(|f| referenced.iter().any(|c| c.name == f.name)).cloned().collect();
    if let Some(unknown) = referenced.iter().find(|c| table.field(&c.name).is_none()) {
        return Err(unknown_column(sql, table, &unknown.name));
    }
    let indices: Vec<usize> = fields.iter().map(|f| full.index_of(&f.name).expect("field exists")).collect();
    let schema: SchemaRef = Arc::new(full.project(&indices).map_err(|e| invalid(sql, e))?);
    let df_schema = DFSchema::try_from(schema.as_ref().clone()).map_err(|e| invalid(sql, e))?;
    let physical = ctx.create_physical_expr(expr, &df_schema).map_err(|e| classify(sql, table, e))?;
    let data_type = physical.data_type(&schema).map_err(|e| invalid(sql, e))?;
    if data_type != DataType::Boolean && data_type != DataType::Null {
        return Err(PredicateError::NotBoolean { sql: sql.to_string(), found: data_type.to_string() });
    }
    // Pruning is an optimisation: a predicate it cannot handle simply prunes nothing.
    let pruning = PruningPredicateBuilder::new().with_file_schema(schema.clone()).build(physical.clone());
    Ok(Predicate { sql: sql.to_string(), fields, schema, expr: physical, pruning })
}

/// A test of rows on some table columns: a SQL predicate, or membership in a key set.
/// Batches handed to [`RowTest::evaluate`] hold exactly `fields()` as `schema()`.
pub(crate) trait RowTest: Send + Sync {
    fn fields(&self) -> &[Field];
    fn schema(&self) -> &SchemaRef;
    /// Row-group statistics pruning, where the test supports it.
    fn pruning(&self) -> Option<&PruningPredicate> {
        None
    }
    /// Rows for which the test holds (NULL counts as false).
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, ArrowError>;
    /// The test's value on a row of a file lacking all its columns: each column at its
    /// default (NULL without one).
    fn constant_value(&self) -> Result<bool, ArrowError> {
        let columns = self.fields().iter().map(|f| f.default_array(1)).collect();
        let batch = RecordBatch::try_new_with_options(self.schema().clone(), columns, &RecordBatchOptions::new().with_row_count(Some(1)))?;
        Ok(self.evaluate(&batch)?.value(0))
    }
}

impl RowTest for Predicate {
    fn fields(&self) -> &[Field] {
        &self.fields
    }
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }
    fn pruning(&self) -> Option<&PruningPredicate> {
        self.pruning.as_deref()
    }
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, ArrowError> {
        Predicate::evaluate(self, batch)
    }
}

/// A SQL value expression (e.g. a SET clause's right side) planned against the whole
/// table schema: evaluate it on batches with every table column, in table order.
/// Returns the expression and the field ids it reads.
pub(crate) fn compile_value(sql: &str, table: &Schema) -> Result<(Arc<dyn PhysicalExpr>, Vec<u32>), PredicateError> {
    check_size(sql)?;
    let full = table.arrow_schema();
    let ctx = SessionContext::new();
    let df_full = DFSchema::try_from(full.as_ref().clone()).map_err(|e| invalid(sql, e))?;
    let expr = ctx.parse_sql_expr(sql, &df_full).map_err(|e| classify(sql, table, e))?;
    let read = expr.column_refs().iter().filter_map(|c| table.field(&c.name).map(|f| f.id)).collect();
    let physical = ctx.create_physical_expr(expr, &df_full).map_err(|e| classify(sql, table, e))?;
    Ok((physical, read))
}

impl Predicate {
    /// Rows of `batch` (which has `self.schema`) for which the predicate is true.
    /// NULL counts as false.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, ArrowError> {
        let value = self.expr.evaluate(batch).map_err(|e| ArrowError::ComputeError(e.to_string()))?;
        let array = value.into_array(batch.num_rows()).map_err(|e| ArrowError::ComputeError(e.to_string()))?;
        match array.as_any().downcast_ref::<BooleanArray>() {
            Some(b) if b.null_count() > 0 => Ok(prep_null_mask_filter(b)),
            Some(b) => Ok(b.clone()),
            None => Ok(BooleanArray::from(vec![false; batch.num_rows()])),
        }
    }
}

fn classify(sql: &str, table: &Schema, e: DataFusionError) -> PredicateError {
    if let DataFusionError::SchemaError(inner, _) = e.find_root() {
        if let SchemaError::FieldNotFound { field, .. } = inner.as_ref() {
            return unknown_column(sql, table, &field.name);
        }
    }
    match e.find_root() {
        DataFusionError::SQL(..) => {
            PredicateError::Parse { sql: sql.to_string(), reason: e.find_root().to_string() }
        }
        _ => invalid(sql, e),
    }
}

fn unknown_column(sql: &str, table: &Schema, column: &str) -> PredicateError {
    PredicateError::UnknownColumn { sql: sql.to_string(), column: column.to_string(), known: table.names().join(", ") }
}

fn invalid(sql: &str, e: impl std::fmt::Display) -> PredicateError {
    PredicateError::Invalid { sql: sql.to_string(), reason: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

    fn table() -> Schema {
        Schema::parse("id bigint not null, name varchar, score double").unwrap()
    }

    #[test]
    fn compiles_and_evaluates_on_referenced_columns_only() {
        let p = compile("id > 1 AND name <> 'b'", &table()).unwrap();
        assert_eq!(p.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), vec!["id", "name"]);
        let batch = RecordBatch::try_new(
            p.schema.clone(),
            vec![Arc::new(Int64Array::from(vec![1, 2, 3])), Arc::new(StringArray::from(vec![Some("a"), Some("b"), None]))],
        )
        .unwrap();
        assert_eq!(p.evaluate(&batch).unwrap(), BooleanArray::from(vec![false, false, false]));
        assert!(p.pruning.is_some());
    }

    #[test]
    fn classifies_errors() {
        assert!(matches!(compile("nope = 1", &table()), Err(PredicateError::UnknownColumn { column, .. }) if column == "nope"));
        assert!(matches!(compile("id >", &table()), Err(PredicateError::Parse { .. })));
        assert!(matches!(compile("id + 1", &table()), Err(PredicateError::NotBoolean { .. })));
        assert!(compile("1 = 1", &table()).unwrap().constant_value().unwrap());
    }

    #[test]
    fn counts_operators_and_nesting_before_parsing() {
        let ops = |sql: &str| match check_size(sql) {
            Ok(()) => None,
            Err(PredicateError::TooComplex { operators, .. }) => Some(operators),
            Err(e) => panic!("{e}"),
        };
        let many = |n: usize, term: &str, sep: &str| vec![term; n].join(sep);
        let cases: Vec<(String, Option<usize>)> = vec![
            ("id = 1 AND name LIKE 'a%'".into(), None),
            (format!("id IN ({})", many(50_000, "7", ",")), None),
            (format!("name = '{}'", "(".repeat(5_000)), None),
            (many(500, "id = 1", " OR "), None),
            (many(501, "id = 1", " OR "), Some(1_001)),
            (format!("{}1{}", "(".repeat(1_001), ")".repeat(1_001)), Some(1_001)),
            (format!("{} > 0", many(1_001, "id", " + ")), Some(1_001)),
            (many(1_001, "NOT", " ") + " id = 1", Some(1_002)),
        ];
        for (sql, expected) in cases {
            assert_eq!(ops(&sql), expected, "{}", crate::error::abbreviate(&sql));
        }
        let long = "x".repeat(MAX_EXPRESSION_BYTES + 1);
        assert!(matches!(check_size(&long), Err(PredicateError::TooLong { .. })));
        let message = compile(&many(2_000, "id = 1", " OR "), &table()).unwrap_err().to_string();
        assert!(message.len() < 400 && message.contains("(19996 bytes)"), "{message}");
    }
}
