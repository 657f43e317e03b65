//! What approvals given outside an execution leave between executions, per caller: the
//! chains of runs of one code (page or 2026-07-28 retry), each with its journal (the writes
//! already sent) and the decisions given on the page. Bounded per caller and in all. Nothing
//! of one caller is ever evicted to make room for another's, nor a chain still waiting for a
//! decision: past its own bound a caller's chain finished the longest ago goes (a re-run of
//! that code is then a new run); past every bound, a new question is refused, and says why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::caller::Caller;
use super::journal::{Key, Sent, SharedJournal};
use crate::lock::lock;

/// How long a decision given on the page waits for its re-run.
pub const GRANT_LIFETIME: Duration = Duration::from_secs(600);

/// How long a chain is kept after its last run: a re-run of the same code within it is
/// answered from the journal, not sent again.
pub const CHAIN_LIFETIME: Duration = Duration::from_secs(3_600);

/// Chains one caller may have; past it, its chain finished the longest ago goes.
const MAX_CHAINS_PER_CALLER: usize = 32;

/// Chains kept in all (each journal holds at most 64 KiB of responses: 64 MiB at most).
const MAX_CHAINS: usize = 1_024;

/// Decisions one chain keeps; past this the oldest goes (losing a decision only means
/// asking again).
const MAX_GRANTS_PER_CHAIN: usize = 64;

/// What a decision given on the page lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Granted {
    /// Exactly this request, once.
    One(Key),
    /// Every write of the next run of the code.
    All,
    /// Nothing: the human denied this request.
    Denied(Key),
}

/// What the store knows about one request of one chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Approved, by this; the decision is used up.
    Approved(String),
    /// Every write of this run is approved, by this; the decision is used up.
    ApprovedAll(String),
    /// Denied, by this; the denial is used up too, so asking again is possible.
    Denied(String),
    /// A request at the same place of the code was approved, with other bytes.
    Differs,
    /// Nothing decided.
    Open,
}

/// Why a chain could not be kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Full(String);

#[derive(Debug)]
struct Grant {
    granted: Granted,
    by: String,
    expires: Instant,
}

struct Chain {
    journal: SharedJournal,
    grants: Vec<Grant>,
    expires: Instant,
    /// Until when a question of it may still be answered: till then it is waiting.
    waiting_until: Instant,
}

type Turns = Arc<Mutex<HashMap<(Caller, String), Arc<tokio::sync::Mutex<()>>>>>;

/// The chains of one server, and whose turn it is to run each caller's code; clones share
/// them.
#[derive(Clone, Default)]
pub struct Store {
    chains: Arc<Mutex<HashMap<(Caller, String), Chain>>>,
    turns: Turns,
}

/// One caller's turn to run one code: runs of the same code by the same caller that may
/// continue a chain go one after another, so that two never claim a chain's writes at once.
pub struct Turn {
    key: (Caller, String),
    lock: Arc<tokio::sync::Mutex<()>>,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    turns: Turns,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.guard.take();
        let mut turns = lock(&self.turns);
        // Only the map and this turn hold it: nobody waits; it goes.
        if Arc::strong_count(&self.lock) <= 2 {
            turns.remove(&self.key);
        }
    }
}

impl Store {
    /// Waits for this caller's turn to run this code.
    pub async fn turn(&self, caller: &Caller, code: &str) -> Turn {
        let key = (caller.clone(), code.to_owned());
        let turn = lock(&self.turns).entry(key.clone()).or_default().clone();
        let guard = turn.clone().lock_owned().await;
        Turn {
            key,
            lock: turn,
            guard: Some(guard),
            turns: self.turns.clone(),
        }
    }

    /// The chain of this caller's code, with these writes recorded (from a request state):
    /// the chain kept here, with them added, or a new one; one of its own, not kept, past the
    /// bounds (the writes still answer this run).
    pub fn adopt(&self, caller: &Caller, code: &str, entries: Vec<Sent>) -> (SharedJournal, bool) {
        let journal = super::journal::shared(Vec::new());
        lock(&journal).merge(entries);
        match self.publish(caller, code, &journal) {
            Ok(kept) => {
                if !Arc::ptr_eq(&kept, &journal) {
                    let entries = lock(&journal).snapshot();
                    lock(&kept).merge(entries);
                }
                (kept, true)
            }
            Err(_) => (journal, false),
        }
    }

