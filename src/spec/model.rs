//! What sdkbox knows of a provider after reading its spec: the operations the SDK exposes
//! and the docs index describes, and the schemas they use. Everything downstream reads this,
//! never the raw spec.

use std::sync::Arc;

use serde::Serialize;

/// One provider's API.
#[derive(Debug, Clone)]
pub struct Api {
    /// The spec's title.
    pub title: String,
    /// The spec's version string.
    pub version: String,
    /// Server URLs, variables filled with their defaults.
    pub servers: Vec<String>,
    /// How the provider expects credentials, as far as the spec says.
    pub auth: Vec<AuthHint>,
    /// Every operation that loaded.
    pub operations: Vec<Operation>,
    /// The named schemas, for the docs index.
    pub schemas: Vec<SchemaDoc>,
}

/// A credential scheme the spec declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", content = "name", rename_all = "lowercase")]
pub enum AuthHint {
    /// `Authorization: Bearer`.
    Bearer,
    /// `Authorization: Basic`.
    Basic,
    /// An API key in the named header.
    Header(String),
    /// An API key in the named query parameter.
    Query(String),
}

/// One operation, as the SDK and the docs see it.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The spec's `operationId` (or one derived from method and path, with a warning).
    pub id: String,
    /// HTTP method, upper case.
    pub method: String,
    /// Path template, as in the spec (`/v1/customers/{customer}`).
    pub path: String,
    /// SDK group: `api.<group>`.
    pub group: String,
    /// SDK method: `api.<group>.<name>(...)`.
    pub name: String,
    /// One-line summary (may be empty).
    pub summary: String,
    /// Longer description, markup stripped.
    pub description: String,
    /// The spec's tags.
    pub tags: Vec<String>,
    /// Path, query and header parameters.
    pub params: Vec<Param>,
    /// The request body, if any.
    pub body: Option<Body>,
    /// Shape of the success response body, if JSON.
    pub response: Option<Arc<Shape>>,
    /// The named schema the success response returns (a list's item schema), if any.
    pub resource: Option<String>,
    /// Whether the spec marks it deprecated.
    pub deprecated: bool,
    /// The spec's `x-sdkbox-policy` for it (`allow`, `approve` or `deny`), checked when the
    /// approval rules are built.
    pub policy: Option<String>,
    /// `group.method` as the spec named it and as its group's rename alone made it, when the
    /// provider file's `[names]` renamed it: a script written against those still reaches it.
    pub former: Vec<String>,
    /// The server the operation is served from when its spec names one of its own
    /// (`servers` on the operation or its path: Stripe's file uploads on files.stripe.com,
    /// GitHub's release assets on uploads.github.com): an absolute URL its path goes under.
    pub server: Option<String>,
}

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// In the path template.
    Path,
    /// In the query string.
    Query,
    /// In a request header.
    Header,
}

/// One parameter.
#[derive(Debug, Clone)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Where it goes.
    pub location: Location,
    /// Whether the call must give it.
    pub required: bool,
    /// Its type.
    pub shape: Arc<Shape>,
    /// Its description, markup stripped.
    pub description: String,
    /// How arrays and objects are written (`style`, defaulting as OpenAPI says: `form` in
    /// the query, `simple` in the path and headers).
    pub style: Style,
    /// Whether an array's items and an object's fields are written apart (`explode`: `true`
    /// by default for `form`, else `false`).
    pub explode: bool,
}

/// A parameter's `style`: how an array or object value is serialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `a=1&a=2` exploded, `a=1,2` not; an exploded object's fields are parameters of their
    /// own (query).
    Form,
    /// `a=1%202` (query arrays).
    SpaceDelimited,
    /// `a=1|2` (query arrays).
    PipeDelimited,
    /// `a[b]=1`, `a[]=1` (query objects; Stripe's nested keys).
    DeepObject,
    /// `1,2`, objects `b,1,c,2` or exploded `b=1,c=2` (path and headers).
    Simple,
    /// `.1.2` (path).
    Label,
    /// `;a=1;a=2` (path).
    Matrix,
}

/// How a request body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/json`.
    Json,
    /// `application/x-www-form-urlencoded`, nested keys as `a[b][0]=v`.
    Form,
    /// `multipart/form-data`.
    Multipart,
    /// Any other media type (`application/octet-stream`, `application/javascript`,
    /// `text/plain`): the body is passed whole, as a string, and sent as it is.
    Raw,
}

