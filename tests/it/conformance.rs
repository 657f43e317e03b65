//! The SDK against Prism (issue 22): for each real spec in ../shared/specs, a deterministic
//! sample of its operations (every n-th, and every one with a parameter style or body media
//! type of its own) is served by Prism (Stainless's fork), the mock server that validates each request against
//! the spec (types, formats, required fields, media type, credentials), from a spec cut down
//! to those operations; each is called through the SDK in the sandbox with values made from
//! its schemas, and must be accepted. Skipped, with a message, when the specs or Prism are
//! absent (Prism is installed by scripts/test-deps; CI has both).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sdkbox::egress::{AuthScheme, Credential, Egress, EgressConfig, EgressLimits, Secret};
use sdkbox::sandbox::{ExecLimits, InProcessSandbox};
use sdkbox::sdk::Sdk;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{requirement_met, run};

/// Operations sampled from each spec, at least.
const SAMPLE: usize = 60;

/// Sampled operations this test cannot make a valid call of (its value maker, not the SDK,
/// falls short), each with why. Anything else Prism refuses fails the test.
const VALUES_NOT_MADE: &[(&str, &str)] = &[
    (
        "POST /accounts/{account_id}/magic/apps",
        "an anyOf body whose variants each require another field; the maker fills none",
    ),
    (
        "PUT /accounts/{account_id}/r2/buckets/{bucket_name}/sippy",
        "a oneOf body: the empty object made for it matches several variants",
    ),
    (
        "PUT /accounts/{account_id}/rulesets/{ruleset_id}",
        "rules are a oneOf with a discriminator; the maker makes an empty rule",
    ),
];

fn prism_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/providers/prism")
}

/// Prism serving `spec` on loopback, until dropped.
pub struct Prism {
    _child: tokio::process::Child,
    /// Its base URL, with a trailing slash.
    pub base: String,
}

impl Prism {
    /// Starts Prism mocking `spec`, once it listens.
    pub async fn start(spec: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child =
            tokio::process::Command::new(prism_folder().join("node_modules/.bin/prism"))
                .args([
                    "mock",
                    "--errors",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                ])
                .arg(spec)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("Prism is listening") {
                    return;
                }
                if line.contains("fatal") {
                    eprintln!("prism: {line}");
                }
            }
            panic!("Prism ended before it listened");
        })
        .await
        .expect("Prism did not listen within 120 s");
        // Its log keeps coming; drained so that it never blocks.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            _child: child,
            base: format!("http://127.0.0.1:{port}/"),
        }
    }
}

/// Follows `$ref`s in `spec`.
fn resolve<'a>(spec: &'a Value, mut value: &'a Value) -> &'a Value {
    for _ in 0..32 {
        let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
            break;
        };
        value = spec
            .pointer(reference.trim_start_matches('#'))
            .unwrap_or(&Value::Null);
    }
    value
}

