//! Putting a call's values where the spec says: path segments, query pairs, headers, and
//! the body as JSON, as a form with nested keys (`metadata[key]=v`, `expand[]=x`,
//! `items[0][price]=p`, as Stripe reads them) or as multipart form data.

use serde_json::Value;

/// A scalar as it appears in a path, query or form: strings bare, others as JSON.
pub fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Appends `value` under `key` as form or deep-object pairs.
pub fn nested_pairs(key: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                nested_pairs(&format!("{key}[{k}]"), v, out);
            }
        }
        Value::Array(items) => {
            let scalars = items.iter().all(|i| !i.is_object() && !i.is_array());
            for (i, item) in items.iter().enumerate() {
                if scalars {
                    nested_pairs(&format!("{key}[]"), item, out);
                } else {
                    nested_pairs(&format!("{key}[{i}]"), item, out);
                }
            }
        }
        scalar_value => out.push((key.to_owned(), scalar(scalar_value))),
    }
}

/// Appends `value` under `key` as plain query pairs: arrays repeat the key.
pub fn query_pairs(key: &str, value: &Value, deep: bool, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(_) => nested_pairs(key, value, out),
        Value::Array(items) if deep => nested_pairs(key, &Value::Array(items.clone()), out),
        Value::Array(items) => {
            for item in items {
                out.push((key.to_owned(), scalar(item)));
            }
        }
        other => out.push((key.to_owned(), scalar(other))),
    }
}

/// An `application/x-www-form-urlencoded` body from an object.
pub fn form(body: &serde_json::Map<String, Value>) -> String {
    let mut pairs = Vec::new();
    for (key, value) in body {
        nested_pairs(key, value, &mut pairs);
    }
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// A `multipart/form-data` body from an object, and its content type.
pub fn multipart(body: &serde_json::Map<String, Value>) -> (String, String) {
    let boundary = "sdkbox-7c1f0a9e3b5d4c2a";
    let mut pairs = Vec::new();
    for (key, value) in body {
        nested_pairs(key, value, &mut pairs);
    }
    let mut out = String::new();
    for (name, value) in pairs {
        out.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"\r\n\r\n{value}\r\n",
            name.replace('"', "%22")
        ));
    }
    out.push_str(&format!("--{boundary}--\r\n"));
    (out, format!("multipart/form-data; boundary={boundary}"))
}

/// A path segment, percent-encoded.
pub fn segment(value: &Value) -> String {
    url::form_urlencoded::byte_serialize(scalar(value).as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stripe_style_forms() {
        let body = json!({
            "email": "a@b.c",
            "metadata": {"plan": "pro"},
            "expand": ["customer", "invoice"],
            "items": [{"price": "price_1", "quantity": 2}],
            "active": true
        });
        let encoded = form(body.as_object().unwrap());
        assert_eq!(
            encoded,
            "email=a%40b.c&metadata%5Bplan%5D=pro&expand%5B%5D=customer&expand%5B%5D=invoice\
             &items%5B0%5D%5Bprice%5D=price_1&items%5B0%5D%5Bquantity%5D=2&active=true"
        );
    }

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(segment(&json!("a b/c")), "a%20b%2Fc");
        assert_eq!(segment(&json!(42)), "42");
    }
}
