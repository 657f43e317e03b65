//! What approvals given outside an execution leave between executions, per caller, in the
//! state store (so every replica sees the same): the chains of runs of one code (page or
//! 2026-07-28 retry), each with its journal (the writes already sent, and those being sent
//! now, claimed by the replica sending them) and the decisions given on the page; and whose
//! turn it is to run a caller's code. Bounded per caller and in all. Nothing of one caller is
//! ever evicted to make room for another's, nor a chain still waiting for a decision: past
//! its own bound a caller's chain finished the longest ago goes (a re-run of that code is
//! then a new run); past every bound, a new question is refused, and says why.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::caller::Caller;
use super::journal::{Fate, Hold, Journal, Key, Lookup, Sent, SentWith};
use crate::state::{Change, StateError, StateStore};

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

/// How long a turn lasts unless its holder renews it (a replica that stopped renews nothing),
/// and how often the holder does.
const TURN_LEASE: Duration = Duration::from_secs(10);
const TURN_RENEWAL: Duration = Duration::from_secs(3);

/// What a decision given on the page lets through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// Why a chain or a decision could not be kept.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Past a bound; says which and what to do.
    #[error("{0}")]
    Full(String),
    /// The state store failed.
    #[error(transparent)]
    State(#[from] StateError),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Grant {
    granted: Granted,
    by: String,
    expires_ms: u64,
}

/// A record that holds a journal (a chain, or one run's own).
pub(super) trait Journaled: Serialize + serde::de::DeserializeOwned + Default {
    fn journal(&mut self) -> &mut Journal;
    /// What a claim or settle finds when the record is gone: a chain starts again (it
    /// expired, or was dropped finished), a run's own record is not made again (another
    /// replica took the run over).
    fn when_gone() -> Option<Self>;
    /// Who may change it: the run that owns it (a run's own record), anyone (a chain).
    fn owner(&self) -> Option<&str>;
}

impl Journaled for Chain {
    fn journal(&mut self) -> &mut Journal {
        &mut self.journal
    }

    fn when_gone() -> Option<Self> {
        Some(Self::default())
    }

    fn owner(&self) -> Option<&str> {
        None
    }
}

/// One chain as stored.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Chain {
    journal: Journal,
    #[serde(default)]
    grants: Vec<Grant>,
    /// Until when a question of it may still be answered: till then it is waiting.
    waiting_until_ms: u64,
    /// When it was last run or changed.
    touched_ms: u64,
}

/// The chains of one deployment, and whose turn it is to run each caller's code; clones
/// share them.
/// A claim of one write: which, until when its run has certainly ended (ms since the Unix
/// epoch), and when the run began (a replica that lost touch with the store since claims
/// nothing). The idempotency key it goes out with is added as it leaves (see
/// `Journal::leaving`): a claim that never left has none, and is never sent again.
pub(super) struct Claim<'a> {
    pub key: &'a Key,
    pub until_ms: u64,
    pub since: tokio::time::Instant,
}

#[derive(Clone)]
pub struct Store {
    pub(super) state: StateStore,
}

/// One caller's turn to run one code: runs of the same code by the same caller that may
/// continue a chain go one after another, on whichever replica, so that two never claim a
/// chain's writes at once. Held until dropped (renewed meanwhile).
pub struct Turn {
    state: StateStore,
    key: String,
    token: String,
    renewal: tokio::task::JoinHandle<()>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.renewal.abort();
        let (state, key, token) = (self.state.clone(), self.key.clone(), self.token.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = state.delete_if(&key, &token).await;
            });
        }
    }
}

fn chain_key(code: &str) -> String {
    format!("chain:{code}")
}

/// The set of the chains counted against `caller`'s bound: its principal's (see
/// `Caller::share_key`), whatever sessions it opens.
fn chains_of(caller: &Caller) -> String {
    format!("chains-of:{}", caller.share_key())
}

