//! The bundled demo provider, "Acme Shop": a small but realistic API (customers, products,
//! orders, refunds, files and product pictures; cursor pagination, validation errors, bearer auth with a demo key) served
//! from memory on a free loopback port, so a new user sees the whole loop with no key and no
//! network. Its spec and guides live in `docs-index/demo/` and are embedded in the binary.

mod files;
mod store;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use store::{Failure, ListQuery, Store};

/// The demo's API key; documented in its spec and guides.
pub const DEMO_KEY: &str = "demo_key_123";

/// The demo's OpenAPI spec.
pub const SPEC: &str = include_str!("../../docs-index/demo/openapi.yaml");

/// The demo's guides: (file stem, markdown).
pub const GUIDES: &[(&str, &str)] = &[
    (
        "getting-started",
        include_str!("../../docs-index/demo/guides/getting-started.md"),
    ),
    (
        "orders-and-refunds",
        include_str!("../../docs-index/demo/guides/orders-and-refunds.md"),
    ),
    (
        "errors",
        include_str!("../../docs-index/demo/guides/errors.md"),
    ),
];

type Shared = Arc<Mutex<Store>>;

/// Starts the demo API on 127.0.0.1 and a free port; returns its address. It stops when
/// `shutdown` is cancelled.
pub async fn start(shutdown: CancellationToken) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let app = router(Arc::new(Mutex::new(Store::seeded())));
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(error) = served.await {
            tracing::error!(%error, "the demo provider stopped");
        }
    });
    Ok(address)
}

fn router(store: Shared) -> Router {
    Router::new()
        .route("/v1/customers", get(list_customers).post(create_customer))
        .route(
            "/v1/customers/{id}",
            get(get_customer)
                .post(update_customer)
                .delete(delete_customer),
        )
        .route("/v1/products", get(list_products))
        .route("/v1/products/{id}", get(get_product))
        .route("/v1/products/{id}/image", get(files::product_image))
        .route("/v1/files", post(files::upload))
        .route("/v1/files/{id}", get(files::metadata))
        .route("/v1/files/{id}/content", get(files::content))
        .route("/v1/orders", get(list_orders).post(create_order))
        .route("/v1/orders/{id}", get(get_order))
        .route("/v1/orders/{id}/cancel", post(cancel_order))
        .route("/v1/refunds", get(list_refunds).post(create_refund))
        .route("/v1/refunds/{id}", get(get_refund))
        .layer(axum::extract::DefaultBodyLimit::max(10 * 1024 * 1024))
        .layer(axum::middleware::from_fn(require_key))
        .layer(axum::middleware::map_response(provider_errors))
        .with_state(store)
}

/// Axum answers a body, query or path it cannot parse with plain text; the demo answers every
/// error in its own shape, as the spec and guides document.
async fn provider_errors(response: Response) -> Response {
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/plain"));
    if !response.status().is_client_error() || !plain {
        return response;
    }
    let status = response.status();
    let text = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    error(status, "invalid_request_error", text, None)
}

/// A provider-style error: `{ "error": { "type", "message", "param"? } }`.
fn error(status: StatusCode, kind: &str, message: String, param: Option<&str>) -> Response {
    let mut body = json!({"error": {"type": kind, "message": message}});
    if let Some(param) = param {
        body["error"]["param"] = json!(param);
    }
    (status, axum::Json(body)).into_response()
}

async fn require_key(request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if given == Some(&format!("Bearer {DEMO_KEY}")) {
        return next.run(request).await;
    }
    error(
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        format!("invalid API key: send `Authorization: Bearer {DEMO_KEY}`"),
        None,
    )
}

fn reply(result: Result<Value, Failure>) -> Response {
    match result {
        Ok(value) => axum::Json(value).into_response(),
        Err(failure) => error(failure.status, failure.kind, failure.message, failure.param),
    }
}

fn lock(store: &Shared) -> std::sync::MutexGuard<'_, Store> {
    store
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn list_customers(State(s): State<Shared>, Query(q): Query<ListQuery>) -> Response {
    reply(lock(&s).list_customers(&q))
}
async fn create_customer(State(s): State<Shared>, body: axum::Json<Value>) -> Response {
    reply(lock(&s).create_customer(&body))
}
async fn get_customer(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    reply(lock(&s).get("customer", &id))
}
async fn update_customer(
    State(s): State<Shared>,
    Path(id): Path<String>,
    body: axum::Json<Value>,
) -> Response {
    reply(lock(&s).update_customer(&id, &body))
}
async fn delete_customer(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    reply(lock(&s).delete_customer(&id))
}
async fn list_products(State(s): State<Shared>, Query(q): Query<ListQuery>) -> Response {
    reply(lock(&s).list_products(&q))
}
async fn get_product(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    reply(lock(&s).get("product", &id))
}
async fn list_orders(State(s): State<Shared>, Query(q): Query<ListQuery>) -> Response {
    reply(lock(&s).list_orders(&q))
}
async fn create_order(State(s): State<Shared>, body: axum::Json<Value>) -> Response {
    reply(lock(&s).create_order(&body))
}
async fn get_order(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    reply(lock(&s).get("order", &id))
}
async fn cancel_order(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    reply(lock(&s).cancel_order(&id))
}
async fn list_refunds(State(s): State<Shared>, Query(q): Query<ListQuery>) -> Response {
    reply(lock(&s).list_refunds(&q))
}
async fn create_refund(State(s): State<Shared>, body: axum::Json<Value>) -> Response {
    reply(lock(&s).create_refund(&body))
}
async fn get_refund(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    reply(lock(&s).get("refund", &id))
}
