//! Standard input and output as the stdio transport's streams.
//!
//! tokio's `stdin()` and `stdout()` hand every read and write to a blocking thread and back:
//! two thread hand-offs on every message, each a wake-up of a sleeping thread. MCP clients
//! start servers with pipes (Python's `subprocess`) or Unix sockets (Node's `child_process`):
//! those are read and written directly on the async runtime. Anything else (a terminal, a
//! file) goes through tokio's stdio.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::pin::Pin;

use rustix::fs::OFlags;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// The server's input.
pub type Input = Pin<Box<dyn AsyncRead + Send>>;
/// The server's output.
pub type Output = Pin<Box<dyn AsyncWrite + Send>>;

/// Standard input and output, directly when they are pipes or Unix sockets, and the guard
/// that puts back their blocking mode. Call inside the tokio runtime; keep the guard until the
/// session ends. The descriptors are put in non-blocking mode, which their copies share with
/// whoever else holds them (a wrapper that started the server, say): the guard hands them
/// back blocking if they were, when it is dropped.
pub fn streams() -> (Input, Output, Restore) {
    let mut restore = Restore::default();
    let stdin = std::io::stdin();
    restore.note(stdin.as_fd());
    let input = direct(
        stdin.as_fd(),
        |fd| Ok(Box::pin(pipe::Receiver::from_owned_fd(fd)?) as Input),
        |socket| Box::pin(socket) as Input,
    )
    .unwrap_or_else(|| Box::pin(tokio::io::stdin()));
    let stdout = std::io::stdout();
    restore.note(stdout.as_fd());
    let output = direct(
        stdout.as_fd(),
        |fd| Ok(Box::pin(pipe::Sender::from_owned_fd(fd)?) as Output),
        |socket| Box::pin(socket) as Output,
    )
    .unwrap_or_else(|| Box::pin(tokio::io::stdout()));
    (input, output, restore)
}

/// Puts standard input and output back in blocking mode when dropped, if they were blocking
/// when the server started.
#[derive(Default)]
pub struct Restore {
    blocking: Vec<OwnedFd>,
}

impl Restore {
    fn note(&mut self, fd: BorrowedFd<'_>) {
        let blocking = rustix::fs::fcntl_getfl(fd).is_ok_and(|f| !f.contains(OFlags::NONBLOCK));
        if blocking && let Ok(copy) = fd.try_clone_to_owned() {
            self.blocking.push(copy);
        }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        for fd in &self.blocking {
            if let Ok(flags) = rustix::fs::fcntl_getfl(fd) {
                let _ = rustix::fs::fcntl_setfl(fd, flags - OFlags::NONBLOCK);
            }
        }
    }
}

/// A stream on a copy of `fd` if it is a pipe or a Unix socket (a TCP socket, as inetd would
/// hand over, has no Unix address and is left to tokio's stdio); `None` otherwise.
fn direct<T>(
    fd: BorrowedFd<'_>,
    on_pipe: impl FnOnce(OwnedFd) -> io::Result<T>,
    on_socket: impl FnOnce(tokio::net::UnixStream) -> T,
) -> Option<T> {
    let file = File::from(fd.try_clone_to_owned().ok()?);
    let file_type = file.metadata().ok()?.file_type();
    if file_type.is_fifo() {
        return on_pipe(file.into()).ok();
    }
    if !file_type.is_socket() {
        return None;
    }
    let socket = UnixStream::from(OwnedFd::from(file));
    socket.local_addr().ok()?;
    socket.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(socket).ok().map(on_socket)
}
