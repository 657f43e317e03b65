//! A run's requests held until the server lets them leave: the type check runs while the
//! sandbox starts and the script computes, and the first request that would leave waits for
//! its verdict. A script the check stops has sent nothing.

use tokio::sync::watch;

/// Whether held requests may leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not decided yet: requests wait.
    Waiting,
    /// They may leave.
    Open,
    /// They never leave.
    Stopped,
}

/// Where a run's requests wait. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Hold(watch::Receiver<State>);

/// Decides a [`Hold`]; dropped undecided, it stops the hold (a cancelled check lets
/// nothing out).
#[derive(Debug)]
pub struct Release(watch::Sender<State>);

/// A hold and what decides it.
pub fn hold() -> (Release, Hold) {
    let (sender, receiver) = watch::channel(State::Waiting);
    (Release(sender), Hold(receiver))
}

impl Release {
    /// Lets the held requests, and every later one, leave.
    pub fn open(self) {
        self.0.send_replace(State::Open);
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        // Opened before: the state stays open.
        self.0.send_if_modified(|state| {
            let waiting = *state == State::Waiting;
            if waiting {
                *state = State::Stopped;
            }
            waiting
        });
    }
}

impl Hold {
    /// Whether the verdict is still to come.
    pub fn waiting(&self) -> bool {
        *self.0.borrow() == State::Waiting
    }

    /// Waits until the hold is decided: whether requests may leave.
    pub async fn passed(&self) -> bool {
        let mut receiver = self.0.clone();
        // Closed undecided cannot be (the release decides as it drops): nothing passes.
        receiver
            .wait_for(|state| *state != State::Waiting)
            .await
            .map(|state| *state == State::Open)
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_wait_until_opened_and_then_pass() {
        let (release, hold) = hold();
        let waiting = tokio::spawn({
            let hold = hold.clone();
            async move { hold.passed().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a request left before the verdict");
        release.open();
        assert!(waiting.await.unwrap());
        assert!(
            hold.passed().await,
            "a later request waits for nothing once open"
        );
    }

    #[tokio::test]
    async fn a_release_dropped_undecided_lets_nothing_out() {
        let (release, hold) = hold();
        let waiting = tokio::spawn({
            let hold = hold.clone();
            async move { hold.passed().await }
        });
        tokio::task::yield_now().await;
        drop(release);
        assert!(!waiting.await.unwrap());
        assert!(!hold.passed().await);
    }
}
