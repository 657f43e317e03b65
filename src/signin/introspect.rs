//! Opaque access tokens, checked by the issuer's introspection endpoint (RFC 7662) as a
//! client of its own. Answers are cached briefly by the token's digest (never the token
//! itself), bounded in number, and few introspections run at once, so a flood of made-up
//! tokens costs the issuer a bounded trickle of requests.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::Client;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use url::Url;

use super::fetch::read_json;
use super::settings::SignInSettings;
use super::{Invalid, SignedIn};
use crate::lock::lock;

/// How long an introspection's answer is used (at most until the token expires).
const CACHE_FOR: Duration = Duration::from_secs(30);

/// Answers kept at once.
const MAX_CACHED: usize = 10_000;

/// Introspections running at once.
const AT_ONCE: usize = 8;

/// How long a token waits for one of those.
const QUEUE_WAIT: Duration = Duration::from_secs(10);

/// An answer kept until its instant: by the token's SHA-256, never the token.
type Cached = (Instant, Result<SignedIn, Invalid>);

/// The introspection client.
pub(super) struct Introspection {
    client: Client,
    endpoint: Url,
    client_id: String,
    client_secret: String,
    cache: Mutex<HashMap<[u8; 32], Cached>>,
    running: Semaphore,
}

impl Introspection {
    /// Introspects at `endpoint` as `client_id`.
    pub fn new(client: Client, endpoint: Url, client_id: String, client_secret: String) -> Self {
        Self {
            client,
            endpoint,
            client_id,
            client_secret,
            cache: Mutex::default(),
            running: Semaphore::new(AT_ONCE),
        }
    }

    /// Checks an opaque token: active, for this server's audience and issuer, not expired.
    pub async fn check(&self, token: &str, settings: &SignInSettings) -> Result<SignedIn, Invalid> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(known) = self.cached(&digest) {
            return known;
        }
        let Ok(Ok(_slot)) = tokio::time::timeout(QUEUE_WAIT, self.running.acquire()).await else {
            return Err(Invalid(
                "the authorization server is busy checking other tokens; try again".into(),
            ));
        };
        let request = self
            .client
            .post(self.endpoint.clone())
            .basic_auth(&self.client_id, Some(&self.client_secret))
            .header(reqwest::header::ACCEPT, "application/json")
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(
                url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("token", token)
                    .append_pair("token_type_hint", "access_token")
                    .finish(),
            );
        let answer = match read_json(request, &self.endpoint).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(%error, "token introspection failed");
                // Not cached: the next request tries again.
                return Err(Invalid(
                    "the authorization server could not check the token; try again".into(),
                ));
            }
        };
        let (result, until) = judge(&answer, settings);
        let keep = Instant::now() + CACHE_FOR.min(until.unwrap_or(CACHE_FOR));
        let mut cache = lock(&self.cache);
        if cache.len() >= MAX_CACHED {
            let now = Instant::now();
            cache.retain(|_, (until, _)| *until > now);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(digest, (keep, result.clone()));
        result
    }

    fn cached(&self, digest: &[u8; 32]) -> Option<Result<SignedIn, Invalid>> {
        let cache = lock(&self.cache);
        let (until, result) = cache.get(digest)?;
        (*until > Instant::now()).then(|| result.clone())
    }
}

/// What an introspection answer says, and how long it holds.
fn judge(
    answer: &Value,
    settings: &SignInSettings,
) -> (Result<SignedIn, Invalid>, Option<Duration>) {
    if answer["active"] != Value::Bool(true) {
        return (
            Err(Invalid(
                "the token is not active (expired or revoked)".into(),
            )),
            None,
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let left = answer["exp"].as_u64().map(|exp| exp.saturating_sub(now));
    if left == Some(0) {
        return (
            Err(Invalid("the token has expired: get a new one".into())),
            None,
        );
    }
    if let Some(iss) = answer["iss"].as_str()
        && iss != settings.issuer
    {
        return (
            Err(Invalid(format!(
                "the token was issued by another authorization server; this server accepts {}",
                settings.issuer
            ))),
            None,
        );
    }
    let audiences: Vec<&str> = match &answer["aud"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !audiences
        .iter()
        .any(|a| settings.audiences.iter().any(|s| s == a))
    {
        return (
            Err(Invalid(format!(
                "the token is for another resource: its audience must be {}",
                settings.audiences[0]
            ))),
            None,
        );
    }
    // A client credentials token's subject is its client: some servers leave `sub` out then.
    let Some(sub) = [&answer["sub"], &answer["client_id"]]
        .into_iter()
        .find_map(|v| v.as_str().filter(|s| !s.is_empty()))
    else {
        return (
            Err(Invalid("the token names no subject (`sub`)".into())),
            None,
        );
    };
    let mut scopes: Vec<String> = answer["scope"]
        .as_str()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    scopes.sort();
    scopes.dedup();
    let client = answer["client_id"].as_str().map(str::to_owned);
    let signed_in = SignedIn::new(settings, sub.to_owned(), client, scopes);
    (Ok(signed_in), left.map(Duration::from_secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings() -> SignInSettings {
        crate::signin::OAuthFile {
            issuer: Some(Url::parse("https://idp.example.com").unwrap()),
            public_url: Some(Url::parse("https://mcp.example.com/mcp").unwrap()),
            ..Default::default()
        }
        .check(&|_| None)
        .unwrap()
    }

    #[test]
    fn an_answer_counts_only_when_active_for_this_audience_and_issuer() {
        let settings = settings();
        let far = 4_000_000_000u64;
        let good = json!({"active": true, "sub": "alice", "client_id": "c", "aud": "https://mcp.example.com/mcp",
            "iss": "https://idp.example.com", "exp": far, "scope": "sdkbox:read openid"});
        let (ok, _) = judge(&good, &settings);
        let ok = ok.unwrap();
        assert_eq!(ok.subject, "alice");
        assert!(ok.may_read && !ok.may_write);
        for (change, why) in [
            (json!({"active": false}), "not active"),
            (
                json!({"aud": "https://other.example.com/mcp"}),
                "another resource",
            ),
            (json!({"aud": null}), "another resource"),
            (
                json!({"iss": "https://evil.example.com"}),
                "another authorization server",
            ),
            (json!({"exp": 1}), "expired"),
            (json!({"sub": "", "client_id": null}), "no subject"),
        ] {
            let mut answer = good.clone();
            for (k, v) in change.as_object().unwrap() {
                answer[k] = v.clone();
            }
            let error = judge(&answer, &settings).0.unwrap_err().0;
            assert!(error.contains(why), "{change}: {error}");
        }
    }
}
