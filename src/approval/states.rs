//! Request states of 2026-07-28 approvals: what one round of a code hands the client's retry
//! (the writes asked about, decisions not used yet, the journal), sealed with HMAC by rmcp's
//! `RequestStateCodec`, bound to the caller's code digest and expiring.
//!
//! A state answers one retry. Its serial number is remembered once it is opened; a state is
//! also marked with the epoch of the process that sealed it (random at each start). A state
//! from another epoch (a restart, or another replica sharing `--approval-key-env`), or one
//! whose serial was forgotten to keep memory bounded, cannot be proved unused: its journal is
//! still honoured (no write it records is sent again), but its approvals are not, and the
//! human is asked again. So no state approves a write twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
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
use crate::lock::lock;

/// Writes one input-required result asks about at most; others ask again on the retry. The
/// result as a whole is held to [`MAX_ANSWER_BYTES`]: past it, fewer are asked.
const MAX_ASKED: usize = 4;

/// Serials remembered at most; past this, the oldest are forgotten and states up to them
/// count as foreign (their approvals are asked again).
const MAX_USED: usize = 10_000;

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
    /// The process that sealed it.
    epoch: String,
    /// Its number in that process: a state is opened once.
    serial: u64,
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
    epoch: String,
    used: Mutex<Used>,
}

#[derive(Default)]
struct Used {
    next: u64,
    /// Serials opened, with when their states expire.
    opened: BTreeMap<u64, tokio::time::Instant>,
    by_expiry: BTreeSet<(tokio::time::Instant, u64)>,
    /// States up to this serial may have been opened and forgotten.
    forgotten_up_to: Option<u64>,
}

impl RequestStates {
    /// States sealed with `key` (every replica that serves one client needs the same), living
    /// for `lifetime`.
    pub fn new(key: &[u8], lifetime: Duration) -> Result<Self, String> {
        let codec = RequestStateCodec::try_new(key.to_vec()).map_err(|e| e.to_string())?;
        let epoch = random_hex(16).ok_or("no randomness for the request-state epoch")?;
        Ok(Self {
            codec,
            lifetime,
            epoch,
            used: Mutex::default(),
        })
    }

    /// The input-required result asking about `waiting` writes of the code with this digest,
    /// carrying what this round hands the next.
    pub fn input_required(
        &self,
        code: &str,
        waiting: &[(Ask, Key)],
        carried: Carried,
    ) -> Result<InputRequiredResult, String> {
        let serial = {
            let mut used = lock(&self.used);
            used.next += 1;
            used.next
        };
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
                epoch: self.epoch.clone(),
                serial,
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

    /// Reads a retry: the state must be ours, unexpired and for this code, and unused; each
    /// accepted answer approves its write, any other answer (or none) denies it.
    pub fn open(
        &self,
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
        let asked_again = self.spend(&sealed)?;
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
    /// (another epoch, a forgotten serial) is accepted with its approvals dropped, and this
    /// says why.
    fn spend(&self, sealed: &Sealed) -> Result<Option<String>, String> {
        if sealed.epoch != self.epoch {
            return Ok(Some(
                "the answer came back to another server instance, or after a restart, which \
                 cannot tell whether it was used already"
                    .to_owned(),
            ));
        }
        let mut used = lock(&self.used);
        let now = tokio::time::Instant::now();
        // States past their lifetime no longer open: their serials need not be kept.
        while let Some(&(expires, serial)) = used.by_expiry.first()
            && expires <= now
        {
            used.by_expiry.pop_first();
            used.opened.remove(&serial);
        }
        if used.opened.contains_key(&sealed.serial) {
            return Err(
                "this requestState was already used: each approval answers one retry; run the \
                 code again without it"
                    .to_owned(),
            );
        }
        if used
            .forgotten_up_to
            .is_some_and(|up_to| sealed.serial <= up_to)
        {
            return Ok(Some(
                "the server had to forget which answers were used to stay within its memory"
                    .to_owned(),
            ));
        }
        if used.opened.len() >= MAX_USED
            && let Some((&oldest, &expires)) = used.opened.iter().next()
        {
            used.opened.remove(&oldest);
            used.by_expiry.remove(&(expires, oldest));
            used.forgotten_up_to = Some(used.forgotten_up_to.unwrap_or(0).max(oldest));
        }
        let expires = now + self.lifetime;
        used.opened.insert(sealed.serial, expires);
        used.by_expiry.insert((expires, sealed.serial));
        Ok(None)
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

    #[test]
    fn a_request_state_answers_one_retry_for_its_own_code_only() {
        let states = RequestStates::new(&[7; 32], Duration::from_secs(60)).unwrap();
        let required = states
            .input_required("code", &waiting(), Carried::default())
            .unwrap();
        let state = required.request_state.unwrap();
        assert!(states.open("other code", &state, Some(&yes())).is_err());
        let opened = states.open("code", &state, Some(&yes())).unwrap();
        assert_eq!(opened.carried.approved, [write("w")]);
        assert!(opened.asked_again.is_none());
        let again = states.open("code", &state, Some(&yes())).unwrap_err();
        assert!(again.contains("already used"), "{again}");
        let mut forged = state.clone();
        forged.push('x');
        assert!(states.open("code", &forged, Some(&yes())).is_err());
    }

    #[test]
    fn after_a_restart_a_state_keeps_its_journal_and_loses_its_approvals() {
        let key = [9; 32];
        let before = RequestStates::new(&key, Duration::from_secs(60)).unwrap();
        let carried = Carried {
            journal: vec![Sent {
                key: write("sent"),
                fate: super::super::journal::Fate::Unknown("x".into()),
            }],
            ..Carried::default()
        };
        let state = before
            .input_required("code", &waiting(), carried)
            .unwrap()
            .request_state
            .unwrap();
        let after = RequestStates::new(&key, Duration::from_secs(60)).unwrap();
        for _ in 0..2 {
            let opened = after.open("code", &state, Some(&yes())).unwrap();
            assert!(opened.carried.approved.is_empty());
            assert_eq!(opened.carried.journal.len(), 1);
            assert!(opened.asked_again.unwrap().contains("restart"));
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
            }],
            ..Carried::default()
        };
        let required = states.input_required("code", &waiting, carried).unwrap();
        let size = serde_json::to_vec(&required).unwrap().len();
        assert!(size <= MAX_ANSWER_BYTES, "{size}");
        assert!(!required.input_requests.unwrap().is_empty());
    }
}
