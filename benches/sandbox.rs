//! Sandbox benchmark: prints markdown tables of latency, throughput, memory, and where the
//! time of one execution goes, in process and through the worker pool. Run with
//! `cargo bench --bench sandbox`; the committed figures are in docs/BENCHMARKS.md.

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
use sdkbox::worker::{Pool, PoolConfig, Target};
use tokio_util::sync::CancellationToken;
use url::Url;

const TRIVIAL: &str = "return 1 + 1;";
const ONE_CALL: &str = "const c = await api.request('GET', '/item');\nreturn c.id;";
const ONE_WRITE: &str =
    "const c = await api.request('POST', '/item', { body: { n: 1 } });\nreturn c.id;";
const RUNS: usize = 300;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

/// Runs executions either way, so both are measured by the same code.
#[derive(Clone)]
enum Executor {
    InProcess(InProcessSandbox),
    Pool(Pool, Target),
}

impl Executor {
    async fn execute(&self, code: &str) -> Outcome {
        let (limits, cancel) = (ExecLimits::default(), CancellationToken::new());
        match self {
            Self::InProcess(sandbox) => sandbox.execute(code, &limits, cancel).await,
            Self::Pool(pool, target) => pool.execute(target, code, &limits, cancel).await,
        }
    }
}

fn egress(base: &Url) -> Egress {
    Egress::new(EgressConfig {
        base_url: base.clone(),
        extra_origins: Vec::new(),
        download_origins: Vec::new(),
        credential: None,
        limits: EgressLimits::default(),
    })
    .unwrap()
}

fn target(base: &Url) -> Target {
    let egress = egress(base);
    Target {
        gate: std::sync::Arc::new(sdkbox::approval::Gate::open(egress.base_url().clone())),
        caller: egress.identity(),
        principal: sdkbox::fair::Principal::stdio(),
        hold: None,
        watch: None,
        egress,
        sdk: None,
    }
}

fn pool_config(workers: usize, max_runs: u32) -> PoolConfig {
    let mut config = PoolConfig::for_this_binary(ExecLimits::default().memory_bytes).unwrap();
    config.exe = env!("CARGO_BIN_EXE_sdkbox").into();
    config.workers = workers;
    config.max_runs = max_runs;
    config
}

async fn bench() {
    let base = start_provider().await;
    println!("## Worker pool (2 workers and a spare unless said)\n");
    let pool = Pool::start(pool_config(2, 100)).await.unwrap();
    measure(&Executor::Pool(pool.clone(), target(&base)), false).await;
    let pool4 = Pool::start(pool_config(4, 100)).await.unwrap();
    throughput(
        &Executor::Pool(pool4.clone(), target(&base)),
        4,
        "4 workers",
    )
    .await;
    write_cost(&pool, &base).await;
    recycling(&base).await;
    let workers: Vec<u64> = pool
        .worker_pids()
        .into_iter()
        .filter_map(|p| rss_kib(&format!("/proc/{p}/status")).map(|k| k / 1024))
        .collect();
    println!(
        "| supervisor RSS after {} pool executions | {} MiB |",
        2 * RUNS + 4 * RUNS + 40,
        status_kib("VmRSS") / 1024
    );
    println!(
        "| worker RSS (each, after up to 100 executions) | {} MiB |",
        workers
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(" / ")
    );
    println!("\n## In process (a fresh runtime on a fresh thread per call)\n");
    let rss_start = status_kib("VmRSS");
    let sandbox = Executor::InProcess(InProcessSandbox::new(egress(&base), None));
    measure(&sandbox, true).await;
    let executions = 20 + 4 * RUNS;
    let rss_end = status_kib("VmRSS");
    println!(
        "| peak RSS (VmHWM) of this process | {} MiB |",
        status_kib("VmHWM") / 1024
    );
    println!(
        "| RSS growth per in-process execution (engine leak, see ENGINE.md) | {:.2} MiB |",
        rss_end.saturating_sub(rss_start) as f64 / 1024.0 / executions as f64
    );
}

