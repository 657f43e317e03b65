//! The sandbox's one capability: reaching the provider, by a raw request (`fetch`,
//! `api.request`) or an SDK call (`api.<group>.<method>`). In one process it is a
//! [`Gateway`] over egress; in a worker process it is a bridge to the supervisor's gateway.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use std::collections::HashMap;
use std::sync::Mutex;

use super::hold::Hold;
use crate::egress::{EgressSession, Position, ScriptRequest, ScriptResponse};
use crate::lock::lock;
use crate::sdk::{Sdk, SdkCall};

/// Replies larger than this (body, headers and URL) are scrubbed on a blocking thread.
const LARGE_REPLY: usize = 64 * 1024;

/// Characters of an error message handed to the script (a refused URL of megabytes is not
/// worth handing back whole).
const MAX_ERROR_MESSAGE: usize = 1_000;

/// A reply as it enters the isolate, the one way every reply does: scrubbed whole first,
/// then an error's message cut. Past the execution's checking budget, nothing is handed
/// over.
fn into_isolate(
    scrubber: &crate::egress::Scrubber,
    reply: Result<ScriptResponse, NetworkError>,
) -> Result<ScriptResponse, NetworkError> {
    let reply = match reply {
        Ok(response) => Ok(response.scrubbed(scrubber)),
        Err(error) => scrubber.scrub_all(Err(error), unchecked()),
    };
    if let Some(allowance) = scrubber.spent() {
        return Err(over_budget(allowance));
    }
    reply.map_err(|mut error| {
        error.message = crate::egress::cut(&error.message, MAX_ERROR_MESSAGE);
        error
    })
}

/// What the script gets when a reply could not be checked for the secret.
fn unchecked() -> Result<ScriptResponse, NetworkError> {
    Err(NetworkError {
        kind: "internal".into(),
        message: "the reply could not be checked for the provider secret".into(),
    })
}

/// What the script gets once checking replies for the secret has cost all it may.
fn over_budget(allowance: usize) -> NetworkError {
    NetworkError {
        kind: "limit".into(),
        message: format!(
            "the reply was not handed over: checking this execution's replies for the \
             provider secret may cost {} MiB of work ({}x the execution's response \
             budget) and it has been spent, or the execution has ended; ask for less \
             (smaller pages, fewer requests, only the fields you need)",
            allowance >> 20,
            crate::egress::WORK_PER_RECEIVED_BYTE
        ),
    }
}

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
    /// Sends one raw request.
    fn send(&self, request: ScriptRequest) -> NetworkFuture;
    /// Checks an SDK call against the spec, then sends it.
    fn call(&self, call: SdkCall) -> NetworkFuture;
    /// The script's latest console line, for a long run's progress (at most one a second
    /// is handed over; it changes nothing).
    fn note(&self, _line: String) {}
}

/// The real thing: one execution's egress session and the provider's SDK.
pub struct Gateway {
    session: EgressSession,
    sdk: Option<Arc<Sdk>>,
    /// Requests wait here before egress sees them (the type check's verdict).
    hold: Option<Hold>,
    /// Requests the script made so far, by slot (see [`Position`]).
    positions: Mutex<HashMap<String, u32>>,
    /// Requests made while the hold waits for its verdict: past the execution's request
    /// budget none could be sent anyway, and each waiting one keeps its body in memory.
    held: std::sync::atomic::AtomicU32,
    /// SDK calls refused so far: past [`EXPLAINED_REFUSALS`], a refusal does not rank
    /// suggestions (each is a pass over every operation, on the server's threads).
    refused: std::sync::atomic::AtomicU32,
}

/// SDK calls of one execution whose refusal says what may have been meant.
const EXPLAINED_REFUSALS: u32 = 8;

/// Slots a gateway numbers the requests of (at most one per operation of the SDK; a bound
/// all the same); past them, a request goes without a position and the approval gate counts
/// it where it arrives.
const MAX_SLOTS: usize = 4_096;

