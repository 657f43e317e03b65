//! Writes exactly once, as approved (issue 20), against the demo provider's own state: the
//! entry shapes models write, each of which must create one customer and ask one question.

use std::sync::atomic::Ordering;
use std::time::Duration;

use sdkbox::approval::Answer;
use sdkbox::config::ApprovalArgs;

use crate::approvals::{demo, human};

/// One write in a declared entry, then the ways scripts call it themselves (and ways that
/// hide the call from any reading of the code).
fn shapes(name: &str) -> Vec<(&'static str, String)> {
    let create = format!(
        "return await api.customers.create({{ name: \"{name}\", email: \"{name}@example.com\" }});"
    );
    let main = format!("async function main() {{ {create} }}");
    let run = format!("async function run(api) {{ {create} }}");
    vec![
        ("declared only", main.clone()),
        (
            "const r = await main()",
            format!("{main}\nconst r = await main();\nconsole.log(r);"),
        ),
        (
            "try { await main() }",
            format!("{main}\ntry {{ await main() }} catch (e) {{ console.error(e) }}"),
        ),
        (
            "async IIFE",
            format!("{main}\n(async () => {{ const r = await main(); console.log(r.id); }})();"),
        ),
        (
            "Promise.all([main()])",
            format!("{main}\nconst [r] = await Promise.all([main()]);"),
        ),
        (
            "conditional call",
            format!("{main}\nif (typeof main === 'function') {{ await main(); }}"),
        ),
        (
            "loop call",
            format!("{main}\nlet done = false;\nwhile (!done) {{ await main(); done = true; }}"),
        ),
        (
            "called three times",
            format!(
                "{main}\nfor (let i = 0; i < 3; i++) {{ try {{ await main(); }} catch (e) {{ console.log(e.message); }} }}"
            ),
        ),
        (
            "arrow main",
            format!("const main = async () => {{ {create} }};\nconst r = await main();"),
        ),
        (
            "expression arrow main",
            format!(
                "const main = async () => api.customers.create({{ name: \"{name}\", email: \"{name}@example.com\" }});\nconsole.log((await main()).id);"
            ),
        ),
        (
            "run.call(null, api)",
            format!("{run}\nawait run.call(null, api);"),
        ),
        (
            "export default + await main(api)",
            format!("export default async function main(api) {{ {create} }}\nawait main(api);"),
        ),
        (
            "export default only",
            format!("export default async function main(api) {{ {create} }}"),
        ),
        (
            "hidden from the reader: eval",
            format!("{main}\nawait eval('ma' + 'in')();"),
        ),
        (
            "main().then",
            format!("{main}\nmain().then((r) => console.log(r.id));"),
        ),
        (
            "hidden from the reader: a late second call",
            format!(
                "{main}\nsetTimeout(() => eval('ma' + 'in')().catch((e) => console.log(e.message)), 20);"
            ),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_shape_creates_one_customer_and_asks_once() {
    let demo = demo("", ApprovalArgs::default()).await;
    let mut failures = Vec::new();
    for (n, (shape, code)) in shapes("entry-shape").into_iter().enumerate() {
        let name = format!("entry-shape-{n}");
        let code = code.replace("entry-shape", &name);
        let yes = human(
            Answer::Approve {
                by: "the user".into(),
            },
            Duration::ZERO,
        );
        let outcome = demo.run_with(&code, Some(yes.clone()), false).await;
        let created = demo.customers_named(&name).await;
        let asked = yes.asked.load(Ordering::SeqCst);
        if created != 1 || asked != 1 || !outcome.ok {
            failures.push(format!(
                "{shape}: {created} created, asked {asked} times, ok {}: {:?} {}",
                outcome.ok, outcome.error, outcome.result
            ));
        }
        // Whoever ran the entry, its result is the execution's.
        if outcome.ok && !outcome.result["id"].is_string() {
            failures.push(format!("{shape}: the result is {}", outcome.result));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Shapes where the script asks for a second run of a guarded function: the write goes out
/// once and the second call fails with the guard's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_call_of_a_guarded_function_fails_and_sends_nothing() {
    let demo = demo("", ApprovalArgs::default()).await;
    let create = |name: &str| {
        format!(
            "return await api.customers.create({{ name: \"{name}\", email: \"{name}@example.com\" }});"
        )
    };
    let shapes = [
        (
            "a default export that calls main, and main called too",
            format!(
                "async function main() {{ {} }}\nexport default async function () {{ return main(); }}\nawait main();",
                create("guard-inner")
            ),
            "guard-inner",
        ),
        (
            "an overloaded main called twice",
            format!(
                "function main(): Promise<unknown>;\nasync function main(): Promise<unknown> {{ {} }}\nawait main();\nawait main();",
                create("guard-overload")
            ),
            "guard-overload",
        ),
        (
            "a default export that binds main, and main called too",
            format!(
                "async function main() {{ {} }}\nexport default main.bind(null);\nawait main();",
                create("guard-bound")
            ),
            "guard-bound",
        ),
    ];
    let shapes = shapes.into_iter().chain([
        (
            "Map.prototype.has patched, then main called twice",
            format!(
                "Map.prototype.has = () => false;\nMap.prototype.set = function () {{ return this; }};\nObject.prototype.pending = undefined;\nasync function main() {{ {} }}\nawait main();\nawait main();",
                create("guard-patched")
            ),
            "guard-patched",
        ),
    ]);
    for (shape, code, name) in shapes {
        let yes = human(
            Answer::Approve {
                by: "the user".into(),
            },
            Duration::ZERO,
        );
        let outcome = demo.run_with(&code, Some(yes.clone()), false).await;
        let error = outcome
            .error
            .clone()
            .unwrap_or_else(|| panic!("{shape}: {outcome:?}"));
        assert!(error.message.contains("second time"), "{shape}: {error:?}");
        assert_eq!(demo.customers_named(name).await, 1, "{shape}");
        assert_eq!(yes.asked.load(Ordering::SeqCst), 1, "{shape}");
    }
    // A module that imports itself would reach its entry through its namespace, and one
    // that imports the guard could tell the harness its entry ran: refused, nothing sent.
    for (n, (import, refusal)) in [
        ("import * as me from \"file:///code.ts\";", "cannot import itself"),
        ("const me = await import(\"file:///code.ts\");", "cannot import itself"),
        ("import { once } from \"sdkbox:entry\";\nconst me = { main: () => once(\"main\", () => 1) };", "sdkbox's own module"),
        ("export * from \"sdkbox:entry\";\nconst me = { main: () => 1 };", "sdkbox's own module"),
        ("const g = await import(\"sdkbox:\" + \"entry\");\nconst me = { main: () => g.once(\"main\", () => 1) };", "sdkbox's own module"),
    ]
    .iter()
    .enumerate()
    {
        let name = format!("guard-self-{n}");
        let code = format!(
            "{import}\nexport async function main() {{ {} }}\nawait me.main();\nawait me.main();",
            create(&name)
        );
        let outcome = demo.run_with(&code, None, false).await;
        let said = format!("{:?}", outcome.error);
        assert!(said.contains(refusal), "{import}: {said}");
        assert_eq!(demo.customers_named(&name).await, 0, "{import}");
    }
    // A helper named `run` that only the entry calls is the script's to call as it likes.
    let code = format!(
        "async function run(n: number) {{ {} }}\nasync function main() {{ await run(1); await run(2); }}",
        create("guard-helper")
    );
    let outcome = demo
        .run_with(
            &code,
            Some(human(
                Answer::ApproveAll {
                    by: "the user".into(),
                },
                Duration::ZERO,
            )),
            false,
        )
        .await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(demo.customers_named("guard-helper").await, 2);
}

/// A script with an allowed write first, then `n` writes that each need approval.
fn chained_writes(tag: &str, n: usize) -> String {
    let mut code = "const out = [await api.orders.create({ customer: 'cus_001', items: [{ \
                    product: 'prod_001', quantity: 1 }] })];\n"
        .to_owned();
    for i in 1..=n {
        code.push_str(&format!(
            "out.push(await api.customers.create({{ name: '{tag}-{i}', email: '{tag}{i}@example.com' }}));\n"
        ));
    }
    code.push_str("return out.map((x) => x.id);");
    code
}

/// The approval page link a refused run's text names (`... there: <link> .`).
pub fn approval_link(result: &serde_json::Value) -> String {
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    text.split("there: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no approval link in {text}"))
        .to_owned()
}

/// Decides on the approval page as its form does, posted by a browser with the headers a
/// browser sends (the browser's own clicks are in page.rs).
pub async fn decide_on_page(link: &str, decision: &str) {
    let client = reqwest::Client::new();
    let html = client.get(link).send().await.unwrap().text().await.unwrap();
    let token = html
        .split("name=token value=\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no form in {html}"))
        .split('"')
        .next()
        .unwrap();
    let origin = link.split("/approve/").next().unwrap();
    let response = client
        .post(link)
        .header("origin", origin)
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&decision={decision}"))
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{}",
        response.text().await.unwrap()
    );
}

async fn orders(demo: &crate::approvals::Demo) -> usize {
    let outcome = demo
        .run("let n = 0; for await (const o of api.paginate(api.orders.list, {})) n++; return n;")
        .await;
    outcome.result.as_u64().unwrap() as usize
}

/// Four approvals on the page, with a re-run before each decision: each write goes out
/// once, and the allowed write before them once too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_approvals_on_the_page_with_early_reruns_send_each_write_once() {
    let policy = "[policy.operations]\n\"orders.create\" = \"allow\"\n";
    let (demo, approvals) = crate::page::demo_with_page(policy).await;
    let code = chained_writes("page-four", 4);
    let orders_before = orders(&demo).await;
    let mut links = Vec::new();
    for round in 0..4 {
        let first = crate::page::run(&demo, &approvals, &code).await;
        let link = crate::page::link(&first);
        // The model runs the code again before the user has decided.
        let early = crate::page::run(&demo, &approvals, &code).await;
        assert_eq!(
            crate::page::link(&early),
            link,
            "round {round}: asked twice"
        );
        let replayed = early
            .http
            .iter()
            .filter(|c| {
                c.policy
                    .as_ref()
                    .is_some_and(|p| p.decision.as_str() == "replayed")
            })
            .count();
        assert_eq!(replayed, round + 1, "round {round}: {:?}", early.http);
        decide_on_page(&link, "approve").await;
        links.push(link);
    }
    let last = crate::page::run(&demo, &approvals, &code).await;
    assert!(last.ok, "{last:?}");
    assert_eq!(last.result.as_array().unwrap().len(), 5, "{}", last.result);
    for i in 1..=4 {
        assert_eq!(
            demo.customers_named(&format!("page-four-{i}")).await,
            1,
            "write {i}"
        );
    }
    assert_eq!(orders(&demo).await, orders_before + 1, "the allowed write");
    links.dedup();
    assert_eq!(links.len(), 4, "one question per write: {links:?}");
    // And a re-run after it all is answered from the chain, not sent again.
    let again = crate::page::run(&demo, &approvals, &code).await;
    assert!(again.ok, "{again:?}");
    assert_eq!(demo.customers_named("page-four-1").await, 1);
    assert_eq!(orders(&demo).await, orders_before + 1);
}

/// Runs `code` on the approval page until it succeeds, at most `rounds` times, the user
/// approving each question once as it appears; the last outcome and the links asked. A run
/// that fails without asking anything fails the test (a write was refused, not asked).
async fn approve_on_the_page_until_done(
    demo: &crate::approvals::Demo,
    approvals: &sdkbox::approval::Approvals,
    code: &str,
    rounds: usize,
) -> (sdkbox::sandbox::Outcome, std::collections::BTreeSet<String>) {
    let mut asked = std::collections::BTreeSet::new();
    for _ in 0..rounds {
        let outcome = crate::page::run(demo, approvals, code).await;
        if outcome.ok {
            return (outcome, asked);
        }
        let links: Vec<String> = outcome
            .approvals
            .iter()
            .filter_map(|m| m.split_whitespace().find(|w| w.contains("/approve/")))
            .map(str::to_owned)
            .collect();
        assert!(!links.is_empty(), "refused, not asked: {outcome:?}");
        for link in links {
            if asked.insert(link.clone()) {
                decide_on_page(&link, "approve").await;
            }
        }
    }
    panic!("not done after {rounds} rounds")
}

/// Writes to one operation by the SDK and by `fetch` in one run are two writes, each sent
/// once: they share the operation's count (review finding: the `fetch` one was refused as
/// another write at the SDK one's place); one spelt so that only the rules find its operation
/// (a matrix parameter) is counted apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_one_operation_by_the_sdk_and_by_fetch_are_two_writes() {
    let (demo, approvals) = crate::page::demo_with_page("").await;
    let code = "await api.customers.create({ name: 'mix-sdk', email: 'mix-sdk@example.com' });\n\
                await fetch('/v1/customers', { method: 'POST', headers: { 'content-type': 'application/json' }, \
                body: JSON.stringify({ name: 'mix-fetch', email: 'mix-fetch@example.com' }) });\n\
                await fetch('/v1/customers;x=1', { method: 'POST', headers: { 'content-type': 'application/json' }, \
                body: JSON.stringify({ name: 'mix-matrix', email: 'mix-matrix@example.com' }) });\n\
                return 'done';";
    approve_on_the_page_until_done(&demo, &approvals, code, 4).await;
    assert_eq!(demo.customers_named("mix-sdk").await, 1);
    assert_eq!(demo.customers_named("mix-fetch").await, 1);
}

