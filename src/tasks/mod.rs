//! Long executions as MCP tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663).
//!
//! A call from a client that offers the extension runs under the task's limit from its start;
//! if it has not ended within [`TaskSettings::after`] (or asks a human first), the call
//! answers with a task and the execution goes on without it. Records live in the state
//! store, so `tasks/get`, `tasks/update` and `tasks/cancel` work on any replica; the replica
//! that runs the execution writes its progress there every second and reads the client's
//! cancel and answers from there.
//!
//! Invariants:
//! - a task is read, answered and cancelled only by the principal whose call made it; any
//!   other gets "no task", as for an id that never was;
//! - a task is never run twice: one whose replica stopped before it ended is shown failed,
//!   with the writes it had sent, and nothing runs it again;
//! - a cancelled task sends nothing it had not sent: its execution's cancellation ends it
//!   (a write waiting for a human is not sent), and `tasks/cancel` returns once the run has
//!   ended (on another replica, told by a letter; waited for up to [`CANCEL_WAIT`]);
//! - records are bounded: running tasks and kept records per principal, kept records in all,
//!   each record with a time to live and a result bounded like any answer.

mod approver;
mod record;
mod settings;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{InputResponses, JsonObject, Task, TaskStatus};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use approver::TaskApprover;
pub use record::{TaskRecord, error_object};
pub use settings::{TaskSettings, TasksFile};

use crate::fair::Principal;
use crate::lock::lock;
use crate::state::{Change, StateError, StateStore};

/// The letter that tells the replica running a task to cancel it (its body: the task id).
const CANCEL_TOPIC: &str = "task-cancel";

/// How long a cancel waits for the task's run to end.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Why a task operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// No such task for this caller (unknown, expired, or another principal's).
    #[error(
        "no task {0}: it does not exist, it expired, or another caller made it; a task is read \
         only by the caller whose call made it"
    )]
    Unknown(String),
    /// The bounds on tasks are reached.
    #[error("{0}")]
    Full(String),
    /// The state store failed.
    #[error(transparent)]
    Store(#[from] StateError),
}

/// The tasks of one server: their settings, their records in the state store, and the runs
/// on this replica.
pub struct Tasks {
    settings: TaskSettings,
    state: StateStore,
    /// Tasks this process may run at once: all its workers but one, which stays for calls.
    here: Arc<tokio::sync::Semaphore>,
    /// That number, for the refusal.
    room: usize,
    /// Runs on this replica, by task id: what cancels each, and what says it ended.
    local: Mutex<HashMap<String, (CancellationToken, watch::Receiver<bool>)>>,
}

/// How a task ended.
pub enum TaskEnd {
    /// With a tool result.
    Completed(JsonObject),
    /// With a JSON-RPC error.
    Failed(JsonObject),
}

impl Tasks {
    /// Tasks under `settings`, kept in `state`, at most `room` running in this process at
    /// once (its workers but one: none with one worker); listens for cancels sent from other replicas (on the
    /// tokio runtime it is called on, while the tasks live).
    pub fn new(settings: TaskSettings, state: StateStore, room: usize) -> Arc<Self> {
        let tasks = Arc::new(Self {
            settings,
            state,
            here: Arc::new(tokio::sync::Semaphore::new(room)),
            room,
            local: Mutex::default(),
        });
        let letters = tasks.state.letters();
        let listening = Arc::downgrade(&tasks);
        tokio::spawn(async move {
            use futures_util::StreamExt;
            let mut letters = std::pin::pin!(letters);
            while let Some(letter) = letters.next().await {
                let Some(tasks) = listening.upgrade() else {
                    return;
                };
                if letter.topic == CANCEL_TOPIC
                    && let Some((cancel, _)) = lock(&tasks.local).get(&letter.body)
                {
                    cancel.cancel();
                }
            }
        });
        tasks
    }

    /// The settings.
    pub fn settings(&self) -> &TaskSettings {
        &self.settings
    }

