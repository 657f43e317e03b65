//! The issuer's signing keys (its JWKS), fetched at start and cached. A token signed with a
//! key id the cache does not know makes one refetch (the issuer rotated its keys), at most one
//! every [`MIN_REFETCH`], so that tokens with made-up key ids cannot turn sdkbox into a flood
//! of requests to the issuer. Only asymmetric signing keys are kept: a symmetric (`oct`) key
//! in the set is never used, and HMAC is never accepted.

use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use reqwest::Client;
use serde_json::Value;
use tokio::time::Instant;
use url::Url;

use super::SignInError;
use super::fetch::get_json;

/// The shortest time between two fetches of the key set after the first.
pub const MIN_REFETCH: Duration = Duration::from_secs(5);

/// The most keys kept from one set.
const MAX_KEYS: usize = 64;

/// One usable signing key.
#[derive(Clone)]
struct Key {
    kid: Option<String>,
    /// The algorithm the key is for, when the set says.
    alg: Option<Algorithm>,
    family: AlgorithmFamily,
    decoding: DecodingKey,
}

/// The issuer's keys, and when they were last asked for.
pub(super) struct Keys {
    client: Client,
    url: Url,
    set: RwLock<Arc<Vec<Key>>>,
    last_fetch: tokio::sync::Mutex<Instant>,
}

impl Keys {
    /// Fetches the key set at `url`; it must hold at least one usable key.
    pub async fn start(client: Client, url: Url) -> Result<Self, SignInError> {
        let keys = fetch(&client, &url).await?;
        if keys.is_empty() {
            return Err(SignInError::Settings(format!(
                "the key set at {url} has no asymmetric signing key sdkbox can use"
            )));
        }
        Ok(Self {
            client,
            url,
            set: RwLock::new(Arc::new(keys)),
            last_fetch: tokio::sync::Mutex::new(Instant::now()),
        })
    }

    /// The keys that may have signed a token with this key id and algorithm; a key id the
    /// cache does not know refetches the set first, when the last fetch is old enough.
    pub async fn for_token(&self, kid: Option<&str>, alg: Algorithm) -> Vec<DecodingKey> {
        let found = self.matching(kid, alg);
        if !found.is_empty() || kid.is_none() {
            return found;
        }
        self.refetch().await;
        self.matching(kid, alg)
    }

    fn matching(&self, kid: Option<&str>, alg: Algorithm) -> Vec<DecodingKey> {
        let set = self.set.read().unwrap_or_else(|p| p.into_inner()).clone();
        set.iter()
            .filter(|key| kid.is_none() || key.kid.as_deref() == kid)
            .filter(|key| key.family == alg.family() && key.alg.is_none_or(|a| a == alg))
            .map(|key| key.decoding.clone())
            .collect()
    }

    /// Fetches the set again unless that was done less than [`MIN_REFETCH`] ago; a failed
    /// fetch keeps the keys there are.
    async fn refetch(&self) {
        let mut last = self.last_fetch.lock().await;
        if last.elapsed() < MIN_REFETCH {
            return;
        }
        *last = Instant::now();
        match fetch(&self.client, &self.url).await {
            Ok(keys) if !keys.is_empty() => {
                tracing::info!(keys = keys.len(), url = %self.url, "refetched the issuer's keys");
                *self.set.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(keys);
            }
            Ok(_) => {
                tracing::warn!(url = %self.url, "the issuer's key set has no usable key now; keeping the old keys")
            }
            Err(error) => {
                tracing::warn!(%error, "cannot refetch the issuer's keys; keeping the old ones")
            }
        }
    }
}

/// Fetches and reads a key set.
async fn fetch(client: &Client, url: &Url) -> Result<Vec<Key>, SignInError> {
    let document = get_json(client, url).await?;
    Ok(usable(&document))
}

/// The usable signing keys of a JWKS document; anything else in it is left out.
fn usable(document: &Value) -> Vec<Key> {
    let Some(keys) = document["keys"].as_array() else {
        return Vec::new();
    };
    keys.iter().filter_map(usable_key).take(MAX_KEYS).collect()
}

fn usable_key(value: &Value) -> Option<Key> {
    if value["use"].as_str().is_some_and(|u| u != "sig") {
        return None;
    }
    let alg = match value["alg"].as_str() {
        Some(name) => Some(Algorithm::from_str(name).ok()?),
        None => None,
    };
    let jwk: Jwk = serde_json::from_value(value.clone()).ok()?;
    let decoding = DecodingKey::from_jwk(&jwk).ok()?;
    let family = decoding.family();
    if family == AlgorithmFamily::Hmac || alg.is_some_and(|a| a.family() != family) {
        return None;
    }
    Some(Key {
        kid: value["kid"].as_str().map(str::to_owned),
        alg,
        family,
        decoding,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_asymmetric_signing_keys_are_kept() {
        let rsa = json!({"kty": "RSA", "kid": "r", "alg": "RS256", "use": "sig",
            "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw",
            "e": "AQAB"});
        let hmac = json!({"kty": "oct", "kid": "h", "k": "c2VjcmV0"});
        let encrypting =
            json!({"kty": "RSA", "kid": "e", "use": "enc", "n": rsa["n"], "e": "AQAB"});
        let mislabelled =
            json!({"kty": "RSA", "kid": "m", "alg": "HS256", "n": rsa["n"], "e": "AQAB"});
        let unknown = json!({"kty": "XYZ", "kid": "u"});
        let keys = usable(&json!({"keys": [rsa, hmac, encrypting, mislabelled, unknown]}));
        let kids: Vec<_> = keys.iter().map(|k| k.kid.clone().unwrap()).collect();
        assert_eq!(kids, ["r"]);
        assert!(usable(&json!({"keys": "no"})).is_empty());
    }
}
