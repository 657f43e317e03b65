//! The loopback approval page, for clients that cannot ask their user (Claude Desktop
//! declares no elicitation): sdkbox serves a small page on 127.0.0.1 for each write that
//! needs approval, the script's call fails with the link for the model to show, and the
//! user's decision waits for the re-run of the same code.
//!
//! The page is safe to open: an unguessable id per request, a form token checked in
//! constant time, `Origin`, `Sec-Fetch-Site` and `Host` checked (no cross-site form, no DNS
//! rebinding), no secret on it, nothing cached or framed, no referrer sent to other sites (with `no-referrer`, Chromium would send its own form with `Origin: null`). The sandbox
//! cannot reach it: loopback addresses are refused by egress.

use crate::lock::lock;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tokio::time::Instant;

use super::ask::{Answer, AnswerFuture, Approver, Ask, Fingerprint, random_hex};
use super::grants::{GRANT_LIFETIME, Granted, Grants};
use super::{Approvals, Gate, Retry};

/// The channel's name in logs.
pub const CHANNEL: &str = "approval page";

/// Requests waiting on the page at most; the oldest go first.
const MAX_WAITING: usize = 1_000;

/// The page server; clones share it.
#[derive(Clone)]
pub struct ApprovalPage {
    inner: Arc<Inner>,
}

struct Inner {
    origin: String,
    host: String,
    grants: Grants,
    waiting: Mutex<HashMap<String, Waiting>>,
}

struct Waiting {
    ask: Ask,
    fingerprint: Fingerprint,
    code: String,
    token: String,
    since: Instant,
    decided: Option<&'static str>,
}

impl ApprovalPage {
    /// Serves the page on `addr` (a loopback address; port 0 picks one); decisions go to
    /// `grants`.
    pub async fn start(addr: SocketAddr, grants: Grants) -> std::io::Result<Self> {
        if !addr.ip().is_loopback() {
            return Err(std::io::Error::other(format!(
                "the approval page listens on loopback only, not {addr}"
            )));
        }
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let page = Self {
            inner: Arc::new(Inner {
                origin: format!("http://{local}"),
                host: local.to_string(),
                grants,
                waiting: Mutex::default(),
            }),
        };
        let app = axum::Router::new()
            .route("/approve/{id}", get(show).post(decide))
            .with_state(page.clone());
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "the approval page stopped");
            }
        });
        tracing::info!(origin = %page.inner.origin, "approval page listening");
        Ok(page)
    }

    /// Where the page is.
    pub fn origin(&self) -> &str {
        &self.inner.origin
    }

    /// The gate of a run whose human is asked here: it continues what earlier runs of the
    /// same code sent (their writes are answered from the journal, not sent again).
    pub fn gate(&self, approvals: Approvals, digest: String, dry_run: bool) -> Gate {
        let approver = Arc::new(PageApprover::new(self.clone(), &digest));
        // A dry run sends no write, so it neither needs nor spends the journal.
        let journal = match dry_run {
            true => Default::default(),
            false => self.inner.grants.take_journal(&digest),
        };
        let carried = Retry {
            journal,
            ..Retry::default()
        };
        Gate::new(approvals, Some(approver), digest, dry_run).with_retry(carried, CHANNEL)
    }

    /// After a run gated by [`ApprovalPage::gate`]: one that waits for a decision keeps what
    /// it sent for its re-run.
    pub fn finished(&self, gate: &Gate) {
        if !gate.waiting().is_empty() {
            self.inner
                .grants
                .keep_journal(gate.code(), gate.carried().journal);
        }
    }

    /// Puts a request on the page, or finds it there; returns its link, or `None` when no
    /// unguessable id can be made.
    fn put(&self, ask: Ask, fingerprint: Fingerprint, code: &str) -> Option<String> {
        let mut waiting = lock(&self.inner.waiting);
        let now = Instant::now();
        waiting.retain(|_, w| now.duration_since(w.since) < GRANT_LIFETIME);
        let found = waiting
            .iter()
            .find(|(_, w)| w.decided.is_none() && w.code == code && w.fingerprint == fingerprint)
            .map(|(id, _)| id.clone());
        let id = match found {
            Some(id) => id,
            None => {
                if waiting.len() >= MAX_WAITING
                    && let Some(oldest) = waiting
                        .iter()
                        .min_by_key(|(_, w)| w.since)
                        .map(|(id, _)| id.clone())
                {
                    waiting.remove(&oldest);
                }
                let (id, token) = (random_hex(16)?, random_hex(16)?);
                waiting.insert(
                    id.clone(),
                    Waiting {
                        ask,
                        fingerprint,
                        code: code.to_owned(),
                        token,
                        since: now,
                        decided: None,
                    },
                );
                id
            }
        };
        Some(format!("{}/approve/{id}", self.inner.origin))
    }

    /// Whether a request to the page comes from the page itself, through its own host name.
    fn same_origin(&self, headers: &HeaderMap) -> bool {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
        };
        let host_ok = text(header::HOST.as_str()).is_some_and(|h| {
            h == self.inner.host || h == self.inner.host.replacen("127.0.0.1", "localhost", 1)
        });
        let origin_ok = text(header::ORIGIN.as_str()).is_none_or(|o| {
            o == self.inner.origin || o == self.inner.origin.replacen("127.0.0.1", "localhost", 1)
        });
        let site_ok = text("sec-fetch-site").is_none_or(|s| s == "same-origin" || s == "none");
        host_ok && origin_ok && site_ok
    }
}

