//! `sdkbox worker` (hidden): a worker process serving a supervisor, or a probe of its hardening.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use sdkbox::sandbox::RuntimeSettings;
use sdkbox::worker::{ProcessLimits, WorkerSettings};

/// The command's flags.
#[derive(Args)]
pub struct WorkerArgs {
    /// Heap limit of each runtime.
    #[arg(long)]
    pub memory_bytes: usize,
    /// Address space limit of the process.
    #[arg(long, default_value_t = 8 << 30)]
    pub address_space_bytes: u64,
    /// CPU time limit of the process, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub cpu_seconds: u64,
    /// Open files limit of the process.
    #[arg(long, default_value_t = 64)]
    pub open_files: u64,
    /// Threads limit of the user (RLIMIT_NPROC).
    #[arg(long, default_value_t = 4_096)]
    pub threads: u64,
    /// Make the test-only crash op reachable (worker crash tests).
    #[arg(long)]
    pub test_crash_op: bool,
    /// Harden this process, try what a worker must not be able to do, print the result.
    #[arg(long)]
    pub probe: bool,
    /// Build a runtime snapshot (prelude run) into this file and exit.
    #[arg(long)]
    pub snapshot_to: Option<PathBuf>,
    /// Create runtimes from this snapshot (read before the process is hardened).
    #[arg(long)]
    pub snapshot: Option<PathBuf>,
}

/// Runs as a worker process, or probes the hardening with `--probe`.
pub fn worker(args: WorkerArgs) -> Result<ExitCode> {
    sdkbox::worker::close_inherited()?;
    let process = ProcessLimits {
        address_space_bytes: args.address_space_bytes,
        cpu_seconds: args.cpu_seconds,
        open_files: args.open_files,
        threads: args.threads,
    };
    if args.probe {
        let probe = sdkbox::worker::probe(&process)?;
        println!("{}", serde_json::to_string(&probe)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &args.snapshot_to {
        let bytes = sdkbox::sandbox::snapshot(args.test_crash_op)
            .map_err(|e| anyhow::anyhow!(e.message))?;
        std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let snapshot: Option<&'static [u8]> = match &args.snapshot {
        // Read once and kept for the life of the process, as deno_core requires.
        Some(path) => Some(Box::leak(
            std::fs::read(path)
                .with_context(|| format!("cannot read {}", path.display()))?
                .into_boxed_slice(),
        )),
        None => None,
    };
    sdkbox::worker::serve(WorkerSettings {
        runtime: RuntimeSettings {
            memory_bytes: args.memory_bytes,
            test_crash_op: args.test_crash_op,
            snapshot,
        },
        process,
    })?;
    Ok(ExitCode::SUCCESS)
}
