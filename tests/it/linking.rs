//! Account linking end to end, with real parts: two npm `oidc-provider` instances (one signs
//! users in to sdkbox, the other is the provider's own authorization server, issuing opaque
//! tokens scoped `orders:read` / `orders:write` / `orders:admin`), and an orders provider on
//! loopback that accepts only that server's tokens, checked by introspection, scope by scope.
//! A user without a link is asked to link, follows the link headlessly (the provider's
//! consent is automatic), and then acts with their own token; a second user gets their own
//! link; tokens are refreshed, a revoked refresh token leads to a new link, unlinking revokes;
//! links survive a restart (file store) and are shared by two replicas (Redis). Nothing of a
//! provider token reaches a result, the log or the store in the clear.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::signin::{AuthServer, execute, free_port, now, post};
use crate::support::{Listening, Redis, listening};

/// The orders API's spec: list (orders:read), create (orders:write), purge (orders:admin).
const ORDERS_SPEC: &str = r#"{"openapi": "3.0.0", "info": {"title": "Orders", "version": "1"},
  "paths": {
    "/orders": {
      "get": {"operationId": "listOrders", "tags": ["orders"], "responses": {"200": {"description": "ok"}}},
      "post": {"operationId": "createOrder", "tags": ["orders"], "requestBody": {"content": {"application/json":
        {"schema": {"type": "object", "properties": {"item": {"type": "string"}}}}}},
        "responses": {"200": {"description": "ok"}}}},
    "/orders/purge": {
      "post": {"operationId": "purgeOrders", "tags": ["orders"], "responses": {"200": {"description": "ok"}}}}}}"#;

/// What the orders provider saw: (method, path, the token's subject, the token).
type Seen = Arc<Mutex<Vec<(String, String, String, String)>>>;

/// The orders provider: every request's bearer token is introspected at `issuer`; it must be
/// active, for this resource, and hold the operation's scope.
async fn orders_provider(issuer: String) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let app = Router::new().fallback(
        move |method: axum::http::Method, uri: axum::http::Uri, headers: HeaderMap| {
            let (log, issuer) = (log.clone(), issuer.clone());
            async move {
                let token = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .unwrap_or_default()
                    .to_owned();
                let answer: Value = reqwest::Client::new()
                    .post(format!("{issuer}/token/introspection"))
                    .basic_auth("introspector", Some("secret-introspector"))
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(format!("token={token}"))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                if answer["active"] != true {
                    return (
                        StatusCode::UNAUTHORIZED,
                        [(
                            "www-authenticate",
                            "Bearer error=\"invalid_token\"".to_owned(),
                        )],
                        axum::Json(json!({"error": "invalid token"})),
                    )
                        .into_response();
                }
                let needed = match (method.as_str(), uri.path().ends_with("/purge")) {
                    ("GET", _) => "orders:read",
                    (_, true) => "orders:admin",
                    _ => "orders:write",
                };
                let scopes = answer["scope"].as_str().unwrap_or_default();
                if !scopes.split(' ').any(|s| s == needed) {
                    let challenge =
                        format!("Bearer error=\"insufficient_scope\", scope=\"{needed}\"");
                    return (
                        StatusCode::FORBIDDEN,
                        [("www-authenticate", challenge)],
                        axum::Json(json!({"error": format!("needs {needed}")})),
                    )
                        .into_response();
                }
                let sub = answer["sub"].as_str().unwrap_or_default().to_owned();
                log.lock().unwrap().push((
                    method.to_string(),
                    uri.path().to_owned(),
                    sub.clone(),
                    token,
                ));
                axum::Json(json!({"data": [{"id": "ord_1", "owner": sub}]})).into_response()
            }
        },
    );
    let base = crate::support::serve_on_loopback(app).await;
    // An /opaque path: the test authorization server issues opaque (introspectable) tokens
    // for resources whose URL says so.
    let base = base.as_str().replace("/v1", "/opaque/v1");
    (base.trim_end_matches('/').to_owned(), seen)
}

