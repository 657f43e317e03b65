//! The writes of one code chain: the runs of one caller's code that an approval given outside
//! the execution ties together (the approval page, a 2026-07-28 client's retry). Each write
//! is claimed before it leaves and recorded with what came back; a later run of the chain is
//! answered from the journal instead of sending it again. The journal is append-only: an
//! entry answers the same write in every later run, so any number of rounds and early
//! re-runs send each write once.
//!
//! A write is known by its fingerprint and its occurrence (the n-th identical write of a
//! run), so a script that sends the same request twice on purpose has two entries.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::ask::Fingerprint;
use crate::egress::ScriptResponse;
use crate::lock::lock;

/// Bytes of responses one journal keeps; past them, a response is kept as a note. Ample for
/// what writes return, and small enough to ride in a request state (it is the bulk of one).
pub const MAX_JOURNAL_BYTES: usize = 256 * 1024;

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

/// One write of the chain, and what became of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sent {
    /// The request (operation, method, URL, headers, body digest).
    pub fingerprint: Fingerprint,
    /// Which of the run's identical writes it is, from 0.
    pub occurrence: u32,
    /// What became of it.
    pub fate: Fate,
}

/// What the journal knows of a write a run is about to send.
#[derive(Debug, Clone)]
pub enum Claim {
    /// An earlier run sent it: this is what became of it.
    Sent(Fate),
    /// Another run of the chain is sending it now.
    InFlight,
    /// Nobody has: the caller may send it, and must settle the claim.
    New,
}

/// The writes of one chain, in the order they were recorded.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Journal {
    entries: Vec<Sent>,
    /// Writes claimed and not yet settled.
    #[serde(skip)]
    in_flight: HashSet<(Fingerprint, u32)>,
}

/// A journal shared by the runs of a chain that are going on at once.
pub type SharedJournal = Arc<Mutex<Journal>>;

impl Journal {
    /// A journal of these writes (from a request state).
    pub fn new(entries: Vec<Sent>) -> Self {
        Self {
            entries,
            in_flight: HashSet::new(),
        }
    }

    /// Looks up a write; a new one is claimed for the caller, who must [`Journal::settle`]
    /// it.
    pub fn claim(&mut self, fingerprint: &Fingerprint, occurrence: u32) -> Claim {
        if let Some(sent) = self
            .entries
            .iter()
            .find(|e| &e.fingerprint == fingerprint && e.occurrence == occurrence)
        {
            return Claim::Sent(sent.fate.clone());
        }
        if !self.in_flight.insert((fingerprint.clone(), occurrence)) {
            return Claim::InFlight;
        }
        Claim::New
    }

    /// Ends a claim: with the write's fate when it went out (or may have), with `None` when
    /// it certainly did not (it may be sent later). A response that would make the journal
    /// larger than [`MAX_JOURNAL_BYTES`] is kept as a note without its headers and body, so
    /// the write is still never sent twice.
    pub fn settle(&mut self, fingerprint: &Fingerprint, occurrence: u32, fate: Option<Fate>) {
        self.in_flight.remove(&(fingerprint.clone(), occurrence));
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
            fingerprint: fingerprint.clone(),
            occurrence,
            fate,
        });
    }

    /// The journal as the next round gets it: every write recorded, and the ones still in
    /// flight as unknown (the run that sent them has ended).
    pub fn snapshot(&self) -> Vec<Sent> {
        let mut entries = self.entries.clone();
        entries.extend(self.in_flight.iter().map(|(fingerprint, occurrence)| Sent {
            fingerprint: fingerprint.clone(),
            occurrence: *occurrence,
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

/// Claims a write in a shared journal.
pub fn claim(journal: &SharedJournal, fingerprint: &Fingerprint, occurrence: u32) -> Claim {
    lock(journal).claim(fingerprint, occurrence)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(body: &str) -> Option<Fate> {
        Some(Fate::Answered(ScriptResponse::ok_for_tests(body)))
    }

    #[test]
    fn a_recorded_write_answers_every_later_run_and_identical_writes_count_apart() {
        let mut journal = Journal::default();
        let a = Fingerprint("a".into());
        assert!(matches!(journal.claim(&a, 0), Claim::New));
        assert!(matches!(journal.claim(&a, 0), Claim::InFlight));
        journal.settle(&a, 0, answered("first"));
        assert!(matches!(journal.claim(&a, 1), Claim::New));
        journal.settle(&a, 1, answered("second"));
        for _ in 0..3 {
            // Append-only: answering a write does not use its entry up.
            let Claim::Sent(Fate::Answered(first)) = journal.claim(&a, 0) else {
                panic!("not recorded");
            };
            assert_eq!(first.body, "first");
            let Claim::Sent(Fate::Answered(second)) = journal.claim(&a, 1) else {
                panic!("not recorded");
            };
            assert_eq!(second.body, "second");
        }
        assert!(matches!(
            journal.claim(&Fingerprint("b".into()), 0),
            Claim::New
        ));
    }

    #[test]
    fn an_unsent_claim_is_released_and_one_in_flight_is_unknown_to_the_next_round() {
        let mut journal = Journal::default();
        let a = Fingerprint("a".into());
        assert!(matches!(journal.claim(&a, 0), Claim::New));
        journal.settle(&a, 0, None);
        assert!(matches!(journal.claim(&a, 0), Claim::New));
        let next = Journal::new(journal.snapshot());
        assert!(matches!(next.entries[0].fate, Fate::Unknown(_)));
    }

    #[test]
    fn a_journal_is_bounded_but_never_forgets_a_write() {
        let mut journal = Journal::default();
        let big = "x".repeat(MAX_JOURNAL_BYTES);
        let (a, b) = (Fingerprint("a".into()), Fingerprint("b".into()));
        journal.claim(&a, 0);
        journal.settle(&a, 0, answered(&big));
        journal.claim(&b, 0);
        journal.settle(&b, 0, answered(&big));
        let Claim::Sent(Fate::Answered(kept)) = journal.claim(&b, 0) else {
            panic!("forgotten");
        };
        assert!(kept.body.contains("not sent again"), "{}", kept.body.len());
    }
}
