//! The two tools: their input types (whose doc comments are the schema the model reads),
//! their output schemas, and how results become tool results. What the model caused is a
//! tool result with `isError`; only server faults are protocol errors.

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::json;

use crate::sandbox::{ErrorKind, Outcome};
use crate::search::{Detail, Hit, MAX_LIMIT, Results};

/// A tool input whose deserialization errors name the argument at fault ("`code`: invalid
/// type: integer `42`, expected a string"): serde alone says only what it expected, and the
/// model needs to know which argument to fix.
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

/// `search_docs` input; [`search_input_schema`] is what the model reads about it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchDocs {
    /// What to look for.
    pub query: String,
    /// Hits to return.
    pub limit: Option<usize>,
    /// How much each hit shows.
    pub detail: Option<Detail>,
    /// Only operations with this HTTP method.
    pub method: Option<String>,
    /// Only operations of this group and the groups nested in it.
    pub group: Option<String>,
}

/// `execute` input; [`execute_input_schema`] is what the model reads about it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Execute {
    /// The model's TypeScript.
    pub code: String,
    /// A lower time limit than the server's.
    pub timeout_ms: Option<u64>,
    /// Send reads, not writes: each write gets a placeholder and is listed in the plan.
    pub dry_run: Option<bool>,
}

// The schemas are written by hand: they are what every client validates against and what
// the model reads, so they say exactly what is sent, portably (one `type` per schema, no
// `$ref`, no `null` for an absent field: optional fields are omitted) and compactly (tools/list
// stays under 1,000 tokens).

/// The input schema of `search_docs`.
pub fn search_input_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What you need, in plain words: \"refund an order\", \"list a customer's orders\"."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Hits to return (default 5)."},
            "detail": {"type": "string", "enum": ["compact", "full"], "description": "\"full\" adds the TypeScript signature, response shape and an example."},
            "method": {"type": "string", "description": "Only operations with this HTTP method."},
            "group": {"type": "string", "description": "Only operations of this group (and groups nested in it)."}
        },
        "required": ["query"],
        "additionalProperties": false
    }))
}

/// The input schema of `execute`.
pub fn execute_input_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "TypeScript: the body of an async function; `return` gives the result."},
            "timeout_ms": {"type": "integer", "minimum": 0, "description": "Time limit in milliseconds (default, 0 and maximum: the server's limit)."},
            "dry_run": {"type": "boolean", "description": "Send reads, not writes: writes get placeholders and are listed in `plan`."}
        },
        "required": ["code"],
        "additionalProperties": false
    }))
}

/// The output schema of `search_docs`: exactly what [`search_result`] sends, since the official
/// clients refuse a result that does not validate.
pub fn search_output_schema() -> Arc<JsonObject> {
    let text = json!({"type": "string"});
    schema(json!({
        "type": "object",
        "properties": {
            "hits": {"type": "array", "items": {"type": "object", "properties": {
                "kind": {"type": "string", "enum": ["operation", "schema", "guide"]},
                "id": text, "text": text},
                "required": ["kind", "id", "text"]}},
            "hint": text
        },
        "required": ["hits"]
    }))
}

