//! Approvals belong to the MCP caller, not the provider key (issue 20): two HTTP sessions of
//! the real binary, both with the server's own key, neither able to spend the other's
//! approval on the page.

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::once::decide_on_page;

async fn execute(client: &RunningService<RoleClient, ()>, code: &str) -> Value {
    let arguments = json!({ "code": code }).as_object().cloned().unwrap();
    let result = client
        .call_tool(CallToolRequestParams::new("execute").with_arguments(arguments))
        .await
        .unwrap();
    result.structured_content.unwrap()
}

/// The approval link an outcome waits on.
fn link(outcome: &Value) -> String {
    let message = outcome["approvals"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no approval asked: {outcome}"));
    message
        .split_whitespace()
        .find(|w| w.contains("/approve/"))
        .unwrap()
        .to_owned()
}

fn decision(outcome: &Value) -> String {
    let posts: Vec<&Value> = outcome["http"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["method"] == "POST")
        .collect();
    posts[0]["policy"]["decision"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_http_sessions_with_one_provider_key_cannot_spend_each_others_approvals() {
    let mut command = crate::support::sdkbox_async();
    command.kill_on_drop(true).args([
        "serve",
        "--demo",
        "--http",
        "127.0.0.1:0",
        "--approval-page",
        "127.0.0.1:0",
    ]);
    let server = crate::support::listening(command).await;
    let connect = || async {
        ().serve(StreamableHttpClientTransport::from_uri(server.url.as_str()))
            .await
            .unwrap()
    };
    let (a, b) = (connect().await, connect().await);
    let code = crate::approvals::create("two-sessions");
    let count = "return (await api.customers.list({ limit: 100 })).data.filter((c) => c.name === 'two-sessions').length;";
    let first = execute(&a, &code).await;
    assert_eq!(decision(&first), "awaiting_approval", "{first}");
    let approved = link(&first);
    decide_on_page(&approved, "approve").await;
    // B runs exactly the same code with the same provider key: A's approval is not B's.
    let other = execute(&b, &code).await;
    assert_eq!(decision(&other), "awaiting_approval", "{other}");
    assert_ne!(link(&other), approved);
    assert_eq!(execute(&a, count).await["result"], 0);
    // A's re-run sends it, once.
    let rerun = execute(&a, &code).await;
    assert_eq!(decision(&rerun), "approved", "{rerun}");
    assert_eq!(execute(&a, count).await["result"], 1);
    // B still waits on its own question; A's chain replays, it does not send again.
    assert_eq!(decision(&execute(&b, &code).await), "awaiting_approval");
    assert_eq!(decision(&execute(&a, &code).await), "replayed");
    assert_eq!(execute(&b, count).await["result"], 1);
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}
