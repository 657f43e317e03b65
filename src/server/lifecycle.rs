//! How an HTTP server ends without failing the calls it is running (a rolling update): on
//! the first SIGTERM it *drains*: readiness fails at once, so the balancer stops sending it
//! work; for a short delay it still serves whatever arrives (the balancer has not noticed
//! yet); then it refuses new calls (503 with `Retry-After`) while the calls in flight run to
//! their end, up to a grace period. Past the grace, the calls still running are cancelled
//! (each ends as `cancelled`, its writes in flight recorded as maybe sent), and the server
//! stops. Answers to questions it asked (elicitation) are still taken while it drains.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long the calls still running after the grace have to end once cancelled.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// An HTTP server's life: serving, draining, stopping, stopped. Clones share it.
#[derive(Clone, Default)]
pub struct Lifecycle {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    draining: CancellationToken,
    refusing: AtomicBool,
    /// Cancels the calls still running once the grace is over.
    stopping: CancellationToken,
    /// Ends the server: the listener, the connections, rmcp's sessions.
    stopped: CancellationToken,
    calls: AtomicUsize,
    idle: Notify,
}

/// One call in flight, counted until dropped.
pub struct InFlight {
    inner: Arc<Inner>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.inner.calls.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.inner.idle.notify_waiters();
        }
    }
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("draining", &self.draining())
            .field("calls", &self.calls())
            .finish()
    }
}

impl Lifecycle {
    /// A server that serves.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts draining (the first SIGTERM).
    pub fn drain(&self) {
        self.inner.draining.cancel();
    }

    /// Stops at once (a second signal, or the end of the grace).
    pub fn stop(&self) {
        self.inner.stopping.cancel();
        self.inner.stopped.cancel();
    }

    /// Whether the server is draining (not ready).
    pub fn draining(&self) -> bool {
        self.inner.draining.is_cancelled()
    }

    /// Whether new calls are refused.
    pub fn refusing(&self) -> bool {
        self.inner.refusing.load(Ordering::SeqCst)
    }

    /// Cancelled once the calls still running must end.
    pub fn stopping(&self) -> &CancellationToken {
        &self.inner.stopping
    }

    /// Cancelled once the server has stopped.
    pub fn stopped(&self) -> &CancellationToken {
        &self.inner.stopped
    }

    /// Counts a call in flight until the guard is dropped.
    pub fn call(&self) -> InFlight {
        self.inner.calls.fetch_add(1, Ordering::SeqCst);
        InFlight {
            inner: self.inner.clone(),
        }
    }

    /// Calls in flight now.
    pub fn calls(&self) -> usize {
        self.inner.calls.load(Ordering::SeqCst)
    }

    async fn no_calls(&self) {
        loop {
            let idle = self.inner.idle.notified();
            if self.calls() == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Runs the server's end once it drains: `delay` serving as usual, then refusing new
    /// calls until those in flight end or `grace` (from the start of the drain) is over, then
    /// cancelling those left; returns once the server has stopped.
    pub async fn run(&self, delay: Duration, grace: Duration) {
        self.inner.draining.cancelled().await;
        let started = tokio::time::Instant::now();
        tracing::info!(
            calls = self.calls(),
            grace_s = grace.as_secs(),
            "draining: not ready; the calls in flight run to their end"
        );
        tokio::select! {
            _ = tokio::time::sleep(delay.min(grace)) => {}
            _ = self.inner.stopped.cancelled() => return,
        }
        self.inner.refusing.store(true, Ordering::SeqCst);
        let left = grace.saturating_sub(started.elapsed());
        let finished = tokio::select! {
            done = tokio::time::timeout(left, self.no_calls()) => done.is_ok(),
            _ = self.inner.stopped.cancelled() => return,
        };
        if !finished {
            tracing::warn!(
                calls = self.calls(),
                "the grace period is over: the calls still running are cancelled"
            );
            self.inner.stopping.cancel();
            let _ = tokio::time::timeout(CANCEL_WAIT, self.no_calls()).await;
        }
        // The last results leave on their connections before these close.
        tokio::time::sleep(Duration::from_millis(200)).await;
        tracing::info!("drained; stopping");
        self.stop();
    }
}

/// Refuses new work once the server refuses it (503 with `Retry-After`: another replica
/// takes it): a JSON-RPC request, a new event stream. Answers to the server's own questions
/// and notifications still go through: calls in flight wait for them; so do `tasks/get`,
/// `tasks/update` and `tasks/cancel`.
pub async fn refuse_new_calls(
    axum::extract::State(lifecycle): axum::extract::State<Lifecycle>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::Method;
    if !lifecycle.refusing() {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    // Tasks' own methods still go through: the drain waits for the tasks running here, and
    // with the memory store only this process can say how they ended.
    let task_method = |method: Option<&serde_json::Value>| {
        method
            .and_then(serde_json::Value::as_str)
            .is_some_and(|m| matches!(m, "tasks/get" | "tasks/update" | "tasks/cancel"))
    };
    let new_work = match parts.method {
        Method::GET => true,
        Method::POST => serde_json::from_slice::<serde_json::Value>(&bytes).is_ok_and(|message| {
            message.get("method").is_some()
                && message.get("id").is_some()
                && !task_method(message.get("method"))
        }),
        _ => false,
    };
    if !new_work {
        let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
        return next.run(request).await;
    }
    metrics::counter!("sdkbox_refused_total", "why" => "draining").increment(1);
    super::listen::retry_later("this server is shutting down; retry, another one will answer\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn calls_in_flight_end_within_the_grace_and_the_rest_are_cancelled() {
        let life = Lifecycle::new();
        let quick = life.call();
        let slow = life.call();
        let ending = tokio::spawn({
            let life = life.clone();
            async move {
                life.run(Duration::from_secs(3), Duration::from_secs(30))
                    .await
            }
        });
        life.drain();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            life.draining() && !life.refusing(),
            "serving through the delay"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(life.refusing());
        drop(quick);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(
            !life.stopping().is_cancelled(),
            "a call is still within the grace"
        );
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(life.stopping().is_cancelled(), "the grace is over");
        drop(slow);
        ending.await.unwrap();
        assert!(life.stopped().is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_without_calls_stops_after_the_delay() {
        let life = Lifecycle::new();
        life.drain();
        let started = tokio::time::Instant::now();
        life.run(Duration::from_secs(3), Duration::from_secs(30))
            .await;
        assert!(started.elapsed() < Duration::from_secs(4));
        assert!(
            started.elapsed() >= Duration::from_secs(3),
            "served through the delay"
        );
        assert!(!life.stopping().is_cancelled() || life.stopped().is_cancelled());
        assert!(life.stopped().is_cancelled());
    }
}
