//! Sign-in for remote clients: sdkbox as an OAuth 2.1 resource server (the MCP authorization
//! spec). Clients find the authorization server through this server's protected resource
//! metadata (RFC 9728), sign their users in there, and send access tokens that sdkbox checks
//! on its own, on every request: JWTs (RFC 9068) against the issuer's published keys, opaque
//! tokens through introspection (RFC 7662). Each replica checks tokens by itself; nothing is
//! shared but the issuer.
//!
//! Invariants:
//! - a request reaches MCP only with a token this server accepts, for its audience, from its
//!   issuer, signed asymmetrically, unexpired, holding the read scope;
//! - the token's subject (and client) is the caller: approvals, journals and workers are
//!   theirs alone, and the audit file names them;
//! - without the write scope, every write is refused in egress, whatever the approval rules
//!   say; with it, the rules apply as without sign-in;
//! - the client's token never leaves this process: egress sends the provider's credential,
//!   never the token.

pub(crate) mod discovery;
pub(crate) mod fetch;
mod introspect;
mod jwt;
mod keys;
mod settings;

pub use keys::MIN_REFETCH;
pub use settings::{
    DEFAULT_READ_SCOPE, DEFAULT_WRITE_SCOPE, IntrospectionFile, OAuthFile, ScopeNames,
    SignInSettings,
};

use serde_json::{Value, json};

use introspect::Introspection;
use keys::Keys;

/// The longest access token accepted.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Why sign-in cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// The configuration is wrong; the message says what to change.
    #[error("sign-in: {0}")]
    Settings(String),
    /// The authorization server did not answer as it should.
    #[error("sign-in: {0}")]
    Unreachable(String),
}

/// Why a token is not accepted, said so that a client (and its user) knows what to do.
#[derive(Debug, Clone)]
pub struct Invalid(pub String);

/// The scopes of a `scope` string: RFC 6749 §3.3 separates them by plain spaces, and only by
/// them (a scope with a tab or a no-break space in it is one scope, not two).
fn scopes_of(text: &str) -> impl Iterator<Item = &str> {
    text.split(' ').filter(|scope| !scope.is_empty())
}

/// Why a sender-constrained token is refused: sdkbox verifies no DPoP proof (RFC 9449) nor
/// client certificate (RFC 8705), and a bound token accepted as a bearer token would lose
/// the protection its binding gives against theft.
fn sender_bound() -> Invalid {
    Invalid(
        "the token is bound to a key (DPoP, or a client certificate), and this server accepts \
         bearer tokens only: configure the client, or the authorization server, to issue \
         unbound bearer tokens for it"
            .into(),
    )
}

/// Why a request is refused.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// No bearer token: the client should sign in (HTTP 401).
    NoToken,
    /// A token that is not accepted (HTTP 401, `invalid_token`).
    Invalid(Invalid),
    /// An `Authorization: Bearer` header without a usable token (HTTP 400,
    /// `invalid_request`).
    Malformed(String),
    /// The token could not be checked now (the issuer is busy or down): HTTP 503, retry; the
    /// token is not called invalid, since clients throw invalid tokens away.
    Unavailable(String),
    /// A valid token without the read scope (HTTP 403, `insufficient_scope`).
    InsufficientScope {
        /// The scopes the token holds.
        held: Vec<String>,
    },
}

/// A caller whose token was accepted: who, through which client, with which scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// The token's subject (`sub`).
    pub subject: String,
    /// The client it was issued to (`client_id`, else `azp`), if the token says.
    pub client: Option<String>,
    /// The scopes it holds.
    pub scopes: Vec<String>,
    /// Whether it holds the read scope.
    pub may_read: bool,
    /// Whether it holds the write scope.
    pub may_write: bool,
    issuer: String,
    /// The subject is the client's id (an introspected client-credentials token without
    /// `sub`): a machine, never the person whose `sub` happens to be spelled the same.
    subject_is_client: bool,
}

impl SignedIn {
    fn new(
        settings: &SignInSettings,
        subject: String,
        client: Option<String>,
        scopes: Vec<String>,
    ) -> Self {
        let holds = |scope: &str| scopes.iter().any(|s| s == scope);
        Self {
            may_read: holds(&settings.scopes.read),
            may_write: holds(&settings.scopes.write),
            subject,
            client,
            scopes,
            issuer: settings.issuer.clone(),
            subject_is_client: false,
        }
    }

