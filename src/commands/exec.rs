//! `sdkbox exec`: run one TypeScript file in the sandbox and print the outcome.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use sdkbox::egress::{AuthScheme, Credential, Egress, EgressConfig, EgressLimits, Secret};
use sdkbox::sandbox::{ExecLimits, InProcessSandbox};
use sdkbox::sdk::Sdk;
use sdkbox::worker::{Pool, PoolConfig, Target};
use tokio_util::sync::CancellationToken;
use url::Url;

/// The command's flags.
#[derive(Args)]
pub struct ExecArgs {
    /// The TypeScript file to run (`-` for standard input).
    pub file: PathBuf,
    /// The provider's OpenAPI spec (file or URL): `api.<group>.<method>` calls its operations.
    #[arg(long)]
    pub spec: Option<String>,
    /// The provider's base URL; `api.request` paths and relative `fetch` URLs resolve here.
    /// Defaults to the spec's first server.
    #[arg(long)]
    pub base_url: Option<Url>,
    /// Another origin scripts may reach (repeatable).
    #[arg(long = "allow-origin")]
    pub allow_origins: Vec<Url>,
    /// Environment variable holding the provider secret; read once, never shown to scripts.
    #[arg(long)]
    pub secret_env: Option<String>,
    /// How the secret is sent: bearer, basic, header:NAME or query:NAME.
    #[arg(long, default_value = "bearer")]
    pub auth: AuthScheme,
    /// Wall-clock limit of the execution, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// Memory limit of the JavaScript heap, in MiB.
    #[arg(long, default_value_t = 128)]
    pub memory_mb: usize,
    /// Requests one execution may send.
    #[arg(long, default_value_t = 50)]
    pub max_requests: u32,
    /// Run in this process instead of a worker process (for debugging).
    #[arg(long)]
    pub in_process: bool,
}

/// Runs the file in a worker (or in process) and prints the outcome as JSON.
pub async fn exec(args: ExecArgs) -> Result<ExitCode> {
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
            snapshot: false,
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
