//! The part of the gate that asks a human: a decision an earlier round or the page already
//! gave, or a question put to the run's approver with the deadline held and all the waits of
//! one execution within the approval timeout. A question asked outside the execution first
//! makes the run's journal its code's chain, so that the re-run it leads to answers the
//! writes this run sent instead of sending them again.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::ask::{Answer, Approver, Ask};
use super::gate::{Deferred, Gate, State};
use super::journal::Key;
use super::page;
use super::shown::{MAX_QUESTION, Shown};
use super::store::Standing;
use crate::deadline::Deadline;
use crate::egress::Verdict;
use crate::lock::lock;

/// What `approve` found: the verdict, who decided and through which channel, and the
/// message of a refusal.
pub(super) type Approval = (Verdict, Option<String>, Option<String>, Option<String>);

/// A request to be approved.
pub(super) struct Asking<'a> {
    /// What the human sees.
    pub shown: Shown,
    /// Whether it is a write ("approve every write" answers writes only).
    pub write: bool,
    /// Why it needs approval: the rule's source.
    pub because: &'a str,
    /// Which write of the run it is.
    pub key: &'a Key,
}

impl Gate {
    /// Finds or asks for a human's decision; a message means the request is refused.
    pub(super) async fn approve(
        &self,
        asking: Asking<'_>,
        deadline: &Deadline,
        cancel: &CancellationToken,
    ) -> Approval {
        let Asking {
            shown,
            write,
            because,
            key,
        } = asking;
        let what = shown.what();
        let denied = |by: &str, channel: &str| {
            format!(
                "{what} was denied by {by} through {channel}; it was not sent. Do not retry it \
                 unless the user asks"
            )
        };
        if let Some(found) = self.carried_decision(write, key, &denied) {
            return found;
        }
        if !shown.whole() {
            let message = format!(
                "{what} is too large or too long to show a human whole ({} characters of URL, \
                 headers and body as shown, over {MAX_QUESTION}, or over {} lines), and nobody \
                 approves what they cannot read; it was not sent. Send smaller requests",
                shown.size(),
                super::shown::MAX_QUESTION_LINES
            );
            return (Verdict::Denied, None, None, Some(message));
        }
        let on_page = || Some(page::CHANNEL.to_owned());
        let standing = match self.approvals.store.take(&self.code, key, write).await {
            Ok(standing) => standing,
            Err(error) => {
                let message = format!(
                    "{what} was not sent: the decisions given for it cannot be read ({error}); \
                     try again shortly"
                );
                return (Verdict::NoChannel, None, None, Some(message));
            }
        };
        match standing {
            Standing::Approved(by) => {
                // Given back at the round's end if the write does not leave after all.
                if write {
                    lock(&self.state)
                        .taken_grants
                        .push((key.clone(), by.clone()));
                }
                return (Verdict::Approved, Some(by), on_page(), None);
            }
            Standing::ApprovedAll(by) => {
                lock(&self.state).all_approved = Some((by.clone(), page::CHANNEL.into()));
                return (Verdict::Approved, Some(by), on_page(), None);
            }
            Standing::Denied(by) => {
                let message = denied(&by, page::CHANNEL);
                return (Verdict::Denied, Some(by), on_page(), Some(message));
            }
            Standing::Differs => return (Verdict::Denied, None, on_page(), Some(differs(&what))),
            Standing::Open => {}
        }
        let Some(approver) = self.approver.clone() else {
            let message = format!(
                "{what} needs a human's approval ({because}), and this client offers no way to \
                 ask one (no MCP elicitation, and no approval page). It was not sent. Tell the \
                 user; the operator can allow it in the provider file's [policy] or with --writes"
            );
            return (Verdict::NoChannel, None, None, Some(message));
        };
        if approver.answers_later()
            && let Err(message) = self.publish_chain().await
        {
            let message = format!("{what} was not sent: {message}");
            return (Verdict::NoChannel, None, None, Some(message));
        }
        let because = match &lock(&self.state).asked_again {
            Some(why) => format!("{because}; asked again because {why}"),
            None => because.to_owned(),
        };
        let ask = Ask::new(&self.execution, shown, &because);
        self.ask(&approver, ask, write, key, deadline, cancel, &denied)
            .await
    }

