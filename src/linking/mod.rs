//! Account linking: each signed-in user acts with their own provider account. sdkbox is an
//! OAuth client of the provider: a user without a link is sent to the provider to authorize
//! sdkbox (authorization code with PKCE, the state bound to that user, single use, expiring);
//! the callback stores the tokens, sealed; egress injects the user's access token exactly as
//! it injects a configured secret, refreshing it first when it is about to expire.
//!
//! Invariants:
//! - a provider token never passes through the MCP client or the sandbox: it goes from the
//!   provider's token endpoint to the store and from the store to egress;
//! - a link belongs to the user (issuer and subject) who was offered it, and is followed at
//!   most once;
//! - tokens are encrypted at rest under a key from the environment, each record bound to its
//!   user's name;
//! - one refresh at a time per user (a claim in the shared store across replicas); a refused
//!   refresh removes the link, and the user is asked to link again.

mod seal;
mod settings;
mod store;
mod tokens;

pub use seal::Sealer;
pub use settings::{
    DEFAULT_KEY_ENV, DEFAULT_REDIRECT_PATH, LinkSettings, ProviderOAuthFile, StoreChoice, TokenAuth,
};
pub use store::{Store, StoreError};
pub use tokens::Tokens;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use url::Url;

use tokens::TokenError;

/// How long an offered link can be followed.
pub const LINK_TTL: Duration = Duration::from_secs(600);

/// An access token this close to its expiry is refreshed first, so a script's requests do not
/// outlive it.
const REFRESH_MARGIN_S: u64 = 120;

/// How long a replica holds its claim to refresh a user's token.
const REFRESH_CLAIM: Duration = Duration::from_secs(15);

/// Why linking cannot start or answer.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The configuration is wrong; the message says what to change.
    #[error("account linking: {0}")]
    Settings(String),
    /// The provider or the store did not answer; trying again later may work.
    #[error("account linking: {0}")]
    Unavailable(String),
}

impl From<StoreError> for LinkError {
    fn from(error: StoreError) -> Self {
        Self::Unavailable(error.to_string())
    }
}

/// A link offered to a user and not yet followed.
#[derive(Serialize, Deserialize)]
struct Offer {
    user: String,
    verifier: String,
}

/// Account linking, started: endpoints, the store, the refresh locks.
pub struct Linking {
    settings: LinkSettings,
    authorization_endpoint: Url,
    token_endpoint: Url,
    revocation_endpoint: Option<Url>,
    /// Names the provider in store keys, so one store can serve several providers.
    provider: String,
    store: Store,
    client: reqwest::Client,
    refreshing: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    linked: tokio::sync::broadcast::Sender<String>,
}

impl std::fmt::Debug for Linking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Linking")
            .field("provider", &self.provider)
            .field("token_endpoint", &self.token_endpoint.as_str())
            .finish_non_exhaustive()
    }
}

/// What a user's link gives now.
#[derive(Debug)]
pub enum Access {
    /// Act with this access token.
    Token(String),
    /// No link (or it no longer works): the user must link.
    Unlinked,
}

