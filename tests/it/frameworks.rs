//! sdkbox through agent frameworks' own MCP integrations, as an agent built on them hands its
//! tools to a model (issue 35, item 8): the OpenAI Agents SDK with strict schemas, whose
//! models must send every optional property (empty filters, 0 for numbers), over stdio and
//! HTTP. The framework scripts are in tests/clients/frameworks, pinned by its
//! requirements.txt.

use std::path::PathBuf;

use crate::clients::{assert_checks_passed, client_report, pointed_at};

/// The frameworks' Python, installed by scripts/test-deps.
fn frameworks_python() -> Option<PathBuf> {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients/frameworks/.venv/bin/python");
    crate::support::requirement_met(
        python.exists(),
        "the agent frameworks are not installed (scripts/test-deps)",
    )
    .then_some(python)
}

/// Runs the OpenAI Agents SDK script over `transport` and checks its report.
async fn openai_agents(transport: &str) {
    let Some(python) = frameworks_python() else {
        return;
    };
    let script = python.ancestors().nth(3).unwrap().join("openai_agents.py");
    let mut command = tokio::process::Command::new(&python);
    command.arg(script);
    let _server = pointed_at(&mut command, transport).await;
    let output = tokio::time::timeout(std::time::Duration::from_secs(180), command.output())
        .await
        .expect("the framework script did not finish in 180 s")
        .unwrap();
    let report = client_report(&output);
    assert_checks_passed(&report, &format!("openai-agents over {transport}"));
    assert_eq!(report["checks"].as_object().unwrap().len(), 4, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_agents_sdk_with_strict_schemas_over_stdio() {
    openai_agents("stdio").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_agents_sdk_with_strict_schemas_over_http() {
    openai_agents("http").await;
}
