//! What a running execution has done so far, read while it runs (a task's progress): the
//! requests its egress session logged, the writes among them, and the script's latest
//! console line. Nothing here changes the run.

use std::sync::{Arc, Mutex};

use crate::egress::{EgressSession, UNFINISHED};
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
        let (records, dropped) = session.calls();
        let read = |method: &str| matches!(method, "GET" | "HEAD");
        let mut writes: Vec<String> = records
            .iter()
            .filter(|r| !read(&r.method))
            .filter(|r| r.status.is_some() || r.error.as_deref() == Some(UNFINISHED))
            .filter(|r| !r.planned())
            .map(|r| match r.status {
                Some(status) => format!("{} {} -> {status}", r.method, r.url),
                None => format!("{} {} (no answer yet)", r.method, r.url),
            })
            .collect();
        let writes_sent = writes.len();
        if writes.len() > MAX_WRITES {
            writes.drain(..writes.len() - MAX_WRITES);
        }
        Progress {
            requests: records.len() + dropped,
            reads: records
                .iter()
                .filter(|r| read(&r.method) && r.status.is_some())
                .count()
                + dropped,
            writes,
            writes_sent,
            console: session.console_line(),
        }
    }
}
