//! The sandbox: runs model-written TypeScript against the provider's client in a fresh
//! deno_core runtime, bounded in time, memory and output, with one guarded way out.
//!
//! Invariants (see ARCHITECTURE.md):
//! - every execution gets a fresh runtime on a fresh OS thread; nothing survives a call;
//! - the isolate has no filesystem, environment, process, module loading or network of its
//!   own; its only way out is a [`Network`], and it never sees the provider secret;
//! - every limit is enforced in Rust (watchdog, heap limit, egress budget, output caps),
//!   never in JavaScript that the script could change;
//! - whatever the script does, the caller gets an [`Outcome`].
//!
//! [`InProcessSandbox`] runs executions in this process, for tests and debugging; the
//! server runs them in worker processes (`crate::worker`) built from the same pieces.

mod bound;
mod entry;
mod errors;
mod finish;
mod freeing;
mod hold;
mod loader;
mod nesting;
mod network;
mod ops;
mod outcome;
mod plain;
mod report;
mod runtime;
mod source;
mod surrogates;
mod truncate;
mod watch;
mod web;

pub use bound::ENVELOPE as OUTPUT_ENVELOPE;
pub use finish::{stopped, with_warnings};
pub use watch::{Progress, Watch};

/// How deeply `code` nests, or why the sandbox refuses it (deeper than it parses), read
/// without parsing: the type check asks before it parses the code itself.
pub fn nesting_depth(code: &str) -> Option<usize> {
    nesting::deepest(code).ok()
}
pub use errors::cancelled as cancelled_error;
use finish::{Logs, finish};
pub use hold::{Hold, Release, hold};
pub use network::{Gateway, Network, NetworkError, NetworkFuture};
pub use outcome::{ConsoleLine, ErrorKind, ExecError, Outcome, ReturnedFile, Timings, Truncation};
pub use report::{Report, Stop};
pub use runtime::{LOWEST_PRIORITY, Prepared, RuntimeSettings, prepare, snapshot};
pub use source::{SyntaxError, compile};

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::approval::{Approvals, Gate};
use crate::deadline::Deadline;
use crate::egress::Egress;
use crate::sdk::Sdk;

/// Bounds on one execution.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecLimits {
    /// Wall-clock time, from start to result.
    pub timeout: Duration,
    /// Heap of the JavaScript runtime, ArrayBuffers included.
    pub memory_bytes: usize,
    /// Size of the returned value as JSON; larger results are cut structurally.
    pub max_result_chars: usize,
    /// Total size of captured console output.
    pub max_console_chars: usize,
    /// Size of the whole tool result as sent (structured outcome and its text rendering,
    /// half each), whatever the script did: well under any client's message limit.
    pub max_output_bytes: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            memory_bytes: 128 * 1024 * 1024,
            max_result_chars: 24_000,
            max_console_chars: 8_000,
            max_output_bytes: 64_000,
        }
    }
}

/// Compiles and runs `code` on `prepared` (or a runtime created now), returning the raw
/// report. This is the part of an execution that touches the engine: in the server it runs
/// inside a worker process.
pub async fn run_code(
    code: &str,
    limits: &ExecLimits,
    network: Arc<dyn Network>,
    cancel: CancellationToken,
    deadline: Deadline,
    prepared: Prepared,
) -> Report {
    let started = std::time::Instant::now();
    let program = match source::compile(code) {
        Ok(program) => Arc::new(program),
        Err(error) => {
            return Report::failed(errors::syntax(error)).bounded(limits.max_result_chars);
        }
    };
    let compile_us = started.elapsed().as_micros() as u64;
    let job = runtime::Job {
        program,
        limits: limits.clone(),
        network,
        cancel,
        deadline,
        watchdog: tokio::runtime::Handle::current(),
    };
    let mut report = match prepared.run(job).await {
        Ok(report) => report,
        Err(_) => Report::failed(ExecError::new(
            ErrorKind::Internal,
            "the sandbox thread ended without a report",
        )),
    };
    report.compile_us = compile_us;
    report.bounded(limits.max_result_chars)
}

/// The largest code accepted, in bytes: far beyond what a model writes, and well inside one
/// frame of the worker protocol. Larger code is refused before any sandbox is used.
pub const MAX_CODE_BYTES: usize = 1 << 20;

/// How long an execution's outcome waits, at most, for the audit lines of its requests cut
/// short by its end (each a synced line: milliseconds, unless the disk stalls).
const AUDIT_WAIT: Duration = Duration::from_secs(5);

/// Runs executions in this process: one fresh runtime on one fresh thread per call. For
/// tests and debugging; the engine's per-runtime leak makes it unfit for a long-lived server.
#[derive(Clone)]
pub struct InProcessSandbox {
    egress: Egress,
    sdk: Option<Arc<Sdk>>,
    approvals: Option<Approvals>,
}

