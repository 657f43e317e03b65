//! sdkbox's integration tests, in one crate so the engine is linked once: golden cases for
//! the sandbox, hostile scripts, egress against a real loopback provider, and the CLI.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs,
    reason = "tests fail loudly by design"
)]

mod adversary;
mod approvals;
mod classified;
mod cli;
mod clients;
mod conformance;
mod demo;
mod deploy;
mod egress;
mod examples;
mod fairness;
mod files;
mod frameworks;
mod golden;
mod hostile;
mod hostile_provider;
mod linking;
mod localstripe;
mod mcp;
mod naming;
mod once;
mod overrides;
mod page;
mod pool;
mod provider;
mod real_providers;
mod replica_tasks;
mod replicas;
mod sdk;
mod search;
mod semantic;
mod sessions;
mod signin;
mod skills;
mod specs;
mod state;
mod support;
mod tasks;
mod traces;
mod transport;
mod tsc_download;
mod typecheck;
mod types;
