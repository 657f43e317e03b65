//! Replicas that keep every promise, run for real: three `sdkbox serve` processes sharing a
//! real Redis (`--state`) and one approval key, behind haproxy balancing round robin with no
//! affinity, in front of one shared provider that records every write it receives (the demo
//! API, behind a proxy that can hold a write's response). The official clients approve writes
//! through them in both protocol eras; a replica is killed while a write is in flight; the
//! deployment is restarted one replica at a time with calls in flight. `REPLICA_LOG` sets the
//! replicas' `RUST_LOG` (their logs are printed when a test fails).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::process::Command;

use crate::clients::{client_report, node_client, python_client};
use crate::support::{Listening, Redis, listening, requirement_met};

/// The bearer token clients send, and the key every replica shares.
const TOKEN: &str = "replicas-token";
const APPROVAL_KEY: &str = "replicas-approval-key-of-at-least-32-bytes";

/// How long the provider holds the response of a write whose body says `slow-`.
const HELD: Duration = Duration::from_secs(4);

/// The shared provider: the demo API behind a proxy that records every write it forwards.
#[derive(Clone)]
pub struct Provider {
    /// Its origin (the API is under `/v1`).
    pub base: String,
    demo: String,
    writes: Arc<Mutex<Vec<String>>>,
    client: reqwest::Client,
}

impl Provider {
    async fn start() -> (Self, tokio_util::sync::DropGuard) {
        let stop = tokio_util::sync::CancellationToken::new();
        let demo = sdkbox::demo::start(stop.clone()).await.unwrap();
        let mut provider = Self {
            base: String::new(),
            demo: format!("http://{demo}"),
            writes: Arc::default(),
            client: reqwest::Client::new(),
        };
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(provider.clone());
        let base = crate::support::serve_on_loopback(app).await;
        provider.base = base.as_str().trim_end_matches("/v1").to_owned();
        (provider, stop.drop_guard())
    }

    /// How many writes the provider received whose body holds `text`.
    pub fn writes_with(&self, text: &str) -> usize {
        self.writes
            .lock()
            .unwrap()
            .iter()
            .filter(|body| body.contains(text))
            .count()
    }
}

/// Forwards a request to the demo, recording writes; holds the response of a `slow-` one.
/// `GET /test/writes?text=` counts the writes received whose body holds the text.
async fn forward(State(provider): State<Provider>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if parts.uri.path() == "/test/writes" {
        let query = parts.uri.query().unwrap_or_default();
        let text: String = url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "text")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        return provider.writes_with(&text).to_string().into_response();
    }
    let body: Bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let text = String::from_utf8_lossy(&body).into_owned();
    let write = parts.method != axum::http::Method::GET;
    if write {
        provider.writes.lock().unwrap().push(text.clone());
    }
    let url = format!("{}{}", provider.demo, parts.uri);
    let mut sent = provider
        .client
        .request(parts.method.clone(), url)
        .body(body);
    for (name, value) in &parts.headers {
        if name != "host" {
            sent = sent.header(name, value);
        }
    }
    let answer = sent.send().await.unwrap();
    let status = answer.status();
    let content_type = answer.headers().get("content-type").cloned();
    let bytes = answer.bytes().await.unwrap();
    if write && text.contains("slow-") {
        tokio::time::sleep(HELD).await;
    }
    let mut response = (status, bytes).into_response();
    if let Some(content_type) = content_type {
        response.headers_mut().insert("content-type", content_type);
    }
    response
}

/// One `sdkbox serve` replica.
pub struct Replica {
    pub server: Listening,
    pub audit: PathBuf,
}

/// Redis, the provider, replicas and haproxy in front of them.
pub struct Cluster {
    _redis: Redis,
    pub provider: Provider,
    _provider_stop: tokio_util::sync::DropGuard,
    pub replicas: Vec<Replica>,
    /// The balancer's MCP URL.
    pub url: String,
    _haproxy: tokio::process::Child,
    dir: tempfile::TempDir,
    redis_url: String,
}