impl Linking {
    /// Discovers the provider's endpoints (when only its issuer is given) and opens the store;
    /// fails with what to fix.
    pub async fn start(settings: LinkSettings) -> Result<Self, LinkError> {
        let client =
            crate::signin::fetch::client().map_err(|e| LinkError::Unavailable(e.to_string()))?;
        let discovered = match &settings.issuer {
            Some(issuer) => Some(
                crate::signin::discovery::discover(&client, issuer.as_str())
                    .await
                    .map_err(|e| LinkError::Settings(format!("the provider's issuer: {e}")))?,
            ),
            None => None,
        };
        let pick = |given: &Option<Url>, found: Option<Url>, name: &str| {
            given.clone().or(found).ok_or_else(|| {
                LinkError::Settings(format!(
                    "[provider_oauth] the provider's metadata names no {name}: set {name} in [provider_oauth]"
                ))
            })
        };
        let authorization_endpoint = pick(
            &settings.authorization_endpoint,
            discovered
                .as_ref()
                .and_then(|d| d.authorization_endpoint.clone()),
            "authorization_endpoint",
        )?;
        let token_endpoint = pick(
            &settings.token_endpoint,
            discovered.as_ref().and_then(|d| d.token_endpoint.clone()),
            "token_endpoint",
        )?;
        let revocation_endpoint = settings.revocation_endpoint.clone().or_else(|| {
            discovered
                .as_ref()
                .and_then(|d| d.revocation_endpoint.clone())
        });
        for (name, url) in [
            ("authorization", &authorization_endpoint),
            ("token", &token_endpoint),
        ] {
            if !crate::signin::fetch::secure(url) {
                return Err(LinkError::Settings(format!(
                    "the provider's {name} endpoint {url} must be https (plain http only on loopback)"
                )));
            }
        }
        let store = Store::open(&settings.store)
            .await
            .map_err(|e| LinkError::Settings(e.to_string()))?;
        let provider = token_endpoint.as_str().to_owned();
        Ok(Self {
            settings,
            authorization_endpoint,
            token_endpoint,
            revocation_endpoint,
            provider,
            store,
            client,
            refreshing: std::sync::Mutex::default(),
            linked: tokio::sync::broadcast::channel(64).0,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &LinkSettings {
        &self.settings
    }

    /// The store key of `kind` for `id` (a user, an offer): a digest, so the store holds no
    /// user name or link id in the clear.
    fn key(&self, kind: &str, id: &str) -> String {
        let digest = Sha256::digest(format!("{}\n{id}", self.provider).as_bytes());
        format!("sdkbox:{kind}:{}", crate::hex::hex(&digest))
    }

    /// The access token `user` acts with, refreshed first when it is about to expire.
    pub async fn access(&self, user: &str) -> Result<Access, LinkError> {
        let lock = {
            let mut locks = self.refreshing.lock().unwrap_or_else(|p| p.into_inner());
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            locks.entry(user.to_owned()).or_default().clone()
        };
        let _one_at_a_time = lock.lock().await;
        let key = self.key("link", user);
        for _ in 0..40 {
            let Some(tokens) = self.read(&key).await? else {
                return Ok(Access::Unlinked);
            };
            let fresh = tokens
                .expires_at
                .is_none_or(|at| at > tokens::now() + REFRESH_MARGIN_S);
            if fresh {
                return Ok(Access::Token(tokens.access_token));
            }
            let Some(refresh) = tokens.refresh_token.clone() else {
                self.store.delete(&key).await?;
                return Ok(Access::Unlinked);
            };
            // Another replica may be refreshing this user's token: wait for its result.
            if !self
                .store
                .claim(&self.key("refresh", user), REFRESH_CLAIM)
                .await?
            {
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
            let refreshed = tokens::request(
                &self.client,
                &self.settings,
                &self.token_endpoint,
                &[("grant_type", "refresh_token"), ("refresh_token", &refresh)],
                Some(&refresh),
            )
            .await;
            let _ = self.store.delete(&self.key("refresh", user)).await;
            return match refreshed {
                Ok(tokens) => {
                    self.write(&key, &tokens).await?;
                    Ok(Access::Token(tokens.access_token))
                }
                Err(TokenError::Refused(why)) => {
                    tracing::info!("a provider refresh was refused ({why}): the user links again");
                    self.store.delete(&key).await?;
                    Ok(Access::Unlinked)
                }
                Err(error @ TokenError::Unreachable(_)) => {
                    Err(LinkError::Unavailable(error.to_string()))
                }
            };
        }
        Err(LinkError::Unavailable(
            "another replica has been refreshing this user's token for 10 s".into(),
        ))
    }

    async fn read(&self, key: &str) -> Result<Option<Tokens>, LinkError> {
        let Some(sealed) = self.store.get(key).await? else {
            return Ok(None);
        };
        let opened = self
            .settings
            .sealer
            .open(key, &sealed)
            .and_then(|plain| serde_json::from_slice(&plain).ok());
        if opened.is_none() {
            tracing::warn!("a stored link does not open with this key: the user links again");
        }
        Ok(opened)
    }

    async fn write(&self, key: &str, tokens: &Tokens) -> Result<(), LinkError> {
        let plain =
            serde_json::to_vec(tokens).map_err(|e| LinkError::Unavailable(e.to_string()))?;
        let sealed = self
            .settings
            .sealer
            .seal(key, &plain)
            .map_err(LinkError::Unavailable)?;
        self.store.put(key, &sealed, None).await?;
        Ok(())
    }

    /// Offers `user` a link: the URL they open to authorize sdkbox at the provider, and its id.
    pub async fn offer(&self, user: &str) -> Result<(Url, String), LinkError> {
        let unavailable = || LinkError::Unavailable("no randomness for a link".into());
        let id = crate::approval::random_hex(24).ok_or_else(unavailable)?;
        let verifier = crate::approval::random_hex(32).ok_or_else(unavailable)?;
        let offer = serde_json::to_vec(&Offer {
            user: user.to_owned(),
            verifier,
        })
        .map_err(|e| LinkError::Unavailable(e.to_string()))?;
        let key = self.key("offer", &id);
        let sealed = self
            .settings
            .sealer
            .seal(&key, &offer)
            .map_err(LinkError::Unavailable)?;
        self.store.put(&key, &sealed, Some(LINK_TTL)).await?;
        let url = self
            .settings
            .public_origin
            .join(&format!("link/start/{id}"))
            .map_err(|e| LinkError::Unavailable(e.to_string()))?;
        Ok((url, id))
    }

    async fn offered(&self, id: &str, take: bool) -> Result<Option<Offer>, LinkError> {
        if id.len() != 48 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let key = self.key("offer", id);
        let sealed = if take {
            self.store.take(&key).await?
        } else {
            self.store.get(&key).await?
        };
        Ok(sealed
            .and_then(|s| self.settings.sealer.open(&key, &s))
            .and_then(|plain| serde_json::from_slice(&plain).ok()))
    }

    /// Where the link `id` sends the browser: the provider's authorization endpoint, with the
    /// offer's PKCE challenge and the id as state; `None` when the link expired or was used.
    pub async fn authorization_url(&self, id: &str) -> Result<Option<Url>, LinkError> {
        let Some(offer) = self.offered(id, false).await? else {
            return Ok(None);
        };
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(Sha256::digest(offer.verifier.as_bytes()));
        let mut url = self.authorization_endpoint.clone();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &self.settings.client_id)
                .append_pair("redirect_uri", self.settings.redirect_uri.as_str())
                .append_pair("state", id)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256");
            if !self.settings.scopes.is_empty() {
                query.append_pair("scope", &self.settings.scopes.join(" "));
            }
            if let Some(resource) = &self.settings.resource {
                query.append_pair("resource", resource);
            }
        }
        Ok(Some(url))
    }

    /// Spends the link `id` without linking (the user refused at the provider).
    pub async fn withdraw(&self, id: &str) -> Result<(), LinkError> {
        self.offered(id, true).await.map(|_| ())
    }

    /// The provider sent the browser back with `code` for the link `state`: the code is
    /// exchanged and the tokens stored for the user the link was offered to. The error says,
    /// for the page, what happened.
    pub async fn complete(&self, state: &str, code: &str) -> Result<(), String> {
        let offer = match self.offered(state, true).await {
            Ok(Some(offer)) => offer,
            Ok(None) => return Err("this link has expired or was already used".into()),
            Err(error) => return Err(error.to_string()),
        };
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.settings.redirect_uri.as_str()),
            ("code_verifier", offer.verifier.as_str()),
        ];
        if let Some(resource) = &self.settings.resource {
            form.push(("resource", resource));
        }
        let tokens = tokens::request(
            &self.client,
            &self.settings,
            &self.token_endpoint,
            &form,
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
        let key = self.key("link", &offer.user);
        self.write(&key, &tokens).await.map_err(|e| e.to_string())?;
        let _ = self.linked.send(offer.user);
        Ok(())
    }

    /// Forgets `user`'s link, revoking its tokens at the provider when it can; whether there
    /// was one.
    pub async fn unlink(&self, user: &str) -> Result<bool, LinkError> {
        let key = self.key("link", user);
        let tokens = self.read(&key).await?;
        self.store.delete(&key).await?;
        let Some(tokens) = tokens else {
            return Ok(false);
        };
        if let Some(endpoint) = &self.revocation_endpoint {
            if let Some(refresh) = &tokens.refresh_token {
                tokens::revoke(
                    &self.client,
                    &self.settings,
                    endpoint,
                    refresh,
                    "refresh_token",
                )
                .await;
            }
            tokens::revoke(
                &self.client,
                &self.settings,
                endpoint,
                &tokens.access_token,
                "access_token",
            )
            .await;
        }
        Ok(true)
    }

    /// Users whose links complete from now on, as they complete (in this process).
    pub fn completions(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.linked.subscribe()
    }
}
