//! One execution's side of approvals: it decides about each request, asks the client's
//! channel to a human when a rule says `approve`, keeps a dry run's plan, and records the
//! writes it sent for a re-run of the same code.

use crate::lock::lock;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::ask::{Answer, Approver, Ask, Fingerprint, MAX_SHOWN, Shown, code_digest, random_hex};
use super::audit::AuditLine;
use super::grants::Standing;
use super::journal::Journal;
use super::{
    Approvals, Classified, DEFAULT_APPROVAL_TIMEOUT, Decision, Grants, Note, Planned,
    PolicyOverrides, Request, Rule, Rules, Verdict, dry_run, page,
};
use crate::deadline::Deadline;
use crate::egress::{ScriptResponse, Scrubber, WITHHELD, cut};

/// Writes a dry run lists in its plan; more are counted.
const MAX_PLANNED: usize = 100;

/// Characters of a planned write's body kept in the plan.
const MAX_PLANNED_BODY: usize = 300;

/// Approvals waiting outside the execution that one outcome lists.
const MAX_LISTED_APPROVALS: usize = 5;

/// What one run of a code hands the next run of the same code, when a human's decision
/// came (or is to come) between them: decisions not used yet, and the writes already sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Retry {
    /// Writes a human approved that have not gone out yet.
    pub approved: Vec<Fingerprint>,
    /// Writes a human denied, and who did.
    pub denied: Vec<(Fingerprint, String)>,
    /// Who approved every write of this code's runs, if someone did.
    pub all: Option<String>,
    /// The writes earlier runs sent, with their responses.
    pub journal: Journal,
}

/// One execution's gate.
pub struct Gate {
    approvals: Approvals,
    approver: Option<Arc<dyn Approver>>,
    execution: String,
    code: String,
    dry_run: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// What earlier runs handed over, and the channel their decisions came through.
    retry: Retry,
    retry_channel: String,
    /// The writes this run sent.
    sent: Journal,
    /// Who approved every write of this run, and through which channel.
    all_approved: Option<(String, String)>,
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

impl Gate {
    /// The gate of one execution of the code with this digest (see [`code_digest`]: it binds
    /// approvals and replays to the code, and to the caller it was made with); `approver` is
    /// the channel to a human, if the client has one.
    pub fn new(
        approvals: Approvals,
        approver: Option<Arc<dyn Approver>>,
        digest: String,
        dry_run: bool,
    ) -> Self {
        Self {
            approvals,
            approver,
            // For humans to tell requests apart; not a secret.
            execution: random_hex(4).unwrap_or_else(|| "unknown".to_owned()),
            code: digest,
            dry_run,
            state: Mutex::default(),
        }
    }

    /// A gate that allows every request: for tests and tools that need no rules.
    pub fn open(base: url::Url) -> Self {
        let overrides = PolicyOverrides {
            read_only: false,
            writes: Some(Rule::Allow),
        };
        let approvals = Approvals {
            rules: Arc::new(Rules::without_spec(base, overrides)),
            grants: Grants::default(),
            timeout: DEFAULT_APPROVAL_TIMEOUT,
            audit: None,
        };
        Self::new(approvals, None, code_digest(0, ""), false)
    }

    /// This run continues earlier runs of the same code: their unused decisions (given
    /// through `channel`) and the writes they sent, which are answered from the journal.
    pub fn with_retry(self, retry: Retry, channel: &str) -> Self {
        {
            let mut state = lock(&self.state);
            state.all_approved = retry.all.clone().map(|by| (by, channel.to_owned()));
            state.retry = retry;
            state.retry_channel = channel.to_owned();
        }
        self
    }

    /// What the next run of the same code needs from this one: decisions not used yet, and
    /// every write sent so far (by earlier runs and this one).
    pub fn carried(&self) -> Retry {
        let state = lock(&self.state);
        let mut journal = state.retry.journal.clone().entries();
        journal.extend(state.sent.clone().entries());
        Retry {
            approved: state.retry.approved.clone(),
            denied: state.retry.denied.clone(),
            all: state.all_approved.as_ref().map(|(by, _)| by.clone()),
            journal: Journal::new(journal),
        }
    }

    /// The rules requests are classified by.
    pub fn rules(&self) -> &Rules {
        &self.approvals.rules
    }

    /// The digest of this execution's code.
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

    /// Whether this run's writes are recorded for a re-run: only when a human can be asked,
    /// since only a decision given outside the execution leads to one.
    pub fn journals(&self) -> bool {
        self.approver.is_some()
    }

    /// Records a write that was sent, for a re-run of the same code.
    pub fn sent(&self, fingerprint: Fingerprint, response: &ScriptResponse) {
        lock(&self.state).sent.record(fingerprint, response);
    }

