//! How account linking is configured: the `[provider_oauth]` table of a provider file, checked
//! once into [`LinkSettings`] against sign-in's public URL.

use serde::Deserialize;
use url::Url;

pub use crate::signin::fetch::{OAuthClient, TokenAuth};

use super::LinkError;
use super::seal::Sealer;

/// The callback path on the public URL's origin, unless the table names another.
pub const DEFAULT_REDIRECT_PATH: &str = "/link/callback";

/// The environment variable holding the key tokens are encrypted with, unless renamed.
pub const DEFAULT_KEY_ENV: &str = "SDKBOX_LINK_KEY";

/// `[provider_oauth]` in a provider file, as written: sdkbox as an OAuth client of the
/// provider, so that each signed-in user acts with their own provider account.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderOAuthFile {
    /// The provider's authorization server, for discovery (RFC 8414 or OpenID).
    pub issuer: Option<Url>,
    /// Where users authorize sdkbox, if not the issuer's metadata's.
    pub authorization_endpoint: Option<Url>,
    /// Where codes and refresh tokens are exchanged, if not the issuer's metadata's.
    pub token_endpoint: Option<Url>,
    /// Where tokens are revoked on unlink (RFC 7009), if not the issuer's metadata's.
    pub revocation_endpoint: Option<Url>,
    /// sdkbox's client id at the provider.
    pub client_id: String,
    /// The environment variable holding sdkbox's client secret (none: a public client).
    pub client_secret_env: Option<String>,
    /// The scopes asked for.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The resource indicator (RFC 8707) tokens are asked for, if the provider wants one.
    pub resource: Option<String>,
    /// The callback path on the public URL's origin (default `/link/callback`).
    pub redirect_path: Option<String>,
    /// Where links are kept: a file path (default: `links.json` in sdkbox's state directory)
    /// or `redis://HOST:PORT/DB` for several replicas.
    pub store: Option<String>,
    /// The environment variable holding the 32-byte key tokens are encrypted with (64 hex
    /// digits or base64; default `SDKBOX_LINK_KEY`).
    pub key_env: Option<String>,
    /// How sdkbox authenticates at the token endpoint: `basic` (default) or `post`.
    pub token_auth: Option<TokenAuth>,
    /// sdkbox's own client at the sign-in issuer, with which it confirms that whoever opens
    /// a link is the user it was offered to (redirect URI `https://HOST/link/confirm`).
    pub confirm_client_id: String,
    /// The environment variable holding that client's secret (none: a public client).
    pub confirm_client_secret_env: Option<String>,
}

/// The path, on the public origin, the sign-in issuer sends a link's browser back to.
pub const CONFIRM_PATH: &str = "/link/confirm";

/// Where links are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// One file, for one instance.
    File(std::path::PathBuf),
    /// A Redis server, shared by replicas.
    Redis(String),
}

/// Linking as checked: every URL absolute and secure, the secrets read.
#[derive(Clone)]
pub struct LinkSettings {
    /// The issuer to discover endpoints from, if given.
    pub issuer: Option<Url>,
    /// The authorization endpoint, if given (else discovered).
    pub authorization_endpoint: Option<Url>,
    /// The token endpoint, if given (else discovered).
    pub token_endpoint: Option<Url>,
    /// The revocation endpoint, if given (else discovered, if the issuer has one).
    pub revocation_endpoint: Option<Url>,
    /// sdkbox as the provider's client.
    pub client: OAuthClient,
    /// sdkbox as the sign-in issuer's client, confirming who opens a link.
    pub confirm_client: OAuthClient,
    /// Where the sign-in issuer sends a link's browser back.
    pub confirm_uri: Url,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The resource indicator, if any.
    pub resource: Option<String>,
    /// The redirect URI the provider sends users back to.
    pub redirect_uri: Url,
    /// The public origin links are served on (`https://mcp.example.com`).
    pub public_origin: Url,
    /// Where links are kept.
    pub store: StoreChoice,
    /// The key stored tokens are encrypted with.
    pub sealer: Sealer,
}

