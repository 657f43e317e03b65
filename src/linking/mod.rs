//! Account linking: each signed-in user acts with their own provider account. sdkbox is an
//! OAuth client of the provider: a user without a link is offered one (single use, 10
//! minutes). Whoever opens it first signs in at the sign-in issuer (sdkbox is a client there
//! too), and must be the user it was offered to; that browser gets a cookie and goes on to the
//! provider to authorize sdkbox (authorization code with PKCE, the link's id the state); the
//! provider's callback, in the same browser, stores the tokens, sealed. Egress injects the
//! user's access token exactly as it injects a configured secret, refreshing it first when it
//! is about to expire.
//!
//! Invariants:
//! - a provider token never passes through the MCP client or the sandbox: it goes from the
//!   provider's token endpoint to the store and from the store to egress;
//! - a link belongs to the user (issuer and subject) who was offered it: it is completed only
//!   by a browser that signed in as that user, at most once;
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
    CONFIRM_PATH, DEFAULT_KEY_ENV, DEFAULT_REDIRECT_PATH, LinkSettings, OAuthClient,
    ProviderOAuthFile, StoreChoice, TokenAuth,
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

use crate::signin::SignIn;
use tokens::TokenError;

/// How long an offered link can be followed.
pub const LINK_TTL: Duration = Duration::from_secs(600);

/// An offer is shown again (rather than a new one made) while it has at least this long left.
const OFFER_REUSE: Duration = Duration::from_secs(480);

/// An access token this close to its expiry is refreshed first, so a script's requests do not
/// outlive it.
const REFRESH_MARGIN_S: u64 = 120;

/// How long a replica holds its claim on a user's link (a refresh: the token request's 10 s
/// and the store's answers, with room).
const REFRESH_CLAIM: Duration = Duration::from_secs(30);

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

/// A link offered to a user and not yet completed.
#[derive(Serialize, Deserialize)]
struct Offer {
    /// The user it was offered to.
    user: String,
    /// The PKCE verifier of the provider's authorization (the sign-in one derives from it).
    verifier: String,
    /// The digest of the cookie of the browser that signed in as `user`, once one has (for
    /// an unlink, the browser that asked).
    browser: Option<String>,
    /// An unlink asked for in a browser, whose user the sign-in tells.
    #[serde(default)]
    unlink: bool,
}

/// An unlink asked for in a browser, carried sealed in its own id rather than stored: the
/// route that makes it answers anyone, before sign-in, and so stores nothing for them. Only
/// its use, once the browser has signed in, is recorded (so that it is used once).
#[derive(Serialize, Deserialize)]
struct UnlinkTicket {
    verifier: String,
    /// The digest of the cookie of the browser that asked.
    browser: String,
    /// Until when it holds, in seconds since the Unix epoch.
    until: u64,
}

/// What an unlink ticket is sealed under, and what its id starts with.
const UNLINK_SEAL: &str = "unlink-ticket";
const UNLINK_ID_PREFIX: &str = "u";

/// The longest unlink id read (a ticket is about 400 characters).
const MAX_UNLINK_ID: usize = 1_024;

/// An OAuth server's two endpoints sdkbox uses as a client.
struct Endpoints {
    authorization: Url,
    token: Url,
}

/// Account linking, started: endpoints, the store, the refresh locks.
pub struct Linking {
    settings: LinkSettings,
    provider_endpoints: Endpoints,
    revocation_endpoint: Option<Url>,
    /// The sign-in issuer, where a link's browser proves who it is.
    signin_endpoints: Endpoints,
    sign_in: Arc<SignIn>,
    /// Names the provider in record names, so one store can serve several providers.
    provider: String,
    store: Store,
    client: reqwest::Client,
    /// One refresh, link or unlink at a time per user in this process.
    users: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    linked: tokio::sync::broadcast::Sender<String>,
}

impl std::fmt::Debug for Linking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Linking")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

/// What a user's link gives now (no `Debug`: it holds a token).
pub enum Access {
    /// Act with this access token.
    Token(String),
    /// No link (or it no longer works): the user must link.
    Unlinked,
}

/// How a followed link goes on.
pub enum Confirmed {
    /// To the provider (the browser is bound to the link by its cookie).
    Provider(Url),
    /// The user who signed in asked to unlink: whether there was a link.
    Unlinked(bool),
    /// Nowhere: the page says why.
    Refused(String),
}

