//! Approval rules for dangerous actions, and the guarantee that writes happen exactly once,
//! as shown, per caller. Every request an execution makes is classified in egress (through
//! its `Checkpoint`, which [`Gate`] implements), after its URL is final and before it leaves:
//! `allow` sends it, `deny` refuses it with a `PolicyError` in the script, `approve` asks a
//! human through the best channel the client has (MCP elicitation, the client's retry of a
//! 2026-07-28 call, the loopback approval page) and refuses it when there is none. Dry runs
//! send no write at all. Every decision about a write is in the call log and, with
//! `--audit-log`, on disk before anything leaves, with a line for each attempt after.
//!
//! Invariants:
//! - the rule is found from what egress will send (method and final URL matched to the
//!   spec's path templates), never from what the script or the SDK says about the request;
//! - the model cannot approve: approvals come from a human, through the client or a page
//!   the sandbox cannot reach, for the exact bytes they were shown, and a re-run's write goes
//!   out only if it is exactly the approved one (operation, method, URL, headers, body
//!   digest) of the same code and caller, once;
//! - writes happen once: the runs of one caller's code that an approval given outside the
//!   execution ties together (a chain) share an append-only journal, claimed before each
//!   write leaves, so no round, early re-run or retry sends a write twice;
//! - approvals, journals, approve-all and workers belong to one caller ([`Caller`]): the MCP
//!   session, the signed-in subject, the provider key; another caller cannot spend them;
//! - the execution's deadline stops while a human decides, bounded by the approval timeout.

mod ask;
mod audit;
mod caller;
mod chain;
mod dry_run;
mod follow;
mod gate;
mod human;
mod journal;
mod mcp;
pub mod page;
mod round;
mod rules;
mod runs;
mod shown;
mod states;
mod store;

pub use ask::{Answer, AnswerFuture, Approver, Ask, Fingerprint, random_hex};
pub use audit::AuditLog;
pub use caller::{Caller, CallerParts, code_digest};
pub use dry_run::Planned;
pub use gate::{Deferred, Gate};
pub use journal::Key;
pub use mcp::{ElicitApprover, answer as approval_answer, form as approval_form};
pub use round::{Channel, Ending, Round, RoundError};
pub use rules::{Classified, PolicyFile, PolicyOverrides, Rule, Rules};
pub use shown::{MAX_QUESTION, Shown};
pub use store::{CHAIN_LIFETIME, GRANT_LIFETIME};

use crate::state::{StateError, StateStore};

pub use crate::egress::{Note, Verdict};

use std::sync::Arc;
use std::time::Duration;

use page::ApprovalPage;
use states::RequestStates;
use store::Store;

/// The longest an execution runs unless told otherwise (see `with_longest_run`).
const DEFAULT_LONGEST_RUN: Duration = Duration::from_secs(15 * 60);

/// How long a human has to decide, by default.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

/// Everything the executions of one server share about approvals: the rules, the channels,
/// the chains waiting for the page, the request states and the trail. Clones share them.
#[derive(Clone)]
pub struct Approvals {
    /// The provider's rules.
    pub rules: Arc<Rules>,
    /// How long a human has to decide.
    pub timeout: Duration,
    /// The audit file, if any.
    pub audit: Option<Arc<AuditLog>>,
    store: Store,
    page: Option<ApprovalPage>,
    states: Option<Arc<RequestStates>>,
    /// The approval key: it seals request states and names callers, the same on every
    /// replica that shares it.
    key: Arc<Vec<u8>>,
    /// The longest an execution may run (its deadline): with the approval timeout, how long
    /// a write's claim may last before it counts as maybe sent.
    longest_run: Duration,
}

impl Approvals {
    /// Approvals under `rules`, kept in `state`; `key` (at least 32 bytes, see
    /// [`Approvals::key_or_random`]) seals request states and names callers alike on every
    /// replica that shares it.
    pub fn new(
        rules: Arc<Rules>,
        timeout: Duration,
        audit: Option<Arc<AuditLog>>,
        key: Vec<u8>,
        state: StateStore,
    ) -> Result<Self, String> {
        let states = RequestStates::new(&key, GRANT_LIFETIME)?;
        Ok(Self {
            rules,
            timeout,
            audit,
            store: Store::new(state),
            page: None,
            states: Some(Arc::new(states)),
            key: Arc::new(key),
            longest_run: DEFAULT_LONGEST_RUN,
        })
    }

