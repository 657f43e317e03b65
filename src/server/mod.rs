//! The MCP server: exactly two tools, `search_docs` and `execute`, for one provider, over
//! stdio or streamable HTTP (rmcp). Every `execute` runs in the worker pool.

mod approve;
mod client_address;
mod fair_http;
mod files;
mod http;
mod lifecycle;
mod link_ask;
mod linking;
mod listen;
mod ops;
mod sessions;
mod shared_sessions;
mod signin;
mod stdio;
mod tasks;
mod tools;

pub use http::{HttpOptions, serve_http};
pub use lifecycle::Lifecycle;
pub use listen::ConnectionLimits;

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, Implementation, ProgressNotificationParam,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use tracing::Instrument;

use crate::approval::{Approvals, Caller, Channel, Ending, Rule};
use crate::egress::{Credential, Egress, EgressConfig};
use crate::fair::{FairQueue, Principal, QueueLimits};
use crate::sandbox::ExecLimits;
use crate::sdk::Sdk;
use crate::search::{DEFAULT_LIMIT, DocsIndex, Filters};
use crate::signin::{SignIn, SignedIn};
use crate::typecheck::Verdict;
use crate::worker::{Pool, Target};
use tokio_util::sync::CancellationToken;

/// What the server instructs the model, once, at initialisation.
const INSTRUCTIONS: &str = "This server gives you one API through two tools. Work in two steps: \
call search_docs to find the operations you need (each hit shows the exact SDK call), then \
call execute with TypeScript that calls them through `api` and returns only what you need \
(filter, join and count in code, not in the conversation). Scripts have the web platform \
of Deno and Workers (URL, Blob, FormData, crypto, ...); a Blob, File or `sdkbox.file(data, \
{ name, type })` in the result reaches you as a file (an image, a resource). Everything is \
one provider; nothing persists between execute calls.";

/// Everything the tools need about the one provider, built once at startup.
pub struct Provider {
    /// Its name, for the server's info.
    pub name: String,
    /// The docs index behind `search_docs`.
    pub docs: DocsIndex,
    /// The SDK behind `api.<group>.<method>`.
    pub sdk: Arc<Sdk>,
    /// Egress with the server's own credential.
    pub egress: Egress,
    /// How egress is configured, to build per-session egress with a client's own key.
    pub egress_config: EgressConfig,
    /// The pool every execution runs in.
    pub pool: Pool,
    /// Limits of an execution; `timeout_ms` can only lower the timeout.
    pub limits: ExecLimits,
    /// The HTTP header a remote client may send its own provider key in.
    pub session_key_header: Option<String>,
    /// The approval rules, channels, chains and audit trail every execution shares.
    pub approvals: Approvals,
    /// Searches running at once, at most [`MAX_SEARCHES`], handed out in turn between
    /// callers (see [`search_queue`]).
    pub searches: Arc<FairQueue>,
    /// The type check scripts pass before they run, when there is a compiler.
    pub typecheck: Option<Arc<crate::typecheck::TypeCheck>>,
    /// Long executions as MCP tasks, for clients that offer the extension; `None` when off.
    pub tasks: Option<Arc<crate::tasks::Tasks>>,
    /// The provider's playbooks as MCP skills; `None` when off.
    pub skills: Option<Arc<crate::skills::Skills>>,
}

/// Searches that run at once; more wait, up to [`SEARCH_QUEUE_WAIT`].
pub const MAX_SEARCHES: usize = 4;

/// How long a search waits for one of the [`MAX_SEARCHES`] before it is told to retry.
const SEARCH_QUEUE_WAIT: Duration = Duration::from_secs(10);

/// The queue searches wait in: one caller runs at most half of them at once and has at most
/// eight running and waiting; 64 wait in all, and 16 more from callers with none. A server
/// with `one_caller` gives it all of them.
pub fn search_queue(one_caller: bool) -> Arc<FairQueue> {
    let limits = if one_caller {
        QueueLimits {
            slots: MAX_SEARCHES,
            max_held: MAX_SEARCHES,
            per_principal: usize::MAX,
            max_waiting: 64,
            reserve: 0,
        }
    } else {
        QueueLimits {
            slots: MAX_SEARCHES,
            max_held: MAX_SEARCHES / 2,
            per_principal: 8,
            max_waiting: 64,
            reserve: 16,
        }
    };
    FairQueue::new("searches", limits)
}

