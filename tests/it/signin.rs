//! Sign-in (OAuth) against a real authorization server: npm `oidc-provider`
//! (`tests/providers/oauth`, pinned, installed by `scripts/test-deps`) issuing RFC 9068 JWT
//! access tokens for the MCP URL, and the real binary in front. Every refusal is checked for
//! its status and challenge; the caller's scopes decide reads and writes; the caller's token
//! never reaches the provider; two signed-in subjects never share approvals. The official
//! clients' whole flows are in `clients.rs` (`signin.mjs`, `signin.py`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::support::{Listening, listening};

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/providers/oauth")
}

/// The authorization server, running until dropped (it ends when its stdin closes).
pub struct AuthServer {
    _child: tokio::process::Child,
    /// Its issuer URL.
    pub url: String,
}

impl AuthServer {
    /// Starts one, or `None` (a skip, which CI refuses) when it is not installed.
    pub async fn start() -> Option<Self> {
        Self::start_with(&[]).await
    }

    /// Starts one with `env` (`RESOURCE_SCOPES`, `ACCESS_TOKEN_TTL`: see its server.mjs).
    pub async fn start_with(env: &[(&str, &str)]) -> Option<Self> {
        let (child, line) =
            crate::support::node_provider_with(&folder(), "oidc-provider", env).await?;
        let url = line.strip_prefix("listening ").unwrap().to_owned();
        Some(Self { _child: child, url })
    }

