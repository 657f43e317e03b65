//! The provider secret: how it is presented, and how it is kept out of everything else.
//!
//! Only egress holds a [`Secret`]. It never enters the isolate: the script's own credential
//! headers are dropped and the real ones added here, and a [`Scrubber`] removes every form
//! of the secret from what goes back (response bodies, results, console lines, errors).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

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
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Header names a script may not set: credentials are sdkbox's job, and framing is reqwest's.
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
];

impl Credential {
    /// Whether the script's header `name` must be dropped.
    pub fn forbids_header(scheme: Option<&AuthScheme>, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        FORBIDDEN_HEADERS.contains(&lower.as_str())
            || matches!(scheme, Some(AuthScheme::Header(h)) if h.eq_ignore_ascii_case(&lower))
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

    /// The query parameter that carries the secret, which scripts may not set themselves.
    pub fn query_name(&self) -> Option<&str> {
        match &self.scheme {
            AuthScheme::Query(name) => Some(name),
            _ => None,
        }
    }
}

/// Replaces every form of the secret (plain, base64 as in Basic auth, URL-encoded) with
/// `[redacted]`.
#[derive(Clone, Default)]
pub struct Scrubber {
    needles: Vec<String>,
}

impl Scrubber {
    /// A scrubber for `credential`; one that changes nothing when there is none.
    pub fn new(credential: Option<&Credential>) -> Self {
        let Some(credential) = credential else {
            return Self::default();
        };
        let secret = credential.secret.expose();
        if secret.len() < 4 {
            // Too short to tell apart from ordinary text; redacting it would mangle output.
            return Self::default();
        }
        let basic = if secret.contains(':') {
            secret.to_owned()
        } else {
            format!("{secret}:")
        };
        let mut needles = vec![
            secret.to_owned(),
            STANDARD.encode(basic.as_bytes()),
            url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
        ];
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        needles.dedup();
        Self { needles }
    }

    /// `text` with the secret replaced.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for needle in &self.needles {
            if out.contains(needle.as_str()) {
                out = Cow::Owned(out.replace(needle.as_str(), "[redacted]"));
            }
        }
        out
    }

    /// Scrubs every string (and key) inside a JSON value, in place.
    pub fn scrub_json(&self, value: &mut serde_json::Value) {
        if self.needles.is_empty() {
            return;
        }
        match value {
            serde_json::Value::String(s) => {
                if let Cow::Owned(clean) = self.scrub(s) {
                    *s = clean;
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_json(v)),
            serde_json::Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut v) in entries {
                    self.scrub_json(&mut v);
                    map.insert(self.scrub(&key).into_owned(), v);
                }
            }
            _ => {}
        }
    }
}

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
    fn scrubs_every_form() {
        let s = Scrubber::new(Some(&cred(AuthScheme::Basic, "sk/live+canary")));
        let basic = STANDARD.encode("sk/live+canary:");
        let text = format!("a sk/live+canary b {basic} c sk%2Flive%2Bcanary");
        assert_eq!(s.scrub(&text), "a [redacted] b [redacted] c [redacted]");
        let mut json = serde_json::json!({"sk/live+canary": ["x sk/live+canary"]});
        s.scrub_json(&mut json);
        assert_eq!(json, serde_json::json!({"[redacted]": ["x [redacted]"]}));
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
