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

/// How long the provider holds the response of a write whose body says `slow-`, and of one
/// that says `stuck-` (longer than a shutdown grace the test gives a replica).
const HELD: Duration = Duration::from_secs(4);
const STUCK: Duration = Duration::from_secs(20);

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
    // A read whose query says `slow-` is recorded too (by its URL), and held.
    let slow_read = !write && parts.uri.to_string().contains("slow-");
    if slow_read {
        provider.writes.lock().unwrap().push(parts.uri.to_string());
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
    if (write && text.contains("slow-")) || slow_read {
        tokio::time::sleep(HELD).await;
    }
    if write && text.contains("stuck-") {
        tokio::time::sleep(STUCK).await;
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
    /// Where its standard output goes: its audit lines (`--audit-log -`, as the manifests).
    pub audit: PathBuf,
}

impl Replica {
    /// The `host:port` it listens on.
    pub fn address(&self) -> String {
        let url = self.server.url.trim_start_matches("http://");
        url.trim_end_matches("/mcp").to_owned()
    }
}

/// What the shipped Kubernetes manifests run: the server's arguments (but those naming the
/// cluster's own files, addresses and hosts), its literal environment, and the readiness
/// probe's path. The replicas here run with exactly these.
pub struct Manifest {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub readiness: String,
}

impl Manifest {
    pub fn read() -> Self {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/deployment.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let deployment: Value = serde_yaml_ng::from_str(&text).unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let given: Vec<String> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        // The cluster's own: the provider file, the address, the Host, the public URL.
        let own = ["--config", "--http", "--allowed-host", "--approval-page"];
        let mut args = Vec::new();
        let mut given = given.into_iter().skip(1); // `serve`
        while let Some(arg) = given.next() {
            if own.contains(&arg.as_str()) {
                given.next();
            } else {
                args.push(arg);
            }
        }
        let env = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("SDKBOX_")))
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?.to_owned(),
                    e["value"].as_str()?.to_owned(),
                ))
            })
            .filter(|(name, _)| name != "SDKBOX_CACHE_DIR")
            .collect();
        let readiness = container["readinessProbe"]["httpGet"]["path"]
            .as_str()
            .unwrap()
            .to_owned();
        Self {
            args,
            env,
            readiness,
        }
    }
}

/// Redis, the provider, replicas and haproxy in front of them.
pub struct Cluster {
    _redis: Redis,
    pub provider: Provider,
    _provider_stop: tokio_util::sync::DropGuard,
    pub replicas: Vec<Replica>,
    /// The balancer's MCP URL.
    pub url: String,
    /// The balancer's port: the public URL humans and clients reach the deployment by.
    port: u16,
    _haproxy: Option<tokio::process::Child>,
    dir: tempfile::TempDir,
    redis_url: String,
    manifest: Manifest,
}

