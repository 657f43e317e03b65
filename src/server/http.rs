//! Streamable HTTP at `/mcp` (rmcp on axum), with `/healthz`, `/readyz` and `/metrics`
//! (`ops.rs`), and the approval page when it is served on the public URL. Loopback by default;
//! binding elsewhere needs a bearer token, checked in constant time, or sign-in (OAuth, see
//! `crate::signin`, with its protected resource metadata served here). Browser `Origin`s are
//! checked against an allowlist (DNS rebinding), request bodies are capped, connections and
//! sessions are capped (`listen.rs`, `sessions.rs`) and a request's headers must arrive in
//! time.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use super::listen::{ConnectionLimits, busy};
use super::sessions::BoundedSessions;
use super::{Provider, SdkboxServer, ServeError};
use crate::signin::SignIn;

/// How the HTTP transport runs.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The bearer token clients must send; off loopback it or sign-in is required.
    pub token: Option<String>,
    /// Sign-in (OAuth): clients send access tokens of the configured issuer instead.
    pub sign_in: Option<Arc<SignIn>>,
    /// Account linking (needs sign-in): each user acts with their own provider account.
    pub linking: Option<Arc<crate::linking::Linking>>,
    /// Browser origins allowed besides loopback ones (`https://app.example.com`).
    pub allowed_origins: Vec<String>,
    /// Host names clients reach the server by, besides loopback ones.
    pub allowed_hosts: Vec<String>,
    /// No sessions: every request stands alone, so instances can sit behind any balancer.
    pub stateless: bool,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Time a request's whole body may take to arrive once its headers are in.
    pub body_timeout: std::time::Duration,
    /// Connections served at once, and how long a request's headers may take.
    pub connections: ConnectionLimits,
    /// Sessions kept at once.
    pub max_sessions: usize,
    /// How long an unused session lives.
    pub session_idle: std::time::Duration,
    /// Draining and stopping (see `lifecycle.rs`).
    pub lifecycle: super::lifecycle::Lifecycle,
    /// How long a draining server still serves new calls, and how long calls in flight have
    /// to end from the start of the drain.
    pub drain_delay: std::time::Duration,
    /// See `drain_delay`.
    pub grace: std::time::Duration,
    /// The metrics recorder's handle, for `/metrics`.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// Per-caller bounds (requests in flight, event streams).
    pub fairness: crate::fair::Fairness,
    /// Address ranges of proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<String>,
}

