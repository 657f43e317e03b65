//! A TypeScript 7 compiler a server keeps (it keeps a few, see `mod.rs`), in LSP mode (`tsc --lsp --stdio`), preloaded
//! with the SDK's declarations: each check opens the script as an in-memory document, pulls
//! its diagnostics and closes it, so checks run concurrently in one process. The compiler is
//! started again when it has died, and killed and restarted when a check overruns its
//! deadline; a check that cannot finish says so and never holds the run.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use super::lsp::Connection;

/// One diagnostic the compiler reported, positioned in the checked document (0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// TypeScript's code (`2551`).
    pub code: u32,
    /// Its message, with the compiler's "did you mean".
    pub message: String,
    /// 0-based line and character where it starts.
    pub line: u32,
    /// 0-based character (UTF-16 units, as LSP counts them).
    pub character: u32,
}

/// Why a script was not checked.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Unchecked(pub String);

/// The compiler as it runs now.
struct Live {
    child: Child,
    connection: Arc<Connection>,
}

/// The server's checker.
pub struct Checker {
    tsc: PathBuf,
    dir: tempfile::TempDir,
    live: Mutex<Option<Live>>,
    deadline: Duration,
    documents: AtomicU64,
    /// One check at a time: documents open together are one program, and could read each
    /// other's types.
    one_at_a_time: Mutex<()>,
}

impl Drop for Checker {
    /// Makes the directory removable again, so that it goes with the checker.
    fn drop(&mut self) {
        let _ = read_only(self.dir.path(), 0o755);
    }
}

/// The compiler settings: strict, no DOM, no Node, only the declarations.
/// The checked documents match `include`, so these options are theirs (an open file outside
/// it would get a default project: the DOM, and module resolution that reads files).
const TSCONFIG: &str = r#"{"compilerOptions":{"strict":true,"noEmit":true,"target":"es2022","module":"esnext","lib":["es2022"],"types":[],"skipLibCheck":true,"noResolve":true},"include":["sdk.d.ts","check_*.ts"]}"#;

impl Checker {
    /// Writes the declarations beside their settings in a directory of their own and starts
    /// the compiler; fails with the reason when it does not start or answer.
    pub async fn start(
        tsc: &Path,
        declarations: &str,
        deadline: Duration,
    ) -> Result<Self, Unchecked> {
        let dir = crate::worker::scratch::create(crate::worker::scratch::CHECKER)
            .map_err(|e| Unchecked(format!("cannot make the checker's directory: {e}")))?;
        for (name, text) in [("tsconfig.json", TSCONFIG), ("sdk.d.ts", declarations)] {
            let path = dir.path().join(name);
            std::fs::write(&path, text)
                .map_err(|e| Unchecked(format!("cannot write {}: {e}", path.display())))?;
            read_only(&path, 0o444)?;
        }
        // The compiler reads its files; it writes nothing.
        read_only(dir.path(), 0o555)?;
        let checker = Self {
            tsc: tsc.to_owned(),
            dir,
            live: Mutex::new(None),
            deadline,
            documents: AtomicU64::new(0),
            one_at_a_time: Mutex::new(()),
        };
        // The first check loads the declarations (tens to hundreds of milliseconds): done now.
        let warm = tokio::time::timeout(
            Duration::from_secs(60),
            checker.diagnostics_within("export {};\n", Duration::from_secs(60)),
        )
        .await;
        match warm {
            Ok(Ok(_)) => Ok(checker),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(Unchecked(
                "the compiler did not load the SDK in 60 s".into(),
            )),
        }
    }

    /// The diagnostics of `text` (errors and warnings, not hints), within the deadline.
    pub async fn diagnostics(&self, text: &str) -> Result<Vec<Diagnostic>, Unchecked> {
        self.diagnostics_within(text, self.deadline).await
    }

