//! The worker process: hardens itself, then runs one execution at a time for the supervisor,
//! forwarding the script's HTTP requests to it. It holds no secret and has no network: its
//! only channel is the socket it was started with (as standard input).

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::WorkerError;
use super::harden::{ProcessLimits, harden};
use super::protocol::{Channel, FromWorker, PROTOCOL_VERSION, ToWorker, too_large};
use crate::deadline::Deadline;
use crate::egress::{ScriptRequest, ScriptResponse};
use crate::sandbox::{
    ErrorKind, ExecError, ExecLimits, Network, NetworkError, NetworkFuture, RuntimeSettings,
    prepare, run_code,
};
use crate::sdk::SdkCall;

/// How a worker is started: fixed for its whole life.
#[derive(Debug, Clone, Copy)]
pub struct WorkerSettings {
    /// Settings of every runtime it creates.
    pub runtime: RuntimeSettings,
    /// Its process limits.
    pub process: ProcessLimits,
}

/// Runs the worker until the supervisor closes the socket.
pub fn serve(settings: WorkerSettings) -> Result<(), WorkerError> {
    // One line instead of a backtrace: a panic here ends the worker, and the supervisor
    // reports it to the caller as a crash.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("sdkbox worker {}: {info}", std::process::id())
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(WorkerError::Io)?;
    runtime.block_on(async {
        let socket = std::io::stdin().as_fd().try_clone_to_owned()?;
        let socket = std::os::unix::net::UnixStream::from(socket);
        socket.set_nonblocking(true)?;
        let mut channel = Channel::new(tokio::net::UnixStream::from_std(socket)?);
        let isolation = harden(&settings.process)?;
        tracing::debug!(namespaces = %isolation.namespaces, "worker hardened");
        channel
            .send(FromWorker::Hello {
                version: PROTOCOL_VERSION,
            })
            .await?;
        let mut prepared = prepare(settings.runtime);
        while let Some(message) = channel.recv::<ToWorker>().await? {
            let ToWorker::Run {
                code,
                limits,
                remaining,
            } = message
            else {
                continue; // a late reply or cancel for an execution that already ended
            };
            // The runtime for this job was prepared while idle. The next one is prepared once
            // this job has reported, not beside it: restoring a runtime takes milliseconds of
            // CPU that the running job would otherwise share its cores with.
            let deadline = Deadline::after(remaining);
            channel.send(FromWorker::Started).await?;
            run_one(&mut channel, &code, &limits, deadline, prepared).await?;
            prepared = prepare(settings.runtime);
        }
        Ok(())
    })
}

/// Sends the execution's report; one that cannot be framed (it is bounded, so this should not
/// happen) becomes a limit error instead of a dead worker.
async fn send_report(
    channel: &mut Channel,
    report: crate::sandbox::Report,
) -> Result<(), WorkerError> {
    match channel.send(FromWorker::Done { report }).await {
        Err(error) if too_large(&error).is_some() => {
            let error = ExecError::new(
                ErrorKind::Limit,
                format!("the execution's report was too large to send: {error}"),
            );
            let report = crate::sandbox::Report::failed(error);
            Ok(channel.send(FromWorker::Done { report }).await?)
        }
        other => Ok(other?),
    }
}

/// The script's side of the bridge: requests go to the worker's main loop, which forwards
/// them to the supervisor.
struct Forward {
    requests: mpsc::UnboundedSender<(Outgoing, Reply)>,
}

/// What the script wants sent up.
enum Outgoing {
    Http(Box<ScriptRequest>),
    Call(SdkCall),
    /// A console line for progress: nothing answers it.
    Console(String),
}

type Reply = oneshot::Sender<Result<ScriptResponse, NetworkError>>;

impl Network for Forward {
    fn send(&self, request: ScriptRequest) -> NetworkFuture {
        self.forward(Outgoing::Http(Box::new(request)))
    }

    fn call(&self, call: SdkCall) -> NetworkFuture {
        self.forward(Outgoing::Call(call))
    }

    fn note(&self, line: String) {
        let (reply, _) = oneshot::channel();
        let _ = self.requests.send((Outgoing::Console(line), reply));
    }
}

impl Forward {
    fn forward(&self, outgoing: Outgoing) -> NetworkFuture {
        let (reply, answer) = oneshot::channel();
        let queued = self.requests.send((outgoing, reply));
        Box::pin(async move {
            let gone = || NetworkError {
                kind: "cancelled".into(),
                message: "the execution ended before the request completed".into(),
            };
            queued.map_err(|_| gone())?;
            answer.await.map_err(|_| gone())?
        })
    }
}

async fn run_one(
    channel: &mut Channel,
    code: &str,
    limits: &ExecLimits,
    deadline: Deadline,
    prepared: crate::sandbox::Prepared,
) -> Result<(), WorkerError> {
    let (requests, mut outgoing) = mpsc::unbounded_channel();
    let network: Arc<dyn Network> = Arc::new(Forward { requests });
    let cancel = CancellationToken::new();
    let run = run_code(
        code,
        limits,
        network,
        cancel.clone(),
        deadline.clone(),
        prepared,
    );
    tokio::pin!(run);
    let mut waiting = HashMap::new();
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            report = &mut run => {
                return send_report(channel, report).await;
            }
            Some((message, reply)) = outgoing.recv() => {
                if let Outgoing::Console(line) = message {
                    channel.send(FromWorker::Console { line }).await?;
                    continue;
                }
                next_id += 1;
                let request_id = next_id;
                let message = match message {
                    Outgoing::Http(request) => FromWorker::Http { request_id, request: *request },
                    Outgoing::Call(call) => FromWorker::Call { request_id, call },
                    Outgoing::Console(_) => continue,
                };
                match channel.send(message).await {
                    Ok(()) => {
                        waiting.insert(request_id, reply);
                    }
                    Err(error) => match too_large(&error) {
                        // Refused here, before it could reach the supervisor: the script
                        // gets a limit error and the worker lives on.
                        Some(large) => {
                            let _ = reply.send(Err(NetworkError {
                                kind: "limit".into(),
                                message: format!("{large}; send a smaller request"),
                            }));
                        }
                        None => return Err(error.into()),
                    },
                }
            }
            message = channel.recv::<ToWorker>() => match message? {
                Some(ToWorker::HttpReply { request_id, result }) => {
                    if let Some(reply) = waiting.remove(&request_id) {
                        let _ = reply.send(result);
                    }
                }
                Some(ToWorker::Cancel) => cancel.cancel(),
                Some(ToWorker::Deadline { running }) => deadline.follow(running),
                Some(ToWorker::Run { .. }) => return Err(WorkerError::Protocol("a run while busy".into())),
                None => {
                    cancel.cancel();
                    return Ok(());
                }
            },
        }
    }
}
