//! One execution's checkpoint: it classifies each request by what is sent, answers a write
//! of a chain that an earlier run sent from the journal, asks a human when a rule says
//! `approve` (`human.rs`), keeps a dry run's plan, and writes every decision about a write to
//! the audit file before anything leaves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::ask::{Approver, Ask, Fingerprint, random_hex};
use super::audit::{self, Subject};
use super::caller::{Caller, code_digest};
use super::chain::{Claimed, Found, RunJournal};
use super::follow::Follow;
use super::journal::{self, Fate, Key, Sent, SentWith};
use super::shown::Shown;
use super::states::Carried;
use super::{Approvals, Classified, Planned, Rule, Rules, dry_run};
use crate::deadline::Deadline;
use crate::egress::{
    Checkpoint, Decided, Decision, Note, Outgoing, Pending, Position, Refusal, Scrubber, Verdict,
    WITHHELD, cut, is_write,
};
use crate::lock::lock;
use tokio_util::task::TaskTracker;

/// Writes a dry run lists in its plan; more are counted.
const MAX_PLANNED: usize = 100;

/// Characters of a planned write's body kept in the plan.
const MAX_PLANNED_BODY: usize = 300;

/// How long after a write first left with an idempotency key it may be sent again with it:
/// within the time providers keep keys (Stripe: 24 hours).
const RESEND_WITHIN: std::time::Duration = std::time::Duration::from_secs(23 * 3600);

/// Approvals waiting outside the execution that one outcome lists.
const MAX_LISTED_APPROVALS: usize = 5;

/// A question asked outside the execution: what the human sees, which write it is about, and
/// what the model was told.
#[derive(Debug, Clone)]
pub struct Deferred {
    /// The question.
    pub ask: Ask,
    /// The write.
    pub key: Key,
    /// What the model was told.
    pub message: String,
}

/// One execution's gate.
pub struct Gate {
    pub(super) approvals: Approvals,
    pub(super) caller: Caller,
    pub(super) approver: Option<Arc<dyn Approver>>,
    pub(super) execution: String,
    pub(super) code: String,
    dry_run: bool,
    /// The run's journal, when its approvals can come from outside the execution (the page,
    /// a 2026-07-28 retry): its own until its first question leaves, then its code's chain.
    pub(super) journal: Option<Arc<RunJournal>>,
    pub(super) state: Mutex<State>,
    /// Why every write of this run is refused whatever the rules say (a sign-in without the
    /// write scope), and whether one was.
    writes_refused: std::sync::OnceLock<String>,
    refused_a_write: std::sync::atomic::AtomicBool,
    /// The requests it let through that are still followed, and the audit lines written
    /// for them as they end: the outcome waits for them (see [`Gate::audited`]).
    following: TaskTracker,
    /// The writes whose first attempt left (by fingerprint and occurrence): an approval one
    /// of them used is spent, any other goes back (see [`Gate::carried`]).
    left: Arc<Mutex<std::collections::HashSet<(Fingerprint, u32)>>>,
}

#[derive(Default)]
pub(super) struct State {
    /// What earlier rounds handed over, and the channel their decisions came through.
    pub carried: Carried,
    pub carried_channel: String,
    /// Why the decisions of earlier rounds are asked again, if they are.
    pub asked_again: Option<String>,
    /// Who approved every write of this run, and through which channel.
    pub all_approved: Option<(String, String)>,
    /// Approvals handed over by earlier rounds that this run used for writes, with the write
    /// that used each: each goes back to the next round unless that write left (the run may
    /// end between the decision and the sending).
    pub taken: Vec<(Key, Key)>,
    /// Decisions given on the page that this run used for writes, and by whom: each is given
    /// back at the round's end unless its write left.
    pub taken_grants: Vec<(Key, String)>,
    /// Identical writes of this run so far, by fingerprint, and writes to each place.
    occurrences: HashMap<Fingerprint, u32>,
    /// Digests of the idempotency keys the script gave its writes, and the write each was
    /// first given to.
    own_keys: HashMap<String, Fingerprint>,
    slots: HashMap<String, u32>,
    plan: Vec<Planned>,
    plan_dropped: usize,
    pub waiting: Vec<Deferred>,
    /// Time the execution has spent waiting for humans (one or more at once): all its waits
    /// together stay within the approval timeout, so that many waits, one after another or
    /// overlapping, cannot stretch its deadline further.
    pub waited: std::time::Duration,
    /// Waits going on now, and since when there has been one.
    pub waits: usize,
    pub waiting_since: Option<tokio::time::Instant>,
}

