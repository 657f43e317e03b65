//! The real specs in ../shared/specs load in full, name every operation uniquely, and their
//! SDK encodes calls as their providers expect. Skipped, with a message, when the folder is
//! absent (a user's fresh clone has none; CI has it).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sdkbox::sdk::{Sdk, SdkCall};
use serde_json::json;

fn shared(file: &str) -> Option<PathBuf> {
    crate::support::shared_spec(file)
}

async fn load(file: &str, operations: usize) -> Option<Sdk> {
    let path = shared(file)?;
    let started = Instant::now();
    let spec = sdkbox::spec::load(path.to_str().unwrap()).await.unwrap();
    println!(
        "{file}: {} operations in {:?}, {} warnings",
        spec.api.operations.len(),
        started.elapsed(),
        spec.warnings.len()
    );
    assert_eq!(spec.api.operations.len(), operations, "{file}");
    let names: HashSet<_> = spec
        .api
        .operations
        .iter()
        .map(|o| (o.group.clone(), o.name.clone()))
        .collect();
    assert_eq!(names.len(), operations, "{file}: SDK names collide");
    Some(Sdk::new(Arc::new(spec.api)))
}

fn prepare(
    sdk: &Sdk,
    group: &str,
    method: &str,
    params: serde_json::Value,
) -> sdkbox::egress::ScriptRequest {
    let call = SdkCall {
        group: group.into(),
        method: method.into(),
        params,
        extra: 0,
        files: Vec::new(),
    };
    sdk.prepare(&call)
        .unwrap_or_else(|e| panic!("api.{group}.{method}: {e}"))
}

#[tokio::test]
async fn stripe_loads_from_json_and_yaml() {
    let Some(sdk) = load("stripe-spec3.json", 468).await else {
        return;
    };
    let request = prepare(
        &sdk,
        "customers",
        "create",
        json!({"email": "a@b.c", "metadata": {"k": "v"}, "expand": ["tax"]}),
    );
    assert_eq!(
        (request.method.as_str(), request.url.as_str()),
        ("POST", "/v1/customers")
    );
    assert_eq!(
        request.body.as_ref().and_then(|b| b.text()),
        Some("email=a%40b.c&metadata%5Bk%5D=v&expand%5B%5D=tax")
    );
    let request = prepare(&sdk, "customers", "retrieve", json!({"customer": "cus_1"}));
    assert_eq!(request.url, "/v1/customers/cus_1");
    let error = sdk.prepare(&SdkCall {
        group: "customers".into(),
        method: "list".into(),
        params: json!({"limit": "10"}),
        extra: 0,
        files: Vec::new(),
    });
    assert!(
        error
            .unwrap_err()
            .to_string()
            .contains("`limit` must be an integer")
    );
    let Some(_) = load("stripe-spec3.yaml", 468).await else {
        return;
    };
}

#[tokio::test]
async fn github_loads_with_groups_from_operation_ids() {
    let Some(sdk) = load("github-api.github.com.json", 1223).await else {
        return;
    };
    let request = prepare(
        &sdk,
        "issues",
        "create",
        json!({"owner": "o", "repo": "r", "title": "Bug", "labels": ["bug"]}),
    );
    assert_eq!(
        (request.method.as_str(), request.url.as_str()),
        ("POST", "/repos/o/r/issues")
    );
    assert_eq!(
        request.body.as_ref().and_then(|b| b.text()),
        Some(r#"{"title":"Bug","labels":["bug"]}"#)
    );
    let request = prepare(
        &sdk,
        "repos",
        "listForOrg",
        json!({"org": "rust-lang", "per_page": 5}),
    );
    assert_eq!(request.url, "/orgs/rust-lang/repos");
    assert_eq!(request.query, vec![("per_page".to_owned(), "5".to_owned())]);
}

#[tokio::test]
async fn cloudflare_loads_and_indexes_in_full() {
    let Some(sdk) = load("cloudflare-openapi.json", 1533).await else {
        return;
    };
    let api = Arc::new(sdk.api().clone());
    let docs = sdkbox::search::DocsIndex::build(api.clone(), Vec::new()).unwrap();
    assert!(docs.len() >= 1533, "{} documents", docs.len());
    let filters = sdkbox::search::Filters::default();
    let detail = sdkbox::search::Detail::Compact;
    let hits = docs
        .search("list DNS records of a zone", 5, detail, &filters)
        .unwrap();
    assert!(
        hits.hits.iter().any(|h| h.text.contains("/dns_records")),
        "{}",
        hits.to_text()
    );
}

#[tokio::test]
async fn unusable_specs_get_clear_errors() {
    let swagger =
        sdkbox::spec::parse("old.json", r#"{"swagger": "2.0", "paths": {}}"#).unwrap_err();
    assert!(
        swagger
            .to_string()
            .contains("Swagger 2.0 document; sdkbox reads OpenAPI 3.0 and 3.1"),
        "{swagger}"
    );
    let other = sdkbox::spec::parse("package.json", r#"{"name": "left-pad"}"#).unwrap_err();
    assert!(
        other.to_string().contains("not an OpenAPI document"),
        "{other}"
    );
    let broken = sdkbox::spec::parse("bad.yaml", "openapi: 3.0.0\npaths: [unclosed").unwrap_err();
    assert!(broken.to_string().contains("invalid YAML"), "{broken}");
    let missing = sdkbox::spec::load("/nonexistent/spec.json")
        .await
        .unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("cannot read the spec /nonexistent/spec.json"),
        "{missing}"
    );
    let partly = sdkbox::spec::parse(
        "partly.yaml",
        "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n      responses: {}\n  /b:\n    get:\n      operationId: getB\n      parameters: [{$ref: '#/components/parameters/missing'}]\n",
    )
    .unwrap();
    assert_eq!(
        partly.api.operations.len(),
        1,
        "the broken operation is skipped, the other loads"
    );
    let warnings: Vec<String> = partly.warnings.iter().map(ToString::to_string).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("GET /a: no operationId")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w
            .starts_with("GET /b: skipped: `#/components/parameters/missing` points at nothing")),
        "{warnings:?}"
    );
}

