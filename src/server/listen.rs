//! The HTTP listener, with the bounds `axum::serve` lacks. A connection costs a lane only
//! once it has sent its first byte: until then it waits among the *pending*, a bounded set
//! where the newest arrival pushes out the one silent the longest, so a flood of sockets that
//! send nothing holds nothing and cannot keep a real client (or a health probe) out. A
//! connection that speaks is served in the main lane (capped, HTTP/1.1, its headers due
//! within a deadline, between kept-alive requests too), or, past the cap, in a small overflow
//! lane that answers `/healthz` and tells everything else to come back (503 with
//! `Retry-After`); past that, it gets the 503 at once. Accept errors (out of descriptors)
//! pause the loop briefly instead of spinning or ending it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::client_address::TrustedProxies;
use crate::fair::{Principal, ShareLimits, Shares};
use crate::lock::lock;

/// Connections the overflow lane serves at once, past the cap.
const OVERFLOW: usize = 64;

/// How long the overflow lane waits for a request's headers.
const OVERFLOW_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the loop pauses when `accept` fails (out of descriptors, say).
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// What a connection gets when both lanes are full.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\nconnection: close\r\n\
content-length: 0\r\n\r\n";

/// The listener's bounds.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections served at once (that have sent a byte).
    pub max_connections: usize,
    /// Connections waiting for their first byte, at most; past it the one silent the
    /// longest is closed.
    pub max_pending: usize,
    /// Time a client has to send a request's headers, on a new connection and between the
    /// requests of a kept-alive one.
    pub header_read_timeout: Duration,
    /// Connections one peer address holds in the main lane (a trusted proxy is not held to
    /// it): below the cap, what is left stays for the other peers.
    pub max_per_peer: usize,
}

/// Connections that have not spoken yet, oldest first, each with what closes it.
#[derive(Default)]
struct Pending {
    next: u64,
    queue: VecDeque<(u64, CancellationToken)>,
}

/// Serves `app` on `listener` until `shutdown`, within `limits`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    trusted: Arc<TrustedProxies>,
    shutdown: CancellationToken,
) {
    let lanes = Lanes {
        app,
        busy: overflow_app(),
        main: Arc::new(Semaphore::new(limits.max_connections.max(1))),
        per_peer: Shares::new(
            "connections",
            ShareLimits {
                total: usize::MAX,
                per_principal: limits.max_per_peer.max(1),
                reserve: 0,
            },
        ),
        trusted,
        overflow: Arc::new(Semaphore::new(OVERFLOW)),
        header_timeout: limits.header_read_timeout,
    };
    let pending = Arc::new(Mutex::new(Pending::default()));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.cancelled() => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed; pausing");
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let (id, silenced) = {
            let mut pending = lock(&pending);
            if pending.queue.len() >= limits.max_pending.max(1)
                && let Some((_, oldest)) = pending.queue.pop_front()
            {
                oldest.cancel();
            }
            pending.next += 1;
            let id = pending.next;
            let token = shutdown.child_token();
            pending.queue.push_back((id, token.clone()));
            (id, token)
        };
        let (lanes, pending) = (lanes.clone(), pending.clone());
        tokio::spawn(async move {
            let mut byte = [0u8; 1];
            let first = tokio::select! {
                spoke = tokio::time::timeout(lanes.header_timeout, stream.peek(&mut byte)) => {
                    matches!(spoke, Ok(Ok(n)) if n > 0)
                }
                _ = silenced.cancelled() => false,
            };
            lock(&pending).queue.retain(|(other, _)| *other != id);
            if first {
                lanes.serve(stream, Peer(peer), silenced).await;
            }
        });
    }
}

/// Where a connection that spoke is served.
#[derive(Clone)]
struct Lanes {
    app: Router,
    busy: Router,
    main: Arc<Semaphore>,
    /// Main-lane connections per peer address.
    per_peer: Arc<Shares>,
    trusted: Arc<TrustedProxies>,
    overflow: Arc<Semaphore>,
    header_timeout: Duration,
}

/// The address a request's connection came from, in the request's extensions: it tells
/// callers apart where nothing else does (see `crate::fair::Principal`).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::SocketAddr);

impl Lanes {
    async fn serve(&self, mut stream: TcpStream, peer: Peer, shutdown: CancellationToken) {
        let address = peer.0.ip();
        // Past its share of the main lane, a peer is served as past the cap: `/healthz`
        // answers, the rest is told to come back.
        let share = if self.trusted.trusts(address) {
            Ok(None)
        } else {
            self.per_peer.try_take(&Principal::peer(address)).map(Some)
        };
        if share.is_err() {
            metrics::counter!("sdkbox_refused_total", "why" => "connections_per_peer").increment(1);
        }
        let main = share
            .ok()
            .and_then(|share| Some((share, self.main.clone().try_acquire_owned().ok()?)));
        if let Some((share, permit)) = main {
            let app = self.app.clone().layer(axum::Extension(peer));
            connection(stream, app, self.header_timeout, shutdown).await;
            drop((share, permit));
        } else if let Ok(permit) = self.overflow.clone().try_acquire_owned() {
            connection(stream, self.busy.clone(), OVERFLOW_HEADER_TIMEOUT, shutdown).await;
            drop(permit);
        } else {
            metrics::counter!("sdkbox_refused_total", "why" => "connections").increment(1);
            let _ = tokio::time::timeout(OVERFLOW_HEADER_TIMEOUT, stream.write_all(BUSY)).await;
        }
    }
}

/// Serves one HTTP/1.1 connection until it ends, or ends it gracefully at shutdown.
async fn connection(
    stream: TcpStream,
    app: Router,
    header_timeout: Duration,
    shutdown: CancellationToken,
) {
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let service = TowerToHyperService::new(app);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
        }
        _ = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(header_timeout, connection).await;
        }
    }
}

/// What a connection past the cap gets: `/healthz` answers, everything else is told to come
/// back.
fn overflow_app() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .fallback(|| async {
            metrics::counter!("sdkbox_refused_total", "why" => "connections").increment(1);
            busy()
        })
}

/// 503 with `Retry-After`, closing the connection.
pub fn busy() -> Response {
    retry_later("the server is as busy as it serves at once; retry shortly\n")
}

/// 503 saying `why`, with `Retry-After`, closing the connection.
pub fn retry_later(why: &'static str) -> Response {
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Raises this process's descriptor limit to its hard limit, so that the connection caps,
/// not the default of 1,024, decide; returns the limit in effect.
pub fn raise_descriptor_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if let Some(hard) = limit.maximum {
        limit.current = Some(hard);
        if let Err(error) = setrlimit(Resource::Nofile, limit) {
            tracing::warn!(%error, "cannot raise the descriptor limit");
        }
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}
