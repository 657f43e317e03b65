//! The loopback approval page, for clients that cannot ask their user (Claude Desktop
//! declares no elicitation): sdkbox serves a small page on 127.0.0.1 for each write that
//! needs approval, the script's call fails with the link for the model to show, and the
//! user's decision waits for the re-run of the same code by the same caller, which continues
//! the run that asked (its chain, see `store.rs`): writes already sent are answered from the
//! journal, never sent again.
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

use super::ask::{Answer, AnswerFuture, Approver, Ask, random_hex};
use super::caller::Caller;
use super::journal::Key;
use super::store::{GRANT_LIFETIME, Granted, Store};

/// The channel's name in logs.
pub const CHANNEL: &str = "approval page";

/// Requests waiting on the page at most, in all and per caller; past them a question is
/// refused, never another one dropped.
const MAX_WAITING: usize = 1_000;
const MAX_WAITING_PER_CALLER: usize = 64;

/// The page server; clones share it.
#[derive(Clone)]
pub struct ApprovalPage {
    inner: Arc<Inner>,
}

struct Inner {
    origin: String,
    host: String,
    store: Store,
    waiting: Mutex<HashMap<String, Waiting>>,
}

struct Waiting {
    ask: Ask,
    key: Key,
    caller: Caller,
    code: String,
    token: String,
    since: Instant,
    decided: Option<&'static str>,
}

impl ApprovalPage {
    /// Serves the page on `addr` (a loopback address; port 0 picks one); decisions go to
    /// `store`.
    pub async fn start(addr: SocketAddr, store: Store) -> std::io::Result<Self> {
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
                store,
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

    /// Puts a request on the page, or finds it there; returns its link, or why it cannot.
    fn put(&self, ask: Ask, key: Key, caller: &Caller, code: &str) -> Result<String, String> {
        let mut waiting = lock(&self.inner.waiting);
        let now = Instant::now();
        waiting.retain(|_, w| now.duration_since(w.since) < GRANT_LIFETIME);
        let found = waiting
            .iter()
            .find(|(_, w)| {
                w.decided.is_none()
                    && w.caller == *caller
                    && w.code == code
                    && w.key.fingerprint == key.fingerprint
            })
            .map(|(id, _)| id.clone());
        let id = match found {
            Some(id) => id,
            None => {
                let own = waiting.values().filter(|w| w.caller == *caller).count();
                if own >= MAX_WAITING_PER_CALLER || waiting.len() >= MAX_WAITING {
                    return Err(format!(
                        "the approval page already holds as many questions as it keeps ({} of                          this caller's); ask the user to decide those first, or wait for them                          to expire after {} minutes",
                        own,
                        GRANT_LIFETIME.as_secs() / 60
                    ));
                }
                let unguessable = || "no randomness for an unguessable link".to_owned();
                let id = random_hex(16).ok_or_else(unguessable)?;
                let token = random_hex(16).ok_or_else(unguessable)?;
                waiting.insert(
                    id.clone(),
                    Waiting {
                        ask,
                        key,
                        caller: caller.clone(),
                        code: code.to_owned(),
                        token,
                        since: now,
                        decided: None,
                    },
                );
                id
            }
        };
        Ok(format!("{}/approve/{id}", self.inner.origin))
    }

    /// Whether a request to the page comes from the page itself, through its own host name.
    fn same_origin(&self, headers: &HeaderMap) -> bool {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
        };
        let origin_ok = text(header::ORIGIN.as_str()).is_none_or(|o| {
            o == self.inner.origin || o == self.inner.origin.replacen("127.0.0.1", "localhost", 1)
        });
        let site_ok = text("sec-fetch-site").is_none_or(|s| s == "same-origin" || s == "none");
        self.own_host(headers) && origin_ok && site_ok
    }

    /// Whether a request names the page's own host (no DNS rebinding).
    fn own_host(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|h| {
                h == self.inner.host || h == self.inner.host.replacen("127.0.0.1", "localhost", 1)
            })
    }

    /// Whether a request may show the page: from the page itself, or a top-level navigation
    /// from anywhere (a link in a chat client's web page), which reads the page and can
    /// decide nothing (the form's POST keeps every check); never inside a frame.
    fn may_show(&self, headers: &HeaderMap) -> bool {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let navigation = text("sec-fetch-mode") == Some("navigate")
            && text("sec-fetch-dest").is_none_or(|d| d == "document");
        self.same_origin(headers) || (self.own_host(headers) && navigation)
    }
}

/// The page as an approver: the call fails at once with the link, and the decision waits
/// for the re-run (the gate has made the run's journal its code's chain first, so that the
/// re-run answers the writes it sent instead of sending them again).
pub struct PageApprover {
    page: ApprovalPage,
    caller: Caller,
    code: String,
}

impl PageApprover {
    /// Asks on `page` for `caller`'s run of the code with this digest.
    pub fn new(page: ApprovalPage, caller: Caller, code: &str) -> Self {
        Self {
            page,
            caller,
            code: code.to_owned(),
        }
    }
}

impl Approver for PageApprover {
    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn ask(&self, ask: Ask, key: Key, _timeout: Duration) -> AnswerFuture {
        let what = ask.request.what();
        let answer = match self.page.put(ask, key, &self.caller, &self.code) {
            Ok(link) => Answer::Later {
                message: format!(
                    "{what} needs the user's approval and was not sent. Show the user this link \
                     and ask them to approve or deny it there: {link} . Once they have, run \
                     exactly the same code again: writes this run already sent are not sent \
                     again, the approved request then goes out (once), and a denied one fails"
                ),
            },
            Err(message) => Answer::Unavailable { message },
        };
        Box::pin(async move { answer })
    }
}

async fn show(
    State(page): State<ApprovalPage>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !page.may_show(&headers) {
        return refused(
            StatusCode::FORBIDDEN,
            "This page only answers its own address, and links opened in a browser tab.",
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
        .map(|b| {
            let heading = escape(&ask.request.body_heading());
            format!("<h2>Body</h2><p>{heading}</p><pre>{}</pre>", escape(b))
        })
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
        "approve" => (Granted::One(item.key.clone()), "approved", "Approved"),
        "approve_all" => (
            Granted::All,
            "approved, with every write of this execution",
            "Approved, with every write of this execution",
        ),
        "deny" => (Granted::Denied(item.key.clone()), "denied", "Denied"),
        _ => return refused(StatusCode::BAD_REQUEST, "Unknown decision."),
    };
    if let Err(full) = page
        .inner
        .store
        .give(&item.caller, &item.code, granted, "the user")
    {
        return refused(StatusCode::SERVICE_UNAVAILABLE, &full.to_string());
    }
    item.decided = Some(decided);
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

/// `text` safe in HTML text and attribute values.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}
