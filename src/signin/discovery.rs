//! The authorization server's metadata (RFC 8414, or OpenID Connect discovery): where its keys
//! and its introspection endpoint are. The metadata must name the configured issuer exactly
//! (RFC 8414 §3.3), so a mistyped or impersonated issuer fails at start.

use reqwest::Client;
use url::Url;

use super::SignInError;
use super::fetch::get_json;

/// What sign-in needs from the issuer's metadata.
#[derive(Debug, Clone)]
pub(crate) struct IssuerMetadata {
    /// The issuer as the metadata (and so its tokens) spell it.
    pub issuer: String,
    /// Its key set.
    pub jwks_uri: Option<Url>,
    /// Its introspection endpoint, if it has one.
    pub introspection_endpoint: Option<Url>,
    /// Where users authorize a client (account linking sends them there).
    pub authorization_endpoint: Option<Url>,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: Option<Url>,
    /// Where tokens are revoked (RFC 7009), if it has one.
    pub revocation_endpoint: Option<Url>,
}

/// The metadata URLs to try for `issuer`, in order: RFC 8414's (the well-known path inserted
/// before the issuer's path), OpenID Connect's (appended), and OpenID Connect's inserted, as
/// some servers serve it.
fn candidates(issuer: &str) -> Vec<Url> {
    let Ok(url) = Url::parse(issuer) else {
        return Vec::new();
    };
    let path = url.path().trim_end_matches('/').to_owned();
    let at = |p: String| {
        let mut u = url.clone();
        u.set_path(&p);
        u
    };
    let mut urls = vec![
        at(format!("/.well-known/oauth-authorization-server{path}")),
        at(format!("{path}/.well-known/openid-configuration")),
        at(format!("/.well-known/openid-configuration{path}")),
    ];
    urls.dedup();
    urls
}

/// Reads the issuer's metadata: the first candidate that answers for this issuer.
pub(crate) async fn discover(client: &Client, issuer: &str) -> Result<IssuerMetadata, SignInError> {
    let mut tried = Vec::new();
    for url in candidates(issuer) {
        let document = match get_json(client, &url).await {
            Ok(document) => document,
            Err(SignInError::Unreachable(why) | SignInError::Settings(why)) => {
                tried.push(why);
                continue;
            }
        };
        let named = document["issuer"].as_str().unwrap_or_default();
        // The same issuer, with or without a trailing slash (`Url` adds one to a bare host).
        if named.trim_end_matches('/') != issuer.trim_end_matches('/') {
            return Err(SignInError::Settings(format!(
                "the metadata at {url} is for issuer `{named}`, not `{issuer}`: set --oauth-issuer to exactly what the authorization server's tokens say in `iss`"
            )));
        }
        let url_of = |field: &str| document[field].as_str().and_then(|u| Url::parse(u).ok());
        return Ok(IssuerMetadata {
            issuer: named.to_owned(),
            jwks_uri: url_of("jwks_uri"),
            introspection_endpoint: url_of("introspection_endpoint"),
            authorization_endpoint: url_of("authorization_endpoint"),
            token_endpoint: url_of("token_endpoint"),
            revocation_endpoint: url_of("revocation_endpoint"),
        });
    }
    Err(SignInError::Unreachable(format!(
        "cannot read the metadata of issuer {issuer} (tried {})",
        tried.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_both_standards_put_it() {
        let urls: Vec<String> = candidates("https://idp.example.com/realms/acme")
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            urls,
            [
                "https://idp.example.com/.well-known/oauth-authorization-server/realms/acme",
                "https://idp.example.com/realms/acme/.well-known/openid-configuration",
                "https://idp.example.com/.well-known/openid-configuration/realms/acme",
            ]
        );
        let root = candidates("https://idp.example.com");
        assert_eq!(
            root[0].as_str(),
            "https://idp.example.com/.well-known/oauth-authorization-server"
        );
        assert_eq!(root.len(), 2, "{root:?}");
    }
}