impl std::fmt::Debug for LinkSettings {
    /// Everything but the secret and the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client.id)
            .field("confirm_client_id", &self.confirm_client.id)
            .field("scopes", &self.scopes)
            .field("redirect_uri", &self.redirect_uri.as_str())
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl ProviderOAuthFile {
    /// The settings, checked against sign-in's `public_url`; `env` reads the environment.
    pub fn check(
        &self,
        public_url: &Url,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LinkSettings, LinkError> {
        let bad = |why: String| LinkError::Settings(why);
        if self.client_id.trim().is_empty() {
            return Err(bad("[provider_oauth] client_id is empty".into()));
        }
        if self.issuer.is_none()
            && (self.authorization_endpoint.is_none() || self.token_endpoint.is_none())
        {
            return Err(bad(
                "[provider_oauth] needs the provider's issuer, or its authorization_endpoint and token_endpoint"
                    .into(),
            ));
        }
        let urls = [
            ("issuer", self.issuer.as_ref()),
            (
                "authorization endpoint",
                self.authorization_endpoint.as_ref(),
            ),
            ("token endpoint", self.token_endpoint.as_ref()),
            ("revocation endpoint", self.revocation_endpoint.as_ref()),
        ];
        for (name, url) in urls.into_iter().filter_map(|(n, u)| Some((n, u?))) {
            if !crate::signin::fetch::secure(url) {
                return Err(bad(format!(
                    "[provider_oauth] the {name} {url} must be https (plain http only on loopback)"
                )));
            }
        }
        for scope in &self.scopes {
            if scope.is_empty()
                || !scope
                    .chars()
                    .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\')
            {
                return Err(bad(format!(
                    "[provider_oauth] scope `{scope}` must be one word of visible ASCII, without quotes"
                )));
            }
        }
        let secret = |field: &str, name: &Option<String>| match name {
            None => Ok(None),
            Some(name) => env(name)
                .filter(|s| !s.is_empty())
                .map(Some)
                .ok_or_else(|| {
                    bad(format!(
                        "[provider_oauth] {field}: the environment variable {name} is not set"
                    ))
                }),
        };
        let client_secret = secret("client_secret_env", &self.client_secret_env)?;
        let confirm_secret = secret("confirm_client_secret_env", &self.confirm_client_secret_env)?;
        if self.confirm_client_id.trim().is_empty() {
            return Err(bad(format!(
                "[provider_oauth] confirm_client_id is empty: register sdkbox as a client of the sign-in issuer with the redirect URI https://HOST{CONFIRM_PATH}, so that a link is only followed by the user it was offered to"
            )));
        }
        let key_env = self.key_env.as_deref().unwrap_or(DEFAULT_KEY_ENV);
        let key = env(key_env).filter(|k| !k.is_empty()).ok_or_else(|| {
            bad(format!(
                "account linking keeps provider tokens encrypted with a key from the environment: set {key_env} to 32 random bytes (`openssl rand -hex 32`)"
            ))
        })?;
        let sealer = Sealer::from_text(&key).map_err(|why| bad(format!("{key_env}: {why}")))?;
        let path = self
            .redirect_path
            .as_deref()
            .unwrap_or(DEFAULT_REDIRECT_PATH);
        let mut public_origin = public_url.clone();
        public_origin.set_path("/");
        public_origin.set_query(None);
        public_origin.set_fragment(None);
        let redirect_uri = public_origin
            .join(path)
            .ok()
            .filter(|u| {
                // Checked as resolved, so `..` and escapes cannot leave /link/ or clash.
                let resolved = u.path();
                resolved.len() > "/link/".len()
                    && resolved.starts_with("/link/")
                    && !resolved.starts_with("/link/start/")
                    && resolved != CONFIRM_PATH
                    && u.query().is_none()
                    && u.fragment().is_none()
                    && resolved
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"/_-".contains(&b))
            })
            .ok_or_else(|| {
                bad(format!(
                    "[provider_oauth] redirect_path `{path}` must be a plain path under /link/ (letters, digits, / _ -), not /link/start/ or {CONFIRM_PATH} (default {DEFAULT_REDIRECT_PATH})"
                ))
            })?;
        let confirm_uri = public_origin
            .join(CONFIRM_PATH)
            .map_err(|e| bad(e.to_string()))?;
        let store = match self.store.as_deref() {
            Some(url) if url.starts_with("redis://") || url.starts_with("rediss://") => {
                StoreChoice::Redis(url.to_owned())
            }
            Some(path) if !path.is_empty() => StoreChoice::File(path.into()),
            _ => StoreChoice::File(default_store(&self.client_id).ok_or_else(|| {
                bad("[provider_oauth] no state directory for the link store: set store = \"/path/links.json\"".into())
            })?),
        };
        Ok(LinkSettings {
            issuer: self.issuer.clone(),
            authorization_endpoint: self.authorization_endpoint.clone(),
            token_endpoint: self.token_endpoint.clone(),
            revocation_endpoint: self.revocation_endpoint.clone(),
            client: OAuthClient {
                id: self.client_id.clone(),
                secret: client_secret,
                auth: self.token_auth.unwrap_or_default(),
            },
            confirm_client: OAuthClient {
                id: self.confirm_client_id.clone(),
                secret: confirm_secret,
                auth: self.token_auth.unwrap_or_default(),
            },
            confirm_uri,
            scopes: self.scopes.clone(),
            resource: self.resource.clone(),
            redirect_uri,
            public_origin,
            store,
            sealer,
        })
    }
}

/// `links-<client>.json` in sdkbox's state directory (`$SDKBOX_STATE_DIR`, else
/// `$XDG_STATE_HOME/sdkbox` or `~/.local/state/sdkbox`): one file per provider client, since a
/// file store is one process's. State, not cache: clearing caches must not unlink everyone.
fn default_store(client_id: &str) -> Option<std::path::PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let dir = var("SDKBOX_STATE_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| var("XDG_STATE_HOME").map(|d| std::path::PathBuf::from(d).join("sdkbox")))
        .or_else(|| var("HOME").map(|h| std::path::PathBuf::from(h).join(".local/state/sdkbox")))?;
    let name: String = client_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    Some(dir.join(format!("links-{name}.json")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> ProviderOAuthFile {
        ProviderOAuthFile {
            issuer: Some(Url::parse("https://auth.example.com").unwrap()),
            client_id: "sdkbox".into(),
            client_secret_env: Some("SECRET".into()),
            confirm_client_id: "sdkbox-confirm".into(),
            scopes: vec!["orders:read".into()],
            store: Some("/tmp/links.json".into()),
            ..ProviderOAuthFile::default()
        }
    }

    fn env(name: &str) -> Option<String> {
        match name {
            "SECRET" => Some("s3cret".into()),
            "SDKBOX_LINK_KEY" => Some("ab".repeat(32)),
            _ => None,
        }
    }

    #[test]
    fn the_callback_is_on_the_public_origin() {
        let public = Url::parse("https://mcp.example.com/team/mcp").unwrap();
        let settings = file().check(&public, &env).unwrap();
        assert_eq!(
            settings.redirect_uri.as_str(),
            "https://mcp.example.com/link/callback"
        );
        assert_eq!(settings.client.secret.as_deref(), Some("s3cret"));
        assert_eq!(
            settings.confirm_uri.as_str(),
            "https://mcp.example.com/link/confirm"
        );
        assert!(!format!("{settings:?}").contains("s3cret"));
    }

    #[test]
    fn what_is_missing_is_said() {
        let public = Url::parse("https://mcp.example.com/mcp").unwrap();
        let no_key = file().check(&public, &|n| (n == "SECRET").then(|| "s".into()));
        assert!(no_key.unwrap_err().to_string().contains("SDKBOX_LINK_KEY"));
        let plain = ProviderOAuthFile {
            issuer: Some(Url::parse("http://auth.example.com").unwrap()),
            ..file()
        };
        assert!(
            plain
                .check(&public, &env)
                .unwrap_err()
                .to_string()
                .contains("https")
        );
        for path in [
            "/mcp",
            "/link/../mcp",
            "/link/%2e%2e/healthz",
            "/link/:cb",
            "/link/start/x",
            "/link/confirm",
            "/link/",
        ] {
            let elsewhere = ProviderOAuthFile {
                redirect_path: Some(path.into()),
                ..file()
            };
            assert!(elsewhere.check(&public, &env).is_err(), "{path}");
        }
        let redis = ProviderOAuthFile {
            store: Some("redis://127.0.0.1:6379/0".into()),
            ..file()
        };
        assert!(matches!(
            redis.check(&public, &env).unwrap().store,
            StoreChoice::Redis(_)
        ));
    }
}
