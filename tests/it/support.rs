//! Helpers shared by the integration tests.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use sdkbox::egress::{AuthScheme, Credential, Egress, EgressConfig, EgressLimits, Secret};
use sdkbox::sandbox::{ExecLimits, InProcessSandbox, Outcome};
use tokio_util::sync::CancellationToken;
use url::Url;

/// The secret planted in tests; it must never come back in any output.
pub const CANARY: &str = "sk_test_CANARY_5f3a9c";

/// A sandbox for `base`, with the canary as a bearer token unless told otherwise.
pub fn sandbox(base: &Url, scheme: Option<AuthScheme>, limits: EgressLimits) -> InProcessSandbox {
    let credential = scheme.map(|scheme| Credential {
        scheme,
        secret: Secret::new(CANARY.to_owned()),
    });
    let egress = Egress::new(EgressConfig {
        base_url: base.clone(),
        extra_origins: Vec::new(),
        download_origins: Vec::new(),
        credential,
        limits,
    })
    .unwrap();
    InProcessSandbox::new(egress, None)
}

/// A sandbox for code that makes no network calls.
pub fn offline() -> InProcessSandbox {
    let base = Url::parse("http://127.0.0.1:9/").unwrap();
    sandbox(&base, Some(AuthScheme::Bearer), EgressLimits::default())
}

/// Limits with a short timeout, for scripts that are expected to hit it.
pub fn quick(timeout_ms: u64) -> ExecLimits {
    ExecLimits {
        timeout: Duration::from_millis(timeout_ms),
        ..ExecLimits::default()
    }
}

/// Runs `code` with `limits` and no cancellation.
pub async fn run(sandbox: &InProcessSandbox, code: &str, limits: &ExecLimits) -> Outcome {
    sandbox
        .execute(code, limits, CancellationToken::new())
        .await
}

/// The outcome as JSON text, for "never contains" checks.
pub fn text(outcome: &Outcome) -> String {
    serde_json::to_string(outcome).unwrap()
}

/// A token that is cancelled after `millis`, as a client cancelling mid-call would.
pub fn cancel_after(millis: u64) -> CancellationToken {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(millis)).await;
        trigger.cancel();
    });
    cancel
}

/// The built `sdkbox` binary, to run as a user does.
pub fn sdkbox() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sdkbox"));
    // Lexical search, as the tests pin it, and no model download (tests/it/semantic.rs
    // turns the model on where it is the subject).
    command.env("SDKBOX_NO_MODEL", "1").env(TYPECHECK, "off");
    command
}

/// The environment variable that turns the type check off. Every server a test starts has
/// it off (no compiler download, no check the test did not ask for) unless the type check is
/// the subject: tests/it/typecheck.rs passes `--typecheck` and `--tsc`, which win over it.
pub const TYPECHECK: &str = "SDKBOX_TYPECHECK";

/// The built `sdkbox` binary as a tokio command, the type check off (see [`TYPECHECK`]).
pub fn sdkbox_async() -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_sdkbox"));
    command.env(TYPECHECK, "off");
    command
}

