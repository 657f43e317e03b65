//! The writes of one code chain: the runs of one caller's code that an approval given outside
//! the execution ties together (the approval page, a 2026-07-28 client's retry). Each write
//! is claimed before it leaves and recorded with what came back; a later run of the chain is
//! answered from the journal instead of sending it again. The journal is append-only: an
//! entry answers the same write in every later run, so any number of rounds and early
//! re-runs send each write once.
//!
//! A write is known two ways: exactly (its fingerprint, and which of the run's identical
//! writes it is), and by its slot (its method and URL, and which of the run's requests to
//! them it is). Only an exact match is answered from the journal. A re-run whose write in a
//! slot has other bytes than the earlier one (a timestamp or a random value in its body, or
//! data that changed) might be the same write or another: it is refused, with what the
//! earlier one got, and never sent twice nor answered with another write's response.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::ask::Fingerprint;
use crate::egress::ScriptResponse;
use crate::lock::lock;

/// Bytes of responses one journal keeps; past them, a response is kept as a note. Ample for
/// what writes return, and small enough to ride in a request state (it is the bulk of one).
pub const MAX_JOURNAL_BYTES: usize = 64 * 1024;

/// Writes one chain records at most; past them, a new write of the chain is refused (a
/// write that was not recorded could be sent again by a re-run).
pub const MAX_JOURNAL_ENTRIES: usize = 500;

/// What became of one write.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// It went out and this came back (scrubbed, as the script got it).
    Answered(ScriptResponse),
    /// It went out, or may have, and no response came back: the provider may have acted on
    /// it. It is never sent again by the chain; the reason says what happened.
    Unknown(String),
}

/// Which write of a run: exactly, and by its slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Key {
    /// The request (operation, method, URL, headers, body digest).
    pub fingerprint: Fingerprint,
    /// Which of the run's identical writes it is, from 0.
    pub occurrence: u32,
    /// Its method and URL.
    pub slot: String,
    /// Which of the run's requests to that slot it is, from 0.
    pub slot_occurrence: u32,
}

impl Key {
    /// Whether `other` is in the same slot (whatever its bytes).
    pub fn same_place(&self, other: &Key) -> bool {
        self.slot == other.slot && self.slot_occurrence == other.slot_occurrence
    }
}

/// One write of the chain, and what became of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sent {
    /// Which write.
    pub key: Key,
    /// What became of it.
    pub fate: Fate,
}

/// What the journal knows of a write a run is about to send.
#[derive(Debug)]
pub enum Found {
    /// An earlier run sent exactly this write: this is what became of it.
    Sent(Fate),
    /// An earlier run sent a write in this slot with other bytes: what became of it.
    SentOtherwise(Fate),
    /// Another run of the chain is sending it now.
    InFlight,
    /// The chain keeps as many writes as it may.
    Full,
    /// Nobody has: it is claimed for the caller.
    New(Claimed),
}

/// The writes of one chain, in the order they were recorded.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Journal {
    entries: Vec<Sent>,
    /// Writes claimed and not yet settled (a few: one run's requests).
    #[serde(skip)]
    in_flight: Vec<Key>,
}

/// A journal shared by the runs of a chain.
pub type SharedJournal = Arc<Mutex<Journal>>;

impl Journal {
    /// A journal of these writes (from a request state).
    pub fn new(entries: Vec<Sent>) -> Self {
        Self {
            entries,
            ..Self::default()
        }
    }

    fn find(&self, key: &Key) -> Option<&Sent> {
        self.entries
            .iter()
            .find(|e| e.key.fingerprint == key.fingerprint && e.key.occurrence == key.occurrence)
    }

    /// Adds the entries of `others` it does not have (a chain's journal met another copy).
    pub fn merge(&mut self, others: Vec<Sent>) {
        for sent in others {
            if self.find(&sent.key).is_none() && self.entries.len() < MAX_JOURNAL_ENTRIES {
                self.entries.push(sent);
            }
        }
    }

    fn settle(&mut self, key: &Key, fate: Option<Fate>) {
        self.in_flight.retain(|k| k != key);
        let Some(mut fate) = fate else {
            return;
        };
        if let Fate::Answered(response) = &mut fate
            && self.bytes() + size(response) > MAX_JOURNAL_BYTES
        {
            response.headers.clear();
            response.body = serde_json::json!({
                "x-sdkbox-replayed": "this write was sent by an earlier run of the same code; its \
                                      response was too large to keep, and the write was not sent again"
            })
            .to_string();
        }
        self.entries.push(Sent {
            key: key.clone(),
            fate,
        });
    }

    /// The journal as the next round gets it: every write recorded, and the ones still in
    /// flight as unknown (the run that sent them has ended).
    pub fn snapshot(&self) -> Vec<Sent> {
        let mut entries = self.entries.clone();
        entries.extend(self.in_flight.iter().map(|key| Sent {
            key: key.clone(),
            fate: Fate::Unknown(
                "the execution that sent it ended before its response arrived".to_owned(),
            ),
        }));
        entries
    }

    /// Bytes of responses kept.
    fn bytes(&self) -> usize {
        self.entries
            .iter()
            .map(|e| match &e.fate {
                Fate::Answered(response) => size(response),
                Fate::Unknown(reason) => reason.len(),
            })
            .sum()
    }
}

