//! One execution's approval session, built from the caller and the channel its client
//! offers: the server asks for one, hands its gate to the sandbox, and ends it to learn
//! whether the call is complete or asks the client for input (2026-07-28).
//!
//! On the channels whose decisions come outside the execution (the page, a 2026-07-28
//! retry), a run joins its code's chain when the store keeps one (or, from a request state,
//! the chain the state carries), and runs of the same code by the same caller take turns,
//! so that no two claim a chain's writes at once.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{InputRequiredResult, InputResponses};

use super::Approvals;
use super::ask::Approver;
use super::caller::Caller;
use super::chain::RunJournal;
use super::gate::Gate;
use super::mcp::{RETRY_CHANNEL, RetryApprover};
use super::page::{CHANNEL as PAGE_CHANNEL, PageApprover};
use super::runs::Takeover;
use super::states::Carried;
use super::store::{StoreError, Turn};

/// How long a run waits for another run of the same code by the same caller to end.
const TURN_WAIT: Duration = Duration::from_secs(60);

/// A write's claim lasts the approval timeout, the longest an execution runs, and this
/// (past it, the claim counts as a write that may have been sent, never as one that was not).
const CLAIM_MARGIN: Duration = Duration::from_secs(60);

/// How a call's client can reach its user.
pub enum Channel {
    /// During the execution (MCP elicitation in the handshake era).
    Now(Arc<dyn Approver>),
    /// After it: the questions go back in an input-required result and the client's retry,
    /// with the request state, runs the code again (2026-07-28).
    Retry {
        /// The request state of a retry, if this call is one.
        state: Option<String>,
        /// The user's answers.
        responses: Option<InputResponses>,
    },
    /// None through MCP: the loopback approval page, if the server has one.
    Page,
}

/// How the round ends for the client.
pub enum Ending {
    /// The call is complete: its outcome is the result.
    Complete,
    /// The client asks its user these questions and retries the call.
    InputRequired(InputRequiredResult),
}

/// One execution's approval session.
pub struct Round {
    gate: Arc<Gate>,
    retry: bool,
    approvals: Approvals,
    /// This caller's turn to run this code, held until the round ends.
    _turn: Option<Turn>,
    /// Whether [`Round::end`] ran.
    ended: bool,
}

impl Drop for Round {
    fn drop(&mut self) {
        // Dropped unended: its call was cancelled before its outcome went out, so the next
        // run of its code continues it.
        if !self.ended
            && let Some(journal) = &self.gate.journal
        {
            journal.abandon_later();
        }
    }
}

/// Why a round could not begin.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RoundError(pub String);

impl Approvals {
    /// Begins the approval session of one run of `code` by `caller`. A retry's request
    /// state must be this deployment's, for this code and caller, unexpired and unused.
    pub async fn begin(
        &self,
        caller: &Caller,
        code: &str,
        dry_run: bool,
        channel: Channel,
    ) -> Result<Round, RoundError> {
        let digest = super::code_digest(caller, code);
        let (approver, retry): (Option<Arc<dyn Approver>>, bool) = match &channel {
            Channel::Now(approver) => (Some(approver.clone()), false),
            Channel::Retry { .. } => (Some(Arc::new(RetryApprover)), true),
            Channel::Page => match &self.page {
                Some(page) => {
                    let approver = PageApprover::new(page.clone(), caller.clone(), &digest);
                    (Some(Arc::new(approver)), false)
                }
                None => (None, false),
            },
        };
        // A dry run sends no write: it neither joins nor starts a chain. Elicitation decides
        // within the execution: it has none either.
        let chained = !dry_run && (retry || matches!(channel, Channel::Page) && approver.is_some());
        let turn = match chained {
            true => Some(self.turn(&digest).await?),
            false => None,
        };
        let mut carried_by = None;
        let journal = match dry_run {
            // A dry run sends no write: it neither continues nor leaves a journal.
            true => None,
            false => Some(
                self.journal(caller, &digest, chained, channel, &mut carried_by)
                    .await?,
            ),
        };
        let gate = Gate::new(
            self.clone(),
            caller.clone(),
            code,
            approver,
            journal,
            dry_run,
        );
        if let Some((carried, channel, asked_again)) = carried_by {
            gate.carry(carried, channel, asked_again);
        }
        Ok(Round {
            gate: Arc::new(gate),
            retry,
            approvals: self.clone(),
            _turn: turn,
            ended: false,
        })
    }

