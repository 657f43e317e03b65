//! A task as the state store keeps it (any replica reads it), and as `tasks/get` shows it.

use std::collections::BTreeMap;

use rmcp::model::{DetailedTask, InputRequests, JsonObject, Task, TaskPayload, TaskStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Suggested interval between a client's `tasks/get`s.
pub const POLL_INTERVAL_MS: u64 = 1_000;

/// One task's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRecord {
    /// Its id (128 random bits as hex).
    pub id: String,
    /// The principal whose call made it: the only one that reads, answers or cancels it.
    pub owner: String,
    /// The replica whose process runs its execution.
    pub replica: String,
    /// Where it stands (the extension's own status: `is_terminal` once it ended).
    pub status: TaskStatus,
    /// What it is doing or why it ended, for the client and the model.
    pub message: Option<String>,
    /// When it was made and last changed (Unix milliseconds).
    pub created_ms: u64,
    /// When it last changed.
    pub updated_ms: u64,
    /// How long it lives from `created_ms`.
    pub ttl_ms: u64,
    /// The requests it waits on (an approval's form), by key.
    #[serde(default)]
    pub inputs: BTreeMap<String, Value>,
    /// The answers the client gave, by key, until the execution takes them.
    #[serde(default)]
    pub answers: BTreeMap<String, Value>,
    /// The writes its execution sent so far (method and URL), for a task that ends without
    /// its result: the last 50 (the bound of `sandbox::Watch`, which lists them).
    #[serde(default)]
    pub sent: Vec<String>,
    /// Whether the client asked to cancel it.
    #[serde(default)]
    pub cancel: bool,
    /// The tool result, once completed.
    pub result: Option<JsonObject>,
    /// The JSON-RPC error, once failed.
    pub error: Option<JsonObject>,
}

impl TaskRecord {
    /// The task as the extension shows it.
    pub fn detailed(&self) -> DetailedTask {
        let mut task = Task::new(
            self.id.clone(),
            self.status,
            iso(self.created_ms),
            iso(self.updated_ms),
        )
        .with_ttl_ms(self.ttl_ms)
        .with_poll_interval_ms(POLL_INTERVAL_MS);
        task.status_message = self.message.clone();
        let payload = match self.status {
            TaskStatus::InputRequired => match self.input_requests() {
                Some(input_requests) => TaskPayload::InputRequired { input_requests },
                None => TaskPayload::Working,
            },
            TaskStatus::Completed => TaskPayload::Completed {
                result: self.result.clone().unwrap_or_default(),
            },
            TaskStatus::Failed => TaskPayload::Failed {
                error: self.error.clone().unwrap_or_else(|| {
                    error_object(-32603, self.message.as_deref().unwrap_or("the task failed"))
                }),
            },
            TaskStatus::Cancelled => TaskPayload::Cancelled,
            // Working, and any status a later version of the extension adds.
            _ => TaskPayload::Working,
        };
        DetailedTask::new(task, payload)
    }

    /// The input requests still open, as the extension carries them; `None` when there are
    /// none (or none that reads back).
    fn input_requests(&self) -> Option<InputRequests> {
        let open: serde_json::Map<String, Value> = self
            .inputs
            .iter()
            .filter(|(key, _)| !self.answers.contains_key(*key))
            .map(|(key, request)| (key.clone(), request.clone()))
            .collect();
        let requests: InputRequests = serde_json::from_value(Value::Object(open)).ok()?;
        (!requests.is_empty()).then_some(requests)
    }
}

/// A JSON-RPC error object.
pub fn error_object(code: i64, message: &str) -> JsonObject {
    let mut error = JsonObject::new();
    error.insert("code".into(), code.into());
    error.insert("message".into(), message.into());
    error
}

/// Unix milliseconds as an ISO 8601 (RFC 3339) UTC timestamp.
pub fn iso(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: TaskStatus) -> TaskRecord {
        TaskRecord {
            id: "t1".into(),
            owner: "p".into(),
            replica: "r".into(),
            status,
            message: Some("3 requests sent".into()),
            created_ms: 1_700_000_000_000,
            updated_ms: 1_700_000_001_500,
            ttl_ms: 60_000,
            inputs: BTreeMap::new(),
            answers: BTreeMap::new(),
            sent: Vec::new(),
            cancel: false,
            result: None,
            error: None,
        }
    }

    #[test]
    fn a_record_reads_as_the_extension_shows_a_task() {
        let shown = serde_json::to_value(record(TaskStatus::Working).detailed()).unwrap();
        assert_eq!(shown["taskId"], "t1");
        assert_eq!(shown["status"], "working");
        assert_eq!(shown["createdAt"], "2023-11-14T22:13:20.000Z");
        assert_eq!(shown["lastUpdatedAt"], "2023-11-14T22:13:21.500Z");
        assert_eq!(shown["ttlMs"], 60_000);
        assert_eq!(shown["statusMessage"], "3 requests sent");
    }

    #[test]
    fn only_unanswered_inputs_are_asked_and_an_ended_task_carries_its_outcome() {
        let mut waiting = record(TaskStatus::InputRequired);
        let form = serde_json::json!({
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "approve?", "requestedSchema": {"type": "object", "properties": {}}}
        });
        waiting.inputs.insert("a1".into(), form.clone());
        waiting.inputs.insert("a2".into(), form);
        waiting
            .answers
            .insert("a1".into(), serde_json::json!({"action": "accept"}));
        let shown = serde_json::to_value(waiting.detailed()).unwrap();
        assert_eq!(shown["status"], "input_required");
        let keys: Vec<&String> = shown["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["a2"]);

        let mut failed = record(TaskStatus::Failed);
        failed.message = Some("its replica stopped".into());
        let shown = serde_json::to_value(failed.detailed()).unwrap();
        assert_eq!(shown["error"]["message"], "its replica stopped");
        let mut done = record(TaskStatus::Completed);
        done.result = Some(error_object(1, "x"));
        let shown = serde_json::to_value(done.detailed()).unwrap();
        assert_eq!(shown["result"]["message"], "x");
    }
}
