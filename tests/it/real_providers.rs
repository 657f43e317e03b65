//! The SDK of the three real specs in ../shared/specs (issue 22): every operation can be
//! called with what its spec requires, and a misspelled parameter is refused before anything
//! is sent, on every operation whose spec closes its parameters. Skipped, with a message,
//! when the folder is absent.

use std::path::PathBuf;
use std::sync::Arc;

use sdkbox::sdk::{Sdk, SdkCall};
use sdkbox::spec::{Operation, Shape};
use serde_json::{Map, Value, json};

async fn sdk(file: &str) -> Option<Sdk> {
    let path = crate::support::shared_spec(file)?;
    let spec = sdkbox::spec::load(path.to_str().unwrap()).await.unwrap();
    Some(Sdk::new(Arc::new(spec.api)))
}

/// A value of `shape` with what it requires and nothing else.
fn example(shape: &Shape, depth: usize) -> Value {
    match shape {
        Shape::String { values } => json!(values.first().cloned().unwrap_or_else(|| "x1".into())),
        Shape::Integer => json!(1),
        Shape::Number => json!(1.5),
        Shape::Boolean => json!(true),
        Shape::Null => Value::Null,
        Shape::Array(items) => json!([example(items, depth + 1)]),
        Shape::Object { fields, .. } if depth < 8 => Value::Object(
            fields
                .iter()
                .filter(|f| f.required)
                .map(|f| (f.name.clone(), example(&f.shape, depth + 1)))
                .collect(),
        ),
        Shape::OneOf(shapes) => shapes
            .iter()
            .find(|s| !matches!(***s, Shape::Null))
            .map_or(Value::Null, |s| example(s, depth + 1)),
        Shape::Any | Shape::Bytes => json!("x1"),
        _ => json!({}),
    }
}

/// The call of `op` with every required parameter and body field.
fn required_call(op: &Operation) -> Map<String, Value> {
    let mut params: Map<String, Value> = op
        .params
        .iter()
        .filter(|p| p.required)
        .map(|p| (p.name.clone(), example(&p.shape, 0)))
        .collect();
    let hidden = op.body_fields_named_like_params();
    if let Some(body) = &op.body {
        match (&*body.shape, example(&body.shape, 0)) {
            (Shape::Object { .. }, Value::Object(fields)) => {
                let mut under_body = Map::new();
                for (name, value) in fields {
                    if hidden.contains(&name.as_str()) {
                        under_body.insert(name, value);
                    } else {
                        params.insert(name, value);
                    }
                }
                if !under_body.is_empty() {
                    params.insert("body".into(), Value::Object(under_body));
                }
            }
            (_, value) if body.required => {
                params.insert("body".into(), value);
            }
            _ => {}
        }
    }
    params
}

fn call(op: &Operation, params: Map<String, Value>) -> SdkCall {
    SdkCall {
        group: op.group.clone(),
        method: op.name.clone(),
        params: Value::Object(params),
        extra: 0,
        files: Vec::new(),
    }
}

#[tokio::test]
async fn every_operation_takes_what_its_spec_requires() {
    for file in [
        "stripe-spec3.json",
        "github-api.github.com.json",
        "cloudflare-openapi.json",
    ] {
        let Some(sdk) = sdk(file).await else { return };
        let refused: Vec<String> = sdk
            .operations()
            .iter()
            .filter_map(|op| {
                let error = sdk.prepare(&call(op, required_call(op))).err()?;
                Some(format!("{} {}: {error}", op.method, op.path))
            })
            .collect();
        println!(
            "{file}: {} operations, {} refused",
            sdk.operations().len(),
            refused.len()
        );
        assert!(refused.is_empty(), "{file}:\n{}", refused.join("\n"));
    }
}

