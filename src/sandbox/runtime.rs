//! One execution in one fresh `JsRuntime` on one fresh OS thread, and everything that stops
//! it: a watchdog for the deadline and cancellation, a heap-limit callback for memory, and a
//! timeout around the event loop for work that is waiting rather than running.
//!
//! Invariants: the runtime is created, used and dropped on its own thread and never reused
//! (QuickJS allows ~270 runtimes per thread); after a termination it is only dropped.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use deno_core::error::CoreError;
use deno_core::{JsRuntime, ModuleSpecifier, PollEventLoopOptions, RuntimeOptions, v8};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::loader::SandboxLoader;
use super::ops::{Console, ResultSlot, sdkbox_sandbox};
use super::outcome::{ConsoleLine, ErrorKind, ExecError};
use super::source::{MODULE_URL, Program};
use super::{ExecLimits, errors};
use crate::egress::EgressSession;

const BOOTSTRAP: &str = include_str!("bootstrap.js");

/// The stack of an execution thread: QuickJS's own 1 MiB JS stack plus the native frames.
const THREAD_STACK: usize = 16 * 1024 * 1024;

/// Everything one execution needs, moved onto its thread.
pub struct Job {
    pub program: Arc<Program>,
    pub limits: ExecLimits,
    pub session: EgressSession,
    pub cancel: CancellationToken,
    pub deadline: Instant,
    /// The long-lived runtime that hosts the watchdog.
    pub watchdog: tokio::runtime::Handle,
}

/// What the execution thread reports back.
pub struct Report {
    pub result_json: Option<String>,
    pub error: Option<ExecError>,
    pub console: Vec<ConsoleLine>,
    pub console_dropped: usize,
    /// Creating the runtime and its watchdog.
    pub create: Duration,
    /// Loading, evaluating and running the model's code, result serialisation included.
    pub run: Duration,
}

impl Report {
    /// Rewrites stacks in console lines and in the result (caught errors returned as data)
    /// to positions in the model's code.
    pub fn mapped_to(mut self, program: &Program) -> Self {
        for line in &mut self.console {
            line.text = errors::map_stack(&line.text, program);
        }
        if let Some(json) = &self.result_json
            && (json.contains("ext:") || json.contains(MODULE_URL))
            && let Ok(mut value) = serde_json::from_str::<serde_json::Value>(json)
        {
            map_strings(&mut value, program);
            self.result_json = serde_json::to_string(&value).ok();
        }
        self
    }
}

fn map_strings(value: &mut serde_json::Value, program: &Program) {
    match value {
        serde_json::Value::String(s) => *s = errors::map_stack(s, program),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| map_strings(v, program)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| map_strings(v, program)),
        _ => {}
    }
}

/// Why the runtime was stopped from outside, first reason wins.
#[derive(Clone, Default)]
struct StopReason(Arc<AtomicU8>);

impl StopReason {
    const TIMEOUT: u8 = 1;
    const MEMORY: u8 = 2;
    const CANCELLED: u8 = 3;

    fn set(&self, reason: u8) {
        let _ = self
            .0
            .compare_exchange(0, reason, Ordering::SeqCst, Ordering::SeqCst);
    }

    fn get(&self) -> u8 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Runs the job on a new thread; the receiver yields its report.
pub fn spawn(job: Job) -> oneshot::Receiver<Report> {
    let (tx, rx) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("sdkbox-exec".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let _ = tx.send(run_here(job));
        });
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot start an execution thread");
    }
    rx
}

fn run_here(job: Job) -> Report {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(run(job)),
        Err(e) => Report::failed(ExecError::new(
            ErrorKind::Internal,
            format!("cannot start the execution's event loop: {e}"),
        )),
    }
}

impl Report {
    /// A report of a run that produced nothing but `error`.
    pub fn failed(error: ExecError) -> Self {
        Report {
            result_json: None,
            error: Some(error),
            console: Vec::new(),
            console_dropped: 0,
            create: Duration::ZERO,
            run: Duration::ZERO,
        }
    }
}

async fn run(job: Job) -> Report {
    let started = std::time::Instant::now();
    let stop = StopReason::default();
    let mut runtime = match create_runtime(&job, &stop) {
        Ok(runtime) => runtime,
        Err(error) => return Report::failed(error),
    };
    let finished = CancellationToken::new();
    let _end_watchdog = finished.clone().drop_guard();
    spawn_watchdog(
        &job,
        &stop,
        runtime.v8_isolate().thread_safe_handle(),
        finished,
    );
    let created = std::time::Instant::now();
    let failure = tokio::select! {
        result = drive(&mut runtime, &job.program) => result.err(),
        _ = tokio::time::sleep_until(job.deadline) => {
            stop.set(StopReason::TIMEOUT);
            None
        }
        _ = job.cancel.cancelled() => {
            stop.set(StopReason::CANCELLED);
            None
        }
    };
    let error = match stop.get() {
        StopReason::TIMEOUT => Some(errors::timeout(&job.limits)),
        StopReason::MEMORY => Some(errors::memory(&job.limits)),
        StopReason::CANCELLED => Some(ExecError::new(
            ErrorKind::Cancelled,
            "the execution was cancelled by the client",
        )),
        _ => failure.map(|e| errors::from_core(&e, &job.program, &job.limits)),
    };
    let mut report = collect(&runtime, error);
    report.create = created - started;
    report.run = created.elapsed();
    report
}

