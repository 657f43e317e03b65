//! Worker processes: executions run in a pool of sandboxed child processes, so that an
//! engine that leaks, ignores a deadline or aborts costs one call, never the server.
//!
//! Invariants (see ARCHITECTURE.md):
//! - the supervisor (this process) holds egress and the secret and is not dumpable; workers
//!   hold neither, inherit no descriptor but their socket, run in user and network
//!   namespaces of their own where the kernel allows, without capabilities, and under a
//!   seccomp allow-list that refuses files, sockets, programs and processes;
//! - a worker runs one execution at a time and is killed at the deadline plus grace;
//! - every failure of a worker becomes an outcome for that call; the pool replaces it.

mod child;
mod harden;
mod pool;
mod process;
mod protocol;
pub mod scratch;

pub use child::{WorkerSettings, serve};
pub use harden::{Probe, ProcessLimits, close_inherited, probe, protect_supervisor};
pub use pool::{Pool, PoolConfig, Target};

use thiserror::Error;

/// Why a worker process failed outside of an execution.
#[derive(Debug, Error)]
pub enum WorkerError {
    /// Its socket or runtime failed.
    #[error("worker I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// It could not harden itself.
    #[error(transparent)]
    Harden(#[from] harden::HardenError),
    /// The supervisor broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// Why the pool could not start or replace a worker.
#[derive(Debug, Error)]
pub enum PoolError {
    /// Spawning or talking to the process failed.
    #[error("cannot start a worker process: {0}")]
    Io(#[from] std::io::Error),
    /// The process started but did not become ready.
    #[error("a worker process failed to start: {0}")]
    Start(String),
}
