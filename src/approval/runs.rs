//! One run's own journal in the state store, and what a run leaves for the next run of its
//! code by its caller. A run's record is made at its first write and goes when the run ends;
//! the writes of it whose fate is unknown then (no response came back) are remembered for an
//! hour, and no run of the code sends them again without saying so. A run that did not end
//! (its replica stopped, its call was cancelled, the shutdown grace cut it off) stays: the
//! next run takes it over in one atomic step, and continues it (a write it sent is answered
//! with its response, one it may have sent is refused). Only the run that owns a record (a
//! random token, handed over with the record) changes or removes it. A replica that lost
//! touch with the store during a run claims nothing more for it, and a record gone is never
//! made again by the run that lost it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::caller::Caller;
use super::journal::{Fate, Journal, Key, Lookup, Sent, SentWith};
use super::store::{CHAIN_LIFETIME, Claim, Journaled, Store, StoreError};
use crate::state::{Change, StateError};

/// Runs of one code (by one caller) that may be unfinished at once; past it, a write of one
/// more is refused.
const MAX_RUNS_PER_CODE: usize = 64;

/// Runs unfinished at once in all (their own records); past it, a write of one more is
/// refused.
const MAX_RUNS: usize = 50_000;

/// Codes with writes of unknown fate remembered at most, in all; past it (or past a code's
/// journal bound) a run's such writes are left for the next run to take over instead.
const MAX_UNCERTAIN_CODES: usize = 10_000;

/// One run's own journal as stored.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Run {
    journal: Journal,
    /// The replica running it.
    replica: String,
    /// When it has certainly ended.
    until_ms: u64,
    /// The run that owns it (a random token): only it changes the record (a run that took it
    /// over owns it then).
    owner: String,
}

impl Journaled for Run {
    fn journal(&mut self) -> &mut Journal {
        &mut self.journal
    }

    fn when_gone() -> Option<Self> {
        None
    }

    fn owner(&self) -> Option<&str> {
        Some(&self.owner)
    }
}

/// What a new run of a code found of the runs of it before.
#[derive(Debug)]
pub enum Takeover {
    /// Another run of the code is still going (after waiting for it).
    Going,
    /// Nothing to continue.
    Nothing,
    /// This run continues the run with this id, which did not end.
    Took(String),
}

fn run_key(run: &str) -> String {
    format!("run:{run}")
}

fn runs_of(code: &str) -> String {
    format!("runs:{code}")
}

fn uncertain_key(code: &str) -> String {
    format!("uncertain:{code}")
}

/// `found`, if it says the write may have been sent already.
fn maybe_sent(found: Lookup) -> Option<Lookup> {
    match found {
        Lookup::Sent(_) | Lookup::SentOtherwise(_) | Lookup::Unanswered(..) => Some(found),
        _ => None,
    }
}

impl Store {
    /// Starts run `run`'s own journal (of the code with digest `code`, owned by `owner`)
    /// with `entries`; false when the code, or the deployment, has as many runs unfinished as
    /// it may.
    pub async fn start_run(
        &self,
        run: &str,
        owner: &str,
        code: &str,
        entries: Vec<Sent>,
        until_ms: u64,
    ) -> Result<bool, StateError> {
        if !self
            .state
            .admit(&runs_of(code), run, CHAIN_LIFETIME, MAX_RUNS_PER_CODE)
            .await?
        {
            return Ok(false);
        }
        if !self
            .state
            .admit("runs", run, CHAIN_LIFETIME, MAX_RUNS)
            .await?
        {
            self.state.dismiss(&runs_of(code), run).await?;
            return Ok(false);
        }
        let record = Run {
            journal: Journal::new(entries),
            replica: self.state.replica().to_owned(),
            until_ms,
            owner: owner.to_owned(),
        };
        let text =
            serde_json::to_string(&record).map_err(|e| StateError::Unreadable(e.to_string()))?;
        self.state
            .put_new(&run_key(run), &text, CHAIN_LIFETIME)
            .await
    }

