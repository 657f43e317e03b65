//! Account linking's HTTP routes, on the public origin: `GET /link/start/{id}` sends the
//! browser to the sign-in issuer; `GET /link/confirm` checks that it signed in as the link's
//! user, binds it to the link with a cookie and sends it to the provider to authorize sdkbox;
//! the provider sends it back to the callback (`/link/callback` unless configured), which, in
//! that browser only, stores the tokens and says "linked, return to your chat".
//! `GET /link` is a page whose button (`POST /link/unlink`) signs the browser in the same way
//! and unlinks that user; `DELETE /link` with the user's sign-in token unlinks them too.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};

use crate::approval::page::escape;
use crate::linking::{CONFIRM_PATH, Confirmed, Linking};
use crate::signin::SignIn;

/// What the routes need.
struct Linked {
    linking: Arc<Linking>,
    sign_in: Arc<SignIn>,
    provider: String,
    /// Confirmations each client address may try: each costs a token request at the sign-in
    /// issuer.
    confirms: crate::fair::Rate,
    /// Confirmations everyone together may try.
    all_confirms: std::sync::Mutex<crate::fair::Bucket>,
}

/// Confirmations all addresses together may try each second, on average, and at once.
const ALL_CONFIRMS_PER_SECOND: f64 = 10.0;
const ALL_CONFIRMS_BURST: f64 = 50.0;

/// Confirmations one peer may try each second, on average, and at once.
const CONFIRMS_PER_SECOND: f64 = 0.5;
const CONFIRMS_BURST: f64 = 5.0;

/// The name of the cookie that binds a browser to the link it opened: `__Host-` on https,
/// so that no other host (a sibling subdomain) can plant one.
fn cookie_name(state: &Linked) -> &'static str {
    if state.linking.settings().public_origin.scheme() == "https" {
        "__Host-sdkbox_link"
    } else {
        "sdkbox_link"
    }
}

/// The linking routes.
pub fn routes(linking: Arc<Linking>, sign_in: Arc<SignIn>, provider: &str) -> Router {
    let callback = linking.settings().redirect_uri.path().to_owned();
    let state = Arc::new(Linked {
        linking,
        sign_in,
        provider: provider.to_owned(),
        confirms: crate::fair::Rate::new(CONFIRMS_PER_SECOND, CONFIRMS_BURST),
        all_confirms: std::sync::Mutex::new(crate::fair::Bucket::full(ALL_CONFIRMS_BURST)),
    });
    Router::new()
        .route("/link/start/{id}", get(start))
        .route(CONFIRM_PATH, get(confirm))
        .route(&callback, get(callback_page))
        .route("/link", get(unlink_page).delete(unlink))
        .route("/link/unlink", post(unlink_in_browser))
        .with_state(state)
}

/// A small page for the browser, never cached, never framed.
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    html_page(status, title, &format!("<p>{}</p>", escape(text)))
}

