//! What operators and balancers ask an HTTP server: `/healthz` (the process answers: a
//! liveness probe), `/readyz` (it should get work: not draining, the state store answers,
//! the worker pool has workers; what the type check is doing is said, not judged), and
//! `/metrics` (Prometheus' text format). None needs a token: they say nothing about any
//! caller.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;

use super::Provider;
use super::lifecycle::Lifecycle;

/// How long one check of the state store answers readiness: probes (anyone may send them)
/// cost the store one write and one read a second at most, however many arrive.
const STORE_CHECK_LIFETIME: std::time::Duration = std::time::Duration::from_secs(1);

/// What the probes read.
struct Probed {
    provider: Arc<Provider>,
    lifecycle: Lifecycle,
    metrics: Option<PrometheusHandle>,
    /// The last check of the state store: when, and what it found. Probes that arrive while
    /// one checks wait for its answer.
    store_checked: tokio::sync::Mutex<Option<(tokio::time::Instant, Result<(), String>)>>,
}

impl Probed {
    /// Whether the state store takes and keeps records, checked once a second at most.
    async fn store(&self) -> Result<(), String> {
        let mut checked = self.store_checked.lock().await;
        if let Some((at, found)) = &*checked
            && at.elapsed() < STORE_CHECK_LIFETIME
        {
            return found.clone();
        }
        let state = self.provider.approvals.state();
        let found = state.ping().await.map_err(|error| error.to_string());
        *checked = Some((tokio::time::Instant::now(), found.clone()));
        found
    }
}

/// The routes: `/healthz`, `/readyz`, and `/metrics` when a recorder is installed.
pub fn routes(
    provider: Arc<Provider>,
    lifecycle: Lifecycle,
    metrics: Option<PrometheusHandle>,
) -> Router {
    let probed = Arc::new(Probed {
        provider,
        lifecycle,
        metrics,
        store_checked: tokio::sync::Mutex::new(None),
    });
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(render))
        .with_state(probed)
}

async fn ready(State(probed): State<Arc<Probed>>) -> Response {
    let mut why = Vec::new();
    if probed.lifecycle.draining() {
        why.push("draining: the server is shutting down".to_owned());
    }
    let state = probed.provider.approvals.state();
    let store = match probed.store().await {
        Ok(()) => "ok".to_owned(),
        Err(error) => {
            why.push(error.clone());
            error
        }
    };
    let workers = probed.provider.pool.workers_alive();
    if workers == 0 {
        why.push("no sandbox worker is alive".to_owned());
    }
    let typecheck = probed
        .provider
        .typecheck
        .as_ref()
        .map_or("off", |check| check.status());
    let body = json!({
        "ready": why.is_empty(),
        "why": why,
        "state_store": { "shared": state.shared(), "status": store },
        "workers_alive": workers,
        "calls_in_flight": probed.lifecycle.calls(),
        "typecheck": typecheck,
    });
    let status = match why.is_empty() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, axum::Json(body)).into_response()
}

async fn render(State(probed): State<Arc<Probed>>) -> Response {
    let Some(handle) = &probed.metrics else {
        return (StatusCode::NOT_FOUND, "metrics are not recorded\n").into_response();
    };
    // Gauges of what is, read when asked.
    metrics::gauge!("sdkbox_calls_in_flight").set(probed.lifecycle.calls() as f64);
    metrics::gauge!("sdkbox_draining").set(f64::from(u8::from(probed.lifecycle.draining())));
    metrics::gauge!("sdkbox_workers_alive").set(probed.provider.pool.workers_alive() as f64);
    let mut response = handle.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
