//! The supervisor's pool of worker processes: bounded admission, one execution per worker
//! at a time, a spare started ahead, recycling after N runs or above an RSS cap, and a kill
//! at the deadline plus grace. A dying worker costs one call, never the server.

use crate::lock::lock;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::PoolError;
use super::child::WorkerSettings;
use super::process::{RunFailure, WorkerProcess};
use super::scratch;
use crate::approval::Gate;
use crate::deadline::Deadline;
use crate::egress::Egress;
use crate::fair::{FairQueue, Principal, QueueLimits};
use crate::sandbox::{
    ErrorKind, ExecError, ExecLimits, Gateway, Outcome, Report, Stop, execute_with,
};
use crate::sdk::Sdk;

/// Descriptors a run stopped from outside leaves in its worker (its event loop's): a worker
/// may open this many more for each run it serves before it is recycled.
const DESCRIPTORS_PER_RUN: u64 = 2;

/// How the pool runs.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// The sdkbox binary, started in worker mode.
    pub exe: PathBuf,
    /// Executions at once (one per worker).
    pub workers: usize,
    /// Calls that may wait for a worker; beyond that, calls fail at once as `busy`.
    pub queue: usize,
    /// Executions one caller (see `crate::fair::Principal`) runs at once; past it, its
    /// calls wait while workers stay free for the others.
    pub max_running_per_caller: usize,
    /// Calls one caller has running and waiting together; past it, its calls fail at once
    /// as `busy`, so that one caller cannot fill the queue.
    pub max_calls_per_caller: usize,
    /// Whether to keep one worker more than `workers` started, so that recycling and
    /// crashes add no start-up latency.
    pub spare: bool,
    /// Executions after which a worker is replaced.
    pub max_runs: u32,
    /// Resident memory above which a worker is replaced after its execution.
    pub max_rss_bytes: u64,
    /// Time past the deadline before a worker that has not answered is killed.
    pub kill_grace: Duration,
    /// How each worker is started.
    pub worker: WorkerSettings,
    /// Whether workers create runtimes from a snapshot with the prelude already run, built
    /// once when the pool starts (cheaper runtimes; more start-up time).
    pub snapshot: bool,
}

impl PoolConfig {
    /// Defaults for a pool of this very binary with runtimes of `memory_bytes`: two workers
    /// and a spare, 16 waiting calls, no per-caller bound (the server sets those), recycling
    /// after 100 runs or 512 MiB, 1 s of grace.
    pub fn for_this_binary(memory_bytes: usize) -> std::io::Result<Self> {
        Ok(Self {
            exe: std::env::current_exe()?,
            workers: 2,
            queue: 16,
            max_running_per_caller: usize::MAX,
            max_calls_per_caller: usize::MAX,
            spare: true,
            max_runs: 100,
            max_rss_bytes: 512 * 1024 * 1024,
            kill_grace: Duration::from_secs(1),
            snapshot: true,
            worker: WorkerSettings {
                runtime: crate::sandbox::RuntimeSettings {
                    memory_bytes,
                    test_crash_op: false,
                    snapshot: None,
                },
                process: super::ProcessLimits {
                    address_space_bytes: 8 << 30,
                    cpu_seconds: 3600,
                    open_files: 64,
                    threads: 4_096,
                },
            },
        })
    }
}

/// Where an execution's requests go: the provider's egress (with the credential to use)
/// and its SDK.
#[derive(Clone)]
pub struct Target {
    /// Egress to the provider.
    pub egress: Egress,
    /// The provider's SDK, if it has a spec.
    pub sdk: Option<Arc<Sdk>>,
    /// What decides about this execution's requests.
    pub gate: Arc<Gate>,
    /// Who runs it (see `approval::Caller::worker_identity`): a worker serves one caller only.
    pub caller: u64,
    /// Who is behind it, for a fair share of the workers.
    pub principal: Principal,
    /// Where its requests wait for the type check's verdict, when one is still coming.
    pub hold: Option<crate::sandbox::Hold>,
    /// Where a task reads the execution's progress while it runs.
    pub watch: Option<Arc<crate::sandbox::Watch>>,
}

