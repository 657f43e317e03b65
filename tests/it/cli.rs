//! The `sdkbox exec` command as a user runs it.

use std::path::Path;
use std::process::Command;

use crate::provider::Provider;
use crate::support::{CANARY, json_stdout, sdkbox};

/// `sdkbox exec SCRIPT` against a provider that is never reached.
fn exec_offline(script: &Path) -> Command {
    let mut command = sdkbox();
    command.args([
        "exec",
        script.to_str().unwrap(),
        "--base-url",
        "https://api.example.com",
    ]);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_a_file_against_a_provider() {
    let provider = Provider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("rich.ts");
    std::fs::write(
        &script,
        "const { data } = await api.request('GET', '/customers');\n\
         return data.filter((c: { balance: number }) => c.balance > 0).map((c: { id: string }) => c.id);",
    )
    .unwrap();
    let base = provider.base.to_string();
    let output = tokio::task::spawn_blocking(move || {
        sdkbox()
            .args(["exec", script.to_str().unwrap(), "--base-url", &base])
            .args(["--secret-env", "SDKBOX_TEST_KEY", "--auth", "basic"])
            .env("SDKBOX_TEST_KEY", CANARY)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let outcome = json_stdout(&output);
    assert_eq!(outcome["result"], serde_json::json!(["cus_1", "cus_3"]));
    let seen = provider.seen.authorization.lock().unwrap().clone();
    assert!(seen[0].as_deref().unwrap().starts_with("Basic "));
}

/// A write still in flight when the script returns is not cut short: it finishes (within
/// the deadline), so what the provider did with it is known, and `exec` prints its outcome
/// and exits only once the audit file has its line. It used to exit before the line was
/// written, in 3 of 5 runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_waits_for_a_write_in_flight_and_its_audit_line_before_it_exits() {
    let provider = Provider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("cut.ts");
    std::fs::write(
        &script,
        "api.request('POST', '/slow', { body: { n: 1 } }).catch(() => {});\n\
         await new Promise((r) => setTimeout(r, 300));\n\
         return 'returned';",
    )
    .unwrap();
    for run in 0..5 {
        let audit = dir.path().join(format!("audit-{run}.jsonl"));
        let (script, base, path) = (script.clone(), provider.base.to_string(), audit.clone());
        let output = tokio::task::spawn_blocking(move || {
            sdkbox()
                .args(["exec", script.to_str().unwrap(), "--base-url", &base])
                .args(["--writes", "allow", "--audit-log", path.to_str().unwrap()])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let outcome = json_stdout(&output);
        assert_eq!(outcome["result"], "returned", "{outcome}");
        assert_eq!(outcome["http"][0]["status"], 200, "{outcome}");
        let lines = std::fs::read_to_string(&audit).unwrap();
        let answered = lines
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .any(|line| line["event"] == "attempt" && line["sent"] == "yes");
        assert!(
            answered,
            "run {run}: no line for the write's answer:\n{lines}"
        );
    }
}

#[test]
fn exec_fails_with_a_status_and_clear_messages() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.ts");
    std::fs::write(&script, "const x = ;").unwrap();
    let output = exec_offline(&script).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let outcome: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(outcome["error"]["kind"], "syntax");

    let output = exec_offline(&script)
        .args(["--secret-env", "SDKBOX_UNSET_VARIABLE"])
        .env_remove("SDKBOX_UNSET_VARIABLE")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("SDKBOX_UNSET_VARIABLE is not set"),
        "{stderr}"
    );

    let output = exec_offline(&script)
        .args(["--auth", "oauth"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("header:NAME"), "{stderr}");
}

#[test]
fn the_models_code_is_never_written_to_disk() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("secret_logic.ts");
    std::fs::write(
        &script,
        "const marker = 'model-code-marker';\nreturn marker;",
    )
    .unwrap();
    let output = exec_offline(&script)
        .env_clear()
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written: Vec<_> = walk(home.path());
    assert!(written.is_empty(), "files written under HOME: {written:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

#[test]
fn the_readme_example_runs() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/hello.ts");
    let output = sdkbox()
        .args(["exec", example, "--base-url", "https://api.github.com"])
        .output()
        .unwrap();
    let outcome = json_stdout(&output);
    assert_eq!(
        outcome["result"]["withMoons"],
        serde_json::json!(["Earth", "Mars", "Jupiter"])
    );
    let refused = outcome["result"]["refused"].as_str().unwrap();
    assert!(refused.contains("only https://api.github.com"), "{refused}");
    assert_eq!(outcome["console"][0]["text"], "4 planets, 98 moons");
}

#[test]
fn the_example_provider_files_parse() {
    for name in ["stripe.toml", "github.toml"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(name);
        let file =
            sdkbox::config::ProviderFile::read(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(file.spec.is_some() && file.secret_env.is_some(), "{name}");
        assert!(
            file.auth
                .unwrap()
                .parse::<sdkbox::egress::AuthScheme>()
                .is_ok(),
            "{name}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "spec = \"x.yaml\"\nsecret = \"oops\"\n").unwrap();
    let error = sdkbox::config::ProviderFile::read(&bad)
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field `secret`"), "{error}");
}

/// `sdkbox search --spec <the demo's spec> ARGS...`.
fn search_demo(args: &[&str]) -> std::process::Output {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/docs-index/demo/openapi.yaml");
    sdkbox()
        .args(["search", "--spec", spec])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn search_takes_synonyms_on_the_command_line() {
    let output = search_demo(&["--limit", "1", "--synonym", "zorp=refund", "zorp an order"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.starts_with("POST /refunds  api.refunds.create("),
        "{text}"
    );
    let output = search_demo(&["--synonym", "zorp", "x"]);
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("`zorp` is not WORDS=API_WORDS"), "{error}");
}

/// Issue 22: `sdkbox search --name` shows hits under the renamed groups a provider file's
/// `[names]` gives the server, and a rename that names no group is refused with a fix.
#[test]
fn search_takes_group_renames_on_the_command_line() {
    let output = search_demo(&[
        "--limit",
        "1",
        "--name",
        "refunds=billing.refunds",
        "refund an order",
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.starts_with("POST /refunds  api.billing.refunds.create("),
        "{text}"
    );
    let output = search_demo(&["--name", "refundz=billing", "x"]);
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        error.contains("no group or operation `refundz`; did you mean `refunds`?"),
        "{error}"
    );
}
