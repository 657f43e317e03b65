//! One execution in one fresh `JsRuntime` on one fresh OS thread, and everything that stops
//! it: a watchdog for the deadline and cancellation, a heap-limit callback for memory, and a
//! timeout around the event loop for work that is waiting rather than running.
//!
//! A runtime can be prepared ahead ([`prepare`]): its thread creates it and runs the prelude,
//! then waits for a job, so creation is off the request path.
//!
//! Invariants: the runtime is created, used and dropped on its own thread and used for one
//! job only (QuickJS allows ~270 runtimes per thread); after a termination it is only dropped.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use deno_core::error::{CoreError, CoreErrorKind};
use deno_core::{JsRuntime, ModuleSpecifier, PollEventLoopOptions, RuntimeOptions, v8};
use std::time::Duration;
use tokio::sync::oneshot;

use crate::deadline::Deadline;
use tokio_util::sync::CancellationToken;

use super::freeing::FREEING;
use super::loader::SandboxLoader;
use super::network::Network;
use super::ops::{Console, ResultSlot, TestHooks, sdkbox_sandbox};
use super::outcome::{ErrorKind, ExecError};
use super::report::{Report, Stop};
use super::source::{MODULE_URL, Program};
use super::{ExecLimits, errors};

const BOOTSTRAP: &str = include_str!("bootstrap.js");

/// The web platform (`URL`, `Blob`, `crypto`, ...), run just before the prelude, which
/// builds `fetch` and `api` on it.
const WEB: &str = include_str!("web.js");

/// The stack of an execution thread: QuickJS's own 1 MiB JS stack plus the native frames.
const THREAD_STACK: usize = 16 * 1024 * 1024;

/// The nice value an execution thread frees its runtime at; the worker's seccomp filter
/// allows this one value only.
pub const LOWEST_PRIORITY: i32 = 19;

/// Everything one execution needs, moved onto its thread.
pub struct Job {
    /// The compiled code.
    pub program: Arc<Program>,
    /// Its limits; the memory limit must match the one the runtime was prepared with.
    pub limits: ExecLimits,
    /// The only way out.
    pub network: Arc<dyn Network>,
    /// Stops the execution when cancelled.
    pub cancel: CancellationToken,
    /// When the execution must end; it stops while a human decides about a request.
    pub deadline: Deadline,
    /// The long-lived runtime that hosts the watchdog.
    pub watchdog: tokio::runtime::Handle,
}

/// Settings fixed when a runtime is prepared.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeSettings {
    /// The heap limit.
    pub memory_bytes: usize,
    /// Whether the test-only crash op is reachable (worker crash tests only).
    pub test_crash_op: bool,
    /// A snapshot of a runtime with the prelude already run (see [`snapshot`]), which makes
    /// creation cheaper; built with the same `test_crash_op`.
    pub snapshot: Option<&'static [u8]>,
}

/// The prelude's source, with the test-only crash hook switched on or off.
fn prelude(test_crash_op: bool) -> String {
    let prelude = format!("{WEB}\n{BOOTSTRAP}");
    if test_crash_op {
        prelude.replace("/*SDKBOX_TEST_CRASH*/ false", "true")
    } else {
        prelude
    }
}

/// A snapshot of a runtime with the sandbox extension and the prelude run, not yet sealed.
/// deno_core allows snapshotting only in a process that runs no other runtime: call it in a
/// process of its own (`sdkbox worker --snapshot-to PATH`).
pub fn snapshot(test_crash_op: bool) -> Result<Box<[u8]>, ExecError> {
    let internal = |e: &dyn std::fmt::Display| {
        ExecError::new(
            ErrorKind::Internal,
            format!("cannot build the runtime snapshot: {e}"),
        )
    };
    let mut runtime = deno_core::JsRuntimeForSnapshot::try_new(RuntimeOptions {
        module_loader: Some(Rc::new(SandboxLoader)),
        extensions: vec![sdkbox_sandbox::init()],
        ..Default::default()
    })
    .map_err(|e| internal(&e))?;
    runtime
        .execute_script("ext:sdkbox/bootstrap.js", prelude(test_crash_op))
        .map_err(|e| internal(&e))?;
    Ok(runtime.snapshot())
}

/// A runtime being prepared on its own thread, waiting for one job.
pub struct Prepared {
    settings: RuntimeSettings,
    jobs: std::sync::mpsc::SyncSender<(Job, oneshot::Sender<Report>)>,
}

impl Prepared {
    /// The settings this runtime was prepared with.
    pub fn settings(&self) -> RuntimeSettings {
        self.settings
    }

