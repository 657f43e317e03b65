//! The journal one run writes to, always in the state store: the run's own record until a
//! question about one of its writes leaves the execution; from then on its code's chain,
//! which the re-run the question leads to continues (on whichever replica it lands). Each
//! write is claimed before it leaves and settled with what became of it; a settle that
//! cannot wait (the request was cut short) runs in the background, and the round waits for
//! it before it hands the journal on. What a run leaves for the next run of its code is in
//! `runs.rs`.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use super::caller::Caller;
use super::journal::{Fate, Key, Lookup, Sent, SentWith, answers};
use super::store::{Claim, Store, StoreError};
use crate::state::StateError;

/// How long a round waits for the settles still running when it ends.
const SETTLE_WAIT: Duration = Duration::from_secs(10);

/// Where a run's journal lives.
#[derive(Clone)]
enum Home {
    /// The run's own record (made at its first write), with this id, which this run owns
    /// with this token.
    Run(String, String),
    /// The chain of the code.
    Chain,
}

/// The journal of one run.
pub struct RunJournal {
    store: Store,
    /// The digest of the run's code and caller.
    code: String,
    home: tokio::sync::Mutex<Home>,
    settles: TaskTracker,
    /// The runtime the run began on, which outlives it: settles run there (not on an
    /// execution's own runtime, which ends with it).
    runtime: Option<tokio::runtime::Handle>,
    /// How long a claim of this run may last (its deadline and every wait for a human).
    lease: Duration,
    /// Whether the run's own record was made (at its first claim, or with its entries).
    made: std::sync::atomic::AtomicBool,
    /// When the run began: a replica that lost touch with the store since claims nothing
    /// more for it.
    began: tokio::time::Instant,
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
    /// Another replica took this run over (this one had lost touch with the state store).
    TakenOver,
    /// Nobody has: it is claimed for the caller.
    New(Claimed),
    /// An earlier run sent exactly this write with this idempotency key, and no response
    /// came back (the reason says what happened): it is claimed for the caller, to go again
    /// with that key. Released unsent, it stays unanswered.
    Unanswered(Claimed, SentWith, String),
}

impl RunJournal {
    /// A run's own journal (the code with digest `code`), owned with the token `owner`,
    /// starting with `entries`: writes of earlier runs it continues (a request state the
    /// store could not keep).
    pub async fn own(
        store: Store,
        code: &str,
        entries: Vec<Sent>,
        lease: Duration,
        owner: &str,
    ) -> Result<Arc<Self>, StateError> {
        let run = crate::approval::random_hex(12)
            .ok_or_else(|| StateError::Unavailable("no randomness for a run's id".into()))?;
        let made = match entries.is_empty() {
            true => false,
            false => {
                let until_ms = store.state().now_ms() + lease.as_millis() as u64;
                if !store
                    .start_run(&run, owner, code, entries, until_ms)
                    .await?
                {
                    return Err(StateError::Unavailable(
                        "as many runs of this code are unfinished as sdkbox keeps".into(),
                    ));
                }
                true
            }
        };
        let journal = Self::at(store, code, Home::Run(run, owner.to_owned()), lease);
        journal
            .made
            .store(made, std::sync::atomic::Ordering::SeqCst);
        Ok(journal)
    }

    /// The own journal `run` of a run of the code with digest `code` that did not end, which
    /// this run continues (it took it over with the token `owner`).
    pub fn continuing(
        store: Store,
        code: &str,
        run: &str,
        lease: Duration,
        owner: &str,
    ) -> Arc<Self> {
        let home = Home::Run(run.to_owned(), owner.to_owned());
        let journal = Self::at(store, code, home, lease);
        journal
            .made
            .store(true, std::sync::atomic::Ordering::SeqCst);
        journal
    }

    /// The journal of the chain of the code with digest `code`, which this run continues.
    pub fn chained(store: Store, code: &str, lease: Duration) -> Arc<Self> {
        Self::at(store, code, Home::Chain, lease)
    }

