//! The address of the client behind a request: the connection's peer, or, when the peer is a
//! proxy the operator trusts (`--trusted-proxy`), the address it says it forwarded for
//! (`X-Forwarded-For`, read from the right, past the trusted proxies). Fairness counts
//! callers without sign-in by this address, and sign-in's per-peer limits use it: behind an
//! ingress, without it, every caller would be the ingress.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::listen::Peer;

/// Hops of `X-Forwarded-For` read, from the right, at most.
const MAX_HOPS: usize = 32;

/// The client's address, in a request's extensions (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub IpAddr);

/// Address ranges of proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<(IpAddr, u8)>);

impl TrustedProxies {
    /// Reads ranges like `10.0.0.0/8`, `fd00::/8` or a lone address.
    pub fn parse(ranges: &[String]) -> Result<Self, String> {
        let mut parsed = Vec::new();
        for range in ranges.iter().flat_map(|r| r.split(',')).map(str::trim) {
            let (address, bits) = range.split_once('/').unwrap_or((range, ""));
            let address: IpAddr = address.parse().map_err(|_| {
                format!("--trusted-proxy `{range}` is not an address range like 10.0.0.0/8")
            })?;
            let most = if address.is_ipv4() { 32 } else { 128 };
            let bits = match bits {
                "" => most,
                bits => bits
                    .parse::<u8>()
                    .ok()
                    .filter(|b| *b <= most)
                    .ok_or_else(|| format!("--trusted-proxy `{range}`: a prefix of 0 to {most}"))?,
            };
            parsed.push((address, bits));
        }
        Ok(Self(parsed))
    }

    /// Whether `address` is one of the trusted proxies.
    pub fn trusts(&self, address: IpAddr) -> bool {
        let address = match address {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
            v4 => v4,
        };
        self.0
            .iter()
            .any(|(range, bits)| in_range(address, *range, *bits))
    }

    /// The client behind a connection from `peer` whose request says `forwarded_for`.
    pub fn client(&self, peer: IpAddr, forwarded_for: Option<&str>) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        for hop in forwarded_for.unwrap_or_default().rsplit(',').take(MAX_HOPS) {
            let Ok(hop) = hop.trim().parse::<IpAddr>() else {
                // Unreadable: the last address a trusted proxy vouched for stands.
                return client;
            };
            client = hop;
            if !self.trusts(hop) {
                break;
            }
        }
        client
    }
}

fn in_range(address: IpAddr, range: IpAddr, bits: u8) -> bool {
    let mask = |bits: u8, width: u32| -> u128 {
        match bits {
            0 => 0,
            b => u128::MAX << (width - u32::from(b)),
        }
    };
    match (address, range) {
        (IpAddr::V4(a), IpAddr::V4(r)) => {
            let m = mask(bits, 32);
            (u128::from(u32::from(a)) & m) == (u128::from(u32::from(r)) & m)
        }
        (IpAddr::V6(a), IpAddr::V6(r)) => {
            let m = mask(bits, 128);
            (u128::from(a) & m) == (u128::from(r) & m)
        }
        _ => false,
    }
}

/// Every line of `X-Forwarded-For`, in order, as one list (a proxy may add its own line
/// after the client's); a line that is not text reads as one unreadable hop.
fn forwarded_for(headers: &axum::http::HeaderMap) -> Option<String> {
    let lines: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .map(|v| v.to_str().unwrap_or("?"))
        .collect();
    (!lines.is_empty()).then(|| lines.join(","))
}

/// Puts the request's [`ClientAddress`] in its extensions.
pub async fn client_address(
    State(trusted): State<Arc<TrustedProxies>>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<Peer>()
        .map_or(IpAddr::from([127, 0, 0, 1]), |peer| peer.0.ip());
    let forwarded = forwarded_for(request.headers());
    let client = trusted.client(peer, forwarded.as_deref());
    request.extensions_mut().insert(ClientAddress(client));
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_addresses_are_believed_only_from_trusted_proxies() {
        let trusted = TrustedProxies::parse(&["10.0.0.0/8".into(), "fd00::/8".into()]).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // An untrusted peer says what it likes: its own address counts.
        assert_eq!(
            trusted.client(ip("203.0.113.9"), Some("1.2.3.4")),
            ip("203.0.113.9")
        );
        // A trusted proxy: the first address from the right it does not trust.
        assert_eq!(
            trusted.client(ip("10.1.2.3"), Some("6.6.6.6, 198.51.100.7, 10.9.9.9")),
            ip("198.51.100.7")
        );
        assert_eq!(trusted.client(ip("10.1.2.3"), None), ip("10.1.2.3"));
        assert_eq!(trusted.client(ip("10.1.2.3"), Some("junk")), ip("10.1.2.3"));
        assert!(trusted.trusts(ip("::ffff:10.0.0.1")));
        assert!(trusted.trusts(ip("fd12::1")));
        assert!(!trusted.trusts(ip("11.0.0.1")));
        // The client's own line first, the proxy's after it: the proxy's is the one read.
        let mut headers = axum::http::HeaderMap::new();
        headers.append("x-forwarded-for", "6.6.6.6".parse().unwrap());
        headers.append("x-forwarded-for", "198.51.100.7".parse().unwrap());
        let forwarded = forwarded_for(&headers);
        assert_eq!(
            trusted.client(ip("10.1.2.3"), forwarded.as_deref()),
            ip("198.51.100.7")
        );
        assert!(TrustedProxies::parse(&["10.0.0.0/33".into()]).is_err());
        assert!(TrustedProxies::parse(&["nonsense".into()]).is_err());
        assert!(
            TrustedProxies::default().client(ip("10.0.0.1"), Some("1.1.1.1")) == ip("10.0.0.1")
        );
    }
}
