//! What a human is asked about a request, what they can answer, and who asks them.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Characters of a request body shown to the human.
pub const MAX_SHOWN_BODY: usize = 2_000;

/// A request as a human sees it: what it calls and what it sends, no secret (the script never
/// had it, and what is shown is scrubbed again), bounded, readable.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Shown {
    /// The spec operation (`refunds.create`), when the request matched one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// HTTP method.
    pub method: String,
    /// The URL, query included.
    pub url: String,
    /// The body, pretty-printed when it is JSON, cut to a given length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

impl Shown {
    /// Shows a request, its body cut to `max_body` characters.
    pub fn new(
        operation: Option<String>,
        method: &str,
        url: &str,
        body: Option<&[u8]>,
        max_body: usize,
    ) -> Self {
        let body = body.filter(|b| !b.is_empty()).map(|bytes| {
            let text = match serde_json::from_slice::<serde_json::Value>(bytes) {
                Ok(value) => serde_json::to_string_pretty(&value)
                    .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned()),
                Err(_) => String::from_utf8_lossy(bytes).into_owned(),
            };
            crate::egress::cut(&text, max_body)
        });
        Self {
            operation,
            method: method.to_owned(),
            url: crate::egress::cut(url, crate::egress::MAX_LOGGED_URL),
            body,
        }
    }

    /// The request in a few words: `refunds.create (POST https://…/refunds)`.
    pub fn what(&self) -> String {
        let url = crate::egress::cut(&self.url, 200);
        match &self.operation {
            Some(op) => format!("{op} ({} {url})", self.method),
            None => format!("{} {url}", self.method),
        }
    }
}

/// One request waiting for a human decision, and which execution asks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ask {
    /// Which execution asks: a short id.
    pub execution: String,
    /// The request.
    #[serde(flatten)]
    pub request: Shown,
    /// Why it needs approval: the rule's source.
    pub because: String,
}

impl Ask {
    /// Asks about `request` for `execution`, because of the rule from `because`.
    pub fn new(execution: &str, request: Shown, because: &str) -> Self {
        Self {
            execution: execution.to_owned(),
            request,
            because: because.to_owned(),
        }
    }

    /// The request in a few lines, for a form or a page.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "An agent's script (execution {}) wants to send a request that needs your approval \
             ({}).\n\n{}",
            self.execution,
            self.because,
            self.request.what()
        );
        if let Some(body) = &self.request.body {
            text.push_str("\n\nBody:\n");
            text.push_str(body);
        }
        text
    }
}

/// Exactly one request: its operation, method, URL and a digest of its body. A re-run's
/// request goes out under an approval only if its fingerprint is the approved one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fingerprint(pub String);

impl Fingerprint {
    /// The fingerprint of a request.
    pub fn of(operation: Option<&str>, method: &str, url: &str, body: Option<&[u8]>) -> Self {
        let mut hash = Sha256::new();
        for part in [
            operation.unwrap_or("").as_bytes(),
            method.as_bytes(),
            url.as_bytes(),
        ] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
        hash.update(Sha256::digest(body.unwrap_or_default()));
        Self(hex(&hash.finalize()))
    }
}

/// The digest an approval is bound to: the code, and who runs it (the egress identity).
/// Approving a write of one script approves nothing for another, nor for another caller
/// running the same script.
pub fn code_digest(caller: u64, code: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(caller.to_le_bytes());
    hash.update(code.as_bytes());
    hex(&hash.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A human's answer, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Send this request.
    Approve {
        /// Who approved, as the channel knows them (`the user`).
        by: String,
    },
    /// Send this and every later write of the same execution.
    ApproveAll {
        /// Who approved.
        by: String,
    },
    /// Do not send it.
    Deny {
        /// Who denied, and how (`declined`, `cancelled`).
        by: String,
    },
    /// The decision will come later, outside this execution: the script's call fails with
    /// this message, which tells the model what to show the user and to run the code again.
    Later {
        /// What the model is told.
        message: String,
    },
}

/// What [`Approver::ask`] returns.
pub type AnswerFuture = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// A way to reach a human: MCP elicitation, the loopback approval page, or the client's
/// retry of a 2026-07-28 call. The model is never one.
pub trait Approver: Send + Sync {
    /// The channel's name, for the log and the audit file.
    fn channel(&self) -> &'static str;
    /// Asks about one request; `timeout` is how long the human has.
    fn ask(&self, ask: Ask, fingerprint: Fingerprint, timeout: Duration) -> AnswerFuture;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_changes_with_every_part() {
        let base = Fingerprint::of(Some("a.b"), "POST", "http://h/x", Some(b"{}"));
        assert_eq!(
            base,
            Fingerprint::of(Some("a.b"), "POST", "http://h/x", Some(b"{}"))
        );
        for other in [
            Fingerprint::of(None, "POST", "http://h/x", Some(b"{}")),
            Fingerprint::of(Some("a.b"), "PUT", "http://h/x", Some(b"{}")),
            Fingerprint::of(Some("a.b"), "POST", "http://h/y", Some(b"{}")),
            Fingerprint::of(Some("a.b"), "POST", "http://h/x", Some(b"{ }")),
            Fingerprint::of(Some("a.bP"), "OST", "http://h/x", Some(b"{}")),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn a_human_sees_the_body_pretty_and_bounded() {
        let json = Some(br#"{"a":1}"#.as_slice());
        let shown = Shown::new(None, "POST", "http://h/x", json, MAX_SHOWN_BODY);
        assert_eq!(shown.body.as_deref(), Some("{\n  \"a\": 1\n}"));
        let big = vec![b'x'; 10_000];
        let shown = Shown::new(None, "POST", "http://h/x", Some(&big), MAX_SHOWN_BODY);
        assert!(shown.body.unwrap().chars().count() < MAX_SHOWN_BODY + 30);
        let ask = Ask::new(
            "e1",
            Shown::new(Some("a.b".into()), "POST", "http://h/x", json, 10),
            "rule",
        );
        assert!(
            ask.describe().contains("a.b (POST http://h/x)"),
            "{}",
            ask.describe()
        );
    }
}
