//! One execution's use of the network: its budget, its deadline, its call log.

use crate::lock::lock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use url::Url;

use super::EgressError;
use super::auth::Credential;
use super::binary::{Binary, FilePart};
use super::checkpoint::{
    Attempt, Checkpoint, Decided, Decision, Dispatch, Note, Outgoing, Position, Reached, Refusal,
    Rule, Verdict,
};
use super::client::{CheckedRequest, Client, RawResponse, header_pair};
use super::scrub::Scrubber;
use crate::deadline::Deadline;

const MAX_RETRIES: u32 = 2;

/// Time a keyed write's retry needs left before the deadline to be worth sending.
const KEYED_RETRY_ROOM: Duration = Duration::from_millis(500);
const MAX_RETRY_WAIT: Duration = Duration::from_secs(10);

/// Redirects a read follows, each one a request of its own: checked, decided and logged.
const MAX_REDIRECTS: u32 = 5;

/// Calls listed in one execution's log; more are counted, not listed.
pub const MAX_LOGGED_CALLS: usize = 100;
/// Characters of a logged method or URL; the rest is counted.
pub const MAX_LOGGED_URL: usize = 300;
/// Characters of a logged error.
pub const MAX_LOGGED_ERROR: usize = 500;

/// What a call that was sent but never finished says in the log.
pub const UNFINISHED: &str = "unfinished: the execution ended before the response arrived; \
                              the provider may have received and acted on the request";

/// How a script-given URL is read.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UrlKind {
    /// An API path, appended to the base URL's path (`/customers` under `https://h/v1`).
    #[default]
    Api,
    /// A URL as `fetch` reads it: absolute, or resolved against the base URL.
    Fetch,
}

/// A request as the script asked for it, not yet checked.
#[derive(Debug, Serialize, Deserialize)]
pub struct ScriptRequest {
    /// HTTP method.
    pub method: String,
    /// Absolute URL, or a path relative to the base URL.
    pub url: String,
    /// How to read `url`.
    #[serde(default)]
    pub kind: UrlKind,
    /// Query pairs to append.
    #[serde(default)]
    pub query: Vec<(String, String)>,
    /// Headers; credential headers are dropped.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The encoded body, if any, byte for byte.
    #[serde(default)]
    pub body: Option<Binary>,
    /// Files an `api.request` body left to sdkbox stands for (see [`super::FILE_MARK`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FilePart>,
    /// The spec operation this request calls, when it comes from the SDK.
    #[serde(default)]
    pub operation: Option<String>,
    /// What `api.request` left for the SDK to encode as the operation it reaches expects
    /// (`query` and `body` as the script gave them); `query`, `headers` and `body` above
    /// hold a plain encoding of the same, used when no operation matches. Egress never
    /// reads it: the gateway has re-encoded the request or dropped it before.
    #[serde(default)]
    pub unencoded: Option<Unencoded>,
    /// Where the script made it among its requests (see [`Position`]): set by the gateway as
    /// the script makes requests, never taken from the sandbox.
    #[serde(skip)]
    pub position: Option<Position>,
}

/// The query and body of an `api.request` call, as the script gave them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Unencoded {
    /// The query object.
    #[serde(default)]
    pub query: Option<serde_json::Value>,
    /// The body object, when the script left its encoding to sdkbox (no string, form or
    /// explicit content type).
    #[serde(default)]
    pub body: Option<serde_json::Value>,
}

/// What the script gets back: scrubbed of the secret.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScriptResponse {
    /// HTTP status code.
    pub status: u16,
    /// The status's reason phrase.
    pub status_text: String,
    /// The final URL, after redirects.
    pub url: String,
    /// Response headers, lower-case names.
    pub headers: Vec<(String, String)>,
    /// The body, when it is UTF-8 text (empty when it is in `bytes`).
    pub body: String,
    /// The body, when it is not UTF-8 text (an image, a PDF, an archive): the bytes as
    /// they came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Binary>,
}

impl ScriptResponse {
    /// The response with `body`: as text when it is UTF-8 (the usual case, taken without a
    /// copy), else as the bytes themselves.
    pub fn with_body(mut self, body: Vec<u8>) -> Self {
        match String::from_utf8(body) {
            Ok(text) => {
                self.body = text;
                self.bytes = None;
            }
            Err(e) => {
                self.body = String::new();
                self.bytes = Some(Binary(e.into_bytes()));
            }
        }
        self
    }