impl Cluster {
    /// `count` replicas behind haproxy; `None` (a skip, which CI refuses) without Redis,
    /// haproxy or the clients.
    pub async fn start(count: usize) -> Option<Self> {
        let haproxy = std::process::Command::new("haproxy").arg("-v").output();
        if !requirement_met(
            haproxy.is_ok(),
            "haproxy is not on PATH (run scripts/test-deps)",
        ) {
            return None;
        }
        let redis = Redis::start().await?;
        let (provider, provider_stop) = Provider::start().await;
        let dir = tempfile::tempdir().unwrap();
        let mut cluster = Self {
            redis_url: redis.url.clone(),
            _redis: redis,
            provider,
            _provider_stop: provider_stop,
            replicas: Vec::new(),
            url: String::new(),
            _haproxy: tokio::process::Command::new("true").spawn().unwrap(),
            dir,
        };
        for n in 0..count {
            let replica = cluster.replica(n).await;
            cluster.replicas.push(replica);
        }
        let (haproxy, url) = cluster.balancer().await;
        cluster._haproxy = haproxy;
        cluster.url = url;
        Some(cluster)
    }

    /// Starts replica number `n` (its audit file is its own).
    pub async fn replica(&self, n: usize) -> Replica {
        let audit = self.dir.path().join(format!("audit-{n}.jsonl"));
        let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs-index/demo/openapi.yaml");
        let mut command = Command::new(env!("CARGO_BIN_EXE_sdkbox"));
        command
            .args(["serve", "--spec"])
            .arg(&spec)
            .args(["--base-url", &format!("{}/v1", self.provider.base)])
            .args(["--secret-env", "DEMO_SECRET", "--http", "127.0.0.1:0"])
            .args(["--token-env", "SDKBOX_TOKEN", "--state", &self.redis_url])
            .args(["--approval-key-env", "SDKBOX_APPROVAL_KEY"])
            .args(["--approval-page", "off", "--audit-log"])
            .arg(&audit)
            .env("DEMO_SECRET", sdkbox::demo::DEMO_KEY)
            .env("SDKBOX_TOKEN", TOKEN)
            .env("SDKBOX_APPROVAL_KEY", APPROVAL_KEY)
            .env(
                "RUST_LOG",
                std::env::var("REPLICA_LOG").unwrap_or("warn".into()),
            )
            .stdout(Stdio::null());
        Replica {
            server: listening(command).await,
            audit,
        }
    }