impl Gate {
    /// The gate of one run of `code` by `caller`; `approver` is the channel to a human, if the
    /// client has one; `chain` holds the run's journal, when approvals may come from outside
    /// the execution.
    pub(super) fn new(
        approvals: Approvals,
        caller: Caller,
        code: &str,
        approver: Option<Arc<dyn Approver>>,
        journal: Option<Arc<RunJournal>>,
        dry_run: bool,
    ) -> Self {
        let code = code_digest(&caller, code);
        Self {
            approvals,
            caller,
            approver,
            // For humans to tell requests apart; not a secret.
            execution: random_hex(4).unwrap_or_else(|| "unknown".to_owned()),
            code,
            dry_run,
            journal,
            state: Mutex::default(),
            writes_refused: std::sync::OnceLock::new(),
            refused_a_write: std::sync::atomic::AtomicBool::new(false),
            following: TaskTracker::new(),
            left: Arc::default(),
        }
    }

    /// Waits, at most `within`, until every request this gate let through has ended and its
    /// audit lines are written: an execution's outcome is reported once its audit file says
    /// all it will (a write cut short by the script's return included). Whether it did.
    pub async fn audited(&self, within: std::time::Duration) -> bool {
        self.following.close();
        tokio::time::timeout(within, self.following.wait())
            .await
            .is_ok()
    }

    /// A gate that allows every request: for tests and tools that need no rules.
    pub fn open(base: url::Url) -> Self {
        let overrides = super::PolicyOverrides {
            read_only: false,
            writes: Some(Rule::Allow),
        };
        let approvals = Approvals::bare(
            Arc::new(Rules::without_spec(base, overrides)),
            super::DEFAULT_APPROVAL_TIMEOUT,
            None,
        );
        let caller = approvals.caller(0, None, None);
        Self::new(approvals, caller, "", None, None, false)
    }

    /// Refuses every write of this run, before any rule, journal or human is consulted, saying
    /// `why` (the caller's sign-in does not hold the write scope).
    pub fn refuse_writes(&self, why: String) {
        let _ = self.writes_refused.set(why);
    }

