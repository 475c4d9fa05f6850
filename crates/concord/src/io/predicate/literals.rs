//! Number literals keep the value they were written with. DataFusion reads `1.25` as a
//! double: a literal with more digits than a double holds would silently become
//! another number, and a double compared with a decimal column is converted to a
//! decimal digit by digit (`-9999999999999.99` as a double is
//! `-9999999999999.990234375`, which equals no stored `decimal(15, 2)`). So a literal a
//! double cannot hold exactly is an exact decimal, and a literal compared with a
//! decimal column is the decimal it was written as. Likewise text compared with a
//! `binary`, `fixed(n)` or `uuid` column is the bytes it spells in hex, as CSV and JSON
//! write them (a UUID may keep its hyphens).

use std::ops::ControlFlow;

use arrow::datatypes::{i256, DataType};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, ExprSchemable, Operator};
use datafusion::sql::sqlparser::ast::{visit_expressions, Expr as SqlExpr, Value};

use crate::format::schema::MAX_DECIMAL_PRECISION;

/// The number literals of `expr` that a double does not hold exactly (more significant
/// digits than it keeps), as written.
pub(crate) fn inexact_numbers(expr: &SqlExpr) -> Vec<String> {
    let mut found = Vec::new();
    let _ = visit_expressions(expr, |e| {
        if let SqlExpr::Value(v) = e {
            if let Value::Number(text, _) = &v.value {
                let double = text.parse::<f64>().ok().filter(|f| f.is_finite());
                if double.is_some_and(|f| parts(text) != parts(&format!("{f:e}"))) {
                    found.push(text.clone());
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// `expr` with the double literals that stand for `inexact` numbers, and those
/// compared with a decimal column, replaced by the exact decimals they were written as.
pub(crate) fn exact_decimals(expr: Expr, inexact: &[String], schema: &DFSchema) -> DfResult<Expr> {
    let typed_column = |e: &Expr| {
        matches!(
            e.get_type(schema),
            Ok(DataType::Decimal128(..) | DataType::Decimal256(..) | DataType::Binary | DataType::FixedSizeBinary(_))
        )
    };
    let as_column = |column: &Expr, e: Expr| match (&e, column.get_type(schema)) {
        (Expr::Literal(ScalarValue::Float64(Some(v)), _), Ok(DataType::Decimal128(..) | DataType::Decimal256(..))) => {
            decimal(&v.to_string()).map_or(e, |d| Expr::Literal(d, None))
        }
        (Expr::Literal(ScalarValue::Utf8(Some(text)), _), Ok(t @ (DataType::Binary | DataType::FixedSizeBinary(_)))) => {
            bytes(text, &t).map_or(e, |b| Expr::Literal(b, None))
        }
        _ => e,
    };
    expr.transform_up(|e| {
        let out = match e {
            Expr::Literal(ScalarValue::Float64(Some(v)), meta) => {
                let written =
                    inexact.iter().find(|t| t.parse::<f64>().is_ok_and(|f| f == v.abs()) || t.parse::<f64>().is_ok_and(|f| -f == v));
                match written.and_then(|t| decimal(t)).map(|d| if v < 0.0 { negate(d) } else { d }) {
                    Some(d) => Expr::Literal(d, None),
                    None => Expr::Literal(ScalarValue::Float64(Some(v)), meta),
                }
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_comparison(op) => {
                let (l, r) = (*left, *right);
                let (l, r) = match (typed_column(&l), typed_column(&r)) {
                    (true, false) => {
                        let r = as_column(&l, r);
                        (l, r)
                    }
                    (false, true) => (as_column(&r, l), r),
                    _ => (l, r),
                };
                Expr::BinaryExpr(BinaryExpr { left: Box::new(l), op, right: Box::new(r) })
            }
            Expr::InList(InList { expr, list, negated }) if typed_column(&expr) => {
                let list = list.into_iter().map(|e| as_column(&expr, e)).collect();
                Expr::InList(InList { expr, list, negated })
            }
            Expr::Between(Between { expr, negated, low, high }) if typed_column(&expr) => {
                let (low, high) = (Box::new(as_column(&expr, *low)), Box::new(as_column(&expr, *high)));
                Expr::Between(Between { expr, negated, low, high })
            }
            other => other,
        };
        Ok(Transformed::yes(out))
    })
    .map(|t| t.data)
}

fn is_comparison(op: Operator) -> bool {
    use Operator::*;
    matches!(op, Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom)
}

fn negate(d: ScalarValue) -> ScalarValue {
    match d {
        ScalarValue::Decimal128(Some(v), p, s) => ScalarValue::Decimal128(Some(-v), p, s),
        ScalarValue::Decimal256(Some(v), p, s) => ScalarValue::Decimal256(Some(v.wrapping_neg()), p, s),
        other => other,
    }
}

/// The bytes hex `text` spells (hyphens ignored for 16-byte columns: UUIDs), as a
/// literal of the column type `t`; `None` if it is not hex of the column's width.
fn bytes(text: &str, t: &DataType) -> Option<ScalarValue> {
    let hex: String = match t {
        DataType::FixedSizeBinary(16) => text.chars().filter(|c| *c != '-').collect(),
        _ => text.to_string(),
    };
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let value: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect::<Option<_>>()?;
    match t {
        DataType::FixedSizeBinary(n) if usize::try_from(*n).ok() == Some(value.len()) => {
            Some(ScalarValue::FixedSizeBinary(*n, Some(value)))
        }
        DataType::Binary => Some(ScalarValue::Binary(Some(value))),
        _ => None,
    }
}

/// A number written as text (`-1.50`, `2e3`): its sign, its significant digits (no
/// leading or trailing zeros; empty for zero) and the power of ten of its last digit's
/// place, negated (the scale: `1.5` is `("15", 1)`, `1500` `("15", -2)`).
fn parts(text: &str) -> Option<(bool, String, i64)> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], unsigned[at + 1..].parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut digits: String = format!("{int}{frac}").trim_start_matches('0').to_string();
    let mut scale = frac.len() as i64 - exponent;
    while digits.ends_with('0') {
        digits.pop();
        scale -= 1;
    }
    if digits.is_empty() {
        return Some((false, digits, 0));
    }
    Some((negative, digits, scale))
}

/// The decimal literal a number written as `text` is, at the smallest precision and
/// scale that hold it; `None` beyond 76 digits.
fn decimal(text: &str) -> Option<ScalarValue> {
    let (negative, mut digits, scale) = parts(text)?;
    let scale = if scale < 0 {
        digits.push_str(&"0".repeat(usize::try_from(-scale).ok()?));
        0
    } else {
        scale
    };
    let scale = u8::try_from(scale).ok()?;
    let precision = u8::try_from(digits.len().max(usize::from(scale)).max(1)).ok()?;
    if precision > MAX_DECIMAL_PRECISION {
        return None;
    }
    let signed = format!("{}{}", if negative { "-" } else { "" }, if digits.is_empty() { "0" } else { &digits });
    if precision <= 38 {
        Some(ScalarValue::Decimal128(Some(signed.parse().ok()?), precision, scale as i8))
    } else {
        Some(ScalarValue::Decimal256(Some(i256::from_string(&signed)?), precision, scale as i8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_as_the_decimals_they_were_written_as() {
        assert_eq!(parts("1.50"), Some((false, "15".into(), 1)));
        assert_eq!(parts("-0.0"), Some((false, String::new(), 0)));
        assert_eq!(parts("1500"), Some((false, "15".into(), -2)));
        assert_eq!(parts("1.5e-3"), Some((false, "15".into(), 4)));
        assert_eq!(decimal("-9999999999999.99"), Some(ScalarValue::Decimal128(Some(-999_999_999_999_999), 15, 2)));
        assert_eq!(decimal("2e3"), Some(ScalarValue::Decimal128(Some(2000), 4, 0)));
        assert_eq!(decimal("0.001"), Some(ScalarValue::Decimal128(Some(1), 3, 3)));
        assert!(matches!(decimal("1234567890123456789012345678901234567890.5"), Some(ScalarValue::Decimal256(_, 41, 1))));
        assert_eq!(decimal("1e300"), None);
        let ast = |sql: &str| {
            let dialect = datafusion::sql::sqlparser::dialect::GenericDialect {};
            datafusion::sql::sqlparser::parser::Parser::new(&dialect).try_with_sql(sql).unwrap().parse_expr().unwrap()
        };
        assert_eq!(inexact_numbers(&ast("x = 0.1 or y = 1e300 or z = 9007199254740993 or w = 1.5")), vec!["9007199254740993".to_string()]);
    }
}
