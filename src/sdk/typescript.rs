//! TypeScript signatures of SDK methods, for search hits: what to pass and what comes back,
//! depth-limited so that a hit stays short.

use crate::spec::{Location, Operation, Shape};

/// `{ email, name?, metadata? }`: the call's parameter names, required ones first, at most
/// `max` of them.
pub fn call_hint(op: &Operation) -> String {
    let mut names: Vec<(bool, String)> = op
        .params
        .iter()
        .filter(|p| p.location != Location::Header)
        .map(|p| (p.required, p.name.clone()))
        .collect();
    match op.body.as_ref().map(|b| (&*b.shape, b.required)) {
        Some((Shape::Object { fields, .. }, _)) => {
            let hidden = op.body_fields_named_like_params();
            names.extend(
                fields
                    .iter()
                    .filter(|f| !hidden.contains(&f.name.as_str()))
                    .map(|f| (f.required, f.name.clone())),
            );
            if !hidden.is_empty() {
                let required = fields
                    .iter()
                    .any(|f| f.required && hidden.contains(&f.name.as_str()));
                names.push((required, format!("body: {{ {} }}", hidden.join(", "))));
            }
        }
        Some((_, required)) => names.push((required, "body".into())),
        None => {}
    }
    names.sort_by_key(|(required, _)| !*required);
    let shown: Vec<String> = names
        .iter()
        .take(6)
        .map(|(required, name)| {
            if *required {
                name.clone()
            } else {
                format!("{name}?")
            }
        })
        .collect();
    let more = if names.len() > 6 { ", ..." } else { "" };
    if shown.is_empty() {
        "{}".into()
    } else {
        format!("{{ {}{more} }}", shown.join(", "))
    }
}

/// `create(params: { email: string; name?: string }): Promise<{ id: string; ... }>`, objects
/// shown a level or two deep: for search hits.
pub fn signature(op: &Operation) -> String {
    let (params, response) = call_types(op, false, &|shape| type_of(shape, 1), &|shape| {
        type_of(shape, 2)
    });
    format!("{}({params}): Promise<{response}>", op.name)
}

/// A method's parameter list (`params?: { ... }`, or nothing) and its response type, each
/// shape written by `param` or `response`, header parameters too when `headers` (hits leave
/// them out; the declarations must take what the SDK takes): the one place that decides what
/// a call takes, for search hits and the SDK's declarations alike.
pub fn call_types(
    op: &Operation,
    headers: bool,
    param: &dyn Fn(&Shape) -> String,
    response: &dyn Fn(&Shape) -> String,
) -> (String, String) {
    let mut fields = Vec::new();
    // Whether the call must pass something: a required parameter or body field.
    let mut any_required = false;
    // A name in two places (a path `id` and a query `id`) is one property of the call: the
    // first place it is in, required if either place requires it.
    let mut seen = std::collections::HashSet::new();
    let shown = |p: &&crate::spec::Param| headers || p.location != Location::Header;
    for p in op.params.iter().filter(shown) {
        if !seen.insert(p.name.as_str()) {
            continue;
        }
        let required = op
            .params
            .iter()
            .filter(shown)
            .any(|q| q.name == p.name && q.required);
        any_required |= required;
        let optional = if required { "" } else { "?" };
        fields.push(format!("{}{optional}: {}", key(&p.name), param(&p.shape)));
    }
    if let Some(body) = op.body.as_ref() {
        match &*body.shape {
            Shape::Object {
                fields: body_fields,
                ..
            } => {
                // Body fields named like parameters go under `body`.
                let hidden = op.body_fields_named_like_params();
                let mut under_body = Vec::new();
                for f in body_fields {
                    any_required |= f.required;
                    let optional = if f.required { "" } else { "?" };
                    let field = format!("{}{optional}: {}", key(&f.name), param(&f.shape));
                    if hidden.contains(&f.name.as_str()) {
                        under_body.push((f.required, field));
                    } else {
                        fields.push(field);
                    }
                }
                if !under_body.is_empty() {
                    let optional = if under_body.iter().any(|(r, _)| *r) {
                        ""
                    } else {
                        "?"
                    };
                    let inner: Vec<String> = under_body.into_iter().map(|(_, f)| f).collect();
                    fields.push(format!("body{optional}: {{ {} }}", inner.join("; ")));
                }
            }
            shape => {
                // A body that may be null or anything may also be left out, as the SDK
                // accepts it.
                let nullable = match shape {
                    Shape::Any | Shape::Null => true,
                    Shape::OneOf(options) => options.iter().any(|o| matches!(**o, Shape::Null)),
                    _ => false,
                };
                let required = body.required && !nullable;
                any_required |= required;
                let optional = if required { "" } else { "?" };
                fields.push(format!("body{optional}: {}", param(shape)));
            }
        }
    }
    let all_optional = !any_required;
    let params = if fields.is_empty() {
        String::new()
    } else {
        format!(
            "params{}: {{ {} }}",
            if all_optional { "?" } else { "" },
            fields.join("; ")
        )
    };
    let response = op
        .response
        .as_ref()
        .map_or("unknown".to_owned(), |r| match &**r {
            // Bytes come back as a Blob (of the response's media type).
            Shape::Bytes => "Blob".to_owned(),
            shape => response(shape),
        });
    (params, response)
}

