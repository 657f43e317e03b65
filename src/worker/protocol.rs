//! The supervisor-worker protocol: length-prefixed frames over a Unix socket, one execution
//! at a time, with HTTP requests forwarded to the supervisor by number.
//!
//! A frame is a JSON header and, for a message that carries a body (a response handed to the
//! script, a request it sends), the body after it as raw bytes: a body of megabytes is
//! copied, never JSON-escaped and unescaped (which cost 10 ms for 2 MB each way), and a
//! body that is not text (a file) crosses byte for byte. A response says in its header
//! which it carries: `bytes` present (empty) for bytes, else UTF-8 text.
//!
//! ```text
//! [u32 frame length][u32 header length][header: JSON][body: bytes, to the frame's end]
//! ```

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::net::UnixStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use crate::egress::{ScriptRequest, ScriptResponse};
use crate::sandbox::{ExecLimits, NetworkError, Report};
use crate::sdk::SdkCall;

/// Bumped on any incompatible change; a worker of another version is refused at start.
pub const PROTOCOL_VERSION: u32 = 4;

/// The largest frame either side accepts: a script, a response body or a report.
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// The bytes before a frame's header that give the header's length.
const HEADER_LENGTH: usize = 4;

/// A message too large for one frame: it was not sent, and the connection is intact. The
/// other side would otherwise drop the connection, which kills the worker.
#[derive(Debug, thiserror::Error)]
#[error(
    "the message is {size} bytes framed, over the worker protocol's limit of {MAX_FRAME} bytes"
)]
pub struct FrameTooLarge {
    /// Its size framed.
    pub size: usize,
}

/// The [`FrameTooLarge`] inside an I/O error from [`Channel::send`], if that was the cause.
pub fn too_large(error: &std::io::Error) -> Option<&FrameTooLarge> {
    error.get_ref()?.downcast_ref::<FrameTooLarge>()
}

/// What the supervisor sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Run this code.
    Run {
        /// The model's TypeScript.
        code: String,
        /// Its limits (the memory limit is the worker's own).
        limits: ExecLimits,
        /// Time left until the deadline, counted from when the worker receives this.
        remaining: Duration,
    },
    /// The answer to a forwarded HTTP request or SDK call.
    HttpReply {
        /// The number the worker gave the request.
        request_id: u64,
        /// The response, or why there is none.
        result: Result<ScriptResponse, NetworkError>,
    },
    /// Stop the current execution.
    Cancel,
    /// The execution's deadline changed: running with this much time left, or held (`None`)
    /// while a human decides about one of its requests.
    Deadline {
        /// Time left, counted from when the worker receives this; `None` while held.
        running: Option<Duration>,
    },
}

/// What a worker sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// Sent once, when the worker is ready.
    Hello {
        /// The worker's [`PROTOCOL_VERSION`].
        version: u32,
    },
    /// The worker took the run; a worker that dies before saying so ran none of the code,
    /// and the call may go to another worker.
    Started,
    /// The script asked for an HTTP request; the supervisor checks and sends it.
    Http {
        /// A number to match the reply.
        request_id: u64,
        /// The request as the script made it.
        request: ScriptRequest,
    },
    /// The script made an SDK call; the supervisor checks it against the spec and sends it.
    Call {
        /// A number to match the reply.
        request_id: u64,
        /// The call as the script made it.
        call: SdkCall,
    },
    /// The script's latest console line, for a long run's progress (one a second at most).
    Console {
        /// The line, cut to `egress::CONSOLE_CHARS` characters (the supervisor cuts it again).
        line: String,
    },
    /// The execution ended.
    Done {
        /// What it produced.
        report: Report,
    },
}

/// A message of the protocol, and the body it carries outside its JSON header.
pub trait Message: Serialize + DeserializeOwned {
    /// Takes the body out to be sent raw, leaving an empty one in its place.
    fn take_body(&mut self) -> Option<Vec<u8>>;

    /// Puts a received body back; fails for a message that has no place for one.
    fn put_body(&mut self, body: Vec<u8>) -> Result<(), &'static str>;
}

impl Message for ToWorker {
    fn take_body(&mut self) -> Option<Vec<u8>> {
        match self {
            ToWorker::HttpReply {
                result: Ok(response),
                ..
            } => Some(match &mut response.bytes {
                Some(bytes) => std::mem::take(&mut bytes.0),
                None => std::mem::take(&mut response.body).into_bytes(),
            }),
            _ => None,
        }
    }

