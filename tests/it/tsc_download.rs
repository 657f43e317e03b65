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
use tokio::io::AsyncBufReadExt;

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
    let outcome = execute(&mut server, 2, "const sdk = api;\nreturn 1 + 1;").await;
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
            .is_some_and(|m| m.contains("did you mean api.customers.list (")),
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

/// A registry behind a TLS-inspecting proxy, as a corporate network has it: its certificate
/// is issued by the proxy's own CA, which the system does not trust. `fetch-tsc` (as the
/// image's build runs it) fails saying what to do; given the CA bundle in SSL_CERT_FILE, as
/// the Dockerfile gives it, it downloads and checks the compiler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_behind_a_tls_inspecting_proxy_needs_its_ca_in_ssl_cert_file() {
    let Some(tarball) = pinned_tarball() else {
        return;
    };
    let openssl = std::process::Command::new("openssl")
        .arg("version")
        .output();
    if !requirement_met(openssl.is_ok(), "openssl is not installed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let run = |args: &[&str]| {
        let done = std::process::Command::new("openssl")
            .args(args)
            .output()
            .unwrap();
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
    };
    // The proxy's CA, and the certificate it makes for the registry (127.0.0.1).
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=Inspecting Proxy CA",
        "-keyout",
        &at("ca.key"),
        "-out",
        &at("ca.pem"),
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        &at("server.key"),
        "-out",
        &at("server.csr"),
    ]);
    std::fs::write(at("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        &at("server.csr"),
        "-CA",
        &at("ca.pem"),
        "-CAkey",
        &at("ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        &at("ext"),
        "-out",
        &at("server.pem"),
    ]);
    std::fs::write(at("package.tgz"), tarball).unwrap();
    let server = r#"
        const fs = require("node:fs");
        const https = require("node:https");
        const [key, cert, tarball] = process.argv.slice(1).map((f) => fs.readFileSync(f));
        const server = https.createServer({ key, cert }, (request, response) => {
          response.end(tarball);
        });
        server.listen(0, "127.0.0.1", () => console.log(server.address().port));
        process.stdin.on("end", () => process.exit(0));
        process.stdin.resume();
    "#;
    let mut registry = tokio::process::Command::new("node")
        .args([
            "-e",
            server,
            &at("server.key"),
            &at("server.pem"),
            &at("package.tgz"),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(registry.stdout.take().unwrap()).lines();
    let port = lines.next_line().await.unwrap().unwrap();
    let url = format!("https://127.0.0.1:{port}");

    let untrusted = tempfile::tempdir().unwrap();
    let refused = fetch_tsc(untrusted.path(), &url).await;
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(said.contains("SSL_CERT_FILE"), "{said}");
    assert!(!untrusted.path().join("typescript").exists());

    let trusted = tempfile::tempdir().unwrap();
    let fetched = crate::support::sdkbox_async()
        .args([
            "fetch-tsc",
            "--into",
            trusted.path().join("typescript").to_str().unwrap(),
        ])
        .env("npm_config_registry", &url)
        .env("SSL_CERT_FILE", at("ca.pem"))
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&fetched.stderr);
    assert!(fetched.status.success(), "{said}");
    assert!(trusted.path().join("typescript/tsc").exists());
}
