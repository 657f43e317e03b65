//! Hostile and broken scripts: each costs one failed call with a clear error, and the same
//! process serves the next call.

use std::time::Duration;

use sdkbox::sandbox::{ErrorKind, ExecLimits, InProcessSandbox, Outcome};

use crate::support::{self, assert_ended_before, quick, run};

async fn still_serving(sandbox: &InProcessSandbox) {
    let outcome = run(sandbox, "return 1 + 1", &ExecLimits::default()).await;
    assert!(outcome.ok, "the next call failed: {outcome:?}");
    assert_eq!(outcome.result, serde_json::json!(2));
}

async fn fails(
    sandbox: &InProcessSandbox,
    code: &str,
    limits: &ExecLimits,
    kind: ErrorKind,
) -> Outcome {
    let outcome = run(sandbox, code, limits).await;
    assert!(
        !outcome.ok,
        "expected a {kind:?} failure for {code}: {outcome:?}"
    );
    let error = outcome.error.clone().unwrap();
    assert_eq!(error.kind, kind, "{code}: {error:?}");
    still_serving(sandbox).await;
    outcome
}

fn message(outcome: &Outcome) -> String {
    outcome.error.as_ref().unwrap().message.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_scripts_hit_the_time_limit() {
    let sandbox = support::offline();
    for code in [
        "while (true) {}",
        "for (;;) { Math.random(); }\nreturn 1;",
        "while (true) { await null; }",
        "while (true) { await new Promise((r) => setTimeout(r, 0)); }",
    ] {
        let outcome = fails(&sandbox, code, &quick(500), ErrorKind::Timeout).await;
        assert!(
            message(&outcome).contains("time limit of 500 ms"),
            "{outcome:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promise_that_never_settles_is_reported_as_such() {
    let sandbox = support::offline();
    for code in [
        "await new Promise(() => {});",
        "await new Promise(() => {});\nreturn 1;",
    ] {
        // A long deadline: a run that waited for it would take 20 s, far past the bound.
        let outcome = fails(&sandbox, code, &quick(20_000), ErrorKind::Pending).await;
        assert!(message(&outcome).contains("never settle"), "{outcome:?}");
        assert_ended_before(&outcome, 10_000, "the deadline");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_bombs_hit_the_memory_limit() {
    let sandbox = support::offline();
    let limits = ExecLimits {
        memory_bytes: 64 * 1024 * 1024,
        ..quick(20_000)
    };
    for code in [
        "const a = []; while (true) a.push(new Array(100000).fill('x'));",
        "let s = 'x'; while (true) s += s;\nreturn s.length;",
        "const bufs = []; while (true) bufs.push(new Uint8Array(8 * 1024 * 1024));",
    ] {
        let outcome = fails(&sandbox, code, &limits, ErrorKind::Memory).await;
        assert!(
            message(&outcome).contains("memory limit of 64 MiB"),
            "{outcome:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_is_a_stack_error_with_a_line() {
    let sandbox = support::offline();
    let code = "function down(n: number): number {\n  return down(n + 1) + 1;\n}\nreturn down(0);";
    let outcome = fails(&sandbox, code, &quick(10_000), ErrorKind::Stack).await;
    let error = outcome.error.unwrap();
    assert_eq!(error.line, Some(2), "{error:?}");
    assert!(error.message.contains("recursion"), "{error:?}");
    assert!(error.stack.unwrap().contains("repeated"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_and_console_are_capped() {
    let sandbox = support::offline();
    let code = "for (let i = 0; i < 100000; i++) console.log('line ' + i + ' ' + 'z'.repeat(100));\n\
                return 'y'.repeat(5_000_000);";
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    assert!(outcome.ok, "{outcome:?}");
    let truncated = outcome.truncated.clone().unwrap();
    assert_eq!(truncated.original_chars, 5_000_002);
    let total: usize = outcome.console.iter().map(|l| l.text.len()).sum();
    assert!(total <= 8_100, "console kept {total} bytes");
    assert!(
        outcome.console_dropped > 99_000,
        "{}",
        outcome.console_dropped
    );
    assert!(support::text(&outcome).len() < 40_000);
    still_serving(&sandbox).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_left_running_die_with_the_call() {
    let sandbox = support::offline();
    let code = "setInterval(() => console.log('tick'), 1);\nsetTimeout(() => { throw new Error('late'); }, 50);\nreturn 'returned';";
    // Timers that kept the call alive would run it into the 20 s deadline.
    let outcome = run(&sandbox, code, &quick(20_000)).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(outcome.result, serde_json::json!("returned"));
    assert_ended_before(&outcome, 10_000, "the timers");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let next = run(&sandbox, "return 'next'", &ExecLimits::default()).await;
    assert!(
        next.ok && next.console.is_empty(),
        "a timer leaked: {next:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_survives_a_call() {
    let sandbox = support::offline();
    let poison = "globalThis.leak = 42;\nObject.prototype.polluted = 'yes';\nArray.prototype.map = () => 'hijacked';\n\
                  JSON.stringify = () => 'hijacked';\nglobalThis.api = null;\nreturn 'poisoned';";
    let first = run(&sandbox, poison, &ExecLimits::default()).await;
    assert!(first.ok, "{first:?}");
    let check = "return { leak: typeof (globalThis as any).leak, polluted: ({} as any).polluted ?? null, \
                 map: [1, 2].map((x) => x * 2), json: JSON.stringify({a: 1}), api: typeof api.request };";
    let second = run(&sandbox, check, &ExecLimits::default()).await;
    assert_eq!(
        second.result,
        serde_json::json!({"leak": "undefined", "polluted": null, "map": [2, 4], "json": "{\"a\":1}", "api": "function"}),
        "{second:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_way_to_the_host() {
    let sandbox = support::offline();
    let code = r#"
const probe: Record<string, unknown> = {};
for (const name of ["Deno", "__bootstrap", "process", "require", "gc", "SharedArrayBuffer",
                    "Atomics", "WebAssembly", "ShadowRealm", "Bun"]) {
  probe[name] = typeof (globalThis as any)[name];
}
probe.internals = Object.getOwnPropertyNames(globalThis).filter((n) => n.startsWith("__"));
const attempts: Record<string, string> = {};
for (const spec of ["ext:core/ops", "file:///etc/passwd", "https://example.com/x.js", "node:fs", "./local.ts"]) {
  try { await import(spec); attempts[spec] = "loaded"; } catch (e) { attempts[spec] = String(e).slice(0, 40); }
}
return { probe, attempts };
"#;
    let outcome = run(&sandbox, code, &ExecLimits::default()).await;
    assert!(outcome.ok, "{outcome:?}");
    let probe = &outcome.result["probe"];
    for (name, kind) in probe.as_object().unwrap() {
        if name != "internals" {
            assert_eq!(kind, "undefined", "{name} is reachable: {outcome:?}");
        }
    }
    assert_eq!(probe["internals"], serde_json::json!([]));
    for (spec, result) in outcome.result["attempts"].as_object().unwrap() {
        assert!(
            result
                .as_str()
                .unwrap()
                .starts_with("TypeError: cannot import"),
            "{spec}: {result}"
        );
    }
    still_serving(&sandbox).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_the_script() {
    let sandbox = support::offline();
    let cancel = crate::support::cancel_after(200);
    let outcome = sandbox
        .execute("while (true) {}", &quick(20_000), cancel)
        .await;
    assert_eq!(outcome.error.as_ref().unwrap().kind, ErrorKind::Cancelled);
    // Half the deadline: far from both the 200 ms cancel and the 20 s limit.
    assert_ended_before(&outcome, 10_000, "the deadline");
    still_serving(&sandbox).await;
}
