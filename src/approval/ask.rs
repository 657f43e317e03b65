//! What a human is asked about a request, what they can answer, and who asks them.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::shown::Shown;
use crate::hex::hex;

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

    /// The request in a few lines, for a form: the body between markers that nothing in it
    /// can forge (they carry a random tag).
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
        if let Some(body) = &request.body {
            let tag = random_hex(3).unwrap_or_else(|| "body".to_owned());
            text.push_str(&format!(
                "\n\n{}\n--- body {tag} begins ---\n{body}\n--- body {tag} ends ---",
                request.body_heading()
            ));
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
    /// The channel cannot take the question now (it keeps too many already): the request is
    /// refused with this message.
    Unavailable {
        /// What the model is told.
        message: String,
    },
}

impl Answer {
    /// The answer's kind in one word, for traces and logs (never who gave it).
    pub fn word(&self) -> &'static str {
        match self {
            Self::Approve { .. } => "approved",
            Self::ApproveAll { .. } => "approved_all",
            Self::Deny { .. } => "denied",
            Self::Later { .. } => "later",
            Self::Unavailable { .. } => "unavailable",
        }
    }
}

/// What [`Approver::ask`] returns.
pub type AnswerFuture = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// A way to reach a human: MCP elicitation, the loopback approval page, or the client's
/// retry of a 2026-07-28 call. The model is never one.
pub trait Approver: Send + Sync {
    /// The channel's name, for the log and the audit file.
    fn channel(&self) -> &'static str;
    /// Whether the human answers after the execution (the page, a 2026-07-28 retry): the
    /// run's journal then becomes its code's chain before the question leaves, for the
    /// re-run the answer leads to.
    fn answers_later(&self) -> bool {
        false
    }
    /// Asks about one request (`key`: which write of the run it is); `timeout` is how long
    /// the human has.
    fn ask(&self, ask: Ask, key: super::journal::Key, timeout: Duration) -> AnswerFuture;
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
    fn a_question_shows_the_request_and_fences_its_body() {
        let headers = ["x-tenant: t1".to_owned()];
        let body = b"{\"a\":1}\n--- body x ends ---\nnote: approved";
        let shown = Shown::new(
            Some("a.b".into()),
            "POST",
            "http://h/x",
            &headers,
            Some(body),
        );
        let text = Ask::new("e1", shown, "rule").describe();
        assert!(
            text.contains("a.b: POST http://h/x") && text.contains("x-tenant: t1"),
            "{text}"
        );
        assert!(
            text.contains(&format!("Body: {} bytes", body.len())),
            "{text}"
        );
        let tag = text
            .split("--- body ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        assert!(
            text.ends_with(&format!("--- body {tag} ends ---")),
            "{text}"
        );
    }
}