/// Latency of a trivial execution and of one with an API call, then throughput.
async fn measure(executor: &Executor, split: bool) {
    for _ in 0..20 {
        assert!(executor.execute(TRIVIAL).await.ok);
    }
    println!("| measure | value |\n|---|---|");
    for (name, code) in [
        ("trivial execution", TRIVIAL),
        ("one loopback API call", ONE_CALL),
    ] {
        let (mut totals, mut timings) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let started = Instant::now();
            let outcome = executor.execute(code).await;
            assert!(outcome.ok, "{outcome:?}");
            totals.push(started.elapsed());
            timings.push(outcome.timings);
            // Leave the worker idle time to prepare its next runtime, as between model turns.
            if !split {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        latency_row(name, &mut totals);
        println!("| {name}: {} |", breakdown(&timings));
    }
    throughput(executor, 1, "").await;
    if split {
        throughput(executor, 4, "").await;
    }
}

async fn throughput(executor: &Executor, concurrency: usize, note: &str) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let executor = executor.clone();
            tokio::spawn(async move {
                for _ in 0..RUNS / concurrency {
                    assert!(executor.execute(TRIVIAL).await.ok);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let per_second = (RUNS / concurrency * concurrency) as f64 / started.elapsed().as_secs_f64();
    let note = if note.is_empty() {
        String::new()
    } else {
        format!(", {note}")
    };
    println!(
        "| executions per second, back to back, concurrency {concurrency}{note} | {per_second:.0} |"
    );
}

/// What the approval rules add to a write they allow: a read, a write allowed by the
/// `writes` rule, and the same with the audit file (one synced line per write).
async fn write_cost(pool: &Pool, base: &Url) {
    let dir = tempfile::tempdir().unwrap();
    let audit = sdkbox::approval::AuditLog::open(&dir.path().join("audit.jsonl")).unwrap();
    let overrides = sdkbox::approval::PolicyOverrides {
        read_only: false,
        writes: Some(sdkbox::approval::Rule::Allow),
    };
    let approvals = |audit| {
        let rules = sdkbox::approval::Rules::without_spec(base.clone(), overrides);
        let timeout = Duration::from_secs(120);
        sdkbox::approval::Approvals::local(std::sync::Arc::new(rules), timeout, audit, None)
            .unwrap()
    };
    let audited = std::sync::Arc::new(audit);
    for (name, code, audit) in [
        ("one loopback read", ONE_CALL, None),
        ("one loopback write, allowed by the rules", ONE_WRITE, None),
        (
            "one loopback write, allowed, with --audit-log",
            ONE_WRITE,
            Some(audited),
        ),
    ] {
        let mut totals = Vec::new();
        for _ in 0..RUNS {
            let mut target = target(base);
            let approvals = approvals(audit.clone());
            let caller = approvals.caller(0, None, None);
            target.gate = approvals.unasked(&caller, code);
            let started = Instant::now();
            let outcome = Executor::Pool(pool.clone(), target).execute(code).await;
            assert!(outcome.ok, "{outcome:?}");
            totals.push(started.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        latency_row(name, &mut totals);
    }
}

/// What recycling costs: starting one worker, and latency with a recycle every 10 runs.
async fn recycling(base: &Url) {
    let mut starts = Vec::new();
    for _ in 0..10 {
        let mut config = pool_config(1, 100);
        config.spare = false;
        let started = Instant::now();
        let pool = Pool::start(config).await.unwrap();
        starts.push(started.elapsed());
        drop(pool);
    }
    starts.sort();
    println!(
        "| starting a pool of one worker (snapshot build included): median | {:.1} ms |",
        ms(starts[5])
    );
    let pool = Pool::start(pool_config(1, 10)).await.unwrap();
    let mut totals = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        assert!(
            Executor::Pool(pool.clone(), target(base))
                .execute(TRIVIAL)
                .await
                .ok
        );
        totals.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    totals.sort();
    println!(
        "| trivial execution with a recycle every 10 runs: p50 / p95 / max | {:.2} / {:.2} / {:.2} ms |",
        ms(totals[RUNS / 2]),
        ms(totals[RUNS * 95 / 100]),
        ms(totals[RUNS - 1])
    );
}

/// Prints the p50 and p95 of `totals`, one run each.
fn latency_row(name: &str, totals: &mut [Duration]) {
    totals.sort();
    println!(
        "| {name}: p50 / p95 | {:.2} ms / {:.2} ms |",
        ms(totals[totals.len() / 2]),
        ms(totals[totals.len() * 95 / 100])
    );
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
    field_kib(&status, field).unwrap_or(0)
}

fn rss_kib(path: &str) -> Option<u64> {
    field_kib(&std::fs::read_to_string(path).ok()?, "VmRSS")
}

fn field_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

async fn start_provider() -> Url {
    let app = Router::new().route(
        "/v1/item",
        get(|| async { axum::Json(serde_json::json!({"id": "item_1", "name": "bench"})) })
            .post(|| async { axum::Json(serde_json::json!({"id": "item_2", "name": "new"})) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Url::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap()
}
