//! What unit tests share: a proptest strategy for any JSON value, escapes and control
//! characters included, for the properties of the scrubber and the output bounds; a bare
//! operation for the tests of naming and ranking.

use proptest::prelude::*;
use serde_json::Value;

/// Any JSON value, nested up to five levels, with up to `width` items per array or object.
pub fn json_value(width: usize) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,200}".prop_map(Value::from),
        "[\u{0}-\u{1f}\"\\\\]{0,200}".prop_map(Value::from),
    ];
    let size = u32::try_from(width * 16).unwrap_or(u32::MAX);
    leaf.prop_recursive(
        5,
        size,
        u32::try_from(width).unwrap_or(u32::MAX),
        move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..width).prop_map(Value::from),
                proptest::collection::btree_map("\\PC{0,30}", inner, 0..width)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        },
    )
}

/// An operation with these names and nothing else, for the tests of naming and ranking.
pub fn operation(
    id: &str,
    method: &str,
    path: &str,
    group: &str,
    name: &str,
) -> crate::spec::Operation {
    crate::spec::Operation {
        id: id.into(),
        method: method.into(),
        path: path.into(),
        group: group.into(),
        name: name.into(),
        summary: String::new(),
        description: String::new(),
        tags: Vec::new(),
        params: Vec::new(),
        body: None,
        response: None,
        resource: None,
        deprecated: false,
        policy: None,
        former: Vec::new(),
        server: None,
    }
}