/// Everything a linking test runs against.
struct World {
    idp: AuthServer,
    provider_as: AuthServer,
    base: String,
    seen: Seen,
    client_id: String,
    client_secret: String,
    confirm_id: String,
    confirm_secret: String,
    dir: tempfile::TempDir,
    public: String,
    port: u16,
}

impl World {
    /// The two authorization servers (the provider's with `ttl`-second access tokens), the
    /// orders provider, and sdkbox registered at the provider as a confidential client.
    async fn start(ttl: u64) -> Option<Self> {
        let idp = AuthServer::start().await?;
        let ttl = ttl.to_string();
        let provider_as = AuthServer::start_with(&[
            ("RESOURCE_SCOPES", "orders:read orders:write orders:admin"),
            ("ACCESS_TOKEN_TTL", &ttl),
        ])
        .await?;
        let (base, seen) = orders_provider(provider_as.url.clone()).await;
        let port = free_port();
        let public = format!("http://127.0.0.1:{port}/mcp");
        let registered = register(
            &provider_as,
            &format!("http://127.0.0.1:{port}/link/callback"),
        )
        .await;
        // sdkbox's own client at the sign-in issuer, confirming who opens a link.
        let confirm = register(&idp, &format!("http://127.0.0.1:{port}/link/confirm")).await;
        Some(Self {
            idp,
            provider_as,
            base,
            seen,
            client_id: registered["client_id"].as_str().unwrap().to_owned(),
            client_secret: registered["client_secret"].as_str().unwrap().to_owned(),
            confirm_id: confirm["client_id"].as_str().unwrap().to_owned(),
            confirm_secret: confirm["client_secret"].as_str().unwrap().to_owned(),
            dir: tempfile::tempdir().unwrap(),
            public,
            port,
        })
    }

    /// The provider file: sign-in at the first server, linking at the second, `store`.
    fn provider_file(&self, store: &str) -> PathBuf {
        let spec = self.dir.path().join("orders.json");
        std::fs::write(&spec, ORDERS_SPEC).unwrap();
        let file = self.dir.path().join("orders.toml");
        std::fs::write(
            &file,
            format!(
                r#"spec = "{spec}"
base_url = "{base}"

[oauth]
issuer = "{idp}"
public_url = "{public}"

[provider_oauth]
issuer = "{pas}"
client_id = "{client}"
client_secret_env = "ORDERS_CLIENT_SECRET"
scopes = ["orders:read", "orders:write"]
resource = "{base}"
store = "{store}"
confirm_client_id = "{confirm}"
confirm_client_secret_env = "SIGNIN_CONFIRM_SECRET"
"#,
                spec = spec.display(),
                base = self.base,
                idp = self.idp.url,
                public = self.public,
                pas = self.provider_as.url,
                client = self.client_id,
                confirm = self.confirm_id,
            ),
        )
        .unwrap();
        file
    }

    /// sdkbox on `port` serving the provider file with `store`.
    async fn sdkbox(&self, port: u16, store: &str, extra: &[&str]) -> Listening {
        let mut command = crate::support::sdkbox_async();
        command
            .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--config"])
            .arg(self.provider_file(store))
            .args(extra)
            .env("ORDERS_CLIENT_SECRET", &self.client_secret)
            .env("SIGNIN_CONFIRM_SECRET", &self.confirm_secret)
            .env("SDKBOX_LINK_KEY", "7f".repeat(32))
            .env("RUST_LOG", "info");
        listening(command).await
    }

    /// sdkbox on the world's port with the file store in its directory.
    async fn serve(&self, extra: &[&str]) -> Listening {
        let store = self.dir.path().join("links.json");
        self.sdkbox(self.port, store.to_str().unwrap(), extra).await
    }

    /// A sign-in token for `sub`.
    async fn user(&self, sub: &str) -> String {
        self.idp
            .mint(
                json!({"iss": self.idp.url, "aud": self.public, "sub": sub, "client_id": "chat",
                    "scope": "sdkbox:read sdkbox:write", "exp": now() + 600}),
                json!({}),
            )
            .await
    }

