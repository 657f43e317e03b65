//! MCP sessions over HTTP, bounded: rmcp's `LocalSessionManager` with an idle timeout (a
//! session nobody uses expires) and a cap on how many live at once. A new session past the
//! cap evicts the session idle the longest (no request in flight); when every session is
//! busy, it is refused, and the HTTP layer answers 503 with `Retry-After` before rmcp is
//! asked (see [`BoundedSessions::room`]). With a shared state store, sessions are served by
//! any replica (see `shared_sessions.rs`): a session evicted here, or opened on another
//! replica, is restored from the store when a request of it arrives.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId,
};
use tokio::time::Instant;

use super::shared_sessions::{self, Delivery, Route, Tagged, Tags};
use crate::fair::Principal;
use crate::lock::lock;
use crate::state::StateStore;

/// Letters from other replicas delivered to this one's sessions at once, at most.
const MAX_DELIVERIES: usize = 256;

tokio::task_local! {
    /// Who opens the session being made: set around the `initialize` request (see
    /// `http.rs`), read when rmcp asks for the session.
    pub static OPENER: Principal;
}

/// What one session is doing.
struct Activity {
    /// Who opened it, when known (not for a session restored from another replica).
    owner: Option<Principal>,
    /// When it last began or ended a request.
    last: Instant,
    /// Requests it has in flight.
    in_flight: usize,
    /// When its records in the store were last kept alive (see [`BoundedSessions::keep`]).
    kept: Option<Instant>,
}

/// A session's records in the store are kept alive at most once per this share of its idle
/// time, and then for its idle time and this share more: they outlive its last request by
/// its idle time at least, for a store operation a few minutes instead of one a request.
const KEEP_EVERY: u32 = 10;

/// Sessions, at most `max` at once and `per_caller` of one principal.
pub struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
    per_caller: usize,
    activity: std::sync::Arc<Mutex<HashMap<SessionId, Activity>>>,
    /// Held while a session is made: two made at once would pick the same session to evict
    /// and keep one more than the cap.
    creating: tokio::sync::Mutex<()>,
    /// The state store, through which other replicas' sessions reach this one's.
    state: StateStore,
    tags: Tags,
    /// How long a session lives unused, in the store as here.
    idle: Duration,
}

/// Why a session could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// rmcp's session manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// Every session is busy and the cap is reached.
    #[error("the server has as many sessions as it keeps, all of them busy; retry shortly")]
    Full,
    /// A message for another replica could not be sent there.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

