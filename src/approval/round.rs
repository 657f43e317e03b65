//! One execution's approval session, built from the caller and the channel its client
//! offers: the server asks for one, hands its gate to the sandbox, and ends it to learn
//! whether the call is complete or asks the client for input (2026-07-28).

use std::sync::Arc;

use rmcp::model::{InputRequiredResult, InputResponses};

use super::Approvals;
use super::ask::Approver;
use super::caller::Caller;
use super::gate::Gate;
use super::journal::{self, SharedJournal};
use super::mcp::{RETRY_CHANNEL, RetryApprover};
use super::page::{CHANNEL as PAGE_CHANNEL, PageApprover};
use super::states::Carried;

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
}

/// Why a round could not begin.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RoundError(pub String);

impl Approvals {
    /// Begins the approval session of one run of `code` by `caller`. A retry's request
    /// state must be this server's, for this code and caller, unexpired and unused.
    pub fn begin(
        &self,
        caller: &Caller,
        code: &str,
        dry_run: bool,
        channel: Channel,
    ) -> Result<Round, RoundError> {
        let digest = super::code_digest(caller, code);
        // A dry run sends no write: it neither joins nor starts a chain.
        let chain = |journal: SharedJournal| (!dry_run).then_some(journal);
        let (approver, journal, carried, retry): (Option<Arc<dyn Approver>>, _, _, _) =
            match channel {
                Channel::Now(approver) => (Some(approver), None, None, false),
                Channel::Retry { state, responses } => {
                    let opened = match &state {
                        Some(state) => Some(
                            self.states()?
                                .open(&digest, state, responses.as_ref())
                                .map_err(RoundError)?,
                        ),
                        None => None,
                    };
                    let (carried, asked_again) = match opened {
                        Some(opened) => (opened.carried, opened.asked_again),
                        None => (Carried::default(), None),
                    };
                    let journal = chain(journal::shared(carried.journal.clone()));
                    let approver: Arc<dyn Approver> = Arc::new(RetryApprover);
                    (
                        Some(approver),
                        journal,
                        Some((carried, RETRY_CHANNEL, asked_again)),
                        true,
                    )
                }
                Channel::Page => match &self.page {
                    Some(page) => {
                        let journal = self
                            .store
                            .join(caller, &digest)
                            .unwrap_or_else(|| journal::shared(Vec::new()));
                        let approver: Arc<dyn Approver> = Arc::new(PageApprover::new(
                            page.clone(),
                            caller.clone(),
                            &digest,
                            journal.clone(),
                        ));
                        (
                            Some(approver),
                            chain(journal),
                            Some((Carried::default(), PAGE_CHANNEL, None)),
                            false,
                        )
                    }
                    None => (None, None, None, false),
                },
            };
        let gate = Gate::new(
            self.clone(),
            caller.clone(),
            code,
            approver,
            journal,
            dry_run,
        );
        if let Some((carried, channel, asked_again)) = carried {
            gate.carry(carried, channel, asked_again);
        }
        Ok(Round {
            gate: Arc::new(gate),
            retry,
            approvals: self.clone(),
        })
    }
}

impl Approvals {
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

    /// Ends the round, once the execution has: a 2026-07-28 round with questions asked
    /// outside it asks the client (with what the next round needs, sealed); every other
    /// round is complete. A page round's chain stays in the store for its re-run.
    pub fn end(self) -> Result<Ending, RoundError> {
        let waiting = self.gate.waiting();
        if !self.retry || waiting.is_empty() {
            return Ok(Ending::Complete);
        }
        let questions: Vec<_> = waiting
            .into_iter()
            .map(|(ask, fingerprint, _)| (ask, fingerprint))
            .collect();
        let required = self
            .approvals
            .states()?
            .input_required(self.gate.code(), &questions, self.gate.carried())
            .map_err(RoundError)?;
        Ok(Ending::InputRequired(required))
    }
}