    /// Follows `link` in a new headless browser signed in to sdkbox as `user` and at the
    /// provider as `account`: the redirects, the sign-in and consents (automatic), back to
    /// sdkbox's callback. The last page.
    async fn follow(&self, link: &str, user: &str, account: &str) -> (u16, String) {
        self.accounts(user, account).await;
        match Browser::default().open(link, None).await {
            Opened::Page(status, body) => (status, body),
            Opened::Stopped(url) => panic!("stopped at {url}"),
        }
    }

    /// `token`'s user, signed in as `user`, asks for a link and follows it as `account`.
    async fn link(&self, server: &Listening, token: &str, user: &str, account: &str) {
        let link = link_in(&run(server, token, LIST).await);
        let (status, page) = self.follow(&link, user, account).await;
        assert!(
            status == 200 && page.contains("is linked to sdkbox"),
            "{page}"
        );
    }

    /// Who the next sign-in at each authorization server is.
    async fn accounts(&self, user: &str, account: &str) {
        self.idp.control("account", json!({"sub": user})).await;
        self.provider_as
            .control("account", json!({"sub": account}))
            .await;
    }

    fn stored(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("links.json")).unwrap_or_default()
    }
}

/// Registers a confidential client at `server` (dynamic registration) with `redirect`.
async fn register(server: &AuthServer, redirect: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{}/reg", server.url))
        .json(&json!({
            "redirect_uris": [redirect],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_basic",
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A headless browser: one cookie jar for the loopback host (as browsers share cookies
/// across a host's ports), redirects followed by hand.
#[derive(Default)]
struct Browser {
    cookies: Vec<(String, String)>,
}

/// Where a browser got to.
enum Opened {
    /// A page that is not a redirect.
    Page(u16, String),
    /// A redirect to where it was told to stop.
    Stopped(reqwest::Url),
}

impl Browser {
    /// Opens `url` and follows its redirects, stopping before one that starts with `stop`.
    async fn open(&mut self, url: &str, stop: Option<&str>) -> Opened {
        self.go(url, None, stop).await
    }

    /// Submits a form to `url` from a page of `origin`, and follows the redirects.
    async fn submit(&mut self, url: &str, origin: &str) -> Opened {
        self.go(url, Some(origin), None).await
    }

    /// Requests `url` (a form post from `posted_from`, else a GET) and follows redirects.
    async fn go(&mut self, url: &str, mut posted_from: Option<&str>, stop: Option<&str>) -> Opened {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let mut url = reqwest::Url::parse(url).unwrap();
        for _ in 0..20 {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let request = match posted_from.take() {
                Some(origin) => client.post(url.clone()).header("origin", origin),
                None => client.get(url.clone()),
            };
            let response = request
                .header("cookie", jar.join("; "))
                .send()
                .await
                .unwrap();
            for set in response.headers().get_all("set-cookie") {
                let pair = set.to_str().unwrap().split(';').next().unwrap();
                if let Some((name, value)) = pair.split_once('=') {
                    self.cookies.retain(|(k, _)| k != name);
                    self.cookies.push((name.to_owned(), value.to_owned()));
                }
            }
            let status = response.status().as_u16();
            if let Some(location) = response.headers().get("location") {
                url = url.join(location.to_str().unwrap()).unwrap();
                if stop.is_some_and(|s| url.as_str().starts_with(s)) {
                    return Opened::Stopped(url);
                }
                continue;
            }
            return Opened::Page(status, response.text().await.unwrap());
        }
        panic!("more than 20 redirects");
    }
}

/// Opens `url` in a new browser with no one signed in anywhere new; the last page.
async fn follow(url: &str) -> (u16, String) {
    match Browser::default().open(url, None).await {
        Opened::Page(status, body) => (status, body),
        Opened::Stopped(url) => panic!("stopped at {url}"),
    }
}

/// Runs `code` as `token`'s user; the result.
async fn run(server: &Listening, token: &str, code: &str) -> Value {
    let (status, _, body) = post(&server.url, Some(token), &execute(code)).await;
    assert_eq!(status, 200, "{body}");
    body["result"].clone()
}

/// The link a `link` refusal carries.
fn link_in(result: &Value) -> String {
    let error = &result["structuredContent"]["error"];
    assert_eq!(error["kind"], "link", "{result}");
    let message = error["message"].as_str().unwrap();
    message
        .split_whitespace()
        .find(|w| w.contains("/link/start/"))
        .unwrap_or_else(|| panic!("no link in {message}"))
        .to_owned()
}

const LIST: &str = "return (await api.orders.list()).data[0].owner;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_links_their_own_account_and_acts_with_their_own_token() {
    let Some(world) = World::start(600).await else {
        return;
    };
    let audit = world.dir.path().join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap();
    let server = world
        .serve(&["--stateless", "--writes", "allow", "--audit-log", audit_arg])
        .await;
    let alice = world.user("alice").await;

    // Not linked: nothing runs, and the result carries a link to follow.
    let asked = run(&server, &alice, LIST).await;
    assert_eq!(asked["isError"], true, "{asked}");
    let link = link_in(&asked);
    assert!(
        link.starts_with(&format!("http://127.0.0.1:{}/link/start/", world.port)),
        "{link}"
    );
    assert!(world.seen.lock().unwrap().is_empty());
    // Asking again shows the same link: a model retrying makes no new ones.
    for _ in 0..3 {
        assert_eq!(link_in(&run(&server, &alice, LIST).await), link);
    }

    // Followed: the provider asks (and the test's consent is automatic), sdkbox says linked.
    let (status, page) = world.follow(&link, "alice", "alice-at-orders").await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("is linked to sdkbox. Return to your chat."),
        "{page}"
    );
    // A link works once.
    let (status, page) = follow(&link).await;
    assert_eq!(status, 404, "{page}");
    assert!(page.contains("expired or was already used"), "{page}");

    // Alice now acts as her provider account.
    let listed = run(&server, &alice, LIST).await;
    assert_eq!(
        listed["structuredContent"]["result"], "alice-at-orders",
        "{listed}"
    );
    let wrote = run(
        &server,
        &alice,
        "return (await api.orders.create({ item: 'tea' })).data[0].owner;",
    )
    .await;
    assert_eq!(
        wrote["structuredContent"]["result"], "alice-at-orders",
        "{wrote}"
    );

    // A scope she did not grant: the script hears which, and how to get it.
    let purge = run(
        &server,
        &alice,
        "try { await api.orders.purge(); return 'purged'; } catch (e) { return e.message; }",
    )
    .await;
    let said = purge["structuredContent"]["result"]
        .as_str()
        .unwrap_or_default();
    assert!(
        said.contains("HTTP 403")
            && said.contains("\"orders:admin\"")
            && said.contains("links again"),
        "{purge}"
    );

    // Bob is asked on his own, links his own account, and acts with it.
    let bob = world.user("bob").await;
    let asked = run(&server, &bob, LIST).await;
    let bobs_link = link_in(&asked);
    assert_ne!(bobs_link, link);
    let (status, _) = world.follow(&bobs_link, "bob", "bob-at-orders").await;
    assert_eq!(status, 200);
    assert_eq!(
        run(&server, &bob, LIST).await["structuredContent"]["result"],
        "bob-at-orders"
    );
    assert_eq!(
        run(&server, &alice, LIST).await["structuredContent"]["result"],
        "alice-at-orders"
    );

    // Each request carried its user's own token, and no token is anywhere it should not be.
    let seen = world.seen.lock().unwrap().clone();
    let tokens: Vec<String> = seen.iter().map(|(_, _, _, t)| t.clone()).collect();
    for (_, _, sub, token) in &seen {
        let others = seen
            .iter()
            .filter(|(_, _, s, t)| t == token && s != sub)
            .count();
        assert_eq!(others, 0, "one token served two users");
    }
    let stored = world.stored();
    assert!(stored.contains("sdkbox:link:"), "{stored}");
    let audited = std::fs::read_to_string(&audit).unwrap();
    assert!(audited.contains("\"signed_in\""), "{audited}");
    for token in &tokens {
        assert!(
            !stored.contains(token.as_str()),
            "a token in the store in the clear"
        );
        assert!(
            !audited.contains(token.as_str()),
            "a token in the audit file"
        );
        assert!(!listed.to_string().contains(token.as_str()));
    }
    drop(server);
    let log = server_log(
        world.serve(&["--stateless", "--writes", "allow"]).await,
        &alice,
        &tokens,
    )
    .await;
    assert!(!log.is_empty());
}

/// Restarted on the same store, sdkbox still knows Alice's link; returns its log, checked
/// for tokens.
async fn server_log(server: Listening, alice: &str, tokens: &[String]) -> String {
    assert_eq!(
        run(&server, alice, LIST).await["structuredContent"]["result"],
        "alice-at-orders",
        "the link did not survive a restart"
    );
    let Listening { mut child, log, .. } = server;
    child.kill().await.unwrap();
    let log = tokio::time::timeout(Duration::from_secs(5), log)
        .await
        .unwrap()
        .unwrap();
    for token in tokens {
        assert!(!log.contains(token.as_str()), "a token in the log");
    }
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_refreshed_a_revoked_refresh_asks_again_and_unlink_revokes() {
    // 30-second access tokens: inside the refresh margin, so every run refreshes first.
    let Some(world) = World::start(30).await else {
        return;
    };
    let server = world.serve(&["--stateless", "--writes", "allow"]).await;
    let alice = world.user("alice").await;
    world
        .link(&server, &alice, "alice", "alice-at-orders")
        .await;
    for _ in 0..3 {
        assert_eq!(
            run(&server, &alice, LIST).await["structuredContent"]["result"],
            "alice-at-orders"
        );
    }
    let seen: Vec<String> = world
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, _, _, t)| t.clone())
        .collect();
    let distinct: std::collections::HashSet<&String> = seen.iter().collect();
    assert_eq!(
        distinct.len(),
        3,
        "each run refreshed to a new access token"
    );

    // Unlink with the sign-in token: the link is gone and its tokens revoked at the provider.
    let unlinked: Value = reqwest::Client::new()
        .delete(format!("http://127.0.0.1:{}/link", world.port))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(unlinked, json!({"unlinked": true}));
    let last = seen.last().unwrap();
    let introspected: Value = reqwest::Client::new()
        .post(format!("{}/token/introspection", world.provider_as.url))
        .basic_auth("introspector", Some("secret-introspector"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={last}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        introspected["active"], false,
        "unlink did not revoke: {introspected}"
    );
    let unauthenticated = reqwest::Client::new()
        .delete(format!("http://127.0.0.1:{}/link", world.port))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);

    // Linked again, then the refresh token revoked at the provider: the next run asks again.
    world
        .link(&server, &alice, "alice", "alice-at-orders")
        .await;
    assert_eq!(
        run(&server, &alice, LIST).await["structuredContent"]["result"],
        "alice-at-orders"
    );
    let stored: Value = serde_json::from_str(&world.stored()).unwrap();
    assert_eq!(stored.as_object().unwrap().len(), 1);
    revoke_the_grant(&world).await;
    let asked = run(&server, &alice, LIST).await;
    link_in(&asked);
}

/// Ends, at the provider, the grant behind the token it saw last, as a user revoking sdkbox's
/// access there would: the test cannot read sdkbox's sealed store, and oidc-provider revokes
/// the grant's refresh tokens with an access token of it.
async fn revoke_the_grant(world: &World) {
    let last = world.seen.lock().unwrap().last().unwrap().3.clone();
    let response = reqwest::Client::new()
        .post(format!("{}/token/revocation", world.provider_as.url))
        .basic_auth(&world.client_id, Some(&world.client_secret))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={last}&token_type_hint=access_token"))
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{}",
        response.text().await.unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_links_through_redis() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let Some(world) = World::start(600).await else {
        return;
    };
    let store = redis.url.clone();
    let first = world
        .sdkbox(world.port, &store, &["--stateless", "--writes", "allow"])
        .await;
    let other_port = free_port();
    let second = world
        .sdkbox(other_port, &store, &["--stateless", "--writes", "allow"])
        .await;
    let alice = world.user("alice").await;
    // Asked by the first replica, the link followed through the second.
    let link = link_in(&run(&first, &alice, LIST).await);
    let through_second = link.replace(&format!(":{}/", world.port), &format!(":{other_port}/"));
    let (status, page) = world
        .follow(&through_second, "alice", "alice-at-orders")
        .await;
    assert_eq!(status, 200, "{page}");
    for server in [&first, &second] {
        assert_eq!(
            run(server, &alice, LIST).await["structuredContent"]["result"],
            "alice-at-orders"
        );
    }
    let tokens: Vec<String> = world
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, _, _, t)| t.clone())
        .collect();
    // Unlinks asked from the /link page before anyone signs in store nothing, however many.
    let keys = || async {
        let output = tokio::process::Command::new("redis-cli")
            .args(["-p", &redis.port.to_string(), "DBSIZE"])
            .output()
            .await
            .unwrap();
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let before = keys().await;
    let origin = format!("http://127.0.0.1:{}", world.port);
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for _ in 0..300 {
        let started = browser
            .post(format!("{origin}/link/unlink"))
            .header("origin", &origin)
            .send()
            .await
            .unwrap();
        assert_eq!(started.status(), 303);
    }
    assert_eq!(
        keys().await,
        before,
        "an unlink before sign-in stored something"
    );
    let dump = redis.dump().await;
    assert!(dump.contains("sdkbox:link:"), "{dump}");
    for token in &tokens {
        assert!(
            !dump.contains(token.as_str()),
            "a token in Redis in the clear"
        );
    }
}

/// The official clients, each as its own user: TypeScript 1.x and 2.x and Python in the
/// handshake era with URL-mode elicitation (the call goes on once the user has linked), and
/// 2.x and Python in the 2026-07-28 era without it (the error carries the link; the client
/// follows it and runs again). The provider sees each user's own account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_clients_link_and_act_as_their_user() {
    let Some(world) = World::start(600).await else {
        return;
    };
    let (Some(ts), Some(python)) = (
        crate::clients::node_client(),
        crate::clients::python_client(),
    ) else {
        return;
    };
    let server = world.serve(&["--writes", "allow"]).await;
    let runs = [
        ("ts", "v1", "legacy", "1"),
        ("ts", "v2", "legacy", "1"),
        ("ts", "v2", "2026-07-28", "0"),
        ("py", "", "legacy", "1"),
        ("py", "", "2026-07-28", "0"),
    ];
    for (i, (language, sdk, era, by_elicitation)) in runs.into_iter().enumerate() {
        let user = format!("user{i}");
        let account = format!("{user}-at-orders");
        let token = world.user(&user).await;
        let mut command = match language {
            "ts" => {
                let mut command = tokio::process::Command::new("node");
                command.arg("linking.mjs").current_dir(&ts).env("SDK", sdk);
                command
            }
            _ => {
                let mut command = tokio::process::Command::new(&python);
                command
                    .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/py/linking.py"));
                command
            }
        };
        let output = command
            .env("ERA", era)
            .env("TRANSPORT", "http")
            .env("SDKBOX_URL", &server.url)
            .env("SDKBOX_TOKEN", &token)
            .env("PROVIDER_AS", &world.provider_as.url)
            .env("SIGNIN_AS", &world.idp.url)
            .env("SUBJECT", &user)
            .env("ACCOUNT", &account)
            .env("URL_ELICITATION", by_elicitation)
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let what = format!("{language} {sdk} {era}");
        let report = crate::clients::client_report(&output);
        crate::clients::assert_checks_passed(&report, &what);
        assert_eq!(
            report["checks"].as_object().unwrap().len(),
            2,
            "{what}: {report}"
        );
        assert_eq!(
            report["protocol"],
            crate::clients::expected_protocol(era),
            "{what}"
        );
        let seen = world.seen.lock().unwrap().clone();
        assert!(
            seen.iter().any(|(_, _, sub, _)| *sub == account),
            "{what}: {seen:?}"
        );
    }
}

