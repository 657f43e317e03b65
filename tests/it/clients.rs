//! Conformance with the official MCP clients: the real `sdkbox` binary driven by the official
//! TypeScript SDK (`@modelcontextprotocol/sdk` 1.x, handshake era only, and
//! `@modelcontextprotocol/client` 2.x) and the official Python SDK (`mcp` 2.x), over stdio and
//! streamable HTTP, in both protocol eras: the `initialize` handshake (2025-11-25) and the
//! 2026-07-28 revision (`server/discover`, pinned and negotiated). Each client validates every
//! result against the declared output schema, as the SDKs do. The clients live in
//! `tests/clients/` with their lock files; `scripts/test-deps` installs them. Without node or
//! python these tests skip with a reason, except in CI, where they must run.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use tokio::process::Command;

use crate::support::{Listening, listening};

/// Every check an approvals client runs (`approvals.mjs`, `approvals.py`): its elicitation
/// handler approves, declines or cancels by the customer's name, and the demo provider's own
/// list shows which writes went out.
const APPROVAL_CHECKS: [&str; 14] = [
    "tools",
    "approved_write",
    "declined_write",
    "cancelled_write",
    "caught_policy_error",
    "raw_fetch_gated",
    "approve_all",
    "two_approvals",
    "four_approvals",
    "parallel_writes",
    "entry_called_by_the_script",
    "large_question",
    "dry_run",
    "channel",
];

/// Every check a conformance client runs; each must run and pass.
const CHECKS: [&str; 15] = [
    "tools",
    "search_hits",
    "search_no_hits",
    "search_hint",
    "search_empty_filters",
    "execute_ok",
    "execute_script_error",
    "execute_syntax_error",
    "execute_truncated",
    "execute_cancelled",
    "execute_files",
    "argument_error",
    "unknown_tool",
    "malformed_request",
    "still_serving",
];

pub(crate) fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// `None` (with the reason printed) when a client cannot run here; in CI that is a failure.
fn available(what: &str, path: &Path, install: &str) -> Option<PathBuf> {
    let reason = format!("{what} is not installed at {} ({install})", path.display());
    crate::support::requirement_met(path.exists(), &reason).then(|| path.to_owned())
}

pub(crate) fn node_client() -> Option<PathBuf> {
    let dir = clients_dir().join("ts");
    let node = std::process::Command::new("node").arg("--version").output();
    if !crate::support::requirement_met(node.is_ok(), "node is not on PATH") {
        return None;
    }
    available(
        "the TypeScript clients",
        &dir.join("node_modules/@modelcontextprotocol/sdk"),
        "run scripts/test-deps",
    )?;
    Some(dir)
}

pub(crate) fn python_client() -> Option<PathBuf> {
    available(
        "the Python client",
        &clients_dir().join("py/.venv/bin/python"),
        "run scripts/test-deps",
    )
}

/// The protocol version a client in `era` must end up speaking.
pub(crate) fn expected_protocol(era: &str) -> &'static str {
    match era {
        "legacy" => "2025-11-25",
        _ => "2026-07-28",
    }
}

/// `sdkbox serve --demo --http` with a bearer token, as the README's remote setup.
async fn http_server(token: &str) -> Listening {
    let mut command = crate::support::sdkbox_async();
    command
        .args(["serve", "--demo", "--http", "127.0.0.1:0"])
        .args(["--token-env", "SDKBOX_TOKEN"])
        .env("SDKBOX_TOKEN", token);
    listening(command).await
}

/// The report a client script printed last on stdout, as JSON; the script must have succeeded
/// (what it printed is shown when it did not).
pub(crate) fn client_report(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no report:\n{stdout}\n{stderr}"))
}

/// Fails, listing them, when any check of a client's report did not pass.
pub(crate) fn assert_checks_passed(report: &Value, what: &str) {
    let failed: Vec<String> = report["checks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| *v != "ok")
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    assert!(failed.is_empty(), "{what}:\n{}", failed.join("\n"));
}

/// Points a client script at sdkbox over `transport`: the binary to start for stdio, or a
/// server started here for HTTP (returned, to keep it running) and its token.
pub(crate) async fn pointed_at(command: &mut Command, transport: &str) -> Option<Listening> {
    let token = format!("conformance-{}", std::process::id());
    let server = match transport {
        "http" => Some(http_server(&token).await),
        _ => None,
    };
    command
        .env("TRANSPORT", transport)
        .env("SDKBOX_BIN", env!("CARGO_BIN_EXE_sdkbox"))
        .env(crate::support::TYPECHECK, "off")
        .kill_on_drop(true);
    if let Some(server) = &server {
        command
            .env("SDKBOX_URL", &server.url)
            .env("SDKBOX_TOKEN", &token);
    }
    server
}

/// Runs a client to its end and checks its report: every one of `expected` ran and passed,
/// in the protocol version the era asks for. Returns the client's stderr.
async fn run(mut command: Command, era: &str, transport: &str, expected: &[&str]) -> String {
    command.env("ERA", era);
    let server = pointed_at(&mut command, transport).await;
    let output: Output =
        tokio::time::timeout(std::time::Duration::from_secs(180), command.output())
            .await
            .expect("the client did not finish in 180 s")
            .unwrap();
    let report = client_report(&output);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        report["protocol"],
        expected_protocol(era),
        "{report}\n{stderr}"
    );
    let checks = report["checks"].as_object().unwrap();
    assert_checks_passed(&report, &report["client"].to_string());
    let mut ran: Vec<&str> = checks.keys().map(String::as_str).collect();
    let mut expected = expected.to_vec();
    ran.sort_unstable();
    expected.sort_unstable();
    assert_eq!(ran, expected, "{report}");
    if let Some(server) = server {
        drop(server.child);
        let server_log = server.log.await.unwrap_or_default();
        assert!(!server_log.contains("panicked"), "{server_log}");
    }
    stderr
}

