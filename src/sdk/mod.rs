//! The provider client inside the sandbox: `api.<group>.<method>(params)`, one method per
//! spec operation. The sandbox's `api` is a thin proxy; this module, in the process that
//! holds egress, finds the operation, checks the parameters against the spec and encodes
//! the request. So loading the SDK costs a fresh runtime nothing, whatever the API's size,
//! and every SDK call reaches egress knowing its operation.

mod declarations;
mod encode;
mod names;
mod suggest;
mod typescript;
mod validate;

pub use declarations::{GLOBALS, declarations, group_types};
pub use typescript::{call_hint, signature, type_of};
pub use validate::did_you_mean;

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

use crate::egress::{FilePart, ScriptRequest, UrlKind, file_index, holds_file};
use crate::spec::{Api, Encoding, Location, Operation, Param, Shape, Style};

/// A call the script made: `api.<group>.<method>(params)`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SdkCall {
    /// The group name.
    pub group: String,
    /// The method name.
    pub method: String,
    /// The one parameters object (or `null`).
    #[serde(default)]
    pub params: Value,
    /// The position of the last argument given after it (0: none), which the SDK refuses:
    /// another SDK's positional form (`update(id, { ... })`) or its request options.
    #[serde(default)]
    pub extra: u32,
    /// The files the parameters stand for (see [`crate::egress::FILE_MARK`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FilePart>,
}

/// Why a call given `arguments` arguments is refused, in sdkbox's words with its form: the
/// run-time SDK and the type check say the same, so a model reads one fix before and during a
/// run.
pub fn positional(op: &Operation, arguments: usize) -> String {
    format!(
        "api.{}.{} takes one object of parameters, like api.{}.{}({}); it was given {arguments} \
         arguments (another SDK's positional form, such as `update(id, {{ ... }})`, or request \
         options after the parameters){}",
        op.group,
        op.name,
        op.group,
        op.name,
        call_hint(op),
        by_name(op)
    )
}

/// How an operation's path parameters are passed: by name in the one object.
fn by_name(op: &Operation) -> String {
    let names: Vec<&str> = op
        .params
        .iter()
        .filter(|p| p.location == Location::Path)
        .map(|p| p.name.as_str())
        .collect();
    match names.as_slice() {
        [] => String::new(),
        names => format!(
            "; ids in the path go in the object by name ({}), beside the other fields",
            names.join(", ")
        ),
    }
}

/// A call that does not fit the spec; the message says how to fix it.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct CallError(pub String);

/// The SDK of one provider: its operations by group and method name.
pub struct Sdk {
    api: Arc<Api>,
    names: names::Names,
    /// What each operation is about, for suggestions ranked by meaning: made the first time
    /// a name reaches nothing, not at start.
    described: Arc<OnceLock<Vec<suggest::Described>>>,
    /// Operations by id (unique: `spec::operations` makes them so), for what the gateway
    /// asks of the operation an SDK call prepared.
    by_id: std::collections::HashMap<String, usize>,
}

impl Sdk {
    /// Indexes the operations of `api`.
    pub fn new(api: Arc<Api>) -> Self {
        let mut names = names::Names::new(
            api.operations
                .iter()
                .map(|op| (op.group.as_str(), op.name.as_str(), op.method.as_str())),
        );
        names.remember_former(
            api.operations
                .iter()
                .enumerate()
                .flat_map(|(index, op)| op.former.iter().map(move |name| (name.clone(), index))),
        );
        let described: Arc<OnceLock<Vec<suggest::Described>>> = Arc::default();
        let (operations, about) = (api.clone(), described.clone());
        names.suggest_with(Box::new(move |asked| {
            let about = about.get_or_init(|| suggest::Described::all(&operations.operations));
            suggest::said(&suggest::ranked(asked, &operations.operations, about))
        }));
        let by_id = api
            .operations
            .iter()
            .enumerate()
            .map(|(index, op)| (op.id.clone(), index))
            .collect();
        Self {
            api,
            names,
            described,
            by_id,
        }
    }

