//! The MCP server over the wire: the built binary, driven by rmcp's client over stdio and
//! over streamable HTTP, and by hand for what a client library would never send.

use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::provider::Provider;
use crate::support::{INITIALIZE, RawServer};

fn sdkbox() -> Command {
    let mut command = crate::support::sdkbox_async();
    command.kill_on_drop(true);
    command
}

fn args(value: Value) -> rmcp::model::JsonObject {
    value.as_object().cloned().unwrap_or_default()
}

/// Calls `tool` and checks its structured content against the output schema the server
/// declares, as the official clients do (rmcp's client does not).
async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    arguments: Value,
) -> CallToolResult {
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let tools = client.list_all_tools().await.unwrap();
    let schema = tools
        .iter()
        .find(|t| t.name == tool)
        .and_then(|t| t.output_schema.clone())
        .unwrap_or_else(|| panic!("{tool} declares no output schema"));
    let validator = jsonschema::draft202012::new(&Value::Object((*schema).clone())).unwrap();
    let structured = result.structured_content.as_ref();
    let structured = structured.unwrap_or_else(|| panic!("{tool}: no structured content"));
    let errors: Vec<String> = validator
        .iter_errors(structured)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{tool}: {errors:?}: {structured}");
    result
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The whole loop on the demo: two tools, search finds the operation, execute calls it.
async fn exercise(client: &RunningService<RoleClient, ()>) {
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["execute", "search_docs"]);
    let size = serde_json::to_string(&tools).unwrap().len();
    assert!(size / 4 < 1_000, "tools/list is about {} tokens", size / 4);

    let found = call(client, "search_docs", json!({"query": "refund an order"})).await;
    let hits = &found.structured_content.as_ref().unwrap()["hits"];
    assert_eq!(hits[0]["id"], "api.refunds.create", "{hits}");
    assert!(
        text_of(&found).contains("POST /refunds"),
        "{}",
        text_of(&found)
    );

    let nothing = call(client, "search_docs", json!({"query": "zzqx wvvy"})).await;
    let nothing = nothing.structured_content.unwrap();
    assert!(
        nothing["hint"].is_string() && nothing["hits"] == json!([]),
        "{nothing}"
    );

    let code = "const paid = [];\n\
                for await (const o of api.paginate(api.orders.list, { status: 'paid', limit: 4 })) paid.push(o.id);\n\
                return { count: paid.length, first: paid[0] };";
    let ran = call(client, "execute", json!({"code": code})).await;
    assert_ne!(ran.is_error, Some(true), "{}", text_of(&ran));
    let outcome = ran.structured_content.unwrap();
    assert_eq!(
        outcome["result"],
        json!({"count": 10, "first": "ord_001"}),
        "{outcome}"
    );
    assert_eq!(
        outcome["http"].as_array().unwrap().len(),
        3,
        "pages of 4: {outcome}"
    );

    let failed = call(
        client,
        "execute",
        json!({"code": "const a = 1;\nreturn a.b.c;"}),
    )
    .await;
    assert_eq!(failed.is_error, Some(true));
    let text = text_of(&failed);
    assert!(
        text.contains("error (runtime)") && text.contains("2 | return a.b.c;"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_serves_the_demo_end_to_end() {
    let mut command = sdkbox();
    command.args(["serve", "--demo"]).stderr(Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    exercise(&client).await;
    let unknown = client
        .call_tool(CallToolRequestParams::new("delete_everything"))
        .await;
    let unknown = unknown.expect_err("an unknown tool is a protocol error");
    assert!(
        unknown.to_string().contains("no tool `delete_everything`"),
        "{unknown}"
    );
    // Input validation errors come back as tool errors that name the argument at fault, so
    // the model can correct itself.
    for (arguments, expected) in [
        (
            json!({"code": 42}),
            "`code`: invalid type: integer `42`, expected a string",
        ),
        (
            json!({"code": "return 1", "timeoutMs": 5}),
            "unknown field `timeoutMs`",
        ),
        (json!({}), "missing field `code`"),
    ] {
        let wrong = client
            .call_tool(CallToolRequestParams::new("execute").with_arguments(args(arguments)))
            .await
            .unwrap();
        assert_eq!(wrong.is_error, Some(true));
        assert!(text_of(&wrong).contains(expected), "{}", text_of(&wrong));
    }
    let wrong = client
        .call_tool(
            CallToolRequestParams::new("search_docs")
                .with_arguments(args(json!({"query": "orders", "limit": "five"}))),
        )
        .await
        .unwrap();
    assert!(
        text_of(&wrong).contains("`limit`: invalid type"),
        "{}",
        text_of(&wrong)
    );
    let after = call(
        &client,
        "execute",
        json!({"code": "return 'still serving'"}),
    )
    .await;
    assert_eq!(after.structured_content.unwrap()["result"], "still serving");
    client.cancel().await.unwrap();
}

/// Starts `sdkbox serve --demo --http 127.0.0.1:0 ...` and returns it with its MCP URL.
async fn http_server(extra: &[&str], env: &[(&str, &str)]) -> (tokio::process::Child, String) {
    let mut command = sdkbox();
    command
        .args(["serve", "--demo", "--http", "127.0.0.1:0"])
        .args(extra);
    for (k, v) in env {
        command.env(k, v);
    }
    listening(command).await
}

/// Spawns an HTTP server command and waits for the MCP endpoint it prints.
async fn listening(command: Command) -> (tokio::process::Child, String) {
    let server = crate::support::listening(command).await;
    (server.child, server.url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_serves_the_demo_end_to_end() {
    let (_server, url) = http_server(&[], &[]).await;
    let health = reqwest::get(url.replace("/mcp", "/healthz")).await.unwrap();
    assert_eq!(health.text().await.unwrap(), "ok");
    let client = ().serve(StreamableHttpClientTransport::from_uri(url.as_str())).await.unwrap();
    exercise(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refuses_to_serve_off_loopback_without_a_token() {
    let output = sdkbox()
        .args(["serve", "--demo", "--http", "0.0.0.0:0"])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("without a bearer token"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_stateless_mode_serves_the_tools() {
    let (_server, url) = http_server(&["--stateless"], &[]).await;
    let client = ().serve(StreamableHttpClientTransport::from_uri(url.as_str())).await.unwrap();
    let found = call(
        &client,
        "search_docs",
        json!({"query": "cancel an order", "limit": 1}),
    )
    .await;
    assert_eq!(
        found.structured_content.unwrap()["hits"][0]["id"],
        "api.orders.cancel"
    );
    let ran = call(
        &client,
        "execute",
        json!({"code": "return (await api.products.list({ active: true })).data.length"}),
    )
    .await;
    assert_eq!(ran.structured_content.unwrap()["result"], 5);
    let oversized = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(format!("{{\"pad\":\"{}\"}}", "x".repeat(3 * 1024 * 1024)))
        .send()
        .await
        .unwrap();
    assert_eq!(oversized.status(), 413);
    let again = call(&client, "search_docs", json!({"query": "refund"})).await;
    assert!(
        again.structured_content.is_some(),
        "the server stopped serving after an oversized request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_client_may_use_its_own_provider_key() {
    let provider = Provider::start().await;
    let (_dir, spec) = echo_spec();
    let mut command = sdkbox();
    command
        .args([
            "serve",
            "--spec",
            spec.to_str().unwrap(),
            "--base-url",
            provider.base.as_str(),
        ])
        .args([
            "--secret-env",
            "SDKBOX_SERVER_KEY",
            "--session-key-header",
            "X-Provider-Key",
        ])
        .args(["--http", "127.0.0.1:0"])
        .env("SDKBOX_SERVER_KEY", "server-key-1234");
    let (_server, url) = listening(command).await;
    let code = json!({"code": "return (await api.request('GET', '/echo')).headers.authorization"});
    let server_key = ().serve(StreamableHttpClientTransport::from_uri(url.as_str())).await.unwrap();
    call(&server_key, "execute", code.clone()).await;
    let mut config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            url.as_str(),
        );
    config.custom_headers.insert(
        "x-provider-key".parse().unwrap(),
        "client-key-5678".parse().unwrap(),
    );
    let own_key = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let seen_by_script = call(&own_key, "execute", code).await;
    assert_eq!(
        seen_by_script.structured_content.unwrap()["result"],
        "Bearer [redacted]"
    );
    let seen = provider.seen.authorization.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            Some("Bearer server-key-1234".to_owned()),
            Some("Bearer client-key-5678".to_owned())
        ]
    );
}

/// A spec of one operation, `api.echo.get()`: GET /echo on the test provider.
fn echo_spec() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("echo.yaml");
    let text = "openapi: 3.0.0\ninfo: {title: Echo, version: '1'}\npaths:\n  /echo:\n    get:\n      \
                operationId: echo/get\n      responses: {'200': {description: ok}}\n";
    std::fs::write(&spec, text).unwrap();
    (dir, spec)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_checks_tokens_and_origins() {
    let (_server, url) = http_server(
        &["--token-env", "SDKBOX_TEST_TOKEN"],
        &[("SDKBOX_TEST_TOKEN", "s3cret-token")],
    )
    .await;
    let http = reqwest::Client::new();
    let post = |token: Option<&str>, origin: Option<&str>| {
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INITIALIZE);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    assert_eq!(post(None, None).await.unwrap().status(), 401);
    assert_eq!(post(Some("wrong"), None).await.unwrap().status(), 401);
    assert_eq!(
        post(Some("s3cret-token"), Some("https://evil.example"))
            .await
            .unwrap()
            .status(),
        403
    );
    let ok = post(Some("s3cret-token"), Some("http://localhost:3000"))
        .await
        .unwrap();
    assert_eq!(ok.status(), 200, "{:?}", ok.text().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_get_errors_and_the_server_keeps_serving() {
    let mut server = RawServer::start(&["serve", "--demo"]).await;
    server.send("{ this is not json").await;
    server
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"no/such/method"}"#)
        .await;
    let unknown = server.response(2).await;
    assert!(unknown["error"]["code"].is_i64(), "{unknown}");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "execute", "arguments": {"code": "return 40 + 2"}}});
    server.send(&call.to_string()).await;
    let answer = server.response(3).await;
    assert_eq!(
        answer["result"]["structuredContent"]["result"], 42,
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_execution_stops_calling_the_provider() {
    let provider = Provider::start().await;
    let (_dir, spec) = echo_spec();
    let mut server = RawServer::start(&[
        "serve",
        "--spec",
        spec.to_str().unwrap(),
        "--base-url",
        provider.base.as_str(),
    ])
    .await;
    let code = "for (;;) { await api.echo.get(); await new Promise((r) => setTimeout(r, 20)); }";
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "execute", "arguments": {"code": code}}});
    server.send(&call.to_string()).await;
    // Wait until the script is calling the provider (not a fixed time: a loaded machine is slow).
    let started = tokio::time::Instant::now();
    while provider.seen.requests.load(Ordering::SeqCst) <= 3
        && started.elapsed() < Duration::from_secs(20)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = provider.seen.requests.load(Ordering::SeqCst);
    assert!(before > 3, "the script did not run: {before} requests");
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
    server.send(&cancel.to_string()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = provider.seen.requests.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(
        provider.seen.requests.load(Ordering::SeqCst),
        settled,
        "requests went on after the cancellation"
    );
    let ping = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "execute", "arguments": {"code": "return 'alive'"}}});
    server.send(&ping.to_string()).await;
    assert_eq!(
        server.response(8).await["result"]["structuredContent"]["result"],
        "alive"
    );
}

/// Standard input and output that are neither pipes nor sockets (files here, a terminal
/// alike) are served through tokio's stdio: the same answers as over pipes.
#[test]
fn stdio_from_and_to_files_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "execute", "arguments": {"code": "return 40 + 2"}}});
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    std::fs::write(&input, format!("{INITIALIZE}\n{initialized}\n{call}\n")).unwrap();
    let mut child = crate::support::sdkbox()
        .args(["serve", "--demo"])
        .stdin(std::fs::File::open(&input).unwrap())
        .stdout(std::fs::File::create(&output).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A hang guard, not a timing: the server ends at the end of its input.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the server did not end at the end of its input");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let written = std::fs::read_to_string(&output).unwrap();
    let answers: Vec<Value> = written
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let answer = answers.iter().find(|a| a["id"] == 2).expect(&written);
    assert_eq!(
        answer["result"]["structuredContent"]["result"], 42,
        "{answer}"
    );
}

/// A pipe on standard input is read without blocking while the server runs, and handed back
/// blocking when it ends: its mode is shared with whoever else holds the pipe.
#[test]
fn stdin_is_handed_back_blocking() {
    use rustix::fs::{OFlags, fcntl_getfl};
    use std::io::{BufRead, Write};
    let (reader, mut writer) = std::io::pipe().unwrap();
    let ours = reader.try_clone().unwrap();
    let mut child = crate::support::sdkbox()
        .args(["serve", "--demo"])
        .stdin(reader)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(!fcntl_getfl(&ours).unwrap().contains(OFlags::NONBLOCK));
    writeln!(writer, "{INITIALIZE}").unwrap();
    let mut answer = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut answer)
        .unwrap();
    assert!(answer.contains("\"id\":1"), "{answer}");
    assert!(fcntl_getfl(&ours).unwrap().contains(OFlags::NONBLOCK));
    drop(writer);
    assert!(child.wait().unwrap().success());
    assert!(!fcntl_getfl(&ours).unwrap().contains(OFlags::NONBLOCK));
}
