//! The provider secret: how it is presented, and how it is kept out of everything else.
//!
//! Only egress holds a [`Secret`]. It never enters the isolate: the script's own credential
//! headers are dropped and the real ones added here, and a [`Scrubber`] removes every form
//! of the secret from what goes back (`super::scrub`).

use std::fmt;
use std::str::FromStr;

use super::scrub::Scrubber;

/// A provider credential. Its `Debug` and `Display` never show it; it is not serialisable.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret read from the environment at startup.
    pub fn new(value: String) -> Self {
        Self(value)
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// How the provider expects its credential.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AuthScheme {
    /// `Authorization: Bearer <secret>`.
    Bearer,
    /// `Authorization: Basic base64(<secret>)`; a secret without `:` is the user name with
    /// an empty password, as Stripe expects.
    Basic,
    /// The secret as the value of a named header, such as `X-Api-Key`.
    Header(String),
    /// The secret as a named query parameter, such as `api_key`.
    Query(String),
}

impl std::fmt::Display for AuthScheme {
    /// Where the secret goes, for the line the server prints at start.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bearer => write!(f, "the Authorization header, as Bearer"),
            Self::Basic => write!(f, "the Authorization header, as Basic"),
            Self::Header(name) => write!(f, "the {name} header"),
            Self::Query(name) => write!(f, "the {name} query parameter"),
        }
    }
}

impl FromStr for AuthScheme {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let named = |rest: &str, what: &str| {
            if rest.is_empty() {
                Err(format!("`{what}:` needs a name, as in `{what}:X-Api-Key`"))
            } else {
                Ok(rest.to_owned())
            }
        };
        match s.split_once(':') {
            None if s == "bearer" => Ok(Self::Bearer),
            None if s == "basic" => Ok(Self::Basic),
            Some(("header", name)) => named(name, "header").map(Self::Header),
            Some(("query", name)) => named(name, "query").map(Self::Query),
            _ => Err(format!(
                "unknown auth scheme `{s}`: use bearer, basic, header:NAME or query:NAME"
            )),
        }
    }
}

/// A secret and the scheme that presents it.
#[derive(Debug, Clone)]
pub struct Credential {
    /// How to present the secret.
    pub scheme: AuthScheme,
    /// The secret itself.
    pub secret: Secret,
}

/// Header names a script may not set: credentials are sdkbox's job and framing is reqwest's
/// (headers that change the method are refused outright, see `overrides.rs`).
const FORBIDDEN_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
    "apikey",
    "x-auth-token",
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    // Would let a script ask for a response in pieces or in an encoding the scrubber does
    // not read (a slice of an echoed credential matches no needle).
    "range",
    "if-range",
    "accept-encoding",
    "accept-charset",
    "te",
];

impl Credential {
    /// Whether the script's header `name` must be dropped.
    /// Names are compared as frameworks do: in any case, `_` as `-`.
    pub fn forbids_header(scheme: Option<&AuthScheme>, name: &str) -> bool {
        let name = super::overrides::header_name(name);
        FORBIDDEN_HEADERS.contains(&name.as_str())
            || matches!(scheme, Some(AuthScheme::Header(h)) if super::overrides::header_name(h) == name)
    }

    /// Adds the credential to a request about to be sent.
    pub fn apply(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let secret = self.secret.expose();
        match &self.scheme {
            AuthScheme::Bearer => request.bearer_auth(secret),
            AuthScheme::Basic => match secret.split_once(':') {
                Some((user, pass)) => request.basic_auth(user, Some(pass)),
                None => request.basic_auth(secret, Some("")),
            },
            AuthScheme::Header(name) => request.header(name.as_str(), secret),
            AuthScheme::Query(name) => request.query(&[(name.as_str(), secret)]),
        }
    }

    /// Feeds the scheme and the secret to `hasher`, for a keyed identity of the credential.
    pub fn hash_into(&self, hasher: &mut impl std::hash::Hasher) {
        std::hash::Hash::hash(&self.scheme, hasher);
        hasher.write(self.secret.expose().as_bytes());
    }

    /// Feeds the scheme and the secret to `out`, for a keyed digest of who this credential
    /// acts as (never the secret itself).
    pub(super) fn feed(&self, out: &mut dyn FnMut(&[u8])) {
        out(format!("{:?}", self.scheme).as_bytes());
        out(self.secret.expose().as_bytes());
    }

