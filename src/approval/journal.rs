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

use serde::{Deserialize, Serialize};

use super::ask::Fingerprint;
use crate::egress::ScriptResponse;

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

/// The idempotency key a write went out with, where the provider takes them: a write sent
/// with one whose outcome is unknown may be sent again with the same key (the provider
/// applies a key once), and only with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentWith {
    /// The header the key went in (`Idempotency-Key`).
    pub header: String,
    /// The key.
    pub value: String,
    /// When it first left with it, in milliseconds since the Unix epoch (0: not yet):
    /// providers keep keys for a while only (Stripe: 24 hours), so an older write is not
    /// sent again.
    #[serde(default)]
    pub left_ms: u64,
}

impl SentWith {
    /// Whether `other` is the same key in the same header.
    fn same_key(&self, other: &Option<SentWith>) -> bool {
        other
            .as_ref()
            .is_some_and(|o| o.header == self.header && o.value == self.value)
    }
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
    /// The idempotency key it went out with, if the provider takes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_with: Option<SentWith>,
}

/// What the journal knows of a write a run is about to send.
#[derive(Debug)]
pub enum Lookup {
    /// An earlier run sent exactly this write: this is what became of it.
    Sent(Fate),
    /// An earlier run sent exactly this write with an idempotency key, and no response came
    /// back (the reason says what happened): it may be claimed, and sent again with that key.
    Unanswered(String, SentWith),
    /// An earlier run sent a write in this slot with other bytes: what became of it.
    SentOtherwise(Fate),
    /// Another run of the chain is sending it now.
    InFlight,
    /// The chain keeps as many writes as it may.
    Full,
    /// Nobody has: it may be claimed.
    New,
    /// The run's own journal is gone: another replica took the run over (this one had lost
    /// touch with the state store), and the write is its to decide.
    TakenOver,
}

/// A write claimed and not settled yet: who holds it, and until when the claim can last.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hold {
    /// The write.
    pub key: Key,
    /// The replica whose run sends it.
    pub replica: String,
    /// When the run that sends it has certainly ended (its deadline and every wait), in
    /// milliseconds since the Unix epoch.
    pub until_ms: u64,
    /// The idempotency key it goes out with, if the provider takes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_with: Option<SentWith>,
}

