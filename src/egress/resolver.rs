//! Name resolution that refuses non-public addresses, so DNS cannot point an allowed host
//! name at the machine's own services or a cloud metadata endpoint.
//!
//! It runs inside reqwest's connector: the addresses it returns are the only ones connected
//! to, so there is no window between the check and the connection.

use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::policy::{OriginPolicy, is_public};

/// The error a refused name resolves to; found again in reqwest's error chain.
#[derive(Debug)]
pub struct RefusedAddress {
    /// The host name that resolved only to refused addresses.
    pub host: String,
}

impl std::fmt::Display for RefusedAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves only to non-public addresses", self.host)
    }
}

impl std::error::Error for RefusedAddress {}

/// A resolver that keeps only the addresses the policy accepts.
pub struct GuardedResolver {
    policy: Arc<OriginPolicy>,
}

impl GuardedResolver {
    /// A resolver judging addresses by `policy`.
    pub fn new(policy: Arc<OriginPolicy>) -> Self {
        Self { policy }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let local_ok = self.policy.allows_local_addresses(&host);
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let kept: Vec<SocketAddr> = found.filter(|a| local_ok || is_public(a.ip())).collect();
            if kept.is_empty() {
                return Err(Box::new(RefusedAddress { host }) as _);
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}