    /// The operation `api.<group>.<method>` reaches at run time, if any (see
    /// [`Sdk::operation`]), without the words of an error: for the type check, which asks
    /// this of every name it judges.
    pub fn resolve(&self, group: &str, method: &str) -> Option<&Operation> {
        let index = self.names.resolve(group, method)?;
        self.api.operations.get(index)
    }

    /// What a name that reaches nothing (`pullRequests.list`, after `api.`) may have meant,
    /// ranked by meaning before spelling: `; did you mean api.pulls.list (GET ...: List pull
    /// requests)?`, or `.` when nothing comes near.
    pub fn suggestion(&self, asked: &str) -> String {
        let about = self
            .described
            .get_or_init(|| suggest::Described::all(&self.api.operations));
        suggest::said(&suggest::ranked(asked, &self.api.operations, about))
    }

    /// The API this SDK calls.
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// The operation behind `api.<group>.<method>`, or an error with suggestions.
    pub fn operation(&self, group: &str, method: &str) -> Result<&Operation, CallError> {
        let index = self.names.find(group, method)?;
        Ok(&self.api.operations[index])
    }

    /// Whether `api.<group>` reaches a group of the SDK at run time (see [`Sdk::operation`]
    /// for how names are found): for the type check, which sees groups reached through
    /// aliases.
    pub fn has_group(&self, group: &str) -> bool {
        !group.is_empty() && self.names.has_group(group)
    }

    /// Why the SDK refuses `value`, written literally as the top-level parameter `key` of a
    /// call to `api.<group>.<method>` (`amount: 19.99` where the spec says integer), if it
    /// does whatever else the call holds; `None` when it takes it, or the call or the key is
    /// not one the SDK knows (other checks say so).
    pub fn refuses_literal(
        &self,
        group: &str,
        method: &str,
        key: &str,
        value: &Value,
    ) -> Option<String> {
        let op = self.resolve(group, method)?;
        let shape = match op.params.iter().find(|p| p.name == key) {
            Some(param) => &param.shape,
            None => match op.body.as_ref().map(|b| &*b.shape) {
                Some(Shape::Object { fields, .. }) => &fields.iter().find(|f| f.name == key)?.shape,
                _ => return None,
            },
        };
        validate::check(value, shape, key).err()
    }

    /// Why the body of `op` refuses the field `key` written in a raw request's body (with
    /// `value` when that is a literal): a field its object schema does not have and takes no
    /// others, or a value of the wrong type; `None` when it takes it, or the body is not an
    /// object the spec closes.
    pub fn body_refuses(op: &Operation, key: &str, value: Option<&Value>) -> Option<String> {
        let Shape::Object { fields, additional } = &*op.body.as_ref()?.shape else {
            return None;
        };
        match (fields.iter().find(|f| f.name == key), value) {
            (Some(field), Some(value)) => validate::check(value, &field.shape, key).err(),
            (Some(_), None) => None,
            (None, _) if additional.is_some() => None,
            (None, _) => {
                let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                Some(format!(
                    "the body has no field `{key}`{} Its fields: {}",
                    did_you_mean(key, &names),
                    names.join(", ")
                ))
            }
        }
    }

    /// Checks a call against the spec and encodes it as a request for egress.
    pub fn prepare(&self, call: &SdkCall) -> Result<ScriptRequest, CallError> {
        self.prepare_with(call, true)
    }

