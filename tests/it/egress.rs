//! The egress bridge against a real HTTP provider on 127.0.0.1: what is allowed gets the
//! injected secret, everything else is refused with a clear error, caps hold, and the
//! planted secret never comes back.

use std::sync::atomic::Ordering;

use sdkbox::egress::{AuthScheme, EgressLimits};
use sdkbox::sandbox::{ErrorKind, ExecLimits, Outcome};
use serde_json::json;

use crate::provider::Provider;
use crate::support::{self, CANARY, assert_ended_before, quick, run};

fn assert_no_canary(outcome: &Outcome) {
    let text = support::text(outcome);
    assert!(!text.contains(CANARY), "the secret leaked: {text}");
    assert!(
        !text.contains("c2tfdGVzdF9DQU5BUlk"),
        "the secret leaked as base64: {text}"
    );
}

/// Runs a script expected to fail with an `EgressError`, returning its message.
async fn refused(code: &str, provider: &Provider) -> String {
    let sandbox = support::sandbox(
        &provider.base,
        Some(AuthScheme::Bearer),
        EgressLimits::default(),
    );
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    assert_no_canary(&outcome);
    let error = outcome
        .error
        .clone()
        .unwrap_or_else(|| panic!("not refused: {outcome:?}"));
    assert_eq!(error.name.as_deref(), Some("EgressError"), "{error:?}");
    error.message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_calls_get_the_secret_and_never_see_it() {
    let provider = Provider::start().await;
    let sandbox = support::sandbox(
        &provider.base,
        Some(AuthScheme::Bearer),
        EgressLimits::default(),
    );
    let code = r#"
const echo = await api.request("POST", "/echo", {
  query: { limit: 2, expand: ["a", "b"], meta: { k: "v" } },
  body: { name: "Ada" },
  headers: { Authorization: "Bearer stolen", "X-Trace": "t1" },
});
const viaFetch = await (await fetch("/v1/echo?x=1", { headers: { cookie: "c=1" } })).json();
console.log("auth the script saw:", echo.headers.authorization);
return { echo, viaFetch };
"#;
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    assert!(outcome.ok, "{outcome:?}");
    let echo = &outcome.result["echo"];
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["path"], "/v1/echo");
    assert_eq!(echo["query"], "limit=2&expand=a&expand=b&meta%5Bk%5D=v");
    assert_eq!(echo["headers"]["content-type"], "application/json");
    assert_eq!(echo["headers"]["x-trace"], "t1");
    assert_eq!(echo["body"], r#"{"name":"Ada"}"#);
    assert_eq!(echo["headers"]["authorization"], "Bearer [redacted]");
    assert!(
        outcome.result["viaFetch"]["headers"]
            .get("cookie")
            .is_none()
    );
    assert_eq!(
        outcome.console[0].text,
        "auth the script saw: Bearer [redacted]"
    );
    let seen = provider.seen.authorization.lock().unwrap().clone();
    assert_eq!(seen, vec![Some(format!("Bearer {CANARY}")); 2]);
    assert_eq!(outcome.http.len(), 2);
    assert_eq!(outcome.http[0].status, Some(200));
    assert_eq!(outcome.http[0].dropped_headers, vec!["authorization"]);
    assert_eq!(outcome.http[1].dropped_headers, vec!["cookie"]);
    assert!(outcome.http[0].bytes > 0);
    assert_no_canary(&outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_schemes_present_the_secret_their_way() {
    let provider = Provider::start().await;
    for (scheme, check) in [
        (AuthScheme::Basic, "authorization"),
        (
            AuthScheme::Header("X-Provider-Key".into()),
            "x-provider-key",
        ),
        (AuthScheme::Query("api_key".into()), "query"),
    ] {
        let sandbox = support::sandbox(
            &provider.base,
            Some(scheme.clone()),
            EgressLimits::default(),
        );
        let code = "return await api.request('GET', '/echo', { query: { api_key: 'mine' }, headers: { 'X-Provider-Key': 'mine' } });";
        let outcome = run(&sandbox, code, &ExecLimits::default()).await;
        assert!(outcome.ok, "{scheme:?}: {outcome:?}");
        let shown = match check {
            "query" => outcome.result["query"].as_str().unwrap().to_owned(),
            header => outcome.result["headers"][header]
                .as_str()
                .unwrap()
                .to_owned(),
        };
        assert!(shown.contains("[redacted]"), "{scheme:?}: {shown}");
        assert!(
            !shown.contains("mine"),
            "the script's own credential went out: {shown}"
        );
        assert_no_canary(&outcome);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_off_origin_is_refused() {
    let provider = Provider::start().await;
    let other = Provider::start().await;
    let port = provider.base.port().unwrap();
    let allowed = format!("http://127.0.0.1:{port}");
    let cases = [
        ("await fetch('http://example.com/')".to_owned(), "only"),
        (format!("await fetch('{}')", other.url("/v1/echo")), "only"),
        (
            format!("await fetch('https://127.0.0.1:{port}/v1/echo')"),
            "only",
        ),
        (
            "await fetch('http://169.254.169.254/latest/meta-data/')".to_owned(),
            "only",
        ),
        (
            format!("await fetch('http://127.0.0.1:{port}@evil.example/')"),
            "carries credentials",
        ),
        (
            format!("await fetch('http://user:pw@127.0.0.1:{port}/v1/echo')"),
            "carries credentials",
        ),
        (
            format!(
                "await api.request('GET', '/redirect', {{ query: {{ to: '{}' }} }})",
                other.url("/v1/echo")
            ),
            "redirect to",
        ),
        (
            "await api.request('BREW', '/echo')".to_owned(),
            "invalid HTTP method",
        ),
    ];
    for (code, expected) in cases {
        let message = refused(&code, &provider).await;
        assert!(message.contains(expected), "{code}: {message}");
        if expected == "only" || expected == "redirect to" {
            assert!(message.contains(&allowed), "{code}: {message}");
        }
    }
    assert_eq!(
        other.seen.requests.load(Ordering::SeqCst),
        0,
        "a refused request went out"
    );
    let sandbox = support::sandbox(&provider.base, None, EgressLimits::default());
    let code = "return await api.request('GET', '/redirect', { query: { to: '/v1/customers' } });";
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    assert_eq!(
        outcome.result["data"][0]["id"], "cus_1",
        "same-origin redirect: {outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_resolving_to_private_addresses_are_refused() {
    let host = std::process::Command::new("hostname").output().unwrap();
    let host = String::from_utf8_lossy(&host.stdout).trim().to_owned();
    let resolved: Vec<_> = match tokio::net::lookup_host((host.as_str(), 80)).await {
        Ok(addrs) => addrs.collect(),
        Err(_) => Vec::new(),
    };
    if host.is_empty() || host == "localhost" || resolved.is_empty() {
        println!("skipped: this machine's host name does not resolve locally");
        return;
    }
    let provider = Provider::start().await;
    let port = provider.base.port().unwrap();
    let base = url::Url::parse(&format!("http://{host}:{port}/v1")).unwrap();
    let sandbox = support::sandbox(&base, None, EgressLimits::default());
    let outcome = run(
        &sandbox,
        "return await api.request('GET', '/echo');",
        &ExecLimits::default(),
    )
    .await;
    let message = outcome.error.unwrap().message;
    assert!(message.contains("private, loopback"), "{message}");
    assert_eq!(provider.seen.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_end_with_clear_errors() {
    let provider = Provider::start().await;
    let limits = EgressLimits {
        max_requests: 3,
        max_response_bytes: 1_000,
        max_request_bytes: 100,
        ..EgressLimits::default()
    };
    let sandbox = support::sandbox(&provider.base, Some(AuthScheme::Bearer), limits);
    let code = "for (let i = 0; i < 5; i++) await api.request('GET', '/customers');";
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    let message = outcome.error.clone().unwrap().message;
    assert!(message.contains("at most 3 requests"), "{message}");
    assert_eq!(provider.seen.requests.load(Ordering::SeqCst), 3);
    assert_eq!(
        outcome.http.len(),
        4,
        "the refused fourth call is logged too"
    );

    let outcome = run(
        &sandbox,
        "return await (await fetch('/v1/big?n=5000')).text();",
        &ExecLimits::default(),
    )
    .await;
    let message = outcome.error.unwrap().message;
    assert!(
        message.contains("exceeds the limit of 1000 bytes"),
        "{message}"
    );

    let outcome = run(
        &sandbox,
        "await api.request('POST', '/echo', { body: 'x'.repeat(500) });",
        &ExecLimits::default(),
    )
    .await;
    let message = outcome.error.unwrap().message;
    assert!(message.contains("request body of 500 bytes"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_providers_are_retried_for_idempotent_calls() {
    let provider = Provider::start().await;
    let sandbox = support::sandbox(&provider.base, None, EgressLimits::default());
    let outcome = run(
        &sandbox,
        "return await api.request('GET', '/flaky');",
        &ExecLimits::default(),
    )
    .await;
    assert_eq!(outcome.result, json!({"ok": true}), "{outcome:?}");
    let statuses: Vec<_> = outcome.http.iter().map(|c| c.status).collect();
    assert_eq!(statuses, vec![Some(503), Some(200)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_errors_throw_api_errors() {
    let provider = Provider::start().await;
    let sandbox = support::sandbox(&provider.base, None, EgressLimits::default());
    let code = "try { await api.request('GET', '/missing'); } catch (e) { return { name: e.name, status: e.status, message: e.message }; }";
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    assert_eq!(
        outcome.result,
        json!({"name": "ApiError", "status": 404, "message": "GET /missing failed with HTTP 404: No such customer: cus_404"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_and_cancellation_stop_requests_in_flight() {
    let provider = Provider::start().await;
    let sandbox = support::sandbox(&provider.base, None, EgressLimits::default());
    let outcome = run(
        &sandbox,
        "return await (await fetch('/v1/slow')).text();",
        &quick(500),
    )
    .await;
    assert_eq!(outcome.error.as_ref().unwrap().kind, ErrorKind::Timeout);
    // The provider answers after 3 s: the call did not wait for it.
    assert_ended_before(&outcome, 3_000, "the slow response");

    let cancel = crate::support::cancel_after(200);
    let outcome = sandbox
        .execute(
            "return await (await fetch('/v1/slow')).text();",
            &quick(20_000),
            cancel,
        )
        .await;
    assert_eq!(outcome.error.as_ref().unwrap().kind, ErrorKind::Cancelled);
    assert_ended_before(&outcome, 3_000, "the slow response");
}