impl InProcessSandbox {
    /// A sandbox whose scripts reach the network only through `egress`, with the provider's
    /// SDK if there is one. Call it inside the long-lived tokio runtime: watchdogs and HTTP
    /// requests run there.
    pub fn new(egress: Egress, sdk: Option<Arc<Sdk>>) -> Self {
        Self {
            egress,
            sdk,
            approvals: None,
        }
    }

    /// The same sandbox with approval rules; without them every request is allowed (tests).
    pub fn with_approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = Some(approvals);
        self
    }

    /// Runs `code` and reports what happened. Never fails: every failure is in the outcome.
    /// Cancelling `cancel` stops the script and its in-flight requests. Requests meet the
    /// sandbox's approval rules, with no human to ask.
    pub async fn execute(
        &self,
        code: &str,
        limits: &ExecLimits,
        cancel: CancellationToken,
    ) -> Outcome {
        let gate = match &self.approvals {
            Some(approvals) => {
                let caller = approvals.caller(self.egress.identity(), None, None);
                approvals.unasked(&caller, code)
            }
            None => Arc::new(Gate::open(self.egress.base_url().clone())),
        };
        self.execute_gated(code, limits, cancel, gate).await
    }

    /// Runs `code` with `gate` deciding about its requests.
    pub async fn execute_gated(
        &self,
        code: &str,
        limits: &ExecLimits,
        cancel: CancellationToken,
        gate: Arc<Gate>,
    ) -> Outcome {
        let prepared = prepare(RuntimeSettings {
            memory_bytes: limits.memory_bytes,
            test_crash_op: false,
            snapshot: None,
        });
        execute_with(
            code.len(),
            &self.egress,
            self.sdk.clone(),
            gate,
            None,
            None,
            limits,
            cancel,
            |gateway, cancel, deadline| run_code(code, limits, gateway, cancel, deadline, prepared),
        )
        .await
    }
}

/// One execution from the side that holds egress: refuses code over [`MAX_CODE_BYTES`],
/// opens its session and gateway with the deadline and the gate that decides about its
/// requests (held at `hold` until the type check's verdict, when given), lets `run` produce the report (in this process or a worker), then finishes the
/// outcome (parse, scrub, bound) with the call log and the gate's plan.
#[allow(
    clippy::too_many_arguments,
    reason = "one execution's parts, each from its own owner: the pool's target or the in-process sandbox"
)]
pub async fn execute_with<F, Fut>(
    code_len: usize,
    egress: &Egress,
    sdk: Option<Arc<Sdk>>,
    gate: Arc<Gate>,
    hold: Option<Hold>,
    watch: Option<&Watch>,
    limits: &ExecLimits,
    cancel: CancellationToken,
    run: F,
) -> Outcome
where
    F: FnOnce(Arc<Gateway>, CancellationToken, Deadline) -> Fut,
    Fut: std::future::Future<Output = Report>,
{
    let started = Instant::now();
    if code_len > MAX_CODE_BYTES {
        let error = ExecError::new(
            ErrorKind::Limit,
            format!(
                "the code is {code_len} bytes, over the limit of {MAX_CODE_BYTES}; send less code \
                 (put data in requests, not in the script)"
            ),
        );
        return finish(
            Report::failed(error),
            Logs::default(),
            limits,
            egress.scrubber(),
        );
    }
    let deadline = Deadline::at(started + limits.timeout);
    // Requests still in flight when the run has reported end then, not when the runtime that
    // made them is freed (after its report, in this process too).
    let ended = cancel.child_token();
    let session = egress.session(
        gate.clone(),
        deadline.clone(),
        ended.clone(),
        cancel.clone(),
    );
    if let Some(watch) = watch {
        watch.attach(&session);
    }
    let gateway = Arc::new(Gateway::new(session.clone(), sdk).held_by(hold));
    let report = run(gateway, cancel, deadline.clone()).await;
    ended.cancel();
    // Reads in flight end with the run; writes that left finish (within the deadline), so
    // that their responses are recorded for re-runs and their audit lines written. The
    // outcome waits for both (a process may exit once it has its outcome).
    let within = deadline.left() + AUDIT_WAIT;
    if !gate.audited(within).await {
        tracing::error!(
            "an execution's writes and audit lines did not all end within {} s of its end",
            within.as_secs()
        );
    }
    let logs = Logs {
        calls: session.calls(),
        plan: gate.plan(),
        approvals: gate.waiting_messages(),
    };
    let mut outcome = finish(report, logs, limits, egress.scrubber());
    outcome.duration_ms = started.elapsed().as_millis() as u64;
    outcome
}
