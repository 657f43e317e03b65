//! Fair under many callers (issue 33): while one principal (a client on 127.0.0.2) does each
//! thing that used to take the service from everybody, another (on 127.0.0.1) is answered
//! and not refused, and the noisy one is refused past its own share with a message naming
//! the limit. The real binary over HTTP; principals told apart by their addresses, as the
//! server tells them apart without sign-in. No timing asserts: the noisy-neighbour bench
//! (`benches/workload/neighbour.mjs`) measures how long the quiet one waits.

use std::net::IpAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Listening, listening};

const QUIET: [u8; 4] = [127, 0, 0, 1];
const NOISY: [u8; 4] = [127, 0, 0, 2];

async fn server(extra: &[&str]) -> Listening {
    let mut command = crate::support::sdkbox_async();
    command
        .kill_on_drop(true)
        .args(["serve", "--demo", "--http", "127.0.0.1:0"])
        .args(extra);
    listening(command).await
}

/// An MCP session of a client on one loopback address, over raw HTTP.
#[derive(Clone)]
struct Session {
    url: String,
    id: String,
    client: reqwest::Client,
}

/// A client whose connections come from `address`.
fn client_from(address: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::from(address))
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

impl Session {
    async fn start(url: &str, from: [u8; 4]) -> Self {
        let client = client_from(from);
        let response = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(crate::support::INITIALIZE)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{:?}", response.text().await);
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let _ = response.bytes().await;
        let session = Self {
            url: url.to_owned(),
            id,
            client,
        };
        session
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        session
    }

    async fn send(&self, message: Value) -> reqwest::Response {
        self.client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("mcp-session-id", &self.id)
            .body(message.to_string())
            .send()
            .await
            .unwrap()
    }

    /// A tool call's JSON-RPC answer (from the JSON body or the event stream), or the HTTP
    /// status and body when the call was refused before MCP.
    async fn call(&self, tool: &str, arguments: Value) -> Result<Value, (u16, String)> {
        // Calls of one session at once: each its own request id.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(2);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        let response = self.send(call).await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        if status != 200 {
            return Err((status, text));
        }
        let answer = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .chain(std::iter::once(text.as_str()))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message.get("id") == Some(&json!(id)));
        answer.ok_or((status, text))
    }

    /// Closes the session as a client does (`DELETE`); the HTTP status.
    async fn close(&self) -> u16 {
        self.client
            .delete(&self.url)
            .header("mcp-protocol-version", "2025-06-18")
            .header("mcp-session-id", &self.id)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn execute(&self, code: &str) -> Value {
        let answer = self
            .call("execute", json!({"code": code}))
            .await
            .unwrap_or_else(|refused| panic!("refused: {refused:?}"));
        answer["result"]["structuredContent"].clone()
    }
}