/// The endpoints `issuer`'s metadata names, with the given ones first.
async fn endpoints(
    client: &reqwest::Client,
    issuer: Option<&Url>,
    authorization: Option<&Url>,
    token: Option<&Url>,
    whose: &str,
) -> Result<(Endpoints, Option<Url>), LinkError> {
    let discovered = match issuer {
        Some(issuer) => Some(
            crate::signin::discovery::discover(client, issuer.as_str())
                .await
                .map_err(|e| LinkError::Settings(format!("{whose} issuer: {e}")))?,
        ),
        None => None,
    };
    let pick = |given: Option<&Url>, found: Option<Url>, name: &str| {
        let url = given.cloned().or(found).ok_or_else(|| {
            LinkError::Settings(format!(
                "{whose} metadata names no {name}: set it in [provider_oauth]"
            ))
        })?;
        if !crate::signin::fetch::secure(&url) {
            return Err(LinkError::Settings(format!(
                "{whose} {name} {url} must be https (plain http only on loopback)"
            )));
        }
        Ok(url)
    };
    let found = |f: fn(&crate::signin::discovery::IssuerMetadata) -> Option<Url>| {
        discovered.as_ref().and_then(f)
    };
    Ok((
        Endpoints {
            authorization: pick(
                authorization,
                found(|d| d.authorization_endpoint.clone()),
                "authorization_endpoint",
            )?,
            token: pick(token, found(|d| d.token_endpoint.clone()), "token_endpoint")?,
        },
        found(|d| d.revocation_endpoint.clone()),
    ))
}

/// PKCE's S256 challenge of `verifier`.
fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// The digest a cookie value is kept as.
fn digest(text: &str) -> String {
    crate::hex::hex(&Sha256::digest(text.as_bytes()))
}