/// A value `schema` accepts: its example or default where it gives one, else one made from
/// its type and format, with the required fields of objects and nothing read-only.
fn example(spec: &Value, schema: &Value, depth: usize) -> Value {
    let schema = resolve(spec, schema);
    if let Some(example) = schema.get("example") {
        return example.clone();
    }
    if let Some(Value::Array(examples)) = schema.get("examples")
        && let Some(first) = examples.first()
    {
        return first.clone();
    }
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if let Some(Value::Array(values)) = schema.get("enum")
        && let Some(first) = values.iter().find(|v| !v.is_null())
    {
        return first.clone();
    }
    if let Some(Value::Array(parts)) = schema.get("allOf") {
        let examples: Vec<Value> = parts.iter().map(|p| example(spec, p, depth + 1)).collect();
        // Parts that are not objects (a string with a description beside it): the first.
        if !examples.iter().any(Value::is_object) {
            return examples.into_iter().next().unwrap_or(Value::Null);
        }
        let mut merged = Map::new();
        for part in examples {
            if let Value::Object(fields) = part {
                merged.extend(fields);
            }
        }
        if let Value::Object(own) = object_example(spec, schema, depth) {
            merged.extend(own);
        }
        // Fields one part requires and another describes.
        let parts: Vec<&Value> = parts.iter().map(|p| resolve(spec, p)).collect();
        for part in &parts {
            for name in part["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if merged.contains_key(name) {
                    continue;
                }
                if let Some(property) = parts.iter().find_map(|p| p["properties"].get(name)) {
                    merged.insert(name.to_owned(), example(spec, property, depth + 1));
                }
            }
        }
        return Value::Object(merged);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(parts)) = schema.get(key) {
            let kind = |p: &Value| {
                resolve(spec, p)
                    .get("type")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            // A string where one is allowed: `1` in a path would match an integer and a
            // string both, which `oneOf` refuses.
            let first = parts
                .iter()
                .find(|p| kind(p).as_deref() == Some("string"))
                .or_else(|| parts.iter().find(|p| kind(p).as_deref() != Some("null")));
            return first.map_or(Value::Null, |p| example(spec, p, depth + 1));
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("string"),
        _ if schema.get("properties").is_some() || schema.get("required").is_some() => "object",
        _ if schema.get("items").is_some() => "array",
        _ => "string",
    };
    let number = |key: &str| schema.get(key).and_then(Value::as_f64);
    match kind {
        "integer" => json!(number("minimum").map_or(1, |m| m.ceil() as i64)),
        "number" => json!(number("minimum").unwrap_or(1.5)),
        "boolean" => json!(true),
        "array" => {
            let item = schema
                .get("items")
                .map_or(json!("x1"), |i| example(spec, i, depth + 1));
            let count = schema
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1);
            Value::Array(vec![item; count as usize])
        }
        "object" => object_example(spec, schema, depth),
        _ => {
            let format = schema.get("format").and_then(Value::as_str).unwrap_or("");
            let text = match format {
                "date-time" => "2024-01-02T03:04:05Z".to_owned(),
                "date" => "2024-01-02".to_owned(),
                "email" => "ada@example.com".to_owned(),
                "uri" | "url" => "https://example.com/a".to_owned(),
                "uuid" => "123e4567-e89b-12d3-a456-426614174000".to_owned(),
                "ipv4" => "192.0.2.1".to_owned(),
                "ipv6" => "2001:db8::1".to_owned(),
                "hostname" => "example.com".to_owned(),
                _ => {
                    let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0);
                    "x".repeat((min as usize).max(2))
                }
            };
            // A pattern: the first of some usual shapes that matches it.
            if let Some(pattern) = schema.get("pattern") {
                let check = json!({"type": "string", "pattern": pattern});
                let hex = "0123456789abcdef".repeat(4);
                let candidates = [
                    text.clone(),
                    "abc".into(),
                    "a1b2c3".into(),
                    "ABC".into(),
                    "1".into(),
                    "YWJjZA==".into(),
                    hex[..32].to_owned(),
                    hex.clone(),
                    format!("sha256:{hex}"),
                    "example.com".into(),
                    "2024-01-02".into(),
                ];
                if let Some(fit) = candidates
                    .into_iter()
                    .find(|c| jsonschema::is_valid(&check, &json!(c)))
                {
                    return json!(fit);
                }
            }
            json!(text)
        }
    }
}

fn object_example(spec: &Value, schema: &Value, depth: usize) -> Value {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    if depth > 8 {
        return Value::Object(out);
    }
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, property) in properties {
            let read_only = resolve(spec, property)
                .get("readOnly")
                .and_then(Value::as_bool)
                == Some(true);
            if required.contains(&name.as_str()) && !read_only {
                out.insert(name.clone(), example(spec, property, depth + 1));
            }
        }
    }
    Value::Object(out)
}

/// The sampled operations of `spec`: every n-th of them in path order, and every one with
/// a parameter style or a body media type other than the plain ones.
fn sample(spec: &Value) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = Vec::new();
    let mut special: BTreeSet<(String, String)> = BTreeSet::new();
    let paths = spec["paths"].as_object().unwrap();
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            if !["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                continue;
            }
            let key = (path.clone(), method.clone());
            let styled = op["parameters"].as_array().into_iter().flatten().any(|p| {
                let p = resolve(spec, p);
                p.get("style").is_some() || p.get("explode").is_some()
            });
            let media = resolve(spec, &op["requestBody"])
                .get("content")
                .and_then(Value::as_object)
                .is_some_and(|c| !c.contains_key("application/json") && !c.is_empty());
            if (styled || media) && special.len() < 12 {
                special.insert(key.clone());
            }
            all.push(key);
        }
    }
    let step = (all.len() / SAMPLE).max(1);
    let mut picked: BTreeSet<(String, String)> = all.iter().step_by(step).cloned().collect();
    picked.extend(special);
    picked.into_iter().collect()
}

