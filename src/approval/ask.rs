//! What a human is asked about a request, what they can answer, and who asks them.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::hex::hex;

/// Characters of a URL, header or body a human is shown; a request with a longer one is not
/// put to a human at all (they approve only what they can see whole).
pub const MAX_SHOWN: usize = 8_000;

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
    /// The headers the script or the SDK set (`name: value`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// The body, pretty-printed when it is JSON, cut to a given length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

impl Shown {
    /// Shows a request, its URL, headers and body each cut to `max` characters (for a human
    /// who is asked, nothing is cut: see [`Shown::whole`]).
    pub fn new(
        operation: Option<String>,
        method: &str,
        url: &str,
        headers: &[String],
        body: Option<&[u8]>,
        max: usize,
    ) -> Self {
        let body = body.filter(|b| !b.is_empty()).map(|bytes| {
            let text = match serde_json::from_slice::<serde_json::Value>(bytes) {
                Ok(value) => serde_json::to_string_pretty(&value)
                    .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned()),
                Err(_) => String::from_utf8_lossy(bytes).into_owned(),
            };
            crate::egress::cut(&text, max)
        });
        Self {
            operation,
            method: method.to_owned(),
            url: crate::egress::cut(url, max),
            headers: headers.iter().map(|h| crate::egress::cut(h, max)).collect(),
            body,
        }
    }

    /// Whether nothing of the request was cut: a human approves only what they can see
    /// whole.
    pub fn whole(&self) -> bool {
        let cut = |text: &str| text.ends_with(" chars]") && text.contains("… [");
        !cut(&self.url)
            && !self.headers.iter().any(|h| cut(h))
            && !self.body.as_deref().is_some_and(cut)
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
        let request = &self.request;
        let what = match &request.operation {
            Some(op) => format!("{op}: {} {}", request.method, request.url),
            None => format!("{} {}", request.method, request.url),
        };
        let mut text = format!(
            "An agent's script (execution {}) wants to send a request that needs your approval \
             ({}).\n\n{what}",
            self.execution, self.because
        );
        for header in &request.headers {
            text.push('\n');
            text.push_str(header);
        }
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
    /// The fingerprint of a request: `headers` are the ones the script or the SDK set
    /// (`name: value`, in any order: they are sorted).
    pub fn of(
        operation: Option<&str>,
        method: &str,
        url: &str,
        headers: &[String],
        body: Option<&[u8]>,
    ) -> Self {
        let mut hash = Sha256::new();
        let mut headers: Vec<&String> = headers.iter().collect();
        headers.sort();
        let parts = [operation.unwrap_or(""), method, url]
            .into_iter()
            .chain(headers.into_iter().map(String::as_str));
        for part in parts {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
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

/// `bytes` random bytes as hex, for ids that must not be guessed; `None` without randomness,
/// which every caller treats as a refusal, never as an empty id.
pub fn random_hex(bytes: usize) -> Option<String> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).ok()?;
    Some(hex(&buffer))
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
        let of = |op: Option<&str>, method, url, headers: &[&str], body: &[u8]| {
            let headers: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
            Fingerprint::of(op, method, url, &headers, Some(body))
        };
        let base = of(Some("a.b"), "POST", "http://h/x", &["a: 1", "b: 2"], b"{}");
        assert_eq!(
            base,
            of(Some("a.b"), "POST", "http://h/x", &["b: 2", "a: 1"], b"{}"),
            "header order does not matter"
        );
        for other in [
            of(None, "POST", "http://h/x", &["a: 1", "b: 2"], b"{}"),
            of(Some("a.b"), "PUT", "http://h/x", &["a: 1", "b: 2"], b"{}"),
            of(Some("a.b"), "POST", "http://h/y", &["a: 1", "b: 2"], b"{}"),
            of(Some("a.b"), "POST", "http://h/x", &["a: 1", "b: 3"], b"{}"),
            of(Some("a.b"), "POST", "http://h/x", &["a: 1"], b"{}"),
            of(Some("a.b"), "POST", "http://h/x", &["a: 1", "b: 2"], b"{ }"),
            of(Some("a.bP"), "OST", "http://h/x", &["a: 1", "b: 2"], b"{}"),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn a_human_sees_the_body_pretty_and_whole_or_not_at_all() {
        let json = Some(br#"{"a":1}"#.as_slice());
        let headers = ["x-tenant: t1".to_owned()];
        let shown = Shown::new(None, "POST", "http://h/x", &headers, json, MAX_SHOWN);
        assert_eq!(shown.body.as_deref(), Some("{\n  \"a\": 1\n}"));
        assert!(shown.whole());
        let big = vec![b'x'; 10_000];
        let shown = Shown::new(None, "POST", "http://h/x", &[], Some(&big), MAX_SHOWN);
        assert!(shown.body.as_ref().unwrap().chars().count() < MAX_SHOWN + 30);
        assert!(!shown.whole());
        let long_url = format!("http://h/x?{}&evil=1", "a".repeat(MAX_SHOWN));
        assert!(!Shown::new(None, "POST", &long_url, &[], None, MAX_SHOWN).whole());
        let shown = Shown::new(
            Some("a.b".into()),
            "POST",
            "http://h/x",
            &headers,
            json,
            100,
        );
        let text = Ask::new("e1", shown, "rule").describe();
        assert!(
            text.contains("a.b: POST http://h/x") && text.contains("x-tenant: t1"),
            "{text}"
        );
    }
}
