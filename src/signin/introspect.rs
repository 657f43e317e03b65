//! Opaque access tokens, checked by the issuer's introspection endpoint (RFC 7662) as a
//! client of its own. Answers are cached briefly by the token's digest (never the token
//! itself), valid and refused ones apart, each bounded in number; few introspections run at
//! once and few new ones start each second, so a flood of made-up tokens costs the issuer a
//! bounded trickle of requests and evicts no valid token's answer. When the issuer cannot
//! answer (busy, down, over the rate), the client is told to retry (503), never that its
//! token is bad: a client that hears `invalid_token` throws its token away.

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
use super::{Invalid, Refusal, SignedIn};
use crate::lock::lock;

/// How long an introspection's answer is used (at most until the token expires).
const CACHE_FOR: Duration = Duration::from_secs(30);

/// Answers kept at once.
const MAX_CACHED: usize = 10_000;

/// Introspections running at once.
const AT_ONCE: usize = 8;

/// New introspections that may start each second, on average, and at once after a pause.
const PER_SECOND: f64 = 20.0;
const BURST: f64 = 40.0;

/// How long a token waits for one of those.
const QUEUE_WAIT: Duration = Duration::from_secs(10);

/// An answer kept until its instant: by the token's SHA-256, never the token.
type Cached = (Instant, Result<SignedIn, Invalid>);

/// The introspection client.
pub(super) struct Introspection {
    client: Client,
    endpoint: Url,
    as_client: super::fetch::OAuthClient,
    accepted: Mutex<HashMap<[u8; 32], Cached>>,
    refused: Mutex<HashMap<[u8; 32], Cached>>,
    running: Semaphore,
    /// The token bucket of new introspections: what is left, and when it was last filled.
    bucket: Mutex<(f64, Instant)>,
}

impl Introspection {
    /// Introspects at `endpoint` as `client_id`.
    pub fn new(client: Client, endpoint: Url, client_id: String, client_secret: String) -> Self {
        Self {
            client,
            endpoint,
            as_client: super::fetch::OAuthClient {
                id: client_id,
                secret: Some(client_secret),
                auth: super::fetch::TokenAuth::Basic,
            },
            accepted: Mutex::default(),
            refused: Mutex::default(),
            running: Semaphore::new(AT_ONCE),
            bucket: Mutex::new((BURST, Instant::now())),
        }
    }

    /// Checks an opaque token: active, for this server's audience and issuer, not expired.
    pub async fn check(&self, token: &str, settings: &SignInSettings) -> Result<SignedIn, Refusal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(known) = self.cached(&digest) {
            return known.map_err(Refusal::Invalid);
        }
        let busy = || {
            Refusal::Unavailable(
                "the authorization server is busy checking other tokens; try again in a few seconds"
                    .into(),
            )
        };
        if !self.take_from_bucket() {
            return Err(busy());
        }
        let Ok(Ok(_slot)) = tokio::time::timeout(QUEUE_WAIT, self.running.acquire()).await else {
            return Err(busy());
        };
        let request = super::fetch::form_post(
            &self.client,
            &self.as_client,
            &self.endpoint,
            &[("token", token), ("token_type_hint", "access_token")],
        );
        let answer = match read_json(request, &self.endpoint).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(%error, "token introspection failed");
                // Not cached: the next request tries again.
                return Err(Refusal::Unavailable(
                    "the authorization server could not check the token; try again in a few seconds"
                        .into(),
                ));
            }
        };
        let (result, until) = judge(&answer, settings);
        let keep = Instant::now() + CACHE_FOR.min(until.unwrap_or(CACHE_FOR));
        let cache = match result {
            Ok(_) => &self.accepted,
            Err(_) => &self.refused,
        };
        let mut cache = lock(cache);
        if cache.len() >= MAX_CACHED {
            let now = Instant::now();
            cache.retain(|_, (until, _)| *until > now);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(digest, (keep, result.clone()));
        result.map_err(Refusal::Invalid)
    }

    fn cached(&self, digest: &[u8; 32]) -> Option<Result<SignedIn, Invalid>> {
        [&self.accepted, &self.refused]
            .into_iter()
            .find_map(|cache| {
                let cache = lock(cache);
                let (until, result) = cache.get(digest)?;
                (*until > Instant::now()).then(|| result.clone())
            })
    }

    /// Takes one new introspection from the bucket, if there is one.
    fn take_from_bucket(&self) -> bool {
        let mut bucket = lock(&self.bucket);
        let now = Instant::now();
        let (left, filled) = *bucket;
        let left = (left + now.duration_since(filled).as_secs_f64() * PER_SECOND).min(BURST);
        *bucket = (left - 1.0, now);
        if left < 1.0 {
            bucket.0 = left;
            return false;
        }
        true
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
    if let Some(kind) = answer["token_type"].as_str()
        && !["bearer", "access_token", "dpop"].contains(&kind.to_ascii_lowercase().as_str())
    {
        return (
            Err(Invalid(format!(
                "the token is a {kind}, not an access token"
            ))),
            None,
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if answer["nbf"].as_u64().is_some_and(|nbf| nbf > now + 30) {
        return (
            Err(Invalid("the token is not valid yet (nbf)".into())),
            None,
        );
    }
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
    let subject_is_client = answer["sub"].as_str().is_none_or(str::is_empty);
    let mut signed_in = SignedIn::new(settings, sub.to_owned(), client, scopes);
    signed_in.subject_is_client = subject_is_client;
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

    #[tokio::test(start_paused = true)]
    async fn new_introspections_are_rate_limited() {
        let introspection = Introspection::new(
            reqwest::Client::new(),
            Url::parse("https://idp.example.com/introspect").unwrap(),
            "rs".into(),
            "s".into(),
        );
        let taken = (0..100)
            .filter(|_| introspection.take_from_bucket())
            .count();
        assert_eq!(taken, BURST as usize);
        tokio::time::advance(Duration::from_secs(1)).await;
        let taken = (0..100)
            .filter(|_| introspection.take_from_bucket())
            .count();
        assert_eq!(taken, PER_SECOND as usize);
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
            (
                json!({"token_type": "refresh_token"}),
                "not an access token",
            ),
            (json!({"nbf": far}), "not valid yet"),
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
