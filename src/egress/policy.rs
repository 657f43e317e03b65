//! Which origins and addresses a script may reach. Deny by default.
//!
//! An origin is (scheme, host, port), compared exactly. Addresses are judged after name
//! resolution: private, loopback, link-local, metadata and other non-public addresses are
//! refused unless the operator configured that very host (an IP literal or `localhost`),
//! as for the local demo provider.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

use super::EgressError;

/// The allowed origins of one provider.
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    origins: Vec<Origin>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: Host<String>,
    port: u16,
}

impl Origin {
    fn of(url: &Url) -> Option<Self> {
        Some(Self {
            scheme: url.scheme().to_owned(),
            host: url.host()?.to_owned(),
            port: url.port_or_known_default()?,
        })
    }

    fn display(&self) -> String {
        let default = match self.scheme.as_str() {
            "https" => 443,
            _ => 80,
        };
        if self.port == default {
            format!("{}://{}", self.scheme, self.host)
        } else {
            format!("{}://{}:{}", self.scheme, self.host, self.port)
        }
    }

    /// Whether the operator named a local host here, which makes local addresses fair game.
    fn is_local(&self) -> bool {
        match &self.host {
            Host::Domain(name) => is_localhost_name(name),
            Host::Ipv4(ip) => !is_public(IpAddr::V4(*ip)),
            Host::Ipv6(ip) => !is_public(IpAddr::V6(*ip)),
        }
    }
}

impl OriginPolicy {
    /// Builds the policy from the provider's URLs; fails on a URL without an http(s) origin.
    pub fn new<'a>(urls: impl IntoIterator<Item = &'a Url>) -> Result<Self, EgressError> {
        let mut origins = Vec::new();
        for url in urls {
            if !matches!(url.scheme(), "http" | "https") {
                return Err(EgressError::Setup(format!(
                    "allowed origin `{url}` must use http or https"
                )));
            }
            let origin = Origin::of(url)
                .ok_or_else(|| EgressError::Setup(format!("allowed origin `{url}` has no host")))?;
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        Ok(Self { origins })
    }

    /// The allowed origins, for messages: `https://api.example.com, http://127.0.0.1:8080`.
    pub fn describe(&self) -> String {
        let list: Vec<String> = self.origins.iter().map(Origin::display).collect();
        list.join(", ")
    }

    /// Accepts a URL only if it has no credentials and its origin is allowed.
    pub fn check(&self, url: &Url) -> Result<(), EgressError> {
        if !url.username().is_empty() || url.password().is_some() {
            let mut shown = url.clone();
            let _ = shown.set_username("");
            let _ = shown.set_password(None);
            return Err(EgressError::UserInfo {
                url: shown.to_string(),
            });
        }
        let refused = || EgressError::Disallowed {
            origin: url.origin().ascii_serialization(),
            allowed: self.describe(),
        };
        let origin = Origin::of(url).ok_or_else(refused)?;
        if self.origins.contains(&origin) {
            Ok(())
        } else {
            Err(refused())
        }
    }

    /// Whether addresses that `host` resolves to may be non-public.
    pub fn allows_local_addresses(&self, host: &str) -> bool {
        self.origins
            .iter()
            .any(|o| o.is_local() && o.host.to_string().eq_ignore_ascii_case(host))
    }
}

fn is_localhost_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// Whether an address is on the public internet: not loopback, private, link-local,
/// shared (CGNAT, where some clouds keep metadata), multicast, documentation or reserved.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    let shared = a == 100 && (64..128).contains(&b);
    let benchmark = a == 198 && (b == 18 || b == 19);
    let protocol = a == 192 && b == 0 && ip.octets()[2] == 0;
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || a >= 240
        || shared
        || benchmark
        || protocol)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let nat64 = ip.segments()[0] == 0x64 && ip.segments()[1] == 0xff9b;
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_unique_local()
        || ip.is_unicast_link_local()
        || nat64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn origins_match_exactly() {
        let base = url("https://api.example.com/v1");
        let policy = OriginPolicy::new([&base]).unwrap();
        assert!(
            policy
                .check(&url("https://api.example.com/v1/x?y=1"))
                .is_ok()
        );
        assert!(policy.check(&url("https://api.example.com:443/")).is_ok());
        for refused in [
            "http://api.example.com/",
            "https://api.example.com:8443/",
            "https://evil.example.com/",
            "https://api.example.com.evil.com/",
            "http://169.254.169.254/latest/meta-data",
        ] {
            let err = policy.check(&url(refused)).unwrap_err();
            assert!(matches!(err, EgressError::Disallowed { .. }), "{refused}");
            assert!(err.to_string().contains("https://api.example.com"), "{err}");
        }
    }

    #[test]
    fn credentials_in_urls_are_refused() {
        let base = url("https://api.example.com/");
        let policy = OriginPolicy::new([&base]).unwrap();
        let err = policy
            .check(&url("https://api.example.com@evil.com/"))
            .unwrap_err();
        assert!(matches!(err, EgressError::UserInfo { .. }), "{err}");
        assert!(!err.to_string().contains("api.example.com@"), "{err}");
    }

    #[test]
    fn local_addresses_only_for_local_origins() {
        let a = url("http://127.0.0.1:8080");
        let b = url("https://api.example.com");
        let policy = OriginPolicy::new([&a, &b]).unwrap();
        assert!(policy.allows_local_addresses("127.0.0.1"));
        assert!(!policy.allows_local_addresses("api.example.com"));
        let local = url("http://localhost:3000");
        assert!(
            OriginPolicy::new([&local])
                .unwrap()
                .allows_local_addresses("localhost")
        );
    }

    #[test]
    fn address_classes() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1", "1.1.1.1"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }
}
