//! Approval rules for dangerous actions. Every request an execution makes is classified in
//! egress, after its URL is resolved and checked and before it leaves: `allow` sends it,
//! `deny` refuses it with a `PolicyError` in the script, `approve` asks a human through the
//! best channel the client has (MCP elicitation, the client's retry of a 2026-07-28 call, the
//! loopback approval page) and refuses it when there is none. Dry runs send no write at
//! all. Every decision about a write is in the call log and, with `--audit-log`, on disk.
//!
//! Invariants:
//! - the rule is found from what egress will send (method, final URL, the operation the
//!   supervisor's SDK matched), never from what the script says about its request;
//! - the model cannot approve: approvals come from a human, through the client or a page
//!   the sandbox cannot reach, and a re-run's write goes out only if it is exactly the
//!   approved one (operation, method, URL, body digest) of the same code;
//! - the execution's deadline stops while a human decides, bounded by the approval timeout.

mod ask;
mod audit;
mod dry_run;
mod gate;
mod grants;
mod journal;
pub mod page;
mod rules;

pub use ask::{Answer, AnswerFuture, Approver, Ask, Fingerprint, Shown, code_digest, random_hex};
pub use audit::AuditLog;
pub use dry_run::Planned;
pub use gate::{Gate, Retry};
pub use grants::{GRANT_LIFETIME, Granted, Grants, Standing};
pub use journal::{Journal, Sent};
pub use rules::{Classified, PolicyFile, PolicyOverrides, Rule, Rules};

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::egress::ScriptResponse;

/// How long a human has to decide, by default.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

/// What was decided about a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The rule allows it.
    Allowed,
    /// A human approved it.
    Approved,
    /// The rule or a human denied it.
    Denied,
    /// A dry run: not sent.
    DryRun,
    /// Sent by an earlier run of the same code: its response is handed back, not sent again.
    Replayed,
    /// Nobody decided within the approval timeout.
    TimedOut,
    /// The decision is asked for outside this execution; run the code again once given.
    AwaitingApproval,
    /// It needs approval and this client offers no way to ask a human.
    NoChannel,
}

impl Verdict {
    /// The name clients see, as serialised.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::DryRun => "dry_run",
            Self::Replayed => "replayed",
            Self::TimedOut => "timed_out",
            Self::AwaitingApproval => "awaiting_approval",
            Self::NoChannel => "no_channel",
        }
    }
}

/// The decision about one request, as the call log and the audit file show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// The rule that applied.
    pub rule: Rule,
    /// What was decided.
    pub decision: Verdict,
    /// Where the rule comes from.
    pub because: String,
    /// Who decided, when a human did (`the user`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Through which channel a human was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
}

/// A request as egress will send it, classified.
pub struct Request<'a> {
    /// The rule found for it.
    pub classified: Classified,
    /// HTTP method.
    pub method: &'a str,
    /// Final URL, query included (secret-free: the credential goes in later).
    pub url: &'a str,
    /// The headers the script or the SDK set (`name: value`; the credential is not one).
    pub headers: &'a [String],
    /// The body.
    pub body: Option<&'a [u8]>,
}

impl Request<'_> {
    /// Its fingerprint: the operation it matched, method, URL, headers and body digest.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(
            self.classified.operation.as_deref(),
            self.method,
            self.url,
            self.headers,
            self.body,
        )
    }

    /// The request as a human or a plan shows it, each part cut to `max` characters.
    pub fn shown(&self, max: usize) -> Shown {
        Shown::new(
            self.classified.operation.clone(),
            self.method,
            self.url,
            self.headers,
            self.body,
            max,
        )
    }
}

/// What egress does with a request.
pub enum Decision {
    /// Send it.
    Send(Note),
    /// Do not send it; hand the script this response: a dry run's placeholder, or what an
    /// earlier run of the same code got for it.
    Answer(Note, ScriptResponse),
    /// Refuse it: the script gets a `PolicyError` with this message.
    Refuse(Note, String),
}

/// Settings every execution's gate shares: the rules, the channels and the trail.
#[derive(Clone)]
pub struct Approvals {
    /// The provider's rules.
    pub rules: Arc<Rules>,
    /// Decisions given on the approval page, and the writes already sent, waiting for
    /// their re-run.
    pub grants: Grants,
    /// How long a human has to decide.
    pub timeout: Duration,
    /// The audit file, if any.
    pub audit: Option<Arc<AuditLog>>,
}