    /// A client credentials token response for `resource`.
    pub async fn grant(&self, client: &str, scope: &str, resource: &str) -> Value {
        let secret = format!("secret-{}", client.trim_start_matches("m2m-"));
        reqwest::Client::new()
            .post(format!("{}/token", self.url))
            .basic_auth(client, Some(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=client_credentials&scope={}&resource={}",
                scope.replace(' ', "+"),
                resource
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A client credentials access token for `resource`.
    pub async fn token(&self, client: &str, scope: &str, resource: &str) -> String {
        let answer = self.grant(client, scope, resource).await;
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token: {answer}"))
            .to_owned()
    }

    /// A JWT with exactly these claims, signed with the server's current key.
    pub async fn mint(&self, claims: Value, header: Value) -> String {
        let answer: Value = self
            .control("mint", json!({"claims": claims, "header": header}))
            .await;
        answer["token"].as_str().unwrap().to_owned()
    }

    /// Calls its test endpoint `/test/{what}` with `body`.
    pub async fn control(&self, what: &str, body: Value) -> Value {
        reqwest::Client::new()
            .post(format!("{}/test/{what}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> Value {
        reqwest::get(format!("{}{path}", self.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// sdkbox with sign-in at `issuer`, its public URL its own loopback address; the demo unless
/// `args` names a provider.
async fn signed_in_sdkbox(issuer: &str, args: &[&str]) -> (Listening, String) {
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}/mcp");
    let mut command = crate::support::sdkbox_async();
    command.args(["serve", "--http", &format!("127.0.0.1:{port}")]);
    command.args(["--oauth-issuer", issuer, "--public-url", &public]);
    if !args.contains(&"--spec") {
        command.arg("--demo");
    }
    command.args(args);
    (listening(command).await, public)
}

/// One JSON-RPC request to the MCP endpoint: status, `WWW-Authenticate` and the body.
pub async fn post(url: &str, token: Option<&str>, body: &Value) -> (u16, String, Value) {
    let (status, challenge, _, body) = post_in(url, token, None, body).await;
    (status, challenge, body)
}

/// The same, in an MCP session, with the session id the server answered with.
async fn post_in(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: &Value,
) -> (u16, String, Option<String>, Value) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let opened = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    // An SSE answer carries the message on its `data:` line.
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|l| l.starts_with('{'))
        .unwrap_or(&text);
    (
        status,
        challenge,
        opened,
        serde_json::from_str(json).unwrap_or(Value::Null),
    )
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

/// An `execute` call of `code`.
pub fn execute(code: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": code}}})
}

/// A JWT of these parts, signed with HMAC-SHA256 under `key` (an attacker's forgery).
fn hmac_token(header: &Value, claims: &Value, key: &[u8]) -> String {
    let encoded = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap());
    let message = format!("{}.{}", encoded(header), encoded(claims));
    let key = jsonwebtoken::EncodingKey::from_secret(key).unwrap();
    let signature =
        jsonwebtoken::crypto::sign(message.as_bytes(), &key, jsonwebtoken::Algorithm::HS256)
            .unwrap();
    format!("{message}.{signature}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_token_is_refused_with_its_status_and_challenge() {
    let Some(idp) = AuthServer::start().await else {
        return;
    };
    let Some(other_idp) = AuthServer::start().await else {
        return;
    };
    let (server, public) = signed_in_sdkbox(&idp.url, &[]).await;
    let url = server.url.clone();
    let metadata_url = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        public.trim_end_matches("/mcp")
    );

    // The metadata, at both well-known paths.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let document: Value = reqwest::get(format!("{}{path}", public.trim_end_matches("/mcp")))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(document["resource"], public.as_str(), "{path}");
        assert_eq!(
            document["authorization_servers"],
            json!([idp.url]),
            "{path}"
        );
        assert_eq!(
            document["scopes_supported"],
            json!(["sdkbox:read", "sdkbox:write"])
        );
    }

    // No token: sign in, here is where.
    let (status, challenge, _) = post(&url, None, &initialize()).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"sdkbox:read sdkbox:write\"")
    );

    // A real token for this server: accepted.
    let good = idp
        .token("m2m-rw", "sdkbox:read sdkbox:write", &public)
        .await;
    let (status, _, body) = post(&url, Some(&good), &initialize()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["serverInfo"]["name"], "sdkbox");

    let claims = |changes: Value| {
        let mut claims = json!({"iss": idp.url, "aud": public, "sub": "mallory", "client_id": "c",
            "scope": "sdkbox:read sdkbox:write", "iat": now(), "exp": now() + 300});
        for (k, v) in changes.as_object().unwrap() {
            match v {
                Value::Null => {
                    claims.as_object_mut().unwrap().remove(k);
                }
                v => claims[k] = v.clone(),
            }
        }
        claims
    };
    let minted_ok = idp.mint(claims(json!({})), json!({})).await;
    assert_eq!(post(&url, Some(&minted_ok), &initialize()).await.0, 200);

    let jwks = idp.get("/jwks").await;
    let key = &jwks["keys"][0];
    let kid = key["kid"].as_str().unwrap();
    let modulus = URL_SAFE_NO_PAD.decode(key["n"].as_str().unwrap()).unwrap();
    let hmac_header = json!({"alg": "HS256", "typ": "at+jwt", "kid": kid});
    let none_token = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"at+jwt"}"#),
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims(json!({}))).unwrap())
    );
    // One character in the middle of the signature changed.
    let mut forged_signature = minted_ok.clone().into_bytes();
    let middle = forged_signature.len() - 100;
    forged_signature[middle] = if forged_signature[middle] == b'A' {
        b'B'
    } else {
        b'A'
    };
    let forged_signature = String::from_utf8(forged_signature).unwrap();
    let swapped_payload = {
        let parts: Vec<&str> = minted_ok.split('.').collect();
        let payload =
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims(json!({"sub": "admin"}))).unwrap());
        format!("{}.{payload}.{}", parts[0], parts[2])
    };

    let cases: Vec<(&str, String, &str)> = vec![
        (
            "another audience",
            idp.token(
                "m2m-rw",
                "sdkbox:read sdkbox:write",
                "http://127.0.0.1:1/mcp",
            )
            .await,
            "another resource",
        ),
        (
            "another issuer's key",
            other_idp
                .mint(claims(json!({"iss": other_idp.url})), json!({}))
                .await,
            "key the issuer does not publish",
        ),
        (
            "another issuer's name, signed by this one",
            idp.mint(claims(json!({"iss": other_idp.url})), json!({}))
                .await,
            "another authorization server",
        ),
        (
            "expired",
            idp.mint(
                claims(json!({"iat": now() - 600, "exp": now() - 120})),
                json!({}),
            )
            .await,
            "expired",
        ),
        (
            "not yet valid",
            idp.mint(claims(json!({"nbf": now() + 600})), json!({}))
                .await,
            "not valid yet",
        ),
        ("bad signature", forged_signature, "signature"),
        (
            "payload swapped under a real signature",
            swapped_payload,
            "signature",
        ),
        ("alg none", none_token, "algorithm"),
        (
            "HMAC keyed with the public JWK",
            hmac_token(
                &hmac_header,
                &claims(json!({})),
                jwks["keys"][0].to_string().as_bytes(),
            ),
            "HS256",
        ),
        (
            "HMAC keyed with the public modulus",
            hmac_token(&hmac_header, &claims(json!({})), &modulus),
            "HS256",
        ),
        (
            "an ID token's type",
            idp.mint(claims(json!({})), json!({"typ": "JWT"})).await,
            "type",
        ),
        (
            "no subject",
            idp.mint(claims(json!({"sub": null})), json!({})).await,
            "sub",
        ),
        (
            "no expiry",
            idp.mint(claims(json!({"exp": null})), json!({})).await,
            "exp",
        ),
        (
            "opaque, no introspection",
            "opaque-token-123".to_owned(),
            "not a JWT",
        ),
    ];
    for (what, token, why) in cases {
        let (status, challenge, body) = post(&url, Some(&token), &initialize()).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\", error_description=\"")
                && challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
            "{what}: {challenge}"
        );
        let description = body["error_description"].as_str().unwrap_or_default();
        assert!(description.contains(why), "{what}: {description}");
    }

    // A valid token without the read scope: 403, naming what it holds and what it needs.
    let other = idp.token("m2m-other", "other:scope", &public).await;
    let (status, challenge, body) = post(&url, Some(&other), &initialize()).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        challenge.starts_with(
            "Bearer error=\"insufficient_scope\", scope=\"other:scope sdkbox:read\", resource_metadata="
        ),
        "{challenge}"
    );
    assert_eq!(body["error"], "insufficient_scope");

    // The server still serves the good token after all that.
    assert_eq!(post(&url, Some(&good), &initialize()).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_keys_are_picked_up_and_made_up_key_ids_cannot_flood_the_issuer() {
    let Some(idp) = AuthServer::start().await else {
        return;
    };
    let (server, public) = signed_in_sdkbox(&idp.url, &[]).await;
    let claims = json!({"iss": idp.url, "aud": public, "sub": "alice", "scope": "sdkbox:read",
        "exp": now() + 300});
    let before = idp.mint(claims.clone(), json!({})).await;
    assert_eq!(post(&server.url, Some(&before), &initialize()).await.0, 200);
    let fetches = || async {
        idp.get("/test/jwks-fetches").await["count"]
            .as_u64()
            .unwrap()
    };
    let start = fetches().await;
    // Forty tokens with made-up key ids, at once: at most one refetch.
    let mut tasks = Vec::new();
    for i in 0..40 {
        let token = idp
            .mint(claims.clone(), json!({"kid": format!("made-up-{i}")}))
            .await;
        let url = server.url.clone();
        tasks.push(tokio::spawn(async move {
            post(&url, Some(&token), &initialize()).await.0
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), 401);
    }
    let after_flood = fetches().await;
    assert!(after_flood - start <= 1, "{start} -> {after_flood}");

    // The issuer rotates: a token with the new key id is accepted once the refetch interval
    // has passed, the old key (gone from the set) no longer is.
    idp.control("rotate", json!({})).await;
    let rotated = idp.mint(claims.clone(), json!({})).await;
    tokio::time::sleep(sdkbox::signin::MIN_REFETCH + Duration::from_millis(300)).await;
    let (status, _, body) = post(&server.url, Some(&rotated), &initialize()).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = post(&server.url, Some(&before), &initialize()).await;
    assert_eq!(status, 401, "{body}");
}

/// A provider that records every request's method, path and `Authorization` header.
async fn recording_provider() -> (String, Arc<Mutex<Vec<(String, String, String)>>>) {
    let seen: Arc<Mutex<Vec<(String, String, String)>>> = Arc::default();
    let log = seen.clone();
    let app = Router::new().fallback(
        move |method: axum::http::Method, uri: axum::http::Uri, headers: HeaderMap| {
            let log = log.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                log.lock()
                    .unwrap()
                    .push((method.to_string(), uri.path().to_owned(), auth));
                axum::Json(json!({"data": [{"id": "it_1"}], "id": "it_2"}))
            }
        },
    );
    let base = crate::support::serve_on_loopback(app).await;
    (base.to_string(), seen)
}

const ITEMS_SPEC: &str = r#"{"openapi": "3.0.0", "info": {"title": "Items", "version": "1"},
  "paths": {"/items": {
    "get": {"operationId": "listItems", "tags": ["items"], "responses": {"200": {"description": "ok"}}},
    "post": {"operationId": "createItem", "tags": ["items"], "requestBody": {"content": {"application/json":
      {"schema": {"type": "object", "properties": {"name": {"type": "string"}}}}}},
      "responses": {"200": {"description": "ok"}}}}}}"#;

