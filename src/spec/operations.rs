//! Operations from the spec's `paths`: parameters merged from path and operation level, the
//! request body and success response read, `$ref`s followed. An operation that cannot be
//! read becomes a warning naming its place; the others still load.

use std::sync::Arc;

use serde_json::Value;

use super::SpecWarning;
use super::model::{Body, Encoding, Location, Operation, Param, Shape, Style};
use super::schema::{RefError, Schemas};
use super::text;

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// How many operations the document declares, counted before any is read.
pub fn count(root: &Value) -> usize {
    let Some(paths) = root.get("paths").and_then(Value::as_object) else {
        return 0;
    };
    paths
        .values()
        .filter_map(Value::as_object)
        .map(|item| METHODS.iter().filter(|m| item.contains_key(**m)).count())
        .sum()
}

/// Reads every operation under `paths`.
pub fn read(
    root: &Value,
    schemas: &mut Schemas,
    warnings: &mut Vec<SpecWarning>,
) -> Vec<Operation> {
    let mut operations = Vec::new();
    let Some(paths) = root.get("paths").and_then(Value::as_object) else {
        warnings.push(SpecWarning::new(
            "paths",
            "the spec has no paths: there is nothing to call",
        ));
        return operations;
    };
    for (path, item) in paths {
        let item = match schemas.resolve(item) {
            Ok(item) => item,
            Err(RefError(e)) => {
                warnings.push(SpecWarning::new(&format!("paths.{path}"), &e));
                continue;
            }
        };
        let shared = item.get("parameters").and_then(Value::as_array);
        for method in METHODS {
            let Some(spec) = item.get(*method) else {
                continue;
            };
            let place = format!("{} {path}", method.to_uppercase());
            match operation(path, method, spec, shared, schemas, &place, warnings) {
                Ok(mut op) => {
                    op.server = own_server(spec).or_else(|| own_server(item));
                    operations.push(op)
                }
                Err(RefError(e)) => {
                    warnings.push(SpecWarning::new(&place, &format!("skipped: {e}")))
                }
            }
        }
    }
    unique_ids(&mut operations, warnings);
    operations
}

/// The first of `servers` an operation or path item names, when it is an absolute http(s)
/// URL (variables at their defaults).
fn own_server(node: &Value) -> Option<String> {
    let server = node.get("servers")?.as_array()?.first()?;
    let mut url = server.get("url")?.as_str()?.to_owned();
    if let Some(vars) = server.get("variables").and_then(Value::as_object) {
        for (name, var) in vars {
            if let Some(default) = var.get("default").and_then(Value::as_str) {
                url = url.replace(&format!("{{{name}}}"), default);
            }
        }
    }
    let parsed = url::Url::parse(&url).ok()?;
    matches!(parsed.scheme(), "http" | "https").then_some(url)
}

/// Makes every `operationId` unique: a later operation with an id already taken gets it with
/// a number (`update_2`), and a warning names both operations. (An id names one operation in
/// the SDK and the docs; the approval rules go by method and path, whatever the ids.)
fn unique_ids(operations: &mut [Operation], warnings: &mut Vec<SpecWarning>) {
    let mut taken: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for index in 0..operations.len() {
        let id = operations[index].id.clone();
        let Some(&first) = taken.get(&id) else {
            taken.insert(id, index);
            continue;
        };
        let unique = (2..)
            .map(|n| format!("{id}_{n}"))
            .find(|candidate| !taken.contains_key(candidate))
            .unwrap_or_default();
        let (earlier, op) = (&operations[first], &operations[index]);
        warnings.push(SpecWarning::new(
            &format!("{} {}", op.method, op.path),
            &format!(
                "operationId `{id}` is also the id of {} {}; this operation is called `{unique}`",
                earlier.method, earlier.path
            ),
        ));
        operations[index].id = unique.clone();
        taken.insert(unique, index);
    }
}