/// The writes of one chain, in the order they were recorded.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Journal {
    entries: Vec<Sent>,
    /// Writes claimed and not yet settled (a few: one run's requests).
    #[serde(default)]
    in_flight: Vec<Hold>,
}

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

    /// The replicas holding claims.
    pub fn holders(&self) -> Vec<String> {
        let mut replicas: Vec<String> = self.in_flight.iter().map(|h| h.replica.clone()).collect();
        replicas.sort();
        replicas.dedup();
        replicas
    }

    /// Turns the claims whose run has ended without settling them (`ended` says which: its
    /// replica stopped, or its time is up) into writes that may have been sent.
    pub fn expire_holds(&mut self, ended: &dyn Fn(&Hold) -> bool) {
        let (gone, kept): (Vec<Hold>, Vec<Hold>) =
            self.in_flight.drain(..).partition(|hold| ended(hold));
        self.in_flight = kept;
        for hold in gone {
            if self.find(&hold.key).is_none() {
                self.entries.push(Sent {
                    key: hold.key,
                    fate: Fate::Unknown(
                        "the server running the execution that sent it stopped before its \
                         response arrived"
                            .to_owned(),
                    ),
                    sent_with: hold.sent_with,
                });
            }
        }
    }

    /// What the journal knows of `key`. A write sent with an idempotency key and unanswered
    /// is [`Lookup::Unanswered`] unless a run is sending it again now.
    pub fn lookup(&self, key: &Key) -> Lookup {
        let exact = self.find(key);
        if let Some(sent) = exact
            && (matches!(sent.fate, Fate::Answered(_)) || sent.sent_with.is_none())
        {
            return Lookup::Sent(sent.fate.clone());
        }
        let in_flight = self.in_flight.iter().any(|h| {
            let k = &h.key;
            (k.fingerprint == key.fingerprint && k.occurrence == key.occurrence)
                || k.same_place(key)
        });
        if in_flight {
            return Lookup::InFlight;
        }
        if let Some(Sent {
            fate: Fate::Unknown(why),
            sent_with: Some(sent_with),
            ..
        }) = exact
        {
            return Lookup::Unanswered(why.clone(), sent_with.clone());
        }
        if let Some(sent) = self.entries.iter().find(|e| e.key.same_place(key)) {
            return Lookup::SentOtherwise(sent.fate.clone());
        }
        if self.entries.len() + self.in_flight.len() >= MAX_JOURNAL_ENTRIES {
            return Lookup::Full;
        }
        Lookup::New
    }

    /// Its writes whose fate is unknown (they may have been sent, with no answer back).
    pub fn unknown(&self) -> Vec<Sent> {
        self.entries
            .iter()
            .filter(|e| matches!(e.fate, Fate::Unknown(_)))
            .cloned()
            .collect()
    }

    /// Its writes, and its claims in flight.
    pub fn parts(&self) -> (Vec<Sent>, Vec<Hold>) {
        (self.entries.clone(), self.in_flight.clone())
    }

    /// Claims a write [`Journal::lookup`] found new or unanswered.
    pub fn hold(&mut self, hold: Hold) {
        self.in_flight.push(hold);
    }

    /// Gives the claim of `key` the idempotency key it leaves with, as it leaves: only a
    /// write that left (or may have) with a key may be sent again with it. A claim that
    /// lapsed before (its run stopped while a human was asked) has none: it is refused, as
    /// any write that may have been sent, never sent unasked.
    pub fn leaving(&mut self, key: &Key, sent_with: SentWith) {
        if let Some(hold) = self.in_flight.iter_mut().find(|h| h.key == *key) {
            hold.sent_with = Some(sent_with);
        }
    }

    /// Learns what became of a write: a write it does not know is added; one it knows as
    /// unanswered and `sent` says was answered when sent again with the same idempotency key
    /// is answered now (see [`answers`]).
    /// Whether it was new.
    fn learn(&mut self, sent: Sent) -> bool {
        match self.entries.iter_mut().find(|e| {
            e.key.fingerprint == sent.key.fingerprint && e.key.occurrence == sent.key.occurrence
        }) {
            Some(known) => {
                if matches!(known.fate, Fate::Unknown(_))
                    && answers(&sent.fate)
                    && known
                        .sent_with
                        .as_ref()
                        .is_some_and(|k| k.same_key(&sent.sent_with))
                {
                    known.fate = sent.fate;
                }
                false
            }
            None => {
                self.entries.push(sent);
                true
            }
        }
    }

    /// Adds the entries of `others` it does not have, all of them or none: false when they
    /// would pass its bound.
    pub fn merge_all(&mut self, others: Vec<Sent>) -> bool {
        let new = others
            .iter()
            .filter(|sent| self.find(&sent.key).is_none())
            .count();
        if self.entries.len() + new > MAX_JOURNAL_ENTRIES {
            return false;
        }
        self.merge(others);
        true
    }

    /// Adds the entries of `others` it does not have (a chain's journal met another copy),
    /// and the answers of writes it knows as unanswered.
    pub fn merge(&mut self, others: Vec<Sent>) {
        for sent in others {
            if self.find(&sent.key).is_some() || self.entries.len() < MAX_JOURNAL_ENTRIES {
                self.learn(sent);
            }
        }
    }

    /// Answers the writes it knows as unanswered that `answered` says were answered (sent
    /// again with their keys); whether any was.
    pub fn resolve(&mut self, answered: Vec<Sent>) -> bool {
        let mut changed = false;
        for sent in answered {
            // The same write, sent again with the same key: not another that happened to
            // be sent meanwhile.
            let unanswered = self.find(&sent.key).is_some_and(|known| {
                matches!(known.fate, Fate::Unknown(_))
                    && known
                        .sent_with
                        .as_ref()
                        .is_some_and(|k| k.same_key(&sent.sent_with))
            });
            if unanswered && answers(&sent.fate) {
                self.learn(sent);
                changed = true;
            }
        }
        changed
    }

    /// Ends a claim: with the write's fate when it went out (or may have), with `None` when
    /// it certainly did not. A response that would make the journal larger than
    /// [`MAX_JOURNAL_BYTES`] is kept as a note, so the write is still never sent twice.
    /// A write sent again with its key, and answered, is answered now; unsettled or
    /// unanswered again, it stays as it was.
    pub fn settle(&mut self, key: &Key, fate: Option<Fate>) {
        let sent_with = self
            .in_flight
            .iter()
            .find(|h| h.key == *key)
            .and_then(|h| h.sent_with.clone());
        self.in_flight.retain(|h| h.key != *key);
        let Some(mut fate) = fate else {
            return;
        };
        let unanswered = self
            .find(key)
            .map(|known| matches!(known.fate, Fate::Unknown(_)));
        if unanswered == Some(false)
            || (unanswered == Some(true) && matches!(fate, Fate::Unknown(_)))
        {
            return;
        }
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
        self.learn(Sent {
            key: key.clone(),
            fate,
            sent_with,
        });
    }

    /// The journal as the next round gets it: every write recorded, and the ones still in
    /// flight as unknown (the run that sent them has ended).
    pub fn snapshot(&self) -> Vec<Sent> {
        let mut entries = self.entries.clone();
        // A write sent again now is known already, as unanswered.
        let sending = self
            .in_flight
            .iter()
            .filter(|hold| self.find(&hold.key).is_none());
        entries.extend(sending.map(|hold| Sent {
            key: hold.key.clone(),
            fate: Fate::Unknown(
                "the execution that sent it ended before its response arrived".to_owned(),
            ),
            sent_with: hold.sent_with.clone(),
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

/// Whether `fate`, of a write sent again with its idempotency key, says what became of it.
/// A provider answers a key with the first sending's response (a success, or the same
/// refusal: Stripe replays a declined card's 402); a conflict (`409`: it is still applying
/// the key for another run), a timeout, `425`, `429` or a server error says nothing of the
/// first sending, and the write stays unanswered.
pub(super) fn answers(fate: &Fate) -> bool {
    matches!(fate, Fate::Answered(response)
        if response.status < 500 && ![408, 409, 425, 429].contains(&response.status))
}

fn size(response: &ScriptResponse) -> usize {
    response.body_len()
        + response
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
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

    fn hold(journal: &mut Journal, key: Key) {
        assert!(matches!(journal.lookup(&key), Lookup::New), "not new");
        journal.hold(Hold {
            key,
            replica: "r".into(),
            until_ms: u64::MAX,
            sent_with: None,
        });
    }

    #[test]
    fn a_recorded_write_answers_every_later_run_and_identical_writes_count_apart() {
        let mut journal = Journal::default();
        hold(&mut journal, key("a", 0, "POST c", 0));
        assert!(matches!(
            journal.lookup(&key("a", 0, "POST c", 0)),
            Lookup::InFlight
        ));
        journal.settle(&key("a", 0, "POST c", 0), answered("first"));
        hold(&mut journal, key("a", 1, "POST c", 1));
        journal.settle(&key("a", 1, "POST c", 1), answered("second"));
        for _ in 0..3 {
            // Append-only: answering a write does not use its entry up.
            let Lookup::Sent(Fate::Answered(one)) = journal.lookup(&key("a", 0, "POST c", 0))
            else {
                panic!("not recorded");
            };
            assert_eq!(one.body, "first");
            let Lookup::Sent(Fate::Answered(two)) = journal.lookup(&key("a", 1, "POST c", 1))
            else {
                panic!("not recorded");
            };
            assert_eq!(two.body, "second");
        }
        // The same place with other bytes (a timestamp in the body) is that write.
        let Lookup::SentOtherwise(Fate::Answered(other)) =
            journal.lookup(&key("b", 0, "POST c", 0))
        else {
            panic!("not found by its slot");
        };
        assert_eq!(other.body, "first");
        assert!(matches!(
            journal.lookup(&key("c", 0, "POST d", 0)),
            Lookup::New
        ));
    }

    #[test]
    fn a_released_claim_may_be_sent_and_one_in_flight_is_unknown_to_the_next_round() {
        let mut journal = Journal::default();
        hold(&mut journal, key("a", 0, "s", 0));
        journal.settle(&key("a", 0, "s", 0), None);
        hold(&mut journal, key("a", 0, "s", 0));
        let next = Journal::new(journal.snapshot());
        assert!(matches!(
            next.lookup(&key("a", 0, "s", 0)),
            Lookup::Sent(Fate::Unknown(_))
        ));
    }

    #[test]
    fn a_claim_whose_run_ended_unsettled_is_a_write_that_may_have_been_sent() {
        let mut journal = Journal::default();
        hold(&mut journal, key("a", 0, "s", 0));
        journal.hold(Hold {
            key: key("b", 0, "t", 0),
            replica: "alive".into(),
            until_ms: u64::MAX,
            sent_with: None,
        });
        journal.expire_holds(&|hold| hold.replica == "r");
        assert!(matches!(
            journal.lookup(&key("a", 0, "s", 0)),
            Lookup::Sent(Fate::Unknown(_))
        ));
        assert!(matches!(
            journal.lookup(&key("b", 0, "t", 0)),
            Lookup::InFlight
        ));
        assert_eq!(journal.holders(), ["alive"]);
    }

    fn with(value: &str) -> Option<SentWith> {
        Some(SentWith {
            header: "Idempotency-Key".into(),
            value: value.into(),
            left_ms: 1,
        })
    }

    /// A write sent with a key and unanswered may go again with that key, by one run at a
    /// time; released unsent or unanswered again it stays so, and answered it is answered.
    #[test]
    fn a_keyed_write_left_unanswered_is_claimed_again_with_its_key_until_answered() {
        let mut journal = Journal::default();
        let w = key("a", 0, "POST c", 0);
        journal.hold(Hold {
            key: w.clone(),
            replica: "r".into(),
            until_ms: 0,
            sent_with: with("k1"),
        });
        journal.expire_holds(&|_| true);
        let again = |journal: &mut Journal| {
            let Lookup::Unanswered(_, sent_with) = journal.lookup(&w) else {
                panic!("not unanswered: {:?}", journal.lookup(&w));
            };
            assert_eq!(Some(sent_with.clone()), with("k1"));
            journal.hold(Hold {
                key: w.clone(),
                replica: "r".into(),
                until_ms: u64::MAX,
                sent_with: Some(sent_with),
            });
            // Claimed: another run does not send it meanwhile.
            assert!(matches!(journal.lookup(&w), Lookup::InFlight));
            // The next round learns it once, as unanswered.
            assert_eq!(journal.snapshot().len(), 1);
        };
        again(&mut journal);
        journal.settle(&w, None);
        again(&mut journal);
        journal.settle(&w, Some(Fate::Unknown("lost again".into())));
        again(&mut journal);
        journal.settle(&w, answered("paid"));
        let Lookup::Sent(Fate::Answered(response)) = journal.lookup(&w) else {
            panic!("not answered");
        };
        assert_eq!(response.body, "paid");
        // Without a key, an unanswered write is never claimed again.
        let bare = key("b", 0, "POST d", 0);
        hold(&mut journal, bare.clone());
        journal.settle(&bare, Some(Fate::Unknown("lost".into())));
        assert!(matches!(
            journal.lookup(&bare),
            Lookup::Sent(Fate::Unknown(_))
        ));
    }

    /// What a run learned of a re-sent write answers it where it was remembered, only when
    /// it went out with the same key (another write sent meanwhile is not that one).
    #[test]
    fn an_answer_resolves_an_unanswered_write_only_for_the_same_key() {
        let unknown = |value| Sent {
            key: key("a", 0, "s", 0),
            fate: Fate::Unknown("lost".into()),
            sent_with: with(value),
        };
        let answer = |value| Sent {
            fate: answered("paid").unwrap(),
            ..unknown(value)
        };
        let mut remembered = Journal::new(vec![unknown("k1")]);
        assert!(!remembered.resolve(vec![answer("k2")]));
        assert!(matches!(
            remembered.lookup(&key("a", 0, "s", 0)),
            Lookup::Unanswered(..)
        ));
        assert!(remembered.resolve(vec![answer("k1")]));
        assert!(matches!(
            remembered.lookup(&key("a", 0, "s", 0)),
            Lookup::Sent(Fate::Answered(_))
        ));
    }

    #[test]
    fn a_journal_is_bounded_but_never_forgets_a_write() {
        let mut journal = Journal::default();
        let big = "x".repeat(MAX_JOURNAL_BYTES);
        hold(&mut journal, key("a", 0, "s", 0));
        journal.settle(&key("a", 0, "s", 0), answered(&big));
        hold(&mut journal, key("b", 0, "s", 1));
        journal.settle(&key("b", 0, "s", 1), answered(&big));
        let Lookup::Sent(Fate::Answered(kept)) = journal.lookup(&key("b", 0, "s", 1)) else {
            panic!("forgotten");
        };
        assert!(kept.body.contains("not sent again"), "{}", kept.body.len());
        for n in 2..MAX_JOURNAL_ENTRIES as u32 {
            hold(&mut journal, key("c", n, "t", n));
            journal.settle(&key("c", n, "t", n), Some(Fate::Unknown("x".into())));
        }
        assert!(matches!(journal.lookup(&key("d", 0, "u", 0)), Lookup::Full));
    }
}
