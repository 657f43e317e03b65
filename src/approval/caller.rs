//! Who runs code. Approvals, journals, approve-all and workers belong to one caller: another
//! caller can neither see nor spend them, even with the same provider key.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::hex::hex;

/// One caller: named by a keyed digest of the provider key egress acts with, the MCP session
/// and the authenticated subject, so that it is the same on every replica that shares the
/// approval key and different for everything else.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Caller {
    id: String,
    /// Who signed in (`SignedIn::who`: issuer, subject and client), for the audit file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signed_in: Option<String>,
    /// Who is behind the caller for fairness (`crate::fair::Principal`): the approval page's
    /// questions are counted by it, not by session, which is free to open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    principal: Option<String>,
    /// A digest of its MCP session, when it has one: the page forgets the session's
    /// undecided questions when its client closes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session: Option<String>,
}

/// What tells callers apart.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallerParts<'a> {
    /// Who egress acts as (see `Egress::keyed_identity`): the provider key, keyed.
    pub provider: u64,
    /// The MCP session, when the transport has one (stdio: the process's one client; HTTP:
    /// `Mcp-Session-Id`). Requests without a session (2026-07-28 over HTTP, `--stateless`)
    /// are told apart only by the provider key and the subject.
    pub session: Option<&'a str>,
    /// Who signed in (`SignedIn::who`: the token's issuer, subject and client), when sign-in
    /// is on.
    pub subject: Option<&'a str>,
}

impl Caller {
    /// The caller with these parts, named under `key` (the approval key).
    pub fn new(key: &[u8], parts: CallerParts<'_>) -> Self {
        let mut hash = Sha256::new();
        let mut feed = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        feed(key);
        feed(&parts.provider.to_le_bytes());
        for part in [parts.session, parts.subject] {
            match part {
                Some(text) => {
                    feed(b"1");
                    feed(text.as_bytes());
                }
                None => feed(b"0"),
            }
        }
        Self {
            id: hex(&hash.finalize()),
            signed_in: parts.subject.map(str::to_owned),
            principal: None,
            session: parts.session.map(session_digest),
        }
    }

    /// The caller with `principal` behind it.
    pub fn behind(mut self, principal: &crate::fair::Principal) -> Self {
        self.principal = Some(principal.to_string());
        self
    }

    /// What the caller's shares are counted by: a digest of its principal, else of its id.
    pub fn share_key(&self) -> String {
        let named = self.principal.as_deref().unwrap_or(&self.id);
        hex(&Sha256::digest(named.as_bytes())[..16])
    }

    /// The digest of its MCP session (see [`session_digest`]), if it has one.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Who signed in, if anyone did (`SignedIn::who`).
    pub fn signed_in(&self) -> Option<&str> {
        self.signed_in.as_deref()
    }

    /// The caller's name, a hex digest: in the audit file and in what approvals bind to.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The caller as a number, for the pool: a worker serves one caller only.
    pub fn worker_identity(&self) -> u64 {
        let mut first = [0u8; 8];
        for (slot, pair) in first.iter_mut().zip(self.id.as_bytes().chunks(2)) {
            let text = std::str::from_utf8(pair).unwrap_or("0");
            *slot = u8::from_str_radix(text, 16).unwrap_or(0);
        }
        u64::from_le_bytes(first)
    }
}

/// What an MCP session is known by in the state store: a digest, not the session id, which
/// lets a client act in the session.
pub fn session_digest(session: &str) -> String {
    hex(&Sha256::digest(session.as_bytes())[..16])
}

/// The digest an approval is bound to: the code, and who runs it. Approving a write of one
/// script approves nothing for another, nor for another caller running the same script.
pub fn code_digest(caller: &Caller, code: &str) -> String {
    let mut hash = Sha256::new();
    hash.update((caller.id.len() as u64).to_le_bytes());
    hash.update(caller.id.as_bytes());
    hash.update(code.as_bytes());
    hex(&hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_differ_by_every_part_and_by_key() {
        let parts = CallerParts {
            provider: 7,
            session: Some("s1"),
            subject: None,
        };
        let base = Caller::new(b"key", parts);
        assert_eq!(base, Caller::new(b"key", parts));
        for other in [
            Caller::new(b"other key", parts),
            Caller::new(
                b"key",
                CallerParts {
                    provider: 8,
                    ..parts
                },
            ),
            Caller::new(
                b"key",
                CallerParts {
                    session: Some("s2"),
                    ..parts
                },
            ),
            Caller::new(
                b"key",
                CallerParts {
                    session: None,
                    ..parts
                },
            ),
            Caller::new(
                b"key",
                CallerParts {
                    subject: Some("s1"),
                    session: None,
                    ..parts
                },
            ),
        ] {
            assert_ne!(base, other);
            assert_ne!(code_digest(&base, "x"), code_digest(&other, "x"));
        }
        assert_ne!(
            base.worker_identity(),
            Caller::new(b"k2", parts).worker_identity()
        );
    }
}
