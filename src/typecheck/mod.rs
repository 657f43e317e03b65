//! Type-checked `execute`: TypeScript 7's own compiler checks the model's code against the
//! SDK's declarations while the sandbox runs it, and nothing the script sends leaves before
//! the verdict. What is certainly wrong (a syntax error, an unknown SDK group or method, an
//! unknown, missing or mistyped parameter of an SDK call, calling what is not a function)
//! stops the run, nothing sent, with the compiler's message, line, caret and "did you
//! mean"; everything else (say, a response property the spec does not declare,
//! since specs are often incomplete) comes back as a warning. A check that cannot finish in
//! time lets the run go ahead, with a note.

mod checker;
pub mod compiler;
mod document;
mod flow;
mod lsp;
mod routes;

pub use checker::{Checker, Diagnostic, Unchecked};
pub use document::Document;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::fair::{FairQueue, Principal, QueueLimits};
use crate::lock::lock;

use crate::sdk::Sdk;

use crate::sandbox::{ErrorKind, ExecError, Hold, Release};

/// How long one check may take, its wait for a compiler included, before the run goes ahead
/// unchecked.
pub const CHECK_DEADLINE: Duration = Duration::from_secs(2);

/// Checks one principal may have running and waiting together; past it, its next runs
/// unchecked, with a warning.
const CHECKS_PER_PRINCIPAL: usize = 4;

/// The least time a check is started with; with less left after its wait, the code runs
/// unchecked instead (the compiler would overrun, and be restarted).
const MIN_CHECK_TIME: Duration = Duration::from_millis(500);

/// Checks waiting for a compiler, by everyone.
const MAX_WAITING_CHECKS: usize = 256;

/// Compilers run by default: one per core, at most four (each holds 40-110 MiB).
pub fn default_compilers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
}

/// The largest script checked: the compiler's time grows faster than the code (0.65 s for
/// 100 KB, 6.4 s for 400 KB).
const MAX_CHECKED_BYTES: usize = 64 * 1024;

/// The stack every checked document is parsed and visited on (only the pages used are
/// committed): nesting, and member chains, deeper than a default thread's stack holds.
const PARSER_STACK: usize = 256 * 1024 * 1024;

/// Warnings one result lists, at most.
const MAX_WARNINGS: usize = 10;

/// Blocking errors one refusal lists, at most.
const MAX_LISTED: usize = 5;

/// Characters of one compiler message kept.
const MAX_MESSAGE: usize = 400;

/// Doubts of one script judged for reaching a write, at most (each is a lookup; the cap
/// bounds a script of thousands of them).
const MAX_DOUBTS: usize = 1_000;

/// The compiler's diagnostics of one check that are judged, in the order it gives them.
const MAX_DIAGNOSTICS: usize = 256;

/// Characters of a message's suggestion ("Did you mean ...?") kept whole, at most.
const MAX_SUGGESTION: usize = 300;

/// A compiler message within [`MAX_MESSAGE`] characters with its suggestion whole: what is
/// cut is what comes before it (a long type spelled out), never the fix.
fn shortened(message: &str) -> String {
    if message.chars().count() <= MAX_MESSAGE {
        return message.to_owned();
    }
    let (before, suggestion) = match message.rfind("Did you mean") {
        Some(at) => (&message[..at], &message[at..]),
        None => (message, ""),
    };
    if suggestion.is_empty() {
        return crate::egress::cut(message, MAX_MESSAGE);
    }
    let suggestion = crate::egress::cut(suggestion, MAX_SUGGESTION);
    let room = MAX_MESSAGE.saturating_sub(suggestion.chars().count());
    format!(
        "{} {suggestion}",
        crate::egress::cut(before.trim_end(), room)
    )
}

/// What the check does with what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Certain errors stop the run; the rest are warnings.
    #[default]
    Block,
    /// Everything is a warning; the code always runs.
    Warn,
    /// No check.
    Off,
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "block" => Ok(Self::Block),
            "warn" => Ok(Self::Warn),
            "off" => Ok(Self::Off),
            _ => Err(format!("`{text}` is not block, warn or off")),
        }
    }
}

/// What the check says about a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it; the model sees these warnings with the result.
    Run(Vec<String>),
    /// Do not run it: this error says why.
    Stop(ExecError),
}

/// The compilers a server checks with, handed out in turn between principals.
struct Checkers {
    all: Vec<Checker>,
    /// The indexes of the compilers no check holds.
    free: Mutex<Vec<usize>>,
    queue: Arc<FairQueue>,
}

impl Checkers {
    /// Starts `count` compilers at once; those that start are used.
    /// With `keep_one`, one principal holds all compilers but one, which stays for the others.
    async fn start(
        tsc: &Path,
        declarations: &str,
        count: usize,
        per_principal: usize,
        keep_one: bool,
    ) -> Result<Self, Unchecked> {
        let started = futures_util::future::join_all(
            (0..count.max(1)).map(|_| Checker::start(tsc, declarations, CHECK_DEADLINE)),
        )
        .await;
        let mut all = Vec::new();
        let mut why = None;
        for checker in started {
            match checker {
                Ok(checker) => all.push(checker),
                Err(error) => why = Some(error),
            }
        }
        if all.is_empty() {
            return Err(why.unwrap_or_else(|| Unchecked("no compiler started".into())));
        }
        if let Some(Unchecked(why)) = why {
            tracing::warn!(started = all.len(), "not every type checker started: {why}");
        }
        let slots = all.len();
        Ok(Self {
            free: Mutex::new((0..slots).collect()),
            queue: FairQueue::new(
                "type checks",
                QueueLimits {
                    slots,
                    max_held: if keep_one && slots > 1 {
                        slots - 1
                    } else {
                        slots
                    },
                    per_principal,
                    max_waiting: MAX_WAITING_CHECKS,
                    reserve: MAX_WAITING_CHECKS / 4,
                },
            ),
            all,
        })
    }
}

/// A check counted in `sdkbox_typecheck_waiting` until dropped (a cancelled call's too).
struct Waiting;

impl Waiting {
    fn start() -> Self {
        metrics::gauge!("sdkbox_typecheck_waiting").increment(1.0);
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        metrics::gauge!("sdkbox_typecheck_waiting").decrement(1.0);
    }
}

/// Gives a compiler's index back to the free ones when dropped.
struct GiveBack<'a>(&'a Mutex<Vec<usize>>, usize);

impl Drop for GiveBack<'_> {
    fn drop(&mut self) {
        lock(self.0).push(self.1);
    }
}

/// A check under way while its script runs: in `block` mode the script's requests wait at
/// its hold until the verdict lets them leave, so a script it stops has sent nothing.
pub struct Checking {
    /// The check, on a task of its own; aborted when the call ends first.
    task: tokio_util::task::AbortOnDropHandle<Verdict>,
    /// Opens the hold; dropped undecided (the call ended first), it lets nothing out.
    release: Release,
    hold: Option<Hold>,
}

impl Checking {
    /// Where the script's requests wait, when the verdict can stop them.
    pub fn hold(&self) -> Option<Hold> {
        self.hold.clone()
    }

