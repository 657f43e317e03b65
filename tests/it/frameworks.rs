//! sdkbox through agent frameworks' own MCP integrations, as an agent built on them hands its
//! tools to a model (issue 35, item 8), over stdio and HTTP: the OpenAI Agents SDK with strict
//! schemas, whose models must send every optional property (empty filters, 0 for numbers);
//! LangChain's MCP adapters, whose tools give the model the text and keep the structured
//! result as an artifact; and pydantic-ai's MCP toolset, which gives the model the structured
//! result and turns a tool error into a retry; and the AI SDK's MCP client, in the 2026-07-28
//! revision. Each framework's script and pinned requirements are in
//! tests/clients/frameworks/<name>, in a virtual environment of its own (their `mcp` versions
//! differ).

use std::path::PathBuf;

use crate::clients::{assert_checks_passed, client_report, pointed_at};

/// A framework's runtime and script, installed by scripts/test-deps: a Python one's virtual
/// environment, or Node with a JavaScript one's packages.
fn framework(name: &str) -> Option<(PathBuf, PathBuf)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients/frameworks")
        .join(name);
    let (program, script, installed) = match dir.join("package.json").exists() {
        true => (
            PathBuf::from("node"),
            dir.join(format!("{name}.mjs")),
            dir.join("node_modules").exists(),
        ),
        false => {
            let python = dir.join(".venv/bin/python");
            let installed = python.exists();
            (python, dir.join(format!("{name}.py")), installed)
        }
    };
    crate::support::requirement_met(
        installed,
        &format!("the {name} framework is not installed (scripts/test-deps)"),
    )
    .then_some((program, script))
}

/// Runs framework `name`'s script over `transport` and checks its report of `checks` checks.
async fn through(name: &str, transport: &str, checks: usize) {
    let Some((program, script)) = framework(name) else {
        return;
    };
    let mut command = tokio::process::Command::new(&program);
    command.arg(script);
    let _server = pointed_at(&mut command, transport).await;
    let output = tokio::time::timeout(std::time::Duration::from_secs(180), command.output())
        .await
        .expect("the framework script did not finish in 180 s")
        .unwrap();
    let report = client_report(&output);
    assert_checks_passed(&report, &format!("{name} over {transport}"));
    assert_eq!(
        report["checks"].as_object().unwrap().len(),
        checks,
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_agents_sdk_with_strict_schemas_over_stdio() {
    through("openai_agents", "stdio", 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_agents_sdk_with_strict_schemas_over_http() {
    through("openai_agents", "http", 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_mcp_adapters_over_stdio() {
    through("langchain", "stdio", 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_mcp_adapters_over_http() {
    through("langchain", "http", 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pydantic_ai_over_stdio() {
    through("pydanticai", "stdio", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pydantic_ai_over_http() {
    through("pydanticai", "http", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_sdk_over_stdio() {
    through("ai_sdk", "stdio", 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_sdk_over_http() {
    through("ai_sdk", "http", 4).await;
}