    /// The same response with its body as bytes, text or not.
    pub fn as_bytes(mut self) -> Self {
        if self.bytes.is_none() {
            self.bytes = Some(Binary(std::mem::take(&mut self.body).into_bytes()));
        }
        self
    }

    /// The body's size in bytes, text or not.
    pub fn body_len(&self) -> usize {
        self.bytes.as_ref().map_or(self.body.len(), |b| b.len())
    }

    /// The response with every form of the secret gone: its text scrubbed as every value
    /// is ([`Scrubber::scrub_all`]), its bytes checked whole and withheld when they show the
    /// secret in any form (bytes are never cut into: a file with a piece replaced is
    /// another file).
    pub fn scrubbed(mut self, scrubber: &Scrubber) -> Self {
        let bytes = self.bytes.take();
        let withheld = ScriptResponse {
            body: super::WITHHELD.to_owned(),
            headers: Vec::new(),
            bytes: None,
            ..self.clone()
        };
        let mut clean = scrubber.scrub_all(self, withheld);
        if let Some(bytes) = bytes {
            match scrubber.binary_shows_secret(&bytes) {
                None => clean.bytes = Some(bytes),
                Some(why) => clean.body = why.to_owned(),
            }
        }
        clean
    }
}

/// The span of one provider request (one hop of a redirect): its method and the operation the
/// SDK called, never its URL (paths and queries carry the user's data). A script's method is
/// checked only later, so at most its first 16 characters are kept.
fn request_span(method: &str, operation: Option<&str>) -> tracing::Span {
    let method: String = method.chars().take(16).collect();
    tracing::info_span!(
        crate::telemetry::span::PROVIDER_REQUEST,
        otel.kind = "client",
        http.request.method = %method,
        operation = operation.unwrap_or(""),
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

#[cfg(test)]
impl ScriptResponse {
    /// A 200 JSON response with `body`, for tests.
    pub fn ok_for_tests(body: &str) -> Self {
        Self {
            status: 200,
            status_text: "OK".into(),
            url: "http://127.0.0.1/x".into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
            bytes: None,
        }
    }
}

/// One entry of the call log returned with every execution: written when the request is
/// sent, completed when it ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallRecord {
    /// HTTP method.
    pub method: String,
    /// The URL requested, secret scrubbed.
    pub url: String,
    /// The spec operation called, for SDK calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// The response status, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Time from sending to the end of the body.
    pub duration_ms: u64,
    /// Response body size.
    pub bytes: usize,
    /// Why the call failed or was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Headers the script set that sdkbox dropped (credentials are injected by sdkbox).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_headers: Vec<String>,
    /// The approval rules' decision, for writes and for reads under a rule other than
    /// `allow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Note>,
}

impl CallRecord {
    /// A record of a request as it leaves (or is refused), its strings cut to the log's
    /// bounds.
    fn new(method: &str, url: &str, operation: Option<String>, dropped: Vec<String>) -> Self {
        Self {
            method: cut(method, 16),
            url: cut(url, MAX_LOGGED_URL),
            operation: operation.map(|o| cut(&o, MAX_LOGGED_URL)),
            status: None,
            duration_ms: 0,
            bytes: 0,
            error: None,
            dropped_headers: dropped.iter().take(20).map(|h| cut(h, 100)).collect(),
            policy: None,
        }
    }

    fn noted(mut self, note: Option<Note>) -> Self {
        self.policy = note;
        self
    }

    /// Whether the request was never meant to be sent: a dry run's write, or one an earlier
    /// run of the same code sent.
    pub(crate) fn planned(&self) -> bool {
        self.policy
            .as_ref()
            .is_some_and(|note| matches!(note.decision, Verdict::DryRun | Verdict::Replayed))
    }

    fn replayed(&self) -> bool {
        self.policy
            .as_ref()
            .is_some_and(|note| note.decision == Verdict::Replayed)
    }

    fn failed(mut self, error: &EgressError) -> Self {
        self.error = Some(cut(&error.to_string(), MAX_LOGGED_ERROR));
        self
    }
}

/// Whether a request with `method` may change the provider's data.
pub fn is_write(method: &str) -> bool {
    !matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// `text` cut to `max` characters, saying how long it was.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}… [{} chars]", &text[..end], text.chars().count()),
    }
}

/// The log of one execution: at most [`MAX_LOGGED_CALLS`] records, the rest counted. A
/// record with neither a status nor an error has not finished.
#[derive(Default)]
struct CallLog {
    records: Vec<CallRecord>,
    dropped: usize,
}

/// Characters of a script's latest console line kept for progress.
pub const CONSOLE_CHARS: usize = 200;