    /// Hands the job to the prepared runtime; the receiver yields its report.
    pub fn run(self, job: Job) -> oneshot::Receiver<Report> {
        let (tx, rx) = oneshot::channel();
        if let Err(std::sync::mpsc::SendError((_, tx))) = self.jobs.send((job, tx)) {
            let _ = tx.send(Report::failed(ExecError::new(
                ErrorKind::Internal,
                "the prepared runtime's thread ended before the job arrived",
            )));
        }
        rx
    }
}

/// Starts a thread that creates a runtime now and runs one job later.
pub fn prepare(settings: RuntimeSettings) -> Prepared {
    let (jobs, incoming) = std::sync::mpsc::sync_channel::<(Job, oneshot::Sender<Report>)>(1);
    let spawned = std::thread::Builder::new()
        .name("sdkbox-exec".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            FREEING.wait_for_room();
            let started = std::time::Instant::now();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            let ready = runtime
                .map_err(|e| {
                    ExecError::new(
                        ErrorKind::Internal,
                        format!("cannot start an event loop: {e}"),
                    )
                })
                .and_then(|rt| Ok((create_runtime(&rt, settings)?, rt)));
            let created = started.elapsed();
            // Waits for the job; ends quietly if the prepared runtime is dropped unused.
            let Ok((job, reply)) = incoming.recv() else {
                return;
            };
            let (mut report, used) = match ready {
                Ok((mut prepared, rt)) => (rt.block_on(prepared.run(job)), Some((prepared, rt))),
                Err(error) => (Report::failed(error), None),
            };
            report.create_us = created.as_micros() as u64;
            // Counted from here: the next runtime may already be waiting for room.
            let freeing = FREEING.begin();
            let _ = reply.send(report);
            // Freeing a runtime walks its whole heap (milliseconds for a large one): done after
            // the report is on its way, at the lowest priority, so that it does not take the
            // cores from the result on its way back. Only on Linux is that priority the
            // thread's own (elsewhere it is the whole process's, and could not be raised
            // again); where it is refused, the freeing runs as it is.
            #[cfg(target_os = "linux")]
            let _ = rustix::process::setpriority_process(None, LOWEST_PRIORITY);
            drop(used);
            drop(freeing);
        });
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot start an execution thread");
    }
    Prepared { settings, jobs }
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

/// A created runtime with the prelude run and its harness in hand.
struct Ready {
    runtime: JsRuntime,
    harness: v8::Global<v8::Function>,
    stop: StopReason,
}

/// A fresh runtime with the sandbox extension, the heap limit and its stop callback, and
/// the prelude run.
fn create_runtime(
    rt: &tokio::runtime::Runtime,
    settings: RuntimeSettings,
) -> Result<Ready, ExecError> {
    let _entered = rt.enter();
    let internal = |what: &str, e: &dyn std::fmt::Display| {
        ExecError::new(ErrorKind::Internal, format!("{what}: {e}"))
    };
    let mut runtime = JsRuntime::try_new(RuntimeOptions {
        module_loader: Some(Rc::new(SandboxLoader)),
        extensions: vec![sdkbox_sandbox::init()],
        create_params: Some(v8::CreateParams::default().heap_limits(0, settings.memory_bytes)),
        startup_snapshot: settings.snapshot,
        ..Default::default()
    })
    .map_err(|e| internal("cannot create a JavaScript runtime", &e))?;
    if settings.test_crash_op
        && let Ok(mut state) = runtime.op_state().try_borrow_mut()
    {
        state.put(TestHooks);
    }
    if settings.snapshot.is_none() {
        runtime
            .execute_script("ext:sdkbox/bootstrap.js", prelude(settings.test_crash_op))
            .map_err(|e| internal("the sandbox prelude failed", &e))?;
    }
    let harness = runtime
        .execute_script("ext:sdkbox/seal.js", "globalThis.__sdkbox_seal()")
        .map_err(|e| internal("the sandbox prelude failed", &e))?;
    let harness = as_function(&mut runtime, harness)
        .ok_or_else(|| internal("the sandbox prelude failed", &"no harness returned"))?;
    // Installed after the prelude and the seal, before any of the model's code: on QuickJS
    // every script run with this callback in place measures the whole heap.
    let stop = StopReason::default();
    let isolate = runtime.v8_isolate().thread_safe_handle();
    let on_limit = stop.clone();
    runtime.add_near_heap_limit_callback(move |current, _initial| {
        on_limit.set(StopReason::MEMORY);
        isolate.terminate_execution();
        // Never raise the limit: on QuickJS a larger limit grows memory without bound.
        current
    });
    Ok(Ready {
        runtime,
        harness,
        stop,
    })
}

