//! The MCP side of approvals: which channel to a human a client offers, and the two that go
//! through MCP itself. A handshake-era client that declares elicitation is asked with
//! `elicitation/create` while the execution waits; a 2026-07-28 client gets the revision's
//! input-required result, with a request state sealed by HMAC, bound to the code's digest
//! and expiring, and its retry runs the code again with exactly the approved writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequiredResult, InputResponses, RequestStateCodec, SealOptions,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::approval::{Answer, AnswerFuture, Approver, Ask, Fingerprint, Retry, random_hex};

/// Writes one input-required result asks about at most; others ask again on the retry. With
/// requests shown whole (up to 8,000 characters a part) and the journal (256 KiB), this
/// holds the result to about half a megabyte, far under any client's message limit.
const MAX_ASKED: usize = 4;

/// The channel's name for handshake-era elicitation.
const ELICITATION: &str = "MCP elicitation";

/// The channel's name for 2026-07-28 elicitation: an input-required result, then a retry.
pub const RETRY_CHANNEL: &str = "MCP elicitation (input required)";

/// The form a human answers: one choice.
fn form(ask: &Ask) -> ElicitRequestParams {
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
fn answer(result: &ElicitResult, by: &str) -> Answer {
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

/// How this call's client can reach its user.
pub enum Channel {
    /// `elicitation/create` now (handshake era).
    Elicit(Peer<RoleServer>),
    /// An input-required result, then the client's retry (2026-07-28).
    Retry,
    /// None through MCP.
    None,
}

/// The channel a call's client offers: form elicitation, by its protocol era.
pub fn channel(context: &RequestContext<RoleServer>) -> Channel {
    let form = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // An empty `elicitation: {}` means form mode.
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !form {
        return Channel::None;
    }
    let handshake = context
        .protocol_version()
        .is_none_or(|version| version.has_initialize());
    if handshake {
        Channel::Elicit(context.peer.clone())
    } else {
        Channel::Retry
    }
}

/// Asks with `elicitation/create` and waits.
pub struct ElicitApprover {
    /// The client.
    pub peer: Peer<RoleServer>,
}

impl Approver for ElicitApprover {
    fn channel(&self) -> &'static str {
        ELICITATION
    }

    fn ask(&self, ask: Ask, _fingerprint: Fingerprint, timeout: Duration) -> AnswerFuture {
        let peer = self.peer.clone();
        Box::pin(async move {
            match peer
                .create_elicitation_with_timeout(form(&ask), Some(timeout))
                .await
            {
                Ok(result) => answer(&result, "the user"),
                Err(error) => Answer::Deny {
                    by: format!("nobody (the elicitation failed: {error})"),
                },
            }
        })
    }
}

/// Defers the question to the input-required result: the script's call fails now, the
/// client asks its user, and its retry runs the code again.
pub struct RetryApprover;

impl Approver for RetryApprover {
    fn channel(&self) -> &'static str {
        RETRY_CHANNEL
    }

    fn ask(&self, _ask: Ask, _fingerprint: Fingerprint, _timeout: Duration) -> AnswerFuture {
        Box::pin(async {
            Answer::Later {
                message: "this request needs the user's approval; the client will ask them and \
                          run the code again"
                    .to_owned(),
            }
        })
    }
}

/// What a sealed request state carries: the writes asked about, by key, and what earlier
/// rounds hand the next one (decisions not used yet, writes already sent).
#[derive(Debug, Serialize, Deserialize)]
struct Asked {
    /// Makes the state single use: a state whose nonce was seen is refused.
    nonce: String,
    writes: Vec<(String, Fingerprint)>,
    carried: Retry,
}

/// Nonces remembered at most; past this, the oldest go (their states may then open twice,
/// each still bound to its code, caller and expiry).
const MAX_USED: usize = 10_000;

/// Seals and opens request states.
pub struct Retries {
    codec: RequestStateCodec,
    /// The codec's key, which also names callers the same way on every replica.
    key: Vec<u8>,
    lifetime: Duration,
    /// The nonces of states already opened, with when they expire.
    used: std::sync::Mutex<std::collections::VecDeque<(String, tokio::time::Instant)>>,
}

impl Retries {
    /// A codec keyed with `key` (every replica that serves one client needs the same), or a
    /// fresh random key of this process; request states live for `lifetime`.
    pub fn new(key: Option<Vec<u8>>, lifetime: Duration) -> Result<Self, String> {
        let key = match key {
            Some(key) => key,
            None => random_hex(32)
                .ok_or("no randomness for the request-state key")?
                .into_bytes(),
        };
        let codec = RequestStateCodec::try_new(key.clone()).map_err(|e| e.to_string())?;
        Ok(Self {
            codec,
            key,
            lifetime,
            used: std::sync::Mutex::default(),
        })
    }