    /// [`Sdk::prepare`], saying what may have been meant by a name that reaches nothing only
    /// when `explain` (ranking suggestions costs a pass over every operation: a script that
    /// keeps calling names that do not exist gets them for its first few only).
    pub fn prepare_with(&self, call: &SdkCall, explain: bool) -> Result<ScriptRequest, CallError> {
        let index = self.names.find_with(&call.group, &call.method, explain)?;
        let op = &self.api.operations[index];
        let at = format!("api.{}.{} ({} {})", op.group, op.name, op.method, op.path);
        let empty = Map::new();
        if call.extra > 0 {
            return Err(CallError(positional(op, call.extra as usize + 1)));
        }
        let params = match &call.params {
            Value::Object(map) => map,
            Value::Null => &empty,
            other => {
                return Err(CallError(format!(
                    "{at} takes one object of parameters, like {}; got {}{}",
                    call_hint(op),
                    validate::kind_of(other),
                    by_name(op)
                )));
            }
        };
        let mut request = ScriptRequest {
            method: op.method.clone(),
            url: op.path.clone(),
            kind: UrlKind::Api,
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            files: Vec::new(),
            operation: Some(op.id.clone()),
            unencoded: None,
            position: None,
        };
        let size = encode::nested_size(0, &call.params);
        if size > encode::MAX_ENCODED_BYTES {
            return Err(CallError(format!(
                "{at}: the parameters would take {size} bytes or more once encoded, over the {} allowed; send less",
                encode::MAX_ENCODED_BYTES
            )));
        }
        let body_fields = body_fields(op);
        let mut body = Map::new();
        for (key, value) in params {
            if let Some(fields) = explicit_body(op, body_fields.as_ref(), key, value) {
                // Body fields named like parameters (a rename's new `name` beside the path's
                // `name`) are passed under `body`.
                body.extend(fields.clone());
                continue;
            }
            if let Some(param) = op.params.iter().find(|p| &p.name == key) {
                validate::check(value, &param.shape, key)
                    .map_err(|e| CallError(format!("{at}: {e}")))?;
                place(&mut request, param, value).map_err(|e| CallError(format!("{at}: {e}")))?;
            } else if goes_in_body(op, body_fields.as_ref(), key) {
                body.insert(key.clone(), value.clone());
            } else {
                let known = known_names(op);
                return Err(CallError(format!(
                    "{at}: unknown parameter `{key}`{} Parameters: {}",
                    did_you_mean(key, &known.iter().map(String::as_str).collect::<Vec<_>>()),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )));
            }
        }
        for param in op.params.iter().filter(|p| p.required) {
            if !params.contains_key(&param.name) {
                return Err(CallError(format!(
                    "{at}: missing required parameter `{}` ({})",
                    param.name,
                    validate::describe(&param.shape)
                )));
            }
        }
        self.encode_body(
            op,
            &at,
            body,
            body_fields.is_none(),
            &call.files,
            &mut request,
        )?;
        stays_on_template(&request.url, &op.path).map_err(|e| CallError(format!("{at}: {e}")))?;
        Ok(request)
    }

    fn encode_body(
        &self,
        op: &Operation,
        at: &str,
        mut body: Map<String, Value>,
        whole: bool,
        files: &[FilePart],
        request: &mut ScriptRequest,
    ) -> Result<(), CallError> {
        let Some(spec) = &op.body else { return Ok(()) };
        let value = if whole {
            body.remove("body").unwrap_or(Value::Null)
        } else {
            Value::Object(body)
        };
        let empty = matches!(&value, Value::Null) || value.as_object().is_some_and(Map::is_empty);
        if empty && !spec.required {
            return Ok(());
        }
        let place = if whole { "body" } else { "params" };
        let checked = match spec.encoding {
            Encoding::Multipart => files_as_strings(&value),
            _ => std::borrow::Cow::Borrowed(&value),
        };
        validate::check(&checked, &spec.shape, place)
            .map_err(|e| CallError(format!("{at}: {e}")))?;
        let (bytes, content_type) = encoded_body(spec, &value, files)
            .map_err(|e| CallError(format!("{at}: {e}")))?
            .unwrap_or_else(|| {
                (
                    value.to_string().into_bytes(),
                    "application/json".to_owned(),
                )
            });
        request.headers.push(("content-type".into(), content_type));
        request.body = Some(bytes.into());
        Ok(())
    }