    /// Makes `claim` in run `run`'s own journal (owned by `owner`; of the code with digest
    /// `code`): gone, or owned by another, means another run took it over.
    pub(super) async fn claim_in_run(
        &self,
        run: &str,
        owner: &str,
        code: &str,
        claim: Claim<'_>,
    ) -> Result<Lookup, StateError> {
        // A write the code's chain recorded as maybe sent is not this run's to send either
        // (a chain's own claims find it in the chain's journal). Read before the remembered
        // writes are (in `claim_in`): a chain dropped meanwhile left its writes there first.
        // Sent again only by a run of the chain, which claims it there.
        let in_chain = match Journal::new(self.chain_unknown(code).await?).lookup(claim.key) {
            Lookup::Unanswered(why, _) => Lookup::Sent(Fate::Unknown(why)),
            found => found,
        };
        if let Some(found) = maybe_sent(in_chain) {
            return Ok(found);
        }
        self.claim_in::<Run>(&run_key(run), Some(owner), code, claim)
            .await
    }

    /// Records that the claimed write `key` of run `run`'s own journal leaves with the
    /// idempotency key `sent_with` (nothing, if another run took it over).
    pub(super) async fn leaving_in_run(
        &self,
        run: &str,
        owner: &str,
        key: &Key,
        sent_with: SentWith,
    ) -> Result<(), StateError> {
        self.leaving_in::<Run>(&run_key(run), Some(owner), key, sent_with)
            .await
    }

    /// Ends a claim of run `run`'s own journal (nothing, if another run took it over).
    pub async fn settle_in_run(
        &self,
        run: &str,
        owner: &str,
        key: &Key,
        fate: Option<Fate>,
    ) -> Result<(), StateError> {
        self.settle_in::<Run>(&run_key(run), Some(owner), key, fate)
            .await
    }

    /// Run `run`'s own journal as the next round gets it.
    pub async fn run_snapshot(&self, run: &str) -> Result<Vec<Sent>, StateError> {
        let held: Option<Run> = self.state.read(&run_key(run)).await?;
        Ok(held.map(|r| r.journal.snapshot()).unwrap_or_default())
    }

    /// Adds `entries` to run `run`'s own journal, if `owner` owns it.
    pub async fn merge_into_run(
        &self,
        run: &str,
        owner: &str,
        entries: Vec<Sent>,
    ) -> Result<(), StateError> {
        self.state
            .update::<Run, ()>(&run_key(run), CHAIN_LIFETIME, |held| match held {
                Some(mut held) if held.owner == owner => {
                    held.journal.merge(entries.clone());
                    Change::Write(held, ())
                }
                _ => Change::Keep(()),
            })
            .await
    }

    /// Moves run `run`'s own journal (if `owner` owns it) into the chain of `code`, made if
    /// it has none (within the bounds, waiting for a question when `waiting`): the writes it
    /// recorded, and its claims still in flight, which are then settled in the chain.
    pub async fn publish_run(
        &self,
        caller: &Caller,
        code: &str,
        run: &str,
        owner: &str,
        waiting: bool,
    ) -> Result<(), StoreError> {
        let Some(held) = self.owned(run, owner).await? else {
            return Ok(());
        };
        let (entries, holds) = held.journal.parts();
        self.publish(caller, code, entries, waiting).await?;
        for hold in holds {
            self.hold(code, hold).await?;
        }
        // Moved, not ended: nothing of it stays behind to be taken over.
        self.remove_run(code, run, owner).await?;
        Ok(())
    }

    /// Run `run` of the code with digest `code` ended: its own journal goes (if `owner`
    /// still owns it); its writes whose fate is unknown are remembered, for no run of the
    /// code to send again. A run whose such writes cannot be remembered (past the bounds) is
    /// left instead for the next run to take over whole.
    pub async fn finish_run(&self, code: &str, run: &str, owner: &str) -> Result<(), StateError> {
        let Some(mut held) = self.owned(run, owner).await? else {
            return Ok(());
        };
        held.journal.expire_holds(&|_| true);
        let unknown = held.journal.unknown();
        if !unknown.is_empty() && !self.remember_uncertain(code, unknown).await? {
            tracing::warn!(
                "writes that may have been sent are past what sdkbox remembers: the run is left \
                 for the next run of its code to take over"
            );
            return self.abandon_run(code, run, owner).await;
        }
        self.remove_run(code, run, owner).await
    }

