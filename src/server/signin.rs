//! Sign-in on the HTTP transport: the protected resource metadata routes, and the middleware
//! that lets a request reach MCP only with an accepted access token, handing who signed in to
//! the tools through the request's extensions.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::signin::SignIn;

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
/// challenge that tells the client where to sign in; else passes it on with its `SignedIn`.
pub async fn require_sign_in(
    State(sign_in): State<Arc<SignIn>>,
    mut request: Request,
    next: Next,
) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("?"));
    match sign_in.check(authorization).await {
        Ok(signed_in) => {
            tracing::debug!(who = %signed_in.who(), "signed in");
            request.extensions_mut().insert(Arc::new(signed_in));
            next.run(request).await
        }
        Err(refusal) => {
            let (status, challenge, body) = sign_in.challenge(&refusal);
            tracing::info!(status, %challenge, "refused a request's sign-in");
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED);
            let mut response = (status, axum::Json(body)).into_response();
            if let Ok(value) = HeaderValue::from_str(&challenge) {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, value);
            }
            response
        }
    }
}
