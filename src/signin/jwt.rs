//! Checking a JWT access token (RFC 9068): an asymmetric signature by one of the issuer's
//! keys, then `iss`, `aud`, `exp` and `nbf` (with a small leeway), `sub`, and `typ` when the
//! header has one. `alg: none` and HMAC are refused before any key is looked at, so a token
//! "signed" with the issuer's public key as an HMAC secret never gets that far.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
use serde::Deserialize;
use serde_json::Value;

use super::keys::Keys;
use super::settings::{SignInSettings, normal_type};
use super::{Invalid, SignedIn};

/// Clock skew allowed on `exp` and `nbf`, in seconds.
const LEEWAY_S: u64 = 30;

/// The algorithms a token may be signed with: asymmetric ones only.
const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The claims sign-in reads (the library checks `iss`, `aud`, `exp`, `nbf` itself).
#[derive(Deserialize)]
struct Claims {
    /// Required (the library refuses a token without it), optional here so that its absence
    /// is said as such.
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    scope: Option<Value>,
    /// Microsoft Entra and Okta name the scopes `scp`, as a list or a string.
    #[serde(default)]
    scp: Option<Value>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    azp: Option<String>,
    /// Marks of an ID token: `at_hash` (OpenID Connect), a payload `typ` of `ID` (Keycloak).
    #[serde(default)]
    at_hash: Option<Value>,
    #[serde(default)]
    typ: Option<Value>,
    /// A confirmation (RFC 7800): `jkt` binds the token to a DPoP key (RFC 9449).
    #[serde(default)]
    cnf: Option<Value>,
}

/// Whether a token looks like a JWT (three base64url parts), rather than an opaque string.
pub(super) fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Checks `token` against the settings and the issuer's keys.
pub(super) async fn check(
    token: &str,
    settings: &SignInSettings,
    keys: &Keys,
) -> Result<SignedIn, Invalid> {
    let header = decode_header(token).map_err(|e| match e.kind() {
        ErrorKind::InvalidAlgorithmName | ErrorKind::Json(_) => Invalid(
            "the token's header names an algorithm sdkbox does not accept (none, or unknown): tokens must be signed with an asymmetric key"
                .into(),
        ),
        _ => Invalid("the token is not a well-formed JWT".into()),
    })?;
    if !ASYMMETRIC.contains(&header.alg) {
        return Err(Invalid(format!(
            "the token is signed with {:?}, which sdkbox does not accept: only the issuer's asymmetric keys (RS*, PS*, ES*, EdDSA)",
            header.alg
        )));
    }
    if let Some(typ) = &header.typ
        && !settings.token_types.contains(&normal_type(typ))
    {
        return Err(Invalid(format!(
            "the token's type is `{typ}`, not an access token's (`at+jwt`): send an access token, not an ID token"
        )));
    }
    let mut validation = Validation::new(header.alg);
    validation.leeway = LEEWAY_S;
    validation.validate_nbf = true;
    validation.set_issuer(&[settings.issuer.as_str()]);
    validation.set_audience(&settings.audiences);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let candidates = keys.for_token(header.kid.as_deref(), header.alg).await;
    if candidates.is_empty() {
        return Err(Invalid(
            "the token is signed with a key the issuer does not publish".into(),
        ));
    }
    let mut last = None;
    for key in &candidates {
        match decode::<Claims>(token, key, &validation) {
            Ok(data) => return signed_in(data.claims, settings),
            Err(error) => last = Some(error),
        }
    }
    Err(Invalid(match last.map(|e| e.into_kind()) {
        Some(ErrorKind::ExpiredSignature) => "the token has expired: get a new one".into(),
        Some(ErrorKind::ImmatureSignature) => "the token is not valid yet (nbf)".into(),
        Some(ErrorKind::InvalidIssuer) => format!(
            "the token was issued by another authorization server; this server accepts {}",
            settings.issuer
        ),
        Some(ErrorKind::InvalidAudience) => format!(
            "the token is for another resource: its audience must be {}",
            settings.audiences[0]
        ),
        Some(ErrorKind::MissingRequiredClaim(claim)) => {
            format!("the token has no `{claim}` claim")
        }
        Some(ErrorKind::InvalidSignature) => "the token's signature does not verify".into(),
        Some(ErrorKind::Base64(_)) => "the token is not well-formed base64url".into(),
        Some(ErrorKind::InvalidClaimFormat(claim)) => {
            format!("the token's `{claim}` claim is malformed")
        }
        _ => "the token could not be verified".into(),
    }))
}