    /// The verdict, once the check is done: it opens the hold unless it stops the run. A
    /// check that failed (its task panicked) lets the run go ahead, with a warning, as a
    /// check that cannot finish does.
    pub async fn verdict(self) -> Verdict {
        let verdict = self.task.await.unwrap_or_else(|error| {
            Verdict::Run(vec![format!("not type-checked: the check failed: {error}")])
        });
        if matches!(verdict, Verdict::Run(_)) {
            self.release.open();
        }
        verdict
    }
}

/// A server's type check.
pub struct TypeCheck {
    mode: Mode,
    /// Unset while the compiler downloads; then the running checkers, or why there are none.
    checker: Arc<OnceLock<Result<Checkers, Unchecked>>>,
    /// The SDK the declarations were made from: a name it resolves (a spelling an official
    /// SDK uses) is no error, whatever the declarations say.
    sdk: Arc<Sdk>,
    /// The response and schema types the declarations name: values parsed from JSON, which
    /// have no methods but those of objects and arrays.
    json_types: Arc<HashSet<String>>,
    /// Those of them that are a string, number or boolean (an enum's literals).
    scalar_types: Arc<HashSet<String>>,
    /// Those of them that are an array (GitHub's `content_directory`).
    array_types: Arc<HashSet<String>>,
    /// The SDK's group types as the compiler names them, and the groups each may be.
    group_types: Arc<HashMap<String, Vec<String>>>,
    /// The API's base URL, which `fetch` paths are resolved against.
    base_url: url::Url,
}

impl TypeCheck {
    /// The check in `mode` with `compilers` copies of the compiler [`compiler::locate`]
    /// finds, each preloaded with the SDK's declarations; `None`, with one warning saying why,
    /// when the mode is off or no compiler can be had. When the pinned compiler must be
    /// downloaded first, that happens in the background and scripts run unchecked, with a
    /// note, until it is ready. `base_url` is the API's, which `fetch` paths resolve against.
    pub async fn start(
        mode: Mode,
        tsc: Option<&Path>,
        sdk: Arc<Sdk>,
        base_url: url::Url,
        fairness: &crate::fair::Fairness,
    ) -> Option<Self> {
        let compilers = fairness.typecheck_compilers;
        let (per_principal, keep_one) = if fairness.one_caller {
            (usize::MAX, false)
        } else {
            (CHECKS_PER_PRINCIPAL, true)
        };
        if mode == Mode::Off {
            return None;
        }
        let declarations = crate::sdk::declarations(sdk.api());
        let json_types = Arc::new(json_types(&declarations));
        let scalar_types = Arc::new(aliases_where(&declarations, |ty| {
            ty.split(" | ")
                .all(|member| kind_of_literal(member).is_some())
        }));
        let array_types = Arc::new(aliases_where(&declarations, |ty| {
            ty.ends_with("[]") || ty.starts_with("Array<") || ty.starts_with("readonly ")
        }));
        let group_types = Arc::new(crate::sdk::group_types(sdk.api()));
        let checker = Arc::new(OnceLock::new());
        match compiler::locate(tsc) {
            compiler::Located::Ready(tsc) => {
                let started =
                    Checkers::start(&tsc, &declarations, compilers, per_principal, keep_one).await;
                if let Err(Unchecked(why)) = &started {
                    eprintln!("sdkbox: warning: the type check is off: {why}");
                    return None;
                }
                let _ = checker.set(started);
            }
            compiler::Located::Missing(why) => {
                tracing::warn!("execute runs without a type check: {why}");
                eprintln!("sdkbox: warning: scripts are not type-checked: {why}");
                return None;
            }
            compiler::Located::Download(package, dir) => {
                eprintln!(
                    "sdkbox: downloading TypeScript {} ({}, about 10 MB) for the type check, once; scripts run unchecked until it is ready",
                    compiler::VERSION,
                    package.platform
                );
                let ready = checker.clone();
                tokio::spawn(async move {
                    let started = match compiler::download(&package, &dir, &compiler::registry())
                        .await
                    {
                        Ok(tsc) => {
                            Checkers::start(&tsc, &declarations, compilers, per_principal, keep_one)
                                .await
                        }
                        Err(error) => Err(error),
                    };
                    match &started {
                        Ok(_) => eprintln!("sdkbox: the type check is on"),
                        Err(Unchecked(why)) => {
                            eprintln!("sdkbox: warning: the type check is off: {why}");
                        }
                    }
                    let _ = ready.set(started);
                });
            }
        }
        Some(Self {
            mode,
            checker,
            sdk,
            json_types,
            scalar_types,
            array_types,
            group_types,
            base_url,
        })
    }

    /// Starts checking `code` for `who` while it runs (see [`Checking`]): its verdict opens
    /// the hold when the code may run and leaves it shut when it may not.
    pub fn begin(self: &Arc<Self>, code: &str, who: &Principal) -> Checking {
        let (release, hold) = crate::sandbox::hold();
        let check = self.clone();
        let code = code.to_owned();
        let who = who.clone();
        // The check is a span of the call that began it, with the verdict it came to.
        let span = tracing::info_span!(
            crate::telemetry::span::TYPECHECK,
            verdict = tracing::field::Empty
        );
        let task = tokio::spawn(
            async move {
                let verdict = check.verdict(&code, &who).await;
                let word = match &verdict {
                    Verdict::Run(_) => "run",
                    Verdict::Stop(_) => "stop",
                };
                tracing::Span::current().record("verdict", word);
                verdict
            }
            .instrument(span),
        );
        Checking {
            task: tokio_util::task::AbortOnDropHandle::new(task),
            release,
            hold: (self.mode == Mode::Block).then_some(hold),
        }
    }

