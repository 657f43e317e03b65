//! `execute` as an MCP task (see `crate::tasks`): a call from a client that offers the tasks
//! extension runs under the task's limit from its start, in a job of its own; the call waits
//! for it [`TaskSettings::after`](crate::tasks::TaskSettings) (or until it asks a human) and
//! answers with its result, or with the task. The job writes its progress every second and
//! its end to the task's record; `tasks/get`, `tasks/update` and `tasks/cancel` read and
//! change that record on any replica.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResponse, CreateTaskResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio::sync::oneshot;

use super::{SdkboxServer, principal, tools};
use crate::approval::Approvals;
use crate::sandbox::Watch;
use crate::tasks::{TaskEnd, TaskError, TaskHandle, error_object};

/// How often a task's job writes its progress.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// What an execution that runs as a task uses in place of its call's.
pub(super) struct TaskRun {
    /// Its task.
    pub handle: Arc<TaskHandle>,
    /// Its progress, read while it runs.
    pub watch: Arc<Watch>,
    /// The approvals with the task's limit as their timeout and longest run.
    pub approvals: Approvals,
}

impl SdkboxServer {
    /// A task for this call, when the server has tasks and the call's client offers the
    /// extension; `None` (a plain call) otherwise, or past the bounds on tasks.
    pub(super) async fn open_task(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Option<TaskHandle> {
        let tasks = self.provider.tasks.as_ref()?;
        let offered = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        if !offered {
            return None;
        }
        match tasks.open(&principal(context)).await {
            Ok(handle) => Some(handle),
            Err(refusal) => {
                tracing::info!("a call runs as a plain call, not as a task: {refusal}");
                None
            }
        }
    }

    /// Runs `input` as task `handle`: answers with its result if it ends within the
    /// settings' `after` without asking anything, else with the task.
    pub(super) async fn execute_as_task(
        &self,
        input: tools::Execute,
        context: RequestContext<RoleServer>,
        handle: TaskHandle,
    ) -> Result<CallToolResponse, ErrorData> {
        let handle = Arc::new(handle);
        let settings = *handle.settings();
        let approvals = self.provider.approvals.for_longer_runs(settings.limit);
        let run = TaskRun {
            handle: handle.clone(),
            watch: Watch::new(),
            approvals,
        };
        // The run's own context: cancelled by the task, not by the call that starts it.
        let mut own = context.clone();
        own.ct = handle.cancellation().clone();
        let (sender, mut answer) = oneshot::channel();
        let server = self.clone();
        let in_flight = self.lifecycle.as_ref().map(super::Lifecycle::call);
        tokio::spawn(async move {
            let _in_flight = in_flight;
            let reporting = tokio::spawn(report(run.handle.clone(), run.watch.clone()));
            let response = server.execute_now(input, own, Some(&run)).await;
            reporting.abort();
            // The call that waits takes a quick result itself; else the task records it.
            if let Err(response) = sender.send(response) {
                let end = server.task_end(response, &run);
                run.handle.finish(end, run.watch.progress().writes).await;
            }
        });
        tokio::select! {
            response = &mut answer => {
                handle.forget().await;
                return response.unwrap_or_else(|_| {
                    Err(ErrorData::internal_error("the execution's job ended without a result", None))
                });
            }
            () = tokio::time::sleep(settings.after) => {}
            () = handle.asked() => {}
            () = context.ct.cancelled() => {
                // The call was cancelled before it became a task: so is its run.
                handle.cancellation().cancel();
                let _ = (&mut answer).await;
                handle.forget().await;
                return Err(ErrorData::invalid_params("the call was cancelled", None));
            }
        }
        answer.close();
        // A result that came just as the wait ended is still the call's.
        if let Ok(response) = answer.try_recv() {
            handle.forget().await;
            return response;
        }
        tracing::info!(task = %handle.id(), "an execution continues as a task");
        Ok(CallToolResponse::Task(CreateTaskResult::new(
            handle.seed().await,
        )))
    }

    /// How a task's execution ended, in the extension's terms. Cut off by the server's stop,
    /// it failed, with the writes it had sent: it is never run again.
    fn task_end(&self, response: Result<CallToolResponse, ErrorData>, run: &TaskRun) -> TaskEnd {
        let stopping = self
            .lifecycle
            .as_ref()
            .is_some_and(|lifecycle| lifecycle.stopping().is_cancelled());
        match response {
            Ok(CallToolResponse::Complete(_)) if stopping => {
                let sent = crate::tasks::sent_words(&run.watch.progress().writes);
                TaskEnd::Failed(error_object(
                    -32603,
                    &format!(
                        "the server stopped while this task ran; it is not run again ({sent}). \
                         Check what it did before you run the code again"
                    ),
                ))
            }
            Ok(CallToolResponse::Complete(result)) => match serde_json::to_value(result) {
                Ok(serde_json::Value::Object(result)) => TaskEnd::Completed(result),
                _ => TaskEnd::Failed(error_object(-32603, "the result could not be kept")),
            },
            Ok(_) => TaskEnd::Failed(error_object(
                -32603,
                "the execution asked for input outside its task",
            )),
            Err(error) => TaskEnd::Failed(match serde_json::to_value(error) {
                Ok(serde_json::Value::Object(error)) => error,
                _ => JsonObject::new(),
            }),
        }
    }
}

/// Writes the job's progress to its task every [`REPORT_EVERY`] (and cancels the run when a
/// cancel reached another replica).
async fn report(handle: Arc<TaskHandle>, watch: Arc<Watch>) {
    let started = Instant::now();
    loop {
        tokio::time::sleep(REPORT_EVERY).await;
        let progress = watch.progress();
        let mut message = format!(
            "running for {} s: {} requests made, {} pages read, {} writes sent",
            started.elapsed().as_secs(),
            progress.requests,
            progress.reads,
            progress.writes_sent
        );
        if let Some(line) = progress.console {
            message.push_str("; console: ");
            message.push_str(&line);
        }
        handle.report(message, progress.writes).await;
    }
}

/// `tasks/update` and `tasks/cancel` as the extension wants them: acknowledged even for a
/// task the caller does not hold (nothing tells it whether another caller's exists).
pub(super) fn acknowledged(result: Result<(), TaskError>) -> Result<(), ErrorData> {
    match result {
        Ok(()) | Err(TaskError::Unknown(_)) => Ok(()),
        Err(error) => Err(task_error(error)),
    }
}

/// A task operation's failure as the client sees it: an unknown task is the caller's error,
/// the rest the server's.
pub(super) fn task_error(error: TaskError) -> ErrorData {
    match error {
        TaskError::Unknown(_) => ErrorData::invalid_params(error.to_string(), None),
        other => ErrorData::internal_error(other.to_string(), None),
    }
}