/// One MCP session's handler; cheap to clone.
#[derive(Clone)]
pub struct SdkboxServer {
    provider: Arc<Provider>,
    tool_router: ToolRouter<Self>,
    /// Egress with the key this session's client sent, built at its first call and reused
    /// while the key stays the same (an HTTP client per call would be wasted work).
    session_egress: Arc<std::sync::Mutex<Option<(String, Egress)>>>,
    /// The MCP session when the transport has one of its own (stdio: the process's one
    /// client); over HTTP it is the request's `Mcp-Session-Id`, if any.
    session: Option<String>,
    /// Sign-in, when the transport requires it: who signed in comes with each request.
    sign_in: Option<Arc<SignIn>>,
    /// Account linking: signed-in users act with their own provider accounts.
    linking: Option<Arc<crate::linking::Linking>>,
    /// The HTTP server's life: calls in flight are counted, and cancelled past its grace.
    lifecycle: Option<Lifecycle>,
}

#[tool_router]
impl SdkboxServer {
    /// A handler for `provider`; `session` names the MCP session when the transport is one
    /// client's alone (stdio), else sessions come from the requests.
    pub fn new(provider: Arc<Provider>, session: Option<String>) -> Self {
        Self {
            provider,
            tool_router: Self::tool_router(),
            session_egress: Arc::default(),
            session,
            sign_in: None,
            linking: None,
            lifecycle: None,
        }
    }

    /// This handler's calls are counted in `lifecycle`, and cancelled when it stops.
    pub fn living(mut self, lifecycle: Lifecycle) -> Self {
        self.lifecycle = Some(lifecycle);
        self
    }

