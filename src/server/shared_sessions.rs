//! MCP sessions any replica can serve (handshake era, over HTTP). Each session's `initialize`
//! is kept in the state store; a replica that gets a request of a session it does not hold
//! replays that `initialize` (rmcp's session restore), so it knows the client's capabilities
//! (elicitation included). What cannot move is a request the server sent the client from
//! within a call (an elicitation): its answer comes back in a POST the balancer may hand to
//! any replica. So every request a replica sends a client carries that replica's name in its
//! id, and an answer that reaches another replica is forwarded to the named one as a letter
//! through the store; a cancellation reaches every replica, since any may be running the
//! call. A session a client deletes is closed on every replica.

use std::time::Duration;

use futures_util::StreamExt;
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, RequestId};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::{
    SessionId, SessionState, SessionStore, SessionStoreError,
};
use serde::{Deserialize, Serialize};

use crate::state::{StateError, StateStore};

/// Letters about sessions: a client's message for the replica named, and a session closed.
const FORWARDED: &str = "mcp-message";
const CLOSED: &str = "mcp-closed";

/// Sessions kept in the store at most, in all, and the largest `initialize` kept: past
/// either, a new session is served by the replica that opened it only (a warning says so).
/// A client's `initialize` is a few hundred bytes; these hold the store's share of sessions
/// under 80 MB whatever clients send.
const MAX_STORED_SESSIONS: usize = 20_000;
const MAX_STORED_INITIALIZE: usize = 4 * 1024;

/// The store's record of a session.
fn session_key(id: &str) -> String {
    format!("session:{id}")
}

/// Who opened a session (sign-in), kept beside it.
pub fn owner_key(id: &str) -> String {
    format!("session-owner:{id}")
}

/// Sessions' `initialize`, kept in the state store for as long as a session may sit idle.
pub struct SharedSessions {
    state: StateStore,
    idle: Duration,
}

impl SharedSessions {
    /// Sessions in `state`, each kept `idle` after its last request.
    pub fn new(state: StateStore, idle: Duration) -> Self {
        Self { state, idle }
    }
}

#[async_trait::async_trait]
impl SessionStore for SharedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        Ok(self.state.read(&session_key(session_id)).await?)
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let text = serde_json::to_string(state)?;
        if text.len() > MAX_STORED_INITIALIZE {
            return Err(format!(
                "its initialize is {} bytes, over the {MAX_STORED_INITIALIZE} kept",
                text.len()
            )
            .into());
        }
        if !self
            .state
            .admit("sessions", session_id, self.idle, MAX_STORED_SESSIONS)
            .await?
        {
            return Err("the state store keeps as many sessions as it may".into());
        }
        Ok(self
            .state
            .put(&session_key(session_id), &text, self.idle)
            .await?)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.state.take(&session_key(session_id)).await?;
        self.state.take(&owner_key(session_id)).await?;
        self.state.dismiss("sessions", session_id).await?;
        self.state.send_to_others(CLOSED, session_id).await?;
        Ok(())
    }
}

/// Keeps session `id`'s `initialize` in the store, and its place among the sessions counted,
/// for `ttl` more (it was used), if it is kept there.
pub async fn keep(state: &StateStore, id: &str, ttl: Duration) -> Result<(), StateError> {
    if state.expire(&session_key(id), ttl).await? {
        state.admit("sessions", id, ttl, usize::MAX).await?;
    }
    Ok(())
}

/// A client's message forwarded to the replica that waits for it.
#[derive(Serialize, Deserialize)]
struct Forwarded {
    session: String,
    message: ClientJsonRpcMessage,
}

/// Where a client's message goes.
pub enum Route {
    /// To this replica's session.
    Here,
    /// To the replica named: it sent the request this answers.
    There(String),
    /// To this replica's session and every other replica's (a cancellation).
    Everywhere,
}

/// Names a replica's requests to clients (`<replica>.<n>`), and reads those names back.
#[derive(Clone)]
pub struct Tags {
    replica: String,
}

impl Tags {
    /// Tags of replica `replica`.
    pub fn new(replica: &str) -> Self {
        Self {
            replica: replica.to_owned(),
        }
    }

    fn tag(&self, id: &RequestId) -> RequestId {
        match id {
            RequestId::Number(n) => RequestId::String(format!("{}.{n}", self.replica).into()),
            other => other.clone(),
        }
    }

    /// The id this replica's session gave a request, from the tag a client answers with.
    fn untag(&self, id: &RequestId) -> RequestId {
        if let RequestId::String(text) = id
            && let Some((replica, n)) = text.split_once('.')
            && replica == self.replica
            && let Ok(n) = n.parse()
        {
            return RequestId::Number(n);
        }
        id.clone()
    }

    /// Where a message a client sent to a session goes.
    pub fn route(&self, message: &ClientJsonRpcMessage) -> Route {
        let answered = match message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            JsonRpcMessage::Notification(notification)
                if matches!(
                    notification.notification,
                    ClientNotification::CancelledNotification(_)
                ) =>
            {
                return Route::Everywhere;
            }
            _ => None,
        };
        match answered {
            Some(RequestId::String(text)) => match text.split_once('.') {
                Some((replica, _)) if replica != self.replica && !replica.is_empty() => {
                    Route::There(replica.to_owned())
                }
                _ => Route::Here,
            },
            _ => Route::Here,
        }
    }
}