/// The page as an approver: the call fails at once with the link, and the decision waits
/// for the re-run.
pub struct PageApprover {
    page: ApprovalPage,
    code: String,
}

impl PageApprover {
    /// Asks on `page` for the execution of the code with this digest.
    pub fn new(page: ApprovalPage, code: &str) -> Self {
        Self {
            page,
            code: code.to_owned(),
        }
    }
}

impl Approver for PageApprover {
    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn ask(&self, ask: Ask, fingerprint: Fingerprint, _timeout: Duration) -> AnswerFuture {
        let what = ask.request.what();
        let Some(link) = self.page.put(ask, fingerprint, &self.code) else {
            let by = "sdkbox (no randomness for an unguessable link)".to_owned();
            return Box::pin(async move { Answer::Deny { by } });
        };
        let message = format!(
            "{what} needs the user's approval and was not sent. Show the user this link and ask \
             them to approve or deny it there: {link} . Once they have, run exactly the same \
             code again: the approved request then goes out (once); a denied one fails"
        );
        Box::pin(async move { Answer::Later { message } })
    }
}

async fn show(
    State(page): State<ApprovalPage>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !page.same_origin(&headers) {
        return refused(
            StatusCode::FORBIDDEN,
            "This page only answers its own address.",
        );
    }
    let waiting = lock(&page.inner.waiting);
    let Some(item) = waiting.get(&id) else {
        return refused(
            StatusCode::NOT_FOUND,
            "No such request: it expired, or the link is wrong.",
        );
    };
    let body = match item.decided {
        Some(decided) => format!("<p class=done>Already decided: <b>{decided}</b>.</p>"),
        None => format!(
            "<form method=post>\
             <input type=hidden name=token value=\"{token}\">\
             <button name=decision value=approve id=approve>Approve this request</button>\
             <button name=decision value=approve_all id=approve_all>Approve every write of this execution</button>\
             <button name=decision value=deny id=deny>Deny</button>\
             </form>",
            token = item.token
        ),
    };
    let ask = &item.ask;
    let headers = ask.request.headers.join("\n");
    let rows = [
        ("Execution", ask.execution.as_str()),
        (
            "Operation",
            ask.request
                .operation
                .as_deref()
                .unwrap_or("(no spec operation)"),
        ),
        ("Method", ask.request.method.as_str()),
        ("URL", ask.request.url.as_str()),
        ("Headers", &headers),
        ("Why", ask.because.as_str()),
    ]
    .iter()
    .map(|(k, v)| format!("<tr><th>{k}</th><td><pre>{}</pre></td></tr>", escape(v)))
    .collect::<String>();
    let request_body = ask
        .request
        .body
        .as_deref()
        .map(|b| format!("<h2>Body</h2><pre>{}</pre>", escape(b)))
        .unwrap_or_default();
    page_response(
        StatusCode::OK,
        &format!(
            "<h1>An agent asks to send a request</h1><table>{rows}</table>{request_body}{body}"
        ),
    )
}

#[derive(Deserialize)]
struct DecisionForm {
    token: String,
    decision: String,
}

async fn decide(
    State(page): State<ApprovalPage>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<DecisionForm>,
) -> Response {
    if !page.same_origin(&headers) {
        return refused(
            StatusCode::FORBIDDEN,
            "This page only accepts its own forms.",
        );
    }
    let mut waiting = lock(&page.inner.waiting);
    let Some(item) = waiting.get_mut(&id) else {
        return refused(
            StatusCode::NOT_FOUND,
            "No such request: it expired, or the link is wrong.",
        );
    };
    if !bool::from(item.token.as_bytes().ct_eq(form.token.as_bytes())) {
        return refused(StatusCode::FORBIDDEN, "The form is stale; reload the page.");
    }
    if item.decided.is_some() {
        return refused(StatusCode::CONFLICT, "This request was already decided.");
    }
    let (granted, decided, said) = match form.decision.as_str() {
        "approve" => (
            Granted::One(item.fingerprint.clone()),
            "approved",
            "Approved",
        ),
        "approve_all" => (
            Granted::All,
            "approved, with every write of this execution",
            "Approved, with every write of this execution",
        ),
        "deny" => (
            Granted::Denied(item.fingerprint.clone()),
            "denied",
            "Denied",
        ),
        _ => return refused(StatusCode::BAD_REQUEST, "Unknown decision."),
    };
    item.decided = Some(decided);
    page.inner.grants.give(&item.code, granted, "the user");
    tracing::info!(execution = %item.ask.execution, decided, "approval page decision");
    page_response(
        StatusCode::OK,
        &format!("<h1 id=result>{said}</h1><p>Tell the agent to run the same code again.</p>"),
    )
}

fn refused(status: StatusCode, text: &str) -> Response {
    page_response(
        status,
        &format!("<h1>Not possible</h1><p>{}</p>", escape(text)),
    )
}

fn page_response(status: StatusCode, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html><head><meta charset=utf-8><title>sdkbox: approval</title>\
         <style>body{{font-family:sans-serif;max-width:50em;margin:2em auto}}th{{text-align:left;\
         padding-right:1em}}pre{{background:#f4f4f4;padding:1em;white-space:pre-wrap}}button\
         {{margin:.5em;padding:.5em 1em}}</style></head><body>{body}</body></html>"
    );
    let mut response = (status, Html(html)).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}