/// A link is a URL anyone can be sent or shown; it must still only link its own user's account.
/// Bob opening Alice's link signs in as Bob and is refused (the link is spent); a browser that
/// did not sign in as Alice cannot complete her link at the provider's callback, even with
/// the provider's URL in hand; Alice's own browser then links her.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_opened_by_anyone_else_links_nothing() {
    let Some(world) = World::start(600).await else {
        return;
    };
    let server = world.serve(&["--stateless", "--writes", "allow"]).await;
    let alice = world.user("alice").await;

    // Bob (signed in to sdkbox as bob) opens Alice's link, intending to link his own account
    // to her sdkbox user: refused at the sign-in step, and the link is spent.
    let link = link_in(&run(&server, &alice, LIST).await);
    let (status, page) = world.follow(&link, "bob", "bob-at-orders").await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("made for another sdkbox user"), "{page}");
    let (status, _) = world.follow(&link, "alice", "alice-at-orders").await;
    assert_eq!(status, 404, "a refused link stayed open");

    // Mallory signs in on her own link and sends Alice the URL the sign-in issuer returned
    // to (found by the second review): Alice's browser cannot exchange Mallory's code, so
    // Alice's provider account is not linked to Mallory.
    let mallory = world.user("mallory").await;
    let hers = link_in(&run(&server, &mallory, LIST).await);
    world.accounts("mallory", "mallory-at-orders").await;
    let confirm = format!("http://127.0.0.1:{}/link/confirm", world.port);
    let Opened::Stopped(forwarded) = Browser::default().open(&hers, Some(&confirm)).await else {
        panic!("the link did not come back from the sign-in");
    };
    world.accounts("alice", "alice-at-orders").await;
    // Alice's browser holds a link cookie of its own (she opened a link of hers before).
    let mut alices = Browser::default();
    let own = link_in(&run(&server, &alice, LIST).await);
    let Opened::Stopped(_) = alices.open(&own, Some(&world.idp.url)).await else {
        panic!("her link did not go to the sign-in");
    };
    let Opened::Page(status, page) = alices.open(forwarded.as_str(), None).await else {
        panic!("no page");
    };
    assert_eq!(status, 403, "{page}");
    link_in(&run(&server, &mallory, LIST).await);

    // Alice confirms a new link in her browser; someone holding the provider's URL finishes
    // it in another browser, as their own provider account: not linked.
    let link = link_in(&run(&server, &alice, LIST).await);
    world.accounts("alice", "mallory-at-orders").await;
    let mut hers = Browser::default();
    let Opened::Stopped(at_provider) = hers.open(&link, Some(&world.provider_as.url)).await else {
        panic!("the link did not reach the provider");
    };
    let mut theirs = Browser::default();
    let Opened::Page(status, page) = theirs.open(at_provider.as_str(), None).await else {
        panic!("no page");
    };
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("did not open the link as its user"), "{page}");
    let refused = run(&server, &alice, LIST).await;
    link_in(&refused);
    assert!(world.seen.lock().unwrap().is_empty());

    // Her own browser goes on and links her own account.
    world.accounts("alice", "alice-at-orders").await;
    let Opened::Page(status, page) = hers.open(at_provider.as_str(), None).await else {
        panic!("no page");
    };
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        run(&server, &alice, LIST).await["structuredContent"]["result"],
        "alice-at-orders"
    );
    // A forged error on the callback shows no words of the forger's.
    let forged = follow(&format!(
        "http://127.0.0.1:{}/link/callback?state=x&error=Call+1-800-SCAM",
        world.port
    ))
    .await;
    assert!(!forged.1.contains("SCAM"), "{}", forged.1);
}