#[tokio::test]
async fn a_misspelled_parameter_is_refused_before_sending() {
    for file in [
        "stripe-spec3.json",
        "github-api.github.com.json",
        "cloudflare-openapi.json",
    ] {
        let Some(sdk) = sdk(file).await else { return };
        let mut open = 0;
        for op in sdk.operations() {
            let mut params = required_call(op);
            params.insert("limt".into(), json!(5));
            match sdk.prepare(&call(op, params)) {
                Err(error) => {
                    let error = error.to_string();
                    assert!(
                        error.contains("limt"),
                        "{file} {} {}: {error}",
                        op.method,
                        op.path
                    );
                }
                // Only a body the spec leaves open (no fields, any key) takes it.
                Ok(request) => {
                    let Some(Shape::Object { fields, additional }) =
                        op.body.as_ref().map(|b| &*b.shape)
                    else {
                        panic!("{file} {} {} sent `limt`", op.method, op.path);
                    };
                    assert!(fields.is_empty() && additional.is_some());
                    assert!(
                        request
                            .body
                            .is_some_and(|b| b.text().unwrap_or_default().contains("limt"))
                    );
                    open += 1;
                }
            }
        }
        println!(
            "{file}: a misspelling refused on {} of {} operations; {open} take any body field",
            sdk.operations().len() - open,
            sdk.operations().len()
        );
        // As the README says: Stripe and GitHub close every body; 6 of Cloudflare's take any
        // key.
        let expected = if file.starts_with("cloudflare") { 6 } else { 0 };
        assert_eq!(
            open, expected,
            "{file}: operations whose body takes any key"
        );
    }
    // The first one the review met.
    let Some(sdk) = sdk("stripe-spec3.json").await else {
        return;
    };
    let error = sdk
        .prepare(&SdkCall {
            group: "customers".into(),
            method: "list".into(),
            params: json!({"limt": 5}),
            extra: 0,
            files: Vec::new(),
        })
        .unwrap_err()
        .to_string();
    assert!(error.contains("did you mean `limit`"), "{error}");
}

