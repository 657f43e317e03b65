//! The one bound on what sdkbox sends a client in a single answer, whatever produced it: an
//! `execute` result (held to `limits.max_output_bytes`, which may not exceed this), a search,
//! a question put to a human (`elicitation/create`), a 2026-07-28 input-required result with
//! its questions and request state. Far under any client's message limit (the official
//! TypeScript client ended a session on an 11 MB message).

/// Bytes of one answer, as JSON on the wire, at most.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;