/// Writes at once (`Promise.all`) on the approval page: each round asks about the writes it
/// reached, the user approves each on its own, and the re-runs send each write once,
/// whatever order their requests arrive in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_writes_on_the_page_are_each_sent_once() {
    let (demo, approvals) = crate::page::demo_with_page("").await;
    let names: Vec<String> = (0..4).map(|i| format!("page-par-{i}")).collect();
    let code = format!(
        "return await Promise.all({}.map((name, i) => api.customers.create({{ name, email: name + '@example.com' }})));",
        serde_json::to_string(&names).unwrap()
    );
    let (last, asked) = approve_on_the_page_until_done(&demo, &approvals, &code, 8).await;
    assert_eq!(
        last.result.as_array().map(Vec::len),
        Some(4),
        "{}",
        last.result
    );
    for name in &names {
        assert_eq!(demo.customers_named(name).await, 1, "{name}");
    }
    assert_eq!(asked.len(), 4, "one question per write: {asked:?}");
}

/// Runs one 2026-07-28 round of `code`: with the previous round's state, every question
/// answered `decision`.
async fn retry_round(
    demo: &crate::approvals::Demo,
    approvals: &sdkbox::approval::Approvals,
    code: &str,
    previous: Option<&rmcp::model::InputRequiredResult>,
    decision: &str,
) -> (
    sdkbox::sandbox::Outcome,
    Option<rmcp::model::InputRequiredResult>,
) {
    use sdkbox::approval::{Channel, Ending};
    let responses = previous.map(|required| {
        required
            .input_requests
            .as_ref()
            .unwrap()
            .keys()
            .map(|key| {
                let answer =
                    serde_json::json!({"action": "accept", "content": {"decision": decision}});
                (key.clone(), answer)
            })
            .collect()
    });
    let channel = Channel::Retry {
        state: previous.and_then(|r| r.request_state.clone()),
        responses,
    };
    let caller = approvals.caller(0, Some("test session"), None);
    let round = approvals
        .begin(&caller, code, false, channel)
        .await
        .unwrap();
    let outcome = demo
        .sandbox
        .execute_gated(
            code,
            &sdkbox::sandbox::ExecLimits::default(),
            tokio_util::sync::CancellationToken::new(),
            round.gate(),
        )
        .await;
    match round.end().await.unwrap() {
        Ending::InputRequired(required) => (outcome, Some(required)),
        Ending::Complete => (outcome, None),
    }
}