    /// Whether a write was refused for the reason [`Gate::refuse_writes`] gave.
    pub fn refused_a_write(&self) -> bool {
        self.refused_a_write
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// This run continues earlier rounds of the same code: their unused decisions (given
    /// through `channel`), and why they are asked again, if they are.
    pub(super) fn carry(&self, carried: Carried, channel: &str, asked_again: Option<String>) {
        let mut state = lock(&self.state);
        state.all_approved = carried.all.clone().map(|by| (by, channel.to_owned()));
        state.carried = carried;
        state.carried_channel = channel.to_owned();
        state.asked_again = asked_again;
    }

    /// What the next round of the same code needs from this one: decisions not used yet, and
    /// the chain's journal.
    pub(super) async fn carried(&self) -> Result<Carried, crate::state::StateError> {
        let journal: Vec<Sent> = match &self.journal {
            Some(journal) => journal.snapshot().await?,
            None => Vec::new(),
        };
        let state = lock(&self.state);
        // An approval whose write never left keeps for the next round, so the human is not
        // asked again; known by the write's first attempt, not by the journal (a record gone
        // from the store would make every write look unsent).
        let mut approved = state.carried.approved.clone();
        approved.extend(
            state
                .taken
                .iter()
                .filter(|(_, used_by)| !self.has_left(used_by))
                .map(|(taken, _)| taken.clone()),
        );
        Ok(Carried {
            approved,
            denied: state.carried.denied.clone(),
            all: state.all_approved.as_ref().map(|(by, _)| by.clone()),
            journal,
        })
    }

    /// The decisions given on the page that this run used for writes that did not leave
    /// (the run ended between the decision and the sending): the round gives them back.
    pub(super) fn unsent_grants(&self) -> Vec<(Key, String)> {
        let state = lock(&self.state);
        state
            .taken_grants
            .iter()
            .filter(|(key, _)| !self.has_left(key))
            .cloned()
            .collect()
    }

    /// Whether the write `key` of this run left (its first attempt did).
    fn has_left(&self, key: &Key) -> bool {
        lock(&self.left).contains(&(key.fingerprint.clone(), key.occurrence))
    }

    /// The digest of this execution's code and caller.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The writes a dry run did not send, and how many more there were.
    pub fn plan(&self) -> (Vec<Planned>, usize) {
        let state = lock(&self.state);
        (state.plan.clone(), state.plan_dropped)
    }

    /// Questions asked outside this execution.
    pub fn waiting(&self) -> Vec<Deferred> {
        lock(&self.state).waiting.clone()
    }

    /// What the model is told about approvals still to be given, at most a few.
    pub fn waiting_messages(&self) -> Vec<String> {
        lock(&self.state)
            .waiting
            .iter()
            .take(MAX_LISTED_APPROVALS)
            .map(|deferred| cut(&deferred.message, 600))
            .collect()
    }

    /// Which write of the run this is: exactly, and by its slot (method and operation, or
    /// path): where the script made it among the slot's requests when the gateway says so for
    /// this very slot (concurrent requests reach here in any order), else counted as they
    /// arrive (a redirect's hop, a request to no operation). Slots are named as they always
    /// were, so chains recorded before positions existed still match.
    fn key(&self, fingerprint: Fingerprint, slot: String, position: Option<&Position>) -> Key {
        let mut state = lock(&self.state);
        let next = |count: &mut u32| {
            let n = *count;
            *count += 1;
            n
        };
        let occurrence = next(state.occurrences.entry(fingerprint.clone()).or_default());
        let (slot, slot_occurrence) = match position {
            Some(position) if position.slot == slot => (slot, position.occurrence),
            // Counted apart from the writes placed by the gateway, which count from 0 in the
            // slot too (a `fetch` spelt so that only the rules' readings find its operation).
            _ => {
                let slot = format!("{slot} (by arrival)");
                let n = next(state.slots.entry(slot.clone()).or_default());
                (slot, n)
            }
        };
        Key {
            fingerprint,
            occurrence,
            slot,
            slot_occurrence,
        }
    }

    /// What every line of the audit file about this request says it is about.
    fn subject(
        &self,
        operation: &Option<String>,
        method: &str,
        url: &str,
        fingerprint: &Fingerprint,
        scrubber: &Scrubber,
    ) -> Subject {
        // Scrubbed before it is cut: a cut could leave part of an encoded secret behind.
        let url = cut(&scrubber.scrub(url), crate::egress::MAX_LOGGED_URL);
        Subject {
            execution: self.execution.clone(),
            caller: self.caller.id().to_owned(),
            signed_in: self
                .caller
                .signed_in()
                .and_then(|who| serde_json::from_str(who).ok()),
            code: self.code.clone(),
            operation: operation.clone(),
            method: method.to_owned(),
            url,
            fingerprint: fingerprint.0.clone(),
        }
    }

    /// A write of a chain, looked up in its journal: answered (an earlier run sent it),
    /// refused (its fate is unknown, another run sends it now, the chain is full), or
    /// claimed for this run.
    ///
    /// A write an earlier run sent with an idempotency key and left unanswered is claimed to
    /// go again with that key (`Claim::Again`), when the provider file still sends keys in
    /// that header for it (sent without one, it could be applied twice).
    async fn consult_journal(
        &self,
        key: &Key,
        header: Option<&str>,
        note: &(dyn Fn(Verdict, &str) -> Note + Sync),
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Option<Claim>, Box<Decision>> {
        let Some(journal) = &self.journal else {
            return Ok(None);
        };
        let found = match journal.claim(key.clone()).await {
            Ok(found) => found,
            Err(error) => {
                return Err(Box::new(Decision::Refuse(
                    note(Verdict::Denied, "the state store cannot record it"),
                    format!(
                        "{} was not sent: sdkbox records every write of this run before it \
                         leaves, so that no re-run sends it twice, and {error}. Try again \
                         shortly",
                        what()
                    ),
                )));
            }
        };
        let unanswered = |why: &str| {
            format!(
                "{} was sent by an earlier run of this code, and no response came back ({why}); \
                 the provider may have acted on it, so it is not sent again. Check the \
                 provider's state (get or list what it would have changed) before deciding \
                 what to do",
                what()
            )
        };
        let decision = match found {
            Found::New(claimed) => return Ok(Some(Claim::New(claimed))),
            Found::Unanswered(claimed, carried, _)
                if header.is_some_and(|h| h.eq_ignore_ascii_case(&carried.header))
                    && self
                        .approvals
                        .state()
                        .now_ms()
                        .saturating_sub(carried.left_ms)
                        < RESEND_WITHIN.as_millis() as u64 =>
            {
                return Ok(Some(Claim::Again(claimed, carried)));
            }
            // Released: it stays unanswered.
            Found::Unanswered(_, carried, why)
                if header.is_some_and(|h| h.eq_ignore_ascii_case(&carried.header)) =>
            {
                Decision::Refuse(
                    note(Verdict::Replayed, "an earlier run of this code sent it"),
                    format!(
                        "{} (it went out with an idempotency key more than {} hours ago, longer \
                         than providers keep keys: sent again, it could be applied twice)",
                        unanswered(&why),
                        RESEND_WITHIN.as_secs() / 3600
                    ),
                )
            }
            // Released: it stays unanswered.
            Found::Unanswered(_, carried, why) => Decision::Refuse(
                note(Verdict::Replayed, "an earlier run of this code sent it"),
                format!(
                    "{} (it carried an idempotency key in `{}`, which the provider file no \
                     longer sends for this write)",
                    unanswered(&why),
                    carried.header
                ),
            ),
            Found::Sent(Fate::Answered(response)) => Decision::Answer(
                note(Verdict::Replayed, "an earlier run of this code sent it"),
                response,
            ),
            Found::SentOtherwise(Fate::Answered(response)) => Decision::Refuse(
                note(
                    Verdict::Denied,
                    "an earlier run of this code sent another request at this point",
                ),
                format!(
                    "{} was not sent: an earlier run of this code sent a request with the same \
                     method and URL at this point, with other bytes (a timestamp, a random value, \
                     or data that changed?), and got HTTP {}: {}. sdkbox cannot tell whether \
                     this is the same write again, so it sends neither. If it is the same, use \
                     that result (write what you need of it, such as its id, into the code); if \
                     it is another, change the code to start a new run",
                    what(),
                    response.status,
                    cut(&response.body, 500)
                ),
            ),
            Found::Sent(Fate::Unknown(why)) | Found::SentOtherwise(Fate::Unknown(why)) => {
                Decision::Refuse(
                    note(Verdict::Replayed, "an earlier run of this code sent it"),
                    unanswered(&why),
                )
            }
            Found::InFlight => Decision::Refuse(
                note(
                    Verdict::Denied,
                    "another run of this code is sending it now",
                ),
                format!(
                    "{} is being sent right now by another run of this code; it was not sent \
                     twice. Run the code again once that run has finished: this write will then \
                     be answered with its response",
                    what()
                ),
            ),
            Found::TakenOver => Decision::Refuse(
                note(Verdict::Denied, "another server took this run over"),
                format!(
                    "{} was not sent: this run's journal is gone from the state store (another \
                     server took the run over while this one had lost touch with the store, or \
                     the store lost its records). Check the provider's state before running the \
                     code again",
                    what()
                ),
            ),
            Found::Full => Decision::Refuse(
                note(Verdict::Denied, "the chain keeps as many writes as it may"),
                format!(
                    "{} was not sent: the runs of this code have sent {} writes, as many as \
                     sdkbox keeps to answer re-runs with. Change the code to start a new run",
                    what(),
                    journal::MAX_JOURNAL_ENTRIES
                ),
            ),
        };
        Err(Box::new(decision))
    }

    async fn decide_now(
        &self,
        request: Outgoing<'_>,
        scrubber: &Scrubber,
        deadline: &Deadline,
        cancel: &CancellationToken,
    ) -> Decided {
        let Classified {
            operation,
            index,
            rule,
            because,
        } = self.approvals.rules.classify(request.method, request.url);
        let write = is_write(request.method);
        let url = request.url.to_string();
        let fingerprint = Fingerprint::of(
            operation.as_deref(),
            request.method,
            &url,
            request.headers,
            request.body,
        );
        let note = |decision, by: Option<String>, channel: Option<String>| Note {
            rule,
            decision,
            because: because.clone(),
            by,
            channel,
        };
        let shown = || {
            let shown = Shown::new(
                operation.clone(),
                request.method,
                &url,
                request.headers,
                request.body,
            );
            let withheld = Shown {
                url: WITHHELD.to_owned(),
                headers: Vec::new(),
                body: None,
                ..shown.clone()
            };
            // The size is a number, not text: it is not serialised, so not scrubbed either.
            let body_bytes = shown.body_bytes;
            Shown {
                body_bytes,
                ..scrubber.scrub_all(shown, withheld)
            }
        };
        let place = operation
            .clone()
            .unwrap_or_else(|| request.url.path().to_owned());
        let key = self.key(
            fingerprint.clone(),
            format!("{} {place}", request.method),
            request.position,
        );
        let mut claimed = None;
        let refused = self.writes_refused.get().filter(|_| write);
        // The key a write to a provider that takes them goes out with: the script's own, or a
        // random one; kept with its claim, so that a run after one that left it unanswered
        // sends it again with the same key.
        let keyed = self
            .approvals
            .rules
            .idempotency_header(index)
            .filter(|_| write);
        let mut sent_with = keyed.map(|header| idempotency_key(header, request.headers));
        // A key of the script's own names one write: used again for another, the provider
        // could answer the second with the first's response, and apply only one of them.
        let reused = keyed
            .and_then(|header| own_key(header, request.headers))
            .filter(|own| {
                let mut state = lock(&self.state);
                // By digest: a key may be long, and the run makes many requests.
                let digest = {
                    use sha2::{Digest, Sha256};
                    crate::hex::hex(&Sha256::digest(own.as_bytes()))
                };
                let first = state
                    .own_keys
                    .entry(digest)
                    .or_insert_with(|| fingerprint.clone());
                *first != fingerprint
            });
        let consulted = match write
            && rule != Rule::Deny
            && !self.dry_run
            && refused.is_none()
            && reused.is_none()
        {
            true => {
                self.consult_journal(
                    &key,
                    keyed,
                    &|decision, why| Note {
                        because: why.to_owned(),
                        ..note(decision, None, None)
                    },
                    &|| shown().what(),
                )
                .await
            }
            false => Ok(None),
        };
        // What the audit says the request is, scrubbed before any wait: a wait the execution's
        // cancel ends would leave its scrubber spent, and the line without its URL.
        let subject = match (&self.approvals.audit, write || rule != Rule::Allow) {
            (Some(log), true) => Some((
                log.clone(),
                self.subject(&operation, request.method, &url, &fingerprint, scrubber),
            )),
            _ => None,
        };
        let decision = match (refused, consulted) {
            _ if reused.is_some() => Decision::Refuse(
                note(Verdict::Denied, None, None),
                format!(
                    "{} was not sent: its idempotency key `{}` was given to another write of \
                     this run, and the provider could answer this one with that one's \
                     response. Give each write its own key, or none (sdkbox then gives one)",
                    shown().what(),
                    cut(reused.as_deref().unwrap_or_default(), 100)
                ),
            ),
            (Some(why), _) => {
                self.refused_a_write
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                let note = Note {
                    because: "the sign-in does not hold the write scope".to_owned(),
                    ..note(Verdict::Denied, None, None)
                };
                Decision::Refuse(note, format!("{} was not sent: {why}", shown().what()))
            }
            (None, Err(decision)) => *decision,
            (None, Ok(claim)) => {
                // The same bytes an earlier run sent, with the same key: the provider applies
                // it once, however often it arrives. Under `approve` a human is asked again
                // (told so): the rule may have been `allow` then.
                let because = match claim {
                    Some(Claim::Again(_, ref carried)) => {
                        sent_with = Some(carried.clone());
                        format!(
                            "{because}; an earlier run of this code sent it and no response \
                             came back: it goes again with the idempotency key it carried, and \
                             the provider applies it once"
                        )
                    }
                    _ => because.clone(),
                };
                let again = matches!(claim, Some(Claim::Again(..)));
                claimed = claim.map(|(Claim::New(claimed) | Claim::Again(claimed, _))| claimed);
                let note = |decision, by, channel| Note {
                    because: because.clone(),
                    ..note(decision, by, channel)
                };
                match rule {
                    Rule::Deny => {
                        let message = format!(
                            "{} is denied by the approval rules ({because}); it was not sent. \
                             Do not retry it; tell the user it is not allowed here",
                            shown().what()
                        );
                        Decision::Refuse(note(Verdict::Denied, None, None), message)
                    }
                    _ if self.dry_run && write => {
                        self.add_to_plan(shown(), rule);
                        let op = index.and_then(|i| self.approvals.rules.operation(i));
                        Decision::Answer(
                            note(Verdict::DryRun, None, None),
                            dry_run::placeholder(op, &url),
                        )
                    }
                    Rule::Allow if again => Decision::Send(note(Verdict::Resent, None, None)),
                    Rule::Allow => Decision::Send(note(Verdict::Allowed, None, None)),
                    Rule::Approve => {
                        let asking = super::human::Asking {
                            shown: shown(),
                            write,
                            because: &because,
                            key: &key,
                        };
                        let (verdict, by, channel, message) =
                            self.approve(asking, deadline, cancel).await;
                        let note = note(verdict, by, channel);
                        match message {
                            None => Decision::Send(note),
                            Some(message) => Decision::Refuse(note, message),
                        }
                    }
                }
            }
        };
        let audit = subject;
        let decision = match &audit {
            Some((log, subject)) => {
                match audit::decision(log.clone(), subject, decision.note()).await {
                    Ok(()) => decision,
                    Err(error) => refuse_unaudited(decision.note(), &error),
                }
            }
            None => decision,
        };
        if write || rule != Rule::Allow {
            let note = decision.note();
            metrics::counter!(
                "sdkbox_request_decisions_total",
                "rule" => note.rule.as_str(),
                "decision" => note.decision.as_str()
            )
            .increment(1);
        }
        // A claim of a write that is not sent is released when dropped, here; one that is
        // learns the key it leaves with, recorded as it leaves.
        let sends = matches!(decision, Decision::Send(_));
        let claimed = claimed
            .filter(|_| sends)
            .map(|claimed| claimed.leaving_with(sent_with.clone()));
        let dispatch: Option<Box<dyn crate::egress::Dispatch>> =
            (sends && (audit.is_some() || claimed.is_some())).then(|| {
                let left = (self.left.clone(), (key.fingerprint.clone(), key.occurrence));
                Box::new(Follow::new(audit, claimed, self.following.clone(), left))
                    as Box<dyn crate::egress::Dispatch>
            });
        let idempotency = sent_with
            .filter(|_| sends)
            .map(|SentWith { header, value, .. }| (header, value));
        Decided {
            operation,
            decision,
            dispatch,
            idempotency,
        }
    }

    fn add_to_plan(&self, shown: Shown, rule: Rule) {
        let mut state = lock(&self.state);
        if state.plan.len() >= MAX_PLANNED {
            state.plan_dropped += 1;
            return;
        }
        state.plan.push(Planned {
            request: shown.preview(MAX_PLANNED_BODY),
            policy: rule,
        });
    }

    /// Writes a write that egress refused before asking to the audit file.
    async fn refused_now(&self, refusal: Refusal<'_>, scrubber: &Scrubber) {
        let Some(log) = self.approvals.audit.clone() else {
            return;
        };
        let classified = url::Url::parse(refusal.url)
            .ok()
            .map(|url| self.approvals.rules.classify(refusal.method, &url));
        let operation = classified.as_ref().and_then(|c| c.operation.clone());
        let fingerprint =
            Fingerprint::of(operation.as_deref(), refusal.method, refusal.url, &[], None);
        let subject = self.subject(
            &operation,
            refusal.method,
            refusal.url,
            &fingerprint,
            scrubber,
        );
        let note = Note {
            rule: classified.map_or(Rule::Deny, |c| c.rule),
            decision: Verdict::Refused,
            because: cut(
                &scrubber.scrub(refusal.reason),
                crate::egress::MAX_LOGGED_URL,
            ),
            by: None,
            channel: None,
        };
        // A refusal: nothing to stop if the line cannot be written (`write` logged why).
        let _ = audit::decision(log, &subject, &note).await;
    }
}

impl Checkpoint for Gate {
    fn decide<'a>(
        &'a self,
        request: Outgoing<'a>,
        scrubber: &'a Scrubber,
        deadline: &'a Deadline,
        cancel: &'a CancellationToken,
    ) -> Pending<'a, Decided> {
        Box::pin(self.decide_now(request, scrubber, deadline, cancel))
    }

