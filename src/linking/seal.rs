//! Provider tokens at rest: AES-256-GCM under a key from the environment, with the record's
//! name as associated data, so a record copied under another user's name does not open.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::Digest;

/// The encryption key (aws-lc-rs, the crypto rustls and sign-in already build), and a key for
/// record names derived from it.
#[derive(Clone)]
pub struct Sealer(std::sync::Arc<LessSafeKey>, [u8; 32]);

impl Sealer {
    /// The key in `text`: 64 hex digits, or base64 of 32 bytes.
    pub fn from_text(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let bytes = if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|e| e.to_string())?
        } else {
            STANDARD
                .decode(text)
                .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text))
                .map_err(|_| "not 64 hex digits or base64".to_owned())?
        };
        if bytes.len() != 32 {
            return Err(format!("the key is {} bytes, not 32", bytes.len()));
        }
        let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|e| e.to_string())?;
        let mut names = sha2::Sha256::new();
        sha2::Digest::update(&mut names, b"sdkbox link record names\n");
        sha2::Digest::update(&mut names, &bytes);
        Ok(Self(
            std::sync::Arc::new(LessSafeKey::new(key)),
            sha2::Digest::finalize(names).into(),
        ))
    }

    /// `plain` encrypted for the record `name`: base64 of a random nonce, the ciphertext and
    /// its tag.
    pub fn seal(&self, name: &str, plain: &[u8]) -> Result<String, String> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| e.to_string())?;
        let mut sealed = plain.to_vec();
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(name.as_bytes()),
                &mut sealed,
            )
            .map_err(|_| "cannot encrypt".to_owned())?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(STANDARD.encode(out))
    }

    /// A record's name for `text` (a user, a link id): keyed, so the store's names cannot be
    /// matched against guessed users without the key.
    pub fn name(&self, text: &str) -> String {
        let mut hash = sha2::Sha256::new();
        sha2::Digest::update(&mut hash, self.1);
        sha2::Digest::update(&mut hash, text.as_bytes());
        crate::hex::hex(&sha2::Digest::finalize(hash))
    }

    /// The plain text of `sealed`, if it was sealed with this key for `name`.
    pub fn open(&self, name: &str, sealed: &str) -> Option<Vec<u8>> {
        let bytes = STANDARD.decode(sealed).ok()?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let (nonce, rest) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut rest = rest.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Aad::from(name.as_bytes()), &mut rest)
            .ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_opens_only_with_its_key_under_its_name() {
        let sealer = Sealer::from_text(&"01".repeat(32)).unwrap();
        let sealed = sealer.seal("link:alice", b"token-123").unwrap();
        assert!(!sealed.contains("token-123"));
        assert_eq!(sealer.open("link:alice", &sealed).unwrap(), b"token-123");
        assert!(sealer.open("link:bob", &sealed).is_none());
        let other = Sealer::from_text(&"02".repeat(32)).unwrap();
        assert!(other.open("link:alice", &sealed).is_none());
        assert_ne!(sealer.seal("link:alice", b"token-123").unwrap(), sealed);
    }

    #[test]
    fn keys_are_32_bytes() {
        assert!(Sealer::from_text(&STANDARD.encode([7u8; 32])).is_ok());
        assert!(Sealer::from_text("short").is_err());
        assert!(Sealer::from_text(&"ab".repeat(16)).is_err());
    }
}
