//! How callers share a server, as set by flags and the provider file's `[fairness]` table.

use std::time::Duration;

use serde::Deserialize;

/// The per-caller bounds of a server (each also bounded in total elsewhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fairness {
    /// TypeScript compilers checking scripts in parallel.
    pub typecheck_compilers: usize,
    /// Executions one caller runs at once (the others' calls get the remaining workers);
    /// `usize::MAX` when not set: all workers but one (all, with one caller). A run waiting
    /// for a human's decision does not count.
    pub executions_per_caller: usize,
    /// Executions one caller has running and waiting together; past it, `busy`.
    pub calls_per_caller: usize,
    /// HTTP requests one caller has in flight at once (event streams included); past it,
    /// 429 with `Retry-After`.
    pub requests_per_caller: usize,
    /// Standalone event streams (`GET /mcp`) one caller holds open at once.
    pub streams_per_caller: usize,
    /// MCP sessions over HTTP one caller holds; past it, its own session idle the longest is
    /// closed for a new one.
    pub sessions_per_caller: usize,
    /// How long a standalone event stream that carried no message stays open.
    pub stream_idle: Duration,
    /// The server has one caller (standard input and output): its shares are the totals.
    pub one_caller: bool,
}

impl Default for Fairness {
    fn default() -> Self {
        Self {
            typecheck_compilers: crate::typecheck::default_compilers(),
            executions_per_caller: usize::MAX,
            calls_per_caller: 10,
            requests_per_caller: 64,
            streams_per_caller: 4,
            sessions_per_caller: 100,
            stream_idle: Duration::from_secs(60),
            one_caller: false,
        }
    }
}

/// `[fairness]` in a provider file; flags override it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairnessFile {
    /// See [`Fairness::typecheck_compilers`].
    pub typecheck_compilers: Option<usize>,
    /// See [`Fairness::executions_per_caller`].
    pub max_executions_per_caller: Option<usize>,
    /// See [`Fairness::calls_per_caller`].
    pub max_calls_per_caller: Option<usize>,
    /// See [`Fairness::requests_per_caller`].
    pub max_requests_per_caller: Option<usize>,
    /// See [`Fairness::streams_per_caller`].
    pub max_streams_per_caller: Option<usize>,
    /// See [`Fairness::sessions_per_caller`].
    pub max_sessions_per_caller: Option<usize>,
    /// See [`Fairness::stream_idle`], in seconds.
    pub stream_idle_s: Option<u64>,
    /// See [`Fairness::one_caller`]: set by the transport, not the file.
    #[serde(skip)]
    pub one_caller: bool,
}

impl FairnessFile {
    /// The settings this file gives, over the defaults; every count at least 1. One caller
    /// gets one compiler unless told otherwise (it checks one script at a time, mostly).
    pub fn settings(&self) -> Fairness {
        let mut default = Fairness::default();
        if self.one_caller {
            default.typecheck_compilers = 1;
        }
        let count = |given: Option<usize>, default: usize| given.unwrap_or(default).max(1);
        Fairness {
            typecheck_compilers: count(self.typecheck_compilers, default.typecheck_compilers),
            executions_per_caller: count(
                self.max_executions_per_caller,
                default.executions_per_caller,
            ),
            calls_per_caller: count(self.max_calls_per_caller, default.calls_per_caller),
            requests_per_caller: count(self.max_requests_per_caller, default.requests_per_caller),
            streams_per_caller: count(self.max_streams_per_caller, default.streams_per_caller),
            sessions_per_caller: count(self.max_sessions_per_caller, default.sessions_per_caller),
            stream_idle: self
                .stream_idle_s
                .map_or(default.stream_idle, |s| Duration::from_secs(s.max(1))),
            one_caller: self.one_caller,
        }
    }
}
