//! The interface through which egress asks whether a request may leave, and reports what
//! became of it. Egress owns it; the approval rules (`crate::approval`) implement it. Egress
//! calls [`Checkpoint::decide`] for every request that passed its own checks, after the URL is
//! final and before anything is sent, and [`Checkpoint::refused`] for a write its own checks
//! refused; a request let through comes with a [`Dispatch`] that hears of every attempt.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use url::Url;

use super::ScriptResponse;
use super::scrub::Scrubber;
use crate::deadline::Deadline;

/// A boxed future, as the checkpoint's methods return.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What happens to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rule {
    /// Sent.
    Allow,
    /// Sent once a human approves it.
    Approve,
    /// Never sent.
    Deny,
}

impl std::str::FromStr for Rule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "allow" => Ok(Self::Allow),
            "approve" => Ok(Self::Approve),
            "deny" => Ok(Self::Deny),
            other => Err(format!(
                "`{other}` is not a rule: use \"allow\", \"approve\" or \"deny\""
            )),
        }
    }
}

impl Rule {
    /// The name policy files and metrics give it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Approve => "approve",
            Self::Deny => "deny",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    /// Sent by an earlier run of the same code with an idempotency key, unanswered: sent
    /// again with that key, which the provider applies once.
    Resent,
    /// Nobody decided within the approval timeout.
    TimedOut,
    /// The decision is asked for outside this execution; run the code again once given.
    AwaitingApproval,
    /// It needs approval and this client offers no way to ask a human.
    NoChannel,
    /// Egress's own checks refused it before the rules were asked (a bad URL, a method
    /// override, a body too large).
    Refused,
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
            Self::Resent => "resent",
            Self::TimedOut => "timed_out",
            Self::AwaitingApproval => "awaiting_approval",
            Self::NoChannel => "no_channel",
            Self::Refused => "refused",
        }
    }

    /// Whether the request goes out.
    pub const fn sends(self) -> bool {
        matches!(self, Self::Allowed | Self::Approved | Self::Resent)
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

/// A request exactly as egress will send it: method, final URL (query included, no
/// credential), the headers the script or the SDK set, and the body's bytes.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    /// HTTP method, upper case.
    pub method: &'a str,
    /// The final URL.
    pub url: &'a Url,
    /// `name: value`, as sent (the credential is not one of them).
    pub headers: &'a [String],
    /// The body.
    pub body: Option<&'a [u8]>,
    /// Where the script made it, when the gateway said (a redirect's hop has none).
    pub position: Option<&'a Position>,
}

/// Where a request stands among the requests a script made to its operation, in the order
/// it made them (not the order they reach egress, which concurrent requests do not keep).
/// Code that makes its writes without waiting on one another's answers (`Promise.all` over a
/// list) makes them in the same order in every run, so a re-run's write is known by its
/// position even when its bytes changed; writes made after answers that race (a read, then a
/// write, in each callback) may trade places, and are then refused rather than sent twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// Method and operation as the approval rules name it (`POST customers.create`).
    pub slot: String,
    /// Which of the script's requests to the slot it is, from 0.
    pub occurrence: u32,
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

impl Decision {
    /// The note, whatever was decided.
    pub fn note(&self) -> &Note {
        match self {
            Self::Send(note) | Self::Answer(note, _) | Self::Refuse(note, _) => note,
        }
    }
}

/// A decision, the operation the request was classified as, and, for a request let
/// through that the checkpoint follows, the [`Dispatch`] to report its attempts to.
pub struct Decided {
    /// The spec operation the request matched (`customers.create`), if any.
    pub operation: Option<String>,
    /// What to do.
    pub decision: Decision,
    /// Hears of every attempt of a request let through (writes, and reads under a rule).
    pub dispatch: Option<Box<dyn Dispatch>>,
    /// For a write let through to a provider that takes idempotency keys: the header, and
    /// the key this write carries in every attempt and every run of its code (the script's
    /// own, when it sent one). Egress adds it, and may then retry the write safely.
    pub idempotency: Option<(String, String)>,
}

/// A request egress refused itself, before asking the checkpoint.
pub struct Refusal<'a> {
    /// HTTP method, as given.
    pub method: &'a str,
    /// The URL, as far as it was resolved.
    pub url: &'a str,
    /// Why it was refused.
    pub reason: &'a str,
}

/// Whether an attempt reached the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reached {
    /// A response came back.
    Yes,
    /// It failed after it may have left (a timeout, a connection lost, the execution ended):
    /// the provider may have acted on it.
    Unknown,
    /// It never left (the budget was used up, the connection was refused).
    No,
}

impl Reached {
    /// The name logs and metrics give it, as serialised.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Yes => "yes",
            Self::Unknown => "unknown",
            Self::No => "no",
        }
    }
}

/// How one attempt ended.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// 1 for the first attempt, 2 and more for retries.
    pub number: u32,
    /// Whether it reached the provider.
    pub reached: Reached,
    /// The response status, when one came.
    pub status: Option<u16>,
    /// Why it failed, when it did.
    pub error: Option<String>,
}

/// Follows one request that was let through: told before each retry and after each
/// attempt, and of the response the script gets. Dropped without [`Dispatch::delivered`], it
/// knows the request ended without a response (or the execution ended while it was in
/// flight).
pub trait Dispatch: Send + Sync {
    /// Before attempt `number` leaves (2 and more: a retry); an error stops it, unsent.
    fn before(&mut self, number: u32) -> Pending<'_, Result<(), String>>;
    /// After an attempt.
    fn after(&mut self, attempt: Attempt) -> Pending<'_, ()>;
    /// The response the script gets, scrubbed as it gets it (recorded before the script
    /// has it, so a re-run is answered with it).
    fn delivered<'a>(&'a mut self, response: &'a ScriptResponse) -> Pending<'a, ()>;
}

/// Decides about requests before they leave. One per execution.
pub trait Checkpoint: Send + Sync {
    /// Decides about a request that passed egress's checks. It may wait for a human, with
    /// `deadline` held, until `cancel`. What a human or a log is shown passes `scrubber`.
    fn decide<'a>(
        &'a self,
        request: Outgoing<'a>,
        scrubber: &'a Scrubber,
        deadline: &'a Deadline,
        cancel: &'a CancellationToken,
    ) -> Pending<'a, Decided>;

    /// Records a write egress refused before asking (the audit trail has every decision
    /// about a write).
    fn refused<'a>(&'a self, refusal: Refusal<'a>, scrubber: &'a Scrubber) -> Pending<'a, ()>;
}
