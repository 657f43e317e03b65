//! Request states of 2026-07-28 approvals: what one round of a code hands the client's retry
//! (the writes asked about, decisions not used yet, the journal), sealed with HMAC by rmcp's
//! `RequestStateCodec`, bound to the caller's code digest and expiring.
//!
//! A state answers one retry, on whichever replica it lands: its serial (random) is spent in
//! the state store when it is opened, once. A state is also marked with the store's epoch: a
//! state of another epoch (the store lost its records: a restart with the memory store, a
//! flushed Redis) cannot be proved unused: its journal is still honoured (no write it records
//! is sent again, but with the idempotency key it left with when no answer came back), but
//! its approvals are not, and the human is asked again. So no state approves a write twice.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitResult, InputRequest, InputRequiredResult, InputResponses,
    RequestStateCodec, SealOptions,
};
use serde::{Deserialize, Serialize};

use super::ask::{Answer, Ask, Fingerprint, random_hex};
use super::journal::{Key, Sent};
use super::mcp::{answer, form};
use crate::answer::MAX_ANSWER_BYTES;
use crate::state::{Spent, StateStore};

/// Writes one input-required result asks about at most; others ask again on the retry. The
/// result as a whole is held to [`MAX_ANSWER_BYTES`]: past it, fewer are asked.
const MAX_ASKED: usize = 4;

/// What one round of a code hands the next: decisions not used yet, and the writes sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Carried {
    /// Writes a human approved that have not gone out yet.
    pub approved: Vec<Key>,
    /// Writes a human denied, and who did.
    pub denied: Vec<(Fingerprint, String)>,
    /// Who approved every write of this code's runs, if someone did.
    pub all: Option<String>,
    /// The writes earlier rounds sent, and what became of them.
    pub journal: Vec<Sent>,
}

/// What a sealed request state carries.
#[derive(Debug, Serialize, Deserialize)]
struct Sealed {
    /// The epoch of the store it was sealed under.
    epoch: String,
    /// Its serial: a state is opened once.
    serial: String,
    /// The writes asked about, by the key of their question.
    writes: Vec<(String, Key)>,
    carried: Carried,
}

/// A retry, read: what it carries, and whether its approvals count.
#[derive(Debug)]
pub struct Opened {
    /// Decisions (the retry's answers added) and the journal.
    pub carried: Carried,
    /// Why its approvals were dropped and are asked again, if they were.
    pub asked_again: Option<String>,
}

/// Seals and opens request states.
pub struct RequestStates {
    codec: RequestStateCodec,
    lifetime: Duration,
}

impl RequestStates {
    /// States sealed with `key` (every replica that serves one client needs the same), living
    /// for `lifetime`.
    pub fn new(key: &[u8], lifetime: Duration) -> Result<Self, String> {
        let codec = RequestStateCodec::try_new(key.to_vec()).map_err(|e| e.to_string())?;
        Ok(Self { codec, lifetime })
    }

    /// The input-required result asking about `waiting` writes of the code with this digest,
    /// carrying what this round hands the next, sealed under the store's `epoch`.
    pub fn input_required(
        &self,
        code: &str,
        waiting: &[(Ask, Key)],
        carried: Carried,
        epoch: &str,
    ) -> Result<InputRequiredResult, String> {
        let serial = random_hex(16).ok_or("no randomness for a request state")?;
        // As many questions as fit in one answer with the state; the others are asked on the
        // retry (at least one always fits: a question and the journal are bounded).
        let mut asked = waiting.len().min(MAX_ASKED);
        loop {
            let mut requests = BTreeMap::new();
            let mut writes = Vec::new();
            for (n, (ask, write)) in waiting.iter().take(asked).enumerate() {
                let key = format!("approve-{n}");
                requests.insert(
                    key.clone(),
                    InputRequest::Elicitation(ElicitRequest::new(form(ask))),
                );
                writes.push((key, write.clone()));
            }
            let sealed = Sealed {
                epoch: epoch.to_owned(),
                serial: serial.clone(),
                writes,
                carried: carried.clone(),
            };
            let options = SealOptions::new()
                .associated_data(code.as_bytes())
                .ttl(self.lifetime);
            let state = self
                .codec
                .seal_json_with(&sealed, &options)
                .map_err(|e| e.to_string())?;
            let result = InputRequiredResult::new(Some(requests), Some(state));
            let size = serde_json::to_vec(&result).map_or(usize::MAX, |bytes| bytes.len());
            if size <= MAX_ANSWER_BYTES {
                return Ok(result);
            }
            if asked <= 1 {
                return Err(format!(
                    "the input-required result would be {size} bytes, over {MAX_ANSWER_BYTES}"
                ));
            }
            asked -= 1;
        }
    }