/// The output schema of `execute`: the serialised [`Outcome`], on success and on every kind of
/// failure.
pub fn execute_output_schema() -> Arc<JsonObject> {
    let text = json!({"type": "string"});
    let count = json!({"type": "integer"});
    let any =
        ["object", "array", "string", "number", "boolean", "null"].map(|t| json!({"type": t}));
    schema(json!({
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "result": {"anyOf": any},
            "truncated": {"type": "object"},
            "error": {"type": "object", "properties": {
                "kind": {"type": "string", "enum": ErrorKind::ALL.map(ErrorKind::as_str)},
                "message": text},
                "required": ["kind", "message"]},
            "console": {"type": "array", "items": {"type": "object"}},
            "console_dropped": count,
            "http": {"type": "array", "items": {"type": "object"}},
            "http_dropped": count,
            "plan": {"type": "array"},
            "plan_dropped": count,
            "approvals": {"type": "array"},
            "warnings": {"type": "array"},
            "files": {"type": "array"},
            "duration_ms": count
        },
        "required": ["ok", "result", "console", "http", "duration_ms"]
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
    // The structured hits and their text rendering each get half of one answer: hits are
    // cut, then the last dropped, until both fit.
    let half = crate::answer::MAX_ANSWER_BYTES / 2 - 1_024;
    let per_hit = half / results.hits.len().max(1);
    let mut hits: Vec<Hit> = results
        .hits
        .iter()
        .map(|h| Hit {
            text: crate::egress::cut(&h.text, per_hit / 2),
            ..h.clone()
        })
        .collect();
    let structured = |hits: &[Hit]| {
        let mut structured = json!({
            "hits": hits.iter().map(|h| json!({"kind": h.kind, "id": h.id, "text": h.text})).collect::<Vec<_>>(),
        });
        if let Some(hint) = &results.hint {
            structured["hint"] = json!(hint);
        }
        structured
    };
    while hits.len() > 1 && structured(&hits).to_string().len() > half {
        hits.pop();
    }
    let shown = Results {
        hits,
        hint: results.hint.clone(),
    };
    let mut result = CallToolResult::structured(structured(&shown.hits));
    result.content = vec![rmcp::model::ContentBlock::text(shown.to_text())];
    result
}

/// A search the model has to change or retry, as a tool error that validates against the
/// output schema: no hits, and the message as the hint.
pub fn search_error(message: &str) -> CallToolResult {
    let mut result = CallToolResult::structured_error(json!({"hits": [], "hint": message}));
    result.content = vec![rmcp::model::ContentBlock::text(message.to_owned())];
    result
}

/// An execution's outcome as a tool result: `isError` when the code failed. The outcome was
/// held to half of `max_bytes` when it was finished; its text rendering is held to the other
/// half, counted as the JSON string a client receives.
pub fn execute_result(outcome: &Outcome, max_bytes: usize) -> CallToolResult {
    let value = serde_json::to_value(outcome).unwrap_or_else(|e| json!({"ok": false, "result": null, "console": [], "http": [], "duration_ms": 0, "error": {"kind": "internal", "message": e.to_string()}}));
    let mut result = if outcome.ok {
        CallToolResult::structured(value)
    } else {
        CallToolResult::structured_error(value)
    };
    let budget = max_bytes.saturating_sub(crate::sandbox::OUTPUT_ENVELOPE) / 2;
    result.content = vec![rmcp::model::ContentBlock::text(fit_text(
        text(outcome),
        budget,
    ))];
    result
}

/// `text` cut so that it takes at most `budget` bytes as a JSON string, saying so.
fn fit_text(text: String, budget: usize) -> String {
    let size = |t: &str| serde_json::to_string(t).map_or(usize::MAX, |j| j.len());
    if size(&text) <= budget {
        return text;
    }
    let note = "\n[output cut: it was larger than this server sends]";
    let (mut low, mut high) = (0, text.len());
    while low < high {
        let mid = (low + high).div_ceil(2);
        let end = (0..=mid)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        if size(&text[..end]) + note.len() + 8 <= budget {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    let end = (0..=low)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}{note}", &text[..end])
}

/// Lines after the first, indented under their item: only sdkbox writes at column 0 (and at
/// the items' own indent), so no console line or message can forge a section.
fn indented(text: &str, indent: &str) -> String {
    text.replace('\r', "\\r")
        .replace('\n', &format!("\n{indent}"))
}

/// The outcome as text for clients that read only text: the result (or error) first.
fn text(outcome: &Outcome) -> String {
    let mut out = String::new();
    match &outcome.error {
        None => out.push_str(&serde_json::to_string(&outcome.result).unwrap_or_default()),
        Some(error) => {
            let kind = error.kind.as_str();
            out.push_str(&format!(
                "error ({kind}): {}",
                indented(&error.message, "  ")
            ));
            if let Some(excerpt) = &error.excerpt {
                out.push_str(&format!("\n  {}", indented(excerpt, "  ")));
            }
            if let Some(stack) = &error.stack {
                out.push_str(&format!("\n  {}", indented(stack, "  ")));
            }
        }
    }
    if let Some(truncated) = &outcome.truncated {
        out.push_str(&format!(
            "\n[result cut from {} to {} characters]",
            truncated.original_chars, truncated.limit_chars
        ));
    }
    if !outcome.console.is_empty() || outcome.console_dropped > 0 {
        out.push_str("\nconsole:");
        for line in &outcome.console {
            out.push_str(&format!(
                "\n  [{}] {}",
                line.level,
                indented(&line.text, "    ")
            ));
        }
        if outcome.console_dropped > 0 {
            out.push_str(&format!(
                "\n  ({} more lines dropped)",
                outcome.console_dropped
            ));
        }
    }
    if !outcome.files.is_empty() {
        out.push_str("\nfiles (sent as contents of this result):");
        for file in &outcome.files {
            let line = format!("{} ({}, {} bytes)", file.name, file.media_type, file.size);
            match &file.withheld {
                None => out.push_str(&format!("\n  {}", indented(&line, "    "))),
                Some(why) => out.push_str(&format!("\n  {}: {}", indented(&line, "    "), why)),
            }
        }
    }
    if !outcome.warnings.is_empty() {
        out.push_str("\ntype check warnings (the code ran):");
        for warning in &outcome.warnings {
            out.push_str(&format!("\n  {}", indented(warning, "    ")));
        }
    }
    if !outcome.approvals.is_empty() {
        out.push_str("\napprovals needed:");
        for message in &outcome.approvals {
            out.push_str(&format!("\n  {}", indented(message, "    ")));
        }
    }
    if !outcome.plan.is_empty() || outcome.plan_dropped > 0 {
        out.push_str("\nplan (dry run: these writes were not sent):");
        for planned in &outcome.plan {
            let request = &planned.request;
            let operation = request.operation.as_deref().unwrap_or("-");
            let body = request.body.as_deref().unwrap_or("");
            let line = format!(
                "{operation}: {} {} [{}] {body}",
                request.method, request.url, planned.policy
            );
            out.push_str(&format!("\n  {}", indented(line.trim_end(), "    ")));
        }
        if outcome.plan_dropped > 0 {
            out.push_str(&format!("\n  ({} more writes)", outcome.plan_dropped));
        }
    }
    if !outcome.http.is_empty() || outcome.http_dropped > 0 {
        out.push_str("\nhttp:");
        for call in &outcome.http {
            let status = call
                .status
                .map_or_else(|| call.error.clone().unwrap_or_default(), |s| s.to_string());
            let policy = call.policy.as_ref().map_or(String::new(), |note| {
                let by = note
                    .by
                    .as_deref()
                    .map_or(String::new(), |by| format!(" by {by}"));
                format!(" [{}: {}{by}]", note.rule, note.decision.as_str())
            });
            let line = format!(
                "{} {} -> {status} ({} ms){policy}",
                call.method, call.url, call.duration_ms
            );
            out.push_str(&format!("\n  {}", indented(&line, "    ")));
        }
        if outcome.http_dropped > 0 {
            out.push_str(&format!(
                "\n  ({} more calls not listed)",
                outcome.http_dropped
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::{Note, Planned, Rule, Shown, Verdict};
    use crate::egress::CallRecord;
    use crate::sandbox::{ConsoleLine, ExecError, Timings, Truncation};
    use crate::search::Results;

    fn validator(schema: &JsonObject) -> jsonschema::Validator {
        jsonschema::draft202012::new(&serde_json::Value::Object(schema.clone()))
            .unwrap_or_else(|e| panic!("the schema is not valid JSON Schema: {e}"))
    }

    fn assert_valid(validator: &jsonschema::Validator, result: &CallToolResult) {
        let structured = result.structured_content.as_ref().unwrap_or_else(|| {
            panic!("no structuredContent: {result:?}");
        });
        let errors: Vec<String> = validator
            .iter_errors(structured)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:?}\n{structured}");
    }

    /// An outcome with every optional field set, so each one is checked against the schema.
    fn full_outcome(kind: Option<ErrorKind>) -> Outcome {
        Outcome {
            ok: kind.is_none(),
            result: json!({"nested": [1, "two", null, {"x": true}]}),
            truncated: Some(Truncation {
                original_chars: 100_000,
                limit_chars: 24_000,
            }),
            error: kind.map(|kind| ExecError {
                kind,
                name: Some("TypeError".into()),
                message: "x is not a function".into(),
                line: Some(2),
                column: Some(7),
                excerpt: Some("2 | x()\n  |   ^".into()),
                stack: Some("at main (code.ts:2:7)".into()),
            }),
            console: vec![ConsoleLine {
                level: "warn".into(),
                text: "careful".into(),
            }],
            console_dropped: 3,
            http_dropped: 2,
            http: vec![CallRecord {
                method: "GET".into(),
                url: "https://api.example.com/v1/x".into(),
                operation: Some("orders.list".into()),
                status: Some(200),
                duration_ms: 4,
                bytes: 120,
                error: Some("refused".into()),
                dropped_headers: vec!["authorization".into()],
                policy: Some(Note {
                    rule: Rule::Approve,
                    decision: Verdict::AwaitingApproval,
                    because: "writes need approval by default".into(),
                    by: Some("the user".into()),
                    channel: Some("approval page".into()),
                }),
            }],
            plan: vec![Planned {
                request: Shown {
                    operation: Some("orders.create".into()),
                    method: "POST".into(),
                    url: "https://api.example.com/v1/orders".into(),
                    headers: vec!["x-tenant: t1".into()],
                    body: Some("{}".into()),
                    body_bytes: 0,
                    body_lines: 1,
                },
                policy: Rule::Approve,
            }],
            plan_dropped: 1,
            approvals: vec!["open http://127.0.0.1:1/approve/x".into()],
            warnings: vec!["1:5 TS2339: Property 'x' does not exist on type 'Order'.".into()],
            files: vec![
                crate::sandbox::ReturnedFile {
                    name: "chart.png".into(),
                    media_type: "image/png".into(),
                    size: 3,
                    withheld: None,
                    bytes: vec![1, 2, 3],
                },
                crate::sandbox::ReturnedFile {
                    name: "leak.bin".into(),
                    media_type: "application/octet-stream".into(),
                    size: 9,
                    withheld: Some("withheld".into()),
                    bytes: Vec::new(),
                },
            ],
            duration_ms: 9,
            timings: Timings::default(),
        }
    }

    #[test]
    fn every_execute_outcome_matches_the_declared_schema() {
        let validator = validator(&execute_output_schema());
        assert_valid(&validator, &execute_result(&full_outcome(None), 64_000));
        for kind in ErrorKind::ALL {
            let result = execute_result(&full_outcome(Some(kind)), 64_000);
            assert_eq!(result.is_error, Some(true));
            assert_valid(&validator, &result);
            let bare = Outcome {
                truncated: None,
                console: Vec::new(),
                console_dropped: 0,
                http: Vec::new(),
                http_dropped: 0,
                result: serde_json::Value::Null,
                ..full_outcome(None)
            };
            let bare = Outcome {
                ok: false,
                error: Some(ExecError::new(kind, "failed")),
                ..bare
            };
            assert_valid(&validator, &execute_result(&bare, 64_000));
        }
    }

    /// The hand-written input schemas and the structs the server reads agree: every
    /// declared property is accepted, nothing undeclared is, and the required ones are required.
    #[test]
    fn input_schemas_describe_exactly_what_the_inputs_accept() {
        fn check<T: DeserializeOwned + std::fmt::Debug>(
            schema: &JsonObject,
            sample: serde_json::Value,
        ) {
            let validator = validator(schema);
            assert!(validator.is_valid(&sample), "{sample}");
            let parsed: Result<Checked<T>, _> = serde_json::from_value(sample.clone());
            assert!(parsed.is_ok(), "{sample}: {parsed:?}");
            let declared: Vec<&String> = schema["properties"]
                .as_object()
                .map(|p| p.keys().collect())
                .unwrap_or_default();
            assert_eq!(
                declared.len(),
                sample.as_object().map_or(0, |o| o.len()),
                "the sample sets every property"
            );
            let mut extra = sample.clone();
            extra["undeclared"] = json!(1);
            assert!(!validator.is_valid(&extra));
            assert!(serde_json::from_value::<Checked<T>>(extra).is_err());
            for required in schema["required"].as_array().into_iter().flatten() {
                let mut missing = sample.clone();
                missing
                    .as_object_mut()
                    .map(|o| o.remove(required.as_str().unwrap_or_default()));
                assert!(!validator.is_valid(&missing));
                assert!(
                    serde_json::from_value::<Checked<T>>(missing).is_err(),
                    "{required}"
                );
            }
        }
        check::<SearchDocs>(
            &search_input_schema(),
            json!({"query": "refund", "limit": 3, "detail": "full", "method": "POST", "group": "refunds"}),
        );
        check::<Execute>(
            &execute_input_schema(),
            json!({"code": "return 1", "timeout_ms": 500, "dry_run": true}),
        );
    }

    #[test]
    fn the_schema_names_every_error_kind_as_serialised() {
        for kind in ErrorKind::ALL {
            assert_eq!(serde_json::to_value(kind).ok(), Some(json!(kind.as_str())));
        }
    }

    #[test]
    fn search_results_match_the_declared_schema_with_and_without_a_hint() {
        let validator = validator(&search_output_schema());
        let hit = Hit {
            kind: "operation",
            id: "api.orders.list".into(),
            text: "GET /orders  api.orders.list()".into(),
            score: 1.0,
        };
        for results in [
            Results {
                hits: vec![hit.clone()],
                hint: None,
            },
            Results {
                hits: Vec::new(),
                hint: Some("no results".into()),
            },
        ] {
            let result = search_result(&results);
            assert_valid(&validator, &result);
            let structured = result.structured_content.unwrap_or_default();
            assert!(
                structured.get("hint").is_none_or(|h| h.is_string()),
                "an absent hint is omitted, never null: {structured}"
            );
        }
        let wrong = CallToolResult::structured(json!({"hits": [], "hint": null}));
        assert!(
            !validator.is_valid(wrong.structured_content.as_ref().unwrap_or(&json!(null))),
            "the schema must refuse what the official clients refuse"
        );
    }

    #[test]
    fn a_search_answer_is_bounded_whole_whatever_the_hits() {
        let validator = validator(&search_output_schema());
        let huge = Hit {
            kind: "operation",
            id: "api.x.y".into(),
            text: "é\"x".repeat(200_000),
            score: 1.0,
        };
        let results = Results {
            hits: vec![huge; MAX_LIMIT],
            hint: None,
        };
        let result = search_result(&results);
        assert_valid(&validator, &result);
        let size = serde_json::to_vec(&result).unwrap().len();
        assert!(size <= crate::answer::MAX_ANSWER_BYTES, "{size}");
        assert!(
            !result.structured_content.unwrap()["hits"]
                .as_array()
                .unwrap()
                .is_empty()
        );
    }
}
