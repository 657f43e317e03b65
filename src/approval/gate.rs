//! One execution's checkpoint: it classifies each request by what is sent, answers a write
//! of a chain that an earlier run sent from the journal, asks a human when a rule says
//! `approve`, keeps a dry run's plan, and writes every decision about a write to the audit
//! file before anything leaves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::ask::{Answer, Approver, Ask, Fingerprint, random_hex};
use super::audit::{self, Subject};
use super::caller::{Caller, code_digest};
use super::follow::{Claimed, Follow};
use super::journal::{self, Claim, Fate, SharedJournal};
use super::shown::{MAX_QUESTION, Shown};
use super::states::Carried;
use super::store::Standing;
use super::{Approvals, Classified, Planned, Rule, Rules, dry_run, page};
use crate::deadline::Deadline;
use crate::egress::{
    Checkpoint, Decided, Decision, Note, Outgoing, Pending, Refusal, Scrubber, Verdict, WITHHELD,
    cut, is_write,
};
use crate::lock::lock;

/// Writes a dry run lists in its plan; more are counted.
const MAX_PLANNED: usize = 100;

/// Characters of a planned write's body kept in the plan.
const MAX_PLANNED_BODY: usize = 300;

/// Approvals waiting outside the execution that one outcome lists.
const MAX_LISTED_APPROVALS: usize = 5;

/// One execution's gate.
pub struct Gate {
    approvals: Approvals,
    caller: Caller,
    approver: Option<Arc<dyn Approver>>,
    execution: String,
    code: String,
    dry_run: bool,
    /// The journal of the chain this run belongs to, when its approvals can come from
    /// outside the execution (the page, a 2026-07-28 retry).
    journal: Option<SharedJournal>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// What earlier rounds handed over, and the channel their decisions came through.
    carried: Carried,
    carried_channel: String,
    /// Why the decisions of earlier rounds are asked again, if they are.
    asked_again: Option<String>,
    /// Who approved every write of this run, and through which channel.
    all_approved: Option<(String, String)>,
    /// Identical writes of this run so far, by fingerprint.
    occurrences: HashMap<Fingerprint, u32>,
    plan: Vec<Planned>,
    plan_dropped: usize,
    waiting: Vec<(Ask, Fingerprint, String)>,
    /// Time the execution has spent waiting for humans (one or more at once): all its waits
    /// together stay within the approval timeout, so that many waits, one after another or
    /// overlapping, cannot stretch its deadline further.
    waited: std::time::Duration,
    /// Waits going on now, and since when there has been one.
    waits: usize,
    waiting_since: Option<tokio::time::Instant>,
}

impl State {
    /// Waiting time used so far, the wait going on included.
    fn waited_now(&self) -> std::time::Duration {
        self.waited
            + self
                .waiting_since
                .map_or(std::time::Duration::ZERO, |t| t.elapsed())
    }
}

/// What `approve` found: the verdict, who decided and through which channel, and the
/// message of a refusal.
type Approval = (Verdict, Option<String>, Option<String>, Option<String>);

