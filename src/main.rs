//! The `sdkbox` command. Parses the command line once into validated configuration, then
//! hands typed values to the library. Logs go to stderr; stdout carries only results.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use sdkbox::config::{Embedded, ProviderFile};
use sdkbox::egress::{AuthScheme, Credential, Egress, EgressConfig, EgressLimits, Secret};
use sdkbox::sandbox::{ExecLimits, InProcessSandbox, RuntimeSettings};
use sdkbox::sdk::Sdk;
use sdkbox::search::{Detail, DocsIndex, Filters};
use sdkbox::server::{HttpOptions, serve_http};
use sdkbox::worker::{Pool, PoolConfig, ProcessLimits, Target, WorkerSettings};
use tokio_util::sync::CancellationToken;
use url::Url;

/// A code-mode MCP server: search an API's docs, run TypeScript against its SDK.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one TypeScript file in the sandbox and print the outcome as JSON.
    Exec(ExecArgs),
    /// Serve the MCP server for one provider: on stdio, or on HTTP with --http.
    Serve(ServeArgs),
    /// Build the docs index of a spec and report what it holds.
    Index(SpecArgs),
    /// Search a spec's docs as the model would, and print the hits.
    Search(SearchArgs),
    /// Internal: serve executions for a supervisor over standard input (a Unix socket).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// Serve the bundled demo API ("Acme Shop"), started on a free loopback port: no key,
    /// no network.
    #[arg(long, conflicts_with = "config")]
    demo: bool,
    /// A provider file (TOML); the flags below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The OpenAPI spec: a file or an http(s) URL.
    #[arg(long)]
    spec: Option<String>,
    /// The provider's base URL (default: the spec's first server).
    #[arg(long)]
    base_url: Option<Url>,
    /// Another origin scripts may reach (repeatable).
    #[arg(long = "allow-origin")]
    allow_origins: Vec<Url>,
    /// How the secret is sent: bearer, basic, header:NAME or query:NAME.
    #[arg(long)]
    auth: Option<String>,
    /// Environment variable holding the provider secret.
    #[arg(long)]
    secret_env: Option<String>,
    /// Serve streamable HTTP at /mcp on this address instead of stdio (e.g. 127.0.0.1:8080).
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
    /// Environment variable holding the bearer token HTTP clients must send (required off
    /// loopback).
    #[arg(long)]
    token_env: Option<String>,
    /// A browser origin allowed to call the HTTP server (repeatable; loopback is allowed).
    #[arg(long = "allowed-origin")]
    allowed_origins: Vec<String>,
    /// A host name clients reach the HTTP server by (repeatable; loopback is allowed).
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// No HTTP sessions: each request stands alone, for several instances behind a balancer.
    #[arg(long)]
    stateless: bool,
    /// HTTP header in which a remote client may send its own provider key for its session.
    #[arg(long)]
    session_key_header: Option<String>,
    /// Executions at once.
    #[arg(long)]
    workers: Option<usize>,
}

#[derive(Args)]
struct SpecArgs {
    /// The OpenAPI spec: a file or an http(s) URL.
    #[arg(long)]
    spec: String,
    /// Markdown guides to index with it (default: `guides/` beside a spec file).
    #[arg(long)]
    guides: Option<PathBuf>,
}

#[derive(Args)]
struct SearchArgs {
    #[command(flatten)]
    spec: SpecArgs,
    /// What to look for, in plain words.
    query: String,
    /// Hits to show (1-20).
    #[arg(long, default_value_t = sdkbox::search::DEFAULT_LIMIT)]
    limit: usize,
    /// Show signatures, response shapes and examples.
    #[arg(long)]
    full: bool,
    /// Only operations with this HTTP method.
    #[arg(long)]
    method: Option<String>,
    /// Only operations of this SDK group.
    #[arg(long)]
    group: Option<String>,
}

#[derive(Args)]
struct WorkerArgs {
    /// Heap limit of each runtime.
    #[arg(long)]
    memory_bytes: usize,
    /// Address space limit of the process.
    #[arg(long, default_value_t = 8 << 30)]
    address_space_bytes: u64,
    /// CPU time limit of the process, in seconds.
    #[arg(long, default_value_t = 3600)]
    cpu_seconds: u64,
    /// Open files limit of the process.
    #[arg(long, default_value_t = 64)]
    open_files: u64,
    /// Make the test-only crash op reachable (worker crash tests).
    #[arg(long)]
    test_crash_op: bool,
    /// Harden this process, try what a worker must not be able to do, print the result.
    #[arg(long)]
    probe: bool,
}

