//! The ops the prelude may call (console, raw request, SDK call, result, and a test-only
//! crash), and the state they keep for the Rust side.
//!
//! Ops never panic (a panic inside an op aborts the process on QuickJS): state is reached
//! with `try_borrow`, and every failure becomes a value the prelude turns into a JS error.

use std::cell::RefCell;
use std::rc::Rc;

use deno_core::{JsBuffer, OpState, op2};
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use super::network::{Network, NetworkError};
use super::outcome::ConsoleLine;
use crate::egress::{Binary, FilePart, ScriptRequest, ScriptResponse};
use crate::sdk::SdkCall;

deno_core::extension!(
    sdkbox_sandbox,
    ops = [
        op_sdkbox_log,
        op_sdkbox_http,
        op_sdkbox_call,
        op_sdkbox_result,
        op_sdkbox_test_crash,
        super::web::op_sdkbox_url_parse,
        super::web::op_sdkbox_url_set,
        super::web::op_sdkbox_random,
        super::web::op_sdkbox_digest,
        super::web::op_sdkbox_hmac
    ],
    middleware = |op| match op.name {
        "op_print" | "op_panic" | "op_import_sync" | "op_import_sync_with_source" => op.disable(),
        _ => op,
    },
    state = |state| {
        state.put(ResultSlot::default());
    },
);

/// Present in a runtime's state only when the test-only crash op may act (worker crash
/// tests). Scripts cannot create it.
pub struct TestHooks;

/// What a console line costs against the budget at the least, however short: an empty
/// line is not free (`console.log("")` a million times would otherwise be).
const MIN_LINE_COST: usize = 32;

/// Console lines kept at the most, whatever their size.
const MAX_LINES: usize = 200;

/// Console lines captured so far, bounded by a character budget and a number of lines.
pub struct Console {
    lines: Vec<ConsoleLine>,
    left: usize,
    /// Lines dropped once the budget ran out.
    pub dropped: usize,
    /// When a line was last handed to the network as progress.
    noted: Option<std::time::Instant>,
}

/// How often a console line is handed over as progress, at most.
const NOTE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl Console {
    /// A console that keeps up to `limit` bytes of text.
    pub fn new(limit: usize) -> Self {
        Self {
            lines: Vec::new(),
            left: limit,
            dropped: 0,
            noted: None,
        }
    }

    /// Whether a line written now is handed over as progress (one a second).
    fn due(&mut self) -> bool {
        let now = std::time::Instant::now();
        let due = self
            .noted
            .is_none_or(|at| now.duration_since(at) >= NOTE_EVERY);
        if due {
            self.noted = Some(now);
        }
        due
    }

    fn push(&mut self, level: &str, mut text: String) {
        if self.left == 0 || self.lines.len() >= MAX_LINES {
            self.dropped += 1;
            return;
        }
        self.left = self
            .left
            .saturating_sub(MIN_LINE_COST.saturating_sub(text.len()));
        if text.len() > self.left {
            let mut cut = self.left;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let total = text.len();
            text.truncate(cut);
            text.push_str(&format!("… [line cut: {total} bytes]"));
            self.left = 0;
        } else {
            self.left -= text.len();
        }
        let level = match level {
            "info" | "warn" | "error" | "debug" => level,
            _ => "log",
        };
        self.lines.push(ConsoleLine {
            level: level.to_owned(),
            text,
        });
    }

    /// Takes the captured lines.
    pub fn take(&mut self) -> Vec<ConsoleLine> {
        std::mem::take(&mut self.lines)
    }
}

/// The JSON text of the model's result, once the harness has produced it, the files it
/// returns, and the names of those dropped past [`MAX_RETURNED_BYTES`].
#[derive(Default)]
pub struct ResultSlot(pub Option<String>, pub Vec<FilePart>, pub Vec<String>);

#[op2(fast)]
fn op_sdkbox_log(state: &mut OpState, #[string] level: &str, #[string] text: String) {
    let due = state.try_borrow_mut::<Console>().is_some_and(Console::due);
    if due && let Some(network) = state.try_borrow::<Arc<dyn Network>>() {
        network.note(text.chars().take(crate::egress::CONSOLE_CHARS).collect());
    }
    if let Some(console) = state.try_borrow_mut::<Console>() {
        console.push(level, text);
    }
}

