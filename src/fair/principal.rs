//! Who is behind a request, for fairness: the signed-in user (subject and client at their
//! issuer); else the peer address (with a shared bearer token, the token says who may come
//! in, the address tells them apart). Never a session, and never a provider key a client
//! sends: both are free to make up, so each would make a caller as many callers as it likes.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

/// One caller, as fairness counts them. Cheap to clone; its text is for logs and keys
/// (secrets appear only as a short digest).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(Arc<str>);

impl Principal {
    /// A signed-in user (`SignedIn::who`).
    pub fn user(who: &str) -> Self {
        Self(format!("user {who}").into())
    }

    /// A peer by its address. An IPv6 peer is its /64, which one host usually holds whole.
    pub fn peer(address: IpAddr) -> Self {
        let address = match address {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let mut octets = v6.octets();
                    octets[8..].fill(0);
                    IpAddr::V6(octets.into())
                }
            },
            v4 => v4,
        };
        Self(format!("peer {address}").into())
    }

    /// The one client of a process served over standard input and output.
    pub fn stdio() -> Self {
        Self("stdio".into())
    }

    /// The principal as text (`user ...`, `peer ...`, `stdio`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Principal({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_name_users_and_peers_apart_and_a_v6_peer_by_its_64() {
        assert_ne!(
            Principal::user("10.0.0.1"),
            Principal::peer([10, 0, 0, 1].into())
        );
        let one: IpAddr = "2001:db8::1".parse().unwrap();
        let other: IpAddr = "2001:db8::ffff".parse().unwrap();
        assert_eq!(Principal::peer(one), Principal::peer(other));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(
            Principal::peer(mapped),
            Principal::peer("10.0.0.1".parse().unwrap())
        );
        assert_ne!(
            Principal::peer("10.0.0.1".parse().unwrap()),
            Principal::peer("10.0.0.2".parse().unwrap())
        );
    }
}
