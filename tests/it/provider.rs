//! A real HTTP provider on 127.0.0.1 for egress tests: it echoes what it receives and
//! records the credentials it saw, so tests can check both sides of the bridge.

use base64::Engine as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::json;
use url::Url;

/// What the provider has seen.
#[derive(Default)]
pub struct Seen {
    /// The `Authorization` header of each request, in order.
    pub authorization: Mutex<Vec<Option<String>>>,
    /// Requests received, all routes.
    pub requests: AtomicUsize,
    /// Calls to `/v1/flaky`.
    pub flaky: AtomicUsize,
    /// `/v1/slow` handlers that ran to the end.
    pub slow_finished: AtomicUsize,
    /// `/v1/payments` made, and the response kept for each idempotency key.
    pub payments: AtomicUsize,
    pub payment_keys: Mutex<std::collections::HashMap<String, String>>,
}

/// A running provider.
pub struct Provider {
    /// Its base URL, `http://127.0.0.1:PORT/v1`.
    pub base: Url,
    /// What it has seen.
    pub seen: Arc<Seen>,
}

impl Provider {
    /// Starts a provider on a free loopback port.
    pub async fn start() -> Self {
        let seen = Arc::new(Seen::default());
        let app = Router::new()
            .route("/v1/echo", any(echo))
            .route("/v1/echo/{*rest}", any(echo))
            .route("/v1/charges", any(echo))
            .route("/v1/cursor", get(cursor))
            .route("/v1/runs", get(runs))
            .route("/v1/selflink", get(selflink))
            .route("/v1/kv", get(kv))
            .route("/v1/zones", get(zones))
            .route("/v1/zones-peak", get(zones_peak))
            .route("/v1/linked", get(linked))
            .route("/v1/customers", get(customers))
            .route("/v1/missing", get(missing))
            .route("/v1/redirect", get(redirect))
            .route("/v1/big", get(big))
            .route("/v1/flaky", get(flaky).put(flaky))
            .route("/v1/slow", get(slow).post(slow))
            .route("/v1/payments", axum::routing::post(payments))
            .layer(axum::middleware::from_fn_with_state(seen.clone(), record))
            .with_state(seen.clone());
        Self {
            base: crate::support::serve_on_loopback(app).await,
            seen,
        }
    }

    /// The provider's origin with another path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base.origin().ascii_serialization(), path)
    }
}

async fn record(
    State(seen): State<Arc<Seen>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    seen.requests.fetch_add(1, Ordering::SeqCst);
    let auth = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    seen.authorization.lock().unwrap().push(auth);
    next.run(request).await
}