    fn put_body(&mut self, body: Vec<u8>) -> Result<(), &'static str> {
        match self {
            ToWorker::HttpReply {
                result: Ok(response),
                ..
            } => {
                match &mut response.bytes {
                    Some(bytes) => bytes.0 = body,
                    None => {
                        response.body =
                            String::from_utf8(body).map_err(|_| "a text body that is not UTF-8")?
                    }
                }
                Ok(())
            }
            _ => Err("a body after a message that carries none"),
        }
    }
}

impl Message for FromWorker {
    /// A request's body is taken out only when it has one; an empty one stays in the header,
    /// so that "no body" and "an empty body" stay apart.
    fn take_body(&mut self) -> Option<Vec<u8>> {
        match self {
            FromWorker::Http { request, .. } => {
                request.body.as_mut().map(|b| std::mem::take(&mut b.0))
            }
            _ => None,
        }
    }

    fn put_body(&mut self, body: Vec<u8>) -> Result<(), &'static str> {
        match self {
            FromWorker::Http { request, .. } if request.body.is_some() => {
                request.body = Some(body.into());
                Ok(())
            }
            _ => Err("a body after a message that carries none"),
        }
    }
}

/// One end of the socket, framed.
pub struct Channel {
    framed: Framed<UnixStream, LengthDelimitedCodec>,
}

impl Channel {
    /// Frames `stream`.
    pub fn new(stream: UnixStream) -> Self {
        let codec = LengthDelimitedCodec::builder()
            .max_frame_length(MAX_FRAME)
            .new_codec();
        Self {
            framed: Framed::new(stream, codec),
        }
    }

    /// Sends one message; one over [`MAX_FRAME`] is not sent and fails with
    /// [`FrameTooLarge`] (see [`too_large`]), leaving the connection usable.
    pub async fn send<T: Message>(&mut self, mut message: T) -> std::io::Result<()> {
        let body = message.take_body().unwrap_or_default();
        let header = serde_json::to_vec(&message).map_err(std::io::Error::other)?;
        let size = HEADER_LENGTH + header.len() + body.len();
        if size > MAX_FRAME {
            return Err(std::io::Error::other(FrameTooLarge { size }));
        }
        let mut frame = bytes::BytesMut::with_capacity(size);
        frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
        frame.extend_from_slice(&header);
        frame.extend_from_slice(&body);
        self.framed.send(frame.freeze()).await
    }

    /// Receives one message; `None` when the other side closed the socket. Cancel-safe.
    pub async fn recv<T: Message>(&mut self) -> std::io::Result<Option<T>> {
        let Some(frame) = self.framed.next().await else {
            return Ok(None);
        };
        decode(&frame?).map(Some)
    }
}