    /// What the check is doing: `ready`, `downloading` (its compiler), or `unavailable`.
    pub fn status(&self) -> &'static str {
        match self.checker.get() {
            Some(Ok(_)) => "ready",
            Some(Err(_)) => "unavailable",
            None => "downloading",
        }
    }

    /// Checks `code` for `who`. Code the sandbox refuses anyway (too large, nested too
    /// deeply) is not checked; deeply nested code is parsed on a thread with room for its
    /// recursion. Compilers are handed out in turn between principals; the wait counts
    /// toward the deadline, and a check that cannot start in time lets the code run
    /// unchecked, with a warning; so does a check past its principal's
    /// [`CHECKS_PER_PRINCIPAL`] (a caller cannot hold the checkers from the others, and
    /// gains nothing: unchecked code runs in the same sandbox).
    pub async fn verdict(&self, code: &str, who: &Principal) -> Verdict {
        let started = Instant::now();
        if code.len() > crate::sandbox::MAX_CODE_BYTES || code.len() > MAX_CHECKED_BYTES {
            return Verdict::Run(vec![
                "not type-checked: the code is larger than the check takes".into(),
            ]);
        }
        // Code that names neither the SDK nor `fetch` (in any case: `SdkboxApi` is the SDK's
        // type; nor in a Unicode escape, `\u0061pi`) cannot reach the provider: nothing in it
        // could be stopped, so no compiler is asked, and a call that only computes costs the
        // check nothing.
        let lower = code.to_ascii_lowercase();
        if !lower.contains("api") && !lower.contains("fetch") && !code.contains("\\u") {
            return Verdict::Run(Vec::new());
        }
        // Nothing is parsed for a check that cannot run yet.
        let checkers = match self.checker.get() {
            Some(Ok(checkers)) => checkers,
            Some(Err(_)) => return Verdict::Run(Vec::new()),
            None => {
                return Verdict::Run(vec![
                    "not type-checked: the TypeScript compiler is still downloading".into(),
                ]);
            }
        };
        if crate::sandbox::nesting_depth(code).is_none() {
            return Verdict::Run(Vec::new());
        }
        let owned = code.to_owned();
        let sdk = self.sdk.clone();
        let built = tokio::task::spawn_blocking(move || {
            let document = move || {
                // A raw request the spec surely routes returns what its operation returns;
                // at most a few per script are judged, as the routes below are.
                let judged = std::cell::Cell::new(0);
                let route_type = |method: &str, parts: &[routes::Part]| {
                    judged.set(judged.get() + 1);
                    if judged.get() > MAX_JUDGED {
                        return None;
                    }
                    let op = routes::operation(method, parts, sdk.operations())?;
                    Some(returned_type(op))
                };
                Document::typed(&owned, &route_type)
            };
            // On a stack of its own whatever the nesting the sandbox counts: a member chain
            // thousands of links long is deep to the parser's visitors too.
            std::thread::Builder::new()
                .stack_size(PARSER_STACK)
                .spawn(document)
                .ok()?
                .join()
                .ok()
        })
        .await;
        let Ok(Some(document)) = built else {
            return Verdict::Run(vec!["not type-checked: the code could not be read".into()]);
        };
        let waiting = Waiting::start();
        let waited =
            tokio::time::timeout_at((started + CHECK_DEADLINE).into(), checkers.queue.turn(who))
                .await;
        drop(waiting);
        let turn = match waited {
            Ok(Ok(turn)) => turn,
            Ok(Err(refused)) => {
                metrics::counter!("sdkbox_refused_total", "why" => "typecheck").increment(1);
                return Verdict::Run(vec![format!("not type-checked: {refused}")]);
            }
            Err(_) => {
                return Verdict::Run(vec![format!(
                    "not type-checked: every type checker was busy for {} ms",
                    CHECK_DEADLINE.as_millis()
                )]);
            }
        };
        let remaining = CHECK_DEADLINE.saturating_sub(started.elapsed());
        if remaining < MIN_CHECK_TIME {
            // Too little left to check: a compiler is not given a deadline it must overrun
            // (and be restarted for).
            return Verdict::Run(vec![format!(
                "not type-checked: the type checkers were busy for {} ms",
                started.elapsed().as_millis()
            )]);
        }
        // On a task of its own: a call cancelled meanwhile stops waiting for it, but the
        // compiler finishes (its document closed) and goes back to the others.
        let all = self.checker.clone();
        let text = document.text.clone();
        let checked = tokio::spawn(async move {
            let _turn = turn;
            let Some(Ok(checkers)) = all.get() else {
                return Err(Unchecked("the type check is gone".into()));
            };
            let Some(index) = lock(&checkers.free).pop() else {
                return Err(Unchecked("no type checker was free".into()));
            };
            // Given back however the check ends, a panic included.
            let _back = GiveBack(&checkers.free, index);
            checkers.all[index]
                .diagnostics_within(&text, remaining)
                .await
        })
        .await
        .unwrap_or_else(|e| Err(Unchecked(format!("the check failed: {e}"))));
        let diagnostics = match checked {
            Ok(diagnostics) => diagnostics,
            Err(Unchecked(why)) => {
                return Verdict::Run(vec![format!("not type-checked: {why}")]);
            }
        };
        let known = Known {
            document: &document,
            json_types: &self.json_types,
            scalar_types: &self.scalar_types,
            array_types: &self.array_types,
            group_types: &self.group_types,
            sdk: &self.sdk,
            asked: std::cell::RefCell::default(),
        };
        // A name the SDK resolves at run time (`api.orders.retrieve` for `get`) is fine. A call
        // in another SDK's positional form is said once below, in sdkbox's words with its
        // form, not as the compiler's count of arguments.
        // At most so many of the compiler's diagnostics are judged: each is some work, and a
        // script of thousands of wrong lines needs no more than its first to be stopped.
        let mut diagnostics: Vec<Diagnostic> = diagnostics
            .into_iter()
            .take(MAX_DIAGNOSTICS)
            .filter(|d| !resolves(&known, d))
            // `body: { ... }` is how the SDK also takes an object body's fields (the SDK
            // checks them as it takes them): nothing to warn about.
            .filter(|d| {
                !(matches!(d.code, 2353 | 2561)
                    && d.message.contains("'body' does not exist")
                    && document.in_sdk_call(d.line, d.character))
            })
            .filter(|d| {
                !(matches!(d.code, 2345 | 2554) && document.in_positional_call(d.line, d.character))
            })
            .collect();
        diagnostics.extend(
            document
                .positional
                .iter()
                .take(MAX_JUDGED)
                .filter_map(|call| {
                    let op = self.sdk.resolve(&call.group, &call.method)?;
                    Some(Diagnostic {
                        code: ROUTE,
                        message: crate::sdk::positional(op, call.arguments),
                        line: call.line,
                        character: call.character,
                    })
                }),
        );
        // A fraction where the SDK takes integers: the compiler sees only `number`.
        // Each judged against the spec: at most a few per script (a stop lists a few anyway),
        // so that a script of many calls cannot make one check walk the spec many times.
        diagnostics.extend(document.fractions.iter().take(MAX_JUDGED).filter_map(
            |(group, method, key, value, line, character)| {
                let value = serde_json::Number::from_f64(*value)?;
                let refused = self.sdk.refuses_literal(
                    group,
                    method,
                    key,
                    &serde_json::Value::Number(value),
                )?;
                Some(Diagnostic {
                    code: ROUTE,
                    message: format!(
                        "api.{group}.{method}: {refused} (the SDK refuses it whatever else the \
                         call holds; amounts are in the currency's smallest unit, as integers)"
                    ),
                    line: *line,
                    character: *character,
                })
            },
        ));
        // A number computed with a fraction where the SDK takes an integer: a doubt, which
        // stops the run in a write's arguments.
        diagnostics.extend(
            document
                .computed_fractions
                .iter()
                .take(MAX_JUDGED)
                .filter_map(|(group, method, key, line, character)| {
                    let half = serde_json::Value::from(0.5);
                    self.sdk.refuses_literal(group, method, key, &half)?;
                    Some(Diagnostic {
                        code: FRACTION,
                        message: format!(
                            "`{key}` is computed with a fraction (a product with one, or a \
                             quotient) where api.{group}.{method} takes an integer, and the SDK \
                             refuses a number with a fraction: make it whole (Math.round, \
                             Math.floor); amounts are in the currency's smallest unit"
                        ),
                        line: *line,
                        character: *character,
                    })
                }),
        );
        // Raw requests to no route of the API: the compiler cannot see those. A `fetch` is
        // judged as the API path it resolves to, when it is one.
        let fetched = document.fetches.iter().filter_map(|request| {
            match routes::fetched(request, &self.base_url) {
                Ok(Some(path)) => Some(Ok(path)),
                Ok(None) => None,
                Err(outside) => Some(Err((outside, request))),
            }
        });
        let requests = document
            .raw_requests
            .iter()
            .map(
                |request| match routes::doubled_base(request, &self.base_url) {
                    Some(doubled) => Err((doubled, request)),
                    None => Ok(request.clone()),
                },
            )
            .chain(fetched)
            .take(MAX_JUDGED);
        diagnostics.extend(requests.flat_map(|request| {
            let found: Vec<(String, u32, u32)> = match request {
                // A route it surely calls: the fields written in its body, as for SDK calls.
                Ok(request) => match routes::unknown(&request, self.sdk.operations()) {
                    Some(unknown) => vec![(unknown, request.line, request.character)],
                    None => {
                        routes::operation(&request.method, &request.path, self.sdk.operations())
                            .map(|op| routes::refused_body(&request, op))
                            .unwrap_or_default()
                    }
                },
                Err((outside, request)) => vec![(outside, request.line, request.character)],
            };
            found
                .into_iter()
                .map(|(message, line, character)| Diagnostic {
                    code: ROUTE,
                    message,
                    line,
                    character,
                })
        }));
        judge(&known, code, &diagnostics, self.mode)
    }
}

