//! Arithmetic that never changes meaning silently. DataFusion's `+ - * / %` wrap
//! integers around on overflow (i64::MAX + 1 is i64::MIN) and let finite floats become
//! infinite; every expression a write or a scan evaluates (predicates, SET values,
//! defaults) has its numeric operators replaced by these checked ones, which fail
//! instead, constants included (the simplifier folds them through the same functions).
//! `concord sql` keeps DataFusion's own arithmetic (documented in the README).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Datum};
use arrow::compute::kernels::numeric;
use arrow::datatypes::{DataType, Float32Type, Float64Type};
use arrow::error::ArrowError;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// `expr` (type-coerced against `schema`) with every integer and float operator
/// replaced by its checked form.
pub(crate) fn checked_arithmetic(expr: Expr, schema: &DFSchema) -> Result<Expr> {
    expr.transform_up(|e| {
        let (op, left, right) = match &e {
            Expr::BinaryExpr(b) => match Op::of(b.op) {
                Some(op) => (op, (*b.left).clone(), (*b.right).clone()),
                None => return Ok(Transformed::no(e)),
            },
            Expr::Negative(inner) => match inner.get_type(schema).ok().and_then(|t| ScalarValue::new_zero(&t).ok()) {
                Some(zero) => (Op::Sub, Expr::Literal(zero, None), (**inner).clone()),
                None => return Ok(Transformed::no(e)),
            },
            _ => return Ok(Transformed::no(e)),
        };
        let (Ok(lt), Ok(rt)) = (left.get_type(schema), right.get_type(schema)) else { return Ok(Transformed::no(e)) };
        if lt != rt || !checked_type(&lt) {
            return Ok(Transformed::no(e));
        }
        let udf = ScalarUDF::new_from_impl(Checked { op, signature: Signature::any(2, Volatility::Immutable) });
        Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(udf), vec![left, right]))))
    })
    .map(|t| t.data)
}

/// Integers and floats (decimals keep DataFusion's arithmetic, which checks precision).
fn checked_type(t: &DataType) -> bool {
    t.is_integer() || matches!(t, DataType::Float32 | DataType::Float64)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl Op {
    fn of(op: Operator) -> Option<Op> {
        Some(match op {
            Operator::Plus => Op::Add,
            Operator::Minus => Op::Sub,
            Operator::Multiply => Op::Mul,
            Operator::Divide => Op::Div,
            Operator::Modulo => Op::Rem,
            _ => return None,
        })
    }

    /// Arrow's kernel: checked for integers (an error on overflow and division by zero).
    fn kernel(self) -> fn(&dyn Datum, &dyn Datum) -> std::result::Result<ArrayRef, ArrowError> {
        match self {
            Op::Add => numeric::add,
            Op::Sub => numeric::sub,
            Op::Mul => numeric::mul,
            Op::Div => numeric::div,
            Op::Rem => numeric::rem,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
            Op::Div => "/",
            Op::Rem => "%",
        }
    }
}

/// One checked operator, as a function of two values of one numeric type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Checked {
    op: Op,
    signature: Signature,
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        match self.op {
            Op::Add => "checked_add",
            Op::Sub => "checked_subtract",
            Op::Mul => "checked_multiply",
            Op::Div => "checked_divide",
            Op::Rem => "checked_modulo",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalars = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if scalars { 1 } else { args.number_rows };
        let left = args.args[0].to_array(rows)?;
        let right = args.args[1].to_array(rows)?;
        let result = self.op.kernel()(&left, &right).map_err(|e| self.failed(&left, &right, None, e.to_string()))?;
        if let Some(i) = first_non_finite_from_finite(&left, &right, &result) {
            let why =
                if matches!(self.op, Op::Div | Op::Rem) && float_at(&right, i) == Some(0.0) { "division by zero" } else { "overflow" };
            return Err(self.failed(&left, &right, Some(i), why.to_string()));
        }
        Ok(if scalars { ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?) } else { ColumnarValue::Array(result) })
    }
}