async fn echo(request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body: Bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let headers: serde_json::Map<String, serde_json::Value> = parts
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or_default())))
        .collect();
    axum::Json(json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "headers": headers,
        "body": String::from_utf8_lossy(&body),
        "body_base64": base64::engine::general_purpose::STANDARD.encode(&body),
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
struct Cursor {
    starting_after: Option<String>,
}

/// Seven items, three per page, Stripe style: `has_more` and `starting_after`.
async fn cursor(Query(cursor): Query<Cursor>) -> Response {
    let start = match cursor.starting_after {
        Some(id) => id.trim_start_matches("item_").parse::<usize>().unwrap_or(0) + 1,
        None => 0,
    };
    let data: Vec<_> = (start..7.min(start + 3))
        .map(|i| json!({"id": format!("item_{i}")}))
        .collect();
    axum::Json(json!({"object": "list", "data": data, "has_more": start + 3 < 7})).into_response()
}

#[derive(serde::Deserialize)]
struct Page {
    page: Option<usize>,
}

/// Five items, two per page, GitHub style: a bare array and a `Link` header.
async fn linked(Query(page): Query<Page>) -> Response {
    let page = page.page.unwrap_or(1);
    let items: Vec<_> = ((page - 1) * 2..(page * 2).min(5))
        .map(|i| json!({"n": i}))
        .collect();
    let mut headers = HeaderMap::new();
    if page * 2 < 5 {
        let next = format!(
            "<http://127.0.0.1/v1/linked?page={}&per_page=2>; rel=\"next\", \
             <http://127.0.0.1/v1/linked?page=3&per_page=2>; rel=\"last\"",
            page + 1
        );
        headers.insert(header::LINK, next.parse().unwrap());
    }
    (headers, axum::Json(items)).into_response()
}

/// Five workflow runs, two per page, GitHub's wrapper style: `total_count`, the items under
/// their own name, and a `Link` header.
async fn runs(Query(page): Query<Page>) -> Response {
    let page = page.page.unwrap_or(1);
    let runs: Vec<_> = ((page - 1) * 2..(page * 2).min(5))
        .map(|i| json!({"id": i}))
        .collect();
    let mut headers = HeaderMap::new();
    if page * 2 < 5 {
        let next = format!(
            "<http://127.0.0.1/v1/runs?page={}&per_page=2>; rel=\"next\"",
            page + 1
        );
        headers.insert(header::LINK, next.parse().unwrap());
    }
    (
        headers,
        axum::Json(json!({"total_count": 5, "workflow_runs": runs})),
    )
        .into_response()
}

#[derive(serde::Deserialize)]
struct KvCursor {
    cursor: Option<String>,
}

/// Five keys, two per page, Cloudflare's cursor style: `result_info.cursor`, empty at the end.
async fn kv(Query(at): Query<KvCursor>) -> Response {
    let start: usize = at
        .cursor
        .as_deref()
        .and_then(|c| c.strip_prefix("c")?.parse().ok())
        .unwrap_or(0);
    let keys: Vec<_> = (start..(start + 2).min(5))
        .map(|i| json!({"name": format!("key{i}")}))
        .collect();
    let next = if start + 2 < 5 {
        format!("c{}", start + 2)
    } else {
        String::new()
    };
    axum::Json(json!({"success": true, "result": keys, "result_info": {"count": keys.len(), "cursor": next}}))
        .into_response()
}

/// A page whose `Link` says the next page is itself.
async fn selflink() -> Response {
    let mut headers = HeaderMap::new();
    let next = "<http://127.0.0.1/v1/selflink?page=1>; rel=\"next\"";
    headers.insert(header::LINK, next.parse().unwrap());
    (headers, axum::Json(json!([{"n": 1}]))).into_response()
}

/// Requests to `/v1/zones` in flight now, and the most there have been at once.
static ZONES_IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static ZONES_PEAK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The most `/v1/zones` requests that were in flight at once.
async fn zones_peak() -> Response {
    axum::Json(json!({"peak": ZONES_PEAK.load(std::sync::atomic::Ordering::SeqCst)}))
        .into_response()
}

/// Five zones, two per page, Cloudflare style: `result` and `result_info.total_pages`, no
/// `Link` header; each page takes 300 ms, as a provider far away does.
async fn zones(Query(page): Query<Page>) -> Response {
    use std::sync::atomic::Ordering::SeqCst;
    let now = ZONES_IN_FLIGHT.fetch_add(1, SeqCst) + 1;
    ZONES_PEAK.fetch_max(now, SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    ZONES_IN_FLIGHT.fetch_sub(1, SeqCst);
    let page = page.page.unwrap_or(1);
    let zones: Vec<_> = ((page - 1) * 2..(page * 2).min(5))
        .map(|i| json!({"name": format!("zone{i}.example")}))
        .collect();
    axum::Json(json!({
        "success": true, "errors": [], "messages": [], "result": zones,
        "result_info": {"page": page, "per_page": 2, "count": zones.len(), "total_count": 5, "total_pages": 3}
    }))
    .into_response()
}

async fn customers() -> Response {
    axum::Json(json!({
        "data": [
            {"id": "cus_1", "email": "ada@example.com", "balance": 1200},
            {"id": "cus_2", "email": "grace@example.com", "balance": 0},
            {"id": "cus_3", "email": "alan@example.com", "balance": 300},
        ],
        "has_more": false,
    }))
    .into_response()
}

async fn missing() -> Response {
    let body =
        json!({"error": {"message": "No such customer: cus_404", "type": "invalid_request_error"}});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

#[derive(serde::Deserialize)]
struct To {
    to: String,
}

async fn redirect(Query(to): Query<To>) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(header::LOCATION, to.to.parse().unwrap());
    (StatusCode::FOUND, headers).into_response()
}

#[derive(serde::Deserialize)]
struct Size {
    n: usize,
}

async fn big(Query(size): Query<Size>) -> Response {
    "x".repeat(size.n).into_response()
}

async fn flaky(State(seen): State<Arc<Seen>>) -> Response {
    if seen.flaky.fetch_add(1, Ordering::SeqCst) == 0 {
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, "0".parse().unwrap());
        return (StatusCode::SERVICE_UNAVAILABLE, headers, "busy").into_response();
    }
    axum::Json(json!({"ok": true})).into_response()
}

/// A payment, made once per `Idempotency-Key` as Stripe makes it: a key seen before gets
/// the first response again (`Idempotent-Replayed: true`). A payment made is answered only
/// after 3 s, past a short request timeout: its outcome is unknown to the caller, who may
/// only retry safely with the same key.
async fn payments(State(seen): State<Arc<Seen>>, headers: HeaderMap) -> Response {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(key) = &key
        && let Some(kept) = seen.payment_keys.lock().unwrap().get(key).cloned()
    {
        return ([("idempotent-replayed", "true")], kept).into_response();
    }
    let n = seen.payments.fetch_add(1, Ordering::SeqCst) + 1;
    let body = json!({"id": format!("pay_{n}"), "key": key}).to_string();
    if let Some(key) = key {
        seen.payment_keys.lock().unwrap().insert(key, body.clone());
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    body.into_response()
}

async fn slow(State(seen): State<Arc<Seen>>) -> Response {
    tokio::time::sleep(Duration::from_secs(3)).await;
    seen.slow_finished.fetch_add(1, Ordering::SeqCst);
    "late".into_response()
}
