//! What happens to a request the gate let through: each attempt goes to the audit file, and a
//! write of a chain is settled in its journal with what became of it (a response, or an
//! outcome nobody knows), so that no later run of the chain sends it again.

use std::sync::Arc;

use super::audit::{self, AuditLog, Subject};
use super::chain::Claimed;
use super::journal::Fate;
use crate::egress::{Attempt, Dispatch, Pending, Reached, ScriptResponse};
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

/// Follows one request let through.
pub struct Follow {
    /// Counts it among its gate's followed requests until its last audit line is written.
    following: TaskTracker,
    _followed: TaskTrackerToken,
    audit: Option<(Arc<AuditLog>, Subject)>,
    claimed: Option<Claimed>,
    /// The attempt that left and has not ended, if one has.
    in_flight: Option<u32>,
    /// Whether any attempt reached, or may have reached, the provider, and the last error.
    reached: bool,
    last_error: Option<String>,
    /// Where the gate learns that the write left, and which write it is.
    left: Left,
}

/// The set of writes of a run whose first attempt left, and this one's place in it.
pub type Left = (
    Arc<std::sync::Mutex<std::collections::HashSet<(super::ask::Fingerprint, u32)>>>,
    (super::ask::Fingerprint, u32),
);

impl Follow {
    /// Follows a request written to `audit` (if any) and claimed in a journal (if any),
    /// counted in `following` until its last audit line is written; its first attempt
    /// leaving is noted in `left`.
    pub fn new(
        audit: Option<(Arc<AuditLog>, Subject)>,
        claimed: Option<Claimed>,
        following: TaskTracker,
        left: Left,
    ) -> Self {
        Self {
            _followed: following.token(),
            following,
            audit,
            claimed,
            in_flight: None,
            reached: false,
            last_error: None,
            left,
        }
    }
}

impl Dispatch for Follow {
    fn before(&mut self, number: u32) -> Pending<'_, Result<(), String>> {
        Box::pin(async move {
            if number > 1
                && let Some((log, subject)) = &self.audit
            {
                audit::retry(log.clone(), subject, number)
                    .await
                    .map_err(|error| {
                        format!(
                            "the retry was not sent: the audit file cannot be written ({error})"
                        )
                    })?;
            }
            if number == 1 {
                let (set, this) = &self.left;
                crate::lock::lock(set).insert(this.clone());
                if let Some(claimed) = &self.claimed {
                    claimed.leaving().await;
                }
            }
            self.in_flight = Some(number);
            Ok(())
        })
    }

    fn after(&mut self, attempt: Attempt) -> Pending<'_, ()> {
        Box::pin(async move {
            self.in_flight = None;
            metrics::counter!("sdkbox_write_attempts_total", "reached" => attempt.reached.as_str())
                .increment(1);
            self.reached |= attempt.reached != Reached::No;
            self.last_error.clone_from(&attempt.error);
            if let Some((log, subject)) = &self.audit {
                audit::attempt(log.clone(), subject, &attempt).await;
            }
        })
    }

    fn delivered<'a>(&'a mut self, response: &'a ScriptResponse) -> Pending<'a, ()> {
        Box::pin(async move {
            if let Some(claimed) = self.claimed.take() {
                claimed.settle(Some(Fate::Answered(response.clone()))).await;
            }
        })
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        if let (Some(number), Some((log, subject))) = (self.in_flight, &self.audit) {
            audit::attempt_cut_short(log.clone(), subject.clone(), number, &self.following);
        }
        let Some(claimed) = self.claimed.take() else {
            return;
        };
        // No response came: a write that left, or may have, is never sent again by the chain;
        // one that certainly did not leave may be sent by a later run.
        let fate = (self.reached || self.in_flight.is_some()).then(|| {
            let why = match (&self.last_error, self.in_flight) {
                (_, Some(_)) => "the execution ended while it was in flight".to_owned(),
                (Some(error), None) => error.clone(),
                (None, None) => "no response came back".to_owned(),
            };
            Fate::Unknown(why)
        });
        claimed.settle_later(fate);
    }
}