impl Gateway {
    /// A gateway for one execution; without an SDK, only raw requests work.
    pub fn new(session: EgressSession, sdk: Option<Arc<Sdk>>) -> Self {
        Self {
            session,
            sdk,
            hold: None,
            positions: Mutex::default(),
            held: std::sync::atomic::AtomicU32::new(0),
            refused: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Gives `request` its position among the script's requests to its operation, in the
    /// order the script made them: this runs as the request comes out of the sandbox, before
    /// anything about it waits. Requests to an operation of the SDK get one, whether made by
    /// the SDK, `api.request` or `fetch` (the slot named as the approval rules name it,
    /// `POST customers.create`): they share one count. The gate counts the rest as they
    /// arrive, as it did before positions.
    fn place(&self, request: &mut ScriptRequest) {
        let Some(operation) = self.sdk.as_ref().and_then(|sdk| {
            let path = self.session.api_path(request)?;
            sdk.operation_name(&request.method, &path)
        }) else {
            return;
        };
        let slot = format!("{} {operation}", request.method.to_ascii_uppercase());
        let mut positions = lock(&self.positions);
        if positions.len() >= MAX_SLOTS && !positions.contains_key(&slot) {
            return;
        }
        let count = positions.entry(slot.clone()).or_default();
        request.position = Some(Position {
            slot,
            occurrence: *count,
        });
        *count += 1;
    }

    /// Sends an SDK call to the server its operation is served from, when the spec names one
    /// of its own and the provider file lets scripts reach it (Stripe's files.stripe.com);
    /// else it goes to the base URL, as every other call.
    fn serve_from_its_server(&self, request: &mut ScriptRequest) {
        let Some(server) = self.sdk.as_ref().and_then(|sdk| {
            sdk.server_of(request.operation.as_deref()?)
                .map(str::to_owned)
        }) else {
            return;
        };
        let url = format!("{}{}", server.trim_end_matches('/'), request.url);
        if url::Url::parse(&url).is_ok_and(|u| self.session.reaches(&u)) {
            request.url = url;
            request.kind = crate::egress::UrlKind::Fetch;
        }
    }

    /// Ends the run's requests (see `EgressSession::end_run`).
    pub fn end_run(&self) {
        self.session.end_run();
    }

    /// The same gateway, its requests waiting at `hold` before anything about them is
    /// decided, logged or sent.
    pub fn held_by(mut self, hold: Option<Hold>) -> Self {
        self.hold = hold;
        self
    }

    /// Sends a request; what comes back, a response or an error, is scrubbed whole here,
    /// the one place replies enter the isolate.
    fn forward(&self, request: ScriptRequest) -> NetworkFuture {
        let session = self.session.clone();
        let hold = self.hold.clone();
        let budget = session.max_requests();
        if hold.as_ref().is_some_and(Hold::waiting)
            && self.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= budget
        {
            let error = NetworkError {
                kind: "limit".into(),
                message: format!(
                    "more than {budget} requests were made before the type check's verdict, \
                     as many as the execution may send; make fewer requests"
                ),
            };
            return Box::pin(async move { Err(error) });
        }
        Box::pin(async move {
            if let Some(hold) = hold
                && !hold.passed().await
            {
                return Err(NetworkError {
                    kind: "stopped".into(),
                    message: "the type check stopped this script before anything was sent".into(),
                });
            }
            let reply = session.send(request).await.map_err(|error| NetworkError {
                kind: error.kind().to_owned(),
                message: error.to_string(),
            });
            // Scrubbing a large body takes time: off the async threads, which serve every
            // other session too.
            let scrubber = session.scrubber().clone();
            let size = |r: &ScriptResponse| {
                let headers: usize = r.headers.iter().map(|(n, v)| n.len() + v.len()).sum();
                r.body_len() + headers + r.url.len() + r.status_text.len()
            };
            if reply.as_ref().is_ok_and(|r| size(r) > LARGE_REPLY) {
                tokio::task::spawn_blocking(move || into_isolate(&scrubber, reply))
                    .await
                    .unwrap_or_else(|_| unchecked())
            } else {
                into_isolate(&scrubber, reply)
            }
        })
    }
}

impl Network for Gateway {
    fn note(&self, line: String) {
        self.session.note_console(line);
    }

    /// Sends a raw request (`fetch`, `api.request`). What the script says about its
    /// operation is dropped: only the SDK names operations, and the rules find a raw
    /// request's operation from its method and URL.
    fn send(&self, mut request: ScriptRequest) -> NetworkFuture {
        request.operation = None;
        // `api.request` encodes like the operation it reaches; without an SDK, or for a
        // `fetch`, the plain encoding the script made stands.
        match &self.sdk {
            Some(sdk) if request.kind == crate::egress::UrlKind::Api => {
                if let Err(error) = sdk.encode_raw(&mut request) {
                    let error = NetworkError {
                        kind: "limit".into(),
                        message: error.to_string(),
                    };
                    return Box::pin(async move { Err(error) });
                }
            }
            _ => request.unencoded = None,
        }
        // Files left to sdkbox that no operation's encoding took have nowhere to go.
        if !request.files.is_empty() {
            let error = NetworkError {
                kind: "invalid_request".into(),
                message: format!(
                    "{} {}: the body holds files (Blob, File or bytes), which go only where \
                     the operation takes a multipart body; send a FormData as the body, or \
                     the file itself as a raw body",
                    request.method, request.url
                ),
            };
            return Box::pin(async move { Err(error) });
        }
        self.place(&mut request);
        self.forward(request)
    }

    fn call(&self, call: SdkCall) -> NetworkFuture {
        let prepared = match &self.sdk {
            Some(sdk) => {
                let explain =
                    self.refused.load(std::sync::atomic::Ordering::Relaxed) < EXPLAINED_REFUSALS;
                sdk.prepare_with(&call, explain).map_err(|e| {
                    self.refused
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    NetworkError {
                        kind: "invalid_call".into(),
                        message: e.to_string(),
                    }
                })
            }
            None => Err(NetworkError {
                kind: "invalid_call".into(),
                message: format!(
                    "no SDK is loaded, so `api.{}.{}` does not exist; use \
                     api.request(method, path, {{ query, body }})",
                    call.group, call.method
                ),
            }),
        };
        match prepared {
            Ok(mut request) => {
                self.place(&mut request);
                self.serve_from_its_server(&mut request);
                // An operation the spec says returns a file gives the script its bytes, whatever
                // the response says of its type (a CSV download is a Blob as its type says).
                let file = self.sdk.as_ref().is_some_and(|sdk| {
                    request
                        .operation
                        .as_deref()
                        .is_some_and(|id| sdk.returns_bytes(id))
                });
                let reply = self.forward(request);
                if !file {
                    return reply;
                }
                Box::pin(async move {
                    reply.await.map(|response| match response.status < 400 {
                        true => response.as_bytes(),
                        false => response,
                    })
                })
            }
            Err(error) => {
                let reply = into_isolate(self.session.scrubber(), Err(error));
                Box::pin(async move { reply })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::{Egress, EgressConfig, EgressLimits, UrlKind};
    use futures_util::FutureExt;

    /// Requests made while the type check's verdict is still to come wait, at most as many
    /// as the execution may send; the one past that is refused at once (each waiting one
    /// keeps its body).
    #[tokio::test]
    async fn requests_waiting_for_the_verdict_are_bounded_by_the_request_budget() {
        let egress = Egress::new(EgressConfig {
            base_url: url::Url::parse("http://127.0.0.1:9").unwrap(),
            extra_origins: Vec::new(),
            download_origins: Vec::new(),
            credential: None,
            limits: EgressLimits {
                max_requests: 3,
                ..EgressLimits::default()
            },
        })
        .unwrap();
        let deadline = crate::deadline::Deadline::after(std::time::Duration::from_secs(5));
        let gate = Arc::new(crate::approval::Gate::open(egress.base_url().clone()));
        let stopped = tokio_util::sync::CancellationToken::new();
        let session = egress.session(gate, deadline, stopped.child_token(), stopped);
        let (release, hold) = crate::sandbox::hold();
        let gateway = Gateway::new(session, None).held_by(Some(hold));
        let request = || ScriptRequest {
            method: "GET".into(),
            url: "/x".into(),
            kind: UrlKind::Fetch,
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            files: Vec::new(),
            operation: None,
            unencoded: None,
            position: None,
        };
        let mut waiting: Vec<_> = (0..3).map(|_| gateway.send(request())).collect();
        for one in &mut waiting {
            assert!(
                one.as_mut().now_or_never().is_none(),
                "left before the verdict"
            );
        }
        let past = gateway.send(request()).now_or_never();
        let refused = past.expect("refused at once").unwrap_err();
        assert_eq!(refused.kind, "limit", "{}", refused.message);
        drop(release);
        for one in waiting {
            assert_eq!(one.await.unwrap_err().kind, "stopped");
        }
    }
}