impl Cluster {
    /// `count` replicas behind haproxy, run as the manifests run them; `None` (a skip, which
    /// CI refuses) without Redis or haproxy.
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
        let port = crate::signin::free_port();
        let mut cluster = Self {
            redis_url: redis.url.clone(),
            _redis: redis,
            provider,
            _provider_stop: provider_stop,
            replicas: Vec::new(),
            url: format!("http://127.0.0.1:{port}/mcp"),
            port,
            _haproxy: None,
            dir: tempfile::tempdir().unwrap(),
            manifest: Manifest::read(),
        };
        for n in 0..count {
            let replica = cluster.replica(n, "127.0.0.1:0").await;
            cluster.replicas.push(replica);
        }
        cluster._haproxy = Some(cluster.balancer().await);
        Some(cluster)
    }

    /// Starts replica number `n` on `address`, with the manifests' arguments; its audit lines
    /// (on its standard output) go to a file of its own.
    pub async fn replica(&self, n: usize, address: &str) -> Replica {
        self.replica_with(n, address, &[]).await
    }

    /// [`Cluster::replica`] with some of the manifests' flags given other values.
    pub async fn replica_with(&self, n: usize, address: &str, instead: &[(&str, &str)]) -> Replica {
        let mut args = Vec::new();
        let mut given = self.manifest.args.iter();
        while let Some(arg) = given.next() {
            match instead.iter().find(|(flag, _)| flag == arg) {
                Some((flag, value)) => {
                    given.next();
                    args.extend([flag.to_string(), value.to_string()]);
                }
                None => args.push(arg.clone()),
            }
        }
        let audit = self.dir.path().join(format!("audit-{n}.jsonl"));
        let stdout = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&audit)
            .unwrap();
        let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs-index/demo/openapi.yaml");
        let mut command = Command::new(env!("CARGO_BIN_EXE_sdkbox"));
        command
            .args(["serve", "--spec"])
            .arg(&spec)
            .args(["--base-url", &format!("{}/v1", self.provider.base)])
            .args(["--secret-env", "DEMO_SECRET", "--http", address])
            .args([
                "--approval-page",
                &format!("http://127.0.0.1:{}", self.port),
            ])
            .args(&args)
            .envs(self.manifest.env.iter().map(|(k, v)| (k, v)))
            .env("SDKBOX_STATE", &self.redis_url)
            .env("DEMO_SECRET", sdkbox::demo::DEMO_KEY)
            .env("SDKBOX_TOKEN", TOKEN)
            .env("SDKBOX_APPROVAL_KEY", APPROVAL_KEY)
            .env(
                "RUST_LOG",
                std::env::var("REPLICA_LOG").unwrap_or("warn".into()),
            )
            .stdout(Stdio::from(stdout));
        Replica {
            server: listening(command).await,
            audit,
        }
    }

    /// haproxy, round robin over the replicas, no affinity; a replica not ready (the
    /// manifests' readiness probe) gets no requests.
    async fn balancer(&self) -> tokio::process::Child {
        let (port, readiness) = (self.port, &self.manifest.readiness);
        let servers: String = self
            .replicas
            .iter()
            .enumerate()
            .map(|(n, r)| format!("  server s{n} {}\n", r.address()))
            .collect();
        let config = format!(
            "global\n  maxconn 1000\ndefaults\n  mode http\n  timeout connect 1s\n  \
             timeout client 120s\n  timeout server 120s\n  retries 3\n  option redispatch 1\n  \
             option httpchk GET {readiness}\n  http-reuse never\n  \
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
        child
    }

    /// A client script (in `dir`) that takes on replica `victim` directly and then goes
    /// through the balancer, watching what the provider receives.
    pub fn against(&self, dir: &Path, script: &str, victim: &Listening) -> Command {
        let mut command = Command::new("node");
        command
            .arg(dir.join(script))
            .current_dir(dir)
            .env("VICTIM_URL", &victim.url)
            .env("VICTIM_PID", victim.child.id().unwrap().to_string())
            .env("BALANCED_URL", &self.url)
            .env("SDKBOX_TOKEN", TOKEN)
            .env("PROVIDER", &self.provider.base)
            .kill_on_drop(true);
        command
    }

    /// The sum over the replicas of a metric's sample (`name{labels}` as rendered).
    pub async fn metric(&self, sample: &str) -> f64 {
        let mut sum = 0.0;
        for replica in &self.replicas {
            let url = replica.server.url.replace("/mcp", "/metrics");
            let text = reqwest::get(url).await.unwrap().text().await.unwrap();
            sum += text
                .lines()
                .filter_map(|line| line.strip_prefix(sample))
                .filter_map(|value| value.trim().parse::<f64>().ok())
                .sum::<f64>();
        }
        sum
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
    let decided: Vec<usize> = (0..3).map(|n| cluster.audit(n).len()).collect();
    let spread = decided.iter().all(|lines| *lines > 0);
    // Elicitation answers reached other replicas than the ones asking, and were forwarded.
    let forwarded = cluster.metric("sdkbox_forwarded_total{way=\"out\"}").await;
    eprintln!(
        "audit lines per replica {decided:?}; answers forwarded to another replica: {forwarded}"
    );
    if !failed.is_empty() {
        eprintln!("{}", cluster.logs().await);
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(
        spread,
        "a replica decided no write: the balancer did not spread the calls"
    );
    assert!(
        forwarded > 0.0,
        "no answer crossed replicas: nothing was shown"
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
        let mut command = cluster.against(&ts, "replicas.mjs", replica);
        command.env("SDK", sdk).env("ERA", era);
        let what = format!("{sdk} {era}");
        failed.extend(failures_of(command, &what).await);
    }
    if !failed.is_empty() {
        eprintln!("{}", cluster.logs().await);
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A rolling restart with calls in flight, as Kubernetes does it: each replica in turn gets
/// SIGTERM (its readiness fails, the balancer stops sending it calls, its calls in flight,
/// writes waiting for their response included, run to their end), exits, and a new process
/// takes its place. Official clients of both eras create customers all along, each write
/// approved by their user: no call fails, every write is sent exactly once, and the user is
/// asked once per write.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_with_calls_in_flight_fails_and_duplicates_nothing() {
    let Some(ts) = node_client() else {
        return;
    };
    let Some(mut cluster) = Cluster::start(3).await else {
        return;
    };
    let stop = cluster.dir.path().join("stop");
    let mut clients = Command::new("node");
    clients
        .arg(ts.join("rolling.mjs"))
        .current_dir(&ts)
        .env("SDKBOX_URL", &cluster.url)
        .env("SDKBOX_TOKEN", TOKEN)
        .env("CONCURRENCY", "4")
        .env("STOP_FILE", &stop)
        .kill_on_drop(true);
    let running = tokio::spawn(async move { clients.output().await.unwrap() });
    tokio::time::sleep(Duration::from_secs(2)).await;
    for n in 0..cluster.replicas.len() {
        let address = cluster.replicas[n].address();
        let old = &mut cluster.replicas[n].server.child;
        let pid = old.id().unwrap();
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let exited = tokio::time::timeout(Duration::from_secs(40), old.wait())
            .await
            .expect("a draining replica did not exit within its grace")
            .unwrap();
        assert!(exited.success(), "replica {n} exited with {exited}");
        let fresh = cluster.replica(n, &address).await;
        cluster.replicas[n] = fresh;
        // Taken back by the balancer once ready.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    std::fs::write(&stop, "").unwrap();
    let output = tokio::time::timeout(Duration::from_secs(90), running)
        .await
        .expect("the clients did not stop")
        .unwrap();
    let report = client_report(&output);
    eprintln!(
        "calls {} asks {} failures {}",
        report["calls"], report["asks"], report["failures"]
    );
    let failures = report["failures"].as_array().unwrap();
    let created = report["created"].as_array().unwrap();
    if !failures.is_empty() {
        eprintln!("{}", cluster.logs().await);
        panic!("calls failed during the rolling restart: {failures:?}");
    }
    assert!(
        created.len() >= 20,
        "too few calls to show anything: {report}"
    );
    assert!(
        created
            .iter()
            .any(|name| name.as_str().unwrap().starts_with("slow-")),
        "no write was held: {report}"
    );
    assert_eq!(
        report["asks"], report["calls"],
        "asks are not writes: {report}"
    );
    for name in created {
        let name = name.as_str().unwrap();
        assert_eq!(
            cluster.provider.writes_with(&format!("\"{name}\"")),
            1,
            "{name} was not written exactly once"
        );
    }
}

/// One execute call by an official client without elicitation (2026-07-28: every run is the
/// same caller) through `url`; its structured result.
async fn once(url: &str, code: &str) -> Value {
    let dir = node_client().unwrap();
    let output = Command::new("node")
        .arg(dir.join("once.mjs"))
        .current_dir(&dir)
        .env("SDKBOX_URL", url)
        .env("SDKBOX_TOKEN", TOKEN)
        .env("CODE", code)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    client_report(&output)
}

/// The approval page behind the balancer: a write asked about by two replicas is one
/// question, its link is on the deployment's public URL, a real browser approves it there
/// (whichever replica serves the page), and the re-run through the balancer sends the write
/// once; a later re-run is answered from the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_approval_page_behind_the_balancer_asks_once_and_sends_once() {
    if node_client().is_none() {
        return;
    }
    let Some(cluster) = Cluster::start(3).await else {
        return;
    };
    let name = format!("page-{}", std::process::id());
    let code = format!(
        "return (await api.customers.create({{ name: \"{name}\", email: \"p@example.com\" }})).name;"
    );
    let link = |outcome: &Value| {
        let message = outcome["error"]["message"].as_str().unwrap_or_default();
        message
            .split_whitespace()
            .find(|w| w.contains("/approve/"))
            .unwrap_or_else(|| panic!("no link: {outcome}"))
            .to_owned()
    };
    let first = once(&cluster.replicas[0].server.url, &code).await;
    let second = once(&cluster.replicas[1].server.url, &code).await;
    let (first, second) = (link(&first), link(&second));
    assert_eq!(first, second, "two replicas asked two questions");
    assert!(
        first.starts_with(&format!("http://127.0.0.1:{}/approve/", cluster.port)),
        "{first}"
    );
    let Some((before, after)) = crate::page::click(&first, "approve").await else {
        return;
    };
    assert!(before.contains(&name), "{before}");
    assert!(after.contains("Approved"), "{after}");
    assert_eq!(
        cluster.provider.writes_with(&name),
        0,
        "sent before the re-run"
    );
    let sent = once(&cluster.url, &code).await;
    assert_eq!(sent["result"], name, "{sent}");
    assert_eq!(sent["http"][0]["policy"]["decision"], "approved", "{sent}");
    let again = once(&cluster.url, &code).await;
    assert_eq!(
        again["http"][0]["policy"]["decision"], "replayed",
        "{again}"
    );
    assert_eq!(cluster.provider.writes_with(&name), 1);
}

/// A replica told to stop (SIGTERM) whose grace runs out while a write it sent still waits
/// for its response: the call is cancelled (it ends, saying so), the replica exits within its
/// grace, and the journal says the write may have been sent: the re-run through the balancer
/// sends nothing and says so, and nobody is asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_cut_off_by_the_end_of_the_shutdown_grace_is_never_sent_again() {
    let Some(ts) = node_client() else {
        return;
    };
    let Some(mut cluster) = Cluster::start(3).await else {
        return;
    };
    let address = cluster.replicas[0].address();
    // Replica 0 again, with a short grace.
    let old = &mut cluster.replicas[0].server.child;
    old.start_kill().unwrap();
    old.wait().await.unwrap();
    let short = [("--shutdown-grace-s", "2"), ("--drain-delay-ms", "200")];
    cluster.replicas[0] = cluster.replica_with(0, &address, &short).await;
    let replica = &cluster.replicas[0].server;
    let mut command = cluster.against(&ts, "replicas.mjs", replica);
    command
        .env("SDK", "v1")
        .env("ERA", "legacy")
        .env("SIGNAL", "SIGTERM")
        .env("HELD", "stuck");
    let failed = failures_of(command, "v1 legacy, the grace runs out").await;
    let exited = tokio::time::timeout(
        Duration::from_secs(10),
        cluster.replicas[0].server.child.wait(),
    )
    .await
    .expect("the replica outlived its grace")
    .unwrap();
    if !failed.is_empty() {
        eprintln!("{}", cluster.logs().await);
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(exited.success(), "{exited}");
}

/// A replica that stalls mid-run (SIGSTOP) for longer than the others wait before counting it
/// gone, once while a write waits for its response and once in a read before the run's first
/// write: the same code run again elsewhere takes the run over (or, with nothing to take
/// over, runs afresh); when the stalled replica resumes, its run sends nothing more (its
/// claims are refused), so each write is received once and the user asked once per write.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_replica_that_resumes_sends_nothing_its_successor_decided() {
    let Some(ts) = node_client() else {
        return;
    };
    let Some(cluster) = Cluster::start(3).await else {
        return;
    };
    let mut failed = Vec::new();
    // Each stage stalls a replica of its own (a stalled one is taken out of the balancer).
    for (victim, stage) in ["write", "read"].into_iter().enumerate() {
        let mut command = cluster.against(&ts, "stall.mjs", &cluster.replicas[victim].server);
        command.env("STALL_IN", stage);
        failed.extend(failures_of(command, &format!("stalled in a {stage}")).await);
    }
    if !failed.is_empty() {
        eprintln!("{}", cluster.logs().await);
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
