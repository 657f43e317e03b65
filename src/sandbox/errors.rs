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

/// The caller cancelled the execution.
pub fn cancelled() -> ExecError {
    ExecError::new(
        ErrorKind::Cancelled,
        "the execution was cancelled by the client",
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
pub fn from_core(error: &CoreError, program: &Program, limits: &ExecLimits) -> ExecError {
    match &*error.0 {
        CoreErrorKind::PendingPromiseResolution => pending(),
        CoreErrorKind::Js(js) if js.exception_message.contains(TLA_NEVER_RESOLVED) => pending(),
        CoreErrorKind::Js(js) => from_js(js, program, limits),
        other => ExecError::new(ErrorKind::Runtime, other.to_string()),
    }
}

/// What deno_core says when top-level code awaits a promise nothing can settle.
const TLA_NEVER_RESOLVED: &str = "Top-level await promise never resolved";

fn pending() -> ExecError {
    ExecError::new(
        ErrorKind::Pending,
        "the code awaited a promise that can never settle: nothing was left running (no \
         timer, no request) that could settle it; resolve or reject every promise you create",
    )
}

fn from_js(js: &JsError, program: &Program, limits: &ExecLimits) -> ExecError {
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
    let (kind, message) = if is_stack_overflow(&message) {
        let advice = "the call stack overflowed (recursion too deep); use a loop or an \
                      explicit stack instead of deep recursion";
        (ErrorKind::Stack, format!("{message}: {advice}"))
    } else if is_allocation_failure(&message) {
        let advice = format!(
            "the code built a value larger than the sandbox allows (memory limit of {} MiB); keep \
             less in memory: process data in pieces and keep only the fields you need",
            limits.memory_bytes / (1024 * 1024)
        );
        (ErrorKind::Memory, format!("{message}: {advice}"))
    } else {
        (ErrorKind::Runtime, message)
    };
    ExecError {
        kind,
        name: js.name.clone(),
        message,
        line: position.map(|p| p.0),
        column: position.map(|p| p.1),
        excerpt: position.map(|(line, column)| program.excerpt(line, column)),
        // A stack with no frame of the model's code says nothing the message does not.
        stack: js
            .stack
            .as_deref()
            .map(|s| map_stack(s, program))
            .filter(|s| s.lines().count() > 1),
    }
}

/// The engine's own refusals to allocate, which come before the heap limit is reached.
fn is_allocation_failure(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    [
        "string too long",
        "out of memory",
        "invalid string length",
        "invalid array length",
        "array buffer allocation failed",
    ]
    .iter()
    .any(|m| lower.contains(m))
}

fn is_stack_overflow(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("stack overflow") || lower.contains("maximum call stack")
}

/// Rewrites stack lines to positions in the model's code and drops sdkbox's own frames.
/// Also used on console lines and result strings, which may hold stacks of caught errors.
pub fn map_stack(stack: &str, program: &Program) -> String {
    if !stack.contains(MODULE_URL) && !stack.contains("ext:") {
        return stack.to_owned();
    }
    let mut out: Vec<String> = Vec::new();
    let mut repeats = 0;
    let internal = |l: &&str| l.trim_start().starts_with("at ") && l.contains("ext:");
    for line in stack.lines().filter(|l| !internal(l)) {
        let mapped = map_stack_line(line, program);
        if out.last() == Some(&mapped) {
            repeats += 1;
            continue;
        }
        if repeats > 0 {
            out.push(format!(
                "    ... the frame above repeated {repeats} more times"
            ));
            repeats = 0;
        }
        out.push(mapped);
    }
    if repeats > 0 {
        out.push(format!(
            "    ... the frame above repeated {repeats} more times"
        ));
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