/// The recording provider, and its spec in a temporary directory.
struct Items {
    base: String,
    seen: Arc<Mutex<Vec<(String, String, String)>>>,
    spec: PathBuf,
    dir: tempfile::TempDir,
}

async fn items_provider() -> Items {
    let (base, seen) = recording_provider().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("items.json");
    std::fs::write(&spec, ITEMS_SPEC).unwrap();
    Items {
        base,
        seen,
        spec,
        dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_scope_decides_writes_and_the_callers_token_never_reaches_the_provider() {
    let Some(idp) = AuthServer::start().await else {
        return;
    };
    let Items {
        base,
        seen,
        spec,
        dir: _dir,
    } = items_provider().await;
    let mut command_args = vec!["--spec", spec.to_str().unwrap(), "--base-url", &base];
    command_args.extend([
        "--secret-env",
        "ITEMS_KEY",
        "--writes",
        "allow",
        "--stateless",
    ]);
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}/mcp");
    let mut command = crate::support::sdkbox_async();
    command
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .args(["--oauth-issuer", &idp.url, "--public-url", &public])
        .args(&command_args)
        .env("ITEMS_KEY", "provider-secret-123");
    let server = listening(command).await;
    let code = "const before = await api.items.list(); \
                try { await api.items.create({ name: 'x' }); return 'sent'; } \
                catch (e) { return String(e); }";

    let reader = idp.token("m2m-ro", "sdkbox:read", &public).await;
    let (status, _, body) = post(&server.url, Some(&reader), &execute(code)).await;
    assert_eq!(status, 200, "{body}");
    let result = &body["result"];
    let said = result["structuredContent"]["result"]
        .as_str()
        .unwrap_or_default();
    assert!(
        said.starts_with("PolicyError:") && said.contains("`sdkbox:write`"),
        "{result}"
    );
    let step_up = result["_meta"]["mcp/www_authenticate"][0]
        .as_str()
        .unwrap_or_default();
    assert!(
        step_up
            .starts_with("Bearer error=\"insufficient_scope\", scope=\"sdkbox:read sdkbox:write\""),
        "{result}"
    );
    let writer = idp
        .token("m2m-rw", "sdkbox:read sdkbox:write", &public)
        .await;
    let (_, _, body) = post(&server.url, Some(&writer), &execute(code)).await;
    assert_eq!(
        body["result"]["structuredContent"]["result"], "sent",
        "{body}"
    );
    assert!(
        body["result"]["_meta"]
            .get("mcp/www_authenticate")
            .is_none()
    );

    let seen = seen.lock().unwrap().clone();
    let methods: Vec<&str> = seen.iter().map(|(m, _, _)| m.as_str()).collect();
    assert_eq!(
        methods,
        ["GET", "GET", "POST"],
        "the reader's write never left: {seen:?}"
    );
    for (_, _, authorization) in &seen {
        assert_eq!(authorization, "Bearer provider-secret-123");
    }
}

/// Two signed-in subjects in stateless mode (no MCP session tells them apart): one's approval
/// on the page sends nothing for the other, who is asked on their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subjects_never_share_an_approval() {
    let Some(idp) = AuthServer::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap();
    let (server, public) =
        signed_in_sdkbox(&idp.url, &["--stateless", "--audit-log", audit_arg]).await;
    let token = |sub: &str| {
        idp.mint(
            json!({"iss": idp.url, "aud": public, "sub": sub, "client_id": "same-client",
                "scope": "sdkbox:read sdkbox:write", "exp": now() + 300}),
            json!({}),
        )
    };
    let (alice, bob) = (token("alice").await, token("bob").await);
    let code = "return (await api.customers.create({ name: 'two-subjects', email: 'two@example.com' })).id;";
    let count = "let n = 0; for await (const c of api.paginate(api.customers.list, {})) \
                 if (c.name === 'two-subjects') n++; return n;";
    let run = |token: String, code: &'static str| {
        let url = server.url.clone();
        async move { post(&url, Some(&token), &execute(code)).await.2["result"].clone() }
    };
    let link = crate::once::approval_link;
    let asked_alice = run(alice.clone(), code).await;
    let alice_link = link(&asked_alice);
    crate::once::decide_on_page(&alice_link, "approve").await;

    // Bob runs the very same code: Alice's approval is not his; he is asked on his own.
    let asked_bob = run(bob.clone(), code).await;
    assert_ne!(link(&asked_bob), alice_link, "{asked_bob}");
    assert_eq!(
        run(bob.clone(), count).await["structuredContent"]["result"],
        0
    );

    // Alice's re-run sends her approved write, once.
    let sent = run(alice.clone(), code).await;
    assert_eq!(sent["structuredContent"]["ok"], true, "{sent}");
    let again = run(alice.clone(), code).await;
    assert_eq!(again["structuredContent"]["ok"], true, "{again}");
    assert_eq!(run(alice, count).await["structuredContent"]["result"], 1);

    // The audit file names who signed in, and two subjects are two callers there too.
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let callers = |sub: &str| {
        let mut ids: Vec<&str> = lines
            .iter()
            .filter(|l| l["signed_in"]["sub"] == sub)
            .map(|l| l["caller"].as_str().unwrap())
            .collect();
        ids.dedup();
        ids
    };
    let (alices, bobs) = (callers("alice"), callers("bob"));
    assert_eq!(alices.len(), 1, "{lines:?}");
    assert_eq!(bobs.len(), 1, "{lines:?}");
    assert_ne!(alices, bobs);
    assert!(
        lines
            .iter()
            .all(|l| l["signed_in"]["iss"] == idp.url.as_str()
                && l["signed_in"]["client"] == "same-client")
    );
}