/// What the verdict reads besides the diagnostics: the checked document, which types are
/// values parsed from JSON, the SDK's group types, and the SDK that resolves names.
struct Known<'a> {
    document: &'a Document,
    json_types: &'a HashSet<String>,
    scalar_types: &'a HashSet<String>,
    array_types: &'a HashSet<String>,
    group_types: &'a HashMap<String, Vec<String>>,
    sdk: &'a Sdk,
    /// What the SDK said of each name asked in this check (a script repeating one wrong
    /// name thousands of times asks once).
    asked: std::cell::RefCell<HashMap<String, bool>>,
}

impl Known<'_> {
    /// Whether `api.<group>.<method>` reaches an operation at run time.
    fn resolves_name(&self, group: &str, method: &str) -> bool {
        let key = format!("{group}\u{0}{method}");
        if let Some(known) = self.asked.borrow().get(&key) {
            return *known;
        }
        let found = self.sdk.resolve(group, method).is_some();
        self.asked.borrow_mut().insert(key, found);
        found
    }

    /// Whether `api.<group>` reaches a group at run time.
    fn has_group(&self, group: &str) -> bool {
        let key = format!("{group}\u{0}");
        if let Some(known) = self.asked.borrow().get(&key) {
            return *known;
        }
        let found = self.sdk.has_group(group);
        self.asked.borrow_mut().insert(key, found);
        found
    }
}

/// Whether `diagnostic` is about an SDK name the SDK resolves after all: written from `api`
/// (`api.orders.retrieve`), or reached another way (an alias, destructuring, an optional
/// chain) and resolved whichever group its type may be.
fn resolves(known: &Known<'_>, diagnostic: &Diagnostic) -> bool {
    if !matches!(diagnostic.code, 2339 | 2551 | 2349) {
        return false;
    }
    // Written from `api`: that very name, and only it (groups of one last name, such as
    // Stripe's `refunds` and `testHelpers.refunds`, resolve different methods).
    if let Some(Some(name)) = known
        .document
        .sdk_name_at(diagnostic.line, diagnostic.character)
    {
        let parts: Vec<&str> = name.split('.').skip(1).collect();
        let Some((method, group)) = parts.split_last() else {
            return false;
        };
        return !group.is_empty() && known.resolves_name(&group.join("."), method);
    }
    on_sdk(known, diagnostic) == Some(true)
}

/// For a "does not exist on type" diagnostic about the SDK's or one of its groups' types,
/// reached any way: `Some(true)` when the SDK resolves the name whichever group the type may
/// be, `Some(false)` when it resolves it for none, `None` when it is not the SDK's type, or
/// some groups resolve it and some do not.
fn on_sdk(known: &Known<'_>, diagnostic: &Diagnostic) -> Option<bool> {
    let groups = sdk_type_in(&diagnostic.message, known.group_types)?;
    let name = property_in(&diagnostic.message)?;
    let called = known
        .document
        .at_called_property(diagnostic.line, diagnostic.character);
    let resolved = |group: &String| {
        let nested = match group.is_empty() {
            true => name.to_owned(),
            false => format!("{group}.{name}"),
        };
        (!group.is_empty() && known.resolves_name(group, name))
            || (!called && known.has_group(&nested))
    };
    let count = groups.iter().filter(|g| resolved(g)).count();
    match count {
        0 => Some(false),
        n if n == groups.len() => Some(true),
        _ => None,
    }
}

/// The type aliases the declarations make for the spec's schemas and responses.
fn json_types(declarations: &str) -> HashSet<String> {
    // The schemas' and responses' aliases follow `api` itself (the globals come before).
    declarations
        .lines()
        .skip_while(|line| !line.starts_with("declare const api"))
        .filter_map(|line| line.strip_prefix("type "))
        .filter_map(|rest| rest.split_once(" = ").map(|(name, _)| name.to_owned()))
        .collect()
}

/// The type aliases of [`json_types`] whose type (`"open" | "paid"`, `content_file[]`)
/// `holds`.
fn aliases_where(declarations: &str, holds: impl Fn(&str) -> bool) -> HashSet<String> {
    declarations
        .lines()
        .skip_while(|line| !line.starts_with("declare const api"))
        .filter_map(|line| line.strip_prefix("type "))
        .filter_map(|rest| rest.split_once(" = "))
        .filter(|(_, ty)| holds(ty.trim_end_matches(';')))
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// The groups the SDK type a "does not exist on type" message names may be (`""` for
/// `SdkboxApi`, the root): the compiler names a group's type by its last part (`refunds`),
/// or by its path in `Sdk` (`Sdk.zeroTrust.devices`).
fn sdk_type_in<'a>(
    message: &str,
    group_types: &'a HashMap<String, Vec<String>>,
) -> Option<&'a [String]> {
    let named = type_in(message)?;
    let last = named.rsplit('.').next().unwrap_or(named);
    let groups = group_types.get(last)?;
    match named.strip_prefix("Sdk.") {
        // A path: only its own group.
        Some(path) => groups
            .iter()
            .position(|g| g == path)
            .map(|at| &groups[at..=at]),
        None if named.contains('.') => None,
        None => Some(groups.as_slice()),
    }
}

/// The type a "does not exist on type 'T'" message names.
fn type_in(message: &str) -> Option<&str> {
    let first = message.lines().next()?;
    let (_, rest) = first.split_once("on type '")?;
    rest.rsplit_once('\'')
        .map(|(ty, _)| ty.split("'. ").next().unwrap_or(ty))
}

/// The property a "Property 'x' does not exist" message is about.
fn property_in(message: &str) -> Option<&str> {
    message.strip_prefix("Property '")?.split('\'').next()
}

/// Whether `ty` (as a message names it) is a value parsed from JSON: a schema or response
/// type of the declarations (not one the code declares itself, nor a name an SDK group's
/// type has too), an array of them, a union of them (`null` and `undefined` aside), or a
/// promise of one (an SDK call not awaited); an object type written out only when
/// `on_response` (what it is called on came from an SDK call).
fn is_json_type(ty: &str, known: &Known<'_>, on_response: bool) -> bool {
    let ty = ty
        .strip_prefix("Promise<")
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(ty);
    // An object type written out is a response's when what it is called on came from an SDK
    // call (a response declared inline); else it is the code's own object.
    if on_response && ty.starts_with("{ ") && ty.trim_end_matches("[]").ends_with('}') {
        return true;
    }
    if ty.contains(['<', '{', '(']) {
        return false;
    }
    let mut members = ty
        .split(" | ")
        .map(|member| member.trim_end_matches("[]"))
        .filter(|member| !matches!(*member, "null" | "undefined"))
        .peekable();
    members.peek().is_some()
        && members.all(|member| {
            known.json_types.contains(member)
                && !known.group_types.contains_key(member)
                && !known.document.declared_types.contains(member)
        })
}