/// A request body.
#[derive(Debug, Clone)]
pub struct Body {
    /// How it is encoded.
    pub encoding: Encoding,
    /// The media type sent with it (the spec's, `*` wildcards as `application/octet-stream`).
    pub media_type: String,
    /// Whether the call must send it.
    pub required: bool,
    /// Its type; an object's fields are passed by name in the call.
    pub shape: Arc<Shape>,
    /// Multipart fields whose `encoding` says `style: deepObject` (Stripe's): an object there
    /// is nested pairs (`file_link_data[create]`); any other object is a JSON part, as
    /// OpenAPI says by default (Cloudflare's `metadata`).
    pub deep_objects: Vec<String>,
}

/// A type, summarised from JSON Schema: enough to validate calls and write signatures.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// Anything (no schema, or one sdkbox does not model).
    Any,
    /// A string, maybe limited to some values.
    String {
        /// Allowed values, when the schema lists them.
        values: Vec<String>,
    },
    /// Bytes: a string of `format: binary`, or a raw body of another media type than JSON,
    /// a form or multipart. A script gives a file (`Blob`, `File`, `Uint8Array`,
    /// `ArrayBuffer`) or a string.
    Bytes,
    /// An integer.
    Integer,
    /// A number.
    Number,
    /// A boolean.
    Boolean,
    /// `null`.
    Null,
    /// An array of items.
    Array(Arc<Shape>),
    /// An object.
    Object {
        /// Its known fields, in spec order.
        fields: Vec<Field>,
        /// The type of other keys, when allowed.
        additional: Option<Arc<Shape>>,
    },
    /// One of several types (`oneOf`, `anyOf`, nullable).
    OneOf(Vec<Arc<Shape>>),
    /// A named schema met again while it was being read (a recursive type).
    Recursive(String),
}

/// A field of an object shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its type.
    pub shape: Arc<Shape>,
    /// Whether it must be present.
    pub required: bool,
    /// Its description, markup stripped and shortened.
    pub description: String,
    /// Set by the provider only (`readOnly`): never sent in a request.
    pub read_only: bool,
    /// Sent only (`writeOnly`, a password): never in a response.
    pub write_only: bool,
}