/// Opaque access tokens, checked by the issuer's introspection endpoint: accepted for this
/// resource only, and only when active.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_tokens_are_checked_by_introspection() {
    let Some(idp) = AuthServer::start().await else {
        return;
    };
    let Items {
        base, spec, dir, ..
    } = items_provider().await;
    let port = free_port();
    // The test issuer makes tokens for resources with `/opaque` in them opaque.
    let public = format!("http://127.0.0.1:{port}/opaque/mcp");
    let file = dir.path().join("provider.toml");
    std::fs::write(
        &file,
        format!(
            "spec = {spec:?}\nbase_url = {base:?}\n[oauth]\nissuer = {:?}\npublic_url = {public:?}\n\
             [oauth.introspection]\nclient_id = \"introspector\"\nclient_secret_env = \"INTROSPECTION_SECRET\"\n",
            idp.url
        ),
    )
    .unwrap();
    let mut command = crate::support::sdkbox_async();
    command
        .args([
            "serve",
            "--stateless",
            "--http",
            &format!("127.0.0.1:{port}"),
        ])
        .args(["--config", file.to_str().unwrap()])
        .env("INTROSPECTION_SECRET", "secret-introspector");
    let server = listening(command).await;
    let grant = idp.grant("m2m-ro", "sdkbox:read", &public).await;
    let token = grant["access_token"].as_str().unwrap().to_owned();
    assert!(!token.contains('.'), "opaque: {grant}");
    let (status, _, body) = post(
        &server.url,
        Some(&token),
        &execute("return (await api.items.list()).data.length"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["structuredContent"]["result"], 1, "{body}");
    // For another resource: refused.
    let elsewhere = idp
        .token("m2m-ro", "sdkbox:read", "http://127.0.0.1:1/opaque/mcp")
        .await;
    let (status, _, body) = post(&server.url, Some(&elsewhere), &initialize()).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("another resource"),
        "{body}"
    );
    // Made up: refused as inactive.
    let (status, _, body) = post(&server.url, Some("made-up-opaque-token"), &initialize()).await;
    assert_eq!(status, 401);
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("not active"),
        "{body}"
    );
}