#[tokio::test]
async fn read_only_fields_all_of_siblings_and_renames() {
    let Some(cloudflare) = sdk("cloudflare-openapi.json").await else {
        return;
    };
    let find = |sdk: &Sdk, method: &str, path: &str| {
        sdk.operations()
            .iter()
            .find(|op| op.method == method && op.path == path)
            .unwrap_or_else(|| panic!("{method} {path}"))
            .clone()
    };
    // `id` is a path parameter, and a read-only body field the spec lists as required.
    let op = find(
        &cloudflare,
        "PUT",
        "/zones/{zone_identifier}/firewall/waf/overrides/{id}",
    );
    let mut params = required_call(&op);
    assert!(!params.contains_key("body"), "{params:?}");
    params.insert("urls".into(), json!(["example.com/*"]));
    let request = cloudflare.prepare(&call(&op, params)).unwrap();
    assert!(
        !request
            .body
            .unwrap()
            .text()
            .unwrap_or_default()
            .contains("\"id\"")
    );
    // Read-only in the shared schema, yet an update takes it: accepted, not required.
    let op = find(&cloudflare, "PUT", "/accounts/{account_id}");
    cloudflare
        .prepare(&call(
            &op,
            serde_json::from_value(json!({"account_id": "a1", "id": "a1", "name": "Acme"}))
                .unwrap(),
        ))
        .unwrap();
    // `origin` beside `allOf` carries the password the stored config has not.
    let op = find(
        &cloudflare,
        "POST",
        "/accounts/{account_id}/hyperdrive/configs",
    );
    let request = cloudflare
        .prepare(&call(
            &op,
            serde_json::from_value(json!({"account_id": "a1", "name": "db", "origin": {
                "database": "d", "host": "h.example.com", "port": 5432, "scheme": "postgres",
                "user": "u", "password": "p"}}))
            .unwrap(),
        ))
        .unwrap();
    assert!(
        request
            .body
            .unwrap()
            .text()
            .unwrap_or_default()
            .contains("\"password\":\"p\"")
    );
    // A rename: the path's `name` and the new one in the body.
    let Some(github) = sdk("github-api.github.com.json").await else {
        return;
    };
    let op = find(
        &github,
        "PATCH",
        "/repos/{owner}/{repo}/actions/variables/{name}",
    );
    assert_eq!(op.body_fields_named_like_params(), ["name"]);
    let request = github
        .prepare(&call(
            &op,
            serde_json::from_value(
                json!({"owner": "o", "repo": "r", "name": "OLD", "body": {"name": "NEW", "value": "1"}}),
            )
            .unwrap(),
        ))
        .unwrap();
    assert_eq!(request.url, "/repos/o/r/actions/variables/OLD");
    assert_eq!(
        request.body.as_ref().and_then(|b| b.text()),
        Some(r#"{"name":"NEW","value":"1"}"#)
    );
    // Search says so, in the call and in the signature.
    let docs =
        sdkbox::search::DocsIndex::build(Arc::new(github.api().clone()), Vec::new()).unwrap();
    let hits = docs
        .search(
            "update a repository variable",
            1,
            sdkbox::search::Detail::Full,
            &sdkbox::search::Filters::default(),
        )
        .unwrap();
    let text = &hits.hits[0].text;
    assert!(text.contains("body: { name }?"), "{text}");
    assert!(text.contains("body?: { name?: string }"), "{text}");
}

#[tokio::test]
async fn the_example_configs_load_with_a_scheme_a_secret_works_alone() {
    for (example, spec, env, shipped, from_spec) in [
        (
            "stripe",
            "stripe-spec3.json",
            "STRIPE_API_KEY",
            "Basic",
            "Bearer",
        ),
        (
            "github",
            "github-api.github.com.json",
            "GITHUB_TOKEN",
            "Bearer",
            "Bearer",
        ),
        (
            "cloudflare",
            "cloudflare-openapi.json",
            "CLOUDFLARE_API_TOKEN",
            "Bearer",
            "Bearer",
        ),
    ] {
        let Some(spec) = crate::support::shared_spec(spec) else {
            return;
        };
        let config =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{example}.toml"));
        let run = |args: Vec<std::ffi::OsString>| {
            // A stdio server whose client has gone at once: it starts, says where the
            // secret goes, and ends.
            let output = crate::support::sdkbox()
                .args(["serve", "--no-model", "--approval-page", "off"])
                .args(args)
                .arg("--spec")
                .arg(&spec)
                .env(env, "secret-value-0123456789")
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            String::from_utf8_lossy(&output.stderr).into_owned()
        };
        // The shipped file (its spec read from the shared copy), and the spec alone.
        for (args, header) in [
            (
                vec!["--config".into(), config.clone().into_os_string()],
                shipped,
            ),
            (vec!["--secret-env".into(), env.into()], from_spec),
        ] {
            let stderr = run(args);
            let says = format!("the provider secret goes in the Authorization header, as {header}");
            assert!(stderr.contains(&says), "{example}: {stderr}");
        }
    }
}

#[tokio::test]
async fn bodies_that_are_not_json_are_sent_as_given() {
    let Some(cloudflare) = sdk("cloudflare-openapi.json").await else {
        return;
    };
    let script = "addEventListener('fetch', (e) => e.respondWith(new Response('ok')));";
    for (method, path, media_type, body) in [
        (
            "PUT",
            "/zones/{zone_id}/workers/script",
            "application/javascript",
            script,
        ),
        (
            "POST",
            "/accounts/{account_id}/ai/run/@cf/facebook/detr-resnet-50",
            "application/octet-stream",
            "\u{0}\u{1}bytes",
        ),
    ] {
        let op = cloudflare
            .operations()
            .iter()
            .find(|op| op.method == method && op.path == path)
            .unwrap_or_else(|| panic!("{method} {path}"));
        let mut params = required_call(op);
        params.insert("body".into(), json!(body));
        let request = cloudflare.prepare(&call(op, params)).unwrap();
        assert_eq!(
            request.body.as_ref().and_then(|b| b.text()),
            Some(body),
            "{path}"
        );
        assert!(
            request
                .headers
                .contains(&("content-type".to_owned(), media_type.to_owned())),
            "{path}: {:?}",
            request.headers
        );
    }
}
