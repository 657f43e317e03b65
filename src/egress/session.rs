//! One execution's use of the network: its budget, its deadline, its call log.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use url::Url;

use super::EgressError;
use super::auth::Credential;
use super::client::{CheckedRequest, Client, RawResponse, header_pair};

const MAX_RETRIES: u32 = 2;
const MAX_RETRY_WAIT: Duration = Duration::from_secs(10);

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
    /// The encoded body, if any.
    #[serde(default)]
    pub body: Option<String>,
    /// The spec operation this request calls, when it comes from the SDK.
    #[serde(default)]
    pub operation: Option<String>,
}

/// What the script gets back: scrubbed of the secret.
#[derive(Debug, Serialize, Deserialize)]
pub struct ScriptResponse {
    /// HTTP status code.
    pub status: u16,
    /// The status's reason phrase.
    pub status_text: String,
    /// The final URL, after redirects.
    pub url: String,
    /// Response headers, lower-case names.
    pub headers: Vec<(String, String)>,
    /// The body as text (invalid UTF-8 replaced).
    pub body: String,
}

/// One entry of the call log returned with every execution.
#[derive(Debug, Clone, Serialize)]
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped_headers: Vec<String>,
}

/// The network budget and log of one execution. Cheap to clone; clones share the budget.
#[derive(Clone)]
pub struct EgressSession {
    state: Arc<State>,
}

struct State {
    client: Arc<Client>,
    deadline: Instant,
    cancel: CancellationToken,
    sent: AtomicU32,
    log: Mutex<Vec<CallRecord>>,
}

impl EgressSession {
    pub(super) fn new(client: Arc<Client>, deadline: Instant, cancel: CancellationToken) -> Self {
        Self {
            state: Arc::new(State {
                client,
                deadline,
                cancel,
                sent: AtomicU32::new(0),
                log: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Checks and sends a script's request on the long-lived runtime; the request is
    /// aborted if this future is dropped (the execution ended) or the execution is cancelled.
    pub async fn send(&self, request: ScriptRequest) -> Result<ScriptResponse, EgressError> {
        let method = request.method.to_ascii_uppercase();
        let operation = request.operation.clone();
        let (checked, dropped) = match self.check(request) {
            Ok(checked) => checked,
            Err((url, error)) => {
                self.record(CallRecord {
                    method,
                    url,
                    operation,
                    status: None,
                    duration_ms: 0,
                    bytes: 0,
                    error: Some(error.to_string()),
                    dropped_headers: Vec::new(),
                });
                return Err(error);
            }
        };
        let state = self.state.clone();
        let task = self
            .state
            .client
            .runtime
            .spawn(async move { state.send_with_retries(checked, dropped, operation).await });
        let abort = task.abort_handle();
        let _abort_on_drop = AbortOnDrop(abort);
        match task.await {
            Ok(result) => result,
            Err(_) => Err(EgressError::Cancelled { url: String::new() }),
        }
    }

    /// The calls made so far, in order.
    pub fn calls(&self) -> Vec<CallRecord> {
        match self.state.log.lock() {
            Ok(log) => log.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn record(&self, record: CallRecord) {
        self.state.record(record);
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
        let shown = client.scrubber().scrub(url.as_str()).into_owned();
        client
            .policy()
            .check(&url)
            .map_err(|e| (shown.clone(), e))?;
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
        let body = request.body.map(bytes::Bytes::from);
        Ok((
            CheckedRequest {
                method,
                url,
                headers,
                body,
            },
            dropped,
        ))
    }
}

impl State {
    fn record(&self, record: CallRecord) {
        match self.log.lock() {
            Ok(mut log) => log.push(record),
            Err(poisoned) => poisoned.into_inner().push(record),
        }
    }

    async fn send_with_retries(
        &self,
        request: CheckedRequest,
        dropped: Vec<String>,
        operation: Option<String>,
    ) -> Result<ScriptResponse, EgressError> {
        let scrubber = self.client.scrubber();
        let shown = scrubber.scrub(request.url.as_str()).into_owned();
        let limits = self.client.limits();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let started = Instant::now();
            let mut record = CallRecord {
                method: request.method.to_string(),
                url: shown.clone(),
                operation: operation.clone(),
                status: None,
                duration_ms: 0,
                bytes: 0,
                error: None,
                dropped_headers: dropped.clone(),
            };
            let result = self.attempt(&request, &shown, limits.max_requests).await;
            record.duration_ms = started.elapsed().as_millis() as u64;
            match &result {
                Ok(raw) => {
                    record.status = Some(raw.status.as_u16());
                    record.bytes = raw.body.len();
                }
                Err(error) => record.error = Some(error.to_string()),
            }
            self.record(record);
            let raw = result?;
            if let Some(wait) = self.retry_wait(&request.method, &raw, attempt) {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => continue,
                    _ = self.cancel.cancelled() => return Err(EgressError::Cancelled { url: shown }),
                }
            }
            return Ok(self.to_script(raw));
        }
    }

    /// One attempt: takes a unit of budget, then sends within the deadline.
    async fn attempt(
        &self,
        request: &CheckedRequest,
        shown: &str,
        limit: u32,
    ) -> Result<RawResponse, EgressError> {
        if self.sent.fetch_add(1, Ordering::SeqCst) >= limit {
            return Err(EgressError::BudgetExhausted { limit });
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        let timeout = self.client.limits().request_timeout.min(left);
        tokio::select! {
            result = self.client.send_once(request, timeout) => result,
            _ = self.cancel.cancelled() => Err(EgressError::Cancelled { url: shown.to_owned() }),
        }
    }

    /// How long to wait before retrying a 429 or 503, if a retry fits in the deadline.
    fn retry_wait(&self, method: &Method, raw: &RawResponse, attempt: u32) -> Option<Duration> {
        let retryable = matches!(raw.status.as_u16(), 429 | 503);
        let idempotent = matches!(
            *method,
            Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE
        );
        if !retryable || !idempotent || attempt > MAX_RETRIES {
            return None;
        }
        let wait = raw
            .headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(Duration::from_secs(1), Duration::from_secs_f64);
        let fits = Instant::now() + wait + Duration::from_millis(100) < self.deadline;
        (wait <= MAX_RETRY_WAIT && fits).then_some(wait)
    }

    fn to_script(&self, raw: RawResponse) -> ScriptResponse {
        let scrubber = self.client.scrubber();
        let headers = raw
            .headers
            .iter()
            .filter(|(name, _)| name.as_str() != "set-cookie")
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes());
                (name.to_string(), scrubber.scrub(&value).into_owned())
            })
            .collect();
        let body = String::from_utf8_lossy(&raw.body);
        ScriptResponse {
            status: raw.status.as_u16(),
            status_text: raw.status.canonical_reason().unwrap_or("").to_owned(),
            url: scrubber.scrub(raw.url.as_str()).into_owned(),
            headers,
            body: scrubber.scrub(&body).into_owned(),
        }
    }
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
    let existing: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    if query.is_empty() && reserved.is_none_or(|r| existing.iter().all(|(k, _)| k != r)) {
        return;
    }
    let keep = |(k, _): &&(String, String)| {
        let reserved = reserved.is_some_and(|r| r == k);
        if reserved {
            dropped.push(format!("query:{k}"));
        }
        !reserved
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
    fn methods_are_checked() {
        assert_eq!(parse_method("get").unwrap(), Method::GET);
        let err = parse_method("BREW").unwrap_err().to_string();
        assert!(err.contains("GET, POST"), "{err}");
    }
}