impl Ready {
    async fn run(&mut self, job: Job) -> Report {
        let stop = self.stop.clone();
        if let Ok(mut state) = self.runtime.op_state().try_borrow_mut() {
            state.put(job.network.clone());
            state.put(Console::new(job.limits.max_console_chars));
        }
        let finished = CancellationToken::new();
        let _end_watchdog = finished.clone().drop_guard();
        let isolate = self.runtime.v8_isolate().thread_safe_handle();
        spawn_watchdog(&job, &stop, isolate, finished);
        let started = std::time::Instant::now();
        let failure = tokio::select! {
            result = drive(&mut self.runtime, &self.harness, &job.program) => result.err(),
            _ = job.deadline.reached(Duration::ZERO) => {
                stop.set(StopReason::TIMEOUT);
                None
            }
            _ = job.cancel.cancelled() => {
                stop.set(StopReason::CANCELLED);
                None
            }
        };
        // The deadline and a cancellation end the script's requests too, so the script may
        // fail on one of them in the same instant: what happened, not which future was polled
        // first, says why the run ended.
        if job.deadline.left().is_zero() {
            stop.set(StopReason::TIMEOUT);
        } else if job.cancel.is_cancelled() {
            stop.set(StopReason::CANCELLED);
        }
        let (error, stopped) = match stop.get() {
            StopReason::TIMEOUT => (Some(errors::timeout(&job.limits)), Some(Stop::Deadline)),
            StopReason::MEMORY => (Some(errors::memory(&job.limits)), Some(Stop::Memory)),
            StopReason::CANCELLED => (Some(errors::cancelled()), Some(Stop::Cancelled)),
            _ => (
                failure.map(|e| errors::from_core(&e, &job.program, &job.limits)),
                None,
            ),
        };
        let mut report = collect(&self.runtime, error);
        report.stopped = stopped;
        report.run_us = started.elapsed().as_micros() as u64;
        report.mapped_to(&job.program)
    }
}

/// Terminates the isolate at the deadline or on cancellation, unless the run finished first.
/// It lives on the long-lived runtime: the execution's own thread may be stuck in a loop.
fn spawn_watchdog(
    job: &Job,
    stop: &StopReason,
    isolate: v8::IsolateHandle,
    finished: CancellationToken,
) {
    let (stop, cancel, deadline) = (stop.clone(), job.cancel.clone(), job.deadline.clone());
    job.watchdog.spawn(async move {
        tokio::select! {
            _ = finished.cancelled() => return,
            _ = deadline.reached(Duration::ZERO) => stop.set(StopReason::TIMEOUT),
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
    // Mended here, where the result arrives: everything after reads it as JSON.
    let ResultSlot(result_json, files, files_dropped) =
        state.try_take::<ResultSlot>().unwrap_or_default();
    let result_json =
        result_json.map(|json| super::surrogates::mend_lone_surrogates(&json).into_owned());
    let (console, console_dropped) = match state.try_borrow_mut::<Console>() {
        Some(console) => (console.take(), console.dropped),
        None => (Vec::new(), 0),
    };
    Report {
        result_json: if error.is_none() { result_json } else { None },
        result_cut_from: None,
        files: if error.is_none() { files } else { Vec::new() },
        files_dropped,
        error,
        console,
        console_dropped,
        compile_us: 0,
        create_us: 0,
        run_us: 0,
        stopped: None,
    }
}

/// Loads the model's module, then calls the harness, which imports (evaluates) it and calls
/// its entry, driving the event loop until all of it has settled. The harness imports the
/// module itself so that what its top-level code throws passes through the harness too.
async fn drive(
    runtime: &mut JsRuntime,
    harness: &v8::Global<v8::Function>,
    program: &Program,
) -> Result<(), CoreError> {
    let specifier = ModuleSpecifier::parse(MODULE_URL)
        .map_err(|e| CoreError::from(CoreErrorKind::Io(std::io::Error::other(e))))?;
    runtime
        .load_main_es_module_from_code(&specifier, program.js.clone())
        .await?;
    let arguments = {
        deno_core::scope!(scope, runtime);
        let flag: v8::Local<v8::Value> = v8::Boolean::new(scope, program.call_entry).into();
        let name: v8::Local<v8::Value> = match &program.guarded {
            Some(name) => {
                v8::String::new(scope, name).map_or_else(|| v8::null(scope).into(), Into::into)
            }
            None => v8::null(scope).into(),
        };
        [v8::Global::new(scope, flag), v8::Global::new(scope, name)]
    };
    let call = runtime.call_with_args(harness, &arguments);
    runtime
        .with_event_loop_promise(Box::pin(call), PollEventLoopOptions::default())
        .await?;
    Ok(())
}

fn as_function(
    runtime: &mut JsRuntime,
    value: v8::Global<v8::Value>,
) -> Option<v8::Global<v8::Function>> {
    deno_core::scope!(scope, runtime);
    let local = v8::Local::new(scope, value);
    let function = v8::Local::<v8::Function>::try_from(local).ok()?;
    Some(v8::Global::new(scope, function))
}