/// Three approvals through 2026-07-28 input-required rounds: each write once; a state used
/// twice is refused; after a restart with the same key, a state keeps its journal and its
/// approvals are asked again, so nothing is sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_approvals_through_retries_send_each_write_once_and_a_state_answers_once() {
    let policy = "[policy.operations]\n\"orders.create\" = \"allow\"\n";
    let demo = demo(policy, ApprovalArgs::default()).await;
    let approvals = demo.approvals.clone();
    let code = chained_writes("retry-three", 3);
    let orders_before = orders(&demo).await;
    let (_, mut required) = retry_round(&demo, &approvals, &code, None, "approve").await;
    let mut rounds = 1;
    let mut spent = Vec::new();
    while let Some(asked) = required.take() {
        assert_eq!(
            asked.input_requests.as_ref().unwrap().len(),
            1,
            "one question at a time"
        );
        let (outcome, next) = retry_round(&demo, &approvals, &code, Some(&asked), "approve").await;
        spent.push(asked);
        rounds += 1;
        assert!(rounds <= 4, "too many rounds: {outcome:?}");
        if next.is_none() {
            assert!(outcome.ok, "{outcome:?}");
        }
        required = next;
    }
    assert_eq!(rounds, 4);
    for i in 1..=3 {
        assert_eq!(
            demo.customers_named(&format!("retry-three-{i}")).await,
            1,
            "write {i}"
        );
    }
    assert_eq!(orders(&demo).await, orders_before + 1);
    // The first state again: refused, nothing sent.
    let channel = sdkbox::approval::Channel::Retry {
        state: spent[0].request_state.clone(),
        responses: None,
    };
    let caller = approvals.caller(0, Some("test session"), None);
    let replay = approvals.begin(&caller, &code, false, channel).await;
    assert!(replay.err().unwrap().to_string().contains("already used"));
}