/// Serves MCP on `listener`; once `shutdown` is cancelled, drains (see `lifecycle.rs`) and
/// returns when it has stopped.
pub async fn serve_http(
    provider: Arc<Provider>,
    options: HttpOptions,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let address: SocketAddr = listener
        .local_addr()
        .map_err(|e| ServeError(e.to_string()))?;
    if options.token.is_some() && options.sign_in.is_some() {
        return Err(ServeError(
            "--token-env and sign-in (--oauth-issuer, [oauth]) exclude each other: choose one"
                .into(),
        ));
    }
    if !address.ip().is_loopback() && options.token.is_none() && options.sign_in.is_none() {
        return Err(ServeError(format!(
            "refusing to serve on {address} without a bearer token or sign-in: set --token-env NAME, or --oauth-issuer URL with --public-url URL, or bind to 127.0.0.1"
        )));
    }
    let trusted = Arc::new(
        super::client_address::TrustedProxies::parse(&options.trusted_proxies)
            .map_err(ServeError)?,
    );
    let lifecycle = options.lifecycle.clone();
    {
        let lifecycle = lifecycle.clone();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            lifecycle.drain();
        });
    }
    let ending = {
        let lifecycle = lifecycle.clone();
        let (delay, grace) = (options.drain_delay, options.grace);
        tokio::spawn(async move { lifecycle.run(delay, grace).await })
    };
    let mut config = StreamableHttpServerConfig::default();
    config.cancellation_token = lifecycle.stopped().child_token();
    config.max_request_body_bytes = options.max_body_bytes;
    let mut origins = vec![
        "http://localhost:*".to_owned(),
        "http://127.0.0.1:*".to_owned(),
        "http://[::1]:*".to_owned(),
    ];
    origins.extend(options.allowed_origins.iter().cloned());
    config = config.with_allowed_origins(origins);
    let mut allowed_hosts = options.allowed_hosts.clone();
    // Clients reach a signed-in server by its public URL's host (through an ingress): that
    // host is allowed without a flag.
    if let Some(public) = options.sign_in.as_ref().map(|s| &s.settings().public_url)
        && let Some(host) = public.host_str()
    {
        allowed_hosts.push(host.to_owned());
        if let Some(port) = public.port() {
            allowed_hosts.push(format!("{host}:{port}"));
        }
    }
    if !allowed_hosts.is_empty() {
        let mut hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "[::1]".to_owned(),
        ];
        hosts.extend(allowed_hosts);
        config = config.with_allowed_hosts(hosts);
    }
    if options.stateless {
        config.legacy_session_mode = false;
        config.json_response = true;
    }
    let state = provider.approvals.state().clone();
    let sessions = Arc::new(BoundedSessions::new(
        options.max_sessions,
        options.fairness.sessions_per_caller,
        options.session_idle,
        state.clone(),
    ));
    if state.shared() && !options.stateless {
        // Sessions any replica serves: their `initialize` in the store, and the messages of
        // a session held elsewhere forwarded there.
        config.session_store = Some(Arc::new(super::shared_sessions::SharedSessions::new(
            state.clone(),
            options.session_idle,
        )));
        tokio::spawn(sessions.clone().listen());
    }
    let name = format!("sdkbox: {}", provider.name);
    let provider_name = provider.name.clone();
    let for_sessions = options.sign_in.clone();
    let linking = options.linking.clone();
    let for_server = (provider.clone(), lifecycle.clone());
    let service = StreamableHttpService::new(
        move || {
            Ok(SdkboxServer::new(for_server.0.clone(), None)
                .signed_in_by(for_sessions.clone())
                .linked_by(linking.clone())
                .living(for_server.1.clone()))
        },
        sessions.clone(),
        config,
    );
    let token = Arc::new(options.token);
    let room = (sessions, options.max_body_bytes);
    let body = (options.body_timeout, options.max_body_bytes);
    let mcp = Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            provider.approvals.clone(),
            session_closed_is_no_content,
        ))
        .layer(axum::middleware::from_fn_with_state(
            lifecycle.clone(),
            super::lifecycle::refuse_new_calls,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(room),
            sessions_have_room,
        ))
        .layer(axum::middleware::from_fn_with_state(body, body_in_time));
    // Inside sign-in: the principal is who signed in, when someone did. Sized from the
    // connection caps as the descriptor limit leaves them.
    let connections = within_descriptors(options.connections);
    let shares = super::fair_http::HttpShares::new(&options.fairness, connections.max_connections);
    let mcp = mcp.layer(axum::middleware::from_fn_with_state(
        Arc::new(shares),
        super::fair_http::fair_share,
    ));
    let mcp = match &options.sign_in {
        Some(sign_in) => mcp.layer(axum::middleware::from_fn_with_state(
            Arc::new(super::signin::Guard::new(
                sign_in.clone(),
                state.clone(),
                options.session_idle,
            )),
            super::signin::require_sign_in,
        )),
        None => mcp.layer(axum::middleware::from_fn_with_state(token, require_token)),
    };
    let mut app = super::ops::routes(provider.clone(), lifecycle.clone(), options.metrics.clone());
    if let Some(page) = provider.approvals.page().filter(|page| page.is_public()) {
        app = app.merge(page.routes());
        eprintln!("sdkbox: approval page at {}/approve/", page.origin());
    }
    if let Some(sign_in) = &options.sign_in {
        app = app.merge(super::signin::metadata_routes(sign_in.clone(), &name));
        eprintln!(
            "sdkbox: sign-in with {} for {} (resource metadata: {})",
            sign_in.settings().issuer,
            sign_in.settings().public_url,
            sign_in.metadata_url()
        );
        if let Some(linking) = &options.linking {
            app = app.merge(super::linking::routes(
                linking.clone(),
                sign_in.clone(),
                &provider_name,
            ));
            eprintln!(
                "sdkbox: account linking: users link their provider account at {} (callback {})",
                linking
                    .settings()
                    .public_origin
                    .join("link/start/")
                    .map(|u| u.to_string())
                    .unwrap_or_default(),
                linking.settings().redirect_uri
            );
        }
    }
    // The pages and probes take small forms at most: their bodies, like MCP's, must arrive
    // whole and in time, or a client sending a byte at a time would hold a lane forever.
    let small = (options.body_timeout, MAX_PAGE_BODY_BYTES);
    let app = app
        .layer(axum::middleware::from_fn_with_state(small, body_in_time))
        .merge(mcp)
        .layer(axum::middleware::from_fn_with_state(
            trusted.clone(),
            super::client_address::client_address,
        ));
    tracing::info!("serving MCP on http://{address}/mcp");
    eprintln!(
        "sdkbox: MCP endpoint http://{address}/mcp (health: /healthz, readiness: /readyz, metrics: /metrics)"
    );
    super::listen::serve(
        listener,
        app,
        connections,
        trusted,
        lifecycle.stopped().clone(),
    )
    .await;
    let _ = ending.await;
    Ok(())
}