    /// Run `run` did not end (its call was cancelled, or the server stopped it): the next run
    /// of its code takes it over at once. Only the run that owns the record does this.
    pub async fn abandon_run(&self, code: &str, run: &str, owner: &str) -> Result<(), StateError> {
        let abandoned = self
            .state
            .update::<Run, bool>(&run_key(run), CHAIN_LIFETIME, |held| match held {
                Some(mut held) if held.owner == owner => {
                    held.until_ms = 0;
                    Change::Write(held, true)
                }
                _ => Change::Keep(false),
            })
            .await?;
        if abandoned {
            self.relist(code, run).await?;
        }
        Ok(())
    }

    /// Lists run `run` among the unfinished runs of `code` for as long as its record lives
    /// (past the bound: it is listed already, and must stay so to be taken over).
    async fn relist(&self, code: &str, run: &str) -> Result<(), StateError> {
        self.state
            .admit(&runs_of(code), run, CHAIN_LIFETIME, usize::MAX)
            .await
            .map(|_| ())
    }

    /// Takes run `run` off the lists of unfinished runs.
    async fn unlist(&self, code: &str, run: &str) -> Result<(), StateError> {
        self.state.dismiss(&runs_of(code), run).await?;
        self.state.dismiss("runs", run).await
    }

    /// Run `run`'s record, if `owner` still owns it.
    async fn owned(&self, run: &str, owner: &str) -> Result<Option<Run>, StateError> {
        let held: Option<Run> = self.state.read(&run_key(run)).await?;
        Ok(held.filter(|held| held.owner == owner))
    }

    /// Removes run `run`'s record if `owner` still owns it.
    async fn remove_run(&self, code: &str, run: &str, owner: &str) -> Result<(), StateError> {
        let removed = self
            .state
            .update::<Run, bool>(&run_key(run), CHAIN_LIFETIME, |held| match held {
                Some(held) if held.owner == owner => Change::Delete(true),
                _ => Change::Keep(false),
            })
            .await?;
        if removed {
            self.unlist(code, run).await?;
        }
        Ok(())
    }

