//! Classified by what is sent (issue 20): a request's rule comes from its method and final
//! URL, whatever the SDK named; duplicate operation ids are made unique at load; each hop of a
//! redirected read is classified again before it is followed.

use std::sync::atomic::Ordering;

use sdkbox::config::{ApprovalArgs, Embedded, ProviderFile};
use sdkbox::egress::Egress;
use sdkbox::sandbox::{ExecLimits, InProcessSandbox};
use sdkbox::sdk::Sdk;
use std::sync::Arc;

use crate::provider::Provider;
use crate::support::run;

/// Two operations under one id, one of them denied; a redirect; a denied read.
const SPEC: &str = r#"
openapi: 3.0.0
info: { title: echo, version: "1" }
servers: [{ url: "http://127.0.0.1/v1" }]
paths:
  /echo/{id}:
    parameters: [{ name: id, in: path, required: true, schema: { type: string } }]
    get: { operationId: items.get, responses: { "200": { description: ok } } }
    post: { operationId: items.change, responses: { "200": { description: ok } } }
    delete:
      operationId: items.change
      x-sdkbox-policy: deny
      responses: { "200": { description: ok } }
  /redirect:
    get:
      operationId: hop
      parameters: [{ name: to, in: query, schema: { type: string } }]
      responses: { "302": { description: elsewhere } }
  /charges:
    get: { operationId: charges.list, x-sdkbox-policy: deny, responses: { "200": { description: ok } } }
"#;

async fn echo_sandbox(provider: &Provider) -> (InProcessSandbox, Arc<sdkbox::spec::Api>) {
    let mut file: ProviderFile = toml::from_str("[policy]\nwrites = \"allow\"\n").unwrap();
    file.base_url = Some(provider.base.clone());
    file.approval = ApprovalArgs::default();
    let embedded = Embedded {
        name: "echo",
        spec: SPEC,
        guides: Vec::new(),
    };
    let loaded = file.load(Some(embedded), Some("k".into())).await.unwrap();
    let api = loaded.api.clone().unwrap();
    let sandbox = InProcessSandbox::new(
        Egress::new(loaded.egress_config).unwrap(),
        Some(Arc::new(Sdk::new(api.clone()))),
    )
    .with_approvals(loaded.approvals);
    (sandbox, api)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_operation_id_cannot_carry_a_denied_operation_under_another_rule() {
    let warnings = sdkbox::spec::parse("echo", SPEC).unwrap().warnings;
    let warned: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        warned.iter().any(|w| w.contains("`items.change`")
            && w.contains("POST /echo/{id}")
            && w.contains("DELETE /echo/{id}")),
        "{warned:#?}"
    );
    let provider = Provider::start().await;
    let (sandbox, api) = echo_sandbox(&provider).await;
    let delete = api
        .operations
        .iter()
        .find(|op| op.method == "DELETE")
        .unwrap();
    let post = api
        .operations
        .iter()
        .find(|op| op.method == "POST")
        .unwrap();
    assert_ne!((&delete.group, &delete.name), (&post.group, &post.name));
    let before = provider.seen.requests.load(Ordering::SeqCst);
    let code = format!(
        "await api.{}.{}({{ id: 'it_1' }}); return 'sent';",
        delete.group, delete.name
    );
    let outcome = run(&sandbox, &code, &ExecLimits::default()).await;
    let error = outcome
        .error
        .unwrap_or_else(|| panic!("sent: {:?}", outcome.http));
    assert_eq!(error.name.as_deref(), Some("PolicyError"), "{error:?}");
    assert!(error.message.contains("x-sdkbox-policy"), "{error:?}");
    assert_eq!(
        provider.seen.requests.load(Ordering::SeqCst),
        before,
        "the DELETE reached the provider"
    );
    // The allowed operation still goes out.
    let code = format!(
        "return (await api.{}.{}({{ id: 'it_1' }})).method;",
        post.group, post.name
    );
    let outcome = run(&sandbox, &code, &ExecLimits::default()).await;
    assert_eq!(outcome.result, "POST", "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_hop_of_a_redirected_read_is_classified_again() {
    let provider = Provider::start().await;
    let (sandbox, _) = echo_sandbox(&provider).await;
    let before = provider.seen.requests.load(Ordering::SeqCst);
    let outcome = run(
        &sandbox,
        "const r = await fetch('/v1/redirect?to=/v1/charges'); return r.status;",
        &ExecLimits::default(),
    )
    .await;
    let error = outcome
        .error
        .clone()
        .unwrap_or_else(|| panic!("followed: {outcome:?}"));
    assert_eq!(error.name.as_deref(), Some("PolicyError"), "{error:?}");
    assert!(error.message.contains("charges.list"), "{error:?}");
    assert_eq!(
        provider.seen.requests.load(Ordering::SeqCst),
        before + 1,
        "only the first hop left"
    );
    let hops: Vec<(&str, Option<&str>)> = outcome
        .http
        .iter()
        .map(|c| (c.url.as_str(), c.operation.as_deref()))
        .collect();
    assert_eq!(hops.len(), 2, "{hops:?}");
    assert_eq!(hops[1].1, Some("charges.list"), "{hops:?}");
    // A hop to an allowed read is followed, and logged as a request of its own.
    let outcome = run(
        &sandbox,
        "const r = await fetch('/v1/redirect?to=/v1/echo/it_1'); return [r.status, (await r.json()).path];",
        &ExecLimits::default(),
    )
    .await;
    assert_eq!(
        outcome.result,
        serde_json::json!([200, "/v1/echo/it_1"]),
        "{outcome:?}"
    );
    assert_eq!(outcome.http.len(), 2, "{:?}", outcome.http);
    assert_eq!(outcome.http[1].operation.as_deref(), Some("echo.itemsGet"));
}
