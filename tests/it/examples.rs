//! Every code block a reader copies works (issue 35, item 7): the README's TypeScript blocks
//! and `examples/demo-orders.ts` run against the demo provider, `examples/github-top-repos.ts`
//! against Prism serving GitHub's spec, and each passes the type check without a warning;
//! every provider file in `examples/` and every TOML block of the README is read as sdkbox
//! reads a provider file. (`examples/hello.ts` runs in `cli::the_readme_example_runs`.)

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sdkbox::typecheck::{TypeCheck, Verdict};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::support::{json_stdout, sdkbox, shared_spec};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README's fenced blocks of `language`, in order.
fn readme_blocks(language: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for line in readme.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(tag)) if tag == language => open = Some(String::new()),
            (None, Some(_)) => open = Some("\u{0}".into()),
            (Some(block), Some(_)) => {
                if !block.starts_with('\u{0}') {
                    blocks.push(std::mem::take(block));
                }
                open = None;
            }
            (Some(block), None) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// `sdkbox exec` of `code` against the API at `base` with `args`, its outcome.
async fn exec(code: &str, base: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("block.ts");
    std::fs::write(&script, code).unwrap();
    let mut command = sdkbox();
    command
        .args(["exec", script.to_str().unwrap(), "--base-url", base])
        .args(args)
        .envs(env.iter().copied());
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    json_stdout(&output)
}

/// Asserts the type check runs `code` and has nothing to say about it.
async fn checks_clean(check: &TypeCheck, code: &str) {
    match check.verdict(code, &sdkbox::fair::Principal::stdio()).await {
        Verdict::Run(warnings) => assert!(warnings.is_empty(), "{code}\n{warnings:?}"),
        Verdict::Stop(error) => panic!("{code}\n{}", error.message),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_and_the_examples_code_runs_and_passes_the_type_check() {
    let shutdown = CancellationToken::new();
    let address = sdkbox::demo::start(shutdown.clone()).await.unwrap();
    let base = format!("http://{address}/v1");
    let spec = root().join("docs-index/demo/openapi.yaml");
    let mut scripts = readme_blocks("ts");
    assert!(!scripts.is_empty(), "the README has a TypeScript block");
    scripts.push(std::fs::read_to_string(root().join("examples/demo-orders.ts")).unwrap());
    let check = crate::typecheck::demo_checker().await;
    for code in &scripts {
        let outcome = exec(
            code,
            &base,
            &["--spec", spec.to_str().unwrap(), "--secret-env", "DEMO_KEY"],
            &[("DEMO_KEY", sdkbox::demo::DEMO_KEY)],
        )
        .await;
        assert_eq!(outcome["ok"], true, "{code}\n{outcome}");
        let rows = outcome["result"].as_array().unwrap();
        assert_eq!(rows.len(), 3, "{outcome}");
        assert!(rows.iter().all(|row| row["email"].is_string()), "{outcome}");
        if let Some(check) = &check {
            checks_clean(check, code).await;
        }
    }
    shutdown.cancel();
}

/// The README's examples of files and bytes (`ts files` blocks) run against the demo, with
/// writes allowed, pass the type check, and return what they say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_file_examples_run_and_pass_the_type_check() {
    let shutdown = CancellationToken::new();
    let address = sdkbox::demo::start(shutdown.clone()).await.unwrap();
    let base = format!("http://{address}/v1");
    let spec = root().join("docs-index/demo/openapi.yaml");
    let blocks = readme_blocks("ts files");
    assert_eq!(
        blocks.len(),
        2,
        "the README shows an upload and files returned"
    );
    let check = crate::typecheck::demo_checker().await;
    let mut outcomes = Vec::new();
    for code in &blocks {
        let outcome = exec(
            code,
            &base,
            &[
                "--spec",
                spec.to_str().unwrap(),
                "--secret-env",
                "DEMO_KEY",
                "--writes",
                "allow",
            ],
            &[("DEMO_KEY", sdkbox::demo::DEMO_KEY)],
        )
        .await;
        assert_eq!(outcome["ok"], true, "{code}\n{outcome}");
        if let Some(check) = &check {
            checks_clean(check, code).await;
        }
        outcomes.push(outcome);
    }
    assert_eq!(
        outcomes[0]["result"]["text"], "date,total\n2026-12-01,4999\n",
        "{}",
        outcomes[0]
    );
    let files: Vec<(&str, &str)> = outcomes[1]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        files,
        [("anvil.png", "image/png"), ("orders.csv", "text/csv")]
    );
    assert_eq!(outcomes[1]["result"]["picture"]["sdkbox_file"], "anvil.png");
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_github_example_runs_against_prism_serving_githubs_spec() {
    let Some(path) = shared_spec("github-api.github.com.json") else {
        return;
    };
    if !crate::support::requirement_met(
        root()
            .join("tests/providers/prism/node_modules/.bin/prism")
            .exists(),
        "Prism is not installed (scripts/test-deps)",
    ) {
        return;
    }
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let picked = [("/search/repositories".to_owned(), "get".to_owned())];
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("github-search.json");
    std::fs::write(
        &cut,
        crate::conformance::cut(&spec, &picked, false).to_string(),
    )
    .unwrap();
    let prism = crate::conformance::Prism::start(&cut).await;
    let code = std::fs::read_to_string(root().join("examples/github-top-repos.ts")).unwrap();
    let outcome = exec(
        &code,
        prism.base.trim_end_matches('/'),
        &["--spec", cut.to_str().unwrap()],
        &[],
    )
    .await;
    assert_eq!(outcome["ok"], true, "{outcome}");
    let repos = outcome["result"].as_array().unwrap();
    assert!(!repos.is_empty(), "{outcome}");
    assert!(
        repos[0]["repo"].is_string() && repos[0]["stars"].is_number(),
        "{outcome}"
    );
    assert_eq!(outcome["http"][0]["status"], 200, "{outcome}");
    if let Some(tsc) = crate::types::tsc() {
        let full = sdkbox::spec::load(path.to_str().unwrap()).await.unwrap();
        let sdk = Arc::new(sdkbox::sdk::Sdk::new(Arc::new(full.api)));
        checks_clean(&crate::typecheck::checker(&tsc, sdk).await, &code).await;
    }
}

/// Every provider file of `examples/`, and every TOML block of the README, is read as sdkbox
/// reads a provider file (a block is a part of one).
#[test]
fn every_provider_file_and_toml_block_is_read() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    let dir = tempfile::tempdir().unwrap();
    for (n, block) in readme_blocks("toml").iter().enumerate() {
        let path = dir.path().join(format!("readme-{n}.toml"));
        std::fs::write(&path, block).unwrap();
        files.push(path);
    }
    for path in &files {
        if let Err(e) = sdkbox::config::ProviderFile::read(path) {
            panic!(
                "{}: {e}\n{}",
                path.display(),
                std::fs::read_to_string(path).unwrap()
            );
        }
    }
}
