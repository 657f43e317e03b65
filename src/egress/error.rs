//! Why a request did not go out, or did not come back, in words a model can act on.

use thiserror::Error;

/// A refused or failed request. Every message says what was wrong and what to do.
#[derive(Debug, Error)]
pub enum EgressError {
    /// The URL could not be parsed or resolved against the base URL.
    #[error("invalid URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as the script gave it.
        url: String,
        /// What the parser said.
        reason: String,
    },
    /// The URL's origin is not one the provider allows.
    #[error("request to {origin} refused: only {allowed} may be reached from this sandbox")]
    Disallowed {
        /// The refused origin.
        origin: String,
        /// The allowed origins, comma separated.
        allowed: String,
    },
    /// The URL carries a user name or password.
    #[error(
        "URL `{url}` carries credentials (user@host); they are refused: sdkbox adds the provider's credentials itself"
    )]
    UserInfo {
        /// The URL, credentials removed.
        url: String,
    },
    /// The host resolved only to addresses the sandbox may not reach.
    #[error(
        "{host} resolves to a private, loopback, link-local or metadata address; such addresses are refused"
    )]
    PrivateAddress {
        /// The host name.
        host: String,
    },
    /// A script tried to write to a download origin.
    #[error(
        "{origin} is a download origin: it is only read (GET or HEAD), by the provider's \
         redirects or by the script, and never sent the provider credential"
    )]
    DownloadOnly {
        /// The origin.
        origin: String,
    },
    /// A redirect pointed outside the allowed origins.
    #[error("redirect to {location} refused: only {allowed} may be reached from this sandbox")]
    RedirectRefused {
        /// Where the redirect pointed.
        location: String,
        /// The allowed origins, comma separated.
        allowed: String,
    },
    /// The method is not an HTTP method.
    #[error("invalid HTTP method `{method}`; use GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS")]
    InvalidMethod {
        /// The method as given.
        method: String,
    },
    /// A header name or value is malformed.
    #[error("invalid header `{name}`: header names must be tokens and values visible ASCII")]
    InvalidHeader {
        /// The header name as given.
        name: String,
    },
    /// The execution used up its request budget.
    #[error(
        "request budget exhausted: this execution may send at most {limit} requests; fetch fewer items per call (use pagination limits or filters) or split the work across executions"
    )]
    BudgetExhausted {
        /// The per-execution limit.
        limit: u32,
    },
    /// The request body is larger than allowed.
    #[error("request body of {size} bytes exceeds the limit of {limit} bytes")]
    RequestTooLarge {
        /// The body's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The response body is larger than allowed.
    #[error(
        "response from {url} exceeds the limit of {limit} bytes; ask for less (a smaller page size, fewer fields, a filter)"
    )]
    ResponseTooLarge {
        /// The URL requested.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// The execution has received as many response bytes as it may, in all.
    #[error(
        "the execution has received {limit} bytes of responses, all it may; ask for less per call (smaller pages, fewer fields) or split the work"
    )]
    ResponseBudget {
        /// The limit.
        limit: usize,
    },
    /// The request did not finish in time.
    #[error("request to {url} timed out after {millis} ms")]
    Timeout {
        /// The URL requested.
        url: String,
        /// How long it was given.
        millis: u128,
    },
    /// The execution was cancelled or hit its deadline while the request was in flight.
    #[error("request to {url} cancelled: the execution ended")]
    Cancelled {
        /// The URL requested.
        url: String,
    },
    /// A network-level failure (connection refused, TLS, reset).
    #[error("request to {url} failed: {reason}")]
    Network {
        /// The URL requested.
        url: String,
        /// What failed, secret scrubbed.
        reason: String,
    },
    /// A key or header that frameworks read as the method (`_method`,
    /// `X-HTTP-Method-Override`), or a body sdkbox cannot read as the provider would.
    #[error(
        "the request was not sent: {} has `{}`, which web frameworks (Rails, Laravel, Symfony, \
         Express, ASP.NET) can read as another HTTP method or path, so the request could act as \
         another operation than the one checked. Send the method you mean instead, with no \
         override key or header, and the body uncompressed, in UTF-8 (multipart bodies as the \
         SDK builds them: CRLF line breaks, one plain boundary)",
        found.place, found.key
    )]
    MethodOverride {
        /// Where it was found, and how it was spelt.
        found: super::overrides::Found,
    },
    /// The HTTP client could not be built from the configuration.
    #[error("cannot set up the HTTP client: {0}")]
    Setup(String),
    /// The approval rules or a human refused the request, or its approval is still to be
    /// given; it was not sent.
    #[error("{message}")]
    Policy {
        /// What was decided, by whom, and what to do.
        message: String,
        /// Whether a decision can still come (run the same code again once it has).
        awaiting: bool,
    },
}

impl EgressError {
    /// A short machine-readable name for the failure, shown to the script as `error.kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidUrl { .. }
            | Self::InvalidMethod { .. }
            | Self::InvalidHeader { .. }
            | Self::MethodOverride { .. } => "invalid_request",
            Self::Disallowed { .. }
            | Self::UserInfo { .. }
            | Self::PrivateAddress { .. }
            | Self::RedirectRefused { .. }
            | Self::DownloadOnly { .. } => "denied",
            Self::BudgetExhausted { .. }
            | Self::RequestTooLarge { .. }
            | Self::ResponseTooLarge { .. }
            | Self::ResponseBudget { .. } => "limit",
            Self::Timeout { .. } => "timeout",
            Self::Cancelled { .. } => "cancelled",
            Self::Network { .. } | Self::Setup(_) => "network",
            Self::Policy {
                awaiting: false, ..
            } => "policy",
            Self::Policy { awaiting: true, .. } => "approval_required",
        }
    }
}
