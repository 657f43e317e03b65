//! Stripe scenarios against localstripe, a stateful fake Stripe (issue 22): the SDK from the
//! real Stripe spec, through the sandbox, with Stripe's basic auth: customers with metadata,
//! updated and deleted; payment methods attached; payment intents with `expand[]`; products
//! and plans (localstripe has no prices); a three-page listing through `api.paginate`; a misspelling refused before
//! anything is sent. Skipped, with a message, when the spec or localstripe is absent
//! (scripts/test-deps installs localstripe; CI has both).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sdkbox::egress::{AuthScheme, Credential, Egress, EgressConfig, EgressLimits, Secret};
use sdkbox::sandbox::{ExecLimits, InProcessSandbox};
use sdkbox::sdk::Sdk;
use serde_json::json;

use crate::support::{requirement_met, run};

fn localstripe() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/providers/localstripe/.venv/bin/localstripe")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_scenarios_run_against_localstripe() {
    if !requirement_met(
        localstripe().exists(),
        "localstripe is not installed (scripts/test-deps)",
    ) {
        return;
    }
    let Some(spec) = crate::support::shared_spec("stripe-spec3.json") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = tokio::process::Command::new(localstripe())
        // Its state is kept in /tmp/localstripe.pickle across runs: each test starts empty.
        .args(["--from-scratch", "--port", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}/");
    let client = reqwest::Client::new();
    let mut up = false;
    for _ in 0..100 {
        if client
            .get(format!("{base}v1/customers"))
            .basic_auth("sk_test_x", Some(""))
            .send()
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "localstripe did not answer within 10 s");
    let loaded = sdkbox::spec::load(spec.to_str().unwrap()).await.unwrap();
    let egress = Egress::new(EgressConfig {
        base_url: base.parse().unwrap(),
        extra_origins: Vec::new(),
        download_origins: Vec::new(),
        credential: Some(Credential {
            scheme: AuthScheme::Basic,
            secret: Secret::new("sk_test_localstripe".to_owned()),
        }),
        limits: EgressLimits::default(),
    })
    .unwrap();
    let sandbox = InProcessSandbox::new(egress, Some(Arc::new(Sdk::new(Arc::new(loaded.api)))));
    let code = r#"
const ada = await api.customers.create({ email: "ada@example.com", metadata: { plan: "pro" } });
const fetched = await api.customers.retrieve({ customer: ada.id });
const updated = await api.customers.update({ customer: ada.id, email: "ada@lovelace.dev", metadata: { plan: "team" } });
const card = await api.paymentMethods.create({ type: "card", card: { number: "4242424242424242", exp_month: 12, exp_year: 2030, cvc: "123" } });
const attached = await api.paymentMethods.attach({ payment_method: card.id, customer: ada.id });
const intent = await api.paymentIntents.create({ amount: 1200, currency: "eur", customer: ada.id, payment_method: card.id, expand: ["customer"] });
const product = await api.products.create({ name: "Gold" });
const plan = await api.plans.create({ product: product.id, amount: 500, currency: "eur", interval: "month" });
for (let i = 0; i < 5; i++) await api.customers.create({ email: `c${i}@example.com` });
const listed = [];
for await (const c of api.paginate(api.customers.list, { limit: 2 })) listed.push(c.id);
let misspelled;
try { await api.customers.list({ limt: 2 }); } catch (e) { misspelled = e.message; }
const deleted = await api.customers.delete({ customer: ada.id });
return {
  plan: fetched.metadata.plan,
  updated: [updated.email, updated.metadata.plan],
  attached: attached.customer === ada.id,
  expanded: intent.customer.id === ada.id,
  billing: [plan.product === product.id, plan.interval],
  listed: listed.length,
  distinct: new Set(listed).size,
  misspelled,
  deleted: deleted.deleted,
};
"#;
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    assert!(outcome.ok, "{outcome:?}");
    let result = &outcome.result;
    assert_eq!(result["plan"], "pro");
    assert_eq!(result["updated"], json!(["ada@lovelace.dev", "team"]));
    assert_eq!(result["attached"], true);
    assert_eq!(result["expanded"], true);
    assert_eq!(result["billing"], json!([true, "month"]));
    assert!(result["listed"].as_u64().unwrap() >= 6, "{result}");
    assert_eq!(result["listed"], result["distinct"]);
    assert!(
        result["misspelled"]
            .as_str()
            .unwrap()
            .contains("did you mean `limit`"),
        "{result}"
    );
    assert_eq!(result["deleted"], true);
    // The misspelled call never left: every logged call is one the script meant.
    assert!(outcome.http.iter().all(|c| !c.url.contains("limt")));
}
