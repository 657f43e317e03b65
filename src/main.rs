//! The `sdkbox` command. Parses the command line once into validated configuration, then
//! hands typed values to the library. Logs go to stderr; stdout carries only results.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use sdkbox::egress::{AuthScheme, Credential, Egress, EgressConfig, EgressLimits, Secret};
use sdkbox::sandbox::{ExecLimits, InProcessSandbox, RuntimeSettings};
use sdkbox::sdk::Sdk;
use sdkbox::worker::{Pool, PoolConfig, ProcessLimits, WorkerSettings};
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
    /// Internal: serve executions for a supervisor over standard input (a Unix socket).
    #[command(hide = true)]
    Worker(WorkerArgs),
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
    }
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
        let pool = Pool::start(config, egress, sdk).await?;
        pool.execute(&code, &limits, CancellationToken::new()).await
    };
    println!("{}", serde_json::to_string_pretty(&outcome)?);
    Ok(if outcome.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