impl Linking {
    /// Discovers the provider's and the sign-in issuer's endpoints and opens the store; fails
    /// with what to fix.
    pub async fn start(settings: LinkSettings, sign_in: Arc<SignIn>) -> Result<Self, LinkError> {
        let client =
            crate::signin::fetch::client().map_err(|e| LinkError::Unavailable(e.to_string()))?;
        let (provider_endpoints, discovered_revocation) = endpoints(
            &client,
            settings.issuer.as_ref(),
            settings.authorization_endpoint.as_ref(),
            settings.token_endpoint.as_ref(),
            "the provider's",
        )
        .await?;
        let revocation_endpoint = settings
            .revocation_endpoint
            .clone()
            .or(discovered_revocation);
        if let Some(url) = &revocation_endpoint
            && !crate::signin::fetch::secure(url)
        {
            return Err(LinkError::Settings(format!(
                "the provider's revocation endpoint {url} must be https (plain http only on loopback)"
            )));
        }
        let issuer = Url::parse(&sign_in.settings().issuer)
            .map_err(|e| LinkError::Settings(format!("the sign-in issuer: {e}")))?;
        let (signin_endpoints, _) =
            endpoints(&client, Some(&issuer), None, None, "the sign-in issuer's").await?;
        let store = Store::open(&settings.store)
            .await
            .map_err(|e| LinkError::Settings(e.to_string()))?;
        let provider = provider_endpoints.token.as_str().to_owned();
        Ok(Self {
            settings,
            provider_endpoints,
            revocation_endpoint,
            signin_endpoints,
            sign_in,
            provider,
            store,
            client,
            users: std::sync::Mutex::default(),
            linked: tokio::sync::broadcast::channel(64).0,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &LinkSettings {
        &self.settings
    }

    /// The store key of `kind` for `id` (a user, a link): keyed digests, so the store holds no
    /// user name or link id in the clear.
    fn key(&self, kind: &str, id: &str) -> String {
        let name = self
            .settings
            .sealer
            .name(&format!("{}\n{kind}\n{id}", self.provider));
        format!("sdkbox:{kind}:{name}")
    }

    /// The lock of `user`'s link in this process.
    fn user_lock(&self, user: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.users.lock().unwrap_or_else(|p| p.into_inner());
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        locks.entry(user.to_owned()).or_default().clone()
    }

    /// Claims `user`'s link across replicas, waiting up to 10 s for another's claim to end;
    /// the claim's value, for [`Self::release_user`].
    async fn claim_user(&self, user: &str) -> Result<String, LinkError> {
        let claim = crate::approval::random_hex(16)
            .ok_or_else(|| LinkError::Unavailable("no randomness".into()))?;
        let key = self.key("refresh", user);
        for _ in 0..40 {
            if self.store.claim(&key, &claim, REFRESH_CLAIM).await? {
                return Ok(claim);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(LinkError::Unavailable(
            "another replica has held this user's link for 10 s".into(),
        ))
    }

    /// Releases a claim [`Self::claim_user`] took.
    async fn release_user(&self, user: &str, claim: &str) {
        let _ = self.store.release(&self.key("refresh", user), claim).await;
    }

    /// The access token `user` acts with, refreshed first when it is about to expire.
    pub async fn access(&self, user: &str) -> Result<Access, LinkError> {
        let lock = self.user_lock(user);
        let _one_at_a_time = lock.lock().await;
        let key = self.key("link", user);
        if let Some(tokens) = self.read(&key).await?
            && fresh(&tokens)
        {
            return Ok(Access::Token(tokens.access_token));
        }
        // Claimed, the record is read again: another replica may have refreshed it meanwhile.
        let claim = self.claim_user(user).await?;
        let outcome = self.refresh(&key).await;
        self.release_user(user, &claim).await;
        outcome
    }

    /// The link under `key`, refreshed unless it is fresh; the caller holds the user's claim.
    async fn refresh(&self, key: &str) -> Result<Access, LinkError> {
        let Some(tokens) = self.read(key).await? else {
            return Ok(Access::Unlinked);
        };
        if fresh(&tokens) {
            return Ok(Access::Token(tokens.access_token));
        }
        let Some(refresh) = tokens.refresh_token else {
            self.store.delete(key).await?;
            return Ok(Access::Unlinked);
        };
        let refreshed = tokens::request(
            &self.client,
            &self.settings.client,
            &self.provider_endpoints.token,
            &[("grant_type", "refresh_token"), ("refresh_token", &refresh)],
            Some(&refresh),
        )
        .await;
        match refreshed {
            Ok(tokens) => {
                // Written before the claim is released, so no replica refreshes with the
                // spent refresh token; this call acts with the new token even if the write
                // failed.
                if let Err(error) = self.write(key, &tokens).await {
                    tracing::warn!("a refreshed provider token could not be stored: {error}");
                }
                Ok(Access::Token(tokens.access_token))
            }
            Err(TokenError::Refused(why)) => {
                tracing::info!("a provider refresh was refused ({why}): the user links again");
                self.store.delete(key).await?;
                Ok(Access::Unlinked)
            }
            Err(error @ TokenError::Unreachable(_)) => {
                Err(LinkError::Unavailable(error.to_string()))
            }
        }
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

    /// Offers `user` a link: the URL they open, and its id. While an earlier offer has most of
    /// its time left, that one is shown again, so asking repeatedly costs nothing.
    pub async fn offer(&self, user: &str) -> Result<(Url, String), LinkError> {
        let pointer = self.key("offered", user);
        let earlier = match self.store.get(&pointer).await? {
            Some(sealed) => self
                .settings
                .sealer
                .open(&pointer, &sealed)
                .and_then(|id| String::from_utf8(id).ok()),
            None => None,
        };
        let id = match earlier {
            Some(id)
                if self
                    .offered(&id)
                    .await?
                    .is_some_and(|o| o.browser.is_none()) =>
            {
                id
            }
            _ => {
                let unavailable = || LinkError::Unavailable("no randomness for a link".into());
                let id = crate::approval::random_hex(24).ok_or_else(unavailable)?;
                let verifier = crate::approval::random_hex(32).ok_or_else(unavailable)?;
                self.put_offer(
                    &id,
                    &Offer {
                        user: user.to_owned(),
                        verifier,
                        browser: None,
                        unlink: false,
                    },
                )
                .await?;
                let sealed = self
                    .settings
                    .sealer
                    .seal(&pointer, id.as_bytes())
                    .map_err(LinkError::Unavailable)?;
                self.store.put(&pointer, &sealed, Some(OFFER_REUSE)).await?;
                id
            }
        };
        let url = self
            .settings
            .public_origin
            .join(&format!("link/start/{id}"))
            .map_err(|e| LinkError::Unavailable(e.to_string()))?;
        Ok((url, id))
    }

    async fn put_offer(&self, id: &str, offer: &Offer) -> Result<(), LinkError> {
        let key = self.key("offer", id);
        let plain = serde_json::to_vec(offer).map_err(|e| LinkError::Unavailable(e.to_string()))?;
        let sealed = self
            .settings
            .sealer
            .seal(&key, &plain)
            .map_err(LinkError::Unavailable)?;
        self.store.put(&key, &sealed, Some(LINK_TTL)).await?;
        Ok(())
    }

    /// The offer `id`, if it is still open.
    async fn offered(&self, id: &str) -> Result<Option<Offer>, LinkError> {
        self.offer_record(id, false).await
    }

    async fn offer_record(&self, id: &str, take: bool) -> Result<Option<Offer>, LinkError> {
        if let Some(offer) = self.unlink_ticket(id) {
            // One marker a ticket, however its id is spelled: by its verifier.
            let spent = self.key("unlink-spent", &offer.verifier);
            let open = if take {
                self.store.put_new(&spent, "1", LINK_TTL).await?
            } else {
                self.store.get(&spent).await?.is_none()
            };
            return Ok(open.then_some(offer));
        }
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

    /// An unlink asked for in a browser: the sign-in URL it goes to (to tell whose link), and
    /// the cookie value that binds it to that browser.
    pub async fn unlink_in_browser(&self) -> Result<(Url, String), LinkError> {
        let unavailable = || LinkError::Unavailable("no randomness".into());
        let verifier = crate::approval::random_hex(32).ok_or_else(unavailable)?;
        let cookie = crate::approval::random_hex(32).ok_or_else(unavailable)?;
        let ticket = UnlinkTicket {
            verifier,
            browser: digest(&cookie),
            until: tokens::now() + LINK_TTL.as_secs(),
        };
        let plain =
            serde_json::to_vec(&ticket).map_err(|e| LinkError::Unavailable(e.to_string()))?;
        let sealed = self
            .settings
            .sealer
            .seal(&self.unlink_seal(), &plain)
            .map_err(LinkError::Unavailable)?;
        let id = format!("{UNLINK_ID_PREFIX}{}", crate::hex::hex(sealed.as_bytes()));
        let url = self
            .start_url(&id, &cookie)
            .await?
            .ok_or_else(|| LinkError::Unavailable("the store lost the unlink just made".into()))?;
        Ok((url, cookie))
    }

    /// What unlink tickets are sealed under: this provider's, no other's sharing the key.
    fn unlink_seal(&self) -> String {
        format!("{UNLINK_SEAL}\n{}", self.provider)
    }

    /// The unlink `id` carries, if it is a ticket this server sealed that still holds.
    fn unlink_ticket(&self, id: &str) -> Option<Offer> {
        let hex = id.strip_prefix(UNLINK_ID_PREFIX)?;
        // Only the spelling this server writes.
        let canonical = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if hex.len() > MAX_UNLINK_ID || hex.len() % 2 != 0 || !hex.chars().all(canonical) {
            return None;
        }
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect::<Option<_>>()?;
        let sealed = String::from_utf8(bytes).ok()?;
        let plain = self.settings.sealer.open(&self.unlink_seal(), &sealed)?;
        let ticket: UnlinkTicket = serde_json::from_slice(&plain).ok()?;
        (ticket.until > tokens::now()).then(|| Offer {
            user: String::new(),
            verifier: ticket.verifier,
            browser: Some(ticket.browser),
            unlink: true,
        })
    }

    /// Where opening the link `id` in the browser holding `cookie` sends it first: the sign-in
    /// issuer, to prove it is the user the link was offered to. The sign-in's PKCE verifier
    /// derives from the cookie, so its code is good only in this browser. `None` when the link
    /// expired or was used.
    pub async fn start_url(&self, id: &str, cookie: &str) -> Result<Option<Url>, LinkError> {
        let Some(offer) = self.offered(id).await? else {
            return Ok(None);
        };
        let mut url = self.signin_endpoints.authorization.clone();
        let signin = self.sign_in.settings();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.settings.confirm_client.id)
            .append_pair("redirect_uri", self.settings.confirm_uri.as_str())
            .append_pair("state", id)
            .append_pair("scope", &signin.scopes.read)
            .append_pair("resource", signin.public_url.as_str())
            .append_pair(
                "code_challenge",
                &challenge(&confirm_verifier(&offer, cookie)),
            )
            .append_pair("code_challenge_method", "S256");
        Ok(Some(url))
    }

    /// The sign-in issuer sent the link `id`'s browser back with `code`: the browser must be
    /// the one that opened the link (its `cookie`: a code sent on to another browser does not
    /// exchange), signed in as the user the link was offered to. If so, the link is bound to
    /// that browser and it goes on to the provider; if not, the link is spent.
    pub async fn confirm(&self, id: &str, code: &str, cookie: Option<&str>) -> Confirmed {
        let refused = |why: &str| Confirmed::Refused(why.to_owned());
        let Some(cookie) = cookie else {
            return refused(
                "this browser did not open the link: open the link and sign in in the same browser",
            );
        };
        let bound_to = Some(cookie);
        let offer = match self.offered(id).await {
            // An unlink is finished only in the browser that asked for it.
            Ok(Some(offer)) if offer.unlink && offer.browser == bound_to.map(digest) => offer,
            Ok(Some(offer)) if !offer.unlink && offer.browser.is_none() => offer,
            Ok(_) => return refused("this link has expired or was already used"),
            Err(error) => return Confirmed::Refused(error.to_string()),
        };
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.settings.confirm_uri.as_str()),
            ("code_verifier", &confirm_verifier(&offer, cookie)),
            ("resource", self.sign_in.settings().public_url.as_str()),
        ];
        let signed_in = match tokens::request(
            &self.client,
            &self.settings.confirm_client,
            &self.signin_endpoints.token,
            &form,
            None,
        )
        .await
        {
            Ok(tokens) => {
                let header = format!("Bearer {}", tokens.access_token);
                self.sign_in.check(Some(&header)).await.ok()
            }
            Err(error) => {
                // A refused exchange spends a link offer, so that made-up codes cannot make
                // sdkbox send its confirm client's secret to the issuer again and again (an
                // unlink's ticket is stored nowhere; its route limits such tries per address
                // and in all). An issuer that did not answer spends nothing.
                if !offer.unlink && matches!(error, TokenError::Refused(_)) {
                    let _ = self.offer_record(id, true).await;
                }
                return Confirmed::Refused(format!(
                    "the sign-in issuer did not confirm who you are ({error}); open the link again from your chat, in one browser"
                ));
            }
        };
        let Some(signed_in) = signed_in else {
            return refused("the sign-in did not give a token sdkbox accepts");
        };
        if offer.unlink {
            if !matches!(self.offer_record(id, true).await, Ok(Some(_))) {
                return refused("this unlink was already done");
            }
            return match self.unlink(&signed_in.user()).await {
                Ok(was) => Confirmed::Unlinked(was),
                Err(error) => Confirmed::Refused(error.to_string()),
            };
        }
        if signed_in.user() != offer.user {
            // Someone else opened it: it is spent, and its user asks for a new one.
            let _ = self.offer_record(id, true).await;
            tracing::warn!("a link was opened by another user than the one it was offered to");
            return refused(
                "this link was made for another sdkbox user: sign in as the user who asked for it, from a new link",
            );
        }
        let bound = Offer {
            browser: bound_to.map(digest),
            ..offer
        };
        if let Err(error) = self.put_offer(id, &bound).await {
            return Confirmed::Refused(error.to_string());
        }
        Confirmed::Provider(self.provider_url(id, &bound))
    }

    /// The provider's authorization URL for the link `id`.
    fn provider_url(&self, id: &str, offer: &Offer) -> Url {
        let mut url = self.provider_endpoints.authorization.clone();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &self.settings.client.id)
                .append_pair("redirect_uri", self.settings.redirect_uri.as_str())
                .append_pair("state", id)
                .append_pair("code_challenge", &challenge(&offer.verifier))
                .append_pair("code_challenge_method", "S256");
            if !self.settings.scopes.is_empty() {
                query.append_pair("scope", &self.settings.scopes.join(" "));
            }
            if let Some(resource) = &self.settings.resource {
                query.append_pair("resource", resource);
            }
        }
        url
    }

    /// Spends the link `id` without linking (the user refused at the provider), if `cookie`
    /// is the browser's that confirmed it.
    pub async fn withdraw(&self, id: &str, cookie: Option<&str>) -> Result<(), LinkError> {
        if let Some(offer) = self.offered(id).await?
            && offer.browser.is_some()
            && offer.browser == cookie.map(digest)
        {
            self.offer_record(id, true).await?;
        }
        Ok(())
    }

    /// The provider sent the browser back with `code` for the link `state`: in the browser
    /// that confirmed it (its `cookie`), the code is exchanged and the tokens stored for the
    /// user the link was offered to, replacing (and revoking) an earlier link. The error
    /// says, for the page, what happened.
    pub async fn complete(
        &self,
        state: &str,
        code: &str,
        cookie: Option<&str>,
    ) -> Result<(), String> {
        let confirmed_here = match self.offered(state).await {
            Ok(Some(offer)) => {
                !offer.unlink && offer.browser.is_some() && offer.browser == cookie.map(digest)
            }
            Ok(None) => return Err("this link has expired or was already used".into()),
            Err(error) => return Err(error.to_string()),
        };
        if !confirmed_here {
            return Err("this browser did not open the link as its user".into());
        }
        let offer = match self.offer_record(state, true).await {
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
            &self.settings.client,
            &self.provider_endpoints.token,
            &form,
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
        let lock = self.user_lock(&offer.user);
        let _one_at_a_time = lock.lock().await;
        let claim = self
            .claim_user(&offer.user)
            .await
            .map_err(|e| e.to_string())?;
        let key = self.key("link", &offer.user);
        let earlier = self.read(&key).await.ok().flatten();
        let written = self.write(&key, &tokens).await;
        self.release_user(&offer.user, &claim).await;
        written.map_err(|e| e.to_string())?;
        let _ = self.store.delete(&self.key("offered", &offer.user)).await;
        if let Some(earlier) = earlier {
            self.revoke(&earlier).await;
        }
        let _ = self.linked.send(offer.user);
        Ok(())
    }

    /// Forgets `user`'s link (and the link they were last offered), revoking its tokens at
    /// the provider when it can; whether there was one.
    pub async fn unlink(&self, user: &str) -> Result<bool, LinkError> {
        let lock = self.user_lock(user);
        let _one_at_a_time = lock.lock().await;
        let claim = self.claim_user(user).await?;
        let forgotten = self.forget(user).await;
        self.release_user(user, &claim).await;
        let Some(tokens) = forgotten? else {
            return Ok(false);
        };
        self.revoke(&tokens).await;
        Ok(true)
    }

    /// Removes `user`'s link and open offer; the tokens it held.
    async fn forget(&self, user: &str) -> Result<Option<Tokens>, LinkError> {
        let pointer = self.key("offered", user);
        if let Some(sealed) = self.store.take(&pointer).await?
            && let Some(id) = self
                .settings
                .sealer
                .open(&pointer, &sealed)
                .and_then(|id| String::from_utf8(id).ok())
        {
            self.offer_record(&id, true).await?;
        }
        let key = self.key("link", user);
        let tokens = self.read(&key).await?;
        self.store.delete(&key).await?;
        Ok(tokens)
    }

    /// Revokes `tokens` at the provider, when it has a revocation endpoint.
    async fn revoke(&self, tokens: &Tokens) {
        let Some(endpoint) = &self.revocation_endpoint else {
            return;
        };
        let client = &self.settings.client;
        if let Some(refresh) = &tokens.refresh_token {
            tokens::revoke(&self.client, client, endpoint, refresh, "refresh_token").await;
        }
        tokens::revoke(
            &self.client,
            client,
            endpoint,
            &tokens.access_token,
            "access_token",
        )
        .await;
    }

    /// The provider refused `user`'s access token (HTTP 401) before its time: it is treated
    /// as expired, so the next run refreshes it first, or asks to link again when it cannot.
    pub async fn distrust(&self, user: &str) -> Result<(), LinkError> {
        let lock = self.user_lock(user);
        let _one_at_a_time = lock.lock().await;
        let claim = self.claim_user(user).await?;
        let key = self.key("link", user);
        let marked = match self.read(&key).await {
            // Without a refresh token, a link is not given up on one 401.
            Ok(Some(mut tokens)) if tokens.refresh_token.is_some() => {
                tokens.expires_at = Some(0);
                self.write(&key, &tokens).await
            }
            Ok(_) => Ok(()),
            Err(error) => Err(error),
        };
        self.release_user(user, &claim).await;
        marked
    }

    /// Users whose links complete from now on, as they complete (in this process).
    pub fn completions(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.linked.subscribe()
    }
}

/// Whether `tokens` can be used as they are: no stated expiry, or not within the margin.
fn fresh(tokens: &Tokens) -> bool {
    tokens
        .expires_at
        .is_none_or(|at| at > tokens::now().saturating_add(REFRESH_MARGIN_S))
}

/// The PKCE verifier of a link's sign-in step: the provider step's and the cookie of the
/// browser that opened the link, so that only that browser can exchange the code.
fn confirm_verifier(offer: &Offer, cookie: &str) -> String {
    digest(&format!("sign-in\n{}\n{cookie}", offer.verifier))
}