/// The network budget and log of one execution. Cheap to clone; clones share the budget.
#[derive(Clone)]
pub struct EgressSession {
    state: Arc<State>,
}

struct State {
    client: Arc<Client>,
    /// The client's scrubber, bounded for this execution: what it may spend checking
    /// replies, and nothing once it has ended.
    scrubber: Scrubber,
    checkpoint: Arc<dyn Checkpoint>,
    deadline: Deadline,
    /// The run's end: requests in flight end with it, but for writes that have left.
    cancel: CancellationToken,
    /// The call's end (a cancellation, the server stopping): every request ends with it.
    stopped: CancellationToken,
    /// Requests asked for: sent attempts (retries included) and refusals alike.
    sent: AtomicU32,
    /// Response bytes received so far, all requests together.
    received: std::sync::atomic::AtomicUsize,
    log: Mutex<CallLog>,
    /// The script's latest console line handed over for progress, as it wrote it.
    console: Mutex<Option<String>>,
}

impl EgressSession {
    pub(super) fn new(
        client: Arc<Client>,
        checkpoint: Arc<dyn Checkpoint>,
        deadline: Deadline,
        cancel: CancellationToken,
        stopped: CancellationToken,
    ) -> Self {
        let allowance = client
            .limits()
            .max_total_response_bytes
            .saturating_mul(super::scrub::WORK_PER_RECEIVED_BYTE);
        // A write that left outlives the run: its response is still checked, for its journal.
        let scrubber = client.scrubber().bounded(allowance, stopped.clone());
        Self {
            state: Arc::new(State {
                client,
                scrubber,
                checkpoint,
                deadline,
                cancel,
                stopped,
                sent: AtomicU32::new(0),
                received: std::sync::atomic::AtomicUsize::new(0),
                log: Mutex::new(CallLog::default()),
                console: Mutex::new(None),
            }),
        }
    }

    /// Checks the request, asks the checkpoint (the approval rules, and through them maybe a
    /// human), then sends it on the long-lived runtime; the request is aborted if this future
    /// is dropped (the execution ended) or the execution is cancelled. A read that is
    /// redirected within its origin is followed, each hop a request of its own, checked and
    /// decided again. `request.operation` (set by the supervisor's SDK only) is for the log.
    pub async fn send(&self, request: ScriptRequest) -> Result<ScriptResponse, EgressError> {
        let mut request = request;
        let mut hops = 0;
        loop {
            let (method, headers) = (request.method.to_ascii_uppercase(), request.headers.clone());
            let span = request_span(&method, request.operation.as_deref());
            let response = self.send_one(request).instrument(span.clone()).await;
            match &response {
                Ok(response) => {
                    span.record("http.response.status_code", i64::from(response.status))
                }
                Err(error) => span
                    .record("otel.status_code", "ERROR")
                    .record("error.type", error.kind()),
            };
            let response = response?;
            if !matches!(method.as_str(), "GET" | "HEAD") {
                // A write follows no redirect: a 307 or 308 would send it again elsewhere.
                return Ok(response);
            }
            let downloads = |url: &Url| self.state.client.download_only(url);
            let next = redirect(
                &response,
                &method,
                &headers,
                hops,
                self.policy_text(),
                &downloads,
            )?;
            let Some(next) = next else {
                return Ok(response);
            };
            hops += 1;
            request = next;
        }
    }

    /// Whether scripts may send anything to `url`: an allowed origin, not a download origin
    /// (which is only read).
    pub fn reaches(&self, url: &Url) -> bool {
        let client = &self.state.client;
        client.policy().check(url).is_ok() && !client.download_only(url)
    }

    fn policy_text(&self) -> String {
        self.state.client.policy().describe()
    }

