//! Dry runs: a write is not sent; the script gets a placeholder built from the spec's
//! response schema, marked as such, and the write is listed in the outcome's plan.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::rules::Rule;
use super::shown::Shown;
use crate::egress::ScriptResponse;
use crate::spec::{Operation, Shape};

/// The header, and the top-level field of object bodies, that mark a placeholder.
pub const MARK: &str = "x-sdkbox-dry-run";

/// Levels of nested objects a placeholder fills in.
const MAX_DEPTH: usize = 4;

/// One write a dry run did not send.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Planned {
    /// The request, its body cut.
    #[serde(flatten)]
    pub request: Shown,
    /// The rule it would meet when run for real.
    pub policy: Rule,
}

/// What the script gets instead of a response: status 200, the mark in a header and, for
/// an object body, in a field.
pub fn placeholder(operation: Option<&Operation>, url: &str) -> ScriptResponse {
    let mut body = match operation.and_then(|op| op.response.as_deref()) {
        Some(shape) => example(shape, 0),
        None => Value::Object(Map::new()),
    };
    if let Value::Object(map) = &mut body {
        map.insert(
            MARK.to_owned(),
            json!("dry run: this write was not sent; the values are placeholders"),
        );
    }
    ScriptResponse {
        status: 200,
        status_text: "OK (dry run)".to_owned(),
        url: url.to_owned(),
        headers: vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            (MARK.to_owned(), "1".to_owned()),
        ],
        body: body.to_string(),
        bytes: None,
    }
}

/// A value of `shape`: the first allowed string, zeros, empty lists, objects with every
/// required field (and the others, near the top).
fn example(shape: &Shape, depth: usize) -> Value {
    match shape {
        Shape::Any | Shape::Null | Shape::Recursive(_) => Value::Null,
        Shape::String { values } => json!(values.first().map_or("placeholder", String::as_str)),
        Shape::Bytes => json!("placeholder"),
        Shape::Integer | Shape::Number => json!(0),
        Shape::Boolean => json!(false),
        Shape::Array(_) => json!([]),
        Shape::OneOf(options) => options
            .iter()
            .find(|o| !matches!(o.as_ref(), Shape::Null))
            .map_or(Value::Null, |o| example(o, depth)),
        Shape::Object { fields, .. } => {
            if depth >= MAX_DEPTH {
                return Value::Object(Map::new());
            }
            fields
                .iter()
                .filter(|f| f.required || depth < 2)
                .map(|f| (f.name.clone(), example(&f.shape, depth + 1)))
                .collect::<Map<_, _>>()
                .into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placeholder_has_the_response_shape_and_says_what_it_is() {
        let spec = crate::spec::parse("demo", crate::demo::SPEC).unwrap();
        let op = spec
            .api
            .operations
            .iter()
            .find(|o| o.id == "createCustomer")
            .unwrap();
        let response = placeholder(Some(op), "http://h/v1/customers");
        let body: Value = serde_json::from_str(&response.body).unwrap();
        assert!(body.get("id").is_some(), "{body}");
        assert!(body[MARK].as_str().unwrap().contains("not sent"));
        assert!(response.headers.iter().any(|(k, _)| k == MARK));
    }
}