/// A fresh runtime with the sandbox extension, the heap limit and its stop callback.
fn create_runtime(job: &Job, stop: &StopReason) -> Result<JsRuntime, ExecError> {
    let mut runtime = JsRuntime::try_new(RuntimeOptions {
        module_loader: Some(Rc::new(SandboxLoader)),
        extensions: vec![sdkbox_sandbox::init(
            job.session.clone(),
            job.limits.max_console_chars,
        )],
        create_params: Some(v8::CreateParams::default().heap_limits(0, job.limits.memory_bytes)),
        ..Default::default()
    })
    .map_err(|e| {
        ExecError::new(
            ErrorKind::Internal,
            format!("cannot create a JavaScript runtime: {e}"),
        )
    })?;
    let isolate = runtime.v8_isolate().thread_safe_handle();
    let stop = stop.clone();
    runtime.add_near_heap_limit_callback(move |current, _initial| {
        stop.set(StopReason::MEMORY);
        isolate.terminate_execution();
        // Never raise the limit: on QuickJS a larger limit grows memory without bound.
        current
    });
    Ok(runtime)
}

/// Terminates the isolate at the deadline or on cancellation, unless the run finished first.
/// It lives on the long-lived runtime: the execution's own thread may be stuck in a loop.
fn spawn_watchdog(
    job: &Job,
    stop: &StopReason,
    isolate: v8::IsolateHandle,
    finished: CancellationToken,
) {
    let (stop, cancel, deadline) = (stop.clone(), job.cancel.clone(), job.deadline);
    job.watchdog.spawn(async move {
        tokio::select! {
            _ = finished.cancelled() => return,
            _ = tokio::time::sleep_until(deadline) => stop.set(StopReason::TIMEOUT),
            _ = cancel.cancelled() => stop.set(StopReason::CANCELLED),
        }
        isolate.terminate_execution();
    });
}

/// Takes the result and console lines out of the runtime's state.
fn collect(runtime: &JsRuntime, error: Option<ExecError>) -> Report {
    let state = runtime.op_state();
    let Ok(mut state) = state.try_borrow_mut() else {
        return Report::failed(ExecError::new(ErrorKind::Internal, "runtime state is busy"));
    };
    let result_json = state.try_take::<ResultSlot>().and_then(|slot| slot.0);
    let (console, console_dropped) = match state.try_borrow_mut::<Console>() {
        Some(console) => (console.take(), console.dropped),
        None => (Vec::new(), 0),
    };
    Report {
        result_json: if error.is_none() { result_json } else { None },
        error,
        console,
        console_dropped,
        create: Duration::ZERO,
        run: Duration::ZERO,
    }
}

/// Runs the prelude, loads and evaluates the model's module, then calls its entry through
/// the harness, driving the event loop until all of it has settled.
async fn drive(runtime: &mut JsRuntime, program: &Program) -> Result<(), CoreError> {
    let harness = runtime.execute_script("ext:sdkbox/bootstrap.js", BOOTSTRAP)?;
    let harness = as_function(runtime, harness)?;
    let specifier = ModuleSpecifier::parse(MODULE_URL).map_err(|e| {
        CoreError::from(deno_core::error::CoreErrorKind::Io(std::io::Error::other(
            e,
        )))
    })?;
    let id = runtime
        .load_main_es_module_from_code(&specifier, program.js.clone())
        .await?;
    let evaluation = runtime.mod_evaluate(id);
    runtime
        .with_event_loop_promise(Box::pin(evaluation), PollEventLoopOptions::default())
        .await?;
    let namespace = runtime.get_module_namespace(id)?;
    let namespace = {
        deno_core::scope!(scope, runtime);
        let local = v8::Local::new(scope, namespace);
        let value: v8::Local<v8::Value> = local.into();
        v8::Global::new(scope, value)
    };
    let call = runtime.call_with_args(&harness, &[namespace]);
    runtime
        .with_event_loop_promise(Box::pin(call), PollEventLoopOptions::default())
        .await?;
    Ok(())
}

fn as_function(
    runtime: &mut JsRuntime,
    value: v8::Global<v8::Value>,
) -> Result<v8::Global<v8::Function>, CoreError> {
    deno_core::scope!(scope, runtime);
    let local = v8::Local::new(scope, value);
    match v8::Local::<v8::Function>::try_from(local) {
        Ok(function) => Ok(v8::Global::new(scope, function)),
        Err(_) => Err(CoreError::from(deno_core::error::CoreErrorKind::Io(
            std::io::Error::other("the sandbox prelude did not return its harness"),
        ))),
    }
}