fn size(response: &ScriptResponse) -> usize {
    response.body.len()
        + response
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
}

/// A shared journal with these entries.
pub fn shared(entries: Vec<Sent>) -> SharedJournal {
    Arc::new(Mutex::new(Journal::new(entries)))
}

/// Looks a write up in a shared journal; a new one is claimed, and the claim is released
/// (the write may be sent later) unless it is settled with a fate.
pub fn claim(journal: &SharedJournal, key: Key) -> Found {
    let mut locked = lock(journal);
    if let Some(sent) = locked.find(&key) {
        return Found::Sent(sent.fate.clone());
    }
    let in_flight = locked.in_flight.iter().any(|k| {
        (k.fingerprint == key.fingerprint && k.occurrence == key.occurrence) || k.same_place(&key)
    });
    if in_flight {
        return Found::InFlight;
    }
    if let Some(sent) = locked.entries.iter().find(|e| e.key.same_place(&key)) {
        return Found::SentOtherwise(sent.fate.clone());
    }
    if locked.entries.len() >= MAX_JOURNAL_ENTRIES {
        return Found::Full;
    }
    locked.in_flight.push(key.clone());
    Found::New(Claimed {
        journal: journal.clone(),
        key,
        settled: false,
    })
}

/// A write claimed in a chain's journal: settled with what became of it, or released when
/// dropped unsettled (the decision was not to send it, or was never made).
#[derive(Debug)]
pub struct Claimed {
    journal: SharedJournal,
    key: Key,
    settled: bool,
}

impl Claimed {
    /// Ends the claim: with the write's fate when it went out (or may have), with `None`
    /// when it certainly did not. A response that would make the journal larger than
    /// [`MAX_JOURNAL_BYTES`] is kept as a note, so the write is still never sent twice.
    pub fn settle(mut self, fate: Option<Fate>) {
        lock(&self.journal).settle(&self.key, fate);
        self.settled = true;
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if !self.settled {
            lock(&self.journal).settle(&self.key, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(fingerprint: &str, occurrence: u32, slot: &str, slot_occurrence: u32) -> Key {
        Key {
            fingerprint: Fingerprint(fingerprint.into()),
            occurrence,
            slot: slot.into(),
            slot_occurrence,
        }
    }

    fn answered(body: &str) -> Option<Fate> {
        Some(Fate::Answered(ScriptResponse::ok_for_tests(body)))
    }

    fn new(journal: &SharedJournal, key: Key) -> Claimed {
        match claim(journal, key) {
            Found::New(claimed) => claimed,
            other => panic!("not new: {other:?}"),
        }
    }

    #[test]
    fn a_recorded_write_answers_every_later_run_and_identical_writes_count_apart() {
        let journal = shared(Vec::new());
        let first = new(&journal, key("a", 0, "POST c", 0));
        assert!(matches!(
            claim(&journal, key("a", 0, "POST c", 0)),
            Found::InFlight
        ));
        first.settle(answered("first"));
        new(&journal, key("a", 1, "POST c", 1)).settle(answered("second"));
        for _ in 0..3 {
            // Append-only: answering a write does not use its entry up.
            let Found::Sent(Fate::Answered(one)) = claim(&journal, key("a", 0, "POST c", 0)) else {
                panic!("not recorded");
            };
            assert_eq!(one.body, "first");
            let Found::Sent(Fate::Answered(two)) = claim(&journal, key("a", 1, "POST c", 1)) else {
                panic!("not recorded");
            };
            assert_eq!(two.body, "second");
        }
        // The same place with other bytes (a timestamp in the body) is that write.
        let Found::SentOtherwise(Fate::Answered(other)) = claim(&journal, key("b", 0, "POST c", 0))
        else {
            panic!("not found by its slot");
        };
        assert_eq!(other.body, "first");
        assert!(matches!(
            claim(&journal, key("c", 0, "POST d", 0)),
            Found::New(_)
        ));
    }

    #[test]
    fn a_dropped_claim_is_released_and_one_in_flight_is_unknown_to_the_next_round() {
        let journal = shared(Vec::new());
        drop(new(&journal, key("a", 0, "s", 0)));
        let held = new(&journal, key("a", 0, "s", 0));
        let next = shared(lock(&journal).snapshot());
        assert!(matches!(
            claim(&next, key("a", 0, "s", 0)),
            Found::Sent(Fate::Unknown(_))
        ));
        held.settle(None);
    }

    #[test]
    fn a_journal_is_bounded_but_never_forgets_a_write() {
        let journal = shared(Vec::new());
        let big = "x".repeat(MAX_JOURNAL_BYTES);
        new(&journal, key("a", 0, "s", 0)).settle(answered(&big));
        new(&journal, key("b", 0, "s", 1)).settle(answered(&big));
        let Found::Sent(Fate::Answered(kept)) = claim(&journal, key("b", 0, "s", 1)) else {
            panic!("forgotten");
        };
        assert!(kept.body.contains("not sent again"), "{}", kept.body.len());
        for n in 2..MAX_JOURNAL_ENTRIES as u32 {
            new(&journal, key("c", n, "t", n)).settle(Some(Fate::Unknown("x".into())));
        }
        assert!(matches!(claim(&journal, key("d", 0, "u", 0)), Found::Full));
    }
}