/// Runs executions in worker processes. Cheap to clone.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    config: PoolConfig,
    /// Workers handed out in turn between callers, the queue bounded per caller and in all.
    slots: Arc<FairQueue>,
    /// Idle workers, oldest release first: the longer a worker has been idle, the surer its
    /// next runtime is prepared.
    idle: Mutex<VecDeque<WorkerProcess>>,
    /// Workers alive or starting, idle or busy.
    live: AtomicUsize,
    /// Process ids of the workers alive now.
    pids: Mutex<Vec<u32>>,
    /// The runtime snapshot workers start from, and the directory that holds it.
    snapshot: Option<(PathBuf, tempfile::TempDir)>,
}

impl Pool {
    /// Starts the pool and its first workers; fails if a worker cannot start.
    pub async fn start(config: PoolConfig) -> Result<Self, PoolError> {
        if config.workers == 0 {
            return Err(PoolError::Start(
                "the pool needs at least one worker".into(),
            ));
        }
        scratch::remove_stale();
        let snapshot = if config.snapshot {
            Some(build_snapshot(&config).await?)
        } else {
            None
        };
        let inner = Arc::new(Inner {
            snapshot,
            slots: FairQueue::new(
                "executions",
                QueueLimits {
                    slots: config.workers,
                    max_held: config
                        .max_running_per_caller
                        .clamp(1, config.workers.max(1)),
                    per_principal: config.max_calls_per_caller.max(1),
                    max_waiting: config.queue,
                    // Room for callers with nothing running or waiting, past a full queue.
                    reserve: config.queue / 2,
                },
            ),
            idle: Mutex::new(VecDeque::new()),
            live: AtomicUsize::new(0),
            pids: Mutex::new(Vec::new()),
            config,
        });
        for _ in 0..inner.target() {
            let worker = inner.start_worker().await?;
            inner.put_idle(worker);
        }
        Ok(Self { inner })
    }

    /// Runs `code` in a worker and reports what happened. Never fails: busy pools, crashed
    /// and killed workers are in the outcome too.
    pub async fn execute(
        &self,
        target: &Target,
        code: &str,
        limits: &ExecLimits,
        cancel: CancellationToken,
    ) -> Outcome {
        let sdk = target.sdk.clone();
        execute_with(
            code.len(),
            &target.egress,
            sdk,
            target.gate.clone(),
            target.hold.clone(),
            target.watch.as_deref(),
            limits,
            cancel,
            |gateway, cancel, deadline| async move {
                self.inner
                    .run(code, limits, &gateway, &cancel, deadline, target)
                    .await
            },
        )
        .await
    }

    /// Workers alive or starting, idle or busy (for readiness).
    pub fn workers_alive(&self) -> usize {
        self.inner.live.load(Ordering::SeqCst)
    }

    /// Process ids of the worker processes alive now, for tests and metrics.
    pub fn worker_pids(&self) -> Vec<u32> {
        lock(&self.inner.pids).clone()
    }
}

impl Inner {
    fn target(&self) -> usize {
        self.config.workers + usize::from(self.config.spare)
    }

    fn put_idle(&self, worker: WorkerProcess) {
        lock(&self.idle).push_back(worker);
    }

    /// An idle worker that is still alive, has said nothing unasked, and has served no other
    /// caller than `identity`; others are dropped and replaced.
    fn take_idle(self: &Arc<Self>, identity: u64) -> Option<WorkerProcess> {
        loop {
            let mut worker = lock(&self.idle).pop_front()?;
            let why = if !worker.is_alive() {
                tracing::warn!(pid = worker.pid(), "an idle worker died; replacing it");
                "died_idle"
            } else if worker.served.is_some_and(|served| served != identity) {
                tracing::debug!(
                    pid = worker.pid(),
                    "an idle worker served another caller; replacing it"
                );
                "other_caller"
            } else if worker
                .threads()
                .is_some_and(|n| n > super::process::MAX_THREADS)
            {
                tracing::error!(
                    pid = worker.pid(),
                    "an idle worker started more threads than a sandbox needs; killing it"
                );
                "threads"
            } else if worker.spoke_while_idle() {
                tracing::error!(
                    pid = worker.pid(),
                    "an idle worker wrote to its socket unasked; killing it"
                );
                "spoke_unasked"
            } else {
                return Some(worker);
            };
            self.retire(worker, why);
        }
    }