#[derive(Args)]
struct ExecArgs {
    /// The TypeScript file to run (`-` for standard input).
    file: PathBuf,
    /// The provider's OpenAPI spec (file or URL): `api.<group>.<method>` calls its operations.
    #[arg(long)]
    spec: Option<String>,
    /// The provider's base URL; `api.request` paths and relative `fetch` URLs resolve here.
    /// Defaults to the spec's first server.
    #[arg(long)]
    base_url: Option<Url>,
    /// Another origin scripts may reach (repeatable).
    #[arg(long = "allow-origin")]
    allow_origins: Vec<Url>,
    /// Environment variable holding the provider secret; read once, never shown to scripts.
    #[arg(long)]
    secret_env: Option<String>,
    /// How the secret is sent: bearer, basic, header:NAME or query:NAME.
    #[arg(long, default_value = "bearer")]
    auth: AuthScheme,
    /// Wall-clock limit of the execution, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// Memory limit of the JavaScript heap, in MiB.
    #[arg(long, default_value_t = 128)]
    memory_mb: usize,
    /// Requests one execution may send.
    #[arg(long, default_value_t = 50)]
    max_requests: u32,
    /// Run in this process instead of a worker process (for debugging).
    #[arg(long)]
    in_process: bool,
}

fn main() -> ExitCode {
    disable_bytecode_cache();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sdkbox: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Keeps the QuickJS backend from writing compiled scripts (the model's code) to disk.
fn disable_bytecode_cache() {
    #[allow(
        unsafe_code,
        reason = "runs first in main, before any other thread exists"
    )]
    // SAFETY: no other thread is running yet, so nothing reads the environment concurrently.
    unsafe {
        std::env::set_var("V82JSC_NO_BC_CACHE", "1");
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Exec(args) => {
            let runtime =
                tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
            runtime.block_on(exec(args))
        }
        Command::Worker(args) => worker(args),
        Command::Serve(args) => {
            let runtime =
                tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
            runtime.block_on(serve(args))
        }
        Command::Index(args) => {
            let runtime =
                tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
            runtime.block_on(index(args))
        }
        Command::Search(args) => {
            let runtime =
                tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
            runtime.block_on(search(args))
        }
    }
}

async fn serve(args: ServeArgs) -> Result<ExitCode> {
    let shutdown = CancellationToken::new();
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
    file.spec = args.spec.or(file.spec);
    file.base_url = args.base_url.or(file.base_url);
    file.allowed_origins.extend(args.allow_origins);
    file.auth = args.auth.or(file.auth);
    file.secret_env = args.secret_env.or(file.secret_env);
    file.session_key_header = args.session_key_header.or(file.session_key_header);
    file.limits.workers = args.workers.or(file.limits.workers);
    let pool_config = PoolConfig::for_this_binary(ExecLimits::default().memory_bytes)?;
    let provider = file.build(pool_config, embedded, secret).await?;
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    match args.http {
        None => sdkbox::server::serve_stdio(provider).await?,
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
            let options = HttpOptions {
                token,
                allowed_origins: args.allowed_origins,
                allowed_hosts: args.allowed_hosts,
                stateless: args.stateless,
                max_body_bytes: 2 * 1024 * 1024,
            };
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address}"))?;
            serve_http(provider, options, listener, shutdown.clone()).await?;
        }
    }
    shutdown.cancel();
    Ok(ExitCode::SUCCESS)
}

/// Loads a spec and its guides and builds the docs index.
async fn load_docs(args: &SpecArgs) -> Result<(Arc<sdkbox::spec::Api>, DocsIndex, usize)> {
    let started = std::time::Instant::now();
    let spec = sdkbox::spec::load(&args.spec).await?;
    for warning in &spec.warnings {
        eprintln!("warning: {warning}");
    }
    let guides_dir = match &args.guides {
        Some(dir) => Some(dir.clone()),
        None if !args.spec.contains("://") => std::path::Path::new(&args.spec)
            .parent()
            .map(|p| p.join("guides")),
        None => None,
    };
    let guides = match guides_dir {
        Some(dir) => sdkbox::search::read_guides(&dir)
            .with_context(|| format!("cannot read the guides in {}", dir.display()))?,
        None => Vec::new(),
    };
    let api = Arc::new(spec.api);
    let docs = DocsIndex::build(api.clone(), guides)?;
    Ok((api, docs, started.elapsed().as_millis() as usize))
}