/// What the SDK takes for bytes: a file, bytes, or a string sent as its UTF-8.
pub const BYTES: &str = "string | Blob | Uint8Array | ArrayBuffer";

/// A shape as a TypeScript type, objects expanded `depth` levels deep.
pub fn type_of(shape: &Shape, depth: usize) -> String {
    match shape {
        Shape::Bytes => BYTES.into(),
        Shape::Any => "unknown".into(),
        Shape::Recursive(name) => name.clone(),
        Shape::String { values } if values.len() > 8 => "string".into(),
        Shape::String { .. } | Shape::Integer | Shape::Number | Shape::Boolean | Shape::Null => {
            scalar(shape)
        }
        Shape::Array(items) => array_of(type_of(items, depth)),
        Shape::Object { fields, additional } => {
            if depth == 0 || fields.is_empty() {
                return match additional {
                    Some(extra) if fields.is_empty() => {
                        format!(
                            "Record<string, {}>",
                            type_of(extra, depth.saturating_sub(1))
                        )
                    }
                    _ => "object".into(),
                };
            }
            let shown: Vec<String> = fields
                .iter()
                .take(12)
                .map(|f| {
                    let optional = if f.required { "" } else { "?" };
                    format!(
                        "{}{optional}: {}",
                        key(&f.name),
                        type_of(&f.shape, depth - 1)
                    )
                })
                .collect();
            let more = if fields.len() > 12 { "; ..." } else { "" };
            format!("{{ {}{more} }}", shown.join("; "))
        }
        Shape::OneOf(options) => {
            let mut parts: Vec<String> = options.iter().map(|o| type_of(o, depth)).collect();
            parts.dedup();
            parts.join(" | ")
        }
    }
}

/// A string (its values as a literal union, when it lists them), number, boolean or null as
/// a type; anything else is `unknown`.
pub fn scalar(shape: &Shape) -> String {
    match shape {
        Shape::String { values } if !values.is_empty() => values
            .iter()
            .map(|v| serde_json::to_string(v).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" | "),
        Shape::String { .. } => "string".into(),
        Shape::Integer | Shape::Number => "number".into(),
        Shape::Boolean => "boolean".into(),
        Shape::Null => "null".into(),
        _ => "unknown".into(),
    }
}

/// An array of `inner`, parenthesised when it is a union.
pub fn array_of(inner: String) -> String {
    if inner.contains(' ') && !inner.starts_with('{') {
        format!("({inner})[]")
    } else {
        format!("{inner}[]")
    }
}

/// A property name as TypeScript writes it: bare when it is an identifier, else quoted.
pub fn key(name: &str) -> String {
    if name
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        && !name.starts_with(|c: char| c.is_ascii_digit())
    {
        name.to_owned()
    } else {
        serde_json::to_string(name).unwrap_or_default()
    }
}
