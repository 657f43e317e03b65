//! The task records' rules, on the memory store: owners, bounds, answers, ends.

use super::*;

fn tasks(settings: TaskSettings) -> Arc<Tasks> {
    Tasks::new(settings, StateStore::memory("tests"), 64)
}

/// A task of `who`'s that asks its client one question, `approval-1`; and its id.
async fn asking(tasks: &Arc<Tasks>, who: &Principal) -> (TaskHandle, String) {
    let task = tasks.open(who).await.unwrap();
    let id = task.id().to_owned();
    task.ask(
        "approval-1",
        serde_json::json!({"method": "elicitation/create"}),
    )
    .await
    .unwrap();
    (task, id)
}

fn peer(n: u8) -> Principal {
    Principal::peer(std::net::IpAddr::from([10, 0, 0, n]))
}

#[tokio::test]
async fn a_task_is_only_its_callers() {
    let tasks = tasks(TaskSettings::default());
    let (alice, mallory) = (peer(1), peer(2));
    let task = tasks.open(&alice).await.unwrap();
    let id = task.id().to_owned();
    assert!(matches!(
        tasks.get(&id, &mallory).await,
        Err(TaskError::Unknown(_))
    ));
    assert!(matches!(
        tasks.cancel(&id, &mallory).await,
        Err(TaskError::Unknown(_))
    ));
    let answers = [(
        "approval-1".to_owned(),
        serde_json::json!({"action": "accept"}),
    )];
    let update = tasks
        .update(&id, &mallory, answers.into_iter().collect())
        .await;
    assert!(matches!(update, Err(TaskError::Unknown(_))));
    assert!(
        !task.cancellation().is_cancelled(),
        "another caller cancelled it"
    );
    assert_eq!(
        tasks.get(&id, &alice).await.unwrap().status,
        TaskStatus::Working
    );
    for id in ["", "zz", &"0".repeat(32), &format!("{id}x")] {
        assert!(
            matches!(tasks.get(id, &alice).await, Err(TaskError::Unknown(_))),
            "{id}"
        );
    }
}

#[tokio::test]
async fn tasks_are_bounded_per_caller_and_a_finished_one_frees_its_place() {
    let settings = TaskSettings {
        running_per_principal: 2,
        kept_per_principal: 3,
        ..TaskSettings::default()
    };
    let tasks = tasks(settings);
    let alice = peer(1);
    let first = tasks.open(&alice).await.unwrap();
    let second = tasks.open(&alice).await.unwrap();
    let refused = tasks.open(&alice).await.err().unwrap().to_string();
    assert!(refused.contains("at once"), "{refused}");
    assert!(
        tasks.open(&peer(2)).await.is_ok(),
        "another caller has places of its own"
    );
    first
        .finish(TaskEnd::Completed(JsonObject::new()), Vec::new())
        .await;
    let _third = tasks.open(&alice).await.unwrap();
    second
        .finish(TaskEnd::Completed(JsonObject::new()), Vec::new())
        .await;
    // Three records kept (two ended, one running): the fourth is refused until one expires.
    let refused = tasks.open(&alice).await.err().unwrap().to_string();
    assert!(refused.contains("records one caller holds"), "{refused}");
    // A refusal leaves no place taken: a call answered at once frees its record's.
    let kept = tasks
        .state
        .members(&kept_set(alice.as_str()))
        .await
        .unwrap();
    assert_eq!(kept.len(), 3);
}

#[tokio::test]
async fn only_open_questions_are_answered_and_the_answer_is_taken_once() {
    let tasks = tasks(TaskSettings::default());
    let alice = peer(1);
    let (task, id) = asking(&tasks, &alice).await;
    assert_eq!(
        tasks.get(&id, &alice).await.unwrap().status,
        TaskStatus::InputRequired
    );
    let answers = [
        (
            "approval-1".to_owned(),
            serde_json::json!({"action": "accept"}),
        ),
        (
            "approval-9".to_owned(),
            serde_json::json!({"action": "accept"}),
        ),
    ];
    tasks
        .update(&id, &alice, answers.into_iter().collect())
        .await
        .unwrap();
    let record = tasks.get(&id, &alice).await.unwrap();
    assert_eq!(record.answers.keys().collect::<Vec<_>>(), ["approval-1"]);
    assert_eq!(task.answer("approval-1").await.unwrap()["action"], "accept");
    assert_eq!(task.answer("approval-1").await, None, "taken once");
    assert_eq!(
        tasks.get(&id, &alice).await.unwrap().status,
        TaskStatus::Working
    );
}

#[tokio::test]
async fn a_cancelled_task_ends_cancelled_and_a_cancel_waits_for_its_run() {
    let tasks = tasks(TaskSettings::default());
    let alice = peer(1);
    let task = Arc::new(tasks.open(&alice).await.unwrap());
    let id = task.id().to_owned();
    let run = task.clone();
    let job = tokio::spawn(async move {
        run.cancellation().cancelled().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        run.finish(TaskEnd::Completed(JsonObject::new()), Vec::new())
            .await;
    });
    tasks.cancel(&id, &alice).await.unwrap();
    assert!(
        job.is_finished(),
        "the cancel returned before the run ended"
    );
    assert_eq!(
        tasks.get(&id, &alice).await.unwrap().status,
        TaskStatus::Cancelled
    );
}

