//! Reading a provider's OpenAPI spec (3.0 or 3.1, JSON or YAML, from a file or a URL) into
//! the [`Api`] model that the SDK and the docs index are built from.
//!
//! Invariants: only this module reads raw specs; nothing on the request path parses one.
//! A broken operation is a warning that names its place, never a failure of the whole spec.

mod cache;
mod model;
mod naming;
mod operations;
mod schema;
mod source;
mod text;

pub use model::{
    Api, AuthHint, Body, Encoding, Field, Location, Operation, Param, SchemaDoc, Shape, Style,
    is_text_media_type,
};
pub use naming::{apply_names, camel, singular, words};
pub use text::{first_sentence, plain, shorten};

use serde_json::Value;
use thiserror::Error;

/// A spec that cannot be used at all.
#[derive(Debug, Error)]
pub enum SpecError {
    /// The file or URL could not be read.
    #[error("cannot read the spec {source_name}: {reason}")]
    Read {
        /// The path or URL.
        source_name: String,
        /// Why.
        reason: String,
    },
    /// The text is neither valid JSON nor valid YAML.
    #[error("cannot parse the spec {source_name}: {reason}")]
    Parse {
        /// The path or URL.
        source_name: String,
        /// The parser's message, with its position.
        reason: String,
    },
    /// A Swagger 2.0 document.
    #[error(
        "{source_name} is a Swagger {version} document; sdkbox reads OpenAPI 3.0 and 3.1 (convert it, e.g. with swagger2openapi)"
    )]
    Swagger2 {
        /// The path or URL.
        source_name: String,
        /// Its `swagger` field.
        version: String,
    },
    /// An OpenAPI version other than 3.x.
    #[error("{source_name} declares OpenAPI {version}; sdkbox reads OpenAPI 3.0 and 3.1")]
    Version {
        /// The path or URL.
        source_name: String,
        /// Its `openapi` field.
        version: String,
    },
    /// Valid JSON or YAML, but not an API description.
    #[error("{source_name} is not an OpenAPI document: it has no `openapi` field")]
    NotOpenApi {
        /// The path or URL.
        source_name: String,
    },
    /// Larger than sdkbox reads, in some way (bytes, nesting, operations).
    #[error("the spec {source_name} is too large to read: {what}")]
    TooLarge {
        /// The path or URL.
        source_name: String,
        /// What is too large, against which bound.
        what: String,
    },
}

/// The largest spec read, in bytes (GitHub's, the largest public one here, is 13 MB).
pub const MAX_SPEC_BYTES: usize = 64 * 1024 * 1024;

/// The most operations a spec may have (Cloudflare's 1,533 is the most here).
pub const MAX_OPERATIONS: usize = 20_000;

/// Something in the spec sdkbox had to skip or guess, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecWarning {
    /// Where in the spec: `GET /v1/things` or a JSON path.
    pub place: String,
    /// What happened.
    pub message: String,
}

impl SpecWarning {
    fn new(place: &str, message: &str) -> Self {
        Self {
            place: place.to_owned(),
            message: message.to_owned(),
        }
    }
}

impl std::fmt::Display for SpecWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.place, self.message)
    }
}

/// A loaded spec.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The model.
    pub api: Api,
    /// What was skipped or guessed.
    pub warnings: Vec<SpecWarning>,
}

/// Loads the spec at `source`: a file path or an http(s) URL.
pub async fn load(source: &str) -> Result<Spec, SpecError> {
    load_cached(source, cache::default_dir().as_deref()).await
}

/// Loads a spec, keeping a spec fetched by URL in `cache` (and falling back to it when the
/// fetch fails).
pub async fn load_cached(source: &str, cache: Option<&std::path::Path>) -> Result<Spec, SpecError> {
    let (document, _) = source::read(source, cache).await?;
    from_document(source, &document)
}

/// Loads a spec from its text (JSON or YAML); `name` is used in messages.
pub fn parse(name: &str, text: &str) -> Result<Spec, SpecError> {
    let document = source::parse(name, text)?;
    source::check_version(name, &document)?;
    from_document(name, &document)
}

