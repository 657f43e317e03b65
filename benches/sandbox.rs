//! Sandbox benchmark: prints a markdown table of latency, throughput, memory, and where the
//! time of one execution goes. Run with `cargo bench --bench sandbox`; the committed figures
//! are in docs/BENCHMARKS.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark"
)]

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use sdkbox::egress::{Egress, EgressConfig, EgressLimits};
use sdkbox::sandbox::{ExecLimits, InProcessSandbox, Outcome, Timings};
use tokio_util::sync::CancellationToken;
use url::Url;

const TRIVIAL: &str = "return 1 + 1;";
const ONE_CALL: &str = "const c = await api.request('GET', '/item');\nreturn c.id;";
const RUNS: usize = 300;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let base = start_provider().await;
    let egress = Egress::new(EgressConfig {
        base_url: base,
        extra_origins: Vec::new(),
        credential: None,
        limits: EgressLimits::default(),
    })
    .unwrap();
    let sandbox = InProcessSandbox::new(egress);
    let rss_start = status_kib("VmRSS");
    for _ in 0..20 {
        assert!(execute(&sandbox, TRIVIAL).await.ok);
    }
    println!("| measure | value |\n|---|---|");
    for (name, code) in [
        ("trivial execution", TRIVIAL),
        ("one loopback API call", ONE_CALL),
    ] {
        let (mut totals, mut timings) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let started = Instant::now();
            let outcome = execute(&sandbox, code).await;
            assert!(outcome.ok, "{outcome:?}");
            totals.push(started.elapsed());
            timings.push(outcome.timings);
        }
        totals.sort();
        println!(
            "| {name}: p50 / p95 | {:.2} ms / {:.2} ms |",
            ms(totals[RUNS / 2]),
            ms(totals[RUNS * 95 / 100])
        );
        println!("| {name}: {} |", breakdown(&timings));
    }
    for concurrency in [1, 4] {
        let started = Instant::now();
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let sandbox = sandbox.clone();
                tokio::spawn(async move {
                    for _ in 0..RUNS / concurrency {
                        assert!(execute(&sandbox, TRIVIAL).await.ok);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let per_second =
            (RUNS / concurrency * concurrency) as f64 / started.elapsed().as_secs_f64();
        println!("| executions per second, concurrency {concurrency} | {per_second:.0} |");
    }
    let executions = 20 + 4 * RUNS;
    let rss_end = status_kib("VmRSS");
    println!(
        "| peak RSS (VmHWM) after {executions} executions | {} MiB |",
        status_kib("VmHWM") / 1024
    );
    println!(
        "| RSS growth per execution (engine leak, see ENGINE.md) | {:.2} MiB |",
        (rss_end - rss_start) as f64 / 1024.0 / executions as f64
    );
}

async fn execute(sandbox: &InProcessSandbox, code: &str) -> Outcome {
    sandbox
        .execute(code, &ExecLimits::default(), CancellationToken::new())
        .await
}

fn breakdown(timings: &[Timings]) -> String {
    let median = |f: fn(&Timings) -> u64| {
        let mut v: Vec<u64> = timings.iter().map(f).collect();
        v.sort();
        v[v.len() / 2] as f64 / 1000.0
    };
    format!(
        "median split | transpile {:.2} ms, create runtime {:.2} ms, run {:.2} ms, finish {:.2} ms",
        median(|t| t.compile_us),
        median(|t| t.create_us),
        median(|t| t.run_us),
        median(|t| t.finish_us)
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn start_provider() -> Url {
    let app = Router::new().route(
        "/v1/item",
        get(|| async { axum::Json(serde_json::json!({"id": "item_1", "name": "bench"})) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Url::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap()
}
