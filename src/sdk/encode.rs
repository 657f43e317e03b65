//! Putting a call's values where the spec says: path segments, query pairs, headers, and
//! the body as JSON, as a form with nested keys (`metadata[key]=v`, `expand[]=x`,
//! `items[0][price]=p`, as Stripe reads them) or as multipart form data.

use serde_json::Value;

use crate::egress::{FILE_MARK, FilePart, file_index};
use crate::spec::Style;

/// A scalar as it appears in a path, query or form: strings bare, others as JSON.
pub fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Bytes an encoded query or body may take: past it a call is refused before anything is
/// built. A nested key is written out again for every value under it, so a small value with
/// a long key over many children would otherwise grow into gigabytes.
pub const MAX_ENCODED_BYTES: usize = 10 * 1024 * 1024;

/// The bytes `value` takes as nested pairs under a key of `key_len` bytes (at most: escaping
/// may add more, brackets are counted), computed without writing them; saturating.
pub fn nested_size(key_len: usize, value: &Value) -> usize {
    match value {
        Value::Object(map) => map.iter().fold(0usize, |sum, (k, v)| {
            sum.saturating_add(nested_size(key_len.saturating_add(k.len() + 2), v))
        }),
        Value::Array(items) => items.iter().enumerate().fold(0usize, |sum, (i, v)| {
            let index = if i == 0 { 1 } else { i.ilog10() as usize + 1 };
            sum.saturating_add(nested_size(key_len.saturating_add(index + 2), v))
        }),
        scalar_value => key_len.saturating_add(scalar(scalar_value).len() + 2),
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

/// Appends parameter `key` with `value` as query pairs, in its `style`: `form` repeats the
/// key for each item (`explode`) or joins them with commas, and spreads an exploded object's
/// fields as parameters of their own; `spaceDelimited` and `pipeDelimited` join an array's
/// items with ` ` or `|`; `deepObject` nests (`key[sub]=v`, `key[]=v`).
pub fn query_pairs(
    key: &str,
    value: &Value,
    style: Style,
    explode: bool,
    out: &mut Vec<(String, String)>,
) {
    match (style, value) {
        (Style::DeepObject, Value::Object(_) | Value::Array(_)) => nested_pairs(key, value, out),
        (_, Value::Array(items)) if explode => {
            for item in items {
                match item {
                    Value::Object(_) | Value::Array(_) => nested_pairs(key, item, out),
                    scalar_item => out.push((key.to_owned(), scalar(scalar_item))),
                }
            }
        }
        (_, Value::Array(items)) if items.is_empty() => {}
        (_, Value::Array(items)) => {
            let joint = match style {
                Style::SpaceDelimited => " ",
                Style::PipeDelimited => "|",
                _ => ",",
            };
            let items: Vec<String> = items.iter().map(scalar).collect();
            out.push((key.to_owned(), items.join(joint)));
        }
        (_, Value::Object(fields)) if explode => {
            for (field, inner) in fields {
                match inner {
                    Value::Null => {}
                    // A field that is a list is a parameter of its own in the same style,
                    // repeated for each item (`dimensions=a&dimensions=b`, as Cloudflare's
                    // analytics read a `query` object), not nested brackets.
                    Value::Array(items)
                        if items.iter().all(|i| !i.is_object() && !i.is_array()) =>
                    {
                        for item in items {
                            out.push((field.clone(), scalar(item)));
                        }
                    }
                    Value::Object(_) | Value::Array(_) => nested_pairs(field, inner, out),
                    scalar_inner => out.push((field.clone(), scalar(scalar_inner))),
                }
            }
        }
        (_, Value::Object(fields)) => {
            let flat: Vec<String> = fields
                .iter()
                .flat_map(|(field, inner)| [field.clone(), scalar(inner)])
                .collect();
            out.push((key.to_owned(), flat.join(",")));
        }
        (_, other) => out.push((key.to_owned(), scalar(other))),
    }
}

/// Path parameter `key` with `value` in its `style`, every name and value percent-encoded
/// and the separators as they are: `simple` (`a,b`; an object `f,v` or exploded `f=v`),
/// `label` (`.a,b`, exploded `.a.b`), `matrix` (`;key=a,b`, exploded `;key=a;key=b`).
pub fn path_segment(key: &str, value: &Value, style: Style, explode: bool) -> String {
    let parts: Vec<(Option<String>, String)> = match value {
        Value::Array(items) => items.iter().map(|i| (None, segment(i))).collect(),
        Value::Object(fields) => fields
            .iter()
            .map(|(f, v)| (Some(segment(&Value::String(f.clone()))), segment(v)))
            .collect(),
        other => vec![(None, segment(other))],
    };
    let key = segment(&Value::String(key.to_owned()));
    let pair = |(field, v): &(Option<String>, String), with: &str| match field {
        Some(field) => format!("{field}{with}{v}"),
        None => v.clone(),
    };
    let exploded = |with: &str| parts.iter().map(|p| pair(p, with)).collect::<Vec<_>>();
    let flat = || {
        parts
            .iter()
            .flat_map(|(f, v)| f.iter().cloned().chain([v.clone()]))
            .collect::<Vec<_>>()
            .join(",")
    };
    match (style, explode) {
        (Style::Label, true) => format!(".{}", exploded("=").join(".")),
        (Style::Label, false) => format!(".{}", flat()),
        (Style::Matrix, true) if value.is_object() => format!(";{}", exploded("=").join(";")),
        (Style::Matrix, true) => parts.iter().map(|(_, v)| format!(";{key}={v}")).collect(),
        (Style::Matrix, false) => format!(";{key}={}", flat()),
        (_, true) => exploded("=").join(","),
        (_, false) => flat(),
    }
}

/// A header parameter's value (`simple`): an array's items joined with commas, an object's
/// fields as `f,v` or exploded `f=v`.
pub fn header_value(value: &Value, explode: bool) -> String {
    match value {
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(","),
        Value::Object(fields) => fields
            .iter()
            .map(|(f, v)| {
                if explode {
                    format!("{f}={}", scalar(v))
                } else {
                    format!("{f},{}", scalar(v))
                }
            })
            .collect::<Vec<_>>()
            .join(","),
        other => scalar(other),
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

/// A part of a multipart body: text (with its media type when it is not plain text) or a
/// file.
enum Part<'a> {
    Text(String, Option<&'static str>),
    File(&'a FilePart),
}

/// A `multipart/form-data` body from an object, and its content type. A field that is a file
/// (see [`crate::egress::FILE_MARK`]), or a list of files, is a part of its own for each,
/// with its file name and media type; a mark of no file in `files` is refused. An object
/// (or a list holding one) is a JSON part unless `deep` names the field (nested pairs,
/// Stripe's `deepObject`); scalars are text parts, a list of them one part each.
pub fn multipart(
    body: &serde_json::Map<String, Value>,
    files: &[FilePart],
    deep: &[String],
) -> Result<(Vec<u8>, String), String> {
    let mut parts: Vec<(String, Part)> = Vec::new();
    for (key, value) in body {
        let marks: Option<Vec<usize>> = match value {
            Value::Array(items) if !items.is_empty() => items.iter().map(file_index).collect(),
            other => file_index(other).map(|n| vec![n]),
        };
        if let Some(marks) = marks {
            for n in marks {
                let file = files.get(n).ok_or_else(|| unknown_file(n))?;
                parts.push((key.clone(), Part::File(file)));
            }
            continue;
        }
        let complex = |v: &Value| v.is_object() || v.is_array();
        let json = match value {
            Value::Object(_) => true,
            Value::Array(items) => items.iter().any(complex),
            _ => false,
        };
        if !deep.contains(key) {
            match value {
                _ if json => {
                    parts.push((
                        key.clone(),
                        Part::Text(value.to_string(), Some("application/json")),
                    ));
                }
                Value::Array(items) => {
                    parts.extend(
                        items
                            .iter()
                            .map(|item| (key.clone(), Part::Text(scalar(item), None))),
                    );
                }
                other => parts.push((key.clone(), Part::Text(scalar(other), None))),
            }
            continue;
        }
        let mut pairs = Vec::new();
        nested_pairs(key, value, &mut pairs);
        parts.extend(pairs.into_iter().map(|(k, v)| (k, Part::Text(v, None))));
    }
    // A boundary no value holds, so that no value can start a part of its own; the same
    // for the same body (an approved write is matched by its bytes). It is named after the
    // digest of what the parts hold, which no part can hold in turn (that would take a
    // preimage of SHA-256): one pass over the parts finds it, whatever they hold. (Trying
    // `-0`, `-1`, ... instead cost a pass per candidate: a file of candidates took seconds.)
    let digest = {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        for (name, part) in &parts {
            hasher.update(name.as_bytes());
            match part {
                Part::Text(text, _) => hasher.update(text.as_bytes()),
                Part::File(file) => {
                    hasher.update(file.name.as_deref().unwrap_or_default().as_bytes());
                    hasher.update(file.bytes.as_slice());
                }
            }
        }
        crate::hex::hex(&hasher.finalize()[..12])
    };
    let holds = |b: &str| {
        parts.iter().any(|(k, v)| {
            k.contains(b)
                || match v {
                    Part::Text(text, _) => text.contains(b),
                    Part::File(file) => {
                        memchr::memmem::find(&file.bytes, b.as_bytes()).is_some()
                            || file.name.as_deref().is_some_and(|n| n.contains(b))
                    }
                }
        })
    };
    let boundary = (0u64..4)
        .map(|n| format!("sdkbox-{digest}-{n}"))
        .find(|b| !holds(b))
        .ok_or_else(|| "no multipart boundary could be found that no part holds".to_owned())?;
    // A name is quoted; its quote and line breaks escaped as browsers do.
    let quoted = |name: &str| {
        name.replace('"', "%22")
            .replace('\r', "%0D")
            .replace('\n', "%0A")
    };
    let mut out = Vec::new();
    for (name, value) in parts {
        let name = quoted(&name);
        match value {
            Part::Text(text, media_type) => {
                let typed = media_type
                    .map(|t| format!("\r\nContent-Type: {t}"))
                    .unwrap_or_default();
                out.extend_from_slice(
                    format!(
                        "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"{typed}\r\n\r\n{text}\r\n"
                    )
                    .as_bytes(),
                )
            }
            Part::File(file) => {
                let filename = quoted(file.name.as_deref().unwrap_or("blob"));
                let media_type = file
                    .media_type
                    .as_deref()
                    .filter(|t| !t.contains(['\r', '\n']))
                    .unwrap_or("application/octet-stream");
                out.extend_from_slice(
                    format!(
                        "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; \
                         filename=\"{filename}\"\r\nContent-Type: {media_type}\r\n\r\n"
                    )
                    .as_bytes(),
                );
                out.extend_from_slice(&file.bytes);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Ok((out, format!("multipart/form-data; boundary={boundary}")))
}

/// Why a file mark that names no file is refused.
pub fn unknown_file(n: usize) -> String {
    format!(
        "`{{\"{FILE_MARK}\": {n}}}` stands for a file the call did not hand over; pass the \
         Blob, File or Uint8Array itself"
    )
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
    fn parameters_follow_their_style() {
        let pairs = |value: Value, style, explode| {
            let mut out = Vec::new();
            query_pairs("k", &value, style, explode, &mut out);
            out.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("&")
        };
        let list = || json!(["a", "b"]);
        let object = || json!({"x": 1, "y": "z"});
        assert_eq!(pairs(list(), Style::Form, true), "k=a&k=b");
        assert_eq!(pairs(list(), Style::Form, false), "k=a,b");
        assert_eq!(pairs(list(), Style::SpaceDelimited, false), "k=a b");
        assert_eq!(pairs(list(), Style::PipeDelimited, false), "k=a|b");
        assert_eq!(pairs(list(), Style::DeepObject, true), "k[]=a&k[]=b");
        assert_eq!(pairs(object(), Style::Form, true), "x=1&y=z");
        // An exploded object's list field is repeated as a parameter of its own.
        let query = json!({"dimensions": ["a", "b"], "limit": 2});
        assert_eq!(
            pairs(query, Style::Form, true),
            "dimensions=a&dimensions=b&limit=2"
        );
        assert_eq!(pairs(object(), Style::Form, false), "k=x,1,y,z");
        assert_eq!(pairs(object(), Style::DeepObject, true), "k[x]=1&k[y]=z");
        assert_eq!(pairs(json!(3), Style::Form, true), "k=3");
        // Nothing for an empty list or a null field, exploded or not.
        assert_eq!(pairs(json!([]), Style::Form, false), "");
        assert_eq!(pairs(json!({"x": null, "y": 1}), Style::Form, true), "y=1");
        // What an encoding would take, counted without writing it.
        let wide = json!({"k".repeat(1000): (0..1000).map(|i| (i.to_string(), json!(1))).collect::<serde_json::Map<_, _>>()});
        assert!(nested_size(0, &wide) > 1_000_000);
        let path = |value: Value, style, explode| path_segment("k", &value, style, explode);
        assert_eq!(path(list(), Style::Simple, false), "a,b");
        assert_eq!(path(object(), Style::Simple, false), "x,1,y,z");
        assert_eq!(path(object(), Style::Simple, true), "x=1,y=z");
        assert_eq!(path(list(), Style::Label, false), ".a,b");
        assert_eq!(path(list(), Style::Label, true), ".a.b");
        assert_eq!(path(list(), Style::Matrix, false), ";k=a,b");
        assert_eq!(path(list(), Style::Matrix, true), ";k=a;k=b");
        assert_eq!(path(json!("a b/c"), Style::Simple, false), "a%20b%2Fc");
        assert_eq!(header_value(&list(), false), "a,b");
        assert_eq!(header_value(&object(), true), "x=1,y=z");
    }

    #[test]
    fn a_multipart_value_cannot_start_a_part_of_its_own() {
        // Even knowing the boundary of a body that does not hold it, a value cannot forge a
        // part: holding it makes another body, of another boundary.
        let plain = json!({"note": "x", "na\r\nme": "v"});
        let (_, plain_type) = multipart(plain.as_object().unwrap(), &[], &[]).unwrap();
        let known = plain_type.split("boundary=").nth(1).unwrap();
        let forged =
            format!("x\r\n--{known}\r\nContent-Disposition: form-data; name=\"admin\"\r\n\r\ntrue");
        let body = json!({"note": forged, "na\r\nme": "v"});
        let (text, content_type) = multipart(body.as_object().unwrap(), &[], &[]).unwrap();
        let text = String::from_utf8(text).unwrap();
        let boundary = content_type.split("boundary=").nth(1).unwrap();
        assert_ne!(boundary, known);
        assert_eq!(text.matches(&format!("--{boundary}\r\n")).count(), 2);
        assert!(text.contains("name=\"na%0D%0Ame\""));
        let (again, _) = multipart(body.as_object().unwrap(), &[], &[]).unwrap();
        let again = String::from_utf8(again).unwrap();
        assert_eq!(again, text, "the same body, the same bytes");
    }

    /// Files are parts with their name and type, byte for byte; an object is a JSON part
    /// unless the field is a deepObject (Stripe's form style); a list of scalars is repeated.
    #[test]
    fn multipart_files_objects_and_lists() {
        let png = FilePart {
            name: Some("a.png".into()),
            media_type: Some("image/png".into()),
            bytes: vec![0x89, b'P', 0x00, 0xff].into(),
        };
        let body = json!({
            "file": {"$sdkbox_file": 0},
            "metadata": {"main_module": "a.js"},
            "file_link_data": {"create": true},
            "tags": ["x", "y"]
        });
        let deep = vec!["file_link_data".to_owned()];
        let (bytes, _) = multipart(body.as_object().unwrap(), &[png], &deep).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("name=\"file\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n"),
            "{text}"
        );
        assert!(memchr::memmem::find(&bytes, &[0x89, b'P', 0x00, 0xff, b'\r', b'\n']).is_some());
        assert!(text.contains("name=\"metadata\"\r\nContent-Type: application/json\r\n\r\n{\"main_module\":\"a.js\"}"), "{text}");
        assert!(
            text.contains("name=\"file_link_data[create]\"\r\n\r\ntrue"),
            "{text}"
        );
        assert_eq!(text.matches("name=\"tags\"\r\n").count(), 2, "{text}");
        // Stripe's lists are deepObject: `expand[]`.
        let stripe = json!({"expand": ["a", "b"]});
        let (bytes, _) =
            multipart(stripe.as_object().unwrap(), &[], &["expand".to_owned()]).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&bytes)
                .matches("name=\"expand[]\"")
                .count(),
            2
        );
        let unknown = multipart(
            json!({"file": {"$sdkbox_file": 1}}).as_object().unwrap(),
            &[],
            &[],
        );
        assert!(unknown.unwrap_err().contains("did not hand over"));
    }

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(segment(&json!("a b/c")), "a%20b%2Fc");
        assert_eq!(segment(&json!(42)), "42");
    }
}
