//! Checking a call's values against the spec before any request leaves: types, enums and
//! required fields, with messages that name the place and say what was expected.

use serde_json::Value;

use crate::spec::Shape;

/// Checks `value` against `shape`; `place` names it in the message (`limit`, `items[0].price`).
pub fn check(value: &Value, shape: &Shape, place: &str) -> Result<(), String> {
    match (shape, value) {
        (Shape::Any | Shape::Recursive(_), _) => Ok(()),
        (Shape::String { values }, Value::String(s)) => {
            if values.is_empty() || values.contains(s) {
                Ok(())
            } else {
                Err(format!(
                    "`{place}` must be one of {}; got \"{s}\"",
                    quoted(values)
                ))
            }
        }
        (Shape::Bytes, Value::String(_)) => Ok(()),
        (Shape::Bytes, v) if crate::egress::file_index(v).is_some() => Ok(()),
        (Shape::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(()),
        (Shape::Number, Value::Number(_)) => Ok(()),
        (Shape::Boolean, Value::Bool(_)) => Ok(()),
        (Shape::Null, Value::Null) => Ok(()),
        (Shape::Array(items), Value::Array(values)) => values
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check(v, items, &format!("{place}[{i}]"))),
        (Shape::Object { fields, additional }, Value::Object(map)) => {
            for field in fields.iter().filter(|f| f.required) {
                if !map.contains_key(&field.name) {
                    return Err(format!(
                        "`{place}.{}` is required ({})",
                        field.name,
                        describe(&field.shape)
                    ));
                }
            }
            for (key, v) in map {
                match fields.iter().find(|f| &f.name == key) {
                    Some(field) => check(v, &field.shape, &format!("{place}.{key}"))?,
                    None => match additional {
                        Some(extra) => check(v, extra, &format!("{place}.{key}"))?,
                        None => {
                            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                            return Err(format!(
                                "`{place}` has no field `{key}`{} Its fields: {}",
                                did_you_mean(key, &names),
                                names.join(", ")
                            ));
                        }
                    },
                }
            }
            Ok(())
        }
        (Shape::OneOf(options), v) => {
            if options.iter().any(|o| check(v, o, place).is_ok()) {
                return Ok(());
            }
            // A single non-null option gives the most useful message.
            let real: Vec<_> = options.iter().filter(|o| ***o != Shape::Null).collect();
            match real.as_slice() {
                [only] => check(v, only, place),
                _ => Err(format!(
                    "`{place}` must be {}; got {}",
                    describe(shape),
                    kind_of(v)
                )),
            }
        }
        (expected, v) => Err(format!(
            "`{place}` must be {}; got {}",
            describe(expected),
            kind_of(v)
        )),
    }
}

/// A short phrase for a shape: `an integer`, `one of "a", "b"`, `an array of strings`.
pub fn describe(shape: &Shape) -> String {
    match shape {
        Shape::Any | Shape::Recursive(_) => "any value".into(),
        Shape::String { values } if !values.is_empty() => format!("one of {}", quoted(values)),
        Shape::String { .. } => "a string".into(),
        Shape::Bytes => "a file (Blob, File, Uint8Array or ArrayBuffer) or a string".into(),
        Shape::Integer => "an integer".into(),
        Shape::Number => "a number".into(),
        Shape::Boolean => "a boolean".into(),
        Shape::Null => "null".into(),
        Shape::Array(items) => format!("an array of {}", plural(&describe(items))),
        Shape::Object { .. } => "an object".into(),
        Shape::OneOf(options) => options
            .iter()
            .map(|o| describe(o))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

fn plural(phrase: &str) -> String {
    phrase
        .strip_prefix("an ")
        .or_else(|| phrase.strip_prefix("a "))
        .map(|p| format!("{p}s"))
        .unwrap_or_else(|| phrase.to_owned())
}

fn quoted(values: &[String]) -> String {
    let shown: Vec<String> = values.iter().take(12).map(|v| format!("\"{v}\"")).collect();
    let more = if values.len() > 12 { ", ..." } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// How a JSON value looks, for messages: `string "10"`, `a number`.
pub fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string \"{}\"", crate::spec::shorten(s, 40)),
        Value::Array(_) => "an array".into(),
        Value::Object(_) if crate::egress::file_index(value).is_some() => {
            "a file (Blob, File or bytes)".into()
        }
        Value::Object(_) => "an object".into(),
    }
}

/// `; did you mean `x`?` when a candidate is close to `given`, else `.`.
pub fn did_you_mean(given: &str, candidates: &[&str]) -> String {
    let lower = given.to_ascii_lowercase();
    let best = candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), *c))
        .filter(|(score, _)| *score > 0.75)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, name)) => format!("; did you mean `{name}`?"),
        None => ".".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::spec::Field;

    #[test]
    fn messages_name_the_place_and_the_expectation() {
        let shape = Shape::Object {
            fields: vec![
                Field {
                    name: "price".into(),
                    shape: Arc::new(Shape::String { values: vec![] }),
                    required: true,
                    read_only: false,
                    write_only: false,
                    description: String::new(),
                },
                Field {
                    name: "quantity".into(),
                    shape: Arc::new(Shape::Integer),
                    required: false,
                    read_only: false,
                    write_only: false,
                    description: String::new(),
                },
            ],
            additional: None,
        };
        let items = Shape::Array(Arc::new(shape));
        assert!(check(&json!([{"price": "p", "quantity": 2}]), &items, "items").is_ok());
        assert_eq!(
            check(&json!([{"price": "p", "quantity": "2"}]), &items, "items").unwrap_err(),
            "`items[0].quantity` must be an integer; got string \"2\""
        );
        assert_eq!(
            check(&json!([{"quantity": 2}]), &items, "items").unwrap_err(),
            "`items[0].price` is required (a string)"
        );
        assert!(
            check(&json!([{"price": "p", "quantty": 1}]), &items, "items")
                .unwrap_err()
                .contains("did you mean `quantity`?")
        );
        let status = Shape::String {
            values: vec!["open".into(), "closed".into()],
        };
        assert_eq!(
            check(&json!("opne"), &status, "state").unwrap_err(),
            "`state` must be one of \"open\", \"closed\"; got \"opne\""
        );
    }
}
