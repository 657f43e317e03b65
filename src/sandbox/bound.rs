//! Bounds on what one execution hands back, so that no script can make a response that ends
//! the client's session (the official TypeScript client drops the whole session past 10 MiB
//! per message). Each part is bounded where it is made: console lines in the console op, the
//! call log in the egress session, errors and oversized results here before a worker frames
//! its report. Then [`fit`] holds the whole outcome, as JSON, to one budget.

use serde_json::Value;

use super::outcome::{ExecError, Outcome, Truncation};
use super::report::Report;
use super::truncate;
use crate::egress::{cut, is_write};

/// Bytes kept for the JSON-RPC envelope around a result (`jsonrpc`, `id`, `content`, the
/// tool result's own keys): the structured outcome and its text share the rest.
pub const ENVELOPE: usize = 1_024;

/// Characters of an error message kept.
pub const MAX_ERROR_MESSAGE: usize = 2_000;
/// Characters of an error's name kept.
pub const MAX_ERROR_NAME: usize = 100;
/// Characters of a stack kept.
pub const MAX_STACK: usize = 4_000;
/// Characters of an excerpt kept.
pub const MAX_EXCERPT: usize = 1_000;
/// Bytes of result JSON a report carries as it is; a larger result is cut where it is made
/// (in the worker), so that its frame stays small whatever the script returned.
pub const MAX_REPORT_RESULT_BYTES: usize = 1 << 20;

impl ExecError {
    /// The error with every field cut to its bound.
    pub fn bounded(self) -> Self {
        let cut_opt = |s: Option<String>, max| s.map(|s| cut(&s, max));
        Self {
            kind: self.kind,
            name: cut_opt(self.name, MAX_ERROR_NAME),
            message: cut(&self.message, MAX_ERROR_MESSAGE),
            line: self.line,
            column: self.column,
            excerpt: cut_opt(self.excerpt, MAX_EXCERPT),
            stack: cut_opt(self.stack, MAX_STACK),
        }
    }
}

impl Report {
    /// The report with its error bounded and a result larger than
    /// [`MAX_REPORT_RESULT_BYTES`] already cut to `max_result_chars`.
    pub fn bounded(mut self, max_result_chars: usize) -> Self {
        self.error = self.error.map(ExecError::bounded);
        if let Some(json) = &self.result_json
            && json.len() > MAX_REPORT_RESULT_BYTES
        {
            let value: Value = serde_json::from_str(json).unwrap_or(Value::Null);
            let original_chars = truncate::json_size(&value);
            let cut = truncate::fit(&value, max_result_chars.min(MAX_REPORT_RESULT_BYTES));
            self.result_json = serde_json::to_string(&cut).ok();
            self.result_cut_from = Some(original_chars);
        }
        self
    }
}

/// Holds `outcome` to `budget` bytes of JSON: the parts give way in order of least use to
/// the model: console lines from the last, then the result is cut further, then read calls
/// from the last (counted in `http_dropped`), then every record is shortened, then the error's
/// stack and excerpt. Writes stay listed while anything else can give way: a write the
/// provider may have acted on is the last thing the size bound hides.
pub fn fit(outcome: &mut Outcome, budget: usize) {
    let mut compacted = false;
    for _ in 0..16 {
        let size = json_len(outcome);
        if size <= budget {
            return;
        }
        let excess = size - budget;
        if !outcome.console.is_empty() {
            let mut freed = 0;
            while freed < excess
                && let Some(line) = outcome.console.pop()
            {
                freed += json_len(&line) + 1;
                outcome.console_dropped += 1;
            }
        } else if !outcome.warnings.is_empty() {
            // Type check warnings: the last ones go first; they are notes, not results.
            let mut freed = 0;
            while freed < excess
                && let Some(warning) = outcome.warnings.pop()
            {
                freed += json_len(&warning) + 1;
            }
        } else if !outcome.result.is_null() && !result_is_minimal(&outcome.result) {
            let current = truncate::json_size(&outcome.result);
            let target = current.saturating_sub(excess + 128).max(64);
            let original = outcome
                .truncated
                .as_ref()
                .map_or(current, |t| t.original_chars);
            outcome.result = truncate::fit(&outcome.result, target);
            outcome.truncated = Some(Truncation {
                original_chars: original,
                limit_chars: target,
            });
        } else if let Some(last_read) = outcome.http.iter().rposition(|c| !is_write(&c.method)) {
            let mut freed = 0;
            let mut next = Some(last_read);
            while freed < excess
                && let Some(i) = next
            {
                freed += json_len(&outcome.http.remove(i)) + 1;
                outcome.http_dropped += 1;
                next = outcome.http[..i].iter().rposition(|c| !is_write(&c.method));
            }
        } else if !compacted && (!outcome.http.is_empty() || !outcome.plan.is_empty()) {
            compacted = true;
            for call in &mut outcome.http {
                call.url = cut(&call.url, 100);
                call.error = call.error.as_deref().map(|e| cut(e, 100));
                call.dropped_headers.clear();
                if let Some(note) = &mut call.policy {
                    note.because = cut(&note.because, 60);
                }
            }
            for planned in &mut outcome.plan {
                let request = &mut planned.request;
                request.url = cut(&request.url, 100);
                request.body = request.body.as_deref().map(|b| cut(b, 60));
                request.headers.truncate(3);
                for header in &mut request.headers {
                    *header = cut(header, 60);
                }
            }
        } else if outcome.error.as_ref().is_some_and(|e| {
            // 200 characters, and the note of how long it was.
            e.stack.is_some() || e.excerpt.is_some() || e.message.chars().count() > 240
        }) {
            if let Some(error) = &mut outcome.error {
                error.stack = None;
                error.excerpt = None;
                error.message = cut(&error.message, 200);
                error.name = error.name.as_deref().map(|n| cut(n, 40));
            }
        } else if !outcome.plan.is_empty() {
            // A plan longer than the budget: its last entries are counted instead.
            let mut freed = 0;
            while freed < excess
                && let Some(planned) = outcome.plan.pop()
            {
                freed += json_len(&planned) + 1;
                outcome.plan_dropped += 1;
            }
        } else if !outcome.http.is_empty() {
            // The last resort: more writes than the budget can list, even shortened.
            let mut freed = 0;
            while freed < excess
                && let Some(call) = outcome.http.pop()
            {
                freed += json_len(&call) + 1;
                outcome.http_dropped += 1;
            }
        } else {
            return;
        }
    }
}

