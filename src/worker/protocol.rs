//! The supervisor-worker protocol: length-prefixed JSON frames over a Unix socket, one
//! execution at a time, with HTTP requests forwarded to the supervisor by number.

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
pub const PROTOCOL_VERSION: u32 = 2;

/// The largest frame either side accepts: a script, a response body or a report.
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// A message too large for one frame: it was not sent, and the connection is intact. The
/// other side would otherwise drop the connection, which kills the worker.
#[derive(Debug, thiserror::Error)]
#[error(
    "the message is {size} bytes framed, over the worker protocol's limit of {MAX_FRAME} bytes"
)]
pub struct FrameTooLarge {
    /// Its size as JSON.
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
    /// The execution ended.
    Done {
        /// What it produced.
        report: Report,
    },
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
    pub async fn send<T: Serialize>(&mut self, message: &T) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(message).map_err(std::io::Error::other)?;
        if bytes.len() > MAX_FRAME {
            return Err(std::io::Error::other(FrameTooLarge { size: bytes.len() }));
        }
        self.framed.send(bytes::Bytes::from(bytes)).await
    }

    /// Receives one message; `None` when the other side closed the socket. Cancel-safe.
    pub async fn recv<T: DeserializeOwned>(&mut self) -> std::io::Result<Option<T>> {
        match self.framed.next().await {
            None => Ok(None),
            Some(frame) => {
                let frame = frame?;
                serde_json::from_slice(&frame)
                    .map(Some)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            }
        }
    }
}