    /// The scrubber that keeps this secret out of what scripts and clients see. For basic
    /// auth the secret part is the password, on its own (a provider may quote it alone),
    /// unless it is a placeholder shorter than [`MIN_BASIC_PASSWORD`]: then the user is the
    /// key (Stripe's `key:`, Freshdesk's `key:X`). An account name is not a secret, and replies that name it
    /// stay whole; `user:password` whole is cut out in every encoding either way.
    pub fn scrubber(&self) -> Scrubber {
        let secret = self.secret.expose();
        match (&self.scheme, secret.split_once(':')) {
            (AuthScheme::Basic, Some((user, password))) => {
                let key = if password.chars().count() >= MIN_BASIC_PASSWORD {
                    password
                } else {
                    user
                };
                Scrubber::for_secret_within(key, Some(secret))
            }
            _ => Scrubber::for_secret(secret),
        }
    }

    /// The query parameter that carries the secret, which scripts may not set themselves.
    pub fn query_name(&self) -> Option<&str> {
        match &self.scheme {
            AuthScheme::Query(name) => Some(name),
            _ => None,
        }
    }
}

/// Characters a basic-auth password needs to be taken for the key; a shorter one (empty,
/// `X`) is a placeholder beside a key in the user (`key:X`).
const MIN_BASIC_PASSWORD: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(scheme: AuthScheme, secret: &str) -> Credential {
        Credential {
            scheme,
            secret: Secret::new(secret.to_owned()),
        }
    }

    #[test]
    fn secret_never_prints() {
        let c = cred(AuthScheme::Bearer, "sk_live_canary");
        assert!(!format!("{c:?}").contains("canary"));
        assert_eq!(c.secret.to_string(), "[redacted]");
    }

    #[test]
    fn basic_auth_scrubs_the_password_alone_and_a_user_that_is_the_key() {
        use base64::Engine;
        let (user, password) = (
            "AC8f0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e",
            "9f1c2b3a4d5e6f708192a3b4c5d61100",
        );
        let scrubber = cred(AuthScheme::Basic, &format!("{user}:{password}")).scrubber();
        let encoded = base64::engine::general_purpose::STANDARD.encode(password);
        for echo in [
            format!("invalid password {password}"),
            format!("{{\"user\":\"{user}\",\"password\":\"{password}\"}}"),
            format!("password as base64: {encoded}"),
        ] {
            let clean = scrubber.scrub(&echo);
            assert!(
                !clean.contains(password) && !clean.contains(&encoded),
                "{clean}"
            );
        }
        // The account name alone is not a secret: replies naming it stay whole.
        let named = format!("{{\"account_sid\":\"{user}\"}}");
        assert_eq!(scrubber.scrub(&named), named);
        // A short real password is still the secret, not the account name.
        let scrubber = cred(AuthScheme::Basic, "admin:hunter2pw").scrubber();
        assert!(
            !scrubber
                .scrub("wrong password hunter2pw")
                .contains("hunter2pw")
        );
        assert_eq!(scrubber.scrub("user admin"), "user admin");
        // Both parts too short to scrub alone: the whole `user:password` still is.
        let scrubber = cred(AuthScheme::Basic, "abc:x").scrubber();
        assert!(!scrubber.scrub("you sent abc:x!").contains("abc:x"));
        // The key is the user beside an empty or placeholder password (Stripe, Freshdesk).
        let key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
        for password in ["", "X"] {
            let scrubber = cred(AuthScheme::Basic, &format!("{key}:{password}")).scrubber();
            assert!(!scrubber.scrub(&format!("bad key {key}")).contains(key));
        }
    }

    #[test]
    fn parses_schemes() {
        assert_eq!("bearer".parse::<AuthScheme>(), Ok(AuthScheme::Bearer));
        assert_eq!(
            "header:X-Api-Key".parse::<AuthScheme>(),
            Ok(AuthScheme::Header("X-Api-Key".into()))
        );
        assert!(
            "header:"
                .parse::<AuthScheme>()
                .unwrap_err()
                .contains("needs a name")
        );
        assert!(
            "oauth"
                .parse::<AuthScheme>()
                .unwrap_err()
                .contains("bearer, basic")
        );
    }

    #[test]
    fn credential_headers_are_forbidden() {
        let scheme = AuthScheme::Header("X-Provider-Key".into());
        assert!(Credential::forbids_header(Some(&scheme), "x-provider-key"));
        assert!(Credential::forbids_header(None, "Authorization"));
        assert!(Credential::forbids_header(None, "COOKIE"));
        assert!(!Credential::forbids_header(None, "accept"));
    }
}
