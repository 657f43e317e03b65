//! Sign-in on the HTTP transport: the protected resource metadata routes, and the middleware
//! that lets a request reach MCP only with an accepted access token, handing who signed in to
//! the tools through the request's extensions. An MCP session belongs to whoever opened it:
//! another signed-in user who learns its id gets 404, as if it did not exist (the MCP
//! security practices' binding of sessions to users). Who opened a session is in the state
//! store, so every replica holds every session to it.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::shared_sessions::owner_key;
use crate::signin::SignIn;
use crate::state::StateStore;

/// Sign-in, and who opened each MCP session (in the state store).
pub struct Guard {
    sign_in: Arc<SignIn>,
    owners: StateStore,
    /// How long a session lives unused: its owner is kept as long.
    idle: Duration,
}

impl Guard {
    /// The guard of a server with sign-in, keeping sessions' owners in `owners` for `idle`
    /// after their last use.
    pub fn new(sign_in: Arc<SignIn>, owners: StateStore, idle: Duration) -> Self {
        Self {
            sign_in,
            owners,
            idle,
        }
    }

    async fn remember(&self, session: &str, who: &str) {
        if let Err(error) = self.owners.put(&owner_key(session), who, self.idle).await {
            // Unknown owner: every later request of the session is refused, never handed on.
            tracing::warn!(%error, "a session's owner could not be kept");
        }
    }

    /// Whether `who` opened `session`; a session whose owner is unknown (forgotten, or the
    /// store cannot say) belongs to nobody.
    async fn owned_by(&self, session: &str, who: &str) -> bool {
        match self.owners.get(&owner_key(session)).await {
            Ok(owner) => owner.is_some_and(|owner| owner == who),
            Err(error) => {
                tracing::warn!(%error, "a session's owner could not be read");
                false
            }
        }
    }
}

/// `GET` of the protected resource metadata, at the root and the resource's path-suffixed
/// well-known paths; any origin may read it (browser-based clients discover it too).
pub fn metadata_routes(sign_in: Arc<SignIn>, name: &str) -> Router {
    let document = Arc::new(sign_in.metadata(name));
    let mut router = Router::new();
    let mut paths = sign_in.metadata_paths().to_vec();
    paths.dedup();
    for path in paths {
        let document = document.clone();
        router = router.route(
            &path,
            get(move || async move {
                let mut response = axum::Json((*document).clone()).into_response();
                response.headers_mut().insert(
                    header::ACCESS_CONTROL_ALLOW_ORIGIN,
                    HeaderValue::from_static("*"),
                );
                response
            }),
        );
    }
    router
}

/// Refuses a request without an accepted token (401, or 403 without the read scope), with the
/// challenge that tells the client where to sign in, and a request in a session another
/// caller opened (404); else passes it on with its `SignedIn`.
pub async fn require_sign_in(
    State(guard): State<Arc<Guard>>,
    mut request: Request,
    next: Next,
) -> Response {
    let sign_in = &guard.sign_in;
    let peer = request
        .extensions()
        .get::<super::client_address::ClientAddress>()
        .map(|client| crate::fair::Principal::peer(client.0));
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("?"));
    let signed_in = match sign_in.check_from(authorization, peer.as_ref()).await {
        Ok(signed_in) => signed_in,
        Err(refusal) => {
            let (status, challenge, body) = sign_in.challenge(&refusal);
            tracing::info!(status, %challenge, "refused a request's sign-in");
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED);
            let mut response = (status, axum::Json(body)).into_response();
            let headers = response.headers_mut();
            if status == StatusCode::SERVICE_UNAVAILABLE {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            } else if let Ok(value) = HeaderValue::from_str(&challenge) {
                headers.insert(header::WWW_AUTHENTICATE, value);
            }
            // Refused before its body was read, the connection cannot serve another request:
            // said so, a client does not send its next one (the token request's retry) down a
            // connection the server is closing (the official Python client's connect failed
            // with ReadError under load).
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    let who = signed_in.who();
    let session = request
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap_or("?").to_owned());
    if let Some(session) = &session
        && !guard.owned_by(session, &who).await
    {
        tracing::info!("refused a request in a session another caller opened");
        return (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({"error": "session not found: start a new one"})),
        )
            .into_response();
    }
    tracing::debug!(%who, "signed in");
    request.extensions_mut().insert(Arc::new(signed_in));
    let response = next.run(request).await;
    if session.is_none()
        && let Some(opened) = response.headers().get("mcp-session-id")
        && let Ok(opened) = opened.to_str()
    {
        guard.remember(opened, &who).await;
    }
    response
}