/// Whether a diagnostic that does not stop a run by itself is a doubt about a value: a field
/// a response does not declare read (not called; not of a union, whose other members may
/// have it), a list object
/// indexed by a number, or a value that may be `undefined` given where the SDK takes a value.
fn doubtful(diagnostic: &Diagnostic, known: &Known<'_>) -> bool {
    let message = &diagnostic.message;
    match diagnostic.code {
        2339 | 2551 => {
            !known
                .document
                .at_called_property(diagnostic.line, diagnostic.character)
                && type_in(message).is_some_and(|ty| members(ty).count() == 1)
                && type_in(message).is_some_and(|ty| is_json_type(ty, known, false))
        }
        7053 => {
            let index = message
                .split_once("expression of type '")
                .and_then(|(_, rest)| rest.split_once('\''))
                .map(|(ty, _)| ty);
            index.is_some_and(|ty| ty == "number" || ty.parse::<f64>().is_ok())
                && message
                    .split_once("index type '")
                    .and_then(|(_, rest)| rest.split_once('\''))
                    .is_some_and(|(ty, _)| {
                        let on_response = known
                            .document
                            .in_indexed_response(diagnostic.line, diagnostic.character);
                        members(ty).count() == 1
                            && (is_json_type(ty, known, false)
                                || (on_response && plain_objects(ty)))
                    })
        }
        // The value given (not the type it is given to, which names `undefined` for any
        // optional field) may be `undefined`.
        2322 | 2345
            if message
                .strip_prefix("Type '")
                .or_else(|| message.strip_prefix("Argument of type '"))
                .and_then(|rest| rest.split_once("' is not assignable"))
                .is_some_and(|(given, _)| {
                    given.split(" | ").any(|member| member == "undefined")
                }) =>
        {
            true
        }
        _ => false,
    }
}

/// Whether a diagnostic is about a value the SDK refuses in the arguments of the call it is
/// in: a value of another kind than the scalar the SDK takes (an object where its id goes,
/// a string where a number goes, an enum value it lacks), a required property missing from
/// parameters written out before the call, or a number computed with a fraction where it
/// takes an integer. Judged on the first line of the compiler's explanation, which is about
/// the whole value (the lines after it are about one member of a union).
fn refused_in_call(diagnostic: &Diagnostic, known: &Known<'_>) -> bool {
    match diagnostic.code {
        FRACTION => true,
        2322 | 2345 | 2739..=2741
            if known
                .document
                .in_sdk_call(diagnostic.line, diagnostic.character) =>
        {
            let first = diagnostic
                .message
                .lines()
                .map(str::trim)
                .find(|line| line.starts_with("Type '") || line.starts_with("Property '"));
            first.is_some_and(|line| {
                other_kind(line, known)
                    || missing_properties(line).is_some_and(|names| {
                        names
                            .iter()
                            .all(|name| !known.document.member_assigned.contains(*name))
                            && !known.document.text.contains("Object.assign")
                    })
            })
        }
        _ => false,
    }
}

/// The write whose arguments a diagnostic is in (the innermost SDK call or raw request
/// around it), if that call is one.
fn enclosing_write(diagnostic: &Diagnostic, known: &Known<'_>) -> Option<String> {
    let at = known
        .document
        .offset_of(diagnostic.line, diagnostic.character)?;
    let (called, _) = known
        .document
        .flow
        .calls
        .iter()
        .filter(|(_, (lo, hi))| (*lo..*hi).contains(&at))
        .min_by_key(|(_, (lo, hi))| hi - lo)?;
    sends_write(called, known.sdk).then(|| called_name(called))
}

/// How a message names a call: `api.customers.update`, `api.request("POST", ...)`.
fn called_name(called: &flow::Called) -> String {
    match called {
        flow::Called::Sdk { group, method } => format!("api.{group}.{method}"),
        flow::Called::Raw { method } => format!("api.request(\"{method}\", ...)"),
    }
}

/// The kinds of value a type (as a message names it) may be: `None` when it may be anything
/// (`any`, `unknown`, a type parameter's constraint the message does not show).
fn kinds(ty: &str, known: &Known<'_>) -> Option<BTreeSet<Kind>> {
    let ty = ty.trim();
    if ty == "{}" {
        return None;
    }
    if ty.starts_with('{') && ty.trim_end_matches("[]").ends_with('}') || ty.ends_with("[]") {
        return Some(BTreeSet::from([Kind::Object]));
    }
    if ty.contains(['<', '(', '{', '&']) {
        return None;
    }
    let mut kinds = BTreeSet::new();
    for member in ty.split(" | ") {
        match kind_of_literal(member) {
            Some(Some(kind)) => kinds.insert(kind),
            Some(None) => continue,
            // The SDK takes a Date as the object it is, never a string or a number.
            None if member == "Date" => kinds.insert(Kind::Object),
            // A schema parsed from JSON that is an object (not an enum's alias, nor a type
            // the code declares, whose kind the message does not show).
            None if known.json_types.contains(member)
                && !known.scalar_types.contains(member)
                && !known.document.declared_types.contains(member) =>
            {
                kinds.insert(Kind::Object)
            }
            None => return None,
        };
    }
    (!kinds.is_empty()).then_some(kinds)
}

/// The kind a type's member written as a keyword or literal is: `Some(None)` for `null`,
/// `undefined` and `void`, `None` when it is not one (a name, `any`).
fn kind_of_literal(member: &str) -> Option<Option<Kind>> {
    Some(Some(match member.trim() {
        "null" | "undefined" | "void" => return Some(None),
        "string" => Kind::String,
        "number" | "bigint" => Kind::Number,
        "boolean" | "true" | "false" => Kind::Boolean,
        member if member.starts_with(['"', '`', '\'']) => Kind::String,
        member if member.starts_with(|c: char| c.is_ascii_digit() || c == '-') => Kind::Number,
        _ => return None,
    }))
}

/// What a value may be, as far as the SDK's scalars go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    String,
    Number,
    Boolean,
    /// An object or an array.
    Object,
}

/// Whether one line of a message says a value given cannot be any kind the scalar it is
/// given to is: `Type 'Customer' is not assignable to type 'string'`, or `'string'` to
/// `'number'`; never a widened string given to a union of strings, which is the same kind.
fn other_kind(line: &str, known: &Known<'_>) -> bool {
    let Some((given, target)) = line
        .trim()
        .strip_prefix("Type '")
        .and_then(|rest| rest.split_once("' is not assignable to type '"))
        .and_then(|(given, rest)| Some((given, rest.rsplit_once('\'')?.0)))
    else {
        return false;
    };
    match (kinds(given, known), kinds(target, known)) {
        (Some(given_kinds), Some(target_kinds)) => {
            !target_kinds.contains(&Kind::Object)
                && (given_kinds.is_disjoint(&target_kinds) || other_literal(given, target))
        }
        _ => false,
    }
}

