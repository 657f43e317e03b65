//! sdkbox: a code-mode MCP server. A model searches one provider's API docs and runs
//! TypeScript against its SDK in a sandbox whose only way out is the egress bridge.
//!
//! Data flows one way: spec -> model -> (SDK, docs index) -> server -> tools -> sandbox ->
//! egress. See ARCHITECTURE.md for the map and the invariants.

pub mod answer;
pub mod approval;
pub mod capped;
pub mod config;
pub mod deadline;
pub mod demo;
pub mod egress;
pub mod fair;
mod hex;
pub mod linking;
mod lock;
pub mod sandbox;
pub mod sdk;
pub mod search;
pub mod server;
pub mod signin;
pub mod skills;
pub mod spec;
pub mod state;
pub mod tasks;
pub mod telemetry;
pub mod typecheck;
pub mod user_cache;
pub mod worker;

#[cfg(test)]
mod testing;
