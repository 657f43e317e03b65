//! How sign-in is configured: the `[oauth]` table of a provider file, with the command line's
//! `--oauth-issuer` and `--public-url` over it, checked once into [`SignInSettings`].

use serde::Deserialize;
use url::Url;

use super::SignInError;

/// The scope that lets a caller search and run read-only code, unless renamed.
pub const DEFAULT_READ_SCOPE: &str = "sdkbox:read";

/// The scope that lets a caller's code write (under the approval rules), unless renamed.
pub const DEFAULT_WRITE_SCOPE: &str = "sdkbox:write";

/// `[oauth]` in a provider file, as written (not to be confused with `auth`, the scheme of the
/// provider's own credential).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthFile {
    /// The authorization server's issuer URL, as its tokens' `iss` says.
    pub issuer: Option<Url>,
    /// This server's canonical MCP URL (`https://mcp.example.com/mcp`): the audience tokens
    /// must name, and what clients are told in the resource metadata.
    pub public_url: Option<Url>,
    /// The audience tokens must name, when the authorization server uses another than the
    /// public URL (an API identifier such as `api://sdkbox`).
    pub audience: Option<String>,
    /// The issuer's key set, when its metadata does not name it (or names another).
    pub jwks_url: Option<Url>,
    /// The scope names, when the identity provider's differ from `sdkbox:read` and
    /// `sdkbox:write`.
    #[serde(default)]
    pub scopes: ScopeNames,
    /// The JWT `typ` values accepted when a token has one (default `at+jwt`, RFC 9068); add
    /// `JWT` for providers whose access tokens say so (Keycloak, Microsoft Entra).
    pub token_types: Option<Vec<String>>,
    /// Introspection (RFC 7662) for opaque access tokens.
    pub introspection: Option<IntrospectionFile>,
}

/// `[oauth.scopes]`: what the identity provider calls the two scopes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeNames {
    /// Search and read-only execution.
    #[serde(default = "read_scope")]
    pub read: String,
    /// Writes, under the approval rules.
    #[serde(default = "write_scope")]
    pub write: String,
}

fn read_scope() -> String {
    DEFAULT_READ_SCOPE.to_owned()
}

fn write_scope() -> String {
    DEFAULT_WRITE_SCOPE.to_owned()
}

impl Default for ScopeNames {
    /// `sdkbox:read` and `sdkbox:write`.
    fn default() -> Self {
        Self {
            read: read_scope(),
            write: write_scope(),
        }
    }
}

/// `[oauth.introspection]`: where opaque tokens are checked, and as which client.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionFile {
    /// The introspection endpoint; default: the one the issuer's metadata names.
    pub endpoint: Option<Url>,
    /// The client sdkbox introspects as.
    pub client_id: String,
    /// The environment variable holding that client's secret.
    pub client_secret_env: String,
}

/// Sign-in as checked: every URL absolute, every name non-empty, the secret read.
#[derive(Debug, Clone)]
pub struct SignInSettings {
    /// The issuer, exactly as tokens name it.
    pub issuer: String,
    /// The canonical MCP URL.
    pub public_url: Url,
    /// The audiences a token may name (one of them is enough).
    pub audiences: Vec<String>,
    /// The key set, if not the one the issuer's metadata names.
    pub jwks_url: Option<Url>,
    /// The scope names.
    pub scopes: ScopeNames,
    /// Accepted `typ` values, lower case, without `application/`.
    pub token_types: Vec<String>,
    /// Introspection, if opaque tokens are accepted.
    pub introspection: Option<IntrospectionSettings>,
}

/// Introspection as checked.
#[derive(Clone)]
pub struct IntrospectionSettings {
    /// The endpoint, if not the issuer's metadata's.
    pub endpoint: Option<Url>,
    /// The client sdkbox introspects as.
    pub client_id: String,
    /// Its secret.
    pub client_secret: String,
}

impl std::fmt::Debug for IntrospectionSettings {
    /// Everything but the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionSettings")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl OAuthFile {
    /// Whether sign-in is asked for at all (an issuer or a public URL is set).
    pub fn wanted(&self) -> bool {
        self.issuer.is_some() || self.public_url.is_some()
    }

