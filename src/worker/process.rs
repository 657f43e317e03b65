//! The supervisor's handle on one worker process: start it, run one execution on it while
//! serving its HTTP requests through egress, kill it.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::PoolError;
use super::child::WorkerSettings;
use super::protocol::{Channel, FromWorker, PROTOCOL_VERSION, ToWorker, too_large};
use super::scratch;
use std::sync::Arc;

use crate::deadline::Deadline;
use crate::sandbox::{ExecLimits, Gateway, Network, NetworkError, Report};

/// How long a new worker may take to say hello.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Lines of a worker's standard error passed on to the supervisor's, each cut to this size.
const MAX_STDERR_LINE: usize = 2_000;
/// Lines of one worker's standard error passed on; the rest are read and dropped.
const MAX_STDERR_LINES: usize = 100;

/// Passes a worker's standard error (panics, engine messages) on to the supervisor's,
/// bounded. The worker never holds the supervisor's own stderr, which it could seek in,
/// overwrite or read from.
async fn forward_stderr(mut stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncReadExt;
    // Read in fixed chunks, never a whole line: a line with no end must not grow the
    // supervisor's memory.
    let mut chunk = [0u8; 8192];
    let mut lines = StderrLines::default();
    while let Ok(read) = stderr.read(&mut chunk).await
        && read > 0
    {
        for line in lines.feed(&chunk[..read]) {
            eprintln!("{line}");
        }
    }
}

/// Splits a worker's standard error into the lines to pass on: at most
/// [`MAX_STDERR_LINES`], each at most [`MAX_STDERR_LINE`] bytes (the rest of a longer line is
/// dropped), whatever the worker writes.
#[derive(Default)]
struct StderrLines {
    line: Vec<u8>,
    passed: usize,
}

impl StderrLines {
    fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                if self.line.len() < MAX_STDERR_LINE {
                    self.line.push(byte);
                }
                continue;
            }
            if self.passed < MAX_STDERR_LINES {
                self.passed += 1;
                out.push(String::from_utf8_lossy(&self.line).into_owned());
            }
            self.line.clear();
        }
        out
    }
}

/// Why a run on a worker did not produce a report.
#[derive(Debug)]
pub enum RunFailure {
    /// The worker overran its deadline and grace and was killed.
    Killed,
    /// The worker started more threads than a sandbox needs and was killed: this many.
    Threads(usize),
    /// The worker died while running the code: its exit status, as words.
    Crashed(String),
    /// The worker died before it took the run (it was killed while idle, say): none of the
    /// code ran, so the call can go to another worker.
    NotStarted(String),
}

/// Threads a worker needs at most (it has two while it runs an execution): past these, an
/// engine escaped by a script is starting its own, and the worker is killed. Counted by the
/// supervisor, whatever the worker's user (the kernel's RLIMIT_NPROC spares root).
pub const MAX_THREADS: usize = 32;

/// How often a running worker's threads are counted.
const THREAD_CHECK: Duration = Duration::from_millis(200);

/// A running worker process.
pub struct WorkerProcess {
    child: Child,
    channel: Channel,
    pid: Option<u32>,
    /// Executions it has completed.
    pub runs: u32,
    /// The egress identity of the executions it ran (see `Egress::identity`): a worker
    /// serves one caller, so one that was taken over cannot act for another.
    pub served: Option<u64>,
    _home: tempfile::TempDir,
}

