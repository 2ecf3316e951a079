//! Metadata filters applied inside the shard: equality, membership and numeric range, ANDed together.
//! The tenant is not a metadata filter: it is a mandatory argument of every search (see `engine`).

use serde_json::Value;

/// One condition on a metadata field.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    Equals {
        field: String,
        value: Value,
    },
    In {
        field: String,
        values: Vec<Value>,
    },
    Range {
        field: String,
        gte: Option<f64>,
        gt: Option<f64>,
        lte: Option<f64>,
        lt: Option<f64>,
    },
}

/// Every condition must hold. The empty filter matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub conditions: Vec<Condition>,
}

/// Scalars compare by value; numbers by f64 so that `1` matches `1.0`. An array field matches when any element does.
fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(items), other) => items.iter().any(|i| scalar_eq(i, other)),
        _ => a == b,
    }
}

fn in_range(
    v: &Value,
    gte: Option<f64>,
    gt: Option<f64>,
    lte: Option<f64>,
    lt: Option<f64>,
) -> bool {
    let Some(x) = v.as_f64() else { return false };
    gte.is_none_or(|b| x >= b)
        && gt.is_none_or(|b| x > b)
        && lte.is_none_or(|b| x <= b)
        && lt.is_none_or(|b| x < b)
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Whether a chunk with this metadata (a JSON object; anything else counts as empty) passes.
    pub fn matches(&self, metadata_json: &str) -> bool {
        if self.conditions.is_empty() {
            return true;
        }
        let meta: serde_json::Map<String, Value> =
            serde_json::from_str(metadata_json).unwrap_or_default();
        self.conditions.iter().all(|c| match c {
            Condition::Equals { field, value } => {
                meta.get(field).is_some_and(|v| scalar_eq(v, value))
            }
            Condition::In { field, values } => meta
                .get(field)
                .is_some_and(|v| values.iter().any(|x| scalar_eq(v, x))),
            Condition::Range {
                field,
                gte,
                gt,
                lte,
                lt,
            } => meta
                .get(field)
                .is_some_and(|v| in_range(v, *gte, *gt, *lte, *lt)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_and_together() {
        let f = Filter {
            conditions: vec![
                Condition::Equals {
                    field: "lang".into(),
                    value: json!("en"),
                },
                Condition::Range {
                    field: "year".into(),
                    gte: Some(2000.0),
                    gt: None,
                    lte: None,
                    lt: Some(2010.0),
                },
            ],
        };
        assert!(f.matches(r#"{"lang":"en","year":2005}"#));
        assert!(!f.matches(r#"{"lang":"en","year":2010}"#));
        assert!(!f.matches(r#"{"lang":"de","year":2005}"#));
        assert!(!f.matches(r#"{"year":2005}"#));
        assert!(!f.matches("not json"));
    }

    #[test]
    fn membership_and_numeric_equality() {
        let f = Filter {
            conditions: vec![Condition::In {
                field: "k".into(),
                values: vec![json!(1), json!("x")],
            }],
        };
        assert!(f.matches(r#"{"k":1.0}"#));
        assert!(f.matches(r#"{"k":"x"}"#));
        assert!(f.matches(r#"{"k":["y","x"]}"#));
        assert!(!f.matches(r#"{"k":2}"#));
        assert!(Filter::default().matches("{}"));
    }
}