/// Whether a union of string literals the code may give has one that a union of string
/// literals it is given to lacks (`"fraud"` for `"duplicate" | "fraudulent"`): the value is
/// one the code wrote, and the SDK refuses it.
fn other_literal(given: &str, target: &str) -> bool {
    let literals = |ty: &str| -> Option<Vec<String>> {
        members(ty)
            .map(|member| {
                (member.starts_with('"') && member.ends_with('"')).then(|| member.to_owned())
            })
            .collect()
    };
    match (literals(given), literals(target)) {
        (Some(given), Some(target)) => given.iter().any(|literal| !target.contains(literal)),
        _ => false,
    }
}

/// The required properties a line of a message says an object written out lacks: `Property
/// 'items' is missing in type '{ ... }' but required in type '...'`, or `Type '{ ... }' is
/// missing the following properties from type '...': items, currency`.
fn missing_properties(line: &str) -> Option<Vec<&str>> {
    let line = line.trim();
    let (source, names) = if let Some(rest) = line.strip_prefix("Property '") {
        let (name, rest) = rest.split_once('\'')?;
        let source = rest
            .strip_prefix(" is missing in type '")?
            .split_once("' but required in type")?
            .0;
        (source, vec![name])
    } else {
        let rest = line.strip_prefix("Type '")?;
        let (source, rest) =
            rest.split_once("' is missing the following properties from type '")?;
        let names = rest.rsplit_once("': ")?.1.trim_end_matches('.');
        let names = names
            .split(", ")
            .map(str::trim)
            .filter(|name| !name.is_empty() && !name.contains(' '))
            .collect();
        (source, names)
    };
    // Only an object written out with its keys: a `Record` or an index signature may hold
    // the property whatever its type says.
    (source.starts_with('{') && !source.contains("]: ")).then_some(names)
}

/// Whether every member of a type is an object type written out (`{ total_count: number;
/// workflows: workflow[]; }`): no array, string or iterable, whoever made it.
fn plain_objects(ty: &str) -> bool {
    members(ty).all(|member| member.starts_with("{ ") && member.ends_with('}'))
}

/// The type an iteration message is about: `Type 'X' must have a '[Symbol.iterator]()'
/// method`, `Type 'X' is not an array type`.
fn iterated_type(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("Type '")?;
    let (ty, after) = rest.split_once("' ")?;
    (after.starts_with("must have a '[Symbol.iterator]()'")
        || after.starts_with("is not an array type"))
    .then_some(ty)
}

/// What a diagnostic about an SDK name that reaches nothing may have meant, ranked by meaning
/// (see [`Sdk::suggestion`]): for a name written from `api` its whole call, for one reached
/// another way its group and the missing name; `None` when it is about no SDK name, or
/// nothing comes near.
fn meant(diagnostic: &Diagnostic, known: &Known<'_>) -> Option<String> {
    if !matches!(diagnostic.code, 2339 | 2551) {
        return None;
    }
    let asked = match known
        .document
        .sdk_name_at(diagnostic.line, diagnostic.character)
    {
        Some(Some(name)) => name.strip_prefix("api.")?.to_owned(),
        _ => {
            let groups = sdk_type_in(&diagnostic.message, known.group_types)?;
            let name = property_in(&diagnostic.message)?;
            // The method called on it, when the missing name is a group (`gh.pullRequests
            // .list(...)`): what it means is in both.
            let document = known.document;
            let after = document
                .offset_of(diagnostic.line, diagnostic.character)
                .and_then(|at| document.text.get(at..))
                .and_then(|rest| rest.strip_prefix(name))
                .and_then(|rest| rest.strip_prefix('.'))
                .map(|rest| {
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                        .unwrap_or(rest.len());
                    &rest[..end]
                })
                .filter(|method| !method.is_empty());
            let name = match after {
                Some(method) => format!("{name}.{method}"),
                None => name.to_owned(),
            };
            match groups.first().map(String::as_str) {
                Some("") | None => name,
                Some(group) => format!("{group}.{name}"),
            }
        }
    };
    let suggestion = known.sdk.suggestion(&asked);
    (suggestion != ".").then_some(suggestion)
}

/// The members of a type as a message names it, `null` and `undefined` aside: its parts
/// between ` | ` outside braces, brackets and parentheses (`{ a?: string | undefined; }` is
/// one).
fn members(ty: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (at, c) in ty.char_indices() {
        match c {
            '{' | '[' | '(' | '<' => depth += 1,
            '}' | ']' | ')' | '>' => depth -= 1,
            '|' if depth == 0 && ty[..at].ends_with(' ') && ty[at + 1..].starts_with(' ') => {
                parts.push(&ty[start..at - 1]);
                start = at + 2;
            }
            _ => {}
        }
    }
    parts.push(&ty[start.min(ty.len())..]);
    parts
        .into_iter()
        .filter(|member| !matches!(*member, "null" | "undefined"))
}

/// Whether a union has arrays and other members both (GitHub's contents: a directory's
/// array or a file): an array's method is missing from it only for some values.
fn arrays_and_objects(ty: &str) -> bool {
    let arrays = members(ty).filter(|m| m.ends_with("[]")).count();
    arrays > 0 && arrays < members(ty).count()
}

/// The properties the code reads in what it only tests or compares (`.customer_idd` in
/// `if (o.customer_idd)`, not in a write inside a test), each text read once however the
/// tests nest.
fn tested_properties<'a>(document: &'a Document, reach: &flow::Reach<'_>) -> HashSet<&'a str> {
    let mut guards = document.flow.guards.clone();
    guards.sort_unstable();
    let mut tested = HashSet::new();
    let mut done = 0;
    for (lo, hi) in guards {
        let Some(text) = document.text.get(lo.max(done)..hi.max(done)) else {
            continue;
        };
        let start = lo.max(done);
        done = done.max(hi);
        for (at, _) in text.match_indices('.') {
            let name = &text[at + 1..];
            let end = name
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(name.len());
            if end > 0 && reach.tests(start + at + 1) {
                tested.insert(&name[..end]);
            }
        }
    }
    tested
}

/// Whether a call sends a write, as egress counts writes ([`crate::egress::is_write`]): an SDK
/// method by its operation's method, a raw request by its literal one.
fn sends_write(called: &flow::Called, sdk: &Sdk) -> bool {
    let method = match called {
        flow::Called::Sdk { group, method } => match sdk.resolve(group, method) {
            Some(op) => op.method.to_ascii_uppercase(),
            None => return false,
        },
        flow::Called::Raw { method } => method.to_ascii_uppercase(),
    };
    crate::egress::is_write(&method)
}

/// The write (`api.customers.update`, `api.request("POST", ...)`) the doubtful value at a
/// diagnostic reaches within the script (see [`flow`]), if any.
fn reached_write(
    diagnostic: &Diagnostic,
    known: &Known<'_>,
    reach: &flow::Reach<'_>,
    tested: &HashSet<&str>,
) -> Option<String> {
    let document = known.document;
    let at = document.offset_of(diagnostic.line, diagnostic.character)?;
    // A field the code also tests (`if (o.customer_idd) update({ customer_id:
    // o.customer_idd })`) is one it expects may be missing: what it sends is guarded.
    if property_in(&diagnostic.message).is_some_and(|name| tested.contains(name)) {
        return None;
    }
    reach.from(at).map(called_name)
}

