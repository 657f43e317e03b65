//! Approval rules against the demo provider, checking the provider's own state: read-only
//! mode, rules by name and glob, raw `fetch`/`api.request` writes gated like SDK calls,
//! method-override headers not bypassing, dry runs, a human's answer (and none, within the
//! approval timeout, with the deadline stopped meanwhile, in process and in a worker), and
//! the audit file.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sdkbox::approval::{Answer, AnswerFuture, Approver, Ask, Caller, Channel, Gate, Key};
use sdkbox::config::{ApprovalArgs, Embedded, ProviderFile};
use sdkbox::egress::Egress;
use sdkbox::sandbox::{ExecLimits, InProcessSandbox, Outcome};
use sdkbox::sdk::Sdk;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::support::{assert_ended_before, quick, run};

/// The demo provider (in this process) and a sandbox for it under `policy` (a provider file's `[policy]`).
pub struct Demo {
    pub sandbox: InProcessSandbox,
    pub approvals: sdkbox::approval::Approvals,
    egress: Egress,
    sdk: Arc<Sdk>,
    base: Url,
    _stop: tokio_util::sync::DropGuard,
}

pub async fn demo(policy: &str, approval: ApprovalArgs) -> Demo {
    let stop = CancellationToken::new();
    let address = sdkbox::demo::start(stop.clone()).await.unwrap();
    let mut file: ProviderFile = toml::from_str(policy).unwrap();
    let base = Url::parse(&format!("http://{address}/v1")).unwrap();
    file.base_url = Some(base.clone());
    file.approval = approval;
    let embedded = Embedded {
        name: "demo",
        spec: sdkbox::demo::SPEC,
        guides: Vec::new(),
    };
    let loaded = file
        .load(Some(embedded), Some(sdkbox::demo::DEMO_KEY.to_owned()))
        .await
        .unwrap();
    let sdk = Arc::new(Sdk::new(loaded.api.clone().unwrap()));
    let egress = Egress::new(loaded.egress_config).unwrap();
    let sandbox = InProcessSandbox::new(egress.clone(), Some(sdk.clone()))
        .with_approvals(loaded.approvals.clone());
    Demo {
        sandbox,
        approvals: loaded.approvals,
        egress,
        sdk,
        base,
        _stop: stop.drop_guard(),
    }
}

