//! Turning what stopped an execution into an [`ExecError`] a model can act on: positions
//! mapped to its own TypeScript, and for every limit, which one and how to stay under it.

use deno_core::error::{CoreError, CoreErrorKind, JsError};

use super::ExecLimits;
use super::outcome::{ErrorKind, ExecError};
use super::source::{MODULE_URL, Program, SyntaxError};

/// The wall-clock limit passed.
pub fn timeout(limits: &ExecLimits) -> ExecError {
    ExecError::new(
        ErrorKind::Timeout,
        format!(
            "the execution ran past its time limit of {} ms and was stopped; do less per call \
             (fewer requests, smaller pages, no waiting loops) or ask for a larger timeout_ms",
            limits.timeout.as_millis()
        ),
    )
}

/// The memory limit was reached.
pub fn memory(limits: &ExecLimits) -> ExecError {
    ExecError::new(
        ErrorKind::Memory,
        format!(
            "the execution used more than its memory limit of {} MiB and was stopped; keep less \
             in memory: process pages as they arrive and keep only the fields you need",
            limits.memory_bytes / (1024 * 1024)
        ),
    )
}

/// The code does not parse.
pub fn syntax(error: SyntaxError) -> ExecError {
    ExecError {
        kind: ErrorKind::Syntax,
        name: Some("SyntaxError".into()),
        message: format!(
            "{} (line {}, column {})",
            error.message, error.line, error.column
        ),
        line: Some(error.line),
        column: Some(error.column),
        excerpt: Some(error.excerpt),
        stack: None,
    }
}

/// An error from deno_core: a thrown JS error, a promise that never settles, or a fault.
pub fn from_core(error: &CoreError, program: &Program) -> ExecError {
    match &*error.0 {
        CoreErrorKind::Js(js) => from_js(js, program),
        CoreErrorKind::PendingPromiseResolution => ExecError::new(
            ErrorKind::Pending,
            "the code awaited a promise that can never settle: nothing was left running (no \
             timer, no request) that could settle it; resolve or reject every promise you create",
        ),
        other => ExecError::new(ErrorKind::Runtime, other.to_string()),
    }
}

fn from_js(js: &JsError, program: &Program) -> ExecError {
    let message = js
        .message
        .clone()
        .unwrap_or_else(|| js.exception_message.clone());
    let frame = js
        .frames
        .iter()
        .find(|f| f.file_name.as_deref() == Some(MODULE_URL))
        .and_then(|f| Some((f.line_number?, f.column_number.unwrap_or(1))));
    let position = frame.and_then(|(line, column)| {
        program.map_position(u32::try_from(line).ok()?, u32::try_from(column).ok()?)
    });
    let overflow = is_stack_overflow(&message);
    let message = if overflow {
        format!(
            "{message}: the call stack overflowed (recursion too deep); use a loop or an \
             explicit stack instead of deep recursion"
        )
    } else {
        message
    };
    ExecError {
        kind: if overflow {
            ErrorKind::Stack
        } else {
            ErrorKind::Runtime
        },
        name: js.name.clone(),
        message,
        line: position.map(|p| p.0),
        column: position.map(|p| p.1),
        excerpt: position.map(|(line, column)| program.excerpt(line, column)),
        stack: js.stack.as_deref().map(|s| map_stack(s, program)),
    }
}

fn is_stack_overflow(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("stack overflow") || lower.contains("maximum call stack")
}

/// Rewrites stack lines to positions in the model's code and drops sdkbox's own frames.
fn map_stack(stack: &str, program: &Program) -> String {
    let mut out = Vec::new();
    for line in stack.lines() {
        if line.contains("ext:") {
            continue;
        }
        out.push(map_stack_line(line, program));
    }
    out.join("\n")
}

fn map_stack_line(line: &str, program: &Program) -> String {
    let Some(start) = line.find(MODULE_URL) else {
        return line.to_owned();
    };
    let rest = &line[start + MODULE_URL.len()..];
    let digits = |s: &str| {
        s.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
    };
    let Some(after_colon) = rest.strip_prefix(':') else {
        return line.to_owned();
    };
    let line_text = digits(after_colon);
    let after_line = &after_colon[line_text.len()..];
    let column_text = after_line.strip_prefix(':').map(digits).unwrap_or_default();
    let consumed = 1
        + line_text.len()
        + if column_text.is_empty() {
            0
        } else {
            1 + column_text.len()
        };
    let mapped = line_text
        .parse()
        .ok()
        .and_then(|l| program.map_position(l, column_text.parse().unwrap_or(1)));
    match mapped {
        Some((l, c)) => format!("{}code.ts:{l}:{c}{}", &line[..start], &rest[consumed..]),
        None => line.to_owned(),
    }
}