    /// Who this is, as the approval state and the audit file name them: a JSON object of the
    /// issuer, the subject and the client (JSON, so that no subject can spell another
    /// caller; two clients of one user are two callers).
    pub fn who(&self) -> String {
        json!({"iss": self.issuer, "sub": self.subject, "client": self.client}).to_string()
    }

    /// Whether this is a machine client (a token naming no subject), not a person.
    pub fn is_machine(&self) -> bool {
        self.subject_is_client
    }

    /// The person, whichever client they use: the issuer and the subject, as a JSON object.
    /// A linked provider account is theirs, across clients.
    pub fn user(&self) -> String {
        if self.subject_is_client {
            return json!({"iss": self.issuer, "client": self.subject}).to_string();
        }
        json!({"iss": self.issuer, "sub": self.subject}).to_string()
    }
}

/// Sign-in, started: the settings, the issuer's keys, introspection.
pub struct SignIn {
    settings: SignInSettings,
    keys: Option<Keys>,
    introspection: Option<Introspection>,
}

impl std::fmt::Debug for SignIn {
    /// The issuer and resource only: nothing of keys or secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("issuer", &self.settings.issuer)
            .field("public_url", &self.settings.public_url.as_str())
            .finish_non_exhaustive()
    }
}

impl SignIn {
    /// Reads the issuer's metadata and keys; fails with what to fix when the issuer cannot
    /// be reached or does not match.
    pub async fn start(settings: SignInSettings) -> Result<Self, SignInError> {
        let client = fetch::client()?;
        let metadata = discovery::discover(&client, &settings.issuer).await?;
        // Tokens name the issuer as its metadata does (`https://tenant.auth0.com/` keeps its
        // slash; most issuers have none), whichever way the operator wrote it.
        let mut settings = settings;
        settings.issuer = metadata.issuer.clone();
        let jwks = settings.jwks_url.clone().or(metadata.jwks_uri);
        let introspection = match &settings.introspection {
            None => None,
            Some(wanted) => {
                let endpoint = wanted
                    .endpoint
                    .clone()
                    .or(metadata.introspection_endpoint)
                    .ok_or_else(|| {
                        SignInError::Settings(
                            "introspection is configured, but the issuer's metadata names no introspection_endpoint: set [oauth.introspection] endpoint".into(),
                        )
                    })?;
                Some(Introspection::new(
                    client.clone(),
                    endpoint,
                    wanted.client_id.clone(),
                    wanted.client_secret.clone(),
                ))
            }
        };
        let keys = match jwks {
            Some(url) => Some(Keys::start(client, url).await?),
            None if introspection.is_some() => None,
            None => {
                return Err(SignInError::Settings(
                    "the issuer's metadata names no jwks_uri: set [oauth] jwks_url, or configure introspection".into(),
                ));
            }
        };
        Ok(Self {
            settings,
            keys,
            introspection,
        })
    }

    /// The settings sign-in runs with.
    pub fn settings(&self) -> &SignInSettings {
        &self.settings
    }

    /// Checks a request's `Authorization` header: who it is, or why it is refused.
    pub async fn check(&self, authorization: Option<&str>) -> Result<SignedIn, Refusal> {
        self.check_from(authorization, None).await
    }