    /// What cancels an execution: its call's cancellation, or the server's stop.
    fn cancellation(&self, context: &RequestContext<RoleServer>) -> CancellationToken {
        let Some(lifecycle) = &self.lifecycle else {
            return context.ct.child_token();
        };
        let cancel = context.ct.child_token();
        let (stopping, linked) = (lifecycle.stopping().clone(), cancel.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = stopping.cancelled() => linked.cancel(),
                _ = linked.cancelled() => {}
            }
        });
        cancel
    }

    /// This handler's requests come signed in through `sign_in` (the HTTP transport checked
    /// their tokens); without the write scope their writes are refused.
    pub fn signed_in_by(mut self, sign_in: Option<Arc<SignIn>>) -> Self {
        self.sign_in = sign_in;
        self
    }

    /// Signed-in users act with the provider accounts they linked through `linking`.
    pub fn linked_by(mut self, linking: Option<Arc<crate::linking::Linking>>) -> Self {
        self.linking = linking;
        self
    }

    #[tool(
        description = "Search the API's docs. Each hit is one operation with its method, path, the SDK call to use in execute (`api.<group>.<method>({ ...params })`, `?` marks optional parameters) and its summary; detail: \"full\" adds the TypeScript signature, response shape and an example. Also finds data schemas and guides. If no hit fits, search again with the API's own nouns.",
        input_schema = tools::search_input_schema(),
        output_schema = tools::search_output_schema(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search_docs(
        &self,
        Parameters(tools::Checked(input)): Parameters<tools::Checked<tools::SearchDocs>>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let filters = Filters::new(input.method, input.group);
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
        let detail = input.detail.unwrap_or_default();
        // A few searches at once: each costs a core and some memory, whoever sends them.
        let who = principal(&context);
        let slot = tokio::time::timeout(SEARCH_QUEUE_WAIT, self.provider.searches.turn(&who)).await;
        let _slot = match slot {
            Ok(Ok(slot)) => slot,
            Ok(Err(refused)) => {
                metrics::counter!("sdkbox_refused_total", "why" => "searches_busy").increment(1);
                return Ok(tools::search_error(&format!("busy: {refused}")));
            }
            Err(_) => {
                metrics::counter!("sdkbox_refused_total", "why" => "searches_busy").increment(1);
                return Ok(tools::search_error(
                    "busy: the server is busy with other searches; search again in a few seconds",
                ));
            }
        };
        // With the embedding model a search is a forward pass (milliseconds of CPU): off the
        // async runtime's threads, which serve every other call meanwhile.
        let provider = self.provider.clone();
        let results = tokio::task::spawn_blocking(move || {
            provider.docs.search(&input.query, limit, detail, &filters)
        })
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let mut results = match results {
            Ok(results) => results,
            Err(error) if error.is_query() => return Ok(tools::search_error(&error.to_string())),
            Err(error) => return Err(ErrorData::internal_error(error.to_string(), None)),
        };
        for hit in results.hits.iter_mut().filter(|h| h.kind == "operation") {
            let name = hit.id.trim_start_matches("api.");
            match self.provider.approvals.rules.of_name(name) {
                Some(Rule::Approve) => hit.text.push_str("  [needs approval]"),
                Some(Rule::Deny) => hit.text.push_str("  [denied]"),
                _ => {}
            }
        }
        Ok(tools::search_result(&results))
    }

    #[tool(
        description = "Run TypeScript against the API, server-side; get back its return value as JSON, console output and an HTTP log. The code is the body of an async function: `return` the result. In scope: `api` (SDK: `await api.customers.list({ limit: 10 })`; `api.paginate(api.customers.list, {...})` is an async iterator; `api.request(method, path, { query, body })` for anything else), `fetch` (to the API's host) and `console`. Failed calls throw the reason; writes may need a human's approval (else PolicyError). SDK calls are type-checked first. Limits: 30 s, 128 MiB, 50 requests, results cut past 24,000 characters: return what you need. Example, once search_docs found `api.orders.list`: `const paid = []; for await (const o of api.paginate(api.orders.list, { status: \"paid\" })) paid.push(o.amount); return { count: paid.length, largest: Math.max(...paid) };`",
        input_schema = tools::execute_input_schema(),
        output_schema = tools::execute_output_schema(),
        annotations(read_only_hint = false, destructive_hint = true, open_world_hint = true)
    )]
    async fn execute(
        &self,
        Parameters(tools::Checked(input)): Parameters<tools::Checked<tools::Execute>>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(task) = self.open_task(&context).await {
            return self.execute_as_task(input, context, task).await;
        }
        self.execute_now(input, context, None).await
    }

    /// Runs one execution for its call, or, given `task`, for that task: under its limit,
    /// asking a human through it, its progress watched.
    async fn execute_now(
        &self,
        input: tools::Execute,
        context: RequestContext<RoleServer>,
        task: Option<&tasks::TaskRun>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut limits = self.provider.limits.clone();
        if let Some(task) = task {
            limits.timeout = task.handle.settings().limit;
        }
        // 0 is no time limit of the call's own (the server's): what a framework with strict
        // schemas makes a model send for an optional number (issue 35, item 8).
        if let Some(ms) = input.timeout_ms.filter(|ms| *ms > 0) {
            limits.timeout = limits.timeout.min(Duration::from_millis(ms));
        }
        let signed_in = self.signed_in(&context)?;
        let egress = match (&self.linking, &signed_in) {
            (Some(linking), Some(user)) => {
                match self.linked_egress(linking, user, &context).await {
                    Ok(egress) => egress,
                    Err(refusal) => return Ok(CallToolResponse::Complete(refusal)),
                }
            }
            _ => self.egress_for(&context)?,
        };
        // A linked user's token changes at every refresh: who they act as, for approvals and
        // journals, is the server's provider and their sign-in, which do not.
        let acting_as = match &self.linking {
            Some(_) if signed_in.is_some() => &self.provider.egress,
            _ => &egress,
        };
        let caller = self.caller(&context, acting_as, signed_in.as_deref());
        // Checked while it runs: its requests wait for the verdict, and a script with certain
        // errors is stopped with nothing sent.
        let who = principal(&context);
        let checking = self
            .provider
            .typecheck
            .as_ref()
            .map(|check| check.begin(&input.code, &who));
        let dry_run = input.dry_run.unwrap_or(false);
        let (approvals, channel) = match task {
            Some(task) => {
                let approver = crate::tasks::TaskApprover::new(task.handle.clone());
                (&task.approvals, Channel::Now(Arc::new(approver)))
            }
            None => (&self.provider.approvals, approve::channel(&context)),
        };
        let begun = approvals.begin(&caller, &input.code, dry_run, channel);
        // Waiting for another run of the same code ends when the call is cancelled.
        let round = tokio::select! {
            round = begun => round.map_err(|e| ErrorData::invalid_params(e.to_string(), None))?,
            _ = context.ct.cancelled() => {
                return Err(ErrorData::invalid_params("the call was cancelled", None));
            }
        };
        let read_only = match (&self.sign_in, &signed_in) {
            (Some(sign_in), Some(signed_in)) if !signed_in.may_write => {
                round.gate().refuse_writes(sign_in.write_refusal(signed_in));
                Some((sign_in, signed_in))
            }
            _ => None,
        };
        // A task's execution may send and read as much as the task's bounds say.
        let egress = match task {
            Some(task) => {
                let settings = task.handle.settings();
                let mut limits = egress.limits().clone();
                limits.max_requests = limits.max_requests.max(settings.max_requests);
                limits.max_total_response_bytes = limits
                    .max_total_response_bytes
                    .max(settings.max_received_bytes);
                egress.with_limits(limits)
            }
            None => egress,
        };
        let target = Target {
            egress,
            sdk: Some(self.provider.sdk.clone()),
            gate: round.gate(),
            caller: caller.worker_identity(),
            principal: who.clone(),
            hold: checking.as_ref().and_then(|checking| checking.hold()),
            watch: task.map(|task| task.watch.clone()),
        };
        // A task's call has answered: its progress is the task's.
        let heartbeat = match task {
            Some(_) => None,
            None => progress_heartbeat(&context),
        };
        let cancel = self.cancellation(&context);
        let run = self
            .provider
            .pool
            .execute(&target, &input.code, &limits, cancel.clone());
        let verdict = async {
            let checking = checking?;
            let verdict = tokio::select! {
                verdict = checking.verdict() => verdict,
                // A cancelled call stops waiting for its check; the hold, never opened, lets
                // none of its requests out.
                () = context.ct.cancelled() => return None,
            };
            if matches!(verdict, Verdict::Stop(_)) {
                // Ended at once: nothing it computes is shown, and nothing left.
                cancel.cancel();
            }
            Some(verdict)
        };
        let (mut outcome, verdict) = tokio::join!(run, verdict);
        cancel.cancel();
        let warnings = match verdict {
            // Not checked, or cancelled before the verdict.
            None => Vec::new(),
            Some(Verdict::Run(warnings)) => {
                let verdict = if warnings.is_empty() {
                    "clean"
                } else {
                    "warned"
                };
                metrics::counter!("sdkbox_typecheck_total", "verdict" => verdict).increment(1);
                warnings
            }
            Some(Verdict::Stop(error)) => {
                metrics::counter!("sdkbox_typecheck_total", "verdict" => "stopped").increment(1);
                if let Some(heartbeat) = heartbeat {
                    heartbeat.abort();
                }
                round.abandon();
                // Code the sandbox could not parse says so in its own words, as unchecked
                // code would: a syntax error is not a type error.
                let unparsable = outcome
                    .error
                    .as_ref()
                    .is_some_and(|e| e.kind == crate::sandbox::ErrorKind::Syntax);
                let result = if unparsable {
                    tools::execute_result(&outcome, self.provider.limits.max_output_bytes)
                } else {
                    self.refused(&target.egress, error)
                };
                return Ok(CallToolResponse::Complete(result));
            }
        };
        // Cut off by the shutdown grace (not by its caller): the next run of this code
        // continues this one.
        let stopped_by_server = self
            .lifecycle
            .as_ref()
            .is_some_and(|lifecycle| lifecycle.stopping().is_cancelled())
            && outcome
                .error
                .as_ref()
                .is_some_and(|e| e.kind == crate::sandbox::ErrorKind::Cancelled);
        if stopped_by_server && let Some(error) = outcome.error.as_mut() {
            error.message = "the server was shutting down and its grace period ran out while \
                             this code ran, so it was stopped; writes it sent without an answer \
                             count as maybe sent and no re-run of this code sends them again. \
                             Run it again: another server takes it"
                .to_owned();
        }
        if !warnings.is_empty() {
            let scrubber = target.egress.scrubber();
            crate::sandbox::with_warnings(
                &mut outcome,
                warnings,
                scrubber,
                limits.max_output_bytes,
            );
        }
        let timings = &outcome.timings;
        tracing::debug!(
            ok = outcome.ok,
            duration_ms = outcome.duration_ms,
            compile_us = timings.compile_us,
            create_us = timings.create_us,
            run_us = timings.run_us,
            finish_us = timings.finish_us,
            "execution ended"
        );
        if let Some(heartbeat) = heartbeat {
            heartbeat.abort();
        }
        // A linked token the provider rejected is not used again as it is.
        if let (Some(linking), Some(user)) = (&self.linking, &signed_in)
            && outcome.http.iter().any(|call| call.status == Some(401))
            && let Err(error) = linking.distrust(&user.user()).await
        {
            tracing::warn!("a rejected provider token could not be marked: {error}");
        }
        let step_up = read_only
            .filter(|_| round.gate().refused_a_write())
            .map(|(sign_in, signed_in)| sign_in.write_challenge(signed_in));
        if stopped_by_server {
            round.abandon();
            let result = tools::execute_result(&outcome, self.provider.limits.max_output_bytes);
            return Ok(CallToolResponse::Complete(result));
        }
        let ending = round
            .end()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        if let Ending::InputRequired(required) = ending {
            return Ok(CallToolResponse::InputRequired(required));
        }
        let mut result = tools::execute_result(&outcome, self.provider.limits.max_output_bytes);
        if !outcome.files.is_empty() {
            // What the answer leaves room for goes inline; the rest is linked.
            let inline = crate::answer::MAX_ANSWER_BYTES
                .saturating_sub(self.provider.limits.max_output_bytes)
                .saturating_sub(4 * 1024);
            let state = self.provider.approvals.state();
            result
                .content
                .extend(files::contents(&outcome, inline, &who, state).await);
        }
        if let Some(challenge) = step_up {
            // For clients that step up from a tool result (ChatGPT's convention).
            let mut meta = result.meta.take().unwrap_or_default();
            meta.insert(
                "mcp/www_authenticate".into(),
                serde_json::json!([challenge]),
            );
            result.meta = Some(meta);
        }
        Ok(CallToolResponse::Complete(result))
    }

    /// Who signed in to make this call, when sign-in is on; a request that reached here
    /// without it is refused (the transport should have).
    fn signed_in(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Arc<SignedIn>>, ErrorData> {
        if self.sign_in.is_none() {
            return Ok(None);
        }
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<SignedIn>>())
            .cloned()
            .map(Some)
            .ok_or_else(|| ErrorData::invalid_request("this server needs sign-in", None))
    }

    /// Who makes this call: the provider key egress acts with, the MCP session (this
    /// handler's own, or the request's `Mcp-Session-Id`) and who signed in.
    fn caller(
        &self,
        context: &RequestContext<RoleServer>,
        egress: &Egress,
        signed_in: Option<&SignedIn>,
    ) -> Caller {
        let approvals = &self.provider.approvals;
        let session = self.session.clone().or_else(|| {
            let parts = context.extensions.get::<axum::http::request::Parts>()?;
            let id = parts.headers.get("mcp-session-id")?.to_str().ok()?;
            Some(id.to_owned())
        });
        approvals
            .caller(
                egress.keyed_identity(approvals.key()),
                session.as_deref(),
                signed_in.map(SignedIn::who).as_deref(),
            )
            .behind(&principal(context))
    }

    /// The result of an execution stopped before it ran (the type check, a missing link), in
    /// the execute result's shape: scrubbed with `egress`'s secrets and bounded like any.
    fn refused(&self, egress: &Egress, error: crate::sandbox::ExecError) -> CallToolResult {
        let max = self.provider.limits.max_output_bytes;
        let outcome = crate::sandbox::stopped(error, egress.scrubber(), max);
        tools::execute_result(&outcome, max)
    }

    /// The server's egress, or one with the key the client sent in the session-key header.
    fn egress_for(&self, context: &RequestContext<RoleServer>) -> Result<Egress, ErrorData> {
        let provider = &self.provider;
        // Signed in, the Authorization header is the client's token: never a provider key.
        let signed_in = self.sign_in.is_some();
        let header = provider
            .session_key_header
            .as_ref()
            .filter(|h| !(signed_in && h.eq_ignore_ascii_case("authorization")));
        let key = header.and_then(|header| {
            let parts = context.extensions.get::<axum::http::request::Parts>()?;
            parts
                .headers
                .get(header.as_str())?
                .to_str()
                .ok()
                .map(str::to_owned)
        });
        let Some(key) = key.filter(|k| !k.is_empty()) else {
            return Ok(provider.egress.clone());
        };
        let scheme = provider
            .egress_config
            .credential
            .as_ref()
            .map_or(crate::egress::AuthScheme::Bearer, |c| c.scheme.clone());
        self.keyed_egress(key, scheme)
    }

    /// Egress acting with `key` presented as `scheme`, reused while this handler's key stays
    /// the same (an HTTP client per call would be wasted work).
    pub(super) fn keyed_egress(
        &self,
        key: String,
        scheme: crate::egress::AuthScheme,
    ) -> Result<Egress, ErrorData> {
        let mut cached = self
            .session_egress
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((cached_key, egress)) = cached.as_ref()
            && *cached_key == key
        {
            return Ok(egress.clone());
        }
        let mut config = self.provider.egress_config.clone();
        config.credential = Some(Credential {
            scheme,
            secret: crate::egress::Secret::new(key.clone()),
        });
        let egress =
            Egress::new(config).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        *cached = Some((key, egress.clone()));
        Ok(egress)
    }
}

