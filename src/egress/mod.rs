//! The only way out of the sandbox: every HTTP request a script makes goes through here.
//!
//! Invariants:
//! - a request leaves only for an allowed origin ([`policy`]), also after redirects, and only
//!   to addresses that policy accepts once the host name is resolved ([`resolver`]);
//! - only this module reads the provider secret ([`auth`]); it is injected here, after the
//!   script's own credential headers are dropped, and scrubbed from everything sent back;
//! - each execution gets an [`EgressSession`] that bounds count, size and time, and records
//!   every call in one log: the one place where provider traffic can be observed;
//! - every request meets the execution's [`Checkpoint`] (the approval rules) after its URL
//!   is checked and before anything is sent; egress owns that interface and knows nothing of
//!   what implements it.

mod auth;
mod binary;
mod checkpoint;
mod client;
mod error;
mod overrides;
mod parts;
mod policy;
mod resolver;
mod scrub;
mod session;

pub use auth::{AuthScheme, Credential, Secret};
pub use binary::{Binary, FILE_MARK, FilePart, file_index, holds_file};
pub use checkpoint::{
    Attempt, Checkpoint, Decided, Decision, Dispatch, Note, Outgoing, Pending, Position, Reached,
    Refusal, Rule, Verdict,
};
pub use error::EgressError;
pub use policy::OriginPolicy;
pub use scrub::{REDACTED, Scrubber, UNCHECKED, WITHHELD, WORK_PER_RECEIVED_BYTE};
pub use session::{
    CONSOLE_CHARS, CallRecord, EgressSession, MAX_LOGGED_CALLS, MAX_LOGGED_URL, ScriptRequest,
    ScriptResponse, UNFINISHED, Unencoded, UrlKind, cut, is_write,
};

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use url::Url;

/// Per-execution bounds on network use; defaults suit an agent calling a public API.
#[derive(Debug, Clone)]
pub struct EgressLimits {
    /// Requests one execution may send, retries included.
    pub max_requests: u32,
    /// Largest response body accepted, in bytes.
    pub max_response_bytes: usize,
    /// Response bytes one execution may receive in all, concurrent requests included: what
    /// bounds the supervisor's memory for one execution.
    pub max_total_response_bytes: usize,
    /// Largest request body the script may send, in bytes.
    pub max_request_bytes: usize,
    /// Time one request may take, capped by the execution's own deadline.
    pub request_timeout: Duration,
}

impl Default for EgressLimits {
    fn default() -> Self {
        Self {
            max_requests: 50,
            max_response_bytes: 10 * 1024 * 1024,
            max_total_response_bytes: 64 * 1024 * 1024,
            max_request_bytes: 10 * 1024 * 1024,
            request_timeout: Duration::from_secs(20),
        }
    }
}

/// Everything egress needs to know about one provider, validated once at startup.
#[derive(Debug, Clone)]
pub struct EgressConfig {
    /// Where relative URLs and `api.request` paths point.
    pub base_url: Url,
    /// Origins besides the base URL's that scripts may reach.
    pub extra_origins: Vec<Url>,
    /// Origins where a provider hands out downloads (GitHub's artifacts and release assets
    /// behind a 302, Stripe's invoice PDFs): read (GET, HEAD) by a redirect or the script,
    /// never written to, never sent the credential.
    pub download_origins: Vec<Url>,
    /// The provider credential, if any, and how to present it.
    pub credential: Option<Credential>,
    /// Bounds for each execution.
    pub limits: EgressLimits,
}

/// A handle to the egress bridge, cheap to clone and shared by all executions.
///
/// It owns the HTTP client (and its connection pool) on the long-lived tokio runtime, so
/// the per-execution runtimes only ever hand requests over to it.
#[derive(Clone)]
pub struct Egress {
    inner: Arc<client::Client>,
}

impl Egress {
    /// Builds the bridge; must be called inside the long-lived tokio runtime.
    pub fn new(config: EgressConfig) -> Result<Self, EgressError> {
        Ok(Self {
            inner: Arc::new(client::Client::new(config)?),
        })
    }

    /// The same bridge (credential, connections, scrubber) with `limits` for each execution
    /// in place of its own: for a task's execution, which may run far longer and read far more.
    pub fn with_limits(&self, limits: EgressLimits) -> Self {
        let mut client = (*self.inner).clone();
        client.config.limits = limits;
        Self {
            inner: Arc::new(client),
        }
    }

    /// The bounds of each execution.
    pub fn limits(&self) -> &EgressLimits {
        self.inner.limits()
    }

    /// Opens the budget and call log of one execution, whose requests `checkpoint` decides
    /// about. Requests in flight end with `ended` (the run's end), but a write that has left
    /// ends only with `stopped` (the call's: a cancellation, the server stopping) or the
    /// deadline, so that what became of it is known and recorded; `ended` is a child of
    /// `stopped`.
    pub fn session(
        &self,
        checkpoint: Arc<dyn Checkpoint>,
        deadline: crate::deadline::Deadline,
        ended: CancellationToken,
        stopped: CancellationToken,
    ) -> EgressSession {
        EgressSession::new(self.inner.clone(), checkpoint, deadline, ended, stopped)
    }

    /// The base URL, for rules that need one.
    pub fn base_url(&self) -> &Url {
        &self.inner.config.base_url
    }

    /// Removes the secret from text bound for the script or its caller.
    pub fn scrubber(&self) -> &Scrubber {
        self.inner.scrubber()
    }

    /// The origins scripts may reach, for error messages and docs.
    pub fn policy(&self) -> &OriginPolicy {
        self.inner.policy()
    }

    /// Who this egress acts as: equal for egress with the same base URL and credential,
    /// different otherwise. A number, not the secret (a keyed hash, with a key of this
    /// process's own), so the pool can keep one caller's worker from serving another.
    pub fn identity(&self) -> u64 {
        self.inner.identity()
    }

    /// Who this egress acts as, keyed with `key` rather than this process's own key: equal
    /// across the replicas that share it, so an approval state sealed by one opens on another.
    pub fn keyed_identity(&self, key: &[u8]) -> u64 {
        self.inner.keyed_identity(key)
    }
}
