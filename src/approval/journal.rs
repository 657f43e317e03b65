//! The writes a run sent, kept for the re-run that an approval given outside the execution
//! asks for (the approval page, a 2026-07-28 client's retry): the re-run of the same code
//! gets each recorded response back instead of sending the write again. So approving the
//! third write of a script does not send the first two twice.

use serde::{Deserialize, Serialize};

use super::ask::Fingerprint;
use crate::egress::ScriptResponse;

/// Bytes of responses one journal keeps; past them, a response is kept as a note. Ample for
/// what writes return, and small enough to ride in a request state (it is the bulk of one).
pub const MAX_JOURNAL_BYTES: usize = 256 * 1024;

/// One write sent, and what came back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sent {
    /// The request (operation, method, URL, body digest).
    pub fingerprint: Fingerprint,
    /// Its response, scrubbed as the script got it.
    pub response: ScriptResponse,
}

/// The writes of one code's runs, in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Journal {
    entries: Vec<Sent>,
}

impl Journal {
    /// A journal of these writes.
    pub fn new(entries: Vec<Sent>) -> Self {
        Self { entries }
    }

    /// Takes the response of an earlier identical write, if there is one: each entry
    /// answers one write.
    pub fn take(&mut self, fingerprint: &Fingerprint) -> Option<ScriptResponse> {
        let at = self
            .entries
            .iter()
            .position(|e| &e.fingerprint == fingerprint)?;
        Some(self.entries.remove(at).response)
    }

    /// Records a write that was sent (every one: the request budget bounds their number); a
    /// response that would make the journal larger than [`MAX_JOURNAL_BYTES`] is kept as a
    /// note without its headers and body, so the write is still never sent twice.
    pub fn record(&mut self, fingerprint: Fingerprint, response: &ScriptResponse) {
        let size = |r: &ScriptResponse| {
            r.body.len()
                + r.headers
                    .iter()
                    .map(|(k, v)| k.len() + v.len())
                    .sum::<usize>()
        };
        let kept: usize = self.entries.iter().map(|e| size(&e.response)).sum();
        let mut response = response.clone();
        if kept + size(&response) > MAX_JOURNAL_BYTES {
            response.headers.clear();
            response.body = serde_json::json!({
                "x-sdkbox-replayed": "this write was sent by an earlier run of the same code; its \
                                      response was too large to keep, and the write was not sent again"
            })
            .to_string();
        }
        self.entries.push(Sent {
            fingerprint,
            response,
        });
    }

    /// The writes in it.
    pub fn entries(self) -> Vec<Sent> {
        self.entries
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_recorded_write_answers_one_identical_write() {
        let mut journal = Journal::default();
        let a = Fingerprint("a".into());
        journal.record(a.clone(), &ScriptResponse::ok_for_tests("first"));
        journal.record(a.clone(), &ScriptResponse::ok_for_tests("second"));
        assert!(journal.take(&Fingerprint("b".into())).is_none());
        assert_eq!(journal.take(&a).unwrap().body, "first");
        assert_eq!(journal.take(&a).unwrap().body, "second");
        assert!(journal.take(&a).is_none());
    }

    #[test]
    fn a_journal_is_bounded_but_never_forgets_a_write() {
        let mut journal = Journal::default();
        let big = "x".repeat(MAX_JOURNAL_BYTES);
        journal.record(Fingerprint("a".into()), &ScriptResponse::ok_for_tests(&big));
        journal.record(Fingerprint("b".into()), &ScriptResponse::ok_for_tests(&big));
        let b = journal.take(&Fingerprint("b".into())).unwrap();
        assert!(b.body.contains("not sent again"), "{}", b.body.len());
    }
}