/// The set of the chains of one MCP session (by its digest, see `Caller::session`), each as
/// `share key:code`.
fn chains_of_session(session: &str) -> String {
    format!("chains-of-session:{session}")
}

impl Store {
    /// The chains kept in `state`.
    pub fn new(state: StateStore) -> Self {
        Self { state }
    }

    /// The state store they are kept in.
    pub fn state(&self) -> &StateStore {
        &self.state
    }

    /// Waits up to `wait` for the turn to run the code with digest `code`; `None` when
    /// another run kept it all that time.
    pub async fn turn(&self, code: &str, wait: Duration) -> Result<Option<Turn>, StateError> {
        let key = format!("turn:{code}");
        let token = crate::approval::random_hex(12)
            .ok_or_else(|| StateError::Unavailable("no randomness for a turn".into()))?;
        let until = tokio::time::Instant::now() + wait;
        let mut pause = Duration::from_millis(20);
        while !self.state.put_new(&key, &token, TURN_LEASE).await? {
            if tokio::time::Instant::now() + pause > until {
                return Ok(None);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
        let (state, renewed) = (self.state.clone(), key.clone());
        let renewal = tokio::spawn(async move {
            loop {
                tokio::time::sleep(TURN_RENEWAL).await;
                let _ = state.expire(&renewed, TURN_LEASE).await;
            }
        });
        Ok(Some(Turn {
            state: self.state.clone(),
            key,
            token,
            renewal,
        }))
    }

    /// Whether the code with digest `code` has a chain; a run joins it (it lives on).
    pub async fn join(&self, caller: &Caller, code: &str) -> Result<bool, StateError> {
        let now = self.state.now_ms();
        let found = self
            .state
            .update::<Chain, bool>(&chain_key(code), CHAIN_LIFETIME, |chain| match chain {
                Some(mut chain) => {
                    chain.touched_ms = now;
                    Change::Write(chain, true)
                }
                None => Change::Keep(false),
            })
            .await?;
        if found {
            self.state
                .admit(&chains_of(caller), code, CHAIN_LIFETIME, usize::MAX)
                .await?;
        }
        Ok(found)
    }

    /// Keeps these writes (a request state's, or a run's before its first question leaves)
    /// in the chain of the code with digest `code`, made if it has none (within the bounds),
    /// which waits for a question about to be asked when `waiting`.
    pub async fn publish(
        &self,
        caller: &Caller,
        code: &str,
        entries: Vec<Sent>,
        waiting: bool,
    ) -> Result<(), StoreError> {
        if !self.join(caller, code).await? {
            self.room(caller, code).await?;
        }
        let now = self.state.now_ms();
        self.state
            .update::<Chain, ()>(&chain_key(code), CHAIN_LIFETIME, |chain| {
                let mut chain = chain.unwrap_or_default();
                chain.journal.merge(entries.clone());
                chain.touched_ms = now;
                if waiting {
                    chain.waiting_until_ms = now + GRANT_LIFETIME.as_millis() as u64;
                }
                Change::Write(chain, ())
            })
            .await?;
        Ok(())
    }

    /// The chain of `code` waits for no question any more: its last run asked none.
    pub async fn rest(&self, code: &str) -> Result<(), StateError> {
        self.state
            .update::<Chain, ()>(&chain_key(code), CHAIN_LIFETIME, |chain| match chain {
                Some(mut chain) if chain.waiting_until_ms > 0 => {
                    chain.waiting_until_ms = 0;
                    Change::Write(chain, ())
                }
                _ => Change::Keep(()),
            })
            .await
    }

    /// Records a decision given on the page for a request of this caller's code.
    pub async fn give(
        &self,
        caller: &Caller,
        code: &str,
        granted: Granted,
        by: &str,
    ) -> Result<(), StoreError> {
        self.publish(caller, code, Vec::new(), false).await?;
        let now = self.state.now_ms();
        self.state
            .update::<Chain, ()>(&chain_key(code), CHAIN_LIFETIME, |chain| {
                let mut chain = chain.unwrap_or_default();
                chain.grants.retain(|g| g.expires_ms > now);
                if chain.grants.len() >= MAX_GRANTS_PER_CHAIN {
                    chain.grants.remove(0);
                }
                chain.grants.push(Grant {
                    granted: granted.clone(),
                    by: by.to_owned(),
                    expires_ms: now + GRANT_LIFETIME.as_millis() as u64,
                });
                Change::Write(chain, ())
            })
            .await?;
        Ok(())
    }

    /// Takes the decision about this request of this code, if there is one. "Every write"
    /// answers writes only.
    pub async fn take(&self, code: &str, key: &Key, write: bool) -> Result<Standing, StateError> {
        let now = self.state.now_ms();
        self.state
            .update::<Chain, Standing>(&chain_key(code), CHAIN_LIFETIME, |chain| {
                let Some(mut chain) = chain else {
                    return Change::Keep(Standing::Open);
                };
                chain.grants.retain(|g| g.expires_ms > now);
                match take_grant(&mut chain.grants, key, write) {
                    Standing::Open => Change::Keep(Standing::Open),
                    Standing::Differs => Change::Keep(Standing::Differs),
                    taken => Change::Write(chain, taken),
                }
            })
            .await
    }

    /// Makes `claim` in the chain of `code` for this replica, unless the journal knows the
    /// write: [`Lookup::New`] and [`Lookup::Unanswered`] mean it is claimed. Claims of runs that ended without settling them (their replica stopped, or
    /// their time is up) count as writes that may have been sent.
    pub(super) async fn claim(&self, code: &str, claim: Claim<'_>) -> Result<Lookup, StateError> {
        self.claim_in::<Chain>(&chain_key(code), None, code, claim)
            .await
    }

    /// Claims `key` in the journal `record` (owned by `owner`, if a run's own) of a run of
    /// the code with digest `code` that began at `since` (see [`Store::claim`]); a write a
    /// finished run of the code (or a chain dropped to make room) may have sent is answered
    /// with that, and not claimed.
    pub(super) async fn claim_in<T: Journaled>(
        &self,
        record: &str,
        owner: Option<&str>,
        code: &str,
        claim: Claim<'_>,
    ) -> Result<Lookup, StateError> {
        let Claim {
            key,
            until_ms,
            since,
        } = claim;
        let out_of_touch = || {
            StateError::Unavailable(
                "this server lost touch with it during this run, and another server may have \
                 taken the run over or run the code again"
                    .into(),
            )
        };
        if !self.state.in_touch_since(since) {
            return Err(out_of_touch());
        }
        let held: Option<T> = self.state.read(record).await?;
        let mut stopped = Vec::new();
        for replica in held.map(|mut r| r.journal().holders()).unwrap_or_default() {
            if !self.state.alive(&replica).await? {
                stopped.push(replica);
            }
        }
        let now = self.state.now_ms();
        let replica = self.state.replica().to_owned();
        let found = self
            .state
            .update::<T, Option<Lookup>>(record, CHAIN_LIFETIME, |held| {
                // Checked again as the claim is written: the others must still count this
                // replica alive then.
                if !self.state.in_touch_since(since) {
                    return Change::Keep(None);
                }
                let Some(mut held) = held.or_else(T::when_gone) else {
                    return Change::Keep(Some(Lookup::TakenOver));
                };
                if held.owner().is_some_and(|theirs| Some(theirs) != owner) {
                    return Change::Keep(Some(Lookup::TakenOver));
                }
                let journal = held.journal();
                journal
                    .expire_holds(&|hold| hold.until_ms <= now || stopped.contains(&hold.replica));
                let found = journal.lookup(key);
                if matches!(found, Lookup::New | Lookup::Unanswered(..)) {
                    journal.hold(Hold {
                        key: key.clone(),
                        replica: replica.clone(),
                        until_ms,
                        sent_with: None,
                    });
                }
                Change::Write(held, Some(found))
            })
            .await?;
        let found = found.ok_or_else(out_of_touch)?;
        // Read after the claim: a chain dropped to make room remembers its maybe-sent writes
        // before it goes, so a claim that found it gone (and began it again) sees them here.
        if matches!(found, Lookup::New)
            && let Some(earlier) = self.uncertain_lookup(code, key).await?
        {
            // Claimed here to go again with the key it carried; anything else is released
            // (a claim left by a failed release has no key, so it is never sent again).
            if !matches!(earlier, Lookup::Unanswered(..)) {
                self.settle_in::<T>(record, owner, key, None).await?;
            }
            return Ok(earlier);
        }
        Ok(found)
    }

    /// Records in the journal `record` (owned by `owner`, if a run's own) that the claimed
    /// write `key` is leaving with the idempotency key `sent_with` (see `Journal::leaving`).
    pub(super) async fn leaving_in<T: Journaled>(
        &self,
        record: &str,
        owner: Option<&str>,
        key: &Key,
        sent_with: SentWith,
    ) -> Result<(), StateError> {
        self.change_owned::<T>(record, owner, |journal| {
            journal.leaving(key, sent_with.clone())
        })
        .await
    }

    /// [`Store::leaving_in`] the chain of `code`.
    pub(super) async fn leaving(
        &self,
        code: &str,
        key: &Key,
        sent_with: SentWith,
    ) -> Result<(), StateError> {
        self.leaving_in::<Chain>(&chain_key(code), None, key, sent_with)
            .await
    }

    /// Changes the journal `record` (owned by `owner`, if a run's own) with `change`, in one
    /// atomic step: nothing, if another run owns it now.
    async fn change_owned<T: Journaled>(
        &self,
        record: &str,
        owner: Option<&str>,
        change: impl Fn(&mut Journal),
    ) -> Result<(), StateError> {
        self.state
            .update::<T, ()>(record, CHAIN_LIFETIME, |held| {
                let Some(mut held) = held.or_else(T::when_gone) else {
                    return Change::Keep(());
                };
                if held.owner().is_some_and(|theirs| Some(theirs) != owner) {
                    return Change::Keep(());
                }
                change(held.journal());
                Change::Write(held, ())
            })
            .await
    }

    /// Moves a claim a run made in its own journal into the chain of `code` (the run's
    /// journal became the chain while the write was in flight); a write the chain knows
    /// already stays as the chain knows it (one it knows as unanswered is being sent again).
    pub(super) async fn hold(&self, code: &str, hold: Hold) -> Result<(), StateError> {
        self.state
            .update::<Chain, ()>(&chain_key(code), CHAIN_LIFETIME, |chain| {
                let mut chain = chain.unwrap_or_default();
                match chain.journal.lookup(&hold.key) {
                    Lookup::New | Lookup::Unanswered(..) => {
                        chain.journal.hold(hold.clone());
                        Change::Write(chain, ())
                    }
                    _ => Change::Keep(()),
                }
            })
            .await
    }

    /// Ends a claim of the chain of `code` (see `Journal::settle`).
    pub async fn settle(
        &self,
        code: &str,
        key: &Key,
        fate: Option<Fate>,
    ) -> Result<(), StateError> {
        self.settle_in::<Chain>(&chain_key(code), None, key, fate)
            .await
    }

    /// Ends a claim in the journal `record` (owned by `owner`, if a run's own): nothing, if
    /// another run owns it now (it counts the write as maybe sent).
    pub(super) async fn settle_in<T: Journaled>(
        &self,
        record: &str,
        owner: Option<&str>,
        key: &Key,
        fate: Option<Fate>,
    ) -> Result<(), StateError> {
        self.change_owned::<T>(record, owner, |journal| journal.settle(key, fate.clone()))
            .await
    }

    /// The writes of the chain of `code` recorded as maybe sent, if it has any (not those in
    /// flight now: a run of the chain is sending them).
    pub(super) async fn chain_unknown(&self, code: &str) -> Result<Vec<Sent>, StateError> {
        let chain: Option<Chain> = self.state.read(&chain_key(code)).await?;
        Ok(chain.map(|c| c.journal.unknown()).unwrap_or_default())
    }

    /// The journal of the chain of `code`, as the next round gets it.
    pub async fn snapshot(&self, code: &str) -> Result<Vec<Sent>, StateError> {
        let chain: Option<Chain> = self.state.read(&chain_key(code)).await?;
        Ok(chain.map(|c| c.journal.snapshot()).unwrap_or_default())
    }

    /// Makes room for one more chain of `caller`: past its own bound, the chain finished the
    /// longest ago among those of its principal (its sessions, or callers behind the same
    /// address) goes; a chain still waiting, or another principal's, never does. Runs of the
    /// caller making room at once each take a finished chain of their own.
    async fn room(&self, caller: &Caller, code: &str) -> Result<(), StoreError> {
        let own = chains_of(caller);
        let mut admitted = false;
        for _ in 0..MAX_CHAINS_PER_CALLER {
            if self
                .state
                .admit(&own, code, CHAIN_LIFETIME, MAX_CHAINS_PER_CALLER)
                .await?
            {
                admitted = true;
                break;
            }
            if !self.drop_finished(caller).await? {
                break;
            }
        }
        if !admitted {
            return Err(StoreError::Full(format!(
                "this caller already has {MAX_CHAINS_PER_CALLER} scripts waiting for \
                 decisions (counted across its sessions); ask the user to decide those first (or wait for them to expire \
                 after {} minutes)",
                GRANT_LIFETIME.as_secs() / 60
            )));
        }
        if !self
            .state
            .admit("chains", code, CHAIN_LIFETIME, MAX_CHAINS)
            .await?
        {
            self.state.dismiss(&own, code).await?;
            return Err(StoreError::Full(
                "the server keeps as many scripts' approvals as it may; try again once some are \
                 decided"
                    .to_owned(),
            ));
        }
        // Known by its session too, for `forget_session`: bounded as the server's chains
        // are (members of chains already gone count until they expire). A chain this cannot
        // record is only kept until it expires, as before sessions were tracked.
        if let Some(session) = caller.session() {
            let member = format!("{}:{code}", caller.share_key());
            let session_set = chains_of_session(session);
            if let Err(error) = self
                .state
                .admit(&session_set, &member, CHAIN_LIFETIME, MAX_CHAINS)
                .await
            {
                tracing::warn!(%error, "a chain is not known by its session");
            }
        }
        Ok(())
    }

    /// Forgets the chains of an MCP session its client closed (by its digest): no run can
    /// continue them any more (their caller was the session), and they would hold the room
    /// of their principal and of the server until they expired. Returns how many went.
    pub(super) async fn forget_session(&self, session: &str) -> Result<usize, StateError> {
        let of_session = chains_of_session(session);
        let mut forgotten = 0;
        for member in self.state.members(&of_session).await? {
            if let Some((share, code)) = member.split_once(':') {
                if self.state.take(&chain_key(code)).await?.is_some() {
                    forgotten += 1;
                }
                self.state
                    .dismiss(&format!("chains-of:{share}"), code)
                    .await?;
                self.state.dismiss("chains", code).await?;
            }
            self.state.dismiss(&of_session, &member).await?;
        }
        Ok(forgotten)
    }

    /// Removes `caller`'s chain finished the longest ago (and forgets chains already gone);
    /// whether any room was made.
    async fn drop_finished(&self, caller: &Caller) -> Result<bool, StateError> {
        let own = chains_of(caller);
        let now = self.state.now_ms();
        let mut oldest: Option<(u64, String)> = None;
        let mut made_room = false;
        for code in self.state.members(&own).await? {
            match self.state.read::<Chain>(&chain_key(&code)).await? {
                None => {
                    self.state.dismiss(&own, &code).await?;
                    self.state.dismiss("chains", &code).await?;
                    made_room = true;
                }
                Some(chain) if chain.waiting_until_ms <= now => {
                    if oldest.as_ref().is_none_or(|(t, _)| chain.touched_ms < *t) {
                        oldest = Some((chain.touched_ms, code));
                    }
                }
                Some(_) => {}
            }
        }
        if let Some((_, code)) = oldest {
            // Its writes that may have been sent stay remembered for the code's next runs.
            if let Some(mut chain) = self.state.read::<Chain>(&chain_key(&code)).await? {
                chain.journal.expire_holds(&|_| true);
                let unknown = chain.journal.unknown();
                if !unknown.is_empty() && !self.remember_uncertain(&code, unknown).await? {
                    return Ok(made_room);
                }
            }
            self.state.take(&chain_key(&code)).await?;
            self.state.dismiss(&own, &code).await?;
            self.state.dismiss("chains", &code).await?;
            made_room = true;
        }
        Ok(made_room)
    }
}

/// Takes the grant that decides `key`: a denial of it wins over any approval, "every write"
/// included.
fn take_grant(grants: &mut Vec<Grant>, key: &Key, write: bool) -> Standing {
    let denied =
        |g: &Grant| matches!(&g.granted, Granted::Denied(k) if k.fingerprint == key.fingerprint);
    let approved = |g: &Grant| match &g.granted {
        Granted::One(k) => k.fingerprint == key.fingerprint,
        Granted::All => write,
        Granted::Denied(_) => false,
    };
    let found = grants
        .iter()
        .position(denied)
        .or_else(|| grants.iter().position(approved));
    let Some(at) = found else {
        let elsewhere = grants
            .iter()
            .any(|g| matches!(&g.granted, Granted::One(k) if k.same_place(key)));
        return match elsewhere {
            true => Standing::Differs,
            false => Standing::Open,
        };
    };
    let grant = grants.remove(at);
    match grant.granted {
        Granted::One(_) => Standing::Approved(grant.by),
        Granted::All => Standing::ApprovedAll(grant.by),
        Granted::Denied(_) => Standing::Denied(grant.by),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::approval::caller::CallerParts;

    /// A write to its own slot.
    pub fn key(fingerprint: &str) -> Key {
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

    fn store() -> Store {
        Store::new(StateStore::memory("test"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_decision_is_for_one_code_one_request_once_and_expires() {
        let store = store();
        let a = caller("a");
        let write = key("w");
        store
            .give(&a, "code", Granted::One(write.clone()), "the user")
            .await
            .unwrap();
        assert_eq!(
            store.take("other", &write, true).await.unwrap(),
            Standing::Open
        );
        assert_eq!(
            store.take("code", &key("x"), true).await.unwrap(),
            Standing::Open
        );
        assert_eq!(
            store.take("code", &write, true).await.unwrap(),
            Standing::Approved("the user".into())
        );
        assert_eq!(
            store.take("code", &write, true).await.unwrap(),
            Standing::Open
        );
        store
            .give(&a, "code", Granted::All, "the user")
            .await
            .unwrap();
        assert_eq!(
            store.take("code", &write, false).await.unwrap(),
            Standing::Open,
            "a read"
        );
        tokio::time::advance(GRANT_LIFETIME + Duration::from_secs(1)).await;
        assert_eq!(
            store.take("code", &write, true).await.unwrap(),
            Standing::Open
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_denial_wins_over_approving_every_write() {
        let store = store();
        let a = caller("a");
        let harmful = key("harmful");
        store
            .give(&a, "code", Granted::All, "the user")
            .await
            .unwrap();
        store
            .give(&a, "code", Granted::Denied(harmful.clone()), "the user")
            .await
            .unwrap();
        assert_eq!(
            store.take("code", &harmful, true).await.unwrap(),
            Standing::Denied("the user".into())
        );
        assert_eq!(
            store.take("code", &key("benign"), true).await.unwrap(),
            Standing::ApprovedAll("the user".into())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_caller_loses_its_oldest_finished_chain_and_nobody_else_loses_any() {
        let store = store();
        let (greedy, other) = (caller("greedy"), caller("other"));
        store
            .publish(&other, "theirs", Vec::new(), true)
            .await
            .unwrap();
        for n in 0..MAX_CHAINS_PER_CALLER {
            store
                .publish(&greedy, &format!("code {n}"), Vec::new(), true)
                .await
                .unwrap();
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        // All still waiting for their questions: a new one is refused.
        let refused = store
            .publish(&greedy, "one more", Vec::new(), true)
            .await
            .unwrap_err();
        assert!(
            refused.to_string().contains("decide those first"),
            "{refused}"
        );
        // A chain whose run asked nothing more rests: it makes room at once.
        store.rest("code 5").await.unwrap();
        store
            .publish(&greedy, "one more", Vec::new(), true)
            .await
            .unwrap();
        assert!(!store.join(&greedy, "code 5").await.unwrap());
        // Once their questions can no longer be answered, the one finished the longest ago
        // makes room; the other caller's chain stays.
        tokio::time::advance(GRANT_LIFETIME).await;
        store
            .publish(&greedy, "two more", Vec::new(), true)
            .await
            .unwrap();
        assert!(!store.join(&greedy, "code 0").await.unwrap());
        assert!(store.join(&greedy, "code 1").await.unwrap());
        assert!(store.join(&other, "theirs").await.unwrap());
        tokio::time::advance(CHAIN_LIFETIME + Duration::from_secs(1)).await;
        assert!(!store.join(&greedy, "code 1").await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn runs_making_room_at_once_each_take_a_finished_chain_of_their_own() {
        let store = store();
        let busy = caller("busy");
        for n in 0..MAX_CHAINS_PER_CALLER {
            let code = format!("code {n}");
            store.publish(&busy, &code, Vec::new(), true).await.unwrap();
            store.rest(&code).await.unwrap();
        }
        let made = futures_util::future::join_all((0..4).map(|n| {
            let (store, busy) = (store.clone(), busy.clone());
            async move {
                store
                    .publish(&busy, &format!("new {n}"), Vec::new(), true)
                    .await
            }
        }))
        .await;
        for made in made {
            made.unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_is_one_run_at_a_time_and_passes_on_when_dropped() {
        let store = store();
        let first = store.turn("code", Duration::from_secs(1)).await.unwrap();
        assert!(first.is_some());
        assert!(
            store
                .turn("code", Duration::from_secs(1))
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .turn("other", Duration::from_secs(1))
                .await
                .unwrap()
                .is_some()
        );
        drop(first);
        tokio::task::yield_now().await;
        assert!(
            store
                .turn("code", Duration::from_secs(1))
                .await
                .unwrap()
                .is_some()
        );
    }

    fn claim(key: &Key, until_ms: u64) -> Claim<'_> {
        Claim {
            key,
            until_ms,
            since: tokio::time::Instant::now(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_left_by_a_stopped_process_is_a_write_that_may_have_been_sent() {
        let state = StateStore::memory("test");
        let before = Store::new(state.clone());
        let write = key("w");
        let far = u64::MAX;
        assert!(matches!(
            before.claim("code", claim(&write, far)).await.unwrap(),
            Lookup::New
        ));
        assert!(matches!(
            before.claim("code", claim(&write, far)).await.unwrap(),
            Lookup::InFlight
        ));
        // The same records seen by a process that is not the claim's holder (as after a
        // restart with a durable store, or from another replica once the holder stopped).
        let other = Store::new(StateStore::memory("test"));
        let chain: Option<Chain> = state.read("chain:code").await.unwrap();
        other
            .state
            .put(
                "chain:code",
                &serde_json::to_string(&chain.unwrap()).unwrap(),
                CHAIN_LIFETIME,
            )
            .await
            .unwrap();
        assert!(matches!(
            other.claim("code", claim(&write, far)).await.unwrap(),
            Lookup::Sent(Fate::Unknown(_))
        ));
    }
}