    fn refused<'a>(&'a self, refusal: Refusal<'a>, scrubber: &'a Scrubber) -> Pending<'a, ()> {
        Box::pin(self.refused_now(refusal, scrubber))
    }
}

/// A write the journal lets this run send.
enum Claim {
    /// A new one, claimed.
    New(Claimed),
    /// One an earlier run sent with this idempotency key and left unanswered, claimed to go
    /// again with it.
    Again(Claimed, SentWith),
}

/// The idempotency key of a write: the script's own, when it sent one in `header` (not
/// empty); else a random one. Egress sends every attempt of the write with it, so the
/// provider applies it once however often a lost answer makes egress try again; another run
/// of the code is another write, with another key, unless the earlier one was left
/// unanswered (see [`Claim::Again`]).
fn idempotency_key(header: &str, headers: &[String]) -> SentWith {
    let value = own_key(header, headers).unwrap_or_else(|| {
        format!(
            "sdkbox-{}",
            random_hex(16).unwrap_or_else(|| "unrandom".to_owned())
        )
    });
    SentWith {
        header: header.to_owned(),
        value,
        left_ms: 0,
    }
}

/// The idempotency key the script sent itself in `header`, if it sent one (not empty).
fn own_key(header: &str, headers: &[String]) -> Option<String> {
    headers.iter().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        (name.trim().eq_ignore_ascii_case(header) && !value.is_empty()).then(|| value.to_owned())
    })
}