impl BoundedSessions {
    /// At most `max` sessions here, `per_caller` of one principal; one unused for `idle`
    /// expires; other replicas' messages come through `state`.
    pub fn new(max: usize, per_caller: usize, idle: Duration, state: StateStore) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        Self {
            inner,
            max: max.max(1),
            per_caller: per_caller.max(1),
            activity: std::sync::Arc::default(),
            creating: tokio::sync::Mutex::new(()),
            tags: Tags::new(state.replica()),
            state,
            idle,
        }
    }

    /// Hands this replica's sessions the messages other replicas forward, and closes those
    /// their clients deleted elsewhere, for as long as the server runs.
    pub async fn listen(self: std::sync::Arc<Self>) {
        use futures_util::StreamExt;
        let deliveries = shared_sessions::deliveries(&self.state);
        futures_util::pin_mut!(deliveries);
        // Each on its own task, a bounded number at once: a session slow to take its message
        // holds up no other, and a flood of letters waits here instead of piling up.
        let at_once = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_DELIVERIES));
        while let Some(delivery) = deliveries.next().await {
            let Ok(permit) = at_once.clone().acquire_owned().await else {
                return;
            };
            let sessions = self.clone();
            tokio::spawn(async move {
                let _permit = permit;
                match delivery {
                    Delivery::Message(id, message) => {
                        if sessions.inner.has_session(&id).await.unwrap_or(false) {
                            metrics::counter!("sdkbox_forwarded_total", "way" => "in").increment(1);
                            if let Err(error) = sessions.inner.accept_message(&id, *message).await {
                                tracing::debug!(%error, "a forwarded message found its session gone");
                            }
                        }
                    }
                    Delivery::Close(id) => {
                        if sessions.inner.has_session(&id).await.unwrap_or(false) {
                            let _ = sessions.close_session(&id).await;
                        }
                    }
                }
            });
        }
    }

    /// Makes room for one more session of `owner` here: past its own cap, its session idle
    /// the longest goes; past the server's, the one idle the longest of the principal with
    /// the most sessions (so one that opens many pushes out its own, not the others').
    async fn make_room(&self, owner: Option<&Principal>) -> Result<(), SessionsError> {
        if let Some(oldest) = self.to_evict(owner)? {
            tracing::info!(session = %oldest, "a session cap is reached: a session idle the longest is closed");
            self.close_session(&oldest).await?;
        }
        Ok(())
    }

    fn track(&self, id: &SessionId, owner: Option<Principal>) {
        lock(&self.activity).insert(
            id.clone(),
            Activity {
                owner,
                last: Instant::now(),
                in_flight: 0,
                kept: None,
            },
        );
    }

    /// Keeps a session's records alive in the store (who opened it, and its `initialize` and
    /// its place among the sessions counted, for other replicas): it was used. Done once per
    /// [`KEEP_EVERY`]th of the idle time at most.
    async fn keep(&self, id: &SessionId) {
        let now = Instant::now();
        let every = self.idle / KEEP_EVERY;
        let due = lock(&self.activity)
            .get(id)
            .is_none_or(|a| a.kept.is_none_or(|kept| now - kept >= every));
        if !due {
            return;
        }
        let ttl = self.idle + every;
        let mut kept = self
            .state
            .expire(&shared_sessions::owner_key(id), ttl)
            .await
            .map(|_| ());
        if self.state.shared() && kept.is_ok() {
            kept = shared_sessions::keep(&self.state, id, ttl).await;
        }
        match kept {
            Ok(()) => {
                if let Some(activity) = lock(&self.activity).get_mut(id) {
                    activity.kept = Some(now);
                }
            }
            Err(error) => tracing::warn!(%error, "a session's record could not be kept alive"),
        }
    }

    /// Whether a new session of `owner` can be made now: below the caps, or with an idle
    /// one to evict.
    pub fn room(&self, owner: &Principal) -> bool {
        let activity = lock(&self.activity);
        let own = activity
            .values()
            .filter(|a| a.owner.as_ref() == Some(owner));
        let (count, idle) = own.fold((0, false), |(n, idle), a| (n + 1, idle || a.in_flight == 0));
        if count >= self.per_caller {
            return idle;
        }
        activity.len() < self.max || activity.values().any(|a| a.in_flight == 0)
    }

    /// The session to close for one more of `owner`: its own idle the longest past its cap;
    /// past the server's cap, the idle one of the principal with the most sessions, idle the
    /// longest; none below both.
    fn to_evict(&self, owner: Option<&Principal>) -> Result<Option<SessionId>, SessionsError> {
        let activity = lock(&self.activity);
        let mut counts: HashMap<Option<&Principal>, usize> = HashMap::new();
        for a in activity.values() {
            *counts.entry(a.owner.as_ref()).or_default() += 1;
        }
        let idle = activity.iter().filter(|(_, a)| a.in_flight == 0);
        if let Some(owner) = owner
            && counts.get(&Some(owner)).copied().unwrap_or(0) >= self.per_caller
        {
            return idle
                .filter(|(_, a)| a.owner.as_ref() == Some(owner))
                .min_by_key(|(_, a)| a.last)
                .map(|(id, _)| Some(id.clone()))
                .ok_or(SessionsError::Full);
        }
        if activity.len() < self.max {
            return Ok(None);
        }
        idle.max_by_key(|(_, a)| {
            let held = counts.get(&a.owner.as_ref()).copied().unwrap_or(0);
            (held, std::cmp::Reverse(a.last))
        })
        .map(|(id, _)| Some(id.clone()))
        .ok_or(SessionsError::Full)
    }

    fn touch(&self, id: &SessionId, change: isize) {
        touch(&self.activity, id, change);
    }

    /// A stream that counts as a request in flight of session `id` until it ends.
    fn tracked<S>(&self, id: &SessionId, stream: S) -> Tracked
    where
        S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        self.touch(id, 1);
        Tracked {
            inner: Box::pin(stream),
            id: id.clone(),
            activity: self.activity.clone(),
        }
    }
}

fn touch(activity: &Mutex<HashMap<SessionId, Activity>>, id: &SessionId, change: isize) {
    let mut activity = lock(activity);
    if let Some(entry) = activity.get_mut(id) {
        entry.last = Instant::now();
        entry.in_flight = entry.in_flight.saturating_add_signed(change);
    }
}

/// A response stream of one request: in flight until it is dropped.
pub struct Tracked {
    inner: Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync>>,
    id: SessionId,
    activity: std::sync::Arc<Mutex<HashMap<SessionId, Activity>>>,
}