    /// Re-encodes a raw `api.request` the way the operation it reaches expects: its query
    /// values in their parameters' styles, an object body in the operation's media type
    /// (a form for Stripe). A request that reaches no operation keeps the plain encoding
    /// the script made. Either way, what was left to encode is dropped.
    pub fn encode_raw(&self, request: &mut ScriptRequest) -> Result<(), CallError> {
        let Some(unencoded) = request.unencoded.take() else {
            return Ok(());
        };
        let path = request.url.split(['?', '#']).next().unwrap_or_default();
        let Some(op) = self.operation_at(&request.method, path) else {
            return Ok(());
        };
        let size = [&unencoded.query, &unencoded.body]
            .into_iter()
            .flatten()
            .fold(0usize, |sum, v| {
                sum.saturating_add(encode::nested_size(0, v))
            });
        if size > encode::MAX_ENCODED_BYTES {
            return Err(CallError(format!(
                "{} {path}: the query and body would take {size} bytes or more once encoded, over the {} allowed; send less",
                request.method,
                encode::MAX_ENCODED_BYTES
            )));
        }
        if let Some(Value::Object(query)) = &unencoded.query {
            request.query.clear();
            for (key, value) in query {
                if value.is_null() {
                    continue;
                }
                let param = op
                    .params
                    .iter()
                    .find(|p| p.location == Location::Query && &p.name == key);
                let (style, explode) = match (param, value) {
                    (Some(param), _) => (param.style, param.explode),
                    // Not in the spec: objects nested, arrays repeated, as before.
                    (None, Value::Object(_)) => (Style::DeepObject, true),
                    (None, _) => (Style::Form, true),
                };
                encode::query_pairs(key, value, style, explode, &mut request.query);
            }
        }
        let (Some(value), Some(spec)) = (unencoded.body, &op.body) else {
            return Ok(());
        };
        let files = std::mem::take(&mut request.files);
        let encoded = encoded_body(spec, &value, &files)
            .map_err(|e| CallError(format!("{} {path}: {e}", request.method)))?;
        let Some((bytes, content_type)) = encoded else {
            request.files = files;
            return Ok(());
        };
        request
            .headers
            .retain(|(name, _)| !name.eq_ignore_ascii_case("content-type"));
        request.headers.push(("content-type".into(), content_type));
        request.body = Some(bytes.into());
        Ok(())
    }

    /// The name (`group.method`) of the operation an API request (`method`, and `url`
    /// relative to the base URL) reaches, as the approval rules name it.
    pub fn operation_name(&self, method: &str, url: &str) -> Option<String> {
        let path = url.split(['?', '#']).next().unwrap_or_default();
        let op = self.operation_at(&method.to_ascii_uppercase(), path)?;
        Some(format!("{}.{}", op.group, op.name))
    }

    /// Whether a path segment fits a template's (`{id}`, `{name}.zip`, `customers`): a
    /// parameter alone takes any segment, one with text around it a segment with that text
    /// around something; text is equal. How the SDK and the type check both match routes.
    pub fn segment_fits(template: &str, segment: &str) -> bool {
        match template.find('{') {
            None => template == segment,
            Some(open) => {
                let close = template.rfind('}').unwrap_or(template.len() - 1);
                let (before, after) = (&template[..open], &template[close + 1..]);
                segment.len() > before.len() + after.len()
                    && segment.starts_with(before)
                    && segment.ends_with(after)
            }
        }
    }

    /// The operation `method` and `path` (relative to the base URL) reach: its template's
    /// literal segments equal, its parameters any one segment; the most literal wins.
    fn operation_at(&self, method: &str, path: &str) -> Option<&Operation> {
        let path = path.trim_start_matches('/');
        let got: Vec<&str> = path.strip_suffix('/').unwrap_or(path).split('/').collect();
        self.api
            .operations
            .iter()
            .filter(|op| op.method.eq_ignore_ascii_case(method))
            .filter_map(|op| {
                let want: Vec<&str> = op.path.trim_start_matches('/').split('/').collect();
                let fits = want.len() == got.len()
                    && want.iter().zip(&got).all(|(w, g)| Self::segment_fits(w, g));
                fits.then(|| (want.iter().filter(|w| !w.contains('{')).count(), op))
            })
            .max_by_key(|(literal, _)| *literal)
            .map(|(_, op)| op)
    }