    async fn run(
        self: &Arc<Self>,
        code: &str,
        limits: &ExecLimits,
        gateway: &Arc<Gateway>,
        cancel: &CancellationToken,
        deadline: Deadline,
        target: &Target,
    ) -> Report {
        let identity = target.caller;
        let slot = tokio::select! {
            slot = self.slots.turn(&target.principal) => match slot {
                Ok(slot) => slot,
                Err(refused) => {
                    metrics::counter!("sdkbox_refused_total", "why" => "busy").increment(1);
                    return Report::failed(ExecError::new(
                        ErrorKind::Busy,
                        format!(
                            "the server is busy: {refused} ({} sandboxes run at once, {} calls may wait); try again shortly",
                            self.config.workers, self.config.queue
                        ),
                    ));
                }
            },
            _ = cancel.cancelled() => return Report::failed(crate::sandbox::cancelled_error()),
            _ = deadline.reached(Duration::ZERO) => {
                return Report::failed(ExecError::new(ErrorKind::Timeout, "the execution waited for a free sandbox until its deadline; the server is overloaded, try again shortly"));
            }
        };
        let mut limits = limits.clone();
        limits.memory_bytes = self.config.worker.runtime.memory_bytes;
        let grace = self.config.kill_grace;
        // A worker that died while idle ran none of the code: the call goes to another one.
        for _ in 0..3 {
            let mut worker = match self.take_idle(identity) {
                Some(worker) => worker,
                None => match self.start_worker().await {
                    Ok(worker) => worker,
                    Err(error) => {
                        return Report::failed(ExecError::new(
                            ErrorKind::Internal,
                            error.to_string(),
                        ));
                    }
                },
            };
            // While a human decides about one of its requests (the deadline is held), the run
            // keeps its worker but not its caller's count: the caller's next call may run.
            let watch_holds = async {
                let mut held = false;
                loop {
                    deadline.changed(&mut held).await;
                    slot.lend(held);
                }
            };
            let ran = tokio::select! {
                ran = worker.run(code, &limits, gateway, cancel, &deadline, grace) => ran,
                () = watch_holds => unreachable!("the watch never ends"),
            };
            slot.lend(false);
            match ran {
                Ok(report) => {
                    worker.runs += 1;
                    worker.served = Some(identity);
                    // A runtime stopped from outside (its memory limit, its deadline, a
                    // cancellation) is never freed whole by the engine: its event loop's two
                    // descriptors and whatever the script still held stay with the process
                    // (README, "The JavaScript engine"). A worker may open enough
                    // descriptors for every run it serves before it is recycled (see
                    // `start_worker`), and the resident-size recycling bounds the rest; one
                    // that stopped a run for memory runs nothing more (runs after memory
                    // stops on the same process sometimes crashed).
                    match report.stopped {
                        Some(Stop::Memory) => self.retire(worker, "memory"),
                        _ => self.release(worker),
                    }
                    return report;
                }
                Err(RunFailure::NotStarted(status)) => {
                    tracing::warn!(%status, "a worker died before taking a run; retrying elsewhere");
                    self.retire(worker, "died_idle");
                }
                Err(failure) => {
                    let why = match &failure {
                        RunFailure::Killed => "killed",
                        RunFailure::Threads(_) => "threads",
                        RunFailure::Crashed(_) | RunFailure::NotStarted(_) => "crashed",
                    };
                    self.retire(worker, why);
                    return Report::failed(failure_error(failure, &limits, cancel));
                }
            }
        }
        Report::failed(ExecError::new(
            ErrorKind::Internal,
            "three sandbox processes in a row died before they could run the code",
        ))
    }

