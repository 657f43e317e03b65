//! The sandbox: runs model-written TypeScript against the provider's client in a fresh
//! deno_core runtime, bounded in time, memory and output, with one guarded way out.
//!
//! Invariants (see ARCHITECTURE.md):
//! - every execution gets a fresh runtime on a fresh OS thread; nothing survives a call;
//! - the isolate has no filesystem, environment, process, module loading or network of its
//!   own; its only way out is the egress op, and it never sees the provider secret;
//! - every limit is enforced in Rust (watchdog, heap limit, egress budget, output caps),
//!   never in JavaScript that the script could change;
//! - whatever the script does, the caller gets an [`Outcome`]; the process keeps serving.

mod errors;
mod loader;
mod ops;
mod outcome;
mod runtime;
mod source;
mod truncate;

pub use outcome::{ConsoleLine, ErrorKind, ExecError, Outcome, Timings, Truncation};
pub use source::{SyntaxError, compile};

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::egress::Egress;

/// Bounds on one execution.
#[derive(Debug, Clone)]
pub struct ExecLimits {
    /// Wall-clock time, from start to result.
    pub timeout: Duration,
    /// Heap of the JavaScript runtime, ArrayBuffers included.
    pub memory_bytes: usize,
    /// Size of the returned value as JSON; larger results are cut structurally.
    pub max_result_chars: usize,
    /// Total size of captured console output.
    pub max_console_chars: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            memory_bytes: 128 * 1024 * 1024,
            max_result_chars: 24_000,
            max_console_chars: 8_000,
        }
    }
}

/// Runs executions. Cheap to clone; holds the egress bridge and the long-lived runtime.
#[derive(Clone)]
pub struct Sandbox {
    egress: Egress,
    host: tokio::runtime::Handle,
}

impl Sandbox {
    /// A sandbox whose scripts reach the network only through `egress`. Call it inside the
    /// long-lived tokio runtime: watchdogs and HTTP requests run there.
    pub fn new(egress: Egress) -> Result<Self, tokio::runtime::TryCurrentError> {
        Ok(Self {
            egress,
            host: tokio::runtime::Handle::try_current()?,
        })
    }

    /// Runs `code` and reports what happened. Never fails: every failure is in the outcome.
    /// Cancelling `cancel` stops the script and its in-flight requests.
    pub async fn execute(
        &self,
        code: &str,
        limits: &ExecLimits,
        cancel: CancellationToken,
    ) -> Outcome {
        let started = Instant::now();
        let deadline = started + limits.timeout;
        let session = self.egress.session(deadline, cancel.clone());
        let program = source::compile(code).map(Arc::new);
        let compiled = started.elapsed();
        let report = match &program {
            Err(error) => runtime::Report::failed(errors::syntax(error.clone())),
            Ok(program) => {
                let job = runtime::Job {
                    program: program.clone(),
                    limits: limits.clone(),
                    session: session.clone(),
                    cancel,
                    deadline,
                    watchdog: self.host.clone(),
                };
                match runtime::spawn(job).await {
                    Ok(report) => report.mapped_to(program),
                    Err(_) => runtime::Report::failed(ExecError::new(
                        ErrorKind::Internal,
                        "the sandbox thread ended without a report",
                    )),
                }
            }
        };
        let (create, run) = (report.create, report.run);
        let finishing = Instant::now();
        let mut outcome = self.finish(report, session.calls(), limits);
        outcome.timings = Timings {
            compile_us: micros(compiled),
            create_us: micros(create),
            run_us: micros(run),
            finish_us: micros(finishing.elapsed()),
        };
        outcome.duration_ms = started.elapsed().as_millis() as u64;
        outcome
    }

    /// Parses the result, cuts it to size and scrubs the secret from everything.
    fn finish(
        &self,
        report: runtime::Report,
        http: Vec<crate::egress::CallRecord>,
        limits: &ExecLimits,
    ) -> Outcome {
        let scrubber = self.egress.scrubber();
        let mut error = report.error;
        let mut result = serde_json::Value::Null;
        if let Some(json) = report.result_json {
            match serde_json::from_str(&json) {
                Ok(value) => result = value,
                Err(e) => {
                    error = Some(ExecError::new(
                        ErrorKind::Internal,
                        format!("the result could not be read as JSON: {e}"),
                    ))
                }
            }
        }
        let original = truncate::json_size(&result);
        let truncated = (original > limits.max_result_chars).then(|| {
            result = truncate::fit(&result, limits.max_result_chars);
            Truncation {
                original_chars: original,
                limit_chars: limits.max_result_chars,
            }
        });
        scrubber.scrub_json(&mut result);
        let mut console = report.console;
        for line in &mut console {
            line.text = scrubber.scrub(&line.text).into_owned();
        }
        if let Some(error) = &mut error {
            error.message = scrubber.scrub(&error.message).into_owned();
            error.stack = error
                .stack
                .as_deref()
                .map(|s| scrubber.scrub(s).into_owned());
            error.excerpt = error
                .excerpt
                .as_deref()
                .map(|s| scrubber.scrub(s).into_owned());
        }
        Outcome {
            ok: error.is_none(),
            result,
            truncated,
            error,
            console,
            console_dropped: report.console_dropped,
            http,
            duration_ms: 0,
            timings: Timings::default(),
        }
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros() as u64
}