impl Operation {
    /// Body fields named like one of the operation's parameters (GitHub's rename of a
    /// variable: the path's `name` and the new one): a call passes them under `body`.
    pub fn body_fields_named_like_params(&self) -> Vec<&str> {
        match self.body.as_ref().map(|b| &*b.shape) {
            Some(Shape::Object { fields, .. }) => fields
                .iter()
                .map(|f| f.name.as_str())
                .filter(|name| self.params.iter().any(|p| p.name == *name))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Shapes as requests and responses carry them, each shared part rewritten once for the
/// whole spec (a schema used by a hundred operations is walked once, and a part with
/// nothing to change stays the same `Arc`).
#[derive(Default)]
pub struct Views {
    requests: Rewritten,
    responses: Rewritten,
}

/// Parts rewritten already, by address; the original is kept so its address is not reused.
type Rewritten = std::collections::HashMap<*const Shape, (Arc<Shape>, Arc<Shape>)>;

impl Views {
    /// `shape` as a request carries it: read-only fields are never required (an object's
    /// `id` the provider sets), though still accepted: specs mark fields read-only that
    /// some operations take (Cloudflare's account update, its `id`).
    pub fn for_requests(&mut self, shape: &Arc<Shape>) -> Arc<Shape> {
        let optional = |f: &Field| {
            Some(Field {
                required: f.required && !f.read_only,
                ..f.clone()
            })
        };
        rewrite(shape, optional, &mut self.requests)
    }

    /// `shape` as a response carries it: without write-only fields.
    pub fn for_responses(&mut self, shape: &Arc<Shape>) -> Arc<Shape> {
        let kept = |f: &Field| (!f.write_only).then(|| f.clone());
        rewrite(shape, kept, &mut self.responses)
    }
}

/// `shape` with each field as `field` makes it (or left out) at every depth.
fn rewrite(
    shape: &Arc<Shape>,
    field: fn(&Field) -> Option<Field>,
    done: &mut Rewritten,
) -> Arc<Shape> {
    let key = Arc::as_ptr(shape);
    if let Some((_, rewritten)) = done.get(&key) {
        return rewritten.clone();
    }
    let same = |a: &Arc<Shape>, b: &Arc<Shape>| Arc::ptr_eq(a, b);
    let rewritten = match &**shape {
        Shape::Array(items) => {
            let new = rewrite(items, field, done);
            (!same(&new, items)).then(|| Arc::new(Shape::Array(new)))
        }
        Shape::OneOf(shapes) => {
            let new: Vec<Arc<Shape>> = shapes.iter().map(|s| rewrite(s, field, done)).collect();
            let changed = new.iter().zip(shapes).any(|(n, s)| !same(n, s));
            changed.then(|| Arc::new(Shape::OneOf(new)))
        }
        Shape::Object { fields, additional } => {
            let new_fields: Vec<Field> = fields
                .iter()
                .filter_map(field)
                .map(|f| Field {
                    shape: rewrite(&f.shape, field, done),
                    ..f
                })
                .collect();
            let new_additional = additional.as_ref().map(|a| rewrite(a, field, done));
            // Compared by name, flag and address, never by walking the shapes.
            let changed = new_fields.len() != fields.len()
                || new_fields.iter().zip(fields).any(|(n, f)| {
                    n.name != f.name || n.required != f.required || !same(&n.shape, &f.shape)
                })
                || match (&new_additional, additional) {
                    (Some(n), Some(a)) => !same(n, a),
                    _ => false,
                };
            changed.then(|| {
                Arc::new(Shape::Object {
                    fields: new_fields,
                    additional: new_additional,
                })
            })
        }
        _ => None,
    };
    let rewritten = rewritten.unwrap_or_else(|| shape.clone());
    done.insert(key, (shape.clone(), rewritten.clone()));
    rewritten
}

/// A named schema, for the docs index.
#[derive(Debug, Clone)]
pub struct SchemaDoc {
    /// Its name under `components/schemas`.
    pub name: String,
    /// Its description, markup stripped.
    pub description: String,
    /// Its type.
    pub shape: Arc<Shape>,
}

/// Whether a media type is text a person (or a script) reads as such: `text/*`, JSON, XML,
/// JavaScript, forms, YAML, CSV, HTML, GraphQL, with any parameters. What is not is bytes: an
/// SDK call's file, a summarised body in an approval, a returned file sent as a blob. The
/// prelude's `TEXT_TYPE` (bootstrap.js) says the same for responses.
pub fn is_text_media_type(media_type: &str) -> bool {
    let lower = media_type.to_ascii_lowercase();
    lower.starts_with("text/")
        || [
            "json",
            "xml",
            "javascript",
            "ecmascript",
            "x-www-form-urlencoded",
            "yaml",
            "csv",
            "graphql",
            "html",
        ]
        .iter()
        .any(|t| lower.contains(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, read_only: bool, write_only: bool) -> Field {
        Field {
            name: name.into(),
            shape: Arc::new(Shape::String { values: Vec::new() }),
            required: true,
            description: String::new(),
            read_only,
            write_only,
        }
    }

    #[test]
    fn views_rewrite_what_they_must_and_share_the_rest() {
        let plain = Arc::new(Shape::Object {
            fields: vec![field("name", false, false)],
            additional: None,
        });
        let flagged = Arc::new(Shape::Array(Arc::new(Shape::Object {
            fields: vec![field("id", true, false), field("password", false, true)],
            additional: None,
        })));
        let mut views = Views::default();
        // Nothing to change: the same shape, not a copy.
        assert!(Arc::ptr_eq(&views.for_requests(&plain), &plain));
        assert!(Arc::ptr_eq(&views.for_responses(&plain), &plain));
        let Shape::Array(request) = &*views.for_requests(&flagged) else {
            panic!()
        };
        let Shape::Object { fields, .. } = &**request else {
            panic!()
        };
        assert_eq!(
            fields
                .iter()
                .map(|f| (f.name.as_str(), f.required))
                .collect::<Vec<_>>(),
            [("id", false), ("password", true)]
        );
        let Shape::Array(response) = &*views.for_responses(&flagged) else {
            panic!()
        };
        let Shape::Object { fields, .. } = &**response else {
            panic!()
        };
        assert_eq!(fields.len(), 1);
        // Asked again: the rewritten part once made.
        assert!(Arc::ptr_eq(
            &views.for_requests(&flagged),
            &views.for_requests(&flagged)
        ));
    }
}
