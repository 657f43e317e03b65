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
use super::gate::{Chained, Gate};
use super::journal;
use super::mcp::{RETRY_CHANNEL, RetryApprover};
use super::page::{CHANNEL as PAGE_CHANNEL, PageApprover};
use super::states::Carried;
use super::store::Turn;

/// How long a run waits for another run of the same code by the same caller to end.
const TURN_WAIT: Duration = Duration::from_secs(60);

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
}

/// Why a round could not begin.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RoundError(pub String);

impl Approvals {
    /// Begins the approval session of one run of `code` by `caller`. A retry's request
    /// state must be this server's, for this code and caller, unexpired and unused.
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
            true => Some(self.turn(caller, &digest).await?),
            false => None,
        };
        let mut carried = None;
        let chain = match (chained, channel) {
            (false, _) => None,
            (
                true,
                Channel::Retry {
                    state: Some(state),
                    responses,
                },
            ) => {
                let opened = self
                    .states()?
                    .open(&digest, &state, responses.as_ref())
                    .map_err(RoundError)?;
                let entries = opened.carried.journal.clone();
                let (journal, published) = self.store.adopt(caller, &digest, entries);
                carried = Some((opened.carried, RETRY_CHANNEL, opened.asked_again));
                Some(Chained { journal, published })
            }
            (true, channel) => {
                let name = match channel {
                    Channel::Retry { .. } => RETRY_CHANNEL,
                    _ => PAGE_CHANNEL,
                };
                carried = Some((Carried::default(), name, None));
                Some(match self.store.join(caller, &digest) {
                    Some(journal) => Chained {
                        journal,
                        published: true,
                    },
                    None => Chained {
                        journal: journal::shared(Vec::new()),
                        published: false,
                    },
                })
            }
        };
        let gate = Gate::new(self.clone(), caller.clone(), code, approver, chain, dry_run);
        if let Some((carried, channel, asked_again)) = carried {
            gate.carry(carried, channel, asked_again);
        }
        Ok(Round {
            gate: Arc::new(gate),
            retry,
            approvals: self.clone(),
            _turn: turn,
        })
    }

    /// Waits for this caller's turn to run this code, a while.
    async fn turn(&self, caller: &Caller, digest: &str) -> Result<Turn, RoundError> {
        tokio::time::timeout(TURN_WAIT, self.store.turn(caller, digest))
            .await
            .map_err(|_| {
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

    /// Ends the round, once the execution has: a 2026-07-28 round with questions asked
    /// outside it asks the client (with what the next round needs, sealed); every other
    /// round is complete. A chain stays in the store for the runs that continue it.
    pub fn end(self) -> Result<Ending, RoundError> {
        let waiting = self.gate.waiting();
        if !self.retry || waiting.is_empty() {
            return Ok(Ending::Complete);
        }
        let questions: Vec<_> = waiting.into_iter().map(|w| (w.ask, w.key)).collect();
        let required = self
            .approvals
            .states()?
            .input_required(self.gate.code(), &questions, self.gate.carried())
            .map_err(RoundError)?;
        Ok(Ending::InputRequired(required))
    }
}
