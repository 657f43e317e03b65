//! What an execution's thread reports, before the result is parsed, cut and scrubbed. It is
//! serialisable because a worker process sends it to the supervisor.

use serde::{Deserialize, Serialize};

use super::errors;
use super::outcome::{ConsoleLine, ExecError};
use super::source::{MODULE_URL, Program};
use crate::egress::FilePart;

/// The raw result of one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The result as JSON text, when the code completed.
    pub result_json: Option<String>,
    /// When the result was too large to send as it was and was cut where it was made: its
    /// size before, as JSON.
    #[serde(default)]
    pub result_cut_from: Option<usize>,
    /// The files the result returns (Blobs and Files in it), in the order it names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FilePart>,
    /// The names of files the result returned past the bound on their bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_dropped: Vec<String>,
    /// Why it did not.
    pub error: Option<ExecError>,
    /// Captured console lines.
    pub console: Vec<ConsoleLine>,
    /// Console lines dropped past the cap.
    pub console_dropped: usize,
    /// Time to transpile the TypeScript.
    pub compile_us: u64,
    /// Time to create the runtime (before the job, when prepared ahead).
    pub create_us: u64,
    /// Time to load, evaluate and run the code, result serialisation included.
    pub run_us: u64,
    /// Why the runtime was stopped from outside, if it was (its memory limit, its deadline,
    /// a cancellation): the engine never frees such a runtime whole, so the process that ran
    /// it keeps some of it (see `Pool`).
    #[serde(default)]
    pub stopped: Option<Stop>,
}

/// Why a runtime was stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Its memory limit.
    Memory,
    /// Its deadline.
    Deadline,
    /// A cancellation.
    Cancelled,
}

impl Report {
    /// A report of a run that produced nothing but `error`.
    pub fn failed(error: ExecError) -> Self {
        Self {
            result_json: None,
            result_cut_from: None,
            files: Vec::new(),
            files_dropped: Vec::new(),
            error: Some(error),
            console: Vec::new(),
            console_dropped: 0,
            compile_us: 0,
            create_us: 0,
            run_us: 0,
            stopped: None,
        }
    }

    /// Rewrites stacks in console lines and in the result (caught errors returned as data)
    /// to positions in the model's code.
    pub fn mapped_to(mut self, program: &Program) -> Self {
        for line in &mut self.console {
            line.text = errors::map_stack(&line.text, program);
        }
        if let Some(json) = &self.result_json
            && (json.contains("ext:") || json.contains(MODULE_URL))
            && let Ok(mut value) = serde_json::from_str::<serde_json::Value>(json)
        {
            map_strings(&mut value, program);
            self.result_json = serde_json::to_string(&value).ok();
        }
        self
    }
}

fn map_strings(value: &mut serde_json::Value, program: &Program) {
    match value {
        serde_json::Value::String(s) => *s = errors::map_stack(s, program),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| map_strings(v, program)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| map_strings(v, program)),
        _ => {}
    }
}