    /// The server the operation with id `id` is served from when its spec names one of its
    /// own (Stripe's file uploads, GitHub's release assets).
    pub fn server_of(&self, id: &str) -> Option<&str> {
        self.by_id(id).and_then(|op| op.server.as_deref())
    }

    fn by_id(&self, id: &str) -> Option<&Operation> {
        self.by_id.get(id).and_then(|i| self.api.operations.get(*i))
    }

    /// Whether the operation with id `id` returns a file (its spec's success response is no
    /// JSON and no text): the script gets its bytes.
    pub fn returns_bytes(&self, id: &str) -> bool {
        self.by_id(id)
            .is_some_and(|op| matches!(op.response.as_deref(), Some(Shape::Bytes)))
    }

    /// Every operation, for the docs index.
    pub fn operations(&self) -> &[Operation] {
        &self.api.operations
    }
}

/// `value` as the body `spec` describes, and its content type; `None` for a form or
/// multipart body that is not an object.
/// A body as the operation's media type has it, and its content type: `None` when the value
/// does not fit the encoding (the caller sends JSON, or the script's plain encoding). Files
/// (see [`crate::egress::FILE_MARK`]) go as multipart parts or as a raw body; anywhere else
/// they are refused.
fn encoded_body(
    spec: &crate::spec::Body,
    value: &Value,
    files: &[FilePart],
) -> Result<Option<(Vec<u8>, String)>, String> {
    Ok(Some(match (spec.encoding, value.as_object()) {
        (Encoding::Multipart, Some(map)) => encode::multipart(map, files, &spec.deep_objects)?,
        (Encoding::Raw, _) if let Some(n) = file_index(value) => {
            let file = files.get(n).ok_or_else(|| encode::unknown_file(n))?;
            (file.bytes.to_vec(), spec.media_type.clone())
        }
        _ if holds_file(value) => {
            return Err(format!(
                "a file (Blob, File or bytes) cannot go in a {} body, only in a multipart \
                 field or as a whole raw body; if the API takes base64 text, give the bytes \
                 as a base64 string instead",
                spec.media_type
            ));
        }
        (Encoding::Form, Some(map)) => (
            encode::form(map).into_bytes(),
            "application/x-www-form-urlencoded".to_owned(),
        ),
        (Encoding::Raw, _) if !value.is_object() && !value.is_array() => {
            (encode::scalar(value).into_bytes(), spec.media_type.clone())
        }
        (Encoding::Raw, _) => return Ok(None),
        // JSON as the spec names it (`application/merge-patch+json` too).
        (Encoding::Json, _) => (value.to_string().into_bytes(), spec.media_type.clone()),
        (Encoding::Form | Encoding::Multipart, None) => return Ok(None),
    }))
}

/// `value` as validation sees it in a multipart body: a field given a file (or a list of
/// files) is a string there, as every multipart field may be a file.
fn files_as_strings(value: &Value) -> std::borrow::Cow<'_, Value> {
    let Value::Object(map) = value else {
        return std::borrow::Cow::Borrowed(value);
    };
    let is_file = |v: &Value| file_index(v).is_some();
    let stands = |v: &Value| match v {
        Value::Array(items) => !items.is_empty() && items.iter().all(is_file),
        other => is_file(other),
    };
    if !map.values().any(stands) {
        return std::borrow::Cow::Borrowed(value);
    }
    let replaced = map
        .iter()
        .map(|(k, v)| match v {
            Value::Array(items) if stands(v) => (
                k.clone(),
                Value::Array(items.iter().map(|_| Value::String(String::new())).collect()),
            ),
            other if stands(other) => (k.clone(), Value::String(String::new())),
            other => (k.clone(), other.clone()),
        })
        .collect();
    std::borrow::Cow::Owned(Value::Object(replaced))
}

/// The body's fields when the body is an object (they are passed by name): their names, and
/// whether other keys go in too (an open object without known fields). `None` when the body
/// is passed whole as `body`.
fn body_fields(op: &Operation) -> Option<(Vec<&str>, bool)> {
    match op.body.as_ref().map(|b| &*b.shape) {
        Some(Shape::Object { fields, additional }) => Some((
            fields.iter().map(|f| f.name.as_str()).collect(),
            fields.is_empty() && additional.is_some(),
        )),
        Some(_) | None => None,
    }
}