    /// [`Self::check`] for a request from `from` (its peer): opaque tokens are introspected
    /// within that peer's share.
    pub async fn check_from(
        &self,
        authorization: Option<&str>,
        from: Option<&crate::fair::Principal>,
    ) -> Result<SignedIn, Refusal> {
        let Some(value) = authorization else {
            return Err(Refusal::NoToken);
        };
        // RFC 6750 §3.1: another scheme is no token at all; a bearer header without a
        // usable token is a malformed request.
        let (scheme, token) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
        // A DPoP-bound token presented as such (RFC 9449 §7.1) gets the Bearer challenge
        // saying why it cannot be used here, not a bare request to sign in again (which
        // would only bring another bound token).
        if scheme.eq_ignore_ascii_case("dpop") {
            return Err(Refusal::Invalid(sender_bound()));
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Refusal::NoToken);
        }
        let token = token.trim();
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES || token.contains(' ') {
            return Err(Refusal::Malformed(
                "send one access token as `Authorization: Bearer TOKEN` (at most 16 KiB)".into(),
            ));
        }
        let signed_in = match (jwt::looks_like_jwt(token), &self.keys, &self.introspection) {
            (true, Some(keys), _) => jwt::check(token, &self.settings, keys)
                .await
                .map_err(Refusal::Invalid),
            (_, _, Some(introspection)) => introspection.check(token, &self.settings, from).await,
            (true, None, None) | (false, _, None) => Err(Refusal::Invalid(Invalid(
                "the access token is not a JWT this server can verify".into(),
            ))),
        }?;
        if !signed_in.may_read {
            return Err(Refusal::InsufficientScope {
                held: signed_in.scopes,
            });
        }
        Ok(signed_in)
    }

    /// Where the protected resource metadata is, for the public URL (RFC 9728 §3.1: the
    /// well-known path inserted before the resource's path).
    pub fn metadata_url(&self) -> String {
        let mut url = self.settings.public_url.clone();
        url.set_path(&self.metadata_paths()[1]);
        url.to_string()
    }

    /// The paths the metadata is served at: the root form and the resource's path-suffixed
    /// form, so that clients find it either way.
    pub fn metadata_paths(&self) -> [String; 2] {
        let root = "/.well-known/oauth-protected-resource";
        let path = self.settings.public_url.path().trim_end_matches('/');
        [root.to_owned(), format!("{root}{path}")]
    }

    /// The protected resource metadata (RFC 9728): this resource, its authorization server,
    /// the scopes it knows and how tokens are sent.
    pub fn metadata(&self, name: &str) -> Value {
        let scopes = &self.settings.scopes;
        json!({
            "resource": self.settings.public_url.as_str(),
            "authorization_servers": [self.settings.issuer],
            "scopes_supported": [scopes.read, scopes.write],
            "bearer_methods_supported": ["header"],
            "resource_name": name,
        })
    }

    /// The HTTP status, `WWW-Authenticate` value (empty when there is none) and JSON body of
    /// a refusal.
    pub fn challenge(&self, refusal: &Refusal) -> (u16, String, Value) {
        let scopes = &self.settings.scopes;
        let metadata = self.metadata_url();
        match refusal {
            Refusal::NoToken => (
                401,
                format!(
                    "Bearer resource_metadata=\"{metadata}\", scope=\"{} {}\"",
                    scopes.read, scopes.write
                ),
                json!({"error": "unauthorized", "error_description": "sign in: this server needs an OAuth access token (see the resource metadata)"}),
            ),
            Refusal::Invalid(Invalid(why)) => (
                401,
                format!(
                    "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{metadata}\", scope=\"{} {}\"",
                    header_safe(why),
                    scopes.read,
                    scopes.write
                ),
                json!({"error": "invalid_token", "error_description": why}),
            ),
            Refusal::Malformed(why) => (
                400,
                format!(
                    "Bearer error=\"invalid_request\", error_description=\"{}\", resource_metadata=\"{metadata}\"",
                    header_safe(why)
                ),
                json!({"error": "invalid_request", "error_description": why}),
            ),
            Refusal::Unavailable(why) => (
                503,
                String::new(),
                json!({"error": "temporarily_unavailable", "error_description": why}),
            ),
            Refusal::InsufficientScope { held } => {
                let why = format!(
                    "the token holds {}; this server needs `{}` (and `{}` for writes)",
                    listed(held),
                    scopes.read,
                    scopes.write
                );
                (
                    403,
                    format!(
                        "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata}\", error_description=\"{}\"",
                        with_scope(held, &scopes.read),
                        header_safe(&why)
                    ),
                    json!({"error": "insufficient_scope", "error_description": why, "scope": with_scope(held, &scopes.read)}),
                )
            }
        }
    }

    /// The step-up challenge for a caller whose writes were refused for want of the write
    /// scope, for clients that step up from a tool result (`_meta["mcp/www_authenticate"]`).
    pub fn write_challenge(&self, signed_in: &SignedIn) -> String {
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\", error_description=\"writes need the {} scope\"",
            with_scope(&signed_in.scopes, &self.settings.scopes.write),
            self.metadata_url(),
            self.settings.scopes.write
        )
    }

    /// What the model is told when a write is refused for want of the write scope.
    pub fn write_refusal(&self, signed_in: &SignedIn) -> String {
        format!(
            "writes need the `{}` scope, and this sign-in holds {}. Tell the user to sign in again granting `{}` (their client can ask for it), or do \
             without the write",
            self.settings.scopes.write,
            listed(&signed_in.scopes),
            self.settings.scopes.write
        )
    }
}

