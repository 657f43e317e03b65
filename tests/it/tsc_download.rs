//! The type check on a fresh machine, as the README's first command meets it: no `--tsc`, no
//! TypeScript on `PATH`, an empty cache. The server downloads the pinned compiler package
//! from the npm registry (here a loopback registry serving the real tarball, which
//! scripts/test-deps packs byte for byte from npm), checks its digest, unpacks it into the
//! cache and checks scripts with it; until then scripts run unchecked, with a note. A
//! tampered package is refused and the check stays off, loudly.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};

use crate::support::{RawServer, requirement_met, serve_on_loopback};

/// The tarball's path on the registry, as npm lays it out.
const TARBALL_PATH: &str = "/@typescript/typescript-linux-x64/-/typescript-linux-x64-7.0.2.tgz";

/// The real package, as scripts/test-deps packs it (Linux x86-64 only).
fn pinned_tarball() -> Option<Vec<u8>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tools/typescript/typescript-typescript-linux-x64-7.0.2.tgz");
    let here = std::env::consts::OS == "linux" && std::env::consts::ARCH == "x86_64";
    requirement_met(
        !here || path.exists(),
        "the packed compiler is missing (scripts/test-deps)",
    )
    .then(|| std::fs::read(&path).ok())
    .flatten()
}

/// A registry serving `tarball` at the pinned path once `open` has a permit, counting requests.
struct Registry {
    url: String,
    requests: Arc<AtomicUsize>,
    open: Arc<tokio::sync::Semaphore>,
}

impl Registry {
    async fn serve(tarball: Vec<u8>, open: bool) -> Self {
        let requests = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(tokio::sync::Semaphore::new(if open { 1000 } else { 0 }));
        let (counted, held) = (requests.clone(), gate.clone());
        let tarball = Arc::new(tarball);
        let app = Router::new().route(
            TARBALL_PATH,
            get(move || {
                let (counted, held, tarball) = (counted.clone(), held.clone(), tarball.clone());
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _permit = held.acquire().await.unwrap();
                    tarball.as_ref().clone()
                }
            }),
        );
        let base = serve_on_loopback(app).await;
        Self {
            url: base
                .as_str()
                .trim_end_matches("/v1")
                .trim_end_matches('/')
                .to_owned(),
            requests,
            open: gate,
        }
    }
}

/// `sdkbox serve --demo` as a fresh machine runs it: the type check left at its default
/// (block), no compiler on `PATH`, `cache` as its cache, `registry` as npm's.
async fn fresh_server(cache: &Path, registry: &str) -> RawServer {
    let path = std::env::var("PATH").unwrap_or_default();
    let without_tsc =
        std::env::join_paths(std::env::split_paths(&path).filter(|dir| !dir.join("tsc").exists()))
            .unwrap();
    RawServer::start_with(
        &["serve", "--demo"],
        &[
            (crate::support::TYPECHECK, "block"),
            ("SDKBOX_CACHE_DIR", cache.to_str().unwrap()),
            ("npm_config_registry", registry),
            ("PATH", without_tsc.to_str().unwrap()),
        ],
    )
    .await
}

/// Runs `code` through `execute`; returns the structured outcome.
async fn execute(server: &mut RawServer, id: i64, code: &str) -> Value {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": code}}});
    server.send(&call.to_string()).await;
    server.response(id).await["result"]["structuredContent"].clone()
}

/// A misspelled method: stopped by the check, or run (and failed by the SDK) without it.
const MISSPELLED: &str = "return await api.customers.lst({ limit: 2 });";

