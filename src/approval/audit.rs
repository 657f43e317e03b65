//! The audit trail: one JSON line per decision about a write (or a read under a rule),
//! appended and synced to disk before the request goes out.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

/// One decision, as written to the audit file. No secret: the URL and body were scrubbed
/// before they got here, and the body is not written, only its digest through the
/// fingerprint.
#[derive(Debug, Serialize)]
pub struct AuditLine<'a> {
    /// Seconds since the Unix epoch.
    pub time: f64,
    /// The execution's id.
    pub execution: &'a str,
    /// The digest of its code.
    pub code: &'a str,
    /// The operation, when the request matched one.
    pub operation: Option<&'a str>,
    /// HTTP method.
    pub method: &'a str,
    /// URL.
    pub url: &'a str,
    /// The request's fingerprint (operation, method, URL, body digest).
    pub fingerprint: &'a str,
    /// The note in the call log: rule, decision, who and how.
    #[serde(flatten)]
    pub note: &'a super::Note,
}

/// An append-only audit file.
#[derive(Debug)]
pub struct AuditLog {
    file: Mutex<std::fs::File>,
}

impl AuditLog {
    /// Opens `path` for appending, creating it.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    /// Appends one line (an [`AuditLine`] as JSON) and syncs it; on failure the caller
    /// refuses the request it is about.
    pub fn append(&self, mut text: Vec<u8>) -> std::io::Result<()> {
        text.push(b'\n');
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        file.write_all(&text)?;
        file.sync_data()
    }
}