    /// The journal of the chain of this caller's code, if it has one: a run joins it.
    pub fn join(&self, caller: &Caller, code: &str) -> Option<SharedJournal> {
        let mut chains = self.live();
        let chain = chains.get_mut(&(caller.clone(), code.to_owned()))?;
        chain.expires = Instant::now() + CHAIN_LIFETIME;
        Some(chain.journal.clone())
    }

    /// Keeps `journal` as the chain of this caller's code, waiting for a question about to
    /// be asked, or joins the chain another run of it made meanwhile (whose journal is
    /// returned); refused past the bounds.
    pub fn publish(
        &self,
        caller: &Caller,
        code: &str,
        journal: &SharedJournal,
    ) -> Result<SharedJournal, Full> {
        let mut chains = self.live();
        let key = (caller.clone(), code.to_owned());
        let now = Instant::now();
        if let Some(chain) = chains.get_mut(&key) {
            chain.expires = now + CHAIN_LIFETIME;
            chain.waiting_until = now + GRANT_LIFETIME;
            return Ok(chain.journal.clone());
        }
        room(&mut chains, caller)?;
        chains.insert(key, new_chain(journal.clone(), now));
        Ok(journal.clone())
    }

    /// Records a decision given on the page for a request of this caller's code.
    pub fn give(
        &self,
        caller: &Caller,
        code: &str,
        granted: Granted,
        by: &str,
    ) -> Result<(), Full> {
        let mut chains = self.live();
        let key = (caller.clone(), code.to_owned());
        if !chains.contains_key(&key) {
            room(&mut chains, caller)?;
        }
        let now = Instant::now();
        let chain = chains
            .entry(key)
            .or_insert_with(|| new_chain(super::journal::shared(Vec::new()), now));
        chain.grants.retain(|g| g.expires > now);
        if chain.grants.len() >= MAX_GRANTS_PER_CHAIN {
            chain.grants.remove(0);
        }
        chain.grants.push(Grant {
            granted,
            by: by.to_owned(),
            expires: now + GRANT_LIFETIME,
        });
        Ok(())
    }

    /// Takes the decision about this request of this caller's code, if there is one. "Every
    /// write" answers writes only.
    pub fn take(&self, caller: &Caller, code: &str, key: &Key, write: bool) -> Standing {
        let mut chains = self.live();
        let Some(chain) = chains.get_mut(&(caller.clone(), code.to_owned())) else {
            return Standing::Open;
        };
        let now = Instant::now();
        chain.grants.retain(|g| g.expires > now);
        // A denial of this request wins over any approval, "every write" included.
        let denied = |g: &Grant| matches!(&g.granted, Granted::Denied(k) if k.fingerprint == key.fingerprint);
        let approved = |g: &Grant| match &g.granted {
            Granted::One(k) => k.fingerprint == key.fingerprint,
            Granted::All => write,
            Granted::Denied(_) => false,
        };
        let found = chain
            .grants
            .iter()
            .position(denied)
            .or_else(|| chain.grants.iter().position(approved));
        let Some(at) = found else {
            let elsewhere = chain
                .grants
                .iter()
                .any(|g| matches!(&g.granted, Granted::One(k) if k.same_place(key)));
            return match elsewhere {
                true => Standing::Differs,
                false => Standing::Open,
            };
        };
        let grant = chain.grants.remove(at);
        match grant.granted {
            Granted::One(_) => Standing::Approved(grant.by),
            Granted::All => Standing::ApprovedAll(grant.by),
            Granted::Denied(_) => Standing::Denied(grant.by),
        }
    }

    /// The chains, those past their lifetime removed.
    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<(Caller, String), Chain>> {
        let mut chains = lock(&self.chains);
        let now = Instant::now();
        chains.retain(|_, chain| chain.expires > now);
        chains
    }
}

/// A chain of `journal`, waiting for the question about to be asked.
fn new_chain(journal: SharedJournal, now: Instant) -> Chain {
    Chain {
        journal,
        grants: Vec::new(),
        expires: now + CHAIN_LIFETIME,
        waiting_until: now + GRANT_LIFETIME,
    }
}