fn operation(
    path: &str,
    method: &str,
    spec: &Value,
    shared: Option<&Vec<Value>>,
    schemas: &mut Schemas,
    place: &str,
    warnings: &mut Vec<SpecWarning>,
) -> Result<Operation, RefError> {
    let id = match spec.get("operationId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => {
            let derived = derived_id(method, path);
            warnings.push(SpecWarning::new(
                place,
                &format!("no operationId; calling it `{derived}`"),
            ));
            derived
        }
    };
    let description = spec
        .get("description")
        .and_then(Value::as_str)
        .map(text::plain)
        .unwrap_or_default();
    let summary = spec
        .get("summary")
        .and_then(Value::as_str)
        .map(text::plain)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| text::first_sentence(&description, 120));
    let tags = spec
        .get("tags")
        .and_then(Value::as_array)
        .map(|t| {
            t.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let success = success_schema(spec.get("responses"), schemas)?;
    Ok(Operation {
        id,
        method: method.to_uppercase(),
        path: path.to_owned(),
        group: String::new(),
        name: String::new(),
        summary,
        description,
        tags,
        params: params(
            shared,
            spec.get("parameters").and_then(Value::as_array),
            schemas,
        )?,
        body: body(spec.get("requestBody"), schemas)?,
        response: match success {
            Some(schema) => {
                let shape = schemas.shape(schema)?;
                Some(schemas.views.for_responses(&shape))
            }
            None => not_json_success(spec.get("responses"), schemas)?,
        },
        // The named schema it returns (for lists, that of the items): its description says
        // what the operation is about in the provider's words.
        resource: success.and_then(first_schema_name),
        deprecated: spec.get("deprecated").and_then(Value::as_bool) == Some(true),
        policy: spec
            .get("x-sdkbox-policy")
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)),
        former: Vec::new(),
        server: None,
    })
}

fn derived_id(method: &str, path: &str) -> String {
    let mut id = method.to_owned();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        let word = segment.trim_matches(|c| c == '{' || c == '}');
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            id.extend(first.to_uppercase());
            id.extend(chars.filter(|c| c.is_alphanumeric()));
        }
    }
    id
}

fn params(
    shared: Option<&Vec<Value>>,
    own: Option<&Vec<Value>>,
    schemas: &mut Schemas,
) -> Result<Vec<Param>, RefError> {
    let mut out: Vec<Param> = Vec::new();
    for raw in shared
        .into_iter()
        .flatten()
        .chain(own.into_iter().flatten())
    {
        let raw = schemas.resolve(raw)?;
        let location = match raw.get("in").and_then(Value::as_str) {
            Some("path") => Location::Path,
            Some("query") => Location::Query,
            Some("header") => Location::Header,
            _ => continue,
        };
        let Some(name) = raw.get("name").and_then(Value::as_str) else {
            continue;
        };
        let shape = match raw.get("schema") {
            Some(schema) => schemas.shape(schema)?,
            None => Arc::new(Shape::Any),
        };
        let style = match (raw.get("style").and_then(Value::as_str), location) {
            (Some("form"), _) => Style::Form,
            (Some("spaceDelimited"), _) => Style::SpaceDelimited,
            (Some("pipeDelimited"), _) => Style::PipeDelimited,
            (Some("deepObject"), _) => Style::DeepObject,
            (Some("label"), _) => Style::Label,
            (Some("matrix"), _) => Style::Matrix,
            (Some("simple"), _) => Style::Simple,
            (_, Location::Query) => Style::Form,
            (_, Location::Path | Location::Header) => Style::Simple,
        };
        let param = Param {
            name: name.to_owned(),
            location,
            required: location == Location::Path
                || raw.get("required").and_then(Value::as_bool) == Some(true),
            shape,
            description: raw
                .get("description")
                .and_then(Value::as_str)
                .map(text::plain)
                .unwrap_or_default(),
            style,
            explode: raw
                .get("explode")
                .and_then(Value::as_bool)
                .unwrap_or(style == Style::Form),
        };
        // Operation-level parameters override path-level ones of the same name and place.
        out.retain(|p| !(p.name == param.name && p.location == param.location));
        out.push(param);
    }
    Ok(out)
}

