//! How long tasks run and are kept, and how many a caller holds: the provider file's
//! `[tasks]` table and the flags over it.

use std::time::Duration;

use serde::Deserialize;

/// The bounds of tasks on one server (every replica of a deployment should share them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSettings {
    /// Whether clients that offer the extension get tasks at all.
    pub enabled: bool,
    /// How long a task's execution may run (its own deadline, in place of the call's), and
    /// how long its approvals may wait for a human, all together.
    pub limit: Duration,
    /// How long a call waits for its execution before it answers with a task instead: a
    /// quick call stays a plain call. 0 makes every call from such a client a task.
    pub after: Duration,
    /// How long a task's record (its status, then its result) is kept once it could have
    /// ended: its `ttlMs` is twice `limit` (running and waiting) plus this.
    pub keep: Duration,
    /// Requests a task's execution may send, retries included (a plain call's are
    /// `[limits] max_requests`).
    pub max_requests: u32,
    /// Response bytes a task's execution may receive in all.
    pub max_received_bytes: usize,
    /// Tasks one principal has running at once; past it, its calls run as plain calls.
    pub running_per_principal: usize,
    /// Task records (running or ended, not yet expired) one principal holds.
    pub kept_per_principal: usize,
    /// Task records all principals hold together.
    pub kept_in_all: usize,
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            limit: Duration::from_secs(15 * 60),
            after: Duration::from_secs(2),
            keep: Duration::from_secs(15 * 60),
            max_requests: 10_000,
            max_received_bytes: 1024 * 1024 * 1024,
            running_per_principal: 2,
            kept_per_principal: 16,
            kept_in_all: 256,
        }
    }
}

impl TaskSettings {
    /// How long a task's record lives from its creation (`ttlMs`).
    pub fn ttl(&self) -> Duration {
        self.limit.saturating_mul(2).saturating_add(self.keep)
    }
}

/// `[tasks]` in a provider file; flags override it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksFile {
    /// `false` turns tasks off: every call is a plain call.
    pub enabled: Option<bool>,
    /// Seconds a task's execution may run (default 900).
    pub timeout_s: Option<u64>,
    /// Milliseconds a call runs before it becomes a task (default 2000; 0: at once).
    pub after_ms: Option<u64>,
    /// Seconds a task's result is kept past its longest run (default 900).
    pub keep_s: Option<u64>,
    /// Requests a task's execution may send (default 10000).
    pub max_requests: Option<u32>,
    /// Mebibytes of responses a task's execution may receive in all (default 1024).
    pub max_received_mb: Option<usize>,
    /// Tasks one principal runs at once (default 2).
    pub running_per_principal: Option<usize>,
    /// Task records one principal holds, running or ended (default 16).
    pub kept_per_principal: Option<usize>,
    /// Task records all principals hold together (default 256).
    pub kept_in_all: Option<usize>,
}

impl TasksFile {
    /// The settings, defaults where unset; every bound at least 1 and every time at least a
    /// second (an `after_ms` of 0 stays 0).
    pub fn settings(&self) -> TaskSettings {
        let default = TaskSettings::default();
        let seconds = |s: Option<u64>, d: Duration| s.map_or(d, |s| Duration::from_secs(s.max(1)));
        TaskSettings {
            enabled: self.enabled.unwrap_or(default.enabled),
            limit: seconds(self.timeout_s, default.limit),
            after: self.after_ms.map_or(default.after, Duration::from_millis),
            keep: seconds(self.keep_s, default.keep),
            max_requests: self.max_requests.unwrap_or(default.max_requests).max(1),
            max_received_bytes: self
                .max_received_mb
                .map_or(default.max_received_bytes, |mb| {
                    mb.max(1).saturating_mul(1 << 20)
                }),
            running_per_principal: self
                .running_per_principal
                .unwrap_or(default.running_per_principal)
                .max(1),
            kept_per_principal: self
                .kept_per_principal
                .unwrap_or(default.kept_per_principal)
                .max(1),
            kept_in_all: self.kept_in_all.unwrap_or(default.kept_in_all).max(1),
        }
    }
}