/// `spec` with only the `picked` operations and the components they refer to; with
/// `bare_responses` each answers a bare 200 (what is checked is the request), else what the
/// spec says.
pub fn cut(spec: &Value, picked: &[(String, String)], bare_responses: bool) -> Value {
    let mut paths = Map::new();
    for (path, method) in picked {
        let mut op = spec["paths"][path][method].clone();
        if bare_responses {
            op["responses"] = json!({"200": {"description": "ok"}});
        }
        if let Some(op) = op.as_object_mut() {
            op.remove("security");
        }
        let item = paths
            .entry(path.clone())
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .unwrap();
        if let Some(shared) = spec["paths"][path].get("parameters") {
            item.insert("parameters".into(), shared.clone());
        }
        item.insert(method.clone(), op);
    }
    let paths = Value::Object(paths);
    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    match (key.as_str(), inner) {
                        ("$ref", Value::String(r)) => out.push(r.clone()),
                        _ => refs(inner, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| refs(i, out)),
            _ => {}
        }
    }
    let mut todo = Vec::new();
    refs(&paths, &mut todo);
    let mut needed = BTreeSet::new();
    while let Some(reference) = todo.pop() {
        if needed.insert(reference.clone())
            && let Some(target) = spec.pointer(reference.trim_start_matches('#'))
        {
            refs(target, &mut todo);
        }
    }
    let mut components = json!({"securitySchemes": spec["components"]["securitySchemes"].clone()});
    for reference in needed {
        let parts: Vec<&str> = reference.trim_start_matches("#/").split('/').collect();
        if let ["components", kind, name] = parts[..] {
            components[kind][name] = spec["components"][kind][name].clone();
        }
    }
    // Webhooks and extensions refer to components that are not kept. Credentials are not
    // what this checks (tests/it/real_providers.rs does): no security requirements, so that
    // Cloudflare's operations that name only its e-mail and key pair take the token too.
    let mut out = json!({"paths": paths, "components": components});
    for key in ["openapi", "info", "servers", "tags"] {
        if let Some(value) = spec.get(key) {
            out[key] = value.clone();
        }
    }
    out
}

/// The call of `op` (group and method) with what the spec requires, from its own schemas.
fn call_of(spec: &Value, path: &str, method: &str, op: &sdkbox::spec::Operation) -> Value {
    let raw = &spec["paths"][path][method];
    let shared = spec["paths"][path]["parameters"].as_array();
    let mut params = Map::new();
    for param in raw["parameters"]
        .as_array()
        .into_iter()
        .chain(shared)
        .flatten()
    {
        let param = resolve(spec, param);
        let (Some(name), Some(place)) = (param["name"].as_str(), param["in"].as_str()) else {
            continue;
        };
        if place == "cookie" || (place != "path" && param["required"] != json!(true)) {
            continue;
        }
        let value = match param.get("example") {
            Some(example) => example.clone(),
            None => example(spec, &param["schema"], 0),
        };
        params.insert(name.to_owned(), value);
    }
    let body = resolve(spec, &raw["requestBody"]);
    if body["required"] == json!(true) || body.get("content").is_some() {
        let content = body["content"].as_object();
        let media = content.and_then(|c| {
            c.iter()
                .find(|(t, _)| t.contains("json") && !t.contains("ndjson"))
                .or_else(|| c.iter().next())
        });
        if let Some((media_type, media)) = media {
            let value = example(spec, &media["schema"], 0);
            let hidden = op.body_fields_named_like_params();
            match value {
                Value::Object(fields) if !media_type.contains("octet") && op_body_is_object(op) => {
                    let mut under = Map::new();
                    for (name, field) in fields {
                        if hidden.contains(&name.as_str()) {
                            under.insert(name, field);
                        } else {
                            params.insert(name, field);
                        }
                    }
                    if !under.is_empty() {
                        params.insert("body".into(), Value::Object(under));
                    }
                }
                _ if body["required"] == json!(true) => {
                    // A body of bytes or text is a string; any other is given as it is.
                    let raw = !media_type.contains("json") && !media_type.contains("form");
                    let value = match value {
                        Value::String(_) => value,
                        other if raw => json!(other.to_string()),
                        other => other,
                    };
                    params.insert("body".into(), value);
                }
                _ => {}
            }
        }
    }
    Value::Object(params)
}

