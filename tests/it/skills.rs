//! Skills (issue 37): the provider's own skill and an operator's skills directory, listed,
//! read and checked against their manifest through rmcp's client (which speaks the skills
//! extension), and found by `search_docs`. Tasks in the handshake era over stdio, through
//! rmcp's client declaring the tasks extension at `initialize`: a long call becomes a task
//! polled to its result, a client without the extension gets a plain call.

use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig,
    GetSkillRequestParams, GetTaskParams, Implementation, ReadResourceRequestParams,
    ResourceContents, SkillResources, TaskPayload,
};
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use crate::support::sdkbox_async;

fn skills_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("refund-playbook");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: refund-playbook\ndescription: How our support team refunds a damaged order\n---\n\
         # Refund playbook\n\n## Damaged parcels\nRefund the whole order when the carrier confirms \
         the parcel was crushed; see scripts/refund.ts.\n",
    )
    .unwrap();
    std::fs::write(
        skill.join("scripts/refund.ts"),
        "const order = await api.orders.get({ id });\nreturn order;\n",
    )
    .unwrap();
    dir
}

fn arguments(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_listed_read_whole_and_searched() {
    let dir = skills_dir();
    let mut command = sdkbox_async();
    command
        .args(["serve", "--demo", "--no-model", "--skills-dir"])
        .arg(dir.path())
        .stderr(Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let listed = client.list_skills(None).await.unwrap().skills;
    let names: Vec<&str> = listed.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["acme-shop-demo-api", "refund-playbook"]);
    for listed in &listed {
        let got = client
            .get_skill(GetSkillRequestParams::new(listed.uri.clone()))
            .await
            .unwrap()
            .skill;
        assert_eq!(&got, listed);
        let SkillResources::Files(files) = &got.resources else {
            panic!("a dynamic skill: {got:?}");
        };
        for file in files {
            let read = client
                .read_resource(ReadResourceRequestParams::new(file.uri.clone()))
                .await
                .unwrap();
            let bytes = match &read.contents[0] {
                ResourceContents::TextResourceContents { text, .. } => text.as_bytes().to_vec(),
                other => panic!("{other:?}"),
            };
            file.verify(&bytes).unwrap();
        }
    }
    let own = client
        .read_resource(ReadResourceRequestParams::new(
            "skill://acme-shop-demo-api/SKILL.md",
        ))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &own.contents[0] else {
        panic!("{own:?}");
    };
    for needle in [
        "name: acme-shop-demo-api",
        "api.customers.list",
        "starting_after",
        "## Writes",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    let unknown = client
        .get_skill(GetSkillRequestParams::new("skill://nope/SKILL.md"))
        .await
        .unwrap_err();
    assert!(unknown.to_string().contains("no skill"), "{unknown}");
    let outside = client
        .read_resource(ReadResourceRequestParams::new(
            "skill://refund-playbook/../../etc/passwd",
        ))
        .await
        .unwrap_err();
    assert!(outside.to_string().contains("no skill file"), "{outside}");
    let hits = client
        .call_tool(
            CallToolRequestParams::new("search_docs")
                .with_arguments(arguments(json!({"query": "refund a crushed parcel"}))),
        )
        .await
        .unwrap();
    let hits = hits.structured_content.unwrap().to_string();
    assert!(hits.contains("skill refund-playbook"), "{hits}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_era_client_that_declares_tasks_polls_its_task() {
    let mut command = sdkbox_async();
    command
        .args(["serve", "--demo", "--no-model", "--task-after-ms", "500"])
        .stderr(Stdio::null());
    let capabilities = ClientCapabilities::builder().enable_tasks().build();
    let info = ClientConfig::new(capabilities, Implementation::new("tasks-test", "1.0.0"));
    let client = info
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let code = "for (let i = 0; i < 3; i++) { await api.products.list({}); \
                await new Promise((r) => setTimeout(r, 700)); } return 'done';";
    let call =
        CallToolRequestParams::new("execute").with_arguments(arguments(json!({"code": code})));
    let CallToolResponse::Task(created) = client.call_tool_once(call).await.unwrap() else {
        panic!("a long call from a client with tasks did not become a task");
    };
    let id = created.task.task_id.clone();
    let result = loop {
        let got = client
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .unwrap();
        match got.task.payload {
            TaskPayload::Completed { result } => break result,
            TaskPayload::Working => tokio::time::sleep(Duration::from_millis(300)).await,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(result["structuredContent"]["result"], "done", "{result:?}");
    let unknown = client
        .get_task(GetTaskParams::new("0".repeat(32)))
        .await
        .unwrap_err();
    assert!(unknown.to_string().contains("no task"), "{unknown}");
    client.cancel().await.unwrap();

    // A client without the extension: the same call stays a plain call.
    let mut command = sdkbox_async();
    command
        .args(["serve", "--demo", "--no-model", "--task-after-ms", "500"])
        .stderr(Stdio::null());
    let plain = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let call =
        CallToolRequestParams::new("execute").with_arguments(arguments(json!({"code": code})));
    let result = plain.call_tool(call).await.unwrap();
    assert_eq!(result.structured_content.unwrap()["result"], "done");
    plain.cancel().await.unwrap();
}