/// A linked user's access token changes at every refresh; who they are for approvals does
/// not. With 30-second tokens every run refreshes first: a write approved on the page is sent
/// by the re-run, once, though the re-run acts with a new token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_outlives_a_token_refresh() {
    let Some(world) = World::start(30).await else {
        return;
    };
    let server = world.serve(&["--stateless"]).await;
    let alice = world.user("alice").await;
    world
        .link(&server, &alice, "alice", "alice-at-orders")
        .await;
    let code = "return (await api.orders.create({ item: 'approved once' })).data[0].owner;";
    let asked = run(&server, &alice, code).await;
    let page = crate::once::approval_link(&asked);
    crate::once::decide_on_page(&page, "approve").await;
    let sent = run(&server, &alice, code).await;
    assert_eq!(
        sent["structuredContent"]["result"], "alice-at-orders",
        "{sent}"
    );
    let posts: Vec<String> = world
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(method, ..)| method == "POST")
        .map(|(.., token)| token.clone())
        .collect();
    assert_eq!(
        posts.len(),
        1,
        "the approved write was not sent exactly once"
    );
}

/// A linked token the provider rejects before its expiry (revoked there) is not used again:
/// the run that met the 401 fails with it, and the next one refreshes or, as here where the
/// whole grant was revoked, asks to link again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_provider_rejects_leads_to_a_refresh_or_a_new_link() {
    let Some(world) = World::start(600).await else {
        return;
    };
    let server = world.serve(&["--stateless", "--writes", "allow"]).await;
    let alice = world.user("alice").await;
    world
        .link(&server, &alice, "alice", "alice-at-orders")
        .await;
    assert_eq!(
        run(&server, &alice, LIST).await["structuredContent"]["result"],
        "alice-at-orders"
    );
    revoke_the_grant(&world).await;
    let rejected = run(&server, &alice, LIST).await;
    let message = rejected["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("HTTP 401") && message.contains("linked account"),
        "{rejected}"
    );
    link_in(&run(&server, &alice, LIST).await);
}