    /// Decides about one request before it leaves. A request under `approve` waits here for
    /// a human, with the deadline stopped, up to the approval timeout or until `cancel`.
    /// What a human or the audit file is shown of it passes `scrubber` first, as everything
    /// else that leaves egress does.
    pub async fn decide(
        &self,
        request: Request<'_>,
        scrubber: &Scrubber,
        deadline: &Deadline,
        cancel: &CancellationToken,
    ) -> Decision {
        let Classified {
            operation,
            index,
            rule,
            because,
        } = request.classified.clone();
        let write = crate::egress::is_write(request.method);
        let note = |decision, by: Option<String>, channel: Option<String>| Note {
            rule,
            decision,
            because: because.clone(),
            by,
            channel,
        };
        let fingerprint = request.fingerprint();
        let withheld = Shown {
            url: WITHHELD.to_owned(),
            headers: Vec::new(),
            body: None,
            ..request.shown(0)
        };
        // Shown whole or not at all (see `approve`), so nothing is cut before the scrubber.
        let shown = scrubber.scrub_all(request.shown(MAX_SHOWN), withheld);
        let replayed = (write && rule != Rule::Deny && !self.dry_run)
            .then(|| lock(&self.state).retry.journal.take(&fingerprint))
            .flatten();
        let decision = match (rule, replayed) {
            (Rule::Deny, _) => {
                let message = format!(
                    "{} is denied by the approval rules ({because}); it was not sent. Do not \
                     retry it; tell the user it is not allowed here",
                    shown.what()
                );
                Decision::Refuse(note(Verdict::Denied, None, None), message)
            }
            (_, Some(response)) => Decision::Answer(note(Verdict::Replayed, None, None), response),
            _ if self.dry_run && write => {
                self.add_to_plan(&request, rule);
                let op = index.and_then(|i| self.approvals.rules.operation(i));
                Decision::Answer(
                    note(Verdict::DryRun, None, None),
                    dry_run::placeholder(op, request.url),
                )
            }
            (Rule::Allow, None) => Decision::Send(note(Verdict::Allowed, None, None)),
            (Rule::Approve, None) => {
                let (verdict, by, channel, message) = self
                    .approve(shown, &because, &fingerprint, deadline, cancel)
                    .await;
                let note = note(verdict, by, channel);
                match message {
                    None => Decision::Send(note),
                    Some(message) => Decision::Refuse(note, message),
                }
            }
        };
        if write || rule != Rule::Allow {
            self.audit(&operation, &request, scrubber, &fingerprint, decision)
                .await
        } else {
            decision
        }
    }

    fn add_to_plan(&self, request: &Request<'_>, rule: Rule) {
        let mut state = lock(&self.state);
        if state.plan.len() >= MAX_PLANNED {
            state.plan_dropped += 1;
            return;
        }
        let shown = request.shown(MAX_PLANNED_BODY);
        state.plan.push(Planned {
            request: shown,
            policy: rule,
        });
    }

    /// Finds or asks for a human's decision; a message means the request is refused.
    async fn approve(
        &self,
        shown: Shown,
        because: &str,
        fingerprint: &Fingerprint,
        deadline: &Deadline,
        cancel: &CancellationToken,
    ) -> (Verdict, Option<String>, Option<String>, Option<String>) {
        let what = shown.what();
        let denied = |by: &str, channel: &str| {
            format!(
                "{what} was denied by {by} through {channel}; it was not sent. Do not retry it \
                 unless the user asks"
            )
        };
        {
            // An explicit denial wins over any approval, "every write" included.
            let mut state = lock(&self.state);
            let channel = state.retry_channel.clone();
            if let Some((_, by)) = state.retry.denied.iter().find(|(f, _)| f == fingerprint) {
                let message = denied(by, &channel);
                return (
                    Verdict::Denied,
                    Some(by.clone()),
                    Some(channel),
                    Some(message),
                );
            }
            if let Some((by, channel)) = state.all_approved.clone() {
                return (Verdict::Approved, Some(by), Some(channel), None);
            }
            if let Some(at) = state.retry.approved.iter().position(|g| g == fingerprint) {
                state.retry.approved.remove(at);
                return (
                    Verdict::Approved,
                    Some("the user".into()),
                    Some(channel),
                    None,
                );
            }
        }
        if !shown.whole() {
            let message = format!(
                "{what} is too large to show a human whole (a URL, header or body over \
                 {MAX_SHOWN} characters), and nobody approves what they cannot read; it was not \
                 sent. Send smaller requests"
            );
            return (Verdict::Denied, None, None, Some(message));
        }
        let on_page = || Some(page::CHANNEL.to_owned());
        match self.approvals.grants.take(&self.code, fingerprint) {
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
        let channel = approver.channel().to_owned();
        let ask = Ask::new(&self.execution, shown, because);
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
                lock(&self.state).all_approved = Some((by.clone(), channel.clone()));
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
        }
    }

    /// Appends the decision to the audit file; a decision that cannot be written down is
    /// not carried out.
    async fn audit(
        &self,
        operation: &Option<String>,
        request: &Request<'_>,
        scrubber: &Scrubber,
        fingerprint: &Fingerprint,
        decision: Decision,
    ) -> Decision {
        let Some(audit) = self.approvals.audit.clone() else {
            return decision;
        };
        let note = match &decision {
            Decision::Send(note) | Decision::Answer(note, _) | Decision::Refuse(note, _) => note,
        };
        // Scrubbed before it is cut: a cut could leave part of an encoded secret behind.
        let url = cut(&scrubber.scrub(request.url), crate::egress::MAX_LOGGED_URL);
        let line = AuditLine {
            time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            execution: &self.execution,
            code: &self.code,
            operation: operation.as_deref(),
            method: request.method,
            url: &url,
            fingerprint: &fingerprint.0,
            note,
        };
        let bytes = match serde_json::to_vec(&line) {
            Ok(bytes) => bytes,
            Err(error) => return refuse_unaudited(note, &error.to_string()),
        };
        match tokio::task::spawn_blocking(move || audit.append(bytes)).await {
            Ok(Ok(())) => decision,
            Ok(Err(error)) => {
                tracing::error!(%error, "the audit file cannot be written");
                refuse_unaudited(note, &error.to_string())
            }
            Err(error) => refuse_unaudited(note, &error.to_string()),
        }
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