/// The scopes held plus `needed`, space-separated, as a `scope` parameter lists them.
fn with_scope(held: &[String], needed: &str) -> String {
    let mut all: Vec<&str> = held
        .iter()
        .map(String::as_str)
        .filter(|s| header_safe(s) == *s)
        .collect();
    if !all.contains(&needed) {
        all.push(needed);
    }
    all.join(" ")
}

fn listed(scopes: &[String]) -> String {
    match scopes {
        [] => "no scope".to_owned(),
        _ => format!("`{}`", scopes.join(" ")),
    }
}

/// Text that fits in a quoted header parameter: visible ASCII and spaces, no quotes or
/// backslashes, at most 300 characters.
fn header_safe(text: &str) -> String {
    text.chars()
        .take(300)
        .map(|c| match c {
            '"' | '\\' => '\'',
            c if c.is_ascii_graphic() || c == ' ' => c,
            _ => '?',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use url::Url;

    fn sign_in() -> SignIn {
        let settings = OAuthFile {
            issuer: Some(Url::parse("https://idp.example.com").unwrap()),
            public_url: Some(Url::parse("https://mcp.example.com/mcp").unwrap()),
            ..Default::default()
        }
        .check(&|_| None)
        .unwrap();
        SignIn {
            settings,
            keys: None,
            introspection: None,
        }
    }

    #[test]
    fn challenges_say_where_the_metadata_is_and_which_scopes_to_ask_for() {
        let sign_in = sign_in();
        assert_eq!(
            sign_in.metadata_url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        let (status, header, _) = sign_in.challenge(&Refusal::NoToken);
        assert_eq!(status, 401);
        assert_eq!(
            header,
            "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", scope=\"sdkbox:read sdkbox:write\""
        );
        let (status, header, body) = sign_in.challenge(&Refusal::InsufficientScope {
            held: vec!["openid".into(), "evil\"scope".into()],
        });
        assert_eq!(status, 403);
        assert!(
            header.contains("error=\"insufficient_scope\", scope=\"openid sdkbox:read\""),
            "{header}"
        );
        assert_eq!(body["error"], "insufficient_scope");
        let (_, header, _) =
            sign_in.challenge(&Refusal::Invalid(Invalid("bad \"quote\"\n".into())));
        assert!(
            header.contains("error_description=\"bad 'quote'?\""),
            "{header}"
        );
    }

    #[test]
    fn no_subject_can_spell_another_caller() {
        let settings = sign_in().settings;
        let who = |sub: &str, client: Option<&str>| {
            SignedIn::new(&settings, sub.into(), client.map(str::to_owned), Vec::new()).who()
        };
        assert_ne!(who("alice (client evil)", None), who("alice", Some("evil")));
        assert_ne!(
            who("alice\",\"client\":\"evil", None),
            who("alice", Some("evil"))
        );
        assert_eq!(who("alice", Some("c")), who("alice", Some("c")));
    }

    #[tokio::test]
    async fn a_request_without_a_bearer_token_is_told_to_sign_in() {
        let sign_in = sign_in();
        assert!(matches!(sign_in.check(None).await, Err(Refusal::NoToken)));
        assert!(matches!(
            sign_in.check(Some("Basic abc")).await,
            Err(Refusal::NoToken)
        ));
        assert!(matches!(
            sign_in.check(Some("DPoP eyJhbGciOi.x.y")).await,
            Err(Refusal::Invalid(Invalid(why))) if why.contains("bound to a key")
        ));
        for header in [
            "Bearer a b",
            "Bearer",
            "Bearer  ",
            &format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1)),
        ] {
            assert!(
                matches!(
                    sign_in.check(Some(header)).await,
                    Err(Refusal::Malformed(_))
                ),
                "{header:.30}"
            );
        }
        assert!(matches!(
            sign_in.check(Some("bearer opaque")).await,
            Err(Refusal::Invalid(Invalid(why))) if why.contains("not a JWT")
        ));
    }
}
