//! OpenTelemetry traces as an operator's collector receives them: the real binary exports over
//! OTLP/HTTP to a receiver that decodes with the OpenTelemetry project's own protobuf
//! definitions (tests/collector/otlp.py), while the official Python client runs an execute that
//! reads, is type-checked, waits for a human's approval and writes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::support::{listening, requirement_met, sdkbox_async};

/// The receiver's Python, installed by scripts/test-deps.
fn collector_python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/collector/.venv/bin/python");
    requirement_met(
        python.exists(),
        "the OTLP receiver is not installed (scripts/test-deps)",
    )
    .then_some(python)
}

/// The receiver, listening, and the spans it printed so far.
struct Receiver {
    _child: tokio::process::Child,
    port: u16,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    spans: Vec<Value>,
}

impl Receiver {
    async fn start(python: &Path) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/collector/otlp.py");
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines
            .next_line()
            .await
            .unwrap()
            .expect("the receiver ended");
        let port = first.strip_prefix("listening ").unwrap().parse().unwrap();
        Self {
            _child: child,
            port,
            lines,
            spans: Vec::new(),
        }
    }

    /// Reads spans until `done` holds of all of them, or 30 s pass.
    async fn until(&mut self, done: impl Fn(&[Value]) -> bool) -> &[Value] {
        let reading = async {
            while !done(&self.spans) {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .unwrap()
                    .expect("receiver ended");
                let span: Value = serde_json::from_str(&line).unwrap();
                assert!(span.get("error").is_none(), "the receiver refused: {span}");
                self.spans.push(span);
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(30), reading).await;
        &self.spans
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// One execute through the official client, type-checked, approved through elicitation: the
/// collector gets the call as a server span with its outcome, and as its children the type
/// check with its verdict, the approval wait with its answer, and each provider request as a
/// client span with its method, operation and status, all in one trace; no span carries the
/// provider's URL, the token or the request body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execute_is_one_trace_of_its_check_approval_and_provider_requests() {
    let (Some(collector), Some(client), Some(tsc)) = (
        collector_python(),
        crate::clients::python_client(),
        crate::types::tsc(),
    ) else {
        return;
    };
    let mut receiver = Receiver::start(&collector).await;
    let token = "trace-test-token-7f3a";
    let mut command = sdkbox_async();
    command
        .args(["serve", "--demo", "--http", "127.0.0.1:0"])
        .args(["--token-env", "SDKBOX_TOKEN", "--writes", "approve"])
        .args(["--typecheck", "block", "--tsc", tsc.to_str().unwrap()])
        .env("SDKBOX_TOKEN", token)
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", receiver.port),
        )
        .env("OTEL_BSP_SCHEDULE_DELAY", "200");
    let server = listening(command).await;
    let code = "const first = await api.customers.list({ limit: 1 }); \
                const made = await api.customers.create({ name: 'traced-body-9c1e', email: 't@example.com' }); \
                return { listed: first.data.length, id: made.id };";
    let output = tokio::process::Command::new(&client)
        .arg(client.parent().unwrap().join("../../traced.py"))
        .env("ERA", "legacy")
        .env("TRANSPORT", "http")
        .env("SDKBOX_URL", &server.url)
        .env("SDKBOX_TOKEN", token)
        .env("CODE", code)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("\"ok\": true"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // A call's span is named after its tool.
    let spans = receiver
        .until(|spans| !named(spans, "execute").is_empty())
        .await
        .to_vec();
    let call = *named(&spans, "execute")
        .first()
        .unwrap_or_else(|| panic!("no execute call span in {spans:#?}"));
    assert_eq!(call["attributes"]["tool"], "execute", "{call}");
    assert_eq!(call["service"], "sdkbox", "{call}");
    assert_eq!(call["kind"], 2, "a call is a server span: {call}");
    assert_eq!(call["attributes"]["outcome"], "ok", "{call}");
    let (trace, parent) = (&call["trace_id"], &call["span_id"]);
    let children: Vec<&Value> = spans
        .iter()
        .filter(|s| &s["trace_id"] == trace && &s["parent_span_id"] == parent)
        .collect();
    let child = |name: &str| -> Vec<&Value> {
        children
            .iter()
            .copied()
            .filter(|s| s["name"] == name)
            .collect()
    };
    let checks = child("typecheck");
    assert_eq!(checks.len(), 1, "{children:#?}");
    assert_eq!(checks[0]["attributes"]["verdict"], "run", "{:?}", checks[0]);
    let requests = child("provider_request");
    let methods: Vec<(&Value, &Value, &Value)> = requests
        .iter()
        .map(|s| {
            let a = &s["attributes"];
            (
                &a["http.request.method"],
                &a["operation"],
                &a["http.response.status_code"],
            )
        })
        .collect();
    assert_eq!(requests.len(), 2, "{children:#?}");
    assert!(
        requests.iter().all(|s| s["kind"] == 3),
        "client spans: {requests:#?}"
    );
    assert_eq!(methods[0].0, "GET", "{methods:?}");
    assert_eq!(methods[1].0, "POST", "{methods:?}");
    assert!(methods.iter().all(|m| {
        m.1.as_str()
            .is_some_and(|o| o.to_ascii_lowercase().contains("customer"))
    }));
    assert!(
        methods
            .iter()
            .all(|m| m.2.as_i64().is_some_and(|s| (200..300).contains(&s)))
    );
    // The approval is asked while the write is decided, inside its request's span.
    let post = requests[1]["span_id"].clone();
    let approvals: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "approval" && s["parent_span_id"] == post)
        .collect();
    assert_eq!(approvals.len(), 1, "{spans:#?}");
    assert_eq!(approvals[0]["attributes"]["answer"], "approved");
    assert_eq!(approvals[0]["attributes"]["write"], true);
    let everything = serde_json::to_string(&spans).unwrap();
    for secret in [token, "traced-body-9c1e", "127.0.0.1:"] {
        assert!(!everything.contains(secret), "{secret} in {everything}");
    }
    drop(server);
}