    /// Makes a task for `owner`, running on this replica; refused past the bounds.
    pub async fn open(self: &Arc<Self>, owner: &Principal) -> Result<TaskHandle, TaskError> {
        let permit = self.here.clone().try_acquire_owned().map_err(|_| {
            TaskError::Full(format!(
                "this server runs at most {} tasks at once: all its workers but one, which \
                 stays for plain calls (more --workers make room)",
                self.room
            ))
        })?;
        let id = crate::approval::random_hex(16)
            .ok_or_else(|| TaskError::Full("no randomness for a task id".into()))?;
        let ttl = self.settings.ttl();
        let owner = owner.as_str().to_owned();
        let places = self.places(&owner);
        self.take_places(&places, &id).await?;
        let now = self.state.now_ms();
        let record = TaskRecord {
            id: id.clone(),
            owner: owner.clone(),
            replica: self.state.replica().to_owned(),
            status: TaskStatus::Working,
            message: Some("the execution started".into()),
            created_ms: now,
            updated_ms: now,
            ttl_ms: ttl.as_millis() as u64,
            inputs: Default::default(),
            answers: Default::default(),
            sent: Vec::new(),
            cancel: false,
            result: None,
            error: None,
        };
        let text =
            serde_json::to_string(&record).map_err(|e| StateError::Unreadable(e.to_string()))?;
        if let Err(error) = self.state.put(&record_key(&id), &text, ttl).await {
            self.give_back(&places, &id).await;
            return Err(error.into());
        }
        let cancel = CancellationToken::new();
        let (ended, ended_rx) = watch::channel(false);
        lock(&self.local).insert(id.clone(), (cancel.clone(), ended_rx));
        Ok(TaskHandle {
            tasks: self.clone(),
            id,
            owner,
            cancel,
            ended,
            created_ms: now,
            asked: tokio::sync::Notify::new(),
            permit: Mutex::new(Some(permit)),
        })
    }

    /// The bounded sets a task of `owner` takes a place in: its running tasks, its kept
    /// records, all kept records; each with how long a place lasts, its bound and its name.
    fn places(&self, owner: &str) -> [Place; 3] {
        let settings = &self.settings;
        [
            Place {
                set: running_set(owner),
                ttl: settings.limit.saturating_mul(2),
                max: settings.running_per_principal,
                what: "tasks one caller runs at once",
            },
            Place {
                set: kept_set(owner),
                ttl: settings.ttl(),
                max: settings.kept_per_principal,
                what: "task records one caller holds",
            },
            Place {
                set: KEPT_IN_ALL.to_owned(),
                ttl: settings.ttl(),
                max: settings.kept_in_all,
                what: "task records in all",
            },
        ]
    }

    /// Takes task `id`'s place in each of `places`, or in none of them.
    async fn take_places(&self, places: &[Place], id: &str) -> Result<(), TaskError> {
        for (at, place) in places.iter().enumerate() {
            let admitted = self.state.admit(&place.set, id, place.ttl, place.max).await;
            if !matches!(admitted, Ok(true)) {
                self.give_back(&places[..at], id).await;
                admitted?;
                return Err(TaskError::Full(format!(
                    "the bound of {} on {} is reached",
                    place.max, place.what
                )));
            }
        }
        Ok(())
    }

    /// Gives task `id`'s places in `places` back.
    async fn give_back(&self, places: &[Place], id: &str) {
        for place in places {
            let _ = self.state.dismiss(&place.set, id).await;
        }
    }

    /// The task `id`, if `owner` made it. A task whose replica stopped before it ended is
    /// marked failed here, once, with the writes it had sent.
    pub async fn get(&self, id: &str, owner: &Principal) -> Result<TaskRecord, TaskError> {
        let record = self.owned(id, owner.as_str()).await?;
        if record.status.is_terminal() || self.state.alive(&record.replica).await? {
            return Ok(record);
        }
        let message = orphaned(&record);
        self.change(&record, |task| {
            task.status = TaskStatus::Failed;
            task.error = Some(error_object(-32603, &message));
            task.message = Some(message.clone());
        })
        .await
    }

    /// Takes the client's answers to the task's open input requests (others are ignored, as
    /// the extension says).
    pub async fn update(
        &self,
        id: &str,
        owner: &Principal,
        responses: InputResponses,
    ) -> Result<(), TaskError> {
        let record = self.owned(id, owner.as_str()).await?;
        if record.status.is_terminal() {
            return Ok(());
        }
        self.change(&record, |task| {
            for (key, answer) in &responses {
                if task.inputs.contains_key(key) && !task.answers.contains_key(key) {
                    task.answers.insert(key.clone(), answer.clone());
                }
            }
        })
        .await?;
        Ok(())
    }