impl Gate {
    /// The gate of one run of `code` by `caller`; `approver` is the channel to a human, if the
    /// client has one; `journal` is the chain's, when approvals may come from outside the
    /// execution.
    pub(super) fn new(
        approvals: Approvals,
        caller: Caller,
        code: &str,
        approver: Option<Arc<dyn Approver>>,
        journal: Option<SharedJournal>,
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
        }
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
    pub(super) fn carried(&self) -> Carried {
        let state = lock(&self.state);
        Carried {
            approved: state.carried.approved.clone(),
            denied: state.carried.denied.clone(),
            all: state.all_approved.as_ref().map(|(by, _)| by.clone()),
            journal: self
                .journal
                .as_ref()
                .map(|j| lock(j).snapshot())
                .unwrap_or_default(),
        }
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

    /// Requests whose decision was asked for outside this execution: what the human sees,
    /// the request's fingerprint and what the model was told.
    pub fn waiting(&self) -> Vec<(Ask, Fingerprint, String)> {
        lock(&self.state).waiting.clone()
    }

    /// What the model is told about approvals still to be given, at most a few.
    pub fn waiting_messages(&self) -> Vec<String> {
        lock(&self.state)
            .waiting
            .iter()
            .take(MAX_LISTED_APPROVALS)
            .map(|(_, _, message)| cut(message, 600))
            .collect()
    }

    /// Which of this run's identical writes this one is.
    fn occurrence(&self, fingerprint: &Fingerprint) -> u32 {
        let mut state = lock(&self.state);
        let count = state.occurrences.entry(fingerprint.clone()).or_default();
        let occurrence = *count;
        *count += 1;
        occurrence
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
            code: self.code.clone(),
            operation: operation.clone(),
            method: method.to_owned(),
            url,
            fingerprint: fingerprint.0.clone(),
        }
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
        let note = |decision, by: Option<String>, channel: Option<String>| Note {
            rule,
            decision,
            because: because.clone(),
            by,
            channel,
        };
        let fingerprint = Fingerprint::of(
            operation.as_deref(),
            request.method,
            &url,
            request.headers,
            request.body,
        );
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
        // A write of a chain that an earlier run sent is answered from the journal.
        let mut claimed = None;
        let mut decision = None;
        if let Some(journal) = &self.journal
            && write
            && rule != Rule::Deny
            && !self.dry_run
        {
            let occurrence = self.occurrence(&fingerprint);
            match journal::claim(journal, &fingerprint, occurrence) {
                Claim::New => {
                    claimed = Some(Claimed {
                        journal: journal.clone(),
                        fingerprint: fingerprint.clone(),
                        occurrence,
                    })
                }
                Claim::Sent(Fate::Answered(response)) => {
                    decision = Some(Decision::Answer(
                        note(Verdict::Replayed, None, None),
                        response,
                    ))
                }
                Claim::Sent(Fate::Unknown(why)) => {
                    let message = format!(
                        "{} was sent by an earlier run of this code, and no response came back \
                         ({why}); the provider may have acted on it, so it is not sent again. \
                         Check the provider's state (get or list what it would have changed) \
                         before deciding what to do",
                        shown().what()
                    );
                    decision = Some(Decision::Refuse(
                        note(Verdict::Replayed, None, None),
                        message,
                    ))
                }
                Claim::InFlight => {
                    let message = format!(
                        "{} is being sent right now by another run of this code; it was not \
                         sent twice. Run the code again once that run has finished: this write \
                         will then be answered with its response",
                        shown().what()
                    );
                    decision = Some(Decision::Refuse(note(Verdict::Denied, None, None), message))
                }
            }
        }
        let decision = match decision {
            Some(decision) => decision,
            None if rule == Rule::Deny => {
                let message = format!(
                    "{} is denied by the approval rules ({because}); it was not sent. Do not \
                     retry it; tell the user it is not allowed here",
                    shown().what()
                );
                Decision::Refuse(note(Verdict::Denied, None, None), message)
            }
            None if self.dry_run && write => {
                self.add_to_plan(shown(), rule);
                let op = index.and_then(|i| self.approvals.rules.operation(i));
                Decision::Answer(
                    note(Verdict::DryRun, None, None),
                    dry_run::placeholder(op, &url),
                )
            }
            None if rule == Rule::Allow => Decision::Send(note(Verdict::Allowed, None, None)),
            None => {
                let (verdict, by, channel, message) = self
                    .approve(shown(), write, &because, &fingerprint, deadline, cancel)
                    .await;
                let note = note(verdict, by, channel);
                match message {
                    None => Decision::Send(note),
                    Some(message) => Decision::Refuse(note, message),
                }
            }
        };
        let audit = match (&self.approvals.audit, write || rule != Rule::Allow) {
            (Some(log), true) => Some((
                log.clone(),
                self.subject(&operation, request.method, &url, &fingerprint, scrubber),
            )),
            _ => None,
        };
        let decision = match &audit {
            Some((log, subject)) => {
                match audit::decision(log.clone(), subject, decision.note()).await {
                    Ok(()) => decision,
                    Err(error) => refuse_unaudited(decision.note(), &error),
                }
            }
            None => decision,
        };
        let sends = matches!(decision, Decision::Send(_));
        if !sends && let Some(claimed) = claimed.take() {
            lock(&claimed.journal).settle(&claimed.fingerprint, claimed.occurrence, None);
        }
        let dispatch: Option<Box<dyn crate::egress::Dispatch>> = (sends
            && (audit.is_some() || claimed.is_some()))
        .then(|| Box::new(Follow::new(audit, claimed)) as Box<dyn crate::egress::Dispatch>);
        Decided {
            operation,
            decision,
            dispatch,
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

    /// Finds or asks for a human's decision; a message means the request is refused.
    async fn approve(
        &self,
        shown: Shown,
        write: bool,
        because: &str,
        fingerprint: &Fingerprint,
        deadline: &Deadline,
        cancel: &CancellationToken,
    ) -> Approval {
        let what = shown.what();
        let denied = |by: &str, channel: &str| {
            format!(
                "{what} was denied by {by} through {channel}; it was not sent. Do not retry it \
                 unless the user asks"
            )
        };
        if let Some(found) = self.carried_decision(write, fingerprint, &denied) {
            return found;
        }
        if !shown.whole() {
            let message = format!(
                "{what} is too large to show a human whole ({} characters of URL, headers and \
                 body as shown, over {MAX_QUESTION}), and nobody approves what they cannot read; \
                 it was not sent. Send smaller requests",
                shown.size()
            );
            return (Verdict::Denied, None, None, Some(message));
        }
        let on_page = || Some(page::CHANNEL.to_owned());
        match self
            .approvals
            .store
            .take(&self.caller, &self.code, fingerprint, write)
        {
            Standing::Approved(by) => return (Verdict::Approved, Some(by), on_page(), None),
            Standing::ApprovedAll(by) => {
                lock(&self.state).all_approved = Some((by.clone(), page::CHANNEL.into()));
                return (Verdict::Approved, Some(by), on_page(), None);
            }
            Standing::Denied(by) => {
                let message = denied(&by, page::CHANNEL);
                return (Verdict::Denied, Some(by), on_page(), Some(message));
            }
            Standing::Open => {}
        }
        let Some(approver) = &self.approver else {
            let message = format!(
                "{what} needs a human's approval ({because}), and this client offers no way to \
                 ask one (no MCP elicitation, and no approval page). It was not sent. Tell the \
                 user; the operator can allow it in the provider file's [policy] or with --writes"
            );
            return (Verdict::NoChannel, None, None, Some(message));
        };
        let because = match &lock(&self.state).asked_again {
            Some(why) => format!("{because}; asked again because {why}"),
            None => because.to_owned(),
        };
        let ask = Ask::new(&self.execution, shown, &because);
        self.ask(approver, ask, write, fingerprint, deadline, cancel, &denied)
            .await
    }

    /// A decision an earlier round handed over, or "every write" approved in this run.
    fn carried_decision(
        &self,
        write: bool,
        fingerprint: &Fingerprint,
        denied: &(dyn Fn(&str, &str) -> String + Sync),
    ) -> Option<Approval> {
        // An explicit denial wins over any approval, "every write" included.
        let mut state = lock(&self.state);
        let channel = state.carried_channel.clone();
        if let Some((_, by)) = state.carried.denied.iter().find(|(f, _)| f == fingerprint) {
            let message = denied(by, &channel);
            return Some((
                Verdict::Denied,
                Some(by.clone()),
                Some(channel),
                Some(message),
            ));
        }
        if write && let Some((by, channel)) = state.all_approved.clone() {
            return Some((Verdict::Approved, Some(by), Some(channel), None));
        }
        let at = state
            .carried
            .approved
            .iter()
            .position(|g| g == fingerprint)?;
        state.carried.approved.remove(at);
        Some((
            Verdict::Approved,
            Some("the user".into()),
            Some(channel),
            None,
        ))
    }

    /// Puts the question to `approver`, with the deadline held, within what is left of the
    /// execution's approval timeout.
    #[allow(
        clippy::too_many_arguments,
        reason = "one question's parts; a struct would only rename them"
    )]
    async fn ask(
        &self,
        approver: &Arc<dyn Approver>,
        ask: Ask,
        write: bool,
        fingerprint: &Fingerprint,
        deadline: &Deadline,
        cancel: &CancellationToken,
        denied: &(dyn Fn(&str, &str) -> String + Sync),
    ) -> Approval {
        let what = ask.request.what();
        let channel = approver.channel().to_owned();
        let total = self.approvals.timeout;
        let timeout = total.saturating_sub(lock(&self.state).waited_now());
        let timed_out = || {
            let message = format!(
                "{what} got no human's approval through {channel} within the approval timeout \
                 ({} s for all the approvals of one execution); it was not sent",
                total.as_secs()
            );
            (
                Verdict::TimedOut,
                None,
                Some(channel.clone()),
                Some(message),
            )
        };
        if timeout.is_zero() {
            // The execution has used up its waiting time: nobody is asked any more.
            return timed_out();
        }
        let answer = {
            let _hold = deadline.hold();
            let _counted = Waiting::start(&self.state);
            let asked = approver.ask(ask.clone(), fingerprint.clone(), timeout);
            tokio::select! {
                answer = tokio::time::timeout(timeout, asked) => answer.ok(),
                _ = cancel.cancelled() => {
                    let message = format!(
                        "{what} was waiting for approval when the execution was cancelled; it \
                         was not sent"
                    );
                    return (Verdict::Denied, None, Some(channel), Some(message));
                }
            }
        };
        match answer {
            None => timed_out(),
            Some(Answer::Approve { by }) => (Verdict::Approved, Some(by), Some(channel), None),
            Some(Answer::ApproveAll { by }) => {
                if write {
                    lock(&self.state).all_approved = Some((by.clone(), channel.clone()));
                }
                (Verdict::Approved, Some(by), Some(channel), None)
            }
            Some(Answer::Deny { by }) => {
                let message = denied(&by, &channel);
                (Verdict::Denied, Some(by), Some(channel), Some(message))
            }
            Some(Answer::Later { message }) => {
                lock(&self.state)
                    .waiting
                    .push((ask, fingerprint.clone(), message.clone()));
                (
                    Verdict::AwaitingApproval,
                    None,
                    Some(channel),
                    Some(message),
                )
            }
            Some(Answer::Unavailable { message }) => {
                let message = format!("{what} was not sent: {message}");
                (Verdict::NoChannel, None, Some(channel), Some(message))
            }
        }
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

/// Counts one wait for a human into the execution's waiting time, however the wait ends.
struct Waiting<'a> {
    state: &'a Mutex<State>,
}

impl<'a> Waiting<'a> {
    fn start(state: &'a Mutex<State>) -> Self {
        let mut locked = lock(state);
        if locked.waits == 0 {
            locked.waiting_since = Some(tokio::time::Instant::now());
        }
        locked.waits += 1;
        Self { state }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = lock(self.state);
        state.waits = state.waits.saturating_sub(1);
        if state.waits == 0
            && let Some(since) = state.waiting_since.take()
        {
            state.waited += since.elapsed();
        }
    }
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