    /// Reads a retry: the state must be ours, unexpired and for this code, and unused (spent
    /// in `store` now); each accepted answer approves its write, any other answer (or none)
    /// denies it.
    pub async fn open(
        &self,
        store: &StateStore,
        code: &str,
        state: &str,
        responses: Option<&InputResponses>,
    ) -> Result<Opened, String> {
        let sealed: Sealed = self
            .codec
            .open_json_with(state, code.as_bytes())
            .map_err(|e| {
                format!(
                    "the requestState is not one this server made for this code and caller, or \
                     it expired ({e}); run the code again without it"
                )
            })?;
        let asked_again = self.spend(store, &sealed).await?;
        let mut carried = sealed.carried;
        for (key, write) in sealed.writes {
            let result = responses
                .and_then(|r| r.get(&key))
                .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
            let answer = match &result {
                Some(result) => answer(result, "the user"),
                None => Answer::Deny {
                    by: "nobody (no answer came with the retry)".to_owned(),
                },
            };
            match answer {
                Answer::Approve { .. } => carried.approved.push(write),
                Answer::ApproveAll { by } => carried.all = Some(by),
                Answer::Deny { by } => carried.denied.push((write.fingerprint, by)),
                Answer::Later { .. } | Answer::Unavailable { .. } => {}
            }
        }
        if asked_again.is_some() {
            // Denials are safe to keep; approvals are asked again.
            carried.approved.clear();
            carried.all = None;
        }
        Ok(Opened {
            carried,
            asked_again,
        })
    }

