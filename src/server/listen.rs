//! The HTTP listener, with the bounds `axum::serve` lacks: a cap on connections, a deadline
//! for a request's headers (so sockets that send nothing, or send slowly, are closed), and an
//! overflow lane that keeps answering `/healthz` (and tells everything else to come back,
//! 503 with `Retry-After`) while the cap is reached. Accept errors (out of descriptors) pause
//! the loop briefly instead of spinning or ending it.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Connections the overflow lane serves at once, past the cap; past these, new sockets are
/// closed at once.
const OVERFLOW: usize = 64;

/// How long the overflow lane waits for a request's headers.
const OVERFLOW_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the loop pauses when `accept` fails (out of descriptors, say).
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// The listener's bounds.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time a client has to send a request's headers, on a new connection and between the
    /// requests of a kept-alive one.
    pub header_read_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown`, within `limits`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let overflow = Arc::new(Semaphore::new(OVERFLOW));
    let busy = overflow_app();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.cancelled() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "accept failed; pausing");
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let (permit, service, header_timeout) = match slots.clone().try_acquire_owned() {
            Ok(permit) => (permit, app.clone(), limits.header_read_timeout),
            Err(_) => match overflow.clone().try_acquire_owned() {
                Ok(permit) => (permit, busy.clone(), OVERFLOW_HEADER_TIMEOUT),
                // Past the cap and the overflow lane: closed, costing nothing more.
                Err(_) => continue,
            },
        };
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            connection(stream, service, header_timeout, shutdown).await;
            drop(permit);
        });
    }
}

/// Serves one connection until it ends, or ends it gracefully at shutdown.
async fn connection(
    stream: tokio::net::TcpStream,
    app: Router,
    header_timeout: Duration,
    shutdown: CancellationToken,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(header_timeout))
        .keep_alive_timeout(header_timeout);
    let service = TowerToHyperService::new(app);
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
        }
        _ = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// What a connection past the cap gets: `/healthz` answers, everything else is told to come
/// back.
fn overflow_app() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .fallback(|| async { busy() })
}

/// 503 with `Retry-After`, closing the connection.
pub fn busy() -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        "the server has as many connections as it serves at once; retry shortly\n",
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