    fn at(store: Store, code: &str, home: Home, lease: Duration) -> Arc<Self> {
        Arc::new(Self {
            store,
            code: code.to_owned(),
            home: tokio::sync::Mutex::new(home),
            settles: TaskTracker::new(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            lease,
            made: std::sync::atomic::AtomicBool::new(false),
            began: tokio::time::Instant::now(),
        })
    }

    /// Whether the journal is its code's chain.
    pub async fn published(&self) -> bool {
        matches!(*self.home.lock().await, Home::Chain)
    }

    /// Looks a write up; a new one is claimed, and so is one an earlier run sent with an
    /// idempotency key and left unanswered (to go again with that key); the claim is released
    /// (the write may be sent later, or stays unanswered) unless it is settled with a fate.
    pub async fn claim(self: &Arc<Self>, key: Key) -> Result<Found, StateError> {
        let until_ms = self.store.state().now_ms() + self.lease.as_millis() as u64;
        let claim = Claim {
            key: &key,
            until_ms,
            since: self.began,
        };
        let home = self.home.lock().await;
        let found = match &*home {
            Home::Run(run, owner) => {
                use std::sync::atomic::Ordering;
                // Made once, at the first claim: a record gone later was taken over, and is
                // never made again by this run.
                if !self.made.load(Ordering::SeqCst) {
                    if !self.store.state().in_touch_since(self.began) {
                        return Err(StateError::Unavailable(
                            "this server lost touch with it during this run".into(),
                        ));
                    }
                    if !self
                        .store
                        .start_run(run, owner, &self.code, Vec::new(), until_ms)
                        .await?
                    {
                        return Ok(Found::Full);
                    }
                    self.made.store(true, Ordering::SeqCst);
                }
                self.store
                    .claim_in_run(run, owner, &self.code, claim)
                    .await?
            }
            Home::Chain => self.store.claim(&self.code, claim).await?,
        };
        Ok(match found {
            Lookup::Sent(fate) => Found::Sent(fate),
            Lookup::SentOtherwise(fate) => Found::SentOtherwise(fate),
            Lookup::InFlight => Found::InFlight,
            Lookup::Full => Found::Full,
            Lookup::TakenOver => Found::TakenOver,
            Lookup::New => Found::New(Claimed {
                journal: self.clone(),
                key: Some(key),
                sent_with: None,
                again: false,
            }),
            Lookup::Unanswered(why, sent_with) => Found::Unanswered(
                Claimed {
                    journal: self.clone(),
                    key: Some(key),
                    sent_with: None,
                    again: true,
                },
                sent_with,
                why,
            ),
        })
    }

    async fn settle(&self, key: &Key, fate: Option<Fate>) -> Result<(), StateError> {
        match &*self.home.lock().await {
            Home::Run(run, owner) => self.store.settle_in_run(run, owner, key, fate).await,
            Home::Chain => self.store.settle(&self.code, key, fate).await,
        }
    }

    async fn leaving(&self, key: &Key, sent_with: SentWith) -> Result<(), StateError> {
        match &*self.home.lock().await {
            Home::Run(run, owner) => self.store.leaving_in_run(run, owner, key, sent_with).await,
            Home::Chain => self.store.leaving(&self.code, key, sent_with).await,
        }
    }

    /// Makes this run's journal its code's chain before a question leaves the execution (the
    /// re-run that answers it continues this run): its writes, and its claims still in
    /// flight, move there (joining the chain another run of the code made meanwhile, if one
    /// did); an error past the store's bounds.
    pub async fn publish(&self, caller: &Caller) -> Result<(), StoreError> {
        let mut home = self.home.lock().await;
        let Home::Run(run, owner) = &*home else {
            return Ok(());
        };
        self.store
            .publish_run(caller, &self.code, run, owner, true)
            .await?;
        *home = Home::Chain;
        Ok(())
    }

    /// The journal as the next round gets it, once the settles still running have ended.
    pub async fn snapshot(&self) -> Result<Vec<Sent>, StateError> {
        self.settled().await;
        match &*self.home.lock().await {
            Home::Run(run, _) => self.store.run_snapshot(run).await,
            Home::Chain => self.store.snapshot(&self.code).await,
        }
    }

    /// Waits (a while) for the settles still running.
    pub async fn settled(&self) {
        self.settles.close();
        let _ = tokio::time::timeout(SETTLE_WAIT, self.settles.wait()).await;
    }

    /// The run has ended: its own record goes (its writes whose fate is unknown are
    /// remembered, see `runs.rs`); a chain stays for the runs that continue it.
    pub async fn finish(&self) -> Result<(), StateError> {
        self.settled().await;
        match &*self.home.lock().await {
            Home::Run(run, owner) => self.store.finish_run(&self.code, run, owner).await,
            Home::Chain => Ok(()),
        }
    }

    /// The run did not end (its call was cancelled, or the server stopped it): in the
    /// background, once its settles are in, its own record is left for the next run of its
    /// code to take over at once.
    pub fn abandon_later(self: &Arc<Self>) {
        let journal = self.clone();
        if let Some(runtime) = &self.runtime {
            runtime.spawn(async move {
                journal.settled().await;
                if let Home::Run(run, owner) = &*journal.home.lock().await
                    && let Err(error) = journal.store.abandon_run(&journal.code, run, owner).await
                {
                    tracing::warn!(%error, "a run cut short could not be left for the next");
                }
            });
        }
    }
}

/// A write claimed in a run's journal: settled with what became of it, or released when
/// dropped unsettled (the decision was not to send it, or was never made).
#[derive(Debug)]
pub struct Claimed {
    journal: Arc<RunJournal>,
    key: Option<Key>,
    /// The idempotency key it is to leave with, if the provider takes them.
    sent_with: Option<SentWith>,
    /// Whether an earlier run sent it with its key and no answer came back.
    again: bool,
}

impl std::fmt::Debug for RunJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunJournal")
    }
}