    /// Marks a state used. A state seen before is refused; one that cannot be proved unused
    /// (another epoch of the store) is accepted with its approvals dropped, and this says why.
    async fn spend(&self, store: &StateStore, sealed: &Sealed) -> Result<Option<String>, String> {
        let spent = store
            .spend(&sealed.epoch, &sealed.serial, self.lifetime)
            .await
            .map_err(|error| {
                format!("the approvals cannot be checked now ({error}); retry shortly")
            })?;
        match spent {
            Spent::Fresh => Ok(None),
            Spent::Used => Err(
                "this requestState was already used: each approval answers one retry; run the \
                 code again without it"
                    .to_owned(),
            ),
            Spent::Foreign => Ok(Some(
                "the server's state store was restarted or lost its records since the question \
                 was asked, so nobody can tell whether the answer was used already"
                    .to_owned(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::Shown;
    use serde_json::json;

    fn write(fingerprint: &str) -> Key {
        Key {
            fingerprint: Fingerprint(fingerprint.into()),
            occurrence: 0,
            slot: "POST x".into(),
            slot_occurrence: 0,
        }
    }

    fn waiting() -> [(Ask, Key); 1] {
        let shown = Shown::new(None, "POST", "http://h/x", &[], None);
        [(Ask::new("e1", shown, "rule"), write("w"))]
    }

    fn yes() -> InputResponses {
        [(
            "approve-0".to_owned(),
            json!({"action": "accept", "content": {"decision": "approve"}}),
        )]
        .into()
    }

    #[tokio::test]
    async fn a_request_state_answers_one_retry_for_its_own_code_only() {
        let store = StateStore::memory("t");
        let states = RequestStates::new(&[7; 32], Duration::from_secs(60)).unwrap();
        let required = states
            .input_required("code", &waiting(), Carried::default(), &store.epoch())
            .unwrap();
        let state = required.request_state.unwrap();
        assert!(
            states
                .open(&store, "other code", &state, Some(&yes()))
                .await
                .is_err()
        );
        let opened = states
            .open(&store, "code", &state, Some(&yes()))
            .await
            .unwrap();
        assert_eq!(opened.carried.approved, [write("w")]);
        assert!(opened.asked_again.is_none());
        let again = states
            .open(&store, "code", &state, Some(&yes()))
            .await
            .unwrap_err();
        assert!(again.contains("already used"), "{again}");
        let mut forged = state.clone();
        forged.push('x');
        assert!(
            states
                .open(&store, "code", &forged, Some(&yes()))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_state_sealed_by_one_replica_is_spent_once_by_any_replica_of_the_deployment() {
        let store = StateStore::memory("t");
        let one = RequestStates::new(&[7; 32], Duration::from_secs(60)).unwrap();
        let other = RequestStates::new(&[7; 32], Duration::from_secs(60)).unwrap();
        let state = one
            .input_required("code", &waiting(), Carried::default(), &store.epoch())
            .unwrap()
            .request_state
            .unwrap();
        let opened = other
            .open(&store, "code", &state, Some(&yes()))
            .await
            .unwrap();
        assert_eq!(opened.carried.approved, [write("w")]);
        assert!(opened.asked_again.is_none());
        let again = one
            .open(&store, "code", &state, Some(&yes()))
            .await
            .unwrap_err();
        assert!(again.contains("already used"), "{again}");
    }

    #[tokio::test]
    async fn after_the_store_lost_its_records_a_state_keeps_its_journal_and_loses_its_approvals() {
        let key = [9; 32];
        let before = StateStore::memory("t");
        let states = RequestStates::new(&key, Duration::from_secs(60)).unwrap();
        let carried = Carried {
            journal: vec![Sent {
                key: write("sent"),
                fate: super::super::journal::Fate::Unknown("x".into()),
                sent_with: None,
            }],
            ..Carried::default()
        };
        let state = states
            .input_required("code", &waiting(), carried, &before.epoch())
            .unwrap()
            .request_state
            .unwrap();
        let after = StateStore::memory("t");
        for _ in 0..2 {
            let opened = states
                .open(&after, "code", &state, Some(&yes()))
                .await
                .unwrap();
            assert!(opened.carried.approved.is_empty());
            assert_eq!(opened.carried.journal.len(), 1);
            assert!(opened.asked_again.unwrap().contains("restarted"));
        }
    }

    #[test]
    fn an_input_required_result_is_bounded_whole() {
        let states = RequestStates::new(&[7; 32], Duration::from_secs(60)).unwrap();
        // Four questions as large as a human is asked, and a journal at its bound.
        let body = format!("{{\"pad\":\"{}\"}}", "\\u0041".repeat(2_600));
        let shown = Shown::new(None, "POST", "http://h/x", &[], Some(body.as_bytes()));
        assert!(shown.whole());
        let waiting: Vec<(Ask, Key)> = (0..4)
            .map(|n| {
                (
                    Ask::new("e1", shown.clone(), "rule"),
                    write(&format!("w{n}")),
                )
            })
            .collect();
        let mut response = crate::egress::ScriptResponse::ok_for_tests(&"\"".repeat(60 * 1024));
        response.headers.clear();
        let carried = Carried {
            journal: vec![Sent {
                key: write("sent"),
                fate: super::super::journal::Fate::Answered(response),
                sent_with: None,
            }],
            ..Carried::default()
        };
        let required = states
            .input_required("code", &waiting, carried, "epoch")
            .unwrap();
        let size = serde_json::to_vec(&required).unwrap().len();
        assert!(size <= MAX_ANSWER_BYTES, "{size}");
        assert!(!required.input_requests.unwrap().is_empty());
    }
}
