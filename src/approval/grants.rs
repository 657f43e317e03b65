//! Approvals given outside an execution (on the approval page), waiting for the re-run they
//! are for: each bound to the code's digest, single use, expiring.

use crate::lock::lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use std::collections::HashMap;

use super::ask::Fingerprint;
use super::journal::Journal;

/// How long an approval waits for its re-run.
pub const GRANT_LIFETIME: Duration = Duration::from_secs(600);

/// Grants kept at most; the oldest go first.
const MAX_GRANTS: usize = 1_000;

/// Journals kept at most (each holds at most 256 KiB of responses); the oldest go first.
const MAX_JOURNALS: usize = 64;

/// What a grant lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Granted {
    /// Exactly this request, once.
    One(Fingerprint),
    /// Every write of the next execution of the code.
    All,
    /// Nothing: the human denied this request.
    Denied(Fingerprint),
}

#[derive(Debug)]
struct Grant {
    code: String,
    granted: Granted,
    by: String,
    expires: Instant,
}

/// The grants of one server, and the journals of runs that wait for one; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    grants: Arc<Mutex<Vec<Grant>>>,
    journals: Arc<Mutex<HashMap<String, (Journal, Instant)>>>,
}

/// What the store knows about one request of one code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Approved, by this; the grant is used up.
    Approved(String),
    /// Every write of this execution is approved, by this; the grant is used up.
    ApprovedAll(String),
    /// Denied, by this; the denial is used up too, so asking again is possible.
    Denied(String),
    /// Nothing decided.
    Open,
}

impl Grants {
    /// Records a decision about `code`.
    pub fn give(&self, code: &str, granted: Granted, by: &str) {
        let mut grants = lock(&self.grants);
        let now = Instant::now();
        grants.retain(|g| g.expires > now);
        if grants.len() >= MAX_GRANTS {
            grants.remove(0);
        }
        grants.push(Grant {
            code: code.to_owned(),
            granted,
            by: by.to_owned(),
            expires: now + GRANT_LIFETIME,
        });
    }

    /// Keeps the writes a run of `code` sent, for its re-run once a decision is given.
    pub fn keep_journal(&self, code: &str, journal: Journal) {
        let mut journals = lock(&self.journals);
        let now = Instant::now();
        journals.retain(|_, (_, expires)| *expires > now);
        if journals.len() >= MAX_JOURNALS
            && let Some(oldest) = journals
                .iter()
                .min_by_key(|(_, (_, expires))| *expires)
                .map(|(code, _)| code.clone())
        {
            journals.remove(&oldest);
        }
        if !journal.is_empty() {
            journals.insert(code.to_owned(), (journal, now + GRANT_LIFETIME));
        }
    }

    /// Takes the writes earlier runs of `code` sent.
    pub fn take_journal(&self, code: &str) -> Journal {
        let mut journals = lock(&self.journals);
        let now = Instant::now();
        match journals.remove(code) {
            Some((journal, expires)) if expires > now => journal,
            _ => Journal::default(),
        }
    }

    /// Takes the decision about this request of `code`, if there is one.
    pub fn take(&self, code: &str, fingerprint: &Fingerprint) -> Standing {
        let mut grants = lock(&self.grants);
        let now = Instant::now();
        grants.retain(|g| g.expires > now);
        // A denial of this request wins over any approval, "every write" included.
        let denied =
            |g: &Grant| g.code == code && g.granted == Granted::Denied(fingerprint.clone());
        let approved = |g: &Grant| {
            g.code == code
                && match &g.granted {
                    Granted::One(f) => f == fingerprint,
                    Granted::All => true,
                    Granted::Denied(_) => false,
                }
        };
        let found = grants
            .iter()
            .position(denied)
            .or_else(|| grants.iter().position(approved));
        let Some(at) = found else {
            return Standing::Open;
        };
        let grant = grants.remove(at);
        match grant.granted {
            Granted::One(_) => Standing::Approved(grant.by),
            Granted::All => Standing::ApprovedAll(grant.by),
            Granted::Denied(_) => Standing::Denied(grant.by),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_grant_is_for_one_code_one_request_once_and_expires() {
        let grants = Grants::default();
        let write = Fingerprint("w".into());
        grants.give("code", Granted::One(write.clone()), "the user");
        assert_eq!(grants.take("other code", &write), Standing::Open);
        assert_eq!(
            grants.take("code", &Fingerprint("x".into())),
            Standing::Open
        );
        assert_eq!(
            grants.take("code", &write),
            Standing::Approved("the user".into())
        );
        assert_eq!(grants.take("code", &write), Standing::Open);
        grants.give("code", Granted::All, "the user");
        tokio::time::advance(GRANT_LIFETIME + Duration::from_secs(1)).await;
        assert_eq!(grants.take("code", &write), Standing::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn a_denial_wins_over_approving_every_write() {
        let grants = Grants::default();
        let harmful = Fingerprint("harmful".into());
        grants.give("code", Granted::All, "the user");
        grants.give("code", Granted::Denied(harmful.clone()), "the user");
        assert_eq!(
            grants.take("code", &harmful),
            Standing::Denied("the user".into())
        );
        let benign = Fingerprint("benign".into());
        assert_eq!(
            grants.take("code", &benign),
            Standing::ApprovedAll("the user".into())
        );
    }
}
