//! `sdkbox serve`: the MCP server for one provider (or the bundled demo), on stdio or HTTP.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use sdkbox::config::{Embedded, ProviderArgs, ProviderFile};
use sdkbox::sandbox::ExecLimits;
use sdkbox::server::{HttpOptions, serve_http};
use sdkbox::signin::SignIn;
use sdkbox::worker::PoolConfig;
use tokio_util::sync::CancellationToken;
use url::Url;

/// The command's flags.
#[derive(Args)]
pub struct ServeArgs {
    /// Serve the bundled demo API ("Acme Shop"), started on a free loopback port: no key, and
    /// no network but the search model's one-time download (--no-model skips it).
    #[arg(long, conflicts_with = "config")]
    pub demo: bool,
    /// A provider file (TOML); the flags below override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The provider.
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Serve streamable HTTP at /mcp on this address instead of stdio (e.g. 127.0.0.1:8080).
    #[arg(long)]
    pub http: Option<std::net::SocketAddr>,
    /// Environment variable holding the bearer token HTTP clients must send (off loopback,
    /// this or sign-in is required).
    #[arg(long, conflicts_with = "oauth_issuer")]
    pub token_env: Option<String>,
    /// Sign-in: the OAuth authorization server (issuer URL) whose access tokens HTTP clients
    /// send; with --public-url (also `[oauth]` in the provider file).
    #[arg(long)]
    pub oauth_issuer: Option<Url>,
    /// Sign-in: this server's MCP URL as clients reach it (`https://mcp.example.com/mcp`), the
    /// audience its tokens must name.
    #[arg(long)]
    pub public_url: Option<Url>,
    /// A browser origin allowed to call the HTTP server (repeatable; loopback is allowed).
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// A host name clients reach the HTTP server by (repeatable; loopback is allowed).
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// No HTTP sessions: each request stands alone (handshake-era clients then cannot be
    /// asked to approve a write: they are never offered elicitation). Replicas do not need
    /// it: with a shared --state, any replica serves any session.
    #[arg(long)]
    pub stateless: bool,
    /// HTTP header in which a remote client may send its own provider key for its session.
    #[arg(long)]
    pub session_key_header: Option<String>,
    /// The type check of execute: block (certain errors in SDK calls stop the run), warn or
    /// off (default: the provider file's `typecheck`, else block).
    #[arg(long, env = "SDKBOX_TYPECHECK")]
    pub typecheck: Option<sdkbox::typecheck::Mode>,
    /// The TypeScript 7 compiler (`tsc`) to check scripts with; default: `tsc` on PATH, else
    /// the pinned one in sdkbox's cache, downloaded there once.
    #[arg(long, env = "SDKBOX_TSC")]
    pub tsc: Option<PathBuf>,
    /// Executions at once.
    #[arg(long)]
    pub workers: Option<usize>,
    /// TypeScript compilers checking scripts in parallel (default: one per core, at most 4;
    /// each holds 40-110 MiB).
    #[arg(long)]
    pub typecheck_compilers: Option<usize>,
    /// Executions one caller runs at once; its further calls wait while the other workers
    /// stay free for other callers (default: all workers but one; all over stdio).
    #[arg(long)]
    pub max_executions_per_caller: Option<usize>,
    /// Executions one caller has running and waiting together; past it, `busy` (default 10).
    #[arg(long)]
    pub max_calls_per_caller: Option<usize>,
    /// HTTP: requests one caller has in flight at once, event streams included; past it,
    /// 429 with Retry-After (default 64).
    #[arg(long)]
    pub max_requests_per_caller: Option<usize>,
    /// HTTP: standalone event streams (GET /mcp) one caller holds open (default 4).
    #[arg(long)]
    pub max_streams_per_caller: Option<usize>,
    /// HTTP: MCP sessions one caller holds; past it, its own session idle the longest is
    /// closed for a new one (default 100).
    #[arg(long)]
    pub max_sessions_per_caller: Option<usize>,
    /// HTTP: seconds a standalone event stream that carried no message stays open; clients
    /// open another (default 60).
    #[arg(long)]
    pub stream_idle_s: Option<u64>,
    /// HTTP: an address range of proxies (an ingress) whose `X-Forwarded-For` names the
    /// client, for the per-caller limits without sign-in (repeatable, or comma-separated).
    #[arg(long = "trusted-proxy")]
    pub trusted_proxies: Vec<String>,
    /// HTTP: connections served at once; past it, `/healthz` still answers and the rest get
    /// 503 with Retry-After.
    #[arg(long, default_value_t = 512)]
    pub max_connections: usize,
    /// HTTP: connections one peer address is served at once (a --trusted-proxy is not held
    /// to it); past it, 503 with Retry-After (default: all but an eighth of
    /// --max-connections, which stays for the other peers).
    #[arg(long)]
    pub max_connections_per_peer: Option<usize>,
    /// HTTP: connections kept waiting for their first byte; past it, the one silent the
    /// longest is closed.
    #[arg(long, default_value_t = 1_024)]
    pub max_pending: usize,
    /// HTTP: milliseconds a client has to send a request's headers, on a new connection and
    /// between the requests of a kept-alive one.
    #[arg(long, default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// HTTP: milliseconds a client has to send a request's whole body once its headers are
    /// in; past it the request gets 408 and the connection is closed.
    #[arg(long, default_value_t = 30_000)]
    pub body_timeout_ms: u64,
    /// HTTP: MCP sessions kept at once; a new one past it closes the session idle the
    /// longest, or gets 503 with Retry-After when every session is busy.
    #[arg(long, default_value_t = 1_000)]
    pub max_sessions: usize,
    /// HTTP: seconds an unused MCP session lives.
    #[arg(long, default_value_t = 600)]
    pub session_idle_s: u64,
    /// HTTP: on SIGTERM, seconds the calls in flight have to end (then they are cancelled
    /// and the server exits); a second signal stops at once. Keep it below the platform's
    /// own grace (Kubernetes' terminationGracePeriodSeconds, less its preStop pause).
    #[arg(long, default_value_t = 30)]
    pub shutdown_grace_s: u64,
    /// Seconds an execution that runs as an MCP task may take (clients that offer the tasks
    /// extension; default: the provider file's `[tasks] timeout_s`, else 900).
    #[arg(long)]
    pub task_timeout_s: Option<u64>,
    /// Milliseconds a call from such a client runs before it answers with a task instead
    /// (default 2000; 0: every call is a task).
    #[arg(long)]
    pub task_after_ms: Option<u64>,
    /// A directory of the operator's skills (one folder per skill, with its `SKILL.md`),
    /// served through the MCP skills extension beside the provider's own.
    #[arg(long)]
    pub skills_dir: Option<PathBuf>,
    /// No MCP tasks: every call is a plain call, whatever the client offers.
    #[arg(long)]
    pub no_tasks: bool,
    /// HTTP: on SIGTERM, milliseconds the server still takes new calls while readiness fails,
    /// until the balancer notices; then it refuses them with 503.
    #[arg(long, default_value_t = 3_000)]
    pub drain_delay_ms: u64,
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (what process managers and MCP clients send on
/// close): the server drains (HTTP) or returns (stdio); its pool and temporary directories
/// are dropped.
async fn terminated() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(error) => {
            tracing::warn!(%error, "cannot watch for SIGTERM; only Ctrl-C stops the server cleanly");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Builds the provider (or starts the demo), then serves MCP until the client, Ctrl-C or
/// SIGTERM ends it.
pub async fn serve(args: ServeArgs) -> Result<ExitCode> {
    let shutdown = CancellationToken::new();
    let lifecycle = sdkbox::server::Lifecycle::new();
    // Watched from the start: a signal during startup stops the server as soon as it is up.
    // Over HTTP the first signal drains the server; a second stops it at once.
    let (stop, now) = (shutdown.clone(), lifecycle.clone());
    tokio::spawn(async move {
        terminated().await;
        stop.cancel();
        terminated().await;
        now.stop();
    });
    if args.http.is_none()
        && args.provider.approval.audit_log.as_deref() == Some(std::path::Path::new("-"))
    {
        anyhow::bail!(
            "--audit-log -: over stdio, standard output carries the MCP messages; give a file (or serve --http)"
        );
    }
    let page = &args.provider.approval.approval_page;
    if args.http.is_none() && (page.starts_with("https://") || page.starts_with("http://")) {
        anyhow::bail!(
            "--approval-page {page}: a page on a public URL is served by the HTTP server: add --http, or give a loopback address"
        );
    }
    let mut file = match &args.config {
        Some(path) => ProviderFile::read(path)?,
        None => ProviderFile::default(),
    };
    let (embedded, secret) = if args.demo {
        let address = sdkbox::demo::start(shutdown.clone()).await?;
        file.name = Some("Acme Shop (demo)".into());
        file.base_url = Some(Url::parse(&format!("http://{address}/v1"))?);
        let guides = sdkbox::demo::GUIDES
            .iter()
            .flat_map(|(name, text)| sdkbox::search::split_guide(name, text))
            .collect();
        let embedded = Embedded {
            name: "demo",
            spec: sdkbox::demo::SPEC,
            guides,
        };
        (Some(embedded), Some(sdkbox::demo::DEMO_KEY.to_owned()))
    } else {
        (None, None)
    };
    args.provider.apply(&mut file);
    file.session_key_header = args.session_key_header.or(file.session_key_header);
    file.oauth.issuer = args.oauth_issuer.clone().or(file.oauth.issuer.take());
    file.oauth.public_url = args.public_url.clone().or(file.oauth.public_url.take());
    let sign_in = match (file.oauth.wanted(), args.http) {
        (false, _) => None,
        (true, None) if args.oauth_issuer.is_some() || args.public_url.is_some() => {
            anyhow::bail!(
                "--oauth-issuer and --public-url are for --http: stdio has one local client and no sign-in"
            )
        }
        (true, None) => {
            tracing::info!(
                "the provider file's [oauth] applies to --http only; stdio serves without sign-in"
            );
            None
        }
        (true, Some(_)) => {
            if args.token_env.is_some() {
                anyhow::bail!(
                    "--token-env and the provider file's [oauth] exclude each other: choose one"
                );
            }
            if let Some(header) = &file.session_key_header
                && ["authorization", "proxy-authorization", "cookie"]
                    .iter()
                    .any(|h| header.eq_ignore_ascii_case(h))
            {
                anyhow::bail!(
                    "session_key_header `{header}` carries the client's sign-in, which must never reach the provider: name another header (X-Provider-Key)"
                );
            }
            let settings = file.oauth.check(&|name| std::env::var(name).ok())?;
            Some(std::sync::Arc::new(SignIn::start(settings).await?))
        }
    };
    let linking = match (file.provider_oauth.take(), &sign_in) {
        (None, _) => None,
        (Some(table), Some(sign_in)) => {
            let chosen = table.store.is_some();
            let mut settings = table.check(&sign_in.settings().public_url, &|name| {
                std::env::var(name).ok()
            })?;
            // Replicas sharing a state store share the links too, unless told otherwise.
            let state = &file.approval.state;
            if !chosen && sdkbox::state::is_shared(state) {
                settings.store = sdkbox::linking::StoreChoice::Redis(state.clone());
            }
            Some(std::sync::Arc::new(
                sdkbox::linking::Linking::start(settings, sign_in.clone()).await?,
            ))
        }
        (Some(_), None) if args.http.is_some() => anyhow::bail!(
            "[provider_oauth] links each signed-in user's provider account, so it needs sign-in: add [oauth] (or --oauth-issuer and --public-url)"
        ),
        (Some(_), None) => {
            tracing::info!(
                "[provider_oauth] applies to --http with sign-in; stdio acts with the configured key"
            );
            None
        }
    };
    file.limits.workers = args.workers.or(file.limits.workers);
    let fair = &mut file.fairness;
    fair.typecheck_compilers = args.typecheck_compilers.or(fair.typecheck_compilers);
    fair.max_executions_per_caller = args
        .max_executions_per_caller
        .or(fair.max_executions_per_caller);
    fair.max_calls_per_caller = args.max_calls_per_caller.or(fair.max_calls_per_caller);
    fair.max_requests_per_caller = args
        .max_requests_per_caller
        .or(fair.max_requests_per_caller);
    fair.max_streams_per_caller = args.max_streams_per_caller.or(fair.max_streams_per_caller);
    fair.max_sessions_per_caller = args
        .max_sessions_per_caller
        .or(fair.max_sessions_per_caller);
    fair.stream_idle_s = args.stream_idle_s.or(fair.stream_idle_s);
    fair.one_caller = args.http.is_none();
    let fairness = fair.settings();
    file.tasks.timeout_s = args.task_timeout_s.or(file.tasks.timeout_s);
    file.tasks.after_ms = args.task_after_ms.or(file.tasks.after_ms);
    file.skills.dir = args.skills_dir.clone().or(file.skills.dir.take());
    if args.no_tasks {
        file.tasks.enabled = Some(false);
    }
    file.typecheck = args.typecheck.or(file.typecheck);
    file.tsc = args.tsc.clone().or(file.tsc.take());
    let pool_config = PoolConfig::for_this_binary(ExecLimits::default().memory_bytes)?;
    let provider = match file.build(pool_config, embedded, secret).await {
        Ok(provider) => provider,
        // Stopped while starting (the demo provider stops with the server): not a failure.
        Err(_) if shutdown.is_cancelled() => return Ok(ExitCode::SUCCESS),
        Err(error) => return Err(error.into()),
    };
    match args.http {
        None => tokio::select! {
            biased;
            _ = shutdown.cancelled() => {}
            served = sdkbox::server::serve_stdio(provider) => served?,
        },
        Some(address) => {
            let token = match &args.token_env {
                Some(name) => Some(
                    std::env::var(name)
                        .ok()
                        .filter(|t| !t.is_empty())
                        .with_context(|| {
                            format!(
                                "--token-env {name}: the environment variable {name} is not set"
                            )
                        })?,
                ),
                None => None,
            };
            if args.stateless {
                eprintln!(
                    "sdkbox: warning: --stateless: handshake-era clients get no session, so they are never asked to approve writes through elicitation; replicas sharing --state serve any session without it"
                );
            }
            let options = HttpOptions {
                token,
                sign_in,
                linking,
                allowed_origins: args.allowed_origins,
                allowed_hosts: args.allowed_hosts,
                stateless: args.stateless,
                max_body_bytes: 2 * 1024 * 1024,
                body_timeout: std::time::Duration::from_millis(args.body_timeout_ms.max(100)),
                connections: sdkbox::server::ConnectionLimits {
                    max_connections: args.max_connections.max(1),
                    max_pending: args.max_pending.max(1),
                    header_read_timeout: std::time::Duration::from_millis(
                        args.header_timeout_ms.max(100),
                    ),
                    max_per_peer: args
                        .max_connections_per_peer
                        .unwrap_or(args.max_connections - args.max_connections / 8)
                        .max(1),
                },
                max_sessions: args.max_sessions.max(1),
                session_idle: std::time::Duration::from_secs(args.session_idle_s.max(1)),
                lifecycle: lifecycle.clone(),
                drain_delay: std::time::Duration::from_millis(args.drain_delay_ms),
                grace: std::time::Duration::from_secs(args.shutdown_grace_s),
                metrics: metrics_recorder(),
                fairness,
                trusted_proxies: args.trusted_proxies.clone(),
            };
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address}"))?;
            serve_http(provider.clone(), options, listener, shutdown.clone()).await?;
            // Other replicas take this one's unsettled claims for writes that may have been
            // sent at once, not seconds later.
            provider.approvals.state().retire().await;
        }
    }
    shutdown.cancel();
    Ok(ExitCode::SUCCESS)
}

/// Installs the metrics recorder `/metrics` renders; `None`, with a warning, if one is
/// installed already.
fn metrics_recorder() -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    // Seconds, from a quick search to an execution that waited for a human.
    let buckets = [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
    ];
    let built = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)
        .and_then(|builder| builder.install_recorder());
    match built {
        Ok(handle) => {
            let upkeep = handle.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                    upkeep.run_upkeep();
                }
            });
            Some(handle)
        }
        Err(error) => {
            tracing::warn!(%error, "metrics are not recorded");
            None
        }
    }
}
