//! `execute` as an MCP task (issue 37): the real binary over streamable HTTP in the
//! 2026-07-28 revision, driven by the official `@modelcontextprotocol/ext-tasks` adapter
//! (`tests/clients/ts/tasks.mjs`) against a paginating provider here that counts what it
//! receives: a long paginating run to completion while a plain client is served, a quick
//! call that stays plain, a cancel after which the provider receives nothing, an approval
//! that waits in the task longer than a plain call may, and a denied write never sent. By
//! hand: tasks are the caller's own, and unknown ids are refused as the extension says.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::clients::{assert_checks_passed, client_report, node_client};
use crate::support::{Listening, listening, sdkbox_async};

/// What the provider received.
#[derive(Default)]
struct Seen {
    pages: AtomicUsize,
    notes: AtomicUsize,
}

#[derive(serde::Deserialize)]
struct PageQuery {
    page: Option<usize>,
    delay_ms: Option<u64>,
}

/// Starts the provider: `GET /v1/pages` (one item a page, the next page's number, after a
/// delay), `POST /v1/notes`, and `GET /_seen` (counts, for the client).
async fn provider() -> (url::Url, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route(
            "/v1/pages",
            get(
                |State(seen): State<Arc<Seen>>, Query(q): Query<PageQuery>| async move {
                    seen.pages.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(q.delay_ms.unwrap_or(0).min(5_000)))
                        .await;
                    let page = q.page.unwrap_or(0);
                    Json(json!({"items": [{"id": format!("item_{page}")}], "next_page": page + 1}))
                },
            ),
        )
        .route(
            "/v1/notes",
            post(
                |State(seen): State<Arc<Seen>>, Json(body): Json<Value>| async move {
                    let n = seen.notes.fetch_add(1, Ordering::SeqCst);
                    (
                        axum::http::StatusCode::CREATED,
                        Json(json!({"id": format!("note_{n}"), "text": body["text"]})),
                    )
                },
            ),
        )
        .route(
            "/_seen",
            get(|State(seen): State<Arc<Seen>>| async move {
                Json(json!({
                    "pages": seen.pages.load(Ordering::SeqCst),
                    "notes": seen.notes.load(Ordering::SeqCst),
                }))
            }),
        )
        .with_state(seen.clone());
    (crate::support::serve_on_loopback(app).await, seen)
}

/// The provider's spec: `api.pages.list` and `api.notes.create`.
fn spec(base: &url::Url) -> String {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Pages", "version": "1"},
        "servers": [{"url": base.as_str()}],
        "paths": {
            "/pages": {"get": {
                "operationId": "listPages",
                "summary": "List pages",
                "parameters": [
                    {"name": "page", "in": "query", "schema": {"type": "integer"}},
                    {"name": "delay_ms", "in": "query", "schema": {"type": "integer"}}
                ],
                "responses": {"200": {"description": "A page", "content": {"application/json": {"schema": {
                    "type": "object",
                    "properties": {
                        "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
                        "next_page": {"type": "integer", "nullable": true}
                    }
                }}}}}
            }},
            "/notes": {"post": {
                "operationId": "createNote",
                "summary": "Create a note",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}
                }}}},
                "responses": {"201": {"description": "The note", "content": {"application/json": {"schema": {
                    "type": "object", "properties": {"id": {"type": "string"}, "text": {"type": "string"}}
                }}}}}
            }}
        }
    })
    .to_string()
}

/// `sdkbox serve --http` on the provider: writes need approval, a plain call's approvals
/// time out after 3 s, a call becomes a task after 1 s; three workers (a caller's share is
/// two: its task and one more call); the test's clients are two callers behind an ingress
/// on loopback, which names them.
async fn server(base: &url::Url, token: &str) -> (Listening, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let spec_path = dir.path().join("spec.json");
    std::fs::write(&spec_path, spec(base)).unwrap();
    let mut command = sdkbox_async();
    command
        .args(["serve", "--http", "127.0.0.1:0", "--no-model"])
        .arg("--spec")
        .arg(&spec_path)
        .args(["--base-url", base.as_str(), "--writes", "approve"])
        .args(["--approval-timeout-s", "3", "--task-after-ms", "1000"])
        .args(["--workers", "3"])
        .arg("--audit-log")
        .arg(dir.path().join("audit.jsonl"))
        .args([
            "--token-env",
            "SDKBOX_TOKEN",
            "--trusted-proxy",
            "127.0.0.1/32",
        ])
        .args(["--secret-env", "PAGES_SECRET"])
        .env("PAGES_SECRET", "sk_pages_secret_value_123456")
        .env("SDKBOX_TOKEN", token);
    (listening(command).await, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_tasks_adapter_runs_cancels_and_approves_tasks() {
    let Some(dir) = node_client() else { return };
    let (base, seen) = provider().await;
    let token = format!("tasks-{}", std::process::id());
    let (server, spec_dir) = server(&base, &token).await;
    let pages = std::env::var("SDKBOX_TASK_PAGES").unwrap_or_else(|_| "60".into());
    let output = tokio::process::Command::new("node")
        .arg("tasks.mjs")
        .current_dir(&dir)
        .env("SDKBOX_URL", &server.url)
        .env("SDKBOX_TOKEN", &token)
        .env("PROVIDER", base.origin().ascii_serialization())
        .env("PAGES", &pages)
        .env("PAGE_DELAY_MS", "100")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(900), output)
        .await
        .expect("the client did not finish in 900 s")
        .unwrap();
    let report = client_report(&output);
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert_checks_passed(&report, "the ext-tasks client");
    assert_eq!(report["checks"].as_object().unwrap().len(), 6, "{report}");
    assert_eq!(
        seen.notes.load(Ordering::SeqCst),
        1,
        "one approved write, once"
    );
    let audit = std::fs::read_to_string(spec_dir.path().join("audit.jsonl")).unwrap();
    assert!(!audit.contains("withheld"), "{audit}");
    let decided: Vec<String> = audit
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| {
            line["url"]
                .as_str()
                .is_some_and(|u| u.ends_with("/v1/notes"))
        })
        .filter_map(|line| line["decision"].as_str().map(str::to_owned))
        .collect();
    // The approved and the declined write; the one cancelled while it waited is audited
    // when the gate hears of the cancel before its wait is dropped with the run (as for a
    // plain call), and then with its URL, never withheld.
    let denied = decided.iter().filter(|d| *d == "denied").count();
    assert!(
        decided.contains(&"approved".to_owned()) && denied >= 1,
        "{audit}"
    );
    drop(server.child);
    let log = server.log.await.unwrap_or_default();
    assert!(!log.contains("panicked"), "{log}");
}