fn from_document(name: &str, root: &Value) -> Result<Spec, SpecError> {
    let count = operations::count(root);
    if count > MAX_OPERATIONS {
        return Err(SpecError::TooLarge {
            source_name: name.to_owned(),
            what: format!("{count} operations, over {MAX_OPERATIONS}"),
        });
    }
    let mut warnings = Vec::new();
    let mut schemas = schema::Schemas::new(root);
    let mut operations = operations::read(root, &mut schemas, &mut warnings);
    naming::assign(&mut operations);
    let info = root.get("info");
    let field = |key: &str| {
        info.and_then(|i| i.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let schema_docs = schema_docs(root, &mut schemas, &mut warnings);
    Ok(Spec {
        api: Api {
            title: field("title"),
            version: field("version"),
            servers: servers(root),
            auth: auth_hints(root),
            operations,
            schemas: schema_docs,
        },
        warnings,
    })
}

fn servers(root: &Value) -> Vec<String> {
    let Some(servers) = root.get("servers").and_then(Value::as_array) else {
        return Vec::new();
    };
    servers
        .iter()
        .filter_map(|server| {
            let mut url = server.get("url")?.as_str()?.to_owned();
            if let Some(vars) = server.get("variables").and_then(Value::as_object) {
                for (name, var) in vars {
                    if let Some(default) = var.get("default").and_then(Value::as_str) {
                        url = url.replace(&format!("{{{name}}}"), default);
                    }
                }
            }
            Some(url)
        })
        .collect()
}

/// The credential schemes the spec declares, the one a single secret works with first: a
/// scheme some security requirement names alone (Cloudflare's token, not half of its
/// e-mail and key pair), bearer before others, then the rest in the spec's order.
fn auth_hints(root: &Value) -> Vec<AuthHint> {
    let Some(schemes) = root
        .pointer("/components/securitySchemes")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let requirements = std::iter::once(root.get("security"))
        .chain(
            root.get("paths")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|paths| paths.values())
                .filter_map(Value::as_object)
                .flat_map(|item| item.values())
                .map(|op| op.get("security")),
        )
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_object);
    let mut alone: Vec<&str> = Vec::new();
    for requirement in requirements {
        if let [name] = requirement.keys().map(String::as_str).collect::<Vec<_>>()[..]
            && !alone.contains(&name)
        {
            alone.push(name);
        }
    }
    let mut hints: Vec<(u8, AuthHint)> = schemes
        .iter()
        .filter_map(|(name, scheme)| {
            let get = |k: &str| scheme.get(k).and_then(Value::as_str);
            let hint = match (
                get("type")?,
                get("scheme").map(str::to_ascii_lowercase).as_deref(),
                get("in"),
            ) {
                ("http", Some("bearer"), _) => AuthHint::Bearer,
                ("http", Some("basic"), _) => AuthHint::Basic,
                ("apiKey", _, Some("header")) => AuthHint::Header(get("name")?.to_owned()),
                ("apiKey", _, Some("query")) => AuthHint::Query(get("name")?.to_owned()),
                ("oauth2" | "openIdConnect", _, _) => AuthHint::Bearer,
                _ => return None,
            };
            let rank = match (alone.contains(&name.as_str()) || alone.is_empty(), &hint) {
                (true, AuthHint::Bearer) => 0,
                (true, _) => 1,
                (false, _) => 2,
            };
            Some((rank, hint))
        })
        .collect();
    hints.sort_by_key(|(rank, _)| *rank);
    hints.into_iter().map(|(_, hint)| hint).collect()
}

fn schema_docs(
    root: &Value,
    schemas: &mut schema::Schemas,
    warnings: &mut Vec<SpecWarning>,
) -> Vec<SchemaDoc> {
    let Some(named) = root
        .pointer("/components/schemas")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut docs = Vec::new();
    for (name, raw) in named {
        let reference = serde_json::json!({ "$ref": format!("#/components/schemas/{}", name.replace('~', "~0").replace('/', "~1")) });
        match schemas.shape(&reference) {
            Ok(shape) => docs.push(SchemaDoc {
                name: name.clone(),
                description: raw
                    .get("description")
                    .and_then(Value::as_str)
                    .map(text::plain)
                    .unwrap_or_default(),
                shape,
            }),
            Err(e) => warnings.push(SpecWarning::new(
                &format!("components.schemas.{name}"),
                &e.0,
            )),
        }
    }
    docs
}
