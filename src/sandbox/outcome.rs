//! What an execution returns: the result as JSON, console lines, the HTTP call log, and an
//! error that says which limit or line was at fault and what to do.

use serde::{Deserialize, Serialize};

use crate::approval::Planned;
use crate::egress::CallRecord;

/// One captured console line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConsoleLine {
    /// `log`, `info`, `warn`, `error` or `debug`.
    pub level: String,
    /// The formatted arguments.
    pub text: String,
}

/// Which kind of failure ended an execution.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The code does not parse.
    Syntax,
    /// The type check found certain errors (SDK calls); the code did not run.
    Type,
    /// The code threw (including refused or failed requests it did not catch).
    Runtime,
    /// The wall-clock limit passed.
    Timeout,
    /// The memory limit was reached.
    Memory,
    /// The call stack overflowed.
    Stack,
    /// The caller cancelled the execution.
    Cancelled,
    /// The code awaited a promise that could never settle.
    Pending,
    /// All sandboxes were busy and the queue was full.
    Busy,
    /// The sandbox process died while running the code.
    Crashed,
    /// sdkbox itself failed; not the code's fault.
    Internal,
    /// The call's input was larger than sdkbox accepts (the code itself, say).
    Limit,
    /// The signed-in user has not linked their provider account; nothing ran.
    Link,
}

impl ErrorKind {
    /// Every kind, for the `execute` tool's output schema.
    pub const ALL: [ErrorKind; 13] = [
        Self::Syntax,
        Self::Type,
        Self::Runtime,
        Self::Timeout,
        Self::Memory,
        Self::Stack,
        Self::Cancelled,
        Self::Pending,
        Self::Busy,
        Self::Crashed,
        Self::Internal,
        Self::Limit,
        Self::Link,
    ];

    /// The name clients see, as serialised.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Syntax => "syntax",
            Self::Type => "type",
            Self::Runtime => "runtime",
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::Stack => "stack",
            Self::Cancelled => "cancelled",
            Self::Pending => "pending",
            Self::Busy => "busy",
            Self::Crashed => "crashed",
            Self::Internal => "internal",
            Self::Limit => "limit",
            Self::Link => "link",
        }
    }
}

/// Why an execution failed, positioned in the model's code where possible.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecError {
    /// The kind of failure.
    pub kind: ErrorKind,
    /// The JS error's name (`TypeError`, `ApiError`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What went wrong and, for limits, how to stay under them.
    pub message: String,
    /// 1-based line in the model's code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// The model's line with a caret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
    /// The stack, with positions in the model's code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
}

impl ExecError {
    /// An error with only a kind and a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            name: None,
            message: message.into(),
            line: None,
            column: None,
            excerpt: None,
            stack: None,
        }
    }
}

/// How much of an oversized result was kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Truncation {
    /// Size of the whole result as JSON, in characters.
    pub original_chars: usize,
    /// The cap it was cut to.
    pub limit_chars: usize,
}

/// A file the result returns: what the structured result says of it, and its bytes (checked
/// for the provider secret), which only the server's rendering reads.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReturnedFile {
    /// Its name.
    pub name: String,
    /// Its media type.
    #[serde(rename = "type")]
    pub media_type: String,
    /// Its size in bytes.
    pub size: usize,
    /// Why its bytes are not sent, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
    /// Its bytes, sent as MCP content, never in the JSON of the outcome.
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

/// Everything one execution produced. Its serialised size is bounded (`bound::fit`), and
/// every string in it has been scrubbed of the provider secret.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// Whether the code ran to completion.
    pub ok: bool,
    /// The returned value as JSON (`null` for `undefined` or on failure).
    pub result: serde_json::Value,
    /// Present when `result` was cut to fit the output cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncation>,
    /// Why the execution failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ExecError>,
    /// Captured console output, in order.
    pub console: Vec<ConsoleLine>,
    /// Console lines dropped after the console cap was reached.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub console_dropped: usize,
    /// Every HTTP call the code made, refused ones included, up to the log's bound.
    pub http: Vec<CallRecord>,
    /// Calls made but not listed in `http`, past the log's bound.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub http_dropped: usize,
    /// In a dry run, the writes that were not sent, in order, with the rule each would meet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<Planned>,
    /// Planned writes not listed in `plan`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub plan_dropped: usize,
    /// Approvals asked for outside this execution (the approval page): what to show the user
    /// before running the same code again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<String>,
    /// What the type check found that did not stop the run (a response property the spec
    /// does not declare, say), or why the code was not checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The files the result returns (`sdkbox.file(...)`, a Blob or File in it), named in the
    /// result where they stood; the server sends their bytes as MCP contents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ReturnedFile>,
    /// Wall time of the whole execution.
    pub duration_ms: u64,
    /// Where the time went; for benchmarks and logs, not shown to the model.
    #[serde(skip)]
    pub timings: Timings,
}

impl Outcome {
    /// An outcome with nothing but `error`.
    pub fn failed(error: ExecError) -> Self {
        Self {
            ok: false,
            result: serde_json::Value::Null,
            truncated: None,
            error: Some(error),
            console: Vec::new(),
            console_dropped: 0,
            http: Vec::new(),
            http_dropped: 0,
            plan: Vec::new(),
            plan_dropped: 0,
            approvals: Vec::new(),
            warnings: Vec::new(),
            files: Vec::new(),
            duration_ms: 0,
            timings: Timings::default(),
        }
    }
}

/// Where an execution's time went, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timings {
    /// Transpiling the TypeScript.
    pub compile_us: u64,
    /// Creating the runtime on its thread.
    pub create_us: u64,
    /// Running the prelude and the model's code, result serialisation in JS included.
    pub run_us: u64,
    /// Reading, cutting and scrubbing the result.
    pub finish_us: u64,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