    async fn start_worker(self: &Arc<Self>) -> Result<WorkerProcess, PoolError> {
        self.live.fetch_add(1, Ordering::SeqCst);
        let snapshot = self.snapshot.as_ref().map(|(path, _)| path.as_path());
        // Room for what every run it serves may leave behind, besides its own.
        let mut settings = self.config.worker;
        settings.process.open_files = settings
            .process
            .open_files
            .saturating_add(DESCRIPTORS_PER_RUN * u64::from(self.config.max_runs));
        let started = WorkerProcess::start(&self.config.exe, &settings, snapshot).await;
        match &started {
            Ok(worker) => lock(&self.pids).extend(worker.pid()),
            Err(_) => {
                self.live.fetch_sub(1, Ordering::SeqCst);
            }
        }
        started
    }

    /// Returns a worker to the idle set, or replaces it if it has done enough.
    fn release(self: &Arc<Self>, worker: WorkerProcess) {
        let rss = worker.pid().and_then(resident_bytes).unwrap_or(0);
        if worker.runs >= self.config.max_runs || rss > self.config.max_rss_bytes {
            tracing::debug!(runs = worker.runs, rss, "recycling a worker");
            self.retire(worker, "recycled");
        } else {
            self.put_idle(worker);
        }
    }

    /// Kills a worker in the background (`why`: recycled, died, crashed...) and starts its
    /// replacement.
    fn retire(self: &Arc<Self>, mut worker: WorkerProcess, why: &'static str) {
        metrics::counter!("sdkbox_worker_retirements_total", "why" => why).increment(1);
        self.live.fetch_sub(1, Ordering::SeqCst);
        if let Some(pid) = worker.pid() {
            lock(&self.pids).retain(|p| *p != pid);
        }
        tokio::spawn(async move { worker.kill().await });
        self.refill();
    }

    /// Starts workers in the background until the target number is alive.
    fn refill(self: &Arc<Self>) {
        let pool = self.clone();
        tokio::spawn(async move {
            while pool.live.load(Ordering::SeqCst) < pool.target() {
                match pool.start_worker().await {
                    Ok(worker) => pool.put_idle(worker),
                    Err(error) => {
                        tracing::error!(%error, "cannot start a replacement worker");
                        break;
                    }
                }
            }
        });
    }
}

fn failure_error(
    failure: RunFailure,
    limits: &ExecLimits,
    cancel: &CancellationToken,
) -> ExecError {
    match failure {
        RunFailure::Killed if cancel.is_cancelled() => crate::sandbox::cancelled_error(),
        RunFailure::Killed => ExecError::new(
            ErrorKind::Timeout,
            format!(
                "the execution ran past its time limit of {} ms and did not stop, so its sandbox \
                 process was killed; do less per call (fewer requests, smaller pages, no heavy \
                 loops) or ask for a larger timeout_ms",
                limits.timeout.as_millis()
            ),
        ),
        RunFailure::Threads(threads) => ExecError::new(
            ErrorKind::Crashed,
            format!(
                "the sandbox process started {threads} threads, more than a sandbox needs, so \
                 it was killed; nothing of it survives, and the next call runs in a fresh process"
            ),
        ),
        RunFailure::Crashed(status) | RunFailure::NotStarted(status) => ExecError::new(
            ErrorKind::Crashed,
            format!(
                "the sandbox process crashed while running this code ({status}); nothing of it \
                 survives, and the next call runs in a fresh process"
            ),
        ),
    }
}

/// Builds the runtime snapshot in a process of its own (deno_core snapshots only in a
/// process that runs no other runtime).
async fn build_snapshot(config: &PoolConfig) -> Result<(PathBuf, tempfile::TempDir), PoolError> {
    let dir = scratch::create(scratch::SNAPSHOT)?;
    let path = dir.path().join("runtime.snapshot");
    let mut command = tokio::process::Command::new(&config.exe);
    command
        .args(["worker", "--memory-bytes", "0", "--snapshot-to"])
        .arg(&path)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    if config.worker.runtime.test_crash_op {
        command.arg("--test-crash-op");
    }
    let status = command.status().await?;
    if !status.success() {
        return Err(PoolError::Start(format!(
            "building the runtime snapshot failed ({status})"
        )));
    }
    Ok((path, dir))
}

/// A process's resident memory, from /proc.
fn resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}