impl Claimed {
    /// The claim of a write that is to leave with the idempotency key `sent_with`.
    pub fn leaving_with(mut self, sent_with: Option<SentWith>) -> Self {
        self.sent_with = sent_with;
        self
    }

    /// Records, as its first attempt leaves, the idempotency key the write leaves with: from
    /// then on, should no answer come back, a later run may send it again with that key.
    /// Unrecorded (the store failed), the write is refused as any that may have been sent.
    pub async fn leaving(&self) {
        let Some(mut sent_with) = self.sent_with.clone() else {
            return;
        };
        // A write sent again keeps when it first left.
        if sent_with.left_ms == 0 {
            sent_with.left_ms = self.journal.store.state().now_ms();
        }
        if let Some(key) = &self.key
            && let Err(error) = self.journal.leaving(key, sent_with).await
        {
            tracing::warn!(%error, "a write's idempotency key could not be recorded; should \
                                    its answer be lost, it is not sent again");
        }
    }

    /// Ends the claim: with the write's fate when it went out (or may have), with `None`
    /// when it certainly did not. An answer to a write sent again is recorded where the
    /// runs of its code look for it, whichever journal this run keeps.
    pub async fn settle(mut self, fate: Option<Fate>) {
        let Some(key) = self.key.take() else {
            return;
        };
        // Sent again, a failure or a conflict is no answer (see `journal::answers`): it stays
        // unanswered, here too.
        let fate = match fate {
            Some(Fate::Answered(response))
                if self.again && !answers(&Fate::Answered(response.clone())) =>
            {
                Some(Fate::Unknown(format!(
                    "sent again with its idempotency key, it was answered HTTP {}, which does \
                     not say whether the first sending was applied",
                    response.status
                )))
            }
            fate => fate,
        };
        let answered = match (&fate, self.again) {
            (Some(fate @ Fate::Answered(_)), true) => Some(Sent {
                key: key.clone(),
                fate: fate.clone(),
                sent_with: self.sent_with.clone(),
            }),
            _ => None,
        };
        if let Err(error) = self.journal.settle(&key, fate).await {
            tracing::warn!(%error, "a write's journal entry could not be settled; its claim \
                                    lapses when its lease ends, and it counts as maybe sent");
        }
        if let Some(answered) = answered
            && let Err(error) = self
                .journal
                .store
                .resolve_uncertain(&self.journal.code, answered)
                .await
        {
            tracing::warn!(%error, "the answer of a write sent again could not be recorded \
                                    for later runs; they send it again with its key");
        }
    }

    /// Ends the claim in the background (from a destructor), with `fate`.
    pub fn settle_later(mut self, fate: Option<Fate>) {
        let Some(key) = self.key.take() else {
            return;
        };
        spawn_settle(self.journal.clone(), key, fate);
    }
}

fn spawn_settle(journal: Arc<RunJournal>, key: Key, fate: Option<Fate>) {
    let Some(runtime) = journal.runtime.clone() else {
        return;
    };
    let tracker = journal.settles.clone();
    runtime.spawn(tracker.track_future(async move {
        if let Err(error) = journal.settle(&key, fate).await {
            tracing::warn!(%error, "a write's journal entry could not be settled");
        }
    }));
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            spawn_settle(self.journal.clone(), key, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::caller::CallerParts;
    use crate::approval::store::tests::key;
    use crate::state::StateStore;

    const LEASE: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn a_claim_released_after_its_journal_became_the_chain_is_released_there() {
        let store = Store::new(StateStore::memory("t"));
        let caller = Caller::new(b"k", CallerParts::default());
        let run = RunJournal::own(store.clone(), "code", Vec::new(), LEASE, "owner")
            .await
            .unwrap();
        let Found::New(claimed) = run.claim(key("w")).await.unwrap() else {
            panic!("not new");
        };
        run.publish(&caller).await.unwrap();
        drop(claimed);
        run.settled().await;
        let next = RunJournal::chained(store, "code", LEASE);
        assert!(matches!(next.claim(key("w")).await.unwrap(), Found::New(_)));
    }
}