/// The largest body a page, a probe or the sign-in routes take (a form of a few fields).
const MAX_PAGE_BODY_BYTES: usize = 16 * 1024;

/// Descriptors kept for everything but client connections: workers' sockets, the provider's
/// connections, files.
const RESERVED_DESCRIPTORS: u64 = 256;

/// The connection limits, lowered if this process cannot hold that many sockets (its
/// descriptor limit raised to the hard limit first).
fn within_descriptors(limits: ConnectionLimits) -> ConnectionLimits {
    let available = super::listen::raise_descriptor_limit().saturating_sub(RESERVED_DESCRIPTORS);
    let fit = |wanted: usize, room: u64| (wanted as u64).min(room).max(1) as usize;
    let max_connections = fit(limits.max_connections, available / 2);
    let left = available.saturating_sub(max_connections as u64 + 64);
    let max_pending = fit(limits.max_pending, left);
    if (max_connections, max_pending) != (limits.max_connections, limits.max_pending) {
        tracing::warn!(
            max_connections,
            max_pending,
            "the descriptor limit lowers the connection caps"
        );
    }
    ConnectionLimits {
        max_connections,
        max_pending,
        // A peer's share stays below the lowered cap as it was below the asked one.
        max_per_peer: limits
            .max_per_peer
            .min(max_connections - max_connections / 8)
            .max(1),
        ..limits
    }
}

/// Answers an `initialize` that would need a session with 503 and `Retry-After` when every
/// session is busy and the cap is reached (a request of an existing session, or one
/// without a session, goes on).
async fn sessions_have_room(
    State(room): State<Arc<(Arc<BoundedSessions>, usize)>>,
    request: Request,
    next: Next,
) -> Response {
    let (sessions, max_body) = &*room;
    let opens_session = request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    let owner = request
        .extensions()
        .get::<crate::fair::Principal>()
        .cloned()
        .unwrap_or_else(crate::fair::Principal::stdio);
    if !opens_session {
        return next.run(request).await;
    }
    if sessions.room(&owner) {
        // The session rmcp makes for this request is the opener's.
        return super::sessions::OPENER
            .scope(owner, next.run(request))
            .await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, *max_body).await else {
        let mut response =
            (StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response();
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    };
    let initialize = serde_json::from_slice::<serde_json::Value>(&bytes)
        .is_ok_and(|message| message["method"] == "initialize");
    if initialize {
        metrics::counter!("sdkbox_refused_total", "why" => "sessions").increment(1);
        return busy();
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// Reads a request's whole body within its deadline and size before anything else sees it:
/// a client that sends its headers and then its body a byte at a time (or never) would
/// otherwise hold its connection's lane for as long as it likes. Past the deadline, 408;
/// past the size, 413; either way the connection is closed.
async fn body_in_time(
    State((deadline, max_body)): State<(std::time::Duration, usize)>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let refused = |status: StatusCode, why: &'static str| {
        let mut response = (status, why).into_response();
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    };
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, max_body)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Ok(Err(_)) => refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large or cut short\n",
        ),
        Err(_) => refused(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time; send it whole and promptly\n",
        ),
    }
}

/// Answers a session's `DELETE` with 204 instead of rmcp's 202: the session is closed, not
/// queued for closing, and the official Python client warns on anything but 200 or 204.
/// What it left waiting for a human (questions on the page, chains) goes with it.
async fn session_closed_is_no_content(
    State(approvals): State<crate::approval::Approvals>,
    request: Request,
    next: Next,
) -> Response {
    let closed = (request.method() == axum::http::Method::DELETE)
        .then(|| {
            request
                .headers()
                .get("mcp-session-id")?
                .to_str()
                .ok()
                .map(str::to_owned)
        })
        .flatten();
    let mut response = next.run(request).await;
    if let Some(session) = closed
        && response.status() == StatusCode::ACCEPTED
    {
        *response.status_mut() = StatusCode::NO_CONTENT;
        match approvals.forget_session(&session).await {
            Ok(0) => {}
            Ok(forgotten) => {
                tracing::info!(forgotten, "what a closed session left waiting is gone")
            }
            Err(error) => {
                tracing::warn!(%error, "what a closed session left waiting stays until it expires")
            }
        }
    }
    response
}

/// Rejects requests without the bearer token, when one is set.
async fn require_token(
    State(token): State<Arc<Option<String>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = token.as_ref() else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
        return next.run(request).await;
    }
    let mut response =
        (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}