    /// One request, without following redirects.
    async fn send_one(&self, request: ScriptRequest) -> Result<ScriptResponse, EgressError> {
        let method = request.method.to_ascii_uppercase();
        let operation = request.operation.clone();
        let position = request.position.clone();
        let (checked, dropped) = match self.check(request) {
            Ok(checked) => checked,
            Err((url, error)) => {
                if is_write(&method) {
                    let refusal = Refusal {
                        method: &method,
                        url: &url,
                        reason: &error.to_string(),
                    };
                    self.state
                        .checkpoint
                        .refused(refusal, self.scrubber())
                        .await;
                }
                let record = CallRecord::new(&method, &url, operation, Vec::new());
                return self.unsent(record, Err(error));
            }
        };
        let shown = checked.url.to_string();
        let headers: Vec<String> = checked
            .headers
            .iter()
            .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())))
            .collect();
        let outgoing = Outgoing {
            method: checked.method.as_str(),
            url: &checked.url,
            headers: &headers,
            body: checked.body.as_deref(),
            position: position.as_ref(),
        };
        let Decided {
            operation: classified,
            decision,
            mut dispatch,
            idempotency,
        } = self
            .state
            .checkpoint
            .decide(
                outgoing,
                self.scrubber(),
                &self.state.deadline,
                &self.state.cancel,
            )
            .await;
        // The operation the checkpoint classified the request as, else the SDK's.
        let logged_operation = classified.or(operation);
        let write = is_write(checked.method.as_str());
        let noted = |note: Note| (write || note.rule != Rule::Allow).then_some(note);
        let record = |note| {
            CallRecord::new(&method, &shown, logged_operation.clone(), dropped.clone()).noted(note)
        };
        let note = match decision {
            Decision::Send(note) => noted(note),
            Decision::Refuse(note, message) => {
                let awaiting = note.decision == Verdict::AwaitingApproval;
                let error = EgressError::Policy { message, awaiting };
                return self.unsent(record(Some(note)), Err(error));
            }
            Decision::Answer(note, response) => {
                // Not sent (a dry run's placeholder, or a write an earlier run sent).
                let mut record = record(Some(note));
                if record.replayed() {
                    record.status = Some(response.status);
                    record.bytes = response.body_len();
                }
                return self.unsent(record, Ok(response));
            }
        };
        // The run ended while this write was being decided: it does not leave now.
        if write && self.state.cancel.is_cancelled() {
            if let Some(dispatch) = dispatch.as_mut() {
                let attempt = Attempt {
                    number: 1,
                    reached: Reached::No,
                    status: None,
                    error: Some("the execution ended before it left".to_owned()),
                };
                dispatch.after(attempt).await;
            }
            let error = EgressError::Cancelled { url: shown.clone() };
            return self.unsent(record(note), Err(error));
        }
        // A write the provider deduplicates by key carries it in every attempt: it may then
        // be retried when its outcome is unknown.
        let mut checked = checked;
        let keyed = match idempotency {
            Some((name, value)) => {
                if let (Ok(name), Ok(value)) = (
                    reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                    reqwest::header::HeaderValue::from_str(&value),
                ) {
                    checked.headers.insert(name, value);
                    true
                } else {
                    false
                }
            }
            None => false,
        };
        let state = self.state.clone();
        let task = self.state.client.runtime.spawn(
            async move {
                let mut dispatch = dispatch;
                let result = state
                    .send_with_retries(
                        checked,
                        keyed,
                        dropped,
                        logged_operation,
                        note,
                        &mut dispatch,
                    )
                    .await;
                if let (Some(dispatch), Ok(response)) = (dispatch.as_mut(), &result) {
                    // What the script gets, scrubbed as it gets it: what a re-run is answered with.
                    let delivered = response.clone().scrubbed(&state.scrubber);
                    dispatch.delivered(&delivered).await;
                }
                result
            }
            .in_current_span(),
        );
        // A read is dropped with the script's wait for it; a write that may have left runs
        // to its end (the execution waits for it, see `Gate::audited`), so that what the
        // provider did with it is recorded instead of unknown.
        let _abort_on_drop = (!write).then(|| AbortOnDrop(task.abort_handle()));
        match task.await {
            Ok(result) => result,
            Err(_) => Err(EgressError::Cancelled { url: shown }),
        }
    }

    /// Logs a request that is not sent (refused, or answered without sending) and charges
    /// it to the budget like any request, so a script cannot spin on them.
    fn unsent(
        &self,
        record: CallRecord,
        result: Result<ScriptResponse, EgressError>,
    ) -> Result<ScriptResponse, EgressError> {
        let limit = self.state.client.limits().max_requests;
        let result = match self.state.take_budget(limit) {
            Ok(()) => result,
            Err(exhausted) => Err(exhausted),
        };
        match &result {
            Ok(_) => self.state.begin(record),
            Err(error) => self.state.begin(record.failed(error)),
        };
        result
    }

    /// `look` at the calls made so far, as they stand (a call in flight has neither a status
    /// nor an error), and how many more were not listed; without copying them.
    pub fn with_calls<R>(&self, look: impl FnOnce(&[CallRecord], usize) -> R) -> R {
        let log = lock(&self.state.log);
        look(&log.records, log.dropped)
    }

    /// The calls made so far, in order, and how many more were not listed. A call still in
    /// flight is listed as [`UNFINISHED`]: it was sent, and the provider may have acted on it.
    pub fn calls(&self) -> (Vec<CallRecord>, usize) {
        let log = lock(&self.state.log);
        let records = log
            .records
            .iter()
            .map(|record| {
                let mut record = record.clone();
                if record.status.is_none() && record.error.is_none() && !record.planned() {
                    record.error = Some(UNFINISHED.to_owned());
                }
                record
            })
            .collect();
        (records, log.dropped)
    }

    /// Keeps `line` as the script's latest console line, for progress: its first
    /// [`CONSOLE_CHARS`] characters (a worker cuts it so; this side does not rely on it).
    pub fn note_console(&self, line: String) {
        let line = match line.char_indices().nth(CONSOLE_CHARS) {
            Some((end, _)) => line[..end].to_owned(),
            None => line,
        };
        *lock(&self.state.console) = Some(line);
    }

    /// The script's latest console line handed over for progress, scrubbed.
    pub fn console_line(&self) -> Option<String> {
        let line = lock(&self.state.console).clone()?;
        Some(self.state.scrubber.scrub(&line).into_owned())
    }

    /// The scrubber for this session's secret, bounded for this execution.
    pub fn scrubber(&self) -> &Scrubber {
        &self.state.scrubber
    }

    /// Requests one execution may send, retries included.
    pub fn max_requests(&self) -> u32 {
        self.state.client.limits().max_requests
    }

    /// Ends the run's requests: reads in flight end, decisions still being made (a human
    /// asked) end without sending, and a write that has left finishes. What the execution's
    /// end does; a worker does it as soon as the script has reported.
    pub fn end_run(&self) {
        self.state.cancel.cancel();
    }

    /// The path under the base URL a request reaches (`/customers/cus_1` under
    /// `https://h/v1`), as the SDK's templates are written: for a `fetch` to the base URL's
    /// origin as for an `api.request`; `None` for one elsewhere or one that does not resolve.
    pub fn api_path(&self, request: &ScriptRequest) -> Option<String> {
        let base = &self.state.client.config.base_url;
        let url = resolve_url(base, &request.url, request.kind).ok()?;
        if url.origin() != base.origin() {
            return None;
        }
        let under = base.path().trim_end_matches('/');
        let rest = url.path().strip_prefix(under)?;
        (rest.is_empty() || rest.starts_with('/')).then(|| rest.to_owned())
    }

    /// Resolves, checks and encodes the request; on failure returns the URL to log.
    fn check(
        &self,
        request: ScriptRequest,
    ) -> Result<(CheckedRequest, Vec<String>), (String, EgressError)> {
        let client = &self.state.client;
        let credential = client.config.credential.as_ref();
        let fail = |e| (request.url.clone(), e);
        let method = parse_method(&request.method).map_err(fail)?;
        let mut url =
            resolve_url(&client.config.base_url, &request.url, request.kind).map_err(fail)?;
        let mut dropped = Vec::new();
        append_query(&mut url, &request.query, credential, &mut dropped);
        let shown = url.to_string();
        client
            .policy()
            .check(&url)
            .map_err(|e| (shown.clone(), e))?;
        // A download origin is read (by a redirect or the script), never written to, and
        // never sent the credential.
        let anonymous = client.download_only(&url);
        if anonymous && !matches!(method.as_str(), "GET" | "HEAD") {
            let origin = url.origin().ascii_serialization();
            return Err((shown, EgressError::DownloadOnly { origin }));
        }
        let mut headers = HeaderMap::new();
        let scheme = credential.map(|c| &c.scheme);
        for (name, value) in &request.headers {
            if Credential::forbids_header(scheme, name) {
                dropped.push(name.to_ascii_lowercase());
                continue;
            }
            let (name, value) = header_pair(name, value).map_err(|e| (shown.clone(), e))?;
            headers.append(name, value);
        }
        let limit = client.limits().max_request_bytes;
        if let Some(body) = &request.body
            && body.len() > limit
        {
            let error = EgressError::RequestTooLarge {
                size: body.len(),
                limit,
            };
            return Err((shown, error));
        }
        let body = request.body.as_deref().map(Vec::as_slice);
        if let Some(found) = super::overrides::find(url.query(), &request.headers, body) {
            return Err((shown, EgressError::MethodOverride { found }));
        }
        let body = request.body.map(|b| bytes::Bytes::from(b.0));
        Ok((
            CheckedRequest {
                method,
                url,
                headers,
                body,
                anonymous,
            },
            dropped,
        ))
    }
}