/// Sends `notifications/progress` every second while an execution runs, when the client
/// asked for progress.
fn progress_heartbeat(context: &RequestContext<RoleServer>) -> Option<tokio::task::JoinHandle<()>> {
    let token = context.meta.get_progress_token()?;
    let peer = context.peer.clone();
    Some(tokio::spawn(async move {
        let mut seconds = 0.0;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            seconds += 1.0;
            let mut param = ProgressNotificationParam::new(token.clone(), seconds);
            param.message = Some(format!("running for {seconds} s"));
            if peer.notify_progress(param).await.is_err() {
                return;
            }
        }
    }))
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SdkboxServer {
    #[allow(
        deprecated,
        reason = "logging/setLevel is deprecated by SEP-2577, but clients still send it"
    )]
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .enable_resources();
        let capabilities = match &self.provider.tasks {
            Some(_) => capabilities.enable_tasks(),
            None => capabilities,
        };
        let capabilities = match &self.provider.skills {
            Some(_) => capabilities.enable_skills().build(),
            None => capabilities.build(),
        };
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new("sdkbox", env!("CARGO_PKG_VERSION"))
                    .with_title(format!("sdkbox: {}", self.provider.name)),
            )
            .with_instructions(INSTRUCTIONS)
    }

    /// Reads a file a script returned as a link (see `files`): the caller's own, while it
    /// lasts. Nothing is listed: links are made per call.
    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        if let Some(skills) = &self.provider.skills
            && crate::skills::Skills::owns(&request.uri)
        {
            return skills.read(&request.uri).map(Into::into).ok_or_else(|| {
                ErrorData::resource_not_found(
                    format!("no skill file at {}: skills/list names them", request.uri),
                    None,
                )
            });
        }
        let who = principal(&context);
        files::read(&request.uri, &who, self.provider.approvals.state())
            .await
            .map(Into::into)
    }

    /// `skills/list`: the provider's own skill and the operator's.
    async fn list_skills(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, ErrorData> {
        let skills = self.provider.skills.as_ref().ok_or_else(no_skills)?;
        Ok(skills.list())
    }

    /// `skills/get`: one skill's entry, by the URI of its `SKILL.md`.
    async fn get_skill(
        &self,
        request: rmcp::model::GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, ErrorData> {
        let skills = self.provider.skills.as_ref().ok_or_else(no_skills)?;
        skills.get(&request.uri).ok_or_else(|| {
            ErrorData::invalid_params(
                format!("no skill at {}: skills/list names them", request.uri),
                None,
            )
        })
    }

    /// `tasks/get`: the caller's own task, as it stands.
    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let tasks = self.provider.tasks.as_ref().ok_or_else(no_tasks)?;
        let record = tasks
            .get(&request.task_id, &principal(&context))
            .await
            .map_err(tasks::task_error)?;
        Ok(rmcp::model::GetTaskResult::new(record.detailed()))
    }

    /// `tasks/update`: the caller's answers to its task's open input requests. Acknowledged
    /// even for a task it does not hold, as the extension says.
    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let tasks = self.provider.tasks.as_ref().ok_or_else(no_tasks)?;
        let who = principal(&context);
        tasks::acknowledged(
            tasks
                .update(&request.task_id, &who, request.input_responses)
                .await,
        )
    }

    /// `tasks/cancel`: stops the caller's task (see `Tasks::cancel`). Acknowledged even for a
    /// task it does not hold, as the extension says.
    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let tasks = self.provider.tasks.as_ref().ok_or_else(no_tasks)?;
        tasks::acknowledged(tasks.cancel(&request.task_id, &principal(&context)).await)
    }

    /// Routes a call to its tool; an unknown name is an error that names it and the two tools
    /// there are (rmcp's router says only "tool not found").
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        if !self.tool_router.has_route(&request.name) {
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool `{}`: this server has two tools, `search_docs` and `execute`",
                    request.name
                ),
                None,
            ));
        }
        let _in_flight = self.lifecycle.as_ref().map(Lifecycle::call);
        let mut request = request;
        let mut context = context;
        // A 2026-07-28 retry brings the approvals a human gave; the tool reads them here.
        context.extensions.insert(approve::RetryInput {
            state: request.request_state.take(),
            responses: request.input_responses.take(),
        });
        let tool = request.name.to_string();
        let principal = principal(&context).to_string();
        let started = std::time::Instant::now();
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        let span = tracing::info_span!(
            crate::telemetry::span::CALL,
            otel.name = %tool,
            otel.kind = "server",
            tool = %tool,
            principal = %principal,
            outcome = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let response = self.tool_router.call(call).instrument(span.clone()).await;
        let outcome = outcome_of(&response);
        span.record("outcome", outcome);
        if !matches!(outcome, "ok" | "input_required") {
            span.record("otel.status_code", "ERROR");
        }
        let elapsed = started.elapsed();
        metrics::counter!("sdkbox_calls_total", "tool" => tool.clone(), "outcome" => outcome)
            .increment(1);
        metrics::histogram!("sdkbox_call_duration_seconds", "tool" => tool.clone())
            .record(elapsed.as_secs_f64());
        tracing::info!(
            tool,
            principal,
            duration_ms = elapsed.as_millis() as u64,
            outcome,
            "call"
        );
        response
    }

    #[allow(
        deprecated,
        reason = "logging/setLevel is deprecated by SEP-2577, but clients still send it"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        #[allow(deprecated, reason = "see above")]
        let level = request.level;
        tracing::info!(?level, "client set the log level");
        Ok(())
    }
}

