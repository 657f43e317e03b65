//! Opaque access tokens, checked by the issuer's introspection endpoint (RFC 7662) as a
//! client of its own. Answers are cached briefly by the token's digest (never the token
//! itself), valid and refused ones apart, each bounded in number; few introspections run at
//! once and few new ones start each second, so a flood of made-up tokens costs the issuer a
//! bounded trickle of requests and evicts no valid token's answer. New tokens are limited per
//! presenting peer as well as in all, and a token accepted within the hour is checked again
//! from a budget of its own, so that made-up tokens from one peer lock out neither new users
//! nor users whose answer has run out. When the issuer cannot
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
use crate::fair::{Bucket, Principal, Rate};
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

/// New introspections one peer may start each second, on average, and at once.
const PER_PEER_PER_SECOND: f64 = 2.0;
const PER_PEER_BURST: f64 = 5.0;

/// How long a token accepted once is checked again from its own budget.
const KNOWN_FOR: Duration = Duration::from_secs(3_600);

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
    bucket: Mutex<Bucket>,
    /// Each peer's rate of new introspections.
    peers: Rate,
    /// The bucket of tokens accepted within [`KNOWN_FOR`], checked again.
    known_bucket: Mutex<Bucket>,
    /// Digests of tokens accepted, until when they count as known.
    known: Mutex<HashMap<[u8; 32], Instant>>,
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
            bucket: Mutex::new(Bucket::full(BURST)),
            peers: Rate::new(PER_PEER_PER_SECOND, PER_PEER_BURST),
            known_bucket: Mutex::new(Bucket::full(BURST)),
            known: Mutex::default(),
        }
    }

    /// Checks an opaque token presented by `from` (a peer; `None` for sdkbox's own checks):
    /// active, for this server's audience and issuer, not expired.
    pub async fn check(
        &self,
        token: &str,
        settings: &SignInSettings,
        from: Option<&Principal>,
    ) -> Result<SignedIn, Refusal> {
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
        if !self.budget(&digest, from) {
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
        if result.is_ok() {
            self.remember(digest);
        }
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

    /// Takes one introspection from the budget this token draws on: a token accepted within
    /// [`KNOWN_FOR`] from its own; a new one from its peer's and then everyone's.
    fn budget(&self, digest: &[u8; 32], from: Option<&Principal>) -> bool {
        let known = lock(&self.known)
            .get(digest)
            .is_some_and(|until| *until > Instant::now());
        if known {
            return lock(&self.known_bucket).take(PER_SECOND, BURST);
        }
        if from.is_some_and(|peer| !self.peers.allow(peer)) {
            return false;
        }
        lock(&self.bucket).take(PER_SECOND, BURST)
    }

    /// Remembers a token as accepted, for its later checks' budget.
    fn remember(&self, digest: [u8; 32]) {
        let mut known = lock(&self.known);
        let now = Instant::now();
        if known.len() >= MAX_CACHED {
            known.retain(|_, until| *until > now);
            if known.len() >= MAX_CACHED {
                known.clear();
            }
        }
        known.insert(digest, now + KNOWN_FOR);
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
    // A DPoP token is bound to a key, said or not by `cnf`: not a bearer token.
    if answer["token_type"]
        .as_str()
        .is_some_and(|kind| kind.eq_ignore_ascii_case("dpop"))
    {
        return (Err(super::sender_bound()), None);
    }
    if let Some(kind) = answer["token_type"].as_str()
        && !["bearer", "access_token"].contains(&kind.to_ascii_lowercase().as_str())
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
    if !answer["cnf"].is_null() {
        return (Err(super::sender_bound()), None);
    }
    // Said or not said; when said, a string naming this server's issuer (a number, a list
    // or an object is not an issuer this server accepts).
    let iss = &answer["iss"];
    if !iss.is_null() && iss.as_str() != Some(settings.issuer.as_str()) {
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
    let mut scopes: Vec<String> = super::scopes_of(answer["scope"].as_str().unwrap_or_default())
        .map(str::to_owned)
        .collect();
    scopes.sort();
    scopes.dedup();
    let client = answer["client_id"].as_str().map(str::to_owned);
    // No subject, or the client's own id as the subject (RFC 9068 §2.2, as for JWTs).
    let subject_is_client = answer["sub"].as_str().is_none_or(str::is_empty)
        || answer["sub"].as_str() == answer["client_id"].as_str();
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
    async fn new_tokens_are_limited_per_peer_and_in_all_and_known_tokens_have_their_own_budget() {
        let introspection = Introspection::new(
            reqwest::Client::new(),
            Url::parse("https://idp.example.com/introspect").unwrap(),
            "rs".into(),
            "s".into(),
        );
        let peer = |n: u8| Principal::peer(std::net::IpAddr::from([10, 0, 0, n]));
        let made_up = |n: u32| -> [u8; 32] { Sha256::digest(n.to_le_bytes()).into() };
        // One peer's flood of made-up tokens: its burst, then nothing.
        let taken = (0..100)
            .filter(|n| introspection.budget(&made_up(*n), Some(&peer(1))))
            .count();
        assert_eq!(taken, PER_PEER_BURST as usize);
        // Another peer's new user still gets in.
        assert!(introspection.budget(&made_up(1_000), Some(&peer(2))));
        // Everyone's bucket bounds many peers together.
        let taken = (3..=100)
            .filter(|n| introspection.budget(&made_up(2_000 + *n as u32), Some(&peer(*n))))
            .count();
        assert_eq!(taken, BURST as usize - PER_PEER_BURST as usize - 1);
        // A token accepted before is checked again from its own budget, whoever flooded.
        let known = made_up(9_999);
        introspection.remember(known);
        assert!(introspection.budget(&known, Some(&peer(1))));
        tokio::time::advance(Duration::from_secs(1)).await;
        let taken = (0..100)
            .filter(|n| introspection.budget(&made_up(5_000 + n), None))
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
            // An issuer said otherwise than as the one string.
            (
                json!({"iss": ["https://idp.example.com"]}),
                "another authorization server",
            ),
            (json!({"iss": 1}), "another authorization server"),
            // Bound to a DPoP key: not a bearer token.
            (json!({"cnf": {"jkt": "0ZcOCORZNYy"}}), "bound to a key"),
            (json!({"token_type": "DPoP"}), "bound to a key"),
        ] {
            let mut answer = good.clone();
            for (k, v) in change.as_object().unwrap() {
                answer[k] = v.clone();
            }
            let error = judge(&answer, &settings).0.unwrap_err().0;
            assert!(error.contains(why), "{change}: {error}");
        }
        // Scopes are separated by spaces only: a tab or a no-break space joins two names
        // into one scope, which grants nothing.
        for joined in ["sdkbox:read\tsdkbox:write", "sdkbox:read\u{a0}sdkbox:write"] {
            let mut answer = good.clone();
            answer["scope"] = json!(joined);
            let signed_in = judge(&answer, &settings).0;
            assert!(
                signed_in.as_ref().is_err() || !signed_in.as_ref().unwrap().may_write,
                "{joined:?}"
            );
        }
        let mut answer = good.clone();
        answer["scope"] = json!("sdkbox:read  sdkbox:write");
        assert!(judge(&answer, &settings).0.unwrap().may_write);
        // A client acting on its own behalf is a machine, as a JWT of the same says.
        assert!(!judge(&good, &settings).0.unwrap().is_machine());
        let mut machine = good.clone();
        machine["sub"] = json!("c");
        assert!(judge(&machine, &settings).0.unwrap().is_machine());
    }
}