/// A frame's message, with its body put back.
fn decode<T: Message>(frame: &[u8]) -> std::io::Result<T> {
    let invalid = |e: &dyn std::fmt::Display| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
    };
    let (length, rest) = frame
        .split_first_chunk::<HEADER_LENGTH>()
        .ok_or_else(|| invalid(&"a frame shorter than its header length"))?;
    let length = u32::from_be_bytes(*length) as usize;
    if length > rest.len() {
        return Err(invalid(&"a header longer than its frame"));
    }
    let (header, body) = rest.split_at(length);
    let mut message: T = serde_json::from_slice(header).map_err(|e| invalid(&e))?;
    if !body.is_empty() {
        message.put_body(body.to_vec()).map_err(|e| invalid(&e))?;
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Option<&[u8]>) -> ScriptRequest {
        let mut request: ScriptRequest = serde_json::from_value(serde_json::json!({
            "method": "POST", "url": "/x",
        }))
        .unwrap();
        request.body = body.map(|b| b.to_vec().into());
        request
    }

    fn pair() -> (Channel, Channel) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let open = |s: std::os::unix::net::UnixStream| {
            s.set_nonblocking(true).unwrap();
            Channel::new(UnixStream::from_std(s).unwrap())
        };
        (open(a), open(b))
    }

    #[tokio::test]
    async fn a_body_crosses_raw_and_comes_back_whole() {
        let (mut supervisor, mut worker) = pair();
        let body = "{\"quote\":\"\\\"\",\"line\":\"a\\nb\",\"é\":\"😀\"}".repeat(1_000);
        let reply = ToWorker::HttpReply {
            request_id: 7,
            result: Ok(ScriptResponse::ok_for_tests(&body)),
        };
        supervisor.send(reply).await.unwrap();
        let frame = worker.framed.next().await.unwrap().unwrap();
        // Raw: the body is the frame's tail, byte for byte, not escaped in the header.
        assert!(frame.ends_with(body.as_bytes()));
        assert!(
            frame.len() < body.len() + 300,
            "{} bytes framed",
            frame.len()
        );
        let ToWorker::HttpReply {
            request_id,
            result: Ok(got),
        } = decode::<ToWorker>(&frame).unwrap()
        else {
            panic!("not a reply");
        };
        assert_eq!((request_id, got.body, got.status), (7, body, 200));
    }

    #[tokio::test]
    async fn no_body_and_an_empty_body_stay_apart() {
        let (mut worker, mut supervisor) = pair();
        let bytes: Vec<u8> = (0..=255).rev().collect();
        for body in [
            None,
            Some(&b""[..]),
            Some(&b"x=1&y=2"[..]),
            Some(&bytes[..]),
        ] {
            let message = FromWorker::Http {
                request_id: 1,
                request: request(body),
            };
            worker.send(message).await.unwrap();
            let Some(FromWorker::Http { request, .. }) = supervisor.recv().await.unwrap() else {
                panic!("not a request");
            };
            assert_eq!(request.body.as_deref().map(Vec::as_slice), body);
        }
    }

    /// A body that is not text crosses byte for byte, and comes back as bytes.
    #[tokio::test]
    async fn bytes_cross_raw_and_stay_bytes() {
        let (mut supervisor, mut worker) = pair();
        let png: Vec<u8> = [&b"\x89PNG\r\n\x1a\n"[..], &[0xff, 0x00, 0x80, 0xc3]].concat();
        let response = ScriptResponse::ok_for_tests("").with_body(png.clone());
        assert!(response.body.is_empty() && response.bytes.is_some());
        let reply = ToWorker::HttpReply {
            request_id: 3,
            result: Ok(response),
        };
        supervisor.send(reply).await.unwrap();
        let Some(ToWorker::HttpReply {
            result: Ok(got), ..
        }) = worker.recv().await.unwrap()
        else {
            panic!("not a reply");
        };
        assert_eq!(got.bytes.map(|b| b.0), Some(png));
        assert!(got.body.is_empty());
    }

    #[test]
    fn a_malformed_frame_is_refused_with_a_reason() {
        let header = serde_json::to_vec(&FromWorker::Started).unwrap();
        let framed = |tail: &[u8]| {
            let mut frame = (header.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&header);
            frame.extend_from_slice(tail);
            frame
        };
        let refused = |frame: &[u8]| decode::<FromWorker>(frame).unwrap_err().to_string();
        assert!(refused(&framed(b"tail")).contains("carries none"));
        assert!(refused(&[0, 0]).contains("shorter than its header length"));
        assert!(refused(&[0, 0, 1, 0, b'{']).contains("longer than its frame"));
        let mut reply = serde_json::to_vec(&ToWorker::HttpReply {
            request_id: 1,
            result: Ok(ScriptResponse::ok_for_tests("")),
        })
        .unwrap();
        let mut frame = (reply.len() as u32).to_be_bytes().to_vec();
        frame.append(&mut reply);
        // A text body (the header has no `bytes`) that is not UTF-8.
        frame.extend_from_slice(&[0xff, 0xfe]);
        assert!(
            decode::<ToWorker>(&frame)
                .unwrap_err()
                .to_string()
                .contains("not UTF-8")
        );
    }

    #[tokio::test]
    async fn a_frame_over_the_cap_is_not_sent_and_the_channel_lives_on() {
        let (mut supervisor, mut worker) = pair();
        let reply = ToWorker::HttpReply {
            request_id: 1,
            result: Ok(ScriptResponse::ok_for_tests(&"x".repeat(MAX_FRAME))),
        };
        let error = supervisor.send(reply).await.unwrap_err();
        assert!(too_large(&error).is_some_and(|e| e.size > MAX_FRAME));
        supervisor.send(ToWorker::Cancel).await.unwrap();
        assert!(matches!(
            worker.recv().await.unwrap(),
            Some(ToWorker::Cancel)
        ));
    }
}
