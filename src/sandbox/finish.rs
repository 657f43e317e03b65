//! The last step of every execution, in the process that holds egress: parse the result,
//! scrub the secret from everything the caller will see, then cut it to size.

use super::outcome::{ErrorKind, ExecError, Outcome, Timings, Truncation};
use super::report::Report;
use super::{ExecLimits, bound, truncate};
use crate::approval::Planned;
use crate::egress::{CallRecord, Scrubber};

/// What egress and the approval gate recorded during a run.
#[derive(Default)]
pub struct Logs {
    /// The call log, and the number of calls past its bound.
    pub calls: (Vec<CallRecord>, usize),
    /// A dry run's unsent writes, and the number past the plan's bound.
    pub plan: (Vec<Planned>, usize),
    /// What the model is told about approvals to be given outside the execution.
    pub approvals: Vec<String>,
}

/// Turns a run's report and logs into the outcome returned to the caller: scrubbed whole,
/// then held to `limits.max_output_bytes` (half of it; the text rendering of the same
/// outcome gets the other half).
pub fn finish(report: Report, logs: Logs, limits: &ExecLimits, scrubber: &Scrubber) -> Outcome {
    let Logs {
        calls: (http, http_dropped),
        plan: (plan, plan_dropped),
        approvals,
    } = logs;
    let started = std::time::Instant::now();
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
    let outcome = Outcome {
        ok: error.is_none(),
        result,
        truncated: None,
        error,
        console: report.console,
        console_dropped: report.console_dropped,
        http,
        http_dropped,
        plan,
        plan_dropped,
        approvals,
        warnings: Vec::new(),
        duration_ms: 0,
        timings: Timings::default(),
    };
    // Scrubbed before anything is cut: a cut could leave part of an encoded secret behind.
    let unchecked = ExecError::new(
        ErrorKind::Internal,
        "the outcome could not be checked for the provider secret, so it is withheld",
    );
    let mut outcome = scrubber.scrub_all(outcome, Outcome::failed(unchecked));
    let size = truncate::json_size(&outcome.result);
    let original = report.result_cut_from.unwrap_or(size).max(size);
    if original > limits.max_result_chars {
        outcome.result = truncate::fit(&outcome.result, limits.max_result_chars);
        outcome.truncated = Some(Truncation {
            original_chars: original,
            limit_chars: limits.max_result_chars,
        });
    }
    bound::fit(
        &mut outcome,
        limits.max_output_bytes.saturating_sub(bound::ENVELOPE) / 2,
    );
    outcome.timings = Timings {
        compile_us: report.compile_us,
        create_us: report.create_us,
        run_us: report.run_us,
        finish_us: started.elapsed().as_micros() as u64,
    };
    outcome
}
