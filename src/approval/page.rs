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

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::ask::{Answer, AnswerFuture, Approver, Ask, random_hex};
use super::caller::Caller;
use super::journal::Key;
use super::store::{GRANT_LIFETIME, Granted, Store};
use crate::state::{Change, StateError};

/// The channel's name in logs.
pub const CHANNEL: &str = "approval page";

/// Requests waiting on the page at most, in all and per caller; past them a question is
/// refused, never another one dropped.
const MAX_WAITING: usize = 1_000;
const MAX_WAITING_PER_CALLER: usize = 64;

/// Of [`MAX_WAITING`], how many only a caller with no question on the page may take.
const RESERVED: usize = 100;

/// The page; clones share it. Its questions are in the state store, so any replica serves
/// any question, and a write asked about by several replicas is one question.
#[derive(Clone)]
pub struct ApprovalPage {
    inner: Arc<Inner>,
}

struct Inner {
    origin: String,
    host: String,
    store: Store,
    public: bool,
}

/// One question on the page, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Question {
    ask: Ask,
    key: Key,
    caller: Caller,
    code: String,
    token: String,
    decided: Option<String>,
}

fn question_key(id: &str) -> String {
    format!("question:{id}")
}

/// The set of the questions one MCP session asked, by its [`session_digest`].
///
/// [`session_digest`]: super::caller::session_digest
fn session_questions(session: &str) -> String {
    format!("questions-of-session:{session}")
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
        let page = Self::at(format!("http://{local}"), local.to_string(), store, false);
        let app = page.routes();
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "the approval page stopped");
            }
        });
        tracing::info!(origin = %page.inner.origin, "approval page listening");
        Ok(page)
    }

    /// The page served by the HTTP server itself, on the public `origin` humans reach it by
    /// (through the deployment's load balancer): [`ApprovalPage::routes`] are for that server.
    pub fn public(origin: &url::Url, store: Store) -> Result<Self, String> {
        let host = origin
            .host_str()
            .ok_or_else(|| format!("the approval page's URL {origin} has no host"))?;
        let loopback = matches!(host, "localhost" | "127.0.0.1" | "[::1]");
        if origin.scheme() != "https" && !(origin.scheme() == "http" && loopback) {
            return Err(format!(
                "the approval page's URL {origin} must be https (http only on loopback)"
            ));
        }
        let host = match origin.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let text = origin.origin().ascii_serialization();
        Ok(Self::at(text, host, store, true))
    }

    fn at(origin: String, host: String, store: Store, public: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                origin,
                host,
                store,
                public,
            }),
        }
    }

    /// The page's routes.
    pub fn routes(&self) -> axum::Router {
        axum::Router::new()
            .route("/approve/{id}", get(show).post(decide))
            .with_state(self.clone())
    }

    /// Whether the HTTP server serves the page (on its public URL).
    pub fn is_public(&self) -> bool {
        self.inner.public
    }

    /// Where the page is.
    pub fn origin(&self) -> &str {
        &self.inner.origin
    }

    fn state(&self) -> &crate::state::StateStore {
        self.inner.store.state()
    }

    /// Puts a request on the page, or finds it there (asked by this or another replica);
    /// returns its link, or why it cannot.
    async fn put(&self, ask: Ask, key: Key, caller: &Caller, code: &str) -> Result<String, String> {
        let failed =
            |error: StateError| format!("the approval page cannot take questions now ({error})");
        let index = format!("asked:{code}:{}", key.fingerprint.0);
        if let Some(id) = self.state().get(&index).await.map_err(failed)?
            && self.open_question(&id).await.map_err(failed)?
        {
            return Ok(self.link(&id));
        }
        let unguessable = || "no randomness for an unguessable link".to_owned();
        let id = random_hex(16).ok_or_else(unguessable)?;
        let token = random_hex(16).ok_or_else(unguessable)?;
        let own = format!("questions-of:{}", caller.share_key());
        let state = self.state();
        // The last of the page's room is kept for callers with no question on it: whether
        // this caller has others is read only once the page is that full.
        let mut room = state
            .admit(&own, &id, GRANT_LIFETIME, MAX_WAITING_PER_CALLER)
            .await
            .map_err(failed)?
            && state
                .admit("questions", &id, GRANT_LIFETIME, MAX_WAITING - RESERVED)
                .await
                .map_err(failed)?;
        if !room && state.members(&own).await.map_err(failed)? == [id.clone()] {
            room = state
                .admit("questions", &id, GRANT_LIFETIME, MAX_WAITING)
                .await
                .map_err(failed)?;
        }
        // Known by its session too, for `forget_session` (bounded as the page is; a question
        // this cannot record is only kept until it expires).
        if room
            && let Some(session) = caller.session()
            && let Err(error) = state
                .admit(
                    &session_questions(session),
                    &id,
                    GRANT_LIFETIME,
                    MAX_WAITING,
                )
                .await
        {
            tracing::warn!(%error, "a question is not known by its session");
        }
        if !room {
            let _ = state.dismiss(&own, &id).await;
            return Err(format!(
                "the approval page already holds as many questions as it keeps (up to \
                 {MAX_WAITING_PER_CALLER} of one caller's, whatever its sessions); ask the user to decide those first, \
                 or wait for them to expire after {} minutes",
                GRANT_LIFETIME.as_secs() / 60
            ));
        }
        let question = Question {
            ask,
            key,
            caller: caller.clone(),
            code: code.to_owned(),
            token,
            decided: None,
        };
        let text = serde_json::to_string(&question).map_err(|e| e.to_string())?;
        state
            .put(&question_key(&id), &text, GRANT_LIFETIME)
            .await
            .map_err(failed)?;
        if !state
            .put_new(&index, &id, GRANT_LIFETIME)
            .await
            .map_err(failed)?
        {
            // Another replica asked the same write meanwhile: its question is the one.
            if let Some(theirs) = state.get(&index).await.map_err(failed)?
                && self.open_question(&theirs).await.map_err(failed)?
            {
                let _ = state.take(&question_key(&id)).await;
                let _ = state.dismiss(&own, &id).await;
                let _ = state.dismiss("questions", &id).await;
                return Ok(self.link(&theirs));
            }
            state
                .put(&index, &id, GRANT_LIFETIME)
                .await
                .map_err(failed)?;
        }
        Ok(self.link(&id))
    }

    /// Forgets the undecided questions of an MCP session its client closed (by its digest,
    /// see `Caller::session`): no run of that
    /// session can continue from a decision any more (its caller was the session), and they
    /// would hold the room of the page and of their principal until they expired. Returns how
    /// many were forgotten.
    pub(super) async fn forget_session(&self, session: &str) -> Result<usize, StateError> {
        let state = self.state();
        let of_session = session_questions(session);
        let mut forgotten = 0;
        for id in state.members(&of_session).await? {
            if let Some(question) = state.read::<Question>(&question_key(&id)).await?
                && question.decided.is_none()
            {
                state.take(&question_key(&id)).await?;
                state.dismiss("questions", &id).await?;
                let own = format!("questions-of:{}", question.caller.share_key());
                state.dismiss(&own, &id).await?;
                forgotten += 1;
            }
            state.dismiss(&of_session, &id).await?;
        }
        Ok(forgotten)
    }

    /// Whether question `id` is there and undecided.
    async fn open_question(&self, id: &str) -> Result<bool, StateError> {
        let question: Option<Question> = self.state().read(&question_key(id)).await?;
        Ok(question.is_some_and(|q| q.decided.is_none()))
    }

    fn link(&self, id: &str) -> String {
        format!("{}/approve/{id}", self.inner.origin)
    }

    /// Whether a decision comes from a browser showing the page: its form, posted from its
    /// own origin (a browser always says so, with `Origin` and `Sec-Fetch-Site`), through its
    /// own host name. A program that fetched the link (an agent's web tool) sends neither
    /// unless it forges them: the link is still a credential (see the README).
    fn posted_from_page(&self, headers: &HeaderMap) -> bool {
        let has = |name: &str| headers.contains_key(name);
        has(header::ORIGIN.as_str()) && has("sec-fetch-site") && self.same_origin(headers)
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

    fn answers_later(&self) -> bool {
        true
    }

    fn ask(&self, ask: Ask, key: Key, _timeout: Duration) -> AnswerFuture {
        let what = ask.request.what();
        let (page, caller, code) = (self.page.clone(), self.caller.clone(), self.code.clone());
        Box::pin(async move {
            match page.put(ask, key, &caller, &code).await {
                Ok(link) => Answer::Later {
                    message: format!(
                        "{what} needs the user's approval and was not sent. Show the user this \
                         link and ask them to approve or deny it there: {link} . Once they have, \
                         run exactly the same code again: writes this run already sent are not \
                         sent again, the approved request then goes out (once), and a denied one \
                         fails"
                    ),
                },
                Err(message) => Answer::Unavailable { message },
            }
        })
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
    let item = match page.state().read::<Question>(&question_key(&id)).await {
        Ok(Some(item)) => item,
        Ok(None) => {
            return refused(
                StatusCode::NOT_FOUND,
                "No such request: it expired, or the link is wrong.",
            );
        }
        Err(error) => return refused(StatusCode::SERVICE_UNAVAILABLE, &error.to_string()),
    };
    let body = match &item.decided {
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
    if !page.posted_from_page(&headers) {
        return refused(
            StatusCode::FORBIDDEN,
            "This page only accepts its own forms, posted by a browser showing it.",
        );
    }
    let (granted, decided, said) = match form.decision.as_str() {
        "approve" => (Some(false), "approved", "Approved"),
        "approve_all" => (
            Some(true),
            "approved, with every write of this execution",
            "Approved, with every write of this execution",
        ),
        "deny" => (None, "denied", "Denied"),
        _ => return refused(StatusCode::BAD_REQUEST, "Unknown decision."),
    };
    // Decided first, in one step: of two forms posted at once, one decides.
    let key = question_key(&id);
    let marked = page
        .state()
        .update::<Question, Result<Question, (StatusCode, &str)>>(&key, GRANT_LIFETIME, |item| {
            let Some(mut item) = item else {
                return Change::Keep(Err((
                    StatusCode::NOT_FOUND,
                    "No such request: it expired, or the link is wrong.",
                )));
            };
            if !bool::from(item.token.as_bytes().ct_eq(form.token.as_bytes())) {
                return Change::Keep(Err((
                    StatusCode::FORBIDDEN,
                    "The form is stale; reload the page.",
                )));
            }
            if item.decided.is_some() {
                return Change::Keep(Err((
                    StatusCode::CONFLICT,
                    "This request was already decided.",
                )));
            }
            item.decided = Some(decided.to_owned());
            Change::Write(item.clone(), Ok(item))
        })
        .await;
    let item = match marked {
        Ok(Ok(item)) => item,
        Ok(Err((status, why))) => return refused(status, why),
        Err(error) => return refused(StatusCode::SERVICE_UNAVAILABLE, &error.to_string()),
    };
    let granted = match granted {
        Some(false) => Granted::One(item.key.clone()),
        Some(true) => Granted::All,
        None => Granted::Denied(item.key.clone()),
    };
    if let Err(full) = page
        .inner
        .store
        .give(&item.caller, &item.code, granted, "the user")
        .await
    {
        // Not given: the question is open again.
        let _ = page
            .state()
            .update::<Question, ()>(&key, GRANT_LIFETIME, |question| match question {
                Some(mut question) => {
                    question.decided = None;
                    Change::Write(question, ())
                }
                None => Change::Keep(()),
            })
            .await;
        return refused(StatusCode::SERVICE_UNAVAILABLE, &full.to_string());
    }
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