/// A page of `title` (escaped here) over `inner`, HTML this module wrote.
fn html_page(status: StatusCode, title: &str, inner: &str) -> Response {
    let body = format!(
        "<!doctype html><meta charset=utf-8><meta name=viewport content=\"width=device-width\"><title>{title}</title><body style=\"font-family:system-ui;max-width:36em;margin:4em auto\"><h1>{title}</h1>{inner}",
        title = escape(title),
    );
    let mut response = (status, Html(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// A redirect to `url`, telling no one where it came from.
fn redirect(url: &url::Url) -> Response {
    let mut response = StatusCode::FOUND.into_response();
    let headers = response.headers_mut();
    if let Ok(location) = HeaderValue::from_str(url.as_str()) {
        headers.insert(header::LOCATION, location);
    }
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The link cookie the request carries; none when it carries several (one was planted).
fn cookie(state: &Linked, headers: &HeaderMap) -> Option<String> {
    let name = cookie_name(state);
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(n, _)| *n == name)
        .map(|(_, value)| value.to_owned());
    let first = found.next();
    if found.next().is_some() {
        return None;
    }
    first
}

const EXPIRED: &str =
    "This link has expired or was already used. Run the tool again in your chat for a new one.";

async fn start(State(state): State<Arc<Linked>>, Path(id): Path<String>) -> Response {
    let Some(value) = crate::approval::random_hex(32) else {
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again",
            "No randomness.",
        );
    };
    match state.linking.start_url(&id, &value).await {
        Ok(Some(url)) => with_cookie(redirect(&url), &state, &value),
        Ok(None) => page(StatusCode::NOT_FOUND, "Link expired", EXPIRED),
        Err(error) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again",
            &format!("sdkbox cannot start the link now ({error}). Try again in a moment."),
        ),
    }
}

#[derive(serde::Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// The cookie that binds this browser to `value`'s link or unlink, for ten minutes.
fn with_cookie(mut response: Response, state: &Linked, value: &str) -> Response {
    let secure = if state.linking.settings().public_origin.scheme() == "https" {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{}={value}; Path=/; Max-Age=600; HttpOnly; SameSite=Lax{secure}",
        cookie_name(state)
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn confirm(
    State(state): State<Arc<Linked>>,
    Query(query): Query<Callback>,
    peer: Option<axum::Extension<super::client_address::ClientAddress>>,
    headers: HeaderMap,
) -> Response {
    let allowed = peer.is_none_or(|axum::Extension(client)| {
        state
            .confirms
            .allow(&crate::fair::Principal::peer(client.0))
    }) && crate::lock::lock(&state.all_confirms)
        .take(ALL_CONFIRMS_PER_SECOND, ALL_CONFIRMS_BURST);
    if !allowed {
        return page(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many tries",
            "This address tried to confirm too many links just now. Wait a minute, then open the link from your chat again.",
        );
    }
    let (Some(id), Some(code)) = (query.state.as_deref(), query.code.as_deref()) else {
        return page(
            StatusCode::BAD_REQUEST,
            "Not linked",
            "Signing in did not finish. Run the tool again in your chat for a new link.",
        );
    };
    let provider = &state.provider;
    match state
        .linking
        .confirm(id, code, cookie(&state, &headers).as_deref())
        .await
    {
        Confirmed::Provider(url) => redirect(&url),
        Confirmed::Unlinked(true) => page(
            StatusCode::OK,
            "Unlinked",
            &format!(
                "Your {provider} account is no longer linked to sdkbox, and its tokens were revoked. sdkbox asks you to link again the next time it needs it."
            ),
        ),
        Confirmed::Unlinked(false) => page(
            StatusCode::OK,
            "Nothing to unlink",
            &format!("No {provider} account was linked to your sdkbox user."),
        ),
        Confirmed::Refused(why) => page(
            StatusCode::FORBIDDEN,
            "Not done",
            &format!("Not done: {why}."),
        ),
    }
}

/// `GET /link`: a page with one button, which unlinks whoever signs in after pressing it.
async fn unlink_page(State(state): State<Arc<Linked>>) -> Response {
    let provider = escape(&state.provider);
    html_page(
        StatusCode::OK,
        &format!("Unlink your {} account", state.provider),
        &format!(
            "<p>sdkbox acts with the {provider} account you linked. Unlinking forgets it and revokes its tokens; you sign in first, so that only your own link goes.</p><form method=post action=/link/unlink><button>Sign in and unlink</button></form>"
        ),
    )
}

/// `POST /link/unlink`: from this origin's page only (a cross-site form cannot unlink anyone);
/// the browser signs in, bound to this unlink by a cookie.
async fn unlink_in_browser(State(state): State<Arc<Linked>>, headers: HeaderMap) -> Response {
    let origin = state
        .linking
        .settings()
        .public_origin
        .origin()
        .ascii_serialization();
    let sent = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    if sent.is_some_and(|sent| sent != origin) {
        return page(
            StatusCode::FORBIDDEN,
            "Not done",
            "Unlinking starts from sdkbox's own /link page.",
        );
    }
    match state.linking.unlink_in_browser().await {
        Ok((url, value)) => {
            let mut response = with_cookie(redirect(&url), &state, &value);
            *response.status_mut() = StatusCode::SEE_OTHER;
            response
        }
        Err(error) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Try again",
            &format!("sdkbox cannot unlink now ({error}). Try again in a moment."),
        ),
    }
}

/// RFC 6749's error codes: the only provider errors a page repeats (the query is anyone's).
const KNOWN_ERRORS: [&str; 7] = [
    "access_denied",
    "invalid_request",
    "unauthorized_client",
    "unsupported_response_type",
    "invalid_scope",
    "server_error",
    "temporarily_unavailable",
];

async fn callback_page(
    State(state): State<Arc<Linked>>,
    Query(query): Query<Callback>,
    headers: HeaderMap,
) -> Response {
    let provider = &state.provider;
    let Some(link) = query.state.as_deref() else {
        return page(
            StatusCode::BAD_REQUEST,
            "Not linked",
            "The provider sent no state.",
        );
    };
    let cookie = cookie(&state, &headers);
    if let Some(error) = &query.error {
        // The offer is spent (in the browser that confirmed it): a refusal is an answer.
        let _ = state.linking.withdraw(link, cookie.as_deref()).await;
        let said = KNOWN_ERRORS
            .iter()
            .find(|k| **k == error.as_str())
            .map_or(String::new(), |k| format!(" ({k})"));
        return page(
            StatusCode::OK,
            "Not linked",
            &format!(
                "{provider} did not authorize sdkbox{said}: your account was not linked. Run the tool again in your chat to retry."
            ),
        );
    }
    let Some(code) = query.code.as_deref().filter(|c| !c.is_empty()) else {
        return page(
            StatusCode::BAD_REQUEST,
            "Not linked",
            "The provider sent no code.",
        );
    };
    match state.linking.complete(link, code, cookie.as_deref()).await {
        Ok(()) => {
            tracing::info!("a provider account was linked");
            page(
                StatusCode::OK,
                "Linked",
                &format!("Your {provider} account is linked to sdkbox. Return to your chat."),
            )
        }
        Err(why) => page(
            StatusCode::BAD_REQUEST,
            "Not linked",
            &format!(
                "Your {provider} account was not linked: {why}. Run the tool again in your chat for a new link."
            ),
        ),
    }
}

/// `DELETE /link` with `Authorization: Bearer <sign-in token>`: forgets the caller's link and
/// revokes its tokens at the provider.
async fn unlink(
    State(state): State<Arc<Linked>>,
    peer: Option<axum::Extension<super::client_address::ClientAddress>>,
    headers: HeaderMap,
) -> Response {
    let peer = peer.map(|client| crate::fair::Principal::peer(client.0.0));
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("?"));
    let signed_in = match state.sign_in.check_from(authorization, peer.as_ref()).await {
        Ok(signed_in) => signed_in,
        Err(refusal) => {
            let (status, challenge, body) = state.sign_in.challenge(&refusal);
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED);
            let mut response = (status, axum::Json(body)).into_response();
            if let Ok(value) = HeaderValue::from_str(&challenge) {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, value);
            }
            return response;
        }
    };
    match state.linking.unlink(&signed_in.user()).await {
        Ok(was) => axum::Json(serde_json::json!({"unlinked": was})).into_response(),
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({"error": error.to_string()})),
        )
            .into_response(),
    }
}