    /// The input-required result asking about `waiting` writes of the code with this
    /// digest, carrying what this round hands the next.
    pub fn input_required(
        &self,
        code: &str,
        waiting: &[(Ask, Fingerprint, String)],
        carried: Retry,
    ) -> Result<InputRequiredResult, String> {
        let mut requests = BTreeMap::new();
        let mut writes = Vec::new();
        for (n, (ask, fingerprint, _)) in waiting.iter().take(MAX_ASKED).enumerate() {
            let key = format!("approve-{n}");
            requests.insert(
                key.clone(),
                InputRequest::Elicitation(ElicitRequest::new(form(ask))),
            );
            writes.push((key, fingerprint.clone()));
        }
        let options = SealOptions::new()
            .associated_data(code.as_bytes())
            .ttl(self.lifetime);
        let state = self
            .codec
            .seal_json_with(
                &Asked {
                    nonce: nonce()?,
                    writes,
                    carried,
                },
                &options,
            )
            .map_err(|e| e.to_string())?;
        Ok(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// Reads a retry: the state must be ours, unexpired and for this code; each accepted
    /// answer approves its write, any other answer (or none) denies it.
    pub fn approved(
        &self,
        code: &str,
        state: &str,
        responses: Option<&InputResponses>,
    ) -> Result<Retry, String> {
        let asked: Asked = self
            .codec
            .open_json_with(state, code.as_bytes())
            .map_err(|e| {
                format!(
                    "the requestState is not one this server made for this code, or it expired \
                 ({e}); run the code again without it"
                )
            })?;
        self.spend(&asked.nonce)?;
        let mut retry = asked.carried;
        for (key, fingerprint) in asked.writes {
            let result = responses
                .and_then(|r| r.get(&key))
                .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
            let answer = match &result {
                Some(result) => answer(result, "the user"),
                None => Answer::Deny {
                    by: "nobody (no answer came with the retry)".to_owned(),
                },
            };
            match answer {
                Answer::Approve { .. } => retry.approved.push(fingerprint),
                Answer::ApproveAll { by } => retry.all = Some(by),
                Answer::Deny { by } => retry.denied.push((fingerprint, by)),
                Answer::Later { .. } => {}
            }
        }
        Ok(retry)
    }
}

impl Retries {
    /// Who `egress` acts as, named the same on every replica with the same key: what the code
    /// digest binds approvals to.
    pub fn caller(&self, egress: &crate::egress::Egress) -> u64 {
        egress.keyed_identity(&self.key)
    }

    /// Marks a state's nonce used; a nonce seen before is refused, so one answer approves one
    /// retry, never many.
    fn spend(&self, nonce: &str) -> Result<(), String> {
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = tokio::time::Instant::now();
        while used.front().is_some_and(|(_, expires)| *expires <= now) || used.len() >= MAX_USED {
            used.pop_front();
        }
        if used.iter().any(|(seen, _)| seen == nonce) {
            return Err(
                "this requestState was already used: each approval answers one retry; run the \
                 code again without it"
                    .to_owned(),
            );
        }
        used.push_back((nonce.to_owned(), now + self.lifetime));
        Ok(())
    }
}

fn nonce() -> Result<String, String> {
    random_hex(16).ok_or_else(|| "no randomness for a request-state nonce".to_owned())
}

/// The approver a call gets for an MCP `channel`, if it is one.
pub fn approver(channel: &Channel) -> Option<Arc<dyn Approver>> {
    match channel {
        Channel::Elicit(peer) => Some(Arc::new(ElicitApprover { peer: peer.clone() })),
        Channel::Retry => Some(Arc::new(RetryApprover)),
        Channel::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::Shown;

    #[test]
    fn the_form_offers_the_three_decisions() {
        let shown = Shown::new(None, "POST", "http://h/x", &[], None, 100);
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

    #[test]
    fn a_request_state_answers_one_retry_for_its_own_code_only() {
        let retries = Retries::new(None, Duration::from_secs(60)).unwrap();
        let shown = Shown::new(None, "POST", "http://h/x", &[], None, 100);
        let ask = Ask::new("e1", shown, "rule");
        let write = Fingerprint("w".into());
        let waiting = [(ask, write.clone(), String::new())];
        let required = retries
            .input_required("code", &waiting, Retry::default())
            .unwrap();
        let state = required.request_state.unwrap();
        let yes: InputResponses = [(
            "approve-0".to_owned(),
            json!({"action": "accept", "content": {"decision": "approve"}}),
        )]
        .into();
        assert!(retries.approved("other code", &state, Some(&yes)).is_err());
        let approved = retries.approved("code", &state, Some(&yes)).unwrap();
        assert_eq!(approved.approved, [write]);
        let again = retries.approved("code", &state, Some(&yes)).unwrap_err();
        assert!(again.contains("already used"), "{again}");
        let mut forged = state.clone();
        forged.push('x');
        assert!(retries.approved("code", &forged, Some(&yes)).is_err());
    }
}