/// What the SDK method of `op` returns, as the declarations name it:
/// `ReturnType<SdkboxApi["orders"]["get"]>`.
fn returned_type(op: &crate::spec::Operation) -> String {
    let keys: String = op
        .group
        .split('.')
        .filter(|part| !part.is_empty())
        .chain(std::iter::once(op.name.as_str()))
        .map(|key| format!("[{}]", serde_json::Value::from(key)))
        .collect();
    format!("ReturnType<SdkboxApi{keys}>")
}

/// The type `api.paginate` gives, as messages name it (`SdkboxPages<Order>`).
const PAGES: &str = "SdkboxPages<";

/// Whether an "Argument of type 'T' is not assignable" message's `T` is a string, number or
/// boolean (or a literal of one), never `undefined` or `null`, which the SDK takes as no
/// parameters.
fn scalar_argument(message: &str) -> bool {
    let Some(ty) = message
        .strip_prefix("Argument of type '")
        .and_then(|rest| rest.split_once("' is not assignable"))
        .map(|(ty, _)| ty)
    else {
        return false;
    };
    ty.split(" | ").all(|member| {
        matches!(
            member,
            "string" | "number" | "boolean" | "bigint" | "true" | "false"
        ) || member.starts_with('"')
            || member.starts_with('`')
            || member.starts_with(|c: char| c.is_ascii_digit() || c == '-')
    })
}

/// Literals and raw requests of one script judged against the spec, at most each.
const MAX_JUDGED: usize = 32;

/// The code of a diagnostic the check makes itself: an `api.request` to no route of the API,
/// or a literal the SDK refuses whatever else its call holds.
const ROUTE: u32 = 0;

/// The code of a doubt the check finds itself: a number computed with a fraction where the
/// SDK takes an integer.
const FRACTION: u32 = 1;

/// Whether a diagnostic is certain enough to stop a run: only what the runtime SDK would
/// refuse too, whatever the values the code computes. Grammar the sandbox's parser accepts is
/// never a reason.
fn blocks(diagnostic: &Diagnostic, known: &Known<'_>) -> bool {
    let document = known.document;
    let (line, character) = (diagnostic.line, diagnostic.character);
    match diagnostic.code {
        // A literal method and path no operation has.
        ROUTE => true,
        // An SDK name that does not exist for any group its type may be (names the SDK
        // resolves were set aside), reached any way: an alias, destructuring, an optional
        // chain, a helper's parameter. Not when the code declares a type of that name, or a
        // schema has it too: the message may be about that one.
        2339 | 2551
            if on_sdk(known, diagnostic) == Some(false)
                && type_in(&diagnostic.message).is_some_and(|ty| {
                    !document.declared_types.contains(ty) && !known.json_types.contains(ty)
                }) =>
        {
            true
        }
        // A method called on a value parsed from JSON that its type lacks: JSON has no
        // functions, so the call throws whatever the response holds (`list.filter(...)` on
        // a list object, `.json()` on a parsed body), unless the code gave it that method.
        2339 | 2551
            if document.at_called_property(line, character)
                && type_in(&diagnostic.message).is_some_and(|ty| !arrays_and_objects(ty))
                && property_in(&diagnostic.message)
                    .is_some_and(|name| !document.assigned_names.contains(name))
                && type_in(&diagnostic.message).is_some_and(|ty| {
                    is_json_type(ty, known, document.at_called_on_response(line, character))
                }) =>
        {
            true
        }
        // `.length` read on a value parsed from JSON that is an object, not an array (a list
        // object): it is never there, whatever the response holds.
        2339 if property_in(&diagnostic.message) == Some("length")
            && !document.assigned_names.contains("length")
            && type_in(&diagnostic.message).is_some_and(|ty| {
                members(ty).count() == 1 && !ty.ends_with("[]") && is_json_type(ty, known, false)
            }) =>
        {
            true
        }
        // What `api.paginate` gives used as an array: a method or `.length` read on it, or it
        // iterated, spread or made an array of: each throws whatever the pages hold (its
        // object has nothing an array has).
        2339 | 2551
            if type_in(&diagnostic.message).is_some_and(|ty| ty.starts_with(PAGES))
                && (document.at_called_property(line, character)
                    || property_in(&diagnostic.message) == Some("length")) =>
        {
            true
        }
        2488 | 2495 | 2504 | 2548 | 2549 | 2802
            if diagnostic.message.contains(&format!("'{PAGES}")) =>
        {
            true
        }
        // A value parsed from JSON that is no array iterated or destructured as one
        // (`for (const r of list)`, `const [first] = list` on a list object): it throws
        // whatever the response holds.
        2488 | 2461 | 2495 | 2548 | 2549
            if iterated_type(&diagnostic.message).is_some_and(|ty| {
                members(ty)
                    .all(|member| !member.ends_with("[]") && !known.array_types.contains(member))
                    && (is_json_type(ty, known, false) || plain_objects(ty))
            }) =>
        {
            true
        }
        2345 | 2769
            if diagnostic.message.contains(&format!("type '{PAGES}"))
                && (diagnostic.message.contains("'Iterable<")
                    || diagnostic.message.contains("'ArrayLike<")) =>
        {
            true
        }
        // A string, number or boolean where the SDK takes its one object of parameters
        // (`api.zones.get(zone_id)`): refused at run time whatever its value.
        2345 if document.at_sdk_first_argument(line, character)
            && scalar_argument(&diagnostic.message) =>
        {
            true
        }
        // An SDK name that does not exist (names the SDK resolves were set aside), or an SDK
        // name called that is not a method.
        2339 | 2551 | 2349 => document.sdk_name_at(line, character).is_some(),
        // `body: { ... }` is how the SDK also takes an object body's fields.
        2353 | 2561 if diagnostic.message.contains("'body' does not exist") => false,
        // An unknown property written in an SDK call's own object literal.
        2353 | 2561 => document.in_sdk_call(line, character),
        // A required property missing from an SDK call's own object literal.
        2739..=2741 => document.at_sdk_literal_argument(line, character),
        // A literal value of the wrong type, written in an SDK call's arguments; an object
        // literal or an SDK call result (a promise, not a method) passed where the call
        // takes something else.
        2322 | 2820 => document.at_sdk_literal_value(line, character),
        2345 => {
            document.at_sdk_literal_value(line, character)
                || document.starts_sdk_literal_argument(line, character)
                || document.sdk_name_at(line, character).is_some()
        }
        // Grammar errors only when the sandbox's parser cannot read the code either.
        1000..=1999 => document.unparsable,
        _ => false,
    }
}