#[tokio::test]
async fn a_task_whose_replica_is_gone_fails_with_what_it_sent() {
    let tasks = tasks(TaskSettings::default());
    let alice = peer(1);
    let task = tasks.open(&alice).await.unwrap();
    let id = task.id().to_owned();
    task.report(
        "running".into(),
        vec!["POST http://h/v1/notes -> 201".into()],
    )
    .await;
    let record = tasks.get(&id, &alice).await.unwrap();
    let orphan = TaskRecord {
        replica: "gone".into(),
        ..record
    };
    let ttl = Duration::from_secs(60);
    let text = serde_json::to_string(&orphan).unwrap();
    tasks.state.put(&record_key(&id), &text, ttl).await.unwrap();
    let record = tasks.get(&id, &alice).await.unwrap();
    assert_eq!(record.status, TaskStatus::Failed);
    let message = record.message.unwrap();
    assert!(
        message.contains("not run again") && message.contains("POST http://h/v1/notes"),
        "{message}"
    );
}

#[tokio::test]
async fn a_process_runs_tasks_on_all_its_workers_but_one() {
    let tasks = Tasks::new(TaskSettings::default(), StateStore::memory("tests"), 2);
    let first = tasks.open(&peer(1)).await.unwrap();
    let _second = tasks.open(&peer(2)).await.unwrap();
    let refused = tasks.open(&peer(3)).await.err().unwrap().to_string();
    assert!(refused.contains("at most 2 tasks at once"), "{refused}");
    first
        .finish(TaskEnd::Completed(JsonObject::new()), Vec::new())
        .await;
    assert!(
        tasks.open(&peer(3)).await.is_ok(),
        "an ended task gives its place back"
    );
}

#[tokio::test]
async fn an_end_is_final_and_a_run_taken_for_gone_is_stopped() {
    let tasks = tasks(TaskSettings::default());
    let alice = peer(1);
    let task = tasks.open(&alice).await.unwrap();
    let id = task.id().to_owned();
    let record = tasks.get(&id, &alice).await.unwrap();
    // Another replica took this one for gone and ended the task.
    tasks
        .change(&record, |task| {
            task.status = TaskStatus::Failed;
            task.message = Some("gone".into());
        })
        .await
        .unwrap();
    task.report("running".into(), Vec::new()).await;
    assert!(task.cancellation().is_cancelled(), "the run goes on");
    task.ask("approval-1", serde_json::json!({})).await.unwrap();
    task.finish(
        TaskEnd::Completed(JsonObject::new()),
        vec!["POST x -> 201".into()],
    )
    .await;
    let record = tasks.get(&id, &alice).await.unwrap();
    assert_eq!(record.status, TaskStatus::Failed);
    assert_eq!(record.message.as_deref(), Some("gone"));
    assert!(record.inputs.is_empty());
}

#[tokio::test]
async fn a_cancelled_task_names_the_writes_it_sent() {
    let tasks = tasks(TaskSettings::default());
    let alice = peer(1);
    let task = Arc::new(tasks.open(&alice).await.unwrap());
    let id = task.id().to_owned();
    let run = task.clone();
    tokio::spawn(async move {
        run.cancellation().cancelled().await;
        let sent = vec!["POST http://h/v1/notes -> 201".to_owned()];
        run.finish(TaskEnd::Completed(JsonObject::new()), sent)
            .await;
    });
    tasks.cancel(&id, &alice).await.unwrap();
    let record = tasks.get(&id, &alice).await.unwrap();
    assert_eq!(record.status, TaskStatus::Cancelled);
    let message = record.message.unwrap();
    assert!(
        message.contains("POST http://h/v1/notes -> 201"),
        "{message}"
    );
}

#[tokio::test]
async fn an_ended_task_takes_no_answer_and_its_run_gets_none() {
    let tasks = tasks(TaskSettings::default());
    let alice = peer(1);
    let (task, id) = asking(&tasks, &alice).await;
    let record = tasks.get(&id, &alice).await.unwrap();
    tasks
        .change(&record, |task| task.status = TaskStatus::Failed)
        .await
        .unwrap();
    let answers = [(
        "approval-1".to_owned(),
        serde_json::json!({"action": "accept"}),
    )];
    tasks
        .update(&id, &alice, answers.into_iter().collect())
        .await
        .unwrap();
    assert_eq!(task.answer("approval-1").await, None);
    assert!(
        task.cancellation().is_cancelled(),
        "the run of an ended task goes on"
    );
    let after = tasks.get(&id, &alice).await.unwrap();
    assert!(after.answers.is_empty(), "an ended task took an answer");
}

#[tokio::test]
async fn a_process_with_one_worker_runs_no_task() {
    let tasks = Tasks::new(TaskSettings::default(), StateStore::memory("tests"), 0);
    let refused = tasks.open(&peer(1)).await.err().unwrap().to_string();
    assert!(refused.contains("at most 0 tasks at once"), "{refused}");
}
