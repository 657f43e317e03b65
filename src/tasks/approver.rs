//! Approvals inside a task: a write waiting for a human puts the approval form in the task
//! as an input request (`input_required`), and the client's `tasks/update` answers it. The
//! wait is bounded by the task's limit, not the call's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rmcp::model::ElicitResult;

use super::TaskHandle;
use crate::approval::{Answer, AnswerFuture, Approver, Ask, Key};

/// How often a waiting approval looks for the client's answer in the task's record.
const ANSWER_POLL: Duration = Duration::from_millis(250);

/// Questions one task has open at once; more wait their turn (within the approval's time):
/// each is a form of up to a question's size in the task's record.
const OPEN_AT_ONCE: usize = 8;

/// The channel's name, for the log and the audit file.
const CHANNEL: &str = "MCP task (tasks/update)";

/// Asks through the task's input requests.
pub struct TaskApprover {
    handle: Arc<TaskHandle>,
    asked: AtomicU32,
    open: Arc<tokio::sync::Semaphore>,
}

impl TaskApprover {
    /// Asks through `handle`'s task.
    pub fn new(handle: Arc<TaskHandle>) -> Self {
        Self {
            handle,
            asked: AtomicU32::new(0),
            open: Arc::new(tokio::sync::Semaphore::new(OPEN_AT_ONCE)),
        }
    }
}

/// Withdraws an input request that was not answered (the wait ended: a timeout, a cancel).
struct Withdraw {
    handle: Arc<TaskHandle>,
    key: String,
    done: bool,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (handle, key) = (self.handle.clone(), std::mem::take(&mut self.key));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { handle.withdraw(&key).await });
        }
    }
}

impl Approver for TaskApprover {
    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn ask(&self, ask: Ask, _key: Key, _timeout: Duration) -> AnswerFuture {
        let (handle, open) = (self.handle.clone(), self.open.clone());
        let key = format!("approval-{}", self.asked.fetch_add(1, Ordering::SeqCst) + 1);
        Box::pin(async move {
            let Ok(_turn) = open.acquire_owned().await else {
                return Answer::Deny {
                    by: "nobody (the task's questions were closed)".into(),
                };
            };
            let request = serde_json::json!({
                "method": "elicitation/create",
                "params": crate::approval::approval_form(&ask),
            });
            if let Err(error) = handle.ask(&key, request).await {
                return Answer::Deny {
                    by: format!("nobody (the task could not ask: {error})"),
                };
            }
            let mut withdraw = Withdraw {
                handle: handle.clone(),
                key: key.clone(),
                done: false,
            };
            loop {
                tokio::time::sleep(ANSWER_POLL).await;
                let Some(answer) = handle.answer(&key).await else {
                    continue;
                };
                withdraw.done = true;
                return match serde_json::from_value::<ElicitResult>(answer) {
                    Ok(result) => crate::approval::approval_answer(&result, "the user"),
                    Err(error) => Answer::Deny {
                        by: format!(
                            "nobody (the task's answer was not an elicitation result: {error})"
                        ),
                    },
                };
            }
        })
    }
}