/// What a finished command printed on stdout, as JSON; the command must have succeeded
/// (its output is shown when it did not).
pub fn json_stdout(output: &std::process::Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Asserts `outcome` ended before `ms`: a check that it did not wait for something (a
/// deadline, a slow provider), with bounds far from both ends so a loaded machine passes.
pub fn assert_ended_before(outcome: &Outcome, ms: u64, waited_for: &str) {
    assert!(
        outcome.duration_ms < ms,
        "waited for {waited_for}: took {} ms: {outcome:?}",
        outcome.duration_ms
    );
}

/// An `sdkbox serve --http` process, listening.
pub struct Listening {
    /// The process; killed when dropped.
    pub child: tokio::process::Child,
    /// Its MCP endpoint.
    pub url: String,
    /// What it writes to stderr after it listened, until it ends.
    pub log: tokio::task::JoinHandle<String>,
}

/// Spawns an HTTP server command and waits for the MCP endpoint it prints on stderr.
pub async fn listening(mut command: tokio::process::Command) -> Listening {
    let mut child = command
        .env("SDKBOX_NO_MODEL", "1")
        .env(TYPECHECK, "off")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("sdkbox: MCP endpoint ") {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        panic!("the server ended before it listened");
    })
    .await
    .unwrap();
    let log = tokio::spawn(async move {
        let mut all = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    Listening { child, url, log }
}

/// The `initialize` request a handshake-era client sends first.
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// The server on stdio, spoken to by hand one JSON-RPC line at a time, for what a client
/// library would never send.
pub struct RawServer {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl RawServer {
    /// Starts `sdkbox` with `args` and completes the MCP handshake.
    pub async fn start(args: &[&str]) -> Self {
        Self::start_with(args, &[]).await
    }

    /// Starts `sdkbox` with `args` and environment `env`, and completes the MCP handshake.
    pub async fn start_with(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = sdkbox_async();
        command.kill_on_drop(true).env("SDKBOX_NO_MODEL", "1");
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = Self {
            _child: child,
            stdin,
            lines,
        };
        server.send(INITIALIZE).await;
        let initialized = server.response(1).await;
        assert_eq!(
            initialized["result"]["serverInfo"]["name"], "sdkbox",
            "{initialized}"
        );
        server
            .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        server
    }

    /// Sends one line.
    pub async fn send(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    /// The response to request `id`, skipping anything else the server says.
    pub async fn response(&mut self, id: i64) -> Value {
        self.response_line(id).await.1
    }

    /// The response to request `id` as the line the server wrote, and parsed.
    pub async fn response_line(&mut self, id: i64) -> (String, Value) {
        tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .unwrap()
                    .expect("the server closed stdout");
                let message: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout is not JSON-RPC ({e}): {line}"));
                if message["id"] == id {
                    return (line, message);
                }
            }
        })
        .await
        .unwrap()
    }
}

/// Serves `app` on a free loopback port until the test ends; returns its `/v1` base URL.
pub async fn serve_on_loopback(app: axum::Router) -> Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Url::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap()
}

/// A test provider in Node (`server.mjs` in `folder`, which ends when its stdin closes),
/// started, and the first line it printed on stdout (where it listens); `None` (a skip, which
/// CI refuses) when `installed` is not there.
pub async fn node_provider(
    folder: &std::path::Path,
    installed: &str,
) -> Option<(tokio::process::Child, String)> {
    node_provider_with(folder, installed, &[]).await
}

/// [`node_provider`] with `env` set for it.
pub async fn node_provider_with(
    folder: &std::path::Path,
    installed: &str,
    env: &[(&str, &str)],
) -> Option<(tokio::process::Child, String)> {
    let present = folder.join("node_modules").join(installed).exists();
    let reason = format!("{} is not installed (scripts/test-deps)", folder.display());
    if !requirement_met(present, &reason) {
        return None;
    }
    let mut child = tokio::process::Command::new("node")
        .arg("server.mjs")
        .envs(env.iter().copied())
        .current_dir(folder)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let line = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::io::BufReader::new(stdout).lines().next_line(),
    )
    .await
    .expect("the provider did not start in 30 s")
    .unwrap()
    .expect("the provider ended before it listened");
    Some((child, line))
}

/// Whether a test's requirement is met; when it is not, the test is skipped with `reason`
/// printed, except in CI, which has everything and where a skip would hide a gap.
pub fn requirement_met(met: bool, reason: &str) -> bool {
    if !met {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run this test: {reason}"
        );
        eprintln!("skipped: {reason}");
    }
    met
}

/// A real spec in ../shared/specs, or `None` (a skip, which CI refuses) when it is absent.
pub fn shared_spec(file: &str) -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/specs")
        .join(file);
    requirement_met(path.exists(), &format!("{} is absent", path.display())).then_some(path)
}

/// A Redis server from Debian's package on a free loopback port, nothing saved.
pub struct Redis {
    _child: tokio::process::Child,
    /// Its URL, database 0.
    pub url: String,
    /// Its port, for `redis-cli`.
    pub port: u16,
}

impl Redis {
    /// Starts one; `None` (a skip, which CI refuses) without redis-server.
    pub async fn start() -> Option<Self> {
        Self::start_with(&[]).await
    }

    /// [`Redis::start`] with more of its settings (`["--maxmemory-policy", "..."]`).
    pub async fn start_with(settings: &[&str]) -> Option<Self> {
        let binary = std::path::Path::new("/usr/bin/redis-server");
        if !requirement_met(
            binary.exists(),
            "redis-server is not installed (scripts/test-deps)",
        ) {
            return None;
        }
        let port = crate::signin::free_port();
        let child = tokio::process::Command::new(binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(settings)
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(Self {
            _child: child,
            url: format!("redis://127.0.0.1:{port}/0"),
            port,
        })
    }

    /// Every key and value, as `redis-cli` prints them.
    pub async fn dump(&self) -> String {
        let port = self.port.to_string();
        let keys = tokio::process::Command::new("redis-cli")
            .args(["-p", &port, "--scan"])
            .output()
            .await
            .unwrap();
        let mut out = String::from_utf8_lossy(&keys.stdout).into_owned();
        for key in String::from_utf8_lossy(&keys.stdout).lines() {
            let value = tokio::process::Command::new("redis-cli")
                .args(["-p", &port, "GET", key])
                .output()
                .await
                .unwrap();
            out.push_str(&String::from_utf8_lossy(&value.stdout));
        }
        out
    }
}
