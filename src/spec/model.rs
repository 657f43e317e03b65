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

impl Shape {
    /// The shape as a request carries it: read-only fields are never required (an object's
    /// `id` the provider sets), though still accepted: specs mark fields read-only that
    /// some operations take (Cloudflare's account update, its `id`).
    pub fn for_requests(self: &Arc<Self>) -> Arc<Self> {
        let optional = |f: &Field| {
            Some(Field {
                required: f.required && !f.read_only,
                ..f.clone()
            })
        };
        self.rewrite(optional, &mut std::collections::HashMap::new())
    }

    /// The shape as a response carries it: without write-only fields.
    pub fn for_responses(self: &Arc<Self>) -> Arc<Self> {
        let kept = |f: &Field| (!f.write_only).then(|| f.clone());
        self.rewrite(kept, &mut std::collections::HashMap::new())
    }

    /// This shape with each field as `field` makes it (or left out) at every depth; each
    /// shared part rewritten once (`done`, by address), so a schema used in many places
    /// costs one pass.
    fn rewrite(
        self: &Arc<Self>,
        field: fn(&Field) -> Option<Field>,
        done: &mut std::collections::HashMap<*const Shape, Arc<Shape>>,
    ) -> Arc<Self> {
        let key = Arc::as_ptr(self);
        if let Some(shape) = done.get(&key) {
            return shape.clone();
        }
        let rewritten = match &**self {
            Shape::Array(items) => Arc::new(Shape::Array(items.rewrite(field, done))),
            Shape::OneOf(shapes) => Arc::new(Shape::OneOf(
                shapes.iter().map(|s| s.rewrite(field, done)).collect(),
            )),
            Shape::Object { fields, additional } => Arc::new(Shape::Object {
                fields: fields
                    .iter()
                    .filter_map(field)
                    .map(|f| Field {
                        shape: f.shape.rewrite(field, done),
                        ..f
                    })
                    .collect(),
                additional: additional.as_ref().map(|a| a.rewrite(field, done)),
            }),
            _ => self.clone(),
        };
        done.insert(key, rewritten.clone());
        rewritten
    }
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