    /// Executions run at most `deadline` (the provider's `timeout_ms`).
    pub fn with_longest_run(mut self, deadline: Duration) -> Self {
        self.longest_run = deadline;
        self
    }

    /// These approvals for executions that run up to `limit` (tasks): the humans they ask
    /// have `limit` for all their decisions together (so an execution lasts at most twice
    /// `limit`: running, and waiting), and a write's claim lasts as long. Everything else is
    /// shared.
    pub fn for_longer_runs(&self, limit: Duration) -> Self {
        let mut longer = self.clone();
        longer.timeout = limit;
        longer.longest_run = longer.longest_run.max(limit);
        longer
    }

    /// Approvals of this process alone (kept in memory), sealed with `key` or a random key.
    pub fn local(
        rules: Arc<Rules>,
        timeout: Duration,
        audit: Option<Arc<AuditLog>>,
        key: Option<Vec<u8>>,
    ) -> Result<Self, String> {
        let key = Self::key_or_random(key)?;
        let state = StateStore::memory(&crate::state::namespace(&key));
        Self::new(rules, timeout, audit, key, state)
    }

    /// `key`, else a random key of this process's own.
    pub fn key_or_random(key: Option<Vec<u8>>) -> Result<Vec<u8>, String> {
        match key {
            Some(key) => Ok(key),
            None => Ok(random_hex(32)
                .ok_or("no randomness for the approval key")?
                .into_bytes()),
        }
    }

    /// Approvals with no channel outside an execution (no page, no request states).
    fn bare(rules: Arc<Rules>, timeout: Duration, audit: Option<Arc<AuditLog>>) -> Self {
        Self {
            rules,
            timeout,
            audit,
            store: Store::new(StateStore::memory("bare")),
            page: None,
            states: None,
            key: Arc::new(Vec::new()),
            longest_run: DEFAULT_LONGEST_RUN,
        }
    }

    /// Starts the loopback approval page on `addr`, for clients that cannot ask their user.
    pub async fn with_page(mut self, addr: std::net::SocketAddr) -> std::io::Result<Self> {
        self.page = Some(ApprovalPage::start(addr, self.store.clone()).await?);
        Ok(self)
    }

    /// Serves the approval page on the HTTP server itself, at the public `origin` humans
    /// reach it by (any replica answers any question).
    pub fn with_public_page(mut self, origin: &url::Url) -> Result<Self, String> {
        self.page = Some(ApprovalPage::public(origin, self.store.clone())?);
        Ok(self)
    }

    /// The state store approvals are kept in.
    pub fn state(&self) -> &StateStore {
        self.store.state()
    }

    /// The approval page, if there is one.
    pub fn page(&self) -> Option<&ApprovalPage> {
        self.page.as_ref()
    }

    /// The caller egress acting as `provider` (its keyed identity, see
    /// `Egress::keyed_identity` with [`Approvals::key`]), in MCP session `session`, signed in
    /// as `subject`.
    pub fn caller(&self, provider: u64, session: Option<&str>, subject: Option<&str>) -> Caller {
        Caller::new(
            &self.key,
            CallerParts {
                provider,
                session,
                subject,
            },
        )
    }

    /// Forgets what an MCP session its client closed left waiting: its undecided questions
    /// on the page and its chains. Nothing can continue them (their caller was the session),
    /// and they would hold their principal's room until they expired. How many went.
    pub async fn forget_session(&self, session: &str) -> Result<usize, StateError> {
        let digest = caller::session_digest(session);
        let chains = self.store.forget_session(&digest).await?;
        let questions = match &self.page {
            Some(page) => page.forget_session(&digest).await?,
            None => 0,
        };
        Ok(chains + questions)
    }

    /// The approval key, which names who egress acts as alike on every replica.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    fn states(&self) -> Result<&RequestStates, RoundError> {
        self.states.as_deref().ok_or_else(|| {
            RoundError("this server keeps no request states: run the code again without one".into())
        })
    }
}