/// The verdict on `code`, from its diagnostics.
fn judge(known: &Known<'_>, code: &str, diagnostics: &[Diagnostic], mode: Mode) -> Verdict {
    let document = known.document;
    let lines: Vec<&str> = code.trim_start_matches('\u{FEFF}').lines().collect();
    // The model's 1-based line and character (the compiler counts UTF-16 units), or no line
    // when the diagnostic is on sdkbox's wrapper.
    let place = |d: &Diagnostic| {
        let line = d
            .line
            .checked_sub(document.offset)
            .filter(|l| (*l as usize) < lines.len());
        let Some(line) = line else {
            return (None, 1);
        };
        let character = document.model_character(d.line, d.character);
        let mut units = 0;
        let mut column: u32 = 1;
        for c in lines[line as usize].chars() {
            if units >= character as usize {
                break;
            }
            units += c.len_utf16();
            column += 1;
        }
        (Some(line + 1), column)
    };
    // A doubt that reaches a write stops the run too, saying which write it reaches: where
    // values reach writes is worked out once, and at most a bounded number of doubts judged.
    // Only a script with a doubt pays for working out where its values go.
    let any_doubt = diagnostics.iter().any(|d| doubtful(d, known));
    let reach = any_doubt.then(|| document.flow.reach(|called| sends_write(called, known.sdk)));
    let tested = reach
        .as_ref()
        .map(|reach| tested_properties(document, reach))
        .unwrap_or_default();
    let mut doubts = 0usize;
    let judged: Vec<(&Diagnostic, bool, Option<String>)> = diagnostics
        .iter()
        .map(|d| {
            let certain = mode == Mode::Block && blocks(d, known);
            if !certain && refused_in_call(d, known) {
                let write = enclosing_write(d, known).map(|write| {
                    format!(
                        " (in the arguments of {write}, a write: the SDK would refuse it after \
                         what the script sent before it)"
                    )
                });
                return (d, certain, write);
            }
            let doubt = !certain && doubtful(d, known) && {
                doubts += 1;
                doubts <= MAX_DOUBTS
            };
            let write = reach
                .as_ref()
                .filter(|_| doubt)
                .and_then(|reach| reached_write(d, known, reach, &tested))
                .map(|write| {
                    format!(
                        " (this value flows into {write}, a write, which would send it as it is)"
                    )
                });
            (d, certain, write)
        })
        .collect();
    let said = |(d, certain, write): &(&Diagnostic, bool, Option<String>)| {
        let mut message = match certain.then(|| meant(d, known)).flatten() {
            // An SDK name that reaches nothing: sdkbox's suggestions, by meaning, instead of
            // the compiler's, by spelling alone.
            Some(suggestion) => {
                let first = d.message.lines().next().unwrap_or_default();
                let plain = first.split(" Did you mean").next().unwrap_or(first);
                format!("{}{suggestion}", plain.trim_end_matches('.'))
            }
            None => shortened(&d.message.replace('\n', " ")),
        };
        if let Some(write) = write {
            message.push_str(write);
        }
        let code = match d.code {
            ROUTE | FRACTION => "sdkbox".to_owned(),
            code => format!("TS{code}"),
        };
        match place(d) {
            (Some(line), column) => format!("{line}:{column} {code}: {message}"),
            (None, _) => format!("{code}: {message}"),
        }
    };
    let (stopping, warning): (Vec<_>, Vec<_>) = judged
        .iter()
        .partition(|(_, certain, write)| *certain || (mode == Mode::Block && write.is_some()));
    let warnings: Vec<String> = warning.iter().take(MAX_WARNINGS).map(|j| said(j)).collect();
    let Some((first, _, _)) = stopping.first() else {
        return Verdict::Run(warnings);
    };
    let listed: Vec<String> = stopping.iter().take(MAX_LISTED).map(|j| said(j)).collect();
    let more = match stopping.len().saturating_sub(MAX_LISTED) {
        0 => String::new(),
        n => format!("\n(and {n} more)"),
    };
    let (line, column) = place(first);
    let excerpt = line.and_then(|l| lines.get(l as usize - 1)).map(|text| {
        let pad: String = text
            .chars()
            .take(column.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!("{text}\n{pad}^")
    });
    Verdict::Stop(ExecError {
        kind: ErrorKind::Type,
        name: Some("TypeError".into()),
        message: format!(
            "the code was not run: the type check found {} error{} in it that the SDK refuses whatever the values, or that reach a write (nothing was sent); fix {} and run it again:\n{}{more}",
            stopping.len(),
            if stopping.len() == 1 { "" } else { "s" },
            if stopping.len() == 1 { "it" } else { "them" },
            listed.join("\n")
        ),
        line,
        column: line.map(|_| column),
        excerpt,
        stack: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnostic(document: &Document, needle: &str, code: u32, message: &str) -> Diagnostic {
        let (line, text) = document
            .text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .unwrap();
        Diagnostic {
            code,
            message: message.into(),
            line: line as u32,
            character: text.find(needle).unwrap() as u32,
        }
    }

    #[test]
    fn a_long_message_is_cut_before_its_suggestion_never_in_it() {
        let long_type = format!("'{}\"z\"'", "\"a\" | ".repeat(200));
        let message = format!(
            "Property 'recordz' does not exist on type {long_type}. Did you mean 'records'?"
        );
        let said = shortened(&message);
        assert!(said.ends_with("Did you mean 'records'?"), "{said}");
        assert!(said.contains("… ["), "{said}");
        assert!(said.chars().count() <= MAX_MESSAGE + 40, "{said}");
        assert_eq!(
            shortened("short. Did you mean 'x'?"),
            "short. Did you mean 'x'?"
        );
    }

    #[test]
    fn only_certain_errors_about_sdk_calls_stop_a_run() {
        let code = "const c = await api.customers.lst({ limit: 2 });\nreturn c.dataa;";
        let document = Document::new(code);
        let method = diagnostic(
            &document,
            "lst",
            2551,
            "Property 'lst' does not exist. Did you mean 'list'?",
        );
        let field = diagnostic(
            &document,
            "dataa",
            2551,
            "Property 'dataa' does not exist. Did you mean 'data'?",
        );
        let (json_types, group_types) = (HashSet::new(), HashMap::new());
        let sdk = Sdk::new(Arc::new(crate::spec::Api {
            title: String::new(),
            version: String::new(),
            servers: Vec::new(),
            auth: Vec::new(),
            operations: Vec::new(),
            schemas: Vec::new(),
        }));
        let known = Known {
            document: &document,
            json_types: &json_types,
            scalar_types: &json_types,
            array_types: &json_types,
            group_types: &group_types,
            sdk: &sdk,
            asked: std::cell::RefCell::default(),
        };
        let Verdict::Stop(error) =
            judge(&known, code, &[method.clone(), field.clone()], Mode::Block)
        else {
            panic!("a misspelled method must stop the run");
        };
        assert_eq!(error.kind, ErrorKind::Type);
        assert_eq!((error.line, error.column), (Some(1), Some(31)));
        assert!(
            error.message.contains("1:31 TS2551: Property 'lst'"),
            "{}",
            error.message
        );
        assert!(!error.message.contains("dataa"), "{}", error.message);
        assert_eq!(
            error.excerpt.as_deref(),
            Some(
                "const c = await api.customers.lst({ limit: 2 });\n                              ^"
            )
        );
        // A response field: a warning only. In warn mode nothing stops.
        assert_eq!(
            judge(&known, code, std::slice::from_ref(&field), Mode::Block),
            Verdict::Run(vec![
                "2:10 TS2551: Property 'dataa' does not exist. Did you mean 'data'?".into()
            ])
        );
        assert!(
            matches!(judge(&known, code, &[method], Mode::Warn), Verdict::Run(w) if w.len() == 1)
        );
    }
}