    /// The settings, checked; `env` reads the environment (the introspection secret).
    pub fn check(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<SignInSettings, SignInError> {
        let bad = |why: String| SignInError::Settings(why);
        let issuer = self.issuer.as_ref().ok_or_else(|| {
            bad(
                "sign-in needs the authorization server: --oauth-issuer URL or [oauth] issuer"
                    .into(),
            )
        })?;
        let public_url = self.public_url.clone().ok_or_else(|| {
            bad(
                "sign-in needs this server's MCP URL as clients reach it: --public-url \
                 https://HOST/mcp or [oauth] public_url"
                    .into(),
            )
        })?;
        let endpoint = self
            .introspection
            .as_ref()
            .and_then(|i| i.endpoint.as_ref());
        let urls = [
            ("issuer", Some(issuer)),
            ("public URL", Some(&public_url)),
            ("key set URL", self.jwks_url.as_ref()),
            ("introspection endpoint", endpoint),
        ];
        for (name, url) in urls.into_iter().filter_map(|(n, u)| Some((n, u?))) {
            if !super::fetch::secure(url) {
                return Err(bad(format!(
                    "the {name} {url} must be https (plain http only on loopback)"
                )));
            }
            if url.fragment().is_some() || url.query().is_some() && name != "key set URL" {
                return Err(bad(format!(
                    "the {name} {url} must have no query and no fragment"
                )));
            }
        }
        let scopes = self.scopes.clone();
        for (name, scope) in [("read", &scopes.read), ("write", &scopes.write)] {
            let valid = !scope.is_empty()
                && scope
                    .chars()
                    .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\');
            if !valid {
                return Err(bad(format!(
                    "the {name} scope `{scope}` must be one word of visible ASCII, without quotes or backslashes"
                )));
            }
        }
        if scopes.read == scopes.write {
            return Err(bad(format!(
                "the read and write scopes are both `{}`: give them different names",
                scopes.read
            )));
        }
        let audiences = match &self.audience {
            Some(audience) if !audience.is_empty() => vec![audience.clone()],
            _ => same_url_spellings(&public_url),
        };
        let token_types = self
            .token_types
            .clone()
            .unwrap_or_else(|| vec!["at+jwt".to_owned()])
            .iter()
            .map(|t| normal_type(t))
            .collect();
        let introspection = match &self.introspection {
            None => None,
            Some(file) => {
                let secret = env(&file.client_secret_env)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| {
                        bad(format!(
                            "[oauth.introspection] client_secret_env: the environment variable {} is not set",
                            file.client_secret_env
                        ))
                    })?;
                Some(IntrospectionSettings {
                    endpoint: file.endpoint.clone(),
                    client_id: file.client_id.clone(),
                    client_secret: secret,
                })
            }
        };
        Ok(SignInSettings {
            // As written by the operator: `https://idp.example.com` parses to a URL with a
            // trailing slash, which tokens do not have.
            issuer: issuer_text(issuer),
            public_url,
            audiences,
            jwks_url: self.jwks_url.clone(),
            scopes,
            token_types,
            introspection,
        })
    }
}

/// The issuer as tokens spell it: an issuer without a path has no trailing slash.
fn issuer_text(issuer: &Url) -> String {
    let text = issuer.as_str();
    match issuer.path() {
        "/" => text.trim_end_matches('/').to_owned(),
        _ => text.to_owned(),
    }
}

/// The public URL with and without a trailing slash: the same resource, as clients send it.
fn same_url_spellings(url: &Url) -> Vec<String> {
    let text = url.as_str();
    let bare = text.trim_end_matches('/');
    let mut spellings = vec![text.to_owned()];
    if bare != text {
        spellings.push(bare.to_owned());
    } else {
        spellings.push(format!("{text}/"));
    }
    spellings
}

/// A `typ` as compared: lower case, `application/` left out (RFC 7515 §4.1.9).
pub(super) fn normal_type(typ: &str) -> String {
    let lower = typ.to_ascii_lowercase();
    lower
        .strip_prefix("application/")
        .unwrap_or(&lower)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(issuer: &str, public: &str) -> OAuthFile {
        OAuthFile {
            issuer: Some(Url::parse(issuer).unwrap()),
            public_url: Some(Url::parse(public).unwrap()),
            ..OAuthFile::default()
        }
    }

    #[test]
    fn settings_name_the_issuer_as_tokens_do_and_both_spellings_of_the_url() {
        let settings = file("https://idp.example.com", "https://mcp.example.com/mcp")
            .check(&|_| None)
            .unwrap();
        assert_eq!(settings.issuer, "https://idp.example.com");
        assert_eq!(
            settings.audiences,
            [
                "https://mcp.example.com/mcp",
                "https://mcp.example.com/mcp/"
            ]
        );
        assert_eq!(settings.token_types, ["at+jwt"]);
        let realm = file(
            "https://idp.example.com/realms/x/",
            "https://m.example.com/mcp",
        )
        .check(&|_| None)
        .unwrap();
        assert_eq!(realm.issuer, "https://idp.example.com/realms/x/");
    }

    #[test]
    fn plain_http_off_loopback_and_missing_parts_are_refused_with_what_to_do() {
        let error = file("http://idp.example.com", "https://m.example.com/mcp")
            .check(&|_| None)
            .unwrap_err()
            .to_string();
        assert!(error.contains("must be https"), "{error}");
        assert!(
            file("http://127.0.0.1:9000", "http://127.0.0.1:8080/mcp")
                .check(&|_| None)
                .is_ok()
        );
        let missing = OAuthFile {
            public_url: None,
            ..file("https://idp.example.com", "https://m.example.com/mcp")
        };
        let error = missing.check(&|_| None).unwrap_err().to_string();
        assert!(error.contains("--public-url"), "{error}");
        let same = OAuthFile {
            scopes: ScopeNames {
                read: "api".into(),
                write: "api".into(),
            },
            ..file("https://idp.example.com", "https://m.example.com/mcp")
        };
        assert!(same.check(&|_| None).is_err());
        let quoted = OAuthFile {
            scopes: ScopeNames {
                read: "a\"b".into(),
                write: "w".into(),
            },
            ..file("https://idp.example.com", "https://m.example.com/mcp")
        };
        assert!(quoted.check(&|_| None).is_err());
    }

    #[test]
    fn introspection_needs_its_secret_in_the_environment() {
        let with = OAuthFile {
            introspection: Some(IntrospectionFile {
                endpoint: None,
                client_id: "rs".into(),
                client_secret_env: "RS_SECRET".into(),
            }),
            ..file("https://idp.example.com", "https://m.example.com/mcp")
        };
        let error = with.check(&|_| None).unwrap_err().to_string();
        assert!(error.contains("RS_SECRET"), "{error}");
        let settings = with
            .check(&|name| (name == "RS_SECRET").then(|| "s".to_owned()))
            .unwrap();
        assert_eq!(settings.introspection.unwrap().client_secret, "s");
    }
}