/// A skills method on a server without skills (rmcp answers so before it gets here).
fn no_skills() -> ErrorData {
    ErrorData::invalid_request("this server serves no skills", None)
}

/// A task method on a server without tasks (rmcp answers so before it gets here).
fn no_tasks() -> ErrorData {
    ErrorData::invalid_request("this server runs no tasks", None)
}

/// Who is behind a call, for fairness and the log: what the HTTP transport found (see
/// `fair_http.rs`); over standard input and output, the one client.
fn principal(context: &RequestContext<RoleServer>) -> Principal {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
        .unwrap_or_else(Principal::stdio)
}

/// What became of a call, in a word: `ok`, the error's kind, `input_required` or
/// `protocol_error`.
fn outcome_of(response: &Result<CallToolResponse, ErrorData>) -> &'static str {
    let result = match response {
        Ok(CallToolResponse::Complete(result)) => result,
        Ok(CallToolResponse::InputRequired(_)) => return "input_required",
        Ok(_) => return "ok",
        Err(_) => return "protocol_error",
    };
    if result.is_error != Some(true) {
        return "ok";
    }
    let kind = result
        .structured_content
        .as_ref()
        .and_then(|c| c.get("error"))
        .and_then(|e| e.get("kind"))
        .and_then(|k| k.as_str());
    crate::sandbox::ErrorKind::ALL
        .iter()
        .map(|k| k.as_str())
        .find(|name| Some(*name) == kind)
        .unwrap_or("error")
}

/// Serves one MCP session over stdin and stdout until the client closes it.
pub async fn serve_stdio(provider: Arc<Provider>) -> Result<(), ServeError> {
    let (input, output, _restore) = stdio::streams();
    // One process, one client: its session is named here.
    let session = crate::approval::random_hex(16);
    let service = SdkboxServer::new(provider, session)
        .serve((input, output))
        .await
        .map_err(|e| ServeError(e.to_string()))?;
    service
        .waiting()
        .await
        .map_err(|e| ServeError(e.to_string()))?;
    Ok(())
}

/// A transport failed.
#[derive(Debug, thiserror::Error)]
#[error("the MCP transport failed: {0}")]
pub struct ServeError(pub String);