/// Whether Prism refused a request for its own reasons, not for anything sent: it reads an
/// optional `deepObject` parameter that was left out as an empty object and then finds its
/// required fields missing (every violation about a property the call did not give), and
/// it cannot read an array of objects in a form body (`items[0][price]`), which Stripe can.
fn prism_artefact(result: &Value, params: &Value) -> bool {
    let body = &result["body"];
    let objects_in_a_list = params.as_object().is_some_and(|p| {
        p.values().any(|v| {
            v.as_array()
                .is_some_and(|items| items.iter().any(Value::is_object))
        })
    });
    if result["status"] == json!(415)
        && objects_in_a_list
        && body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("Cannot deserialize JSON object array in form data"))
    {
        return true;
    }
    let Some(violations) = body["validation"].as_array().filter(|v| !v.is_empty()) else {
        return false;
    };
    // Somewhere along the violation's place, a property the call did not give.
    let not_sent = |location: &Value| {
        let mut sent = params;
        for step in location.as_array().into_iter().flatten().skip(1) {
            match step.as_str().and_then(|name| sent.get(name)) {
                Some(inner) => sent = inner,
                None => return true,
            }
        }
        false
    };
    result["status"] == json!(422)
        && violations
            .iter()
            .all(|v| v["code"] == json!("required") && not_sent(&v["location"]))
}

/// A sandbox whose SDK is `api`, sending to `prism` with a bearer token.
fn prism_sandbox(prism: &Prism, api: &Arc<sdkbox::spec::Api>) -> InProcessSandbox {
    let egress = Egress::new(EgressConfig {
        base_url: prism.base.parse().unwrap(),
        extra_origins: Vec::new(),
        download_origins: Vec::new(),
        credential: Some(Credential {
            scheme: AuthScheme::Bearer,
            secret: Secret::new("sk_test_conformance".to_owned()),
        }),
        limits: EgressLimits::default(),
    })
    .unwrap();
    InProcessSandbox::new(egress, Some(Arc::new(Sdk::new(api.clone()))))
}

