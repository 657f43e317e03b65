//! The last step of every execution, in the process that holds egress: parse the result,
//! cut it to size and scrub the secret from everything the caller will see.

use super::outcome::{ErrorKind, ExecError, Outcome, Timings, Truncation};
use super::report::Report;
use super::{ExecLimits, truncate};
use crate::egress::{CallRecord, Scrubber};

/// Turns a run's report and call log into the outcome returned to the caller.
pub fn finish(
    report: Report,
    http: Vec<CallRecord>,
    limits: &ExecLimits,
    scrubber: &Scrubber,
) -> Outcome {
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
        timings: Timings {
            compile_us: report.compile_us,
            create_us: report.create_us,
            run_us: report.run_us,
            finish_us: started.elapsed().as_micros() as u64,
        },
    }
}