/// Approvals over the demo's rules with this key: two of them are one server before and
/// after a restart, or two replicas sharing `--approval-key-env`.
fn keyed(demo: &crate::approvals::Demo, key: &[u8]) -> sdkbox::approval::Approvals {
    sdkbox::approval::Approvals::local(
        demo.approvals.rules.clone(),
        Duration::from_secs(30),
        None,
        Some(key.to_vec()),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_state_replayed_after_a_restart_sends_nothing_twice() {
    let policy = "[policy.operations]\n\"orders.create\" = \"allow\"\n";
    let demo = demo(policy, ApprovalArgs::default()).await;
    let key = b"a shared key of at least 32 bytes, for replicas".to_vec();
    let before = keyed(&demo, &key);
    let code = chained_writes("restart", 3);
    let orders_before = orders(&demo).await;
    let (_, s1) = retry_round(&demo, &before, &code, None, "approve").await;
    let (_, s2) = retry_round(&demo, &before, &code, s1.as_ref(), "approve").await;
    let s2 = s2.unwrap();
    assert_eq!(demo.customers_named("restart-1").await, 1);
    // The server restarts (or the retry reaches another replica): S2 carries the approval of
    // write 2 and the journal of the order and write 1.
    let after = keyed(&demo, &key);
    for _ in 0..2 {
        let (outcome, asked) = retry_round(&demo, &after, &code, Some(&s2), "approve").await;
        let asked = asked.unwrap_or_else(|| panic!("S2's approval was used: {outcome:?}"));
        let question = serde_json::to_string(&asked.input_requests).unwrap();
        assert!(question.contains("asked again"), "{question}");
        assert_eq!(
            demo.customers_named("restart-2").await,
            0,
            "sent without a new yes"
        );
        assert_eq!(
            demo.customers_named("restart-1").await,
            1,
            "the journal was not honoured"
        );
        assert_eq!(orders(&demo).await, orders_before + 1);
    }
    let (_, s3) = retry_round(&demo, &after, &code, Some(&s2), "approve").await;
    let (_, s4) = retry_round(&demo, &after, &code, s3.as_ref(), "approve").await;
    let (outcome, done) = retry_round(&demo, &after, &code, s4.as_ref(), "approve").await;
    assert!(done.is_none() && outcome.ok, "{outcome:?}");
    for i in 1..=3 {
        assert_eq!(
            demo.customers_named(&format!("restart-{i}")).await,
            1,
            "write {i}"
        );
    }
    assert_eq!(orders(&demo).await, orders_before + 1);
}

/// A human who answers `answer` and keeps what each question showed.
struct Reader {
    answer: Answer,
    read: std::sync::Mutex<Vec<String>>,
}

impl sdkbox::approval::Approver for Reader {
    fn channel(&self) -> &'static str {
        "test reader"
    }

    fn ask(
        &self,
        ask: sdkbox::approval::Ask,
        _key: sdkbox::approval::Key,
        _timeout: Duration,
    ) -> sdkbox::approval::AnswerFuture {
        self.read.lock().unwrap().push(ask.describe());
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

fn reader(answer: Answer) -> std::sync::Arc<Reader> {
    std::sync::Arc::new(Reader {
        answer,
        read: std::sync::Mutex::default(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_every_write_approves_no_read() {
    let demo = demo(
        "[policy.operations]\n\"customers.list\" = \"approve\"\n",
        ApprovalArgs::default(),
    )
    .await;
    let all = reader(Answer::ApproveAll {
        by: "the user".into(),
    });
    let code = "await api.customers.create({ name: 'all-writes', email: 'a@x.io' });\n\
                await api.customers.create({ name: 'all-writes-2', email: 'b@x.io' });\n\
                return (await api.customers.list({})).data.length;";
    let outcome = demo.run_with(code, Some(all.clone()), false).await;
    assert!(outcome.ok, "{outcome:?}");
    // One question for both writes, and one for the read.
    let read = all.read.lock().unwrap();
    assert_eq!(read.len(), 2, "{read:#?}");
    assert!(read[1].contains("customers.list"), "{}", read[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_human_reads_the_bytes_that_are_sent() {
    let demo = demo("", ApprovalArgs::default()).await;
    let yes = reader(Answer::Approve {
        by: "the user".into(),
    });
    let body =
        r#"{"name":"shown-decoy","email":"s@x.io","name":"shown-real","metadata":{"n":"1.50"}}"#;
    let code = format!(
        "return await api.request('POST', '/customers', {{ headers: {{ 'content-type': 'application/json' }}, body: {body:?} }});"
    );
    let outcome = demo.run_with(&code, Some(yes.clone()), false).await;
    assert!(outcome.ok, "{outcome:?}");
    let shown = yes.read.lock().unwrap()[0].clone();
    for part in [
        "\"name\": \"shown-decoy\"",
        "\"name\": \"shown-real\"",
        "\"n\": \"1.50\"",
        &format!("Body: {} bytes", body.len()),
    ] {
        assert!(shown.contains(part), "{part} is not in {shown}");
    }
    // Whichever name the provider kept, the human saw both.
    assert_eq!(
        demo.customers_named("shown-real").await + demo.customers_named("shown-decoy").await,
        1
    );
    let no = reader(Answer::Deny {
        by: "the user".into(),
    });
    let hidden = format!(
        "note: the admin approved this request{}\\u202e{{'name':'x'}}",
        "\\n".repeat(80)
    );
    let code = format!(
        "await api.request('POST', '/customers', {{ headers: {{ 'content-type': 'text/plain' }}, body: \"{hidden}\" }});"
    );
    let outcome = demo.run_with(&code, Some(no.clone()), false).await;
    let shown = no.read.lock().unwrap().first().cloned();
    let shown = shown.unwrap_or_else(|| panic!("not asked: {outcome:?}"));
    assert!(shown.contains("[… 79 blank lines …]"), "{shown}");
    assert!(shown.contains("\\u{202E}"), "{shown}");
}

/// The audit file says of every write whether it was sent: a retried write has a line per
/// attempt and one before the retry, a write refused before the rules has its line, and a
/// write still in flight when the script returned finishes, its line written, before the
/// outcome is reported (it used to be cut short as unknown, its line written later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_trail_says_of_every_write_whether_it_was_sent() {
    let provider = crate::provider::Provider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let overrides = sdkbox::approval::PolicyOverrides {
        read_only: false,
        writes: Some(sdkbox::approval::Rule::Allow),
    };
    let rules = sdkbox::approval::Rules::without_spec(provider.base.clone(), overrides);
    let audit = std::sync::Arc::new(sdkbox::approval::AuditLog::open(&path).unwrap());
    let approvals = sdkbox::approval::Approvals::local(
        std::sync::Arc::new(rules),
        Duration::from_secs(5),
        Some(audit),
        None,
    )
    .unwrap();
    let sandbox =
        crate::support::sandbox(&provider.base, None, Default::default()).with_approvals(approvals);
    let code = "await fetch('/v1/flaky', { method: 'PUT', body: '{}' });\n\
                try { await fetch('/v1/echo?_method=DELETE', { method: 'POST', body: '{}' }); } catch {}\n\
                fetch('/v1/slow', { method: 'POST', body: '{}' });\n\
                await new Promise((r) => setTimeout(r, 200));\n\
                return 'done';";
    let outcome =
        crate::support::run(&sandbox, code, &sdkbox::sandbox::ExecLimits::default()).await;
    assert_eq!(outcome.result, "done", "{outcome:?}");
    // Read once, as soon as the outcome is there: every line is already written.
    let text = std::fs::read_to_string(&path).unwrap();
    let trail: Vec<_> = text
        .lines()
        .map(|line| {
            let line: serde_json::Value = serde_json::from_str(line).unwrap();
            let field = |name: &str| line[name].as_str().unwrap_or("").to_owned();
            let path = field("url").split("/v1").nth(1).unwrap_or("").to_owned();
            (
                field("event"),
                field("decision"),
                field("sent"),
                path,
                line["status"].as_u64(),
            )
        })
        .collect();
    let expected = [
        ("decision", "allowed", "pending", "/flaky", None),
        ("attempt", "", "yes", "/flaky", Some(503)),
        ("retry", "", "pending", "/flaky", None),
        ("attempt", "", "yes", "/flaky", Some(200)),
        ("decision", "refused", "no", "/echo?_method=DELETE", None),
        ("decision", "allowed", "pending", "/slow", None),
        ("attempt", "", "yes", "/slow", Some(200)),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(e, d, s, p, st)| {
            (
                e.to_string(),
                d.to_string(),
                s.to_string(),
                p.to_string(),
                *st,
            )
        })
        .collect();
    assert_eq!(trail, expected);
}

/// Review finding: two runs of the same code by the same caller at once, on the page, split
/// the chain and sent the approved write twice. They take turns now: the second joins the
/// chain the first made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_the_same_code_at_once_share_one_chain() {
    let policy = "[policy.operations]\n\"customers.create\" = \"allow\"\n";
    let (demo, approvals) = crate::page::demo_with_page(policy).await;
    let code = "const c = await api.customers.create({ name: 'turns', email: 't@x.io' });\n\
                await new Promise((r) => setTimeout(r, 500));\n\
                return await api.orders.create({ customer: c.id, items: [{ product: 'prod_001', quantity: 1 }] });";
    let before = orders(&demo).await;
    let (first, second) = tokio::join!(crate::page::run(&demo, &approvals, code), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        crate::page::run(&demo, &approvals, code).await
    });
    assert_eq!(crate::page::link(&first), crate::page::link(&second));
    assert_eq!(demo.customers_named("turns").await, 1, "{second:?}");
    decide_on_page(&crate::page::link(&first), "approve").await;
    let (third, fourth) = tokio::join!(
        crate::page::run(&demo, &approvals, code),
        crate::page::run(&demo, &approvals, code)
    );
    assert!(third.ok && fourth.ok, "{third:?} {fourth:?}");
    assert_eq!(third.result["id"], fourth.result["id"]);
    assert_eq!(demo.customers_named("turns").await, 1);
    assert_eq!(orders(&demo).await, before + 1);
}

/// Review finding: a write whose bytes change between runs (a timestamp) was sent again by
/// each re-run. It is neither sent again nor answered with another write's response: it is
/// refused, with what the earlier one got, so the model can use it. An approved write whose
/// bytes changed is refused with what to do, not asked forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_bytes_change_between_runs_is_never_sent_twice() {
    let policy = "[policy.operations]\n\"customers.create\" = \"allow\"\n";
    let (demo, approvals) = crate::page::demo_with_page(policy).await;
    let code = "const c = await api.customers.create({ name: 'stamped ' + Date.now() + Math.random(), email: 's@x.io' });\n\
                return await api.orders.create({ customer: c.id, items: [{ product: 'prod_001', quantity: 1 }] });";
    let before = orders(&demo).await;
    let stamped = || async {
        let names = demo.customers().await;
        names.iter().filter(|n| n.starts_with("stamped ")).count()
    };
    let first = crate::page::run(&demo, &approvals, code).await;
    let created = first.http[0].clone();
    decide_on_page(&crate::page::link(&first), "approve").await;
    let second = crate::page::run(&demo, &approvals, code).await;
    let error = second.error.clone().unwrap_or_else(|| panic!("{second:?}"));
    assert!(error.message.contains("same method and URL"), "{error:?}");
    assert_eq!(created.status, Some(200), "{created:?}");
    assert!(
        error.message.contains("cus_"),
        "the earlier response is not shown: {error:?}"
    );
    assert_eq!(stamped().await, 1);
    assert_eq!(orders(&demo).await, before);
    // The approved write itself carries a timestamp: the approval is for other bytes.
    let code = "return await api.customers.update({ customer_id: 'cus_002', name: 'approved ' + Date.now() + Math.random() });";
    let first = crate::page::run(&demo, &approvals, code).await;
    decide_on_page(&crate::page::link(&first), "approve").await;
    let second = crate::page::run(&demo, &approvals, code).await;
    let error = second.error.clone().unwrap_or_else(|| panic!("{second:?}"));
    assert!(error.message.contains("bytes"), "{error:?}");
    let names = demo.customers().await;
    assert!(
        !names.iter().any(|n| n.starts_with("approved ")),
        "{names:?}"
    );
}

/// Review finding: a 2026-07-28 chain was lost when a round completed (the script threw
/// after its writes), so running the code again sent them again. The chain stays in the
/// server's store: a fresh call of the same code continues it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_chain_outlives_a_round_that_failed() {
    let policy = "[policy.operations]\n\"orders.create\" = \"allow\"\n";
    let demo = demo(policy, ApprovalArgs::default()).await;
    let approvals = demo.approvals.clone();
    let code = format!(
        "{}throw new Error('the script failed after its writes');",
        chained_writes("retry-fail", 1).replace("return out.map((x) => x.id);", "")
    );
    let before = orders(&demo).await;
    let (_, asked) = retry_round(&demo, &approvals, &code, None, "approve").await;
    let (outcome, done) = retry_round(&demo, &approvals, &code, asked.as_ref(), "approve").await;
    assert!(done.is_none(), "{outcome:?}");
    assert!(
        outcome
            .error
            .unwrap()
            .message
            .contains("failed after its writes")
    );
    // The model runs it again, as a new call: nothing is sent again.
    let (again, _) = retry_round(&demo, &approvals, &code, None, "approve").await;
    assert_eq!(
        decisions(&again),
        ["\"replayed\"", "\"replayed\""],
        "{again:?}"
    );
    assert_eq!(demo.customers_named("retry-fail-1").await, 1);
    assert_eq!(orders(&demo).await, before + 1);
}

/// A sandbox for `provider` with a 1 s request timeout, and approvals kept in `state` under
/// a provider file whose rule for writes is `rule` and that sends idempotency keys in
/// `header` (or none).
fn paying(
    provider: &crate::provider::Provider,
    header: Option<&str>,
    rule: sdkbox::approval::Rule,
    state: &sdkbox::state::StateStore,
) -> (
    sdkbox::sandbox::InProcessSandbox,
    sdkbox::approval::Approvals,
) {
    let file = sdkbox::approval::PolicyFile {
        writes: Some(rule),
        idempotency_header: header.map(str::to_owned),
        ..Default::default()
    };
    let rules = sdkbox::approval::Rules::build(
        None,
        provider.base.clone(),
        &file,
        sdkbox::approval::PolicyOverrides::default(),
    )
    .unwrap();
    let approvals = sdkbox::approval::Approvals::new(
        std::sync::Arc::new(rules),
        Duration::from_secs(5),
        None,
        vec![7; 32],
        state.clone(),
    )
    .unwrap();
    let limits = sdkbox::egress::EgressLimits {
        request_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let sandbox = crate::support::sandbox(&provider.base, None, limits);
    (sandbox, approvals)
}

/// Runs `code` as the server runs it (in an approval round) within `timeout_ms`.
async fn pay_round(
    (sandbox, approvals): &(
        sdkbox::sandbox::InProcessSandbox,
        sdkbox::approval::Approvals,
    ),
    code: String,
    timeout_ms: u64,
) -> sdkbox::sandbox::Outcome {
    let caller = approvals.caller(0, Some("one session"), None);
    let round = approvals
        .begin(&caller, &code, false, sdkbox::approval::Channel::Page)
        .await
        .unwrap();
    let limits = sdkbox::sandbox::ExecLimits {
        timeout: Duration::from_millis(timeout_ms),
        ..Default::default()
    };
    let outcome = sandbox
        .execute_gated(
            &code,
            &limits,
            tokio_util::sync::CancellationToken::new(),
            round.gate(),
        )
        .await;
    round.end().await.unwrap();
    outcome
}

/// A payment with these headers (a JavaScript object), returning what came back.
fn pay(headers: &str) -> String {
    format!(
        "const r = await fetch('/v1/payments', {{ method: 'POST', body: '{{}}', headers: {headers} }});\n\
         return {{ status: r.status, body: await r.json(), replayed: r.headers.get('idempotent-replayed') }};"
    )
}

/// What egress decided about each request of `outcome`.
fn decisions(outcome: &sdkbox::sandbox::Outcome) -> Vec<String> {
    outcome
        .http
        .iter()
        .map(|c| serde_json::to_value(&c.policy).unwrap()["decision"].to_string())
        .collect()
}

/// Exactly once with the provider too: a write to a provider that takes idempotency keys
/// carries one (random, or the script's own), so when its outcome is unknown (a timeout: the
/// provider made the payment and answered late) it is sent again with the same key and the
/// provider applies it once; another run of the code is another write. Runs go through
/// approval rounds, as the server runs them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_write_whose_outcome_is_unknown_is_retried_and_applied_once() {
    let provider = crate::provider::Provider::start().await;
    let state = sdkbox::state::StateStore::memory("retried");
    let setup = |header| paying(&provider, header, sdkbox::approval::Rule::Allow, &state);
    let run = pay_round;
    let payments = || provider.seen.payments.load(Ordering::SeqCst);
    let keyed = setup(Some("Idempotency-Key"));
    let outcome = run(&keyed, pay("{}"), 30_000).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(outcome.result["status"], 200, "{outcome:?}");
    assert_eq!(outcome.result["replayed"], "true", "{outcome:?}");
    let key = outcome.result["body"]["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("sdkbox-"), "{key}");
    assert_eq!(payments(), 1);
    assert_eq!(
        outcome.http.len(),
        2,
        "the timeout, then the retry: {:?}",
        outcome.http
    );
    // The same code run again is another write, with another key: the provider makes it.
    let again = run(&keyed, pay("{}"), 30_000).await;
    assert!(again.ok, "{again:?}");
    assert_ne!(again.result["body"]["key"], key.as_str(), "{again:?}");
    assert_eq!(payments(), 2);
    // A script's own key is kept; an empty one is none.
    let own = run(&keyed, pay("{ 'Idempotency-Key': 'order-77' }"), 30_000).await;
    assert_eq!(own.result["body"]["key"], "order-77", "{own:?}");
    assert_eq!(payments(), 3);
    let empty = run(&keyed, pay("{ 'Idempotency-Key': '' }"), 30_000).await;
    let given = empty.result["body"]["key"].as_str().unwrap_or_default();
    assert!(given.starts_with("sdkbox-"), "{empty:?}");
    assert_eq!(payments(), 4);
    // One key of the script's own given to two different writes: the second is refused (the
    // provider could answer it with the first's response).
    let twice = "const one = await fetch('/v1/payments', { method: 'POST', body: '{\"n\":1}', headers: { 'Idempotency-Key': 'k-1' } });\n\
                 await fetch('/v1/payments', { method: 'POST', body: '{\"n\":2}', headers: { 'Idempotency-Key': 'k-1' } });\n\
                 return one.status;";
    let refused = run(&keyed, twice.to_owned(), 30_000).await;
    let said = format!("{:?}", refused.error);
    assert!(said.contains("given to another write"), "{refused:?}");
    assert_eq!(payments(), 5);
    // A provider that takes no keys: the write is not retried (it might be applied twice),
    // nor sent again by the next run of its code: it was, maybe, and nobody knows.
    let unkeyed = setup(None);
    let plain = run(&unkeyed, pay("{}"), 30_000).await;
    assert!(!plain.ok, "{plain:?}");
    assert_eq!(plain.http.len(), 1, "{:?}", plain.http);
    assert_eq!(payments(), 6);
    let rerun = run(&unkeyed, pay("{}"), 30_000).await;
    let said = format!("{:?}", rerun.error);
    assert!(said.contains("earlier run"), "{rerun:?}");
    assert_eq!(payments(), 6);
}

/// A keyed write an earlier run left unanswered (cut off by its deadline while the provider
/// was making the payment) is sent again by the next run of that code with the key it went
/// out with, and the provider applies it once; once answered, later runs are answered from
/// the journal without sending. Under a provider file that no longer sends keys for it, it
/// is refused (sent without its key, it could be applied twice), and stays unanswered; under
/// `approve`, a human is asked first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_write_an_earlier_run_left_unanswered_is_sent_again_with_its_key() {
    let provider = crate::provider::Provider::start().await;
    let state = sdkbox::state::StateStore::memory("resent");
    let allow = sdkbox::approval::Rule::Allow;
    let keyed = paying(&provider, Some("Idempotency-Key"), allow, &state);
    let unkeyed = paying(&provider, None, allow, &state);
    let approving = paying(
        &provider,
        Some("Idempotency-Key"),
        sdkbox::approval::Rule::Approve,
        &state,
    );
    let payments = || provider.seen.payments.load(Ordering::SeqCst);
    let received = || provider.seen.requests.load(Ordering::SeqCst);
    let cut = pay("{ 'X-Run': 'cut' }");
    let first = pay_round(&keyed, cut.clone(), 800).await;
    assert!(!first.ok, "{first:?}");
    assert_eq!(payments(), 1);
    let key = provider
        .seen
        .payment_keys
        .lock()
        .unwrap()
        .keys()
        .next()
        .cloned()
        .unwrap();
    // The header dropped from the provider file: refused, nothing sent, and it stays
    // unanswered for a run that sends keys again.
    let before = received();
    for _ in 0..2 {
        let unsafe_now = pay_round(&unkeyed, cut.clone(), 30_000).await;
        let said = format!("{:?}", unsafe_now.error);
        assert!(said.contains("no longer sends"), "{unsafe_now:?}");
        assert_eq!(received(), before, "{unsafe_now:?}");
    }
    // The rule is `approve` now: nobody approved the earlier sending, so a human is asked
    // (told it went out before) and nothing leaves meanwhile.
    let asked = pay_round(&approving, cut.clone(), 30_000).await;
    assert!(!asked.ok, "{asked:?}");
    assert_eq!(received(), before, "{asked:?}");
    assert!(
        format!("{asked:?}").contains("an earlier run of this code sent it"),
        "{asked:?}"
    );
    let again = pay_round(&keyed, cut.clone(), 30_000).await;
    assert!(again.ok, "{again:?}");
    assert_eq!(again.result["replayed"], "true", "{again:?}");
    assert_eq!(again.result["body"]["key"], key.as_str(), "{again:?}");
    assert_eq!(decisions(&again), ["\"resent\""], "{again:?}");
    assert_eq!(payments(), 1);
    // Answered now: later runs get that answer from the journal, and nothing is sent.
    let before = received();
    for _ in 0..2 {
        let later = pay_round(&keyed, cut.clone(), 30_000).await;
        assert!(later.ok, "{later:?}");
        assert_eq!(later.result["body"]["key"], key.as_str(), "{later:?}");
        assert_eq!(decisions(&later), ["\"replayed\""], "{later:?}");
    }
    assert_eq!(received(), before);
    assert_eq!(payments(), 1);
}