impl State {
    /// Logs a request as it leaves (a refusal, with its error, is complete at once);
    /// returns its place, or `None` past the log's bound.
    fn begin(&self, record: CallRecord) -> Option<usize> {
        let mut log = lock(&self.log);
        // Writes are always listed (the request budget bounds them); reads past the bound are
        // counted.
        if log.records.len() >= MAX_LOGGED_CALLS && !is_write(&record.method) {
            log.dropped += 1;
            return None;
        }
        log.records.push(record);
        Some(log.records.len() - 1)
    }

    /// Completes the record at `place` with how its request ended: a status or an error.
    fn complete(&self, place: Option<usize>, complete: impl FnOnce(&mut CallRecord)) {
        let mut log = lock(&self.log);
        if let Some(record) = place.and_then(|i| log.records.get_mut(i)) {
            complete(record);
        }
    }

    /// Takes one request from the budget.
    fn take_budget(&self, limit: u32) -> Result<(), EgressError> {
        if self.sent.fetch_add(1, Ordering::SeqCst) >= limit {
            return Err(EgressError::BudgetExhausted { limit });
        }
        Ok(())
    }

    /// Sends `request`, retrying a 429 or 503 of an idempotent method, and, for a write
    /// that carries an idempotency key (`keyed`), also an attempt whose outcome is unknown (a
    /// timeout, a lost connection): the provider applies a key once.
    #[allow(
        clippy::too_many_arguments,
        reason = "one request's parts, as the checkpoint left them"
    )]
    async fn send_with_retries(
        &self,
        request: CheckedRequest,
        keyed: bool,
        dropped: Vec<String>,
        operation: Option<String>,
        note: Option<Note>,
        dispatch: &mut Option<Box<dyn Dispatch>>,
    ) -> Result<ScriptResponse, EgressError> {
        let shown = request.url.to_string();
        let limits = self.client.limits();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let started = Instant::now();
            let record = CallRecord::new(
                request.method.as_str(),
                &shown,
                operation.clone(),
                dropped.clone(),
            )
            .noted(note.clone());
            let result = match self.take_budget(limits.max_requests) {
                Err(exhausted) => {
                    self.begin(record.failed(&exhausted));
                    Err(exhausted)
                }
                Ok(()) => {
                    if let Some(dispatch) = dispatch.as_mut()
                        && let Err(reason) = dispatch.before(attempt).await
                    {
                        let error = EgressError::Policy {
                            message: reason,
                            awaiting: false,
                        };
                        self.begin(record.failed(&error));
                        return Err(error);
                    }
                    let place = self.begin(record);
                    let result = self.attempt(&request, &shown).await;
                    self.complete(place, |record| {
                        record.duration_ms = started.elapsed().as_millis() as u64;
                        match &result {
                            Ok(raw) => {
                                record.status = Some(raw.status.as_u16());
                                record.bytes = raw.body.len();
                            }
                            // Ended with the execution while in flight: it may have
                            // reached the provider, whichever came first.
                            Err(EgressError::Cancelled { .. }) => {
                                record.error = Some(UNFINISHED.to_owned());
                            }
                            Err(error) => {
                                record.error = Some(cut(&error.to_string(), MAX_LOGGED_ERROR));
                            }
                        }
                    });
                    result
                }
            };
            if let Some(dispatch) = dispatch.as_mut() {
                dispatch.after(attempt_of(attempt, &result)).await;
            }
            if keyed
                && attempt <= MAX_RETRIES
                && matches!(
                    &result,
                    Err(EgressError::Timeout { .. } | EgressError::Network { .. })
                )
                && self.deadline.left() > KEYED_RETRY_ROOM
            {
                continue;
            }
            let raw = result?;
            if let Some(wait) = self.retry_wait(&request.method, keyed, &raw, attempt) {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => continue,
                    _ = self.cut(&request.method).cancelled() => return Err(EgressError::Cancelled { url: shown }),
                }
            }
            return Ok(self.to_script(raw));
        }
    }

    /// One attempt, sent within the deadline.
    async fn attempt(
        &self,
        request: &CheckedRequest,
        shown: &str,
    ) -> Result<RawResponse, EgressError> {
        let left = self.deadline.left();
        let timeout = self.client.limits().request_timeout.min(left);
        tokio::select! {
            result = self.client.send_once(request, timeout, &self.received) => result,
            _ = self.cut(&request.method).cancelled() => Err(EgressError::Cancelled { url: shown.to_owned() }),
        }
    }

    /// What ends a request of `method` in flight: the run's end for a read, the call's for
    /// a write (which finishes, so that what became of it is known).
    fn cut(&self, method: &Method) -> &CancellationToken {
        match is_write(method.as_str()) {
            true => &self.stopped,
            false => &self.cancel,
        }
    }

    /// How long to wait before retrying a 429 or 503, if a retry fits in the deadline.
    fn retry_wait(
        &self,
        method: &Method,
        keyed: bool,
        raw: &RawResponse,
        attempt: u32,
    ) -> Option<Duration> {
        let retryable = matches!(raw.status.as_u16(), 429 | 503);
        let idempotent = keyed
            || matches!(
                *method,
                Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE
            );
        if !retryable || !idempotent || attempt > MAX_RETRIES {
            return None;
        }
        let wait = match raw.headers.get(reqwest::header::RETRY_AFTER) {
            None => Duration::from_secs(1),
            Some(value) => retry_after(value.to_str().ok()?)?,
        };
        let fits = wait + Duration::from_millis(100) < self.deadline.left();
        fits.then_some(wait)
    }

    /// The response as the script will see it, once the gateway has scrubbed it.
    fn to_script(&self, raw: RawResponse) -> ScriptResponse {
        let headers = raw
            .headers
            .iter()
            .filter(|(name, _)| name.as_str() != "set-cookie")
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                (name.to_string(), value)
            })
            .collect();
        ScriptResponse {
            status: raw.status.as_u16(),
            status_text: raw.status.canonical_reason().unwrap_or("").to_owned(),
            url: raw.url.to_string(),
            headers,
            body: String::new(),
            bytes: None,
        }
        .with_body(raw.body)
    }
}