/// The result: its JSON and the files it returns (see [`Layout`]); files past
/// [`MAX_RETURNED_BYTES`] in all are dropped, each named in `dropped`.
#[op2]
fn op_sdkbox_result(
    state: &mut OpState,
    #[string] json: String,
    #[serde] layout: serde_json::Value,
    #[buffer] payload: &[u8],
) {
    let files = serde_json::from_value::<Layout>(layout)
        .ok()
        .and_then(|layout| layout.unpack(payload).ok())
        .map(|(_, files)| files)
        .unwrap_or_default();
    if let Some(slot) = state.try_borrow_mut::<ResultSlot>() {
        let mut total = 0usize;
        let (kept, dropped): (Vec<_>, Vec<_>) = files.into_iter().partition(|file| {
            total = total.saturating_add(file.bytes.len());
            total <= MAX_RETURNED_BYTES
        });
        slot.0 = Some(json);
        slot.1 = kept;
        slot.2 = dropped
            .into_iter()
            .map(|f| f.name.unwrap_or_default())
            .collect();
    }
}

/// Files one call or result carries at most.
const MAX_FILES: usize = 64;

/// Characters of a file's name or media type kept.
const MAX_FILE_NAME: usize = 256;

/// Bytes of the files one result may return, in all.
pub(super) const MAX_RETURNED_BYTES: usize = 8 * 1024 * 1024;

/// What `op_sdkbox_http` resolves to: a response, or an error the prelude throws.
#[derive(Serialize)]
struct HttpReply {
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<IsolateResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<NetworkError>,
}

impl HttpReply {
    fn failure(kind: &str, message: String) -> Self {
        Self {
            response: None,
            error: Some(NetworkError {
                kind: kind.to_owned(),
                message,
            }),
        }
    }
}

fn network(state: &Rc<RefCell<OpState>>) -> Option<Arc<dyn Network>> {
    match state.try_borrow() {
        Ok(state) => state.try_borrow::<Arc<dyn Network>>().cloned(),
        Err(_) => None,
    }
}

/// A response as the prelude reads it: a body that is not text arrives as a `Uint8Array`.
#[derive(Serialize)]
struct IsolateResponse {
    status: u16,
    status_text: String,
    url: String,
    headers: Vec<(String, String)>,
    body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<deno_core::ToJsBuffer>,
}

impl From<ScriptResponse> for IsolateResponse {
    fn from(response: ScriptResponse) -> Self {
        Self {
            status: response.status,
            status_text: response.status_text,
            url: response.url,
            headers: response.headers,
            body: response.body,
            bytes: response.bytes.map(|b| b.0.into()),
        }
    }
}

/// What a script hands over with a request or call besides its JSON: the body's bytes (a
/// raw request's), then each file's, one after another in `payload`, as `layout` says.
#[derive(Deserialize, Default)]
struct Layout {
    /// The raw body's size, when there is one.
    #[serde(default)]
    body: Option<usize>,
    /// The files, in order.
    #[serde(default)]
    files: Vec<Handed>,
}

/// A file as the prelude describes it.
#[derive(Deserialize)]
struct Handed {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "type")]
    media_type: Option<String>,
    size: usize,
}