async fn index(args: SpecArgs) -> Result<ExitCode> {
    let (api, docs, millis) = load_docs(&args).await?;
    println!(
        "{} {}: {} operations in {} groups, {} schemas, {} documents indexed in {millis} ms",
        api.title,
        api.version,
        api.operations.len(),
        api.operations
            .iter()
            .map(|o| &o.group)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        api.schemas.len(),
        docs.len(),
    );
    Ok(ExitCode::SUCCESS)
}

async fn search(args: SearchArgs) -> Result<ExitCode> {
    let (_, docs, _) = load_docs(&args.spec).await?;
    let detail = if args.full {
        Detail::Full
    } else {
        Detail::Compact
    };
    let filters = Filters {
        method: args.method,
        group: args.group,
    };
    let results = docs.search(&args.query, args.limit, detail, &filters)?;
    println!("{}", results.to_text());
    Ok(if results.hits.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn worker(args: WorkerArgs) -> Result<ExitCode> {
    let process = ProcessLimits {
        address_space_bytes: args.address_space_bytes,
        cpu_seconds: args.cpu_seconds,
        open_files: args.open_files,
    };
    if args.probe {
        let probe = sdkbox::worker::probe(&process)?;
        println!("{}", serde_json::to_string(&probe)?);
        return Ok(ExitCode::SUCCESS);
    }
    sdkbox::worker::serve(WorkerSettings {
        runtime: RuntimeSettings {
            memory_bytes: args.memory_bytes,
            test_crash_op: args.test_crash_op,
        },
        process,
    })?;
    Ok(ExitCode::SUCCESS)
}

async fn exec(args: ExecArgs) -> Result<ExitCode> {
    let code = if args.file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read the script from stdin")?
    } else {
        std::fs::read_to_string(&args.file)
            .with_context(|| format!("cannot read {}", args.file.display()))?
    };
    let credential = match &args.secret_env {
        None => None,
        Some(name) => match std::env::var(name) {
            Ok(value) if !value.is_empty() => Some(Credential {
                scheme: args.auth.clone(),
                secret: Secret::new(value),
            }),
            _ => bail!("--secret-env {name}: the environment variable {name} is not set"),
        },
    };
    let api = match &args.spec {
        Some(source) => {
            let spec = sdkbox::spec::load(source).await?;
            for warning in &spec.warnings {
                tracing::warn!(%warning, "spec");
            }
            Some(Arc::new(spec.api))
        }
        None => None,
    };
    let base_url = match (args.base_url, api.as_ref().and_then(|a| a.servers.first())) {
        (Some(url), _) => url,
        (None, Some(server)) => Url::parse(server).with_context(|| {
            format!("the spec's server `{server}` is not an absolute URL; pass --base-url")
        })?,
        (None, None) => bail!("--base-url is required when no --spec with servers is given"),
    };
    let sdk = api.map(|api| Arc::new(Sdk::new(api)));
    let egress = Egress::new(EgressConfig {
        base_url,
        extra_origins: args.allow_origins,
        credential,
        limits: EgressLimits {
            max_requests: args.max_requests,
            ..EgressLimits::default()
        },
    })?;
    let limits = ExecLimits {
        timeout: Duration::from_millis(args.timeout_ms),
        memory_bytes: args.memory_mb * 1024 * 1024,
        ..ExecLimits::default()
    };
    let outcome = if args.in_process {
        let sandbox = InProcessSandbox::new(egress, sdk);
        sandbox
            .execute(&code, &limits, CancellationToken::new())
            .await
    } else {
        let config = PoolConfig {
            workers: 1,
            queue: 0,
            spare: false,
            ..PoolConfig::for_this_binary(limits.memory_bytes)?
        };
        let pool = Pool::start(config).await?;
        let target = Target { egress, sdk };
        pool.execute(&target, &code, &limits, CancellationToken::new())
            .await
    };
    println!("{}", serde_json::to_string_pretty(&outcome)?);
    Ok(if outcome.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
