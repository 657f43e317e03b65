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
        match serde_json::from_str(&mend_lone_surrogates(&json)) {
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

/// `json` (as `JSON.stringify` writes it) with each lone UTF-16 surrogate written as U+FFFD:
/// JavaScript strings may hold half of a pair (`"😀".split("")`), which `JSON.stringify`
/// escapes as `\udXXX` and Rust's strings cannot hold.
fn mend_lone_surrogates(json: &str) -> std::borrow::Cow<'_, str> {
    let bytes = json.as_bytes();
    let unit = |at: usize| -> Option<u32> {
        let escape = bytes.get(at..at + 6)?;
        if escape[0] != b'\\' || escape[1] != b'u' {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(&escape[2..]).ok()?, 16).ok()
    };
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    while let Some(found) = memchr::memchr(b'\\', &bytes[i..]) {
        let at = i + found;
        let lone = match unit(at) {
            Some(0xD800..=0xDBFF) => {
                let paired = unit(at + 6).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low));
                if paired {
                    i = at + 12;
                    continue;
                }
                true
            }
            Some(0xDC00..=0xDFFF) => true,
            _ => false,
        };
        if lone {
            out.push_str(&json[copied..at]);
            out.push_str("\\ufffd");
            copied = at + 6;
            i = at + 6;
        } else {
            // Any other escape is two characters at least; the next cannot start inside it.
            i = at + 2;
        }
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(json);
    }
    out.push_str(&json[copied..]);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::mend_lone_surrogates;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let json = r#"["\ud83d|\ude00", "\ud83d\ude00", "\\ud83d", "\udc00x"]"#;
        let value: serde_json::Value = serde_json::from_str(&mend_lone_surrogates(json)).unwrap();
        assert_eq!(
            value,
            serde_json::json!(["\u{fffd}|\u{fffd}", "\u{1F600}", "\\ud83d", "\u{fffd}x"])
        );
        assert!(matches!(
            mend_lone_surrogates(r#"{"a":"\n"}"#),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
