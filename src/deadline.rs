//! An execution's deadline, which stops while a human decides about one of its requests: a
//! script is not charged for the time a person takes to click Approve.
//!
//! The supervisor holds it while an approval waits; every watcher of the deadline (the
//! isolate's watchdog, the worker's kill timer, egress's request timeouts) sees the pause,
//! and a worker process follows the supervisor's deadline through the socket.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Where a deadline stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Running: it is reached at this instant.
    Running(Instant),
    /// Stopped by `holds` holds, with this much time left.
    Held { left: Duration, holds: u32 },
}

/// An execution's deadline; clones share it.
#[derive(Debug, Clone)]
pub struct Deadline {
    phase: Arc<watch::Sender<Phase>>,
}

/// Stops a deadline until it is dropped; holds nest.
#[must_use = "the deadline runs again as soon as the hold is dropped"]
pub struct Hold {
    deadline: Deadline,
}

impl Deadline {
    /// A deadline reached at `at`.
    pub fn at(at: Instant) -> Self {
        Self {
            phase: Arc::new(watch::Sender::new(Phase::Running(at))),
        }
    }

    /// A deadline `left` from now.
    pub fn after(left: Duration) -> Self {
        Self::at(Instant::now() + left)
    }

    /// Time left; while held, the time that will be left when it runs again.
    pub fn left(&self) -> Duration {
        match *self.phase.borrow() {
            Phase::Running(at) => at.saturating_duration_since(Instant::now()),
            Phase::Held { left, .. } => left,
        }
    }

    /// Time left while running; `None` while held. What a worker is told to follow.
    pub fn running(&self) -> Option<Duration> {
        match *self.phase.borrow() {
            Phase::Running(at) => Some(at.saturating_duration_since(Instant::now())),
            Phase::Held { .. } => None,
        }
    }

    /// Stops the deadline until the returned hold is dropped.
    pub fn hold(&self) -> Hold {
        self.phase.send_modify(|phase| {
            *phase = match *phase {
                Phase::Running(at) => Phase::Held {
                    left: at.saturating_duration_since(Instant::now()),
                    holds: 1,
                },
                Phase::Held { left, holds } => Phase::Held {
                    left,
                    holds: holds + 1,
                },
            }
        });
        Hold {
            deadline: self.clone(),
        }
    }

    /// Follows another process's deadline: running with `running` left, or held.
    pub fn follow(&self, running: Option<Duration>) {
        self.phase.send_replace(match running {
            Some(left) => Phase::Running(Instant::now() + left),
            None => Phase::Held {
                left: self.left(),
                holds: 1,
            },
        });
    }

    /// Resolves when the deadline, plus `grace`, is reached; never while it is held.
    pub async fn reached(&self, grace: Duration) {
        let mut phase = self.phase.subscribe();
        loop {
            let now = *phase.borrow_and_update();
            match now {
                Phase::Running(at) => tokio::select! {
                    _ = tokio::time::sleep_until(at + grace) => return,
                    changed = phase.changed() => if changed.is_err() { return },
                },
                Phase::Held { .. } => {
                    if phase.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// Resolves when the deadline goes from running to held or back, against `held`, what
    /// the follower was last told (updated): with the time left, or `None` when held.
    pub async fn changed(&self, held: &mut bool) -> Option<Duration> {
        let mut phase = self.phase.subscribe();
        loop {
            let running = self.running();
            if running.is_none() != *held {
                *held = running.is_none();
                return running;
            }
            if phase.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.deadline.phase.send_modify(|phase| {
            if let Phase::Held { left, holds } = *phase {
                *phase = if holds <= 1 {
                    Phase::Running(Instant::now() + left)
                } else {
                    Phase::Held {
                        left,
                        holds: holds - 1,
                    }
                };
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_held_deadline_is_not_reached_and_keeps_its_time() {
        let deadline = Deadline::after(Duration::from_secs(1));
        let hold = deadline.hold();
        let second = deadline.hold();
        let reached =
            tokio::time::timeout(Duration::from_secs(5), deadline.reached(Duration::ZERO));
        assert!(reached.await.is_err(), "reached while held");
        drop(second);
        assert_eq!(deadline.running(), None, "one hold is still there");
        drop(hold);
        assert_eq!(deadline.left(), Duration::from_secs(1));
        let started = Instant::now();
        deadline.reached(Duration::ZERO).await;
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_sees_each_change_once() {
        let deadline = Deadline::after(Duration::from_secs(3));
        let mut held = false;
        let hold = deadline.hold();
        assert_eq!(deadline.changed(&mut held).await, None);
        assert!(held);
        drop(hold);
        assert!(deadline.changed(&mut held).await.is_some());
        let unchanged = tokio::time::timeout(Duration::from_secs(1), deadline.changed(&mut held));
        assert!(unchanged.await.is_err(), "no change, nothing to tell");
        let follower = Deadline::after(Duration::from_secs(3));
        follower.follow(None);
        let waited = tokio::time::timeout(Duration::from_secs(9), follower.reached(Duration::ZERO));
        assert!(waited.await.is_err());
        follower.follow(Some(Duration::from_secs(1)));
        follower.reached(Duration::ZERO).await;
    }
}