/// Whether `value` is already as small as cutting makes it.
fn result_is_minimal(value: &Value) -> bool {
    truncate::json_size(value) <= 64
}

fn json_len<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::CallRecord;
    use crate::sandbox::{ConsoleLine, ErrorKind, Timings};
    use serde_json::json;

    fn huge(kind: Option<ErrorKind>) -> Outcome {
        let escaped = "\u{1}\"".repeat(20_000);
        Outcome {
            ok: kind.is_none(),
            result: json!({"a": escaped, "b": vec![escaped.clone(); 4]}),
            truncated: None,
            error: kind.map(|k| {
                ExecError {
                    kind: k,
                    name: Some("E".repeat(500)),
                    message: escaped.clone(),
                    line: Some(1),
                    column: Some(1),
                    excerpt: Some(escaped.clone()),
                    stack: Some(escaped.clone()),
                }
                .bounded()
            }),
            console: vec![
                ConsoleLine {
                    level: "log".into(),
                    text: escaped.clone(),
                };
                50
            ],
            console_dropped: 0,
            http: vec![
                CallRecord {
                    method: "GET".into(),
                    url: escaped.clone(),
                    operation: None,
                    status: None,
                    duration_ms: 1,
                    bytes: 0,
                    error: Some(escaped.clone()),
                    dropped_headers: Vec::new(),
                    policy: None,
                };
                50
            ],
            http_dropped: 0,
            plan: vec![
                crate::approval::Planned {
                    request: crate::approval::Shown {
                        operation: Some("a.b".into()),
                        method: "POST".into(),
                        url: escaped.clone(),
                        headers: vec![escaped.clone()],
                        body: Some(escaped.clone()),
                        body_bytes: 0,
                        body_lines: 1,
                    },
                    policy: crate::approval::Rule::Approve,
                };
                30
            ],
            plan_dropped: 0,
            approvals: vec!["open the link".into()],
            warnings: vec![escaped.clone(); 10],
            files: Vec::new(),
            duration_ms: 1,
            timings: Timings::default(),
        }
    }

    #[test]
    fn every_part_gives_way_until_the_outcome_fits() {
        for kind in [None, Some(ErrorKind::Runtime)] {
            for budget in [2_000, 10_000, 32_000] {
                let mut outcome = huge(kind);
                fit(&mut outcome, budget);
                assert!(
                    json_len(&outcome) <= budget,
                    "{} > {budget}",
                    json_len(&outcome)
                );
                assert_eq!(outcome.console.len() + outcome.console_dropped, 50);
                assert_eq!(outcome.http.len() + outcome.http_dropped, 50);
                assert_eq!(outcome.plan.len() + outcome.plan_dropped, 30);
            }
        }
    }

    #[test]
    fn writes_stay_listed_whatever_gives_way() {
        let mut outcome = huge(None);
        outcome.http[20].method = "POST".into();
        outcome.http[49].method = "DELETE".into();
        fit(&mut outcome, 4_000);
        assert!(json_len(&outcome) <= 4_000, "{}", json_len(&outcome));
        let methods: Vec<&str> = outcome.http.iter().map(|c| c.method.as_str()).collect();
        assert_eq!(methods, ["POST", "DELETE"], "{}", json_len(&outcome));
        assert_eq!(outcome.http_dropped, 48);
    }

    #[test]
    fn errors_are_cut_and_say_so() {
        let error = ExecError::new(ErrorKind::Runtime, "x".repeat(30_000_000)).bounded();
        assert!(error.message.len() < MAX_ERROR_MESSAGE + 40);
        assert!(
            error.message.ends_with("… [30000000 chars]"),
            "{}",
            &error.message[1990..]
        );
    }
}