/// A spec fetched by URL is cached: the next start revalidates it (`If-None-Match`, answered
/// 304), and a start whose fetch fails uses the copy; with no copy, the failure is the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_fetched_by_url_is_cached_revalidated_and_used_offline() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let revalidated = Arc::new(AtomicUsize::new(0));
    let counter = revalidated.clone();
    let app = axum::Router::new().route(
        "/openapi.yaml",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let counter = counter.clone();
            async move {
                if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some("\"v1\"") {
                    counter.fetch_add(1, Ordering::SeqCst);
                    return (
                        axum::http::StatusCode::NOT_MODIFIED,
                        [("etag", "\"v1\"")],
                        String::new(),
                    );
                }
                (
                    axum::http::StatusCode::OK,
                    [("etag", "\"v1\"")],
                    sdkbox::demo::SPEC.to_owned(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/openapi.yaml", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let cache = tempfile::tempdir().unwrap();
    let first = sdkbox::spec::load_cached(&url, Some(cache.path()))
        .await
        .unwrap();
    let second = sdkbox::spec::load_cached(&url, Some(cache.path()))
        .await
        .unwrap();
    assert_eq!(
        revalidated.load(Ordering::SeqCst),
        1,
        "the second start revalidates"
    );
    assert_eq!(first.api.operations.len(), second.api.operations.len());
    server.abort();
    let _ = server.await;
    let offline = sdkbox::spec::load_cached(&url, Some(cache.path()))
        .await
        .unwrap();
    assert_eq!(offline.api.operations.len(), first.api.operations.len());
    let empty = tempfile::tempdir().unwrap();
    let error = sdkbox::spec::load_cached(&url, Some(empty.path()))
        .await
        .unwrap_err();
    assert!(error.to_string().contains(&url), "{error}");
}

/// Issue 21: specs load in bounded time and memory, or are refused saying what is too
/// large: deep YAML flow nesting, too many operations, a spec over the size cap by URL; an
/// enum of thousands loads as a plain string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pathological_specs_are_refused_or_loaded_within_bounds() {
    let head = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths: {}\n";
    let nested = |depth: usize| format!("{head}x: {}{}\n", "[".repeat(depth), "]".repeat(depth));
    assert!(sdkbox::spec::parse("ok.yaml", &nested(60)).is_ok());
    let error = sdkbox::spec::parse("deep.yaml", &nested(70))
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("nested 65 levels deep at line 4"), "{error}");
    // Brackets inside quoted scalars and comments are not nesting.
    let quoted = format!(
        "{head}x: '{}'\ny: \"{}\"\n# {}\n",
        "[".repeat(100),
        "{".repeat(100),
        "[".repeat(100)
    );
    assert!(sdkbox::spec::parse("quoted.yaml", &quoted).is_ok());
    // Too many operations, refused before any is read.
    let paths: serde_json::Map<String, serde_json::Value> = (0..=sdkbox::spec::MAX_OPERATIONS)
        .map(|n| {
            (
                format!("/p{n}"),
                json!({"get": {"responses": {"200": {"description": "ok"}}}}),
            )
        })
        .collect();
    let many = json!({"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": paths});
    let started = Instant::now();
    let error = sdkbox::spec::parse("many.json", &many.to_string())
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("20001 operations, over 20000"), "{error}");
    println!(
        "{} operations refused in {:?}",
        sdkbox::spec::MAX_OPERATIONS + 1,
        started.elapsed()
    );
    // An enum of thousands accepts any string.
    let values: Vec<String> = (0..5_000).map(|n| format!("v{n}")).collect();
    let enumerated = json!({"openapi": "3.0.0", "info": {"title": "t", "version": "1"},
        "paths": {"/x": {"get": {"operationId": "x/get", "parameters": [{"name": "kind", "in": "query",
            "schema": {"type": "string", "enum": values}}], "responses": {"200": {"description": "ok"}}}}}});
    let spec = sdkbox::spec::parse("enum.json", &enumerated.to_string()).unwrap();
    let sdk = Sdk::new(Arc::new(spec.api));
    let call = SdkCall {
        group: "x".into(),
        method: "get".into(),
        params: json!({"kind": "v4999x"}),
        extra: 0,
        files: Vec::new(),
    };
    assert!(sdk.prepare(&call).is_ok());
    // A spec by URL larger than the cap is refused as it streams in.
    let big = axum::Router::new().route(
        "/spec.yaml",
        axum::routing::get(|| async { "#".repeat(sdkbox::spec::MAX_SPEC_BYTES + 1) }),
    );
    let base = crate::support::serve_on_loopback(big).await;
    let url = base.join("spec.yaml").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let error = sdkbox::spec::load_cached(url.as_str(), Some(dir.path()))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("larger than"), "{error}");
}