    /// The journal of a run of the code with digest `digest`: its chain's when it continues
    /// one (a retry's request state, or a chain of the page or retries kept in the store),
    /// else its own; either way it takes over the writes of runs of the same code that
    /// stopped unfinished. What a chained run carries from earlier rounds goes to `carried`.
    async fn journal(
        &self,
        caller: &Caller,
        digest: &str,
        chained: bool,
        channel: Channel,
        carried: &mut Option<(Carried, &'static str, Option<String>)>,
    ) -> Result<Arc<RunJournal>, RoundError> {
        let store = self.store.clone();
        let lease = self.claim_lease();
        let unavailable = |error: &dyn std::fmt::Display| {
            RoundError(format!(
                "the approvals of this code cannot be read now ({error}); run it again shortly"
            ))
        };
        let until_ms = store.state().now_ms() + lease.as_millis() as u64;
        // The token this run owns its journal with (its own, or one it takes over).
        let owner = super::random_hex(12)
            .ok_or_else(|| RoundError("no randomness for a run's token".into()))?;
        let took = match store
            .take_over_unfinished(digest, &owner, until_ms, TURN_WAIT)
            .await
            .map_err(|e| unavailable(&e))?
        {
            Takeover::Going => {
                return Err(RoundError(format!(
                    "this code is still running for this caller (another call of the same \
                     code has written and not finished, for {} s now); run it again once that \
                     one has finished",
                    TURN_WAIT.as_secs()
                )));
            }
            Takeover::Nothing => None,
            Takeover::Took(run) => Some(run),
        };
        let (entries, joined) = match (chained, channel) {
            (false, _) => (Vec::new(), false),
            (
                true,
                Channel::Retry {
                    state: Some(state),
                    responses,
                },
            ) => {
                let opened = self
                    .states()?
                    .open(store.state(), digest, &state, responses.as_ref())
                    .await
                    .map_err(RoundError)?;
                let entries = opened.carried.journal.clone();
                *carried = Some((opened.carried, RETRY_CHANNEL, opened.asked_again));
                (entries, true)
            }
            (true, channel) => {
                let name = match channel {
                    Channel::Retry { .. } => RETRY_CHANNEL,
                    _ => PAGE_CHANNEL,
                };
                *carried = Some((Carried::default(), name, None));
                let joined = store
                    .join(caller, digest)
                    .await
                    .map_err(|e| unavailable(&e))?;
                (Vec::new(), joined)
            }
        };
        if joined {
            match store.publish(caller, digest, entries.clone(), false).await {
                Ok(()) => {
                    // The run taken over joins the chain this run continues.
                    if let Some(run) = &took {
                        store
                            .publish_run(caller, digest, run, &owner, false)
                            .await
                            .map_err(|e| unavailable(&e))?;
                    }
                    return Ok(RunJournal::chained(store, digest, lease));
                }
                // Past the bounds: the writes still answer this run, from its own journal.
                Err(StoreError::Full(_)) => {}
                Err(StoreError::State(error)) => return Err(unavailable(&error)),
            }
        }
        match took {
            Some(run) => {
                if !entries.is_empty() {
                    store
                        .merge_into_run(&run, &owner, entries)
                        .await
                        .map_err(|e| unavailable(&e))?;
                }
                Ok(RunJournal::continuing(store, digest, &run, lease, &owner))
            }
            None => RunJournal::own(store, digest, entries, lease, &owner)
                .await
                .map_err(|e| unavailable(&e)),
        }
    }

    /// How long a write's claim may last: the longest a run can take to send it, its waits
    /// for humans included.
    fn claim_lease(&self) -> Duration {
        self.timeout + self.longest_run + CLAIM_MARGIN
    }

    /// Waits for this caller's turn to run this code, a while.
    async fn turn(&self, digest: &str) -> Result<Turn, RoundError> {
        let turn = self.store.turn(digest, TURN_WAIT).await.map_err(|error| {
            RoundError(format!(
                "this code's turn to run cannot be taken now ({error}); run it again shortly"
            ))
        })?;
        turn.ok_or_else(|| {
            RoundError(format!(
                "this code is still running for this caller (another call of the same code, \
                 for {} s now); run it again once that one has finished",
                TURN_WAIT.as_secs()
            ))
        })
    }

    /// The gate of a run with no human to ask (`sdkbox exec`, tests): writes under `approve`
    /// are refused with a clear error.
    pub fn unasked(&self, caller: &Caller, code: &str) -> Arc<Gate> {
        Arc::new(Gate::new(
            self.clone(),
            caller.clone(),
            code,
            None,
            None,
            false,
        ))
    }
}

impl Round {
    /// The gate that decides about the execution's requests.
    pub fn gate(&self) -> Arc<Gate> {
        self.gate.clone()
    }

    /// Leaves the round unended: the server stopped the execution before its outcome could
    /// go out (the shutdown grace ran out), so the next run of its code continues it, on
    /// whichever replica.
    pub fn abandon(self) {
        // The round's drop leaves the run for the next (see `Drop`).
        drop(self);
    }

    /// Ends the round, once the execution has: a 2026-07-28 round with questions asked
    /// outside it asks the client (with what the next round needs, sealed); every other
    /// round is complete. A chain stays in the store for the runs that continue it; one whose
    /// run asked nothing more waits for nothing (its room may be taken).
    pub async fn end(mut self) -> Result<Ending, RoundError> {
        self.ended = true;
        let waiting = self.gate.waiting();
        // Page decisions this run used for writes that did not leave go back to the chain,
        // for the run that continues it (the human is not asked again).
        for (key, by) in self.gate.unsent_grants() {
            let granted = super::store::Granted::One(key);
            if let Err(error) = self
                .approvals
                .store
                .give(&self.gate.caller, self.gate.code(), granted, &by)
                .await
            {
                tracing::warn!(%error, "an unused page decision could not be given back");
            }
        }
        if let Some(journal) = &self.gate.journal {
            let done = match journal.published().await {
                true if waiting.is_empty() => self.approvals.store.rest(self.gate.code()).await,
                true => Ok(()),
                false => journal.finish().await,
            };
            if let Err(error) = done {
                tracing::warn!(%error, "a run's journal could not be closed");
            }
        }
        if !self.retry || waiting.is_empty() {
            return Ok(Ending::Complete);
        }
        let questions: Vec<_> = waiting.into_iter().map(|w| (w.ask, w.key)).collect();
        let carried = self
            .gate
            .carried()
            .await
            .map_err(|e| RoundError(e.to_string()))?;
        let required = self
            .approvals
            .states()?
            .input_required(
                self.gate.code(),
                &questions,
                carried,
                &self.approvals.store.state().epoch(),
            )
            .map_err(RoundError)?;
        Ok(Ending::InputRequired(required))
    }
}
