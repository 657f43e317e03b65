//! The two tools: their input types (whose doc comments are the schema the model reads),
//! their output schemas, and how results become tool results. What the model caused is a
//! tool result with `isError`; only server faults are protocol errors.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::json;

use crate::sandbox::Outcome;
use crate::search::{Detail, Results};

/// A tool input whose deserialization errors name the argument at fault ("`code`: invalid
/// type: integer `42`, expected a string"): serde alone says only what it expected, and the
/// model needs to know which argument to fix. Its schema is that of `T`.
#[derive(Debug)]
pub struct Checked<T>(pub T);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Checked<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        serde_path_to_error::deserialize(value)
            .map(Checked)
            .map_err(|error| {
                let path = error.path().to_string();
                match path.as_str() {
                    "." => D::Error::custom(error.inner()),
                    _ => D::Error::custom(format!("`{path}`: {}", error.inner())),
                }
            })
    }
}

impl<T: JsonSchema> JsonSchema for Checked<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }
}

/// `search_docs` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchDocs {
    /// What you need, in plain words: "refund an order", "list a customer's orders".
    pub query: String,
    /// Hits to return, 1-20 (default 5).
    pub limit: Option<usize>,
    /// "compact" (default) or "full": adds the TypeScript signature, response shape and an example.
    pub detail: Option<Detail>,
    /// Only operations with this HTTP method.
    pub method: Option<String>,
    /// Only operations of this group (`api.<group>`).
    pub group: Option<String>,
}

/// `execute` input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Execute {
    /// TypeScript: the body of an async function; `return` gives the result.
    pub code: String,
    /// Time limit in milliseconds (default and maximum: the server's limit).
    pub timeout_ms: Option<u64>,
}

/// The output schema of `search_docs`.
pub fn search_output_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "hits": {"type": "array", "items": {"type": "object", "properties": {
                "kind": {"type": "string"}, "id": {"type": "string"}, "text": {"type": "string"}}}},
            "hint": {"type": "string"}
        },
        "required": ["hits"]
    }))
}

/// The output schema of `execute`.
pub fn execute_output_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "result": {},
            "error": {"type": "object"},
            "console": {"type": "array"},
            "http": {"type": "array"}
        },
        "required": ["ok", "result"]
    }))
}

fn schema(value: serde_json::Value) -> Arc<JsonObject> {
    match value {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// Search results as a tool result: structured, with the hits as text too.
pub fn search_result(results: &Results) -> CallToolResult {
    let mut result = CallToolResult::structured(json!({
        "hits": results.hits.iter().map(|h| json!({"kind": h.kind, "id": h.id, "text": h.text})).collect::<Vec<_>>(),
        "hint": results.hint,
    }));
    result.content = vec![rmcp::model::ContentBlock::text(results.to_text())];
    result
}

/// An execution's outcome as a tool result: `isError` when the code failed.
pub fn execute_result(outcome: &Outcome) -> CallToolResult {
    let value = serde_json::to_value(outcome).unwrap_or_else(|e| json!({"ok": false, "result": null, "error": {"kind": "internal", "message": e.to_string()}}));
    let mut result = if outcome.ok {
        CallToolResult::structured(value)
    } else {
        CallToolResult::structured_error(value)
    };
    result.content = vec![rmcp::model::ContentBlock::text(text(outcome))];
    result
}

/// The outcome as text for clients that read only text: the result (or error) first.
fn text(outcome: &Outcome) -> String {
    let mut out = String::new();
    match &outcome.error {
        None => out.push_str(&serde_json::to_string(&outcome.result).unwrap_or_default()),
        Some(error) => {
            let kind = serde_json::to_value(error.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            out.push_str(&format!("error ({kind}): {}", error.message));
            if let Some(excerpt) = &error.excerpt {
                out.push_str(&format!("\n{excerpt}"));
            }
            if let Some(stack) = &error.stack {
                out.push_str(&format!("\n{stack}"));
            }
        }
    }
    if let Some(truncated) = &outcome.truncated {
        out.push_str(&format!(
            "\n[result cut from {} to {} characters]",
            truncated.original_chars, truncated.limit_chars
        ));
    }
    if !outcome.console.is_empty() {
        out.push_str("\nconsole:");
        for line in &outcome.console {
            out.push_str(&format!("\n  [{}] {}", line.level, line.text));
        }
    }
    if !outcome.http.is_empty() {
        out.push_str("\nhttp:");
        for call in &outcome.http {
            let status = call
                .status
                .map_or_else(|| call.error.clone().unwrap_or_default(), |s| s.to_string());
            out.push_str(&format!(
                "\n  {} {} -> {status} ({} ms)",
                call.method, call.url, call.duration_ms
            ));
        }
    }
    out
}