/// Who a verified token names, and what it may do.
fn signed_in(claims: Claims, settings: &SignInSettings) -> Result<SignedIn, Invalid> {
    // An ID token for the same audience (possible where `JWT` types are accepted) is not an
    // access token.
    if claims.at_hash.is_some() || claims.typ.as_ref().is_some_and(|t| t == "ID") {
        return Err(Invalid(
            "the token is an ID token: send the access token".into(),
        ));
    }
    if claims.cnf.is_some() {
        return Err(super::sender_bound());
    }
    let Some(subject) = claims.sub.filter(|s| !s.is_empty()) else {
        return Err(Invalid("the token has no `sub` claim".into()));
    };
    let mut scopes = Vec::new();
    for value in [&claims.scope, &claims.scp].into_iter().flatten() {
        match value {
            Value::String(text) => scopes.extend(super::scopes_of(text).map(str::to_owned)),
            Value::Array(items) => {
                scopes.extend(items.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
    }
    scopes.sort();
    scopes.dedup();
    let client = claims.client_id.or(claims.azp);
    // RFC 9068 §2.2: a client acting on its own behalf (client credentials) has its own
    // id as the subject: a machine, which cannot link an account nor answer a question.
    let machine = client.as_deref() == Some(subject.as_str());
    let mut signed_in = SignedIn::new(settings, subject, client, scopes);
    signed_in.subject_is_client = machine;
    Ok(signed_in)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_three_base64url_parts_are_a_jwt() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(looks_like_jwt("eyJh.eyJz."));
        assert!(!looks_like_jwt("opaque-token_123"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a+b.c.d"));
    }

    fn settings() -> SignInSettings {
        crate::signin::OAuthFile {
            issuer: Some(url::Url::parse("https://idp.example.com").unwrap()),
            public_url: Some(url::Url::parse("https://mcp.example.com/mcp").unwrap()),
            ..Default::default()
        }
        .check(&|_| None)
        .unwrap()
    }

    fn claims(extra: Value) -> Claims {
        let mut claims = serde_json::json!({"sub": "alice", "scope": "sdkbox:read sdkbox:write"});
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        serde_json::from_value(claims).unwrap()
    }

    /// A token bound to a DPoP key is refused (no proof is verified here); scopes are split
    /// on spaces only.
    #[test]
    fn bound_tokens_are_refused_and_scopes_split_on_spaces_only() {
        let settings = settings();
        assert!(
            signed_in(claims(serde_json::json!({})), &settings)
                .unwrap()
                .may_write
        );
        let bound =
            serde_json::json!({"cnf": {"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}});
        let refused = signed_in(claims(bound), &settings).unwrap_err().0;
        assert!(refused.contains("bound to a key"), "{refused}");
        // RFC 9068: a client-credentials token has the client as its subject.
        let person = signed_in(claims(serde_json::json!({"client_id": "app"})), &settings);
        assert!(!person.unwrap().is_machine());
        let machine = serde_json::json!({"sub": "app", "client_id": "app"});
        assert!(signed_in(claims(machine), &settings).unwrap().is_machine());
        for joined in ["sdkbox:read\tsdkbox:write", "sdkbox:read\u{a0}sdkbox:write"] {
            let signed =
                signed_in(claims(serde_json::json!({"scope": joined})), &settings).unwrap();
            assert!(!signed.may_write && !signed.may_read, "{joined:?}");
        }
    }
}