async fn typescript(sdk: &str, era: &str, transport: &str) {
    typescript_script("conformance.mjs", &CHECKS, sdk, era, transport).await;
}

async fn typescript_approvals(sdk: &str, era: &str, transport: &str) {
    typescript_script("approvals.mjs", &APPROVAL_CHECKS, sdk, era, transport).await;
}

async fn typescript_script(script: &str, checks: &[&str], sdk: &str, era: &str, transport: &str) {
    let Some(dir) = node_client() else { return };
    let mut command = Command::new("node");
    command.arg(script).current_dir(&dir).env("SDK", sdk);
    run(command, era, transport, checks).await;
}

async fn python_approvals(era: &str, transport: &str) {
    let Some(python) = python_client() else {
        return;
    };
    let mut command = Command::new(python);
    command.arg(clients_dir().join("py/approvals.py"));
    run(command, era, transport, &APPROVAL_CHECKS).await;
}

async fn python(era: &str, transport: &str) {
    let Some(python) = python_client() else {
        return;
    };
    let mut command = Command::new(python);
    command.arg(clients_dir().join("py/conformance.py"));
    let stderr = run(command, era, transport, &CHECKS).await;
    assert!(
        !stderr.contains("Session termination failed"),
        "the client complained about closing the session: {stderr}"
    );
}

macro_rules! conformance {
    ($($name:ident => $body:expr;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $body.await;
            }
        )*
    };
}

conformance! {
    typescript_sdk_1_stdio_handshake => typescript("v1", "legacy", "stdio");
    typescript_sdk_1_http_handshake => typescript("v1", "legacy", "http");
    typescript_client_2_stdio_handshake => typescript("v2", "legacy", "stdio");
    typescript_client_2_http_handshake => typescript("v2", "legacy", "http");
    typescript_client_2_stdio_2026_pinned => typescript("v2", "2026-07-28", "stdio");
    typescript_client_2_http_2026_pinned => typescript("v2", "2026-07-28", "http");
    typescript_client_2_stdio_auto => typescript("v2", "auto", "stdio");
    typescript_client_2_http_auto => typescript("v2", "auto", "http");
    python_stdio_handshake => python("legacy", "stdio");
    python_http_handshake => python("legacy", "http");
    python_stdio_2026_pinned => python("2026-07-28", "stdio");
    python_http_2026_pinned => python("2026-07-28", "http");
    python_stdio_auto => python("auto", "stdio");
    python_http_auto => python("auto", "http");
    approvals_typescript_sdk_1_stdio_handshake => typescript_approvals("v1", "legacy", "stdio");
    approvals_typescript_sdk_1_http_handshake => typescript_approvals("v1", "legacy", "http");
    approvals_typescript_client_2_stdio_handshake => typescript_approvals("v2", "legacy", "stdio");
    approvals_typescript_client_2_stdio_2026 => typescript_approvals("v2", "2026-07-28", "stdio");
    approvals_typescript_client_2_http_2026 => typescript_approvals("v2", "2026-07-28", "http");
    approvals_python_stdio_handshake => python_approvals("legacy", "stdio");
    approvals_python_http_handshake => python_approvals("legacy", "http");
    approvals_python_stdio_2026 => python_approvals("2026-07-28", "stdio");
    approvals_python_http_2026 => python_approvals("2026-07-28", "http");
}

/// The MCP Inspector's strict check finds no tool-schema portability problem (it reports
/// each on stderr and exits 6 on an error-severity one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_finds_no_portability_problem() {
    let Some(dir) = node_client() else { return };
    let output = Command::new("node")
        .arg("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js")
        .args(["--cli", "--method", "tools/list", "--strict"])
        .args(["-e", "SDKBOX_TYPECHECK=off"])
        .arg(env!("CARGO_BIN_EXE_sdkbox"))
        .args(["serve", "--demo"])
        .current_dir(&dir)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        !stderr.contains("Warning") && !stderr.contains("Error"),
        "{stderr}"
    );
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        listed["tools"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );
}