#[tokio::test]
async fn sign_in_and_a_static_token_exclude_each_other() {
    let output = crate::support::sdkbox()
        .args([
            "serve",
            "--demo",
            "--http",
            "127.0.0.1:0",
            "--token-env",
            "T",
        ])
        .args([
            "--oauth-issuer",
            "https://idp.example.com",
            "--public-url",
            "https://m.example.com/mcp",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("--oauth-issuer") && said.contains("--token-env"),
        "{said}"
    );
    let output = crate::support::sdkbox()
        .args([
            "serve",
            "--demo",
            "--oauth-issuer",
            "https://idp.example.com",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("are for --http"), "{said}");
    // The client's sign-in travels in Authorization: it can never be a provider key too.
    let output = crate::support::sdkbox()
        .args(["serve", "--demo", "--http", "127.0.0.1:0"])
        .args(["--session-key-header", "Authorization"])
        .args(["--oauth-issuer", "https://idp.example.com"])
        .args(["--public-url", "https://m.example.com/mcp"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("never reach the provider"), "{said}");
}

/// The checks every sign-in client script runs (`signin.mjs`, `signin.py`).
const SIGNIN_CHECKS: [&str; 6] = [
    "unauthorized_first",
    "connected",
    "tools",
    "search",
    "execute_read",
    "write_scope",
];

/// The official clients complete the whole flow headlessly, then list, search and execute:
/// authorization code with PKCE, dynamic registration and `resource`, and client credentials;
/// in both protocol eras. One issuer and one server serve them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_clients_sign_in_and_work() {
    let Some(idp) = AuthServer::start().await else {
        return;
    };
    let (Some(ts), Some(python)) = (
        crate::clients::node_client(),
        crate::clients::python_client(),
    ) else {
        return;
    };
    let (server, _) = signed_in_sdkbox(&idp.url, &[]).await;
    let read_only = [
        ("CLIENT_ID", "m2m-ro"),
        ("CLIENT_SECRET", "secret-ro"),
        ("SCOPE", "sdkbox:read"),
    ];
    let read_write = [
        ("CLIENT_ID", "m2m-rw"),
        ("CLIENT_SECRET", "secret-rw"),
        ("SCOPE", "sdkbox:read sdkbox:write"),
    ];
    // (client, SDK, era, flow, client credentials, expected subject, expected scope)
    type Run<'a> = (
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a [(&'a str, &'a str)],
        &'a str,
        &'a str,
    );
    let both = "sdkbox:read sdkbox:write";
    let runs: [Run; 10] = [
        ("ts", "v1", "legacy", "code", &[], "alice", both),
        (
            "ts",
            "v1",
            "legacy",
            "client_credentials",
            &read_only,
            "m2m-ro",
            "sdkbox:read",
        ),
        ("ts", "v2", "legacy", "code", &[], "alice", both),
        ("ts", "v2", "2026-07-28", "code", &[], "alice", both),
        (
            "ts",
            "v2",
            "2026-07-28",
            "client_credentials",
            &read_write,
            "m2m-rw",
            both,
        ),
        (
            "ts",
            "v2",
            "legacy",
            "client_credentials",
            &read_write,
            "m2m-rw",
            both,
        ),
        (
            "python",
            "",
            "legacy",
            "client_credentials",
            &read_write,
            "m2m-rw",
            both,
        ),
        (
            "python",
            "",
            "2026-07-28",
            "client_credentials",
            &read_write,
            "m2m-rw",
            both,
        ),
        ("python", "", "legacy", "code", &[], "bob", both),
        ("python", "", "2026-07-28", "code", &[], "bob", both),
    ];
    for (client, sdk, era, flow, credentials, subject, scope) in runs {
        if subject == "bob" {
            idp.control("account", json!({"sub": "bob"})).await;
        }
        let mut command = match client {
            "ts" => {
                let mut command = tokio::process::Command::new("node");
                command.arg("signin.mjs").current_dir(&ts).env("SDK", sdk);
                command
            }
            _ => {
                let mut command = tokio::process::Command::new(&python);
                command
                    .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/py/signin.py"));
                command
            }
        };
        command
            .env("SDKBOX_URL", &server.url)
            .env("ERA", era)
            .env("FLOW", flow)
            .envs(credentials.iter().copied())
            .kill_on_drop(true);
        let what = format!("{client} {sdk} {era} {flow}");
        let output = tokio::time::timeout(Duration::from_secs(120), command.output())
            .await
            .unwrap_or_else(|_| panic!("{what}: did not finish in 120 s"))
            .unwrap();
        let report = crate::clients::client_report(&output);
        crate::clients::assert_checks_passed(&report, &what);
        let mut ran: Vec<&str> = report["checks"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        ran.sort_unstable();
        let mut expected = SIGNIN_CHECKS.to_vec();
        expected.sort_unstable();
        assert_eq!(ran, expected, "{what}: {report}");
        assert_eq!(
            report["protocol"],
            crate::clients::expected_protocol(era),
            "{what}: {report}"
        );
        assert_eq!(report["subject"], subject, "{what}: {report}");
        assert_eq!(report["scope"], scope, "{what}: {report}");
    }
}

/// The Kubernetes ConfigMap's commented `[oauth]` example, uncommented, is a provider file
/// sdkbox accepts: what an operator uncomments works.
#[test]
fn the_kubernetes_sign_in_example_is_a_valid_provider_file() {
    let manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/configmap.yaml"),
    )
    .unwrap();
    let toml: String = manifest
        .split("provider.toml: |\n")
        .nth(1)
        .unwrap()
        .lines()
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .map(|line| {
            // `# [oauth]`, `# issuer = ...`: the example's lines; `# # ...` stays a comment.
            match line.strip_prefix("# ") {
                Some(rest)
                    if !rest.starts_with('#')
                        && !rest.is_empty()
                        && (rest.starts_with('[') || rest.contains(" = ")) =>
                {
                    rest
                }
                _ => line,
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let file: sdkbox::config::ProviderFile = toml::from_str(&toml).unwrap();
    assert_eq!(
        file.oauth.issuer.as_ref().map(url::Url::as_str),
        Some("https://login.example.com/realms/acme")
    );
    let settings = file
        .oauth
        .check(&|name| (name == "OAUTH_INTROSPECTION_SECRET").then(|| "s".to_owned()))
        .unwrap();
    assert_eq!(settings.token_types, ["at+jwt", "jwt"]);
    assert!(settings.introspection.is_some());
}

/// An MCP session belongs to whoever opened it: another signed-in user who has its id is told
/// it does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_belongs_to_whoever_opened_it() {
    let Some(idp) = AuthServer::start().await else {
        return;
    };
    let (server, public) = signed_in_sdkbox(&idp.url, &[]).await;
    let token = |sub: &str| {
        idp.mint(
            json!({"iss": idp.url, "aud": public, "sub": sub, "client_id": "c",
                "scope": "sdkbox:read", "exp": now() + 300}),
            json!({}),
        )
    };
    let (alice, bob) = (token("alice").await, token("bob").await);
    let (status, _, session, _) = post_in(&server.url, Some(&alice), None, &initialize()).await;
    assert_eq!(status, 200);
    let session = session.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, ..) = post_in(&server.url, Some(&alice), Some(&session), &initialized).await;
    assert_eq!(status, 202);
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (status, _, _, body) = post_in(&server.url, Some(&bob), Some(&session), &list).await;
    assert_eq!(status, 404, "{body}");
    let (status, _, _, body) = post_in(&server.url, Some(&alice), Some(&session), &list).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["tools"].as_array().unwrap().len(), 2);
    // A made-up session id is not found either, whoever asks.
    let (status, ..) = post_in(&server.url, Some(&alice), Some("made-up"), &list).await;
    assert_eq!(status, 404);
}

/// An issuer whose tokens say `https://tenant.example/` (with the slash, as Auth0's do) works
/// however the operator writes it; and clients reach the server by its public URL's host
/// (an ingress in front) without an `--allowed-host` flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slashed_issuer_and_the_public_host_just_work() {
    let Some(idp) = AuthServer::start().await else {
        return;
    };
    // The metadata of an issuer spelled with a trailing slash, using the real server's keys.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!(
        "http://127.0.0.1:{}/",
        listener.local_addr().unwrap().port()
    );
    let metadata = json!({"issuer": issuer, "jwks_uri": format!("{}/jwks", idp.url)});
    let app = Router::new().route(
        "/.well-known/oauth-authorization-server",
        axum::routing::get(move || async move { axum::Json(metadata) }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let public = "https://mcp.example.com/mcp";
    let mut command = crate::support::sdkbox_async();
    command
        .args(["serve", "--demo", "--http", "127.0.0.1:0"])
        .args([
            "--oauth-issuer",
            issuer.trim_end_matches('/'),
            "--public-url",
            public,
        ]);
    let server = listening(command).await;
    let token = idp
        .mint(
            json!({"iss": issuer, "aud": public, "sub": "alice", "scope": "sdkbox:read",
                "exp": now() + 300}),
            json!({}),
        )
        .await;
    let through_ingress = |token: Option<&str>| {
        let mut request = reqwest::Client::new()
            .post(&server.url)
            .header("host", "mcp.example.com")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&initialize());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let refused = through_ingress(None).await.unwrap();
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains(
            "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        ),
        "{challenge}"
    );
    let answered = through_ingress(Some(&token)).await.unwrap();
    assert_eq!(answered.status(), 200, "{}", answered.text().await.unwrap());
    let document: Value = reqwest::get(
        server
            .url
            .replace("/mcp", "/.well-known/oauth-protected-resource/mcp"),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(document["authorization_servers"], json!([issuer]));
}
