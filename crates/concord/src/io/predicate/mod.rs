//! SQL predicates, parsed and planned by DataFusion against the table schema.

mod checked;
mod literals;

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow::compute::prep_null_mask_filter;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use chrono::{DateTime, Utc};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DataFusionError, ScalarValue, SchemaError};
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{Expr, ExprSchemable, Operator};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{visit_expressions_mut, Expr as SqlExpr, Ident};

use crate::error::PredicateError;
use crate::format::schema::{ColumnNameError, Field, Schema};
use crate::io::values::sql_type_name;

/// A compiled filter. `schema` holds only the referenced columns, in table order;
/// batches handed to [`Predicate::evaluate`] must have exactly that schema.
#[derive(Debug)]
pub(crate) struct Predicate {
    pub sql: String,
    pub fields: Vec<Field>,
    pub schema: SchemaRef,
    expr: Arc<dyn PhysicalExpr>,
    pub pruning: Option<Arc<PruningPredicate>>,
    /// Fragment pruning: `pruning` over the struct leaves the filter reads too.
    pub leaf_pruning: Option<(Arc<PruningPredicate>, Vec<crate::io::write::stats::Leaf>)>,
    /// The value `now()` has in it.
    pub now: DateTime<Utc>,
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

/// `sql` with every unquoted keyword that follows a `.` written as a quoted name
/// (`payload.user.id` as `payload."user".id`, lower-case as unquoted names are): the
/// SQL parser reads `user` after a dot as the `USER` function, never as a struct field.
/// `None` if nothing changes.
pub(crate) fn quote_field_keywords(sql: &str) -> Option<String> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let mut tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize().ok()?;
    let mut changed = false;
    for i in 1..tokens.len() {
        if let (Token::Period, Token::Word(w)) = (&tokens[i - 1], &tokens[i]) {
            if w.quote_style.is_none() && w.keyword != Keyword::NoKeyword {
                tokens[i] = Token::make_word(&w.value.to_lowercase(), Some('"'));
                changed = true;
            }
        }
    }
    changed.then(|| tokens.iter().map(ToString::to_string).collect())
}

/// `sql` planned against `table`: parsed, its column names resolved by the one rule
/// ([`Schema::resolve`]), its comparisons checked for types that compare, `now()`
/// fixed at `now`, constants folded. Nothing here reads data, so every mistake in
/// the text is found before a file is touched.
fn plan(sql: &str, table: &Schema, now: DateTime<Utc>, state: &SessionState) -> Result<(Expr, DFSchema), PredicateError> {
    check_size(sql)?;
    let full = table.arrow_schema();
    let df_full = DFSchema::try_from(full.as_ref().clone()).map_err(|e| invalid(sql, e))?;
    let dialect = state.config().options().sql_parser.dialect;
    let quoted = quote_field_keywords(sql);
    let mut ast = state.sql_to_expr_with_alias(quoted.as_deref().unwrap_or(sql), &dialect).map_err(|e| classify(sql, table, e))?;
    resolve_identifiers(sql, table, &mut ast.expr)?;
    check_numbers(sql, &mut ast.expr)?;
    let inexact = crate::io::predicate::literals::inexact_numbers(&ast.expr);
    let expr = state.create_logical_expr_from_sql_expr(ast, &df_full).map_err(|e| classify(sql, table, e))?;
    let expr = crate::io::predicate::literals::exact_decimals(expr, &inexact, &df_full).map_err(|e| invalid(sql, e))?;
    check_comparisons(sql, &expr, &df_full)?;
    // `now()` at the precision timestamp columns keep: storing it never loses digits.
    let now = chrono::SubsecRound::trunc_subsecs(now, 6);
    let context = SimplifyContext::builder().with_schema(Arc::new(df_full.clone())).with_query_execution_start_time(Some(now)).build();
    let simplifier = ExprSimplifier::new(context);
    let expr = simplifier.coerce(expr, &df_full).map_err(|e| classify(sql, table, e))?;
    // Before folding constants: the simplifier folds them through the checked operators.
    let expr = crate::io::predicate::checked::checked_arithmetic(expr, &df_full).map_err(|e| invalid(sql, e))?;
    let expr = simplifier.simplify(expr).map_err(|e| classify(sql, table, e))?;
    Ok((expr, df_full))
}

