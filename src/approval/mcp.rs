//! The MCP side of asking a human: the form a question is put in, how an answer reads, and
//! the two channels that go through MCP itself. A handshake-era client that declares form
//! elicitation is asked with `elicitation/create` while the execution waits; a 2026-07-28
//! client's question goes back in an input-required result (see `states.rs`), and its retry
//! runs the code again with the answers.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};

use super::ask::{Answer, AnswerFuture, Approver, Ask};
use super::journal::Key;

/// The channel's name for handshake-era elicitation.
const ELICITATION: &str = "MCP elicitation";

/// The channel's name for 2026-07-28 elicitation: an input-required result, then a retry.
pub const RETRY_CHANNEL: &str = "MCP elicitation (input required)";

/// The form a human answers: one choice.
pub fn form(ask: &Ask) -> ElicitRequestParams {
    let schema = json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "oneOf": [
                    {"const": "approve", "title": "Approve this request"},
                    {"const": "approve_all", "title": "Approve every write of this execution"},
                    {"const": "deny", "title": "Deny"}
                ]
            }
        },
        "required": ["decision"]
    });
    let requested_schema = match schema {
        Value::Object(map) => ElicitationSchema::from_json_schema(map)
            .unwrap_or_else(|_| ElicitationSchema::new(BTreeMap::new())),
        _ => ElicitationSchema::new(BTreeMap::new()),
    };
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: ask.describe(),
        requested_schema,
    }
}

/// A human's answer to the form.
pub fn answer(result: &ElicitResult, by: &str) -> Answer {
    let decision = result
        .content
        .as_ref()
        .and_then(|c| c.get("decision"))
        .and_then(Value::as_str);
    let by = by.to_owned();
    match (&result.action, decision) {
        (ElicitationAction::Accept, Some("approve")) => Answer::Approve { by },
        (ElicitationAction::Accept, Some("approve_all")) => Answer::ApproveAll { by },
        (ElicitationAction::Accept, _) => Answer::Deny { by },
        (ElicitationAction::Decline, _) => Answer::Deny {
            by: format!("{by} (declined)"),
        },
        _ => Answer::Deny {
            by: format!("{by} (cancelled)"),
        },
    }
}

/// Asks with `elicitation/create` and waits.
pub struct ElicitApprover {
    /// The client.
    pub peer: Peer<RoleServer>,
    /// The call the question belongs to: it goes out on that call's response stream (where
    /// the client waits, on whichever replica runs the call), not on a stream the client may
    /// hold with another replica. The gate asks from tasks of its own, which rmcp's own
    /// association does not reach.
    pub call: rmcp::model::RequestId,
}

impl Approver for ElicitApprover {
    fn channel(&self) -> &'static str {
        ELICITATION
    }

    fn ask(&self, ask: Ask, _key: Key, timeout: Duration) -> AnswerFuture {
        let (peer, call) = (self.peer.clone(), self.call.clone());
        Box::pin(async move {
            match elicit(&peer, call, form(&ask), timeout).await {
                Ok(result) => answer(&result, "the user"),
                Err(error) => Answer::Deny {
                    by: format!("nobody (the elicitation failed: {error})"),
                },
            }
        })
    }
}

/// Sends `elicitation/create` with `params` as part of call `call`, and waits for the answer.
async fn elicit(
    peer: &Peer<RoleServer>,
    call: rmcp::model::RequestId,
    params: rmcp::model::ElicitRequestParams,
    timeout: Duration,
) -> Result<rmcp::model::ElicitResult, rmcp::service::ServiceError> {
    use rmcp::model::{ClientResult, ElicitRequest, GetExtensions, ServerRequest};
    let mut request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    request
        .extensions_mut()
        .insert(rmcp::service::OriginatingRequestId(call));
    let options = rmcp::service::PeerRequestOptions::with_timeout(timeout);
    let result = peer
        .send_request_with_option(request, options)
        .await?
        .await_response()
        .await?;
    match result {
        ClientResult::ElicitResult(result) => Ok(result),
        _ => Err(rmcp::service::ServiceError::UnexpectedResponse),
    }
}

/// Defers the question to the input-required result: the script's call fails now, the
/// client asks its user, and its retry runs the code again.
pub struct RetryApprover;

impl Approver for RetryApprover {
    fn channel(&self) -> &'static str {
        RETRY_CHANNEL
    }

    fn answers_later(&self) -> bool {
        true
    }

    fn ask(&self, _ask: Ask, _key: Key, _timeout: Duration) -> AnswerFuture {
        Box::pin(async {
            Answer::Later {
                message: "this request needs the user's approval; the client will ask them and \
                          run the code again"
                    .to_owned(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::Shown;

    #[test]
    fn the_form_offers_the_three_decisions() {
        let shown = Shown::new(None, "POST", "http://h/x", &[], None);
        let form = serde_json::to_value(form(&Ask::new("e1", shown, "rule"))).unwrap();
        let choices = &form["requestedSchema"]["properties"]["decision"]["oneOf"];
        let values: Vec<&str> = choices
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["const"].as_str().unwrap())
            .collect();
        assert_eq!(values, ["approve", "approve_all", "deny"], "{form}");
    }
}