    /// haproxy, round robin over the replicas, no affinity; a replica found down is skipped.
    async fn balancer(&self) -> (tokio::process::Child, String) {
        let port = crate::signin::free_port();
        let servers: String = self
            .replicas
            .iter()
            .enumerate()
            .map(|(n, r)| {
                let address = r.server.url.trim_start_matches("http://");
                let address = address.trim_end_matches("/mcp");
                format!("  server s{n} {address}\n")
            })
            .collect();
        let config = format!(
            "global\n  maxconn 1000\ndefaults\n  mode http\n  timeout connect 1s\n  \
             timeout client 120s\n  timeout server 120s\n  retries 3\n  option redispatch 1\n  \
             option httpchk GET /healthz\n  http-reuse never\n  \
             default-server check inter 250ms fall 1 rise 2\nfrontend mcp\n  \
             bind 127.0.0.1:{port}\n  default_backend sdkbox\nbackend sdkbox\n  \
             balance roundrobin\n{servers}"
        );
        let file = self.dir.path().join("haproxy.cfg");
        std::fs::write(&file, config).unwrap();
        let child = tokio::process::Command::new("haproxy")
            .args(["-db", "-f"])
            .arg(&file)
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        for _ in 0..100 {
            let up = reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await;
            if up.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (child, format!("http://127.0.0.1:{port}/mcp"))
    }

    /// What every replica wrote to stderr, each stopped.
    pub async fn logs(self) -> String {
        let mut all = String::new();
        for (n, replica) in self.replicas.into_iter().enumerate() {
            let mut server = replica.server;
            let _ = server.child.start_kill();
            let log = server.log.await.unwrap_or_default();
            all.push_str(&format!("--- replica {n}\n{log}"));
        }
        all
    }

    /// Lines of replica `n`'s audit file.
    pub fn audit(&self, n: usize) -> Vec<Value> {
        std::fs::read_to_string(&self.replicas[n].audit)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// A client script's command, pointed at `url` with the cluster's token.
fn client(program: &Path, script: &Path, url: &str, era: &str) -> Command {
    let mut command = Command::new(program);
    command
        .arg(script)
        .env("ERA", era)
        .env("TRANSPORT", "http")
        .env("SDKBOX_URL", url)
        .env("SDKBOX_TOKEN", TOKEN)
        .kill_on_drop(true);
    command
}

/// What a client script reported: its checks that failed, by name, or why it reported none.
async fn failures_of(mut command: Command, what: &str) -> Vec<String> {
    let Ok(output) = tokio::time::timeout(Duration::from_secs(240), command.output()).await else {
        return vec![format!("{what}: did not finish in 240 s")];
    };
    let output = output.unwrap();
    let report = std::panic::catch_unwind(|| client_report(&output));
    let Ok(report) = report else {
        return vec![format!(
            "{what}: no report\n{}",
            String::from_utf8_lossy(&output.stderr)
        )];
    };
    eprintln!("{what}: {report}");
    report["checks"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| *v != "ok")
        .map(|(k, v)| format!("{what}: {k}: {v}"))
        .collect()
}

/// The official clients' approval checks (asks equal writes, each write sent once, denials
/// and cancels send nothing, a dry run sends nothing) through three replicas round robin:
/// TypeScript 1.x and Python in the handshake era (elicitation inside the call, its answer
/// reaching whichever replica), TypeScript 2.x and Python in the 2026-07-28 era (the retry
/// on whichever replica). All at once; every replica takes part.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approvals_through_replicas_round_robin_ask_once_per_write_and_send_each_once() {
    let (Some(ts), Some(python)) = (node_client(), python_client()) else {
        return;
    };
    let Some(cluster) = Cluster::start(3).await else {
        return;
    };
    let node = Path::new("node");
    let approvals_ts = ts.join("approvals.mjs");
    let approvals_py = crate::clients::clients_dir().join("py/approvals.py");
    let mut ts1 = client(node, &approvals_ts, &cluster.url, "legacy");
    ts1.env("SDK", "v1").current_dir(&ts);
    let mut ts2 = client(node, &approvals_ts, &cluster.url, "2026-07-28");
    ts2.env("SDK", "v2").current_dir(&ts);
    let py1 = client(&python, &approvals_py, &cluster.url, "legacy");
    let py2 = client(&python, &approvals_py, &cluster.url, "2026-07-28");
    let (a, b, c, d) = tokio::join!(
        failures_of(ts1, "TypeScript 1.x, handshake era"),
        failures_of(ts2, "TypeScript 2.x, 2026-07-28"),
        failures_of(py1, "Python, handshake era"),
        failures_of(py2, "Python, 2026-07-28"),
    );
    let failed: Vec<String> = [a, b, c, d].concat();
    let spread = (0..3).all(|n| !cluster.audit(n).is_empty());
    if !failed.is_empty() {
        eprintln!("{}", cluster.logs().await);
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(
        spread,
        "a replica decided no write: the balancer did not spread the calls"
    );
}

/// A replica killed (SIGKILL) while a write it sent is in flight, in both eras: the official
/// client approved it on that replica; the provider received it and holds its response. The
/// client's call fails; its re-run of the same code through the balancer lands on another
/// replica, which continues the run the dead one left: the write is not sent again, the re-run
/// says it may have been sent, and the user is not asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_mid_write_sends_nothing_twice() {
    let Some(ts) = node_client() else {
        return;
    };
    let Some(cluster) = Cluster::start(3).await else {
        return;
    };
    let mut failed = Vec::new();
    for (victim, sdk, era) in [(0, "v1", "legacy"), (1, "v2", "2026-07-28")] {
        let replica = &cluster.replicas[victim].server;
        let mut command = Command::new("node");
        command
            .arg(ts.join("replicas.mjs"))
            .current_dir(&ts)
            .env("SDK", sdk)
            .env("ERA", era)
            .env("VICTIM_URL", &replica.url)
            .env("VICTIM_PID", replica.child.id().unwrap().to_string())
            .env("BALANCED_URL", &cluster.url)
            .env("SDKBOX_TOKEN", TOKEN)
            .env("PROVIDER", &cluster.provider.base)
            .kill_on_drop(true);
        let what = format!("{sdk} {era}");
        failed.extend(failures_of(command, &what).await);
    }
    if !failed.is_empty() {
        eprintln!("{}", cluster.logs().await);
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
