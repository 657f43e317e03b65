//! The provider's token endpoint: a code exchanged for tokens (with its PKCE verifier), a
//! refresh token for a new access token, and revocation on unlink. Each request is bounded
//! in time and size and follows no redirect, like sign-in's requests.

use serde::{Deserialize, Serialize};
use url::Url;

use super::settings::OAuthClient;

/// A linked account's tokens, as stored (sealed).
#[derive(Clone, Serialize, Deserialize)]
pub struct Tokens {
    /// The access token egress sends for this user.
    pub access_token: String,
    /// The refresh token, if the provider gave one.
    pub refresh_token: Option<String>,
    /// When the access token expires (Unix seconds), if the provider said.
    pub expires_at: Option<u64>,
    /// The scopes granted, if the provider said.
    pub scope: Option<String>,
}

impl std::fmt::Debug for Tokens {
    /// Nothing of the tokens themselves.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// Why the token endpoint gave no tokens.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The provider refused the grant (RFC 6749 §5.2: `invalid_grant` and the like): the
    /// user must link again.
    #[error("the authorization server refused the grant: {0}")]
    Refused(String),
    /// The provider did not answer usably; trying again later may work.
    #[error("the authorization server's token endpoint: {0}")]
    Unreachable(String),
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Posts `form` to `endpoint` as sdkbox's client, and reads the answer's tokens.
pub async fn request(
    client: &reqwest::Client,
    client_auth: &OAuthClient,
    endpoint: &Url,
    form: &[(&str, &str)],
    previous_refresh: Option<&str>,
) -> Result<Tokens, TokenError> {
    let response = crate::signin::fetch::form_post(client, client_auth, endpoint, form)
        .send()
        .await
        .map_err(|e| TokenError::Unreachable(e.to_string()))?;
    let status = response.status();
    let bytes = crate::capped::capped_body(response, 64 * 1024)
        .await
        .map_err(|e| TokenError::Unreachable(e.to_string()))?;
    let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    if !status.is_success() {
        // RFC 6749 §5.2's error code, as its grammar allows (no quotes, no controls), short.
        let error: String = answer["error"]
            .as_str()
            .unwrap_or("")
            .chars()
            .filter(|c| matches!(c, ' ' | '!' | '#'..='[' | ']'..='~'))
            .take(64)
            .collect();
        let said = format!("HTTP {status} {error}").trim().to_owned();
        // Only a refused grant means the user must link again; a refused client
        // (`invalid_client`, a wrong secret) or request is sdkbox's configuration, which
        // must not cost every user their link.
        return Err(if error == "invalid_grant" {
            TokenError::Refused(said)
        } else if matches!(error.as_str(), "invalid_client" | "unauthorized_client") {
            TokenError::Unreachable(format!(
                "{said}: it refused sdkbox's client; check the client id and secret in [provider_oauth] (client_id for the provider, confirm_client_id for the sign-in issuer)"
            ))
        } else {
            TokenError::Unreachable(said)
        });
    }
    let access_token = answer["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| TokenError::Unreachable("the answer has no access_token".into()))?;
    Ok(Tokens {
        access_token: access_token.to_owned(),
        // A provider that does not rotate refresh tokens sends none with a refresh.
        refresh_token: answer["refresh_token"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| previous_refresh.map(str::to_owned)),
        // A number or a numeric string; a year at most, so nothing overflows.
        expires_at: answer["expires_in"]
            .as_u64()
            .or_else(|| answer["expires_in"].as_str().and_then(|s| s.parse().ok()))
            .map(|s: u64| now().saturating_add(s.min(366 * 24 * 3600))),
        scope: answer["scope"].as_str().map(str::to_owned),
    })
}

/// Revokes `token` at `endpoint` (RFC 7009); failures are the provider's to forget.
pub async fn revoke(
    client: &reqwest::Client,
    client_auth: &OAuthClient,
    endpoint: &Url,
    token: &str,
    hint: &str,
) {
    let form = [("token", token), ("token_type_hint", hint)];
    let request = crate::signin::fetch::form_post(client, client_auth, endpoint, &form);
    if let Err(error) = request.send().await {
        tracing::warn!("revoking a provider token: {error}");
    }
}