/// A `Retry-After` in seconds, when it is one sdkbox waits for: a number from 0 to
/// [`MAX_RETRY_WAIT`]. It is compared before it becomes a `Duration`, which cannot hold
/// absurd values (`1e308`) and panics on them. HTTP dates and anything else mean no retry.
fn retry_after(value: &str) -> Option<Duration> {
    let seconds = value.trim().parse::<f64>().ok()?;
    let acceptable = seconds.is_finite() && (0.0..=MAX_RETRY_WAIT.as_secs_f64()).contains(&seconds);
    acceptable.then(|| Duration::from_secs_f64(seconds))
}

/// What an attempt's result says about whether it reached the provider.
fn attempt_of(number: u32, result: &Result<RawResponse, EgressError>) -> Attempt {
    match result {
        Ok(raw) => Attempt {
            number,
            reached: Reached::Yes,
            status: Some(raw.status.as_u16()),
            error: None,
        },
        Err(error) => Attempt {
            number,
            reached: match error {
                // Refused before it left.
                EgressError::BudgetExhausted { .. }
                | EgressError::PrivateAddress { .. }
                | EgressError::Setup(_) => Reached::No,
                // Anything else may have reached the provider before it failed.
                _ => Reached::Unknown,
            },
            status: None,
            error: Some(cut(&error.to_string(), MAX_LOGGED_ERROR)),
        },
    }
}