impl Stream for Tracked {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        touch(&self.activity, &self.id, -1);
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = Tagged<WorkerTransport<LocalSessionWorker>>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _one_at_a_time = self.creating.lock().await;
        let owner = OPENER.try_with(Principal::clone).ok();
        self.make_room(owner.as_ref()).await?;
        let (id, transport) = self.inner.create_session().await?;
        self.track(&id, owner);
        Ok((id, Tagged::new(transport, self.tags.clone())))
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let _one_at_a_time = self.creating.lock().await;
        let owner = OPENER.try_with(Principal::clone).ok();
        self.make_room(owner.as_ref()).await?;
        match self.inner.restore_session(id.clone()).await? {
            RestoreOutcome::Restored(transport) => {
                self.track(&id, owner);
                tracing::debug!(session = %id, "a session of another replica is served here too");
                Ok(RestoreOutcome::Restored(Tagged::new(
                    transport,
                    self.tags.clone(),
                )))
            }
            RestoreOutcome::AlreadyPresent => Ok(RestoreOutcome::AlreadyPresent),
            _ => Ok(RestoreOutcome::NotSupported),
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id, 0);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        lock(&self.activity).remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.keep(id).await;
        let stream = self.inner.create_stream(id, message).await?;
        Ok(self.tracked(id, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id, 0);
        self.keep(id).await;
        match self.tags.route(&message) {
            Route::Here => Ok(self.inner.accept_message(id, message).await?),
            Route::There(replica) => {
                metrics::counter!("sdkbox_forwarded_total", "way" => "out").increment(1);
                Ok(shared_sessions::forward(&self.state, &replica, id, message).await?)
            }
            Route::Everywhere => {
                shared_sessions::broadcast(&self.state, id, message.clone()).await?;
                Ok(self.inner.accept_message(id, message).await?)
            }
        }
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // A standing GET stream is not a request: its session may still be evicted.
        self.touch(id, 0);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id, 0);
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_used_sessions_records_outlive_its_last_request_by_its_idle_time() {
        let idle = Duration::from_secs(100);
        let state = StateStore::memory("t");
        let sessions = BoundedSessions::new(3, 3, idle, state.clone());
        let (id, _transport) = sessions.create_session().await.unwrap();
        let owner = shared_sessions::owner_key(&id);
        state.put(&owner, "someone", idle).await.unwrap();
        // Requests every few seconds renew the records once in a while, not each time.
        for _ in 0..30 {
            sessions.keep(&id).await;
            tokio::time::advance(Duration::from_secs(3)).await;
        }
        sessions.keep(&id).await;
        // 90 s on, with a request just now: alive an idle time from now, gone after.
        tokio::time::advance(idle - Duration::from_secs(1)).await;
        assert!(state.get(&owner).await.unwrap().is_some(), "expired early");
        tokio::time::advance(idle / KEEP_EVERY + Duration::from_secs(2)).await;
        assert!(state.get(&owner).await.unwrap().is_none(), "kept too long");
        // Renewed once a while, not at each request: a request soon after a renewal
        // renews nothing.
        state.put(&owner, "someone", idle).await.unwrap();
        sessions.keep(&id).await;
        state
            .put(&owner, "someone", Duration::from_secs(2))
            .await
            .unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        sessions.keep(&id).await;
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(state.get(&owner).await.unwrap().is_none(), "renewed again");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sessions_made_at_once_keep_to_the_cap() {
        let sessions = std::sync::Arc::new(BoundedSessions::new(
            3,
            3,
            Duration::from_secs(600),
            StateStore::memory("t"),
        ));
        for _ in 0..200 {
            let made: Vec<_> = (0..8)
                .map(|_| {
                    let sessions = sessions.clone();
                    tokio::spawn(async move { sessions.create_session().await.map(|_| ()) })
                })
                .collect();
            for task in made {
                let _ = task.await;
            }
            assert!(lock(&sessions.activity).len() <= 3);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_caller_that_opens_many_sessions_pushes_out_its_own_not_the_others() {
        let sessions =
            BoundedSessions::new(4, 2, Duration::from_secs(600), StateStore::memory("t"));
        let quiet = Principal::peer([127, 0, 0, 1].into());
        let noisy = Principal::peer([127, 0, 0, 2].into());
        let open = |who: &Principal| OPENER.scope(who.clone(), sessions.create_session());
        let (quiet_one, _a) = open(&quiet).await.unwrap();
        let (quiet_two, _b) = open(&quiet).await.unwrap();
        let mut kept = Vec::new();
        for _ in 0..50 {
            kept.push(open(&noisy).await.unwrap());
        }
        let held = |who: &Principal| {
            lock(&sessions.activity)
                .values()
                .filter(|a| a.owner.as_ref() == Some(who))
                .count()
        };
        assert_eq!(held(&noisy), 2, "the noisy caller keeps to its share");
        assert!(lock(&sessions.activity).contains_key(&quiet_one));
        assert!(lock(&sessions.activity).contains_key(&quiet_two));
        // Its share busy, the noisy caller gets no room; the quiet one still does.
        let busy: Vec<SessionId> = lock(&sessions.activity)
            .iter()
            .filter(|(_, a)| a.owner.as_ref() == Some(&noisy))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &busy {
            sessions.touch(id, 1);
        }
        assert!(!sessions.room(&noisy));
        assert!(sessions.room(&Principal::peer([127, 0, 0, 3].into())));
    }
}
