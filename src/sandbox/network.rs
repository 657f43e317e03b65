//! The sandbox's one capability: sending an HTTP request. In one process it is the egress
//! session itself; in a worker process it is a bridge to the supervisor, which holds egress.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::egress::{EgressSession, ScriptRequest, ScriptResponse};

/// A request's refusal or failure as the script sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NetworkError {
    /// Machine-readable kind (`denied`, `limit`, `timeout`, ...).
    pub kind: String,
    /// What went wrong and what to do.
    pub message: String,
}

/// What [`Network::send`] returns.
pub type NetworkFuture = Pin<Box<dyn Future<Output = Result<ScriptResponse, NetworkError>> + Send>>;

/// Sends the script's requests. Implementations enforce the egress policy or forward to one
/// that does.
pub trait Network: Send + Sync + 'static {
    /// Sends one request.
    fn send(&self, request: ScriptRequest) -> NetworkFuture;
}

impl Network for EgressSession {
    fn send(&self, request: ScriptRequest) -> NetworkFuture {
        let session = self.clone();
        Box::pin(async move {
            session.send(request).await.map_err(|error| NetworkError {
                kind: error.kind().to_owned(),
                message: error.to_string(),
            })
        })
    }
}
