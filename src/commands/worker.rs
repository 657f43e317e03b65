//! `sdkbox worker` (hidden): a worker process serving a supervisor, or a probe of its hardening.

use std::process::ExitCode;

use anyhow::Result;
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
    /// Make the test-only crash op reachable (worker crash tests).
    #[arg(long)]
    pub test_crash_op: bool,
    /// Harden this process, try what a worker must not be able to do, print the result.
    #[arg(long)]
    pub probe: bool,
}

/// Runs as a worker process, or probes the hardening with `--probe`.
pub fn worker(args: WorkerArgs) -> Result<ExitCode> {
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