    /// A decision an earlier round handed over, or "every write" approved in this run.
    fn carried_decision(
        &self,
        write: bool,
        key: &Key,
        denied: &(dyn Fn(&str, &str) -> String + Sync),
    ) -> Option<Approval> {
        // An explicit denial wins over any approval, "every write" included.
        let mut state = lock(&self.state);
        let channel = state.carried_channel.clone();
        if let Some((_, by)) = state
            .carried
            .denied
            .iter()
            .find(|(f, _)| *f == key.fingerprint)
        {
            let message = denied(by, &channel);
            let by = Some(by.clone());
            return Some((Verdict::Denied, by, Some(channel), Some(message)));
        }
        if write && let Some((by, channel)) = state.all_approved.clone() {
            return Some((Verdict::Approved, Some(by), Some(channel), None));
        }
        let approved = &mut state.carried.approved;
        if let Some(at) = approved
            .iter()
            .position(|k| k.fingerprint == key.fingerprint)
        {
            // Handed back to the next round if the write does not leave after all (the run
            // ends first): see `Gate::carried`.
            let taken = approved.remove(at);
            if write {
                state.taken.push((taken, key.clone()));
            }
            return Some((
                Verdict::Approved,
                Some("the user".into()),
                Some(channel),
                None,
            ));
        }
        if approved.iter().any(|k| k.same_place(key)) {
            return Some((
                Verdict::Denied,
                None,
                Some(channel),
                Some(differs(&key.slot)),
            ));
        }
        None
    }

    /// Keeps this run's journal as its code's chain before a question goes outside the
    /// execution (the re-run that answers it continues this run); an error when the store
    /// keeps as many chains as it may.
    async fn publish_chain(&self) -> Result<(), String> {
        let Some(journal) = &self.journal else {
            return Ok(());
        };
        journal
            .publish(&self.caller)
            .await
            .map_err(|error| error.to_string())
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
        key: &Key,
        deadline: &Deadline,
        cancel: &CancellationToken,
        denied: &(dyn Fn(&str, &str) -> String + Sync),
    ) -> Approval {
        let what = ask.request.what();
        let channel = approver.channel().to_owned();
        let total = self.approvals.timeout;
        let timeout = total.saturating_sub(waited_now(&lock(&self.state)));
        let timed_out = || {
            let message = format!(
                "{what} got no human's approval through {channel} within the approval timeout \
                 ({} s for all the approvals of one execution); it was not sent",
                total.as_secs()
            );
            let channel = Some(channel.clone());
            (Verdict::TimedOut, None, channel, Some(message))
        };
        if timeout.is_zero() {
            // The execution has used up its waiting time: nobody is asked any more.
            return timed_out();
        }
        // The wait is a span of the call, with the channel asked and what came of it.
        let span = tracing::info_span!(
            crate::telemetry::span::APPROVAL,
            channel = %channel,
            write,
            answer = tracing::field::Empty,
        );
        let answer = {
            let _hold = deadline.hold();
            let _counted = Waiting::start(&self.state);
            let asked = approver
                .ask(ask.clone(), key.clone(), timeout)
                .instrument(span.clone());
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
        span.record("answer", answer.as_ref().map_or("timed_out", Answer::word));
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
                lock(&self.state).waiting.push(Deferred {
                    ask,
                    key: key.clone(),
                    message: message.clone(),
                });
                let channel = Some(channel);
                (Verdict::AwaitingApproval, None, channel, Some(message))
            }
            Some(Answer::Unavailable { message }) => {
                let message = format!("{what} was not sent: {message}");
                (Verdict::NoChannel, None, Some(channel), Some(message))
            }
        }
    }
}

/// Why a write whose bytes changed since the user approved a request to the same method
/// and URL is refused.
fn differs(what: &str) -> String {
    format!(
        "{what} differs from the request the user approved to the same method and URL: its \
         bytes changed between runs (a timestamp, a random value, or data read from the API), \
         or it is another request. It was not sent: the user approves exact requests. If it is \
         the same request, make the code send the same bytes each run (compute such values \
         once, and write them into the code), then run it again"
    )
}

/// Waiting time used so far, the wait going on included.
fn waited_now(state: &State) -> std::time::Duration {
    state.waited
        + state
            .waiting_since
            .map_or(std::time::Duration::ZERO, |t| t.elapsed())
}

/// Counts one wait for a human into the execution's waiting time, however the wait ends.
struct Waiting<'a> {
    state: &'a Mutex<State>,
}

impl<'a> Waiting<'a> {
    fn start(state: &'a Mutex<State>) -> Self {
        metrics::gauge!("sdkbox_approvals_waiting").increment(1.0);
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
        metrics::gauge!("sdkbox_approvals_waiting").decrement(1.0);
        let mut state = lock(self.state);
        state.waits = state.waits.saturating_sub(1);
        if state.waits == 0
            && let Some(since) = state.waiting_since.take()
        {
            state.waited += since.elapsed();
        }
    }
}