fn body(raw: Option<&Value>, schemas: &mut Schemas) -> Result<Option<Body>, RefError> {
    let Some(raw) = raw else { return Ok(None) };
    let raw = schemas.resolve(raw)?;
    let Some(content) = raw.get("content").and_then(Value::as_object) else {
        return Ok(None);
    };
    let pick = content
        .iter()
        .find(|(t, _)| t.contains("json") && !t.contains("ndjson"))
        .map(|(t, c)| (Encoding::Json, t, c))
        .or_else(|| {
            content
                .iter()
                .find(|(t, _)| t.starts_with("application/x-www-form-urlencoded"))
                .map(|(t, c)| (Encoding::Form, t, c))
        })
        .or_else(|| {
            content
                .iter()
                .find(|(t, _)| t.starts_with("multipart/form-data"))
                .map(|(t, c)| (Encoding::Multipart, t, c))
        })
        .or_else(|| content.iter().next().map(|(t, c)| (Encoding::Raw, t, c)));
    let Some((encoding, media_type, media)) = pick else {
        return Ok(None);
    };
    let shape = match (encoding, media.get("schema")) {
        // A body of bytes or text is given whole, whatever its schema says of it.
        (Encoding::Raw, _) => Arc::new(Shape::Bytes),
        (_, Some(schema)) => {
            let shape = schemas.shape(schema)?;
            schemas.views.for_requests(&shape)
        }
        (_, None) => Arc::new(Shape::Any),
    };
    let media_type = if media_type.contains('*') {
        "application/octet-stream".to_owned()
    } else {
        media_type.clone()
    };
    // An object body that may also be null (GitHub's `pulls/merge`) is an object body that
    // may be left out: its fields are passed by name, as the official SDKs take them.
    let (shape, nullable) = match object_or_null(&shape) {
        Some(object) => (object, true),
        None => (shape, false),
    };
    let deep_objects = media
        .get("encoding")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, e)| e.get("style").and_then(Value::as_str) == Some("deepObject"))
        .map(|(name, _)| name.clone())
        .collect();
    Ok(Some(Body {
        encoding,
        media_type,
        required: raw.get("required").and_then(Value::as_bool) == Some(true) && !nullable,
        shape,
        deep_objects,
    }))
}

/// The object of a shape that is an object or null.
fn object_or_null(shape: &Arc<Shape>) -> Option<Arc<Shape>> {
    let Shape::OneOf(options) = &**shape else {
        return None;
    };
    let mut objects = options.iter().filter(|o| !matches!(***o, Shape::Null));
    let object = objects.next()?;
    let only = objects.next().is_none() && options.len() == 2;
    (only && matches!(**object, Shape::Object { .. })).then(|| object.clone())
}

/// The first `#/components/schemas/<name>` reference in `schema`, depth first.
fn first_schema_name(schema: &Value) -> Option<String> {
    match schema {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
            {
                return Some(name.to_owned());
            }
            map.values().find_map(first_schema_name)
        }
        Value::Array(items) => items.iter().find_map(first_schema_name),
        _ => None,
    }
}

/// What the first success response is when it is not JSON: text for a text media type, else
/// bytes (an image, a PDF, an archive), as the sandbox hands them to the script.
fn not_json_success(
    raw: Option<&Value>,
    schemas: &Schemas<'_>,
) -> Result<Option<Arc<Shape>>, RefError> {
    let Some(response) = first_success(raw, schemas)? else {
        return Ok(None);
    };
    let Some((media_type, _)) = response
        .get("content")
        .and_then(Value::as_object)
        .and_then(|content| content.iter().next())
    else {
        return Ok(None);
    };
    Ok(Some(Arc::new(if super::is_text_media_type(media_type) {
        Shape::String { values: Vec::new() }
    } else {
        Shape::Bytes
    })))
}

/// The first success response (the lowest 2xx code), its `$ref` resolved.
fn first_success<'v>(
    raw: Option<&'v Value>,
    schemas: &Schemas<'v>,
) -> Result<Option<&'v Value>, RefError> {
    let Some(responses) = raw.and_then(Value::as_object) else {
        return Ok(None);
    };
    let mut codes: Vec<&String> = responses.keys().filter(|c| c.starts_with('2')).collect();
    codes.sort();
    let Some(code) = codes.first() else {
        return Ok(None);
    };
    schemas.resolve(&responses[code.as_str()]).map(Some)
}

/// The JSON schema of the first success response, as the spec writes it.
fn success_schema<'v>(
    raw: Option<&'v Value>,
    schemas: &Schemas<'v>,
) -> Result<Option<&'v Value>, RefError> {
    Ok(first_success(raw, schemas)?
        .and_then(|response| response.get("content"))
        .and_then(Value::as_object)
        .and_then(|content| content.iter().find(|(t, _)| t.contains("json")))
        .and_then(|(_, media)| media.get("schema")))
}