/// The next hop of a read that was redirected within its origin, or to a download origin (a
/// request of its own), or `None` when the response is the script's. A redirect to another
/// origin is refused, allowed or not: a credential sent in a header of its own would go
/// with it; the script may request it itself, checked and logged like any other. A hop to a
/// download origin goes without the credential and with none of the script's headers but
/// `Accept` and `Range`.
fn redirect(
    response: &ScriptResponse,
    method: &str,
    headers: &[(String, String)],
    hops: u32,
    allowed: String,
    download: &dyn Fn(&Url) -> bool,
) -> Result<Option<ScriptRequest>, EgressError> {
    if !matches!(response.status, 301 | 302 | 303 | 307 | 308) {
        return Ok(None);
    }
    let Some(location) = response
        .headers
        .iter()
        .find(|(name, _)| name == "location")
        .map(|(_, value)| value)
    else {
        return Ok(None);
    };
    let Ok(from) = Url::parse(&response.url) else {
        return Ok(None);
    };
    let Ok(to) = from.join(location) else {
        return Ok(None);
    };
    let downloading = download(&to);
    if to.origin() != from.origin() && !downloading {
        return Err(EgressError::RedirectRefused {
            location: to.origin().ascii_serialization(),
            allowed,
        });
    }
    if hops >= MAX_REDIRECTS {
        return Err(EgressError::Network {
            url: response.url.clone(),
            reason: format!("more than {MAX_REDIRECTS} redirects"),
        });
    }
    let headers = match downloading {
        true => headers
            .iter()
            .filter(|(name, _)| {
                name.eq_ignore_ascii_case("accept") || name.eq_ignore_ascii_case("range")
            })
            .cloned()
            .collect(),
        false => headers.to_vec(),
    };
    Ok(Some(ScriptRequest {
        method: method.to_owned(),
        url: to.to_string(),
        kind: UrlKind::Fetch,
        query: Vec::new(),
        headers,
        body: None,
        files: Vec::new(),
        operation: None,
        unencoded: None,
        position: None,
    }))
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn parse_method(method: &str) -> Result<Method, EgressError> {
    let upper = method.to_ascii_uppercase();
    match upper.as_str() {
        "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS" => {
            Method::from_bytes(upper.as_bytes()).map_err(|_| EgressError::InvalidMethod {
                method: method.to_owned(),
            })
        }
        _ => Err(EgressError::InvalidMethod {
            method: method.to_owned(),
        }),
    }
}

/// Reads a script URL: API paths extend the base URL's path; fetch URLs resolve like a browser.
fn resolve_url(base: &Url, given: &str, kind: UrlKind) -> Result<Url, EgressError> {
    // A fragment never leaves (HTTP sends none): it is dropped here, before the URL is
    // classified, shown to a human, fingerprinted or logged, so that all of them are the URL
    // sent (`.../cus_vip#the-test-one` would show a note the provider never sees).
    let mut url = resolve_with_fragment(base, given, kind)?;
    url.set_fragment(None);
    Ok(url)
}

fn resolve_with_fragment(base: &Url, given: &str, kind: UrlKind) -> Result<Url, EgressError> {
    let invalid = |reason: String| EgressError::InvalidUrl {
        url: given.to_owned(),
        reason,
    };
    if let Ok(absolute) = Url::parse(given) {
        return Ok(absolute);
    }
    match kind {
        UrlKind::Fetch => base.join(given).map_err(|e| invalid(e.to_string())),
        UrlKind::Api => {
            let mut dir = base.clone();
            if !dir.path().ends_with('/') {
                let path = format!("{}/", dir.path());
                dir.set_path(&path);
            }
            dir.join(given.trim_start_matches('/'))
                .map_err(|e| invalid(e.to_string()))
        }
    }
}

/// Appends the script's query pairs, dropping any that would carry the credential.
fn append_query(
    url: &mut Url,
    query: &[(String, String)],
    credential: Option<&Credential>,
    dropped: &mut Vec<String>,
) {
    let reserved = credential.and_then(Credential::query_name);
    // The credential's own parameter.
    let refused = |k: &str| reserved.is_some_and(|r| r == k);
    let existing: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    if query.is_empty() && existing.iter().all(|(k, _)| !refused(k)) {
        return;
    }
    let keep = |(k, _): &&(String, String)| {
        let refused = refused(k);
        if refused {
            dropped.push(format!("query:{k}"));
        }
        !refused
    };
    let pairs: Vec<(String, String)> = existing.iter().chain(query).filter(keep).cloned().collect();
    url.set_query(None);
    if !pairs.is_empty() {
        url.query_pairs_mut().extend_pairs(pairs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_extend_the_base_path() {
        let base = Url::parse("https://h.example/v1").unwrap();
        let url = resolve_url(&base, "/customers/42?expand=x", UrlKind::Api).unwrap();
        assert_eq!(url.as_str(), "https://h.example/v1/customers/42?expand=x");
        let url = resolve_url(&base, "/customers", UrlKind::Fetch).unwrap();
        assert_eq!(url.as_str(), "https://h.example/customers");
        let url = resolve_url(&base, "https://other.example/x", UrlKind::Api).unwrap();
        assert_eq!(url.host_str(), Some("other.example"));
    }

    #[test]
    fn absurd_retry_after_values_mean_no_retry() {
        assert_eq!(retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        for absurd in [
            "1e308",
            "-1",
            "NaN",
            "inf",
            "11",
            "Wed, 21 Oct 2026 07:28:00 GMT",
            "",
        ] {
            assert_eq!(retry_after(absurd), None, "{absurd}");
        }
    }

    #[test]
    fn methods_are_checked() {
        assert_eq!(parse_method("get").unwrap(), Method::GET);
        let err = parse_method("BREW").unwrap_err().to_string();
        assert!(err.contains("GET, POST"), "{err}");
    }
}
