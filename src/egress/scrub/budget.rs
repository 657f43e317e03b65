//! What checking one execution's replies for the secret may cost, and when it stops.
//!
//! Every decoding the scrubber looks through is a pass over bytes; a crafted reply can make
//! those passes many (long runs of base64 decoded at every offset, escapes in escapes). Each
//! pass is charged here before it is made, against one allowance per execution, and the
//! allowance is gone the moment the execution ends: a reply still being checked then is
//! dropped, not checked to the end for a script that will never read it. Whatever is not
//! checked is withheld, never handed over unchecked.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio_util::sync::CancellationToken;

/// Bytes of checking allowed for each byte an execution may receive. Replies of the shapes
/// providers send cost 3 to 12 (JSON, HTML, lists, attachments) and 17 for base64 of text
/// full of escapes (a source file from a contents API); see `benches/scrub.rs`. At the
/// slowest rate measured (3.5 ns a byte of work) the default allowance, 1.5 GiB, is under
/// 6 s of one core, however the replies are crafted.
pub const WORK_PER_RECEIVED_BYTE: usize = 24;

/// One execution's allowance. Shared by the clones of its scrubber.
#[derive(Debug)]
pub struct Budget {
    left: AtomicUsize,
    total: usize,
    ended: CancellationToken,
}

impl Budget {
    /// An allowance of `bytes` of checking, gone when `ended` is cancelled.
    pub fn new(bytes: usize, ended: CancellationToken) -> Self {
        Self {
            left: AtomicUsize::new(bytes),
            total: bytes,
            ended,
        }
    }

    /// Takes `bytes` from the allowance; false when it is spent or the execution has ended
    /// (and from then on).
    pub fn take(&self, bytes: usize) -> bool {
        if self.ended.is_cancelled() {
            self.left.store(0, Ordering::Relaxed);
            return false;
        }
        let taken = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(bytes)
            });
        if taken.is_err() {
            self.left.store(0, Ordering::Relaxed);
        }
        taken.is_ok()
    }

    /// Whether checking has stopped: allowance spent or execution ended.
    pub fn spent(&self) -> bool {
        self.ended.is_cancelled() || self.left.load(Ordering::Relaxed) == 0
    }

    /// What has been spent of the allowance.
    pub fn used(&self) -> usize {
        self.total - self.left.load(Ordering::Relaxed)
    }

    /// The whole allowance, for the error that says it is spent.
    pub fn total(&self) -> usize {
        self.total
    }
}

/// The budget a check charges, if any (the outcome's own check and tests have none).
#[derive(Clone, Copy)]
pub(super) struct Meter<'a>(pub Option<&'a Budget>);

impl Meter<'_> {
    /// Takes `bytes`; false when checking must stop.
    pub fn take(self, bytes: usize) -> bool {
        self.0.is_none_or(|budget| budget.take(bytes))
    }

    /// Whether checking has stopped.
    pub fn spent(self) -> bool {
        self.0.is_some_and(Budget::spent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allowance_runs_out_and_stays_out() {
        let budget = Budget::new(10, CancellationToken::new());
        assert!(budget.take(6));
        assert!(!budget.take(6), "4 left, 6 asked");
        assert!(budget.spent());
        assert!(!budget.take(1), "spent stays spent");
    }

    #[test]
    fn an_ended_execution_checks_nothing_more() {
        let ended = CancellationToken::new();
        let budget = Budget::new(1 << 30, ended.clone());
        assert!(budget.take(1));
        ended.cancel();
        assert!(!budget.take(1));
        assert!(budget.spent());
        assert!(Meter(None).take(usize::MAX));
    }
}