fn compiler_in(cache: &Path) -> PathBuf {
    cache.join("typescript/7.0.2-linux-x64/tsc")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pinned_compiler_is_downloaded_once_checked_and_used() {
    let Some(tarball) = pinned_tarball() else {
        return;
    };
    let registry = Registry::serve(tarball, false).await;
    let cache = tempfile::tempdir().unwrap();
    let mut server = fresh_server(cache.path(), &registry.url).await;

    // While the download is held, scripts run unchecked and say so.
    let outcome = execute(&mut server, 2, "return 1 + 1;").await;
    assert_eq!(outcome["ok"], true, "{outcome}");
    assert!(
        outcome["warnings"]
            .to_string()
            .contains("still downloading"),
        "{outcome}"
    );
    registry.open.add_permits(1000);

    // Then the check is on: the misspelling is stopped before anything is sent.
    let mut stopped = Value::Null;
    for id in 3..200 {
        let outcome = execute(&mut server, id, MISSPELLED).await;
        if outcome["error"]["kind"] == "type" {
            stopped = outcome;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        stopped["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Did you mean 'list'?")),
        "the downloaded compiler never checked: {stopped}"
    );
    assert_eq!(stopped["http"], json!([]), "{stopped}");
    assert!(compiler_in(cache.path()).is_file());
    assert_eq!(registry.requests.load(Ordering::SeqCst), 1);
    // Nothing half-written is left beside it.
    let leftovers: Vec<_> = std::fs::read_dir(cache.path().join("typescript"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    drop(server);

    // The next server uses the cache at once, and asks the registry nothing.
    let mut again = fresh_server(cache.path(), &registry.url).await;
    let outcome = execute(&mut again, 2, MISSPELLED).await;
    assert_eq!(outcome["error"]["kind"], "type", "{outcome}");
    assert_eq!(registry.requests.load(Ordering::SeqCst), 1);

    // `sdkbox fetch-tsc --into DIR`, as the container image gets it: a compiler that runs.
    let into = tempfile::tempdir().unwrap();
    let fetched = fetch_tsc(into.path(), &registry.url).await;
    assert!(fetched.status.success(), "{fetched:?}");
    let tsc = String::from_utf8(fetched.stdout).unwrap();
    let version = std::process::Command::new(tsc.trim())
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        "Version 7.0.2"
    );
}

/// `sdkbox fetch-tsc --into dir` against `registry`.
async fn fetch_tsc(dir: &Path, registry: &str) -> std::process::Output {
    crate::support::sdkbox_async()
        .args([
            "fetch-tsc",
            "--into",
            dir.join("typescript").to_str().unwrap(),
        ])
        .env("npm_config_registry", registry)
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_that_is_not_the_pinned_one_is_refused() {
    let Some(mut tarball) = pinned_tarball() else {
        return;
    };
    // One byte changed: still a package, no longer the one measured.
    let middle = tarball.len() / 2;
    tarball[middle] ^= 1;
    let registry = Registry::serve(tarball, true).await;
    let cache = tempfile::tempdir().unwrap();
    let mut server = fresh_server(cache.path(), &registry.url).await;
    for id in 2..100 {
        if registry.requests.load(Ordering::SeqCst) > 0 {
            break;
        }
        let _ = execute(&mut server, id, "return 1;").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The check stays off, for longer than a good compiler takes to load the demo (about a
    // second): the script runs, and the SDK itself refuses the misspelling.
    for id in 100..120 {
        let outcome = execute(&mut server, id, MISSPELLED).await;
        assert_ne!(outcome["error"]["kind"], "type", "{outcome}");
        assert_eq!(outcome["ok"], false, "{outcome}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(!compiler_in(cache.path()).exists());
    let kept: Vec<_> = std::fs::read_dir(cache.path().join("typescript"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(kept.is_empty(), "{kept:?}");
    // Fetched ahead of time, it fails, saying why.
    let into = tempfile::tempdir().unwrap();
    let fetched = fetch_tsc(into.path(), &registry.url).await;
    let said = String::from_utf8_lossy(&fetched.stderr);
    assert!(!fetched.status.success(), "{said}");
    assert!(said.contains("not the pinned sha512-"), "{said}");
    assert!(!into.path().join("typescript").exists());
}
