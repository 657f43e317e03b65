//! Bytes that cross sdkbox as they are: a response body that is not UTF-8 text, and the
//! files a script hands the SDK (`Blob`, `File`, `Uint8Array`). In JSON (the worker
//! protocol's headers, the journal of a write's response) they are base64; everywhere else
//! they are the bytes themselves.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bytes, written as base64 in JSON.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Binary(pub Vec<u8>);

impl Binary {
    /// Them as text, when they are UTF-8.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// Their base64 text (standard alphabet, padded): how they are checked for the secret
    /// and how MCP carries a file.
    pub fn base64(&self) -> String {
        STANDARD.encode(&self.0)
    }
}

impl std::ops::Deref for Binary {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl From<Vec<u8>> for Binary {
    fn from(bytes: Vec<u8>) -> Self {
        Binary(bytes)
    }
}

impl From<String> for Binary {
    fn from(text: String) -> Self {
        Binary(text.into_bytes())
    }
}

impl std::fmt::Debug for Binary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Binary({} bytes)", self.0.len())
    }
}

impl Serialize for Binary {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.base64())
    }
}

impl<'de> Deserialize<'de> for Binary {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        STANDARD
            .decode(text.as_bytes())
            .map(Binary)
            .map_err(serde::de::Error::custom)
    }
}

/// A file a script handed over (a `File`, a `Blob`, bytes): where the spec takes a file,
/// the SDK sends it as a multipart part of its own or as the whole body.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FilePart {
    /// Its name, for a `File`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its media type, when the script gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The bytes.
    pub bytes: Binary,
}

/// The key of the object that stands for a file in an SDK call's parameters, or in an
/// `api.request` body left to sdkbox: `{"$sdkbox_file": 0}` is the call's first file.
pub const FILE_MARK: &str = "$sdkbox_file";

/// The file `value` stands for (see [`FILE_MARK`]), by its index.
pub fn file_index(value: &serde_json::Value) -> Option<usize> {
    let map = value.as_object()?;
    if map.len() != 1 {
        return None;
    }
    map.get(FILE_MARK)?.as_u64().map(|n| n as usize)
}

/// Whether a file stands anywhere in `value` (a JSON or form body cannot carry one).
pub fn holds_file(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Object(map) => {
            file_index(value).is_some() || map.values().any(holds_file)
        }
        serde_json::Value::Array(items) => items.iter().any(holds_file),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_go_through_json_as_base64_exactly() {
        let all: Vec<u8> = (0..=255).collect();
        let text = serde_json::to_string(&Binary(all.clone())).unwrap();
        assert!(text.starts_with("\"AAECAwQF"), "{text}");
        let back: Binary = serde_json::from_str(&text).unwrap();
        assert_eq!(back.0, all);
        assert!(serde_json::from_str::<Binary>("\"not base64!\"").is_err());
    }

    #[test]
    fn a_file_mark_is_an_object_with_only_the_index() {
        assert_eq!(file_index(&serde_json::json!({"$sdkbox_file": 2})), Some(2));
        assert_eq!(
            file_index(&serde_json::json!({"$sdkbox_file": 2, "x": 1})),
            None
        );
        assert!(holds_file(&serde_json::json!({"a": [{"$sdkbox_file": 0}]})));
        assert!(!holds_file(&serde_json::json!({"a": [{"file": 0}]})));
    }
}