fn op_body_is_object(op: &sdkbox::spec::Operation) -> bool {
    matches!(
        op.body.as_ref().map(|b| &*b.shape),
        Some(sdkbox::spec::Shape::Object { .. })
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampled_operations_of_each_spec_are_accepted_by_prism() {
    let installed = prism_folder().join("node_modules/.bin/prism").exists();
    if !requirement_met(installed, "Prism is not installed (scripts/test-deps)") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for file in [
        "stripe-spec3.json",
        "github-api.github.com.json",
        "cloudflare-openapi.json",
    ] {
        let Some(path) = crate::support::shared_spec(file) else {
            return;
        };
        let spec: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let picked = sample(&spec);
        let cut_spec = cut(&spec, &picked, true);
        let cut_path = scratch.path().join(file);
        std::fs::write(&cut_path, serde_json::to_vec(&cut_spec).unwrap()).unwrap();
        let prism = Prism::start(&cut_path).await;
        let loaded = sdkbox::spec::load(cut_path.to_str().unwrap())
            .await
            .unwrap();
        let api = Arc::new(loaded.api);
        let sandbox = prism_sandbox(&prism, &api);
        let (mut accepted, mut artefacts, mut not_made) = (0, 0, 0);
        for (path, method) in &picked {
            let Some(op) = api
                .operations
                .iter()
                .find(|o| &o.path == path && o.method.eq_ignore_ascii_case(method))
            else {
                failures.push(format!("{file} {method} {path}: not in the SDK"));
                continue;
            };
            let params = call_of(&spec, path, method, op);
            let call = format!("api.{}.{}({params})", op.group, op.name);
            let code = format!(
                "try {{ await {call}; return {{ ok: true }}; }} catch (e) {{ return {{ ok: false, status: e.status ?? null, body: e.body ?? null, message: e.message }}; }}"
            );
            let outcome = run(&sandbox, &code, &ExecLimits::default()).await;
            let result = &outcome.result;
            if result["ok"] == json!(true) {
                accepted += 1;
            } else if prism_artefact(result, &params) {
                artefacts += 1;
            } else if VALUES_NOT_MADE
                .iter()
                .any(|(op, _)| *op == format!("{} {path}", method.to_uppercase()))
            {
                not_made += 1;
            } else {
                let message: String = result["message"]
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| outcome.error.map(|e| e.message))
                    .unwrap_or_default();
                failures.push(format!(
                    "{file} {} {path}: {call}\n  {}\n  {}",
                    method.to_uppercase(),
                    message.chars().take(300).collect::<String>(),
                    result["body"]
                        .to_string()
                        .chars()
                        .take(900)
                        .collect::<String>()
                ));
            }
        }
        // The figures the README states: a call that stops being accepted, or one excused
        // that should not be, shows here.
        let expected = match file {
            "stripe-spec3.json" => (71, 6, 0),
            "github-api.github.com.json" => (64, 0, 0),
            _ => (71, 0, VALUES_NOT_MADE.len()),
        };
        if (accepted, artefacts, not_made) != expected {
            failures.push(format!(
                "{file}: (accepted, refused by Prism for what was not sent, values not made) = {:?}, expected {expected:?}",
                (accepted, artefacts, not_made)
            ));
        }
        report.push(format!(
            "{file}: {accepted} of {} accepted, {artefacts} refused by Prism for what was not sent, {not_made} refused for values this test could not make",
            picked.len()
        ));
    }
    println!("{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "{}\n{}",
        report.join("\n"),
        failures.join("\n")
    );
}

/// Binary request bodies, as the specs' file operations take them, are accepted by Prism:
/// Stripe's file upload and Cloudflare's Worker upload (multipart: a `File` part, Stripe's
/// deepObject fields, Cloudflare's JSON `metadata` part), GitHub's release asset and
/// Cloudflare's image classification (`application/octet-stream`, bytes 0 to 255).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_request_bodies_are_accepted_by_prism() {
    let installed = prism_folder().join("node_modules/.bin/prism").exists();
    if !requirement_met(installed, "Prism is not installed (scripts/test-deps)") {
        return;
    }
    const BYTES: &str = "new Uint8Array(256).map((_, i) => 255 - i)";
    // (spec, path, method, the call's parameters as TypeScript)
    let calls: [(&str, &str, &str, String); 4] = [
        (
            "stripe-spec3.json",
            "/v1/files",
            "post",
            format!(
                "{{ file: new File([{BYTES}], \"evidence.png\", {{ type: \"image/png\" }}), purpose: \"dispute_evidence\", file_link_data: {{ create: true }} }}"
            ),
        ),
        (
            "github-api.github.com.json",
            "/repos/{owner}/{repo}/releases/{release_id}/assets",
            "post",
            format!("{{ owner: \"o\", repo: \"r\", release_id: 1, name: \"build.zip\", body: {BYTES} }}"),
        ),
        (
            "cloudflare-openapi.json",
            "/accounts/{account_id}/ai/run/@cf/microsoft/resnet-50",
            "post",
            format!("{{ account_id: \"023e105f4ecef8ad9ca31a8372d0c353\", body: new Blob([{BYTES}]) }}"),
        ),
        (
            "cloudflare-openapi.json",
            "/accounts/{account_id}/workers/scripts/{script_name}",
            "put",
            "{ account_id: \"023e105f4ecef8ad9ca31a8372d0c353\", script_name: \"hello\", body: { \
             metadata: { main_module: \"worker.js\" }, \
             \"worker.js\": [new File([\"export default { fetch() { return new Response('hi') } }\"], \"worker.js\", { type: \"application/javascript+module\" })] } }"
                .to_owned(),
        ),
    ];
    let scratch = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (file, path, method, params) in &calls {
        let Some(spec_path) = crate::support::shared_spec(file) else {
            return;
        };
        let spec: Value = serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
        let picked = [(path.to_string(), method.to_string())];
        let cut_path = scratch
            .path()
            .join(format!("{}-{method}.json", file.replace('.', "-")));
        std::fs::write(
            &cut_path,
            serde_json::to_vec(&cut(&spec, &picked, true)).unwrap(),
        )
        .unwrap();
        let prism = Prism::start(&cut_path).await;
        let loaded = sdkbox::spec::load(cut_path.to_str().unwrap())
            .await
            .unwrap();
        let api = Arc::new(loaded.api);
        let op = api
            .operations
            .iter()
            .find(|o| o.path == *path && o.method.eq_ignore_ascii_case(method))
            .unwrap();
        let sandbox = prism_sandbox(&prism, &api);
        let call = format!("api.{}.{}({params})", op.group, op.name);
        let code = format!(
            "try {{ await {call}; return {{ ok: true }}; }} catch (e) {{ return {{ ok: false, status: e.status ?? null, body: e.body ?? null, message: e.message }}; }}"
        );
        let outcome = run(&sandbox, &code, &ExecLimits::default()).await;
        let sent = outcome.http.first().map(|c| c.bytes);
        if outcome.result["ok"] != json!(true) {
            failures.push(format!(
                "{file} {method} {path}: {call}\n  {}",
                outcome.result
            ));
        }
        println!(
            "{file} {method} {path}: {} (response {sent:?} bytes)",
            outcome.result
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