    /// Asks the task to stop: the replica that runs it cancels its execution (at once when it
    /// is this one, which returns once the run has ended; else within a second).
    pub async fn cancel(&self, id: &str, owner: &Principal) -> Result<(), TaskError> {
        let record = self.owned(id, owner.as_str()).await?;
        if record.status.is_terminal() {
            return Ok(());
        }
        self.change(&record, |task| task.cancel = true).await?;
        let local = lock(&self.local).get(id).cloned();
        if let Some((cancel, mut ended)) = local {
            cancel.cancel();
            let _ = tokio::time::timeout(CANCEL_WAIT, ended.wait_for(|ended| *ended)).await;
            return Ok(());
        }
        // Another replica runs it: told at once, and its end waited for here.
        self.state
            .send_to(&record.replica, CANCEL_TOPIC, id)
            .await?;
        let waited = tokio::time::Instant::now();
        while waited.elapsed() < CANCEL_WAIT {
            let ended = self.owned(id, &record.owner).await?.status.is_terminal();
            if ended || !self.state.alive(&record.replica).await? {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// The record of `id`, when `owner` made it.
    async fn owned(&self, id: &str, owner: &str) -> Result<TaskRecord, TaskError> {
        let unknown = || TaskError::Unknown(id.chars().take(64).collect());
        if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(unknown());
        }
        let record: TaskRecord = self
            .state
            .read(&record_key(id))
            .await?
            .ok_or_else(unknown)?;
        if record.owner != owner {
            return Err(unknown());
        }
        Ok(record)
    }

    /// Changes `record`'s task with `change` (see [`Tasks::change_at`]).
    async fn change(
        &self,
        record: &TaskRecord,
        change: impl Fn(&mut TaskRecord),
    ) -> Result<TaskRecord, TaskError> {
        let expires_ms = record.created_ms + record.ttl_ms;
        self.change_at(&record.id, expires_ms, change).await
    }

    /// Changes the record of task `id` with `change` (as it is in the store then), kept
    /// until `expires_ms`; gives the record as it stands after. An ended task is left as it
    /// is, whatever the change: an end is final (another replica may have ended it, taking
    /// the one that runs it for gone).
    async fn change_at(
        &self,
        id: &str,
        expires_ms: u64,
        change: impl Fn(&mut TaskRecord),
    ) -> Result<TaskRecord, TaskError> {
        let now = self.state.now_ms();
        let left = expires_ms.saturating_sub(now).max(1_000);
        self.state
            .update(
                &record_key(id),
                Duration::from_millis(left),
                |current: Option<TaskRecord>| match current {
                    Some(task) if task.status.is_terminal() => Change::Keep(Ok(task)),
                    Some(mut task) => {
                        change(&mut task);
                        task.updated_ms = now;
                        Change::Write(task.clone(), Ok(task))
                    }
                    None => Change::Keep(Err(TaskError::Unknown(id.to_owned()))),
                },
            )
            .await?
    }
}

/// A bounded set of the state store that a task takes a place in.
struct Place {
    /// The set.
    set: String,
    /// How long a place lasts.
    ttl: Duration,
    /// The set's bound.
    max: usize,
    /// What the set counts, for the refusal.
    what: &'static str,
}

/// The record's key in the state store.
fn record_key(id: &str) -> String {
    format!("task:{id}")
}

/// The set of one principal's running tasks.
fn running_set(owner: &str) -> String {
    format!("tasks-running:{owner}")
}

/// The set of one principal's kept records.
fn kept_set(owner: &str) -> String {
    format!("tasks-kept:{owner}")
}

/// The set of all kept records.
const KEPT_IN_ALL: &str = "tasks-kept";

/// The writes a task had sent, in words: what a task that ended without its result says.
pub fn sent_words(sent: &[String]) -> String {
    match sent.is_empty() {
        true => "it had sent no write".to_owned(),
        false => format!("the writes it had sent: {}", sent.join("; ")),
    }
}

/// What a task whose replica stopped says.
fn orphaned(record: &TaskRecord) -> String {
    let sent = sent_words(&record.sent);
    format!(
        "the server running this task stopped before it ended; it is not run again ({sent}). \
         Check what it did before you run the code again"
    )
}

/// One task, held by the run that does its work on this replica.
pub struct TaskHandle {
    tasks: Arc<Tasks>,
    id: String,
    owner: String,
    cancel: CancellationToken,
    ended: watch::Sender<bool>,
    created_ms: u64,
    /// Notified when the task asks the client something: its call answers with it at once.
    asked: tokio::sync::Notify,
    /// Its place among the tasks this process runs, given back when it ends.
    permit: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
}

impl TaskHandle {
    /// The task's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What cancels the task's execution: `tasks/cancel`.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Resolves once the task has asked the client something.
    pub async fn asked(&self) {
        self.asked.notified().await;
    }

    /// The settings of the tasks.
    pub fn settings(&self) -> &TaskSettings {
        &self.tasks.settings
    }

    /// The task as the call that made it answers.
    pub async fn seed(&self) -> Task {
        match self.record().await {
            Ok(record) => record.detailed().task,
            Err(_) => {
                let at = record::iso(self.created_ms);
                Task::new(self.id.clone(), TaskStatus::Working, at.clone(), at)
                    .with_ttl_ms(self.tasks.settings.ttl().as_millis() as u64)
                    .with_poll_interval_ms(record::POLL_INTERVAL_MS)
            }
        }
    }

    async fn record(&self) -> Result<TaskRecord, TaskError> {
        self.tasks.owned(&self.id, &self.owner).await
    }

    /// Changes this task's record (see [`Tasks::change_at`]): one read and one write, no
    /// read before.
    async fn change(&self, change: impl Fn(&mut TaskRecord)) -> Result<TaskRecord, TaskError> {
        let expires_ms = self.created_ms + self.tasks.settings.ttl().as_millis() as u64;
        self.tasks.change_at(&self.id, expires_ms, change).await
    }

    /// Writes the run's progress (`message`, the writes sent so far); cancels the run when
    /// the client asked to (on another replica).
    pub async fn report(&self, message: String, sent: Vec<String>) {
        let changed = self
            .change(|task| {
                task.message = Some(match task.status {
                    TaskStatus::InputRequired => {
                        format!("waiting for the user's decision about a write; {message}")
                    }
                    _ => message.clone(),
                });
                task.sent = sent.clone();
            })
            .await;
        // Cancelled by its client, ended by another replica that took this one for gone (its
        // heartbeat missed), or expired: the run stops, and what it sent stays as recorded.
        match changed {
            Ok(task) if !task.cancel && !task.status.is_terminal() => {}
            Err(TaskError::Store(_)) => {}
            _ => self.cancel.cancel(),
        }
    }

    /// Puts an input request in the task, which waits for it (`input_required`).
    pub async fn ask(&self, key: &str, request: serde_json::Value) -> Result<(), TaskError> {
        self.change(|task| {
            task.inputs.insert(key.to_owned(), request.clone());
            task.status = TaskStatus::InputRequired;
            task.message = Some("waiting for the user's decision about a write".into());
        })
        .await?;
        self.asked.notify_one();
        Ok(())
    }

    /// The client's answer to input request `key`, taken (with the request) once given.
    pub async fn answer(&self, key: &str) -> Option<serde_json::Value> {
        let record = self.record().await.ok()?;
        if record.cancel || record.status.is_terminal() {
            self.cancel.cancel();
            return None;
        }
        let answer = record.answers.get(key)?.clone();
        self.withdraw(key).await;
        Some(answer)
    }

    /// Removes input request `key` (answered, or given up on); the task works again when
    /// none is left.
    pub async fn withdraw(&self, key: &str) {
        let _ = self
            .change(|task| {
                task.inputs.remove(key);
                task.answers.remove(key);
                if task.status == TaskStatus::InputRequired && task.inputs.is_empty() {
                    task.status = TaskStatus::Working;
                    task.message = Some("the execution goes on".into());
                }
            })
            .await;
    }

    /// Ends the task with its outcome (cancelled, if the client asked) and the writes it
    /// sent, frees its place among the running ones, and lets a waiting cancel return. A
    /// task another replica ended already (taking this one for gone) keeps that end: an end
    /// is final.
    pub async fn finish(&self, end: TaskEnd, sent: Vec<String>) {
        let cancelled = self.cancel.is_cancelled();
        let result = self
            .change(|task| {
                task.inputs.clear();
                task.answers.clear();
                task.sent = sent.clone();
                match (&end, task.cancel && cancelled) {
                    (_, true) => {
                        task.status = TaskStatus::Cancelled;
                        task.message =
                            Some(format!("cancelled by the client; {}", sent_words(&sent)));
                    }
                    (TaskEnd::Completed(result), false) => {
                        task.status = TaskStatus::Completed;
                        task.result = Some(result.clone());
                        task.message = Some("the execution ended".into());
                    }
                    (TaskEnd::Failed(error), false) => {
                        task.status = TaskStatus::Failed;
                        task.message = error
                            .get("message")
                            .and_then(serde_json::Value::as_str)
                            .map(str::to_owned);
                        task.error = Some(error.clone());
                    }
                }
            })
            .await;
        if let Err(error) = result {
            tracing::warn!(task = %self.id, "a task's end could not be recorded: {error}");
        }
        self.release().await;
    }

    /// Forgets the task: its call answered with the result itself.
    pub async fn forget(&self) {
        let _ = self.tasks.state.take(&record_key(&self.id)).await;
        let _ = self
            .tasks
            .state
            .dismiss(&kept_set(&self.owner), &self.id)
            .await;
        let _ = self.tasks.state.dismiss(KEPT_IN_ALL, &self.id).await;
        self.release().await;
    }

    async fn release(&self) {
        let _ = self
            .tasks
            .state
            .dismiss(&running_set(&self.owner), &self.id)
            .await;
        lock(&self.tasks.local).remove(&self.id);
        lock(&self.permit).take();
        let _ = self.ended.send(true);
    }
}

#[cfg(test)]
mod tests;
