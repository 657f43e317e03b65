//! The `sdkbox` command. Parses the command line once into validated configuration, then
//! hands typed values to the library. Logs go to stderr; stdout carries only results.

mod commands;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

/// A code-mode MCP server: search an API's docs, run TypeScript against its SDK.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// How log lines (on stderr) are written: text (ANSI colours only on a terminal) or json
    /// (one object a line, for a log collector).
    #[arg(long, global = true, env = "SDKBOX_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,
    /// Export OpenTelemetry traces (each call, type check, approval wait and provider request)
    /// over OTLP/HTTP to this collector, as `http://collector:4318`; off when unset.
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (a full URL) wins, as the standard says.
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    otlp_endpoint: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// How log lines are written.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run one TypeScript file in the sandbox and print the outcome as JSON.
    Exec(Box<commands::exec::ExecArgs>),
    /// Serve the MCP server for one provider: on stdio, or on HTTP with --http.
    Serve(Box<commands::serve::ServeArgs>),
    /// Build the docs index of a spec and report what it holds.
    Index(commands::docs::SpecArgs),
    /// Search a spec's docs as the model would, and print the hits.
    Search(commands::docs::SearchArgs),
    /// Print the SDK a script sees as TypeScript declarations (`api` and the globals).
    Types(commands::docs::TypesArgs),
    /// Download the type check's pinned TypeScript 7 compiler now (into the cache, or --into).
    FetchTsc(commands::compiler::FetchTscArgs),
    /// Internal: serve executions for a supervisor over standard input (a Unix socket).
    #[command(hide = true)]
    Worker(commands::worker::WorkerArgs),
}

fn main() -> ExitCode {
    disable_bytecode_cache();
    let cli = Cli::parse();
    let traces = match start_traces(&cli) {
        Ok(traces) => traces,
        Err(error) => {
            eprintln!("sdkbox: {error:#}");
            return ExitCode::from(2);
        }
    };
    log_to_stderr(cli.log_format, traces.as_ref());
    let code = match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sdkbox: {error:#}");
            ExitCode::from(2)
        }
    };
    // The spans still queued leave now, outside any runtime (the exporter's client blocks).
    drop(traces);
    code
}

/// Traces are exported by the commands that serve or run scripts, never by a sandbox worker
/// (no network, few threads), and only when an endpoint is configured.
fn start_traces(cli: &Cli) -> Result<Option<sdkbox::telemetry::Traces>> {
    if !matches!(cli.command, Command::Serve(_) | Command::Exec(_)) {
        return Ok(None);
    }
    sdkbox::telemetry::traces_endpoint(cli.otlp_endpoint.as_deref())
        .map(|endpoint| sdkbox::telemetry::Traces::start(&endpoint))
        .transpose()
}

/// Logs go to stderr (stdout carries results), at the level `RUST_LOG` sets (default: info
/// for sdkbox, warnings for the rest), in `format`; sdkbox's spans also go to `traces`.
fn log_to_stderr(format: LogFormat, traces: Option<&sdkbox::telemetry::Traces>) {
    use std::io::IsTerminal;
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sdkbox=info"));
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let lines = match format {
        LogFormat::Text => lines.with_ansi(std::io::stderr().is_terminal()).boxed(),
        LogFormat::Json => lines
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(lines.with_filter(filter))
        .with(traces.map(sdkbox::telemetry::Traces::layer))
        .init();
}

/// Keeps the QuickJS backend from writing compiled scripts (the model's code) to disk.
fn disable_bytecode_cache() {
    #[allow(
        unsafe_code,
        reason = "runs first in main, before any other thread exists"
    )]
    // SAFETY: no other thread is running yet, so nothing reads the environment concurrently.
    unsafe {
        std::env::set_var("V82JSC_NO_BC_CACHE", "1");
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    if matches!(cli.command, Command::Serve(_) | Command::Exec(_)) {
        // The process that holds the secret: no process of the same user may ptrace it or
        // read its environment.
        sdkbox::worker::protect_supervisor()?;
    }
    match cli.command {
        Command::Exec(args) => {
            let runtime =
                tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
            runtime.block_on(commands::exec::exec(*args))
        }
        Command::Worker(args) => commands::worker::worker(args),
        Command::Serve(args) => {
            // Over stdio one client speaks at a time: one thread serves it and its workers'
            // sockets with no hand-off between threads (measured: 0.1-0.3 ms less per call,
            // more on calls that make requests). Heavy work goes to blocking threads either
            // way. Over HTTP, many clients share the server's threads.
            let runtime = match args.http {
                None => tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build(),
                Some(_) => tokio::runtime::Runtime::new(),
            }
            .context("cannot start the tokio runtime")?;
            let served = runtime.block_on(commands::serve::serve(*args));
            // A read of stdin blocks a thread that a plain drop would wait for forever (after
            // SIGTERM, say); the server's tasks, pool and directories are dropped either way.
            runtime.shutdown_timeout(std::time::Duration::from_secs(2));
            served
        }
        Command::Index(args) => {
            let runtime =
                tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
            runtime.block_on(commands::docs::index(args))
        }
        Command::Search(args) => {
            let runtime =
                tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
            runtime.block_on(commands::docs::search(args))
        }
        Command::Types(args) => {
            let runtime =
                tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
            runtime.block_on(commands::docs::types(args))
        }
        Command::FetchTsc(args) => {
            let runtime =
                tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
            runtime.block_on(commands::compiler::fetch_tsc(args))
        }
    }
}
