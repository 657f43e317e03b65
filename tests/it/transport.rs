//! The HTTP transport under slow and many clients (issue 21): sockets that send nothing or
//! send slowly are closed at the header deadline and never keep `/healthz` from answering;
//! connections past the cap get 503 with `Retry-After` while `/healthz` answers; sessions
//! past the cap push out the one idle the longest, or get 503 when all are busy; the
//! server's memory stays within a stated budget through it all.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Listening, listening};

async fn server(extra: &[&str]) -> (Listening, String) {
    let mut command = crate::support::sdkbox_async();
    command
        .kill_on_drop(true)
        .args(["serve", "--demo", "--http", "127.0.0.1:0"])
        .args(extra);
    let server = listening(command).await;
    let address = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    (server, address)
}

/// `GET /healthz` on a new connection: its status and how long it took.
async fn health(address: &str) -> (u16, Duration) {
    let started = Instant::now();
    let response = reqwest::Client::new()
        .get(format!("http://{address}/healthz"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), started.elapsed())
}

/// The server's resident memory, in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// Whether the server has closed `socket` (read returns end of file or an error).
async fn closed(socket: &mut TcpStream) -> bool {
    let mut buffer = [0u8; 256];
    matches!(
        tokio::time::timeout(Duration::from_millis(50), socket.read(&mut buffer)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_slow_sockets_are_closed_and_healthz_answers_throughout() {
    let (server, address) = server(&[
        "--max-connections",
        "8",
        "--max-pending",
        "64",
        "--header-timeout-ms",
        "1000",
    ])
    .await;
    let pid = server.child.id().unwrap();
    let before = rss_mib(pid);
    // Five times the pending cap of sockets that never send a byte.
    let mut silent = Vec::new();
    for _ in 0..320 {
        silent.push(TcpStream::connect(&address).await.unwrap());
    }
    let (status, took) = health(&address).await;
    assert_eq!(status, 200);
    assert!(took < Duration::from_secs(5), "healthz took {took:?}");
    // Slowloris: a header line that never ends, a byte at a time.
    let mut slow = TcpStream::connect(&address).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if slow.write_all(b"x").await.is_err() {
            break;
        }
    }
    // Past the header deadline every one of them is closed.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut open = 0;
    for socket in &mut silent {
        open += usize::from(!closed(socket).await);
    }
    assert_eq!(open, 0, "silent sockets still open");
    assert!(
        closed(&mut slow).await,
        "the slow sender is still connected"
    );
    assert_eq!(health(&address).await.0, 200);
    let growth = rss_mib(pid).saturating_sub(before);
    eprintln!("silent flood: RSS {before} MiB before, grew {growth} MiB");
    assert!(growth < 64, "RSS grew {growth} MiB");
}

/// An MCP client session over raw HTTP: `initialize`, then requests with its session id.
struct Session {
    url: String,
    id: Option<String>,
    /// One client, so one kept-alive connection, as a real client holds.
    client: reqwest::Client,
}

impl Session {
    async fn open(url: &str) -> reqwest::Response {
        Self::open_with(&reqwest::Client::new(), url).await
    }

    async fn open_with(client: &reqwest::Client, url: &str) -> reqwest::Response {
        client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(crate::support::INITIALIZE)
            .send()
            .await
            .unwrap()
    }

    async fn start(url: &str) -> Self {
        let client = reqwest::Client::new();
        let response = Self::open_with(&client, url).await;
        assert_eq!(response.status(), 200);
        let id = response
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        // Read whole, so that the connection goes back to the client's pool: one connection
        // a session, however slowly the server closes an abandoned one.
        let _ = response.bytes().await;
        let session = Self {
            url: url.to_owned(),
            id,
            client,
        };
        session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        session
    }

    async fn post(&self, message: serde_json::Value) -> reqwest::Response {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(id) = &self.id {
            request = request.header("mcp-session-id", id);
        }
        request.body(message.to_string()).send().await.unwrap()
    }

    async fn execute(&self, code: &str) -> String {
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": code}}});
        let response = self.post(call).await;
        response.text().await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_past_the_cap_push_out_the_idle_or_wait_when_all_are_busy() {
    let (server, _) = server(&["--max-sessions", "3"]).await;
    let pid = server.child.id().unwrap();
    let before = rss_mib(pid);
    // A flood of sessions: each new one closes the one idle the longest.
    let mut last = None;
    for _ in 0..300 {
        last = Some(Session::start(&server.url).await);
    }
    let last = last.unwrap();
    assert!(last.execute("return 1").await.contains("\"result\":1"));
    let growth = rss_mib(pid).saturating_sub(before);
    eprintln!("session flood: RSS {before} MiB before, grew {growth} MiB");
    assert!(growth < 128, "RSS grew {growth} MiB");
    // Three sessions, each busy with a call: a fourth is told to come back.
    let busy: Vec<Session> =
        futures_util::future::join_all((0..3).map(|_| Session::start(&server.url))).await;
    let calls = futures_util::future::join_all(
        busy.iter()
            .map(|s| s.execute("await new Promise((r) => setTimeout(r, 6000)); return 'done';")),
    );
    // Asked well inside the calls (a loaded machine may take a second to start them).
    let refused = async {
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        Session::open(&server.url).await
    };
    let (done, refused) = tokio::join!(calls, refused);
    assert!(done.iter().all(|text| text.contains("done")), "{done:?}");
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert!(done.iter().all(|text| text.contains("done")), "{done:?}");
    // Once they are idle again, a new session pushes one out.
    assert_eq!(Session::open(&server.url).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_get_retry_after_and_healthz_still_answers() {
    let (server, address) = server(&["--max-connections", "2"]).await;
    let sessions: Vec<Session> =
        futures_util::future::join_all((0..2).map(|_| Session::start(&server.url))).await;
    // Two connections held by calls that take a while.
    let calls = futures_util::future::join_all(
        sessions
            .iter()
            .map(|s| s.execute("await new Promise((r) => setTimeout(r, 2500)); return 'done';")),
    );
    let probe = async {
        tokio::time::sleep(Duration::from_millis(800)).await;
        let refused = reqwest::Client::new()
            .post(&server.url)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        (
            refused.status().as_u16(),
            refused.headers().get("retry-after").cloned(),
            health(&address).await.0,
        )
    };
    let (done, (status, retry_after, healthz)) = tokio::join!(calls, probe);
    assert_eq!(status, 503);
    assert_eq!(retry_after.unwrap(), "1");
    assert_eq!(healthz, 200);
    assert!(done.iter().all(|text| text.contains("done")), "{done:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_hostile_searches_leaves_memory_flat() {
    let (server, address) = server(&[]).await;
    let pid = server.child.id().unwrap();
    let session = Session::start(&server.url).await;
    let before = rss_mib(pid);
    // The largest query accepted, every word unknown (each would build fuzzy automata), and
    // one far over the limit; two hundred of each, fifty at a time.
    let words: Vec<String> = (0..32).map(|n| format!("qz{n}wvxkjm")).collect();
    let largest = words.join(" ");
    let oversized = "refund ".repeat(800);
    let ids = std::sync::atomic::AtomicU64::new(100);
    let search = |query: String| {
        let (session, id) = (
            &session,
            ids.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
        );
        async move {
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "search_docs", "arguments": {"query": query}}});
            session.post(call).await.text().await.unwrap()
        }
    };
    for _ in 0..4 {
        let batch = (0..50).map(|n| match n % 2 {
            0 => search(largest.clone()),
            _ => search(oversized.clone()),
        });
        let answers = futures_util::future::join_all(batch).await;
        assert!(
            answers.iter().any(|a| a.contains("at most 400")),
            "{}",
            answers[1]
        );
        assert_eq!(health(&address).await.0, 200);
    }
    let growth = rss_mib(pid).saturating_sub(before);
    eprintln!("search flood: RSS {before} MiB before, grew {growth} MiB");
    assert!(growth < 64, "RSS grew {growth} MiB");
}

/// Four lanes, and short deadlines for headers and bodies.
const TIGHT: [&str; 6] = [
    "--max-connections",
    "4",
    "--header-timeout-ms",
    "1000",
    "--body-timeout-ms",
    "1500",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_are_cut_off_at_the_body_deadline() {
    let (server, address) = server(&TIGHT).await;
    // Every lane taken by a request whose headers are in and whose body comes a byte at a
    // time.
    slow_bodies_hold_then_lose_the_lanes(
        &server,
        &address,
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n\
          accept: application/json, text/event-stream\r\ncontent-length: 1000000\r\n\r\n{",
    )
    .await;
}

/// Four requests with `head` and then a body a byte at a time take every lane (a new session
/// gets 503); past the body deadline each is told why (408) and closed, and a real client
/// gets in.
async fn slow_bodies_hold_then_lose_the_lanes(server: &Listening, address: &str, head: &[u8]) {
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut socket = TcpStream::connect(address).await.unwrap();
        socket.write_all(head).await.unwrap();
        slow.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        Session::open(&server.url).await.status(),
        503,
        "the lanes should be full"
    );
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        for socket in &mut slow {
            let _ = socket.write_all(b" ").await;
        }
    }
    for socket in &mut slow {
        let mut answer = String::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(2), socket.read_to_string(&mut answer)).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    }
    assert_eq!(Session::open(&server.url).await.status(), 200);
}

/// The approval page on the public URL (the MCP listener itself) bounds its forms like MCP
/// requests: bodies that come a byte at a time, without a token or sign-in, cannot hold the
/// lanes past the body deadline, and a body larger than a form is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_forms_to_the_public_approval_page_are_cut_off_too() {
    let port = crate::signin::free_port();
    let address = format!("127.0.0.1:{port}");
    let mut command = crate::support::sdkbox_async();
    command.kill_on_drop(true).args([
        "serve",
        "--demo",
        "--http",
        &address,
        "--approval-page",
        &format!("http://{address}"),
    ]);
    command.args(TIGHT);
    let server = listening(command).await;
    slow_bodies_hold_then_lose_the_lanes(
        &server,
        &address,
        b"POST /approve/x HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: \
          application/x-www-form-urlencoded\r\ncontent-length: 10000\r\n\r\nt",
    )
    .await;
    let large = reqwest::Client::new()
        .post(format!("http://{address}/approve/x"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(vec![b'a'; 100_000])
        .send()
        .await
        .unwrap();
    assert_eq!(large.status(), 413);
}