fn refuse_unaudited(note: &Note, error: &str) -> Decision {
    let mut note = note.clone();
    note.decision = Verdict::Denied;
    note.because = "the audit file cannot be written".to_owned();
    Decision::Refuse(
        note,
        format!("the request was not sent: the audit file cannot be written ({error})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write approved by a decision an earlier round handed over, whose run ended before it
    /// left (the round ended for another write's question), hands the approval on to the
    /// next round: the human is not asked again (found as a flaky double question with
    /// parallel writes in the 2026-07-28 flow).
    #[tokio::test]
    async fn an_approval_whose_write_did_not_leave_goes_to_the_next_round() {
        let base = url::Url::parse("http://127.0.0.1:9/").unwrap();
        let overrides = super::super::PolicyOverrides {
            read_only: false,
            writes: Some(Rule::Approve),
        };
        let approvals = Approvals::bare(
            Arc::new(Rules::without_spec(base.clone(), overrides)),
            super::super::DEFAULT_APPROVAL_TIMEOUT,
            None,
        );
        let caller = approvals.caller(0, None, None);
        let gate = Gate::new(approvals, caller, "code", None, None, false);
        let url = base.join("/customers").unwrap();
        let body = b"{}";
        let key = Key {
            fingerprint: Fingerprint::of(None, "POST", url.as_str(), &[], Some(body)),
            occurrence: 0,
            slot: "POST /customers".into(),
            slot_occurrence: 0,
        };
        let carried = Carried {
            approved: vec![key.clone()],
            ..Carried::default()
        };
        gate.carry(carried, "elicitation", None);
        let request = || Outgoing {
            method: "POST",
            url: &url,
            headers: &[],
            body: Some(body),
            position: None,
        };
        let scrubber = Scrubber::for_secret("sk_test_secret_value");
        let deadline = Deadline::after(std::time::Duration::from_secs(5));
        let decided = gate
            .decide(request(), &scrubber, &deadline, &CancellationToken::new())
            .await;
        assert!(
            matches!(decided.decision, Decision::Send(_)),
            "{:?}",
            decided.decision.note()
        );
        // Never sent: the run ended first.
        drop(decided);
        let next = gate.carried().await.unwrap();
        assert_eq!(next.approved, vec![key.clone()]);
        // The next round uses it, and the write leaves: it is spent. (A run whose approvals
        // come from earlier rounds has a journal, which claims its writes.)
        let lease = std::time::Duration::from_secs(60);
        let journal = super::super::chain::RunJournal::own(
            gate.approvals.store.clone(),
            gate.code(),
            Vec::new(),
            lease,
            "owner",
        )
        .await
        .unwrap();
        let gate = Gate::new(
            gate.approvals.clone(),
            gate.caller.clone(),
            "code",
            None,
            Some(journal),
            false,
        );
        gate.carry(next, "elicitation", None);
        let mut decided = gate
            .decide(request(), &scrubber, &deadline, &CancellationToken::new())
            .await;
        assert!(matches!(decided.decision, Decision::Send(_)));
        decided.dispatch.as_mut().unwrap().before(1).await.unwrap();
        assert_eq!(gate.carried().await.unwrap().approved, Vec::<Key>::new());
    }

    /// Concurrent writes reach the gate in any order: each is known by where the script
    /// made it, not by when it arrived; without a position (a redirect's hop), by arrival.
    #[test]
    fn a_write_is_placed_where_the_script_made_it_not_where_it_arrived() {
        let gate = Gate::open(url::Url::parse("http://127.0.0.1:9/").unwrap());
        let at = |occurrence| Position {
            slot: "POST customers.create".into(),
            occurrence,
        };
        let fingerprint = |text: &str| Fingerprint(text.into());
        let slot = || "POST customers.create".to_owned();
        let second = gate.key(fingerprint("b"), slot(), Some(&at(1)));
        let first = gate.key(fingerprint("a"), slot(), Some(&at(0)));
        assert_eq!((first.slot_occurrence, second.slot_occurrence), (0, 1));
        assert_eq!(first.slot, "POST customers.create");
        // A position for another slot than the gate's own reading is not taken.
        let other = gate.key(fingerprint("e"), "POST orders.create".into(), Some(&at(7)));
        assert_eq!(other.slot_occurrence, 0);
        assert_ne!(other.slot, "POST orders.create");
        let hop = gate.key(fingerprint("c"), "GET /next".into(), None);
        let next_hop = gate.key(fingerprint("d"), "GET /next".into(), None);
        assert_eq!((hop.slot_occurrence, next_hop.slot_occurrence), (0, 1));
        // Counted apart from placed ones: no two writes of the run share a place.
        let unplaced = gate.key(fingerprint("f"), slot(), None);
        assert_ne!((unplaced.slot, unplaced.slot_occurrence), (first.slot, 0));
    }
}