/// Whether `key` is a body field (by name, or any key of an open object), or the whole
/// body under `body`.
fn goes_in_body(op: &Operation, fields: Option<&(Vec<&str>, bool)>, key: &str) -> bool {
    match fields {
        Some((fields, open)) => *open || fields.contains(&key),
        None => key == "body" && op.body.is_some(),
    }
}

/// The fields of an object body passed under `body` (when neither a parameter nor a body
/// field is named `body`): how a call gives a body field that a parameter's name hides.
fn explicit_body<'v>(
    op: &Operation,
    fields: Option<&(Vec<&str>, bool)>,
    key: &str,
    value: &'v Value,
) -> Option<&'v Map<String, Value>> {
    let (fields, _) = fields?;
    let free =
        key == "body" && !fields.contains(&"body") && !op.params.iter().any(|p| p.name == "body");
    free.then(|| value.as_object()).flatten()
}

fn known_names(op: &Operation) -> Vec<String> {
    let mut names: Vec<String> = op.params.iter().map(|p| p.name.clone()).collect();
    match op.body.as_ref().map(|b| &*b.shape) {
        Some(Shape::Object { fields, .. }) => names.extend(fields.iter().map(|f| f.name.clone())),
        Some(_) => names.push("body".into()),
        None => {}
    }
    names
}

/// Puts one parameter where the spec says. A path parameter must stay one segment of the
/// operation's own path: `.`, `..` and empty values would move the request elsewhere.
fn place(request: &mut ScriptRequest, param: &Param, value: &Value) -> Result<(), String> {
    let key = &param.name;
    match param.location {
        Location::Path => {
            let segment = encode::path_segment(key, value, param.style, param.explode);
            // A provider that decodes `%2F` or `%5C` before routing would see the parts of a
            // value as segments: none of them may be a dot segment either.
            let raw: Vec<String> = match value {
                Value::Array(items) => items.iter().map(encode::scalar).collect(),
                Value::Object(fields) => fields
                    .iter()
                    .flat_map(|(f, v)| [f.clone(), encode::scalar(v)])
                    .collect(),
                other => vec![encode::scalar(other)],
            };
            let dotted = raw.iter().any(|raw| {
                raw.split(['/', '\\'])
                    .any(|part| matches!(part, "." | ".."))
            });
            if matches!(segment.as_str(), "" | "." | "..") || dotted {
                return Err(format!(
                    "path parameter `{key}` may not be {}: it would leave the operation's path",
                    if segment.is_empty() {
                        "empty".to_owned()
                    } else {
                        format!("`{segment}`")
                    }
                ));
            }
            request.url = request.url.replace(&format!("{{{key}}}"), &segment);
        }
        Location::Query => {
            encode::query_pairs(key, value, param.style, param.explode, &mut request.query)
        }
        Location::Header => request
            .headers
            .push((key.clone(), encode::header_value(value, param.explode))),
    }
    Ok(())
}

/// Checks that `path`, as a URL resolves it, still has the shape of `template`: the same
/// number of segments and the same literal ones. Whatever a value held, the request is the
/// operation it is logged (and, for writes, approved) as.
fn stays_on_template(path: &str, template: &str) -> Result<(), String> {
    let resolved = url::Url::parse("http://sdkbox.invalid/")
        .and_then(|base| base.join(path.trim_start_matches('/')))
        .map_err(|e| format!("the path `{path}` is not valid: {e}"))?;
    let got: Vec<&str> = resolved.path().trim_start_matches('/').split('/').collect();
    let want: Vec<&str> = template.trim_start_matches('/').split('/').collect();
    let same = got.len() == want.len()
        && got
            .iter()
            .zip(&want)
            .all(|(g, w)| w.contains('{') || g == w);
    if same {
        Ok(())
    } else {
        Err(format!(
            "the parameters would send the request to `{}`, outside the operation's path `{template}`",
            resolved.path()
        ))
    }
}
