//! Bytes as lower-case hex: digests in file names, pins and approval fingerprints, and random
//! ids. One spelling for all of them.

/// `bytes` as lower-case hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
