//! The few requests sign-in makes to the authorization server (metadata, keys,
//! introspection): each bounded in time and size, so a slow or hostile server costs a refused
//! token, never a stuck or swollen process.

use std::time::Duration;

use reqwest::Client;
use serde_json::Value;
use url::Url;

use super::SignInError;

/// How long one request to the authorization server may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest document read from it (metadata, a key set, an introspection answer).
const MAX_DOCUMENT_BYTES: usize = 512 * 1024;

/// The HTTP client sign-in uses: its own, with no cookies and no redirects (a redirect could
/// downgrade to plain http, or carry a token being introspected elsewhere).
pub(crate) fn client() -> Result<Client, SignInError> {
    Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("sdkbox/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| SignInError::Unreachable(format!("cannot build an HTTP client: {e}")))
}

/// Whether `url` may carry keys, tokens or secrets: https, or plain http on loopback.
pub(crate) fn secure(url: &Url) -> bool {
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    url.scheme() == "https" || (url.scheme() == "http" && loopback)
}

/// GETs a JSON document.
pub(crate) async fn get_json(client: &Client, url: &Url) -> Result<Value, SignInError> {
    let request = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json");
    read_json(request, url).await
}

/// Sends `request` and reads its JSON answer, within the size bound.
pub(crate) async fn read_json(
    request: reqwest::RequestBuilder,
    url: &Url,
) -> Result<Value, SignInError> {
    let unreachable = |why: String| SignInError::Unreachable(format!("{url}: {why}"));
    if !secure(url) {
        return Err(SignInError::Settings(format!(
            "{url} must be https (plain http only on loopback)"
        )));
    }
    let response = request
        .send()
        .await
        .map_err(|e| unreachable(crate::capped::fetch_error(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(unreachable(format!("HTTP {status}")));
    }
    let body = crate::capped::capped_body(response, MAX_DOCUMENT_BYTES)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    serde_json::from_slice(&body).map_err(|e| unreachable(format!("not JSON: {e}")))
}

/// An OAuth client sdkbox is: its id, its secret if confidential, how it authenticates.
#[derive(Clone)]
pub struct OAuthClient {
    /// The client id.
    pub id: String,
    /// The secret, if it is a confidential client.
    pub secret: Option<String>,
    /// How it authenticates at token and revocation endpoints.
    pub auth: TokenAuth,
}

/// Client authentication at the token endpoint (RFC 6749 §2.3.1).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenAuth {
    /// HTTP Basic with the form-encoded id and secret (`client_secret_basic`).
    #[default]
    Basic,
    /// The id and secret in the form (`client_secret_post`).
    Post,
}

/// A form POST of `form` to `endpoint`, authenticated as `as_client` (RFC 6749 §2.3.1): the
/// one way sdkbox speaks to token, revocation and introspection endpoints.
pub(crate) fn form_post(
    client: &Client,
    as_client: &OAuthClient,
    endpoint: &Url,
    form: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    let basic = as_client.auth == TokenAuth::Basic && as_client.secret.is_some();
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    body.extend_pairs(form);
    if !basic {
        body.append_pair("client_id", &as_client.id);
        if let Some(secret) = &as_client.secret {
            body.append_pair("client_secret", secret);
        }
    }
    let request = client
        .post(endpoint.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body.finish());
    match (basic, &as_client.secret) {
        // Both form-encoded before Basic, so a `+` or `:` in them survives.
        (true, Some(secret)) => {
            request.basic_auth(form_encoded(&as_client.id), Some(form_encoded(secret)))
        }
        _ => request,
    }
}

/// `text` form-encoded, as a client's id and secret are before HTTP Basic.
fn form_encoded(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