/// The quiet principal's trivial call: answered, with its result.
async fn quiet_is_answered(url: &str) {
    let quiet = Session::start(url, QUIET).await;
    let outcome = quiet.execute("return 6 * 7").await;
    assert_eq!(outcome["ok"], true, "{outcome}");
    assert_eq!(outcome["result"], 42, "{outcome}");
    let found = quiet
        .call("search_docs", json!({"query": "refund an order"}))
        .await
        .unwrap();
    let hits = &found["result"]["structuredContent"]["hits"];
    assert!(hits.as_array().is_some_and(|h| !h.is_empty()), "{found}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_slow_checks_from_one_caller_leave_another_answered() {
    let Some(tsc) = crate::types::tsc() else {
        return;
    };
    let tsc = tsc.display().to_string();
    let server = server(&[
        "--typecheck",
        "block",
        "--tsc",
        &tsc,
        "--typecheck-compilers",
        "2",
    ])
    .await;
    // Scripts a little smaller than the largest the check takes: each check takes a while
    // (and names the SDK: code that does not is not checked).
    let slow: String =
        std::iter::once("const sdk = api;\n".to_owned())
            .chain((0..700).map(|i| {
                format!("const v{i} = [{i}, 2, 3].map((a) => a * 2).filter((b) => b > 1);\n")
            }))
            .chain(std::iter::once("return 1;".to_owned()))
            .collect();
    let noisy: Vec<Session> =
        futures_util::future::join_all((0..12).map(|_| Session::start(&server.url, NOISY))).await;
    let flood = futures_util::future::join_all(noisy.iter().map(|s| s.execute(&slow)));
    let quiet = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        quiet_is_answered(&server.url).await;
    };
    assert!(slow.len() < 64 * 1024, "the check takes it");
    let (outcomes, ()) = tokio::join!(flood, quiet);
    // The noisy principal is held to its share: past four checks at once, its scripts run
    // unchecked, with a warning saying why; past ten calls, `busy`.
    let said = serde_json::to_string(&outcomes).unwrap();
    assert!(
        said.contains("not type-checked: you already have 4 type checks in progress"),
        "no check was past the caller's share: {said}"
    );
    assert!(outcomes.iter().any(|o| o["ok"] == true), "{outcomes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_names_and_filters_are_refused_at_once_and_leave_another_answered() {
    let server = server(&[]).await;
    let noisy = Session::start(&server.url, NOISY).await;
    let huge_name = noisy.execute(r#"return await api["zone".repeat(250000)].list();"#);
    let group = "zone".repeat(500_000);
    let huge_filter = noisy.call(
        "search_docs",
        json!({"query": "list zones", "group": group}),
    );
    let (name, filter, ()) = tokio::join!(huge_name, huge_filter, quiet_is_answered(&server.url));
    let said = name["error"]["message"].as_str().unwrap();
    assert!(said.contains("longer than any name this SDK has"), "{said}");
    assert!(
        said.len() < 1_000,
        "the name is repeated: {} bytes",
        said.len()
    );
    let filter = filter.unwrap();
    let text = filter.to_string();
    assert!(
        text.contains("`group` filter is 2000000 bytes long"),
        "{text}"
    );
    assert!(
        text.len() < 2_000,
        "the filter is echoed: {} bytes",
        text.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_with_many_sessions_cannot_fill_the_approval_page() {
    let server = server(&["--writes", "approve"]).await;
    let noisy: Vec<Session> =
        futures_util::future::join_all((0..20).map(|_| Session::start(&server.url, NOISY))).await;
    // Each session asks about writes of its own scripts: more than one caller may have.
    let asks = noisy.iter().enumerate().flat_map(|(s, session)| {
        (0..4).map(move |w| async move {
            let code = format!(
                "return await api.customers.create({{ name: 'noisy {s} {w}', email: 'n{s}x{w}@example.com' }});"
            );
            session.execute(&code).await
        })
    });
    // A few at once, as a client may send them, within its share of calls.
    let asks: Vec<_> = asks.collect();
    let mut outcomes = Vec::new();
    let mut asks = asks.into_iter();
    loop {
        let batch: Vec<_> = asks.by_ref().take(8).collect();
        if batch.is_empty() {
            break;
        }
        outcomes.extend(futures_util::future::join_all(batch).await);
    }
    let refused = outcomes
        .iter()
        .filter(|o| {
            let said = o.to_string();
            said.contains("counted across its sessions") || said.contains("whatever its sessions")
        })
        .count();
    assert!(refused > 0, "the noisy caller was never held to its share");
    // The quiet caller's write still gets its question on the page.
    let quiet = Session::start(&server.url, QUIET).await;
    let outcome = quiet
        .execute("return await api.customers.create({ name: 'quiet', email: 'q@example.com' });")
        .await;
    let said = outcome.to_string();
    assert!(said.contains("/approve/"), "{said}");
}

/// A session its client closes takes what it left waiting for a human (its scripts' chains,
/// its undecided questions on the page) with it: no run can continue them any more, and they
/// held the room of their principal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_sessions_questions_leave_the_page_and_free_its_callers_room() {
    let server = server(&["--writes", "approve"]).await;
    let first = Session::start(&server.url, NOISY).await;
    let ask = |session: &Session, n: usize| {
        let code = format!(
            "return await api.customers.create({{ name: 'closing {n}', email: 'c{n}@example.com' }});"
        );
        let session = session.clone();
        async move { session.execute(&code).await.to_string() }
    };
    // As many scripts waiting for a human as one principal may have, from one session, a
    // few at once.
    let mut links = Vec::new();
    for batch in (0..32).collect::<Vec<_>>().chunks(8) {
        let said = futures_util::future::join_all(batch.iter().map(|n| ask(&first, *n))).await;
        links.extend(said.into_iter().filter(|s| s.contains("/approve/")));
    }
    assert_eq!(links.len(), 32, "not every write got its question");
    let second = Session::start(&server.url, NOISY).await;
    let said = ask(&second, 32).await;
    assert!(said.contains("counted across its sessions"), "{said}");
    // Another principal's question, asked before the close, is not the closed session's.
    let quiet = Session::start(&server.url, QUIET).await;
    let kept = link_in(&ask(&quiet, 100).await);
    assert_eq!(first.close().await, 204);
    assert_eq!(reqwest::get(&kept).await.unwrap().status(), 200, "{kept}");
    let said = ask(&second, 32).await;
    assert!(
        said.contains("/approve/"),
        "the closed session's scripts still count: {said}"
    );
    // The closed session's links now say the question is gone.
    let link = link_in(&links[0]);
    let page = reqwest::get(&link).await.unwrap();
    assert_eq!(page.status(), 404, "{link}");
}

/// The approval page link in what a call said.
fn link_in(said: &str) -> String {
    let path = said
        .find("/approve/")
        .unwrap_or_else(|| panic!("no link: {said}"));
    let start = said[..path].rfind("http://").unwrap();
    said[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '"' && *c != '\\')
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_event_streams_of_one_caller_cannot_hold_the_lanes() {
    let server = server(&[
        "--max-connections",
        "16",
        "--max-streams-per-caller",
        "2",
        "--stream-idle-s",
        "2",
    ])
    .await;
    let noisy: Vec<Session> =
        futures_util::future::join_all((0..8).map(|_| Session::start(&server.url, NOISY))).await;
    // Every session opens its standalone stream and holds it.
    let mut held = Vec::new();
    let mut refused = Vec::new();
    for session in &noisy {
        let response = session
            .client
            .get(&session.url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("mcp-session-id", &session.id)
            .send()
            .await
            .unwrap();
        match response.status().as_u16() {
            200 => held.push(response),
            status => refused.push((
                status,
                response.headers().get("retry-after").cloned(),
                response.text().await.unwrap(),
            )),
        }
    }
    assert_eq!(held.len(), 2, "{refused:?}");
    let (status, retry_after, said) = &refused[0];
    assert_eq!(*status, 429);
    // A stream's share frees when one of the caller's streams closes: within its idle time.
    assert_eq!(retry_after.as_ref().unwrap(), "2");
    assert!(said.contains("event streams in progress"), "{said}");
    quiet_is_answered(&server.url).await;
    // A stream that carries nothing is closed: its body ends.
    for stream in held {
        let ended = tokio::time::timeout(Duration::from_secs(20), stream.bytes()).await;
        assert!(ended.is_ok(), "an idle stream stayed open");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_of_one_peer_past_its_share_are_told_to_come_back() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = server(&["--max-connections", "8", "--max-connections-per-peer", "2"]).await;
    let address: std::net::SocketAddr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    // Two connections of the noisy peer hold lanes with requests whose headers never end.
    let mut held = Vec::new();
    for _ in 0..2 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((IpAddr::from(NOISY), 0).into()).unwrap();
        let mut stream = socket.connect(address).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\n")
            .await
            .unwrap();
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A third is past its share: /healthz still answers, anything else is told to come back.
    let noisy = client_from(NOISY);
    let health = noisy
        .get(format!("http://{address}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let refused = noisy
        .post(&server.url)
        .header("content-type", "application/json")
        .body(crate::support::INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    quiet_is_answered(&server.url).await;
    for mut stream in held {
        let _ = stream.shutdown().await;
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(1), stream.read_to_end(&mut rest)).await;
    }
}
