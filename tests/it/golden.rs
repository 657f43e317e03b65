//! Golden cases: each `tests/golden/NAME.ts` runs in the sandbox and its outcome must equal
//! `NAME.json` (durations removed). `UPDATE_GOLDEN=1 cargo test golden` rewrites the files;
//! review the diff before committing.

use std::path::Path;

use sdkbox::sandbox::ExecLimits;

use crate::support;

fn normalized(outcome: &sdkbox::sandbox::Outcome) -> serde_json::Value {
    let mut value = serde_json::to_value(outcome).unwrap();
    let object = value.as_object_mut().unwrap();
    object.remove("duration_ms");
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_cases() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let sandbox = support::offline();
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ts"))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 15,
        "golden cases are missing from {}",
        dir.display()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let code = std::fs::read_to_string(case).unwrap();
        let outcome = support::run(&sandbox, &code, &ExecLimits::default()).await;
        let actual = normalized(&outcome);
        let expected_path = case.with_extension("json");
        let pretty = serde_json::to_string_pretty(&actual).unwrap() + "\n";
        if update {
            std::fs::write(&expected_path, &pretty).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != pretty {
            failures.push(format!(
                "{}:\n--- expected\n{expected}\n--- actual\n{pretty}",
                case.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