/// The /link page unlinks whoever signs in after pressing its button, in that browser only;
/// a form posted from another site unlinks no one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_page_unlinks_only_who_signs_in() {
    let Some(world) = World::start(600).await else {
        return;
    };
    let server = world.serve(&["--stateless", "--writes", "allow"]).await;
    let alice = world.user("alice").await;
    world
        .link(&server, &alice, "alice", "alice-at-orders")
        .await;
    let origin = format!("http://127.0.0.1:{}", world.port);
    let (status, page) = follow(&format!("{origin}/link")).await;
    assert!(
        status == 200 && page.contains("action=/link/unlink"),
        "{page}"
    );

    // From another site: refused before anyone signs in.
    let mut browser = Browser::default();
    let Opened::Page(status, page) = browser
        .submit(&format!("{origin}/link/unlink"), "https://evil.example")
        .await
    else {
        panic!("no page");
    };
    assert_eq!(status, 403, "{page}");
    // Started in one browser, finished in another (without its cookie): nothing happens.
    world.accounts("alice", "alice-at-orders").await;
    let Opened::Stopped(signin) = Browser::default()
        .go(
            &format!("{origin}/link/unlink"),
            Some(&origin),
            Some(&world.idp.url),
        )
        .await
    else {
        panic!("the unlink did not go to sign-in");
    };
    let (status, page) = follow(signin.as_str()).await;
    assert_eq!(status, 403, "{page}");
    assert_eq!(
        run(&server, &alice, LIST).await["structuredContent"]["result"],
        "alice-at-orders"
    );

    // Bob presses it: his (absent) link goes, not Alice's.
    world.accounts("bob", "bob-at-orders").await;
    let Opened::Page(status, page) = Browser::default()
        .submit(&format!("{origin}/link/unlink"), &origin)
        .await
    else {
        panic!("no page");
    };
    assert!(
        status == 200 && page.contains("Nothing to unlink"),
        "{page}"
    );
    assert_eq!(
        run(&server, &alice, LIST).await["structuredContent"]["result"],
        "alice-at-orders"
    );

    // Alice presses it: unlinked, and asked to link at her next run.
    world.accounts("alice", "alice-at-orders").await;
    let Opened::Page(status, page) = Browser::default()
        .submit(&format!("{origin}/link/unlink"), &origin)
        .await
    else {
        panic!("no page");
    };
    assert!(status == 200 && page.contains("no longer linked"), "{page}");
    link_in(&run(&server, &alice, LIST).await);
}