impl Demo {
    /// The names of the provider's customers, read straight from it (not through sdkbox).
    pub async fn customers(&self) -> Vec<String> {
        let url = format!("{}/customers?limit=100", self.base);
        let page: Value = reqwest::Client::new()
            .get(url)
            .bearer_auth(sdkbox::demo::DEMO_KEY)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// How many of the provider's customers have this name.
    pub async fn customers_named(&self, name: &str) -> usize {
        self.customers().await.iter().filter(|n| *n == name).count()
    }

    pub async fn run(&self, code: &str) -> Outcome {
        run(&self.sandbox, code, &ExecLimits::default()).await
    }

    pub async fn run_with(
        &self,
        code: &str,
        approver: Option<Arc<dyn Approver>>,
        dry_run: bool,
    ) -> Outcome {
        let gate = self.gate(code, approver, dry_run).await;
        self.sandbox
            .execute_gated(code, &ExecLimits::default(), CancellationToken::new(), gate)
            .await
    }

    /// This test's one caller.
    pub fn caller(&self) -> Caller {
        self.approvals.caller(0, Some("test session"), None)
    }

    /// The gate of a run of `code` whose human (if any) is `approver`.
    pub async fn gate(
        &self,
        code: &str,
        approver: Option<Arc<dyn Approver>>,
        dry_run: bool,
    ) -> Arc<Gate> {
        let channel = match approver {
            Some(approver) => Channel::Now(approver),
            None => Channel::Page,
        };
        let caller = self.caller();
        let round = self.approvals.begin(&caller, code, dry_run, channel);
        round.await.unwrap().gate()
    }
}

pub fn create(name: &str) -> String {
    format!(
        "return await api.customers.create({{ name: \"{name}\", email: \"{name}@example.com\" }});"
    )
}

fn policy_of(outcome: &Outcome, method: &str) -> Value {
    let call = outcome
        .http
        .iter()
        .find(|c| c.method == method)
        .unwrap_or_else(|| panic!("no {method} in {:?}", outcome.http));
    serde_json::to_value(&call.policy).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_denies_every_write_and_sends_nothing() {
    let args = ApprovalArgs {
        read_only: true,
        ..ApprovalArgs::default()
    };
    let demo = demo("[policy]\nwrites = \"allow\"\n", args).await;
    let outcome = demo.run(&create("ro-sdk")).await;
    let error = outcome.error.as_ref().unwrap();
    assert_eq!(error.name.as_deref(), Some("PolicyError"), "{error:?}");
    assert!(error.message.contains("--read-only"), "{}", error.message);
    assert_eq!(policy_of(&outcome, "POST")["decision"], "denied");
    let raw = demo
        .run("const r = await api.request('DELETE', '/customers/cus_001'); return r;")
        .await;
    assert_eq!(raw.error.unwrap().name.as_deref(), Some("PolicyError"));
    let reads = demo
        .run("return (await api.customers.list({})).data.length")
        .await;
    assert!(reads.ok, "{reads:?}");
    let names = demo.customers().await;
    assert!(!names.iter().any(|n| n == "ro-sdk"), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_by_name_and_glob_decide_and_raw_requests_meet_the_same_rules() {
    let policy = r#"
        [policy]
        writes = "allow"
        [policy.operations]
        "customers.*" = "deny"
        "customers.list" = "allow"
    "#;
    let demo = demo(policy, ApprovalArgs::default()).await;
    let sdk = demo.run(&create("glob-sdk")).await;
    assert!(sdk.error.unwrap().message.contains("\"customers.*\""));
    let fetch = demo
        .run(
            "const r = await fetch('/v1/customers', { method: 'POST', headers: { 'content-type': \
             'application/json' }, body: JSON.stringify({ name: 'glob-fetch', email: 'g@x.io' }) }); \
             return r.status;",
        )
        .await;
    let error = fetch.error.as_ref().unwrap();
    assert_eq!(error.name.as_deref(), Some("PolicyError"), "{error:?}");
    assert_eq!(fetch.http[0].operation.as_deref(), Some("customers.create"));
    // A write that matches no operation gets the strictest write rule: here, deny.
    let unknown = demo
        .run("await api.request('POST', '/Customers', { body: { name: 'glob-case' } });")
        .await;
    assert_eq!(unknown.error.unwrap().name.as_deref(), Some("PolicyError"));
    // What the script says about its operation is not believed.
    let allowed = demo
        .run("return (await api.request('POST', '/orders', { body: { customer_id: 'cus_001', items: [] } })).status ?? 'sent'")
        .await;
    assert_eq!(
        policy_of(&allowed, "POST")["decision"],
        "allowed",
        "{allowed:?}"
    );
    let names = demo.customers().await;
    for name in ["glob-sdk", "glob-fetch", "glob-case"] {
        assert!(
            !names.iter().any(|n| n == name),
            "{name} was created: {names:?}"
        );
    }
    let list = demo
        .run("return (await api.customers.list({})).data.length")
        .await;
    assert!(list.ok, "{list:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_override_header_or_query_key_is_refused_not_sent() {
    let policy =
        "[policy]\nwrites = \"allow\"\n[policy.operations]\n\"customers.delete\" = \"deny\"\n";
    let demo = demo(policy, ApprovalArgs::default()).await;
    for (how, url, header) in [
        (
            "a header",
            "/v1/customers/cus_001",
            "'X-HTTP-Method-Override': 'DELETE'",
        ),
        (
            "a header",
            "/v1/customers/cus_001",
            "'x_method_override': 'DELETE'",
        ),
        (
            "the query",
            "/v1/customers/cus_001?_method=DELETE",
            "'x-trace': '1'",
        ),
        (
            "the query",
            "/v1/customers/cus_001?_M%65THOD=DELETE",
            "'x-trace': '1'",
        ),
    ] {
        let code = format!(
            "const r = await fetch('{url}', {{ method: 'POST', headers: {{ {header}, \
             'content-type': 'application/json' }}, body: JSON.stringify({{ name: 'Not Here' }}) }}); \
             return r.status;"
        );
        let outcome = demo.run(&code).await;
        let error = outcome.error.clone().unwrap();
        assert!(
            error.message.contains(how) && error.message.contains("not sent"),
            "{how}: {}",
            error.message
        );
    }
    let names = demo.customers().await;
    assert!(!names.iter().any(|n| n == "Not Here"), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_sends_reads_plans_writes_and_changes_nothing() {
    let demo = demo("", ApprovalArgs::default()).await;
    let code = "const before = (await api.customers.list({})).data.length; \
                const c = await api.customers.create({ name: 'dry-one', email: 'd@x.io' }); \
                await api.request('DELETE', '/customers/cus_001'); \
                return { before, id: c.id, marked: c['x-sdkbox-dry-run'] !== undefined };";
    let outcome = demo.run_with(code, None, true).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(outcome.result["marked"], true, "{}", outcome.result);
    assert!(outcome.result["before"].as_u64().unwrap() > 0);
    let plan: Vec<(String, String)> = outcome
        .plan
        .iter()
        .map(|p| {
            (
                p.request.method.clone(),
                p.request.operation.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        plan,
        [
            ("POST".to_owned(), "customers.create".to_owned()),
            ("DELETE".to_owned(), "customers.delete".to_owned())
        ]
    );
    assert_eq!(policy_of(&outcome, "POST")["decision"], "dry_run");
    let names = demo.customers().await;
    assert!(!names.iter().any(|n| n == "dry-one"));
    assert!(names.len() >= 3, "the customer was deleted: {names:?}");
}

/// A human who answers after `wait`, counting the questions.
pub struct Human {
    answer: Answer,
    wait: Duration,
    pub asked: AtomicUsize,
    /// The questions put, as described to the human.
    pub questions: std::sync::Mutex<Vec<String>>,
}

impl Approver for Human {
    fn channel(&self) -> &'static str {
        "test human"
    }

    fn ask(&self, ask: Ask, _key: Key, _timeout: Duration) -> AnswerFuture {
        self.asked.fetch_add(1, Ordering::SeqCst);
        assert!(ask.describe().contains("customers.create"), "{ask:?}");
        self.questions.lock().unwrap().push(ask.describe());
        let (answer, wait) = (self.answer.clone(), self.wait);
        Box::pin(async move {
            tokio::time::sleep(wait).await;
            answer
        })
    }
}

/// The demo with an approval timeout of 1 s, and a human who would answer after a minute.
async fn demo_with_a_silent_human() -> (Demo, Arc<Human>) {
    let args = ApprovalArgs {
        approval_timeout_s: 1,
        ..ApprovalArgs::default()
    };
    let by = "too late".to_owned();
    let silent = human(Answer::Approve { by }, Duration::from_secs(60));
    (demo("", args).await, silent)
}

pub fn human(answer: Answer, wait: Duration) -> Arc<Human> {
    Arc::new(Human {
        answer,
        wait,
        asked: AtomicUsize::new(0),
        questions: std::sync::Mutex::default(),
    })
}

/// A URL's fragment is never sent, so it is not shown either: the human approves, and the
/// call log and the provider get, one URL (a note after `#` could make a write look like
/// another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_is_neither_shown_nor_logged_since_it_is_never_sent() {
    let demo = demo("", ApprovalArgs::default()).await;
    let yes = human(
        Answer::Approve {
            by: "the user".into(),
        },
        Duration::ZERO,
    );
    let code = "return await api.request('POST', '/customers#the-test-customer-not-the-vip',                 { body: { name: 'fragment', email: 'fragment@example.com' } });";
    let gate = demo.gate(code, Some(yes.clone()), false).await;
    let outcome = demo
        .sandbox
        .execute_gated(code, &quick(5_000), CancellationToken::new(), gate)
        .await;
    assert!(outcome.ok, "{outcome:?}");
    let questions = yes.questions.lock().unwrap().clone();
    assert_eq!(questions.len(), 1, "{questions:?}");
    assert!(!questions[0].contains('#'), "{}", questions[0]);
    assert!(questions[0].contains("/customers"), "{}", questions[0]);
    let logged = serde_json::to_string(&outcome.http).unwrap();
    assert!(!logged.contains("the-test-customer"), "{logged}");
    assert_eq!(demo.customers_named("fragment").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_approves_or_denies_and_the_deadline_waits_for_them() {
    let demo = demo("", ApprovalArgs::default()).await;
    let yes = human(
        Answer::Approve {
            by: "the user".into(),
        },
        Duration::from_millis(1_500),
    );
    let code = create("human-yes");
    let gate = demo.gate(&code, Some(yes.clone()), false).await;
    // The execution may take 1 s; the human takes 1.5 s, which does not count.
    let outcome = demo
        .sandbox
        .execute_gated(&code, &quick(1_000), CancellationToken::new(), gate)
        .await;
    assert!(outcome.ok, "{outcome:?}");
    let note = policy_of(&outcome, "POST");
    assert_eq!(note["decision"], "approved");
    assert_eq!(note["by"], "the user");
    assert_eq!(note["channel"], "test human");
    let no = human(
        Answer::Deny {
            by: "the user (declined)".into(),
        },
        Duration::ZERO,
    );
    let outcome = demo
        .run_with(&create("human-no"), Some(no.clone()), false)
        .await;
    assert!(
        outcome
            .error
            .unwrap()
            .message
            .contains("denied by the user (declined)")
    );
    let names = demo.customers().await;
    assert!(names.iter().any(|n| n == "human-yes"));
    assert!(!names.iter().any(|n| n == "human-no"));
    assert_eq!(
        (
            yes.asked.load(Ordering::SeqCst),
            no.asked.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_answering_within_the_approval_timeout_refuses_the_write() {
    let (demo, silent) = demo_with_a_silent_human().await;
    let outcome = demo
        .run_with(&create("human-late"), Some(silent), false)
        .await;
    assert_ended_before(&outcome, 10_000, "the silent human (60 s)");
    let error = outcome.error.as_ref().unwrap();
    assert!(error.message.contains("no human's approval"), "{error:?}");
    assert_eq!(policy_of(&outcome, "POST")["decision"], "timed_out");
    assert!(!demo.customers().await.iter().any(|n| n == "human-late"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_channel_a_write_under_approve_is_refused_with_what_to_do() {
    let demo = demo("", ApprovalArgs::default()).await;
    let outcome = demo.run(&create("nobody")).await;
    let error = outcome.error.unwrap();
    assert!(error.message.contains("no way to ask"), "{}", error.message);
    assert!(error.message.contains("[policy]"), "{}", error.message);
    assert!(!demo.customers().await.iter().any(|n| n == "nobody"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_file_has_one_line_per_write_decision_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let args = ApprovalArgs {
        audit_log: Some(path.clone()),
        ..ApprovalArgs::default()
    };
    let demo = demo("[policy.operations]\n\"orders.create\" = \"allow\"\n", args).await;
    demo.run(&create("audited-nobody")).await;
    let yes = human(
        Answer::Approve {
            by: "the user".into(),
        },
        Duration::ZERO,
    );
    demo.run_with(&create("audited-yes"), Some(yes), false)
        .await;
    demo.run("return (await api.customers.list({})).data.length")
        .await;
    demo.run_with(&create("audited-dry"), None, true).await;
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(sdkbox::demo::DEMO_KEY));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let trail: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|l| {
            let field = |name: &str| l[name].as_str().unwrap_or("");
            (field("event"), field("decision"), field("sent"))
        })
        .collect();
    assert_eq!(
        trail,
        [
            ("decision", "no_channel", "no"),
            ("decision", "approved", "pending"),
            ("attempt", "", "yes"),
            ("decision", "dry_run", "no"),
        ],
        "{text}"
    );
    assert_eq!(lines[1]["by"], "the user");
    assert_eq!(lines[1]["operation"], "customers.create");
    assert_eq!(lines[1]["fingerprint"].as_str().unwrap().len(), 64);
    assert_eq!(lines[2]["status"], 200);
    assert_eq!(lines[2]["fingerprint"], lines[1]["fingerprint"]);
    assert_eq!(lines[1]["caller"].as_str().unwrap().len(), 64);
}

/// In a worker process too, the deadline stops while the human decides: the worker follows
/// the supervisor's held deadline instead of ending the script at its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_waits_for_the_human_without_running_out_of_time() {
    let demo = demo("", ApprovalArgs::default()).await;
    let mut config = sdkbox::worker::PoolConfig::for_this_binary(128 * 1024 * 1024).unwrap();
    config.exe = env!("CARGO_BIN_EXE_sdkbox").into();
    config.workers = 1;
    let pool = sdkbox::worker::Pool::start(config).await.unwrap();
    let yes = human(
        Answer::Approve {
            by: "the user".into(),
        },
        Duration::from_millis(2_500),
    );
    let code = create("worker-yes");
    let target = sdkbox::worker::Target {
        egress: demo.egress.clone(),
        sdk: Some(demo.sdk.clone()),
        gate: demo.gate(&code, Some(yes), false).await,
        caller: 1,
        principal: sdkbox::fair::Principal::stdio(),
        hold: None,
        watch: None,
    };
    let outcome = pool
        .execute(&target, &code, &quick(1_000), CancellationToken::new())
        .await;
    assert!(outcome.ok, "{outcome:?}");
    assert!(demo.customers().await.iter().any(|n| n == "worker-yes"));
    // And the deadline still holds once the human has answered.
    let slow = format!(
        "{}\nwhile (true) {{}}",
        create("worker-then-loop").replace("return ", "")
    );
    let yes = human(
        Answer::Approve {
            by: "the user".into(),
        },
        Duration::from_millis(1_500),
    );
    let target = sdkbox::worker::Target {
        gate: demo.gate(&slow, Some(yes), false).await,
        ..target
    };
    let outcome = pool
        .execute(&target, &slow, &quick(1_000), CancellationToken::new())
        .await;
    assert_ended_before(&outcome, 8_000, "the endless loop after the approval");
    assert_eq!(
        outcome.error.unwrap().kind,
        sdkbox::sandbox::ErrorKind::Timeout
    );
}

/// All the waits of one execution share the approval timeout: many writes, in parallel or
/// one after another, cannot hold the deadline longer than it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waits_cannot_stretch_an_execution_past_the_approval_timeout() {
    let (demo, silent) = demo_with_a_silent_human().await;
    let one = "api.customers.create({ name: 'held', email: 'h@x.io' }).catch((e) => e.name)";
    let code = format!(
        "const together = await Promise.all([{one}, {one}, {one}]); const after = []; \
         for (let i = 0; i < 5; i++) after.push(await {one}); return {{ together, after }};"
    );
    let outcome = demo.run_with(&code, Some(silent.clone()), false).await;
    assert!(outcome.ok, "{outcome:?}");
    // Eight waits of up to 1 s each, held to 1 s in all (6 s, were they one after another).
    assert_ended_before(&outcome, 4_000, "waits past the approval timeout");
    assert_eq!(outcome.result["after"][4], "PolicyError");
    // The three at once were asked; once the time was used up, nobody was asked any more.
    assert_eq!(silent.asked.load(Ordering::SeqCst), 3);
}

/// Found by review: a `_method` field in a body would make some frameworks act as another
/// method, and a request too large to show whole would be approved unseen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_method_override_is_refused_and_a_human_is_never_shown_a_cut_request() {
    let policy =
        "[policy]\nwrites = \"allow\"\n[policy.operations]\n\"customers.delete\" = \"deny\"\n";
    let demo = demo(policy, ApprovalArgs::default()).await;
    let outcome = demo
        .run(
            "await api.request('POST', '/customers/cus_001', { headers: { 'content-type': \
             'application/x-www-form-urlencoded' }, body: '_method=DELETE&name=Gone' });",
        )
        .await;
    let error = outcome.error.unwrap();
    assert!(error.message.contains("`_method`"), "{}", error.message);
    assert!(!demo.customers().await.iter().any(|n| n == "Gone"));
    let demo = demo_with_approvals().await;
    let yes = human(
        Answer::Approve {
            by: "the user".into(),
        },
        Duration::ZERO,
    );
    let code = "await api.customers.create({ name: 'huge', email: 'h@x.io', \
                metadata: { pad: 'p'.repeat(20000), zz_amount: '999999' } });";
    let outcome = demo.run_with(code, Some(yes.clone()), false).await;
    assert!(
        outcome
            .error
            .unwrap()
            .message
            .contains("too large or too long to show a human whole")
    );
    assert_eq!(yes.asked.load(Ordering::SeqCst), 0);
    assert!(!demo.customers().await.iter().any(|n| n == "huge"));
}

async fn demo_with_approvals() -> Demo {
    demo("", ApprovalArgs::default()).await
}