impl WorkerProcess {
    /// Starts `exe worker ...` with an empty environment in an empty directory, and waits
    /// for its hello.
    pub async fn start(
        exe: &Path,
        settings: &WorkerSettings,
        snapshot: Option<&Path>,
    ) -> Result<Self, PoolError> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        let home = scratch::create(scratch::WORKER)?;
        let mut command = Command::new(exe);
        command
            .arg("worker")
            .args(["--memory-bytes", &settings.runtime.memory_bytes.to_string()])
            .args([
                "--address-space-bytes",
                &settings.process.address_space_bytes.to_string(),
            ])
            .args(["--cpu-seconds", &settings.process.cpu_seconds.to_string()])
            .args(["--open-files", &settings.process.open_files.to_string()])
            .args(["--threads", &settings.process.threads.to_string()])
            .env_clear()
            .current_dir(home.path())
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if settings.runtime.test_crash_op {
            command.arg("--test-crash-op");
        }
        if let Some(path) = snapshot {
            command.arg("--snapshot").arg(path);
        }
        let mut child = command.spawn()?;
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(forward_stderr(stderr));
        }
        ours.set_nonblocking(true)?;
        let channel = Channel::new(tokio::net::UnixStream::from_std(ours)?);
        let mut worker = Self {
            pid: child.id(),
            child,
            channel,
            runs: 0,
            served: None,
            _home: home,
        };
        let hello = tokio::time::timeout(START_TIMEOUT, worker.channel.recv::<FromWorker>()).await;
        match hello {
            Ok(Ok(Some(FromWorker::Hello { version }))) if version == PROTOCOL_VERSION => {
                Ok(worker)
            }
            Ok(Ok(Some(FromWorker::Hello { version }))) => Err(PoolError::Start(format!(
                "worker speaks protocol {version}, this server {PROTOCOL_VERSION}"
            ))),
            Ok(Ok(_)) | Ok(Err(_)) => {
                let status = worker.exit_status().await;
                Err(PoolError::Start(format!(
                    "worker ended before it was ready ({status})"
                )))
            }
            Err(_) => Err(PoolError::Start("worker did not start within 10 s".into())),
        }
    }

    /// Whether the process is still running (an idle worker may have been killed).
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Whether the worker wrote anything while idle. An honest worker says nothing between
    /// runs; one that does may be planting a frame for the next execution (a forged result, a
    /// request under another caller's egress), so it must not be used again.
    pub fn spoke_while_idle(&mut self) -> bool {
        use futures_util::FutureExt;
        self.channel.recv::<FromWorker>().now_or_never().is_some()
    }

    /// The process id, for RSS checks.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Runs one execution. Requests the script makes are checked and sent by `gateway`;
    /// the worker is killed if it has not answered `grace` after the deadline, or `grace`
    /// after a cancellation. The worker follows the deadline as it stops and runs again.
    pub async fn run(
        &mut self,
        code: &str,
        limits: &ExecLimits,
        gateway: &Arc<Gateway>,
        cancel: &CancellationToken,
        deadline: &Deadline,
        grace: Duration,
    ) -> Result<Report, RunFailure> {
        let mut held = deadline.running().is_none();
        let run = ToWorker::Run {
            code: code.to_owned(),
            limits: limits.clone(),
            remaining: deadline.left(),
        };
        if self.channel.send(run).await.is_err() {
            return Err(RunFailure::NotStarted(self.exit_status().await));
        }
        let mut started = false;
        let mut in_flight = JoinSet::new();
        let mut killed_at: Option<Instant> = None;
        let mut cancel_sent = false;
        let kill = async {
            deadline.reached(grace).await;
        };
        tokio::pin!(kill);
        let mut count = tokio::time::interval(THREAD_CHECK);
        loop {
            tokio::select! {
                _ = count.tick() => {
                    if let Some(threads) = self.threads().filter(|n| *n > MAX_THREADS) {
                        self.kill().await;
                        return Err(RunFailure::Threads(threads));
                    }
                }
                message = self.channel.recv::<FromWorker>() => match message {
                    Ok(Some(FromWorker::Done { report })) => {
                        // Its requests end here, not later, and none is cut in the middle of
                        // its decision (a claim half written would read as a write that may
                        // have been sent): reads end, decisions end unsent, writes that left
                        // finish; within the deadline, else they are cut.
                        gateway.end_run();
                        let drained = async { while in_flight.join_next().await.is_some() {} };
                        if tokio::time::timeout(deadline.left() + grace, drained).await.is_err() {
                            in_flight.shutdown().await;
                        }
                        return Ok(report);
                    }
                    Ok(Some(FromWorker::Started)) => started = true,
                    Ok(Some(FromWorker::Console { line })) => gateway.note(line),
                    Ok(Some(FromWorker::Http { request_id, request })) => {
                        let sent = gateway.send(request);
                        in_flight.spawn(async move { (request_id, sent.await) }.in_current_span());
                    }
                    Ok(Some(FromWorker::Call { request_id, call })) => {
                        let sent = gateway.call(call);
                        in_flight.spawn(async move { (request_id, sent.await) }.in_current_span());
                    }
                    Ok(Some(FromWorker::Hello { .. })) | Ok(None) | Err(_) => {
                        let status = self.exit_status().await;
                        return Err(if started { RunFailure::Crashed(status) } else { RunFailure::NotStarted(status) });
                    }
                },
                Some(Ok((request_id, result))) = in_flight.join_next() => {
                    let reply = ToWorker::HttpReply { request_id, result };
                    let sent = match self.channel.send(reply).await {
                        // A reply too large to frame (a body of escapes, say) is refused
                        // here; the script gets a limit error and the worker lives on.
                        Err(error) if too_large(&error).is_some() => {
                            let result = Err(NetworkError {
                                kind: "limit".into(),
                                message: format!("the response is too large to hand to the sandbox: {error}"),
                            });
                            self.channel.send(ToWorker::HttpReply { request_id, result }).await
                        }
                        sent => sent,
                    };
                    if sent.is_err() {
                        return Err(RunFailure::Crashed(self.exit_status().await));
                    }
                }
                _ = cancel.cancelled(), if !cancel_sent => {
                    cancel_sent = true;
                    in_flight.abort_all();
                    killed_at = Some(Instant::now() + grace);
                    let _ = self.channel.send(ToWorker::Cancel).await;
                }
                running = deadline.changed(&mut held) => {
                    if self.channel.send(ToWorker::Deadline { running }).await.is_err() {
                        return Err(RunFailure::Crashed(self.exit_status().await));
                    }
                }
                _ = &mut kill => {
                    self.kill().await;
                    return Err(RunFailure::Killed);
                }
                _ = sleep_until_some(killed_at) => {
                    self.kill().await;
                    return Err(RunFailure::Killed);
                }
            }
        }
    }

    /// The worker's threads now, where the system tells (`/proc`).
    pub fn threads(&self) -> Option<usize> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid?)).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("Threads:"))?
            .trim()
            .parse()
            .ok()
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// Waits briefly for the process to end and describes how it ended.
    async fn exit_status(&mut self) -> String {
        match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(status)) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("exit status {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                _ => status.to_string(),
            },
            Ok(Err(e)) => format!("unknown status: {e}"),
            Err(_) => {
                self.kill().await;
                "unresponsive, killed".to_owned()
            }
        }
    }
}

/// Sleeps until `at`; forever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workers_stderr_is_bounded_in_lines_and_length() {
        let mut lines = StderrLines::default();
        assert!(
            lines.feed(&vec![b'x'; 10 << 20]).is_empty(),
            "no line until it ends"
        );
        assert!(lines.line.len() <= MAX_STDERR_LINE);
        let first = lines.feed(b"\nsecond\n");
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].len(), MAX_STDERR_LINE);
        assert_eq!(first[1], "second");
        let many = lines.feed(&b"line\n".repeat(1_000));
        assert_eq!(many.len(), MAX_STDERR_LINES - 2);
    }
}