    /// Takes over the run of the code with digest `code` that did not end (its replica
    /// stopped, its time is up, or it was abandoned), if there is one, in one atomic step (of
    /// two runs that find it, one continues it; the other then finds it going), for `owner`
    /// on this replica until `until_ms`; any other such run's writes join it. A run of the
    /// code still going is waited for, up to `wait`.
    pub async fn take_over_unfinished(
        &self,
        code: &str,
        owner: &str,
        until_ms: u64,
        wait: Duration,
    ) -> Result<Takeover, StateError> {
        let until = tokio::time::Instant::now() + wait;
        let mut pause = Duration::from_millis(50);
        loop {
            let (going, stopped, dead) = self.unfinished(code).await?;
            if !going {
                let Some((first, others)) = stopped.split_first() else {
                    return Ok(Takeover::Nothing);
                };
                if self.take_run(code, first, owner, &dead, until_ms).await? {
                    for other in others {
                        self.absorb(code, first, owner, other).await?;
                    }
                    return Ok(Takeover::Took(first.clone()));
                }
                // Another run took it first: it is going now.
                continue;
            }
            if tokio::time::Instant::now() + pause > until {
                return Ok(Takeover::Going);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Moves the writes of stopped run `other` (its claims in flight as maybe sent) into run
    /// `run`, owned by `owner`, which took over first; `other` goes.
    async fn absorb(
        &self,
        code: &str,
        run: &str,
        owner: &str,
        other: &str,
    ) -> Result<(), StateError> {
        if let Some(text) = self.state.take(&run_key(other)).await? {
            let mut held: Run = serde_json::from_str(&text)
                .map_err(|e| StateError::Unreadable(format!("run {other}: {e}")))?;
            held.journal.expire_holds(&|_| true);
            self.merge_into_run(run, owner, held.journal.snapshot())
                .await?;
        }
        self.unlist(code, other).await
    }

    /// Makes run `run` (of the code with digest `code`) this replica's and `owner`'s, if it
    /// is still stopped (`dead` replicas' or past its time): its claims in flight become
    /// writes that may have been sent.
    async fn take_run(
        &self,
        code: &str,
        run: &str,
        owner: &str,
        dead: &[String],
        until_ms: u64,
    ) -> Result<bool, StateError> {
        let now = self.state.now_ms();
        let replica = self.state.replica().to_owned();
        let took = self
            .state
            .update::<Run, bool>(&run_key(run), CHAIN_LIFETIME, |held| match held {
                Some(mut held) if held.until_ms <= now || dead.contains(&held.replica) => {
                    held.journal.expire_holds(&|_| true);
                    held.replica = replica.clone();
                    held.until_ms = until_ms;
                    held.owner = owner.to_owned();
                    Change::Write(held, true)
                }
                _ => Change::Keep(false),
            })
            .await?;
        if took {
            self.relist(code, run).await?;
        }
        Ok(took)
    }

    /// Whether a run of `code` is going on, the runs of it that stopped unfinished, and the
    /// replicas found gone.
    async fn unfinished(&self, code: &str) -> Result<(bool, Vec<String>, Vec<String>), StateError> {
        let now = self.state.now_ms();
        let (mut going, mut stopped, mut dead) = (false, Vec::new(), Vec::new());
        for run in self.state.members(&runs_of(code)).await? {
            let Some(held) = self.state.read::<Run>(&run_key(&run)).await? else {
                self.state.dismiss(&runs_of(code), &run).await?;
                continue;
            };
            let alive = !dead.contains(&held.replica) && self.state.alive(&held.replica).await?;
            if !alive && !dead.contains(&held.replica) {
                dead.push(held.replica.clone());
            }
            match held.until_ms > now && alive {
                true => going = true,
                false => stopped.push(run),
            }
        }
        Ok((going, stopped, dead))
    }

    /// What finished runs of the code with digest `code` left about `key`: a write that may
    /// have been sent (exactly, or at its place with other bytes).
    pub(super) async fn uncertain_lookup(
        &self,
        code: &str,
        key: &Key,
    ) -> Result<Option<Lookup>, StateError> {
        let remembered = self.state.read::<Vec<Sent>>(&uncertain_key(code)).await?;
        Ok(maybe_sent(
            Journal::new(remembered.unwrap_or_default()).lookup(key),
        ))
    }

    /// Records the answer of a write of the code with digest `code` remembered as maybe sent
    /// that was sent again with its idempotency key: later runs are answered with it.
    pub(super) async fn resolve_uncertain(
        &self,
        code: &str,
        answered: Sent,
    ) -> Result<(), StateError> {
        self.state
            .update::<Vec<Sent>, ()>(&uncertain_key(code), CHAIN_LIFETIME, |kept| {
                let Some(kept) = kept else {
                    return Change::Keep(());
                };
                let mut journal = Journal::new(kept);
                match journal.resolve(vec![answered.clone()]) {
                    true => Change::Write(journal.parts().0, ()),
                    false => Change::Keep(()),
                }
            })
            .await
    }

    /// Remembers writes of the code with digest `code` that may have been sent, for an hour;
    /// false (nothing remembered) past the bounds.
    pub(super) async fn remember_uncertain(
        &self,
        code: &str,
        unknown: Vec<Sent>,
    ) -> Result<bool, StateError> {
        if !self
            .state
            .admit("uncertain", code, CHAIN_LIFETIME, MAX_UNCERTAIN_CODES)
            .await?
        {
            return Ok(false);
        }
        self.state
            .update::<Vec<Sent>, bool>(&uncertain_key(code), CHAIN_LIFETIME, |kept| {
                let mut journal = Journal::new(kept.unwrap_or_default());
                match journal.merge_all(unknown.clone()) {
                    true => Change::Write(journal.parts().0, true),
                    false => Change::Keep(false),
                }
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::chain::{Found, RunJournal};
    use crate::approval::store::tests::key;
    use crate::egress::ScriptResponse;
    use crate::state::StateStore;

    const LEASE: Duration = Duration::from_secs(60);
    const SHORT: Duration = Duration::from_millis(200);

    fn claimed(found: Found) -> crate::approval::chain::Claimed {
        match found {
            Found::New(claimed) => claimed,
            other => panic!("not new: {other:?}"),
        }
    }

    /// The records of `code`'s runs, as another process sees them (its replica is not the one
    /// that made them: that one stopped).
    async fn seen_elsewhere(from: &StateStore, code: &str) -> Store {
        let other = StateStore::memory("t");
        for run in from.members(&runs_of(code)).await.unwrap() {
            let text = from.get(&run_key(&run)).await.unwrap().unwrap();
            other
                .put(&run_key(&run), &text, CHAIN_LIFETIME)
                .await
                .unwrap();
            other
                .admit(&runs_of(code), &run, CHAIN_LIFETIME, MAX_RUNS_PER_CODE)
                .await
                .unwrap();
        }
        Store::new(other)
    }

    async fn take_over(store: &Store, code: &str, owner: &str) -> Takeover {
        let until = store.state.now_ms() + LEASE.as_millis() as u64;
        store
            .take_over_unfinished(code, owner, until, SHORT)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_run_whose_replica_stopped_is_taken_over_whole_once() {
        let state = StateStore::memory("t");
        let store = Store::new(state.clone());
        let run = RunJournal::own(store.clone(), "code", Vec::new(), LEASE, "first")
            .await
            .unwrap();
        let answered = Fate::Answered(ScriptResponse::ok_for_tests("{}"));
        claimed(run.claim(key("sent")).await.unwrap())
            .settle(Some(answered))
            .await;
        std::mem::forget(claimed(run.claim(key("in flight")).await.unwrap()));
        // Still going here: nothing to take over, and the next run waits for it.
        assert!(matches!(
            take_over(&store, "code", "next").await,
            Takeover::Going
        ));
        // Its process stops; the next run elsewhere continues it, and only it does.
        let after = seen_elsewhere(&state, "code").await;
        let Takeover::Took(taken) = take_over(&after, "code", "next").await else {
            panic!("not taken over");
        };
        assert!(matches!(
            take_over(&after, "code", "next").await,
            Takeover::Going
        ));
        let next = RunJournal::continuing(after.clone(), "code", &taken, LEASE, "next");
        assert!(matches!(
            next.claim(key("in flight")).await.unwrap(),
            Found::Sent(Fate::Unknown(_))
        ));
        assert!(matches!(
            next.claim(key("sent")).await.unwrap(),
            Found::Sent(Fate::Answered(_))
        ));
        drop(claimed(next.claim(key("new")).await.unwrap()));
        // It ends: the write of unknown fate is not sent by a later run of the code (which
        // is told so); a write that was answered is a later run's to send again.
        next.finish().await.unwrap();
        assert!(matches!(
            take_over(&after, "code", "next").await,
            Takeover::Nothing
        ));
        let later = RunJournal::own(after.clone(), "code", Vec::new(), LEASE, "later")
            .await
            .unwrap();
        assert!(matches!(
            later.claim(key("in flight")).await.unwrap(),
            Found::Sent(Fate::Unknown(_))
        ));
        drop(claimed(later.claim(key("sent")).await.unwrap()));
        // That later run refused it and ended: nothing more is remembered of it than before.
        later.finish().await.unwrap();
        let kept: Vec<Sent> = after
            .state
            .read(&uncertain_key("code"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(kept.len(), 1);
    }

    #[tokio::test]
    async fn runs_racing_to_take_over_a_stopped_run_continue_it_once() {
        let state = StateStore::memory("t");
        let store = Store::new(state.clone());
        let run = RunJournal::own(store.clone(), "code", Vec::new(), LEASE, "first")
            .await
            .unwrap();
        std::mem::forget(claimed(run.claim(key("in flight")).await.unwrap()));
        let after = seen_elsewhere(&state, "code").await;
        let (a, b) = tokio::join!(
            take_over(&after, "code", "next"),
            take_over(&after, "code", "next")
        );
        let took = [&a, &b]
            .iter()
            .filter(|t| matches!(t, Takeover::Took(_)))
            .count();
        assert_eq!(took, 1, "{a:?} {b:?}");
        // The one that took it ends; the other, running afresh then, does not send the write
        // either: it is remembered as maybe sent.
        let Some(Takeover::Took(run)) = [a, b].into_iter().find(|t| matches!(t, Takeover::Took(_)))
        else {
            panic!("none took it");
        };
        RunJournal::continuing(after.clone(), "code", &run, LEASE, "next")
            .finish()
            .await
            .unwrap();
        let fresh = RunJournal::own(after.clone(), "code", Vec::new(), LEASE, "later")
            .await
            .unwrap();
        assert!(matches!(
            fresh.claim(key("in flight")).await.unwrap(),
            Found::Sent(Fate::Unknown(_))
        ));
    }

    #[tokio::test]
    async fn a_run_that_lost_its_record_to_another_changes_nothing_of_it() {
        let store = Store::new(StateStore::memory("t"));
        let first = RunJournal::own(store.clone(), "code", Vec::new(), LEASE, "first")
            .await
            .unwrap();
        drop(claimed(first.claim(key("w1")).await.unwrap()));
        first.abandon_later();
        tokio::time::sleep(SHORT).await;
        let Takeover::Took(run) = take_over(&store, "code", "second").await else {
            panic!("not taken over");
        };
        // The first run comes back: it can neither claim, nor end, nor leave the record.
        assert!(matches!(
            first.claim(key("w2")).await.unwrap(),
            Found::TakenOver
        ));
        first.finish().await.unwrap();
        let second = RunJournal::continuing(store.clone(), "code", &run, LEASE, "second");
        claimed(second.claim(key("w2")).await.unwrap())
            .settle(Some(Fate::Unknown("lost".into())))
            .await;
        assert!(matches!(
            take_over(&store, "code", "third").await,
            Takeover::Going
        ));
        second.finish().await.unwrap();
        // The second run's write of unknown fate is remembered for the runs after it.
        let later = RunJournal::own(store.clone(), "code", Vec::new(), LEASE, "later")
            .await
            .unwrap();
        assert!(matches!(
            later.claim(key("w2")).await.unwrap(),
            Found::Sent(Fate::Unknown(_))
        ));
    }

    #[tokio::test]
    async fn writes_maybe_sent_by_the_chain_or_remembered_are_claimed_by_no_run() {
        use crate::approval::caller::CallerParts;
        let store = Store::new(StateStore::memory("t"));
        let caller = Caller::new(b"k", CallerParts::default());
        let unknown = |name: &str| Sent {
            key: key(name),
            fate: Fate::Unknown("lost".into()),
            sent_with: None,
        };
        // The code's chain recorded a write as maybe sent: a run with a journal of its own
        // does not send it either.
        store
            .publish(&caller, "code", vec![unknown("in chain")], false)
            .await
            .unwrap();
        let run = RunJournal::own(store.clone(), "code", Vec::new(), LEASE, "own")
            .await
            .unwrap();
        assert!(matches!(
            run.claim(key("in chain")).await.unwrap(),
            Found::Sent(Fate::Unknown(_))
        ));
        // A write remembered (a chain dropped to make room left it) is not claimed in the
        // chain begun again: its claim there is released.
        assert!(
            store
                .remember_uncertain("dropped", vec![unknown("remembered")])
                .await
                .unwrap()
        );
        let chained = RunJournal::chained(store.clone(), "dropped", LEASE);
        assert!(matches!(
            chained.claim(key("remembered")).await.unwrap(),
            Found::Sent(Fate::Unknown(_))
        ));
        assert!(store.snapshot("dropped").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_run_cut_short_is_taken_over_at_once_and_one_that_ended_leaves_nothing() {
        let store = Store::new(StateStore::memory("t"));
        let cut = RunJournal::own(store.clone(), "cut", Vec::new(), LEASE, "cut")
            .await
            .unwrap();
        claimed(cut.claim(key("w")).await.unwrap())
            .settle(Some(Fate::Answered(ScriptResponse::ok_for_tests("{}"))))
            .await;
        cut.abandon_later();
        tokio::time::sleep(SHORT).await;
        assert!(matches!(
            take_over(&store, "cut", "next").await,
            Takeover::Took(_)
        ));

        let ended = RunJournal::own(store.clone(), "ended", Vec::new(), LEASE, "ended")
            .await
            .unwrap();
        claimed(ended.claim(key("w")).await.unwrap())
            .settle(Some(Fate::Answered(ScriptResponse::ok_for_tests("{}"))))
            .await;
        claimed(ended.claim(key("not sent")).await.unwrap())
            .settle(None)
            .await;
        ended.finish().await.unwrap();
        assert!(matches!(
            take_over(&store, "ended", "next").await,
            Takeover::Nothing
        ));
        assert!(
            store
                .uncertain_lookup("ended", &key("w"))
                .await
                .unwrap()
                .is_none()
        );
    }

    fn with(value: &str) -> Option<SentWith> {
        Some(SentWith {
            header: "Idempotency-Key".into(),
            value: value.into(),
            left_ms: 0,
        })
    }

    /// A claim whose run stopped while a human was asked never left: it has no key, and is
    /// refused as any write that may have been sent, never sent unasked. One that left
    /// with a key may go again with it, once, claimed.
    #[tokio::test]
    async fn only_a_write_that_left_with_a_key_may_go_again_with_it() {
        let state = StateStore::memory("t");
        let store = Store::new(state.clone());
        let run = RunJournal::own(store.clone(), "code", Vec::new(), LEASE, "first")
            .await
            .unwrap();
        std::mem::forget(claimed(run.claim(key("asked")).await.unwrap()));
        let left = claimed(run.claim(key("left")).await.unwrap()).leaving_with(with("k1"));
        left.leaving().await;
        std::mem::forget(left);
        let after = seen_elsewhere(&state, "code").await;
        let Takeover::Took(taken) = take_over(&after, "code", "next").await else {
            panic!("not taken over");
        };
        let next = RunJournal::continuing(after.clone(), "code", &taken, LEASE, "next");
        assert!(matches!(
            next.claim(key("asked")).await.unwrap(),
            Found::Sent(Fate::Unknown(_))
        ));
        let Found::Unanswered(again, sent_with, _) = next.claim(key("left")).await.unwrap() else {
            panic!("not unanswered");
        };
        assert_eq!(sent_with.value, "k1");
        assert!(sent_with.left_ms > 0, "{sent_with:?}");
        assert!(matches!(
            next.claim(key("left")).await.unwrap(),
            Found::InFlight
        ));
        drop(again);
        next.settled().await;
        assert!(matches!(
            next.claim(key("left")).await.unwrap(),
            Found::Unanswered(..)
        ));
    }

    /// The answer to a write sent again reaches what every later run of the code reads, from
    /// whichever journal sent it (a chain's too); a conflict (the provider still applying the
    /// key for another run) or a failure is no answer, and the write stays unanswered.
    #[tokio::test]
    async fn an_answer_to_a_write_sent_again_reaches_every_later_run() {
        let store = Store::new(StateStore::memory("t"));
        let unknown = Sent {
            key: key("pay"),
            fate: Fate::Unknown("lost".into()),
            sent_with: with("k1"),
        };
        assert!(
            store
                .remember_uncertain("code", vec![unknown])
                .await
                .unwrap()
        );
        let answer = |status| {
            let mut response = ScriptResponse::ok_for_tests("{\"id\":\"pay_1\"}");
            response.status = status;
            Some(Fate::Answered(response))
        };
        for status in [409, 503, 200] {
            let chained = RunJournal::chained(store.clone(), "code", LEASE);
            let Found::Unanswered(again, sent_with, _) = chained.claim(key("pay")).await.unwrap()
            else {
                panic!("not unanswered before the {status}");
            };
            let again = again.leaving_with(Some(sent_with));
            again.leaving().await;
            again.settle(answer(status)).await;
        }
        let own = RunJournal::own(store.clone(), "code", Vec::new(), LEASE, "own")
            .await
            .unwrap();
        let Found::Sent(Fate::Answered(response)) = own.claim(key("pay")).await.unwrap() else {
            panic!("not answered");
        };
        assert_eq!(response.status, 200);
    }
}