/// Rewrites every unquoted column name to the exact (quoted) name of the column it
/// resolves to, so DataFusion's lower-casing of unquoted names never picks another.
fn resolve_identifiers(sql: &str, table: &Schema, expr: &mut SqlExpr) -> Result<(), PredicateError> {
    let outcome = visit_expressions_mut(expr, |e| {
        if let SqlExpr::Identifier(ident) = e {
            let name = match ident.quote_style {
                Some('"') => format!("\"{}\"", ident.value),
                Some(_) => return ControlFlow::Continue(()),
                None => ident.value.clone(),
            };
            match table.resolve(&name) {
                Ok(field) => *ident = Ident::with_quote('"', field.name.clone()),
                Err(ColumnNameError::Unknown { .. }) => return ControlFlow::Break(unknown_column(sql, table, &ident.value)),
                Err(ColumnNameError::Ambiguous { candidates, .. }) => {
                    return ControlFlow::Break(PredicateError::AmbiguousColumn {
                        sql: sql.to_string(),
                        column: ident.value.clone(),
                        candidates,
                    })
                }
                Err(other) => return ControlFlow::Break(invalid(sql, other)),
            }
        }
        ControlFlow::Continue(())
    });
    match outcome {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// A number literal no double holds (`1e400` would be infinity, `1e-400` zero) is
/// refused: values never change silently.
fn check_numbers(sql: &str, expr: &mut SqlExpr) -> Result<(), PredicateError> {
    use datafusion::sql::sqlparser::ast::Value;
    let outcome = visit_expressions_mut(expr, |e| {
        if let SqlExpr::Value(v) = e {
            if let Value::Number(text, _) = &v.value {
                let nonzero = text.split(['e', 'E']).next().is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
                if text.parse::<f64>().is_ok_and(|f| f.is_infinite() || (f == 0.0 && nonzero)) {
                    return ControlFlow::Break(PredicateError::NumberOutOfRange { sql: sql.to_string(), number: text.clone() });
                }
            }
        }
        ControlFlow::Continue(())
    });
    match outcome {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// What a value's type compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Number,
    Boolean,
    Temporal,
    Binary,
    /// NULL, or a type whose comparisons DataFusion judges itself.
    Any,
}

fn kind(t: &DataType) -> Kind {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Kind::Text,
        DataType::Boolean => Kind::Boolean,
        DataType::Date32 | DataType::Date64 | DataType::Timestamp(..) | DataType::Time32(_) | DataType::Time64(_) => Kind::Temporal,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => Kind::Binary,
        DataType::Dictionary(_, v) => kind(v),
        t if t.is_numeric() => Kind::Number,
        _ => Kind::Any,
    }
}

/// Every comparison (`=`, `<`, ..., `IN`, `BETWEEN`) must compare values of one kind. A
/// text literal compared with a column of another kind must be a valid value of it
/// (`id = '5'`, `day = '2024-01-02'`); text and numbers never compare implicitly
/// (DataFusion would cast each row's text, failing on the data, not on the mistake).
fn check_comparisons(sql: &str, expr: &Expr, schema: &DFSchema) -> Result<(), PredicateError> {
    let mut found = Ok(());
    let _ = expr.apply(|e| {
        let pairs: Vec<(&Expr, &Expr)> = match e {
            Expr::BinaryExpr(b)
                if matches!(
                    b.op,
                    Operator::Eq
                        | Operator::NotEq
                        | Operator::Lt
                        | Operator::LtEq
                        | Operator::Gt
                        | Operator::GtEq
                        | Operator::IsDistinctFrom
                        | Operator::IsNotDistinctFrom
                ) =>
            {
                vec![(b.left.as_ref(), b.right.as_ref())]
            }
            Expr::InList(l) => l.list.iter().map(|item| (l.expr.as_ref(), item)).collect(),
            Expr::Between(b) => vec![(b.expr.as_ref(), b.low.as_ref()), (b.expr.as_ref(), b.high.as_ref())],
            _ => Vec::new(),
        };
        for (a, b) in pairs {
            if let Err(err) = check_pair(sql, a, b, schema).and_then(|()| check_pair(sql, b, a, schema)) {
                found = Err(err);
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok::<_, DataFusionError>(TreeNodeRecursion::Continue)
    });
    found
}

/// One direction of a comparison: `a` against `b`.
fn check_pair(sql: &str, a: &Expr, b: &Expr, schema: &DFSchema) -> Result<(), PredicateError> {
    let (Ok(ta), Ok(tb)) = (a.get_type(schema), b.get_type(schema)) else { return Ok(()) };
    let (ka, kb) = (kind(&ta), kind(&tb));
    if ka == kb || ka == Kind::Any || kb == Kind::Any {
        return Ok(());
    }
    if let (
        Expr::Literal(ScalarValue::Utf8(Some(text)) | ScalarValue::LargeUtf8(Some(text)) | ScalarValue::Utf8View(Some(text)), _),
        Kind::Number | Kind::Boolean | Kind::Temporal,
    ) = (b, ka)
    {
        let target = match &ta {
            DataType::Dictionary(_, v) => v.as_ref().clone(),
            other => other.clone(),
        };
        // The one rule of values: a literal that does not convert exactly (more precise
        // than the column, say) can equal no stored value, and comparing with it
        // rounded would give wrong answers.
        let literal: arrow::array::ArrayRef = Arc::new(arrow::array::StringArray::from(vec![text.as_str()]));
        return match crate::io::values::to_type(&literal, &target, crate::io::values::Source::Any) {
            Ok(_) => Ok(()),
            Err(_) => Err(PredicateError::BadLiteral {
                sql: sql.to_string(),
                value: text.clone(),
                column: describe(a),
                column_type: sql_type_name(&ta),
            }),
        };
    }
    if matches!(a, Expr::Literal(..)) && matches!(b, Expr::Literal(..)) {
        return Ok(());
    }
    // Text literals against other kinds are judged from the other side, above.
    if matches!(a, Expr::Literal(ScalarValue::Utf8(_) | ScalarValue::LargeUtf8(_) | ScalarValue::Utf8View(_), _)) {
        return Ok(());
    }
    Err(PredicateError::Incomparable {
        sql: sql.to_string(),
        left: describe(a),
        left_type: sql_type_name(&ta),
        right: describe(b),
        right_type: sql_type_name(&tb),
    })
}

/// An expression as named in messages: `column 'x'`, or its SQL text.
fn describe(e: &Expr) -> String {
    match e {
        Expr::Column(c) => format!("column '{}'", c.name),
        Expr::Literal(v, _) => v.to_string(),
        other => other.to_string(),
    }
}

pub(crate) fn compile(sql: &str, table: &Schema, now: DateTime<Utc>) -> Result<Predicate, PredicateError> {
    let state = SessionContext::new().state();
    let (expr, _) = plan(sql, table, now, &state)?;
    let full = table.arrow_schema();
    let referenced = expr.column_refs();
    let fields: Vec<Field> = table.fields.iter().filter(|f| referenced.iter().any(|c| c.name == f.name)).cloned().collect();
    if let Some(unknown) = referenced.iter().find(|c| table.field(&c.name).is_none()) {
        return Err(unknown_column(sql, table, &unknown.name));
    }
    let indices: Vec<usize> = fields.iter().map(|f| full.index_of(&f.name).expect("field exists")).collect();
    let schema: SchemaRef = Arc::new(full.project(&indices).map_err(|e| invalid(sql, e))?);
    let df_schema = DFSchema::try_from(schema.as_ref().clone()).map_err(|e| invalid(sql, e))?;
    let physical = state.create_physical_expr(expr, &df_schema).map_err(|e| classify(sql, table, e))?;
    let data_type = physical.data_type(&schema).map_err(|e| invalid(sql, e))?;
    if data_type != DataType::Boolean && data_type != DataType::Null {
        return Err(PredicateError::NotBoolean { sql: sql.to_string(), found: sql_type_name(&data_type) });
    }
    Ok(Predicate::new(sql.to_string(), fields, schema, physical, now))
}

/// The conjunction of `filters`, DataFusion expressions over columns of `table` (whose
/// Arrow types the query sees are `full`'s) that a query pushed into a scan, compiled
/// like [`compile`] but planned with the query's session (its `now()`, its settings).
/// `None` without filters.
pub(crate) fn from_filters(
    filters: &[Expr],
    table: &Schema,
    full: &SchemaRef,
    state: &dyn datafusion::catalog::Session,
) -> Result<Option<Predicate>, DataFusionError> {
    let Some(expr) = datafusion::logical_expr::utils::conjunction(filters.iter().cloned()) else { return Ok(None) };
    // The query qualifies columns with its name for the table; the scan's schema does not.
    let expr = datafusion::logical_expr::expr_rewriter::unnormalize_col(expr);
    let referenced = expr.column_refs();
    let fields: Vec<Field> = table.fields.iter().filter(|f| referenced.iter().any(|c| c.name == f.name)).cloned().collect();
    let indices: Vec<usize> = fields.iter().map(|f| full.index_of(&f.name).expect("field exists")).collect();
    let schema: SchemaRef = Arc::new(full.project(&indices)?);
    let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
    let physical = state.create_physical_expr(expr.clone(), &df_schema)?;
    let now = state.execution_props().query_execution_start_time.unwrap_or_else(Utc::now);
    Ok(Some(Predicate::new(expr.to_string(), fields, schema, physical, now)))
}

impl Predicate {
    fn new(sql: String, fields: Vec<Field>, schema: SchemaRef, expr: Arc<dyn PhysicalExpr>, now: DateTime<Utc>) -> Predicate {
        // Pruning is an optimisation: a predicate it cannot handle simply prunes nothing.
        let pruning = PruningPredicateBuilder::new().with_file_schema(schema.clone()).build(expr.clone());
        let leaf_pruning =
            crate::io::write::stats::as_leaf_columns(&expr, &schema, &fields).and_then(|(rewritten, with_leaves, leaves)| {
                Some((PruningPredicateBuilder::new().with_file_schema(with_leaves).build(rewritten)?, leaves))
            });
        Predicate { sql, fields, schema, expr, pruning, leaf_pruning, now }
    }
}

/// Refuses query text too long or with too many operators to plan safely (the limits
/// of expressions), before DataFusion parses it.
pub(crate) fn check_query_size(sql: &str) -> Result<(), PredicateError> {
    check_size(sql)
}

/// A test of rows on some table columns: a SQL predicate, or membership in a key set.
/// Batches handed to [`RowTest::evaluate`] hold exactly `fields()` as `schema()`.
pub(crate) trait RowTest: Send + Sync {
    /// What the test is, for messages (a predicate's SQL).
    fn describe(&self) -> String;
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
    fn describe(&self) -> String {
        self.sql.clone()
    }
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
pub(crate) fn compile_value(sql: &str, table: &Schema, now: DateTime<Utc>) -> Result<(Arc<dyn PhysicalExpr>, Vec<u32>), PredicateError> {
    let state = SessionContext::new().state();
    let (expr, df_full) = plan(sql, table, now, &state)?;
    let read = expr.column_refs().iter().filter_map(|c| table.field(&c.name).map(|f| f.id)).collect();
    let physical = state.create_physical_expr(expr, &df_full).map_err(|e| classify(sql, table, e))?;
    Ok((physical, read))
}

/// The first row of `batches` (table schema) for which `predicate` is not true, as
/// (1-based row number, its values of the predicate's columns).
pub(crate) fn first_row_outside(
    predicate: &Predicate,
    table: &Schema,
    batches: &[RecordBatch],
) -> Result<Option<(u64, String)>, PredicateError> {
    let full = table.arrow_schema();
    let indices: Vec<usize> = predicate.fields.iter().map(|f| full.index_of(&f.name).expect("predicate fields are table fields")).collect();
    let mut first_row = 0u64;
    for batch in batches {
        let projected = batch.project(&indices).map_err(|e| invalid(&predicate.sql, e))?;
        let projected = RecordBatch::try_new_with_options(
            predicate.schema.clone(),
            projected.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )
        .map_err(|e| invalid(&predicate.sql, e))?;
        let hits =
            predicate.evaluate(&projected).map_err(|e| PredicateError::Failed { sql: predicate.sql.clone(), reason: e.to_string() })?;
        if let Some(i) = (0..hits.len()).find(|&i| !hits.value(i)) {
            let values: Vec<String> = predicate
                .fields
                .iter()
                .zip(projected.columns())
                .map(|(f, c)| {
                    if c.is_null(i) {
                        format!("{} = NULL", f.name)
                    } else {
                        format!("{} = {}", f.name, crate::io::values::display_value(c.as_ref(), i))
                    }
                })
                .collect();
            let shown = if values.is_empty() { "every column at its default".to_string() } else { values.join(", ") };
            return Ok(Some((first_row + i as u64 + 1, shown)));
        }
        first_row += batch.num_rows() as u64;
    }
    Ok(None)
}

impl Predicate {
    /// The planned expression, over `self.schema`.
    pub(crate) fn expr(&self) -> &Arc<dyn PhysicalExpr> {
        &self.expr
    }

    /// Rows of `batch` (which has `self.schema`) for which the predicate is true.
    /// NULL counts as false.
    pub(crate) fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, ArrowError> {
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
        DataFusionError::SQL(..) => PredicateError::Parse { sql: sql.to_string(), reason: e.find_root().to_string() },
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

    fn compile_now(sql: &str, table: &Schema) -> Result<Predicate, PredicateError> {
        compile(sql, table, Utc::now())
    }

    fn table() -> Schema {
        Schema::parse("id bigint not null, name varchar, score double").unwrap()
    }

    #[test]
    fn compiles_and_evaluates_on_referenced_columns_only() {
        let p = compile_now("id > 1 AND name <> 'b'", &table()).unwrap();
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
        assert!(matches!(compile_now("nope = 1", &table()), Err(PredicateError::UnknownColumn { column, .. }) if column == "nope"));
        assert!(matches!(compile_now("id >", &table()), Err(PredicateError::Parse { .. })));
        assert!(matches!(compile_now("id + 1", &table()), Err(PredicateError::NotBoolean { .. })));
        assert!(compile_now("1 = 1", &table()).unwrap().constant_value().unwrap());
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
        let message = compile_now(&many(2_000, "id = 1", " OR "), &table()).unwrap_err().to_string();
        assert!(message.len() < 400 && message.contains("(19996 bytes)"), "{message}");
    }
}