impl Layout {
    /// The body and files cut out of `payload`; a layout that does not fit it, or holds
    /// more than [`MAX_FILES`] files, is refused; names and types are cut to
    /// [`MAX_FILE_NAME`] characters.
    fn unpack(self, payload: &[u8]) -> Result<(Option<Binary>, Vec<FilePart>), String> {
        if self.files.len() > MAX_FILES {
            return Err(format!(
                "at most {MAX_FILES} files go with one call or result"
            ));
        }
        let short =
            |text: Option<String>| text.map(|t| t.chars().take(MAX_FILE_NAME).collect::<String>());
        let mut rest = payload;
        let mut take = |size: usize| {
            if size > rest.len() {
                return Err("the request's bytes are shorter than it says".to_owned());
            }
            let (taken, left) = rest.split_at(size);
            rest = left;
            Ok(taken.to_vec())
        };
        let body = self.body.map(&mut take).transpose()?.map(Binary::from);
        let files = self
            .files
            .into_iter()
            .map(|file| {
                Ok(FilePart {
                    name: short(file.name),
                    media_type: short(file.media_type).filter(|t| !t.is_empty()),
                    bytes: take(file.size)?.into(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        if !rest.is_empty() {
            return Err("the request's bytes are longer than it says".to_owned());
        }
        Ok((body, files))
    }
}

impl From<Result<ScriptResponse, NetworkError>> for HttpReply {
    fn from(result: Result<ScriptResponse, NetworkError>) -> Self {
        match result {
            Ok(response) => Self {
                response: Some(response.into()),
                error: None,
            },
            Err(error) => Self {
                response: None,
                error: Some(error),
            },
        }
    }
}

/// A raw request from `fetch` or `api.request`: its body and files are the bytes of
/// `payload`, as `layout` cuts them.
#[op2]
#[serde]
async fn op_sdkbox_http(
    state: Rc<RefCell<OpState>>,
    #[serde] request: serde_json::Value,
    #[serde] layout: serde_json::Value,
    #[buffer] payload: JsBuffer,
) -> HttpReply {
    let Some(network) = network(&state) else {
        return HttpReply::failure("internal", "the network bridge is unavailable".into());
    };
    let mut request: ScriptRequest = match serde_json::from_value(request) {
        Ok(request) => request,
        Err(e) => return HttpReply::failure("invalid_request", format!("malformed request: {e}")),
    };
    match unpacked(layout, &payload) {
        Ok((body, files)) => {
            request.body = body;
            request.files = files;
        }
        Err(why) => return HttpReply::failure("invalid_request", why),
    }
    network.send(request).await.into()
}

/// The body and files a layout cuts out of a payload, or why they cannot be.
fn unpacked(
    layout: serde_json::Value,
    payload: &[u8],
) -> Result<(Option<Binary>, Vec<FilePart>), String> {
    let layout: Layout =
        serde_json::from_value(layout).map_err(|e| format!("malformed request: {e}"))?;
    layout.unpack(payload)
}

/// An SDK call, `api.<group>.<method>(params)`.
#[op2]
#[serde]
async fn op_sdkbox_call(
    state: Rc<RefCell<OpState>>,
    #[string] group: String,
    #[string] method: String,
    #[serde] params: serde_json::Value,
    extra: u32,
    #[serde] layout: serde_json::Value,
    #[buffer] payload: JsBuffer,
) -> HttpReply {
    let Some(network) = network(&state) else {
        return HttpReply::failure("internal", "the network bridge is unavailable".into());
    };
    let files = match unpacked(layout, &payload) {
        Ok((_, files)) => files,
        Err(why) => return HttpReply::failure("invalid_request", why),
    };
    network
        .call(SdkCall {
            group,
            method,
            params,
            extra,
            files,
        })
        .await
        .into()
}

/// For the worker crash tests, what an engine a script escaped could do: with `threads` 0,
/// kill the process the way a panicking op does on QuickJS; else start that many threads
/// that never end. Without [`TestHooks`] in the state it only says it is unavailable.
#[op2(fast)]
fn op_sdkbox_test_crash(state: &mut OpState, threads: u32) -> bool {
    if state.try_borrow::<TestHooks>().is_none() {
        return false;
    }
    if threads == 0 {
        #[allow(
            clippy::panic,
            reason = "a test-only crash, enabled by the worker crash tests"
        )]
        {
            panic!("test-only crash requested by the script");
        }
    }
    for _ in 0..threads {
        let spawned = std::thread::Builder::new().stack_size(64 * 1024).spawn(|| {
            loop {
                std::thread::park();
            }
        });
        if spawned.is_err() {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::{Egress, EgressConfig, EgressLimits};

    #[tokio::test]
    async fn print_and_panic_ops_throw_instead_of_acting() {
        let egress = Egress::new(EgressConfig {
            base_url: url::Url::parse("http://127.0.0.1:9").unwrap(),
            extra_origins: Vec::new(),
            download_origins: Vec::new(),
            credential: None,
            limits: EgressLimits::default(),
        })
        .unwrap();
        let deadline = crate::deadline::Deadline::after(std::time::Duration::from_secs(5));
        let gate = std::sync::Arc::new(crate::approval::Gate::open(egress.base_url().clone()));
        let stopped = tokio_util::sync::CancellationToken::new();
        let session = egress.session(gate, deadline, stopped.child_token(), stopped);
        let network: Arc<dyn Network> = Arc::new(crate::sandbox::Gateway::new(session, None));
        let mut runtime = deno_core::JsRuntime::new(deno_core::RuntimeOptions {
            extensions: vec![sdkbox_sandbox::init()],
            ..Default::default()
        });
        runtime.op_state().borrow_mut().put(network);
        // Before the prelude runs, Deno.core.ops is still there: exactly what the prelude
        // removes. A panic here would abort the test process, not fail it.
        let code = r#"
            const out = [];
            for (const op of ["op_panic", "op_print"]) {
              try { Deno.core.ops[op]("boom\n", false); out.push(op + ": ran"); }
              catch (e) { out.push(op + ": " + e.message); }
            }
            out.push("crash op: " + Deno.core.ops.op_sdkbox_test_crash(0));
            out.join("; ")
        "#;
        let value = runtime.execute_script("probe.js", code).unwrap();
        deno_core::scope!(scope, runtime);
        let text = deno_core::v8::Local::new(scope, value).to_rust_string_lossy(scope);
        assert!(!text.contains("ran"), "{text}");
        assert_eq!(text.matches("disabled").count(), 2, "{text}");
        // Without TestHooks in the state, the test-only crash op does nothing.
        assert!(text.ends_with("crash op: false"), "{text}");
    }
}
