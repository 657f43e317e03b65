//! `sdkbox exec`: run one TypeScript file in the sandbox and print the outcome.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use sdkbox::config::{ProviderArgs, ProviderFile};
use sdkbox::egress::Egress;
use sdkbox::sandbox::InProcessSandbox;
use sdkbox::sdk::Sdk;
use sdkbox::worker::{Pool, PoolConfig, Target};
use tokio_util::sync::CancellationToken;

/// The command's flags.
#[derive(Args)]
pub struct ExecArgs {
    /// The TypeScript file to run (`-` for standard input).
    pub file: PathBuf,
    /// The provider.
    #[command(flatten)]
    pub provider: ProviderArgs,
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
    let mut file = ProviderFile::default();
    if args.provider.approval.audit_log.as_deref() == Some(std::path::Path::new("-")) {
        anyhow::bail!("--audit-log -: standard output carries the outcome; give a file");
    }
    args.provider.apply(&mut file);
    file.limits.timeout_ms = Some(args.timeout_ms);
    file.limits.memory_mb = Some(args.memory_mb);
    file.limits.max_requests = Some(args.max_requests);
    let loaded = file.load(None, None).await?;
    let limits = loaded.limits;
    let sdk = loaded.api.map(|api| Arc::new(Sdk::new(api)));
    let egress = Egress::new(loaded.egress_config)?;
    let approvals = loaded.approvals;
    let outcome = if args.in_process {
        let sandbox = InProcessSandbox::new(egress, sdk).with_approvals(approvals);
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
        // No human to ask here: writes under `approve` are refused with a clear error.
        let caller = approvals.caller(egress.identity(), None, None);
        let gate = approvals.unasked(&caller, &code);
        let target = Target {
            egress,
            sdk,
            gate,
            caller: caller.worker_identity(),
            principal: sdkbox::fair::Principal::stdio(),
            hold: None,
            watch: None,
        };
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