    /// The diagnostics of `text`, within `deadline`.
    pub async fn diagnostics_within(
        &self,
        text: &str,
        deadline: Duration,
    ) -> Result<Vec<Diagnostic>, Unchecked> {
        let _turn = self.one_at_a_time.lock().await;
        let connection = self.connection().await?;
        let n = self.documents.fetch_add(1, Ordering::Relaxed);
        // Not guessable either: no document names another.
        let salt = crate::approval::random_hex(8).unwrap_or_default();
        let uri = url::Url::from_file_path(self.dir.path().join(format!("check_{n}_{salt}.ts")))
            .map_err(|()| Unchecked("the checker's directory has no file URL".into()))?
            .to_string();
        let checked = tokio::time::timeout(deadline, async {
            connection
                .notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": uri, "languageId": "typescript", "version": 1, "text": text}}),
                )
                .await
                .ok()?;
            let answer = connection
                .request("textDocument/diagnostic", json!({"textDocument": {"uri": uri}}))
                .await;
            let _ = connection
                .notify("textDocument/didClose", json!({"textDocument": {"uri": uri}}))
                .await;
            answer
        })
        .await;
        match checked {
            Ok(Some(answer)) => Ok(read_items(&answer)),
            Ok(None) => {
                self.forget(&connection).await;
                Err(Unchecked("the compiler stopped during the check".into()))
            }
            Err(_) => {
                // A compiler that overran may be stuck: the next check gets a new one.
                self.forget(&connection).await;
                Err(Unchecked(format!(
                    "the type check did not finish in {} ms",
                    deadline.as_millis()
                )))
            }
        }
    }

    /// The running compiler's connection, starting one when there is none or it died.
    async fn connection(&self) -> Result<Arc<Connection>, Unchecked> {
        let mut live = self.live.lock().await;
        if let Some(current) = live.as_mut() {
            match current.child.try_wait() {
                Ok(None) => return Ok(current.connection.clone()),
                _ => tracing::warn!("the type checker died; starting another"),
            }
        }
        let started = self.spawn().await?;
        let connection = started.connection.clone();
        *live = Some(started);
        Ok(connection)
    }

    /// Drops the compiler behind `connection` (killed with its process), if it is still the
    /// current one.
    async fn forget(&self, connection: &Arc<Connection>) {
        let mut live = self.live.lock().await;
        if live
            .as_ref()
            .is_some_and(|l| Arc::ptr_eq(&l.connection, connection))
            && let Some(mut old) = live.take()
        {
            let _ = old.child.start_kill();
        }
    }

    async fn spawn(&self) -> Result<Live, Unchecked> {
        let mut command = Command::new(&self.tsc);
        command
            .args(["--lsp", "--stdio"])
            .current_dir(self.dir.path())
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        harden(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| Unchecked(format!("cannot start {}: {e}", self.tsc.display())))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(Unchecked(
                "the compiler has no standard input or output".into(),
            ));
        };
        let connection = Connection::new(input, output);
        let root = url::Url::from_directory_path(self.dir.path())
            .map_err(|()| Unchecked("the checker's directory has no file URL".into()))?;
        let initialize = json!({
            "processId": std::process::id(),
            "rootUri": root.as_str(),
            "workspaceFolders": [{"uri": root.as_str(), "name": "sdkbox"}],
            "capabilities": {"textDocument": {"diagnostic": {"dynamicRegistration": false}}},
        });
        let answered = tokio::time::timeout(
            Duration::from_secs(30),
            connection.request("initialize", initialize),
        )
        .await;
        if !matches!(answered, Ok(Some(_))) {
            let _ = child.start_kill();
            return Err(Unchecked(format!(
                "{} did not answer as a TypeScript 7 language server",
                self.tsc.display()
            )));
        }
        let _ = connection.notify("initialized", json!({})).await;
        Ok(Live { child, connection })
    }
}

fn read_only(path: &Path, mode: u32) -> Result<(), Unchecked> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| Unchecked(format!("cannot protect {}: {e}", path.display())))
}

/// The address space the compiler may take: its runtime reserves about 600 MiB at start; it
/// then holds 40-110 MiB with the largest SDKs.
const MAX_ADDRESS_SPACE: u64 = 2 << 30;

/// The compiler's bounds, set in the child before it runs: its address space capped, and on
/// Linux a user and network namespace of its own where the kernel allows (no network; files
/// it did not create are read as an unmapped user's, so only world-readable ones).
fn harden(command: &mut Command) {
    #[allow(
        unsafe_code,
        reason = "pre_exec runs in the forked child; setrlimit and unshare are async-signal-safe system calls"
    )]
    // SAFETY: the closure makes two system calls and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            use rustix::process::{Resource, Rlimit, setrlimit};
            let cap = Rlimit {
                current: Some(MAX_ADDRESS_SPACE),
                maximum: Some(MAX_ADDRESS_SPACE),
            };
            setrlimit(Resource::As, cap).map_err(std::io::Error::from)?;
            #[cfg(target_os = "linux")]
            {
                use rustix::thread::UnshareFlags;
                // Refused where user namespaces are off: the cap still applies.
                let _ =
                    rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNET);
            }
            Ok(())
        });
    }
}

/// The errors and warnings of a `textDocument/diagnostic` answer.
fn read_items(answer: &Value) -> Vec<Diagnostic> {
    let Some(items) = answer["items"].as_array() else {
        return Vec::new();
    };
    items
        .iter()
        .filter(|item| item["severity"].as_u64().unwrap_or(1) <= 2)
        .map(|item| Diagnostic {
            code: item["code"].as_u64().unwrap_or(0) as u32,
            message: item["message"].as_str().unwrap_or_default().to_owned(),
            line: item["range"]["start"]["line"].as_u64().unwrap_or(0) as u32,
            character: item["range"]["start"]["character"].as_u64().unwrap_or(0) as u32,
        })
        .collect()
}
