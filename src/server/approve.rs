//! Which channel to a human a call's client offers, in the terms of `approval::Channel`:
//! form elicitation now (handshake era), an input-required result and the client's retry
//! (2026-07-28), or neither (the approval page, if the server has one).

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::approval::{Channel, ElicitApprover};

/// What a 2026-07-28 client's retry of `tools/call` carries: the request state sdkbox sealed
/// and the user's answers.
#[derive(Clone)]
pub struct RetryInput {
    /// The request state.
    pub state: Option<String>,
    /// The user's answers.
    pub responses: Option<rmcp::model::InputResponses>,
}

/// The channel a call's client offers: form elicitation, by its protocol era.
pub fn channel(context: &RequestContext<RoleServer>) -> Channel {
    let form = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // An empty `elicitation: {}` means form mode.
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !form {
        return Channel::Page;
    }
    let handshake = context
        .protocol_version()
        .is_none_or(|version| version.has_initialize());
    if handshake {
        Channel::Now(Arc::new(ElicitApprover {
            peer: context.peer.clone(),
            call: context.id.clone(),
        }))
    } else {
        let retry = context.extensions.get::<RetryInput>().cloned();
        Channel::Retry {
            state: retry.as_ref().and_then(|r| r.state.clone()),
            responses: retry.and_then(|r| r.responses),
        }
    }
}
