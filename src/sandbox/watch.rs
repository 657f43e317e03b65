//! What a running execution has done so far, read while it runs (a task's progress): the
//! requests its egress session logged, the writes among them, and the script's latest
//! console line. Nothing here changes the run.

use std::sync::{Arc, Mutex};

use crate::egress::{CallRecord, EgressSession};
use crate::lock::lock;

/// Writes a progress lists, at most (the last ones).
const MAX_WRITES: usize = 50;

/// A window on one execution's egress, attached when its session opens.
#[derive(Default)]
pub struct Watch {
    session: Mutex<Option<EgressSession>>,
}

/// An execution's progress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Requests made (sent or refused).
    pub requests: usize,
    /// Reads answered (GET and HEAD with a status): pages read.
    pub reads: usize,
    /// Writes that left, each `METHOD URL -> status` (or `(no answer yet)`), the last
    /// [`MAX_WRITES`]; URLs as the call log keeps them, scrubbed.
    pub writes: Vec<String>,
    /// Writes that left, all of them.
    pub writes_sent: usize,
    /// The script's latest console line (one a second is handed over), scrubbed.
    pub console: Option<String>,
}

impl Watch {
    /// A watch with nothing attached yet.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Attaches the execution's session.
    pub(crate) fn attach(&self, session: &EgressSession) {
        *lock(&self.session) = Some(session.clone());
    }

    /// What the execution has done so far.
    pub fn progress(&self) -> Progress {
        let Some(session) = lock(&self.session).clone() else {
            return Progress::default();
        };
        let read = |method: &str| matches!(method, "GET" | "HEAD");
        // Looked at in place, once a second: a task may log thousands of writes.
        let (requests, reads, writes_sent, mut writes) = session.with_calls(|records, dropped| {
            let left = |r: &&CallRecord| {
                !read(&r.method) && !r.planned() && (r.status.is_some() || r.error.is_none())
            };
            let writes: Vec<String> = records
                .iter()
                .filter(left)
                .rev()
                .take(MAX_WRITES)
                .map(|r| match r.status {
                    Some(status) => format!("{} {} -> {status}", r.method, r.url),
                    None => format!("{} {} (no answer yet)", r.method, r.url),
                })
                .collect();
            let reads = records
                .iter()
                .filter(|r| read(&r.method) && r.status.is_some())
                .count();
            let sent = records.iter().filter(left).count();
            (records.len() + dropped, reads + dropped, sent, writes)
        });
        writes.reverse();
        Progress {
            requests,
            reads,
            writes,
            writes_sent,
            console: session.console_line(),
        }
    }
}