impl Checked {
    /// The error for `left op right` (at row `row`, or the first row that fails).
    fn failed(&self, left: &ArrayRef, right: &ArrayRef, row: Option<usize>, why: String) -> DataFusionError {
        let row = row.or_else(|| first_failing(self.op, left, right)).unwrap_or(0);
        let shown = |a: &ArrayRef| crate::io::values::display_value(a.as_ref(), row.min(a.len().saturating_sub(1)));
        let what = crate::io::values::sql_type_name(left.data_type());
        let why = if why.contains("Overflow") || why.contains("overflow") {
            format!("{} {} {} does not fit a {what} (overflow)", shown(left), self.op.symbol(), shown(right))
        } else if why.contains("Divide by zero") || why == "division by zero" {
            format!("{} {} {} divides by zero", shown(left), self.op.symbol(), shown(right))
        } else {
            format!("{} {} {}: {why}", shown(left), self.op.symbol(), shown(right))
        };
        DataFusionError::Execution(why)
    }
}

/// The row of `left op right` that fails alone (to name its values).
fn first_failing(op: Op, left: &ArrayRef, right: &ArrayRef) -> Option<usize> {
    (0..left.len()).find(|&i| op.kernel()(&left.slice(i, 1), &right.slice(i, 1)).is_err())
}

/// The float at row `i`, if `array` holds floats and the row a value.
fn float_at(array: &ArrayRef, i: usize) -> Option<f64> {
    match array.data_type() {
        DataType::Float64 if array.is_valid(i) => Some(array.as_primitive::<Float64Type>().value(i)),
        DataType::Float32 if array.is_valid(i) => Some(array.as_primitive::<Float32Type>().value(i) as f64),
        _ => None,
    }
}

/// The first row whose result is infinite or NaN while both operands are finite.
fn first_non_finite_from_finite(left: &ArrayRef, right: &ArrayRef, result: &ArrayRef) -> Option<usize> {
    if !matches!(result.data_type(), DataType::Float32 | DataType::Float64) {
        return None;
    }
    (0..result.len()).find(|&i| {
        matches!((float_at(left, i), float_at(right, i), float_at(result, i)), (Some(l), Some(r), Some(v)) if l.is_finite() && r.is_finite() && !v.is_finite())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int32Array, Int64Array};

    fn run(op: Op, left: ArrayRef, right: ArrayRef) -> Result<ArrayRef> {
        let udf = Checked { op, signature: Signature::any(2, Volatility::Immutable) };
        let rows = left.len();
        let field = Arc::new(arrow::datatypes::Field::new("r", left.data_type().clone(), true));
        let args = ScalarFunctionArgs {
            args: vec![ColumnarValue::Array(left), ColumnarValue::Array(right)],
            arg_fields: vec![field.clone(), field.clone()],
            number_rows: rows,
            return_field: field,
            config_options: Arc::new(Default::default()),
        };
        udf.invoke_with_args(args).and_then(|v| v.to_array(rows))
    }

    #[test]
    fn overflow_fails_instead_of_wrapping() {
        let big = Arc::new(Int64Array::from(vec![2, i64::MAX])) as ArrayRef;
        let two = Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef;
        let e = run(Op::Mul, big.clone(), two.clone()).unwrap_err().to_string();
        assert!(e.contains("9223372036854775807 * 2 does not fit a bigint"), "{e}");
        assert_eq!(run(Op::Add, two.clone(), two.clone()).unwrap().as_primitive::<arrow::datatypes::Int64Type>().values(), &[2, 4]);
        let small = Arc::new(Int32Array::from(vec![i32::MIN])) as ArrayRef;
        let minus_one = Arc::new(Int32Array::from(vec![-1])) as ArrayRef;
        assert!(run(Op::Div, small, minus_one).is_err());
        let zero = Arc::new(Int64Array::from(vec![0, 0])) as ArrayRef;
        assert!(run(Op::Div, two, zero).unwrap_err().to_string().contains("divides by zero"));
        let huge = Arc::new(Float64Array::from(vec![1e308])) as ArrayRef;
        let ten = Arc::new(Float64Array::from(vec![10.0])) as ArrayRef;
        assert!(run(Op::Mul, huge, ten.clone()).unwrap_err().to_string().contains("overflow"));
        let inf = Arc::new(Float64Array::from(vec![f64::INFINITY])) as ArrayRef;
        assert!(
            run(Op::Mul, inf, ten.clone()).unwrap().as_primitive::<Float64Type>().value(0).is_infinite(),
            "an explicit infinity stays one"
        );
        let zero = Arc::new(Float64Array::from(vec![0.0])) as ArrayRef;
        assert!(run(Op::Div, ten, zero).unwrap_err().to_string().contains("divides by zero"));
    }
}
