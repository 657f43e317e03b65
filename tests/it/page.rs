//! The loopback approval page, used as a user would: the script's write fails with a link,
//! a real headless Chromium opens it and clicks Approve or Deny, and the re-run of the same
//! code sends exactly the approved write, once. Skips (with the reason) without chromium or
//! node, except in CI.

use std::path::Path;

use sdkbox::approval::{Approvals, Channel};
use sdkbox::config::ApprovalArgs;
use sdkbox::sandbox::{ExecLimits, Outcome};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approvals::{Demo, create, demo};

/// Clicks `button` on `url` in headless Chromium; returns the page's text before and after.
pub async fn click(url: &str, button: &str) -> Option<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/ts");
    let chromium = std::process::Command::new("chromium")
        .arg("--version")
        .output();
    let node = std::process::Command::new("node").arg("--version").output();
    let ready = chromium.is_ok() && node.is_ok();
    if !crate::support::requirement_met(
        ready,
        "chromium or node is not installed (scripts/test-deps)",
    ) {
        return None;
    }
    let output = tokio::process::Command::new("node")
        .arg("click.mjs")
        .args([url, button])
        .current_dir(dir)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let shown: Value = serde_json::from_str(stdout.trim()).unwrap();
    Some((
        shown["before"].as_str().unwrap().to_owned(),
        shown["after"].as_str().unwrap().to_owned(),
    ))
}

/// The demo under `policy`, and its approvals with an approval page.
pub async fn demo_with_page(policy: &str) -> (Demo, Approvals) {
    let demo = demo(policy, ApprovalArgs::default()).await;
    let approvals = demo
        .approvals
        .clone()
        .with_page("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (demo, approvals)
}

/// Runs `code` as the server does for a client without elicitation.
pub async fn run(demo: &Demo, approvals: &Approvals, code: &str) -> Outcome {
    let round = approvals
        .begin(&demo.caller(), code, false, Channel::Page)
        .await
        .unwrap();
    let limits = ExecLimits::default();
    let outcome = demo
        .sandbox
        .execute_gated(code, &limits, CancellationToken::new(), round.gate())
        .await;
    round.end().await.unwrap();
    outcome
}

pub fn link(outcome: &Outcome) -> String {
    let error = outcome
        .error
        .as_ref()
        .expect("the write should wait for approval");
    assert_eq!(error.name.as_deref(), Some("PolicyError"), "{error:?}");
    assert_eq!(outcome.approvals.len(), 1, "{outcome:?}");
    let message = &outcome.approvals[0];
    let link = message.split_whitespace().find(|w| w.contains("/approve/"));
    link.unwrap_or_else(|| panic!("no link in {message}"))
        .to_owned()
}

pub fn decision(outcome: &Outcome) -> String {
    let call = outcome.http.iter().find(|c| c.method == "POST").unwrap();
    serde_json::to_value(&call.policy).unwrap()["decision"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_approves_on_the_page_and_the_rerun_sends_that_write_once() {
    let (demo, page) = demo_with_page("").await;
    let code = create("page-yes");
    let first = run(&demo, &page, &code).await;
    assert_eq!(decision(&first), "awaiting_approval");
    let url = link(&first);
    let Some((before, after)) = click(&url, "approve").await else {
        return;
    };
    assert!(
        before.contains("customers.create") && before.contains("page-yes"),
        "{before}"
    );
    assert!(!before.contains(sdkbox::demo::DEMO_KEY));
    assert!(after.contains("Approved"), "{after}");
    // Other code making the same write is not approved.
    let other = run(&demo, &page, &format!("{code}\n")).await;
    assert_eq!(decision(&other), "awaiting_approval");
    let rerun = run(&demo, &page, &code).await;
    assert!(rerun.ok, "{rerun:?}");
    assert_eq!(decision(&rerun), "approved");
    assert_eq!(demo.customers_named("page-yes").await, 1);
    // The approval was for one request, sent once: running the code again answers it from
    // the chain's journal, it does not send it again.
    let again = run(&demo, &page, &code).await;
    assert_eq!(decision(&again), "replayed");
    assert_eq!(demo.customers_named("page-yes").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_denies_on_the_page_and_the_rerun_is_refused() {
    let (demo, page) = demo_with_page("").await;
    let code = create("page-no");
    let url = link(&run(&demo, &page, &code).await);
    let Some((_, after)) = click(&url, "deny").await else {
        return;
    };
    assert!(after.contains("Denied"), "{after}");
    let rerun = run(&demo, &page, &code).await;
    assert_eq!(decision(&rerun), "denied");
    assert!(rerun.error.unwrap().message.contains("approval page"));
    assert!(!demo.customers().await.iter().any(|n| n == "page-no"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_refuses_forms_from_other_sites_and_wrong_tokens() {
    let (demo, page) = demo_with_page("").await;
    let code = create("page-forged");
    let url = link(&run(&demo, &page, &code).await);
    let html = reqwest::get(&url).await.unwrap().text().await.unwrap();
    let token = html
        .split("name=token value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let client = reqwest::Client::new();
    let post = |origin: &'static str, token: String| {
        client
            .post(&url)
            .header("origin", origin)
            .header("sec-fetch-site", "same-origin")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={token}&decision=approve"))
            .send()
    };
    assert_eq!(
        post("http://evil.example", token.to_owned())
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        post(leak(page.page().unwrap().origin()), "0".repeat(32))
            .await
            .unwrap()
            .status(),
        403
    );
    // The right token from a program that fetched the link, without a browser's headers.
    let program = client
        .post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&decision=approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(program.status(), 403);
    let rebound = client
        .get(&url)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    // A link opened from another site's page (a chat client's) shows the page; a fetch or a
    // frame from there does not.
    let opened = |mode: &'static str, dest: &'static str| {
        client
            .get(&url)
            .header("sec-fetch-site", "cross-site")
            .header("sec-fetch-mode", mode)
            .header("sec-fetch-dest", dest)
            .send()
    };
    assert_eq!(opened("navigate", "document").await.unwrap().status(), 200);
    assert_eq!(opened("cors", "empty").await.unwrap().status(), 403);
    assert_eq!(opened("navigate", "iframe").await.unwrap().status(), 403);
    let rerun = run(&demo, &page, &code).await;
    assert_eq!(decision(&rerun), "awaiting_approval");
}

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

/// The re-run after an approval does not send again the writes its first run sent: they are
/// answered from the journal, so the approved write meets the same customer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rerun_replays_the_writes_the_first_run_sent_instead_of_sending_them_twice() {
    let policy = "[policy.operations]\n\"customers.create\" = \"allow\"\n";
    let (demo, page) = demo_with_page(policy).await;
    let code = "const c = await api.customers.create({ name: 'journal-first', email: 'j@x.io' }); \
                await api.customers.update({ customer_id: c.id, name: 'journal-renamed' }); \
                return c.id;";
    let first = run(&demo, &page, code).await;
    let url = link(&first);
    let Some((before, _)) = click(&url, "approve").await else {
        return;
    };
    assert!(before.contains("customers.update"), "{before}");
    let rerun = run(&demo, &page, code).await;
    assert!(rerun.ok, "{rerun:?}");
    let decisions: Vec<String> = rerun
        .http
        .iter()
        .map(|c| serde_json::to_value(&c.policy).unwrap()["decision"].to_string())
        .collect();
    assert_eq!(
        decisions,
        ["\"replayed\"", "\"approved\""],
        "{:?}",
        rerun.http
    );
    assert_eq!(demo.customers_named("journal-renamed").await, 1);
    assert_eq!(demo.customers_named("journal-first").await, 0);
}
