//! A minimal Language Server Protocol client over a child's standard input and output
//! (JSON-RPC with `Content-Length` framing): requests answered by id, the server's own
//! requests answered as a plain client would (configuration: nothing; registrations: ok),
//! notifications ignored. Bounded: a frame larger than [`MAX_FRAME`] ends the connection.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{Mutex, oneshot};

use crate::lock::lock;

/// The largest message read from the server.
const MAX_FRAME: usize = 16 * 1024 * 1024;

type Waiting = Arc<std::sync::Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// A connection to a language server.
pub struct Connection {
    input: Mutex<ChildStdin>,
    next_id: AtomicU64,
    waiting: Waiting,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    /// Talks to the server on `input` and `output`.
    pub fn new(input: ChildStdin, output: ChildStdout) -> Arc<Self> {
        let waiting: Waiting = Arc::default();
        Arc::new_cyclic(|weak: &std::sync::Weak<Connection>| {
            let weak = weak.clone();
            let waiting_reader = waiting.clone();
            let reader = tokio::spawn(async move {
                let mut output = BufReader::new(output);
                while let Some(message) = read_frame(&mut output).await {
                    let id = message.get("id").cloned();
                    match (message.get("method"), id) {
                        // The server asks something of the client.
                        (Some(method), Some(id)) => {
                            let result = match method.as_str() {
                                Some("workspace/configuration") => {
                                    let items =
                                        message["params"]["items"].as_array().map_or(1, Vec::len);
                                    Value::Array(vec![Value::Null; items])
                                }
                                _ => Value::Null,
                            };
                            let Some(connection) = weak.upgrade() else {
                                return;
                            };
                            let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
                            if connection.send(&reply).await.is_err() {
                                return;
                            }
                        }
                        (None, Some(id)) => {
                            let waiter =
                                id.as_u64().and_then(|id| lock(&waiting_reader).remove(&id));
                            if let Some(waiter) = waiter {
                                let _ = waiter.send(message);
                            }
                        }
                        _ => {}
                    }
                }
                // The server is gone: every request still waiting fails.
                lock(&waiting_reader).clear();
            });
            Connection {
                input: Mutex::new(input),
                next_id: AtomicU64::new(1),
                waiting,
                reader,
            }
        })
    }

    /// Sends a request and waits for its answer (`None` when the server is gone or answered
    /// with an error).
    pub async fn request(&self, method: &str, params: Value) -> Option<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        lock(&self.waiting).insert(id, sender);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self.send(&message).await.is_err() {
            lock(&self.waiting).remove(&id);
            return None;
        }
        let answer = receiver.await.ok()?;
        answer.get("result").cloned()
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value) -> std::io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    async fn send(&self, message: &Value) -> std::io::Result<()> {
        let body = serde_json::to_vec(message)?;
        let mut input = self.input.lock().await;
        input
            .write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes())
            .await?;
        input.write_all(&body).await?;
        input.flush().await
    }
}

/// Reads one framed message; `None` at the end, on a malformed frame or one too large.
async fn read_frame(output: &mut BufReader<ChildStdout>) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if output.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let length = length.filter(|n| *n <= MAX_FRAME)?;
    let mut body = vec![0; length];
    output.read_exact(&mut body).await.ok()?;
    serde_json::from_slice(&body).ok()
}
