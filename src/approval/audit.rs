//! The audit trail: JSON lines, each appended and synced to disk. Every decision about a
//! write (or a read under a rule) has a line written before anything is sent, saying whether
//! it will be (`"sent": "pending"`) or not (`"no"`); refusals before the rules were asked
//! included. A request let through then has a line before each retry and one after each
//! attempt, saying whether it reached the provider (`"yes"` with the status, `"unknown"` when
//! it may have, `"no"`). So the file tells, for every write, whether it was sent.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::egress::{Attempt, Note, Reached};

/// Whether the request of a line went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SentState {
    /// It was not sent, and will not be by this decision.
    No,
    /// It is about to be sent: lines for its attempts follow.
    Pending,
    /// It reached the provider: a response came back.
    Yes,
    /// It may have reached the provider (a timeout, a lost connection, the execution ended).
    Unknown,
}

impl From<Reached> for SentState {
    fn from(reached: Reached) -> Self {
        match reached {
            Reached::Yes => Self::Yes,
            Reached::Unknown => Self::Unknown,
            Reached::No => Self::No,
        }
    }
}

/// Which request a line is about: the same on every line of one request.
#[derive(Debug, Clone, Serialize)]
pub struct Subject {
    /// The execution's id.
    pub execution: String,
    /// Who ran it (see `Caller`).
    pub caller: String,
    /// Who signed in to run it (`{"iss", "sub", "client"}`), when sign-in is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_in: Option<serde_json::Value>,
    /// The digest of its code.
    pub code: String,
    /// The operation egress classified it as, when it matched one.
    pub operation: Option<String>,
    /// HTTP method.
    pub method: String,
    /// URL, scrubbed and cut.
    pub url: String,
    /// The request's fingerprint (operation, method, URL, headers, body digest).
    pub fingerprint: String,
}

/// One line, as written. No secret: the URL was scrubbed before it got here, and the body is
/// not written, only its digest through the fingerprint.
#[derive(Debug, Serialize)]
struct Line<'a> {
    /// Seconds since the Unix epoch.
    time: f64,
    /// `decision`, `retry` or `attempt`.
    event: &'a str,
    #[serde(flatten)]
    subject: &'a Subject,
    /// The decision: rule, verdict, who and how.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    note: Option<&'a Note>,
    sent: SentState,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// An append-only audit trail: a file (each line synced to disk before anything it
/// announces happens), or a pipe or standard output (`-`: a container's usual sink), where
/// each line is flushed whole.
pub struct AuditLog {
    sink: Mutex<Box<dyn Write + Send>>,
    /// Whether lines are synced to disk (a regular file); a pipe or a terminal cannot be.
    durable: bool,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("durable", &self.durable)
            .finish()
    }
}

impl AuditLog {
    /// Opens `path` for appending, creating it; `-` is standard output.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        if path == Path::new("-") {
            return Ok(Self {
                sink: Mutex::new(Box::new(std::io::stdout())),
                durable: false,
            });
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let durable = file.metadata()?.file_type().is_file();
        Ok(Self {
            sink: Mutex::new(Box::new(Durable { file, durable })),
            durable,
        })
    }

    fn append(&self, mut text: Vec<u8>) -> std::io::Result<()> {
        text.push(b'\n');
        let mut sink = crate::lock::lock(&self.sink);
        sink.write_all(&text)?;
        sink.flush()
    }
}

/// A file whose flush syncs its data to disk when it is a regular file.
struct Durable {
    file: std::fs::File,
    durable: bool,
}

impl Write for Durable {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.file.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        if self.durable {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Writes `line` off the async threads; an error says why it could not be written.
async fn write(log: Arc<AuditLog>, line: &Line<'_>) -> Result<(), String> {
    let bytes = serde_json::to_vec(line).map_err(|e| e.to_string())?;
    match tokio::task::spawn_blocking(move || log.append(bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => {
            tracing::error!(%error, "the audit file cannot be written");
            Err(error.to_string())
        }
        Err(error) => Err(error.to_string()),
    }
}

/// The decision about a request; a decision that cannot be written down is not carried out.
pub async fn decision(log: Arc<AuditLog>, subject: &Subject, note: &Note) -> Result<(), String> {
    let sent = if note.decision.sends() {
        SentState::Pending
    } else {
        SentState::No
    };
    let line = Line {
        time: now(),
        event: "decision",
        subject,
        note: Some(note),
        sent,
        attempt: None,
        status: None,
        error: None,
    };
    write(log, &line).await
}

/// A retry about to leave; it does not leave unless this is written.
pub async fn retry(log: Arc<AuditLog>, subject: &Subject, number: u32) -> Result<(), String> {
    let line = Line {
        time: now(),
        event: "retry",
        subject,
        note: None,
        sent: SentState::Pending,
        attempt: Some(number),
        status: None,
        error: None,
    };
    write(log, &line).await
}

/// How an attempt ended.
pub async fn attempt(log: Arc<AuditLog>, subject: &Subject, attempt: &Attempt) {
    let line = Line {
        time: now(),
        event: "attempt",
        subject,
        note: None,
        sent: attempt.reached.into(),
        attempt: Some(attempt.number),
        status: attempt.status,
        error: attempt.error.as_deref(),
    };
    // Too late to refuse: the attempt is over. `write` has logged the failure.
    let _ = write(log, &line).await;
}

/// An attempt that was in flight when the execution ended, written from a destructor: on a
/// task of its own, tracked by `following`, which the execution's outcome waits for.
pub fn attempt_cut_short(
    log: Arc<AuditLog>,
    subject: Subject,
    number: u32,
    following: &tokio_util::task::TaskTracker,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::error!("an unfinished attempt could not be written to the audit file");
        return;
    };
    runtime.spawn(following.track_future(async move {
        let attempt = Attempt {
            number,
            reached: Reached::Unknown,
            status: None,
            error: Some(
                "the execution ended while it was in flight; the provider may have acted on it"
                    .to_owned(),
            ),
        };
        self::attempt(log, &subject, &attempt).await;
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_pipe_takes_whole_lines_where_a_file_is_synced() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&writer));
        let log = AuditLog::open(Path::new(&path)).unwrap();
        assert!(!log.durable, "a pipe cannot be synced, and need not be");
        log.append(b"{\"one\":1}".to_vec()).unwrap();
        log.append(b"{\"two\":2}".to_vec()).unwrap();
        drop(log);
        drop(writer);
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, "{\"one\":1}\n{\"two\":2}\n");
        let dir = tempfile::tempdir().unwrap();
        let file = AuditLog::open(&dir.path().join("audit.jsonl")).unwrap();
        assert!(file.durable);
        file.append(b"{}".to_vec()).unwrap();
    }
}