/// A session's transport whose requests to the client carry this replica's name, and whose
/// answers from the client get their own ids back.
pub struct Tagged<T> {
    inner: T,
    tags: Tags,
}

impl<T> Tagged<T> {
    /// `inner`, tagged with `tags`.
    pub fn new(inner: T, tags: Tags) -> Self {
        Self { inner, tags }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Tagged<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let item = match item {
            JsonRpcMessage::Request(mut request) => {
                request.id = self.tags.tag(&request.id);
                JsonRpcMessage::Request(request)
            }
            other => other,
        };
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleServer>> {
        let message = self.inner.receive().await?;
        Some(match message {
            JsonRpcMessage::Response(mut response) => {
                response.id = self.tags.untag(&response.id);
                JsonRpcMessage::Response(response)
            }
            JsonRpcMessage::Error(mut error) => {
                error.id = error.id.map(|id| self.tags.untag(&id));
                JsonRpcMessage::Error(error)
            }
            other => other,
        })
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Sends `message` of session `session` to `replica`, which sent the request it answers.
pub async fn forward(
    state: &StateStore,
    replica: &str,
    session: &SessionId,
    message: ClientJsonRpcMessage,
) -> Result<(), crate::state::StateError> {
    state
        .send_to(replica, FORWARDED, &letter(session, message)?)
        .await
}

/// Sends a cancellation of session `session` to every other replica.
pub async fn broadcast(
    state: &StateStore,
    session: &SessionId,
    message: ClientJsonRpcMessage,
) -> Result<(), crate::state::StateError> {
    state
        .send_to_others(FORWARDED, &letter(session, message)?)
        .await
}

fn letter(
    session: &SessionId,
    message: ClientJsonRpcMessage,
) -> Result<String, crate::state::StateError> {
    let letter = Forwarded {
        session: session.to_string(),
        message,
    };
    serde_json::to_string(&letter).map_err(|e| crate::state::StateError::Unreadable(e.to_string()))
}

/// What letters ask of this replica's sessions.
pub enum Delivery {
    /// A client's message for a session held here.
    Message(SessionId, Box<ClientJsonRpcMessage>),
    /// Close the session: its client deleted it through another replica.
    Close(SessionId),
}

/// The letters about sessions, as deliveries.
pub fn deliveries(state: &StateStore) -> impl futures_util::Stream<Item = Delivery> + Send {
    state.letters().filter_map(|letter| async move {
        match letter.topic.as_str() {
            FORWARDED => serde_json::from_str::<Forwarded>(&letter.body)
                .ok()
                .map(|f| Delivery::Message(f.session.into(), Box::new(f.message))),
            CLOSED => Some(Delivery::Close(letter.body.into())),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientResult, JsonRpcResponse, JsonRpcVersion2_0};

    fn answer(id: RequestId) -> ClientJsonRpcMessage {
        JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id,
            result: ClientResult::empty(()),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_in_use_stays_kept_and_counted_and_one_never_kept_is_not_counted() {
        use std::time::Duration;
        let state = StateStore::memory("t");
        let sessions = SharedSessions::new(state.clone(), Duration::from_secs(10));
        let stored: SessionState =
            serde_json::from_value(serde_json::json!({"initialize_params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"}
            }}))
            .unwrap();
        sessions.store("used", &stored).await.unwrap();
        for _ in 0..4 {
            tokio::time::advance(Duration::from_secs(8)).await;
            keep(&state, "used", Duration::from_secs(10)).await.unwrap();
            keep(&state, "never stored", Duration::from_secs(10))
                .await
                .unwrap();
        }
        // 32 s on, past its first 10: still there, still counted.
        assert!(sessions.load("used").await.unwrap().is_some());
        assert_eq!(state.members("sessions").await.unwrap(), ["used"]);
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(sessions.load("used").await.unwrap().is_none());
        assert!(state.members("sessions").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_session_is_kept_for_other_replicas_only_with_a_small_initialize() {
        let state = StateStore::memory("t");
        let sessions = SharedSessions::new(state.clone(), std::time::Duration::from_secs(60));
        let initialize = |padding: usize| -> SessionState {
            serde_json::from_value(serde_json::json!({"initialize_params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"experimental": {"pad": {"x": "p".repeat(padding)}}},
                "clientInfo": {"name": "c", "version": "1"}
            }}))
            .unwrap()
        };
        sessions.store("small", &initialize(100)).await.unwrap();
        assert!(sessions.load("small").await.unwrap().is_some());
        let refused = sessions.store("large", &initialize(1 << 20)).await;
        assert!(refused.unwrap_err().to_string().contains("over the"));
        assert!(sessions.load("large").await.unwrap().is_none());
    }

    #[test]
    fn an_answer_goes_to_the_replica_that_asked_with_its_own_id() {
        let (a, b) = (Tags::new("aaaa"), Tags::new("bbbb"));
        let asked = a.tag(&RequestId::Number(7));
        assert!(matches!(b.route(&answer(asked.clone())), Route::There(r) if r == "aaaa"));
        assert!(matches!(a.route(&answer(asked.clone())), Route::Here));
        assert_eq!(a.untag(&asked), RequestId::Number(7));
        assert_eq!(b.untag(&asked), asked, "not b's to read");
        assert!(matches!(
            b.route(&answer(RequestId::Number(1))),
            Route::Here
        ));
    }
}