/// Makes room for one more chain of `caller`: past its own bound, its chain finished the
/// longest ago goes; a chain still waiting, or another caller's, never does.
fn room(chains: &mut HashMap<(Caller, String), Chain>, caller: &Caller) -> Result<(), Full> {
    let now = Instant::now();
    let own = chains.keys().filter(|(c, _)| c == caller).count();
    if own >= MAX_CHAINS_PER_CALLER {
        let finished = chains
            .iter()
            .filter(|((c, _), chain)| c == caller && chain.waiting_until <= now)
            .min_by_key(|(_, chain)| chain.expires)
            .map(|(key, _)| key.clone());
        match finished {
            Some(key) => {
                chains.remove(&key);
            }
            None => {
                return Err(Full(format!(
                    "this caller already has {own} scripts waiting for decisions; ask the user \
                     to decide those first (or wait for them to expire after {} minutes)",
                    GRANT_LIFETIME.as_secs() / 60
                )));
            }
        }
    }
    if chains.len() >= MAX_CHAINS {
        return Err(Full(
            "the server keeps as many scripts' approvals as it may; try again once some are \
             decided"
                .to_owned(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::caller::CallerParts;

    fn key(fingerprint: &str) -> Key {
        Key {
            fingerprint: crate::approval::Fingerprint(fingerprint.into()),
            occurrence: 0,
            slot: format!("POST {fingerprint}"),
            slot_occurrence: 0,
        }
    }

    fn caller(session: &str) -> Caller {
        Caller::new(
            b"k",
            CallerParts {
                provider: 1,
                session: Some(session),
                subject: None,
            },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_decision_is_for_one_caller_one_code_one_request_once_and_expires() {
        let store = Store::default();
        let (a, b) = (caller("a"), caller("b"));
        let write = key("w");
        store
            .give(&a, "code", Granted::One(write.clone()), "the user")
            .unwrap();
        assert_eq!(store.take(&b, "code", &write, true), Standing::Open);
        assert_eq!(store.take(&a, "other", &write, true), Standing::Open);
        assert_eq!(store.take(&a, "code", &key("x"), true), Standing::Open);
        assert_eq!(
            store.take(&a, "code", &write, true),
            Standing::Approved("the user".into())
        );
        assert_eq!(store.take(&a, "code", &write, true), Standing::Open);
        store.give(&a, "code", Granted::All, "the user").unwrap();
        assert_eq!(
            store.take(&a, "code", &write, false),
            Standing::Open,
            "a read"
        );
        tokio::time::advance(GRANT_LIFETIME + Duration::from_secs(1)).await;
        assert_eq!(store.take(&a, "code", &write, true), Standing::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn a_denial_wins_over_approving_every_write() {
        let store = Store::default();
        let a = caller("a");
        let harmful = key("harmful");
        store.give(&a, "code", Granted::All, "the user").unwrap();
        store
            .give(&a, "code", Granted::Denied(harmful.clone()), "the user")
            .unwrap();
        assert_eq!(
            store.take(&a, "code", &harmful, true),
            Standing::Denied("the user".into())
        );
        assert_eq!(
            store.take(&a, "code", &key("benign"), true),
            Standing::ApprovedAll("the user".into())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_caller_loses_its_oldest_finished_chain_and_nobody_else_loses_any() {
        let store = Store::default();
        let (greedy, other) = (caller("greedy"), caller("other"));
        let journal = crate::approval::journal::shared(Vec::new());
        store.publish(&other, "theirs", &journal).unwrap();
        for n in 0..MAX_CHAINS_PER_CALLER {
            store
                .publish(&greedy, &format!("code {n}"), &journal)
                .unwrap();
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        // All still waiting for their questions: a new one is refused.
        let refused = store.publish(&greedy, "one more", &journal).unwrap_err();
        assert!(refused.0.contains("decide those first"), "{refused}");
        // Once their questions can no longer be answered, the one finished the longest ago
        // makes room; the other caller's chain stays.
        tokio::time::advance(GRANT_LIFETIME).await;
        store.publish(&greedy, "one more", &journal).unwrap();
        assert!(store.join(&greedy, "code 0").is_none());
        assert!(store.join(&greedy, "code 1").is_some());
        assert!(store.join(&other, "theirs").is_some());
        tokio::time::advance(CHAIN_LIFETIME + Duration::from_secs(1)).await;
        assert!(store.join(&greedy, "code 1").is_none());
    }
}
